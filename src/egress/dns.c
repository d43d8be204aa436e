/*
 * dns.c - DNS queries in, answers out, for the egress responder. See dns.h.
 *
 * Wire format: RFC 1035 section 4 (header, question, resource records),
 * RFC 6891 (the EDNS OPT pseudo-record).
 */
#include "egress/dns.h"

#include <errno.h>
#include <string.h>

/* header flags (RFC 1035 4.1.1) */
#define FLAG_QR		0x8000
#define FLAG_OPCODE	0x7800
#define FLAG_TC		0x0200
#define FLAG_RD		0x0100
#define FLAG_RA		0x0080
#define OPCODE_QUERY	0
#define LABEL_MAX	63
#define NAME_WIRE_MAX	255 /* a name in labels, with its final zero byte */
#define OPT_LEN		11  /* root name, type, class, ttl, rdlength: no options */
#define A_RECORD_LEN	16  /* pointer, type, class, ttl, rdlength, 4 bytes */
#define QUESTION_OFFSET DNS_HEADER_LEN

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* The byte, lower-cased, if a label may hold it; 0 if not. */
static char label_char(uint8_t c)
{
	if (c >= 'A' && c <= 'Z')
		return (char)(c - 'A' + 'a');
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
		return (char)c;
	return 0;
}

/* The question's name at *pos, as text into name; *pos moved past it. */
static int read_name(const uint8_t *msg, size_t len, size_t *pos, char name[DNS_NAME_MAX + 1])
{
	size_t p = *pos, n = 0;
	for (;;) {
		if (p >= len)
			return -EINVAL;
		uint8_t l = msg[p++];
		if (l == 0)
			break;
		/* 0xc0 is a compression pointer, 0x40 and 0x80 extended label types */
		if (l > LABEL_MAX || l > len - p)
			return -EINVAL;
		size_t dot = n > 0;
		if (n + dot + l > DNS_NAME_MAX)
			return -EINVAL;
		if (dot)
			name[n++] = '.';
		for (size_t i = 0; i < l; i++) {
			char c = label_char(msg[p + i]);
			if (!c)
				return -EINVAL;
			name[n++] = c;
		}
		p += l;
	}
	name[n] = '\0';
	*pos = p;
	return 0;
}

/* The one additional record, which must be an OPT (RFC 6891 6.1.2). */
static int read_opt(const uint8_t *msg, size_t len, size_t *pos, struct dns_query *q)
{
	size_t p = *pos;
	if (len - p < OPT_LEN || msg[p] != 0 || get16(msg + p + 1) != DNS_TYPE_OPT)
		return -EINVAL;
	uint16_t udp_size = get16(msg + p + 3);
	uint8_t version = msg[p + 6]; /* ttl: extended rcode, version, DO and Z */
	uint16_t rdlen = get16(msg + p + 9);
	p += OPT_LEN;
	if (version != 0 || rdlen > len - p)
		return -EINVAL;
	/* the options (code, length, data) must tile the rdata exactly */
	size_t end = p + rdlen;
	while (p < end) {
		if (end - p < 4)
			return -EINVAL;
		uint16_t olen = get16(msg + p + 2);
		p += 4;
		if (olen > end - p)
			return -EINVAL;
		p += olen;
	}
	q->edns = true;
	q->edns_udp_size = udp_size < DNS_UDP_MAX ? DNS_UDP_MAX : udp_size;
	*pos = p;
	return 0;
}

int dns_query_parse(const uint8_t *msg, size_t len, struct dns_query *ret)
{
	if (len < DNS_HEADER_LEN)
		return -EBADMSG;
	uint16_t id = get16(msg), flags = get16(msg + 2);
	if (flags & FLAG_QR)
		return -EBADMSG;
	ret->id = id;
	if ((flags & FLAG_OPCODE) >> 11 != OPCODE_QUERY)
		return -EOPNOTSUPP;
	uint16_t qdcount = get16(msg + 4), ancount = get16(msg + 6), nscount = get16(msg + 8),
		 arcount = get16(msg + 10);
	if (len > DNS_MSG_MAX || qdcount != 1 || ancount != 0 || nscount != 0 || arcount > 1)
		return -EINVAL;

	struct dns_query q = {.id = id, .rd = (flags & FLAG_RD) != 0};
	size_t pos = QUESTION_OFFSET;
	int r = read_name(msg, len, &pos, q.name);
	if (r < 0)
		return r;
	if (len - pos < 4)
		return -EINVAL;
	q.qtype = get16(msg + pos);
	q.qclass = get16(msg + pos + 2);
	pos += 4;
	q.question_len = pos - QUESTION_OFFSET;
	if (arcount == 1) {
		r = read_opt(msg, len, &pos, &q);
		if (r < 0)
			return r;
	}
	if (pos != len)
		return -EINVAL;
	/* well-formed, but not a question about the internet */
	if (q.qclass != DNS_CLASS_IN)
		return -EOPNOTSUPP;
	*ret = q;
	return 0;
}

size_t dns_query_udp_max(const struct dns_query *q)
{
	if (!q->edns)
		return DNS_UDP_MAX;
	return q->edns_udp_size < DNS_MSG_MAX ? q->edns_udp_size : DNS_MSG_MAX;
}

static bool rcode_is_valid(int rcode)
{
	return rcode >= 0 && rcode <= 15;
}

/* Bytes of q's question on the wire, or 0 if q cannot have come from a parse. */
static size_t question_len_of(const struct dns_query *q)
{
	size_t n = strnlen(q->name, DNS_NAME_MAX + 1);
	if (n > DNS_NAME_MAX || q->qclass != DNS_CLASS_IN)
		return 0;
	/* "a.b" is 1 a 1 b 0: one byte more than the text, and the root is one zero byte */
	return (n == 0 ? 1 : n + 2) + 4;
}

ssize_t dns_answer_build(const uint8_t *query_msg, const struct dns_query *q, int rcode,
			 const uint8_t (*a4)[4], size_t n4, uint32_t ttl, size_t max, uint8_t *out,
			 size_t outlen)
{
	size_t qlen = question_len_of(q);
	if (!rcode_is_valid(rcode) || qlen == 0 || qlen != q->question_len)
		return -EINVAL;
	if (n4 > 0 && (rcode != DNS_RCODE_NOERROR || q->qtype != DNS_TYPE_A || !a4))
		return -EINVAL;
	if (max > DNS_MSG_MAX)
		max = DNS_MSG_MAX;
	size_t base = DNS_HEADER_LEN + q->question_len + (q->edns ? OPT_LEN : 0);
	if (base > max)
		return -ENOSPC;
	size_t n = (max - base) / A_RECORD_LEN;
	if (n > n4)
		n = n4;
	size_t total = base + n * A_RECORD_LEN;
	if (total > outlen)
		return -ENOSPC;

	uint16_t flags = FLAG_QR | FLAG_RA | (uint16_t)rcode;
	if (q->rd)
		flags |= FLAG_RD;
	if (n < n4)
		flags |= FLAG_TC;
	/* out may be query_msg itself: the question stays where it is */
	memmove(out + QUESTION_OFFSET, query_msg + QUESTION_OFFSET, q->question_len);
	put16(out, q->id);
	put16(out + 2, flags);
	put16(out + 4, 1);
	put16(out + 6, (uint16_t)n);
	put16(out + 8, 0);
	put16(out + 10, q->edns ? 1 : 0);
	uint8_t *p = out + QUESTION_OFFSET + q->question_len;
	for (size_t i = 0; i < n; i++) {
		put16(p, 0xc000 | QUESTION_OFFSET); /* the question's name */
		put16(p + 2, DNS_TYPE_A);
		put16(p + 4, DNS_CLASS_IN);
		put32(p + 6, ttl < DNS_TTL_MAX ? ttl : DNS_TTL_MAX);
		put16(p + 10, 4);
		memcpy(p + 12, a4[i], 4);
		p += A_RECORD_LEN;
	}
	if (q->edns) {
		p[0] = 0; /* the root */
		put16(p + 1, DNS_TYPE_OPT);
		put16(p + 3, DNS_EDNS_UDP_SIZE);
		put32(p + 5, 0); /* extended rcode 0, version 0, no DO */
		put16(p + 9, 0); /* no options */
		p += OPT_LEN;
	}
	return (ssize_t)(p - out);
}

ssize_t dns_error_build(uint16_t id, int rcode, uint8_t *out, size_t outlen)
{
	if (!rcode_is_valid(rcode))
		return -EINVAL;
	if (outlen < DNS_HEADER_LEN)
		return -ENOSPC;
	memset(out, 0, DNS_HEADER_LEN);
	put16(out, id);
	put16(out + 2, FLAG_QR | FLAG_RA | (uint16_t)rcode);
	return DNS_HEADER_LEN;
}
