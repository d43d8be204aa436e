"""Shared fixtures for the integration suite.

The suite drives the real `agentbox` binary and real sandboxes, so it needs
root and a kernel with user namespaces. Paths to the binaries come from the
environment (set by `make`-free runner scripts) or default to ./build.
"""
import os
import subprocess
import pytest

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("AGENTBOX_BUILD", os.path.join(ROOT, "build"))
AGENTBOX = os.environ.get("AGENTBOX_BIN", os.path.join(BUILD, "src", "cli", "agentbox"))
PROBE_DIR = os.path.join(BUILD, "tests", "probes")
PROBE = os.path.join(PROBE_DIR, "agentbox-probe")


def run(args, *, timeout=60, input=None, env=None, check=False):
    """Run `agentbox ARGS...` and return the CompletedProcess (text mode)."""
    proc = subprocess.run([AGENTBOX, *args], input=input, capture_output=True,
                          text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"agentbox {args} exited {proc.returncode}: {proc.stderr}")
    return proc


def sandbox(cmd, *opts, **kw):
    """Run CMD (a list) in a fresh sandbox with extra `agentbox run` options."""
    return run(["run", *opts, "--", *cmd], **kw)


def probe(*probe_args, opts=(), **kw):
    """Run the probe program inside a sandbox, with the probe dir mounted at /probe."""
    return sandbox(["/probe/agentbox-probe", *probe_args],
                   "--volume", f"{PROBE_DIR}:/probe:ro", *opts, **kw)


@pytest.fixture(scope="session", autouse=True)
def _require_root_and_binary():
    if os.geteuid() != 0:
        pytest.skip("the integration suite needs root (user namespaces with uid ranges, cgroups)")
    if not os.access(AGENTBOX, os.X_OK):
        pytest.fail(f"agentbox binary not found at {AGENTBOX}; build first")


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_at_the_end(_require_root_and_binary):
    """After the whole suite: no sandbox cgroup, mount or process remains."""
    yield
    import time
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = (helpers.sandbox_groups(), helpers.agentbox_mounts(), helpers.sandbox_pids())
        if not any(left):
            return
        time.sleep(0.1)
    raise AssertionError(f"agentbox left behind: groups={left[0]} mounts={left[1]} pids={left[2]}")
