/*
 * test-store-audit.c - the contract of store.h, part five: the audit
 * log. Rows recorded and read back with every field; the limits (strings,
 * status, keep); refusals counted in one row per source, reason and
 * window; pruning at a small cap, in batches, the newest kept; lists last
 * recorded first, paged, filtered by tenant, time, method and route
 * (exact and prefix); calls inside a caller's transaction; reopening.
 * Runs against every backend in store-contract.h.
 */
#include "store-contract.h"

#define ROWS_MAX 64

struct rows {
	size_t n;
	struct {
		int64_t id, time, last_time, uid;
		uint64_t count;
		int status;
		char tenant[80], key_id[80], method[80], route[80], target[80], error[80],
		    source[80], reason[80];
	} v[ROWS_MAX];
};

static void copy(char *dst, const char *s)
{
	snprintf(dst, 80, "%s", s ? s : "(null)");
}

static int collect(const struct audit_record *a, void *data)
{
	struct rows *r = data;
	assert_true(r->n < ROWS_MAX);
	r->v[r->n].id = a->id;
	r->v[r->n].time = a->time;
	r->v[r->n].last_time = a->last_time;
	r->v[r->n].uid = a->uid;
	r->v[r->n].count = a->count;
	r->v[r->n].status = a->status;
	copy(r->v[r->n].tenant, a->tenant);
	copy(r->v[r->n].key_id, a->key_id);
	copy(r->v[r->n].method, a->method);
	copy(r->v[r->n].route, a->route);
	copy(r->v[r->n].target, a->target);
	copy(r->v[r->n].error, a->error);
	copy(r->v[r->n].source, a->source);
	copy(r->v[r->n].reason, a->reason);
	r->n++;
	return 0;
}

static void audit_rows(struct fx *f, const struct audit_filter *flt, struct rows *ret)
{
	memset(ret, 0, sizeof(*ret));
	OK(store_audit_list(f->st, flt, collect, ret, err));
}

/* A member's POST at time, of tenant. */
static void add_at(struct fx *f, int64_t time, const char *tenant, const char *route, int status,
		   size_t keep)
{
	struct audit_record a = {.time = time,
				 .tenant = tenant,
				 .key_id = "k2345678abcd",
				 .uid = -1,
				 .method = "POST",
				 .route = route,
				 .target = "tsk_0123456789abcdefghjkmnpqrs",
				 .status = status,
				 .error = status >= 400 ? "not_found" : NULL,
				 .source = "127.0.0.1"};
	OK(store_audit_add(f->st, &a, keep, err));
}

static void refuse_kept(struct fx *f, int64_t time, const char *source, const char *reason,
			size_t keep)
{
	struct audit_record a = {.time = time,
				 .uid = -1,
				 .status = 401,
				 .error = "unauthorized",
				 .source = source,
				 .reason = reason};
	OK(store_audit_count(f->st, &a, time - time % 60000, keep, err));
}

static void refuse(struct fx *f, int64_t time, const char *source, const char *reason)
{
	refuse_kept(f, time, source, reason, STORE_AUDIT_ROWS_MAX);
}

static void test_add_and_read_back(void **state)
{
	struct fx *f = *state;
	struct audit_record a = {.time = 1000,
				 .tenant = "team-a",
				 .uid = 1001,
				 .method = "DELETE",
				 .route = "/v1/sandboxes/{id}",
				 .target = "sbx_0123456789abcdefghjkmnpqrs",
				 .status = 200,
				 .source = "unix:uid=1001"};
	OK(store_audit_add(f->st, &a, STORE_AUDIT_ROWS_MAX, err));
	struct audit_filter flt = {.limit = 10};
	struct rows r;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 1);
	assert_true(r.v[0].id > 0);
	assert_int_equal(r.v[0].time, 1000);
	assert_int_equal(r.v[0].last_time, 1000);
	assert_int_equal(r.v[0].count, 1);
	assert_int_equal(r.v[0].uid, 1001);
	assert_int_equal(r.v[0].status, 200);
	assert_string_equal(r.v[0].tenant, "team-a");
	assert_string_equal(r.v[0].key_id, "(null)");
	assert_string_equal(r.v[0].method, "DELETE");
	assert_string_equal(r.v[0].route, "/v1/sandboxes/{id}");
	assert_string_equal(r.v[0].target, "sbx_0123456789abcdefghjkmnpqrs");
	assert_string_equal(r.v[0].error, "(null)");
	assert_string_equal(r.v[0].source, "unix:uid=1001");
	assert_string_equal(r.v[0].reason, "(null)");
	reopen(f);
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.v[0].target, "sbx_0123456789abcdefghjkmnpqrs");
}

static void test_limits(void **state)
{
	struct fx *f = *state;
	char long_text[STORE_AUDIT_TEXT_MAX + 2];
	memset(long_text, 'a', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = '\0';
	struct audit_record a = {.time = 1, .uid = -1, .status = 200, .source = long_text};
	FAILS(EINVAL, store_audit_add(f->st, &a, 10, err));
	long_text[STORE_AUDIT_TEXT_MAX] = '\0'; /* exactly the limit: fine */
	OK(store_audit_add(f->st, &a, 10, err));
	a.source = "a\nb"; /* no control characters, nor anything past ASCII */
	FAILS(EINVAL, store_audit_add(f->st, &a, 10, err));
	a.source = "caf\xc3\xa9";
	FAILS(EINVAL, store_audit_add(f->st, &a, 10, err));
	a.source = "x";
	a.status = 99;
	FAILS(EINVAL, store_audit_add(f->st, &a, 10, err));
	a.status = 600;
	FAILS(EINVAL, store_audit_add(f->st, &a, 10, err));
	a.status = 200;
	FAILS(EINVAL, store_audit_add(f->st, &a, 0, err));
	FAILS(EINVAL, store_audit_add(f->st, &a, STORE_AUDIT_ROWS_MAX + 1, err));
	a.reason = "unknown_key"; /* a reason is counted, not added */
	FAILS(EINVAL, store_audit_add(f->st, &a, 10, err));
	a.source = NULL; /* and counting needs a source */
	FAILS(EINVAL, store_audit_count(f->st, &a, 0, 10, err));
	a.source = "x";
	FAILS(EINVAL, store_audit_count(f->st, &a, 2, 10, err)); /* a window after the time */
	struct audit_filter flt = {.limit = 0};
	struct rows r;
	FAILS(EINVAL, store_audit_list(f->st, &flt, collect, &r, err));
	flt.limit = STORE_LIST_MAX + 1;
	FAILS(EINVAL, store_audit_list(f->st, &flt, collect, &r, err));
	flt = (struct audit_filter){.limit = 10};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 1); /* only the one that fit */
}

static void test_refusals_are_counted(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 20; i++)
		refuse(f, 120000 + i * 100, "127.0.0.1", "unknown_key");
	refuse(f, 121000, "127.0.0.1", "revoked_key"); /* another reason: its own row */
	refuse(f, 121500, "::1", "unknown_key");       /* another source: its own row */
	refuse(f, 180000, "127.0.0.1", "unknown_key"); /* the next minute: a new row */
	struct audit_record k = {.time = 180500,
				 .uid = -1,
				 .status = 401,
				 .key_id = "k2345678abcd",
				 .source = "127.0.0.1",
				 .reason = "revoked_key"};
	OK(store_audit_count(f->st, &k, 180000, 100, err));
	OK(store_audit_count(f->st, &k, 180000, 100, err));
	k.key_id = "m2345678abcd"; /* another key: its own row */
	OK(store_audit_count(f->st, &k, 180000, 100, err));
	struct audit_filter flt = {.limit = 10};
	struct rows r;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 6);
	assert_string_equal(r.v[0].key_id, "m2345678abcd");
	assert_int_equal(r.v[0].count, 1);
	assert_string_equal(r.v[1].key_id, "k2345678abcd");
	assert_int_equal(r.v[1].count, 2);
	flt.before_id = r.v[1].id;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 4);
	assert_int_equal(r.v[3].count, 20);
	assert_int_equal(r.v[3].time, 120000);
	assert_int_equal(r.v[3].last_time, 121900);
	assert_string_equal(r.v[3].source, "127.0.0.1");
	assert_string_equal(r.v[3].reason, "unknown_key");
	assert_string_equal(r.v[3].error, "unauthorized");
	assert_int_equal(r.v[3].status, 401);
	assert_string_equal(r.v[3].route, "(null)");
	assert_string_equal(r.v[2].reason, "revoked_key");
	assert_int_equal(r.v[2].count, 1);
	assert_string_equal(r.v[1].source, "::1");
	assert_int_equal(r.v[0].count, 1);
	assert_int_equal(r.v[0].time, 180000);
}

static void test_pruned_at_the_cap(void **state)
{
	struct fx *f = *state;
	/* keep 20: a batch of 2; the 21st row leaves 19, the newest */
	for (int i = 1; i <= 20; i++)
		add_at(f, i, "team-a", "/v1/tasks", 201, 20);
	struct audit_filter flt = {.limit = 100};
	struct rows r;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 20);
	add_at(f, 21, "team-a", "/v1/tasks", 201, 20);
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 19);
	assert_int_equal(r.v[0].time, 21);
	assert_int_equal(r.v[18].time, 3);
	/* never more than keep, however many come */
	for (int i = 22; i <= 100; i++) {
		add_at(f, i, "team-a", "/v1/tasks", 201, 20);
		audit_rows(f, &flt, &r);
		assert_true(r.n <= 20);
		assert_int_equal(r.v[0].time, i);
	}
	/* counted rows count against the cap too */
	for (int i = 0; i < 30; i++)
		refuse_kept(f, 600000 + i * 60000, "127.0.0.1", "unknown_key", 20);
	audit_rows(f, &flt, &r);
	assert_true(r.n <= 20);
	assert_int_equal(r.v[0].time, 600000 + 29 * 60000);
}

static void test_list_pages_and_filters(void **state)
{
	struct fx *f = *state;
	add_at(f, 1000, "team-a", "/v1/tasks", 201, STORE_AUDIT_ROWS_MAX);
	add_at(f, 2000, "team-b", "/v1/tasks", 201, STORE_AUDIT_ROWS_MAX);
	add_at(f, 3000, "team-a", "/v1/tasks/{id}/cancel", 404, STORE_AUDIT_ROWS_MAX);
	add_at(f, 4000, "team-a", "/v1/sandboxes", 201, STORE_AUDIT_ROWS_MAX);
	refuse(f, 5000, "127.0.0.1", "no_key");
	add_at(f, 6000, "team-b", "/v1/sandboxes/{id}/exec", 200, STORE_AUDIT_ROWS_MAX);
	struct rows r;
	struct audit_filter flt = {.limit = 2};
	audit_rows(f, &flt, &r); /* the last recorded first, two a page */
	assert_int_equal(r.n, 2);
	assert_int_equal(r.v[0].time, 6000);
	assert_int_equal(r.v[1].time, 5000);
	flt.before_id = r.v[1].id;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.v[0].time, 4000);
	assert_int_equal(r.v[1].time, 3000);
	flt.before_id = r.v[1].id;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 2);
	flt.before_id = r.v[1].id;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 0);

	flt = (struct audit_filter){.limit = 10, .tenant = "team-a"};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.v[0].route, "/v1/sandboxes");
	flt = (struct audit_filter){.limit = 10, .tenant = "team-c"};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 0);

	flt = (struct audit_filter){.limit = 10, .since = 2000, .until = 5000};
	audit_rows(f, &flt, &r); /* since <= time < until */
	assert_int_equal(r.n, 3);
	assert_int_equal(r.v[0].time, 4000);
	assert_int_equal(r.v[2].time, 2000);
	flt = (struct audit_filter){.limit = 10, .since = 7000};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 0);
	flt = (struct audit_filter){.limit = 10, .until = 1000};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 0);

	flt = (struct audit_filter){.limit = 10, .method = "POST", .route = "/v1/tasks"};
	audit_rows(f, &flt, &r); /* exactly that route */
	assert_int_equal(r.n, 2);
	flt.route_prefix = true; /* and every route under it */
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 3);
	flt = (struct audit_filter){.limit = 10, .route = "/v1/sandboxes", .route_prefix = true};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 2);
	flt = (struct audit_filter){.limit = 10, .method = "DELETE"};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 0);
	flt = (struct audit_filter){
	    .limit = 10, .tenant = "team-b", .route = "/v1/sandboxes", .route_prefix = true};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.v[0].time, 6000);
	/* a cursor that names no row (pruned since) pages on from where it was */
	flt = (struct audit_filter){.limit = 10, .before_id = INT64_MAX / 2};
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 6);
}

static void test_tx(void **state)
{
	struct fx *f = *state;
	OK(store_tx_begin(f->st, err));
	add_at(f, 1, "team-a", "/v1/tasks", 201, 10);
	refuse(f, 2, "127.0.0.1", "no_key");
	store_tx_rollback(f->st);
	struct audit_filter flt = {.limit = 10};
	struct rows r;
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 0);
	OK(store_tx_begin(f->st, err));
	add_at(f, 1, "team-a", "/v1/tasks", 201, 10);
	OK(store_tx_commit(f->st, err));
	/* the store's other writes stay durable: a task after an audit row */
	char id[TASK_ID_SIZE];
	add(f, 5, 1, 0, id);
	reopen(f);
	audit_rows(f, &flt, &r);
	assert_int_equal(r.n, 1);
	struct task t = get(f, id);
	task_release(&t);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_add_and_read_back),	    T(test_limits),
	    T(test_refusals_are_counted),   T(test_pruned_at_the_cap),
	    T(test_list_pages_and_filters), T(test_tx),
	};
#undef T
	return run_per_backend("store: the audit log", tests, sizeof(tests) / sizeof(tests[0]));
}
