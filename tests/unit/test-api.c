/*
 * test-api.c - component tests of the API: api_handle() against a real
 * SQLite store in a scratch directory, no socket. Every route, status
 * and error code; the error shape; 404/405; pagination; cancel; events;
 * logs from attempt files; auth; the stream checks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "auth/key.h"

#define NOW 1700000000123 /* 2023-11-14T22:13:20.123Z */

struct fx {
	char dir[128];
	char state[160];
	struct store *st;
	struct api_ctx ctx;
	const char *auth;
	int submitted;
	int cancels;
	char cancelled[TASK_ID_SIZE];
};

static int64_t fake_now = NOW;
static int64_t now_ms(void)
{
	return fake_now;
}

static void on_submitted(void *data)
{
	((struct fx *)data)->submitted++;
}

static void on_cancel(const char *id, void *data)
{
	struct fx *f = data;
	f->cancels++;
	snprintf(f->cancelled, sizeof(f->cancelled), "%s", id);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test-api.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	char db[200];
	snprintf(db, sizeof(db), "%s/store.db", f->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	struct error err = {0};
	if (store_open_sqlite(db, &f->st, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	fake_now = NOW;
	f->ctx = (struct api_ctx){.store = f->st,
				  .state_dir = f->state,
				  .now_ms = now_ms,
				  .task_submitted = on_submitted,
				  .task_cancel_requested = on_cancel,
				  .hook_data = f};
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->st);
	int r = nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

/* ---- calling the API --------------------------------------------------- */

struct reply {
	struct api_response r;
	json_t *json; /* the body parsed, when it is JSON */
};

/*
 * A body in pieces (logs), read as the server reads it, in small steps, into
 * body: it must come to exactly its total.
 */
static void read_pieces(struct api_response *r)
{
	struct api_pieces *ps = r->pieces;
	char *body = malloc(ps->total + 1);
	assert_non_null(body);
	uint64_t pos = 0;
	while (pos < ps->total) {
		ssize_t n = api_pieces_read(ps, pos, body + pos, 4093);
		assert_true(n > 0);
		pos += (uint64_t)n;
	}
	assert_int_equal(api_pieces_read(ps, pos, body, 16), 0);
	body[pos] = '\0';
	api_response_release(r); /* the pieces: the rest of r stays */
	r->body = body;
	r->body_len = pos;
}

static struct reply call_full(struct fx *f, const char *method, const char *path, const char *query,
			      const char *body, size_t len, const char *ctype)
{
	struct api_request req = {.method = method,
				  .path = path,
				  .query = query,
				  .body = body,
				  .body_len = len,
				  .content_type = ctype,
				  .authorization = f->auth};
	struct reply rep = {0};
	assert_int_equal(api_handle(&f->ctx, &req, &rep.r), 0);
	assert_non_null(rep.r.content_type);
	if (rep.r.kind == API_RESPONSE_PIECES)
		read_pieces(&rep.r);
	if (strcmp(rep.r.content_type, "application/json") == 0) {
		json_error_t jerr;
		assert_non_null(rep.r.body);
		assert_int_equal(strlen(rep.r.body), rep.r.body_len);
		rep.json = json_loadb(rep.r.body, rep.r.body_len, JSON_REJECT_DUPLICATES, &jerr);
		if (!rep.json)
			fail_msg("not JSON: %s: %s", jerr.text, rep.r.body);
	}
	if (rep.r.status >= 500)
		assert_true(rep.r.log[0] != '\0');
	else
		assert_string_equal(rep.r.log, "");
	return rep;
}

static struct reply call(struct fx *f, const char *method, const char *path, const char *query,
			 const char *body)
{
	return call_full(f, method, path, query, body, body ? strlen(body) : 0,
			 body ? "application/json" : NULL);
}

static void reply_free(struct reply *rep)
{
	json_decref(rep->json);
	api_response_release(&rep->r);
}

/* The reply must be the error (status, code, field or NULL), in the one shape. */
static void expect_error(struct reply rep, int status, const char *code, const char *field)
{
	if (rep.r.status != status)
		fail_msg("status %d, want %d: %s", rep.r.status, status, rep.r.body);
	assert_non_null(rep.json);
	assert_int_equal(json_object_size(rep.json), 1);
	json_t *e = json_object_get(rep.json, "error");
	assert_true(json_is_object(e));
	assert_string_equal(json_string_value(json_object_get(e, "code")), code);
	assert_true(json_string_length(json_object_get(e, "message")) > 0);
	if (field) {
		assert_int_equal(json_object_size(e), 3);
		assert_string_equal(json_string_value(json_object_get(e, "field")), field);
	} else {
		assert_int_equal(json_object_size(e), 2);
	}
	reply_free(&rep);
}

static const char *str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

static json_int_t num(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* POST a task; its id goes to id. */
static void create(struct fx *f, const char *body, char id[TASK_ID_SIZE])
{
	struct reply rep = call(f, "POST", "/v1/tasks", NULL, body);
	if (rep.r.status != 201)
		fail_msg("create: %d %s", rep.r.status, rep.r.body);
	snprintf(id, TASK_ID_SIZE, "%s", str(rep.json, "id"));
	reply_free(&rep);
}

static char *path_of(const char *id, const char *suffix)
{
	static char buf[128];
	snprintf(buf, sizeof(buf), "/v1/tasks/%s%s", id, suffix);
	return buf;
}

/* ---- routes ------------------------------------------------------------ */

static void test_healthz(void **state)
{
	struct fx *f = *state;
	struct reply rep = call(f, "GET", "/healthz", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(rep.r.body, "{\"status\":\"ok\"}");
	reply_free(&rep);
	rep = call(f, "POST", "/healthz", NULL, "{}");
	assert_string_equal(rep.r.allow, "GET");
	expect_error(rep, 405, "method_not_allowed", NULL);
}

static void test_unknown_routes_and_methods(void **state)
{
	struct fx *f = *state;
	static const char *const missing[] = {"/",
					      "/v1",
					      "/v2/tasks",
					      "/v1/tasks/",
					      "/v1/tasks//x",
					      "/v1/taskss",
					      "/healthz/",
					      "/v1/tasks/tsk_x/logs/x",
					      "",
					      "v1/tasks"};
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++)
		expect_error(call(f, "GET", missing[i], NULL, NULL), 404, "not_found", NULL);
	expect_error(call(f, "GET", NULL, NULL, NULL), 404, "not_found", NULL);

	struct reply rep = call(f, "DELETE", "/v1/tasks", NULL, NULL);
	assert_string_equal(rep.r.allow, "GET, POST");
	expect_error(rep, 405, "method_not_allowed", NULL);
	char id[TASK_ID_SIZE];
	assert_int_equal(task_id_new(id), 0);
	rep = call(f, "PUT", path_of(id, ""), NULL, "{}");
	assert_string_equal(rep.r.allow, "GET, DELETE");
	expect_error(rep, 405, "method_not_allowed", NULL);
	rep = call(f, "GET", path_of(id, "/cancel"), NULL, NULL);
	assert_string_equal(rep.r.allow, "POST");
	expect_error(rep, 405, "method_not_allowed", NULL);
	rep = call(f, "POST", path_of(id, "/logs"), NULL, NULL);
	assert_string_equal(rep.r.allow, "GET");
	expect_error(rep, 405, "method_not_allowed", NULL);
	rep = call(f, "get", "/healthz", NULL, NULL); /* methods are case-sensitive */
	expect_error(rep, 405, "method_not_allowed", NULL);
}

static void test_route_table(void **state)
{
	(void)state;
	size_t n;
	const struct api_route *routes = api_routes(&n);
	assert_int_equal(n, API_ROUTE_COUNT);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(routes[i].id, (enum api_route_id)i);
	struct api_match m;
	api_route_match("GET", "/v1/tasks/tsk_abc/events", &m);
	assert_non_null(m.route);
	assert_int_equal(m.route->id, API_ROUTE_TASK_EVENTS);
	assert_int_equal(m.param_len, 7);
	assert_memory_equal(m.param, "tsk_abc", 7);
	api_route_match("POST", "/v1/tasks", &m);
	assert_int_equal(m.route->id, API_ROUTE_TASKS_CREATE);
	assert_null(m.param);
	api_route_match("PATCH", "/v1/tasks", &m);
	assert_null(m.route);
	assert_true(m.path_known);
	api_route_match("GET", "/nope", &m);
	assert_null(m.route);
	assert_false(m.path_known);
	for (int c = 0; c < API_ERR_COUNT; c++) { /* the table is complete */
		assert_non_null(api_error_name((enum api_error_code)c));
		assert_true(api_error_status((enum api_error_code)c) >= 400);
	}
	assert_null(api_error_name(API_ERR_COUNT));
}

/* ---- create and get ---------------------------------------------------- */

static void test_create_and_get(void **state)
{
	struct fx *f = *state;
	struct reply rep = call(f, "POST", "/v1/tasks", NULL,
				"{\"command\":[\"echo\",\"hi\"],\"metadata\":{\"who\":\"me\"},"
				"\"limits\":{\"cpus\":0.5},\"env\":{\"SECRET\":\"s\"}}");
	assert_int_equal(rep.r.status, 201);
	assert_int_equal(f->submitted, 1);
	json_t *t = rep.json;
	char id[TASK_ID_SIZE];
	snprintf(id, sizeof(id), "%s", str(t, "id"));
	assert_true(task_id_is_valid(id));
	assert_string_equal(str(t, "status"), "queued");
	assert_int_equal(num(t, "attempt"), 0);
	assert_int_equal(num(t, "max_attempts"), 1);
	assert_true(json_is_null(json_object_get(t, "exit_code")));
	assert_true(json_is_null(json_object_get(t, "error")));
	assert_string_equal(str(t, "created_at"), "2023-11-14T22:13:20.123Z");
	assert_true(json_is_null(json_object_get(t, "started_at")));
	assert_true(json_is_null(json_object_get(t, "finished_at")));
	assert_true(json_is_false(json_object_get(t, "cancel_requested")));
	char *s = json_dumps(json_object_get(t, "command"), JSON_COMPACT);
	assert_string_equal(s, "[\"echo\",\"hi\"]");
	free(s);
	s = json_dumps(json_object_get(t, "limits"), JSON_COMPACT);
	assert_string_equal(s, "{\"cpus\":0.5,\"disk_mb\":1024,\"memory_mb\":512,\"pids\":256,"
			       "\"state_mb\":256,\"timeout_s\":null}");
	free(s);
	s = json_dumps(json_object_get(t, "retry_on"), JSON_COMPACT);
	assert_string_equal(s, "[\"lost\"]");
	free(s);
	assert_string_equal(str(json_object_get(t, "metadata"), "who"), "me");
	assert_int_equal(json_object_size(json_object_get(t, "progress")), 0);
	assert_null(json_object_get(t, "env")); /* env may hold secrets: not shown */
	reply_free(&rep);

	/* the stored spec is the canonical one */
	struct task task = {0};
	struct error err = {0};
	assert_int_equal(store_task_get(f->st, id, &task, &err), 0);
	assert_non_null(strstr(task.spec_json, "\"env\":{\"SECRET\":\"s\"}"));
	assert_non_null(strstr(task.spec_json, "\"retry_on\":[\"lost\"]"));
	task_release(&task);

	rep = call(f, "GET", path_of(id, ""), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(str(rep.json, "id"), id);
	assert_string_equal(str(rep.json, "status"), "queued");
	reply_free(&rep);
}

static void test_create_errors(void **state)
{
	struct fx *f = *state;
	/* what this host allows one task: the request's own maximums are larger */
	const struct api_host_limits host = {
	    .memory_bytes = 1ULL << 30, .disk_bytes = 2ULL << 30, .pids = 5000};
	f->ctx.host = &host;
	expect_error(call(f, "POST", "/v1/tasks", NULL,
			  "{\"command\":[\"a\"],\"limits\":{\"memory_mb\":1025}}"),
		     400, "invalid_field", "limits.memory_mb");
	expect_error(call(f, "POST", "/v1/tasks", NULL,
			  "{\"command\":[\"a\"],\"limits\":{\"disk_mb\":2049}}"),
		     400, "invalid_field", "limits.disk_mb");
	expect_error(
	    call(f, "POST", "/v1/tasks", NULL, "{\"command\":[\"a\"],\"limits\":{\"pids\":5001}}"),
	    400, "invalid_field", "limits.pids");
	struct reply ok = call(f, "POST", "/v1/tasks", NULL,
			       "{\"command\":[\"a\"],\"limits\":{\"memory_mb\":1024,"
			       "\"disk_mb\":2048,\"pids\":5000}}");
	assert_int_equal(ok.r.status, 201);
	reply_free(&ok);
	f->ctx.host = NULL;
	expect_error(call(f, "POST", "/v1/tasks", NULL, "{"), 400, "invalid_json", NULL);
	expect_error(call(f, "POST", "/v1/tasks", NULL, ""), 400, "invalid_json", NULL);
	expect_error(call(f, "POST", "/v1/tasks", NULL, "{}"), 400, "missing_field", "command");
	expect_error(call(f, "POST", "/v1/tasks", NULL,
			  "{\"command\":[\"a\"],\"limits\":{\"memroy_mb\":1}}"),
		     400, "unknown_field", "limits.memroy_mb");
	expect_error(
	    call(f, "POST", "/v1/tasks", NULL, "{\"command\":[\"a\"],\"max_attempts\":1.5}"), 400,
	    "invalid_field", "max_attempts");
	static const char body[] = "{\"command\":[\"a\"]}";
	expect_error(call_full(f, "POST", "/v1/tasks", NULL, body, strlen(body), NULL), 415,
		     "unsupported_media_type", NULL);
	expect_error(call_full(f, "POST", "/v1/tasks", NULL, body, strlen(body), "text/plain"), 415,
		     "unsupported_media_type", NULL);
	expect_error(
	    call_full(f, "POST", "/v1/tasks", NULL, body, strlen(body), "application/jsonx"), 415,
	    "unsupported_media_type", NULL);
	static const char *const json_types[] = {"application/json", "Application/JSON",
						 "application/json; charset=utf-8",
						 " application/json ;charset=UTF-8"};
	for (size_t i = 0; i < sizeof(json_types) / sizeof(json_types[0]); i++) {
		struct reply rep =
		    call_full(f, "POST", "/v1/tasks", NULL, body, strlen(body), json_types[i]);
		assert_int_equal(rep.r.status, 201);
		reply_free(&rep);
	}
	/* one byte past the cap: 413, whatever the body holds */
	char *big = calloc(1, API_BODY_MAX + 1);
	assert_non_null(big);
	memset(big, ' ', API_BODY_MAX + 1);
	expect_error(
	    call_full(f, "POST", "/v1/tasks", NULL, big, API_BODY_MAX + 1, "application/json"), 413,
	    "body_too_large", NULL);
	memcpy(big, body, strlen(body)); /* at the cap: parsed (the rest is spaces) */
	struct reply rep =
	    call_full(f, "POST", "/v1/tasks", NULL, big, API_BODY_MAX, "application/json");
	assert_int_equal(rep.r.status, 201);
	reply_free(&rep);
	free(big);
	assert_int_equal(f->submitted, 6); /* five, and the one at the host's limits */
}

static void test_get_errors(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	assert_int_equal(task_id_new(id), 0);
	expect_error(call(f, "GET", path_of(id, ""), NULL, NULL), 404, "not_found", NULL);
	static const char *const bad_ids[] = {
	    "nope",
	    "tsk_",
	    "tsk_0123456789abcdefghjkmnpqr",
	    "tsk_0123456789abcdefghjkmnpqrst",
	    "tsk_0123456789abcdefghjkmnpqri",
	    "TSK_0123456789abcdefghjkmnpqrs",
	    "tsk_0123456789abcdefghjkmnpqrs0123456789abcdefghjkmnpqrs0123456789",
	    "..",
	    "%2e%2e"};
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		expect_error(call(f, "GET", path_of(bad_ids[i], ""), NULL, NULL), 400, "invalid_id",
			     NULL);
		expect_error(call(f, "POST", path_of(bad_ids[i], "/cancel"), NULL, NULL), 400,
			     "invalid_id", NULL);
		expect_error(call(f, "GET", path_of(bad_ids[i], "/logs"), NULL, NULL), 400,
			     "invalid_id", NULL);
		expect_error(call(f, "GET", path_of(bad_ids[i], "/events"), NULL, NULL), 400,
			     "invalid_id", NULL);
	}
	expect_error(call(f, "GET", path_of(id, ""), "x=1", NULL), 400, "unknown_field", "x");
}

/* ---- list -------------------------------------------------------------- */

/* GET /v1/tasks?query: the ids in order, and next ("" for null). */
static size_t list(struct fx *f, const char *query, char ids[][TASK_ID_SIZE], char *next)
{
	struct reply rep = call(f, "GET", "/v1/tasks", query, NULL);
	if (rep.r.status != 200)
		fail_msg("list %s: %s", query, rep.r.body);
	json_t *tasks = json_object_get(rep.json, "tasks");
	json_t *t;
	size_t i;
	json_array_foreach(tasks, i, t) snprintf(ids[i], TASK_ID_SIZE, "%s", str(t, "id"));
	json_t *n = json_object_get(rep.json, "next");
	assert_true(json_is_null(n) || json_is_string(n));
	snprintf(next, TASK_ID_SIZE, "%s", json_is_null(n) ? "" : json_string_value(n));
	size_t count = json_array_size(tasks);
	reply_free(&rep);
	return count;
}

static void test_list_and_pages(void **state)
{
	struct fx *f = *state;
	char made[5][TASK_ID_SIZE], got[64][TASK_ID_SIZE], next[TASK_ID_SIZE];
	for (int i = 0; i < 5; i++) {
		fake_now = NOW + i;
		create(f, "{\"command\":[\"true\"]}", made[i]);
	}
	assert_int_equal(list(f, NULL, got, next), 5);
	for (int i = 0; i < 5; i++)
		assert_string_equal(got[i], made[i]);
	assert_string_equal(next, "");
	assert_int_equal(list(f, "limit=5", got, next), 5);
	assert_string_equal(next, ""); /* exactly full, nothing more */

	char query[96];
	size_t seen = 0;
	snprintf(query, sizeof(query), "limit=2");
	static const size_t sizes[] = {2, 2, 1};
	for (int p = 0; p < 3; p++) {
		size_t n = list(f, query, got, next);
		assert_int_equal(n, sizes[p]);
		for (size_t i = 0; i < n; i++)
			assert_string_equal(got[i], made[seen++]);
		if (p < 2)
			assert_string_equal(next, got[n - 1]);
		else
			assert_string_equal(next, "");
		snprintf(query, sizeof(query), "limit=2&after=%s", next);
	}

	/* statuses */
	struct task t = {0};
	struct error err = {0};
	assert_int_equal(store_task_claim(f->st, NOW + 10, &t, &err), 0);
	assert_string_equal(t.id, made[0]);
	task_release(&t);
	assert_int_equal(list(f, "status=running", got, next), 1);
	assert_string_equal(got[0], made[0]);
	assert_int_equal(list(f, "status=queued", got, next), 4);
	assert_int_equal(list(f, "status=running,queued&limit=50", got, next), 5);
	assert_int_equal(
	    list(f, "status=succeeded,failed,oom_killed,timed_out,cancelled,lost", got, next), 0);
	assert_int_equal(list(f, "status=queued&limit=3", got, next), 3);
	assert_string_equal(next, made[3]);
	snprintf(query, sizeof(query), "status=queued&limit=3&after=%s", next);
	assert_int_equal(list(f, query, got, next), 1);
	assert_string_equal(got[0], made[4]);
	assert_int_equal(list(f, "limit=1000&status=running%2Cqueued", got, next), 5);

	static const struct {
		const char *query, *code, *field;
	} bad[] = {
	    {"status=bogus", "invalid_field", "status"},
	    {"status=", "invalid_field", "status"},
	    {"status=queued,", "invalid_field", "status"},
	    {"status=queued,,running", "invalid_field", "status"},
	    {"status=QUEUED", "invalid_field", "status"},
	    {"limit=0", "invalid_field", "limit"},
	    {"limit=1001", "invalid_field", "limit"},
	    {"limit=-1", "invalid_field", "limit"},
	    {"limit=abc", "invalid_field", "limit"},
	    {"limit=", "invalid_field", "limit"},
	    {"limit", "invalid_field", "limit"},
	    {"status", "invalid_field", "status"},
	    {"bogus", "unknown_field", "bogus"},
	    {"limit=99999999999999999999999", "invalid_field", "limit"},
	    {"limit=1&limit=2", "invalid_field", "limit"},
	    {"after=nope", "invalid_field", "after"},
	    {"after=tsk_0000000000000000000000000a", "invalid_field", "after"},
	    {"foo=1", "unknown_field", "foo"},
	    {"follow=1", "unknown_field", "follow"},
	    {"a%20b=1", "unknown_field", "[\"a b\"]"},
	    {"limit=%zz", "invalid_field", "query"},
	    {"limit=%00", "invalid_field", "query"},
	    {"=1", "invalid_field", "query"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_error(call(f, "GET", "/v1/tasks", bad[i].query, NULL), 400, bad[i].code,
			     bad[i].field);
	char *longq = malloc(API_QUERY_MAX + 2);
	memset(longq, 'a', API_QUERY_MAX + 1);
	longq[API_QUERY_MAX + 1] = '\0';
	expect_error(call(f, "GET", "/v1/tasks", longq, NULL), 400, "invalid_field", "query");
	free(longq);
	/* empty parts are skipped */
	assert_int_equal(list(f, "&&limit=2&", got, next), 2);
}

/* ---- cancel ------------------------------------------------------------ */

static void test_cancel(void **state)
{
	struct fx *f = *state;
	char queued[TASK_ID_SIZE], running[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", running);
	create(f, "{\"command\":[\"b\"]}", queued);
	struct task t = {0};
	struct error err = {0};
	assert_int_equal(store_task_claim(f->st, NOW + 1, &t, &err), 0);
	assert_string_equal(t.id, running);
	task_release(&t);

	fake_now = NOW + 500;
	struct reply rep = call(f, "POST", path_of(queued, "/cancel"), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(str(rep.json, "status"), "cancelled");
	assert_string_equal(str(rep.json, "finished_at"), "2023-11-14T22:13:20.623Z");
	reply_free(&rep);
	assert_int_equal(f->cancels, 0); /* nothing to kill */

	rep = call(f, "POST", path_of(running, "/cancel"), NULL, "ignored");
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(str(rep.json, "status"), "running");
	assert_true(json_is_true(json_object_get(rep.json, "cancel_requested")));
	assert_string_equal(str(rep.json, "started_at"), "2023-11-14T22:13:20.124Z");
	reply_free(&rep);
	assert_int_equal(f->cancels, 1);
	assert_string_equal(f->cancelled, running);

	expect_error(call(f, "POST", path_of(queued, "/cancel"), NULL, NULL), 409, "conflict",
		     NULL);
	assert_int_equal(store_task_end_attempt(f->st, running, 1, TASK_CANCELLED, -1, NULL,
						NOW + 2, NULL, &err),
			 0);
	expect_error(call(f, "POST", path_of(running, "/cancel"), NULL, NULL), 409, "conflict",
		     NULL);
	assert_int_equal(f->cancels, 1);
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	expect_error(call(f, "POST", path_of(unknown, "/cancel"), NULL, NULL), 404, "not_found",
		     NULL);
	expect_error(call(f, "POST", path_of(queued, "/cancel"), "now=1", NULL), 400,
		     "unknown_field", "now");
}

/* ---- delete ------------------------------------------------------------ */

static bool task_dir_exists(struct fx *f, const char *id)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/tasks/%s", f->state, id);
	return stat(path, &st) == 0;
}

static void write_attempt(struct fx *f, const char *id, int n, const char *output, const char *len);
static void run_attempt(struct fx *f, const char *id, enum task_status end);

static void test_delete(void **state)
{
	struct fx *f = *state;
	char ended[TASK_ID_SIZE], running[TASK_ID_SIZE], queued[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", ended);
	run_attempt(f, ended, TASK_SUCCEEDED);
	write_attempt(f, ended, 1, "hi\n", "3");
	create(f, "{\"command\":[\"b\"]}", running);
	create(f, "{\"command\":[\"c\"]}", queued);
	struct task t = {0};
	struct error err = {0};
	assert_int_equal(store_task_claim(f->st, NOW, &t, &err), 0);
	assert_string_equal(t.id, running);
	task_release(&t);
	write_attempt(f, running, 1, "x", "1");

	/* not ended: 409, and nothing goes */
	const char *const live[] = {running, queued};
	for (size_t i = 0; i < 2; i++) {
		struct reply rep = call(f, "DELETE", path_of(live[i], ""), NULL, NULL);
		const char *m = str(json_object_get(rep.json, "error"), "message");
		assert_non_null(strstr(m, "cancel it first"));
		expect_error(rep, 409, "conflict", NULL);
		rep = call(f, "GET", path_of(live[i], ""), NULL, NULL);
		assert_int_equal(rep.r.status, 200);
		reply_free(&rep);
	}
	assert_true(task_dir_exists(f, running));

	assert_true(task_dir_exists(f, ended));
	struct reply rep = call(f, "DELETE", path_of(ended, ""), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(str(rep.json, "id"), ended);
	assert_true(json_is_true(json_object_get(rep.json, "deleted")));
	reply_free(&rep);
	assert_false(task_dir_exists(f, ended));
	expect_error(call(f, "GET", path_of(ended, ""), NULL, NULL), 404, "not_found", NULL);
	expect_error(call(f, "GET", path_of(ended, "/logs"), NULL, NULL), 404, "not_found", NULL);
	expect_error(call(f, "DELETE", path_of(ended, ""), NULL, NULL), 404, "not_found", NULL);
	expect_error(call(f, "DELETE", path_of("tsk_x", ""), NULL, NULL), 400, "invalid_id", NULL);
	expect_error(call(f, "DELETE", path_of(queued, ""), "force=1", NULL), 400, "unknown_field",
		     "force");

	/* an ended task without a directory (it never ran) goes as well */
	rep = call(f, "POST", path_of(queued, "/cancel"), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	reply_free(&rep);
	rep = call(f, "DELETE", path_of(queued, ""), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	reply_free(&rep);
	expect_error(call(f, "GET", path_of(queued, ""), NULL, NULL), 404, "not_found", NULL);
}

/* ---- events ------------------------------------------------------------ */

static json_t *events(struct fx *f, const char *id, const char *query, struct reply *rep)
{
	*rep = call(f, "GET", path_of(id, "/events"), query, NULL);
	if (rep->r.status != 200)
		fail_msg("events: %s", rep->r.body);
	assert_int_equal(json_object_size(rep->json), 1);
	return json_object_get(rep->json, "events");
}

static void test_events(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", id);
	struct reply rep;
	json_t *ev = events(f, id, NULL, &rep);
	assert_int_equal(json_array_size(ev), 0);
	reply_free(&rep);

	struct task t = {0};
	struct error err = {0};
	assert_int_equal(store_task_claim(f->st, NOW + 1, &t, &err), 0);
	task_release(&t);
	for (int i = 0; i < 3; i++) {
		char data[64];
		snprintf(data, sizeof(data), "{\"step\":%d,\"big\":1.00000000000000000000001}", i);
		assert_int_equal(store_progress_append(f->st, id, 1, data, NOW + 2 + i, NULL, &err),
				 0);
	}
	assert_int_equal(
	    store_task_end_attempt(f->st, id, 1, TASK_FAILED, 3, "boom", NOW + 9, NULL, &err), 0);

	ev = events(f, id, NULL, &rep);
	assert_int_equal(json_array_size(ev), 5);
	json_t *first = json_array_get(ev, 0), *p = json_array_get(ev, 1);
	assert_int_equal(num(first, "seq"), 1);
	assert_int_equal(num(first, "attempt"), 1);
	assert_string_equal(str(first, "type"), "status");
	assert_string_equal(str(json_object_get(first, "data"), "status"), "running");
	assert_string_equal(str(first, "time"), "2023-11-14T22:13:20.124Z");
	assert_string_equal(str(p, "type"), "progress");
	assert_int_equal(num(json_object_get(p, "data"), "step"), 0);
	assert_int_equal(json_object_size(p), 5);
	/* data is copied as stored: every digit kept */
	assert_non_null(strstr(rep.r.body, "\"big\":1.00000000000000000000001"));
	reply_free(&rep);

	ev = events(f, id, "after=2", &rep);
	assert_int_equal(json_array_size(ev), 3);
	assert_int_equal(num(json_array_get(ev, 0), "seq"), 3);
	reply_free(&rep);
	ev = events(f, id, "after=2&limit=2", &rep);
	assert_int_equal(json_array_size(ev), 2);
	assert_int_equal(num(json_array_get(ev, 1), "seq"), 4);
	reply_free(&rep);
	ev = events(f, id, "after=5", &rep);
	assert_int_equal(json_array_size(ev), 0);
	reply_free(&rep);

	/* the task now shows the end */
	rep = call(f, "GET", path_of(id, ""), NULL, NULL);
	assert_string_equal(str(rep.json, "status"), "failed");
	assert_int_equal(num(rep.json, "exit_code"), 3);
	assert_string_equal(str(rep.json, "error"), "boom");
	assert_int_equal(num(json_object_get(rep.json, "progress"), "step"), 2);
	assert_string_equal(str(rep.json, "finished_at"), "2023-11-14T22:13:20.132Z");
	reply_free(&rep);

	expect_error(call(f, "GET", path_of(id, "/events"), "after=-1", NULL), 400, "invalid_field",
		     "after");
	expect_error(call(f, "GET", path_of(id, "/events"), "limit=0", NULL), 400, "invalid_field",
		     "limit");
	expect_error(call(f, "GET", path_of(id, "/events"), "limit=1001", NULL), 400,
		     "invalid_field", "limit");
	expect_error(call(f, "GET", path_of(id, "/events"), "status=queued", NULL), 400,
		     "unknown_field", "status");
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	expect_error(call(f, "GET", path_of(unknown, "/events"), NULL, NULL), 404, "not_found",
		     NULL);
}

/* ---- logs -------------------------------------------------------------- */

static void write_attempt(struct fx *f, const char *id, int n, const char *output, const char *len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s", f->state);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/tasks", f->state);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/tasks/%s", f->state, id);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/tasks/%s/attempt-%d", f->state, id, n);
	assert_int_equal(mkdir(path, 0700), 0);
	char file[600];
	FILE *fp;
	if (output) {
		snprintf(file, sizeof(file), "%s/output", path);
		fp = fopen(file, "w");
		assert_non_null(fp);
		fputs(output, fp);
		fclose(fp);
	}
	if (len) {
		snprintf(file, sizeof(file), "%s/output.len", path);
		fp = fopen(file, "w");
		assert_non_null(fp);
		fputs(len, fp);
		fclose(fp);
	}
}

static void expect_logs(struct fx *f, const char *id, const char *want)
{
	struct reply rep = call(f, "GET", path_of(id, "/logs"), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(rep.r.content_type, "text/plain; charset=utf-8");
	assert_int_equal(rep.r.body_len, strlen(want));
	assert_string_equal(rep.r.body, want);
	reply_free(&rep);
}

/* Claim id and end its attempt with end. */
static void run_attempt(struct fx *f, const char *id, enum task_status end)
{
	struct task t = {0};
	struct error err = {0};
	assert_int_equal(store_task_claim(f->st, NOW, &t, &err), 0);
	assert_string_equal(t.id, id);
	assert_int_equal(
	    store_task_end_attempt(f->st, id, t.attempt, end, 1, NULL, NOW, NULL, &err), 0);
	task_release(&t);
}

static void test_logs(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE], two[TASK_ID_SIZE], three[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", id);
	expect_logs(f, id, ""); /* never started */
	run_attempt(f, id, TASK_SUCCEEDED);
	expect_logs(f, id, ""); /* no directory yet */
	write_attempt(f, id, 1, "hello\nworld\n", NULL);
	expect_logs(f, id, "hello\nworld\n");
	char p[600];
	snprintf(p, sizeof(p), "%s/tasks/%s/attempt-1/output.len", f->state, id);
	FILE *fp = fopen(p, "w");
	fputs("8\n", fp);
	fclose(fp);
	expect_logs(f, id, "hello\nwo"); /* only what is durable */
	fp = fopen(p, "w");
	fputs("999", fp); /* longer than the file: the file */
	fclose(fp);
	expect_logs(f, id, "hello\nworld\n");

	create(f, "{\"command\":[\"a\"],\"max_attempts\":2,\"retry_on\":[\"failed\"]}", two);
	run_attempt(f, two, TASK_FAILED);
	run_attempt(f, two, TASK_FAILED);
	write_attempt(f, two, 1, "first, no newline", NULL);
	write_attempt(f, two, 2, "second\n", "7");
	expect_logs(f, two,
		    "[agentbox: attempt 1]\nfirst, no newline\n[agentbox: attempt 2]\n"
		    "second\n");

	create(f, "{\"command\":[\"a\"],\"max_attempts\":3,\"retry_on\":[\"lost\"]}", three);
	run_attempt(f, three, TASK_LOST);
	run_attempt(f, three, TASK_LOST);
	run_attempt(f, three, TASK_LOST);
	write_attempt(f, three, 1, NULL, NULL); /* the directory, no output */
	write_attempt(f, three, 3, "x\n", "0"); /* nothing durable yet */
	expect_logs(f, three,
		    "[agentbox: attempt 1]\n[agentbox: attempt 2]\n[agentbox: attempt 3]\n");

	struct reply rep = call(f, "GET", path_of(id, "/logs"), "follow=0", NULL);
	assert_int_equal(rep.r.status, 200);
	reply_free(&rep);
	expect_error(call(f, "GET", path_of(id, "/logs"), "follow=2", NULL), 400, "invalid_field",
		     "follow");
	expect_error(call(f, "GET", path_of(id, "/logs"), "tail=2", NULL), 400, "unknown_field",
		     "tail");
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	expect_error(call(f, "GET", path_of(unknown, "/logs"), NULL, NULL), 404, "not_found", NULL);
	/* no state directory is the server's fault */
	f->ctx.state_dir = NULL;
	expect_error(call(f, "GET", path_of(id, "/logs"), NULL, NULL), 500, "internal", NULL);
}

static void test_logs_cap(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", id);
	run_attempt(f, id, TASK_SUCCEEDED);
	write_attempt(f, id, 1, "head", NULL);
	char p[600];
	snprintf(p, sizeof(p), "%s/tasks/%s/attempt-1/output", f->state, id);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "tail", 4, (off_t)API_LOGS_MAX + 96), 4); /* sparse */
	close(fd);
	struct reply rep = call(f, "GET", path_of(id, "/logs"), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	const char *notice = "[agentbox: output truncated: the first 100 bytes are not shown]\n";
	assert_int_equal(rep.r.body_len, strlen(notice) + API_LOGS_MAX);
	assert_memory_equal(rep.r.body, notice, strlen(notice));
	assert_memory_equal(rep.r.body + rep.r.body_len - 4, "tail", 4);
	reply_free(&rep);
}

/* ---- auth -------------------------------------------------------------- */

/* A key of tenant with role (expiring at expires_at; 0: never) in f's store: its text. */
static void make_key(struct fx *f, const char *tenant, enum key_role role, int64_t expires_at,
		     char text[AUTH_KEY_TEXT_MAX], char id[KEY_ID_SIZE])
{
	struct auth_key key;
	struct error err = {0};
	assert_int_equal(auth_key_new(text, &key, &err), 0);
	struct key_record k = {.role = role, .created_at = NOW, .expires_at = expires_at};
	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	memcpy(k.id, key.id, sizeof(k.id));
	memcpy(k.hash, key.hash, sizeof(k.hash));
	assert_int_equal(store_key_insert(f->st, &k, &err), 0);
	if (id)
		memcpy(id, key.id, KEY_ID_SIZE);
}

static void test_auth(void **state)
{
	struct fx *f = *state;
	char admin[AUTH_KEY_TEXT_MAX], member[AUTH_KEY_TEXT_MAX], old[AUTH_KEY_TEXT_MAX];
	char header[AUTH_KEY_TEXT_MAX + 16], bad[AUTH_KEY_TEXT_MAX + 16], id[KEY_ID_SIZE];
	struct error err = {0};
	assert_int_equal(store_tenant_insert(f->st, "team-a", NOW, NULL, &err), 0);
	make_key(f, TENANT_DEFAULT, KEY_ROLE_ADMIN, 0, admin, NULL);
	make_key(f, "team-a", KEY_ROLE_MEMBER, 0, member, id);
	make_key(f, "team-a", KEY_ROLE_MEMBER, NOW - 1, old, NULL); /* expired */
	f->ctx.tcp = true;
	/* the admin key with its secret's last character changed */
	snprintf(bad, sizeof(bad), "Bearer %s", admin);
	bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == 'a' ? 'b' : 'a';
	char spaced[sizeof(header) + 1], trailing[sizeof(header) + 1], basic[sizeof(header)];
	snprintf(spaced, sizeof(spaced), "Bearer  %s", admin);
	snprintf(trailing, sizeof(trailing), "Bearer %s ", admin);
	snprintf(basic, sizeof(basic), "Basic %s", admin);
	char expired[sizeof(header)];
	snprintf(expired, sizeof(expired), "Bearer %s", old);
	const char *const wrong[] = {NULL,
				     "",
				     "Bearer",
				     "Bearer ",
				     bad,
				     spaced,
				     trailing,
				     basic,
				     admin,
				     expired,
				     "Bearer s3cret-token"};
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		f->auth = wrong[i];
		struct reply rep = call(f, "GET", "/v1/tasks", NULL, NULL);
		assert_string_equal(rep.r.www_authenticate, "Bearer");
		expect_error(rep, 401, "unauthorized", NULL);
		/* before routing, body size or validation */
		expect_error(call(f, "GET", "/nope", NULL, NULL), 401, "unauthorized", NULL);
		expect_error(call(f, "POST", "/v1/tasks", NULL, "{"), 401, "unauthorized", NULL);
		/* health is public */
		struct reply h = call(f, "GET", "/healthz", NULL, NULL);
		assert_int_equal(h.r.status, 200);
		reply_free(&h);
	}
	snprintf(header, sizeof(header), "Bearer %s", admin);
	f->auth = header;
	struct reply rep = call(f, "GET", "/v1/tasks", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(rep.r.www_authenticate, "");
	reply_free(&rep);
	expect_error(call(f, "GET", "/nope", NULL, NULL), 404, "not_found", NULL);

	/* a member: its own tenant's, and no admin route */
	snprintf(header, sizeof(header), "Bearer %s", member);
	rep = call(f, "GET", "/v1/me", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(json_string_value(json_object_get(rep.json, "tenant")), "team-a");
	assert_string_equal(json_string_value(json_object_get(rep.json, "role")), "member");
	assert_string_equal(json_string_value(json_object_get(rep.json, "key_id")), id);
	reply_free(&rep);
	expect_error(call(f, "GET", "/v1/tenants", NULL, NULL), 403, "forbidden", NULL);
	expect_error(call(f, "POST", "/v1/keys", NULL, "{\"tenant\":\"team-a\"}"), 403, "forbidden",
		     NULL);
	/* revoked: refused at its next request */
	assert_int_equal(store_key_revoke(f->st, id, NOW, &err), 0);
	expect_error(call(f, "GET", "/v1/me", NULL, NULL), 401, "unauthorized", NULL);

	/* an older state directory's token: the legacy admin key, by its hash */
	struct key_record legacy = {.tenant = TENANT_DEFAULT,
				    .role = KEY_ROLE_ADMIN,
				    .created_at = NOW,
				    .id = API_LEGACY_KEY_ID};
	auth_token_hash("s3cret-token", legacy.hash);
	assert_int_equal(store_key_insert(f->st, &legacy, &err), 0);
	f->auth = "Bearer s3cret-token";
	rep = call(f, "GET", "/v1/me", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(json_string_value(json_object_get(rep.json, "role")), "admin");
	reply_free(&rep);
	f->auth = "Bearer s3cret-tokeN";
	expect_error(call(f, "GET", "/v1/me", NULL, NULL), 401, "unauthorized", NULL);

	/* the unix socket: root is an admin; a mapped user a member; anyone else no one */
	f->ctx.tcp = false;
	f->auth = NULL;
	f->ctx.peer_uid = 0;
	rep = call(f, "GET", "/v1/tenants", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	reply_free(&rep);
	f->ctx.peer_uid = 4321;
	expect_error(call(f, "GET", "/v1/tasks", NULL, NULL), 401, "unauthorized", NULL);
	struct api_local_user users[] = {{.uid = 4321, .tenant = "team-a"}};
	f->ctx.local_users = users;
	f->ctx.nlocal_users = 1;
	rep = call(f, "GET", "/v1/me", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(json_string_value(json_object_get(rep.json, "tenant")), "team-a");
	assert_int_equal(json_integer_value(json_object_get(rep.json, "uid")), 4321);
	reply_free(&rep);
	expect_error(call(f, "DELETE", "/v1/tenants/team-a", NULL, NULL), 403, "forbidden", NULL);
	f->ctx.peer_uid = 0;
	f->ctx.local_users = NULL;
	f->ctx.nlocal_users = 0;
}

/* A member sees its own tenant's tasks alone: another's answers as an unknown id does. */
static void test_tenants_see_their_own(void **state)
{
	struct fx *f = *state;
	char a[AUTH_KEY_TEXT_MAX], b[AUTH_KEY_TEXT_MAX], ha[AUTH_KEY_TEXT_MAX + 16],
	    hb[AUTH_KEY_TEXT_MAX + 16];
	struct error err = {0};
	assert_int_equal(store_tenant_insert(f->st, "team-a", NOW, NULL, &err), 0);
	assert_int_equal(store_tenant_insert(f->st, "team-b", NOW, NULL, &err), 0);
	make_key(f, "team-a", KEY_ROLE_MEMBER, 0, a, NULL);
	make_key(f, "team-b", KEY_ROLE_MEMBER, 0, b, NULL);
	snprintf(ha, sizeof(ha), "Bearer %s", a);
	snprintf(hb, sizeof(hb), "Bearer %s", b);
	f->ctx.tcp = true;
	f->auth = ha;
	char id[TASK_ID_SIZE], unknown[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", id);
	assert_int_equal(task_id_new(unknown), 0);
	struct reply rep = call(f, "GET", path_of(id, ""), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	reply_free(&rep);

	f->auth = hb;
	static const char *const routes[][2] = {
	    {"GET", ""}, {"POST", "/cancel"}, {"GET", "/events"}, {"GET", "/logs"}, {"DELETE", ""}};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		struct reply theirs = call(f, routes[i][0], path_of(id, routes[i][1]), NULL, NULL);
		struct reply none =
		    call(f, routes[i][0], path_of(unknown, routes[i][1]), NULL, NULL);
		/* the same words, but for the id: no oracle */
		const char *m1 = str(json_object_get(theirs.json, "error"), "message");
		const char *m2 = str(json_object_get(none.json, "error"), "message");
		assert_non_null(m1);
		assert_non_null(m2);
		char *x = strdup(m1), *y = strdup(m2);
		char *p = strstr(x, id), *q = strstr(y, unknown);
		if (p)
			memset(p, '#', strlen(id));
		if (q)
			memset(q, '#', strlen(unknown));
		assert_string_equal(x, y);
		free(x);
		free(y);
		expect_error(theirs, 404, "not_found", NULL);
		expect_error(none, 404, "not_found", NULL);
	}
	/* a bad query, or body, tells them apart no more: checked only for what one may see */
	expect_error(call(f, "GET", path_of(id, "/events"), "after=-1", NULL), 404, "not_found",
		     NULL);
	expect_error(call(f, "GET", path_of(unknown, "/events"), "after=-1", NULL), 404,
		     "not_found", NULL);
	f->auth = ha;
	expect_error(call(f, "GET", path_of(id, "/events"), "after=-1", NULL), 400, "invalid_field",
		     "after");
	f->auth = hb;
	rep = call(f, "GET", "/v1/tasks", NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(json_array_size(json_object_get(rep.json, "tasks")), 0);
	reply_free(&rep);
	/* a member's ?tenant= changes nothing */
	rep = call(f, "GET", "/v1/tasks", "tenant=team-a", NULL);
	assert_int_equal(json_array_size(json_object_get(rep.json, "tasks")), 0);
	reply_free(&rep);

	/* an admin sees both, and may ask for one tenant's */
	f->ctx.tcp = false;
	f->auth = NULL;
	rep = call(f, "GET", "/v1/tasks", NULL, NULL);
	assert_int_equal(json_array_size(json_object_get(rep.json, "tasks")), 1);
	reply_free(&rep);
	rep = call(f, "GET", "/v1/tasks", "tenant=team-b", NULL);
	assert_int_equal(json_array_size(json_object_get(rep.json, "tasks")), 0);
	reply_free(&rep);
	rep = call(f, "GET", path_of(id, ""), NULL, NULL);
	assert_int_equal(rep.r.status, 200);
	assert_string_equal(json_string_value(json_object_get(rep.json, "tenant")), "team-a");
	reply_free(&rep);
}

/* ---- streams ----------------------------------------------------------- */

static void test_streams(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	create(f, "{\"command\":[\"a\"]}", id);
	struct api_request req = {
	    .method = "GET", .path = path_of(id, "/logs"), .query = "follow=1"};
	assert_true(api_request_wants_stream(&req));
	req.query = "follow=true";
	assert_true(api_request_wants_stream(&req));
	req.query = "follow=0";
	assert_false(api_request_wants_stream(&req));
	req.query = NULL;
	assert_false(api_request_wants_stream(&req));
	req.path = path_of(id, "/events");
	assert_false(api_request_wants_stream(&req));
	req.accept = "text/event-stream";
	assert_true(api_request_wants_stream(&req));
	req.method = "POST";
	assert_false(api_request_wants_stream(&req));
	req.method = "GET";
	req.query = "after=7";

	struct api_stream s;
	struct api_response err;
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), 0);
	assert_int_equal(s.route, API_ROUTE_TASK_EVENTS);
	assert_string_equal(s.id, id);
	assert_int_equal(s.after_seq, 7);
	api_response_release(&err);
	/* a reconnecting client's Last-Event-ID: the later of it and after= */
	req.last_event_id = "12";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), 0);
	assert_int_equal(s.after_seq, 12);
	api_response_release(&err);
	req.last_event_id = "5";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), 0);
	assert_int_equal(s.after_seq, 7);
	api_response_release(&err);
	req.last_event_id = "x";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), -EINVAL);
	assert_int_equal(err.status, 400);
	api_response_release(&err);
	req.last_event_id = NULL;

	req.path = path_of(id, "/logs");
	req.query = "follow=1";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), 0);
	assert_int_equal(s.route, API_ROUTE_TASK_LOGS);
	assert_int_equal(s.offset, 0);
	api_response_release(&err);
	req.query = "follow=1&offset=4096";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), 0);
	assert_int_equal(s.offset, 4096);
	api_response_release(&err);
	req.query = "follow=1&offset=-1";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), -EINVAL);
	assert_int_equal(err.status, 400);
	api_response_release(&err);
	req.query = "follow=1";

	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	req.path = path_of(unknown, "/logs");
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), -EINVAL);
	assert_int_equal(err.status, 404);
	api_response_release(&err);
	req.path = path_of("bad", "/logs");
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), -EINVAL);
	assert_int_equal(err.status, 400);
	api_response_release(&err);
	req.path = path_of(id, "/events");
	req.query = "after=x";
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), -EINVAL);
	assert_int_equal(err.status, 400);
	api_response_release(&err);
	f->ctx.tcp = true; /* and no key */
	req.query = NULL;
	assert_int_equal(api_stream_begin(&f->ctx, &req, &s, &err), -EINVAL);
	assert_int_equal(err.status, 401);
	f->ctx.tcp = false;
	api_response_release(&err);

	struct task_event ev = {.seq = 3,
				.attempt = 2,
				.type = TASK_EVENT_PROGRESS,
				.time = NOW,
				.data_json = "{\"a\":1}"};
	char *json;
	size_t len;
	assert_int_equal(api_event_json(&ev, &json, &len), 0);
	assert_string_equal(json,
			    "{\"seq\":3,\"attempt\":2,\"type\":\"progress\",\"data\":{\"a\":1},"
			    "\"time\":\"2023-11-14T22:13:20.123Z\"}");
	assert_int_equal(len, strlen(json));
	free(json);

	char path[64];
	assert_int_equal(api_output_path("/s", id, 2, "output", path, sizeof(path)), 0);
	assert_int_equal(strncmp(path, "/s/tasks/tsk_", 13), 0);
	assert_string_equal(path + 13 + 26, "/attempt-2/output");
	assert_int_equal(api_output_path("/s", id, 2, "output", path, 10), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_healthz, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unknown_routes_and_methods, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_route_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_and_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_and_pages, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logs_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tenants_see_their_own, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_streams, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
