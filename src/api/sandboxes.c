/*
 * sandboxes.c - the checks of the sandbox routes, shared with the task
 * routes (router.c), and the response helpers the daemon's sandbox
 * handlers build their answers with. The handlers themselves talk to
 * each sandbox's supervisor, so they live in the daemon.
 */
#include "api/api-internal.h"
#include "api/sandbox-request.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool api_request_is_sandbox(const struct api_request *req)
{
	struct api_match m;
	api_route_match(req->method, req->path, &m);
	return m.route && API_ROUTE_IS_SANDBOX(m.route->id);
}

static bool flag_is_set(const char *v, bool *ret, struct api_error *e, const char *name)
{
	if (!v || strcmp(v, "0") == 0 || strcmp(v, "false") == 0) {
		*ret = false;
		return true;
	}
	if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) {
		*ret = true;
		return true;
	}
	api_error_set(e, API_ERR_INVALID_FIELD, name, "%s must be 0, 1, true or false", name);
	return false;
}

static int parse_query(struct api_call *c, const struct api_query *q, struct api_sandbox_call *s)
{
	struct api_error *e = c->err;
	switch (s->route) {
	case API_ROUTE_SANDBOXES_LIST: {
		const char *v = api_query_get(q, "status");
		if (v && strlen(v) >= sizeof(s->status))
			return api_error_set(e, API_ERR_INVALID_FIELD, "status",
					     "status is too long");
		snprintf(s->status, sizeof(s->status), "%s", v ? v : "");
		v = api_query_get(q, "after");
		if (v && !sandbox_id_is_valid(v))
			return api_error_set(e, API_ERR_INVALID_FIELD, "after",
					     "after must be a sandbox id");
		snprintf(s->after, sizeof(s->after), "%s", v ? v : "");
		return api_query_int(q, "limit", 1, STORE_LIST_MAX, API_LIST_DEFAULT, &s->limit, e);
	}
	case API_ROUTE_PROCESS_OUTPUT:
		return flag_is_set(api_query_get(q, "follow"), &s->follow, e, "follow") ? 0
											: -EINVAL;
	case API_ROUTE_FILES_GET:
		if (!flag_is_set(api_query_get(q, "list"), &s->list, e, "list"))
			return -EINVAL;
		/* fall through */
	case API_ROUTE_FILES_PUT:
	case API_ROUTE_FILES_DELETE: {
		const char *p = api_query_get(q, "path");
		int r = api_sandbox_path_check(p, "path", e);
		if (r < 0)
			return r;
		snprintf(s->path, sizeof(s->path), "%s", p);
		return 0;
	}
	case API_ROUTE_SANDBOX_EXEC:
		s->follow = c->req->accept && strstr(c->req->accept, "text/event-stream");
		return 0;
	default:
		return 0;
	}
}

int api_sandbox_begin(struct api_ctx *ctx, const struct api_request *req,
		      struct api_sandbox_call *ret, struct api_response *ret_error)
{
	memset(ret_error, 0, sizeof(*ret_error));
	struct api_error e = {.code = API_ERR_COUNT};
	struct api_match m;
	struct api_query q = {0};
	struct api_call c = {.ctx = ctx, .req = req, .res = ret_error, .err = &e};
	struct api_sandbox_call s = {.pid = -1};
	int r = api_prepare(&c, &m, &q);
	if (r == 0 && !API_ROUTE_IS_SANDBOX(m.route->id))
		r = api_error_set(&e, API_ERR_NOT_FOUND, NULL, "not a sandbox route");
	if (r == 0) {
		s.route = m.route->id;
		memcpy(s.id, c.id, sizeof(s.id));
		s.pid = c.pid;
		s.now = c.now;
		r = parse_query(&c, &q, &s);
	}
	api_query_release(&q);
	if (r < 0) {
		int f = api_fail(r, &e, ret_error);
		return f < 0 ? f : -EINVAL;
	}
	*ret = s;
	return 0;
}

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
	struct jbuf b = {0};
	const char *limits = NULL;
	size_t limits_len = 0;
	jbuf_puts(&b, "{\"id\":");
	jbuf_strz(&b, s->id);
	jbuf_puts(&b, ",\"status\":");
	jbuf_strz(&b, sandbox_status_name(s->status));
	jbuf_puts(&b, ",\"created_at\":");
	api_render_time(&b, s->created_at);
	jbuf_puts(&b, ",\"expires_at\":");
	api_render_time(&b, s->expires_at);
	jbuf_puts(&b, ",\"ended_at\":");
	api_render_time(&b, s->ended_at);
	jbuf_puts(&b, ",\"end_reason\":");
	jbuf_str_or_null(&b, s->end_reason);
	jbuf_puts(&b, ",\"end_detail\":");
	jbuf_str_or_null(&b, s->end_detail);
	jbuf_puts(&b, ",\"limits\":");
	if (s->spec_json && json_member_raw(s->spec_json, "limits", &limits, &limits_len) == 0) {
		/* the stored limits without the task-only timeout_s */
		json_t *l = json_loadb(limits, limits_len, 0, NULL);
		json_object_del(l, "timeout_s");
		jbuf_json(&b, l ? l : json_object());
		json_decref(l);
	} else {
		jbuf_puts(&b, "{}");
	}
	jbuf_puts(&b, ",\"metadata\":");
	jbuf_puts(&b, s->metadata_json ? s->metadata_json : "{}");
	jbuf_puts(&b, "}");
	char *text = NULL;
	size_t len;
	return jbuf_finish(&b, &text, &len) == 0 ? text : NULL;
}
