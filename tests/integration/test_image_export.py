"""`agentbox image export` against the real daemon (docs/images.md): an
image imported from a layout the test makes is written out as an OCI
layout tar, to a file and to a pipe; skopeo reads the file as an
oci-archive with the image's digest; imported again (after the image is
removed) it is the same image, by digest and name; an unknown image is
refused and leaves no file.
"""
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import AGENTBOX
from test_images import daemon, entries, image, oci_layout, write  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (image trees are chowned)")


def test_export_to_a_file_and_a_pipe_imports_back(daemon, tmp_path):
    d = daemon
    layout, _ = oci_layout("ex")
    image(d, "import", write(tmp_path, "ex.tar", layout), "--name", "team/ex:1")
    digest = json.loads(image(d, "inspect", "team/ex:1").stdout)["digest"]

    out = tmp_path / "out.tar"
    assert image(d, "export", "team/ex:1", "-o", str(out)).stdout == ""
    with tarfile.open(out) as t:
        names = t.getnames()
        index = json.load(t.extractfile("index.json"))
    assert names[:2] == ["oci-layout", "index.json"]
    assert f"blobs/sha256/{digest.split(':')[1]}" in names
    assert index["manifests"][0]["digest"] == digest
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == "team/ex:1"
    assert entries(d, "tmp") == []  # the daemon's copy is gone once sent

    # to a pipe: the same bytes
    piped = subprocess.run([AGENTBOX, "image", "export", "team/ex:1", "--socket", d.socket],
                           capture_output=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_bytes()

    if shutil.which("skopeo"):
        shown = json.loads(subprocess.run(["skopeo", "inspect", f"oci-archive:{out}"],
                                          capture_output=True, text=True, check=True,
                                          timeout=120).stdout)
        assert shown["Digest"] == digest
        assert shown["Env"] == ["PATH=/usr/bin:/bin", "WHO=ex"]

    # gone, then imported from the export: the same image, by its name
    image(d, "rm", "team/ex:1")
    image(d, "prune")
    assert image(d, "import", str(out)).stdout == "team/ex:1\n"
    assert json.loads(image(d, "inspect", "team/ex:1").stdout)["digest"] == digest


@pytest.mark.skipif(not shutil.which("skopeo"), reason="skopeo is not installed (scripts/install-deps)")
def test_skopeo_accepts_the_export(daemon, tmp_path):
    """skopeo copies the export into an OCI layout of its own, the digest kept."""
    d = daemon
    layout, _ = oci_layout("sk")
    image(d, "import", write(tmp_path, "sk.tar", layout), "--name", "sk:2")
    digest = json.loads(image(d, "inspect", "sk:2").stdout)["digest"]
    out = tmp_path / "sk-out.tar"
    image(d, "export", "sk:2", "-o", str(out))
    copy = tmp_path / "copy"
    subprocess.run(["skopeo", "copy", "-q", "--preserve-digests", f"oci-archive:{out}",
                    f"oci:{copy}:sk"], check=True, timeout=120)
    index = json.loads((copy / "index.json").read_text())
    assert index["manifests"][0]["digest"] == digest


def test_export_of_an_unknown_image_refused(daemon, tmp_path):
    d = daemon
    out = tmp_path / "none.tar"
    proc = image(d, "export", "no/such:1", "-o", str(out), check=False)
    assert proc.returncode == 125
    assert "(not_found)" in proc.stderr
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".agentbox-export")] == []
    # a terminal is not written to
    tty = subprocess.run(["script", "-qec", f"{AGENTBOX} image export no/such:1 --socket {d.socket}",
                          "/dev/null"], capture_output=True, text=True, timeout=60) \
        if shutil.which("script") else None
    if tty is not None:
        assert "is a terminal" in tty.stdout
