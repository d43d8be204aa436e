/*
 * tasks.c - the handlers of /v1/tasks: create, get, list, cancel, and the
 * non-streaming form of events. Logs are in logs.c.
 */
#include "api/api-internal.h"
#include "api/image-choice.h"
#include "api/inputs.h"

#include "api/task-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How often a new id is drawn when the store says one is taken. */
#define ID_TRIES 4

/* Read task c->id and answer with it. */
static int respond_task(struct api_call *c, int status)
{
	struct task t = {0};
	struct error se = {0};
	int r = store_task_get(c->ctx->store, c->id, &t, &se);
	if (r < 0)
		return api_store_error(c, r, &se);
	struct buf b = {0};
	api_render_task(&b, &t, c->ctx->state_dir);
	task_release(&t);
	return api_respond(c, status, API_JSON, &b);
}

int api_task_get(struct api_call *c)
{
	return respond_task(c, 200);
}

/*
 * Is there room in the queue (ctx->host->queued_max)? Counted before the
 * insert, not with it: submits at the same moment may pass it together,
 * by at most one each (one per connection).
 */
static int check_queue(struct api_call *c, struct error *se)
{
	const struct api_host_limits *h = c->ctx->host;
	uint64_t queued = 0;
	if (!h || !h->queued_max)
		return 0;
	int r = store_task_count(c->ctx->store, TASK_QUEUED, &queued, se);
	if (r < 0)
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, se->msg);
	if (queued >= h->queued_max)
		return api_error_set(c->err, API_ERR_QUEUE_FULL, NULL,
				     "%llu tasks are queued, as many as this host keeps waiting; "
				     "try again when some have started",
				     (unsigned long long)queued);
	return 0;
}

/*
 * A task with no timeout, under a tenant's quota timeout_s, gets that as
 * its timeout: its canonical spec is made again with it.
 */
static int default_timeout(struct task_request *tr, uint64_t bound_s, struct api_error *e)
{
	json_t *spec = json_loads(tr->spec_json, 0, NULL);
	json_t *limits = json_object_get(spec, "limits");
	int r = limits && json_object_set_new(limits, "timeout_s",
					      json_integer((json_int_t)bound_s)) == 0
		    ? 0
		    : -ENOMEM;
	char *text = r == 0 ? json_dumps(spec, JSON_COMPACT) : NULL;
	json_decref(spec);
	struct task_request again = {0};
	if (!text || (r = task_request_from_spec_json(text, &again, e)) < 0) {
		free(text);
		return r < 0 ? r : -ENOMEM;
	}
	free(text);
	free(tr->spec_json);
	tr->spec_json = again.spec_json;
	tr->spec_len = again.spec_len;
	tr->timeout_ms = again.timeout_ms;
	again.spec_json = NULL;
	task_request_release(&again);
	return 0;
}

/*
 * A task against its tenant's quotas, before it is queued: its timeout
 * (defaulted to the bound), and what it would hold once running, alone
 * (one that could never start is refused now, not queued for ever).
 */
static int check_task_quota(struct api_call *c, const struct quota *limit, struct task_request *tr)
{
	uint64_t bound = limit->v[QUOTA_TIMEOUT_S];
	struct quota none = {0}, ask = {0};
	enum quota_id over;
	if (bound != QUOTA_NONE && !tr->timeout_ms) {
		int r = default_timeout(tr, bound, c->err);
		if (r < 0)
			return r;
	}
	ask.v[QUOTA_TIMEOUT_S] = (tr->timeout_ms + 999) / 1000;
	ask.v[QUOTA_TASKS_RUNNING] = 1;
	ask.v[QUOTA_MEMORY_MB] = tr->memory_bytes >> 20;
	ask.v[QUOTA_CPUS] = tr->cpu_milli;
	ask.v[QUOTA_DISK_MB] = tr->disk_bytes >> 20;
	if (!quota_check(limit, &none, &ask, &over))
		return api_quota_refuse(c, over, limit, &none, &ask);
	return 0;
}

/*
 * The spec once its inputs are taken (a tar's members are files now),
 * checked again as a stored one: the count of files, a file inside
 * another's path. 0, or -EINVAL with c->err naming the file.
 */
static int recheck(struct api_call *c, struct task_request *tr)
{
	struct task_request again = {0};
	int r = task_request_from_spec_json(tr->spec_json, &again, c->err);
	task_request_release(&again);
	return r;
}

/*
 * Task t takes the inputs tr names (inputs.h), with no store connection
 * held meanwhile (a tar input is read and written whole, up to
 * SPEC_FILE_INPUT_MAX), and the store taken again for the insert. 0, or
 * an error in c->err.
 */
static int take_inputs(struct api_call *c, struct task *t, struct task_request *tr)
{
	if (c->ctx->store_release)
		c->ctx->store_release(c->ctx);
	int r = api_inputs_take(c->ctx->state_dir, t->tenant, t->id, c->now,
				api_input_ttl_s(c->ctx), &tr->spec_json, c->err);
	if (!c->ctx->store && c->ctx->store_acquire)
		c->ctx->store_acquire(c->ctx);
	if (r == 0 && !c->ctx->store) {
		api_inputs_give_back(c->ctx->state_dir, t->tenant, t->id);
		return api_error_internal(c->err, EAGAIN, "no store connection after the inputs");
	}
	return r;
}

/* tr's spec_json back to the text asked (taking its inputs changed it). 0 or -ENOMEM. */
static int respec(struct task_request *tr, const char *asked)
{
	char *copy = strdup(asked);
	if (!copy)
		return -ENOMEM;
	free(tr->spec_json);
	tr->spec_json = copy;
	tr->spec_len = strlen(copy);
	return 0;
}

/* Remove task id's directory if it is empty: made for a task that was not stored. */
static void forget_dir(const char *state_dir, const char *id)
{
	char dir[PATH_MAX];
	if (layout_task_dir(dir, sizeof(dir), state_dir, id) == 0)
		(void)rmdir(dir);
}

int api_tasks_create(struct api_call *c)
{
	struct quota limit;
	struct task_request tr;
	int r = task_request_parse(c->req->body, c->req->body_len, &tr, c->err);
	if (r < 0)
		return r;
	if ((r = api_image_apply(c, &tr.spec_json, true, NULL)) < 0 ||
	    (r = api_check_host_limits(c, tr.memory_bytes, tr.disk_bytes, tr.state_bytes,
				       tr.pids)) < 0) {
		task_request_release(&tr);
		return r;
	}
	struct error se = {0};
	if ((r = api_check_network(c, tr.network)) < 0 ||
	    (r = api_check_secrets(c, tr.secrets_json != NULL)) < 0 ||
	    (r = check_queue(c, &se)) < 0 || (r = api_call_limits(c, c->who.tenant, &limit)) < 0 ||
	    (r = check_task_quota(c, &limit, &tr)) < 0) {
		task_request_release(&tr);
		return r;
	}
	struct task t = {.max_attempts = tr.max_attempts,
			 .retry_on = tr.retry_on,
			 .created_at = c->now,
			 .spec_json = tr.spec_json};
	uint64_t queued = 0;
	snprintf(t.tenant, sizeof(t.tenant), "%s", c->who.tenant); /* the caller's */
	_cleanup_free_ char *asked = tr.ninputs ? strdup(tr.spec_json) : NULL;
	if (tr.ninputs && !asked) {
		task_request_release(&tr);
		return -ENOMEM;
	}
	for (int i = 0; i < ID_TRIES; i++) {
		r = task_id_new(t.id);
		if (r == 0 && tr.secrets_json)
			r = api_secrets_keep(c->ctx->state_dir, t.id, tr.secrets_json, &se);
		bool kept = r == 0 && tr.secrets_json;
		/* its inputs, into its directory before its row: see inputs.h */
		bool took = r == 0 && tr.ninputs;
		if (took && i > 0 && (r = respec(&tr, asked)) < 0) /* as asked: a retry */
			took = false;
		if (took && (r = take_inputs(c, &t, &tr)) == 0 && (r = recheck(c, &tr)) < 0)
			api_inputs_give_back(c->ctx->state_dir, t.tenant, t.id);
		if (took && r < 0) {
			if (kept)
				layout_secrets_forget(c->ctx->state_dir, t.id, true);
			forget_dir(c->ctx->state_dir, t.id);
			task_request_release(&tr);
			return r;
		}
		t.spec_json = tr.spec_json;
		if (r == 0)
			r = store_task_insert_within(c->ctx->store, &t, limit.v[QUOTA_TASKS_QUEUED],
						     &queued, &se);
		if (r == 0 && took)
			api_inputs_commit(c->ctx->state_dir, t.id);
		if (r < 0 && took)
			api_inputs_give_back(c->ctx->state_dir, t.tenant, t.id);
		if (r < 0 && kept) /* ours: the file, and the directory made for it */
			layout_secrets_forget(c->ctx->state_dir, t.id, true);
		if (r < 0 && took) /* the directory the inputs were taken into, if it is empty */
			forget_dir(c->ctx->state_dir, t.id);
		if (r != -EEXIST)
			break;
	}
	task_request_release(&tr);
	if (r == -EDQUOT) {
		struct quota use = {0}, ask = {0};
		use.v[QUOTA_TASKS_QUEUED] = queued;
		ask.v[QUOTA_TASKS_QUEUED] = 1;
		return api_quota_refuse(c, QUOTA_TASKS_QUEUED, &limit, &use, &ask);
	}
	if (r < 0)
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, se.msg);
	memcpy(c->id, t.id, TASK_ID_SIZE);
	if (c->ctx->task_submitted)
		c->ctx->task_submitted(c->ctx->hook_data);
	return respond_task(c, 201);
}

int api_task_cancel(struct api_call *c)
{
	enum task_status status;
	struct error se = {0};
	int r = store_task_cancel(c->ctx->store, c->id, c->now, &status, &se);
	if (r == -EALREADY) {
		struct task t = {0};
		r = store_task_get(c->ctx->store, c->id, &t, &se);
		const char *name = r == 0 ? task_status_name(t.status) : "final";
		api_error_set(c->err, API_ERR_CONFLICT, NULL,
			      "task %s has already ended (%s): there is nothing to cancel", c->id,
			      name);
		task_release(&t);
		return -EINVAL;
	}
	if (r < 0)
		return api_store_error(c, r, &se);
	if (status == TASK_CANCELLED) {
		layout_secrets_forget(c->ctx->state_dir, c->id, false);
		layout_inputs_forget(c->ctx->state_dir, c->id);
	}
	if (status == TASK_RUNNING && c->ctx->task_cancel_requested)
		c->ctx->task_cancel_requested(c->id, c->ctx->hook_data);
	return respond_task(c, 200);
}

/*
 * An ended task's rows (one transaction), then its directory: the order
 * of sched/retain.h, so that a crash between leaves a directory no row
 * names (removed at the next start), never a row without its files.
 */
int api_task_delete(struct api_call *c)
{
	struct error se = {0};
	int r = store_task_delete(c->ctx->store, c->id, &se);
	if (r == -EBUSY) {
		struct task t = {0};
		r = store_task_get(c->ctx->store, c->id, &t, &se);
		const char *name = r == 0 ? task_status_name(t.status) : "not ended";
		api_error_set(c->err, API_ERR_CONFLICT, NULL,
			      "task %s is %s: cancel it first, and remove it once it has ended",
			      c->id, name);
		task_release(&t);
		return -EINVAL;
	}
	if (r < 0)
		return api_store_error(c, r, &se);
	char dir[4096], why[ERROR_MSG_MAX];
	_cleanup_close_ int tasks = -1;
	if (c->ctx->state_dir &&
	    (r = layout_state_file(dir, sizeof(dir), c->ctx->state_dir, LAYOUT_TASKS)) == 0 &&
	    (tasks = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 && errno != ENOENT)
		r = -errno;
	if (r == 0 && tasks >= 0)
		r = remove_tree_at(tasks, c->id);
	if (r < 0) {
		snprintf(why, sizeof(why),
			 "task %s is gone, but not all its files (they go at the daemon's next "
			 "start)",
			 c->id);
		return api_error_internal(c->err, -r, why);
	}
	struct buf b = {0};
	buf_printf(&b, "{\"id\":\"%s\",\"deleted\":true}", c->id);
	return api_respond(c, 200, API_JSON, &b);
}

/* "queued,running" into TASK_STATUS_BIT()s. */
static int parse_statuses(const char *s, uint32_t *ret, struct api_error *e)
{
	uint32_t bits = 0;
	for (const char *p = s;; p++) {
		size_t n = strcspn(p, ",");
		char name[16];
		enum task_status st;
		if (n == 0 || n >= sizeof(name))
			goto bad;
		memcpy(name, p, n);
		name[n] = '\0';
		if (task_status_parse(name, &st) < 0)
			goto bad;
		bits |= TASK_STATUS_BIT(st);
		p += n;
		if (*p == '\0')
			break;
	}
	*ret = bits;
	return 0;
bad:
	return api_error_set(e, API_ERR_INVALID_FIELD, "status",
			     "status must be a comma-separated list of queued, running, "
			     "succeeded, failed, oom_killed, timed_out, cancelled, lost");
}

struct page {
	struct buf *b;
	size_t n;
	char last[TASK_ID_SIZE];
	bool full; /* stopped at API_LIST_BODY_MAX */
};

static int add_task(const struct task *t, void *data)
{
	struct page *pg = data;
	size_t mark = pg->b->len;
	if (pg->n)
		buf_append(pg->b, ",", 1);
	api_render_task(pg->b, t, NULL);
	if (pg->b->failed == -E2BIG && pg->n > 0) {
		buf_truncate(pg->b, mark);
		pg->full = true;
		return -ECANCELED;
	}
	if (pg->b->failed)
		return pg->b->failed;
	pg->n++;
	memcpy(pg->last, t->id, TASK_ID_SIZE);
	return 0;
}

static int count_one(const struct task *t, void *data)
{
	(void)t;
	(*(size_t *)data)++;
	return 0;
}

int api_tasks_list(struct api_call *c)
{
	struct task_filter f = {0};
	int64_t limit;
	const char *status = api_query_get(c->query, "status");
	int r = status ? parse_statuses(status, &f.statuses, c->err) : 0;
	if (r == 0)
		r = api_query_int(c->query, "limit", 1, STORE_LIST_MAX, API_LIST_DEFAULT, &limit,
				  c->err);
	if (r < 0)
		return r;
	f.limit = (size_t)limit;
	if ((r = api_list_tenant(c, &f.tenant)) < 0)
		return r;
	f.after_id = api_query_get(c->query, "after");
	if (f.after_id && !task_id_is_valid(f.after_id))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "after",
				     "after must be a task id (the next of a previous page)");

	struct buf b = {.max = API_LIST_BODY_MAX};
	struct page pg = {.b = &b};
	struct error se = {0};
	buf_puts(&b, "{\"tasks\":[");
	r = store_task_list(c->ctx->store, &f, add_task, &pg, &se);
	if (r == 0 && !pg.full && pg.n == f.limit) { /* is there more? */
		size_t more = 0;
		struct task_filter probe = {
		    .statuses = f.statuses, .tenant = f.tenant, .after_id = pg.last, .limit = 1};
		r = store_task_list(c->ctx->store, &probe, count_one, &more, &se);
		pg.full = more > 0;
	}
	if (r < 0 && r != -ECANCELED) {
		buf_release(&b);
		if (r == -ENOENT && f.after_id)
			return api_error_set(c->err, API_ERR_INVALID_FIELD, "after",
					     "no task %s to page after", f.after_id);
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, se.msg);
	}
	b.max = 0;
	buf_puts(&b, "],\"next\":");
	json_put_str_or_null(&b, pg.full ? pg.last : NULL);
	buf_puts(&b, "}");
	return api_respond(c, 200, API_JSON, &b);
}

static int add_event(const struct task_event *ev, void *data)
{
	struct page *pg = data;
	size_t mark = pg->b->len;
	if (pg->n)
		buf_append(pg->b, ",", 1);
	api_render_event(pg->b, ev);
	if (pg->b->failed == -E2BIG && pg->n > 0) {
		buf_truncate(pg->b, mark);
		return -ECANCELED;
	}
	if (pg->b->failed)
		return pg->b->failed;
	pg->n++;
	return 0;
}

int api_task_events(struct api_call *c)
{
	int64_t after, limit;
	int r = api_query_int(c->query, "after", 0, INT64_MAX, 0, &after, c->err);
	if (r == 0)
		r = api_query_int(c->query, "limit", 1, STORE_LIST_MAX, API_EVENTS_DEFAULT, &limit,
				  c->err);
	if (r < 0)
		return r;
	struct task t = {0};
	struct error se = {0};
	r = store_task_get(c->ctx->store, c->id, &t, &se);
	task_release(&t);
	if (r < 0)
		return api_store_error(c, r, &se);

	struct buf b = {.max = API_LIST_BODY_MAX};
	struct page pg = {.b = &b};
	buf_puts(&b, "{\"events\":[");
	r = store_events_list(c->ctx->store, c->id, after, (size_t)limit, add_event, &pg, &se);
	if (r < 0 && r != -ECANCELED) {
		buf_release(&b);
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, se.msg);
	}
	b.max = 0;
	buf_puts(&b, "]}");
	return api_respond(c, 200, API_JSON, &b);
}
