/*
 * fuzz-peek.c - libFuzzer entry for peek_parse(): the first bytes a
 * sandboxed client sends, as the egress proxy reads them.
 *
 * It checks what must hold for every input:
 *   - the result is PEEK_MORE (only below PEEK_MAX bytes), a decision, or
 *     one of the refusals peek.h documents, and a refusal leaves ret as it
 *     was;
 *   - a decision names a lower-case host name that peek_is_host_name()
 *     admits, a CONNECT has a port and a ClientHello none;
 *   - a decision rests on its first head_len bytes: they alone give the
 *     same decision, and shorter prefixes are still PEEK_MORE;
 *   - peek_is_host_name() of the same bytes as a string never reads past
 *     its end.
 *
 * tests/unit/test-egress-peek.c includes this file to run the same checks
 * over random and truncated inputs in the ordinary (ASan+UBSan) build.
 */
#include "egress/peek.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"

static bool same_decision(const struct peek *a, const struct peek *b)
{
	return a->kind == b->kind && strcmp(a->host, b->host) == 0 && a->port == b->port &&
	       a->head_len == b->head_len;
}

/* The first n bytes alone, in a buffer of their own (so ASan sees n). */
static int parse_prefix(const uint8_t *data, size_t n, struct peek *ret)
{
	uint8_t *copy = malloc(n ? n : 1);
	CHECK(copy);
	memcpy(copy, data, n);
	int r = peek_parse(copy, n, ret);
	free(copy);
	return r;
}

static void check_host_name(const uint8_t *data, size_t size)
{
	size_t n = size < PEEK_HOST_MAX + 8 ? size : PEEK_HOST_MAX + 8;
	char *s = malloc(n + 1);
	CHECK(s);
	memcpy(s, data, n);
	s[n] = '\0';
	if (peek_is_host_name(s)) {
		CHECK(strlen(s) <= PEEK_HOST_MAX && strchr(s, '.') && s[strlen(s) - 1] != '.');
		CHECK(strspn(s,
			     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
		      strlen(s));
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct peek p, untouched;
	memset(&p, 0xa5, sizeof(p));
	memcpy(&untouched, &p, sizeof(p));
	int r = peek_parse(data, size, &p);
	check_host_name(data, size);
	if (r < 0) {
		CHECK(r == -EINVAL || r == -ENOENT || r == -EPROTONOSUPPORT || r == -E2BIG ||
		      r == -EPROTO);
		CHECK(memcmp(&p, &untouched, sizeof(p)) == 0);
		return 0;
	}
	CHECK(r == 0);
	if (p.kind == PEEK_MORE) {
		CHECK(size < PEEK_MAX && p.host[0] == '\0' && p.port == 0 && p.head_len == 0);
		return 0;
	}
	CHECK(p.kind == PEEK_TLS || p.kind == PEEK_HTTP || p.kind == PEEK_CONNECT);
	CHECK(peek_is_host_name(p.host));
	for (const char *c = p.host; *c; c++)
		CHECK(!(*c >= 'A' && *c <= 'Z'));
	CHECK(p.kind != PEEK_TLS || p.port == 0);
	CHECK(p.kind != PEEK_CONNECT || p.port != 0);
	CHECK(p.head_len > 0 && p.head_len <= size && p.head_len <= PEEK_MAX);

	struct peek q;
	CHECK(parse_prefix(data, p.head_len, &q) == 0 && same_decision(&p, &q));
	const size_t shorter[] = {p.head_len - 1, p.head_len / 2, 1};
	for (size_t i = 0; i < sizeof(shorter) / sizeof(shorter[0]); i++) {
		if (shorter[i] >= p.head_len)
			continue;
		CHECK(parse_prefix(data, shorter[i], &q) == 0 && q.kind == PEEK_MORE);
	}
	return 0;
}
