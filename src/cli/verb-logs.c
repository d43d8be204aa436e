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
#include <inttypes.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* How often the output is fetched again when the task's attempt changed meanwhile. */
#define LOGS_TRIES 3
/* -f: how long agentboxd may stay unreachable before logs gives up. */
#define LOGS_RECONNECT_MS   30000
#define LOGS_BACKOFF_MIN_MS 100
#define LOGS_BACKOFF_MAX_MS 2000

static const char help[] =
    "usage: agentbox logs [OPTIONS] ID\n"
    "\n"
    "Print the output of task ID: what its command wrote to stdout and\n"
    "stderr, interleaved as written, attempt after attempt (each after a line\n"
    "\"[agentbox: attempt N]\" when there were several); at most the last\n"
    "64 MiB. With -f, when the connection breaks (agentboxd restarted) logs\n"
    "says \"reconnecting...\" on stderr and goes on from the byte it had\n"
    "reached, nothing lost or shown twice; it gives up after 30s without\n"
    "agentboxd.\n"
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
    "agentbox or agentboxd failed, or stayed away for 30s (one line on\n"
    "stderr).\n";

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

/* ---- -f: followed to the task's end, across restarts of agentboxd --------- */

struct follower {
	struct term_stream ts;
	bool escape;
	bool write_failed;
	uint64_t got; /* bytes of the stream so far: where the next one starts */
};

static int follow_out(const struct http_response *res, const char *buf, size_t len, void *data,
		      struct error *err)
{
	struct follower *f = data;
	int r =
	    f->escape ? escape_out(res, buf, len, &f->ts, err) : copy_out(res, buf, len, f, err);
	if (r < 0)
		f->write_failed = true;
	else
		f->got += len;
	return r;
}

static void pause_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Did agentboxd answer with an error it means (not a passing 503)? */
static bool is_answer(const struct client *c, int r)
{
	return r < 0 && c->last_status >= 400 && c->last_status != 503;
}

/*
 * Stream the output from f->got on, again and again, until a stream ends
 * and the task has ended too. agentboxd away: "reconnecting" once, then
 * retries with a backoff, for up to LOGS_RECONNECT_MS.
 */
static int follow_logs(struct client *c, const char *id, struct follower *f)
{
	struct error err = {0};
	char task_target[CLIENT_TARGET_MAX], target[CLIENT_TARGET_MAX];
	if (client_task_target(task_target, sizeof(task_target), id, NULL, &err) < 0)
		return cli_fail("logs: %s", err.msg);
	int64_t failing_since = 0, backoff = LOGS_BACKOFF_MIN_MS;
	bool away = false;
	for (;;) {
		char suffix[64];
		snprintf(suffix, sizeof(suffix), "/logs?follow=1&offset=%" PRIu64, f->got);
		if (client_task_target(target, sizeof(target), id, suffix, &err) < 0)
			return cli_fail("logs: %s", err.msg);
		uint64_t before = f->got;
		err = (struct error){0};
		int r = client_stream(c, target, "text/plain", 0, 0, follow_out, f, &err);
		if (f->write_failed || is_answer(c, r))
			return cli_fail("logs: %s", err.msg);
		/* the stream ended, or broke: has the task ended? */
		_cleanup_json_ json_t *task = NULL;
		struct error gerr = {0};
		int g = client_call(c, "GET", task_target, NULL, &task, &gerr);
		if (is_answer(c, g))
			return cli_fail("logs: %s", gerr.msg);
		if (g == 0 && away) {
			fputs("agentbox: logs: reconnected\n", stderr);
			away = false;
		}
		if (g == 0 && r == 0 &&
		    client_status_is_final(json_string_value(json_object_get(task, "status"))))
			return 0;
		if (g == 0 && (r == 0 || f->got > before)) {
			failing_since = 0; /* agentboxd is there: go on at once */
			backoff = LOGS_BACKOFF_MIN_MS;
			continue;
		}
		if (!away) {
			fputs("agentbox: logs: agentboxd is not answering; reconnecting\u2026\n",
			      stderr);
			away = true;
		}
		if (!failing_since)
			failing_since = http_now_ms();
		else if (http_now_ms() - failing_since >= LOGS_RECONNECT_MS)
			return cli_fail("logs: gave up after %ds without agentboxd: %s",
					LOGS_RECONNECT_MS / 1000, g < 0 ? gerr.msg : err.msg);
		pause_ms(backoff);
		backoff = backoff * 2 > LOGS_BACKOFF_MAX_MS ? LOGS_BACKOFF_MAX_MS : backoff * 2;
	}
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
	if (client_task_target(target, sizeof(target), id, "/logs", &err) < 0)
		return cli_fail("logs: %s", err.msg);
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("logs: %s", err.msg);
	int rc = 0;
	struct follower f = {.ts = {.flags = TERM_KEEP_NEWLINE | TERM_KEEP_TAB}, .escape = escape};
	if (follow) {
		rc = follow_logs(&c, id, &f);
	} else if (escape) {
		rc = show(&c, id, target);
	} else {
		/* without -f the whole output is there at once: a silent daemon is an error */
		if (client_stream(&c, target, "text/plain", 0, c.read_timeout_ms, copy_out, NULL,
				  &err) < 0)
			rc = cli_fail("logs: %s", err.msg);
	}
	if (follow && escape) {
		_cleanup_buf_ struct buf b = {0};
		term_stream_finish(&f.ts, &b);
		if (b.len)
			(void)write_all(STDOUT_FILENO, b.data, b.len);
	}
	client_release(&c);
	return rc;
}
