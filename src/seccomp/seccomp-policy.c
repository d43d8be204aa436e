/*
 * seccomp-policy.c - what the sandbox may call, as readable tables.
 *
 * The default for any system call not named here is ENOSYS, so programs
 * take the path they take on an older kernel; clone3 is deliberately left
 * to that default (libseccomp refuses a rule whose action equals the
 * default) so glibc falls back to clone, whose flags a filter can see.
 * Calls in the EPERM table fail as if a capability were missing.
 *
 * A few calls are allowed for some argument values only (see arg_rules and
 * the socket tables). libseccomp 2.5 silently drops a conditional rule when
 * the same call also has an unconditional one, whatever their actions, so
 * such a call never gets an unconditional rule here: its argument space is
 * split into disjoint masked comparisons, each with its action.
 */
#include "seccomp/seccomp-policy.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define ALLOW	  SCMP_ACT_ALLOW
#define EPERM_ACT SCMP_ACT_ERRNO(EPERM)

/*
 * System calls newer than some libseccomp releases (Debian 12's 2.5.4
 * knows neither mseal nor lsm_set_self_attr). The x86_64 numbers are
 * kernel ABI and never change; they are used only when libseccomp cannot
 * resolve the name, and checked against libseccomp when it can.
 */
/* clang-format off */
static const struct {
	const char *name;
	int nr;
} late_syscalls[] = {
	{"cachestat", 451},     {"fchmodat2", 452},         {"map_shadow_stack", 453},
	{"futex_wake", 454},    {"futex_wait", 455},        {"futex_requeue", 456},
	{"lsm_set_self_attr", 460}, {"mseal", 462},         {"setxattrat", 463},
	{"getxattrat", 464},    {"listxattrat", 465},       {"removexattrat", 466},
	{"open_tree_attr", 467},
};

/* Allowed with any arguments: what shells, compilers, interpreters and
 * servers need. Kernel permission checks still apply to every one. */
static const char *const allow_syscalls[] = {
	/* file descriptors and file I/O */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
	"preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3",
	"pipe", "pipe2", "fcntl", "flock", "fsync", "fdatasync", "sync", "syncfs",
	"sync_file_range", "readahead", "fadvise64", "ftruncate", "truncate", "fallocate",
	"sendfile", "splice", "tee", "vmsplice", "copy_file_range", "cachestat",
	/* paths and metadata (open/creat/chmod/mknod: see arg_rules) */
	"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
	"getdents", "getdents64", "access", "faccessat", "faccessat2",
	"getcwd", "chdir", "fchdir", "umask",
	"rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat",
	"symlink", "symlinkat", "readlink", "readlinkat", "mkdir", "mkdirat", "rmdir",
	"chown", "fchown", "lchown", "fchownat",
	"utime", "utimes", "futimesat", "utimensat",
	"setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
	"fremovexattr", "setxattrat", "getxattrat", "listxattrat", "removexattrat",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	/* memory */
	"brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mincore",
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier",
	"memfd_create", "pkey_mprotect", "pkey_alloc", "pkey_free", "remap_file_pages",
	"mseal", "map_shadow_stack", "get_mempolicy",
	/* processes (clone and personality: see arg_rules) */
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal",
	"getpid", "getppid", "gettid", "set_tid_address", "set_robust_list",
	"get_robust_list", "rseq", "prctl", "arch_prctl",
	"setpgid", "getpgid", "getpgrp", "setsid", "getsid",
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setfsuid", "setfsgid", "setgroups", "capget", "capset",
	"getrlimit", "setrlimit", "prlimit64", "getrusage", "getpriority", "setpriority",
	"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
	"sched_setparam", "sched_getscheduler", "sched_setscheduler",
	"sched_get_priority_min", "sched_get_priority_max", "sched_rr_get_interval",
	"sched_getattr", "sched_setattr", "ioprio_get", "ioprio_set",
	"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"uname", "sysinfo", "times", "getrandom", "getcpu",
	/* time */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
	"time", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
	"timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
	"alarm", "getitimer", "setitimer",
	/* signals */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
	"rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigsuspend",
	"sigaltstack", "signalfd", "signalfd4", "pause", "restart_syscall",
	/* waiting for events */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
	"futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
	/* sockets (socket and socketpair: see the socket tables) */
	"bind", "connect", "listen", "accept", "accept4", "sendto", "recvfrom",
	"sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockname",
	"getpeername", "setsockopt", "getsockopt",
	/* System V and POSIX IPC: private to the sandbox's IPC namespace */
	"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
	"shmget", "shmat", "shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend",
	"mq_timedreceive", "mq_notify", "mq_getsetattr",
	/* Linux AIO */
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
};

/* Refused with EPERM: escapes from the namespaces, kernel attack surface
 * that sandboxed code has no need for, and host-wide state. */
static const char *const eperm_syscalls[] = {
	/* namespaces and mounts */
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree",
	"open_tree_attr", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
	"mount_setattr",
	/* large kernel attack surface */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "keyctl", "add_key", "request_key",
	/* other processes' memory */
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
	"pidfd_getfd", "kcmp",
	/* kernel and machine */
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "syslog", "iopl", "ioperm", "acct", "vhangup",
	"uselib", "sysfs", "_sysctl", "ustat", "quotactl", "quotactl_fd",
	"lookup_dcookie", "sethostname", "setdomainname", "lsm_set_self_attr",
	/* clocks */
	"clock_settime", "clock_adjtime", "settimeofday", "adjtimex",
	/* file handles walk around the mount tree */
	"open_by_handle_at", "name_to_handle_at",
	/* memory placement and secret memory */
	"move_pages", "migrate_pages", "mbind", "set_mempolicy",
	"set_mempolicy_home_node", "memfd_secret",
	/* global file watches */
	"fanotify_init",
	/* takes its mode inside a struct, out of a filter's sight; glibc's
	 * open() does not use it, and EPERM makes callers fall back */
	"openat2",
};
/* clang-format on */

#define CLONE_NS_FLAGS                                                                             \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
	 CLONE_NEWCGROUP | CLONE_NEWTIME)

/*
 * A call allowed for some values of one argument only. The argument, under
 * mask, is either one of values (action listed) or not (action others).
 */
struct arg_rule {
	const char *syscall;
	unsigned arg;
	uint64_t mask;
	uint64_t values[5];
	unsigned n_values;
	uint32_t listed;
	uint32_t others;
};

/* Modes that do not set S_ISUID or S_ISGID: files with those bits must
 * never appear in a volume, which is a host directory. */
#define NO_SETID(name, arg)                                                                        \
	{                                                                                          \
		name, arg, S_ISUID | S_ISGID, {0}, 1, ALLOW, EPERM_ACT                             \
	}

/* clang-format off */
static const struct arg_rule arg_rules[] = {
	/* clone: no new namespaces (CLONE_NEWTIME is also an exit-signal bit,
	 * but no valid signal number has it set) */
	{"clone", 0, CLONE_NS_FLAGS, {0}, 1, ALLOW, EPERM_ACT},
	/* ioctl: no typing into the terminal's input queue, no console
	 * control; the kernel reads the request as 32 bits */
	{"ioctl", 1, 0xffffffff, {TIOCSTI, TIOCLINUX}, 2, EPERM_ACT, ALLOW},
	/* personality: the values Docker allows (and the 0xffffffff query) */
	{"personality", 0, 0xffffffff,
	 {0, PER_LINUX32, UNAME26, PER_LINUX32 | UNAME26, 0xffffffff}, 5, ALLOW, EPERM_ACT},
	NO_SETID("chmod", 1),
	NO_SETID("fchmod", 1),
	NO_SETID("fchmodat", 2),
	NO_SETID("fchmodat2", 2),
	NO_SETID("open", 2),
	NO_SETID("openat", 3),
	NO_SETID("creat", 1),
	NO_SETID("mknod", 1),
	NO_SETID("mknodat", 2),
};
/* clang-format on */

/*
 * socket, by family (argument 0, compared as the full 64-bit value, so a
 * value with junk in the high half never matches an allow rule). AF_UNIX:
 * any type. AF_INET, AF_INET6: stream and datagram only (the type's low 4
 * bits; the high ones are SOCK_NONBLOCK and SOCK_CLOEXEC). Any other family
 * is refused by the complement of {1, 2, 10} below.
 */
static const struct scmp_arg_cmp socket_other_families[] = {
    SCMP_A0_64(SCMP_CMP_EQ, AF_UNSPEC),
    SCMP_A0_64(SCMP_CMP_EQ, 3),
    SCMP_A0_64(SCMP_CMP_MASKED_EQ, ~(uint64_t)3, 4), /* 4..7 */
    SCMP_A0_64(SCMP_CMP_MASKED_EQ, ~(uint64_t)1, 8), /* 8, 9 */
    SCMP_A0_64(SCMP_CMP_GT, AF_INET6),		     /* 11 and up */
};
_Static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10, "family numbers are ABI");

static const uint64_t inet_families[] = {AF_INET, AF_INET6};

/* socketpair: AF_UNIX only (the complement of {1}). */
static const struct scmp_arg_cmp socketpair_other_families[] = {
    SCMP_A0_64(SCMP_CMP_EQ, AF_UNSPEC), SCMP_A0_64(SCMP_CMP_GT, AF_UNIX), /* 2 and up */
};

#define SOCK_TYPE_MASK 0xf

struct policy {
	scmp_filter_ctx ctx;
	unsigned rules;
};

static int late_syscall_nr(const char *name)
{
	for (size_t i = 0; i < ARRAY_LEN(late_syscalls); i++)
		if (strcmp(late_syscalls[i].name, name) == 0)
			return late_syscalls[i].nr;
	return -1;
}

/* The x86_64 number of a system call, or -ENOENT (reported) if unknown. */
static int resolve(const char *name)
{
	int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
	int late = late_syscall_nr(name);

	if (nr >= 0 && late >= 0 && nr != late) {
		fprintf(stderr, "seccomp-policy: %s is %d for libseccomp but %d in late_syscalls\n",
			name, nr, late);
		return -EINVAL;
	}
	if (nr < 0)
		nr = late;
	if (nr < 0) {
		fprintf(stderr,
			"seccomp-policy: system call '%s' is unknown to libseccomp %u.%u.%u\n",
			name, seccomp_version()->major, seccomp_version()->minor,
			seccomp_version()->micro);
		return -ENOENT;
	}
	return nr;
}

static int add_rule(struct policy *p, uint32_t action, const char *name, int nr, unsigned n_cmps,
		    const struct scmp_arg_cmp *cmps)
{
	int r = seccomp_rule_add_exact_array(p->ctx, action, nr, n_cmps, cmps);
	if (r < 0) {
		fprintf(stderr, "seccomp-policy: cannot add a rule for %s: %s\n", name,
			strerror(-r));
		return r;
	}
	p->rules++;
	return 0;
}

static int add_unconditional(struct policy *p, uint32_t action, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = resolve(names[i]);
		if (nr < 0)
			return nr;
		int r = add_rule(p, action, names[i], nr, 0, NULL);
		if (r < 0)
			return r;
	}
	return 0;
}

/* How one argument's value space is being split (see split()). */
struct split {
	const char *name;
	int nr;
	struct scmp_arg_cmp cmps[6]; /* fixed comparisons, then the split one */
	unsigned n_fixed;
	unsigned arg;
	uint64_t bits[64]; /* the mask's bits, in the order they are tested */
	unsigned n_bits;
	const uint64_t *values;
	unsigned n_values;
	uint32_t listed, others;
};

static unsigned count_matching(const struct split *s, uint64_t mask, uint64_t value)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->n_values; i++)
		if ((s->values[i] & mask) == value)
			n++;
	return n;
}

static int emit_cube(struct policy *p, struct split *s, uint32_t action, uint64_t mask,
		     uint64_t value)
{
	if (mask == 0) {
		fprintf(stderr, "seccomp-policy: %s: a split rule would be unconditional\n",
			s->name);
		return -EINVAL;
	}
	s->cmps[s->n_fixed] = SCMP_CMP64(s->arg, SCMP_CMP_MASKED_EQ, mask, value);
	return add_rule(p, action, s->name, s->nr, s->n_fixed + 1, s->cmps);
}

/*
 * Emit disjoint rules covering every value whose bits tested so far (the
 * first depth of s->bits) are the prefix (mask, value): one rule if all or
 * none of the completions are listed, otherwise recurse on the next bit.
 */
static int split(struct policy *p, struct split *s, unsigned depth, uint64_t mask, uint64_t value)
{
	unsigned matching = count_matching(s, mask, value);
	unsigned free_bits = s->n_bits - depth;

	if (matching == 0)
		return emit_cube(p, s, s->others, mask, value);
	if (free_bits < 32 && matching == 1u << free_bits)
		return emit_cube(p, s, s->listed, mask, value);

	uint64_t bit = s->bits[depth];
	int r = split(p, s, depth + 1, mask | bit, value);
	if (r < 0)
		return r;
	return split(p, s, depth + 1, mask | bit, value | bit);
}

/* Bits the listed values agree on come first, so the tree ends in as few
 * leaves as possible. */
static void order_bits(struct split *s, uint64_t mask)
{
	unsigned skew[64];

	s->n_bits = 0;
	for (int b = 63; b >= 0; b--) {
		uint64_t bit = (uint64_t)1 << b;
		if (!(mask & bit))
			continue;
		unsigned ones = count_matching(s, bit, bit);
		unsigned zeros = s->n_values - ones;
		unsigned k = s->n_bits++;
		unsigned sk = ones > zeros ? ones - zeros : zeros - ones;
		while (k > 0 && skew[k - 1] < sk) {
			skew[k] = skew[k - 1];
			s->bits[k] = s->bits[k - 1];
			k--;
		}
		skew[k] = sk;
		s->bits[k] = bit;
	}
}

static int check_values(const struct split *s, uint64_t mask)
{
	for (unsigned i = 0; i < s->n_values; i++) {
		if (s->values[i] & ~mask) {
			fprintf(stderr,
				"seccomp-policy: %s: value %#llx has bits outside the mask\n",
				s->name, (unsigned long long)s->values[i]);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (s->values[j] == s->values[i]) {
				fprintf(stderr, "seccomp-policy: %s: value %#llx listed twice\n",
					s->name, (unsigned long long)s->values[i]);
				return -EINVAL;
			}
	}
	return 0;
}

/* Add rules for one argument split, under the fixed comparisons given. */
static int add_split(struct policy *p, const char *name, const struct scmp_arg_cmp *fixed,
		     unsigned n_fixed, unsigned arg, uint64_t mask, const uint64_t *values,
		     unsigned n_values, uint32_t listed, uint32_t others)
{
	struct split s = {
	    .name = name,
	    .n_fixed = n_fixed,
	    .arg = arg,
	    .values = values,
	    .n_values = n_values,
	    .listed = listed,
	    .others = others,
	};

	s.nr = resolve(name);
	if (s.nr < 0)
		return s.nr;
	if (n_fixed >= ARRAY_LEN(s.cmps))
		return -EINVAL;
	for (unsigned i = 0; i < n_fixed; i++)
		s.cmps[i] = fixed[i];
	int r = check_values(&s, mask);
	if (r < 0)
		return r;
	order_bits(&s, mask);
	return split(p, &s, 0, 0, 0);
}

static int add_arg_rules(struct policy *p)
{
	for (size_t i = 0; i < ARRAY_LEN(arg_rules); i++) {
		const struct arg_rule *a = &arg_rules[i];
		int r = add_split(p, a->syscall, NULL, 0, a->arg, a->mask, a->values, a->n_values,
				  a->listed, a->others);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_family_rules(struct policy *p, const char *name, int nr,
			    const struct scmp_arg_cmp *others, size_t n_others)
{
	struct scmp_arg_cmp unix_family = SCMP_A0_64(SCMP_CMP_EQ, AF_UNIX);
	int r = add_rule(p, ALLOW, name, nr, 1, &unix_family);
	for (size_t i = 0; r >= 0 && i < n_others; i++)
		r = add_rule(p, EPERM_ACT, name, nr, 1, &others[i]);
	return r;
}

static int add_socket_rules(struct policy *p)
{
	static const uint64_t stream_dgram[] = {SOCK_STREAM, SOCK_DGRAM};
	int nr = resolve("socket");
	if (nr < 0)
		return nr;

	int r = add_family_rules(p, "socket", nr, socket_other_families,
				 ARRAY_LEN(socket_other_families));
	for (size_t i = 0; r >= 0 && i < ARRAY_LEN(inet_families); i++) {
		struct scmp_arg_cmp family = SCMP_A0_64(SCMP_CMP_EQ, inet_families[i]);
		r = add_split(p, "socket", &family, 1, 1, SOCK_TYPE_MASK, stream_dgram,
			      ARRAY_LEN(stream_dgram), ALLOW, EPERM_ACT);
	}
	if (r < 0)
		return r;

	nr = resolve("socketpair");
	if (nr < 0)
		return nr;
	return add_family_rules(p, "socketpair", nr, socketpair_other_families,
				ARRAY_LEN(socketpair_other_families));
}

/* Every name the tables use, in one list, for check_names(). */
static size_t collect_names(const char **names, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_LEN(allow_syscalls) && n < max; i++)
		names[n++] = allow_syscalls[i];
	for (size_t i = 0; i < ARRAY_LEN(eperm_syscalls) && n < max; i++)
		names[n++] = eperm_syscalls[i];
	for (size_t i = 0; i < ARRAY_LEN(arg_rules) && n < max; i++)
		names[n++] = arg_rules[i].syscall;
	if (n + 2 <= max) {
		names[n++] = "socket";
		names[n++] = "socketpair";
	}
	return n;
}

/*
 * Each call must be named once: libseccomp would quietly let an
 * unconditional rule swallow the conditional ones for the same call.
 * clone3 must not be named at all: it is refused by the default action.
 */
static int check_names(void)
{
	const char *
	    names[ARRAY_LEN(allow_syscalls) + ARRAY_LEN(eperm_syscalls) + ARRAY_LEN(arg_rules) + 2];
	size_t n = collect_names(names, ARRAY_LEN(names));

	for (size_t i = 0; i < n; i++) {
		if (strcmp(names[i], "clone3") == 0) {
			fprintf(stderr, "seccomp-policy: clone3 must be left to the default\n");
			return -EINVAL;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(names[i], names[j]) == 0) {
				fprintf(stderr, "seccomp-policy: %s is named twice\n", names[i]);
				return -EINVAL;
			}
	}
	return 0;
}

static int policy_fill(struct policy *p)
{
	int r;

	r = check_names();
	if (r < 0)
		return r;

	/* Only x86_64: any other ABI, i386 int 0x80 and x32 included, kills. */
	if (seccomp_arch_exist(p->ctx, SCMP_ARCH_X86_64) != 0) {
		r = seccomp_arch_add(p->ctx, SCMP_ARCH_X86_64);
		if (r < 0)
			return r;
		r = seccomp_arch_remove(p->ctx, SCMP_ARCH_NATIVE);
		if (r < 0)
			return r;
	}
	r = seccomp_attr_set(p->ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		return r;
	/* Find the syscall in a binary tree rather than a linear list. */
	r = seccomp_attr_set(p->ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		return r;

	r = add_unconditional(p, ALLOW, allow_syscalls, ARRAY_LEN(allow_syscalls));
	if (r < 0)
		return r;
	r = add_unconditional(p, EPERM_ACT, eperm_syscalls, ARRAY_LEN(eperm_syscalls));
	if (r < 0)
		return r;
	r = add_arg_rules(p);
	if (r < 0)
		return r;
	return add_socket_rules(p);
}

int seccomp_policy_new(scmp_filter_ctx *ret_ctx, unsigned *ret_rules)
{
	struct policy p = {.ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS))};

	if (!p.ctx) {
		fprintf(stderr, "seccomp-policy: seccomp_init failed\n");
		return -ENOMEM;
	}
	int r = policy_fill(&p);
	if (r < 0) {
		fprintf(stderr, "seccomp-policy: cannot build the policy: %s\n", strerror(-r));
		seccomp_release(p.ctx);
		return r;
	}
	*ret_ctx = p.ctx;
	*ret_rules = p.rules;
	return 0;
}
