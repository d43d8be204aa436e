/*
 * host.c - agentbox-net host-up and host-down. See host.h.
 */
#include "network/host.h"

#include "network/link.h"
#include "network/table.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char usage[] = "usage: agentbox-net host-up\n"
			    "       agentbox-net host-down [--forwarding 0|1]\n";

static int fail(const char *msg)
{
	fprintf(stderr, "%s\n", msg);
	return 1;
}

static int host_up(void)
{
	struct error err = {0};
	if (net_table_exists())
		return puts("present") < 0;
	int was = net_forwarding_get();
	if (was < 0)
		return fail("cannot read net.ipv4.ip_forward");
	struct net_table_config c = {.run = true};
	if (net_table_install(&c, &err) < 0)
		return fail(err.msg);
	if (!was && net_forwarding_set(true, &err) < 0) {
		(void)net_table_remove(NULL);
		return fail(err.msg);
	}
	return printf("installed %d\n", was) < 0;
}

/* forwarding: -1 to leave it, else 0 or 1. */
static int host_down(int forwarding)
{
	struct error err = {0};
	if (net_links_left())
		return puts("busy") < 0;
	const char *what = "absent";
	if (net_table_exists()) {
		if (!net_table_is_run())
			return puts("kept") < 0;
		if (net_table_remove(&err) < 0)
			return fail(err.msg);
		what = "removed";
	}
	if (forwarding >= 0 && net_forwarding_get() != forwarding &&
	    net_forwarding_set(forwarding, &err) < 0)
		return fail(err.msg);
	return puts(what) < 0;
}

int net_host_main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "host-up") == 0)
		return host_up();
	if (argc == 2 && strcmp(argv[1], "host-down") == 0)
		return host_down(-1);
	if (argc == 4 && strcmp(argv[1], "host-down") == 0 &&
	    strcmp(argv[2], "--forwarding") == 0 &&
	    (strcmp(argv[3], "0") == 0 || strcmp(argv[3], "1") == 0))
		return host_down(argv[3][0] - '0');
	fputs(usage, stderr);
	return 2;
}
