/*
 * test-store-events.c - the contract of store.h, part two: progress and
 * events, transactions, and durability. Progress merging (top-level keys
 * of the latest event win), gapless per-task seq across progress and
 * status events, group commit and rollback, reopening, a writer killed
 * right after its acknowledgements, and claims racing from several
 * processes. Runs against every backend in store-contract.h.
 */
#include "store-contract.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A task claimed at attempt 1, ready for progress. */
static void running_task(struct fx *f, char id[TASK_ID_SIZE])
{
	add(f, 1, 2, B(TASK_LOST), id);
	claim(f, 1, id);
}

static void assert_progress(struct fx *f, const char *id, const char *want)
{
	struct task t = get(f, id);
	assert_string_equal(t.progress_json, want);
	task_release(&t);
}

/* ---- progress and events ----------------------------------------------- */

static void test_progress_merge_top_level(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	progress(f, id, 1, "{\"a\":1,\"b\":{\"x\":1,\"y\":2},\"c\":[1]}");
	assert_progress(f, id, "{\"a\":1,\"b\":{\"x\":1,\"y\":2},\"c\":[1]}");
	/* b is replaced whole (no deep merge), null is kept as a value, and
	 * numbers keep their text */
	progress(f, id, 1, "{\"b\":{\"z\":null},\"d\":null,\"a\":2.50}");
	assert_progress(f, id, "{\"a\":2.50,\"b\":{\"z\":null},\"c\":[1],\"d\":null}");
	progress(f, id, 1, "{}");
	assert_progress(f, id, "{\"a\":2.50,\"b\":{\"z\":null},\"c\":[1],\"d\":null}");
	/* the same key however it is escaped; the latest of duplicates wins */
	progress(f, id, 1, "{\"\\u0061\":1e400,\"e\":\"\xc3\xa9\\n\",\"e\":true}");
	assert_progress(f, id, "{\"a\":1e400,\"b\":{\"z\":null},\"c\":[1],\"d\":null,\"e\":true}");
	/* the event keeps what was written, as written */
	struct events *e = events(f, id);
	assert_int_equal(e->n, 5);
	assert_string_equal(e->v[2].data, "{\"b\":{\"z\":null},\"d\":null,\"a\":2.50}");
	assert_string_equal(e->v[3].data, "{}");
	free(e);
}

static void test_progress_seq_interleaves_with_status(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id); /* seq 1: running */
	assert_int_equal(progress(f, id, 1, "{\"step\":1}"), 2);
	assert_int_equal(progress(f, id, 1, "{\"step\":2}"), 3);
	assert_int_equal(end(f, id, 1, TASK_LOST, -1, "lost", 5), TASK_QUEUED); /* 4 */
	assert_int_equal(claim(f, 6, id), 2);					/* 5 */
	assert_int_equal(progress(f, id, 2, "{\"step\":3}"), 6);
	assert_int_equal(end(f, id, 2, TASK_SUCCEEDED, 0, NULL, 8), TASK_SUCCEEDED); /* 7 */
	struct events *e = events(f, id);
	static const enum task_event_type types[] = {
	    TASK_EVENT_STATUS, TASK_EVENT_PROGRESS, TASK_EVENT_PROGRESS, TASK_EVENT_STATUS,
	    TASK_EVENT_STATUS, TASK_EVENT_PROGRESS, TASK_EVENT_STATUS,
	};
	static const uint32_t attempts[] = {1, 1, 1, 1, 2, 2, 2};
	assert_int_equal(e->n, 7);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(e->v[i].type, types[i]);
		assert_int_equal(e->v[i].attempt, attempts[i]);
	}
	assert_string_equal(e->v[5].data, "{\"step\":3}");
	assert_string_equal(e->v[6].data, "{\"status\":\"succeeded\",\"attempt\":2,"
					  "\"end\":\"succeeded\",\"exit_code\":0,\"error\":null}");
	free(e);
	assert_progress(f, id, "{\"step\":3}"); /* progress survives a retry */
}

static void test_progress_errors(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	static const char *const bad[] = {
	    "",
	    "[]",
	    "1",
	    "\"s\"",
	    "{",
	    "{\"a\":}",
	    "{a:1}",
	    "{\"a\":1}x",
	    "{'a':1}",
	    "{\"a\":1,}",
	    "{\"a\":01}",
	    "{\"a\":tru}",
	    "{\"a\":\"\x01\"}",
	    "{\"a\":\"\xff\"}",
	    "{\"a\":[1,]}",
	    "{\"a\":\"\\x\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		FAILS(EINVAL, store_progress_append(f->st, id, 1, bad[i], 1, NULL, err));
	FAILS(EINVAL, store_progress_append(f->st, id, 1, NULL, 1, NULL, err));
	assert_int_equal(event_count(f, id), 1);
	assert_progress(f, id, "{}");
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	FAILS(ENOENT, store_progress_append(f->st, unknown, 1, "{}", 1, NULL, err));
	/* ret_seq may be NULL */
	OK(store_progress_append(f->st, id, 1, "{\"ok\":1}", 1, NULL, err));
	/* nesting is bounded (the checker recurses): 100 levels pass, 10000 do not */
	static char deep[2 * 10000 + 16];
	for (int levels = 100; levels <= 10000; levels *= 100) {
		int n = snprintf(deep, sizeof(deep), "{\"d\":");
		memset(deep + n, '[', (size_t)levels);
		memset(deep + n + levels, ']', (size_t)levels);
		memcpy(deep + n + 2 * levels, "}", 2);
		int r = store_progress_append(f->st, id, 1, deep, 1, NULL, NULL);
		assert_int_equal(r, levels == 100 ? 0 : -EINVAL);
	}
}

static int stop_at_third(const struct task_event *ev, void *data)
{
	int *calls = data;
	(void)ev;
	return ++*calls == 3 ? -ECANCELED : 0;
}

/* A refusal of the task's network: an event of its own type, the progress left alone. */
static void test_egress_denied_events(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id); /* seq 1: running */
	progress(f, id, 1, "{\"page\":3}");
	const char *denied = "{\"host\":\"forbidden.test\",\"port\":53,\"reason\":\"not_allowed\"}";
	OK(store_egress_denied_append(f->st, id, 1, denied, 77, err));
	assert_progress(f, id, "{\"page\":3}");
	FAILS(ESTALE, store_egress_denied_append(f->st, id, 2, denied, 78, err));
	FAILS(EINVAL, store_egress_denied_append(f->st, id, 1, "[1]", 78, err));
	FAILS(EINVAL, store_egress_denied_append(f->st, NULL, 1, denied, 78, err));
	struct events *e = events(f, id);
	assert_int_equal(e->n, 3);
	assert_int_equal(e->v[2].seq, 3);
	assert_int_equal(e->v[2].type, TASK_EVENT_EGRESS_DENIED);
	assert_int_equal(e->v[2].time, 77);
	assert_int_equal(e->v[2].attempt, 1);
	assert_string_equal(e->v[2].data, denied);
	free(e);
}

static void test_events_list_pages(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	for (int i = 2; i <= 10; i++) {
		char json[32];
		snprintf(json, sizeof(json), "{\"i\":%d}", i);
		OK(store_progress_append(f->st, id, 1, json, 1000 + i, NULL, err));
	}
	struct events *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	OK(store_events_list(f->st, id, 0, 3, collect_event, e, err));
	OK(store_events_list(f->st, id, 3, 3, collect_event, e, err));
	assert_int_equal(e->n, 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(e->v[i].seq, i + 1);
	assert_int_equal(e->v[4].time, 1005);
	assert_string_equal(e->v[4].data, "{\"i\":5}");
	e->n = 0;
	OK(store_events_list(f->st, id, 9, 5, collect_event, e, err));
	assert_int_equal(e->n, 1);
	assert_int_equal(e->v[0].seq, 10);
	e->n = 0;
	OK(store_events_list(f->st, id, 10, 5, collect_event, e, err));
	OK(store_events_list(f->st, id, 1000, STORE_LIST_MAX, collect_event, e, err));
	assert_int_equal(e->n, 0);
	FAILS(EINVAL, store_events_list(f->st, id, 0, 0, collect_event, e, err));
	FAILS(EINVAL, store_events_list(f->st, id, 0, STORE_LIST_MAX + 1, collect_event, e, err));
	char unknown[TASK_ID_SIZE];
	assert_int_equal(task_id_new(unknown), 0);
	FAILS(ENOENT, store_events_list(f->st, unknown, 0, 10, collect_event, e, err));
	free(e);
	int calls = 0;
	struct error err = {0};
	assert_int_equal(store_events_list(f->st, id, 0, 10, stop_at_third, &calls, &err),
			 -ECANCELED);
	assert_int_equal(calls, 3);
}

static void test_status_event_escapes_error(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	const char *why = "bad \"arg\"\n\tat \\ \x01 \xc3\xa9 \xff";
	assert_int_equal(end(f, id, 1, TASK_FAILED, 2, why, 9), TASK_FAILED);
	struct task t = get(f, id);
	assert_string_equal(t.error, why); /* the task keeps the text itself */
	task_release(&t);
	struct events *e = events(f, id);
	assert_string_equal(
	    e->v[1].data, "{\"status\":\"failed\",\"attempt\":1,\"end\":\"failed\",\"exit_code\":2,"
			  "\"error\":"
			  "\"bad \\\"arg\\\"\\n\\tat \\\\ \\u0001 \xc3\xa9 \xef\xbf\xbd\"}");
	free(e);
}

/* ---- transactions ------------------------------------------------------ */

static void test_tx_group_commit(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	OK(store_tx_begin(f->st, err));
	for (int i = 0; i < 1000; i++) {
		char json[32];
		snprintf(json, sizeof(json), "{\"i\":%d}", i);
		assert_int_equal(progress(f, id, 1, json), i + 2);
	}
	OK(store_tx_commit(f->st, err));
	struct events *e = events(f, id); /* checks seq 1..1001, gapless */
	assert_int_equal(e->n, 1001);
	assert_string_equal(e->v[1000].data, "{\"i\":999}");
	free(e);
	assert_progress(f, id, "{\"i\":999}");
}

static void test_tx_rollback(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE], other[TASK_ID_SIZE];
	running_task(f, id);
	OK(store_tx_begin(f->st, err));
	for (int i = 0; i < 10; i++)
		progress(f, id, 1, "{\"x\":1}");
	add(f, 5, 1, 0, other);
	assert_int_equal(end(f, id, 1, TASK_SUCCEEDED, 0, NULL, 5), TASK_SUCCEEDED);
	store_tx_rollback(f->st);
	assert_int_equal(event_count(f, id), 1);
	assert_progress(f, id, "{}");
	assert_int_equal(status_of(f, id), TASK_RUNNING);
	struct task t = {0};
	FAILS(ENOENT, store_task_get(f->st, other, &t, err));
	/* after a rollback, calls commit on their own again, and seq goes on */
	assert_int_equal(progress(f, id, 1, "{\"y\":2}"), 2);
	reopen(f);
	assert_int_equal(event_count(f, id), 2);
}

static void test_tx_claim_rollback(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	add(f, 1, 1, 0, id);
	OK(store_tx_begin(f->st, err));
	claim(f, 10, id);
	store_tx_rollback(f->st);
	struct task t = get(f, id);
	assert_int_equal(t.status, TASK_QUEUED);
	assert_int_equal(t.attempt, 0);
	assert_int_equal(t.started_at, 0);
	task_release(&t);
	assert_int_equal(event_count(f, id), 0);
	assert_int_equal(claim(f, 20, id), 1);
}

static void test_tx_misuse_and_failures_inside(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	FAILS(EINVAL, store_tx_commit(f->st, err)); /* none open */
	store_tx_rollback(f->st);		    /* harmless */
	OK(store_tx_begin(f->st, err));
	FAILS(EINVAL, store_tx_begin(f->st, err)); /* no nesting */
	assert_int_equal(progress(f, id, 1, "{\"a\":1}"), 2);
	/* a failing call undoes only itself; the group goes on */
	FAILS(ESTALE, store_progress_append(f->st, id, 9, "{\"a\":9}", 1, NULL, err));
	FAILS(EINVAL, store_progress_append(f->st, id, 1, "{", 1, NULL, err));
	char dup[TASK_ID_SIZE];
	add(f, 2, 1, 0, dup);
	struct task t = {.tenant = TENANT_DEFAULT, .max_attempts = 1, .spec_json = "{}"};
	memcpy(t.id, dup, TASK_ID_SIZE);
	FAILS(EEXIST, store_task_insert(f->st, &t, err));
	assert_int_equal(progress(f, id, 1, "{\"b\":2}"), 3);
	OK(store_tx_commit(f->st, err));
	FAILS(EINVAL, store_tx_commit(f->st, err));
	reopen(f);
	assert_int_equal(event_count(f, id), 3);
	assert_progress(f, id, "{\"a\":1,\"b\":2}");
	assert_int_equal(status_of(f, dup), TASK_QUEUED);
}

/* ---- durability -------------------------------------------------------- */

/* Every task and event as text. */
static char *dump(struct fx *f)
{
	struct ids all;
	list(f, 0, NULL, 64, &all);
	size_t size = 65536, len = 0;
	char *buf = calloc(1, size);
	assert_non_null(buf);
	for (size_t i = 0; i < all.n; i++) {
		struct task t = get(f, all.v[i]);
		len += (size_t)snprintf(buf + len, size - len,
					"%s %d %u %u %u %d %d %lld %lld %lld %s %s %s\n", t.id,
					t.status, t.attempt, t.max_attempts, t.retry_on,
					t.cancel_requested, t.exit_code, (long long)t.created_at,
					(long long)t.started_at, (long long)t.finished_at,
					t.spec_json, t.progress_json, t.error ? t.error : "-");
		task_release(&t);
		struct events *e = events(f, all.v[i]);
		for (size_t j = 0; j < e->n; j++)
			len += (size_t)snprintf(
			    buf + len, size - len, " %lld %u %d %lld %s\n", (long long)e->v[j].seq,
			    e->v[j].attempt, e->v[j].type, (long long)e->v[j].time, e->v[j].data);
		free(e);
		assert_true(len < size - 1);
	}
	return buf;
}

static void test_reopen_keeps_everything(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE], c[TASK_ID_SIZE], d[TASK_ID_SIZE];
	add(f, 1, 2, B(TASK_OOM_KILLED), a);
	add(f, 2, 1, 0, b);
	add(f, 3, 1, 0, c);
	add(f, 4, 1, 0, d);
	claim(f, 10, a);
	progress(f, a, 1, "{\"pct\":50}");
	end(f, a, 1, TASK_OOM_KILLED, -1, "oom", 11);
	claim(f, 12, a);
	claim(f, 13, b);
	end(f, b, 1, TASK_FAILED, 7, "exit 7", 14);
	OK(store_task_cancel(f->st, c, 15, NULL, err));
	OK(store_task_cancel(f->st, a, 16, NULL, err));
	char *before = dump(f);
	reopen(f);
	char *after = dump(f);
	assert_string_equal(before, after);
	assert_int_equal(status_of(f, d), TASK_QUEUED);
	free(before);
	free(after);
}

static void test_writer_killed_after_commits(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	f->st = store_close(f->st);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* its own store: a connection never crosses a fork */
		struct store *st = NULL;
		if (backend->open(f->dir, &st, NULL) < 0)
			_exit(2);
		for (int i = 0; i < 200; i++) {
			char json[32];
			snprintf(json, sizeof(json), "{\"n\":%d}", i);
			if (store_progress_append(st, id, 1, json, i, NULL, NULL) < 0)
				_exit(3);
		}
		_exit(0); /* acknowledged, then gone without closing anything */
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	OK(backend->open(f->dir, &f->st, err));
	struct events *e = events(f, id);
	assert_int_equal(e->n, 201);
	assert_string_equal(e->v[200].data, "{\"n\":199}");
	free(e);
	assert_progress(f, id, "{\"n\":199}");
}

static void test_claims_race_across_processes(void **state)
{
	struct fx *f = *state;
	enum { TASKS = 60, CLAIMERS = 3 };
	char ids[TASKS][TASK_ID_SIZE];
	for (int i = 0; i < TASKS; i++)
		add(f, i / 4, 1, 0, ids[i]);
	f->st = store_close(f->st);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pids[CLAIMERS];
	for (int c = 0; c < CLAIMERS; c++) {
		pids[c] = fork();
		assert_true(pids[c] >= 0);
		if (pids[c] > 0)
			continue;
		close(fds[0]);
		struct store *st = NULL;
		if (backend->open(f->dir, &st, NULL) < 0)
			_exit(2);
		for (;;) {
			struct task t = {0};
			int r = store_task_claim(st, c, &t, NULL);
			if (r == -ENOENT)
				_exit(0);
			if (r == -EBUSY)
				continue;
			if (r < 0)
				_exit(3);
			char line[TASK_ID_SIZE + 1];
			snprintf(line, sizeof(line), "%s\n", t.id);
			if (write(fds[1], line, TASK_ID_SIZE - 1) != TASK_ID_SIZE - 1)
				_exit(4);
			task_release(&t);
		}
	}
	close(fds[1]);
	char got[TASKS + 1][TASK_ID_SIZE];
	int n = 0;
	while (n <= TASKS && read(fds[0], got[n], TASK_ID_SIZE - 1) == TASK_ID_SIZE - 1) {
		got[n][TASK_ID_SIZE - 2] = '\0';
		n++;
	}
	close(fds[0]);
	for (int c = 0; c < CLAIMERS; c++) {
		int status;
		assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(n, TASKS); /* each task claimed once, none twice */
	for (int i = 0; i < TASKS; i++) {
		int seen = 0;
		for (int j = 0; j < n; j++)
			seen += strcmp(ids[i], got[j]) == 0;
		if (seen != 1)
			fail_msg("task %s was claimed %d times", ids[i], seen);
	}
	OK(backend->open(f->dir, &f->st, err));
	struct ids queued;
	list(f, B(TASK_QUEUED), NULL, 64, &queued);
	assert_int_equal(queued.n, 0);
}

/* ---- throughput, for the record (printed, never asserted) -------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_throughput(void **state)
{
	struct fx *f = *state;
	char id[TASK_ID_SIZE];
	running_task(f, id);
	static const int batches[] = {1, 100, 1000};
	static const int events_per_run[] = {200, 2000, 5000};
	for (int b = 0; b < 3; b++) {
		double t0 = now_s();
		for (int i = 0; i < events_per_run[b]; i += batches[b]) {
			if (batches[b] > 1)
				OK(store_tx_begin(f->st, err));
			for (int j = 0; j < batches[b]; j++)
				progress(f, id, 1,
					 "{\"pct\":42,\"phase\":\"train\",\"loss\":0.125}");
			if (batches[b] > 1)
				OK(store_tx_commit(f->st, err));
		}
		double dt = now_s() - t0;
		print_message("%s: %d progress events in batches of %d: %.0f events/s\n",
			      backend->name, events_per_run[b], batches[b], events_per_run[b] / dt);
	}
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_progress_merge_top_level),
	    T(test_progress_seq_interleaves_with_status),
	    T(test_progress_errors),
	    T(test_egress_denied_events),
	    T(test_events_list_pages),
	    T(test_status_event_escapes_error),
	    T(test_tx_group_commit),
	    T(test_tx_rollback),
	    T(test_tx_claim_rollback),
	    T(test_tx_misuse_and_failures_inside),
	    T(test_reopen_keeps_everything),
	    T(test_writer_killed_after_commits),
	    T(test_claims_race_across_processes),
	    T(test_throughput),
	};
#undef T
	return run_per_backend("store: events", tests, sizeof(tests) / sizeof(tests[0]));
}
