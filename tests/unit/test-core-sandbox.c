/*
 * test-core-sandbox.c - the sandbox model: status names, the one
 * lifecycle table (every pair of statuses), end reasons, sandbox ids
 * (and that they are never taken for task ids, nor the other way), and
 * the shared id code of core/id.h with a prefix of its own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/id.h"
#include "core/sandbox.h"
#include "core/task.h"

#define B(s) SANDBOX_STATUS_BIT(s)

static const char *const names[SANDBOX_STATUS_COUNT] = {"pooled", "running", "paused", "ended"};

/* ---- names ------------------------------------------------------------- */

static void test_names_round_trip(void **state)
{
	(void)state;
	for (int s = 0; s < SANDBOX_STATUS_COUNT; s++) {
		assert_string_equal(sandbox_status_name((enum sandbox_status)s), names[s]);
		enum sandbox_status back = SANDBOX_STATUS_COUNT;
		assert_int_equal(sandbox_status_parse(names[s], &back), 0);
		assert_int_equal(back, s);
	}
	assert_null(sandbox_status_name(SANDBOX_STATUS_COUNT));
	assert_null(sandbox_status_name((enum sandbox_status) - 1));
}

static void test_unknown_names_fail(void **state)
{
	(void)state;
	static const char *const bad[] = {"",	    "Running", "PAUSED", "paused ", " ended",
					  "queued", "stopped", "pool",	 "ended\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum sandbox_status s = SANDBOX_PAUSED;
		assert_int_equal(sandbox_status_parse(bad[i], &s), -EINVAL);
		assert_int_equal(s, SANDBOX_PAUSED); /* left alone */
	}
	enum sandbox_status s = SANDBOX_PAUSED;
	assert_int_equal(sandbox_status_parse(NULL, &s), -EINVAL);
}

/* ---- the lifecycle table ----------------------------------------------- */

static void test_transition_table(void **state)
{
	(void)state;
	/* want[from]: exactly the statuses `from` may move to */
	const uint32_t want[SANDBOX_STATUS_COUNT] = {
	    [SANDBOX_POOLED] = B(SANDBOX_RUNNING) | B(SANDBOX_ENDED),
	    [SANDBOX_RUNNING] = B(SANDBOX_PAUSED) | B(SANDBOX_ENDED),
	    [SANDBOX_PAUSED] = B(SANDBOX_RUNNING) | B(SANDBOX_ENDED),
	};
	for (int from = 0; from < SANDBOX_STATUS_COUNT; from++)
		for (int to = 0; to < SANDBOX_STATUS_COUNT; to++) {
			bool got = sandbox_transition_is_allowed((enum sandbox_status)from,
								 (enum sandbox_status)to);
			bool expect = (want[from] & B(to)) != 0;
			if (got != expect)
				fail_msg("%s -> %s: allowed is %d, want %d", names[from], names[to],
					 got, expect);
		}
	/* the ones that matter most, spelled out */
	assert_false(sandbox_transition_is_allowed(SANDBOX_PAUSED, SANDBOX_POOLED));
	assert_false(sandbox_transition_is_allowed(SANDBOX_POOLED, SANDBOX_PAUSED));
	assert_false(sandbox_transition_is_allowed(SANDBOX_ENDED, SANDBOX_RUNNING));
	assert_false(sandbox_transition_is_allowed(SANDBOX_ENDED, SANDBOX_ENDED));
	assert_false(sandbox_transition_is_allowed(SANDBOX_STATUS_COUNT, SANDBOX_RUNNING));
	assert_false(sandbox_transition_is_allowed(SANDBOX_RUNNING, SANDBOX_STATUS_COUNT));
}

static void test_end_reasons(void **state)
{
	(void)state;
	static const char *const good[] = {"expired", "deleted", "died", "failed", "stopped"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(sandbox_end_reason_is_valid(good[i]));
	static const char *const bad[] = {"",	   "Expired", "expired ", "deleted\n",
					  "ended", "killed",  "oom",	  "die"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sandbox_end_reason_is_valid(bad[i]))
			fail_msg("'%s' was taken for an end reason", bad[i]);
	assert_false(sandbox_end_reason_is_valid(NULL));
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
	char(*ids)[SANDBOX_ID_SIZE] = calloc(N, SANDBOX_ID_SIZE);
	assert_non_null(ids);
	for (int i = 0; i < N; i++) {
		assert_int_equal(sandbox_id_new(ids[i]), 0);
		assert_int_equal(strlen(ids[i]), 30);
		assert_memory_equal(ids[i], "sbx_", 4);
		if (!sandbox_id_is_valid(ids[i]))
			fail_msg("sandbox_id_new gave an invalid id: '%s'", ids[i]);
		if (task_id_is_valid(ids[i]))
			fail_msg("sandbox id '%s' was taken for a task id", ids[i]);
	}
	qsort(ids, N, SANDBOX_ID_SIZE, compare_ids);
	for (int i = 1; i < N; i++)
		if (strcmp(ids[i - 1], ids[i]) == 0)
			fail_msg("sandbox_id_new gave '%s' twice", ids[i]);
	free(ids);
	char task[TASK_ID_SIZE];
	assert_int_equal(task_id_new(task), 0);
	assert_false(sandbox_id_is_valid(task));
}

static void test_id_is_valid(void **state)
{
	(void)state;
	assert_true(sandbox_id_is_valid("sbx_0123456789abcdefghjkmnpqrs"));
	assert_true(sandbox_id_is_valid("sbx_tvwxyz00000000000000000000"));
	static const char *const bad[] = {
	    "",
	    "sbx_",
	    "sbx",
	    "tsk_0123456789abcdefghjkmnpqrs", /* a task's */
	    "sbox_0123456789abcdefghjkmnpqrs",
	    "SBX_0123456789abcdefghjkmnpqrs",
	    "sbx_0123456789abcdefghjkmnpqr",   /* 25 characters */
	    "sbx_0123456789abcdefghjkmnpqrst", /* 27 */
	    "sbx_0123456789ABCDEFGHJKMNPQRS",  /* uppercase */
	    "sbx_i123456789abcdefghjkmnpqrs",  /* i, l, o, u are not base32 */
	    "sbx_l123456789abcdefghjkmnpqrs",
	    "sbx_o123456789abcdefghjkmnpqrs",
	    "sbx_u123456789abcdefghjkmnpqrs",
	    "sbx_../3456789abcdefghjkmnpqrs",
	    "../sbx_0123456789abcdefghjkmnp",
	    "sbx_0123456789abcdefghjkmnpq/s",
	    "sbx_0123456789abcdefghjkmnpq s",
	    "sbx_0123456789abcdefghjkmnpqr\n",
	    "sbx_0123456789abcdefghjkmnpq\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sandbox_id_is_valid(bad[i]))
			fail_msg("'%s' was taken for a sandbox id", bad[i]);
	assert_false(sandbox_id_is_valid(NULL));
}

/* The shared code behind both kinds of id. */
static void test_shared_id_code(void **state)
{
	(void)state;
	char id[40];
	assert_int_equal(id_new("ab_", id, sizeof(id)), 0);
	assert_int_equal(strlen(id), 3 + ID_RANDOM_CHARS);
	assert_true(id_is_valid("ab_", id));
	assert_false(id_is_valid("ac_", id));
	assert_false(id_is_valid("ab_", id + 1));
	/* exactly enough room, then one byte short */
	assert_int_equal(id_new("ab_", id, 3 + ID_RANDOM_CHARS + 1), 0);
	memset(id, 'z', sizeof(id));
	assert_int_equal(id_new("ab_", id, 3 + ID_RANDOM_CHARS), -EINVAL);
	assert_int_equal(id[0], 'z'); /* nothing written */
	assert_false(id_is_valid("ab_", NULL));
}

static void test_release(void **state)
{
	(void)state;
	struct sandbox_record sb = {.spec_json = strdup("{}"),
				    .metadata_json = strdup("{}"),
				    .end_reason = strdup("died"),
				    .end_detail = strdup("x")};
	sandbox_record_release(&sb);
	assert_null(sb.spec_json);
	assert_null(sb.metadata_json);
	assert_null(sb.end_reason);
	assert_null(sb.end_detail);
	sandbox_record_release(&sb); /* twice is harmless */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_round_trip), cmocka_unit_test(test_unknown_names_fail),
	    cmocka_unit_test(test_transition_table), cmocka_unit_test(test_end_reasons),
	    cmocka_unit_test(test_id_new),	     cmocka_unit_test(test_id_is_valid),
	    cmocka_unit_test(test_shared_id_code),   cmocka_unit_test(test_release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
