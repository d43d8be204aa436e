"""Every route of the API has a verb of `agentbox`, and the verbs behave as
docs/cli.md says: options after the sandbox id, `sandbox rm` checking every
id before it removes any, processes (proc ls, output, kill), files (files
ls, rm, mkdir), --json and -q. Against the real agentboxd.
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import AGENTBOX, ROOT
from daemon import Daemon

# a well-formed sandbox id that names nothing
NO_SUCH = "sbx_" + "0" * 26


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("cli-parity")).start()
    yield d
    d.stop()


@pytest.fixture
def sbx(daemon):
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    yield sid
    daemon.request("DELETE", f"/v1/sandboxes/{sid}")


def cli(daemon, *args, timeout=60, input=None):
    """`agentbox ARGS...` against daemon (AGENTBOX_HOST names its socket)."""
    env = dict(os.environ)
    for k in ("AGENTBOX_URL", "AGENTBOX_KEY", "AGENTBOX_TOKEN"):
        env.pop(k, None)
    env["AGENTBOX_HOST"] = daemon.socket
    return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, timeout=timeout,
                          input=input, env=env)


def status_of(daemon, sid):
    st, body = daemon.request("GET", f"/v1/sandboxes/{sid}")
    assert st == 200, body
    return body["status"]


# ---- options after the id ------------------------------------------------------


def test_exec_options_after_the_id(daemon, sbx):
    p = cli(daemon, "exec", sbx, "--cwd", "/tmp", "--", "pwd")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "/tmp\n"
    p = cli(daemon, "exec", sbx, "--env", "GREETING=hi", "--cwd", "/tmp", "--",
            "sh", "-c", 'echo "$GREETING $PWD"')
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hi /tmp\n"
    # before the id, as always; and the command's own options stay its own
    p = cli(daemon, "exec", "--cwd", "/tmp", sbx, "ls", "-d", "/tmp")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "/tmp\n"


def test_exec_option_after_the_id_needs_its_value(daemon, sbx):
    p = cli(daemon, "exec", sbx, "--cwd")
    assert p.returncode == 125
    assert "--cwd" in p.stderr and "needs a value" in p.stderr


# ---- sandbox rm checks every id first --------------------------------------------


@pytest.mark.parametrize("bad", ["nosuch", NO_SUCH])
def test_sandbox_rm_checks_every_id_before_removing_any(daemon, sbx, bad):
    p = cli(daemon, "sandbox", "rm", bad, sbx)
    assert p.returncode == 125, p.stdout
    assert p.stdout == ""
    assert "none removed" in p.stderr and ("invalid_id" in p.stderr or bad in p.stderr)
    assert status_of(daemon, sbx) == "running"
    # the other order too
    p = cli(daemon, "sandbox", "rm", sbx, bad)
    assert p.returncode == 125
    assert status_of(daemon, sbx) == "running"
    # all good: all removed
    p = cli(daemon, "sandbox", "rm", sbx)
    assert p.returncode == 0, p.stderr
    assert p.stdout == sbx + "\n"
    assert status_of(daemon, sbx) == "ended"
