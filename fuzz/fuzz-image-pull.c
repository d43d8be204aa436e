/*
 * fuzz-image-pull.c - libFuzzer entry for what a pull reads before it
 * speaks (src/image/pull.h): every input is read as a reference and as a
 * registry's WWW-Authenticate value (both are strings: the input up to its
 * first NUL).
 *
 * It checks what must hold for every input:
 *   - each parser returns 0 or its one error (-EINVAL, -EPROTO), with err
 *     set exactly when it fails;
 *   - a reference taken names a registry and a repository, a tag or a
 *     digest (a valid one), and a store name that the store's own rules
 *     take unchanged;
 *   - a challenge taken is Basic or Bearer, a Bearer with a realm, every
 *     value within its buffer and free of control characters.
 *
 * tests/unit/test-image-pull.c replays fuzz/corpus/image-pull through it.
 */
#include "image/pull.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"

static void check_text(const char *s, size_t size)
{
	CHECK(strlen(s) < size);
	for (; *s; s++)
		CHECK((unsigned char)*s >= 0x20 && *s != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	CHECK(text);
	memcpy(text, data, size);
	text[size] = '\0';

	struct image_pull_ref ref;
	struct error err = {0};
	int r = image_pull_ref_parse(text, &ref, &err);
	if (r < 0) {
		CHECK(r == -EINVAL && err.code == EINVAL && err.msg[0]);
	} else {
		CHECK(ref.registry[0] && ref.repo[0] && (ref.tag[0] || ref.digest[0]));
		CHECK(!ref.digest[0] || image_digest_is_valid(ref.digest));
		CHECK(strlen(ref.tag) <= IMAGE_TAG_MAX);
		CHECK(!ref.name[0] == !ref.tag[0]);
		if (ref.name[0]) {
			char norm[IMAGE_REF_MAX];
			CHECK(image_ref_normalize(ref.name, norm, sizeof(norm), NULL) == 0);
			CHECK(strcmp(norm, ref.name) == 0);
		}
	}

	struct image_auth_challenge ch;
	memset(&err, 0, sizeof(err));
	r = image_auth_challenge_parse(text, &ch, &err);
	if (r < 0) {
		CHECK(r == -EPROTO && err.code == EPROTO && err.msg[0]);
	} else {
		CHECK(ch.scheme == IMAGE_AUTH_BASIC || ch.scheme == IMAGE_AUTH_BEARER);
		CHECK(ch.scheme != IMAGE_AUTH_BEARER || ch.realm[0]);
		check_text(ch.realm, sizeof(ch.realm));
		check_text(ch.service, sizeof(ch.service));
		check_text(ch.scope, sizeof(ch.scope));
	}
	free(text);
	return 0;
}
