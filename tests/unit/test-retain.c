/*
 * test-retain.c - removing what ended (sched/retain.h) against a real
 * store and state directory, with the clock passed in: a task's rows and
 * every file of its directory (deep trees, a symlink that is not
 * followed), --retain's passes (only what ended before now - retain, the
 * batch bound, sandbox records), and the start's sweep of directories no
 * row names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "core/sandbox.h"
#include "core/task.h"
#include "sched/retain.h"
#include "store/store.h"

#define DAY ((int64_t)86400 * 1000)

struct fx {
	char dir[128];	   /* the state directory */
	char outside[160]; /* a file a symlink in a task's directory points at */
	struct store *st;
};

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test-retain.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	char path[256];
	snprintf(path, sizeof(path), "%s/tasks", f->dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/sandboxes", f->dir);
	mkdir(path, 0700);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
	FILE *fp = fopen(f->outside, "w");
	if (!fp)
		return -1;
	fputs("keep me", fp);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/agentbox.db", f->dir);
	struct error err = {0};
	if (store_open_sqlite(path, &f->st, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->st);
	int r = nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

static void mkdirf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdirf(const char *fmt, ...)
{
	char path[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	assert_int_equal(mkdir(path, 0700), 0);
}

static void touch(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("x", fp);
	fclose(fp);
}

/* A task's directory as the supervisor, the API and artifacts leave it. */
static void fill_task_dir(struct fx *f, const char *id)
{
	char d[4096];
	mkdirf("%s/tasks/%s", f->dir, id);
	snprintf(d, sizeof(d), "%s/tasks/%s", f->dir, id);
	touch(d, "state.img");
	touch(d, "secrets.json");
	mkdirf("%s/attempt-1", d);
	char a[4200];
	snprintf(a, sizeof(a), "%s/attempt-1", d);
	touch(a, "output");
	touch(a, "result.json");
	char link[4300];
	snprintf(link, sizeof(link), "%s/escape", a);
	assert_int_equal(symlink(f->outside, link), 0);
	/* a deep tree: deeper than REMOVE_TREE_DEPTH_MAX */
	size_t len = strlen(d);
	snprintf(d + len, sizeof(d) - len, "/artifacts");
	assert_int_equal(mkdir(d, 0700), 0);
	for (int i = 0; i < REMOVE_TREE_DEPTH_MAX + 8; i++) {
		len = strlen(d);
		snprintf(d + len, sizeof(d) - len, "/d");
		assert_int_equal(mkdir(d, 0700), 0);
	}
	touch(d, "deep");
}

static bool dir_exists(struct fx *f, const char *kind, const char *id)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/%s", f->dir, kind, id);
	return lstat(path, &st) == 0;
}

static bool row_exists(struct fx *f, const char *id)
{
	struct task t = {0};
	struct error err = {0};
	int r = store_task_get(f->st, id, &t, &err);
	assert_true(r == 0 || r == -ENOENT);
	task_release(&t);
	return r == 0;
}

static void add_task(struct fx *f, char id[TASK_ID_SIZE])
{
	struct task t = {
	    .tenant = TENANT_DEFAULT, .max_attempts = 1, .created_at = 1, .spec_json = "{}"};
	struct error err = {0};
	assert_int_equal(task_id_new(t.id), 0);
	assert_int_equal(store_task_insert(f->st, &t, &err), 0);
	memcpy(id, t.id, TASK_ID_SIZE);
}

/* A task claimed and ended at `finished`, with a full directory. */
static void add_ended(struct fx *f, int64_t finished, char id[TASK_ID_SIZE])
{
	struct task t = {0};
	struct error err = {0};
	add_task(f, id);
	assert_int_equal(store_task_claim(f->st, 2, &t, &err), 0);
	assert_string_equal(t.id, id);
	assert_int_equal(store_task_end_attempt(f->st, id, t.attempt, TASK_SUCCEEDED, 0, NULL,
						finished, NULL, &err),
			 0);
	task_release(&t);
	fill_task_dir(f, id);
}

static void test_task_remove(void **state)
{
	struct fx *f = *state;
	char done[TASK_ID_SIZE], live[TASK_ID_SIZE];
	add_ended(f, 10, done);
	add_task(f, live);
	fill_task_dir(f, live);
	struct error err = {0};
	assert_int_equal(retain_task_remove(f->st, f->dir, live, &err), -EBUSY);
	assert_true(row_exists(f, live));
	assert_true(dir_exists(f, "tasks", live));

	assert_int_equal(retain_task_remove(f->st, f->dir, done, &err), 0);
	assert_false(row_exists(f, done));
	assert_false(dir_exists(f, "tasks", done));
	assert_int_equal(access(f->outside, F_OK), 0); /* the symlink's target stays */
	assert_int_equal(retain_task_remove(f->st, f->dir, done, &err), -ENOENT);
	assert_int_equal(retain_task_remove(f->st, f->dir, "../x", &err), -EINVAL);
}

static void test_pass(void **state)
{
	struct fx *f = *state;
	int64_t now = 10 * DAY;
	char old1[TASK_ID_SIZE], old2[TASK_ID_SIZE], recent[TASK_ID_SIZE], live[TASK_ID_SIZE];
	add_ended(f, now - 8 * DAY, old1);
	add_ended(f, now - 7 * DAY - 1, old2);
	add_ended(f, now - 7 * DAY + 1, recent);
	add_task(f, live);

	struct sandbox_record sb = {.tenant = TENANT_DEFAULT,
				    .status = SANDBOX_RUNNING,
				    .created_at = 1,
				    .spec_json = "{}"};
	char sold[SANDBOX_ID_SIZE], snew[SANDBOX_ID_SIZE], srun[SANDBOX_ID_SIZE];
	struct error err = {0};
	char *ids[] = {sold, snew, srun};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(sandbox_id_new(sb.id), 0);
		assert_int_equal(store_sandbox_insert(f->st, &sb, &err), 0);
		memcpy(ids[i], sb.id, SANDBOX_ID_SIZE);
		mkdirf("%s/sandboxes/%s", f->dir, sb.id);
	}
	assert_int_equal(store_sandbox_end(f->st, sold, now - 9 * DAY, "deleted", NULL, &err), 0);
	assert_int_equal(store_sandbox_end(f->st, snew, now - DAY, "deleted", NULL, &err), 0);

	/* a batch of one: the earliest ended first */
	struct retain_counts n;
	assert_int_equal(retain_pass(f->st, f->dir, now, 7 * DAY, 1, &n, &err), 0);
	assert_int_equal(n.tasks, 1);
	assert_int_equal(n.sandboxes, 1);
	assert_false(row_exists(f, old1));
	assert_false(dir_exists(f, "tasks", old1));
	assert_true(row_exists(f, old2));
	assert_false(dir_exists(f, "sandboxes", sold));

	assert_int_equal(retain_pass(f->st, f->dir, now, 7 * DAY, RETAIN_BATCH, &n, &err), 0);
	assert_int_equal(n.tasks, 1);
	assert_int_equal(n.sandboxes, 0);
	assert_false(row_exists(f, old2));
	assert_false(dir_exists(f, "tasks", old2));
	assert_true(row_exists(f, recent));
	assert_true(dir_exists(f, "tasks", recent));
	assert_true(row_exists(f, live));
	struct sandbox_record got = {0};
	assert_int_equal(store_sandbox_get(f->st, snew, &got, &err), 0);
	sandbox_record_release(&got);
	assert_int_equal(store_sandbox_get(f->st, srun, &got, &err), 0);
	sandbox_record_release(&got);
	assert_int_equal(store_sandbox_get(f->st, sold, &got, &err), -ENOENT);

	/* time passes (the clock is ours): the rest of what ended goes */
	assert_int_equal(retain_pass(f->st, f->dir, now + 7 * DAY, 7 * DAY, RETAIN_BATCH, &n, &err),
			 0);
	assert_int_equal(n.tasks, 1);
	assert_int_equal(n.sandboxes, 1);
	assert_false(dir_exists(f, "tasks", recent));
	assert_true(row_exists(f, live));
	assert_true(dir_exists(f, "sandboxes", srun));

	assert_int_equal(retain_pass(f->st, f->dir, now, 999, RETAIN_BATCH, &n, &err), -EINVAL);
}

static void test_tick(void **state)
{
	(void)state;
	assert_int_equal(retain_tick_ms(2000), RETAIN_TICK_MIN_MS);
	assert_int_equal(retain_tick_ms(7 * DAY), RETAIN_TICK_MAX_MS);
	assert_int_equal(retain_tick_ms(300000), 30000);
}

static void test_sweep(void **state)
{
	struct fx *f = *state;
	char orphan[TASK_ID_SIZE], live[TASK_ID_SIZE], done[TASK_ID_SIZE];
	assert_int_equal(task_id_new(orphan), 0);
	fill_task_dir(f, orphan);
	add_ended(f, 5, done);
	add_task(f, live);
	fill_task_dir(f, live);
	mkdirf("%s/tasks/not-a-task", f->dir);
	size_t removed = 99;
	struct error err = {0};
	assert_int_equal(retain_sweep(f->st, f->dir, &removed, &err), 0);
	assert_int_equal(removed, 1);
	assert_false(dir_exists(f, "tasks", orphan));
	assert_true(dir_exists(f, "tasks", live));
	assert_true(dir_exists(f, "tasks", done));
	assert_true(dir_exists(f, "tasks", "not-a-task"));
	assert_int_equal(access(f->outside, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_task_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pass, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tick, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
