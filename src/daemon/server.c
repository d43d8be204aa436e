/*
 * server.c - libmicrohttpd in front of api_handle(): read the request,
 * hand it over, serve what comes back: a body, a file from an fd, or a
 * stream (stream.c, process-stream.c). A body that must not be held in
 * memory (PUT .../files) goes to the API's upload as it arrives; the API
 * checks it before the first byte is read.
 *
 * Before any body (the first call of on_request(), once the header is
 * in): a request whose framing could be read two ways is refused (400),
 * and one that the API's admission refuses (api_admit(): no key over
 * TCP, an unknown local user on the unix socket: 401; over a rate limit:
 * 429) is answered at once, so none gets "100 Continue" nor has its body
 * read. An upload that announces more than its route takes (an image's
 * archive past api_ctx.image_import_max) is answered 413 at once too. The timeouts of
 * daemon.h are set per connection as a request moves on.
 *
 * The TCP listener may serve HTTPS (--tls-cert, --tls-key): libmicrohttpd
 * runs GnuTLS under the same callbacks, so every route, stream, download
 * and upload is served the same way over either.
 */
#include "base/fileio.h"
#include "base/parse.h"
#include "daemon/daemon.h"
#include "daemon/stream.h"

#include "base/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes a file download reads at a time. */
#define SERVER_FILE_BLOCK (64u * 1024)
/*
 * The most of one body read (and dropped past API_BODY_MAX, or past the
 * budget) before the connection is closed: as for an upload's body.
 */
#define SERVER_BODY_READ_MAX (2ULL * API_FILE_MAX)

struct listener {
	struct daemon *d;
	bool tcp; /* every request needs a key; else the peer's uid decides (api/auth.c) */
	struct MHD_Daemon *mhd;
};

/* What one request has sent so far. */
struct request_state {
	char *body;
	size_t len;
	size_t reserved; /* of d->bodies (DAEMON_BODIES_MAX_MB): body's size past its own */
	size_t received; /* bytes of the body read, kept or not */
	bool busy;	 /* the budget had no room: the body is dropped, 503 at its end */
	struct api_upload *upload; /* PUT .../files: the body goes there */
	/* the answer's audit row, recorded once the answer is sent (on_completed()) */
	bool audit_pending;
	struct api_audit_entry audit_note;
	enum api_error_code audit_code;
	int audit_status;
	struct terminal_pending terminal; /* a terminal's 101, queued (terminal.c) */
};

/*
 * Make room for a body of size bytes: what is past the connection's own
 * DAEMON_BODY_OWN_KB comes out of the daemon's budget. False when it does
 * not fit there.
 */
static bool hold_body(struct daemon *d, struct request_state *rs, size_t size)
{
	size_t own = (size_t)DAEMON_BODY_OWN_KB << 10;
	size_t need = size > own ? size - own : 0;
	if (need <= rs->reserved)
		return true;
	size_t n = need - rs->reserved;
	size_t held = atomic_fetch_add(&d->bodies, n);
	if (held + n > (size_t)DAEMON_BODIES_MAX_MB << 20) {
		atomic_fetch_sub(&d->bodies, n);
		return false;
	}
	rs->reserved += n;
	return true;
}

static void release_body(struct daemon *d, struct request_state *rs)
{
	atomic_fetch_sub(&d->bodies, rs->reserved);
	rs->reserved = 0;
	free(rs->body);
	rs->body = NULL;
}

/* A body of the length the client announced, reserved before it is sent. */
static bool reserve_announced(struct daemon *d, struct MHD_Connection *c, struct request_state *rs)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	uint64_t n = 0;
	if (!cl || parse_u64(cl, &n) < 0 || n == 0)
		return true; /* no body, or chunked: reserved as it comes */
	/* one byte past the limit, so the API can answer 413 */
	return hold_body(d, rs, n > API_BODY_MAX ? API_BODY_MAX + 1 : (size_t)n);
}

static void on_task_submitted(void *data)
{
	daemon_wake(data);
}

static void on_cancel_requested(const char *id, void *data)
{
	(void)id;
	daemon_wake(data);
}

struct query_buf {
	char text[API_QUERY_MAX + 2];
	size_t len;
	bool overflow;
};

static void query_put(struct query_buf *q, const char *s, size_t n, bool encode)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; s && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool plain = !encode || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
			     c == '~' || c == ',';
		if (q->len + 4 >= sizeof(q->text)) {
			q->overflow = true;
			return;
		}
		if (plain) {
			q->text[q->len++] = (char)c;
		} else {
			q->text[q->len++] = '%';
			q->text[q->len++] = hex[c >> 4];
			q->text[q->len++] = hex[c & 15];
		}
	}
	q->text[q->len] = '\0';
}

/*
 * MHD has decoded the query: encode it again for the API, which parses it
 * itself. Lengths, not C strings: an escaped NUL reaches the API as %00,
 * which refuses it, instead of silently cutting the value.
 */
static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				 size_t key_size, const char *value, size_t value_size)
{
	(void)kind;
	struct query_buf *q = cls;
	if (q->len)
		query_put(q, "&", 1, false);
	query_put(q, key, key_size, true);
	if (value) {
		query_put(q, "=", 1, false);
		query_put(q, value, value_size, true);
	}
	return MHD_YES;
}

/*
 * libmicrohttpd times a connection out when no byte has moved for this
 * many seconds, counting the time a response's callback blocks; 0 stops
 * the clock, and a timeout set after 0 counts from now. Queueing a
 * response restarts the clock too, so a handler's time is never idle.
 */
static void set_timeout(struct MHD_Connection *c, unsigned seconds)
{
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/* Send r's body; last: close the connection after it (nothing more is read). */
static enum MHD_Result send_body(struct MHD_Connection *c, const struct api_response *r, bool last)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(r->body_len, r->body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	if (last)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (r->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
	if (r->allow[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	if (r->www_authenticate[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					r->www_authenticate);
	if (r->retry_after) {
		char s[16];
		snprintf(s, sizeof(s), "%u", (unsigned)r->retry_after);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, s);
	}
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ok;
}

/*
 * Send size bytes that read (with cls) produces into libmicrohttpd's
 * buffer of SERVER_FILE_BLOCK as the client takes them; done frees cls,
 * also when the response cannot be made.
 */
static enum MHD_Result send_reader(struct MHD_Connection *c, int status, const char *content_type,
				   uint64_t size, MHD_ContentReaderCallback read, void *cls,
				   MHD_ContentReaderFreeCallback done, uint64_t skipped)
{
	struct MHD_Response *mr =
	    MHD_create_response_from_callback(size, SERVER_FILE_BLOCK, read, cls, done);
	if (!mr) {
		done(cls);
		return MHD_NO;
	}
	MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	if (skipped) {
		char s[24];
		snprintf(s, sizeof(s), "%llu", (unsigned long long)skipped);
		MHD_add_response_header(mr, API_FILES_TAR_SKIPPED_HEADER, s);
	}
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, mr);
	MHD_destroy_response(mr);
	return ok;
}

/* A file being sent: size bytes of fd, as they were when the API opened it. */
struct file_send {
	int fd;
	uint64_t size;
};

/*
 * The bytes from pos on. A file that ends before its size (truncated
 * while it is sent) ends the response with an error: libmicrohttpd then
 * closes the connection, and the client sees a body shorter than its
 * Content-Length. Never 0, which libmicrohttpd would ask again at once.
 */
static ssize_t file_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct file_send *f = cls;
	if (pos >= f->size)
		return MHD_CONTENT_READER_END_WITH_ERROR; /* MHD stops at size itself */
	size_t want = max; /* at most SERVER_FILE_BLOCK: the response's buffer */
	if (want > f->size - pos)
		want = (size_t)(f->size - pos);
	ssize_t n;
	do
		n = pread(f->fd, buf, want, (off_t)pos);
	while (n < 0 && errno == EINTR);
	return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void file_free(void *cls)
{
	struct file_send *f = cls;
	close(f->fd);
	free(f);
}

/*
 * Send a file: size bytes of fd (taken), read as the client takes them;
 * skipped: a tar's entries left out (API_FILES_TAR_SKIPPED_HEADER), or 0.
 */
static enum MHD_Result send_file(struct MHD_Connection *c, int status, const char *content_type,
				 int fd, uint64_t size, uint64_t skipped)
{
	struct file_send *f = malloc(sizeof(*f));
	if (!f) {
		close(fd);
		return MHD_NO;
	}
	*f = (struct file_send){.fd = fd, .size = size};
	return send_reader(c, status, content_type, size, file_read, f, file_free, skipped);
}

/* A body in pieces (a task's logs), read into libmicrohttpd's buffer as it is sent. */
static ssize_t pieces_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	ssize_t n = api_pieces_read(cls, pos, buf, max);
	/* a file that shrank: end with an error, never promise bytes that do not come */
	return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void pieces_free(void *cls)
{
	api_pieces_free(cls);
}

/* Send the pieces ps (taken): their total, with a fixed buffer. */
static enum MHD_Result send_pieces(struct MHD_Connection *c, int status, const char *content_type,
				   struct api_pieces *ps)
{
	return send_reader(c, status, content_type, ps->total, pieces_read, ps, pieces_free, 0);
}

/*
 * Serve r (its fd, if any, is taken): a body, a file, or a stream. A
 * stream waits for its task or process in its callback, and ends with
 * it: it runs without a timeout.
 */
/* What the API left for the log: a 5xx's cause, an audit row the store refused. */
static void log_response(const struct api_response *r)
{
	if (r->log[0])
		fprintf(stderr, "agentboxd: %d: %s\n", r->status, r->log);
	if (r->audit[0])
		fprintf(stderr, "agentboxd: %s\n", r->audit);
}

static enum MHD_Result serve(struct daemon *d, struct MHD_Connection *c, struct api_response *r,
			     struct request_state *rs)
{
	log_response(r);
	switch (r->kind) {
	case API_RESPONSE_TASK_STREAM:
		set_timeout(c, 0);
		return stream_start(d, c, &r->task);
	case API_RESPONSE_PROCESS_STREAM:
		set_timeout(c, 0);
		return process_stream_start(d, c, r->process.id, api_response_take_fd(r),
					    r->process.pid);
	case API_RESPONSE_TERMINAL:
		return terminal_start(d, c, r, &rs->terminal);
	case API_RESPONSE_FILE:
		return send_file(c, r->status, r->content_type, api_response_take_fd(r), r->size,
				 r->skipped);
	case API_RESPONSE_PIECES:
		return send_pieces(c, r->status, r->content_type, TAKE_PTR(r->pieces));
	case API_RESPONSE_BODY:
	default:
		return send_body(c, r, false);
	}
}

/* What the framing headers of a request say (framing_header()). */
struct framing {
	unsigned content_length;    /* how many Content-Length headers */
	unsigned transfer_encoding; /* how many Transfer-Encoding headers */
	bool bad_name;		    /* a name that is not a token: "Transfer-Encoding " */
	bool not_chunked;	    /* a Transfer-Encoding other than "chunked" */
};

/* RFC 9110's tchar: what a header name is made of. */
static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_named(const char *key, size_t key_size, const char *name)
{
	return key_size == strlen(name) && strncasecmp(key, name, key_size) == 0;
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      size_t key_size, const char *value, size_t value_size)
{
	(void)kind;
	struct framing *f = cls;
	bool token = key_size > 0;
	for (size_t i = 0; i < key_size; i++)
		token = token && is_tchar((unsigned char)key[i]);
	if (!token) {
		f->bad_name = true;
	} else if (is_named(key, key_size, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		f->content_length++;
	} else if (is_named(key, key_size, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->transfer_encoding++;
		while (value_size &&
		       (value[value_size - 1] == ' ' || value[value_size - 1] == '\t'))
			value_size--;
		if (!value || !is_named(value, value_size, "chunked"))
			f->not_chunked = true;
	}
	return MHD_YES;
}

/*
 * Why the request's framing is ambiguous, or NULL. libmicrohttpd 0.9.75
 * takes the first of two Content-Lengths, keeps "Transfer-Encoding :"
 * as a header named "Transfer-Encoding " (and ignores it), and takes
 * Content-Length with chunked as chunked; a proxy in front may read any
 * of these another way (request smuggling). RFC 9112 has them refused.
 */
static const char *framing_fault(struct MHD_Connection *c)
{
	struct framing f = {0};
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, framing_header, &f);
	if (f.bad_name)
		return "a header name is not a token (a space before its colon?)";
	if (f.content_length > 1)
		return "Content-Length is sent more than once";
	if (f.transfer_encoding > 1)
		return "Transfer-Encoding is sent more than once";
	if (f.transfer_encoding && f.content_length)
		return "Content-Length and Transfer-Encoding are both sent";
	if (f.not_chunked)
		return "the one Transfer-Encoding taken is chunked";
	return NULL;
}

/* The request's line, query and headers for the API (no body); q holds the query. */
static void read_request(struct MHD_Connection *c, const char *url, const char *method,
			 struct query_buf *q, struct api_request *req)
{
	MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, query_arg, q);
	*req = (struct api_request){
	    .method = method,
	    .path = url,
	    .query = q->len ? (q->overflow ? "overflow=%00" : q->text) : NULL,
	    .content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"),
	    .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
	    .accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept"),
	    .upgrade = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Upgrade"),
	    .connection = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connection"),
	    .ws_key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Key"),
	    .ws_version = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Version"),
	    .ws_protocol =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Protocol"),
	    .origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"),
	    .last_event_id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID"),
	};
}

/* A handler is about to wait on a sandbox: its store goes back to the pool now. */
static void release_store(struct api_ctx *ctx)
{
	struct daemon *d = ctx->hook_data;
	if (ctx->store)
		store_pool_put(&d->pool, ctx->store);
	ctx->store = NULL;
}

/* The handler gave its store back, and the audit log needs one. */
static void acquire_store(struct api_ctx *ctx)
{
	struct daemon *d = ctx->hook_data;
	ctx->store = store_pool_get(&d->pool);
}

/* The uid of a unix socket's peer (SO_PEERCRED), or -1. */
static long peer_uid(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *info =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (!info || getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -1;
	return (long)cred.uid;
}

/* Where c comes from (struct api_ctx's source): its address, or its uid. */
static void peer_source(bool tcp, long uid, struct MHD_Connection *c, char *out, size_t size)
{
	out[0] = '\0';
	if (!tcp) {
		if (uid >= 0)
			snprintf(out, size, "unix:uid=%ld", uid);
		return;
	}
	const union MHD_ConnectionInfo *info =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = info ? info->client_addr : NULL;
	if (!sa)
		return;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
			  (socklen_t)size);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
			  (socklen_t)size);
}

static void make_ctx(struct listener *l, struct MHD_Connection *c, struct api_ctx *ctx)
{
	*ctx = (struct api_ctx){
	    .state_dir = l->d->cfg.state_dir,
	    .tcp = l->tcp,
	    .peer_uid = l->tcp ? -1 : peer_uid(c),
	    .rate = &l->d->rate,
	    .local_users = l->d->cfg.local_users,
	    .nlocal_users = l->d->cfg.nlocal_users,
	    .now_ms = wall_clock_ms,
	    .host = &l->d->cfg.host,
	    .quota_defaults = &l->d->cfg.quota_defaults,
	    .origins = l->d->cfg.origins,
	    .norigins = l->d->cfg.norigins,
	    .audit_rows = l->d->cfg.audit_rows,
	    .input_ttl_s = l->d->cfg.input_ttl_s,
	    .store_release = release_store,
	    .store_acquire = acquire_store,
	    .fleet_ops = &fleet_shim_ops,
	    .fleet = l->d->fleet,
	    .images = l->d->images,
	    .registries = l->d->registries,
	    .debian_mirror = l->d->cfg.debian_mirror,
	    .debian_keyring = l->d->cfg.debian_keyring,
	    .network_ready = daemon_network_ready,
	    .secrets_ready = daemon_secrets_ready,
	    .task_submitted = on_task_submitted,
	    .task_cancel_requested = on_cancel_requested,
	    .hook_data = l->d,
	};
	peer_source(l->tcp, ctx->peer_uid, c, ctx->source, sizeof(ctx->source));
}

/*
 * The first call, once the header is in and before any body: refuse an
 * ambiguous framing (400), and what the API's admission refuses (401, or
 * 429 over a rate limit: api_admit(), which charges the request's
 * buckets, once per request: a stream's at its start). Answered now,
 * libmicrohttpd sends no "100 Continue", reads no body and closes the
 * connection after the answer. False: go on.
 */
static bool refuse_early(struct listener *l, struct MHD_Connection *c, const char *url,
			 const char *method, enum MHD_Result *ret)
{
	struct api_response resp = {0};
	const char *fault = framing_fault(c);
	if (fault) {
		if (api_error_response(&resp, API_ERR_INVALID_FIELD, "headers", "%s", fault) < 0)
			resp.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	} else {
		struct query_buf q = {.len = 0};
		struct api_request req;
		struct api_ctx ctx;
		read_request(c, url, method, &q, &req);
		make_ctx(l, c, &ctx);
		ctx.store = api_route_is_public(url) ? NULL : store_pool_get(&l->d->pool);
		bool go_on = api_admit(&ctx, &req, &resp);
		if (ctx.store)
			store_pool_put(&l->d->pool, ctx.store);
		if (go_on)
			return false;
		log_response(&resp);
	}
	*ret = send_body(c, &resp, true);
	api_response_release(&resp);
	return true;
}

/* Does this request's route take a raw body (PUT .../files, POST /v1/images/import)? */
static bool takes_raw_body(struct MHD_Connection *c, const char *url, const char *method)
{
	struct query_buf q = {.len = 0};
	struct api_request req;
	read_request(c, url, method, &q, &req);
	return api_request_takes_raw_body(&req);
}

/*
 * A route that takes a raw body is checked before the body comes, and
 * the body streams to its upload (a sandbox's file, an image's archive).
 * One that announces more than its route takes is answered 413 now.
 */
static enum MHD_Result begin_upload(struct listener *l, struct MHD_Connection *c, const char *url,
				    const char *method, struct request_state *rs)
{
	struct query_buf q = {.len = 0};
	struct api_request req;
	read_request(c, url, method, &q, &req);
	struct api_ctx ctx;
	make_ctx(l, c, &ctx);
	set_timeout(c, 0); /* the sandbox opens the file, and no response restarts the clock */
	ctx.store = store_pool_get(&l->d->pool);
	rs->upload = api_upload_begin(&ctx, &req);
	store_pool_put(&l->d->pool, ctx.store);
	set_timeout(c, DAEMON_IDLE_TIMEOUT_S);
	if (!rs->upload)
		return MHD_NO;
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	uint64_t n = 0;
	if (!cl || parse_u64(cl, &n) < 0 || api_upload_expect(rs->upload, n))
		return MHD_YES;
	struct api_response resp = {0};
	struct store *st = store_pool_get(&l->d->pool);
	api_upload_end(rs->upload, st, &resp); /* 413, and its audit row */
	store_pool_put(&l->d->pool, st);
	log_response(&resp);
	enum MHD_Result ok = send_body(c, &resp, true);
	api_response_release(&resp);
	api_upload_free(TAKE_PTR(rs->upload));
	return ok;
}

/* 503 busy, and close: the daemon holds as many bodies as it may. */
static enum MHD_Result answer_busy(struct MHD_Connection *c)
{
	struct api_response resp = {0};
	if (api_error_response(&resp, API_ERR_BUSY, NULL,
			       "the server holds as many request bodies as it may; try again") < 0)
		resp.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	enum MHD_Result ok = send_body(c, &resp, true);
	api_response_release(&resp);
	return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	(void)version;
	struct listener *l = cls;
	struct request_state *rs = *con_cls;
	struct api_response resp = {0};
	enum MHD_Result ok;
	if (!rs) {
		if (refuse_early(l, c, url, method, &ok))
			return ok;
		rs = calloc(1, sizeof(*rs));
		*con_cls = rs;
		if (!rs)
			return MHD_NO;
		set_timeout(c, DAEMON_IDLE_TIMEOUT_S); /* the header is in: the body may come */
		if (takes_raw_body(c, url, method))
			return begin_upload(l, c, url, method, rs);
		if (!reserve_announced(l->d, c, rs)) {
			const char *expect =
			    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
			/* asked before it is sent: the body never comes; else it is dropped */
			if (expect && strcasecmp(expect, "100-continue") == 0)
				return answer_busy(c);
			rs->busy = true;
		}
		return MHD_YES;
	}
	if (rs->upload) {
		if (*upload_data_size) {
			bool go_on = api_upload_write(rs->upload, upload_data, *upload_data_size);
			*upload_data_size = 0;
			return go_on ? MHD_YES : MHD_NO;
		}
		/* an image's import unpacks its layers now: no clock while it does */
		set_timeout(c, 0);
		struct store *st = store_pool_get(&l->d->pool);
		api_upload_end(rs->upload, st, &resp); /* st: for its audit row */
		store_pool_put(&l->d->pool, st);
		set_timeout(c, DAEMON_IDLE_TIMEOUT_S);
		ok = serve(l->d, c, &resp, rs);
		api_response_release(&resp);
		return ok;
	}
	if (*upload_data_size) {
		/*
		 * Keep one byte past the limit, so the API can answer 413. What
		 * is not kept (past the limit, or past the budget) is read and
		 * dropped, since libmicrohttpd answers only once the body is in;
		 * but not without end.
		 */
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		rs->received += n;
		if (rs->received > SERVER_BODY_READ_MAX)
			return MHD_NO;
		size_t room = API_BODY_MAX + 1 - rs->len;
		size_t take = rs->busy ? 0 : n < room ? n : room;
		if (take && !hold_body(l->d, rs, rs->len + take)) {
			rs->busy = true;
			release_body(l->d, rs);
			rs->len = take = 0;
		}
		if (take) {
			char *b = realloc(rs->body, rs->len + take);
			if (!b)
				return MHD_NO;
			memcpy(b + rs->len, upload_data, take);
			rs->body = b;
			rs->len += take;
		}
		return MHD_YES;
	}
	if (rs->busy)
		return answer_busy(c);

	struct query_buf q = {.len = 0};
	struct api_request req;
	read_request(c, url, method, &q, &req);
	req.body = rs->body;
	req.body_len = rs->len;
	struct api_ctx ctx;
	make_ctx(l, c, &ctx);
	ctx.store = store_pool_get(&l->d->pool);
	ctx.audit_deferred = true; /* the client does not wait on its row */
	(void)api_handle(&ctx, &req, &resp);
	release_store(&ctx); /* unless the handler gave it back already */
	rs->audit_pending = resp.audit_pending;
	rs->audit_note = resp.audit_note;
	rs->audit_code = resp.audit_code;
	rs->audit_status = resp.status;
	ok = serve(l->d, c, &resp, rs);
	api_response_release(&resp);
	return ok;
}

/* The answer is sent (or its connection gone): its audit row now. */
static void commit_audit(struct daemon *d, const struct request_state *rs)
{
	struct api_response res = {.status = rs->audit_status,
				   .audit_pending = true,
				   .audit_note = rs->audit_note,
				   .audit_code = rs->audit_code};
	char why[ERROR_MSG_MAX];
	struct store *st = store_pool_get(&d->pool);
	api_audit_commit(&res, st, why);
	store_pool_put(&d->pool, st);
	if (why[0])
		fprintf(stderr, "agentboxd: %s\n", why);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)toe;
	struct request_state *rs = *con_cls;
	set_timeout(c, DAEMON_HEADER_TIMEOUT_S); /* kept alive: the next header, or close */
	if (rs) {
		terminal_abandon(&rs->terminal); /* a 101 that never went out */
		if (rs->audit_pending)
			commit_audit(cls, rs);
		api_upload_free(rs->upload);
		release_body(cls, rs);
		free(rs);
	}
	*con_cls = NULL;
}

int server_start(struct daemon *d, int listen_fd, const struct daemon_tls *tls,
		 struct listener **ret, struct error *err)
{
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return error_set(err, ENOTSUP,
				 "--tls-cert: this libmicrohttpd was built without TLS (GnuTLS)");
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return error_set(err, ENOMEM, "out of memory");
	/* TCP: a per-address limit (0: none; a unix socket's peers have no address) */
	struct sockaddr_storage ss = {0};
	socklen_t len = sizeof(ss);
	/* anything but a unix socket is TCP: keys are needed there (fail closed) */
	bool tcp =
	    getsockname(listen_fd, (struct sockaddr *)&ss, &len) != 0 || ss.ss_family != AF_UNIX;
	*l = (struct listener){.d = d, .tcp = tcp};
	/*
	 * HTTPS: GnuTLS parses the key and the chain here, in MHD_start_daemon(),
	 * and keeps its own copies. The handshake is part of the connection's
	 * life: the header timeout holds a client that never finishes it.
	 */
	struct MHD_OptionItem tls_items[] = {
	    {MHD_OPTION_HTTPS_MEM_CERT, 0, tls ? tls->cert : NULL},
	    {MHD_OPTION_HTTPS_MEM_KEY, 0, tls ? tls->key : NULL},
	    {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)DAEMON_TLS_PRIORITIES},
	    {MHD_OPTION_END, 0, NULL},
	};
	if (!tls)
		tls_items[0].option = MHD_OPTION_END;
	l->mhd = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
		MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE | (tls ? MHD_USE_TLS : 0),
	    0, NULL, NULL, on_request, l, MHD_OPTION_LISTEN_SOCKET, listen_fd,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, d, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)DAEMON_CONNECTIONS_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    (unsigned)(tcp ? DAEMON_TCP_PER_ADDRESS_MAX : 0), MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)DAEMON_HEADER_TIMEOUT_S, MHD_OPTION_ARRAY, tls_items, MHD_OPTION_END);
	if (!l->mhd) {
		free(l);
		if (tls)
			return error_set(err, EINVAL,
					 "cannot start the HTTPS server: libmicrohttpd refused "
					 "--tls-cert and --tls-key (a key that is not the "
					 "certificate's? its message is above)");
		return error_set(err, EIO, "cannot start the HTTP server");
	}
	*ret = l;
	return 0;
}

void server_stop(struct listener *l)
{
	if (!l)
		return;
	terminal_wait_all(); /* their sockets are libmicrohttpd's */
	MHD_stop_daemon(l->mhd);
	free(l);
}
