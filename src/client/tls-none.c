/*
 * tls-none.c - tls.h in the agentbox binary, which has no OpenSSL: its
 * start (agentbox run's) would pay for relocating libcrypto on every
 * exec. The command hands an https endpoint to agentbox-tls, the same
 * program with tls.c (src/cli/main.c), so these only say why they fail.
 */
#include "client/tls.h"

#include <errno.h>

int http_tls_new(int fd, const char *host, const char *cafile, const char *what,
		 struct http_tls **ret, struct error *err)
{
	(void)fd, (void)host, (void)cafile, (void)ret;
	return error_set(err, EPROTONOSUPPORT,
			 "%s: https needs agentbox-tls (this build has no TLS)", what);
}

int http_tls_handshake(struct http_tls *t, short *ret_events, struct error *err)
{
	(void)t, (void)ret_events;
	return error_set(err, EPROTONOSUPPORT, "no TLS in this build");
}

ssize_t http_tls_read(struct http_tls *t, void *buf, size_t n, short *ret_events, struct error *err)
{
	(void)t, (void)buf, (void)n, (void)ret_events;
	return error_set(err, EPROTONOSUPPORT, "no TLS in this build");
}

ssize_t http_tls_write(struct http_tls *t, const void *buf, size_t n, short *ret_events,
		       struct error *err)
{
	(void)t, (void)buf, (void)n, (void)ret_events;
	return error_set(err, EPROTONOSUPPORT, "no TLS in this build");
}

void http_tls_free(struct http_tls *t)
{
	(void)t;
}
