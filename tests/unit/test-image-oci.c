/*
 * test-image-oci.c - an image's documents read strictly (image/oci.h):
 * digests, references, the choice of linux/amd64 in an index, manifests
 * and their limits, the config as the runtime takes it, docker save's
 * manifest.json.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "image/oci.h"

/* LLVMFuzzerTestOneInput() and its invariants, for the corpus below */
#include "corpus-replay.h"
#include "../../fuzz/fuzz-image-oci.c"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"

static void test_digests(void **state)
{
	(void)state;
	assert_true(image_digest_is_valid(D1));
	assert_false(image_digest_is_valid("sha256:11"));
	assert_false(image_digest_is_valid(
	    "sha512:1111111111111111111111111111111111111111111111111111111111111111"));
	assert_false(image_digest_is_valid(
	    "sha256:111111111111111111111111111111111111111111111111111111111111111A"));
	assert_false(image_digest_is_valid(NULL));
	assert_string_equal(image_digest_hex(D1), D1 + 7);
}

static void norm_ok(const char *in, const char *want)
{
	char out[IMAGE_REF_MAX];
	struct error err = {0};
	if (image_ref_normalize(in, out, sizeof(out), &err) < 0)
		fail_msg("%s: %s", in, err.msg);
	assert_string_equal(out, want);
}

static void norm_bad(const char *in)
{
	char out[IMAGE_REF_MAX];
	struct error err = {0};
	if (image_ref_normalize(in, out, sizeof(out), &err) != -EINVAL)
		fail_msg("'%s' was taken", in);
}

static void test_refs(void **state)
{
	(void)state;
	norm_ok("debian", "debian:latest");
	norm_ok("debian:12", "debian:12");
	norm_ok("library/python:3.12-slim", "library/python:3.12-slim");
	norm_ok("localhost:5000/a/b", "localhost:5000/a/b:latest");
	norm_ok("localhost:5000/a/b:V1.0", "localhost:5000/a/b:V1.0");
	norm_bad("");
	norm_bad("Debian");
	norm_bad("/abs");
	norm_bad("a//b");
	norm_bad("a/");
	norm_bad("a:");
	norm_bad("a:b:c/d");
	norm_bad("a:t@g");
	norm_bad("a b");
	norm_bad("host:port/x");
	char long_ref[IMAGE_REF_MAX + 8];
	memset(long_ref, 'a', sizeof(long_ref) - 1);
	long_ref[sizeof(long_ref) - 1] = '\0';
	norm_bad(long_ref);
}

#define ENTRY(d, os, arch, name)                                                                   \
	"{\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST "\",\"digest\":\"" d "\",\"size\":10"            \
	",\"platform\":{\"os\":\"" os "\",\"architecture\":\"" arch "\"}"                          \
	",\"annotations\":{\"" IMAGE_ANN_REF_NAME "\":\"" name "\"}}"

static int choose(const char *json, struct image_descriptor *d, char *name, struct error *err)
{
	return image_index_choose(json, strlen(json), d, name, IMAGE_REF_MAX, err);
}

static void test_index_choice(void **state)
{
	(void)state;
	struct image_descriptor d;
	char name[IMAGE_REF_MAX];
	struct error err = {0};
	assert_int_equal(choose("{\"manifests\":[" ENTRY(D1, "linux", "arm64", "a") "," ENTRY(
				    D2, "linux", "amd64", "b") "]}",
				&d, name, &err),
			 0);
	assert_string_equal(d.digest, D2);
	assert_int_equal(d.size, 10);
	assert_string_equal(name, "b");
	/* none names a platform: the first */
	assert_int_equal(choose("{\"manifests\":[{\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST
				"\",\"digest\":\"" D1 "\",\"size\":3}]}",
				&d, name, &err),
			 0);
	assert_string_equal(d.digest, D1);
	assert_string_equal(name, "");
	/* only others */
	assert_int_equal(choose("{\"manifests\":[" ENTRY(D1, "linux", "arm64", "a") "," ENTRY(
				    D2, "windows", "amd64", "b") "]}",
				&d, name, &err),
			 -ENOEXEC);
	assert_non_null(strstr(err.msg, "linux/arm64, windows/amd64"));
	/* malformed */
	assert_int_equal(choose("{\"manifests\":[]}", &d, name, &err), -EINVAL);
	assert_int_equal(choose("[1]", &d, name, &err), -EINVAL);
	assert_int_equal(choose("{\"manifests\":[{\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST
				"\",\"digest\":\"sha256:12\",\"size\":3}]}",
				&d, name, &err),
			 -EINVAL);
	assert_int_equal(choose("{\"manifests\":[{\"mediaType\":\"text/plain\",\"digest\":\"" D1
				"\",\"size\":3}]}",
				&d, name, &err),
			 -EINVAL);
	/* a duplicate member is refused, not read one of two ways */
	assert_int_equal(choose("{\"manifests\":[],\"manifests\":[]}", &d, name, &err), -EINVAL);
}

static void test_manifest(void **state)
{
	(void)state;
	struct image_manifest m;
	struct error err = {0};
	const char *ok =
	    "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"" IMAGE_MT_OCI_CONFIG
	    "\",\"digest\":\"" D1 "\",\"size\":5},\"layers\":[{\"mediaType\":\"" IMAGE_MT_OCI_LAYER
	    "+gzip\",\"digest\":\"" D2 "\",\"size\":7}]}";
	assert_int_equal(image_manifest_parse(ok, strlen(ok), &m, &err), 0);
	assert_string_equal(m.config.digest, D1);
	assert_int_equal(m.nlayers, 1);
	assert_int_equal(m.layers[0].size, 7);
	/* written back, then read again */
	char *text;
	size_t len;
	assert_int_equal(image_manifest_json(&m, &text, &len), 0);
	image_manifest_release(&m);
	assert_int_equal(image_manifest_parse(text, len, &m, &err), 0);
	assert_string_equal(m.layers[0].digest, D2);
	free(text);
	image_manifest_release(&m);

	const char *v1 = "{\"schemaVersion\":1}";
	assert_int_equal(image_manifest_parse(v1, strlen(v1), &m, &err), -EINVAL);
	/* past IMAGE_LAYERS_MAX */
	char *big = malloc(64 * 1024);
	int n = snprintf(big, 64 * 1024,
			 "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1
			 "\",\"size\":1},\"layers\":[");
	for (int i = 0; i <= IMAGE_LAYERS_MAX; i++)
		n += snprintf(big + n, (size_t)(64 * 1024 - n),
			      "%s{\"mediaType\":\"x\",\"digest\":\"" D2 "\",\"size\":1}",
			      i ? "," : "");
	snprintf(big + n, (size_t)(64 * 1024 - n), "]}");
	assert_int_equal(image_manifest_parse(big, strlen(big), &m, &err), -E2BIG);
	assert_int_equal(image_manifest_parse(big, IMAGE_MANIFEST_MAX + 1, &m, &err), -E2BIG);
	free(big);
}

static void test_config(void **state)
{
	(void)state;
	struct image_config c;
	struct error err = {0};
	const char *ok =
	    "{\"os\":\"linux\",\"architecture\":\"amd64\",\"created\":"
	    "\"2024-05-01T12:00:00.5Z\",\"config\":{\"Env\":[\"A=1\",\"B=\"],"
	    "\"Entrypoint\":null,\"Cmd\":[\"python3\"],\"WorkingDir\":\"\","
	    "\"User\":\"app\",\"Labels\":{\"x\":\"y\"}},\"rootfs\":{\"diff_ids\":[\"" D1
	    "\"]},\"history\":[]}";
	assert_int_equal(image_config_parse(ok, strlen(ok), &c, &err), 0);
	assert_int_equal(c.nenv, 2);
	assert_string_equal(c.env[1], "B=");
	assert_null(c.env[2]);
	assert_int_equal(c.nentrypoint, 0);
	assert_null(c.entrypoint);
	assert_int_equal(c.ncmd, 1);
	assert_null(c.working_dir); /* "" is none */
	assert_string_equal(c.user, "app");
	assert_string_equal(c.os, "linux");
	assert_int_equal(c.created_ms, 1714564800500LL);
	assert_int_equal(c.ndiff_ids, 1);
	image_config_release(&c);

	const char *bad[] = {
	    "{\"config\":{\"Env\":[\"NOEQUALS\"]}}",
	    "{\"config\":{\"Env\":[\"=x\"]}}",
	    "{\"config\":{\"Env\":\"A=1\"}}",
	    "{\"config\":{\"WorkingDir\":\"rel\"}}",
	    "{\"config\":{\"Cmd\":[1]}}",
	    "{\"config\":{\"User\":5}}",
	    "{\"config\":{\"Cmd\":[\"a\\u0000b\"]}}",
	    "{\"config\":[]}",
	    "[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (image_config_parse(bad[i], strlen(bad[i]), &c, &err) != -EINVAL)
			fail_msg("taken: %s", bad[i]);
	/* past IMAGE_ENV_MAX */
	char *big = malloc(32 * 1024);
	int n = snprintf(big, 32 * 1024, "{\"config\":{\"Env\":[");
	for (int i = 0; i <= IMAGE_ENV_MAX; i++)
		n += snprintf(big + n, (size_t)(32 * 1024 - n), "%s\"A=1\"", i ? "," : "");
	snprintf(big + n, (size_t)(32 * 1024 - n), "]}}");
	assert_int_equal(image_config_parse(big, strlen(big), &c, &err), -E2BIG);
	free(big);
}

static void test_docker_save_manifest(void **state)
{
	(void)state;
	struct image_docker_save d;
	struct error err = {0};
	const char *ok = "[{\"Config\":\"abc.json\",\"RepoTags\":[\"x/y:1\",\"x/y:2\"],"
			 "\"Layers\":[\"1/layer.tar\",\"2/layer.tar\"]},{\"Config\":\"other\"}]";
	assert_int_equal(image_docker_save_parse(ok, strlen(ok), &d, &err), 0);
	assert_string_equal(d.config, "abc.json");
	assert_string_equal(d.name, "x/y:1");
	assert_int_equal(d.nlayers, 2);
	assert_string_equal(d.layers[1], "2/layer.tar");
	image_docker_save_release(&d);
	const char *bad = "[{\"Layers\":[]}]";
	assert_int_equal(image_docker_save_parse(bad, strlen(bad), &d, &err), -EINVAL);
}

/* fuzz/corpus/image-oci/: every input through the fuzz target's checks */
static void test_replay_corpus(void **state)
{
	(void)state;
	size_t n = corpus_replay(FUZZ_CORPUS_DIR, IMAGE_MANIFEST_MAX, LLVMFuzzerTestOneInput);
	if (n < 5)
		fail_msg("only %zu inputs in %s: the corpus went missing", n, FUZZ_CORPUS_DIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_digests),	  cmocka_unit_test(test_refs),
	    cmocka_unit_test(test_index_choice),  cmocka_unit_test(test_manifest),
	    cmocka_unit_test(test_config),	  cmocka_unit_test(test_docker_save_manifest),
	    cmocka_unit_test(test_replay_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
