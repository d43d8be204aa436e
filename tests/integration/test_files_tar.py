"""A sandbox's directory as a tar, both ways: GET and PUT
/v1/sandboxes/{id}/files?path=DIR&format=tar against the real agentboxd
and real sandboxes (docs/api.md, "Files"), and `agentbox cp -r` over them.
"""
import io
import json
import os
import subprocess
import tarfile
import urllib.parse

import pytest

from conftest import AGENTBOX
from daemon import Daemon, UnixHTTPConnection

TAR_BYTES_MAX = 256 << 20  # API_FILES_TAR_BYTES_MAX


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("files-tar")).start()
    yield d
    d.stop()


@pytest.fixture
def sbx(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    yield sid
    daemon.request("DELETE", f"/v1/sandboxes/{sid}")


def url(sid, path, **q):
    return f"/v1/sandboxes/{sid}/files?" + urllib.parse.urlencode({"path": path, **q})


def sh(daemon, sid, script):
    st, body = daemon.request("POST", f"/v1/sandboxes/{sid}/exec",
                              {"command": ["sh", "-c", script]}, timeout=60)
    assert st == 200, body
    assert body["exit_code"] == 0, body
    return body["stdout"]


def get_tar(daemon, sid, path):
    st, payload, resp = daemon.request("GET", url(sid, path, format="tar"), raw=True)
    return st, payload, resp


def put_tar(daemon, sid, path, data):
    return daemon.request("PUT", url(sid, path, format="tar"), data,
                          headers={"Content-Type": "application/x-tar"})


def make_tar(members):
    """members: [(TarInfo fields dict, data or None)] -> tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for fields, data in members:
            ti = tarfile.TarInfo(fields.pop("name"))
            for k, v in fields.items():
                setattr(ti, k, v)
            if data is not None:
                ti.size = len(data)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def listing(daemon, sid, path):
    st, body = daemon.request("GET", url(sid, path, list="1"))
    return st, body


# ---- GET ---------------------------------------------------------------------------


def test_get_tar_names_from_the_directory_and_leaves_symlinks_out(daemon, sbx):
    sh(daemon, sbx, "mkdir -p /workspace/d/sub/empty && printf hi > /workspace/d/a.txt && "
       ": > /workspace/d/sub/zero && head -c 70000 /dev/urandom > /workspace/d/sub/bin && "
       "ln -s /etc /workspace/d/etc && ln -s /etc/passwd /workspace/d/passwd && "
       "mkfifo /workspace/d/fifo && printf 'sp ace' > '/workspace/d/a b'")
    st, payload, resp = get_tar(daemon, sbx, "/workspace/d")
    assert st == 200, payload
    assert resp.getheader("Content-Type") == "application/x-tar"
    assert int(resp.getheader("Content-Length")) == len(payload)
    # the two symlinks and the FIFO are left out, and counted
    assert resp.getheader("X-Agentbox-Skipped") == "3"
    with tarfile.open(fileobj=io.BytesIO(payload)) as t:
        members = {m.name: m for m in t.getmembers()}
        assert sorted(members) == ["d", "d/a b", "d/a.txt", "d/sub", "d/sub/bin",
                                   "d/sub/empty", "d/sub/zero"]
        assert all(m.isdir() or m.isfile() for m in members.values())
        assert t.extractfile("d/a.txt").read() == b"hi"
        assert t.extractfile("d/a b").read() == b"sp ace"
        assert t.extractfile("d/sub/zero").read() == b""
        binary = t.extractfile("d/sub/bin").read()
    assert len(binary) == 70000
    # byte for byte: the sandbox's own checksum of it
    want = sh(daemon, sbx, "sha256sum /workspace/d/sub/bin").split()[0]
    import hashlib
    assert hashlib.sha256(binary).hexdigest() == want
    # nothing of the host's /etc came through the symlink
    assert not any(n.startswith("d/etc/") for n in members)


def test_get_tar_of_a_file_a_bad_format_and_a_missing_path(daemon, sbx):
    sh(daemon, sbx, "printf x > /workspace/f")
    st, payload, _ = get_tar(daemon, sbx, "/workspace/f")
    assert st == 400, payload
    err = json.loads(payload)["error"]
    assert err["code"] == "not_a_file" and err["field"] == "path"
    st, body = daemon.request("GET", url(sbx, "/workspace", format="bogus"))
    assert st == 400 and body["error"]["code"] == "invalid_field"
    assert body["error"]["field"] == "format"
    st, body = daemon.request("GET", url(sbx, "/workspace/nope", format="tar"))
    assert st == 404 and body["error"]["code"] == "file_not_found"
    st, body = daemon.request("GET", url(sbx, "/workspace", format="tar", list="1"))
    assert st == 400 and body["error"]["field"] == "format"


# ---- PUT ---------------------------------------------------------------------------


def test_put_tar_unpacks_files_and_directories(daemon, sbx):
    blob = bytes(range(256)) * 300
    tar = make_tar([
        ({"name": ".", "type": tarfile.DIRTYPE}, None),
        ({"name": "./sub", "type": tarfile.DIRTYPE}, None),
        ({"name": "./sub/empty", "type": tarfile.DIRTYPE}, None),
        ({"name": "./sub/bin"}, blob),
        ({"name": "./zero"}, b""),
        ({"name": "./with space.txt"}, b"s p a c e"),
    ])
    st, body = put_tar(daemon, sbx, "/workspace/up", tar)
    assert st == 200, body
    assert body == {"path": "/workspace/up", "files": 3, "directories": 2,
                    "bytes": len(blob) + 9}
    out = sh(daemon, sbx, "cd /workspace/up && find . | sort && sha256sum sub/bin && "
             "cat 'with space.txt' && stat -c %s zero")
    import hashlib
    assert out.split("\n")[:6] == [".", "./sub", "./sub/bin", "./sub/empty",
                                   "./with space.txt", "./zero"]
    assert hashlib.sha256(blob).hexdigest() in out
    assert out.rstrip().endswith("s p a c e0")


@pytest.mark.parametrize("member,why", [
    ({"name": "../x"}, "not a relative, canonical name"),
    ({"name": "a/../../x"}, "not a relative, canonical name"),
    ({"name": "/tmp/x"}, "not a relative, canonical name"),
    ({"name": "ln", "type": tarfile.SYMTYPE, "linkname": "/etc"}, "a symlink"),
    ({"name": "hl", "type": tarfile.LNKTYPE, "linkname": "ok"}, "a hard link"),
    ({"name": "fifo", "type": tarfile.FIFOTYPE}, "not a regular file"),
])
def test_put_tar_refuses_a_hostile_member_and_writes_nothing(daemon, sbx, member, why):
    name = member["name"]
    data = None if member.get("type") not in (None, tarfile.REGTYPE) else b"evil"
    tar = make_tar([({"name": "ok"}, b"fine"), (dict(member), data)])
    st, body = put_tar(daemon, sbx, "/workspace/t/in", tar)
    assert st == 400, body
    assert body["error"]["code"] == "invalid_field"
    assert name in body["error"]["message"] and why in body["error"]["message"]
    assert name in body["error"]["field"]
    # nothing written: not the good member before it, not outside
    st, _ = listing(daemon, sbx, "/workspace/t/in")
    assert st == 404
    out = sh(daemon, sbx, "ls -A /workspace /workspace/t /tmp 2>&1; test ! -e /workspace/x "
             "&& test ! -e /tmp/x && echo clean")
    assert out.rstrip().endswith("clean"), out


def test_put_tar_not_a_tar_and_a_bad_format(daemon, sbx):
    st, body = put_tar(daemon, sbx, "/workspace/nt", b"this is not a tar" * 100)
    assert st == 400 and body["error"]["field"] == "body", body
    st, body = daemon.request("PUT", url(sbx, "/workspace/nt", format="zip"), b"x",
                              headers={"Content-Type": "application/x-tar"})
    assert st == 400 and body["error"]["field"] == "format", body


def test_put_tar_over_the_limit_is_413(daemon, sbx):
    conn = UnixHTTPConnection(daemon.socket, timeout=30)
    conn.putrequest("PUT", url(sbx, "/workspace/big", format="tar"))
    conn.putheader("Content-Type", "application/x-tar")
    conn.putheader("Content-Length", str(TAR_BYTES_MAX + 1))
    conn.endheaders()
    resp = conn.getresponse()
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 413, body
    assert body["error"]["code"] == "body_too_large" and body["error"]["field"] == "body"
    st, _ = listing(daemon, sbx, "/workspace/big")
    assert st == 404


# ---- agentbox cp -r ----------------------------------------------------------------


def cli(daemon, *args, env=None, timeout=120):
    e = dict(os.environ)
    for k in ("AGENTBOX_URL", "AGENTBOX_KEY", "AGENTBOX_TOKEN"):
        e.pop(k, None)
    e["AGENTBOX_HOST"] = daemon.socket
    e.update(env or {})
    return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, timeout=timeout,
                          env=e)


def tree(root):
    """{relative path: bytes, or None for a directory} of a local tree."""
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != ".":
            out[rel] = None
        for f in files:
            p = os.path.join(d, f)
            assert not os.path.islink(p), p
            out[os.path.normpath(os.path.join(rel, f))] = open(p, "rb").read()
    return out


def test_cp_r_round_trips_byte_for_byte(daemon, sbx, tmp_path):
    src = tmp_path / "src"
    (src / "deep" / "er" / "est").mkdir(parents=True)
    (src / "empty dir").mkdir()
    (src / "deep" / "empty").mkdir()
    (src / "bin").write_bytes(os.urandom(300000))
    (src / "all bytes").write_bytes(bytes(range(256)) * 64)
    (src / "zero").write_bytes(b"")
    (src / "deep" / "er" / "est" / "file with spaces.txt").write_text("spaces\n")
    (src / ("n" * 120)).write_bytes(b"a long name")  # past ustar's 100 bytes
    want = tree(src)

    p = cli(daemon, "cp", "-r", str(src), f"{sbx}:/workspace/rt")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    out = daemon.exec(sbx, ["sh", "-c", "cd /workspace/rt && find . -type f | sort | "
                            "xargs -d '\\n' sha256sum"])["stdout"]
    import hashlib
    for rel, data in want.items():
        if data is not None:
            assert f"{hashlib.sha256(data).hexdigest()}  ./{rel}" in out, rel

    back = tmp_path / "back"
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/rt", str(back))
    assert p.returncode == 0, p.stderr
    assert tree(back) == want
    # an existing directory gets PATH's name inside it
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/rt/", str(back))
    assert p.returncode == 0, p.stderr
    assert tree(back / "rt") == want


def test_cp_r_out_leaves_the_sandbox_symlinks_out(daemon, sbx, tmp_path):
    daemon.exec(sbx, ["sh", "-c", "mkdir -p /workspace/d && echo ok > /workspace/d/f && "
                      "ln -s /etc /workspace/d/etc && ln -s /etc/shadow /workspace/d/sh"])
    back = tmp_path / "back"
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/d", str(back))
    assert p.returncode == 0, p.stderr
    assert "2 entries left out" in p.stderr
    assert sorted(os.listdir(back)) == ["f"]


def test_cp_r_without_tar_is_127(daemon, sbx, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    empty = tmp_path / "nobin"
    empty.mkdir()
    p = cli(daemon, "cp", "-r", str(src), f"{sbx}:/workspace/nt", env={"PATH": str(empty)})
    assert p.returncode == 127, p.stderr
    assert "no tar" in p.stderr
    daemon.exec(sbx, ["sh", "-c", "mkdir -p /workspace/nt2 && echo x > /workspace/nt2/f"])
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/nt2", str(tmp_path / "o"),
            env={"PATH": str(empty)})
    assert p.returncode == 127, p.stderr
    assert "no tar" in p.stderr


def test_cp_r_out_of_a_missing_directory_makes_nothing(daemon, sbx, tmp_path):
    dest = tmp_path / "never"
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/nope", str(dest))
    assert p.returncode == 125, p.stderr
    assert "(file_not_found" in p.stderr
    assert not dest.exists()
    daemon.exec(sbx, ["sh", "-c", "echo x > /workspace/afile"])
    p = cli(daemon, "cp", "-r", f"{sbx}:/workspace/afile", str(dest))
    assert p.returncode == 125 and "(not_a_file" in p.stderr, p.stderr
    assert not dest.exists()


# ---- cp -r does not trust the server's tar ---------------------------------------------


@pytest.mark.parametrize("member,why", [
    ({"name": "d/ln", "type": tarfile.SYMTYPE, "linkname": "/etc"}, "a symlink"),
    ({"name": "d/hl", "type": tarfile.LNKTYPE, "linkname": "d/ok"}, "a hard link"),
    ({"name": "d/../../escape"}, "'..'"),
    ({"name": "/abs/escape"}, "absolute"),
    ({"name": "d/dev", "type": tarfile.CHRTYPE}, "not a regular file or directory"),
])
def test_cp_r_refuses_a_hostile_tar_from_the_server(tmp_path, member, why):
    from fakedaemon import FakeDaemon, sandbox_id
    fake = FakeDaemon(str(tmp_path / "fake.sock")).start()
    try:
        sid = sandbox_id(1)
        fake.add_sandbox(sid)
        data = b"evil" if member.get("type") is None else None
        fake.files[(sid, "/workspace/d")] = make_tar([
            ({"name": "d", "type": tarfile.DIRTYPE}, None),
            ({"name": "d/ok"}, b"fine"),
            (dict(member), data),
        ])
        work = tmp_path / "work"
        work.mkdir()
        p = subprocess.run([AGENTBOX, "cp", "--socket", fake.path, "-r", f"{sid}:/workspace/d",
                            str(work / "out")], capture_output=True, text=True, timeout=60)
    finally:
        fake.stop()
    assert p.returncode == 125, p.stderr
    assert "agentboxd sent a tar with" in p.stderr and why in p.stderr, p.stderr
    # nothing of the refused member anywhere, inside or beside
    found = [os.path.join(d, f) for d, ds, fs in os.walk(tmp_path) for f in fs + ds]
    assert not any(os.path.basename(f) in ("ln", "hl", "escape", "dev") for f in found), found
    assert not os.path.exists("/abs/escape")
