/*
 * idmap.h - id-mapped mounts, made by the launcher (host root) for init.
 *
 * An id-mapped mount shows a file whose owner on disk is D as owned by
 * another host id H; the sandbox's own user namespace then shows H as
 * H - its base. The mapping is a user namespace used for nothing else:
 * its uid_map and gid_map read "D H count". Only a process privileged
 * over the file system's user namespace (the host's) may set one, so the
 * launcher does it before clone() and init attaches the result.
 */
#ifndef AGENTBOX_RUNTIME_IDMAP_H
#define AGENTBOX_RUNTIME_IDMAP_H

#include "core/limits.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The processes that held mapping namespaces, killed but not yet reaped:
 * the caller reaps them once waiting costs it nothing, instead of waiting
 * for each to be scheduled and exit (on a busy host, most of a
 * millisecond). They send no SIGCHLD and only a wait with __WALL reaps
 * them, so another waitpid(-1) of the caller's never takes one. Past
 * IDMAP_HOLDERS_MAX, or with no list, a holder is reaped at once.
 */
#define IDMAP_HOLDERS_MAX (SPEC_VOLUMES_MAX + 1)
struct idmap_holders {
	pid_t pid[IDMAP_HOLDERS_MAX];
	size_t n;
};

/* Reap every holder in h (waiting for those not yet gone). */
void idmap_holders_reap(struct idmap_holders *h);

/* Reap the holders in h that are gone already; the others stay. */
void idmap_holders_reap_gone(struct idmap_holders *h);

/*
 * A user namespace whose maps send disk uids disk_uid..+count-1 and disk
 * gids disk_gid..+count-1 to host ids host_first..+count-1. Its fd
 * (O_CLOEXEC; the process that held it is gone), or -errno.
 */
int idmap_userns_open(uid_t disk_uid, gid_t disk_gid, uid_t host_first, unsigned count,
		      struct idmap_holders *holders);

/*
 * Set attr_set (MOUNT_ATTR_*) and the mapping above on the detached
 * mount tree_fd. 0, or -errno (EINVAL, EPERM: the file system or kernel
 * cannot map ids; the caller decides whether it may go on without).
 */
int idmap_mount(int tree_fd, uid_t disk_uid, gid_t disk_gid, uid_t host_first, unsigned count,
		uint64_t attr_set, struct idmap_holders *holders);

#endif
