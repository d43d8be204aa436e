/*
 * test-core-quota.c - tenants' quotas: names, the option's NAME=VALUE
 * (every unit, at and past the limit), the check (only what is asked,
 * the timeout alone, a use already past a lowered bound) and adding up.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/quota.h"

static void test_names(void **state)
{
	(void)state;
	for (int i = 0; i < QUOTA_COUNT; i++)
		assert_int_equal(quota_find(quota_name((enum quota_id)i)), i);
	assert_int_equal(quota_find("Sandboxes"), QUOTA_COUNT);
	assert_int_equal(quota_find(""), QUOTA_COUNT);
	assert_int_equal(quota_find(NULL), QUOTA_COUNT);
	assert_null(quota_name(QUOTA_COUNT));
	assert_string_equal(quota_name(QUOTA_CPUS), "cpus");
}

static void test_set_text(void **state)
{
	(void)state;
	struct quota q;
	quota_none(&q);
	assert_int_equal(quota_set_text(&q, "sandboxes=3"), 0);
	assert_int_equal(q.v[QUOTA_SANDBOXES], 3);
	assert_int_equal(quota_set_text(&q, "cpus=1.5"), 0);
	assert_int_equal(q.v[QUOTA_CPUS], 1500);
	assert_int_equal(quota_set_text(&q, "cpus=2"), 0);
	assert_int_equal(q.v[QUOTA_CPUS], 2000);
	assert_int_equal(quota_set_text(&q, "cpus=0.001"), 0);
	assert_int_equal(q.v[QUOTA_CPUS], 1);
	assert_int_equal(quota_set_text(&q, "memory_mb=0"), 0);
	assert_int_equal(q.v[QUOTA_MEMORY_MB], 0);
	assert_int_equal(quota_set_text(&q, "memory_mb=none"), 0);
	assert_int_equal(q.v[QUOTA_MEMORY_MB], QUOTA_NONE);
	char max[64];
	snprintf(max, sizeof(max), "disk_mb=%llu", (unsigned long long)QUOTA_VALUE_MAX);
	assert_int_equal(quota_set_text(&q, max), 0);
	assert_int_equal(q.v[QUOTA_DISK_MB], QUOTA_VALUE_MAX);
	snprintf(max, sizeof(max), "disk_mb=%llu", (unsigned long long)QUOTA_VALUE_MAX + 1);
	const char *const bad[] = {
	    "sandboxes",
	    "=3",
	    "sandboxes=",
	    "sandboxes=-1",
	    "sandboxes=1.5",
	    "cpus=1.2345",
	    "cpus=1.",
	    "cpus=.5",
	    "sandboxes=3x",
	    "bogus=1",
	    "sandboxes= 3",
	    "timeout_s=99999999999999999999",
	    "sandboxes=None",
	    max,
	    "a_very_long_name_that_is_no_quota=1",
	};
	struct quota before = q;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (quota_set_text(&q, bad[i]) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
		assert_memory_equal(&q, &before, sizeof(q)); /* nothing changed */
	}
	assert_int_equal(quota_set_text(&q, NULL), -EINVAL);
}

static void test_check(void **state)
{
	(void)state;
	struct quota limit, use = {0}, ask = {0};
	enum quota_id id = QUOTA_COUNT;
	quota_none(&limit);
	limit.v[QUOTA_SANDBOXES] = 2;
	limit.v[QUOTA_MEMORY_MB] = 1024;
	limit.v[QUOTA_TIMEOUT_S] = 600;
	ask.v[QUOTA_SANDBOXES] = 1;
	ask.v[QUOTA_MEMORY_MB] = 512;
	ask.v[QUOTA_CPUS] = 99000; /* no bound on CPUs */
	assert_true(quota_check(&limit, &use, &ask, &id));
	quota_add(&use, &ask, 1);
	assert_true(quota_check(&limit, &use, &ask, &id)); /* exactly at both bounds */
	quota_add(&use, &ask, 1);
	assert_false(quota_check(&limit, &use, &ask, &id));
	assert_int_equal(id, QUOTA_SANDBOXES); /* the first one past */
	/* what is not asked is not checked: ending things past a lowered bound is fine */
	struct quota nothing = {0};
	limit.v[QUOTA_SANDBOXES] = 1;
	assert_true(quota_check(&limit, &use, &nothing, &id));
	/* the timeout compares the ask alone */
	struct quota t = {0};
	t.v[QUOTA_TIMEOUT_S] = 600;
	assert_true(quota_check(&limit, &use, &t, &id));
	t.v[QUOTA_TIMEOUT_S] = 601;
	assert_false(quota_check(&limit, &use, &t, &id));
	assert_int_equal(id, QUOTA_TIMEOUT_S);
	/* a bound of 0: nothing of it at all */
	limit.v[QUOTA_TASKS_RUNNING] = 0;
	struct quota task = {0};
	task.v[QUOTA_TASKS_RUNNING] = 1;
	assert_false(quota_check(&limit, &nothing, &task, &id));
	assert_int_equal(id, QUOTA_TASKS_RUNNING);
	/* no overflow near the top */
	quota_none(&limit);
	limit.v[QUOTA_DISK_MB] = QUOTA_VALUE_MAX;
	struct quota big = {0};
	big.v[QUOTA_DISK_MB] = UINT64_MAX - 1;
	assert_false(quota_check(&limit, &nothing, &big, &id));
	assert_int_equal(id, QUOTA_DISK_MB);
}

static void test_add(void **state)
{
	(void)state;
	struct quota use = {0}, by = {0};
	by.v[QUOTA_MEMORY_MB] = 512;
	by.v[QUOTA_SANDBOXES] = 1;
	quota_add(&use, &by, 1);
	quota_add(&use, &by, 1);
	assert_int_equal(use.v[QUOTA_MEMORY_MB], 1024);
	quota_add(&use, &by, -1);
	quota_add(&use, &by, -1);
	quota_add(&use, &by, -1); /* never below 0 */
	assert_int_equal(use.v[QUOTA_MEMORY_MB], 0);
	assert_int_equal(use.v[QUOTA_SANDBOXES], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_set_text),
	    cmocka_unit_test(test_check),
	    cmocka_unit_test(test_add),
	};
	return cmocka_run_group_tests_name("core: quotas", tests, NULL, NULL);
}
