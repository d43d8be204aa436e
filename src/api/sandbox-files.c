/*
 * sandbox-files.c - the files routes. The sandbox opens the path itself
 * (the fleet relays an fd from its init): GET hands the server that fd
 * to send (or lists the directory it names), PUT writes the body to a
 * fresh temporary file as it arrives and renames it in place (an
 * upload: api.h), DELETE unlinks.
 */
#include "api/api-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Entries a directory listing shows at most. */
#define LIST_ENTRIES_MAX 10000

/*
 * What every files route checks before it asks the sandbox: path= (the
 * route's other query checks are the table's), the fleet, and a running
 * sandbox.
 */
static int files_begin(struct api_call *c, const char **ret_path, const struct fleet_ops **ret_ops)
{
	const char *p = api_query_get(c->query, "path");
	int r = api_sandbox_path_check(p, "path", c->err);
	if (r < 0)
		return r;
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops)
		return -EIO;
	if ((r = api_sandbox_live(c, ops, true)) < 0)
		return r;
	*ret_path = p;
	*ret_ops = ops;
	return 0;
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
		      json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

/* Answer with the directory fd (taken) names: its entries, sorted by name. */
static int list_dir(struct api_call *c, int fd, const char *path)
{
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int e = errno;
		close(fd);
		return api_error_internal(c->err, e, "fdopendir");
	}
	json_t **items = NULL;
	size_t n = 0;
	bool truncated = false;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == LIST_ENTRIES_MAX) {
			truncated = true;
			break;
		}
		struct stat st;
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char mode[8];
		snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
		json_t *e = json_pack("{s:s%, s:s, s:I, s:s, s:o}", "name", de->d_name,
				      strlen(de->d_name), "type", type_name(st.st_mode), "size",
				      (json_int_t)st.st_size, "mode", mode, "mtime",
				      api_time_json((int64_t)st.st_mtim.tv_sec * 1000 +
						    st.st_mtim.tv_nsec / 1000000));
		json_t **grown = e ? realloc(items, (n + 1) * sizeof(*items)) : NULL;
		if (!grown) {
			json_decref(e);
			continue;
		}
		items = grown;
		items[n++] = e;
	}
	closedir(dir);
	if (n)
		qsort(items, n, sizeof(*items), entry_cmp);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, items[i]);
	free(items);
	json_t *out = json_pack("{s:s, s:o}", "path", path, "entries", arr);
	if (out && truncated)
		json_object_set_new(out, "truncated", json_true());
	return api_respond_json(c, 200, out);
}

int api_files_get(struct api_call *c)
{
	const char *path = NULL;
	const struct fleet_ops *ops = NULL;
	bool list = false;
	int r = api_query_flag(c->query, "list", &list, c->err);
	if (r < 0 || (r = files_begin(c, &path, &ops)) < 0)
		return r;
	struct error err = {0};
	int fd = -1;
	if ((r = ops->open(c->ctx->fleet, c->id, path, list ? "dir" : "read", &fd, NULL, 0, &err)) <
	    0)
		return api_fleet_error(c, r, &err, "file");
	if (list)
		return list_dir(c, fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return api_error_set(c->err, API_ERR_NOT_A_FILE, "path", "%s is not a regular file",
				     path);
	}
	if ((uint64_t)st.st_size > API_FILE_MAX) {
		close(fd);
		return api_error_set(c->err, API_ERR_FILE_TOO_LARGE, "path",
				     "%s is larger than %u bytes", path, API_FILE_MAX);
	}
	struct api_response *res =
	    api_respond_kind(c, 200, "application/octet-stream", API_RESPONSE_FILE);
	res->fd = fd;
	res->size = (uint64_t)st.st_size;
	return 0;
}

int api_files_delete(struct api_call *c)
{
	const char *path = NULL;
	const struct fleet_ops *ops = NULL;
	int r = files_begin(c, &path, &ops);
	if (r < 0)
		return r;
	struct error err = {0};
	if ((r = ops->unlink(c->ctx->fleet, c->id, path, &err)) < 0)
		return api_fleet_error(c, r, &err, "file");
	return api_respond_json(c, 200, json_pack("{s:s, s:b}", "path", path, "deleted", 1));
}

/* ---- uploads ------------------------------------------------------------------- */

struct api_upload {
	const struct fleet_ops *ops;
	struct fleet *fleet;
	struct api_response resp; /* an error found before or during the body */
	bool failed;
	char id[SANDBOX_ID_SIZE];
	char path[1025];
	char temp[1100];
	int fd;
	uint64_t size;	   /* bytes written to the file */
	uint64_t received; /* bytes of the body so far */
	bool too_large;
	int write_errno;
};

/* The PUT handler, as api_upload_begin() runs it: check, then open the temporary file. */
static int upload_open(struct api_call *c, void *data)
{
	struct api_upload *u = data;
	const char *path = NULL;
	const struct fleet_ops *ops = NULL;
	int r = files_begin(c, &path, &ops);
	if (r < 0)
		return r;
	snprintf(u->id, sizeof(u->id), "%s", c->id);
	snprintf(u->path, sizeof(u->path), "%s", path);
	struct error err = {0};
	r = ops->open(c->ctx->fleet, c->id, path, "write", &u->fd, u->temp, sizeof(u->temp), &err);
	return r < 0 ? api_fleet_error(c, r, &err, "file") : 0;
}

int api_files_put(struct api_call *c)
{
	/* the server streams this body: api_upload_begin() */
	return api_error_internal(c->err, ENOSYS, "PUT .../files reached api_handle()");
}

bool api_request_takes_raw_body(const struct api_request *req)
{
	struct api_match m;
	api_route_match(req->method, req->path, &m);
	return m.route && (m.route->flags & API_ROUTE_RAW_BODY);
}

struct api_upload *api_upload_begin(struct api_ctx *ctx, const struct api_request *req)
{
	struct api_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->ops = ctx->fleet_ops;
	u->fleet = ctx->fleet;
	u->fd = -1;
	if (api_run(ctx, req, &u->resp, upload_open, u) < 0 || u->resp.status)
		u->failed = true;
	return u;
}

bool api_upload_write(struct api_upload *u, const char *data, size_t len)
{
	u->received += len;
	if (u->failed || u->too_large || u->write_errno)
		/* the rest of the body is read and dropped, so that the client,
		 * which sends it all before it reads, gets the answer; but not
		 * without end */
		return u->received <= 2ULL * API_FILE_MAX;
	if (u->size + len > API_FILE_MAX) {
		u->too_large = true;
		return true;
	}
	int r = write_all(u->fd, data, len);
	if (r < 0)
		u->write_errno = -r;
	u->size += len;
	return true;
}

static void give_up_temp(struct api_upload *u)
{
	if (!u->temp[0])
		return;
	struct error ignored = {0};
	(void)u->ops->unlink(u->fleet, u->id, u->temp, &ignored);
	u->temp[0] = '\0';
}

void api_upload_end(struct api_upload *u, struct api_response *ret)
{
	if (!u->failed) {
		struct api_error e = {.code = API_ERR_COUNT};
		int r = 0;
		CLOSE_FD(u->fd);
		if (u->too_large) {
			give_up_temp(u);
			r = api_error_set(&e, API_ERR_FILE_TOO_LARGE, NULL,
					  "the file is larger than %u bytes", API_FILE_MAX);
		} else if (u->write_errno) {
			give_up_temp(u);
			r = api_shim_error(&e, u->write_errno, NULL, "file");
		} else {
			struct error err = {0};
			r = u->ops->rename(u->fleet, u->id, u->temp, u->path, &err);
			if (r < 0) {
				give_up_temp(u);
				r = r == -EREMOTEIO ? api_shim_error(&e, err.code, err.msg, "file")
						    : api_error_internal(&e, -r, err.msg);
			} else {
				u->temp[0] = '\0';
				json_t *v = json_pack("{s:s, s:I}", "path", u->path, "size",
						      (json_int_t)u->size);
				char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
				json_decref(v);
				api_json_response(&u->resp, 201, text);
			}
		}
		if (r < 0)
			(void)api_fail(r, &e, &u->resp);
	}
	*ret = u->resp;
	memset(&u->resp, 0, sizeof(u->resp));
}

void api_upload_free(struct api_upload *u)
{
	if (!u)
		return;
	CLOSE_FD(u->fd);
	give_up_temp(u);
	api_response_release(&u->resp);
	free(u);
}
