/*
 * host.h - agentbox-net's host-up and host-down: the host's side of
 * sandboxes with a network (table.h's table, IPv4 forwarding) for a
 * launcher without agentboxd, agentbox run, which is static and cannot
 * load libnftables itself. agentboxd does the same in its own process
 * (src/daemon/network.c).
 *
 *	agentbox-net host-up
 *	    agentbox's table there (agentboxd's, or another run's)? Touch
 *	    nothing, print "present". Else install it, marked as agentbox
 *	    run's (net_table_config.run), turn net.ipv4.ip_forward on, and
 *	    print "installed F", F its value before (0 or 1).
 *	agentbox-net host-down [--forwarding 0|1]
 *	    a sandbox's link (link.h's net_links_left()) left here:
 *	    touch nothing, print "busy". Else: agentboxd's table (unmarked:
 *	    it replaced run's when it started, and owns it now): touch
 *	    nothing, print "kept". Run's table: remove it, then set
 *	    forwarding to --forwarding's value if given, print "removed".
 *	    No table: set forwarding as asked, print "absent".
 *
 * Both act on the network namespace they run in. They take no lock: the
 * launcher runs them one at a time (see src/cli/run-network.h). Exit 0
 * with the one line; 1 with one line on stderr when nftables or the
 * sysctl failed (what host-up installed is taken away again); 2 on a
 * usage error.
 */
#ifndef AGENTBOX_NETWORK_HOST_H
#define AGENTBOX_NETWORK_HOST_H

/* agentbox-net host-up | host-down [...]: argv[1] is the subcommand. */
int net_host_main(int argc, char **argv);

#endif
