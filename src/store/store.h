/*
 * store.h - where tasks and their events live durably.
 *
 * One interface, several backends: SQLite (WAL, synchronous=FULL) now,
 * PostgreSQL later (a queue claimed with FOR UPDATE SKIP LOCKED). Every
 * backend passes the same contract tests (tests/unit/test-store.c).
 *
 * Durability: when a call returns 0, what it wrote is on disk (committed
 * and fsync'd). Between store_tx_begin() and store_tx_commit() the calls
 * are grouped into one transaction and are durable only once the commit
 * returns 0: that is how progress events are group-committed.
 *
 * Fencing: calls that act on a running attempt name it; if the task has
 * moved on (a newer attempt, or an end) they fail with -ESTALE and change
 * nothing, so a slow or resurrected supervisor cannot overwrite the truth.
 *
 * A status change is stored in the same transaction as the status event
 * that records it, and only along task_transition_is_allowed().
 *
 * Errors: 0 or -errno; -ENOENT for an unknown task; err says why. A
 * failed commit has rolled back. Limits: the merged progress of a task is
 * at most STORE_PROGRESS_MAX bytes (-E2BIG), JSON nests at most
 * STORE_JSON_DEPTH_MAX deep.
 * Not thread-safe: one struct store per thread. The database holds task
 * specs (their env may hold secrets): keep it in a 0700 directory.
 */
#ifndef AGENTBOX_STORE_STORE_H
#define AGENTBOX_STORE_STORE_H

#include "base/error.h"
#include "core/task.h"

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
 * fills id, max_attempts, retry_on, created_at and spec_json. -EEXIST if
 * the id is taken.
 */
int store_task_insert(struct store *st, const struct task *t, struct error *err);

/* Read one task; *ret is filled with owned copies (task_release()). */
int store_task_get(struct store *st, const char *id, struct task *ret, struct error *err);

struct task_filter {
	uint32_t statuses; /* TASK_STATUS_BIT()s; 0 = all */
	const char *after_id; /* page after this task, in creation order; NULL = first page;
			       * -ENOENT if there is no such task */
	size_t limit;       /* most tasks to return; 1..STORE_LIST_MAX */
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
 * Take the oldest queued task, first in first out: it becomes running,
 * its attempt counter goes up by one, started_at is set on its first
 * attempt, and a status event is recorded. -ENOENT when none is queued.
 */
int store_task_claim(struct store *st, int64_t now, struct task *ret, struct error *err);

/*
 * The attempt `attempt` of a running task ended with `end` (a final
 * status). The task becomes task_after_attempt(end, ...): queued again
 * for a retry, or final with finished_at, exit_code and error set. A
 * status event records it. *ret_status (may be NULL) gets the new status.
 * -ESTALE if the task is not running that attempt.
 */
int store_task_end_attempt(struct store *st, const char *id, uint32_t attempt,
			   enum task_status end, int exit_code, const char *error, int64_t now,
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
int store_progress_append(struct store *st, const char *id, uint32_t attempt,
			  const char *data_json, int64_t now, int64_t *ret_seq, struct error *err);

/*
 * Call fn for each event of task id with seq > after_seq, in order, at
 * most limit (1..STORE_LIST_MAX) of them. The event is valid only during
 * the call.
 */
int store_events_list(struct store *st, const char *id, int64_t after_seq, size_t limit,
		      int (*fn)(const struct task_event *ev, void *data), void *data,
		      struct error *err);

#endif
