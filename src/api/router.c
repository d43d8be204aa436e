/*
 * router.c - the route table and api_handle(): auth, routing, the checks
 * every route shares, then the route's handler. Errors from any of these
 * become the one error response of errors.c.
 *
 * Order of checks (the first failing one answers): auth (401; skipped on
 * a public route's path), route (404, then 405 with Allow), body size
 * (413), content type of a JSON body (415), the {id} (400 invalid_id),
 * query parameters (400), then the handler.
 */
#include "base/fileio.h"
#include "base/parse.h"
#include "api/api-internal.h"

#include "auth/key.h"
#include "base/cleanup.h"
#include "egress/policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Takes a JSON body: 415 unless its Content-Type is application/json. */
#define ROUTE_JSON_BODY 0x100u
/* An admin's alone: 403 for a member. */
#define ROUTE_ADMIN 0x200u
/* The handler reads the query itself (repeated parameters: a terminal's GET). */
#define ROUTE_OWN_QUERY 0x400u

static const struct api_route routes[API_ROUTE_COUNT] = {
    {API_ROUTE_HEALTHZ, "GET", "/healthz", API_ROUTE_PUBLIC},
    {API_ROUTE_TASKS_LIST, "GET", "/v1/tasks", 0},
    {API_ROUTE_TASKS_CREATE, "POST", "/v1/tasks", ROUTE_JSON_BODY},
    {API_ROUTE_TASK_GET, "GET", "/v1/tasks/{id}", 0},
    {API_ROUTE_TASK_CANCEL, "POST", "/v1/tasks/{id}/cancel", 0},
    {API_ROUTE_TASK_EVENTS, "GET", "/v1/tasks/{id}/events", 0},
    {API_ROUTE_TASK_LOGS, "GET", "/v1/tasks/{id}/logs", 0},
    {API_ROUTE_SANDBOXES_LIST, "GET", "/v1/sandboxes", 0},
    {API_ROUTE_SANDBOXES_CREATE, "POST", "/v1/sandboxes", ROUTE_JSON_BODY},
    {API_ROUTE_SANDBOX_GET, "GET", "/v1/sandboxes/{id}", 0},
    {API_ROUTE_SANDBOX_DELETE, "DELETE", "/v1/sandboxes/{id}", 0},
    {API_ROUTE_SANDBOX_TIMEOUT, "POST", "/v1/sandboxes/{id}/timeout", ROUTE_JSON_BODY},
    {API_ROUTE_SANDBOX_PAUSE, "POST", "/v1/sandboxes/{id}/pause", 0},
    {API_ROUTE_SANDBOX_RESUME, "POST", "/v1/sandboxes/{id}/resume", 0},
    {API_ROUTE_SANDBOX_EXEC, "POST", "/v1/sandboxes/{id}/exec", ROUTE_JSON_BODY},
    {API_ROUTE_SANDBOX_PROCESSES, "GET", "/v1/sandboxes/{id}/processes", 0},
    {API_ROUTE_SANDBOX_NETWORK, "GET", "/v1/sandboxes/{id}/network", 0},
    {API_ROUTE_SANDBOX_COMMIT, "POST", "/v1/sandboxes/{id}/commit", ROUTE_ADMIN | ROUTE_JSON_BODY},
    {API_ROUTE_PROCESS_OUTPUT, "GET", "/v1/sandboxes/{id}/processes/{pid}/output", 0},
    {API_ROUTE_PROCESS_KILL, "POST", "/v1/sandboxes/{id}/processes/{pid}/kill", 0},
    {API_ROUTE_FILES_GET, "GET", "/v1/sandboxes/{id}/files", 0},
    {API_ROUTE_FILES_PUT, "PUT", "/v1/sandboxes/{id}/files", API_ROUTE_RAW_BODY},
    {API_ROUTE_FILES_DELETE, "DELETE", "/v1/sandboxes/{id}/files", 0},
    {API_ROUTE_TENANTS_LIST, "GET", "/v1/tenants", ROUTE_ADMIN},
    {API_ROUTE_TENANTS_CREATE, "POST", "/v1/tenants", ROUTE_ADMIN | ROUTE_JSON_BODY},
    {API_ROUTE_TENANT_GET, "GET", "/v1/tenants/{id}", ROUTE_ADMIN},
    {API_ROUTE_TENANT_DELETE, "DELETE", "/v1/tenants/{id}", ROUTE_ADMIN},
    {API_ROUTE_TENANT_SET, "PATCH", "/v1/tenants/{id}", ROUTE_ADMIN | ROUTE_JSON_BODY},
    {API_ROUTE_KEYS_LIST, "GET", "/v1/keys", ROUTE_ADMIN},
    {API_ROUTE_KEYS_CREATE, "POST", "/v1/keys", ROUTE_ADMIN | ROUTE_JSON_BODY},
    {API_ROUTE_KEY_REVOKE, "DELETE", "/v1/keys/{id}", ROUTE_ADMIN},
    {API_ROUTE_ME, "GET", "/v1/me", 0},
    {API_ROUTE_AUDIT, "GET", "/v1/audit", ROUTE_ADMIN},
    {API_ROUTE_IMAGES_LIST, "GET", "/v1/images", 0},
    {API_ROUTE_IMAGES_IMPORT, "POST", "/v1/images/import", ROUTE_ADMIN | API_ROUTE_RAW_BODY},
    {API_ROUTE_IMAGES_BOOTSTRAP, "POST", "/v1/images/bootstrap", ROUTE_ADMIN | ROUTE_JSON_BODY},
    {API_ROUTE_IMAGES_PRUNE, "POST", "/v1/images/prune", ROUTE_ADMIN},
    /* before GET {ref}: ".../NAME/export" is an export (write the name with its tag) */
    {API_ROUTE_IMAGE_EXPORT, "GET", "/v1/images/{ref}/export", ROUTE_ADMIN},
    {API_ROUTE_IMAGE_GET, "GET", "/v1/images/{ref}", 0},
    {API_ROUTE_IMAGE_DELETE, "DELETE", "/v1/images/{ref}", ROUTE_ADMIN},
    {API_ROUTE_IMAGES_PULL, "POST", "/v1/images/pull", ROUTE_ADMIN | ROUTE_JSON_BODY},
    {API_ROUTE_TASK_ARTIFACTS, "GET", "/v1/tasks/{id}/artifacts", 0},
    {API_ROUTE_TASK_ARTIFACT, "GET", "/v1/tasks/{id}/artifacts/{path}", 0},
    {API_ROUTE_TASK_DELETE, "DELETE", "/v1/tasks/{id}", 0},
    {API_ROUTE_SANDBOX_EXEC_GET, "GET", "/v1/sandboxes/{id}/exec", ROUTE_OWN_QUERY},
    {API_ROUTE_INPUTS_CREATE, "POST", "/v1/inputs", API_ROUTE_RAW_BODY},
};

static int (*const handlers[API_ROUTE_COUNT])(struct api_call *c) = {
    [API_ROUTE_HEALTHZ] = api_healthz,
    [API_ROUTE_TASKS_LIST] = api_tasks_list,
    [API_ROUTE_TASKS_CREATE] = api_tasks_create,
    [API_ROUTE_TASK_GET] = api_task_get,
    [API_ROUTE_TASK_CANCEL] = api_task_cancel,
    [API_ROUTE_TASK_EVENTS] = api_task_events,
    [API_ROUTE_TASK_LOGS] = api_task_logs,
    [API_ROUTE_SANDBOXES_LIST] = api_sandboxes_list,
    [API_ROUTE_SANDBOXES_CREATE] = api_sandboxes_create,
    [API_ROUTE_SANDBOX_GET] = api_sandbox_get,
    [API_ROUTE_SANDBOX_DELETE] = api_sandbox_delete,
    [API_ROUTE_SANDBOX_TIMEOUT] = api_sandbox_timeout,
    [API_ROUTE_SANDBOX_PAUSE] = api_sandbox_pause,
    [API_ROUTE_SANDBOX_RESUME] = api_sandbox_pause,
    [API_ROUTE_SANDBOX_EXEC] = api_sandbox_exec,
    [API_ROUTE_SANDBOX_PROCESSES] = api_sandbox_processes,
    [API_ROUTE_SANDBOX_NETWORK] = api_sandbox_network,
    [API_ROUTE_SANDBOX_COMMIT] = api_sandbox_commit,
    [API_ROUTE_PROCESS_OUTPUT] = api_process_output,
    [API_ROUTE_PROCESS_KILL] = api_process_kill,
    [API_ROUTE_FILES_GET] = api_files_get,
    [API_ROUTE_FILES_PUT] = api_files_put,
    [API_ROUTE_FILES_DELETE] = api_files_delete,
    [API_ROUTE_TENANTS_LIST] = api_tenants_list,
    [API_ROUTE_TENANTS_CREATE] = api_tenants_create,
    [API_ROUTE_TENANT_GET] = api_tenant_get,
    [API_ROUTE_TENANT_DELETE] = api_tenant_delete,
    [API_ROUTE_TENANT_SET] = api_tenant_set,
    [API_ROUTE_KEYS_LIST] = api_keys_list,
    [API_ROUTE_KEYS_CREATE] = api_keys_create,
    [API_ROUTE_KEY_REVOKE] = api_key_revoke,
    [API_ROUTE_ME] = api_me,
    [API_ROUTE_AUDIT] = api_audit_list,
    [API_ROUTE_IMAGES_LIST] = api_images_list,
    [API_ROUTE_IMAGES_IMPORT] = api_images_import,
    [API_ROUTE_IMAGES_BOOTSTRAP] = api_images_bootstrap,
    [API_ROUTE_IMAGES_PRUNE] = api_images_prune,
    [API_ROUTE_IMAGE_GET] = api_image_get,
    [API_ROUTE_IMAGE_DELETE] = api_image_delete,
    [API_ROUTE_IMAGES_PULL] = api_images_pull,
    [API_ROUTE_IMAGE_EXPORT] = api_image_export,
    [API_ROUTE_TASK_ARTIFACTS] = api_task_artifacts,
    [API_ROUTE_TASK_ARTIFACT] = api_task_artifact,
    [API_ROUTE_TASK_DELETE] = api_task_delete,
    [API_ROUTE_SANDBOX_EXEC_GET] = api_sandbox_exec_get,
    [API_ROUTE_INPUTS_CREATE] = api_inputs_create,
};

static const char *const params_list[] = {"status", "limit", "after", "tenant", NULL};
static const char *const params_keys[] = {"tenant", NULL};
static const char *const params_events[] = {"after", "limit", NULL};
static const char *const params_logs[] = {"follow", NULL};
static const char *const params_task_logs[] = {"follow", "offset", NULL};
static const char *const params_files_get[] = {"path", "list", "format", NULL};
static const char *const params_files_put[] = {"path", "format", NULL};
static const char *const params_files[] = {"path", NULL};
static const char *const params_import[] = {"name", NULL};
static const char *const params_audit[] = {"tenant", "since", "until", "route",
					   "limit",  "after", NULL};
const char *const *const api_route_params[API_ROUTE_COUNT] = {
    [API_ROUTE_TASKS_LIST] = params_list,      [API_ROUTE_TASK_EVENTS] = params_events,
    [API_ROUTE_TASK_LOGS] = params_task_logs,  [API_ROUTE_SANDBOXES_LIST] = params_list,
    [API_ROUTE_PROCESS_OUTPUT] = params_logs,  [API_ROUTE_FILES_GET] = params_files_get,
    [API_ROUTE_FILES_PUT] = params_files_put,  [API_ROUTE_FILES_DELETE] = params_files,
    [API_ROUTE_KEYS_LIST] = params_keys,       [API_ROUTE_AUDIT] = params_audit,
    [API_ROUTE_IMAGES_IMPORT] = params_import,
};

const struct api_route *api_routes(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(routes);
	return routes;
}

/*
 * Does path fit pattern? A "{id}" segment's match goes to *param; a
 * "{ref}", which ends a pattern, matches the rest of the path, slashes
 * and all (an image's name has them: "library/debian:12"); "{ref}/WORD"
 * matches it when the path ends in "/WORD", the ref being what is before.
 */
static bool pattern_matches(const char *pattern, const char *path, const char **param,
			    size_t *param_len, const char **param2, size_t *param2_len)
{
	const char *p = pattern, *s = path;
	for (;;) {
		if (*p == '\0' || *s == '\0')
			return *p == *s;
		if (*p++ != '/' || *s++ != '/')
			return false;
		size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
		if (plen == 5 && memcmp(p, "{ref}", 5) == 0 && (p[5] == '\0' || p[5] == '/')) {
			size_t rest = strlen(s), tail = strlen(p + 5);
			if (slen == 0 || rest <= tail || strcmp(s + rest - tail, p + 5) != 0)
				return false;
			*param = s;
			*param_len = rest - tail;
			return true;
		}
		/* "{path}", which ends a pattern, is the rest of the path in param2 */
		if (plen == 6 && memcmp(p, "{path}", 6) == 0 && p[6] == '\0') {
			if (slen == 0)
				return false;
			*param2 = s;
			*param2_len = strlen(s);
			return true;
		}
		if (plen == 4 && memcmp(p, "{id}", 4) == 0) {
			if (slen == 0)
				return false;
			*param = s;
			*param_len = slen;
		} else if (plen == 5 && memcmp(p, "{pid}", 5) == 0) {
			if (slen == 0)
				return false;
			*param2 = s;
			*param2_len = slen;
		} else if (plen != slen || memcmp(p, s, plen) != 0) {
			return false;
		}
		p += plen;
		s += slen;
	}
}

void api_route_match(const char *method, const char *path, struct api_match *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!path)
		return;
	for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
		const char *param = NULL, *param2 = NULL;
		size_t param_len = 0, param2_len = 0;
		if (!pattern_matches(routes[i].pattern, path, &param, &param_len, &param2,
				     &param2_len))
			continue;
		if (!ret->path_known) {
			ret->param = param, ret->param_len = param_len;
			ret->param2 = param2, ret->param2_len = param2_len;
			ret->pattern = routes[i].pattern;
		}
		ret->path_known = true;
		if (!strstr(ret->allow, routes[i].method)) {
			size_t n = strlen(ret->allow);
			snprintf(ret->allow + n, sizeof(ret->allow) - n, "%s%s", n ? ", " : "",
				 routes[i].method);
		}
		if (!ret->route && method && strcmp(method, routes[i].method) == 0) {
			ret->route = &routes[i];
			/* its own {ref}: GET /v1/images/import is an image named "import" */
			ret->param = param, ret->param_len = param_len;
			ret->param2 = param2, ret->param2_len = param2_len;
		}
	}
}

/* Is path the path of a public route (whatever the method)? */
bool api_route_is_public(const char *path)
{
	for (size_t i = 0; path && i < ELEMENTSOF(routes); i++) {
		const char *param, *param2;
		size_t len, len2;
		if ((routes[i].flags & API_ROUTE_PUBLIC) &&
		    pattern_matches(routes[i].pattern, path, &param, &len, &param2, &len2))
			return true;
	}
	return false;
}

/* Is the media type (before any ';') application/json? */
static bool is_json_type(const char *ct)
{
	static const char json[] = "application/json";
	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, json, sizeof(json) - 1) != 0)
		return false;
	ct += sizeof(json) - 1;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

/* Every check before a handler runs; fills c->id and *q on success. */
int api_prepare(struct api_call *c, struct api_match *m, struct api_query *q)
{
	const struct api_request *req = c->req;
	api_route_match(req->method, req->path, m);
	c->now = c->ctx->now_ms ? c->ctx->now_ms() : wall_clock_ms();
	if (!api_route_is_public(req->path)) {
		int r = api_authenticate_why(c->ctx, req, c->now, &c->who, c->err, &c->refusal);
		if (r < 0 && c->err->code == API_ERR_UNAUTHORIZED)
			snprintf(c->res->www_authenticate, sizeof(c->res->www_authenticate),
				 "Bearer");
		if (r < 0)
			return r;
		c->authenticated = true;
	}
	if (!m->route && !m->path_known)
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no such route");
	if (!m->route) {
		snprintf(c->res->allow, sizeof(c->res->allow), "%s", m->allow);
		return api_error_set(c->err, API_ERR_METHOD_NOT_ALLOWED, NULL,
				     "this route takes only %s", m->allow);
	}
	if (m->route->flags & ROUTE_ADMIN && c->who.role != KEY_ROLE_ADMIN)
		return api_error_set(
		    c->err, API_ERR_FORBIDDEN, NULL,
		    "this route is an admin's; a member may see itself: GET /v1/me");
	if (req->body_len > API_BODY_MAX && !(m->route->flags & API_ROUTE_RAW_BODY))
		return api_error_set(c->err, API_ERR_BODY_TOO_LARGE, NULL,
				     "the body is larger than %u bytes", API_BODY_MAX);
	if ((m->route->flags & ROUTE_JSON_BODY) && !is_json_type(req->content_type))
		return api_error_set(c->err, API_ERR_UNSUPPORTED_MEDIA_TYPE, NULL,
				     "the body must be sent as Content-Type: application/json");
	enum api_route_id id = m->route->id;
	if (m->param && (id == API_ROUTE_TENANT_GET || id == API_ROUTE_TENANT_DELETE ||
			 id == API_ROUTE_TENANT_SET || id == API_ROUTE_KEY_REVOKE)) {
		bool key = id == API_ROUTE_KEY_REVOKE;
		if (m->param_len >= sizeof(c->name))
			return api_error_set(c->err, API_ERR_INVALID_ID, NULL, "not a %s",
					     key ? "key id" : "tenant's name");
		memcpy(c->name, m->param, m->param_len);
		c->name[m->param_len] = '\0';
		if (key ? !auth_key_id_is_valid(c->name) : !tenant_name_is_valid(c->name))
			return api_error_set(c->err, API_ERR_INVALID_ID, NULL, "not a %s",
					     key ? "key id: 12 of 0-9 a-z without i, l, o, u"
						 : "tenant's name: a-z, 0-9 and '-'");
	} else if (m->param && (id == API_ROUTE_IMAGE_GET || id == API_ROUTE_IMAGE_DELETE ||
				id == API_ROUTE_IMAGE_EXPORT)) {
		char norm[IMAGE_REF_MAX];
		struct error rerr = {0};
		if (m->param_len >= sizeof(c->ref))
			return api_error_set(c->err, API_ERR_INVALID_ID, NULL,
					     "an image's name has at most %d bytes",
					     IMAGE_REF_MAX - 1);
		memcpy(c->ref, m->param, m->param_len);
		c->ref[m->param_len] = '\0';
		if (!image_digest_is_valid(c->ref) &&
		    image_ref_normalize(c->ref, norm, sizeof(norm), &rerr) < 0) {
			c->ref[0] = '\0';
			return api_error_set(c->err, API_ERR_INVALID_ID, NULL,
					     "not an image's name or digest: %s", rerr.msg);
		}
	} else if (m->param) {
		bool sbx = API_ROUTE_IS_SANDBOX(m->route->id);
		const char *what = sbx ? "sandbox" : "task";
		if (m->param_len >= TASK_ID_SIZE)
			return api_error_set(c->err, API_ERR_INVALID_ID, NULL, "not a %s id", what);
		memcpy(c->id, m->param, m->param_len);
		c->id[m->param_len] = '\0';
		if (sbx ? !sandbox_id_is_valid(c->id) : !task_id_is_valid(c->id)) {
			c->id[0] = '\0';
			return api_error_set(c->err, API_ERR_INVALID_ID, NULL,
					     "not a %s id: ids look like %s and 26 of "
					     "0-9 a-z without i, l, o, u",
					     what, sbx ? "sbx_" : "tsk_");
		}
	}
	c->pid = -1;
	if (m->param2 && id != API_ROUTE_TASK_ARTIFACT) {
		char text[16];
		char *end;
		size_t n = m->param2_len < sizeof(text) - 1 ? m->param2_len : sizeof(text) - 1;
		memcpy(text, m->param2, n);
		text[n] = '\0';
		long v = strtol(text, &end, 10);
		/* digits only: strtol() alone would take " 42" and "+42" */
		if (m->param2_len >= sizeof(text) || *end || v < 1 || v > 4194304 ||
		    text[0] < '1' || text[0] > '9')
			return api_error_set(
			    c->err, API_ERR_INVALID_ID, NULL,
			    "not a process id: a decimal number from 1 to 4194304");
		c->pid = v;
	}
	int r = m->route->flags & ROUTE_OWN_QUERY
		    ? 0
		    : api_query_parse(req->query, api_route_params[m->route->id], q, c->err);
	if (r < 0)
		return r;
	if ((r = api_check_owner(c, API_ROUTE_IS_SANDBOX(m->route->id))) < 0)
		return r;
	c->match = m;
	c->query = q;
	return 0;
}

/* Turn r (< 0) and e into an error response. */
int api_fail(int r, struct api_error *e, struct api_response *ret)
{
	api_response_release(ret);    /* whatever the handler had begun, fd included */
	if (e->code == API_ERR_COUNT) /* nobody said why */
		api_error_internal(e, -r, r == -ENOMEM ? "out of memory" : "handler failed");
	if (api_error_respond(e, ret) < 0) {
		ret->status = 500;
		ret->content_type = API_JSON;
		return -ENOMEM;
	}
	return 0;
}

int api_run_deferred(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret,
		     int (*handler)(struct api_call *c, void *data), void *data,
		     struct api_audit_entry *ret_note, enum api_error_code *ret_code)
{
	memset(ret, 0, sizeof(*ret));
	struct api_error e = {.code = API_ERR_COUNT};
	struct api_match m;
	struct api_query q = {0};
	struct api_call c = {.ctx = ctx, .req = req, .res = ret, .err = &e};
	int r = api_prepare(&c, &m, &q);
	if (r == 0)
		r = handler(&c, data);
	api_query_release(&q);
	r = r < 0 ? api_fail(r, &e, ret) : 0;
	api_audit_note(&c, &m, ret_note);
	*ret_code = ret->status >= 400 ? e.code : API_ERR_COUNT;
	return r;
}

int api_run(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret,
	    int (*handler)(struct api_call *c, void *data), void *data)
{
	struct api_audit_entry note;
	enum api_error_code code;
	int r = api_run_deferred(ctx, req, ret, handler, data, &note, &code);
	if (ctx->audit_deferred && note.wanted && ret->status) {
		/* the server records it once the answer is sent */
		ret->audit_pending = true;
		ret->audit_note = note;
		ret->audit_code = code;
		return r;
	}
	/* a handler that waited on a sandbox gave its store back: take one again */
	if (note.wanted && !ctx->store && ctx->store_acquire)
		ctx->store_acquire(ctx);
	api_audit_record(&note, code, ctx->store, ret);
	return r;
}

/*
 * A task's logs or events as a stream the server serves: the task exists
 * and the query is good; the response says which stream, from where.
 */
static int task_stream(struct api_call *c)
{
	int64_t after = 0, offset = 0;
	enum api_route_id route = c->match->route->id;
	int r = 0;
	if (route == API_ROUTE_TASK_EVENTS)
		r = api_query_int(c->query, "after", 0, INT64_MAX, 0, &after, c->err);
	else
		r = api_query_int(c->query, "offset", 0, INT64_MAX, 0, &offset, c->err);
	if (r < 0)
		return r;
	/* a reconnecting SSE client sends the URL it had and the last id it saw */
	const char *last = c->req->last_event_id;
	if (route == API_ROUTE_TASK_EVENTS && last) {
		uint64_t seq;
		if (parse_u64(last, &seq) < 0 || seq > INT64_MAX)
			return api_error_set(c->err, API_ERR_INVALID_FIELD, "Last-Event-ID",
					     "must be the seq of an event (a whole number)");
		if ((int64_t)seq > after)
			after = (int64_t)seq;
	}
	struct task t = {0};
	struct error se = {0};
	r = store_task_get(c->ctx->store, c->id, &t, &se);
	task_release(&t);
	if (r < 0)
		return api_store_error(c, r, &se);
	struct api_response *res = api_respond_kind(
	    c, 200, route == API_ROUTE_TASK_EVENTS ? "text/event-stream" : API_TEXT,
	    API_RESPONSE_TASK_STREAM);
	res->task.route = route;
	res->task.after_seq = after;
	res->task.offset = (uint64_t)offset;
	memcpy(res->task.id, c->id, TASK_ID_SIZE);
	return 0;
}

/* The route's handler, or its stream when the request asks for one. */
static int dispatch(struct api_call *c, void *data)
{
	(void)data;
	if (api_request_wants_stream(c->req))
		return task_stream(c);
	return handlers[c->match->route->id](c);
}

int api_handle(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret)
{
	return api_run(ctx, req, ret, dispatch, NULL);
}

bool api_request_wants_stream(const struct api_request *req)
{
	struct api_match m;
	api_route_match(req->method, req->path, &m);
	if (!m.route)
		return false;
	if (m.route->id == API_ROUTE_TASK_EVENTS)
		return req->accept && strstr(req->accept, "text/event-stream");
	if (m.route->id != API_ROUTE_TASK_LOGS)
		return false;
	struct api_query q;
	if (api_query_parse(req->query, api_route_params[m.route->id], &q, NULL) < 0)
		return false;
	const char *follow = api_query_get(&q, "follow");
	bool yes = follow && (strcmp(follow, "1") == 0 || strcmp(follow, "true") == 0);
	api_query_release(&q);
	return yes;
}

static int stream_only(struct api_call *c, void *data)
{
	(void)data;
	enum api_route_id route = c->match->route->id;
	if (route != API_ROUTE_TASK_EVENTS && route != API_ROUTE_TASK_LOGS)
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "this route has no stream");
	return task_stream(c);
}

int api_stream_begin(struct api_ctx *ctx, const struct api_request *req, struct api_stream *ret,
		     struct api_response *ret_error)
{
	int r = api_run(ctx, req, ret_error, stream_only, NULL);
	if (r < 0)
		return r;
	if (ret_error->kind != API_RESPONSE_TASK_STREAM)
		return -EINVAL;
	*ret = ret_error->task;
	memset(ret_error, 0, sizeof(*ret_error));
	return 0;
}

void api_response_release(struct api_response *r)
{
	free(r->body);
	r->body = NULL;
	r->body_len = 0;
	if (r->kind == API_RESPONSE_FILE)
		CLOSE_FD(r->fd);
	if (r->kind == API_RESPONSE_PIECES) {
		api_pieces_free(r->pieces);
		r->pieces = NULL;
	}
	if (r->kind == API_RESPONSE_PROCESS_STREAM && r->fd >= 0) {
		r->process.ops->done(r->process.fleet, r->process.id, r->fd);
		r->fd = -1;
	}
	if (r->kind == API_RESPONSE_TERMINAL) {
		if (r->fd >= 0)
			r->terminal.ops->done(r->terminal.fleet, r->terminal.id, r->fd);
		r->fd = -1;
		CLOSE_FD(r->terminal.master);
	}
	r->kind = API_RESPONSE_BODY;
}

int api_response_take_fd(struct api_response *r)
{
	if (r->kind != API_RESPONSE_FILE && r->kind != API_RESPONSE_PROCESS_STREAM &&
	    r->kind != API_RESPONSE_TERMINAL)
		return -1;
	return TAKE_FD(r->fd);
}

struct api_response *api_respond_kind(struct api_call *c, int status, const char *content_type,
				      enum api_response_kind kind)
{
	struct api_response *res = c->res;
	api_response_release(res);
	memset(res, 0, sizeof(*res));
	res->status = status;
	res->content_type = content_type;
	res->kind = kind;
	return res;
}

int api_respond(struct api_call *c, int status, const char *content_type, struct buf *b)
{
	free(c->res->body);
	c->res->body = NULL;
	int r = buf_steal(b, &c->res->body, &c->res->body_len);
	if (r < 0)
		return r == -E2BIG ? api_error_internal(c->err, E2BIG, "response too large") : r;
	c->res->status = status;
	c->res->content_type = content_type;
	return 0;
}

int api_store_error(struct api_call *c, int r, const struct error *se)
{
	if (r == -ENOMEM)
		return r;
	if (r == -ENOENT)
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no task %s", c->id);
	return api_error_internal(c->err, -r, se ? se->msg : NULL);
}

/* 0, or invalid_field limits.<name> when value is over max (0: no bound), shown as max >> shift. */
static int over_host(struct api_call *c, const char *name, uint64_t value, uint64_t max,
		     unsigned shift)
{
	if (!max || value <= max)
		return 0;
	char field[API_FIELD_MAX];
	api_field_key(field, "limits", name);
	return api_error_set(c->err, API_ERR_INVALID_FIELD, field,
			     "%s is at most %llu on this host", name,
			     (unsigned long long)(max >> shift));
}

int api_check_network(struct api_call *c, int mode)
{
	if (mode == EGRESS_NONE)
		return 0;
	struct error err = {0};
	if (!c->ctx->network_ready)
		return api_error_set(c->err, API_ERR_NETWORK_UNAVAILABLE, "network",
				     "this agentboxd gives sandboxes no network");
	if (c->ctx->network_ready(c->ctx->hook_data, &err) < 0)
		return api_error_set(c->err, API_ERR_NETWORK_UNAVAILABLE, "network", "%s", err.msg);
	return 0;
}

int api_check_secrets(struct api_call *c, bool has_secrets)
{
	if (!has_secrets)
		return 0;
	struct error err = {0};
	if (!c->ctx->secrets_ready)
		return api_error_set(c->err, API_ERR_NETWORK_UNAVAILABLE, "secrets",
				     "this agentboxd takes no secrets");
	if (c->ctx->secrets_ready(c->ctx->hook_data, &err) < 0)
		return api_error_set(c->err, API_ERR_NETWORK_UNAVAILABLE, "secrets", "%s", err.msg);
	return 0;
}

int api_check_host_limits(struct api_call *c, uint64_t memory_bytes, uint64_t disk_bytes,
			  uint64_t state_bytes, uint64_t pids)
{
	const struct api_host_limits *h = c->ctx->host;
	int r;
	if (!h)
		return 0;
	if ((r = over_host(c, "memory_mb", memory_bytes, h->memory_bytes, 20)) < 0 ||
	    (r = over_host(c, "disk_mb", disk_bytes, h->disk_bytes, 20)) < 0 ||
	    (r = over_host(c, "state_mb", state_bytes, h->disk_bytes, 20)) < 0)
		return r;
	return over_host(c, "pids", pids, h->pids, 0);
}

int api_healthz(struct api_call *c)
{
	struct buf b = {0};
	buf_puts(&b, "{\"status\":\"ok\"}");
	return api_respond(c, 200, API_JSON, &b);
}
