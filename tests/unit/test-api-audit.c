/*
 * test-api-audit.c - the audit log through api_handle(), with a real
 * store and an injected clock: a member's mutating requests recorded
 * (tenant, key id, route template, target, status, error, source), those
 * refused before their handler too, GETs not; a local user's uid; 401s
 * counted in one row per source, reason and minute; GET /v1/audit, an
 * admin's, its filters, pages and bad values.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"
#include "auth/key.h"

#define NOW 1700000000123 /* 2023-11-14T22:13:20.123Z */

struct fx {
	char dir[128];
	struct store *st;
	struct api_ctx ctx;
	const char *auth;
	char member[AUTH_KEY_TEXT_MAX + 16], admin[AUTH_KEY_TEXT_MAX + 16];
	char member_id[KEY_ID_SIZE];
};

static int64_t fake_now = NOW;
static int64_t now_ms(void)
{
	return fake_now;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

/* A key of tenant with role: "Bearer <key>" into header, its id into id. */
static void make_key(struct fx *f, const char *tenant, enum key_role role, char *header,
		     char id[KEY_ID_SIZE])
{
	char text[AUTH_KEY_TEXT_MAX];
	struct auth_key key;
	struct error err = {0};
	assert_int_equal(auth_key_new(text, &key, &err), 0);
	struct key_record k = {.role = role, .created_at = NOW};
	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	memcpy(k.id, key.id, sizeof(k.id));
	memcpy(k.hash, key.hash, sizeof(k.hash));
	assert_int_equal(store_key_insert(f->st, &k, &err), 0);
	snprintf(header, AUTH_KEY_TEXT_MAX + 16, "Bearer %s", text);
	if (id)
		memcpy(id, key.id, KEY_ID_SIZE);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test-api-audit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	char db[200];
	snprintf(db, sizeof(db), "%s/store.db", f->dir);
	struct error err = {0};
	if (store_open_sqlite(db, &f->st, &err) < 0 ||
	    store_tenant_insert(f->st, "team-a", NOW, NULL, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	fake_now = NOW;
	f->ctx = (struct api_ctx){
	    .store = f->st, .state_dir = f->dir, .now_ms = now_ms, .tcp = true, .peer_uid = -1};
	snprintf(f->ctx.source, sizeof(f->ctx.source), "127.0.0.1");
	make_key(f, "team-a", KEY_ROLE_MEMBER, f->member, f->member_id);
	make_key(f, TENANT_DEFAULT, KEY_ROLE_ADMIN, f->admin, NULL);
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

struct reply {
	int status;
	json_t *json;
};

static struct reply call_as(struct fx *f, const char *auth, const char *method, const char *path,
			    const char *query, const char *body, const char *ctype)
{
	struct api_request req = {.method = method,
				  .path = path,
				  .query = query,
				  .body = body,
				  .body_len = body ? strlen(body) : 0,
				  .content_type = ctype,
				  .authorization = auth};
	struct api_response res = {0};
	assert_int_equal(api_handle(&f->ctx, &req, &res), 0);
	assert_string_equal(res.audit, ""); /* every row was recorded */
	struct reply rep = {.status = res.status};
	json_error_t jerr;
	rep.json = json_loadb(res.body, res.body_len, 0, &jerr);
	assert_non_null(rep.json);
	api_response_release(&res);
	return rep;
}

/* The admin's GET /v1/audit?query: its entries (owned), status 200. */
static json_t *audit(struct fx *f, const char *query)
{
	struct reply rep = call_as(f, f->admin, "GET", "/v1/audit", query, NULL, NULL);
	if (rep.status != 200)
		fail_msg("GET /v1/audit?%s: %d %s", query ? query : "", rep.status,
			 json_dumps(rep.json, 0));
	json_t *v = json_incref(json_object_get(rep.json, "entries"));
	assert_true(json_is_array(v));
	json_decref(rep.json);
	return v;
}

static const char *str(json_t *row, const char *key)
{
	return json_string_value(json_object_get(row, key));
}

static json_int_t num(json_t *row, const char *key)
{
	return json_integer_value(json_object_get(row, key));
}

static void expect_status(struct reply rep, int status)
{
	assert_int_equal(rep.status, status);
	json_decref(rep.json);
}

static void test_mutations_are_recorded(void **state)
{
	struct fx *f = *state;
	struct reply rep = call_as(f, f->member, "POST", "/v1/tasks", NULL,
				   "{\"command\":[\"true\"]}", "application/json");
	assert_int_equal(rep.status, 201);
	char id[TASK_ID_SIZE];
	snprintf(id, sizeof(id), "%s", str(rep.json, "id"));
	json_decref(rep.json);
	/* reads are not recorded */
	expect_status(call_as(f, f->member, "GET", "/v1/tasks", NULL, NULL, NULL), 200);
	char path[128], unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	snprintf(path, sizeof(path), "/v1/tasks/%s/cancel", unknown);
	fake_now = NOW + 5;
	expect_status(call_as(f, f->member, "POST", path, NULL, NULL, NULL), 404);
	fake_now = NOW + 6; /* refused before its handler: 415, 403, 405, 404 of no route */
	expect_status(call_as(f, f->member, "POST", "/v1/tasks", NULL, "{}", "text/plain"), 415);
	expect_status(call_as(f, f->member, "DELETE", "/v1/keys/k2345678abcd", NULL, NULL, NULL),
		      403);
	expect_status(call_as(f, f->member, "PATCH", "/v1/tasks", NULL, NULL, NULL), 405);
	expect_status(call_as(f, f->member, "POST", "/v1/nothing", NULL, NULL, NULL), 404);
	/* a method that changes nothing, and a path that is no id, are not taken in */
	expect_status(call_as(f, f->member, "GET", "/v1/tasks/tsk_bad", NULL, NULL, NULL), 400);

	json_t *rows = audit(f, NULL);
	assert_int_equal(json_array_size(rows), 6);
	json_t *r = json_array_get(rows, 5); /* the oldest: the create */
	assert_string_equal(str(r, "time"), "2023-11-14T22:13:20.123Z");
	assert_string_equal(str(r, "last_time"), "2023-11-14T22:13:20.123Z");
	assert_int_equal(num(r, "count"), 1);
	assert_string_equal(str(r, "tenant"), "team-a");
	assert_string_equal(str(r, "key_id"), f->member_id);
	assert_true(json_is_null(json_object_get(r, "uid")));
	assert_string_equal(str(r, "method"), "POST");
	assert_string_equal(str(r, "route"), "/v1/tasks");
	assert_string_equal(str(r, "target"), id);
	assert_int_equal(num(r, "status"), 201);
	assert_true(json_is_null(json_object_get(r, "error")));
	assert_string_equal(str(r, "source"), "127.0.0.1");
	assert_true(json_is_null(json_object_get(r, "reason")));
	r = json_array_get(rows, 4); /* the 404: its template, not its path; the id it named */
	assert_string_equal(str(r, "route"), "/v1/tasks/{id}/cancel");
	assert_string_equal(str(r, "target"), unknown);
	assert_int_equal(num(r, "status"), 404);
	assert_string_equal(str(r, "error"), "not_found");
	r = json_array_get(rows, 3);
	assert_int_equal(num(r, "status"), 415);
	assert_string_equal(str(r, "error"), "unsupported_media_type");
	r = json_array_get(rows, 2);
	assert_int_equal(num(r, "status"), 403);
	assert_string_equal(str(r, "route"), "/v1/keys/{id}");
	r = json_array_get(rows, 1);
	assert_int_equal(num(r, "status"), 405);
	assert_string_equal(str(r, "method"), "PATCH");
	assert_string_equal(str(r, "route"), "/v1/tasks");
	r = json_array_get(rows, 0);
	assert_int_equal(num(r, "status"), 404);
	assert_true(json_is_null(json_object_get(r, "route"))); /* never the raw path */
	assert_true(json_object_get(r, "id") && num(r, "id") > num(json_array_get(rows, 1), "id"));
	json_decref(rows);
}

static void test_local_users_and_creates(void **state)
{
	struct fx *f = *state;
	f->ctx.tcp = false;
	f->ctx.peer_uid = 0;
	snprintf(f->ctx.source, sizeof(f->ctx.source), "unix:uid=0");
	struct reply rep = call_as(f, NULL, "POST", "/v1/tenants", NULL, "{\"name\":\"team-b\"}",
				   "application/json");
	assert_int_equal(rep.status, 201);
	json_decref(rep.json);
	rep = call_as(f, NULL, "POST", "/v1/keys", NULL, "{\"tenant\":\"team-b\"}",
		      "application/json");
	assert_int_equal(rep.status, 201);
	char id[KEY_ID_SIZE], secret[AUTH_KEY_TEXT_MAX];
	snprintf(id, sizeof(id), "%s", str(rep.json, "id"));
	snprintf(secret, sizeof(secret), "%s", str(rep.json, "key"));
	json_decref(rep.json);
	char path[64];
	snprintf(path, sizeof(path), "/v1/keys/%s", id);
	expect_status(call_as(f, NULL, "DELETE", path, NULL, NULL, NULL), 200);
	json_t *rows = audit(f, NULL);
	assert_int_equal(json_array_size(rows), 3);
	json_t *r = json_array_get(rows, 2);
	assert_string_equal(str(r, "route"), "/v1/tenants");
	assert_string_equal(str(r, "target"), "team-b");
	assert_string_equal(str(r, "tenant"), TENANT_DEFAULT);
	assert_int_equal(num(r, "uid"), 0);
	assert_true(json_is_null(json_object_get(r, "key_id")));
	assert_string_equal(str(r, "source"), "unix:uid=0");
	assert_string_equal(str(json_array_get(rows, 1), "target"), id);
	assert_string_equal(str(json_array_get(rows, 0), "route"), "/v1/keys/{id}");
	assert_string_equal(str(json_array_get(rows, 0), "target"), id);
	/* the key's secret is nowhere in the log */
	char *text = json_dumps(rows, 0);
	assert_null(strstr(text, secret + strlen("abx_") + KEY_ID_SIZE));
	free(text);
	json_decref(rows);
}

/*
 * Deferred (as the server asks): the answer carries its row, nothing is
 * in the log until api_audit_commit(), and then exactly that row is.
 */
static void test_deferred_rows_wait_for_their_commit(void **state)
{
	struct fx *f = *state;
	f->ctx.tcp = false;
	f->ctx.peer_uid = 0;
	snprintf(f->ctx.source, sizeof(f->ctx.source), "unix:uid=0");
	f->ctx.audit_deferred = true;
	const char *body = "{\"name\":\"team-d\"}";
	struct api_request req = {.method = "POST",
				  .path = "/v1/tenants",
				  .body = body,
				  .body_len = strlen(body),
				  .content_type = "application/json"};
	struct api_response res = {0};
	assert_int_equal(api_handle(&f->ctx, &req, &res), 0);
	assert_int_equal(res.status, 201);
	assert_true(res.audit_pending);
	/* a GET is recorded by nobody: nothing pending */
	struct api_request get = {.method = "GET", .path = "/v1/tenants"};
	struct api_response gres = {0};
	assert_int_equal(api_handle(&f->ctx, &get, &gres), 0);
	assert_false(gres.audit_pending);
	api_response_release(&gres);
	f->ctx.audit_deferred = false;
	json_t *rows = audit(f, NULL);
	assert_int_equal(json_array_size(rows), 0);
	json_decref(rows);
	char why[ERROR_MSG_MAX];
	api_audit_commit(&res, f->ctx.store, why);
	assert_string_equal(why, "");
	api_response_release(&res);
	rows = audit(f, NULL);
	assert_int_equal(json_array_size(rows), 1);
	assert_string_equal(str(json_array_get(rows, 0), "target"), "team-d");
	assert_int_equal(num(json_array_get(rows, 0), "status"), 201);
	json_decref(rows);
	/* no store: not recorded, and said so */
	struct api_response again = {.status = 201,
				     .audit_pending = true,
				     .audit_note = res.audit_note,
				     .audit_code = res.audit_code};
	api_audit_commit(&again, NULL, why);
	assert_true(why[0] != '\0');
}

static void test_refusals_are_counted(void **state)
{
	struct fx *f = *state;
	char bad[AUTH_KEY_TEXT_MAX + 16];
	snprintf(bad, sizeof(bad), "%s", f->member);
	bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == 'a' ? 'b' : 'a';
	for (int i = 0; i < 20; i++) {
		fake_now = NOW + i;
		expect_status(call_as(f, bad, i % 2 ? "GET" : "POST", "/v1/tasks", NULL, "{}",
				      "application/json"),
			      401);
	}
	fake_now = NOW + 30;
	expect_status(call_as(f, NULL, "DELETE", "/v1/tasks", NULL, NULL, NULL), 401);
	json_t *rows = audit(f, NULL);
	assert_int_equal(json_array_size(rows), 2);
	json_t *r = json_array_get(rows, 1);
	assert_int_equal(num(r, "count"), 20);
	assert_int_equal(num(r, "status"), 401);
	assert_string_equal(str(r, "error"), "unauthorized");
	assert_string_equal(str(r, "reason"), "unknown_key");
	assert_string_equal(str(r, "source"), "127.0.0.1");
	assert_string_equal(str(r, "time"), "2023-11-14T22:13:20.123Z");
	assert_string_equal(str(r, "last_time"), "2023-11-14T22:13:20.142Z");
	assert_true(json_is_null(json_object_get(r, "route")));
	assert_true(json_is_null(json_object_get(r, "key_id"))); /* the client's to choose */
	assert_true(json_is_null(json_object_get(r, "tenant")));
	assert_string_equal(str(json_array_get(rows, 0), "reason"), "no_key");
	json_decref(rows);
	/* a revoked key is named: its secret was right */
	struct error err = {0};
	assert_int_equal(store_key_revoke(f->st, f->member_id, NOW, &err), 0);
	expect_status(call_as(f, f->member, "POST", "/v1/tasks", NULL, NULL, NULL), 401);
	/* the next minute: a new row */
	fake_now = NOW + API_AUDIT_WINDOW_MS;
	expect_status(call_as(f, bad, "GET", "/v1/tasks", NULL, NULL, NULL), 401);
	rows = audit(f, NULL);
	assert_int_equal(json_array_size(rows), 4);
	assert_string_equal(str(json_array_get(rows, 1), "reason"), "revoked_key");
	assert_string_equal(str(json_array_get(rows, 1), "key_id"), f->member_id);
	assert_string_equal(str(json_array_get(rows, 0), "reason"), "unknown_key");
	assert_int_equal(num(json_array_get(rows, 0), "count"), 1);
	json_decref(rows);
}

static void test_list_filters_and_pages(void **state)
{
	struct fx *f = *state;
	const char *const body = "{\"command\":[\"true\"]}";
	for (int i = 0; i < 5; i++) {
		fake_now = NOW + i * 1000;
		expect_status(
		    call_as(f, f->member, "POST", "/v1/tasks", NULL, body, "application/json"),
		    201);
	}
	fake_now = NOW + 5000;
	expect_status(call_as(f, f->admin, "POST", "/v1/tenants", NULL, "{\"name\":\"team-c\"}",
			      "application/json"),
		      201);
	json_t *rows = audit(f, "tenant=team-a");
	assert_int_equal(json_array_size(rows), 5);
	json_decref(rows);
	rows = audit(f, "tenant=default");
	assert_int_equal(json_array_size(rows), 1);
	json_decref(rows);
	rows = audit(f, "since=2023-11-14T22:13:21.123Z&until=1700000004123");
	assert_int_equal(json_array_size(rows), 3); /* since <= time < until */
	json_decref(rows);
	rows = audit(f, "since=2023-11-14T23:13:21%2B01:00"); /* an offset: the same moment */
	assert_int_equal(json_array_size(rows), 5);
	json_decref(rows);
	rows = audit(f, "route=POST+%2Fv1%2Ftasks");
	assert_int_equal(json_array_size(rows), 5);
	json_decref(rows);
	rows = audit(f, "route=%2Fv1%2Ft*"); /* a prefix: tasks and tenants */
	assert_int_equal(json_array_size(rows), 6);
	json_decref(rows);
	rows = audit(f, "route=DELETE");
	assert_int_equal(json_array_size(rows), 0);
	json_decref(rows);
	/* pages of two, newest first */
	rows = audit(f, "limit=2");
	assert_int_equal(json_array_size(rows), 2);
	json_decref(rows);
	struct reply rep = call_as(f, f->admin, "GET", "/v1/audit", "limit=4", NULL, NULL);
	json_int_t next = json_integer_value(json_object_get(rep.json, "next"));
	assert_true(next > 0);
	json_decref(rep.json);
	char q[64];
	snprintf(q, sizeof(q), "limit=4&after=%lld", (long long)next);
	rep = call_as(f, f->admin, "GET", "/v1/audit", q, NULL, NULL);
	assert_int_equal(json_array_size(json_object_get(rep.json, "entries")), 2);
	assert_true(json_is_null(json_object_get(rep.json, "next")));
	json_decref(rep.json);

	/* bad values name their parameter */
	static const char *const bad[][2] = {
	    {"since=yesterday", "since"}, {"until=2023-13-01T00:00:00Z", "until"},
	    {"tenant=Team", "tenant"},	  {"route=post", "route"},
	    {"route=POST%2Fv1", "route"}, {"route=%2Fv1%2Fa+b", "route"},
	    {"limit=0", "limit"},	  {"after=-1", "after"},
	    {"since=0", "since"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rep = call_as(f, f->admin, "GET", "/v1/audit", bad[i][0], NULL, NULL);
		assert_int_equal(rep.status, 400);
		json_t *e = json_object_get(rep.json, "error");
		assert_string_equal(str(e, "field"), bad[i][1]);
		json_decref(rep.json);
	}
	expect_status(call_as(f, f->admin, "GET", "/v1/audit", "status=1", NULL, NULL), 400);
	/* a member may not read it */
	rep = call_as(f, f->member, "GET", "/v1/audit", NULL, NULL, NULL);
	assert_int_equal(rep.status, 403);
	assert_string_equal(str(json_object_get(rep.json, "error"), "code"), "forbidden");
	json_decref(rep.json);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_mutations_are_recorded),
	    T(test_local_users_and_creates),
	    T(test_deferred_rows_wait_for_their_commit),
	    T(test_refusals_are_counted),
	    T(test_list_filters_and_pages),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
