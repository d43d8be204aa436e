"""Hostile JSON bodies cost agentboxd bounded memory.

A 4 MiB body (API_BODY_MAX) of `[[],[],...]` is 1.4 million values; built
as a jansson tree it once cost the daemon 445 MB, and 16 of them in
parallel 2.8 GB, before validation refused it. Every body is now scanned
before it is parsed (json_limits_check(), src/api/json-util.h): too deep
or too many values is 400 invalid_json at once, with no tree built.

Each case starts a fresh daemon, sends PARALLEL such bodies at once to one
route over the unix socket, checks each answer, and compares the daemon's
peak resident set (VmHWM, reset just before) with its resident set before.
"""
import json
import re
import threading

import pytest

from daemon import Daemon, UnixHTTPConnection

MiB = 1 << 20
API_BODY_MAX = 4 * MiB  # src/api/api.h
PARALLEL = 16

# The daemon holds each body it reads, whole, until it has answered
# (src/daemon/server.c keeps up to API_BODY_MAX + 1 bytes), and all bodies
# together up to DAEMON_BODIES_MAX_MB (32 MiB; past it, 503 busy): that
# much of PARALLEL bodies in flight is by design. 64 MiB more is
# room for what else the requests take: their threads, malloc's arenas
# and, for a body within the limits, its tree (a few MiB at most:
# tests/unit/test-json-util.c); not for the tree of any of these bodies
# (60 to 220 MB each by jansson's own allocations). Measured on 2 CPUs:
# a growth of 38 to 53 MiB with the pre-check; 800 to 2030 MiB without it
# (all but the nested bomb, which depth refused already).
BODIES_MAX = 32 * MiB  # DAEMON_BODIES_MAX_MB, src/daemon/daemon.h
RSS_GROWTH_MAX = BODIES_MAX + 64 * MiB

VALUES_RE = re.compile(r"more than \d+ values")
DEPTH_RE = re.compile(r"deeper than \d+ levels")


def fill(head, first, unit, tail):
    """head + first + unit * k + tail, as long as fits in API_BODY_MAX."""
    k = (API_BODY_MAX - len(head) - len(first) - len(tail)) // len(unit)
    body = head + first + unit * k + tail
    assert len(body) <= API_BODY_MAX
    return body.encode()


def members(head, tail):
    """head + "k0":0,"k1":0,... (distinct keys: duplicates are refused early) + tail."""
    parts, size, i = [], len(head) + len(tail), 0
    while True:
        item = f'"{i:x}":0'
        if size + len(item) + 1 > API_BODY_MAX:
            break
        parts.append(item)
        size += len(item) + 1
        i += 1
    body = (head + ",".join(parts) + tail).encode()
    assert len(body) <= API_BODY_MAX
    return body


def task_or_sandbox(route, inner_head):
    """The JSON head that puts a bomb into metadata on this route."""
    return ('{"command":["x"],' if route == "/v1/tasks" else "{") + inner_head


def nested():
    """{"a":{"a":...1...}} as deep as 4 MiB allows."""
    k = (API_BODY_MAX - 1) // (len('{"a":') + 1)
    body = ('{"a":' * k + "1" + "}" * k).encode()
    assert len(body) <= API_BODY_MAX
    return body


BOMBS = {
    # the body of the issue: 1.4 million empty arrays
    "arrays": lambda route: fill("[", "[]", ",[]", "]"),
    # nesting: refused by depth, at once, since before this test
    "nested": lambda route: nested(),
    # 460,000 small members in metadata, which takes any object
    "members": lambda route: members(task_or_sandbox(route, '"metadata":{'), "}}"),
    # 1.4 million empty strings in metadata
    "strings": lambda route: fill(task_or_sandbox(route, '"metadata":{"s":['), '""', ',""',
                                  "]}}"),
}


def status_of(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def reset_peak(pid):
    """Make VmHWM start again from VmRSS (Linux 4.0 and later); False if not."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def post(daemon, route, body, results, i, barrier):
    try:
        conn = UnixHTTPConnection(daemon.socket, timeout=300)
        barrier.wait(timeout=60)
        conn.request("POST", route, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        results[i] = (resp.status, json.loads(payload))
    except Exception as e:  # noqa: BLE001 - reported by the assertion below
        results[i] = (None, repr(e))


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


@pytest.mark.parametrize("route", ["/v1/tasks", "/v1/sandboxes"])
@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_bomb_is_refused_in_bounded_memory(daemon, kind, route):
    body = BOMBS[kind](route)
    pid = daemon.proc.pid
    # warm the route up (store connection, first allocations) before the baseline
    status, _ = daemon.request("POST", route, b"[]")
    assert status == 400
    had_reset = reset_peak(pid)
    before = status_of(pid)

    results = [None] * PARALLEL
    barrier = threading.Barrier(PARALLEL)
    threads = [threading.Thread(target=post, args=(daemon, route, body, results, i, barrier))
               for i in range(PARALLEL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    after = status_of(pid)
    assert daemon.proc.poll() is None, "agentboxd died"

    growth = after["VmHWM"] - before["VmRSS"]
    print(f"\n{kind} -> {route}: {len(body)} bytes x {PARALLEL}: RSS before "
          f"{before['VmRSS'] / MiB:.1f} MiB, peak {after['VmHWM'] / MiB:.1f} MiB, "
          f"growth {growth / MiB:.1f} MiB (bound {RSS_GROWTH_MAX / MiB:.0f} MiB"
          f"{'' if had_reset else ', peak since start'})")

    assert growth < RSS_GROWTH_MAX, (
        f"peak RSS grew by {growth / MiB:.1f} MiB, bound {RSS_GROWTH_MAX / MiB:.0f} MiB")
    pattern = DEPTH_RE if kind == "nested" else VALUES_RE
    refused = 0
    for result in results:
        assert result is not None, "a request got no answer"
        status, answer = result
        if status == 503:  # the bodies in flight took the daemon's budget
            assert answer["error"]["code"] == "busy", answer
            continue
        assert status == 400, answer
        err = answer["error"]
        assert err["code"] == "invalid_json", err
        assert pattern.search(err["message"]), err
        refused += 1
    assert refused >= 1, results
