/*
 * store.h - where tasks, their events, interactive sandboxes, tenants and
 * API keys live durably.
 *
 * One interface, several backends: SQLite (WAL, synchronous=FULL) now,
 * PostgreSQL later (a queue claimed with FOR UPDATE SKIP LOCKED). Every
 * backend passes the same contract tests (tests/unit/test-store*.c).
 *
 * Durability: when a call returns 0, what it wrote is on disk (committed
 * and fsync'd). Between store_tx_begin() and store_tx_commit() the calls
 * are grouped into one transaction and are durable only once the commit
 * returns 0: that is how progress events are group-committed.
 *
 * Fencing: calls that act on a running attempt name it; if the task has
 * moved on (a newer attempt, or an end) they fail with -ESTALE and change
 * nothing, so a slow or resurrected supervisor cannot overwrite the truth.
 * Sandbox calls are fenced by status the same way.
 *
 * A task's status change is stored in the same transaction as the status
 * event that records it, and only along task_transition_is_allowed(). A
 * sandbox has no events; its status moves only along
 * sandbox_transition_is_allowed().
 *
 * Tenants: every task and sandbox belongs to one (its tenant field, a
 * tenant_name_is_valid() name; TENANT_DEFAULT for every row from before
 * tenants). Lists filter by tenant. Of an API key the store keeps its
 * public id and the SHA-256 of its secret, never the secret (it does not
 * know the key's text form: auth/key.h is the API's), and no message of
 * the store ever holds a hash.
 *
 * Errors: 0 or -errno; -ENOENT for an unknown task, sandbox, tenant or
 * key; err says why. A failed call changed nothing; a failed commit has rolled back.
 * Limits: the merged progress of a task is at most STORE_PROGRESS_MAX
 * bytes (-E2BIG), JSON nests at most STORE_JSON_DEPTH_MAX deep.
 * Not thread-safe: one struct store per thread. The database holds task
 * and sandbox specs (their env may hold secrets): keep it in a 0700
 * directory.
 */
#ifndef AGENTBOX_STORE_STORE_H
#define AGENTBOX_STORE_STORE_H

#include "base/error.h"
#include "core/sandbox.h"
#include "core/task.h"
#include "core/tenant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* The merged progress of one task may not grow past this (-E2BIG). */
#define STORE_PROGRESS_MAX (1024 * 1024)
/* Nesting a progress event's JSON may have. */
#define STORE_JSON_DEPTH_MAX 256

/* Open (creating if needed) a SQLite store at path and migrate its schema. */
int store_open_sqlite(const char *path, struct store **ret, struct error *err);

/* Close and free. Returns NULL. */
struct store *store_close(struct store *st);

/* The schema version the store is at (migrations are numbered from 1). */
int store_schema_version(struct store *st);

int store_tx_begin(struct store *st, struct error *err);
int store_tx_commit(struct store *st, struct error *err);
/* Undo everything since store_tx_begin(). */
void store_tx_rollback(struct store *st);

/*
 * Insert a new task, status queued, attempt 0, progress "{}". The caller
 * fills id, tenant, max_attempts, retry_on, created_at and spec_json.
 * -EEXIST if the id is taken; -EINVAL for anything malformed, a tenant
 * that is not tenant_name_is_valid() (empty too) among them; -ENOENT for
 * a tenant that does not exist (or was deleted), checked with the insert.
 */
int store_task_insert(struct store *st, const struct task *t, struct error *err);

/*
 * store_task_insert(), if t's tenant has fewer than queued_max tasks
 * queued, counted with the insert (so that submits at once cannot all
 * pass): else -EDQUOT and *ret_queued (may be NULL) gets that count.
 */
int store_task_insert_within(struct store *st, const struct task *t, uint64_t queued_max,
			     uint64_t *ret_queued, struct error *err);

/* How many tasks have status now (the queue's length: TASK_QUEUED). */
int store_task_count(struct store *st, enum task_status status, uint64_t *ret, struct error *err);

/* As store_task_count(), of one tenant's tasks (-EINVAL if it is not tenant_name_is_valid()). */
int store_task_count_tenant(struct store *st, const char *tenant, enum task_status status,
			    uint64_t *ret, struct error *err);

/* Read one task; *ret is filled with owned copies (task_release()). */
int store_task_get(struct store *st, const char *id, struct task *ret, struct error *err);

struct task_filter {
	uint32_t statuses;    /* TASK_STATUS_BIT()s; 0 = all */
	const char *after_id; /* page after this task, in creation order; NULL = first page;
			       * -ENOENT if there is no such task */
	size_t limit;	      /* most tasks to return; 1..STORE_LIST_MAX */
	const char *tenant;   /* NULL: every tenant; else only its tasks (-EINVAL if it is not
			       * tenant_name_is_valid()), and after_id must be one of them
			       * (-ENOENT if it is another tenant's) */
};
#define STORE_LIST_MAX 1000

/*
 * Call fn for each matching task, oldest first. The task passed to fn is
 * valid only during the call. fn returns 0 (or more) to go on, or a
 * negative errno to stop with it. Rows are read before fn is called, so
 * fn may call the store.
 */
int store_task_list(struct store *st, const struct task_filter *f,
		    int (*fn)(const struct task *t, void *data), void *data, struct error *err);

/*
 * Take the next queued task, fairly across tenants: of each tenant's
 * oldest queued task, that of the tenant with the fewest running, then
 * the oldest; first in first out within a tenant. It becomes running,
 * its attempt counter goes up by one, started_at is set on its first
 * attempt, and a status event is recorded. -ENOENT when none is queued.
 */
int store_task_claim(struct store *st, int64_t now, struct task *ret, struct error *err);

/*
 * store_task_claim(), of the tenants not in skip (NULL: none; else an
 * array of nskip names, at most STORE_CLAIM_SKIP_MAX), if fits(the next
 * queued task, with its spec, data) returns 0: it may start now. Else
 * nothing changes and fits's -errno is returned (with err filled, as
 * fits says): the task stays first in its tenant's queue.
 */
#define STORE_CLAIM_SKIP_MAX 4096
int store_task_claim_if(struct store *st, int64_t now, const char *const *skip, size_t nskip,
			int (*fits)(const struct task *t, void *data, struct error *err),
			void *data, struct task *ret, struct error *err);

/*
 * The attempt `attempt` of a running task ended with `end` (a final
 * status). The task becomes task_after_attempt(end, ...): queued again
 * for a retry, or final with finished_at, exit_code and error set. A
 * status event records it. *ret_status (may be NULL) gets the new status.
 * -ESTALE if the task is not running that attempt.
 */
int store_task_end_attempt(struct store *st, const char *id, uint32_t attempt, enum task_status end,
			   int exit_code, const char *error, int64_t now,
			   enum task_status *ret_status, struct error *err);

/*
 * Cancel: a queued task becomes cancelled at once (and *ret_status says
 * so); a running one gets cancel_requested, for the scheduler to kill it
 * and end the attempt as cancelled (asking twice is fine). A requested
 * cancel wins over a retry and over lost: the task ends cancelled. A
 * final task is left alone and -EALREADY returned.
 */
int store_task_cancel(struct store *st, const char *id, int64_t now, enum task_status *ret_status,
		      struct error *err);

/*
 * Record a progress event (data_json: a compact JSON object, already
 * validated) of the running attempt `attempt`, and merge it into the
 * task's progress, top-level keys of the latest event winning. -ESTALE if
 * that attempt is not the running one. *ret_seq (may be NULL) gets its seq.
 */
int store_progress_append(struct store *st, const char *id, uint32_t attempt, const char *data_json,
			  int64_t now, int64_t *ret_seq, struct error *err);

/*
 * Record an egress_denied event (data_json: a compact JSON object) of the
 * running attempt `attempt`; the task's progress is left alone. -ESTALE
 * if that attempt is not the running one.
 */
int store_egress_denied_append(struct store *st, const char *id, uint32_t attempt,
			       const char *data_json, int64_t now, struct error *err);

/*
 * Call fn for each event of task id with seq > after_seq, in order, at
 * most limit (1..STORE_LIST_MAX) of them. The event is valid only during
 * the call.
 */
int store_events_list(struct store *st, const char *id, int64_t after_seq, size_t limit,
		      int (*fn)(const struct task_event *ev, void *data), void *data,
		      struct error *err);

/*
 * Delete a task that has ended (a final status): its row, its spec and
 * its events, in one transaction. -EBUSY for a task that has not ended
 * (cancel it first); -ENOENT for none. Its files (core/layout.h's task
 * directory) are the caller's to remove, after the rows: a crash between
 * the two leaves a directory that no row names, which agentboxd's start
 * removes (sched/retain.h), and never a row whose files are gone. The
 * audit log's rows that name the task stay: the log has its own bound.
 */
int store_task_delete(struct store *st, const char *id, struct error *err);

/*
 * Call fn with the id of each task that ended (a final status) before
 * `before` (finished_at < before, ms since the epoch), the earliest end
 * first, at most limit (1..STORE_LIST_MAX) of them. The ids are read
 * before fn is called, so fn may delete them; fn as in store_task_list().
 */
int store_task_list_ended(struct store *st, int64_t before, size_t limit,
			  int (*fn)(const char *id, void *data), void *data, struct error *err);

/* ---- interactive sandboxes --------------------------------------------- */

/*
 * Insert a new sandbox. The caller fills id, tenant (TENANT_DEFAULT for a
 * pooled sandbox: the pool is nobody's until a claim), status
 * (SANDBOX_POOLED for the warm pool, or SANDBOX_RUNNING), created_at,
 * expires_at (0 = never), spec_json (a JSON object of at most
 * SANDBOX_SPEC_MAX bytes) and metadata_json (an object of at most
 * SANDBOX_METADATA_MAX bytes; NULL for "{}"). ended_at, end_reason and
 * end_detail are the store's: insert ignores them. -EEXIST if the id is
 * taken, -E2BIG past a limit, -EINVAL for anything else malformed (a
 * tenant that is not tenant_name_is_valid(), empty too, or a pooled
 * sandbox's that is not TENANT_DEFAULT); -ENOENT for a tenant that does
 * not exist, as for tasks.
 */
int store_sandbox_insert(struct store *st, const struct sandbox_record *sb, struct error *err);

/* Read one sandbox; *ret is filled with owned copies (sandbox_record_release()). */
int store_sandbox_get(struct store *st, const char *id, struct sandbox_record *ret,
		      struct error *err);

struct sandbox_filter {
	uint32_t statuses;    /* SANDBOX_STATUS_BIT()s; 0 = running, paused and ended:
			       * pooled sandboxes are listed only when asked for */
	const char *after_id; /* page after this sandbox, in creation order; NULL = first
			       * page; -ENOENT if there is no such sandbox */
	size_t limit;	      /* most sandboxes to return; 1..STORE_LIST_MAX */
	const char *tenant;   /* NULL: every tenant; else as in struct task_filter */
};

/*
 * Call fn for each matching sandbox, oldest created_at first (insertion
 * order breaks ties). As store_task_list(): the sandbox passed to fn is
 * valid only during the call, fn returns 0 (or more) to go on or a
 * negative errno to stop with it, and rows are read before fn is called,
 * so fn may call the store. A claim sets created_at, so a claimed sandbox
 * moves to where its hand-out time puts it.
 */
int store_sandbox_list(struct store *st, const struct sandbox_filter *f,
		       int (*fn)(const struct sandbox_record *sb, void *data), void *data,
		       struct error *err);

/*
 * Hand a pooled sandbox out to tenant (the claimer's): it becomes running
 * and that tenant's from now on, created_at = now (the moment the user
 * got it), expires_at as given (0 = never), spec_json as given (NULL: the
 * pool's spec stays; the claimer's differs in env and network),
 * metadata_json as given (NULL for "{}"; limits as for insert). -EINVAL if
 * tenant is not tenant_name_is_valid(); -ENOENT if it does not exist
 * (looked up under the claim's write lock); -ESTALE if it is not pooled
 * (another claimer got it first, or it ended).
 */
int store_sandbox_claim(struct store *st, const char *id, const char *tenant, int64_t now,
			int64_t expires_at, const char *spec_json, const char *metadata_json,
			struct error *err);

/*
 * Pause (from SANDBOX_RUNNING to SANDBOX_PAUSED) or resume (the other
 * way); no other pair (-EINVAL: claims and ends have their own calls).
 * -ESTALE if the sandbox is not in `from`.
 */
int store_sandbox_set_status(struct store *st, const char *id, enum sandbox_status from,
			     enum sandbox_status to, struct error *err);

/* Set expires_at (ms since the epoch; 0 = never). -ESTALE if the sandbox has ended. */
int store_sandbox_set_expiry(struct store *st, const char *id, int64_t expires_at,
			     struct error *err);

/*
 * End a sandbox, whatever its status: it becomes ended at now, for reason
 * (a sandbox_end_reason_is_valid() word, else -EINVAL) with detail (NULL
 * or any text). -ESTALE if it has ended already: the first end stays.
 */
int store_sandbox_end(struct store *st, const char *id, int64_t now, const char *reason,
		      const char *detail, struct error *err);

/*
 * Remove a sandbox's row: a pooled sandbox that is discarded, or an
 * ended one that is forgotten. -ESTALE for a running or paused sandbox
 * (end it first).
 */
int store_sandbox_delete(struct store *st, const char *id, struct error *err);

/*
 * As store_task_list_ended(), of sandboxes: those ended (SANDBOX_ENDED)
 * before `before` (ended_at < before), the earliest end first. Pooled
 * ones are never listed. store_sandbox_delete() removes one.
 */
int store_sandbox_list_ended(struct store *st, int64_t before, size_t limit,
			     int (*fn)(const char *id, void *data), void *data, struct error *err);

/* ---- tenants ----------------------------------------------------------- */

/*
 * A tenant as stored. quotas_json is owned by the struct and freed by
 * tenant_record_release(): the JSON object last set, as it was given (at
 * most TENANT_QUOTAS_MAX bytes), "{}" when none was. The store keeps it
 * and gives it back; what its members mean is the caller's.
 */
struct tenant_record {
	char name[TENANT_NAME_SIZE];
	int64_t created_at; /* ms since the epoch; 0 for TENANT_DEFAULT */
	char *quotas_json;  /* owned; "{}" */
};

/* Free what t owns; t's strings are NULL after. */
void tenant_record_release(struct tenant_record *t);

/*
 * Add a tenant named name (tenant_name_is_valid()), created at now, with
 * quotas_json (a JSON object of at most TENANT_QUOTAS_MAX bytes; NULL for
 * "{}"). -EEXIST if there is one of that name (TENANT_DEFAULT always is);
 * -EINVAL for a name that is not valid or quotas that are not such an
 * object.
 */
int store_tenant_insert(struct store *st, const char *name, int64_t now, const char *quotas_json,
			struct error *err);

/*
 * Read one tenant into *ret (tenant_record_release()). -ENOENT if there is
 * none of that name (a name no tenant can have too).
 */
int store_tenant_get(struct store *st, const char *name, struct tenant_record *ret,
		     struct error *err);

/*
 * Call fn for every tenant, by name (byte order). As store_task_list():
 * the tenant passed to fn is valid only during the call, fn returns 0 (or
 * more) to go on or a negative errno to stop with it, and rows are read
 * before fn is called, so fn may call the store. Every tenant is read at
 * once: there are few.
 */
int store_tenant_list(struct store *st, int (*fn)(const struct tenant_record *t, void *data),
		      void *data, struct error *err);

/*
 * Replace a tenant's quotas with quotas_json (a JSON object of at most
 * TENANT_QUOTAS_MAX bytes, else -EINVAL). -ENOENT if there is no such
 * tenant (as for store_tenant_get()).
 */
int store_tenant_set_quotas(struct store *st, const char *name, const char *quotas_json,
			    struct error *err);

/*
 * Delete a tenant, at now. Refused while anything of it is live: -EBUSY
 * while it has a key not revoked (expired ones count: revoke them), a
 * task not final, or a sandbox not ended (pooled sandboxes are
 * TENANT_DEFAULT's). What of it has ended stays, under its name: its
 * final tasks, ended sandboxes and revoked keys. So does its row, marked
 * deleted: get and list no longer show it, nothing new is made for it
 * (task and sandbox inserts and claims say -ENOENT), and insert refuses
 * its name for ever (-EEXIST), so that nobody later called the same
 * inherits what it left. -ENOENT if there is no such tenant; -EPERM for
 * TENANT_DEFAULT, which always stays.
 */
int store_tenant_delete(struct store *st, const char *name, int64_t now, struct error *err);

/* ---- API keys ---------------------------------------------------------- */

/*
 * An API key as stored: never its secret. label is owned by the struct
 * and freed by key_record_release().
 */
struct key_record {
	char id[KEY_ID_SIZE];	       /* public, NUL-terminated; opaque text to the store */
	char tenant[TENANT_NAME_SIZE]; /* the tenant it acts for */
	enum key_role role;
	uint8_t hash[KEY_HASH_SIZE]; /* SHA-256 of the secret */
	int64_t created_at;	     /* ms since the epoch */
	int64_t expires_at;	     /* ms since the epoch; 0: never */
	int64_t revoked_at;	     /* ms since the epoch; 0: not revoked */
	char *label;		     /* owned; NULL: none; at most KEY_LABEL_MAX bytes */
};

/* Free what k owns (its label); k->label is NULL after. */
void key_record_release(struct key_record *k);

/*
 * Add a key from k: id, tenant, role, hash, created_at, expires_at (0:
 * never; not negative) and label (NULL: none); revoked_at is ignored (a
 * new key is not revoked). The id is opaque text here (the API checks its
 * form). -EEXIST if the id is taken; -ENOENT if there is no tenant
 * k->tenant; -EINVAL for an id empty or without its NUL within
 * KEY_ID_SIZE, a tenant name that is not valid, an unknown role, a
 * negative expires_at, or a label over KEY_LABEL_MAX bytes.
 */
int store_key_insert(struct store *st, const struct key_record *k, struct error *err);

/*
 * Read key id into *ret (key_record_release()), revoked or expired ones
 * too: the caller decides. -ENOENT if there is none.
 */
int store_key_get(struct store *st, const char *id, struct key_record *ret, struct error *err);

/*
 * Call fn for every key of tenant (NULL: of every tenant; -EINVAL for a
 * name that is not valid; a tenant without keys, or none of that name,
 * has none), revoked ones too, oldest created_at first, then by id. fn as
 * in store_tenant_list(). Every matching key is read at once.
 */
int store_key_list(struct store *st, const char *tenant,
		   int (*fn)(const struct key_record *k, void *data), void *data,
		   struct error *err);

/*
 * Revoke key id at now (> 0: 0 means "not revoked", else -EINVAL): it
 * stays, with revoked_at = now. -ENOENT if there is no such key; -ESTALE
 * if it was revoked already (the first revocation stays).
 */
int store_key_revoke(struct store *st, const char *id, int64_t now, struct error *err);

/* How many keys are not revoked, of every tenant, expired ones too. */
int store_key_count(struct store *st, uint64_t *ret, struct error *err);

/* ---- the audit log ----------------------------------------------------- */

/*
 * The audit log: a row per mutating request, and a row per source, auth
 * failure reason and minute for refused credentials (a count). Every
 * string a row holds is at most STORE_AUDIT_TEXT_MAX bytes (-EINVAL
 * past it) and the log keeps at most `keep` rows (the caller's bound,
 * STORE_AUDIT_ROWS_MAX at most): past it, the oldest are deleted,
 * STORE_AUDIT_PRUNE_BATCH (or a tenth of keep, if smaller) at a time, so
 * that a client can make the log hold no more than that, whatever it sends.
 * Every string is printable ASCII (-EINVAL otherwise): what the API
 * records is names, ids and addresses, never free text of a client's.
 *
 * Durability: an audit call's commit is not fsync'd of its own (on
 * SQLite, synchronous=NORMAL for it): the row survives a crash of the
 * process at once, and a power loss once any later write is durable. A
 * refused-key flood then costs no fsync per request.
 */
#define STORE_AUDIT_ROWS_MAX	1000000
#define STORE_AUDIT_PRUNE_BATCH 1000
#define STORE_AUDIT_TEXT_MAX	64

/*
 * One row. Its strings are NULL when there is none, else
 * NUL-terminated, at most STORE_AUDIT_TEXT_MAX bytes; what the store
 * gives back points into the row for the duration of the callback.
 */
struct audit_record {
	int64_t id;	    /* the store's, in the order rows were recorded; ignored by add */
	int64_t time;	    /* ms since the epoch: when (the first of count) */
	int64_t last_time;  /* the last of count; == time when count is 1 */
	uint64_t count;	    /* requests this row stands for: 1, or an aggregate's */
	const char *tenant; /* the principal's tenant */
	const char *key_id; /* its key's id */
	int64_t uid;	    /* a local user's uid on the unix socket; -1: none */
	const char *method; /* "POST", ... */
	const char *route;  /* the route table's template, "/v1/tasks/{id}"; NULL: none matched */
	const char *target; /* the id the request named, or the one a create made */
	int status;	    /* the HTTP status answered, 100..599 */
	const char *error;  /* the error code answered ("not_found"), or NULL */
	const char *source; /* where the request came from (api.h: struct api_ctx) */
	const char *reason; /* an aggregate's: why it was refused ("unknown_key") */
};

/*
 * Record one row of a (count 1; time, last_time: a->time). keep: the most
 * rows kept, 1..STORE_AUDIT_ROWS_MAX. -EINVAL for a string too long, a
 * status out of range or a reason given (aggregates are counted).
 */
int store_audit_add(struct store *st, const struct audit_record *a, size_t keep, struct error *err);

/*
 * Count one more refusal: the row of (a->source, a->reason, a->key_id, a->status)
 * begun at or after window_start gets count + 1 and last_time = a->time;
 * when there is none, a new row with count 1 (reason and source needed,
 * else -EINVAL; limits as for add). window_start <= a->time.
 */
int store_audit_count(struct store *st, const struct audit_record *a, int64_t window_start,
		      size_t keep, struct error *err);

struct audit_filter {
	const char *tenant; /* NULL: all; else rows of that principal's tenant */
	int64_t since;	    /* rows with since <= time ... */
	int64_t until;	    /* ... and time < until; 0: no bound */
	const char *method; /* NULL: any; else that method */
	const char *route;  /* NULL: any; else that template (or, with route_prefix, one
			     * starting with it) */
	bool route_prefix;
	int64_t before_id; /* the page of rows recorded before this row id (the last
			    * of the previous page); 0: the first page */
	size_t limit;	   /* 1..STORE_LIST_MAX */
};

/*
 * Call fn for each matching row, the last recorded first (by id). As
 * store_task_list(): the row is valid only during the call, fn returns 0
 * (or more) to go on, or a negative errno to stop with it; rows are read
 * before fn is called.
 */
int store_audit_list(struct store *st, const struct audit_filter *f,
		     int (*fn)(const struct audit_record *a, void *data), void *data,
		     struct error *err);

#endif
