"""Hostile load against the real agentboxd: what one client or one sandbox
does must not stall the daemon, fill the host, or lose what it says.

Each test reproduces one failure of the hostile-load review and asserts
the bound that now holds. Loops are bounded in count and time; every
address is the daemon's unix socket.
"""
import base64
import json
import os
import subprocess
import time

import pytest

from conftest import AGENTBOX
from daemon import Daemon, UnixHTTPConnection

# bytes that are not text: a NUL, a byte that is never UTF-8, a cut sequence
NOT_TEXT = b"a\x00b\xff\xc3"
NOT_TEXT_SH = r"printf 'a\000b\377\303'"


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


@pytest.fixture
def sbx(daemon):
    return daemon.create_sandbox(limits={"memory_mb": 256})


def decoded(obj, key):
    """The bytes of output member key, as the API documents its encoding."""
    enc = obj.get(key + "_encoding")
    if enc is None:
        return obj[key].encode()
    assert enc == "base64", obj
    return base64.b64decode(obj[key], validate=True)


def sse_events(daemon, path, body):
    conn = UnixHTTPConnection(daemon.socket, timeout=60)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    events, event, data = [], None, []
    for raw in resp:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and event:
            events.append((event, json.loads("\n".join(data))))
            event, data = None, []
    conn.close()
    return events


# ---- 8: output is bytes, and the exit status always comes through -------

def test_output_that_is_not_text_keeps_its_bytes_and_the_exit_status(daemon, sbx):
    cmd = ["sh", "-c", f"{NOT_TEXT_SH}; {NOT_TEXT_SH} >&2; exit 3"]
    status, r = daemon.request("POST", f"/v1/sandboxes/{sbx}/exec", {"command": cmd})
    assert status == 200, r
    assert r["exit_code"] == 3, r
    assert decoded(r, "stdout") == NOT_TEXT and decoded(r, "stderr") == NOT_TEXT, r
    assert r["stdout_encoding"] == "base64"

    # text stays text: no encoding member, the string as it was
    status, r = daemon.request("POST", f"/v1/sandboxes/{sbx}/exec",
                               {"command": ["printf", "h\u00e9llo"]})
    assert status == 200 and r["stdout"] == "h\u00e9llo" and "stdout_encoding" not in r, r

    # the same bytes as Server-Sent Events
    events = sse_events(daemon, f"/v1/sandboxes/{sbx}/exec", {"command": cmd})
    out = b"".join(base64.b64decode(d["data"]) if d.get("encoding") == "base64"
                   else d["data"].encode() for e, d in events if e == "stdout")
    assert out == NOT_TEXT, events
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 3, events

    # and through a background process's output
    status, r = daemon.request("POST", f"/v1/sandboxes/{sbx}/exec",
                               {"command": cmd, "background": True})
    assert status == 202, r
    pid = r["pid"]
    deadline = time.monotonic() + 30
    while True:
        status, o = daemon.request("GET", f"/v1/sandboxes/{sbx}/processes/{pid}/output")
        assert status == 200, o
        if not o["running"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert o["exit"]["exit_code"] == 3 and decoded(o, "stdout") == NOT_TEXT, o


def test_agentbox_exec_writes_the_bytes_and_passes_the_status(daemon, sbx):
    p = subprocess.run([AGENTBOX, "exec", "--socket", daemon.socket, sbx, "--",
                        "sh", "-c", f"{NOT_TEXT_SH}; {NOT_TEXT_SH} >&2; exit 3"],
                       capture_output=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert p.stdout == NOT_TEXT and p.stderr == NOT_TEXT, (p.stdout, p.stderr)
