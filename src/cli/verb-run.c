/*
 * agentbox run: one command in one fresh sandbox, daemonless.
 *
 * Parse and validate everything first (exit 125 before anything exists),
 * ready the host's network when it has one (run-network.h), start the
 * sandbox, forward nothing but our own death (SIGINT, SIGTERM and SIGHUP
 * kill the sandbox), then take the network down and report how it ended.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/run-image.h"
#include "cli/run-network.h"
#include "runtime/sandbox.h"
#include "runtime/spec.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static const char help[] =
    "usage: agentbox run [OPTIONS] -- COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND in a new sandbox: its own user, pid, mount, ipc, uts, net and\n"
    "cgroup namespaces, a cgroup with limits, a read-only root built from the\n"
    "host's /usr (or an image), seccomp and Landlock. Nothing of the host and\n"
    "nothing of other sandboxes is visible. stdin, stdout and stderr pass\n"
    "through.\n"
    "\n"
    "options:\n"
    "  --memory SIZE      memory limit, swap excluded (default 512m)\n"
    "  --cpus N           CPU quota, fractions allowed (default 1)\n"
    "  --pids N           most processes and threads at once (default 256)\n"
    "  --disk SIZE        writable space: /tmp, /dev/shm and the workdir share it;\n"
    "                     it is memory-backed and counts toward --memory (default 1g)\n"
    "  --timeout DUR      wall-clock limit: 500ms, 90s, 5m, 2h, 1h30m (default none)\n"
    "  --env KEY=VALUE    set a variable; repeatable. Only PATH, HOME and LANG\n"
    "                     are set otherwise: nothing of the caller's passes\n"
    "  --volume HOST_DIR:SANDBOX_DIR[:ro]\n"
    "                     bind a host directory; repeatable. Its owner appears as\n"
    "                     the sandbox user\n"
    "  --workdir DIR      the writable, empty working directory (default /workspace)\n"
    "  --rootfs DIR       use an image directory (e.g. made by debootstrap) read-only\n"
    "                     instead of the host's /usr and a synthesized /etc\n"
    "  --image-tree DIR   / is a writable overlay of an image's tree as the image\n"
    "                     store unpacks it (files owned by its ids + 199934464 on\n"
    "                     the host), never written itself; writes land in --disk\n"
    "  --image REF        / is a writable overlay of agentboxd's image REF (name:tag\n"
    "                     or digest: agentboxd says which, its tree is read under\n"
    "                     --state-dir); its Env, WorkingDir, User (not root), and\n"
    "                     Entrypoint + Cmd when no COMMAND is given, are the defaults\n"
    "  --state-dir DIR    agentboxd's state directory (default /var/lib/agentbox)\n"
    "  --user USER        sandbox (the default, but for --image's User: uid 1000, no\n"
    "                     capabilities) or root\n"
    "                     (uid 0 of the sandbox's own user namespace, with only the\n"
    "                     capabilities package managers need; never the host's root)\n"
    "  --network MODE     none (the default: only lo), open (any public address),\n"
    "                     or allow:DOMAIN[:PORT][,...] (only those names;\n"
    "                     *.example.org for its subdomains; ports 80 and 443 by\n"
    "                     default). open and allow install agentbox's nftables\n"
    "                     table if agentboxd has not, and take it away at the end\n"
    "                     (docs/cli.md)\n"
    "  --network-rate MBIT  cap the network at MBIT Mbit/s each way (1 to 100000)\n"
    "  --resolver ADDR[:PORT]  the DNS server names are resolved with, outside the\n"
    "                     sandbox (default: the host's /etc/resolv.conf)\n"
    "  --network-log FILE allow mode: append each refused connection or name to\n"
    "                     FILE as it happens, one JSON line each (/dev/stderr works);\n"
    "                     without it they are printed on stderr at the end\n"
    "  --result FILE      write a JSON result: exit_code, signal, oom_killed,\n"
    "                     timed_out, wall_ms, cpu_ms, peak_memory_bytes, and in\n"
    "                     allow mode egress_denied (the number of refusals)\n"
    "\n"
    "sizes take k, m, g, t (binary units); DIR paths are absolute.\n"
    "\n"
    "exit status:\n"
    "  N      the command's own exit status\n"
    "  128+N  the command was killed by signal N\n"
    "  137    the sandbox ran out of memory (with a message on stderr)\n"
    "  124    the timeout passed (with a message on stderr)\n"
    "  126    the command could not be executed\n"
    "  127    the command was not found\n"
    "  125    agentbox itself failed: a bad option, a missing rootfs, an absent\n"
    "         kernel feature; one line on stderr names the cause\n";

enum {
	OPT_MEMORY = 256,
	OPT_CPUS,
	OPT_PIDS,
	OPT_DISK,
	OPT_TIMEOUT,
	OPT_ENV,
	OPT_VOLUME,
	OPT_WORKDIR,
	OPT_ROOTFS,
	OPT_IMAGE_TREE,
	OPT_IMAGE,
	OPT_STATE_DIR,
	OPT_USER,
	OPT_NETWORK,
	OPT_NETWORK_RATE,
	OPT_RESOLVER,
	OPT_NETWORK_LOG,
	OPT_RESULT,
	OPT_HELP,
};

static const struct option options[] = {
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"env", required_argument, NULL, OPT_ENV},
    {"volume", required_argument, NULL, OPT_VOLUME},
    {"workdir", required_argument, NULL, OPT_WORKDIR},
    {"rootfs", required_argument, NULL, OPT_ROOTFS},
    {"image-tree", required_argument, NULL, OPT_IMAGE_TREE},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"user", required_argument, NULL, OPT_USER},
    {"network", required_argument, NULL, OPT_NETWORK},
    {"network-rate", required_argument, NULL, OPT_NETWORK_RATE},
    {"resolver", required_argument, NULL, OPT_RESOLVER},
    {"network-log", required_argument, NULL, OPT_NETWORK_LOG},
    {"result", required_argument, NULL, OPT_RESULT},
    {"help", no_argument, NULL, OPT_HELP},
    {0},
};

struct run_args {
	struct spec spec;
	struct run_network net;
	struct run_image image;
	const char *result_path;
	bool help;
};

static int parse_value(int opt, const char *arg, struct run_args *a, struct error *err)
{
	struct spec *s = &a->spec;
	int r;
	switch (opt) {
	case OPT_MEMORY:
		if (parse_size(arg, &s->memory_bytes) < 0)
			return error_set(err, EINVAL,
					 "--memory: '%s' is not a size (e.g. 512m, 2g)", arg);
		return 0;
	case OPT_CPUS:
		if (parse_cpus_milli(arg, &s->cpu_milli) < 0)
			return error_set(err, EINVAL,
					 "--cpus: '%s' is not a positive number (e.g. 0.5, 2)",
					 arg);
		return 0;
	case OPT_PIDS:
		if (parse_u64(arg, &s->pids) < 0)
			return error_set(err, EINVAL, "--pids: '%s' is not a whole number", arg);
		return 0;
	case OPT_DISK:
		if (parse_size(arg, &s->disk_bytes) < 0)
			return error_set(err, EINVAL, "--disk: '%s' is not a size (e.g. 64m, 1g)",
					 arg);
		return 0;
	case OPT_TIMEOUT:
		if (parse_duration_ms(arg, &s->timeout_ms) < 0 || s->timeout_ms == 0)
			return error_set(err, EINVAL,
					 "--timeout: '%s' is not a duration (e.g. 90s, 2h)", arg);
		return 0;
	case OPT_ENV:
		r = s->nenv >= SPEC_ENV_MAX ? -E2BIG : spec_add_env(s, arg);
		if (r < 0)
			return error_set(err, -r, "--env: more than %d variables", SPEC_ENV_MAX);
		return 0;
	case OPT_VOLUME:
		return spec_add_volume(s, (char *)arg, err);
	case OPT_WORKDIR:
		s->workdir = arg;
		return 0;
	case OPT_ROOTFS:
		s->rootfs = arg;
		return 0;
	case OPT_IMAGE_TREE:
		s->image_tree = arg;
		return 0;
	case OPT_IMAGE:
		a->image.ref = arg;
		return 0;
	case OPT_STATE_DIR:
		if (arg[0] != '/')
			return error_set(err, EINVAL, "--state-dir: '%s' is not an absolute path",
					 arg);
		a->image.state_dir = arg;
		return 0;
	case OPT_USER:
		a->image.user_given = true;
		if (strcmp(arg, "root") == 0)
			s->user = SPEC_USER_ROOT;
		else if (strcmp(arg, "sandbox") == 0)
			s->user = SPEC_USER_SANDBOX;
		else
			return error_set(err, EINVAL, "--user: '%s' is not root or sandbox", arg);
		return 0;
	case OPT_NETWORK: {
		struct egress_policy p;
		if ((r = egress_policy_parse_cli(arg, &p, err)) < 0)
			return r;
		egress_policy_release(&a->net.policy);
		a->net.policy = p;
		return 0;
	}
	case OPT_NETWORK_RATE:
		return cli_parse_network_rate(arg, &a->net.rate_mbit, err);
	case OPT_RESOLVER: {
		uint32_t addr;
		uint16_t port;
		if (parse_ipv4_port(arg, 53, &addr, &port) < 0)
			return error_set(err, EINVAL, "--resolver: '%s' is not an IPv4 ADDR[:PORT]",
					 arg);
		a->net.resolver = arg;
		return 0;
	}
	case OPT_NETWORK_LOG:
		a->net.log_path = arg;
		return 0;
	case OPT_RESULT:
		a->result_path = arg;
		return 0;
	case OPT_HELP:
		a->help = true;
		return 0;
	}
	return error_set(err, EINVAL, "internal: unhandled option");
}

static int parse_args(int argc, char **argv, struct run_args *a, struct error *err)
{
	opterr = 0;
	optind = 1;
	int opt;
	/* "+": stop at the first non-option, so the command's own flags are its own */
	while ((opt = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
		if (opt == 'h')
			opt = OPT_HELP;
		if (opt == '?') {
			const char *bad = argv[optind - 1];
			if (optopt)
				return error_set(err, EINVAL, "option '%s' needs a value", bad);
			return error_set(err, EINVAL,
					 "unknown option '%s' (see agentbox run --help)", bad);
		}
		int r = parse_value(opt, optarg, a, err);
		if (r < 0)
			return r;
	}
	a->spec.argv = (const char *const *)argv + optind;
	a->spec.argc = (size_t)(argc - optind);
	return run_network_check(&a->net, &a->spec, err);
}

static void format_size(uint64_t bytes, char *buf, size_t size)
{
	if (bytes % (1ULL << 20) == 0)
		snprintf(buf, size, "%" PRIu64 " MiB", bytes >> 20);
	else if (bytes % 1024 == 0)
		snprintf(buf, size, "%" PRIu64 " KiB", bytes >> 10);
	else
		snprintf(buf, size, "%" PRIu64 " bytes", bytes);
}

static void format_duration(uint64_t ms, char *buf, size_t size)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, size, "%" PRIu64 "ms", ms);
}

/* The exit status agentbox run returns, and the message that goes with it. */
static int report(const struct spec *spec, const struct sandbox_result *r, int cancel_sig)
{
	char buf[64];
	switch (r->end) {
	case SANDBOX_EXITED:
		return r->exit_status;
	case SANDBOX_SIGNALED:
		return 128 + r->term_signal;
	case SANDBOX_OOM_KILLED:
		format_size(spec->memory_bytes, buf, sizeof(buf));
		fprintf(stderr, "agentbox: sandbox killed: out of memory (limit %s)\n", buf);
		return 137;
	case SANDBOX_TIMED_OUT:
		format_duration(spec->timeout_ms, buf, sizeof(buf));
		fprintf(stderr, "agentbox: sandbox killed: timed out after %s\n", buf);
		return 124;
	case SANDBOX_CANCELLED:
		fprintf(stderr, "agentbox: sandbox killed: agentbox received signal %d\n",
			cancel_sig);
		return 128 + cancel_sig;
	case SANDBOX_EXEC_FAILED:
		if (r->exec_errno == ENOENT) {
			fprintf(stderr, "agentbox: %s: command not found\n", spec->argv[0]);
			return 127;
		}
		fprintf(stderr, "agentbox: %s: cannot execute: %s\n", spec->argv[0],
			strerror(r->exec_errno));
		return 126;
	case SANDBOX_SETUP_FAILED:
		break;
	}
	return EXIT_AGENTBOX;
}

static const char *end_name(enum sandbox_end end)
{
	static const char *const names[] = {
	    [SANDBOX_EXITED] = "exited",
	    [SANDBOX_SIGNALED] = "signaled",
	    [SANDBOX_OOM_KILLED] = "oom_killed",
	    [SANDBOX_TIMED_OUT] = "timed_out",
	    [SANDBOX_CANCELLED] = "cancelled",
	    [SANDBOX_EXEC_FAILED] = "exec_failed",
	    [SANDBOX_SETUP_FAILED] = "setup_failed",
	};
	return names[end];
}

/*
 * Write the result JSON next to its final name, then rename it into place.
 * denied: allow mode's refusals, -1 when unknown, -2 without allow mode.
 */
static int write_result(const char *path, const struct sandbox_result *r, int exit_code,
			long denied)
{
	char tmp[4096], json[1024], sig[16], code[16], egress[48] = "";
	snprintf(code, sizeof(code), "%d", r->exit_status);
	snprintf(sig, sizeof(sig), "%d", r->term_signal);
	if (denied >= 0)
		snprintf(egress, sizeof(egress), ", \"egress_denied\": %ld", denied);
	else if (denied == -1)
		snprintf(egress, sizeof(egress), ", \"egress_denied\": null");
	snprintf(json, sizeof(json),
		 "{\"end\": \"%s\", \"exit_code\": %s, \"signal\": %s, \"oom_killed\": %s, "
		 "\"timed_out\": %s, \"wall_ms\": %" PRIu64 ", \"cpu_ms\": %" PRIu64
		 ", \"peak_memory_bytes\": %" PRIu64 "%s, \"agentbox_exit\": %d}\n",
		 end_name(r->end), r->end == SANDBOX_EXITED ? code : "null",
		 r->term_signal ? sig : "null", r->oom_killed ? "true" : "false",
		 r->end == SANDBOX_TIMED_OUT ? "true" : "false", r->wall_ms, r->cpu_ms,
		 r->peak_memory_bytes, egress, exit_code);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int r2 = create_file_at(AT_FDCWD, tmp, json, 0644);
	if (r2 == 0 && rename(tmp, path) < 0)
		r2 = -errno;
	if (r2 < 0)
		unlink(tmp);
	return r2;
}

int verb_run(int argc, char **argv)
{
	struct run_args a = {0};
	struct error err = {0};
	_cleanup_close_ int sigfd = -1;
	spec_init(&a.spec);
	run_network_init(&a.net);
	run_image_init(&a.image);
	int rc = EXIT_AGENTBOX;
	long denied = -1;

	if (parse_args(argc, argv, &a, &err) < 0) {
		rc = cli_fail("run: %s", err.msg);
		goto out;
	}
	if (a.help) {
		fputs(help, stdout);
		rc = 0;
		goto out;
	}
	if (run_image_apply(&a.image, &a.spec, &err) < 0 || spec_validate(&a.spec, &err) < 0) {
		rc = cli_fail("run: %s", err.msg);
		goto out;
	}
	if (geteuid() != 0) {
		rc = cli_fail("run: needs root (it maps uid ranges and creates cgroups)");
		goto out;
	}
	bool allow = a.net.policy.mode == EGRESS_ALLOW;

	/* Our death must not orphan the sandbox: these signals tear it down. */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sigfd < 0) {
		rc = cli_fail("run: signalfd: %s", strerror(errno));
		goto out;
	}

	if (run_network_up(&a.net, &a.spec, &err) < 0) {
		rc = cli_fail("run: %s", err.msg);
		goto down;
	}
	struct sandbox *sb;
	if (sandbox_start(&a.spec, &sb, &err) < 0) {
		rc = cli_fail("run: %s", err.msg);
		goto down;
	}
	struct sandbox_result res;
	int r = sandbox_wait(sb, sigfd, &res, &err);
	sandbox_free(sb);
	if (r < 0) {
		rc = cli_fail("run: %s", err.msg);
		goto down;
	}
	if (res.end == SANDBOX_SETUP_FAILED) {
		rc = cli_fail("run: %s", err.msg);
	} else {
		int cancel_sig = 0;
		struct signalfd_siginfo si;
		if (res.end == SANDBOX_CANCELLED && read(sigfd, &si, sizeof(si)) == sizeof(si))
			cancel_sig = (int)si.ssi_signo;
		rc = report(&a.spec, &res, cancel_sig ? cancel_sig : SIGTERM);
	}
	/* its refusals, and the host's side taken down, before the result says so */
	if (run_network_down(&a.net, &denied, &err) < 0)
		(void)cli_fail("run: %s", err.msg); /* the command's status stands */
	if (a.result_path && (r = write_result(a.result_path, &res, rc, allow ? denied : -2)) < 0)
		rc = cli_fail("run: cannot write --result %s: %s", a.result_path, strerror(-r));
	goto out;
down:
	if (run_network_down(&a.net, &denied, &err) < 0)
		(void)cli_fail("run: %s", err.msg);
out:
	(void)run_network_down(&a.net, &denied, &err); /* what is left: only memory */
	spec_release(&a.spec);
	run_image_release(&a.image);
	return rc;
}
