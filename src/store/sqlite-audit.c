/*
 * sqlite-audit.c - the audit log in the SQLite backend: the table
 * `audit` of migration 5, its statements prepared once on the store's
 * connection.
 *
 * Rows are listed by pk, the order they were recorded, last first. pk is
 * the rowid and only pruning deletes, always the lowest: so the rows are
 * one range of pks, max - min + 1 counts them from two index seeks, and
 * pruning is one range delete. A time bound becomes a pk bound from
 * audit_by_time (the smallest pk at or after since, the largest before
 * until), exact whatever the clock did; a tenant's rows are a range of
 * audit_by_tenant. A refusal's row is found by audit_refusals, a partial
 * index of the counted rows alone.
 */
#include "store/store-internal.h"

#include "base/buf.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_COLUMNS                                                                              \
	"pk, time, last_time, count, tenant, key_id, uid, method, route, target, status, error, "  \
	"source, reason"
/*
 * ?1 before pk, ?2 since and ?3 until (0: none; a time bound is looked up
 * only when given), ?4 method, ?5 route, ?6 prefix, ?7 limit
 */
#define AUDIT_WHERE                                                                                \
	"pk < ?1 AND (?2 = 0 OR pk >= coalesce((SELECT min(pk) FROM audit WHERE time >= ?2), "     \
	"?1)) "                                                                                    \
	"AND (?3 = 0 OR pk <= coalesce((SELECT max(pk) FROM audit WHERE time < ?3), 0)) "          \
	"AND (?4 IS NULL OR method = ?4) "                                                         \
	"AND (?5 IS NULL OR (CASE WHEN ?6 THEN substr(route, 1, length(?5)) = ?5 "                 \
	"ELSE route = ?5 END)) "

enum audit_stmt {
	A_INSERT,
	A_FIND_REFUSAL,
	A_COUNT_REFUSAL,
	A_BOUNDS,
	A_PRUNE,
	A_LIST_ALL,
	A_LIST_TENANT,
	A_SYNC_FULL,
	A_SYNC_NORMAL,
	A_STMT_COUNT
};

/* clang-format off */
static const char *const audit_sql[A_STMT_COUNT] = {
	[A_INSERT] = "INSERT INTO audit (time, last_time, count, tenant, key_id, uid, method, "
		     "route, target, status, error, source, reason) "
		     "VALUES (?1, ?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	[A_FIND_REFUSAL] = "SELECT pk FROM audit WHERE source = ?1 AND reason = ?2 "
			   "AND status = ?3 AND time >= ?4 AND key_id IS ?5 "
			   "ORDER BY time DESC LIMIT 1",
	[A_COUNT_REFUSAL] = "UPDATE audit SET count = count + 1, "
			    "last_time = max(last_time, ?2) WHERE pk = ?1",
	[A_BOUNDS] = "SELECT min(pk), max(pk) FROM audit",
	[A_PRUNE] = "DELETE FROM audit WHERE pk <= ?1",
	[A_LIST_ALL] = "SELECT " AUDIT_COLUMNS " FROM audit WHERE " AUDIT_WHERE
		       "ORDER BY pk DESC LIMIT ?7",
	[A_LIST_TENANT] = "SELECT " AUDIT_COLUMNS " FROM audit WHERE tenant = ?8 AND "
			  AUDIT_WHERE "ORDER BY pk DESC LIMIT ?7",
	[A_SYNC_FULL] = "PRAGMA synchronous = FULL",
	[A_SYNC_NORMAL] = "PRAGMA synchronous = NORMAL",
};
/* clang-format on */

struct sqlite_audit {
	sqlite3 *db;
	sqlite3_stmt *stmt[A_STMT_COUNT];
};

static void reset(sqlite3_stmt *q)
{
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
}

/* Step q once: 1 for a row, 0 when done, or -errno with err filled. */
static int step(struct sqlite_audit *s, sqlite3_stmt *q, struct error *err, const char *what)
{
	int rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sqlite_error(s->db, rc, err, what);
}

int sqlite_audit_open(sqlite3 *db, struct sqlite_audit **ret, struct error *err)
{
	struct sqlite_audit *s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "store: out of memory");
	s->db = db;
	for (size_t i = 0; i < A_STMT_COUNT; i++) {
		int rc = sqlite3_prepare_v3(db, audit_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					    &s->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			int r = sqlite_error(db, rc, err, audit_sql[i]);
			sqlite_audit_close(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

void sqlite_audit_close(struct sqlite_audit *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < A_STMT_COUNT; i++)
		sqlite3_finalize(s->stmt[i]);
	free(s);
}

int sqlite_audit_set_sync(struct sqlite_audit *s, bool full, struct error *err)
{
	sqlite3_stmt *q = s->stmt[full ? A_SYNC_FULL : A_SYNC_NORMAL];
	int r = step(s, q, err, full ? "synchronous = FULL" : "synchronous = NORMAL");
	reset(q);
	return r < 0 ? r : 0;
}

static void bind_text(sqlite3_stmt *q, int i, const char *s)
{
	sqlite3_bind_text(q, i, s, -1, SQLITE_STATIC); /* NULL binds NULL */
}

/* A refusal's row of this window, counted: 1; none: 0. */
static int count_refusal(struct sqlite_audit *s, const struct audit_record *a, int64_t window_start,
			 struct error *err)
{
	sqlite3_stmt *q = s->stmt[A_FIND_REFUSAL];
	bind_text(q, 1, a->source);
	bind_text(q, 2, a->reason);
	sqlite3_bind_int(q, 3, a->status);
	sqlite3_bind_int64(q, 4, window_start);
	bind_text(q, 5, a->key_id);
	int r = step(s, q, err, "finding a refusal's audit row");
	int64_t pk = r > 0 ? sqlite3_column_int64(q, 0) : 0;
	reset(q);
	if (r <= 0)
		return r;
	q = s->stmt[A_COUNT_REFUSAL];
	sqlite3_bind_int64(q, 1, pk);
	sqlite3_bind_int64(q, 2, a->time);
	r = step(s, q, err, "counting a refusal");
	reset(q);
	return r < 0 ? r : 1;
}

/* Past keep rows, delete the oldest, so that keep - batch + 1 stay. */
static int prune(struct sqlite_audit *s, size_t keep, size_t batch, struct error *err)
{
	sqlite3_stmt *q = s->stmt[A_BOUNDS];
	int r = step(s, q, err, "counting the audit log");
	int64_t min = r > 0 ? sqlite3_column_int64(q, 0) : 0;
	int64_t max = r > 0 ? sqlite3_column_int64(q, 1) : 0;
	reset(q);
	if (r <= 0 || max - min + 1 <= (int64_t)keep)
		return r < 0 ? r : 0;
	q = s->stmt[A_PRUNE];
	sqlite3_bind_int64(q, 1, max - (int64_t)(keep - batch + 1));
	r = step(s, q, err, "pruning the audit log");
	reset(q);
	return r < 0 ? r : 0;
}

int sqlite_audit_add(struct sqlite_audit *s, const struct audit_record *a, int64_t window_start,
		     size_t keep, size_t batch, struct error *err)
{
	if (window_start >= 0) {
		int r = count_refusal(s, a, window_start, err);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	sqlite3_stmt *q = s->stmt[A_INSERT];
	sqlite3_bind_int64(q, 1, a->time);
	bind_text(q, 2, a->tenant);
	bind_text(q, 3, a->key_id);
	if (a->uid >= 0)
		sqlite3_bind_int64(q, 4, a->uid);
	bind_text(q, 5, a->method);
	bind_text(q, 6, a->route);
	bind_text(q, 7, a->target);
	sqlite3_bind_int(q, 8, a->status);
	bind_text(q, 9, a->error);
	bind_text(q, 10, a->source);
	bind_text(q, 11, a->reason);
	int r = step(s, q, err, "recording an audit row");
	reset(q);
	return r < 0 ? r : prune(s, keep, batch, err);
}

/* Column col as an owned string (NULL for NULL); false when out of memory. */
static bool dup_text(sqlite3_stmt *q, int col, const char **ret)
{
	const unsigned char *t = sqlite3_column_text(q, col);
	*ret = NULL;
	if (!t)
		return sqlite3_column_type(q, col) == SQLITE_NULL;
	*ret = strdup((const char *)t);
	return *ret != NULL;
}

static int read_audit_row(sqlite3_stmt *q, struct audit_record *ret, struct error *err)
{
	struct audit_record a = {
	    .id = sqlite3_column_int64(q, 0),
	    .time = sqlite3_column_int64(q, 1),
	    .last_time = sqlite3_column_int64(q, 2),
	    .count = (uint64_t)sqlite3_column_int64(q, 3),
	    .uid = sqlite3_column_type(q, 6) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, 6),
	    .status = sqlite3_column_int(q, 10),
	};
	bool ok = dup_text(q, 4, &a.tenant) && dup_text(q, 5, &a.key_id) &&
		  dup_text(q, 7, &a.method) && dup_text(q, 8, &a.route) &&
		  dup_text(q, 9, &a.target) && dup_text(q, 11, &a.error) &&
		  dup_text(q, 12, &a.source) && dup_text(q, 13, &a.reason);
	if (!ok) {
		store_audit_release(&a);
		return error_set(err, ENOMEM, "store: reading the audit log: out of memory");
	}
	*ret = a;
	return 0;
}

int sqlite_audit_list(struct sqlite_audit *s, const struct audit_filter *f,
		      struct audit_record **ret, size_t *ret_n, struct error *err)
{
	sqlite3_stmt *q = s->stmt[f->tenant ? A_LIST_TENANT : A_LIST_ALL];
	sqlite3_bind_int64(q, 1, f->before_id ? f->before_id : INT64_MAX);
	sqlite3_bind_int64(q, 2, f->since);
	sqlite3_bind_int64(q, 3, f->until);
	bind_text(q, 4, f->method);
	bind_text(q, 5, f->route);
	sqlite3_bind_int(q, 6, f->route_prefix);
	sqlite3_bind_int64(q, 7, (int64_t)f->limit);
	if (f->tenant)
		bind_text(q, 8, f->tenant);
	struct buf rows = {0};
	int r;
	while ((r = step(s, q, err, "listing the audit log")) > 0) {
		struct audit_record a;
		if (buf_reserve(&rows, sizeof(a)) < 0)
			r = error_set(err, ENOMEM, "store: listing the audit log: out of memory");
		else
			r = read_audit_row(q, &a, err);
		if (r < 0)
			break;
		buf_append(&rows, &a, sizeof(a)); /* reserved: cannot fail */
	}
	reset(q);
	size_t n = rows.len / sizeof(struct audit_record);
	char *v = NULL;
	if (n == 0 || buf_steal(&rows, &v, NULL) < 0) {
		buf_release(&rows);
		n = 0;
	}
	if (r < 0) {
		store_audit_free((struct audit_record *)v, n);
		return r;
	}
	*ret = (struct audit_record *)v;
	*ret_n = n;
	return 0;
}
