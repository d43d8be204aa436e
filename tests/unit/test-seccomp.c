/*
 * test-seccomp.c - the baked system call filter, probed from forked children.
 *
 * Each case forks a child that installs the filter and makes raw system
 * calls; the child sends each call's errno (0 for success) back through a
 * pipe and the parent checks them. Probes are built so that an allowed call
 * and a refused one look different: allowed probes either succeed or fail
 * with an ordinary error (EBADF, EFAULT, ENOTTY...), which must match what a
 * control child without the filter gets, while refused probes must fail
 * with exactly EPERM or ENOSYS. Refused probes are never run without the
 * filter, and their arguments are invalid anyway (bad pointers, bad fds,
 * bad magic), so a hole in the filter cannot touch the machine.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "seccomp/seccomp.h"

/* x86_64 numbers that Debian 12's headers predate. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_lsm_set_self_attr
#define SYS_lsm_set_self_attr 460
#endif
#ifndef SYS_mseal
#define SYS_mseal 462
#endif
#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

#define X32_SYSCALL_BIT 0x40000000L

/*
 * Placeholders a probe may use as an argument; the child replaces them with
 * things it set up before installing the filter.
 */
/* clang-format off */
#define PIPE_R    (-1001L) /* read end of a pipe holding some bytes */
#define PIPE_W    (-1002L) /* write end of that pipe */
#define FILE_FD   (-1003L) /* an open (O_RDWR) regular file */
#define DIR_FD    (-1004L) /* the scratch directory */
#define FILE_PATH (-1005L) /* name of that regular file */
#define NEW_NAME  (-1006L) /* a name not yet used, different for each probe */
#define BUF       (-1007L) /* 4 KiB of writable memory */
#define DOT       (-1008L) /* the name "." */
#define BADPTR    (1L)     /* never mapped: the kernel answers EFAULT */
/* clang-format on */

enum expect {
	WORKS,	 /* must succeed, with and without the filter */
	AS_IS,	 /* must give what it gives without the filter */
	REFUSED, /* must fail with errno err; never run without the filter */
};

struct probe {
	const char *what;
	long nr;
	long a[6];
	enum expect expect;
	int err;
};

/* clang-format off */
#define OK(what, nr, ...)        {what, nr, {__VA_ARGS__}, WORKS, 0}
#define SAME(what, nr, ...)      {what, nr, {__VA_ARGS__}, AS_IS, 0}
#define NO(what, err, nr, ...)   {what, nr, {__VA_ARGS__}, REFUSED, err}
/* clang-format on */

struct fixture {
	int pipe_r, pipe_w, file_fd, dir_fd;
	char file_path[32];
	char prefix;
	long buf[512];
};

static char scratch_dir[64];

/* ---- running code in a child ---------------------------------------- */

#define CHILD_CHECK(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			dprintf(STDERR_FILENO, "child: line %d: %s failed (errno %d)\n", __LINE__, \
				#cond, errno);                                                     \
			_exit(100);                                                                \
		}                                                                                  \
	} while (0)

static void child_install(void)
{
	struct error err = {0};
	int r = seccomp_install(&err);
	if (r < 0) {
		dprintf(STDERR_FILENO, "child: %s\n", err.msg);
		_exit(101);
	}
}

/* Fork, run fn in the child (with the filter when filtered), return the
 * child's wait status. The child always leaves through _exit(). */
static int run_in_child(int (*fn)(void *), void *arg, bool filtered)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka catches these to fail a test: in a child that would
		 * go on running the test program. A child dies by them. */
		static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS};
		for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
			signal(fatal[i], SIG_DFL);
		if (chdir(scratch_dir) < 0)
			_exit(102);
		if (filtered)
			child_install();
		_exit(fn(arg));
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void assert_exited_zero(int status)
{
	if (WIFSIGNALED(status))
		fail_msg("child killed by signal %d", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void assert_killed_by_sigsys(int status)
{
	if (WIFEXITED(status))
		fail_msg("child exited with %d, expected death by SIGSYS", WEXITSTATUS(status));
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGSYS);
}

/* ---- probes ----------------------------------------------------------- */

static void fixture_setup(struct fixture *f, char prefix)
{
	int p[2];

	f->prefix = prefix;
	CHILD_CHECK(pipe2(p, O_CLOEXEC) == 0);
	f->pipe_r = p[0];
	f->pipe_w = p[1];
	CHILD_CHECK(write(f->pipe_w, "abcd", 4) == 4);
	snprintf(f->file_path, sizeof(f->file_path), "file-%c", prefix);
	f->file_fd = open(f->file_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHILD_CHECK(f->file_fd >= 0);
	f->dir_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHILD_CHECK(f->dir_fd >= 0);
}

static long probe_arg(long a, struct fixture *f, char *name, size_t name_size, size_t index)
{
	switch (a) {
	case PIPE_R:
		return f->pipe_r;
	case PIPE_W:
		return f->pipe_w;
	case FILE_FD:
		return f->file_fd;
	case DIR_FD:
		return f->dir_fd;
	case FILE_PATH:
		return (long)f->file_path;
	case NEW_NAME:
		snprintf(name, name_size, "new-%c-%zu", f->prefix, index);
		return (long)name;
	case BUF:
		return (long)f->buf;
	case DOT:
		return (long)".";
	default:
		return a;
	}
}

/* Run one probe; returns 0 on success or the errno it failed with. */
static int probe_run(const struct probe *p, struct fixture *f, size_t index)
{
	char name[32];
	long a[6];

	for (size_t i = 0; i < 6; i++)
		a[i] = probe_arg(p->a[i], f, name, sizeof(name), index);
	errno = 0;
	long r = syscall(p->nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (p->nr == SYS_clone && r == 0)
		_exit(0); /* a clone the filter let through: never run on */
	return r < 0 ? errno : 0;
}

struct probe_job {
	const struct probe *probes;
	size_t n;
	bool filtered;
	int out_fd;
};

static int probe_child(void *arg)
{
	struct probe_job *job = arg;
	struct fixture f;

	fixture_setup(&f, job->filtered ? 'f' : 'c');
	if (job->filtered)
		child_install();
	for (size_t i = 0; i < job->n; i++) {
		const struct probe *p = &job->probes[i];
		int res = -1; /* "not run" */
		if (job->filtered || p->expect != REFUSED)
			res = probe_run(p, &f, i);
		if (write(job->out_fd, &res, sizeof(res)) != sizeof(res))
			return 103;
	}
	return 0;
}

/* Run the probes in a child, with or without the filter, into results. */
static void probe_collect(const struct probe *probes, size_t n, bool filtered, int *results)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	_cleanup_close_ int rfd = p[0];
	struct probe_job job = {probes, n, false, p[1]};

	/* The filter is installed by probe_child itself, after its setup. */
	job.filtered = filtered;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(rfd);
		if (chdir(scratch_dir) < 0)
			_exit(102);
		_exit(probe_child(&job));
	}
	close(p[1]);
	size_t want = n * sizeof(int), got = 0;
	while (got < want) {
		ssize_t k = read(rfd, (char *)results + got, want - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_exited_zero(status);
	assert_int_equal(got, want);
}

static const char *errname(int e)
{
	return e == 0 ? "success" : strerrorname_np(e) ? strerrorname_np(e) : "?";
}

/* Run a probe table with and without the filter and check every result. */
static void probe_check(const struct probe *probes, size_t n)
{
	int filtered[128], control[128];
	unsigned bad = 0;

	assert_true(n <= ELEMENTSOF(filtered));
	probe_collect(probes, n, false, control);
	probe_collect(probes, n, true, filtered);
	for (size_t i = 0; i < n; i++) {
		const struct probe *p = &probes[i];
		int want = p->expect == REFUSED ? p->err : control[i];
		if (p->expect == WORKS && control[i] != 0) {
			print_error("%s: fails without the filter too (%s)\n", p->what,
				    errname(control[i]));
			bad++;
		} else if (filtered[i] != want) {
			print_error("%s: got %s, expected %s\n", p->what, errname(filtered[i]),
				    errname(want));
			bad++;
		}
	}
	if (bad)
		fail_msg("%u of %zu probes wrong", bad, n);
}

/* ---- the cases -------------------------------------------------------- */

static void test_allowed_calls(void **state)
{
	(void)state;
	/* clang-format off */
	static const struct probe probes[] = {
		OK("getpid", SYS_getpid, 0),
		OK("gettid", SYS_gettid, 0),
		OK("write to a pipe", SYS_write, PIPE_W, BUF, 1),
		OK("read from a pipe", SYS_read, PIPE_R, BUF, 1),
		OK("openat an existing file", SYS_openat, AT_FDCWD, FILE_PATH, O_RDONLY | O_CLOEXEC),
		OK("open an existing file", SYS_open, FILE_PATH, O_RDONLY | O_CLOEXEC),
		OK("openat O_CREAT 0644", SYS_openat, AT_FDCWD, NEW_NAME, O_CREAT | O_WRONLY | O_CLOEXEC, 0644),
		OK("fstat", SYS_fstat, FILE_FD, BUF),
		OK("newfstatat", SYS_newfstatat, AT_FDCWD, FILE_PATH, BUF, 0),
		OK("statx", SYS_statx, AT_FDCWD, FILE_PATH, 0, 0x7ff, BUF),
		OK("getdents64", SYS_getdents64, DIR_FD, BUF, sizeof(long) * 512),
		OK("lseek", SYS_lseek, FILE_FD, 0, SEEK_SET),
		OK("pwrite64", SYS_pwrite64, FILE_FD, BUF, 8, 0),
		OK("ftruncate", SYS_ftruncate, FILE_FD, 4),
		OK("fsync", SYS_fsync, FILE_FD),
		OK("mkdirat", SYS_mkdirat, AT_FDCWD, NEW_NAME, 0755),
		OK("symlinkat", SYS_symlinkat, FILE_PATH, AT_FDCWD, NEW_NAME),
		OK("fchownat to self", SYS_fchownat, AT_FDCWD, FILE_PATH, -1, -1, 0),
		OK("fcntl F_GETFD", SYS_fcntl, FILE_FD, F_GETFD),
		OK("dup3", SYS_dup3, FILE_FD, 200, O_CLOEXEC),
		OK("mmap anonymous", SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
		OK("memfd_create", SYS_memfd_create, FILE_PATH, MFD_CLOEXEC),
		OK("uname", SYS_uname, BUF),
		OK("getrandom", SYS_getrandom, BUF, 16, 0),
		OK("clock_gettime", SYS_clock_gettime, CLOCK_MONOTONIC, BUF),
		OK("prctl PR_GET_DUMPABLE", SYS_prctl, PR_GET_DUMPABLE, 0, 0, 0, 0),
		OK("sched_getaffinity", SYS_sched_getaffinity, 0, 128, BUF),
		OK("rt_sigprocmask", SYS_rt_sigprocmask, SIG_BLOCK, 0, BUF, 8),
		OK("epoll_create1", SYS_epoll_create1, EPOLL_CLOEXEC),
		OK("eventfd2", SYS_eventfd2, 0, EFD_CLOEXEC),
		OK("futex wake", SYS_futex, BUF, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0),
		OK("kill(0, 0)", SYS_kill, 0, 0),
		OK("getrlimit", SYS_getrlimit, RLIMIT_NOFILE, BUF),
		OK("socketpair AF_UNIX", SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, BUF),
		OK("personality query", SYS_personality, 0xffffffffL),
		SAME("close a bad fd", SYS_close, 9999),
		SAME("seccomp GET_ACTION_AVAIL, bad pointer", SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, BADPTR),
		SAME("pidfd_open, bad pid", SYS_pidfd_open, -5, 0),
		SAME("landlock_create_ruleset version", SYS_landlock_create_ruleset, 0, 0, 1),
		SAME("io_setup, bad pointer", SYS_io_setup, 1, BADPTR),
		SAME("msgctl, bad id", SYS_msgctl, -1, IPC_STAT, BUF),
		SAME("copy_file_range, bad fds", SYS_copy_file_range, -1, 0, -1, 0, 1, 0),
		SAME("cachestat, bad fd", SYS_cachestat, -1, BUF, BUF, 0),
		SAME("mseal, unaligned", SYS_mseal, 1, 4096, 0),
		SAME("futex_waitv, bad pointer", SYS_futex_waitv, BADPTR, 1, 0, 0, 0),
		SAME("setxattr, bad pointer", SYS_setxattr, BADPTR, BADPTR, BADPTR, 1, 0),
		SAME("inotify_add_watch, bad fd", SYS_inotify_add_watch, -1, FILE_PATH, 1),
		SAME("execve, bad pointer", SYS_execve, BADPTR, 0, 0),
		SAME("sched_setattr, bad pointer", SYS_sched_setattr, 0, BADPTR, 0),
		SAME("ioprio_get", SYS_ioprio_get, 1, 0),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

static void test_unlisted_calls_enosys(void **state)
{
	(void)state;
	/* clang-format off */
	static const struct probe probes[] = {
		/* clone3 passes flags in memory the filter cannot read */
		NO("clone3", ENOSYS, SYS_clone3, BADPTR, 88),
		NO("syscall 1000", ENOSYS, 1000, 0),
		NO("syscall -1", ENOSYS, -1, 0),
		NO("process_mrelease (unlisted)", ENOSYS, SYS_process_mrelease, -1, 0),
		NO("fanotify_mark (unlisted)", ENOSYS, SYS_fanotify_mark, -1, 0, 0, AT_FDCWD, 0),
		NO("modify_ldt (unlisted)", ENOSYS, SYS_modify_ldt, 0, BADPTR, 0),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

static void test_dangerous_calls_eperm(void **state)
{
	(void)state;
	/* All arguments are invalid, so each would fail harmlessly if let through. */
	/* clang-format off */
	static const struct probe probes[] = {
		NO("unshare(CLONE_NEWUSER)", EPERM, SYS_unshare, CLONE_NEWUSER),
		NO("unshare(CLONE_NEWNS)", EPERM, SYS_unshare, CLONE_NEWNS),
		NO("setns", EPERM, SYS_setns, -1, 0),
		NO("mount", EPERM, SYS_mount, BADPTR, BADPTR, BADPTR, 0, 0),
		NO("umount2", EPERM, SYS_umount2, BADPTR, 0),
		NO("pivot_root", EPERM, SYS_pivot_root, BADPTR, BADPTR),
		NO("chroot", EPERM, SYS_chroot, BADPTR),
		NO("open_tree", EPERM, SYS_open_tree, -1, BADPTR, 0),
		NO("open_tree_attr", EPERM, SYS_open_tree_attr, -1, BADPTR, 0, BADPTR, 0),
		NO("move_mount", EPERM, SYS_move_mount, -1, BADPTR, -1, BADPTR, 0),
		NO("fsopen", EPERM, SYS_fsopen, BADPTR, 0),
		NO("fsconfig", EPERM, SYS_fsconfig, -1, 0, 0, 0, 0),
		NO("fsmount", EPERM, SYS_fsmount, -1, 0, 0),
		NO("fspick", EPERM, SYS_fspick, -1, BADPTR, 0),
		NO("mount_setattr", EPERM, SYS_mount_setattr, -1, BADPTR, 0, BADPTR, 0),
		NO("bpf", EPERM, SYS_bpf, -1, BADPTR, 0),
		NO("perf_event_open", EPERM, SYS_perf_event_open, BADPTR, 0, -1, -1, 0),
		NO("userfaultfd", EPERM, SYS_userfaultfd, -1),
		NO("io_uring_setup", EPERM, SYS_io_uring_setup, 0, BADPTR),
		NO("io_uring_enter", EPERM, SYS_io_uring_enter, -1, 0, 0, 0, 0, 0),
		NO("io_uring_register", EPERM, SYS_io_uring_register, -1, 0, 0, 0),
		NO("keyctl", EPERM, SYS_keyctl, -1, 0, 0, 0, 0),
		NO("add_key", EPERM, SYS_add_key, BADPTR, BADPTR, 0, 0, 0),
		NO("request_key", EPERM, SYS_request_key, BADPTR, BADPTR, 0, 0),
		NO("ptrace", EPERM, SYS_ptrace, -1, 0, 0, 0),
		NO("process_vm_readv", EPERM, SYS_process_vm_readv, 0, BADPTR, 1, BADPTR, 1, 0),
		NO("process_vm_writev", EPERM, SYS_process_vm_writev, 0, BADPTR, 1, BADPTR, 1, 0),
		NO("process_madvise", EPERM, SYS_process_madvise, -1, BADPTR, 1, 0, 0),
		NO("pidfd_getfd", EPERM, SYS_pidfd_getfd, -1, -1, 0),
		NO("kcmp", EPERM, SYS_kcmp, 0, 0, -1, 0, 0),
		NO("init_module", EPERM, SYS_init_module, BADPTR, 0, BADPTR),
		NO("finit_module", EPERM, SYS_finit_module, -1, BADPTR, 0),
		NO("delete_module", EPERM, SYS_delete_module, BADPTR, 0),
		NO("kexec_load", EPERM, SYS_kexec_load, 0, 0, 0, 0xfff0),
		NO("kexec_file_load", EPERM, SYS_kexec_file_load, -1, -1, 0, BADPTR, 0xfff0),
		NO("reboot (bad magic)", EPERM, SYS_reboot, 0, 0, 0, 0),
		NO("swapon", EPERM, SYS_swapon, BADPTR, 0),
		NO("swapoff", EPERM, SYS_swapoff, BADPTR),
		NO("syslog", EPERM, SYS_syslog, -1, 0, 0),
		NO("iopl", EPERM, SYS_iopl, 4),
		NO("ioperm", EPERM, SYS_ioperm, 0x10000, 1, 0),
		NO("acct", EPERM, SYS_acct, BADPTR),
		NO("uselib", EPERM, SYS_uselib, BADPTR),
		NO("sysfs", EPERM, SYS_sysfs, 99, 0, 0),
		NO("_sysctl", EPERM, SYS__sysctl, BADPTR),
		NO("ustat", EPERM, SYS_ustat, 0, BADPTR),
		NO("quotactl", EPERM, SYS_quotactl, 0, BADPTR, 0, 0),
		NO("quotactl_fd", EPERM, SYS_quotactl_fd, -1, 0, 0, 0),
		NO("lookup_dcookie", EPERM, SYS_lookup_dcookie, 0, BADPTR, 0),
		NO("sethostname", EPERM, SYS_sethostname, BADPTR, 1),
		NO("setdomainname", EPERM, SYS_setdomainname, BADPTR, 1),
		NO("lsm_set_self_attr", EPERM, SYS_lsm_set_self_attr, 0, BADPTR, 0, 0),
		NO("clock_settime", EPERM, SYS_clock_settime, CLOCK_REALTIME, BADPTR),
		NO("clock_adjtime", EPERM, SYS_clock_adjtime, CLOCK_REALTIME, BADPTR),
		NO("settimeofday", EPERM, SYS_settimeofday, BADPTR, BADPTR),
		NO("adjtimex", EPERM, SYS_adjtimex, BADPTR),
		NO("open_by_handle_at", EPERM, SYS_open_by_handle_at, -1, BADPTR, 0),
		NO("name_to_handle_at", EPERM, SYS_name_to_handle_at, -1, BADPTR, BADPTR, BADPTR, 0),
		NO("move_pages", EPERM, SYS_move_pages, 0, 1, BADPTR, BADPTR, BADPTR, 0),
		NO("migrate_pages", EPERM, SYS_migrate_pages, 0, 1, BADPTR, BADPTR),
		NO("mbind", EPERM, SYS_mbind, 1, 4096, 0, BADPTR, 1, 0),
		NO("set_mempolicy", EPERM, SYS_set_mempolicy, 99, BADPTR, 1),
		NO("set_mempolicy_home_node", EPERM, SYS_set_mempolicy_home_node, 1, 4096, 0, 0),
		NO("memfd_secret", EPERM, SYS_memfd_secret, -1),
		NO("fanotify_init", EPERM, SYS_fanotify_init, -1, 0),
		NO("openat2", EPERM, SYS_openat2, AT_FDCWD, BADPTR, BADPTR, 24),
		NO("personality(READ_IMPLIES_EXEC)", EPERM, SYS_personality, 0x0400000),
		NO("personality(PER_BSD)", EPERM, SYS_personality, 0x0006),
		NO("personality(PER_LINUX32 | ADDR_NO_RANDOMIZE)", EPERM, SYS_personality, 0x0040008),
		NO("personality(0xfffffffe)", EPERM, SYS_personality, 0xfffffffeL),
		/* the allowed values: harmless here, and 0 is set last to restore;
		 * the kernel reads the argument as 32 bits, and so does the filter */
		OK("personality(1 << 32), which is 0", SYS_personality, 0x100000000L),
		OK("personality(UNAME26)", SYS_personality, 0x0020000),
		OK("personality(PER_LINUX32 | UNAME26)", SYS_personality, 0x0020008),
		OK("personality(PER_LINUX32)", SYS_personality, 0x0008),
		OK("personality(PER_LINUX)", SYS_personality, 0),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

static void test_clone_namespace_flags(void **state)
{
	(void)state;
	/* clang-format off */
	static const struct probe probes[] = {
		OK("clone(SIGCHLD), a plain fork", SYS_clone, SIGCHLD, 0, 0, 0, 0),
		OK("clone(CLONE_FILES | SIGCHLD)", SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWNS)", EPERM, SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWUTS)", EPERM, SYS_clone, CLONE_NEWUTS | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWIPC)", EPERM, SYS_clone, CLONE_NEWIPC | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWUSER)", EPERM, SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWPID)", EPERM, SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWNET)", EPERM, SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWCGROUP)", EPERM, SYS_clone, CLONE_NEWCGROUP | SIGCHLD, 0, 0, 0, 0),
		NO("clone(CLONE_NEWUSER | CLONE_NEWNS | high bits)", EPERM, SYS_clone,
		   (long)(0xffffffff00000000UL | CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD), 0, 0, 0, 0),
		NO("clone3", ENOSYS, SYS_clone3, BADPTR, 88),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

static void test_sockets(void **state)
{
	(void)state;
	/* clang-format off */
	static const struct probe probes[] = {
		OK("socket(AF_UNIX, SOCK_STREAM)", SYS_socket, AF_UNIX, SOCK_STREAM, 0),
		OK("socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC)", SYS_socket, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0),
		OK("socket(AF_UNIX, SOCK_SEQPACKET)", SYS_socket, AF_UNIX, SOCK_SEQPACKET, 0),
		OK("socket(AF_INET, SOCK_STREAM)", SYS_socket, AF_INET, SOCK_STREAM, 0),
		OK("socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC)", SYS_socket, AF_INET,
		   SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0),
		SAME("socket(AF_INET6, SOCK_DGRAM)", SYS_socket, AF_INET6, SOCK_DGRAM, 0),
		SAME("socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC)", SYS_socket, AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0),
		SAME("socket(AF_INET, SOCK_STREAM | bad flag)", SYS_socket, AF_INET, SOCK_STREAM | 0x10000, 0),
		OK("socketpair(AF_UNIX)", SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, BUF),
		NO("socket(AF_PACKET)", EPERM, SYS_socket, AF_PACKET, SOCK_RAW, 0),
		NO("socket(AF_NETLINK)", EPERM, SYS_socket, AF_NETLINK, SOCK_RAW, 0),
		NO("socket(AF_VSOCK)", EPERM, SYS_socket, AF_VSOCK, SOCK_STREAM, 0),
		NO("socket(AF_ALG)", EPERM, SYS_socket, AF_ALG, SOCK_SEQPACKET, 0),
		NO("socket(AF_UNSPEC)", EPERM, SYS_socket, AF_UNSPEC, SOCK_STREAM, 0),
		NO("socket(3, AX25)", EPERM, SYS_socket, 3, SOCK_STREAM, 0),
		NO("socket(4, IPX)", EPERM, SYS_socket, 4, SOCK_DGRAM, 0),
		NO("socket(7)", EPERM, SYS_socket, 7, SOCK_DGRAM, 0),
		NO("socket(9, X25)", EPERM, SYS_socket, 9, SOCK_STREAM, 0),
		NO("socket(11)", EPERM, SYS_socket, 11, SOCK_STREAM, 0),
		NO("socket(AF_BLUETOOTH)", EPERM, SYS_socket, AF_BLUETOOTH, SOCK_STREAM, 0),
		NO("socket(AF_INET, SOCK_RAW)", EPERM, SYS_socket, AF_INET, SOCK_RAW, 0),
		NO("socket(AF_INET6, SOCK_RAW)", EPERM, SYS_socket, AF_INET6, SOCK_RAW, 0),
		NO("socket(AF_INET, SOCK_SEQPACKET)", EPERM, SYS_socket, AF_INET, SOCK_SEQPACKET, 0),
		NO("socket(AF_INET, SOCK_PACKET)", EPERM, SYS_socket, AF_INET, SOCK_PACKET, 0),
		NO("socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC)", EPERM, SYS_socket, AF_INET, SOCK_RAW | SOCK_CLOEXEC, 0),
		/* the family is compared as 64 bits: junk above AF_UNIX is refused */
		NO("socket(AF_UNIX | 1 << 32)", EPERM, SYS_socket, 0x100000001L, SOCK_STREAM, 0),
		NO("socketpair(AF_INET)", EPERM, SYS_socketpair, AF_INET, SOCK_STREAM, 0, BUF),
		NO("socketpair(AF_INET6)", EPERM, SYS_socketpair, AF_INET6, SOCK_DGRAM, 0, BUF),
		NO("socketpair(AF_UNSPEC)", EPERM, SYS_socketpair, AF_UNSPEC, SOCK_STREAM, 0, BUF),
		NO("socketpair(AF_NETLINK)", EPERM, SYS_socketpair, AF_NETLINK, SOCK_RAW, 0, BUF),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

static void test_ioctl(void **state)
{
	(void)state;
	/* clang-format off */
	static const struct probe probes[] = {
		OK("ioctl(pipe, FIONREAD)", SYS_ioctl, PIPE_R, FIONREAD, BUF),
		OK("ioctl(pipe, FIONREAD | junk << 32)", SYS_ioctl, PIPE_R,
		   (long)(0xdead000000000000UL | FIONREAD), BUF),
		OK("ioctl(file, FIOCLEX)", SYS_ioctl, FILE_FD, FIOCLEX, 0),
		SAME("ioctl(pipe, TCGETS)", SYS_ioctl, PIPE_R, TCGETS, BUF),
		SAME("ioctl(pipe, TIOCGWINSZ), next to TIOCSTI", SYS_ioctl, PIPE_R, TIOCGWINSZ, BUF),
		SAME("ioctl(pipe, TIOCOUTQ), next to TIOCSTI", SYS_ioctl, PIPE_R, TIOCOUTQ, BUF),
		SAME("ioctl(pipe, 0x541D), next to TIOCLINUX", SYS_ioctl, PIPE_R, 0x541D, BUF),
		NO("ioctl(TIOCSTI)", EPERM, SYS_ioctl, PIPE_R, TIOCSTI, BUF),
		NO("ioctl(0xffffffff00005412)", EPERM, SYS_ioctl, PIPE_R, (long)0xffffffff00005412UL, BUF),
		NO("ioctl(0x100005412)", EPERM, SYS_ioctl, PIPE_R, 0x100005412L, BUF),
		NO("ioctl(TIOCLINUX)", EPERM, SYS_ioctl, PIPE_R, TIOCLINUX, BUF),
		NO("ioctl(0xffffffff0000541c)", EPERM, SYS_ioctl, PIPE_R, (long)0xffffffff0000541cUL, BUF),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

static void test_setuid_modes(void **state)
{
	(void)state;
	/* clang-format off */
	static const struct probe probes[] = {
		OK("chmod 0644", SYS_chmod, FILE_PATH, 0644),
		OK("chmod 0755", SYS_chmod, FILE_PATH, 0755),
		OK("chmod 01777 (sticky)", SYS_chmod, FILE_PATH, 01777),
		OK("chmod 0644 | junk << 32", SYS_chmod, FILE_PATH, 0x700000000L | 0644),
		OK("fchmod 0600", SYS_fchmod, FILE_FD, 0600),
		OK("fchmodat 0644", SYS_fchmodat, AT_FDCWD, FILE_PATH, 0644),
		SAME("fchmodat2 0644", SYS_fchmodat2, AT_FDCWD, FILE_PATH, 0644, 0),
		NO("chmod 04755", EPERM, SYS_chmod, FILE_PATH, 04755),
		NO("chmod 02755", EPERM, SYS_chmod, FILE_PATH, 02755),
		NO("chmod 06755", EPERM, SYS_chmod, FILE_PATH, 06755),
		NO("chmod 04755 | junk << 32", EPERM, SYS_chmod, FILE_PATH, 0x700000000L | 04755),
		NO("fchmod 04755", EPERM, SYS_fchmod, FILE_FD, 04755),
		NO("fchmod 02711", EPERM, SYS_fchmod, FILE_FD, 02711),
		NO("fchmodat 04755", EPERM, SYS_fchmodat, AT_FDCWD, FILE_PATH, 04755),
		NO("fchmodat 02755", EPERM, SYS_fchmodat, AT_FDCWD, FILE_PATH, 02755),
		NO("fchmodat2 04755", EPERM, SYS_fchmodat2, AT_FDCWD, FILE_PATH, 04755, 0),
		NO("fchmodat2 02755", EPERM, SYS_fchmodat2, AT_FDCWD, FILE_PATH, 02755, 0),
		OK("creat 0644", SYS_creat, NEW_NAME, 0644),
		OK("open O_CREAT 0600", SYS_open, NEW_NAME, O_CREAT | O_WRONLY | O_CLOEXEC, 0600),
		OK("openat O_CREAT 0755", SYS_openat, AT_FDCWD, NEW_NAME, O_CREAT | O_WRONLY | O_CLOEXEC, 0755),
		OK("mknod S_IFIFO 0644", SYS_mknod, NEW_NAME, S_IFIFO | 0644, 0),
		OK("mknodat S_IFREG 0644", SYS_mknodat, AT_FDCWD, NEW_NAME, S_IFREG | 0644, 0),
		NO("creat 04755", EPERM, SYS_creat, NEW_NAME, 04755),
		NO("creat 02755", EPERM, SYS_creat, NEW_NAME, 02755),
		NO("open O_CREAT 04755", EPERM, SYS_open, NEW_NAME, O_CREAT | O_WRONLY, 04755),
		NO("openat O_CREAT 04755", EPERM, SYS_openat, AT_FDCWD, NEW_NAME, O_CREAT | O_WRONLY, 04755),
		NO("openat O_CREAT 02700", EPERM, SYS_openat, AT_FDCWD, NEW_NAME, O_CREAT | O_WRONLY, 02700),
		NO("openat O_TMPFILE 04755", EPERM, SYS_openat, DIR_FD, DOT, O_TMPFILE | O_WRONLY, 04755),
		NO("mknod S_IFREG 04755", EPERM, SYS_mknod, NEW_NAME, S_IFREG | 04755, 0),
		NO("mknodat S_IFREG 02755", EPERM, SYS_mknodat, AT_FDCWD, NEW_NAME, S_IFREG | 02755, 0),
	};
	/* clang-format on */
	probe_check(probes, ELEMENTSOF(probes));
}

/* ---- cases that need more than one call -------------------------------- */

static int child_no_new_privs(void *arg)
{
	(void)arg;
	CHILD_CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	CHILD_CHECK(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2);
	/* Stacking a second copy is allowed (and what a nested sandbox does). */
	struct error err = {0};
	CHILD_CHECK(seccomp_install(&err) == 0);
	return 0;
}

static void test_no_new_privs(void **state)
{
	(void)state;
	assert_exited_zero(run_in_child(child_no_new_privs, NULL, true));
}

static int wait_exit_code(pid_t pid)
{
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void *thread_main(void *arg)
{
	return arg;
}

static int child_processes(void *arg)
{
	(void)arg;
	char *const argv[] = {"true", NULL};
	char *const envp[] = {NULL};

	pid_t pid = fork();
	CHILD_CHECK(pid >= 0);
	if (pid == 0)
		_exit(7);
	CHILD_CHECK(wait_exit_code(pid) == 7);

	pid = fork();
	CHILD_CHECK(pid >= 0);
	if (pid == 0) {
		execve("/bin/true", argv, envp);
		_exit(127);
	}
	CHILD_CHECK(wait_exit_code(pid) == 0);

	/* glibc tries clone3 first, gets ENOSYS, and falls back to clone */
	CHILD_CHECK(posix_spawn(&pid, "/bin/true", NULL, NULL, argv, envp) == 0);
	CHILD_CHECK(wait_exit_code(pid) == 0);

	pthread_t t;
	void *ret = NULL;
	CHILD_CHECK(pthread_create(&t, NULL, thread_main, (void *)0x5eed) == 0);
	CHILD_CHECK(pthread_join(t, &ret) == 0);
	CHILD_CHECK(ret == (void *)0x5eed);
	return 0;
}

static void test_fork_exec_threads(void **state)
{
	(void)state;
	assert_exited_zero(run_in_child(child_processes, NULL, true));
}

/* An i386 system call made from 64-bit code. */
static long int80(long nr)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

#define I386_NR_getpid 20

static int child_int80(void *arg)
{
	(void)arg;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core file from SIGSYS */
	return int80(I386_NR_getpid) == getpid() ? 0 : 1;
}

static void test_i386_abi_kills(void **state)
{
	(void)state;
	int status = run_in_child(child_int80, NULL, false);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		skip(); /* this kernel runs no i386 code (int 0x80 is SIGSEGV) */
	assert_killed_by_sigsys(run_in_child(child_int80, NULL, true));
}

static int child_x32(void *arg)
{
	(void)arg;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	long r = syscall(X32_SYSCALL_BIT | SYS_getpid);
	/* without a filter: the pid, or ENOSYS on kernels without x32 */
	return r == getpid() || (r < 0 && errno == ENOSYS) ? 0 : 1;
}

static void test_x32_abi_kills(void **state)
{
	(void)state;
	assert_exited_zero(run_in_child(child_x32, NULL, false));
	/* libseccomp's x86_64 filter kills on any number >= 0x40000000 */
	assert_killed_by_sigsys(run_in_child(child_x32, NULL, true));
}

static void test_filter_len(void **state)
{
	(void)state;
	assert_true(seccomp_filter_len() > 0);
	assert_true(seccomp_filter_len() <= 4096);
}

/* ---- scratch directory ------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int setup_scratch(void **state)
{
	(void)state;
	snprintf(scratch_dir, sizeof(scratch_dir), "/tmp/test-seccomp.XXXXXX");
	return mkdtemp(scratch_dir) ? 0 : -1;
}

static int teardown_scratch(void **state)
{
	(void)state;
	return nftw(scratch_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_filter_len),
	    cmocka_unit_test(test_no_new_privs),
	    cmocka_unit_test(test_allowed_calls),
	    cmocka_unit_test(test_unlisted_calls_enosys),
	    cmocka_unit_test(test_dangerous_calls_eperm),
	    cmocka_unit_test(test_clone_namespace_flags),
	    cmocka_unit_test(test_sockets),
	    cmocka_unit_test(test_ioctl),
	    cmocka_unit_test(test_setuid_modes),
	    cmocka_unit_test(test_fork_exec_threads),
	    cmocka_unit_test(test_i386_abi_kills),
	    cmocka_unit_test(test_x32_abi_kills),
	};
	return cmocka_run_group_tests(tests, setup_scratch, teardown_scratch);
}
