/*
 * link.h - a networked sandbox's link: one veth pair, its addresses,
 * routes and neighbours, made with rtnetlink (libmnl).
 *
 *	host's network namespace            the sandbox's network namespace
 *	ab<mode><slot>  gateway/32  <──veth──>  eth0  address/32, default via gateway
 *
 * Addresses come from the sandbox's uid-range slot (runtime/uidrange.h),
 * which no two live sandboxes share: the gateway is NET_SUBNET + 2 +
 * 2 * slot, the sandbox's address the next one, both point-to-point /32s,
 * so the host holds exactly one route to each sandbox, through its own
 * veth. Nothing resolves addresses on the link: both ends hold a permanent
 * neighbour entry for the other, and neither has an IPv6 address (address
 * generation off), so a sandbox never needs to send ARP or IPv6, and the
 * agentbox table (table.h) drops both. A link with a rate has a token
 * bucket on each end: the host end's sends are the sandbox's downloads,
 * eth0's its uploads; neither is the sandbox's to change.
 *
 * The host end's device group is the mode (NET_GROUP_OPEN, NET_GROUP_ALLOW),
 * so that one static ruleset tells the modes apart (table.h) and a link
 * made ahead changes mode with one message; its name says the same for
 * people ('o' open, 'a' allow; 'p' a link made ahead: net_link_park()).
 * The pair lives as long as the sandbox's network namespace: when the
 * sandbox's last process is gone, the kernel removes both ends, with their
 * addresses, routes and neighbours. Nothing of it outlives the sandbox.
 *
 * Needs CAP_NET_ADMIN on the host and over the sandbox's namespace (root).
 * The calling thread enters the sandbox's namespace for a moment and comes
 * back; other threads are not affected.
 */
#ifndef AGENTBOX_NETWORK_LINK_H
#define AGENTBOX_NETWORK_LINK_H

#include "base/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct mnl_socket;

/* 10.231.0.0/16: 16384 slots, two addresses each, past the first two. */
#define NET_SUBNET	  "10.231.0.0/16"
#define NET_SUBNET_V4	  0x0ae70000u
#define NET_SUBNET_PREFIX 16
#define NET_SLOTS	  16384u
#define NET_IFNAME_PREFIX "ab"
#define NET_IFNAME_OPEN	  "abo" /* + slot: an open-mode sandbox's host end */
#define NET_IFNAME_ALLOW  "aba" /* + slot: an allow-mode sandbox's host end */
#define NET_IFNAME_PARKED "abp" /* + slot: a parked link's host end (net_link_park()) */
/* The host end's device group ("ip link set X group G"): its mode, for the table. */
#define NET_GROUP_PARKED    0x61620000u /* "ab" 0: made ahead, no mode yet: all dropped */
#define NET_GROUP_OPEN	    0x61620001u
#define NET_GROUP_ALLOW	    0x61620002u
#define NET_SANDBOX_IFNAME  "eth0"
#define NET_SANDBOX_IFINDEX 2 /* eth0's index inside: lo is 1 in a new namespace */
#define NET_IFNAME_MAX	    16
/* how long a new link waits for its slot's last one, whose namespace is going */
#define NET_LINK_STALE_WAIT_MS 2000

struct net_link {
	uint32_t gateway; /* host byte order: the host end, the sandbox's gateway */
	uint32_t address; /* host byte order: the sandbox end */
	char host_if[NET_IFNAME_MAX];
	uint32_t group; /* the host end's device group: NET_GROUP_OPEN or NET_GROUP_ALLOW */
	uint8_t host_mac[6];
	uint8_t sandbox_mac[6];
	uint32_t rate_mbit; /* 0, or a cap each way: a token bucket (tbf) on both ends */
};

/* The token bucket of a capped link: bytes it may send at once, and queue. */
#define NET_RATE_BURST_MIN (64 << 10) /* and 10 ms of the rate, if more */
#define NET_RATE_QUEUE_MS  50	      /* what waits past the burst, at the rate */

/*
 * The link of the sandbox in slot (< NET_SLOTS), for an allow-mode
 * sandbox or an open one. 0 or -ERANGE.
 */
int net_link_for_slot(unsigned slot, bool allow, struct net_link *ret);

/*
 * Make l's veth pair, with its other end in the network namespace of the
 * process behind pidfd, and configure both ends. On failure nothing is
 * left (the pair is removed). 0 or -errno with err saying which step.
 */
int net_link_attach(const struct net_link *l, int pidfd, struct error *err);

/*
 * A link made ahead, for a pooled sandbox, so that handing it out costs
 * only what cannot be done before the mode is known:
 *
 *	net_link_park()      makes the pair whole and up, its host end named
 *	                     NET_IFNAME_PARKED + slot in NET_GROUP_PARKED,
 *	                     whose every packet the agentbox table drops; the
 *	                     sandbox has an eth0 meanwhile, so a parked sandbox
 *	                     is handed out with a network or not at all
 *	net_link_hand_out()  puts the host end into the mode's group (one
 *	                     message; net_link_set_group() does the same by
 *	                     name, from another process) and adds the rate
 *
 * A pair's removal waits for the kernel's RCU grace periods (some 16 ms
 * here), a pair moved between namespaces too, and a rename needs the link
 * down: each would cost more than the claim may, so a parked link keeps
 * its name and place, and only its group changes.
 */
struct net_parked {
	struct mnl_socket *host, *inside; /* route sockets, here and in the sandbox's */
	int netns;			  /* the sandbox's network namespace */
	int ifindex;			  /* the host end's */
	char host_if[NET_IFNAME_MAX];	  /* its name: parked, then the mode's */
};

/*
 * Park l's pair (l from net_link_for_slot(); its host_if is not used) in
 * the sandbox behind pidfd. 0, or -errno with err and nothing left.
 */
int net_link_park(const struct net_link *l, int pidfd, struct net_parked *ret, struct error *err);

/*
 * Hand p's link out in l's mode (l->group) with l's rate. p's sockets are
 * closed either way; on failure the pair is removed. 0 or -errno with err.
 */
int net_link_hand_out(struct net_parked *p, const struct net_link *l, struct error *err);

/* Put the link host_if into device group group. 0 or -errno with err. */
int net_link_set_group(const char *host_if, uint32_t group, struct error *err);

/* Close p's sockets (the link stays as it is). */
void net_parked_close(struct net_parked *p);

/* Remove the pair by its host end. 0, also when it is gone already. */
int net_link_remove(const char *host_if, struct error *err);

/*
 * Bytes through the host end: *ret_in what the sandbox received,
 * *ret_out what it sent. 0, -ENODEV when the link is gone, or -errno.
 */
int net_link_bytes(const char *host_if, uint64_t *ret_in, uint64_t *ret_out, struct error *err);

/*
 * Does the host take addr (host byte order) as its own? Asked of the
 * kernel's routing (RTM_GETROUTE): a local or broadcast route, so an
 * address of an interface and every address of a local route (AnyIP:
 * "ip route add local 198.51.100.0/24 dev lo") are the host's. true too
 * when the kernel cannot be asked (the caller refuses what it cannot
 * tell). Any user may ask; the calling thread's network namespace is the
 * one asked about.
 */
bool net_addr_is_local(uint32_t addr);

/*
 * Put each open or allow link in this network namespace that has no
 * device group yet (0: made by an agentbox from before links had one, for
 * a sandbox that outlived its daemon) into its mode's group, which its
 * name says, so that the table's rules keep matching it. 0, or -errno
 * with err (a link that went meanwhile is no error).
 */
int net_links_adopt(struct error *err);

/*
 * Is any sandbox's link (ab*, but for a parked one still in
 * NET_GROUP_PARKED: a pooled sandbox's) left in the calling thread's
 * network namespace (/proc/self/net, not sysfs's)? true when it cannot
 * tell: the caller then keeps what such a link may need.
 */
bool net_links_left(void);

#endif
