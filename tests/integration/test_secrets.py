"""Secrets that never enter the sandbox (docs/SECURITY.md, "Secrets"; THREATS
N11): an allow-mode sandbox's variable holds a placeholder, and its proxy
puts the value into requests to the secret's hosts only, over HTTPS through
a per-daemon CA. Against the fake internet of networld.py, whose servers log
the Authorization header that reached them.
"""
import hashlib
import json
import os
import secrets
import stat
import subprocess

import pytest

import helpers
from conftest import BUILD
from daemon import Daemon
from networld import World

DAEMON_PORT = 18081
VALUE_PREFIX = "sk-live-"
VALUE = VALUE_PREFIX + secrets.token_hex(20)  # what must never be seen inside
PLACEHOLDER_PREFIX = "agentbox-secret-"
ALLOW = {"mode": "allow", "allow": ["api.secret.test", "site1.test"]}
SECRETS = {"API_KEY": {"value": VALUE, "hosts": ["api.secret.test"]}}
# curl that prints the body and, last, the status; the sandbox's CA bundle is in
# SSL_CERT_FILE and CURL_CA_BUNDLE, which the API set
CURL = "curl -s -S -m 10 -w ' %{http_code}' -H \"Authorization: Bearer $API_KEY\" "

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

# Every readable mapping, environ and cmdline of every process of the sandbox: the value
# must be in none of them, and the placeholder (in the environment) must be found, or the
# scan is blind. The scanner is given the value's digest, never the value: wherever the
# value's known prefix occurs, the bytes there are hashed.
MEMORY_SCAN = r"""
import hashlib, os, re, sys
digest, length, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
placeholder = sys.argv[4].encode()
found_value = found_placeholder = 0
def scan(data):
    global found_value, found_placeholder
    found_placeholder += data.count(placeholder)
    i = data.find(prefix)
    while i >= 0:
        found_value += hashlib.sha256(data[i:i + length]).hexdigest() == digest
        i = data.find(prefix, i + 1)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for name in ("environ", "cmdline"):
        try:
            scan(open(f"/proc/{pid}/{name}", "rb").read())
        except OSError:
            pass
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        continue
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
        if not m or "[vvar" in line or "[vsyscall" in line:
            continue
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        try:
            mem.seek(start)
            scan(mem.read(end - start))
        except (OSError, OverflowError, ValueError):
            continue
print(found_value, found_placeholder)
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("world"))
    try:
        w.build()
        yield w
    finally:
        w.destroy()


@pytest.fixture
def daemon(world, tmp_path):
    d = Daemon(tmp_path, "--pool", "1", "--insecure-listen", "--listen",
               f"198.51.100.2:{DAEMON_PORT}",
               "--resolver", "198.51.100.1", "--egress-cacert", str(world.dir / "cert.pem"))
    d.prefix = world.netns(world.host)
    d.start()
    yield d
    d.stop()


def sh(d, sid, script):
    r = d.exec(sid, ["sh", "-c", script])
    return r["stdout"], r["stderr"], r["exit_code"]


def auth_seen(world, path):
    return [e.get("authorization") for e in world.seen()
            if path in (e.get("http"), e.get("https"))]


def no_value_under(root):
    """Files under root that hold the value: none may."""
    hits = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            if not stat.S_ISREG(os.lstat(p).st_mode):
                continue  # FIFOs and sockets hold nothing, and would block a reader
            try:
                with open(p, "rb") as fh:
                    if VALUE.encode() in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


def test_secret_reaches_its_host_and_never_the_sandbox(world, daemon):
    sid = daemon.create_sandbox(network=ALLOW, secrets=SECRETS)
    status, shown = daemon.request("GET", f"/v1/sandboxes/{sid}")
    assert status == 200 and VALUE not in json.dumps(shown), shown
    placeholder = shown["secrets"]["API_KEY"]["placeholder"]
    assert placeholder.startswith(PLACEHOLDER_PREFIX) and len(placeholder) == 48, shown
    assert shown["secrets"]["API_KEY"]["hosts"] == ["api.secret.test"]

    # inside: the placeholder, everywhere one could look
    out, err, code = sh(daemon, sid, 'echo "$API_KEY"; env | grep -c API_KEY=; '
                        "cat /proc/self/environ | tr '\\0' '\\n' | grep ^API_KEY=")
    assert out.split() == [placeholder, "1", f"API_KEY={placeholder}"], (out, err)
    digest = hashlib.sha256(VALUE.encode()).hexdigest()
    r = daemon.exec(sid, ["python3", "-c", MEMORY_SCAN, digest, str(len(VALUE)), VALUE_PREFIX,
                          placeholder])
    found_value, found_placeholder = map(int, r["stdout"].split())
    assert found_value == 0 and found_placeholder > 0, r

    # the secret's host gets the value: transparently, and through HTTPS_PROXY (CONNECT)
    out, err, _ = sh(daemon, sid, CURL + "--noproxy '*' https://api.secret.test/echo-tls")
    assert out.endswith(" 200"), (out, err, daemon.request("GET", f"/v1/sandboxes/{sid}/network"))
    assert auth_seen(world, "/echo-tls") == [f"Bearer {VALUE}"]
    # it echoed the value back: the sandbox reads stars in its place
    assert VALUE not in out and "you sent: Bearer " + "*" * len(VALUE) in out, out
    out, err, _ = sh(daemon, sid, CURL + "https://api.secret.test/echo-connect")
    assert out.endswith(" 200") and VALUE not in out, (out, err)
    assert auth_seen(world, "/echo-connect") == [f"Bearer {VALUE}"]
    # never in clear text: over plain HTTP the secret's host gets the placeholder
    out, err, _ = sh(daemon, sid, CURL + "--noproxy '*' http://api.secret.test/echo-plain")
    assert out.endswith(" 200") and VALUE not in out, (out, err)
    assert auth_seen(world, "/echo-plain") == [f"Bearer {placeholder}"]

    # any other host gets the placeholder, its TLS untouched (the world's own certificate)
    out, err, _ = sh(daemon, sid, CURL + "-k --noproxy '*' https://site1.test/other-tls; "
                     + CURL + "--noproxy '*' http://site1.test/other-plain")
    assert out.split()[-1] == "200", (out, err)
    assert auth_seen(world, "/other-tls") == [f"Bearer {placeholder}"]
    assert auth_seen(world, "/other-plain") == [f"Bearer {placeholder}"]
    out, err, _ = sh(daemon, sid, "curl -s -m 10 --noproxy '*' -o /dev/null -w '%{http_code}' "
                     "https://site1.test/strict; echo \" rc=$?\"")
    assert out.strip().endswith("rc=60"), (out, err)  # site1's certificate is not agentbox's

    # nowhere on the host's disk (the store, the daemon's log), nor in an argv of the host
    assert no_value_under(daemon.state) == []
    daemon.log.flush()
    assert VALUE not in (daemon.state.parent / "agentboxd.log").read_text()
    ps = subprocess.run(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"],
                        capture_output=True, text=True).stdout
    assert VALUE not in ps


def test_task_secret_lives_until_the_task_ends(world, daemon):
    script = (CURL + "--noproxy '*' https://api.secret.test/echo-task; echo; "
              'echo "inside: $API_KEY"')
    tid = daemon.submit(command=["sh", "-c", script], network=ALLOW, secrets=SECRETS)
    assert helpers.wait_until(lambda: daemon.task(tid)["status"] not in ("queued", "running"),
                              60, 0.1)
    t = daemon.task(tid)
    assert t["status"] == "succeeded", t
    assert t["network_usage"]["denied"] == 0, daemon.events(tid)
    assert auth_seen(world, "/echo-task") == [f"Bearer {VALUE}"], (
        daemon.events(tid), daemon.request("GET", f"/v1/tasks/{tid}/logs"))
    status, logs, _ = daemon.request("GET", f"/v1/tasks/{tid}/logs", raw=True)
    text = logs.decode()
    assert status == 200 and VALUE not in text and "inside: agentbox-secret-" in text, text
    assert VALUE not in json.dumps(t)
    # the values' file went with the task; nothing else ever held them
    assert not (daemon.state / "tasks" / tid / "secrets.json").exists()
    assert no_value_under(daemon.state) == []


def test_a_full_env_and_every_secret_still_start(world, daemon):
    """256 variables of the task's own, and what agentbox adds beside them: the proxy's,
    the CA's, AGENTBOX_*, sixteen placeholders."""
    env = {f"V{i}": "x" for i in range(256)}
    sec = {f"K{i}": {"value": VALUE, "hosts": ["api.secret.test"]} for i in range(16)}
    tid = daemon.submit(command=["sh", "-c", "env | wc -l"], network=ALLOW, secrets=sec,
                        env=env)
    assert helpers.wait_until(lambda: daemon.task(tid)["status"] not in ("queued", "running"),
                              60, 0.1)
    t = daemon.task(tid)
    assert t["status"] == "succeeded", t
    status, logs, _ = daemon.request("GET", f"/v1/tasks/{tid}/logs", raw=True)
    assert int(logs.decode().split()[0]) >= 256 + 16 + 4 + 4 + 3, logs


def test_bad_secrets_are_refused_naming_the_field(world, daemon):
    cases = [
        ({"mode": "open"}, SECRETS, "secrets"),
        (ALLOW, {"API_KEY": {"value": VALUE, "hosts": ["forbidden.test"]}},
         "secrets.API_KEY.hosts[0]"),
        (ALLOW, {"API_KEY": {"value": "a\nb", "hosts": ["api.secret.test"]}},
         "secrets.API_KEY.value"),
        (ALLOW, {"API_KEY": {"value": VALUE, "hosts": ["*.secret.test"]}},
         "secrets.API_KEY.hosts[0]"),
        (ALLOW, {"1BAD": {"value": VALUE, "hosts": ["api.secret.test"]}}, "secrets"),
        (ALLOW, {"API_KEY": {"value": "short", "hosts": ["api.secret.test"]}},
         "secrets.API_KEY.value"),
        (ALLOW, {"SSL_CERT_FILE": {"value": VALUE, "hosts": ["api.secret.test"]}},
         "secrets.SSL_CERT_FILE"),
    ]
    for network, sec, field in cases:
        for path in ("/v1/tasks", "/v1/sandboxes"):
            body = {"network": network, "secrets": sec}
            if path == "/v1/tasks":
                body["command"] = ["true"]
            status, err = daemon.request("POST", path, body)
            assert status == 400 and err["error"]["field"] == field, (path, sec, err)
            assert err["error"]["code"] == "invalid_field", err
            assert VALUE not in json.dumps(err)
    status, err = daemon.request("POST", "/v1/sandboxes", {
        "network": ALLOW,
        "secrets": {"API_KEY": {"value": VALUE, "hosts": ["api.secret.test"], "x": 1}}})
    assert status == 400 and err["error"]["code"] == "unknown_field", err
    assert err["error"]["field"] == "secrets.API_KEY.x", err
    # a variable of env and a secret of the same name
    status, err = daemon.request("POST", "/v1/tasks", {
        "command": ["true"], "network": ALLOW, "env": {"API_KEY": "x"}, "secrets": SECRETS})
    assert status == 400 and err["error"]["field"] == "secrets.API_KEY", err


def test_secret_never_goes_to_a_host_that_does_not_prove_its_name(world, tmp_path):
    """Without --egress-cacert the world's certificate is from no CA the proxy trusts: the
    request never leaves, and the refusal says why."""
    d = Daemon(tmp_path, "--resolver", "198.51.100.1")
    d.prefix = world.netns(world.host)
    d.start()
    try:
        sid = d.create_sandbox(network=ALLOW, secrets=SECRETS)
        out, err, _ = sh(d, sid, CURL + "--noproxy '*' https://api.secret.test/impostor")
        assert out.endswith(" 000"), (out, err)
        assert auth_seen(world, "/impostor") == []
        status, net = d.request("GET", f"/v1/sandboxes/{sid}/network")
        [refusal] = [e for e in net["denied"] if e["reason"] == "intercept_refused"]
        assert refusal["host"] == "api.secret.test" and "does not verify" in refusal["detail"]
        assert VALUE not in json.dumps(net)
    finally:
        d.stop()


def test_cli_secret_comes_from_the_environment_never_argv(world, daemon):
    agentbox = os.path.join(BUILD, "src", "cli", "agentbox")
    env = {"PATH": os.environ["PATH"], "AGENTBOX_HOST": daemon.socket, "API_KEY": VALUE}
    script = CURL + "--noproxy '*' https://api.secret.test/from-cli"
    p = subprocess.run([agentbox, "submit", "--network", "allow:api.secret.test",
                        "--secret", "API_KEY@api.secret.test", "--", "sh", "-c", script],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    tid = p.stdout.split()[0]
    assert helpers.wait_until(lambda: daemon.task(tid)["status"] not in ("queued", "running"),
                              60, 0.1)
    assert daemon.task(tid)["status"] == "succeeded", daemon.task(tid)
    assert auth_seen(world, "/from-cli") == [f"Bearer {VALUE}"]
    # not set here: refused before anything is sent, saying where the value comes from
    del env["API_KEY"]
    p = subprocess.run([agentbox, "submit", "--network", "allow:api.secret.test",
                        "--secret", "API_KEY@api.secret.test", "--", "true"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 125 and "$API_KEY is not set" in p.stderr, p.stderr
