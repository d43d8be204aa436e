/*
 * sandbox-files.c - the files routes. The sandbox opens the path itself
 * (the shim relays an fd from its init): GET reads that fd (or lists the
 * directory it names), PUT writes the body to a fresh temporary file as
 * it arrives and renames it in place, DELETE unlinks.
 */
#include "daemon/sandbox-internal.h"

#include "api/json-util.h"
#include "api/sandbox-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "daemon/fleet.h"
#include "shim/client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- files ----------------------------------------------------------------- */

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
		      json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

static void list_dir(int fd, const char *path, struct api_response *resp)
{
	DIR *dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		return;
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
	qsort(items, n, sizeof(*items), entry_cmp);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, items[i]);
	free(items);
	json_t *out = json_pack("{s:s, s:o}", "path", path, "entries", arr);
	if (out && truncated)
		json_object_set_new(out, "truncated", json_true());
	sandbox_respond_json(resp, 200, out);
}

enum MHD_Result sandbox_files_get(struct daemon *d, struct MHD_Connection *c,
				  const struct api_sandbox_call *call, struct api_response *resp)
{
	json_t *msg = json_pack("{s:s, s:s, s:s}", "op", "open", "path", call->path, "mode",
				call->list ? "dir" : "read");
	json_t *reply = NULL;
	int fd = -1;
	int r = fleet_call(d->fleet, call->id, msg, -1, &reply, &fd, "file", resp);
	json_decref(msg);
	json_decref(reply);
	if (r < 0)
		return server_send(c, resp);
	if (fd < 0) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "shim: open without an fd");
		return server_send(c, resp);
	}
	if (call->list) {
		list_dir(fd, call->path, resp);
		return server_send(c, resp);
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		api_error_response(resp, API_ERR_NOT_A_FILE, "path", "%s is not a regular file",
				   call->path);
		return server_send(c, resp);
	}
	if ((uint64_t)st.st_size > API_FILE_MAX) {
		close(fd);
		api_error_response(resp, API_ERR_FILE_TOO_LARGE, "path",
				   "%s is larger than %u bytes", call->path, API_FILE_MAX);
		return server_send(c, resp);
	}
	/* MHD sends from the fd and closes it */
	struct MHD_Response *mr = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (!mr) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	enum MHD_Result ok = MHD_queue_response(c, 200, mr);
	MHD_destroy_response(mr);
	return ok;
}

void sandbox_files_delete(struct daemon *d, const struct api_sandbox_call *call,
			  struct api_response *resp)
{
	json_t *msg = json_pack("{s:s, s:s}", "op", "unlink", "path", call->path), *reply = NULL;
	int r = fleet_call(d->fleet, call->id, msg, -1, &reply, NULL, "file", resp);
	json_decref(msg);
	json_decref(reply);
	if (r == 0)
		sandbox_respond_json(resp, 200,
				     json_pack("{s:s, s:b}", "path", call->path, "deleted", 1));
}

struct upload {
	struct daemon *d;
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

struct upload *upload_begin(struct daemon *d, struct api_ctx *ctx, const struct api_request *req)
{
	struct upload *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->d = d;
	u->fd = -1;
	struct api_sandbox_call call;
	if (api_sandbox_begin(ctx, req, &call, &u->resp) < 0) {
		u->failed = true;
		return u;
	}
	snprintf(u->id, sizeof(u->id), "%s", call.id);
	snprintf(u->path, sizeof(u->path), "%s", call.path);
	struct sandbox_record s = {0};
	if (fleet_get_live(d->fleet, ctx->store, call.id, true, &s, &u->resp) < 0) {
		u->failed = true;
		return u;
	}
	sandbox_record_release(&s);
	json_t *msg =
	    json_pack("{s:s, s:s, s:s}", "op", "open", "path", call.path, "mode", "write");
	json_t *reply = NULL;
	if (fleet_call(d->fleet, call.id, msg, -1, &reply, &u->fd, "file", &u->resp) < 0) {
		u->failed = true;
	} else {
		const char *t = json_string_value(json_object_get(reply, "temp"));
		if (!t || u->fd < 0) {
			api_error_response(&u->resp, API_ERR_INTERNAL, NULL, "internal error");
			u->failed = true;
		} else {
			snprintf(u->temp, sizeof(u->temp), "%s", t);
		}
	}
	json_decref(msg);
	json_decref(reply);
	return u;
}

bool upload_write(struct upload *u, const char *data, size_t len)
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

static void give_up_temp(struct upload *u)
{
	if (!u->temp[0])
		return;
	json_t *msg = json_pack("{s:s, s:s}", "op", "unlink", "path", u->temp), *reply = NULL;
	struct api_response ignored = {0};
	(void)fleet_call(u->d->fleet, u->id, msg, -1, &reply, NULL, "file", &ignored);
	api_response_release(&ignored);
	json_decref(msg);
	json_decref(reply);
	u->temp[0] = '\0';
}

enum MHD_Result upload_end(struct upload *u, struct MHD_Connection *c)
{
	if (!u->failed) {
		CLOSE_FD(u->fd);
		if (u->too_large) {
			give_up_temp(u);
			api_error_response(&u->resp, API_ERR_FILE_TOO_LARGE, NULL,
					   "the file is larger than %u bytes", API_FILE_MAX);
		} else if (u->write_errno) {
			give_up_temp(u);
			fleet_error_response(&u->resp, u->write_errno, NULL, "file");
		} else {
			json_t *msg = json_pack("{s:s, s:s, s:s}", "op", "rename", "from", u->temp,
						"to", u->path);
			json_t *reply = NULL;
			int r =
			    fleet_call(u->d->fleet, u->id, msg, -1, &reply, NULL, "file", &u->resp);
			json_decref(msg);
			json_decref(reply);
			if (r < 0) {
				give_up_temp(u);
			} else {
				u->temp[0] = '\0';
				sandbox_respond_json(&u->resp, 201,
						     json_pack("{s:s, s:I}", "path", u->path,
							       "size", (json_int_t)u->size));
			}
		}
	}
	return server_send(c, &u->resp);
}

void upload_free(struct upload *u)
{
	if (!u)
		return;
	CLOSE_FD(u->fd);
	give_up_temp(u);
	api_response_release(&u->resp);
	free(u);
}
