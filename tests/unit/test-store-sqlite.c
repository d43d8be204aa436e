/*
 * test-store-sqlite.c - what only the SQLite backend has: its migrations
 * (a version-1 database, from before sandboxes, and a version-3 one, from
 * before tenants, brought up to date) and its settings. The database is
 * looked at from a second, plain SQLite connection; migration steps of the
 * tests' own are passed through sqlite_store_open() (store-internal.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store-internal.h"

struct scratch {
	char dir[128];
	char path[160];
};

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct scratch *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	*state = s;
	const char *tmp = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/test-store-sqlite.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(s->dir))
		return -1;
	snprintf(s->path, sizeof(s->path), "%s/store.db", s->dir);
	return 0;
}

static int teardown(void **state)
{
	struct scratch *s = *state;
	int r = nftw(s->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(s);
	return r;
}

/* Open with the first n of steps; the store must open. */
static void open_with(struct scratch *s, const struct sqlite_migration *steps, size_t n)
{
	struct store *st = NULL;
	struct error err = {0};
	if (sqlite_store_open(s->path, steps, n, &st, &err) < 0)
		fail_msg("opening with %zu steps: %s", n, err.msg);
	assert_int_equal(store_schema_version(st), (int)n);
	store_close(st);
}

/* One integer from SQL run on a plain connection of our own. */
static long long query(struct scratch *s, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	assert_int_equal(sqlite3_open_v2(s->path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	int rc = sqlite3_step(q);
	assert_true(rc == SQLITE_ROW || rc == SQLITE_DONE);
	long long v = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

/* The real steps, then a test step that counts its own runs. */
static const struct sqlite_migration *steps_with_marker(void)
{
	static struct sqlite_migration steps[8];
	size_t n = sqlite_migrations_count;
	assert_true(n + 2 <= sizeof(steps) / sizeof(steps[0]));
	memcpy(steps, sqlite_migrations, n * sizeof(steps[0]));
	steps[n] = (struct sqlite_migration){(int)n + 1, "marker",
					     "CREATE TABLE marker (runs INTEGER);"
					     "INSERT INTO marker VALUES (1);"};
	steps[n + 1] = (struct sqlite_migration){(int)n + 2, "broken",
						 "CREATE TABLE half (x INTEGER);"
						 "INSERT INTO no_such_table VALUES (1);"};
	return steps;
}

static void test_fresh_reaches_latest(void **state)
{
	struct scratch *s = *state;
	struct store *st = NULL;
	struct error err = {0};
	assert_int_equal(store_open_sqlite(s->path, &st, &err), 0);
	assert_int_equal(store_schema_version(st), (int)sqlite_migrations_count);
	store_close(st);
	assert_int_equal(query(s, "PRAGMA user_version"), (long long)sqlite_migrations_count);
	assert_int_equal(query(s, "PRAGMA application_id"), SQLITE_STORE_APPLICATION_ID);
	/* WAL is a property of the file: a plain connection sees it */
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	assert_int_equal(sqlite3_open(s->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
	sqlite3_finalize(q);
	sqlite3_close(db);
	/* the indexes the queries rely on */
	assert_int_equal(query(s, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
				  "name IN ('tasks_by_created', 'tasks_by_status', "
				  "'sandboxes_by_created', 'sandboxes_by_status', "
				  "'tasks_by_tenant', 'tasks_by_tenant_status', "
				  "'sandboxes_by_tenant', 'sandboxes_by_tenant_status', "
				  "'api_keys_by_tenant')"),
			 9);
	/* the default tenant is made with the schema */
	assert_int_equal(query(s, "SELECT count(*) FROM tenants WHERE name = 'default' AND "
				  "created_at = 0 AND quotas_json = '{}'"),
			 1);
}

/* Run SQL on a plain connection of our own; it must succeed. */
static void exec_sql(struct scratch *s, const char *sql)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open_v2(s->path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

static int count_sandbox(const struct sandbox_record *sb, void *data)
{
	(void)sb;
	(*(int *)data)++;
	return 0;
}

static int count_kinds(const struct task_event *ev, void *data)
{
	((int *)data)[ev->type]++;
	return 0;
}

/* A database that only migration 1 made (tasks, no sandboxes) opens and gains them. */
static void test_version_1_database_migrates(void **state)
{
	struct scratch *s = *state;
	/* what agentbox made before step 2 existed: step 1 only, and a task in it */
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(s->path, &db), SQLITE_OK);
	assert_int_equal(sqlite_exec(db, "PRAGMA journal_mode = WAL", "wal", NULL), 0);
	struct error err = {0};
	if (sqlite_migrate(db, sqlite_migrations, 1, &err) < 0)
		fail_msg("migration 1: %s", err.msg);
	sqlite3_close(db);
	assert_int_equal(query(s, "PRAGMA user_version"), 1);
	assert_int_equal(query(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'sandboxes'"),
			 0);
	const char *id = "tsk_0123456789abcdefghjkmnpqrs";
	exec_sql(s, "INSERT INTO tasks (pk, id, status, attempt, max_attempts, retry_on, "
		    "created_at, started_at, next_seq, progress_json) VALUES "
		    "(1, 'tsk_0123456789abcdefghjkmnpqrs', 'running', 1, 2, 128, 10, 11, 3, "
		    "'{\"pct\":5}');"
		    "INSERT INTO task_specs VALUES (1, '{\"cmd\":[\"true\"]}');"
		    "INSERT INTO events VALUES (1, 1, 1, 'status', 11, '{\"status\":\"running\"}');"
		    "INSERT INTO events VALUES (1, 2, 1, 'progress', 12, '{\"pct\":5}');");

	struct store *st = NULL;
	if (store_open_sqlite(s->path, &st, &err) < 0)
		fail_msg("opening a version-1 store: %s", err.msg);
	assert_int_equal(store_schema_version(st), (int)sqlite_migrations_count);
	assert_true(sqlite_migrations_count >= 2);
	/* the task survived, whole, and goes on */
	struct task t = {0};
	assert_int_equal(store_task_get(st, id, &t, &err), 0);
	assert_int_equal(t.status, TASK_RUNNING);
	assert_int_equal(t.attempt, 1);
	assert_int_equal(t.max_attempts, 2);
	assert_int_equal(t.retry_on, TASK_STATUS_BIT(TASK_LOST));
	assert_int_equal(t.created_at, 10);
	assert_string_equal(t.spec_json, "{\"cmd\":[\"true\"]}");
	assert_string_equal(t.progress_json, "{\"pct\":5}");
	task_release(&t);
	int64_t seq = 0;
	assert_int_equal(store_progress_append(st, id, 1, "{\"pct\":6}", 13, &seq, &err), 0);
	assert_int_equal(seq, 3);
	/* migration 3 made the events table again: its rows are all there, and it takes
	 * the new type */
	assert_int_equal(
	    store_egress_denied_append(st, id, 1, "{\"reason\":\"not_allowed\"}", 13, &err), 0);
	int kinds[4] = {0};
	assert_int_equal(store_events_list(st, id, 0, 10, count_kinds, kinds, &err), 0);
	assert_int_equal(kinds[TASK_EVENT_STATUS], 1);
	assert_int_equal(kinds[TASK_EVENT_PROGRESS], 2);
	assert_int_equal(kinds[TASK_EVENT_EGRESS_DENIED], 1);
	enum task_status end = TASK_STATUS_COUNT;
	assert_int_equal(store_task_end_attempt(st, id, 1, TASK_SUCCEEDED, 0, NULL, 14, &end, &err),
			 0);
	assert_int_equal(end, TASK_SUCCEEDED);
	/* and sandboxes work */
	struct sandbox_record sb = {.tenant = TENANT_DEFAULT,
				    .status = SANDBOX_POOLED,
				    .created_at = 20,
				    .spec_json = "{}"};
	assert_int_equal(sandbox_id_new(sb.id), 0);
	assert_int_equal(store_sandbox_insert(st, &sb, &err), 0);
	assert_int_equal(store_sandbox_claim(st, sb.id, TENANT_DEFAULT, 21, 0, NULL, NULL, &err),
			 0);
	assert_int_equal(store_sandbox_end(st, sb.id, 22, "deleted", NULL, &err), 0);
	store_close(st);
	/* reopened at the latest version: nothing runs again, everything is there */
	assert_int_equal(store_open_sqlite(s->path, &st, &err), 0);
	struct sandbox_record got = {0};
	assert_int_equal(store_sandbox_get(st, sb.id, &got, &err), 0);
	assert_int_equal(got.status, SANDBOX_ENDED);
	assert_string_equal(got.end_reason, "deleted");
	sandbox_record_release(&got);
	int n = 0;
	struct sandbox_filter flt = {.limit = 10};
	assert_int_equal(store_sandbox_list(st, &flt, count_sandbox, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_task_get(st, id, &t, &err), 0);
	assert_int_equal(t.status, TASK_SUCCEEDED);
	task_release(&t);
	store_close(st);
	assert_int_equal(query(s, "SELECT count(*) FROM events"),
			 5); /* 2 old, progress, egress_denied, end */
	assert_int_equal(query(s, "PRAGMA user_version"), (long long)sqlite_migrations_count);
}

static int tenant_of_sandbox(const struct sandbox_record *sb, void *data)
{
	assert_string_equal(sb->tenant, TENANT_DEFAULT);
	(*(int *)data)++;
	return 0;
}

static int tenant_of_task(const struct task *t, void *data)
{
	assert_string_equal(t->tenant, TENANT_DEFAULT);
	(*(int *)data)++;
	return 0;
}

static int count_tenant(const struct tenant_record *t, void *data)
{
	(void)t;
	(*(int *)data)++;
	return 0;
}

/* A database that migrations 1 to 3 made (no tenants) opens, and its rows are the default's. */
static void test_version_3_database_migrates(void **state)
{
	struct scratch *s = *state;
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(s->path, &db), SQLITE_OK);
	assert_int_equal(sqlite_exec(db, "PRAGMA journal_mode = WAL", "wal", NULL), 0);
	struct error err = {0};
	assert_true(sqlite_migrations_count >= 4);
	if (sqlite_migrate(db, sqlite_migrations, 3, &err) < 0)
		fail_msg("migrations 1 to 3: %s", err.msg);
	sqlite3_close(db);
	assert_int_equal(query(s, "PRAGMA user_version"), 3);
	assert_int_equal(query(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'tenants'"), 0);
	/* a running task with its events, a queued one, a running sandbox and a pooled one */
	const char *run = "tsk_0123456789abcdefghjkmnpqrs",
		   *queued = "tsk_1123456789abcdefghjkmnpqrs";
	const char *sbx = "sbx_0123456789abcdefghjkmnpqrs",
		   *pooled = "sbx_1123456789abcdefghjkmnpqrs";
	exec_sql(s,
		 "INSERT INTO tasks (pk, id, status, attempt, max_attempts, created_at, "
		 "started_at, next_seq, progress_json) VALUES "
		 "(1, 'tsk_0123456789abcdefghjkmnpqrs', 'running', 1, 1, 10, 11, 2, '{\"p\":1}'),"
		 "(2, 'tsk_1123456789abcdefghjkmnpqrs', 'queued', 0, 1, 12, 0, 1, '{}');"
		 "INSERT INTO task_specs VALUES (1, '{\"cmd\":[\"true\"]}'), (2, '{}');"
		 "INSERT INTO events VALUES (1, 1, 1, 'status', 11, '{\"status\":\"running\"}');"
		 "INSERT INTO sandboxes (pk, id, status, created_at, metadata_json) VALUES "
		 "(1, 'sbx_0123456789abcdefghjkmnpqrs', 'running', 20, '{\"m\":1}'),"
		 "(2, 'sbx_1123456789abcdefghjkmnpqrs', 'pooled', 21, '{}');"
		 "INSERT INTO sandbox_specs VALUES (1, '{\"s\":1}'), (2, '{}');");

	struct store *st = NULL;
	if (store_open_sqlite(s->path, &st, &err) < 0)
		fail_msg("opening a version-3 store: %s", err.msg);
	assert_int_equal(store_schema_version(st), (int)sqlite_migrations_count);
	/* every row stayed, whole, and is the default tenant's */
	struct task t = {0};
	assert_int_equal(store_task_get(st, run, &t, &err), 0);
	assert_string_equal(t.tenant, TENANT_DEFAULT);
	assert_int_equal(t.status, TASK_RUNNING);
	assert_int_equal(t.attempt, 1);
	assert_int_equal(t.created_at, 10);
	assert_string_equal(t.spec_json, "{\"cmd\":[\"true\"]}");
	assert_string_equal(t.progress_json, "{\"p\":1}");
	task_release(&t);
	struct sandbox_record sb = {0};
	assert_int_equal(store_sandbox_get(st, sbx, &sb, &err), 0);
	assert_string_equal(sb.tenant, TENANT_DEFAULT);
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	assert_string_equal(sb.metadata_json, "{\"m\":1}");
	assert_string_equal(sb.spec_json, "{\"s\":1}");
	sandbox_record_release(&sb);
	int n = 0;
	struct task_filter tf = {.limit = 10, .tenant = TENANT_DEFAULT};
	assert_int_equal(store_task_list(st, &tf, tenant_of_task, &n, &err), 0);
	assert_int_equal(n, 2);
	n = 0;
	struct sandbox_filter sf = {
	    .statuses = (1u << SANDBOX_STATUS_COUNT) - 1, .limit = 10, .tenant = TENANT_DEFAULT};
	assert_int_equal(store_sandbox_list(st, &sf, tenant_of_sandbox, &n, &err), 0);
	assert_int_equal(n, 2);
	/* the default tenant is there, alone, and stays */
	n = 0;
	assert_int_equal(store_tenant_list(st, count_tenant, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_tenant_delete(st, TENANT_DEFAULT, 1000, &err), -EPERM);
	/* everything goes on: the events, the queue, the pool, and keys */
	int64_t seq = 0;
	assert_int_equal(store_progress_append(st, run, 1, "{\"p\":2}", 13, &seq, &err), 0);
	assert_int_equal(seq, 2);
	assert_int_equal(store_tenant_insert(st, "acme", 30, NULL, &err), 0);
	assert_int_equal(store_sandbox_claim(st, pooled, "acme", 31, 0, NULL, NULL, &err), 0);
	struct key_record k = {.tenant = "acme", .role = KEY_ROLE_ADMIN, .created_at = 32};
	snprintf(k.id, sizeof(k.id), "k1");
	assert_int_equal(store_key_insert(st, &k, &err), 0);
	uint64_t keys = 0;
	assert_int_equal(store_key_count(st, &keys, &err), 0);
	assert_int_equal(keys, 1);
	store_close(st);
	assert_int_equal(query(s, "SELECT count(*) FROM tasks WHERE tenant = 'default'"), 2);
	assert_int_equal(query(s, "SELECT count(*) FROM sandboxes WHERE tenant = 'default'"), 1);
	assert_int_equal(query(s, "SELECT count(*) FROM sandboxes WHERE tenant = 'acme'"), 1);
	assert_int_equal(query(s, "SELECT count(*) FROM events"), 2);
	assert_int_equal(store_open_sqlite(s->path, &st, &err), 0);
	assert_int_equal(store_task_get(st, queued, &t, &err), 0);
	assert_string_equal(t.tenant, TENANT_DEFAULT);
	assert_int_equal(t.status, TASK_QUEUED);
	task_release(&t);
	store_close(st);
}

static void test_steps_run_once_each(void **state)
{
	struct scratch *s = *state;
	const struct sqlite_migration *steps = steps_with_marker();
	size_t n = sqlite_migrations_count;
	open_with(s, steps, n); /* an older agentbox made this database */
	assert_int_equal(query(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'marker'"), 0);
	open_with(s, steps, n + 1); /* a newer one migrates it */
	assert_int_equal(query(s, "SELECT count(*) FROM marker"), 1);
	open_with(s, steps, n + 1); /* and reopening runs nothing again */
	open_with(s, steps, n + 1);
	assert_int_equal(query(s, "SELECT count(*) FROM marker"), 1);
	assert_int_equal(query(s, "PRAGMA user_version"), (long long)n + 1);
}

static void test_failed_step_rolls_back(void **state)
{
	struct scratch *s = *state;
	const struct sqlite_migration *steps = steps_with_marker();
	size_t n = sqlite_migrations_count;
	open_with(s, steps, n + 1);
	struct store *st = NULL;
	struct error err = {0};
	assert_true(sqlite_store_open(s->path, steps, n + 2, &st, &err) < 0);
	assert_null(st);
	assert_non_null(strstr(err.msg, "broken"));
	assert_non_null(strstr(err.msg, "no_such_table"));
	/* nothing of the failed step stayed */
	assert_int_equal(query(s, "PRAGMA user_version"), (long long)n + 1);
	assert_int_equal(query(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'half'"), 0);
}

static void test_newer_database_refused(void **state)
{
	struct scratch *s = *state;
	open_with(s, sqlite_migrations, sqlite_migrations_count);
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %zu", sqlite_migrations_count + 1);
	query(s, sql);
	struct store *st = NULL;
	struct error err = {0};
	assert_int_equal(store_open_sqlite(s->path, &st, &err), -ENOTSUP);
	assert_null(st);
	assert_int_equal(err.code, ENOTSUP);
	assert_non_null(strstr(err.msg, s->path));
	assert_non_null(strstr(err.msg, "newer than this agentbox knows"));
	assert_int_equal(query(s, "PRAGMA user_version"), (long long)sqlite_migrations_count + 1);
}

static void test_foreign_database_refused(void **state)
{
	struct scratch *s = *state;
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(s->path, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db, "PRAGMA application_id = 42; CREATE TABLE t (x);", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	struct store *st = NULL;
	struct error err = {0};
	assert_int_equal(store_open_sqlite(s->path, &st, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not an agentbox store"));
}

static void test_open_errors(void **state)
{
	struct scratch *s = *state;
	struct store *st = NULL;
	struct error err = {0};
	char path[200];
	snprintf(path, sizeof(path), "%s/no/such/dir/store.db", s->dir);
	assert_true(store_open_sqlite(path, &st, &err) < 0);
	assert_null(st);
	assert_non_null(strstr(err.msg, path));
	FILE *junk = fopen(s->path, "w");
	assert_non_null(junk);
	fputs("this is not a database, it is a file of text long enough to be read as one "
	      "and found wanting",
	      junk);
	fclose(junk);
	assert_int_equal(store_open_sqlite(s->path, &st, &err), -EIO);
	assert_int_equal(store_open_sqlite(NULL, &st, &err), -EINVAL);
}

/* What the query planner does with the store's hot queries (mirrored here). */
static void assert_plan(struct scratch *s, const char *sql, const char *want, const char *never)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	char explain[512];
	snprintf(explain, sizeof(explain), "EXPLAIN QUERY PLAN %s", sql);
	assert_int_equal(sqlite3_open(s->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, explain, -1, &q, NULL), SQLITE_OK);
	bool found = false;
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *detail = (const char *)sqlite3_column_text(q, 3);
		found |= strstr(detail, want) != NULL;
		if (never && strstr(detail, never))
			fail_msg("%s: %s", sql, detail);
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
	if (!found)
		fail_msg("%s: no '%s' in its plan", sql, want);
}

static void test_query_plans(void **state)
{
	struct scratch *s = *state;
	open_with(s, sqlite_migrations, sqlite_migrations_count);
	/* claim: the first entry of tasks_by_status, no sort */
	assert_plan(s,
		    "SELECT pk FROM tasks t WHERE t.status = 'queued' "
		    "ORDER BY t.created_at, t.pk LIMIT 1",
		    "USING COVERING INDEX tasks_by_status (status=?)", "TEMP B-TREE");
	/* list, every status: a range of tasks_by_created, no sort */
	assert_plan(s,
		    "SELECT pk FROM tasks t WHERE (t.created_at, t.pk) > (1, 2) "
		    "ORDER BY t.created_at, t.pk LIMIT 3",
		    "INDEX tasks_by_created (created_at>?)", "TEMP B-TREE");
	/* list, one status (an arm of the filtered list) */
	assert_plan(s,
		    "SELECT pk, created_at FROM tasks WHERE status = 'failed' "
		    "AND (created_at, pk) > (1, 2) ORDER BY created_at, pk LIMIT 3",
		    "USING COVERING INDEX tasks_by_status (status=? AND created_at>?)",
		    "TEMP B-TREE");
	/* events: a range of the primary key */
	assert_plan(s, "SELECT seq FROM events WHERE task_pk = 1 AND seq > 2 ORDER BY seq LIMIT 3",
		    "USING PRIMARY KEY (task_pk=? AND seq>?)", "TEMP B-TREE");
	/* sandboxes, every status: a range of sandboxes_by_created, no sort */
	assert_plan(s,
		    "SELECT pk FROM sandboxes b WHERE (b.created_at, b.pk) > (1, 2) "
		    "ORDER BY b.created_at, b.pk LIMIT 3",
		    "INDEX sandboxes_by_created (created_at>?)", "TEMP B-TREE");
	/* sandboxes, one status (an arm of the filtered list) */
	assert_plan(s,
		    "SELECT pk, created_at FROM sandboxes WHERE status = 'pooled' "
		    "AND (created_at, pk) > (1, 2) ORDER BY created_at, pk LIMIT 3",
		    "USING COVERING INDEX sandboxes_by_status (status=? AND created_at>?)",
		    "TEMP B-TREE");
	/* a sandbox by id: its unique index */
	assert_plan(s, "SELECT pk FROM sandboxes WHERE id = 'x'", "USING COVERING INDEX", "SCAN");
	/* one tenant's tasks, every status: a range of tasks_by_tenant, no sort */
	assert_plan(s,
		    "SELECT pk FROM tasks t WHERE t.tenant = 'a' AND (t.created_at, t.pk) > (1, 2) "
		    "ORDER BY t.created_at, t.pk LIMIT 3",
		    "INDEX tasks_by_tenant (tenant=? AND created_at>?)", "TEMP B-TREE");
	/* one tenant's tasks, one status (an arm of its filtered list) */
	assert_plan(s,
		    "SELECT pk, created_at FROM tasks WHERE tenant = 'a' AND status = 'failed' "
		    "AND (created_at, pk) > (1, 2) ORDER BY created_at, pk LIMIT 3",
		    "USING COVERING INDEX tasks_by_tenant_status (tenant=? AND status=? AND "
		    "created_at>?)",
		    "TEMP B-TREE");
	/* the same for sandboxes */
	assert_plan(s,
		    "SELECT pk FROM sandboxes b WHERE b.tenant = 'a' AND (b.created_at, b.pk) > "
		    "(1, 2) ORDER BY b.created_at, b.pk LIMIT 3",
		    "INDEX sandboxes_by_tenant (tenant=? AND created_at>?)", "TEMP B-TREE");
	assert_plan(s,
		    "SELECT pk, created_at FROM sandboxes WHERE tenant = 'a' AND status = 'ended' "
		    "AND (created_at, pk) > (1, 2) ORDER BY created_at, pk LIMIT 3",
		    "USING COVERING INDEX sandboxes_by_tenant_status (tenant=? AND status=? AND "
		    "created_at>?)",
		    "TEMP B-TREE");
	/* what keeps a tenant: its live tasks and sandboxes, never the finished ones */
	assert_plan(s,
		    "SELECT count(*) FROM tasks WHERE tenant = 'a' AND status IN "
		    "('queued', 'running', NULL, NULL, NULL, NULL, NULL, NULL)",
		    "USING COVERING INDEX tasks_by_tenant_status (tenant=? AND status=?)", "SCAN");
	assert_plan(s,
		    "SELECT count(*) FROM sandboxes WHERE tenant = 'a' AND status IN "
		    "('pooled', 'running', 'paused', NULL)",
		    "USING COVERING INDEX sandboxes_by_tenant_status (tenant=? AND status=?)",
		    "SCAN");
	/* a tenant's keys, in order, and a key by id */
	assert_plan(s, "SELECT id FROM api_keys WHERE tenant = 'a' ORDER BY created_at, id",
		    "api_keys_by_tenant (tenant=?)", "TEMP B-TREE");
	assert_plan(s, "SELECT count(*) FROM api_keys WHERE tenant = 'a' AND revoked_at = 0",
		    "api_keys_by_tenant (tenant=?)", "SCAN");
	assert_plan(s, "SELECT pk FROM api_keys WHERE id = 'x'", "USING COVERING INDEX", "SCAN");
	assert_plan(s, "SELECT pk FROM tenants WHERE name = 'x'", "USING COVERING INDEX", "SCAN");
	assert_plan(s, "SELECT name FROM tenants ORDER BY name", "tenants", "TEMP B-TREE");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_fresh_reaches_latest),
	    T(test_steps_run_once_each),
	    T(test_failed_step_rolls_back),
	    T(test_newer_database_refused),
	    T(test_foreign_database_refused),
	    T(test_open_errors),
	    T(test_query_plans),
	    T(test_version_1_database_migrates),
	    T(test_version_3_database_migrates),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
