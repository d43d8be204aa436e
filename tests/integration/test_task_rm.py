"""Removing ended tasks, and retention, against the real daemon (docs/api.md,
`DELETE /v1/tasks/{id}`; docs/cli.md, `agentbox rm` and `agentboxd
--retain`): a removed task leaves no row in the database (read directly,
read-only) and no file under the state directory (walked), its id is 404
after; a task that has not ended is 409 and stays; another tenant's is 404;
`agentbox rm BAD GOOD` removes nothing; a directory no task names is
removed at the start; `--retain` removes ended tasks and sandbox records
past it, and keeps running ones and those that ended more recently.
"""
import datetime
import os
import sqlite3
import subprocess
import time

import pytest

from conftest import AGENTBOX
from daemon import AGENTBOXD, Daemon

FINAL = {"succeeded", "failed", "oom_killed", "timed_out", "cancelled", "lost"}
# a task that leaves something in every place a task's files go: output, progress, /state
WRITER = ["sh", "-c", "echo hello; echo '{\"step\":1}' > \"$AGENTBOX_PROGRESS\"; "
          "echo kept > /state/f"]
DEADLINE_S = 60


def db_rows_naming(state, tid, pk):
    """Rows of every table (but the audit log) that name task tid or its pk."""
    db = sqlite3.connect(f"file:{state}/agentbox.db?mode=ro", uri=True)
    try:
        found = []
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert {"tasks", "task_specs", "events"} <= set(tables)
        for table in tables:
            if table == "audit":  # the log of requests keeps its own rows (--audit-rows)
                continue
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            for row in db.execute(f"SELECT * FROM {table}"):
                named = dict(zip(cols, row))
                if any(isinstance(v, str) and tid in v for v in row) or \
                        named.get("task_pk") == pk:
                    found.append((table, row))
        return found
    finally:
        db.close()


def task_pk(state, tid):
    db = sqlite3.connect(f"file:{state}/agentbox.db?mode=ro", uri=True)
    try:
        row = db.execute("SELECT pk FROM tasks WHERE id = ?", (tid,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


def paths_naming(state, name):
    """Every path under the state directory with name in it."""
    out = []
    for root, dirs, files in os.walk(state):
        out += [os.path.join(root, n) for n in dirs + files if name in os.path.join(root, n)]
    return out


def wait_status(d, tid, want, timeout=DEADLINE_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = d.task(tid)
        if t["status"] in want:
            return t
        time.sleep(0.05)
    raise AssertionError(f"task {tid} is {t['status']}, not {want}, after {timeout} s")


def rm(d, *ids):
    return subprocess.run([AGENTBOX, "rm", "--socket", d.socket, *ids], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("rm")).start()
    yield d
    d.stop()


def test_rm_leaves_no_row_and_no_file(daemon):
    tid = daemon.submit(command=WRITER)
    t = daemon.wait_all([tid])[tid]
    assert t["status"] == "succeeded", t
    assert daemon.events(tid)
    pk = task_pk(daemon.state, tid)
    assert pk is not None and db_rows_naming(daemon.state, tid, pk)
    files = paths_naming(daemon.state, tid)
    assert any(p.endswith("state.img") for p in files), files
    assert any(p.endswith("output") for p in files), files

    p = rm(daemon, tid)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"{tid}\n"
    assert db_rows_naming(daemon.state, tid, pk) == []
    assert paths_naming(daemon.state, tid) == []
    for suffix in ("", "/events", "/logs"):
        status, body = daemon.request("GET", f"/v1/tasks/{tid}{suffix}")
        assert status == 404 and body["error"]["code"] == "not_found", (suffix, body)
    p = rm(daemon, tid)  # again: it is gone
    assert p.returncode == 125 and "not_found" in p.stderr, p.stderr


def cancel(d, tid):
    """Cancel tid (a test's own, whatever happened) and wait for its end."""
    d.request("POST", f"/v1/tasks/{tid}/cancel")
    wait_status(d, tid, FINAL)


def test_rm_of_a_task_not_ended_is_409(daemon):
    tid = daemon.submit(command=["sleep", "100"])
    try:
        wait_status(daemon, tid, {"running"})
        status, body = daemon.request("DELETE", f"/v1/tasks/{tid}")
        assert status == 409 and body["error"]["code"] == "conflict", body
        assert "cancel it first" in body["error"]["message"]
        p = rm(daemon, tid)
        assert p.returncode == 125 and "cancel it first" in p.stderr and p.stdout == ""
        assert daemon.task(tid)["status"] == "running"
        assert paths_naming(daemon.state, tid)
    finally:
        cancel(daemon, tid)
    status, body = daemon.request("DELETE", f"/v1/tasks/{tid}")
    assert status == 200 and body == {"id": tid, "deleted": True}, body
    assert paths_naming(daemon.state, tid) == []


def test_rm_of_another_tenants_task_is_404(daemon):
    tid = daemon.submit(command=["true"])
    daemon.wait_all([tid])
    assert daemon.request("POST", "/v1/tenants", {"name": "rm-other"})[0] == 201
    status, key = daemon.request("POST", "/v1/keys", {"tenant": "rm-other"})
    assert status == 201, key
    other = {"Authorization": f"Bearer {key['key']}"}
    theirs = daemon.request("DELETE", f"/v1/tasks/{tid}", headers=other)
    none = daemon.request("DELETE", "/v1/tasks/tsk_0000000000000000000000000a", headers=other)
    assert theirs[0] == none[0] == 404
    assert theirs[1]["error"]["message"].replace(tid, "#") == \
        none[1]["error"]["message"].replace("tsk_0000000000000000000000000a", "#")
    assert daemon.task(tid)["status"] == "succeeded"
    assert paths_naming(daemon.state, tid)
    # its own tenant's member may
    status, mine = daemon.request("POST", "/v1/keys", {"tenant": "rm-other"})
    own = daemon.request("POST", "/v1/tasks", {"command": ["true"]},
                         headers={"Authorization": f"Bearer {mine['key']}"})
    assert own[0] == 201, own
    daemon.wait_all([own[1]["id"]])
    assert daemon.request("DELETE", f"/v1/tasks/{own[1]['id']}", headers=other)[0] == 200


def test_rm_checks_every_id_first(daemon):
    good = daemon.submit(command=["true"])
    daemon.wait_all([good])
    for bad in ("tsk_x", "sbx_0000000000000000000000000a", "../x"):
        p = rm(daemon, bad, good)
        assert p.returncode == 125, p
        assert p.stdout == "" and "not a task id" in p.stderr, p.stderr
        assert daemon.task(good)["status"] == "succeeded"
    other = daemon.submit(command=["true"])
    daemon.wait_all([other])
    p = rm(daemon, good, other)
    assert p.returncode == 0 and p.stdout == f"{good}\n{other}\n", p


def test_start_removes_directories_no_task_names(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        kept = d.submit(command=WRITER)
        d.wait_all([kept])
    finally:
        d.stop()
    # what a stop between a removal's rows and its files leaves
    orphan = "tsk_0000000000000000000000000b"
    os.makedirs(d.state / "tasks" / orphan / "attempt-1")
    (d.state / "tasks" / orphan / "attempt-1" / "output").write_text("left\n")
    (d.state / "tasks" / orphan / "state.img").write_bytes(b"\0" * 4096)
    d.start()
    try:
        # the sweep runs before the socket answers: no wait needed
        assert paths_naming(d.state, orphan) == []
        assert paths_naming(d.state, kept)
        assert d.task(kept)["status"] == "succeeded"
    finally:
        d.stop()


RETAIN_S = 3


def rfc3339_ms(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def test_retain_removes_what_ended_past_it(tmp_path):
    d = Daemon(tmp_path, "--retain", f"{RETAIN_S}s").start()
    running = None
    try:
        running = d.submit(command=["sleep", "100"])
        wait_status(d, running, {"running"})
        live_sb = d.create_sandbox()
        ended_sb = d.create_sandbox()
        assert d.request("DELETE", f"/v1/sandboxes/{ended_sb}")[0] == 200
        old = d.submit(command=WRITER)
        d.wait_all([old])
        pk = task_pk(d.state, old)

        # it goes, and never before RETAIN_S has passed since it ended (the
        # daemon's wall clock is ours)
        ended_ms = rfc3339_ms(d.task(old)["finished_at"])
        deadline = time.monotonic() + DEADLINE_S
        while d.request("GET", f"/v1/tasks/{old}")[0] != 404:
            assert time.monotonic() < deadline, f"--retain {RETAIN_S}s kept {old}"
            time.sleep(0.1)
        assert time.time() * 1000 >= ended_ms + RETAIN_S * 1000
        assert db_rows_naming(d.state, old, pk) == []
        # the rows go first, then the files, right after
        while paths_naming(d.state, old):
            assert time.monotonic() < deadline, paths_naming(d.state, old)
            time.sleep(0.05)

        deadline = time.monotonic() + DEADLINE_S
        while d.request("GET", f"/v1/sandboxes/{ended_sb}")[0] != 404:
            assert time.monotonic() < deadline, f"--retain kept sandbox {ended_sb}"
            time.sleep(0.1)
        assert paths_naming(d.state, ended_sb) == []

        # what has not ended stays, however old
        assert d.task(running)["status"] == "running"
        assert paths_naming(d.state, running)
        status, sb = d.request("GET", f"/v1/sandboxes/{live_sb}")
        assert status == 200 and sb["status"] == "running", sb
    finally:
        if running:
            cancel(d, running)
        d.stop()


def test_retain_option_is_checked(tmp_path):
    for bad in ("0s", "500ms", "forever", "36501d", ""):
        p = subprocess.run([AGENTBOXD, "--retain", bad, "--state-dir", str(tmp_path / "s")],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--retain" in p.stderr, (bad, p.stderr)
