"""The client verbs of `agentbox` (submit, status, wait, logs, cancel, ps)
against a fake agentboxd (fakedaemon.py): what they send, what they print,
and how they exit. They need no root and no sandbox; the real daemon's
suite (test_daemon.py) drives them end to end.
"""
import json
import os
import pty
import select
import subprocess
import threading
import time

import pytest

from conftest import AGENTBOX
import fakedaemon
import helpers
from fakedaemon import FakeDaemon, drop, event, hold, sleep, task_id

T1 = task_id(1)
T2 = task_id(2)
T3 = task_id(3)


@pytest.fixture
def fake(tmp_path):
    d = FakeDaemon(str(tmp_path / "agentbox.sock")).start()
    yield d
    d.stop()


def cli(fake, *args, timeout=30, env=None, socket=True):
    """Run `agentbox ARGS...` against the fake (via --socket unless socket=False)."""
    argv = [AGENTBOX, *args]
    if socket:
        argv[2:2] = ["--socket", fake.path]
    e = dict(os.environ)
    e.pop("AGENTBOX_HOST", None)
    e.pop("AGENTBOX_TOKEN", None)
    e.pop("AGENTBOX_KEY", None)
    e.update(env or {})
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)


def one_line_error(proc, verb):
    lines = proc.stderr.strip().split("\n")
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"agentbox: {verb}: "), proc.stderr
    return lines[0]


# ---- submit -------------------------------------------------------------

def test_submit_sends_only_what_was_given(fake):
    p = cli(fake, "submit", "--", "python3", "-c", "print(1)")
    assert p.returncode == 0, p.stderr
    tid = p.stdout.strip()
    assert tid in fake.tasks
    req, = fake.requests_to("POST", "/v1/tasks")
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {"command": ["python3", "-c", "print(1)"]}


def test_submit_converts_and_reads_files(fake, tmp_path):
    (tmp_path / "crawl.py").write_text("print('héllo')\n")
    (tmp_path / "cfg:x.json").write_text('{"a": 1}')
    p = cli(fake, "submit", "--memory", "1g", "--cpus", "0.5", "--pids", "64",
            "--disk", "1500k", "--timeout", "1m30s", "--env", "A=1", "--env", "B=x=y",
            "--attempts", "3", "--retry-on", "oom_killed,lost", "--retry-on", "lost",
            "--file", f"{tmp_path}/crawl.py:/workspace/crawl.py",
            "--file", f"{tmp_path}/cfg:x.json:/workspace/cfg.json",
            "--metadata", '{"owner": "agent-7", "n": [1, 2]}',
            "--", "python3", "/workspace/crawl.py", "--depth", "2")
    assert p.returncode == 0, p.stderr
    body = fake.requests_to("POST", "/v1/tasks")[0].json()
    assert body == {
        "limits": {"memory_mb": 1024, "cpus": 0.5, "pids": 64, "disk_mb": 2,
                   "timeout_s": 90},
        "env": {"A": "1", "B": "x=y"},
        "max_attempts": 3,
        "retry_on": ["oom_killed", "lost"],
        "files": {"/workspace/crawl.py": "print('héllo')\n",
                  "/workspace/cfg.json": '{"a": 1}'},
        "metadata": {"owner": "agent-7", "n": [1, 2]},
        "command": ["python3", "/workspace/crawl.py", "--depth", "2"],
    }


def test_submit_fractional_timeout_and_whole_cpus(fake):
    p = cli(fake, "submit", "--timeout", "1500ms", "--cpus", "2", "--memory", "1", "--", "true")
    assert p.returncode == 0, p.stderr
    limits = fake.requests_to("POST", "/v1/tasks")[0].json()["limits"]
    assert limits == {"timeout_s": 1.5, "cpus": 2, "memory_mb": 1}
    assert isinstance(limits["cpus"], int)


@pytest.mark.parametrize("args, needle", [
    (["--memory", "12xb", "--", "true"], "--memory: '12xb' is not a size"),
    (["--memory", "0", "--", "true"], "--memory: must be more than 0"),
    (["--cpus", "0", "--", "true"], "--cpus: '0' is not a positive number"),
    (["--pids", "-1", "--", "true"], "--pids: '-1' is not a positive whole number"),
    (["--timeout", "soon", "--", "true"], "--timeout: 'soon' is not a duration"),
    (["--env", "NOEQUALS", "--", "true"], "--env: 'NOEQUALS' is not KEY=VALUE"),
    (["--env", "A=1", "--env", "A=2", "--", "true"], "--env: A is given twice"),
    (["--attempts", "0", "--", "true"], "--attempts: '0' is not a number from 1 to 100"),
    (["--retry-on", "succeeded", "--", "true"], "--retry-on: 'succeeded' is not one of"),
    (["--retry-on", "bogus", "--", "true"], "--retry-on: 'bogus'"),
    (["--metadata", "[1]", "--", "true"], "--metadata: must be a JSON object"),
    (["--metadata", "{nope", "--", "true"], "--metadata: not JSON"),
    (["--file", "nocolon", "--", "true"], "--file: 'nocolon' is not LOCAL:/SANDBOX/PATH"),
    (["--file", "/nonexistent-agentbox:/w/x", "--", "true"],
     "--file: /nonexistent-agentbox: No such file or directory"),
    (["--file", "/dev/null:/w/x", "--", "true"],
     "--file: /dev/null is not a regular file or a directory"),
    (["--bogus", "--", "true"], "unknown option '--bogus'"),
    (["--memory"], "option '--memory' needs a value"),
    ([], "no command given"),
    (["--"], "no command given"),
    (["--network", "bogus", "--", "true"], "--network: 'bogus' is not none, open or allow:"),
    (["--network-rate", "0", "--network", "open", "--", "true"],
     "--network-rate: '0' is not a number from 1 to 100000 (Mbit/s)"),
    (["--network", "open", "--network-rate", "100001", "--", "true"],
     "--network-rate: '100001' is not a number from 1 to 100000"),
    (["--network", "none", "--network-rate", "5", "--", "true"],
     "--network-rate: only with --network open or allow:"),
    (["--network-rate", "5", "--network", "none", "--", "true"],
     "--network-rate: only with --network open or allow:"),
    (["--network-rate", "5", "--", "true"], "--network-rate: only with --network open or allow:"),
])
def test_submit_bad_input_sends_nothing(fake, args, needle):
    p = cli(fake, "submit", *args)
    assert p.returncode == 125
    assert needle in one_line_error(p, "submit")
    assert fake.requests == []


def test_submit_network_and_its_rate_in_either_order(fake):
    for args in (["--network", "open", "--network-rate", "20"],
                 ["--network-rate", "20", "--network", "allow:A.example.com"],
                 ["--network", "open", "--network-rate", "3", "--network-rate", "20"]):
        p = cli(fake, "submit", *args, "--", "true")
        assert p.returncode == 0, p.stderr
    bodies = [r.json()["network"] for r in fake.requests_to("POST", "/v1/tasks")]
    assert bodies == [{"mode": "open", "rate_mbit": 20},
                      {"mode": "allow", "allow": ["a.example.com"], "rate_mbit": 20},
                      {"mode": "open", "rate_mbit": 20}]


def test_submit_file_limits(fake, tmp_path):
    # files up to 64 KiB go inline, at most 4 MiB of them together
    part = tmp_path / "part.txt"
    part.write_text("x" * (60 << 10))
    p = cli(fake, "submit", *[a for i in range(70) for a in ("--file", f"{part}:/w/{i}")],
            "--", "true")
    assert p.returncode == 125
    assert "all files together may hold at most 4 MiB" in one_line_error(p, "submit")
    assert fake.requests == []
    # larger ones: the first 16 are sent ahead as inputs, the rest inline, within the 4 MiB
    big = tmp_path / "big.bin"
    big.write_bytes(b"y" * (3 << 20))
    p = cli(fake, "submit", *[a for i in range(18) for a in ("--file", f"{big}:/w/b{i}")],
            "--", "true")
    assert p.returncode == 125
    assert "16 files are sent ahead already" in one_line_error(p, "submit")
    assert fake.requests == []
    # bytes that are not text go as base64 (test_artifacts.py runs them for real)
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00")
    p = cli(fake, "submit", "--file", f"{binary}:/w/bin", "--", "true")
    assert p.returncode == 0, p.stderr
    files = fake.requests_to("POST", "/v1/tasks")[0].json()["files"]
    assert files == {"/w/bin": {"base64": "//4A"}}


def test_submit_api_error_shows_message_code_and_field(fake):
    fake.error_next = (400, "invalid_field", "limits.memory_mb must be at most 65536",
                       "limits.memory_mb")
    p = cli(fake, "submit", "--memory", "1t", "--", "true")
    assert p.returncode == 125
    assert one_line_error(p, "submit") == (
        "agentbox: submit: limits.memory_mb must be at most 65536 "
        "(invalid_field, field limits.memory_mb)")


def test_submit_help(fake):
    p = cli(fake, "submit", "--help", socket=False)
    assert p.returncode == 0
    assert "--retry-on" in p.stdout and "exit status" in p.stdout


# ---- status, cancel -----------------------------------------------------

def test_status_pretty_prints_the_task(fake):
    fake.add_task(T1, status="running", progress={"pages_crawled": 12})
    p = cli(fake, "status", T1)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == fake.tasks[T1]
    assert p.stdout.startswith("{\n  \"id\": ")
    req, = fake.requests
    assert (req.method, req.path) == ("GET", f"/v1/tasks/{T1}")
    assert req.headers["accept"] == "application/json"
    assert "authorization" not in req.headers


def test_status_not_found(fake):
    p = cli(fake, "status", T2)
    assert p.returncode == 125
    assert one_line_error(p, "status") == f"agentbox: status: no task {T2} (not_found)"


@pytest.mark.parametrize("args, needle", [
    ([], "give one task ID"),
    ([T1, T2], "give one task ID"),
    (["../etc"], "'../etc' is not a task id"),
    (["--bogus", T1], "unknown option '--bogus'"),
])
def test_status_bad_input(fake, args, needle):
    p = cli(fake, "status", *args)
    assert p.returncode == 125
    assert needle in one_line_error(p, "status")
    assert fake.requests == []


def test_cancel_prints_the_new_status(fake):
    fake.add_task(T1, status="queued")
    p = cli(fake, "cancel", T1)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "cancelled\n"
    req, = fake.requests
    assert (req.method, req.path, req.body) == ("POST", f"/v1/tasks/{T1}/cancel", b"")
    assert req.headers["content-length"] == "0"


def test_cancel_running_task(fake):
    fake.add_task(T1, status="running")
    p = cli(fake, "cancel", T1)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "running (cancel requested)\n"


def test_cancel_conflict(fake):
    fake.add_task(T1, status="succeeded", exit_code=0)
    p = cli(fake, "cancel", T1)
    assert p.returncode == 125
    line = one_line_error(p, "cancel")
    assert "has already ended (succeeded)" in line and line.endswith("(conflict)")


# ---- logs ---------------------------------------------------------------

def test_logs(fake):
    fake.add_task(T1, status="succeeded")
    fake.logs[T1] = b"line 1\nline 2\n\xff binary too\n"
    p = subprocess.run([AGENTBOX, "logs", "--socket", fake.path, T1], capture_output=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == fake.logs[T1]
    assert fake.requests[0].query == {}


def test_logs_follow_streams_as_it_comes(fake):
    fake.add_task(T1, status="succeeded")  # what it says once the stream has ended
    # the stream holds after "one" until the test has read it: it cannot end
    # before the first line is out, however slow either side is
    gate = threading.Event()
    fake.log_pieces[T1] = [b"one\n", gate, b"two\n", b"three\n"]
    proc = subprocess.Popen([AGENTBOX, "logs", "-f", "--socket", fake.path, T1],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no first line while the stream stayed open"
        first = proc.stdout.readline()
    finally:
        gate.set()
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    assert first == b"one\n" and rest == b"two\nthree\n"
    assert fake.requests[0].query == {"follow": ["1"], "offset": ["0"]}


def test_logs_follow_resumes_after_a_broken_stream(fake):
    fake.add_task(T1, status="running")
    saved = fakedaemon._Handler._logs

    def cut(self, req, tid):  # the first stream dies in the middle; the next one ends it
        if req.query.get("offset") == ["0"]:
            self._start_chunked("text/plain")
            self._chunk(b"partial\n")
            self._drop()
            return None
        self.fake.tasks[T1]["status"] = "succeeded"
        return saved(self, req, tid)

    fake.log_pieces[T1] = [b"partial\n", b"rest\n"]
    fakedaemon._Handler._logs = cut
    try:
        p = cli(fake, "logs", "-f", T1)
    finally:
        fakedaemon._Handler._logs = saved
    assert p.returncode == 0, p.stderr
    assert p.stdout == "partial\nrest\n"  # from its byte offset: nothing twice
    streams = [r.query for r in fake.requests if r.path.endswith("/logs")]
    assert [q["offset"] for q in streams] == [["0"], ["8"]]


# ---- ps -----------------------------------------------------------------

def test_ps_table_and_pagination(fake):
    fake.page_size = 2
    fake.add_task(T1, status="running", attempt=2, max_attempts=3,
                  progress={"pages_crawled": 12, "stage": "fetch"},
                  command=["python3", "crawl.py", "--url", "http://example.com/" + "x" * 80])
    fake.add_task(T2, status="queued", attempt=0, command=["sh", "-c", "echo hi there"])
    fake.add_task(T3, status="running")
    fake.add_task(task_id(4), status="succeeded")
    p = cli(fake, "ps")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "ATTEMPT", "AGE", "PROGRESS", "COMMAND"]
    assert len(lines) == 4  # header + 3 active tasks, over two pages
    row = lines[1]
    assert row.startswith(T1) and "running" in row and "2/3" in row
    assert "pages_crawled=12 stage=fetch" in row
    assert "python3 crawl.py --url http://example.com/" in row and row.endswith("...")
    assert "d " in row  # created long ago: an age in days
    assert "sh -c 'echo hi there'" in lines[2]
    gets = fake.requests_to("GET", "/v1/tasks")
    assert [r.query for r in gets] == [
        {"status": ["queued,running"]},
        {"status": ["queued,running"], "after": [T2]},
    ]


def test_ps_all_and_status(fake):
    fake.add_task(T1, status="succeeded")
    fake.add_task(T2, status="failed")
    p = cli(fake, "ps", "--all")
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 3
    assert fake.requests[-1].query == {}
    p = cli(fake, "ps", "--status", "failed")
    assert len(p.stdout.splitlines()) == 2 and T2 in p.stdout
    assert fake.requests[-1].query == {"status": ["failed"]}
    p = cli(fake, "ps", "--status", "failed,bogus")
    assert p.returncode == 125
    assert "'bogus' is not a task status" in one_line_error(p, "ps")
    p = cli(fake, "ps", "--all", "--status", "failed")
    assert p.returncode == 125


# ---- wait ---------------------------------------------------------------

@pytest.mark.parametrize("status, code", [
    ("succeeded", 0), ("failed", 1), ("oom_killed", 137), ("timed_out", 124),
    ("cancelled", 130), ("lost", 3),
])
def test_wait_exit_codes_of_ended_tasks(fake, status, code):
    fake.add_task(T1, status=status)
    p = cli(fake, "wait", T1)
    assert p.returncode == code, p.stderr
    assert json.loads(p.stdout)["status"] == status
    assert p.stderr == ""
    assert len(fake.requests) == 1  # ended already: no stream


def test_wait_follows_the_event_stream(fake):
    fake.add_task(T1, status="running")
    fake.scripts[T1] = [
        event(1, "progress", {"pages_crawled": 12}),
        sleep(0.1),
        event(2, "progress", {"pages_crawled": 13, "stage": "parse"}),
        event(3, "status", {"status": "oom_killed", "exit_code": None, "error": "out of memory"}),
    ]
    p = cli(fake, "wait", T1)
    assert p.returncode == 137, p.stderr
    final = json.loads(p.stdout)  # only the final JSON: stdout is not a terminal
    assert final["status"] == "oom_killed"
    assert final["progress"] == {"pages_crawled": 13, "stage": "parse"}
    ev, = fake.requests_to("GET", f"/v1/tasks/{T1}/events")
    assert ev.query == {"after": ["0"]}
    assert ev.headers["accept"] == "text/event-stream"


def test_wait_reconnects_after_the_stream_drops(fake):
    fake.add_task(T1, status="running")
    fake.scripts[T1] = [
        event(1, "progress", {"pages_crawled": 1}),
        event(2, "progress", {"pages_crawled": 2}),
        drop(),
        event(3, "status", {"status": "succeeded", "exit_code": 0, "error": None}),
    ]
    p = cli(fake, "wait", T1)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "succeeded"
    streams = fake.requests_to("GET", f"/v1/tasks/{T1}/events")
    assert [r.query["after"] for r in streams] == [["0"], ["2"]]


def test_wait_rides_out_a_restarting_daemon(fake):
    fake.add_task(T1, status="running")
    fake.scripts[T1] = [event(1, "progress", {"n": 1}), drop(),
                        event(2, "status", {"status": "failed", "exit_code": 3})]
    real_drop = fakedaemon._Handler._drop

    def drop_and_restart(self):  # after the drop, the daemon answers 503 for a while
        self.fake.fail_next = 3
        real_drop(self)

    fakedaemon._Handler._drop = drop_and_restart
    try:
        p = cli(fake, "wait", T1)
    finally:
        fakedaemon._Handler._drop = real_drop
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["exit_code"] == 3
    streams = fake.requests_to("GET", f"/v1/tasks/{T1}/events")
    assert streams[-1].query["after"] == ["1"]


def test_wait_reconnects_after_the_daemon_comes_back(fake):
    fake.add_task(T1, status="running")
    fake.scripts[T1] = [event(1, "progress", {"n": 1}), sleep(0.2), drop()]

    def bring_back():  # the daemon goes away for ~2 s, then returns with the end
        # once the stream has been cut (event 1 sent, then the drop): not after
        # a guess at how long the CLI takes to get that far
        helpers.wait_until(lambda: fake.cursor.get(T1, 0) >= 3, 30, 0.02)
        fake.stop()
        time.sleep(1.5)  # any length: the CLI retries until the daemon is back
        fake.scripts[T1] = [event(2, "status", {"status": "succeeded", "exit_code": 0})]
        fake.cursor[T1] = 0
        fake.start()

    t = threading.Thread(target=bring_back)
    t.start()
    p = cli(fake, "wait", T1)
    t.join()
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "succeeded"
    assert fake.requests_to("GET", f"/v1/tasks/{T1}/events")[-1].query["after"] == ["1"]


def test_wait_gives_up_on_an_error_answer(fake):
    fake.add_task(T1, status="running")
    fake.scripts[T1] = [drop()]
    real_drop = fakedaemon._Handler._drop

    def drop_then_vanish(self):
        self.fake.tasks.pop(T1)
        real_drop(self)

    fakedaemon._Handler._drop = drop_then_vanish
    try:
        p = cli(fake, "wait", T1)
    finally:
        fakedaemon._Handler._drop = real_drop
    assert p.returncode == 125
    assert one_line_error(p, "wait") == f"agentbox: wait: no task {T1} (not_found)"


def test_wait_timeout(fake):
    fake.add_task(T1, status="running")
    # The stream stays open until the test is done: nothing but wait's own
    # timer can end it (cli() gives up after 30 s if that timer does not fire).
    gate = threading.Event()
    fake.scripts[T1] = [hold(gate)]
    try:
        p = cli(fake, "wait", "--timeout", "500ms", T1)
    finally:
        gate.set()
    assert p.returncode == 2, p.stderr
    assert "did not end within 500ms (it goes on)" in one_line_error(p, "wait")
    assert p.stdout == ""


def test_wait_live_line_on_a_terminal(fake):
    fake.add_task(T1, status="running")
    fake.scripts[T1] = [
        event(1, "progress", {"pages_crawled": 12}),
        sleep(0.2),
        event(2, "status", {"status": "succeeded", "exit_code": 0}),
    ]
    master, slave = pty.openpty()
    proc = subprocess.Popen([AGENTBOX, "wait", "--socket", fake.path, T1], stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 10)
        if not r:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the other side is gone
            break
        if not data:
            break
        out += data
    os.close(master)
    assert proc.wait(timeout=30) == 0
    text = out.decode()
    assert "\rrunning  attempt 1  pages_crawled=12\x1b[K" in text
    assert "\r\x1b[K{" in text.replace("\r\n", "\n")  # the line is cleared before the JSON


def test_wait_event_stream_required(fake):
    fake.add_task(T1, status="running")

    def not_sse(self, req, tid):
        self._send(200, {"events": []})

    fakedaemon._Handler._events, saved = not_sse, fakedaemon._Handler._events
    try:
        p = cli(fake, "wait", T1)
    finally:
        fakedaemon._Handler._events = saved
    assert p.returncode == 125
    assert "did not answer with an event stream" in one_line_error(p, "wait")


def test_wait_help_documents_exit_codes(fake):
    p = cli(fake, "wait", "--help", socket=False)
    assert p.returncode == 0
    for line in ["0    succeeded", "1    failed", "137  oom_killed", "124  timed_out",
                 "130  cancelled", "3    lost", "125  agentbox"]:
        assert line in p.stdout


# ---- reaching the daemon ---------------------------------------------------

def test_connection_refused(tmp_path):
    import socket
    path = str(tmp_path / "dead.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)  # bound, never listening: connect is refused
    try:
        for verb in (["status", T1], ["ps"], ["wait", T1], ["logs", T1], ["cancel", T1],
                     ["submit", "--", "true"]):
            p = subprocess.run([AGENTBOX, verb[0], "--socket", path, *verb[1:]],
                               capture_output=True, text=True, timeout=30)
            assert p.returncode == 125, (verb, p.stderr)
            assert one_line_error(p, verb[0]) == (
                f"agentbox: {verb[0]}: cannot reach agentboxd at {path}: "
                "Connection refused (is it running?)")
    finally:
        s.close()


def test_default_socket_and_agentbox_host(fake, tmp_path):
    env = dict(os.environ)
    env.pop("AGENTBOX_HOST", None)
    p = subprocess.run([AGENTBOX, "status", T1], capture_output=True, text=True, env=env,
                       timeout=30)
    if not os.path.exists("/run/agentbox/agentbox.sock"):
        assert p.returncode == 125
        assert "cannot reach agentboxd at /run/agentbox/agentbox.sock" in p.stderr
    fake.add_task(T1, status="queued")
    p = cli(fake, "status", T1, socket=False, env={"AGENTBOX_HOST": fake.path})
    assert p.returncode == 0, p.stderr
    p = cli(fake, "status", T1, socket=False, env={"AGENTBOX_HOST": "example.com:80"})
    assert p.returncode == 125
    assert "AGENTBOX_HOST: 'example.com:80'" in one_line_error(p, "status")


def test_tcp_with_token(tmp_path):
    """AGENTBOX_HOST=host:port speaks TCP and sends AGENTBOX_TOKEN as a bearer token."""
    import http.server
    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(dict(self.headers))
            if self.headers.get("Authorization") != "Bearer s3cret":
                body = json.dumps({"error": {"code": "unauthorized",
                                             "message": "this API needs a token"}}).encode()
                self.send_response(401)
            else:
                body = json.dumps(fakedaemon.make_task(T1)).encode()
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    hostport = f"127.0.0.1:{srv.server_address[1]}"
    try:
        env = dict(os.environ, AGENTBOX_HOST=hostport, AGENTBOX_TOKEN="s3cret")
        p = subprocess.run([AGENTBOX, "status", T1], capture_output=True, text=True, env=env,
                           timeout=30)
        assert p.returncode == 0, p.stderr
        assert seen[-1]["Host"] == hostport
        env.pop("AGENTBOX_TOKEN")
        p = subprocess.run([AGENTBOX, "status", T1], capture_output=True, text=True, env=env,
                           timeout=30)
        assert p.returncode == 125
        assert p.stderr == ("agentbox: status: AGENTBOX_KEY is not set: "
                            "this API needs a token (unauthorized)\n")
    finally:
        srv.shutdown()
        srv.server_close()


def test_non_json_error_answer(fake):
    def broken(self, req):
        self.send_response(502, "Bad Gateway")
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"oops\n")

    fakedaemon._Handler._route, saved = broken, fakedaemon._Handler._route
    try:
        p = cli(fake, "status", T1)
    finally:
        fakedaemon._Handler._route = saved
    assert p.returncode == 125
    assert one_line_error(p, "status") == (
        f"agentbox: status: agentboxd at {fake.path} answered 502 Bad Gateway")
