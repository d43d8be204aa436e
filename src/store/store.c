/*
 * store.c - the contract of store.h, once for every backend: argument
 * checks, fencing, the lifecycle tables of tasks and sandboxes, status
 * events, progress merging, tenants and keys, and transaction nesting.
 * Backends persist rows through store_ops.
 */
#include "store/store.h"

#include "base/cleanup.h"
#include "store/store-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL_STATUSES	     ((uint32_t)((1u << TASK_STATUS_COUNT) - 1))
#define SBX(s)		     SANDBOX_STATUS_BIT(s)
#define ALL_SANDBOX_STATUSES ((uint32_t)((1u << SANDBOX_STATUS_COUNT) - 1))
/* What a sandbox list with no statuses shows: what users may see. */
#define LISTED_SANDBOX_STATUSES (SBX(SANDBOX_RUNNING) | SBX(SANDBOX_PAUSED) | SBX(SANDBOX_ENDED))

void store_row_release(struct store_row *row)
{
	task_release(&row->t);
}

void store_tasks_free(struct task *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		task_release(&v[i]);
	free(v);
}

void store_events_free(struct task_event *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free((char *)v[i].data_json);
	free(v);
}

void store_sandbox_row_release(struct store_sandbox_row *row)
{
	sandbox_record_release(&row->sb);
}

void store_sandboxes_free(struct sandbox_record *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		sandbox_record_release(&v[i]);
	free(v);
}

void tenant_record_release(struct tenant_record *t)
{
	free(t->quotas_json);
	t->quotas_json = NULL;
}

void key_record_release(struct key_record *k)
{
	free(k->label);
	k->label = NULL;
}

void store_tenants_free(struct tenant_record *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		tenant_record_release(&v[i]);
	free(v);
}

void store_keys_free(struct key_record *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		key_record_release(&v[i]);
	free(v);
}

int store_open_sqlite(const char *path, struct store **ret, struct error *err)
{
	if (!path || !*path || !ret)
		return error_set(err, EINVAL, "store: no path given");
	return sqlite_store_open(path, sqlite_migrations, sqlite_migrations_count, ret, err);
}

struct store *store_close(struct store *st)
{
	if (st)
		st->ops->close(st);
	return NULL;
}

int store_schema_version(struct store *st)
{
	return st->ops->schema_version(st);
}

/* ---- transactions ------------------------------------------------------ */

int store_tx_begin(struct store *st, struct error *err)
{
	if (st->in_tx)
		return error_set(err, EINVAL, "store: a transaction is already open");
	int r = st->ops->begin(st, false, err);
	if (r < 0)
		return r;
	st->in_tx = true;
	return 0;
}

int store_tx_commit(struct store *st, struct error *err)
{
	if (!st->in_tx)
		return error_set(err, EINVAL, "store: no transaction is open");
	st->in_tx = false;
	return st->ops->commit(st, false, err);
}

void store_tx_rollback(struct store *st)
{
	if (!st->in_tx)
		return;
	st->in_tx = false;
	st->ops->rollback(st, false);
}

/* Each call is atomic: its own transaction, or a savepoint in the caller's. */
static int op_begin(struct store *st, struct error *err)
{
	return st->ops->begin(st, st->in_tx, err);
}

static int op_end(struct store *st, int r, struct error *err)
{
	if (r < 0) {
		st->ops->rollback(st, st->in_tx);
		return r;
	}
	return st->ops->commit(st, st->in_tx, err);
}

/* ---- the lifecycle ----------------------------------------------------- */

/* end: how the attempt ended, for the event that closes an attempt; else -1 */
static int status_event(struct store *st, struct store_row *row, int end, int exit_code,
			const char *error, int64_t now, struct error *err)
{
	_cleanup_free_ char *data = NULL;
	int r =
	    store_json_status_event(row->t.status, row->t.attempt, end, exit_code, error, &data);
	if (r < 0)
		return error_set_errno(err, -r, "store: writing a status event");
	return st->ops->event_add(st, row, TASK_EVENT_STATUS, row->t.attempt, now, data, err);
}

/* Move a locked row to status `to`, along the one lifecycle table only. */
static int move(struct store_row *row, enum task_status to, struct error *err)
{
	if (!task_transition_is_allowed(row->t.status, to))
		return error_set(err, EINVAL, "store: task %s cannot go from %s to %s", row->t.id,
				 task_status_name(row->t.status), task_status_name(to));
	row->t.status = to;
	return 0;
}

/* Fencing: is the row running exactly this attempt? */
static int fence(const struct store_row *row, uint32_t attempt, struct error *err)
{
	if (row->t.status == TASK_RUNNING && row->t.attempt == attempt)
		return 0;
	return error_set(err, ESTALE, "store: task %s is %s at attempt %u, not running attempt %u",
			 row->t.id, task_status_name(row->t.status), row->t.attempt, attempt);
}

static int set_string(char **field, const char *s)
{
	char *copy = NULL;
	if (s && !(copy = strdup(s)))
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* Is tenant (a fixed-size field) a tenant's name? -EINVAL otherwise. */
static int check_tenant(const char *tenant, size_t size, const char *whose, struct error *err)
{
	if (tenant && memchr(tenant, '\0', size) && tenant_name_is_valid(tenant))
		return 0;
	return error_set(err, EINVAL, "store: %s: not a tenant's name: '%.*s'", whose,
			 TENANT_NAME_MAX, tenant ? tenant : "");
}

/* ---- tasks ------------------------------------------------------------- */

int store_task_insert(struct store *st, const struct task *t, struct error *err)
{
	return store_task_insert_within(st, t, UINT64_MAX, NULL, err);
}

int store_task_insert_within(struct store *st, const struct task *t, uint64_t queued_max,
			     uint64_t *ret_queued, struct error *err)
{
	if (!t || !task_id_is_valid(t->id))
		return error_set(err, EINVAL, "store: not a task id: '%.*s'", TASK_ID_SIZE,
				 t ? t->id : "");
	int r = check_tenant(t->tenant, sizeof(t->tenant), t->id, err);
	if (r < 0)
		return r;
	if (t->max_attempts < 1 || t->max_attempts > TASK_MAX_ATTEMPTS_MAX)
		return error_set(err, EINVAL, "store: max_attempts %u is not in 1..%d",
				 t->max_attempts, TASK_MAX_ATTEMPTS_MAX);
	if (t->retry_on & ~ALL_STATUSES)
		return error_set(err, EINVAL, "store: retry_on 0x%x names no status", t->retry_on);
	if (!t->spec_json)
		return error_set(err, EINVAL, "store: task %s has no spec", t->id);
	r = op_begin(st, err);
	if (r < 0)
		return r;
	uint64_t queued = 0;
	if (queued_max != UINT64_MAX &&
	    (r = st->ops->count(st, t->tenant, TASK_QUEUED, &queued, err)) == 0 &&
	    queued >= queued_max) {
		if (ret_queued)
			*ret_queued = queued;
		r = error_set(err, EDQUOT, "store: tenant %s has %llu tasks queued", t->tenant,
			      (unsigned long long)queued);
	}
	if (r == 0)
		r = st->ops->insert(st, t, err);
	return op_end(st, r, err);
}

int store_task_get(struct store *st, const char *id, struct task *ret, struct error *err)
{
	if (!id || !ret)
		return error_set(err, EINVAL, "store: no task id given");
	return st->ops->get(st, id, ret, err);
}

int store_task_count(struct store *st, enum task_status status, uint64_t *ret, struct error *err)
{
	if (!ret || !task_status_name(status))
		return error_set(err, EINVAL,
				 "store: count needs a status and somewhere to put it");
	return st->ops->count(st, NULL, status, ret, err);
}

int store_task_count_tenant(struct store *st, const char *tenant, enum task_status status,
			    uint64_t *ret, struct error *err)
{
	if (!ret || !task_status_name(status))
		return error_set(err, EINVAL,
				 "store: count needs a status and somewhere to put it");
	if (!tenant_name_is_valid(tenant))
		return check_tenant(tenant, TENANT_NAME_SIZE, "counting tasks", err);
	return st->ops->count(st, tenant, status, ret, err);
}

int store_task_list(struct store *st, const struct task_filter *f,
		    int (*fn)(const struct task *t, void *data), void *data, struct error *err)
{
	if (!f || !fn || f->limit < 1 || f->limit > STORE_LIST_MAX)
		return error_set(err, EINVAL, "store: a list takes a limit in 1..%d",
				 STORE_LIST_MAX);
	if (f->statuses & ~ALL_STATUSES)
		return error_set(err, EINVAL, "store: statuses 0x%x names no status", f->statuses);
	if (f->tenant && !tenant_name_is_valid(f->tenant))
		return check_tenant(f->tenant, TENANT_NAME_SIZE, "listing tasks", err);
	struct task *v = NULL;
	size_t n = 0;
	int r = st->ops->list(st, f, &v, &n, err);
	/* fn runs after the backend is done reading, so it may call the store */
	for (size_t i = 0; r == 0 && i < n; i++) {
		int q = fn(&v[i], data);
		r = q < 0 ? q : 0;
	}
	store_tasks_free(v, n);
	return r;
}

int store_task_claim(struct store *st, int64_t now, struct task *ret, struct error *err)
{
	return store_task_claim_if(st, now, NULL, 0, NULL, NULL, ret, err);
}

/* skip as a JSON array of names (tenant names need no escaping), or NULL for none. */
static int skip_json(const char *const *skip, size_t nskip, char **ret, struct error *err)
{
	*ret = NULL;
	if (!nskip)
		return 0;
	if (nskip > STORE_CLAIM_SKIP_MAX)
		return error_set(err, EINVAL, "store: a claim skips at most %d tenants",
				 STORE_CLAIM_SKIP_MAX);
	size_t size = nskip * (TENANT_NAME_SIZE + 3) + 3;
	char *s = malloc(size);
	if (!s)
		return error_set(err, ENOMEM, "out of memory");
	size_t len = 0;
	s[len++] = '[';
	for (size_t i = 0; i < nskip; i++) {
		if (!tenant_name_is_valid(skip[i])) {
			free(s);
			return check_tenant(skip[i], TENANT_NAME_SIZE, "skipping tenants", err);
		}
		len += (size_t)snprintf(s + len, size - len, "%s\"%s\"", i ? "," : "", skip[i]);
	}
	s[len++] = ']';
	s[len] = '\0';
	*ret = s;
	return 0;
}

int store_task_claim_if(struct store *st, int64_t now, const char *const *skip, size_t nskip,
			int (*fits)(const struct task *t, void *data, struct error *err),
			void *data, struct task *ret, struct error *err)
{
	if (!ret)
		return error_set(err, EINVAL, "store: claim needs somewhere to put the task");
	struct store_row row = {0};
	struct task t = {0};
	_cleanup_free_ char *skipped = NULL;
	int r = skip_json(skip, nskip, &skipped, err);
	if (r < 0 || (r = op_begin(st, err)) < 0)
		return r;
	r = st->ops->lock_oldest_queued(st, skipped, &row, err);
	if (r == 0 && fits) { /* the locked row has no spec: read it whole */
		r = st->ops->get(st, row.t.id, &t, err);
		if (r == 0)
			r = fits(&t, data, err);
		task_release(&t);
	}
	if (r == 0)
		r = move(&row, TASK_RUNNING, err);
	if (r == 0) {
		row.t.attempt++;
		row.t.cancel_requested = false;
		if (row.t.started_at == 0)
			row.t.started_at = now;
		r = status_event(st, &row, -1, -1, NULL, now, err);
	}
	if (r == 0)
		r = st->ops->update(st, &row, err);
	if (r == 0)
		r = st->ops->get(st, row.t.id, &t, err);
	r = op_end(st, r, err);
	store_row_release(&row);
	if (r < 0) {
		task_release(&t);
		return r;
	}
	*ret = t;
	return 0;
}

int store_task_end_attempt(struct store *st, const char *id, uint32_t attempt, enum task_status end,
			   int exit_code, const char *error, int64_t now,
			   enum task_status *ret_status, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no task id given");
	if (!task_status_is_final(end))
		return error_set(err, EINVAL, "store: an attempt cannot end as %s",
				 task_status_name(end) ? task_status_name(end)
						       : "an unknown status");
	struct store_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->lock(st, id, &row, err);
	if (r == 0)
		r = fence(&row, attempt, err);
	if (r == 0) {
		enum task_status next =
		    task_after_attempt(end, attempt, row.t.max_attempts, row.t.retry_on);
		/* a cancel asked for during the attempt wins over a retry, and over
		 * "lost": a supervisor stopped by it may not have had its say */
		if ((next == TASK_QUEUED || next == TASK_LOST) && row.t.cancel_requested)
			next = TASK_CANCELLED;
		r = move(&row, next, err);
	}
	if (r == 0) {
		row.t.cancel_requested = false;
		if (task_status_is_final(row.t.status)) {
			row.t.finished_at = now;
			row.t.exit_code = exit_code < 0 ? -1 : exit_code;
			if (set_string(&row.t.error, error) < 0)
				r = error_set_errno(err, ENOMEM, "store: task %s", id);
		}
	}
	if (r == 0)
		r = status_event(st, &row, (int)end, exit_code, error, now, err);
	if (r == 0)
		r = st->ops->update(st, &row, err);
	enum task_status status = row.t.status;
	r = op_end(st, r, err);
	store_row_release(&row);
	if (r == 0 && ret_status)
		*ret_status = status;
	return r;
}

int store_task_cancel(struct store *st, const char *id, int64_t now, enum task_status *ret_status,
		      struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no task id given");
	struct store_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->lock(st, id, &row, err);
	if (r == 0 && task_status_is_final(row.t.status))
		r = error_set(err, EALREADY, "store: task %s is already %s", id,
			      task_status_name(row.t.status));
	if (r == 0 && row.t.status == TASK_QUEUED) {
		r = move(&row, TASK_CANCELLED, err);
		if (r == 0) {
			row.t.finished_at = now;
			r = status_event(st, &row, -1, -1, NULL, now, err);
		}
		if (r == 0)
			r = st->ops->update(st, &row, err);
	} else if (r == 0 && !row.t.cancel_requested) {
		row.t.cancel_requested = true; /* running: for the scheduler to kill */
		r = st->ops->update(st, &row, err);
	}
	enum task_status status = row.t.status;
	r = op_end(st, r, err);
	store_row_release(&row);
	if (r == 0 && ret_status)
		*ret_status = status;
	return r;
}

/* ---- removing what ended ----------------------------------------------- */

int store_task_delete(struct store *st, const char *id, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no task id given");
	struct store_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->lock(st, id, &row, err);
	if (r == 0 && !task_status_is_final(row.t.status))
		r = error_set(err, EBUSY, "store: task %s is %s, not ended", id,
			      task_status_name(row.t.status));
	if (r == 0)
		r = st->ops->task_delete(st, &row, err);
	r = op_end(st, r, err);
	store_row_release(&row);
	return r;
}

/* The ids of ended tasks or sandboxes, read whole before fn sees any. */
static int list_ended(struct store *st, bool sandboxes, int64_t before, size_t limit,
		      int (*fn)(const char *id, void *data), void *data, struct error *err)
{
	if (limit < 1 || limit > STORE_LIST_MAX)
		return error_set(err, EINVAL, "store: limit %zu is not 1..%d", limit,
				 STORE_LIST_MAX);
	char(*ids)[STORE_ENDED_ID_SIZE] = NULL;
	size_t n = 0;
	int r = st->ops->list_ended(st, sandboxes, before, limit, &ids, &n, err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		int rr = fn(ids[i], data);
		if (rr < 0)
			r = rr;
	}
	free(ids);
	return r;
}

int store_task_list_ended(struct store *st, int64_t before, size_t limit,
			  int (*fn)(const char *id, void *data), void *data, struct error *err)
{
	return list_ended(st, false, before, limit, fn, data, err);
}

int store_sandbox_list_ended(struct store *st, int64_t before, size_t limit,
			     int (*fn)(const char *id, void *data), void *data, struct error *err)
{
	return list_ended(st, true, before, limit, fn, data, err);
}

/* ---- progress and events ----------------------------------------------- */

/*
 * Record an event of type of the running attempt `attempt`; a progress
 * event is merged into the task's progress too. -ESTALE if that attempt is
 * not the running one.
 */
static int append_event(struct store *st, const char *id, uint32_t attempt,
			enum task_event_type type, const char *data_json, int64_t now,
			int64_t *ret_seq, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no task id given");
	if (!store_json_is_object(data_json))
		return error_set(err, EINVAL, "store: a%s %s event must be one JSON object",
				 type == TASK_EVENT_EGRESS_DENIED ? "n" : "",
				 task_event_type_name(type));
	struct store_row row = {0};
	int64_t seq = 0;
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->lock(st, id, &row, err);
	if (r == 0)
		r = fence(&row, attempt, err);
	if (r == 0 && type == TASK_EVENT_PROGRESS) {
		char *merged = NULL;
		r = store_json_merge(row.t.progress_json, data_json, &merged);
		if (r == -E2BIG)
			r = error_set(err, E2BIG, "store: progress of task %s would pass %d bytes",
				      id, STORE_PROGRESS_MAX);
		else if (r == -EINVAL)
			r = error_set(err, EIO,
				      "store: stored progress of task %s is not an object", id);
		else if (r < 0)
			r = error_set_errno(err, -r, "store: merging progress of task %s", id);
		else {
			free(row.t.progress_json);
			row.t.progress_json = merged;
		}
	}
	if (r == 0) {
		seq = row.next_seq;
		r = st->ops->event_add(st, &row, type, attempt, now, data_json, err);
	}
	if (r == 0)
		r = st->ops->update(st, &row, err);
	r = op_end(st, r, err);
	store_row_release(&row);
	if (r == 0 && ret_seq)
		*ret_seq = seq;
	return r;
}

int store_progress_append(struct store *st, const char *id, uint32_t attempt, const char *data_json,
			  int64_t now, int64_t *ret_seq, struct error *err)
{
	return append_event(st, id, attempt, TASK_EVENT_PROGRESS, data_json, now, ret_seq, err);
}

int store_egress_denied_append(struct store *st, const char *id, uint32_t attempt,
			       const char *data_json, int64_t now, struct error *err)
{
	return append_event(st, id, attempt, TASK_EVENT_EGRESS_DENIED, data_json, now, NULL, err);
}

int store_events_list(struct store *st, const char *id, int64_t after_seq, size_t limit,
		      int (*fn)(const struct task_event *ev, void *data), void *data,
		      struct error *err)
{
	if (!id || !fn || limit < 1 || limit > STORE_LIST_MAX)
		return error_set(err, EINVAL, "store: events are listed with a limit in 1..%d",
				 STORE_LIST_MAX);
	struct task_event *v = NULL;
	size_t n = 0;
	int r = st->ops->events(st, id, after_seq, limit, &v, &n, err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		int q = fn(&v[i], data);
		r = q < 0 ? q : 0;
	}
	store_events_free(v, n);
	return r;
}

/* ---- interactive sandboxes --------------------------------------------- */

/* A JSON object of at most max bytes: -EINVAL or -E2BIG otherwise. */
static int check_object(const char *json, size_t max, const char *what, const char *id,
			struct error *err)
{
	if (!json)
		return error_set(err, EINVAL, "store: sandbox %s has no %s", id, what);
	if (strnlen(json, max + 1) > max)
		return error_set(err, E2BIG, "store: the %s of sandbox %s passes %zu bytes", what,
				 id, max);
	if (!store_json_is_object(json))
		return error_set(err, EINVAL, "store: the %s of sandbox %s is not one JSON object",
				 what, id);
	return 0;
}

static const char *sandbox_status_text(enum sandbox_status s)
{
	const char *name = sandbox_status_name(s);
	return name ? name : "an unknown status";
}

/* Move a locked row to status `to`, along the one lifecycle table only. */
static int sandbox_move(struct store_sandbox_row *row, enum sandbox_status to, struct error *err)
{
	if (!sandbox_transition_is_allowed(row->sb.status, to))
		return error_set(err, EINVAL, "store: sandbox %s cannot go from %s to %s",
				 row->sb.id, sandbox_status_text(row->sb.status),
				 sandbox_status_text(to));
	row->sb.status = to;
	return 0;
}

/* Fencing by status: is the locked sandbox in one of `in`? */
static int sandbox_fence(const struct store_sandbox_row *row, uint32_t in, const char *want,
			 struct error *err)
{
	if (SBX(row->sb.status) & in)
		return 0;
	return error_set(err, ESTALE, "store: sandbox %s is %s, not %s", row->sb.id,
			 sandbox_status_text(row->sb.status), want);
}

int store_sandbox_insert(struct store *st, const struct sandbox_record *sb, struct error *err)
{
	if (!sb || !memchr(sb->id, '\0', sizeof(sb->id)) || !sandbox_id_is_valid(sb->id))
		return error_set(err, EINVAL, "store: not a sandbox id: '%.*s'", SANDBOX_ID_SIZE,
				 sb ? sb->id : "");
	if (sb->status != SANDBOX_POOLED && sb->status != SANDBOX_RUNNING)
		return error_set(err, EINVAL, "store: a new sandbox is pooled or running, not %s",
				 sandbox_status_text(sb->status));
	if (sb->expires_at < 0)
		return error_set(err, EINVAL, "store: sandbox %s expires at %lld", sb->id,
				 (long long)sb->expires_at);
	int r = check_tenant(sb->tenant, sizeof(sb->tenant), sb->id, err);
	if (r < 0)
		return r;
	if (sb->status == SANDBOX_POOLED && strcmp(sb->tenant, TENANT_DEFAULT) != 0)
		return error_set(err, EINVAL,
				 "store: pooled sandbox %s is the " TENANT_DEFAULT
				 " tenant's, not %s's",
				 sb->id, sb->tenant);
	struct sandbox_record row = {
	    .status = sb->status,
	    .created_at = sb->created_at,
	    .expires_at = sb->expires_at,
	    .spec_json = sb->spec_json,
	    .metadata_json = sb->metadata_json ? sb->metadata_json : "{}",
	};
	memcpy(row.id, sb->id, sizeof(row.id));
	memcpy(row.tenant, sb->tenant, sizeof(row.tenant));
	r = check_object(row.spec_json, SANDBOX_SPEC_MAX, "spec", row.id, err);
	if (r == 0)
		r = check_object(row.metadata_json, SANDBOX_METADATA_MAX, "metadata", row.id, err);
	if (r == 0)
		r = op_begin(st, err);
	if (r < 0)
		return r;
	return op_end(st, st->ops->sandbox_insert(st, &row, err), err);
}

int store_sandbox_get(struct store *st, const char *id, struct sandbox_record *ret,
		      struct error *err)
{
	if (!id || !ret)
		return error_set(err, EINVAL, "store: no sandbox id given");
	return st->ops->sandbox_get(st, id, ret, err);
}

int store_sandbox_list(struct store *st, const struct sandbox_filter *f,
		       int (*fn)(const struct sandbox_record *sb, void *data), void *data,
		       struct error *err)
{
	if (!f || !fn || f->limit < 1 || f->limit > STORE_LIST_MAX)
		return error_set(err, EINVAL, "store: a list takes a limit in 1..%d",
				 STORE_LIST_MAX);
	if (f->statuses & ~ALL_SANDBOX_STATUSES)
		return error_set(err, EINVAL, "store: statuses 0x%x names no sandbox status",
				 f->statuses);
	if (f->tenant && !tenant_name_is_valid(f->tenant))
		return check_tenant(f->tenant, TENANT_NAME_SIZE, "listing sandboxes", err);
	struct sandbox_filter flt = *f;
	if (flt.statuses == 0)
		flt.statuses = LISTED_SANDBOX_STATUSES;
	struct sandbox_record *v = NULL;
	size_t n = 0;
	int r = st->ops->sandbox_list(st, &flt, &v, &n, err);
	/* fn runs after the backend is done reading, so it may call the store */
	for (size_t i = 0; r == 0 && i < n; i++) {
		int q = fn(&v[i], data);
		r = q < 0 ? q : 0;
	}
	store_sandboxes_free(v, n);
	return r;
}

int store_sandbox_claim(struct store *st, const char *id, const char *tenant, int64_t now,
			int64_t expires_at, const char *spec_json, const char *metadata_json,
			struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no sandbox id given");
	if (!tenant_name_is_valid(tenant))
		return check_tenant(tenant, TENANT_NAME_SIZE, id, err);
	if (expires_at < 0)
		return error_set(err, EINVAL, "store: sandbox %s expires at %lld", id,
				 (long long)expires_at);
	const char *metadata = metadata_json ? metadata_json : "{}";
	int r = check_object(metadata, SANDBOX_METADATA_MAX, "metadata", id, err);
	if (r == 0 && spec_json)
		r = check_object(spec_json, SANDBOX_SPEC_MAX, "spec", id, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *copy = strdup(metadata);
	if (!copy)
		return error_set_errno(err, ENOMEM, "store: sandbox %s", id);
	struct store_sandbox_row row = {0};
	r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->sandbox_lock(st, id, &row, err);
	if (r == 0)
		r = sandbox_fence(&row, SBX(SANDBOX_POOLED), "pooled", err);
	struct tenant_record owner = {0};
	/* under the write lock: a tenant deleted meanwhile gets nothing */
	if (r == 0 && (r = st->ops->tenant_get(st, tenant, &owner, err)) == -ENOENT)
		r = error_set(err, ENOENT, "store: no tenant %s", tenant);
	tenant_record_release(&owner);
	if (r == 0)
		r = sandbox_move(&row, SANDBOX_RUNNING, err);
	if (r == 0) {
		snprintf(row.sb.tenant, sizeof(row.sb.tenant), "%s", tenant); /* valid: it fits */
		row.sb.created_at = now;
		row.sb.expires_at = expires_at;
		free(row.sb.metadata_json);
		row.sb.metadata_json = TAKE_PTR(copy);
		row.new_spec = spec_json;
		r = st->ops->sandbox_update(st, &row, err);
	}
	r = op_end(st, r, err);
	store_sandbox_row_release(&row);
	return r;
}

int store_sandbox_set_status(struct store *st, const char *id, enum sandbox_status from,
			     enum sandbox_status to, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no sandbox id given");
	bool pause = from == SANDBOX_RUNNING && to == SANDBOX_PAUSED;
	bool resume = from == SANDBOX_PAUSED && to == SANDBOX_RUNNING;
	if (!pause && !resume)
		return error_set(err, EINVAL,
				 "store: a sandbox's status is set from running to paused or "
				 "back, not from %s to %s",
				 sandbox_status_text(from), sandbox_status_text(to));
	struct store_sandbox_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->sandbox_lock(st, id, &row, err);
	if (r == 0)
		r = sandbox_fence(&row, SBX(from), sandbox_status_name(from), err);
	if (r == 0)
		r = sandbox_move(&row, to, err);
	if (r == 0)
		r = st->ops->sandbox_update(st, &row, err);
	r = op_end(st, r, err);
	store_sandbox_row_release(&row);
	return r;
}

int store_sandbox_set_expiry(struct store *st, const char *id, int64_t expires_at,
			     struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no sandbox id given");
	if (expires_at < 0)
		return error_set(err, EINVAL, "store: sandbox %s expires at %lld", id,
				 (long long)expires_at);
	struct store_sandbox_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->sandbox_lock(st, id, &row, err);
	if (r == 0)
		r = sandbox_fence(&row, ALL_SANDBOX_STATUSES & ~SBX(SANDBOX_ENDED), "live", err);
	if (r == 0 && row.sb.expires_at != expires_at) {
		row.sb.expires_at = expires_at;
		r = st->ops->sandbox_update(st, &row, err);
	}
	r = op_end(st, r, err);
	store_sandbox_row_release(&row);
	return r;
}

int store_sandbox_end(struct store *st, const char *id, int64_t now, const char *reason,
		      const char *detail, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no sandbox id given");
	if (!sandbox_end_reason_is_valid(reason))
		return error_set(err, EINVAL, "store: '%s' is not why a sandbox ends",
				 reason ? reason : "");
	struct store_sandbox_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->sandbox_lock(st, id, &row, err);
	if (r == 0 && row.sb.status == SANDBOX_ENDED)
		r = error_set(err, ESTALE, "store: sandbox %s has already ended (%s)", id,
			      row.sb.end_reason ? row.sb.end_reason : "no reason");
	if (r == 0)
		r = sandbox_move(&row, SANDBOX_ENDED, err);
	if (r == 0) {
		row.sb.ended_at = now;
		if (set_string(&row.sb.end_reason, reason) < 0 ||
		    set_string(&row.sb.end_detail, detail) < 0)
			r = error_set_errno(err, ENOMEM, "store: sandbox %s", id);
	}
	if (r == 0)
		r = st->ops->sandbox_update(st, &row, err);
	r = op_end(st, r, err);
	store_sandbox_row_release(&row);
	return r;
}

int store_sandbox_delete(struct store *st, const char *id, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no sandbox id given");
	struct store_sandbox_row row = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->sandbox_lock(st, id, &row, err);
	if (r == 0)
		r = sandbox_fence(&row, SBX(SANDBOX_POOLED) | SBX(SANDBOX_ENDED), "pooled or ended",
				  err);
	if (r == 0)
		r = st->ops->sandbox_delete(st, &row, err);
	r = op_end(st, r, err);
	store_sandbox_row_release(&row);
	return r;
}

/* ---- tenants ----------------------------------------------------------- */

/* quotas: a JSON object of at most TENANT_QUOTAS_MAX bytes; -EINVAL otherwise. */
static int check_quotas(const char *name, const char *quotas, struct error *err)
{
	if (!quotas)
		return error_set(err, EINVAL, "store: tenant %s: no quotas given", name);
	if (strnlen(quotas, TENANT_QUOTAS_MAX + 1) > TENANT_QUOTAS_MAX)
		return error_set(err, EINVAL, "store: the quotas of tenant %s pass %d bytes", name,
				 TENANT_QUOTAS_MAX);
	if (!store_json_is_object(quotas))
		return error_set(err, EINVAL,
				 "store: the quotas of tenant %s are not one JSON object", name);
	return 0;
}

/* A name no tenant can have is a tenant that does not exist. */
static int no_tenant(const char *name, struct error *err)
{
	return error_set(err, ENOENT, "store: no tenant %.*s", TENANT_NAME_MAX, name);
}

int store_tenant_insert(struct store *st, const char *name, int64_t now, const char *quotas_json,
			struct error *err)
{
	if (!tenant_name_is_valid(name))
		return check_tenant(name, TENANT_NAME_SIZE, "a new tenant", err);
	struct tenant_record t = {.created_at = now,
				  .quotas_json = (char *)(quotas_json ? quotas_json : "{}")};
	snprintf(t.name, sizeof(t.name), "%s", name);
	int r = check_quotas(name, t.quotas_json, err);
	if (r == 0)
		r = op_begin(st, err);
	if (r < 0)
		return r;
	return op_end(st, st->ops->tenant_insert(st, &t, err), err);
}

int store_tenant_get(struct store *st, const char *name, struct tenant_record *ret,
		     struct error *err)
{
	if (!name || !ret)
		return error_set(err, EINVAL, "store: no tenant name given");
	if (!tenant_name_is_valid(name))
		return no_tenant(name, err);
	return st->ops->tenant_get(st, name, ret, err);
}

int store_tenant_list(struct store *st, int (*fn)(const struct tenant_record *t, void *data),
		      void *data, struct error *err)
{
	if (!fn)
		return error_set(err, EINVAL, "store: listing tenants needs a function");
	struct tenant_record *v = NULL;
	size_t n = 0;
	int r = st->ops->tenant_list(st, &v, &n, err);
	/* fn runs after the backend is done reading, so it may call the store */
	for (size_t i = 0; r == 0 && i < n; i++) {
		int q = fn(&v[i], data);
		r = q < 0 ? q : 0;
	}
	store_tenants_free(v, n);
	return r;
}

int store_tenant_set_quotas(struct store *st, const char *name, const char *quotas_json,
			    struct error *err)
{
	if (!name)
		return error_set(err, EINVAL, "store: no tenant name given");
	if (!tenant_name_is_valid(name))
		return no_tenant(name, err);
	int r = check_quotas(name, quotas_json, err);
	if (r == 0)
		r = op_begin(st, err);
	if (r < 0)
		return r;
	return op_end(st, st->ops->tenant_set_quotas(st, name, quotas_json, err), err);
}

/* The statuses of tasks and sandboxes that keep their tenant: not final, not ended. */
static uint32_t live_task_statuses(void)
{
	uint32_t live = 0;
	for (int s = 0; s < TASK_STATUS_COUNT; s++)
		if (!task_status_is_final((enum task_status)s))
			live |= TASK_STATUS_BIT(s);
	return live;
}

#define LIVE_SANDBOX_STATUSES (ALL_SANDBOX_STATUSES & ~SBX(SANDBOX_ENDED))

int store_tenant_delete(struct store *st, const char *name, int64_t now, struct error *err)
{
	if (!name)
		return error_set(err, EINVAL, "store: no tenant name given");
	if (!tenant_name_is_valid(name))
		return no_tenant(name, err);
	if (strcmp(name, TENANT_DEFAULT) == 0)
		return error_set(err, EPERM,
				 "store: the " TENANT_DEFAULT " tenant cannot be deleted");
	struct tenant_record t = {0};
	struct store_tenant_uses uses = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	/* under the write lock: nothing of the tenant's can be added until the commit */
	r = st->ops->tenant_get(st, name, &t, err);
	tenant_record_release(&t);
	if (r == 0)
		r = st->ops->tenant_uses(st, name, live_task_statuses(), LIVE_SANDBOX_STATUSES,
					 &uses, err);
	if (r == 0 && (uses.keys || uses.tasks || uses.sandboxes))
		r = error_set(err, EBUSY,
			      "store: tenant %s has %llu key(s) not revoked, %llu task(s) not "
			      "final and %llu sandbox(es) not ended",
			      name, (unsigned long long)uses.keys, (unsigned long long)uses.tasks,
			      (unsigned long long)uses.sandboxes);
	if (r == 0)
		r = st->ops->tenant_delete(st, name, now, err);
	return op_end(st, r, err);
}

/* ---- API keys ---------------------------------------------------------- */

int store_key_insert(struct store *st, const struct key_record *k, struct error *err)
{
	if (!k || !k->id[0] || !memchr(k->id, '\0', sizeof(k->id)))
		return error_set(err, EINVAL, "store: a key's id is 1..%d bytes", KEY_ID_SIZE - 1);
	int r = check_tenant(k->tenant, sizeof(k->tenant), k->id, err);
	if (r < 0)
		return r;
	if (!key_role_name(k->role))
		return error_set(err, EINVAL, "store: key %s: role %d is no role", k->id,
				 (int)k->role);
	if (k->expires_at < 0)
		return error_set(err, EINVAL, "store: key %s expires at %lld", k->id,
				 (long long)k->expires_at);
	if (k->label && strnlen(k->label, KEY_LABEL_MAX + 1) > KEY_LABEL_MAX)
		return error_set(err, EINVAL, "store: the label of key %s passes %d bytes", k->id,
				 KEY_LABEL_MAX);
	struct tenant_record t = {0};
	r = op_begin(st, err);
	if (r < 0)
		return r;
	/* under the write lock: the tenant cannot be deleted until the commit */
	r = st->ops->tenant_get(st, k->tenant, &t, err);
	tenant_record_release(&t);
	if (r == 0)
		r = st->ops->key_insert(st, k, err);
	return op_end(st, r, err);
}

int store_key_get(struct store *st, const char *id, struct key_record *ret, struct error *err)
{
	if (!id || !ret)
		return error_set(err, EINVAL, "store: no key id given");
	return st->ops->key_get(st, id, ret, err);
}

int store_key_list(struct store *st, const char *tenant,
		   int (*fn)(const struct key_record *k, void *data), void *data, struct error *err)
{
	if (!fn)
		return error_set(err, EINVAL, "store: listing keys needs a function");
	if (tenant && !tenant_name_is_valid(tenant))
		return check_tenant(tenant, TENANT_NAME_SIZE, "listing keys", err);
	struct key_record *v = NULL;
	size_t n = 0;
	int r = st->ops->key_list(st, tenant, &v, &n, err);
	/* fn runs after the backend is done reading, so it may call the store */
	for (size_t i = 0; r == 0 && i < n; i++) {
		int q = fn(&v[i], data);
		r = q < 0 ? q : 0;
	}
	store_keys_free(v, n);
	return r;
}

int store_key_revoke(struct store *st, const char *id, int64_t now, struct error *err)
{
	if (!id)
		return error_set(err, EINVAL, "store: no key id given");
	if (now <= 0)
		return error_set(err, EINVAL, "store: key %s cannot be revoked at %lld", id,
				 (long long)now);
	struct key_record k = {0};
	int r = op_begin(st, err);
	if (r < 0)
		return r;
	r = st->ops->key_get(st, id, &k, err);
	if (r == 0 && k.revoked_at)
		r = error_set(err, ESTALE, "store: key %s was revoked already, at %lld", id,
			      (long long)k.revoked_at);
	if (r == 0)
		r = st->ops->key_revoke(st, id, now, err);
	key_record_release(&k);
	return op_end(st, r, err);
}

int store_key_count(struct store *st, uint64_t *ret, struct error *err)
{
	if (!ret)
		return error_set(err, EINVAL, "store: counting keys needs somewhere to put it");
	return st->ops->key_count(st, ret, err);
}
