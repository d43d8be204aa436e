/*
 * agentbox exec: run a command in an interactive sandbox and become it, as
 * far as a caller can tell: its stdout and stderr are copied to ours as
 * they arrive (Server-Sent Events from POST /v1/sandboxes/ID/exec, written
 * unbuffered), and its exit status is ours. With -d the command is only
 * started, and its pid printed.
 *
 * The stream's events: start {"pid"}, stdout and stderr {"data"}, and
 * last exit {"exit_code", "signal", "oom_killed", "timed_out", ...}. A
 * daemon that answers with the whole result as JSON instead is understood
 * too. The command goes on in the sandbox if we go away (the API's rule).
 */
#include "base/base64.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"
#include "client/sse.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* What -i sends at most: the API's limit on stdin. */
#define EXEC_STDIN_MAX (1u << 20)
/* A whole JSON answer, when the daemon does not stream (two 1 MiB outputs, escaped). */
#define EXEC_ANSWER_MAX (16u << 20)
/* The exit statuses exec itself gives the command's end. */
#define EXIT_TIMED_OUT 124
#define EXIT_OOM       137

static const char help[] =
    "usage: agentbox exec [OPTIONS] ID [--] COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND in interactive sandbox ID (agentbox sandbox create) and wait\n"
    "for it. What it writes to stdout and stderr is copied to ours as it\n"
    "comes, and agentbox exits with its exit status. COMMAND is looked up in\n"
    "the sandbox's PATH. Options come before or after ID, up to -- or\n"
    "COMMAND. Interrupting agentbox does not stop the command: it runs on in\n"
    "the sandbox (use --timeout).\n"
    "\n"
    "options:\n"
    "  --env KEY=VALUE      add to (or override) the sandbox's environment;\n"
    "                       repeatable\n"
    "  --cwd DIR            working directory, absolute (default: the sandbox's,\n"
    "                       its image's WorkingDir, else /workspace)\n"
    "  --timeout DUR        kill the command's process group after DUR (90s,\n"
    "                       5m; whole seconds, rounded up; at most 24h)\n"
    "  -i, --stdin          send our stdin, read to its end, as the command's\n"
    "                       (UTF-8 text, at most 1 MiB); without it the\n"
    "                       command's stdin is empty\n"
    "  -d, --detach         start the command in the background and print its\n"
    "                       pid (in the sandbox); do not wait for it\n" CLI_HELP_SOCKET_WIDE
	CLIENT_HELP_ENVIRONMENT "\n"
    "exit status:\n"
    "  N    the command's own exit status; 128+N when signal N killed it\n"
    "  126  the command could not be executed\n"
    "  127  the command was not found\n"
    "  124  --timeout passed and the command was killed\n"
    "       (\"agentbox: command timed out\" on stderr)\n"
    "  137  the command ran out of memory and was killed\n"
    "       (\"agentbox: command killed: out of memory\" on stderr)\n"
    "  125  agentbox or agentboxd failed or refused (one line on stderr;\n"
    "       an error of agentboxd's ends in its code, e.g. (sandbox_paused))\n"
    "  with -d: 0 started (its pid is on stdout), or 125.\n";

enum {
	OPT_CWD = CLI_OPT_VERB,
	OPT_TIMEOUT,
};

static const struct option options[] = {
    {"env", required_argument, NULL, CLI_OPT_ENV},
    {"cwd", required_argument, NULL, OPT_CWD},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"stdin", no_argument, NULL, 'i'},
    {"detach", no_argument, NULL, 'd'},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

struct exec_args {
	json_t *body;
	const char *socket_path;
	const char *id;
	bool stdin, detach, help;
};

static int parse_args(int argc, char **argv, struct exec_args *a, struct error *err)
{
	opterr = 0;
	optind = 1;
	int opt;
	/*
	 * "+": options stop at the first operand. They come before ID and
	 * after it, up to "--" or COMMAND, so the command's own flags are its
	 * own: getopt resumes once past ID.
	 */
	for (;;) {
		int before = optind;
		opt = getopt_long(argc, argv, "+:idh", options, NULL);
		if (opt == -1) {
			/* "--" before ID ends the options as well */
			bool dashes = optind == before + 1 && strcmp(argv[before], "--") == 0;
			if (a->id || optind >= argc)
				break;
			a->id = argv[optind++];
			if (dashes)
				break;
			continue;
		}
		int r = cli_body_option(a->body, opt, optarg, err);
		if (r != -ENOENT) {
			if (r < 0)
				return r;
			continue;
		}
		uint64_t ms;
		switch (opt) {
		case 'h':
			a->help = true;
			return 0;
		case 'i':
			a->stdin = true;
			break;
		case 'd':
			a->detach = true;
			break;
		case OPT_CWD: {
			if (optarg[0] != '/')
				return error_set(err, EINVAL, "--cwd: '%s' is not an absolute path",
						 optarg);
			json_t *cwd = json_string(optarg);
			if (!cwd)
				return error_set(err, EINVAL, "--cwd: '%s' is not UTF-8 text",
						 optarg);
			if ((r = cli_body_set(a->body, "cwd", cwd, err)) < 0)
				return r;
			break;
		}
		case OPT_TIMEOUT:
			if ((r = cli_parse_duration("--timeout", optarg, &ms, err)) < 0)
				return r;
			r = cli_body_set(a->body, "timeout_s",
					 json_integer((json_int_t)cli_whole_seconds(ms)), err);
			if (r < 0)
				return r;
			break;
		case CLI_OPT_SOCKET:
			a->socket_path = optarg;
			break;
		case ':':
			return error_set(err, EINVAL, "option '%s' needs a value",
					 argv[optind - 1]);
		default:
			return error_set(err, EINVAL,
					 "unknown option '%s' (see agentbox exec --help)",
					 argv[optind - 1]);
		}
	}
	if (!a->id)
		return error_set(err, EINVAL,
				 "no sandbox given (agentbox exec [OPTIONS] ID -- COMMAND)");
	if (optind >= argc)
		return error_set(err, EINVAL,
				 "no command given (agentbox exec [OPTIONS] ID -- COMMAND)");
	json_t *command = json_array();
	if (cli_body_set(a->body, "command", command, err) < 0)
		return -ENOMEM;
	for (int i = optind; i < argc; i++) {
		json_t *s = json_string(argv[i]);
		if (!s)
			return error_set(err, EINVAL, "the command's argument %d is not UTF-8 text",
					 i - optind);
		if (json_array_append_new(command, s) < 0)
			return error_set_errno(err, ENOMEM, "building the request");
	}
	if (a->detach && cli_body_set(a->body, "background", json_true(), err) < 0)
		return -ENOMEM;
	return 0;
}

/* -i: all of our stdin, at most EXEC_STDIN_MAX bytes of UTF-8 text, into body.stdin. */
static int read_stdin(json_t *body, struct error *err)
{
	char *buf = malloc(EXEC_STDIN_MAX + 1);
	if (!buf)
		return error_set_errno(err, ENOMEM, "--stdin");
	/* one byte more than allowed, to tell "exactly the most" from "more" */
	ssize_t n = read_all(STDIN_FILENO, buf, EXEC_STDIN_MAX + 1);
	int r = 0;
	if (n < 0)
		r = error_set_errno(err, (int)-n, "--stdin: reading stdin");
	else if ((size_t)n > EXEC_STDIN_MAX)
		r = error_set(err, EFBIG, "--stdin: stdin holds more than %u MiB",
			      EXEC_STDIN_MAX >> 20);
	else {
		json_t *s = json_stringn(buf, (size_t)n);
		if (!s)
			r = error_set(err, EINVAL, "--stdin: stdin is not UTF-8 text");
		else
			r = cli_body_set(body, "stdin", s, err);
	}
	free(buf);
	return r;
}

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
static int write_output(int fd, const json_t *text, const json_t *encoding)
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
	int r = write_output(fd, text, json_object_get(data, "encoding"));
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
		r = write_output(STDOUT_FILENO, out, json_object_get(a, "stdout_encoding"));
	if (r == 0 && json_is_string(errs))
		r = write_output(STDERR_FILENO, errs, json_object_get(a, "stderr_encoding"));
	if (r == -EPROTO)
		return set_fatal(rn, EPROTO, "agentboxd sent output in an encoding unknown here");
	if (r < 0)
		return set_fatal(rn, -r, "writing the command's output: %s", strerror(-r));
	rn->exit = TAKE_PTR(a);
	return 0;
}

/* How the command ended, as our exit status. */
static int exit_status(const json_t *ex)
{
	if (json_is_true(json_object_get(ex, "truncated")))
		fputs("agentbox: exec: the command wrote more output than agentboxd keeps; "
		      "the rest is not shown\n",
		      stderr);
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
	return cli_fail("exec: agentboxd's answer has no exit status");
}

/* Did the connection end under the stream (rather than the stream make no sense)? */
static bool stream_broke(int code)
{
	return code == ECONNRESET || code == EPIPE || code == ETIMEDOUT || code == ECONNABORTED ||
	       code == EIO;
}

static int run(struct client *c, const char *target, const json_t *body)
{
	struct runner rn = {.pid = -1, .answer = {.max = EXEC_ANSWER_MAX}};
	sse_parser_init(&rn.sse, on_event, &rn);
	struct client_request req = {
	    .method = "POST",
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
		rc = exit_status(rn.exit);
	} else if (error_is_set(&rn.fatal)) {
		rc = cli_fail("exec: %s", rn.fatal.msg);
	} else if (r < 0 && (c->last_status / 100 != 2 || !stream_broke(err.code))) {
		/* agentboxd refused, is not there, or answered what we cannot read */
		rc = cli_fail("exec: %s", err.msg);
	} else {
		const char *why = r < 0 ? err.msg : "agentboxd ended the stream";
		if (rn.pid >= 0)
			rc = cli_fail("exec: %s before the command ended (it goes on in the "
				      "sandbox as pid %" PRId64 ")",
				      why, rn.pid);
		else
			rc = cli_fail("exec: %s before the command ended", why);
	}
	json_decref(rn.exit);
	buf_release(&rn.answer);
	return rc;
}

static int detach(struct client *c, const char *target, const json_t *body)
{
	struct error err = {0};
	_cleanup_json_ json_t *answer = NULL;
	if (client_call(c, "POST", target, body, &answer, &err) < 0)
		return cli_fail("exec: %s", err.msg);
	json_t *pid = json_object_get(answer, "pid");
	if (!json_is_integer(pid))
		return cli_fail("exec: agentboxd's answer has no pid");
	if (printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(pid)) < 0 ||
	    fflush(stdout) == EOF)
		return cli_fail("exec: cannot write the output");
	return 0;
}

int verb_exec(int argc, char **argv)
{
	_cleanup_json_ json_t *body = json_object();
	struct exec_args a = {.body = body}; /* borrowed: body owns it */
	struct error err = {0};
	if (!body)
		return cli_fail("exec: out of memory");
	int rc;
	char target[CLIENT_TARGET_MAX];
	struct client c = {0};
	if (parse_args(argc, argv, &a, &err) < 0) {
		rc = cli_fail("exec: %s", err.msg);
	} else if (a.help) {
		fputs(help, stdout);
		rc = 0;
	} else if (client_sandbox_target(target, sizeof(target), a.id, "/exec", &err) < 0 ||
		   (a.stdin && read_stdin(a.body, &err) < 0) ||
		   client_init(&c, a.socket_path, &err) < 0) {
		rc = cli_fail("exec: %s", err.msg);
	} else {
		rc = a.detach ? detach(&c, target, a.body) : run(&c, target, a.body);
	}
	client_release(&c);
	return rc;
}
