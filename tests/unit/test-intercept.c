/*
 * test-intercept.c - TLS interception for a secret's host
 * (network/intercept.h), for real, on loopback: the CA made on disk; an
 * upstream TLS server of the test's own (its CA, its certificate for
 * api.secret.test) that records the request it got and echoes the
 * Authorization header in its body; an OpenSSL client that trusts
 * bundle.pem and speaks to intercept_serve() through a TCP connection,
 * as a sandbox speaks to its proxy. Every session runs in threads and
 * records what it saw; the assertions are made afterwards, in the test's
 * own thread.
 */
#include "network/intercept.h"

#include "egress/inject.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define HOST	    "api.secret.test"
#define VALUE	    "sk-live-0123456789-the-real-one"
#define PLACEHOLDER "agentbox-secret-0123456789abcdef0123456789abcdef"
#define WAIT_S	    10 /* a test's sockets never wait longer */

static const char request[] = "GET /echo HTTP/1.1\r\nHost: " HOST "\r\n"
			      "Authorization: Bearer " PLACEHOLDER "\r\n"
			      "Connection: keep-alive\r\nAccept: */*\r\n\r\n";

/* ---- the world: a temp dir, the CA, an upstream CA and its server certs ------------ */

static struct {
	char dir[64], ca_dir[128], bundle[256], up_cafile[256];
	EVP_PKEY *up_ca_key, *srv_key;
	X509 *up_ca, *srv_good, *srv_wrong;
	SSL_CTX *srv_good_ctx, *srv_wrong_ctx;
	struct intercept *x; /* the secret on HOST, upstream verified with up_cafile */
} w;

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v;
	X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v, nid, value);
	int ok = e && X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return ok;
}

/* A certificate for key, by issuer (NULL: self-signed), a CA or a server for san. */
static X509 *mkcert(EVP_PKEY *key, X509 *issuer, EVP_PKEY *ikey, const char *cn, const char *san)
{
	X509 *x = X509_new();
	assert_non_null(x);
	char dns[300];
	snprintf(dns, sizeof(dns), "DNS:%s", san ? san : "");
	X509_NAME *name = X509_get_subject_name(x);
	int ok = X509_set_version(x, X509_VERSION_3) &&
		 ASN1_INTEGER_set(X509_get_serialNumber(x), (long)random()) &&
		 X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
		 X509_gmtime_adj(X509_getm_notAfter(x), 86400) && X509_set_pubkey(x, key) &&
		 X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
					    -1, -1, 0) &&
		 X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) &&
		 add_ext(x, issuer ? issuer : x, NID_basic_constraints,
			 san ? "critical,CA:FALSE" : "critical,CA:TRUE") &&
		 add_ext(x, issuer ? issuer : x, NID_subject_key_identifier, "hash") &&
		 add_ext(x, issuer ? issuer : x, NID_authority_key_identifier, "keyid:always") &&
		 (san ? add_ext(x, issuer, NID_subject_alt_name, dns) &&
			    add_ext(x, issuer, NID_key_usage, "critical,digitalSignature")
		      : add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign")) &&
		 X509_sign(x, ikey ? ikey : key, EVP_sha256()) > 0;
	assert_true(ok);
	return x;
}

static void write_pem(const char *path, X509 *x)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(PEM_write_X509(f, x));
	fclose(f);
}

static SSL_CTX *server_ctx(X509 *cert, EVP_PKEY *key)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	assert_non_null(ctx);
	assert_true(SSL_CTX_use_certificate(ctx, cert) && SSL_CTX_use_PrivateKey(ctx, key));
	return ctx;
}

static struct intercept *interceptor(const char *up_cafile, struct error *err)
{
	const struct intercept_rule rules[] = {
	    {.host = HOST, .placeholder = PLACEHOLDER, .value = VALUE},
	    {.host = "other.secret.test", .placeholder = PLACEHOLDER, .value = "for-another"},
	};
	struct intercept_config c = {
	    .ca_dir = w.ca_dir, .upstream_cafile = up_cafile, .rules = rules, .nrules = 2};
	struct intercept *x = NULL;
	int r = intercept_new(&c, &x, err);
	return r == 0 ? x : NULL;
}

static int group_setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	snprintf(w.dir, sizeof(w.dir), "/tmp/test-intercept-XXXXXX");
	assert_non_null(mkdtemp(w.dir));
	snprintf(w.ca_dir, sizeof(w.ca_dir), "%s/ca", w.dir);
	snprintf(w.bundle, sizeof(w.bundle), "%s/%s/%s", w.ca_dir, INTERCEPT_CA_PUBLIC,
		 INTERCEPT_CA_BUNDLE);
	snprintf(w.up_cafile, sizeof(w.up_cafile), "%s/upstream-ca.pem", w.dir);
	assert_non_null(w.up_ca_key = EVP_EC_gen("P-256"));
	assert_non_null(w.srv_key = EVP_EC_gen("P-256"));
	w.up_ca = mkcert(w.up_ca_key, NULL, NULL, "test upstream CA", NULL);
	w.srv_good = mkcert(w.srv_key, w.up_ca, w.up_ca_key, HOST, HOST);
	w.srv_wrong = mkcert(w.srv_key, w.up_ca, w.up_ca_key, "wrong.test", "wrong.test");
	write_pem(w.up_cafile, w.up_ca);
	w.srv_good_ctx = server_ctx(w.srv_good, w.srv_key);
	w.srv_wrong_ctx = server_ctx(w.srv_wrong, w.srv_key);
	struct error err = {0};
	/* the upstream CA stands for the system's roots, so the client trusts both */
	if (intercept_ca_ensure(w.ca_dir, w.up_cafile, &err) < 0)
		fail_msg("%s", err.msg);
	w.x = interceptor(w.up_cafile, &err);
	if (!w.x)
		fail_msg("%s", err.msg);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	intercept_free(w.x);
	SSL_CTX_free(w.srv_good_ctx);
	SSL_CTX_free(w.srv_wrong_ctx);
	X509_free(w.up_ca);
	X509_free(w.srv_good);
	X509_free(w.srv_wrong);
	EVP_PKEY_free(w.up_ca_key);
	EVP_PKEY_free(w.srv_key);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s/ca/public", w.dir);
	const char *files[] = {"ca/public/ca.pem", "ca/public/bundle.pem", "ca/ca.key",
			       "upstream-ca.pem", "sys.pem"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[256];
		snprintf(p, sizeof(p), "%s/%s", w.dir, files[i]);
		unlink(p);
	}
	rmdir(cmd);
	snprintf(cmd, sizeof(cmd), "%s/ca", w.dir);
	rmdir(cmd);
	rmdir(w.dir);
	return 0;
}

/* ---- sockets ---------------------------------------------------------------- */

static void timeouts(int fd)
{
	struct timeval tv = {.tv_sec = WAIT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int listener(uint16_t *ret_port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		abort();
	*ret_port = ntohs(a.sin_port);
	return fd;
}

static int dial(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		abort();
	return fd;
}

static int accept_by(int lfd)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	if (poll(&p, 1, WAIT_S * 1000) != 1)
		return -1;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		timeouts(fd);
	return fd;
}

/* ---- a session: client ─▶ intercept_serve ─▶ upstream --------------------------- */

enum pre_mode { PRE_NONE, PRE_HEADER, PRE_SOME, PRE_HELLO, PRE_HEAD };

struct session {
	/* what it is */
	bool tls;
	const char *sni;	   /* NULL: none sent */
	const unsigned char *alpn; /* wire format, or NULL */
	unsigned alpnlen;
	const char *req; /* NULL: request[] */
	enum pre_mode pre;
	SSL_CTX *upstream;   /* NULL: plain */
	int heads_wanted;    /* the upstream reads this many heads (0: 1) */
	bool stall;	     /* the client sends nothing after its handshake */
	bool stall_hello;    /* the client sends a record header, and nothing more */
	struct intercept *x; /* NULL: w.x */
	/* what happened */
	int rc;
	struct error err;
	bool client_handshake_ok;
	char seen[16384]; /* the bytes the upstream got */
	size_t seenlen;
	char resp[16384]; /* the bytes the client got */
	size_t resplen;
	long leaf_after_s, leaf_before_s; /* notAfter, notBefore from now */
	int lfd, cfd;
};

static void *upstream_main(void *arg)
{
	struct session *s = arg;
	int fd = accept_by(s->lfd);
	if (fd < 0)
		return NULL;
	SSL *ssl = NULL;
	if (s->tls) {
		ssl = SSL_new(s->upstream);
		SSL_set_fd(ssl, fd);
		if (SSL_accept(ssl) != 1)
			goto out;
	}
	int heads = 0, want = s->heads_wanted ? s->heads_wanted : 1;
	while (heads < want && s->seenlen < sizeof(s->seen) - 1) {
		int n = ssl ? SSL_read(ssl, s->seen + s->seenlen,
				       (int)(sizeof(s->seen) - 1 - s->seenlen))
			    : (int)read(fd, s->seen + s->seenlen, sizeof(s->seen) - 1 - s->seenlen);
		if (n <= 0)
			break;
		s->seenlen += (size_t)n;
		s->seen[s->seenlen] = '\0';
		heads = 0;
		for (const char *p = s->seen; (p = strstr(p, "\r\n\r\n")); p += 4)
			heads++;
	}
	/* echo the Authorization header's value, as a careless server might */
	char value[512] = "";
	const char *a = strstr(s->seen, "Authorization: Bearer ");
	if (a) {
		a += strlen("Authorization: Bearer ");
		size_t n = strcspn(a, "\r");
		snprintf(value, sizeof(value), "%.*s", (int)n, a);
	}
	char body[1024], resp[2048];
	int blen = snprintf(body, sizeof(body), "{\"seen\": \"%s\"}\n", value);
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Echo: %s\r\n"
			 "Connection: close\r\n\r\n%s",
			 blen, value, body);
	if (ssl) {
		SSL_write(ssl, resp, n);
		SSL_shutdown(ssl);
	} else {
		(void)!write(fd, resp, (size_t)n);
	}
out:
	SSL_free(ssl);
	close(fd);
	return NULL;
}

/*
 * A stalled client waits for the proxy to let it go: its socket's own
 * timeout (WAIT_S, which equals a proxy timeout) must not end the wait
 * first, or the proxy sees the client leave (EPIPE) instead of its own
 * timeout. A bound on liveness, past both of the proxy's.
 */
static void wait_past_the_proxy(int fd)
{
	struct timeval tv = {
	    .tv_sec = (INTERCEPT_HANDSHAKE_TIMEOUT_MS + INTERCEPT_HEAD_TIMEOUT_MS) / 1000 + WAIT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void *client_main(void *arg)
{
	struct session *s = arg;
	const char *req = s->req ? s->req : request;
	SSL_CTX *ctx = NULL;
	SSL *ssl = NULL;
	if (s->stall || s->stall_hello)
		wait_past_the_proxy(s->cfd);
	if (s->stall_hello) {
		(void)!write(s->cfd, "\x16\x03\x01\x02\x00", 5);
		char b[64];
		while (read(s->cfd, b, sizeof(b)) > 0)
			;
		goto out;
	}
	if (s->tls) {
		ctx = SSL_CTX_new(TLS_client_method());
		SSL_CTX_load_verify_locations(ctx, w.bundle, NULL);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		ssl = SSL_new(ctx);
		SSL_set_fd(ssl, s->cfd);
		if (s->sni) {
			SSL_set_tlsext_host_name(ssl, s->sni);
			SSL_set1_host(ssl, s->sni);
		}
		if (s->alpn)
			SSL_set_alpn_protos(ssl, s->alpn, s->alpnlen);
		if (SSL_connect(ssl) != 1)
			goto out;
		s->client_handshake_ok = true;
		X509 *leaf = SSL_get1_peer_certificate(ssl);
		int days, secs;
		if (leaf && ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(leaf)))
			s->leaf_after_s = days * 86400L + secs;
		if (leaf && ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notBefore(leaf)))
			s->leaf_before_s = days * 86400L + secs;
		X509_free(leaf);
		if (s->stall) {
			/* hold the connection open, reading below TLS, until the proxy lets go:
			 * nothing a TLS record says (a session ticket) may end it sooner */
			char b[256];
			while (read(s->cfd, b, sizeof(b)) > 0)
				;
			goto out;
		}
		SSL_write(ssl, req, (int)strlen(req));
	} else {
		(void)!write(s->cfd, req, strlen(req));
	}
	for (;;) {
		int n =
		    ssl ? SSL_read(ssl, s->resp + s->resplen,
				   (int)(sizeof(s->resp) - 1 - s->resplen))
			: (int)read(s->cfd, s->resp + s->resplen, sizeof(s->resp) - 1 - s->resplen);
		if (n <= 0)
			break;
		s->resplen += (size_t)n;
		s->resp[s->resplen] = '\0';
	}
	if (ssl)
		SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	shutdown(s->cfd, SHUT_WR);
	ERR_clear_error();
	return NULL;
}

static size_t read_exactly(int fd, uint8_t *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* What the proxy read before it handed the connection over, as s->pre says. */
static size_t read_pre(struct session *s, int fd, uint8_t *pre, size_t max)
{
	switch (s->pre) {
	case PRE_NONE:
		return 0;
	case PRE_HEADER: /* the record header alone */
		return read_exactly(fd, pre, 5);
	case PRE_SOME:
		return read_exactly(fd, pre, 100);
	case PRE_HELLO: { /* the whole first record */
		if (read_exactly(fd, pre, 5) != 5)
			return 0;
		size_t len = (size_t)pre[3] << 8 | pre[4];
		return 5 + read_exactly(fd, pre + 5, len < max - 5 ? len : max - 5);
	}
	case PRE_HEAD: { /* an HTTP head, and whatever came with it */
		size_t got = 0;
		while (got < max - 1) {
			ssize_t r = read(fd, pre + got, max - 1 - got);
			if (r <= 0)
				break;
			got += (size_t)r;
			pre[got] = '\0';
			if (strstr((char *)pre, "\r\n\r\n"))
				break;
		}
		return got;
	}
	}
	return 0;
}

static void *session_run(void *arg)
{
	struct session *s = arg;
	uint16_t lport, pport;
	s->lfd = listener(&lport);
	int plfd = listener(&pport);
	s->cfd = dial(pport);
	int sfd = accept_by(plfd);
	close(plfd);
	timeouts(s->cfd);
	pthread_t up_t, client_t;
	pthread_create(&up_t, NULL, upstream_main, s);
	pthread_create(&client_t, NULL, client_main, s);
	uint8_t pre[4096];
	size_t prelen = read_pre(s, sfd, pre, sizeof(pre));
	int up = dial(lport);
	s->rc = intercept_serve(s->x ? s->x : w.x, sfd, prelen ? pre : NULL, prelen, s->tls, up,
				HOST, &s->err);
	close(sfd);
	close(up);
	pthread_join(client_t, NULL);
	pthread_join(up_t, NULL);
	close(s->cfd);
	close(s->lfd);
	return NULL;
}

static struct session *session_new(bool tls, enum pre_mode pre)
{
	struct session *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	s->tls = tls;
	s->pre = tls ? pre : PRE_HEAD;
	s->sni = HOST;
	s->upstream = w.srv_good_ctx;
	return s;
}

/* The value never reached the client, and its mask did, in header and body. */
static void assert_scrubbed(const struct session *s)
{
	char stars[sizeof(VALUE)];
	memset(stars, '*', sizeof(VALUE) - 1);
	stars[sizeof(VALUE) - 1] = '\0';
	char body[256], header[256];
	snprintf(body, sizeof(body), "{\"seen\": \"%s\"}", stars);
	snprintf(header, sizeof(header), "X-Echo: %s\r\n", stars);
	if (!strstr(s->resp, body) || !strstr(s->resp, header) || strstr(s->resp, VALUE))
		fail_msg("the client got: %s", s->resp);
	/* Content-Length still right: the body is whole after the head */
	const char *b = strstr(s->resp, "\r\n\r\n");
	assert_non_null(b);
	char cl[64];
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(b + 4));
	assert_non_null(strstr(s->resp, cl));
}

/* The upstream got the value in the header, and the rest as the head said. */
static void assert_injected(const struct session *s)
{
	if (!strstr(s->seen, "Authorization: Bearer " VALUE "\r\n") ||
	    strstr(s->seen, PLACEHOLDER) || !strstr(s->seen, "Connection: close\r\n") ||
	    strstr(s->seen, "keep-alive") || strncmp(s->seen, "GET /echo HTTP/1.1\r\n", 20) != 0)
		fail_msg("the upstream got: %s", s->seen);
}

/* ---- the tests ------------------------------------------------------------- */

static void test_ca_on_disk(void **state)
{
	(void)state;
	char dir[160], p[256], sys[160];
	snprintf(dir, sizeof(dir), "%s/ca2", w.dir);
	snprintf(sys, sizeof(sys), "%s/sys.pem", w.dir);
	FILE *f = fopen(sys, "w");
	assert_non_null(f);
	fputs("# the system's roots, without a last newline", f);
	fclose(f);
	struct error err = {0};
	mode_t old = umask(077); /* the modes are set, not left to the umask */
	int r = intercept_ca_ensure(dir, sys, &err);
	umask(old);
	if (r < 0)
		fail_msg("%s", err.msg);
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, INTERCEPT_CA_KEY);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/%s", dir, INTERCEPT_CA_PUBLIC);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_CERT);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_BUNDLE);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);

	/* the certificate: a CA, as intercept.h says */
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_CERT);
	f = fopen(p, "r");
	X509 *ca = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(ca);
	char cn[128];
	X509_NAME_get_text_by_NID(X509_get_subject_name(ca), NID_commonName, cn, sizeof(cn));
	assert_string_equal(cn, INTERCEPT_CA_NAME);
	int crit = 0;
	BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(ca, NID_basic_constraints, &crit, NULL);
	assert_true(bc && bc->ca && crit == 1);
	BASIC_CONSTRAINTS_free(bc);
	ASN1_BIT_STRING *ku = X509_get_ext_d2i(ca, NID_key_usage, &crit, NULL);
	assert_true(ku && crit == 1);
	ASN1_BIT_STRING_free(ku);
	assert_true(X509_get_key_usage(ca) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN));
	int days, secs;
	assert_true(ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(ca)));
	assert_true(days >= INTERCEPT_CA_DAYS - 1 && days <= INTERCEPT_CA_DAYS);
	EVP_PKEY *pub = X509_get0_pubkey(ca);
	assert_true(EVP_PKEY_is_a(pub, "EC"));
	X509_free(ca);

	/* the bundle: the system's bytes, then the CA */
	char key1[1024] = "", key2[1024] = "", cert1[2048] = "", bundle[8192] = "";
	snprintf(p, sizeof(p), "%s/%s", dir, INTERCEPT_CA_KEY);
	f = fopen(p, "r");
	assert_true(fread(key1, 1, sizeof(key1) - 1, f) > 0);
	fclose(f);
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_CERT);
	f = fopen(p, "r");
	assert_true(fread(cert1, 1, sizeof(cert1) - 1, f) > 0);
	fclose(f);
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_BUNDLE);
	f = fopen(p, "r");
	assert_true(fread(bundle, 1, sizeof(bundle) - 1, f) > 0);
	fclose(f);
	char want[8192];
	snprintf(want, sizeof(want), "# the system's roots, without a last newline\n%s", cert1);
	assert_string_equal(bundle, want);

	/* again, with another system bundle (none): the key is kept, the bundle made again */
	snprintf(p, sizeof(p), "%s/none.pem", w.dir);
	if (intercept_ca_ensure(dir, p, &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(p, sizeof(p), "%s/%s", dir, INTERCEPT_CA_KEY);
	f = fopen(p, "r");
	assert_true(fread(key2, 1, sizeof(key2) - 1, f) > 0);
	fclose(f);
	assert_string_equal(key1, key2);
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_BUNDLE);
	f = fopen(p, "r");
	memset(bundle, 0, sizeof(bundle));
	assert_true(fread(bundle, 1, sizeof(bundle) - 1, f) > 0);
	fclose(f);
	assert_string_equal(bundle, cert1);

	/* a crash between the key and the certificate: a key alone is made again */
	snprintf(p, sizeof(p), "%s/%s/%s", dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_CERT);
	assert_int_equal(unlink(p), 0);
	if (intercept_ca_ensure(dir, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(p, sizeof(p), "%s/%s", dir, INTERCEPT_CA_KEY);
	f = fopen(p, "r");
	memset(key2, 0, sizeof(key2));
	assert_true(fread(key2, 1, sizeof(key2) - 1, f) > 0);
	fclose(f);
	assert_string_not_equal(key1, key2);

	/* a key that is not the certificate's: refused, not replaced */
	char other[160];
	snprintf(other, sizeof(other), "%s/ca3", w.dir);
	assert_int_equal(intercept_ca_ensure(other, NULL, &err), 0);
	char from[256], to[256];
	snprintf(from, sizeof(from), "%s/%s", other, INTERCEPT_CA_KEY);
	snprintf(to, sizeof(to), "%s/%s", dir, INTERCEPT_CA_KEY);
	assert_int_equal(rename(from, to), 0);
	memset(&err, 0, sizeof(err));
	assert_int_equal(intercept_ca_ensure(dir, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a CA's key and certificate"));

	/* a CA directory whose parent is missing */
	snprintf(p, sizeof(p), "%s/missing/ca", w.dir);
	assert_int_equal(intercept_ca_ensure(p, NULL, &err), -ENOENT);

	const char *dirs[] = {dir, other};
	for (size_t i = 0; i < 2; i++) {
		const char *names[] = {"public/ca.pem", "public/bundle.pem", "ca.key"};
		for (size_t k = 0; k < 3; k++) {
			snprintf(p, sizeof(p), "%s/%s", dirs[i], names[k]);
			unlink(p);
		}
		snprintf(p, sizeof(p), "%s/public", dirs[i]);
		rmdir(p);
		rmdir(dirs[i]);
	}
}

static void test_new_refuses_bad_rules(void **state)
{
	(void)state;
	const struct intercept_rule bad[][1] = {
	    {{.host = "1.2.3.4", .placeholder = PLACEHOLDER, .value = VALUE}},
	    {{.host = "no_dot", .placeholder = PLACEHOLDER, .value = VALUE}},
	    {{.host = HOST, .placeholder = "agentbox-secret-xyz", .value = VALUE}},
	    {{.host = HOST, .placeholder = PLACEHOLDER, .value = VALUE "\r\nX-Evil: 1"}},
	    {{.host = HOST, .placeholder = PLACEHOLDER, .value = ""}},
	    {{.host = NULL, .placeholder = PLACEHOLDER, .value = VALUE}},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct intercept_config c = {.ca_dir = w.ca_dir, .rules = bad[i], .nrules = 1};
		struct intercept *x = NULL;
		struct error err = {0};
		if (intercept_new(&c, &x, &err) != -EINVAL)
			fail_msg("bad rule %zu taken", i);
		assert_null(x);
		assert_null(strstr(err.msg, VALUE)); /* never a value in a message */
	}
	/* too many secrets for one host */
	struct intercept_rule many[INJECT_PAIRS_MAX + 1];
	for (size_t i = 0; i < INJECT_PAIRS_MAX + 1; i++)
		many[i] = (struct intercept_rule){
		    .host = HOST, .placeholder = PLACEHOLDER, .value = VALUE};
	struct intercept_config c = {
	    .ca_dir = w.ca_dir, .rules = many, .nrules = INJECT_PAIRS_MAX + 1};
	struct intercept *x = NULL;
	struct error err = {0};
	assert_int_equal(intercept_new(&c, &x, &err), -EINVAL);
	/* no CA there */
	char none[160];
	snprintf(none, sizeof(none), "%s/no-ca", w.dir);
	c = (struct intercept_config){.ca_dir = none, .rules = many, .nrules = 1};
	assert_int_equal(intercept_new(&c, &x, &err), -ENOENT);
	/* upstream roots that do not load */
	c = (struct intercept_config){
	    .ca_dir = w.ca_dir, .upstream_cafile = none, .rules = many, .nrules = 1};
	assert_int_equal(intercept_new(&c, &x, &err), -EINVAL);
	intercept_free(NULL);
}

static void test_wants_only_its_hosts(void **state)
{
	(void)state;
	assert_true(intercept_wants(w.x, HOST));
	assert_true(intercept_wants(w.x, "API.Secret.TEST."));
	assert_true(intercept_wants(w.x, "other.secret.test"));
	assert_false(intercept_wants(w.x, "secret.test"));
	assert_false(intercept_wants(w.x, "x." HOST));
	assert_false(intercept_wants(w.x, HOST ".."));
	assert_false(intercept_wants(w.x, ""));
	assert_false(intercept_wants(w.x, NULL));
	assert_false(intercept_wants(NULL, HOST));
	/* a host without a rule is not served either */
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct error err = {0};
	assert_int_equal(intercept_serve(w.x, sv[0], NULL, 0, true, sv[1], "site1.test", &err),
			 -EPERM);
	close(sv[0]);
	close(sv[1]);
}

static void test_tls_injects_and_scrubs(void **state)
{
	(void)state;
	struct session *s = session_new(true, PRE_NONE);
	session_run(s);
	if (s->rc < 0)
		fail_msg("intercept_serve: %s", s->err.msg);
	assert_true(s->client_handshake_ok);
	assert_injected(s);
	assert_scrubbed(s);
	/* a short-lived leaf: from an hour ago, for a week */
	assert_true(s->leaf_before_s <= -INTERCEPT_LEAF_BACKDATE_S + 60 &&
		    s->leaf_before_s >= -INTERCEPT_LEAF_BACKDATE_S - 60);
	assert_true(s->leaf_after_s <= INTERCEPT_LEAF_DAYS * 86400L + 60 &&
		    s->leaf_after_s >= INTERCEPT_LEAF_DAYS * 86400L - 60);
	free(s);
}

static void test_tls_with_the_hello_read_before(void **state)
{
	(void)state;
	const enum pre_mode modes[] = {PRE_HEADER, PRE_SOME, PRE_HELLO};
	for (size_t i = 0; i < 3; i++) {
		struct session *s = session_new(true, modes[i]);
		session_run(s);
		if (s->rc < 0)
			fail_msg("pre mode %zu: %s", i, s->err.msg);
		assert_injected(s);
		assert_scrubbed(s);
		free(s);
	}
}

static void test_plain_http(void **state)
{
	(void)state;
	struct session *s = session_new(false, PRE_HEAD);
	s->upstream = NULL;
	session_run(s);
	if (s->rc < 0)
		fail_msg("intercept_serve: %s", s->err.msg);
	assert_injected(s);
	assert_scrubbed(s);
	free(s);
}

static void test_second_request_is_not_rewritten(void **state)
{
	(void)state;
	char two[1024];
	snprintf(two, sizeof(two), "%s%s", request, request);
	struct session *s = session_new(false, PRE_HEAD);
	s->upstream = NULL;
	s->req = two;
	s->heads_wanted = 2;
	session_run(s);
	if (s->rc < 0)
		fail_msg("intercept_serve: %s", s->err.msg);
	const char *second = strstr(s->seen, "\r\n\r\n");
	assert_non_null(second);
	second += 4;
	/* the first with the value, the second as the client sent it */
	assert_non_null(strstr(s->seen, VALUE));
	assert_true(strstr(s->seen, VALUE) < second);
	assert_string_equal(second, request);
	free(s);
}

static void test_upstream_that_does_not_verify(void **state)
{
	(void)state;
	/* a certificate for another name */
	struct session *s = session_new(true, PRE_NONE);
	s->upstream = w.srv_wrong_ctx;
	session_run(s);
	assert_int_equal(s->rc, -EPROTO);
	if (!strstr(s->err.msg, "upstream certificate does not verify for " HOST))
		fail_msg("%s", s->err.msg);
	assert_int_equal(s->resplen, 0);
	assert_int_equal(s->seenlen, 0);
	free(s);

	/* a certificate from a CA the proxy does not trust */
	char ours[256];
	snprintf(ours, sizeof(ours), "%s/%s/%s", w.ca_dir, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_CERT);
	struct error err = {0};
	struct intercept *x = interceptor(ours, &err);
	assert_non_null(x);
	s = session_new(true, PRE_NONE);
	s->x = x;
	session_run(s);
	assert_int_equal(s->rc, -EPROTO);
	if (!strstr(s->err.msg, "upstream certificate does not verify for " HOST))
		fail_msg("%s", s->err.msg);
	assert_int_equal(s->resplen, 0);
	free(s);
	intercept_free(x);
}

static void test_client_handshakes_refused(void **state)
{
	(void)state;
	static const unsigned char h2[] = "\x02h2";
	static const unsigned char both[] = "\x02h2\x08http/1.1";
	struct {
		const char *sni;
		const unsigned char *alpn;
		unsigned alpnlen;
		const char *msg;
	} cases[] = {
	    {"other.secret.test", NULL, 0, "server name"},
	    {NULL, NULL, 0, "server name"},
	    {HOST, h2, sizeof(h2) - 1, "ALPN"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct session *s = session_new(true, PRE_NONE);
		s->sni = cases[i].sni;
		s->alpn = cases[i].alpn;
		s->alpnlen = cases[i].alpnlen;
		session_run(s);
		assert_int_equal(s->rc, -EPROTO);
		if (!strstr(s->err.msg, cases[i].msg))
			fail_msg("case %zu: %s", i, s->err.msg);
		assert_false(s->client_handshake_ok);
		assert_int_equal(s->resplen, 0);
		assert_int_equal(s->seenlen, 0);
		free(s);
	}
	/* h2 and http/1.1 offered: http/1.1 it is */
	struct session *s = session_new(true, PRE_NONE);
	s->alpn = both;
	s->alpnlen = sizeof(both) - 1;
	session_run(s);
	if (s->rc < 0)
		fail_msg("%s", s->err.msg);
	assert_injected(s);
	free(s);
}

static void test_request_for_another_host(void **state)
{
	(void)state;
	static const char evil[] = "GET /echo HTTP/1.1\r\nHost: evil.test\r\n"
				   "Authorization: Bearer " PLACEHOLDER "\r\n\r\n";
	static const char lf[] = "GET /echo HTTP/1.1\nHost: " HOST "\n\n";
	const char *reqs[] = {evil, lf};
	const int codes[] = {-EACCES, -EINVAL};
	const char *status[] = {"HTTP/1.1 403 ", "HTTP/1.1 400 "};
	for (size_t i = 0; i < 2; i++) {
		struct session *s = session_new(true, PRE_NONE);
		s->req = reqs[i];
		session_run(s);
		assert_int_equal(s->rc, codes[i]);
		if (strncmp(s->resp, status[i], strlen(status[i])) != 0)
			fail_msg("case %zu: the client got %s", i, s->resp);
		assert_null(strstr(s->resp, VALUE));
		assert_int_equal(s->seenlen, 0); /* nothing went to the host */
		free(s);
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A client that stalls in its handshake, or before its request, is let go. */
static void test_stuck_clients_time_out(void **state)
{
	(void)state;
	struct session *s[2] = {session_new(true, PRE_NONE), session_new(true, PRE_NONE)};
	s[0]->stall_hello = true;
	s[1]->stall = true;
	pthread_t t[2];
	int64_t start = now_ms();
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, session_run, s[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	int64_t took = now_ms() - start;
	for (int i = 0; i < 2; i++) {
		if (s[i]->rc != -ETIMEDOUT)
			fail_msg("session %d: %d %s", i, s[i]->rc, s[i]->err.msg);
		assert_int_equal(s[i]->seenlen, 0);
		free(s[i]);
	}
	assert_true(took >= INTERCEPT_HANDSHAKE_TIMEOUT_MS - 500);
	assert_true(took < INTERCEPT_HANDSHAKE_TIMEOUT_MS + INTERCEPT_HEAD_TIMEOUT_MS);
}

static void test_many_at_once(void **state)
{
	(void)state;
	enum { N = 12 };
	struct session *s[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		s[i] = session_new(i % 3 != 2, (enum pre_mode)(i % 4));
		if (!s[i]->tls)
			s[i]->upstream = NULL;
		assert_int_equal(pthread_create(&t[i], NULL, session_run, s[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		if (s[i]->rc < 0)
			fail_msg("session %d: %s", i, s[i]->err.msg);
		assert_injected(s[i]);
		assert_scrubbed(s[i]);
		free(s[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ca_on_disk),
	    cmocka_unit_test(test_new_refuses_bad_rules),
	    cmocka_unit_test(test_wants_only_its_hosts),
	    cmocka_unit_test(test_tls_injects_and_scrubs),
	    cmocka_unit_test(test_tls_with_the_hello_read_before),
	    cmocka_unit_test(test_plain_http),
	    cmocka_unit_test(test_second_request_is_not_rewritten),
	    cmocka_unit_test(test_upstream_that_does_not_verify),
	    cmocka_unit_test(test_client_handshakes_refused),
	    cmocka_unit_test(test_request_for_another_host),
	    cmocka_unit_test(test_many_at_once),
	    cmocka_unit_test(test_stuck_clients_time_out),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
