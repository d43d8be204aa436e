"""cgroup v2 delegation, where the host runs the pure v2 hierarchy (tests/vm/run
boots one): agentbox inside a container whose cgroup root is its own."""
import os
import subprocess
import uuid

import pytest

from conftest import AGENTBOX


def pure_v2():
    with open("/proc/self/mountinfo") as f:
        return any(line.split(" - ")[1].split()[0] == "cgroup2" and
                   line.split()[4] == "/sys/fs/cgroup" for line in f)


@pytest.mark.skipif(not pure_v2(), reason="needs a pure cgroup v2 host (tests/vm/run boots one)")
def test_agentbox_as_a_containers_only_process():
    """The container's cgroup namespace is rooted at a group of its own, with
    cgroup2 mounted anew; agentbox, its entrypoint, must delegate below it."""
    ctr = f"/sys/fs/cgroup/agentbox-test-ctr-{uuid.uuid4().hex[:8]}"
    os.mkdir(ctr)
    try:
        script = (f"echo $$ > {ctr}/cgroup.procs && exec unshare --cgroup --mount --propagation private "
                  f"sh -c 'umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && exec {AGENTBOX} run --memory 64m -- "
                  f"python3 -c \"x = bytearray(b\\\"x\\\") * (200 << 20)\"'")
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        assert p.returncode == 137, p.stderr
        assert "out of memory (limit 64 MiB)" in p.stderr
        assert os.path.isdir(f"{ctr}/agentbox") and os.path.isdir(f"{ctr}/agentbox.launcher")
        assert [e for e in os.listdir(f"{ctr}/agentbox") if e.startswith("sb-")] == []
    finally:
        for sub in ("agentbox", "agentbox.launcher"):
            if os.path.isdir(f"{ctr}/{sub}"):
                os.rmdir(f"{ctr}/{sub}")
        os.rmdir(ctr)
