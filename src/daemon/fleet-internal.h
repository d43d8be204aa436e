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
/*
 * Tell the shim of id op ("stop", "pause", ..., or "expire" with
 * expires_at) and take its reply. 0 or -errno with err.
 */
int fleet_tell(struct fleet *f, const char *id, const char *op, int64_t expires_at, int timeout_ms,
	       struct error *err);
/* Remove the directory of a sandbox whose shim is gone. */
void fleet_remove_dir(struct fleet *f, const char *id);
/*
 * The shim of id is gone: record its end as end.json says (a pooled
 * sandbox's row is deleted instead), and remove its directory. 0 (also
 * when the end was recorded already) or -errno with err.
 */
int fleet_record_end(struct fleet *f, struct store *st, const char *id, bool pooled,
		     struct error *err);

#endif
