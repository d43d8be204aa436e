/*
 * fuzz-dns.c - libFuzzer entry for the DNS responder's message layer
 * (src/egress/dns.h): every input is a datagram from a hostile sandbox.
 *
 * It checks what must hold for every input:
 *   - dns_query_parse() returns one of its four answers, and -EBADMSG
 *     exactly for what is shorter than a header or a response;
 *   - an accepted query's name is lower case LDH-or-underscore text of at
 *     most DNS_NAME_MAX bytes, with no empty label, and encodes back to
 *     the question's bytes (lower-cased); its question lies inside the
 *     input, and a trailing OPT gave at least DNS_UDP_MAX;
 *   - its answers fit the size asked, echo the id and the question, and
 *     set TC exactly when records were left out;
 *   - a refusal's header-only answer carries the id.
 *
 * tests/unit/test-egress-dns.c includes this file and feeds it every
 * truncation of its queries and random bytes, in the ordinary build.
 */
#include "egress/dns.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"

static uint16_t fuzz_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* q's name as labels, lower case, into wire; its length. */
static size_t fuzz_encode_name(const char *name, uint8_t *wire)
{
	size_t n = 0;
	const char *s = name;
	while (*s) {
		const char *dot = strchr(s, '.');
		size_t l = dot ? (size_t)(dot - s) : strlen(s);
		CHECK(l >= 1 && l <= 63);
		wire[n++] = (uint8_t)l;
		memcpy(wire + n, s, l);
		n += l;
		s += l;
		if (*s == '.') {
			s++;
			CHECK(*s != '\0'); /* no trailing dot */
		}
	}
	wire[n++] = 0;
	return n;
}

static void fuzz_check_query(const uint8_t *data, size_t size, const struct dns_query *q)
{
	size_t len = strlen(q->name);
	CHECK(len <= DNS_NAME_MAX);
	for (size_t i = 0; i < len; i++) {
		char c = q->name[i];
		CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.');
	}
	CHECK(q->qclass == DNS_CLASS_IN);
	CHECK(q->question_len >= 5 && DNS_HEADER_LEN + q->question_len <= size);
	CHECK(q->edns ? q->edns_udp_size >= DNS_UDP_MAX : q->edns_udp_size == 0);

	uint8_t wire[256];
	size_t n = fuzz_encode_name(q->name, wire);
	CHECK(n + 4 == q->question_len);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = data[DNS_HEADER_LEN + i];
		if (c >= 'A' && c <= 'Z')
			c = (uint8_t)(c - 'A' + 'a');
		CHECK(c == wire[i]);
	}
	CHECK(fuzz_get16(data + DNS_HEADER_LEN + n) == q->qtype);
}

static void fuzz_check_answer(const uint8_t *data, const struct dns_query *q, size_t max)
{
	static const uint8_t addrs[40][4] = {{192, 0, 2, 1}, {198, 51, 100, 7}};
	static uint8_t out[DNS_MSG_MAX + 64];
	size_t n4 = q->qtype == DNS_TYPE_A ? sizeof(addrs) / sizeof(addrs[0]) : 0;
	ssize_t r =
	    dns_answer_build(data, q, DNS_RCODE_NOERROR, addrs, n4, 3600, max, out, sizeof(out));
	CHECK(r > 0 && (size_t)r <= max && (size_t)r <= DNS_MSG_MAX);
	CHECK(fuzz_get16(out) == q->id);
	uint16_t flags = fuzz_get16(out + 2);
	CHECK((flags & 0xfcff) == 0x8080); /* QR, opcode 0, AA 0, RA, Z AD CD 0, NOERROR */
	CHECK(((flags & 0x0100) != 0) == q->rd);
	CHECK(fuzz_get16(out + 4) == 1 && fuzz_get16(out + 8) == 0);
	CHECK(fuzz_get16(out + 10) == (q->edns ? 1 : 0));
	CHECK(((flags & 0x0200) != 0) == (fuzz_get16(out + 6) < n4));
	CHECK(memcmp(out + DNS_HEADER_LEN, data + DNS_HEADER_LEN, q->question_len) == 0);
	CHECK((size_t)r ==
	      DNS_HEADER_LEN + q->question_len + 16u * fuzz_get16(out + 6) + (q->edns ? 11u : 0u));

	r = dns_answer_build(data, q, DNS_RCODE_REFUSED, NULL, 0, 0, max, out, sizeof(out));
	CHECK(r > 0 && (fuzz_get16(out + 2) & 0xfeff) == (0x8080 | DNS_RCODE_REFUSED));
	CHECK(fuzz_get16(out + 6) == 0);
	CHECK(dns_answer_build(data, q, DNS_RCODE_NOERROR, NULL, 0, 0, max, out, DNS_HEADER_LEN) ==
	      -ENOSPC);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_query q;
	memset(&q, 0xa5, sizeof(q));
	int r = dns_query_parse(data, size, &q);
	CHECK(r == 0 || r == -EINVAL || r == -EBADMSG || r == -EOPNOTSUPP);
	CHECK((r == -EBADMSG) == (size < DNS_HEADER_LEN || (data[2] & 0x80)));
	if (r == -EINVAL || r == -EOPNOTSUPP) {
		CHECK(q.id == fuzz_get16(data));
		uint8_t out[DNS_HEADER_LEN];
		int rcode = r == -EINVAL ? DNS_RCODE_FORMERR : DNS_RCODE_NOTIMP;
		CHECK(dns_error_build(q.id, rcode, out, sizeof(out)) == DNS_HEADER_LEN);
		CHECK(fuzz_get16(out) == q.id && fuzz_get16(out + 4) == 0);
		CHECK((out[3] & 0x0f) == rcode);
	}
	if (r != 0)
		return 0;
	CHECK(size <= DNS_MSG_MAX);
	fuzz_check_query(data, size, &q);
	fuzz_check_answer(data, &q, dns_query_udp_max(&q));
	fuzz_check_answer(data, &q, DNS_MSG_MAX);
	return 0;
}
