/*
 * state.h - a task's /state: a file system of its own, kept from one
 * attempt to the next, that holds at most limits.state_mb of the host's
 * disk.
 *
 *   <state>/tasks/<task id>/state.img   an ext4 image of state_mb bytes,
 *                                       sparse: it takes on disk what the
 *                                       task wrote, never more than its size
 *
 * The image is made once, before the first attempt, by mke2fs (e2fsprogs),
 * under a temporary name renamed into place when whole, so a crash leaves
 * no half-made image. Each attempt mounts it through a loop device
 * (runtime/loopfs.h). What a task makes there, its data and its
 * symlinks, FIFOs and sockets alike, stays inside the image: the host
 * sees one regular file.
 *
 * A task that began before images has a directory, state/, and keeps it.
 */
#ifndef AGENTBOX_SUPERVISOR_STATE_H
#define AGENTBOX_SUPERVISOR_STATE_H

#include "base/error.h"
#include "core/layout.h" /* LAYOUT_TASK_STATE_IMAGE, _TEMP */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The file-system maker (e2fsprogs), looked up in these directories only. */
#define STATE_MKFS	"mke2fs"
#define STATE_MKFS_PATH "/usr/sbin:/sbin:/usr/bin:/bin"

/*
 * Make sure the task directory task_dir has its /state, of bytes: write
 * the host path of /state into path[0..size) and set *ret_image (false:
 * a directory of an older task). 0 or -errno with err.
 */
int state_prepare(const char *task_dir, uint64_t bytes, char *path, size_t size, bool *ret_image,
		  struct error *err);

#endif
