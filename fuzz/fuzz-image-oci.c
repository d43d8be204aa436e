/*
 * fuzz-image-oci.c - libFuzzer entry for the documents of an image
 * (src/image/oci.h): every input is read as an index, a manifest, a
 * config and a docker save's manifest.json.
 *
 * It checks what must hold for every input:
 *   - each parser returns 0 or -EINVAL, -E2BIG, -ENOEXEC (the index), and
 *     leaves err set exactly when it fails;
 *   - what a success gives is within its limits: digests valid, at most
 *     IMAGE_LAYERS_MAX layers, IMAGE_ENV_MAX Env entries and
 *     IMAGE_ARGS_MAX words, each array NULL-terminated, WorkingDir
 *     absolute, every Env entry KEY=...;
 *   - a manifest written back (image_manifest_json()) reads the same.
 *
 * tests/unit/test-image-oci.c replays fuzz/corpus/image-oci through it.
 */
#include "image/oci.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"

static void check_failure(int r, const struct error *err)
{
	CHECK(r == -EINVAL || r == -E2BIG || r == -ENOEXEC || r == -ENOMEM);
	CHECK(err->code == -r && err->msg[0]);
}

static void check_strings(char **v, size_t n, size_t max)
{
	CHECK(n <= max);
	CHECK(n == 0 || v[n] == NULL);
	for (size_t i = 0; i < n; i++)
		CHECK(v[i] && strlen(v[i]) <= IMAGE_STRING_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *json = (const char *)data;
	struct error err = {0};
	struct image_descriptor d;
	char name[IMAGE_REF_MAX];
	int r = image_index_choose(json, size, &d, name, sizeof(name), &err);
	if (r < 0)
		check_failure(r, &err);
	else
		CHECK(image_digest_is_valid(d.digest) && strlen(name) < sizeof(name));

	struct image_manifest m;
	memset(&err, 0, sizeof(err));
	r = image_manifest_parse(json, size, &m, &err);
	if (r < 0) {
		check_failure(r, &err);
	} else {
		CHECK(m.nlayers <= IMAGE_LAYERS_MAX && image_digest_is_valid(m.config.digest));
		char *text;
		size_t len;
		CHECK(image_manifest_json(&m, &text, &len) == 0);
		struct image_manifest again;
		CHECK(image_manifest_parse(text, len, &again, &err) == 0);
		CHECK(again.nlayers == m.nlayers);
		for (size_t i = 0; i < m.nlayers; i++)
			CHECK(strcmp(again.layers[i].digest, m.layers[i].digest) == 0 &&
			      again.layers[i].size == m.layers[i].size);
		free(text);
		image_manifest_release(&again);
		image_manifest_release(&m);
	}

	struct image_config c;
	memset(&err, 0, sizeof(err));
	r = image_config_parse(json, size, &c, &err);
	if (r < 0) {
		check_failure(r, &err);
	} else {
		check_strings(c.env, c.nenv, IMAGE_ENV_MAX);
		check_strings(c.entrypoint, c.nentrypoint, IMAGE_ARGS_MAX);
		check_strings(c.cmd, c.ncmd, IMAGE_ARGS_MAX);
		for (size_t i = 0; i < c.nenv; i++)
			CHECK(strchr(c.env[i], '=') && c.env[i][0] != '=');
		CHECK(!c.working_dir || c.working_dir[0] == '/');
		image_config_release(&c);
	}

	struct image_docker_save ds;
	memset(&err, 0, sizeof(err));
	r = image_docker_save_parse(json, size, &ds, &err);
	if (r < 0) {
		check_failure(r, &err);
	} else {
		CHECK(ds.config && ds.nlayers <= IMAGE_LAYERS_MAX);
		image_docker_save_release(&ds);
	}
	return 0;
}
