"""The two walls of the seed story, each in a real sandbox.

Wall one: a task that blows its memory takes down only itself.
Wall two: code in a sandbox cannot read the platform's secrets, the
caller's environment, or another sandbox.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import AGENTBOX, sandbox

LEAKY = r"""
import sys, time
pages = []
for page in range(1, 100):
    pages.append(bytearray(b"x") * (20 << 20))   # keep 20 MiB per page, touched
    print(page, flush=True)
    time.sleep(0.2)
"""

STEADY = r"""
import time
for page in range(1, 31):
    time.sleep(0.2)
    with open("/progress/pages", "w") as f:
        f.write(str(page))
print("done", flush=True)
"""


def test_one_task_blows_its_memory_the_other_is_undisturbed(tmp_path):
    progress = tmp_path / "progress"
    progress.mkdir()
    leaky = subprocess.Popen([AGENTBOX, "run", "--memory", "128m", "--", "python3", "-c", LEAKY],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    steady = subprocess.Popen([AGENTBOX, "run", "--memory", "128m",
                               "--volume", f"{progress}:/progress", "--",
                               "python3", "-c", STEADY],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    l_out, l_err = leaky.communicate(timeout=60)
    s_out, s_err = steady.communicate(timeout=60)

    assert leaky.returncode == 137, (l_out, l_err)
    assert "agentbox: sandbox killed: out of memory (limit 128 MiB)" in l_err
    last_page = int(l_out.split()[-1])
    assert 5 <= last_page <= 7, f"died after page {last_page}, expected around 6"

    assert steady.returncode == 0, (s_out, s_err)
    assert s_out.strip() == "done"
    assert (progress / "pages").read_text() == "30"


@pytest.fixture
def planted_token():
    """The credential Kubernetes mounts into every pod, planted on this host."""
    path = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    created = []
    d = os.path.dirname(path)
    while not os.path.exists(d):
        created.append(d)
        d = os.path.dirname(d)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    existed = os.path.exists(path)
    if not existed:
        with open(path, "w") as f:
            f.write("eyJhbGciOiJSUzI1NiJ9.host-secret-token")
    yield path
    if not existed:
        os.unlink(path)
    for d in created:
        os.rmdir(d)


def test_secrets_and_caller_environment_stay_outside(planted_token):
    env = dict(os.environ, AGENTBOX_TEST_SECRET="s3cr3t-value")
    script = (f"cat {planted_token}; echo cat=$?; "
              "env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'")
    p = sandbox(["sh", "-c", script], env=env)
    assert p.returncode == 0, p.stderr
    assert "host-secret-token" not in p.stdout
    assert "cat=1" in p.stdout
    assert "s3cr3t-value" not in p.stdout
    assert "AGENTBOX_TEST_SECRET" not in p.stdout
    names = {line.split("=", 1)[0] for line in p.stdout.splitlines() if "=" in line}
    assert names <= {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD", "cat"}, names


def test_another_sandbox_is_invisible():
    a = subprocess.Popen([AGENTBOX, "run", "--", "sh", "-c",
                          "echo mine > /tmp/a-file; echo mine > /workspace/a-file; "
                          "echo ready; exec sleep 30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert a.stdout.readline().strip() == "ready"
        look = ("import os, json\n"
                "files = os.listdir('/tmp') + os.listdir('/workspace') + os.listdir('/dev/shm')\n"
                "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
                "cmds = [open(f'/proc/{p}/cmdline', 'rb').read().decode() for p in pids]\n"
                "print(json.dumps({'files': files, 'cmds': cmds}))")
        p = sandbox(["python3", "-c", look])
        assert p.returncode == 0, p.stderr
        seen = json.loads(p.stdout)
        assert seen["files"] == []
        assert not any("sleep" in c for c in seen["cmds"]), seen["cmds"]
        assert len(seen["cmds"]) <= 3, seen["cmds"]  # our init, python, and nothing else
    finally:
        a.terminate()  # SIGTERM: agentbox kills its sandbox and cleans up
        assert a.wait(timeout=10) == 143
