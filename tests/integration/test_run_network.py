"""`agentbox run --network` without agentboxd (docs/cli.md, "agentbox run
with a network"): open and allow modes against the fake internet of
networld.py, in network namespaces the test makes. Every `agentbox run`
here runs inside the world's "host" namespace (nsenter), never in the
machine's own: the table run installs, the forwarding it turns on and the
links it makes are the test namespace's, and World.build() checks first
that no route leads out of it.

After every run: no sandbox link (ab*) is left, agentbox's table is
gone when run installed it, forwarding is as it was, and run's files for
the namespace are gone from the run directory.
"""
import json
import os
import subprocess
import time

import pytest

import helpers
from conftest import AGENTBOX
from daemon import Daemon
from networld import CURL, REFUSED, SITE, World

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

IFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"
RUN_DIR = os.environ.get("AGENTBOX_RUN_DIR", "/run/agentbox")
RESOLVER = ["--resolver", "198.51.100.1"]  # the world's DNS server


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("world"))
    try:
        w.build()
        yield w
    finally:
        w.destroy()


def in_host(world, *args, **kw):
    """A command in the world's host namespace: (stdout, stderr, exit status)."""
    p = subprocess.run([*world.netns(world.host), *args], capture_output=True, text=True,
                       timeout=kw.pop("timeout", 60), **kw)
    return p.stdout, p.stderr, p.returncode


def run(world, *args, **kw):
    """agentbox run ARGS in the world's host namespace."""
    return in_host(world, AGENTBOX, "run", *args, **kw)


def forwarding(world):
    return in_host(world, "cat", "/proc/sys/net/ipv4/ip_forward")[0].strip()


def run_files(world):
    """run's lock and record for the host namespace (named by its inode)."""
    ino = os.stat(f"/run/netns/{world.host}").st_ino
    return sorted(f for f in os.listdir(RUN_DIR) if f.startswith(f"network-{ino}."))


@pytest.fixture
def clean(world):
    """Nothing of agentbox's in the host namespace before; the same after."""
    assert not world.host_links() and "agentbox" not in world.tables()
    before = forwarding(world)
    yield before
    assert world.host_links() == []  # run waits for its link to go before it exits
    assert "agentbox" not in world.tables(), world.tables()
    assert forwarding(world) == before
    assert run_files(world) == []


def test_allow_fetches_its_list_and_refuses_the_rest(world, clean, tmp_path):
    log, result = tmp_path / "refused.jsonl", tmp_path / "result.json"
    script = ("echo $HTTPS_PROXY; " + IFACES + "; echo; "
              + " ".join(CURL) + " http://site1.test/run-allow; echo \" rc=$?\"; "
              + " ".join(CURL) + " -k https://site1.test/run-allow-tls; echo \" rc=$?\"; "
              + " ".join(CURL) + " http://forbidden.test/by-name; echo \" rc=$?\"; "
              + " ".join(CURL) + " --noproxy '*' --resolve forbidden.test:80:203.0.113.20"
              " http://forbidden.test/by-address; echo \" rc=$?\"")
    out, err, code = run(world, "--network", "allow:site1.test", *RESOLVER, "--network-log",
                         str(log), "--result", str(result), "--", "sh", "-c", script)
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert lines[0] == "http://10.231.0.1:15001"  # HTTP(S)_PROXY, as agentboxd sets them
    assert lines[1].split() == ["eth0", "lo"]
    assert lines[2:] == ["200 rc=0", "200 rc=0", "403 rc=0", "403 rc=0"], (out, err)
    seen = world.seen()
    [page] = [e for e in seen if e.get("http") in ("/run-allow", "http://site1.test/run-allow")]
    assert page["host"] == "site1.test" and page["from"] == "198.51.100.2"
    assert [e for e in seen if e.get("https") == "/run-allow-tls" and e["sni"] == "site1.test"]
    assert not [e for e in seen if "forbidden" in json.dumps(e)]  # never reached, never asked
    # the refusals: in --network-log as they happened, counted in --result, not on stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert {(e["host"], e["reason"]) for e in events} == {("forbidden.test", "not_allowed")}
    assert all(e["type"] == "egress_denied" and e["port"] in (80, 53) for e in events)
    assert json.loads(result.read_text())["egress_denied"] == len(events) >= 2
    assert "refused" not in err, err


def test_allow_refusals_go_to_stderr_without_a_log(world, clean):
    out, err, code = run(world, "--network", "allow:site1.test", *RESOLVER, "--", "sh", "-c",
                         " ".join(CURL) + " http://forbidden.test/no-log; "
                         + " ".join(CURL) + " http://site1.test/no-log")
    assert code == 0 and out.endswith("200"), (out, err)
    assert "agentbox: network: refused forbidden.test:80 (not_allowed)" in err.splitlines(), err


def test_open_reaches_a_public_address_and_no_refused_one(world, clean, tmp_path):
    script = (IFACES + "; echo; " + " ".join(CURL) + f" http://{SITE}/run-open; echo; "
              + " ".join(CURL) + " http://site2.test/run-open-by-name; echo; ")
    script += "; ".join(" ".join(CURL) + f" http://{addr}/run-refused-{name}; echo \" rc=$?\""
                        for name, addr in REFUSED.items())
    result = tmp_path / "result.json"
    out, err, code = run(world, "--network", "open", *RESOLVER, "--result", str(result), "--",
                         "sh", "-c", script)
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert lines[0].split() == ["eth0", "lo"] and lines[1:3] == ["200", "200"], (out, err)
    assert [line.split()[-1] for line in lines[3:]] == ["rc=7"] * len(REFUSED), out
    seen = world.seen()
    [page] = [e for e in seen if e.get("http") == "/run-open"]
    assert page["from"] == "198.51.100.2"  # masqueraded
    assert not [e for e in seen if "run-refused" in json.dumps(e)]
    assert "egress_denied" not in json.loads(result.read_text())  # allow mode's alone


def test_open_with_a_rate_and_concurrent_runs(world, clean):
    """Three runs at once share one table; the last to end takes it away."""
    runs = [subprocess.Popen([*world.netns(world.host), AGENTBOX, "run", "--network", "open",
                              "--network-rate", "16", "--", "sh", "-c",
                              " ".join(CURL) + f" http://{SITE}/run-rate-{i}; sleep {i + 1}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in (1, 2, 3)]
    try:
        assert helpers.wait_until(lambda: len(world.host_links()) == 3, 10, 0.05)
        assert "table inet agentbox" in world.tables()
        assert forwarding(world) == "1"
        qdisc = in_host(world, "tc", "qdisc", "show")[0]
        assert qdisc.count("rate 16Mbit") == 3, qdisc
        # the first ends; the table stays for the others
        runs[0].wait(timeout=30)
        assert "table inet agentbox" in world.tables()
    finally:
        for p in runs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0 and out == "200", (out, err)


def test_none_has_only_lo_and_touches_nothing(world, clean):
    for args in ([], ["--network", "none"]):
        out, err, code = run(world, *args, "--", "sh", "-c", IFACES + "; " + " ".join(CURL)
                             + f" http://{SITE}/from-none; echo \" rc=$?\"")
        assert code == 0, (out, err)
        assert out.split() == ["lo", "000", "rc=7"], out
        assert run_files(world) == []
    assert not [e for e in world.seen() if e.get("http") == "/from-none"]


@pytest.mark.parametrize("args, needle", [
    (["--network", "bogus"], "--network: 'bogus' is not none, open or allow:"),
    (["--network", "allow:10.0.0.1"], "--network: "),
    (["--network-rate", "0", "--network", "open"], "--network-rate: '0' is not a number"),
    (["--network", "open", "--network-rate", "100001"], "--network-rate: '100001'"),
    (["--network", "none", "--network-rate", "5"], "--network-rate: only with --network"),
    (["--network-rate", "5"], "--network-rate: only with --network"),
    (["--network", "open", "--resolver", "dns.test"], "--resolver: 'dns.test'"),
    (["--resolver", "198.51.100.1"], "--resolver: only with --network"),
    (["--network", "open", "--network-log", "/tmp/x"], "--network-log: only with"),
])
def test_bad_values_exit_125_naming_the_option(world, clean, args, needle):
    out, err, code = run(world, *args, "--", "true")
    assert code == 125 and out == "", (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("agentbox: run: ") and needle in line, line


def nft_has_run_mark(world):
    return in_host(world, "nft", "list", "chain", "inet", "agentbox", "installed_by_run")[2] == 0


def test_a_daemon_takes_a_runs_table_over(world, tmp_path):
    """agentboxd starting while a run is live replaces run's table with its own (one
    transaction: the run keeps its rules and its network); run then leaves it to the
    daemon, and the forwarding run found is put back by the last run to end after it."""
    assert not world.host_links() and "agentbox" not in world.tables()
    before = forwarding(world)
    sig = tmp_path / "sig"
    sig.mkdir()
    script = ("while [ ! -e /sig/go ]; do sleep 0.05; done; "
              + " ".join(CURL) + f" http://{SITE}/after-takeover")
    p = subprocess.Popen([*world.netns(world.host), AGENTBOX, "run", "--network", "open",
                          "--volume", f"{sig}:/sig:ro", "--", "sh", "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (tmp_path / "d").mkdir()
    d = Daemon(tmp_path / "d", "--pool", "0")
    d.prefix = world.netns(world.host)
    try:
        assert helpers.wait_until(lambda: len(world.host_links()) == 1, 10, 0.05)
        assert nft_has_run_mark(world)
        d.start()  # finds the table, and takes it over
        assert helpers.wait_until(lambda: not nft_has_run_mark(world), 10, 0.05)
        assert "table inet agentbox" in world.tables()
        (sig / "go").write_text("")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out == "200", (out, err)
        # the daemon's table: run leaves it, and keeps the forwarding it found on record
        assert "table inet agentbox" in world.tables() and forwarding(world) == "1"
        assert [f for f in run_files(world) if f.endswith(".json")]
        d.stop()  # a clean stop with nothing left: the daemon's table goes, forwarding stays
        assert "agentbox" not in world.tables()
        # the next run to end with nothing left puts forwarding back, and its files go
        out, err, code = run(world, "--network", "open", "--", "true")
        assert code == 0, err
        assert "agentbox" not in world.tables() and forwarding(world) == before
        assert run_files(world) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        d.stop()
        for family in ("inet", "arp"):
            in_host(world, "nft", "delete", "table", family, "agentbox")
        in_host(world, "sh", "-c", f"echo {before} > /proc/sys/net/ipv4/ip_forward")
        for f in run_files(world):
            os.unlink(os.path.join(RUN_DIR, f))
