/*
 * run-network.h - agentbox run's network, without agentboxd.
 *
 * The sandbox's link is made as the supervisor makes it: spec->
 * network_attach forks agentbox-net open|allow (runtime/nethelper.h),
 * found next to the agentbox executable, which stays as the sandbox's
 * relay. What agentboxd would have readied on the host first, agentbox's
 * table (network/table.h) and IPv4 forwarding, run readies itself through
 * agentbox-net host-up and takes away through host-down (network/host.h),
 * by the daemon's rule: no link without the rules.
 *
 *	up    the table there (agentboxd's, or another run's)? use it as it
 *	      is. Else install it, marked as run's, and turn forwarding on,
 *	      recording its value before in network-N.json
 *	down  once the sandbox and its link are gone, and no other run is
 *	      live: run's table with no sandbox link left is removed and
 *	      forwarding put back as recorded; agentboxd's table is its own
 *
 * Per network namespace (the table and the sysctl are per namespace; N is
 * its inode number), in the run directory (runtime/sandbox.h):
 *
 *	network-N.lock  byte 0: held exclusively around host-up and
 *	                host-down, which so run one at a time; byte 1: held
 *	                shared by each live run, from before its host-up to
 *	                after its link is gone. A run takes the table down
 *	                only when it can hold byte 1 exclusively: no other
 *	                run is between its host-up and its end. OFD locks:
 *	                a killed run holds nothing. The run that leaves
 *	                nothing behind removes the file (a run waiting on the
 *	                removed one opens the new one).
 *	network-N.json  {"ip_forward": F}: forwarding before a run turned it
 *	                on. It stays while run's table may be there, and
 *	                while agentboxd holds a table it took over from a run
 *	                (so that the last run to end after agentboxd's clean
 *	                stop can put forwarding back); the run that removes
 *	                the table, or finds none, puts it back and removes the
 *	                file.
 *
 * agentboxd and run: agentboxd, when it starts, replaces any table it
 * finds with its own in one transaction (a run's sandbox keeps its rules
 * throughout) and then owns it: a run never removes it, and agentboxd's
 * clean stop keeps it while any link is left. agentboxd then records
 * forwarding as it found it (on), so after its clean stop forwarding
 * stays on until a run ends with nothing left. A run whose table is
 * agentboxd's gets agentboxd's --allow-cidr. One race is not covered: a
 * clean stop of agentboxd that removes its table between a run's host-up
 * and the moment its link exists (agentboxd takes no lock of run's).
 *
 * A run killed with SIGKILL leaves the table (and the record): its link
 * goes with its sandbox; the next run to end with nothing left removes
 * them.
 *
 * allow mode's refusals (one JSON line each, network/relay.h) are written
 * by the relay as they happen to --network-log FILE, or else to an
 * unnamed file in the run directory that run prints on stderr at the end.
 */
#ifndef AGENTBOX_CLI_RUN_NETWORK_H
#define AGENTBOX_CLI_RUN_NETWORK_H

#include "base/error.h"
#include "egress/policy.h"
#include "runtime/nethelper.h"
#include "runtime/spec.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* How long run waits at its end for its link to go with the sandbox's namespace. */
#define RUN_NETWORK_LINK_WAIT_MS 5000
/* How long it waits for the relay to end by itself before killing it. */
#define RUN_NETWORK_RELAY_WAIT_MS 1000
/* Refusals printed on stderr without --network-log; then only their number. */
#define RUN_NETWORK_PRINT_MAX 20

struct run_network {
	/* the options: run fills these while parsing */
	struct egress_policy policy; /* --network; owns its rules; mode none: nothing here */
	uint32_t rate_mbit;	     /* --network-rate, 0 for none */
	const char *resolver;	     /* --resolver ADDR[:PORT], or NULL: the host's resolv.conf */
	const char *log_path;	     /* --network-log FILE, or NULL */

	/* from run_network_up() to run_network_down() */
	int lock_fd; /* network-N.lock, byte 1 held shared; -1 when nothing is up */
	char lock_path[4200];
	char record[4200];  /* network-N.json */
	int events_fd;	    /* allow: the refusals' file; -1 */
	off_t events_start; /* its size before the sandbox; -1 when it cannot be read back */
	char events_path[64];
	char *policy_json;
	char rate_text[16];
	char *extra[5];
	struct nethelper_link link;
	unsigned link_index; /* the host end's ifindex, once attached */
};

/* Ready n for parsing: mode none, no fds. */
void run_network_init(struct run_network *n);

/*
 * The checks across options, once all are parsed: --network-rate,
 * --resolver and --network-log need a network (--network-log allow mode).
 * Adds HTTP_PROXY, HTTPS_PROXY, http_proxy and https_proxy to s for allow
 * mode, unless --env gave them. 0 or -EINVAL with err naming the option.
 */
int run_network_check(struct run_network *n, struct spec *s, struct error *err);

/*
 * With a network: ready the host (see above) and set s's network_attach.
 * Nothing with mode none. 0 or -errno with err; run_network_down() is
 * called either way and undoes what was done.
 */
int run_network_up(struct run_network *n, struct spec *s, struct error *err);

/*
 * After the sandbox has ended (or failed to start): reap the relay, wait
 * for the link to go, take the host's side down if this run is the last,
 * print the refusals when there is no --network-log, and free n.
 * *ret_denied is the number of refusals (-1: not known, or no allow mode).
 * 0, or -errno with err when the host's side could not be taken down.
 */
int run_network_down(struct run_network *n, long *ret_denied, struct error *err);

#endif
