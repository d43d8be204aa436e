/*
 * agentbox logs: a task's output (stdout and stderr as the task wrote
 * them); with -f, followed until the task ends.
 *
 * Off a terminal (a pipe, a file), or with --raw, the bytes go out as
 * agentboxd sends them. On a terminal they are the task's, not ours: they
 * are escaped (client/term.h), and agentboxd's attempt headers are marked
 * in reverse video where the body proves them agentboxd's
 * (client_logs_render()); a followed stream is escaped as it comes and
 * marks nothing, since a header cannot be checked before the stream ends.
 */
#include "base/buf.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "client/client.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* How often the output is fetched again when the task's attempt changed meanwhile. */
#define LOGS_TRIES 3

static const char help[] =
    "usage: agentbox logs [OPTIONS] ID\n"
    "\n"
    "Print the output of task ID: what its command wrote to stdout and\n"
    "stderr, interleaved as written, attempt after attempt (each after a line\n"
    "\"[agentbox: attempt N]\" when there were several); at most the last\n"
    "64 MiB. With -f, a broken connection (agentboxd restarted) ends it\n"
    "with 125: run it again to see the output so far.\n"
    "\n"
    "Into a pipe or a file the bytes are exactly the task's. On a terminal\n"
    "they are escaped: control, C1 and bidi characters, bytes that are not\n"
    "UTF-8 and the backslash show as \\x1b, \\u009b, \\u202e, \\xff and \\\\\n"
    "(newlines and tabs stay), and agentboxd's attempt headers are shown in\n"
    "reverse video, which the task's output cannot produce. A line that\n"
    "reads like a header but is not in reverse video is the task's, or\n"
    "cannot be told from one it wrote (a note on stderr says how many). With\n"
    "-f nothing is marked.\n"
    "\n"
    "options:\n"
    "  -f, --follow    keep printing as the task writes, until it ends\n"
    "  --raw           the exact bytes on a terminal too\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 the output was printed (with -f: the task ended); 125\n"
    "agentbox or agentboxd failed, or the stream broke (one line on stderr).\n";

enum { OPT_SOCKET = 256, OPT_RAW };

static const struct option options[] = {
    {"follow", no_argument, NULL, 'f'},
    {"raw", no_argument, NULL, OPT_RAW},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int copy_out(const struct http_response *res, const char *buf, size_t len, void *data,
		    struct error *err)
{
	(void)res;
	(void)data;
	int r = write_all(STDOUT_FILENO, buf, len);
	if (r < 0)
		return error_set_errno(err, -r, "writing the output");
	return 0;
}

/* -f on a terminal: each piece escaped as it comes. */
static int escape_out(const struct http_response *res, const char *buf, size_t len, void *data,
		      struct error *err)
{
	(void)res;
	struct term_stream *ts = data;
	_cleanup_buf_ struct buf b = {0};
	if (term_stream_feed(ts, buf, len, &b) < 0)
		return error_set_errno(err, ENOMEM, "escaping the output");
	int r = write_all(STDOUT_FILENO, b.data, b.len);
	if (r < 0)
		return error_set_errno(err, -r, "writing the output");
	return 0;
}

static int collect(const struct http_response *res, const char *buf, size_t len, void *data,
		   struct error *err)
{
	(void)res;
	int r = buf_append(data, buf, len);
	if (r == -E2BIG)
		return error_set(err, EPROTO, "agentboxd sent more output than its limit of %u MiB",
				 CLIENT_LOGS_MAX >> 20);
	if (r < 0)
		return error_set_errno(err, -r, "reading the output");
	return 0;
}

/* The task's attempt count, or -errno with err set. */
static int64_t attempts_of(struct client *c, const char *id, struct error *err)
{
	char target[CLIENT_TARGET_MAX];
	_cleanup_json_ json_t *task = NULL;
	int r = client_task_target(target, sizeof(target), id, NULL, err);
	if (r == 0)
		r = client_call(c, "GET", target, NULL, &task, err);
	if (r < 0)
		return r;
	json_t *attempt = json_object_get(task, "attempt");
	if (!json_is_integer(attempt) || json_integer_value(attempt) < 0)
		return error_set(err, EPROTO, "agentboxd's task has no attempt count");
	return json_integer_value(attempt);
}

/*
 * Without -f, on a terminal: the whole output, and the attempt count it
 * was served with (read before and after it; -1 when it kept changing),
 * so that client_logs_render() can tell agentboxd's headers.
 */
static int show(struct client *c, const char *id, const char *target)
{
	struct error err = {0};
	_cleanup_buf_ struct buf body = {.max = CLIENT_LOGS_MAX + 4096};
	int64_t attempts = -1;
	for (int try = 0; try < LOGS_TRIES && attempts < 0; try++) {
		int64_t before = attempts_of(c, id, &err);
		if (before < 0)
			return cli_fail("logs: %s", err.msg);
		buf_reset(&body);
		if (client_stream(c, target, "text/plain", 0, c->read_timeout_ms, collect, &body,
				  &err) < 0)
			return cli_fail("logs: %s", err.msg);
		int64_t after = attempts_of(c, id, &err);
		if (after < 0)
			return cli_fail("logs: %s", err.msg);
		if (before == after)
			attempts = after;
	}
	struct client_logs_view view;
	int r = client_logs_render(body.data ? body.data : "", body.len, attempts, stdout, &view);
	if (r < 0 || fflush(stdout) == EOF)
		return cli_fail("logs: cannot write the output");
	if (view.unmarked == 1)
		fputs("agentbox: logs: 1 line that reads like an attempt header is not marked: "
		      "the task wrote it, or it cannot be told from a line the task wrote\n",
		      stderr);
	else if (view.unmarked > 1)
		fprintf(stderr,
			"agentbox: logs: %zu lines that read like attempt headers are not marked: "
			"the task wrote them, or they cannot be told from lines it wrote\n",
			view.unmarked);
	return 0;
}

int verb_logs(int argc, char **argv)
{
	const char *socket_path = NULL;
	bool follow = false, raw = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":fh", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case 'f':
			follow = true;
			break;
		case OPT_RAW:
			raw = true;
			break;
		case OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error("logs", opt, argv);
		}
	}
	if (argc - optind != 1)
		return cli_fail("logs: give one task ID (see agentbox logs --help)");
	const char *id = argv[optind];
	bool escape = !raw && isatty(STDOUT_FILENO);

	struct error err = {0};
	char target[CLIENT_TARGET_MAX];
	if (client_task_target(target, sizeof(target), id, follow ? "/logs?follow=1" : "/logs",
			       &err) < 0)
		return cli_fail("logs: %s", err.msg);
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("logs: %s", err.msg);
	int rc = 0;
	if (escape && !follow) {
		rc = show(&c, id, target);
	} else {
		/* without -f the whole output is there at once: a silent daemon is an error */
		struct term_stream ts = {.flags = TERM_KEEP_NEWLINE | TERM_KEEP_TAB};
		int r = client_stream(&c, target, "text/plain", 0, follow ? 0 : c.read_timeout_ms,
				      escape ? escape_out : copy_out, &ts, &err);
		if (escape) {
			_cleanup_buf_ struct buf b = {0};
			term_stream_finish(&ts, &b);
			if (b.len)
				(void)write_all(STDOUT_FILENO, b.data, b.len);
		}
		if (r < 0)
			rc = cli_fail("logs: %s", err.msg);
	}
	client_release(&c);
	return rc;
}
