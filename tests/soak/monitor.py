"""What the soak measures, and the bounds it holds the measures to.

Every bound is computed from the named limits in the headers that define
them (c_define() reads them, so the C source stays the one source of
truth), and from the options the soak starts agentboxd with.
"""
import ast
import collections
import math
import os
import re
import statistics
import threading
import time

import helpers
from conftest import ROOT

MiB = 1 << 20
BLOCK = 4096  # a file's smallest allocation on the state directory's file system
# What the host's file system may allocate for one file beyond its content:
# extent index blocks, and blocks preallocated past its end (ext4).
FS_SLACK = 16 * BLOCK


def c_define(header, name):
    """The value of `#define NAME <integer expression>` in a header of src/."""
    with open(os.path.join(ROOT, header)) as f:
        m = re.search(rf"^#define\s+{name}\s+(.+?)\s*(?:/\*.*)?$", f.read(), re.M)
    assert m, f"{name} is not defined in {header}"
    expr = re.sub(r"(?<=[0-9])(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU])\b", "", m.group(1))
    ops = {ast.LShift: lambda a, b: a << b, ast.Mult: lambda a, b: a * b,
           ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Div: lambda a, b: a // b}

    def ev(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        raise AssertionError(f"{name} in {header}: cannot read {expr!r}")
    return ev(ast.parse(expr, mode="eval").body)


RSS_CEILING_MB = c_define("src/daemon/daemon.h", "DAEMON_RSS_CEILING_MB")
CONNECTIONS_MAX = c_define("src/daemon/daemon.h", "DAEMON_CONNECTIONS_MAX")
PER_ADDRESS_MAX = c_define("src/daemon/daemon.h", "DAEMON_TCP_PER_ADDRESS_MAX")
HEADER_TIMEOUT_S = c_define("src/daemon/daemon.h", "DAEMON_HEADER_TIMEOUT_S")
IDLE_TIMEOUT_S = c_define("src/daemon/daemon.h", "DAEMON_IDLE_TIMEOUT_S")
WAITERS_MAX = c_define("src/fleet/fleet.h", "FLEET_WAITERS_MAX")
WAITERS_PER_SANDBOX_MAX = c_define("src/fleet/fleet.h", "FLEET_WAITERS_PER_SANDBOX_MAX")
SHIM_OUTPUT_TOTAL_CAP = c_define("src/shim/protocol.h", "SHIM_OUTPUT_TOTAL_CAP")
SHIM_RUNNING_MAX = c_define("src/shim/protocol.h", "SHIM_RUNNING_MAX")
SHIM_PROCS_KEPT = c_define("src/shim/protocol.h", "SHIM_PROCS_KEPT")
ATTEMPT_OUTPUT_CAP = c_define("src/supervisor/attempt.h", "ATTEMPT_OUTPUT_CAP_DEFAULT")
ATTEMPT_EVENTS_CAP = c_define("src/supervisor/attempt.h", "ATTEMPT_EVENTS_CAP")
API_BODY_MAX = c_define("src/api/api.h", "API_BODY_MAX")
API_FILE_MAX = c_define("src/api/api.h", "API_FILE_MAX")
PIDS_HOST_RESERVE_MIN = c_define("src/core/limits.h", "LIMITS_PIDS_HOST_RESERVE_MIN")
STATE_DEFAULT = c_define("src/core/limits.h", "SPEC_DEFAULT_STATE")  # a task's /state image

# ---- the state directory ----------------------------------------------------

# What is not a named cap, per item (see state_bound()).
# each process's 3 files: a last partial block, and an extent index block
SANDBOX_DIR_MAX = (SHIM_OUTPUT_TOTAL_CAP + (SHIM_RUNNING_MAX + SHIM_PROCS_KEPT) * 3 * 2 * BLOCK
                   + 16 * BLOCK)
ATTEMPT_DIR_MAX = ATTEMPT_OUTPUT_CAP + ATTEMPT_EVENTS_CAP + 16 * BLOCK + 2 * FS_SLACK
TASK_DIR_MAX = 4 * BLOCK + STATE_DEFAULT + FS_SLACK
DB_ROW_MAX = 64 << 10
TOP_MAX = 16 * BLOCK


def state_bound(u, db_base, sandboxes_seen):
    """(the whole state directory, the store): what they may hold now, from
    the documented caps (docs/SECURITY.md, "Resource bounds") of what is in
    it now. Blocks allocated are counted, so each small file is a block.

    - a sandbox directory: SHIM_OUTPUT_TOTAL_CAP of output files, and for
      each of the SHIM_RUNNING_MAX + SHIM_PROCS_KEPT processes whose files
      it may keep a block of rounding for .out and for .err and one for
      the .json record (a SHIM_COMMAND_BRIEF and a few fields), and 16
      blocks for sandbox.json, env.json, lock, shim.sock, end.json and
      the directories;
    - a task attempt: ATTEMPT_OUTPUT_CAP_DEFAULT of output and
      ATTEMPT_EVENTS_CAP of progress journal, and 16 blocks for
      attempt.json (the soak's specs are under 1 KiB), result.json, *.len,
      lock, supervisor, supervisor.log and the directory;
    - a task: 4 blocks for its directory, and its /state image, sparse, of
      at most its limits.state_mb (every task of the soak has the
      default, SPEC_DEFAULT_STATE);
    - the store (agentbox.db, -wal, -shm): its size once the daemon is up,
      plus ATTEMPT_EVENTS_CAP per attempt (its copy of the progress), plus
      64 KiB per task or sandbox it knows (the soak's specs are under
      1 KiB; their status events);
    - 16 blocks for the token, the lock and the top directories.
    """
    db = (db_base + len(u["attempts"]) * ATTEMPT_EVENTS_CAP
          + (len(u["tasks"]) + len(sandboxes_seen)) * DB_ROW_MAX)
    files = (len(u["sandboxes"]) * SANDBOX_DIR_MAX + len(u["attempts"]) * ATTEMPT_DIR_MAX
             + len(u["tasks"]) * TASK_DIR_MAX + TOP_MAX)
    return files + db, db


def state_usage(state):
    """Bytes allocated under the state directory, by what they belong to."""
    u = {"total": 0, "db": 0, "sandboxes": collections.Counter(),
         "attempts": collections.Counter(), "output": {}, "events": {}, "images": {},
         "tasks": set()}
    for root, dirs, files in os.walk(state):
        rel = os.path.relpath(root, state)
        parts = [] if rel == "." else rel.split(os.sep)
        for name in dirs + files:
            try:
                b = os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue  # removed while we looked
            p = parts + [name]
            u["total"] += b
            if p[0] == "sandboxes" and len(p) >= 2:
                u["sandboxes"][p[1]] += b
            elif p[0] == "tasks" and len(p) >= 2:
                u["tasks"].add(p[1])
                if len(p) >= 3 and p[2].startswith("attempt-"):
                    key = f"{p[1]}/{p[2]}"
                    u["attempts"][key] += b
                    if len(p) == 4 and name in ("output", "events"):
                        u[name][key] = b
                elif len(p) == 3 and name.startswith("state.img"):
                    u["images"][p[1]] = u["images"].get(p[1], 0) + b
            elif len(p) == 1 and name.startswith("agentbox.db"):
                u["db"] += b
    return u


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# ---- processes ----------------------------------------------------------------

def host_tasks():
    """Every task (process or thread) on the host: each takes a pid."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[1])


def proc_field(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def limits_pids_total(pid_max):
    """limits_pids_total() of core/limits.h: the pids all sandboxes may hold."""
    reserve = max(pid_max // 4, PIDS_HOST_RESERVE_MIN)
    return pid_max - reserve if pid_max > reserve else 1


def read_int(path):
    with open(path) as f:
        v = f.read().strip()
    return math.inf if v == "max" else int(v)


def pids_group_name(pid):
    """The name of pid's group in the pids hierarchy (v1), or of its v2 group."""
    v2 = None
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                hier, ctrls, path = line.rstrip("\n").split(":", 2)
                if "pids" in ctrls.split(","):
                    return os.path.basename(path)
                if hier == "0" and ctrls == "":
                    v2 = os.path.basename(path)
    except OSError:
        return None
    return v2


def cpu_seconds(daemon_pid):
    """CPU seconds so far of the daemon, of its helpers (shims and
    supervisors, the reaped ones through the daemon's cutime), of this
    process (the attackers and the monitor), and of the host in all."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return [int(x) / tick for x in v[11:15]]  # utime stime cutime cstime

    out = {}
    try:
        d = stat(daemon_pid)
        out["daemon"], out["helpers"] = d[0] + d[1], d[2] + d[3]
        for h in helpers.children_map().get(daemon_pid, []):
            try:
                out["helpers"] += sum(stat(h)[:2])
            except OSError:
                pass
    except OSError:
        pass
    out["test process"] = sum(os.times()[:2])
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    out["host"] = (v[0] + v[1] + v[2] + v[5] + v[6]) / tick  # user nice system irq softirq
    return out


def quantiles(values):
    """(n, p50, p99, max) in ms; p99 by nearest rank."""
    if not values:
        return 0, math.nan, math.nan, math.nan
    v = sorted(values)
    return (len(v), statistics.median(v) * 1e3, v[math.ceil(0.99 * len(v)) - 1] * 1e3,
            v[-1] * 1e3)


# ---- the monitor ---------------------------------------------------------------

class Monitor(threading.Thread):
    """Samples the daemon's memory, the state directory, the disk and the
    pids every period, and keeps the first few violations of each bound.

    opts: the daemon's max_pids, max_sandboxes, pool and max_running.
    """

    def __init__(self, daemon, opts, pids_parent, free_before, host_tasks_before, period):
        super().__init__(name="monitor", daemon=True)
        self.d, self.pid, self.opts = daemon, daemon.proc.pid, opts
        self.pids_parent, self.period = pids_parent, period
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.samples = []
        self.violations = collections.defaultdict(list)
        self.sandboxes_seen = set()
        self.db_base = state_usage(daemon.state)["db"]
        self.free_before = free_before              # before the daemon started
        self.host_tasks_before = host_tasks_before  # likewise
        self.threads_at_start = proc_field(self.pid, "Threads")

    def violate(self, kind, msg):
        if len(self.violations[kind]) < 5:
            self.violations[kind].append(msg)

    def run(self):
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(self.period)

    def stop(self):
        self.halt.set()
        self.join(60)
        self.sample()  # and one after everything

    def pid_bounds(self, extra_tasks):
        """(our sandboxes, the host): the most tasks they may hold.

        Our sandboxes: at most max_sandboxes handed out, pool warm ones and
        max_running tasks at once, each a cgroup of at most max_pids. The
        host: what it ran before the daemon, plus that, plus the daemon (its
        threads at start and one per connection on each listener), plus a
        shim or supervisor per sandbox (single-threaded; 2 tasks allowed
        each), plus extra_tasks (the test's own threads and its client),
        plus 64 for the rest of the host.
        """
        o = self.opts
        n = o["max_sandboxes"] + o["pool"] + o["max_running"]
        sandboxes = n * o["max_pids"]
        host = (self.host_tasks_before + sandboxes + self.threads_at_start
                + 2 * CONNECTIONS_MAX + 2 * n + extra_tasks + 64)
        return sandboxes, host

    def sample(self):
        with self.lock:
            self._sample()

    def _sample(self):
        s = {"t": time.monotonic()}
        try:
            s["rss_kib"] = proc_field(self.pid, "VmRSS")
            s["hwm_kib"] = proc_field(self.pid, "VmHWM")
            s["threads"] = proc_field(self.pid, "Threads")
        except (OSError, AssertionError):
            return  # the daemon is gone: the test says so
        if s["rss_kib"] > RSS_CEILING_MB * 1024:
            self.violate("rss", f"VmRSS {s['rss_kib'] / 1024:.0f} MiB > {RSS_CEILING_MB} MiB")
        self._sample_state(s)
        self._sample_pids(s)
        self.samples.append(s)

    def _sample_state(self, s):
        u = state_usage(self.d.state)
        self.sandboxes_seen |= set(u["sandboxes"])
        bound, db_bound = state_bound(u, self.db_base, self.sandboxes_seen)
        s.update(state=u["total"], state_bound=bound, db=u["db"], db_bound=db_bound,
                 sandbox_dirs=len(u["sandboxes"]), attempts=len(u["attempts"]),
                 tasks=len(u["tasks"]), images=sum(u["images"].values()),
                 biggest_sandbox=max(u["sandboxes"].values(), default=0),
                 biggest_output=max(u["output"].values(), default=0),
                 biggest_events=max(u["events"].values(), default=0),
                 biggest_image=max(u["images"].values(), default=0))
        if u["total"] > bound:
            self.violate("state", f"the state directory {u['total'] / MiB:.1f} MiB > "
                         f"{bound / MiB:.1f} MiB")
        if u["db"] > db_bound:
            self.violate("state", f"the store {u['db'] / MiB:.1f} MiB > {db_bound / MiB:.1f} MiB")
        for what, items, cap in (("sandbox", u["sandboxes"], SANDBOX_DIR_MAX),
                                 ("attempt", u["attempts"], ATTEMPT_DIR_MAX),
                                 # the cap, then a one-line marker (supervisor/journal.c)
                                 ("output of attempt", u["output"],
                                  ATTEMPT_OUTPUT_CAP + BLOCK + FS_SLACK),
                                 ("events of attempt", u["events"],
                                  ATTEMPT_EVENTS_CAP + BLOCK + FS_SLACK),
                                 ("state image of task", u["images"], STATE_DEFAULT + FS_SLACK)):
            for key, b in items.items():
                if b > cap:
                    self.violate("state", f"{what} {key}: {b} bytes > {cap}")
        s["free_drop"] = self.free_before - free_bytes(self.d.state)
        if s["free_drop"] > bound + 64 * MiB:  # 64 MiB: the daemon's log and the test's files
            self.violate("disk", f"free disk dropped {s['free_drop'] / MiB:.0f} MiB, bound "
                         f"{bound / MiB:.0f} MiB + 64 MiB")

    def _sample_pids(self, s):
        children = helpers.children_map()
        groups, procs = {}, 0
        for helper in children.get(self.pid, []):  # shims and supervisors
            for init in children.get(helper, []):  # their sandbox's init
                todo = [init]
                while todo:  # the sandbox's processes as the host sees them
                    p = todo.pop()
                    procs += 1
                    todo += children.get(p, [])
                name = pids_group_name(init)
                if not name or not name.startswith("sb-"):
                    continue
                try:
                    groups[name] = (read_int(os.path.join(self.pids_parent, name, "pids.current")),
                                    read_int(os.path.join(self.pids_parent, name, "pids.max")))
                except OSError:
                    continue  # it ended while we looked
        max_pids = self.opts["max_pids"]
        for name, (cur, mx) in groups.items():
            if mx > max_pids or cur > mx:
                self.violate("pids", f"{name}: pids.current {cur}, pids.max {mx}, "
                             f"--max-pids {max_pids}")
        ours = sum(c for c, _ in groups.values())
        sandboxes_bound, host_bound = self.pid_bounds(threading.active_count() + 1)
        if ours > min(len(groups) * max_pids, sandboxes_bound):
            self.violate("pids", f"our sandboxes hold {ours} tasks in {len(groups)} groups")
        parent = read_int(os.path.join(self.pids_parent, "pids.current"))
        parent_max = read_int(os.path.join(self.pids_parent, "pids.max"))
        if parent > parent_max:
            self.violate("pids", f"agentbox's group holds {parent} > its pids.max {parent_max}")
        tasks = host_tasks()
        if tasks > host_bound:
            self.violate("pids", f"the host runs {tasks} tasks > {host_bound}")
        s.update(groups=len(groups), biggest_group=max((c for c, _ in groups.values()), default=0),
                 ours=ours, procs=procs, parent=parent, parent_max=parent_max, host_tasks=tasks,
                 host_bound=host_bound, sandboxes_bound=sandboxes_bound)
