"""Hostile HTTP clients against the real agentboxd, with raw sockets on
its unix socket and on --listen 127.0.0.1:PORT (loopback only):

- ambiguous framing (two Content-Lengths, "Transfer-Encoding :",
  Content-Length with chunked, ...) is refused with 400 before any body;
- an unauthenticated TCP request is answered 401 at once: no
  "100 Continue", its body never read nor buffered;
- idle TCP connections are closed after the header timeout, one address
  holds at most a few of them, and neither listener starves the other;
- a file truncated while it is downloaded ends the download with an
  error instead of spinning;
- the short timeouts do not cut what lasts: a quiet logs stream, a long
  exec.
"""
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.parse

import pytest

from daemon import Daemon
import helpers
from conftest import ROOT


def daemon_constant(name):
    """A constant of src/daemon/daemon.h (the tests follow the daemon's values)."""
    with open(os.path.join(ROOT, "src", "daemon", "daemon.h")) as f:
        m = re.search(rf"^#define\s+{name}\s+(\d+)", f.read(), re.M)
    assert m, f"{name} is not in daemon.h"
    return int(m.group(1))


HEADER_TIMEOUT_S = daemon_constant("DAEMON_HEADER_TIMEOUT_S")
IDLE_TIMEOUT_S = daemon_constant("DAEMON_IDLE_TIMEOUT_S")
PER_ADDRESS_MAX = daemon_constant("DAEMON_TCP_PER_ADDRESS_MAX")
CONNECTIONS_MAX = daemon_constant("DAEMON_CONNECTIONS_MAX")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def daemon(tmp_path):
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}").start()
    d.port = port
    d.token = d.admin_key()
    yield d
    d.stop()


class Raw:
    """One raw connection: send bytes, read responses by hand."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    @classmethod
    def tcp(cls, d, src="127.0.0.1", timeout=10):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.bind((src, 0))
        s.connect(("127.0.0.1", d.port))
        return cls(s)

    @classmethod
    def unix(cls, d, timeout=10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(d.socket)
        return cls(s)

    def send(self, data):
        self.sock.sendall(data)

    def fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("the daemon closed the connection")
        self.buf += data

    def head(self):
        """(status, {lower-case name: value}) of the next response."""
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        return int(lines[0].split()[1]), hdrs

    def body(self, n):
        while len(self.buf) < n:
            self.fill()
        b, self.buf = self.buf[:n], self.buf[n:]
        return b

    def response(self):
        """(status, headers, body) of a response framed by Content-Length."""
        status, hdrs = self.head()
        return status, hdrs, self.body(int(hdrs.get("content-length", "0")))

    def is_closed(self, timeout):
        """Does the daemon close the connection within timeout s (what comes first is dropped)?"""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self.sock.recv(1 << 16):
                    return True
            except socket.timeout:
                return False
            except ConnectionResetError:
                return True
        return False

    def close(self):
        self.sock.close()


def tasks_of(d):
    status, body = d.request("GET", "/v1/tasks")
    assert status == 200, body
    return body["tasks"]


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])  # kB
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# ---- ambiguous framing ---------------------------------------------------

TASK = json.dumps({"command": ["true"]}).encode()


def chunked(b):
    return b"%x\r\n" % len(b) + b + b"\r\n0\r\n\r\n"


# Each would create a task on one reading of its framing; a proxy in front
# may read it another way (request smuggling). The daemon refuses them all.
FRAMINGS = {
    "two_content_lengths": (b"Content-Length: %d\r\nContent-Length: %d\r\n"
                            % (len(TASK), len(TASK) + 5), TASK + b"XXXXX"),
    "space_before_the_colon": (b"Content-Length: %d\r\nTransfer-Encoding : chunked\r\n" % len(TASK),
                               TASK),
    "tab_before_the_colon": (b"Content-Length: %d\r\nTransfer-Encoding\t: chunked\r\n" % len(TASK),
                             TASK),
    "content_length_and_chunked": (b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                                   chunked(TASK)),
    "two_transfer_encodings": (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                               chunked(TASK)),
    "a_coding_other_than_chunked": (b"Transfer-Encoding: gzip, chunked\r\n", chunked(TASK)),
}


@pytest.mark.parametrize("transport", ["unix", "tcp"])
@pytest.mark.parametrize("case", sorted(FRAMINGS))
def test_ambiguous_framing_is_400_before_the_body(daemon, transport, case):
    framing, body = FRAMINGS[case]
    conn = Raw.unix(daemon) if transport == "unix" else Raw.tcp(daemon)
    auth = b"Authorization: Bearer %s\r\n" % daemon.token.encode() if transport == "tcp" else b""
    conn.send(b"POST /v1/tasks HTTP/1.1\r\nHost: agentbox\r\nContent-Type: application/json\r\n"
              + auth + framing + b"\r\n" + body)
    conn.sock.shutdown(socket.SHUT_WR)  # a reading to the end of the connection ends too
    try:
        status, hdrs, payload = conn.response()
    except EOFError:
        pytest.fail(f"{case}: no response at all")
    assert status == 400, (case, status, payload)
    assert "json" in hdrs.get("content-type", ""), hdrs
    err = json.loads(payload)["error"]
    assert err["code"] == "invalid_field" and err["field"] == "headers", err
    assert conn.is_closed(5), "the connection must close: its body was not read"
    conn.close()
    assert tasks_of(daemon) == [], "a refused request must not create a task"


def test_plain_framings_still_work(daemon):
    for framing, body in ((b"Content-Length: %d\r\n" % len(TASK), TASK),
                          (b"Transfer-Encoding: chunked\r\n", chunked(TASK))):
        conn = Raw.unix(daemon)
        conn.send(b"POST /v1/tasks HTTP/1.1\r\nHost: agentbox\r\nContent-Type: application/json\r\n"
                  + framing + b"\r\n" + body)
        status, _, payload = conn.response()
        conn.close()
        assert status == 201, payload
    assert len(tasks_of(daemon)) == 2


# ---- unauthenticated bodies ----------------------------------------------

BIG = 4 << 20


def unauthenticated_upload(d, results):
    """One unauthenticated 4 MiB POST that waits for 100 Continue as curl does."""
    conn = Raw.tcp(d, timeout=10)
    try:
        conn.send(b"POST /v1/tasks HTTP/1.1\r\nHost: agentbox\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % BIG)
        status, hdrs = conn.head()
        continued = status == 100
        if continued:  # the daemon asked for the body: send it, as a client would
            conn.send(b"x" * BIG)
            status, hdrs = conn.head()
        results.append((continued, status, conn.is_closed(5)))
    except OSError as e:
        results.append((None, repr(e), None))
    finally:
        conn.close()


def test_an_unauthenticated_body_is_refused_unread(daemon):
    pid = daemon.proc.pid
    hwm_before = proc_status(pid, "VmHWM")
    results = []
    n = min(PER_ADDRESS_MAX, 48)
    for _ in range(3):  # rounds of concurrent clients
        threads = [threading.Thread(target=unauthenticated_upload, args=(daemon, results))
                   for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    grew_mib = (proc_status(pid, "VmHWM") - hwm_before) / 1024
    bad = [r for r in results if r != (False, 401, True)]
    assert len(results) == 3 * n and not bad and grew_mib < 16, \
        (f"each must get 401 at once (no 100 Continue) on a connection then closed: "
         f"{len(bad)} of {len(results)} did not, e.g. {bad[:3]}; "
         f"the daemon's peak RSS grew by {grew_mib:.0f} MiB")
    # and the token still lets a client in
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request("GET", "/v1/tasks", headers={"Authorization": f"Bearer {daemon.token}"})
    assert conn.getresponse().status == 200
    conn.close()


def test_an_unauthenticated_request_is_401_at_once(daemon):
    conn = Raw.tcp(daemon, timeout=5)
    conn.send(b"PUT /v1/sandboxes/sbx_0000000000000000000000000/files?path=/x HTTP/1.1\r\n"
              b"Host: agentbox\r\nAuthorization: Bearer wrong\r\n"
              b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (64 << 20))
    status, hdrs, payload = conn.response()
    assert status == 401, (status, payload)
    assert hdrs.get("www-authenticate") == "Bearer"
    assert json.loads(payload)["error"]["code"] == "unauthorized"
    assert conn.is_closed(5)
    conn.close()


# ---- idle connections ----------------------------------------------------

def open_idle(d, src, n):
    """Up to n idle TCP connections from src; those the daemon keeps."""
    kept = []
    for _ in range(n):
        try:
            c = Raw.tcp(d, src=src, timeout=5)
        except OSError:
            continue
        kept.append(c)
    # the daemon closes at once what it will not serve
    deadline = time.monotonic() + 5
    alive = []
    for c in kept:
        if c.is_closed(max(0.01, min(0.05, deadline - time.monotonic()))):
            c.close()
        else:
            alive.append(c)
    return alive


def authenticated_get(d, path="/v1/tasks"):
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {d.token}"})
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def test_idle_connections_from_one_address_do_not_lock_others_out(daemon):
    # 127.0.0.2 is loopback too: another address of this host
    idle = open_idle(daemon, "127.0.0.2", CONNECTIONS_MAX + 16)
    try:
        assert len(idle) <= PER_ADDRESS_MAX, f"one address holds {len(idle)} connections"
        assert authenticated_get(daemon) == 200
        assert daemon.request("GET", "/v1/tasks")[0] == 200  # the unix socket
    finally:
        for c in idle:
            c.close()


def test_an_idle_connection_is_closed_after_the_header_timeout(daemon):
    quiet = Raw.tcp(daemon)
    partial = Raw.unix(daemon)
    partial.send(b"GET /v1/tasks HTTP/1.1\r\nHost: agentbox\r\n")  # and never the end
    t0 = time.monotonic()
    assert quiet.is_closed(HEADER_TIMEOUT_S + 5), "an idle TCP connection stays open"
    assert partial.is_closed(max(0.1, t0 + HEADER_TIMEOUT_S + 5 - time.monotonic())), \
        "a request whose header never ends stays open"
    assert time.monotonic() - t0 > HEADER_TIMEOUT_S - 2
    quiet.close()
    partial.close()


def unix_request_fails(d):
    """Does a GET /healthz on the unix socket fail (a listener full: refused or closed)?"""
    try:
        conn = Raw.unix(d, timeout=5)
        conn.send(b"GET /healthz HTTP/1.1\r\nHost: agentbox\r\n\r\n")
        status, _, _ = conn.response()
        conn.close()
        return False
    except (OSError, EOFError):
        return True


def test_a_full_unix_socket_does_not_starve_tcp(daemon):
    held = []
    deadline = time.monotonic() + 20
    try:
        while len(held) < CONNECTIONS_MAX and time.monotonic() < deadline:
            try:
                held.append(Raw.unix(daemon))
            except BlockingIOError:  # the backlog is full for a moment
                time.sleep(0.01)
        assert len(held) == CONNECTIONS_MAX
        assert unix_request_fails(daemon), "the unix listener should be full"
        assert authenticated_get(daemon) == 200
    finally:
        for c in held:
            c.close()


def tcp_request_fails(d, src):
    """Does an authenticated GET on TCP from src fail (the listener full)?"""
    try:
        c = Raw.tcp(d, src=src, timeout=5)
        c.send(b"GET /healthz HTTP/1.1\r\nHost: agentbox\r\n"
               b"Authorization: Bearer %s\r\n\r\n" % d.token.encode())
        c.response()
        c.close()
        return False
    except (OSError, EOFError):
        return True


def test_a_full_tcp_listener_does_not_starve_the_unix_socket(daemon):
    # a few loopback addresses, each up to its own cap, fill the TCP listener;
    # opened at once, well within the header timeout that would close them
    held = []
    n = CONNECTIONS_MAX // PER_ADDRESS_MAX + 1
    for a in range(1, n + 1):
        for _ in range(PER_ADDRESS_MAX):
            try:
                held.append(Raw.tcp(daemon, src=f"127.0.1.{a}", timeout=5))
            except OSError:
                pass
    try:
        assert len(held) > CONNECTIONS_MAX, f"only {len(held)} TCP connections made"
        assert tcp_request_fails(daemon, f"127.0.1.{n + 1}"), "the TCP listener should be full"
        assert daemon.request("GET", "/healthz")[0] == 200
        assert daemon.request("GET", "/v1/tasks")[0] == 200
    finally:
        for c in held:
            c.close()


# ---- a file truncated while it is downloaded -----------------------------

def test_a_file_truncated_while_downloaded_ends_the_download(daemon):
    pid = daemon.proc.pid
    sid = daemon.create_sandbox(limits={"memory_mb": 256})
    size = 64 << 20
    url = f"/v1/sandboxes/{sid}/files?" + urllib.parse.urlencode({"path": "/workspace/big"})
    status, body = daemon.request("PUT", url, b"\0" * size,
                                  headers={"Content-Type": "application/octet-stream"}, timeout=120)
    assert status in (200, 201), body

    conn = Raw.unix(daemon, timeout=10)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    conn.send(f"GET {url} HTTP/1.1\r\nHost: agentbox\r\n\r\n".encode())
    status, hdrs = conn.head()
    assert status == 200 and int(hdrs["content-length"]) == size
    got = len(conn.body(256 << 10))  # a slow reader: a little, then nothing for a while
    conn.buf = b""

    cpu0 = cpu_seconds(pid)
    r = daemon.exec(sid, ["truncate", "-s", "0", "/workspace/big"])
    assert r["exit_code"] == 0, r
    t0 = time.monotonic()
    more, ended = helpers.read_until_closed(conn.sock, 10)
    got += more
    took = time.monotonic() - t0
    conn.close()
    cpu = cpu_seconds(pid) - cpu0
    assert ended, f"the download neither ended nor went on ({got} of {size} bytes)"
    assert got < size, "the download must end short, with an error"
    assert cpu < 1.0, f"the daemon used {cpu:.1f} s of CPU in {took:.1f} s"
    assert daemon.request("GET", "/healthz")[0] == 200


# ---- what lasts is not cut -----------------------------------------------

def test_quiet_streams_and_long_requests_outlive_the_idle_timeout(daemon):
    quiet = IDLE_TIMEOUT_S + 5
    tid = daemon.submit(command=["sh", "-c", f"echo start; sleep {quiet}; echo end"])
    sid = daemon.create_sandbox()
    out = {}

    def logs():  # a follow stream over TCP, silent for longer than the idle timeout
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=quiet + 60)
        conn.request("GET", f"/v1/tasks/{tid}/logs?follow=1",
                     headers={"Authorization": f"Bearer {daemon.token}"})
        r = conn.getresponse()
        out["logs"] = (r.status, r.read())
        conn.close()

    def exec_():  # a request whose handler works longer than the idle timeout
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=quiet + 60)
        conn.request("POST", f"/v1/sandboxes/{sid}/exec",
                     body=json.dumps({"command": ["sh", "-c", f"sleep {quiet}; echo done"]}),
                     headers={"Authorization": f"Bearer {daemon.token}",
                              "Content-Type": "application/json"})
        r = conn.getresponse()
        out["exec"] = (r.status, json.loads(r.read()))
        conn.close()

    threads = [threading.Thread(target=f) for f in (logs, exec_)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(quiet + 90)
    assert out.get("logs") == (200, b"start\nend\n"), out.get("logs")
    status, r = out.get("exec", (None, None))
    assert status == 200 and r["stdout"] == "done\n", r


# ---- the bodies the daemon holds at once ----------------------------------

BODIES_MAX = daemon_constant("DAEMON_BODIES_MAX_MB") << 20
BODY_OWN = daemon_constant("DAEMON_BODY_OWN_KB") << 10
BODY_MAX = 4 << 20  # API_BODY_MAX


def test_bodies_past_the_budget_are_503_before_they_are_sent(daemon):
    # a body takes from the budget what its Content-Length announces past its
    # own share, before it is sent: hold every body let in until one is not
    fit = BODIES_MAX // (BODY_MAX - BODY_OWN)
    held = []
    try:
        while True:
            c = Raw.unix(daemon)
            c.send(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % BODY_MAX)
            status, _, body = c.response()
            if status != 100:
                c.close()
                break
            held.append(c)  # its share stays taken: the body never comes
            assert len(held) <= fit, "more bodies let in than the budget holds"
        assert len(held) == fit
        assert status == 503, body
        assert json.loads(body)["error"]["code"] == "busy"
        # chunked bodies take their share as they come: 503 once it is gone
        c = Raw.unix(daemon)
        c.send(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        # what is left of the budget is less than one full body: the rest is
        # read and dropped, and the answer comes at the end of the body
        for _ in range(BODY_MAX >> 16):
            c.send(b"%x\r\n" % (1 << 16) + b" " * (1 << 16) + b"\r\n")
        c.send(b"0\r\n\r\n")
        status, _, body = c.response()
        assert (status, json.loads(body)["error"]["code"]) == (503, "busy")
        c.close()
        # requests without a body still pass, and so do bodies within a
        # connection's own share: a full budget locks no one out
        assert daemon.request("GET", "/healthz")[0] == 200
        assert daemon.request("GET", "/v1/tasks")[0] == 200
        big_env = {"A": "x" * 30000, "B": "x" * 30000}  # 60 KB: within its own share
        status, body = daemon.request("POST", "/v1/tasks", {"command": ["true"], "env": big_env})
        assert status == 201, body
    finally:
        for c in held:
            c.close()
    # once the held bodies are gone, a body fits again
    deadline = time.monotonic() + 10
    while True:
        status, body = daemon.request("POST", "/v1/tasks", {"command": ["true"]})
        if status == 201 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status == 201, body
