/*
 * privs.h - giving up privilege inside the sandbox, for good.
 *
 * Called by the sandbox's init as root of its user namespace, once the
 * mounts are done. Afterwards every capability set is empty (effective,
 * permitted, inheritable, bounding, ambient), the securebits are locked so
 * no exec can bring capabilities back, and the process runs as uid/gid;
 * or, for a sandbox whose user is root (spec.h), it stays uid 0 of its
 * namespace with PRIVS_ROOT_CAPS alone.
 */
#ifndef AGENTBOX_RUNTIME_PRIVS_H
#define AGENTBOX_RUNTIME_PRIVS_H

#include "base/error.h"
#include "runtime/spec.h"

#include <linux/capability.h>
#include <sys/types.h>

/* Drop everything and become uid/gid (ids inside the namespace). */
int privs_drop(uid_t uid, gid_t gid, struct error *err);

/*
 * The capabilities of SPEC_USER_ROOT: what a package manager needs inside
 * its own namespace and nothing more. dpkg chowns and chmods what it
 * unpacks (CHOWN, FOWNER; FSETID keeps a setgid directory's bit through a
 * chown) and writes where root may (DAC_OVERRIDE); apt drops its helpers
 * to _apt, sets their groups and signals them (SETUID, SETGID, KILL).
 * Every one acts only on the sandbox's own ids and files: its range, its
 * tmpfs and overlay, its rw volumes; none reaches the kernel's global
 * state (no SYS_ADMIN, NET_ADMIN, MKNOD, SYS_PTRACE, SETPCAP, SETFCAP).
 */
#define PRIVS_ROOT_CAPS                                                                            \
	((1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FOWNER) |                 \
	 (1ULL << CAP_FSETID) | (1ULL << CAP_KILL) | (1ULL << CAP_SETGID) | (1ULL << CAP_SETUID))

/*
 * Stay uid/gid 0 of the namespace with PRIVS_ROOT_CAPS as the bounding,
 * permitted and effective sets (none inheritable or ambient), the
 * securebits locked as they are (root keeps exactly these across exec;
 * a switch to another uid loses them, as apt's _apt does), no_new_privs.
 */
int privs_keep_root(struct error *err);

/*
 * Resource limits of the sandbox: core 0 (hard), nofile, fsize, memlock,
 * rtprio 0. Must run while still privileged (hard limits may be lowered
 * by anyone, raised by nobody afterwards).
 */
int privs_set_rlimits(const struct spec *spec, struct error *err);

#define SANDBOX_NOFILE_SOFT 1024
#define SANDBOX_NOFILE_HARD 4096
#define SANDBOX_MEMLOCK	    (8ULL << 20)
#define SANDBOX_FSIZE_MIN   (4ULL << 30)

#endif
