"""Rate limits against the real daemon over TCP with real keys, and over
the unix socket as local users (docs/api.md, "Rate limits"): a key's
bucket and its 429 rate_limited with Retry-After, another key untouched,
the refill; a large body refused while limited without being read; a
flood of bad keys answered 429 before any lookup, then recovery; local
users limited by uid, root not at all.

Rates are small and assertions are bounds: the host may be slow (ASan, two
shared CPUs), so a test never needs two requests to fall within some time
of each other, and waits are polls with a deadline.
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from daemon import Daemon

UID_R = 4252  # a local user of the unix socket, mapped to team-r
RATE, BURST = 5, 5
FAIL_RATE, FAIL_BURST = 2, 4
RECOVER_S = 15  # a bound on liveness: a refill of one token takes a second at most

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the daemon, a local user)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, key, path="/v1/me", src="127.0.0.1"):
    """(status, headers, JSON body) of GET path over TCP with key (None: no header)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(src, 0))
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {key}"} if key else {})
        r = conn.getresponse()
        payload = r.read()
        body = json.loads(payload) if payload else None
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        conn.close()


def until_limited(port, key, most=200, src="127.0.0.1"):
    """Ask until a 429: (the statuses before it, the 429, the seconds it took)."""
    start = time.monotonic()
    before = []
    for _ in range(most):
        status, hdrs, body = get(port, key, src=src)
        if status == 429:
            return before, (hdrs, body), time.monotonic() - start
        before.append(status)
    pytest.fail(f"no 429 in {most} requests: {before[-5:]}")


def check_limited(answer, limit, rate, burst):
    hdrs, body = answer
    err = body["error"]
    assert err["code"] == "rate_limited" and err["limit"] == limit, err
    assert err["rate"] == rate and err["burst"] == burst, err
    retry = int(hdrs["retry-after"])
    assert retry >= 1 and err["retry_after_s"] == retry, (hdrs, err)
    assert "json" in hdrs["content-type"]
    return retry


@pytest.fixture
def world(tmp_path):
    """A daemon with small limits, TCP on a free port; keys a and b of team-r."""
    sockdir = tempfile.mkdtemp(prefix="agentbox-rate-")
    os.chmod(sockdir, 0o755)  # the local user reaches the socket (its ACL lets it in)
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--rate", str(RATE), "--rate-burst",
               str(BURST), "--auth-fail-rate", str(FAIL_RATE), "--auth-fail-burst",
               str(FAIL_BURST), "--socket-user", f"{UID_R}=team-r")
    d.socket = os.path.join(sockdir, "agentbox.sock")
    d.start()
    try:
        keys = []
        for label in ("a", "b"):
            # root on the unix socket: an admin, and never charged
            status, k = d.request("POST", "/v1/keys", {"tenant": "team-r", "label": label})
            assert status == 201, k
            keys.append(k["key"])
        yield d, port, keys[0], keys[1]
    finally:
        d.stop()
        shutil.rmtree(sockdir, ignore_errors=True)


def test_a_key_is_limited_alone_and_recovers(world):
    d, port, a, b = world
    before, limited, took = until_limited(port, a)
    # the burst, and no more than what refilled meanwhile
    assert before[:BURST] == [200] * BURST and set(before) == {200}, before
    assert len(before) <= BURST + RATE * took + 1, (len(before), took)
    retry = check_limited(limited, "key", RATE, BURST)
    # another key has a bucket of its own
    assert get(port, b)[0] == 200
    # root on the unix socket is not charged (nor is /healthz, which is public)
    assert all(d.request("GET", "/v1/tasks")[0] == 200 for _ in range(3 * BURST))
    assert all(get(port, None, "/healthz")[0] == 200 for _ in range(3 * BURST))
    # after Retry-After, the key passes again
    time.sleep(retry)
    deadline = time.monotonic() + RECOVER_S
    while (status := get(port, a)[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status == 200


def raw_head(port, key, extra=b""):
    """A connection that has sent a POST's header, announcing 4 MiB, and no body."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: agentbox\r\nAuthorization: Bearer %s\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
              % (key.encode(), 4 << 20, extra))
    return s


def first_answer(s):
    """The status line and headers the daemon sends first, or None if it waits for more."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        return None
    return data


def test_a_limited_key_s_body_is_never_read(world):
    d, port, a, b = world
    refused = {}
    # the bucket refills as we go (5 a second): empty it, then send at once;
    # a token that came meanwhile lets the header through, and we try again
    for attempt in range(10):
        until_limited(port, a)
        for variant, extra in (("expect", b"Expect: 100-continue\r\n"), ("plain", b"")):
            s = raw_head(port, a, extra)
            s.settimeout(5)
            head = first_answer(s)
            s.close()
            if head and head.startswith(b"HTTP/1.1 429"):
                # answered with only the header sent: no "100 Continue" before it
                assert b"100 Continue" not in head
                assert b"Retry-After: " in head and b"Connection: close" in head, head
                refused[variant] = True
        if len(refused) == 2:
            break
    assert refused == {"expect": True, "plain": True}, refused
    # the daemon still serves the other key
    assert get(port, b)[0] == 200


def test_a_flood_of_bad_keys_is_refused_before_lookup_then_recovers(world):
    d, port, a, b = world
    wall_start = time.time()  # the audit log's rows are per minute of the wall clock
    for attempt in range(10):
        start = time.monotonic()
        statuses = []
        limited = None
        for i in range(200):
            status, hdrs, body = get(port, f"abx_{'0' * 12}_{i:043d}")
            if status == 429:
                limited = (hdrs, body)
                break
            statuses.append(status)
        took = time.monotonic() - start
        assert limited, "a flood of bad keys was never limited"
        assert set(statuses) == {401}, statuses
        assert FAIL_BURST <= len(statuses) <= FAIL_BURST + FAIL_RATE * took + 1, (statuses, took)
        check_limited(limited, "auth_failures", FAIL_RATE, FAIL_BURST)
        # a good key from that address, and from another of 127.0.0.0/8 (the same
        # host, the same bucket), is refused too: the 429 comes before any lookup
        good = [get(port, a)[0], get(port, a, src="127.0.0.2")[0]]
        if good == [429, 429]:
            break  # else a token came in between (2 a second): flood again
    assert good == [429, 429], good
    # a request without a key is told why, as ever (it costs no lookup)
    assert get(port, None)[0] == 401
    # the unix socket's root is another source
    assert d.request("GET", "/v1/tasks")[0] == 200
    # recovery: the good key passes once a token is back
    deadline = time.monotonic() + RECOVER_S
    while (status := get(port, a)[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 200
    # the audit log counts both, a row per reason and minute, not one per request
    rows = d.request("GET", "/v1/audit?limit=1000")[1]["entries"]
    # as many minutes as the test's requests touched: 1 on a quick run, more
    # when it crossed a minute's end (the clock's phase) or ran slowly
    minutes = int(time.time() // 60) - int(wall_start // 60) + 1
    unknown = [r for r in rows if r["reason"] == "malformed_key"]  # the flood's keys
    limited = [r for r in rows if r["reason"] == "auth_rate_limited"]
    assert unknown and sum(r["count"] for r in unknown) >= FAIL_BURST, rows
    assert limited and all(r["status"] == 429 and r["error"] == "rate_limited" and
                           r["source"] in ("127.0.0.1", "127.0.0.2") for r in limited), rows
    # a row per minute for the flood's source, and for each of the two sources limited
    assert len(unknown) + len(limited) <= 3 * minutes, (minutes, rows)


LOCAL_CLIENT = r"""
import http.client, json, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(sys.argv[1])
out = []
for _ in range(int(sys.argv[2])):
    c = C("localhost", timeout=30)
    c.request("GET", "/v1/me")
    r = c.getresponse()
    body = json.loads(r.read())
    out.append([r.status, r.getheader("Retry-After"), body])
    c.close()
    if r.status == 429:
        break
print(json.dumps(out))
"""


def test_local_users_are_limited_by_uid(world):
    d, port, a, b = world
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", LOCAL_CLIENT, d.socket, "200"], user=UID_R,
                       group=UID_R, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    statuses = [o[0] for o in out]
    assert statuses[-1] == 429, statuses
    assert out[0][2]["uid"] == UID_R and out[0][2]["tenant"] == "team-r"
    assert set(statuses[:-1]) == {200} and BURST <= len(statuses) - 1 <= BURST + RATE * took + 1
    err = out[-1][2]["error"]
    assert err["code"] == "rate_limited" and err["limit"] == "key" and int(out[-1][1]) >= 1
    # the user's bucket is not the keys' of its tenant, nor root's
    assert get(port, a)[0] == 200
    assert all(d.request("GET", "/v1/me")[0] == 200 for _ in range(3 * BURST))
