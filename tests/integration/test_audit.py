"""The audit log against the real daemon over TCP with real keys
(docs/api.md, "GET /v1/audit"): a member's creates, another tenant's 404,
a revocation, a flood of bad keys counted in one row, the filters, the
member's 403, `agentbox audit --json` showing the same rows, and a walk of
the database that finds no secret in it.
"""
import http.client
import json
import os
import socket
import sqlite3
import subprocess

import pytest

import helpers
from conftest import BUILD
from daemon import Daemon

AGENTBOX = os.path.join(BUILD, "src", "cli", "agentbox")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tcp:
    """One key's client over TCP, a connection per request."""

    def __init__(self, port, key):
        self.port, self.key = port, key

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        h.update(headers or {})
        data = json.dumps(body).encode() if body is not None else None
        if body is not None:
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        return r.status, json.loads(payload) if payload else None


@pytest.fixture
def world(tmp_path):
    port = free_port()
    # room for the test's twenty bad keys and one revoked before failed auths are limited
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--pool", "1",
               "--auth-fail-burst", "100").start()
    try:
        admin = Tcp(port, d.admin_key())
        keys = {}
        for name in ("team-a", "team-b"):
            assert admin.request("POST", "/v1/tenants", {"name": name})[0] == 201
            status, k = admin.request("POST", "/v1/keys", {"tenant": name})
            assert status == 201
            keys[name] = k
        yield d, admin, Tcp(port, keys["team-a"]["key"]), Tcp(port, keys["team-b"]["key"]), keys
    finally:
        d.stop()


def audit(client, query=""):
    status, body = client.request("GET", "/v1/audit" + ("?" + query if query else ""))
    assert status == 200, body
    return body["entries"]


def settled(client, wanted, query="limit=1000"):
    """The log once it holds a row for each (method, route, status) of wanted: a
    request's row is written once its answer is sent, so it may trail the answer."""
    def rows():
        r = audit(client, query)
        have = {(e["method"], e["route"], e["status"]) for e in r}
        return r if all(w in have for w in wanted) else None
    assert helpers.wait_until(rows, 30, 0.02), wanted
    return rows()


def test_the_audit_log(world, tmp_path):
    d, admin, a, b, keys = world
    # a row is written once its answer is sent: rows of requests close together
    # may be recorded (and numbered) in either order; their times say which came first
    assert helpers.wait_until(lambda: len(audit(admin, "limit=1000")) == 4, 30, 0.02)
    before = audit(admin, "limit=1000")
    assert sorted((e["method"], e["route"], e["status"]) for e in before) == sorted([
        ("POST", "/v1/tenants", 201), ("POST", "/v1/keys", 201),
        ("POST", "/v1/tenants", 201), ("POST", "/v1/keys", 201)])

    # a member makes a task and a sandbox; reads are not recorded
    status, task = a.request("POST", "/v1/tasks", {"command": ["true"]})
    assert status == 201
    status, sb = a.request("POST", "/v1/sandboxes", {})
    assert status == 201
    assert a.request("GET", f"/v1/tasks/{task['id']}")[0] == 200
    assert a.request("GET", "/v1/sandboxes")[0] == 200
    # another tenant's id: 404, recorded with the id it named
    assert b.request("POST", f"/v1/tasks/{task['id']}/cancel")[0] == 404
    assert b.request("DELETE", f"/v1/sandboxes/{sb['id']}")[0] == 404
    # a query and a path that carry a secret: refused, and neither is kept
    secret_query = "s3cr3t-in-a-query-4f1d2c"
    assert a.request("POST", f"/v1/tasks?token={secret_query}", {"command": ["true"]})[0] == 400
    secret_path = "sbx_s3cr3tinapath00000000000000000"
    assert a.request("DELETE", f"/v1/sandboxes/{secret_path}")[0] == 400
    # a secret value in a body: taken or refused, it never goes into the store
    secret_value = "sv-7c0ffee-not-for-the-store"
    status, _ = a.request("POST", "/v1/tasks", {
        "command": ["true"], "network": {"mode": "allow", "allow": ["api.example.test"]},
        "secrets": {"API_TOKEN": {"value": secret_value, "hosts": ["api.example.test"]}}})
    assert status in (201, 503)
    # the owner execs in its sandbox and deletes it
    status, ran = a.request("POST", f"/v1/sandboxes/{sb['id']}/exec", {"command": ["true"]})
    assert status == 200 and ran["exit_code"] == 0, ran
    assert a.request("DELETE", f"/v1/sandboxes/{sb['id']}")[0] == 200
    # the admin revokes B's key; B's next request is refused, counted with its id
    assert admin.request("DELETE", f"/v1/keys/{keys['team-b']['id']}")[0] == 200
    assert b.request("GET", "/v1/me")[0] == 401
    # twenty bad keys: one row, count 20, from 127.0.0.1
    forged = "abx_" + keys["team-a"]["id"] + "_" + "a" * 52
    bad = Tcp(a.port, forged)
    for i in range(20):
        assert bad.request("POST" if i % 2 else "GET", "/v1/tasks", {"command": ["x"]})[0] == 401

    rows = settled(admin, [("POST", "/v1/sandboxes/{id}/exec", 200),
                           ("DELETE", "/v1/sandboxes/{id}", 200), ("DELETE", "/v1/keys/{id}", 200),
                           ("POST", "/v1/tasks/{id}/cancel", 404), ("POST", "/v1/tasks", 400),
                           ("DELETE", "/v1/sandboxes/{id}", 400), ("POST", "/v1/tasks", 201)])
    new = rows[:len(rows) - len(before)]
    refused = [e for e in new if e["status"] == 401]
    assert [(e["reason"], e["count"]) for e in refused] == [("unknown_key", 20),
                                                            ("revoked_key", 1)]
    assert refused[0]["source"] == "127.0.0.1" and refused[0]["key_id"] is None
    assert refused[0]["route"] is None and refused[0]["tenant"] is None
    assert refused[1]["key_id"] == keys["team-b"]["id"]
    req = [e for e in new if e["status"] != 401]
    by = {(e["method"], e["route"], e["status"]): e for e in req}
    create = by[("POST", "/v1/tasks", 201)]
    assert create["tenant"] == "team-a" and create["key_id"] == keys["team-a"]["id"]
    assert create["target"] == task["id"] and create["source"] == "127.0.0.1"
    assert create["count"] == 1 and create["uid"] is None and create["error"] is None
    assert by[("POST", "/v1/sandboxes", 201)]["target"] == sb["id"]
    cancel = by[("POST", "/v1/tasks/{id}/cancel", 404)]
    assert cancel["tenant"] == "team-b" and cancel["target"] == task["id"]
    assert cancel["error"] == "not_found"
    assert by[("DELETE", "/v1/sandboxes/{id}", 404)]["target"] == sb["id"]
    assert by[("POST", "/v1/tasks", 400)]["error"] == "unknown_field"
    assert by[("DELETE", "/v1/sandboxes/{id}", 400)]["target"] is None
    # a create, an exec and a delete: each once, with its tenant and key
    for route in (("POST", "/v1/sandboxes", 201), ("POST", "/v1/sandboxes/{id}/exec", 200),
                  ("DELETE", "/v1/sandboxes/{id}", 200)):
        once = [e for e in req if (e["method"], e["route"], e["status"]) == route]
        assert len(once) == 1, (route, once)
        assert once[0]["tenant"] == "team-a" and once[0]["key_id"] == keys["team-a"]["id"]
        assert once[0]["target"] == sb["id"], once
    revoke = by[("DELETE", "/v1/keys/{id}", 200)]
    assert revoke["target"] == keys["team-b"]["id"] and revoke["tenant"] == "default"
    assert not any(e["method"] == "GET" for e in new)
    ids = [e["id"] for e in rows]
    assert ids == sorted(ids, reverse=True)  # the last recorded first

    # filters: tenant, route (exact, prefix, a method), time
    assert {e["tenant"] for e in audit(admin, "tenant=team-a")} == {"team-a"}
    assert {e["tenant"] for e in audit(admin, "tenant=team-b")} == {"team-b"}
    exact = audit(admin, "route=POST%20/v1/tasks")
    assert {(e["route"], e["tenant"]) for e in exact} == {("/v1/tasks", "team-a")}
    assert len(exact) == 3  # the create, the bad query, the secrets
    assert {e["route"] for e in audit(admin, "route=/v1/tasks*")} == {"/v1/tasks",
                                                                     "/v1/tasks/{id}/cancel"}
    assert {e["method"] for e in audit(admin, "route=DELETE")} == {"DELETE"}
    since = audit(admin, f"since={create['time']}")
    assert create["id"] in [e["id"] for e in since]
    assert all(e["time"] >= create["time"] for e in since)
    until = audit(admin, f"until={create['time']}")
    assert create["id"] not in [e["id"] for e in until]
    assert all(e["time"] < create["time"] for e in until)
    # paging: two at a time, following next, gives the same rows
    paged, after = [], ""
    while True:
        status, page = admin.request("GET", "/v1/audit?limit=2" + after)
        paged += page["entries"]
        if page["next"] is None:
            break
        after = f"&after={page['next']}"
    assert [e["id"] for e in paged] == ids

    # a member may not read it
    status, body = a.request("GET", "/v1/audit")
    assert status == 403 and body["error"]["code"] == "forbidden"

    # agentbox audit --json shows the same rows; the table shows them too
    env = dict(os.environ, AGENTBOX_HOST=f"127.0.0.1:{a.port}", AGENTBOX_KEY=admin.key)
    env.pop("AGENTBOX_TOKEN", None)
    p = subprocess.run([AGENTBOX, "audit", "--json", "--limit", "1000"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == audit(admin, "limit=1000")
    p = subprocess.run([AGENTBOX, "audit", "--tenant", "team-b", "--route", "/v1/tasks*",
                        "--since", "1h", "--json"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert [e["id"] for e in json.loads(p.stdout)] == [cancel["id"]]
    p = subprocess.run([AGENTBOX, "audit", "--limit", "3"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:3] == ["TIME", "STATUS", "COUNT"] and len(lines) == 4
    assert "401 unknown_key" in p.stdout and "20" in p.stdout and "127.0.0.1" in p.stdout
    p = subprocess.run([AGENTBOX, "audit"], capture_output=True, text=True,
                       env=dict(env, AGENTBOX_KEY=keys["team-a"]["key"]), timeout=60)
    assert p.returncode == 125 and "forbidden" in p.stderr

    # the database holds no key's text or secret, and no secret the requests carried
    db = sqlite3.connect(f"file:{d.state / 'agentbox.db'}?mode=ro", uri=True)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "audit" in tables
    needles = [secret_query, secret_path, secret_value, forged, forged.split("_")[2]]
    for k in keys.values():
        needles += [k["key"], k["key"].split("_")[2]]
    seen = 0
    for t in tables:
        for row in db.execute(f'SELECT * FROM "{t}"'):
            for v in row:
                text = v.decode("latin-1") if isinstance(v, bytes) else str(v)
                seen += 1
                for n in needles:
                    assert n not in text, (t, n)
    db.close()
    assert seen > 100


def test_retention_is_bounded(tmp_path):
    """agentboxd --audit-rows 50: past fifty rows the oldest go, whatever is sent."""
    d = Daemon(tmp_path, "--audit-rows", "50").start()
    try:
        for i in range(80):
            status, _ = d.request("POST", f"/v1/tasks/tsk_{i:026d}/cancel")
            assert status in (400, 404)
        def newest():
            rows = d.request("GET", "/v1/audit?limit=1000")[1]["entries"]
            return rows if rows and rows[0]["id"] == 80 else None
        assert helpers.wait_until(newest, 30, 0.02)
        rows = newest()
        assert 40 <= len(rows) <= 50, len(rows)
        ids = [e["id"] for e in rows]
        assert max(ids) == 80 and min(ids) > 30, ids  # the newest kept, the oldest gone
    finally:
        d.stop()
    for bad in ("0", "1000001", "lots"):
        p = subprocess.run([os.path.join(BUILD, "src", "daemon", "agentboxd"), "--audit-rows",
                            bad], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--audit-rows" in p.stderr, (bad, p.stderr)
