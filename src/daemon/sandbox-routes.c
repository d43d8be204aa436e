/*
 * sandbox-routes.c - the /v1/sandboxes routes (sandbox-routes.h).
 */
#include "daemon/sandbox-routes.h"

#include "api/json-util.h"
#include "api/sandbox-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "daemon/fleet.h"
#include "shim/client.h"
#include "shim/protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bytes of each stream an exec response carries; the rest stays in the files. */
#define EXEC_RESPONSE_OUTPUT_MAX (1024 * 1024)
/* Entries a directory listing shows at most. */
#define LIST_ENTRIES_MAX 10000

static void time_string(int64_t ms, char buf[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static json_t *json_time(int64_t ms)
{
	if (ms <= 0)
		return json_null();
	char buf[32];
	time_string(ms, buf);
	return json_string(buf);
}

static void respond_json(struct api_response *resp, int status, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	api_json_response(resp, status, text);
}

static void respond_sandbox(struct api_response *resp, struct store *st, const char *id, int status)
{
	struct sandbox_record s = {0};
	struct error err = {0};
	if (store_sandbox_get(st, id, &s, &err) < 0) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "store: %s", err.msg);
		return;
	}
	api_json_response(resp, status, api_sandbox_json(&s));
	sandbox_record_release(&s);
}

/* ---- list --------------------------------------------------------------- */

struct list_ctx {
	json_t *items;
	char last[SANDBOX_ID_SIZE];
	size_t n;
};

static int list_one(const struct sandbox_record *s, void *data)
{
	struct list_ctx *l = data;
	char *text = api_sandbox_json(s);
	json_t *v = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	if (!v || json_array_append_new(l->items, v) < 0)
		return -ENOMEM;
	snprintf(l->last, sizeof(l->last), "%s", s->id);
	l->n++;
	return 0;
}

static void list_sandboxes(struct store *st, const struct api_sandbox_call *call,
			   struct api_response *resp)
{
	uint32_t statuses = SANDBOX_STATUS_BIT(SANDBOX_RUNNING) | SANDBOX_STATUS_BIT(SANDBOX_PAUSED);
	if (call->status[0]) {
		statuses = 0;
		char buf[sizeof(call->status)];
		snprintf(buf, sizeof(buf), "%s", call->status);
		char *save = NULL;
		for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			enum sandbox_status s;
			if (sandbox_status_parse(tok, &s) < 0 || s == SANDBOX_POOLED) {
				api_error_response(resp, API_ERR_INVALID_FIELD, "status",
						   "status must be running, paused or ended, "
						   "comma-separated");
				return;
			}
			statuses |= SANDBOX_STATUS_BIT(s);
		}
	}
	struct list_ctx l = {.items = json_array()};
	struct sandbox_filter f = {.statuses = statuses,
				   .after_id = call->after[0] ? call->after : NULL,
				   .limit = (size_t)call->limit};
	struct error err = {0};
	int r = l.items ? store_sandbox_list(st, &f, list_one, &l, &err) : -ENOMEM;
	if (r == -ENOENT) {
		json_decref(l.items);
		api_error_response(resp, API_ERR_INVALID_FIELD, "after", "no sandbox %s", call->after);
		return;
	}
	if (r < 0) {
		json_decref(l.items);
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "store: %s", err.msg);
		return;
	}
	respond_json(resp, 200,
		     json_pack("{s:o, s:o}", "sandboxes", l.items, "next",
			       l.n == (size_t)call->limit ? json_string(l.last) : json_null()));
}

/* ---- exec ---------------------------------------------------------------- */

/* A memfd holding the exec's stdin, or -1 when there is none. */
static int stdin_fd(const struct exec_request *x)
{
	if (!x->stdin_data)
		return -1;
	int fd = memfd_create("agentbox-stdin", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write_all(fd, x->stdin_data, x->stdin_len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The exit code of a command that could not be executed, by the errno of
 * its exec: 127 not found, 126 found but not runnable; 0 for an errno
 * that is about the request or the sandbox, not the command.
 */
static int exec_failure_code(int errnum)
{
	switch (errnum) {
	case ENOENT:
		return 127;
	case EACCES:
	case ENOEXEC:
	case EISDIR:
	case ENOTDIR:
	case ETXTBSY:
	case ELOOP:
	case ENAMETOOLONG:
		return 126;
	default:
		return 0;
	}
}

/* The finished result of a command that could not be executed. */
static json_t *exec_failed_result(int errnum, const char *message)
{
	char text[ERROR_MSG_MAX + 16];
	snprintf(text, sizeof(text), "agentbox: %s\n", message && *message ? message : strerror(errnum));
	return json_pack("{s:n, s:i, s:n, s:s, s:s, s:b, s:b, s:i, s:b}", "pid", "exit_code",
			 exec_failure_code(errnum), "signal", "stdout", "", "stderr", text,
			 "oom_killed", 0, "timed_out", 0, "duration_ms", 0, "truncated", 0);
}

/*
 * Start an exec: the connection to the shim (its replies follow), and the
 * pid. When the command could not be executed at all, *ret_fd is -1,
 * *ret_pid the errno and resp->log the message (exec_failed_result()).
 */
static int exec_start(struct daemon *d, const char *id, const struct exec_request *x, int *ret_fd,
		      long *ret_pid, struct api_response *resp)
{
	char dir[4200];
	fleet_dir(d->fleet, id, dir, sizeof(dir));
	json_t *env = fleet_exec_env(d->fleet, id, x->env);
	json_t *msg = env ? json_pack("{s:s, s:O, s:o, s:s, s:I}", "op", "exec", "command", x->command,
				      "env", env, "cwd", x->cwd, "timeout_ms",
				      (json_int_t)x->timeout_ms)
			  : NULL;
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (!text) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		return -ENOMEM;
	}
	_cleanup_close_ int in = stdin_fd(x);
	if (x->stdin_data && in < 0) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "memfd for stdin: %s", strerror(errno));
		return -EIO;
	}
	struct error err = {0};
	_cleanup_close_ int fd = -1;
	int r = shim_connect(dir, &fd, &err);
	if (r == 0)
		r = shim_send(fd, text, in, &err);
	json_t *reply = NULL;
	if (r == 0)
		r = shim_recv(fd, 30000, &reply, NULL, &err);
	if (r < 0) {
		if (exec_failure_code(-r)) {
			/* the command itself could not run: an ended process, as a shell says */
			*ret_fd = -1;
			*ret_pid = -r;
			snprintf(resp->log, sizeof(resp->log), "%s", err.msg);
			return 0;
		}
		fleet_error_response(resp, -r, err.msg, "exec");
		return -EINVAL;
	}
	json_t *pid = json_object_get(reply, "pid");
	if (!json_is_integer(pid)) {
		json_decref(reply);
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "shim: exec reply without a pid");
		return -EIO;
	}
	*ret_pid = (long)json_integer_value(pid);
	json_decref(reply);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Up to max bytes of file name in the sandbox's procs/ as a JSON string; *more if longer. */
static json_t *read_output(struct daemon *d, const char *id, long pid, const char *ext, size_t max,
			   bool *more)
{
	char path[4400];
	fleet_dir(d->fleet, id, path, sizeof(path) - 64);
	size_t n = strlen(path);
	snprintf(path + n, sizeof(path) - n, "/procs/%ld.%s", pid, ext);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return json_string("");
	size_t len = (size_t)st.st_size < max ? (size_t)st.st_size : max;
	if ((size_t)st.st_size > max)
		*more = true;
	_cleanup_free_ char *buf = malloc(len + 1);
	ssize_t got = buf ? pread(fd, buf, len, 0) : -1;
	if (got < 0)
		return NULL;
	/* invalid UTF-8 becomes U+FFFD, as everywhere in the API */
	struct jbuf b = {0};
	jbuf_str(&b, buf, (size_t)got);
	char *text = NULL;
	size_t tlen;
	if (jbuf_finish(&b, &text, &tlen) < 0)
		return NULL;
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	free(text);
	return v;
}

/* The exec result of the API from the shim's exit record. */
static json_t *exec_result(struct daemon *d, const char *id, long pid, json_t *exit,
			   bool with_output)
{
	bool truncated = json_is_true(json_object_get(exit, "truncated"));
	json_t *r = json_pack("{s:I, s:O, s:O, s:b, s:b, s:O}", "pid", (json_int_t)pid, "exit_code",
			      json_object_get(exit, "exit_code") ?: json_null(), "signal",
			      json_object_get(exit, "signal") ?: json_null(), "oom_killed",
			      json_is_true(json_object_get(exit, "oom_killed")), "timed_out",
			      json_is_true(json_object_get(exit, "timed_out")), "duration_ms",
			      json_object_get(exit, "duration_ms") ?: json_integer(0));
	if (r && with_output) {
		json_t *out = read_output(d, id, pid, "out", EXEC_RESPONSE_OUTPUT_MAX, &truncated);
		json_t *err = read_output(d, id, pid, "err", EXEC_RESPONSE_OUTPUT_MAX, &truncated);
		if (!out || !err || json_object_set_new(r, "stdout", out) < 0 ||
		    json_object_set_new(r, "stderr", err) < 0) {
			json_decref(r);
			return NULL;
		}
	}
	if (r && json_object_set_new(r, "truncated", json_boolean(truncated)) < 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static enum MHD_Result exec(struct daemon *d, struct MHD_Connection *c, struct store *st,
			    const struct api_sandbox_call *call, const struct api_request *req,
			    struct api_response *resp)
{
	struct exec_request x = {0};
	struct api_error e = {0};
	if (exec_request_parse(req->body, req->body_len, &x, &e) < 0) {
		api_error_respond(&e, resp);
		return server_send(c, resp);
	}
	struct sandbox_record s = {0};
	int fd = -1;
	long pid = 0;
	int r = fleet_get_live(d->fleet, st, call->id, true, &s, resp);
	sandbox_record_release(&s);
	if (r == 0)
		r = exec_start(d, call->id, &x, &fd, &pid, resp);
	bool background = x.background;
	exec_request_release(&x);
	if (r < 0)
		return server_send(c, resp);
	if (fd < 0) {
		json_t *failed = exec_failed_result((int)pid, resp->log);
		resp->log[0] = '\0';
		if (call->follow)
			return sandbox_stream_failed(c, failed);
		respond_json(resp, 200, failed);
		return server_send(c, resp);
	}
	if (background) {
		close(fd);
		respond_json(resp, 202, json_pack("{s:I}", "pid", (json_int_t)pid));
		return server_send(c, resp);
	}
	if (call->follow)
		return sandbox_stream_start(d, c, call->id, fd, pid, true);
	/* wait for the end; output notices are not needed: the files hold it all */
	json_t *exit = NULL;
	struct error err = {0};
	for (;;) {
		json_t *m = NULL;
		r = shim_recv(fd, -1, &m, NULL, &err);
		if (r < 0)
			break;
		if (strcmp(json_string_value(json_object_get(m, "type")) ?: "", "exit") == 0) {
			exit = m;
			break;
		}
		json_decref(m);
	}
	close(fd);
	if (!exit) {
		fleet_error_response(resp, -r, err.msg, "exec");
		return server_send(c, resp);
	}
	respond_json(resp, 200, exec_result(d, call->id, pid, exit, true));
	json_decref(exit);
	return server_send(c, resp);
}

/* ---- processes ------------------------------------------------------------ */

static void processes(struct daemon *d, const struct api_sandbox_call *call,
		      struct api_response *resp)
{
	json_t *msg = json_pack("{s:s}", "op", "processes"), *reply = NULL;
	int r = fleet_call(d->fleet, call->id, msg, -1, &reply, NULL, "process", resp);
	json_decref(msg);
	if (r < 0)
		return;
	json_t *list = json_array(), *p;
	size_t i;
	json_array_foreach(json_object_get(reply, "processes"), i, p)
	{
		json_t *o = json_pack("{s:O, s:O, s:b, s:O, s:O, s:o, s:o}", "pid",
				      json_object_get(p, "pid"), "command",
				      json_object_get(p, "command") ?: json_array(), "running",
				      json_is_true(json_object_get(p, "running")), "exit_code",
				      json_object_get(p, "exit_code") ?: json_null(), "signal",
				      json_object_get(p, "signal") ?: json_null(), "started_at",
				      json_time(json_integer_value(json_object_get(p, "started_at"))),
				      "ended_at",
				      json_time(json_integer_value(json_object_get(p, "ended_at"))));
		if (o)
			json_array_append_new(list, o);
	}
	json_decref(reply);
	respond_json(resp, 200, json_pack("{s:o}", "processes", list));
}

/* The exit record procs/<pid>.json, or NULL while it runs (or is unknown). */
static json_t *exit_record(struct daemon *d, const char *id, long pid, bool *known)
{
	char path[4400];
	fleet_dir(d->fleet, id, path, sizeof(path) - 64);
	size_t n = strlen(path);
	snprintf(path + n, sizeof(path) - n, "/procs/%ld.json", pid);
	json_t *j = json_load_file(path, 0, NULL);
	snprintf(path + n, sizeof(path) - n, "/procs/%ld.out", pid);
	*known = j || access(path, F_OK) == 0;
	return j;
}

static enum MHD_Result process_output(struct daemon *d, struct MHD_Connection *c,
				      const struct api_sandbox_call *call, struct api_response *resp)
{
	bool known = false;
	json_t *exit = exit_record(d, call->id, call->pid, &known);
	if (!known) {
		api_error_response(resp, API_ERR_PROCESS_NOT_FOUND, NULL,
				   "no process %ld in this sandbox (or its record is gone)", call->pid);
		return server_send(c, resp);
	}
	if (call->follow) {
		json_decref(exit);
		char dir[4200];
		fleet_dir(d->fleet, call->id, dir, sizeof(dir));
		struct error err = {0};
		int fd = -1;
		json_t *msg = json_pack("{s:s, s:I}", "op", "watch", "pid", (json_int_t)call->pid);
		_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
		json_decref(msg);
		int r = text ? shim_connect(dir, &fd, &err) : -ENOMEM;
		if (r == 0 && (r = shim_send(fd, text, -1, &err)) < 0)
			close(fd);
		if (r < 0) {
			fleet_error_response(resp, -r, err.msg, "process");
			return server_send(c, resp);
		}
		return sandbox_stream_start(d, c, call->id, fd, call->pid, false);
	}
	json_t *r = exec_result(d, call->id, call->pid, exit ? exit : json_object(), true);
	bool truncated = json_is_true(json_object_get(r, "truncated"));
	json_t *out = r ? json_pack("{s:I, s:b, s:O, s:O, s:b, s:o}", "pid", (json_int_t)call->pid,
				    "running", exit == NULL, "stdout", json_object_get(r, "stdout"),
				    "stderr", json_object_get(r, "stderr"), "truncated", truncated,
				    "exit", exit ? json_incref(r) : json_null())
			: NULL;
	if (exit && out) {
		json_t *ex = json_object_get(out, "exit");
		json_object_del(ex, "stdout");
		json_object_del(ex, "stderr");
	}
	json_decref(r);
	json_decref(exit);
	respond_json(resp, 200, out);
	return server_send(c, resp);
}

static void process_kill(struct daemon *d, const struct api_sandbox_call *call,
			 const struct api_request *req, struct api_response *resp)
{
	int sig = 9;
	struct api_error e = {0};
	if (process_kill_parse(req->body, req->body_len, &sig, &e) < 0) {
		api_error_respond(&e, resp);
		return;
	}
	json_t *msg = json_pack("{s:s, s:I, s:i}", "op", "kill", "pid", (json_int_t)call->pid,
				"signal", sig);
	json_t *reply = NULL;
	int r = fleet_call(d->fleet, call->id, msg, -1, &reply, NULL, "process", resp);
	json_decref(msg);
	json_decref(reply);
	if (r == 0)
		respond_json(resp, 200, json_pack("{s:I, s:i}", "pid", (json_int_t)call->pid, "signal", sig));
}

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
				      json_time((int64_t)st.st_mtim.tv_sec * 1000 +
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
	respond_json(resp, 200, out);
}

static enum MHD_Result files_get(struct daemon *d, struct MHD_Connection *c,
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

static void files_delete(struct daemon *d, const struct api_sandbox_call *call,
			 struct api_response *resp)
{
	json_t *msg = json_pack("{s:s, s:s}", "op", "unlink", "path", call->path), *reply = NULL;
	int r = fleet_call(d->fleet, call->id, msg, -1, &reply, NULL, "file", resp);
	json_decref(msg);
	json_decref(reply);
	if (r == 0)
		respond_json(resp, 200, json_pack("{s:s, s:b}", "path", call->path, "deleted", 1));
}

struct upload {
	struct daemon *d;
	struct api_response resp; /* an error found before or during the body */
	bool failed;
	char id[SANDBOX_ID_SIZE];
	char path[1025];
	char temp[1100];
	int fd;
	uint64_t size;
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
	json_t *msg = json_pack("{s:s, s:s, s:s}", "op", "open", "path", call.path, "mode", "write");
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

bool upload_failed(const struct upload *u)
{
	return u->failed;
}

void upload_write(struct upload *u, const char *data, size_t len)
{
	if (u->failed || u->too_large || u->write_errno)
		return; /* the rest of the body is read and dropped */
	if (u->size + len > API_FILE_MAX) {
		u->too_large = true;
		return;
	}
	int r = write_all(u->fd, data, len);
	if (r < 0)
		u->write_errno = -r;
	u->size += len;
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
			int r = fleet_call(u->d->fleet, u->id, msg, -1, &reply, NULL, "file", &u->resp);
			json_decref(msg);
			json_decref(reply);
			if (r < 0) {
				give_up_temp(u);
			} else {
				u->temp[0] = '\0';
				respond_json(&u->resp, 201,
					     json_pack("{s:s, s:I}", "path", u->path, "size",
						       (json_int_t)u->size));
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

/* ---- dispatch ------------------------------------------------------------- */

enum MHD_Result sandbox_serve(struct daemon *d, struct MHD_Connection *c, struct api_ctx *ctx,
			      const struct api_request *req)
{
	struct api_response resp = {0};
	struct api_sandbox_call call;
	enum MHD_Result ok;
	struct store *st = ctx->store;
	struct api_error e = {0};
	if (api_sandbox_begin(ctx, req, &call, &resp) < 0) {
		ok = server_send(c, &resp);
		api_response_release(&resp);
		return ok;
	}
	switch (call.route) {
	case API_ROUTE_SANDBOXES_LIST:
		list_sandboxes(st, &call, &resp);
		break;
	case API_ROUTE_SANDBOXES_CREATE: {
		struct sandbox_request sr = {0};
		struct sandbox_record s = {0};
		if (sandbox_request_parse(req->body, req->body_len, &sr, &e) < 0) {
			api_error_respond(&e, &resp);
			break;
		}
		if (fleet_create(d->fleet, st, &sr, call.now, &s, &resp) == 0) {
			api_json_response(&resp, 201, api_sandbox_json(&s));
			sandbox_record_release(&s);
		}
		sandbox_request_release(&sr);
		break;
	}
	case API_ROUTE_SANDBOX_GET: {
		struct sandbox_record s = {0};
		struct error err = {0};
		int r = store_sandbox_get(st, call.id, &s, &err);
		if (r == 0 && s.status != SANDBOX_POOLED)
			api_json_response(&resp, 200, api_sandbox_json(&s));
		else if (r == 0 || r == -ENOENT)
			api_error_response(&resp, API_ERR_NOT_FOUND, NULL, "no sandbox %s", call.id);
		else
			api_error_response(&resp, API_ERR_INTERNAL, NULL, "internal error");
		sandbox_record_release(&s);
		break;
	}
	case API_ROUTE_SANDBOX_DELETE:
		if (fleet_delete(d->fleet, st, call.id, &resp) == 0)
			respond_sandbox(&resp, st, call.id, 200);
		break;
	case API_ROUTE_SANDBOX_TIMEOUT: {
		int64_t ms = 0;
		if (sandbox_timeout_parse(req->body, req->body_len, &ms, &e) < 0)
			api_error_respond(&e, &resp);
		else if (fleet_set_expiry(d->fleet, st, call.id, call.now + ms, &resp) == 0)
			respond_sandbox(&resp, st, call.id, 200);
		break;
	}
	case API_ROUTE_SANDBOX_PAUSE:
	case API_ROUTE_SANDBOX_RESUME:
		if (fleet_pause(d->fleet, st, call.id, call.route == API_ROUTE_SANDBOX_PAUSE, &resp) == 0)
			respond_sandbox(&resp, st, call.id, 200);
		break;
	case API_ROUTE_SANDBOX_EXEC:
		ok = exec(d, c, st, &call, req, &resp);
		api_response_release(&resp);
		return ok;
	case API_ROUTE_SANDBOX_PROCESSES:
	case API_ROUTE_PROCESS_OUTPUT:
	case API_ROUTE_PROCESS_KILL:
	case API_ROUTE_FILES_GET:
	case API_ROUTE_FILES_DELETE: {
		struct sandbox_record s = {0};
		bool running = call.route != API_ROUTE_SANDBOX_PROCESSES &&
			       call.route != API_ROUTE_PROCESS_OUTPUT;
		if (fleet_get_live(d->fleet, st, call.id, running, &s, &resp) < 0)
			break;
		sandbox_record_release(&s);
		if (call.route == API_ROUTE_SANDBOX_PROCESSES)
			processes(d, &call, &resp);
		else if (call.route == API_ROUTE_PROCESS_KILL)
			process_kill(d, &call, req, &resp);
		else if (call.route == API_ROUTE_FILES_DELETE)
			files_delete(d, &call, &resp);
		else {
			ok = call.route == API_ROUTE_FILES_GET ? files_get(d, c, &call, &resp)
							       : process_output(d, c, &call, &resp);
			api_response_release(&resp);
			return ok;
		}
		break;
	}
	default:
		api_error_response(&resp, API_ERR_NOT_FOUND, NULL, "no such route");
	}
	ok = server_send(c, &resp);
	api_response_release(&resp);
	return ok;
}
