"""Local Debian repositories for the integration suite, on loopback only.

scripts/install-deps --tests keeps the .debs of a bookworm minbase in the test
cache (AGENTBOX_TEST_CACHE, default /var/cache/agentbox-test); from them:

- LocalMirror: a Debian mirror of those .debs (apt-ftparchive's Packages
  and Release, signed by a throwaway gpg key whose keyring it gives),
  served by http.server on 127.0.0.1, for `agentbox image bootstrap`;
- debian_image_layout(): a tar of an OCI image layout of debian:bookworm
  bootstrapped from that mirror, made once per machine under the cache and
  reused: a test that needs a Debian image imports it
  (`agentbox image import PATH`), in seconds;
- hello_repo(dir): a flat apt repository holding one small package,
  agentbox-hello (/usr/bin/agentbox-hello), for
  `deb [trusted=yes] file:/repo ./` inside a sandbox.

Nothing here sends a packet past loopback.
"""
import fcntl
import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading

import pytest

SUITE = "bookworm"
CACHE = os.environ.get("AGENTBOX_TEST_CACHE", "/var/cache/agentbox-test")
DEBS = os.path.join(CACHE, f"debootstrap-{SUITE}", "debs")
IMAGES = os.path.join(CACHE, "images")
# bump when what a bootstrap makes changes, so a cached layout is made again
LAYOUT_VERSION = "1"
BOOTSTRAP_TIMEOUT_S = 900  # a bound on liveness: debootstrap takes a minute or two here


def require_debs():
    """The cached .debs' directory; skips (loudly) when install-deps did not fetch them."""
    if not os.path.isdir(DEBS) or not any(n.endswith(".deb") for n in os.listdir(DEBS)):
        pytest.skip(f"no cached .debs in {DEBS}: run scripts/install-deps --tests")
    for tool in ("/usr/sbin/debootstrap", "/usr/bin/apt-ftparchive", "/usr/bin/gpg"):
        if not os.access(tool, os.X_OK):
            pytest.skip(f"{tool} is missing: run scripts/install-deps")
    return DEBS


def _run(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, timeout=120, **kw)


def _ftparchive_release(dist_dir, *opts):
    """apt-ftparchive release of dist_dir, written to dist_dir/Release."""
    out = _run(["apt-ftparchive", *opts, "release", "."], cwd=dist_dir).stdout
    with open(os.path.join(dist_dir, "Release"), "wb") as f:
        f.write(out)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class LocalMirror:
    """A signed Debian mirror of the cached .debs, served on 127.0.0.1."""

    def __init__(self, root):
        self.root = str(root)
        self.keyring = os.path.join(self.root, "keyring.gpg")
        self.server = None

    def build(self):
        debs = require_debs()
        repo = os.path.join(self.root, "www", "debian")
        pool = os.path.join(repo, "pool", "main")
        os.makedirs(pool)
        for name in sorted(os.listdir(debs)):
            if name.endswith(".deb"):
                # the archive's names have no epoch ("1%3a" as apt saved it)
                shutil.copyfile(os.path.join(debs, name),
                                os.path.join(pool, re.sub(r"_[0-9]+%3a", "_", name)))
        dist = os.path.join(repo, "dists", SUITE)
        binary = os.path.join(dist, "main", "binary-amd64")
        os.makedirs(binary)
        packages = _run(["apt-ftparchive", "packages", "pool/main"], cwd=repo).stdout
        with open(os.path.join(binary, "Packages"), "wb") as f:
            f.write(packages)
        with gzip.open(os.path.join(binary, "Packages.gz"), "wb") as f:
            f.write(packages)
        _ftparchive_release(dist, "-o", f"APT::FTPArchive::Release::Suite={SUITE}",
                            "-o", f"APT::FTPArchive::Release::Codename={SUITE}",
                            "-o", "APT::FTPArchive::Release::Architectures=amd64",
                            "-o", "APT::FTPArchive::Release::Components=main")
        self._sign(os.path.join(dist, "Release"))
        return self

    def _sign(self, release):
        """A throwaway key signs Release (InRelease, Release.gpg); its public key is the keyring."""
        home = tempfile.mkdtemp(prefix="abx-gpg-")  # short: gpg-agent's socket path
        env = {"GNUPGHOME": home, "PATH": "/usr/bin:/bin"}
        gpg = ["gpg", "--batch", "--yes", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""]
        try:
            _run([*gpg, "--quick-gen-key", "agentbox test mirror <mirror@invalid>",
                  "ed25519", "sign", "never"], env=env)
            with open(self.keyring, "wb") as f:
                f.write(_run([*gpg, "--export"], env=env).stdout)
            d = os.path.dirname(release)
            _run([*gpg, "--clearsign", "-o", os.path.join(d, "InRelease"), release], env=env)
            _run([*gpg, "-abs", "-o", os.path.join(d, "Release.gpg"), release], env=env)
        finally:
            subprocess.run(["gpgconf", "--homedir", home, "--kill", "all"], env=env,
                           capture_output=True, timeout=30)
            shutil.rmtree(home, ignore_errors=True)

    def start(self):
        handler = functools.partial(_QuietHandler, directory=os.path.join(self.root, "www"))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/debian"

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _layout_key():
    names = sorted(n for n in os.listdir(require_debs()) if n.endswith(".deb"))
    return hashlib.sha256("\n".join([LAYOUT_VERSION, *names]).encode()).hexdigest()[:16]


def cached_layout_path():
    return os.path.join(IMAGES, f"debian-{SUITE}-{_layout_key()}.tar")


def export_layout(state_dir, name, out_path):
    """The image name of the store at state_dir as an OCI layout tar at out_path (atomically)."""
    images = os.path.join(str(state_dir), "images")
    with open(os.path.join(images, "index.json")) as f:
        index = json.load(f)
    entry = next(m for m in index["manifests"]
                 if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == name)

    def blob(digest):
        return os.path.join(images, "blobs", "sha256", digest.split(":", 1)[1])

    with open(blob(entry["digest"])) as f:
        manifest = json.load(f)
    digests = [entry["digest"], manifest["config"]["digest"],
               *(layer["digest"] for layer in manifest["layers"])]
    desc = {k: entry[k] for k in ("mediaType", "digest", "size")}
    desc["annotations"] = {"org.opencontainers.image.ref.name": name}
    index_out = json.dumps({"schemaVersion": 2, "manifests": [desc]}).encode()
    tmp = f"{out_path}.tmp-{os.getpid()}"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
        for arcname, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                              ("index.json", index_out)):
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for d in digests:
            t.add(blob(d), arcname=f"blobs/sha256/{d.split(':', 1)[1]}")
    os.replace(tmp, out_path)
    return out_path


def save_layout(state_dir, name="debian:bookworm"):
    """Keep a bootstrapped image of the store at state_dir as the cached layout, if none is."""
    path = cached_layout_path()
    if not os.path.exists(path):
        os.makedirs(IMAGES, exist_ok=True)
        export_layout(state_dir, name, path)
    return path


def debian_image_layout(tmp_dir):
    """A tar of an OCI layout of debian:bookworm (made once per machine, then reused).

    tmp_dir: where to run the one bootstrap when there is no cached layout yet.
    """
    from daemon import Daemon  # here: the module is also used without a daemon

    path = cached_layout_path()
    if os.path.exists(path):
        return path
    os.makedirs(IMAGES, exist_ok=True)
    with open(os.path.join(IMAGES, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker at a time; the others then reuse it
        if os.path.exists(path):
            return path
        mirror = LocalMirror(os.path.join(str(tmp_dir), "mirror")).build().start()
        d = Daemon(tmp_dir, "--debian-mirror", mirror.url, "--debian-keyring", mirror.keyring)
        try:
            d.start()
            status, body = d.request("POST", "/v1/images/bootstrap",
                                     {"image": f"debian:{SUITE}"}, timeout=BOOTSTRAP_TIMEOUT_S)
            assert status == 201, body
            export_layout(d.state, f"debian:{SUITE}", path)
        finally:
            d.stop()
            mirror.stop()
    return path


def hello_repo(directory):
    """A flat apt repository in directory (made) with the package agentbox-hello; its path.

    Inside a sandbox: `deb [trusted=yes] file:/repo ./` where /repo is it.
    """
    directory = str(directory)
    build = tempfile.mkdtemp(prefix="abx-hello-")
    try:
        pkg = os.path.join(build, "agentbox-hello")
        os.makedirs(os.path.join(pkg, "DEBIAN"))
        os.makedirs(os.path.join(pkg, "usr", "bin"))
        with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
            f.write("Package: agentbox-hello\nVersion: 1.0\nArchitecture: all\n"
                    "Maintainer: agentbox tests <tests@invalid>\nSection: misc\n"
                    "Priority: optional\nDescription: says hello from a local repository\n")
        tool = os.path.join(pkg, "usr", "bin", "agentbox-hello")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\necho hello from agentbox-hello\n")
        os.chmod(tool, 0o755)
        os.makedirs(directory, exist_ok=True)
        _run(["dpkg-deb", "--root-owner-group", "--build", pkg,
              os.path.join(directory, "agentbox-hello_1.0_all.deb")])
    finally:
        shutil.rmtree(build, ignore_errors=True)
    packages = _run(["apt-ftparchive", "packages", "."], cwd=directory).stdout
    with open(os.path.join(directory, "Packages"), "wb") as f:
        f.write(packages)
    _ftparchive_release(directory)
    return directory
