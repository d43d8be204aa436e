/*
 * http-client.c - the strict HTTP/1.1 client of http-client.h.
 *
 * One connection carries one exchange: the request is written whole, the
 * header block is read whole into the connection's buffer (which is
 * exactly HTTP_HEAD_MAX long, so a longer block cannot fit), then the
 * body is read by its framing and either buffered or streamed. Its bytes
 * go through conn_read() and conn_write(): the socket, or TLS (tls.h).
 */
#include "client/http-client.h"
#include "client/tls.h"

#include "base/buf.h"
#include "base/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Content-Length values beyond this are refused before reading anything. */
#define HTTP_LENGTH_MAX (UINT64_C(1) << 53)
/* Hex digits of a chunk size: 15 keep it below 2^60. */
#define HTTP_CHUNK_DIGITS_MAX 15
/* The piece a request body is pulled from its reader in. */
#define HTTP_SEND_PIECE (64u << 10)

static const struct http_options default_options;

int64_t http_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *peer_of(const struct http_options *opt)
{
	return opt->peer ? opt->peer : "the server";
}

/* ---- characters (no locale) ------------------------------------------- */

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* RFC 9110 tchar. */
static bool is_tchar(char ch)
{
	unsigned char u = (unsigned char)ch;
	if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z'))
		return true;
	return u && strchr("!#$%&'*+-.^_`|~", u) != NULL;
}

/* A control character other than HTAB (CR and LF included), or DEL. */
static bool is_ctl(char ch)
{
	unsigned char u = (unsigned char)ch;
	return (u < 0x20 && u != '\t') || u == 0x7f;
}

static bool has_ctl(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (is_ctl(s[i]))
			return true;
	return false;
}

size_t http_query_escape(const char *s, char *buf, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char one[3] = {(char)*p};
		size_t k = 1;
		bool plain = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
			     (*p >= 'A' && *p <= 'Z') || (*p && strchr("-._~/", *p));
		if (!plain) {
			one[0] = '%';
			one[1] = hex[*p >> 4];
			one[2] = hex[*p & 0xf];
			k = 3;
		}
		for (size_t i = 0; i < k; i++, n++)
			if (n + 1 < size)
				buf[n] = one[i];
	}
	if (size > 0)
		buf[n < size ? n : size - 1] = '\0';
	return n;
}

/* ---- waiting and connecting ------------------------------------------- */

/*
 * Wait until fd has events, for at most timeout_ms (0 = no limit) and not
 * past deadline (0 = none). 0 when ready (or in error: the next call says
 * which), -ETIMEDOUT, or -errno.
 */
static int wait_fd(int fd, short events, int timeout_ms, int64_t deadline)
{
	int64_t end = 0;
	if (timeout_ms > 0)
		end = http_now_ms() + timeout_ms;
	if (deadline > 0 && (end == 0 || deadline < end))
		end = deadline;
	for (;;) {
		int t = -1;
		if (end > 0) {
			int64_t left = end - http_now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			t = left > INT32_MAX ? INT32_MAX : (int)left;
		}
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, t);
		if (n > 0)
			return 0;
		if (n == 0)
			continue; /* the loop's check says whether time is up */
		if (errno != EINTR)
			return -errno;
	}
}

static int connect_failed(const struct http_endpoint *ep, const struct http_options *opt, int code,
			  struct error *err)
{
	if (code == ETIMEDOUT)
		return error_set(err, ETIMEDOUT, "cannot reach %s at %s: no answer within %d ms",
				 peer_of(opt), ep->name, opt->connect_timeout_ms);
	const char *hint = "";
	if (code == ECONNREFUSED || code == ENOENT)
		hint = " (is it running?)";
	else if (code == EACCES || code == EPERM)
		hint = " (may this user use the socket?)";
	return error_set(err, code, "cannot reach %s at %s: %s%s", peer_of(opt), ep->name,
			 strerror(code), hint);
}

int http_connect(const struct http_endpoint *ep, const struct http_options *opt, int *ret_fd,
		 struct error *err)
{
	if (!opt)
		opt = &default_options;
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int family;

	if (ep->transport == HTTP_UNIX) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof(un->sun_path), "%s", ep->path);
		len = sizeof(*un);
		family = AF_UNIX;
	} else {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		uint16_t port = (uint16_t)strtoul(ep->port, NULL, 10);
		const char *host = strcmp(ep->host, "localhost") == 0 ? "127.0.0.1" : ep->host;
		if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
			in4->sin_family = AF_INET;
			in4->sin_port = htons(port);
			len = sizeof(*in4);
			family = AF_INET;
		} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons(port);
			len = sizeof(*in6);
			family = AF_INET6;
		} else {
			return error_set(err, EINVAL, "'%s' is not a numeric address", ep->host);
		}
	}

	_cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error_set_errno(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS && errno != EINTR) {
			/* a unix socket whose backlog is full says EAGAIN */
			return connect_failed(ep, opt, errno, err);
		}
		int r = wait_fd(fd, POLLOUT, opt->connect_timeout_ms, opt->deadline_ms);
		if (r < 0)
			return connect_failed(ep, opt, -r, err);
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			return connect_failed(ep, opt, errno, err);
		if (soerr)
			return connect_failed(ep, opt, soerr, err);
	}
	if (family != AF_UNIX) {
		int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* ---- one connection --------------------------------------------------- */

struct conn {
	int fd;
	struct http_tls *tls; /* https, or NULL: the bare socket */
	const char *name;
	const struct http_options *opt;
	struct error *err;
	char *buf; /* HTTP_HEAD_MAX bytes */
	size_t pos, len;
	bool eof;
};

static int bad_response(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad_response(struct conn *c, const char *fmt, ...)
{
	char what[ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return error_set(c->err, EPROTO, "bad response from %s at %s: %s", peer_of(c->opt), c->name,
			 what);
}

/* The server closed the connection before the framing said the response ended. */
static int closed_early(struct conn *c, const char *inside)
{
	return error_set(c->err, ECONNRESET, "%s at %s closed the connection inside %s",
			 peer_of(c->opt), c->name, inside);
}

static int timed_out(struct conn *c, const char *doing)
{
	if (c->opt->deadline_ms > 0 && http_now_ms() >= c->opt->deadline_ms)
		return error_set(c->err, ETIMEDOUT, "%s %s at %s: out of time", doing,
				 peer_of(c->opt), c->name);
	return error_set(c->err, ETIMEDOUT, "%s %s at %s: nothing for %d ms", doing,
			 peer_of(c->opt), c->name, c->opt->read_timeout_ms);
}

/*
 * Up to n bytes from the connection: > 0, 0 at its end, -EAGAIN with
 * *events what to wait for, or -errno with c->err set.
 */
static ssize_t conn_read(struct conn *c, char *p, size_t n, short *events)
{
	if (c->tls)
		return http_tls_read(c->tls, p, n, events, c->err);
	for (;;) {
		ssize_t k = read(c->fd, p, n);
		if (k >= 0)
			return k;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return -EAGAIN;
		return error_set_errno(c->err, errno, "reading from %s at %s", peer_of(c->opt),
				       c->name);
	}
}

/* Up to n bytes (n > 0) onto the connection, as conn_read(). */
static ssize_t conn_write(struct conn *c, const char *p, size_t n, short *events)
{
	if (c->tls)
		return http_tls_write(c->tls, p, n, events, c->err);
	for (;;) {
		ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
		if (k > 0)
			return k;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return -EAGAIN;
		return error_set_errno(c->err, k < 0 ? errno : EIO,
				       "sending the request to %s at %s", peer_of(c->opt), c->name);
	}
}

/*
 * Read what is there into the buffer, after moving the unread part to its
 * start. 0 (more bytes, or c->eof set), or -errno. The buffer must not be
 * full of unread bytes; the callers' limits see to that.
 */
static int conn_fill(struct conn *c)
{
	if (c->pos > 0) {
		memmove(c->buf, c->buf + c->pos, c->len - c->pos);
		c->len -= c->pos;
		c->pos = 0;
	}
	if (c->len == HTTP_HEAD_MAX)
		return error_set(c->err, ENOBUFS, "internal: the response buffer is full");
	for (;;) {
		short events = POLLIN;
		ssize_t n = conn_read(c, c->buf + c->len, HTTP_HEAD_MAX - c->len, &events);
		if (n > 0) {
			c->len += (size_t)n;
			return 0;
		}
		if (n == 0) {
			c->eof = true;
			return 0;
		}
		if (n != -EAGAIN)
			return (int)n;
		int r = wait_fd(c->fd, events, c->opt->read_timeout_ms, c->opt->deadline_ms);
		if (r == -ETIMEDOUT)
			return timed_out(c, "waiting for");
		if (r < 0)
			return error_set_errno(c->err, -r, "poll");
	}
}

static int conn_send(struct conn *c, const char *p, size_t n)
{
	while (n > 0) {
		short events = POLLOUT;
		ssize_t k = conn_write(c, p, n, &events);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k != -EAGAIN)
			return (int)k;
		int r = wait_fd(c->fd, events, c->opt->read_timeout_ms, c->opt->deadline_ms);
		if (r == -ETIMEDOUT)
			return timed_out(c, "sending to");
		if (r < 0)
			return error_set_errno(c->err, -r, "poll");
	}
	return 0;
}

/* ---- the request ------------------------------------------------------ */

static int head_add(struct buf *b, const char *a, const char *sep, const char *z)
{
	buf_puts(b, a);
	buf_puts(b, sep);
	buf_puts(b, z);
	return buf_append(b, "\r\n", 2);
}

static bool method_needs_length(const char *m)
{
	return strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
}

/* The request's head into b, whose max is HTTP_REQUEST_HEAD_MAX. */
static int build_request(const struct http_request *req, struct buf *b, struct error *err)
{
	if (!req->method || !*req->method || !req->target || req->target[0] != '/')
		return error_set(err, EINVAL, "internal: a request needs a method and a /target");
	for (const char *p = req->method; *p; p++)
		if (!is_tchar(*p))
			return error_set(err, EINVAL, "internal: bad method '%s'", req->method);
	for (const char *p = req->target; *p; p++)
		if (is_ctl(*p) || *p == ' ' || *p == '\t')
			return error_set(err, EINVAL,
					 "the request path holds spaces or control characters");
	const char *host = req->host ? req->host : "localhost";
	if (has_ctl(host, strlen(host)))
		return error_set(err, EINVAL, "the Host holds control characters");
	if (req->content_type && has_ctl(req->content_type, strlen(req->content_type)))
		return error_set(err, EINVAL, "internal: bad Content-Type");

	int r;
	char line[64];
	if ((r = buf_puts(b, req->method)) < 0 ||
	    (r = head_add(b, " ", req->target, " HTTP/1.1")) < 0 ||
	    (r = head_add(b, "Host", ": ", host)) < 0 ||
	    (r = head_add(b, "Connection", ": ", "close")) < 0)
		goto fail;
	bool has_body = req->body || req->read_body;
	if (has_body || method_needs_length(req->method)) {
		snprintf(line, sizeof(line), "%zu", has_body ? req->body_len : 0);
		if ((r = head_add(b, "Content-Length", ": ", line)) < 0)
			goto fail;
	}
	if (has_body && req->content_type &&
	    (r = head_add(b, "Content-Type", ": ", req->content_type)) < 0)
		goto fail;
	for (const char *const *h = req->headers; h && *h; h++) {
		const char *colon = strchr(*h, ':');
		if (!colon || colon == *h || has_ctl(*h, strlen(*h)))
			return error_set(err, EINVAL, "a request header is not 'Name: value'");
		for (const char *p = *h; p < colon; p++)
			if (!is_tchar(*p))
				return error_set(err, EINVAL,
						 "a request header's name is not a token");
		if ((r = head_add(b, *h, "", "")) < 0)
			goto fail;
	}
	if ((r = buf_append(b, "\r\n", 2)) < 0)
		goto fail;
	return 0;
fail:
	if (r == -E2BIG)
		return error_set(err, E2BIG, "the request's head is larger than %u bytes",
				 HTTP_REQUEST_HEAD_MAX);
	return error_set_errno(err, -r, "building the request");
}

/* ---- the response head ------------------------------------------------ */

void http_response_release(struct http_response *r)
{
	if (!r)
		return;
	free(r->head);
	free(r->body);
	*r = (struct http_response){0};
}

const char *http_response_header(const struct http_response *r, const char *name)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

/* Read the status line and headers up to the empty line into *ret (malloc'd, NUL-terminated). */
static int read_head(struct conn *c, char **ret, size_t *ret_len)
{
	size_t scanned = 0;
	for (;;) {
		const char *start = c->buf + c->pos;
		size_t avail = c->len - c->pos;
		size_t from = scanned > 3 ? scanned - 3 : 0;
		const char *end = memmem(start + from, avail - from, "\r\n\r\n", 4);
		if (end) {
			size_t n = (size_t)(end - start) + 4;
			char *h = malloc(n + 1);
			if (!h)
				return error_set_errno(c->err, ENOMEM, "reading the response");
			memcpy(h, start, n);
			h[n] = '\0';
			c->pos += n;
			*ret = h;
			*ret_len = n;
			return 0;
		}
		if (avail >= HTTP_HEAD_MAX)
			return bad_response(c, "the header block is larger than %u KiB",
					    HTTP_HEAD_MAX >> 10);
		if (c->eof) {
			if (avail == 0)
				return error_set(c->err, ECONNRESET,
						 "%s at %s closed the connection without answering",
						 peer_of(c->opt), c->name);
			return closed_early(c, "the headers");
		}
		scanned = avail;
		int r = conn_fill(c);
		if (r < 0)
			return r;
	}
}

/* Split the header block in place into res (which takes head). */
static int parse_head(struct conn *c, char *head, size_t len, struct http_response *res)
{
	res->head = head;
	res->n_headers = 0;
	char *line = head;
	char *eol = strstr(line, "\r\n");
	*eol = '\0';
	/* HTTP-version SP 3DIGIT SP [reason] */
	if (strncmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
	    line[8] != ' ')
		return bad_response(c, "the status line does not start with HTTP/1.x");
	const char *code = line + 9;
	if (!is_digit(code[0]) || !is_digit(code[1]) || !is_digit(code[2]) ||
	    (code[3] != ' ' && code[3] != '\0'))
		return bad_response(c, "the status line has no three-digit status code");
	res->status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
	if (res->status < 100 || res->status > 599)
		return bad_response(c, "status code %d is out of range", res->status);
	res->reason = code[3] ? code + 4 : "";
	if (has_ctl(res->reason, strlen(res->reason)))
		return bad_response(c, "the status line holds control characters");

	char *end = head + len - 2; /* the last CRLF ends the empty line */
	line = eol + 2;
	while (line < end) {
		eol = strstr(line, "\r\n");
		*eol = '\0';
		if (line[0] == ' ' || line[0] == '\t')
			return bad_response(c, "a folded header line");
		char *colon = line;
		while (is_tchar(*colon))
			colon++;
		if (colon == line || *colon != ':')
			return bad_response(c, "a header line is not 'Name: value'");
		*colon = '\0';
		char *value = colon + 1;
		while (*value == ' ' || *value == '\t')
			value++;
		size_t vlen = strlen(value);
		while (vlen > 0 && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
			vlen--;
		value[vlen] = '\0';
		if (has_ctl(value, vlen))
			return bad_response(c, "header %s holds control characters", line);
		if (res->n_headers == HTTP_HEADERS_MAX)
			return bad_response(c, "more than %d headers", HTTP_HEADERS_MAX);
		res->headers[res->n_headers++] = (struct http_header){line, value};
		line = eol + 2;
	}
	return 0;
}

enum framing {
	FRAME_NONE,
	FRAME_LENGTH,
	FRAME_CHUNKED,
	FRAME_CLOSE,
};

static int framing_of(struct conn *c, const struct http_request *req,
		      const struct http_response *res, enum framing *ret, uint64_t *ret_len)
{
	const char *te = NULL, *cl = NULL;
	for (size_t i = 0; i < res->n_headers; i++) {
		const struct http_header *h = &res->headers[i];
		if (strcasecmp(h->name, "Transfer-Encoding") == 0) {
			if (te)
				return bad_response(c, "Transfer-Encoding given twice");
			te = h->value;
		} else if (strcasecmp(h->name, "Content-Length") == 0) {
			if (cl && strcmp(cl, h->value) != 0)
				return bad_response(c, "two different Content-Length values");
			cl = h->value;
		}
	}
	if (req->head || res->status == 204 || res->status == 304) {
		*ret = FRAME_NONE;
		return 0;
	}
	if (te) {
		if (strcasecmp(te, "chunked") != 0)
			return bad_response(
			    c, "Transfer-Encoding '%s' (only chunked is understood)", te);
		if (cl)
			return bad_response(c, "both Content-Length and Transfer-Encoding");
		*ret = FRAME_CHUNKED;
		return 0;
	}
	if (cl) {
		uint64_t v = 0;
		if (!*cl || strlen(cl) > 16)
			return bad_response(c, "Content-Length '%s' is not a length", cl);
		for (const char *p = cl; *p; p++) {
			if (!is_digit(*p))
				return bad_response(c, "Content-Length '%s' is not a length", cl);
			v = v * 10 + (uint64_t)(*p - '0');
		}
		if (v > HTTP_LENGTH_MAX)
			return bad_response(c, "Content-Length %s is too large", cl);
		*ret = FRAME_LENGTH;
		*ret_len = v;
		return 0;
	}
	*ret = FRAME_CLOSE;
	return 0;
}

/* ---- the body --------------------------------------------------------- */

struct body {
	struct http_response *res;
	bool stream;
	struct buf buf; /* buffered, up to its max */
};

/* Hand n bytes on. 0, 1 (the callback said stop), or -errno. */
static int body_sink(struct conn *c, struct body *b, const char *p, size_t n)
{
	if (n == 0)
		return 0;
	if (b->stream) {
		int r = c->opt->on_body(b->res, p, n, c->opt->data, c->err);
		if (r < 0) {
			if (!error_is_set(c->err))
				error_set(c->err, -r, "the response body was refused: %s",
					  strerror(-r));
			return r;
		}
		return r > 0 ? 1 : 0;
	}
	int r = buf_append(&b->buf, p, n);
	if (r == -E2BIG)
		return bad_response(c, "the body is larger than %zu bytes", b->buf.max);
	if (r < 0)
		return error_set_errno(c->err, -r, "reading the response body");
	return 0;
}

/* Pass on up to n bytes of what is buffered (filling if empty). *ret_used = how many. */
static int body_take(struct conn *c, struct body *b, uint64_t n, const char *what, size_t *ret_used)
{
	while (c->pos == c->len) {
		if (c->eof)
			return closed_early(c, what);
		int r = conn_fill(c);
		if (r < 0)
			return r;
	}
	size_t k = c->len - c->pos;
	if (k > n)
		k = (size_t)n;
	const char *p = c->buf + c->pos;
	c->pos += k;
	*ret_used = k;
	return body_sink(c, b, p, k);
}

static int read_length_body(struct conn *c, struct body *b, uint64_t n)
{
	if (!b->stream && n > b->buf.max)
		return bad_response(c, "the body of %" PRIu64 " bytes is larger than %zu", n,
				    b->buf.max);
	while (n > 0) {
		size_t used = 0;
		int r = body_take(c, b, n, "the body", &used);
		if (r != 0)
			return r;
		n -= used;
	}
	return 0;
}

static int read_close_body(struct conn *c, struct body *b)
{
	for (;;) {
		if (c->pos < c->len) {
			const char *p = c->buf + c->pos;
			size_t k = c->len - c->pos;
			c->pos = c->len;
			int r = body_sink(c, b, p, k);
			if (r != 0)
				return r;
		}
		if (c->eof)
			return 0;
		int r = conn_fill(c);
		if (r < 0)
			return r;
	}
}

/*
 * One line of the chunked framing, CRLF-terminated, at most max bytes
 * with its CRLF. *ret points into the buffer until the next fill.
 */
static int read_line(struct conn *c, size_t max, const char *what, char **ret, size_t *ret_len)
{
	size_t scanned = 0;
	for (;;) {
		char *start = c->buf + c->pos;
		size_t avail = c->len - c->pos;
		char *lf = memchr(start + scanned, '\n', avail - scanned);
		if (lf) {
			size_t n = (size_t)(lf - start) + 1;
			if (n > max)
				return bad_response(c, "%s is longer than %zu bytes", what, max);
			if (n < 2 || start[n - 2] != '\r')
				return bad_response(c, "%s does not end in CRLF", what);
			start[n - 2] = '\0';
			if (has_ctl(start, n - 2))
				return bad_response(c, "%s holds control characters", what);
			c->pos += n;
			*ret = start;
			*ret_len = n - 2;
			return 0;
		}
		if (avail >= max)
			return bad_response(c, "%s is longer than %zu bytes", what, max);
		if (c->eof)
			return closed_early(c, "the chunked body");
		scanned = avail;
		int r = conn_fill(c);
		if (r < 0)
			return r;
	}
}

static int parse_chunk_size(struct conn *c, const char *line, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; hex_value(line[i]) >= 0; i++) {
		if (i == HTTP_CHUNK_DIGITS_MAX)
			return bad_response(c, "a chunk size is too large");
		v = v * 16 + (uint64_t)hex_value(line[i]);
	}
	if (i == 0)
		return bad_response(c, "a chunk-size line does not start with a hex number");
	while (line[i] == ' ' || line[i] == '\t')
		i++;
	/* chunk extensions: ";name[=value]"..., ignored */
	if (line[i] != '\0' && line[i] != ';')
		return bad_response(c, "a chunk-size line has junk after the size");
	*ret = v;
	return 0;
}

/* The CRLF after a chunk's data. */
static int expect_crlf(struct conn *c)
{
	while (c->len - c->pos < 2) {
		if (c->eof)
			return closed_early(c, "the chunked body");
		int r = conn_fill(c);
		if (r < 0)
			return r;
	}
	if (c->buf[c->pos] != '\r' || c->buf[c->pos + 1] != '\n')
		return bad_response(c, "a chunk is not followed by CRLF (longer than its size?)");
	c->pos += 2;
	return 0;
}

static int read_chunked_body(struct conn *c, struct body *b)
{
	char *line;
	size_t len;
	for (;;) {
		uint64_t size = 0;
		int r = read_line(c, HTTP_CHUNK_LINE_MAX, "a chunk-size line", &line, &len);
		if (r < 0)
			return r;
		if ((r = parse_chunk_size(c, line, &size)) < 0)
			return r;
		if (size == 0)
			break;
		if (!b->stream && size > b->buf.max - b->buf.len)
			return bad_response(c, "the body is larger than %zu bytes", b->buf.max);
		while (size > 0) {
			size_t used = 0;
			r = body_take(c, b, size, "a chunk", &used);
			if (r != 0)
				return r;
			size -= used;
		}
		if ((r = expect_crlf(c)) < 0)
			return r;
	}
	/* trailers, up to an empty line: checked and dropped */
	size_t total = 0;
	for (;;) {
		int r = read_line(c, HTTP_HEAD_MAX, "a trailer line", &line, &len);
		if (r < 0)
			return r;
		if (len == 0)
			return 0;
		total += len + 2;
		if (total > HTTP_HEAD_MAX)
			return bad_response(c, "the trailers are larger than %u KiB",
					    HTTP_HEAD_MAX >> 10);
		const char *p = line;
		while (is_tchar(*p))
			p++;
		if (p == line || *p != ':')
			return bad_response(c, "a trailer line is not 'Name: value'");
	}
}

/* ---- the exchange ----------------------------------------------------- */

/*
 * Send body_len bytes pulled from req->read_body. A failure of the
 * reader's (or a body shorter than said) sets *ret_local and goes to err:
 * the server still waits for the rest, so there is no answer to read. A
 * failure to send goes to c->err, as conn_send()'s do.
 */
static int send_from_reader(struct conn *c, const struct http_request *req, struct error *err,
			    bool *ret_local)
{
	_cleanup_free_ char *piece = malloc(HTTP_SEND_PIECE);
	if (!piece) {
		*ret_local = true;
		return error_set_errno(err, ENOMEM, "sending the request body");
	}
	size_t left = req->body_len;
	while (left > 0) {
		size_t want = left < HTTP_SEND_PIECE ? left : HTTP_SEND_PIECE;
		ssize_t n = req->read_body(req->read_body_data, piece, want, err);
		if (n <= 0 || (size_t)n > want) {
			*ret_local = true;
			if (n < 0 && error_is_set(err))
				return (int)n;
			if (n < 0)
				return error_set(err, (int)-n, "reading the request body: %s",
						 strerror((int)-n));
			if (n == 0)
				return error_set(err, EIO,
						 "the request body ended after %zu of %zu bytes",
						 req->body_len - left, req->body_len);
			return error_set(err, EINVAL, "internal: a body reader overran its buffer");
		}
		int r = conn_send(c, piece, (size_t)n);
		if (r < 0)
			return r;
		left -= (size_t)n;
	}
	return 0;
}

/* http_exchange() over fd, or over tls on it when tls is not NULL. */
static int exchange(int fd, struct http_tls *tls, const char *name, const struct http_request *req,
		    const struct http_options *opt, struct http_response *ret, struct error *err)
{
	if (!opt)
		opt = &default_options;
	struct buf head = {.max = HTTP_REQUEST_HEAD_MAX};
	struct http_response res = {0};
	struct body b = {.res = &res};
	struct error send_err = {0};
	char *buf = NULL;
	int r = build_request(req, &head, err);
	if (r < 0)
		goto out;

	buf = malloc(HTTP_HEAD_MAX);
	if (!buf) {
		r = error_set_errno(err, ENOMEM, "reading the response");
		goto out;
	}
	struct conn c = {
	    .fd = fd, .tls = tls, .name = name, .opt = opt, .err = &send_err, .buf = buf};

	/*
	 * A server may answer early and close (413, say): if sending fails,
	 * read the answer anyway, and report the send error only if none came.
	 */
	bool local = false;
	r = conn_send(&c, head.data, head.len);
	if (r == 0 && req->body && req->body_len > 0)
		r = conn_send(&c, req->body, req->body_len);
	else if (r == 0 && req->read_body)
		r = send_from_reader(&c, req, err, &local);
	if (local)
		goto out;
	bool sent = r == 0;
	if (r == -ETIMEDOUT || (r < 0 && r != -EPIPE && r != -ECONNRESET)) {
		*err = send_err;
		goto out;
	}
	c.err = err;

	for (;;) {
		char *h = NULL;
		size_t hlen = 0;
		r = read_head(&c, &h, &hlen);
		if (r < 0) {
			if (!sent)
				*err = send_err;
			goto out;
		}
		free(res.head);
		res = (struct http_response){0};
		if ((r = parse_head(&c, h, hlen, &res)) < 0)
			goto out;
		if (res.status == 101) {
			r = bad_response(&c, "101 Switching Protocols was not asked for");
			goto out;
		}
		if (res.status >= 200)
			break;
		/* 1xx: interim, no body; the real response follows */
	}

	enum framing frame = FRAME_NONE;
	uint64_t length = 0;
	if ((r = framing_of(&c, req, &res, &frame, &length)) < 0)
		goto out;
	b.stream = opt->on_body && res.status / 100 == 2;
	b.buf.max = opt->body_max ? opt->body_max : HTTP_BODY_MAX;
	switch (frame) {
	case FRAME_NONE:
		r = 0;
		break;
	case FRAME_LENGTH:
		r = read_length_body(&c, &b, length);
		break;
	case FRAME_CHUNKED:
		r = read_chunked_body(&c, &b);
		break;
	case FRAME_CLOSE:
		r = read_close_body(&c, &b);
		break;
	}
	if (r < 0)
		goto out;
	res.stopped = r > 0;
	res.streamed = b.stream;
	if (!b.stream && frame != FRAME_NONE &&
	    (r = buf_steal(&b.buf, &res.body, &res.body_len)) < 0) {
		r = error_set_errno(err, -r, "reading the response body");
		goto out;
	}
	*ret = res;
	res = (struct http_response){0};
	r = 0;
out:
	buf_release(&head);
	free(buf);
	buf_release(&b.buf);
	/* res.headers point into res.head; release both together */
	http_response_release(&res);
	return r;
}

int http_exchange(int fd, const char *name, const struct http_request *req,
		  const struct http_options *opt, struct http_response *ret, struct error *err)
{
	return exchange(fd, NULL, name, req, opt, ret, err);
}

/* The TLS handshake on fd, within connect_timeout_ms and the deadline. */
static int tls_start(int fd, const struct http_endpoint *ep, const struct http_options *opt,
		     struct http_tls **ret, struct error *err)
{
	char what[sizeof(ep->name) + 32];
	snprintf(what, sizeof(what), "%s at %s", peer_of(opt), ep->name);
	struct http_tls *t = NULL;
	int r = http_tls_new(fd, ep->host, opt->cacert, what, &t, err);
	if (r < 0)
		return r;
	int64_t end = opt->connect_timeout_ms > 0 ? http_now_ms() + opt->connect_timeout_ms : 0;
	if (opt->deadline_ms > 0 && (end == 0 || opt->deadline_ms < end))
		end = opt->deadline_ms;
	for (;;) {
		short events = POLLIN;
		r = http_tls_handshake(t, &events, err);
		if (r != -EAGAIN)
			break;
		r = wait_fd(fd, events, 0, end);
		if (r == -ETIMEDOUT) {
			r = error_set(err, ETIMEDOUT, "TLS: no handshake with %s within %d ms",
				      what, opt->connect_timeout_ms);
			break;
		}
		if (r < 0) {
			r = error_set_errno(err, -r, "poll");
			break;
		}
	}
	if (r < 0) {
		http_tls_free(t);
		return r;
	}
	*ret = t;
	return 0;
}

int http_request(const struct http_endpoint *ep, const struct http_request *req,
		 const struct http_options *opt, struct http_response *ret, struct error *err)
{
	if (!opt)
		opt = &default_options;
	_cleanup_close_ int fd = -1;
	int r = http_connect(ep, opt, &fd, err);
	if (r < 0)
		return r;
	if (ep->transport != HTTP_TCP || !ep->tls)
		return exchange(fd, NULL, ep->name, req, opt, ret, err);
	struct http_tls *tls = NULL;
	if ((r = tls_start(fd, ep, opt, &tls, err)) < 0)
		return r;
	r = exchange(fd, tls, ep->name, req, opt, ret, err);
	http_tls_free(tls);
	return r;
}
