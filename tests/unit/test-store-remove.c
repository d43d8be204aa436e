/*
 * test-store-remove.c - the contract of store.h, removing what ended:
 * store_task_delete() (only an ended task, its events with it, inside a
 * caller's transaction too), and the lists of tasks and sandboxes ended
 * before a time, earliest first, bounded, that fn may delete from. Runs
 * against every backend in store-contract.h.
 */
#include "store-contract.h"

/* An ended task: claimed at t, ended with end at finished. */
static void add_ended(struct fx *f, int64_t finished, enum task_status e, char id[TASK_ID_SIZE])
{
	add(f, 1, 1, 0, id);
	uint32_t attempt = claim(f, 2, id);
	progress(f, id, attempt, "{\"n\":1}");
	assert_int_equal(end(f, id, attempt, e, 0, NULL, finished), e);
}

static bool exists(struct fx *f, const char *id)
{
	struct task t = {0};
	struct error err = {0};
	int r = store_task_get(f->st, id, &t, &err);
	if (r != 0 && r != -ENOENT)
		fail_msg("store_task_get(%s) = %d: %s", id, r, err.msg);
	task_release(&t);
	return r == 0;
}

struct ended_ids {
	size_t n;
	char v[16][TASK_ID_SIZE];
	struct store *delete_each; /* non-NULL: delete each task from inside fn */
};

static int collect(const char *id, void *data)
{
	struct ended_ids *ids = data;
	assert_true(ids->n < 16);
	snprintf(ids->v[ids->n++], TASK_ID_SIZE, "%s", id);
	if (ids->delete_each)
		OK(store_task_delete(ids->delete_each, id, err));
	return 0;
}

static void test_delete_ended_only(void **state)
{
	struct fx *f = *state;
	char done[TASK_ID_SIZE], queued[TASK_ID_SIZE], running[TASK_ID_SIZE];
	add_ended(f, 100, TASK_FAILED, done);
	add(f, 3, 1, 0, running);
	claim(f, 4, running);
	add(f, 5, 1, 0, queued);

	FAILS(EBUSY, store_task_delete(f->st, running, err));
	FAILS(EBUSY, store_task_delete(f->st, queued, err));
	assert_true(exists(f, running));
	assert_true(exists(f, queued));

	struct events ev = {0};
	OK(store_events_list(f->st, done, 0, 100, collect_event, &ev, err));
	assert_true(ev.n >= 2);
	OK(store_task_delete(f->st, done, err));
	assert_false(exists(f, done));
	FAILS(ENOENT, store_events_list(f->st, done, 0, 100, collect_event, &ev, err));
	FAILS(ENOENT, store_task_delete(f->st, done, err));
	FAILS(EINVAL, store_task_delete(f->st, NULL, err));

	/* cancelled while queued: ended, and deleted */
	OK(store_task_cancel(f->st, queued, 6, NULL, err));
	OK(store_task_delete(f->st, queued, err));
	assert_false(exists(f, queued));
	uint64_t n = 9;
	OK(store_task_count(f->st, TASK_RUNNING, &n, err));
	assert_int_equal(n, 1);
}

static void test_delete_in_a_transaction(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE];
	add_ended(f, 100, TASK_SUCCEEDED, a);
	add_ended(f, 101, TASK_SUCCEEDED, b);
	OK(store_tx_begin(f->st, err));
	OK(store_task_delete(f->st, a, err));
	FAILS(ENOENT, store_task_delete(f->st, a, err)); /* undoes only itself */
	store_tx_rollback(f->st);
	assert_true(exists(f, a));
	OK(store_tx_begin(f->st, err));
	OK(store_task_delete(f->st, a, err));
	OK(store_task_delete(f->st, b, err));
	OK(store_tx_commit(f->st, err));
	reopen(f);
	assert_false(exists(f, a));
	assert_false(exists(f, b));
}

static void test_list_ended(void **state)
{
	struct fx *f = *state;
	char late[TASK_ID_SIZE], early[TASK_ID_SIZE], mid[TASK_ID_SIZE], live[TASK_ID_SIZE],
	    retried[TASK_ID_SIZE];
	add_ended(f, 300, TASK_SUCCEEDED, late);
	add_ended(f, 100, TASK_TIMED_OUT, early);
	add_ended(f, 200, TASK_CANCELLED, mid);
	add(f, 1, 1, 0, live);
	claim(f, 2, live);
	/* a retry goes back to queued: not ended, whatever its first attempt did */
	add(f, 1, 2, TASK_STATUS_BIT(TASK_FAILED), retried);
	uint32_t at = claim(f, 2, retried);
	assert_int_equal(end(f, retried, at, TASK_FAILED, 1, NULL, 50), TASK_QUEUED);

	struct ended_ids ids = {0};
	OK(store_task_list_ended(f->st, 1000, 10, collect, &ids, err));
	assert_int_equal(ids.n, 3);
	assert_string_equal(ids.v[0], early);
	assert_string_equal(ids.v[1], mid);
	assert_string_equal(ids.v[2], late);

	memset(&ids, 0, sizeof(ids));
	OK(store_task_list_ended(f->st, 300, 10, collect, &ids, err)); /* strictly before */
	assert_int_equal(ids.n, 2);
	memset(&ids, 0, sizeof(ids));
	OK(store_task_list_ended(f->st, 1000, 1, collect, &ids, err));
	assert_int_equal(ids.n, 1);
	assert_string_equal(ids.v[0], early);
	memset(&ids, 0, sizeof(ids));
	OK(store_task_list_ended(f->st, 100, 10, collect, &ids, err));
	assert_int_equal(ids.n, 0);

	FAILS(EINVAL, store_task_list_ended(f->st, 1000, 0, collect, &ids, err));
	FAILS(EINVAL, store_task_list_ended(f->st, 1000, STORE_LIST_MAX + 1, collect, &ids, err));

	/* fn may delete what it is given */
	memset(&ids, 0, sizeof(ids));
	ids.delete_each = f->st;
	OK(store_task_list_ended(f->st, 1000, 10, collect, &ids, err));
	assert_int_equal(ids.n, 3);
	memset(&ids, 0, sizeof(ids));
	OK(store_task_list_ended(f->st, 1000, 10, collect, &ids, err));
	assert_int_equal(ids.n, 0);
	assert_true(exists(f, live));
	assert_true(exists(f, retried));
}

static int stop_at_first(const char *id, void *data)
{
	(void)id;
	(*(int *)data)++;
	return -EINTR;
}

static void test_list_ended_stops(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE];
	add_ended(f, 10, TASK_SUCCEEDED, a);
	add_ended(f, 20, TASK_SUCCEEDED, b);
	int calls = 0;
	struct error err = {0};
	assert_int_equal(store_task_list_ended(f->st, 100, 10, stop_at_first, &calls, &err),
			 -EINTR);
	assert_int_equal(calls, 1);
}

static void sbx_add(struct fx *f, enum sandbox_status status, char id[SANDBOX_ID_SIZE])
{
	struct sandbox_record sb = {
	    .tenant = TENANT_DEFAULT, .status = status, .created_at = 1, .spec_json = "{}"};
	assert_int_equal(sandbox_id_new(sb.id), 0);
	OK(store_sandbox_insert(f->st, &sb, err));
	memcpy(id, sb.id, SANDBOX_ID_SIZE);
}

static void test_sandboxes_ended(void **state)
{
	struct fx *f = *state;
	char pooled[SANDBOX_ID_SIZE], running[SANDBOX_ID_SIZE], old[SANDBOX_ID_SIZE],
	    young[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, pooled);
	sbx_add(f, SANDBOX_RUNNING, running);
	sbx_add(f, SANDBOX_RUNNING, young);
	sbx_add(f, SANDBOX_RUNNING, old);
	OK(store_sandbox_end(f->st, young, 500, "deleted", NULL, err));
	OK(store_sandbox_end(f->st, old, 100, "expired", NULL, err));

	struct ended_ids ids = {0};
	OK(store_sandbox_list_ended(f->st, 1000, 10, collect, &ids, err));
	assert_int_equal(ids.n, 2);
	assert_string_equal(ids.v[0], old);
	assert_string_equal(ids.v[1], young);
	memset(&ids, 0, sizeof(ids));
	OK(store_sandbox_list_ended(f->st, 500, 10, collect, &ids, err));
	assert_int_equal(ids.n, 1);
	assert_string_equal(ids.v[0], old);
	FAILS(EINVAL, store_sandbox_list_ended(f->st, 1000, 0, collect, &ids, err));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_delete_ended_only), T(test_delete_in_a_transaction), T(test_list_ended),
	    T(test_list_ended_stops),  T(test_sandboxes_ended),
	};
#undef T
	return run_per_backend("store: removing what ended", tests,
			       sizeof(tests) / sizeof(tests[0]));
}
