/*
 * inputs.c - a task's inputs: files too large for a request's JSON,
 * uploaded ahead of it and named in its "files" by id.
 *
 *	POST /v1/inputs                    the body (any bytes, at most
 *	                                   SPEC_FILE_INPUT_MAX) into
 *	                                   <state>/inputs/<tenant>/<id>: 201 {"id", "size",
 *	                                   "expires_at"}
 *	"files": {"/workspace/big.bin": {"input": "inp_..."}}
 *	                                   at the task's create, the input is
 *	                                   moved to <state>/tasks/<id>/inputs/<id>,
 *	                                   and the stored spec says which bytes:
 *	                                   {"input", "offset", "size"}
 *
 * An input is its tenant's (another tenant's id is an unknown one), is
 * taken by one task only, and goes when its task is removed; one no task
 * took is removed past the TTL (agentboxd --input-ttl) by the next upload
 * of anyone's, or the daemon's start. A tenant holds at most
 * TASK_INPUTS_PENDING_MAX not yet taken, arriving ones included. The
 * supervisor opens them for its sandbox's init, which copies them in
 * (runtime/spec.h: struct spec_file's from_fd).
 */
#include "api/api-internal.h"
#include "api/inputs.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "base/fileio.h"
#include "core/id.h"
#include "core/layout.h"
#include "core/limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t api_input_ttl_s(const struct api_ctx *ctx)
{
	return ctx->input_ttl_s ? ctx->input_ttl_s : TASK_INPUT_TTL_DEFAULT_S;
}

/* fsync the directory fd or path. 0 or -errno. */
static int sync_dir_fd(int fd)
{
	return fsync(fd) < 0 ? -errno : 0;
}

static int sync_dir(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : sync_dir_fd(fd);
}

/* A stream of dirfd's entries, on an fd of its own (close-on-exec); NULL with errno. */
static DIR *dir_stream(int dirfd)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d && fd >= 0) {
		int errnum = errno;
		close(fd);
		errno = errnum;
	}
	if (d)
		rewinddir(d); /* the offset is dirfd's too */
	return d;
}

/* <state>/inputs/<tenant>, made if need be (0700), open: the fd, or -errno. */
static int open_tenant(const char *state_dir, const char *tenant)
{
	char dir[PATH_MAX];
	int n = snprintf(dir, sizeof(dir), "%s/%s/%s", state_dir, LAYOUT_INPUTS, tenant);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return -ENAMETOOLONG;
	int r = mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r < 0)
		return r;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Is dfd's entry name older than ttl_s at now_ms (its mtime: when its last byte came)? */
static bool expired(int dfd, const char *name, int64_t now_ms, uint64_t ttl_s)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	int64_t mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	return now_ms - mtime_ms > (int64_t)ttl_s * 1000;
}

/*
 * Remove what expired of one tenant's inputs (dfd): an input older than
 * ttl_s; an upload's temporary only at_start, when none can be arriving
 * (a daemon stopped in the middle left it). *ret_left: the entries that
 * stay, temporaries included. 0 or -errno.
 */
static int sweep_tenant(int dfd, int64_t now_ms, uint64_t ttl_s, bool at_start, size_t *ret_left)
{
	DIR *d = dir_stream(dfd);
	if (!d)
		return -errno;
	size_t left = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		bool temp = strncmp(de->d_name, LAYOUT_INPUT_TEMP_PREFIX,
				    strlen(LAYOUT_INPUT_TEMP_PREFIX)) == 0;
		bool gone = temp ? at_start : expired(dfd, de->d_name, now_ms, ttl_s);
		if (gone && unlinkat(dfd, de->d_name, 0) == 0)
			continue;
		left++;
	}
	closedir(d);
	*ret_left = left;
	return 0;
}

/*
 * Every tenant's expired inputs. Tenants' directories stay (a take or a
 * give back may be using one at this moment). 0 or -errno with err.
 */
static int sweep_all(const char *state_dir, int64_t now_ms, uint64_t ttl_s, bool at_start,
		     struct error *err)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s/%s", state_dir, LAYOUT_INPUTS) >= (int)sizeof(dir))
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : error_set_errno(err, errno, "%s", dir);
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_close_ int t =
		    openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		size_t left = 0;
		if (t >= 0)
			(void)sweep_tenant(t, now_ms, ttl_s, at_start, &left);
	}
	closedir(d);
	return 0;
}

int api_inputs_sweep(const char *state_dir, int64_t now_ms, uint64_t ttl_s, struct error *err)
{
	return sweep_all(state_dir, now_ms, ttl_s, false, err);
}

/* ---- POST /v1/inputs ------------------------------------------------------------- */

int api_input_upload_open(struct api_call *c, char *temp, size_t size, int *ret_fd,
			  char id[INPUT_ID_SIZE])
{
	const char *state_dir = c->ctx->state_dir;
	uint64_t ttl = api_input_ttl_s(c->ctx);
	struct error err = {0};
	if (!state_dir)
		return api_error_internal(c->err, EIO, "no state directory");
	/* everyone's expired inputs go first: they must not count, nor stay */
	if (sweep_all(state_dir, c->now, ttl, false, &err) < 0)
		return api_error_internal(c->err, err.code, err.msg);
	_cleanup_close_ int dfd = open_tenant(state_dir, c->who.tenant);
	if (dfd < 0)
		return api_error_internal(c->err, -dfd, "the inputs' directory");
	int r = id_new(INPUT_ID_PREFIX, id, INPUT_ID_SIZE);
	if (r < 0)
		return api_error_internal(c->err, -r, "an input's id");
	char name[INPUT_ID_SIZE + sizeof(LAYOUT_INPUT_TEMP_PREFIX)];
	snprintf(name, sizeof(name), "%s%s", LAYOUT_INPUT_TEMP_PREFIX, id);
	/* ours first, then counted with the rest: uploads at once cannot all pass */
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return api_error_internal(c->err, errno, "an input's temporary file");
	size_t held = 0;
	if ((r = sweep_tenant(dfd, c->now, ttl, false, &held)) < 0 ||
	    held > TASK_INPUTS_PENDING_MAX) {
		close(fd);
		(void)unlinkat(dfd, name, 0);
		if (r < 0)
			return api_error_internal(c->err, -r, "the inputs' directory");
		return api_error_set(c->err, API_ERR_TOO_MANY_INPUTS, NULL,
				     "tenant %s holds %d inputs no task has taken, as many as it "
				     "may: name them in tasks, or wait until they expire",
				     c->who.tenant, TASK_INPUTS_PENDING_MAX);
	}
	if ((size_t)snprintf(temp, size, "%s/%s/%s/%s", state_dir, LAYOUT_INPUTS, c->who.tenant,
			     name) >= size) {
		close(fd);
		(void)unlinkat(dfd, name, 0);
		return api_error_internal(c->err, ENAMETOOLONG, "the inputs' path is too long");
	}
	*ret_fd = fd;
	return 0;
}

int api_input_upload_finish(int fd, const char *temp, const char *id, uint64_t size,
			    int64_t expires_ms, struct api_response *ret, struct api_error *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", temp);
	char *slash = strrchr(path, '/');
	snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "%s", id);
	if (fsync(fd) < 0) {
		int errnum = errno;
		return errnum == ENOSPC || errnum == EDQUOT
			   ? api_error_set(e, API_ERR_NO_SPACE, NULL,
					   "the disk of the daemon's inputs is full")
			   : api_error_internal(e, errnum, "an input's fsync");
	}
	if (rename(temp, path) < 0)
		return api_error_internal(e, errno, "an input's rename");
	*slash = '\0';
	int r = sync_dir(path);
	if (r < 0)
		return api_error_internal(e, -r, "an input's directory");
	json_t *v = json_pack("{s:s, s:I, s:o}", "id", id, "size", (json_int_t)size, "expires_at",
			      api_time_json(expires_ms));
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	api_json_response(ret, 201, text);
	return 0;
}

/* ---- a task takes its inputs ----------------------------------------------------- */

/*
 * Give back everything the task's inputs/ (in) holds to its tenant's
 * (mine): a tar (kept as .tar-<id>) renamed back, then its blob removed;
 * every other input renamed back; the tenant's mark removed. Both made
 * durable. No spec needed: inputs/ holds only what this task took.
 */
static void give_back(int mine, int in)
{
	DIR *d = dir_stream(in);
	for (struct dirent *de; d && (de = readdir(d));) {
		if (strncmp(de->d_name, INPUT_TAR_PREFIX, strlen(INPUT_TAR_PREFIX)) != 0)
			continue;
		const char *id = de->d_name + strlen(INPUT_TAR_PREFIX);
		if (renameat(in, de->d_name, mine, id) == 0)
			(void)unlinkat(in, id, 0);
	}
	if (d)
		rewinddir(d);
	for (struct dirent *de; d && (de = readdir(d));)
		if (id_is_valid(INPUT_ID_PREFIX, de->d_name))
			(void)renameat(in, de->d_name, mine, de->d_name);
	if (d)
		closedir(d);
	(void)unlinkat(in, INPUT_TENANT_FILE, 0);
	(void)fsync(mine);
	(void)fsync(in);
}

/*
 * The task's inputs/ (made, with the tenant's mark, durably, before any
 * input moves in: a daemon stopped before the task is stored gives them
 * back at its next start) and the tenant's inputs, open. 0, or an error in e.
 */
static int open_dirs(const char *state_dir, const char *tenant, const char *task_id, int *mine,
		     int *in, struct api_error *e)
{
	char dir[PATH_MAX];
	if ((*mine = open_tenant(state_dir, tenant)) < 0)
		return api_error_internal(e, -*mine, "the tenant's inputs' directory");
	if (layout_task_dir(dir, sizeof(dir), state_dir, task_id) < 0)
		return api_error_internal(e, ENAMETOOLONG, "the task's path is too long");
	int r = mkdir_p_at(AT_FDCWD, dir, 0700);
	_cleanup_close_ int task = r < 0 ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (task < 0)
		return api_error_internal(e, r < 0 ? -r : errno, "the task's directory");
	if ((mkdirat(task, LAYOUT_INPUTS, 0700) < 0 && errno != EEXIST) ||
	    (*in = openat(task, LAYOUT_INPUTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
		0)
		return api_error_internal(e, errno, "the task's inputs' directory");
	_cleanup_close_ int mark = openat(
	    *in, INPUT_TENANT_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	*strrchr(dir, '/') = '\0'; /* tasks/: the task's own entry */
	if (mark < 0 || (r = write_all(mark, tenant, strlen(tenant))) < 0 || fsync(mark) < 0 ||
	    sync_dir_fd(*in) < 0 || sync_dir_fd(task) < 0 || sync_dir(dir) < 0)
		return api_error_internal(e, mark < 0 || r == 0 ? errno : -r,
					  "the task's inputs' directory");
	return 0;
}

/* An entry's input id: "input" (a file) or "tar_input" (a directory); NULL for neither. */
static const char *entry_input(json_t *v, bool *tar)
{
	const char *id = json_string_value(json_object_get(v, "input"));
	*tar = !id;
	return id ? id : json_string_value(json_object_get(v, "tar_input"));
}

/*
 * Take each input of files from mine into in (a tar's as .tar-<id>); its
 * entry says its bytes. One expired is no longer there, though the sweep
 * has not removed it yet.
 */
static int take_each(int mine, int in, json_t *files, int64_t now_ms, uint64_t ttl_s,
		     struct api_error *e)
{
	const char *path;
	json_t *v;
	json_object_foreach(files, path, v)
	{
		bool tar;
		const char *id = entry_input(v, &tar);
		if (!id)
			continue;
		char kept[INPUT_ID_SIZE + sizeof(INPUT_TAR_PREFIX)];
		snprintf(kept, sizeof(kept), "%s%s", tar ? INPUT_TAR_PREFIX : "", id);
		struct stat st;
		int r = expired(mine, id, now_ms, ttl_s) || renameat(mine, id, in, kept) < 0
			    ? -ENOENT
			    : 0;
		if (r == 0 &&
		    (fstatat(in, kept, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)))
			r = -EIO;
		if (r == 0 && !tar &&
		    (json_object_set_new(v, "offset", json_integer(0)) < 0 ||
		     json_object_set_new(v, "size", json_integer(st.st_size)) < 0))
			return -ENOMEM;
		if (r == -ENOENT) {
			char field[API_FIELD_MAX];
			api_field_key(field, "files", path);
			return api_error_set(e, API_ERR_INVALID_FIELD, field,
					     "%s: there is no input %s of yours that no task has "
					     "taken (it expired, or a task took it)",
					     field, id);
		}
		if (r < 0)
			return api_error_internal(e, -r, "taking an input into a task");
	}
	return 0;
}

/* Each tar's entry replaced by its members' (inputs-tar.c); a path given twice is refused. */
static int expand_tars(int in, json_t *files, struct api_error *e)
{
	_cleanup_json_ json_t *out = json_object();
	if (!out)
		return -ENOMEM;
	const char *path;
	json_t *v;
	void *tmp;
	json_object_foreach_safe(files, tmp, path, v)
	{
		bool tar;
		const char *id = entry_input(v, &tar);
		if (!id || !tar)
			continue;
		int r = api_input_tar_expand(in, id, path, out, e);
		if (r < 0)
			return r;
		if (json_object_del(files, path) < 0)
			return -ENOMEM;
	}
	json_object_foreach(out, path, v)
	{
		if (json_object_get(files, path)) {
			char field[API_FIELD_MAX];
			api_field_key(field, "files", path);
			return api_error_set(e, API_ERR_INVALID_FIELD, field,
					     "%s is given twice (a tar's member too)", field);
		}
		if (json_object_set(files, path, v) < 0)
			return -ENOMEM;
	}
	return 0;
}

int api_inputs_take(const char *state_dir, const char *tenant, const char *task_id, int64_t now_ms,
		    uint64_t ttl_s, char **spec_json, struct api_error *e)
{
	_cleanup_json_ json_t *spec = json_loads(*spec_json, 0, NULL);
	json_t *files = json_object_get(spec, "files");
	if (!spec)
		return -ENOMEM;
	bool any = false, tar;
	const char *path;
	json_t *v;
	json_object_foreach(files, path, v) any = any || entry_input(v, &tar);
	if (!any)
		return 0;
	_cleanup_close_ int mine = -1, in = -1;
	int r = open_dirs(state_dir, tenant, task_id, &mine, &in, e);
	if (r == 0)
		r = take_each(mine, in, files, now_ms, ttl_s, e);
	if (r == 0)
		r = expand_tars(in, files, e);
	if (r == 0 && ((r = sync_dir_fd(in)) < 0 || (r = sync_dir_fd(mine)) < 0))
		r = api_error_internal(e, -r, "the inputs' directories");
	char *text = r == 0 ? json_dumps(spec, JSON_COMPACT) : NULL;
	if (!text) {
		api_inputs_give_back(state_dir, tenant, task_id);
		return r < 0 ? r : -ENOMEM;
	}
	free(*spec_json);
	*spec_json = text;
	return 0;
}

/* The task's inputs/, open (O_RDONLY); -errno. */
static int open_task_inputs(const char *state_dir, const char *task_id)
{
	char task[PATH_MAX], dir[PATH_MAX + sizeof(LAYOUT_INPUTS) + 1];
	if (layout_task_dir(task, sizeof(task), state_dir, task_id) < 0)
		return -ENAMETOOLONG;
	snprintf(dir, sizeof(dir), "%s/%s", task, LAYOUT_INPUTS);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Remove in's tars (kept until the task was stored). */
static void drop_tars(int in)
{
	DIR *d = dir_stream(in);
	for (struct dirent *de; d && (de = readdir(d));)
		if (strncmp(de->d_name, INPUT_TAR_PREFIX, strlen(INPUT_TAR_PREFIX)) == 0)
			(void)unlinkat(in, de->d_name, 0);
	if (d)
		closedir(d);
	(void)fsync(in);
}

void api_inputs_commit(const char *state_dir, const char *task_id)
{
	_cleanup_close_ int in = open_task_inputs(state_dir, task_id);
	if (in >= 0)
		drop_tars(in);
}

void api_inputs_give_back(const char *state_dir, const char *tenant, const char *task_id)
{
	_cleanup_close_ int mine = open_tenant(state_dir, tenant);
	_cleanup_close_ int in = open_task_inputs(state_dir, task_id);
	if (mine >= 0 && in >= 0)
		give_back(mine, in);
	char dir[PATH_MAX];
	if (in >= 0 && layout_task_dir(dir, sizeof(dir), state_dir, task_id) == 0) {
		_cleanup_close_ int task = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (task >= 0)
			(void)unlinkat(task, LAYOUT_INPUTS, AT_REMOVEDIR);
	}
}

/* The tenant task_id's inputs/ (in) was taken for, from its mark. 0 or -errno. */
static int read_mark(int in, char tenant[TENANT_NAME_SIZE])
{
	_cleanup_close_ int fd = openat(in, INPUT_TENANT_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read_all(fd, tenant, TENANT_NAME_SIZE - 1);
	if (n <= 0)
		return n < 0 ? (int)n : -EINVAL;
	tenant[n] = '\0';
	return tenant_name_is_valid(tenant) ? 0 : -EINVAL;
}

int api_inputs_recover(struct store *st, const char *state_dir, int64_t now_ms, uint64_t ttl_s,
		       struct error *err)
{
	int r = sweep_all(state_dir, now_ms, ttl_s, true, err);
	char dir[PATH_MAX];
	if (r < 0 || layout_state_file(dir, sizeof(dir), state_dir, LAYOUT_TASKS) < 0)
		return r < 0 ? r : error_set(err, ENAMETOOLONG, "the state directory's path");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : error_set_errno(err, errno, "%s", dir);
	for (struct dirent *de; (de = readdir(d));) {
		if (!task_id_is_valid(de->d_name))
			continue;
		_cleanup_close_ int in = open_task_inputs(state_dir, de->d_name);
		if (in < 0)
			continue;
		struct task t = {0};
		struct error ignored = {0};
		char tenant[TENANT_NAME_SIZE];
		int g = store_task_get(st, de->d_name, &t, &ignored);
		if (g == -ENOENT && read_mark(in, tenant) == 0) {
			/* taken by a task the daemon stopped before storing: its tenant's again */
			_cleanup_close_ int mine = open_tenant(state_dir, tenant);
			if (mine >= 0)
				give_back(mine, in);
		} else if (g == 0 && task_status_is_final(t.status)) {
			layout_inputs_forget(state_dir, de->d_name);
		} else if (g == 0) {
			drop_tars(in);
		}
		task_release(&t);
	}
	closedir(d);
	return 0;
}
