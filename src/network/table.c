/*
 * table.c - agentbox's nftables table. See table.h.
 */
#include "network/table.h"

#include "base/buf.h"
#include "base/fileio.h"
#include "network/link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * addr.h's refused IPv4 classes, as ranges: unspecified, private, shared,
 * loopback, link-local, reserved (192.0.0/24, 198.18/15), multicast with
 * 240/4 and the broadcast address (224/3). tests/unit/test-network-table.c
 * checks each against addr_classify().
 */
static const char *const refused_v4[] = {
    "0.0.0.0/8",     "10.0.0.0/8",   "100.64.0.0/10",  "127.0.0.0/8",	"169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3",
};

struct out {
	char *p;
	size_t size, used;
	bool full;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->p + o->used, o->size - o->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->size - o->used)
		o->full = true;
	else
		o->used += (size_t)n;
}

int net_table_render(const struct net_table_config *c, char *buf, size_t size)
{
	if (!size)
		return -ENOSPC;
	struct out o = {.p = buf, .size = size};
	/* every sandbox link by its name; a mode by its group too (link.h) */
	const char *sb = NET_IFNAME_PREFIX "*";
	char open[64], allow[64], parked[64];
	snprintf(open, sizeof(open), "iifname \"%s\" iifgroup 0x%08x", sb, NET_GROUP_OPEN);
	snprintf(allow, sizeof(allow), "iifname \"%s\" iifgroup 0x%08x", sb, NET_GROUP_ALLOW);
	snprintf(parked, sizeof(parked), "iifname \"%s\" iifgroup 0x%08x", sb, NET_GROUP_PARKED);
	put(&o, "table inet %s {\n", NET_TABLE);
	put(&o, "\tset refused {\n\t\ttype ipv4_addr; flags interval;\n\t\telements = { ");
	for (size_t i = 0; i < sizeof(refused_v4) / sizeof(*refused_v4); i++)
		put(&o, "%s%s", i ? ", " : "", refused_v4[i]);
	put(&o, " }\n\t}\n");
	put(&o, "\tset allowed {\n\t\ttype ipv4_addr; flags interval;\n");
	bool any = false;
	for (size_t i = 0; i < c->nallowed; i++) {
		const struct cidr *a = &c->allowed[i];
		if (!addr_is_v4(&a->net))
			continue;
		char text[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, a->net.b + 12, text, sizeof(text));
		put(&o, "%s%s/%u", any ? ", " : "\t\telements = { ", text, a->prefix - 96);
		any = true;
	}
	put(&o, "%s\t}\n", any ? " }\n" : "");

	put(&o, "\tchain guard {\n\t\ttype filter hook prerouting priority raw; policy accept;\n");
	put(&o, "\t\t%s drop\n", parked);
	put(&o, "\t\tiifname \"%s\" meta nfproto ipv6 drop\n", sb);
	put(&o, "\t\tiifname \"%s\" fib saddr . iif oif missing drop\n", sb);
	put(&o, "\t}\n");

	put(&o, "\tchain divert {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n");
	put(&o, "\t\tiifname \"%s\" meta l4proto { tcp, udp } th dport 53 redirect to :%d\n", sb,
	    NET_DNS_PORT);
	put(&o, "\t\t%s meta l4proto tcp redirect to :%d\n", allow, NET_PROXY_PORT);
	put(&o, "\t}\n");

	put(&o, "\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n");
	put(&o, "\t\t%s ct status dnat meta l4proto tcp th dport %d accept\n", allow,
	    NET_PROXY_PORT);
	put(&o, "\t\tiifname \"%s\" ct status dnat meta l4proto { tcp, udp } th dport %d accept\n",
	    sb, NET_DNS_PORT);
	put(&o, "\t\tiifname \"%s\" meta l4proto tcp reject with tcp reset\n", sb);
	put(&o, "\t\tiifname \"%s\" reject with icmp type admin-prohibited\n", sb);
	put(&o, "\t}\n");

	put(&o,
	    "\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n");
	put(&o, "\t\tiifname \"%s\" oifname \"%s\" meta l4proto tcp reject with tcp reset\n", sb,
	    sb);
	put(&o, "\t\tiifname \"%s\" oifname \"%s\" reject with icmp type admin-prohibited\n", sb,
	    sb);
	put(&o, "\t\t%s ip daddr @allowed accept\n", open);
	put(&o, "\t\t%s ip daddr @refused meta l4proto tcp reject with tcp reset\n", open);
	put(&o, "\t\t%s ip daddr @refused reject with icmp type admin-prohibited\n", open);
	put(&o, "\t\t%s accept\n", open);
	put(&o, "\t\tiifname \"%s\" drop\n", sb);
	put(&o, "\t\toifname \"%s\" ct state established,related accept\n", sb);
	put(&o, "\t\toifname \"%s\" drop\n", sb);
	put(&o, "\t}\n");

	put(&o, "\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; "
		"policy accept;\n");
	put(&o, "\t\tip saddr %s oifname != \"%s\" masquerade\n", NET_SUBNET, sb);
	put(&o, "\t}\n");
	if (c->run)
		put(&o, "\tchain %s {\n\t}\n", NET_TABLE_RUN_MARK);
	put(&o, "}\n");

	put(&o,
	    "table arp %s {\n\tchain input {\n\t\ttype filter hook input priority filter; "
	    "policy accept;\n\t\tiifname \"%s\" drop\n\t}\n}\n",
	    NET_TABLE, sb);
	return o.full ? -ENOSPC : (int)o.used;
}

/* One nft transaction; err gets nft's own message. */
static int run_nft(const char *text, const char *what, struct error *err)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!nft)
		return error_set(err, ENOMEM, "nftables: %s: out of memory", what);
	if (nft_ctx_buffer_output(nft) < 0 || nft_ctx_buffer_error(nft) < 0) {
		nft_ctx_free(nft);
		return error_set(err, ENOMEM, "nftables: %s: out of memory", what);
	}
	int r = nft_run_cmd_from_buffer(nft, text);
	if (r != 0) {
		const char *msg = nft_ctx_get_error_buffer(nft);
		char line[256] = "";
		if (msg) {
			size_t n = strcspn(msg, "\n");
			snprintf(line, sizeof(line), "%.*s", (int)(n < 255 ? n : 255), msg);
		}
		error_set(err, EIO, "nftables: %s: %s", what, line[0] ? line : "failed");
	}
	nft_ctx_free(nft);
	return r != 0 ? -EIO : 0;
}

/* "add" then "delete" in one transaction: gone, whether it was there or not. */
#define DROP_TABLES                                                                                \
	"add table inet " NET_TABLE "\ndelete table inet " NET_TABLE "\n"                          \
	"add table arp " NET_TABLE "\ndelete table arp " NET_TABLE "\n"

int net_table_install(const struct net_table_config *c, struct error *err)
{
	char text[NET_RULESET_MAX + sizeof(DROP_TABLES)];
	memcpy(text, DROP_TABLES, sizeof(DROP_TABLES) - 1);
	int n = net_table_render(c, text + sizeof(DROP_TABLES) - 1, NET_RULESET_MAX);
	if (n < 0)
		return error_set(err, ENOSPC, "nftables: the ruleset is over %d bytes",
				 NET_RULESET_MAX);
	return run_nft(text, "install the agentbox table", err);
}

int net_table_remove(struct error *err)
{
	return run_nft(DROP_TABLES, "remove the agentbox table", err);
}

bool net_table_exists(void)
{
	return run_nft("list table inet " NET_TABLE "\n", "list", NULL) == 0;
}

bool net_table_is_run(void)
{
	return run_nft("list chain inet " NET_TABLE " " NET_TABLE_RUN_MARK "\n", "list", NULL) == 0;
}

#define IP_FORWARD "/proc/sys/net/ipv4/ip_forward"

int net_forwarding_get(void)
{
	char buf[8] = "";
	int fd = open(IP_FORWARD, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -e : -EIO;
	return buf[0] == '1';
}

int net_forwarding_set(bool on, struct error *err)
{
	int r = write_file_at(AT_FDCWD, IP_FORWARD, on ? "1" : "0");
	return r < 0 ? error_set_errno(err, -r, "%s", IP_FORWARD) : 0;
}
