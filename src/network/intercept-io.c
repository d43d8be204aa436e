/*
 * intercept-io.c - one end of an intercepted connection, and the pump
 * that moves both ways at once. See intercept-internal.h.
 *
 * TLS runs over a BIO of our own: it reads an end's pre bytes first and
 * then the socket's, with MSG_DONTWAIT, so that one thread can drive both
 * ways of both SSL objects (an SSL object must not be used by two threads
 * at once) with poll(), without changing the sockets' flags.
 */
#include "network/intercept-internal.h"
#include "network/intercept.h"

#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Plain bytes: pre first, then the socket's. > 0, 0 at its end, -EAGAIN, -errno. */
static ssize_t raw_read(struct end *e, void *buf, size_t n)
{
	if (e->preoff < e->prelen) {
		size_t k = e->prelen - e->preoff < n ? e->prelen - e->preoff : n;
		memcpy(buf, e->pre + e->preoff, k);
		e->preoff += k;
		return (ssize_t)k;
	}
	for (;;) {
		ssize_t r = recv(e->fd, buf, n, MSG_DONTWAIT);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

static ssize_t raw_write(struct end *e, const void *buf, size_t n)
{
	for (;;) {
		ssize_t r = send(e->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/* ---- the BIO ---------------------------------------------------------------- */

static int bio_read(BIO *b, char *buf, size_t n, size_t *got)
{
	struct end *e = BIO_get_data(b);
	BIO_clear_retry_flags(b);
	ssize_t r = raw_read(e, buf, n);
	*got = r > 0 ? (size_t)r : 0;
	if (r == -EAGAIN)
		BIO_set_retry_read(b);
	else if (r < 0)
		e->sys_errno = (int)-r;
	return r > 0;
}

static int bio_write(BIO *b, const char *buf, size_t n, size_t *put)
{
	struct end *e = BIO_get_data(b);
	BIO_clear_retry_flags(b);
	ssize_t r = raw_write(e, buf, n);
	*put = r > 0 ? (size_t)r : 0;
	if (r == -EAGAIN)
		BIO_set_retry_write(b);
	else if (r < 0)
		e->sys_errno = (int)-r;
	return r > 0;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b, (void)num, (void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *bio_method;

static void bio_method_make(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "agentbox end");
	if (m && BIO_meth_set_read_ex(m, bio_read) && BIO_meth_set_write_ex(m, bio_write) &&
	    BIO_meth_set_ctrl(m, bio_ctrl))
		bio_method = m;
	else
		BIO_meth_free(m);
}

int end_tls(struct end *e, SSL_CTX *ctx)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, bio_method_make);
	BIO *b = bio_method ? BIO_new(bio_method) : NULL;
	SSL *ssl = b ? SSL_new(ctx) : NULL;
	if (!ssl) {
		BIO_free(b);
		ERR_clear_error();
		return -ENOMEM;
	}
	BIO_set_data(b, e);
	BIO_set_init(b, 1);
	SSL_set_bio(ssl, b, b);
	e->ssl = ssl;
	return 0;
}

void end_release(struct end *e)
{
	SSL_free(e->ssl);
	e->ssl = NULL;
}

/* ---- reading and writing ----------------------------------------------------- */

/* What an SSL call that did not succeed means, as intercept-internal.h says. */
static ssize_t ssl_result(struct end *e, int ret, bool reading)
{
	switch (SSL_get_error(e->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		*(reading ? &e->want_read : &e->want_write) = POLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*(reading ? &e->want_read : &e->want_write) = POLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		e->eof = e->clean = true;
		return 0;
	case SSL_ERROR_SSL:
		if (reading &&
		    ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			ERR_clear_error();
			e->eof = true; /* a FIN without close_notify: passed on as one */
			return 0;
		}
		return -EPROTO;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		return -(e->sys_errno ? e->sys_errno : EPIPE);
	default:
		return -EPROTO;
	}
}

ssize_t end_read(struct end *e, void *buf, size_t n)
{
	if (!e->ssl) {
		ssize_t r = raw_read(e, buf, n);
		if (r == -EAGAIN)
			e->want_read = POLLIN;
		if (r == 0)
			e->eof = e->clean = true;
		return r;
	}
	size_t got = 0;
	ERR_clear_error();
	int ok = SSL_read_ex(e->ssl, buf, n, &got);
	return ok ? (ssize_t)got : ssl_result(e, 0, true);
}

ssize_t end_write(struct end *e, const void *buf, size_t n)
{
	if (!e->ssl) {
		ssize_t r = raw_write(e, buf, n);
		if (r == 0)
			r = -EAGAIN;
		if (r == -EAGAIN)
			e->want_write = POLLOUT;
		return r;
	}
	size_t put = 0;
	ERR_clear_error();
	int ok = SSL_write_ex(e->ssl, buf, n, &put);
	return ok ? (ssize_t)put : ssl_result(e, 0, false);
}

int end_wait(const struct end *e, bool reading, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = e->fd, .events = reading ? e->want_read : e->want_write};
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int end_write_all(struct end *e, const void *buf, size_t n, int64_t deadline_ms)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t r = end_write(e, p, n);
		if (r == -EAGAIN && (r = end_wait(e, false, deadline_ms)) == 0)
			continue;
		if (r < 0)
			return (int)r;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int end_handshake(struct end *e, bool server, int64_t deadline_ms)
{
	for (;;) {
		ERR_clear_error();
		int ret = server ? SSL_accept(e->ssl) : SSL_connect(e->ssl);
		if (ret == 1)
			return 0;
		ssize_t r = ssl_result(e, ret, true);
		if (r == 0)
			return -ECONNRESET; /* the peer ended it before its end */
		if (r != -EAGAIN)
			return (int)r;
		if ((r = end_wait(e, true, deadline_ms)) < 0)
			return (int)r;
	}
}

/*
 * Pass on the end of a way: a close_notify for a close_notify, then (or
 * only, for a FIN) the socket's end of sending. 0, -EAGAIN.
 */
static int end_finish(struct end *e, bool clean)
{
	if (e->ssl && clean) {
		ERR_clear_error();
		int ret = SSL_shutdown(e->ssl);
		if (ret < 0 && ssl_result(e, ret, false) == -EAGAIN)
			return -EAGAIN;
		ERR_clear_error(); /* the peer may be gone: its end is all that is left */
	}
	(void)shutdown(e->fd, SHUT_WR);
	return 0;
}

/* ---- the pump ---------------------------------------------------------------- */

struct way {
	struct end *src, *dst;
	struct buf *out; /* due to dst, from off */
	size_t off;
	struct inject_scrub *scrub; /* NULL: as it comes */
	struct end *waits;	    /* the end it waits for (NULL: it does not) */
	bool reading;		    /* ... to read from, or to write to (or it failed to) */
	bool done;
};

/* One move of w, if it can: 0 (*moved says whether it did) or -errno. */
static int way_step(struct way *w, uint8_t *chunk, bool *moved)
{
	w->waits = NULL;
	if (w->done)
		return 0;
	ssize_t r;
	if (w->off < w->out->len) {
		r = end_write(w->dst, w->out->data + w->off, w->out->len - w->off);
		if (r > 0) {
			w->off += (size_t)r;
			if (w->off == w->out->len) {
				buf_reset(w->out);
				w->off = 0;
			}
		}
		w->reading = false;
		w->waits = r == -EAGAIN ? w->dst : NULL;
	} else if (!w->src->eof) {
		r = end_read(w->src, chunk, INTERCEPT_CHUNK);
		w->reading = true;
		w->waits = r == -EAGAIN ? w->src : NULL;
		int a = 0;
		if (r > 0)
			a = w->scrub ? inject_scrub_feed(w->scrub, chunk, (size_t)r, w->out)
				     : buf_append(w->out, chunk, (size_t)r);
		else if (r == 0 && w->scrub)
			a = inject_scrub_flush(w->scrub, w->out);
		if (a < 0)
			return a;
		if (r == 0)
			r = 1; /* the end is a move too */
	} else {
		r = end_finish(w->dst, w->src->clean);
		w->reading = false;
		w->waits = r == -EAGAIN ? w->dst : NULL;
		w->done = r == 0;
		r = r == 0 ? 1 : r;
	}
	if (r == -EAGAIN)
		return 0;
	if (r < 0)
		return (int)r;
	*moved = true;
	return 0;
}

/* Wait for what the ways wait for, by deadline: 0, -ETIMEDOUT, -errno. */
static int ways_wait(struct way *w, size_t n, int64_t deadline_ms)
{
	struct pollfd p[2] = {{.fd = -1}, {.fd = -1}};
	for (size_t i = 0; i < n; i++) {
		struct end *e = w[i].waits;
		if (!e)
			continue;
		struct pollfd *slot = p[0].fd == e->fd || p[0].fd < 0 ? &p[0] : &p[1];
		slot->fd = e->fd;
		slot->events |= w[i].reading ? e->want_read : e->want_write;
	}
	for (;;) {
		int64_t left = deadline_ms - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		int r = poll(p, 2, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int pump(struct end *client, struct end *up, struct buf *to_up, struct inject_scrub *scrub,
	 const char *host, struct error *err)
{
	_cleanup_buf_ struct buf to_client = {0};
	struct way w[2] = {
	    {.src = client, .dst = up, .out = to_up},
	    {.src = up, .dst = client, .out = &to_client, .scrub = scrub},
	};
	uint8_t *chunk = malloc(INTERCEPT_CHUNK);
	if (!chunk)
		return error_set(err, ENOMEM, "%s: out of memory", host);
	int64_t last = mono_ms(), answered = 0;
	int r = 0;
	while (!w[0].done || !w[1].done) {
		bool moved = false;
		for (size_t i = 0; i < 2 && r == 0; i++) {
			r = way_step(&w[i], chunk, &moved);
			if (r < 0 && w[i].reading)
				ssl_error(err, -r, "%s: reading from %s", host,
					  i == 0 ? "the client" : "the host");
			else if (r < 0)
				ssl_error(err, -r, "%s: writing to %s", host,
					  i == 0 ? "the host" : "the client");
		}
		if (r < 0)
			break;
		if (w[1].done && !answered)
			answered = mono_ms();
		if (moved) {
			last = mono_ms();
			continue;
		}
		int64_t deadline = last + INTERCEPT_IDLE_TIMEOUT_MS;
		if (answered && answered + INTERCEPT_DRAIN_TIMEOUT_MS < deadline)
			deadline = answered + INTERCEPT_DRAIN_TIMEOUT_MS;
		if ((r = ways_wait(w, 2, deadline)) < 0) {
			error_set_errno(err, -r, "%s: %s", host,
					answered ? "the client lingers after the response"
						 : "no byte moved either way");
			break;
		}
	}
	free(chunk);
	return r;
}
