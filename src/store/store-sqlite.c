/*
 * store-sqlite.c - the SQLite backend of the store: one connection, WAL,
 * synchronous=FULL (a commit returns once the WAL is fsync'd), foreign
 * keys on, a busy timeout for other processes' writers, and every
 * statement prepared once at open and reset after each use.
 *
 * Writes begin with BEGIN IMMEDIATE: the write lock is taken before the
 * first read, so the row a writer locks cannot change under it and two
 * claimers can never take the same task (or sandbox). The schema is in
 * sqlite-migrations.c. A key's hash is a BLOB, bound and read as bytes.
 */
#include "store/store-internal.h"

#include "base/buf.h"
#include "base/cleanup.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define TASK_COLUMNS                                                                               \
	"t.pk, t.id, t.status, t.attempt, t.max_attempts, t.retry_on, t.cancel_requested, "        \
	"t.exit_code, t.created_at, t.started_at, t.finished_at, t.error, t.next_seq, "            \
	"t.progress_json, t.tenant"
#define COL_TENANT 14 /* t.tenant */
#define COL_SPEC   15 /* s.spec_json, after TASK_COLUMNS */
/* One status's page of a filtered list, in creation order. */
#define LIST_ARM(n)                                                                                \
	"SELECT * FROM (SELECT pk, created_at FROM tasks WHERE status = ?" #n                      \
	" AND (created_at, pk) > (?9, ?10) ORDER BY created_at, pk LIMIT ?11)"
/* The same within tenant ?12, from tasks_by_tenant_status. */
#define TENANT_LIST_ARM(n)                                                                         \
	"SELECT * FROM (SELECT pk, created_at FROM tasks WHERE tenant = ?12 AND status = ?" #n     \
	" AND (created_at, pk) > (?9, ?10) ORDER BY created_at, pk LIMIT ?11)"

#define SANDBOX_COLUMNS                                                                            \
	"b.pk, b.id, b.status, b.created_at, b.expires_at, b.ended_at, b.end_reason, "             \
	"b.end_detail, b.metadata_json, b.tenant"
#define COL_SANDBOX_TENANT 9  /* b.tenant */
#define COL_SANDBOX_SPEC   10 /* s.spec_json, after SANDBOX_COLUMNS */
/* The same for sandboxes: ?1..?4 statuses, ?5, ?6 the page's start, ?7 the limit. */
#define SANDBOX_LIST_ARM(n)                                                                        \
	"SELECT * FROM (SELECT pk, created_at FROM sandboxes WHERE status = ?" #n                  \
	" AND (created_at, pk) > (?5, ?6) ORDER BY created_at, pk LIMIT ?7)"
/* And within tenant ?8, from sandboxes_by_tenant_status. */
#define SANDBOX_TENANT_LIST_ARM(n)                                                                 \
	"SELECT * FROM (SELECT pk, created_at FROM sandboxes WHERE tenant = ?8 AND status = ?" #n  \
	" AND (created_at, pk) > (?5, ?6) ORDER BY created_at, pk LIMIT ?7)"

#define TENANT_COLUMNS "name, created_at, quotas_json"
#define KEY_COLUMNS    "id, tenant, role, hash, created_at, expires_at, revoked_at, label"

enum stmt {
	S_BEGIN,
	S_COMMIT,
	S_ROLLBACK,
	S_SAVEPOINT,
	S_RELEASE,
	S_ROLLBACK_TO,
	S_VERSION,
	S_INSERT_TASK,
	S_INSERT_SPEC,
	S_GET,
	S_POSITION,
	S_LIST_ALL,
	S_LIST_STATUS,
	S_LIST_TENANT_ALL,
	S_LIST_TENANT_STATUS,
	S_LOCK,
	S_LOCK_QUEUED,
	S_COUNT,
	S_COUNT_TENANT,
	S_UPDATE,
	S_EVENT_ADD,
	S_EVENTS,
	S_SBX_INSERT,
	S_SBX_INSERT_SPEC,
	S_SBX_GET,
	S_SBX_POSITION,
	S_SBX_LIST_ALL,
	S_SBX_LIST_STATUS,
	S_SBX_LIST_TENANT_ALL,
	S_SBX_LIST_TENANT_STATUS,
	S_SBX_LOCK,
	S_SBX_UPDATE,
	S_SBX_DELETE_SPEC,
	S_SBX_UPDATE_SPEC,
	S_SBX_DELETE,
	S_TENANT_INSERT,
	S_TENANT_GET,
	S_TENANT_LIST,
	S_TENANT_SET_QUOTAS,
	S_TENANT_KEYS,
	S_TENANT_TASKS,
	S_TENANT_SANDBOXES,
	S_TENANT_DELETE,
	S_KEY_INSERT,
	S_KEY_GET,
	S_KEY_LIST_ALL,
	S_KEY_LIST_TENANT,
	S_KEY_REVOKE,
	S_KEY_COUNT,
	STMT_COUNT
};

/* clang-format off */
static const char *const stmt_sql[STMT_COUNT] = {
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	[S_SAVEPOINT] = "SAVEPOINT store_op",
	[S_RELEASE] = "RELEASE store_op",
	[S_ROLLBACK_TO] = "ROLLBACK TO store_op",
	[S_VERSION] = "PRAGMA user_version",
	/* only for a tenant that exists: a deleted one's tasks would never run */
	[S_INSERT_TASK] = "INSERT INTO tasks (id, status, max_attempts, retry_on, created_at, "
			  "tenant) SELECT ?1, 'queued', ?2, ?3, ?4, ?5 "
			  "WHERE EXISTS (SELECT 1 FROM tenants WHERE name = ?5 AND deleted_at = 0)",
	[S_INSERT_SPEC] = "INSERT INTO task_specs (task_pk, spec_json) VALUES (?1, ?2)",
	[S_GET] = "SELECT " TASK_COLUMNS ", s.spec_json FROM tasks t "
		  "JOIN task_specs s ON s.task_pk = t.pk WHERE t.id = ?1",
	[S_POSITION] = "SELECT created_at, pk, tenant FROM tasks WHERE id = ?1",
	/* every status: walk tasks_by_created from the page's start */
	[S_LIST_ALL] = "SELECT " TASK_COLUMNS ", s.spec_json FROM tasks t "
		       "JOIN task_specs s ON s.task_pk = t.pk "
		       "WHERE (t.created_at, t.pk) > (?9, ?10) "
		       "ORDER BY t.created_at, t.pk LIMIT ?11",
	/* some: a page from tasks_by_status per status (NULL for those left
	 * out), then the oldest of those, so old finished tasks are never walked */
	[S_LIST_STATUS] = "SELECT " TASK_COLUMNS ", s.spec_json FROM ("
			  LIST_ARM(1) " UNION ALL " LIST_ARM(2) " UNION ALL "
			  LIST_ARM(3) " UNION ALL " LIST_ARM(4) " UNION ALL "
			  LIST_ARM(5) " UNION ALL " LIST_ARM(6) " UNION ALL "
			  LIST_ARM(7) " UNION ALL " LIST_ARM(8)
			  ") AS m JOIN tasks t ON t.pk = m.pk "
			  "JOIN task_specs s ON s.task_pk = t.pk "
			  "ORDER BY m.created_at, m.pk LIMIT ?11",
	/* one tenant's, every status: walk tasks_by_tenant from the page's start */
	[S_LIST_TENANT_ALL] = "SELECT " TASK_COLUMNS ", s.spec_json FROM tasks t "
			      "JOIN task_specs s ON s.task_pk = t.pk "
			      "WHERE t.tenant = ?12 AND (t.created_at, t.pk) > (?9, ?10) "
			      "ORDER BY t.created_at, t.pk LIMIT ?11",
	/* one tenant's, some statuses: as S_LIST_STATUS, from tasks_by_tenant_status */
	[S_LIST_TENANT_STATUS] = "SELECT " TASK_COLUMNS ", s.spec_json FROM ("
				 TENANT_LIST_ARM(1) " UNION ALL " TENANT_LIST_ARM(2) " UNION ALL "
				 TENANT_LIST_ARM(3) " UNION ALL " TENANT_LIST_ARM(4) " UNION ALL "
				 TENANT_LIST_ARM(5) " UNION ALL " TENANT_LIST_ARM(6) " UNION ALL "
				 TENANT_LIST_ARM(7) " UNION ALL " TENANT_LIST_ARM(8)
				 ") AS m JOIN tasks t ON t.pk = m.pk "
				 "JOIN task_specs s ON s.task_pk = t.pk "
				 "ORDER BY m.created_at, m.pk LIMIT ?11",
	[S_LOCK] = "SELECT " TASK_COLUMNS " FROM tasks t WHERE t.id = ?1",
	/*
	 * The next queued task, fairly: of each tenant's oldest queued task,
	 * that of the tenant with the fewest running, then the oldest. Every
	 * queued task's tenant exists (insert checks, and a tenant goes only
	 * with none); each step is an index seek, so the cost grows with the
	 * tenants, not with the queue.
	 */
	[S_LOCK_QUEUED] = "SELECT " TASK_COLUMNS " FROM tenants n "
			  "JOIN tasks t ON t.pk = (SELECT q.pk FROM tasks q WHERE q.tenant = n.name "
			  "AND q.status = 'queued' ORDER BY q.created_at, q.pk LIMIT 1) "
			  "WHERE ?1 IS NULL OR n.name NOT IN (SELECT value FROM json_each(?1)) "
			  "ORDER BY (SELECT count(*) FROM tasks r WHERE r.tenant = n.name "
			  "AND r.status = 'running'), t.created_at, t.pk LIMIT 1",
	[S_COUNT] = "SELECT count(*) FROM tasks WHERE status = ?1",
	[S_COUNT_TENANT] = "SELECT count(*) FROM tasks WHERE status = ?1 AND tenant = ?2",
	[S_UPDATE] = "UPDATE tasks SET status = ?2, attempt = ?3, cancel_requested = ?4, "
		     "exit_code = ?5, started_at = ?6, finished_at = ?7, error = ?8, "
		     "next_seq = ?9, progress_json = ?10 WHERE pk = ?1",
	[S_EVENT_ADD] = "INSERT INTO events (task_pk, seq, attempt, type, time, data_json) "
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[S_EVENTS] = "SELECT seq, attempt, type, time, data_json FROM events "
		     "WHERE task_pk = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
	[S_SBX_INSERT] = "INSERT INTO sandboxes (id, status, created_at, expires_at, metadata_json, "
			 "tenant) SELECT ?1, ?2, ?3, ?4, ?5, ?6 "
			 "WHERE EXISTS (SELECT 1 FROM tenants WHERE name = ?6 AND deleted_at = 0)",
	[S_SBX_INSERT_SPEC] = "INSERT INTO sandbox_specs (sandbox_pk, spec_json) VALUES (?1, ?2)",
	[S_SBX_UPDATE_SPEC] = "UPDATE sandbox_specs SET spec_json = ?2 WHERE sandbox_pk = ?1",
	[S_SBX_GET] = "SELECT " SANDBOX_COLUMNS ", s.spec_json FROM sandboxes b "
		      "JOIN sandbox_specs s ON s.sandbox_pk = b.pk WHERE b.id = ?1",
	[S_SBX_POSITION] = "SELECT created_at, pk, tenant FROM sandboxes WHERE id = ?1",
	[S_SBX_LIST_ALL] = "SELECT " SANDBOX_COLUMNS ", s.spec_json FROM sandboxes b "
			   "JOIN sandbox_specs s ON s.sandbox_pk = b.pk "
			   "WHERE (b.created_at, b.pk) > (?5, ?6) "
			   "ORDER BY b.created_at, b.pk LIMIT ?7",
	[S_SBX_LIST_STATUS] = "SELECT " SANDBOX_COLUMNS ", s.spec_json FROM ("
			      SANDBOX_LIST_ARM(1) " UNION ALL " SANDBOX_LIST_ARM(2) " UNION ALL "
			      SANDBOX_LIST_ARM(3) " UNION ALL " SANDBOX_LIST_ARM(4)
			      ") AS m JOIN sandboxes b ON b.pk = m.pk "
			      "JOIN sandbox_specs s ON s.sandbox_pk = b.pk "
			      "ORDER BY m.created_at, m.pk LIMIT ?7",
	[S_SBX_LIST_TENANT_ALL] = "SELECT " SANDBOX_COLUMNS ", s.spec_json FROM sandboxes b "
				  "JOIN sandbox_specs s ON s.sandbox_pk = b.pk "
				  "WHERE b.tenant = ?8 AND (b.created_at, b.pk) > (?5, ?6) "
				  "ORDER BY b.created_at, b.pk LIMIT ?7",
	[S_SBX_LIST_TENANT_STATUS] = "SELECT " SANDBOX_COLUMNS ", s.spec_json FROM ("
				     SANDBOX_TENANT_LIST_ARM(1) " UNION ALL "
				     SANDBOX_TENANT_LIST_ARM(2) " UNION ALL "
				     SANDBOX_TENANT_LIST_ARM(3) " UNION ALL "
				     SANDBOX_TENANT_LIST_ARM(4)
				     ") AS m JOIN sandboxes b ON b.pk = m.pk "
				     "JOIN sandbox_specs s ON s.sandbox_pk = b.pk "
				     "ORDER BY m.created_at, m.pk LIMIT ?7",
	[S_SBX_LOCK] = "SELECT " SANDBOX_COLUMNS " FROM sandboxes b WHERE b.id = ?1",
	[S_SBX_UPDATE] = "UPDATE sandboxes SET status = ?2, created_at = ?3, expires_at = ?4, "
			 "ended_at = ?5, end_reason = ?6, end_detail = ?7, metadata_json = ?8, "
			 "tenant = ?9 WHERE pk = ?1",
	[S_SBX_DELETE_SPEC] = "DELETE FROM sandbox_specs WHERE sandbox_pk = ?1",
	[S_SBX_DELETE] = "DELETE FROM sandboxes WHERE pk = ?1",
	[S_TENANT_INSERT] = "INSERT INTO tenants (name, created_at, quotas_json) "
			    "VALUES (?1, ?2, ?3)",
	/* a deleted tenant's row stays, so that its name is never given again */
	[S_TENANT_GET] = "SELECT " TENANT_COLUMNS " FROM tenants WHERE name = ?1 AND deleted_at = 0",
	[S_TENANT_LIST] = "SELECT " TENANT_COLUMNS " FROM tenants WHERE deleted_at = 0 ORDER BY name",
	[S_TENANT_SET_QUOTAS] = "UPDATE tenants SET quotas_json = ?2 WHERE name = ?1 "
				"AND deleted_at = 0",
	/* what keeps a tenant: each a range of an index by tenant */
	[S_TENANT_KEYS] = "SELECT count(*) FROM api_keys WHERE tenant = ?1 AND revoked_at = 0",
	[S_TENANT_TASKS] = "SELECT count(*) FROM tasks WHERE tenant = ?1 AND status IN "
			   "(?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	[S_TENANT_SANDBOXES] = "SELECT count(*) FROM sandboxes WHERE tenant = ?1 AND status IN "
			       "(?2, ?3, ?4, ?5)",
	[S_TENANT_DELETE] = "UPDATE tenants SET deleted_at = ?2 WHERE name = ?1 AND deleted_at = 0",
	[S_KEY_INSERT] = "INSERT INTO api_keys (id, tenant, role, hash, created_at, expires_at, "
			 "label) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[S_KEY_GET] = "SELECT " KEY_COLUMNS " FROM api_keys WHERE id = ?1",
	[S_KEY_LIST_ALL] = "SELECT " KEY_COLUMNS " FROM api_keys ORDER BY created_at, id",
	[S_KEY_LIST_TENANT] = "SELECT " KEY_COLUMNS " FROM api_keys WHERE tenant = ?1 "
			      "ORDER BY created_at, id",
	[S_KEY_REVOKE] = "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at = 0",
	[S_KEY_COUNT] = "SELECT count(*) FROM api_keys WHERE revoked_at = 0",
};
/* clang-format on */

_Static_assert(TASK_STATUS_COUNT == 8,
	       "S_LIST_STATUS, S_LIST_TENANT_STATUS, S_TENANT_TASKS bind one parameter per status");
_Static_assert(SANDBOX_STATUS_COUNT == 4, "S_SBX_LIST_STATUS and the like bind one per status");

struct sqlite_store {
	struct store base;
	sqlite3 *db;
	sqlite3_stmt *stmt[STMT_COUNT];
	struct sqlite_audit *audit;   /* the audit log's statements (sqlite-audit.c) */
	struct sqlite_retain *retain; /* removing what ended (sqlite-retain.c) */
};

static struct sqlite_store *to_sqlite(struct store *st)
{
	return (struct sqlite_store *)st;
}

/* ---- errors and statements --------------------------------------------- */

static int rc_errno(sqlite3 *db, int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return EBUSY;
	case SQLITE_NOMEM:
		return ENOMEM;
	case SQLITE_READONLY:
		return EROFS;
	case SQLITE_FULL:
		return ENOSPC;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return EACCES;
	case SQLITE_TOOBIG:
		return E2BIG;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
		return EINVAL;
	case SQLITE_CANTOPEN:
	case SQLITE_IOERR: {
		int e = db ? sqlite3_system_errno(db) : 0;
		return e > 0 ? e : EIO;
	}
	default:
		return EIO;
	}
}

int sqlite_error(sqlite3 *db, int rc, struct error *err, const char *what)
{
	return error_set(err, rc_errno(db, rc), "store: %s: %s", what,
			 db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

static void stmt_resetp(sqlite3_stmt **q)
{
	if (*q) {
		sqlite3_reset(*q);
		sqlite3_clear_bindings(*q);
	}
}
#define _cleanup_reset_ _cleanup_(stmt_resetp)

/* Step q once: 1 for a row, 0 when done, or -errno with err filled. */
static int step(struct sqlite_store *s, sqlite3_stmt *q, struct error *err, const char *what)
{
	int rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sqlite_error(s->db, rc, err, what);
}

/* Run a statement that takes no parameters and returns no rows. */
static int run(struct sqlite_store *s, enum stmt i, struct error *err)
{
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[i];
	int r = step(s, q, err, stmt_sql[i]);
	return r < 0 ? r : 0;
}

static int dup_column(sqlite3_stmt *q, int col, char **ret)
{
	const unsigned char *text = sqlite3_column_text(q, col);
	*ret = NULL;
	if (!text)
		return sqlite3_column_type(q, col) == SQLITE_NULL ? 0 : -ENOMEM;
	*ret = strdup((const char *)text);
	return *ret ? 0 : -ENOMEM;
}

/* Copy column col, a tenant's name, into name[TENANT_NAME_SIZE]; false if it is not one. */
static bool tenant_column(sqlite3_stmt *q, int col, char *name)
{
	const char *text = (const char *)sqlite3_column_text(q, col);
	if (!tenant_name_is_valid(text))
		return false;
	memcpy(name, text, strlen(text) + 1); /* valid: it fits */
	return true;
}

/* Read a row of TASK_COLUMNS (and the spec, with_spec) into ret. */
static int read_row(sqlite3_stmt *q, bool with_spec, struct store_row *ret, struct error *err)
{
	struct store_row row = {.key = sqlite3_column_int64(q, 0)};
	struct task *t = &row.t;
	const char *id = (const char *)sqlite3_column_text(q, 1);
	const char *status = (const char *)sqlite3_column_text(q, 2);
	if (!id || strlen(id) >= sizeof(t->id) || task_status_parse(status, &t->status) < 0 ||
	    !tenant_column(q, COL_TENANT, t->tenant))
		return error_set(
		    err, EIO, "store: a task row is corrupt (id '%s', status '%s', or its tenant)",
		    id ? id : "", status ? status : "");
	memcpy(t->id, id, strlen(id) + 1);
	t->attempt = (uint32_t)sqlite3_column_int64(q, 3);
	t->max_attempts = (uint32_t)sqlite3_column_int64(q, 4);
	t->retry_on = (uint32_t)sqlite3_column_int64(q, 5);
	t->cancel_requested = sqlite3_column_int(q, 6) != 0;
	t->exit_code = sqlite3_column_int(q, 7);
	t->created_at = sqlite3_column_int64(q, 8);
	t->started_at = sqlite3_column_int64(q, 9);
	t->finished_at = sqlite3_column_int64(q, 10);
	row.next_seq = sqlite3_column_int64(q, 12);
	if (dup_column(q, 11, &t->error) < 0 || dup_column(q, 13, &t->progress_json) < 0 ||
	    (with_spec && dup_column(q, COL_SPEC, &t->spec_json) < 0) || !t->progress_json ||
	    (with_spec && !t->spec_json)) {
		task_release(t);
		return error_set(err, ENOMEM, "store: reading task %s: out of memory", t->id);
	}
	*ret = row;
	return 0;
}

/*
 * A list's rows collect in a struct buf as an array of elements of one
 * size: room for the next is reserved before it is read (buf_reserve()),
 * so appending a row that was read cannot fail and lose what it owns.
 * rows_take() hands the array over, NULL when it is empty, and sets
 * *ret_n to its length.
 */
static void *rows_take(struct buf *rows, size_t size, size_t *ret_n)
{
	char *v = NULL;
	size_t n = rows->len / size;
	if (n == 0 || buf_steal(rows, &v, NULL) < 0) {
		buf_release(rows);
		n = 0;
	}
	*ret_n = n;
	return v;
}

/*
 * The pk and created_at of task id (with S_POSITION, else sandbox id);
 * -ENOENT, also when tenant is not NULL and it is another tenant's.
 */
static int position_with(struct sqlite_store *s, enum stmt i, const char *id, const char *tenant,
			 int64_t *ret_pk, int64_t *ret_created, struct error *err)
{
	const char *noun = i == S_POSITION ? "task" : "sandbox";
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[i];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int r = step(s, q, err, i == S_POSITION ? "finding a task" : "finding a sandbox");
	if (r < 0)
		return r;
	const char *owner = r ? (const char *)sqlite3_column_text(q, 2) : NULL;
	if (r == 0 || (tenant && (!owner || strcmp(owner, tenant) != 0)))
		return tenant ? error_set(err, ENOENT, "store: no %s %s of tenant %s", noun, id,
					  tenant)
			      : error_set(err, ENOENT, "store: no %s %s", noun, id);
	*ret_created = sqlite3_column_int64(q, 0);
	*ret_pk = sqlite3_column_int64(q, 1);
	return 0;
}

static int position(struct sqlite_store *s, const char *id, int64_t *ret_pk, int64_t *ret_created,
		    struct error *err)
{
	return position_with(s, S_POSITION, id, NULL, ret_pk, ret_created, err);
}

/* ---- ops ----------------------------------------------------------------- */

static struct store *sq_close(struct store *st)
{
	struct sqlite_store *s = to_sqlite(st);
	for (size_t i = 0; i < STMT_COUNT; i++)
		sqlite3_finalize(s->stmt[i]);
	sqlite_audit_close(s->audit);
	sqlite_retain_close(s->retain);
	/* an open transaction is rolled back: only a commit makes it durable */
	sqlite3_close_v2(s->db);
	free(s);
	return NULL;
}

static int sq_schema_version(struct store *st)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_VERSION];
	int r = step(s, q, NULL, "reading the schema version");
	if (r <= 0)
		return r < 0 ? r : -EIO;
	return sqlite3_column_int(q, 0);
}

static int sq_begin(struct store *st, bool nested, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	/* SQLite rolls a whole transaction back on some errors (full disk, I/O) */
	if (nested && sqlite3_get_autocommit(s->db))
		return error_set(err, EIO,
				 "store: the transaction was rolled back by an "
				 "earlier error; roll it back and start again");
	return run(s, nested ? S_SAVEPOINT : S_BEGIN, err);
}

static int sq_commit(struct store *st, bool nested, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	if (sqlite3_get_autocommit(s->db))
		return error_set(err, EIO,
				 "store: the transaction was rolled back by an "
				 "earlier error");
	int r = run(s, nested ? S_RELEASE : S_COMMIT, err);
	if (r < 0 && !nested && !sqlite3_get_autocommit(s->db))
		run(s, S_ROLLBACK, NULL);
	return r;
}

static void sq_rollback(struct store *st, bool nested)
{
	struct sqlite_store *s = to_sqlite(st);
	if (sqlite3_get_autocommit(s->db))
		return; /* nothing open: SQLite has rolled it back already */
	if (!nested) {
		run(s, S_ROLLBACK, NULL);
	} else if (run(s, S_ROLLBACK_TO, NULL) == 0) {
		run(s, S_RELEASE, NULL);
	}
}

static int sq_insert(struct store *st, const struct task *t, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	{
		_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_INSERT_TASK];
		sqlite3_bind_text(q, 1, t->id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 2, t->max_attempts);
		sqlite3_bind_int64(q, 3, t->retry_on);
		sqlite3_bind_int64(q, 4, t->created_at);
		sqlite3_bind_text(q, 5, t->tenant, -1, SQLITE_STATIC);
		int rc = sqlite3_step(q);
		if (rc == SQLITE_CONSTRAINT_UNIQUE)
			return error_set(err, EEXIST, "store: task %s exists", t->id);
		if (rc != SQLITE_DONE)
			return sqlite_error(s->db, rc, err, "inserting a task");
		if (sqlite3_changes(s->db) == 0)
			return error_set(err, ENOENT, "store: no tenant %s", t->tenant);
	}
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_INSERT_SPEC];
	sqlite3_bind_int64(q, 1, sqlite3_last_insert_rowid(s->db));
	sqlite3_bind_text(q, 2, t->spec_json, -1, SQLITE_STATIC);
	int r = step(s, q, err, "inserting a task's spec");
	return r < 0 ? r : 0;
}

static int sq_get(struct store *st, const char *id, struct task *ret, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_GET];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int r = step(s, q, err, "reading a task");
	if (r == 0)
		return error_set(err, ENOENT, "store: no task %s", id);
	if (r < 0)
		return r;
	struct store_row row;
	r = read_row(q, true, &row, err);
	if (r < 0)
		return r;
	*ret = row.t;
	return 0;
}

static int sq_count(struct store *st, const char *tenant, enum task_status status, uint64_t *ret,
		    struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[tenant ? S_COUNT_TENANT : S_COUNT];
	sqlite3_bind_text(q, 1, task_status_name(status), -1, SQLITE_STATIC);
	if (tenant)
		sqlite3_bind_text(q, 2, tenant, -1, SQLITE_STATIC);
	int r = step(s, q, err, "counting tasks");
	if (r < 0)
		return r;
	*ret = r ? (uint64_t)sqlite3_column_int64(q, 0) : 0;
	return 0;
}

static int sq_list(struct store *st, const struct task_filter *f, struct task **ret, size_t *ret_n,
		   struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	int64_t after_created = INT64_MIN, after_pk = -1;
	if (f->after_id) {
		int r = position_with(s, S_POSITION, f->after_id, f->tenant, &after_pk,
				      &after_created, err);
		if (r < 0)
			return r;
	}
	bool all = f->statuses == 0 || f->statuses == (1u << TASK_STATUS_COUNT) - 1;
	enum stmt which = f->tenant ? (all ? S_LIST_TENANT_ALL : S_LIST_TENANT_STATUS)
				    : (all ? S_LIST_ALL : S_LIST_STATUS);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[which];
	if (f->tenant)
		sqlite3_bind_text(q, 12, f->tenant, -1, SQLITE_STATIC);
	for (int i = 0; !all && i < TASK_STATUS_COUNT; i++)
		if (f->statuses & TASK_STATUS_BIT(i))
			sqlite3_bind_text(q, i + 1, task_status_name((enum task_status)i), -1,
					  SQLITE_STATIC);
	sqlite3_bind_int64(q, 9, after_created);
	sqlite3_bind_int64(q, 10, after_pk);
	sqlite3_bind_int64(q, 11, (sqlite3_int64)f->limit);
	struct buf rows = {0};
	int r;
	while ((r = step(s, q, err, "listing tasks")) > 0) {
		struct store_row row;
		if (buf_reserve(&rows, sizeof(row.t)) < 0)
			r = error_set(err, ENOMEM, "store: listing tasks: out of memory");
		else
			r = read_row(q, true, &row, err);
		if (r < 0)
			break;
		buf_append(&rows, &row.t, sizeof(row.t)); /* reserved: cannot fail */
	}
	size_t n;
	struct task *v = rows_take(&rows, sizeof(*v), &n);
	if (r < 0) {
		store_tasks_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static int lock_with(struct sqlite_store *s, enum stmt i, const char *id, const char *skip_json,
		     struct store_row *ret, struct error *err)
{
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[i];
	if (id)
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	else
		sqlite3_bind_text(q, 1, skip_json, -1, SQLITE_STATIC); /* NULL binds NULL */
	int r = step(s, q, err, "reading a task");
	if (r == 0)
		return id ? error_set(err, ENOENT, "store: no task %s", id)
			  : error_set(err, ENOENT, "store: no task is queued");
	return r < 0 ? r : read_row(q, false, ret, err);
}

static int sq_lock(struct store *st, const char *id, struct store_row *ret, struct error *err)
{
	/* under BEGIN IMMEDIATE nobody else writes until we commit */
	return lock_with(to_sqlite(st), S_LOCK, id, NULL, ret, err);
}

static int sq_lock_oldest_queued(struct store *st, const char *skip_json, struct store_row *ret,
				 struct error *err)
{
	return lock_with(to_sqlite(st), S_LOCK_QUEUED, NULL, skip_json, ret, err);
}

static int sq_update(struct store *st, const struct store_row *row, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	const struct task *t = &row->t;
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_UPDATE];
	sqlite3_bind_int64(q, 1, row->key);
	sqlite3_bind_text(q, 2, task_status_name(t->status), -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, t->attempt);
	sqlite3_bind_int(q, 4, t->cancel_requested);
	sqlite3_bind_int(q, 5, t->exit_code);
	sqlite3_bind_int64(q, 6, t->started_at);
	sqlite3_bind_int64(q, 7, t->finished_at);
	sqlite3_bind_text(q, 8, t->error, -1, SQLITE_STATIC); /* NULL binds NULL */
	sqlite3_bind_int64(q, 9, row->next_seq);
	sqlite3_bind_text(q, 10, t->progress_json, -1, SQLITE_STATIC);
	int r = step(s, q, err, "updating a task");
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) != 1)
		return error_set(err, EIO, "store: task %s vanished while locked", t->id);
	return 0;
}

static int sq_event_add(struct store *st, struct store_row *row, enum task_event_type type,
			uint32_t attempt, int64_t time, const char *data_json, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_EVENT_ADD];
	sqlite3_bind_int64(q, 1, row->key);
	sqlite3_bind_int64(q, 2, row->next_seq);
	sqlite3_bind_int64(q, 3, attempt);
	sqlite3_bind_text(q, 4, task_event_type_name(type), -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 5, time);
	sqlite3_bind_text(q, 6, data_json, -1, SQLITE_STATIC);
	int r = step(s, q, err, "adding an event");
	if (r < 0)
		return r;
	row->next_seq++;
	return 0;
}

static int sq_events(struct store *st, const char *id, int64_t after_seq, size_t limit,
		     struct task_event **ret, size_t *ret_n, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	int64_t pk, created;
	int r = position(s, id, &pk, &created, err);
	if (r < 0)
		return r;
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_EVENTS];
	sqlite3_bind_int64(q, 1, pk);
	sqlite3_bind_int64(q, 2, after_seq);
	sqlite3_bind_int64(q, 3, (sqlite3_int64)limit);
	struct buf rows = {0};
	while ((r = step(s, q, err, "listing events")) > 0) {
		const char *type = (const char *)sqlite3_column_text(q, 2);
		struct task_event ev = {
		    .seq = sqlite3_column_int64(q, 0),
		    .attempt = (uint32_t)sqlite3_column_int64(q, 1),
		    .time = sqlite3_column_int64(q, 3),
		};
		if (type && strcmp(type, task_event_type_name(TASK_EVENT_STATUS)) == 0)
			ev.type = TASK_EVENT_STATUS;
		else if (type && strcmp(type, task_event_type_name(TASK_EVENT_EGRESS_DENIED)) == 0)
			ev.type = TASK_EVENT_EGRESS_DENIED;
		else if (!type || strcmp(type, task_event_type_name(TASK_EVENT_PROGRESS)) != 0) {
			r = error_set(err, EIO, "store: event %lld of task %s is corrupt",
				      (long long)ev.seq, id);
			break;
		}
		char *data = NULL;
		if (buf_reserve(&rows, sizeof(ev)) < 0 || dup_column(q, 4, &data) < 0 || !data) {
			free(data);
			r = error_set(err, ENOMEM, "store: listing events: out of memory");
			break;
		}
		ev.data_json = data;
		buf_append(&rows, &ev, sizeof(ev)); /* reserved: cannot fail */
	}
	size_t n;
	struct task_event *v = rows_take(&rows, sizeof(*v), &n);
	if (r < 0) {
		store_events_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* ---- sandbox ops --------------------------------------------------------- */

/* Read a row of SANDBOX_COLUMNS (and the spec, with_spec) into ret. */
static int read_sandbox_row(sqlite3_stmt *q, bool with_spec, struct store_sandbox_row *ret,
			    struct error *err)
{
	struct store_sandbox_row row = {.key = sqlite3_column_int64(q, 0)};
	struct sandbox_record *sb = &row.sb;
	const char *id = (const char *)sqlite3_column_text(q, 1);
	const char *status = (const char *)sqlite3_column_text(q, 2);
	if (!id || strlen(id) >= sizeof(sb->id) || sandbox_status_parse(status, &sb->status) < 0 ||
	    !tenant_column(q, COL_SANDBOX_TENANT, sb->tenant))
		return error_set(err, EIO,
				 "store: a sandbox row is corrupt (id '%s', status '%s', or its "
				 "tenant)",
				 id ? id : "", status ? status : "");
	memcpy(sb->id, id, strlen(id) + 1);
	sb->created_at = sqlite3_column_int64(q, 3);
	sb->expires_at = sqlite3_column_int64(q, 4);
	sb->ended_at = sqlite3_column_int64(q, 5);
	if (dup_column(q, 6, &sb->end_reason) < 0 || dup_column(q, 7, &sb->end_detail) < 0 ||
	    dup_column(q, 8, &sb->metadata_json) < 0 || !sb->metadata_json ||
	    (with_spec &&
	     (dup_column(q, COL_SANDBOX_SPEC, &sb->spec_json) < 0 || !sb->spec_json))) {
		sandbox_record_release(sb);
		return error_set(err, ENOMEM, "store: reading sandbox %s: out of memory", sb->id);
	}
	*ret = row;
	return 0;
}

static int sq_sandbox_insert(struct store *st, const struct sandbox_record *sb, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	{
		_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_INSERT];
		sqlite3_bind_text(q, 1, sb->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, sandbox_status_name(sb->status), -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 3, sb->created_at);
		sqlite3_bind_int64(q, 4, sb->expires_at);
		sqlite3_bind_text(q, 5, sb->metadata_json, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 6, sb->tenant, -1, SQLITE_STATIC);
		int rc = sqlite3_step(q);
		if (rc == SQLITE_CONSTRAINT_UNIQUE)
			return error_set(err, EEXIST, "store: sandbox %s exists", sb->id);
		if (rc != SQLITE_DONE)
			return sqlite_error(s->db, rc, err, "inserting a sandbox");
		if (sqlite3_changes(s->db) == 0)
			return error_set(err, ENOENT, "store: no tenant %s", sb->tenant);
	}
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_INSERT_SPEC];
	sqlite3_bind_int64(q, 1, sqlite3_last_insert_rowid(s->db));
	sqlite3_bind_text(q, 2, sb->spec_json, -1, SQLITE_STATIC);
	int r = step(s, q, err, "inserting a sandbox's spec");
	return r < 0 ? r : 0;
}

static int sq_sandbox_get(struct store *st, const char *id, struct sandbox_record *ret,
			  struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_GET];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int r = step(s, q, err, "reading a sandbox");
	if (r == 0)
		return error_set(err, ENOENT, "store: no sandbox %s", id);
	if (r < 0)
		return r;
	struct store_sandbox_row row;
	r = read_sandbox_row(q, true, &row, err);
	if (r < 0)
		return r;
	*ret = row.sb;
	return 0;
}

static int sq_sandbox_list(struct store *st, const struct sandbox_filter *f,
			   struct sandbox_record **ret, size_t *ret_n, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	int64_t after_created = INT64_MIN, after_pk = -1;
	if (f->after_id) {
		int r = position_with(s, S_SBX_POSITION, f->after_id, f->tenant, &after_pk,
				      &after_created, err);
		if (r < 0)
			return r;
	}
	bool all = f->statuses == (1u << SANDBOX_STATUS_COUNT) - 1;
	enum stmt which = f->tenant ? (all ? S_SBX_LIST_TENANT_ALL : S_SBX_LIST_TENANT_STATUS)
				    : (all ? S_SBX_LIST_ALL : S_SBX_LIST_STATUS);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[which];
	if (f->tenant)
		sqlite3_bind_text(q, 8, f->tenant, -1, SQLITE_STATIC);
	for (int i = 0; !all && i < SANDBOX_STATUS_COUNT; i++)
		if (f->statuses & SANDBOX_STATUS_BIT(i))
			sqlite3_bind_text(q, i + 1, sandbox_status_name((enum sandbox_status)i), -1,
					  SQLITE_STATIC);
	sqlite3_bind_int64(q, 5, after_created);
	sqlite3_bind_int64(q, 6, after_pk);
	sqlite3_bind_int64(q, 7, (sqlite3_int64)f->limit);
	struct buf rows = {0};
	int r;
	while ((r = step(s, q, err, "listing sandboxes")) > 0) {
		struct store_sandbox_row row;
		if (buf_reserve(&rows, sizeof(row.sb)) < 0)
			r = error_set(err, ENOMEM, "store: listing sandboxes: out of memory");
		else
			r = read_sandbox_row(q, true, &row, err);
		if (r < 0)
			break;
		buf_append(&rows, &row.sb, sizeof(row.sb)); /* reserved: cannot fail */
	}
	size_t n;
	struct sandbox_record *v = rows_take(&rows, sizeof(*v), &n);
	if (r < 0) {
		store_sandboxes_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static int sq_sandbox_lock(struct store *st, const char *id, struct store_sandbox_row *ret,
			   struct error *err)
{
	/* under BEGIN IMMEDIATE nobody else writes until we commit */
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_LOCK];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int r = step(s, q, err, "reading a sandbox");
	if (r == 0)
		return error_set(err, ENOENT, "store: no sandbox %s", id);
	return r < 0 ? r : read_sandbox_row(q, false, ret, err);
}

static int sq_sandbox_update(struct store *st, const struct store_sandbox_row *row,
			     struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	const struct sandbox_record *sb = &row->sb;
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_UPDATE];
	sqlite3_bind_int64(q, 1, row->key);
	sqlite3_bind_text(q, 2, sandbox_status_name(sb->status), -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, sb->created_at);
	sqlite3_bind_int64(q, 4, sb->expires_at);
	sqlite3_bind_int64(q, 5, sb->ended_at);
	sqlite3_bind_text(q, 6, sb->end_reason, -1, SQLITE_STATIC); /* NULL binds NULL */
	sqlite3_bind_text(q, 7, sb->end_detail, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 8, sb->metadata_json, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 9, sb->tenant, -1, SQLITE_STATIC);
	int r = step(s, q, err, "updating a sandbox");
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) != 1)
		return error_set(err, EIO, "store: sandbox %s vanished while locked", sb->id);
	if (!row->new_spec)
		return 0;
	_cleanup_reset_ sqlite3_stmt *qs = s->stmt[S_SBX_UPDATE_SPEC];
	sqlite3_bind_int64(qs, 1, row->key);
	sqlite3_bind_text(qs, 2, row->new_spec, -1, SQLITE_STATIC);
	return step(s, qs, err, "updating a sandbox's spec");
}

static int sq_sandbox_delete(struct store *st, const struct store_sandbox_row *row,
			     struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	{
		_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_DELETE_SPEC];
		sqlite3_bind_int64(q, 1, row->key);
		int r = step(s, q, err, "deleting a sandbox's spec");
		if (r < 0)
			return r;
	}
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_SBX_DELETE];
	sqlite3_bind_int64(q, 1, row->key);
	int r = step(s, q, err, "deleting a sandbox");
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) != 1)
		return error_set(err, EIO, "store: sandbox %s vanished while locked", row->sb.id);
	return 0;
}

/* ---- tenant and key ops -------------------------------------------------- */

/* Read a row of TENANT_COLUMNS into ret. */
static int read_tenant_row(sqlite3_stmt *q, struct tenant_record *ret, struct error *err)
{
	struct tenant_record t = {.created_at = sqlite3_column_int64(q, 1)};
	if (!tenant_column(q, 0, t.name))
		return error_set(err, EIO, "store: a tenant row is corrupt (its name)");
	if (dup_column(q, 2, &t.quotas_json) < 0 || !t.quotas_json)
		return error_set(err, ENOMEM, "store: reading tenant %s: out of memory", t.name);
	*ret = t;
	return 0;
}

static int sq_tenant_insert(struct store *st, const struct tenant_record *t, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_TENANT_INSERT];
	sqlite3_bind_text(q, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, t->created_at);
	sqlite3_bind_text(q, 3, t->quotas_json, -1, SQLITE_STATIC);
	int rc = sqlite3_step(q);
	if (rc == SQLITE_CONSTRAINT_UNIQUE)
		return error_set(err, EEXIST,
				 "store: tenant %s exists, or did: a name is never reused",
				 t->name);
	if (rc != SQLITE_DONE)
		return sqlite_error(s->db, rc, err, "inserting a tenant");
	return 0;
}

static int sq_tenant_get(struct store *st, const char *name, struct tenant_record *ret,
			 struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_TENANT_GET];
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	int r = step(s, q, err, "reading a tenant");
	if (r == 0)
		return error_set(err, ENOENT, "store: no tenant %s", name);
	return r < 0 ? r : read_tenant_row(q, ret, err);
}

static int sq_tenant_list(struct store *st, struct tenant_record **ret, size_t *ret_n,
			  struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_TENANT_LIST];
	struct buf rows = {0};
	int r;
	while ((r = step(s, q, err, "listing tenants")) > 0) {
		struct tenant_record t;
		if (buf_reserve(&rows, sizeof(t)) < 0)
			r = error_set(err, ENOMEM, "store: listing tenants: out of memory");
		else
			r = read_tenant_row(q, &t, err);
		if (r < 0)
			break;
		buf_append(&rows, &t, sizeof(t)); /* reserved: cannot fail */
	}
	size_t n;
	struct tenant_record *v = rows_take(&rows, sizeof(*v), &n);
	if (r < 0) {
		store_tenants_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Run the statement i on the row of tenant name, which must change it; -ENOENT. */
static int tenant_write(struct sqlite_store *s, enum stmt i, const char *name,
			const char *quotas_json, const char *what, struct error *err)
{
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[i];
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	if (quotas_json)
		sqlite3_bind_text(q, 2, quotas_json, -1, SQLITE_STATIC);
	int r = step(s, q, err, what);
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) != 1)
		return error_set(err, ENOENT, "store: no tenant %s", name);
	return 0;
}

static int sq_tenant_set_quotas(struct store *st, const char *name, const char *quotas_json,
				struct error *err)
{
	return tenant_write(to_sqlite(st), S_TENANT_SET_QUOTAS, name, quotas_json,
			    "setting a tenant's quotas", err);
}

static int sq_tenant_delete(struct store *st, const char *name, int64_t now, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_TENANT_DELETE];
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, now);
	int r = step(s, q, err, "deleting a tenant");
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) != 1)
		return error_set(err, ENOENT, "store: no tenant %s", name);
	return 0;
}

/*
 * count(*) of statement i for tenant name, with the names of the statuses
 * in set bound from ?2 on (name_of(status), one parameter per status of
 * count; those not in set stay NULL and match nothing).
 */
static int tenant_count(struct sqlite_store *s, enum stmt i, const char *name, uint32_t set,
			int count, const char *(*name_of)(int status), uint64_t *ret,
			struct error *err)
{
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[i];
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	for (int status = 0; name_of && status < count; status++)
		if (set & (1u << status))
			sqlite3_bind_text(q, status + 2, name_of(status), -1, SQLITE_STATIC);
	int r = step(s, q, err, "counting what a tenant has");
	if (r < 0)
		return r;
	*ret = r ? (uint64_t)sqlite3_column_int64(q, 0) : 0;
	return 0;
}

static const char *task_status_text(int status)
{
	return task_status_name((enum task_status)status);
}

static const char *sandbox_status_text(int status)
{
	return sandbox_status_name((enum sandbox_status)status);
}

static int sq_tenant_uses(struct store *st, const char *name, uint32_t task_statuses,
			  uint32_t sandbox_statuses, struct store_tenant_uses *ret,
			  struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	struct store_tenant_uses u = {0};
	int r = tenant_count(s, S_TENANT_KEYS, name, 0, 0, NULL, &u.keys, err);
	if (r == 0)
		r = tenant_count(s, S_TENANT_TASKS, name, task_statuses, TASK_STATUS_COUNT,
				 task_status_text, &u.tasks, err);
	if (r == 0)
		r = tenant_count(s, S_TENANT_SANDBOXES, name, sandbox_statuses,
				 SANDBOX_STATUS_COUNT, sandbox_status_text, &u.sandboxes, err);
	if (r == 0)
		*ret = u;
	return r;
}

/* Read a row of KEY_COLUMNS into ret. */
static int read_key_row(sqlite3_stmt *q, struct key_record *ret, struct error *err)
{
	struct key_record k = {
	    .created_at = sqlite3_column_int64(q, 4),
	    .expires_at = sqlite3_column_int64(q, 5),
	    .revoked_at = sqlite3_column_int64(q, 6),
	};
	const char *id = (const char *)sqlite3_column_text(q, 0);
	const char *role = (const char *)sqlite3_column_text(q, 2);
	const void *hash = sqlite3_column_blob(q, 3);
	if (!id || !*id || strlen(id) >= sizeof(k.id) || !tenant_column(q, 1, k.tenant) ||
	    key_role_parse(role, &k.role) < 0 || !hash ||
	    sqlite3_column_bytes(q, 3) != KEY_HASH_SIZE)
		return error_set(err, EIO, "store: a key's row is corrupt (id '%.*s')",
				 KEY_ID_SIZE - 1, id ? id : "");
	memcpy(k.id, id, strlen(id) + 1);
	memcpy(k.hash, hash, sizeof(k.hash));
	if (dup_column(q, 7, &k.label) < 0)
		return error_set(err, ENOMEM, "store: reading key %s: out of memory", k.id);
	*ret = k;
	return 0;
}

static int sq_key_insert(struct store *st, const struct key_record *k, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_KEY_INSERT];
	sqlite3_bind_text(q, 1, k->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, k->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, key_role_name(k->role), -1, SQLITE_STATIC);
	sqlite3_bind_blob(q, 4, k->hash, sizeof(k->hash), SQLITE_STATIC);
	sqlite3_bind_int64(q, 5, k->created_at);
	sqlite3_bind_int64(q, 6, k->expires_at);
	sqlite3_bind_text(q, 7, k->label, -1, SQLITE_STATIC); /* NULL binds NULL */
	int rc = sqlite3_step(q);
	if (rc == SQLITE_CONSTRAINT_UNIQUE)
		return error_set(err, EEXIST, "store: key %s exists", k->id);
	if (rc != SQLITE_DONE)
		return sqlite_error(s->db, rc, err, "inserting a key");
	return 0;
}

static int sq_key_get(struct store *st, const char *id, struct key_record *ret, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_KEY_GET];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int r = step(s, q, err, "reading a key");
	if (r == 0)
		return error_set(err, ENOENT, "store: no key %.*s", KEY_ID_SIZE - 1, id);
	return r < 0 ? r : read_key_row(q, ret, err);
}

static int sq_key_list(struct store *st, const char *tenant, struct key_record **ret, size_t *ret_n,
		       struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[tenant ? S_KEY_LIST_TENANT : S_KEY_LIST_ALL];
	if (tenant)
		sqlite3_bind_text(q, 1, tenant, -1, SQLITE_STATIC);
	struct buf rows = {0};
	int r;
	while ((r = step(s, q, err, "listing keys")) > 0) {
		struct key_record k;
		if (buf_reserve(&rows, sizeof(k)) < 0)
			r = error_set(err, ENOMEM, "store: listing keys: out of memory");
		else
			r = read_key_row(q, &k, err);
		if (r < 0)
			break;
		buf_append(&rows, &k, sizeof(k)); /* reserved: cannot fail */
	}
	size_t n;
	struct key_record *v = rows_take(&rows, sizeof(*v), &n);
	if (r < 0) {
		store_keys_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static int sq_key_revoke(struct store *st, const char *id, int64_t now, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_KEY_REVOKE];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, now);
	int r = step(s, q, err, "revoking a key");
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) != 1)
		return error_set(err, EIO, "store: key %s changed while locked", id);
	return 0;
}

static int sq_key_count(struct store *st, uint64_t *ret, struct error *err)
{
	struct sqlite_store *s = to_sqlite(st);
	_cleanup_reset_ sqlite3_stmt *q = s->stmt[S_KEY_COUNT];
	int r = step(s, q, err, "counting keys");
	if (r < 0)
		return r;
	*ret = r ? (uint64_t)sqlite3_column_int64(q, 0) : 0;
	return 0;
}

static int sq_audit_add(struct store *st, const struct audit_record *a, int64_t window_start,
			size_t keep, size_t batch, struct error *err)
{
	return sqlite_audit_add(to_sqlite(st)->audit, a, window_start, keep, batch, err);
}

static int sq_audit_list(struct store *st, const struct audit_filter *f, struct audit_record **ret,
			 size_t *ret_n, struct error *err)
{
	return sqlite_audit_list(to_sqlite(st)->audit, f, ret, ret_n, err);
}

static int sq_set_sync(struct store *st, bool full, struct error *err)
{
	return sqlite_audit_set_sync(to_sqlite(st)->audit, full, err);
}

static int sq_task_delete(struct store *st, const struct store_row *row, struct error *err)
{
	return sqlite_retain_task_delete(to_sqlite(st)->retain, row->key, row->t.id, err);
}

static int sq_list_ended(struct store *st, bool sandboxes, int64_t before, size_t limit,
			 char (**ret)[STORE_ENDED_ID_SIZE], size_t *ret_n, struct error *err)
{
	return sqlite_retain_list_ended(to_sqlite(st)->retain, sandboxes, before, limit, ret, ret_n,
					err);
}

static const struct store_ops sqlite_ops = {
    .close = sq_close,
    .schema_version = sq_schema_version,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .insert = sq_insert,
    .get = sq_get,
    .list = sq_list,
    .lock = sq_lock,
    .lock_oldest_queued = sq_lock_oldest_queued,
    .count = sq_count,
    .update = sq_update,
    .event_add = sq_event_add,
    .events = sq_events,
    .sandbox_insert = sq_sandbox_insert,
    .sandbox_get = sq_sandbox_get,
    .sandbox_list = sq_sandbox_list,
    .sandbox_lock = sq_sandbox_lock,
    .sandbox_update = sq_sandbox_update,
    .sandbox_delete = sq_sandbox_delete,
    .task_delete = sq_task_delete,
    .list_ended = sq_list_ended,
    .tenant_insert = sq_tenant_insert,
    .tenant_get = sq_tenant_get,
    .tenant_list = sq_tenant_list,
    .tenant_set_quotas = sq_tenant_set_quotas,
    .tenant_uses = sq_tenant_uses,
    .tenant_delete = sq_tenant_delete,
    .key_insert = sq_key_insert,
    .key_get = sq_key_get,
    .key_list = sq_key_list,
    .key_revoke = sq_key_revoke,
    .key_count = sq_key_count,
    .audit_add = sq_audit_add,
    .audit_list = sq_audit_list,
    .set_sync = sq_set_sync,
};

/* ---- opening and migrating --------------------------------------------- */

int sqlite_reword(struct error *err, const struct error *e, const char *context)
{
	const char *msg = e->msg;
	if (strncmp(msg, "store: ", strlen("store: ")) == 0)
		msg += strlen("store: ");
	return error_set(err, e->code, "store: %s: %s", context, msg);
}

/* Set the connection up: WAL, durable commits, foreign keys, waits. */
static int configure(sqlite3 *db, struct error *err)
{
	sqlite3_extended_result_codes(db, 1);
	sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
	sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &q, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *mode = (const char *)sqlite3_column_text(q, 0);
		rc = mode && strcmp(mode, "wal") == 0 ? SQLITE_OK : SQLITE_CANTOPEN;
		if (rc != SQLITE_OK) {
			int r = error_set(err, ENOTSUP, "store: journal mode is %s, not wal",
					  mode ? mode : "unknown");
			sqlite3_finalize(q);
			return r;
		}
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_OK)
		return sqlite_error(db, rc, err, "setting journal_mode = WAL");
	return sqlite_exec(db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON",
			   "setting synchronous = FULL and foreign_keys = ON", err);
}

int sqlite_store_open(const char *path, const struct sqlite_migration *migrations, size_t n,
		      struct store **ret, struct error *err)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "store: out of memory");
	s->base.ops = &sqlite_ops;
	struct error e = {0};
	int rc = sqlite3_open_v2(path, &s->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
				     SQLITE_OPEN_EXRESCODE,
				 NULL);
	int r = rc == SQLITE_OK ? 0 : sqlite_error(s->db, rc, &e, "opening the database");
	if (r == 0)
		r = configure(s->db, &e);
	if (r == 0)
		r = sqlite_migrate(s->db, migrations, n, &e);
	for (size_t i = 0; r == 0 && i < STMT_COUNT; i++) {
		rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&s->stmt[i], NULL);
		if (rc != SQLITE_OK)
			r = sqlite_error(s->db, rc, &e, stmt_sql[i]);
	}
	if (r == 0)
		r = sqlite_audit_open(s->db, &s->audit, &e);
	if (r == 0)
		r = sqlite_retain_open(s->db, &s->retain, &e);
	if (r < 0) {
		sq_close(&s->base);
		return sqlite_reword(err, &e, path);
	}
	*ret = &s->base;
	return 0;
}
