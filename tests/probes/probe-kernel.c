/*
 * probe-kernel.c - kernel attack surface: namespaces, the mount family,
 * bpf/perf/io_uring and friends, sockets, terminal injection and foreign
 * system call ABIs.
 *
 * Every call gets arguments that make it fail harmlessly if it is allowed
 * (a bad fd gives EBADF, a NULL pointer EFAULT, a bad flag EINVAL), so
 * EPERM/ENOSYS can only mean "the filter or the kernel said no".
 */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* ------------------------------------------------------------------ */
/* K1: namespaces */

static int do_unshare(void *arg)
{
	return unshare((int)(long)arg) < 0 ? errno : 0;
}

static int do_clone(void *arg)
{
	long flags = (long)arg;
	long pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(0);
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

void probe_K1(void)
{
	static const struct {
		const char *name;
		long flag;
	} ns[] = {
	    {"user", CLONE_NEWUSER},	 {"net", CLONE_NEWNET},	  {"mnt", CLONE_NEWNS},
	    {"pid", CLONE_NEWPID},	 {"ipc", CLONE_NEWIPC},	  {"uts", CLONE_NEWUTS},
	    {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
	};
	char what[64];
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		snprintf(what, sizeof(what), "unshare-%s", ns[i].name);
		expect_err(what, in_child(do_unshare, (void *)ns[i].flag), "EPERM");
	}
	expect_err("clone-newns", in_child(do_clone, (void *)(long)CLONE_NEWNS), "EPERM");
	expect_err("clone-newuser", in_child(do_clone, (void *)(long)CLONE_NEWUSER), "EPERM");
	expect_err("clone-newnet", in_child(do_clone, (void *)(long)CLONE_NEWNET), "EPERM");
	/* Allowed, clone3 with a NULL args and size 0 gives EINVAL; filtered ENOSYS. */
	expect_err("clone3", ERR(syscall(SYS_clone3, NULL, 0)), "ENOSYS");
	/* A plain clone (fork) still works: the filter is not blanket. */
	expect_err("clone-plain", in_child(do_clone, (void *)0L), "allowed");
}

/* ------------------------------------------------------------------ */
/* K2: setns and the mount family */

void probe_K2(void)
{
	expect_err("setns", ERR(setns(-1, 0)), "EPERM");

	bool scratch = scratch_mountns();
	bool real = scratch || !privileged_host();
	if (!real)
		obs("unsafe-host:targets-replaced");
	const char *none = "/nonexistent-agentbox-probe";
	expect_err("mount-proc", ERR(mount("proc", real ? "/tmp" : none, "proc", 0, NULL)),
		   "EPERM");
	expect_err("mount-cgroup",
		   ERR(mount("cgroup", real ? "/tmp" : none, "cgroup", 0, "memory")), "EPERM");
	expect_err("umount2:/proc", ERR(umount2(real ? "/proc" : none, MNT_DETACH)), "EPERM");
	expect_err("pivot_root", ERR(syscall(SYS_pivot_root, real ? "." : none, real ? "." : none)),
		   "EPERM");
	expect_err("chroot:/", ERR(chroot("/")), "EPERM");
	expect_err("open_tree", ERR(syscall(SYS_open_tree, -1, "", 0)), "EPERM");
	expect_err("fsopen", ERR(syscall(SYS_fsopen, "agentbox-probe-nofs", 0)), "EPERM");
	expect_err("fsconfig", ERR(syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0)), "EPERM");
	expect_err("fsmount", ERR(syscall(SYS_fsmount, -1, 0, 0)), "EPERM");
	expect_err("fspick", ERR(syscall(SYS_fspick, -1, "", 0)), "EPERM");
	expect_err("move_mount", ERR(syscall(SYS_move_mount, -1, "", -1, "", 0)), "EPERM");
	expect_err("mount_setattr", ERR(syscall(SYS_mount_setattr, -1, "", 0, NULL, 0)), "EPERM");
}

/* ------------------------------------------------------------------ */
/* K3-K8: dangerous system calls */

void probe_K3(void)
{
	/* bpf(BPF_MAP_CREATE, NULL, 64): allowed -> EFAULT */
	expect_err("bpf", ERR(syscall(SYS_bpf, 0, NULL, 64)), "EPERM");
	expect_err("perf_event_open", ERR(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0)),
		   "EPERM");
	expect_err("userfaultfd", ERR(syscall(SYS_userfaultfd, 0x7fff0000)), "EPERM");
	expect_err("io_uring_setup", ERR(syscall(SYS_io_uring_setup, 1, NULL)), "EPERM");
	expect_err("io_uring_enter", ERR(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0)),
		   "EPERM");
	expect_err("io_uring_register", ERR(syscall(SYS_io_uring_register, -1, 0, NULL, 0)),
		   "EPERM");
}

void probe_K4(void)
{
	/* An unknown keyctl command: allowed -> EOPNOTSUPP */
	expect_err("keyctl", ERR(syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0)), "EPERM");
	expect_err("add_key", ERR(syscall(SYS_add_key, NULL, NULL, NULL, 0, 0)), "EPERM");
	expect_err("request_key", ERR(syscall(SYS_request_key, NULL, NULL, NULL, 0)), "EPERM");
}

void probe_K5(void)
{
	expect_err("init_module", ERR(syscall(SYS_init_module, NULL, 0, NULL)), "EPERM");
	expect_err("finit_module", ERR(syscall(SYS_finit_module, -1, NULL, 0)), "EPERM");
	expect_err("delete_module",
		   ERR(syscall(SYS_delete_module, "agentbox_probe_no_such_module", 0)), "EPERM");
}

void probe_K6(void)
{
	/* Never a valid kexec or reboot: bad flags and a bad magic number. */
	expect_err("kexec_load", ERR(syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000UL)), "EPERM");
	expect_err("kexec_file_load",
		   ERR(syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0xdead0000UL)), "EPERM");
	expect_err("reboot", ERR(syscall(SYS_reboot, 0, 0, 0, NULL)), "EPERM");
}

void probe_K7(void)
{
	expect_err("swapon", ERR(syscall(SYS_swapon, "/nonexistent-agentbox-probe", 0)), "EPERM");
	expect_err("swapoff", ERR(syscall(SYS_swapoff, "/nonexistent-agentbox-probe")), "EPERM");
	/* syslog with an unknown action: allowed -> EINVAL */
	expect_err("syslog", ERR(syscall(SYS_syslog, 42, NULL, 0)), "EPERM");
	expect_err("syslog-read-all", ERR(syscall(SYS_syslog, 3, NULL, 0)), "EPERM");
	expect_err("iopl", ERR(syscall(SYS_iopl, 4)), "EPERM");
	expect_err("ioperm", ERR(syscall(SYS_ioperm, 0x10000UL, 8UL, 1)), "EPERM");
}

void probe_K8(void)
{
	expect_err("clock_settime", ERR(syscall(SYS_clock_settime, CLOCK_REALTIME, NULL)), "EPERM");
	expect_err("settimeofday", ERR(syscall(SYS_settimeofday, (void *)1, NULL)), "EPERM");
	expect_err("adjtimex", ERR(syscall(SYS_adjtimex, NULL)), "EPERM");
	expect_err("clock_adjtime", ERR(syscall(SYS_clock_adjtime, CLOCK_REALTIME, NULL)), "EPERM");
	expect_err("open_by_handle_at", ERR(syscall(SYS_open_by_handle_at, -1, NULL, 0)), "EPERM");
}

/* ------------------------------------------------------------------ */
/* K9: socket families */

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif

static int socket_err(int domain, int type, int proto)
{
	int fd = socket(domain, type, proto);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

void probe_K9(void)
{
	static const struct {
		const char *name;
		int domain, type, proto;
	} denied[] = {
	    {"packet", AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */},
	    {"packet-dgram", AF_PACKET, SOCK_DGRAM, 0},
	    {"inet-raw", AF_INET, SOCK_RAW, 1 /* ICMP */},
	    {"inet-raw-nonblock", AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 255},
	    {"inet-packet", AF_INET, SOCK_PACKET, 0x0300},
	    {"inet6-raw", AF_INET6, SOCK_RAW, 58 /* ICMPv6 */},
	    {"vsock", AF_VSOCK, SOCK_STREAM, 0},
	    {"alg", AF_ALG, SOCK_SEQPACKET, 0},
	    {"netlink-route", AF_NETLINK, SOCK_RAW, 0},
	    {"netlink-audit", AF_NETLINK, SOCK_RAW, 9},
	    {"key", AF_KEY, SOCK_RAW, 2},
	    {"xdp", AF_XDP, SOCK_RAW, 0},
	    {"bluetooth", AF_BLUETOOTH, SOCK_RAW, 0},
	    {"can", AF_CAN, SOCK_RAW, 1},
	    {"tipc", AF_TIPC, SOCK_RDM, 0},
	    {"rds", AF_RDS, SOCK_SEQPACKET, 0},
	    {"appletalk", AF_APPLETALK, SOCK_DGRAM, 0},
	    {"x25", AF_X25, SOCK_SEQPACKET, 0},
	};
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		expect_err(denied[i].name,
			   socket_err(denied[i].domain, denied[i].type, denied[i].proto),
			   "EPERM|EAFNOSUPPORT|EACCES");
	int sv[2];
	expect_err("socketpair-inet", ERR(socketpair(AF_INET, SOCK_STREAM, 0, sv)),
		   "EPERM|EOPNOTSUPP|EAFNOSUPPORT");
	expect_err("unix-stream", socket_err(AF_UNIX, SOCK_STREAM, 0), "allowed");
	expect_err("inet-stream", socket_err(AF_INET, SOCK_STREAM, 0), "allowed");
	expect_err("inet-dgram", socket_err(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "allowed");
	/* IPv6 may be off in the kernel: that is fine too. */
	expect_err("inet6-stream", socket_err(AF_INET6, SOCK_STREAM, 0), "allowed|EAFNOSUPPORT");
}

/* ------------------------------------------------------------------ */
/* K10: terminal injection */

void probe_K10(void)
{
	char c = 'x';
	/* A bad fd: allowed -> EBADF; filtered -> EPERM. */
	expect_err("TIOCSTI", ERR(syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI, &c)), "EPERM");
	expect_err("TIOCSTI-high-bits",
		   ERR(syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI | (1UL << 32), &c)), "EPERM");
	expect_err("TIOCLINUX", ERR(syscall(SYS_ioctl, -1, (unsigned long)TIOCLINUX, &c)), "EPERM");
	expect_err("TIOCLINUX-high-bits",
		   ERR(syscall(SYS_ioctl, -1, (unsigned long)TIOCLINUX | (1UL << 32), &c)),
		   "EPERM");
	/* An ordinary ioctl still reaches the kernel. */
	expect_err("FIONREAD", ERR(syscall(SYS_ioctl, -1, (unsigned long)FIONREAD, &c)), "EBADF");
}

/* ------------------------------------------------------------------ */
/* K11: foreign system call ABIs */

static int int80_getpid(void *arg)
{
	(void)arg;
	long ret = 20; /* i386 __NR_getpid */
	__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
	return ret < 0 ? (int)-ret : 0;
}

static int x32_getpid(void *arg)
{
	(void)arg;
	long rc = syscall(0x40000000L | SYS_getpid);
	return rc < 0 ? errno : 0;
}

static void foreign(const char *what, int rc)
{
	if (rc == -SIGSYS)
		obs("%s=SIGSYS", what);
	else if (rc == -SIGSEGV && strncmp(what, "int80", 5) == 0)
		obs("%s=SIGSEGV(no-ia32-emulation)", what);
	else if (rc < 0)
		check(false, "%s=killed-by-%s", what, sigabbrev_np(-rc));
	else
		check(false, "%s=%s", what, errname(rc));
}

void probe_K11(void)
{
	foreign("int80-getpid", in_child(int80_getpid, NULL));
	foreign("x32-getpid", in_child(x32_getpid, NULL));
}
