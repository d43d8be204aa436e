/*
 * test-egress-peek.c - the host a client wants, from ClientHellos built
 * here field by field (split over records, malformed at every level) and
 * from HTTP/1.x request heads; every prefix of a valid opening asks for
 * more, and random and mutated bytes go through the fuzz target's checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/peek.h"

/* LLVMFuzzerTestOneInput() and its invariants, for random inputs below */
#include "corpus-replay.h"
#include "../../fuzz/fuzz-peek.c"

/* ---- a small TLS encoder ---- */

struct bytes {
	uint8_t b[3 * PEEK_MAX];
	size_t n;
};

static void put(struct bytes *o, const void *p, size_t n)
{
	assert_true(o->n + n <= sizeof(o->b));
	memcpy(o->b + o->n, p, n);
	o->n += n;
}

static void put8(struct bytes *o, unsigned v)
{
	uint8_t b = (uint8_t)v;
	put(o, &b, 1);
}

static void put16(struct bytes *o, unsigned v)
{
	put8(o, v >> 8);
	put8(o, v);
}

static void put24(struct bytes *o, size_t v)
{
	put8(o, (unsigned)(v >> 16));
	put16(o, (unsigned)v);
}

/* A 16-bit length to fill in once what it covers is written. */
static size_t open16(struct bytes *o)
{
	put16(o, 0);
	return o->n;
}

/* delta: what to add to the true length, to make it lie */
static void close16(struct bytes *o, size_t at, int delta)
{
	size_t n = o->n - at + (size_t)delta;
	o->b[at - 2] = (uint8_t)(n >> 8);
	o->b[at - 1] = (uint8_t)n;
}

static void ext(struct bytes *e, unsigned type, const void *data, size_t n)
{
	put16(e, type);
	put16(e, (unsigned)n);
	put(e, data, n);
}

/* Lies in the server_name extension, level by level. */
struct sni_lies {
	int ext_len, list_len, name_len;
};

static void ext_sni_lying(struct bytes *e, const char *name, struct sni_lies lie)
{
	put16(e, 0);
	size_t ext_at = open16(e);
	size_t list_at = open16(e);
	put8(e, 0); /* host_name */
	size_t name_at = open16(e);
	put(e, name, strlen(name));
	close16(e, name_at, lie.name_len);
	close16(e, list_at, lie.list_len);
	close16(e, ext_at, lie.ext_len);
}

static void ext_sni(struct bytes *e, const char *name)
{
	ext_sni_lying(e, name, (struct sni_lies){0});
}

static void ext_alpn(struct bytes *e)
{
	static const uint8_t alpn[] = {0,   12,	 2,   'h', '2', 8,   'h',
				       't', 't', 'p', '/', '1', '.', '1'};
	ext(e, 16, alpn, sizeof(alpn));
}

/* What a browser sends around SNI: GREASE, supported_versions, key_share. */
static void ext_common(struct bytes *e)
{
	static const uint8_t versions[] = {4, 0x03, 0x04, 0x03, 0x03};
	uint8_t share[2 + 4 + 32] = {0, 36, 0, 29, 0, 32};
	ext(e, 0x0a0a, "", 0);
	ext(e, 43, versions, sizeof(versions));
	ext(e, 51, share, sizeof(share));
}

/* The fixed fields of a ClientHello, where a test needs them otherwise. */
struct hello_fields {
	size_t session_id;  /* bytes of legacy_session_id */
	size_t suites;	    /* bytes of cipher_suites */
	size_t compression; /* compression methods */
	int ext_block_len;  /* a lie in the extension block's length */
};

static const struct hello_fields usual = {.session_id = 32, .suites = 6, .compression = 1};

/* A ClientHello handshake message; exts NULL: no extension block at all. */
/* n bytes of something */
static void put_filler(struct bytes *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put8(o, (unsigned)(i * 7 + 1));
}

static void hello_with(struct bytes *m, const struct bytes *exts, struct hello_fields f)
{
	m->n = 0;
	put8(m, 1);
	put24(m, 0);
	put16(m, 0x0303);
	put_filler(m, 32); /* random */
	put8(m, (unsigned)f.session_id);
	put_filler(m, f.session_id);
	put16(m, (unsigned)f.suites);
	put_filler(m, f.suites);
	put8(m, (unsigned)f.compression);
	for (size_t i = 0; i < f.compression; i++)
		put8(m, 0);
	if (exts) {
		size_t at = open16(m);
		put(m, exts->b, exts->n);
		close16(m, at, f.ext_block_len);
	}
	size_t len = m->n - 4;
	m->b[1] = (uint8_t)(len >> 16);
	m->b[2] = (uint8_t)(len >> 8);
	m->b[3] = (uint8_t)len;
}

static void hello_lying(struct bytes *m, const struct bytes *exts, int ext_block_len)
{
	struct hello_fields f = usual;
	f.ext_block_len = ext_block_len;
	hello_with(m, exts, f);
}

static void hello(struct bytes *m, const struct bytes *exts)
{
	hello_with(m, exts, usual);
}

/* msg in records: the first ncuts of lengths cuts[], the last the rest. */
static void records(struct bytes *out, const struct bytes *msg, const size_t *cuts, size_t ncuts)
{
	out->n = 0;
	size_t at = 0;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t n = i < ncuts ? cuts[i] : msg->n - at;
		assert_true(n > 0 && at + n <= msg->n);
		put8(out, 22);
		put16(out, 0x0301);
		put16(out, (unsigned)n);
		put(out, msg->b + at, n);
		at += n;
	}
}

static void one_record(struct bytes *out, const struct bytes *msg)
{
	records(out, msg, NULL, 0);
}

/* A ClientHello with these extensions, in one record. */
static void stream_with(struct bytes *out, const struct bytes *exts)
{
	static struct bytes m;
	hello(&m, exts);
	one_record(out, &m);
}

/* A ClientHello with SNI name, in one record. */
static void stream_for(struct bytes *out, const char *name)
{
	static struct bytes e;
	e.n = 0;
	ext_sni(&e, name);
	stream_with(out, &e);
}

/* ---- checks ---- */

/* peek_parse() on a buffer of exactly len bytes, so that ASan sees its end. */
static int parse(const void *data, size_t len, struct peek *ret)
{
	uint8_t *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, data, len);
	int r = peek_parse(copy, len, ret);
	free(copy);
	return r;
}

/* Every proper prefix asks for more; the whole (plus extra) decides. */
static void expect_decision(const void *data, size_t len, size_t extra, enum peek_kind kind,
			    const char *host, uint16_t port)
{
	struct peek p;
	for (size_t i = 0; i < len; i++) {
		int r = parse(data, i, &p);
		if (r != 0 || p.kind != PEEK_MORE)
			fail_msg("prefix of %zu/%zu bytes: %d, kind %d", i, len, r, p.kind);
		assert_string_equal(p.host, "");
	}
	int r = parse(data, len + extra, &p);
	if (r != 0)
		fail_msg("%zu bytes: %d (%s)", len, r, strerror(-r));
	assert_int_equal(p.kind, kind);
	assert_string_equal(p.host, host);
	assert_int_equal(p.port, port);
	assert_int_equal(p.head_len, len);
}

static void expect_tls(const struct bytes *s, const char *host)
{
	expect_decision(s->b, s->n, 0, PEEK_TLS, host, 0);
}

static void expect_error(const void *data, size_t len, int err)
{
	struct peek p = {.kind = PEEK_HTTP, .host = "untouched"};
	int r = parse(data, len, &p);
	if (r != err)
		fail_msg("%d (%s), expected %d (%s)", r, strerror(-r), err, strerror(-err));
	assert_string_equal(p.host, "untouched"); /* ret is written only on success */
}

static void expect_tls_error(const struct bytes *s, int err)
{
	expect_error(s->b, s->n, err);
}

/* A refusal that needs the whole message: every proper prefix asks for more. */
static void expect_tls_error_at_end(const struct bytes *s, int err)
{
	struct peek p;
	for (size_t i = 0; i < s->n; i++) {
		int r = parse(s->b, i, &p);
		if (r != 0 || p.kind != PEEK_MORE)
			fail_msg("prefix of %zu/%zu bytes: %d, kind %d", i, s->n, r, p.kind);
	}
	expect_tls_error(s, err);
}

/* ---- TLS ---- */

static struct bytes ext_buf, msg_buf, stream_buf;

static void test_tls_one_record(void **state)
{
	(void)state;
	stream_for(&stream_buf, "example.com");
	expect_tls(&stream_buf, "example.com");

	/* what follows the ClientHello's record is not read */
	size_t len = stream_buf.n;
	static const uint8_t early[] = {23, 3, 3, 0, 2, 0xff, 0xff, 0x80, 0};
	put(&stream_buf, early, sizeof(early));
	expect_decision(stream_buf.b, len, sizeof(early), PEEK_TLS, "example.com", 0);
}

static void test_tls_split_over_records(void **state)
{
	(void)state;
	ext_buf.n = 0;
	ext_common(&ext_buf);
	ext_sni(&ext_buf, "api.example.org");
	ext_alpn(&ext_buf);
	hello(&msg_buf, &ext_buf);
	const size_t n = msg_buf.n;
	const struct {
		size_t cuts[4];
		size_t ncuts;
	} splits[] = {
	    {{n / 2}, 1},      {{n / 3, n / 3}, 2}, {{1}, 1}, /* the handshake header split */
	    {{2, 1, 1}, 3},				      /* ... over three records */
	    {{4}, 1},					      /* the header alone */
	    {{n - 1}, 1},				      /* the last byte alone */
	    {{60, 70, 1}, 3},				      /* inside the extensions */
	    {{n - 20, 10}, 2},				      /* inside SNI */
	};
	for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
		records(&stream_buf, &msg_buf, splits[i].cuts, splits[i].ncuts);
		expect_tls(&stream_buf, "api.example.org");
	}
	/* in a record of its own per byte */
	size_t cuts[1024];
	assert_true(n - 1 <= 1024);
	for (size_t i = 0; i < n - 1; i++)
		cuts[i] = 1;
	records(&stream_buf, &msg_buf, cuts, n - 1);
	expect_tls(&stream_buf, "api.example.org");
}

static void test_tls_extensions_around_sni(void **state)
{
	(void)state;
	/* SNI last, after other extensions */
	ext_buf.n = 0;
	ext_common(&ext_buf);
	ext_alpn(&ext_buf);
	ext_sni(&ext_buf, "last.example.net");
	stream_with(&stream_buf, &ext_buf);
	expect_tls(&stream_buf, "last.example.net");
	/* SNI first; an empty extension last */
	ext_buf.n = 0;
	ext_sni(&ext_buf, "first.example.net");
	ext_alpn(&ext_buf);
	ext(&ext_buf, 0x1a1a, "", 0);
	stream_with(&stream_buf, &ext_buf);
	expect_tls(&stream_buf, "first.example.net");
}

static void test_tls_name_is_normalised(void **state)
{
	(void)state;
	stream_for(&stream_buf, "WWW.Example.COM");
	expect_tls(&stream_buf, "www.example.com");
	stream_for(&stream_buf, "example.com.");
	expect_tls(&stream_buf, "example.com");
	stream_for(&stream_buf, "_acme-challenge.x-1.example.com");
	expect_tls(&stream_buf, "_acme-challenge.x-1.example.com");
}

static void test_tls_without_sni(void **state)
{
	(void)state;
	/* no extension block */
	hello(&msg_buf, NULL);
	one_record(&stream_buf, &msg_buf);
	expect_tls_error_at_end(&stream_buf, -ENOENT);
	/* extensions, none of them SNI */
	ext_buf.n = 0;
	ext_common(&ext_buf);
	ext_alpn(&ext_buf);
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error_at_end(&stream_buf, -ENOENT);
	/* an empty extension block */
	ext_buf.n = 0;
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error_at_end(&stream_buf, -ENOENT);
	/* SNI with a name of another type only */
	static const uint8_t other[] = {0, 8, 7, 0, 5, 'a', '.', 'c', 'o', 'm'};
	ext_buf.n = 0;
	ext(&ext_buf, 0, other, sizeof(other));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error_at_end(&stream_buf, -ENOENT);
}

static void test_tls_ech_refused(void **state)
{
	(void)state;
	static const uint8_t ech[] = {0, 0, 1, 0, 1, 7, 0, 0, 0, 0};
	ext_buf.n = 0;
	ext_sni(&ext_buf, "public.example.com");
	ext(&ext_buf, 0xfe0d, ech, sizeof(ech));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error_at_end(&stream_buf, -EPROTONOSUPPORT);
	ext_buf.n = 0;
	ext(&ext_buf, 0xfe0d, ech, sizeof(ech));
	ext_sni(&ext_buf, "public.example.com");
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error_at_end(&stream_buf, -EPROTONOSUPPORT);
	/* ... whatever the outer SNI says */
	ext_buf.n = 0;
	ext(&ext_buf, 0xfe0d, ech, sizeof(ech));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error_at_end(&stream_buf, -EPROTONOSUPPORT);
}

static void test_tls_sni_list(void **state)
{
	(void)state;
	/* a name of another type, then the host_name: the host_name is taken */
	static const uint8_t list[] = {0,  22,	7,   0,	  5,   'o', '.', 'c', 'o', 'm', 0,   0,
				       11, 'h', 'o', 's', 't', '.', 'c', 'o', 'm', '.', 'a', 'u'};
	assert_int_equal(list[1], sizeof(list) - 2);
	ext_buf.n = 0;
	ext(&ext_buf, 0, list, sizeof(list));
	stream_with(&stream_buf, &ext_buf);
	expect_tls(&stream_buf, "host.com.au");
}

static void test_tls_two_names_refused(void **state)
{
	(void)state;
	/* two host_names in one list */
	static const uint8_t two[] = {0,   16, 0, 0, 5,	  'a', '.', 'c', 'o',
				      'm', 0,  0, 5, 'b', '.', 'c', 'o', 'm'};
	assert_int_equal(two[1], sizeof(two) - 2);
	ext_buf.n = 0;
	ext(&ext_buf, 0, two, sizeof(two));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* two server_name extensions */
	ext_buf.n = 0;
	ext_sni(&ext_buf, "a.com");
	ext_alpn(&ext_buf);
	ext_sni(&ext_buf, "b.com");
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
}

static void test_tls_names_refused(void **state)
{
	(void)state;
	char label64[80], long_name[300];
	memset(label64, 'a', 64);
	memcpy(label64 + 64, ".com", 5);
	/* 254 bytes: 63 + 1 + 63 + 1 + 63 + 1 + 62 */
	memset(long_name, 'a', 254);
	long_name[63] = long_name[127] = long_name[191] = '.';
	long_name[254] = '\0';
	const char *bad[] = {
	    "1.2.3.4", "127.1",	  "0x7f.0.0.1", "127.0.0.0x1",	 "localhost", "a..com",
	    ".a.com",  "a.com..", "-a.com",	"a-.com",	 "a.b c",     "a.com:443",
	    "[::1]",   "::1",	  "a.com/",	"a\xc3\xa9.com", "*.a.com",   label64,
	    long_name, "a.1com",  ".",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		stream_for(&stream_buf, bad[i]);
		struct peek p;
		int r = parse(stream_buf.b, stream_buf.n, &p);
		if (r != -EINVAL)
			fail_msg("SNI '%s': %d", bad[i], r);
	}
	/* an empty name, and a NUL inside one */
	stream_for(&stream_buf, "");
	expect_tls_error(&stream_buf, -EINVAL);
	static const uint8_t nul[] = {0, 10, 0, 0, 7, 'a', 0, 'b', '.', 'c', 'o', 'm'};
	ext_buf.n = 0;
	ext(&ext_buf, 0, nul, sizeof(nul));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* ... where what comes before the NUL would pass on its own */
	static const uint8_t cut[] = {0,   16, 0,   0,	 13,  'a', '.', 'c', 'o',
				      'm', 0,  'e', '.', 'v', 'i', 'l', '.', 'n'};
	ext_buf.n = 0;
	ext(&ext_buf, 0, cut, sizeof(cut));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* every entry of the list is 1..2^16-1 bytes, whatever its type */
	static const uint8_t empty_other[] = {0, 11, 7, 0, 0, 0, 0, 5, 'a', '.', 'c', 'o', 'm'};
	ext_buf.n = 0;
	ext(&ext_buf, 0, empty_other, sizeof(empty_other));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* 253 bytes is the most */
	long_name[253] = '\0';
	stream_for(&stream_buf, long_name);
	expect_tls(&stream_buf, long_name);
}

static void test_tls_lengths_that_overrun(void **state)
{
	(void)state;
	const struct sni_lies lies[] = {
	    {.ext_len = 1},	{.ext_len = -1},    {.ext_len = 1000}, {.list_len = 1},
	    {.list_len = -1},	{.list_len = 1000}, {.name_len = 1},   {.name_len = -1},
	    {.name_len = 1000}, {.name_len = -5},   {.list_len = -10}, {.ext_len = -4},
	};
	for (int last = 0; last < 2; last++) {
		for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
			ext_buf.n = 0;
			if (last)
				ext_common(&ext_buf);
			ext_sni_lying(&ext_buf, "example.com", lies[i]);
			if (!last)
				ext_alpn(&ext_buf);
			stream_with(&stream_buf, &ext_buf);
			struct peek p;
			int r = parse(stream_buf.b, stream_buf.n, &p);
			if (r != -EINVAL)
				fail_msg("lie %zu (%s): %d", i, last ? "last" : "first", r);
		}
	}
	/* the extension block's length */
	const int block_lies[] = {1, -1, 1000, -2};
	for (size_t i = 0; i < sizeof(block_lies) / sizeof(block_lies[0]); i++) {
		ext_buf.n = 0;
		ext_sni(&ext_buf, "example.com");
		hello_lying(&msg_buf, &ext_buf, block_lies[i]);
		one_record(&stream_buf, &msg_buf);
		expect_tls_error(&stream_buf, -EINVAL);
	}
	/* an extension's length past the block: the last one's */
	ext_buf.n = 0;
	ext_sni(&ext_buf, "example.com");
	ext(&ext_buf, 99, "xyz", 3);
	ext_buf.b[ext_buf.n - 4] = 0x10;
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* server_name's data longer than its list */
	static const uint8_t trailing[] = {0, 8, 0, 0, 5, 'a', '.', 'c', 'o', 'm', 0};
	ext_buf.n = 0;
	ext(&ext_buf, 0, trailing, sizeof(trailing));
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* half an extension header at the end of the block */
	ext_buf.n = 0;
	ext_sni(&ext_buf, "example.com");
	put8(&ext_buf, 0);
	stream_with(&stream_buf, &ext_buf);
	expect_tls_error(&stream_buf, -EINVAL);
}

/* The fixed part of the message, field by field. */
static void test_tls_fields_checked(void **state)
{
	(void)state;
	ext_buf.n = 0;
	ext_sni(&ext_buf, "example.com");
	const struct {
		size_t at; /* in the handshake message */
		uint8_t value;
	} patches[] = {
	    {0, 2},		 /* a ServerHello */
	    {0, 11},		 /* a Certificate */
	    {4, 2},		 /* legacy_version 2.3 */
	    {5, 0},		 /* 3.0 */
	    {5, 5},		 /* 3.5 */
	    {38, 33},		 /* legacy_session_id of 33 */
	    {38, 255},	{72, 5}, /* cipher_suites of 5 bytes */
	    {72, 0},		 /* of none */
	    {71, 0xff},		 /* past the message */
	    {79, 0},		 /* no compression method */
	    {79, 200},		 /* past the message */
	};
	for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
		hello(&msg_buf, &ext_buf);
		assert_int_equal(msg_buf.b[38], 32);
		assert_int_equal(msg_buf.b[72], 6);
		assert_int_equal(msg_buf.b[79], 1);
		msg_buf.b[patches[i].at] = patches[i].value;
		one_record(&stream_buf, &msg_buf);
		struct peek p;
		int r = parse(stream_buf.b, stream_buf.n, &p);
		if (r != -EINVAL)
			fail_msg("byte %zu = %u: %d", patches[i].at, patches[i].value, r);
	}
	/* well-formed around a field that is not */
	const struct hello_fields fields[] = {
	    {.session_id = 33, .suites = 6, .compression = 1},
	    {.session_id = 32, .suites = 5, .compression = 1},
	    {.session_id = 32, .suites = 0, .compression = 1},
	    {.session_id = 32, .suites = 6, .compression = 0},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		hello_with(&msg_buf, &ext_buf, fields[i]);
		one_record(&stream_buf, &msg_buf);
		struct peek p;
		int r = parse(stream_buf.b, stream_buf.n, &p);
		if (r != -EINVAL)
			fail_msg("fields %zu: %d", i, r);
	}
	const struct hello_fields fine[] = {
	    {.session_id = 0, .suites = 2, .compression = 1},
	    {.session_id = 1, .suites = 8190, .compression = 255},
	};
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		hello_with(&msg_buf, &ext_buf, fine[i]);
		one_record(&stream_buf, &msg_buf);
		expect_tls(&stream_buf, "example.com");
	}
	/* not a ClientHello: refused at its first byte */
	hello(&msg_buf, &ext_buf);
	msg_buf.b[0] = 2;
	one_record(&stream_buf, &msg_buf);
	expect_error(stream_buf.b, 6, -EINVAL);
	/* a message shorter than its record: bytes after the ClientHello */
	hello(&msg_buf, &ext_buf);
	put8(&msg_buf, 20);
	one_record(&stream_buf, &msg_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	expect_error(stream_buf.b, 9, -EINVAL); /* known as soon as both lengths are */
	/* a message one byte longer than its fields: refused without waiting for that byte */
	hello(&msg_buf, &ext_buf);
	msg_buf.b[3]++;
	one_record(&stream_buf, &msg_buf);
	expect_tls_error(&stream_buf, -EINVAL);
	/* a message too short for its fields */
	static const uint8_t tiny[] = {22, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3};
	expect_error(tiny, sizeof(tiny), -EINVAL);
	static const uint8_t empty[] = {22, 3, 1, 0, 4, 1, 0, 0, 0};
	expect_error(empty, sizeof(empty), -EINVAL);
}

static void test_tls_records_checked(void **state)
{
	(void)state;
	stream_for(&stream_buf, "example.com");
	const struct {
		size_t at;
		uint8_t value;
	} patches[] = {
	    {0, 23}, /* application data first */
	    {0, 21}, /* an alert */
	    {0, 20}, /* change_cipher_spec */
	    {1, 2},  /* version 2.x */
	    {2, 0},  /* SSL 3.0 */
	    {2, 5},
	};
	for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
		uint8_t s[8];
		memcpy(s, stream_buf.b, sizeof(s));
		s[patches[i].at] = patches[i].value;
		/* refused at that very byte */
		expect_error(s, patches[i].at + 1, -EINVAL);
		expect_error(s, sizeof(s), -EINVAL);
	}
	/* a record of length 0, and one longer than 2^14 */
	static const uint8_t zero[] = {22, 3, 1, 0, 0, 22, 3, 1, 0, 1, 1};
	expect_error(zero, sizeof(zero), -EINVAL);
	static const uint8_t huge[] = {22, 3, 1, 0x40, 0x01, 1};
	expect_error(huge, sizeof(huge), -EINVAL);
	/* the second record of another type */
	ext_buf.n = 0;
	ext_sni(&ext_buf, "example.com");
	hello(&msg_buf, &ext_buf);
	const size_t cut = 50;
	records(&stream_buf, &msg_buf, &cut, 1);
	stream_buf.b[5 + cut] = 23;
	expect_error(stream_buf.b, 5 + cut + 1, -EINVAL);
	expect_tls_error(&stream_buf, -EINVAL);
}

/* A ClientHello padded to a message of size bytes, in two records. */
static void padded(struct bytes *s, size_t size)
{
	ext_buf.n = 0;
	ext_sni(&ext_buf, "big.example.com");
	hello(&msg_buf, &ext_buf);
	size_t pad = size - msg_buf.n - 4;
	static uint8_t zeros[PEEK_MAX];
	ext(&ext_buf, 21, zeros, pad);
	hello(&msg_buf, &ext_buf);
	assert_int_equal(msg_buf.n, size);
	const size_t cut = size / 2;
	records(s, &msg_buf, &cut, 1);
}

static void test_tls_too_big(void **state)
{
	(void)state;
	/* two record headers and the message: PEEK_MAX exactly */
	padded(&stream_buf, PEEK_MAX - 10);
	assert_int_equal(stream_buf.n, PEEK_MAX);
	expect_tls(&stream_buf, "big.example.com");
	/* one byte more: known from the handshake header on */
	padded(&stream_buf, PEEK_MAX - 9);
	expect_tls_error(&stream_buf, -E2BIG);
	expect_error(stream_buf.b, 9, -E2BIG);
	struct peek p;
	assert_int_equal(parse(stream_buf.b, 8, &p), 0);
	assert_int_equal(p.kind, PEEK_MORE);
	/* one full record would not fit with its header: known from that */
	static const uint8_t full[] = {22, 3, 1, 0x40, 0x00};
	expect_error(full, sizeof(full), -E2BIG);
	static const uint8_t longest[] = {22, 3, 1, 0, 0x40, 1, 0xff, 0xff, 0xff};
	expect_error(longest, sizeof(longest), -E2BIG);
	/* bytes past PEEK_MAX are never read */
	padded(&stream_buf, PEEK_MAX - 10);
	put8(&stream_buf, 0xff);
	expect_decision(stream_buf.b, PEEK_MAX, 1, PEEK_TLS, "big.example.com", 0);
}

/* ---- HTTP ---- */

static void expect_http(const char *head, enum peek_kind kind, const char *host, uint16_t port)
{
	expect_decision(head, strlen(head), 0, kind, host, port);
}

static void expect_http_error(const char *head, int err)
{
	expect_error(head, strlen(head), err);
}

static void test_http_origin_form(void **state)
{
	(void)state;
	expect_http("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", PEEK_HTTP, "example.com", 0);
	expect_http("POST /a?b=c HTTP/1.0\r\nUser-Agent: x/1\r\nDate: Mon, 1 Jan 2024\r\n"
		    "Hostname: other.com\r\nHOST:Example.COM:8080\r\n"
		    "Accept: */*\r\n\r\n",
		    PEEK_HTTP, "example.com", 8080);
	expect_http("GET / HTTP/1.1\r\nhost: \t a.example.org. \t\r\nX: \xff\r\n\r\n", PEEK_HTTP,
		    "a.example.org", 0);
	expect_http("M-SEARCH /x HTTP/1.1\r\nHost: a.io:1\r\n\r\n", PEEK_HTTP, "a.io", 1);
	/* the body is not read */
	const char *req = "POST / HTTP/1.1\r\nHost: a.io\r\nContent-Length: 4\r\n\r\nbody";
	expect_decision(req, strlen(req) - 4, 4, PEEK_HTTP, "a.io", 0);
}

static void test_http_absolute_form(void **state)
{
	(void)state;
	expect_http("GET http://example.com/x HTTP/1.1\r\n\r\n", PEEK_HTTP, "example.com", 0);
	expect_http("GET HTTP://Example.com:8080?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
		    PEEK_HTTP, "example.com", 8080);
	expect_http("GET http://example.com HTTP/1.1\r\nHost: EXAMPLE.com:80\r\n\r\n", PEEK_HTTP,
		    "example.com", 0);
	expect_http("GET http://example.com:81/ HTTP/1.1\r\nHost: example.com\r\n\r\n", PEEK_HTTP,
		    "example.com", 81);
	/* a Host that names another host or port */
	expect_http_error("GET http://example.com/ HTTP/1.1\r\nHost: other.com\r\n\r\n", -EINVAL);
	expect_http_error("GET http://example.com/ HTTP/1.1\r\nHost: example.com:81\r\n\r\n",
			  -EINVAL);
	expect_http_error("GET http://example.com:81/ HTTP/1.1\r\nHost: example.com:80\r\n\r\n",
			  -EINVAL);
	/* userinfo, other schemes, no authority */
	const char *bad[] = {
	    "GET http://user@example.com/ HTTP/1.1\r\n\r\n",
	    "GET http://example.com@evil.com/ HTTP/1.1\r\n\r\n",
	    "GET http://example.com:80@evil.com/ HTTP/1.1\r\n\r\n",
	    "GET https://example.com/ HTTP/1.1\r\n\r\n",
	    "GET ftp://example.com/ HTTP/1.1\r\n\r\n",
	    "GET http:///x HTTP/1.1\r\nHost: a.com\r\n\r\n",
	    "GET http://a.com#f HTTP/1.1\r\n\r\n",
	    "GET http://a.com%2fx/ HTTP/1.1\r\n\r\n",
	    "GET http://[::1]/ HTTP/1.1\r\n\r\n",
	    "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n",
	    "GET http://a.com:/ HTTP/1.1\r\n\r\n",
	    "GET example.com:80 HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct peek p;
		int r = parse(bad[i], strlen(bad[i]), &p);
		if (r != -EINVAL)
			fail_msg("%s: %d", bad[i], r);
	}
}

static void test_http_connect(void **state)
{
	(void)state;
	expect_http("CONNECT example.com:443 HTTP/1.1\r\n\r\n", PEEK_CONNECT, "example.com", 443);
	expect_http("CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
		    "Proxy-Connection: keep-alive\r\n\r\n",
		    PEEK_CONNECT, "example.com", 443);
	expect_http("CONNECT a.example.com:00022 HTTP/1.1\r\n\r\n", PEEK_CONNECT, "a.example.com",
		    22);
	expect_http("CONNECT a.example.com:22 HTTP/1.0\r\nHost: a.example.com\r\n\r\n",
		    PEEK_CONNECT, "a.example.com", 22);
	const char *bad[] = {
	    "CONNECT example.com HTTP/1.1\r\n\r\n", /* no port */
	    "CONNECT example.com: HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:0 HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:65536 HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:443443 HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:000443 HTTP/1.1\r\n\r\n",
	    "CONNEC example.com:443 HTTP/1.1\r\n\r\n", /* authority-form is for CONNECT only */
	    "CONNECTS example.com:443 HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:+443 HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:44a HTTP/1.1\r\n\r\n",
	    "CONNECT / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	    "CONNECT http://example.com:443/ HTTP/1.1\r\n\r\n",
	    "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n",
	    "CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
	    "CONNECT example.com:443 HTTP/1.1\r\nHost: other.com:443\r\n\r\n",
	    "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:444\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct peek p;
		int r = parse(bad[i], strlen(bad[i]), &p);
		if (r != -EINVAL)
			fail_msg("%s: %d", bad[i], r);
	}
	/* the port is checked as soon as the request line is in */
	expect_http_error("CONNECT example.com HTTP/1.1\r\n", -EINVAL);
}

static void test_http_host_header(void **state)
{
	(void)state;
	expect_http_error("GET / HTTP/1.1\r\n\r\n", -ENOENT);
	expect_http_error("GET / HTTP/1.0\r\nAccept: */*\r\n\r\n", -ENOENT);
	expect_http_error("GET / HTTP/1.1\r\nX-Host: a.com\r\n\r\n", -ENOENT);
	/* two, whatever their case or value; refused as soon as the second is in */
	expect_http_error("GET / HTTP/1.1\r\nHost: a.com\r\nhost: a.com\r\n\r\n", -EINVAL);
	expect_http_error("GET / HTTP/1.1\r\nHost: a.com\r\nX: y\r\nHOST: b.com\r\n", -EINVAL);
	expect_http_error("GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nHost: a.com\r\n\r\n",
			  -EINVAL);
	const char *bad[] = {
	    "",		  "a.com:",	 "a.com:0",   "a.com:99999", "a.com:80:80",
	    "1.2.3.4",	  "1.2.3.4:80",	 "127.1",     "0x7f.0.0.1",  "[::1]",
	    "[::1]:80",	  "2130706433",	 "localhost", "a..com",	     "a.com/x",
	    "user@a.com", "a.com a.com", "a\xff.com", "-a.com",	     "a.com,b.com",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char req[128];
		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
		struct peek p;
		int r = parse(req, strlen(req), &p);
		if (r != -EINVAL)
			fail_msg("Host: %s: %d", bad[i], r);
	}
}

static void test_http_framing_refused(void **state)
{
	(void)state;
	const struct {
		const char *head;
		size_t refused_at; /* the shortest prefix already refused */
	} bad[] = {
	    {"GET / HTTP/1.1\nHost: a.com\n\n", 15},			 /* bare LF */
	    {"GET / HTTP/1.1\r\nHost: a.com\n\r\n", 28},		 /* ... in a header */
	    {"GET / HTTP/1.1\r\nHost: a.com\r\n\n", 30},		 /* ... at the end */
	    {"GET / HTTP/1.1\rHost: a.com\r\n\r\n", 16},		 /* bare CR */
	    {"GET / HTTP/1.1\r\nHost: a.com\r\nX: a\r\n b\r\n\r\n", 36}, /* obs-fold */
	    {"GET / HTTP/1.1\r\nHost: a.com\r\nX: a\r\n\tb\r\n\r\n", 36},
	    {"GET / HTTP/1.1\r\n Host: a.com\r\n\r\n", 17},
	    {"GET / HTTP/1.1\r\nHost: a.com\r\nX: \x01\r\n\r\n", 33}, /* a control byte */
	    {"GET / HTTP/1.1\r\nHost: a.com\r\nX: \x7f\r\n\r\n", 33},
	    {"GET /\x1b HTTP/1.1\r\nHost: a.com\r\n\r\n", 6},
	    {"GET / HTTP/1.1\r\nHost : a.com\r\n\r\n", 30}, /* space before ':' */
	    {"GET / HTTP/1.1\r\nHost a.com\r\n\r\n", 28},   /* no ':' */
	    {"GET / HTTP/1.1\r\n: a.com\r\n\r\n", 25},	    /* no name */
	    {"GET  / HTTP/1.1\r\nHost: a.com\r\n\r\n", 17}, /* two spaces */
	    {"GET / HTTP/1.1 \r\nHost: a.com\r\n\r\n", 17},
	    {"GET /\tx HTTP/1.1\r\nHost: a.com\r\n\r\n", 18},
	    {"GET / HTTP/1.2\r\nHost: a.com\r\n\r\n", 16},
	    {"GET / HTTP/2\r\nHost: a.com\r\n\r\n", 14},
	    {"GET / http/1.1\r\nHost: a.com\r\n\r\n", 16},
	    {"GET /\r\nHost: a.com\r\n\r\n", 7}, /* HTTP/0.9 */
	    {"GET\r\n\r\n", 5},
	    {"G(T / HTTP/1.1\r\nHost: a.com\r\n\r\n", 16},
	    {"OPTIONS * HTTP/1.1\r\nHost: a.com\r\n\r\n", 20},
	    {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 16}, /* the HTTP/2 preface */
	    {"SSH-2.0-OpenSSH_9.6\r\n", 21},	      /* not HTTP, though it looks so */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *h = bad[i].head;
		struct peek p;
		int r = parse(h, strlen(h), &p);
		if (r != -EINVAL)
			fail_msg("%zu: %d", i, r);
		r = parse(h, bad[i].refused_at, &p);
		if (r != -EINVAL)
			fail_msg("%zu: %d at %zu bytes", i, r, bad[i].refused_at);
		r = parse(h, bad[i].refused_at - 1, &p);
		if (r != 0 || p.kind != PEEK_MORE)
			fail_msg("%zu: %d at %zu bytes, not more", i, r, bad[i].refused_at - 1);
	}
	/* a NUL, anywhere */
	static const char nul[] = "GET / HTTP/1.1\r\nHost: a.com\r\nX: a\0b\r\n\r\n";
	expect_error(nul, sizeof(nul) - 1, -EINVAL);
	expect_error(nul, 34, -EINVAL);
	static const char nul_line[] = "GET /\0 HTTP/1.1\r\n";
	expect_error(nul_line, 6, -EINVAL);
}

static void test_http_limits(void **state)
{
	(void)state;
	static char req[PEEK_MAX + 64];
	/* a request line of PEEK_LINE_MAX bytes, and one more */
	static const char tail[] = " HTTP/1.1\r\nHost: a.com\r\n\r\n";
	memcpy(req, "GET /", 5);
	memset(req + 5, 'a', PEEK_LINE_MAX - 5 - 9);
	memcpy(req + PEEK_LINE_MAX - 9, tail, sizeof(tail));
	assert_int_equal(strchr(req, '\r') - req, PEEK_LINE_MAX);
	expect_http(req, PEEK_HTTP, "a.com", 0);
	memset(req + 5, 'a', PEEK_LINE_MAX - 5 - 8);
	memcpy(req + PEEK_LINE_MAX - 8, tail, sizeof(tail));
	expect_http_error(req, -EINVAL);
	expect_error(req, PEEK_LINE_MAX + 1, -EINVAL); /* without waiting for its end */
	struct peek p;
	assert_int_equal(parse(req, PEEK_LINE_MAX, &p), 0);
	assert_int_equal(p.kind, PEEK_MORE);

	/* a head of PEEK_MAX bytes exactly, and one more */
	size_t n = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: a.com\r\nX: ");
	memset(req + n, 'x', PEEK_MAX - n - 4);
	memcpy(req + PEEK_MAX - 4, "\r\n\r\n", 5);
	expect_http(req, PEEK_HTTP, "a.com", 0);
	memset(req + n, 'x', PEEK_MAX - n - 3);
	memcpy(req + PEEK_MAX - 3, "\r\n\r\n", 5);
	expect_http_error(req, -E2BIG);
	expect_error(req, PEEK_MAX, -E2BIG);
	assert_int_equal(parse(req, PEEK_MAX - 1, &p), 0);
	assert_int_equal(p.kind, PEEK_MORE);
}

static void test_neither(void **state)
{
	(void)state;
	struct peek p;
	assert_int_equal(parse("", 0, &p), 0);
	assert_int_equal(p.kind, PEEK_MORE);
	const char *bad[] = {
	    "get / HTTP/1.1\r\n",
	    "\x80\x2e\x01\x03\x01", /* SSLv2 hello */
	    " GET /",
	    "\r\n",
	    "\0",
	    "\x19\x03\x01",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = strlen(bad[i]) ? strlen(bad[i]) : 1;
		expect_error(bad[i], n, -EPROTO);
		expect_error(bad[i], 1, -EPROTO);
	}
}

static void test_is_host_name(void **state)
{
	(void)state;
	char name[300];
	memset(name, 'a', sizeof(name));
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	const char *good[] = {"a.b",	     "example.com",	      "WWW.Example.Com",
			      "_dmarc.a.io", "xn--bcher-kva.example", "a-b.c-d",
			      "1.a",	     "123.example.com",	      name};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!peek_is_host_name(good[i]))
			fail_msg("'%s' refused", good[i]);
	char label[80];
	memset(label, 'a', 64);
	memcpy(label + 64, ".com", 5);
	name[253] = 'a';
	name[254] = '\0';
	const char *bad[] = {"",	"com",	"a..b",	 ".a.b",    "a.b.",  "-a.b",
			     "a-.b",	"a.-b", "a.b-",	 "1.2.3.4", "127.1", "0x7f.1",
			     "a.0x1",	"a.1b", "a.b c", "a.b:1",   "[::1]", "::1",
			     "a.b\xc3", "a*.b", "a.b/",	 "a\\.b",   label,   name};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (peek_is_host_name(bad[i]))
			fail_msg("'%s' admitted", bad[i]);
	memset(label, 'a', 63);
	memcpy(label + 63, ".com", 5);
	assert_true(peek_is_host_name(label));
}

/* ---- hostile bytes, through the fuzz target's checks ---- */

static uint64_t rng = 0x9e3779b97f4a7c15;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fuzz_one(const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, data, len);
	LLVMFuzzerTestOneInput(copy, len);
	free(copy);
}

/* Valid openings to truncate and mutate. */
static size_t samples(struct bytes *out, size_t max)
{
	size_t n = 0;
	ext_buf.n = 0;
	ext_common(&ext_buf);
	ext_sni(&ext_buf, "fuzz.example.com");
	ext_alpn(&ext_buf);
	hello(&msg_buf, &ext_buf);
	one_record(&out[n++], &msg_buf);
	const size_t cuts[] = {3, 100};
	records(&out[n++], &msg_buf, cuts, 2);
	const char *heads[] = {
	    "GET / HTTP/1.1\r\nHost: fuzz.example.com:8080\r\nAccept: */*\r\n\r\n",
	    "GET http://fuzz.example.com/x HTTP/1.1\r\nHost: fuzz.example.com\r\n\r\n",
	    "CONNECT fuzz.example.com:443 HTTP/1.1\r\nHost: fuzz.example.com:443\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		out[n].n = 0;
		put(&out[n++], heads[i], strlen(heads[i]));
	}
	assert_true(n <= max);
	return n;
}

static void test_every_truncation(void **state)
{
	(void)state;
	static struct bytes s[8];
	size_t n = samples(s, 8);
	for (size_t i = 0; i < n; i++)
		for (size_t len = 0; len <= s[i].n; len++)
			fuzz_one(s[i].b, len);
}

static void test_random_bytes(void **state)
{
	(void)state;
	static const uint8_t firsts[] = {22, 'G', 'C', 'P', 23, 0};
	uint8_t buf[512];
	for (int i = 0; i < 200000; i++) {
		size_t len = next() % sizeof(buf);
		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)next();
		if (len > 0 && i % 2 == 0)
			buf[0] = firsts[next() % sizeof(firsts)];
		if (len > 2 && i % 4 == 0) {
			buf[1] = 3;
			buf[2] = 1;
		}
		fuzz_one(buf, len);
	}
}

static void test_mutations(void **state)
{
	(void)state;
	static struct bytes s[8];
	static uint8_t buf[PEEK_MAX];
	size_t n = samples(s, 8);
	static const uint8_t interesting[] = {0, 1, 3, 0x7f, 0x80, 0xff, '\r', '\n', ' ', ':', '.'};
	for (int i = 0; i < 100000; i++) {
		const struct bytes *from = &s[next() % n];
		size_t len = from->n;
		memcpy(buf, from->b, len);
		unsigned changes = 1 + (unsigned)(next() % 3);
		for (unsigned c = 0; c < changes; c++) {
			size_t at = next() % len;
			switch (next() % 4) {
			case 0:
				buf[at] = (uint8_t)next();
				break;
			case 1:
				buf[at] = interesting[next() % sizeof(interesting)];
				break;
			case 2:
				buf[at] ^= (uint8_t)(1u << (next() % 8));
				break;
			default:
				buf[at] = (uint8_t)(buf[at] + 1);
			}
		}
		fuzz_one(buf, next() % 8 == 0 ? next() % (len + 1) : len);
	}
}

/* fuzz/corpus/peek/: every input through the fuzz target's checks */
static void test_replay_corpus(void **state)
{
	(void)state;
	size_t n = corpus_replay(FUZZ_CORPUS_DIR, 20000, LLVMFuzzerTestOneInput);
	if (n < 10)
		fail_msg("only %zu inputs in %s: the corpus went missing", n, FUZZ_CORPUS_DIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_one_record),
	    cmocka_unit_test(test_replay_corpus),
	    cmocka_unit_test(test_tls_split_over_records),
	    cmocka_unit_test(test_tls_extensions_around_sni),
	    cmocka_unit_test(test_tls_name_is_normalised),
	    cmocka_unit_test(test_tls_without_sni),
	    cmocka_unit_test(test_tls_ech_refused),
	    cmocka_unit_test(test_tls_sni_list),
	    cmocka_unit_test(test_tls_two_names_refused),
	    cmocka_unit_test(test_tls_names_refused),
	    cmocka_unit_test(test_tls_lengths_that_overrun),
	    cmocka_unit_test(test_tls_fields_checked),
	    cmocka_unit_test(test_tls_records_checked),
	    cmocka_unit_test(test_tls_too_big),
	    cmocka_unit_test(test_http_origin_form),
	    cmocka_unit_test(test_http_absolute_form),
	    cmocka_unit_test(test_http_connect),
	    cmocka_unit_test(test_http_host_header),
	    cmocka_unit_test(test_http_framing_refused),
	    cmocka_unit_test(test_http_limits),
	    cmocka_unit_test(test_neither),
	    cmocka_unit_test(test_is_host_name),
	    cmocka_unit_test(test_every_truncation),
	    cmocka_unit_test(test_random_bytes),
	    cmocka_unit_test(test_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
