/*
 * rootfs.h - the sandbox's file system, built from nothing.
 *
 * Runs inside the child, as root of its fresh user and mount namespaces,
 * before anything of the command exists. It builds on ctx->mnt_dir:
 *
 *   /            tmpfs, read-only at the end
 *   /usr         the host's /usr (or the --rootfs image's entries), read-only
 *   /bin /lib..  symlinks or read-only binds, as on the host
 *   /etc         synthesized: passwd, group, hosts, hostname, nsswitch.conf,
 *                plus read-only ld.so.cache and alternatives from the host
 *   /tmp /dev/shm <workdir>   one tmpfs of spec->disk_bytes, writable
 *   /dev         null zero full random urandom tty, a private devpts, shm
 *   /proc        fresh, in the new pid namespace, sensitive files masked
 *   volumes      the launcher's detached mounts, attached at their targets
 *
 * With an image (spec->image_tree, ctx->image_fd), / is instead an
 * overlay (rootfs-internal.h): the launcher's id-mapped, read-only copy of
 * the image's tree below, an upper layer in the --disk tmpfs above, and
 * writable; /etc is the image's but for hosts, hostname and resolv.conf,
 * which are ours; /tmp, the workdir, /dev, /proc and the volumes are
 * mounted in it as above.
 *
 * Every mount is nosuid and nodev, except the six device binds, which
 * need device access. There is no /sys. Then pivot_root into it and
 * detach the old root, so nothing of the host is reachable.
 */
#ifndef AGENTBOX_RUNTIME_ROOTFS_H
#define AGENTBOX_RUNTIME_ROOTFS_H

#include "base/error.h"
#include "runtime/launch-internal.h"

/* Landlock's rules for an image root: at most this many entries at its top. */
#define ROOTFS_IMAGE_TOP_MAX 128

/*
 * Build the root and enter it; cwd is "/" afterwards. With an image,
 * *ret_upper is its overlay's upper directory, open (rootfs-internal.h),
 * the caller's; else -1. 0 or -errno.
 */
int rootfs_setup(const struct launch_ctx *ctx, int *ret_upper, struct error *err);

#endif
