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

/* <state>/inputs/<tenant> into buf. 0 or -ENAMETOOLONG. */
static int tenant_dir(char *buf, size_t size, const char *state_dir, const char *tenant)
{
	int n = snprintf(buf, size, "%s/%s/%s", state_dir, LAYOUT_INPUTS, tenant);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/*
 * Remove the entries of one tenant's directory (dfd) older than ttl_s at
 * now_ms (their mtime: when the last byte arrived); *ret_left: those that
 * stay. 0 or -errno.
 */
static int sweep_tenant(int dfd, int64_t now_ms, uint64_t ttl_s, size_t *ret_left)
{
	int fd = dup(dfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	size_t left = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int64_t age_ms =
		    now_ms - ((int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000);
		if (age_ms > (int64_t)ttl_s * 1000 && unlinkat(dfd, de->d_name, 0) == 0)
			continue;
		left++;
	}
	closedir(d);
	*ret_left = left;
	return 0;
}

int api_inputs_sweep(const char *state_dir, int64_t now_ms, uint64_t ttl_s, struct error *err)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s/%s", state_dir, LAYOUT_INPUTS) >= (int)sizeof(dir))
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : error_set_errno(err, errno, "%s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_close_ int t =
		    openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		size_t left = 0;
		if (t >= 0 && sweep_tenant(t, now_ms, ttl_s, &left) == 0 && left == 0)
			(void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
	return 0;
}

/* ---- POST /v1/inputs ------------------------------------------------------------- */

int api_input_upload_open(struct api_call *c, char *temp, size_t size, int *ret_fd,
			  char id[INPUT_ID_SIZE])
{
	const char *state_dir = c->ctx->state_dir;
	char dir[PATH_MAX];
	struct error err = {0};
	if (!state_dir)
		return api_error_internal(c->err, EIO, "no state directory");
	if (tenant_dir(dir, sizeof(dir), state_dir, c->who.tenant) < 0)
		return api_error_internal(c->err, ENAMETOOLONG, "the inputs' path is too long");
	/* everyone's expired inputs go first: they must not count, nor stay */
	if (api_inputs_sweep(state_dir, c->now, api_input_ttl_s(c->ctx), &err) < 0)
		return api_error_internal(c->err, err.code, err.msg);
	int r = mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r < 0)
		return api_error_internal(c->err, -r, "the inputs' directory");
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t pending = 0;
	if (dfd < 0 || (r = sweep_tenant(dfd, c->now, api_input_ttl_s(c->ctx), &pending)) < 0)
		return api_error_internal(c->err, dfd < 0 ? errno : -r, "the inputs' directory");
	if (pending >= TASK_INPUTS_PENDING_MAX)
		return api_error_set(c->err, API_ERR_TOO_MANY_INPUTS, NULL,
				     "tenant %s holds %zu inputs no task has taken, as many as it "
				     "may: name them in tasks, or wait until they expire",
				     c->who.tenant, pending);
	if ((r = id_new(INPUT_ID_PREFIX, id, INPUT_ID_SIZE)) < 0)
		return api_error_internal(c->err, -r, "an input's id");
	if ((size_t)snprintf(temp, size, "%s/%s%s", dir, LAYOUT_INPUT_TEMP_PREFIX, id) >= size)
		return api_error_internal(c->err, ENAMETOOLONG, "the inputs' path is too long");
	int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		temp[0] = '\0';
		return api_error_internal(c->err, errno, "an input's temporary file");
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
	*slash = '\0';
	if (rename(temp, (*slash = '/', path)) < 0)
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

/* Move input id from <state>/inputs/<tenant>/ (from) to the task's inputs/ (to), or back. */
static int move_input(int from, int to, const char *id)
{
	return renameat(from, id, to, id) < 0 ? -errno : 0;
}

/*
 * Give back what the task's inputs/ holds of spec's files: a tar's blob
 * removed and the tar (kept as .tar-<id>) renamed back, the others
 * renamed back; then inputs/ removed if that left it empty.
 */
static void give_back(int mine, int task_dir, json_t *files)
{
	_cleanup_close_ int in =
	    openat(task_dir, LAYOUT_INPUTS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = in < 0 ? -1 : dup(in);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d && fd >= 0)
		close(fd);
	for (struct dirent *de; d && (de = readdir(d));) {
		const char *id = de->d_name + strlen(INPUT_TAR_PREFIX);
		if (strncmp(de->d_name, INPUT_TAR_PREFIX, strlen(INPUT_TAR_PREFIX)) != 0)
			continue;
		(void)unlinkat(in, id, 0);
		(void)renameat(in, de->d_name, mine, id);
	}
	if (d)
		closedir(d);
	const char *path;
	json_t *v;
	json_object_foreach(files, path, v)
	{
		const char *id = json_string_value(json_object_get(v, "input"));
		if (id && in >= 0)
			(void)move_input(in, mine, id);
	}
	(void)unlinkat(task_dir, LAYOUT_INPUTS, AT_REMOVEDIR);
}

/* Open <state>/inputs/<tenant> and <state>/tasks/<task> (made if need be). */
static int open_dirs(const char *state_dir, const char *tenant, const char *task_id, int *mine,
		     int *task, struct api_error *e)
{
	char dir[PATH_MAX];
	if (tenant_dir(dir, sizeof(dir), state_dir, tenant) < 0)
		return api_error_internal(e, ENAMETOOLONG, "the inputs' path is too long");
	*mine = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*mine < 0 && errno != ENOENT)
		return api_error_internal(e, errno, "the tenant's inputs' directory");
	if (layout_task_dir(dir, sizeof(dir), state_dir, task_id) < 0)
		return api_error_internal(e, ENAMETOOLONG, "the task's path is too long");
	int r = mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r < 0 || (*task = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return api_error_internal(e, r < 0 ? -r : errno, "the task's directory");
	return 0;
}

/* An entry's input id: "input" (a file) or "tar_input" (a directory); NULL for neither. */
static const char *entry_input(json_t *v, bool *tar)
{
	const char *id = json_string_value(json_object_get(v, "input"));
	*tar = !id;
	return id ? id : json_string_value(json_object_get(v, "tar_input"));
}

/* Take each input of files from mine into in (a tar's as .tar-<id>); its entry says its bytes. */
static int take_each(int mine, int in, json_t *files, struct api_error *e)
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
		int r = mine < 0 || renameat(mine, id, in, kept) < 0 ? -ENOENT : 0;
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

int api_inputs_take(const char *state_dir, const char *tenant, const char *task_id,
		    char **spec_json, struct api_error *e)
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
	_cleanup_close_ int mine = -1, task = -1, in = -1;
	int r = open_dirs(state_dir, tenant, task_id, &mine, &task, e);
	if (r < 0)
		return r;
	if ((mkdirat(task, LAYOUT_INPUTS, 0700) < 0 && errno != EEXIST) ||
	    (in = openat(task, LAYOUT_INPUTS, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return api_error_internal(e, errno, "the task's inputs' directory");
	/* the spec as asked, to give back by (expanding drops the tars' entries) */
	_cleanup_json_ json_t *asked = json_deep_copy(files);
	r = asked ? take_each(mine, in, files, e) : -ENOMEM;
	if (r == 0)
		r = expand_tars(in, files, e);
	if (r == 0 && (r = sync_dir_fd(in)) == 0 && mine >= 0)
		r = sync_dir_fd(mine);
	if (r < 0 && r != -EINVAL && r != -ENOMEM)
		r = api_error_internal(e, -r, "the inputs' directories");
	char *text = r == 0 ? json_dumps(spec, JSON_COMPACT) : NULL;
	if (!text) {
		give_back(mine, task, asked ? asked : files);
		return r < 0 ? r : -ENOMEM;
	}
	free(*spec_json);
	*spec_json = text;
	return 0;
}

void api_inputs_commit(const char *state_dir, const char *task_id)
{
	char dir[PATH_MAX];
	if (layout_task_dir(dir, sizeof(dir), state_dir, task_id) < 0)
		return;
	_cleanup_close_ int task = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int in = task < 0 ? -1 : openat(task, LAYOUT_INPUTS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = in < 0 ? NULL : fdopendir(in);
	if (!d) {
		if (in >= 0)
			close(in);
		return;
	}
	for (struct dirent *de; (de = readdir(d));)
		if (strncmp(de->d_name, INPUT_TAR_PREFIX, strlen(INPUT_TAR_PREFIX)) == 0)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	(void)fsync(dirfd(d));
	closedir(d);
}

void api_inputs_give_back(const char *state_dir, const char *tenant, const char *task_id,
			  const char *spec_json)
{
	_cleanup_json_ json_t *spec = json_loads(spec_json, 0, NULL);
	struct api_error e = {0};
	_cleanup_close_ int mine = -1, task = -1;
	if (!spec || open_dirs(state_dir, tenant, task_id, &mine, &task, &e) < 0 || mine < 0)
		return;
	give_back(mine, task, json_object_get(spec, "files"));
}
