/*
 * intercept.c - TLS interception for the hosts of a sandbox's secrets.
 * See intercept.h; intercept-ca.c issues the certificates, intercept-io.c
 * moves the bytes.
 *
 * Shared by every connection's thread: the two SSL_CTXs and the rules,
 * read-only once made, and the leaves (one per host of the rules, so
 * bounded by them), under a mutex because a leaf is issued again when it
 * comes near its end. Everything else belongs to one call of
 * intercept_serve().
 */
#include "network/intercept.h"
#include "network/intercept-internal.h"

#include "egress/peek.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEAF_VALID_S ((long)INTERCEPT_LEAF_DAYS * 86400)
#define REFUSE_MAX   512 /* bytes of the answer to a refused request */

static const unsigned char alpn_http11[] = "\x08http/1.1";

struct leaf {
	const char *host; /* a rule's */
	X509 *cert;
	time_t not_after;
};

struct intercept {
	SSL_CTX *server, *client;
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca;
	struct intercept_rule *rules; /* the strings owned */
	size_t nrules;
	pthread_mutex_t lock; /* leaves[].cert, .not_after */
	struct leaf *leaves;
	size_t nleaves;
};

/* One connection, as the TLS callbacks see it (the SSL's app data). */
struct conn {
	const char *host;
	bool sni_refused, alpn_refused;
};

/* Lower case, one trailing dot dropped, a host name (peek.h): into out. */
static bool host_normalize(const char *in, char out[static PEEK_HOST_MAX + 1])
{
	size_t n = in ? strnlen(in, PEEK_HOST_MAX + 2) : 0;
	if (n > 0 && in[n - 1] == '.')
		n--;
	if (n == 0 || n > PEEK_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)(in[i] >= 'A' && in[i] <= 'Z' ? in[i] | 0x20 : in[i]);
	out[n] = '\0';
	return peek_is_host_name(out);
}

bool intercept_wants(const struct intercept *x, const char *host)
{
	char h[PEEK_HOST_MAX + 1];
	if (!x || !host_normalize(host, h))
		return false;
	for (size_t i = 0; i < x->nrules; i++)
		if (strcmp(x->rules[i].host, h) == 0)
			return true;
	return false;
}

/* ---- leaves ----------------------------------------------------------------- */

/* host's leaf, issued again when near its end; a reference for the caller. */
static int leaf_get(struct intercept *x, const char *host, X509 **ret, struct error *err)
{
	struct leaf *l = NULL;
	for (size_t i = 0; i < x->nleaves && !l; i++)
		if (strcmp(x->leaves[i].host, host) == 0)
			l = &x->leaves[i];
	if (!l)
		return error_set(err, EPERM, "no rule for %s", host);
	int r = 0;
	pthread_mutex_lock(&x->lock);
	time_t now = time(NULL);
	if (!l->cert || l->not_after - now < INTERCEPT_LEAF_RENEW_S) {
		X509 *cert;
		r = cert_issue(x->leaf_key, x->ca, x->ca_key, false, host,
			       -INTERCEPT_LEAF_BACKDATE_S, LEAF_VALID_S, &cert, err);
		if (r == 0) {
			X509_free(l->cert);
			l->cert = cert;
			l->not_after = now + LEAF_VALID_S;
		}
	}
	if (r == 0 && X509_up_ref(l->cert))
		*ret = l->cert;
	else if (r == 0)
		r = error_set(err, ENOMEM, "leaf for %s", host);
	pthread_mutex_unlock(&x->lock);
	return r;
}

/* ---- the contexts --------------------------------------------------------- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned inlen, void *arg)
{
	(void)arg;
	struct conn *cn = SSL_get_app_data(ssl);
	unsigned char *sel = NULL;
	if (SSL_select_next_proto(&sel, outlen, alpn_http11, sizeof(alpn_http11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED) {
		cn->alpn_refused = true;
		return SSL_TLSEXT_ERR_ALERT_FATAL; /* no_application_protocol */
	}
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

/* Called for every ClientHello, with SNI or without. */
static int sni_check(SSL *ssl, int *alert, void *arg)
{
	(void)arg;
	struct conn *cn = SSL_get_app_data(ssl);
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	char h[PEEK_HOST_MAX + 1];
	if (!name || !host_normalize(name, h) || strcmp(h, cn->host) != 0) {
		cn->sni_refused = true;
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *ctx_new(bool server)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!ctx)
		return NULL;
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static int contexts_make(struct intercept *x, const char *cafile, struct error *err)
{
	if (!(x->server = ctx_new(true)) || !(x->client = ctx_new(false)))
		return ssl_error(err, ENOMEM, "TLS contexts");
	SSL_CTX_set_num_tickets(x->server, 0);
	SSL_CTX_set_alpn_select_cb(x->server, alpn_select, NULL);
	SSL_CTX_set_tlsext_servername_callback(x->server, sni_check);
	SSL_CTX_set_verify(x->client, SSL_VERIFY_PEER, NULL);
	if (cafile ? !SSL_CTX_load_verify_locations(x->client, cafile, NULL)
		   : !SSL_CTX_set_default_verify_paths(x->client))
		return ssl_error(err, EINVAL, "upstream roots %s", cafile ? cafile : "(default)");
	/* 0 is success here */
	if (SSL_CTX_set_alpn_protos(x->client, alpn_http11, sizeof(alpn_http11) - 1) != 0)
		return ssl_error(err, ENOMEM, "TLS contexts");
	return 0;
}

/* ---- new and free ---------------------------------------------------------- */

static int rules_copy(struct intercept *x, const struct intercept_config *c, struct error *err)
{
	if (c->nrules > INTERCEPT_RULES_MAX || (c->nrules && !c->rules))
		return error_set(err, EINVAL, "more than %d secret rules", INTERCEPT_RULES_MAX);
	x->rules = calloc(c->nrules ? c->nrules : 1, sizeof(*x->rules));
	x->leaves = calloc(c->nrules ? c->nrules : 1, sizeof(*x->leaves));
	if (!x->rules || !x->leaves)
		return error_set(err, ENOMEM, "rules: out of memory");
	for (size_t i = 0; i < c->nrules; i++) {
		const struct intercept_rule *r = &c->rules[i];
		char h[PEEK_HOST_MAX + 1];
		if (!host_normalize(r->host, h))
			return error_set(err, EINVAL, "rule %zu: not a host name", i);
		if (!r->placeholder || !inject_placeholder_is_valid(r->placeholder))
			return error_set(err, EINVAL, "rule %zu (%s): not a placeholder", i, h);
		if (!r->value || !inject_value_is_valid(r->value))
			return error_set(err, EINVAL,
					 "rule %zu (%s): a value is 1..%d bytes of visible ASCII, "
					 "space or tab",
					 i, h, INJECT_VALUE_MAX);
		struct intercept_rule *to = &x->rules[x->nrules++];
		if (!(to->host = strdup(h)) || !(to->placeholder = strdup(r->placeholder)) ||
		    !(to->value = strdup(r->value)))
			return error_set(err, ENOMEM, "rules: out of memory");
		size_t same = 0;
		for (size_t k = 0; k < x->nrules; k++)
			same += strcmp(x->rules[k].host, h) == 0;
		if (same > INJECT_PAIRS_MAX)
			return error_set(err, EINVAL, "%s: more than %d secrets", h,
					 INJECT_PAIRS_MAX);
		if (same == 1)
			x->leaves[x->nleaves++].host = to->host;
	}
	return 0;
}

int intercept_new(const struct intercept_config *c, struct intercept **ret, struct error *err)
{
	struct intercept *x = calloc(1, sizeof(*x));
	if (!x)
		return error_set(err, ENOMEM, "intercept: out of memory");
	pthread_mutex_init(&x->lock, NULL);
	ERR_clear_error();
	int r = rules_copy(x, c, err);
	if (r == 0 && !c->ca_dir)
		r = error_set(err, EINVAL, "intercept: no CA directory");
	if (r == 0)
		r = ca_load(c->ca_dir, &x->ca_key, &x->ca, err);
	if (r == 0 && !(x->leaf_key = EVP_EC_gen("P-256")))
		r = ssl_error(err, ENOMEM, "leaf key");
	if (r == 0)
		r = contexts_make(x, c->upstream_cafile, err);
	for (size_t i = 0; i < x->nleaves && r == 0; i++) {
		X509 *leaf;
		if ((r = leaf_get(x, x->leaves[i].host, &leaf, err)) == 0)
			X509_free(leaf);
	}
	if (r < 0) {
		intercept_free(x);
		return r;
	}
	*ret = x;
	return 0;
}

void intercept_free(struct intercept *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->nrules; i++) {
		char *v = (char *)x->rules[i].value;
		if (v)
			OPENSSL_cleanse(v, strlen(v));
		free(v);
		free((char *)x->rules[i].host);
		free((char *)x->rules[i].placeholder);
	}
	for (size_t i = 0; i < x->nleaves; i++)
		X509_free(x->leaves[i].cert);
	free(x->rules);
	free(x->leaves);
	SSL_CTX_free(x->server);
	SSL_CTX_free(x->client);
	EVP_PKEY_free(x->ca_key);
	EVP_PKEY_free(x->leaf_key);
	X509_free(x->ca);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* ---- one connection --------------------------------------------------------- */

static int client_handshake(struct intercept *x, struct end *e, struct conn *cn, struct error *err)
{
	X509 *leaf;
	int r = leaf_get(x, cn->host, &leaf, err);
	if (r < 0)
		return r;
	r = end_tls(e, x->server);
	if (r == 0) {
		SSL_set_app_data(e->ssl, cn);
		if (!SSL_use_certificate(e->ssl, leaf) || !SSL_use_PrivateKey(e->ssl, x->leaf_key))
			r = -ENOMEM;
	}
	X509_free(leaf);
	if (r < 0)
		return ssl_error(err, -r, "%s: TLS for the client", cn->host);
	r = end_handshake(e, true, mono_ms() + INTERCEPT_HANDSHAKE_TIMEOUT_MS);
	if (r < 0 && cn->sni_refused)
		return ssl_error(err, EPROTO, "%s: the client's TLS server name is another",
				 cn->host);
	if (r < 0 && cn->alpn_refused)
		return ssl_error(err, EPROTO, "%s: the client does not offer http/1.1 (ALPN)",
				 cn->host);
	if (r < 0)
		return ssl_error(err, -r, "%s: TLS handshake with the client", cn->host);
	return 0;
}

static int upstream_handshake(struct intercept *x, struct end *e, const char *host,
			      struct error *err)
{
	if (end_tls(e, x->client) < 0 || !SSL_set_tlsext_host_name(e->ssl, host) ||
	    !SSL_set1_host(e->ssl, host))
		return ssl_error(err, ENOMEM, "%s: TLS to the host", host);
	SSL_set_hostflags(e->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	int r = end_handshake(e, false, mono_ms() + INTERCEPT_HANDSHAKE_TIMEOUT_MS);
	long v = SSL_get_verify_result(e->ssl);
	if (r < 0 && v != X509_V_OK) {
		ERR_clear_error();
		return error_set(err, EPROTO, "upstream certificate does not verify for %s: %s",
				 host, X509_verify_cert_error_string(v));
	}
	if (r < 0)
		return ssl_error(err, -r, "%s: TLS handshake with the host", host);
	const unsigned char *proto;
	unsigned len;
	SSL_get0_alpn_selected(e->ssl, &proto, &len);
	if (len && (len != alpn_http11[0] || memcmp(proto, alpn_http11 + 1, len) != 0))
		return error_set(err, EPROTO, "%s: the host chose another protocol than http/1.1",
				 host);
	return 0;
}

/* The client's first request head, whole, into head: its length, or -errno with err. */
static int head_read(struct end *e, struct buf *head, const char *host, struct error *err)
{
	int64_t deadline = mono_ms() + INTERCEPT_HEAD_TIMEOUT_MS;
	uint8_t chunk[4096];
	for (;;) {
		int n = inject_head_len((const uint8_t *)head->data, head->len);
		if (n != 0)
			return n;
		ssize_t r = end_read(e, chunk, sizeof(chunk));
		if (r > 0 && buf_append(head, chunk, (size_t)r) < 0)
			return error_set(err, ENOMEM, "%s: out of memory", host);
		if (r == 0)
			return error_set(err, ECONNRESET, "%s: the client ended before a request",
					 host);
		if (r == -EAGAIN)
			r = end_wait(e, true, deadline);
		if (r < 0)
			return ssl_error(err, (int)-r, "%s: reading the request head", host);
	}
}

/* Tell the client why its request goes nowhere (best effort). */
static void refuse(struct end *e, int r, const char *host)
{
	char text[REFUSE_MAX], body[REFUSE_MAX / 2];
	int n = snprintf(body, sizeof(body),
			 r == -EACCES  ? "agentbox: the request must name %s, the host its "
					 "secrets are for\n"
			 : r == -EPERM ? "agentbox: no TRACE to %s, which is given secrets\n"
			 : r == -E2BIG ? "agentbox: the request head for %s is too long\n"
				       : "agentbox: the request for %s is not strict HTTP/1.x "
					 "(CRLF line ends, no obs-fold)\n",
			 host);
	if (n < 0 || (size_t)n >= sizeof(body))
		n = n < 0 ? 0 : (int)sizeof(body) - 1; /* what was written: a long host is cut */
	n = snprintf(text, sizeof(text),
		     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
		     "Connection: close\r\n\r\n%s",
		     r == -EACCES || r == -EPERM ? "403 Forbidden" : "400 Bad Request", n, body);
	if (n < 0 || (size_t)n >= sizeof(text))
		n = n < 0 ? 0 : (int)sizeof(text) - 1;
	int64_t deadline = mono_ms() + INTERCEPT_HANDSHAKE_TIMEOUT_MS;
	(void)end_write_all(e, text, (size_t)n, deadline);
	if (e->ssl)
		(void)SSL_shutdown(e->ssl);
	ERR_clear_error();
}

static int serve(struct intercept *x, struct end *ce, struct end *ue, bool tls, struct conn *cn,
		 const struct inject_pair *pairs, size_t npairs, struct inject_scrub *scrub,
		 struct buf *to_up, struct error *err)
{
	const char *host = cn->host;
	int r = tls ? client_handshake(x, ce, cn, err) : 0;
	if (r < 0)
		return r;
	_cleanup_buf_ struct buf head = {.max = INJECT_HEAD_MAX + 4096};
	int hlen = head_read(ce, &head, host, err);
	if (hlen < 0 && hlen != -EINVAL && hlen != -E2BIG)
		return hlen; /* err says */
	r = hlen > 0 ? inject_rewrite((const uint8_t *)head.data, (size_t)hlen, host, pairs, npairs,
				      to_up)
		     : hlen;
	if (r == -ENOMEM)
		return error_set(err, ENOMEM, "%s: out of memory", host);
	if (r < 0) {
		refuse(ce, r, host);
		return error_set(err, -r, "%s: %s", host,
				 r == -EACCES  ? "the request names another host"
				 : r == -EPERM ? "a TRACE request"
				 : r == -E2BIG ? "the request head is too long"
					       : "not a strict HTTP/1.x request head");
	}
	buf_append(to_up, head.data + hlen, head.len - (size_t)hlen);
	if (to_up->failed || inject_scrub_init(scrub, pairs, npairs) < 0)
		return error_set(err, ENOMEM, "%s: out of memory", host);
	if (tls && (r = upstream_handshake(x, ue, host, err)) < 0)
		return r;
	return pump(ce, ue, to_up, scrub, host, err);
}

int intercept_serve(struct intercept *x, int client, const uint8_t *pre, size_t prelen, bool tls,
		    int up, const char *host, struct error *err)
{
	char h[PEEK_HOST_MAX + 1];
	if (!host_normalize(host, h))
		return error_set(err, EPERM, "not a host name");
	if (!intercept_wants(x, h))
		return error_set(err, EPERM, "no secret rule for %s", h);
	struct inject_pair pairs[INJECT_PAIRS_MAX];
	size_t npairs = 0;
	for (size_t i = 0; i < x->nrules; i++)
		if (strcmp(x->rules[i].host, h) == 0)
			pairs[npairs++] = (struct inject_pair){
			    .placeholder = x->rules[i].placeholder, .value = x->rules[i].value};
	struct conn cn = {.host = h};
	struct end ce = {.fd = client, .pre = pre, .prelen = pre ? prelen : 0}, ue = {.fd = up};
	struct inject_scrub *scrub = malloc(sizeof(*scrub));
	struct buf to_up = {0};
	ERR_clear_error();
	int r = scrub ? serve(x, &ce, &ue, tls, &cn, pairs, npairs, scrub, &to_up, err)
		      : error_set(err, ENOMEM, "%s: out of memory", h);
	end_release(&ce);
	end_release(&ue);
	ERR_clear_error();
	/* what held a value: the rewritten head, and the response's last bytes */
	if (to_up.data)
		OPENSSL_cleanse(to_up.data, to_up.cap);
	buf_release(&to_up);
	if (scrub)
		OPENSSL_cleanse(scrub, sizeof(*scrub));
	free(scrub);
	return r;
}
