/*
 * test-http-client.c - the HTTP/1.1 client (request bodies from memory or a
 * reader, query escaping), the Server-Sent Events parser and the small
 * task and sandbox views of src/client/.
 *
 * Each exchange runs against a tiny server in a forked child on the other
 * end of a socketpair: it reads the request (and copies it to a pipe, so
 * the test can look at what was sent), then writes a scripted response in
 * pieces, byte by byte or all at once, and may stall or close early. The
 * connect path is tested against unix sockets in a temporary directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"
#include "client/client.h"
#include "client/http-client.h"
#include "client/sse.h"

/* ---- the scripted server ---------------------------------------------- */

struct script {
	const char *parts[8]; /* written in order; NULL ends */
	size_t lens[8];	      /* 0: strlen */
	bool bytewise;	      /* one byte per write, with a pause between */
	int pause_us;	      /* between writes */
	int before_ms;	      /* before answering */
	int stall_ms;	      /* after writing, before closing */
	bool no_read;	      /* answer without reading the request */
};

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Read one request: the head, then Content-Length bytes of body. */
static size_t read_request(int fd, char *buf, size_t size)
{
	size_t len = 0;
	char *end = NULL;
	while (!end && len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n <= 0)
			return len;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (!end)
		return len;
	size_t want = (size_t)(end + 4 - buf);
	const char *cl = strstr(buf, "Content-Length: ");
	if (cl && cl < end)
		want += strtoul(cl + 16, NULL, 10);
	while (len < want && len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

static void serve(int fd, const struct script *s, int capture)
{
	static char req[1 << 16];
	if (!s->no_read) {
		size_t n = read_request(fd, req, sizeof(req));
		(void)write_all(capture, req, n);
	}
	close(capture);
	if (s->before_ms)
		sleep_ms(s->before_ms);
	for (int i = 0; i < 8 && s->parts[i]; i++) {
		size_t len = s->lens[i] ? s->lens[i] : strlen(s->parts[i]);
		if (s->bytewise) {
			for (size_t j = 0; j < len; j++) {
				if (write_all(fd, s->parts[i] + j, 1) < 0)
					_exit(1);
				usleep(200);
			}
		} else if (write_all(fd, s->parts[i], len) < 0) {
			_exit(1);
		}
		if (s->pause_us)
			usleep((useconds_t)s->pause_us);
	}
	if (s->stall_ms)
		sleep_ms(s->stall_ms);
	_exit(0);
}

struct run {
	int r;
	struct http_response res;
	struct error err;
	char sent[1 << 16]; /* the request as the server read it */
};

static void exchange(const struct script *s, const struct http_request *req,
		     const struct http_options *opt, struct run *out)
{
	int sv[2], cap[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(cap, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		close(cap[0]);
		serve(sv[1], s, cap[1]);
	}
	close(sv[1]);
	close(cap[1]);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	memset(&out->err, 0, sizeof(out->err));
	memset(&out->res, 0, sizeof(out->res));
	out->r = http_exchange(sv[0], "test", req, opt, &out->res, &out->err);
	close(sv[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ssize_t n = read_all(cap[0], out->sent, sizeof(out->sent) - 1);
	out->sent[n > 0 ? n : 0] = '\0';
	close(cap[0]);
}

static const struct http_request get_root = {.method = "GET", .target = "/"};

/* Run one response with GET / and default options. */
static void get(const struct script *s, struct run *out)
{
	struct http_options opt = {.read_timeout_ms = 5000, .peer = "srv"};
	exchange(s, &get_root, &opt, out);
}

static void expect_refused(const char *response, const char *why)
{
	struct script s = {.parts = {response}};
	struct run *out = calloc(1, sizeof(*out));
	assert_non_null(out);
	get(&s, out);
	if (out->r != -EPROTO)
		fail_msg("response %s: r = %d (%s), want -EPROTO", why, out->r, out->err.msg);
	assert_non_null(strstr(out->err.msg, "bad response from srv at test"));
	http_response_release(&out->res);
	free(out);
}

/* ---- bodies ------------------------------------------------------------ */

static void test_content_length(void **state)
{
	(void)state;
	struct script s = {.parts = {"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
				     "content-length: 5\r\nX-Empty:\r\n\r\nhello"}};
	struct run *out = calloc(1, sizeof(*out));
	get(&s, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(out->res.status, 200);
	assert_string_equal(out->res.reason, "OK");
	assert_int_equal(out->res.body_len, 5);
	assert_string_equal(out->res.body, "hello");
	assert_string_equal(http_response_header(&out->res, "Content-Length"), "5");
	assert_string_equal(http_response_header(&out->res, "CONTENT-TYPE"), "text/plain");
	assert_string_equal(http_response_header(&out->res, "x-empty"), "");
	assert_null(http_response_header(&out->res, "Nope"));
	/* what went out */
	assert_non_null(strstr(out->sent, "GET / HTTP/1.1\r\n"));
	assert_non_null(strstr(out->sent, "Host: localhost\r\n"));
	assert_non_null(strstr(out->sent, "Connection: close\r\n"));
	assert_null(strstr(out->sent, "Content-Length"));
	http_response_release(&out->res);
	free(out);
}

static void test_request_with_body_and_headers(void **state)
{
	(void)state;
	const char *headers[] = {"Authorization: Bearer sekrit", "Accept: application/json", NULL};
	struct http_request req = {
	    .method = "POST",
	    .target = "/v1/tasks?x=1",
	    .host = "127.0.0.1:7070",
	    .headers = headers,
	    .body = "{\"a\":1}",
	    .body_len = 7,
	    .content_type = "application/json",
	};
	struct script s = {.parts = {"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"}};
	struct http_options opt = {.read_timeout_ms = 5000};
	struct run *out = calloc(1, sizeof(*out));
	exchange(&s, &req, &opt, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(out->res.status, 201);
	assert_string_equal(out->sent, "POST /v1/tasks?x=1 HTTP/1.1\r\n"
				       "Host: 127.0.0.1:7070\r\n"
				       "Connection: close\r\n"
				       "Content-Length: 7\r\n"
				       "Content-Type: application/json\r\n"
				       "Authorization: Bearer sekrit\r\n"
				       "Accept: application/json\r\n"
				       "\r\n"
				       "{\"a\":1}");
	http_response_release(&out->res);

	/* a POST without a body still says how long it is */
	struct http_request empty = {.method = "POST", .target = "/c"};
	exchange(&s, &empty, &opt, out);
	assert_int_equal(out->r, 0);
	assert_non_null(strstr(out->sent, "Content-Length: 0\r\n"));
	http_response_release(&out->res);

	/* header injection is refused before anything is sent */
	const char *bad[] = {"X-A: b\r\nX-Evil: 1", NULL};
	struct http_request inj = {.method = "GET", .target = "/", .headers = bad};
	exchange(&s, &inj, &opt, out);
	assert_int_equal(out->r, -EINVAL);
	struct http_request sp = {.method = "GET", .target = "/a b"};
	exchange(&s, &sp, &opt, out);
	assert_int_equal(out->r, -EINVAL);
	free(out);
}

/* Hands out body in pieces of at most step bytes; fails or ends early on request. */
struct pieces {
	const char *body;
	size_t len, pos, step;
	size_t stop_at; /* claim the end here; 0 = never */
	int fail_at;	/* return -EIO at this call; 0 = never */
	bool set_err;	/* and say why in err */
	int calls;
};

static ssize_t give_pieces(void *data, char *buf, size_t size, struct error *err)
{
	struct pieces *p = data;
	assert_true(size > 0);
	p->calls++;
	if (p->fail_at && p->calls == p->fail_at)
		return p->set_err ? error_set(err, EIO, "the disk is on fire") : -EIO;
	size_t end = p->stop_at ? p->stop_at : p->len;
	size_t n = end - p->pos;
	if (n > p->step)
		n = p->step;
	if (n > size)
		n = size;
	memcpy(buf, p->body + p->pos, n);
	p->pos += n;
	return (ssize_t)n;
}

static void test_request_body_from_reader(void **state)
{
	(void)state;
	static char body[3001];
	for (size_t i = 0; i < 3000; i++)
		body[i] = (char)('a' + i % 26);
	struct pieces pc = {.body = body, .len = 3000, .step = 7};
	struct http_request req = {
	    .method = "PUT",
	    .target = "/f?path=%2Fa",
	    .body_len = 3000,
	    .read_body = give_pieces,
	    .read_body_data = &pc,
	    .content_type = "application/octet-stream",
	};
	struct script s = {.parts = {"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"}};
	struct http_options opt = {.read_timeout_ms = 5000};
	struct run *out = calloc(1, sizeof(*out));
	exchange(&s, &req, &opt, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(out->res.status, 201);
	const char *head = "PUT /f?path=%2Fa HTTP/1.1\r\n"
			   "Host: localhost\r\n"
			   "Connection: close\r\n"
			   "Content-Length: 3000\r\n"
			   "Content-Type: application/octet-stream\r\n"
			   "\r\n";
	assert_int_equal(strncmp(out->sent, head, strlen(head)), 0);
	assert_string_equal(out->sent + strlen(head), body);
	assert_int_equal(pc.calls, (3000 + 6) / 7);
	http_response_release(&out->res);

	/* a reader that ends early fails the request, before any answer is read */
	struct pieces shrt = {.body = body, .len = 3000, .step = 1000, .stop_at = 2000};
	req.read_body_data = &shrt;
	exchange(&s, &req, &opt, out);
	assert_int_equal(out->r, -EIO);
	assert_string_equal(out->err.msg, "the request body ended after 2000 of 3000 bytes");

	/* a reader's own failure, with its message or without */
	struct pieces bad = {.body = body, .len = 3000, .step = 100, .fail_at = 3, .set_err = true};
	req.read_body_data = &bad;
	exchange(&s, &req, &opt, out);
	assert_int_equal(out->r, -EIO);
	assert_string_equal(out->err.msg, "the disk is on fire");
	struct pieces bad2 = {.body = body, .len = 3000, .step = 100, .fail_at = 1};
	req.read_body_data = &bad2;
	exchange(&s, &req, &opt, out);
	assert_int_equal(out->r, -EIO);
	assert_non_null(strstr(out->err.msg, "reading the request body"));

	/* an empty body from a reader is never read */
	struct pieces none = {.body = body, .len = 0, .step = 1};
	req.read_body_data = &none;
	req.body_len = 0;
	exchange(&s, &req, &opt, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(none.calls, 0);
	assert_non_null(strstr(out->sent, "Content-Length: 0\r\n"));
	http_response_release(&out->res);
	free(out);
}

static void test_delete_and_put(void **state)
{
	(void)state;
	struct script s = {.parts = {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}};
	struct http_options opt = {.read_timeout_ms = 5000};
	struct run *out = calloc(1, sizeof(*out));
	struct http_request del = {.method = "DELETE", .target = "/v1/sandboxes/sbx_a"};
	exchange(&s, &del, &opt, out);
	assert_int_equal(out->r, 0);
	assert_string_equal(out->sent, "DELETE /v1/sandboxes/sbx_a HTTP/1.1\r\n"
				       "Host: localhost\r\n"
				       "Connection: close\r\n"
				       "\r\n");
	http_response_release(&out->res);

	/* raw bytes, NULs included, go as they are */
	struct http_request put = {.method = "PUT",
				   .target = "/f",
				   .body = "a\0b",
				   .body_len = 3,
				   .content_type = "application/octet-stream"};
	exchange(&s, &put, &opt, out);
	assert_int_equal(out->r, 0);
	const char *head = "PUT /f HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
			   "Content-Length: 3\r\nContent-Type: application/octet-stream\r\n\r\n";
	assert_int_equal(strncmp(out->sent, head, strlen(head)), 0);
	assert_memory_equal(out->sent + strlen(head), "a\0b", 3);
	http_response_release(&out->res);

	/* a PUT without a body still says how long it is */
	struct http_request empty = {.method = "PUT", .target = "/f"};
	exchange(&s, &empty, &opt, out);
	assert_non_null(strstr(out->sent, "Content-Length: 0\r\n"));
	http_response_release(&out->res);
	free(out);
}

static void test_query_escape(void **state)
{
	(void)state;
	char buf[128];
	assert_int_equal(http_query_escape("/workspace/a-b_c.d~e", buf, sizeof(buf)), 20);
	assert_string_equal(buf, "/workspace/a-b_c.d~e");
	const char *nasty = "/a b+c&d=e#f?g%h\xc3\xa9\x01\x7f";
	size_t n = http_query_escape(nasty, buf, sizeof(buf));
	assert_string_equal(buf, "/a%20b%2Bc%26d%3De%23f%3Fg%25h%C3%A9%01%7F");
	assert_int_equal(n, strlen(buf));
	/* like snprintf: the length it needs, and what fits */
	assert_int_equal(http_query_escape(nasty, NULL, 0), n);
	assert_int_equal(http_query_escape("a b", buf, 3), 5);
	assert_string_equal(buf, "a%");
	assert_int_equal(http_query_escape("", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "5;name=value;x\r\nhello\r\n"
			      "6 ; ext\r\n world\r\n"
			      "A\r\n0123456789\r\n"
			      "0\r\nX-Trailer: yes\r\n\r\n";

static void test_chunked(void **state)
{
	(void)state;
	struct script s = {.parts = {chunked}};
	struct run *out = calloc(1, sizeof(*out));
	get(&s, out);
	assert_int_equal(out->r, 0);
	assert_string_equal(out->res.body, "hello world0123456789");
	assert_int_equal(out->res.body_len, 21);
	http_response_release(&out->res);
	free(out);
}

static void test_chunked_split_across_reads(void **state)
{
	(void)state;
	struct script s = {.parts = {chunked}, .bytewise = true};
	struct run *out = calloc(1, sizeof(*out));
	get(&s, out);
	assert_int_equal(out->r, 0);
	assert_string_equal(out->res.body, "hello world0123456789");
	http_response_release(&out->res);

	/* the head split in odd places, the body in pieces */
	struct script s2 = {.parts = {"HTTP/1.1 200 OK\r", "\nTransfer-Encoding: chu", "nked\r\n\r",
				      "\n3\r\nab", "c\r", "\n0\r\n\r\n"},
			    .pause_us = 2000};
	get(&s2, out);
	assert_int_equal(out->r, 0);
	assert_string_equal(out->res.body, "abc");
	http_response_release(&out->res);
	free(out);
}

static void test_body_until_close_and_empty_bodies(void **state)
{
	(void)state;
	struct script s = {.parts = {"HTTP/1.0 200 OK\r\n\r\nall of it", " and more"},
			   .pause_us = 1000};
	struct run *out = calloc(1, sizeof(*out));
	get(&s, out);
	assert_int_equal(out->r, 0);
	assert_string_equal(out->res.body, "all of it and more");
	http_response_release(&out->res);

	struct script s204 = {.parts = {"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"}};
	get(&s204, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(out->res.status, 204);
	assert_null(out->res.body);
	http_response_release(&out->res);

	struct script zero = {.parts = {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
	get(&zero, out);
	assert_int_equal(out->r, 0);
	assert_non_null(out->res.body);
	assert_string_equal(out->res.body, "");
	http_response_release(&out->res);

	/* interim 1xx responses are skipped; a reason phrase may be missing */
	struct script cont = {.parts = {"HTTP/1.1 100 Continue\r\n\r\n"
					"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok"}};
	get(&cont, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(out->res.status, 200);
	assert_string_equal(out->res.reason, "");
	assert_string_equal(out->res.body, "ok");
	http_response_release(&out->res);
	free(out);
}

/* ---- streaming ----------------------------------------------------------- */

struct sink {
	char buf[256];
	size_t len;
	int calls;
	int stop_after; /* return 1 at this call; 0 = never */
	int fail_at;	/* return -EIO at this call */
	int status;
};

static int collect(const struct http_response *res, const char *buf, size_t len, void *data,
		   struct error *err)
{
	(void)err;
	struct sink *k = data;
	k->status = res->status;
	k->calls++;
	memcpy(k->buf + k->len, buf, len);
	k->len += len;
	k->buf[k->len] = '\0';
	if (k->fail_at && k->calls == k->fail_at)
		return -EIO;
	return k->stop_after && k->calls >= k->stop_after ? 1 : 0;
}

static void test_streaming_callback(void **state)
{
	(void)state;
	struct script s = {.parts = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
				     "4\r\none \r\n", "4\r\ntwo \r\n", "5\r\nthree\r\n0\r\n\r\n"},
			   .pause_us = 20000};
	struct sink k = {0};
	struct http_options opt = {.read_timeout_ms = 5000, .on_body = collect, .data = &k};
	struct run *out = calloc(1, sizeof(*out));
	exchange(&s, &get_root, &opt, out);
	assert_int_equal(out->r, 0);
	assert_true(out->res.streamed);
	assert_false(out->res.stopped);
	assert_null(out->res.body);
	assert_string_equal(k.buf, "one two three");
	assert_int_equal(k.calls, 3); /* each chunk as it came */
	assert_int_equal(k.status, 200);
	http_response_release(&out->res);

	/* the callback stops the stream */
	struct sink k2 = {.stop_after = 2};
	opt.data = &k2;
	exchange(&s, &get_root, &opt, out);
	assert_int_equal(out->r, 0);
	assert_true(out->res.stopped);
	assert_string_equal(k2.buf, "one two ");
	http_response_release(&out->res);

	/* the callback fails the request */
	struct sink k3 = {.fail_at = 1};
	opt.data = &k3;
	exchange(&s, &get_root, &opt, out);
	assert_int_equal(out->r, -EIO);
	assert_non_null(strstr(out->err.msg, "refused"));

	/* an error answer is buffered, not streamed */
	struct script e = {.parts = {"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope"}};
	struct sink k4 = {0};
	opt.data = &k4;
	exchange(&e, &get_root, &opt, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(out->res.status, 404);
	assert_false(out->res.streamed);
	assert_string_equal(out->res.body, "nope");
	assert_int_equal(k4.calls, 0);
	http_response_release(&out->res);
	free(out);
}

/* ---- refusals ------------------------------------------------------------ */

static void test_malformed_status_lines(void **state)
{
	(void)state;
	expect_refused("HTTP/2 200 OK\r\n\r\n", "HTTP/2");
	expect_refused("HTTP/1.2 200 OK\r\n\r\n", "HTTP/1.2");
	expect_refused("ICY 200 OK\r\n\r\n", "ICY");
	expect_refused("HTTP/1.1 20 OK\r\n\r\n", "two digits");
	expect_refused("HTTP/1.1 2000 OK\r\n\r\n", "four digits");
	expect_refused("HTTP/1.1 200OK\r\n\r\n", "no space");
	expect_refused("HTTP/1.1  200 OK\r\n\r\n", "two spaces");
	expect_refused("HTTP/1.1 099 Low\r\n\r\n", "status < 100");
	expect_refused("HTTP/1.1 600 High\r\n\r\n", "status > 599");
	expect_refused("HTTP/1.1 200 O\x01K\r\n\r\n", "control character");
	expect_refused("HTTP/1.1 101 Switching Protocols\r\n\r\n", "101");
	expect_refused("http/1.1 200 OK\r\n\r\n", "lower case");
}

static void test_malformed_headers(void **state)
{
	(void)state;
	expect_refused("HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n", "space in name");
	expect_refused("HTTP/1.1 200 OK\r\nName : x\r\n\r\n", "space before colon");
	expect_refused("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "no colon");
	expect_refused("HTTP/1.1 200 OK\r\n: x\r\n\r\n", "empty name");
	expect_refused("HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", "folded");
	expect_refused("HTTP/1.1 200 OK\r\nA: b\x01c\r\n\r\n", "control in value");
	expect_refused("HTTP/1.1 200 OK\r\nA: b\nB: c\r\n\r\n", "bare LF");
	expect_refused("HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", "bare CR");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
		       "both framings");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "gzip");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "a list");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		       "Transfer-Encoding: chunked\r\n\r\n",
		       "TE twice");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", "CL abc");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "CL -1");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", "CL +1");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n", "CL list");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", "CL empty");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999\r\n\r\n", "CL huge");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		       "two CLs");
	/* bad chunked framing */
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "size zz");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", "no size");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "size -1");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n",
		       "junk after size");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		       "ffffffffffffffffff\r\n",
		       "size overflow");
	expect_refused(
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
	    "data longer than size");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
		       "size line with bare LF");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		       "3\r\nabc\r\n0\r\nbad trailer\r\n\r\n",
		       "bad trailer");
}

static void test_oversize(void **state)
{
	(void)state;
	/* a header block of 64 KiB and more */
	size_t big = HTTP_HEAD_MAX + 100;
	char *head = malloc(big + 64);
	assert_non_null(head);
	int n = snprintf(head, 64, "HTTP/1.1 200 OK\r\nX-Big: ");
	memset(head + n, 'a', big);
	memcpy(head + n + big, "\r\n\r\n", 5);
	struct script s = {.parts = {head}};
	struct run *out = calloc(1, sizeof(*out));
	get(&s, out);
	assert_int_equal(out->r, -EPROTO);
	assert_non_null(strstr(out->err.msg, "larger than 64 KiB"));
	free(head);

	/* just under the limit is fine */
	head = malloc(HTTP_HEAD_MAX + 1);
	n = snprintf(head, 64, "HTTP/1.1 200 OK\r\nX-Big: ");
	size_t fill = HTTP_HEAD_MAX - (size_t)n - strlen("\r\nContent-Length: 0\r\n\r\n");
	memset(head + n, 'b', fill);
	memcpy(head + n + fill, "\r\nContent-Length: 0\r\n\r\n", 24);
	assert_int_equal(strlen(head), HTTP_HEAD_MAX);
	s.parts[0] = head;
	get(&s, out);
	assert_int_equal(out->r, 0);
	assert_int_equal(strlen(http_response_header(&out->res, "X-Big")), fill);
	http_response_release(&out->res);
	free(head);

	/* too many headers */
	char many[HTTP_HEADERS_MAX * 8 + 64];
	size_t len = (size_t)snprintf(many, sizeof(many), "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i <= HTTP_HEADERS_MAX; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "H%d: x\r\n", i);
	snprintf(many + len, sizeof(many) - len, "\r\n");
	expect_refused(many, "too many headers");

	/* bodies past body_max: announced, chunked, and until close */
	struct http_options opt = {.read_timeout_ms = 5000, .body_max = 10};
	struct script cl = {.parts = {"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world"}};
	exchange(&cl, &get_root, &opt, out);
	assert_int_equal(out->r, -EPROTO);
	assert_non_null(strstr(out->err.msg, "larger than"));
	struct script ch = {.parts = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				      "6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n"}};
	exchange(&ch, &get_root, &opt, out);
	assert_int_equal(out->r, -EPROTO);
	struct script cls = {.parts = {"HTTP/1.1 200 OK\r\n\r\nhello world"}};
	exchange(&cls, &get_root, &opt, out);
	assert_int_equal(out->r, -EPROTO);
	/* exactly body_max is fine */
	struct script ten = {.parts = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"}};
	exchange(&ten, &get_root, &opt, out);
	assert_int_equal(out->r, 0);
	assert_string_equal(out->res.body, "0123456789");
	http_response_release(&out->res);

	/* a chunk-size line with endless extensions */
	char *ext = malloc(HTTP_CHUNK_LINE_MAX + 128);
	n = snprintf(ext, 128, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;");
	memset(ext + n, 'e', HTTP_CHUNK_LINE_MAX);
	memcpy(ext + n + HTTP_CHUNK_LINE_MAX, "\r\na\r\n0\r\n\r\n", 11);
	expect_refused(ext, "long chunk line");
	free(ext);
	free(out);
}

static void test_server_closes_early(void **state)
{
	(void)state;
	struct run *out = calloc(1, sizeof(*out));
	struct script none = {.parts = {NULL}};
	get(&none, out);
	assert_int_equal(out->r, -ECONNRESET);
	assert_non_null(strstr(out->err.msg, "closed the connection without answering"));

	struct script in_head = {.parts = {"HTTP/1.1 200 OK\r\nContent-Le"}};
	get(&in_head, out);
	assert_int_equal(out->r, -ECONNRESET);
	assert_string_equal(out->err.msg, "srv at test closed the connection inside the headers");

	struct script short_body = {
	    .parts = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"}};
	get(&short_body, out);
	assert_int_equal(out->r, -ECONNRESET);
	assert_non_null(strstr(out->err.msg, "closed the connection inside the body"));

	struct script in_chunk = {.parts = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
					    "a\r\nhello"}};
	get(&in_chunk, out);
	assert_int_equal(out->r, -ECONNRESET);

	struct script in_size = {.parts = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
					   "5\r\nhello\r\n1"}};
	get(&in_size, out);
	assert_int_equal(out->r, -ECONNRESET);

	struct script no_last = {.parts = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
					   "5\r\nhello\r\n"}};
	get(&no_last, out);
	assert_int_equal(out->r, -ECONNRESET);
	assert_non_null(strstr(out->err.msg, "inside the chunked body"));

	/* the server answers without reading a big body and closes: its answer counts */
	static char body[1 << 20];
	memset(body, 'x', sizeof(body));
	struct http_request post = {
	    .method = "POST", .target = "/", .body = body, .body_len = sizeof(body)};
	struct script early = {.parts = {"HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig"},
			       .no_read = true};
	struct http_options opt = {.read_timeout_ms = 5000};
	signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would end this test program */
	exchange(&early, &post, &opt, out);
	signal(SIGPIPE, SIG_IGN);
	if (out->r == 0) {
		assert_int_equal(out->res.status, 413);
		http_response_release(&out->res);
	} else {
		/* the kernel may reset instead; never a SIGPIPE */
		assert_true(out->r == -ECONNRESET || out->r == -EPIPE);
	}
	free(out);
}

static void test_timeouts(void **state)
{
	(void)state;
	struct run *out = calloc(1, sizeof(*out));
	/* nothing comes within the read timeout */
	struct script slow = {.parts = {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
			      .before_ms = 3000};
	struct http_options opt = {.read_timeout_ms = 100, .peer = "srv"};
	int64_t t0 = http_now_ms();
	exchange(&slow, &get_root, &opt, out);
	assert_int_equal(out->r, -ETIMEDOUT);
	assert_true(http_now_ms() - t0 < 2000);
	assert_non_null(strstr(out->err.msg, "srv at test"));

	/* a stream that stalls in its body: the per-read timeout, then the deadline */
	struct script stall = {.parts = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
					 "3\r\nabc\r\n"},
			       .stall_ms = 3000};
	t0 = http_now_ms();
	exchange(&stall, &get_root, &opt, out);
	assert_int_equal(out->r, -ETIMEDOUT);
	assert_true(http_now_ms() - t0 < 2000);

	struct sink k = {0};
	struct http_options stream = {
	    .deadline_ms = http_now_ms() + 200, .on_body = collect, .data = &k};
	t0 = http_now_ms();
	exchange(&stall, &get_root, &stream, out);
	assert_int_equal(out->r, -ETIMEDOUT);
	assert_string_equal(k.buf, "abc");
	assert_true(http_now_ms() - t0 < 2000);
	assert_non_null(strstr(out->err.msg, "out of time"));
	free(out);
}

/* ---- endpoints and connecting ------------------------------------------ */

static void test_endpoint_parse(void **state)
{
	(void)state;
	struct http_endpoint ep;
	struct error err = {0};
	assert_int_equal(http_endpoint_parse("/run/x.sock", &ep, &err), 0);
	assert_int_equal(ep.transport, HTTP_UNIX);
	assert_string_equal(ep.path, "/run/x.sock");
	assert_int_equal(http_endpoint_parse("127.0.0.1:7070", &ep, &err), 0);
	assert_int_equal(ep.transport, HTTP_TCP);
	assert_string_equal(ep.host, "127.0.0.1");
	assert_string_equal(ep.port, "7070");
	assert_string_equal(ep.name, "127.0.0.1:7070");
	assert_int_equal(http_endpoint_parse("[::1]:80", &ep, &err), 0);
	assert_string_equal(ep.host, "::1");
	assert_string_equal(ep.port, "80");
	assert_int_equal(http_endpoint_parse("localhost:65535", &ep, &err), 0);
	assert_int_equal(http_endpoint_parse("10.1.2.3:007", &ep, &err), 0);
	assert_string_equal(ep.port, "7");

	const char *bad[] = {"",
			     "host",
			     "127.0.0.1",
			     "127.0.0.1:",
			     "127.0.0.1:0",
			     "127.0.0.1:65536",
			     "127.0.0.1:-1",
			     "127.0.0.1:8o",
			     ":80",
			     "::1:80",
			     "[::1]80",
			     "[::1",
			     "example.com:80",
			     "1.2.3:80",
			     "a b:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct error){0};
		if (http_endpoint_parse(bad[i], &ep, &err) >= 0)
			fail_msg("'%s' was accepted", bad[i]);
		assert_true(err.msg[0] != '\0');
	}
	char longpath[200];
	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(http_endpoint_parse(longpath, &ep, &err), -ENAMETOOLONG);
	assert_int_equal(http_endpoint_unix("rel/x.sock", &ep, &err), 0);
	assert_string_equal(ep.path, "rel/x.sock");
}

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-http-client.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	(void)state;
	char p[128];
	const char *names[] = {"refused.sock", "ok.sock"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/%s", tmpdir, names[i]);
		unlink(p);
	}
	rmdir(tmpdir);
	return 0;
}

static int unix_socket_at(const char *path, bool do_listen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&un, sizeof(un)), 0);
	if (do_listen)
		assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static void test_connect_errors(void **state)
{
	(void)state;
	struct http_endpoint ep;
	struct error err = {0};
	char path[128];
	struct http_options opt = {.connect_timeout_ms = 1000, .peer = "agentboxd"};
	int fd = -1;

	snprintf(path, sizeof(path), "%s/missing.sock", tmpdir);
	assert_int_equal(http_endpoint_parse(path, &ep, &err), 0);
	assert_int_equal(http_connect(&ep, &opt, &fd, &err), -ENOENT);
	char want[256];
	snprintf(want, sizeof(want),
		 "cannot reach agentboxd at %s: No such file or directory (is it running?)", path);
	assert_string_equal(err.msg, want);

	/* a socket nobody listens on */
	snprintf(path, sizeof(path), "%s/refused.sock", tmpdir);
	int lfd = unix_socket_at(path, false);
	assert_int_equal(http_endpoint_parse(path, &ep, &err), 0);
	assert_int_equal(http_connect(&ep, &opt, &fd, &err), -ECONNREFUSED);
	snprintf(want, sizeof(want),
		 "cannot reach agentboxd at %s: Connection refused (is it running?)", path);
	assert_string_equal(err.msg, want);
	close(lfd);

	/* TCP: a loopback port nobody listens on */
	int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(in);
	assert_int_equal(bind(probe, (struct sockaddr *)&in, sizeof(in)), 0);
	assert_int_equal(getsockname(probe, (struct sockaddr *)&in, &len), 0);
	char hostport[64];
	snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", ntohs(in.sin_port));
	assert_int_equal(http_endpoint_parse(hostport, &ep, &err), 0);
	assert_int_equal(http_connect(&ep, &opt, &fd, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "(is it running?)"));
	close(probe);
}

/* A forked server on a unix socket, then a TCP one: http_request() end to end. */
static void serve_once(int lfd, const char *response)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			_exit(1);
		char buf[4096];
		read_request(c, buf, sizeof(buf));
		(void)write_all(c, response, strlen(response));
		close(c);
		_exit(0);
	}
	close(lfd);
}

static void test_request_over_sockets(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof(path), "%s/ok.sock", tmpdir);
	int lfd = unix_socket_at(path, true);
	serve_once(lfd, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nunix");
	struct http_endpoint ep;
	struct error err = {0};
	struct http_response res;
	struct http_options opt = {.connect_timeout_ms = 1000, .read_timeout_ms = 5000};
	assert_int_equal(http_endpoint_parse(path, &ep, &err), 0);
	assert_int_equal(http_request(&ep, &get_root, &opt, &res, &err), 0);
	assert_string_equal(res.body, "unix");
	http_response_release(&res);
	wait(NULL);

	int tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(in);
	assert_int_equal(bind(tfd, (struct sockaddr *)&in, sizeof(in)), 0);
	assert_int_equal(listen(tfd, 4), 0);
	assert_int_equal(getsockname(tfd, (struct sockaddr *)&in, &len), 0);
	char hostport[64];
	snprintf(hostport, sizeof(hostport), "localhost:%u", ntohs(in.sin_port));
	serve_once(tfd, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntcp");
	assert_int_equal(http_endpoint_parse(hostport, &ep, &err), 0);
	assert_int_equal(http_request(&ep, &get_root, &opt, &res, &err), 0);
	assert_string_equal(res.body, "tcp");
	http_response_release(&res);
	wait(NULL);
}

/* ---- Server-Sent Events ------------------------------------------------ */

struct events {
	int n;
	char type[8][32];
	char id[8][32];
	char data[8][128];
	int stop_at; /* return 7 at this event */
};

static int on_event(const struct sse_event *ev, void *data)
{
	struct events *e = data;
	if (e->n < 8) {
		snprintf(e->type[e->n], sizeof(e->type[0]), "%s", ev->type);
		snprintf(e->id[e->n], sizeof(e->id[0]), "%s", ev->id);
		snprintf(e->data[e->n], sizeof(e->data[0]), "%s", ev->data);
		assert_int_equal(strlen(ev->data), ev->data_len);
	}
	e->n++;
	return e->stop_at && e->n == e->stop_at ? 7 : 0;
}

/* Feed text whole, then byte by byte: both must give the same events. */
static void parse_both_ways(const char *text, struct events *whole, int *dropped)
{
	struct sse_parser p;
	struct error err = {0};
	sse_parser_init(&p, on_event, whole);
	assert_int_equal(sse_parser_feed(&p, text, strlen(text), &err), 0);
	*dropped = sse_parser_finish(&p);
	sse_parser_release(&p);

	struct events bytes = {0};
	sse_parser_init(&p, on_event, &bytes);
	for (size_t i = 0; text[i]; i++)
		assert_int_equal(sse_parser_feed(&p, text + i, 1, &err), 0);
	assert_int_equal(sse_parser_finish(&p), *dropped);
	sse_parser_release(&p);
	assert_int_equal(bytes.n, whole->n);
	for (int i = 0; i < whole->n && i < 8; i++) {
		assert_string_equal(bytes.type[i], whole->type[i]);
		assert_string_equal(bytes.id[i], whole->id[i]);
		assert_string_equal(bytes.data[i], whole->data[i]);
	}
}

static void test_sse_events(void **state)
{
	(void)state;
	struct events e = {0};
	int dropped;
	parse_both_ways(": keepalive\n\n"
			"id: 1\nevent: progress\ndata: {\"pages\":1}\n\n"
			"data: line one\ndata: line two\ndata\ndata:no-space\ndata:  two spaces\n\n"
			"id: 7\r\nevent: status\r\ndata: {\"status\":\"succeeded\"}\r\n\r\n"
			"retry: 100\rfoo: bar\rdata: cr\r\r"
			"event: lonely\n\n"
			": only a comment\n\n",
			&e, &dropped);
	assert_int_equal(dropped, 0);
	assert_int_equal(e.n, 4);
	assert_string_equal(e.type[0], "progress");
	assert_string_equal(e.id[0], "1");
	assert_string_equal(e.data[0], "{\"pages\":1}");
	assert_string_equal(e.type[1], "message");
	assert_string_equal(e.id[1], "1"); /* the last id lasts */
	assert_string_equal(e.data[1], "line one\nline two\n\nno-space\n two spaces");
	assert_string_equal(e.type[2], "status");
	assert_string_equal(e.id[2], "7");
	assert_string_equal(e.data[2], "{\"status\":\"succeeded\"}");
	assert_string_equal(e.type[3], "message");
	assert_string_equal(e.data[3], "cr");
}

static void test_sse_end_of_stream(void **state)
{
	(void)state;
	struct events e = {0};
	int dropped;
	/* the last event lacks its blank line: dropped, and finish says so */
	parse_both_ways("data: one\n\ndata: two\n", &e, &dropped);
	assert_int_equal(e.n, 1);
	assert_string_equal(e.data[0], "one");
	assert_int_equal(dropped, 1);

	struct events e2 = {0};
	parse_both_ways("data: one\n\ndata: cut sho", &e2, &dropped);
	assert_int_equal(e2.n, 1);
	assert_int_equal(dropped, 1);

	struct events e3 = {0};
	parse_both_ways("data: one\n\n: bye", &e3, &dropped);
	assert_int_equal(e3.n, 1);
	assert_int_equal(dropped, 0);

	/* CRLF split between two pieces is one line end, not two */
	struct sse_parser p;
	struct error err = {0};
	struct events e4 = {0};
	sse_parser_init(&p, on_event, &e4);
	assert_int_equal(sse_parser_feed(&p, "data: a\r", 8, &err), 0);
	assert_int_equal(sse_parser_feed(&p, "\ndata: b\r", 9, &err), 0);
	assert_int_equal(e4.n, 0);
	assert_int_equal(sse_parser_feed(&p, "\n\r\n", 3, &err), 0);
	assert_int_equal(e4.n, 1);
	assert_string_equal(e4.data[0], "a\nb");
	sse_parser_release(&p);

	/* the callback stops the parser */
	struct events e5 = {.stop_at = 1};
	sse_parser_init(&p, on_event, &e5);
	const char *two = "data: 1\n\ndata: 2\n\n";
	assert_int_equal(sse_parser_feed(&p, two, strlen(two), &err), 7);
	assert_int_equal(e5.n, 1);
	sse_parser_release(&p);
}

static void test_sse_limits(void **state)
{
	(void)state;
	struct sse_parser p;
	struct error err = {0};
	struct events e = {0};
	size_t n = SSE_LINE_MAX + 16;
	char *big = malloc(n);
	assert_non_null(big);
	memcpy(big, "data: ", 6);
	memset(big + 6, 'x', n - 6);
	/* in one piece, and in many */
	sse_parser_init(&p, on_event, &e);
	assert_int_equal(sse_parser_feed(&p, big, n, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "longer than"));
	sse_parser_release(&p);
	sse_parser_init(&p, on_event, &e);
	int r = 0;
	for (size_t off = 0; off < n && r == 0; off += 4096)
		r = sse_parser_feed(&p, big + off, n - off < 4096 ? n - off : 4096, &err);
	assert_int_equal(r, -E2BIG);
	sse_parser_release(&p);

	/* data lines that add up past SSE_DATA_MAX */
	sse_parser_init(&p, on_event, &e);
	big[SSE_LINE_MAX / 2] = '\n';
	r = 0;
	for (int i = 0; i < 12 && r == 0; i++)
		r = sse_parser_feed(&p, big, SSE_LINE_MAX / 2 + 1, &err);
	assert_int_equal(r, -E2BIG);
	assert_int_equal(e.n, 0);
	sse_parser_release(&p);
	free(big);

	/* an overlong id is ignored, the event is not */
	char idline[SSE_ID_MAX + 32];
	memset(idline, '9', sizeof(idline));
	memcpy(idline, "id: ", 4);
	memcpy(idline + sizeof(idline) - 12, "\ndata: x\n\n", 11);
	struct events e2 = {0};
	sse_parser_init(&p, on_event, &e2);
	assert_int_equal(sse_parser_feed(&p, idline, strlen(idline), &err), 0);
	assert_int_equal(e2.n, 1);
	assert_string_equal(e2.id[0], "");
	sse_parser_release(&p);
}

/* ---- task views ---------------------------------------------------------- */

static void test_task_views(void **state)
{
	(void)state;
	assert_int_equal(client_status_exit_code("succeeded"), 0);
	assert_int_equal(client_status_exit_code("failed"), 1);
	assert_int_equal(client_status_exit_code("oom_killed"), 137);
	assert_int_equal(client_status_exit_code("timed_out"), 124);
	assert_int_equal(client_status_exit_code("cancelled"), 130);
	assert_int_equal(client_status_exit_code("lost"), 3);
	assert_int_equal(client_status_exit_code("running"), -1);
	assert_int_equal(client_status_exit_code("queued"), -1);
	assert_int_equal(client_status_exit_code(NULL), -1);

	int64_t ms;
	assert_int_equal(client_parse_time("1970-01-01T00:00:01.250Z", &ms), 0);
	assert_int_equal(ms, 1250);
	assert_int_equal(client_parse_time("2024-05-01T12:00:00Z", &ms), 0);
	assert_int_equal(ms, INT64_C(1714564800000));
	assert_int_equal(client_parse_time("2024-05-01T14:00:00.5+02:00", &ms), 0);
	assert_int_equal(ms, INT64_C(1714564800500));
	assert_int_equal(client_parse_time("2024-05-01 12:00:00Z", &ms), -EINVAL);
	assert_int_equal(client_parse_time("2024-05-01T12:00:00", &ms), -EINVAL);
	assert_int_equal(client_parse_time("2024-13-01T12:00:00Z", &ms), -EINVAL);
	assert_int_equal(client_parse_time("2024-05-01T12:00:00Zjunk", &ms), -EINVAL);

	char buf[64];
	client_format_age(59999, buf, sizeof(buf));
	assert_string_equal(buf, "59s");
	client_format_age(120000, buf, sizeof(buf));
	assert_string_equal(buf, "2m");
	client_format_age(3 * 3600 * 1000, buf, sizeof(buf));
	assert_string_equal(buf, "3h");
	client_format_age(INT64_C(5) * 86400 * 1000, buf, sizeof(buf));
	assert_string_equal(buf, "5d");
	client_format_age(-5, buf, sizeof(buf));
	assert_string_equal(buf, "0s");

	json_t *p =
	    json_loads("{\"pages\":12,\"url\":\"http://x\",\"ok\":true,\"r\":0.5}", 0, NULL);
	client_format_progress(p, buf, sizeof(buf));
	assert_string_equal(buf, "pages=12 url=http://x ok=true r=0.5");
	client_format_progress(p, buf, 16);
	assert_string_equal(buf, "pages=12 url...");
	json_decref(p);
	client_format_progress(NULL, buf, sizeof(buf));
	assert_string_equal(buf, "");

	json_t *cmd = json_loads("[\"python3\",\"-c\",\"print(1)\",\"a b\",\"\"]", 0, NULL);
	client_format_command(cmd, buf, sizeof(buf));
	assert_string_equal(buf, "python3 -c print(1) 'a b' ''");
	client_format_command(cmd, buf, 10);
	assert_string_equal(buf, "python...");
	json_decref(cmd);

	char target[CLIENT_TARGET_MAX];
	struct error err = {0};
	assert_int_equal(client_task_target(target, sizeof(target), "tsk_abc", "/logs", &err), 0);
	assert_string_equal(target, "/v1/tasks/tsk_abc/logs");
	assert_int_equal(client_task_target(target, sizeof(target), "../x", NULL, &err), -EINVAL);
	assert_int_equal(client_task_target(target, sizeof(target), "a?b", NULL, &err), -EINVAL);
	assert_int_equal(client_task_target(target, sizeof(target), "", NULL, &err), -EINVAL);
	assert_string_equal(err.msg, "'' is not a task id");

	assert_true(client_id_is_valid("sbx_8e3x0k0c3y7qk4f4h5vbb2s1mw"));
	assert_false(client_id_is_valid("sbx/x"));
	assert_false(client_id_is_valid(""));
	char longid[CLIENT_ID_MAX + 2];
	memset(longid, 'a', sizeof(longid) - 1);
	longid[CLIENT_ID_MAX + 1] = '\0';
	assert_false(client_id_is_valid(longid));
	longid[CLIENT_ID_MAX] = '\0';
	assert_true(client_id_is_valid(longid));

	assert_int_equal(client_sandbox_target(target, sizeof(target), "sbx_a", "/exec", &err), 0);
	assert_string_equal(target, "/v1/sandboxes/sbx_a/exec");
	assert_int_equal(client_sandbox_target(target, sizeof(target), "a b", NULL, &err), -EINVAL);
	assert_string_equal(err.msg, "'a b' is not a sandbox id");

	char *ft = NULL;
	assert_int_equal(client_sandbox_file_target("sbx_a", "/w/a b&c.py", &ft, &err), 0);
	assert_string_equal(ft, "/v1/sandboxes/sbx_a/files?path=/w/a%20b%26c.py");
	free(ft);
	ft = NULL;
	assert_int_equal(client_sandbox_file_target("../x", "/w", &ft, &err), -EINVAL);
	assert_null(ft);
}

int main(void)
{
	/* a test that breaks must not take the runner down with SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_content_length),
	    cmocka_unit_test(test_request_with_body_and_headers),
	    cmocka_unit_test(test_request_body_from_reader),
	    cmocka_unit_test(test_delete_and_put),
	    cmocka_unit_test(test_query_escape),
	    cmocka_unit_test(test_chunked),
	    cmocka_unit_test(test_chunked_split_across_reads),
	    cmocka_unit_test(test_body_until_close_and_empty_bodies),
	    cmocka_unit_test(test_streaming_callback),
	    cmocka_unit_test(test_malformed_status_lines),
	    cmocka_unit_test(test_malformed_headers),
	    cmocka_unit_test(test_oversize),
	    cmocka_unit_test(test_server_closes_early),
	    cmocka_unit_test(test_timeouts),
	    cmocka_unit_test(test_endpoint_parse),
	    cmocka_unit_test(test_connect_errors),
	    cmocka_unit_test(test_request_over_sockets),
	    cmocka_unit_test(test_sse_events),
	    cmocka_unit_test(test_sse_end_of_stream),
	    cmocka_unit_test(test_sse_limits),
	    cmocka_unit_test(test_task_views),
	};
	return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
