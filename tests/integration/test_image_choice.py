"""Tasks and sandboxes made of an image of the store ("image" on POST
/v1/tasks and POST /v1/sandboxes, --image on submit and sandbox create;
docs/images.md): the image's config gives the defaults (Env, WorkingDir,
Entrypoint and Cmd), root inside is opt-in ("user": "root"), writes land
in the sandbox's own upper layer and vanish with it, an image in use is
not removed, and an unknown image is a 400 naming it.

The images are made here (imagelib.py: busybox-static), imported with
`agentbox image import`.
"""
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import AGENTBOX
from daemon import Daemon
from imagelib import busybox_layout, create_from_pool

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (image trees are chowned)")

CONFIG = {
    "Env": ["PATH=/bin", "GREETING=hello", "SHADOWED=image"],
    "WorkingDir": "/app/",
    "Cmd": ["/bin/sh", "-c", "echo \"$GREETING $SHADOWED from $(pwd) as $(id -u)\""],
}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("image-choice")
    d = Daemon(tmp).start()
    layout, config = busybox_layout("busybox:1", CONFIG,
                                    files={"app/data.txt": "from the image\n"})
    path = tmp / "busybox.tar"
    path.write_bytes(layout)
    cli(d, "image", "import", str(path), "--name", "busybox:1")
    d.config = config
    yield d
    d.stop()


def cli(d, *args, check=True, timeout=120):
    proc = subprocess.run([AGENTBOX, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, AGENTBOX_HOST=d.socket))
    if check:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def run_task(d, *args):
    """Submit, wait, and return (the task's JSON, its output)."""
    tid = cli(d, "submit", *args).stdout.strip()
    cli(d, "wait", tid, check=False, timeout=180)
    task = d.task(tid)
    status, out = d.request("GET", f"/v1/tasks/{tid}/logs")
    assert status == 200
    return task, out


def tree_of(d):
    return d.state / "images" / "trees" / d.config.split(":", 1)[1]


def snapshot(root):
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in ["", *dirnames, *filenames]:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            snap[os.path.relpath(p, root)] = (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns)
    return snap


def test_a_task_takes_the_images_defaults(daemon):
    task, out = run_task(daemon, "--image", "busybox:1", "--env", "SHADOWED=request")
    assert task["status"] == "succeeded", (task, out)
    # Env beneath the request's env, WorkingDir (its trailing / dropped), Cmd, the sandbox user
    assert out.strip() == "hello request from /app as 1000"
    assert task["image"] == {"name": "busybox:1", "digest": task["image"]["digest"],
                             "config": daemon.config}
    assert task["cwd"] == "/app" and "user" not in task
    assert task["command"] == CONFIG["Cmd"]


def test_a_command_given_runs_in_the_images_root(daemon):
    task, out = run_task(daemon, "--image", "busybox:1", "--",
                         "sh", "-c", "cat /etc/os-release /app/data.txt; echo $GREETING")
    assert task["status"] == "succeeded", (task, out)
    assert out == "ID=agentbox-busybox\nfrom the image\nhello\n"


def test_root_is_opt_in_and_writes_vanish(daemon):
    before = snapshot(tree_of(daemon))
    task, out = run_task(daemon, "--image", "busybox:1", "--user", "root", "--",
                         "sh", "-c", "id -u; echo mine > /etc/written; cat /etc/written")
    assert task["status"] == "succeeded", (task, out)
    assert out == "0\nmine\n"
    task, out = run_task(daemon, "--image", "busybox:1", "--",
                         "sh", "-c", "id -u; cat /etc/written 2>&1; echo > /etc/nope 2>&1 || "
                         "echo refused")
    assert out.splitlines()[0] == "1000"
    assert "No such file" in out and "refused" in out, out
    assert snapshot(tree_of(daemon)) == before


def test_sandboxes_of_one_image_do_not_see_each_others_writes(daemon):
    before = snapshot(tree_of(daemon))
    a = cli(daemon, "sandbox", "create", "--image", "busybox:1", "--user", "root").stdout.strip()
    b = cli(daemon, "sandbox", "create", "--image", "busybox:1").stdout.strip()
    try:
        # exec starts in the image's WorkingDir, with its Env
        assert cli(daemon, "exec", a, "--", "sh", "-c",
                   "pwd; echo $GREETING").stdout == "/app\nhello\n"
        cli(daemon, "exec", a, "--", "sh", "-c", "echo a > /etc/a-was-here")
        assert cli(daemon, "exec", a, "--", "cat", "/etc/a-was-here").stdout == "a\n"
        seen = cli(daemon, "exec", b, "--", "cat", "/etc/a-was-here", check=False)
        assert seen.returncode != 0 and "No such file" in seen.stderr + seen.stdout
        # the image in use is not removed
        rm = cli(daemon, "image", "rm", "busybox:1", check=False)
        assert rm.returncode != 0 and "image_in_use" in rm.stderr, rm.stderr
    finally:
        cli(daemon, "sandbox", "rm", a, b)
    assert snapshot(tree_of(daemon)) == before
    assert not any(daemon.state.glob("images/trees/*/etc/a-was-here"))


def test_unknown_image_and_bad_fields_are_400s(daemon):
    for body, field in [
        ({"command": ["true"], "image": "nosuch:1"}, "image"),
        ({"command": ["true"], "image": ""}, "image"),
        ({"command": ["true"], "image": 7}, "image"),
        ({"command": ["true"], "user": "root"}, "user"),
        ({"command": ["true"], "image": "busybox:1", "user": "admin"}, "user"),
        ({"command": ["true"], "image": "busybox:1", "cwd": "relative"}, "cwd"),
        ({"command": ["true"], "image": {"digest": "sha256:12"}}, "image.digest"),
        ({"command": ["true"], "image": "busybox:1", "pull": "yes"}, "pull"),
        ({"image": {"digest": "sha256:" + "0" * 64}}, "image"),
    ]:
        for route, b in (("/v1/tasks", body),
                         ("/v1/sandboxes", {k: v for k, v in body.items() if k != "command"})):
            status, text = daemon.request("POST", route, b)
            err = text["error"]
            assert status == 400 and err["field"] == field, (route, b, status, text)
    status, text = daemon.request("POST", "/v1/tasks", {"image": "nosuch:1"})
    assert "nosuch:1" in text["error"]["message"]
    proc = cli(daemon, "submit", "--image", "nosuch:2", "--", "true", check=False)
    assert proc.returncode == 125 and "nosuch:2" in proc.stderr
    # a command is needed when the image has none
    layout, _ = busybox_layout("nocmd:1", {"Env": ["PATH=/bin"]})
    path = daemon.state.parent / "nocmd.tar"
    path.write_bytes(layout)
    cli(daemon, "image", "import", str(path), "--name", "nocmd:1")
    status, text = daemon.request("POST", "/v1/tasks", {"image": "nocmd:1"})
    assert status == 400 and text["error"]["field"] == "command", text


def test_the_stored_spec_names_digests_so_a_moved_name_changes_nothing(daemon):
    tid = cli(daemon, "submit", "--image", "busybox:1", "--", "sleep", "30").stdout.strip()
    try:
        spec = daemon.task(tid)
        # the object form is a valid request too: it resolves to the same image
        status, text = daemon.request("POST", "/v1/sandboxes",
                                      {"image": spec["image"]})
        assert status == 201, text
        sid = text["id"]
        cli(daemon, "sandbox", "rm", sid)
        bad = dict(spec["image"], config="sha256:" + "1" * 64)
        status, text = daemon.request("POST", "/v1/sandboxes", {"image": bad})
        assert status == 400 and text["error"]["field"] == "image.config", text
    finally:
        cli(daemon, "cancel", tid, check=False)


def test_an_images_pool_serves_its_creates_fresh(tmp_path):
    """agentboxd --pool IMAGE=N: creates of the image as its defaults ask take one."""
    d = Daemon(tmp_path).start()
    layout, _ = busybox_layout("busybox:1", CONFIG, files={"app/data.txt": "from the image\n"})
    (tmp_path / "busybox.tar").write_bytes(layout)
    cli(d, "image", "import", str(tmp_path / "busybox.tar"), "--name", "busybox:1")
    d.stop()
    d = Daemon(tmp_path, "--pool", "0", "--pool", "busybox:1=2").start()
    try:
        held = set()
        a = create_from_pool(d, cli, held, "--image", "busybox:1", "--memory", "512m")
        # a claim that adds no env keeps the env the pooled sandbox was made with: the image's
        assert cli(d, "exec", a, "--", "sh", "-c", "echo $GREETING $SHADOWED").stdout \
            == "hello image\n"
        # fresh: the image's files, Env and WorkingDir; the claim's env over the image's
        b = create_from_pool(d, cli, held, "--image", "busybox:1", "--env", "SHADOWED=claim")
        assert b != a
        assert cli(d, "exec", b, "--", "sh", "-c", "pwd; echo $GREETING $SHADOWED; "
                   "cat data.txt").stdout == "/app\nhello claim\nfrom the image\n"
        # an OOM in a pooled sandbox of the image is reported as one
        status, oom = d.request("POST", f"/v1/sandboxes/{a}/exec", {
            "command": ["dd", "if=/dev/zero", "of=/dev/null", "bs=1G", "count=1"]})
        assert status == 200 and oom["oom_killed"] is True, oom
        # not as the image's defaults ask (root, another cwd): made on demand
        # (a sandbox made on demand is one whose directory was not there before)
        before = {p.name for p in (d.state / "sandboxes").iterdir()}
        c = cli(d, "sandbox", "create", "--image", "busybox:1", "--user", "root").stdout.strip()
        e = cli(d, "sandbox", "create", "--image", "busybox:1", "--cwd", "/tmp").stdout.strip()
        assert c not in before and e not in before
        assert cli(d, "exec", e, "--", "pwd").stdout == "/tmp\n"
        cli(d, "sandbox", "rm", a, b, c, e)
    finally:
        d.stop()


def test_a_pool_of_an_unknown_image_stops_the_start(tmp_path):
    d = Daemon(tmp_path, "--pool", "nosuch:1=1")
    with pytest.raises(AssertionError):
        d.start()
    d.log.flush()
    assert "nosuch:1" in (tmp_path / "agentboxd.log").read_text()


def test_a_task_oom_in_an_image_is_reported(daemon):
    task, out = run_task(daemon, "--image", "busybox:1", "--memory", "64m", "--",
                         "dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1")
    assert task["status"] == "oom_killed", (task, out)


def test_commit_a_sandbox_then_create_from_the_new_image(daemon, tmp_path):
    """Install something, commit, create from the new image: it is there."""
    sb = cli(daemon, "sandbox", "create", "--image", "busybox:1", "--user", "root").stdout.strip()
    plain = cli(daemon, "sandbox", "create").stdout.strip()
    try:
        cli(daemon, "exec", sb, "--", "sh", "-c",
            "mkdir -p /var/lib/tool && echo 'echo tool ran' > /var/lib/tool/run && "
            "chmod 755 /var/lib/tool/run && echo committed > /etc/motd && "
            "rm /etc/os-release /app/data.txt && echo scratch > /tmp/not-kept")
        shown = json.loads(cli(daemon, "sandbox", "commit", sb, "tooled:1", "--comment",
                               "a tool", "--json").stdout)
        assert shown["name"] == "tooled:1"
        # the sandbox goes on as it was: running, its writes its own
        assert daemon.request("GET", f"/v1/sandboxes/{sb}")[1]["status"] == "running"
        assert cli(daemon, "exec", sb, "--", "cat", "/etc/motd").stdout == \
            "committed\n"
        new = cli(daemon, "sandbox", "create", "--image", "tooled:1", "--cwd", "/").stdout.strip()
        try:
            out = cli(daemon, "exec", new, "--", "sh", "-c",
                      "/var/lib/tool/run; cat /etc/motd; ls /etc/os-release /app/data.txt /tmp/not-kept "
                      "2>&1; echo $GREETING", check=False).stdout
            assert out.startswith("tool ran\ncommitted\n"), out
            assert out.count("No such file") == 3, out
            assert out.endswith("hello\n"), out  # the base's config, Env included
        finally:
            cli(daemon, "sandbox", "rm", new)
        # the new image is a proper OCI image: exported, its manifest names two layers,
        # and skopeo (where scripts/install-deps put it; the v2 guest has none) reads it
        tar = tmp_path / "tooled.tar"
        cli(daemon, "image", "export", "tooled:1", "-o", str(tar))
        with tarfile.open(tar) as t:
            index = json.loads(t.extractfile("index.json").read())
            digest = index["manifests"][0]["digest"].split(":")[1]
            manifest = json.loads(t.extractfile(f"blobs/sha256/{digest}").read())
        assert len(manifest["layers"]) == 2
        if shutil.which("skopeo"):
            inspect = subprocess.run(["skopeo", "inspect", f"oci-archive:{tar}"],
                                     capture_output=True, text=True, timeout=120)
            assert inspect.returncode == 0, inspect.stderr
            assert len(json.loads(inspect.stdout)["Layers"]) == 2
        # a sandbox without an image has nothing to commit; a name is needed
        status, body = daemon.request("POST", f"/v1/sandboxes/{plain}/commit", {"name": "x:1"})
        assert status == 409 and body["error"]["code"] == "conflict", body
        status, body = daemon.request("POST", f"/v1/sandboxes/{sb}/commit", {})
        assert status == 400 and body["error"]["field"] == "name", body
        status, body = daemon.request("POST", f"/v1/sandboxes/{sb}/commit", {"name": "BAD NAME"})
        assert status == 400 and body["error"]["field"] == "name", body
    finally:
        cli(daemon, "sandbox", "rm", sb, plain)


def test_the_upper_layer_is_held_to_disk(daemon):
    """Writes to the image's root land in the sandbox's --disk tmpfs, and stop at its size."""
    sb = cli(daemon, "sandbox", "create", "--image", "busybox:1", "--user", "root",
             "--disk", "8m").stdout.strip()
    try:
        full = cli(daemon, "exec", sb, "--", "dd", "if=/dev/zero", "of=/etc/big", "bs=1M",
                   "count=32", check=False)
        assert full.returncode != 0 and "No space left on device" in full.stderr, full.stderr
        # the root's writes and the workspace share it: an upload now is 507 no_space
        cli(daemon, "exec", sb, "--", "sh", "-c", "rm /etc/big; dd if=/dev/zero of=/etc/big "
            "bs=1M count=7 2>/dev/null; true")
        status, body = daemon.request("PUT", f"/v1/sandboxes/{sb}/files?path=/workspace/f",
                                      b"x" * (4 << 20),
                                      {"Content-Type": "application/octet-stream"})
        assert status == 507 and body["error"]["code"] == "no_space", (status, body)
    finally:
        cli(daemon, "sandbox", "rm", sb)


def test_agentbox_run_with_an_image_of_the_store(daemon):
    """agentbox run --image: agentboxd says what the image is, the run reads its tree."""
    run = ["run", "--image", "busybox:1", "--state-dir", str(daemon.state)]
    out = cli(daemon, *run, "--env", "SHADOWED=run")
    assert out.stdout == "hello run from /app as 1000\n"  # Env, WorkingDir and Cmd
    out = cli(daemon, *run, "--user", "root", "--", "sh", "-c", "cat data.txt; id -u")
    assert out.stdout == "from the image\n0\n"
    bad = cli(daemon, "run", "--image", "nosuch:1", "--state-dir", str(daemon.state), "--",
              "true", check=False)
    assert bad.returncode == 125 and "nosuch:1" in bad.stderr and "not_found" in bad.stderr
    elsewhere = cli(daemon, "run", "--image", "busybox:1", "--state-dir", "/nonexistent", "--",
                    "true", check=False)
    assert elsewhere.returncode == 125 and "--state-dir" in elsewhere.stderr


def _import(d, name, config, files=None):
    layout, digest = busybox_layout(name, config, files=files)
    path = d.state.parent / (name.replace(":", "-").replace("/", "-") + ".tar")
    path.write_bytes(layout)
    cli(d, "image", "import", str(path), "--name", name)
    return digest


APP_FILES = {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"
                           "app:x:1234:1235:the app:/home/app:/bin/sh\n",
             "etc/group": "root:x:0:\napp:x:1235:\nstaff:x:50:app\n"}
WHO = ["sh", "-c", "id -u; id -g; touch mine && stat -c %u:%g mine; pwd"]


def test_the_images_user_runs_the_command(daemon):
    """The image's User (a name of its own /etc/passwd, a group of its own
    /etc/group, or numbers) runs a task's command and a sandbox's execs,
    and owns the workdir; --user sandbox gives the sandbox user back; an
    image whose User is root runs as the sandbox user (root stays opt-in)."""
    _import(daemon, "user-app:1", {"Env": ["PATH=/bin"], "User": "app"}, APP_FILES)
    _import(daemon, "user-staff:1", {"Env": ["PATH=/bin"], "User": "app:staff"}, APP_FILES)
    _import(daemon, "user-num:1", {"Env": ["PATH=/bin"], "User": "4321:4322"})
    _import(daemon, "user-root:1", {"Env": ["PATH=/bin"], "User": "root"})

    task, out = run_task(daemon, "--image", "user-app:1", "--", *WHO)
    assert task["status"] == "succeeded", (task, out)
    assert out == "1234\n1235\n1234:1235\n/workspace\n", out
    assert task["user"] == "1234:1235"  # the stored spec says who ran it
    task, out = run_task(daemon, "--image", "user-app:1", "--user", "sandbox", "--", *WHO)
    assert out.splitlines()[:3] == ["1000", "1000", "1000:1000"], out
    assert "user" not in task
    task, out = run_task(daemon, "--image", "user-root:1", "--", *WHO)
    assert out.splitlines()[:2] == ["1000", "1000"], out  # root is opt-in
    task, out = run_task(daemon, "--image", "user-root:1", "--user", "root", "--", "id", "-u")
    assert out == "0\n"

    for image, ids in (("user-staff:1", ("1234", "50")), ("user-num:1", ("4321", "4322"))):
        sb = cli(daemon, "sandbox", "create", "--image", image).stdout.strip()
        try:
            out = cli(daemon, "exec", sb, "--", *WHO).stdout.splitlines()
            assert out[:3] == [ids[0], ids[1], f"{ids[0]}:{ids[1]}"], (image, out)
            # a file put through the API is the command's user's too
            status, body = daemon.request("PUT", f"/v1/sandboxes/{sb}/files?path=/workspace/up.txt",
                                          b"hi", {"Content-Type": "application/octet-stream"})
            assert status == 201, body
            owner = cli(daemon, "exec", sb, "--", "stat", "-c", "%u", "up.txt").stdout.strip()
            assert owner == ids[0]
        finally:
            cli(daemon, "sandbox", "rm", sb)

    run = ["run", "--state-dir", str(daemon.state)]
    assert cli(daemon, *run, "--image", "user-app:1", "--", "id", "-u").stdout == "1234\n"
    assert cli(daemon, *run, "--image", "user-app:1", "--user", "sandbox", "--",
               "id", "-u").stdout == "1000\n"


def test_an_image_user_it_cannot_name_is_a_400(daemon):
    """A User the image's /etc/passwd or /etc/group lacks, or ids past a
    sandbox's 65536, is 400 invalid_field naming the image; nothing runs."""
    cases = {"user-nobody:1": "nobody", "user-nogroup:1": "app:wheel",
             "user-far:1": "70000"}
    for name, user in cases.items():
        _import(daemon, name, {"Env": ["PATH=/bin"], "User": user}, APP_FILES)
        for path, body in (("/v1/tasks", {"command": ["true"], "image": name}),
                           ("/v1/sandboxes", {"image": name})):
            status, err = daemon.request("POST", path, json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            assert status == 400, (name, path, status, err)
            assert err["error"]["code"] == "invalid_field", err
            assert err["error"]["field"] == "image", err
            assert user.split(":")[-1] in err["error"]["message"], err
