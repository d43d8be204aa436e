"""Network egress (docs/SECURITY.md, "Network egress"): open and allow
modes against a fake internet (networld.py) in network namespaces the test
makes. Every server there logs what reaches it, so a refused destination
is proved refused by its log staying empty, not only by the client's
error.
"""
import json
import os
import signal
import subprocess
import time

import pytest

import helpers
from conftest import BUILD
from daemon import Daemon
from networld import CURL, REFUSED, SITE, World

DAEMON_PORT = 18080  # agentboxd's TCP listener, on the host's address in the test's world
# A capped link: RATE_MIB each way at RATE_MBIT takes at least RATE_MIN_S, whatever the
# machine (a token bucket never sends faster; its burst is 64 KiB, its queue 50 ms).
RATE_MBIT, RATE_MIB = 16, 4
RATE_MIN_S = (RATE_MIB * 2**20 - (64 << 10) - RATE_MBIT * 125000 * 0.05) / (RATE_MBIT * 125000)
IFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("world"), big_mib=RATE_MIB)
    try:
        w.build()
        yield w
    finally:
        w.destroy()


@pytest.fixture
def daemon(world, tmp_path):
    d = Daemon(tmp_path, "--pool", "2", "--insecure-listen", "--listen",
               f"198.51.100.2:{DAEMON_PORT}",
               "--resolver", "198.51.100.1")
    d.prefix = world.netns(world.host)
    d.start()
    yield d
    d.stop()


def sh(d, sid, script):
    r = d.exec(sid, ["sh", "-c", script])
    return r["stdout"], r["stderr"], r["exit_code"]


def pooled(d):
    """The warm pool's sandboxes: those with a directory and no record a user sees."""
    shown = {s["id"] for s in d.sandboxes()}
    return [p.name for p in (d.state / "sandboxes").iterdir() if p.name not in shown] \
        if (d.state / "sandboxes").exists() else []


def pool_ready(d):
    """Sandboxes of a pool of 2 that are ready: the keeper makes them one at a time, so
    once the second has a directory, the first is ready (a directory comes before)."""
    assert helpers.wait_until(lambda: len(pooled(d)) >= 2, 30, 0.05), "the pool never filled"
    return pooled(d)


def test_open_sandbox_reaches_the_internet_and_nothing_else(world, daemon):
    ready = pool_ready(daemon)
    sid = daemon.create_sandbox(network={"mode": "open"})
    assert sid in ready, "a networked create did not come from the pool"
    status, body = daemon.request("GET", f"/v1/sandboxes/{sid}")
    assert body["network"] == {"mode": "open"}
    status, net = daemon.request("GET", f"/v1/sandboxes/{sid}/network")
    assert status == 200 and net["mode"] == "open" and net["bytes_in"] == 0, net
    out, err, _ = sh(daemon, sid, IFACES)
    assert out.split() == ["eth0", "lo"], (out, err)
    out, err, code = sh(daemon, sid, " ".join(CURL) + f" http://{SITE}/open-page")
    assert out == "200", (out, err, code)
    seen = [e for e in world.seen() if e.get("http") == "/open-page"]
    assert len(seen) == 1 and seen[0]["from"] == "198.51.100.2"  # masqueraded
    # agentbox info lists the link, and what it carried
    info = subprocess.run([*world.netns(world.host), os.path.join(BUILD, "src", "cli", "agentbox"),
                           "info"], capture_output=True, text=True).stdout
    [link] = [line.split() for line in info.splitlines() if line.strip().startswith("abo")]
    assert link[1] == "open" and int(link[3]) > 200 and int(link[6]) > 50, info

    # names resolve through the sandbox's resolver, outside it: any public answer, and
    # never a refused one (rebind.test's private address is left out)
    out, err, _ = sh(daemon, sid, "getent ahostsv4 site7.test | head -1; "
                     "getent hosts rebind.test; echo \" rc=$?\"; "
                     + " ".join(CURL) + " http://site7.test/by-name")
    assert out.split() == ["203.0.113.10", "STREAM", "site7.test", "rc=2", "200"], (out, err)
    # every refused destination fails at once: refused (curl 7: a reset came
    # back), not dropped, which under curl's -m 5 would be a timeout (28) at
    # 5 s. curl's status tells the two apart; the clock is not needed, and
    # the one bound left is liveness (the exec's own 30 s)
    for name, addr in REFUSED.items():
        t = time.monotonic()
        out, err, code = sh(daemon, sid, " ".join(CURL) + f" http://{addr}/refused-{name}; "
                            "echo \" rc=$?\"")
        assert out.strip().endswith(" rc=7"), (name, out, err)
        assert time.monotonic() - t < 30, name
    # the gateway, the host's end of the link, is the host too
    gw = daemon.exec(sid, ["python3", "-c", OWN_ADDRESS])["stdout"].strip().split(".")
    gw = ".".join(gw[:3] + [str(int(gw[3]) - 1)])
    out, err, code = sh(daemon, sid, " ".join(CURL) + f" http://{gw}/refused-gw; echo \" rc=$?\"")
    assert out.strip().endswith(" rc=7"), (out, err)
    assert not [e for e in world.seen() if "refused" in e.get("http", "")]
    # the daemon's own port on the host, and the gateway's relay ports: refused too
    for port in (DAEMON_PORT, 15001, 15053):
        out, err, _ = sh(daemon, sid, " ".join(CURL) + f" http://198.51.100.2:{port}/; "
                         f"{' '.join(CURL)} http://{gw}:{port}/; echo \" rc=$?\"")
        assert out.strip().endswith("000 rc=7"), (port, out, err)
    # UDP to the refused addresses goes nowhere (the world's canary listens on all of them)
    for name, addr in REFUSED.items():
        r = daemon.exec(sid, ["python3", "-c", UDP_TO, addr, f"udp-{name}"])
        assert r["exit_code"] == 0, r
    r = daemon.exec(sid, ["python3", "-c", UDP_TO, SITE, "udp-public"])
    assert helpers.wait_until(lambda: any(e.get("udp") == "udp-public" for e in world.seen()),
                              5, 0.05)
    assert not [e for e in world.seen() if e.get("udp", "").startswith("udp-")
                and e["udp"] != "udp-public"]
    # no ICMP (no ping socket for the sandbox's group), no IPv6 route (fd00:ec2::254),
    # and its own link is not its to change (no netlink socket at all)
    r = daemon.exec(sid, ["python3", "-c", NO_ICMP_NO_V6])
    assert r["stdout"].split() == ["icmp-refused", "v6-unreachable"], r
    out, err, code = sh(daemon, sid, "ip link set eth0 down; echo \" rc=$?\"; "
                        "ip addr add 10.231.99.99/32 dev eth0; echo \" rc=$?\"")
    assert out.split() == ["rc=2", "rc=2"] or "rc=0" not in out, (out, err)
    assert sh(daemon, sid, " ".join(CURL) + f" http://{SITE}/still-up")[0] == "200"

    # no sandbox without a network has one
    plain = daemon.create_sandbox()
    out, _, _ = sh(daemon, plain, IFACES + "; " + " ".join(CURL)
                   + f" http://{SITE}/from-none; echo \" rc=$?\"")
    assert out.split()[0] == "lo" and "eth0" not in out and out.strip().endswith("rc=7"), out
    assert not [e for e in world.seen() if e.get("http") == "/from-none"]


def test_open_task_and_fresh_sandbox(world, daemon):
    tid = daemon.submit(command=["sh", "-c", " ".join(CURL) + f" http://{SITE}/from-task"],
                        network={"mode": "open"})
    assert helpers.wait_until(lambda: daemon.task(tid)["status"] not in ("queued", "running"),
                              60, 0.1)
    t = daemon.task(tid)
    assert t["status"] == "succeeded", t
    assert t["network"] == {"mode": "open"}
    assert [e for e in world.seen() if e.get("http") == "/from-task"]
    # limits other than the pool's: a sandbox started with its network
    sid = daemon.create_sandbox(network={"mode": "open"}, limits={"memory_mb": 256})
    out, err, _ = sh(daemon, sid, " ".join(CURL) + f" http://{SITE}/from-fresh")
    assert out == "200", (out, err)


UDP_TO = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(sys.argv[2].encode(), (sys.argv[1], 9999))
except OSError:
    pass
"""

NO_ICMP_NO_V6 = r"""
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    print("icmp-allowed")
except OSError:
    print("icmp-refused")
try:
    socket.create_connection(("fd00:ec2::254", 80), timeout=3)
    print("v6-reached")
except OSError as e:
    print("v6-unreachable" if e.errno in (101, 113, 99) else f"v6-{e.errno}")
"""

FREEBIND = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 15, 1)  # IP_FREEBIND: bind an address that is not ours
s.bind((sys.argv[1], 0))
try:
    s.sendto(sys.argv[2].encode(), ("%s", 9999))
    print("sent")
except OSError as e:
    print("refused", e.errno)
""" % SITE

OWN_ADDRESS = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("%s", 9999))
print(s.getsockname()[0])
""" % SITE


def test_two_sandboxes_cannot_reach_spoof_or_sniff(world, daemon):
    a = daemon.create_sandbox(network={"mode": "open"})
    b = daemon.create_sandbox(network={"mode": "open"})
    addr_a = daemon.exec(a, ["python3", "-c", OWN_ADDRESS])["stdout"].strip()
    addr_b = daemon.exec(b, ["python3", "-c", OWN_ADDRESS])["stdout"].strip()
    assert addr_a.startswith("10.231.") and addr_b.startswith("10.231.") and addr_a != addr_b
    # A serves on 8080 (seen from A itself), and B is refused at once
    status, body = daemon.request("POST", f"/v1/sandboxes/{a}/exec",
                                  {"command": ["python3", "-m", "http.server", "8080"],
                                   "background": True})
    assert status == 202, body
    assert helpers.wait_until(lambda: sh(daemon, a, " ".join(CURL) + f" http://{addr_a}:8080/")[0]
                              == "200", 10, 0.1)
    out, err, _ = sh(daemon, b, " ".join(CURL) + f" http://{addr_a}:8080/; echo \" rc=$?\"")
    assert out.strip().endswith(" rc=7"), (out, err)

    # spoofing: a datagram with B's source (or any other) never arrives, whether the
    # sandbox's kernel refuses to send it or the host's guard drops it; its own does
    for src, tag in ((addr_b, "spoof-b"), ("203.0.113.99", "spoof-public"), (addr_a, "own")):
        r = daemon.exec(a, ["python3", "-c", FREEBIND, src, tag])
        assert r["exit_code"] == 0, (r["stdout"], r["stderr"])
        if tag == "own":
            assert r["stdout"].strip() == "sent", r["stdout"]
    helpers.wait_until(lambda: any(e.get("udp") == "own" for e in world.seen()), 5, 0.05)
    time.sleep(0.2)  # a spoofed datagram sent before the own one would be in by now
    udp = [e["udp"] for e in world.seen() if "udp" in e]
    assert "spoof-b" not in udp and "spoof-public" not in udp, udp

    # sniffing: no packet socket inside
    r = daemon.exec(a, ["python3", "-c", "import socket; socket.socket(socket.AF_PACKET, "
                        "socket.SOCK_RAW, socket.htons(3))"])
    assert r["exit_code"] != 0 and "PermissionError" in r["stderr"], r


def test_links_and_table_come_and_go(world, tmp_path):
    # the earlier tests' sandboxes are gone (their namespaces go a moment after them), and
    # with them any reason for their daemons' table: this daemon starts with none
    assert helpers.wait_until(lambda: not world.host_links(), 10, 0.05), world.host_links()
    for family in ("inet", "arp"):
        subprocess.run([*world.netns(world.host), "nft", "delete", "table", family, "agentbox"],
                       capture_output=True)
    d = Daemon(tmp_path, "--pool", "0", "--resolver", "198.51.100.1")
    d.prefix = world.netns(world.host)
    # a link an agentbox from before device groups made (its sandbox outlived that
    # daemon): group 0, which no rule matches until this daemon adopts it
    subprocess.run(["ip", "-n", world.host, "link", "add", "abo16000", "type", "veth", "peer",
                    "name", "old16000"], check=True)
    d.start()
    try:
        assert "agentbox" not in world.tables()  # nothing until a network is asked for
        assert links(world)["abo16000"][0] == 0
        sid = d.create_sandbox(network={"mode": "open"})
        assert "table inet agentbox" in world.tables()
        assert "table arp agentbox" in world.tables()
        assert links(world)["abo16000"][0] == GROUP["open"], links(world)
        subprocess.run(["ip", "-n", world.host, "link", "del", "abo16000"], check=True)
        assert len(world.host_links()) == 1
        # SIGKILL: the sandbox keeps its network; a new daemon takes the table over
        d.kill()
        d.start()
        out, err, _ = sh(d, sid, " ".join(CURL) + f" http://{SITE}/after-kill")
        assert out == "200", (out, err)
        # its end takes its link away
        assert d.request("DELETE", f"/v1/sandboxes/{sid}")[0] == 200
        helpers.wait_until(lambda: not world.host_links(), 10, 0.05)
        d.stop()
        assert "agentbox" not in world.tables()  # a clean stop with nothing left
    finally:
        if d.proc and d.proc.poll() is None:
            d.stop()


# ---- allow mode ------------------------------------------------------------

ALLOW = [f"site{i}.test" for i in range(1, 31)] + ["rebind.test", "mixed.test", "meta.test"]


@pytest.fixture
def allow_daemon(world, tmp_path):
    d = Daemon(tmp_path, "--pool", "2", "--resolver", "198.51.100.1", "--insecure-listen",
               "--listen", f"198.51.100.2:{DAEMON_PORT}")
    d.prefix = world.netns(world.host)
    d.start()
    yield d
    d.stop()


def fetch(d, sid, url, *opts):
    """curl url in the sandbox: (HTTP code, curl's exit status, its stderr)."""
    r = d.exec(sid, ["sh", "-c", " ".join([*CURL, "-k", *opts, f"'{url}'"])
                     + "; echo \" rc=$?\""])
    code, _, rc = r["stdout"].strip().rpartition(" rc=")
    return code.strip(), int(rc), r["stderr"]


def network_log(d, sid):
    path = d.state / "sandboxes" / sid / "network.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_allow_sandbox_reaches_its_list_and_nothing_else(world, allow_daemon):
    d = allow_daemon
    ready = pool_ready(d)
    sid = d.create_sandbox(network={"mode": "allow", "allow": ALLOW})
    assert sid in ready, "an allow-mode create did not come from the pool"
    env = d.exec(sid, ["sh", "-c", "echo $HTTPS_PROXY"])["stdout"].strip()
    assert env == "http://10.231.0.1:15001"

    # transparent (no proxy settings) and through HTTP(S)_PROXY; HTTP and HTTPS
    for how, opts in (("transparent", ["--noproxy", "'*'"]), ("proxy", [])):
        for scheme, n in (("http", 1), ("https", 2)):
            code, rc, err = fetch(d, sid, f"{scheme}://site{n}.test/{how}-{scheme}", *opts)
            assert (code, rc) == ("200", 0), (how, scheme, err)
    seen = world.seen()
    for how in ("transparent", "proxy"):
        [h] = [e for e in seen if e.get("http") in (f"/{how}-http", f"http://site1.test/{how}-http")]
        assert h["host"] == "site1.test" and h["from"] == "198.51.100.2"
        [s] = [e for e in seen if e.get("https") == f"/{how}-https"]
        assert s["sni"] == "site2.test"  # spliced, not terminated: the client's own TLS

    # an unlisted name does not resolve; the upstream resolver is never asked
    code, rc, err = fetch(d, sid, "http://forbidden.test/by-name", "--noproxy", "'*'")
    assert rc == 6, (code, rc, err)  # could not resolve
    assert not [e for e in world.seen() if e.get("dns") == "forbidden.test"]
    # its address dialled directly: the Host (or SNI) is checked, and refused at once
    resolve = ["--resolve", "forbidden.test:80:203.0.113.20", "--resolve",
               "forbidden.test:443:203.0.113.20", "--noproxy", "'*'"]
    code, rc, err = fetch(d, sid, "http://forbidden.test/by-address", *resolve)
    assert code == "403", (code, rc, err)
    code, rc, err = fetch(d, sid, "https://forbidden.test/by-address", *resolve)
    assert rc in (35, 56) and code == "000", (code, rc, err)  # reset in the handshake
    code, rc, err = fetch(d, sid, "http://forbidden.test/through-proxy")
    assert code == "403", (code, rc, err)
    # a listed name on a port not listed
    code, rc, err = fetch(d, sid, "http://site3.test:8080/port", "--noproxy", "'*'")
    assert code == "403", (code, rc, err)

    # DNS rebinding: a listed name that resolves to a private address gets no
    # answer, and the proxy resolves for itself, whatever the client dialled
    code, rc, err = fetch(d, sid, "http://rebind.test/by-name", "--noproxy", "'*'")
    assert rc == 6, (code, rc, err)
    code, rc, err = fetch(d, sid, "http://rebind.test/by-address", "--noproxy", "'*'",
                          "--resolve", "rebind.test:80:203.0.113.10")
    assert code == "403", (code, rc, err)
    code, rc, err = fetch(d, sid, "http://meta.test/", "--noproxy", "'*'",
                          "--resolve", "meta.test:80:203.0.113.10")
    assert code == "403", (code, rc, err)
    # a name with a refused address among others: only the public one is used
    code, rc, err = fetch(d, sid, "http://mixed.test/mixed", "--noproxy", "'*'")
    assert (code, rc) == ("200", 0), err

    # addresses, not names: the metadata service, a private one, the host's, the daemon's port
    for name, addr in {**REFUSED, "daemon": f"198.51.100.2:{DAEMON_PORT}"}.items():
        code, rc, err = fetch(d, sid, f"http://{addr}/refused-{name}", "--noproxy", "'*'")
        assert code == "403", (name, code, rc, err)
        code, rc, err = fetch(d, sid, f"https://{addr}/refused-{name}", "--noproxy", "'*'")
        assert rc != 0 and code == "000", (name, code, rc, err)
    # UDP other than DNS goes nowhere
    own = d.exec(sid, ["python3", "-c", OWN_ADDRESS])["stdout"].strip()
    r = d.exec(sid, ["python3", "-c", FREEBIND, own, "allow-udp"])
    assert r["exit_code"] == 0, r
    time.sleep(0.2)
    assert not [e for e in world.seen() if e.get("udp") == "allow-udp"]
    assert not [e for e in world.seen()
                if "by-address" in json.dumps(e) or "refused-" in json.dumps(e)
                or e.get("http") == "/" or "rebind" in str(e.get("host"))]

    # every refusal is an event, with its reason
    events = network_log(d, sid)
    reasons = {(e.get("host"), e["reason"]) for e in events}
    assert ("forbidden.test", "not_allowed") in reasons, events
    assert ("rebind.test", "refused_address") in reasons, events
    assert ("site3.test", "not_allowed") in reasons, events
    assert all(e["type"] == "egress_denied" and e["time"] > 0 for e in events)
    status, net = d.request("GET", f"/v1/sandboxes/{sid}/network")
    assert status == 200, net
    assert net["mode"] == "allow" and net["denied_total"] == len(events)
    assert [(e["host"], e["reason"]) for e in net["denied"]] == \
        [(e.get("host"), e["reason"]) for e in events]
    assert net["bytes_in"] > 4 * 200 and net["bytes_out"] > 4 * 100, net  # four pages, each way
    # once it has ended, its link and its files are gone
    assert d.request("DELETE", f"/v1/sandboxes/{sid}")[0] == 200
    status, net = d.request("GET", f"/v1/sandboxes/{sid}/network")
    assert status == 200 and net["bytes_in"] is None and net["denied_total"] == 0, net


def test_allow_task_fetches_thirty_sites(world, allow_daemon):
    script = ("set -e; for i in $(seq 1 30); do "
              + " ".join(CURL) + " -k https://site$i.test/task-$i >/dev/null; "
              + " ".join(CURL) + " http://site$i.test/task-$i >/dev/null; "
              "echo \"{\\\"page\\\": $i}\" > $AGENTBOX_PROGRESS; done; "
              "if " + " ".join(CURL) + " -f http://forbidden.test/; then exit 9; fi; "
              "if getent hosts forbidden.test; then exit 8; fi; echo done")
    tid = allow_daemon.submit(command=["sh", "-c", script],
                              network={"mode": "allow", "allow": ALLOW})
    assert helpers.wait_until(
        lambda: allow_daemon.task(tid)["status"] not in ("queued", "running"), 120, 0.1)
    t = allow_daemon.task(tid)
    assert t["status"] == "succeeded", t
    assert t["progress"] == {"page": 30}, t["progress"]
    # its refusals are task events; its bytes are counted
    status, body = allow_daemon.request("GET", f"/v1/tasks/{tid}/events?limit=1000")
    denied = [e["data"] for e in body["events"] if e["type"] == "egress_denied"]
    assert {(e["host"], e["reason"], e["port"]) for e in denied} == {
        ("forbidden.test", "not_allowed", 80), ("forbidden.test", "not_allowed", 53)}, denied
    usage = t["network_usage"]
    assert usage["denied"] == len(denied) and usage["bytes_in"] > 60 * 200 and usage["bytes_out"] > 0, t
    seen = world.seen()
    for i in range(1, 31):
        assert [e for e in seen if e.get("https") == f"/task-{i}" and e["sni"] == f"site{i}.test"]
        assert [e for e in seen if e.get("http") in (f"/task-{i}", f"http://site{i}.test/task-{i}")]


UPLOAD = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], 9998), timeout=60)
s.sendall(bytes(int(sys.argv[2]) << 20))
s.shutdown(socket.SHUT_WR)
s.recv(1)
"""


def test_rate_caps_each_way(world, daemon):
    """rate_mbit: a token bucket on each end of the link; the bound is a floor on time."""
    sid = daemon.create_sandbox(network={"mode": "open", "rate_mbit": RATE_MBIT})
    status, body = daemon.request("GET", f"/v1/sandboxes/{sid}")
    assert body["network"] == {"mode": "open", "rate_mbit": RATE_MBIT}
    r = daemon.exec(sid, ["curl", "-s", "-S", "-o", "/dev/null", "-w",
                          "%{time_total} %{size_download}", f"http://{SITE}/big"])
    secs, size = r["stdout"].split()
    assert int(size) == RATE_MIB << 20, r
    assert float(secs) >= RATE_MIN_S, (secs, RATE_MIN_S)
    r = daemon.exec(sid, ["python3", "-c", UPLOAD, SITE, str(RATE_MIB)])
    assert r["exit_code"] == 0, r
    assert helpers.wait_until(lambda: [e for e in world.seen() if e.get("sink")], 10, 0.05)
    [up] = [e for e in world.seen() if e.get("sink")]
    assert up["sink"] == RATE_MIB << 20 and up["secs"] >= RATE_MIN_S * 0.95, up
    qdisc = subprocess.run([*world.netns(world.host), "tc", "qdisc", "show"],
                           capture_output=True, text=True).stdout
    assert f"rate {RATE_MBIT}Mbit" in qdisc, qdisc
    # without a cap, no bucket
    plain = daemon.create_sandbox(network={"mode": "open"}, limits={"memory_mb": 300})
    qdisc = subprocess.run([*world.netns(world.host), "tc", "qdisc", "show"],
                           capture_output=True, text=True).stdout
    assert qdisc.count("tbf") == 1, qdisc
    assert daemon.request("DELETE", f"/v1/sandboxes/{plain}")[0] == 200



# ---- links parked with the warm pool ----------------------------------------

GROUP_PARKED = 0x61620000  # network/link.h's device groups
GROUP = {"open": 0x61620001, "allow": 0x61620002}


def parked_ids(d):
    """Pooled sandboxes made with a parked link (their sandbox.json says so)."""
    ids = []
    for sid in pooled(d):
        try:
            spec = json.loads((d.state / "sandboxes" / sid / "sandbox.json").read_text())
        except (OSError, ValueError):
            continue  # being made or removed
        if spec.get("park_network"):
            ids.append(sid)
    return ids


def parked_ready(d):
    """With a --pool-network of 2 the keeper parks one at a time: once the second has a
    directory, the first is ready."""
    assert helpers.wait_until(lambda: len(parked_ids(d)) >= 2, 30, 0.05), "nothing parked"
    return parked_ids(d)


def parked_netns(d, ids):
    """The network namespace of one of the parked sandboxes ids that is up (its init
    cloned): the keeper makes them one at a time, but a directory listing does not say
    which came first, so the one that is up is found, not assumed."""
    found = []

    def up():
        for sid in ids:
            try:
                found[:] = [pooled_netns(d, sid)]
                return True
            except (AssertionError, OSError):
                pass  # still being made: no shim file yet, or no init under it
        return False

    assert helpers.wait_until(up, 30, 0.05), f"none of {ids} came up"
    return found[0]


def links(world):
    """The host's sandbox links: name -> (device group, up)."""
    out = subprocess.run(["ip", "-n", world.host, "-d", "-o", "link"], check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        name = line.split(": ")[1].split("@")[0]
        if name.startswith("ab"):
            group = line.split(" group ")[1].split()[0]
            found[name] = (0 if group == "default" else int(group, 0), "state UP" in line)
    return found


def pooled_netns(d, sid):
    """The network namespace of a pooled sandbox: that of its shim's child (its init, or
    its relay) whose namespace is not the host's."""
    shim = (d.state / "sandboxes" / sid / "shim").read_text().split()[0]
    host = os.stat(f"/run/netns/{d.world_host}").st_ino
    for pid in open(f"/proc/{shim}/task/{shim}/children").read().split():
        ns = f"/proc/{pid}/ns/net"
        if os.stat(ns).st_ino != host:
            return ns
    raise AssertionError(f"no sandbox init under shim {shim}")


def parked_helper(d, sid):
    """The pid of a pooled sandbox's parked helper (agentbox-net park), or None while
    its sandbox is still being made."""
    try:
        shim = (d.state / "sandboxes" / sid / "shim").read_text().split()[0]
        for pid in open(f"/proc/{shim}/task/{shim}/children").read().split():
            if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[1:2] == [b"park"]:
                return int(pid)
    except (OSError, IndexError):
        pass
    return None


def test_parked_links_serve_networked_creates(world, tmp_path):
    """--pool-network: pooled sandboxes whose link is made ahead, up but in a group the
    table drops, handed out to a networked create by a change of group (bench/network
    measures what that saves). Traffic, DNS, policy, rate, recovery and the clean stop
    all hold as for a link made at the claim."""
    d = Daemon(tmp_path, "--pool", "1", "--pool-network", "2", "--resolver", "198.51.100.1")
    d.prefix = world.netns(world.host)
    d.world_host = world.host
    d.start()
    try:
        # a daemon whose sandboxes have no network parks nothing (nor makes its table)
        assert helpers.wait_until(lambda: len(pooled(d)) >= 1, 30, 0.05)
        assert not helpers.wait_until(lambda: parked_ids(d) or links(world), 1, 0.05)
        assert "agentbox" not in world.tables()
        first = d.create_sandbox(network={"mode": "open"})  # its link made at the claim
        # (the keeper may be parking links already: the create told it to)
        assert [n[:3] for n in links(world) if not n.startswith("abp")] == ["abo"], links(world)

        # then the keeper parks links: up, in no mode's group, and dropped by the table
        # (the second may still be coming up when the first is ready: waited for, not assumed)
        ready = parked_ready(d)

        def parked_and_up():
            parked = {n: v for n, v in links(world).items() if n.startswith("abp")}
            return parked and all(v == (GROUP_PARKED, True) for v in parked.values())

        assert helpers.wait_until(parked_and_up, 30, 0.05), links(world)
        ns = parked_netns(d, ready)
        r = subprocess.run(["nsenter", f"--net={ns}", *CURL, "-m", "2",
                            f"http://{SITE}/from-parked"], capture_output=True, text=True)
        assert r.returncode != 0 and r.stdout != "200", r
        assert not [e for e in world.seen() if e.get("http") == "/from-parked"]

        # open: from a parked link, which serves at once (its relay's DNS too)
        sid = d.create_sandbox(network={"mode": "open"})
        assert sid in ready, "an open create did not take a parked link"
        out, err, _ = sh(d, sid, " ".join(CURL) + f" http://{SITE}/parked-open; echo; "
                         "getent ahostsv4 site7.test | head -1; "
                         + " ".join(CURL) + f" http://{REFUSED['metadata']}/refused-parked; "
                         "echo \" rc=$?\"")
        assert out.split()[:4] == ["200", "203.0.113.10", "STREAM", "site7.test"], (out, err)
        assert out.strip().endswith(" rc=7"), out
        name = [n for n, v in links(world).items() if v[0] == GROUP["open"] and
                n.startswith("abp")]
        assert len(name) == 1, links(world)
        # (ip netns exec: the namespace's own sysfs, where info reads a link's group)
        info = subprocess.run(["ip", "netns", "exec", world.host, os.path.join(
            BUILD, "src", "cli", "agentbox"), "info"], capture_output=True, text=True).stdout
        shown = {line.split()[0]: line.split()[1] for line in info.splitlines()
                 if line.strip().startswith("ab")}
        still = [n for n, v in links(world).items() if v[0] == GROUP_PARKED]
        assert still and shown.get(name[0]) == "open" and not set(shown) & set(still), info

        # allow: the relay gets its policy at the claim
        ready = parked_ready(d)
        sid = d.create_sandbox(network={"mode": "allow", "allow": ["site1.test"]})
        assert sid in ready, "an allow create did not take a parked link"
        assert fetch(d, sid, "http://site1.test/parked-allow", "--noproxy", "'*'")[0] == "200"
        code, rc, err = fetch(d, sid, "http://site2.test/parked-denied", "--noproxy", "'*'")
        assert code != "200", (code, rc, err)
        assert ("site2.test", "not_allowed") in {(e.get("host"), e["reason"])
                                                 for e in network_log(d, sid)}
        assert [e for e in world.seen() if e.get("http") == "/parked-allow"]
        assert not [e for e in world.seen() if e.get("http") == "/parked-denied"]

        # none never takes a parked link (its eth0 would show)
        ready = parked_ready(d)
        plain = d.create_sandbox()
        assert plain not in ready
        assert sh(d, plain, IFACES)[0].split() == ["lo"]

        # a cap is in place before the sandbox is handed out
        ready = parked_ready(d)
        capped = d.create_sandbox(network={"mode": "open", "rate_mbit": RATE_MBIT})
        assert capped in ready
        qdisc = subprocess.run([*world.netns(world.host), "tc", "qdisc", "show"],
                               capture_output=True, text=True).stdout
        assert f"rate {RATE_MBIT}Mbit" in qdisc, qdisc

        # a parked helper that died: the claim fails, and the next sandbox serves
        ready = parked_ready(d)
        assert helpers.wait_until(lambda: [p for p in ready if parked_helper(d, p)], 30, 0.05)
        dead = [p for p in ready if parked_helper(d, p)][0]
        os.kill(parked_helper(d, dead), signal.SIGKILL)
        sid = d.create_sandbox(network={"mode": "open"})
        assert sid != dead
        assert sh(d, sid, " ".join(CURL) + f" http://{SITE}/after-dead-helper")[0] == "200"
        assert helpers.wait_until(lambda: dead not in pooled(d), 10, 0.05)

        # a helper that fails once handed out ends its sandbox, with its message (here
        # it cannot open its refusals' file): never a link without a relay
        ready = parked_ready(d)
        for p in ready:
            (d.state / "sandboxes" / p / "network.jsonl").mkdir()
        sid = d.create_sandbox(network={"mode": "allow", "allow": ["site1.test"]})
        assert sid in ready

        def ended():
            status, body = d.request("GET", f"/v1/sandboxes/{sid}")
            return body if body["status"] == "ended" else None
        assert helpers.wait_until(ended, 10, 0.05), "a sandbox with no relay went on"
        assert ended()["end_reason"] == "failed" and "network.jsonl" in ended()["end_detail"]
        for p in ready:
            if (d.state / "sandboxes" / p).exists():
                (d.state / "sandboxes" / p / "network.jsonl").rmdir()

        # SIGKILL: the next daemon adopts the parked links with their pool
        ready = parked_ready(d)
        d.kill()
        d.start()
        sid = d.create_sandbox(network={"mode": "open"})
        assert sid in ready, "a parked link was not adopted"
        assert sh(d, sid, " ".join(CURL) + f" http://{SITE}/after-restart")[0] == "200"

        # a clean stop with every sandbox gone removes the table, parked links or not
        for sb in d.sandboxes():
            assert d.request("DELETE", f"/v1/sandboxes/{sb['id']}")[0] == 200
        assert helpers.wait_until(lambda: not [n for n, v in links(world).items()
                                               if v[0] != GROUP_PARKED], 10, 0.05)
        d.stop()
        assert "agentbox" not in world.tables()
        assert helpers.wait_until(lambda: not links(world), 10, 0.05), links(world)
    finally:
        if d.proc and d.proc.poll() is None:
            d.stop()
