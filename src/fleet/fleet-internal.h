/*
 * fleet-internal.h - what the files of the fleet share: fleet.c (members,
 * shims, ends), fleet-pool.c (the keeper, the warm pool, recovery),
 * fleet-ops.c (the sandbox's lifecycle) and fleet-proc.c (commands and
 * files, through the shim).
 */
#ifndef AGENTBOX_FLEET_FLEET_INTERNAL_H
#define AGENTBOX_FLEET_FLEET_INTERNAL_H

#include "fleet/fleet.h"

#include <pthread.h>
#include <stdatomic.h>

struct member {
	char id[SANDBOX_ID_SIZE];
	int lock_fd;	 /* a second open of <dir>/lock: free once the shim is gone */
	bool pooled;	 /* in the pool, not handed out yet */
	bool parked;	 /* pooled with a parked link: handed out only with a network */
	bool ending;	 /* a delete is waiting for it: the keeper leaves it alone */
	char image[80];	 /* its image's config digest, from its spec; "": none */
	uint64_t memory; /* its memory limit (admission) */
	/* whose it is once handed out ("" while pooled), and what it holds of
	 * that tenant's quotas: one sandbox, its memory, CPUs and disk */
	char tenant[TENANT_NAME_SIZE];
	struct quota amounts;
};

/* What a tenant holds that is no member: a running task, or a create being admitted. */
struct charge {
	char tenant[TENANT_NAME_SIZE];
	struct quota amounts;
};

/* The waiters (fleet.h) of one sandbox, by id: members come and go, these last. */
struct waiters {
	char id[SANDBOX_ID_SIZE];
	unsigned n;
};

struct fleet {
	struct fleet_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a member went away */
	struct member *m;
	size_t n, cap;
	unsigned admitting;	   /* creates admitted, their member not added yet */
	uint64_t admitting_memory; /* their memory */
	uint64_t tasks_memory;	   /* of running tasks: fleet_admit_task() */
	struct charge *charges;	   /* running tasks and creates being admitted, by tenant */
	size_t ncharges, capcharges;
	unsigned waiters;  /* in all */
	struct waiters *w; /* per sandbox, only those with any */
	size_t nw, capw;
	pthread_t keeper;
	bool keeper_started;
	volatile int stopping;
	atomic_bool network_used; /* a poolable create asked for a network: links are parked */
};

/* The time to record: cfg.now_ms(), or the wall clock. */
int64_t fleet_now(const struct fleet *f);

/* Tell cfg.log, if any, a formatted line. */
void fleet_log(struct fleet *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The directory of sandbox id (core/layout.h). 0 or -ENAMETOOLONG. */
int fleet_dir(const struct fleet *f, const char *id, char *buf, size_t size);

/*
 * Watch the shim of id, whose lock lock_fd opened (taken), with the
 * memory limit of spec_json (admission). 0 or -ENOMEM.
 */
/* What a shim's sandbox is to the fleet. */
enum fleet_kind {
	FLEET_HANDED_OUT, /* asked for: handed out at once */
	FLEET_POOLED,	  /* in the warm pool */
	FLEET_PARKED,	  /* in the warm pool with its link made ahead (runtime/nethelper.h) */
};

int fleet_add_member(struct fleet *f, const char *id, int lock_fd, enum fleet_kind kind,
		     const char *spec_json, const char *tenant);
/* What a canonical spec's limits take of a tenant's quotas: memory, CPUs, disk. */
void fleet_spec_amounts(const char *spec_json, struct quota *ret);
/* A canonical spec's image's config digest ("sha256:..."), or "" without one, into buf. */
void fleet_spec_image(const char *spec_json, char *buf, size_t size);
/* With f->lock held: what tenant holds now (every quota but tasks_queued and timeout_s). */
void fleet_tenant_held(const struct fleet *f, const char *tenant, struct quota *ret);
/* With f->lock held: count amounts against tenant (0, or -ENOMEM), or stop counting them. */
int fleet_charge(struct fleet *f, const char *tenant, const struct quota *amounts);
void fleet_uncharge(struct fleet *f, const char *tenant, const struct quota *amounts);
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
int fleet_start_shim(struct fleet *f, const char *id, const char *tenant, const char *spec_json,
		     const char *env_json, const char *secrets_json, int64_t expires_at,
		     enum fleet_kind kind, struct error *err);
/*
 * Tell the shim of id op ("stop", "pause", ..., or "expire" with
 * expires_at) and take its reply. 0 or -errno with err (the shim's own
 * errno, not -EREMOTEIO: callers map it).
 */
int fleet_tell(struct fleet *f, const char *id, const char *op, int64_t expires_at, int timeout_ms,
	       struct error *err);
/*
 * One request to the shim of id, one reply (and its fd, if ret_fd). 0,
 * or -EREMOTEIO with err->code the shim's errno (fleet.h).
 */
int fleet_call(struct fleet *f, const char *id, json_t *request, int pass_fd, json_t **ret_reply,
	       int *ret_fd, struct error *err);
/* A shim's refusal r (its own errno) as fleet.h's -EREMOTEIO, the errno in err->code. */
int fleet_shim_refused(int r, struct error *err);
/* Remove the directory of a sandbox whose shim is gone. */
void fleet_remove_dir(struct fleet *f, const char *id);
/*
 * The shim of id is gone: record its end as end.json says (a pooled
 * sandbox's row is deleted instead), and remove its directory. 0 (also
 * when the end was recorded already) or -errno with err.
 */
int fleet_record_end(struct fleet *f, struct store *st, const char *id, bool pooled,
		     struct error *err);
/* As fleet_record_end(), telling cfg.log when it fails. */
void fleet_record_end_or_log(struct fleet *f, struct store *st, const char *id, bool pooled);

#endif
