"""`agentbox image bootstrap` against a local Debian mirror on loopback
(debian_mirror.py: the .debs install-deps cached, signed by a throwaway
key): one bootstrap for the module makes debian:bookworm, whose tree has
apt-get, Debian 12's debian_version and dpkg's status, and whose config
is the documented one; the cached layout other tests import is that image;
a bad image, name or mirror is a 400 naming its field; a mirror that
answers nothing, or one signed by another key, is a 502 bootstrap_failed
with debootstrap's last lines, and leaves nothing in images/tmp or
trees/.tmp-*.
"""
import json
import os
import shutil
import socket
import subprocess

import pytest

import debian_mirror
from conftest import AGENTBOX
from daemon import Daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (debootstrap chroots)")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    m = debian_mirror.LocalMirror(tmp_path_factory.mktemp("mirror")).build().start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, mirror):
    d = Daemon(tmp_path_factory.mktemp("bootstrap"), "--debian-mirror", mirror.url,
               "--debian-keyring", mirror.keyring).start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def bootstrapped(daemon):
    """The one bootstrap of the module, through the CLI: its --json answer."""
    proc = subprocess.run([AGENTBOX, "image", "bootstrap", "debian:bookworm", "--json",
                           "--socket", daemon.socket], capture_output=True, text=True,
                          timeout=debian_mirror.BOOTSTRAP_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    image = json.loads(proc.stdout)
    debian_mirror.save_layout(daemon.state)  # for other tests: made once per machine
    return image


def leftovers(d):
    images = d.state / "images"
    return (sorted(os.listdir(images / "tmp")),
            sorted(n for n in os.listdir(images / "trees") if n.startswith(".tmp-")))


def dpkg_status(path):
    """{package: its Status} of dpkg's status file."""
    out = {}
    for stanza in path.read_text().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if "Package" in fields:
            out[fields["Package"]] = fields.get("Status")
    return out


def no_free_port():
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_bootstrap_makes_a_debian_image(daemon, bootstrapped):
    d, image = daemon, bootstrapped
    assert image["name"] == "debian:bookworm"
    status, full = d.request("GET", "/v1/images/debian:bookworm")
    assert status == 200, full
    assert full["digest"] == image["digest"]
    assert full["config"]["os"] == "linux" and full["config"]["architecture"] == "amd64"
    assert full["config"]["cmd"] == ["/bin/bash"]
    assert any(e.startswith("PATH=") and "/usr/bin" in e for e in full["config"]["env"])
    assert [layer["media_type"] for layer in full["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar+gzip"]

    tree = d.state / "images" / "trees" / image["config_digest"].split(":", 1)[1]
    assert os.access(tree / "usr" / "bin" / "apt-get", os.X_OK)
    assert (tree / "etc" / "debian_version").read_text().startswith("12.")
    assert "VERSION_CODENAME=bookworm" in (tree / "etc" / "os-release").read_text()
    installed = dpkg_status(tree / "var" / "lib" / "dpkg" / "status")
    for pkg in ("apt", "dpkg", "bash", "coreutils", "debian-archive-keyring"):
        assert installed.get(pkg) == "install ok installed", pkg
    # nothing of the host or of the run: its name, its resolvers, the .debs
    assert (tree / "etc" / "hostname").read_text() == ""
    assert (tree / "etc" / "resolv.conf").read_text() == ""
    assert not [n for n in os.listdir(tree / "var" / "cache" / "apt" / "archives")
                if n.endswith(".deb")]
    # owned by the image's ids, never by the host's root
    assert (tree / "usr" / "bin" / "apt-get").stat().st_uid == 199934464
    assert leftovers(d) == ([], [])


def test_the_cached_layout_imports_as_a_debian_image(bootstrapped, tmp_path):
    # this module's bootstrap, or an earlier one's (made once per machine)
    path = debian_mirror.debian_image_layout(tmp_path)
    d = Daemon(tmp_path).start()
    try:
        proc = subprocess.run([AGENTBOX, "image", "import", path, "--socket", d.socket],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout == "debian:bookworm\n", proc.stderr
        status, body = d.request("GET", "/v1/images/debian:bookworm")
        assert status == 200 and body["config"]["cmd"] == ["/bin/bash"], body
        tree = d.state / "images" / "trees" / body["config_digest"].split(":", 1)[1]
        assert (tree / "etc" / "debian_version").read_text().startswith("12.")
        assert os.access(tree / "usr" / "bin" / "apt-get", os.X_OK)
    finally:
        d.stop()


@pytest.mark.parametrize("body, field, code", [
    ({"image": "debian:Bookworm"}, "image", "invalid_field"),
    ({"image": "ubuntu:jammy"}, "image", "invalid_field"),
    ({"image": "debian:nosuchsuite"}, "image", "invalid_field"),
    ({"image": "debian:" + "a" * 17}, "image", "invalid_field"),
    ({"image": 12}, "image", "invalid_field"),
    ({}, "image", "missing_field"),
    ({"image": "debian:bookworm", "name": "Not A Name"}, "name", "invalid_field"),
    ({"image": "debian:bookworm", "mirror": "ftp://deb.debian.org/debian"}, "mirror",
     "invalid_field"),
    ({"image": "debian:bookworm", "mirror": "file:///srv/debian"}, "mirror", "invalid_field"),
    ({"image": "debian:bookworm", "mirror": "http://x/'$(id)'"}, "mirror", "invalid_field"),
    ({"image": "debian:bookworm", "mirror": "http://x/" + "a" * 250}, "mirror",
     "invalid_field"),
    ({"image": "debian:bookworm", "suite": "bookworm"}, "suite", "unknown_field"),
])
def test_a_bad_request_names_its_field(daemon, body, field, code):
    status, answer = daemon.request("POST", "/v1/images/bootstrap", body)
    assert status == 400, answer
    assert answer["error"]["code"] == code and answer["error"]["field"] == field, answer
    assert leftovers(daemon) == ([], [])


def test_a_mirror_that_fails_is_a_clear_error_and_leaves_nothing(daemon, mirror, tmp_path):
    d = daemon
    before = d.request("GET", "/v1/images")[1]["images"]

    # nothing listens there
    url = f"http://127.0.0.1:{no_free_port()}/debian"
    proc = subprocess.run([AGENTBOX, "image", "bootstrap", "debian:bookworm", "--name",
                           "it/broken:1", "--mirror", url, "--socket", d.socket],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 125, proc.stderr
    assert "debootstrap failed" in proc.stderr and "(bootstrap_failed)" in proc.stderr
    assert "Release" in proc.stderr, proc.stderr  # its own last line says what it could not get
    assert leftovers(d) == ([], [])

    # a mirror whose Release is signed by a key agentboxd's keyring does not hold
    other = debian_mirror.LocalMirror(tmp_path / "other")
    shutil.copytree(os.path.join(mirror.root, "www", "debian", "dists"),
                    os.path.join(other.root, "www", "debian", "dists"))
    other._sign(os.path.join(other.root, "www", "debian", "dists", "bookworm", "Release"))
    other.start()
    try:
        status, answer = d.request("POST", "/v1/images/bootstrap",
                                   {"image": "debian:bookworm", "name": "it/forged:1",
                                    "mirror": other.url}, timeout=300)
    finally:
        other.stop()
    assert status == 502, answer
    assert answer["error"]["code"] == "bootstrap_failed"
    assert "debootstrap failed" in answer["error"]["message"], answer
    # debootstrap's own words, their end (the path of the keyring is long)
    assert "key id" in answer["error"]["message"], answer
    assert leftovers(d) == ([], [])
    assert d.request("GET", "/v1/images")[1]["images"] == before
