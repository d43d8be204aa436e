/*
 * relay.h - an allow-mode sandbox's resolver and proxy, outside it, on
 * its gateway (link.h). Everything an allow-mode sandbox sends ends here
 * (table.h redirects its DNS and all its TCP), and nothing else leaves it.
 *
 * The resolver (NET_DNS_PORT, UDP and TCP) answers only names the policy
 * allows (egress/policy.h), with A records it resolved itself upstream and
 * filtered: an address of a refused class (egress/addr.h, less the
 * operator's --allow-cidr) or of the host itself is dropped from the
 * answer. Every other name is NXDOMAIN; every other type an empty answer
 * (the sandbox has no IPv6).
 *
 * The proxy (NET_PROXY_PORT) takes each connection the sandbox opened,
 * wherever it was headed (SO_ORIGINAL_DST), reads the first bytes until it
 * knows the host (egress/peek.h: the TLS SNI, the HTTP Host, or a CONNECT
 * from a client that was told HTTP(S)_PROXY), and then only if the policy
 * allows that host on the original port: resolves the name itself (never
 * trusting the address the sandbox dialled, so no DNS rebinding), refuses
 * an address as the resolver does, connects, sends what it read, and
 * splices both ways without looking further (TLS is not terminated),
 * but for a host that one of the sandbox's secrets names: that connection
 * is intercepted (intercept.h), its TLS ended with a certificate of the
 * daemon's CA, its request's placeholders replaced by the values.
 *
 * Every refusal is one JSON line in the events file: {"time": ms,
 * "type": "egress_denied", "host", "address", "port", "reason"}, reasons
 * "not_allowed" (the policy), "refused_address" (every address of an
 * allowed name was refused), "no_host" (no SNI or Host), "unresolved",
 * "intercept_refused" (a secret's host: a handshake or the request head
 * was refused; "detail" says why, never with a value).
 * The file stops at RELAY_EVENTS_MAX bytes with one marker line.
 *
 * One relay per sandbox, in its own process (agentbox-net allow), which
 * lives as long as its launcher.
 */
#ifndef AGENTBOX_NETWORK_RELAY_H
#define AGENTBOX_NETWORK_RELAY_H

#include "base/error.h"
#include "egress/addr.h"
#include "egress/policy.h"

#include <stdbool.h>
#include <stdint.h>

#define RELAY_CONNECTIONS_MAX	 256	     /* proxied connections at once */
#define RELAY_DNS_INFLIGHT	 32	     /* queries being resolved at once */
#define RELAY_PEEK_TIMEOUT_MS	 10000	     /* for a client's first bytes */
#define RELAY_CONNECT_TIMEOUT_MS 10000	     /* to an allowed destination */
#define RELAY_EVENTS_MAX	 (1 << 20)   /* bytes of the events file */
#define RELAY_PIPE_SIZE		 (256 << 10) /* each direction's splice pipe, per connection */

struct relay_config {
	uint32_t gateway; /* host byte order: where it listens */
	uint32_t sandbox; /* host byte order: the one client it serves */
	const struct egress_policy *policy;
	const struct cidr *allowed; /* agentboxd --allow-cidr */
	size_t nallowed;
	/* upstream DNS server, host byte order; 0: the host's resolv.conf */
	uint32_t resolver;
	uint16_t resolver_port;
	int events_fd; /* O_APPEND, or -1 */
	bool dns_only; /* open mode: the resolver alone (its policy allows every name) */
	/*
	 * The secrets' hosts (intercept.h), or NULL: hooks, so that a relay
	 * without secrets is an executable without OpenSSL (main.c).
	 */
	void *intercept;
	bool (*intercept_wants)(void *intercept, const char *host);
	int (*intercept_serve)(void *intercept, int client, const uint8_t *pre, size_t prelen,
			       bool tls, int up, const char *host, struct error *err);
};

struct relay;

/* Bind the resolver's and the proxy's sockets. 0 or -errno with err. */
int relay_bind(const struct relay_config *c, struct relay **ret, struct error *err);

/*
 * Serve c from now on, with the sockets bound for another config of the
 * same gateway (a parked link's relay, bound before its mode was known):
 * what arrived meanwhile waits in them. The proxy's socket goes when c
 * is dns_only. Before relay_run() only.
 */
void relay_configure(struct relay *r, const struct relay_config *c);

/* Serve until the process ends. */
_Noreturn void relay_run(struct relay *r);

#endif
