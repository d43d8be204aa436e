"""Streams that resume: the events stream honours Last-Event-ID and ?after=,
and a client that reconnects after agentboxd restarted gets exactly what it
missed; `agentbox wait` says it is reconnecting and its progress never goes
back; `agentbox logs -f` picks up at its byte offset. Against the real
agentboxd, restarted (by its pid) in the middle of the streams.
"""
import json
import os
import pty
import re
import select
import subprocess
import time

import pytest

from conftest import AGENTBOX
from daemon import Daemon, UnixHTTPConnection

DEADLINE_S = 60
FINAL = {"succeeded", "failed", "oom_killed", "timed_out", "cancelled", "lost"}


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


def progress_task(n, delay="0.05", then="true"):
    """A task that writes progress {"n": 1..n}, delay seconds apart, then runs `then`."""
    script = (f'for i in $(seq 1 {n}); do echo "{{\\"n\\": $i}}" >> "$AGENTBOX_PROGRESS"; '
              f"sleep {delay}; done; {then}")
    return {"command": ["sh", "-c", script]}


def wait_for(what, check, timeout=DEADLINE_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = check()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout} s")


def wait_final(daemon, tid):
    return wait_for(f"end of {tid}",
                    lambda: daemon.task(tid) if daemon.task(tid)["status"] in FINAL else None)


class SSE:
    """The events stream of a task, read event by event: (id, event, data)."""

    def __init__(self, daemon, tid, query="", headers=None):
        self.conn = UnixHTTPConnection(daemon.socket, timeout=DEADLINE_S)
        hdrs = {"Accept": "text/event-stream", **(headers or {})}
        self.conn.request("GET", f"/v1/tasks/{tid}/events{query}", headers=hdrs)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status

    def next(self):
        """The next event, or None at the end of the stream (or when it broke)."""
        fields = {}
        while True:
            try:
                line = self.resp.readline()
            except OSError:
                return None
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line == "":
                if "data" in fields:
                    return int(fields["id"]), fields["event"], json.loads(fields["data"])
                continue
            if line.startswith(":"):
                continue
            k, _, v = line.partition(": ")
            fields[k] = v

    def all(self):
        out = []
        while (ev := self.next()) is not None:
            out.append(ev)
        return out

    def close(self):
        self.conn.close()


def seqs(events):
    return [e[0] for e in events]


# ---- Last-Event-ID and ?after= ----------------------------------------------------


def test_events_stream_resumes_after_last_event_id(daemon):
    tid = daemon.submit(**progress_task(5, delay="0"))
    wait_final(daemon, tid)
    every = [e["seq"] for e in daemon.events(tid)]
    assert every == list(range(1, len(every) + 1)) and len(every) >= 7

    whole = SSE(daemon, tid)
    assert whole.status == 200
    got = whole.all()
    assert seqs(got) == every
    # each event names its seq (id:) and its type (event:), as the JSON does
    assert all(ev == data["type"] and i == data["seq"] for i, ev, data in got)

    s = SSE(daemon, tid, headers={"Last-Event-ID": "3"})
    assert seqs(s.all()) == every[3:]
    s = SSE(daemon, tid, query="?after=4")
    assert seqs(s.all()) == every[4:]
    # a browser reconnects to the URL it had, adding Last-Event-ID: the later wins
    s = SSE(daemon, tid, query="?after=2", headers={"Last-Event-ID": "5"})
    assert seqs(s.all()) == every[5:]
    s = SSE(daemon, tid, query="?after=5", headers={"Last-Event-ID": "2"})
    assert seqs(s.all()) == every[5:]
    s = SSE(daemon, tid, headers={"Last-Event-ID": str(every[-1])})
    assert s.all() == []


@pytest.mark.parametrize("bad", ["x", "-1", "1x", "99999999999999999999999"])
def test_events_stream_refuses_a_bad_last_event_id(daemon, bad):
    tid = daemon.submit(command=["true"])
    st, body = daemon.request("GET", f"/v1/tasks/{tid}/events",
                              headers={"Accept": "text/event-stream", "Last-Event-ID": bad})
    assert st == 400, body
    assert body["error"]["code"] == "invalid_field"
    assert body["error"]["field"] == "Last-Event-ID"


def test_events_stream_resumes_across_a_daemon_restart(daemon):
    n = 40
    tid = daemon.submit(**progress_task(n, delay="0.05"))
    s = SSE(daemon, tid)
    assert s.status == 200
    got = []
    while len(got) < 3:
        ev = s.next()
        assert ev is not None, "the stream ended before 3 events"
        got.append(ev)
    daemon.kill()  # the daemon this test started, by its pid
    s.close()
    daemon.start()
    s = SSE(daemon, tid, headers={"Last-Event-ID": str(got[-1][0])})
    assert s.status == 200
    got += s.all()
    wait_final(daemon, tid)
    every = [e["seq"] for e in daemon.events(tid)]
    assert seqs(got) == every  # nothing lost, nothing twice
    assert [d["data"]["n"] for _, ev, d in got if ev == "progress"] == list(range(1, n + 1))


# ---- agentbox wait and agentbox logs -f across a restart --------------------------


def cli_env(daemon):
    env = dict(os.environ)
    for k in ("AGENTBOX_URL", "AGENTBOX_KEY", "AGENTBOX_TOKEN"):
        env.pop(k, None)
    env["AGENTBOX_HOST"] = daemon.socket
    return env


class Reader:
    """What a child writes to fd, gathered as it comes; wait_for polls with a deadline."""

    def __init__(self, fd):
        self.fd, self.data, self.eof = fd, b"", False

    def pump(self, timeout):
        if self.eof:
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: a pty whose other side is gone
                chunk = b""
            self.data += chunk
            self.eof = not chunk

    def wait_for(self, what, check, others=(), timeout=DEADLINE_S):
        deadline = time.monotonic() + timeout
        while not check(self.data):
            assert time.monotonic() < deadline, f"no {what} within {timeout} s: {self.data!r}"
            assert not self.eof, f"ended before {what}: {self.data!r}"
            self.pump(0.05)
            for o in others:
                o.pump(0)

    def drain(self, proc, others=()):
        deadline = time.monotonic() + DEADLINE_S
        while not self.eof or any(not o.eof for o in others):
            assert time.monotonic() < deadline, "the output did not end"
            self.pump(0.05)
            for o in others:
                o.pump(0)
        return proc.wait(timeout=DEADLINE_S)


def test_wait_says_reconnecting_and_its_progress_never_goes_back(daemon):
    tid = daemon.submit(**progress_task(5, delay="0", then="exec sleep 300"))
    wait_for("all progress", lambda: daemon.task(tid).get("progress") == {"n": 5})
    # wait on a terminal: the live line is drawn
    master, slave = pty.openpty()
    proc = subprocess.Popen([AGENTBOX, "wait", tid], stdout=slave, stderr=subprocess.PIPE,
                            env=cli_env(daemon))
    os.close(slave)
    out, err = Reader(master), Reader(proc.stderr.fileno())
    try:
        out.wait_for("n=5 on the line", lambda d: b"n=5" in d, [err])
        daemon.kill()  # the daemon this test started, by its pid
        err.wait_for("reconnecting", lambda d: "reconnecting\u2026".encode() in d, [out])
        daemon.start()
        err.wait_for("reconnected", lambda d: b"reconnected" in d, [out])
        st, body = daemon.request("POST", f"/v1/tasks/{tid}/cancel")
        assert st == 200, body
        assert out.drain(proc, [err]) == 130  # cancelled
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    shown = [int(n) for n in re.findall(rb"n=(\d+)", out.data)]
    assert shown and shown == sorted(shown), shown  # never backwards
    assert shown[-1] == 5
    assert err.data.decode().splitlines() == [
        "agentbox: wait: agentboxd is not answering; reconnecting\u2026",
        "agentbox: wait: reconnected",
    ]


def test_logs_follow_resumes_at_its_byte_offset(daemon):
    n = 300
    # it writes on while agentboxd is away, and ends only when cancelled: no race
    script = (f"for i in $(seq 1 {n}); do echo \"line $i\"; sleep 0.01; done; "
              "exec sleep 300")
    tid = daemon.submit(command=["sh", "-c", script])
    proc = subprocess.Popen([AGENTBOX, "logs", "-f", tid], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env(daemon))
    out, err = Reader(proc.stdout.fileno()), Reader(proc.stderr.fileno())
    try:
        out.wait_for("line 3", lambda d: b"line 3\n" in d, [err])
        daemon.kill()
        err.wait_for("reconnecting", lambda d: "reconnecting\u2026".encode() in d, [out])
        daemon.start()
        out.wait_for(f"line {n}", lambda d: b"line %d\n" % n in d, [err])
        st, body = daemon.request("POST", f"/v1/tasks/{tid}/cancel")
        assert st == 200, body
        assert out.drain(proc, [err]) == 0, err.data
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_final(daemon, tid)
    st, whole = daemon.request("GET", f"/v1/tasks/{tid}/logs", raw=True)[:2]
    assert st == 200
    assert out.data == whole == b"".join(b"line %d\n" % i for i in range(1, n + 1))
    assert b"reconnected" in err.data


def test_logs_offset_skips_what_the_client_has(daemon):
    tid = daemon.submit(command=["sh", "-c", "echo hello; echo world"])
    wait_final(daemon, tid)
    st, body = daemon.request("GET", f"/v1/tasks/{tid}/logs?follow=1&offset=6", raw=True)[:2]
    assert (st, body) == (200, b"world\n")
    st, body = daemon.request("GET", f"/v1/tasks/{tid}/logs?follow=1&offset=1000", raw=True)[:2]
    assert (st, body) == (200, b"")
    st, body = daemon.request("GET", f"/v1/tasks/{tid}/logs?offset=6")
    assert st == 400 and body["error"]["field"] == "offset"


def test_logs_follow_is_one_stream_whenever_it_is_read(daemon):
    """The followed output is the same bytes whenever the stream began, so
    that offset= resumes it exactly across attempts: each attempt after the
    first starts with "[agentbox: attempt N]" on a line of its own, and the
    first has no such line (a stream begun during the first attempt cannot
    know that a second will come, and a stream begun later must say the
    same)."""
    script = ('if [ "$AGENTBOX_ATTEMPT" = 1 ]; then printf one; exit 1; fi; '
              'printf "two\\n"')
    tid = daemon.submit(command=["sh", "-c", script], max_attempts=2, retry_on=["failed"])
    t = wait_final(daemon, tid)
    assert t["status"] == "succeeded" and t["attempt"] == 2, t
    stream = b"one\n[agentbox: attempt 2]\ntwo\n"
    st, body = daemon.request("GET", f"/v1/tasks/{tid}/logs?follow=1", raw=True)[:2]
    assert (st, body) == (200, stream)
    for offset in (1, 3, 4, len(stream) - 4):
        st, body = daemon.request("GET", f"/v1/tasks/{tid}/logs?follow=1&offset={offset}",
                                  raw=True)[:2]
        assert (st, body) == (200, stream[offset:]), offset
    # without follow the whole answer marks every attempt, the first too
    st, whole = daemon.request("GET", f"/v1/tasks/{tid}/logs", raw=True)[:2]
    assert whole == b"[agentbox: attempt 1]\none\n[agentbox: attempt 2]\ntwo\n"
