/*
 * probe-proc.c - process and privilege probes: environment and pid
 * isolation, ptrace, kill(-1), capabilities, setuid, core dumps,
 * scheduling, fd and rlimit limits.
 */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_TMP_NAME "agentbox-probe-tmp"

/* ------------------------------------------------------------------ */
/* F2: environment and process list */

static bool env_name_allowed(const char *name, size_t len)
{
	static const char *const base[] = {"PATH", "HOME", "LANG"};
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		if (strlen(base[i]) == len && strncmp(base[i], name, len) == 0)
			return true;
	for (size_t i = 0; i < opt.nallow_env; i++)
		if (strlen(opt.allow_env[i]) == len && strncmp(opt.allow_env[i], name, len) == 0)
			return true;
	return false;
}

void probe_F2(void)
{
	extern char **environ;
	int n = 0;
	bool have_path = false;
	for (char **e = environ; e && *e; e++, n++) {
		size_t len = strcspn(*e, "=");
		if (len == 4 && strncmp(*e, "PATH", 4) == 0)
			have_path = true;
		if (!env_name_allowed(*e, len))
			check(false, "env:%.*s", (int)(len > 40 ? 40 : len), *e);
	}
	check(have_path, "env=%d%s", n, have_path ? "" : "(no-PATH)");

	static char buf[65536];
	long len = slurp("/proc/1/environ", buf, sizeof(buf));
	if (len < 0) {
		obs("/proc/1/environ=%s", errname((int)-len));
	} else {
		int bad = 0;
		for (long off = 0; off < len;) {
			const char *v = buf + off;
			size_t l = strlen(v);
			size_t nl = strcspn(v, "=");
			if (l && !env_name_allowed(v, nl)) {
				bad++;
				if (bad <= 5)
					check(false, "init-env:%.*s", (int)(nl > 40 ? 40 : nl), v);
			}
			off += (long)l + 1;
		}
		obs("/proc/1/environ=readable(%d-foreign)", bad);
	}

	/*
	 * init is a clone of the host process that started the sandbox, and
	 * /proc/1/cmdline shows whatever lies where that process's argv was:
	 * it must be init's own name and NULs, no host path.
	 */
	len = slurp("/proc/1/cmdline", buf, sizeof(buf));
	if (len < 0) {
		check(false, "/proc/1/cmdline=%s", errname((int)-len));
	} else {
		long end = len;
		while (end > 0 && buf[end - 1] == '\0')
			end--;
		bool named = end == (long)strlen("agentbox-init") &&
			     memcmp(buf, "agentbox-init", (size_t)end) == 0 && end < len;
		for (size_t i = 0; i < opt.nsecret_paths; i++)
			if (memmem(buf, (size_t)len, opt.secret_paths[i],
				   strlen(opt.secret_paths[i])))
				check(false, "init-cmdline-has:%.60s", opt.secret_paths[i]);
		if (named)
			obs("/proc/1/cmdline=agentbox-init");
		else
			check(false, "/proc/1/cmdline=%.60s", buf);
	}

	int pids = count_pids();
	check(pids > 0 && pids <= 16, "pids=%d", pids);

	char st[4096], v[256];
	if (slurp("/proc/1/status", st, sizeof(st)) < 0) {
		check(false, "/proc/1=%s", errname(errno));
	} else if (status_field(st, "Name", v, sizeof(v))) {
		obs("init=%s", v);
	}
	if (slurp("/proc/self/status", st, sizeof(st)) > 0 &&
	    status_field(st, "NSpid", v, sizeof(v))) {
		/* A /proc of our own pid namespace shows one level only. */
		bool one = strchr(v, '\t') == NULL && strchr(v, ' ') == NULL;
		check(one && strtol(v, NULL, 10) == getpid(), "nspid=%s", v);
	}
	/* Our ancestry ends at pid 1 within a few steps. */
	pid_t p = getppid();
	int depth = 0;
	while (p > 1 && depth < 64) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/status", p);
		if (slurp(path, st, sizeof(st)) < 0 || !status_field(st, "PPid", v, sizeof(v)))
			break;
		p = (pid_t)strtol(v, NULL, 10);
		depth++;
	}
	check(p == 1 && depth <= 4, "ancestry-depth=%d", depth + 1);
}

/* ------------------------------------------------------------------ */
/* P1: ptrace and process_vm */

static pid_t spawn_sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		alarm(20);
		for (;;)
			pause();
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

void probe_P1(void)
{
	/* SEIZE, not ATTACH: if it were allowed it must not stop anything. */
	expect_err("ptrace-seize:1", ERR(ptrace(PTRACE_SEIZE, 1, NULL, NULL)), "EPERM");
	char buf[16];
	struct iovec local = {buf, sizeof(buf)};
	struct iovec remote = {(void *)0x10, sizeof(buf)}; /* unmapped: allowed -> EFAULT */
	expect_err("process_vm_readv:1", ERR(process_vm_readv(1, &local, 1, &remote, 1, 0)),
		   "EPERM");

	/*
	 * Init is ours (the runtime), not the sandbox's: it must be non-dumpable,
	 * so its exe (CVE-2019-5736), memory, root and fds are out of reach.
	 */
	static const struct {
		const char *path;
		int flags;
	} init_doors[] = {
	    {"/proc/1/exe", O_RDONLY},	 {"/proc/1/exe", O_WRONLY},  {"/proc/1/mem", O_RDWR},
	    {"/proc/1/root/", O_RDONLY}, {"/proc/1/cwd/", O_RDONLY}, {"/proc/1/fd/0", O_RDONLY},
	};
	for (size_t i = 0; i < sizeof(init_doors) / sizeof(init_doors[0]); i++) {
		int fd = open(init_doors[i].path, init_doors[i].flags | O_CLOEXEC | O_NOCTTY);
		int e = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		char what[64];
		snprintf(what, sizeof(what), "%s:%s", init_doors[i].path,
			 init_doors[i].flags == O_RDONLY ? "r" : "w");
		expect_err(what, e, "EACCES|EPERM|ENOENT|ETXTBSY");
	}

	/* Our own child: the kernel would allow this, so only the filter can refuse. */
	pid_t child = spawn_sleeper();
	if (child < 0) {
		check(false, "fork=%s", errname(errno));
		return;
	}
	expect_err("ptrace-seize:child", ERR(ptrace(PTRACE_SEIZE, child, NULL, NULL)), "EPERM");
	expect_err("process_vm_readv:child", ERR(process_vm_readv(child, &local, 1, &remote, 1, 0)),
		   "EPERM");
	expect_err("process_vm_writev:child",
		   ERR(process_vm_writev(child, &local, 1, &remote, 1, 0)), "EPERM");
	reap(child);
	expect_err("ptrace-traceme", ERR(ptrace(PTRACE_TRACEME, 0, NULL, NULL)), "EPERM");
}

/* ------------------------------------------------------------------ */
/* P2: kill(-1, SIGKILL) */

void probe_P2(void)
{
	/*
	 * Runs in the main probe process: kill(-1) spares the caller and the
	 * pid namespace's init, so we survive to report. On a host as root it
	 * would kill everything: refuse unless we are plainly confined.
	 */
	if (privileged_host()) {
		check(false, "refused:euid0-or-caps(not-sandboxed?)");
		return;
	}
	int before = count_pids();
	if (before < 0 || before > 64) {
		check(false, "refused:pids=%d(no-pid-namespace?)", before);
		return;
	}
	pid_t victims[2];
	victims[0] = spawn_sleeper();
	victims[1] = fork();
	if (victims[1] == 0) {
		setsid(); /* another session and process group: still ours to kill */
		alarm(20);
		for (;;)
			pause();
	}
	usleep(50 * 1000);
	signal(SIGPIPE, SIG_IGN);
	expect_err("kill(-1,SIGKILL)", ERR(kill(-1, SIGKILL)), "allowed");
	for (int i = 0; i < 2; i++) {
		int status = 0;
		if (victims[i] < 0) {
			check(false, "fork=failed");
			continue;
		}
		while (waitpid(victims[i], &status, 0) < 0 && errno == EINTR)
			;
		bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		check(killed, "victim%d=%s", i, killed ? "killed" : "survived");
	}
	char st[4096];
	bool init_alive = slurp("/proc/1/status", st, sizeof(st)) > 0;
	check(init_alive, "init=%s", init_alive ? "alive" : "gone");
	obs("self=alive");
	obs("pids-before=%d,pids-after=%d", before, count_pids());
}

/* ------------------------------------------------------------------ */
/* E1: capabilities, no_new_privs, seccomp, seen from inside */

void probe_E1(void)
{
	char st[8192], v[128];
	if (slurp("/proc/self/status", st, sizeof(st)) < 0) {
		check(false, "status=%s", errname(errno));
		return;
	}
	static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	/* as root: exactly the chosen caps permitted, effective and bounding */
	static const bool root_has[] = {false, true, true, true, false};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (!status_field(st, caps[i], v, sizeof(v))) {
			check(false, "%s=missing", caps[i]);
			continue;
		}
		uint64_t want = opt.as_root && root_has[i] ? opt.root_caps : 0;
		check(strtoull(v, NULL, 16) == want && strlen(v) == 16, "%s=%s", caps[i], v);
	}
	check(status_field(st, "NoNewPrivs", v, sizeof(v)) && strcmp(v, "1") == 0, "NoNewPrivs=%s",
	      status_field(st, "NoNewPrivs", v, sizeof(v)) ? v : "?");
	check(status_field(st, "Seccomp", v, sizeof(v)) && strcmp(v, "2") == 0, "Seccomp=%s",
	      status_field(st, "Seccomp", v, sizeof(v)) ? v : "?");
	if (status_field(st, "Seccomp_filters", v, sizeof(v)))
		obs("filters=%s", v);
	const char *ids = opt.as_root ? "0\t0\t0\t0" : "1000\t1000\t1000\t1000";
	if (status_field(st, "Uid", v, sizeof(v)))
		check(strncmp(v, ids, strlen(ids)) == 0, "Uid=%.19s", v);
	if (status_field(st, "Gid", v, sizeof(v)))
		check(strncmp(v, ids, strlen(ids)) == 0, "Gid=%.19s", v);
	if (status_field(st, "Groups", v, sizeof(v)))
		obs("Groups=%s", v[0] ? v : "none");
	int sb = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	obs("securebits=%#x", sb < 0 ? 0 : sb);
	obs("dumpable=%d", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
}

/* ------------------------------------------------------------------ */
/* E2: no way back to root */

/* Does an id map (uid_map text) send any id to host 0? Also report ours. */
static void check_idmap(const char *file, unsigned ours)
{
	char buf[4096];
	long n = slurp(file, buf, sizeof(buf));
	if (n < 0) {
		obs("%s=%s", file, errname((int)-n));
		return;
	}
	bool host_root = false;
	long host_ours = -1;
	for (char *line = buf; line && *line;) {
		unsigned long in, out, count;
		if (sscanf(line, "%lu %lu %lu", &in, &out, &count) == 3) {
			if (out == 0 && count > 0)
				host_root = true;
			if (ours >= in && ours - in < count)
				host_ours = (long)(out + (ours - in));
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	check(!host_root, "%s:maps-host-root=%s", file, host_root ? "yes" : "no");
	check(host_ours != 0, "%s:host-id=%ld", file, host_ours);
}

static int write_file_err(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int e = 0;
	if (write(fd, s, strlen(s)) < 0)
		e = errno;
	close(fd);
	return e;
}

static void probe_E2_common(void);

/* As root: once another uid, no way back, and no capability left. */
static int leave_root(void *arg)
{
	(void)arg;
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 1000, 1000, 1000) < 0 ||
	    syscall(SYS_setresuid, 1000, 1000, 1000) < 0)
		return 1;
	if (syscall(SYS_setuid, 0) == 0 || errno != EPERM)
		return 2;
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0 || data[0].effective || data[0].permitted ||
	    data[1].effective || data[1].permitted)
		return 3;
	return 0;
}

void probe_E2(void)
{
	if (opt.as_root) {
		int r = in_child(leave_root, NULL);
		check(r == 0, "leave-root=%s",
		      r == 0   ? "for-good"
		      : r == 1 ? "cannot-switch"
		      : r == 2 ? "came-back"
			       : "caps-kept");
	} else {
		/* 0 unmapped in our namespace gives EINVAL, mapped but forbidden EPERM. */
		expect_err("setuid(0)", ERR(syscall(SYS_setuid, 0)), "EPERM|EINVAL");
		expect_err("setresuid(0)", ERR(syscall(SYS_setresuid, 0, 0, 0)), "EPERM|EINVAL");
		expect_err("setgid(0)", ERR(syscall(SYS_setgid, 0)), "EPERM|EINVAL");
		expect_err("setresgid(0)", ERR(syscall(SYS_setresgid, 0, 0, 0)), "EPERM|EINVAL");
		expect_err("setgroups", ERR(syscall(SYS_setgroups, 0, NULL)), "EPERM");
	}
	probe_E2_common();
}

/* Both modes: no capability beyond ours, no securebits change, no id map. */
static void probe_E2_common(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0) {
		obs("capget=%s", errname(errno));
	} else {
		for (int i = 0; i < 2; i++)
			data[i].effective = data[i].permitted = data[i].inheritable = 0xffffffffu;
		expect_err("capset-all", ERR(syscall(SYS_capset, &hdr, data)), "EPERM");
	}
	expect_err("ambient-raise",
		   ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0)), "EPERM");
	expect_err("securebits-clear", ERR(prctl(PR_SET_SECUREBITS, 0, 0, 0, 0)), "EPERM");

	expect_err("write:uid_map", write_file_err("/proc/self/uid_map", "0 0 1\n"),
		   "EPERM|EACCES");
	expect_err("write:gid_map", write_file_err("/proc/self/gid_map", "0 0 1\n"),
		   "EPERM|EACCES");
	expect_err("write:setgroups", write_file_err("/proc/self/setgroups", "allow\n"),
		   "EPERM|EACCES");
	check_idmap("/proc/self/uid_map", (unsigned)getuid());
	check_idmap("/proc/self/gid_map", (unsigned)getgid());
}

/* ------------------------------------------------------------------ */
/* E3: setuid binaries */

/* Exec a setuid binary; read its creds as a zombie. */
static void exec_setuid(const char *path)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		check(false, "pipe=%s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		char *const argv[] = {(char *)path, (char *)"--help", NULL};
		char *const envp[] = {NULL};
		execve(path, argv, envp);
		int e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	int e = 0;
	ssize_t n = read(pfd[0], &e, sizeof(e));
	close(pfd[0]);
	if (pid < 0 || n == (ssize_t)sizeof(e)) {
		obs("exec:%s=%s", path, errname(pid < 0 ? errno : e));
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return;
	}
	/* Wait for it to end but leave the zombie: its creds stay readable. */
	siginfo_t si;
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	char spath[64], st[4096], name[64] = "?", uid[128] = "?", cap[64] = "?";
	snprintf(spath, sizeof(spath), "/proc/%d/status", pid);
	if (slurp(spath, st, sizeof(st)) > 0) {
		status_field(st, "Name", name, sizeof(name));
		status_field(st, "Uid", uid, sizeof(uid));
		status_field(st, "CapEff", cap, sizeof(cap));
	}
	waitpid(pid, NULL, 0);
	unsigned long r = 0, eu = 0, su = 0;
	bool parsed = sscanf(uid, "%lu %lu %lu", &r, &eu, &su) == 3;
	/* as root (--as-root), no more than root's own caps */
	uint64_t caps_had = opt.as_root ? opt.root_caps : 0;
	char *end;
	uint64_t caps = strtoull(cap, &end, 16);
	bool gained = !parsed || eu != (unsigned long)geteuid() || su != (unsigned long)geteuid() ||
		      end == cap || *end != '\0' || caps != caps_had;
	check(!gained, "exec:%s(%s)=euid:%lu,CapEff:%s", path, name, eu, cap);
}

void probe_E3(void)
{
	static const char *const bins[] = {"/usr/bin/passwd", "/usr/bin/su",   "/usr/bin/mount",
					   "/usr/bin/newgrp", "/usr/bin/chsh", "/usr/bin/sudo",
					   "/usr/bin/pkexec"};
	int tried = 0;
	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]) && tried < 2; i++) {
		struct stat st;
		if (stat(bins[i], &st) < 0 || !(st.st_mode & S_ISUID))
			continue;
		exec_setuid(bins[i]);
		tried++;
	}
	if (!tried)
		obs("no-setuid-binary-in-image");

	/* Making our own setuid file: the filter refuses the mode bits. */
	const char *f = "/tmp/" PROBE_TMP_NAME "-suid";
	unlink(f);
	int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (fd < 0) {
		check(false, "create:%s=%s", f, errname(errno));
	} else {
		expect_err("chmod-u+s", ERR(chmod(f, 04755)), "EPERM");
		expect_err("chmod-g+s", ERR(chmod(f, 02755)), "EPERM");
		expect_err("fchmod-u+s", ERR(fchmod(fd, 04755)), "EPERM");
		expect_err("fchmodat-u+s", ERR(fchmodat(AT_FDCWD, f, 04755, 0)), "EPERM");
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
		expect_err("fchmodat2-u+s", ERR(syscall(SYS_fchmodat2, AT_FDCWD, f, 04755, 0)),
			   "EPERM|ENOSYS");
		close(fd);
		struct stat st;
		if (stat(f, &st) == 0)
			check(!(st.st_mode & (S_ISUID | S_ISGID)), "mode=%04o", st.st_mode & 07777);
		unlink(f);
	}
	const char *g = "/tmp/" PROBE_TMP_NAME "-suid2";
	int e = ERR(fd = open(g, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 04755));
	if (fd >= 0) {
		struct stat st;
		if (fstat(fd, &st) == 0 && (st.st_mode & S_ISUID))
			e = 0;
		else
			e = -1; /* created, but the kernel dropped the bit */
		close(fd);
		unlink(g);
	}
	if (e == -1)
		obs("open-creat-04755=created-without-suid");
	else
		expect_err("open-creat-04755", e, "EPERM");

	/* Every writable place is nosuid, so even a setuid file would not work. */
	const char *mounts[] = {"/", "/usr", "/tmp", "/dev/shm", "."};
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		struct statvfs vfs;
		if (statvfs(mounts[i], &vfs) < 0)
			continue;
		check(vfs.f_flag & ST_NOSUID, "nosuid:%s=%s", mounts[i],
		      (vfs.f_flag & ST_NOSUID) ? "yes" : "no");
	}
}

/* ------------------------------------------------------------------ */
/* E4: no core dumps */

void probe_E4(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_CORE, &rl) < 0) {
		check(false, "getrlimit=%s", errname(errno));
		return;
	}
	check(rl.rlim_max == 0, "core-hard=%llu", (unsigned long long)rl.rlim_max);
	check(rl.rlim_cur == 0, "core-soft=%llu", (unsigned long long)rl.rlim_cur);
	struct rlimit up = {1 << 20, 1 << 20};
	if (rl.rlim_max == 0)
		expect_err("raise-core", ERR(setrlimit(RLIMIT_CORE, &up)), "EPERM");
	obs("dumpable=%d", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
	if (rl.rlim_max != 0)
		return; /* do not write a core file on a host */
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	check(WIFSIGNALED(status) && !WCOREDUMP(status), "abort-core=%s",
	      WIFSIGNALED(status) && WCOREDUMP(status) ? "dumped" : "none");
}

/* ------------------------------------------------------------------ */
/* R6: scheduling priority */

void probe_R6(void)
{
	expect_err("nice-20", ERR(setpriority(PRIO_PROCESS, 0, -20)), "EPERM|EACCES");
	struct sched_param sp = {.sched_priority = 1};
	expect_err("SCHED_FIFO", ERR(sched_setscheduler(0, SCHED_FIFO, &sp)), "EPERM");
	expect_err("SCHED_RR", ERR(sched_setscheduler(0, SCHED_RR, &sp)), "EPERM");
	/* ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_RT << 13) */
	expect_err("ioprio-rt", ERR(syscall(SYS_ioprio_set, 1, 0, (1 << 13) | 0)), "EPERM");
}

/* ------------------------------------------------------------------ */
/* R7: fd exhaustion */

void probe_R7(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	obs("nofile=%llu/%llu", (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	int base = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (base < 0) {
		check(false, "/dev/null=%s", errname(errno));
		return;
	}
	long opened = 1;
	int last = 0;
	while (opened < (1L << 20)) {
		if (fcntl(base, F_DUPFD_CLOEXEC, 0) < 0) {
			last = errno;
			break;
		}
		opened++;
	}
	obs("opened=%ld", opened);
	if (last == 0)
		check(false, "no-EMFILE-after=%ld", opened);
	else
		expect_err("open", last, "EMFILE");
	/* Others still can: the limit was ours, not the system's. */
}

/* ------------------------------------------------------------------ */
/* R10: cgroups and hard rlimits */

static int raise_hard(void *arg)
{
	int res = *(int *)arg;
	struct rlimit rl;
	if (getrlimit(res, &rl) < 0)
		return errno;
	if (rl.rlim_max == RLIM_INFINITY)
		return 255; /* cannot be raised further: untestable */
	rl.rlim_max += 1;
	return setrlimit(res, &rl) < 0 ? errno : 0;
}

void probe_R10(void)
{
	static const char *const files[] = {
	    "/sys/fs/cgroup",
	    "/sys/fs/cgroup/cgroup.procs",
	    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
	    "/sys/fs/cgroup/pids/pids.max",
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int fd = open(files[i], O_WRONLY | O_CLOEXEC | O_NONBLOCK);
		int e = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		if (e == EISDIR) {
			struct stat st;
			e = stat(files[i], &st) < 0 ? errno : 0;
		}
		if (e == 0)
			check(false, "%s=exists", files[i]);
		else
			expect_err(files[i], e, "ENOENT");
	}
	static const struct {
		const char *name;
		int res;
	} lims[] = {{"core", RLIMIT_CORE},	 {"nofile", RLIMIT_NOFILE},
		    {"nproc", RLIMIT_NPROC},	 {"fsize", RLIMIT_FSIZE},
		    {"memlock", RLIMIT_MEMLOCK}, {"rtprio", RLIMIT_RTPRIO}};
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
		int res = lims[i].res;
		int e = in_child(raise_hard, &res);
		char what[64];
		snprintf(what, sizeof(what), "raise-hard-%s", lims[i].name);
		if (e == 255)
			obs("%s=unlimited", what);
		else
			expect_err(what, e < 0 ? EINTR : e, "EPERM");
	}
	char buf[4096];
	if (slurp("/proc/self/cgroup", buf, sizeof(buf)) > 0) {
		bool all_root = true;
		for (char *line = buf; line && *line;) {
			char *path = strchr(line, ':');
			path = path ? strchr(path + 1, ':') : NULL;
			if (path && strncmp(path + 1, "/\n", 2) != 0)
				all_root = false;
			line = strchr(line, '\n');
			if (line)
				line++;
		}
		obs("cgroup-ns=%s", all_root ? "yes" : "paths-visible");
	}
}
