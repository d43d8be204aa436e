/*
 * loopfs.h - mount a file system image through a loop device, detached:
 * how a task's /state (supervisor/state.h) reaches its sandbox.
 *
 * The mount is made here, on the host side (ext4 cannot be mounted from
 * inside a user namespace), and handed to init as a detached tree, which
 * init attaches inside the sandbox's own mount namespace. Nothing is
 * mounted in the host's namespace, so nothing is left there if we die.
 *
 * Lifetime: the loop device is bound with LO_FLAGS_AUTOCLEAR, so it goes
 * away with its last user, the mount; the mount goes away with the
 * sandbox's mount namespace. Two mounts of one image at once would
 * corrupt it, and the previous attempt's mount may still be going away
 * when the next attempt starts: the image is flock()ed through the open
 * file the loop device keeps, so the lock lasts exactly as long as the
 * loop device, and the next mount waits for it (LOOPFS_BUSY_WAIT_MS).
 */
#ifndef AGENTBOX_RUNTIME_LOOPFS_H
#define AGENTBOX_RUNTIME_LOOPFS_H

#include "base/error.h"

/* File system type of every image, and the owner of its root on disk. */
#define LOOPFS_TYPE	"ext4"
#define LOOPFS_ROOT_UID 0
#define LOOPFS_ROOT_GID 0

/* How long a mount waits for an earlier mount of the same image to go. */
#define LOOPFS_BUSY_WAIT_MS 30000

/*
 * Mount the image file at path (LOOPFS_TYPE) read-write, nosuid, nodev,
 * detached: returns the tree's fd (O_CLOEXEC), for move_mount(), or
 * -errno with err: -EBUSY when the image stayed mounted elsewhere for
 * LOOPFS_BUSY_WAIT_MS, -ENODEV without loop devices.
 */
int loopfs_mount(const char *path, struct error *err);

#endif
