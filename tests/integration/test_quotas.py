"""Quotas per tenant against the real daemon (docs/api.md, "Quotas"): the
daemon's defaults (--tenant-quota) and a tenant's own (PATCH
/v1/tenants/{name}, agentbox tenant set); a create past one is 429
quota_exceeded naming the quota, its limit and the use; the use shows in
GET /v1/tenants/{name} and /v1/me, and is counted again after the daemon
is killed; a tenant at its running-tasks quota waits while the others' go
on; only the queued quota refuses a submit.
"""
import datetime
import os
import subprocess

import pytest

import helpers
from conftest import BUILD
from daemon import AGENTBOXD, Daemon
from test_tenants import Tcp, free_port

AGENTBOX = os.path.join(BUILD, "src", "cli", "agentbox")


def tenants(d, port, *names, **own):
    """An admin client, and a member client for each tenant name (own: PATCH bodies)."""
    admin = Tcp(port, d.admin_key())
    clients = {}
    for name in names:
        assert admin.request("POST", "/v1/tenants", {"name": name})[0] == 201
        if name in own:
            status, t = admin.request("PATCH", f"/v1/tenants/{name}", {"quotas": own[name]})
            assert status == 200, t
        status, k = admin.request("POST", "/v1/keys", {"tenant": name})
        assert status == 201, k
        clients[name] = Tcp(port, k["key"])
    return admin, clients


def when(rfc3339):
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def refused(answer, quota, limit, use, asked):
    status, body = answer
    assert status == 429, answer
    e = body["error"]
    assert e["code"] == "quota_exceeded", e
    assert (e["quota"], e["limit"], e["use"], e["asked"]) == (quota, limit, use, asked), e
    assert quota in e["message"], e


@pytest.fixture
def sandboxes_daemon(tmp_path):
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--pool", "1",
               "--tenant-quota", "sandboxes=2", "--tenant-quota", "timeout_s=600")
    d.start()
    try:
        yield d, port
    finally:
        d.stop()


def test_sandbox_quotas(sandboxes_daemon):
    d, port = sandboxes_daemon
    admin, c = tenants(d, port, "team-a", "team-b", "team-c",
                       **{"team-b": {"memory_mb": 700, "cpus": 1.5, "disk_mb": 1536},
                          "team-c": {"sandboxes": "none"}})
    a, b = c["team-a"], c["team-b"]

    # the daemon's default: two sandboxes each (the first from the warm pool)
    first = [a.request("POST", "/v1/sandboxes", {}) for _ in range(2)]
    assert [s for s, _ in first] == [201, 201], first
    refused(a.request("POST", "/v1/sandboxes", {}), "sandboxes", 2, 2, 1)
    status, me = a.request("GET", "/v1/me")
    assert status == 200 and me["quotas"]["sandboxes"] == 2 and me["use"]["sandboxes"] == 2
    assert me["use"]["memory_mb"] == 2 * 512 and me["own_quotas"] == {}
    # one ended: room again
    assert a.request("DELETE", f"/v1/sandboxes/{first[0][1]['id']}")[0] == 200
    status, again = a.request("POST", "/v1/sandboxes", {})
    assert status == 201, again

    # team-b's own memory and CPUs: 512 MiB fit in 700, a second does not
    status, sb = b.request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 512}})
    assert status == 201, sb
    refused(b.request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 512}}),
            "memory_mb", 700, 512, 512)
    refused(b.request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 64, "cpus": 1}}),
            "cpus", 1.5, 1, 1)
    # team-c has no bound on sandboxes: a third is fine
    for _ in range(3):
        status, body = c["team-c"].request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 64}})
        assert status == 201, body

    # timeout_s: past it refused; the default (3600 s) cut to it
    refused(a.request("POST", "/v1/sandboxes/" + again["id"] + "/timeout", {"timeout_s": 601}),
            "timeout_s", 600, 0, 601)
    assert when(again["expires_at"]) - when(again["created_at"]) <= 600
    status, t = a.request("POST", "/v1/tasks", {"command": ["true"],
                                                "limits": {"timeout_s": 3600}})
    refused((status, t), "timeout_s", 600, 0, 3600)

    # the use is counted again by a daemon that finds them after a SIGKILL
    d.kill()
    d.start()
    status, t = admin.request("GET", "/v1/tenants/team-a")
    assert status == 200 and t["use"]["sandboxes"] == 2, t
    refused(a.request("POST", "/v1/sandboxes", {}), "sandboxes", 2, 2, 1)
    status, t = admin.request("GET", "/v1/tenants/team-b")
    assert t["use"]["memory_mb"] == 512 and t["use"]["disk_mb"] == 1024, t
    assert t["own_quotas"] == {"cpus": 1.5, "disk_mb": 1536, "memory_mb": 700}, t

    # disk: 1024 MiB held (the default), 1024 more would pass 1536
    refused(b.request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 64, "cpus": 0.5,
                                                           "disk_mb": 1024}}),
            "disk_mb", 1536, 1024, 1024)
    # its sandbox ended, all of it is free again: memory, CPUs and disk at once
    assert b.request("DELETE", f"/v1/sandboxes/{sb['id']}")[0] == 200
    status, t = admin.request("GET", "/v1/tenants/team-b")
    assert (t["use"]["sandboxes"], t["use"]["memory_mb"], t["use"]["disk_mb"]) == (0, 0, 0), t
    status, again = b.request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 640, "cpus": 1.5,
                                                                   "disk_mb": 1536}})
    assert status == 201, again


def test_quota_changes_are_checked(sandboxes_daemon):
    d, port = sandboxes_daemon
    admin, c = tenants(d, port, "team-a")
    path = "/v1/tenants/team-a"
    for quotas, code, field in (
            ({"bogus": 1}, "unknown_field", "quotas.bogus"),
            ({"sandboxes": -1}, "invalid_field", "quotas.sandboxes"),
            ({"sandboxes": 1.5}, "invalid_field", "quotas.sandboxes"),
            ({"cpus": 0.0001}, "invalid_field", "quotas.cpus"),
            ({"memory_mb": "lots"}, "invalid_field", "quotas.memory_mb"),
            ([1], "invalid_field", "quotas")):
        status, body = admin.request("PATCH", path, {"quotas": quotas})
        assert status == 400 and body["error"]["code"] == code, (quotas, body)
        assert body["error"]["field"] == field, (quotas, body)
    status, body = admin.request("PATCH", path, {})
    assert status == 400 and body["error"]["field"] == "quotas"
    # a member may not set its own
    status, body = c["team-a"].request("PATCH", path, {"quotas": {"sandboxes": 9}})
    assert status == 403 and body["error"]["code"] == "forbidden"
    # set, then back to the default with null
    status, t = admin.request("PATCH", path, {"quotas": {"sandboxes": 5, "cpus": 2.25}})
    assert status == 200 and t["quotas"]["sandboxes"] == 5 and t["quotas"]["cpus"] == 2.25
    status, t = admin.request("PATCH", path, {"quotas": {"cpus": 1.001}})
    assert status == 200 and t["quotas"]["cpus"] == 1.001, t
    status, t = admin.request("PATCH", path, {"quotas": {"cpus": 2.25}})
    status, t = admin.request("PATCH", path, {"quotas": {"sandboxes": None}})
    assert t["quotas"]["sandboxes"] == 2 and t["own_quotas"] == {"cpus": 2.25}
    assert admin.request("PATCH", "/v1/tenants/nobody", {"quotas": {}})[0] == 404


def test_task_quotas(tmp_path):
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--max-running", "4",
               "--tenant-quota", "tasks_running=1", "--tenant-quota", "tasks_queued=2",
               "--tenant-quota", "memory_mb=1024")
    d.start()
    try:
        admin, c = tenants(d, port, "team-a", "team-b")
        a, b = c["team-a"], c["team-b"]

        def task(client, tid):
            return client.request("GET", f"/v1/tasks/{tid}")[1]

        status, first = a.request("POST", "/v1/tasks", {"command": ["sleep", "60"]})
        assert status == 201
        assert helpers.wait_until(lambda: task(a, first["id"])["status"] == "running", 60, 0.05)
        # a runs as many as it may: the next two wait; a third is refused, as queued
        waiting = []
        for _ in range(2):
            status, t = a.request("POST", "/v1/tasks", {"command": ["true"]})
            assert status == 201, t
            waiting.append(t["id"])
        refused(a.request("POST", "/v1/tasks", {"command": ["true"]}), "tasks_queued", 2, 2, 1)
        # one that could never run alone is refused at once, not queued for ever
        # (1536 MiB: more than the quota, less than any host this runs on)
        refused(a.request("POST", "/v1/tasks", {"command": ["true"],
                                                "limits": {"memory_mb": 1536}}),
                "memory_mb", 1024, 0, 1536)
        # b is not held up behind a's waiting head
        status, bt = b.request("POST", "/v1/tasks", {"command": ["true"]})
        assert status == 201
        assert helpers.wait_until(lambda: task(b, bt["id"])["status"] == "succeeded", 60, 0.05)
        # claims after b's were made while a's first still runs: a's wait
        assert [task(a, t)["status"] for t in waiting] == ["queued", "queued"]
        status, me = a.request("GET", "/v1/me")
        assert me["use"]["tasks_running"] == 1 and me["use"]["tasks_queued"] == 2, me
        assert me["use"]["memory_mb"] == 512, me
        # its first ends: the next of a's starts, and so on
        assert a.request("POST", f"/v1/tasks/{first['id']}/cancel")[0] == 200
        assert helpers.wait_until(
            lambda: all(task(a, t)["status"] == "succeeded" for t in waiting), 60, 0.05)
        # the queue emptied: a submit is taken again
        status, t = a.request("POST", "/v1/tasks", {"command": ["true"]})
        assert status == 201, t
    finally:
        for t in d.request("GET", "/v1/tasks?status=queued,running")[1]["tasks"]:
            d.request("POST", f"/v1/tasks/{t['id']}/cancel")
        assert helpers.wait_until(
            lambda: not d.request("GET", "/v1/tasks?status=queued,running")[1]["tasks"], 30,
            0.1)
        d.stop()


def test_the_cli_sets_and_shows_quotas(sandboxes_daemon):
    d, port = sandboxes_daemon
    admin, c = tenants(d, port, "team-a")
    env = dict(os.environ, AGENTBOX_HOST=f"127.0.0.1:{port}", AGENTBOX_KEY=admin.key)

    def cli(*args):
        return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, env=env,
                              timeout=60)
    p = cli("tenant", "set", "team-a", "memory_mb=1024", "cpus=1.5", "tasks_queued=none")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line.split()[1:] for line in p.stdout.splitlines()[3:]}
    assert rows["memory_mb"] == ["1024", "0", "tenant"], p.stdout
    assert rows["cpus"] == ["1.500", "0", "tenant"], p.stdout
    assert rows["tasks_queued"] == ["none", "0", "tenant"], p.stdout
    assert rows["sandboxes"] == ["2", "0", "default"], p.stdout
    p = cli("tenant", "set", "team-a", "memory_mb=default")
    assert p.returncode == 0 and "memory_mb      none" in p.stdout, p.stdout
    for bad in ("bogus=1", "memory_mb", "memory_mb=-1", "cpus=1.2345"):
        p = cli("tenant", "set", "team-a", bad)
        assert p.returncode == 125 and "tenant set" in p.stderr, (bad, p.stderr)
    p = cli("tenant", "show", "team-a")
    assert p.returncode == 0 and "timeout_s      600" in p.stdout, p.stdout
    # a bad default stops agentboxd at once, with its usage status
    p = subprocess.run([AGENTBOXD, "--tenant-quota", "cpus=lots"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and "--tenant-quota" in p.stderr
