/*
 * agentbox-net - plumbs one sandbox's network, for a launcher that cannot
 * itself: the supervisor and the shim are static executables, and libmnl
 * is a shared library.
 *
 *	agentbox-net open SLOT [--rate MBIT]
 *	agentbox-net allow SLOT --policy JSON --events FILE [--rate MBIT]
 *	             [--resolver ADDR[:PORT]] [--allow-cidr CIDR]...
 *	             [--secrets-fd N --ca DIR [--upstream-cacert FILE]]
 *	agentbox-net park SLOT
 *	agentbox-net host-up | host-down [--forwarding 0|1]   (host.h)
 *
 * fd 3 is the sandbox init's pidfd. Both make the sandbox's veth pair
 * (link.h), bind the sandbox's relay (relay.h) on its gateway (open: the
 * resolver alone, for every name; allow: the resolver for the listed
 * names and the proxy), print "ready IFNAME" on stdout (the host end's
 * name), drop every privilege (nobody, no capability), and serve
 * until the sandbox's init ends or its launcher does. On failure: one
 * line on stderr, exit 1 (2 for a usage error), and nothing left.
 *
 * park: for a pooled sandbox, the link is made ahead, in no mode yet
 * (net_link_park(): the table drops all it carries), the relay's sockets
 * bound, "parked IFNAME" printed, and the mode's arguments read from stdin
 * to its end: "open" or "allow" and the options above, each ended by a
 * NUL. Then the link is handed out (net_link_hand_out(): its mode's group,
 * its rate) and all goes on as for open or allow; the launcher need not
 * wait for "ready" (the daemon puts the link into its group too, at once).
 * EOF with nothing read: exit 0, the link left to go with the sandbox. A
 * parked link takes no secrets.
 *
 * With secrets (allow only): fd N holds their private form
 * (egress/secret.h), read and closed before anything else; the proxy
 * intercepts the TLS of their hosts with DIR's CA (network/intercept.h),
 * whose key is read before the privileges go.
 */
#include "base/parse.h"
#include "egress/secret.h"
#ifdef AGENTBOX_NET_FULL
#include "network/host.h"
#include "network/intercept.h"
#endif
#include "network/link.h"
#include "network/relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#define PIDFD	       3
#define NOBODY	       65534
#define ALLOW_CIDR_MAX 64

static const char usage[] =
    "usage: agentbox-net open SLOT [--rate MBIT]\n"
    "       agentbox-net allow SLOT --policy JSON --events FILE [--rate MBIT]\n"
    "                    [--resolver ADDR[:PORT]] [--allow-cidr CIDR]...\n"
    "                    [--secrets-fd N --ca DIR [--upstream-cacert FILE]]\n"
    "       agentbox-net park SLOT   (then the mode's arguments on stdin)\n"
    "       agentbox-net host-up | host-down [--forwarding 0|1]\n"
    "fd 3: the sandbox init's pidfd\n";

#define SECRETS_JSON_MAX (1 << 20) /* bytes read from --secrets-fd */
#define PARK_ARGS_MAX	 (1 << 20) /* bytes of arguments read by a parked helper (nethelper.h) */

static int fail(const char *msg, const char *what)
{
	fprintf(stderr, "%s%s%s\n", msg, what ? ": " : "", what ? what : "");
	return 1;
}

/* The relay ends with the sandbox: init's pidfd turns readable when it exits. */
static void *watch_init(void *arg)
{
	(void)arg;
	struct pollfd p = {.fd = PIDFD, .events = POLLIN};
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	_exit(0);
}

/*
 * What the relay needs once its sockets are bound is no privilege at all:
 * it parses hostile bytes as nobody, with no capability and no way to
 * gain one. Its fd limit is raised first (each connection takes six).
 */
static int drop_privileges(void)
{
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	/* a uid change from 0 cleared the capabilities; the death signal must be set again,
	 * and dumpable off again (the change set it to fs.suid_dumpable's value) */
	return prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ? -1
											      : 0;
}

static int parse_resolver(const char *s, struct relay_config *c)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	uint64_t port = 53;
	struct in_addr a;
	if (n >= sizeof(host) ||
	    (colon && (parse_u64(colon + 1, &port) < 0 || !port || port > 65535)))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &a) != 1)
		return -EINVAL;
	c->resolver = ntohl(a.s_addr);
	c->resolver_port = (uint16_t)port;
	return 0;
}

#ifdef AGENTBOX_NET_FULL
static bool wants(void *x, const char *host)
{
	return intercept_wants(x, host);
}

static int serve(void *x, int client, const uint8_t *pre, size_t prelen, bool tls, int up,
		 const char *host, struct error *err)
{
	return intercept_serve(x, client, pre, prelen, tls, up, host, err);
}

/* The secrets on fd (closed here), as the proxy's interceptor. 0 or -errno with err. */
static int load_secrets(int fd, const char *ca_dir, const char *upstream, struct relay_config *rc,
			struct error *err)
{
	char *text = malloc(SECRETS_JSON_MAX + 1);
	size_t len = 0;
	ssize_t n = 0;
	while (
	    text && len < SECRETS_JSON_MAX &&
	    ((n = read(fd, text + len, SECRETS_JSON_MAX - len)) > 0 || (n < 0 && errno == EINTR)))
		len += n > 0 ? (size_t)n : 0;
	close(fd);
	if (!text || n < 0)
		return free(text), error_set(err, EIO, "--secrets-fd: cannot read it");
	json_error_t jerr;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	explicit_bzero(text, len);
	free(text);
	struct secret_rule *rules = NULL;
	size_t nrules = 0;
	int r = j ? secret_rules_from_json(j, &rules, &nrules, err)
		  : error_set(err, EINVAL, "--secrets-fd: not JSON");
	json_decref(j);
	if (r < 0)
		return r;
	struct intercept_rule *ir = calloc(nrules ? nrules : 1, sizeof(*ir));
	for (size_t i = 0; ir && i < nrules; i++)
		ir[i] = (struct intercept_rule){.host = rules[i].host,
						.placeholder = rules[i].placeholder,
						.value = rules[i].value};
	struct intercept_config c = {
	    .ca_dir = ca_dir, .upstream_cafile = upstream, .rules = ir, .nrules = nrules};
	struct intercept *x = NULL;
	r = ir ? intercept_new(&c, &x, err) : error_set(err, ENOMEM, "out of memory");
	free(ir);
	secret_rules_free(rules, nrules);
	if (r == 0)
		*rc = (struct relay_config){
		    .intercept = x, .intercept_wants = wants, .intercept_serve = serve};
	return r;
}
#else
/*
 * agentbox-net is the light one: a sandbox's link and relay, without
 * OpenSSL or libnftables, whose loading would cost every networked
 * sandbox's start milliseconds. For secrets (TLS interception) and for
 * agentbox run's host side, it becomes agentbox-net-full, beside it, with
 * the same arguments and fds.
 */
static int exec_full(char **argv)
{
	char exe[4096], path[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return fail("cannot find agentbox-net-full", strerror(errno));
	exe[n] = '\0';
	snprintf(path, sizeof(path), "%s/agentbox-net-full", dirname(exe));
	execv(path, argv);
	return fail(path, strerror(errno));
}
#endif

/* A parked link, and its relay's sockets, bound before its mode was known (park()). */
struct parked {
	struct net_parked link;
	struct relay *relay;
};

/*
 * Serve the sandbox in slot: make its link and bind the relay (or hand
 * out the parked ones), and serve until the sandbox ends.
 */
static int run(unsigned slot, bool allow, int argc, char **argv, struct parked *parked)
{
	static const struct option opts[] = {
	    {"policy", required_argument, NULL, 'p'},
	    {"events", required_argument, NULL, 'e'},
	    {"resolver", required_argument, NULL, 'r'},
	    {"allow-cidr", required_argument, NULL, 'c'},
	    {"rate", required_argument, NULL, 'R'},
	    {"secrets-fd", required_argument, NULL, 's'},
	    {"ca", required_argument, NULL, 'a'},
	    {"upstream-cacert", required_argument, NULL, 'u'},
	    {0},
	};
	static struct cidr allowed[ALLOW_CIDR_MAX];
	struct relay_config c = {.events_fd = -1};
	const char *policy_text = NULL, *events = NULL, *ca_dir = NULL, *upstream = NULL;
	uint64_t rate = 0, secrets_fd = 0;
	bool has_secrets = false;
	int opt;
	optind = 3;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'p')
			policy_text = optarg;
		else if (opt == 'e')
			events = optarg;
		else if (opt == 'r' && parse_resolver(optarg, &c) == 0)
			continue;
		else if (opt == 'c' && c.nallowed < ALLOW_CIDR_MAX &&
			 cidr_parse(optarg, &allowed[c.nallowed]) == 0)
			c.nallowed++;
		else if (opt == 'R' && parse_u64(optarg, &rate) == 0 && rate && rate <= UINT32_MAX)
			continue;
		else if (opt == 's' && parse_u64(optarg, &secrets_fd) == 0 && secrets_fd > 3 &&
			 secrets_fd < 1024)
			has_secrets = true;
		else if (opt == 'a')
			ca_dir = optarg;
		else if (opt == 'u')
			upstream = optarg;
		else
			return fputs(usage, stderr), 2;
	}
	if (optind != argc || allow != (policy_text && events) ||
	    (!allow && (policy_text || events)) || has_secrets != (ca_dir != NULL) ||
	    (parked && has_secrets) || (upstream && !has_secrets) || (has_secrets && !allow))
		return fputs(usage, stderr), 2;
	struct error err = {0};
	/* the CA's key and the secrets' values: in no core dump, and no one's to ptrace */
	struct rlimit no_core = {0, 0};
	if (has_secrets &&
	    (setrlimit(RLIMIT_CORE, &no_core) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0))
		return fail("no core dumps", strerror(errno));
#ifdef AGENTBOX_NET_FULL
	struct relay_config hooks = {0};
	if (has_secrets && load_secrets((int)secrets_fd, ca_dir, upstream, &hooks, &err) < 0)
		return fail(err.msg, NULL);
	c.intercept = hooks.intercept;
	c.intercept_wants = hooks.intercept_wants;
	c.intercept_serve = hooks.intercept_serve;
#else
	if (has_secrets)
		return exec_full(argv);
#endif
	c.allowed = allowed;
	struct net_link l;
	if (net_link_for_slot(slot, allow, &l) < 0)
		return fail("slot out of range", NULL);
	l.rate_mbit = (uint32_t)rate;

	/* open: the resolver alone, for every name, its answers filtered as allow's are */
	static struct egress_policy policy = {.mode = EGRESS_OPEN};
	c.dns_only = !allow;
	if (allow) {
		json_error_t jerr;
		json_t *j = json_loads(policy_text, 0, &jerr);
		if (!j || egress_policy_from_json(j, &policy, &err) < 0 ||
		    policy.mode != EGRESS_ALLOW)
			return fail("--policy",
				    j ? (err.msg[0] ? err.msg : "not mode allow") : jerr.text);
		json_decref(j);
		if ((c.events_fd = open(events, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) <
		    0)
			return fail(events, strerror(errno));
	}
	c.policy = &policy;

	c.gateway = l.gateway;
	c.sandbox = l.address;
	struct relay *r = NULL;
	const char *host_if = parked ? parked->link.host_if : l.host_if;
	if (parked) {
		if (net_link_hand_out(&parked->link, &l, &err) < 0)
			return fail(err.msg, NULL);
		relay_configure(r = parked->relay, &c);
	} else {
		if (net_link_attach(&l, PIDFD, &err) < 0)
			return fail(err.msg, NULL);
		if (relay_bind(&c, &r, &err) < 0) {
			(void)net_link_remove(host_if, NULL);
			return fail(err.msg, NULL);
		}
	}
	/* still one thread: glibc changes a process's ids by signalling each thread */
	if (drop_privileges() < 0) {
		(void)net_link_remove(host_if, NULL);
		return fail("drop privileges", strerror(errno));
	}
	pthread_t t;
	if (pthread_create(&t, NULL, watch_init, NULL) != 0) {
		(void)net_link_remove(host_if, NULL);
		return fail("cannot start a thread", NULL);
	}
	/* ready: the launcher reads this line and lets the sandbox go (for a parked
	 * link it may not wait for it: the link's group, set by the daemon, decides) */
	if ((printf("ready %s\n", host_if) < 0 || fflush(stdout) != 0) && !parked)
		return fail("cannot say ready", NULL);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 1);
		dup2(null, 2); /* the launcher stops reading: nothing may be written there */
		close(null);
	}
	relay_run(r);
}

/*
 * park SLOT: the link made whole but parked (link.h), the relay's sockets
 * bound, then the mode's arguments read from stdin (each ended by a NUL)
 * and served as run() serves them. One thread until then (see run()),
 * which watches the sandbox's end and stdin at once.
 */
static int park(unsigned slot)
{
	static struct parked p;
	struct net_link l;
	struct error err = {0};
	if (net_link_for_slot(slot, false, &l) < 0)
		return fail("slot out of range", NULL);
	if (net_link_park(&l, PIDFD, &p.link, &err) < 0)
		return fail(err.msg, NULL);
	struct relay_config bound = {.gateway = l.gateway, .sandbox = l.address, .events_fd = -1};
	if (relay_bind(&bound, &p.relay, &err) < 0) {
		(void)net_link_remove(p.link.host_if, NULL);
		return fail(err.msg, NULL);
	}
	if (printf("parked %s\n", p.link.host_if) < 0 || fflush(stdout) != 0)
		return fail("cannot say parked", NULL);
	struct pollfd wait[2] = {{.fd = 0, .events = POLLIN}, {.fd = PIDFD, .events = POLLIN}};
	while (poll(wait, 2, -1) < 0 && errno == EINTR)
		;
	if (wait[1].revents)
		return 0; /* the sandbox has ended: its link is gone with it */
	/* the arguments, to EOF: the launcher closes its end once they are written */
	static char text[PARK_ARGS_MAX + 1];
	size_t len = 0;
	ssize_t n;
	while (len <= PARK_ARGS_MAX && ((n = read(0, text + len, PARK_ARGS_MAX + 1 - len)) > 0 ||
					(n < 0 && errno == EINTR)))
		len += n > 0 ? (size_t)n : 0;
	if (len == 0)
		return 0; /* not handed out: the link goes with the sandbox */
	static char *argv[3 + 2 * ALLOW_CIDR_MAX + 16];
	char slot_text[16];
	int argc = 0;
	snprintf(slot_text, sizeof(slot_text), "%u", slot);
	argv[argc++] = "agentbox-net";
	if (len > PARK_ARGS_MAX || text[len - 1] != '\0')
		return fputs(usage, stderr), 2;
	for (size_t at = 0; at < len; at += strlen(text + at) + 1) {
		if (argc == (int)(sizeof(argv) / sizeof(argv[0])) - 1)
			return fputs(usage, stderr), 2;
		argv[argc++] = text + at;
		if (argc == 2)
			argv[argc++] = slot_text;
	}
	argv[argc] = NULL;
	if (argc < 3 || (strcmp(argv[1], "allow") != 0 && strcmp(argv[1], "open") != 0))
		return fputs(usage, stderr), 2;
	return run(slot, strcmp(argv[1], "allow") == 0, argc, argv, &p);
}

int main(int argc, char **argv)
{
	uint64_t slot;
	/* whatever starts us: we go when it goes */
	pid_t parent = getppid();
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		return 1;
	/* a write to a socket its peer closed is an error to handle, not a death */
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && strncmp(argv[1], "host-", 5) == 0)
#ifdef AGENTBOX_NET_FULL
		return net_host_main(argc, argv); /* agentbox run's host side: host.h */
#else
		return exec_full(argv);
#endif
	if (argc < 3 || parse_u64(argv[2], &slot) < 0 || slot >= NET_SLOTS)
		return fputs(usage, stderr), 2;
	if (strcmp(argv[1], "park") == 0)
		return argc == 3 ? park((unsigned)slot) : (fputs(usage, stderr), 2);
	if (strcmp(argv[1], "allow") != 0 && strcmp(argv[1], "open") != 0)
		return fputs(usage, stderr), 2;
	return run((unsigned)slot, strcmp(argv[1], "allow") == 0, argc, argv, NULL);
}
