"""bench/benchlib.py - what bench/run and bench/sandboxes share.

Building the benchmark's build directory, the peers (bubblewrap, crun and
the fork+exec floor) as agentbox-timeit contenders, the machine facts of a
report's header, a busybox-static OCI image to import, and small helpers
for progress and the report. Python 3 standard library only. See
bench/README.md.
"""

import datetime
import hashlib
import io
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFLIGHT_TIMEOUT_S = 30
CGROUP_ROOT = "/sys/fs/cgroup"


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def loud_skip(name, why):
    print(f"\nbench: *** SKIPPING {name}: {why}\n", file=sys.stderr, flush=True)


def shown_path(path):
    """A path relative to the repository when inside it, for the report."""
    rel = os.path.relpath(path, REPO)
    return path if rel.startswith("..") else rel


def one_line(text, limit=300):
    """text on one line for the report, shortened to limit characters."""
    flat = " / ".join(x.strip() for x in text.splitlines() if x.strip())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


def fmt_ratio(x, base):
    return f"{x / base:.2f}x" if base else "n/a"


# ---------------------------------------------------------------- building

def configure(builddir):
    """Configures builddir with meson unless it has a build.ninja already."""
    if os.path.exists(os.path.join(builddir, "build.ninja")):
        return
    cmd = ["meson", "setup", builddir, REPO]
    if os.path.exists(os.path.join(builddir, "meson-private", "coredata.dat")):
        cmd.insert(2, "--reconfigure")
    log("configuring: " + shlex.join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: meson setup failed:\n{tail(r.stdout + r.stderr)}")


def ninja(builddir, *targets):
    """Builds targets in builddir: (ok, ninja's output without its chatter)."""
    r = subprocess.run(["ninja", "-C", builddir, *targets], capture_output=True, text=True)
    out = "\n".join(x for x in (r.stdout + r.stderr).splitlines()
                    if not x.startswith("ninja: Entering directory"))
    return r.returncode == 0, out


def build(builddir):
    """Configures builddir if needed and builds agentbox-timeit.

    Returns (timeit path, agentbox path or None, why agentbox is missing).
    """
    configure(builddir)
    ok, out = ninja(builddir, "bench/agentbox-timeit")
    if not ok:
        sys.exit(f"bench: building agentbox-timeit failed:\n{tail(out)}")
    timeit = os.path.join(builddir, "bench", "agentbox-timeit")

    if os.environ.get("AGENTBOX_BIN"):
        return timeit, os.environ["AGENTBOX_BIN"], None
    ok, out = ninja(builddir, "src/cli/agentbox")
    if not ok:
        return timeit, None, "building it failed:\n" + tail(out)
    return timeit, os.path.join(builddir, "src", "cli", "agentbox"), None


def build_options(builddir):
    """buildtype and sanitizers of builddir, from meson's introspection file."""
    try:
        with open(os.path.join(builddir, "meson-info", "intro-buildoptions.json")) as f:
            opts = {o["name"]: o["value"] for o in json.load(f)}
    except (OSError, ValueError, KeyError):
        return {}
    return {k: opts.get(k) for k in ("buildtype", "optimization", "b_sanitize")}


def warn_if_sanitized(builddir, buildopts):
    if buildopts.get("b_sanitize") not in (None, "none"):
        log(f"WARNING: {shown_path(builddir)} is built with sanitizers "
            f"({buildopts['b_sanitize']}): agentbox will look slow")


# ---------------------------------------------------------------- peers

def ensure_tool(tool, package, may_install):
    """Returns the tool's path, installing its Debian package if it is absent."""
    path = shutil.which(tool)
    if path or not may_install:
        return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    log(f"{tool} is missing: {shlex.join(install)}")
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        subprocess.run(install, env=env, capture_output=True)
    return shutil.which(tool)


def tool_version(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def bwrap_argv(bwrap):
    """bwrap --unshare-all with /usr read-only and the host's top-level links."""
    argv = [bwrap, "--unshare-all", "--ro-bind", "/usr", "/usr"]
    for d in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        host = "/" + d
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    return argv + ["--proc", "/proc", "--dev", "/dev", "/bin/true"]


def make_crun_bundle(crun, workdir):
    """An OCI bundle: crun's default spec, running /bin/true, /usr bound read-only."""
    bundle = os.path.join(workdir, "bundle")
    rootfs = os.path.join(bundle, "rootfs")
    os.makedirs(rootfs)
    for d in ("usr", "proc", "dev", "sys", "tmp"):
        os.mkdir(os.path.join(rootfs, d))
    for d in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        host = "/" + d
        if os.path.islink(host):
            os.symlink(os.readlink(host), os.path.join(rootfs, d))
        elif os.path.isdir(host):
            os.mkdir(os.path.join(rootfs, d))
    r = subprocess.run([crun, "spec"], cwd=bundle, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("crun spec failed: " + tail(r.stderr))
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    spec["process"]["terminal"] = False
    spec["process"]["args"] = ["/bin/true"]
    spec["root"] = {"path": "rootfs", "readonly": True}
    binds = ["/usr"] + [
        "/" + d for d in ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
        if not os.path.islink("/" + d) and os.path.isdir("/" + d)
    ]
    for src in binds:
        spec["mounts"].append({"destination": src, "type": "bind", "source": src,
                               "options": ["rbind", "ro", "nosuid", "nodev"]})
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
    return bundle


def cgroup_mode():
    """'v2', 'v1', or 'hybrid' (v1 controllers plus cgroup2 at unified)."""
    mounts = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            mounts[fields[1]] = fields[2]
    if mounts.get(CGROUP_ROOT) == "cgroup2":
        return "v2"
    if mounts.get(CGROUP_ROOT + "/unified") == "cgroup2":
        return "hybrid"
    return "v1"


def hybrid_has_v2_controllers():
    try:
        with open(CGROUP_ROOT + "/unified/cgroup.controllers") as f:
            return f.read().strip()
    except OSError:
        return ""


class MountNamespaceHelper:
    """A mount namespace where cgroup2 at /sys/fs/cgroup/unified is unmounted.

    crun refuses hybrid cgroups while cgroup2 has controllers ("cgroups in
    hybrid mode not supported"); without the unified mount it sees plain v1
    and manages its cgroups there. The namespace is held by a helper process
    and entered by agentbox-timeit (--mntns) in each crun child only.
    """

    def __init__(self):
        script = f"umount -l {CGROUP_ROOT}/unified && echo ready && exec cat >/dev/null"
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            err = self.proc.stderr.read()
            self.close()
            raise RuntimeError("could not make a mount namespace without cgroup2: " + tail(err))
        self.path = f"/proc/{self.proc.pid}/ns/mnt"
        if os.readlink(self.path) == os.readlink("/proc/self/ns/mnt"):
            self.close()
            raise RuntimeError("helper did not get its own mount namespace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def crun_leftovers(crun, state, mntns):
    """crun run deletes its container on exit; say so loudly if one was left."""
    argv = [crun, "--root", state, "list", "-q"]
    if mntns:
        argv = ["nsenter", "--mount=" + mntns, "--"] + argv
    r = subprocess.run(argv, capture_output=True, text=True)
    left = r.stdout.split()
    if left:
        log(f"WARNING: crun left {len(left)} container(s) behind; deleting them")
        for cid in left:
            subprocess.run(argv[:-2] + ["delete", "-f", cid], capture_output=True)


# ---------------------------------------------------------------- contenders

class Contender:
    def __init__(self, name, label, argv, mntns=None):
        self.name = name    # key in agentbox-timeit's output
        self.label = label  # what the report shows: no machine paths
        self.argv = argv
        self.mntns = mntns
        self.result = None

    def timeit_spec(self):
        spec = ["--name", self.name]
        if self.mntns:
            spec += ["--mntns", self.mntns]
        return spec + ["--"] + self.argv

    def preflight(self):
        """Runs once, visibly; returns None or why it cannot be benchmarked."""
        argv = [a.replace("{run}", "preflight") for a in self.argv]
        if self.mntns:
            argv = ["nsenter", "--mount=" + self.mntns, "--"] + argv
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=PREFLIGHT_TIMEOUT_S,
                               stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        if r.returncode != 0:
            return f"exit status {r.returncode}: {tail(r.stderr + r.stdout, 8) or '(no output)'}"
        return None


AGENTBOX_LABEL = "`agentbox run -- /bin/true`"
BWRAP_LABEL = ("`bwrap --unshare-all` (ro /usr, /bin /lib /lib64 /sbin links, "
               "--proc, --dev) `/bin/true`")
CRUN_LABEL = "`crun run` of an OCI bundle (crun's default spec, ro /usr) `/bin/true`"
FLOOR_LABEL = "fork+exec `/bin/true` (the floor)"


def peer_contenders(agentbox, agentbox_missing, may_install, workdir, cleanups, crun=True):
    """The contenders of bench/run, in its order: agentbox, bwrap, crun, the floor.

    crun=False leaves crun out. A contender that cannot run is skipped
    loudly. Undo steps are appended to cleanups. Returns (contenders that
    passed their preflight, [(name, why skipped)], [version strings]).
    """
    contenders, skipped, versions = [], [], []

    # agentbox
    if agentbox:
        versions.append(tool_version([agentbox, "--version"]))
        contenders.append(Contender("agentbox", AGENTBOX_LABEL,
                                    [agentbox, "run", "--", "/bin/true"]))
        if os.environ.get("AGENTBOX_BIN"):
            log(f"agentbox from AGENTBOX_BIN: {agentbox}")
    else:
        loud_skip("agentbox", agentbox_missing)
        skipped.append(("agentbox", agentbox_missing))

    # bwrap
    bwrap = ensure_tool("bwrap", "bubblewrap", may_install)
    if bwrap:
        versions.append(tool_version([bwrap, "--version"]))
        contenders.append(Contender("bwrap", BWRAP_LABEL, bwrap_argv(bwrap)))
    else:
        loud_skip("bwrap", "bwrap is not installed (apt-get install bubblewrap)")
        skipped.append(("bwrap", "bwrap is not installed"))

    # crun
    if crun:
        crun = ensure_tool("crun", "crun", may_install)
        if crun:
            versions.append(tool_version([crun, "--version"]))
            try:
                bundle = make_crun_bundle(crun, workdir)
                state = os.path.join(workdir, "crun-state")
                os.mkdir(state)
                mntns = None
                if cgroup_mode() == "hybrid" and hybrid_has_v2_controllers():
                    helper = MountNamespaceHelper()
                    cleanups.append(helper.close)
                    mntns = helper.path
                    log("crun runs in a mount namespace without cgroup2 (hybrid cgroups; "
                        "see bench/README.md)")
                argv = [crun, "--root", state, "run", "--bundle", bundle, "agentbox-bench-{run}"]
                contenders.append(Contender("crun", CRUN_LABEL, argv, mntns))
                cleanups.append(lambda: crun_leftovers(crun, state, mntns))
            except (OSError, RuntimeError) as e:
                loud_skip("crun", str(e))
                skipped.append(("crun", str(e)))
        else:
            loud_skip("crun", "crun is not installed (apt-get install crun)")
            skipped.append(("crun", "crun is not installed"))

    # the floor
    contenders.append(Contender("floor", FLOOR_LABEL, ["/bin/true"]))

    ready = []
    for c in contenders:
        why = c.preflight()
        if why:
            loud_skip(c.name, "its preflight run failed: " + why)
            skipped.append((c.name, "its preflight run failed: " + why))
        else:
            ready.append(c)
    return ready, skipped, versions


# ---------------------------------------------------------------- the report

def machine_facts(script, argv, builddir, buildopts):
    """The header lines every report starts with, as a list of '- ...' lines."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / (1 << 20):.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/etc/debian_version") as f:
            distro = "Debian " + f.read().strip()
    except OSError:
        distro = platform.system()
    mode = cgroup_mode()
    cg = {"v2": "v2 (unified)", "v1": "v1",
          "hybrid": "v1 controllers + cgroup2 at /sys/fs/cgroup/unified (hybrid)"}[mode]
    ncpu = len(os.sched_getaffinity(0))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    cmd = script + ("" if not argv else " " + shlex.join(argv))
    opts = ", ".join(f"{k}={v}" for k, v in buildopts.items() if v is not None) or "unknown"
    return [
        f"- date: {now}",
        f"- command: `{cmd}` (build dir `{shown_path(builddir)}`: {opts})",
        f"- machine: {distro}, kernel {platform.release()}, nproc {ncpu}, {cpu}{mem}",
        f"- cgroups: {cg}",
        f"- load average at start (1/5/15 min): {load}",
    ]


# ---------------------------------------------------------------- an image

def _tar_bytes(entries):
    """A tar of [(path, kind, data_or_target, mode)], kind 'file', 'dir' or 'symlink', root's."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, kind, data, mode in entries:
            info = tarfile.TarInfo(path)
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, data
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def busybox_image(name, files=None):
    """An OCI image layout, as the tar `agentbox image import` takes, of a busybox-static
    userland (Debian's busybox-static: /bin/busybox and a symlink per applet, a small /etc),
    plus files ({path in the image: bytes}), with Env PATH=/bin. None without busybox."""
    busybox = shutil.which("busybox")
    if not busybox:
        return None
    with open(busybox, "rb") as f:
        binary = f.read()
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    entries = [(d, "dir", None, 0o755) for d in ("bin", "etc", "root", "var", "data")]
    entries.append(("tmp", "dir", None, 0o1777))
    entries.append(("bin/busybox", "file", binary, 0o755))
    entries += [(f"bin/{a}", "symlink", "busybox", 0o777) for a in applets if a != "busybox"]
    etc = {"etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n", "etc/group": b"root:x:0:\n"}
    entries += [(p, "file", data, 0o644) for p, data in {**etc, **(files or {})}.items()]
    layer = _tar_bytes(entries)

    def sha(data):
        return hashlib.sha256(data).hexdigest()

    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2026-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{sha(layer)}"]},
    }).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{sha(config)}", "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{sha(layer)}", "size": len(layer)}],
    }).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": f"sha256:{sha(manifest)}", "size": len(manifest),
                       "annotations": {"org.opencontainers.image.ref.name": name}}],
    }).encode()
    return _tar_bytes([
        ("oci-layout", "file", b'{"imageLayoutVersion":"1.0.0"}', 0o644),
        ("index.json", "file", index, 0o644),
        ("blobs", "dir", None, 0o755),
        ("blobs/sha256", "dir", None, 0o755),
        *[(f"blobs/sha256/{sha(b)}", "file", b, 0o644) for b in (manifest, config, layer)],
    ])
