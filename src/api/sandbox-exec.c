/*
 * sandbox-exec.c - exec and the processes it started: the command run
 * through the fleet, its result in one piece (read from its output files
 * once the shim reports the exit) or as a stream the server serves,
 * background processes, their output, and kill.
 */
#include "api/api-internal.h"
#include "api/output.h"
#include "api/sandbox-request.h"
#include "api/terminal-get.h"
#include "base/json-cleanup.h"
#include "core/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Bytes of each stream an exec response carries; the rest stays in the files. */
#define EXEC_RESPONSE_OUTPUT_MAX (1024 * 1024)

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

/* The member key of the shim's exit record, or def (stolen) when it has none. */
static json_t *member_or(json_t *exit, const char *key, json_t *def)
{
	json_t *v = json_object_get(exit, key);
	if (!v)
		return def;
	json_decref(def);
	return json_incref(v);
}

json_t *api_exit_json(long pid, json_t *exit)
{
	return json_pack("{s:I, s:o, s:o, s:b, s:b, s:o, s:b}", "pid", (json_int_t)pid, "exit_code",
			 member_or(exit, "exit_code", json_null()), "signal",
			 member_or(exit, "signal", json_null()), "oom_killed",
			 json_is_true(json_object_get(exit, "oom_killed")), "timed_out",
			 json_is_true(json_object_get(exit, "timed_out")), "duration_ms",
			 member_or(exit, "duration_ms", json_integer(0)), "truncated",
			 json_is_true(json_object_get(exit, "truncated")));
}

/*
 * Up to max bytes of a process's output file as a JSON string (the text,
 * or its base64: *base64 says which, output.h); *more if longer.
 */
static json_t *read_output(struct api_call *c, long pid, const char *ext, size_t max, bool *more,
			   bool *base64)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	if (c->ctx->fleet_ops->read_output(c->ctx->fleet, c->id, pid, ext, max, &buf, &len, more) <
	    0)
		return NULL;
	if (*more) /* a character cut by the limit is left out whole */
		len = output_cut(buf, len);
	struct buf b = {0};
	output_put_json(&b, buf, len, base64);
	_cleanup_free_ char *text = NULL;
	size_t tlen;
	if (buf_steal(&b, &text, &tlen) < 0)
		return NULL;
	return json_loads(text, JSON_DECODE_ANY, NULL);
}

/*
 * The exec result: the exit, and up to EXEC_RESPONSE_OUTPUT_MAX of each
 * stream, with "stdout_encoding"/"stderr_encoding": "base64" for a stream
 * that is not text.
 */
static json_t *exec_result(struct api_call *c, long pid, json_t *exit)
{
	bool truncated = json_is_true(json_object_get(exit, "truncated"));
	bool out_b64 = false, err_b64 = false;
	_cleanup_json_ json_t *r = api_exit_json(pid, exit);
	_cleanup_json_ json_t *out =
	    read_output(c, pid, LAYOUT_PROC_OUT, EXEC_RESPONSE_OUTPUT_MAX, &truncated, &out_b64);
	_cleanup_json_ json_t *err =
	    read_output(c, pid, LAYOUT_PROC_ERR, EXEC_RESPONSE_OUTPUT_MAX, &truncated, &err_b64);
	if (!r || !out || !err || json_object_set(r, "stdout", out) < 0 ||
	    json_object_set(r, "stderr", err) < 0 ||
	    json_object_set_new(r, "truncated", json_boolean(truncated)) < 0 ||
	    (out_b64 && json_object_set_new(r, "stdout_encoding", json_string("base64")) < 0) ||
	    (err_b64 && json_object_set_new(r, "stderr_encoding", json_string("base64")) < 0))
		return NULL;
	return TAKE_PTR(r);
}

/* The result of a command that could not run, as the stream of one: stderr, then exit. */
static int respond_failed_stream(struct api_call *c, json_t *result)
{
	if (!result)
		return -ENOMEM;
	struct buf b = {0};
	buf_puts(&b, "event: stderr\ndata: {\"data\":");
	json_put(&b, json_object_get(result, "stderr"));
	buf_puts(&b, "}\n\nevent: exit\ndata: ");
	json_object_del(result, "stdout");
	json_object_del(result, "stderr");
	json_put(&b, result);
	buf_puts(&b, "\n\n");
	json_decref(result);
	return api_respond(c, 200, "text/event-stream", &b);
}

/* Hand the server a process stream on the shim connection fd (taken). */
static int respond_process_stream(struct api_call *c, int fd, long pid)
{
	struct api_response *res =
	    api_respond_kind(c, 200, "text/event-stream", API_RESPONSE_PROCESS_STREAM);
	res->fd = fd;
	res->process.pid = pid;
	res->process.ops = c->ctx->fleet_ops;
	res->process.fleet = c->ctx->fleet;
	snprintf(res->process.id, sizeof(res->process.id), "%s", c->id);
	return 0;
}

static bool wants_event_stream(const struct api_request *req)
{
	return req->accept && strstr(req->accept, "text/event-stream");
}

/*
 * The WebSocket handshake of a terminal (RFC 6455 4.2.1): Upgrade:
 * websocket, Connection: Upgrade, Sec-WebSocket-Version: 13 and a key
 * that is the base64 of 16 bytes; subprotocols, if any, that include
 * API_WS_PROTOCOL. A request with an Upgrade but no "tty" is refused
 * too: nothing else upgrades.
 */
static int check_handshake(const struct api_request *req, bool tty, struct api_error *e)
{
	bool upgrade = api_header_has_token(req->upgrade, "websocket");
	if (!tty && !req->upgrade)
		return 0;
	if (!tty)
		return api_error_set(e, API_ERR_BAD_HANDSHAKE, "tty",
				     "only an exec with \"tty\": true upgrades");
	if ((!upgrade || !api_header_has_token(req->connection, "upgrade")) &&
	    strcmp(req->method, "GET") == 0)
		return api_error_set(e, API_ERR_BAD_HANDSHAKE, NULL,
				     "a GET of exec is a terminal's WebSocket handshake (Upgrade: "
				     "websocket, Connection: Upgrade)");
	if (!upgrade || !api_header_has_token(req->connection, "upgrade"))
		return api_error_set(e, API_ERR_BAD_HANDSHAKE, "tty",
				     "\"tty\": true needs a WebSocket upgrade (Upgrade: websocket, "
				     "Connection: Upgrade)");
	if (!req->ws_version || strcmp(req->ws_version, "13") != 0)
		return api_error_set(e, API_ERR_BAD_HANDSHAKE, NULL,
				     "Sec-WebSocket-Version must be 13");
	if (!ws_key_is_valid(req->ws_key))
		return api_error_set(e, API_ERR_BAD_HANDSHAKE, NULL,
				     "Sec-WebSocket-Key must be the base64 of 16 bytes");
	bool echo;
	return api_ws_protocol_check(req, &echo, e);
}

/* Start x on a terminal and hand the server the upgrade (101, then the frames). */
static int exec_terminal(struct api_call *c, const struct fleet_ops *ops,
			 const struct exec_request *x)
{
	if (!ops->exec_tty)
		return api_error_internal(c->err, ENOSYS, "this fleet has no terminals");
	struct fleet_exec fx = {.command = x->command,
				.env = x->env,
				.cwd = x->cwd,
				.timeout_ms = x->timeout_ms,
				.rows = x->rows,
				.cols = x->cols};
	struct error err = {0};
	int fd = -1, master = -1;
	long pid = 0;
	int r = ops->exec_tty(c->ctx->fleet, c->id, &fx, &fd, &pid, &master, &err);
	if (r == -EREMOTEIO && exec_failure_code(err.code)) /* as without a terminal: no upgrade */
		return api_respond_json(c, 200, exec_failed_result(err.code, err.msg));
	if (r < 0)
		return api_fleet_error(c, r, &err, "exec");
	struct api_response *res = api_respond_kind(c, 101, API_TEXT, API_RESPONSE_TERMINAL);
	res->fd = fd;
	res->terminal.pid = pid;
	res->terminal.master = master;
	res->terminal.ops = ops;
	res->terminal.fleet = c->ctx->fleet;
	snprintf(res->terminal.id, sizeof(res->terminal.id), "%s", c->id);
	snprintf(res->terminal.key, sizeof(res->terminal.key), "%s", c->req->ws_key);
	res->terminal.protocol = c->req->ws_protocol != NULL; /* checked: it holds ours */
	return 0;
}

/* Run x (checked, its handshake too; released here): on a terminal, or as asked. */
static int exec_run(struct api_call *c, struct exec_request *xp)
{
	struct exec_request x = *xp;
	int r;
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops) {
		exec_request_release(&x);
		return -EIO;
	}
	struct sandbox_record s = {0};
	struct error err = {0};
	int fd = -1;
	long pid = 0;
	r = ops->get_live(c->ctx->fleet, c->ctx->store, c->id, true, &s, &err);
	sandbox_record_release(&s);
	if (r == 0 && x.tty) {
		r = exec_terminal(c, ops, &x);
		exec_request_release(&x);
		return r;
	}
	if (r == 0) {
		struct fleet_exec fx = {.command = x.command,
					.env = x.env,
					.cwd = x.cwd,
					.timeout_ms = x.timeout_ms,
					.stdin_data = x.stdin_data,
					.stdin_len = x.stdin_len};
		r = ops->exec_start(c->ctx->fleet, c->id, &fx, &fd, &pid, &err);
	}
	bool background = x.background;
	exec_request_release(&x);
	bool follow = wants_event_stream(c->req);
	if (r == -EREMOTEIO && exec_failure_code(err.code)) {
		/* the command itself could not run: an ended process, as a shell says */
		json_t *failed = exec_failed_result(err.code, err.msg);
		if (follow)
			return respond_failed_stream(c, failed);
		return api_respond_json(c, 200, failed);
	}
	if (r < 0)
		return api_fleet_error(c, r, &err, "exec");
	if (background) {
		ops->done(c->ctx->fleet, c->id, fd);
		return api_respond_json(c, 202, json_pack("{s:I}", "pid", (json_int_t)pid));
	}
	if (follow)
		return respond_process_stream(c, fd, pid);
	/* the command may run for as long as it likes: hold nothing shared meanwhile */
	if (c->ctx->store_release)
		c->ctx->store_release(c->ctx);
	json_t *exit = NULL;
	r = ops->exec_wait(c->ctx->fleet, fd, &exit, &err);
	ops->done(c->ctx->fleet, c->id, fd);
	if (r < 0)
		return api_fleet_error(c, r, &err, "exec");
	json_t *result = exec_result(c, pid, exit);
	json_decref(exit);
	return api_respond_json(c, 200, result);
}

int api_sandbox_exec(struct api_call *c)
{
	struct exec_request x = {0};
	int r = exec_request_parse(c->req->body, c->req->body_len, &x, c->err);
	if (r < 0)
		return r;
	if ((r = check_handshake(c->req, x.tty, c->err)) < 0) {
		exec_request_release(&x);
		return r;
	}
	return exec_run(c, &x);
}

/*
 * GET .../exec: a terminal's handshake whose query is the exec request
 * (terminal-get.h), from a page of an allowed origin if from a page at all.
 */
int api_sandbox_exec_get(struct api_call *c)
{
	int r = api_origin_check(c->ctx, c->req, c->err);
	if (r < 0)
		return r;
	/* the handshake first: a GET of exec is nothing else */
	if ((r = check_handshake(c->req, true, c->err)) < 0)
		return r;
	struct exec_request x = {0};
	if ((r = exec_request_from_query(c->req->query, &x, c->err)) < 0)
		return r;
	return exec_run(c, &x);
}

int api_sandbox_processes(struct api_call *c)
{
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops)
		return -EIO;
	int r = api_sandbox_live(c, ops, false);
	if (r < 0)
		return r;
	json_t *procs = NULL;
	struct error err = {0};
	if ((r = ops->processes(c->ctx->fleet, c->id, &procs, &err)) < 0)
		return api_fleet_error(c, r, &err, "process");
	json_t *list = json_array(), *p;
	size_t i;
	json_array_foreach(procs, i, p)
	{
		json_t *o = json_pack(
		    "{s:O, s:o, s:b, s:O, s:O, s:o, s:o}", "pid", json_object_get(p, "pid"),
		    "command", json_incref(json_object_get(p, "command")) ?: json_array(),
		    "running", json_is_true(json_object_get(p, "running")), "exit_code",
		    json_object_get(p, "exit_code") ?: json_null(), "signal",
		    json_object_get(p, "signal") ?: json_null(), "started_at",
		    api_time_json(json_integer_value(json_object_get(p, "started_at"))), "ended_at",
		    api_time_json(json_integer_value(json_object_get(p, "ended_at"))));
		if (o)
			json_array_append_new(list, o);
	}
	json_decref(procs);
	return api_respond_json(c, 200, json_pack("{s:o}", "processes", list));
}

int api_process_output(struct api_call *c)
{
	bool follow = false;
	int r = api_query_flag(c->query, "follow", &follow, c->err);
	const struct fleet_ops *ops = r < 0 ? NULL : api_fleet(c);
	if (!ops)
		return r < 0 ? r : -EIO;
	if ((r = api_sandbox_live(c, ops, false)) < 0)
		return r;
	json_t *exit = NULL;
	if ((r = ops->exit_record(c->ctx->fleet, c->id, c->pid, &exit)) == -ENOENT)
		return api_error_set(c->err, API_ERR_PROCESS_NOT_FOUND, NULL,
				     "no process %ld in this sandbox (or its record is gone)",
				     c->pid);
	if (r < 0)
		return api_error_internal(c->err, -r, "the process's exit record");
	if (follow) {
		json_decref(exit);
		struct error err = {0};
		int fd = -1;
		if ((r = ops->watch(c->ctx->fleet, c->id, c->pid, &fd, &err)) < 0)
			return api_fleet_error(c, r, &err, "process");
		return respond_process_stream(c, fd, c->pid);
	}
	json_t *res = exec_result(c, c->pid, exit);
	json_t *out = NULL;
	if (res) {
		/* the output beside the exit object, which is the result without it */
		out = json_pack("{s:I, s:b, s:O, s:O}", "pid", (json_int_t)c->pid, "running",
				exit == NULL, "stdout", json_object_get(res, "stdout"), "stderr",
				json_object_get(res, "stderr"));
		static const char *const moved[] = {"stdout", "stderr", "stdout_encoding",
						    "stderr_encoding"};
		for (size_t i = 0; out && i < sizeof(moved) / sizeof(moved[0]); i++) {
			json_t *v = json_object_get(res, moved[i]);
			if (v && i >= 2)
				json_object_set(out, moved[i], v);
			json_object_del(res, moved[i]);
		}
		if (out &&
		    (json_object_set(out, "truncated", json_object_get(res, "truncated")) < 0 ||
		     json_object_set(out, "exit", exit ? res : json_null()) < 0)) {
			json_decref(out);
			out = NULL;
		}
	}
	json_decref(res);
	json_decref(exit);
	return api_respond_json(c, 200, out);
}

int api_process_kill(struct api_call *c)
{
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops)
		return -EIO;
	int r = api_sandbox_live(c, ops, true);
	if (r < 0)
		return r;
	int sig = 9;
	if ((r = process_kill_parse(c->req->body, c->req->body_len, &sig, c->err)) < 0)
		return r;
	struct error err = {0};
	if ((r = ops->kill(c->ctx->fleet, c->id, c->pid, sig, &err)) < 0)
		return api_fleet_error(c, r, &err, "process");
	return api_respond_json(c, 200,
				json_pack("{s:I, s:i}", "pid", (json_int_t)c->pid, "signal", sig));
}
