"""agentbox-supervisor runs one task attempt and keeps its record on disk.

These drive the real supervisor binary on attempt directories laid out as
the daemon lays them out (src/supervisor/attempt.h).
"""
import json
import os
import signal
import subprocess
import time

import pytest

import helpers
from conftest import BUILD

SUPERVISOR = os.path.join(BUILD, "src", "supervisor", "agentbox-supervisor")


def make_attempt(tmp_path, command, attempt=1, task="tsk_0000000000000000000000test", **spec):
    task_dir = tmp_path / "tasks" / task
    adir = task_dir / f"attempt-{attempt}"
    adir.mkdir(parents=True, exist_ok=True)
    for d in (tmp_path, tmp_path / "tasks", task_dir, adir):
        os.chmod(d, 0o700)
    body = {"command": command,
            "limits": {"memory_mb": 256, "cpus": 1, "pids": 64, "disk_mb": 64, "timeout_s": None},
            "env": {}, "files": {}}
    for k, v in spec.items():
        body[k] = v if not isinstance(v, dict) or k not in body else {**body[k], **v}
    (adir / "attempt.json").write_text(json.dumps({"task_id": task, "attempt": attempt,
                                                   "spec": body}))
    return adir


def supervise(adir, timeout=60):
    p = subprocess.run([SUPERVISOR, str(adir)], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (p.stderr, (adir / "supervisor.log").read_text())
    return json.loads((adir / "result.json").read_text())


def events(adir):
    return [json.loads(line) for line in (adir / "events").read_text().splitlines()]


def test_success_with_progress_files_env_and_state(tmp_path):
    script = ("import os, json\n"
              "ch = open(os.environ['AGENTBOX_PROGRESS'], 'a')\n"
              "for i in range(1, 4):\n"
              "    ch.write(json.dumps({'pages_crawled': i}) + '\\n'); ch.flush()\n"
              "print(os.environ['AGENTBOX_TASK_ID'], os.environ['AGENTBOX_ATTEMPT'], os.environ['FOO'])\n"
              "print(open('/workspace/in.txt').read())\n"
              "open('/state/checkpoint', 'w').write('3')\n")
    adir = make_attempt(tmp_path, ["python3", "-c", script], env={"FOO": "bar"},
                        files={"/workspace/in.txt": "hello"})
    r = supervise(adir)
    assert r["end"] == "succeeded" and r["exit_code"] == 0, r
    assert [e["data"] for e in events(adir)] == [{"pages_crawled": i} for i in (1, 2, 3)]
    assert [e["line"] for e in events(adir)] == [1, 2, 3]
    assert (adir / "output").read_text() == "tsk_0000000000000000000000test 1 bar\nhello\n"
    assert int((adir / "output.len").read_text()) == len((adir / "output").read_bytes())
    assert int((adir / "events.len").read_text()) == len((adir / "events").read_bytes())
    assert helpers.image_file(adir.parent / "state.img", "/checkpoint") == b"3"
    pid, start = (adir / "supervisor").read_text().split()
    assert int(pid) > 0 and int(start) > 0


def test_state_carries_over_to_the_next_attempt(tmp_path):
    write = make_attempt(tmp_path, ["sh", "-c", "echo 12 > /state/page"], attempt=1)
    assert supervise(write)["end"] == "succeeded"
    read = make_attempt(tmp_path, ["sh", "-c", "cat /state/page; echo $AGENTBOX_ATTEMPT"], attempt=2)
    assert supervise(read)["end"] == "succeeded"
    assert (read / "output").read_text() == "12\n2\n"


def test_failure_oom_and_timeout_are_told_apart(tmp_path):
    r = supervise(make_attempt(tmp_path / "a", ["sh", "-c", "exit 3"]))
    assert (r["end"], r["exit_code"]) == ("failed", 3)
    r = supervise(make_attempt(tmp_path / "b", ["python3", "-c", "x = bytearray(b'x') * (400 << 20)"],
                               limits={"memory_mb": 64}))
    assert (r["end"], r["exit_code"], r["oom_killed"]) == ("oom_killed", 137, True)
    r = supervise(make_attempt(tmp_path / "c", ["sleep", "30"], limits={"timeout_s": 0.5}))
    assert (r["end"], r["exit_code"]) == ("timed_out", 124)
    r = supervise(make_attempt(tmp_path / "d", ["no-such-command"]))
    assert (r["end"], r["exit_code"], r["error"]) == ("failed", 127, "command not found")


def test_sigterm_cancels(tmp_path):
    adir = make_attempt(tmp_path, ["sh", "-c", "echo up; exec sleep 30"])
    p = subprocess.Popen([SUPERVISOR, str(adir)])
    deadline = time.monotonic() + 10
    while b"up" not in (adir / "output").read_bytes() if (adir / "output").exists() else True:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0
    r = json.loads((adir / "result.json").read_text())
    assert r["end"] == "cancelled" and r["exit_code"] is None


def test_bad_progress_lines_are_counted_not_kept(tmp_path):
    script = ("import os\n"
              "ch = open(os.environ['AGENTBOX_PROGRESS'], 'a')\n"
              "ch.write('not json\\n[1, 2]\\n' + 'x' * 70000 + '\\n{\"ok\": true}\\n{\"tail\": 1}')\n")
    adir = make_attempt(tmp_path, ["python3", "-c", script])
    r = supervise(adir)
    assert r["end"] == "succeeded"
    assert (r["malformed_progress"], r["oversized_progress"], r["progress_lines"]) == (2, 1, 2)
    assert [e["data"] for e in events(adir)] == [{"ok": True}, {"tail": 1}]


def test_output_flood_is_capped_with_a_marker(tmp_path):
    adir = make_attempt(tmp_path, ["sh", "-c", "head -c 200000000 /dev/zero | tr '\\0' 'a'; echo done"])
    p = subprocess.Popen([SUPERVISOR, str(adir)])
    peak = 0
    while p.poll() is None:
        try:
            # until exec, the child is still a copy of this Python process
            if not os.readlink(f"/proc/{p.pid}/exe").endswith("agentbox-supervisor"):
                continue
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.05)
    assert p.returncode == 0
    r = json.loads((adir / "result.json").read_text())
    assert r["end"] == "succeeded"
    out = (adir / "output").read_bytes()
    assert len(out) < (16 << 20) + 200
    assert out.endswith(b"[agentbox: output truncated: the log cap was reached]\n")
    assert r["output_dropped"] >= 200000000 - (16 << 20)
    assert peak < 32 * 1024, f"supervisor RSS peaked at {peak} KiB"


def test_usage_errors():
    assert subprocess.run([SUPERVISOR]).returncode == 2
    assert subprocess.run([SUPERVISOR, "relative/dir"]).returncode == 2


def test_a_cancel_sent_at_once_is_recorded_as_a_cancel(tmp_path):
    """The daemon starts supervisors with SIGTERM blocked; so may anyone."""
    import signal as sig
    adir = make_attempt(tmp_path, ["sleep", "30"])
    p = subprocess.Popen([SUPERVISOR, str(adir)],
                         preexec_fn=lambda: sig.pthread_sigmask(sig.SIG_BLOCK, {sig.SIGTERM}))
    p.send_signal(sig.SIGTERM)
    assert p.wait(timeout=20) == 0
    assert json.loads((adir / "result.json").read_text())["end"] == "cancelled"
