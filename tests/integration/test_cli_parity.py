"""Every route of the API has a verb of `agentbox`, and the verbs behave as
docs/cli.md says: options after the sandbox id, `sandbox rm` checking every
id before it removes any, processes (proc ls, output, kill), files (files
ls, rm, mkdir), --json and -q. Against the real agentboxd.
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import AGENTBOX, ROOT
from daemon import Daemon

# a well-formed sandbox id that names nothing
NO_SUCH = "sbx_" + "0" * 26


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("cli-parity")).start()
    yield d
    d.stop()


@pytest.fixture
def sbx(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    yield sid
    daemon.request("DELETE", f"/v1/sandboxes/{sid}")


def cli(daemon, *args, timeout=60, input=None):
    """`agentbox ARGS...` against daemon (AGENTBOX_HOST names its socket)."""
    env = dict(os.environ)
    for k in ("AGENTBOX_URL", "AGENTBOX_KEY", "AGENTBOX_TOKEN"):
        env.pop(k, None)
    env["AGENTBOX_HOST"] = daemon.socket
    return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, timeout=timeout,
                          input=input, env=env)


def status_of(daemon, sid):
    st, body = daemon.request("GET", f"/v1/sandboxes/{sid}")
    assert st == 200, body
    return body["status"]


# ---- options after the id ------------------------------------------------------


def test_exec_options_after_the_id(daemon, sbx):
    p = cli(daemon, "exec", sbx, "--cwd", "/tmp", "--", "pwd")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "/tmp\n"
    p = cli(daemon, "exec", sbx, "--env", "GREETING=hi", "--cwd", "/tmp", "--",
            "sh", "-c", 'echo "$GREETING $PWD"')
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hi /tmp\n"
    # before the id, as always; and the command's own options stay its own
    p = cli(daemon, "exec", "--cwd", "/tmp", sbx, "ls", "-d", "/tmp")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "/tmp\n"


def test_exec_option_after_the_id_needs_its_value(daemon, sbx):
    p = cli(daemon, "exec", sbx, "--cwd")
    assert p.returncode == 125
    assert "--cwd" in p.stderr and "needs a value" in p.stderr


# ---- sandbox rm checks every id first --------------------------------------------


@pytest.mark.parametrize("bad", ["nosuch", NO_SUCH])
def test_sandbox_rm_checks_every_id_before_removing_any(daemon, sbx, bad):
    p = cli(daemon, "sandbox", "rm", bad, sbx)
    assert p.returncode == 125, p.stdout
    assert p.stdout == ""
    assert "none removed" in p.stderr and ("invalid_id" in p.stderr or bad in p.stderr)
    assert status_of(daemon, sbx) == "running"
    # the other order too
    p = cli(daemon, "sandbox", "rm", sbx, bad)
    assert p.returncode == 125
    assert status_of(daemon, sbx) == "running"
    # all good: all removed
    p = cli(daemon, "sandbox", "rm", sbx)
    assert p.returncode == 0, p.stderr
    assert p.stdout == sbx + "\n"
    assert status_of(daemon, sbx) == "ended"


# ---- processes ------------------------------------------------------------------


def detach(daemon, sid, script):
    p = cli(daemon, "exec", "-d", sid, "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    return int(p.stdout)


def proc_json(daemon, sid):
    p = cli(daemon, "proc", "ls", "--json", sid)
    assert p.returncode == 0, p.stderr
    return {x["pid"]: x for x in json.loads(p.stdout)}


def wait_ended(daemon, sid, pid):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        procs = proc_json(daemon, sid)
        if not procs[pid]["running"]:
            return procs[pid]
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still running after 60 s")


def test_proc_ls_output_kill(daemon, sbx):
    pid = detach(daemon, sbx, "echo out; echo err >&2; exec sleep 300")
    # the table, the ids, the JSON
    p = cli(daemon, "proc", "ls", sbx)
    assert p.returncode == 0, p.stderr
    head, *rows = p.stdout.splitlines()
    assert head.split() == ["PID", "STATE", "STARTED", "COMMAND"]
    row = next(r for r in rows if r.split()[0] == str(pid))
    assert row.split()[1] == "running" and "sh -c" in row
    p = cli(daemon, "proc", "ls", "-q", sbx)
    assert str(pid) in p.stdout.split()
    assert proc_json(daemon, sbx)[pid]["running"] is True
    # its output so far: stdout to stdout, stderr to stderr
    deadline = time.monotonic() + 60
    while True:
        p = cli(daemon, "proc", "output", sbx, str(pid))
        assert p.returncode == 0, p.stderr
        if p.stdout == "out\n" and p.stderr == "err\n" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert (p.stdout, p.stderr) == ("out\n", "err\n")
    p = cli(daemon, "proc", "output", "--json", sbx, str(pid))
    assert json.loads(p.stdout)["running"] is True
    # options after the operands too
    p = cli(daemon, "proc", "kill", sbx, str(pid), "-s", "TERM")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"{pid}\n"
    ended = wait_ended(daemon, sbx, pid)
    assert ended["signal"] == signal.SIGTERM
    p = cli(daemon, "proc", "ls", sbx)
    assert f"killed {int(signal.SIGTERM)}" in p.stdout
    # again: it has ended
    p = cli(daemon, "proc", "kill", sbx, str(pid))
    assert p.returncode == 125 and "(process_ended)" in p.stderr


def test_proc_output_follow_returns_the_exit_status(daemon, sbx):
    pid = detach(daemon, sbx, "echo a; sleep 0.5; echo b >&2; exit 3")
    p = cli(daemon, "proc", "output", "-f", sbx, str(pid))
    assert p.returncode == 3, p.stderr
    assert p.stdout == "a\n" and p.stderr == "b\n"
    # once it has ended: the whole output and the status again
    p = cli(daemon, "proc", "output", "--follow", sbx, str(pid))
    assert (p.returncode, p.stdout, p.stderr) == (3, "a\n", "b\n")


@pytest.mark.parametrize("args,needle", [
    (["kill", "-s", "NOPE", "PID"], "is not a signal"),
    (["kill", "0"], "is not a pid"),
    (["output", "12x"], "is not a pid"),
    (["output", "999999"], "(process_not_found)"),
])
def test_proc_refusals(daemon, sbx, args, needle):
    sub, *rest = args
    rest = [str(os.getpid()) if a == "PID" else a for a in rest]
    if sub == "kill" and rest[0] == "-s":
        argv = ["proc", "kill", rest[0], rest[1], sbx, rest[2]]
    else:
        argv = ["proc", sub, sbx, *rest]
    p = cli(daemon, *argv)
    assert p.returncode == 125
    assert needle in p.stderr


# ---- files ---------------------------------------------------------------------------


def put(daemon, sid, path, data):
    st, body = daemon.request("PUT", f"/v1/sandboxes/{sid}/files?path={path}", data)
    assert st == 201, body


def test_files_mkdir_ls_rm(daemon, sbx):
    p = cli(daemon, "files", "mkdir", sbx, "/workspace/a/b/c", "/tmp/d")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "/workspace/a/b/c\n/tmp/d\n"
    # there already: fine, as mkdir -p
    p = cli(daemon, "files", "mkdir", sbx, "/workspace/a/b")
    assert p.returncode == 0, p.stderr
    put(daemon, sbx, "/workspace/a/f.txt", b"12345")
    p = cli(daemon, "files", "ls", sbx, "/workspace/a")
    assert p.returncode == 0, p.stderr
    head, *rows = p.stdout.splitlines()
    assert head.split() == ["TYPE", "MODE", "SIZE", "MODIFIED", "NAME"]
    assert [r.split()[0] for r in rows] == ["dir", "file"]
    assert rows[1].split()[2] == "5" and rows[1].endswith(" f.txt")
    p = cli(daemon, "files", "ls", "-q", sbx, "/workspace/a")
    assert p.stdout == "b\nf.txt\n"
    p = cli(daemon, "files", "ls", "--json", sbx, "/workspace/a/b")
    assert [e["name"] for e in json.loads(p.stdout)["entries"]] == ["c"]
    # the directory mkdir made holds nothing it left behind
    p = cli(daemon, "files", "ls", "-q", sbx, "/workspace/a/b/c")
    assert p.returncode == 0 and p.stdout == ""

    put(daemon, sbx, "/workspace/g.txt", b"x")
    # every path is checked before any request: nothing removed
    p = cli(daemon, "files", "rm", sbx, "/workspace/a/f.txt", "relative")
    assert p.returncode == 125 and "not an absolute path" in p.stderr
    assert cli(daemon, "files", "ls", "-q", sbx, "/workspace/a").stdout == "b\nf.txt\n"
    # one missing: the others are removed all the same
    p = cli(daemon, "files", "rm", sbx, "/workspace/a/f.txt", "/workspace/nope", "/workspace/g.txt")
    assert p.returncode == 125
    assert p.stdout == "/workspace/a/f.txt\n/workspace/g.txt\n"
    assert "(file_not_found" in p.stderr
    assert cli(daemon, "files", "ls", "-q", sbx, "/workspace/a").stdout == "b\n"
    # a directory is not a file
    p = cli(daemon, "files", "rm", sbx, "/workspace/a/b")
    assert p.returncode == 125 and "(not_a_file" in p.stderr
    p = cli(daemon, "files", "ls", sbx, "/workspace/nope")
    assert p.returncode == 125 and "(file_not_found" in p.stderr


# ---- --json and -q ----------------------------------------------------------------


def test_json_and_quiet(daemon, sbx):
    tid = daemon.submit(command=["true"])
    p = cli(daemon, "ps", "-a", "-q")
    assert p.returncode == 0, p.stderr
    assert tid in p.stdout.split()
    assert all(line.startswith("tsk_") for line in p.stdout.split())
    p = cli(daemon, "ps", "-a", "--json")
    assert tid in [t["id"] for t in json.loads(p.stdout)]
    p = cli(daemon, "status", "--json", tid)
    assert json.loads(p.stdout)["id"] == tid
    p = cli(daemon, "sandbox", "ls", "-q")
    assert sbx in p.stdout.split()
    p = cli(daemon, "sandbox", "ls", "--json")
    assert sbx in [s["id"] for s in json.loads(p.stdout)]
    p = cli(daemon, "sandbox", "inspect", sbx, "--json")
    assert json.loads(p.stdout)["id"] == sbx
    p = cli(daemon, "sandbox", "network", sbx)
    assert json.loads(p.stdout)["mode"] == "none"
    for argv in (["ps", "-q", "--json"], ["sandbox", "ls", "-q", "--json"]):
        p = cli(daemon, *argv)
        assert p.returncode == 125 and "exclude each other" in p.stderr
    # --json where it means nothing is refused, not ignored
    p = cli(daemon, "sandbox", "pause", "--json", sbx)
    assert p.returncode == 125 and "unknown option" in p.stderr


def test_version_on_both_binaries():
    from daemon import AGENTBOXD
    for binary in (AGENTBOX, AGENTBOXD):
        p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert re.fullmatch(r"agentboxd? \d+\.\d+\.\d+\S*\n", p.stdout), p.stdout


# ---- every route has a verb ------------------------------------------------------

# route -> the verb that calls it; a route of docs/api.md's list missing here fails
ROUTE_VERBS = {
    "GET /v1/tasks": "ps",
    "POST /v1/tasks": "submit",
    "GET /v1/tasks/{id}": "status",
    "POST /v1/tasks/{id}/cancel": "cancel",
    "GET /v1/tasks/{id}/events": "wait",
    "GET /v1/tasks/{id}/logs": "logs",
    "DELETE /v1/tasks/{id}": "rm",
    "GET /v1/tasks/{id}/artifacts": "artifacts",
    "GET /v1/tasks/{id}/artifacts/{path}": "artifacts",
    "GET /v1/sandboxes": "sandbox ls",
    "POST /v1/sandboxes": "sandbox create",
    "GET /v1/sandboxes/{id}": "sandbox inspect",
    "DELETE /v1/sandboxes/{id}": "sandbox rm",
    "POST /v1/sandboxes/{id}/timeout": "sandbox timeout",
    "POST /v1/sandboxes/{id}/pause": "sandbox pause",
    "POST /v1/sandboxes/{id}/resume": "sandbox resume",
    "POST /v1/sandboxes/{id}/exec": "exec",
    "GET /v1/sandboxes/{id}/processes": "proc ls",
    "GET /v1/sandboxes/{id}/network": "sandbox network",
    "POST /v1/sandboxes/{id}/commit": "sandbox commit",
    "GET /v1/sandboxes/{id}/processes/{pid}/output": "proc output",
    "POST /v1/sandboxes/{id}/processes/{pid}/kill": "proc kill",
    "GET /v1/sandboxes/{id}/files": "files ls",
    "PUT /v1/sandboxes/{id}/files": "cp",
    "DELETE /v1/sandboxes/{id}/files": "files rm",
    "GET /v1/tenants": "tenant ls",
    "POST /v1/tenants": "tenant create",
    "GET /v1/tenants/{id}": "tenant show",
    "DELETE /v1/tenants/{id}": "tenant rm",
    "PATCH /v1/tenants/{id}": "tenant set",
    "GET /v1/keys": "key ls",
    "POST /v1/keys": "key create",
    "DELETE /v1/keys/{id}": "key revoke",
    "GET /v1/me": "whoami",
    "GET /v1/audit": "audit",
    "GET /v1/images": "image ls",
    "POST /v1/images/import": "image import",
    "POST /v1/images/bootstrap": "image bootstrap",
    "POST /v1/images/prune": "image prune",
    "GET /v1/images/{ref}/export": "image export",
    "GET /v1/images/{ref}": "image inspect",
    "DELETE /v1/images/{ref}": "image rm",
    "POST /v1/images/pull": "image pull",
    "POST /v1/inputs": "submit",  # a --file past 1 MiB is sent ahead as an input
}
# routes no person calls, and why
NO_VERB = {
    "GET /healthz": "the liveness probe of load balancers: no credentials, answers ok",
    "GET /v1/sandboxes/{id}/exec": "a browser's terminal; `agentbox exec -t` opens the same "
                                   "terminal with the POST form",
}


def api_routes():
    """docs/api.md's route list (tests/unit/test-api-docs.c holds it to the router's table)."""
    text = open(os.path.join(ROOT, "docs", "api.md")).read()
    section = text.split("\n## Routes\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `([A-Z]+ /\S*)`$", section, re.M)


def test_every_route_has_a_verb():
    routes = api_routes()
    assert len(routes) >= 40
    missing = [r for r in routes if r not in ROUTE_VERBS and r not in NO_VERB]
    assert not missing, f"routes without a verb of agentbox: {missing}"
    stale = [r for r in ROUTE_VERBS if r not in routes]
    assert not stale, f"ROUTE_VERBS names routes the API no longer has: {stale}"
    top = subprocess.run([AGENTBOX, "--help"], capture_output=True, text=True, timeout=30)
    assert top.returncode == 0
    listed = re.findall(r"^  (\S+) ", top.stdout.split("verbs:\n", 1)[1], re.M)
    for route, verb in ROUTE_VERBS.items():
        words = verb.split()
        assert words[0] in listed, f"{route}: {words[0]} is not in agentbox --help"
        if len(words) > 1:
            p = subprocess.run([AGENTBOX, words[0], "--help"], capture_output=True, text=True,
                               timeout=30)
            assert re.search(rf"^  {words[1]} ", p.stdout, re.M), \
                f"{route}: {verb} is not in agentbox {words[0]} --help"
        p = subprocess.run([AGENTBOX, *words, "--help"], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 0, f"agentbox {verb} --help: {p.stderr}"
        assert p.stdout.startswith(f"usage: agentbox {verb}"), p.stdout[:80]


def test_every_verb_has_help():
    top = subprocess.run([AGENTBOX, "--help"], capture_output=True, text=True, timeout=30)
    for verb in re.findall(r"^  (\S+) ", top.stdout.split("verbs:\n", 1)[1], re.M):
        if verb.startswith("-"):
            continue
        p = subprocess.run([AGENTBOX, verb, "--help"], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 0, f"agentbox {verb} --help: {p.stderr}"
        assert p.stdout.startswith("usage: agentbox "), verb


# ---- cp -r ---------------------------------------------------------------------------


def tree(root):
    """{relative path: bytes, or None for a directory} of a local tree (no symlinks)."""
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != ".":
            out[rel] = None
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                out[os.path.normpath(os.path.join(rel, f))] = open(p, "rb").read()
    return out


def test_cp_recursive_both_ways(daemon, sbx, tmp_path):
    src = tmp_path / "proj"
    (src / "a" / "b").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "top.txt").write_text("top\n")
    (src / "a" / "bin").write_bytes(bytes(range(256)) * 100)
    (src / "a" / "b" / "deep.txt").write_text("deep\n")
    (src / "a" / "zero").write_bytes(b"")
    os.symlink("/etc/passwd", src / "link")
    want = tree(src)

    p = cli(daemon, "cp", "-r", str(src), f"{sbx}:/workspace/copy")
    assert p.returncode == 0, p.stderr
    assert "link: left out" in p.stderr  # a symlink is not followed
    p = cli(daemon, "files", "ls", "-q", sbx, "/workspace/copy")
    assert p.stdout.split() == ["a", "empty", "top.txt"]
    # a PATH ending in / gets LOCAL's name
    p = cli(daemon, "cp", "--recursive", str(src), f"{sbx}:/tmp/")
    assert p.returncode == 0, p.stderr
    assert cli(daemon, "files", "ls", "-q", sbx, "/tmp/proj").stdout.split() == \
        ["a", "empty", "top.txt"]

    back = tmp_path / "back"
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/copy", str(back))
    assert p.returncode == 0, p.stderr
    assert tree(back) == want  # byte for byte, empty directories too
    # an existing directory gets PATH's name inside it
    p = cli(daemon, "cp", "-r", f"{sbx}:/tmp/proj", str(back))
    assert p.returncode == 0, p.stderr
    assert tree(back / "proj") == want

    # without -r a directory is refused, with -r a file is
    p = cli(daemon, "cp", str(src), f"{sbx}:/workspace/x")
    assert p.returncode == 125 and "cp -r" in p.stderr
    p = cli(daemon, "cp", "-r", str(src / "top.txt"), f"{sbx}:/workspace/x")
    assert p.returncode == 125 and "not a directory" in p.stderr
