/*
 * test-api-rate.c - the admission before a body (api.h: api_admit())
 * against a real store with real keys and an injected clock: a key's
 * bucket and its 429 (Retry-After, the JSON naming the limit), another
 * key untouched, the refill; a source's failed auths and the 429 that
 * comes before any key lookup; local users of the unix socket by uid,
 * root not charged; /healthz never charged.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "auth/key.h"

#define NOW 1700000000123

struct fx {
	char dir[128];
	struct store *st;
	struct ratelimit *keys, *failures;
	struct api_rate rate;
	struct api_ctx ctx;
	char a[AUTH_KEY_TEXT_MAX + 16], b[AUTH_KEY_TEXT_MAX + 16]; /* "Bearer <key>" */
	char a_id[KEY_ID_SIZE];
};

static int64_t mono = 5000;
static int64_t mono_ms(void)
{
	return mono;
}

static int64_t wall_ms(void)
{
	return NOW;
}

static void make_key(struct fx *f, char header[AUTH_KEY_TEXT_MAX + 16], char id[KEY_ID_SIZE])
{
	char text[AUTH_KEY_TEXT_MAX];
	struct auth_key key;
	struct error err = {0};
	assert_int_equal(auth_key_new(text, &key, &err), 0);
	struct key_record k = {.tenant = "team-a", .role = KEY_ROLE_MEMBER, .created_at = NOW};
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
	snprintf(f->dir, sizeof(f->dir), "%s/test-api-rate.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	char db[200];
	snprintf(db, sizeof(db), "%s/store.db", f->dir);
	struct error err = {0};
	if (store_open_sqlite(db, &f->st, &err) < 0 ||
	    store_tenant_insert(f->st, "team-a", NOW, NULL, &err) < 0)
		return -1;
	make_key(f, f->a, f->a_id);
	make_key(f, f->b, NULL);
	struct ratelimit_config keys = {.rate = 5, .burst = 5, .buckets = 64, .seed = 1};
	struct ratelimit_config failures = {.rate = 1, .burst = 3, .buckets = 64, .seed = 2};
	if (ratelimit_new(&keys, &f->keys) < 0 || ratelimit_new(&failures, &f->failures) < 0)
		return -1;
	mono = 5000;
	f->rate = (struct api_rate){
	    .principals = f->keys, .auth_failures = f->failures, .now_ms = mono_ms};
	f->ctx = (struct api_ctx){.store = f->st,
				  .tcp = true,
				  .peer_uid = -1,
				  .source = "127.0.0.1",
				  .rate = &f->rate,
				  .now_ms = wall_ms};
	return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->st);
	ratelimit_free(f->keys);
	ratelimit_free(f->failures);
	int r = nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

/* Admit GET path with authorization: true (go on) or the answer's status. */
static int admit(struct fx *f, const char *path, const char *authorization)
{
	struct api_request req = {.method = "GET", .path = path, .authorization = authorization};
	struct api_response r = {0};
	if (api_admit(&f->ctx, &req, &r))
		return 0;
	int status = r.status;
	api_response_release(&r);
	return status;
}

/* The 429 of GET /v1/me: its Retry-After, and its body's limit, rate and burst. */
static void expect_limited(struct fx *f, const char *authorization, const char *limit,
			   unsigned rate, unsigned burst, unsigned retry)
{
	struct api_request req = {
	    .method = "GET", .path = "/v1/me", .authorization = authorization};
	struct api_response r = {0};
	assert_false(api_admit(&f->ctx, &req, &r));
	assert_int_equal(r.status, 429);
	assert_int_equal(r.retry_after, retry);
	assert_string_equal(r.content_type, "application/json");
	json_error_t jerr;
	json_t *body = json_loadb(r.body, r.body_len, JSON_REJECT_DUPLICATES, &jerr);
	assert_non_null(body);
	json_t *e = json_object_get(body, "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")), "rate_limited");
	assert_string_equal(json_string_value(json_object_get(e, "limit")), limit);
	assert_true(json_string_length(json_object_get(e, "message")) > 0);
	assert_int_equal(json_integer_value(json_object_get(e, "rate")), rate);
	assert_int_equal(json_integer_value(json_object_get(e, "burst")), burst);
	assert_int_equal(json_integer_value(json_object_get(e, "retry_after_s")), retry);
	json_decref(body);
	api_response_release(&r);
}

static void test_key_bucket(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 5; i++)
		assert_int_equal(admit(f, "/v1/me", f->a), 0);
	expect_limited(f, f->a, "key", 5, 5, 1);
	/* a 429 takes nothing: 200 ms later (5 a second) one request passes again */
	mono += 199;
	expect_limited(f, f->a, "key", 5, 5, 1);
	mono += 1;
	assert_int_equal(admit(f, "/v1/me", f->a), 0);
	expect_limited(f, f->a, "key", 5, 5, 1);
	/* another key has its own bucket */
	for (int i = 0; i < 5; i++)
		assert_int_equal(admit(f, "/v1/tasks", f->b), 0);
	expect_limited(f, f->b, "key", 5, 5, 1);
	/* /healthz is public: never charged, not even looked at */
	f->ctx.store = NULL;
	for (int i = 0; i < 100; i++)
		assert_int_equal(admit(f, "/healthz", f->a), 0);
	f->ctx.store = f->st;
	/* no limits at all */
	f->ctx.rate = NULL;
	for (int i = 0; i < 20; i++)
		assert_int_equal(admit(f, "/v1/me", f->a), 0);
}

static void test_auth_failures(void **state)
{
	struct fx *f = *state;
	/* three bad keys from 127.0.0.1: 401, each taking one of the source's three tokens */
	const char *bad[] = {"Bearer wrong", "Bearer abx_000000000000_x", "Basic x"};
	for (int i = 0; i < 3; i++)
		assert_int_equal(admit(f, "/v1/me", bad[i]), 401);
	/*
	 * Now any request with a key, good or bad, is 429 before its key is
	 * looked up: without a store, a lookup would crash this test.
	 */
	f->ctx.store = NULL;
	expect_limited(f, "Bearer wrong", "auth_failures", 1, 3, 1);
	expect_limited(f, f->a, "auth_failures", 1, 3, 1);
	/* another address of 127.0.0.0/8 is the same host: the same bucket */
	snprintf(f->ctx.source, sizeof(f->ctx.source), "127.0.0.2");
	expect_limited(f, f->a, "auth_failures", 1, 3, 1);
	f->ctx.store = f->st;
	/* one without a key costs no lookup: it is told 401, as ever */
	assert_int_equal(admit(f, "/v1/me", NULL), 401);
	/* and requests without a key never drain the bucket: another source shows it */
	snprintf(f->ctx.source, sizeof(f->ctx.source), "192.0.2.9");
	for (int i = 0; i < 20; i++)
		assert_int_equal(admit(f, "/v1/me", NULL), 401);
	assert_int_equal(admit(f, "/v1/me", f->a), 0);
	/* another source is not held */
	snprintf(f->ctx.source, sizeof(f->ctx.source), "192.0.2.1");
	assert_int_equal(admit(f, "/v1/me", f->a), 0);
	/* a second later the first source has a token: a good key passes, takes none */
	snprintf(f->ctx.source, sizeof(f->ctx.source), "127.0.0.1");
	mono += 1000;
	assert_int_equal(admit(f, "/v1/me", f->a), 0);
	assert_int_equal(admit(f, "/v1/me", f->a), 0);
	/* and one more bad key empties it again */
	assert_int_equal(admit(f, "/v1/me", "Bearer wrong"), 401);
	expect_limited(f, f->a, "auth_failures", 1, 3, 1);
}

static void test_unix_socket(void **state)
{
	struct fx *f = *state;
	struct api_local_user users[] = {{.uid = 4321, .tenant = "team-a"},
					 {.uid = 4322, .tenant = "team-a"}};
	f->ctx.tcp = false;
	f->ctx.local_users = users;
	f->ctx.nlocal_users = 2;
	/* root, without a key: the operator, not charged */
	f->ctx.peer_uid = 0;
	snprintf(f->ctx.source, sizeof(f->ctx.source), "unix:uid=0");
	for (int i = 0; i < 50; i++)
		assert_int_equal(admit(f, "/v1/tasks", NULL), 0);
	/* root with a key: the key is charged */
	for (int i = 0; i < 5; i++)
		assert_int_equal(admit(f, "/v1/me", f->a), 0);
	expect_limited(f, f->a, "key", 5, 5, 1);
	/* a local user: by its uid */
	f->ctx.peer_uid = 4321;
	snprintf(f->ctx.source, sizeof(f->ctx.source), "unix:uid=4321");
	for (int i = 0; i < 5; i++)
		assert_int_equal(admit(f, "/v1/me", NULL), 0);
	expect_limited(f, NULL, "key", 5, 5, 1);
	f->ctx.peer_uid = 4322;
	snprintf(f->ctx.source, sizeof(f->ctx.source), "unix:uid=4322");
	assert_int_equal(admit(f, "/v1/me", NULL), 0);
	/* a user that is no tenant's: 401, its bad keys charged to its source */
	f->ctx.peer_uid = 999;
	snprintf(f->ctx.source, sizeof(f->ctx.source), "unix:uid=999");
	for (int i = 0; i < 10; i++)
		assert_int_equal(admit(f, "/v1/me", NULL), 401);
	for (int i = 0; i < 3; i++)
		assert_int_equal(admit(f, "/v1/me", "Bearer wrong"), 401);
	f->ctx.store = NULL;
	expect_limited(f, "Bearer wrong", "auth_failures", 1, 3, 1);
	f->ctx.store = f->st;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_key_bucket, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_auth_failures, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
