/*
 * sandbox-files.c - the files routes. The sandbox opens the path itself
 * (the fleet relays an fd from its init): GET hands the server that fd
 * to send (or lists the directory it names), PUT sends the body as it
 * arrives to the sandbox's copier, which writes it into a fresh
 * temporary file, and renames that in place (an upload: api.h), DELETE
 * unlinks. The one other upload, an image's archive (POST
 * /v1/images/import), goes to a temporary file of the image store
 * instead, and is imported at its end (images.c). A directory as a tar
 * (format=tar) is sandbox-files-tar.c's: GET builds it, PUT's body is
 * spooled here and unpacked there at its end.
 */
#include "api/api-internal.h"
#include "api/inputs.h"
#include "core/limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
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
	const char *format = api_query_get(c->query, "format");
	int r = api_sandbox_path_check(p, "path", c->err);
	if (r < 0)
		return r;
	if (format && strcmp(format, "tar") != 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "format",
				     "format must be tar (or absent: one file)");
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
	if (api_query_get(c->query, "format")) {
		if (list)
			return api_error_set(c->err, API_ERR_INVALID_FIELD, "format",
					     "format=tar and list=1 do not go together");
		return api_files_get_tar(c, ops, path);
	}
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
	bool image;			/* an image's archive (images.c), not a sandbox's file */
	bool input;			/* a task's input (inputs.c), not a sandbox's file */
	char input_id[INPUT_ID_SIZE];	/* input: its id */
	int64_t input_expires;		/* input: when it goes, untaken (ms) */
	bool tar;			/* format=tar: fd is the spool, unpacked at the end */
	struct image_store *images;	/* image: the store */
	char image_name[IMAGE_REF_MAX]; /* image: ?name=, normalized; "" = the archive's */
	uint64_t max;			/* bytes the body may have */
	const struct fleet_ops *ops;
	struct fleet *fleet;
	struct api_response resp; /* an error found before or during the body */
	bool failed;
	char id[SANDBOX_ID_SIZE];
	char path[1025];
	char temp[1100];
	int fd;
	bool copier;	   /* fd is a socket to the sandbox's copier (fleet_open()), not a file */
	bool copier_ended; /* before the end of the body: it failed, the rename says why */
	uint64_t size;	   /* bytes written to the file */
	uint64_t received; /* bytes of the body so far */
	bool too_large;
	int write_errno;
	struct api_audit_entry audit; /* its row, recorded at the end */
	enum api_error_code begin_code;
};

/*
 * A failed upload as the API says it. The sandbox's memory is no_space
 * too: its writable places are a tmpfs, so a file takes memory_mb as much
 * as disk_mb, and the copier that wrote it was killed (ENOMEM).
 */
int api_upload_error(struct api_error *e, int errnum, const char *message)
{
	switch (errnum) {
	case ENOMEM:
		return api_error_set(
		    e, API_ERR_NO_SPACE, NULL,
		    "the sandbox's memory is full: its files are held in its memory "
		    "(memory_mb), which cannot hold this one");
	case EFBIG:
		return api_error_set(e, API_ERR_NO_SPACE, NULL,
				     "the file is larger than the sandbox may write");
	case ETIMEDOUT:
		return api_error_set(e, API_ERR_SANDBOX_FAILED, NULL,
				     "the sandbox stopped taking the file for %d s",
				     API_UPLOAD_STALL_MS / 1000);
	default:
		return api_shim_error(e, errnum, message, "file");
	}
}

bool api_copier_prepare(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false; /* a file (a fake fleet's) */
	struct timeval tv = {.tv_sec = API_UPLOAD_STALL_MS / 1000};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return true;
}

int api_copier_send(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

void api_copier_wait(int fd)
{
	(void)shutdown(fd, SHUT_WR);
	char b[64];
	ssize_t n;
	while ((n = read(fd, b, sizeof(b))) > 0 || (n < 0 && errno == EINTR))
		; /* the copier sends nothing: only EOF or the timeout end this */
}

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
	if (api_query_get(c->query, "format")) {
		u->tar = true;
		u->max = API_FILES_TAR_BYTES_MAX;
		return api_files_tar_spool(c, &u->fd);
	}
	struct error err = {0};
	r = ops->open(c->ctx->fleet, c->id, path, "write", &u->fd, u->temp, sizeof(u->temp), &err);
	if (r < 0)
		return api_fleet_error(c, r, &err, "file");
	u->copier = api_copier_prepare(u->fd);
	return 0;
}

/* POST /v1/images/import, as api_upload_begin() runs it: check, then open the temporary file. */
static int image_upload_open(struct api_call *c, void *data)
{
	struct api_upload *u = data;
	return api_image_upload_open(c, u->temp, sizeof(u->temp), &u->fd, u->image_name,
				     sizeof(u->image_name));
}

/* POST /v1/inputs, as api_upload_begin() runs it: check, then open the temporary file. */
static int input_upload_open(struct api_call *c, void *data)
{
	struct api_upload *u = data;
	u->input_expires = c->now + (int64_t)api_input_ttl_s(c->ctx) * 1000;
	return api_input_upload_open(c, u->temp, sizeof(u->temp), &u->fd, u->input_id);
}

int api_inputs_create(struct api_call *c)
{
	return api_error_internal(c->err, ENOSYS, "POST /v1/inputs reached api_handle()");
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
	struct api_match m;
	api_route_match(req->method, req->path, &m);
	u->image = m.route && m.route->id == API_ROUTE_IMAGES_IMPORT;
	u->input = m.route && m.route->id == API_ROUTE_INPUTS_CREATE;
	u->images = ctx->images;
	u->max = u->image   ? api_image_import_max(ctx)
		 : u->input ? SPEC_FILE_INPUT_MAX
			    : API_FILE_MAX;
	int (*open)(struct api_call *, void *) = u->image   ? image_upload_open
						 : u->input ? input_upload_open
							    : upload_open;
	if (api_run_deferred(ctx, req, &u->resp, open, u, &u->audit, &u->begin_code) < 0 ||
	    u->resp.status)
		u->failed = true;
	return u;
}

bool api_upload_expect(struct api_upload *u, uint64_t len)
{
	/* a file past its cap is read and dropped, then answered, as before */
	if (!(u->image || u->input || u->tar) || u->failed || len <= u->max)
		return true;
	u->too_large = true;
	return false;
}

bool api_upload_write(struct api_upload *u, const char *data, size_t len)
{
	u->received += len;
	if (u->failed || u->too_large || u->write_errno || u->copier_ended)
		/* the rest of the body is read and dropped, so that the client,
		 * which sends it all before it reads, gets the answer; but not
		 * without end */
		return u->received <= u->max + API_FILE_MAX;
	if (u->size + len > u->max) {
		u->too_large = true;
		return true;
	}
	if (!u->copier) {
		int r = write_all(u->fd, data, len);
		if (r < 0)
			u->write_errno = -r;
	} else {
		/*
		 * EPIPE: the copier ended before the end, so it failed, and the
		 * rename answers with why (ENOSPC, ENOMEM, ...). Any other
		 * error leaves it running: the file is given up, never renamed
		 * in with a part missing.
		 */
		int r = api_copier_send(u->fd, data, len);
		if (r == -EPIPE || r == -ECONNRESET)
			u->copier_ended = true;
		else if (r < 0)
			u->write_errno = r == -EAGAIN ? ETIMEDOUT : -r;
	}
	u->size += len;
	return true;
}

/* Remove the temporary (its copier ends too). 0, or the errno the sandbox refused with. */
static int give_up_temp(struct api_upload *u)
{
	if (!u->temp[0])
		return 0;
	if (u->image || u->input) {
		(void)unlink(u->temp);
		u->temp[0] = '\0';
		return 0;
	}
	struct error err = {0};
	int r = u->ops->unlink(u->fleet, u->id, u->temp, &err);
	u->temp[0] = '\0';
	return r == -EREMOTEIO ? err.code : 0;
}

/*
 * The whole body was taken: once the copier is done, rename the file in.
 * The rename answers for the copier too: a copier that failed (its disk
 * or its memory full) makes it fail with its errno.
 */
static int upload_commit(struct api_upload *u, struct api_error *e)
{
	if (u->input) {
		int r = api_input_upload_finish(u->fd, u->temp, u->input_id, u->size,
						u->input_expires, &u->resp, e);
		CLOSE_FD(u->fd);
		if (r < 0)
			(void)give_up_temp(u);
		u->temp[0] = '\0';
		return r;
	}
	if (u->image) {
		CLOSE_FD(u->fd);
		int r = api_image_upload_finish(u->images, u->temp, u->image_name, &u->resp, e);
		u->temp[0] = '\0'; /* removed */
		return r;
	}
	if (u->tar) {
		int r = api_files_tar_unpack(u->ops, u->fleet, u->id, u->path, u->fd, &u->resp, e);
		CLOSE_FD(u->fd);
		return r;
	}
	if (u->copier)
		api_copier_wait(u->fd);
	CLOSE_FD(u->fd);
	struct error err = {0};
	int r = u->ops->rename(u->fleet, u->id, u->temp, u->path, &err);
	if (r < 0) {
		(void)give_up_temp(u);
		return r == -EREMOTEIO ? api_upload_error(e, err.code, err.msg)
				       : api_error_internal(e, -r, err.msg);
	}
	u->temp[0] = '\0';
	json_t *v = json_pack("{s:s, s:I}", "path", u->path, "size", (json_int_t)u->size);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	api_json_response(&u->resp, 201, text);
	return 0;
}

void api_upload_end(struct api_upload *u, struct store *st, struct api_response *ret)
{
	enum api_error_code code = u->begin_code;
	if (!u->failed) {
		struct api_error e = {.code = API_ERR_COUNT};
		int r = 0;
		if (u->too_large) {
			CLOSE_FD(u->fd);
			(void)give_up_temp(u);
			r = u->image   ? api_error_set(&e, API_ERR_BODY_TOO_LARGE, NULL,
						       "the archive is larger than %llu bytes",
						       (unsigned long long)u->max)
			    : u->input ? api_error_set(&e, API_ERR_FILE_TOO_LARGE, NULL,
						       "the input is larger than %llu bytes",
						       (unsigned long long)u->max)
			    : u->tar
				? api_error_set(&e, API_ERR_BODY_TOO_LARGE, "body",
						"the tar is larger than %llu bytes",
						(unsigned long long)u->max)
				: api_error_set(&e, API_ERR_FILE_TOO_LARGE, NULL,
						"the file is larger than %u bytes", API_FILE_MAX);
		} else if (u->write_errno) {
			CLOSE_FD(u->fd);
			/* a copier that stalled was frozen, most likely: paused, then */
			bool paused = give_up_temp(u) == EBUSY;
			if (u->tar)
				r = api_error_internal(&e, u->write_errno, "spooling the tar");
			else if (u->image || u->input)
				r = u->write_errno == ENOSPC || u->write_errno == EDQUOT
					? api_error_set(&e, API_ERR_NO_SPACE, NULL,
							"the disk of the daemon's %s is full",
							u->image ? "image store" : "inputs")
					: api_error_internal(&e, u->write_errno,
							     u->image ? "image upload"
								      : "input upload");
			else
				r = api_upload_error(&e, paused ? EBUSY : u->write_errno, NULL);
		} else {
			r = upload_commit(u, &e);
		}
		if (r < 0)
			(void)api_fail(r, &e, &u->resp);
		code = u->resp.status >= 400 ? e.code : API_ERR_COUNT;
	}
	api_audit_record(&u->audit, code, st, &u->resp);
	*ret = u->resp;
	memset(&u->resp, 0, sizeof(u->resp));
}

void api_upload_free(struct api_upload *u)
{
	if (!u)
		return;
	CLOSE_FD(u->fd);
	(void)give_up_temp(u);
	api_response_release(&u->resp);
	free(u);
}
