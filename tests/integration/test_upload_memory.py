"""Uploads are charged to the sandbox (issue 9, item 9).

PUT /v1/sandboxes/{id}/files writes into a tmpfs inside the sandbox, so
the pages of an uploaded file are memory. They must count against the
sandbox's --memory (memory_mb), not against agentboxd: the bytes are
written into the file by a copier that init forks in the sandbox's own
cgroup (src/runtime/serve-init.c). An upload the sandbox's memory cannot
hold is 507 no_space naming memory, leaves nothing behind, and kills
nothing of the sandbox's own.
"""
import os
import socket
import threading
import time
import urllib.parse

import pytest

from daemon import Daemon
import helpers
from helpers import wait_until

MiB = 1 << 20
COPIER_NAME = "agentbox-upload"  # the copier's comm (serve.h)
TEMP_PREFIX = ".agentbox-upload-"  # the temporary's name (serve-internal.h)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


def files_url(sid, path):
    return f"/v1/sandboxes/{sid}/files?" + urllib.parse.urlencode({"path": path})


def put_file(daemon, sid, path, data, timeout=120):
    return daemon.request("PUT", files_url(sid, path), data, timeout=timeout,
                          headers={"Content-Type": "application/octet-stream"})


def get_file(daemon, sid, path):
    status, body, _ = daemon.request("GET", files_url(sid, path), raw=True, timeout=120)
    return status, body


def init_pid(daemon, sid):
    """The host pid of the sandbox's init: the shim's child in a sandbox uid range."""
    shim = int((daemon.state / "sandboxes" / sid / "shim").read_text().split()[0])
    ours = set(helpers.sandbox_pids())
    for p in helpers.descendants(shim):
        if p not in ours:
            continue
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("NSpid:") and line.split()[-1] == "1":
                    return p
    raise AssertionError(f"no init found under shim {shim}")


def memory_charged(pid):
    """Bytes charged to the memory cgroup of pid: v1 memory.usage_in_bytes or
    v2 memory.current."""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            name = os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"),
                                "memory.usage_in_bytes")
            break
    else:
        path = next(p for h, c, p in lines if h == "0")
        name = os.path.join("/sys/fs/cgroup", path.lstrip("/"), "memory.current")
    if not os.path.exists(name):  # a cgroup namespace between us and the tree
        group = path.rstrip("/").rsplit("/", 1)[-1]
        found = [g for g in helpers.sandbox_groups() if g.endswith("/" + group)]
        assert len(found) == 1, (path, found)
        name = os.path.join(found[0], os.path.basename(name))
    with open(name) as f:
        return int(f.read())


def copiers(daemon, sid):
    """Host pids of the upload copiers in the sandbox."""
    out = []
    for p in helpers.descendants(init_pid(daemon, sid)):
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == COPIER_NAME:
                    out.append(p)
        except OSError:
            continue
    return out


def temps(daemon, sid, where="/tmp"):
    r = daemon.exec(sid, ["ls", "-A", where])
    return [n for n in r["stdout"].split() if n.startswith(TEMP_PREFIX)]


def sizes(daemon, sid, where="/tmp"):
    """{name: size} of the files in where, as the sandbox sees them."""
    r = daemon.exec(sid, ["sh", "-c", f"cd {where} && for f in .??* *; do "
                                      "[ -f \"$f\" ] && stat -c '%n %s' \"$f\"; done; true"])
    assert r["exit_code"] == 0, r
    return {n: int(s) for n, s in (line.rsplit(" ", 1) for line in r["stdout"].splitlines())}


class RawUpload:
    """A PUT whose body the test sends piece by piece on its own socket."""

    def __init__(self, daemon, sid, path, length):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(daemon.socket)
        target = files_url(sid, path)
        self.sock.sendall(f"PUT {target} HTTP/1.1\r\nHost: agentbox\r\n"
                          f"Content-Type: application/octet-stream\r\n"
                          f"Content-Length: {length}\r\n\r\n".encode())

    def send(self, data):
        self.sock.sendall(data)

    def response(self):
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(65536)
            assert chunk, buf
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        status = int(head.split()[1])
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(body) < length:
            chunk = self.sock.recv(65536)
            assert chunk
            body += chunk
        return status, body

    def close(self):
        self.sock.close()


# ---- the limit holds -------------------------------------------------------

def test_uploads_count_against_the_sandbox_memory(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 64, "disk_mb": 1024})
    init = init_pid(daemon, sid)
    before = memory_charged(init)
    chunk = os.urandom(MiB)
    blob = chunk * 40

    status, r = put_file(daemon, sid, "/tmp/f1", blob)
    assert status == 201 and r["size"] == len(blob), r
    # the first file is in the sandbox's memory cgroup, not in the daemon's
    charged = memory_charged(init)
    assert charged - before >= 36 * MiB, (before, charged)

    answers = [put_file(daemon, sid, f"/tmp/f{i}", blob) for i in (2, 3)]
    for status, err in answers:
        # 64 MiB cannot hold a second 40 MiB file: refused, and it says why
        assert status == 507, (status, err)
        assert err["error"]["code"] == "no_space", err
        assert "memory" in err["error"]["message"], err
    stored = sizes(daemon, sid)
    assert sum(stored.values()) <= 64 * MiB, stored
    assert stored == {"f1": len(blob)}, stored  # nothing half-written, no temporary
    assert get_file(daemon, sid, "/tmp/f1") == (200, blob)
    assert copiers(daemon, sid) == []
    # the sandbox goes on, and the memory of the refused uploads was given back
    assert daemon.exec(sid, ["true"])["exit_code"] == 0
    assert memory_charged(init) < 60 * MiB
    status, r = put_file(daemon, sid, "/tmp/small", chunk * 4)
    assert status == 201, r


def test_an_upload_that_does_not_fit_kills_nothing_of_the_sandbox(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 64, "disk_mb": 1024})
    # a process bigger than any copier: the OOM killer's first pick by size alone
    status, bg = daemon.request("POST", f"/v1/sandboxes/{sid}/exec", {
        "command": ["python3", "-c", "import time; b = bytearray(16 << 20); "
                    "b[::4096] = b'x' * len(b[::4096]); open('/tmp/ready', 'w').close(); "
                    "time.sleep(1000)"],
        "background": True})
    assert status == 202, bg
    assert wait_until(lambda: get_file(daemon, sid, "/tmp/ready")[0] == 200, 30)
    status, err = put_file(daemon, sid, "/workspace/big", os.urandom(MiB) * 56)
    assert status == 507 and err["error"]["code"] == "no_space", (status, err)
    assert "memory" in err["error"]["message"], err
    status, procs = daemon.request("GET", f"/v1/sandboxes/{sid}/processes")
    assert status == 200, procs
    mine = [p for p in procs["processes"] if p["pid"] == bg["pid"]]
    assert mine and mine[0]["running"], procs
    assert temps(daemon, sid, "/workspace") == []


# ---- uploads still work ----------------------------------------------------

def test_binary_and_empty_files_round_trip(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    data = b"\x00" * 1000 + os.urandom(3 * MiB + 17) + b"\x00\xff\x00"
    status, r = put_file(daemon, sid, "/workspace/bin/data", data)
    assert status == 201 and r == {"path": "/workspace/bin/data", "size": len(data)}, r
    assert get_file(daemon, sid, "/workspace/bin/data") == (200, data)
    status, r = put_file(daemon, sid, "/tmp/empty", b"")
    assert status == 201 and r["size"] == 0, r
    assert get_file(daemon, sid, "/tmp/empty") == (200, b"")
    # replaced whole
    assert put_file(daemon, sid, "/workspace/bin/data", b"v2\x00")[0] == 201
    assert get_file(daemon, sid, "/workspace/bin/data") == (200, b"v2\x00")
    sha = daemon.exec(sid, ["sha256sum", "/tmp/empty"])["stdout"].split()[0]
    assert sha == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert temps(daemon, sid, "/workspace/bin") == [] and temps(daemon, sid) == []
    assert copiers(daemon, sid) == []


def test_an_abandoned_upload_leaves_nothing_behind(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    up = RawUpload(daemon, sid, "/tmp/half", 16 * MiB)
    up.send(os.urandom(8 * MiB))
    # the copier is there while the body comes
    assert wait_until(lambda: len(copiers(daemon, sid)) == 1, 10), copiers(daemon, sid)
    up.close()
    assert wait_until(lambda: copiers(daemon, sid) == [] and temps(daemon, sid) == [], 10)
    assert get_file(daemon, sid, "/tmp/half")[0] == 404
    assert put_file(daemon, sid, "/tmp/half", b"whole")[0] == 201


def test_init_answers_while_an_upload_is_in_flight(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    first, second = os.urandom(4 * MiB), os.urandom(4 * MiB)
    up = RawUpload(daemon, sid, "/tmp/slow", len(first) + len(second))
    try:
        up.send(first)
        assert wait_until(lambda: len(copiers(daemon, sid)) == 1, 10)
        # the upload's second half waits for this test: an exec held behind the
        # upload would wait for ever, so the bound is liveness (the request's
        # own 30 s), not a measure of how quickly init answers
        t = time.monotonic()
        r = daemon.exec(sid, ["echo", "still here"])
        assert r["stdout"] == "still here\n" and time.monotonic() - t < 30, r
        # a second upload at the same time, in one piece
        assert put_file(daemon, sid, "/tmp/other", b"other")[0] == 201
        assert get_file(daemon, sid, "/tmp/other") == (200, b"other")
        up.send(second)
        status, body = up.response()
        assert status == 201, body
    finally:
        up.close()
    assert get_file(daemon, sid, "/tmp/slow") == (200, first + second)


def test_many_uploads_at_once(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    blobs = {f"/tmp/p{i}": os.urandom(MiB + i) for i in range(8)}
    results = {}

    def go(path, data):
        results[path] = put_file(daemon, sid, path, data)[0]
    threads = [threading.Thread(target=go, args=kv) for kv in blobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results.values()) == {201}, results
    for path, data in blobs.items():
        assert get_file(daemon, sid, path) == (200, data)
    assert temps(daemon, sid) == [] and copiers(daemon, sid) == []
