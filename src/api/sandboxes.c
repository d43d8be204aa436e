/*
 * sandboxes.c - the handlers of /v1/sandboxes and of a sandbox's own
 * lifecycle: list, create, get, delete, timeout, pause, resume; the
 * fleet's result codes as API errors; the sandbox object. exec and its
 * processes are in sandbox-exec.c, files in sandbox-files.c.
 *
 * The fleet is reached only through c->ctx->fleet_ops (fleet/fleet.h).
 */
#include "api/api-internal.h"
#include "api/image-choice.h"
#include "api/sandbox-request.h"
#include "egress/policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the fleet's answers as API errors ---------------------------------- */

int api_shim_error(struct api_error *e, int errnum, const char *message, const char *what)
{
	bool file = what && strcmp(what, "file") == 0;
	bool proc = what && strcmp(what, "process") == 0;
	const char *m = message && *message ? message : strerror(errnum);
	switch (errnum) {
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
		if (proc)
			return api_error_set(e, API_ERR_PROCESS_NOT_FOUND, NULL, "%s", m);
		return api_error_set(e, API_ERR_FILE_NOT_FOUND, file ? "path" : NULL, "%s", m);
	case ESRCH:
		return api_error_set(e, API_ERR_PROCESS_ENDED, NULL, "%s", m);
	case EBUSY:
		return api_error_set(e, API_ERR_SANDBOX_PAUSED, NULL, "the sandbox is paused");
	case EAGAIN:
		return api_error_set(e, API_ERR_TOO_MANY_PROCESSES, NULL, "%s", m);
	case EACCES:
	case EPERM:
	case EROFS:
		return api_error_set(e, API_ERR_PERMISSION_DENIED, file ? "path" : NULL, "%s", m);
	case EISDIR:
	case ENXIO:
		return api_error_set(e, API_ERR_NOT_A_FILE, file ? "path" : NULL, "%s", m);
	case EINVAL:
		if (file)
			return api_error_set(e, API_ERR_NOT_A_FILE, "path", "%s", m);
		return api_error_set(e, API_ERR_INVALID_FIELD, NULL, "%s", m);
	case ENOSPC:
	case EDQUOT:
		return api_error_set(e, API_ERR_NO_SPACE, NULL, "the sandbox's disk is full");
	case E2BIG:
	case ENAMETOOLONG:
		return api_error_set(e, API_ERR_INVALID_FIELD, file ? "path" : NULL, "%s", m);
	case EPIPE:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECANCELED: /* the sandbox is ending */
		return api_error_set(e, API_ERR_SANDBOX_ENDED, NULL, "the sandbox has ended");
	default: {
		char log[ERROR_MSG_MAX + 8];
		snprintf(log, sizeof(log), "shim: %s", m);
		return api_error_internal(e, errnum, log);
	}
	}
}

int api_fleet_error(struct api_call *c, int r, const struct error *err, const char *what)
{
	switch (r) {
	case -ENOMEM:
		return r;
	case -ENOENT:
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "%s", err->msg);
	case -ESTALE:
		return api_error_set(c->err, API_ERR_SANDBOX_ENDED, NULL, "%s", err->msg);
	case -EBUSY:
		return api_error_set(c->err, API_ERR_SANDBOX_PAUSED, NULL, "%s", err->msg);
	case -EREMOTEIO:
		return api_shim_error(c->err, err->code, err->msg, what);
	case -ECHILD:
		return api_error_set(c->err, API_ERR_SANDBOX_FAILED, NULL,
				     "the sandbox could not be built: %s", err->msg);
	case -EUSERS:
		return api_error_set(c->err, API_ERR_TOO_MANY_REQUESTS, NULL, "%s", err->msg);
	case -EDQUOT:
		return api_error_set(c->err, API_ERR_HOST_FULL, NULL, "%s", err->msg);
	default:
		return api_error_internal(c->err, -r, err->msg);
	}
}

const struct fleet_ops *api_fleet(struct api_call *c)
{
	if (!c->ctx->fleet_ops)
		api_error_internal(c->err, ENOSYS, "this daemon serves no sandboxes");
	return c->ctx->fleet_ops;
}

int api_sandbox_live(struct api_call *c, const struct fleet_ops *ops, bool need_running)
{
	struct sandbox_record s = {0};
	struct error err = {0};
	int r = ops->get_live(c->ctx->fleet, c->ctx->store, c->id, need_running, &s, &err);
	sandbox_record_release(&s);
	return r < 0 ? api_fleet_error(c, r, &err, "sandbox") : 0;
}

/* ---- answers ----------------------------------------------------------------- */

int api_respond_json(struct api_call *c, int status, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return -ENOMEM;
	api_json_response(c->res, status, text);
	return 0;
}

/* Answer with the stored record of sandbox c->id. */
static int respond_sandbox(struct api_call *c, int status)
{
	struct sandbox_record s = {0};
	struct error err = {0};
	int r = store_sandbox_get(c->ctx->store, c->id, &s, &err);
	if (r < 0)
		return api_error_internal(c->err, -r, err.msg);
	char *text = api_sandbox_json(&s);
	sandbox_record_release(&s);
	if (!text)
		return -ENOMEM;
	api_json_response(c->res, status, text);
	return 0;
}

/* ---- list ----------------------------------------------------------------------- */

struct list_ctx {
	struct buf b; /* the "sandboxes" array, written as it is read */
	char last[SANDBOX_ID_SIZE];
	size_t n;
};

static int list_one(const struct sandbox_record *s, void *data)
{
	struct list_ctx *l = data;
	char *text = api_sandbox_json(s);
	if (!text)
		return -ENOMEM;
	buf_puts(&l->b, l->n ? "," : "");
	buf_puts(&l->b, text);
	free(text);
	snprintf(l->last, sizeof(l->last), "%s", s->id);
	l->n++;
	return l->b.failed;
}

/* status=: running,paused,ended; default running,paused. */
static int parse_statuses(struct api_call *c, uint32_t *ret)
{
	const char *v = api_query_get(c->query, "status");
	*ret = SANDBOX_STATUS_BIT(SANDBOX_RUNNING) | SANDBOX_STATUS_BIT(SANDBOX_PAUSED);
	if (!v)
		return 0;
	char buf[128]; /* the caller checked the length */
	snprintf(buf, sizeof(buf), "%s", v);
	uint32_t statuses = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		enum sandbox_status s;
		if (sandbox_status_parse(tok, &s) < 0 || s == SANDBOX_POOLED)
			return api_error_set(c->err, API_ERR_INVALID_FIELD, "status",
					     "status must be running, paused or ended, "
					     "comma-separated");
		statuses |= SANDBOX_STATUS_BIT(s);
	}
	if (!statuses) /* "" or ",": the store would read no statuses as all of them */
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "status",
				     "status must be running, paused or ended, comma-separated");
	*ret = statuses;
	return 0;
}

int api_sandboxes_list(struct api_call *c)
{
	uint32_t statuses;
	int64_t limit;
	const char *status = api_query_get(c->query, "status");
	if (status && strlen(status) >= 128)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "status", "status is too long");
	const char *after = api_query_get(c->query, "after");
	if (after && !sandbox_id_is_valid(after))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "after",
				     "after must be a sandbox id");
	int r =
	    api_query_int(c->query, "limit", 1, STORE_LIST_MAX, API_LIST_DEFAULT, &limit, c->err);
	if (r < 0 || (r = parse_statuses(c, &statuses)) < 0)
		return r;
	struct list_ctx l = {0};
	struct sandbox_filter f = {.statuses = statuses, .after_id = after, .limit = (size_t)limit};
	if ((r = api_list_tenant(c, &f.tenant)) < 0)
		return r;
	struct error err = {0};
	buf_puts(&l.b, "{\"sandboxes\":[");
	r = store_sandbox_list(c->ctx->store, &f, list_one, &l, &err);
	if (r < 0) {
		buf_release(&l.b);
		if (r == -ENOENT)
			return api_error_set(c->err, API_ERR_INVALID_FIELD, "after",
					     "no sandbox %s", after);
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, err.msg);
	}
	buf_puts(&l.b, "],\"next\":");
	json_put_str_or_null(&l.b, l.n == (size_t)limit ? l.last : NULL);
	buf_puts(&l.b, "}");
	return api_respond(c, 200, API_JSON, &l.b);
}

/* ---- one sandbox -------------------------------------------------------------- */

/*
 * A sandbox's timeout against its tenant's quota timeout_s: one asked for
 * past it is refused; the default is cut to it.
 */
static int check_timeout(struct api_call *c, const struct quota *limit, int64_t *timeout_ms,
			 bool given)
{
	uint64_t bound = limit->v[QUOTA_TIMEOUT_S];
	if (bound == QUOTA_NONE || (uint64_t)*timeout_ms <= bound * 1000)
		return 0;
	if (!given) {
		*timeout_ms = (int64_t)(bound * 1000);
		return 0;
	}
	struct quota use = {0}, ask = {0};
	ask.v[QUOTA_TIMEOUT_S] = ((uint64_t)*timeout_ms + 999) / 1000;
	return api_quota_refuse(c, QUOTA_TIMEOUT_S, limit, &use, &ask);
}

/* The fleet refused a create past the tenant's quota over: 429, with its use now. */
static int refuse_create(struct api_call *c, const struct fleet_ops *ops, enum quota_id over,
			 const struct quota *limit, const struct sandbox_request *sr)
{
	struct quota use = {0}, ask = {0};
	if (ops->tenant_use)
		ops->tenant_use(c->ctx->fleet, c->who.tenant, &use);
	ask.v[QUOTA_SANDBOXES] = 1;
	ask.v[QUOTA_MEMORY_MB] = sr->memory_bytes >> 20;
	ask.v[QUOTA_CPUS] = sr->cpu_milli;
	ask.v[QUOTA_DISK_MB] = sr->disk_bytes >> 20;
	return api_quota_refuse(c, over, limit, &use, &ask);
}

int api_sandboxes_create(struct api_call *c)
{
	struct sandbox_request sr = {0};
	struct quota limit;
	int r = sandbox_request_parse(c->req->body, c->req->body_len, &sr, c->err);
	if (r < 0)
		return r;
	struct image_choice image;
	if ((r = api_image_apply(c, &sr.spec_json, false, &image)) < 0 ||
	    (r = api_check_host_limits(c, sr.memory_bytes, sr.disk_bytes, 0, sr.pids)) < 0 ||
	    (r = api_call_limits(c, c->who.tenant, &limit)) < 0 ||
	    (r = check_timeout(c, &limit, &sr.timeout_ms, sr.timeout_given)) < 0 ||
	    (r = api_check_network(c, sr.network)) < 0 ||
	    (r = api_check_secrets(c, sr.secrets_json != NULL)) < 0) {
		sandbox_request_release(&sr);
		return r;
	}
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops) {
		sandbox_request_release(&sr);
		return -EIO;
	}
	enum quota_id over = QUOTA_COUNT;
	struct fleet_spec spec = {
	    .spec_json = sr.spec_json,
	    .metadata_json = sr.metadata_json,
	    .timeout_ms = sr.timeout_ms,
	    /* the default pool's, or its image's (agentboxd --pool IMAGE=N) */
	    .default_limits = sr.default_limits && (!image.image || image.poolable),
	    .pool_image = image.image ? image.config : NULL,
	    .memory_bytes = sr.memory_bytes,
	    .secrets_json = sr.secrets_json,
	    .network = sr.network != EGRESS_NONE,
	    .tenant = c->who.tenant,
	    .quota = &limit,
	    .over = &over};
	struct sandbox_record s = {0};
	struct error err = {0};
	r = ops->create(c->ctx->fleet, c->ctx->store, &spec, c->now, &s, &err);
	if (r == -EXFULL)
		r = refuse_create(c, ops, over, &limit, &sr);
	sandbox_request_release(&sr);
	if (r == -EINVAL)
		return r;
	if (r < 0)
		return api_fleet_error(c, r, &err, "sandbox");
	snprintf(c->id, sizeof(c->id), "%s", s.id); /* the audit log's target */
	char *text = api_sandbox_json(&s);
	sandbox_record_release(&s);
	if (!text)
		return -ENOMEM;
	api_json_response(c->res, 201, text);
	return 0;
}

int api_sandbox_get(struct api_call *c)
{
	struct sandbox_record s = {0};
	struct error err = {0};
	int r = store_sandbox_get(c->ctx->store, c->id, &s, &err);
	if (r == 0 && s.status == SANDBOX_POOLED)
		r = -ENOENT;
	if (r < 0) {
		sandbox_record_release(&s);
		if (r == -ENOENT)
			return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no sandbox %s",
					     c->id);
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, err.msg);
	}
	char *text = api_sandbox_json(&s);
	sandbox_record_release(&s);
	if (!text)
		return -ENOMEM;
	api_json_response(c->res, 200, text);
	return 0;
}

int api_sandbox_delete(struct api_call *c)
{
	const struct fleet_ops *ops = api_fleet(c);
	struct error err = {0};
	if (!ops)
		return -EIO;
	int r = ops->remove(c->ctx->fleet, c->ctx->store, c->id, &err);
	return r < 0 ? api_fleet_error(c, r, &err, "sandbox") : respond_sandbox(c, 200);
}

int api_sandbox_timeout(struct api_call *c)
{
	struct error err = {0};
	int64_t ms = 0;
	int r = sandbox_timeout_parse(c->req->body, c->req->body_len, &ms, c->err);
	if (r < 0)
		return r;
	struct sandbox_record s = {0};
	struct quota limit;
	r = store_sandbox_get(c->ctx->store, c->id, &s, &err);
	if (r == 0)
		r = api_call_limits(c, s.tenant, &limit);
	else if (r != -ENOENT) /* none: the fleet says so, below */
		r = api_error_internal(c->err, -r, err.msg);
	else
		r = 0, quota_none(&limit);
	sandbox_record_release(&s);
	if (r < 0 || (r = check_timeout(c, &limit, &ms, true)) < 0)
		return r;
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops)
		return -EIO;
	r = ops->set_expiry(c->ctx->fleet, c->ctx->store, c->id, c->now + ms, &err);
	return r < 0 ? api_fleet_error(c, r, &err, "sandbox") : respond_sandbox(c, 200);
}

/* POST .../pause and .../resume */
int api_sandbox_pause(struct api_call *c)
{
	const struct fleet_ops *ops = api_fleet(c);
	struct error err = {0};
	if (!ops)
		return -EIO;
	bool pause = c->match->route->id == API_ROUTE_SANDBOX_PAUSE;
	int r = ops->pause(c->ctx->fleet, c->ctx->store, c->id, pause, &err);
	return r < 0 ? api_fleet_error(c, r, &err, "sandbox") : respond_sandbox(c, 200);
}

/* ---- the sandbox object --------------------------------------------------------- */

int api_error_response(struct api_response *ret, enum api_error_code code, const char *field,
		       const char *fmt, ...)
{
	struct api_error e = {.code = code};
	snprintf(e.field, sizeof(e.field), "%s", field ? field : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	api_response_release(ret);
	memset(ret, 0, sizeof(*ret));
	int r = api_error_respond(&e, ret);
	if (r < 0) {
		ret->status = 500;
		ret->content_type = API_JSON;
	}
	return r;
}

void api_json_response(struct api_response *ret, int status, char *text)
{
	api_response_release(ret);
	memset(ret, 0, sizeof(*ret));
	if (!text) {
		(void)api_error_response(ret, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(ret->log, sizeof(ret->log), "out of memory");
		return;
	}
	ret->status = status;
	ret->content_type = API_JSON;
	ret->body = text;
	ret->body_len = strlen(text);
}

char *api_sandbox_json(const struct sandbox_record *s)
{
	struct buf b = {0};
	const char *limits = NULL;
	size_t limits_len = 0;
	buf_puts(&b, "{\"id\":");
	json_put_strz(&b, s->id);
	buf_puts(&b, ",\"tenant\":");
	json_put_strz(&b, s->tenant);
	buf_puts(&b, ",\"status\":");
	json_put_strz(&b, sandbox_status_name(s->status));
	buf_puts(&b, ",\"created_at\":");
	api_render_time(&b, s->created_at);
	buf_puts(&b, ",\"expires_at\":");
	api_render_time(&b, s->expires_at);
	buf_puts(&b, ",\"ended_at\":");
	api_render_time(&b, s->ended_at);
	buf_puts(&b, ",\"end_reason\":");
	json_put_str_or_null(&b, s->end_reason);
	buf_puts(&b, ",\"end_detail\":");
	json_put_str_or_null(&b, s->end_detail);
	buf_puts(&b, ",\"limits\":");
	if (s->spec_json && json_member_raw(s->spec_json, "limits", &limits, &limits_len) == 0) {
		/* the stored limits without the task-only timeout_s */
		json_t *l = json_loadb(limits, limits_len, 0, NULL);
		json_object_del(l, "timeout_s");
		json_put(&b, l ? l : json_object());
		json_decref(l);
	} else {
		buf_puts(&b, "{}");
	}
	buf_puts(&b, ",\"network\":");
	api_render_network(&b, s->spec_json);
	api_render_secrets(&b, s->spec_json);
	api_render_image(&b, s->spec_json);
	buf_puts(&b, ",\"metadata\":");
	buf_puts(&b, s->metadata_json ? s->metadata_json : "{}");
	buf_puts(&b, "}");
	char *text = NULL;
	size_t len;
	return buf_steal(&b, &text, &len) == 0 ? text : NULL;
}
