/*
 * test-core-task.c - the task model: status names, the one lifecycle
 * table (every pair of statuses), what follows an attempt, and task ids.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/task.h"

#define B(s) TASK_STATUS_BIT(s)

static const char *const names[TASK_STATUS_COUNT] = {
    "queued", "running", "succeeded", "failed", "oom_killed", "timed_out", "cancelled", "lost",
};

/* ---- names ------------------------------------------------------------- */

static void test_names_round_trip(void **state)
{
	(void)state;
	for (int s = 0; s < TASK_STATUS_COUNT; s++) {
		assert_string_equal(task_status_name((enum task_status)s), names[s]);
		enum task_status back = TASK_STATUS_COUNT;
		assert_int_equal(task_status_parse(names[s], &back), 0);
		assert_int_equal(back, s);
	}
	assert_null(task_status_name(TASK_STATUS_COUNT));
	assert_null(task_status_name((enum task_status) - 1));
}

static void test_unknown_names_fail(void **state)
{
	(void)state;
	static const char *const bad[] = {"",	  "Queued", "QUEUED", "queued ",    " running",
					  "done", "cancel", "oom",    "succeeded\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum task_status s = TASK_LOST;
		assert_int_equal(task_status_parse(bad[i], &s), -EINVAL);
		assert_int_equal(s, TASK_LOST); /* left alone */
	}
	enum task_status s = TASK_LOST;
	assert_int_equal(task_status_parse(NULL, &s), -EINVAL);
}

static void test_event_type_names(void **state)
{
	(void)state;
	assert_string_equal(task_event_type_name(TASK_EVENT_PROGRESS), "progress");
	assert_string_equal(task_event_type_name(TASK_EVENT_STATUS), "status");
	assert_string_equal(task_event_type_name(TASK_EVENT_EGRESS_DENIED), "egress_denied");
	assert_null(task_event_type_name((enum task_event_type)3));
}

/* ---- the lifecycle table ----------------------------------------------- */

static void test_final_states(void **state)
{
	(void)state;
	assert_false(task_status_is_final(TASK_QUEUED));
	assert_false(task_status_is_final(TASK_RUNNING));
	for (int s = TASK_SUCCEEDED; s < TASK_STATUS_COUNT; s++)
		assert_true(task_status_is_final((enum task_status)s));
	assert_false(task_status_is_final(TASK_STATUS_COUNT));
}

static void test_transition_table(void **state)
{
	(void)state;
	const uint32_t ends = B(TASK_SUCCEEDED) | B(TASK_FAILED) | B(TASK_OOM_KILLED) |
			      B(TASK_TIMED_OUT) | B(TASK_CANCELLED) | B(TASK_LOST);
	/* want[from]: exactly the statuses `from` may move to */
	const uint32_t want[TASK_STATUS_COUNT] = {
	    [TASK_QUEUED] = B(TASK_RUNNING) | B(TASK_CANCELLED),
	    [TASK_RUNNING] = ends | B(TASK_QUEUED),
	};
	for (int from = 0; from < TASK_STATUS_COUNT; from++)
		for (int to = 0; to < TASK_STATUS_COUNT; to++) {
			bool got = task_transition_is_allowed((enum task_status)from,
							      (enum task_status)to);
			bool expect = (want[from] & B(to)) != 0;
			if (got != expect)
				fail_msg("%s -> %s: allowed is %d, want %d", names[from], names[to],
					 got, expect);
		}
	/* the ones that matter most, spelled out */
	assert_true(task_transition_is_allowed(TASK_QUEUED, TASK_RUNNING));
	assert_true(task_transition_is_allowed(TASK_RUNNING, TASK_QUEUED));
	assert_false(task_transition_is_allowed(TASK_QUEUED, TASK_SUCCEEDED));
	assert_false(task_transition_is_allowed(TASK_QUEUED, TASK_QUEUED));
	assert_false(task_transition_is_allowed(TASK_RUNNING, TASK_RUNNING));
	assert_false(task_transition_is_allowed(TASK_CANCELLED, TASK_QUEUED));
	assert_false(task_transition_is_allowed(TASK_STATUS_COUNT, TASK_RUNNING));
	assert_false(task_transition_is_allowed(TASK_RUNNING, TASK_STATUS_COUNT));
}

/* ---- after an attempt -------------------------------------------------- */

static void test_after_attempt_retries(void **state)
{
	(void)state;
	uint32_t oom = B(TASK_OOM_KILLED);
	assert_int_equal(task_after_attempt(TASK_OOM_KILLED, 1, 3, oom), TASK_QUEUED);
	assert_int_equal(task_after_attempt(TASK_OOM_KILLED, 2, 3, oom), TASK_QUEUED);
	/* attempt == max: the end is final */
	assert_int_equal(task_after_attempt(TASK_OOM_KILLED, 3, 3, oom), TASK_OOM_KILLED);
	assert_int_equal(task_after_attempt(TASK_OOM_KILLED, 4, 3, oom), TASK_OOM_KILLED);
	/* not in retry_on */
	assert_int_equal(task_after_attempt(TASK_FAILED, 1, 3, oom), TASK_FAILED);
	assert_int_equal(task_after_attempt(TASK_TIMED_OUT, 1, 3, oom), TASK_TIMED_OUT);
	/* the default retries only a lost supervisor */
	assert_int_equal(task_after_attempt(TASK_LOST, 1, 2, TASK_DEFAULT_RETRY_ON), TASK_QUEUED);
	assert_int_equal(task_after_attempt(TASK_FAILED, 1, 2, TASK_DEFAULT_RETRY_ON), TASK_FAILED);
	/* one attempt: nothing is retried */
	assert_int_equal(task_after_attempt(TASK_LOST, 1, 1, TASK_DEFAULT_RETRY_ON), TASK_LOST);
}

static void test_after_attempt_never_retries_success_or_cancel(void **state)
{
	(void)state;
	uint32_t all = (1u << TASK_STATUS_COUNT) - 1;
	assert_int_equal(task_after_attempt(TASK_SUCCEEDED, 1, 5, all), TASK_SUCCEEDED);
	assert_int_equal(task_after_attempt(TASK_CANCELLED, 1, 5, all), TASK_CANCELLED);
	for (int s = TASK_SUCCEEDED; s < TASK_STATUS_COUNT; s++) {
		enum task_status end = (enum task_status)s;
		enum task_status want =
		    end == TASK_SUCCEEDED || end == TASK_CANCELLED ? end : TASK_QUEUED;
		assert_int_equal(task_after_attempt(end, 1, 5, all), want);
		assert_int_equal(task_after_attempt(end, 1, 5, 0), end);
	}
}

/* ---- ids --------------------------------------------------------------- */

static int compare_ids(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void test_id_new(void **state)
{
	(void)state;
	enum { N = 1000 };
	char(*ids)[TASK_ID_SIZE] = calloc(N, TASK_ID_SIZE);
	assert_non_null(ids);
	for (int i = 0; i < N; i++) {
		assert_int_equal(task_id_new(ids[i]), 0);
		assert_int_equal(strlen(ids[i]), 30);
		assert_memory_equal(ids[i], "tsk_", 4);
		if (!task_id_is_valid(ids[i]))
			fail_msg("task_id_new gave an invalid id: '%s'", ids[i]);
	}
	qsort(ids, N, TASK_ID_SIZE, compare_ids);
	for (int i = 1; i < N; i++)
		if (strcmp(ids[i - 1], ids[i]) == 0)
			fail_msg("task_id_new gave '%s' twice", ids[i]);
	free(ids);
}

static void test_id_is_valid(void **state)
{
	(void)state;
	assert_true(task_id_is_valid("tsk_0123456789abcdefghjkmnpqrs"));
	assert_true(task_id_is_valid("tsk_tvwxyz00000000000000000000"));
	static const char *const bad[] = {
	    "",
	    "tsk_",
	    "tsk",
	    "task_0123456789abcdefghjkmnpqrs", /* wrong prefix */
	    "TSK_0123456789abcdefghjkmnpqrs",
	    "abc_0123456789abcdefghjkmnpqrs",
	    "tsk_0123456789abcdefghjkmnpqr",   /* 25 characters */
	    "tsk_0123456789abcdefghjkmnpqrst", /* 27 */
	    "tsk_0123456789ABCDEFGHJKMNPQRS",  /* uppercase */
	    "tsk_0123456789abcdefghjkmnpqrI",
	    "tsk_i123456789abcdefghjkmnpqrs", /* i, l, o, u are not base32 */
	    "tsk_l123456789abcdefghjkmnpqrs",
	    "tsk_o123456789abcdefghjkmnpqrs",
	    "tsk_u123456789abcdefghjkmnpqrs",
	    "tsk_../3456789abcdefghjkmnpqrs",
	    "../tsk_0123456789abcdefghjkmnp",
	    "tsk_0123456789abcdefghjkmnpq/s",
	    "tsk_0123456789abcdefghjkmnpq s",
	    "tsk_0123456789abcdefghjkmnpqr\n",
	    "tsk_0123456789abcdefghjkmnpq\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (task_id_is_valid(bad[i]))
			fail_msg("'%s' was taken for a task id", bad[i]);
	assert_false(task_id_is_valid(NULL));
}

static void test_release(void **state)
{
	(void)state;
	struct task t = {
	    .spec_json = strdup("{}"), .progress_json = strdup("{}"), .error = strdup("x")};
	task_release(&t);
	assert_null(t.spec_json);
	assert_null(t.progress_json);
	assert_null(t.error);
	task_release(&t); /* twice is harmless */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_round_trip),
	    cmocka_unit_test(test_unknown_names_fail),
	    cmocka_unit_test(test_event_type_names),
	    cmocka_unit_test(test_final_states),
	    cmocka_unit_test(test_transition_table),
	    cmocka_unit_test(test_after_attempt_retries),
	    cmocka_unit_test(test_after_attempt_never_retries_success_or_cancel),
	    cmocka_unit_test(test_id_new),
	    cmocka_unit_test(test_id_is_valid),
	    cmocka_unit_test(test_release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
