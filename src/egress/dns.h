/*
 * dns.h - the message layer of the DNS responder that answers a sandbox.
 *
 * The responder runs outside the sandbox and answers only the names a task
 * is allowed; everything it reads comes from the sandbox, so the parser is
 * strict and reads nothing it has not bounds-checked. It accepts exactly
 * one shape: a standard query (QR=0, opcode QUERY) with one question, no
 * answer or authority records, and at most one additional record, an EDNS
 * OPT. Names are plain hostnames: labels of 1..63 bytes drawn from letters,
 * digits, '-' and '_', no compression pointer, at most DNS_NAME_MAX bytes
 * as text. A name that needs escaping is refused, so no caller ever has to
 * think about dots, spaces or NULs inside a label.
 *
 * The builder writes what its caller decided (the rcode, the addresses):
 * which names get an answer is the caller's policy, never this module's.
 *
 * Pure functions on byte buffers: no system call, no allocation.
 */
#ifndef AGENTBOX_EGRESS_DNS_H
#define AGENTBOX_EGRESS_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DNS_NAME_MAX	  253  /* a name as dotted text, without the trailing dot */
#define DNS_UDP_MAX	  512  /* largest UDP answer to a query without EDNS */
#define DNS_MSG_MAX	  4096 /* largest message we read or build */
#define DNS_HEADER_LEN	  12
#define DNS_EDNS_UDP_SIZE 1232 /* the UDP size our OPT record advertises */
#define DNS_TTL_MAX	  300  /* answers are never cached longer than this */

enum {
	DNS_TYPE_A = 1,
	DNS_TYPE_NS = 2,
	DNS_TYPE_CNAME = 5,
	DNS_TYPE_SOA = 6,
	DNS_TYPE_PTR = 12,
	DNS_TYPE_MX = 15,
	DNS_TYPE_TXT = 16,
	DNS_TYPE_AAAA = 28,
	DNS_TYPE_SRV = 33,
	DNS_TYPE_OPT = 41,
	DNS_TYPE_HTTPS = 65,
	DNS_TYPE_ANY = 255,
};

enum {
	DNS_CLASS_IN = 1,
	DNS_CLASS_CH = 3,
};

enum {
	DNS_RCODE_NOERROR = 0,
	DNS_RCODE_FORMERR = 1,
	DNS_RCODE_SERVFAIL = 2,
	DNS_RCODE_NXDOMAIN = 3,
	DNS_RCODE_NOTIMP = 4,
	DNS_RCODE_REFUSED = 5,
};

struct dns_query {
	uint16_t id;
	bool rd;		     /* recursion desired, copied into the answer */
	char name[DNS_NAME_MAX + 1]; /* lower case, dotted, no trailing dot; "" for the root */
	uint16_t qtype, qclass;	     /* qclass is always DNS_CLASS_IN */
	bool edns;		     /* the query carried an OPT record */
	uint16_t edns_udp_size;	     /* its UDP size, at least DNS_UDP_MAX; 0 without EDNS */
	size_t question_len;	     /* bytes of the question at DNS_HEADER_LEN, to echo it */
};

/*
 * Parse one query from msg[0..len). Returns:
 *   0            a query as above, in *ret;
 *   -EBADMSG     shorter than a header, or a response (QR=1): drop it
 *                silently (answering a response could make two responders
 *                echo each other forever);
 *   -EOPNOTSUPP  a well-formed header with an opcode other than QUERY, or a
 *                well-formed query for a class other than IN: answer NOTIMP;
 *   -EINVAL      anything else malformed, or that this parser does not take
 *                (a compression pointer, a label byte outside [A-Za-z0-9_-],
 *                an EDNS version other than 0, bytes after the message):
 *                answer FORMERR.
 * Exception to the ret_ rule: on -EOPNOTSUPP and -EINVAL, ret->id is
 * written (and nothing else), so that the caller can answer with
 * dns_error_build(ret->id, ...). On -EBADMSG nothing is written.
 * The AA, TC, RA, Z, AD, CD and RCODE bits of a query carry nothing and are
 * ignored (dig sets AD); so are the DO bit and the options of an OPT record,
 * once their layout is checked.
 */
int dns_query_parse(const uint8_t *msg, size_t len, struct dns_query *ret);

/*
 * The largest UDP answer q may get: DNS_UDP_MAX without EDNS, else the size
 * its OPT record asks for, at most DNS_MSG_MAX. Over TCP, pass DNS_MSG_MAX.
 */
size_t dns_query_udp_max(const struct dns_query *q);

/*
 * Build the answer to q into out: the same id, QR=1, opcode QUERY, AA=0,
 * RA=1, RD copied, the rcode given, and the question echoed byte for byte
 * from query_msg (the message q was parsed from: a resolver that randomizes
 * the case of the name gets its own case back). With DNS_RCODE_NOERROR
 * and an A query, one A record per address of a4[0..n4), its name a
 * pointer to the question, its TTL ttl clamped to at most DNS_TTL_MAX.
 * Addresses are only for that case: n4 > 0 with another rcode or type is
 * -EINVAL. An AAAA query, or any other type, with NOERROR and n4 == 0 is
 * the answer "no records of that type" (NODATA); whether a name gets that,
 * NXDOMAIN or REFUSED is the caller's decision.
 *
 * The answer is at most max bytes (max above DNS_MSG_MAX counts as
 * DNS_MSG_MAX): if not every record fits, as many as fit go in and TC is
 * set. When q had EDNS, an OPT record (UDP size DNS_EDNS_UDP_SIZE, version
 * 0, no options) goes in always, truncated or not.
 *
 * out may be query_msg itself (the answer replaces the query in place).
 * Returns the length written, -ENOSPC when outlen (or max) cannot hold
 * the answer, or -EINVAL for an rcode outside 0..15 or a q that no parse
 * produced.
 */
ssize_t dns_answer_build(const uint8_t *query_msg, const struct dns_query *q, int rcode,
			 const uint8_t (*a4)[4], size_t n4, uint32_t ttl, size_t max, uint8_t *out,
			 size_t outlen);

/*
 * A header-only answer (QDCOUNT=0) for when only the id is known: FORMERR
 * and NOTIMP after dns_query_parse() returned -EINVAL or -EOPNOTSUPP.
 * QR=1, RA=1, opcode QUERY, everything else zero. Returns DNS_HEADER_LEN,
 * -ENOSPC when outlen is shorter, or -EINVAL for an rcode outside 0..15.
 */
ssize_t dns_error_build(uint16_t id, int rcode, uint8_t *out, size_t outlen);

#endif
