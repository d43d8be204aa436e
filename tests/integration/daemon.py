"""Start and talk to a real agentboxd for the integration suite."""
import http.client
import json
import os
import signal
import socket
import subprocess
import time

from conftest import BUILD

AGENTBOXD = os.path.join(BUILD, "src", "daemon", "agentboxd")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


START_TIMEOUT_S = 30


class Daemon:
    """One agentboxd on a private socket and state dir."""

    def __init__(self, tmp_path, *args):
        self.state = tmp_path / "state"
        self.socket = str(tmp_path / "agentbox.sock")
        self.args = list(args)
        if "--pool" not in self.args:
            self.args += ["--pool", "0"]  # warm sandboxes only where a test asks for them
        self.proc = None
        self.prefix = []  # e.g. nsenter into a test's network namespace
        self.log = open(tmp_path / "agentboxd.log", "ab")

    def admin_key(self):
        """A new admin key of the default tenant (agentboxd --print-token), its text."""
        return subprocess.run([AGENTBOXD, "--print-token", "--state-dir", str(self.state)],
                              capture_output=True, text=True, check=True).stdout.strip()

    def start(self):
        self.proc = subprocess.Popen([*self.prefix, AGENTBOXD, "--socket", self.socket,
                                      "--state-dir", str(self.state), *self.args],
                                     stdout=self.log, stderr=self.log)
        # a bound on liveness, not on speed: a restart among twenty running tasks
        # under the guest's emulation (tests/vm/run, tcg) has taken over 10 s
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return self
            except OSError:
                pass
            assert self.proc.poll() is None, f"agentboxd exited {self.proc.returncode}"
            time.sleep(0.02)
        raise AssertionError(f"agentboxd did not answer /healthz within {START_TIMEOUT_S} s")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            # sandboxes outlive the daemon by design: a test ends its own
            for sb in self.sandboxes():
                self.request("DELETE", f"/v1/sandboxes/{sb['id']}")
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def sandboxes(self, status="running,paused"):
        out, after = [], ""
        while True:
            status_, body = self.request("GET", f"/v1/sandboxes?status={status}&limit=1000"
                                         + (f"&after={after}" if after else ""))
            assert status_ == 200, body
            out += body["sandboxes"]
            if not body["next"]:
                return out
            after = body["next"]

    def create_sandbox(self, **req):
        status, body = self.request("POST", "/v1/sandboxes", req)
        assert status == 201, body
        return body["id"]

    def exec(self, sid, command, **req):
        status, body = self.request("POST", f"/v1/sandboxes/{sid}/exec",
                                    {"command": command, **req}, timeout=120)
        assert status == 200, body
        return body

    def request(self, method, path, body=None, headers=None, timeout=30, raw=False):
        conn = UnixHTTPConnection(self.socket, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        if raw:
            return resp.status, payload, resp
        ctype = resp.getheader("Content-Type") or ""
        return resp.status, json.loads(payload) if "json" in ctype else payload.decode()

    def submit(self, **task):
        status, body = self.request("POST", "/v1/tasks", task)
        assert status == 201, body
        return body["id"]

    def task(self, tid):
        status, body = self.request("GET", f"/v1/tasks/{tid}")
        assert status == 200, body
        return body

    def events(self, tid):
        out, after = [], 0
        while True:
            status, body = self.request("GET", f"/v1/tasks/{tid}/events?after={after}&limit=1000")
            assert status == 200, body
            if not body["events"]:
                return out
            out += body["events"]
            after = body["events"][-1]["seq"]

    def wait_all(self, ids, timeout=120, on_poll=None):
        deadline = time.monotonic() + timeout
        final = {"succeeded", "failed", "oom_killed", "timed_out", "cancelled", "lost"}
        while time.monotonic() < deadline:
            if on_poll:
                on_poll()
            tasks = {tid: self.task(tid) for tid in ids}
            if all(t["status"] in final for t in tasks.values()):
                return tasks
            time.sleep(0.2)
        raise AssertionError(f"tasks not final after {timeout}s: "
                             f"{ {t: v['status'] for t, v in tasks.items()} }")
