/*
 * table.h - the one nftables table agentbox owns on the host, through
 * libnftables.
 *
 * The ruleset is static: it names no sandbox. What tells sandboxes apart
 * is their link (link.h): the host end's name says it is a sandbox's
 * ("ab*"), its device group the mode (NET_GROUP_OPEN, NET_GROUP_ALLOW; a
 * link made ahead for the pool, NET_GROUP_PARKED, matches neither and is
 * dropped), and each sandbox holds the one address whose route leads back
 * through its own link. So a sandbox that comes or goes changes
 * nothing here, and nothing here can be left behind by one.
 *
 *	guard (prerouting, raw)    nothing from a parked link; no IPv6 from
 *	                           a sandbox; a source address
 *	                           whose route does not lead back through the
 *	                           link it came in on is spoofed: dropped
 *	divert (prerouting, nat)   DNS (port 53) to the link's gateway,
 *	                           NET_DNS_PORT; an allow-mode sandbox's TCP to
 *	                           the gateway, NET_PROXY_PORT (its proxy)
 *	input                      a sandbox reaches the host only where it
 *	                           was redirected; everything else (the host's
 *	                           addresses, the daemon's port, another
 *	                           sandbox's gateway) is refused
 *	forward                    sandbox to sandbox: dropped; open mode: the
 *	                           refused ranges (addr.h's classes, less the
 *	                           operator's --allow-cidr) refused, the rest
 *	                           out; allow mode: nothing; back in: only
 *	                           replies
 *	postrouting (nat)          open mode's traffic leaves masqueraded
 *	arp table                  no ARP from a sandbox
 *
 * A refusal is a TCP reset or an ICMP administratively-prohibited, so that
 * a client fails at once rather than after its timeout.
 *
 * Installing replaces the whole table in one transaction (stale rules of a
 * crashed daemon included), so a link is never without the rules while
 * one owner's table becomes another's; removing takes both tables away. No other
 * table, chain or rule of the host is read or touched. IPv4 forwarding
 * (net.ipv4.ip_forward) must be on for open mode: see
 * net_forwarding_set().
 */
#ifndef AGENTBOX_NETWORK_TABLE_H
#define AGENTBOX_NETWORK_TABLE_H

#include "base/error.h"
#include "egress/addr.h"
#include "egress/policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_TABLE	"agentbox"	  /* in the inet and the arp family */
#define NET_PROXY_PORT	EGRESS_PROXY_PORT /* on each gateway: an allow-mode sandbox's proxy */
#define NET_DNS_PORT	15053		  /* on each gateway: a sandbox's resolver */
#define NET_RULESET_MAX 8192		  /* bytes of rendered ruleset */

/*
 * An empty chain, hooked nowhere, in the inet table that agentbox run
 * installed (through agentbox-net host-up, host.h): it tells run's table
 * from agentboxd's, which replaces it (without one) when it starts.
 */
#define NET_TABLE_RUN_MARK "installed_by_run"

struct net_table_config {
	const struct cidr *allowed; /* agentboxd --allow-cidr; only IPv4 ones apply */
	size_t nallowed;
	bool run; /* installed by agentbox run: with NET_TABLE_RUN_MARK */
};

/* The ruleset as nft(8) text, into buf. Its length, or -ENOSPC. */
int net_table_render(const struct net_table_config *c, char *buf, size_t size);

/* Install (or replace) both tables in one transaction. 0 or -errno. */
int net_table_install(const struct net_table_config *c, struct error *err);

/* Remove both tables; 0 also when they are not there. */
int net_table_remove(struct error *err);

/* Is agentbox's inet table there? */
bool net_table_exists(void);

/* Is it there, and agentbox run's (NET_TABLE_RUN_MARK)? */
bool net_table_is_run(void);

/* net.ipv4.ip_forward of this network namespace: 0 or 1, or -errno. */
int net_forwarding_get(void);
int net_forwarding_set(bool on, struct error *err);

#endif
