/*
 * api.h - the HTTP+JSON API of agentboxd, without sockets or threads.
 *
 * The HTTP server (the daemon's) reads a request, fills a struct
 * api_request and calls api_handle(), which always fills a struct
 * api_response: a success, or an error in the one shape of errors.h.
 * Everything the API decides (routes, auth, limits, validation, status
 * codes, JSON) lives here, so it is tested without a socket
 * (tests/unit/test-api.c) and documented in docs/api.md.
 *
 * Streams are the server's: api_request_wants_stream() says which
 * requests want one (GET /v1/tasks/{id}/logs?follow=1, and GET
 * /v1/tasks/{id}/events with Accept: text/event-stream), and
 * api_stream_begin() runs every check api_handle() would before a stream
 * starts. Anything else goes to api_handle(), which answers in one piece.
 *
 * Ownership: the request's strings belong to the caller and are only
 * read during the call. The response's body is owned by the response;
 * api_response_release() frees it. The context's store is used from the
 * calling thread only (a store is not thread-safe).
 */
#ifndef AGENTBOX_API_API_H
#define AGENTBOX_API_API_H

#include "api/errors.h"
#include "core/sandbox.h"
#include "core/task.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request body larger than this is refused with 413; the server stops
 * reading at API_BODY_MAX + 1 bytes and passes what it has. */
#define API_BODY_MAX (4u << 20)
/* The most bytes one GET .../logs returns: the tail of the output. */
#define API_LOGS_MAX (64u << 20)
/* A list response stops adding tasks past this many bytes (next is set). */
#define API_LIST_BODY_MAX (16u << 20)
/* Bytes of a query string; more is invalid_field "query". */
#define API_QUERY_MAX	   4096
#define API_LIST_DEFAULT   50
#define API_EVENTS_DEFAULT 100

struct api_request {
	const char *method; /* "GET", "POST", ... (case-sensitive) */
	const char *path;   /* "/v1/tasks/tsk_..." without '?' and query */
	const char *query;  /* after '?', still percent-encoded; NULL = none */
	const char *body;   /* body_len bytes, not NUL-terminated; NULL if 0 */
	size_t body_len;
	const char *content_type;  /* the Content-Type header, or NULL */
	const char *authorization; /* the Authorization header, or NULL */
	const char *accept;	   /* the Accept header, or NULL */
};

struct api_response {
	int status;		  /* 200, 201, 4xx, 5xx */
	const char *content_type; /* a static string */
	char *body;		  /* owned; NUL-terminated; body_len bytes */
	size_t body_len;
	char allow[64];		   /* 405: the Allow header to send; else "" */
	char www_authenticate[16]; /* 401: the WWW-Authenticate header; else "" */
	char log[ERROR_MSG_MAX];   /* 5xx: why, for the server's log (never sent); else "" */
};

/* Free the body; the response can be reused. */
void api_response_release(struct api_response *r);

struct api_ctx {
	struct store *store;
	const char *state_dir;	 /* holds tasks/<id>/attempt-<N>/output */
	const char *token;	 /* NULL: no auth (unix socket); else Bearer token required */
	int64_t (*now_ms)(void); /* wall clock in ms; NULL = CLOCK_REALTIME */
	/* Called after a task was stored as queued (wake the scheduler). */
	void (*task_submitted)(void *data);
	/* Called when a running task was asked to cancel (the scheduler kills it). */
	void (*task_cancel_requested)(const char *id, void *data);
	void *hook_data;
};

/*
 * Answer one request. *ret is always filled, errors included, and must be
 * released. Returns 0, or -ENOMEM when not even an error response could
 * be built (then *ret has status 500 and no body).
 */
int api_handle(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret);

/* ---- routes ------------------------------------------------------------ */

enum api_route_id {
	API_ROUTE_HEALTHZ = 0,
	API_ROUTE_TASKS_LIST,
	API_ROUTE_TASKS_CREATE,
	API_ROUTE_TASK_GET,
	API_ROUTE_TASK_CANCEL,
	API_ROUTE_TASK_EVENTS,
	API_ROUTE_TASK_LOGS,
	/* interactive sandboxes: served by the daemon (api_sandbox_begin()) */
	API_ROUTE_SANDBOXES_LIST,
	API_ROUTE_SANDBOXES_CREATE,
	API_ROUTE_SANDBOX_GET,
	API_ROUTE_SANDBOX_DELETE,
	API_ROUTE_SANDBOX_TIMEOUT,
	API_ROUTE_SANDBOX_PAUSE,
	API_ROUTE_SANDBOX_RESUME,
	API_ROUTE_SANDBOX_EXEC,
	API_ROUTE_SANDBOX_PROCESSES,
	API_ROUTE_PROCESS_OUTPUT,
	API_ROUTE_PROCESS_KILL,
	API_ROUTE_FILES_GET,
	API_ROUTE_FILES_PUT,
	API_ROUTE_FILES_DELETE,
	API_ROUTE_COUNT
};

#define API_ROUTE_IS_SANDBOX(id) ((id) >= API_ROUTE_SANDBOXES_LIST && (id) < API_ROUTE_COUNT)

#define API_ROUTE_PUBLIC 0x1u /* no auth even when a token is set */

struct api_route {
	enum api_route_id id;
	const char *method;
	const char *pattern; /* segments; "{id}" matches any one segment */
	unsigned flags;
};

/* The route table, in order; *ret_n gets its length. */
const struct api_route *api_routes(size_t *ret_n);

struct api_match {
	const struct api_route *route; /* NULL: nothing matches method and path */
	bool path_known;	       /* some route has this path (then 405, not 404) */
	char allow[64];		       /* the methods of this path, "GET, POST" */
	const char *param; /* the segment "{id}" matched, in the path; not NUL-terminated */
	size_t param_len;
	const char *param2; /* the segment "{pid}" matched, or NULL */
	size_t param2_len;
};

/* Match method and path against the table. Never fails. */
void api_route_match(const char *method, const char *path, struct api_match *ret);

/* Does this request want a stream the server serves itself (see top)? */
bool api_request_wants_stream(const struct api_request *req);

struct api_stream {
	enum api_route_id route; /* API_ROUTE_TASK_LOGS or API_ROUTE_TASK_EVENTS */
	char id[TASK_ID_SIZE];	 /* the task, known to exist */
	int64_t after_seq;	 /* events: the after= parameter, default 0 */
};

/*
 * Before serving a stream: auth, route, id, query and the task's
 * existence, exactly as api_handle() checks them. 0 with *ret filled, or
 * -EINVAL with *ret_error an error response to send instead (release it),
 * or -ENOMEM.
 */
int api_stream_begin(struct api_ctx *ctx, const struct api_request *req, struct api_stream *ret,
		     struct api_response *ret_error);

/*
 * One event as the API shows it,
 *	{"seq":N,"attempt":A,"type":"progress","data":{...},"time":"..."}
 * in *ret (caller frees). For the server's SSE "data:" lines. 0 or -ENOMEM.
 */
int api_event_json(const struct task_event *ev, char **ret, size_t *ret_len);

/*
 * The file `name` ("output" or "output.len") of attempt N of task id:
 * <state_dir>/tasks/<id>/attempt-<N>/<name>, as GET .../logs reads it
 * (for the server's follow stream). 0, or -ENAMETOOLONG if size is short.
 */
int api_output_path(const char *state_dir, const char *id, uint32_t attempt, const char *name,
		    char *buf, size_t size);

/* ---- interactive sandboxes ------------------------------------------- */

/* A file body (PUT .../files) may be this large; more is 413 file_too_large. */
#define API_FILE_MAX (64u << 20)

/* A sandbox route's request, checked: what the daemon's handler needs. */
struct api_sandbox_call {
	enum api_route_id route;
	char id[TASK_ID_SIZE];	  /* the sandbox; "" for the collection routes */
	long pid;		  /* processes/{pid}; -1 elsewhere */
	char path[1025];	  /* files: the path= parameter, checked; else "" */
	bool list;		  /* files: list=1 */
	bool follow;		  /* output: follow=1; exec: Accept: text/event-stream */
	char status[128];	  /* list: status= as given (the daemon parses it), or "" */
	int64_t limit;		  /* list: limit= */
	char after[TASK_ID_SIZE]; /* list: after=, or "" */
	int64_t now;
};

/* Is this request for a sandbox route (whatever its errors)? */
bool api_request_is_sandbox(const struct api_request *req);

/*
 * Every check api_handle() makes (auth, route, body size, content type,
 * {id}, query), for a sandbox route, and the route's query parsed into
 * *ret. 0, or -EINVAL with *ret_error the error response (release it),
 * or -ENOMEM.
 */
int api_sandbox_begin(struct api_ctx *ctx, const struct api_request *req,
		      struct api_sandbox_call *ret, struct api_response *ret_error);

/* Replace ret's body with the error response of e. 0 or -ENOMEM. */
int api_error_respond(const struct api_error *e, struct api_response *ret);

/* An error response in the one shape (errors.h). 0 or -ENOMEM. */
int api_error_response(struct api_response *ret, enum api_error_code code, const char *field,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A moment as the API shows it: "2024-05-01T12:00:00.123Z", or null for 0. */
json_t *api_time_json(int64_t ms);

/* The sandbox object of the API (docs/api.md), malloc'd; NULL = out of memory. */
char *api_sandbox_json(const struct sandbox_record *s);

/* A JSON response: takes text (malloc'd; NULL = out of memory: 500). */
void api_json_response(struct api_response *ret, int status, char *text);

#endif
