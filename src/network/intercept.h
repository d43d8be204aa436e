/*
 * intercept.h - TLS interception for the hosts a sandbox's secrets are
 * bound to, in the allow-mode proxy (relay.h).
 *
 * A task's secret reaches the sandbox as a placeholder (egress/inject.h);
 * its value never enters the sandbox. For a connection to a host that a
 * secret names, the proxy hands the connection here instead of splicing
 * it: TLS from the client is terminated with a certificate for the host
 * issued by a CA of the daemon's (the sandbox trusts INTERCEPT_CA_BUNDLE),
 * TLS to the host is opened and verified as any client would, and the
 * first request head is rewritten with the host's values in place of
 * their placeholders (egress/inject.h). Every other host is spliced as it
 * was, without interception.
 *
 *	sandbox ──TLS (leaf for host, our CA)──▶ intercept_serve ──TLS (verified)──▶ host
 *	          first request head:  placeholder ──▶ value, Connection: close
 *	          the rest of the request, unchanged ──▶
 *	        ◀── the response, each value masked as '*' x its length
 *
 * One request per connection (inject.h says why that fails safe). The
 * request must name the host it reaches (Host, the target's authority);
 * the SNI must name it too: the secret goes nowhere else.
 *
 * The CA lives in a directory of its own (intercept_ca_ensure(), once, by
 * the daemon, as root). Its key is read by intercept_new(), as root,
 * before the proxy drops its privileges, and stays in the proxy's memory
 * to issue leaf certificates (one key, EC P-256, for every leaf of the
 * process; a leaf is valid from INTERCEPT_LEAF_BACKDATE_S ago for
 * INTERCEPT_LEAF_DAYS and renewed when it comes within
 * INTERCEPT_LEAF_RENEW_S of its end).
 *
 * Errors come as 0 or -errno with a struct error that names the step
 * ("upstream certificate does not verify for api.x: ..."). No secret
 * value is ever put in a message.
 */
#ifndef AGENTBOX_NETWORK_INTERCEPT_H
#define AGENTBOX_NETWORK_INTERCEPT_H

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The CA directory: the key, and a subdirectory of what is public, the
 * one a launcher mounts read-only in a sandbox (egress/secret.h's
 * SECRET_CA_DIR), which never holds the key:
 *
 *	DIR/INTERCEPT_CA_KEY
 *	DIR/INTERCEPT_CA_PUBLIC/INTERCEPT_CA_CERT
 *	DIR/INTERCEPT_CA_PUBLIC/INTERCEPT_CA_BUNDLE
 */
#define INTERCEPT_CA_KEY    "ca.key"	 /* EC P-256, PEM (PKCS#8), 0600 */
#define INTERCEPT_CA_PUBLIC "public"	 /* a directory, 0755 */
#define INTERCEPT_CA_CERT   "ca.pem"	 /* in public/: self-signed, 0644 */
#define INTERCEPT_CA_BUNDLE "bundle.pem" /* in public/: the system's roots, then ca.pem; 0644 */

#define INTERCEPT_CA_NAME	    "agentbox egress CA" /* its subject's CN */
#define INTERCEPT_CA_DAYS	    3650		 /* its validity */
#define INTERCEPT_SYSTEM_BUNDLE_MAX (16 << 20)		 /* bytes of the system bundle read */

#define INTERCEPT_RULES_MAX	  256	/* rules of one config */
#define INTERCEPT_LEAF_BACKDATE_S 3600	/* a leaf's notBefore: this long ago (clock skew) */
#define INTERCEPT_LEAF_DAYS	  7	/* a leaf's notAfter: this many days ahead */
#define INTERCEPT_LEAF_RENEW_S	  86400 /* a leaf this close to its end is issued again */

/* Every wait of intercept_serve() ends. */
#define INTERCEPT_HANDSHAKE_TIMEOUT_MS 10000  /* each TLS handshake, whole */
#define INTERCEPT_HEAD_TIMEOUT_MS      10000  /* the request head, from the handshake's end */
#define INTERCEPT_IDLE_TIMEOUT_MS      300000 /* neither way moves a byte (a slow answer) */
#define INTERCEPT_DRAIN_TIMEOUT_MS     10000  /* the response is through; the client lingers */
#define INTERCEPT_CHUNK		       16384  /* bytes moved at once, each way */

/*
 * Make sure dir holds a CA. dir is created (0755) if missing, its parent
 * must exist; INTERCEPT_CA_PUBLIC in it is created if missing, and made
 * 0755 either way. When there is no INTERCEPT_CA_CERT, a new CA is made:
 * an EC P-256 key (INTERCEPT_CA_KEY, 0600) and a self-signed certificate
 * (INTERCEPT_CA_CERT, 0644; CN INTERCEPT_CA_NAME, basicConstraints CA:TRUE
 * and keyUsage keyCertSign, cRLSign, both critical; INTERCEPT_CA_DAYS),
 * each written to a temporary file, made durable and renamed in, the
 * certificate last: a crash leaves either no CA (a key alone is made
 * again) or a whole one. A CA that is there is kept; it must load and its
 * key must match its certificate (-EINVAL otherwise: it is not replaced
 * behind anyone's back).
 *
 * Either way INTERCEPT_CA_BUNDLE is written again, atomically: the bytes
 * of system_bundle (a PEM file of the host's roots such as
 * /etc/ssl/certs/ca-certificates.crt; NULL: OpenSSL's own default file,
 * X509_get_default_cert_file(); nothing when it does not exist; at most
 * INTERCEPT_SYSTEM_BUNDLE_MAX) followed by
 * the CA's certificate. Not thread-safe; call once, before any
 * intercept_new() on the same dir. 0 or -errno with err.
 */
int intercept_ca_ensure(const char *dir, const char *system_bundle, struct error *err);

/* One secret for one host. */
struct intercept_rule {
	const char *host;	 /* normalised: lower case, no trailing dot (peek_is_host_name) */
	const char *placeholder; /* inject_placeholder_is_valid() */
	const char *value;	 /* inject_value_is_valid() */
};

struct intercept_config {
	const char *ca_dir;	     /* as intercept_ca_ensure() made it */
	const char *upstream_cafile; /* roots the hosts are verified with; NULL: OpenSSL's
					default verify paths */
	const struct intercept_rule *rules;
	size_t nrules; /* at most INTERCEPT_RULES_MAX, and INJECT_PAIRS_MAX for one host */
};

struct intercept;

/*
 * Get ready to intercept: read the CA's key and certificate, make the
 * leaf key and a leaf for every host of the rules, build the TLS context
 * that serves clients (TLS 1.2 or later; ALPN "http/1.1" only: a client
 * that offers ALPN without it, h2 alone say, fails its handshake, and one
 * that offers no ALPN is taken to speak HTTP/1.1) and the
 * one that reaches hosts (TLS 1.2 or later, the peer verified against
 * upstream_cafile, ALPN "http/1.1"). The rules are copied: c need not
 * outlive the call. Call as root (the CA key is 0600) before dropping
 * privileges. 0 or -errno with err (-EINVAL for a rule that is not
 * valid, too many rules or pairs for one host).
 */
int intercept_new(const struct intercept_config *c, struct intercept **ret, struct error *err);

/* Free x, with its copy of the secrets (wiped first). Accepts NULL. */
void intercept_free(struct intercept *x);

/* Does a rule name host? Any case, one trailing dot allowed. Thread-safe. */
bool intercept_wants(const struct intercept *x, const char *host);

/*
 * Serve one connection, to its end. Thread-safe: call from as many
 * threads at once as there are connections.
 *
 * client is the sandbox's connected TCP socket (blocking), from which
 * pre[0..prelen) was read already; those bytes come first, then the
 * socket's, in order and none lost (prelen may be 0, pre then NULL: after
 * a CONNECT). up is a TCP socket (blocking) connected to host's address.
 * host names a rule (intercept_wants()). Both sockets stay the caller's
 * to close; their file status flags are not changed (reads and writes
 * are MSG_DONTWAIT, waits are poll()), and no SIGPIPE is raised.
 *
 * tls: pre and client carry a TLS ClientHello; the handshake is served
 * with a leaf for host, and must have host as its SNI. TLS is then opened
 * on up with SNI host and the host's name verified (SSL_set1_host).
 * !tls: plain HTTP on both (port 80); pre holds the head's first bytes.
 *
 * Steps, each with its deadline: the client's handshake
 * (INTERCEPT_HANDSHAKE_TIMEOUT_MS), its first request head
 * (INTERCEPT_HEAD_TIMEOUT_MS; egress/inject.h's rules, host's values),
 * the upstream handshake (INTERCEPT_HANDSHAKE_TIMEOUT_MS), then both
 * ways at once: the rewritten head and what follows it to up, unchanged;
 * up's bytes to the client, scrubbed of host's values; each way ends
 * (close_notify, or the socket's end) and the end is passed on (a
 * close_notify for a close_notify, a FIN for a FIN: a truncation stays
 * one). The connection is over when both ways are, after
 * INTERCEPT_IDLE_TIMEOUT_MS without a byte moving, or
 * INTERCEPT_DRAIN_TIMEOUT_MS after the response ended while the client
 * still holds its end open.
 *
 * The client gets no byte from up before up's certificate is verified:
 * when the upstream step fails, the client's connection is left
 * without a response (the caller closes it).
 *
 * A refused head (-EINVAL, -EACCES, -E2BIG) is answered with a short
 * 400 or 403 that says why, from here, and nothing is sent to up.
 *
 * Returns 0 when both ways ended, or -errno with err:
 *   -EPERM     no rule names host; or a TRACE request (answered 403)
 *   -EPROTO    a TLS handshake failed (client: SNI, ALPN, protocol;
 *              upstream: "upstream certificate does not verify for ...")
 *   -EINVAL    the client sent no HTTP/1.x request head (inject.h)
 *   -EACCES    the request names another host than host
 *   -E2BIG     the head is too long
 *   -ETIMEDOUT a deadline passed
 *   -ECONNRESET, -EPIPE, ...  a socket failed, or a peer ended too soon
 *   -ENOMEM
 */
int intercept_serve(struct intercept *x, int client, const uint8_t *pre, size_t prelen, bool tls,
		    int up, const char *host, struct error *err);

#endif
