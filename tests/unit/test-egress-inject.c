/*
 * test-egress-inject.c - a secret into a request head and out of the
 * response (egress/inject.h): where a head ends and what is refused on
 * the way, the rewrite (placeholders in values only, the Connection
 * fields, the host the request names), and the scrubber across every
 * split of a stream; random and mutated inputs go through the fuzz
 * target's checks, and fuzz/corpus/inject/ is replayed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/inject.h"

/* LLVMFuzzerTestOneInput() and its invariants */
#include "corpus-replay.h"
#include "../../fuzz/fuzz-inject.c"

#define HOST "api.example.test"
#define PH1  "agentbox-secret-00000000000000000000000000000001"
#define PH2  "agentbox-secret-00000000000000000000000000000002"
#define VAL1 "sk-live-ONE"
#define VAL2 "the second value, longer"

static const struct inject_pair pairs[] = {{PH1, VAL1}, {PH2, VAL2}};

static int head_len(const char *s)
{
	return inject_head_len((const uint8_t *)s, strlen(s));
}

/* Rewrite s (a whole head) into *ret, a C string to free. The result. */
static int rewrite(const char *s, const struct inject_pair *p, size_t n, char **ret)
{
	struct buf out = {0};
	int r = inject_rewrite((const uint8_t *)s, strlen(s), HOST, p, n, &out);
	if (r == 0)
		assert_int_equal(buf_steal(&out, ret, NULL), 0);
	else
		assert_true(out.len == 0);
	buf_release(&out);
	return r;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* ---- where a head ends ---------------------------------------------------- */

static void test_head_complete_and_every_prefix_asks_for_more(void **state)
{
	(void)state;
	const char *h = "GET /v1/models?x=1 HTTP/1.1\r\nHost: " HOST "\r\n"
			"Authorization: Bearer " PH1 "\r\nX-Empty:\r\n\r\n";
	size_t n = strlen(h);
	assert_int_equal(head_len(h), (int)n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(inject_head_len((const uint8_t *)h, i), 0);
	/* what follows is not read */
	char more[512];
	snprintf(more, sizeof(more), "%s{\"body\": \x01\x02", h);
	assert_int_equal(head_len(more), (int)n);
	assert_int_equal(head_len("POST / HTTP/1.0\r\n\r\n"), 19);
	assert_int_equal(head_len("OPTIONS * HTTP/1.1\r\nHost: a.b\r\n\r\n"), 33);
}

static void test_head_value_bytes(void **state)
{
	(void)state;
	/* HTAB, obs-text (UTF-8), empty and space-only values: taken */
	assert_true(
	    head_len("GET / HTTP/1.1\r\nA:\tx\t\r\nB: \xc3\xa9t\xc3\xa9\r\nC:\r\nD:  \r\n\r\n") >
	    0);
	static const char *const bad[] = {
	    "GET / HTTP/1.1\nHost: a.b\n\n",		/* bare LF */
	    "GET / HTTP/1.1\r\nHost: a.b\n\r\n",	/* bare LF in a header line */
	    "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",	/* bare CR */
	    "GET / HTTP/1.1\r\nHost: a.b\r\n\n",	/* bare LF for the blank line */
	    "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",	/* obs-fold */
	    "GET / HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n",	/* obs-fold, HTAB */
	    "GET / HTTP/1.1\r\nA : b\r\n\r\n",		/* space before the colon */
	    "GET / HTTP/1.1\r\n: b\r\n\r\n",		/* no name */
	    "GET / HTTP/1.1\r\nA b\r\n\r\n",		/* no colon */
	    "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n",	/* DEL */
	    "GET / HTTP/1.1\r\nA: b\x1b[0m\r\n\r\n",	/* ESC */
	    "GET / HTTP/2.0\r\n\r\n",			/* another version */
	    "GET / HTTP/1.2\r\n\r\n",			/* another version */
	    "GET / http/1.1\r\n\r\n",			/* the version is case-sensitive */
	    "GET / HTTP/1.1 \r\n\r\n",			/* after the version */
	    "GET  / HTTP/1.1\r\n\r\n",			/* two spaces */
	    " GET / HTTP/1.1\r\n\r\n",			/* no method */
	    "\r\nGET / HTTP/1.1\r\n\r\n",		/* an empty line first */
	    "GET /a b HTTP/1.1\r\n\r\n",		/* a space in the target */
	    "G(T / HTTP/1.1\r\n\r\n",			/* not a token */
	    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",		/* HTTP/2's preface */
	    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03", /* a TLS record */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (head_len(bad[i]) != -EINVAL)
			fail_msg("case %zu: %d", i, head_len(bad[i]));
	}
	/* NUL, anywhere */
	static const char nul_value[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";
	static const char nul_name[] = "GET / HTTP/1.1\r\nA\0: b\r\n\r\n";
	static const char nul_target[] = "GET /\0 HTTP/1.1\r\n\r\n";
	assert_int_equal(inject_head_len((const uint8_t *)nul_value, sizeof(nul_value) - 1),
			 -EINVAL);
	assert_int_equal(inject_head_len((const uint8_t *)nul_name, sizeof(nul_name) - 1), -EINVAL);
	assert_int_equal(inject_head_len((const uint8_t *)nul_target, sizeof(nul_target) - 1),
			 -EINVAL);
	/* refused as soon as the byte that shows it is in */
	assert_int_equal(inject_head_len((const uint8_t *)"G\0", 2), -EINVAL);
	assert_int_equal(inject_head_len((const uint8_t *)"GET / HTTP/1.1\n", 15), -EINVAL);
	assert_int_equal(inject_head_len((const uint8_t *)"GET / HTTP/1.1\r\n ", 17), -EINVAL);
	assert_int_equal(inject_head_len((const uint8_t *)"\x16", 1), -EINVAL);
}

static void test_head_limits(void **state)
{
	(void)state;
	/* a head of exactly INJECT_HEAD_MAX bytes is taken; one byte more is not */
	static const char start[] = "GET / HTTP/1.1\r\nX: ";
	char *h = malloc(INJECT_HEAD_MAX + 2);
	assert_non_null(h);
	size_t fill = INJECT_HEAD_MAX - (sizeof(start) - 1) - 4;
	memcpy(h, start, sizeof(start) - 1);
	memset(h + sizeof(start) - 1, 'v', fill);
	memcpy(h + INJECT_HEAD_MAX - 4, "\r\n\r\n", 4);
	assert_int_equal(inject_head_len((const uint8_t *)h, INJECT_HEAD_MAX), INJECT_HEAD_MAX);
	assert_int_equal(inject_head_len((const uint8_t *)h, INJECT_HEAD_MAX - 1), 0);
	memset(h + sizeof(start) - 1, 'v', fill + 1);
	memcpy(h + INJECT_HEAD_MAX - 3, "\r\n\r\n", 4);
	assert_int_equal(inject_head_len((const uint8_t *)h, INJECT_HEAD_MAX + 1), -E2BIG);
	assert_int_equal(inject_head_len((const uint8_t *)h, INJECT_HEAD_MAX), -E2BIG);
	assert_int_equal(inject_head_len((const uint8_t *)h, INJECT_HEAD_MAX - 1), 0);
	free(h);

	/* INJECT_FIELDS_MAX header lines, and one more */
	struct buf b = {0};
	buf_puts(&b, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < INJECT_FIELDS_MAX; i++)
		buf_printf(&b, "F%d: v\r\n", i);
	size_t before_end = b.len;
	buf_puts(&b, "\r\n");
	assert_int_equal(inject_head_len((const uint8_t *)b.data, b.len), (int)b.len);
	buf_truncate(&b, before_end);
	buf_puts(&b, "G: v\r\n\r\n");
	assert_int_equal(inject_head_len((const uint8_t *)b.data, b.len), -E2BIG);

	/* a rewrite makes no head of more fields than that */
	struct buf out = {0};
	buf_reset(&b);
	/* ours are two more: Accept-Encoding and Connection */
	buf_puts(&b, "GET / HTTP/1.1\r\nHost: " HOST "\r\n");
	for (int i = 1; i < INJECT_FIELDS_MAX - 1; i++)
		buf_printf(&b, "F%d: v\r\n", i);
	buf_puts(&b, "\r\n");
	assert_int_equal(inject_rewrite((const uint8_t *)b.data, b.len, HOST, NULL, 0, &out),
			 -E2BIG);
	buf_reset(&b);
	buf_puts(&b, "GET / HTTP/1.1\r\nHost: " HOST "\r\nConnection: keep-alive\r\n");
	for (int i = 2; i < INJECT_FIELDS_MAX - 1; i++)
		buf_printf(&b, "F%d: v\r\n", i);
	buf_puts(&b, "\r\n");
	assert_int_equal(inject_rewrite((const uint8_t *)b.data, b.len, HOST, NULL, 0, &out), 0);
	assert_int_equal(inject_head_len((const uint8_t *)out.data, out.len), (int)out.len);
	buf_release(&out);
	buf_release(&b);
}

/* ---- the rewrite ------------------------------------------------------------ */

static void test_rewrite_placeholders_in_values_only(void **state)
{
	(void)state;
	char *out;
	assert_int_equal(rewrite("POST /v1/" PH1 "?k=" PH2 " HTTP/1.1\r\n"
				 "Host: " HOST "\r\n"
				 "Authorization: Bearer " PH1 "\r\n"
				 "X-Both: " PH1 "," PH2 ";" PH1 "\r\n"
				 "X-Stuck: " PH1 PH1 "\r\n"
				 "X-" PH2 ": " PH2 "\r\n"
				 "X-Other: agentbox-secret-0000000000000000000000000000000f\r\n"
				 "X-Short: agentbox-secret-0000000000000000000000000000000\r\n"
				 "\r\n",
				 pairs, 2, &out),
			 0);
	assert_string_equal(out, "POST /v1/" PH1 "?k=" PH2 " HTTP/1.1\r\n"
				 "Host: " HOST "\r\n"
				 "Authorization: Bearer " VAL1 "\r\n"
				 "X-Both: " VAL1 "," VAL2 ";" VAL1 "\r\n"
				 "X-Stuck: " VAL1 VAL1 "\r\n"
				 "X-" PH2 ": " VAL2 "\r\n"
				 "X-Other: agentbox-secret-0000000000000000000000000000000f\r\n"
				 "X-Short: agentbox-secret-0000000000000000000000000000000\r\n"
				 "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
	free(out);

	/* no pairs: placeholders stay; the first of two pairs with one placeholder wins */
	assert_int_equal(
	    rewrite("GET / HTTP/1.1\r\nHost: " HOST "\r\nA: " PH1 "\r\n\r\n", NULL, 0, &out), 0);
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: " HOST "\r\nA: " PH1
				 "\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n");
	free(out);
	const struct inject_pair twice[] = {{PH1, "first"}, {PH1, "second"}};
	assert_int_equal(
	    rewrite("GET / HTTP/1.1\r\nHost: " HOST "\r\nA: " PH1 "\r\n\r\n", twice, 2, &out), 0);
	assert_non_null(strstr(out, "A: first\r\n"));
	free(out);
}

static void test_rewrite_connection_fields(void **state)
{
	(void)state;
	char *out;
	assert_int_equal(rewrite("GET /chat HTTP/1.1\r\n"
				 "connection: keep-alive, Upgrade\r\n"
				 "Host: " HOST "\r\n"
				 "Keep-Alive: timeout=5\r\n"
				 "PROXY-CONNECTION: keep-alive\r\n"
				 "Upgrade: websocket\r\n"
				 "Connection: x-trace\r\n"
				 "Connectionx: kept\r\n"
				 "X-Connection: kept\r\n"
				 "Accept-Encoding: gzip, br\r\n"
				 "TE: trailers\r\n"
				 "\r\n",
				 pairs, 2, &out),
			 0);
	assert_string_equal(out, "GET /chat HTTP/1.1\r\n"
				 "Host: " HOST "\r\n"
				 "Connectionx: kept\r\n"
				 "X-Connection: kept\r\n"
				 "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
	assert_int_equal(count(out, "Connection: close"), 1);
	free(out);

	/* TRACE would echo the values back where no scrubber sees them */
	assert_int_equal(rewrite("TRACE / HTTP/1.1\r\nHost: " HOST "\r\n\r\n", pairs, 2, &out),
			 -EPERM);
}

static void test_rewrite_names_the_host(void **state)
{
	(void)state;
	static const char *const good[] = {
	    "GET / HTTP/1.1\r\nHost: " HOST "\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost:API.Example.TEST:443\r\n\r\n",
	    "GET / HTTP/1.1\r\nhost: \t" HOST ".\t\r\n\r\n",
	    "GET http://" HOST "/x HTTP/1.1\r\nHost: " HOST "\r\n\r\n",
	    "GET HTTPS://" HOST ":8443?q HTTP/1.1\r\nHost: " HOST "\r\n\r\n",
	    "OPTIONS * HTTP/1.1\r\nHost: " HOST "\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char *out = NULL;
		if (rewrite(good[i], pairs, 2, &out) != 0)
			fail_msg("good case %zu refused", i);
		free(out);
	}
	static const struct {
		const char *head;
		int r;
	} bad[] = {
	    {"GET / HTTP/1.1\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.0\r\nX: y\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: " HOST ".evil.test\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: x" HOST "\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: " HOST ":\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: " HOST ":44x\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: " HOST ":123456\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: " HOST " x\r\n\r\n", -EACCES},
	    {"GET / HTTP/1.1\r\nHost: " HOST "\r\nHost: " HOST "\r\n\r\n", -EINVAL},
	    {"GET http://evil.test/ HTTP/1.1\r\nHost: " HOST "\r\n\r\n", -EACCES},
	    {"GET http://" HOST "@evil.test/ HTTP/1.1\r\nHost: " HOST "\r\n\r\n", -EACCES},
	    {"GET http://evil.test@" HOST "/ HTTP/1.1\r\nHost: " HOST "\r\n\r\n", -EACCES},
	    {"CONNECT " HOST ":443 HTTP/1.1\r\nHost: " HOST ":443\r\n\r\n", -EINVAL},
	    {"GET ftp://" HOST "/ HTTP/1.1\r\nHost: " HOST "\r\n\r\n", -EINVAL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = NULL;
		int r = rewrite(bad[i].head, pairs, 2, &out);
		if (r != bad[i].r)
			fail_msg("bad case %zu: %d, not %d", i, r, bad[i].r);
	}
}

static void test_rewrite_refusals_leave_out_alone(void **state)
{
	(void)state;
	const char *h = "GET / HTTP/1.1\r\nHost: " HOST "\r\nA: " PH1 "\r\n\r\n";
	size_t n = strlen(h);
	struct buf out = {0};
	buf_puts(&out, "kept");
	const uint8_t *u = (const uint8_t *)h;
	/* not a whole head, or more than one */
	assert_int_equal(inject_rewrite(u, n - 1, HOST, pairs, 2, &out), -EINVAL);
	char two[256];
	snprintf(two, sizeof(two), "%sX", h);
	assert_int_equal(inject_rewrite((const uint8_t *)two, n + 1, HOST, pairs, 2, &out),
			 -EINVAL);
	assert_int_equal(inject_rewrite(u, n, "", pairs, 2, &out), -EINVAL);
	/* pairs that are not valid */
	static const char long_value[INJECT_VALUE_MAX + 2] = {
	    [0 ... INJECT_VALUE_MAX] = 'v',
	};
	const struct inject_pair bad[][1] = {
	    {{"agentbox-secret-0000000000000000000000000000000", VAL1}},   /* short */
	    {{"agentbox-secret-000000000000000000000000000000001", VAL1}}, /* long */
	    {{"agentbox-secret-0000000000000000000000000000000A", VAL1}},  /* upper case */
	    {{"agentbox-public-00000000000000000000000000000001", VAL1}},
	    {{PH1, ""}},
	    {{PH1, "a\r\nX-Injected: 1"}},
	    {{PH1, "a\nb"}},
	    {{PH1, "caf\xc3\xa9"}},
	    {{PH1, "bell\a"}},
	    {{PH1, long_value}},
	    {{NULL, VAL1}},
	    {{PH1, NULL}},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (inject_rewrite(u, n, HOST, bad[i], 1, &out) != -EINVAL)
			fail_msg("bad pair %zu taken", i);
	struct inject_pair many[INJECT_PAIRS_MAX + 1];
	for (size_t i = 0; i < INJECT_PAIRS_MAX + 1; i++)
		many[i] = pairs[0];
	assert_int_equal(inject_rewrite(u, n, HOST, many, INJECT_PAIRS_MAX + 1, &out), -EINVAL);
	assert_int_equal(inject_rewrite(u, n, HOST, many, INJECT_PAIRS_MAX, &out), 0);
	assert_true(strncmp(out.data, "keptGET / HTTP/1.1\r\n", 20) == 0);
	/* a value of INJECT_VALUE_MAX bytes is one */
	char max_value[INJECT_VALUE_MAX + 1];
	memset(max_value, 'm', INJECT_VALUE_MAX);
	max_value[INJECT_VALUE_MAX] = '\0';
	assert_true(inject_value_is_valid(max_value));
	assert_true(inject_value_is_valid(" \tspace and tab ok~"));
	buf_release(&out);
}

static void test_rewrite_that_grows_too_much(void **state)
{
	(void)state;
	/* 1000 placeholders, each 4096 bytes once replaced: past INJECT_REWRITE_MAX */
	char *value = malloc(INJECT_VALUE_MAX + 1);
	assert_non_null(value);
	memset(value, 'v', INJECT_VALUE_MAX);
	value[INJECT_VALUE_MAX] = '\0';
	const struct inject_pair big[] = {{PH1, value}};
	struct buf h = {0};
	buf_puts(&h, "GET / HTTP/1.1\r\nHost: " HOST "\r\nX: ");
	for (int i = 0; i < 1000; i++)
		buf_puts(&h, PH1);
	buf_puts(&h, "\r\n\r\n");
	struct buf out = {0};
	assert_int_equal(inject_rewrite((const uint8_t *)h.data, h.len, HOST, big, 1, &out),
			 -E2BIG);
	assert_true(out.len == 0);
	/* 50 of them fit */
	buf_reset(&h);
	buf_puts(&h, "GET / HTTP/1.1\r\nHost: " HOST "\r\nX: ");
	for (int i = 0; i < 50; i++)
		buf_puts(&h, PH1);
	buf_puts(&h, "\r\n\r\n");
	assert_int_equal(inject_rewrite((const uint8_t *)h.data, h.len, HOST, big, 1, &out), 0);
	assert_true(out.len > 50 * INJECT_VALUE_MAX);
	buf_release(&out);
	buf_release(&h);
	free(value);
}

/* ---- the scrubber ---------------------------------------------------------- */

/* Feed s in the pieces cut at the offsets in cuts, then flush: the output. */
static char *scrub_pieces(const struct inject_pair *p, size_t np, const char *s, const size_t *cuts,
			  size_t ncuts)
{
	struct inject_scrub sc;
	assert_int_equal(inject_scrub_init(&sc, p, np), 0);
	struct buf out = {0};
	size_t at = 0, n = strlen(s);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;
		assert_int_equal(inject_scrub_feed(&sc, (const uint8_t *)s + at, end - at, &out),
				 0);
		at = end;
	}
	assert_int_equal(inject_scrub_flush(&sc, &out), 0);
	assert_int_equal(buf_reserve(&out, 0), 0);
	char *r;
	assert_int_equal(buf_steal(&out, &r, NULL), 0);
	assert_int_equal(strlen(r), n);
	return r;
}

static void test_scrub_every_split_point(void **state)
{
	(void)state;
	const char *in = "{\"headers\":{\"Authorization\":\"Bearer " VAL2 "\",\"X\":\"" VAL1
			 "\"},\"k\":\"" VAL1 VAL1 "\"}";
	const char *want = "{\"headers\":{\"Authorization\":\"Bearer ************************\","
			   "\"X\":\"***********\"},\"k\":\"**********************\"}";
	size_t n = strlen(in);
	char *out = scrub_pieces(pairs, 2, in, NULL, 0);
	assert_string_equal(out, want);
	free(out);
	for (size_t i = 0; i <= n; i++) {
		size_t cut[1] = {i};
		out = scrub_pieces(pairs, 2, in, cut, 1);
		assert_string_equal(out, want);
		free(out);
		for (size_t j = i; j <= n; j++) {
			size_t cuts[2] = {i, j};
			out = scrub_pieces(pairs, 2, in, cuts, 2);
			if (strcmp(out, want) != 0)
				fail_msg("cut at %zu and %zu: %s", i, j, out);
			free(out);
		}
	}
	/* one byte at a time */
	size_t *each = malloc(n * sizeof(*each));
	assert_non_null(each);
	for (size_t i = 0; i < n; i++)
		each[i] = i;
	out = scrub_pieces(pairs, 2, in, each, n);
	assert_string_equal(out, want);
	free(out);
	free(each);
}

static void test_scrub_overlaps_and_edges(void **state)
{
	(void)state;
	const struct inject_pair ov[] = {{PH1, "abc"}, {PH2, "cde"}, {PH1, "aa"}};
	char *out;
	/* "abc" then "cde" that shares its c: all five masked, at every split */
	for (size_t i = 0; i <= 7; i++) {
		size_t cut[1] = {i};
		out = scrub_pieces(ov, 3, "xabcdex", cut, 1);
		assert_string_equal(out, "x*****x");
		free(out);
	}
	out = scrub_pieces(ov, 3, "aaa", NULL, 0);
	assert_string_equal(out, "***");
	free(out);
	out = scrub_pieces(ov, 3, "ab", NULL, 0); /* shorter than any value but one, at the end */
	assert_string_equal(out, "ab");
	free(out);
	out = scrub_pieces(ov, 3, "", NULL, 0);
	assert_string_equal(out, "");
	free(out);
	/* no pairs: as it is */
	out = scrub_pieces(NULL, 0, "abc anything", NULL, 0);
	assert_string_equal(out, "abc anything");
	free(out);

	/* reused after a flush: a fresh stream (nothing carried over) */
	struct inject_scrub sc;
	struct buf b = {0};
	assert_int_equal(inject_scrub_init(&sc, ov, 3), 0);
	assert_int_equal(inject_scrub_feed(&sc, (const uint8_t *)"xab", 3, &b), 0);
	assert_true(b.len <= 3 && b.len >= 1);
	assert_int_equal(inject_scrub_flush(&sc, &b), 0);
	assert_int_equal(inject_scrub_feed(&sc, (const uint8_t *)"c", 1, &b), 0);
	assert_int_equal(inject_scrub_flush(&sc, &b), 0);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "xabc", 4);
	buf_release(&b);

	/* what is held back is what follows the last newline, whatever it is: a line goes
	 * out whole, and no byte's delay tells whether it begins a value */
	buf_reset(&b);
	assert_int_equal(inject_scrub_init(&sc, pairs, 2), 0);
	static const char sse[] = "data: {\"delta\": \"the second\"}\n\n";
	assert_int_equal(inject_scrub_feed(&sc, (const uint8_t *)sse, sizeof(sse) - 1, &b), 0);
	assert_int_equal(b.len, sizeof(sse) - 1);
	assert_int_equal(inject_scrub_feed(&sc, (const uint8_t *)"x: the sec", 10, &b), 0);
	assert_int_equal(b.len, sizeof(sse) - 1); /* no newline: all of it waits */
	assert_int_equal(inject_scrub_feed(&sc, (const uint8_t *)"retary", 6, &b), 0);
	assert_int_equal(inject_scrub_flush(&sc, &b), 0);
	assert_int_equal(b.len, sizeof(sse) - 1 + 16);
	buf_release(&b);

	/* values that are not valid */
	const struct inject_pair bad[] = {{PH1, "a\r\n"}};
	assert_int_equal(inject_scrub_init(&sc, bad, 1), -EINVAL);
	struct inject_pair many[INJECT_PAIRS_MAX + 1];
	for (size_t i = 0; i < INJECT_PAIRS_MAX + 1; i++)
		many[i] = pairs[0];
	assert_int_equal(inject_scrub_init(&sc, many, INJECT_PAIRS_MAX + 1), -EINVAL);
}

static void test_scrub_longest_value(void **state)
{
	(void)state;
	char *v = malloc(INJECT_VALUE_MAX + 1);
	assert_non_null(v);
	for (size_t i = 0; i < INJECT_VALUE_MAX; i++)
		v[i] = (char)('A' + i % 26);
	v[INJECT_VALUE_MAX] = '\0';
	const struct inject_pair p[] = {{PH1, v}};
	struct buf in = {0};
	buf_puts(&in, "<<");
	buf_puts(&in, v);
	buf_puts(&in, ">>");
	buf_puts(&in, v);
	size_t cuts[] = {1, 100, 4000, 4097, 4100, 8000};
	char *out = scrub_pieces(p, 1, in.data, cuts, sizeof(cuts) / sizeof(cuts[0]));
	assert_true(strncmp(out, "<<***", 5) == 0);
	assert_int_equal(strspn(out + 2, "*"), INJECT_VALUE_MAX);
	assert_int_equal(strspn(out + 4 + INJECT_VALUE_MAX, "*"), INJECT_VALUE_MAX);
	free(out);
	buf_release(&in);
	free(v);
}

/* ---- random and mutated inputs, through the fuzz target's checks ------------------ */

static void test_random_streams(void **state)
{
	(void)state;
	srand(7);
	uint8_t b[512];
	for (int round = 0; round < 3000; round++) {
		size_t n = (size_t)rand() % sizeof(b);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t) "abc*-"[rand() % 5];
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, b, n);
		LLVMFuzzerTestOneInput(copy, n);
		free(copy);
	}
}

static void test_mutated_heads(void **state)
{
	(void)state;
	static const char *const seeds[] = {
	    "GET /x HTTP/1.1\r\nHost: " FUZZ_HOST "\r\nAuthorization: Bearer " FUZZ_P1
	    "\r\nConnection: keep-alive\r\n\r\nbody",
	    "POST http://" FUZZ_HOST "/ HTTP/1.0\r\nHost: " FUZZ_HOST ":80\r\nX: " FUZZ_P2 FUZZ_P1
	    "\r\nKeep-Alive: 1\r\nUpgrade: h2c\r\n\r\n",
	};
	static const uint8_t bytes[] = {'\r', '\n', ' ', '\t', ':', 0, 0x7f, 0x80, 'a', 'A', '/'};
	srand(11);
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		size_t n = strlen(seeds[s]);
		uint8_t *b = malloc(n);
		assert_non_null(b);
		for (int round = 0; round < 3000; round++) {
			memcpy(b, seeds[s], n);
			int muts = 1 + rand() % 3;
			for (int m = 0; m < muts; m++)
				b[(size_t)rand() % n] = bytes[(size_t)rand() % sizeof(bytes)];
			size_t len = round % 4 == 0 ? (size_t)rand() % (n + 1) : n;
			LLVMFuzzerTestOneInput(b, len);
		}
		memcpy(b, seeds[s], n);
		LLVMFuzzerTestOneInput(b, n);
		free(b);
	}
}

/* fuzz/corpus/inject/: every input through the fuzz target's checks */
static void test_replay_corpus(void **state)
{
	(void)state;
	size_t n = corpus_replay(FUZZ_CORPUS_DIR, INJECT_HEAD_MAX + 4096, LLVMFuzzerTestOneInput);
	if (n < 10)
		fail_msg("only %zu inputs in %s: the corpus went missing", n, FUZZ_CORPUS_DIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_head_complete_and_every_prefix_asks_for_more),
	    cmocka_unit_test(test_head_value_bytes),
	    cmocka_unit_test(test_head_limits),
	    cmocka_unit_test(test_rewrite_placeholders_in_values_only),
	    cmocka_unit_test(test_rewrite_connection_fields),
	    cmocka_unit_test(test_rewrite_names_the_host),
	    cmocka_unit_test(test_rewrite_refusals_leave_out_alone),
	    cmocka_unit_test(test_rewrite_that_grows_too_much),
	    cmocka_unit_test(test_scrub_every_split_point),
	    cmocka_unit_test(test_scrub_overlaps_and_edges),
	    cmocka_unit_test(test_scrub_longest_value),
	    cmocka_unit_test(test_random_streams),
	    cmocka_unit_test(test_mutated_heads),
	    cmocka_unit_test(test_replay_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
