/*
 * intercept-internal.h - what the files of intercept.h share.
 *
 *   intercept-ca.c  certificates: the CA on disk, and issuing (the CA's
 *                   own, and a leaf for a host)
 *   intercept-io.c  one end of a connection (a socket, with the bytes
 *                   read from it before, and perhaps TLS over it) and
 *                   the pump that moves both ways at once
 *   intercept.c     the contexts, the rules, the leaves, intercept_serve()
 *
 * Every OpenSSL call here leaves its error queue empty when it returns
 * (ssl_error() takes what is there), so a connection's thread never
 * reports another step's error.
 */
#ifndef AGENTBOX_NETWORK_INTERCEPT_INTERNAL_H
#define AGENTBOX_NETWORK_INTERCEPT_INTERNAL_H

#include "base/buf.h"
#include "base/error.h"
#include "egress/inject.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- intercept-ca.c ------------------------------------------------------- */

/*
 * Issue a certificate for key, signed by issuer_key as issuer (issuer
 * NULL: self-signed, with key), valid from `from` seconds from now (a
 * negative number: ago) until `until` seconds from now. ca: a CA
 * (basicConstraints CA:TRUE, keyCertSign and cRLSign, subject CN cn);
 * else a TLS server leaf for the host name dns (SAN DNS:dns, serverAuth,
 * CN dns when it fits in a CN). 0 or -errno with err.
 */
int cert_issue(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, bool ca, const char *name,
	       long from, long until, X509 **ret, struct error *err);

/* Read dir's CA: its key and certificate, which must match. 0 or -errno with err. */
int ca_load(const char *dir, EVP_PKEY **ret_key, X509 **ret_cert, struct error *err);

/*
 * As error_set(), with ": " and the reason of the last error in this
 * thread's OpenSSL queue appended when there is one (else strerror(code),
 * as error_set_errno()); empties the queue.
 */
int ssl_error(struct error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- intercept-io.c ------------------------------------------------------- */

/* CLOCK_MONOTONIC, in milliseconds. */
int64_t mono_ms(void);

/*
 * One end of a connection. Reads take pre's bytes first, then the
 * socket's; reads and writes never block (MSG_DONTWAIT: the socket's own
 * flags are left alone). An operation that cannot go on now returns
 * -EAGAIN and says in want_read or want_write which poll() events it waits
 * for (TLS may need to write to read, or the reverse).
 */
struct end {
	int fd;
	SSL *ssl; /* NULL: plain */
	const uint8_t *pre;
	size_t prelen, preoff;
	short want_read, want_write;
	int sys_errno; /* the socket's last errno, for a TLS error of the socket's */
	bool eof;      /* the peer ended its sending */
	bool clean;    /* ... with a close_notify (TLS), or a FIN (plain) */
};

/* Put TLS on e, from ctx: a new SSL over e's bytes (pre first). 0 or -ENOMEM. */
int end_tls(struct end *e, SSL_CTX *ctx);

/* Free e's SSL, if any. Leaves fd alone. */
void end_release(struct end *e);

/* Read: > 0 bytes, 0 at the peer's end (e->eof set), -EAGAIN, -EPROTO, -errno. */
ssize_t end_read(struct end *e, void *buf, size_t n);

/* Write some of buf: > 0 bytes written, -EAGAIN, -EPROTO, -errno. */
ssize_t end_write(struct end *e, const void *buf, size_t n);

/* Write all of buf by deadline: 0, -ETIMEDOUT, -errno. */
int end_write_all(struct end *e, const void *buf, size_t n, int64_t deadline_ms);

/*
 * The TLS handshake, by deadline. 0; -ETIMEDOUT; -EPROTO (the reason in
 * the thread's OpenSSL queue, for ssl_error()); -errno of the socket.
 */
int end_handshake(struct end *e, bool server, int64_t deadline_ms);

/* Wait by deadline until what e's last read (or write) waits for may be there. */
int end_wait(const struct end *e, bool reading, int64_t deadline_ms);

/*
 * Both ways at once, until both have ended: to_up (bytes already due to
 * up, the rewritten head, say) and then client's bytes to up as they
 * come; up's bytes to the client through scrub. An end read is passed on
 * (end_read(): clean or not). 0 or -errno with err.
 */
int pump(struct end *client, struct end *up, struct buf *to_up, struct inject_scrub *scrub,
	 const char *host, struct error *err);

#endif
