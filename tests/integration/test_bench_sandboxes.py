"""bench/sandboxes, the interactive-sandbox API benchmark, run quickly: it
must time every row, print numbers for each, and leave nothing behind
(the suite's own end-of-session check looks for cgroups and mounts)."""
import json
import os
import re
import subprocess

from conftest import BUILD, ROOT

SCRIPT = os.path.join(ROOT, "bench", "sandboxes")
ROWS = ["healthz", "pool_create_exec", "cold_create_exec", "pool_create", "cold_create",
        "exec", "put_small", "get_small", "put_large", "get_large", "delete"]
NUMBER = re.compile(r"^\d+\.\d+$")


def shims_of(workdir_prefix):
    """Pids of agentbox-shim processes whose sandbox dir is under a bench state dir."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"agentbox-shim") and len(argv) > 1 and workdir_prefix in argv[1]:
            pids.append(int(entry))
    return pids


def test_bench_sandboxes_quick_run(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ, TMPDIR=str(tmp_path))  # its state dir lands in tmp_path
    # --no-build: the suite tests the build it was given (and may run where ninja is not)
    r = subprocess.run([SCRIPT, "-n", "5", "-w", "1", "--no-peers", "--no-build", "--builddir", BUILD,
                        "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "LEFT BEHIND" not in r.stderr, r.stderr[-3000:]

    report = r.stdout
    assert report.startswith("# agentbox interactive sandboxes (API)\n"), report
    for fact in ("- date:", "- machine:", "- cgroups:", "- versions:", "- method:"):
        assert f"\n{fact}" in report, report

    results = json.loads(out.read_text())["results"]
    table = [line for line in report.splitlines() if line.startswith("| ")][1:]
    assert len(table) == len(ROWS), report
    for key, line in zip(ROWS, table):
        res = results[key]
        n = 4 * 5 if key == "delete" else 5  # a delete after each of the four create rows
        assert res["n"] == n and len(res["samples_ms"]) == n, (key, res)
        assert 0 < res["p50_ms"] <= res["p99_ms"], (key, res)
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == res["label"], (key, line)
        # p50, p99, mean, and the ratios against pooled create+exec
        assert all(NUMBER.match(c) for c in cells[1:4]), line
        assert all(re.match(r"^\d+\.\d+x$", c) for c in cells[4:6]), line
        # MiB/s, for the 10 MiB transfers only
        assert cells[-1].isdigit() if key.endswith("_large") else cells[-1] == "-", line

    # the daemon was stopped and every sandbox ended: no shim of its state dir is left
    assert shims_of(str(tmp_path).encode()) == []
    assert not any(p.name.startswith("agentbox-bench-") for p in tmp_path.iterdir())


def test_bench_sandboxes_usage():
    r = subprocess.run([SCRIPT, "-n", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--runs must be at least 1" in r.stderr, r.stderr
