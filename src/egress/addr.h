/*
 * addr.h - which addresses a sandbox's traffic may never reach.
 *
 * Every egress decision ends here: the DNS responder drops answers, and
 * the relay refuses destinations, whose class is refused. The classes are
 * those of the IANA special-purpose registries (RFC 6890 and its
 * successors); an address inside another one (IPv4-mapped, IPv4-compatible,
 * NAT64 64:ff9b::/96, 6to4 2002::/16) is classified by the IPv4 address it
 * carries, so that no spelling of 169.254.169.254 passes.
 *
 * The documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24,
 * 2001:db8::/32) are public here: nothing routes them, and a test's fake
 * internet lives in them.
 *
 * Pure functions on plain data: no system call, no allocation.
 */
#ifndef AGENTBOX_EGRESS_ADDR_H
#define AGENTBOX_EGRESS_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An IPv4 address is held as ::ffff:a.b.c.d, so one type holds both. */
struct addr {
	uint8_t b[16];
};

struct cidr {
	struct addr net; /* host bits zero */
	unsigned prefix; /* 0..128, over the 16-byte form (an IPv4 /n is 96 + n) */
};

enum addr_class {
	ADDR_PUBLIC = 0,
	ADDR_UNSPECIFIED, /* 0.0.0.0/8, :: */
	ADDR_LOOPBACK,	  /* 127/8, ::1 */
	ADDR_LINK_LOCAL,  /* 169.254/16 (cloud metadata), fe80::/10 */
	ADDR_PRIVATE,	  /* RFC 1918, and fec0::/10 (deprecated site-local) */
	ADDR_SHARED,	  /* 100.64/10, carrier-grade NAT (RFC 6598) */
	ADDR_ULA,	  /* fc00::/7 (fd00:ec2::254: a cloud's metadata) */
	ADDR_MULTICAST,	  /* 224/4, ff00::/8 */
	ADDR_RESERVED,	  /* 240/4 and broadcast, 192.0.0/24, 198.18/15, 100::/64,
			     Teredo 2001::/32 */
	ADDR_CLASS_COUNT
};

/*
 * Parse an IPv4 or IPv6 literal (no brackets, no zone, no port). 0 or
 * -EINVAL.
 */
int addr_parse(const char *s, struct addr *ret);

/* "a.b.c.d/n" or "v6/n", host bits zero. 0 or -EINVAL. */
int cidr_parse(const char *s, struct cidr *ret);

bool addr_is_v4(const struct addr *a);
bool cidr_contains(const struct cidr *c, const struct addr *a);

/* The class of a, after unwrapping an embedded IPv4 address. */
enum addr_class addr_classify(const struct addr *a);

/* Its name, for messages and events: "link_local", "private", ... */
const char *addr_class_name(enum addr_class c);

/*
 * May a sandbox reach a? Not when its class is refused, unless it is
 * in one of the operator's allowed (agentboxd --allow-cidr), which may open
 * the private, shared and ULA classes only: never loopback, link-local,
 * multicast, unspecified or reserved. *why gets the class (ADDR_PUBLIC
 * when allowed); why may be NULL.
 */
bool addr_is_reachable(const struct addr *a, const struct cidr *allowed, size_t nallowed,
		       enum addr_class *why);

#endif
