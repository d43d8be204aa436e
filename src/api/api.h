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
 * Every route, tasks and interactive sandboxes alike, goes through the
 * one route table and api_handle(): auth, routing, the shared checks and
 * the handler. The handlers' dependencies are injected: the store, and
 * the fleet of interactive sandboxes as a table of operations
 * (fleet/fleet.h's struct fleet_ops), so every handler is tested without
 * a socket and without a sandbox (tests/unit/test-api*.c).
 *
 * Three answers cannot be a body in one piece, because they last or are
 * large; the handler then checks everything and describes the answer,
 * and the server (libmicrohttpd) serves it (struct api_response.kind):
 *   - a task's logs as they grow and its events as Server-Sent Events
 *     (GET .../logs?follow=1, GET .../events with Accept: text/event-stream);
 *   - a process's output as Server-Sent Events (exec with Accept:
 *     text/event-stream, GET .../processes/{pid}/output?follow=1);
 *   - a file from the sandbox (GET .../files), sent from an fd.
 * And one request body cannot be held in memory: PUT .../files streams
 * into the sandbox through api_upload_begin/write/end(), whose begin runs
 * the same table and checks before the body is read.
 *
 * Ownership: the request's strings belong to the caller and are only
 * read during the call. The response owns its body and its fd;
 * api_response_release() frees and closes them. The context's store is
 * used from the calling thread only (a store is not thread-safe).
 */
#ifndef AGENTBOX_API_API_H
#define AGENTBOX_API_API_H

#include "api/errors.h"
#include "base/websocket.h"
#include "core/quota.h"
#include "api/ratelimit.h"
#include "core/sandbox.h"
#include "core/task.h"
#include "core/tenant.h"
#include "fleet/fleet.h"
#include "image/store.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A request body larger than this is refused with 413; the server stops
 * reading at API_BODY_MAX + 1 bytes and passes what it has. */
#define API_BODY_MAX (4u << 20)
/* The most bytes one GET .../logs returns: the tail of the output. */
#define API_LOGS_MAX (64u << 20)
/* A list response stops adding tasks past this many bytes (next is set). */
#define API_LIST_BODY_MAX (16u << 20)
/* Bytes of a query string; more is invalid_field "query". */
#define API_QUERY_MAX	 4096
#define API_LIST_DEFAULT 50
/* The audit log (audit.c): a 401's row counts one source's refusals of one
 * reason in a window this long; the log keeps this many rows, the oldest
 * pruned past it. */
#define API_AUDIT_WINDOW_MS    60000
#define API_AUDIT_ROWS_DEFAULT 100000 /* api_ctx.audit_rows when 0 (agentboxd --audit-rows) */
#define API_EVENTS_DEFAULT     100

/* Bytes of struct api_ctx's source, its NUL included (an IPv6 address fits). */
#define API_SOURCE_SIZE 64

/*
 * What the audit log records of one request, taken from its call before
 * the call's strings go (api_audit_note()), recorded once it is answered
 * (api_audit_record()). Plain data: strings copied, or static.
 */
struct api_audit_entry {
	bool wanted;  /* a mutating request (POST, PUT, DELETE, PATCH), or a 401 */
	bool refusal; /* a 401: counted, not added */
	int64_t time;
	char tenant[TENANT_NAME_SIZE]; /* "" = none */
	char key_id[KEY_ID_SIZE];
	long uid;		       /* -1 = none */
	const char *method;	       /* static */
	const char *route;	       /* the route table's template; NULL: no route has the path */
	char target[TENANT_NAME_SIZE]; /* an id, a tenant's name or a key id; "" = none */
	const char *reason;	       /* a refusal's, static */
	char source[API_SOURCE_SIZE];
	size_t keep; /* the rows the log keeps (api_ctx.audit_rows; 0: the default) */
};

struct api_request {
	const char *method; /* "GET", "POST", ... (case-sensitive) */
	const char *path;   /* "/v1/tasks/tsk_..." without '?' and query */
	const char *query;  /* after '?', still percent-encoded; NULL = none */
	const char *body;   /* body_len bytes, not NUL-terminated; NULL if 0 */
	size_t body_len;
	const char *content_type;  /* the Content-Type header, or NULL */
	const char *authorization; /* the Authorization header, or NULL */
	const char *accept;	   /* the Accept header, or NULL */
	/* a WebSocket upgrade (exec with "tty"): these headers, or NULL */
	const char *upgrade;	/* Upgrade */
	const char *connection; /* Connection */
	const char *ws_key;	/* Sec-WebSocket-Key */
	const char *ws_version; /* Sec-WebSocket-Version */
	/* Sec-WebSocket-Protocol (its first header), or NULL: agentbox.terminal.v1,
	 * and a browser's key as agentbox.key.<base64url> (terminal-get.h) */
	const char *ws_protocol;
	const char *origin; /* Origin (a browser's handshake), or NULL */
	/* the Last-Event-ID header (a reconnecting event stream's last seq), or NULL */
	const char *last_event_id;
};

/* The routes, in the order of the route table (api_routes()). */
enum api_route_id {
	API_ROUTE_HEALTHZ = 0,
	API_ROUTE_TASKS_LIST,
	API_ROUTE_TASKS_CREATE,
	API_ROUTE_TASK_GET,
	API_ROUTE_TASK_CANCEL,
	API_ROUTE_TASK_EVENTS,
	API_ROUTE_TASK_LOGS,
	/* interactive sandboxes (sandboxes.c, sandbox-exec.c, sandbox-files.c) */
	API_ROUTE_SANDBOXES_LIST,
	API_ROUTE_SANDBOXES_CREATE,
	API_ROUTE_SANDBOX_GET,
	API_ROUTE_SANDBOX_DELETE,
	API_ROUTE_SANDBOX_TIMEOUT,
	API_ROUTE_SANDBOX_PAUSE,
	API_ROUTE_SANDBOX_RESUME,
	API_ROUTE_SANDBOX_EXEC,
	API_ROUTE_SANDBOX_PROCESSES,
	API_ROUTE_SANDBOX_NETWORK,
	API_ROUTE_SANDBOX_COMMIT,
	API_ROUTE_PROCESS_OUTPUT,
	API_ROUTE_PROCESS_KILL,
	API_ROUTE_FILES_GET,
	API_ROUTE_FILES_PUT,
	API_ROUTE_FILES_DELETE,
	/* tenants and their keys (tenants.c): admins only, but /v1/me */
	API_ROUTE_TENANTS_LIST,
	API_ROUTE_TENANTS_CREATE,
	API_ROUTE_TENANT_GET,
	API_ROUTE_TENANT_DELETE,
	API_ROUTE_TENANT_SET,
	API_ROUTE_KEYS_LIST,
	API_ROUTE_KEYS_CREATE,
	API_ROUTE_KEY_REVOKE,
	API_ROUTE_ME,
	/* the audit log (audit.c): admins only */
	API_ROUTE_AUDIT,
	/* images (images.c): any principal reads, an admin changes */
	API_ROUTE_IMAGES_LIST,
	API_ROUTE_IMAGES_IMPORT,
	API_ROUTE_IMAGES_BOOTSTRAP,
	API_ROUTE_IMAGES_PRUNE,
	API_ROUTE_IMAGE_EXPORT, /* before GET {ref}, which would take "NAME/export" */
	API_ROUTE_IMAGE_GET,
	API_ROUTE_IMAGE_DELETE,
	API_ROUTE_IMAGES_PULL,
	/* a task's artifacts (artifacts.c) */
	API_ROUTE_TASK_ARTIFACTS,
	API_ROUTE_TASK_ARTIFACT, /* {path}: the rest of the path */
	/* an ended task's rows and files (tasks.c) */
	API_ROUTE_TASK_DELETE,
	/* a terminal as a GET handshake, the query its exec request (a browser's) */
	API_ROUTE_SANDBOX_EXEC_GET,
	/* a task's input, uploaded ahead of it (inputs.c) */
	API_ROUTE_INPUTS_CREATE,
	API_ROUTE_COUNT
};

#define API_ROUTE_IS_SANDBOX(id)                                                                   \
	(((id) >= API_ROUTE_SANDBOXES_LIST && (id) <= API_ROUTE_FILES_DELETE) ||                   \
	 (id) == API_ROUTE_SANDBOX_EXEC_GET)

/* What a response carries: a body, or what the server must serve (see top). */
enum api_response_kind {
	API_RESPONSE_BODY = 0,	     /* body, body_len */
	API_RESPONSE_FILE,	     /* fd: size bytes of a regular file from offset 0 */
	API_RESPONSE_TASK_STREAM,    /* task: a task's logs or events as they come */
	API_RESPONSE_PROCESS_STREAM, /* process: a process's output and exit as SSE */
	API_RESPONSE_PIECES,	     /* pieces: a body of known length read as it is sent */
	API_RESPONSE_TERMINAL,	     /* terminal: 101, then a process's terminal over WebSocket */
};

/*
 * A body made of pieces, each text or bytes [off, off + len) of a file
 * (a task's logs: the output files of its attempts, with the lines
 * between them). The server reads it with api_pieces_read() into its own
 * fixed buffer as the client takes it, so a body of any size costs no
 * more memory than that buffer. Owns its fds.
 */
struct api_piece {
	char text[96]; /* when fd is -1 */
	int fd;
	uint64_t off, len;
};
struct api_pieces {
	uint64_t total; /* the sum of the pieces' len: the Content-Length */
	size_t n;
	struct api_piece piece[];
};

/*
 * Copy up to max bytes of the body from position pos into buf. Returns
 * the bytes copied (0 only at pos == total), or -EIO when a file turned
 * out shorter than it was when the response was made: the server then
 * ends the response with an error instead of sending less than it said.
 */
ssize_t api_pieces_read(const struct api_pieces *ps, uint64_t pos, char *buf, size_t max);

/* Close the pieces' fds and free them; NULL is fine. */
void api_pieces_free(struct api_pieces *ps);

/* A task's stream: which one, and from where. */
struct api_stream {
	enum api_route_id route; /* API_ROUTE_TASK_LOGS or API_ROUTE_TASK_EVENTS */
	char id[TASK_ID_SIZE];	 /* the task, known to exist */
	int64_t after_seq;	 /* events: after= or Last-Event-ID, the later; default 0 */
	uint64_t offset;	 /* logs: the bytes of the stream to skip (offset=); 0 */
};

/*
 * A terminal (exec with "tty", upgraded to WebSocket; docs/api.md): the
 * response's fd is the shim's connection that reports the exit, a waiter
 * of the fleet's as for a process stream; master is the terminal's
 * master (owned: api_response_release() closes it, or whoever takes it);
 * key the client's Sec-WebSocket-Key, checked, for the server's Accept.
 */
struct api_terminal {
	char id[SANDBOX_ID_SIZE]; /* the sandbox */
	long pid;
	int master;
	char key[WS_KEY_LEN + 1];
	bool protocol; /* the client offered subprotocols: the 101 names API_WS_PROTOCOL */
	const struct fleet_ops *ops;
	struct fleet *fleet;
};

/*
 * A process's output stream: fd is the shim's connection reporting it,
 * a waiter of the fleet's (fleet_done() gives it back: whoever takes the
 * fd calls done(fleet, id, fd) when finished with it).
 */
struct api_process_stream {
	char id[SANDBOX_ID_SIZE]; /* the sandbox */
	long pid;
	const struct fleet_ops *ops;
	struct fleet *fleet;
};

struct api_response {
	int status;		  /* 200, 201, 4xx, 5xx */
	const char *content_type; /* a static string */
	char *body;		  /* owned; NUL-terminated; body_len bytes */
	size_t body_len;
	char allow[64];		   /* 405: the Allow header to send; else "" */
	char www_authenticate[16]; /* 401: the WWW-Authenticate header; else "" */
	uint32_t retry_after;	   /* 429 rate_limited: the Retry-After header (s); else 0 */
	char log[ERROR_MSG_MAX];   /* 5xx: why, for the server's log (never sent); else "" */
	char audit[ERROR_MSG_MAX]; /* the audit row could not be recorded: why, for the
				    * server's log (the answer stands); else "" */
	/*
	 * The request's audit row, when api_ctx.audit_deferred left it to the
	 * server (audit_pending): recorded with api_audit_commit() once the
	 * answer is sent, so that the client does not wait on it.
	 */
	bool audit_pending;
	struct api_audit_entry audit_note;
	enum api_error_code audit_code;
	enum api_response_kind kind;
	int fd;			/* FILE, PROCESS_STREAM: owned (api_response_take_fd()) */
	uint64_t size;		/* FILE */
	struct api_stream task; /* TASK_STREAM */
	struct api_process_stream process; /* PROCESS_STREAM */
	struct api_terminal terminal;	   /* TERMINAL: fd is the shim's connection */
	struct api_pieces *pieces;	   /* PIECES: owned (take it: TAKE_PTR) */
	/* FILE of GET .../files?format=tar: entries left out (not regular files or
	 * directories), sent as API_FILES_TAR_SKIPPED_HEADER; else 0 */
	uint64_t skipped;
};

/* Free the body, close the fd; the response can be reused. */
void api_response_release(struct api_response *r);

/* The response's fd, now the caller's (-1 when it has none). */
int api_response_take_fd(struct api_response *r);

/*
 * The most one sandbox or task may ask for on this host, whatever the
 * request's own limits allow (SPEC_*_MAX): a request over one of them is
 * 400 invalid_field naming it. The daemon sets them from the host's size
 * (agentboxd --max-memory, --max-disk, --max-pids). 0 = no more than SPEC_*_MAX.
 */
struct api_host_limits {
	uint64_t memory_bytes;
	uint64_t disk_bytes;
	uint64_t pids;
	/* tasks queued at once: a submit past it is 503 queue_full (0 = no bound) */
	uint64_t queued_max;
};

/*
 * A local user of the unix socket that agentboxd --socket-user UID=TENANT
 * makes a member of a tenant (root is an admin of TENANT_DEFAULT).
 */
struct api_local_user {
	uid_t uid;
	char tenant[TENANT_NAME_SIZE];
};

/* The id of the legacy admin key: an older state directory's single token (auth.c). */
#define API_LEGACY_KEY_ID "000000000000"

/* Who asks (api_authenticate()). */
struct api_principal {
	char tenant[TENANT_NAME_SIZE];
	enum key_role role;
	char key_id[KEY_ID_SIZE]; /* "" for a local user on the unix socket */
	long uid;		  /* that local user's uid; -1 for a key */
};

/*
 * The rate limits the server applies before a request's body
 * (api_admit(); the buckets are api/ratelimit.h's). Each may be NULL: no
 * such limit.
 */
struct api_rate {
	/* one bucket per principal: its key id, or "uid:N" for a local user */
	struct ratelimit *principals;
	/* one bucket per source (api_rate_source()), charged by each failed auth */
	struct ratelimit *auth_failures;
	int64_t (*now_ms)(void); /* a monotonic clock in ms; NULL = CLOCK_MONOTONIC */
};

struct api_ctx {
	struct store *store;
	const char *state_dir; /* holds tasks/<id>/attempt-<N>/output */
	/*
	 * Who may ask (auth.c): over TCP (tcp) every request needs a key; on
	 * the unix socket, peer_uid (SO_PEERCRED) is root, a local user of
	 * local_users, or a request with a key.
	 */
	bool tcp;
	long peer_uid; /* -1: unknown */
	/*
	 * Where the request comes from, for rate limits and the audit log:
	 * the peer's address over TCP ("127.0.0.1", "::1"), "unix:uid=N" on
	 * the unix socket, "" when unknown.
	 */
	char source[API_SOURCE_SIZE];
	const struct api_rate *rate; /* NULL: no rate limits */
	const struct api_local_user *local_users;
	size_t nlocal_users;
	int64_t (*now_ms)(void);	    /* wall clock in ms; NULL = CLOCK_REALTIME */
	const struct api_host_limits *host; /* NULL: none beyond SPEC_*_MAX */
	/* The request's audit row is left in the response (audit_pending) for the
	 * server to record once the answer is sent; false: recorded before. */
	bool audit_deferred;
	/* The audit log's rows kept, oldest pruned past it (1..STORE_AUDIT_ROWS_MAX;
	 * 0: API_AUDIT_ROWS_DEFAULT). */
	size_t audit_rows;
	/*
	 * The origins whose pages may open a terminal (agentboxd --allow-origin,
	 * "https://host[:port]"): a terminal's handshake that carries Origin is
	 * 403 unless it is one of these (terminal-get.h). NULL/0: none may.
	 */
	const char *const *origins;
	size_t norigins;
	/* Every tenant's quotas where its own do not say (quotas.c); NULL: none. */
	const struct quota *quota_defaults;
	/*
	 * Called by a handler that is about to wait on a sandbox (a blocking
	 * exec) and will make no more store calls: the server gives the
	 * store back to its pool now, so that no store connection is held
	 * while a command runs, and sets store to NULL. NULL = keep it.
	 */
	void (*store_release)(struct api_ctx *ctx);
	/*
	 * After store_release: take a store again (sets ctx->store), for the
	 * audit row of the request. NULL, or one that leaves it NULL: the row
	 * is not recorded (res->audit says so).
	 */
	void (*store_acquire)(struct api_ctx *ctx);
	/* The interactive sandboxes: NULL ops = none (their routes answer 500). */
	const struct fleet_ops *fleet_ops;
	struct fleet *fleet;
	/*
	 * Called before a task or sandbox with a network is admitted: ready
	 * the host (agentbox's table, forwarding). 0, or -errno with err.
	 * NULL: this daemon gives sandboxes no network (503).
	 */
	int (*network_ready)(void *data, struct error *err);
	/*
	 * Called before a task or sandbox with secrets is admitted: ready the
	 * CA their proxy signs with. 0, or -errno with err (503 naming
	 * "secrets"). NULL: this daemon takes no secrets (503).
	 */
	int (*secrets_ready)(void *data, struct error *err);
	/* The image store (image/store.h): NULL = none (the image routes answer 500). */
	struct image_store *images;
	/* The largest archive POST /v1/images/import takes; 0 = IMAGE_IMPORT_MAX. */
	uint64_t image_import_max;
	/* How long an input no task took is kept (agentboxd --input-ttl); 0 = the default. */
	uint64_t input_ttl_s;
	/* POST /v1/images/pull's registries (image/pull.h); NULL = none configured. */
	const struct image_registries *registries;
	/* POST /v1/images/bootstrap's mirror and keyring (image/bootstrap.h); NULL: its defaults.
	 */
	const char *debian_mirror;
	const char *debian_keyring;
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

/*
 * Who asks, for req (auth.c: the rules): 0 with *ret, or -EINVAL with e
 * (401 unauthorized: no key, an unknown, revoked or expired one, a local
 * user that is no tenant's), or -EIO (500). Needs ctx->store, and only
 * the request line and headers: the server asks it before reading a
 * body too, so that an unauthorized client gets its 401 at once. A
 * public route (healthz) needs none: api_route_is_public().
 */
int api_authenticate(struct api_ctx *ctx, const struct api_request *req, int64_t now,
		     struct api_principal *ret, struct api_error *e);

/*
 * The quotas of tenant now (core/quota.h): defaults (NULL: none) with the
 * tenant's own over them (quotas.c). 0, or -ENOENT (no such tenant) or
 * another -errno with err.
 */
int api_tenant_limits(struct store *st, const struct quota *defaults, const char *tenant,
		      struct quota *ret, struct error *err);

/*
 * May this request go on, before its body is read? A public route
 * (healthz) always may and is charged nothing. Else, in order:
 *   - a request that carries a key (Authorization) from a source whose
 *     failed auths have used up its bucket is 429 rate_limited, before its
 *     key is looked up: a flood of bad keys costs no store lookups;
 *   - auth (api_authenticate()): a 401 of a request that carried a key
 *     takes a token from the source's bucket of failed auths (one without
 *     a key was refused without a lookup, as cheaply as a 429 would be,
 *     and must not lock the address's good keys out);
 *   - the principal's bucket (its key id, or "uid:N" for a local user of
 *     the unix socket) gives a token, or it is 429 rate_limited. Root on
 *     the unix socket without a key is not charged.
 * A 429 has Retry-After (retry_after) and names its limit in the body.
 * true: go on, *ret untouched; false: *ret is the answer (release it).
 * Needs ctx->store for auth; ctx->rate NULL: auth alone.
 */
bool api_admit(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret);

/*
 * The name a source's bucket of failed auths has: source itself, but an
 * IPv6 address's /64 ("2001:db8:1:2::/64"), which one host or user
 * usually has whole, and all of 127.0.0.0/8 as one ("127.0.0.0/8"),
 * which are all this host's. An IPv4 address in IPv6 (::ffff:a.b.c.d)
 * is the IPv4 one. out has API_SOURCE_SIZE bytes.
 */
void api_rate_source(const char *source, char out[API_SOURCE_SIZE]);

/*
 * Record the audit row res left pending (res->audit_pending), with
 * res->status, in st: what api_handle() would have done before answering.
 * Never fails the request: a row the store refuses is said in why (for
 * the server's log; "" when recorded). st NULL: not recorded, said so.
 */
void api_audit_commit(const struct api_response *res, struct store *st, char why[ERROR_MSG_MAX]);

/* Does path name a public route (no auth at all)? */
bool api_route_is_public(const char *path);

/* An error response in the one shape (errors.h), into ret. 0 or -ENOMEM. */
int api_error_response(struct api_response *ret, enum api_error_code code, const char *field,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- routes ------------------------------------------------------------ */

#define API_ROUTE_PUBLIC 0x1u /* no auth at all */
/* a raw body, streamed (api_upload_*): up to API_FILE_MAX (a file),
 * API_FILES_TAR_BYTES_MAX (a directory's tar, format=tar),
 * api_ctx.image_import_max (an image's archive), or SPEC_FILE_INPUT_MAX
 * (a task's input) */
#define API_ROUTE_RAW_BODY 0x2u

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
	const char *pattern; /* the template of the first route with this path, or NULL */
};

/* Match method and path against the table. Never fails. */
void api_route_match(const char *method, const char *path, struct api_match *ret);

/* Does this request want a stream the server serves itself (see top)? */
bool api_request_wants_stream(const struct api_request *req);

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

/*
 * A directory as a tar (GET and PUT .../files?format=tar, sandbox-files-tar.c).
 * GET: at most API_FILES_TAR_ENTRIES_MAX entries (the directory itself
 * included), API_FILES_TAR_DEPTH_MAX levels below it, and a tar of at most
 * API_FILES_TAR_BYTES_MAX bytes, spooled to an unnamed temporary file of the
 * state directory's; more is 413 file_too_large. PUT: a body (the tar) of at
 * most API_FILES_TAR_BYTES_MAX bytes, spooled the same way, with at most
 * API_FILES_TAR_ENTRIES_MAX members; more is 413 body_too_large.
 */
#define API_FILES_TAR_ENTRIES_MAX 100000
#define API_FILES_TAR_DEPTH_MAX	  64
#define API_FILES_TAR_BYTES_MAX	  (UINT64_C(256) << 20)
/* The response header of GET .../files?format=tar: how many entries were left out. */
#define API_FILES_TAR_SKIPPED_HEADER "X-Agentbox-Skipped"

/* An upload in progress (PUT .../files): the body goes into the sandbox. */
struct api_upload;

/* Does this request's route take a raw body, streamed (api_upload_begin())? */
bool api_request_takes_raw_body(const struct api_request *req);

/*
 * Before the body of a raw-body request: every check api_handle() makes
 * (auth, route, {id}, query), the sandbox's state, and the temporary file
 * the sandbox opens for it. Always returns an upload (NULL only when out
 * of memory); one that failed keeps its error response and discards the
 * body. It keeps ctx's fleet, not its store: the store is used only here.
 */
struct api_upload *api_upload_begin(struct api_ctx *ctx, const struct api_request *req);

/*
 * A chunk of the body. An upload refused before or during the body reads
 * the rest and drops it, to answer once it is all in (clients send the
 * whole body before they read); false once that passes twice API_FILE_MAX:
 * then the connection is to be dropped.
 */
bool api_upload_write(struct api_upload *u, const char *data, size_t len);

/*
 * The body's length, when the client announced it (Content-Length),
 * before any of it is read: false when an image's archive or a
 * directory's tar is refused already because it is larger than its route
 * takes (413); the server
 * then answers at once (api_upload_end()) and closes the connection,
 * instead of reading gigabytes to drop them. (A file past API_FILE_MAX
 * is read and dropped, then answered, as clients that send a whole body
 * before they read expect.)
 */
bool api_upload_expect(struct api_upload *u, uint64_t len);

/*
 * The body is complete: rename (or remove) the file (an image's archive:
 * import it, which can take minutes: the server stops its clock); *ret is the answer
 * (release it). The upload's audit row goes to st (NULL: it is not
 * recorded, and ret->audit says so).
 */
void api_upload_end(struct api_upload *u, struct store *st, struct api_response *ret);

/* Free (a temporary file left in the sandbox is removed). NULL is fine. */
void api_upload_free(struct api_upload *u);

/*
 * Remove every input (POST /v1/inputs) no task took that is older than
 * ttl_s at now_ms, arriving ones cut off included; each upload does it,
 * and agentboxd at its start. 0, or -errno with err (state_dir unreadable).
 */
int api_inputs_sweep(const char *state_dir, int64_t now_ms, uint64_t ttl_s, struct error *err);

/*
 * At agentboxd's start, before anything can make a task or an input: the
 * sweep above, and every upload's temporary (none is arriving); a task
 * directory whose inputs/ no stored task owns (the daemon stopped between
 * the take and the store) gives them back to their tenant, whole, before
 * the directory goes (sched/retain.h); a stored task's leftover tars go,
 * and an ended task's inputs. 0, or -errno with err.
 */
int api_inputs_recover(struct store *st, const char *state_dir, int64_t now_ms, uint64_t ttl_s,
		       struct error *err);

/*
 * The exit object of the API for process pid from the shim's exit record
 * (fleet_exit_record()): pid, exit_code, signal, oom_killed, timed_out,
 * duration_ms, truncated. For the server's process streams. NULL when
 * out of memory.
 */
json_t *api_exit_json(long pid, json_t *exit);

#endif
