/*
 * seccomp.h - the sandbox's system call filter.
 *
 * The policy lives in seccomp-policy.c and is compiled with libseccomp at
 * *build* time by the seccomp-gen tool into a BPF program (the generated
 * seccomp-filter.h). At run time nothing is built: seccomp_install() hands
 * the ready program to the kernel with raw calls, so it is cheap and safe
 * to call in a freshly cloned child, and libseccomp is never loaded into a
 * process that enters a sandbox.
 *
 * The policy, in short (docs/SECURITY.md has the full list and reasons):
 *  - unknown system calls and clone3 fail with ENOSYS;
 *  - a dangerous list fails with EPERM: namespaces, the mount family, bpf,
 *    perf, userfaultfd, io_uring, keyrings, ptrace and process_vm, modules,
 *    kexec, reboot, swap, clocks, open_by_handle_at, and more;
 *  - clone with namespace flags fails with EPERM;
 *  - socket() only for AF_UNIX, AF_INET and AF_INET6, and no raw sockets;
 *  - ioctl TIOCSTI and TIOCLINUX fail with EPERM, compared as 32-bit values;
 *  - chmod-family and open-family calls that set setuid/setgid bits fail
 *    with EPERM;
 *  - any foreign architecture (i386 int 0x80, x32) kills the process.
 *
 * Install it last, after every other restriction, just before exec.
 */
#ifndef AGENTBOX_SECCOMP_SECCOMP_H
#define AGENTBOX_SECCOMP_SECCOMP_H

#include "base/error.h"

/*
 * Set no_new_privs and install the sandbox filter on the calling thread.
 * Returns 0 or -errno (with err filled).
 */
int seccomp_install(struct error *err);

/* Number of BPF instructions in the built-in filter (for `agentbox info`). */
unsigned seccomp_filter_len(void);

#endif
