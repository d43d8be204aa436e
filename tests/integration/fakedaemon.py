"""A fake agentboxd for testing the client verbs of `agentbox` without the
real daemon: the routes of docs/api.md on a unix socket, answered from
canned data, with every request recorded.

Python's standard library only: socketserver.UnixStreamServer (threaded)
and http.server.BaseHTTPRequestHandler speaking HTTP/1.1.

What a test controls:
  tasks        id -> the task object GET /v1/tasks/{id} answers with
  logs         id -> the output (bytes); with ?follow=1 it goes out in
               log_pieces[id] chunks, log_pause seconds apart (a
               threading.Event among them: held until it is set)
  scripts      id -> the steps of its event stream (see Step below); each
               stream connection goes on from where the last one stopped
  page_size    tasks per page of GET /v1/tasks
  fail_next    the next N requests are answered 503 (a daemon restarting)
  error_next   the next request is answered with this (status, code, msg, field)
  requests     what came: a list of Request

Interactive sandboxes (the routes of docs/api.md under /v1/sandboxes):
  sandboxes    id -> the sandbox object; add_sandbox() makes one
  files        (id, path) -> the bytes of a file in that sandbox
  exec_events  id -> canned events for its next exec: a list of
               (event, data) pairs, or ("sleep", secs); without them the
               command really runs, on this machine (env and stdin as
               sent, cwd ignored), and its output is streamed as it comes
"""
import datetime
import json
import os
import selectors
import signal
import socket
import socketserver
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

FINAL = {"succeeded", "failed", "oom_killed", "timed_out", "cancelled", "lost"}
ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # 0-9 a-z without i, l, o, u


def task_id(n):
    """A well-formed task id: tsk_ and 26 characters."""
    digits = []
    for _ in range(26):
        digits.append(ID_ALPHABET[n % 32])
        n //= 32
    return "tsk_" + "".join(reversed(digits))


def sandbox_id(n):
    """A well-formed sandbox id: sbx_ and 26 characters."""
    return "sbx_" + task_id(n)[4:]


def is_sandbox_id(s):
    return (len(s) == 30 and s.startswith("sbx_")
            and all(ch in ID_ALPHABET for ch in s[4:]))


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.") + f"{int(t * 1000) % 1000:03d}Z"


def make_sandbox(sid, status="running", created=None, timeout_s=300, end_reason=None,
                 limits=None, metadata=None):
    created = time.time() if created is None else created
    return {
        "id": sid, "status": status, "created_at": rfc3339(created),
        "expires_at": rfc3339(created + timeout_s),
        "ended_at": rfc3339(created + 1) if status == "ended" else None,
        "end_reason": end_reason if status == "ended" else None,
        "end_detail": None,
        "limits": limits or {"cpus": 1, "disk_mb": 1024, "memory_mb": 512, "pids": 256},
        "metadata": metadata or {},
    }


def make_task(tid, status="running", attempt=1, max_attempts=1, progress=None,
              command=("python3", "crawl.py"), exit_code=None,
              created_at="2024-05-01T12:00:00.000Z"):
    return {
        "id": tid, "status": status, "attempt": attempt, "max_attempts": max_attempts,
        "retry_on": ["lost"], "cancel_requested": False, "exit_code": exit_code,
        "error": None, "created_at": created_at,
        "started_at": None if status == "queued" else created_at,
        "finished_at": created_at if status in FINAL else None,
        "command": list(command), "limits": {"memory_mb": 512}, "metadata": {},
        "progress": progress or {},
    }


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Step:
    """One step of an event stream.

    kind "event": send an event (seq, type, data, attempt); a status event
                  also sets the task's status (and exit_code, if given)
    kind "sleep": wait `secs`
    kind "drop":  cut the connection, as a daemon that died would (once)
    kind "hold":  keep the stream open, silent, until `gate` (a threading.Event)
                  is set, or `secs` pass
    """
    kind: str
    seq: int = 0
    type: str = ""
    data: dict = field(default_factory=dict)
    attempt: int = 1
    secs: float = 0.0
    gate: object = None


def event(seq, type_, data, attempt=1):
    return Step("event", seq=seq, type=type_, data=data, attempt=attempt)


def sleep(secs):
    return Step("sleep", secs=secs)


def drop():
    return Step("drop")


def hold(gate, secs=120.0):
    return Step("hold", gate=gate, secs=secs)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # a client that stops reading a stream early is expected, not news
        import sys
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class FakeDaemon:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.tasks = {}
        self.logs = {}
        self.log_pieces = {}
        self.log_pause = 0.05
        self.scripts = {}
        self.cursor = {}
        self.page_size = 50
        self.fail_next = 0
        self.error_next = None
        self.requests = []
        self.created = 0
        self.sandboxes = {}
        self.sandbox_env = {}
        self.files = {}
        self.exec_events = {}
        self.next_pid = 7
        self.server = None
        self.thread = None

    # ---- life ----------------------------------------------------------
    def start(self):
        daemon = self

        class Handler(_Handler):
            fake = daemon

        if os.path.exists(self.path):
            os.unlink(self.path)
        self.server = _Server(self.path, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if os.path.exists(self.path):
            os.unlink(self.path)

    # ---- what tests use ------------------------------------------------
    def add_task(self, tid, **kw):
        self.tasks[tid] = make_task(tid, **kw)
        return self.tasks[tid]

    def add_sandbox(self, sid, **kw):
        self.sandboxes[sid] = make_sandbox(sid, **kw)
        return self.sandboxes[sid]

    def requests_to(self, method, prefix):
        return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]


def _error_body(code, message, field_=None):
    err = {"code": code, "message": message}
    if field_:
        err["field"] = field_
    return {"error": err}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake = None  # set by FakeDaemon.start()

    def log_message(self, fmt, *args):  # quiet, and a unix peer has no address
        pass

    def address_string(self):
        return "unix"

    # ---- plumbing ------------------------------------------------------
    def _record(self):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = Request(self.command, url.path, urllib.parse.parse_qs(url.query),
                      {k.lower(): v for k, v in self.headers.items()}, body)
        with self.fake.lock:
            self.fake.requests.append(req)
        return req

    def _send(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, code, message, field_=None):
        self._send(status, _error_body(code, message, field_))

    def _start_chunked(self, ctype):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self):
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    # ---- routing -------------------------------------------------------
    def do_GET(self):
        self._route(self._record())

    def do_POST(self):
        self._route(self._record())

    def do_PUT(self):
        self._route(self._record())

    def do_DELETE(self):
        self._route(self._record())

    def _route(self, req):
        fake = self.fake
        self.close_connection = True
        with fake.lock:
            if fake.fail_next > 0:
                fake.fail_next -= 1
                return self._error(503, "internal", "agentboxd is starting")
            canned, fake.error_next = fake.error_next, None
        if canned:
            return self._error(*canned)
        parts = req.path.strip("/").split("/")
        if req.path == "/healthz":
            return self._send(200, {"status": "ok"})
        if parts[:2] == ["v1", "sandboxes"]:
            return self._sandbox_route(req, parts[2:])
        if parts[:2] != ["v1", "tasks"]:
            return self._error(404, "not_found", "no such route")
        if len(parts) == 2:
            if req.method == "POST":
                return self._create(req)
            return self._list(req)
        tid = parts[2]
        task = fake.tasks.get(tid)
        if task is None:
            return self._error(404, "not_found", f"no task {tid}")
        rest = parts[3:]
        if not rest and req.method == "GET":
            return self._send(200, task)
        if rest == ["cancel"] and req.method == "POST":
            if task["status"] in FINAL:
                return self._error(409, "conflict",
                                   f"task {tid} has already ended ({task['status']}): "
                                   "there is nothing to cancel")
            if task["status"] == "running":
                task["cancel_requested"] = True
            else:
                task["status"] = "cancelled"
            return self._send(200, task)
        if rest == ["logs"] and req.method == "GET":
            return self._logs(req, tid)
        if rest == ["events"] and req.method == "GET":
            return self._events(req, tid)
        return self._error(405, "method_not_allowed", "not this method")

    def _create(self, req):
        if req.headers.get("content-type", "").split(";")[0] != "application/json":
            return self._error(415, "unsupported_media_type",
                               "the body must be sent as Content-Type: application/json")
        try:
            body = req.json()
        except ValueError:
            return self._error(400, "invalid_json", "not JSON")
        if not isinstance(body.get("command"), list) or not body["command"]:
            return self._error(400, "missing_field", "command is required", "command")
        with self.fake.lock:
            self.fake.created += 1
            tid = task_id(1000 + self.fake.created)
        task = make_task(tid, status="queued", attempt=0,
                         max_attempts=body.get("max_attempts", 1), command=body["command"])
        task["limits"] = body.get("limits", {})
        task["metadata"] = body.get("metadata", {})
        self.fake.tasks[tid] = task
        return self._send(201, task)

    def _list(self, req):
        fake = self.fake
        wanted = None
        if "status" in req.query:
            wanted = set(req.query["status"][0].split(","))
        tasks = [t for t in fake.tasks.values() if wanted is None or t["status"] in wanted]
        tasks.sort(key=lambda t: t["id"])
        after = req.query.get("after", [None])[0]
        if after:
            tasks = [t for t in tasks if t["id"] > after]
        page = tasks[:fake.page_size]
        nxt = page[-1]["id"] if len(tasks) > fake.page_size else None
        return self._send(200, {"tasks": page, "next": nxt})

    def _logs(self, req, tid):
        fake = self.fake
        text = fake.logs.get(tid, b"")
        if req.query.get("follow") != ["1"]:
            return self._send(200, text, "text/plain; charset=utf-8")
        self._start_chunked("text/plain; charset=utf-8")
        skip = int(req.query.get("offset", ["0"])[0])  # the bytes the client has
        for piece in fake.log_pieces.get(tid, [text]):
            if isinstance(piece, threading.Event):  # a gate: hold until the test opens it
                piece.wait(120)
                continue
            piece, skip = piece[skip:], max(0, skip - len(piece))
            if piece:
                self._chunk(piece)
                time.sleep(fake.log_pause)
        self._end_chunked()

    def _events(self, req, tid):
        fake = self.fake
        after = int(req.query.get("after", ["0"])[0])
        script = fake.scripts.get(tid, [])
        if "text/event-stream" not in req.headers.get("accept", ""):
            events = [{"seq": s.seq, "attempt": s.attempt, "type": s.type, "data": s.data,
                       "time": "2024-05-01T12:00:00.000Z"}
                      for s in script if s.kind == "event" and s.seq > after]
            return self._send(200, {"events": events})
        self._start_chunked("text/event-stream")
        self._chunk(b": hello\n\n")
        task = fake.tasks[tid]
        while True:
            with fake.lock:
                i = fake.cursor.get(tid, 0)
                if i >= len(script):
                    break
                step = script[i]
                fake.cursor[tid] = i + 1
            if step.kind == "sleep":
                time.sleep(step.secs)
            elif step.kind == "hold":
                step.gate.wait(step.secs)
            elif step.kind == "drop":
                return self._drop()
            elif step.kind == "event" and step.seq > after:
                ev = {"seq": step.seq, "attempt": step.attempt, "type": step.type,
                      "data": step.data, "time": "2024-05-01T12:00:00.000Z"}
                if step.type == "status":
                    task["status"] = step.data["status"]
                    task["attempt"] = step.attempt
                    if "exit_code" in step.data:
                        task["exit_code"] = step.data["exit_code"]
                elif step.type == "progress":
                    task["progress"].update(step.data)
                text = f"id: {step.seq}\nevent: {step.type}\ndata: {json.dumps(ev)}\n\n"
                self._chunk(text.encode())
        self._end_chunked()

    # ---- interactive sandboxes -------------------------------------------
    def _json_body(self, req, required=False):
        """The request's JSON object, or None after answering the error."""
        if not req.body and not required:
            return {}
        if req.headers.get("content-type", "").split(";")[0] != "application/json":
            self._error(415, "unsupported_media_type",
                        "the body must be sent as Content-Type: application/json")
            return None
        try:
            body = json.loads(req.body)
        except ValueError:
            self._error(400, "invalid_json", "not JSON")
            return None
        if not isinstance(body, dict):
            self._error(400, "invalid_json", "not a JSON object")
            return None
        return body

    def _check_fields(self, body, known):
        for k in body:
            if k not in known:
                self._error(400, "unknown_field", f"unknown field {k}", k)
                return False
        return True

    def _timeout_ok(self, body, top):
        t = body.get("timeout_s", 1)
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= top:
            self._error(400, "invalid_field",
                        f"timeout_s must be an integer from 1 to {top}", "timeout_s")
            return False
        return True

    def _sandbox_route(self, req, rest):
        fake = self.fake
        if not rest:
            if req.method == "POST":
                return self._sandbox_create(req)
            if req.method == "GET":
                return self._sandbox_list(req)
            return self._error(405, "method_not_allowed", "not this method")
        sid, rest = rest[0], rest[1:]
        if not is_sandbox_id(sid):
            return self._error(400, "invalid_id", f"'{sid}' is not a sandbox id")
        sb = fake.sandboxes.get(sid)
        if sb is None:
            return self._error(404, "not_found", f"no sandbox {sid}")
        ended = sb["status"] == "ended"
        if not rest:
            if req.method == "GET":
                return self._send(200, sb)
            if req.method == "DELETE":
                if ended:
                    return self._error(409, "sandbox_ended", f"sandbox {sid} has ended")
                sb.update(status="ended", end_reason="deleted", ended_at=rfc3339(time.time()))
                return self._send(200, sb)
            return self._error(405, "method_not_allowed", "not this method")
        if rest == ["pause"] or rest == ["resume"] or rest == ["timeout"]:
            if req.method != "POST":
                return self._error(405, "method_not_allowed", "not this method")
            if ended:
                return self._error(409, "sandbox_ended", f"sandbox {sid} has ended")
            if rest == ["timeout"]:
                body = self._json_body(req, required=True)
                if body is None or not self._check_fields(body, {"timeout_s"}):
                    return None
                if "timeout_s" not in body:
                    return self._error(400, "missing_field", "timeout_s is required",
                                       "timeout_s")
                if not self._timeout_ok(body, 604800):
                    return None
                sb["expires_at"] = rfc3339(time.time() + body["timeout_s"])
            else:
                sb["status"] = "paused" if rest == ["pause"] else "running"
            return self._send(200, sb)
        if rest == ["exec"] and req.method == "POST":
            if ended:
                return self._error(409, "sandbox_ended", f"sandbox {sid} has ended")
            if sb["status"] == "paused":
                return self._error(409, "sandbox_paused", f"sandbox {sid} is paused")
            return self._exec(req, sid)
        if rest == ["files"]:
            return self._files(req, sid, sb)
        return self._error(404, "not_found", "no such route")

    def _sandbox_create(self, req):
        body = self._json_body(req)
        if body is None:
            return None
        if not self._check_fields(body, {"limits", "timeout_s", "env", "metadata", "network"}):
            return None
        if not self._timeout_ok(body, 604800):
            return None
        with self.fake.lock:
            self.fake.created += 1
            sid = sandbox_id(5000 + self.fake.created)
        limits = {"cpus": 1, "disk_mb": 1024, "memory_mb": 512, "pids": 256}
        limits.update(body.get("limits", {}))
        sb = make_sandbox(sid, timeout_s=body.get("timeout_s", 300), limits=limits,
                          metadata=body.get("metadata", {}))
        self.fake.sandbox_env[sid] = body.get("env", {})
        self.fake.sandboxes[sid] = sb
        return self._send(201, sb)

    def _sandbox_list(self, req):
        fake = self.fake
        wanted = set(req.query.get("status", ["running,paused"])[0].split(","))
        sbs = sorted((s for s in fake.sandboxes.values() if s["status"] in wanted),
                     key=lambda s: s["id"])
        after = req.query.get("after", [None])[0]
        if after:
            sbs = [s for s in sbs if s["id"] > after]
        page = sbs[:fake.page_size]
        nxt = page[-1]["id"] if len(sbs) > fake.page_size else None
        return self._send(200, {"sandboxes": page, "next": nxt})

    def _files(self, req, sid, sb):
        fake = self.fake
        path = req.query.get("path", [None])[0]
        if path is None or not path.startswith("/") or len(path) > 1024:
            return self._error(400, "invalid_field", "path must be an absolute path", "path")
        if sb["status"] == "ended":
            return self._error(409, "sandbox_ended", f"sandbox {sid} has ended")
        if sb["status"] == "paused":
            return self._error(409, "sandbox_paused", f"sandbox {sid} is paused")
        if req.method == "PUT":
            if len(req.body) > 64 << 20:
                return self._error(413, "file_too_large", "a file holds at most 64 MiB")
            if path.endswith("/"):
                return self._error(400, "not_a_file", f"{path} is a directory")
            fake.files[(sid, path)] = req.body
            return self._send(201, {"path": path, "size": len(req.body)})
        if req.method == "GET":
            if (sid, path) not in fake.files:
                return self._error(404, "file_not_found", f"no file {path}")
            return self._send(200, fake.files[(sid, path)], "application/octet-stream")
        return self._error(405, "method_not_allowed", "not this method")

    def _exec(self, req, sid):
        fake = self.fake
        body = self._json_body(req, required=True)
        if body is None:
            return None
        if not self._check_fields(body, {"command", "stdin", "env", "cwd", "timeout_s",
                                         "background"}):
            return None
        cmd = body.get("command")
        if not isinstance(cmd, list) or not cmd:
            return self._error(400, "missing_field", "command is required", "command")
        if "timeout_s" in body and not self._timeout_ok(body, 86400):
            return None
        with fake.lock:
            pid = fake.next_pid
            fake.next_pid += 1
        if body.get("background"):
            return self._send(202, {"pid": pid})
        stream = "text/event-stream" in req.headers.get("accept", "")
        canned = fake.exec_events.pop(sid, None)
        events = self._canned(canned) if canned is not None else \
            self._run_here(body, fake.sandbox_env.get(sid, {}), pid)
        if not stream:
            out = {"stdout": "", "stderr": ""}
            for name, data in events:
                if name in ("stdout", "stderr"):
                    out[name] += data["data"]
                elif name == "exit":
                    out.update(data)
            return self._send(200, out)
        self._start_chunked("text/event-stream")
        for name, data in events:
            if name == "drop":
                return self._drop()
            self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self._end_chunked()

    @staticmethod
    def _canned(steps):
        for step in steps:
            if step[0] == "sleep":
                time.sleep(step[1])
            else:
                yield step

    @staticmethod
    def _run_here(body, base_env, pid):
        """Run the command on this machine, yielding events as its output comes."""
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        env.update(base_env)
        env.update(body.get("env", {}))
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(body["command"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    start_new_session=True)
        except FileNotFoundError:
            yield "start", {"pid": pid}
            yield "exit", {"pid": pid, "exit_code": 127, "signal": None, "oom_killed": False,
                           "timed_out": False, "duration_ms": 0, "truncated": False}
            return
        yield "start", {"pid": pid}
        threading.Thread(target=_feed, args=(proc.stdin, body.get("stdin", "").encode()),
                         daemon=True).start()
        deadline = t0 + body["timeout_s"] if "timeout_s" in body else None
        timed_out = False
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        while sel.get_map():
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = sel.select(wait)
            if not ready and deadline is not None and time.monotonic() >= deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                timed_out, deadline = True, None
            for key, _ in ready:
                data = os.read(key.fileobj.fileno(), 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                yield key.data, {"data": data.decode("utf-8", "replace")}
        status = proc.wait()
        sig = -status if status < 0 else None
        yield "exit", {"pid": pid, "exit_code": 128 + sig if sig else status, "signal": sig,
                       "oom_killed": False, "timed_out": timed_out,
                       "duration_ms": int((time.monotonic() - t0) * 1000), "truncated": False}


def _feed(pipe, data):
    try:
        pipe.write(data)
        pipe.close()
    except OSError:
        pass
