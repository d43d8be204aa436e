/*
 * addr.c - address classes for egress. See addr.h.
 */
#include "egress/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ::ffff:0:0/96, the IPv4-mapped prefix our IPv4 addresses are held in */
static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool addr_is_v4(const struct addr *a)
{
	return memcmp(a->b, v4_mapped, sizeof(v4_mapped)) == 0;
}

int addr_parse(const char *s, struct addr *ret)
{
	struct in_addr v4;
	if (!s)
		return -EINVAL;
	if (inet_pton(AF_INET, s, &v4) == 1) {
		memcpy(ret->b, v4_mapped, sizeof(v4_mapped));
		memcpy(ret->b + 12, &v4, 4);
		return 0;
	}
	return inet_pton(AF_INET6, s, ret->b) == 1 ? 0 : -EINVAL;
}

static bool prefix_matches(const uint8_t *a, const uint8_t *net, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, net, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (net[whole] & mask);
}

int cidr_parse(const char *s, struct cidr *ret)
{
	char buf[64];
	const char *slash = s ? strchr(s, '/') : NULL;
	if (!slash || (size_t)(slash - s) >= sizeof(buf) || !slash[1] || strlen(slash + 1) > 3)
		return -EINVAL;
	memcpy(buf, s, (size_t)(slash - s));
	buf[slash - s] = '\0';
	struct addr net;
	if (addr_parse(buf, &net) < 0)
		return -EINVAL;
	char *end;
	unsigned long n = strtoul(slash + 1, &end, 10);
	bool v4 = strchr(buf, ':') == NULL;
	if (*end || slash[1] < '0' || slash[1] > '9' || n > (v4 ? 32UL : 128UL))
		return -EINVAL;
	unsigned prefix = (unsigned)n + (v4 ? 96 : 0);
	/* host bits must be zero: 10.0.0.1/8 is a mistake, not a network */
	for (unsigned bit = prefix; bit < 128; bit++)
		if (net.b[bit / 8] & (0x80 >> (bit % 8)))
			return -EINVAL;
	*ret = (struct cidr){.net = net, .prefix = prefix};
	return 0;
}

bool cidr_contains(const struct cidr *c, const struct addr *a)
{
	return prefix_matches(a->b, c->net.b, c->prefix);
}

/* The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any. */
static bool embedded_v4(const struct addr *a, uint8_t v4[4])
{
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const uint8_t zero[12] = {0};
	/* ::a.b.c.d is the deprecated IPv4-compatible form (:: and ::1 are taken first) */
	if (addr_is_v4(a) || memcmp(a->b, nat64, 12) == 0 || memcmp(a->b, zero, 12) == 0) {
		memcpy(v4, a->b + 12, 4);
		return true;
	}
	if (a->b[0] == 0x20 && a->b[1] == 0x02) { /* 2002:a.b.c.d::/48 */
		memcpy(v4, a->b + 2, 4);
		return true;
	}
	return false;
}

static enum addr_class classify_v4(const uint8_t *b)
{
	if (b[0] == 0)
		return ADDR_UNSPECIFIED;
	if (b[0] == 127)
		return ADDR_LOOPBACK;
	if (b[0] == 169 && b[1] == 254)
		return ADDR_LINK_LOCAL;
	if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168))
		return ADDR_PRIVATE;
	if (b[0] == 100 && (b[1] & 0xc0) == 64)
		return ADDR_SHARED;
	if ((b[0] & 0xf0) == 224)
		return ADDR_MULTICAST;
	if ((b[0] & 0xf0) == 240 || (b[0] == 192 && b[1] == 0 && b[2] == 0) ||
	    (b[0] == 198 && (b[1] & 0xfe) == 18))
		return ADDR_RESERVED;
	return ADDR_PUBLIC;
}

enum addr_class addr_classify(const struct addr *a)
{
	static const uint8_t zero[15] = {0};
	if (memcmp(a->b, zero, 15) == 0)
		return a->b[15] == 1 ? ADDR_LOOPBACK : ADDR_UNSPECIFIED; /* ::1, :: */
	uint8_t v4[4];
	if (embedded_v4(a, v4))
		return classify_v4(v4);
	static const struct {
		uint8_t net[4];
		unsigned bits;
		enum addr_class c;
	} v6[] = {
	    {{0xfe, 0x80}, 10, ADDR_LINK_LOCAL},
	    {{0xfe, 0xc0}, 10, ADDR_PRIVATE},
	    {{0xfc}, 7, ADDR_ULA},
	    {{0xff}, 8, ADDR_MULTICAST},
	    {{0x20, 0x01, 0, 0}, 32, ADDR_RESERVED}, /* Teredo */
	};
	static const uint8_t discard[8] = {0x01, 0x00}; /* 100::/64 */
	if (memcmp(a->b, discard, 8) == 0)
		return ADDR_RESERVED;
	for (size_t i = 0; i < sizeof(v6) / sizeof(v6[0]); i++)
		if (prefix_matches(a->b, v6[i].net, v6[i].bits))
			return v6[i].c;
	return ADDR_PUBLIC;
}

const char *addr_class_name(enum addr_class c)
{
	static const char *const names[ADDR_CLASS_COUNT] = {
	    [ADDR_PUBLIC] = "public",	  [ADDR_UNSPECIFIED] = "unspecified",
	    [ADDR_LOOPBACK] = "loopback", [ADDR_LINK_LOCAL] = "link_local",
	    [ADDR_PRIVATE] = "private",	  [ADDR_SHARED] = "shared",
	    [ADDR_ULA] = "unique_local",  [ADDR_MULTICAST] = "multicast",
	    [ADDR_RESERVED] = "reserved",
	};
	return (unsigned)c < ADDR_CLASS_COUNT ? names[c] : "unknown";
}

bool addr_is_reachable(const struct addr *a, const struct cidr *allowed, size_t nallowed,
		       enum addr_class *why)
{
	enum addr_class c = addr_classify(a);
	bool openable = c == ADDR_PRIVATE || c == ADDR_SHARED || c == ADDR_ULA;
	for (size_t i = 0; openable && i < nallowed; i++)
		if (cidr_contains(&allowed[i], a))
			c = ADDR_PUBLIC;
	if (why)
		*why = c;
	return c == ADDR_PUBLIC;
}
