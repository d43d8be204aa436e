/*
 * audit.c - the audit log: what api_run() records of every request once
 * it is answered, and GET /v1/audit, which reads it.
 *
 * Recorded: every mutating request (POST, PUT, DELETE, PATCH), whatever
 * its answer, those refused before their handler included (404, 403,
 * 400, 413, 415, 429): its time, the principal (tenant, key id or local
 * uid), the method and the route's template (never the raw path), the id
 * it named or made, the status and error code answered, and its source.
 * A refusal of credentials (401), whatever the method, is counted
 * instead: one row per source, reason and API_AUDIT_WINDOW_MS, so that a
 * flood of bad keys writes a row a minute, not a row a request. GET and
 * HEAD are not recorded. Nothing a client sends goes into a row but
 * checked names and ids: no body, no query, no path, no header.
 *
 * Recording never changes the answer: a row the store refuses is said in
 * the response's audit field, which the server logs.
 */
#include "api/api-internal.h"

#include "api/json-util.h"
#include "auth/key.h"
#include "base/parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The methods that change something, as the audit log names them. */
static const char *const mutating[] = {"POST", "PUT", "DELETE", "PATCH"};

static const char *mutating_method(const char *method)
{
	for (size_t i = 0; method && i < ELEMENTSOF(mutating); i++)
		if (strcmp(method, mutating[i]) == 0)
			return mutating[i];
	return NULL;
}

/* The id the request named or made, if it is well-formed: c->id, else c->name by route. */
static const char *target_of(const struct api_call *c, const struct api_match *m)
{
	if (c->id[0])
		return c->id; /* a task's or sandbox's, checked (or made) */
	if (c->ref[0])
		return c->ref; /* an image's, checked (cut to the row's size) */
	if (!c->name[0] || !m || !m->route)
		return NULL;
	switch (m->route->id) {
	case API_ROUTE_TENANTS_CREATE:
	case API_ROUTE_TENANT_GET:
	case API_ROUTE_TENANT_DELETE:
	case API_ROUTE_TENANT_SET:
		return tenant_name_is_valid(c->name) ? c->name : NULL;
	case API_ROUTE_KEYS_CREATE:
	case API_ROUTE_KEY_REVOKE:
		return auth_key_id_is_valid(c->name) ? c->name : NULL;
	default:
		return NULL;
	}
}

void api_audit_note(const struct api_call *c, const struct api_match *m,
		    struct api_audit_entry *ret)
{
	*ret = (struct api_audit_entry){.time = c->now, .uid = -1, .keep = c->ctx->audit_rows};
	ret->refusal = c->res->status == 401;
	ret->method = mutating_method(c->req->method);
	/* a terminal's GET runs a command as its POST does: recorded alike */
	if (!ret->method && m && m->route && m->route->id == API_ROUTE_SANDBOX_EXEC_GET)
		ret->method = "GET";
	ret->wanted = ret->refusal || ret->method;
	snprintf(ret->source, sizeof(ret->source), "%s", c->ctx->source);
	if (ret->refusal) {
		/* counted across routes and methods: only where from, and why */
		ret->method = NULL;
		ret->reason = c->refusal.reason ? c->refusal.reason : "unauthorized";
		snprintf(ret->key_id, sizeof(ret->key_id), "%s", c->refusal.key_id);
		return;
	}
	if (c->authenticated) {
		snprintf(ret->tenant, sizeof(ret->tenant), "%s", c->who.tenant);
		snprintf(ret->key_id, sizeof(ret->key_id), "%s", c->who.key_id);
		ret->uid = c->who.key_id[0] ? -1 : c->who.uid;
	}
	ret->route = m && m->route ? m->route->pattern : m ? m->pattern : NULL;
	const char *target = target_of(c, m);
	snprintf(ret->target, sizeof(ret->target), "%s", target ? target : "");
}

static const char *or_null(const char *s)
{
	return s && *s ? s : NULL;
}

void api_audit_record(const struct api_audit_entry *a, enum api_error_code code, struct store *st,
		      struct api_response *res)
{
	if (!a->wanted || !res->status)
		return;
	struct audit_record row = {
	    .time = a->time,
	    .tenant = or_null(a->tenant),
	    .key_id = or_null(a->key_id),
	    .uid = a->uid,
	    .method = a->method,
	    .route = a->route,
	    .target = or_null(a->target),
	    .status = res->status,
	    .error = api_error_name(code),
	    .source = a->source,
	    .reason = a->reason,
	};
	struct error err = {0};
	size_t keep = a->keep ? a->keep : API_AUDIT_ROWS_DEFAULT;
	int r;
	if (!st)
		r = error_set(&err, ENODEV, "no store to record it in");
	else if (a->refusal)
		r = store_audit_count(st, &row, a->time - a->time % API_AUDIT_WINDOW_MS, keep,
				      &err);
	else
		r = store_audit_add(st, &row, keep, &err);
	if (r < 0)
		snprintf(res->audit, sizeof(res->audit), "audit: %s %s from %s answered %d: %s",
			 a->method ? a->method : "-", a->route ? a->route : "-",
			 a->source[0] ? a->source : "-", res->status, err.msg);
}

void api_audit_commit(const struct api_response *res, struct store *st, char why[ERROR_MSG_MAX])
{
	/* api_audit_record() says what went wrong in a response's audit field */
	struct api_response r = {.status = res->status};
	why[0] = '\0';
	if (!res->audit_pending)
		return;
	api_audit_record(&res->audit_note, res->audit_code, st, &r);
	snprintf(why, ERROR_MSG_MAX, "%s", r.audit);
}

/* ---- GET /v1/audit ---------------------------------------------------------- */

/* A time of the query: RFC 3339, as the API shows times, or ms since the epoch. */
static int query_time(struct api_call *c, const char *name, int64_t *ret)
{
	const char *s = api_query_get(c->query, name);
	uint64_t ms = 0;
	int64_t t = 0;
	*ret = 0;
	if (!s)
		return 0;
	if (parse_u64(s, &ms) == 0 && ms <= INT64_MAX / 2)
		t = (int64_t)ms;
	else if (parse_rfc3339_ms(s, &t) < 0 || t < 0)
		t = -1;
	if (t <= 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, name,
				     "%s is a time: RFC 3339 (2024-05-01T12:00:00Z) or ms since "
				     "the epoch, after 1970",
				     name);
	*ret = t;
	return 0;
}

/*
 * ?route=: "POST" (a method), "/v1/tasks" (a template), "POST /v1/tasks"
 * (both), each template optionally ending in '*' (a prefix).
 */
struct route_filter {
	char method[8];
	char route[STORE_AUDIT_TEXT_MAX + 1];
};

static int query_route(struct api_call *c, struct audit_filter *f, struct route_filter *ret)
{
	const char *s = api_query_get(c->query, "route");
	if (!s)
		return 0;
	const char *p = s;
	size_t n = 0;
	while (p[n] >= 'A' && p[n] <= 'Z')
		n++;
	bool ok = strlen(s) <= STORE_AUDIT_TEXT_MAX && n < sizeof(ret->method);
	if (ok && n) {
		memcpy(ret->method, p, n);
		ret->method[n] = '\0';
		f->method = ret->method;
		p += n;
		/* "POST" alone, or "POST " and a template */
		ok = *p == '\0' || (p[0] == ' ' && (p[1] == '/' || p[1] == '*'));
		p += *p == ' ';
	}
	if (ok && *p) {
		size_t len = strlen(p);
		for (size_t i = 0; ok && i < len; i++)
			ok = p[i] > 0x20 && p[i] < 0x7f;
		ok = ok && (*p == '/' || strcmp(p, "*") == 0);
		f->route_prefix = p[len - 1] == '*';
		snprintf(ret->route, sizeof(ret->route), "%.*s", (int)(len - f->route_prefix), p);
		if (ok && ret->route[0])
			f->route = ret->route;
	}
	if (!ok || (!f->method && !f->route && !f->route_prefix))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "route",
				     "route is a method, a route's template or both, \"POST "
				     "/v1/tasks\"; a template ending in '*' is a prefix");
	return 0;
}

struct audit_page {
	struct buf b;
	size_t n;
	int64_t last;
};

static int put_row(const struct audit_record *a, void *data)
{
	struct audit_page *p = data;
	struct buf *b = &p->b;
	if (p->n++)
		buf_puts(b, ",");
	buf_printf(b, "{\"id\":%lld,\"time\":", (long long)a->id);
	api_render_time(b, a->time);
	buf_puts(b, ",\"last_time\":");
	api_render_time(b, a->last_time);
	buf_printf(b, ",\"count\":%llu,\"tenant\":", (unsigned long long)a->count);
	json_put_str_or_null(b, a->tenant);
	buf_puts(b, ",\"key_id\":");
	json_put_str_or_null(b, a->key_id);
	if (a->uid >= 0)
		buf_printf(b, ",\"uid\":%lld", (long long)a->uid);
	else
		buf_puts(b, ",\"uid\":null");
	buf_puts(b, ",\"method\":");
	json_put_str_or_null(b, a->method);
	buf_puts(b, ",\"route\":");
	json_put_str_or_null(b, a->route);
	buf_puts(b, ",\"target\":");
	json_put_str_or_null(b, a->target);
	buf_printf(b, ",\"status\":%d,\"error\":", a->status);
	json_put_str_or_null(b, a->error);
	buf_puts(b, ",\"source\":");
	json_put_str_or_null(b, a->source);
	buf_puts(b, ",\"reason\":");
	json_put_str_or_null(b, a->reason);
	buf_puts(b, "}");
	p->last = a->id;
	return 0;
}

int api_audit_list(struct api_call *c)
{
	struct audit_filter f = {0};
	struct route_filter rf;
	int64_t limit, after;
	int r =
	    api_query_int(c->query, "limit", 1, STORE_LIST_MAX, API_LIST_DEFAULT, &limit, c->err);
	if (r < 0 || (r = api_query_int(c->query, "after", 1, INT64_MAX, 0, &after, c->err)) < 0 ||
	    (r = query_time(c, "since", &f.since)) < 0 ||
	    (r = query_time(c, "until", &f.until)) < 0 || (r = query_route(c, &f, &rf)) < 0)
		return r;
	f.tenant = api_query_get(c->query, "tenant");
	if (f.tenant && !tenant_name_is_valid(f.tenant))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "tenant",
				     "tenant is a tenant's name: a-z, 0-9 and '-'");
	f.limit = (size_t)limit;
	f.before_id = after;
	struct audit_page p = {0};
	struct error err = {0};
	buf_puts(&p.b, "{\"entries\":[");
	r = store_audit_list(c->ctx->store, &f, put_row, &p, &err);
	if (r < 0) {
		buf_release(&p.b);
		return r == -ENOMEM ? r : api_error_internal(c->err, -r, err.msg);
	}
	if (p.n == f.limit)
		buf_printf(&p.b, "],\"next\":%lld}", (long long)p.last);
	else
		buf_puts(&p.b, "],\"next\":null}");
	return api_respond(c, 200, API_JSON, &p.b);
}
