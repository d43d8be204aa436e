"""A task's /state is a file system of its own: an ext4 image of
limits.state_mb, mounted through a loop device for each attempt
(src/supervisor/state.h, src/runtime/loopfs.h).

Before it was one, /state was a directory of the host's state directory:
with --disk 1m a task wrote 287 MB there, and its symlinks, FIFOs and
sockets were made on the host.
"""
import fcntl
import os
import stat
import subprocess
import time

import pytest

import helpers
from daemon import Daemon
from test_supervisor import SUPERVISOR, make_attempt, supervise


def allocated(path):
    """Bytes a file takes on the host's disk (not its apparent size)."""
    return os.stat(path).st_blocks * 512


def tree_allocated(top):
    return sum(allocated(os.path.join(d, f)) for d, _, files in os.walk(top) for f in files)


def wait_unbound(image, timeout=10):
    deadline = time.monotonic() + timeout
    while helpers.loops_of(image):
        assert time.monotonic() < deadline, f"{image} still on {helpers.loops_of(image)}"
        time.sleep(0.02)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path, "--max-disk", "256").start()
    yield d
    d.stop()


def test_a_task_writes_no_more_than_state_mb_to_the_host(daemon):
    tid = daemon.submit(command=["sh", "-c",
                                 "dd if=/dev/zero of=/state/big bs=1M count=64 2>&1; "
                                 "echo rc=$?; df -k /state | tail -1"],
                        limits={"state_mb": 8, "disk_mb": 1})
    t = daemon.wait_all([tid])[tid]
    assert t["status"] == "succeeded", t
    status, out = daemon.request("GET", f"/v1/tasks/{tid}/logs")
    assert status == 200
    assert "No space left on device" in out and "rc=1" in out, out
    task_dir = daemon.state / "tasks" / tid
    image = task_dir / "state.img"
    assert os.path.getsize(image) == 8 << 20
    assert allocated(image) <= 8 << 20
    # the whole task on the host: the image, and an attempt's small files
    assert tree_allocated(task_dir) <= (8 << 20) + (1 << 20), tree_allocated(task_dir)
    size = len(helpers.image_file(image, "/big"))
    assert 0 < size < 8 << 20


def test_state_mb_is_checked_against_the_host(daemon):
    for value, field in ((0, "limits.state_mb"), (257, "limits.state_mb"),
                         ("8", "limits.state_mb")):
        status, body = daemon.request("POST", "/v1/tasks",
                                      {"command": ["true"],
                                       "limits": {"state_mb": value, "disk_mb": 64}})
        assert (status, body["error"]["field"]) == (400, field), body
    status, body = daemon.request("POST", "/v1/sandboxes", {"limits": {"state_mb": 8}})
    assert (status, body["error"]["code"], body["error"]["field"]) == \
        (400, "unknown_field", "limits.state_mb"), body


def test_special_files_stay_inside_the_image(tmp_path):
    script = ("import os, socket\n"
              "os.symlink('/etc/shadow', '/state/link')\n"
              "os.mkfifo('/state/fifo')\n"
              "socket.socket(socket.AF_UNIX).bind('/state/sock')\n"
              "os.link('/state/fifo', '/state/hard')\n"
              "os.mkdir('/state/dir')\n")
    adir = make_attempt(tmp_path, ["python3", "-c", script])
    assert supervise(adir)["end"] == "succeeded", (adir / "output").read_text()
    task_dir = adir.parent
    assert sorted(os.listdir(task_dir)) == ["attempt-1", "state.img"]
    inside = helpers.image_ls(task_dir / "state.img")
    assert stat.S_ISLNK(inside["link"]) and stat.S_ISFIFO(inside["fifo"])
    assert stat.S_ISSOCK(inside["sock"]) and stat.S_ISDIR(inside["dir"])
    assert stat.S_ISFIFO(inside["hard"])
    # nothing of it in the host's namespace, and the loop device is gone
    wait_unbound(task_dir / "state.img")
    with open("/proc/self/mountinfo") as f:
        assert str(task_dir) not in f.read()


def test_state_is_private_to_the_sandbox_user_and_survives_an_oom_kill(tmp_path):
    write = make_attempt(tmp_path, ["python3", "-c",
                                    "import os\n"
                                    "open('/state/page', 'w').write('41')\n"
                                    "print(os.stat('/state').st_uid, os.stat('/state/page').st_uid, flush=True)\n"
                                    "x = bytearray(b'x') * (400 << 20)\n"],
                         limits={"memory_mb": 64})
    r = supervise(write)
    assert r["end"] == "oom_killed", r
    assert (write / "output").read_text() == "1000 1000\n"
    read = make_attempt(tmp_path, ["cat", "/state/page"], attempt=2)
    assert supervise(read)["end"] == "succeeded"
    assert (read / "output").read_text() == "41"


def test_the_next_attempt_waits_until_the_last_mount_is_gone(tmp_path):
    first = make_attempt(tmp_path, ["sh", "-c", "echo 7 > /state/page"], attempt=1)
    assert supervise(first)["end"] == "succeeded"
    image = first.parent / "state.img"
    wait_unbound(image)
    # hold the image as a mount of an earlier attempt holds it: through its lock
    holder = open(image, "rb")
    fcntl.flock(holder, fcntl.LOCK_EX)
    second = make_attempt(tmp_path, ["cat", "/state/page"], attempt=2)
    p = subprocess.Popen([SUPERVISOR, str(second)])
    try:
        deadline = time.monotonic() + 10
        while not (second / "supervisor").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)
        # while the lock is held, the task cannot have started
        assert p.poll() is None and not helpers.loops_of(image)
        assert not (second / "result.json").exists()
    finally:
        holder.close()
    assert p.wait(timeout=60) == 0
    assert (second / "output").read_text() == "7\n"


def test_a_half_made_image_is_made_again(tmp_path):
    adir = make_attempt(tmp_path, ["sh", "-c", "echo ok > /state/x; cat /state/x"])
    (adir.parent / "state.img.tmp").write_bytes(b"left by a crash")
    assert supervise(adir)["end"] == "succeeded"
    assert (adir / "output").read_text() == "ok\n"
    assert sorted(os.listdir(adir.parent)) == ["attempt-1", "state.img"]


def test_an_older_tasks_state_directory_is_kept(tmp_path):
    adir = make_attempt(tmp_path, ["sh", "-c", "cat /state/page; echo 2 > /state/next"])
    old = adir.parent / "state"
    old.mkdir(mode=0o700)
    (old / "page").write_text("from before images\n")
    assert supervise(adir)["end"] == "succeeded", (adir / "supervisor.log").read_text()
    assert (adir / "output").read_text() == "from before images\n"
    assert (old / "next").read_text() == "2\n"
    assert not (adir.parent / "state.img").exists()
