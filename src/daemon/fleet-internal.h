/*
 * fleet-internal.h - what fleet.c (members, shims, the keeper, the pool,
 * recovery) and fleet-ops.c (the requests of the API) share.
 */
#ifndef AGENTBOX_DAEMON_FLEET_INTERNAL_H
#define AGENTBOX_DAEMON_FLEET_INTERNAL_H

#include "daemon/fleet.h"

#include <pthread.h>

struct member {
	char id[SANDBOX_ID_SIZE];
	int lock_fd; /* a second open of <dir>/lock: free once the shim is gone */
	bool pooled; /* in the pool, not handed out yet */
	bool ending; /* a delete is waiting for it: the keeper leaves it alone */
};

struct fleet {
	struct fleet_config cfg;
	char default_spec[512]; /* the canonical spec of the default limits */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a member went away */
	struct member *m;
	size_t n, cap;
	pthread_t keeper;
	bool keeper_started;
	volatile int stopping;
};

/* With f->lock held: the member for id, or NULL. */
struct member *fleet_find_member(struct fleet *f, const char *id);
/* With f->lock held: forget m (closes its lock fd). */
void fleet_drop_member(struct fleet *f, struct member *m);
/* Does the shim holding the lock that lock_fd opened still live? */
bool fleet_shim_alive(int lock_fd);
/* Write v as dir/name, atomically (a temporary file renamed). 0 or -errno. */
int fleet_write_json(int dirfd, const char *name, json_t *v);
/*
 * Start the shim of sandbox id in a new directory, and wait until its
 * sandbox is ready. On success the fleet watches it.
 */
int fleet_start_shim(struct fleet *f, const char *id, const char *spec_json, const char *env_json,
		     int64_t expires_at, bool pooled, struct error *err);
/* Remove the directory of a sandbox whose shim is gone. */
void fleet_remove_dir(struct fleet *f, const char *id);
/* How end.json says the sandbox ended, or "failed" when it does not say. */
void fleet_read_end(struct fleet *f, const char *id, char *reason, size_t rsize, char *detail,
		    size_t dsize, int64_t *when);

#endif
