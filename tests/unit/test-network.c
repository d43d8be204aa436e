/*
 * test-network.c - agentbox's nftables table and a sandbox's veth pair
 * (src/network), for real: the test runs in a network namespace of its
 * own (made in the group setup), so nothing of the host's is touched.
 * Without root, only the rendering is tested.
 */
#include "egress/addr.h"
#include "egress/policy.h"
#include "network/link.h"
#include "network/table.h"
#include "runtime/spec.h" /* SANDBOX_RESOLVER: a constant, nothing linked */

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static bool in_own_netns;

static int group_setup(void **state)
{
	(void)state;
	/* a network namespace of our own: the host's tables are never touched */
	in_own_netns = geteuid() == 0 && unshare(CLONE_NEWNET) == 0;
	return 0;
}

static void test_render_names_every_part(void **state)
{
	(void)state;
	char buf[NET_RULESET_MAX];
	struct net_table_config c = {0};
	int n = net_table_render(&c, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	const char *must[] = {
	    "table inet agentbox {",
	    "iifname \"ab*\" iifgroup 0x61620000 drop",
	    "iifname \"ab*\" meta nfproto ipv6 drop",
	    "iifname \"ab*\" fib saddr . iif oif missing drop",
	    "th dport 53 redirect to :15053",
	    "iifname \"ab*\" iifgroup 0x61620002 meta l4proto tcp redirect to :15001",
	    "iifname \"ab*\" oifname \"ab*\" meta l4proto tcp reject with tcp reset",
	    "iifname \"ab*\" iifgroup 0x61620001 ip daddr @refused meta l4proto tcp reject with "
	    "tcp reset",
	    "iifname \"ab*\" iifgroup 0x61620001 accept",
	    "ip saddr 10.231.0.0/16 oifname != \"ab*\" masquerade",
	    "table arp agentbox {",
	};
	for (size_t i = 0; i < sizeof(must) / sizeof(*must); i++)
		if (!strstr(buf, must[i]))
			fail_msg("the ruleset lacks '%s':\n%s", must[i], buf);
	assert_null(strstr(buf, "elements = { 10.1.0.0/16"));
}

/* Every refused range is refused by addr.h, at both ends; the classes' examples are covered. */
static void test_refused_set_matches_addr_classes(void **state)
{
	(void)state;
	char buf[NET_RULESET_MAX];
	struct net_table_config c = {0};
	assert_true(net_table_render(&c, buf, sizeof(buf)) > 0);
	char *set = strstr(buf, "set refused");
	assert_non_null(set);
	char *el = strstr(set, "elements = { ");
	assert_non_null(el);
	el += strlen("elements = { ");
	char *end = strchr(el, '}');
	assert_non_null(end);
	*end = '\0';
	struct cidr ranges[32];
	size_t n = 0;
	for (char *tok = strtok(el, ", "); tok; tok = strtok(NULL, ", ")) {
		assert_true(n < 32);
		if (cidr_parse(tok, &ranges[n]) < 0)
			fail_msg("'%s' is not a CIDR", tok);
		struct addr first = ranges[n].net, last = first;
		for (unsigned bit = ranges[n].prefix; bit < 128; bit++)
			last.b[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
		if (addr_classify(&first) == ADDR_PUBLIC || addr_classify(&last) == ADDR_PUBLIC)
			fail_msg("%s is refused by the table but public for addr.h", tok);
		n++;
	}
	const char *examples[] = {"0.1.2.3",	 "10.9.8.7",	    "100.64.0.1",
				  "127.0.0.1",	 "169.254.169.254", "172.31.255.255",
				  "192.0.0.170", "192.168.1.1",	    "198.19.0.1",
				  "224.0.0.251", "240.0.0.1",	    "255.255.255.255"};
	for (size_t i = 0; i < sizeof(examples) / sizeof(*examples); i++) {
		struct addr a;
		assert_int_equal(addr_parse(examples[i], &a), 0);
		bool covered = false;
		for (size_t j = 0; j < n; j++)
			covered |= cidr_contains(&ranges[j], &a);
		if (!covered)
			fail_msg("%s is refused by addr.h but not by the table", examples[i]);
	}
	struct addr pub;
	assert_int_equal(addr_parse("198.51.100.7", &pub), 0);
	for (size_t j = 0; j < n; j++)
		assert_false(cidr_contains(&ranges[j], &pub));
}

static void test_render_allowed_and_small_buffer(void **state)
{
	(void)state;
	struct cidr allowed[2];
	assert_int_equal(cidr_parse("10.1.0.0/16", &allowed[0]), 0);
	assert_int_equal(cidr_parse("fd00:1::/64", &allowed[1]), 0);
	struct net_table_config c = {.allowed = allowed, .nallowed = 2};
	char buf[NET_RULESET_MAX];
	assert_true(net_table_render(&c, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "elements = { 10.1.0.0/16 }"));
	assert_null(strstr(buf, "fd00")); /* no IPv6 leaves a sandbox */
	char small[64];
	assert_int_equal(net_table_render(&c, small, sizeof(small)), -ENOSPC);
}

static void test_install_replace_remove(void **state)
{
	(void)state;
	if (!in_own_netns)
		skip();
	struct error err = {0};
	assert_false(net_table_exists());
	assert_int_equal(net_table_remove(&err), 0); /* absent: fine */
	struct net_table_config c = {0};
	if (net_table_install(&c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(net_table_exists());
	struct cidr allowed;
	assert_int_equal(cidr_parse("192.168.7.0/24", &allowed), 0);
	c = (struct net_table_config){.allowed = &allowed, .nallowed = 1};
	if (net_table_install(&c, &err) < 0) /* a crashed daemon's table is replaced */
		fail_msg("%s", err.msg);
	assert_true(net_table_exists());
	assert_int_equal(net_table_remove(&err), 0);
	assert_false(net_table_exists());
	assert_int_equal(net_table_remove(&err), 0);
}

/* agentbox run's table carries its mark; agentboxd's, replacing it, does not. */
static void test_run_mark(void **state)
{
	(void)state;
	char buf[NET_RULESET_MAX];
	struct net_table_config c = {.run = true};
	assert_true(net_table_render(&c, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\tchain " NET_TABLE_RUN_MARK " {\n\t}\n}\ntable arp"));
	c.run = false;
	assert_true(net_table_render(&c, buf, sizeof(buf)) > 0);
	assert_null(strstr(buf, NET_TABLE_RUN_MARK));
	if (!in_own_netns)
		skip();
	struct error err = {0};
	assert_false(net_table_is_run());
	c.run = true;
	if (net_table_install(&c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(net_table_exists());
	assert_true(net_table_is_run());
	c.run = false;
	if (net_table_install(&c, &err) < 0) /* agentboxd takes it over */
		fail_msg("%s", err.msg);
	assert_true(net_table_exists());
	assert_false(net_table_is_run());
	assert_int_equal(net_table_remove(&err), 0);
	assert_false(net_table_is_run());
}

static void test_forwarding_toggles(void **state)
{
	(void)state;
	if (!in_own_netns)
		skip();
	struct error err = {0};
	assert_int_equal(net_forwarding_set(true, &err), 0);
	assert_int_equal(net_forwarding_get(), 1);
	assert_int_equal(net_forwarding_set(false, &err), 0);
	assert_int_equal(net_forwarding_get(), 0);
}

static void test_link_for_slot(void **state)
{
	(void)state;
	struct net_link l;
	assert_int_equal(net_link_for_slot(0, false, &l), 0);
	assert_int_equal(l.gateway, NET_SUBNET_V4 + 2);
	assert_int_equal(l.address, NET_SUBNET_V4 + 3);
	assert_string_equal(l.host_if, "abo0");
	assert_int_equal(l.group, NET_GROUP_OPEN);
	assert_int_equal(net_link_for_slot(NET_SLOTS - 1, true, &l), 0);
	assert_string_equal(l.host_if, "aba16383");
	assert_int_equal(l.group, NET_GROUP_ALLOW);
	assert_true(l.address < NET_SUBNET_V4 + 65535); /* inside the /16 */
	assert_true(strlen(l.host_if) < IFNAMSIZ);
	assert_int_equal(l.host_mac[0] & 3, 2); /* locally administered unicast */
	assert_memory_not_equal(l.host_mac, l.sandbox_mac, 6);
	assert_int_equal(net_link_for_slot(NET_SLOTS, false, &l), -ERANGE);
}

/* The resolver a sandbox's /etc/resolv.conf names is the proxy's address, in the subnet, on no
 * slot. */
static void test_resolver_and_proxy_address(void **state)
{
	(void)state;
	assert_string_equal(SANDBOX_RESOLVER, EGRESS_PROXY_ADDRESS);
	struct in_addr a;
	assert_int_equal(inet_pton(AF_INET, EGRESS_PROXY_ADDRESS, &a), 1);
	uint32_t x = ntohl(a.s_addr);
	assert_int_equal(x >> (32 - NET_SUBNET_PREFIX), NET_SUBNET_V4 >> (32 - NET_SUBNET_PREFIX));
	struct net_link first;
	assert_int_equal(net_link_for_slot(0, true, &first), 0);
	assert_true(x < first.gateway); /* below every slot's pair */
	assert_int_equal(NET_PROXY_PORT, EGRESS_PROXY_PORT);
}

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * A child in a network namespace of its own plays the sandbox: it echoes
 * one UDP datagram on its address. The pair carries it both ways, the
 * counters see it, and the pair is gone once the child's namespace is.
 */
static void test_link_attach_carries_and_goes(void **state)
{
	(void)state;
	if (!in_own_netns)
		skip();
	struct net_link l;
	assert_int_equal(net_link_for_slot(7, false, &l), 0);
	int ready[2], go[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		if (unshare(CLONE_NEWNET) < 0 || write(ready[1], "r", 1) != 1 ||
		    read(go[0], &c, 1) != 1)
			_exit(2);
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in me = {.sin_family = AF_INET,
					 .sin_port = htons(9999),
					 .sin_addr.s_addr = htonl(l.address)};
		if (s < 0 || bind(s, (struct sockaddr *)&me, sizeof(me)) < 0 ||
		    write(ready[1], "b", 1) != 1)
			_exit(3);
		char buf[64];
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n <= 0 || sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, flen) != n)
			_exit(4);
		pause();
		_exit(0);
	}
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(pidfd >= 0);
	struct error err = {0};
	if (net_link_attach(&l, pidfd, &err) < 0)
		fail_msg("%s", err.msg);
	/* the same slot twice is refused, and leaves the first pair alone */
	struct error err2 = {0};
	assert_true(net_link_attach(&l, pidfd, &err2) < 0);
	assert_non_null(strstr(err2.msg, "create the veth pair"));
	assert_true(if_nametoindex(l.host_if) > 0);

	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(read(ready[0], &c, 1), 1);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	struct sockaddr_in to = {
	    .sin_family = AF_INET, .sin_port = htons(9999), .sin_addr.s_addr = htonl(l.address)};
	assert_int_equal(sendto(s, "hello", 5, 0, (struct sockaddr *)&to, sizeof(to)), 5);
	struct pollfd pfd = {.fd = s, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	char buf[16];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	assert_int_equal(recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(ntohl(from.sin_addr.s_addr), l.address);
	close(s);

	/* the gateway is the host's own address; the sandbox's is not */
	assert_true(net_addr_is_local(l.gateway));
	assert_false(net_addr_is_local(l.address));

	uint64_t in = 0, out = 0;
	assert_int_equal(net_link_bytes(l.host_if, &in, &out, &err), 0);
	assert_true(in >= 5 + 28 && out >= 5 + 28); /* the datagram and its headers, each way */

	kill(pid, SIGKILL);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(pidfd);
	/* the kernel takes the pair away with the namespace, a moment later */
	uint64_t deadline = ms_now() + 10000;
	while (if_nametoindex(l.host_if) > 0 && ms_now() < deadline)
		usleep(10000);
	assert_int_equal(if_nametoindex(l.host_if), 0);
	assert_int_equal(net_link_bytes(l.host_if, &in, &out, &err), -ENODEV);
	assert_int_equal(net_link_remove(l.host_if, &err), 0);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
}

/* "ip route add local PREFIX/LEN dev lo" (AnyIP), in our own namespace. */
static void add_local_route(uint32_t prefix, uint8_t len)
{
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	assert_non_null(nl);
	assert_int_equal(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	char buf[8192];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	*rtm = (struct rtmsg){.rtm_family = AF_INET,
			      .rtm_dst_len = len,
			      .rtm_table = RT_TABLE_LOCAL,
			      .rtm_protocol = RTPROT_STATIC,
			      .rtm_scope = RT_SCOPE_HOST,
			      .rtm_type = RTN_LOCAL};
	mnl_attr_put_u32(nlh, RTA_DST, htonl(prefix));
	mnl_attr_put_u32(nlh, RTA_OIF, if_nametoindex("lo"));
	assert_true(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) > 0);
	ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	assert_true(n > 0);
	assert_true(mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), NULL, NULL) >= 0);
	mnl_socket_close(nl);
}

/* The host's own addresses, as the kernel routes them: an interface's, and AnyIP's. */
static void test_addr_is_local(void **state)
{
	(void)state;
	if (!in_own_netns)
		skip();
	/* a namespace with nothing up: no address is ours, none routes anywhere */
	assert_false(net_addr_is_local(0xcb007109)); /* 203.0.113.9 */
	add_local_route(0xc6336400, 24);	     /* 198.51.100.0/24: all of it ours */
	assert_true(net_addr_is_local(0xc6336400 + 77));
	assert_true(net_addr_is_local(0xc63364ff));
	assert_false(net_addr_is_local(0xc6336500)); /* 198.51.101.0: the next one */
	assert_false(net_addr_is_local(0xcb007109));
}

static pid_t children[4]; /* netns_child()'s, killed by kill_children() even when a test fails */
static size_t nchildren;

/* Kill and reap a child of netns_child(), and forget it: its pid is not ours any more. */
static void reap_child(pid_t pid)
{
	for (size_t i = 0; i < nchildren; i++)
		if (children[i] == pid) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			children[i] = children[--nchildren];
			return;
		}
}

static int kill_children(void **state)
{
	(void)state;
	while (nchildren)
		reap_child(children[0]);
	return 0;
}

/* A child in a network namespace of its own, waiting; its pid, and its pidfd in *ret_pidfd. */
static pid_t netns_child(int *ret_pidfd)
{
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0 || write(ready[1], "r", 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	if (nchildren < sizeof(children) / sizeof(*children))
		children[nchildren++] = pid;
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	close(ready[1]);
	*ret_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(*ret_pidfd >= 0);
	return pid;
}

/*
 * A slot given to a new sandbox the moment its last one ended: that one's
 * link is still there (the kernel removes a namespace a moment later), and
 * the new link waits for it instead of failing.
 */
static void test_link_waits_for_the_slots_last(void **state)
{
	(void)state;
	if (!in_own_netns)
		skip();
	struct net_link l;
	assert_int_equal(net_link_for_slot(9, true, &l), 0);
	struct error err = {0};
	int a_fd, b_fd;
	pid_t a = netns_child(&a_fd), b = netns_child(&b_fd);
	if (net_link_attach(&l, a_fd, &err) < 0)
		fail_msg("%s", err.msg);
	reap_child(a);
	if (net_link_attach(&l, b_fd, &err) < 0)
		fail_msg("the slot's next link: %s", err.msg);
	assert_true(if_nametoindex(l.host_if) > 0);
	reap_child(b);
	close(a_fd);
	close(b_fd);
	uint64_t deadline = ms_now() + 10000;
	while (if_nametoindex(l.host_if) > 0 && ms_now() < deadline)
		usleep(10000);
	assert_int_equal(if_nametoindex(l.host_if), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_render_names_every_part),
	    cmocka_unit_test(test_refused_set_matches_addr_classes),
	    cmocka_unit_test(test_render_allowed_and_small_buffer),
	    cmocka_unit_test(test_run_mark),
	    cmocka_unit_test(test_install_replace_remove),
	    cmocka_unit_test(test_forwarding_toggles),
	    cmocka_unit_test(test_link_for_slot),
	    cmocka_unit_test(test_resolver_and_proxy_address),
	    cmocka_unit_test(test_link_attach_carries_and_goes),
	    cmocka_unit_test(test_addr_is_local),
	    cmocka_unit_test_teardown(test_link_waits_for_the_slots_last, kill_children),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
