/*
 * test-egress-dns.c - the DNS message layer: queries built by hand, the
 * one shape the parser accepts and every way out of it, answers decoded
 * back byte by byte, and every truncation and random bytes through the
 * fuzz target's checks (under ASan, each message sits in a heap block of
 * exactly its size, so a read past its end is caught).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "corpus-replay.h"
#include "../../fuzz/fuzz-dns.c"

/* A message under construction. */
struct pkt {
	uint8_t b[DNS_MSG_MAX + 64];
	size_t len;
};

static void put8(struct pkt *p, uint8_t v)
{
	assert_true(p->len < sizeof(p->b));
	p->b[p->len++] = v;
}

static void put16(struct pkt *p, uint16_t v)
{
	put8(p, (uint8_t)(v >> 8));
	put8(p, (uint8_t)v);
}

static void put_bytes(struct pkt *p, const void *bytes, size_t n)
{
	assert_true(n <= sizeof(p->b) - p->len);
	if (n == 0)
		return; /* bytes may be NULL */
	memcpy(p->b + p->len, bytes, n);
	p->len += n;
}

static void header(struct pkt *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
		   uint16_t ns, uint16_t ar)
{
	p->len = 0;
	put16(p, id);
	put16(p, flags);
	put16(p, qd);
	put16(p, an);
	put16(p, ns);
	put16(p, ar);
}

/* One label of raw bytes, whatever they are. */
static void label(struct pkt *p, const void *bytes, size_t n)
{
	put8(p, (uint8_t)n);
	put_bytes(p, bytes, n);
}

/* A dotted name as labels and the final zero ("" is the root). */
static void name(struct pkt *p, const char *dotted)
{
	const char *s = dotted;
	while (*s) {
		const char *dot = strchr(s, '.');
		size_t n = dot ? (size_t)(dot - s) : strlen(s);
		label(p, s, n);
		s += n + (dot != NULL);
	}
	put8(p, 0);
}

static void opt(struct pkt *p, uint16_t udp_size, uint8_t version, const void *options,
		uint16_t options_len)
{
	put8(p, 0);
	put16(p, DNS_TYPE_OPT);
	put16(p, udp_size);
	put8(p, 0); /* extended rcode */
	put8(p, version);
	put16(p, 0x8000); /* DO: ignored */
	put16(p, options_len);
	put_bytes(p, options, options_len);
}

#define RD 0x0100

/* A COOKIE option, as dig sends it. */
static const uint8_t cookie[] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};

static struct pkt query(uint16_t id, const char *qname, uint16_t qtype, bool edns)
{
	struct pkt p;
	header(&p, id, RD, 1, 0, 0, edns ? 1 : 0);
	name(&p, qname);
	put16(&p, qtype);
	put16(&p, DNS_CLASS_IN);
	if (edns)
		opt(&p, 4096, 0, cookie, sizeof(cookie));
	return p;
}

/* Parse msg from a heap block of exactly len bytes, so ASan sees any overrun. */
static int parse_exact(const uint8_t *msg, size_t len, struct dns_query *q)
{
	uint8_t *copy = malloc(len);
	assert_true(copy != NULL || len == 0);
	if (len)
		memcpy(copy, msg, len);
	int r = dns_query_parse(copy, len, q);
	free(copy);
	return r;
}

static int parse(const struct pkt *p, struct dns_query *q)
{
	memset(q, 0xa5, sizeof(*q)); /* to see what a refusal writes */
	return parse_exact(p->b, p->len, q);
}

static uint16_t get16(const uint8_t *b)
{
	return (uint16_t)(b[0] << 8 | b[1]);
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)get16(b) << 16 | get16(b + 2);
}

static void test_parse_a_query(void **state)
{
	(void)state;
	struct pkt p = query(0x1234, "example.com", DNS_TYPE_A, false);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	assert_int_equal(q.id, 0x1234);
	assert_true(q.rd);
	assert_string_equal(q.name, "example.com");
	assert_int_equal(q.qtype, DNS_TYPE_A);
	assert_int_equal(q.qclass, DNS_CLASS_IN);
	assert_false(q.edns);
	assert_int_equal(q.edns_udp_size, 0);
	assert_int_equal(q.question_len, 13 + 4);
	assert_int_equal(dns_query_udp_max(&q), DNS_UDP_MAX);

	/* RD clear, and the bits a query may carry but that mean nothing here */
	header(&p, 7, 0x0400 | 0x0200 | 0x0080 | 0x0040 | 0x0020 | 0x0010 | 0x0003, 1, 0, 0, 0);
	name(&p, "a.b");
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	assert_int_equal(parse(&p, &q), 0);
	assert_false(q.rd);
	assert_string_equal(q.name, "a.b");
}

static void test_parse_aaaa_with_edns(void **state)
{
	(void)state;
	struct pkt p = query(0xbeef, "ipv6.example", DNS_TYPE_AAAA, true);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	assert_int_equal(q.id, 0xbeef);
	assert_string_equal(q.name, "ipv6.example");
	assert_int_equal(q.qtype, DNS_TYPE_AAAA);
	assert_true(q.edns);
	assert_int_equal(q.edns_udp_size, 4096);
	assert_int_equal(q.question_len, 14 + 4);
	assert_int_equal(dns_query_udp_max(&q), 4096);

	p = query(1, "ipv6.example", DNS_TYPE_AAAA, false);
	assert_int_equal(parse(&p, &q), 0);
	assert_false(q.edns);

	/* a size below 512 counts as 512; one above DNS_MSG_MAX is capped for UDP */
	static const struct {
		uint16_t asked, size, udp_max;
	} sizes[] = {{0, 512, 512}, {100, 512, 512}, {1232, 1232, 1232}, {65535, 65535, 4096}};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		header(&p, 2, RD, 1, 0, 0, 1);
		name(&p, "x");
		put16(&p, DNS_TYPE_A);
		put16(&p, DNS_CLASS_IN);
		opt(&p, sizes[i].asked, 0, NULL, 0);
		assert_int_equal(parse(&p, &q), 0);
		assert_true(q.edns);
		assert_int_equal(q.edns_udp_size, sizes[i].size);
		assert_int_equal(dns_query_udp_max(&q), sizes[i].udp_max);
	}
}

static void test_parse_names(void **state)
{
	(void)state;
	struct dns_query q;
	struct pkt p = query(3, "WwW.ExAmple.COM", DNS_TYPE_A, false);
	assert_int_equal(parse(&p, &q), 0);
	assert_string_equal(q.name, "www.example.com");

	p = query(3, "_dmarc.My-Host1.EXAMPLE", DNS_TYPE_TXT, false);
	assert_int_equal(parse(&p, &q), 0);
	assert_string_equal(q.name, "_dmarc.my-host1.example");
	assert_int_equal(q.qtype, DNS_TYPE_TXT);

	/* the root: one zero byte */
	p = query(4, "", DNS_TYPE_NS, true);
	assert_int_equal(parse(&p, &q), 0);
	assert_string_equal(q.name, "");
	assert_int_equal(q.question_len, 1 + 4);
	assert_true(q.edns);

	/* the longest label and the longest name */
	char l63[64], longest[DNS_NAME_MAX + 1];
	memset(l63, 'a', 63);
	l63[63] = '\0';
	p = query(5, l63, DNS_TYPE_A, false);
	assert_int_equal(parse(&p, &q), 0);
	assert_string_equal(q.name, l63);
	snprintf(longest, sizeof(longest), "%s.%s.%s.%.61s", l63, l63, l63, l63);
	assert_int_equal(strlen(longest), DNS_NAME_MAX);
	p = query(6, longest, DNS_TYPE_A, true);
	assert_int_equal(parse(&p, &q), 0);
	assert_string_equal(q.name, longest);
	assert_int_equal(q.question_len, DNS_NAME_MAX + 2 + 4);
}

/* A refusal: the code, the id written, and nothing else. */
static void expect_refused(const struct pkt *p, int rc, const char *what)
{
	struct dns_query q;
	int r = parse(p, &q);
	if (r != rc)
		fail_msg("%s: %d, expected %d", what, r, rc);
	uint16_t id = rc == -EBADMSG ? 0xa5a5 : get16(p->b);
	if (q.id != id)
		fail_msg("%s: id %#x, expected %#x", what, q.id, id);
	if ((uint8_t)q.name[0] != 0xa5 || q.question_len != (size_t)0xa5a5a5a5a5a5a5a5ULL)
		fail_msg("%s: a refusal wrote more than the id", what);
}

/* A query for A with the name's labels as given (raw), for the label tests. */
static struct pkt query_raw_label(const void *bytes, size_t n)
{
	struct pkt p;
	header(&p, 0x4242, RD, 1, 0, 0, 0);
	label(&p, "ok", 2);
	label(&p, bytes, n);
	label(&p, "com", 3);
	put8(&p, 0);
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	return p;
}

static void test_refuse_names(void **state)
{
	(void)state;
	struct pkt p;

	/* compression pointers: to the name itself, after a label, to the header */
	header(&p, 0x1111, RD, 1, 0, 0, 0);
	put16(&p, 0xc00c);
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	expect_refused(&p, -EINVAL, "pointer to itself");
	header(&p, 0x1112, RD, 1, 0, 0, 0);
	label(&p, "www", 3);
	put16(&p, 0xc000);
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	expect_refused(&p, -EINVAL, "pointer after a label");
	/* extended label types 0x40 and 0x80 */
	header(&p, 0x1113, RD, 1, 0, 0, 0);
	put8(&p, 0x41);
	put8(&p, 'a');
	put8(&p, 0);
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	expect_refused(&p, -EINVAL, "label type 0x40");
	p.b[DNS_HEADER_LEN] = 0x81;
	expect_refused(&p, -EINVAL, "label type 0x80");

	/* a label of 64 bytes, and a name of 254 */
	char l64[65], too_long[300];
	memset(l64, 'a', 64);
	l64[64] = '\0';
	p = query(0x2222, l64, DNS_TYPE_A, false);
	expect_refused(&p, -EINVAL, "label of 64");
	snprintf(too_long, sizeof(too_long), "%.63s.%.63s.%.63s.%.62s", l64, l64, l64, l64);
	assert_int_equal(strlen(too_long), DNS_NAME_MAX + 1);
	p = query(0x2223, too_long, DNS_TYPE_A, true);
	expect_refused(&p, -EINVAL, "name of 254");
	/* many one-byte labels: 128 of them is 255 bytes as text */
	header(&p, 0x2224, RD, 1, 0, 0, 0);
	for (int i = 0; i < 128; i++)
		label(&p, "a", 1);
	put8(&p, 0);
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	expect_refused(&p, -EINVAL, "128 labels");

	/* bytes a label may not hold */
	static const struct {
		const char *bytes;
		size_t n;
		const char *what;
	} bad[] = {
	    {"a b", 3, "space"},      {"a.b", 3, "dot inside a label"},
	    {"a\0b", 3, "NUL"},	      {"a\xc0", 2, "0xc0 in a label"},
	    {"\xc3\xa9", 2, "UTF-8"}, {"*", 1, "wildcard"},
	    {"a\\b", 3, "backslash"}, {"a/b", 3, "slash"},
	    {"a\x7f", 2, "DEL"},      {"a\n", 2, "newline"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = query_raw_label(bad[i].bytes, bad[i].n);
		expect_refused(&p, -EINVAL, bad[i].what);
	}
	/* an empty label can only be the end: "ok" then 0 leaves "com" as trailing bytes */
	p = query_raw_label("", 0);
	expect_refused(&p, -EINVAL, "empty label");
	p = query_raw_label("fine-label_1", 12);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	assert_string_equal(q.name, "ok.fine-label_1.com");
}

static void test_refuse_header_and_sections(void **state)
{
	(void)state;
	struct pkt p;

	/* too short to have an id: dropped */
	p = query(0x3333, "example.com", DNS_TYPE_A, false);
	p.len = 11;
	expect_refused(&p, -EBADMSG, "11 bytes");
	p.len = 0;
	expect_refused(&p, -EBADMSG, "0 bytes");

	/* a response: dropped, never answered */
	p = query(0x3334, "example.com", DNS_TYPE_A, false);
	p.b[2] |= 0x80;
	expect_refused(&p, -EBADMSG, "QR=1");

	/* another opcode: NOTIMP, whatever follows the header */
	for (unsigned opcode = 1; opcode < 16; opcode++) {
		p = query(0x3335, "example.com", DNS_TYPE_A, false);
		p.b[2] = (uint8_t)(opcode << 3 | 1);
		expect_refused(&p, -EOPNOTSUPP, "opcode");
	}
	header(&p, 0x3336, 2 << 11, 0, 5, 5, 5);
	expect_refused(&p, -EOPNOTSUPP, "opcode 2 (STATUS), header only");

	/* counts */
	static const struct {
		uint16_t qd, an, ns, ar;
		const char *what;
	} counts[] = {
	    {0, 0, 0, 0, "QDCOUNT 0"},		{2, 0, 0, 0, "QDCOUNT 2"},
	    {1, 1, 0, 0, "ANCOUNT 1"},		{1, 0, 1, 0, "NSCOUNT 1"},
	    {1, 0, 0, 2, "ARCOUNT 2"},		{1, 0, 0, 1, "ARCOUNT 1 and no record"},
	    {1, 0, 0, 0xffff, "ARCOUNT 65535"},
	};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		header(&p, 0x3337, RD, counts[i].qd, counts[i].an, counts[i].ns, counts[i].ar);
		name(&p, "example.com");
		put16(&p, DNS_TYPE_A);
		put16(&p, DNS_CLASS_IN);
		expect_refused(&p, -EINVAL, counts[i].what);
	}
	/* two questions, both present */
	header(&p, 0x3338, RD, 2, 0, 0, 0);
	for (int i = 0; i < 2; i++) {
		name(&p, "example.com");
		put16(&p, DNS_TYPE_A);
		put16(&p, DNS_CLASS_IN);
	}
	expect_refused(&p, -EINVAL, "two questions");
	/* two OPT records */
	p = query(0x3339, "example.com", DNS_TYPE_A, true);
	p.b[11] = 2;
	opt(&p, 1232, 0, NULL, 0);
	expect_refused(&p, -EINVAL, "two OPTs");

	/* class: CH and ANY are well-formed but not ours: NOTIMP */
	p = query(0x3340, "version.bind", DNS_TYPE_TXT, false);
	p.b[p.len - 1] = DNS_CLASS_CH;
	expect_refused(&p, -EOPNOTSUPP, "class CH");
	p.b[p.len - 1] = 255;
	expect_refused(&p, -EOPNOTSUPP, "class ANY");
	/* ... but malformed before well-formed: a CH query with trailing bytes is FORMERR */
	p.b[p.len - 1] = DNS_CLASS_CH;
	put8(&p, 0);
	expect_refused(&p, -EINVAL, "class CH, trailing byte");

	/* trailing bytes, with and without EDNS */
	p = query(0x3341, "example.com", DNS_TYPE_A, false);
	put8(&p, 0);
	expect_refused(&p, -EINVAL, "a trailing byte");
	p = query(0x3342, "example.com", DNS_TYPE_A, true);
	put16(&p, 0xffff);
	expect_refused(&p, -EINVAL, "trailing bytes after the OPT");

	/* a question cut short: no class, half a type, no zero byte */
	p = query(0x3343, "example.com", DNS_TYPE_A, false);
	p.len -= 2;
	expect_refused(&p, -EINVAL, "no class");
	p.len -= 1;
	expect_refused(&p, -EINVAL, "half a type");
	p.len -= 2;
	assert_int_equal(p.b[p.len - 1], 'm');
	expect_refused(&p, -EINVAL, "no final zero");
	header(&p, 0x3344, RD, 1, 0, 0, 0);
	put8(&p, 10);
	put_bytes(&p, "short", 5);
	expect_refused(&p, -EINVAL, "label past the end");

	/* larger than any message we read: padded (option 12) to DNS_MSG_MAX, then one more */
	static uint8_t padding[DNS_MSG_MAX];
	size_t before = DNS_HEADER_LEN + 17 + 11 + 4;
	header(&p, 0x3345, RD, 1, 0, 0, 1);
	name(&p, "example.com");
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	padding[1] = 12;
	padding[2] = (uint8_t)((DNS_MSG_MAX - before) >> 8);
	padding[3] = (uint8_t)(DNS_MSG_MAX - before);
	opt(&p, 1232, 0, padding, (uint16_t)(DNS_MSG_MAX - before + 4));
	assert_int_equal(p.len, DNS_MSG_MAX);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	p.len = DNS_HEADER_LEN + 17;
	padding[3]++;
	opt(&p, 1232, 0, padding, (uint16_t)(DNS_MSG_MAX - before + 5));
	assert_int_equal(p.len, DNS_MSG_MAX + 1);
	expect_refused(&p, -EINVAL, "over DNS_MSG_MAX");
}

static void test_refuse_additional(void **state)
{
	(void)state;
	struct pkt p;
	struct pkt base = query(0x5555, "example.com", DNS_TYPE_A, false);
	base.b[11] = 1; /* ARCOUNT 1 */

	/* an A record where the OPT should be */
	p = base;
	name(&p, "example.com");
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	put16(&p, 0);
	put16(&p, 60);
	put16(&p, 4);
	put_bytes(&p, "\x01\x02\x03\x04", 4);
	expect_refused(&p, -EINVAL, "additional A record");
	/* ... with the root's name, which only an OPT may have here */
	p = base;
	put8(&p, 0);
	put16(&p, DNS_TYPE_A);
	put16(&p, DNS_CLASS_IN);
	put16(&p, 0);
	put16(&p, 60);
	put16(&p, 0);
	expect_refused(&p, -EINVAL, "additional A record for the root");

	/* an OPT with a name that is not the root, or is a pointer to the question */
	p = base;
	label(&p, "x", 1);
	opt(&p, 1232, 0, NULL, 0);
	expect_refused(&p, -EINVAL, "OPT with a name");
	p = base;
	put16(&p, 0xc00c);
	put16(&p, DNS_TYPE_OPT);
	put16(&p, 1232);
	put16(&p, 0);
	put16(&p, 0);
	put16(&p, 0);
	expect_refused(&p, -EINVAL, "OPT named by a pointer");
	p = base;
	opt(&p, 1232, 0, NULL, 0);
	p.b[base.len] = 1; /* a one-byte name's length, and then what reads as an OPT */
	expect_refused(&p, -EINVAL, "OPT with a name byte");

	/* EDNS version 1: FORMERR, the resolver retries without */
	p = base;
	opt(&p, 1232, 1, NULL, 0);
	expect_refused(&p, -EINVAL, "EDNS version 1");

	/* options that do not tile the rdata */
	p = base;
	opt(&p, 1232, 0, "\x00\x0a\x00", 3);
	expect_refused(&p, -EINVAL, "three bytes of option");
	p = base;
	opt(&p, 1232, 0, "\x00\x0a\x00\x09\x01\x02\x03\x04\x05\x06\x07\x08", 12);
	expect_refused(&p, -EINVAL, "option longer than the rdata");
	p = base;
	opt(&p, 1232, 0, "\x00\x0a\x00\x06\x01\x02", 6);
	put_bytes(&p, "\x03\x04\x05\x06", 4);
	expect_refused(&p, -EINVAL, "option running into trailing bytes");
	p = base;
	opt(&p, 1232, 0, cookie, sizeof(cookie));
	p.b[p.len - sizeof(cookie) - 1] += 1; /* rdlength one past the end */
	expect_refused(&p, -EINVAL, "rdlength past the end");
	p = base;
	opt(&p, 1232, 0, NULL, 0);
	p.len -= 1;
	expect_refused(&p, -EINVAL, "OPT cut short");

	/* two options, one empty, are fine */
	p = base;
	opt(&p, 1232, 0, "\x00\x0c\x00\x00\x00\x0a\x00\x02\xab\xcd", 10);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	assert_true(q.edns);
	assert_int_equal(q.edns_udp_size, 1232);
}

/* Every prefix of a valid query is refused, and never read past. */
static void test_every_truncation(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		bool edns;
	} cases[] = {{"www.example.com", true}, {"", true}, {"a", false}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct pkt p = query(0x6666, cases[c].name, DNS_TYPE_A, cases[c].edns);
		struct dns_query q;
		for (size_t len = 0; len < p.len; len++) {
			int r = parse_exact(p.b, len, &q);
			int want = len < DNS_HEADER_LEN ? -EBADMSG : -EINVAL;
			if (r != want)
				fail_msg("%s, %zu of %zu bytes: %d, expected %d", cases[c].name,
					 len, p.len, r, want);
			uint8_t *copy = malloc(len);
			assert_true(copy != NULL || len == 0);
			if (len)
				memcpy(copy, p.b, len);
			LLVMFuzzerTestOneInput(copy, len);
			free(copy);
		}
		assert_int_equal(parse_exact(p.b, p.len, &q), 0);
		LLVMFuzzerTestOneInput(p.b, p.len);
	}
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32);
}

/* Random bytes, and valid queries with random bytes changed, through the fuzz checks. */
static void test_random_bytes(void **state)
{
	(void)state;
	size_t accepted = 0, refused = 0;
	for (int i = 0; i < 20000; i++) {
		size_t len = rng() % 600;
		uint8_t *msg = malloc(len);
		assert_true(msg != NULL || len == 0);
		for (size_t j = 0; j < len; j++)
			msg[j] = (uint8_t)rng();
		LLVMFuzzerTestOneInput(msg, len);
		free(msg);
	}
	const char *names[] = {"www.example.com", "", "a.b.c.d.e", "_srv._tcp.example"};
	for (int i = 0; i < 50000; i++) {
		struct pkt p =
		    query((uint16_t)rng(), names[i % 4], (uint16_t)(rng() % 70), i % 3 != 0);
		int changes = 1 + (int)(rng() % 3);
		for (int k = 0; k < changes; k++) {
			uint8_t v = (uint8_t)rng();
			size_t at = rng() % p.len;
			if (k == 0 && at < 4) /* keep most of them queries */
				at += 4;
			p.b[at] = rng() % 4 ? v : (uint8_t)(v & 0x3f);
		}
		if (rng() % 8 == 0)
			p.len -= rng() % p.len;
		uint8_t *msg = malloc(p.len);
		assert_true(msg != NULL || p.len == 0);
		memcpy(msg, p.b, p.len);
		struct dns_query q;
		if (dns_query_parse(msg, p.len, &q) == 0)
			accepted++;
		else
			refused++;
		LLVMFuzzerTestOneInput(msg, p.len);
		free(msg);
	}
	/* both sides of the parser were reached */
	assert_true(accepted > 1000);
	assert_true(refused > 1000);
}

struct answer {
	uint16_t id, flags, qd, an, ns, ar;
};

static struct answer decode(const uint8_t *out, ssize_t len)
{
	assert_true(len >= DNS_HEADER_LEN);
	return (struct answer){get16(out),     get16(out + 2), get16(out + 4),
			       get16(out + 6), get16(out + 8), get16(out + 10)};
}

static const uint8_t addrs[40][4] = {
    {192, 0, 2, 1},
    {198, 51, 100, 7},
    {203, 0, 113, 9},
    {192, 0, 2, 254},
};

static void fill_addrs(uint8_t a[40][4])
{
	for (int i = 0; i < 40; i++) {
		a[i][0] = 203;
		a[i][1] = 0;
		a[i][2] = 113;
		a[i][3] = (uint8_t)(i + 1);
	}
}

/* The A record at rec: a pointer to the question, A, IN, ttl, 4 bytes. */
static void expect_a_record(const uint8_t *rec, uint32_t ttl, const uint8_t addr[4])
{
	assert_int_equal(get16(rec), 0xc00c);
	assert_int_equal(get16(rec + 2), DNS_TYPE_A);
	assert_int_equal(get16(rec + 4), DNS_CLASS_IN);
	assert_int_equal(get32(rec + 6), ttl);
	assert_int_equal(get16(rec + 10), 4);
	assert_memory_equal(rec + 12, addr, 4);
}

static void test_answer_a(void **state)
{
	(void)state;
	/* the case the resolver chose comes back as it sent it */
	struct pkt p = query(0xa1b2, "ExAmple.COM", DNS_TYPE_A, false);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	uint8_t out[DNS_MSG_MAX];
	ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 3, 60, DNS_UDP_MAX, out,
				     sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN + 17 + 3 * 16);
	struct answer a = decode(out, n);
	assert_int_equal(a.id, 0xa1b2);
	assert_int_equal(a.flags, 0x8180); /* QR, RD, RA, NOERROR */
	assert_int_equal(a.qd, 1);
	assert_int_equal(a.an, 3);
	assert_int_equal(a.ns, 0);
	assert_int_equal(a.ar, 0);
	assert_memory_equal(out + DNS_HEADER_LEN,
			    "\x07"
			    "ExAmple"
			    "\x03"
			    "COM\0\0\x01\0\x01",
			    17);
	for (int i = 0; i < 3; i++)
		expect_a_record(out + DNS_HEADER_LEN + 17 + 16 * i, 60, addrs[i]);

	/* RD clear is copied; no addresses is an empty NOERROR */
	p.b[2] &= (uint8_t)~0x01;
	assert_int_equal(parse(&p, &q), 0);
	n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, NULL, 0, 60, DNS_UDP_MAX, out,
			     sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN + 17);
	a = decode(out, n);
	assert_int_equal(a.flags, 0x8080);
	assert_int_equal(a.an, 0);
}

static void test_answer_ttl_clamp(void **state)
{
	(void)state;
	struct pkt p = query(1, "example.com", DNS_TYPE_A, false);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	static const struct {
		uint32_t given, sent;
	} ttls[] = {{0, 0},	{60, 60},     {299, 299},	  {300, 300},
		    {301, 300}, {86400, 300}, {0x80000000u, 300}, {UINT32_MAX, 300}};
	for (size_t i = 0; i < sizeof(ttls) / sizeof(ttls[0]); i++) {
		uint8_t out[DNS_UDP_MAX];
		ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 1, ttls[i].given,
					     DNS_UDP_MAX, out, sizeof(out));
		assert_int_equal(n, DNS_HEADER_LEN + 17 + 16);
		expect_a_record(out + DNS_HEADER_LEN + 17, ttls[i].sent, addrs[0]);
	}
}

static void test_answer_truncates(void **state)
{
	(void)state;
	uint8_t many[40][4];
	fill_addrs(many);
	struct pkt p = query(0x7777, "example.com", DNS_TYPE_A, false);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	uint8_t out[DNS_MSG_MAX];

	/* 40 records do not fit 512 bytes: the first 30 do, with TC */
	size_t fit = (DNS_UDP_MAX - DNS_HEADER_LEN - 17) / 16;
	assert_int_equal(fit, 30);
	ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, (const uint8_t(*)[4])many, 40, 60,
				     dns_query_udp_max(&q), out, sizeof(out));
	assert_true(n > 0 && n <= DNS_UDP_MAX);
	assert_int_equal(n, DNS_HEADER_LEN + 17 + fit * 16);
	struct answer a = decode(out, n);
	assert_int_equal(a.flags, 0x8380); /* QR, TC, RD, RA */
	assert_int_equal(a.an, fit);
	for (size_t i = 0; i < fit; i++)
		expect_a_record(out + DNS_HEADER_LEN + 17 + 16 * i, 60, many[i]);

	/* exactly as many as fit: no TC */
	n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, (const uint8_t(*)[4])many, fit, 60,
			     DNS_UDP_MAX, out, sizeof(out));
	a = decode(out, n);
	assert_int_equal(a.flags, 0x8180);
	assert_int_equal(a.an, fit);

	/* over TCP all 40 go */
	n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, (const uint8_t(*)[4])many, 40, 60,
			     DNS_MSG_MAX, out, sizeof(out));
	a = decode(out, n);
	assert_int_equal(a.flags, 0x8180);
	assert_int_equal(a.an, 40);
	assert_int_equal(n, DNS_HEADER_LEN + 17 + 40 * 16);

	/* a max above DNS_MSG_MAX counts as DNS_MSG_MAX */
	static uint8_t lots[300][4];
	static uint8_t big[2 * DNS_MSG_MAX];
	n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, (const uint8_t(*)[4])lots, 300, 60,
			     SIZE_MAX, big, sizeof(big));
	assert_int_equal(n, DNS_HEADER_LEN + 17 + 254 * 16);
	a = decode(big, n);
	assert_int_equal(a.flags, 0x8380);
	assert_int_equal(a.an, 254);
}

static void expect_opt(const uint8_t *rec)
{
	assert_int_equal(rec[0], 0);
	assert_int_equal(get16(rec + 1), DNS_TYPE_OPT);
	assert_int_equal(get16(rec + 3), DNS_EDNS_UDP_SIZE);
	assert_int_equal(get32(rec + 5), 0);
	assert_int_equal(get16(rec + 9), 0);
}

static void test_answer_edns(void **state)
{
	(void)state;
	uint8_t many[40][4];
	fill_addrs(many);
	struct pkt p = query(0x8888, "example.com", DNS_TYPE_A, true);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	uint8_t out[DNS_MSG_MAX];
	ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 2, 30,
				     dns_query_udp_max(&q), out, sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN + 17 + 2 * 16 + 11);
	struct answer a = decode(out, n);
	assert_int_equal(a.flags, 0x8180);
	assert_int_equal(a.an, 2);
	assert_int_equal(a.ar, 1);
	/* the question only: the query's OPT and its cookie are not echoed */
	assert_memory_equal(out + DNS_HEADER_LEN, p.b + DNS_HEADER_LEN, 17);
	expect_a_record(out + DNS_HEADER_LEN + 17, 30, addrs[0]);
	expect_a_record(out + DNS_HEADER_LEN + 17 + 16, 30, addrs[1]);
	expect_opt(out + n - 11);

	/* truncated, the OPT still goes in: 512 - 12 - 17 - 11 leaves 29 records */
	n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, (const uint8_t(*)[4])many, 40, 30,
			     DNS_UDP_MAX, out, sizeof(out));
	a = decode(out, n);
	assert_int_equal(a.flags, 0x8380);
	assert_int_equal(a.an, 29);
	assert_int_equal(a.ar, 1);
	assert_true(n <= DNS_UDP_MAX);
	expect_opt(out + n - 11);

	/* NXDOMAIN for an AAAA query, with EDNS */
	p = query(0x8889, "nope.example", DNS_TYPE_AAAA, true);
	assert_int_equal(parse(&p, &q), 0);
	n = dns_answer_build(p.b, &q, DNS_RCODE_NXDOMAIN, NULL, 0, 30, dns_query_udp_max(&q), out,
			     sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN + 18 + 11);
	a = decode(out, n);
	assert_int_equal(a.flags, 0x8183);
	assert_int_equal(a.an, 0);
	assert_int_equal(a.ar, 1);
	expect_opt(out + n - 11);
}

static void test_answer_other_rcodes_and_types(void **state)
{
	(void)state;
	uint8_t out[DNS_MSG_MAX];
	struct dns_query q;
	/* AAAA: NOERROR with no records (NODATA) */
	struct pkt p = query(0x9999, "example.com", DNS_TYPE_AAAA, false);
	assert_int_equal(parse(&p, &q), 0);
	ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, NULL, 0, 60, DNS_UDP_MAX, out,
				     sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN + 17);
	struct answer a = decode(out, n);
	assert_int_equal(a.flags, 0x8180);
	assert_int_equal(a.qd, 1);
	assert_int_equal(a.an + a.ns + a.ar, 0);
	assert_memory_equal(out + DNS_HEADER_LEN, p.b + DNS_HEADER_LEN, 17);

	static const int rcodes[] = {DNS_RCODE_SERVFAIL, DNS_RCODE_NXDOMAIN, DNS_RCODE_REFUSED};
	for (size_t i = 0; i < sizeof(rcodes) / sizeof(rcodes[0]); i++) {
		n = dns_answer_build(p.b, &q, rcodes[i], NULL, 0, 60, DNS_UDP_MAX, out,
				     sizeof(out));
		assert_int_equal(n, DNS_HEADER_LEN + 17);
		a = decode(out, n);
		assert_int_equal(a.flags, 0x8180 | rcodes[i]);
		assert_int_equal(a.an, 0);
	}

	/* addresses belong only in a NOERROR answer to an A query */
	assert_int_equal(dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 1, 60, DNS_UDP_MAX,
					  out, sizeof(out)),
			 -EINVAL);
	p = query(0x999a, "example.com", DNS_TYPE_A, false);
	assert_int_equal(parse(&p, &q), 0);
	assert_int_equal(dns_answer_build(p.b, &q, DNS_RCODE_NXDOMAIN, addrs, 1, 60, DNS_UDP_MAX,
					  out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, NULL, 1, 60, DNS_UDP_MAX, out,
					  sizeof(out)),
			 -EINVAL);
	/* rcodes that do not fit the header */
	assert_int_equal(dns_answer_build(p.b, &q, 16, NULL, 0, 60, DNS_UDP_MAX, out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(dns_answer_build(p.b, &q, -1, NULL, 0, 60, DNS_UDP_MAX, out, sizeof(out)),
			 -EINVAL);
	/* a query no parse made */
	struct dns_query forged = q;
	forged.question_len = 200;
	assert_int_equal(dns_answer_build(p.b, &forged, DNS_RCODE_NOERROR, NULL, 0, 60, DNS_UDP_MAX,
					  out, sizeof(out)),
			 -EINVAL);
	forged = q;
	forged.qclass = DNS_CLASS_CH;
	assert_int_equal(dns_answer_build(p.b, &forged, DNS_RCODE_NOERROR, NULL, 0, 60, DNS_UDP_MAX,
					  out, sizeof(out)),
			 -EINVAL);
	forged.question_len = 0;
	assert_int_equal(dns_answer_build(p.b, &forged, DNS_RCODE_NOERROR, NULL, 0, 60, DNS_UDP_MAX,
					  out, sizeof(out)),
			 -EINVAL);
	forged = q;
	memset(forged.name, 'a', sizeof(forged.name)); /* no terminating NUL */
	forged.question_len = DNS_NAME_MAX + 1 + 2 + 4;
	assert_int_equal(dns_answer_build(p.b, &forged, DNS_RCODE_NOERROR, NULL, 0, 60, DNS_UDP_MAX,
					  out, sizeof(out)),
			 -EINVAL);
}

static void test_answer_nospace(void **state)
{
	(void)state;
	struct pkt p = query(0xaaaa, "example.com", DNS_TYPE_A, true);
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	uint8_t out[DNS_MSG_MAX];
	size_t full = DNS_HEADER_LEN + 17 + 2 * 16 + 11;
	/* a buffer too small for the header, for the question, for the records */
	const size_t small[] = {0, 11, 12, DNS_HEADER_LEN + 17 + 11, full - 1};
	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
		assert_int_equal(dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 2, 60,
						  DNS_UDP_MAX, out, small[i]),
				 -ENOSPC);
	assert_int_equal(
	    dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 2, 60, DNS_UDP_MAX, out, full),
	    full);
	/* a max that cannot hold even the question */
	assert_int_equal(
	    dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 2, 60, 20, out, sizeof(out)),
	    -ENOSPC);
	/* a max that holds the question and the OPT but no record: TC, no records */
	ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 2, 60,
				     DNS_HEADER_LEN + 17 + 11, out, sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN + 17 + 11);
	struct answer a = decode(out, n);
	assert_int_equal(a.flags, 0x8380);
	assert_int_equal(a.an, 0);
}

static void test_answer_in_place(void **state)
{
	(void)state;
	struct pkt p = query(0xbbbb, "In.Place.example", DNS_TYPE_A, true);
	struct pkt original = p;
	struct dns_query q;
	assert_int_equal(parse(&p, &q), 0);
	ssize_t n = dns_answer_build(p.b, &q, DNS_RCODE_NOERROR, addrs, 1, 5, DNS_UDP_MAX, p.b,
				     sizeof(p.b));
	assert_int_equal(n, DNS_HEADER_LEN + q.question_len + 16 + 11);
	struct answer a = decode(p.b, n);
	assert_int_equal(a.id, 0xbbbb);
	assert_int_equal(a.an, 1);
	assert_memory_equal(p.b + DNS_HEADER_LEN, original.b + DNS_HEADER_LEN, q.question_len);
	expect_a_record(p.b + DNS_HEADER_LEN + q.question_len, 5, addrs[0]);
	expect_opt(p.b + n - 11);
}

static void test_error_answer(void **state)
{
	(void)state;
	uint8_t out[DNS_HEADER_LEN + 4];
	memset(out, 0xff, sizeof(out));
	/* a malformed query: FORMERR with its id, and nothing else */
	struct pkt p = query(0xcafe, "example.com", DNS_TYPE_A, false);
	p.b[5] = 2; /* QDCOUNT 2 */
	struct dns_query q;
	assert_int_equal(parse(&p, &q), -EINVAL);
	ssize_t n = dns_error_build(q.id, DNS_RCODE_FORMERR, out, sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN);
	static const uint8_t formerr[DNS_HEADER_LEN] = {0xca, 0xfe, 0x80, 0x81};
	assert_memory_equal(out, formerr, DNS_HEADER_LEN);
	assert_int_equal(out[DNS_HEADER_LEN], 0xff); /* nothing written past it */

	/* another opcode: NOTIMP */
	p = query(0xf00d, "example.com", DNS_TYPE_A, false);
	p.b[2] = 4 << 3; /* NOTIFY */
	assert_int_equal(parse(&p, &q), -EOPNOTSUPP);
	n = dns_error_build(q.id, DNS_RCODE_NOTIMP, out, sizeof(out));
	assert_int_equal(n, DNS_HEADER_LEN);
	static const uint8_t notimp[DNS_HEADER_LEN] = {0xf0, 0x0d, 0x80, 0x84};
	assert_memory_equal(out, notimp, DNS_HEADER_LEN);

	assert_int_equal(dns_error_build(1, DNS_RCODE_FORMERR, out, DNS_HEADER_LEN - 1), -ENOSPC);
	assert_int_equal(dns_error_build(1, 16, out, sizeof(out)), -EINVAL);
	assert_int_equal(dns_error_build(1, -1, out, sizeof(out)), -EINVAL);
}

/* fuzz/corpus/dns/: every input through the fuzz target's checks */
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
	    cmocka_unit_test(test_parse_a_query),
	    cmocka_unit_test(test_replay_corpus),
	    cmocka_unit_test(test_parse_aaaa_with_edns),
	    cmocka_unit_test(test_parse_names),
	    cmocka_unit_test(test_refuse_names),
	    cmocka_unit_test(test_refuse_header_and_sections),
	    cmocka_unit_test(test_refuse_additional),
	    cmocka_unit_test(test_every_truncation),
	    cmocka_unit_test(test_random_bytes),
	    cmocka_unit_test(test_answer_a),
	    cmocka_unit_test(test_answer_ttl_clamp),
	    cmocka_unit_test(test_answer_truncates),
	    cmocka_unit_test(test_answer_edns),
	    cmocka_unit_test(test_answer_other_rcodes_and_types),
	    cmocka_unit_test(test_answer_nospace),
	    cmocka_unit_test(test_answer_in_place),
	    cmocka_unit_test(test_error_answer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
