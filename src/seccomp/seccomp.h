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
 *  - a broad allowlist of ordinary calls (files, memory, processes, time,
 *    signals, events, sockets, IPC, aio) passes, still subject to the
 *    kernel's own permission checks;
 *  - unknown or unlisted system calls, and clone3, fail with ENOSYS, so
 *    programs take their "old kernel" path (glibc falls back from clone3 to
 *    clone, whose flags the filter can see);
 *  - a dangerous list fails with EPERM: namespaces, the mount family, bpf,
 *    perf, userfaultfd, io_uring, keyrings, ptrace and process_vm, modules,
 *    kexec, reboot, swap, clocks, open_by_handle_at, openat2, and more;
 *  - clone with namespace flags fails with EPERM;
 *  - socket() only for AF_UNIX (any type) and AF_INET/AF_INET6 stream and
 *    datagram sockets (no raw ones); socketpair() only for AF_UNIX; any
 *    other family fails with EPERM;
 *  - ioctl TIOCSTI and TIOCLINUX fail with EPERM, compared as 32-bit values
 *    as the kernel reads them;
 *  - chmod-family, open-family and mknod calls whose mode has S_ISUID or
 *    S_ISGID fail with EPERM (volumes are host directories);
 *  - personality() only for the values Docker allows, else EPERM;
 *  - any foreign architecture (i386 int 0x80, x32) kills the process.
 *
 * Install it last, after every other restriction, just before exec: after
 * it the process can no longer unshare, mount or pivot_root.
 */
#ifndef AGENTBOX_SECCOMP_SECCOMP_H
#define AGENTBOX_SECCOMP_SECCOMP_H

#include "base/error.h"

/*
 * Set no_new_privs and install the sandbox filter on the calling thread
 * (and so on everything it execs or forks). Allocates nothing and uses no
 * stdio, so it is safe in a child between clone() and exec(). Stacks on
 * any filter already installed. Returns 0 or -errno (with err filled).
 */
int seccomp_install(struct error *err);

/* Number of BPF instructions in the built-in filter (for `agentbox info`). */
unsigned seccomp_filter_len(void);

#endif
