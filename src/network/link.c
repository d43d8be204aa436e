/*
 * link.c - a networked sandbox's veth pair, through rtnetlink. See link.h.
 */
#include "network/link.h"

#include "base/cleanup.h"

#include <arpa/inet.h>
#include <net/if.h> /* before the linux/ headers: they defer to it */
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a request, or an answer: libmnl's own size is a run-time value */
#define NL_BUF 8192

int net_link_for_slot(unsigned slot, bool allow, struct net_link *ret)
{
	if (slot >= NET_SLOTS)
		return -ERANGE;
	struct net_link l = {.gateway = NET_SUBNET_V4 + 2 + 2 * slot};
	l.address = l.gateway + 1;
	snprintf(l.host_if, sizeof(l.host_if), "%s%u", allow ? NET_IFNAME_ALLOW : NET_IFNAME_OPEN,
		 slot);
	l.group = allow ? NET_GROUP_ALLOW : NET_GROUP_OPEN;
	/* locally administered, unicast: 02:ab:<slot>:<end> */
	const uint8_t mac[6] = {0x02, 0xab, (uint8_t)(slot >> 8), (uint8_t)slot, 0, 1};
	memcpy(l.host_mac, mac, 6);
	memcpy(l.sandbox_mac, mac, 6);
	l.sandbox_mac[5] = 2;
	*ret = l;
	return 0;
}

/* One request, answered by an ACK or an error. 0 or -errno. */
static int talk(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
	static unsigned seq_next;
	char buf[NL_BUF];
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = __atomic_add_fetch(&seq_next, 1, __ATOMIC_RELAXED);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	unsigned portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0)
			return -errno;
		int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, portid, NULL, NULL);
		if (r < 0)
			return -errno;
		if (r == MNL_CB_STOP)
			return 0;
	}
}

static struct nlmsghdr *link_msg(char *buf, uint16_t type, uint16_t flags, int ifindex)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	return nlh;
}

/*
 * The veth pair: the host end here, in device group l->group, eth0 (index
 * 2) in the namespace netns_fd.
 */
static int create_pair(struct mnl_socket *nl, const struct net_link *l, int netns_fd)
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, l->host_if);
	mnl_attr_put(nlh, IFLA_ADDRESS, 6, l->host_mac);
	mnl_attr_put_u32(nlh, IFLA_GROUP, l->group);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	struct ifinfomsg *pifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifm));
	pifm->ifi_family = AF_UNSPEC;
	pifm->ifi_index = NET_SANDBOX_IFINDEX;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, NET_SANDBOX_IFNAME);
	mnl_attr_put(nlh, IFLA_ADDRESS, 6, l->sandbox_mac);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return talk(nl, nlh);
}

/* No IPv6 address on the link, so no IPv6 traffic of the kernel's own either. */
static int no_ipv6(struct mnl_socket *nl, int ifindex)
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, 0, ifindex);
	struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	struct nlattr *v6 = mnl_attr_nest_start(nlh, AF_INET6);
	mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
	mnl_attr_nest_end(nlh, v6);
	mnl_attr_nest_end(nlh, spec);
	return talk(nl, nlh);
}

static int set_up(struct mnl_socket *nl, int ifindex)
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, 0, ifindex);
	struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return talk(nl, nlh);
}

/* local/32 with peer: the kernel adds the route to peer through this link. */
static int add_address(struct mnl_socket *nl, int ifindex, uint32_t local, uint32_t peer)
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = 32;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)ifindex;
	mnl_attr_put_u32(nlh, IFA_LOCAL, htonl(local));
	mnl_attr_put_u32(nlh, IFA_ADDRESS, htonl(peer));
	return talk(nl, nlh);
}

static int add_neighbour(struct mnl_socket *nl, int ifindex, uint32_t addr, const uint8_t mac[6])
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWNEIGH;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
	nd->ndm_family = AF_INET;
	nd->ndm_ifindex = ifindex;
	nd->ndm_state = NUD_PERMANENT;
	mnl_attr_put_u32(nlh, NDA_DST, htonl(addr));
	mnl_attr_put(nlh, NDA_LLADDR, 6, mac);
	return talk(nl, nlh);
}

static int add_default_route(struct mnl_socket *nl, int ifindex, uint32_t gateway)
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	return talk(nl, nlh);
}

/* A token bucket of rate_mbit as the root qdisc of the link's sending side. */
static int add_rate(struct mnl_socket *nl, int ifindex, uint32_t rate_mbit)
{
	char buf[NL_BUF];
	uint64_t rate = (uint64_t)rate_mbit * 125000; /* bytes a second */
	uint64_t burst = rate / 100 > NET_RATE_BURST_MIN ? rate / 100 : NET_RATE_BURST_MIN;
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWQDISC;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	struct tcmsg *tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
	tcm->tcm_family = AF_UNSPEC;
	tcm->tcm_ifindex = ifindex;
	tcm->tcm_handle = 1u << 16;
	tcm->tcm_parent = TC_H_ROOT;
	mnl_attr_put_strz(nlh, TCA_KIND, "tbf");
	struct nlattr *opts = mnl_attr_nest_start(nlh, TCA_OPTIONS);
	struct tc_tbf_qopt q = {
	    .rate = {.linklayer = TC_LINKLAYER_ETHERNET,
		     .rate = rate > UINT32_MAX ? UINT32_MAX : (uint32_t)rate},
	    .limit = (uint32_t)(burst + rate * NET_RATE_QUEUE_MS / 1000),
	};
	mnl_attr_put(nlh, TCA_TBF_PARMS, sizeof(q), &q);
	if (rate > UINT32_MAX)
		mnl_attr_put_u64(nlh, TCA_TBF_RATE64, rate);
	mnl_attr_put_u32(nlh, TCA_TBF_BURST, (uint32_t)burst);
	mnl_attr_nest_end(nlh, opts);
	return talk(nl, nlh);
}

static struct mnl_socket *open_route_socket(void)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int e = errno;
		mnl_socket_close(nl);
		errno = e;
		return NULL;
	}
	return nl;
}

/*
 * A route socket in the namespace of pidfd, and that namespace as an fd:
 * this thread enters it and comes back. A thread that cannot come back
 * would go on in the sandbox's namespace: that must never happen.
 */
static int open_inside(int pidfd, struct mnl_socket **ret_nl, int *ret_netns)
{
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	if (setns(pidfd, CLONE_NEWNET) < 0)
		return -errno;
	int netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int e = errno;
	struct mnl_socket *nl = netns >= 0 ? open_route_socket() : NULL;
	if (netns >= 0 && !nl)
		e = errno;
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	if (!nl) {
		if (netns >= 0)
			close(netns);
		return -e;
	}
	*ret_nl = nl;
	*ret_netns = netns;
	return 0;
}

/* Put the link at ifindex, or else the one named name, into device group group. */
static int set_group(struct mnl_socket *nl, int ifindex, const char *name, uint32_t group)
{
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, 0, ifindex);
	if (!ifindex)
		mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	mnl_attr_put_u32(nlh, IFLA_GROUP, group);
	return talk(nl, nlh);
}

/*
 * The slot's last sandbox has ended, but the kernel takes its namespace,
 * and the link named name with it, away a moment later: while try() says
 * -EEXIST and such a link is there, wait for it to go, then try once more.
 */
#define RETRY_STALE(r, name, try)                                                                  \
	do {                                                                                       \
		r = (try);                                                                         \
		for (int waited_ = 0;                                                              \
		     r == -EEXIST && if_nametoindex(name) > 0 && waited_ < NET_LINK_STALE_WAIT_MS; \
		     waited_ += 10)                                                                \
			usleep(10000);                                                             \
		if (r == -EEXIST && if_nametoindex(name) == 0)                                     \
			r = (try);                                                                 \
	} while (0)

/*
 * l's pair, its host end named name in device group group, both ends
 * configured but down: no
 * IPv6, the addresses, the neighbours (which a link keeps until it goes
 * down). *ret_ifindex the host end's. On failure *step says what failed;
 * a pair made is left for the caller to remove.
 */
static int make_pair(struct mnl_socket *host, struct mnl_socket *inside, int netns,
		     const struct net_link *l, const char *name, uint32_t group, int *ret_ifindex,
		     const char **step)
{
	struct net_link named = *l;
	snprintf(named.host_if, sizeof(named.host_if), "%s", name);
	named.group = group;
	int r, ifindex;
	*step = "create the veth pair";
	/* the slot's last link under another name (another mode, or parked) holds
	 * its addresses until its namespace goes: wait for that too */
	const char *kinds[] = {NET_IFNAME_OPEN, NET_IFNAME_ALLOW, NET_IFNAME_PARKED};
	unsigned slot = (l->gateway - NET_SUBNET_V4 - 2) / 2;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		char other[NET_IFNAME_MAX];
		snprintf(other, sizeof(other), "%s%u", kinds[i], slot);
		for (int waited = 0; strcmp(other, name) != 0 && if_nametoindex(other) > 0 &&
				     waited < NET_LINK_STALE_WAIT_MS;
		     waited += 10)
			usleep(10000);
	}
	RETRY_STALE(r, name, create_pair(host, &named, netns));
	if (r < 0)
		return r;
	*ret_ifindex = -1; /* made: the caller removes it on failure */
	*step = "find the host end";
	if (!(ifindex = (int)if_nametoindex(name)))
		return -errno;
	*ret_ifindex = ifindex;
	*step = "configure the host end";
	if ((r = no_ipv6(host, ifindex)) < 0 ||
	    (r = add_address(host, ifindex, l->gateway, l->address)) < 0 ||
	    (r = add_neighbour(host, ifindex, l->address, l->sandbox_mac)) < 0)
		return r;
	*step = "configure the sandbox's end";
	if ((r = no_ipv6(inside, NET_SANDBOX_IFINDEX)) < 0 ||
	    (r = add_address(inside, NET_SANDBOX_IFINDEX, l->address, l->gateway)) < 0 ||
	    (r = add_neighbour(inside, NET_SANDBOX_IFINDEX, l->gateway, l->host_mac)) < 0)
		return r;
	return 0;
}

/* Both ends of a made pair up, and the sandbox's default route. */
static int bring_up(struct mnl_socket *host, struct mnl_socket *inside, int ifindex,
		    const struct net_link *l, const char **step)
{
	int r;
	*step = "bring the link up";
	if ((r = set_up(host, ifindex)) < 0 || (r = set_up(inside, NET_SANDBOX_IFINDEX)) < 0 ||
	    (r = add_default_route(inside, NET_SANDBOX_IFINDEX, l->gateway)) < 0)
		return r;
	return 0;
}

/* l's rate, if any, on both ends. */
static int cap_rate(struct mnl_socket *host, struct mnl_socket *inside, int ifindex,
		    const struct net_link *l, const char **step)
{
	int r;
	*step = "cap its rate";
	if (l->rate_mbit && ((r = add_rate(host, ifindex, l->rate_mbit)) < 0 ||
			     (r = add_rate(inside, NET_SANDBOX_IFINDEX, l->rate_mbit)) < 0))
		return r;
	return 0;
}

/* The route sockets of the host and of the sandbox behind pidfd. */
static int open_sockets(int pidfd, struct mnl_socket **ret_host, struct mnl_socket **ret_inside,
			int *ret_netns, const char **step)
{
	*step = "open a route socket";
	if (!(*ret_host = open_route_socket()))
		return -errno;
	*step = "enter the sandbox's network namespace";
	int r = open_inside(pidfd, ret_inside, ret_netns);
	if (r < 0) {
		mnl_socket_close(*ret_host);
		*ret_host = NULL;
	}
	return r;
}

int net_link_attach(const struct net_link *l, int pidfd, struct error *err)
{
	struct mnl_socket *host = NULL, *inside = NULL;
	int netns = -1, ifindex = 0;
	const char *step;
	int r = open_sockets(pidfd, &host, &inside, &netns, &step);
	if (r < 0)
		return error_set_errno(err, -r, "network %s: %s", l->host_if, step);
	r = make_pair(host, inside, netns, l, l->host_if, l->group, &ifindex, &step);
	if (r == 0)
		r = bring_up(host, inside, ifindex, l, &step);
	if (r == 0)
		r = cap_rate(host, inside, ifindex, l, &step);
	if (r < 0 && ifindex)
		(void)net_link_remove(l->host_if, NULL);
	mnl_socket_close(inside);
	mnl_socket_close(host);
	close(netns);
	if (r < 0)
		return error_set_errno(err, -r, "network %s: %s", l->host_if, step);
	return 0;
}

int net_link_park(const struct net_link *l, int pidfd, struct net_parked *ret, struct error *err)
{
	struct net_parked p = {.netns = -1};
	snprintf(p.host_if, sizeof(p.host_if), "%s%u", NET_IFNAME_PARKED,
		 (l->gateway - NET_SUBNET_V4 - 2) / 2);
	const char *step;
	int r = open_sockets(pidfd, &p.host, &p.inside, &p.netns, &step);
	if (r == 0)
		r = make_pair(p.host, p.inside, p.netns, l, p.host_if, NET_GROUP_PARKED, &p.ifindex,
			      &step);
	if (r == 0)
		r = bring_up(p.host, p.inside, p.ifindex, l, &step);
	if (r < 0) {
		if (p.ifindex)
			(void)net_link_remove(p.host_if, NULL);
		net_parked_close(&p);
		return error_set_errno(err, -r, "network %s: %s", p.host_if, step);
	}
	*ret = p;
	return 0;
}

int net_link_hand_out(struct net_parked *p, const struct net_link *l, struct error *err)
{
	const char *step = "put it in its mode's group";
	int r = set_group(p->host, p->ifindex, NULL, l->group);
	if (r == 0)
		r = cap_rate(p->host, p->inside, p->ifindex, l, &step);
	if (r < 0)
		(void)net_link_remove(p->host_if, NULL);
	net_parked_close(p);
	if (r < 0)
		return error_set_errno(err, -r, "network %s: %s", p->host_if, step);
	return 0;
}

int net_link_set_group(const char *host_if, uint32_t group, struct error *err)
{
	struct mnl_socket *nl = open_route_socket();
	if (!nl)
		return error_set_errno(err, errno, "network %s: open a route socket", host_if);
	int r = set_group(nl, 0, host_if, group);
	mnl_socket_close(nl);
	return r < 0 ? error_set_errno(err, -r, "network %s: put it in its mode's group", host_if)
		     : 0;
}

void net_parked_close(struct net_parked *p)
{
	if (p->inside)
		mnl_socket_close(p->inside);
	if (p->host)
		mnl_socket_close(p->host);
	if (p->netns >= 0)
		close(p->netns);
	p->inside = p->host = NULL;
	p->netns = -1;
}

int net_link_remove(const char *host_if, struct error *err)
{
	struct mnl_socket *nl = open_route_socket();
	if (!nl)
		return error_set_errno(err, errno, "network %s: open a route socket", host_if);
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_DELLINK, 0, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
	int r = talk(nl, nlh);
	mnl_socket_close(nl);
	if (r == -ENODEV)
		return 0;
	return r < 0 ? error_set_errno(err, -r, "network %s: remove", host_if) : 0;
}

struct bytes {
	uint64_t rx, tx;
	bool found;
};

static int stats_attr(const struct nlattr *attr, void *data)
{
	struct bytes *b = data;
	if (mnl_attr_get_type(attr) == IFLA_STATS64 &&
	    mnl_attr_get_payload_len(attr) >= sizeof(struct rtnl_link_stats64)) {
		struct rtnl_link_stats64 s;
		memcpy(&s, mnl_attr_get_payload(attr), sizeof(s));
		b->rx = s.rx_bytes;
		b->tx = s.tx_bytes;
		b->found = true;
	}
	return MNL_CB_OK;
}

static int stats_msg(const struct nlmsghdr *nlh, void *data)
{
	return mnl_attr_parse(nlh, sizeof(struct ifinfomsg), stats_attr, data);
}

int net_link_bytes(const char *host_if, uint64_t *ret_in, uint64_t *ret_out, struct error *err)
{
	struct mnl_socket *nl = open_route_socket();
	if (!nl)
		return error_set_errno(err, errno, "network %s: open a route socket", host_if);
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_GETLINK, NLM_F_REQUEST, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
	nlh->nlmsg_seq = 1;
	struct bytes b = {0};
	int r = 0;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		r = -errno;
	} else {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0 ||
		    mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), stats_msg, &b) < 0)
			r = -errno;
	}
	mnl_socket_close(nl);
	if (r == -ENODEV)
		return -ENODEV;
	if (r < 0 || !b.found)
		return error_set_errno(err, r < 0 ? -r : EIO, "network %s: read its counters",
				       host_if);
	/* the host end receives what the sandbox sends */
	*ret_in = b.tx;
	*ret_out = b.rx;
	return 0;
}

struct route_type {
	unsigned char type;
	bool found;
};

static int route_msg(const struct nlmsghdr *nlh, void *data)
{
	struct route_type *t = data;
	if (nlh->nlmsg_type == RTM_NEWROUTE &&
	    mnl_nlmsg_get_payload_len(nlh) >= sizeof(struct rtmsg)) {
		const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
		t->type = rtm->rtm_type;
		t->found = true;
	}
	return MNL_CB_OK;
}

bool net_addr_is_local(uint32_t addr)
{
	struct mnl_socket *nl = open_route_socket();
	if (!nl)
		return true; /* cannot tell: refuse */
	char buf[NL_BUF];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = 1;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = 32;
	rtm->rtm_flags = RTM_F_LOOKUP_TABLE;
	mnl_attr_put_u32(nlh, RTA_DST, htonl(addr));
	struct route_type t = {0};
	bool local = true;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) >= 0) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		int r =
		    n < 0 ? -1
			  : mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), route_msg, &t);
		if (r < 0 && (errno == ENETUNREACH || errno == EHOSTUNREACH))
			local = false; /* no route at all: not ours */
		else if (r >= 0 && t.found)
			local = t.type == RTN_LOCAL || t.type == RTN_BROADCAST ||
				t.type == RTN_MULTICAST;
	}
	mnl_socket_close(nl);
	return local;
}

static int group_attr(const struct nlattr *attr, void *data)
{
	if (mnl_attr_get_type(attr) == IFLA_GROUP && mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
		*(int64_t *)data = mnl_attr_get_u32(attr);
	return MNL_CB_OK;
}

static int group_msg(const struct nlmsghdr *nlh, void *data)
{
	return mnl_attr_parse(nlh, sizeof(struct ifinfomsg), group_attr, data);
}

/* The device group of the link named name: >= 0, or -1 when it cannot tell. */
static int64_t link_group(const char *name)
{
	struct mnl_socket *nl = open_route_socket();
	if (!nl)
		return -1;
	char buf[NL_BUF];
	struct nlmsghdr *nlh = link_msg(buf, RTM_GETLINK, NLM_F_REQUEST, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	nlh->nlmsg_seq = 1;
	int64_t group = -1;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) >= 0) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0 ||
		    mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), group_msg, &group) < 0)
			group =
			    errno == ENODEV ? (int64_t)NET_GROUP_PARKED : -1; /* gone: none left */
	}
	mnl_socket_close(nl);
	return group;
}

int net_links_adopt(struct error *err)
{
	FILE *f = fopen("/proc/self/net/dev", "re");
	if (!f)
		return error_set_errno(err, errno, "/proc/self/net/dev");
	char line[512];
	int r = 0;
	while (r == 0 && fgets(line, sizeof(line), f)) {
		char *name = line + strspn(line, " "), *colon = strchr(name, ':');
		if (!colon)
			continue;
		*colon = '\0';
		bool open = strncmp(name, NET_IFNAME_OPEN, strlen(NET_IFNAME_OPEN)) == 0,
		     allow = strncmp(name, NET_IFNAME_ALLOW, strlen(NET_IFNAME_ALLOW)) == 0;
		/* group 0: made before links had a group; gone meanwhile (-1): nothing to do */
		if ((open || allow) && link_group(name) == 0) {
			struct error e = {0};
			r = net_link_set_group(name, open ? NET_GROUP_OPEN : NET_GROUP_ALLOW, &e);
			if (r == -ENODEV)
				r = 0;
			else if (r < 0)
				error_set(err, e.code, "%s", e.msg);
		}
	}
	fclose(f);
	return r;
}

bool net_links_left(void)
{
	FILE *f = fopen("/proc/self/net/dev", "re");
	if (!f)
		return true; /* cannot tell: keep what they may need */
	bool any = false;
	char line[512];
	while (!any && fgets(line, sizeof(line), f)) {
		char *name = line + strspn(line, " "), *colon = strchr(name, ':');
		if (!colon || strncmp(name, NET_IFNAME_PREFIX, strlen(NET_IFNAME_PREFIX)) != 0)
			continue;
		*colon = '\0';
		/* a parked link is a pooled sandbox's, which needs no rules yet */
		any = strncmp(name, NET_IFNAME_PARKED, strlen(NET_IFNAME_PARKED)) != 0 ||
		      link_group(name) != NET_GROUP_PARKED;
	}
	fclose(f);
	return any;
}
