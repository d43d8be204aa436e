/*
 * test-ratelimit.c - the token buckets of api/ratelimit.h with the clock
 * injected: burst and refill, no drift, Retry-After's rounding, a clock
 * that steps back, eviction at the table's size, threads; and the names
 * of sources (api_rate_source()).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/ratelimit.h"

static struct ratelimit *table(uint32_t rate, uint32_t burst, uint32_t buckets)
{
	struct ratelimit_config cfg = {
	    .rate = rate, .burst = burst, .buckets = buckets, .seed = 42};
	struct ratelimit *rl = NULL;
	assert_int_equal(ratelimit_new(&cfg, &rl), 0);
	return rl;
}

static void test_config_is_checked(void **state)
{
	(void)state;
	struct ratelimit *rl = NULL;
	struct ratelimit_config bad[] = {
	    {.rate = 0, .burst = 1, .buckets = 1},
	    {.rate = 1, .burst = 0, .buckets = 1},
	    {.rate = 1, .burst = 1, .buckets = 0},
	    {.rate = RATELIMIT_RATE_MAX + 1, .burst = 1, .buckets = 1},
	    {.rate = 1, .burst = RATELIMIT_BURST_MAX + 1, .buckets = 1},
	    {.rate = 1, .burst = 1, .buckets = RATELIMIT_BUCKETS_MAX + 1},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ratelimit_new(&bad[i], &rl), -EINVAL);
	assert_null(ratelimit_free(NULL));
}

static void test_burst_then_refill(void **state)
{
	(void)state;
	struct ratelimit *rl = table(5, 5, 16);
	int64_t t = 1000;
	for (int i = 0; i < 5; i++)
		assert_int_equal(ratelimit_take(rl, "k", t), 0);
	/* the sixth: a token comes in 200 ms, so Retry-After is 1 */
	assert_int_equal(ratelimit_take(rl, "k", t), 1);
	assert_int_equal(ratelimit_take(rl, "k", t + 199), 1);
	assert_int_equal(ratelimit_take(rl, "k", t + 200), 0);
	assert_int_equal(ratelimit_take(rl, "k", t + 200), 1);
	/* another name is another bucket */
	assert_int_equal(ratelimit_take(rl, "other", t), 0);
	/* a long wait fills the bucket to its burst, not past it */
	t += 3600 * 1000;
	for (int i = 0; i < 5; i++)
		assert_int_equal(ratelimit_take(rl, "k", t), 0);
	assert_int_equal(ratelimit_take(rl, "k", t), 1);
	ratelimit_free(rl);
}

/*
 * 3 a second, asked every 1 ms for 1000 s: the token the burst left and
 * exactly 3000 more, none lost to rounding (1 ms is 3 thousandths).
 */
static void test_no_drift(void **state)
{
	(void)state;
	struct ratelimit *rl = table(3, 2, 4);
	int64_t t = 0;
	unsigned served = 0;
	assert_int_equal(ratelimit_take(rl, "k", t), 0);
	for (t = 1; t <= 1000 * 1000; t++)
		served += ratelimit_take(rl, "k", t) == 0;
	assert_int_equal(served, 1 + 3000);
	ratelimit_free(rl);
}

static void test_retry_after_rounds_up(void **state)
{
	(void)state;
	/* 1 a second: an empty bucket waits 1 s; after 1 ms, still 1 s (999 ms up) */
	struct ratelimit *rl = table(1, 1, 4);
	assert_int_equal(ratelimit_take(rl, "k", 0), 0);
	assert_int_equal(ratelimit_take(rl, "k", 0), 1);
	assert_int_equal(ratelimit_peek(rl, "k", 1), 1);
	assert_int_equal(ratelimit_peek(rl, "k", 999), 1);
	assert_int_equal(ratelimit_peek(rl, "k", 1000), 0);
	ratelimit_free(rl);
	/* a fast rate never says 0: at least 1 */
	rl = table(1000, 1, 4);
	assert_int_equal(ratelimit_take(rl, "k", 0), 0);
	assert_int_equal(ratelimit_take(rl, "k", 0), 1);
	assert_int_equal(ratelimit_take(rl, "k", 1), 0);
	ratelimit_free(rl);
	/* a slow one: 1 a second with 3 taken at once waits 1 s for the next, not 3 */
	rl = table(1, 3, 4);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ratelimit_take(rl, "k", 0), 0);
	assert_int_equal(ratelimit_take(rl, "k", 0), 1);
	assert_int_equal(ratelimit_take(rl, "k", 500), 1);
	assert_int_equal(ratelimit_take(rl, "k", 1000), 0);
	ratelimit_free(rl);
}

static void test_retry_after_is_honest(void **state)
{
	(void)state;
	/* for rates from 1 to 20: waiting Retry-After seconds always finds a token */
	for (uint32_t rate = 1; rate <= 20; rate++) {
		struct ratelimit *rl = table(rate, 2, 4);
		int64_t t = 0;
		for (int step = 0; step < 200; step++) {
			uint32_t wait = ratelimit_take(rl, "k", t);
			if (wait) {
				assert_true(wait >= 1);
				assert_int_equal(ratelimit_peek(rl, "k", t + wait * 1000), 0);
			}
			t += 37 * (step % 5); /* some at once, some apart */
		}
		ratelimit_free(rl);
	}
}

static void test_peek_takes_nothing(void **state)
{
	(void)state;
	struct ratelimit *rl = table(1, 2, 4);
	assert_int_equal(ratelimit_peek(rl, "k", 0), 0);
	assert_int_equal(ratelimit_count(rl), 0); /* no bucket: a full one */
	assert_int_equal(ratelimit_take(rl, "k", 0), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(ratelimit_peek(rl, "k", 0), 0);
	assert_int_equal(ratelimit_take(rl, "k", 0), 0);
	assert_int_equal(ratelimit_peek(rl, "k", 0), 1);
	ratelimit_free(rl);
}

static void test_clock_stepping_back_gains_nothing(void **state)
{
	(void)state;
	struct ratelimit *rl = table(1, 1, 4);
	assert_int_equal(ratelimit_take(rl, "k", 10000), 0);
	/* back an hour: no token, and no lock-out of an hour either */
	assert_int_equal(ratelimit_take(rl, "k", 10000 - 3600 * 1000), 1);
	assert_int_equal(ratelimit_take(rl, "k", 10000 - 3600 * 1000 + 1000), 0);
	ratelimit_free(rl);
}

static void test_eviction_at_the_cap(void **state)
{
	(void)state;
	struct ratelimit *rl = table(1, 1, 8);
	char name[32];
	/* eight names drain their buckets: the table is full */
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(ratelimit_take(rl, name, 0), 0);
	}
	assert_int_equal(ratelimit_count(rl), 8);
	/* n0 is used again: n1 is now the least recently used */
	assert_int_equal(ratelimit_take(rl, "n0", 0), 1);
	/* a ninth name takes n1's bucket; the count stays at the cap */
	assert_int_equal(ratelimit_take(rl, "n8", 0), 0);
	assert_int_equal(ratelimit_count(rl), 8);
	/* n1 lost its (empty) bucket: it has a full one again, as the header says */
	assert_int_equal(ratelimit_peek(rl, "n1", 0), 0);
	/* the others kept theirs: still empty */
	for (int i = 2; i < 8; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(ratelimit_peek(rl, name, 0), 1);
	}
	assert_int_equal(ratelimit_peek(rl, "n0", 0), 1);
	/* many more names: never past the cap, and every one is found again */
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		assert_int_equal(ratelimit_take(rl, name, 0), 0);
		assert_int_equal(ratelimit_take(rl, name, 0), 1);
		assert_true(ratelimit_count(rl) <= 8);
	}
	ratelimit_free(rl);
}

static void test_long_names_are_cut(void **state)
{
	(void)state;
	struct ratelimit *rl = table(1, 1, 4);
	char a[200], b[200];
	memset(a, 'a', sizeof(a) - 1);
	a[sizeof(a) - 1] = '\0';
	memcpy(b, a, sizeof(b));
	b[150] = 'b'; /* past RATELIMIT_NAME_SIZE: the same bucket */
	assert_int_equal(ratelimit_take(rl, a, 0), 0);
	assert_int_equal(ratelimit_take(rl, b, 0), 1);
	ratelimit_free(rl);
}

/* ---- threads ----------------------------------------------------------- */

#define THREADS	    4
#define TAKES	    20000
#define THREAD_RATE 1000

struct worker {
	struct ratelimit *rl;
	int id;
	unsigned served;
};

/* every thread at the same fixed time: exactly the burst is served in all */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16];
	for (int i = 0; i < TAKES; i++) {
		snprintf(name, sizeof(name), "k%d", i % 3);
		w->served += ratelimit_take(w->rl, name, 5000) == 0;
		snprintf(name, sizeof(name), "t%d-%d", w->id, i % 50);
		(void)ratelimit_take(w->rl, name, 5000 + i);
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct ratelimit *rl = table(THREAD_RATE, 1000, 64);
	pthread_t tid[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.rl = rl, .id = i};
		assert_int_equal(pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
	}
	unsigned served = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		served += w[i].served;
	}
	/* three names, at one instant: their bursts and not one token more */
	assert_int_equal(served, 3 * 1000);
	assert_true(ratelimit_count(rl) <= 64);
	ratelimit_free(rl);
}

/* ---- sources ----------------------------------------------------------- */

static void test_source_names(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
	    {"192.0.2.7", "192.0.2.7"},
	    {"127.0.0.1", "127.0.0.0/8"},
	    {"127.3.4.5", "127.0.0.0/8"},
	    {"::ffff:192.0.2.7", "192.0.2.7"},
	    {"::ffff:127.0.0.1", "127.0.0.0/8"},
	    {"2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"},
	    {"2001:db8:1:2::1", "2001:db8:1:2::/64"},
	    {"::1", "::/64"},
	    {"unix:uid=1000", "unix:uid=1000"},
	    {"", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[API_SOURCE_SIZE];
		api_rate_source(cases[i][0], out);
		assert_string_equal(out, cases[i][1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_is_checked),
	    cmocka_unit_test(test_burst_then_refill),
	    cmocka_unit_test(test_no_drift),
	    cmocka_unit_test(test_retry_after_rounds_up),
	    cmocka_unit_test(test_retry_after_is_honest),
	    cmocka_unit_test(test_peek_takes_nothing),
	    cmocka_unit_test(test_clock_stepping_back_gains_nothing),
	    cmocka_unit_test(test_eviction_at_the_cap),
	    cmocka_unit_test(test_long_names_are_cut),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_source_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
