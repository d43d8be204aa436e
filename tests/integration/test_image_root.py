"""A sandbox whose / is an image's tree (`agentbox run --image-tree`), and
root inside as an opt-in (`--user root`).

The tree is built here as the image store builds one: a busybox-static
userland and a small /etc, every file owned on the host by
IMAGE_ID_BASE + its id in the image. The sandbox sees it through an
id-mapped overlay: ids 0..65535, writable, the tree itself never written.

Run as root:  AGENTBOX_BUILD=<builddir> python3 -m pytest tests/integration
"""
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from conftest import AGENTBOX, run, sandbox

# image/unpack.h: IMAGE_ID_BASE (= runtime/uidrange.h's UIDRANGE_IMAGE_BASE)
IMAGE_ID_BASE = 199934464
# runtime/privs.h: PRIVS_ROOT_CAPS = CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID
ROOT_CAPS = "00000000000000fb"
ZERO_CAPS = "0000000000000000"


def _chown_image(path, uid, gid):
    os.lchown(path, IMAGE_ID_BASE + uid, IMAGE_ID_BASE + gid)


def build_tree(root, extra=None):
    """A busybox image at root, owned as the image store owns its trees."""
    busybox = shutil.which("busybox")
    if not busybox:
        pytest.skip("busybox (Debian's busybox-static) is not installed: no image to test with")
    for d in ("bin", "usr/bin", "etc", "tmp", "dev", "proc", "root", "var/lib"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        if a != "busybox":
            os.symlink("busybox", os.path.join(root, "bin", a))
    files = {
        "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nsvc:x:5:5:svc:/:/bin/sh\n",
        "etc/group": "root:x:0:\nsvc:x:5:\n",
        "etc/hosts": "10.9.9.9\timage-own-hosts\n",
        "etc/os-release": "ID=agentbox-test-image\n",
        "var/lib/owned5": "belongs to uid 5\n",
    }
    files.update(extra or {})
    for rel, text in files.items():
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            _chown_image(os.path.join(dirpath, name), 0, 0)
    _chown_image(root, 0, 0)
    _chown_image(os.path.join(root, "var/lib/owned5"), 5, 5)
    return root


def snapshot(root):
    """Everything of a tree that a write through the sandbox could change."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in ["", *dirnames, *filenames]:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            snap[os.path.relpath(p, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size,
                                              st.st_mtime_ns, digest)
    return snap


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("image") / "rootfs")
    os.mkdir(root)
    return build_tree(root)


@pytest.fixture(autouse=True)
def tree_unchanged(tree):
    """Whatever a test does inside, the shared tree on the host is as it was."""
    before = snapshot(tree)
    yield
    assert snapshot(tree) == before, "the image's tree changed on the host"


def image_run(tree, cmd, *opts, **kw):
    return sandbox(cmd, "--image-tree", tree, *opts, **kw)


def _status_fields(text):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


# --------------------------------------------------------------------------
# what the sandbox sees

def test_the_image_is_the_root_with_its_ids_from_zero(tree):
    p = image_run(tree, ["sh", "-c", "cat /etc/os-release; stat -c '%u %g %n' / /bin/busybox "
                         "/var/lib/owned5; id -u"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "ID=agentbox-test-image"
    assert lines[1:4] == ["0 0 /", "0 0 /bin/busybox", "5 5 /var/lib/owned5"]
    assert lines[4] == "1000"  # the default user is still the sandbox user


def test_etc_is_the_images_but_hosts_hostname_and_resolver_are_ours(tree):
    p = image_run(tree, ["sh", "-c", "cat /etc/hosts /etc/hostname /etc/resolv.conf; "
                         "grep -c svc /etc/passwd"])
    assert p.returncode == 0, p.stderr
    assert "localhost agentbox" in p.stdout and "image-own-hosts" not in p.stdout
    assert "nameserver 10.231.0.1" in p.stdout
    assert p.stdout.splitlines()[-1] == "1"  # the image's own passwd


def test_the_default_user_meets_the_images_permissions(tree):
    p = image_run(tree, ["sh", "-c", "echo x > /etc/x"])
    assert p.returncode != 0
    assert "Permission denied" in p.stderr
    # its own places stay writable
    p = image_run(tree, ["sh", "-c", "echo ok > /tmp/a && echo ok > /workspace/b && "
                         "cat /tmp/a /workspace/b"])
    assert p.returncode == 0 and p.stdout == "ok\nok\n", p.stderr


# --------------------------------------------------------------------------
# a writable root: the upper layer

def test_root_writes_etc_and_usr_in_the_upper_layer(tree):
    p = image_run(tree, ["sh", "-c", "echo hi > /etc/x && echo new > /usr/bin/new && "
                         "chmod 755 /usr/bin/new && echo more >> /etc/passwd && "
                         "chown 5:5 /etc/x && rm /etc/os-release && "
                         "cat /etc/x /usr/bin/new && stat -c '%u' /etc/x && "
                         "test ! -e /etc/os-release && tail -n1 /etc/passwd"],
                  "--user", "root")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hi\nnew\n5\nmore\n"
    # gone with the sandbox: the next one sees the image as it was
    p = image_run(tree, ["sh", "-c", "test ! -e /etc/x && test ! -e /usr/bin/new && "
                         "cat /etc/os-release"])
    assert p.returncode == 0 and p.stdout == "ID=agentbox-test-image\n", p.stderr


def test_two_sandboxes_of_one_tree_do_not_see_each_others_writes(tree):
    a = subprocess.Popen([AGENTBOX, "run", "--image-tree", tree, "--user", "root", "--",
                          "sh", "-c", "echo A > /etc/mark; echo ready; read x; cat /etc/mark"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert a.stdout.readline() == "ready\n", a.stderr.read()
        # A has written /etc/mark and waits: B runs whole meanwhile
        b = image_run(tree, ["sh", "-c", "test ! -e /etc/mark && echo B > /etc/mark && "
                             "cat /etc/mark"], "--user", "root")
        assert b.returncode == 0 and b.stdout == "B\n", b.stderr
        out, err = a.communicate("go\n", timeout=30)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 0 and out == "A\n", err


def test_the_upper_layer_is_held_to_disk(tree):
    p = image_run(tree, ["sh", "-c", "dd if=/dev/zero of=/usr/bin/big bs=1M count=64; "
                         "echo rc=$?"], "--user", "root", "--disk", "8m")
    assert "No space left on device" in p.stderr, p.stderr
    assert "rc=0" not in p.stdout and "rc=" in p.stdout
    # /tmp, the workdir and the upper layer share the one --disk
    p = image_run(tree, ["sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=6 2>/dev/null;"
                         " dd if=/dev/zero of=/etc/big bs=1M count=6"],
                  "--user", "root", "--disk", "8m")
    assert p.returncode != 0 and "No space left on device" in p.stderr, p.stderr


@pytest.fixture
def victim():
    """A host directory anyone may reach and write."""
    d = tempfile.mkdtemp(prefix="agentbox-victim-", dir="/tmp")
    os.chmod(d, 0o777)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_an_image_cannot_send_mounts_or_writes_out_of_its_root(tmp_path, victim):
    """Symlinks where the sandbox mounts and writes, pointing at a host
    directory anyone may write: nothing lands there, no mount is made on
    it, and the sandbox works. On kernels before the one this is built on
    (6.18), the overlay may refuse to replace such a lower entry in the
    upper layer (6.1: EIO): the sandbox is then refused, closed, and still
    nothing lands outside."""
    root = str(tmp_path / "hostile")
    os.mkdir(root)
    build_tree(root)
    for name in ("dev", "proc", "tmp"):
        os.rmdir(os.path.join(root, name))
        os.symlink(str(victim), os.path.join(root, name))
    os.symlink(str(victim), os.path.join(root, "workspace"))
    os.unlink(os.path.join(root, "etc/hosts"))
    os.symlink(str(victim / "hosts"), os.path.join(root, "etc/hosts"))
    os.symlink(str(victim / "resolv"), os.path.join(root, "etc/resolv.conf"))
    for name in ("dev", "proc", "tmp", "workspace", "etc/hosts", "etc/resolv.conf"):
        _chown_image(os.path.join(root, name), 0, 0)
    before = snapshot(root)
    p = sandbox(["sh", "-c", "echo ok > /tmp/t && cat /tmp/t /etc/hosts && ls /proc/self/"
                 "status && ls /dev/null && cat /proc/self/mountinfo"],
                "--image-tree", root, "--user", "root")
    kernel = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    if p.returncode != 0 and kernel < (6, 18):
        assert p.returncode == 125, p.stderr
        assert "sandbox setup failed: image root:" in p.stderr, p.stderr
    else:
        assert p.returncode == 0, p.stderr
        assert "localhost agentbox" in p.stdout
        assert str(victim) not in p.stdout  # no mount on the host directory
    assert os.listdir(victim) == []
    assert snapshot(root) == before


# --------------------------------------------------------------------------
# root inside, opt-in

def test_user_root_is_uid_zero_with_exactly_the_chosen_caps(tree):
    p = image_run(tree, ["sh", "-c", "id -u; id -g; cat /proc/self/status"], "--user", "root")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:2] == ["0", "0"]
    st = _status_fields("\n".join(lines[2:]))
    assert st["CapEff"] == ROOT_CAPS and st["CapPrm"] == ROOT_CAPS, st
    assert st["CapBnd"] == ROOT_CAPS, st
    assert st["CapInh"] == ZERO_CAPS and st["CapAmb"] == ZERO_CAPS, st
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    # never the host's root: the sandbox's own range
    assert st["Uid"].split()[0] == "0"


def test_user_root_drops_to_another_user_as_apt_does(tree):
    """setgroups + setuid to another id loses every capability."""
    p = image_run(tree, ["sh", "-c", "su -s /bin/sh svc -c 'id -u; grep CapEff /proc/self/status;"
                         " echo x > /etc/y' ; echo rc=$?"], "--user", "root")
    # busybox su is setuid-free here: it runs as root and switches itself
    assert "5\n" in p.stdout, p.stdout + p.stderr
    assert "CapEff:\t" + ZERO_CAPS in p.stdout, p.stdout
    assert "Permission denied" in p.stderr


def test_user_root_without_an_image(tree):
    p = sandbox(["sh", "-c", "id -u; grep CapEff /proc/self/status; touch /usr/x"],
                "--user", "root")
    assert p.stdout.splitlines()[:2] == ["0", "CapEff:\t" + ROOT_CAPS], p.stdout + p.stderr
    assert p.returncode != 0  # the default root stays read-only, for root too


def test_user_root_still_cannot_reach_the_kernel_or_the_host(tree):
    cmds = [
        "mount -t tmpfs none /tmp",           # seccomp: no mounts
        "unshare -U true",                     # seccomp: no namespaces
        "echo 1 > /proc/sys/kernel/ostype",    # read-only /proc/sys
        "echo b > /proc/sysrq-trigger",        # masked
        "mknod /tmp/d c 1 1",                  # no CAP_MKNOD
        "chmod u+s /bin/busybox",              # seccomp: no set-id bits
        "hostname other",                      # seccomp: no sethostname
    ]
    for c in cmds:
        p = image_run(tree, ["sh", "-c", c], "--user", "root")
        assert p.returncode != 0, f"{c!r} succeeded as root inside: {p.stdout} {p.stderr}"


# --------------------------------------------------------------------------
# the default root

def test_the_default_root_has_the_hosts_ca_certificates():
    if not os.path.isdir("/etc/ssl/certs") or not os.listdir("/etc/ssl/certs"):
        pytest.skip("the host has no /etc/ssl/certs")
    host = sorted(os.listdir("/etc/ssl/certs"))
    p = sandbox(["sh", "-c", "ls /etc/ssl/certs; touch /etc/ssl/certs/x"])
    assert p.returncode != 0  # read-only
    assert p.stdout.split() == host


def test_bad_image_options_exit_125(tree, tmp_path):
    for args, needle in (
        (["--image-tree", str(tmp_path / "none")], "--image-tree"),
        (["--image-tree", tree, "--rootfs", tree], "exclude each other"),
        (["--user", "admin"], "--user: 'admin' is not root or sandbox"),
    ):
        p = run(["run", *args, "--", "true"])
        assert p.returncode == 125 and needle in p.stderr, p.stderr
