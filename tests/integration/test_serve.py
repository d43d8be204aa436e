"""Serve mode (src/runtime/serve.h): a sandbox whose init stays up and, on
request, spawns processes and opens files inside. Driven through
tests/serve/agentbox-serve-test, one JSON line per step."""
import errno
import json
import os
import select
import signal
import subprocess
import time

import pytest

from conftest import AGENTBOX, BUILD
import helpers
from helpers import wait_until

SERVE_TEST = os.path.join(BUILD, "tests", "serve", "agentbox-serve-test")
SANDBOX_PASSWD_LINE = "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh"


class Serve:
    """One agentbox-serve-test process: a serve-mode sandbox to send steps to."""

    def __init__(self, *opts):
        if not os.access(SERVE_TEST, os.X_OK):
            pytest.fail(f"{SERVE_TEST} not found; build first")
        self.proc = subprocess.Popen([SERVE_TEST, *opts], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._buf = b""
        self.start = self._line(30)
        assert self.start["rc"] == 0, self.start
        self.init_pid = self.start["init_pid"]

    def _line(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"agentbox-serve-test gave no answer in {timeout}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")
                raise AssertionError(f"agentbox-serve-test ended early: {err}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def __call__(self, *words, timeout=40):
        esc = [w.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") for w in words]
        self.proc.stdin.write(("\t".join(esc) + "\n").encode())
        self.proc.stdin.flush()
        reply = self._line(timeout)
        assert reply["op"] == words[0], reply
        return reply

    def run(self, *argv):
        """Spawn argv, wait for it, return the wait reply."""
        r = self("spawn", *argv)
        assert r["rc"] == 0, r
        return self("wait", str(r["pid"]))

    def finish(self):
        """End the script (stdin EOF) and return the driver's last line."""
        self.proc.stdin.close()
        last = self._line(30)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == 0
        return last

    def reap(self):
        """After a test: end the sandbox in order; if that fails, kill and gc."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
                subprocess.run([AGENTBOX, "gc"], capture_output=True, timeout=30)


@pytest.fixture
def serve():
    made = []

    def make(*opts):
        s = Serve(*opts)
        made.append(s)
        return s

    yield make
    for s in made:
        s.reap()


def host_pid_of(init_pid, pid):
    """The host pid of the process that is pid inside the sandbox of init_pid."""
    for p in helpers.descendants(init_pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("NSpid:") and int(line.split()[-1]) == pid:
                        return p
        except OSError:
            continue
    return None


def cpu_ticks(host_pid):
    with open(f"/proc/{host_pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def exists(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_spawn_collects_output_and_exit_status(serve):
    s = serve()
    w = s.run("sh", "-c", "echo hi; echo err >&2; exit 3")
    assert w["rc"] == 0, w
    assert w["exit"] == 3 and w["status"] == 3 << 8
    assert w["stdout"] == "hi\n" and w["stderr"] == "err\n"
    w = s.run("sh", "-c", "pwd; echo $HOME; echo $PATH")
    assert w["stdout"].splitlines()[:2] == ["/workspace", "/workspace"]
    r = s("spawn-in", "/tmp", "pwd")
    assert s("wait", str(r["pid"]))["stdout"] == "/tmp\n"
    assert s.finish()["end"] == "exited"


def test_spawn_failures_are_synchronous(serve):
    s = serve()
    r = s("spawn", "no-such-command-xyz")
    assert r["rc"] == -errno.ENOENT and "no-such-command-xyz" in r["err"], r
    r = s("spawn", "/etc/passwd")
    assert r["rc"] == -errno.EACCES, r
    r = s("spawn-in", "/no/such/dir", "true")
    assert r["rc"] == -errno.ENOENT and "chdir" in r["err"], r
    r = s("spawn-in", "relative", "true")
    assert r["rc"] == -errno.EINVAL, r
    r = s("big-spawn", str(200 * 1024))
    assert r["rc"] == -errno.E2BIG, r
    # none of them left a child behind, and init still serves
    assert s.run("true")["exit"] == 0
    assert helpers.descendants(s.init_pid) == []


def test_child_runs_as_the_sandbox_user_under_seccomp(serve):
    s = serve()
    out = s.run("cat", "/proc/self/status")["stdout"]
    status = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert status["Uid"].split() == ["1000"] * 4
    assert status["Gid"].split() == ["1000"] * 4
    assert status["Seccomp"].strip() == "2"
    assert status["NoNewPrivs"].strip() == "1"
    assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
    # a child of init, leading its own session and process group
    r = s("spawn", "cat", "/proc/self/stat")
    w = s("wait", str(r["pid"]))
    ppid, pgrp, sid = w["stdout"].rsplit(")", 1)[1].split()[1:4]
    assert ppid == "1" and pgrp == sid == str(r["pid"])
    # nothing of init's is inherited: only 0-2 (and ls's own directory)
    assert s.run("ls", "/proc/self/fd")["stdout"].split() == ["0", "1", "2", "3"]


def test_exits_arriving_during_requests_are_queued(serve):
    s = serve()
    pids = [s("spawn", "sh", "-c", f"exit {n}")["pid"] for n in (5, 6, 7)]
    s("sleep", "300")
    # the exit reports arrive while these requests wait for their replies
    assert s("read", "/etc/hostname")["rc"] == 0
    assert s("dir", "/workspace")["rc"] == 0
    for n, pid in zip((5, 6, 7), pids):
        w = s("wait", str(pid), timeout=10)
        assert w["rc"] == 0 and w["exit"] == n, w


def test_signal_kills_the_child_and_its_process_group(serve):
    s = serve()
    r = s("spawn", "sh", "-c", "sleep 100 & sleep 100 & echo started; wait")
    pid = r["pid"]
    assert wait_until(lambda: s("output", str(pid))["stdout"] == "started\n")
    assert len(helpers.descendants(s.init_pid)) == 3  # sh and two sleeps
    assert s("signal", str(pid), str(signal.SIGTERM))["rc"] == 0
    w = s("wait", str(pid))
    assert w["signal"] == signal.SIGTERM, w
    # the background sleeps were in its group: gone too (init reaped them)
    assert wait_until(lambda: helpers.descendants(s.init_pid) == [])
    # only children init spawned and has not reaped may be signalled
    assert s("signal", str(pid), "9")["rc"] == -errno.ESRCH
    assert s("signal", "1", "9")["rc"] == -errno.ESRCH
    assert exists(s.init_pid)


def test_write_then_rename_makes_a_file_the_sandbox_sees(serve):
    s = serve()
    data = "hello\nworld\n"
    w = s("write", "/workspace/dir/sub/file.txt", data)
    assert w["rc"] == 0 and w["rename_rc"] == 0, w
    assert w["temp"].startswith("/workspace/dir/sub/.agentbox-upload-")
    c = s.run("cat", "/workspace/dir/sub/file.txt")
    assert c["exit"] == 0 and c["stdout"] == data
    st = s.run("stat", "-c", "%u %g %a", "/workspace/dir/sub/file.txt", "/workspace/dir")
    assert st["stdout"].split("\n")[:2] == ["1000 1000 644", "1000 1000 755"]
    r = s("read", "/workspace/dir/sub/file.txt")
    assert r["rc"] == 0 and r["data"] == data and r["cloexec"] == 1
    assert s("dir", "/workspace/dir/sub")["entries"] == ["file.txt"]
    # a temporary given up is removed with unlink
    o = s("open-write", "/tmp/gone.txt")
    assert o["rc"] == 0 and o["temp"].startswith("/tmp/.agentbox-upload-")
    assert s("unlink", o["temp"])["rc"] == 0
    assert s("dir", "/tmp")["entries"] == []
    # replacing an existing file
    assert s("write", "/workspace/dir/sub/file.txt", "v2")["rename_rc"] == 0
    assert s("read", "/workspace/dir/sub/file.txt")["data"] == "v2"


def test_files_from_the_spec_are_placed(serve):
    s = serve("--file", "/workspace/seed/a.txt=seeded")
    assert s("read", "/workspace/seed/a.txt")["data"] == "seeded"


def test_open_read_refuses_fifos_devices_and_proc(serve):
    s = serve()
    assert s.run("mkfifo", "/tmp/fifo")["exit"] == 0
    # an open that waited for a writer would never answer (none comes): the
    # answer within the 5 s asked for, and EINVAL, say it was refused; its
    # own time is bounded by the same 5 s, not by a guess at this machine
    r = s("read", "/tmp/fifo", timeout=5)
    assert r["rc"] == -errno.EINVAL and r["ms"] < 5000, r
    assert s("read", "/dev/null")["rc"] == -errno.EINVAL
    assert s("read", "/proc/self/environ")["rc"] == -errno.EACCES
    assert s("read", "/proc/self/status")["rc"] == -errno.EACCES
    assert s("read", "/proc/meminfo")["rc"] == -errno.EACCES
    assert s("dir", "/proc")["rc"] == -errno.EACCES
    assert s("read", "/workspace")["rc"] == -errno.EINVAL  # a directory
    assert s("dir", "/tmp/fifo")["rc"] == -errno.ENOTDIR
    assert s("read", "relative/path")["rc"] == -errno.EINVAL
    assert s("read", "/" + "x" * 1100)["rc"] == -errno.EINVAL
    assert s("read", "/no/such/file")["rc"] == -errno.ENOENT
    # init's own fds hold nothing of the host
    for fd in (0, 1, 2):
        assert s("read", f"/proc/self/fd/{fd}")["rc"] in (-errno.EINVAL, -errno.EACCES)
    # and the sandbox lives on
    assert s.run("true")["exit"] == 0


@pytest.mark.parametrize("target", ["/", "../../.."])
def test_symlinks_resolve_inside_the_sandbox(serve, target):
    s = serve()
    assert s.run("ln", "-s", target, "/workspace/link")["exit"] == 0
    with open("/etc/passwd") as f:
        host = f.read()
    r = s("read", "/workspace/link/etc/passwd")
    assert r["rc"] == 0, r
    assert SANDBOX_PASSWD_LINE in r["data"]
    assert r["data"] != host
    r = s("open-write", "/workspace/link/etc/evil")
    assert r["rc"] in (-errno.EROFS, -errno.EACCES), r
    assert not os.path.exists("/etc/evil")


def test_writing_outside_the_writable_places_is_refused(serve):
    s = serve()
    for path in ("/usr/agentbox-serve-test", "/usr/lib/agentbox-serve-test/x", "/etc/x"):
        r = s("open-write", path)
        assert r["rc"] in (-errno.EROFS, -errno.EACCES), (path, r)
    assert not os.path.exists("/usr/agentbox-serve-test")
    assert not os.path.exists("/usr/lib/agentbox-serve-test")
    assert s("open-write", "/proc/self/x")["rc"] in (-errno.EACCES, -errno.ENOENT, -errno.EROFS)
    assert s("open-write", "/workspace/")["rc"] == -errno.EINVAL


def test_unlink_and_rename_refuse_directories(serve):
    s = serve()
    assert s.run("mkdir", "-p", "/workspace/d/inner")["exit"] == 0
    assert s("unlink", "/workspace/d")["rc"] == -errno.EISDIR
    assert s("write", "/workspace/f", "x")["rename_rc"] == 0
    assert s("rename", "/workspace/f", "/workspace/d")["rc"] == -errno.EISDIR
    assert s.run("mkdir", "/workspace/empty")["exit"] == 0
    assert s("rename", "/workspace/d/inner", "/workspace/empty")["rc"] == -errno.EISDIR
    assert s("rename", "/workspace/f", "/workspace/g")["rc"] == 0
    assert s("unlink", "/workspace/g")["rc"] == 0
    assert s("read", "/workspace/g")["rc"] == -errno.ENOENT
    assert s("unlink", "/workspace/g")["rc"] == -errno.ENOENT
    assert s("rename", "relative", "/workspace/x")["rc"] == -errno.EINVAL


def test_freeze_stops_the_sandbox_and_thaw_resumes_it(serve):
    s = serve()
    pid = s("spawn", "sh", "-c", "while :; do :; done")["pid"]
    hp = None
    assert wait_until(lambda: host_pid_of(s.init_pid, pid) is not None)
    hp = host_pid_of(s.init_pid, pid)
    # 20 ticks (0.2 CPU-seconds) at all, polled: a shared CPU gives them late
    t0 = cpu_ticks(hp)
    assert wait_until(lambda: cpu_ticks(hp) - t0 >= 20, 30), \
        "the busy loop should run before the freeze"

    f = s("freeze")
    assert f["rc"] == 0, f
    a = cpu_ticks(hp)
    time.sleep(1.0)
    b = cpu_ticks(hp)
    assert b - a <= 2, f"a frozen child used {b - a} ticks"

    assert s("thaw")["rc"] == 0
    c = cpu_ticks(hp)
    assert wait_until(lambda: cpu_ticks(hp) - c >= 20, 30), \
        "the busy loop should resume after the thaw"
    assert s("signal", str(pid), "9")["rc"] == 0
    assert s("wait", str(pid))["signal"] == 9


def test_oom_kills_the_hog_not_the_sandbox(serve):
    s = serve("--memory", "64m")
    assert s("oom-kills")["count"] == 0
    w = s.run("python3", "-c", "x = bytearray(b'x') * (200 << 20)")
    assert w.get("signal") == signal.SIGKILL, w
    assert s("oom-kills")["count"] >= 1
    assert exists(s.init_pid)
    w = s.run("sh", "-c", "echo still here")
    assert w["exit"] == 0 and w["stdout"] == "still here\n"
    assert s.finish()["end"] == "exited"


def test_closing_the_control_socket_ends_the_sandbox(serve):
    s = serve()
    pid = s("spawn", "sleep", "100")["pid"]
    assert wait_until(lambda: host_pid_of(s.init_pid, pid) is not None)
    hp = host_pid_of(s.init_pid, pid)
    e = s("close", timeout=15)
    assert e["rc"] == 0 and e["end"] == "exited" and e["exit_status"] == 0, e
    assert not exists(s.init_pid) and not exists(hp)
    # requests after the end fail cleanly
    assert s("spawn", "true")["rc"] == -errno.EPIPE


def test_kill_ends_the_sandbox(serve):
    s = serve()
    pid = s("spawn", "sleep", "100")["pid"]
    assert wait_until(lambda: host_pid_of(s.init_pid, pid) is not None)
    e = s("kill", timeout=15)
    assert e["rc"] == 0 and e["end"] == "signaled" and e["term_signal"] == 9, e
    assert not exists(s.init_pid)


def test_launcher_death_takes_the_sandbox_with_it(serve):
    s = serve()
    pid = s("spawn", "sleep", "100")["pid"]
    assert wait_until(lambda: host_pid_of(s.init_pid, pid) is not None)
    hp = host_pid_of(s.init_pid, pid)
    s.proc.kill()
    s.proc.wait()
    assert wait_until(lambda: not exists(s.init_pid) and not exists(hp))
    # the dead launcher's cgroup is reclaimed the usual way
    subprocess.run([AGENTBOX, "gc"], check=True, capture_output=True, timeout=30)
