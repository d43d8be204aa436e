"""A task's artifacts and binary inputs, against the real agentboxd.

"artifacts" on POST /v1/tasks names paths the supervisor copies out of the
sandbox when an attempt ends, whatever the end (src/supervisor/artifacts.h),
into <state>/tasks/<id>/artifacts/; GET /v1/tasks/{id}/artifacts[/PATH]
and `agentbox artifacts` give them back. "files" takes {"base64": ...} for
bytes that are not text; `agentbox submit --file` sends a binary file or a
directory that way.

The sandbox's content is hostile: a symlink to a host file is recorded as a
symlink and never followed, a FIFO does not block the copy, and what is
copied stops at TASK_ARTIFACTS_BYTES_MAX (core/limits.h).
"""
import base64
import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest

from conftest import AGENTBOX
from daemon import Daemon

ARTIFACTS_BYTES_MAX = 256 << 20  # TASK_ARTIFACTS_BYTES_MAX


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("artifacts")).start()
    yield d
    d.stop()


def cli(daemon, *args, check=True):
    p = subprocess.run([AGENTBOX, args[0], "--socket", daemon.socket, *args[1:]],
                       capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode()
    return p


def run_task(daemon, script, **task):
    tid = daemon.submit(command=["sh", "-c", script], **task)
    return tid, daemon.wait_all([tid])[tid]


def manifest(daemon, tid):
    status, body = daemon.request("GET", f"/v1/tasks/{tid}/artifacts")
    assert status == 200, body
    return body


def entry(m, path):
    found = [e for e in m["entries"] if e["path"] == path]
    assert found, (path, m)
    return found[0]


def fetch(daemon, tid, path):
    status, body, resp = daemon.request("GET", f"/v1/tasks/{tid}/artifacts{path}", raw=True)
    return status, body, resp


def test_files_and_directories_round_trip_byte_for_byte(daemon, tmp_path):
    blob = os.urandom(300_000) + b"\0\0\0" + os.urandom(1000)
    inner = os.urandom(70_000)
    tid, t = run_task(
        daemon,
        "cp /workspace/in.bin /workspace/report.bin && mkdir -p /workspace/out/sub && "
        "cp /workspace/inner.bin /workspace/out/sub/inner.bin && "
        "printf 'hello\\n' > /workspace/out/a.txt && : > /workspace/out/empty && "
        "printf tmp > /tmp/t.txt",
        files={"/workspace/in.bin": {"base64": base64.b64encode(blob).decode()},
               "/workspace/inner.bin": {"base64": base64.b64encode(inner).decode()}},
        artifacts=["/workspace/report.bin", "/workspace/out/", "/tmp/t.txt",
                   "/workspace/never"])
    assert t["status"] == "succeeded", t
    m = manifest(daemon, tid)
    assert m["attempt"] == 1 and not m["truncated"]
    assert entry(m, "/workspace/report.bin") == {
        "path": "/workspace/report.bin", "type": "file", "size": len(blob), "truncated": False}
    assert entry(m, "/workspace/out")["type"] == "directory"
    assert entry(m, "/workspace/out/sub/inner.bin")["size"] == len(inner)
    assert entry(m, "/workspace/never")["type"] == "missing"
    assert m["bytes"] == len(blob) + len(inner) + 6 + 0 + 3

    status, body, resp = fetch(daemon, tid, "/workspace/report.bin")
    assert status == 200 and body == blob
    assert resp.getheader("Content-Type") == "application/octet-stream"
    assert fetch(daemon, tid, "/workspace/out/sub/inner.bin")[1] == inner
    assert fetch(daemon, tid, "/tmp/t.txt")[1] == b"tmp"
    # a directory is a tar, named from the directory's own name
    status, body, resp = fetch(daemon, tid, "/workspace/out/")
    assert status == 200 and resp.getheader("Content-Type") == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"out", "out/a.txt", "out/empty", "out/sub",
                                "out/sub/inner.bin"}
        assert members["out/sub"].isdir() and members["out/a.txt"].isfile()
        assert tar.extractfile("out/sub/inner.bin").read() == inner
        assert tar.extractfile("out/a.txt").read() == b"hello\n"
    for unknown in ("/workspace/never", "/workspace/nothing", "/etc/passwd",
                    "/workspace/out/../report.bin"):
        status, body = daemon.request("GET", f"/v1/tasks/{tid}/artifacts{unknown}")
        assert status == 404, (unknown, body)

    # the CLI: everything, at its path below /workspace (/tmp's under tmp/)
    out = tmp_path / "got"
    cli(daemon, "artifacts", tid, "-o", str(out))
    assert (out / "report.bin").read_bytes() == blob
    assert (out / "out" / "sub" / "inner.bin").read_bytes() == inner
    assert (out / "out" / "a.txt").read_bytes() == b"hello\n"
    assert (out / "out" / "empty").read_bytes() == b""
    assert (out / "tmp" / "t.txt").read_bytes() == b"tmp"
    listed = cli(daemon, "artifacts", tid, "--list").stdout.decode()
    assert "/workspace/out/sub/inner.bin" in listed and "missing" in listed
    as_json = json.loads(cli(daemon, "artifacts", tid, "--list", "--json").stdout)
    assert as_json == m


def test_a_symlink_to_a_host_file_is_never_followed(daemon, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"the host's own bytes")
    os.chmod(tmp_path, 0o755)
    tid, t = run_task(
        daemon,
        f"ln -s {secret} /workspace/link && mkdir -p /workspace/d && "
        f"ln -s {secret} /workspace/d/link && ln -s /etc/shadow /workspace/d/shadow && "
        "ln -s / /workspace/d/root && mkfifo /workspace/d/fifo && "
        "mkdir /workspace/d/x && ln -s /etc /workspace/d/x/etc && echo ok > /workspace/d/ok && "
        "ln -s /etc /workspace/via",
        artifacts=["/workspace/link", "/workspace/d/", "/workspace/via/passwd"])
    assert t["status"] == "succeeded", t
    m = manifest(daemon, tid)
    assert entry(m, "/workspace/link")["type"] == "symlink"
    assert entry(m, "/workspace/d/link")["type"] == "symlink"
    assert entry(m, "/workspace/d/root")["type"] == "symlink"
    assert entry(m, "/workspace/d/fifo")["type"] == "fifo"
    assert entry(m, "/workspace/d/x/etc")["type"] == "symlink"
    assert entry(m, "/workspace/d/shadow")["type"] == "symlink"
    assert entry(m, "/workspace/via/passwd")["type"] == "missing"  # not through the link
    assert fetch(daemon, tid, "/workspace/link")[0] == 404
    assert fetch(daemon, tid, "/workspace/d/x/etc/passwd")[0] == 404
    assert fetch(daemon, tid, "/workspace/d/ok")[1] == b"ok\n"
    # nothing on the host's side but files and directories, none with the host's bytes
    top = daemon.state / "tasks" / tid / "artifacts"
    for d, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(d, name)
            assert not os.path.islink(p), p
            if os.path.isfile(p):
                assert b"the host's own bytes" not in open(p, "rb").read(), p
    out = tmp_path / "got"
    cli(daemon, "artifacts", tid, "-o", str(out))
    assert not os.path.lexists(out / "link")
    assert (out / "d" / "ok").read_bytes() == b"ok\n"


def test_a_file_past_the_cap_is_truncated_and_flagged(daemon):
    # sparse in the sandbox's tmpfs: a size past the cap without the memory
    size = ARTIFACTS_BYTES_MAX + (8 << 20)
    tid, t = run_task(
        daemon, f"printf small > /workspace/a && truncate -s {size} /workspace/big",
        artifacts=["/workspace/a", "/workspace/big"], limits={"disk_mb": 1024})
    assert t["status"] == "succeeded", t
    m = manifest(daemon, tid)
    assert m["truncated"] and m["bytes"] == ARTIFACTS_BYTES_MAX
    big = entry(m, "/workspace/big")
    assert big["size"] == size and big["truncated"]
    assert not entry(m, "/workspace/a")["truncated"]
    copy = daemon.state / "tasks" / tid / "artifacts" / "files" / "workspace" / "big"
    assert os.path.getsize(copy) == ARTIFACTS_BYTES_MAX - len("small")
    status, body, resp = fetch(daemon, tid, "/workspace/big")
    assert status == 200 and len(body) == ARTIFACTS_BYTES_MAX - 5 and body.count(0) == len(body)


def test_an_oom_killed_task_still_has_its_artifacts(daemon):
    tid, t = run_task(
        daemon,
        "echo before > /workspace/note && "
        "exec python3 -c 'pages = [bytearray(b\"x\") * (20 << 20) for _ in range(100)]'",
        artifacts=["/workspace/note"], limits={"memory_mb": 64})
    assert t["status"] == "oom_killed", (t, daemon.request("GET", f"/v1/tasks/{tid}/logs"))
    assert fetch(daemon, tid, "/workspace/note")[1] == b"before\n"


def test_a_timed_out_task_still_has_its_artifacts(daemon):
    tid, t = run_task(daemon, "echo partial > /workspace/p && exec sleep 60",
                      artifacts=["/workspace/p"], limits={"timeout_s": 1})
    assert t["status"] == "timed_out", t
    assert fetch(daemon, tid, "/workspace/p")[1] == b"partial\n"


def test_the_last_attempt_s_artifacts_replace_the_older_ones(daemon):
    tid, t = run_task(
        daemon,
        'echo "attempt $AGENTBOX_ATTEMPT" > /workspace/r; '
        '[ "$AGENTBOX_ATTEMPT" = 1 ] && echo first > /workspace/only-first; '
        '[ "$AGENTBOX_ATTEMPT" = 2 ]',
        artifacts=["/workspace/r", "/workspace/only-first"], max_attempts=2,
        retry_on=["failed"])
    assert t["status"] == "succeeded" and t["attempt"] == 2, t
    m = manifest(daemon, tid)
    assert m["attempt"] == 2
    assert entry(m, "/workspace/only-first")["type"] == "missing"
    assert fetch(daemon, tid, "/workspace/r")[1] == b"attempt 2\n"
    assert fetch(daemon, tid, "/workspace/only-first")[0] == 404
    assert sorted(os.listdir(daemon.state / "tasks" / tid / "artifacts")) == [
        "files", "manifest.json"]
    assert not os.path.exists(daemon.state / "tasks" / tid / "artifacts.new")


def test_without_artifacts_nothing_is_kept(daemon):
    tid, t = run_task(daemon, "echo x > /workspace/x")
    assert t["status"] == "succeeded"
    assert manifest(daemon, tid) == {"attempt": None, "bytes": 0, "truncated": False,
                                     "entries": []}
    assert not os.path.exists(daemon.state / "tasks" / tid / "artifacts")
    assert fetch(daemon, tid, "/workspace/x")[0] == 404


def test_binary_inputs_round_trip(daemon, tmp_path):
    blob = bytes(range(256)) * 40 + b"\0" + os.urandom(50_000)
    local = tmp_path / "in.bin"
    local.write_bytes(blob)
    text = tmp_path / "t.txt"
    text.write_text("plain text\n")
    p = cli(daemon, "submit", "--file", f"{local}:/workspace/x.bin",
            "--file", f"{text}:/tmp/t.txt", "--",
            "sh", "-c", "sha256sum /workspace/x.bin; cat /tmp/t.txt")
    tid = p.stdout.decode().strip()
    t = daemon.wait_all([tid])[tid]
    assert t["status"] == "succeeded", t
    status, out = daemon.request("GET", f"/v1/tasks/{tid}/logs")
    assert hashlib.sha256(blob).hexdigest() in out and "plain text" in out, out


def test_a_directory_upload_round_trips(daemon, tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    want = {"top.txt": b"top\n", "a/bin": os.urandom(4096) + b"\0",
            "a/b/deep.bin": os.urandom(10_000), "a/b/empty": b""}
    for rel, data in want.items():
        (src / rel).write_bytes(data)
    os.symlink("/etc/hostname", src / "a" / "link")
    p = cli(daemon, "submit", "--file", f"{src}:/workspace/dir/",
            "--artifact", "/workspace/dir/", "--",
            "sh", "-c", "cd /workspace/dir && find . -type f | sort | xargs sha256sum; "
                        "test ! -e a/link")
    assert b"a/link" in p.stderr  # said, and not sent
    tid = p.stdout.decode().strip()
    t = daemon.wait_all([tid])[tid]
    assert t["status"] == "succeeded", t
    status, out = daemon.request("GET", f"/v1/tasks/{tid}/logs")
    for rel, data in want.items():
        assert f"{hashlib.sha256(data).hexdigest()}  ./{rel}" in out, (rel, out)
    got = tmp_path / "got"
    cli(daemon, "artifacts", tid, "-o", str(got))
    for rel, data in want.items():
        assert (got / "dir" / rel).read_bytes() == data


def tar_of(members):
    """A tar in memory: (name, bytes) files, (name, None) directories, or TarInfos."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
                continue
            name, data = m
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(out.getvalue()).decode()


def test_a_directory_uploads_as_a_tar_stream(daemon):
    blob = os.urandom(20_000) + b"\0"
    tar = tar_of([("./", None), ("./sub/", None), ("./sub/x.bin", blob),
                  ("top.txt", b"top\n"), ("e/", None)])
    tid, t = run_task(daemon, "cd /workspace/d && find . | sort && sha256sum sub/x.bin",
                      files={"/workspace/d/": {"tar_base64": tar}})
    assert t["status"] == "succeeded", t
    status, out = daemon.request("GET", f"/v1/tasks/{tid}/logs")
    assert hashlib.sha256(blob).hexdigest() in out
    assert "./top.txt" in out and "./e" not in out  # an empty directory is not made
    # hostile members are refused, naming the field
    link = tarfile.TarInfo("l")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    hard = tarfile.TarInfo("h")
    hard.type, hard.linkname = tarfile.LNKTYPE, "top.txt"
    fifo = tarfile.TarInfo("f")
    fifo.type = tarfile.FIFOTYPE
    for members in ([("../escape", b"x")], [("/abs", b"x")], [("a/../../b", b"x")],
                    [link], [("top.txt", b"x"), hard], [fifo]):
        status, body = daemon.request("POST", "/v1/tasks", {
            "command": ["true"], "files": {"/workspace/d/": {"tar_base64": tar_of(members)}}})
        assert status == 400, (members, body)
        assert body["error"]["field"] == 'files["/workspace/d/"]', body
    status, body = daemon.request("POST", "/v1/tasks", {
        "command": ["true"], "files": {"/workspace/d": {"tar_base64": tar}}})
    assert status == 400 and "end in one '/'" in body["error"]["message"], body


def test_requests_are_checked(daemon):
    bad = [
        ({"artifacts": "/workspace/x"}, "artifacts"),
        ({"artifacts": ["/etc/passwd"]}, "artifacts[0]"),
        ({"artifacts": ["/workspace/../etc"]}, "artifacts[0]"),
        ({"artifacts": ["/workspace/a", "/workspace/a/b"]}, "artifacts[1]"),
        ({"artifacts": ["/workspace/x"] * 33}, "artifacts"),
        ({"files": {"/workspace/x": {"base64": "not base64!"}}}, 'files["/workspace/x"]'),
        ({"files": {"/workspace/x": {"base64": "AA==", "more": 1}}}, 'files["/workspace/x"]'),
        ({"files": {"/workspace/x": 3}}, 'files["/workspace/x"]'),
    ]
    for extra, field in bad:
        status, body = daemon.request("POST", "/v1/tasks", {"command": ["true"], **extra})
        assert status == 400, (extra, body)
        assert body["error"]["field"] == field, (extra, body)
