/*
 * tls.h - the HTTP client's TLS (https://), on OpenSSL: a connection's
 * bytes go through one of these instead of the bare socket, and nothing
 * else in http-client.c changes.
 *
 * Who the server must be: its certificate chain verifies against cafile
 * (a PEM file of CAs) or, without one, the system's default store
 * (OpenSSL's compiled-in /usr/lib/ssl/cert.pem and certs/, or
 * SSL_CERT_FILE and SSL_CERT_DIR); and the certificate names the host we
 * connected to: a numeric host must be one of its IP addresses (an IP
 * SAN), a name one of its DNS names (sent as SNI too). A failure to verify
 * is -EKEYREJECTED, with the reason OpenSSL gives ("unable to get local
 * issuer certificate", "IP address mismatch"). TLS 1.2 at least.
 *
 * OpenSSL's configuration file is never read, so nothing (no engine, no
 * provider) is loaded at run time: the agentbox binary is static, and its
 * TLS is the default provider compiled into it.
 *
 * Sockets are non-blocking: a call that must wait returns -EAGAIN with
 * *ret_events the poll(2) events to wait for (a read may need to write,
 * and a write to read), and is called again with the same arguments.
 * Sends never raise SIGPIPE (MSG_NOSIGNAL).
 *
 * The end: only the server's close_notify ends the stream (a read returns
 * 0); a connection that closes without one is -ECONNRESET, a truncation,
 * never the end of a body.
 *
 * Ownership: a struct http_tls is its connection's; the fd stays the
 * caller's (http_tls_free() does not close it). The SSL_CTX of a cafile is
 * made once and kept for the life of the process (a command makes a few
 * requests, each a connection). Errors fill err with one line.
 */
#ifndef AGENTBOX_CLIENT_TLS_H
#define AGENTBOX_CLIENT_TLS_H

#include "base/error.h"

#include <sys/types.h>

/* Bytes of a cafile (the system's bundle is about 200 KiB). */
#define HTTP_TLS_CAFILE_MAX (4u << 20)

struct http_tls;

/*
 * A client TLS session on fd (connected) to host (numeric, or a name),
 * cafile NULL for the system's store; what names the server in messages
 * ("agentboxd at 127.0.0.1:8443"). The handshake is not started. 0, or
 * -errno (a cafile that cannot be read: -ENOENT, -EFBIG, -EINVAL).
 */
int http_tls_new(int fd, const char *host, const char *cafile, const char *what,
		 struct http_tls **ret, struct error *err);

/* Go on with the handshake. 0 once it is done and the server verified, -EAGAIN, -errno. */
int http_tls_handshake(struct http_tls *t, short *ret_events, struct error *err);

/* Read up to n bytes. > 0, 0 at close_notify, -EAGAIN, or -errno (-ECONNRESET: truncated). */
ssize_t http_tls_read(struct http_tls *t, void *buf, size_t n, short *ret_events,
		      struct error *err);

/* Write up to n bytes (n > 0). > 0 written, -EAGAIN, or -errno. */
ssize_t http_tls_write(struct http_tls *t, const void *buf, size_t n, short *ret_events,
		       struct error *err);

/* Free t (NULL is fine); no close_notify is sent: the fd is closed next. */
void http_tls_free(struct http_tls *t);

#endif
