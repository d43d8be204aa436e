/*
 * sqlite-retain.c - removing what ended, in the SQLite backend: a task's
 * rows (its events, its spec, its row: explicitly, not by the foreign
 * keys' cascade, so that nothing rests on a pragma), and the ids of
 * ended tasks and sandboxes by when they ended, from the partial indexes
 * of migration 6. Statements prepared once on the store's connection.
 */
#include "store/store-internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum retain_stmt {
	R_DELETE_EVENTS,
	R_DELETE_SPEC,
	R_DELETE_TASK,
	R_TASKS_ENDED,
	R_SANDBOXES_ENDED,
	R_STMT_COUNT
};

#define FINAL_NAMES "'succeeded', 'failed', 'oom_killed', 'timed_out', 'cancelled', 'lost'"

/* clang-format off */
static const char *const retain_sql[R_STMT_COUNT] = {
	[R_DELETE_EVENTS] = "DELETE FROM events WHERE task_pk = ?1",
	[R_DELETE_SPEC] = "DELETE FROM task_specs WHERE task_pk = ?1",
	[R_DELETE_TASK] = "DELETE FROM tasks WHERE pk = ?1",
	/* "finished_at > 0" lets tasks_by_finished, partial on it, answer */
	[R_TASKS_ENDED] = "SELECT id FROM tasks WHERE finished_at > 0 AND finished_at < ?1 "
			  "AND status IN (" FINAL_NAMES ") ORDER BY finished_at, pk LIMIT ?2",
	[R_SANDBOXES_ENDED] = "SELECT id FROM sandboxes WHERE status = 'ended' AND ended_at < ?1 "
			      "ORDER BY ended_at, pk LIMIT ?2",
};
/* clang-format on */

_Static_assert(TASK_STATUS_COUNT == 8, "FINAL_NAMES names every final status");

struct sqlite_retain {
	sqlite3 *db;
	sqlite3_stmt *stmt[R_STMT_COUNT];
};

int sqlite_retain_open(sqlite3 *db, struct sqlite_retain **ret, struct error *err)
{
	struct sqlite_retain *s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "store: out of memory");
	s->db = db;
	for (size_t i = 0; i < R_STMT_COUNT; i++) {
		int rc = sqlite3_prepare_v3(db, retain_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					    &s->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			int r = sqlite_error(db, rc, err, retain_sql[i]);
			sqlite_retain_close(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

void sqlite_retain_close(struct sqlite_retain *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < R_STMT_COUNT; i++)
		sqlite3_finalize(s->stmt[i]);
	free(s);
}

/* Run statement i with ?1 = key to its end; 0 or -errno. */
static int run_key(struct sqlite_retain *s, enum retain_stmt i, int64_t key, struct error *err)
{
	sqlite3_stmt *q = s->stmt[i];
	sqlite3_bind_int64(q, 1, key);
	int rc = sqlite3_step(q);
	int r = rc == SQLITE_DONE ? 0 : sqlite_error(s->db, rc, err, retain_sql[i]);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return r;
}

int sqlite_retain_task_delete(struct sqlite_retain *s, int64_t key, const char *id,
			      struct error *err)
{
	int r = run_key(s, R_DELETE_EVENTS, key, err);
	if (r == 0)
		r = run_key(s, R_DELETE_SPEC, key, err);
	if (r == 0)
		r = run_key(s, R_DELETE_TASK, key, err);
	if (r == 0 && sqlite3_changes(s->db) != 1)
		r = error_set(err, EIO, "store: task %s vanished while locked", id);
	return r;
}

int sqlite_retain_list_ended(struct sqlite_retain *s, bool sandboxes, int64_t before, size_t limit,
			     char (**ret)[STORE_ENDED_ID_SIZE], size_t *ret_n, struct error *err)
{
	sqlite3_stmt *q = s->stmt[sandboxes ? R_SANDBOXES_ENDED : R_TASKS_ENDED];
	char(*v)[STORE_ENDED_ID_SIZE] = calloc(limit ? limit : 1, sizeof(*v));
	if (!v)
		return error_set(err, ENOMEM, "store: out of memory");
	sqlite3_bind_int64(q, 1, before);
	sqlite3_bind_int64(q, 2, (int64_t)limit);
	size_t n = 0;
	int r = 0, rc = SQLITE_DONE;
	while (n < limit && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const unsigned char *id = sqlite3_column_text(q, 0);
		size_t len = id ? strlen((const char *)id) : 0;
		if (len == 0 || len >= STORE_ENDED_ID_SIZE) {
			r = error_set(err, EIO, "store: a %s's id is malformed",
				      sandboxes ? "sandbox" : "task");
			break;
		}
		memcpy(v[n++], id, len + 1);
	}
	if (r == 0 && n < limit && rc != SQLITE_DONE)
		r = sqlite_error(s->db, rc, err, "listing what ended");
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (r < 0) {
		free(v);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}
