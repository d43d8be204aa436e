/*
 * store-internal.h - what store.c shares with the backends.
 *
 * store.c owns the contract: argument checks, fencing, the lifecycle
 * table, status events, progress merging, what keeps a tenant from being
 * deleted, and transaction nesting. A backend only persists rows, through
 * the small ops table below, so a second backend (PostgreSQL) cannot
 * drift from the rules of the first.
 *
 * Every write of store.c runs as: begin, lock the task's (or sandbox's)
 * row, decide in C, write the row and its events, commit. Inside a caller's transaction
 * (store_tx_begin()) "begin" and "commit" are a savepoint and its release,
 * so one failing call undoes only itself and the caller's group goes on.
 */
#ifndef AGENTBOX_STORE_STORE_INTERNAL_H
#define AGENTBOX_STORE_STORE_INTERNAL_H

#include "store/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How long a backend waits for another writer before -EBUSY. */
#define STORE_BUSY_TIMEOUT_MS 5000

/* The size of an id that ops->list_ended gives: a task's or a sandbox's. */
#define STORE_ENDED_ID_SIZE 32
_Static_assert(TASK_ID_SIZE == STORE_ENDED_ID_SIZE && SANDBOX_ID_SIZE == STORE_ENDED_ID_SIZE,
	       "a task's id and a sandbox's have the size of list_ended's ids");

/*
 * A task's row as a writer holds it inside a transaction: every field of
 * struct task but spec_json (which never changes, and stays NULL here),
 * plus what only the store sees.
 */
struct store_row {
	int64_t key;	  /* the backend's handle of the row */
	int64_t next_seq; /* seq of the task's next event */
	struct task t;	  /* t.spec_json is NULL; t.progress_json, t.error owned */
};

/*
 * A sandbox's row as a writer holds it inside a transaction: every field
 * of struct sandbox_record but spec_json (which never changes, and stays NULL).
 */
struct store_sandbox_row {
	int64_t key;		  /* the backend's handle of the row */
	struct sandbox_record sb; /* sb.spec_json is NULL; the other strings owned */
	const char *new_spec;	  /* for sandbox_update: the spec to replace, or NULL */
};

/* What a tenant has that keeps it from being deleted. */
struct store_tenant_uses {
	uint64_t keys;	    /* not revoked */
	uint64_t tasks;	    /* of the statuses asked for */
	uint64_t sandboxes; /* of the statuses asked for */
};

struct store_ops {
	struct store *(*close)(struct store *st);
	int (*schema_version)(struct store *st);

	/* A transaction, or with nested a savepoint inside the open one. */
	int (*begin)(struct store *st, bool nested, struct error *err);
	/* Commit or release. A failed outer commit has rolled back. */
	int (*commit)(struct store *st, bool nested, struct error *err);
	void (*rollback)(struct store *st, bool nested);

	/* Insert a queued task from t's id, limits, created_at, spec; -EEXIST. */
	int (*insert)(struct store *st, const struct task *t, struct error *err);
	/* Read one task with its spec; -ENOENT. */
	int (*get)(struct store *st, const char *id, struct task *ret, struct error *err);
	/* Up to f->limit matching tasks, oldest first, as an owned array. */
	int (*list)(struct store *st, const struct task_filter *f, struct task **ret, size_t *ret_n,
		    struct error *err);

	/* How many tasks have status (of tenant; NULL: of every tenant). */
	int (*count)(struct store *st, const char *tenant, enum task_status status, uint64_t *ret,
		     struct error *err);

	/* Lock a task's row for update (inside begin); -ENOENT. */
	int (*lock)(struct store *st, const char *id, struct store_row *ret, struct error *err);
	/* Lock the next queued task's row (store_task_claim()), of a tenant not in
	 * skip_json (a JSON array of names; NULL: none); -ENOENT. */
	int (*lock_oldest_queued)(struct store *st, const char *skip_json, struct store_row *ret,
				  struct error *err);
	/* Write back a locked row's mutable fields, next_seq included. */
	int (*update)(struct store *st, const struct store_row *row, struct error *err);
	/* Add an event with seq row->next_seq, then advance row->next_seq. */
	int (*event_add)(struct store *st, struct store_row *row, enum task_event_type type,
			 uint32_t attempt, int64_t time, const char *data_json, struct error *err);
	/* Events of task id with seq > after_seq, in order, as an owned array. */
	int (*events)(struct store *st, const char *id, int64_t after_seq, size_t limit,
		      struct task_event **ret, size_t *ret_n, struct error *err);

	/* Insert a sandbox: every field of sb but the end ones; -EEXIST. */
	int (*sandbox_insert)(struct store *st, const struct sandbox_record *sb, struct error *err);
	/* Read one sandbox with its spec; -ENOENT. */
	int (*sandbox_get)(struct store *st, const char *id, struct sandbox_record *ret,
			   struct error *err);
	/*
	 * Up to f->limit sandboxes whose status is in f->statuses (never 0
	 * here), in creation order, as an owned array.
	 */
	int (*sandbox_list)(struct store *st, const struct sandbox_filter *f,
			    struct sandbox_record **ret, size_t *ret_n, struct error *err);
	/* Lock a sandbox's row for update (inside begin); -ENOENT. */
	int (*sandbox_lock)(struct store *st, const char *id, struct store_sandbox_row *ret,
			    struct error *err);
	/* Write back a locked row's fields: status, times, end, metadata. */
	int (*sandbox_update)(struct store *st, const struct store_sandbox_row *row,
			      struct error *err);
	/* Delete a locked row, with its spec. */
	int (*sandbox_delete)(struct store *st, const struct store_sandbox_row *row,
			      struct error *err);

	/* Delete a locked task's row, with its spec and events (sqlite-retain.c). */
	int (*task_delete)(struct store *st, const struct store_row *row, struct error *err);
	/*
	 * The ids of up to limit ended tasks (sandboxes: ended sandboxes)
	 * whose end is before `before`, the earliest first, as an owned array.
	 */
	int (*list_ended)(struct store *st, bool sandboxes, int64_t before, size_t limit,
			  char (**ret)[STORE_ENDED_ID_SIZE], size_t *ret_n, struct error *err);

	/* Insert a tenant from t's name, created_at and quotas_json; -EEXIST. */
	int (*tenant_insert)(struct store *st, const struct tenant_record *t, struct error *err);
	/* Read one tenant; -ENOENT. */
	int (*tenant_get)(struct store *st, const char *name, struct tenant_record *ret,
			  struct error *err);
	/* Every tenant, by name, as an owned array. */
	int (*tenant_list)(struct store *st, struct tenant_record **ret, size_t *ret_n,
			   struct error *err);
	/* Replace a tenant's quotas_json; -ENOENT. */
	int (*tenant_set_quotas)(struct store *st, const char *name, const char *quotas_json,
				 struct error *err);
	/*
	 * What tenant name has (inside begin): its keys not revoked, its tasks
	 * whose status is in task_statuses, its sandboxes whose status is in
	 * sandbox_statuses (STATUS_BIT()s).
	 */
	int (*tenant_uses)(struct store *st, const char *name, uint32_t task_statuses,
			   uint32_t sandbox_statuses, struct store_tenant_uses *ret,
			   struct error *err);
	/* Delete a tenant's row (and nothing else); -ENOENT. */
	int (*tenant_delete)(struct store *st, const char *name, int64_t now, struct error *err);

	/* Insert a key: every field of k but revoked_at; -EEXIST. */
	int (*key_insert)(struct store *st, const struct key_record *k, struct error *err);
	/* Read one key; -ENOENT. */
	int (*key_get)(struct store *st, const char *id, struct key_record *ret, struct error *err);
	/* The keys of tenant (NULL: all), by created_at then id, as an owned array. */
	int (*key_list)(struct store *st, const char *tenant, struct key_record **ret,
			size_t *ret_n, struct error *err);
	/* Set revoked_at of key id, which is not revoked (inside begin). */
	int (*key_revoke)(struct store *st, const char *id, int64_t now, struct error *err);
	/* How many keys are not revoked. */
	int (*key_count)(struct store *st, uint64_t *ret, struct error *err);

	/*
	 * The audit log (inside begin): add row a (count 1); with
	 * window_start >= 0, first look for the row of (source, reason,
	 * key_id, status) begun at or after it and count a in it instead. A row
	 * added past keep rows deletes the oldest, leaving keep - batch + 1.
	 */
	int (*audit_add)(struct store *st, const struct audit_record *a, int64_t window_start,
			 size_t keep, size_t batch, struct error *err);
	/* Up to f->limit rows matching f, last recorded first, as an owned array. */
	int (*audit_list)(struct store *st, const struct audit_filter *f, struct audit_record **ret,
			  size_t *ret_n, struct error *err);
	/* Commits of this store are fsync'd (full) or not (an audit row's). */
	int (*set_sync)(struct store *st, bool full, struct error *err);
};

/* Every backend's struct starts with this. */
struct store {
	const struct store_ops *ops;
	bool in_tx; /* between store_tx_begin() and its commit or rollback */
};

void store_row_release(struct store_row *row);
/* Free an array from ops->list or ops->events. */
void store_tasks_free(struct task *v, size_t n);
void store_events_free(struct task_event *v, size_t n);
void store_sandbox_row_release(struct store_sandbox_row *row);
/* Free an array from ops->sandbox_list. */
void store_sandboxes_free(struct sandbox_record *v, size_t n);
/* Free an array from ops->tenant_list, ops->key_list. */
void store_tenants_free(struct tenant_record *v, size_t n);
void store_keys_free(struct key_record *v, size_t n);
/* Free a row's strings (owned: a row read by a backend), or an array of such rows. */
void store_audit_release(struct audit_record *a);
void store_audit_free(struct audit_record *v, size_t n);

/* ---- JSON (store-json.c) ---------------------------------------------- */

/* Is s one well-formed JSON object (RFC 8259), nested at most STORE_JSON_DEPTH_MAX? */
bool store_json_is_object(const char *s);

/*
 * Merge the top-level members of patch into base, both JSON objects: a
 * key of patch replaces the whole value of that key in base (no deep
 * merge; null is a value like any other) or is added after base's keys.
 * *ret is a new compact object. -EINVAL if either is not an object,
 * -E2BIG past STORE_PROGRESS_MAX, -ENOMEM.
 */
int store_json_merge(const char *base, const char *patch, char **ret);

/*
 * The data of a status event:
 * {"status":"...","attempt":N,"end":"...","exit_code":N|null,"error":"..."|null}
 * "end" (how the attempt ended) only where an attempt ends (end >= 0):
 * there status may differ from it, as "queued" for a retry. exit_code < 0
 * and error NULL are written as null.
 */
int store_json_status_event(enum task_status status, uint32_t attempt, int end, int exit_code,
			    const char *error, char **ret);

/* ---- the SQLite backend (store-sqlite.c, sqlite-migrations.c) ---------- */

/* One step of the schema: runs in its own transaction, then user_version = version. */
struct sqlite_migration {
	int version; /* 1, 2, ... in order, no gaps */
	const char *name;
	const char *sql;
};

extern const struct sqlite_migration sqlite_migrations[];
extern const size_t sqlite_migrations_count;

/*
 * The audit log's statements (sqlite-audit.c), prepared once on the
 * store's connection; the backend's ops call these.
 */
struct sqlite_audit;
struct sqlite3;
int sqlite_audit_open(struct sqlite3 *db, struct sqlite_audit **ret, struct error *err);
void sqlite_audit_close(struct sqlite_audit *a);
int sqlite_audit_add(struct sqlite_audit *q, const struct audit_record *a, int64_t window_start,
		     size_t keep, size_t batch, struct error *err);
int sqlite_audit_list(struct sqlite_audit *q, const struct audit_filter *f,
		      struct audit_record **ret, size_t *ret_n, struct error *err);
int sqlite_audit_set_sync(struct sqlite_audit *q, bool full, struct error *err);

/*
 * Removing what ended (sqlite-retain.c): a task's rows, and the ids of
 * ended tasks and sandboxes by the time they ended; statements prepared
 * once on the store's connection, as the audit log's.
 */
struct sqlite_retain;
int sqlite_retain_open(struct sqlite3 *db, struct sqlite_retain **ret, struct error *err);
void sqlite_retain_close(struct sqlite_retain *q);
int sqlite_retain_task_delete(struct sqlite_retain *q, int64_t key, const char *id,
			      struct error *err);
int sqlite_retain_list_ended(struct sqlite_retain *q, bool sandboxes, int64_t before, size_t limit,
			     char (**ret)[STORE_ENDED_ID_SIZE], size_t *ret_n, struct error *err);

/* PRAGMA application_id of an agentbox store ("abox"). */
#define SQLITE_STORE_APPLICATION_ID 0x61626f78

struct sqlite3;

/* Fill err from a failed SQLite call: "store: <what>: <SQLite's reason>". */
int sqlite_error(struct sqlite3 *db, int rc, struct error *err, const char *what);
/* Reword an error of ours (e) as "store: <context>: <reason>" into err. */
int sqlite_reword(struct error *err, const struct error *e, const char *context);
/* Run SQL that returns no rows. */
int sqlite_exec(struct sqlite3 *db, const char *sql, const char *what, struct error *err);

/*
 * Bring db's schema to the last of m[0..n), one transaction per step.
 * -ENOTSUP if db is newer than m knows, -EINVAL if it is not ours.
 */
int sqlite_migrate(struct sqlite3 *db, const struct sqlite_migration *m, size_t n,
		   struct error *err);

/*
 * Open the SQLite store at path, migrating it along migrations[0..n).
 * store_open_sqlite() passes the real table; tests pass their own.
 */
int sqlite_store_open(const char *path, const struct sqlite_migration *migrations, size_t n,
		      struct store **ret, struct error *err);

#endif
