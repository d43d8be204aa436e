/*
 * test-image-pull.c - what a pull reads before it speaks (image/pull.h):
 * references (which registry, repository, tag, digest, and the store's
 * name), a registry's WWW-Authenticate challenge, and --registry-config
 * (its checks, and that its errors never show a credential); and the
 * fuzz corpus replayed (fuzz/fuzz-image-pull.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "image/pull.h"

/* LLVMFuzzerTestOneInput() and its invariants, for the corpus below */
#include "corpus-replay.h"
#include "../../fuzz/fuzz-image-pull.c"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"

static void ref_ok(const char *in, const char *registry, const char *repo, const char *tag,
		   const char *digest, const char *name)
{
	struct image_pull_ref r;
	struct error err = {0};
	if (image_pull_ref_parse(in, &r, &err) < 0)
		fail_msg("%s: %s", in, err.msg);
	assert_string_equal(r.registry, registry);
	assert_string_equal(r.repo, repo);
	assert_string_equal(r.tag, tag);
	assert_string_equal(r.digest, digest);
	assert_string_equal(r.name, name);
}

static void ref_bad(const char *in)
{
	struct image_pull_ref r;
	struct error err = {0};
	if (image_pull_ref_parse(in, &r, &err) != -EINVAL)
		fail_msg("'%s' was taken", in ? in : "(null)");
	assert_true(err.msg[0] != '\0');
}

static void test_refs(void **state)
{
	(void)state;
	/* Docker Hub, its library/ and its names as usually written */
	ref_ok("debian", DOCKER_HUB_REGISTRY, "library/debian", "latest", "", "debian:latest");
	ref_ok("debian:12", DOCKER_HUB_REGISTRY, "library/debian", "12", "", "debian:12");
	ref_ok("python:3.12-slim", DOCKER_HUB_REGISTRY, "library/python", "3.12-slim", "",
	       "python:3.12-slim");
	ref_ok("team/app:v1", DOCKER_HUB_REGISTRY, "team/app", "v1", "", "team/app:v1");
	ref_ok("docker.io/library/debian:12", DOCKER_HUB_REGISTRY, "library/debian", "12", "",
	       "debian:12");
	ref_ok("docker.io/debian", DOCKER_HUB_REGISTRY, "library/debian", "latest", "",
	       "debian:latest");
	ref_ok("index.docker.io/team/app", DOCKER_HUB_REGISTRY, "team/app", "latest", "",
	       "team/app:latest");
	/* a registry: a '.', a ':' or localhost */
	ref_ok("127.0.0.1:5000/it/basic:1", "127.0.0.1:5000", "it/basic", "1", "",
	       "127.0.0.1:5000/it/basic:1");
	ref_ok("localhost/app", "localhost", "app", "latest", "", "localhost/app:latest");
	ref_ok("ghcr.io/org/tool:2.0", "ghcr.io", "org/tool", "2.0", "", "ghcr.io/org/tool:2.0");
	ref_ok("registry.example:443/a/b/c:x", "registry.example:443", "a/b/c", "x", "",
	       "registry.example:443/a/b/c:x");
	/* digests: alone (unnamed), and with a tag (named by it, fetched by digest) */
	ref_ok("debian@" D1, DOCKER_HUB_REGISTRY, "library/debian", "", D1, "");
	ref_ok("127.0.0.1:5000/app:1@" D1, "127.0.0.1:5000", "app", "1", D1,
	       "127.0.0.1:5000/app:1");
	/* refused */
	ref_bad(NULL);
	ref_bad("");
	ref_bad("Debian");	     /* names are lowercase */
	ref_bad("debian:");	     /* an empty tag */
	ref_bad("debian@sha256:11"); /* a short digest */
	ref_bad("debian@sha512:1111111111111111111111111111111111111111111111111111111111111111");
	ref_bad("Registry.example/app");       /* a host is lowercase */
	ref_bad("127.0.0.1:99999/app");	       /* a port is 1..65535 */
	ref_bad("127.0.0.1:0/app");	       /* a port is 1..65535 */
	ref_bad("127.0.0.1:5x/app");	       /* a port is digits */
	ref_bad("[::1]:5000/app");	       /* IPv6 is not taken */
	ref_bad("host.example//app");	       /* an empty part */
	ref_bad("host.example/app/");	       /* an empty part */
	ref_bad("debian:a b");		       /* a tag's characters */
	ref_bad("debian:12;rm");	       /* a tag's characters */
	ref_bad("host.example/app:x@" D1 "x"); /* a digest then more */
	char long_ref[PULL_REF_MAX + 8];
	memset(long_ref, 'a', sizeof(long_ref) - 1);
	long_ref[sizeof(long_ref) - 1] = '\0';
	ref_bad(long_ref);
	char long_tag[IMAGE_TAG_MAX + 16] = "app:";
	memset(long_tag + 4, 't', IMAGE_TAG_MAX + 1);
	long_tag[4 + IMAGE_TAG_MAX + 1] = '\0';
	ref_bad(long_tag);
}

static void challenge_ok(const char *in, enum image_auth_scheme scheme, const char *realm,
			 const char *service, const char *scope)
{
	struct image_auth_challenge c;
	struct error err = {0};
	if (image_auth_challenge_parse(in, &c, &err) < 0)
		fail_msg("%s: %s", in, err.msg);
	assert_int_equal(c.scheme, scheme);
	assert_string_equal(c.realm, realm);
	assert_string_equal(c.service, service);
	assert_string_equal(c.scope, scope);
}

static void challenge_bad(const char *in)
{
	struct image_auth_challenge c;
	struct error err = {0};
	if (image_auth_challenge_parse(in, &c, &err) != -EPROTO)
		fail_msg("'%s' was taken", in ? in : "(null)");
	assert_true(err.msg[0] != '\0');
}

static void test_challenges(void **state)
{
	(void)state;
	/* Docker Hub's, and distribution's */
	challenge_ok("Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
		     "scope=\"repository:library/debian:pull\"",
		     IMAGE_AUTH_BEARER, "https://auth.docker.io/token", "registry.docker.io",
		     "repository:library/debian:pull");
	challenge_ok("Basic realm=\"basic-realm\"", IMAGE_AUTH_BASIC, "basic-realm", "", "");
	challenge_ok("basic", IMAGE_AUTH_BASIC, "", "", "");
	/* spaces, token values, unknown parameters, escapes, any order */
	challenge_ok("  bearer  scope=\"a:b:pull\" , error=\"insufficient_scope\", "
		     "realm=https://t.example/token,service=reg",
		     IMAGE_AUTH_BEARER, "https://t.example/token", "reg", "a:b:pull");
	challenge_ok("Bearer realm=\"https://t/x?a=\\\"b\\\"\"", IMAGE_AUTH_BEARER,
		     "https://t/x?a=\"b\"", "", "");
	/* refused */
	challenge_bad(NULL);
	challenge_bad("");
	challenge_bad("Digest realm=\"x\"");
	challenge_bad("Negotiate");
	challenge_bad("Bearer service=\"reg\"");	   /* no realm */
	challenge_bad("Bearer realm=\"https://t");	   /* the quote does not end */
	challenge_bad("Bearer realm=\"a\nb\"");		   /* a control character */
	challenge_bad("Bearer realm");			   /* no '=' */
	challenge_bad("Bearer realm=");			   /* no value */
	challenge_bad("Bearer realm=\"x\" service=\"y\""); /* no ',' */
	char big[PULL_REALM_MAX + 64];
	int n = snprintf(big, sizeof(big), "Bearer realm=\"");
	memset(big + n, 'r', PULL_REALM_MAX);
	snprintf(big + n + PULL_REALM_MAX, sizeof(big) - (size_t)n - PULL_REALM_MAX, "\"");
	challenge_bad(big);
}

/* A --registry-config of text: its load's result, err into *err. */
static int load_text(const char *text, struct error *err)
{
	char path[] = "/tmp/test-image-pull-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	struct image_registries *regs = NULL;
	int r = image_registries_load(path, &regs, err);
	if (r == 0)
		assert_int_equal(image_registries_count(regs), 1);
	image_registries_free(regs);
	unlink(path);
	return r;
}

static void config_bad(const char *text, const char *says)
{
	struct error err = {0};
	if (load_text(text, &err) >= 0)
		fail_msg("taken: %s", text);
	if (!strstr(err.msg, says))
		fail_msg("'%s' does not say '%s'", err.msg, says);
	/* a credential's value is never in an error */
	assert_null(strstr(err.msg, "s3cret"));
}

static void test_config(void **state)
{
	(void)state;
	struct error err = {0};
	struct image_registries *regs = NULL;
	assert_int_equal(image_registries_load(NULL, &regs, &err), 0);
	assert_int_equal(image_registries_count(regs), 0);
	image_registries_free(regs);
	assert_int_equal(load_text("{\"registries\": {\"127.0.0.1:5000\": {\"username\": \"u\", "
				   "\"password\": \"s3cret\", \"insecure_http\": true}}}",
				   &err),
			 0);
	assert_int_equal(load_text("{\"registries\": {\"localhost\": {}}}", &err), 0);
	config_bad("{\"registries\": {\"r.example\": {\"username\": \"u\"}}}", "together");
	config_bad("{\"registries\": {\"r.example\": {\"password\": \"s3cret\"}}}", "together");
	config_bad("{\"registries\": {\"r.example\": {\"username\": \"a:b\", \"password\": "
		   "\"s3cret\"}}}",
		   "':'");
	config_bad("{\"registries\": {\"r.example\": {\"user\": \"s3cret\"}}}", "unknown member");
	config_bad("{\"registries\": {\"r.example\": {\"insecure_http\": \"yes\"}}}",
		   "insecure_http");
	config_bad("{\"registries\": {\"r.example\": {\"cacert\": \"ca.pem\"}}}", "absolute");
	config_bad("{\"registries\": {\"r.example\": {\"cacert\": \"/nonexistent/ca.pem\"}}}",
		   "/nonexistent/ca.pem");
	config_bad("{\"registries\": {\"r.example\": {\"cacert\": \"/etc/passwd\"}}}",
		   "no PEM certificate");
	config_bad("{\"registries\": {\"Bad Host\": {}}}", "not a registry");
	config_bad("{\"registries\": {\"debian\": {}}}", "not a registry");
	config_bad("{\"registries\": {}, \"more\": 1}", "nothing else");
	config_bad("[]", "nothing else");
	config_bad("{\"registries\": {\"r.example\": {\"password\": \"s3cret\",", "not valid JSON");
	config_bad("{\"registries\": {\"r.example\": {\"username\": \"s3cret\", \"username\": "
		   "\"s3cret\"}}}",
		   "not valid JSON");
}

static void test_corpus(void **state)
{
	(void)state;
	size_t n = corpus_replay(FUZZ_CORPUS_DIR, 2048, LLVMFuzzerTestOneInput);
	if (n < 10)
		fail_msg("only %zu inputs in %s: the corpus went missing", n, FUZZ_CORPUS_DIR);
	/* and the unit tests' own cases, through the same checks */
	const char *more[] = {"python:3.12-slim", "Bearer realm=x,service=y", "", "@", ":"};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		LLVMFuzzerTestOneInput((const uint8_t *)more[i], strlen(more[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refs),
	    cmocka_unit_test(test_challenges),
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
