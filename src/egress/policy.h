/*
 * policy.h - where a sandbox's traffic may go by name: the "network" field
 * of a task or a sandbox.
 *
 * Three modes. none: no traffic leaves the sandbox (the default, and what
 * an absent field means). open: any public destination (addr.h still
 * refuses the classes it refuses). allow: only the domains listed, each
 * on its ports:
 *
 *	{"mode": "allow", "allow": ["api.example.com", "*.example.org:8443"],
 *	 "rate_mbit": 20}
 *	agentbox ... --network allow:api.example.com,*.example.org:8443
 *
 * An allow entry is a domain name, or a wildcard "*.example.org" whose '*'
 * is the whole first label: it matches one or more labels below
 * example.org (a.example.org, a.b.example.org), never example.org itself,
 * and needs at least two labels after "*." (so "*.com" is refused).
 * ":PORT" (1..65535) restricts the entry to that port; without one it
 * allows ports 80 and 443.
 *
 * A name is normalised before it is kept or compared: ASCII letters to
 * lower case, one trailing dot dropped. It then has at least two labels,
 * each of 1..63 letters, digits, '-' and '_' ('-' neither first nor last),
 * and at most EGRESS_NAME_MAX characters in all. Non-ASCII names are given
 * in their punycode form (xn--...). IP literals are refused: a dotted
 * IPv4 address, anything with ':' inside brackets, a bare IPv6 address,
 * and a name whose last label is all digits.
 *
 * Duplicates are merged: an entry equal to an earlier one after
 * normalisation (same name, same wildcard, same port) is dropped, so
 * "A.com" and "a.com." are one rule. The EGRESS_ALLOW_MAX limit counts the
 * entries as given, before merging. Entries that overlap without being
 * equal ("a.com" and "a.com:443") are kept as they are.
 *
 * Invariants of a struct egress_policy made here: mode none has no rules
 * and no rate; mode allow has 1..EGRESS_ALLOW_MAX rules, all distinct;
 * mode open has no rules; rate_mbit is 0 (no limit) or
 * 1..EGRESS_RATE_MBIT_MAX.
 *
 * Ownership: a policy owns its rules array (malloc'd, NULL when there is
 * none); egress_policy_release() frees it and zeroes the policy (mode
 * none). A zeroed struct egress_policy is a valid empty one.
 *
 * Pure code: no system call; allocation only for the rules and the JSON.
 */
#ifndef AGENTBOX_EGRESS_POLICY_H
#define AGENTBOX_EGRESS_POLICY_H

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_ALLOW_MAX      256    /* entries in an allow list */
#define EGRESS_NAME_MAX	      253    /* characters of a normalised name */
#define EGRESS_LABEL_MAX      63     /* characters of one label */
#define EGRESS_RATE_MBIT_MAX  100000 /* rate_mbit: 1..this, 0 for none */
#define EGRESS_DEFAULT_PORT_A 80     /* the ports of an entry without one */
#define EGRESS_DEFAULT_PORT_B 443

/*
 * Where an allow-mode sandbox's HTTP_PROXY and HTTPS_PROXY point: an
 * address of network/link.h's subnet that no sandbox or gateway has, on
 * the proxy's port. Every TCP connection of such a sandbox reaches its
 * proxy anyway (network/table.h); one to this address is taken as a
 * client's to its proxy (CONNECT, or an absolute URI).
 */
#define EGRESS_PROXY_ADDRESS "10.231.0.1"
#define EGRESS_PROXY_PORT    15001
#define EGRESS_PROXY_URL     "http://" EGRESS_PROXY_ADDRESS ":15001"

enum egress_mode {
	EGRESS_NONE = 0, /* nothing leaves */
	EGRESS_ALLOW,	 /* only the rules */
	EGRESS_OPEN,	 /* any public destination */
};

/* "none", "allow", "open" ("unknown" for a value out of range). */
const char *egress_mode_name(enum egress_mode m);

struct egress_rule {
	char name[EGRESS_NAME_MAX + 1]; /* normalised; without the "*." of a wildcard */
	bool wildcard;			/* "*.name": one or more labels below name */
	uint16_t port;			/* 0: 80 and 443 */
};

struct egress_policy {
	enum egress_mode mode;
	struct egress_rule *rules; /* owned; nrules of them, NULL when none */
	size_t nrules;
	uint32_t rate_mbit; /* 0: no limit */
};

/*
 * The policy of the JSON value v of the field "network". NULL (the field
 * is absent) and JSON null mean mode none. Otherwise v is an object with
 *	"mode"       required: "none", "allow" or "open"
 *	"allow"      with mode allow only, and required there: a non-empty
 *	             array of at most EGRESS_ALLOW_MAX entry strings
 *	"rate_mbit"  optional, not with mode none: an integer
 *	             1..EGRESS_RATE_MBIT_MAX, or null for no limit
 * and no other member. Every message names the field it is about:
 * "network.allow[3]: 'foo..com' is not a domain name (an empty label)".
 * 0, -EINVAL, or -ENOMEM; *ret is written only on success and then owns
 * its rules.
 */
int egress_policy_from_json(const json_t *v, struct egress_policy *ret, struct error *err);

/*
 * The canonical JSON of p: "mode" always, "allow" (normalised entries,
 * "*." for a wildcard, ":port" when set) with mode allow, "rate_mbit" when
 * set. egress_policy_from_json() of it gives p back. A new reference, or
 * NULL when out of memory or p breaks the invariants above.
 */
json_t *egress_policy_to_json(const struct egress_policy *p);

/*
 * The CLI's --network ARG: "none", "open" or "allow:ENTRY[,ENTRY...]",
 * entries as above. Messages start with "--network: ". 0, -EINVAL or
 * -ENOMEM; *ret is written only on success.
 */
int egress_policy_parse_cli(const char *arg, struct egress_policy *ret, struct error *err);

/* Free p's rules and zero it. p may be NULL. */
void egress_policy_release(struct egress_policy *p);

/*
 * May traffic go to host:port? none: never. open: always. allow: when a
 * rule matches the host (normalised as above, so "API.Example.com." is
 * api.example.com) and the port. A host that is not a valid name (an IP
 * literal among them) and port 0 never match a rule. p may be NULL (none).
 */
bool egress_policy_allows(const struct egress_policy *p, const char *host, uint16_t port);

/* May the host be resolved: does a rule match it, on any of its ports? */
bool egress_policy_allows_name(const struct egress_policy *p, const char *host);

/*
 * Normalise the host name in (no wildcard, no port) into out, by the rules
 * above. 0; -EINVAL when in is not a valid name (NULL, IP literals
 * included); -ENOBUFS when outlen is too small for it (EGRESS_NAME_MAX + 1
 * is always enough). out is written only on success; in and out may be
 * the same buffer.
 */
int egress_name_normalize(const char *in, char *out, size_t outlen);

#endif
