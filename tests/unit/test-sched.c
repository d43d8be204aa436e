/*
 * test-sched.c - the scheduler's decisions, without a daemon, a real
 * supervisor or the wall clock: claims (first in first out, up to
 * max_running), the import of events journals (only durable, complete
 * lines; never twice), the end of an attempt (from result.json, as lost
 * without one, queued again for a retry), cancels, and recovery after a
 * restart.
 *
 * Each case gets a real SQLite store and a state directory in a fresh
 * scratch directory. The scheduler's spawn hook records the attempt and
 * keeps the lock it is handed (a dup of the open file: flock locks belong
 * to the open file), as a supervisor holds it for its life; closing that
 * dup is the supervisor's exit. The clock is a number the case sets.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "core/layout.h"
#include "sched/sched.h"
#include "store/store.h"

#define B(s)	   TASK_STATUS_BIT(s)
#define SPEC	   "{\"cmd\":[\"true\"],\"env\":{\"A\":\"b\"}}"
#define SUPERVISOR "/nonexistent/agentbox-supervisor"

#define SPAWNS_MAX 16
#define LOGS_MAX   8

struct spawned {
	char dir[PATH_MAX];
	int lock;	 /* our dup of the lock: held = the "supervisor" lives */
	bool was_locked; /* the lock was held when spawn was called */
	json_t *attempt; /* attempt.json as it was when spawn was called */
	char path[64];	 /* the supervisor path spawn was given */
};

struct fx {
	char dir[128];
	char state[160];
	struct store *st;
	struct sched *s;
	int64_t now;
	int spawn_result; /* what spawn returns: 0, or -errno (nothing recorded then) */
	size_t nspawn, ntried;
	struct spawned spawned[SPAWNS_MAX];
	size_t nlog;
	char logs[LOGS_MAX][ERROR_MSG_MAX + 128];
};

/* Fail the case with err's reason unless expr returns 0. */
#define OK(expr)                                                                                   \
	do {                                                                                       \
		struct error err_ = {0};                                                           \
		struct error *err = &err_;                                                         \
		int r_ = (expr);                                                                   \
		if (r_ != 0)                                                                       \
			fail_msg("%s = %d: %s", #expr, r_, err_.msg);                              \
	} while (0)

/* ---- the hooks --------------------------------------------------------- */

static int64_t fake_now(void *data)
{
	return ((struct fx *)data)->now;
}

static void record_log(void *data, const char *msg)
{
	struct fx *f = data;
	assert_true(f->nlog < LOGS_MAX);
	snprintf(f->logs[f->nlog++], sizeof(f->logs[0]), "%s", msg);
}

static int fake_spawn(void *data, const char *supervisor_path, const char *attempt_dir, int lock_fd)
{
	struct fx *f = data;
	f->ntried++;
	if (f->spawn_result < 0)
		return f->spawn_result;
	assert_true(f->nspawn < SPAWNS_MAX);
	struct spawned *sp = &f->spawned[f->nspawn++];
	snprintf(sp->dir, sizeof(sp->dir), "%s", attempt_dir);
	snprintf(sp->path, sizeof(sp->path), "%s", supervisor_path);
	sp->lock = fcntl(lock_fd, F_DUPFD_CLOEXEC, 3);
	assert_true(sp->lock >= 0);
	/* a second open file of the lock cannot take it: it is held */
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" LAYOUT_LOCK, attempt_dir);
	int other = open(path, O_RDWR | O_CLOEXEC);
	assert_true(other >= 0);
	sp->was_locked = flock(other, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(other);
	snprintf(path, sizeof(path), "%s/" LAYOUT_ATTEMPT_JSON, attempt_dir);
	sp->attempt = json_load_file(path, 0, NULL);
	return 0;
}

/* ---- fixture ----------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static void sched_open(struct fx *f, unsigned max_running)
{
	struct sched_config cfg = {.state_dir = f->state,
				   .supervisor_path = SUPERVISOR,
				   .max_running = max_running,
				   .log = record_log,
				   .now_ms = fake_now,
				   .spawn = fake_spawn,
				   .data = f};
	OK(sched_new(&cfg, f->st, &f->s, err));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test-sched.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	if (mkdir(f->state, 0700) < 0)
		return -1;
	char db[256];
	snprintf(db, sizeof(db), "%s/" LAYOUT_DB, f->state);
	struct error err = {0};
	if (store_open_sqlite(db, &f->st, &err) < 0) {
		fprintf(stderr, "opening the store: %s\n", err.msg);
		return -1;
	}
	f->now = 1000;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	f->s = sched_free(f->s);
	f->st = store_close(f->st);
	for (size_t i = 0; i < f->nspawn; i++) {
		if (f->spawned[i].lock >= 0)
			close(f->spawned[i].lock);
		json_decref(f->spawned[i].attempt);
	}
	int r = nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

/* The daemon stops (no cleanup beyond freeing) and a new one recovers. */
static void restart(struct fx *f, unsigned max_running)
{
	f->s = sched_free(f->s);
	sched_open(f, max_running);
	OK(sched_recover(f->s, err));
}

static void step(struct fx *f)
{
	OK(sched_step(f->s, err));
}

/* ---- helpers ----------------------------------------------------------- */

static void add(struct fx *f, int64_t created, uint32_t max_attempts, uint32_t retry_on,
		char id[TASK_ID_SIZE])
{
	struct task t = {.tenant = TENANT_DEFAULT,
			 .max_attempts = max_attempts,
			 .retry_on = retry_on,
			 .created_at = created,
			 .spec_json = SPEC};
	assert_int_equal(task_id_new(t.id), 0);
	OK(store_task_insert(f->st, &t, err));
	memcpy(id, t.id, TASK_ID_SIZE);
}

static struct task get(struct fx *f, const char *id)
{
	struct task t = {0};
	OK(store_task_get(f->st, id, &t, err));
	return t;
}

static enum task_status status_of(struct fx *f, const char *id)
{
	struct task t = get(f, id);
	task_release(&t);
	return t.status;
}

static void assert_task(struct fx *f, const char *id, enum task_status status, uint32_t attempt)
{
	struct task t = get(f, id);
	if (t.status != status || t.attempt != attempt)
		fail_msg("task %s: %s attempt %u, want %s attempt %u", id,
			 task_status_name(t.status), t.attempt, task_status_name(status), attempt);
	task_release(&t);
}

static void attempt_path(struct fx *f, const char *id, uint32_t attempt, const char *name,
			 char buf[PATH_MAX])
{
	assert_int_equal(layout_attempt_file(buf, PATH_MAX, f->state, id, attempt, name), 0);
}

/* Write (create or truncate) an attempt's file. */
static void put(struct fx *f, const char *id, uint32_t attempt, const char *name, const char *text)
{
	char path[PATH_MAX];
	attempt_path(f, id, attempt, name, path);
	assert_int_equal(create_file_at(AT_FDCWD, path, text, 0600), 0);
}

static void put_len(struct fx *f, const char *id, uint32_t attempt, uint64_t len)
{
	char text[32];
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)len);
	put(f, id, attempt, LAYOUT_EVENTS_LEN, text);
}

/* Append one journal record to an attempt's events; returns its length. */
static size_t journal(struct fx *f, const char *id, uint32_t attempt, unsigned line, int64_t time,
		      const char *data)
{
	char path[PATH_MAX], rec[1024];
	attempt_path(f, id, attempt, LAYOUT_EVENTS, path);
	int n = snprintf(rec, sizeof(rec), "{\"line\":%u,\"time\":%lld,\"data\":%s}\n", line,
			 (long long)time, data);
	assert_true(n > 0 && (size_t)n < sizeof(rec));
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, rec, (size_t)n), 0);
	close(fd);
	return (size_t)n;
}

/* The latest spawn record of attempt `attempt` of id, which must exist. */
static struct spawned *spawned_of(struct fx *f, const char *id, uint32_t attempt)
{
	char dir[PATH_MAX];
	assert_int_equal(layout_attempt_dir(dir, sizeof(dir), f->state, id, attempt), 0);
	for (size_t i = f->nspawn; i-- > 0;)
		if (strcmp(f->spawned[i].dir, dir) == 0)
			return &f->spawned[i];
	fail_msg("attempt %u of %s was never spawned", attempt, id);
	return NULL;
}

/* The supervisor of that attempt exits: its lock is free. */
static void supervisor_exits(struct fx *f, const char *id, uint32_t attempt)
{
	struct spawned *sp = spawned_of(f, id, attempt);
	assert_true(sp->lock >= 0);
	close(sp->lock);
	sp->lock = -1;
}

#define EVENTS_MAX 2600
struct events {
	size_t n, progress;
	struct {
		int64_t time;
		uint32_t attempt;
		enum task_event_type type;
		char data[200];
	} v[EVENTS_MAX];
};

static int collect_event(const struct task_event *ev, void *data)
{
	struct events *e = data;
	assert_true(e->n < EVENTS_MAX);
	assert_int_equal(ev->seq, (int64_t)e->n + 1); /* gapless: nothing lost, nothing twice */
	e->v[e->n].time = ev->time;
	e->v[e->n].attempt = ev->attempt;
	e->v[e->n].type = ev->type;
	snprintf(e->v[e->n].data, sizeof(e->v[e->n].data), "%s", ev->data_json);
	e->progress += ev->type == TASK_EVENT_PROGRESS;
	e->n++;
	return 0;
}

/* Every event of id. Free it. */
static struct events *events(struct fx *f, const char *id)
{
	struct events *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	size_t before;
	do {
		before = e->n;
		OK(store_events_list(f->st, id, (int64_t)e->n, STORE_LIST_MAX, collect_event, e,
				     err));
	} while (e->n - before == STORE_LIST_MAX);
	return e;
}

static size_t progress_count(struct fx *f, const char *id)
{
	struct events *e = events(f, id);
	size_t n = e->progress;
	free(e);
	return n;
}

/* ---- claims ------------------------------------------------------------ */

static void test_claims_fifo_up_to_max_running(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE], b[TASK_ID_SIZE], c[TASK_ID_SIZE];
	add(f, 3, 1, B(TASK_LOST), a); /* created first, but ids are random: */
	add(f, 4, 1, B(TASK_LOST), b); /* the order is the queue's */
	add(f, 5, 1, B(TASK_LOST), c);
	sched_open(f, 2);
	step(f);
	assert_int_equal(f->nspawn, 2);
	assert_int_equal(sched_running(f->s), 2);
	char dir[PATH_MAX];
	assert_int_equal(layout_attempt_dir(dir, sizeof(dir), f->state, a, 1), 0);
	assert_string_equal(f->spawned[0].dir, dir);
	assert_int_equal(layout_attempt_dir(dir, sizeof(dir), f->state, b, 1), 0);
	assert_string_equal(f->spawned[1].dir, dir);
	for (int i = 0; i < 2; i++) {
		struct spawned *sp = &f->spawned[i];
		assert_string_equal(sp->path, SUPERVISOR);
		assert_true(sp->was_locked);
		/* attempt.json is written before the supervisor starts */
		assert_non_null(sp->attempt);
		assert_string_equal(json_string_value(json_object_get(sp->attempt, "task_id")),
				    i == 0 ? a : b);
		assert_int_equal(json_integer_value(json_object_get(sp->attempt, "attempt")), 1);
		json_t *spec = json_loads(SPEC, 0, NULL);
		assert_true(json_equal(json_object_get(sp->attempt, "spec"), spec));
		json_decref(spec);
	}
	assert_task(f, a, TASK_RUNNING, 1);
	assert_task(f, b, TASK_RUNNING, 1);
	assert_task(f, c, TASK_QUEUED, 0);
	struct task t = get(f, a);
	assert_int_equal(t.started_at, 1000); /* the injected clock */
	task_release(&t);

	/* both still run: nothing more is claimed */
	step(f);
	assert_int_equal(f->nspawn, 2);
	assert_task(f, c, TASK_QUEUED, 0);

	/* b ends first: c takes its place in the same step */
	put(f, b, 1, LAYOUT_RESULT, "{\"end\":\"succeeded\",\"exit_code\":0}");
	supervisor_exits(f, b, 1);
	f->now = 2000;
	step(f);
	assert_task(f, b, TASK_SUCCEEDED, 1);
	assert_task(f, a, TASK_RUNNING, 1);
	assert_task(f, c, TASK_RUNNING, 1);
	assert_int_equal(f->nspawn, 3);
	assert_int_equal(layout_attempt_dir(dir, sizeof(dir), f->state, c, 1), 0);
	assert_string_equal(f->spawned[2].dir, dir);
	assert_int_equal(sched_running(f->s), 2);
	t = get(f, c);
	assert_int_equal(t.started_at, 2000);
	task_release(&t);
	assert_int_equal(f->nlog, 0);
}

static void test_a_spawn_that_fails_loses_the_attempt(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 2, B(TASK_LOST), a);
	sched_open(f, 4);
	f->spawn_result = -EACCES;
	step(f);
	/* lost, retried at once, lost again: two attempts, nothing left running */
	assert_int_equal(f->ntried, 2);
	assert_int_equal(sched_running(f->s), 0);
	assert_task(f, a, TASK_LOST, 2);
	struct task t = get(f, a);
	assert_non_null(t.error);
	assert_non_null(strstr(t.error, "cannot start " SUPERVISOR));
	assert_non_null(strstr(t.error, strerror(EACCES)));
	assert_int_equal(t.finished_at, 1000);
	task_release(&t);
	/* the lock was not kept by anyone */
	char path[PATH_MAX];
	attempt_path(f, a, 2, LAYOUT_LOCK, path);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);
}

/* ---- the import of journals -------------------------------------------- */

static void test_import_takes_durable_lines_once(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), a);
	sched_open(f, 4);
	step(f);
	assert_int_equal(f->nspawn, 1);

	size_t l1 = journal(f, a, 1, 1, 11, "{\"step\":1}");
	size_t l2 = journal(f, a, 1, 2, 12, "{\"step\":2,\"x\":\"y\"}");
	size_t l3 = journal(f, a, 1, 3, 13, "{\"step\":3}");
	/* durable: two lines and part of the third */
	put_len(f, a, 1, l1 + l2 + 5);
	step(f);
	struct events *e = events(f, a);
	assert_int_equal(e->n, 3); /* running, then two progress events */
	assert_int_equal(e->v[1].type, TASK_EVENT_PROGRESS);
	assert_string_equal(e->v[1].data, "{\"step\":1}");
	assert_int_equal(e->v[1].time, 11); /* the time the line was accepted */
	assert_int_equal(e->v[1].attempt, 1);
	assert_string_equal(e->v[2].data, "{\"step\":2,\"x\":\"y\"}");
	assert_int_equal(e->v[2].time, 12);
	free(e);
	struct task t = get(f, a);
	assert_string_equal(t.progress_json, "{\"step\":2,\"x\":\"y\"}");
	task_release(&t);

	/* nothing new is durable: nothing new is stored */
	step(f);
	assert_int_equal(progress_count(f, a), 2);

	put_len(f, a, 1, l1 + l2 + l3);
	step(f);
	e = events(f, a);
	assert_int_equal(e->progress, 3);
	assert_string_equal(e->v[3].data, "{\"step\":3}");
	free(e);

	/* a restarted scheduler reads the journal from its start: lines
	 * already in the store are skipped, the new one is taken */
	restart(f, 4);
	assert_int_equal(f->nspawn, 1); /* its lock is held: running, not started again */
	assert_int_equal(sched_running(f->s), 1);
	step(f);
	assert_int_equal(progress_count(f, a), 3);
	size_t l4 = journal(f, a, 1, 4, 14, "{\"step\":4}");
	put_len(f, a, 1, l1 + l2 + l3 + l4);
	step(f);
	e = events(f, a);
	assert_int_equal(e->progress, 4);
	assert_string_equal(e->v[4].data, "{\"step\":4}");
	assert_int_equal(e->v[4].time, 14);
	free(e);
	assert_task(f, a, TASK_RUNNING, 1);
	assert_int_equal(f->nlog, 0);
}

static void test_an_end_waits_for_every_durable_line(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), a);
	sched_open(f, 4);
	step(f);
	/* more lines than one step imports */
	char path[PATH_MAX];
	attempt_path(f, a, 1, LAYOUT_EVENTS, path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	uint64_t len = 0;
	for (unsigned i = 1; i <= 2500; i++) {
		char rec[128];
		int n = snprintf(rec, sizeof(rec),
				 "{\"line\":%u,\"time\":%u,\"data\":{\"i\":%u}}\n", i, i, i);
		assert_int_equal(write_all(fd, rec, (size_t)n), 0);
		len += (uint64_t)n;
	}
	close(fd);
	put_len(f, a, 1, len);
	put(f, a, 1, LAYOUT_RESULT, "{\"end\":\"succeeded\",\"exit_code\":0}");
	supervisor_exits(f, a, 1);
	size_t steps = 0;
	do {
		step(f);
		steps++;
		assert_true(steps < 10);
	} while (status_of(f, a) == TASK_RUNNING);
	assert_true(steps >= 2); /* bounded work: not everything in one step */
	assert_task(f, a, TASK_SUCCEEDED, 1);
	struct events *e = events(f, a);
	assert_int_equal(e->n, 2502);
	assert_int_equal(e->progress, 2500);
	assert_string_equal(e->v[2500].data, "{\"i\":2500}");
	assert_int_equal(e->v[2501].type, TASK_EVENT_STATUS); /* the end comes last */
	free(e);
}

/* ---- ends -------------------------------------------------------------- */

static void test_an_end_from_result_json_is_final(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 3, B(TASK_LOST), a); /* failed is not retried */
	sched_open(f, 4);
	step(f);
	size_t l1 = journal(f, a, 1, 1, 11, "{\"done\":true}");
	put_len(f, a, 1, l1);
	put(f, a, 1, LAYOUT_RESULT, "{\"end\":\"failed\",\"exit_code\":3,\"error\":\"boom\"}");
	/* the result is not read while the supervisor lives */
	step(f);
	assert_task(f, a, TASK_RUNNING, 1);
	supervisor_exits(f, a, 1);
	f->now = 5000;
	step(f);
	assert_task(f, a, TASK_FAILED, 1);
	assert_int_equal(sched_running(f->s), 0);
	assert_int_equal(f->nspawn, 1);
	struct task t = get(f, a);
	assert_int_equal(t.exit_code, 3);
	assert_string_equal(t.error, "boom");
	assert_int_equal(t.finished_at, 5000);
	assert_string_equal(t.progress_json, "{\"done\":true}");
	task_release(&t);
	struct events *e = events(f, a);
	assert_int_equal(e->n, 3);
	assert_int_equal(e->v[1].type, TASK_EVENT_PROGRESS);
	assert_int_equal(e->v[2].type, TASK_EVENT_STATUS);
	assert_int_equal(e->v[2].time, 5000);
	assert_non_null(strstr(e->v[2].data, "\"status\":\"failed\""));
	free(e);
	assert_int_equal(f->nlog, 0);
}

static void test_an_end_in_retry_on_is_queued_and_claimed_again(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 2, B(TASK_FAILED) | B(TASK_LOST), a);
	sched_open(f, 4);
	step(f);
	put(f, a, 1, LAYOUT_RESULT, "{\"end\":\"failed\",\"exit_code\":1}");
	supervisor_exits(f, a, 1);
	step(f);
	/* queued again, and claimed again by the same step */
	assert_task(f, a, TASK_RUNNING, 2);
	assert_int_equal(f->nspawn, 2);
	struct spawned *sp = spawned_of(f, a, 2);
	assert_true(sp->was_locked);
	assert_int_equal(json_integer_value(json_object_get(sp->attempt, "attempt")), 2);
	struct events *e = events(f, a);
	assert_int_equal(e->n, 3);
	assert_non_null(strstr(e->v[1].data, "\"status\":\"queued\""));
	assert_int_equal(e->v[1].attempt, 1);
	assert_non_null(strstr(e->v[2].data, "\"status\":\"running\""));
	assert_int_equal(e->v[2].attempt, 2);
	free(e);

	/* the last attempt allowed ends failed: final */
	put(f, a, 2, LAYOUT_RESULT, "{\"end\":\"failed\",\"exit_code\":1}");
	supervisor_exits(f, a, 2);
	step(f);
	assert_task(f, a, TASK_FAILED, 2);
	assert_int_equal(f->nspawn, 2);
	assert_int_equal(sched_running(f->s), 0);
}

static void test_an_end_without_a_good_result_is_lost(void **state)
{
	struct fx *f = *state;
	char none[TASK_ID_SIZE], garbage[TASK_ID_SIZE], notfinal[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), none);
	add(f, 2, 1, B(TASK_LOST), garbage);
	add(f, 3, 1, B(TASK_LOST), notfinal);
	sched_open(f, 4);
	step(f);
	put(f, garbage, 1, LAYOUT_RESULT, "{\"end\":");
	put(f, notfinal, 1, LAYOUT_RESULT, "{\"end\":\"running\",\"exit_code\":0}");
	supervisor_exits(f, none, 1);
	supervisor_exits(f, garbage, 1);
	supervisor_exits(f, notfinal, 1);
	step(f);
	static const struct {
		int which;
		const char *error;
	} want[] = {
	    {0, "the supervisor ended without a result"},
	    {1, "the attempt's result.json is unreadable"},
	    {2, "the attempt's result.json is unreadable"},
	};
	const char *ids[] = {none, garbage, notfinal};
	for (size_t i = 0; i < 3; i++) {
		struct task t = get(f, ids[want[i].which]);
		assert_int_equal(t.status, TASK_LOST);
		assert_int_equal(t.exit_code, -1);
		assert_string_equal(t.error, want[i].error);
		task_release(&t);
	}
	assert_int_equal(sched_running(f->s), 0);
}

static void test_refused_lines_are_skipped_and_told(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), a);
	sched_open(f, 4);
	step(f);
	/* line 2 nests deeper than the store takes */
	char deep[2 * (STORE_JSON_DEPTH_MAX + 8) + 16];
	size_t n = 0;
	deep[n++] = '{';
	deep[n++] = '"';
	deep[n++] = 'd';
	deep[n++] = '"';
	deep[n++] = ':';
	for (int i = 0; i < STORE_JSON_DEPTH_MAX + 4; i++)
		deep[n++] = '[';
	for (int i = 0; i < STORE_JSON_DEPTH_MAX + 4; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	size_t len = journal(f, a, 1, 1, 11, "{\"s\":1}");
	len += journal(f, a, 1, 2, 12, deep);
	len += journal(f, a, 1, 3, 13, "{\"s\":3}");
	put_len(f, a, 1, len);
	put(f, a, 1, LAYOUT_RESULT, "{\"end\":\"succeeded\",\"exit_code\":0}");
	supervisor_exits(f, a, 1);
	step(f);
	assert_task(f, a, TASK_SUCCEEDED, 1);
	struct events *e = events(f, a);
	assert_int_equal(e->progress, 2);
	assert_string_equal(e->v[1].data, "{\"s\":1}");
	assert_string_equal(e->v[2].data, "{\"s\":3}");
	free(e);
	assert_int_equal(f->nlog, 1);
	char want[128];
	snprintf(want, sizeof(want), "%s: 1 progress lines refused by the store", a);
	assert_string_equal(f->logs[0], want);
}

/* ---- cancels ----------------------------------------------------------- */

/*
 * A stand-in supervisor process. Like a real one at its start, it has
 * SIGTERM blocked, so a signal sent to it stays pending where the test can
 * see it (/proc/<pid>/status, ShdPnd); SIGALRM ends it after 30 s at most.
 */
static pid_t stand_in(void)
{
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		sigset_t term;
		sigemptyset(&term);
		sigaddset(&term, SIGTERM);
		sigprocmask(SIG_BLOCK, &term, NULL);
		alarm(30);
		for (;;)
			pause();
	}
	return child;
}

/* Has pid been sent a SIGTERM (pending, since it blocks it)? */
static bool sigterm_pending(pid_t pid)
{
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	assert_true(read_file_at(AT_FDCWD, path, text, sizeof(text)) > 0);
	const char *line = strstr(text, "\nShdPnd:");
	assert_non_null(line);
	unsigned long long set = 0;
	assert_int_equal(sscanf(line, "\nShdPnd: %llx", &set), 1);
	return set & (1ULL << (SIGTERM - 1));
}

static void stop_stand_in(pid_t child)
{
	kill(child, SIGKILL);
	int status = 0;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFSIGNALED(status));
}

/* The stand-in's pid file: pid and start time, the start time off by skew. */
static void put_pid_file(struct fx *f, const char *id, pid_t child, unsigned skew)
{
	unsigned long long start = 0;
	assert_int_equal(proc_start_time(child, &start), 0);
	char text[64];
	snprintf(text, sizeof(text), "%d %llu\n", (int)child, start + skew);
	put(f, id, 1, LAYOUT_SUPERVISOR_PID, text);
}

static void test_a_cancel_signals_the_supervisor(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), a);
	sched_open(f, 4);
	step(f);
	pid_t child = stand_in();
	put_pid_file(f, a, child, 0);
	/* no cancel asked: no signal */
	step(f);
	bool early = sigterm_pending(child);
	enum task_status now = TASK_STATUS_COUNT;
	OK(store_task_cancel(f->st, a, 1500, &now, err));
	assert_int_equal(now, TASK_RUNNING);
	step(f);
	bool sent = sigterm_pending(child);
	stop_stand_in(child);
	assert_false(early);
	assert_true(sent);
	/* the supervisor records the cancel; the end follows it */
	put(f, a, 1, LAYOUT_RESULT, "{\"end\":\"cancelled\",\"exit_code\":null}");
	supervisor_exits(f, a, 1);
	step(f);
	assert_task(f, a, TASK_CANCELLED, 1);
}

static void test_a_pid_file_naming_another_process_is_not_signalled(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), a);
	sched_open(f, 4);
	step(f);
	pid_t child = stand_in();
	put_pid_file(f, a, child, 1); /* the pid, reused by another process */
	enum task_status now = TASK_STATUS_COUNT;
	OK(store_task_cancel(f->st, a, 1500, &now, err));
	step(f);
	bool sent = sigterm_pending(child);
	stop_stand_in(child);
	assert_false(sent);
	assert_task(f, a, TASK_RUNNING, 1);
}

/* ---- recovery ---------------------------------------------------------- */

static void test_recovery_after_a_restart(void **state)
{
	struct fx *f = *state;
	char held[TASK_ID_SIZE], ended[TASK_ID_SIZE], lost[TASK_ID_SIZE], unspawned[TASK_ID_SIZE],
	    unclaimed_dir[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), held);
	add(f, 2, 1, B(TASK_LOST), ended);
	add(f, 3, 1, B(TASK_LOST), lost);
	add(f, 4, 1, B(TASK_LOST), unspawned);
	add(f, 5, 1, B(TASK_LOST), unclaimed_dir);
	sched_open(f, 4);
	step(f); /* the first four get supervisors */
	assert_int_equal(f->nspawn, 4);
	/* the daemon dies right after claiming the fifth: no directory at all */
	struct task t = {0};
	OK(store_task_claim(f->st, 1100, &t, err));
	assert_string_equal(t.id, unclaimed_dir);
	task_release(&t);
	f->s = sched_free(f->s);

	/* meanwhile: held runs on; ended wrote its result and exited (its
	 * pid file is not needed); lost died without a result; unspawned's
	 * supervisor never ran (lock, no pid file, no result) */
	put(f, held, 1, LAYOUT_SUPERVISOR_PID, "1 1\n");
	put(f, ended, 1, LAYOUT_RESULT, "{\"end\":\"succeeded\",\"exit_code\":0}");
	supervisor_exits(f, ended, 1);
	put(f, lost, 1, LAYOUT_SUPERVISOR_PID, "1 1\n");
	supervisor_exits(f, lost, 1);
	supervisor_exits(f, unspawned, 1);

	f->now = 9000;
	restart(f, 8);
	/* the two that never ran are started now, as the same attempt */
	assert_int_equal(f->nspawn, 6);
	struct spawned *sp = spawned_of(f, unspawned, 1);
	assert_true(sp == &f->spawned[4] || sp == &f->spawned[5]);
	assert_true(sp->was_locked);
	sp = spawned_of(f, unclaimed_dir, 1);
	assert_true(sp == &f->spawned[4] || sp == &f->spawned[5]);
	assert_true(sp->was_locked);
	assert_int_equal(json_integer_value(json_object_get(sp->attempt, "attempt")), 1);
	assert_int_equal(f->nlog, 2);
	for (size_t i = 0; i < 2; i++) {
		char want[128];
		const char *id = strstr(f->logs[i], unspawned) ? unspawned : unclaimed_dir;
		snprintf(want, sizeof(want),
			 "%s: attempt 1 was claimed but never started; starting it", id);
		assert_string_equal(f->logs[i], want);
	}
	assert_string_not_equal(f->logs[0], f->logs[1]);
	assert_int_equal(sched_running(f->s), 5);

	step(f);
	assert_task(f, held, TASK_RUNNING, 1);
	assert_task(f, ended, TASK_SUCCEEDED, 1);
	assert_task(f, lost, TASK_LOST, 1);
	assert_task(f, unspawned, TASK_RUNNING, 1);
	assert_task(f, unclaimed_dir, TASK_RUNNING, 1);
	assert_int_equal(sched_running(f->s), 3);
	assert_int_equal(f->nspawn, 6);
	t = get(f, lost);
	assert_string_equal(t.error, "the supervisor ended without a result");
	assert_int_equal(t.finished_at, 9000);
	task_release(&t);
	t = get(f, ended);
	assert_int_equal(t.finished_at, 9000);
	task_release(&t);
	/* a start that was not lost: one running event, no end in between */
	struct events *e = events(f, unclaimed_dir);
	assert_int_equal(e->n, 1);
	assert_non_null(strstr(e->v[0].data, "\"status\":\"running\""));
	free(e);

	/* and they run to their end as any other */
	put(f, unclaimed_dir, 1, LAYOUT_RESULT, "{\"end\":\"succeeded\",\"exit_code\":0}");
	supervisor_exits(f, unclaimed_dir, 1);
	step(f);
	assert_task(f, unclaimed_dir, TASK_SUCCEEDED, 1);
	assert_int_equal(sched_running(f->s), 2);
	assert_int_equal(f->nlog, 2);
}

static void test_a_silent_scheduler_without_hooks_still_decides(void **state)
{
	struct fx *f = *state;
	char a[TASK_ID_SIZE];
	add(f, 1, 1, B(TASK_LOST), a);
	/* claimed by a daemon that stopped before starting it; the real spawn
	 * of a missing binary fails: the attempt is recorded lost, quietly */
	struct task t = {0};
	OK(store_task_claim(f->st, 1100, &t, err));
	task_release(&t);
	struct sched_config cfg = {
	    .state_dir = f->state, .supervisor_path = SUPERVISOR, .max_running = 1};
	OK(sched_new(&cfg, f->st, &f->s, err));
	OK(sched_recover(f->s, err));
	t = get(f, a);
	assert_int_equal(t.status, TASK_LOST);
	assert_non_null(strstr(t.error, "cannot start " SUPERVISOR));
	assert_true(t.finished_at >= t.started_at); /* the wall clock */
	task_release(&t);
	assert_int_equal(sched_running(f->s), 0);
}

static void test_config_is_checked(void **state)
{
	struct fx *f = *state;
	struct sched_config cfg = {.state_dir = f->state, .supervisor_path = SUPERVISOR};
	struct sched *s = NULL;
	struct error err = {0};
	assert_int_equal(sched_new(&cfg, f->st, &s, &err), -EINVAL);
	assert_null(s);
	cfg.max_running = SCHED_MAX_RUNNING_MAX + 1;
	assert_int_equal(sched_new(&cfg, f->st, &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "max running"));
	assert_null(sched_free(NULL));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_claims_fifo_up_to_max_running),
	    T(test_a_spawn_that_fails_loses_the_attempt),
	    T(test_import_takes_durable_lines_once),
	    T(test_an_end_waits_for_every_durable_line),
	    T(test_an_end_from_result_json_is_final),
	    T(test_an_end_in_retry_on_is_queued_and_claimed_again),
	    T(test_an_end_without_a_good_result_is_lost),
	    T(test_refused_lines_are_skipped_and_told),
	    T(test_a_cancel_signals_the_supervisor),
	    T(test_a_pid_file_naming_another_process_is_not_signalled),
	    T(test_recovery_after_a_restart),
	    T(test_a_silent_scheduler_without_hooks_still_decides),
	    T(test_config_is_checked),
	};
#undef T
	return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
