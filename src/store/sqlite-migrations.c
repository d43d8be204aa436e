/*
 * sqlite-migrations.c - the schema of the SQLite store, as numbered steps.
 *
 * Each step runs in its own transaction and ends by setting PRAGMA
 * user_version to its number, so a database is always exactly at one
 * step. Steps are append-only: never edit one that has shipped, add the
 * next. A database at a higher version than the last step here is refused.
 *
 * Layout:
 *   tasks       one row per task, the fields that change. pk (the rowid)
 *               is the insertion order that breaks created_at ties, and
 *               next_seq the seq its next event takes (gapless per task).
 *   task_specs  the spec, apart: it never changes, so the frequent row
 *               updates of progress do not rewrite it.
 *   events      progress and status events, keyed (task_pk, seq).
 *   sandboxes   (from step 2) one row per interactive sandbox, like tasks:
 *               pk breaks created_at ties. A claim from the warm pool
 *               rewrites created_at, and a discarded pooled sandbox's row
 *               is deleted.
 *   sandbox_specs  its spec, apart, for the same reason as task_specs.
 *   tenants     (from step 4) one row per tenant, by its unique name; the
 *               row of 'default' (core/tenant.h's TENANT_DEFAULT) is made
 *               by the step itself and never deleted.
 *   api_keys    (from step 4) one row per API key: its public id, its
 *               tenant, its role and the SHA-256 of its secret (never the
 *               secret). A revoked key keeps its row, revoked_at set.
 *   tasks.tenant, sandboxes.tenant  (from step 4) the owning tenant's
 *               name; every older row is 'default''s. Tenants are joined
 *               by name, with no foreign key: the store's C checks them.
 *   audit       (from step 5) the audit log: a row per mutating request,
 *               and per source, reason and minute of refused keys (count,
 *               time the first, last_time the last). pk is the order rows
 *               were recorded; pruning deletes the lowest pks alone.
 * Statuses and roles are stored by name, so reordering the C enum cannot
 * change what a stored row means. End reasons are not checked here but
 * in src/core, so a new reason needs no table rebuild.
 */
#include "store/store-internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>

#define STATUS_NAMES                                                                               \
	"'queued', 'running', 'succeeded', 'failed', 'oom_killed', 'timed_out', 'cancelled', "     \
	"'lost'"

#define SANDBOX_STATUS_NAMES "'pooled', 'running', 'paused', 'ended'"

#define KEY_ROLE_NAMES "'member', 'admin'"

/* clang-format off */
const struct sqlite_migration sqlite_migrations[] = {
	{1, "tasks, specs and events",
	 "PRAGMA application_id = 1633841016;\n" /* SQLITE_STORE_APPLICATION_ID, "abox" */
	 "CREATE TABLE tasks (\n"
	 "	pk               INTEGER PRIMARY KEY,\n"
	 "	id               TEXT    NOT NULL UNIQUE,\n"
	 "	status           TEXT    NOT NULL CHECK (status IN (" STATUS_NAMES ")),\n"
	 "	attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),\n"
	 "	max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),\n"
	 "	retry_on         INTEGER NOT NULL DEFAULT 0,\n"
	 "	cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),\n"
	 "	exit_code        INTEGER NOT NULL DEFAULT -1,\n"
	 "	created_at       INTEGER NOT NULL,\n"
	 "	started_at       INTEGER NOT NULL DEFAULT 0,\n"
	 "	finished_at      INTEGER NOT NULL DEFAULT 0,\n"
	 "	error            TEXT,\n"
	 "	next_seq         INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1),\n"
	 "	progress_json    TEXT    NOT NULL DEFAULT '{}'\n"
	 ");\n"
	 /* list in creation order; the rowid pk is every index's last column */
	 "CREATE INDEX tasks_by_created ON tasks (created_at);\n"
	 /* list by status in creation order, and claim the oldest queued */
	 "CREATE INDEX tasks_by_status ON tasks (status, created_at);\n"
	 "CREATE TABLE task_specs (\n"
	 "	task_pk   INTEGER PRIMARY KEY REFERENCES tasks (pk) ON DELETE CASCADE,\n"
	 "	spec_json TEXT NOT NULL\n"
	 ");\n"
	 /* events by (task, seq): the primary key is the table's only b-tree */
	 "CREATE TABLE events (\n"
	 "	task_pk   INTEGER NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,\n"
	 "	seq       INTEGER NOT NULL CHECK (seq >= 1),\n"
	 "	attempt   INTEGER NOT NULL CHECK (attempt >= 0),\n"
	 "	type      TEXT    NOT NULL CHECK (type IN ('progress', 'status')),\n"
	 "	time      INTEGER NOT NULL,\n"
	 "	data_json TEXT    NOT NULL,\n"
	 "	PRIMARY KEY (task_pk, seq)\n"
	 ") WITHOUT ROWID;\n"},
	{2, "interactive sandboxes",
	 "CREATE TABLE sandboxes (\n"
	 "	pk            INTEGER PRIMARY KEY,\n"
	 "	id            TEXT    NOT NULL UNIQUE,\n"
	 "	status        TEXT    NOT NULL CHECK (status IN (" SANDBOX_STATUS_NAMES ")),\n"
	 "	created_at    INTEGER NOT NULL,\n"
	 "	expires_at    INTEGER NOT NULL DEFAULT 0 CHECK (expires_at >= 0),\n"
	 "	ended_at      INTEGER NOT NULL DEFAULT 0,\n"
	 "	end_reason    TEXT,\n"
	 "	end_detail    TEXT,\n"
	 "	metadata_json TEXT    NOT NULL DEFAULT '{}'\n"
	 ");\n"
	 /* list in creation order */
	 "CREATE INDEX sandboxes_by_created ON sandboxes (created_at);\n"
	 /* list by status in creation order (the pool's, the users') */
	 "CREATE INDEX sandboxes_by_status ON sandboxes (status, created_at);\n"
	 "CREATE TABLE sandbox_specs (\n"
	 "	sandbox_pk INTEGER PRIMARY KEY REFERENCES sandboxes (pk) ON DELETE CASCADE,\n"
	 "	spec_json  TEXT NOT NULL\n"
	 ");\n"},
	/* SQLite cannot change a CHECK: the table is made again, with its rows */
	{3, "egress_denied events",
	 "CREATE TABLE events_3 (\n"
	 "	task_pk   INTEGER NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,\n"
	 "	seq       INTEGER NOT NULL CHECK (seq >= 1),\n"
	 "	attempt   INTEGER NOT NULL CHECK (attempt >= 0),\n"
	 "	type      TEXT    NOT NULL CHECK (type IN ('progress', 'status', 'egress_denied')),\n"
	 "	time      INTEGER NOT NULL,\n"
	 "	data_json TEXT    NOT NULL,\n"
	 "	PRIMARY KEY (task_pk, seq)\n"
	 ") WITHOUT ROWID;\n"
	 "INSERT INTO events_3 SELECT task_pk, seq, attempt, type, time, data_json FROM events;\n"
	 "DROP TABLE events;\n"
	 "ALTER TABLE events_3 RENAME TO events;\n"},
	{4, "tenants and API keys",
	 "CREATE TABLE tenants (\n"
	 "	pk          INTEGER PRIMARY KEY,\n"
	 "	name        TEXT    NOT NULL UNIQUE,\n"
	 "	created_at  INTEGER NOT NULL,\n"
	 "	quotas_json TEXT    NOT NULL DEFAULT '{}',\n"
	 "	deleted_at  INTEGER NOT NULL DEFAULT 0\n"
	 ");\n"
	 "INSERT INTO tenants (name, created_at) VALUES ('default', 0);\n"
	 "CREATE TABLE api_keys (\n"
	 "	pk         INTEGER PRIMARY KEY,\n"
	 "	id         TEXT    NOT NULL UNIQUE,\n"
	 "	tenant     TEXT    NOT NULL,\n"
	 "	role       TEXT    NOT NULL CHECK (role IN (" KEY_ROLE_NAMES ")),\n"
	 "	hash       BLOB    NOT NULL CHECK (length(hash) = 32),\n"
	 "	created_at INTEGER NOT NULL,\n"
	 "	expires_at INTEGER NOT NULL DEFAULT 0,\n"
	 "	revoked_at INTEGER NOT NULL DEFAULT 0,\n"
	 "	label      TEXT\n"
	 ");\n"
	 /* a tenant's keys in the order they are listed, and whether it has any */
	 "CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at, id);\n"
	 /* every older row is the default tenant's */
	 "ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';\n"
	 "ALTER TABLE sandboxes ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';\n"
	 /* a tenant's list in creation order; and by status, as the lists' arms */
	 "CREATE INDEX tasks_by_tenant ON tasks (tenant, created_at);\n"
	 "CREATE INDEX tasks_by_tenant_status ON tasks (tenant, status, created_at);\n"
	 "CREATE INDEX sandboxes_by_tenant ON sandboxes (tenant, created_at);\n"
	 "CREATE INDEX sandboxes_by_tenant_status ON sandboxes (tenant, status, created_at);\n"},
	{5, "the audit log",
	 "CREATE TABLE audit (\n"
	 "	pk        INTEGER PRIMARY KEY,\n"
	 "	time      INTEGER NOT NULL,\n"
	 "	last_time INTEGER NOT NULL,\n"
	 "	count     INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1),\n"
	 "	tenant    TEXT,\n"
	 "	key_id    TEXT,\n"
	 "	uid       INTEGER,\n"
	 "	method    TEXT,\n"
	 "	route     TEXT,\n"
	 "	target    TEXT,\n"
	 "	status    INTEGER NOT NULL CHECK (status BETWEEN 100 AND 599),\n"
	 "	error     TEXT,\n"
	 "	source    TEXT,\n"
	 "	reason    TEXT\n"
	 ");\n"
	 /* a time bound's pk (the rowid follows in each index entry) */
	 "CREATE INDEX audit_by_time ON audit (time);\n"
	 /* a tenant's rows, by pk */
	 "CREATE INDEX audit_by_tenant ON audit (tenant) WHERE tenant IS NOT NULL;\n"
	 /* the row a refusal is counted in */
	 "CREATE INDEX audit_refusals ON audit (source, reason, status, time) "
	 "WHERE reason IS NOT NULL;\n"},
	{6, "what ended, by when",
	 "CREATE INDEX tasks_by_finished ON tasks (finished_at) WHERE finished_at > 0;\n"
	 "CREATE INDEX sandboxes_by_ended ON sandboxes (ended_at) WHERE status = 'ended';\n"},
};
/* clang-format on */

const size_t sqlite_migrations_count = sizeof(sqlite_migrations) / sizeof(sqlite_migrations[0]);

_Static_assert(SQLITE_STORE_APPLICATION_ID == 1633841016, "migration 1 sets this application_id");
_Static_assert(SANDBOX_STATUS_COUNT == 4, "migration 2 names every sandbox status");
_Static_assert(KEY_ROLE_COUNT == 2, "migration 4 names every key role");
_Static_assert(KEY_HASH_SIZE == 32, "migration 4 checks a key's hash is 32 bytes");

/* ---- applying them ----------------------------------------------------- */

static int pragma_int(sqlite3 *db, const char *sql, int *ret, struct error *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*ret = sqlite3_column_int(q, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(q);
	return rc == SQLITE_OK ? 0 : sqlite_error(db, rc, err, sql);
}

int sqlite_exec(sqlite3 *db, const char *sql, const char *what, struct error *err)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : sqlite_error(db, rc, err, what);
}

int sqlite_migrate(sqlite3 *db, const struct sqlite_migration *m, size_t n, struct error *err)
{
	int app = 0, version = 0;
	int r = pragma_int(db, "PRAGMA application_id", &app, err);
	if (r == 0)
		r = pragma_int(db, "PRAGMA user_version", &version, err);
	if (r < 0)
		return r;
	if (app != SQLITE_STORE_APPLICATION_ID && (app != 0 || version != 0))
		return error_set(err, EINVAL, "store: not an agentbox store (application_id %d)",
				 app);
	if (version > (int)n)
		return error_set(err, ENOTSUP,
				 "store: schema version %d is newer than this agentbox knows "
				 "(%zu); upgrade agentbox",
				 version, n);
	for (size_t i = (size_t)version; i < n; i++) {
		if (m[i].version != (int)i + 1)
			return error_set(err, EINVAL, "store: migration %zu is numbered %d", i + 1,
					 m[i].version);
		struct error e = {0};
		r = sqlite_exec(db, "BEGIN IMMEDIATE", "beginning", &e);
		/* another process may have migrated while we waited for the lock */
		if (r == 0)
			r = pragma_int(db, "PRAGMA user_version", &version, &e);
		if (r == 0 && version <= (int)i) {
			char set[64];
			snprintf(set, sizeof(set), "PRAGMA user_version = %d", m[i].version);
			r = sqlite_exec(db, m[i].sql, "running", &e);
			if (r == 0)
				r = sqlite_exec(db, set, "recording the version", &e);
		}
		if (r == 0)
			r = sqlite_exec(db, "COMMIT", "committing", &e);
		if (r < 0) {
			if (!sqlite3_get_autocommit(db))
				sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			char context[128];
			snprintf(context, sizeof(context), "migration %d (%s)", m[i].version,
				 m[i].name);
			return sqlite_reword(err, &e, context);
		}
	}
	return 0;
}
