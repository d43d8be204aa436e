/*
 * client.h - the agentbox command's side of the agentboxd API: where the
 * daemon is, one JSON call, one stream, and the daemon's errors as one
 * line for a person. Built on http-client.h; JSON is jansson's.
 *
 * Where the daemon is, first match wins:
 *   --socket PATH (the caller's option)   a unix socket
 *   AGENTBOX_URL=https://HOST[:PORT]      TLS over TCP (http-client.h's URLs)
 *   AGENTBOX_URL=http://HOST[:PORT]       TCP
 *   AGENTBOX_URL=unix:/path               a unix socket
 *   AGENTBOX_HOST=/path                   a unix socket
 *   AGENTBOX_HOST=HOST:PORT               TCP
 *   otherwise                             CLIENT_DEFAULT_SOCKET
 * and, over any transport, AGENTBOX_KEY (else AGENTBOX_TOKEN, its
 * older name), if set, is sent as "Authorization: Bearer". Over https the
 * server's certificate must verify (client/tls.h) against the CAs of
 * client_set_cacert() (--cacert), else of AGENTBOX_CACERT, else the
 * system's; one that does not is -EKEYREJECTED, and the message says how
 * to give the CA when none was.
 *
 * Errors: 0 or -errno, and a struct error whose message is ready to print
 * after "agentbox: VERB: ". When the daemon answered with an error (4xx,
 * 5xx), the message is the daemon's own, followed by its stable code,
 *	no task tsk_... (not_found)
 * c->last_status holds the HTTP status (0 when no response came, so a
 * caller can tell "the daemon said no" from "the daemon is not there";
 * a stream sets it when its body starts, so it stays set if the stream
 * breaks later),
 * and the return value is -ENOENT (404), -EINVAL (400), -EACCES (401),
 * -EBUSY (409), -E2BIG (413) or -EREMOTEIO (anything else).
 * A message may quote what the daemon sent as it came (its own message,
 * which may quote a task's or a sandbox's text): it is for a terminal only
 * through term_escape() (term.h), as the CLI's cli_fail() prints it.
 *
 * Ownership: a struct client owns its Authorization line
 * (client_release()); JSON returned is the caller's (json_decref()).
 */
#ifndef AGENTBOX_CLIENT_CLIENT_H
#define AGENTBOX_CLIENT_CLIENT_H

#include "base/error.h"
#include "client/http-client.h"
#include "client/term.h"

#include <jansson.h>
#include <stdint.h>

#define CLIENT_DEFAULT_SOCKET "/run/agentbox/agentbox.sock"

/* The help text every daemon verb ends its option list with. */
#define CLIENT_HELP_SOCKET                                                                         \
	"  --socket PATH   agentboxd's unix socket (default $AGENTBOX_HOST, else\n"                \
	"                  " CLIENT_DEFAULT_SOCKET ")\n" CLIENT_HELP_ENVIRONMENT
/* The environment variables every daemon verb reads, after a blank line. */
#define CLIENT_HELP_ENVIRONMENT                                                                    \
	"\n"                                                                                       \
	"environment:\n"                                                                           \
	"  AGENTBOX_URL    https://HOST:PORT, http://HOST:PORT or unix:/PATH; before\n"            \
	"  AGENTBOX_HOST   /path/to/socket, or HOST:PORT to use TCP\n"                             \
	"  AGENTBOX_KEY    the API key to send (abx_...); AGENTBOX_TOKEN, its older\n"             \
	"                  name, when it is not set\n"                                             \
	"  AGENTBOX_CACERT the CAs (PEM) an https server's certificate must come from,\n"          \
	"                  unless `agentbox --cacert FILE VERB` (default: the system's)\n"
#define CLIENT_CONNECT_TIMEOUT_MS 5000
#define CLIENT_READ_TIMEOUT_MS	  30000
/* Bytes of AGENTBOX_KEY (or AGENTBOX_TOKEN). */
#define CLIENT_TOKEN_MAX 4096
/* Bytes of a request path we build ("/v1/tasks/ID/events?after=N"). */
#define CLIENT_TARGET_MAX 1024
/* Bytes of a path we keep (--cacert, AGENTBOX_CACERT). */
#define CLIENT_PATH_MAX 4096
/* Bytes of a task id we put in a path. */
#define CLIENT_ID_MAX 64

struct client {
	struct http_endpoint ep;
	char *auth_header;	      /* "Authorization: Bearer ..." or NULL */
	int connect_timeout_ms;	      /* CLIENT_CONNECT_TIMEOUT_MS unless changed */
	int read_timeout_ms;	      /* CLIENT_READ_TIMEOUT_MS unless changed; streams use none */
	int last_status;	      /* the last response's HTTP status; 0 = none came */
	char cacert[CLIENT_PATH_MAX]; /* https: the CA file; "" = the system's store */
};

/*
 * The command's --cacert (path kept, not copied; NULL = none), for every
 * client_init() after it. An explicit --cacert with an endpoint that is
 * not https is an error there; AGENTBOX_CACERT is then ignored.
 */
void client_set_cacert(const char *path);

/* Fill c from socket_path (NULL = not given) and the environment. */
int client_init(struct client *c, const char *socket_path, struct error *err);
void client_release(struct client *c);

/*
 * One request, the most general form; client_call() and client_stream()
 * below are the usual ones. The body is at most one of: json (sent as
 * application/json), body/body_len (raw bytes), or body_len bytes pulled
 * from read_body (http-client.h); raw bodies go as content_type, NULL =
 * application/octet-stream. A 2xx answer goes to on_body as it arrives
 * when that is set (then *ret is left alone), else it is parsed as JSON
 * into *ret (ret may be NULL to drop it). An error answer is always read
 * whole and reported as in the header comment above.
 */
struct client_request {
	const char *method; /* "GET", "POST", "PUT", "DELETE" */
	const char *target; /* "/v1/sandboxes/ID/files?path=..." */
	const json_t *json;
	const char *body;
	size_t body_len;
	http_body_reader_fn read_body;
	void *read_body_data;
	const char *content_type;
	const char *accept; /* the Accept header's value; NULL = application/json */
	http_body_fn on_body;
	void *data; /* for on_body */
	/*
	 * How long the answer may pause: 0 = c->read_timeout_ms, -1 = forever
	 * (a stream that lasts as long as what it follows).
	 */
	int read_timeout_ms;
	int64_t deadline_ms; /* http_now_ms() by which it all ends; 0 = none */
};

int client_request(struct client *c, const struct client_request *req, json_t **ret,
		   struct error *err);

/*
 * One request with an optional JSON body (sent as application/json) and a
 * JSON answer: on 2xx, *ret gets the parsed body (a JSON value of any
 * kind; ret may be NULL to drop it).
 */
int client_call(struct client *c, const char *method, const char *target, const json_t *body,
		json_t **ret, struct error *err);

/*
 * A GET whose 2xx body is handed to fn as it arrives; accept is the
 * Accept header's value (NULL = any). Returns when the body ends, when fn
 * returns > 0, when nothing came for read_timeout_ms (0 = wait forever,
 * as streams that follow a task do), or by deadline_ms (http_now_ms(); 0
 * = none); running out of time is -ETIMEDOUT. An error answer is
 * reported as for client_call().
 */
int client_stream(struct client *c, const char *target, const char *accept, int64_t deadline_ms,
		  int read_timeout_ms, http_body_fn fn, void *data, struct error *err);

/* Pages client_list() follows at most: a daemon that never ends a list cannot keep us. */
#define CLIENT_PAGES_MAX 100000

/*
 * One page of a list: items is the page's array (borrowed), page counts
 * from 0. Return 0 to go on, or -errno with err set to stop.
 */
typedef int (*client_page_fn)(json_t *items, int page, void *data, struct error *err);

/*
 * A list route (GET /v1/tasks, /v1/sandboxes), page after page: target
 * (which may carry a query already), then target with after=<next> for as
 * long as the answer's "next" is an id; each page's array called key
 * ("tasks", "sandboxes") goes to fn as it arrives. 0 after the last page,
 * or -errno with err set (pages before the failure have reached fn).
 */
int client_list(struct client *c, const char *target, const char *key, client_page_fn fn,
		void *data, struct error *err);

/* ---- what the verbs share (task-view.c) ------------------------------- */

/*
 * Does id look like an id, safe to put in a path: 1 to CLIENT_ID_MAX
 * bytes of [A-Za-z0-9_-]? Whether it names anything is agentboxd's to say.
 */
bool client_id_is_valid(const char *id);

/*
 * "/v1/tasks/ID" + suffix into buf. The id must pass client_id_is_valid()
 * before it goes into a path: -EINVAL with err set otherwise ("'x' is not
 * a task id").
 */
int client_task_target(char *buf, size_t size, const char *id, const char *suffix,
		       struct error *err);

/* "/v1/sandboxes/ID" + suffix into buf, as client_task_target(). */
int client_sandbox_target(char *buf, size_t size, const char *id, const char *suffix,
			  struct error *err);

/*
 * "/v1/sandboxes/ID/files?path=PATH", PATH percent-encoded, malloc'd into
 * *ret. -EINVAL for a bad id, -ENOMEM.
 */
int client_sandbox_file_target(const char *id, const char *path, char **ret, struct error *err);

/*
 * The exit status `agentbox wait` returns for a task that ended in
 * status: 0 succeeded, 1 failed, 137 oom_killed, 124 timed_out,
 * 130 cancelled, 3 lost; -1 for a status that is not final or unknown.
 */
int client_status_exit_code(const char *status);

/* Is status one a task never leaves? */
bool client_status_is_final(const char *status);

/*
 * One call on a task's route, start to end: build the target from id and
 * suffix (NULL = the task itself), connect (socket_path as for
 * client_init()), call, disconnect. 0 or -errno with err filled.
 */
int client_task_request(const char *socket_path, const char *method, const char *id,
			const char *suffix, json_t **ret, struct error *err);

/*
 * As client_task_request(), on a sandbox's route, with an optional JSON
 * body (POST .../timeout takes one).
 */
int client_sandbox_request(const char *socket_path, const char *method, const char *id,
			   const char *suffix, const json_t *body, json_t **ret, struct error *err);

/*
 * Print JSON indented by two spaces, with a newline. What a terminal would
 * obey (C1 and bidi controls, DEL) is written as JSON escapes (\u009b;
 * term.h, TERM_JSON): the same JSON value, safe on a terminal. 0 or -EIO.
 */
int client_print_json(FILE *f, const json_t *json);

/*
 * A progress object as "key=value key=value" (strings bare, other values
 * as compact JSON), escaped for a terminal (term.h), appended to l, which
 * cuts it with "..." where it does not fit.
 */
void client_view_progress(struct term_line *l, const json_t *progress);

/* client_view_progress() into buf, alone. "" for none. */
void client_format_progress(const json_t *progress, char *buf, size_t size);

/*
 * A command array as one line, arguments with spaces quoted, escaped for
 * a terminal, cut to size with "...".
 */
void client_format_command(const json_t *command, char *buf, size_t size);

/* ---- a task's output on a terminal (logs-view.c) ------------------------ */

/*
 * The most output GET /v1/tasks/{id}/logs sends (docs/api.md: 64 MiB);
 * past it, the body is that much after a first line that says so.
 */
#define CLIENT_LOGS_MAX (64u << 20)

struct client_logs_view {
	size_t headers;	 /* lines marked as agentboxd's */
	size_t unmarked; /* lines that read "[agentbox: attempt N]" and are not marked */
};

/*
 * Write body, the answer of GET /v1/tasks/{id}/logs without follow, to f
 * for a terminal: the output escaped (term.h; \n and \t kept), and each
 * line that agentboxd must have written (an attempt header, the notice of
 * a cut) marked with TERM_MARK_ON/OFF instead. attempts is the task's
 * attempt count when agentboxd answered (-1: not known). A task can write
 * a header's line itself; a header is marked only when no reading of the
 * body makes it the task's (logs-view.c says how), so a marked line is
 * always agentboxd's, and the others are shown as output (counted in
 * *ret, which may be NULL). 0, or -EIO (f failed) or -ENOMEM.
 */
int client_logs_render(const char *body, size_t len, int64_t attempts, FILE *f,
		       struct client_logs_view *ret);

/* "2024-05-01T12:00:00.123Z" (any offset) as ms since the epoch. 0 or -EINVAL. */
int client_parse_time(const char *s, int64_t *ret_ms);

/* A short age: "12s", "5m", "3h", "2d". */
void client_format_age(int64_t ms, char *buf, size_t size);

#endif
