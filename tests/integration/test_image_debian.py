"""A Debian image used as users use one (issue: images, "Inside"): a
sandbox of debian:bookworm (made with debootstrap from the test's own
local mirror, once per machine: debian_mirror.py) runs `apt-get install`
of a package from a local repository as "user": "root"; its writes to
/etc and /usr are its own, gone when it ends, and never seen by another
sandbox of the image; the image's tree is never written. No network: the
repository reaches the sandbox through `agentbox cp`.
"""
import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest

from conftest import AGENTBOX
from daemon import Daemon
from debian_mirror import debian_image_layout, hello_repo
from imagelib import create_from_pool

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (image trees are chowned)")


def cli(d, *args, check=True, timeout=300):
    proc = subprocess.run([AGENTBOX, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, AGENTBOX_HOST=d.socket))
    if check:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("image-debian")
    layout = debian_image_layout(tmp)
    d = Daemon(tmp).start()
    cli(d, "image", "import", str(layout))
    d.repo = hello_repo(tmp / "repo")
    yield d
    d.stop()


def tree_digest(d):
    """A digest of every name, mode, owner and size of the image's tree (cheap, and enough)."""
    status, image = d.request("GET", "/v1/images/debian:bookworm")
    assert status == 200, image
    root = d.state / "images" / "trees" / image["config_digest"].split(":")[1]
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            st = os.lstat(os.path.join(dirpath, name))
            h.update(f"{dirpath}/{name} {st.st_mode} {st.st_uid} {st.st_size}\n".encode())
    return h.hexdigest()


def test_apt_get_install_as_root_from_a_local_repository(daemon):
    before = tree_digest(daemon)
    a = cli(daemon, "sandbox", "create", "--image", "debian:bookworm", "--user", "root",
            "--timeout", "10m").stdout.strip()
    b = cli(daemon, "sandbox", "create", "--image", "debian:bookworm").stdout.strip()
    try:
        cli(daemon, "exec", a, "--", "mkdir", "-p", "/tmp/repo")
        for name in os.listdir(daemon.repo):
            cli(daemon, "cp", os.path.join(daemon.repo, name), f"{a}:/tmp/repo/{name}")
        # the image's sources name the mirror it was made from (gone): ours instead
        cli(daemon, "exec", a, "--", "sh", "-c",
            "rm -f /etc/apt/sources.list.d/* && "
            "echo 'deb [trusted=yes] file:/tmp/repo ./' > /etc/apt/sources.list")
        update = cli(daemon, "exec", a, "--", "apt-get", "update", check=False)
        assert update.returncode == 0, update.stdout + update.stderr
        install = cli(daemon, "exec", a, "--", "apt-get", "install", "-y", "agentbox-hello",
                      check=False)
        assert install.returncode == 0, install.stdout + install.stderr
        assert cli(daemon, "exec", a, "--", "agentbox-hello").stdout == \
            "hello from agentbox-hello\n"
        assert cli(daemon, "exec", a, "--", "id", "-u").stdout == "0\n"
        assert "ii  agentbox-hello" in cli(daemon, "exec", a, "--", "dpkg", "-l",
                                           "agentbox-hello").stdout
        # the other sandbox of the image sees none of it
        other = cli(daemon, "exec", b, "--", "sh", "-c",
                    "command -v agentbox-hello; cat /etc/apt/sources.list 2>/dev/null; "
                    "dpkg -s agentbox-hello 2>&1 | head -1", check=False)
        assert "/usr/bin/agentbox-hello" not in other.stdout
        assert "file:/tmp/repo" not in other.stdout
        assert "is not installed" in other.stdout, other.stdout
        # as the sandbox user, apt-get may not install: root is opt-in
        denied = cli(daemon, "exec", b, "--", "apt-get", "install", "-y", "agentbox-hello",
                     check=False)
        assert denied.returncode != 0
    finally:
        cli(daemon, "sandbox", "rm", a, b)
    # gone with the sandbox: a new one of the image starts from the image
    c = cli(daemon, "sandbox", "create", "--image", "debian:bookworm").stdout.strip()
    try:
        again = cli(daemon, "exec", c, "--", "sh", "-c",
                    "test -e /usr/bin/agentbox-hello && echo present || echo absent")
        assert again.stdout == "absent\n"
    finally:
        cli(daemon, "sandbox", "rm", c)
    assert tree_digest(daemon) == before


def test_a_task_in_the_debian_image(daemon):
    tid = cli(daemon, "submit", "--image", "debian:bookworm", "--",
              "sh", "-c", "cat /etc/debian_version; id -u").stdout.strip()
    cli(daemon, "wait", tid, check=False)
    task = daemon.task(tid)
    assert task["status"] == "succeeded", task
    status, out = daemon.request("GET", f"/v1/tasks/{tid}/logs")
    assert out.splitlines()[0].startswith("12."), out
    assert out.splitlines()[1] == "1000"


# ---- a Python image: the Debian image and a layer of this host's Debian python3 -----------

PY_SKIP = ("test", "idlelib", "tkinter", "ensurepip", "lib2to3", "turtledemo", "__pycache__")


def python_layer():
    """A tar of /usr/bin/python3.11 (and python3), its stdlib and libexpat, from this host."""
    binary = "/usr/bin/python3.11"
    if not os.path.exists(binary) or not os.path.isdir("/usr/lib/python3.11"):
        pytest.skip("Debian's python3.11 is not installed on this host")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        def add(path, arcname=None):
            info = t.gettarinfo(path, arcname or path.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as f:
                    t.addfile(info, f)
            else:
                t.addfile(info)
        add(binary)
        add("/usr/bin/python3")
        add(os.path.realpath("/usr/lib/x86_64-linux-gnu/libexpat.so.1"),
            "usr/lib/x86_64-linux-gnu/libexpat.so.1")
        for dirpath, dirnames, filenames in os.walk("/usr/lib/python3.11"):
            dirnames[:] = sorted(d for d in dirnames if d not in PY_SKIP)
            add(dirpath)
            for name in sorted(filenames):
                add(os.path.join(dirpath, name))
    return out.getvalue()


def python_layout(debian_tar, out_path):
    """The Debian image's OCI layout tar plus the python layer, as image python:3.11."""
    def sha(b):
        return hashlib.sha256(b).hexdigest()
    blobs = {}
    with tarfile.open(debian_tar) as t:
        for m in t.getmembers():
            if m.isreg() and m.name.startswith("blobs/sha256/"):
                blobs[m.name.rsplit("/", 1)[1]] = t.extractfile(m).read()
        index = json.loads(t.extractfile("index.json").read())
    manifest = json.loads(blobs[index["manifests"][0]["digest"].split(":")[1]])
    config = json.loads(blobs[manifest["config"]["digest"].split(":")[1]])
    layer = python_layer()
    config["rootfs"]["diff_ids"].append(f"sha256:{sha(layer)}")
    config["config"]["Cmd"] = ["python3"]
    cfg = json.dumps(config).encode()
    manifest["config"] = {"mediaType": "application/vnd.oci.image.config.v1+json",
                          "digest": f"sha256:{sha(cfg)}", "size": len(cfg)}
    manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar",
                               "digest": f"sha256:{sha(layer)}", "size": len(layer)})
    man = json.dumps(manifest).encode()
    blobs.update({sha(layer): layer, sha(cfg): cfg, sha(man): man})
    new_index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": f"sha256:{sha(man)}", "size": len(man),
        "annotations": {"org.opencontainers.image.ref.name": "python:3.11"}}]}).encode()
    with tarfile.open(out_path, "w") as t:
        def put(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", new_index)
        for hex_, data in blobs.items():
            put(f"blobs/sha256/{hex_}", data)
    return out_path


@pytest.fixture(scope="module")
def python_tar(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("python-image")
    return python_layout(debian_image_layout(tmp), tmp / "python.tar")


SCRIPT = """import json, os, sys
pages = [{"page": i, "words": len(("word " * i).split())} for i in range(1, 31)]
with open("/workspace/report.json", "w") as f:
    json.dump(pages, f)
print(sys.version_info[:2], sum(p["words"] for p in pages), os.getcwd())
"""


def test_a_task_in_a_python_image_runs_a_script(daemon, python_tar, tmp_path):
    cli(daemon, "image", "import", str(python_tar))
    script = tmp_path / "report.py"
    script.write_text(SCRIPT)
    tid = cli(daemon, "submit", "--image", "python:3.11", "--file",
              f"{script}:/workspace/report.py", "--", "python3",
              "/workspace/report.py").stdout.strip()
    cli(daemon, "wait", tid, check=False)
    task = daemon.task(tid)
    status, out = daemon.request("GET", f"/v1/tasks/{tid}/logs")
    assert task["status"] == "succeeded", (task, out)
    assert out == "(3, 11) 465 /workspace\n"
    # out of memory in the image: reported as such
    tid = cli(daemon, "submit", "--image", "python:3.11", "--memory", "64m", "--",
              "python3", "-c", "b = bytearray(1 << 30)").stdout.strip()
    cli(daemon, "wait", tid, check=False)
    assert daemon.task(tid)["status"] == "oom_killed"


def test_python_sandboxes_from_their_pool_report_an_oom(python_tar, tmp_path):
    d = Daemon(tmp_path).start()
    cli(d, "image", "import", str(python_tar))
    d.stop()
    d = Daemon(tmp_path, "--pool", "0", "--pool", "python:3.11=1").start()
    try:
        sb = create_from_pool(d, cli, set(), "--image", "python:3.11")
        status, ran = d.request("POST", f"/v1/sandboxes/{sb}/exec", {
            "command": ["python3", "-c", "print(sum(range(10)))"]})
        assert status == 200 and ran["stdout"] == "45\n", ran
        status, oom = d.request("POST", f"/v1/sandboxes/{sb}/exec", {
            "command": ["python3", "-c", "b = bytearray(1 << 30)"]})
        assert status == 200 and oom["oom_killed"] is True, oom
        cli(d, "sandbox", "rm", sb)
    finally:
        d.stop()
