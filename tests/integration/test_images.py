"""The image store against the real daemon and the real `agentbox image`
(docs/images.md): an OCI layout tar and a docker save archive that the
test makes itself (tarfile, json, hashlib) are imported, their trees are
on disk with the right content and owners (IMAGE_ID_BASE + the layer's
ids), ls, inspect, rm and prune; a blob that is not what its manifest
says is refused with its error and leaves nothing; an archive announced
past IMAGE_IMPORT_MAX is refused before its body.
"""
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time

import pytest

from conftest import AGENTBOX
from daemon import Daemon, UnixHTTPConnection

IMAGE_ID_BASE = 199934464
IMAGE_IMPORT_MAX = 4 << 30

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (image trees are chowned)")


def tar_bytes(files):
    """A tar of {path: (bytes, uid, mode)}; bytes None: a directory."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, (data, uid, mode) in files.items():
            info = tarfile.TarInfo(path)
            if data is None:
                info.type, info.uid, info.gid, info.mode = tarfile.DIRTYPE, uid, uid, mode
                t.addfile(info)
                continue
            info.size, info.uid, info.gid, info.mode = len(data), uid, uid, mode
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def sha(data):
    return hashlib.sha256(data).hexdigest()


def layer(who):
    return tar_bytes({"etc": (None, 0, 0o755), "bin": (None, 0, 0o755),
                      "etc/who": (who.encode(), 1000, 0o644),
                      "bin/tool": (b"#!/bin/sh\necho tool\n", 0, 0o755)})


def config(who, diff_id):
    return json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2024-05-01T12:00:00Z",
        "config": {"Env": ["PATH=/usr/bin:/bin", f"WHO={who}"], "WorkingDir": "/work",
                   "User": "1000", "Cmd": ["/bin/tool"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
    }).encode()


def oci_layout(who, break_layer=False):
    """An OCI image layout as a tar; break_layer: the layer's bytes no longer its digest."""
    lay = layer(who)
    cfg = config(who, sha(lay))
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{sha(cfg)}", "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{sha(lay)}", "size": len(lay)}],
    }).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": f"sha256:{sha(manifest)}", "size": len(manifest),
                       "platform": {"os": "linux", "architecture": "amd64"},
                       "annotations": {"org.opencontainers.image.ref.name": "1"}}],
    }).encode()
    stored_layer = lay.replace(who.encode(), who.upper().encode()) if break_layer else lay
    return tar_bytes({
        "oci-layout": (b'{"imageLayoutVersion":"1.0.0"}', 0, 0o644),
        "index.json": (index, 0, 0o644),
        f"blobs/sha256/{sha(manifest)}": (manifest, 0, 0o644),
        f"blobs/sha256/{sha(cfg)}": (cfg, 0, 0o644),
        f"blobs/sha256/{sha(lay)}": (stored_layer, 0, 0o644),
    }), sha(cfg)


def docker_save(who, tag):
    lay = layer(who)
    cfg = config(who, sha(lay))
    manifest = json.dumps([{"Config": f"{sha(cfg)}.json", "RepoTags": [tag],
                            "Layers": ["aaaa/layer.tar"]}]).encode()
    return tar_bytes({
        "manifest.json": (manifest, 0, 0o644),
        f"{sha(cfg)}.json": (cfg, 0, 0o644),
        "aaaa/layer.tar": (lay, 0, 0o644),
    }), sha(cfg)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


def image(d, *args, check=True):
    proc = subprocess.run([AGENTBOX, "image", *args, "--socket", d.socket],
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def entries(d, sub):
    return sorted(os.listdir(d.state / "images" / sub))


def test_import_ls_inspect_rm_prune(daemon, tmp_path):
    d = daemon
    layout, oci_cfg = oci_layout("oci")
    saved, saved_cfg = docker_save("saved", "it/saved:2")

    # an OCI layout, named by --name (its ref.name "1" is a bare tag: no name)
    assert image(d, "import", write(tmp_path, "oci.tar", layout),
                 "--name", "it/oci:1").stdout == "it/oci:1\n"
    # a docker save: its RepoTags name it
    assert image(d, "import", write(tmp_path, "saved.tar", saved)).stdout == "it/saved:2\n"

    # the trees on disk: the layers' files, owned by IMAGE_ID_BASE + their ids
    for cfg, who in ((oci_cfg, "oci"), (saved_cfg, "saved")):
        tree = d.state / "images" / "trees" / cfg
        assert (tree / "etc" / "who").read_text() == who
        st = os.stat(tree / "etc" / "who")
        assert (st.st_uid, st.st_gid) == (IMAGE_ID_BASE + 1000, IMAGE_ID_BASE + 1000)
        st = os.stat(tree / "bin" / "tool")
        assert st.st_uid == IMAGE_ID_BASE and st.st_mode & 0o777 == 0o755
    assert entries(d, "tmp") == []
    # the store is an OCI layout itself
    index = json.loads((d.state / "images" / "index.json").read_text())
    names = {m["annotations"].get("org.opencontainers.image.ref.name")
             for m in index["manifests"]}
    assert names == {"it/oci:1", "it/saved:2"}

    assert image(d, "ls", "-q").stdout.split() == ["it/oci:1", "it/saved:2"]
    listed = json.loads(image(d, "ls", "--json").stdout)
    assert [i["config_digest"] for i in listed] == [f"sha256:{oci_cfg}", f"sha256:{saved_cfg}"]
    assert all(i["size"] > 0 and i["created"].startswith("2024-05-01") for i in listed)
    table = image(d, "ls").stdout.splitlines()
    assert table[0].split()[:4] == ["NAME", "DIGEST", "SIZE", "CREATED"]

    shown = json.loads(image(d, "inspect", "it/saved:2").stdout)
    assert shown["config"]["env"] == ["PATH=/usr/bin:/bin", "WHO=saved"]
    assert shown["config"]["cmd"] == ["/bin/tool"]
    assert shown["config"]["user"] == "1000"
    assert shown["config"]["working_dir"] == "/work"
    assert len(shown["layers"]) == 1
    by_digest = json.loads(image(d, "inspect", shown["digest"]).stdout)
    assert by_digest["name"] == "it/saved:2"

    # in use (the runtime's protocol, store.h: a shared flock on the tree's
    # directory, held by another process): rm is refused, and nothing changes
    tree = str(d.state / "images" / "trees" / saved_cfg)
    holder = subprocess.Popen(["flock", "--shared", "--no-fork", tree, "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until flock(1) holds it
            fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                break
            finally:
                os.close(fd)
            time.sleep(0.02)
        busy = image(d, "rm", "it/saved:2", check=False)
        assert busy.returncode == 125 and "(image_in_use)" in busy.stderr, busy.stderr
        assert (d.state / "images" / "trees" / saved_cfg / "etc" / "who").exists()
    finally:
        holder.kill()
        holder.wait()

    # rm: by name; what is gone is not_found
    assert image(d, "rm", "it/saved:2").stdout == "it/saved:2\n"
    assert not (d.state / "images" / "trees" / saved_cfg).exists()
    gone = image(d, "rm", "it/saved:2", check=False)
    assert gone.returncode == 125 and "(not_found)" in gone.stderr
    assert image(d, "inspect", "it/saved:2", check=False).returncode == 125

    # a name that moves leaves the old image unnamed: prune removes it
    layout2, oci2_cfg = oci_layout("oci-two")
    image(d, "import", write(tmp_path, "oci2.tar", layout2), "--name", "it/oci:1")
    assert image(d, "ls", "-q").stdout.split()[0] == "it/oci:1"
    assert len(json.loads(image(d, "ls", "--json").stdout)) == 2
    pruned = json.loads(image(d, "prune", "--json").stdout)
    assert pruned["images_removed"] == 1 and pruned["trees_removed"] == 1
    assert pruned["blobs_removed"] == 3 and pruned["bytes_freed"] > 0
    assert entries(d, "trees") == [oci2_cfg]
    assert len(entries(d, "blobs/sha256")) == 3
    assert image(d, "rm", "it/oci:1").returncode == 0
    assert entries(d, "trees") == [] and entries(d, "blobs/sha256") == []


def test_bad_digest_refused_and_nothing_left(daemon, tmp_path):
    d = daemon
    layout, cfg = oci_layout("bad", break_layer=True)
    proc = image(d, "import", write(tmp_path, "bad.tar", layout), "--name", "it/bad",
                 check=False)
    assert proc.returncode == 125
    assert "(invalid_image)" in proc.stderr and "digest" in proc.stderr
    assert image(d, "ls", "-q").stdout == ""
    for sub in ("trees", "blobs/sha256", "tmp"):
        assert entries(d, sub) == [], sub
    # a layout directory is sent as a tar of it
    layout_dir = tmp_path / "layout"
    layout_dir.mkdir()
    good, cfg = oci_layout("from-dir")
    with tarfile.open(fileobj=io.BytesIO(good)) as t:
        t.extractall(layout_dir)
    assert image(d, "import", str(layout_dir), "--name", "it/dir").stdout == "it/dir:latest\n"
    assert (d.state / "images" / "trees" / cfg / "etc" / "who").read_text() == "from-dir"
    # a directory that is no layout: refused, nothing left
    (tmp_path / "empty").mkdir()
    proc = image(d, "import", str(tmp_path / "empty"), check=False)
    assert proc.returncode == 125 and "(invalid_image)" in proc.stderr
    assert entries(d, "tmp") == [] and entries(d, "trees") == [cfg]


def test_import_over_the_limit_refused_before_its_body(daemon):
    conn = UnixHTTPConnection(daemon.socket, timeout=10)
    conn.putrequest("POST", "/v1/images/import")
    conn.putheader("Content-Type", "application/x-tar")
    conn.putheader("Content-Length", str(IMAGE_IMPORT_MAX + 1))
    conn.endheaders()
    start = time.monotonic()
    resp = conn.getresponse()  # no byte of the body was sent
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 413, body
    assert body["error"]["code"] == "body_too_large"
    assert time.monotonic() - start < 10
    assert entries(daemon, "tmp") == []


@pytest.mark.skipif(not shutil.which("skopeo"), reason="skopeo is not installed (scripts/install-deps)")
def test_skopeo_reads_the_store_and_its_archives_import(daemon, tmp_path):
    """The store is an OCI layout a real tool reads; what that tool writes (an
    oci-archive, its layers gzipped) imports."""
    d = daemon
    layout, _ = oci_layout("sk")
    image(d, "import", write(tmp_path, "sk.tar", layout), "--name", "it/sk:1")
    store = d.state / "images"
    shown = json.loads(subprocess.run(["skopeo", "inspect", f"oci:{store}:it/sk:1"],
                                      capture_output=True, text=True, check=True).stdout)
    assert shown["Env"] == ["PATH=/usr/bin:/bin", "WHO=sk"]
    assert shown["Digest"] == json.loads(image(d, "inspect", "it/sk:1").stdout)["digest"]

    archive = tmp_path / "copy.tar"
    subprocess.run(["skopeo", "copy", "-q", f"oci:{store}:it/sk:1",
                    f"oci-archive:{archive}:it/copy:1"], check=True, timeout=120)
    assert image(d, "import", str(archive)).stdout == "it/copy:1\n"  # its ref.name
    copied = json.loads(image(d, "inspect", "it/copy:1").stdout)
    tree = store / "trees" / copied["config_digest"].split(":")[1]
    assert (tree / "etc" / "who").read_text() == "sk"
