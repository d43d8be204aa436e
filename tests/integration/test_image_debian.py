"""A Debian image used as users use one (issue: images, "Inside"): a
sandbox of debian:bookworm (made with debootstrap from the test's own
local mirror, once per machine: debian_mirror.py) runs `apt-get install`
of a package from a local repository as "user": "root"; its writes to
/etc and /usr are its own, gone when it ends, and never seen by another
sandbox of the image; the image's tree is never written. No network: the
repository reaches the sandbox through `agentbox cp`.
"""
import hashlib
import os
import subprocess

import pytest

from conftest import AGENTBOX
from daemon import Daemon
from debian_mirror import debian_image_layout, hello_repo

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
