/*
 * test-client-tls.c - the client's https side (src/client/endpoint.c,
 * tls.c): URLs into endpoints, and whole requests against a small TLS
 * server in a forked child on a loopback port, with a certificate made
 * here for 127.0.0.1: the server verified, its name checked, and the end
 * of a body that is framed by the connection's close taken only from a
 * close_notify, never from a bare close (a truncation).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "client/http-client.h"

/* ---- URLs -------------------------------------------------------------- */

static void test_url_parse(void **state)
{
	(void)state;
	struct http_endpoint ep;
	struct error err = {0};
	assert_int_equal(http_endpoint_parse_url("https://127.0.0.1:8443", &ep, &err), 0);
	assert_int_equal(ep.transport, HTTP_TCP);
	assert_true(ep.tls);
	assert_string_equal(ep.host, "127.0.0.1");
	assert_string_equal(ep.port, "8443");
	assert_string_equal(ep.authority, "127.0.0.1:8443");
	assert_string_equal(ep.name, "https://127.0.0.1:8443");
	assert_int_equal(http_endpoint_parse_url("https://[::1]/", &ep, &err), 0);
	assert_true(ep.tls);
	assert_string_equal(ep.host, "::1");
	assert_string_equal(ep.port, "443");
	assert_string_equal(ep.authority, "[::1]:443");
	assert_int_equal(http_endpoint_parse_url("HTTP://localhost", &ep, &err), 0);
	assert_false(ep.tls);
	assert_string_equal(ep.port, "80");
	assert_string_equal(ep.authority, "localhost:80");
	assert_int_equal(http_endpoint_parse_url("http://[::1]:7070", &ep, &err), 0);
	assert_string_equal(ep.port, "7070");
	assert_int_equal(http_endpoint_parse_url("unix:/run/agentbox/agentbox.sock", &ep, &err), 0);
	assert_int_equal(ep.transport, HTTP_UNIX);
	assert_false(ep.tls);
	assert_string_equal(ep.path, "/run/agentbox/agentbox.sock");
	/* the plain HOST:PORT form gets its Host header too */
	assert_int_equal(http_endpoint_parse("[::1]:80", &ep, &err), 0);
	assert_false(ep.tls);
	assert_string_equal(ep.authority, "[::1]:80");

	const char *bad[] = {"",
			     "127.0.0.1:8443",
			     "/run/x.sock",
			     "ftp://127.0.0.1:21",
			     "https://",
			     "https:///",
			     "https://127.0.0.1:8443/v1",
			     "https://127.0.0.1:8443//",
			     "https://127.0.0.1:8443?x=1",
			     "https://127.0.0.1:8443#f",
			     "https://user:pw@127.0.0.1:8443",
			     "https://example.com:8443",
			     "https://127.0.0.1:0",
			     "https://127.0.0.1:65536",
			     "https://127.0.0.1:",
			     "https://::1:443",
			     "https://[::1",
			     "https://127.0.0.1:8443\r\nX: y",
			     "unix:relative.sock",
			     "unix:",
			     "https:/127.0.0.1:8443"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct error){0};
		if (http_endpoint_parse_url(bad[i], &ep, &err) >= 0)
			fail_msg("'%s' was accepted", bad[i]);
		assert_true(err.msg[0] != '\0');
	}
}

/* ---- a certificate for 127.0.0.1, and a server ------------------------- */

static char tmpdir[64];
static char ca_path[128];    /* the server's self-signed certificate, as a CA file */
static char other_path[128]; /* another self-signed certificate: the wrong CA */
static EVP_PKEY *key;
static X509 *cert;

/* A self-signed certificate for san ("IP:127.0.0.1"), written as PEM to path. */
static X509 *make_cert(EVP_PKEY *k, const char *san, const char *path)
{
	X509 *x = X509_new();
	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"test", -1, -1,
				   0);
	X509_set_issuer_name(x, name);
	X509_set_pubkey(x, k);
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, san);
	assert_non_null(ext);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	assert_true(X509_sign(x, k, EVP_sha256()) > 0);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	return x;
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-client-tls.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", tmpdir);
	snprintf(other_path, sizeof(other_path), "%s/other.pem", tmpdir);
	key = EVP_EC_gen("P-256");
	EVP_PKEY *other = EVP_EC_gen("P-256");
	if (!key || !other)
		return -1;
	cert = make_cert(key, "IP:127.0.0.1", ca_path);
	X509_free(make_cert(other, "IP:127.0.0.1", other_path));
	EVP_PKEY_free(other);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(ca_path);
	unlink(other_path);
	rmdir(tmpdir);
	X509_free(cert);
	EVP_PKEY_free(key);
	return 0;
}

enum ending {
	END_CLOSE_NOTIFY, /* SSL_shutdown(), then close */
	END_BARE_CLOSE,	  /* close the socket: no close_notify */
};

/*
 * Serve one connection on lfd in a child: the TLS handshake, the request's
 * head read, response written, then the ending. The child's pid.
 */
static pid_t serve_once(int lfd, const char *response, enum ending ending)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid > 0)
		return pid;
	signal(SIGPIPE, SIG_IGN); /* a client that gives up is no failure of ours */
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, key) != 1)
		_exit(2);
	int c = accept(lfd, NULL, NULL);
	SSL *ssl = c >= 0 ? SSL_new(ctx) : NULL;
	if (!ssl || SSL_set_fd(ssl, c) != 1 || SSL_accept(ssl) != 1)
		_exit(3); /* a client that refused us: nothing more to do */
	char buf[4096];
	size_t len = 0;
	while (len < sizeof(buf) - 1) {
		int n = SSL_read(ssl, buf + len, (int)(sizeof(buf) - 1 - len));
		if (n <= 0)
			_exit(4);
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	if (SSL_write(ssl, response, (int)strlen(response)) != (int)strlen(response))
		_exit(5);
	if (ending == END_CLOSE_NOTIFY)
		SSL_shutdown(ssl);
	/* a FIN, not a reset: what is unread is drained until the client closes */
	shutdown(c, SHUT_WR);
	while (read(c, buf, sizeof(buf)) > 0)
		;
	close(c);
	_exit(0);
}

/* A listening loopback socket; its port into port. */
static int listen_loopback(char port[8])
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(in);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
	snprintf(port, 8, "%u", ntohs(in.sin_port));
	return fd;
}

static const struct http_request get_root = {.method = "GET", .target = "/"};

struct outcome {
	int r;
	struct error err;
	struct http_response res;
};

/* One GET / to https://host:PORT/ trusting cafile, against one server. */
static void request(const char *host, const char *cafile, const char *response, enum ending ending,
		    struct outcome *out)
{
	char port[8], url[128];
	int lfd = listen_loopback(port);
	pid_t pid = serve_once(lfd, response, ending);
	close(lfd);
	snprintf(url, sizeof(url), "https://%s:%s", host, port);
	struct http_endpoint ep;
	*out = (struct outcome){0};
	assert_int_equal(http_endpoint_parse_url(url, &ep, &out->err), 0);
	struct http_options opt = {
	    .connect_timeout_ms = 5000, .read_timeout_ms = 5000, .peer = "srv", .cacert = cafile};
	out->r = http_request(&ep, &get_root, &opt, &out->res, &out->err);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_verified_request(void **state)
{
	(void)state;
	struct outcome o;
	request("127.0.0.1", ca_path, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		END_CLOSE_NOTIFY, &o);
	assert_int_equal(o.r, 0);
	assert_int_equal(o.res.status, 200);
	assert_string_equal(o.res.body, "hello");
	http_response_release(&o.res);
	/* a length-framed body is whole before the close: a bare one is fine */
	request("127.0.0.1", ca_path, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		END_BARE_CLOSE, &o);
	assert_int_equal(o.r, 0);
	assert_string_equal(o.res.body, "hello");
	http_response_release(&o.res);
}

static void test_close_framed_body_needs_close_notify(void **state)
{
	(void)state;
	struct outcome o;
	const char *resp = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it";
	request("127.0.0.1", ca_path, resp, END_CLOSE_NOTIFY, &o);
	assert_int_equal(o.r, 0);
	assert_string_equal(o.res.body, "all of it");
	http_response_release(&o.res);
	/* the same bytes, then a bare close: an attacker's cut, not the end */
	request("127.0.0.1", ca_path, resp, END_BARE_CLOSE, &o);
	assert_int_equal(o.r, -ECONNRESET);
	if (!strstr(o.err.msg, "close_notify"))
		fail_msg("%s", o.err.msg);
	/* and a close_notify inside a length-framed body is a short body */
	request("127.0.0.1", ca_path, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort",
		END_CLOSE_NOTIFY, &o);
	assert_int_equal(o.r, -ECONNRESET);
	assert_non_null(strstr(o.err.msg, "closed the connection inside the body"));
}

static void test_server_not_verified(void **state)
{
	(void)state;
	struct outcome o;
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	/* a CA that did not sign it */
	request("127.0.0.1", other_path, resp, END_CLOSE_NOTIFY, &o);
	assert_int_equal(o.r, -EKEYREJECTED);
	assert_non_null(strstr(o.err.msg, "did not verify"));
	/* the system's store does not know it either */
	request("127.0.0.1", NULL, resp, END_CLOSE_NOTIFY, &o);
	assert_int_equal(o.r, -EKEYREJECTED);
	/* the right CA, but not the name we asked for: it is 127.0.0.1's */
	request("localhost", ca_path, resp, END_CLOSE_NOTIFY, &o);
	assert_int_equal(o.r, -EKEYREJECTED);
	assert_non_null(strstr(o.err.msg, "hostname mismatch"));
	/* a CA file that is not one */
	char port[8];
	int lfd = listen_loopback(port);
	char url[64];
	snprintf(url, sizeof(url), "https://127.0.0.1:%s", port);
	struct http_endpoint ep;
	struct error err = {0};
	struct http_response res;
	assert_int_equal(http_endpoint_parse_url(url, &ep, &err), 0);
	struct http_options opt = {.connect_timeout_ms = 2000, .cacert = "/proc/self/status"};
	assert_int_equal(http_request(&ep, &get_root, &opt, &res, &err), -EINVAL);
	opt.cacert = "/nonexistent/ca.pem";
	assert_int_equal(http_request(&ep, &get_root, &opt, &res, &err), -ENOENT);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url_parse),
	    cmocka_unit_test(test_verified_request),
	    cmocka_unit_test(test_close_framed_body_needs_close_notify),
	    cmocka_unit_test(test_server_not_verified),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
