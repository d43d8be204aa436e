"""A task's inputs: files past the request's 4 MiB, uploaded ahead (`POST
/v1/inputs`) and named in `files` by id (docs/api.md, "Inputs"), against
the real daemon and real sandboxes: bytes arrive whole in every attempt,
an input is its tenant's and one task's, the limits are enforced with the
documented codes, untaken inputs expire, a daemon killed in between loses
none, and a removed task leaves none behind; a directory goes as a tar
input, hostile tars are refused and given back whole. `agentbox submit
--file` sends files past 1 MiB this way.
"""
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import tarfile
import time

import pytest

from conftest import AGENTBOX
from daemon import AGENTBOXD, Daemon, UnixHTTPConnection

DEADLINE_S = 60
OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


def upload(d, data, headers=None):
    st, body = d.request("POST", "/v1/inputs", data, headers={**OCTETS, **(headers or {})})
    assert st == 201, body
    assert body["size"] == len(data)
    assert body["id"].startswith("inp_")
    return body["id"]


def run_task(d, **task):
    tid = d.submit(**task)
    return tid, d.wait_all([tid], timeout=DEADLINE_S)[tid]


def logs(d, tid):
    st, text = d.request("GET", f"/v1/tasks/{tid}/logs")
    assert st == 200
    return text


def pending(d, tenant="default"):
    path = d.state / "inputs" / tenant
    return sorted(os.listdir(path)) if path.exists() else []


def stored_files(d, tid):
    """The files of task tid's spec as the store keeps it (read-only)."""
    db = sqlite3.connect(f"file:{d.state}/agentbox.db?mode=ro", uri=True)
    try:
        row = db.execute("SELECT s.spec_json FROM tasks t JOIN task_specs s "
                         "ON s.task_pk = t.pk WHERE t.id = ?", (tid,)).fetchone()
        return json.loads(row[0])["files"]
    finally:
        db.close()


def paths_naming(root, name):
    return [os.path.join(p, f) for p, dirs, files in os.walk(root)
            for f in dirs + files if name in f]


def test_inputs_arrive_byte_for_byte_and_belong_to_the_command(daemon):
    big = os.urandom(40 << 20)  # NULs and every byte value, past the 4 MiB of a request
    small = b"\x00\x01\xff" * 1000
    a, b = upload(daemon, big), upload(daemon, small)
    assert pending(daemon) == sorted([a, b])
    tid, t = run_task(daemon, command=["sh", "-c",
                                       "sha256sum /workspace/in/big.bin /tmp/small.bin; "
                                       "stat -c '%U %a %s' /workspace/in/big.bin"],
                      files={"/workspace/in/big.bin": {"input": a},
                             "/tmp/small.bin": {"input": b},
                             "/workspace/note.txt": "inline files still work\n"},
                      limits={"disk_mb": 128, "memory_mb": 256})
    assert t["status"] == "succeeded", t
    out = logs(daemon, tid)
    assert f"{hashlib.sha256(big).hexdigest()}  /workspace/in/big.bin" in out
    assert f"{hashlib.sha256(small).hexdigest()}  /tmp/small.bin" in out
    assert f"sandbox 644 {len(big)}" in out
    # taken: nothing of them is pending; the stored spec says which bytes; and once the
    # task has ended (no attempt can need them) they are gone from the disk
    assert pending(daemon) == []
    files = stored_files(daemon, tid)
    assert files["/workspace/in/big.bin"] == {"input": a, "offset": 0, "size": len(big)}
    assert files["/tmp/small.bin"] == {"input": b, "offset": 0, "size": len(small)}
    assert paths_naming(daemon.state, a) == [] and paths_naming(daemon.state, b) == []


def test_every_attempt_gets_them_and_rm_removes_them(daemon):
    data = os.urandom(6 << 20)
    iid = upload(daemon, data)
    # the first attempt spoils its copy and fails; the second must see the input whole again
    tid, t = run_task(daemon, command=["sh", "-c",
                                       "sha256sum /workspace/d.bin; "
                                       "if [ ! -e /state/once ]; then touch /state/once; "
                                       "echo spoiled > /workspace/d.bin; exit 1; fi"],
                      files={"/workspace/d.bin": {"input": iid}},
                      max_attempts=2, retry_on=["failed"])
    assert t["status"] == "succeeded", t
    assert t["attempt"] == 2
    assert logs(daemon, tid).count(hashlib.sha256(data).hexdigest()) == 2
    st, body = daemon.request("DELETE", f"/v1/tasks/{tid}")
    assert st in (200, 204), body
    assert paths_naming(daemon.state, iid) == []
    assert paths_naming(daemon.state, tid) == []


def test_an_input_is_one_tasks_and_its_tenants(daemon):
    iid = upload(daemon, b"x" * 100)
    # a key of another tenant, used over the same socket
    assert daemon.request("POST", "/v1/tenants", {"name": "team-b"})[0] == 201
    st, k = daemon.request("POST", "/v1/keys", {"tenant": "team-b", "label": "b"})
    assert st == 201, k
    as_b = {"Authorization": f"Bearer {k['key']}"}
    field = 'files["/workspace/x"]'
    st, body = daemon.request("POST", "/v1/tasks", {"command": ["true"],
                                                    "files": {"/workspace/x": {"input": iid}}},
                              headers=as_b)
    assert st == 400 and body["error"]["code"] == "invalid_field", body
    assert body["error"]["field"] == field
    assert iid in pending(daemon)  # refused: still the owner's, untouched
    tid, t = run_task(daemon, command=["cat", "/workspace/x"],
                      files={"/workspace/x": {"input": iid}})
    assert t["status"] == "succeeded"
    st, body = daemon.request("POST", "/v1/tasks", {"command": ["true"],
                                                    "files": {"/workspace/x": {"input": iid}}})
    assert st == 400 and body["error"]["field"] == field, body
    assert "a task took it" in body["error"]["message"]
    # malformed references name the file too
    for bad in ({"input": "inp_nope"}, {"input": iid, "size": 3}, {"input": 7}):
        st, body = daemon.request("POST", "/v1/tasks", {"command": ["true"],
                                                        "files": {"/workspace/x": bad}})
        assert st == 400 and body["error"]["field"] == field, (bad, body)
    # one input under two names
    other = upload(daemon, b"y")
    st, body = daemon.request("POST", "/v1/tasks", {"command": ["true"], "files": {
        "/workspace/a": {"input": other}, "/workspace/b": {"input": other}}})
    assert st == 400 and body["error"]["code"] == "invalid_field", body
    assert other in pending(daemon)


def test_an_input_past_its_limit_is_refused_at_once(daemon):
    # announced past 1 GiB: answered before any byte of the body is read
    conn = UnixHTTPConnection(daemon.socket, timeout=30)
    conn.putrequest("POST", "/v1/inputs")
    conn.putheader("Content-Type", "application/octet-stream")
    conn.putheader("Content-Length", str((1 << 30) + 1))
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 413, body
    assert b"file_too_large" in body
    assert pending(daemon) == []


def test_a_tenant_holds_a_bounded_number_of_untaken_inputs(daemon):
    ids = [upload(daemon, b"%d" % i) for i in range(16)]  # TASK_INPUTS_PENDING_MAX
    st, body = daemon.request("POST", "/v1/inputs", b"one more", headers=OCTETS)
    assert st == 429 and body["error"]["code"] == "too_many_inputs", body
    assert len(pending(daemon)) == 16
    # a task that takes one makes room for one
    tid, t = run_task(daemon, command=["true"], files={"/workspace/a": {"input": ids[0]}})
    assert t["status"] == "succeeded"
    upload(daemon, b"now there is room")


def test_untaken_inputs_expire(tmp_path):
    d = Daemon(tmp_path, "--input-ttl", "1s").start()
    try:
        old = upload(d, b"soon gone")
        # expired is gone for a task at once, though nothing has swept it yet
        mtime = os.stat(d.state / "inputs" / "default" / old).st_mtime
        while time.time() <= mtime + 1.5:
            time.sleep(0.1)
        st, body = d.request("POST", "/v1/tasks", {"command": ["true"],
                                                   "files": {"/workspace/x": {"input": old}}})
        assert st == 400 and body["error"]["code"] == "invalid_field", body
        assert old in pending(d)
        # an input's age is its file's; each upload removes what expired
        deadline = time.monotonic() + DEADLINE_S
        while old in pending(d):
            assert time.monotonic() < deadline, "an expired input was not removed"
            time.sleep(0.3)
            upload(d, b"a newer one")
        st, body = d.request("POST", "/v1/tasks", {"command": ["true"],
                                                   "files": {"/workspace/x": {"input": old}}})
        assert st == 400 and body["error"]["code"] == "invalid_field", body
        # a bad --input-ttl is refused with its name
        p = subprocess.run([AGENTBOXD, "--input-ttl", "0s"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--input-ttl" in p.stderr
    finally:
        d.stop()


def test_inputs_outlive_a_killed_daemon(tmp_path):
    d = Daemon(tmp_path).start()
    data = os.urandom(3 << 20)
    try:
        iid = upload(d, data)
        d.kill()
        d.start()
        tid, t = run_task(d, command=["sha256sum", "/workspace/f"],
                          files={"/workspace/f": {"input": iid}})
        assert t["status"] == "succeeded", t
        assert hashlib.sha256(data).hexdigest() in logs(d, tid)
    finally:
        d.stop()


def test_an_input_larger_than_the_disk_fails_the_attempt(daemon):
    iid = upload(daemon, os.urandom(12 << 20))
    tid, t = run_task(daemon, command=["true"], files={"/workspace/f": {"input": iid}},
                      limits={"disk_mb": 4})
    assert t["status"] == "failed", t
    text = str(t) + logs(daemon, tid)
    assert "No space left on device" in text and "/workspace/f" in text


def test_submit_sends_large_files_ahead(daemon, tmp_path):
    big = os.urandom(3 << 20)
    (tmp_path / "big.bin").write_bytes(big)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "small.txt").write_text("small\n")
    (tree / "large.bin").write_bytes(big[: (2 << 20) + 1])
    env = dict(os.environ, AGENTBOX_HOST=daemon.socket)
    for k in ("AGENTBOX_URL", "AGENTBOX_KEY", "AGENTBOX_TOKEN"):
        env.pop(k, None)
    p = subprocess.run([AGENTBOX, "submit", "--file", f"{tmp_path}/big.bin:/workspace/big.bin",
                        "--file", f"{tree}:/workspace/t", "--", "sh", "-c",
                        "sha256sum /workspace/big.bin /workspace/t/large.bin; "
                        "cat /workspace/t/sub/small.txt"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    tid = p.stdout.strip()
    t = daemon.wait_all([tid], timeout=DEADLINE_S)[tid]
    assert t["status"] == "succeeded", t
    out = logs(daemon, tid)
    assert f"{hashlib.sha256(big).hexdigest()}  /workspace/big.bin" in out
    assert f"{hashlib.sha256(big[:(2 << 20) + 1]).hexdigest()}  /workspace/t/large.bin" in out
    assert "small\n" in out
    # the two large ones went as inputs, the small one inline
    files = stored_files(daemon, tid)
    assert sorted(k for k, v in files.items() if "input" in v) == [
        "/workspace/big.bin", "/workspace/t/large.bin"]
    assert files["/workspace/t/sub/small.txt"] == "small\n"


def tar_of(members):
    """A tar (bytes) of members: (name, bytes) for a file, (name, None) for a directory,
    (name, ("symlink"|"hardlink", target)) for a link."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            elif isinstance(data, tuple):
                info.type = tarfile.SYMTYPE if data[0] == "symlink" else tarfile.LNKTYPE
                info.linkname = data[1]
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_directory_goes_as_a_tar_input(daemon):
    big, mid = os.urandom(6 << 20), os.urandom(1 << 20)
    tar = tar_of([("./", None), ("./big.bin", big), ("sub/", None), ("sub/mid.bin", mid),
                  ("sub/empty", b""), ("sub/deeper/note.txt", b"note\n")])
    iid = upload(daemon, tar)
    tid, t = run_task(daemon, command=["sh", "-c",
                                       "cd /workspace/data && sha256sum big.bin sub/mid.bin && "
                                       "wc -c < sub/empty && cat sub/deeper/note.txt "
                                       "/workspace/inline.txt"],
                      files={"/workspace/data/": {"tar_input": iid},
                             "/workspace/inline.txt": "inline\n"},
                      limits={"disk_mb": 64})
    assert t["status"] == "succeeded", t
    out = logs(daemon, tid)
    assert f"{hashlib.sha256(big).hexdigest()}  big.bin" in out
    assert f"{hashlib.sha256(mid).hexdigest()}  sub/mid.bin" in out
    assert "0\nnote\ninline\n" in out
    # its files point into one flat file of their bytes, one after the other, in the tar's order
    files = stored_files(daemon, tid)
    assert files["/workspace/data/big.bin"] == {"input": iid, "offset": 0, "size": len(big)}
    assert files["/workspace/data/sub/mid.bin"] == {"input": iid, "offset": len(big),
                                                    "size": len(mid)}
    assert files["/workspace/data/sub/empty"]["size"] == 0
    assert files["/workspace/data/sub/deeper/note.txt"]["offset"] == len(big) + len(mid)
    assert pending(daemon) == [] and paths_naming(daemon.state, iid) == []


@pytest.mark.parametrize("members,says", [
    ([("../escape", b"x")], "not a relative, canonical path"),
    ([("/etc/cron.d/evil", b"x")], "not a relative, canonical path"),
    ([("a/../../b", b"x")], "not a relative, canonical path"),
    ([("link", ("symlink", "/etc/shadow"))], "not a regular file or a directory"),
    ([("f", b"x"), ("hard", ("hardlink", "f"))], "not a regular file or a directory"),
    ([("inline.txt", b"also a key")], "given twice"),
])
def test_a_hostile_tar_input_is_refused_and_given_back(daemon, members, says):
    iid = upload(daemon, tar_of(members))
    st, body = daemon.request("POST", "/v1/tasks", {
        "command": ["true"], "files": {"/workspace/d/": {"tar_input": iid},
                                       "/workspace/d/inline.txt": "inline"}})
    assert st == 400 and body["error"]["code"] == "invalid_field", body
    assert says in body["error"]["message"], body
    assert body["error"]["field"].startswith('files["/workspace/d/')
    # nothing was made of it: the tar is its owner's again, whole, and no task directory stays
    assert iid in pending(daemon)
    assert (daemon.state / "inputs" / "default" / iid).read_bytes() == tar_of(members)
    assert not (daemon.state / "tasks").exists() or os.listdir(daemon.state / "tasks") == []


def test_a_tar_input_that_is_no_tar_is_refused(daemon):
    iid = upload(daemon, b"plain bytes, no tar" * 100)
    st, body = daemon.request("POST", "/v1/tasks", {
        "command": ["true"], "files": {"/workspace/d/": {"tar_input": iid}}})
    assert st == 400 and body["error"]["field"] == 'files["/workspace/d/"]', body
    assert iid in pending(daemon)
    # and a tar input must go to a directory
    st, body = daemon.request("POST", "/v1/tasks", {
        "command": ["true"], "files": {"/workspace/d": {"tar_input": iid}}})
    assert st == 400 and "must end in one '/'" in body["error"]["message"], body


def test_a_sparse_tar_member_is_refused(daemon, tmp_path):
    # a tar of a few KiB whose member claims 1 GiB of holes: never written out as zeros
    (tmp_path / "holes").mkdir()
    with open(tmp_path / "holes" / "sparse", "wb") as f:
        f.truncate(1 << 30)
        f.write(b"end")
    subprocess.run(["tar", "--sparse", "-cf", str(tmp_path / "s.tar"), "-C",
                    str(tmp_path / "holes"), "sparse"], check=True, timeout=60)
    tar = (tmp_path / "s.tar").read_bytes()
    assert len(tar) < 1 << 20
    iid = upload(daemon, tar)
    st, body = daemon.request("POST", "/v1/tasks", {
        "command": ["true"], "files": {"/workspace/d/": {"tar_input": iid}}})
    assert st == 400 and "sparse" in body["error"]["message"], body
    assert iid in pending(daemon)
    assert paths_naming(daemon.state / "tasks", iid) == []


def test_a_timeout_quota_does_not_refuse_inputs(tmp_path):
    # a tenant's timeout_s gives a task without one its bound: the spec is read again then
    d = Daemon(tmp_path, "--tenant-quota", "timeout_s=600").start()
    try:
        iid = upload(d, b"z" * 5000)
        tar = upload(d, tar_of([("t.txt", b"in a tar\n")]))
        tid, t = run_task(d, command=["cat", "/workspace/f", "/workspace/d/t.txt"],
                          files={"/workspace/f": {"input": iid},
                                 "/workspace/d/": {"tar_input": tar}})
        assert t["status"] == "succeeded", t
        assert logs(d, tid) == "z" * 5000 + "in a tar\n"
    finally:
        d.stop()


def test_inputs_of_a_task_never_stored_go_back_at_the_start(tmp_path):
    # the daemon stopped between taking a task's inputs and storing the task: what it took is
    # in a task directory no row names, with its tenant's mark
    d = Daemon(tmp_path).start()
    try:
        plain = upload(d, b"plain input")
        tar = upload(d, tar_of([("a", b"a")]))
    finally:
        d.stop()
    ghost = d.state / "tasks" / ("tsk_" + "7" * 26) / "inputs"
    ghost.mkdir(parents=True)
    (ghost / ".tenant").write_text("default")
    mine = d.state / "inputs" / "default"
    os.rename(mine / plain, ghost / plain)
    os.rename(mine / tar, ghost / f".tar-{tar}")
    (ghost / tar).write_bytes(b"half a blob")
    d.start()
    try:
        assert pending(d) == sorted([plain, tar])
        assert (mine / plain).read_bytes() == b"plain input"
        assert (mine / tar).read_bytes() == tar_of([("a", b"a")])
        assert not ghost.parent.exists()
        tid, t = run_task(d, command=["cat", "/workspace/p", "/workspace/d/a"],
                          files={"/workspace/p": {"input": plain},
                                 "/workspace/d/": {"tar_input": tar}})
        assert t["status"] == "succeeded" and logs(d, tid) == "plain inputa"
    finally:
        d.stop()
