"""The attacks of the soak test, each a loop in threads of its own.

Every attack is the technique of one hostile integration test
(tests/integration/test_hostile.py, test_http_hostile.py,
test_json_bombs.py), repeated for the length of the soak and run at the
same time as all the others against one agentboxd. An attacker never
asserts: it counts what the daemon answered, as (attack, outcome), and
the test judges the counts (an outcome outside what the daemon documents,
such as a 500 or a hung download, is a finding).

Every address is the daemon's unix socket or its TCP listener on
127.0.0.1; TCP clients bind loopback source addresses of their own
(127.0.0.N, as test_http_hostile.py does) so that each attack meets the
per-address limit on its own and none locks the others out by accident.
"""
import collections
import http.client
import json
import random
import socket
import struct
import threading
import time
import urllib.parse

import helpers
from daemon import UnixHTTPConnection
from test_http_hostile import Raw

import test_probes

# The fork bomb of the probe R1 (tests/integration/test_probes.py): python3
# spinning on fork() once the pids limit is reached, writing nothing.
FORK_BOMB = test_probes.FORK_BOMB


def arrays_bomb(size):
    """[[],[],...] as long as fits in size bytes: about size/3 values."""
    k = (size - 1) // 3  # "[" + k * "[]" + (k - 1) * "," + "]"
    body = b"[" + b",".join([b"[]"] * k) + b"]"
    assert len(body) <= size
    return body


def nested_bomb(size):
    """[[[[...]]]] as deep as fits in size bytes."""
    k = size // 2
    return b"[" * k + b"]" * k


class Soak:
    """What every attacker shares: the daemon's addresses, a stop event, the counts."""

    def __init__(self, daemon):
        self.d = daemon
        self.stop = threading.Event()
        self.counts = collections.Counter()
        self.lock = threading.Lock()
        self.threads = []
        self.tasks = []  # ids of the tasks the attackers submitted

    # ---- bookkeeping ----------------------------------------------------

    def count(self, attack, outcome, n=1):
        with self.lock:
            self.counts[(attack, str(outcome))] += n

    def gauge_max(self, attack, name, value):
        with self.lock:
            key = (attack, name)
            self.counts[key] = max(self.counts[key], value)

    def stopping(self):
        return self.stop.is_set()

    def wait(self, seconds):
        """Sleep, or less when the soak stops. True if it stops."""
        return self.stop.wait(seconds)

    def spawn(self, attack, fn, *args):
        def guarded():
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - an attacker's own failure is counted
                self.count(attack, f"attacker crashed: {e!r}")
        t = threading.Thread(target=guarded, name=attack, daemon=True)
        self.threads.append(t)
        t.start()
        return t

    # ---- transports -----------------------------------------------------

    def auth(self):
        return {"Authorization": f"Bearer {self.d.token}"}

    def http(self, transport, timeout, src="127.0.0.1"):
        if transport == "unix":
            return UnixHTTPConnection(self.d.socket, timeout=timeout)
        return http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=timeout,
                                          source_address=(src, 0))

    def request(self, transport, method, path, body=None, headers=None, timeout=60,
                src="127.0.0.1"):
        """(status, JSON or text) over the unix socket or TCP with the token."""
        conn = self.http(transport, timeout, src)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            hdrs = {"Content-Type": "application/json"} if data is not None else {}
            if transport == "tcp":
                hdrs.update(self.auth())
            hdrs.update(headers or {})
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            payload = resp.read()
        finally:
            conn.close()
        ctype = resp.getheader("Content-Type") or ""
        return resp.status, json.loads(payload) if "json" in ctype else payload

    def sock(self, transport, src="127.0.0.1", timeout=10, rcvbuf=None):
        """A raw connected socket; rcvbuf is set before connect, so a TCP window is small."""
        family = socket.AF_UNIX if transport == "unix" else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            if transport == "unix":
                s.connect(self.d.socket)
            else:
                s.bind((src, 0))
                s.connect(("127.0.0.1", self.d.port))
        except OSError:
            s.close()
            raise
        return s

    def head_bytes(self, transport, method, path, extra=b"", auth=True):
        token = (b"Authorization: Bearer %s\r\n" % self.d.token.encode()
                 if transport == "tcp" and auth else b"")
        return (b"%s %s HTTP/1.1\r\nHost: agentbox\r\n" % (method.encode(), path.encode())
                + token + extra + b"\r\n")


def outcome_of(status, body):
    """"400 invalid_json", "200", ...: a status and, for an error, its code."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return f"{status} {body['error'].get('code')}"
    return str(status)


def error_name(e):
    return f"error {type(e).__name__}"


# ---- blocking execs up to and past the waiter limits ----------------------

def blocking_exec(soak, sid, transport, src, retry_s):
    """POST .../exec of a command that never ends, again whenever answered.

    The first FLEET_WAITERS_PER_SANDBOX_MAX of a sandbox wait until the
    sandbox is deleted at the end; the others are refused 429 and retry.
    """
    attack = "blocking exec"
    while not soak.stopping():
        try:
            status, body = soak.request(transport, "POST", f"/v1/sandboxes/{sid}/exec",
                                        {"command": ["sleep", "infinity"]}, timeout=3600,
                                        src=src)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(retry_s)
            continue
        soak.count(attack, outcome_of(status, body))
        soak.wait(retry_s)


# ---- output floods -------------------------------------------------------

def exec_flood(soak, sid, command, pause_s):
    """Blocking execs that print hundreds of MB: the answer carries 1 MiB, truncated."""
    attack = "exec flood"
    while not soak.stopping():
        try:
            status, r = soak.request("unix", "POST", f"/v1/sandboxes/{sid}/exec",
                                     {"command": command}, timeout=300)
        except OSError as e:
            soak.count(attack, error_name(e))
        else:
            if status == 200:
                ok = r.get("exit_code") == 0 and r.get("truncated") is True
                soak.count(attack, "200 truncated, exit 0" if ok else f"200 {r}"[:200])
            else:
                soak.count(attack, outcome_of(status, r))
        soak.wait(pause_s)


def exec_flood_stream(soak, sid, command, pause_s):
    """The same flood as Server-Sent Events, read to the end."""
    attack = "exec flood stream"
    while not soak.stopping():
        conn = UnixHTTPConnection(soak.d.socket, timeout=300)
        try:
            conn.request("POST", f"/v1/sandboxes/{sid}/exec",
                         body=json.dumps({"command": command}).encode(),
                         headers={"Content-Type": "application/json",
                                  "Accept": "text/event-stream"})
            resp = conn.getresponse()
            if resp.status != 200:
                soak.count(attack, outcome_of(resp.status, json.loads(resp.read() or b"{}")))
            else:
                last, got = None, 0
                while True:
                    line = resp.readline()
                    if not line:
                        break
                    got += len(line)
                    if line.startswith(b"event: "):
                        last = line[7:].strip().decode()
                soak.count(attack, f"200 ended with event {last}")
                soak.count(attack, "bytes read", got)
        except OSError as e:
            soak.count(attack, error_name(e))
        finally:
            conn.close()
        soak.wait(pause_s)


# ---- tasks: a flood of output, and their final statuses --------------------

def task_flood(soak, command, limits, poll_s, pause_s):
    """One task at a time that floods its output; each must end succeeded."""
    attack = "task flood"
    while not soak.stopping():
        try:
            status, t = soak.request("unix", "POST", "/v1/tasks",
                                     {"command": command, "limits": limits})
            if status != 201:
                soak.count(attack, outcome_of(status, t))
                soak.wait(1)
                continue
            soak.tasks.append(t["id"])
            while True:
                status, t = soak.request("unix", "GET", f"/v1/tasks/{t['id']}")
                if status != 200 or t["status"] not in ("queued", "running"):
                    break
                time.sleep(poll_s)  # not cut short by the stop: the task is waited for
            soak.count(attack, t["status"] if status == 200 else outcome_of(status, t))
            soak.wait(pause_s)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(1)


# ---- slow readers of a large log -----------------------------------------

def slow_log_reader(soak, tid, transport, src, nbytes, every_s):
    """GET /v1/tasks/{id}/logs, then nbytes every every_s; again when closed."""
    attack = "slow log reader"
    while not soak.stopping():
        try:
            s = soak.sock(transport, src=src, timeout=10, rcvbuf=4096)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(1)
            continue
        try:
            conn = Raw(s)
            conn.send(soak.head_bytes(transport, "GET", f"/v1/tasks/{tid}/logs"))
            status, _ = conn.head()
            soak.count(attack, f"{status}")
            got = len(conn.buf)
            while not soak.wait(every_s):
                try:
                    data = s.recv(nbytes)
                except socket.timeout:
                    continue
                if not data:
                    soak.count(attack, "closed by the daemon")
                    break
                got += len(data)
            soak.count(attack, "bytes read", got)
        except (OSError, EOFError) as e:
            soak.count(attack, error_name(e))
        finally:
            s.close()


# ---- idle and slow TCP connections ----------------------------------------

def _closed(s):
    try:
        return s.recv(1 << 12) == b""  # the daemon sends nothing unasked: data is a close too
    except BlockingIOError:
        return False
    except OSError:
        return True


def idle_flood(soak, src, target, every_s):
    """Keep target idle connections open from src; reopen what the daemon closes."""
    attack = "idle connections"
    held = []
    try:
        while not soak.stopping():
            alive = []
            for s in held:
                if _closed(s):
                    s.close()
                    soak.count(attack, "closed by the daemon")
                else:
                    alive.append(s)
            held = alive
            soak.gauge_max(attack, "most held open", len(held))
            while len(held) < target and not soak.stopping():
                try:
                    s = soak.sock("tcp", src=src, timeout=2)
                except OSError as e:
                    soak.count(attack, error_name(e))
                    break
                s.setblocking(False)
                held.append(s)
                soak.count(attack, "opened")
            soak.wait(every_s)
    finally:
        for s in held:
            s.close()


def slowloris(soak, src, n, trickle_s):
    """n connections that send their header one byte every trickle_s, never ending it."""
    attack = "slowloris"
    header = b"GET /v1/tasks HTTP/1.1\r\nHost: agentbox\r\nX-Slow: " + b"a" * (1 << 20)
    conns = []  # [socket, bytes sent]
    try:
        while not soak.stopping():
            while len(conns) < n:
                try:
                    conns.append([soak.sock("tcp", src=src, timeout=2), 0])
                    soak.count(attack, "opened")
                except OSError as e:
                    soak.count(attack, error_name(e))
                    break
            for c in list(conns):
                try:
                    c[0].sendall(header[c[1]:c[1] + 1])
                    c[1] += 1
                except OSError:
                    soak.count(attack, "closed by the daemon")
                    c[0].close()
                    conns.remove(c)
            soak.gauge_max(attack, "most header bytes trickled", max((c[1] for c in conns),
                                                                      default=0))
            soak.wait(trickle_s)
    finally:
        for c in conns:
            c[0].close()


def unauthenticated_body(soak, src, variant, pause_s):
    """A large TCP body without a token: 401 at once, the body never read.

    variant "expect": Content-Length 4 MiB and Expect: 100-continue, as curl
    sends it (a "100 Continue" would be a failure); "push": a 64 MiB PUT
    whose body is sent straight away.
    """
    attack = f"unauthenticated body ({variant})"
    size = (4 << 20) if variant == "expect" else (64 << 20)
    chunk = b"x" * (1 << 20)
    while not soak.stopping():
        try:
            s = soak.sock("tcp", src=src, timeout=10)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(pause_s)
            continue
        conn = Raw(s)
        try:
            if variant == "expect":
                conn.send(soak.head_bytes("tcp", "POST", "/v1/tasks", auth=False, extra=(
                    b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                    b"Expect: 100-continue\r\n" % size)))
            else:
                conn.send(soak.head_bytes("tcp", "PUT", "/v1/sandboxes/sbx_0000000000000000000000000"
                                          "/files?path=/workspace/x", auth=False, extra=(
                                              b"Authorization: Bearer wrong\r\n"
                                              b"Content-Length: %d\r\n" % size)))
                try:
                    for _ in range(size // len(chunk)):
                        s.sendall(chunk)
                except OSError:
                    pass  # answered and closed: what was not read was refused
            status, _ = conn.head()
            soak.count(attack, str(status))
        except (OSError, EOFError) as e:
            soak.count(attack, "closed or reset" if isinstance(e, (EOFError, ConnectionError))
                       else error_name(e))
        finally:
            s.close()
        soak.wait(pause_s)


# ---- JSON bombs ------------------------------------------------------------

def json_bombs(soak, transport, src, bodies, routes, pause_s):
    """POST 4 MiB bombs ([[],[],...] and [[[[...]]]]) to routes that read JSON: 400."""
    attack = "json bomb"
    while not soak.stopping():
        name, body = random.choice(bodies)
        route = random.choice(routes)
        try:
            status, r = soak.request(transport, "POST", route, body, timeout=120, src=src)
            soak.count(attack, f"{name}: {outcome_of(status, r)}")
        except OSError as e:
            soak.count(attack, f"{name}: {error_name(e)}")
        soak.wait(pause_s)


def stalled_body(soak, transport, src, body, stall_s):
    """A 4 MiB bomb sent whole but its last byte, which comes stall_s later.

    The daemon holds what it has read of a body until the body is whole:
    this is the load a total budget for request bodies bounds.
    """
    attack = f"stalled json bomb ({transport})"
    soak.wait(random.uniform(0, stall_s))  # spread the ends over the stall
    head_extra = b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    while not soak.stopping():
        try:
            s = soak.sock(transport, src=src, timeout=30)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(1)
            continue
        conn = Raw(s)
        try:
            conn.send(soak.head_bytes(transport, "POST", "/v1/tasks", extra=head_extra))
            s.sendall(memoryview(body)[:-1])
            soak.count(attack, "held")
            if soak.wait(stall_s):
                break
            s.sendall(body[-1:])
            status, hdrs = conn.head()
            payload = conn.body(int(hdrs.get("content-length", "0")))
            soak.count(attack, outcome_of(status, json.loads(payload or b"{}")))
        except (OSError, EOFError, ValueError) as e:
            soak.count(attack, "closed or reset" if isinstance(e, (EOFError, ConnectionError))
                       else error_name(e))
            soak.wait(1)
        finally:
            s.close()


def budget_filler(soak, transport, src, body, stall_s, retry_s, most):
    """Keep the daemon's body budget full to the byte, as curl-like clients can.

    Each request asks `Expect: 100-continue` for a body of some size and
    learns at once whether the daemon will hold it (100) or not (503
    busy). The filler asks for len(body) bytes, then for half as many
    each time it is refused, down to 1 byte, keeps every body it is let
    send (whole but its last byte) for stall_s, and starts again from the
    top every retry_s: whatever room opens, it takes. It holds at most
    `most` bodies at once.
    """
    attack = f"body budget filler ({transport})"
    held = []  # [socket, Raw, size, until]

    def ask(size):
        s = soak.sock(transport, src=src, timeout=30)
        conn = Raw(s)
        try:
            conn.send(soak.head_bytes(transport, "POST", "/v1/tasks", extra=(
                b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                b"Expect: 100-continue\r\n" % size)))
            status, hdrs = conn.head()
            if status == 100:
                s.sendall(memoryview(body)[:size - 1])
                held.append([s, conn, size, time.monotonic() + stall_s])
                soak.count(attack, "held")
                return True
            payload = conn.body(int(hdrs.get("content-length", "0")))
            soak.count(attack, "refused: " + outcome_of(status, json.loads(payload or b"{}")))
        except BaseException:
            s.close()
            raise
        s.close()
        return False

    try:
        while not soak.stopping():
            for h in [h for h in held if h[3] <= time.monotonic()]:
                held.remove(h)
                try:  # the last byte, and the answer
                    h[0].sendall(body[h[2] - 1:h[2]])
                    status, hdrs = h[1].head()
                    payload = h[1].body(int(hdrs.get("content-length", "0")))
                    soak.count(attack, outcome_of(status, json.loads(payload or b"{}")))
                except (OSError, EOFError, ValueError) as e:
                    soak.count(attack, error_name(e))
                finally:
                    h[0].close()
            size = len(body)
            try:
                while size >= 1 and len(held) < most and not soak.stopping():
                    if not ask(size):
                        size //= 2
            except (OSError, EOFError, ValueError) as e:
                soak.count(attack, error_name(e))
            soak.wait(retry_s)
    finally:
        for h in held:
            h[0].close()


# ---- files: downloads truncated midway, uploads abandoned midway ------------

def files_url(sid, path, **q):
    return f"/v1/sandboxes/{sid}/files?" + urllib.parse.urlencode({"path": path, **q})


def truncated_download(soak, sid, size, prefix, end_s, pause_s):
    """Download a file while the sandbox truncates it: the download must end short."""
    attack = "truncated download"
    url = files_url(sid, "/workspace/big")
    while not soak.stopping():
        try:
            status, r = soak.request("unix", "POST", f"/v1/sandboxes/{sid}/exec", {
                "command": ["sh", "-c", f"head -c {size} /dev/zero > /workspace/big"]})
            if status != 200 or r.get("exit_code") != 0:
                soak.count(attack, f"make the file: {outcome_of(status, r)}")
                soak.wait(pause_s)
                continue
            s = soak.sock("unix", timeout=10, rcvbuf=64 << 10)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(pause_s)
            continue
        try:
            conn = Raw(s)
            conn.send(soak.head_bytes("unix", "GET", url))
            status, hdrs = conn.head()
            if status != 200:
                soak.count(attack, f"download: {status}")
                continue
            got = len(conn.body(prefix))  # a slow reader: a little, then nothing
            got += len(conn.buf)
            conn.buf = b""
            status, r = soak.request("unix", "POST", f"/v1/sandboxes/{sid}/exec",
                                     {"command": ["truncate", "-s", "0", "/workspace/big"]})
            if status != 200 or r.get("exit_code") != 0:
                soak.count(attack, f"truncate: {outcome_of(status, r)}")
                continue
            more, ended = helpers.read_until_closed(s, end_s)
            got += more
            if ended:
                soak.count(attack, "ended short" if got < size else "ended whole")
            else:
                soak.count(attack, f"neither ended nor went on within {end_s} s")
        except (OSError, EOFError) as e:
            soak.count(attack, error_name(e))
        finally:
            s.close()
        soak.wait(pause_s)


def abandoned_upload(soak, sid, transport, src, declared, sent, pause_s):
    """PUT a file of `declared` bytes, send `sent` of them, and hang up."""
    attack = "abandoned upload"
    chunk = b"\0" * (1 << 20)
    i = 0
    while not soak.stopping():
        i += 1
        try:
            s = soak.sock(transport, src=src, timeout=10)
        except OSError as e:
            soak.count(attack, error_name(e))
            soak.wait(pause_s)
            continue
        try:
            s.sendall(soak.head_bytes(transport, "PUT",
                                      files_url(sid, f"/workspace/up/{transport}-{i}"),
                                      extra=b"Content-Type: application/octet-stream\r\n"
                                      b"Content-Length: %d\r\n" % declared))
            for _ in range(sent // len(chunk)):
                s.sendall(chunk)
            if i % 2:  # half with a reset, half with a plain close
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            soak.count(attack, "abandoned")
        except OSError as e:
            soak.count(attack, error_name(e))
        finally:
            s.close()
        soak.wait(pause_s)
