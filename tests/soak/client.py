"""The well-behaved client of the soak test, in a process of its own.

It runs beside the attacks (tests/soak/attacks.py) for the whole soak, on
the daemon's unix socket, one request at a time, in a loop:
GET /healthz; POST /v1/sandboxes with the default limits (the warm pool);
EXECS_PER_SANDBOX blocking execs of `echo ok`; DELETE the sandbox; and
every TASK_EVERY_S a small task, whose end it checks after the loop
(status succeeded, exit 0, its progress, its exact output). It times each
request from connect to the last byte of the answer.

A process of its own, so that its timings owe nothing to the attackers'
threads (one interpreter lock) in the test's process.

    python3 client.py SOCKET DURATION_S OUT.json
"""
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conftest  # noqa: E402,F401 - the soak's: puts tests/integration on sys.path
from daemon import UnixHTTPConnection  # noqa: E402

EXECS_PER_SANDBOX = 4
TASK_EVERY_S = 1.0
TASK_MEMORY_MB = 64       # the host's memory total counts running tasks too
PAUSE_S = 0.2             # between two rounds: a client, not a load generator
TASKS_DEADLINE_S = 180    # for every task to end once the loop is over
FINAL = {"succeeded", "failed", "oom_killed", "timed_out", "cancelled", "lost"}


class Client:
    def __init__(self, socket_path):
        self.socket = socket_path
        self.times = {"healthz": [], "create": [], "exec": [], "delete": [], "submit": []}
        self.errors = []
        self.error_kinds = collections.Counter()
        self.tasks = []  # (id, n)
        self.slow = []   # (seconds into the soak, what, ms, the daemon's duration_ms)
        self.t0 = time.monotonic()

    def call(self, method, path, body=None, timeout=60):
        """(status, body, seconds) of one request on a new connection."""
        data = None if body is None else json.dumps(body).encode()
        t0 = time.perf_counter()
        conn = UnixHTTPConnection(self.socket, timeout=timeout)
        try:
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json"} if data else {})
            resp = conn.getresponse()
            payload = resp.read()
        finally:
            conn.close()
        took = time.perf_counter() - t0
        ctype = resp.getheader("Content-Type") or ""
        return resp.status, (json.loads(payload) if "json" in ctype else payload.decode()), took

    def expect(self, what, ok, detail, took=None):
        """Record an error, or the time of an answer as it should be (a
        refusal in no time is not a fast answer)."""
        if not ok:
            self.errors.append(f"{what}: {detail}"[:500])
            status, body = detail[-2:]
            code = None
            if isinstance(body, dict):  # an error's code, or a task's status
                code = body["error"].get("code") if "error" in body else body.get("status")
            self.error_kinds[f"{what}: {status} {code or ''}".strip()] += 1
        elif took is not None:
            self.times[what].append(took)
        return ok

    def round(self, n, submit):
        status, body, took = self.call("GET", "/healthz")
        self.expect("healthz", status == 200 and body == {"status": "ok"}, (status, body), took)
        status, body, took = self.call("POST", "/v1/sandboxes", {})
        if not self.expect("create", status == 201, (status, body), took):
            return
        sid = body["id"]
        for _ in range(EXECS_PER_SANDBOX):
            status, r, took = self.call("POST", f"/v1/sandboxes/{sid}/exec",
                                        {"command": ["echo", "ok"]})
            ok = self.expect("exec", status == 200 and r.get("exit_code") == 0
                             and r.get("stdout") == "ok\n" and r.get("stderr") == "",
                             (status, r), took)
            if ok and took > 0.1:
                self.slow.append((round(time.monotonic() - self.t0, 2), "exec",
                                  round(took * 1e3, 1), r.get("duration_ms")))
        status, body, took = self.call("DELETE", f"/v1/sandboxes/{sid}")
        self.expect("delete", status == 200 and body.get("status") == "ended", (status, body),
                    took)
        if submit:
            cmd = ["sh", "-c", 'printf \'{"n": %s}\\n\' "$1" > "$AGENTBOX_PROGRESS"; '
                   'echo "soak task $1"', "sh", str(n)]
            status, t, took = self.call("POST", "/v1/tasks",
                                        {"command": cmd, "limits": {"memory_mb": TASK_MEMORY_MB}})
            if self.expect("submit", status == 201, (status, t), took):
                self.tasks.append((t["id"], n))

    def check_tasks(self):
        """Every task ends succeeded, with its progress and its output."""
        deadline = time.monotonic() + TASKS_DEADLINE_S
        pending = list(self.tasks)
        while pending and time.monotonic() < deadline:
            still = []
            for tid, n in pending:
                status, t, _ = self.call("GET", f"/v1/tasks/{tid}")
                if status == 200 and t["status"] not in FINAL:
                    still.append((tid, n))
                    continue
                if not self.expect("task", status == 200 and t["status"] == "succeeded"
                                   and t["exit_code"] == 0 and t["progress"] == {"n": n},
                                   (tid, status, t)):
                    continue
                status, logs, _ = self.call("GET", f"/v1/tasks/{tid}/logs")
                self.expect("task logs", status == 200 and logs == f"soak task {n}\n",
                            (tid, status, logs[:200]))
            pending = still
            if pending:
                time.sleep(0.2)
        for tid, _ in pending:
            self.errors.append(f"task {tid} not ended {TASKS_DEADLINE_S} s after the soak")
        return len(self.tasks) - len(pending)


def main():
    socket_path, duration, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    c = Client(socket_path)
    t0 = time.monotonic()
    deadline = t0 + duration
    next_task, n = t0, 0
    while time.monotonic() < deadline:
        n += 1
        submit = time.monotonic() >= next_task
        if submit:
            next_task += TASK_EVERY_S
        try:
            c.round(n, submit)
        except (OSError, ValueError) as e:  # refused, reset, timed out, not JSON
            c.errors.append(f"round {n}: {e!r}")
        time.sleep(PAUSE_S)
    loop_s = time.monotonic() - t0
    try:
        ended = c.check_tasks()
    except (OSError, ValueError) as e:
        c.errors.append(f"checking the tasks: {e!r}")
        ended = 0
    with open(out, "w") as f:
        json.dump({"rounds": n, "loop_s": loop_s, "times": c.times, "errors": c.errors,
                   "tasks": len(c.tasks), "tasks_ended": ended, "slow": c.slow,
                   "error_kinds": c.error_kinds,
                   "cpu_s": sum(os.times()[:2])}, f)


if __name__ == "__main__":
    main()
