/*
 * retain.c - removing what ended (retain.h): a task's rows then its
 * directory, --retain's passes, and the start's sweep of directories no
 * row names.
 */
#include "sched/retain.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"
#include "core/sandbox.h"
#include "core/task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Remove <state>/<kind>/<id> and all it holds; none is no error. */
static int remove_dir(const char *state_dir, const char *kind, const char *id, struct error *err)
{
	char parent[PATH_MAX];
	int r = layout_state_file(parent, sizeof(parent), state_dir, kind);
	if (r < 0)
		return error_set_errno(err, -r, "%s/%s", state_dir, kind);
	_cleanup_close_ int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : error_set_errno(err, errno, "%s", parent);
	r = remove_tree_at(fd, id);
	return r < 0 ? error_set_errno(err, -r, "removing %s/%s", parent, id) : 0;
}

int retain_task_remove(struct store *st, const char *state_dir, const char *id, struct error *err)
{
	if (!task_id_is_valid(id))
		return error_set(err, EINVAL, "'%s' is not a task id", id);
	int r = store_task_delete(st, id, err);
	if (r < 0)
		return r;
	struct error e = {0};
	r = remove_dir(state_dir, LAYOUT_TASKS, id, &e);
	if (r < 0)
		return error_set(err, -r,
				 "task %s is gone, but not all its files: %s (they go at the "
				 "next start)",
				 id, e.msg);
	return 0;
}

struct pass {
	struct store *st;
	const char *state_dir;
	size_t removed;
	struct error *err; /* the first failure */
};

static void note(struct pass *p, int r, const struct error *e)
{
	if (r < 0 && !p->err->code)
		*p->err = *e;
}

static int remove_task(const char *id, void *data)
{
	struct pass *p = data;
	struct error e = {0};
	int r = retain_task_remove(p->st, p->state_dir, id, &e);
	if (r == 0 || r == -ENOENT) /* removed, or by another meanwhile */
		p->removed++;
	else
		note(p, r, &e);
	return 0;
}

static int remove_sandbox(const char *id, void *data)
{
	struct pass *p = data;
	struct error e = {0};
	int r = store_sandbox_delete(p->st, id, &e);
	if (r == 0 && sandbox_id_is_valid(id))
		r = remove_dir(p->state_dir, LAYOUT_SANDBOXES, id, &e);
	if (r == 0 || r == -ENOENT)
		p->removed++;
	else
		note(p, r, &e);
	return 0;
}

int retain_pass(struct store *st, const char *state_dir, int64_t now, int64_t retain_ms,
		size_t batch, struct retain_counts *ret, struct error *err)
{
	*ret = (struct retain_counts){0};
	if (retain_ms < RETAIN_MIN_MS || retain_ms > RETAIN_MAX_MS)
		return error_set(err, EINVAL, "a retention of %lld ms is out of range",
				 (long long)retain_ms);
	int64_t before = now - retain_ms;
	struct error first = {0};
	struct pass p = {.st = st, .state_dir = state_dir, .err = &first};
	int r = store_task_list_ended(st, before, batch, remove_task, &p, err);
	if (r < 0)
		return r;
	ret->tasks = p.removed;
	p.removed = 0;
	r = store_sandbox_list_ended(st, before, batch, remove_sandbox, &p, err);
	if (r < 0)
		return r;
	ret->sandboxes = p.removed;
	if (first.code)
		*err = first;
	return 0;
}

int64_t retain_tick_ms(int64_t retain_ms)
{
	int64_t t = retain_ms / 10;
	return t < RETAIN_TICK_MIN_MS	? RETAIN_TICK_MIN_MS
	       : t > RETAIN_TICK_MAX_MS ? RETAIN_TICK_MAX_MS
					: t;
}

int retain_sweep(struct store *st, const char *state_dir, size_t *ret_removed, struct error *err)
{
	char dir[PATH_MAX];
	size_t removed = 0;
	int r = layout_state_file(dir, sizeof(dir), state_dir, LAYOUT_TASKS);
	if (r < 0)
		return error_set_errno(err, -r, "%s/%s", state_dir, LAYOUT_TASKS);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (ret_removed)
			*ret_removed = 0;
		return 0;
	}
	int dfd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		r = error_set_errno(err, errno, "%s", dir);
		CLOSE_FD(dfd);
		return r;
	}
	struct error first = {0};
	struct dirent *de;
	r = 0;
	while (r == 0 && (de = readdir(d))) {
		if (!task_id_is_valid(de->d_name))
			continue;
		struct task t = {0};
		struct error e = {0};
		int g = store_task_get(st, de->d_name, &t, &e);
		task_release(&t);
		if (g == 0)
			continue;
		if (g != -ENOENT) {
			r = g, *err = e;
			break;
		}
		int rr = remove_tree_at(fd, de->d_name);
		if (rr == 0)
			removed++;
		else if (!first.code)
			error_set_errno(&first, -rr, "removing %s/%s", dir, de->d_name);
	}
	closedir(d);
	if (r < 0)
		return r;
	if (first.code)
		*err = first;
	if (ret_removed)
		*ret_removed = removed;
	return 0;
}
