/*
 * landlock.h - file-system rules the kernel enforces on the sandbox.
 *
 * After the root is built, the sandbox may read and execute everywhere
 * in it, but write, create, remove and rename only beneath the writable
 * paths it is given (/tmp, /dev/shm, the workdir, rw volumes). Device
 * nodes in /dev may be written and take ioctls, nothing may be created
 * there. Nothing under /proc is writable (/proc/<pid>/mem is ptrace by
 * another name). A side effect: POSIX message queues cannot be created,
 * since Landlock sees the kernel's internal mqueue mount as outside every
 * rule; System V IPC is unaffected. Where the kernel has Landlock ABI 6, abstract unix sockets and
 * signals are scoped to the sandbox too.
 *
 * Landlock is one layer of several: on a kernel without it,
 * landlock_apply() returns -EOPNOTSUPP and the caller goes on with the
 * other layers; `agentbox info` reports which layers are active.
 */
#ifndef AGENTBOX_RUNTIME_LANDLOCK_H
#define AGENTBOX_RUNTIME_LANDLOCK_H

#include "base/error.h"

#include <stddef.h>

/* The kernel's Landlock ABI version, or 0 when it has none. */
int landlock_abi(void);

/*
 * Restrict the calling process and its future children. writable is an
 * array of n absolute paths (inside the new root). 0, -EOPNOTSUPP when
 * Landlock is unavailable, or another -errno with err filled.
 */
int landlock_apply(const char *const *writable, size_t n, struct error *err);

#endif
