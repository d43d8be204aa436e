/*
 * agentbox wait: follow a task to its end over its event stream (Server-
 * Sent Events) and say how it ended, in the exit status and as the final
 * task JSON on stdout.
 *
 *	GET the task ── final? ──────────────────────────────▶ print, exit
 *	   │ no
 *	   ▼
 *	stream events?after=SEQ ── a final status event, or the stream ends ──▶
 *	   ▲                       GET the task ── final? ──▶ print, exit
 *	   │ broke, or ended early                 │ no
 *	   └── retry (backoff) for up to WAIT_RECONNECT_MS ◀┘
 *
 * A stream that breaks (agentboxd restarted, say) is picked up again after
 * the last event seen; only when agentboxd stays unreachable for
 * WAIT_RECONNECT_MS does wait give up (125). On a terminal a one-line view
 * (status, attempt, progress) is redrawn as events come.
 */
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "client/client.h"
#include "client/sse.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* How long agentboxd may stay unreachable before wait gives up. */
#define WAIT_RECONNECT_MS   30000
#define WAIT_BACKOFF_MIN_MS 100
#define WAIT_BACKOFF_MAX_MS 2000
/* A stream that lasted this long counts as working, events or not. */
#define WAIT_STREAM_OK_MS 1000
/* wait's own --timeout passed before the task ended. */
#define EXIT_WAIT_TIMEOUT 2

static const char help[] =
    "usage: agentbox wait [OPTIONS] ID\n"
    "\n"
    "Wait for task ID to end, following its events. On a terminal, a line\n"
    "shows its status, attempt and progress as they change. At the end the\n"
    "task's JSON (as agentbox status prints it) goes to stdout. If the\n"
    "connection to agentboxd breaks (it restarted), wait says \"reconnecting\"\n"
    "on stderr, reconnects and goes on after the last event it saw, so the\n"
    "progress shown never goes back; it gives up after 30s without agentboxd.\n"
    "\n"
    "options:\n"
    "  --timeout DUR   give up after DUR (500ms, 90s, 5m, 1h30m); the task\n"
    "                  goes on\n" CLIENT_HELP_SOCKET "\n"
    "exit status, how the task ended:\n"
    "  0    succeeded\n"
    "  1    failed (its command exited non-zero or was killed by a signal)\n"
    "  137  oom_killed (it ran out of memory)\n"
    "  124  timed_out (its --timeout passed)\n"
    "  130  cancelled\n"
    "  3    lost (its supervisor or machine vanished)\n"
    "  2    wait's own --timeout passed first; the task has not ended\n"
    "  125  agentbox or agentboxd failed, or agentboxd stayed unreachable;\n"
    "       one line on stderr says why\n";

enum { OPT_TIMEOUT = 256, OPT_SOCKET };

static const struct option options[] = {
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

struct waiter {
	struct client c;
	const char *id;
	int64_t deadline; /* http_now_ms(); 0 = none */
	bool live;	  /* stdout is a terminal: draw the progress line */
	bool drawn;	  /* a progress line is on the screen */
	char status[32];
	int64_t attempt;
	json_t *progress; /* every progress event merged */
	int64_t last_seq; /* of the last event seen; the next stream starts after it */
	int events;	  /* events in the current stream */
	struct sse_parser sse;
	struct error fatal; /* set: the stream is unusable, do not retry */
	bool away;	    /* agentboxd stopped answering: "reconnecting" was said */
};

/* ---- the progress line ------------------------------------------------ */

static void draw(struct waiter *w)
{
	if (!w->live)
		return;
	/* one screen line, so \r redraws it in place */
	struct winsize ws;
	size_t cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
		cols = ws.ws_col;
	char line[640];
	struct term_line l; /* escaped: the status and progress are not ours */
	term_line_init(&l, line, cols < sizeof(line) ? cols : sizeof(line));
	term_line_adds(&l, w->status);
	if (w->attempt > 0) {
		char attempt[32];
		snprintf(attempt, sizeof(attempt), "  attempt %" PRId64, w->attempt);
		term_line_adds(&l, attempt);
	}
	if (json_object_size(w->progress) > 0) {
		term_line_adds(&l, "  ");
		client_view_progress(&l, w->progress);
	}
	printf("\r%s\033[K", line);
	fflush(stdout);
	w->drawn = true;
}

static void undraw(struct waiter *w)
{
	if (w->drawn) {
		fputs("\r\033[K", stdout);
		w->drawn = false;
	}
}

/* Take status, attempt and progress from a task object. */
static void view_task(struct waiter *w, const json_t *task)
{
	const char *s = json_string_value(json_object_get(task, "status"));
	snprintf(w->status, sizeof(w->status), "%s", s ? s : "?");
	w->attempt = json_integer_value(json_object_get(task, "attempt"));
	json_t *p = json_object_get(task, "progress");
	if (json_is_object(p))
		json_object_update(w->progress, p);
}

/* ---- events ----------------------------------------------------------- */

static int fatal(struct waiter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fatal(struct waiter *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->fatal.msg, sizeof(w->fatal.msg), fmt, ap);
	va_end(ap);
	w->fatal.code = EPROTO;
	return -EPROTO;
}

/*
 * One event: data is the API's event object,
 *	{"seq": N, "attempt": A, "type": "progress"|"status", "data": {...}, "time": "..."}
 */
static int on_event(const struct sse_event *ev, void *data)
{
	struct waiter *w = data;
	json_error_t jerr;
	_cleanup_json_ json_t *e = json_loadb(ev->data, ev->data_len, 0, &jerr);
	if (!json_is_object(e))
		return fatal(w, "agentboxd sent an event that is not a JSON object");
	int64_t seq = -1;
	uint64_t id;
	if (ev->id[0] && parse_u64(ev->id, &id) == 0 && id <= INT64_MAX)
		seq = (int64_t)id;
	else if (json_is_integer(json_object_get(e, "seq")))
		seq = json_integer_value(json_object_get(e, "seq"));
	if (seq > w->last_seq)
		w->last_seq = seq;
	w->events++;

	const char *type = json_string_value(json_object_get(e, "type"));
	if (!type)
		type = ev->type;
	json_t *payload = json_object_get(e, "data");
	json_t *attempt = json_object_get(e, "attempt");
	if (json_is_integer(attempt))
		w->attempt = json_integer_value(attempt);
	int r = 0;
	if (strcmp(type, "progress") == 0 && json_is_object(payload)) {
		json_object_update(w->progress, payload);
	} else if (strcmp(type, "status") == 0 && json_is_object(payload)) {
		const char *s = json_string_value(json_object_get(payload, "status"));
		if (s) {
			snprintf(w->status, sizeof(w->status), "%s", s);
			if (client_status_is_final(s))
				r = 1; /* enough: the task JSON says the rest */
		}
	}
	/* other types: not ours to know yet, skipped */
	draw(w);
	return r;
}

static int on_body(const struct http_response *res, const char *buf, size_t len, void *data,
		   struct error *err)
{
	struct waiter *w = data;
	const char *type = http_response_header(res, "Content-Type");
	if (!type || strncasecmp(type, "text/event-stream", 17) != 0) {
		fatal(w, "agentboxd did not answer with an event stream (Content-Type %s)",
		      type ? type : "missing");
		return error_set(err, EPROTO, "%s", w->fatal.msg);
	}
	int r = sse_parser_feed(&w->sse, buf, len, err);
	if (r < 0 && !error_is_set(&w->fatal)) {
		/* the parser's own limits: retrying would meet them again */
		fatal(w, "%s", err ? err->msg : "bad event stream");
	}
	if (r < 0 && !error_is_set(err))
		error_set(err, EPROTO, "%s", w->fatal.msg);
	return r;
}

/* ---- the loop ----------------------------------------------------------- */

/* Sleep ms, but not past the deadline. */
static void pause_ms(int64_t ms, int64_t deadline)
{
	if (deadline > 0 && http_now_ms() + ms > deadline)
		ms = deadline - http_now_ms();
	if (ms <= 0)
		return;
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static bool out_of_time(const struct waiter *w)
{
	return w->deadline > 0 && http_now_ms() >= w->deadline;
}

/* Did the daemon answer with an error it means (not a passing 503)? */
static bool is_answer(const struct waiter *w, int r)
{
	int st = w->c.last_status;
	return r < 0 && st >= 400 && st != 503;
}

/*
 * GET the task, retrying while agentboxd is unreachable, until
 * give_up_at. 0 with *ret, -ETIMEDOUT (the deadline), or -errno with err.
 */
static int get_task(struct waiter *w, const char *target, int64_t give_up_at, json_t **ret,
		    struct error *err)
{
	int64_t backoff = WAIT_BACKOFF_MIN_MS;
	for (;;) {
		int r = client_call(&w->c, "GET", target, NULL, ret, err);
		if (r == 0 && w->away) {
			undraw(w);
			fflush(stdout);
			fputs("agentbox: wait: reconnected\n", stderr);
			w->away = false;
		}
		if (r == 0 || is_answer(w, r))
			return r;
		if (!w->away) {
			/* said once, on stderr; the progress line is redrawn by the next event */
			undraw(w);
			fflush(stdout);
			fputs("agentbox: wait: agentboxd is not answering; reconnecting\u2026\n",
			      stderr);
			w->away = true;
		}
		if (out_of_time(w))
			return -ETIMEDOUT;
		if (http_now_ms() >= give_up_at)
			return r;
		pause_ms(backoff, w->deadline);
		backoff = backoff * 2 > WAIT_BACKOFF_MAX_MS ? WAIT_BACKOFF_MAX_MS : backoff * 2;
	}
}

static int finish(struct waiter *w, json_t *task)
{
	undraw(w);
	const char *s = json_string_value(json_object_get(task, "status"));
	int code = client_status_exit_code(s);
	if (client_print_json(stdout, task) < 0 || fflush(stdout) == EOF)
		return cli_fail("wait: cannot write the output");
	if (code < 0)
		return cli_fail("wait: agentboxd says the task is '%s', which is no end",
				s ? s : "?");
	return code;
}

static int timed_out(struct waiter *w, const char *arg)
{
	undraw(w);
	fflush(stdout);
	fprintf(stderr, "agentbox: wait: task %s did not end within %s (it goes on)\n", w->id, arg);
	return EXIT_WAIT_TIMEOUT;
}

static int follow(struct waiter *w, const char *timeout_arg)
{
	struct error err = {0};
	char task_target[CLIENT_TARGET_MAX];
	if (client_task_target(task_target, sizeof(task_target), w->id, NULL, &err) < 0)
		return cli_fail("wait: %s", err.msg);

	/* the first look: the task exists, and may have ended already */
	_cleanup_json_ json_t *first = NULL;
	int r = client_call(&w->c, "GET", task_target, NULL, &first, &err);
	if (r < 0)
		return cli_fail("wait: %s", err.msg);
	/*
	 * The line is drawn from the events alone, in their order: the task's
	 * own view is later than the events the stream starts with, so drawing
	 * it first would make the progress go back.
	 */
	const char *s = json_string_value(json_object_get(first, "status"));
	if (client_status_is_final(s)) {
		view_task(w, first);
		return finish(w, first);
	}
	/* shown until the first status event, with which the stream begins */
	snprintf(w->status, sizeof(w->status), "%s", s ? s : "?");

	int64_t failing_since = 0; /* when the current run of failures began; 0 = none */
	int64_t backoff = WAIT_BACKOFF_MIN_MS;
	for (;;) {
		char suffix[64], target[CLIENT_TARGET_MAX];
		snprintf(suffix, sizeof(suffix), "/events?after=%" PRId64, w->last_seq);
		if (client_task_target(target, sizeof(target), w->id, suffix, &err) < 0)
			return cli_fail("wait: %s", err.msg);
		w->events = 0;
		sse_parser_init(&w->sse, on_event, w);
		int64_t started = http_now_ms();
		err = (struct error){0};
		r = client_stream(&w->c, target, "text/event-stream", w->deadline, 0, on_body, w,
				  &err);
		sse_parser_finish(&w->sse);
		sse_parser_release(&w->sse);
		if (error_is_set(&w->fatal)) {
			undraw(w);
			return cli_fail("wait: %s", w->fatal.msg);
		}
		if (r == -ETIMEDOUT && out_of_time(w))
			return timed_out(w, timeout_arg);
		if (is_answer(w, r)) {
			undraw(w);
			return cli_fail("wait: %s", err.msg);
		}

		/* the stream ended or broke: does the task say it is over? */
		bool worked = w->c.last_status / 100 == 2 &&
			      (w->events > 0 || http_now_ms() - started >= WAIT_STREAM_OK_MS);
		if (worked) {
			failing_since = 0;
			backoff = WAIT_BACKOFF_MIN_MS;
		}
		if (!failing_since)
			failing_since = http_now_ms();
		struct error gerr = {0};
		_cleanup_json_ json_t *task = NULL;
		r = get_task(w, task_target, failing_since + WAIT_RECONNECT_MS, &task, &gerr);
		if (r == -ETIMEDOUT)
			return timed_out(w, timeout_arg);
		if (r < 0) {
			undraw(w);
			if (is_answer(w, r))
				return cli_fail("wait: %s", gerr.msg);
			return cli_fail("wait: gave up after %ds without agentboxd: %s",
					WAIT_RECONNECT_MS / 1000, gerr.msg);
		}
		const char *now = json_string_value(json_object_get(task, "status"));
		if (client_status_is_final(now)) {
			view_task(w, task);
			return finish(w, task);
		}
		/*
		 * agentboxd answers, but the stream did not carry us to the end:
		 * try it again, slower each time it fails at once.
		 */
		failing_since = 0;
		if (!worked) {
			pause_ms(backoff, w->deadline);
			backoff =
			    backoff * 2 > WAIT_BACKOFF_MAX_MS ? WAIT_BACKOFF_MAX_MS : backoff * 2;
		}
		if (out_of_time(w))
			return timed_out(w, timeout_arg);
	}
}

int verb_wait(int argc, char **argv)
{
	const char *socket_path = NULL, *timeout_arg = NULL;
	uint64_t timeout_ms = 0;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case OPT_TIMEOUT:
			if (parse_duration_ms(optarg, &timeout_ms) < 0 || timeout_ms == 0 ||
			    timeout_ms > INT64_MAX / 2)
				return cli_fail(
				    "wait: --timeout: '%s' is not a duration (e.g. 90s, 2h)",
				    optarg);
			timeout_arg = optarg;
			break;
		case OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error("wait", opt, argv);
		}
	}
	if (argc - optind != 1)
		return cli_fail("wait: give one task ID (see agentbox wait --help)");

	struct waiter w = {
	    .id = argv[optind],
	    .live = isatty(STDOUT_FILENO),
	    .deadline = timeout_ms ? http_now_ms() + (int64_t)timeout_ms : 0,
	    .progress = json_object(),
	};
	struct error err = {0};
	if (!w.progress)
		return cli_fail("wait: out of memory");
	int rc;
	if (client_init(&w.c, socket_path, &err) < 0)
		rc = cli_fail("wait: %s", err.msg);
	else
		rc = follow(&w, timeout_arg);
	client_release(&w.c);
	json_decref(w.progress);
	return rc;
}
