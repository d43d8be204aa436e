/*
 * store-contract.h - the fixture of the store's contract tests
 * (test-store.c, test-store-events.c, test-store-sandboxes.c,
 * test-store-tenants.c, test-store-audit.c), written
 * against store.h only.
 *
 * Each case gets a fresh store from the backend under test: backends[]
 * lists factories that open the store kept in a fresh scratch directory,
 * and open it again for the reopen and multi-process cases. A new backend
 * adds one line to backends[] and must pass every case unchanged; main()
 * runs the cases once per backend.
 */
#ifndef AGENTBOX_TESTS_STORE_CONTRACT_H
#define AGENTBOX_TESTS_STORE_CONTRACT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define B(s) TASK_STATUS_BIT(s)
#define SPEC "{\"cmd\":[\"echo\",\"hi\"],\"env\":{\"A\":\"\xc3\xa9\"}}"

/* ---- backends ---------------------------------------------------------- */

struct backend {
	const char *name;
	/* Open the store kept in dir: empty at first, then again and again. */
	int (*open)(const char *dir, struct store **ret, struct error *err);
};

static inline int sqlite_open(const char *dir, struct store **ret, struct error *err)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/store.db", dir);
	return store_open_sqlite(path, ret, err);
}

static const struct backend backends[] = {
    {"sqlite", sqlite_open},
};
static const struct backend *backend; /* the one the cases run against */

struct fx {
	char dir[128];
	struct store *st;
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

/* Expect expr to fail with -code and say why. */
#define FAILS(want, expr)                                                                          \
	do {                                                                                       \
		struct error err_ = {0};                                                           \
		struct error *err = &err_;                                                         \
		int r_ = (expr);                                                                   \
		if (r_ != -(want))                                                                 \
			fail_msg("%s = %d (%s), want %d", #expr, r_, err_.msg, -(want));           \
		assert_int_equal(err_.code, want);                                                 \
		assert_true(err_.msg[0] != '\0');                                                  \
	} while (0)

static inline int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static inline int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test-store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	struct error err = {0};
	if (backend->open(f->dir, &f->st, &err) < 0) {
		fprintf(stderr, "opening a %s store: %s\n", backend->name, err.msg);
		return -1;
	}
	return 0;
}

static inline int teardown(void **state)
{
	struct fx *f = *state;
	f->st = store_close(f->st);
	int r = nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

static inline void reopen(struct fx *f)
{
	f->st = store_close(f->st);
	OK(backend->open(f->dir, &f->st, err));
}

/* ---- helpers ----------------------------------------------------------- */

/* Insert a task with spec SPEC; its id goes to id. */
static inline void add(struct fx *f, int64_t created, uint32_t max_attempts, uint32_t retry_on,
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

/* Claim; the claimed task must be id (when given). Returns its attempt. */
static inline uint32_t claim(struct fx *f, int64_t now, const char *id)
{
	struct task t = {0};
	OK(store_task_claim(f->st, now, &t, err));
	if (id)
		assert_string_equal(t.id, id);
	assert_int_equal(t.status, TASK_RUNNING);
	uint32_t attempt = t.attempt;
	task_release(&t);
	return attempt;
}

static inline enum task_status end(struct fx *f, const char *id, uint32_t attempt,
				   enum task_status e, int code, const char *error, int64_t now)
{
	enum task_status s = TASK_STATUS_COUNT;
	OK(store_task_end_attempt(f->st, id, attempt, e, code, error, now, &s, err));
	return s;
}

static inline int64_t progress(struct fx *f, const char *id, uint32_t attempt, const char *json)
{
	int64_t seq = -1;
	OK(store_progress_append(f->st, id, attempt, json, 1, &seq, err));
	return seq;
}

static inline struct task get(struct fx *f, const char *id)
{
	struct task t = {0};
	OK(store_task_get(f->st, id, &t, err));
	return t;
}

static inline enum task_status status_of(struct fx *f, const char *id)
{
	struct task t = get(f, id);
	task_release(&t);
	return t.status;
}

#define EVENTS_MAX 2100
struct events {
	size_t n;
	struct {
		int64_t seq, time;
		uint32_t attempt;
		enum task_event_type type;
		char data[160];
	} v[EVENTS_MAX];
};

static inline int collect_event(const struct task_event *ev, void *data)
{
	struct events *e = data;
	assert_true(e->n < EVENTS_MAX);
	e->v[e->n].seq = ev->seq;
	e->v[e->n].time = ev->time;
	e->v[e->n].attempt = ev->attempt;
	e->v[e->n].type = ev->type;
	snprintf(e->v[e->n].data, sizeof(e->v[e->n].data), "%s", ev->data_json);
	e->n++;
	return 0;
}

/* Every event of task id, in pages of STORE_LIST_MAX. Free it. */
static inline struct events *events(struct fx *f, const char *id)
{
	struct events *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	size_t before;
	do {
		before = e->n;
		int64_t after = e->n ? e->v[e->n - 1].seq : 0;
		OK(store_events_list(f->st, id, after, STORE_LIST_MAX, collect_event, e, err));
	} while (e->n - before == STORE_LIST_MAX);
	for (size_t i = 0; i < e->n; i++)
		assert_int_equal(e->v[i].seq, (int64_t)i + 1); /* gapless from 1 */
	return e;
}

static inline size_t event_count(struct fx *f, const char *id)
{
	struct events *e = events(f, id);
	size_t n = e->n;
	free(e);
	return n;
}

struct ids {
	size_t n;
	char v[64][TASK_ID_SIZE];
	int stop_after; /* > 0: return -EINTR on this call */
};

static inline int collect_id(const struct task *t, void *data)
{
	struct ids *ids = data;
	assert_true(ids->n < 64);
	assert_non_null(t->spec_json);
	memcpy(ids->v[ids->n++], t->id, TASK_ID_SIZE);
	return ids->stop_after && (int)ids->n == ids->stop_after ? -EINTR : 0;
}

static inline void list(struct fx *f, uint32_t statuses, const char *after, size_t limit,
			struct ids *ret)
{
	struct task_filter flt = {.statuses = statuses, .after_id = after, .limit = limit};
	memset(ret, 0, sizeof(*ret));
	OK(store_task_list(f->st, &flt, collect_id, ret, err));
}

/* Run tests once against each backend. */
static inline int run_per_backend(const char *suite, const struct CMUnitTest *tests, size_t n)
{
	int failed = 0;
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		char name[64];
		snprintf(name, sizeof(name), "%s (%s)", suite, backends[i].name);
		backend = &backends[i];
		failed += _cmocka_run_group_tests(name, tests, n, NULL, NULL);
	}
	return failed;
}

#endif
