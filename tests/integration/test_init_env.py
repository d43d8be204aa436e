"""A sandbox's init inherits nothing of the host.

init (pid 1 inside) is a clone, without exec, of the process that started
the sandbox: `agentbox run`, a task's supervisor or an interactive
sandbox's shim. Its memory starts as a copy of that process's, argv and
environment strings included, and the kernel shows those bytes as
/proc/<pid>/cmdline and /proc/<pid>/environ. Each test starts a sandbox
one of the three ways, with a canary in the starter's environment (the
caller's for `agentbox run`, agentboxd's for the other two) and host
paths in its argv, and looks at init from inside, as the sandbox user,
and from the host, as root: root reads the bytes whatever Landlock and
non-dumpability say.
"""
import ctypes
import json
import os
import secrets
import subprocess
import time

import pytest

import helpers
from conftest import AGENTBOX, BUILD
from daemon import Daemon

INIT_NAME = b"agentbox-init"
CANARY_NAME = "AGENTBOX_SECRET_CANARY"
# What spawn_helper() hands a supervisor or a shim (src/base/spawn.c).
HELPER_ENV = {"PATH", "AGENTBOX_RUN_DIR", "AGENTBOX_CGROUP_ROOT", "AGENTBOX_CGROUP"}


def shrinks():
    """Can init shrink its cmdline and environ to the name alone and nothing
    (prctl PR_SET_MM_MAP, with CONFIG_CHECKPOINT_RESTORE)? Without it, they
    are the name then NUL bytes, and NUL bytes only."""
    size = ctypes.c_uint(0)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(35, 15, ctypes.byref(size), 0, 0) == 0  # PR_SET_MM, PR_SET_MM_MAP_SIZE


SHRINKS = shrinks()

# Run inside: what /proc/1 shows the sandbox user, and our own environment.
LOOK = r"""
import json, os
def look(path):
    try:
        return open(path, "rb").read().hex()
    except OSError as e:
        return e.errno
print(json.dumps({"cmdline": look("/proc/1/cmdline"), "environ": look("/proc/1/environ"),
                  "uid": os.getuid(), "env": dict(os.environ)}), flush=True)
"""


def nspid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return line.split()[1:]
    except OSError:
        pass
    return []


def init_below(pid):
    """Host pid of the one sandbox init (pid 1 of its own namespace) below pid."""
    inits = [p for p in helpers.descendants(pid) if nspid(p)[-1:] == ["1"] and len(nspid(p)) > 1]
    assert len(inits) == 1, f"sandbox inits below {pid}: {inits}"
    return inits[0]


def parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def host_read(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()


def nothing_of(what, data, secrets_):
    """The problems with data: each secret it holds."""
    return [f"{what} holds {s!r}: {data[:300]!r}" for s in secrets_ if s.encode() in data]


def init_problems(proc, cmdline, environ, secrets_):
    """cmdline must be our name, environ empty (or unreadable: None); see shrinks()."""
    out = nothing_of(f"{proc}/cmdline", cmdline, secrets_)
    named = cmdline == INIT_NAME + b"\0" if SHRINKS else \
        cmdline.rstrip(b"\0") == INIT_NAME and cmdline.endswith(b"\0")
    if not named:
        out.append(f"{proc}/cmdline is not {INIT_NAME!r}: {cmdline[:300]!r}")
    if environ is not None:
        out += nothing_of(f"{proc}/environ", environ, secrets_)
        if environ != b"" if SHRINKS else environ.strip(b"\0") != b"":
            out.append(f"{proc}/environ is not empty: {environ[:300]!r}")
    return out


def inside_problems(seen, secrets_):
    """What the sandbox user saw of its init: cmdline readable, environ denied or empty."""
    if seen["uid"] != 1000:
        return [f"the command ran as uid {seen['uid']}"]
    if isinstance(seen["cmdline"], int):
        return [f"inside, /proc/1/cmdline is unreadable: errno {seen['cmdline']}"]
    environ = None if isinstance(seen["environ"], int) else bytes.fromhex(seen["environ"])
    out = init_problems("inside, /proc/1", bytes.fromhex(seen["cmdline"]), environ, secrets_)
    if CANARY_NAME in seen["env"]:
        out.append(f"the command's environment holds {CANARY_NAME}: {seen['env']}")
    return out


def host_problems(init, secrets_):
    """The bytes themselves, read by host root: no Landlock, no dumpability in the way."""
    where = f"host, /proc/{init}"
    out = init_problems(where, host_read(init, "cmdline"), host_read(init, "environ"), secrets_)
    status = host_read(init, "status").decode()
    if f"Name:\t{INIT_NAME.decode()}\n" not in status:
        out.append(f"{where}/status: not named {INIT_NAME!r}: {status.splitlines()[0]}")
    return out


def helper_problems(helper, secrets_):
    """A supervisor's or shim's own environment: a fixed few names, none of the daemon's."""
    environ = host_read(helper, "environ")
    out = nothing_of(f"helper pid {helper} environ", environ, secrets_)
    names = {e.split(b"=", 1)[0].decode() for e in environ.split(b"\0") if e}
    if "PATH" not in names or not names <= HELPER_ENV:
        out.append(f"helper pid {helper} environment names: {sorted(names)}")
    return out


def assert_none(problems):
    assert not problems, "\n".join(problems)


@pytest.fixture
def canary():
    return "c4n4ry-" + secrets.token_hex(12)


# --------------------------------------------------------------------------
# agentbox run: the caller's environment and argv

def test_run_init_has_nothing_of_the_caller(tmp_path, canary):
    vol = tmp_path / f"vol-{canary}"
    vol.mkdir()
    env = dict(os.environ, **{CANARY_NAME: canary})
    cmd = [AGENTBOX, "run", "--volume", f"{vol}:/vol:ro", "--env", "GIVEN=1", "--",
           "python3", "-c", LOOK + "import sys; sys.stdin.read()\n"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    try:
        seen = json.loads(p.stdout.readline())
        secrets_ = [canary, str(tmp_path), BUILD]
        assert_none(host_problems(init_below(p.pid), secrets_) + inside_problems(seen, secrets_))
        # the command's environment is exactly the spec's
        assert set(seen["env"]) == {"PATH", "HOME", "LANG", "GIVEN"}, seen["env"]
        assert seen["env"]["GIVEN"] == "1" and seen["env"]["HOME"] == "/workspace"
    finally:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err


# --------------------------------------------------------------------------
# agentboxd: a task (supervisor) and an interactive sandbox (shim)

@pytest.fixture
def daemon(tmp_path, canary, monkeypatch):
    d = Daemon(tmp_path)
    with monkeypatch.context() as m:
        m.setenv(CANARY_NAME, canary)  # in agentboxd's environment only
        d.start()
    with open(f"/proc/{d.proc.pid}/environ", "rb") as f:
        assert canary.encode() in f.read()  # the daemon does have it
    yield d
    d.stop()


def assert_init_has_nothing_of_the_daemon(daemon, canary, seen):
    """Neither the sandbox's init (host view), what LOOK saw inside (seen),
    nor the helper (supervisor or shim) above init holds the daemon's
    environment or host paths; the caller's env came through."""
    secrets_ = [canary, str(daemon.state), BUILD]
    init = init_below(daemon.proc.pid)
    assert_none(host_problems(init, secrets_) + inside_problems(seen, secrets_) +
                helper_problems(parent(init), secrets_))
    assert seen["env"]["GIVEN"] == "1" and "PATH" in seen["env"], seen["env"]

def test_task_init_has_nothing_of_the_daemon(daemon, canary):
    tid = daemon.submit(command=["python3", "-c", LOOK + "import time; time.sleep(120)\n"],
                        env={"GIVEN": "1"})
    deadline = time.monotonic() + 60
    logs = ""
    while time.monotonic() < deadline and "\n" not in logs:
        status, logs = daemon.request("GET", f"/v1/tasks/{tid}/logs")
        assert status == 200
        time.sleep(0.1)
    try:
        assert "\n" in logs, f"no report in the task's logs: {daemon.task(tid)}"
        assert_init_has_nothing_of_the_daemon(daemon, canary, json.loads(logs.splitlines()[0]))
    finally:
        daemon.request("POST", f"/v1/tasks/{tid}/cancel")
        assert daemon.wait_all([tid], timeout=60)[tid]["status"] == "cancelled"


def test_interactive_init_has_nothing_of_the_daemon(daemon, canary):
    sbx = daemon.create_sandbox()
    try:
        r = daemon.exec(sbx, ["python3", "-c", LOOK], env={"GIVEN": "1"})
        assert r["exit_code"] == 0, r
        assert_init_has_nothing_of_the_daemon(daemon, canary, json.loads(r["stdout"]))
    finally:
        daemon.request("DELETE", f"/v1/sandboxes/{sbx}")
