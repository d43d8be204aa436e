/*
 * test-store.c - the contract of store.h, part one: tasks and their
 * lifecycle. Insert, get, list (filters, order, pages), claim (first in
 * first out), attempts and retries, fencing of stale writers, cancel.
 * Runs against every backend in store-contract.h; progress, events,
 * transactions and durability are in test-store-events.c.
 */
#include "store-contract.h"

/* ---- insert, get, list ------------------------------------------------- */

static void test_insert_get_round_trip(void **state)
{
	struct fx *f = *state;
	struct task in = {
	    .tenant = "acme-2",
	    .max_attempts = 3,
	    .retry_on = B(TASK_OOM_KILLED) | B(TASK_LOST),
	    .created_at = 1700000000123,
	    .spec_json = SPEC,
	    /* the store sets these itself: insert ignores them */
	    .status = TASK_RUNNING,
	    .attempt = 7,
	    .cancel_requested = true,
	    .exit_code = 9,
	    .started_at = 5,
	    .finished_at = 6,
	    .progress_json = "{\"x\":1}",
	    .error = "boom",
	};
	assert_int_equal(task_id_new(in.id), 0);
	FAILS(ENOENT, store_task_insert(f->st, &in, err)); /* no such tenant yet */
	OK(store_tenant_insert(f->st, "acme-2", 1, NULL, err));
	OK(store_task_insert(f->st, &in, err));
	struct task t = get(f, in.id);
	assert_string_equal(t.id, in.id);
	assert_string_equal(t.tenant, "acme-2");
	assert_int_equal(t.status, TASK_QUEUED);
	assert_int_equal(t.attempt, 0);
	assert_int_equal(t.max_attempts, 3);
	assert_int_equal(t.retry_on, B(TASK_OOM_KILLED) | B(TASK_LOST));
	assert_false(t.cancel_requested);
	assert_int_equal(t.exit_code, -1);
	assert_int_equal(t.created_at, 1700000000123);
	assert_int_equal(t.started_at, 0);
	assert_int_equal(t.finished_at, 0);
	assert_string_equal(t.spec_json, SPEC);
	assert_string_equal(t.progress_json, "{}");
	assert_null(t.error);
	task_release(&t);
	assert_int_equal(event_count(f, in.id), 0);
}

static void test_insert_errors(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 10, 1, 0, id);
	struct task t = {
	    .tenant = TENANT_DEFAULT, .max_attempts = 2, .created_at = 99, .spec_json = "{}"};
	memcpy(t.id, id, TASK_ID_SIZE);
	FAILS(EEXIST, store_task_insert(f->st, &t, err));
	struct task old = get(f, id); /* the first is untouched */
	assert_int_equal(old.max_attempts, 1);
	assert_int_equal(old.created_at, 10);
	task_release(&old);

	assert_int_equal(task_id_new(t.id), 0);
	t.max_attempts = 0;
	FAILS(EINVAL, store_task_insert(f->st, &t, err));
	t.max_attempts = TASK_MAX_ATTEMPTS_MAX + 1;
	FAILS(EINVAL, store_task_insert(f->st, &t, err));
	t.max_attempts = 1;
	t.retry_on = 1u << TASK_STATUS_COUNT;
	FAILS(EINVAL, store_task_insert(f->st, &t, err));
	t.retry_on = 0;
	t.spec_json = NULL;
	FAILS(EINVAL, store_task_insert(f->st, &t, err));
	t.spec_json = "{}";
	/* a tenant's name, every time */
	static const char *const not_tenants[] = {"", "Acme", "-acme", "acme-", "a b", "a_b"};
	for (size_t i = 0; i < sizeof(not_tenants) / sizeof(not_tenants[0]); i++) {
		snprintf(t.tenant, sizeof(t.tenant), "%s", not_tenants[i]);
		FAILS(EINVAL, store_task_insert(f->st, &t, err));
	}
	memset(t.tenant, 'a', sizeof(t.tenant)); /* not even terminated */
	FAILS(EINVAL, store_task_insert(f->st, &t, err));
	snprintf(t.tenant, sizeof(t.tenant), "%s", TENANT_DEFAULT);
	memcpy(t.id, "tsk_../", 8);
	FAILS(EINVAL, store_task_insert(f->st, &t, err));
	struct ids all;
	list(f, 0, NULL, 10, &all);
	assert_int_equal(all.n, 1);
}

static void test_get_unknown(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	assert_int_equal(task_id_new(id), 0);
	struct task t = {.attempt = 42};
	FAILS(ENOENT, store_task_get(f->st, id, &t, err));
	FAILS(ENOENT, store_task_get(f->st, "nonsense", &t, err));
	assert_int_equal(t.attempt, 42); /* ret is written only on success */
}

static void test_list_filter_and_order(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE], c[TASK_ID_SIZE], d[TASK_ID_SIZE];
	add(f, 300, 1, 0, a);
	add(f, 100, 1, 0, b);
	add(f, 200, 1, 0, c);
	add(f, 100, 1, 0, d); /* ties with b: insertion order breaks it */
	claim(f, 1000, b);
	assert_int_equal(end(f, b, 1, TASK_SUCCEEDED, 0, NULL, 1001), TASK_SUCCEEDED);
	claim(f, 1002, d);
	struct ids got;
	list(f, 0, NULL, 10, &got);
	assert_int_equal(got.n, 4);
	assert_string_equal(got.v[0], b);
	assert_string_equal(got.v[1], d);
	assert_string_equal(got.v[2], c);
	assert_string_equal(got.v[3], a);
	list(f, B(TASK_QUEUED), NULL, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], c);
	assert_string_equal(got.v[1], a);
	list(f, B(TASK_RUNNING) | B(TASK_SUCCEEDED), NULL, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], b);
	assert_string_equal(got.v[1], d);
	list(f, B(TASK_FAILED) | B(TASK_LOST), NULL, 10, &got);
	assert_int_equal(got.n, 0);
	/* a page may start after a task the filter leaves out */
	list(f, B(TASK_QUEUED), d, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], c);
}

static void test_list_pages(void **state)
{
	struct fx *f = *state;
	char ids[7][TASK_ID_SIZE];
	static const int64_t created[7] = {10, 20, 20, 20, 40, 40, 40}; /* ties straddle pages */
	for (int i = 0; i < 7; i++)
		add(f, created[i], 1, 0, ids[i]);
	/* the same pages whether the filter is none, one status, several or all */
	static const uint32_t filters[] = {0, B(TASK_QUEUED), B(TASK_QUEUED) | B(TASK_FAILED),
					   (1u << TASK_STATUS_COUNT) - 1};
	struct ids page;
	for (size_t k = 0; k < sizeof(filters) / sizeof(filters[0]); k++) {
		char after[TASK_ID_SIZE] = "";
		size_t seen = 0;
		static const size_t sizes[] = {3, 3, 1, 0};
		for (int p = 0; p < 4; p++) {
			list(f, filters[k], p ? after : NULL, 3, &page);
			assert_int_equal(page.n, sizes[p]);
			for (size_t i = 0; i < page.n; i++) /* none missing, none twice */
				assert_string_equal(page.v[i], ids[seen++]);
			if (page.n)
				memcpy(after, page.v[page.n - 1], TASK_ID_SIZE);
		}
		assert_int_equal(seen, 7);
	}
	list(f, 0, NULL, 1, &page);
	assert_int_equal(page.n, 1);
	assert_string_equal(page.v[0], ids[0]);
}

static void test_list_limits_and_errors(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	for (int i = 0; i < 3; i++)
		add(f, i, 1, 0, id);
	struct ids got = {0};
	struct task_filter flt = {.limit = 0};
	FAILS(EINVAL, store_task_list(f->st, &flt, collect_id, &got, err));
	flt.limit = STORE_LIST_MAX + 1;
	FAILS(EINVAL, store_task_list(f->st, &flt, collect_id, &got, err));
	flt.limit = 10;
	flt.statuses = 1u << TASK_STATUS_COUNT;
	FAILS(EINVAL, store_task_list(f->st, &flt, collect_id, &got, err));
	assert_int_equal(got.n, 0);
	flt.statuses = 0;
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	flt.after_id = unknown;
	FAILS(ENOENT, store_task_list(f->st, &flt, collect_id, &got, err));
	list(f, 0, NULL, STORE_LIST_MAX, &got);
	assert_int_equal(got.n, 3);
	/* fn stops the walk with its own error */
	memset(&got, 0, sizeof(got));
	got.stop_after = 2;
	flt.after_id = NULL;
	struct error e = {0};
	assert_int_equal(store_task_list(f->st, &flt, collect_id, &got, &e), -EINTR);
	assert_int_equal(got.n, 2);
}

/* ---- claim and attempts ------------------------------------------------ */

static int refuse(const struct task *t, void *data, struct error *e)
{
	(*(int *)data)++;
	assert_string_equal(t->spec_json, SPEC); /* the spec comes with it */
	return error_set(e, EAGAIN, "no room");
}

static int accept(const struct task *t, void *data, struct error *e)
{
	(void)t;
	(void)e;
	(*(int *)data)++;
	return 0;
}

/* A claim the caller's check refuses changes nothing; the head waits. */
static void test_claim_if(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE];
	add(f, 10, 1, 0, a);
	add(f, 20, 1, 0, b);
	struct task t = {0};
	int asked = 0;
	FAILS(EAGAIN, store_task_claim_if(f->st, 500, NULL, 0, refuse, &asked, &t, err));
	assert_int_equal(asked, 1);
	assert_int_equal(status_of(f, a), TASK_QUEUED);
	assert_int_equal(status_of(f, b), TASK_QUEUED);
	struct task g = get(f, a);
	assert_int_equal(g.attempt, 0);
	task_release(&g);
	assert_int_equal(event_count(f, a), 0);
	OK(store_task_claim_if(f->st, 501, NULL, 0, accept, &asked, &t, err));
	assert_int_equal(asked, 2);
	assert_string_equal(t.id, a); /* still first in first out */
	task_release(&t);
}

static void test_claim_fifo(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE], c[TASK_ID_SIZE], d[TASK_ID_SIZE];
	add(f, 40, 1, 0, a);
	add(f, 10, 1, 0, b);
	add(f, 30, 1, 0, c);
	add(f, 10, 1, 0, d);
	const char *order[] = {b, d, c, a};
	for (int i = 0; i < 4; i++) {
		struct task t = {0};
		uint64_t n = 99;
		OK(store_task_count(f->st, TASK_QUEUED, &n, err));
		assert_int_equal(n, 4 - i);
		OK(store_task_count(f->st, TASK_RUNNING, &n, err));
		assert_int_equal(n, i);
		OK(store_task_claim(f->st, 500 + i, &t, err));
		assert_string_equal(t.id, order[i]);
		assert_int_equal(t.status, TASK_RUNNING);
		assert_int_equal(t.attempt, 1);
		assert_int_equal(t.started_at, 500 + i);
		assert_int_equal(t.finished_at, 0);
		assert_string_equal(t.spec_json, SPEC);
		task_release(&t);
		struct events *e = events(f, order[i]);
		assert_int_equal(e->n, 1);
		assert_int_equal(e->v[0].type, TASK_EVENT_STATUS);
		assert_int_equal(e->v[0].attempt, 1);
		assert_int_equal(e->v[0].time, 500 + i);
		assert_string_equal(e->v[0].data,
				    "{\"status\":\"running\",\"attempt\":1,\"exit_code\":null,"
				    "\"error\":null}");
		free(e);
	}
	struct task t = {.attempt = 42};
	FAILS(ENOENT, store_task_claim(f->st, 600, &t, err));
	assert_int_equal(t.attempt, 42);
}

static void test_end_success(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 3, B(TASK_FAILED), id);
	claim(f, 1000, id);
	assert_int_equal(end(f, id, 1, TASK_SUCCEEDED, 0, NULL, 2000), TASK_SUCCEEDED);
	struct task t = get(f, id);
	assert_int_equal(t.status, TASK_SUCCEEDED);
	assert_int_equal(t.attempt, 1);
	assert_int_equal(t.exit_code, 0);
	assert_int_equal(t.started_at, 1000);
	assert_int_equal(t.finished_at, 2000);
	assert_null(t.error);
	task_release(&t);
	struct events *e = events(f, id);
	assert_int_equal(e->n, 2);
	assert_int_equal(e->v[1].time, 2000);
	assert_string_equal(e->v[1].data, "{\"status\":\"succeeded\",\"attempt\":1,"
					  "\"end\":\"succeeded\",\"exit_code\":0,\"error\":null}");
	free(e);
	/* ret_status may be NULL */
	add(f, 2, 1, 0, id);
	claim(f, 3000, id);
	OK(store_task_end_attempt(f->st, id, 1, TASK_FAILED, 1, "x", 3001, NULL, err));
}

static void test_end_failed_default_retry_on(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 3, TASK_DEFAULT_RETRY_ON, id);
	claim(f, 10, id);
	/* a failure is not in the default retry_on, attempts left or not */
	assert_int_equal(end(f, id, 1, TASK_FAILED, 3, "exited with 3", 20), TASK_FAILED);
	struct task t = get(f, id);
	assert_int_equal(t.exit_code, 3);
	assert_string_equal(t.error, "exited with 3");
	assert_int_equal(t.finished_at, 20);
	task_release(&t);
	/* a lost supervisor is */
	add(f, 2, 2, TASK_DEFAULT_RETRY_ON, id);
	claim(f, 30, id);
	assert_int_equal(end(f, id, 1, TASK_LOST, -1, "supervisor vanished", 40), TASK_QUEUED);
	assert_int_equal(claim(f, 50, id), 2);
	assert_int_equal(end(f, id, 2, TASK_LOST, -1, "again", 60), TASK_LOST);
	t = get(f, id);
	assert_int_equal(t.exit_code, -1);
	assert_string_equal(t.error, "again");
	task_release(&t);
	/* and timed_out is not */
	add(f, 3, 2, TASK_DEFAULT_RETRY_ON, id);
	claim(f, 70, id);
	assert_int_equal(end(f, id, 1, TASK_TIMED_OUT, -1, NULL, 80), TASK_TIMED_OUT);
}

static void test_retry_then_final(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 2, B(TASK_OOM_KILLED), id);
	assert_int_equal(claim(f, 100, id), 1);
	assert_int_equal(end(f, id, 1, TASK_OOM_KILLED, -1, "out of memory", 200), TASK_QUEUED);
	struct task t = get(f, id);
	assert_int_equal(t.status, TASK_QUEUED);
	assert_int_equal(t.attempt, 1);
	assert_int_equal(t.finished_at, 0);
	task_release(&t);
	struct task c = {0};
	OK(store_task_claim(f->st, 300, &c, err));
	assert_string_equal(c.id, id);
	assert_int_equal(c.attempt, 2);
	assert_int_equal(c.started_at, 100); /* the first start */
	task_release(&c);
	assert_int_equal(end(f, id, 2, TASK_OOM_KILLED, -1, "out of memory", 400), TASK_OOM_KILLED);
	t = get(f, id);
	assert_int_equal(t.status, TASK_OOM_KILLED);
	assert_int_equal(t.attempt, 2);
	assert_int_equal(t.started_at, 100);
	assert_int_equal(t.finished_at, 400);
	assert_string_equal(t.error, "out of memory");
	task_release(&t);
	struct events *e = events(f, id);
	static const char *const want[] = {
	    "{\"status\":\"running\",\"attempt\":1,\"exit_code\":null,\"error\":null}",
	    "{\"status\":\"queued\",\"attempt\":1,\"end\":\"oom_killed\",\"exit_code\":null,"
	    "\"error\":\"out of memory\"}",
	    "{\"status\":\"running\",\"attempt\":2,\"exit_code\":null,\"error\":null}",
	    "{\"status\":\"oom_killed\",\"attempt\":2,\"end\":\"oom_killed\",\"exit_code\":null,"
	    "\"error\":\"out of memory\"}",
	};
	assert_int_equal(e->n, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(e->v[i].type, TASK_EVENT_STATUS);
		assert_int_equal(e->v[i].attempt, i < 2 ? 1 : 2);
		assert_int_equal(e->v[i].time, 100 * (i + 1));
		assert_string_equal(e->v[i].data, want[i]);
	}
	free(e);
}

static void test_end_errors(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 1, 0, id);
	claim(f, 10, id);
	enum task_status s = TASK_STATUS_COUNT;
	FAILS(EINVAL, store_task_end_attempt(f->st, id, 1, TASK_RUNNING, 0, NULL, 1, &s, err));
	FAILS(EINVAL, store_task_end_attempt(f->st, id, 1, TASK_QUEUED, 0, NULL, 1, &s, err));
	FAILS(EINVAL, store_task_end_attempt(f->st, id, 1, TASK_STATUS_COUNT, 0, NULL, 1, &s, err));
	assert_int_equal(s, TASK_STATUS_COUNT);
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	FAILS(ENOENT, store_task_end_attempt(f->st, unknown, 1, TASK_FAILED, 0, NULL, 1, &s, err));
	assert_int_equal(status_of(f, id), TASK_RUNNING);
}

/* Everything a reader sees of a task, as text, to prove nothing changed. */
static void snapshot(struct fx *f, const char *id, char *buf, size_t size)
{
	struct task t = get(f, id);
	int n = snprintf(buf, size, "%d %u %d %d %lld %lld %s %s %zu", t.status, t.attempt,
			 t.cancel_requested, t.exit_code, (long long)t.started_at,
			 (long long)t.finished_at, t.progress_json, t.error ? t.error : "-",
			 event_count(f, id));
	assert_true(n > 0 && (size_t)n < size);
	task_release(&t);
}

static void test_stale_fencing(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE], before[512], after[512];
	add(f, 1, 3, B(TASK_LOST), id);
	/* queued, never run: no attempt is running */
	FAILS(ESTALE, store_task_end_attempt(f->st, id, 0, TASK_FAILED, 1, NULL, 1, NULL, err));
	FAILS(ESTALE, store_progress_append(f->st, id, 0, "{\"a\":1}", 1, NULL, err));
	claim(f, 10, id);
	progress(f, id, 1, "{\"p\":1}");
	assert_int_equal(end(f, id, 1, TASK_LOST, -1, "lost", 20), TASK_QUEUED);
	/* attempt 1 is over, attempt 2 not started */
	FAILS(ESTALE, store_progress_append(f->st, id, 1, "{\"a\":1}", 1, NULL, err));
	assert_int_equal(claim(f, 30, id), 2);
	progress(f, id, 2, "{\"p\":2}");
	snapshot(f, id, before, sizeof(before));
	enum task_status s = TASK_STATUS_COUNT;
	int64_t seq = -7;
	FAILS(ESTALE, store_task_end_attempt(f->st, id, 1, TASK_SUCCEEDED, 0, NULL, 40, &s, err));
	FAILS(ESTALE, store_task_end_attempt(f->st, id, 3, TASK_SUCCEEDED, 0, NULL, 40, &s, err));
	FAILS(ESTALE, store_progress_append(f->st, id, 1, "{\"p\":\"old\"}", 40, &seq, err));
	FAILS(ESTALE, store_progress_append(f->st, id, 3, "{\"p\":\"new\"}", 40, &seq, err));
	assert_int_equal(s, TASK_STATUS_COUNT);
	assert_int_equal(seq, -7);
	snapshot(f, id, after, sizeof(after));
	assert_string_equal(before, after);
	/* the running attempt is heard, and after its end nobody is */
	assert_int_equal(end(f, id, 2, TASK_SUCCEEDED, 0, NULL, 50), TASK_SUCCEEDED);
	snapshot(f, id, before, sizeof(before));
	FAILS(ESTALE, store_task_end_attempt(f->st, id, 2, TASK_FAILED, 1, NULL, 60, &s, err));
	FAILS(ESTALE, store_progress_append(f->st, id, 2, "{\"p\":3}", 60, &seq, err));
	snapshot(f, id, after, sizeof(after));
	assert_string_equal(before, after);
}

/* ---- cancel ------------------------------------------------------------ */

static void test_cancel_queued(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 1, 0, id);
	enum task_status s = TASK_STATUS_COUNT;
	OK(store_task_cancel(f->st, id, 500, &s, err));
	assert_int_equal(s, TASK_CANCELLED);
	struct task t = get(f, id);
	assert_int_equal(t.status, TASK_CANCELLED);
	assert_int_equal(t.finished_at, 500);
	assert_int_equal(t.attempt, 0);
	assert_false(t.cancel_requested);
	task_release(&t);
	struct events *e = events(f, id);
	assert_int_equal(e->n, 1);
	assert_int_equal(e->v[0].time, 500);
	assert_string_equal(e->v[0].data, "{\"status\":\"cancelled\",\"attempt\":0,"
					  "\"exit_code\":null,\"error\":null}");
	free(e);
	struct task c = {0};
	FAILS(ENOENT, store_task_claim(f->st, 600, &c, err)); /* not queued any more */
}

static void test_cancel_running(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 1, 0, id);
	claim(f, 10, id);
	enum task_status s = TASK_STATUS_COUNT;
	OK(store_task_cancel(f->st, id, 20, &s, err));
	assert_int_equal(s, TASK_RUNNING);
	struct task t = get(f, id);
	assert_int_equal(t.status, TASK_RUNNING);
	assert_true(t.cancel_requested);
	assert_int_equal(t.finished_at, 0);
	task_release(&t);
	assert_int_equal(event_count(f, id), 1); /* no status changed */
	s = TASK_STATUS_COUNT;
	OK(store_task_cancel(f->st, id, 21, &s, err)); /* asking twice is fine */
	assert_int_equal(s, TASK_RUNNING);
	progress(f, id, 1, "{\"still\":\"running\"}");
	/* the scheduler kills it and ends the attempt as cancelled */
	assert_int_equal(end(f, id, 1, TASK_CANCELLED, -1, NULL, 30), TASK_CANCELLED);
	t = get(f, id);
	assert_int_equal(t.finished_at, 30);
	assert_false(t.cancel_requested); /* set only while running */
	task_release(&t);
}

static void test_cancel_errors(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 1, 0, id);
	claim(f, 10, id);
	end(f, id, 1, TASK_FAILED, 2, "x", 20);
	enum task_status s = TASK_STATUS_COUNT;
	FAILS(EALREADY, store_task_cancel(f->st, id, 30, &s, err));
	assert_int_equal(s, TASK_STATUS_COUNT);
	assert_int_equal(status_of(f, id), TASK_FAILED);
	add(f, 2, 1, 0, id);
	OK(store_task_cancel(f->st, id, 40, NULL, err));
	FAILS(EALREADY, store_task_cancel(f->st, id, 50, NULL, err));
	assert_int_equal(task_id_new(id), 0);
	FAILS(ENOENT, store_task_cancel(f->st, id, 60, &s, err));
}

static void test_cancel_wins_over_retry(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 3, B(TASK_LOST), id);
	claim(f, 10, id);
	OK(store_task_cancel(f->st, id, 20, NULL, err));
	/* the attempt ends otherwise before the kill lands: no new attempt */
	assert_int_equal(end(f, id, 1, TASK_LOST, -1, "lost", 30), TASK_CANCELLED);
	struct task t = get(f, id);
	assert_int_equal(t.status, TASK_CANCELLED);
	assert_int_equal(t.finished_at, 30);
	task_release(&t);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_insert_get_round_trip),
	    T(test_insert_errors),
	    T(test_get_unknown),
	    T(test_list_filter_and_order),
	    T(test_list_pages),
	    T(test_list_limits_and_errors),
	    T(test_claim_fifo),
	    T(test_claim_if),
	    T(test_end_success),
	    T(test_end_failed_default_retry_on),
	    T(test_retry_then_final),
	    T(test_end_errors),
	    T(test_stale_fencing),
	    T(test_cancel_queued),
	    T(test_cancel_running),
	    T(test_cancel_errors),
	    T(test_cancel_wins_over_retry),
	};
#undef T
	return run_per_backend("store: tasks", tests, sizeof(tests) / sizeof(tests[0]));
}
