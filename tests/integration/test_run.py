"""`agentbox run` as a user meets it: options, exit statuses, I/O, files."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import AGENTBOX, run, sandbox
import helpers


@pytest.mark.parametrize("args, needle", [
    (["--bogus", "--", "true"], "unknown option '--bogus'"),
    (["--memory", "12xb", "--", "true"], "--memory: '12xb' is not a size"),
    (["--cpus", "-1", "--", "true"], "--cpus: '-1' is not a positive number"),
    (["--pids", "0", "--", "true"], "--pids: must be between 1"),
    ([], "missing command"),
    (["--"], "missing command"),
    (["--rootfs", "/nonexistent-agentbox-image", "--", "true"], "--rootfs: '/nonexistent-agentbox-image'"),
    (["--volume", "relative/dir:/data", "--", "true"], "--volume: 'relative/dir' is not an absolute path"),
    (["--volume", "/tmp:relative", "--", "true"], "--volume: 'relative' is not an absolute path"),
    (["--timeout", "soon", "--", "true"], "--timeout: 'soon' is not a duration"),
    (["--disk", "0", "--", "true"], "--disk: must be between"),
    (["--memory", "1k", "--", "true"], "--memory: must be between"),
    (["--env", "NOEQUALS", "--", "true"], "--env 'NOEQUALS': expected KEY=VALUE"),
    (["--workdir", "/proc", "--", "true"], "--workdir: '/proc' is reserved"),
    (["--network", "host", "--", "true"], "--network: 'host' is not none, open or allow:"),
    (["--network-rate", "5", "--", "true"], "--network-rate: only with --network open or allow"),
    (["--memory"], "needs a value"),
])
def test_bad_input_exits_125_with_one_line_and_creates_nothing(args, needle):
    before = helpers.sandbox_groups()
    p = run(["run", *args])
    assert p.returncode == 125, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentbox: run: "), p.stderr
    assert needle in lines[0]
    assert p.stdout == ""
    assert helpers.sandbox_groups() == before


def test_exit_status_passes_through():
    assert sandbox(["sh", "-c", "exit 7"]).returncode == 7
    assert sandbox(["true"]).returncode == 0
    assert sandbox(["false"]).returncode == 1


def test_killed_by_signal_is_128_plus_n():
    assert sandbox(["sh", "-c", "kill -TERM $$"]).returncode == 128 + signal.SIGTERM
    assert sandbox(["sh", "-c", "kill -SEGV $$"]).returncode == 128 + signal.SIGSEGV


def test_command_not_found_and_not_executable():
    p = sandbox(["no-such-command-xyz"])
    assert p.returncode == 127
    assert "no-such-command-xyz: command not found" in p.stderr
    p = sandbox(["/etc/passwd"])
    assert p.returncode == 126
    assert "cannot execute" in p.stderr


def test_stdin_stdout_stderr_pass_through():
    p = sandbox(["sh", "-c", "tr a-z A-Z; echo err >&2"], input="hello sandbox\n")
    assert p.stdout == "HELLO SANDBOX\n"
    assert p.stderr == "err\n"


def test_environment_is_only_what_was_given():
    p = sandbox(["sh", "-c", "echo $FOO/$HOME/$LANG; echo $PATH"], "--env", "FOO=bar",
                env=dict(os.environ, LEAKY="1"))
    first, path = p.stdout.splitlines()
    assert first == "bar//workspace/C.UTF-8".replace("//", "/", 1) or first == "bar//workspace/C.UTF-8"
    assert "/usr/bin" in path
    p = sandbox(["sh", "-c", "echo ${LEAKY:-unset}"], env=dict(os.environ, LEAKY="1"))
    assert p.stdout.strip() == "unset"
    p = sandbox(["sh", "-c", "echo $PATH"], "--env", "PATH=/usr/bin")
    assert p.stdout.strip() == "/usr/bin"


def test_workdir_is_writable_and_empty():
    p = sandbox(["sh", "-c", "pwd; ls -A | wc -l; touch x && echo wrote"])
    assert p.stdout.split() == ["/workspace", "0", "wrote"]
    p = sandbox(["sh", "-c", "pwd; touch y && echo wrote"], "--workdir", "/home/agent/work")
    assert p.stdout.split() == ["/home/agent/work", "wrote"]


def test_root_is_read_only_and_tmp_writable():
    p = sandbox(["sh", "-c", "touch /usr/x 2>&1; touch /etc/x 2>&1; touch /x 2>&1; "
                             "touch /tmp/x && echo tmp-ok"])
    assert p.stdout.count("Read-only file system") == 3, p.stdout
    assert "tmp-ok" in p.stdout


def test_volumes_rw_and_ro(tmp_path):
    rw = tmp_path / "rw"
    ro = tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    (ro / "in.txt").write_text("from host\n")
    p = sandbox(["sh", "-c", "cat /in/in.txt; echo from sandbox > /out/out.txt; "
                             "echo x > /in/new.txt 2>&1 || echo ro-refused"],
                "--volume", f"{rw}:/out", "--volume", f"{ro}:/in:ro")
    assert p.returncode == 0, p.stderr
    assert "from host" in p.stdout and "ro-refused" in p.stdout
    assert (rw / "out.txt").read_text() == "from sandbox\n"
    assert not (ro / "new.txt").exists()


def test_setuid_bits_cannot_be_planted_in_a_volume(tmp_path):
    p = sandbox(["sh", "-c", "cp /usr/bin/id /out/id && chmod u+s /out/id; echo chmod=$?"],
                "--volume", f"{tmp_path}:/out")
    assert "chmod=1" in p.stdout
    assert not os.stat(tmp_path / "id").st_mode & 0o6000


def test_rootfs_image(tmp_path):
    busybox = shutil.which("busybox")
    if not busybox:
        pytest.skip("busybox (Debian's busybox-static) is not installed: no image to test with")
    image = tmp_path / "image"
    (image / "bin").mkdir(parents=True)
    (image / "etc").mkdir()
    shutil.copy(busybox, image / "bin" / "busybox")
    for tool in ("sh", "ls", "cat"):
        os.symlink("busybox", image / "bin" / tool)
    (image / "etc" / "os-release").write_text("ID=agentbox-test-image\n")
    os.chmod(image, 0o755)
    p = sandbox(["/bin/sh", "-c", "cat /etc/os-release; ls /; ls /usr 2>&1; true"],
                "--rootfs", str(image))
    assert p.returncode == 0, p.stderr
    assert "ID=agentbox-test-image" in p.stdout
    assert "No such file" in p.stdout  # the host's /usr is not there


def test_result_file(tmp_path):
    result = tmp_path / "result.json"
    p = sandbox(["sh", "-c", "exit 3"], "--result", str(result))
    assert p.returncode == 3
    r = json.loads(result.read_text())
    assert r["exit_code"] == 3 and r["signal"] is None
    assert r["oom_killed"] is False and r["timed_out"] is False
    for key in ("wall_ms", "cpu_ms", "peak_memory_bytes"):
        assert isinstance(r[key], int) and r[key] >= 0


def test_launcher_killed_takes_its_sandbox_along():
    p = subprocess.Popen([AGENTBOX, "run", "--", "sh", "-c", "echo up; exec sleep 271828"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    inside = helpers.descendants(p.pid)
    assert inside
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 30  # liveness: they go at all (sleep's own end is days away)
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{q}") for q in inside):
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{q}") for q in inside), "sandbox outlived its launcher"
    g = run(["gc"])
    assert g.returncode == 0, g.stderr
    assert g.stdout.startswith("reclaimed ")


def test_sigterm_to_launcher_kills_sandbox():
    p = subprocess.Popen([AGENTBOX, "run", "--", "sh", "-c", "echo up; exec sleep 100"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=5) == 128 + signal.SIGTERM
    assert "agentbox received signal 15" in p.stderr.read()


def test_info_reports_layers():
    p = run(["info"])
    assert p.returncode == 0, p.stdout + p.stderr
    for word in ("user namespaces:  yes", "cgroups:          v", "seccomp:          yes", "landlock:"):
        assert word in p.stdout


def test_help():
    p = run(["run", "--help"])
    assert p.returncode == 0
    assert "--memory SIZE" in p.stdout and "exit status" in p.stdout


def test_a_fifo_volume_carries_lines_out_and_nothing_else(tmp_path):
    """A single FIFO can be a volume: how a task's progress channel works."""
    fifo = tmp_path / "progress"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    p = sandbox(["sh", "-c", "echo '{\"page\": 1}' > /run/agentbox/progress; "
                             "touch /run/agentbox/other 2>&1; true"],
                "--volume", f"{fifo}:/run/agentbox/progress")
    out, _ = reader.communicate(timeout=10)
    assert p.returncode == 0, p.stderr
    assert out == '{"page": 1}\n'
    assert "Read-only file system" in p.stdout
    assert sorted(os.listdir(tmp_path)) == ["progress"]
