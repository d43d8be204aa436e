"""What several integration tests need to look at the host from outside."""
import os

UID_BASE = 200000000  # UIDRANGE_BASE in src/runtime/uidrange.h


def sandbox_pids():
    """Host pids of processes running under any sandbox uid range."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) >= UID_BASE:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def agentbox_group_dirs():
    """Every agentbox/ parent cgroup directory on this host (v1 and v2)."""
    found = []
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(top) == "agentbox":
            found.append(top)
            dirs[:] = []
        elif top.count("/") > 8:
            dirs[:] = []
    return found


def sandbox_groups():
    """The sandbox cgroups (sb-N) that exist right now, as paths."""
    return sorted(os.path.join(d, e) for d in agentbox_group_dirs()
                  for e in os.listdir(d) if e.startswith("sb-"))


def agentbox_mounts():
    """Host mounts that agentbox could have left behind."""
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if "/agentbox/" in line.split(" - ")[0]]


def children_map():
    """{ppid: [pid, ...]} of every process on the host, from /proc/*/stat."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid):
    """Pids of all descendants of pid, from /proc/*/stat."""
    children = children_map()
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def image_file(image, path):
    """The bytes of path inside an ext4 image, read without mounting it
    (debugfs, from e2fsprogs); None when it is not there."""
    import subprocess
    p = subprocess.run(["debugfs", "-R", f"cat {path}", str(image)], capture_output=True)
    if b"File not found" in p.stderr:
        return None
    assert p.returncode == 0, p.stderr
    return p.stdout


def image_ls(image, path="/"):
    """{name: mode} of a directory inside an ext4 image (debugfs ls -p)."""
    import subprocess
    p = subprocess.run(["debugfs", "-R", f"ls -p {path}", str(image)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    out = {}
    for line in p.stdout.splitlines():  # /ino/mode/uid/gid/name/size/
        f = line.strip().split("/")
        if len(f) >= 6 and f[5] not in (".", ".."):
            out[f[5]] = int(f[2], 8)
    return out


def loops_of(image):
    """The loop devices bound to the file image now."""
    out = []
    for dev in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{dev}/loop/backing_file") as f:
                backing = f.read().strip()
        except OSError:
            continue  # not a loop device, or not bound
        if backing == os.path.realpath(image):
            out.append(dev)
    return out


def wait_until(pred, timeout=5.0, every=0.05):
    """Poll pred until it holds or timeout s pass; its last answer."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return pred()


def read_until_closed(sock, timeout):
    """Read sock until the peer ends the stream (EOF or reset) or timeout s
    pass: (bytes read, whether it ended)."""
    import socket
    import time
    got, deadline = 0, time.monotonic() + timeout
    sock.settimeout(1)
    while time.monotonic() < deadline:
        try:
            data = sock.recv(1 << 20)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got, True
        if not data:
            return got, True
        got += len(data)
    return got, False
