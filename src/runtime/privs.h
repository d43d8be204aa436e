/*
 * privs.h - giving up privilege inside the sandbox, for good.
 *
 * Called by the sandbox's init as root of its user namespace, once the
 * mounts are done. Afterwards every capability set is empty (effective,
 * permitted, inheritable, bounding, ambient), the securebits are locked so
 * no exec can bring capabilities back, and the process runs as uid/gid.
 */
#ifndef AGENTBOX_RUNTIME_PRIVS_H
#define AGENTBOX_RUNTIME_PRIVS_H

#include "base/error.h"
#include "runtime/spec.h"

#include <sys/types.h>

/* Drop everything and become uid/gid (ids inside the namespace). */
int privs_drop(uid_t uid, gid_t gid, struct error *err);

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
