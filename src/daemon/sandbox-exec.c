/*
 * sandbox-exec.c - exec and the processes it started: the request to the
 * shim, the result in one piece (read from the output files once the
 * shim reports the exit), background processes, their output and kill.
 * Streams are in sandbox-stream.c.
 */
#include "daemon/sandbox-internal.h"

#include "api/json-util.h"
#include "api/sandbox-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "daemon/fleet.h"
#include "shim/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
	snprintf(text, sizeof(text), "agentbox: %s\n",
		 message && *message ? message : strerror(errnum));
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
	json_t *msg =
	    env ? json_pack("{s:s, s:O, s:o, s:s, s:I}", "op", "exec", "command", x->command, "env",
			    env, "cwd", x->cwd, "timeout_ms", (json_int_t)x->timeout_ms)
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
/* The member key of the shim's exit record, or def (stolen) when it has none. */
static json_t *member_or(json_t *exit, const char *key, json_t *def)
{
	json_t *v = json_object_get(exit, key);
	if (!v)
		return def;
	json_decref(def);
	return json_incref(v);
}

json_t *sandbox_exit_json(long pid, json_t *exit)
{
	return json_pack("{s:I, s:o, s:o, s:b, s:b, s:o, s:b}", "pid", (json_int_t)pid, "exit_code",
			 member_or(exit, "exit_code", json_null()), "signal",
			 member_or(exit, "signal", json_null()), "oom_killed",
			 json_is_true(json_object_get(exit, "oom_killed")), "timed_out",
			 json_is_true(json_object_get(exit, "timed_out")), "duration_ms",
			 member_or(exit, "duration_ms", json_integer(0)), "truncated",
			 json_is_true(json_object_get(exit, "truncated")));
}

/* The exec result: the exit, and up to EXEC_RESPONSE_OUTPUT_MAX of each stream. */
static json_t *exec_result(struct daemon *d, const char *id, long pid, json_t *exit)
{
	bool truncated = json_is_true(json_object_get(exit, "truncated"));
	json_t *r = sandbox_exit_json(pid, exit);
	json_t *out = read_output(d, id, pid, "out", EXEC_RESPONSE_OUTPUT_MAX, &truncated);
	json_t *err = read_output(d, id, pid, "err", EXEC_RESPONSE_OUTPUT_MAX, &truncated);
	if (!r || !out || !err || json_object_set_new(r, "stdout", out) < 0 ||
	    json_object_set_new(r, "stderr", err) < 0 ||
	    json_object_set_new(r, "truncated", json_boolean(truncated)) < 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

enum MHD_Result sandbox_exec(struct daemon *d, struct MHD_Connection *c, struct store *st,
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
		sandbox_respond_json(resp, 200, failed);
		return server_send(c, resp);
	}
	if (background) {
		close(fd);
		sandbox_respond_json(resp, 202, json_pack("{s:I}", "pid", (json_int_t)pid));
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
	sandbox_respond_json(resp, 200, exec_result(d, call->id, pid, exit));
	json_decref(exit);
	return server_send(c, resp);
}

/* ---- processes ------------------------------------------------------------ */

void sandbox_processes(struct daemon *d, const struct api_sandbox_call *call,
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
		json_t *o = json_pack(
		    "{s:O, s:O, s:b, s:O, s:O, s:o, s:o}", "pid", json_object_get(p, "pid"),
		    "command", json_object_get(p, "command") ?: json_array(), "running",
		    json_is_true(json_object_get(p, "running")), "exit_code",
		    json_object_get(p, "exit_code") ?: json_null(), "signal",
		    json_object_get(p, "signal") ?: json_null(), "started_at",
		    api_time_json(json_integer_value(json_object_get(p, "started_at"))), "ended_at",
		    api_time_json(json_integer_value(json_object_get(p, "ended_at"))));
		if (o)
			json_array_append_new(list, o);
	}
	json_decref(reply);
	sandbox_respond_json(resp, 200, json_pack("{s:o}", "processes", list));
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

enum MHD_Result sandbox_process_output(struct daemon *d, struct MHD_Connection *c,
				       const struct api_sandbox_call *call,
				       struct api_response *resp)
{
	bool known = false;
	json_t *exit = exit_record(d, call->id, call->pid, &known);
	if (!known) {
		api_error_response(resp, API_ERR_PROCESS_NOT_FOUND, NULL,
				   "no process %ld in this sandbox (or its record is gone)",
				   call->pid);
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
	json_t *r = exec_result(d, call->id, call->pid, exit);
	json_t *out = NULL;
	if (r) {
		/* the output beside the exit object, which is the result without it */
		json_t *o = json_incref(json_object_get(r, "stdout"));
		json_t *e = json_incref(json_object_get(r, "stderr"));
		json_object_del(r, "stdout");
		json_object_del(r, "stderr");
		out = json_pack("{s:I, s:b, s:o, s:o, s:O, s:O}", "pid", (json_int_t)call->pid,
				"running", exit == NULL, "stdout", o, "stderr", e, "truncated",
				json_object_get(r, "truncated"), "exit", exit ? r : json_null());
	}
	json_decref(r);
	json_decref(exit);
	sandbox_respond_json(resp, 200, out);
	return server_send(c, resp);
}

void sandbox_process_kill(struct daemon *d, const struct api_sandbox_call *call,
			  const struct api_request *req, struct api_response *resp)
{
	int sig = 9;
	struct api_error e = {0};
	if (process_kill_parse(req->body, req->body_len, &sig, &e) < 0) {
		api_error_respond(&e, resp);
		return;
	}
	json_t *msg =
	    json_pack("{s:s, s:I, s:i}", "op", "kill", "pid", (json_int_t)call->pid, "signal", sig);
	json_t *reply = NULL;
	int r = fleet_call(d->fleet, call->id, msg, -1, &reply, NULL, "process", resp);
	json_decref(msg);
	json_decref(reply);
	if (r == 0)
		sandbox_respond_json(
		    resp, 200,
		    json_pack("{s:I, s:i}", "pid", (json_int_t)call->pid, "signal", sig));
}
