"""The interactive-sandbox verbs of `agentbox` (sandbox create, ls, inspect,
pause, resume, timeout, rm; exec; cp): what they send, what they print and
how they exit, first against a fake agentboxd (fakedaemon.py, no root or
sandbox needed), then end to end against the real daemon.
"""
import calendar
import json
import os
import select
import stat
import subprocess
import time

import pytest

from conftest import AGENTBOX
import fakedaemon
from fakedaemon import FakeDaemon, is_sandbox_id, sandbox_id

S1 = sandbox_id(1)
S2 = sandbox_id(2)
S3 = sandbox_id(3)
# every byte value, then a stretch that is not UTF-8 at all
BINARY = bytes(range(256)) * 64 + b"\xff\xfe\x00\x00\xc3\x28" * 1000
# Counts to 3, each line held until the test touches GATES<n> (where the
# command runs: this machine for the fake, the sandbox for the real daemon);
# it gives up after 60 s with exit 9, so output held back fails, never hangs.
GATES = f"/tmp/agentbox-test-gate-{os.getpid()}-"
COUNT = ["sh", "-c", "for i in 1 2 3; do echo $i; n=0; while [ ! -e " + GATES + "$i ]; do "
         "sleep 0.05; n=$((n+1)); [ $n -lt 1200 ] || exit 9; done; done"]


@pytest.fixture
def fake(tmp_path):
    d = FakeDaemon(str(tmp_path / "agentbox.sock")).start()
    yield d
    d.stop()


def cli(sock, *args, timeout=60, input=None, text=True, env=None, cwd=None):
    """`agentbox VERB [SUB] --socket SOCK ARGS...`: --socket goes right after the verb."""
    args = list(args)
    at = 2 if args[0] == "sandbox" and len(args) > 1 and not args[1].startswith("-") else 1
    argv = [AGENTBOX, *args[:at], "--socket", sock, *args[at:]]
    e = dict(os.environ)
    e.pop("AGENTBOX_HOST", None)
    e.pop("AGENTBOX_TOKEN", None)
    e.pop("AGENTBOX_KEY", None)
    e.update(env or {})
    return subprocess.run(argv, capture_output=True, text=text, timeout=timeout, input=input,
                          env=e, cwd=cwd)


def one_line_error(proc, verb):
    err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode()
    lines = err.strip().split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith(f"agentbox: {verb}: "), err
    return lines[0]


def first_line_within(proc, seconds):
    """Read proc's stdout pipe as bytes come, until a whole line or the deadline."""
    fd = proc.stdout.fileno()
    buf = b""
    end = time.monotonic() + seconds
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return buf


def check_streams(sock, sid):
    """exec's every line reaches our stdout while the command still runs: the
    command goes on to its next line only once the test has seen this one
    (no timing: output held back would leave the command at its gate)."""
    proc = subprocess.Popen([AGENTBOX, "exec", "--socket", sock, sid, "--", *COUNT],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = b""
    try:
        for n in (1, 2, 3):
            line = first_line_within(proc, 30)
            assert line == f"{n}\n".encode(), (out, line)
            out += line
            p = cli(sock, "exec", sid, "--", "touch", f"{GATES}{n}")  # beside it, not after
            assert p.returncode == 0, p.stderr
        out += proc.stdout.read()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for n in (1, 2, 3):  # the fake ran them on this machine
            if os.path.exists(f"{GATES}{n}"):
                os.unlink(f"{GATES}{n}")
    assert out == b"1\n2\n3\n"


# ==== against the fake ===================================================

# ---- sandbox create -----------------------------------------------------

def test_create_sends_only_what_was_given(fake):
    p = cli(fake.path, "sandbox", "create")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    assert p.stdout == sid + "\n" and is_sandbox_id(sid) and sid in fake.sandboxes
    req, = fake.requests_to("POST", "/v1/sandboxes")
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {}


def test_create_converts_every_option(fake):
    p = cli(fake.path, "sandbox", "create", "--memory", "1g", "--cpus", "0.5", "--pids", "64",
            "--disk", "1500k", "--timeout", "1m30s", "--env", "A=1", "--env", "B=x=y",
            "--metadata", "owner=agent-7", "--metadata", '{"n": [1, 2]}')
    assert p.returncode == 0, p.stderr
    body = fake.requests_to("POST", "/v1/sandboxes")[0].json()
    assert body == {
        "limits": {"memory_mb": 1024, "cpus": 0.5, "pids": 64, "disk_mb": 2},
        "timeout_s": 90,
        "env": {"A": "1", "B": "x=y"},
        "metadata": {"owner": "agent-7", "n": [1, 2]},
    }
    assert isinstance(body["timeout_s"], int)


def test_create_network_with_a_rate(fake):
    p = cli(fake.path, "sandbox", "create", "--network-rate", "50", "--network", "open")
    assert p.returncode == 0, p.stderr
    body = fake.requests_to("POST", "/v1/sandboxes")[0].json()
    assert body == {"network": {"mode": "open", "rate_mbit": 50}}


def test_create_timeout_in_whole_seconds(fake):
    p = cli(fake.path, "sandbox", "create", "--timeout", "1500ms", "--cpus", "2")
    assert p.returncode == 0, p.stderr
    body = fake.requests_to("POST", "/v1/sandboxes")[0].json()
    assert body == {"timeout_s": 2, "limits": {"cpus": 2}}


@pytest.mark.parametrize("args, needle", [
    (["--memory", "12xb"], "--memory: '12xb' is not a size (e.g. 512m, 2g)"),
    (["--cpus", "0"], "--cpus: '0' is not a positive number"),
    (["--pids", "x"], "--pids: 'x' is not a positive whole number"),
    (["--disk", "0"], "--disk: must be more than 0"),
    (["--timeout", "soon"], "--timeout: 'soon' is not a duration"),
    (["--env", "NOEQUALS"], "--env: 'NOEQUALS' is not KEY=VALUE"),
    (["--env", "A=1", "--env", "A=2"], "--env: A is given twice"),
    (["--metadata", "k"], "--metadata: 'k' is not KEY=VALUE"),
    (["--metadata", "k=1", "--metadata", '{"k": 2}'], "--metadata: k is given twice"),
    (["--metadata", "[1]"], "--metadata: must be a JSON object"),
    (["--bogus"], "unknown option '--bogus' (see agentbox sandbox create --help)"),
    (["--memory"], "option '--memory' needs a value"),
    (["extra"], "unexpected argument 'extra'"),
    (["--network-rate", "0", "--network", "open"], "--network-rate: '0' is not a number"),
    (["--network", "none", "--network-rate", "5"], "--network-rate: only with --network"),
    (["--network-rate", "5"], "--network-rate: only with --network open or allow:"),
])
def test_create_bad_options_send_nothing(fake, args, needle):
    p = cli(fake.path, "sandbox", "create", *args)
    assert p.returncode == 125
    assert needle in one_line_error(p, "sandbox create")
    assert fake.requests == []


def test_create_api_error(fake):
    fake.error_next = (503, "sandbox_failed", "the sandbox could not be built: no uid range")
    p = cli(fake.path, "sandbox", "create")
    assert p.returncode == 125
    assert one_line_error(p, "sandbox create") == (
        "agentbox: sandbox create: the sandbox could not be built: no uid range "
        "(sandbox_failed)")
    p = cli(fake.path, "sandbox", "create", "--timeout", "30d")
    assert p.returncode == 125
    assert one_line_error(p, "sandbox create") == (
        "agentbox: sandbox create: timeout_s must be an integer from 1 to 604800 "
        "(invalid_field, field timeout_s)")


def test_sandbox_help_and_unknown_command(fake):
    p = subprocess.run([AGENTBOX, "sandbox", "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for sub in ("create", "ls", "inspect", "pause", "resume", "timeout", "rm"):
        assert f"\n  {sub} " in p.stdout
    p = subprocess.run([AGENTBOX, "sandbox"], capture_output=True, text=True)
    assert p.returncode == 125 and "usage: agentbox sandbox" in p.stderr
    p = subprocess.run([AGENTBOX, "sandbox", "frob"], capture_output=True, text=True)
    assert p.returncode == 125
    assert p.stderr == ("agentbox: sandbox: unknown command 'frob' "
                        "(see agentbox sandbox --help)\n")
    for sub in ("create", "ls", "inspect", "pause", "resume", "timeout", "rm"):
        p = subprocess.run([AGENTBOX, "sandbox", sub, "--help"], capture_output=True,
                           text=True)
        assert p.returncode == 0 and p.stdout.startswith(f"usage: agentbox sandbox {sub}")
        assert "exit status" in p.stdout
    p = subprocess.run([AGENTBOX, "--help"], capture_output=True, text=True)
    for verb in ("sandbox", "exec", "cp"):
        assert f"\n  {verb} " in p.stdout


# ---- sandbox ls ---------------------------------------------------------

def test_ls_table_pages_and_all(fake):
    fake.page_size = 2
    # Every age sits in the middle of its display unit, so neither the time
    # the CLI takes to start nor a small step of the wall clock (under
    # emulation, in the v2 guest) can move it across a boundary.
    now = time.time()
    fake.add_sandbox(S1, created=now - 150, timeout_s=300)
    fake.add_sandbox(S2, status="paused", created=now - 3.5 * 3600, timeout_s=5 * 3600)
    fake.add_sandbox(S3, status="running")
    fake.add_sandbox(sandbox_id(4), status="ended", end_reason="expired")
    p = cli(fake.path, "sandbox", "ls")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "CREATED", "EXPIRES"]
    assert len(lines) == 4  # header + 3 live sandboxes over two pages
    assert lines[1].split() == [S1, "running", "2m", "ago", "in", "2m"]
    assert lines[2].split() == [S2, "paused", "3h", "ago", "in", "1h"]
    gets = fake.requests_to("GET", "/v1/sandboxes")
    assert [r.query for r in gets] == [
        {"status": ["running,paused"]},
        {"status": ["running,paused"], "after": [S2]},
    ]
    p = cli(fake.path, "sandbox", "ls", "-a")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 5
    assert lines[4].split()[:3] == [sandbox_id(4), "ended", "(expired)"]
    assert lines[4].split()[-1] == "-"
    assert fake.requests[-1].query["status"] == ["running,paused,ended"]


def test_ls_json(fake):
    fake.page_size = 1
    fake.add_sandbox(S1)
    fake.add_sandbox(S2, status="ended", end_reason="deleted")
    p = cli(fake.path, "sandbox", "ls", "--json", "--all")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [fake.sandboxes[S1], fake.sandboxes[S2]]
    p = cli(fake.path, "sandbox", "ls", "--json")
    assert json.loads(p.stdout) == [fake.sandboxes[S1]]
    fake.sandboxes.clear()
    p = cli(fake.path, "sandbox", "ls", "--json")
    assert p.stdout == "[]\n"
    p = cli(fake.path, "sandbox", "ls")
    assert p.stdout.split() == ["ID", "STATUS", "CREATED", "EXPIRES"]


def test_ls_bad_input(fake):
    p = cli(fake.path, "sandbox", "ls", "extra")
    assert p.returncode == 125
    assert "unexpected argument 'extra'" in one_line_error(p, "sandbox ls")
    p = cli(fake.path, "sandbox", "ls", "--bogus")
    assert p.returncode == 125
    assert "unknown option '--bogus'" in one_line_error(p, "sandbox ls")
    assert fake.requests == []


# ---- inspect, pause, resume, timeout, rm --------------------------------

def test_inspect(fake):
    fake.add_sandbox(S1, metadata={"owner": "agent-7"})
    p = cli(fake.path, "sandbox", "inspect", S1)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == fake.sandboxes[S1]
    assert p.stdout.startswith('{\n  "id": ')
    req, = fake.requests
    assert (req.method, req.path) == ("GET", f"/v1/sandboxes/{S1}")


@pytest.mark.parametrize("sub", ["inspect", "pause", "resume", "rm"])
def test_unknown_and_malformed_ids(fake, sub):
    p = cli(fake.path, "sandbox", sub, S2)
    assert p.returncode == 125
    assert one_line_error(p, f"sandbox {sub}") == (
        f"agentbox: sandbox {sub}: no sandbox {S2} (not_found)")
    p = cli(fake.path, "sandbox", sub, "sbx_nope")
    assert p.returncode == 125
    assert one_line_error(p, f"sandbox {sub}") == (
        f"agentbox: sandbox {sub}: 'sbx_nope' is not a sandbox id (invalid_id)")
    n = len(fake.requests)
    p = cli(fake.path, "sandbox", sub, "../x")
    assert p.returncode == 125
    assert one_line_error(p, f"sandbox {sub}") == (
        f"agentbox: sandbox {sub}: '../x' is not a sandbox id")
    assert len(fake.requests) == n  # not sent


@pytest.mark.parametrize("sub", ["inspect", "pause", "resume"])
def test_one_id_only(fake, sub):
    for args in ([], [S1, S2]):
        p = cli(fake.path, "sandbox", sub, *args)
        assert p.returncode == 125
        assert one_line_error(p, f"sandbox {sub}") == (
            f"agentbox: sandbox {sub}: give one sandbox ID "
            f"(see agentbox sandbox {sub} --help)")
    assert fake.requests == []


def test_pause_and_resume(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "sandbox", "pause", S1)
    assert (p.returncode, p.stdout) == (0, "paused\n"), p.stderr
    assert fake.sandboxes[S1]["status"] == "paused"
    p = cli(fake.path, "sandbox", "resume", S1)
    assert (p.returncode, p.stdout) == (0, "running\n"), p.stderr
    assert [(r.method, r.path, r.body) for r in fake.requests] == [
        ("POST", f"/v1/sandboxes/{S1}/pause", b""),
        ("POST", f"/v1/sandboxes/{S1}/resume", b""),
    ]
    fake.add_sandbox(S2, status="ended", end_reason="expired")
    p = cli(fake.path, "sandbox", "pause", S2)
    assert p.returncode == 125
    assert one_line_error(p, "sandbox pause") == (
        f"agentbox: sandbox pause: sandbox {S2} has ended (sandbox_ended)")


def test_timeout(fake):
    fake.add_sandbox(S1)
    t0 = time.time()
    p = cli(fake.path, "sandbox", "timeout", S1, "1h")
    t1 = time.time()
    assert p.returncode == 0, p.stderr
    assert p.stdout == fake.sandboxes[S1]["expires_at"] + "\n"
    req, = fake.requests
    assert (req.method, req.path, req.json()) == (
        "POST", f"/v1/sandboxes/{S1}/timeout", {"timeout_s": 3600})
    assert req.headers["content-type"] == "application/json"
    expires = calendar.timegm(time.strptime(p.stdout[:19], "%Y-%m-%dT%H:%M:%S"))
    # the fake set it while the command ran: between t0 and t1 (its text has whole seconds)
    assert int(t0) + 3600 <= expires <= t1 + 3600, (t0, expires, t1)
    p = cli(fake.path, "sandbox", "timeout", S1, "2500ms")
    assert p.returncode == 0
    assert fake.requests[-1].json() == {"timeout_s": 3}


@pytest.mark.parametrize("args, needle", [
    ([], "give a sandbox ID and a DURATION"),
    ([S1], "give a sandbox ID and a DURATION"),
    ([S1, "soon"], "DURATION: 'soon' is not a duration (e.g. 90s, 2h)"),
    ([S1, "0s"], "DURATION: '0s' is not a duration"),
    (["../x", "5m"], "'../x' is not a sandbox id"),
])
def test_timeout_bad_input(fake, args, needle):
    fake.add_sandbox(S1)
    p = cli(fake.path, "sandbox", "timeout", *args)
    assert p.returncode == 125
    assert needle in one_line_error(p, "sandbox timeout")
    assert fake.requests == []


def test_timeout_refused(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "sandbox", "timeout", S1, "30d")
    assert p.returncode == 125
    assert one_line_error(p, "sandbox timeout").endswith("(invalid_field, field timeout_s)")


def test_rm(fake):
    fake.add_sandbox(S1)
    fake.add_sandbox(S2)
    p = cli(fake.path, "sandbox", "rm", S1, S2)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"{S1}\n{S2}\n"
    # each is looked up before any is removed
    assert [(r.method, r.path) for r in fake.requests] == [
        ("GET", f"/v1/sandboxes/{S1}"), ("GET", f"/v1/sandboxes/{S2}"),
        ("DELETE", f"/v1/sandboxes/{S1}"), ("DELETE", f"/v1/sandboxes/{S2}")]
    assert "content-length" not in fake.requests[2].headers
    assert fake.sandboxes[S1]["end_reason"] == "deleted"
    # one unknown: none is removed
    fake.add_sandbox(S3)
    p = cli(fake.path, "sandbox", "rm", S1, sandbox_id(9), S3)
    assert p.returncode == 125
    assert p.stdout == ""
    assert p.stderr.splitlines() == [
        f"agentbox: sandbox rm: no sandbox {sandbox_id(9)} (not_found); none removed",
    ]
    assert fake.sandboxes[S3]["status"] == "running"
    # again: one has ended; one still there is removed all the same
    p = cli(fake.path, "sandbox", "rm", S1, S3)
    assert p.returncode == 125
    assert p.stdout == f"{S3}\n"
    assert p.stderr.splitlines() == [
        f"agentbox: sandbox rm: sandbox {S1} has ended (sandbox_ended)",
    ]
    assert fake.sandboxes[S3]["status"] == "ended"


def test_rm_checks_every_id_first(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "sandbox", "rm", S1, "a/b")
    assert p.returncode == 125
    assert one_line_error(p, "sandbox rm") == "agentbox: sandbox rm: 'a/b' is not a sandbox id"
    p = cli(fake.path, "sandbox", "rm")
    assert "give one or more sandbox IDs" in one_line_error(p, "sandbox rm")
    assert fake.requests == []


# ---- exec ---------------------------------------------------------------

def test_exec_streams_as_the_command_writes(fake):
    fake.add_sandbox(S1)
    check_streams(fake.path, S1)
    req = fake.requests_to("POST", f"/v1/sandboxes/{S1}/exec")[0]  # then the gates' touches
    assert req.headers["accept"] == "text/event-stream"
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {"command": COUNT}


def test_exec_stdout_and_stderr_apart(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "exec", S1, "--", "sh", "-c", "echo out; echo err >&2; echo out2")
    assert p.returncode == 0, p.stderr
    assert (p.stdout, p.stderr) == ("out\nout2\n", "err\n")


@pytest.mark.parametrize("cmd, code", [
    (["true"], 0),
    (["sh", "-c", "exit 3"], 3),
    (["sh", "-c", "exit 255"], 255),
    (["sh", "-c", "kill -9 $$"], 137),
    (["sh", "-c", "kill -15 $$"], 143),
    (["no-such-command-agentbox"], 127),
])
def test_exec_exit_status_is_the_commands(fake, cmd, code):
    fake.add_sandbox(S1)
    p = cli(fake.path, "exec", S1, "--", *cmd)
    assert p.returncode == code, p.stderr
    assert p.stderr == ""


def test_exec_options_are_sent(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "exec", "--env", "A=1", "--env", "B=two", "--cwd", "/workspace/x",
            "--timeout", "90s", S1, "--", "sh", "-c", 'echo "$A $B"')
    assert p.returncode == 0, p.stderr
    assert p.stdout == "1 two\n"
    body = fake.requests_to("POST", f"/v1/sandboxes/{S1}/exec")[0].json()
    assert body == {"env": {"A": "1", "B": "two"}, "cwd": "/workspace/x", "timeout_s": 90,
                    "command": ["sh", "-c", 'echo "$A $B"']}


def test_exec_options_end_at_the_id(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "exec", S1, "echo", "-n", "--env", "x")  # no --: echo's own flags
    assert p.returncode == 0, p.stderr
    assert p.stdout == "--env x"
    body = fake.requests_to("POST", f"/v1/sandboxes/{S1}/exec")[0].json()
    assert body == {"command": ["echo", "-n", "--env", "x"]}


def test_exec_stdin(fake):
    fake.add_sandbox(S1)
    text = "héllo\n" * 1000
    p = cli(fake.path, "exec", "-i", S1, "--", "cat", input=text)
    assert (p.returncode, p.stdout, p.stderr) == (0, text, "")
    assert fake.requests[-1].json()["stdin"] == text
    # without -i the command's stdin is empty, and ours is not read
    p = cli(fake.path, "exec", S1, "--", "wc", "-c", input="ignored")
    assert p.stdout.strip() == "0"
    assert "stdin" not in fake.requests[-1].json()


def test_exec_stdin_limits(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "exec", "--stdin", S1, "--", "wc", "-c", input="x" * (1 << 20))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(1 << 20)
    n = len(fake.requests)
    p = cli(fake.path, "exec", "-i", S1, "--", "wc", "-c", input="x" * ((1 << 20) + 1))
    assert p.returncode == 125
    assert one_line_error(p, "exec") == "agentbox: exec: --stdin: stdin holds more than 1 MiB"
    p = cli(fake.path, "exec", "-i", S1, "--", "cat", input=b"\xff\xfe", text=False)
    assert p.returncode == 125
    assert one_line_error(p, "exec") == "agentbox: exec: --stdin: stdin is not UTF-8 text"
    assert len(fake.requests) == n


def test_exec_detach(fake):
    fake.add_sandbox(S1)
    p = cli(fake.path, "exec", "-d", S1, "--", "sleep", "100")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().isdigit()
    req = fake.requests[-1]
    assert req.json() == {"command": ["sleep", "100"], "background": True}
    assert req.headers["accept"] == "application/json"


def test_exec_timed_out_and_oom(fake):
    fake.add_sandbox(S1)
    end = {"pid": 7, "exit_code": 137, "signal": 9, "oom_killed": False, "timed_out": True,
           "duration_ms": 1000, "truncated": False}
    fake.exec_events[S1] = [("start", {"pid": 7}), ("stdout", {"data": "working\n"}),
                            ("exit", end)]
    p = cli(fake.path, "exec", "--timeout", "1s", S1, "--", "sleep", "100")
    assert p.returncode == 124
    assert p.stdout == "working\n"
    assert p.stderr == "agentbox: command timed out\n"
    fake.exec_events[S1] = [("start", {"pid": 8}),
                            ("exit", dict(end, timed_out=False, oom_killed=True))]
    p = cli(fake.path, "exec", S1, "--", "python3", "-c", "x = ' ' * (1 << 40)")
    assert p.returncode == 137
    assert p.stderr == "agentbox: command killed: out of memory\n"


def test_exec_timeout_really_kills(fake):
    fake.add_sandbox(S1)
    t0 = time.monotonic()
    p = cli(fake.path, "exec", "--timeout", "1s", S1, "--", "sleep", "30")
    assert p.returncode == 124
    assert p.stderr == "agentbox: command timed out\n"
    # ended by the timeout, not by sleep's own end at 30 s (which, not how fast)
    assert time.monotonic() - t0 < 30


def test_exec_broken_stream(fake):
    fake.add_sandbox(S1)
    fake.exec_events[S1] = [("start", {"pid": 12}), ("stdout", {"data": "partial\n"}),
                            ("drop",)]
    p = cli(fake.path, "exec", S1, "--", "sleep", "100")
    assert p.returncode == 125
    assert p.stdout == "partial\n"
    line = one_line_error(p, "exec")
    assert "closed the connection" in line
    assert line.endswith("before the command ended (it goes on in the sandbox as pid 12)")


def test_exec_error_event(fake):
    """agentboxd says in the stream why it cannot go on (the sandbox died under it)."""
    fake.add_sandbox(S1)
    fake.exec_events[S1] = [("start", {"pid": 4}), ("stdout", {"data": "a"}),
                            ("error", {"error": {"code": "sandbox_ended",
                                                 "message": "the sandbox ended before the "
                                                            "process did"}})]
    p = cli(fake.path, "exec", S1, "--", "sleep", "100")
    assert p.returncode == 125
    assert p.stdout == "a"
    assert one_line_error(p, "exec") == (
        "agentbox: exec: the sandbox ended before the process did (sandbox_ended)")


def test_exec_without_a_stream(fake):
    """A daemon that answers the whole result as JSON is understood too."""
    fake.add_sandbox(S1)

    def json_only(self, req, sid):
        self._send(200, {"pid": 3, "exit_code": 5, "signal": None, "stdout": "o\n",
                         "stderr": "e\n", "oom_killed": False, "timed_out": False,
                         "duration_ms": 1, "truncated": False})

    fakedaemon._Handler._exec, saved = json_only, fakedaemon._Handler._exec
    try:
        p = cli(fake.path, "exec", S1, "--", "x")
    finally:
        fakedaemon._Handler._exec = saved
    assert (p.returncode, p.stdout, p.stderr) == (5, "o\n", "e\n")


def test_exec_answer_it_cannot_read(fake):
    fake.add_sandbox(S1)

    def text(self, req, sid):
        self._send(200, b"hello", "text/plain")

    fakedaemon._Handler._exec, saved = text, fakedaemon._Handler._exec
    try:
        p = cli(fake.path, "exec", S1, "--", "x")
    finally:
        fakedaemon._Handler._exec = saved
    assert p.returncode == 125
    assert one_line_error(p, "exec") == (
        "agentbox: exec: agentboxd answered neither an event stream nor JSON "
        "(Content-Type text/plain)")


def test_exec_refused(fake):
    fake.add_sandbox(S1, status="paused")
    fake.add_sandbox(S2, status="ended", end_reason="expired")
    p = cli(fake.path, "exec", S1, "--", "true")
    assert p.returncode == 125
    assert one_line_error(p, "exec") == (
        f"agentbox: exec: sandbox {S1} is paused (sandbox_paused)")
    p = cli(fake.path, "exec", S2, "--", "true")
    assert one_line_error(p, "exec") == (
        f"agentbox: exec: sandbox {S2} has ended (sandbox_ended)")
    p = cli(fake.path, "exec", S3, "--", "true")
    assert one_line_error(p, "exec") == f"agentbox: exec: no sandbox {S3} (not_found)"
    p = cli(fake.path, "exec", "sbx_x", "--", "true")
    assert one_line_error(p, "exec") == "agentbox: exec: 'sbx_x' is not a sandbox id (invalid_id)"


@pytest.mark.parametrize("args, needle", [
    ([], "no sandbox given"),
    ([S1], "no command given"),
    ([S1, "--"], "no command given"),
    (["--cwd", "rel", S1, "true"], "--cwd: 'rel' is not an absolute path"),
    (["--timeout", "x", S1, "true"], "--timeout: 'x' is not a duration"),
    (["--env", "=1", S1, "true"], "--env: '=1' is not KEY=VALUE"),
    (["--bogus", S1, "true"], "unknown option '--bogus' (see agentbox exec --help)"),
    (["--cwd"], "option '--cwd' needs a value"),
    (["../x", "true"], "'../x' is not a sandbox id"),
])
def test_exec_bad_input_sends_nothing(fake, args, needle):
    p = cli(fake.path, "exec", *args)
    assert p.returncode == 125
    assert needle in one_line_error(p, "exec")
    assert fake.requests == []


def test_exec_help(fake):
    p = subprocess.run([AGENTBOX, "exec", "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for needle in ("124  --timeout passed", "137  the command ran out of memory",
                   "127  the command was not found", "-i, --stdin", "-d, --detach"):
        assert needle in p.stdout


# ---- cp -----------------------------------------------------------------

WEIRD = "/workspace/a b/x+y&z=1#?%25é.bin"


def test_cp_into_the_sandbox_byte_exact(fake, tmp_path):
    fake.add_sandbox(S1)
    src = tmp_path / "data.bin"
    src.write_bytes(BINARY)
    p = cli(fake.path, "cp", str(src), f"{S1}:{WEIRD}")
    assert p.returncode == 0, p.stderr
    assert (p.stdout, p.stderr) == ("", "")
    assert fake.files[(S1, WEIRD)] == BINARY
    req, = fake.requests
    assert req.method == "PUT" and req.path == f"/v1/sandboxes/{S1}/files"
    assert req.query == {"path": [WEIRD]}
    assert req.headers["content-type"] == "application/octet-stream"
    assert req.headers["content-length"] == str(len(BINARY))


def test_cp_into_a_directory_path_stdin_and_empty(fake, tmp_path):
    fake.add_sandbox(S1)
    src = tmp_path / "main.py"
    src.write_text("print(1)\n")
    p = cli(fake.path, "cp", str(src), f"{S1}:/workspace/")
    assert p.returncode == 0, p.stderr
    assert fake.files[(S1, "/workspace/main.py")] == b"print(1)\n"
    p = cli(fake.path, "cp", "-", f"{S1}:/tmp/in.bin", input=BINARY, text=False)
    assert p.returncode == 0, p.stderr
    assert fake.files[(S1, "/tmp/in.bin")] == BINARY
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    p = cli(fake.path, "cp", str(empty), f"{S1}:/tmp/empty")
    assert p.returncode == 0, p.stderr
    assert fake.files[(S1, "/tmp/empty")] == b""
    p = cli(fake.path, "cp", "-", f"{S1}:/tmp/", input="x")
    assert p.returncode == 125
    assert "name the file to write stdin to" in one_line_error(p, "cp")


def test_cp_a_large_file_streams(fake, tmp_path):
    fake.add_sandbox(S1)
    big = os.urandom(5 << 20) + BINARY
    src = tmp_path / "big"
    src.write_bytes(big)
    p = cli(fake.path, "cp", str(src), f"{S1}:/workspace/big")
    assert p.returncode == 0, p.stderr
    assert fake.files[(S1, "/workspace/big")] == big
    out = tmp_path / "back"
    p = cli(fake.path, "cp", f"{S1}:/workspace/big", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == big


def test_cp_out_of_the_sandbox_byte_exact(fake, tmp_path):
    fake.add_sandbox(S1)
    fake.files[(S1, WEIRD)] = BINARY
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "out.bin"
    p = cli(fake.path, "cp", f"{S1}:{WEIRD}", str(dest))
    assert p.returncode == 0, p.stderr
    assert dest.read_bytes() == BINARY
    req, = fake.requests
    assert (req.method, req.query) == ("GET", {"path": [WEIRD]})
    assert req.headers["accept"] == "application/octet-stream"
    assert os.listdir(tmp_path / "out") == ["out.bin"]  # no temporary file left
    assert stat.S_IMODE(dest.stat().st_mode) == 0o666 & ~_umask()
    # to stdout
    p = cli(fake.path, "cp", f"{S1}:{WEIRD}", "-", text=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout == BINARY


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_cp_out_replaces_atomically_and_keeps_the_mode(fake, tmp_path):
    fake.add_sandbox(S1)
    fake.files[(S1, "/workspace/r.txt")] = b"new\n"
    dest = tmp_path / "r.txt"
    dest.write_bytes(b"old content\n")
    dest.chmod(0o640)
    ino = dest.stat().st_ino
    p = cli(fake.path, "cp", f"{S1}:/workspace/r.txt", str(dest))
    assert p.returncode == 0, p.stderr
    assert dest.read_bytes() == b"new\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640
    assert dest.stat().st_ino != ino  # a new file renamed over the old one
    # into a directory: the file keeps its name
    sub = tmp_path / "dir"
    sub.mkdir()
    p = cli(fake.path, "cp", f"{S1}:/workspace/r.txt", str(sub))
    assert p.returncode == 0, p.stderr
    assert (sub / "r.txt").read_bytes() == b"new\n"


def test_cp_out_failure_leaves_local_alone(fake, tmp_path):
    fake.add_sandbox(S1)
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "keep.txt"
    dest.write_bytes(b"keep\n")
    p = cli(fake.path, "cp", f"{S1}:/workspace/missing", str(dest))
    assert p.returncode == 125
    assert one_line_error(p, "cp") == "agentbox: cp: no file /workspace/missing (file_not_found)"
    assert dest.read_bytes() == b"keep\n"
    assert os.listdir(tmp_path / "out") == ["keep.txt"]

    def cut(self, req, sid, sb):  # the body stops half way
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"x" * 500)
        self._drop()

    fakedaemon._Handler._files, saved = cut, fakedaemon._Handler._files
    try:
        p = cli(fake.path, "cp", f"{S1}:/workspace/x", str(dest))
    finally:
        fakedaemon._Handler._files = saved
    assert p.returncode == 125
    assert "closed the connection inside the body" in one_line_error(p, "cp")
    assert dest.read_bytes() == b"keep\n"
    assert os.listdir(tmp_path / "out") == ["keep.txt"]


def test_cp_refused(fake, tmp_path):
    fake.add_sandbox(S1, status="paused")
    src = tmp_path / "f"
    src.write_text("x")
    p = cli(fake.path, "cp", str(src), f"{S1}:/workspace/f")
    assert p.returncode == 125
    assert one_line_error(p, "cp") == f"agentbox: cp: sandbox {S1} is paused (sandbox_paused)"
    p = cli(fake.path, "cp", str(src), f"{S2}:/workspace/f")
    assert one_line_error(p, "cp") == f"agentbox: cp: no sandbox {S2} (not_found)"


@pytest.mark.parametrize("args, needle", [
    ([], "give a source and a destination"),
    (["a"], "give a source and a destination"),
    (["a", "b"], "one of the two must be ID:PATH and the other local"),
    ([f"{S1}:/a", f"{S2}:/b"], "one of the two must be ID:PATH and the other local"),
    (["LOCAL", f"{S1}:rel"], f"{S1}:rel: the sandbox path must be absolute"),
    (["/nonexistent-agentbox", f"{S1}:/a"], "/nonexistent-agentbox: No such file or directory"),
    (["/tmp", f"{S1}:/a"], "/tmp is a directory: cp -r copies one"),
    (["/dev/null", f"{S1}:/a"], "/dev/null is not a regular file"),
    (["--bogus", "a", "b"], "unknown option '--bogus'"),
])
def test_cp_bad_input_sends_nothing(fake, args, needle):
    p = cli(fake.path, "cp", *args)
    assert p.returncode == 125
    assert needle in one_line_error(p, "cp")
    assert fake.requests == []


def test_cp_too_large_is_refused_before_sending(fake, tmp_path):
    big = tmp_path / "sparse"
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    p = cli(fake.path, "cp", str(big), f"{S1}:/workspace/big")
    assert p.returncode == 125
    assert one_line_error(p, "cp") == (
        f"agentbox: cp: {big} is larger than 64 MiB, the most a sandbox file may hold")
    assert fake.requests == []


def test_cp_local_name_with_a_colon(fake, tmp_path):
    fake.add_sandbox(S1)
    fake.files[(S1, "/w/a")] = b"colon\n"
    p = cli(fake.path, "cp", f"{S1}:/w/a", "./x:y", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "x:y").read_bytes() == b"colon\n"


# ---- reaching the daemon ---------------------------------------------------

def test_connection_refused(tmp_path):
    import socket
    path = str(tmp_path / "dead.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)  # bound, never listening: connect is refused
    src = tmp_path / "f"
    src.write_text("x")
    try:
        for args in (["sandbox", "create"], ["sandbox", "ls"], ["sandbox", "inspect", S1],
                     ["sandbox", "pause", S1], ["sandbox", "resume", S1],
                     ["sandbox", "timeout", S1, "5m"], ["sandbox", "rm", S1],
                     ["exec", S1, "--", "true"], ["cp", str(src), f"{S1}:/a"],
                     ["cp", f"{S1}:/a", str(tmp_path / "g")]):
            p = cli(path, *args)
            verb = " ".join(args[:2]) if args[0] == "sandbox" else args[0]
            assert p.returncode == 125, (args, p.stderr)
            assert one_line_error(p, verb) == (
                f"agentbox: {verb}: cannot reach agentboxd at {path}: "
                "Connection refused (is it running?)")
    finally:
        s.close()


# ==== against the real agentboxd ==========================================

@pytest.fixture
def real(tmp_path):
    """A real agentboxd; skips when it does not serve interactive sandboxes yet."""
    from daemon import Daemon
    d = Daemon(tmp_path).start()
    status, _ = d.request("GET", "/v1/sandboxes")
    if status != 200:
        d.stop()
        pytest.skip("this agentboxd does not serve /v1/sandboxes yet")
    yield d
    # sandboxes outlive the daemon (their shims keep them): end every one first
    try:
        status, body = d.request("GET", "/v1/sandboxes?status=running,paused&limit=1000")
        for sb in body.get("sandboxes", []) if status == 200 else []:
            d.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    finally:
        d.stop()


def test_real_lifecycle(real):
    p = cli(real.socket, "sandbox", "create", "--memory", "256m", "--timeout", "10m",
            "--env", "GREETING=hi", "--metadata", "owner=test")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    assert sid.startswith("sbx_")
    p = cli(real.socket, "sandbox", "inspect", sid)
    assert p.returncode == 0, p.stderr
    sb = json.loads(p.stdout)
    assert sb["status"] == "running" and sb["limits"]["memory_mb"] == 256
    assert sb["metadata"] == {"owner": "test"}
    p = cli(real.socket, "sandbox", "ls")
    assert p.returncode == 0, p.stderr
    assert any(line.split()[:2] == [sid, "running"] for line in p.stdout.splitlines())

    p = cli(real.socket, "exec", sid, "--", "sh", "-c", 'echo "$GREETING"; echo err >&2')
    assert (p.returncode, p.stdout, p.stderr) == (0, "hi\n", "err\n")

    p = cli(real.socket, "sandbox", "pause", sid)
    assert (p.returncode, p.stdout) == (0, "paused\n"), p.stderr
    p = cli(real.socket, "exec", sid, "--", "true")
    assert p.returncode == 125
    assert one_line_error(p, "exec").endswith("(sandbox_paused)")
    p = cli(real.socket, "sandbox", "resume", sid)
    assert (p.returncode, p.stdout) == (0, "running\n"), p.stderr

    p = cli(real.socket, "sandbox", "timeout", sid, "1h")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == real.request("GET", f"/v1/sandboxes/{sid}")[1]["expires_at"]

    p = cli(real.socket, "sandbox", "rm", sid)
    assert (p.returncode, p.stdout) == (0, f"{sid}\n"), p.stderr
    p = cli(real.socket, "sandbox", "rm", sid)
    assert p.returncode == 125
    assert one_line_error(p, "sandbox rm").endswith("(sandbox_ended)")
    p = cli(real.socket, "sandbox", "ls", "--all")
    assert any(line.split()[:3] == [sid, "ended", "(deleted)"]
               for line in p.stdout.splitlines()), p.stdout
    p = cli(real.socket, "sandbox", "ls")
    assert sid not in p.stdout
    p = cli(real.socket, "exec", sid, "--", "true")
    assert one_line_error(p, "exec").endswith("(sandbox_ended)")


def test_real_errors(real):
    unknown = sandbox_id(123456)
    p = cli(real.socket, "sandbox", "inspect", unknown)
    assert p.returncode == 125
    assert one_line_error(p, "sandbox inspect").endswith("(not_found)")
    p = cli(real.socket, "sandbox", "inspect", "sbx_nope")
    assert p.returncode == 125
    assert one_line_error(p, "sandbox inspect").endswith("(invalid_id)")
    p = cli(real.socket, "exec", unknown, "--", "true")
    assert one_line_error(p, "exec").endswith("(not_found)")
    p = cli(real.socket, "sandbox", "create", "--timeout", "30d")
    assert p.returncode == 125
    assert "timeout_s" in one_line_error(p, "sandbox create")


@pytest.fixture
def real_sandbox(real):
    p = cli(real.socket, "sandbox", "create", "--timeout", "10m")
    assert p.returncode == 0, p.stderr
    yield real, p.stdout.strip()


def test_real_exec_streams(real_sandbox):
    real, sid = real_sandbox
    check_streams(real.socket, sid)


@pytest.mark.parametrize("cmd, code", [
    (["true"], 0),
    (["sh", "-c", "exit 3"], 3),
    (["sh", "-c", "kill -9 $$"], 137),
    (["sh", "-c", "kill -15 $$"], 143),
    (["no-such-command-agentbox"], 127),
])
def test_real_exec_exit_status(real_sandbox, cmd, code):
    real, sid = real_sandbox
    p = cli(real.socket, "exec", sid, "--", *cmd)
    assert p.returncode == code, p.stderr


def test_real_exec_stdin_env_cwd_timeout(real_sandbox):
    real, sid = real_sandbox
    text = "héllo\n" * 100
    p = cli(real.socket, "exec", "-i", sid, "--", "cat", input=text)
    assert (p.returncode, p.stdout, p.stderr) == (0, text, "")
    p = cli(real.socket, "exec", "--env", "K=v", "--cwd", "/tmp", sid, "--", "sh", "-c",
            'echo "$K $(pwd)"')
    assert (p.returncode, p.stdout) == (0, "v /tmp\n"), p.stderr
    t0 = time.monotonic()
    p = cli(real.socket, "exec", "--timeout", "1s", sid, "--", "sleep", "30")
    assert p.returncode == 124, p.stderr
    assert p.stderr == "agentbox: command timed out\n"
    # ended by the timeout, not by sleep's own end at 30 s (which, not how fast)
    assert time.monotonic() - t0 < 30


def test_real_exec_detach(real_sandbox):
    real, sid = real_sandbox
    p = cli(real.socket, "exec", "-d", sid, "--", "sh", "-c", "sleep 0.2; echo done > /tmp/bg")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().isdigit()
    deadline = time.monotonic() + 30  # liveness: the detached command runs at all
    while time.monotonic() < deadline:
        p = cli(real.socket, "exec", sid, "--", "cat", "/tmp/bg")
        if p.returncode == 0:
            break
        time.sleep(0.2)
    assert p.stdout == "done\n"


def test_real_cp_both_ways(real_sandbox, tmp_path):
    real, sid = real_sandbox
    src = tmp_path / "in.bin"
    data = os.urandom(3 << 20) + BINARY
    src.write_bytes(data)
    p = cli(real.socket, "cp", str(src), f"{sid}:/workspace/sub dir/in+1.bin")
    assert p.returncode == 0, p.stderr
    p = cli(real.socket, "exec", sid, "--", "wc", "-c", "/workspace/sub dir/in+1.bin")
    assert p.stdout.split()[0] == str(len(data)), p.stderr
    out = tmp_path / "out.bin"
    p = cli(real.socket, "cp", f"{sid}:/workspace/sub dir/in+1.bin", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == data
    p = cli(real.socket, "cp", f"{sid}:/workspace/sub dir/in+1.bin", "-", text=False)
    assert p.returncode == 0 and p.stdout == data
    p = cli(real.socket, "cp", f"{sid}:/workspace/missing", str(out))
    assert p.returncode == 125
    assert "(file_not_found" in one_line_error(p, "cp")
    assert out.read_bytes() == data
    p = cli(real.socket, "cp", str(src), f"{sid}:/proc/x")
    assert p.returncode == 125
