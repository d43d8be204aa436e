"""Tenants and API keys against the real daemon (docs/api.md, "Auth" and
"Tenancy"): two tenants, A and B, over TCP with keys (in clear, and with
TLS) and over the unix socket as local users; every route of B's against A's task or sandbox is
answered exactly as an unknown id; an admin sees both; revoked and expired
keys are refused at their next request; no key is kept in clear.
"""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

import helpers
from conftest import BUILD
from daemon import Daemon
from test_tls import pki  # noqa: F401 (a fixture: the test CA and 127.0.0.1's certificate)

AGENTBOX = os.path.join(BUILD, "src", "cli", "agentbox")
UID_B, UID_NOBODYS = 4242, 4343  # a local user mapped to team-b, and one mapped to nothing

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other local users)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tcp:
    """One key's client over TCP; with cacert (the CA's PEM file), over TLS."""

    def __init__(self, port, key, cacert=None):
        self.port, self.key, self.cacert = port, key, cacert
        self.url = f"{'https' if cacert else 'http'}://127.0.0.1:{port}"

    def request(self, method, path, body=None, headers=None, raw=None):
        if self.cacert:
            ctx = ssl.create_default_context(cafile=self.cacert)
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=30, context=ctx)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        if body is not None:
            h["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        try:
            return r.status, json.loads(payload) if payload else None
        except ValueError:
            return r.status, payload


@pytest.fixture(params=["tcp", "tls"])
def world(request, tmp_path):
    # the socket in a directory other users may reach (its ACL decides who connects)
    sockdir = tempfile.mkdtemp(prefix="agentbox-tenants-")
    os.chmod(sockdir, 0o755)
    port = free_port()
    tls, cacert = [], None
    if request.param == "tls":
        certs = request.getfixturevalue("pki")
        tls = ["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key")]
        cacert = str(certs / "ca.pem")
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--socket-user", f"{UID_B}=team-b",
               "--pool", "1", *tls)
    d.socket = os.path.join(sockdir, "agentbox.sock")
    d.start()
    try:
        admin = Tcp(port, d.admin_key(), cacert)
        assert admin.request("POST", "/v1/tenants", {"name": "team-a"})[0] == 201
        # team-b: made by agentboxd at its start, for --socket-user's local user
        assert admin.request("GET", "/v1/tenants/team-b")[0] == 200
        keys = {}
        for name in ("team-a", "team-b"):
            status, k = admin.request("POST", "/v1/keys", {"tenant": name, "label": name})
            assert status == 201 and k["key"].startswith("abx_") and k["role"] == "member"
            keys[name] = k
        yield (d, admin, Tcp(port, keys["team-a"]["key"], cacert),
               Tcp(port, keys["team-b"]["key"], cacert), keys)
    finally:
        # whatever a failure left: tasks outlive their daemon by design
        for t in d.request("GET", "/v1/tasks?status=queued,running")[1]["tasks"]:
            d.request("POST", f"/v1/tasks/{t['id']}/cancel")
        assert helpers.wait_until(
            lambda: not d.request("GET", "/v1/tasks?status=queued,running")[1]["tasks"], 30,
            0.1)
        d.stop()
        shutil.rmtree(sockdir, ignore_errors=True)


def routes_of(tid, sid):
    """Every route that names a task or a sandbox (and a pid in it)."""
    t, s = f"/v1/tasks/{tid}", f"/v1/sandboxes/{sid}"
    return [("GET", t, None), ("POST", f"{t}/cancel", None), ("GET", f"{t}/events", None),
            ("GET", f"{t}/logs", None), ("GET", f"{t}/logs?follow=1", None),
            ("GET", f"{t}/artifacts", None), ("GET", f"{t}/artifacts/workspace/x", None),
            ("GET", s, None), ("POST", f"{s}/timeout", {"timeout_s": 60}),
            ("POST", f"{s}/pause", None), ("POST", f"{s}/resume", None),
            ("POST", f"{s}/exec", {"command": ["true"]}), ("GET", f"{s}/processes", None),
            ("GET", f"{s}/network", None), ("GET", f"{s}/processes/1/output", None),
            ("POST", f"{s}/processes/1/kill", None), ("GET", f"{s}/files?path=/etc/hostname", None),
            ("DELETE", f"{s}/files?path=/tmp/x", None), ("DELETE", s, None)]


def same_404(client, route, known, unknown):
    """route with a known (someone else's) id and with an unknown one: the same 404."""
    method, path, body = route
    a = client.request(method, path, body)
    b = client.request(method, path.replace(known, unknown), body)
    assert a[0] == 404 and b[0] == 404, (route, a, b)
    assert a[1]["error"]["code"] == b[1]["error"]["code"] == "not_found"
    assert a[1]["error"]["message"].replace(known, "#") == \
        b[1]["error"]["message"].replace(unknown, "#"), (route, a, b)


def test_two_tenants_see_only_their_own(world):
    d, admin, a, b, keys = world
    status, task = a.request("POST", "/v1/tasks", {"command": ["sleep", "30"]})
    assert status == 201 and task["tenant"] == "team-a"
    status, sb = a.request("POST", "/v1/sandboxes", {})
    assert status == 201 and sb["tenant"] == "team-a"
    tid, sid = task["id"], sb["id"]
    unknown_t, unknown_s = "tsk_" + "0" * 26, "sbx_" + "0" * 26

    # B, over TCP: every route of A's is 404, word for word as an unknown id's
    for route in routes_of(tid, sid):
        same_404(b, route, tid if "/tasks/" in route[1] else sid,
                 unknown_t if "/tasks/" in route[1] else unknown_s)
    # PUT of a file too (the raw-body route is checked before its body)
    r1 = b.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/x", raw=b"hi",
                   headers={"Content-Type": "application/octet-stream"})
    r2 = b.request("PUT", f"/v1/sandboxes/{unknown_s}/files?path=/tmp/x", raw=b"hi",
                   headers={"Content-Type": "application/octet-stream"})
    assert r1[0] == r2[0] == 404
    # and the event stream
    status, _ = b.request("GET", f"/v1/tasks/{tid}/events", headers={"Accept": "text/event-stream"})
    assert status == 404
    # lists: nothing of A's, whatever B asks for
    assert b.request("GET", "/v1/tasks")[1]["tasks"] == []
    assert b.request("GET", "/v1/tasks?tenant=team-a")[1]["tasks"] == []
    assert b.request("GET", "/v1/sandboxes")[1]["sandboxes"] == []
    # no admin route for a member
    assert b.request("GET", "/v1/tenants")[0] == 403
    assert b.request("POST", "/v1/keys", {"tenant": "team-b"})[0] == 403
    assert b.request("GET", "/v1/me")[1]["tenant"] == "team-b"

    # A still has all of it (nothing above touched it)
    status, body = a.request("POST", f"/v1/sandboxes/{sid}/exec", {"command": ["echo", "mine"]})
    assert status == 200 and body["stdout"] == "mine\n"
    assert a.request("GET", f"/v1/tasks/{tid}")[1]["status"] in ("queued", "running")
    assert [t["id"] for t in a.request("GET", "/v1/tasks")[1]["tasks"]] == [tid]

    # an admin sees both tenants', or one's
    assert tid in [t["id"] for t in admin.request("GET", "/v1/tasks")[1]["tasks"]]
    assert admin.request("GET", "/v1/tasks?tenant=team-b")[1]["tasks"] == []
    assert admin.request("GET", f"/v1/sandboxes/{sid}")[1]["tenant"] == "team-a"
    # root on the unix socket is an admin
    assert d.request("GET", f"/v1/tasks/{tid}")[0] == 200

    # B as a local user on the unix socket: the same walls
    def as_b(*args, uid=UID_B):
        return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, user=uid,
                              group=uid, timeout=60,
                              env={"PATH": os.environ["PATH"], "AGENTBOX_HOST": d.socket})
    p = as_b("whoami", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["tenant"] == "team-b" and json.loads(p.stdout)["uid"] == UID_B
    for args in (["status", tid], ["sandbox", "inspect", sid], ["exec", sid, "--", "true"]):
        p = as_b(*args)
        assert p.returncode != 0 and "no " in p.stderr and "not_found" in p.stderr, (args, p)
    # a local user no --socket-user names cannot even connect: the socket's ACL
    p = as_b("whoami", uid=UID_NOBODYS)
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr

    assert a.request("POST", f"/v1/tasks/{tid}/cancel")[0] == 200
    assert a.request("DELETE", f"/v1/sandboxes/{sid}")[0] == 200


def test_keys_revoked_and_expired_are_refused_at_once(world):
    d, admin, a, b, keys = world
    assert a.request("GET", "/v1/me")[0] == 200
    status, k = admin.request("DELETE", f"/v1/keys/{keys['team-a']['id']}")
    assert status == 200 and k["revoked_at"]
    status, body = a.request("GET", "/v1/me")
    assert status == 401 and body["error"]["code"] == "unauthorized"
    # expiry: refused from its time on, with no cache in between
    status, short = admin.request("POST", "/v1/keys", {"tenant": "team-b", "expires_in_s": 1})
    assert status == 201
    c = Tcp(a.port, short["key"], a.cacert)
    first = c.request("GET", "/v1/me")[0]
    assert first in (200, 401)  # a slow machine may be past the second already
    assert helpers.wait_until(lambda: c.request("GET", "/v1/me")[0] == 401, 10, 0.1)
    # keys listed never show a secret; a tenant with a live key stays
    listed = admin.request("GET", "/v1/keys?tenant=team-b")[1]["keys"]
    assert {k["id"] for k in listed} == {keys["team-b"]["id"], short["id"]}
    assert all("key" not in k for k in listed)
    assert admin.request("DELETE", "/v1/tenants/team-b")[0] == 409
    assert admin.request("DELETE", "/v1/tenants/team-a")[0] == 200  # its only key is revoked
    assert admin.request("DELETE", "/v1/tenants/default")[0] == 409
    # a name is never given again: a new team-a would inherit the old one's tasks
    assert admin.request("POST", "/v1/tenants", {"name": "team-a"})[0] == 409
    assert admin.request("GET", "/v1/tenants/team-a")[0] == 404
    # a tenant that a local user maps to stays while agentboxd says so
    status, k = admin.request("DELETE", f"/v1/keys/{keys['team-b']['id']}")
    admin.request("DELETE", f"/v1/keys/{short['id']}")
    assert admin.request("DELETE", "/v1/tenants/team-b")[0] == 409
    # the store holds no key's text, nor any secret
    db = b"".join(p.read_bytes() for p in d.state.glob("agentbox.db*"))
    for k in (keys["team-a"], keys["team-b"], short):
        assert k["key"].encode() not in db and k["key"].split("_")[2].encode() not in db


def test_the_cli_manages_tenants_and_keys(world):
    d, admin, a, b, keys = world
    env = dict(os.environ, AGENTBOX_URL=a.url, AGENTBOX_KEY=admin.key)
    if a.cacert:
        env["AGENTBOX_CACERT"] = a.cacert
    for name in ("AGENTBOX_TOKEN", "AGENTBOX_HOST"):
        env.pop(name, None)

    def cli(*args, key=None):
        e = dict(env, AGENTBOX_KEY=key) if key else env
        return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, env=e,
                              timeout=60)
    p = cli("tenant", "create", "team-c")
    assert p.returncode == 0, p.stderr
    assert "team-c" in cli("tenant", "ls", "-q").stdout.split()
    p = cli("key", "create", "--tenant", "team-c", "--expires", "30d", "--label", "ci")
    assert p.returncode == 0, p.stderr
    key = p.stdout.strip()
    assert key.startswith("abx_") and "only" in p.stderr
    p = cli("whoami", "--json", key=key)
    assert json.loads(p.stdout)["tenant"] == "team-c", p.stderr
    kid = key.split("_")[1]
    assert cli("key", "revoke", kid).returncode == 0
    p = cli("whoami", key=key)
    assert p.returncode == 125 and "unauthorized" in p.stderr
    assert cli("tenant", "create", "Bad_Name").returncode != 0


def test_claims_are_fair_across_tenants(tmp_path):
    """A queues 200 quick tasks, then B one, with --max-running 2: B's starts in the
    next slot that frees, not after A's 200."""
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--max-running", "2", "--pool", "0")
    d.start()
    try:
        admin = Tcp(port, d.admin_key())
        keys = {}
        for name in ("team-a", "team-b"):
            assert admin.request("POST", "/v1/tenants", {"name": name})[0] == 201
            keys[name] = Tcp(port, admin.request("POST", "/v1/keys", {"tenant": name})[1]["key"])
        a_ids = [keys["team-a"].request("POST", "/v1/tasks", {"command": ["sleep", "0.3"]})[1]["id"]
                 for _ in range(200)]
        assert len(set(a_ids)) == 200
        # B's arrives while A's fill both slots and 190-odd wait
        status, mine = keys["team-b"].request("POST", "/v1/tasks", {"command": ["true"]})
        assert status == 201

        def started():
            t = keys["team-b"].request("GET", f"/v1/tasks/{mine['id']}")[1]
            return t if t["started_at"] else None
        assert helpers.wait_until(started, 120, 0.05), "B's task never started"
        b = started()
        # A's tasks that started after B's was queued and before it started: at most the
        # one that may have taken a slot as B's arrived
        a = admin.request("GET", "/v1/tasks?tenant=team-a&limit=1000")[1]["tasks"]
        assert len(a) == 200
        between = [t for t in a if t["started_at"] and
                   b["created_at"] < t["started_at"] < b["started_at"]]
        assert len(between) <= 1, (b["created_at"], b["started_at"], between)
        # meaningful only if many of A's waited when B's came (first in first out would
        # have started them all first)
        waiting = [t for t in a if not t["started_at"] or t["started_at"] > b["created_at"]]
        assert len(waiting) > 50, "A's tasks ran too fast for the test to say anything"
    finally:
        for t in d.request("GET", "/v1/tasks?status=queued,running&limit=1000")[1]["tasks"]:
            d.request("POST", f"/v1/tasks/{t['id']}/cancel")
        assert helpers.wait_until(
            lambda: not d.request("GET", "/v1/tasks?status=queued,running")[1]["tasks"], 60,
            0.1)
        d.stop()
