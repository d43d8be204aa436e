/*
 * nethelper.h - a launcher's side of agentbox-net (src/network/main.c),
 * the helper that does what needs libmnl and libnftables for the
 * launchers that are static and cannot load them: the supervisor and the
 * shim (through supervisor/spec-json.h) and agentbox run.
 *
 * agentbox-net is found next to the running executable, or, in the build
 * tree, in src/network/ beside the executable's directory.
 *
 *	nethelper_attach()  a spec->network_attach hook: forks agentbox-net
 *	                    open|allow SLOT with init's pidfd as fd 3 (and the
 *	                    secrets' file, if any, as fd 4), waits
 *	                    for its "ready IFNAME" line, and leaves it running
 *	                    as the sandbox's relay; it ends by itself when init
 *	                    does, or when its launcher dies (a death signal)
 *	nethelper_park()    a pooled sandbox's link, made ahead, up but in no
 *	                    mode's group (agentbox-net park SLOT), its helper
 *	                    waiting
 *	nethelper_hand_out()  that link handed out in a mode: the helper
 *	                    gets the arguments nethelper_attach() would have
 *	                    given, and goes on as the relay; the link carries
 *	                    nothing until it is in its mode's group, which the
 *	                    helper sets, and the daemon too, at once (link.h)
 *	nethelper_run()     one of its short subcommands (host-up, host-down),
 *	                    run to its end
 *
 * Both only fork, exec and read a pipe: they may be called between
 * sandbox_start()'s clone and its go, by a single-threaded launcher. The
 * child's stdout and stderr are a pipe to us; every fd of the caller but
 * stdin (and the pidfd, as fd 3) must be O_CLOEXEC.
 */
#ifndef AGENTBOX_RUNTIME_NETHELPER_H
#define AGENTBOX_RUNTIME_NETHELPER_H

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NETHELPER_IFNAME_MAX	16  /* IFNAMSIZ: a link's host end, "ab<o|a|p><slot>" */
#define NETHELPER_ARGS_MAX	160 /* agentbox-net's argv: 17 + 2 per --allow-cidr (64 at most) */
#define NETHELPER_PARK_ARGS_MAX (1 << 20) /* bytes a parked helper reads (its own bound too) */

/*
 * One sandbox's link. What is asked for is the caller's: the strings must
 * outlive the attach. What the attach found is written only on success.
 */
struct nethelper_link {
	bool allow;	    /* allow mode; else open */
	const char *policy; /* allow: the "network" policy, as JSON (egress/policy.h) */
	const char *events; /* allow: the file the relay appends its refusals to */
	char *const *extra; /* more options ("--rate", "MBIT", "--resolver", ...), NULL-
			       terminated; NULL for none */
	int secrets_fd;	    /* allow: a readable fd of the secrets' private form, at its
			       start, handed on as fd 4 (--secrets-fd 4); 0 (never
			       such a file: stdin) for none. Borrowed */
	pid_t relay;	    /* the relay (agentbox-net), once attached; 0 before */
	char host_if[NETHELPER_IFNAME_MAX]; /* the link's host end, once attached */
};

/*
 * spec->network_attach: arg is a struct nethelper_link. 0, or -errno with
 * err ("network: " and agentbox-net's own message); on failure the helper
 * is killed and reaped, and nothing of the link is left (agentbox-net
 * removes what it made before it says anything else).
 */
int nethelper_attach(void *arg, int pidfd, unsigned slot, struct error *err);

/*
 * A parked link and its helper. Zero-initialized (or released) means none.
 */
struct nethelper_park {
	pid_t helper;			    /* agentbox-net park, waiting; 0: none */
	int args;			    /* its stdin's write end */
	int out;			    /* its stdout's and stderr's read end */
	char host_if[NETHELPER_IFNAME_MAX]; /* the parked link's host end */
};

/*
 * A spec->network_attach-shaped call whose arg is a struct nethelper_park:
 * park the link of the sandbox behind pidfd. 0, or -errno with err and
 * nothing left.
 */
int nethelper_park(void *arg, int pidfd, unsigned slot, struct error *err);

/*
 * Hand p's link out as l asks (l->secrets_fd must be 0: a parked link
 * takes none): its arguments written, then its "ready" awaited (it has
 * put the link into its mode's group, with l's rate, and serves). On
 * success l is filled as nethelper_attach() fills it (host_if the parked
 * name, which stays), and p is none. On failure too p is none: its helper
 * is killed and reaped, err says what it printed, and the link goes with
 * the sandbox. 0 or -errno with err.
 *
 * The daemon puts the link into its mode's group too (network/link.h's
 * net_link_set_group()), so that a launcher may answer it before it calls
 * this: the daemon goes on while the helper wakes.
 */
int nethelper_hand_out(struct nethelper_park *p, struct nethelper_link *l, struct error *err);

/* Is p's helper still there, waiting? If not, p is none (its fds closed). */
bool nethelper_park_alive(struct nethelper_park *p);

/* Kill and reap p's helper, if still parked; p is none. */
void nethelper_park_release(struct nethelper_park *p);

/*
 * Run agentbox-net with args (its argv after the program name, NULL-
 * terminated) and wait for its end. The first line it printed goes into
 * out (NUL-terminated, without its newline; may be NULL). 0 when it
 * exited 0; else -EIO with err ("network: " and the line it printed, or
 * how it ended), or -errno when it could not be started.
 */
int nethelper_run(const char *const *args, char *out, size_t size, struct error *err);

/*
 * Wait up to wait_ms for a relay to end by itself (it does once its
 * sandbox's init has), then kill it; reap it either way. relay <= 0 is
 * nothing to do.
 */
void nethelper_reap(pid_t relay, unsigned wait_ms);

/*
 * The bytes a sandbox received (*ret_in) and sent (*ret_out) through its
 * link, from its two ends' counters: host_if's in this process's network
 * namespace, and eth0's through /proc/<init_pid> (code inside has no way
 * to change either). 0, -ENODEV when host_if is empty (no link yet),
 * -ENOENT once the link is gone, or -errno.
 */
int nethelper_bytes(const char *host_if, pid_t init_pid, uint64_t *ret_in, uint64_t *ret_out);

#endif
