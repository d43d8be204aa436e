/*
 * fuzz-inject.c - libFuzzer entry for egress/inject.h: a request head as
 * a sandboxed client sends it, rewritten with secrets, and a response
 * stream scrubbed of them.
 *
 * It checks what must hold for every input:
 *   - inject_head_len() answers a length, "more", -EINVAL or -E2BIG; a
 *     length ends in CRLF CRLF, and the head alone gives the same length
 *     while one byte fewer asks for more;
 *   - a head rewritten without pairs is the head less its Connection,
 *     Proxy-Connection, Keep-Alive and Upgrade lines, plus "Connection:
 *     close": byte for byte; with pairs, the request line is the same,
 *     no placeholder of theirs is left, and the result is a head again;
 *     a refusal leaves out as it was;
 *   - the scrubber's output, whatever the split of the stream into
 *     chunks, is the stream with every byte of every occurrence of a
 *     value masked, computed here the slow way; and what it holds back
 *     is a proper prefix of a value, or nothing.
 *
 * tests/unit/test-egress-inject.c includes this file to run the same
 * checks over random inputs, and replays fuzz/corpus/inject/ through it.
 */
#include "egress/inject.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"

#define FUZZ_HOST "api.example.test"
#define FUZZ_P1	  "agentbox-secret-0123456789abcdef0123456789abcdef"
#define FUZZ_P2	  "agentbox-secret-ffffffffffffffffffffffffffffffff"

/* No 'a' in them: a value next to "gentbox-secret-..." makes no placeholder. */
static const struct inject_pair fuzz_head_pairs[] = {
    {FUZZ_P1, "sk-live-0001"},
    {FUZZ_P2, "Token QQQ\tZ"},
};

/* Short values over a small alphabet, that overlap: random input finds them. */
static const struct inject_pair fuzz_scrub_pairs[] = {
    {FUZZ_P1, "abab"},
    {FUZZ_P1, "ba"},
    {FUZZ_P1, "c*c"},
    {FUZZ_P1, "sk-live-0001"},
};

static bool line_is_dropped(const uint8_t *p, size_t n)
{
	static const char *const names[] = {"connection:", "proxy-connection:", "keep-alive:",
					    "upgrade:",	   "accept-encoding:",	"te:"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t k = strlen(names[i]);
		if (n < k)
			continue;
		size_t j = 0;
		while (j < k &&
		       (p[j] | (p[j] >= 'A' && p[j] <= 'Z' ? 0x20 : 0)) == (uint8_t)names[i][j])
			j++;
		if (j == k)
			return true;
	}
	return false;
}

static bool has(const uint8_t *p, size_t n, const char *s)
{
	return memmem(p, n, s, strlen(s)) != NULL;
}

static void check_rewrite(const uint8_t *head, size_t len)
{
	struct buf out = {0};
	CHECK(buf_puts(&out, "before") == 0);
	int r = inject_rewrite(head, len, FUZZ_HOST, NULL, 0, &out);
	CHECK(r == 0 || r == -EINVAL || r == -EACCES || r == -E2BIG || r == -EPERM);
	if (r < 0) {
		CHECK(out.len == 6 && memcmp(out.data, "before", 6) == 0);
	} else {
		/* the slow way: line by line */
		struct buf want = {0};
		buf_puts(&want, "before");
		const uint8_t *eol = memmem(head, len, "\r\n", 2);
		buf_append(&want, head, (size_t)(eol - head) + 2);
		for (size_t at = (size_t)(eol - head) + 2; at < len - 2;) {
			const uint8_t *e = memmem(head + at, len - at, "\r\n", 2);
			size_t n = (size_t)(e - (head + at)) + 2;
			if (!line_is_dropped(head + at, n))
				buf_append(&want, head + at, n);
			at += n;
		}
		buf_puts(&want, "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
		CHECK(want.failed == 0 && want.len == out.len &&
		      memcmp(want.data, out.data, out.len) == 0);
		buf_release(&want);
	}

	buf_reset(&out);
	int r2 = inject_rewrite(head, len, FUZZ_HOST, fuzz_head_pairs, 2, &out);
	CHECK(r2 == r || (r == 0 && r2 == -E2BIG));
	if (r2 == 0) {
		/* a head again, if one longer than INJECT_HEAD_MAX is allowed */
		if (out.len <= INJECT_HEAD_MAX)
			CHECK(inject_head_len((const uint8_t *)out.data, out.len) == (int)out.len);
		else
			CHECK(inject_head_len((const uint8_t *)out.data, out.len) == -E2BIG &&
			      memcmp(out.data + out.len - 4, "\r\n\r\n", 4) == 0);
		const uint8_t *eol = memmem(head, len, "\r\n", 2);
		size_t line = (size_t)(eol - head) + 2;
		CHECK(memcmp(out.data, head, line) == 0);
		/* field values: no placeholder left (a field name may be one: names are kept) */
		for (size_t at = line; at < out.len - 2;) {
			const uint8_t *p = (const uint8_t *)out.data + at;
			size_t n =
			    (size_t)((const uint8_t *)memmem(p, out.len - at, "\r\n", 2) - p);
			const uint8_t *colon = memchr(p, ':', n);
			CHECK(colon);
			size_t v = (size_t)(colon + 1 - p);
			CHECK(!has(p + v, n - v, FUZZ_P1) && !has(p + v, n - v, FUZZ_P2));
			at += n + 2;
		}
	} else {
		CHECK(out.len == 0);
	}
	buf_release(&out);
}

static void check_head(const uint8_t *data, size_t size)
{
	int r = inject_head_len(data, size);
	CHECK(r >= 0 || r == -EINVAL || r == -E2BIG);
	if (r == 0) {
		CHECK(size < INJECT_HEAD_MAX);
		return;
	}
	if (r < 0)
		return;
	size_t n = (size_t)r;
	CHECK(n <= size && n <= INJECT_HEAD_MAX && n >= 4 &&
	      memcmp(data + n - 4, "\r\n\r\n", 4) == 0);
	CHECK(memchr(data, 0, n) == NULL);
	uint8_t *copy = malloc(n);
	CHECK(copy);
	memcpy(copy, data, n);
	CHECK(inject_head_len(copy, n) == r && inject_head_len(copy, n - 1) == 0);
	check_rewrite(copy, n);
	free(copy);
}

/* The stream with every occurrence of every value masked, the slow way. */
static uint8_t *scrub_slow(const uint8_t *data, size_t size, const struct inject_pair *pairs,
			   size_t npairs)
{
	uint8_t *out = malloc(size ? size : 1);
	CHECK(out);
	memcpy(out, data, size);
	for (size_t i = 0; i < size; i++)
		for (size_t k = 0; k < npairs; k++) {
			size_t vn = strlen(pairs[k].value);
			if (vn <= size - i && memcmp(data + i, pairs[k].value, vn) == 0)
				memset(out + i, '*', vn);
		}
	return out;
}

/* Through the scrubber in chunks of 1 + (a byte of the input) % step. */
static void check_scrub_split(const uint8_t *data, size_t size, const uint8_t *want, size_t step)
{
	struct inject_scrub *s = malloc(sizeof(*s));
	CHECK(s);
	CHECK(inject_scrub_init(s, fuzz_scrub_pairs, 4) == 0);
	struct buf out = {0};
	for (size_t at = 0, i = 0; at < size; i++) {
		size_t n = step ? 1 + data[i % size] % step : size;
		if (n > size - at)
			n = size - at;
		size_t before = out.len;
		CHECK(inject_scrub_feed(s, data + at, n, &out) == 0);
		CHECK(out.len >= before && out.len <= at + n && out.len + s->keep >= at + n);
		/* what is held back follows the last newline, within keep bytes */
		CHECK(s->ncarry <= s->keep && !memchr(s->carry, '\n', s->ncarry));
		CHECK(s->ncarry == s->keep || at + n == s->ncarry ||
		      (out.len > 0 && out.data[out.len - 1] == '\n'));
		at += n;
	}
	CHECK(inject_scrub_flush(s, &out) == 0);
	CHECK(out.len == size && (size == 0 || memcmp(out.data, want, size) == 0));
	CHECK(s->ncarry == 0);
	buf_release(&out);
	free(s);
}

static void check_scrub(const uint8_t *data, size_t size)
{
	uint8_t *want = scrub_slow(data, size, fuzz_scrub_pairs, 4);
	check_scrub_split(data, size, want, 0);
	check_scrub_split(data, size, want, 1);
	check_scrub_split(data, size, want, 5);
	check_scrub_split(data, size, want, 64);
	free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_head(data, size);
	check_scrub(data, size);
	return 0;
}
