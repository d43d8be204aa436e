/*
 * tls.c - the HTTP client's TLS on OpenSSL (tls.h).
 *
 * The socket is reached through a BIO of our own (send with MSG_NOSIGNAL,
 * recv), so a server that goes away never raises SIGPIPE in the command.
 */
#include "client/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct http_tls {
	int fd;
	bool eof;	 /* the socket's end was read (BIO_CTRL_EOF) */
	bool handshaken; /* http_tls_handshake() succeeded */
	SSL *ssl;
	char what[320]; /* the server, for messages */
};

/* ---- a socket BIO that never raises SIGPIPE ---------------------------- */

static int bio_fd(BIO *b)
{
	return ((struct http_tls *)BIO_get_data(b))->fd;
}

static int bio_write(BIO *b, const char *buf, size_t n, size_t *ret)
{
	BIO_clear_retry_flags(b);
	for (;;) {
		ssize_t k = send(bio_fd(b), buf, n, MSG_NOSIGNAL);
		if (k >= 0) {
			*ret = (size_t)k;
			return 1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			BIO_set_retry_write(b);
		return 0;
	}
}

/* 1 with bytes; 0 at the socket's end (no retry flag: OpenSSL calls it a truncation) */
static int bio_read(BIO *b, char *buf, size_t n, size_t *ret)
{
	BIO_clear_retry_flags(b);
	for (;;) {
		ssize_t k = recv(bio_fd(b), buf, n, 0);
		if (k > 0) {
			*ret = (size_t)k;
			return 1;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			BIO_set_retry_read(b);
		else if (k == 0)
			((struct http_tls *)BIO_get_data(b))->eof = true;
		*ret = 0;
		return 0;
	}
}

/* OpenSSL asks BIO_CTRL_EOF to tell a truncation from a failure */
static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)num, (void)ptr;
	if (cmd == BIO_CTRL_EOF)
		return ((struct http_tls *)BIO_get_data(b))->eof;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *bio_method;

static void bio_method_make(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "agentbox socket");
	if (m && (!BIO_meth_set_write_ex(m, bio_write) || !BIO_meth_set_read_ex(m, bio_read) ||
		  !BIO_meth_set_ctrl(m, bio_ctrl))) {
		BIO_meth_free(m);
		m = NULL;
	}
	bio_method = m;
}

/* ---- the context: trust and versions ----------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static SSL_CTX *ctx_kept;	  /* the last one made; SSLs hold their own references */
static char ctx_cafile[4096 + 1]; /* what ctx_kept trusts: a cafile, or "" for the system's */

static void init_once(void)
{
	/* no openssl.cnf: it could name an engine or a provider to load */
	OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
	bio_method_make();
}

/* OpenSSL's reason for the last failure, into buf; the queue is cleared. */
static const char *reason(char *buf, size_t size)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	snprintf(buf, size, "%s", r ? r : "an unknown error");
	ERR_clear_error();
	return buf;
}

/* A cafile must be a regular file of at most HTTP_TLS_CAFILE_MAX bytes. */
static int cafile_check(const char *cafile, struct error *err)
{
	struct stat st;
	if (stat(cafile, &st) < 0)
		return error_set_errno(err, errno, "the CA file %s", cafile);
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "the CA file %s is not a regular file", cafile);
	if (st.st_size > HTTP_TLS_CAFILE_MAX)
		return error_set(err, EFBIG, "the CA file %s is larger than %u MiB", cafile,
				 HTTP_TLS_CAFILE_MAX >> 20);
	if (access(cafile, R_OK) < 0)
		return error_set_errno(err, errno, "the CA file %s", cafile);
	return 0;
}

static int ctx_make(const char *cafile, SSL_CTX **ret, struct error *err)
{
	char why[256];
	if (cafile && strlen(cafile) >= sizeof(ctx_cafile))
		return error_set(err, ENAMETOOLONG, "the CA file's path is too long");
	int r = cafile ? cafile_check(cafile, err) : 0;
	if (r < 0)
		return r;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return error_set(err, ENOMEM, "TLS: %s", reason(why, sizeof(why)));
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1); /* whole records and more per recv(), not 5 bytes */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		SSL_CTX_free(ctx);
		return error_set(err, EINVAL, "TLS: %s", reason(why, sizeof(why)));
	}
	if (cafile ? !SSL_CTX_load_verify_locations(ctx, cafile, NULL)
		   : !SSL_CTX_set_default_verify_paths(ctx)) {
		SSL_CTX_free(ctx);
		if (cafile)
			return error_set(err, EINVAL, "the CA file %s holds no PEM certificate: %s",
					 cafile, reason(why, sizeof(why)));
		return error_set(err, EINVAL, "TLS: the system's CA store: %s",
				 reason(why, sizeof(why)));
	}
	*ret = ctx;
	return 0;
}

/* The context that trusts cafile (NULL: the system's store), with a reference for the caller. */
static int ctx_get(const char *cafile, SSL_CTX **ret, struct error *err)
{
	const char *key = cafile ? cafile : "";
	int r = 0;
	pthread_mutex_lock(&ctx_lock);
	if (!ctx_kept || strcmp(ctx_cafile, key) != 0) {
		SSL_CTX *ctx = NULL;
		r = ctx_make(cafile, &ctx, err);
		if (r == 0) {
			SSL_CTX_free(ctx_kept);
			ctx_kept = ctx;
			snprintf(ctx_cafile, sizeof(ctx_cafile), "%s", key);
		}
	}
	if (r == 0) {
		SSL_CTX_up_ref(ctx_kept);
		*ret = ctx_kept;
	}
	pthread_mutex_unlock(&ctx_lock);
	return r;
}

/* ---- one connection ---------------------------------------------------- */

static bool is_numeric(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int http_tls_new(int fd, const char *host, const char *cafile, const char *what,
		 struct http_tls **ret, struct error *err)
{
	char why[256];
	pthread_once(&once, init_once);
	if (!bio_method)
		return error_set(err, ENOMEM, "TLS: cannot set up OpenSSL");
	SSL_CTX *ctx = NULL;
	int r = ctx_get(cafile, &ctx, err);
	if (r < 0)
		return r;
	struct http_tls *t = calloc(1, sizeof(*t));
	SSL *ssl = t ? SSL_new(ctx) : NULL;
	BIO *bio = ssl ? BIO_new(bio_method) : NULL;
	SSL_CTX_free(ctx); /* the SSL holds its own reference */
	if (!bio) {
		SSL_free(ssl);
		free(t);
		return error_set(err, ENOMEM, "TLS: out of memory");
	}
	t->fd = fd;
	t->ssl = ssl;
	snprintf(t->what, sizeof(t->what), "%s", what);
	BIO_set_data(bio, t);
	BIO_set_init(bio, 1);
	SSL_set_bio(ssl, bio, bio);
	/* the certificate must name the host we asked for */
	X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
	X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	bool ok = is_numeric(host)
		      ? X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1
		      : SSL_set1_host(ssl, host) == 1 && SSL_set_tlsext_host_name(ssl, host) == 1;
	if (!ok) {
		http_tls_free(t);
		return error_set(err, EINVAL, "TLS: cannot ask for the name %s: %s", host,
				 reason(why, sizeof(why)));
	}
	*ret = t;
	return 0;
}

/* Why an SSL call returned r: -EAGAIN with *ret_events, or -errno with err. */
static int failed(struct http_tls *t, int r, const char *doing, short *ret_events,
		  struct error *err)
{
	char why[256];
	int e = SSL_get_error(t->ssl, r);
	int saved = errno;
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*ret_events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return -EAGAIN;
	}
	long v = SSL_get_verify_result(t->ssl);
	if (v != X509_V_OK) {
		ERR_clear_error();
		return error_set(err, EKEYREJECTED, "TLS: the certificate of %s did not verify: %s",
				 t->what, X509_verify_cert_error_string(v));
	}
	if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && !t->eof) {
		ERR_clear_error();
		return error_set_errno(err, saved ? saved : EIO, "TLS: %s %s", doing, t->what);
	}
	unsigned long last = ERR_peek_last_error();
	if (t->eof || (ERR_GET_LIB(last) == ERR_LIB_SSL &&
		       ERR_GET_REASON(last) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
		ERR_clear_error();
		if (!t->handshaken)
			return error_set(err, ECONNRESET,
					 "TLS: %s closed the connection during the handshake",
					 t->what);
		return error_set(
		    err, ECONNRESET,
		    "TLS: %s closed the connection without a close_notify (cut short?)", t->what);
	}
	return error_set(err, EPROTO, "TLS: %s %s failed: %s", doing, t->what,
			 reason(why, sizeof(why)));
}

int http_tls_handshake(struct http_tls *t, short *ret_events, struct error *err)
{
	ERR_clear_error();
	int r = SSL_connect(t->ssl);
	if (r == 1) {
		t->handshaken = true;
		return 0;
	}
	return failed(t, r, "the handshake with", ret_events, err);
}

ssize_t http_tls_read(struct http_tls *t, void *buf, size_t n, short *ret_events, struct error *err)
{
	size_t got = 0;
	ERR_clear_error();
	int r = SSL_read_ex(t->ssl, buf, n, &got);
	if (r == 1)
		return (ssize_t)got;
	if (SSL_get_error(t->ssl, r) == SSL_ERROR_ZERO_RETURN)
		return 0; /* close_notify: the one clean end */
	return failed(t, r, "reading from", ret_events, err);
}

ssize_t http_tls_write(struct http_tls *t, const void *buf, size_t n, short *ret_events,
		       struct error *err)
{
	size_t put = 0;
	ERR_clear_error();
	int r = SSL_write_ex(t->ssl, buf, n, &put);
	if (r == 1)
		return (ssize_t)put;
	return failed(t, r, "sending to", ret_events, err);
}

void http_tls_free(struct http_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl); /* and its BIO; the fd is the caller's */
	free(t);
}
