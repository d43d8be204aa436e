"""Small OCI images that tests make themselves, with Python's tarfile,
json and hashlib: no registry and no network.

busybox_layout() is a busybox-static userland (Debian's busybox-static)
with a small /etc and the config the caller gives, as an OCI image
layout in a tar that `agentbox image import` takes.
"""
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import time

import pytest


def sha(data):
    return hashlib.sha256(data).hexdigest()


def tar_bytes(entries):
    """A tar of [(path, kind, data_or_target, uid, mode)], kind 'file', 'dir' or 'symlink'."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, kind, data, uid, mode in entries:
            info = tarfile.TarInfo(path)
            info.uid = info.gid = uid
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, data
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def busybox_layer(files=None):
    busybox = shutil.which("busybox")
    if not busybox:
        pytest.skip("busybox (Debian's busybox-static) is not installed: no image to test with")
    with open(busybox, "rb") as f:
        binary = f.read()
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    entries = [(d, "dir", None, 0, 0o755) for d in ("bin", "etc", "root", "var", "var/lib")]
    entries.append(("tmp", "dir", None, 0, 0o1777))
    entries.append(("bin/busybox", "file", binary, 0, 0o755))
    entries += [(f"bin/{a}", "symlink", "busybox", 0, 0o777) for a in applets if a != "busybox"]
    base = {
        "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000::/home/agent:/bin/sh\n",
        "etc/group": "root:x:0:\nagent:x:1000:\n",
        "etc/os-release": "ID=agentbox-busybox\n",
    }
    base.update(files or {})
    entries += [(p, "file", text.encode(), 0, 0o644) for p, text in base.items()]
    return tar_bytes(entries)


def busybox_layout(name, config=None, files=None):
    """(the OCI layout tar's bytes, the config's digest) of image `name` ("repo:tag")."""
    lay = busybox_layer(files)
    cfg = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2026-01-01T00:00:00Z",
        "config": config if config is not None else {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{sha(lay)}"]},
    }).encode()
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
                       "annotations": {"org.opencontainers.image.ref.name": name}}],
    }).encode()
    return tar_bytes([
        ("oci-layout", "file", b'{"imageLayoutVersion":"1.0.0"}', 0, 0o644),
        ("index.json", "file", index, 0, 0o644),
        ("blobs", "dir", None, 0, 0o755),
        ("blobs/sha256", "dir", None, 0, 0o755),
        (f"blobs/sha256/{sha(manifest)}", "file", manifest, 0, 0o644),
        (f"blobs/sha256/{sha(cfg)}", "file", cfg, 0, 0o644),
        (f"blobs/sha256/{sha(lay)}", "file", lay, 0, 0o644),
    ]), f"sha256:{sha(cfg)}"


# the line agentbox-shim logs once its sandbox is up, just before it tells agentboxd
SHIM_UP_MARK = b" is up, init pid "


def pool_ready(d):
    """Ids of the sandboxes under d's state whose shim says they are up."""
    ready = set()
    sbdir = d.state / "sandboxes"
    for p in (sbdir.iterdir() if sbdir.exists() else ()):
        try:
            if SHIM_UP_MARK in (p / "shim.log").read_bytes():
                ready.add(p.name)
        except OSError:
            pass
    return ready


def create_from_pool(d, cli, held, *args, timeout=120):
    """`agentbox sandbox create ARGS` served from a warm pool: its id, added to held.

    The shim says it is up an instant before agentboxd adopts it into its
    pool: a create in that instant is made on demand instead, so such a
    one is removed and the create asked again, until the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        ready = pool_ready(d) - held
        if ready:
            sid = cli(d, "sandbox", "create", *args).stdout.strip()
            if sid in ready:
                held.add(sid)
                return sid
            held.add(sid)  # never a pooled one of ours
            cli(d, "sandbox", "rm", sid)
        assert time.monotonic() < deadline, "no pooled sandbox served the create"
        time.sleep(0.05)
