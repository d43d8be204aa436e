/*
 * server.c - libmicrohttpd in front of api_handle(): read the request,
 * hand it over, serve what comes back: a body, a file from an fd, or a
 * stream (stream.c, process-stream.c). A body that must not be held in
 * memory (PUT .../files) goes to the API's upload as it arrives; the API
 * checks it before the first byte is read.
 */
#include "base/fileio.h"
#include "daemon/daemon.h"
#include "daemon/stream.h"

#include "base/cleanup.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct listener {
	struct daemon *d;
	const char *token;
	struct MHD_Daemon *mhd;
};

/* What one request has sent so far. */
struct request_state {
	char *body;
	size_t len;
	struct api_upload *upload; /* PUT .../files: the body goes there */
};

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

/* Send r's body. */
static enum MHD_Result send_body(struct MHD_Connection *c, const struct api_response *r)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(r->body_len, r->body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	if (r->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
	if (r->allow[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	if (r->www_authenticate[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					r->www_authenticate);
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ok;
}

/* Send a file: size bytes of fd (taken), which MHD reads and closes. */
static enum MHD_Result send_file(struct MHD_Connection *c, int status, const char *content_type,
				 int fd, uint64_t size)
{
	struct MHD_Response *mr = MHD_create_response_from_fd(size, fd);
	if (!mr) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, mr);
	MHD_destroy_response(mr);
	return ok;
}

/* Serve r (its fd, if any, is taken): a body, a file, or a stream. */
static enum MHD_Result serve(struct daemon *d, struct MHD_Connection *c, struct api_response *r)
{
	if (r->log[0])
		fprintf(stderr, "agentboxd: %d: %s\n", r->status, r->log);
	switch (r->kind) {
	case API_RESPONSE_TASK_STREAM:
		return stream_start(d, c, &r->task);
	case API_RESPONSE_PROCESS_STREAM:
		return process_stream_start(d, c, r->process.id, api_response_take_fd(r),
					    r->process.pid);
	case API_RESPONSE_FILE:
		return send_file(c, r->status, r->content_type, api_response_take_fd(r), r->size);
	case API_RESPONSE_BODY:
	default:
		return send_body(c, r);
	}
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
	};
}

static void make_ctx(struct listener *l, struct api_ctx *ctx)
{
	*ctx = (struct api_ctx){
	    .state_dir = l->d->cfg.state_dir,
	    .token = l->token,
	    .now_ms = wall_clock_ms,
	    .fleet_ops = &fleet_shim_ops,
	    .fleet = l->d->fleet,
	    .task_submitted = on_task_submitted,
	    .task_cancel_requested = on_cancel_requested,
	    .hook_data = l->d,
	};
}

/*
 * A PUT: the one route that takes a raw body (PUT .../files) is checked
 * before the body comes, and the body streams to the sandbox's file.
 */
static enum MHD_Result begin_upload(struct listener *l, struct MHD_Connection *c, const char *url,
				    const char *method, struct request_state *rs)
{
	struct query_buf q = {.len = 0};
	struct api_request req;
	read_request(c, url, method, &q, &req);
	if (!api_request_takes_raw_body(&req))
		return MHD_YES; /* answered (404/405) once the body is in */
	struct api_ctx ctx;
	make_ctx(l, &ctx);
	ctx.store = store_pool_get(&l->d->pool);
	rs->upload = api_upload_begin(&ctx, &req);
	store_pool_put(&l->d->pool, ctx.store);
	return rs->upload ? MHD_YES : MHD_NO;
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
		rs = calloc(1, sizeof(*rs));
		*con_cls = rs;
		if (rs && strcmp(method, "PUT") == 0)
			return begin_upload(l, c, url, method, rs);
		return rs ? MHD_YES : MHD_NO;
	}
	if (rs->upload) {
		if (*upload_data_size) {
			bool go_on = api_upload_write(rs->upload, upload_data, *upload_data_size);
			*upload_data_size = 0;
			return go_on ? MHD_YES : MHD_NO;
		}
		api_upload_end(rs->upload, &resp);
		ok = serve(l->d, c, &resp);
		api_response_release(&resp);
		return ok;
	}
	if (*upload_data_size) {
		/* keep one byte past the limit, so the API can answer 413 */
		size_t room = API_BODY_MAX + 1 - rs->len;
		size_t take = *upload_data_size < room ? *upload_data_size : room;
		if (take) {
			char *n = realloc(rs->body, rs->len + take);
			if (!n)
				return MHD_NO;
			memcpy(n + rs->len, upload_data, take);
			rs->body = n;
			rs->len += take;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}

	struct query_buf q = {.len = 0};
	struct api_request req;
	read_request(c, url, method, &q, &req);
	req.body = rs->body;
	req.body_len = rs->len;
	struct api_ctx ctx;
	make_ctx(l, &ctx);
	ctx.store = store_pool_get(&l->d->pool);
	(void)api_handle(&ctx, &req, &resp);
	store_pool_put(&l->d->pool, ctx.store);
	ok = serve(l->d, c, &resp);
	api_response_release(&resp);
	return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	struct request_state *rs = *con_cls;
	if (rs) {
		api_upload_free(rs->upload);
		free(rs->body);
		free(rs);
	}
	*con_cls = NULL;
}

int server_start(struct daemon *d, int listen_fd, const char *token, struct listener **ret,
		 struct error *err)
{
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return error_set(err, ENOMEM, "out of memory");
	*l = (struct listener){.d = d, .token = token};
	l->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
				      MHD_USE_POLL | MHD_USE_ERROR_LOG,
				  0, NULL, NULL, on_request, l, MHD_OPTION_LISTEN_SOCKET, listen_fd,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)DAEMON_CONNECTIONS_MAX,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)3600, MHD_OPTION_END);
	if (!l->mhd) {
		free(l);
		return error_set(err, EIO, "cannot start the HTTP server");
	}
	*ret = l;
	return 0;
}

void server_stop(struct listener *l)
{
	if (!l)
		return;
	MHD_stop_daemon(l->mhd);
	free(l);
}
