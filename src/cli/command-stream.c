/*
 * command-stream.c - a command's output as it comes (command-stream.h):
 * the Server-Sent Events of POST /v1/sandboxes/ID/exec and of GET
 * .../processes/PID/output?follow=1, or a whole JSON answer.
 */
#include "cli/command-stream.h"

#include "base/base64.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "client/sse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* A whole JSON answer, when the daemon does not stream (two 1 MiB outputs, escaped). */
#define EXEC_ANSWER_MAX (16u << 20)

/* ---- the command's output, as it comes ----------------------------------- */

struct runner {
	struct sse_parser sse;
	bool started;	   /* the body began: its kind is known */
	bool streaming;	   /* text/event-stream; else a JSON answer, buffered */
	struct buf answer; /* the JSON answer so far, up to EXEC_ANSWER_MAX */
	int64_t pid;	   /* from the start event; -1 before */
	json_t *exit;
	struct error fatal; /* set: what went wrong, when it was not the connection */
};

static int set_fatal(struct runner *rn, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int set_fatal(struct runner *rn, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rn->fatal.msg, sizeof(rn->fatal.msg), fmt, ap);
	va_end(ap);
	rn->fatal.code = code;
	return -code;
}

/*
 * Write output that came as a JSON string to fd: the text itself, or, when
 * encoding is "base64", the bytes it encodes (docs/api.md). 0 or -errno.
 */
int cli_write_output(int fd, const json_t *text, const json_t *encoding)
{
	const char *enc = json_string_value(encoding);
	if (!enc)
		return write_all(fd, json_string_value(text), json_string_length(text));
	if (strcmp(enc, "base64") != 0)
		return -EPROTO;
	_cleanup_buf_ struct buf bytes = {0};
	int r = base64_decode(&bytes, json_string_value(text), json_string_length(text));
	return r < 0 ? (r == -EINVAL ? -EPROTO : r) : write_all(fd, bytes.data, bytes.len);
}

/* Copy one output event's bytes to fd. */
static int copy_output(struct runner *rn, int fd, const json_t *data)
{
	json_t *text = json_object_get(data, "data");
	if (!json_is_string(text))
		return set_fatal(rn, EPROTO, "agentboxd sent an output event without data");
	int r = cli_write_output(fd, text, json_object_get(data, "encoding"));
	if (r == -EPROTO)
		return set_fatal(rn, EPROTO, "agentboxd sent output in an encoding unknown here");
	if (r < 0)
		return set_fatal(rn, -r, "writing the command's %s: %s",
				 fd == STDOUT_FILENO ? "stdout" : "stderr", strerror(-r));
	return 0;
}

static int on_event(const struct sse_event *ev, void *data)
{
	struct runner *rn = data;
	_cleanup_json_ json_t *d = json_loadb(ev->data, ev->data_len, 0, NULL);
	if (!json_is_object(d))
		return set_fatal(rn, EPROTO, "agentboxd sent a %.32s event that is not JSON",
				 ev->type);
	int r = 0;
	if (strcmp(ev->type, "stdout") == 0) {
		r = copy_output(rn, STDOUT_FILENO, d);
	} else if (strcmp(ev->type, "stderr") == 0) {
		r = copy_output(rn, STDERR_FILENO, d);
	} else if (strcmp(ev->type, "start") == 0) {
		json_t *pid = json_object_get(d, "pid");
		if (json_is_integer(pid))
			rn->pid = json_integer_value(pid);
	} else if (strcmp(ev->type, "exit") == 0) {
		rn->exit = json_incref(d);
		r = 1; /* the end: nothing comes after it */
	} else if (strcmp(ev->type, "error") == 0) {
		json_t *e = json_object_get(d, "error");
		const char *msg = json_string_value(json_object_get(e, "message"));
		const char *code = json_string_value(json_object_get(e, "code"));
		r = set_fatal(rn, EREMOTEIO, "%.300s (%.64s)", msg ? msg : "agentboxd failed",
			      code ? code : "internal");
	}
	/* other events: not ours to know yet, skipped */
	return r;
}

static int on_body(const struct http_response *res, const char *buf, size_t len, void *data,
		   struct error *err)
{
	struct runner *rn = data;
	if (!rn->started) {
		const char *type = http_response_header(res, "Content-Type");
		rn->started = true;
		if (type && strncasecmp(type, "text/event-stream", 17) == 0)
			rn->streaming = true;
		else if (!type || strncasecmp(type, "application/json", 16) != 0)
			return error_set(err, EPROTO,
					 "agentboxd answered neither an event stream nor JSON "
					 "(Content-Type %s)",
					 type ? type : "missing");
	}
	if (!rn->streaming) {
		int r = buf_append(&rn->answer, buf, len);
		if (r == -E2BIG)
			return error_set(err, EPROTO, "agentboxd's answer is larger than %u MiB",
					 EXEC_ANSWER_MAX >> 20);
		if (r < 0)
			return error_set_errno(err, -r, "reading the answer");
		return 0;
	}
	int r = sse_parser_feed(&rn->sse, buf, len, err);
	if (r < 0 && error_is_set(&rn->fatal) && err)
		*err = rn->fatal;
	return r;
}

/* The whole result in one JSON answer: print its output, keep its end. */
static int take_answer(struct runner *rn)
{
	json_error_t jerr;
	_cleanup_json_ json_t *a =
	    json_loadb(rn->answer.data ? rn->answer.data : "", rn->answer.len, 0, &jerr);
	if (!json_is_object(a))
		return set_fatal(rn, EPROTO, "agentboxd's answer is not a JSON object");
	int r = 0;
	json_t *out = json_object_get(a, "stdout"), *errs = json_object_get(a, "stderr");
	if (json_is_string(out))
		r = cli_write_output(STDOUT_FILENO, out, json_object_get(a, "stdout_encoding"));
	if (r == 0 && json_is_string(errs))
		r = cli_write_output(STDERR_FILENO, errs, json_object_get(a, "stderr_encoding"));
	if (r == -EPROTO)
		return set_fatal(rn, EPROTO, "agentboxd sent output in an encoding unknown here");
	if (r < 0)
		return set_fatal(rn, -r, "writing the command's output: %s", strerror(-r));
	rn->exit = TAKE_PTR(a);
	return 0;
}

/* How the command ended, as our exit status. */
int cli_command_exit_status(const char *verb, const json_t *ex)
{
	if (json_is_true(json_object_get(ex, "truncated")))
		fprintf(stderr,
			"agentbox: %s: the command wrote more output than agentboxd keeps; "
			"the rest is not shown\n",
			verb);
	if (json_is_true(json_object_get(ex, "timed_out"))) {
		fputs("agentbox: command timed out\n", stderr);
		return EXIT_TIMED_OUT;
	}
	if (json_is_true(json_object_get(ex, "oom_killed"))) {
		fputs("agentbox: command killed: out of memory\n", stderr);
		return EXIT_OOM;
	}
	json_t *code = json_object_get(ex, "exit_code");
	if (json_is_integer(code) && json_integer_value(code) >= 0 &&
	    json_integer_value(code) <= 255)
		return (int)json_integer_value(code);
	json_t *sig = json_object_get(ex, "signal");
	if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128)
		return 128 + (int)json_integer_value(sig);
	return cli_fail("%s: agentboxd's answer has no exit status", verb);
}

/* Did the connection end under the stream (rather than the stream make no sense)? */
static bool stream_broke(int code)
{
	return code == ECONNRESET || code == EPIPE || code == ETIMEDOUT || code == ECONNABORTED ||
	       code == EIO;
}

int cli_command_stream(struct client *c, const char *verb, const char *method, const char *target,
		       const json_t *body)
{
	struct runner rn = {.pid = -1, .answer = {.max = EXEC_ANSWER_MAX}};
	sse_parser_init(&rn.sse, on_event, &rn);
	struct client_request req = {
	    .method = method,
	    .target = target,
	    .json = body,
	    .accept = "text/event-stream",
	    .on_body = on_body,
	    .data = &rn,
	    .read_timeout_ms = -1, /* a command may be silent for as long as it likes */
	};
	struct error err = {0};
	int r = client_request(c, &req, NULL, &err);
	sse_parser_finish(&rn.sse);
	sse_parser_release(&rn.sse);
	if (r == 0 && !rn.streaming && rn.started)
		r = take_answer(&rn);
	int rc;
	if (rn.exit) {
		rc = cli_command_exit_status(verb, rn.exit);
	} else if (error_is_set(&rn.fatal)) {
		rc = cli_fail("%s: %s", verb, rn.fatal.msg);
	} else if (r < 0 && (c->last_status / 100 != 2 || !stream_broke(err.code))) {
		/* agentboxd refused, is not there, or answered what we cannot read */
		rc = cli_fail("%s: %s", verb, err.msg);
	} else {
		const char *why = r < 0 ? err.msg : "agentboxd ended the stream";
		if (rn.pid >= 0)
			rc = cli_fail("%s: %s before the command ended (it goes on in the "
				      "sandbox as pid %" PRId64 ")",
				      verb, why, rn.pid);
		else
			rc = cli_fail("%s: %s before the command ended", verb, why);
	}
	json_decref(rn.exit);
	buf_release(&rn.answer);
	return rc;
}
