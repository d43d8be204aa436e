/*
 * rootfs-internal.h - the image root's half of rootfs.c (rootfs-image.c),
 * and what both halves share. Runs in init, as root of its namespaces.
 */
#ifndef AGENTBOX_RUNTIME_ROOTFS_INTERNAL_H
#define AGENTBOX_RUNTIME_ROOTFS_INTERNAL_H

#include "base/error.h"
#include "runtime/launch-internal.h"

/* The /etc files that are always the sandbox's own, whatever the root. */
#define ROOTFS_ETC_HOSTS    "127.0.0.1\tlocalhost " SANDBOX_HOSTNAME "\n::1\tlocalhost\n"
#define ROOTFS_ETC_HOSTNAME SANDBOX_HOSTNAME "\n"
/* answered outside, for a sandbox with a network; unreachable without one */
#define ROOTFS_ETC_RESOLV "nameserver " SANDBOX_RESOLVER "\noptions edns0\n"

/*
 * With the data tmpfs mounted at data_dfd (the --disk one), make the
 * image root's overlay: the launcher's id-mapped tree (which comes on
 * ctx->sync_fd, after the go) as its lower layer, its upper and work directories in that
 * tmpfs. The upper layer starts with what the runtime needs: every
 * directory a mount goes on (dev, proc, tmp, the workdir, the volumes'
 * targets) and /etc as real directories (a symlink or file of the image
 * in their way hidden: an image cannot send a mount or a write out of its
 * root), and /etc's hosts, hostname and resolv.conf, over the image's.
 * Changes the cwd. *ret_root: the overlay, detached, nosuid and nodev, for
 * the caller to attach; *ret_upper: its upper directory, open (O_RDONLY |
 * O_DIRECTORY | O_CLOEXEC), which nothing else reaches once the tmpfs is
 * detached (a commit reads it: serve.h's sandbox_upper()). 0 or -errno.
 */
int rootfs_image_overlay(const struct launch_ctx *ctx, int data_dfd, int *ret_root, int *ret_upper,
			 struct error *err);

#endif
