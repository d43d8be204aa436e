/*
 * http-client.h - a small, strict HTTP/1.1 client: one request per
 * connection, over a unix socket, TCP, or TLS over TCP (tls.h).
 *
 * It is what the agentbox command speaks to agentboxd with, and only as
 * much HTTP as that needs: a request with an optional body goes out with
 * "Connection: close"; the response's status line and headers are read
 * whole (at most HTTP_HEAD_MAX bytes), then the body by Content-Length,
 * by "Transfer-Encoding: chunked" (extensions ignored, trailers read and
 * dropped) or, with neither, until the server closes.
 *
 * Strict means a response that is not well-formed is refused, never
 * guessed at: lines end in CRLF; header names are tokens with no space
 * before the colon; no folded lines or control characters; one
 * Content-Length, digits only; no transfer coding but chunked, and not
 * both framings at once; chunk sizes in hex that fit; CRLF after every
 * chunk. A connection that closes before the framing says the body ends
 * is an error (-ECONNRESET), not a short body; a malformed response is
 * -EPROTO. Over TLS a connection ends only with the server's close_notify:
 * one cut without it is -ECONNRESET, even where the framing is "until the
 * server closes".
 *
 * Response bodies are either buffered (at most opt->body_max,
 * HTTP_BODY_MAX by default) or, when opt->on_body is set and the status is
 * 2xx, handed to it piece by piece as they arrive (logs -f, Server-Sent
 * Events); error bodies are always buffered, so the caller can read the
 * error. A request body is sent from memory or, piece by piece, from a
 * reader (a file copied into a sandbox), always with its Content-Length.
 *
 * Time: opt->connect_timeout_ms bounds the connect, opt->read_timeout_ms
 * each wait for the socket to become readable or writable (0 = wait
 * forever, as streams do), and opt->deadline_ms, if set, the whole
 * exchange (CLOCK_MONOTONIC, http_now_ms()). Running out is -ETIMEDOUT.
 *
 * Errors: every function returns 0 or -errno and fills a struct error
 * with one line for a person. Nothing here prints, and SIGPIPE is never
 * raised (sends use MSG_NOSIGNAL). Every fd is O_CLOEXEC and closed
 * before the call returns.
 *
 * Hosts are numeric IPv4 or IPv6 addresses, or "localhost": the agentbox
 * binary is static, and name resolution would need glibc's shared NSS
 * modules at run time.
 */
#ifndef AGENTBOX_CLIENT_HTTP_CLIENT_H
#define AGENTBOX_CLIENT_HTTP_CLIENT_H

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The status line, the headers and the final CRLF; and, apart, the trailers. */
#define HTTP_HEAD_MAX (64u << 10)
/* Headers one response may carry. */
#define HTTP_HEADERS_MAX 100
/* A buffered body, unless opt->body_max says otherwise. */
#define HTTP_BODY_MAX (64u << 20)
/* A chunk-size line with its extensions. */
#define HTTP_CHUNK_LINE_MAX 4096
/* Bytes of a request's head (request line and headers) we send. */
#define HTTP_REQUEST_HEAD_MAX (16u << 10)

/* Where the server is. */
enum http_transport {
	HTTP_UNIX = 0,
	HTTP_TCP,
};

struct http_endpoint {
	enum http_transport transport;
	bool tls;	    /* HTTP_TCP: https (tls.h) */
	char path[108];	    /* HTTP_UNIX: the socket's path (sun_path's size) */
	char host[64];	    /* HTTP_TCP: "127.0.0.1", "::1" or "localhost" */
	char port[8];	    /* HTTP_TCP: "1..65535" */
	char authority[80]; /* HTTP_TCP: "HOST:PORT", "[IPV6]:PORT": the Host header */
	char name[300];	    /* as the user wrote it, for messages */
};

/*
 * Parse where the server is (endpoint.c): a string starting with '/' is a
 * unix socket's path; anything else is "HOST:PORT" or "[IPV6]:PORT". 0,
 * or -EINVAL with err saying what is wrong.
 */
int http_endpoint_parse(const char *s, struct http_endpoint *ret, struct error *err);

/*
 * A URL: "https://HOST[:PORT]" (TLS; port 443 by default),
 * "http://HOST[:PORT]" (port 80), or "unix:/PATH"; one "/" may end the
 * first two, and nothing else: no path, query, fragment or user. HOST is
 * as for http_endpoint_parse(). 0, or -EINVAL / -ENAMETOOLONG with err.
 */
int http_endpoint_parse_url(const char *url, struct http_endpoint *ret, struct error *err);

/* A unix socket at path, relative or absolute. 0 or -ENAMETOOLONG / -EINVAL. */
int http_endpoint_unix(const char *path, struct http_endpoint *ret, struct error *err);

struct http_header {
	const char *name;  /* as the server spelled it; compare case-insensitively */
	const char *value; /* leading and trailing spaces and tabs removed */
};

/* One response. http_response_release() frees what it owns. */
struct http_response {
	int status;	    /* 200..599 (1xx interim responses are skipped) */
	const char *reason; /* the reason phrase, maybe "" */
	size_t n_headers;
	struct http_header headers[HTTP_HEADERS_MAX];
	char *head; /* owned: the storage the strings above point into */
	char *body; /* owned: the buffered body, NUL-terminated; NULL when none or streamed */
	size_t body_len;
	bool streamed; /* the body went to on_body */
	bool stopped;  /* on_body asked to stop before the body ended */
};

void http_response_release(struct http_response *r);

/* The value of the first header called name (any case), or NULL. */
const char *http_response_header(const struct http_response *r, const char *name);

/*
 * A piece of a 2xx body, in the order it arrived; the chunked framing is
 * removed. res has the status and headers. Return 0 to go on, > 0 to stop
 * reading (http_request() then returns 0 with res->stopped set), or
 * -errno to fail the request (fill err; otherwise a generic line is set).
 */
typedef int (*http_body_fn)(const struct http_response *res, const char *buf, size_t len,
			    void *data, struct error *err);

/*
 * Where a request body comes from when it is not in memory: called for
 * the next piece as the body is sent, with room for size bytes (never 0).
 * Returns how many bytes it put in buf (1 to size), 0 when it has no more,
 * or -errno (fill err; otherwise a generic line is set).
 */
typedef ssize_t (*http_body_reader_fn)(void *data, char *buf, size_t size, struct error *err);

struct http_request {
	const char *method;	    /* "GET", "POST", "PUT", "DELETE" */
	const char *target;	    /* origin form: "/v1/tasks?status=queued" */
	const char *host;	    /* the Host header; NULL = "localhost" */
	const char *const *headers; /* more "Name: value" lines, NULL-terminated; may be NULL */
	const char *body;	    /* NULL = no body (POST, PUT then send Content-Length: 0) */
	size_t body_len;	    /* of body, or of what read_body gives */
	/*
	 * Instead of body: exactly body_len bytes pulled from read_body as
	 * they are sent, so a large body never sits in memory whole. A reader
	 * that ends before body_len bytes fails the request (-EIO) before the
	 * server's answer is read; one that has more is not asked for it.
	 */
	http_body_reader_fn read_body;
	void *read_body_data;
	const char *content_type; /* with a body; NULL = none sent */
	bool head;		  /* a HEAD request: the response has no body */
};

struct http_options {
	int connect_timeout_ms; /* 0 = no limit */
	int read_timeout_ms;	/* each wait to read or write; 0 = no limit */
	int64_t deadline_ms;	/* http_now_ms() by which it all ends; 0 = none */
	size_t body_max;	/* buffered bodies; 0 = HTTP_BODY_MAX */
	const char *peer; /* what the server is, for messages ("agentboxd"); NULL = "the server" */
	const char *cacert;   /* https: the CAs to trust (a PEM file); NULL = the system's */
	http_body_fn on_body; /* stream 2xx bodies here instead of buffering them */
	void *data;	      /* for on_body */
};

/*
 * Percent-encode s as a query value: every byte but A-Z a-z 0-9 - . _ ~ /
 * becomes %XX (upper-case hex), so '%', '+', '&', '=', '#', '?', spaces,
 * control characters and non-ASCII bytes never reach the server bare.
 * Like snprintf: writes at most size bytes (a NUL included, when size >
 * 0) and returns the length of the whole encoding, at most 3 * strlen(s).
 */
size_t http_query_escape(const char *s, char *buf, size_t size);

/* CLOCK_MONOTONIC in ms, the clock of deadline_ms. */
int64_t http_now_ms(void);

/*
 * Connect to ep (O_CLOEXEC, non-blocking) within connect_timeout_ms (0 =
 * none), and return the fd in *ret_fd. A refused connection or a missing
 * socket reads "cannot reach PEER at NAME: Connection refused (is it
 * running?)". No TLS: http_request() starts it on an https endpoint.
 */
int http_connect(const struct http_endpoint *ep, const struct http_options *opt, int *ret_fd,
		 struct error *err);

/*
 * Send req on fd (a connected, non-blocking stream socket, which stays
 * the caller's) and read the response into *ret. On failure *ret is left
 * released (nothing to free). name is the server, for messages.
 */
int http_exchange(int fd, const char *name, const struct http_request *req,
		  const struct http_options *opt, struct http_response *ret, struct error *err);

/*
 * http_connect(), on an https endpoint the TLS handshake (tls.h: the
 * server verified against opt->cacert, within connect_timeout_ms too; a
 * certificate that does not verify is -EKEYREJECTED), the exchange over
 * it, and close.
 */
int http_request(const struct http_endpoint *ep, const struct http_request *req,
		 const struct http_options *opt, struct http_response *ret, struct error *err);

#endif
