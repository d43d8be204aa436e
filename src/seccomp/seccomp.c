/*
 * seccomp.c - install the baked filter (run time; see seccomp.h).
 *
 * Runs in a cloned child just before exec: no allocation, no stdio, no
 * libseccomp. The program itself comes from the generated seccomp-filter.h.
 */
#include "seccomp/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp-filter.h"

#if !defined(__x86_64__) || defined(__ILP32__)
#error "the baked seccomp filter is for x86_64 only"
#endif

#define FILTER_LEN (sizeof(seccomp_filter_prog) / sizeof(seccomp_filter_prog[0]))

_Static_assert(FILTER_LEN > 0 && FILTER_LEN <= BPF_MAXINSNS, "filter must fit the kernel's limit");

static int set_filter(const struct sock_fprog *prog)
{
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	/* Kernels before 3.17 have no seccomp() call. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) == 0)
		return 0;
	return -errno;
}

int seccomp_install(struct error *err)
{
	/* The kernel copies the program; it never writes through this. */
	const struct sock_fprog prog = {
	    .len = FILTER_LEN,
	    .filter = (struct sock_filter *)seccomp_filter_prog,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return error_set_errno(err, errno, "seccomp: cannot set no_new_privs");
	int r = set_filter(&prog);
	if (r < 0)
		return error_set_errno(err, -r, "seccomp: cannot install the filter");
	return 0;
}

unsigned seccomp_filter_len(void)
{
	return FILTER_LEN;
}
