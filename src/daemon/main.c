/*
 * agentboxd - the agentbox daemon: durable tasks over HTTP+JSON.
 *
 *	agentboxd [--socket PATH] [--state-dir DIR] [--listen ADDR:PORT
 *	          [--tls-cert FILE --tls-key FILE]]
 *	          [--max-running N] [--pool N] [--supervisor PATH] [--shim PATH]
 *	agentboxd --print-token [--state-dir DIR]
 *
 * main() is a list of steps: parse the options, prepare the process and
 * the state directory (core/layout.h), open the store (SQLite in the
 * state dir), start the scheduler thread (src/sched) and the interactive
 * sandboxes with their warm pool (src/fleet), then one HTTP listener per
 * socket (server.c). It then waits for SIGTERM or SIGINT and stops;
 * running tasks and sandboxes go on under their supervisors and shims
 * and are found again by the next start.
 *
 * Exit status: 0 after a clean stop; 1 when it cannot start or serve (a
 * certificate libmicrohttpd refuses, say); 2 for a usage error (an option
 * alone that needs another, a --tls-cert or --tls-key file that cannot be
 * read or is not PEM).
 */
#include "daemon/daemon.h"

#include "api/sandbox-request.h"
#include "api/terminal-get.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/parse.h"
#include "core/layout.h"
#include "core/limits.h"
#include "image/pull.h"
#include "image/bootstrap.h"
#include "image/store.h"
#include "sched/sched.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <getopt.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SCHED_TICK_MS 25

static const char usage_text[] =
    "usage: agentboxd [--socket PATH] [--state-dir DIR] [--listen ADDR:PORT\n"
    "                 [--tls-cert FILE --tls-key FILE]] [--max-running N]\n"
    "                 [--pool N] [--pool-network N]\n"
    "                 [--socket-user UID=TENANT]... [--tenant-quota NAME=VALUE]...\n"
    "                 [--audit-rows N] [--retain DURATION] [--input-ttl DURATION]\n"
    "                 [--registry-config FILE]\n"
    "                 [--debian-mirror URL] [--debian-keyring FILE]\n"
    "                 [--supervisor PATH] [--shim PATH]\n"
    "                 [--rate N] [--rate-burst N] [--auth-fail-rate N] [--auth-fail-burst N]\n"
    "                 [--allow-origin ORIGIN]...\n"
    "       agentboxd --print-token [--state-dir DIR]\n"
    "\n"
    "  --socket PATH      unix socket to serve, root's alone and --socket-user's\n"
    "                     (default " DAEMON_SOCKET_DEFAULT "); root is an admin there\n"
    "  --socket-user UID=TENANT  let the local user UID (a number or a name)\n"
    "                     connect, as a member of TENANT; repeat (at most 64)\n"
    "  --audit-rows N     the audit log's rows kept, the oldest deleted past it\n"
    "                     (default 100000, at most 1000000)\n"
    "  --retain DURATION  remove ended tasks (their records, logs, /state, files)\n"
    "                     and ended sandboxes' records this long after they ended:\n"
    "                     7d, 12h, 30s (1s to 36500d; default none: keep them)\n"
    "  --input-ttl DURATION  remove an input (POST /v1/inputs) no task has named\n"
    "                     this long after it arrived (1s to 30d; default 1h)\n"
    "  --tenant-quota NAME=VALUE  every tenant's quota NAME where its own does not\n"
    "                     say (agentbox tenant set): sandboxes, tasks_running,\n"
    "                     tasks_queued, memory_mb, cpus, disk_mb or timeout_s; a\n"
    "                     number or 'none' (the default: no bound); repeat\n"
    "  --state-dir DIR    the database and task files (default " DAEMON_STATE_DIR_DEFAULT ")\n"
    "  --listen ADDR:PORT also serve TCP; every request then needs\n"
    "                     'Authorization: Bearer <key>' (agentbox key create);\n"
    "                     a loopback address, unless it serves TLS or\n"
    "  --insecure-listen  lets --listen take any address: keys go in clear\n"
    "  --tls-cert FILE    serve HTTPS on --listen (TLS 1.2 or 1.3) with this\n"
    "                     certificate chain (PEM, the server's first) and\n"
    "  --tls-key FILE     its private key (PEM; keep it mode 0600)\n"
    "  --max-running N    tasks running at once; the rest wait, first in first out\n"
    "                     (default 16)\n"
    "  --max-queued N     tasks waiting at once (default 10000); more: 503\n"
    "  --pool N           interactive sandboxes kept ready with the default limits\n"
    "                     (default 2 per CPU, at most 64; 0 = none)\n"
    "  --pool IMAGE=N     N more of the store's IMAGE (name:tag or digest), for\n"
    "                     creates of that image as its defaults ask (at most 64\n"
    "                     each; repeatable, up to 16 images)\n"
    "  --pool-network N   more of them with their network link made ahead, for\n"
    "                     creates with a network, once one has asked for it\n"
    "                     (default: as many as --pool; at most 64; 0 = none)\n"
    "  --max-memory MB    the most memory one sandbox or task may ask for\n"
    "                     (default: the host's memory)\n"
    "  --max-disk MB      the most disk (its tmpfs) one may ask for (default: the\n"
    "                     host's memory, which a tmpfs uses)\n"
    "  --max-pids N       the most pids one may ask for (default: a quarter of\n"
    "                     what all sandboxes together may hold)\n"
    "  --max-sandboxes N  interactive sandboxes at once (default 1024); more: 503\n"
    "  --max-sandbox-memory MB  their memory limits and running tasks' added up\n"
    "                     (default: twice the host's memory, as limits are\n"
    "                     ceilings); more: 503, and tasks wait in the queue\n"
    "  --allow-cidr CIDR  let sandboxes with a network reach this private, shared\n"
    "                     (100.64/10) or ULA network, refused by default; repeat\n"
    "                     for more (at most 64)\n"
    "  --resolver ADDR[:PORT]  the DNS server that allow-mode sandboxes' names are\n"
    "                     resolved with (default: the host's /etc/resolv.conf)\n"
    "  --egress-cacert FILE  the CAs (PEM) that the servers given secrets must have\n"
    "                     certificates from (default: the host's trusted CAs)\n"
    "  --registry-config FILE  the registries `agentbox image pull` may need to be\n"
    "                     configured for: credentials, a CA, plain http (JSON;\n"
    "                     docs/images.md); read once at start\n"
    "  --rate N           requests a second each API key (or --socket-user) is\n"
    "                     served; more: 429 rate_limited (default 100; 0 = no limit)\n"
    "  --rate-burst N     requests a key may make at once (default: twice --rate)\n"
    "  --auth-fail-rate N failed authentications a second one address may make;\n"
    "                     past them its requests with a key are 429 until it\n"
    "                     refills (default 10; 0 = no limit)\n"
    "  --auth-fail-burst N  failed authentications at once (default: twice the rate)\n"
    "  --allow-origin ORIGIN  let pages of ORIGIN (https://host[:port]) open\n"
    "                     terminals (GET .../exec); repeat (at most 16); a\n"
    "                     handshake with another Origin is 403 (default: none)\n"
    "  --debian-mirror URL  the Debian mirror `agentbox image bootstrap` takes\n"
    "                     its packages from (default " IMAGE_BOOTSTRAP_MIRROR_DEFAULT ")\n"
    "  --debian-keyring FILE  the keys its Release must be signed with (default\n"
    "                     " IMAGE_BOOTSTRAP_KEYRING_DEFAULT ")\n"
    "  --supervisor PATH  the agentbox-supervisor binary (default: next to agentboxd)\n"
    "  --shim PATH        the agentbox-shim binary (default: next to agentboxd)\n"
    "  --version          print agentboxd's version and exit\n"
    "  --print-token      make a new admin key of the default tenant, print it\n"
    "                     (shown this once: the store keeps its hash) and exit\n"
    "\n"
    "exit status: 0 after SIGTERM or SIGINT, 1 when it cannot start, 2 usage error\n";

void daemon_wake(struct daemon *d)
{
	uint64_t one = 1;
	(void)!write(d->wake_fd, &one, sizeof(one));
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	fputs("agentboxd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* A helper binary lives next to agentboxd (installed), or in the build tree. */
static void default_helper(const char *name, const char *build_dir, char *buf, size_t size)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(buf, size, "%s", name);
		return;
	}
	exe[n] = '\0';
	char *dir = dirname(exe);
	snprintf(buf, size, "%s/%s", dir, name);
	if (access(buf, X_OK) != 0)
		snprintf(buf, size, "%s/../%s/%s", dir, build_dir, name);
}

/* What main() starts, to stop it again. */
struct run {
	int state_lock; /* held for our life: one daemon per state dir */
	struct store *sched_store;
	struct sched *sched;
	pthread_t sched_tid;
	bool sched_started;
	char *default_spec; /* the canonical spec of the default limits (the pool's) */
	struct fleet_image_pool image_pools[FLEET_IMAGE_POOLS_MAX]; /* their specs are ours */
	char *egress_json; /* the host's egress settings, for launchers (sched.h) */
	struct listener *unix_l, *tcp_l;
	struct stat sock_st; /* our socket file, to remove only that one */
};

/* Options without a letter. */
enum { OPT_DEBIAN_MIRROR = 0x200, OPT_DEBIAN_KEYRING, OPT_RETAIN, OPT_ALLOW_ORIGIN, OPT_INPUT_TTL };

/* Parse argv into d->cfg. -1 to go on, else the exit status (help, usage error). */
static int parse_options(int argc, char **argv, struct daemon *d, bool *print_token)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"state-dir", required_argument, NULL, 'd'},
	    {"listen", required_argument, NULL, 'l'},
	    {"max-running", required_argument, NULL, 'm'},
	    {"max-queued", required_argument, NULL, 'Q'},
	    {"supervisor", required_argument, NULL, 'x'},
	    {"shim", required_argument, NULL, 'y'},
	    {"pool", required_argument, NULL, 'P'},
	    {"pool-network", required_argument, NULL, 'N'},
	    {"max-memory", required_argument, NULL, 'M'},
	    {"max-disk", required_argument, NULL, 'D'},
	    {"max-pids", required_argument, NULL, 'I'},
	    {"max-sandboxes", required_argument, NULL, 'S'},
	    {"max-sandbox-memory", required_argument, NULL, 'T'},
	    {"allow-cidr", required_argument, NULL, 'C'},
	    {"resolver", required_argument, NULL, 'R'},
	    {"egress-cacert", required_argument, NULL, 'A'},
	    {"registry-config", required_argument, NULL, 'G'},
	    {"debian-mirror", required_argument, NULL, OPT_DEBIAN_MIRROR},
	    {"debian-keyring", required_argument, NULL, OPT_DEBIAN_KEYRING},
	    {"retain", required_argument, NULL, OPT_RETAIN},
	    {"input-ttl", required_argument, NULL, OPT_INPUT_TTL},
	    {"allow-origin", required_argument, NULL, OPT_ALLOW_ORIGIN},
	    {"print-token", no_argument, NULL, 'p'},
	    {"socket-user", required_argument, NULL, 'U'},
	    {"tenant-quota", required_argument, NULL, 'q'},
	    {"audit-rows", required_argument, NULL, 'a'},
	    {"insecure-listen", no_argument, NULL, 'i'},
	    {"rate", required_argument, NULL, 'r'},
	    {"rate-burst", required_argument, NULL, 'b'},
	    {"auth-fail-rate", required_argument, NULL, 'f'},
	    {"auth-fail-burst", required_argument, NULL, 'g'},
	    {"tls-cert", required_argument, NULL, 'c'},
	    {"tls-key", required_argument, NULL, 'k'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	int opt;
	uint64_t v;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			d->cfg.socket_path = optarg;
			break;
		case 'd':
			d->cfg.state_dir = optarg;
			break;
		case 'l':
			d->cfg.listen = optarg;
			break;
		case 'x':
			d->cfg.supervisor_path = optarg;
			break;
		case 'y':
			d->cfg.shim_path = optarg;
			break;
		case 'P':
			if (strchr(optarg, '=')) {
				if (daemon_pool_image_option(d, optarg) < 0)
					return 2;
				break;
			}
			if (parse_u64(optarg, &v) < 0 || v > FLEET_POOL_MAX) {
				fprintf(stderr, "agentboxd: --pool: '%s' is not 0..%d\n", optarg,
					FLEET_POOL_MAX);
				return 2;
			}
			d->cfg.pool_size = (unsigned)v;
			break;
		case 'N':
			if (parse_u64(optarg, &v) < 0 || v > FLEET_POOL_MAX) {
				fprintf(stderr, "agentboxd: --pool-network: '%s' is not 0..%d\n",
					optarg, FLEET_POOL_MAX);
				return 2;
			}
			d->cfg.pool_network = (int)v;
			break;
		case 'p':
			*print_token = true;
			break;
		case 'i':
			d->cfg.insecure_listen = true;
			break;
		case 'a':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > STORE_AUDIT_ROWS_MAX) {
				fprintf(stderr, "agentboxd: --audit-rows: '%s' is not 1..%d\n",
					optarg, STORE_AUDIT_ROWS_MAX);
				return 2;
			}
			d->cfg.audit_rows = (size_t)v;
			break;
		case 'q':
			if (quota_set_text(&d->cfg.quota_defaults, optarg) < 0) {
				fprintf(
				    stderr,
				    "agentboxd: --tenant-quota: '%s' is not NAME=VALUE with NAME "
				    "one of sandboxes, tasks_running, tasks_queued, memory_mb, "
				    "cpus, disk_mb, timeout_s and VALUE a number or 'none'\n",
				    optarg);
				return 2;
			}
			break;
		case 'c':
			d->cfg.tls_cert = optarg;
			break;
		case 'k':
			d->cfg.tls_key = optarg;
			break;
		case 'U': {
			struct error err = {0};
			if (d->cfg.nlocal_users == DAEMON_SOCKET_USERS_MAX) {
				fprintf(stderr, "agentboxd: --socket-user: at most %d\n",
					DAEMON_SOCKET_USERS_MAX);
				return 2;
			}
			struct api_local_user *u = &d->cfg.local_users[d->cfg.nlocal_users];
			if (socket_user_parse(optarg, u, &err) < 0) {
				fprintf(stderr, "agentboxd: %s\n", err.msg);
				return 2;
			}
			for (size_t i = 0; i < d->cfg.nlocal_users; i++)
				if (d->cfg.local_users[i].uid == u->uid) {
					fprintf(stderr,
						"agentboxd: --socket-user: uid %u is named twice\n",
						(unsigned)u->uid);
					return 2;
				}
			d->cfg.nlocal_users++;
			break;
		}
		case 'M':
		case 'D':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > (SPEC_MEMORY_MAX >> 20)) {
				fprintf(stderr, "agentboxd: --max-%s: '%s' is not 1..%llu (MiB)\n",
					opt == 'M' ? "memory" : "disk", optarg,
					(unsigned long long)(SPEC_MEMORY_MAX >> 20));
				return 2;
			}
			*(opt == 'M' ? &d->cfg.host.memory_bytes : &d->cfg.host.disk_bytes) = v
											      << 20;
			break;
		case 'S':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > 1000000) {
				fprintf(stderr,
					"agentboxd: --max-sandboxes: '%s' is not 1..1000000\n",
					optarg);
				return 2;
			}
			d->cfg.sandboxes_max = (unsigned)v;
			break;
		case 'T':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > (UINT64_MAX >> 21)) {
				fprintf(stderr,
					"agentboxd: --max-sandbox-memory: '%s' is not a "
					"number of MiB\n",
					optarg);
				return 2;
			}
			d->cfg.sandbox_memory_max = v << 20;
			break;
		case 'I':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > SPEC_PIDS_MAX) {
				fprintf(stderr, "agentboxd: --max-pids: '%s' is not 1..%llu\n",
					optarg, (unsigned long long)SPEC_PIDS_MAX);
				return 2;
			}
			d->cfg.host.pids = v;
			break;
		case 'm':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > SCHED_MAX_RUNNING_MAX) {
				fprintf(stderr, "agentboxd: --max-running: '%s' is not 1..%d\n",
					optarg, SCHED_MAX_RUNNING_MAX);
				return 2;
			}
			d->cfg.max_running = (unsigned)v;
			break;
		case 'Q':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > DAEMON_QUEUED_LIMIT) {
				fprintf(stderr, "agentboxd: --max-queued: '%s' is not 1..%d\n",
					optarg, DAEMON_QUEUED_LIMIT);
				return 2;
			}
			d->cfg.host.queued_max = v;
			break;
		case 'C': {
			struct cidr c;
			enum addr_class why;
			if (d->cfg.nallowed == DAEMON_ALLOW_CIDR_MAX) {
				fprintf(stderr, "agentboxd: --allow-cidr: more than %d\n",
					DAEMON_ALLOW_CIDR_MAX);
				return 2;
			}
			if (cidr_parse(optarg, &c) < 0) {
				fprintf(stderr,
					"agentboxd: --allow-cidr: '%s' is not a network "
					"(ADDR/PREFIX, host bits zero)\n",
					optarg);
				return 2;
			}
			/* it may open private, shared and ULA ranges, and nothing else:
			 * both its ends must be such (a CIDR is one aligned block) */
			struct addr last = c.net;
			for (unsigned bit = c.prefix; bit < 128; bit++)
				last.b[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
			if (addr_classify(&c.net) == ADDR_PUBLIC ||
			    addr_classify(&last) == ADDR_PUBLIC ||
			    !addr_is_reachable(&c.net, &c, 1, &why) ||
			    !addr_is_reachable(&last, &c, 1, &why)) {
				fprintf(stderr,
					"agentboxd: --allow-cidr: '%s' is not a private, shared "
					"(100.64/10) or ULA network\n",
					optarg);
				return 2;
			}
			d->cfg.allowed_text[d->cfg.nallowed] = optarg;
			d->cfg.allowed[d->cfg.nallowed++] = c;
			break;
		}
		case 'R': {
			struct in_addr a;
			char host[INET_ADDRSTRLEN];
			const char *colon = strchr(optarg, ':');
			size_t n = colon ? (size_t)(colon - optarg) : strlen(optarg);
			uint64_t port = 53;
			if (n >= sizeof(host) ||
			    (colon && (parse_u64(colon + 1, &port) < 0 || !port || port > 65535))) {
				n = sizeof(host);
			} else {
				memcpy(host, optarg, n);
				host[n] = '\0';
			}
			if (n >= sizeof(host) || inet_pton(AF_INET, host, &a) != 1) {
				fprintf(stderr,
					"agentboxd: --resolver: '%s' is not an IPv4 ADDR[:PORT]\n",
					optarg);
				return 2;
			}
			d->cfg.resolver = optarg;
			break;
		}
		case 'A':
			if (optarg[0] != '/' || access(optarg, R_OK) < 0) {
				fprintf(stderr,
					"agentboxd: --egress-cacert: '%s' is not a readable file "
					"given by its absolute path\n",
					optarg);
				return 2;
			}
			d->cfg.egress_cacert = optarg;
			break;
		case 'G':
			d->cfg.registry_config = optarg;
			break;
		case OPT_DEBIAN_MIRROR: {
			struct error err = {0};
			if (image_bootstrap_check_mirror(optarg, &err) < 0) {
				fprintf(stderr, "agentboxd: --debian-mirror: %s\n", err.msg);
				return 2;
			}
			d->cfg.debian_mirror = optarg;
			break;
		}
		case OPT_DEBIAN_KEYRING:
			if (optarg[0] != '/' || access(optarg, R_OK) < 0) {
				fprintf(stderr,
					"agentboxd: --debian-keyring: '%s' is not a readable file "
					"given by its absolute path\n",
					optarg);
				return 2;
			}
			d->cfg.debian_keyring = optarg;
			break;
		case OPT_ALLOW_ORIGIN:
			if (!api_origin_is_valid(optarg)) {
				fprintf(stderr,
					"agentboxd: --allow-origin: '%s' is not an origin: "
					"http[s]://host[:port], no path\n",
					optarg);
				return 2;
			}
			if (d->cfg.norigins == API_ORIGINS_MAX) {
				fprintf(stderr, "agentboxd: --allow-origin: at most %d\n",
					API_ORIGINS_MAX);
				return 2;
			}
			d->cfg.origins[d->cfg.norigins++] = optarg;
			break;
		case OPT_RETAIN:
			if (daemon_retain_option(&d->cfg, optarg) < 0)
				return 2;
			break;
		case OPT_INPUT_TTL:
			if (daemon_input_ttl_option(&d->cfg, optarg) < 0)
				return 2;
			break;
		case 'r':
		case 'b':
		case 'f':
		case 'g':
			if (daemon_rate_option(&d->cfg, opt, optarg) < 0)
				return 2;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("agentboxd %s\n", AGENTBOX_VERSION);
			return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
		default:
			fprintf(stderr, "agentboxd: unknown or incomplete option '%s'\n%s",
				argv[optind - 1], usage_text);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "agentboxd: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (d->cfg.state_dir[0] != '/')
		return fprintf(stderr, "agentboxd: --state-dir must be absolute\n"), 2;
	struct error err = {0};
	if (daemon_tls_configure(&d->cfg, &err) < 0)
		return fprintf(stderr, "agentboxd: %s\n", err.msg), 2;
	/* read once, here, before any thread (it starts libcurl) */
	if (image_registries_load(d->cfg.registry_config, &d->registries, &err) < 0)
		return fprintf(stderr, "agentboxd: %s\n", err.msg), 2;
	if (d->cfg.listen && listen_tcp_check(d->cfg.listen, d->cfg.tls.cert != NULL,
					      d->cfg.insecure_listen, &err) < 0)
		return fprintf(stderr, "agentboxd: %s\n", err.msg), 2;
	return -1;
}

/*
 * What one sandbox may ask for, where no option said: the host's memory
 * (for the tmpfs disk too: its pages are memory), and the pids that all
 * sandboxes together may hold (core/limits.h).
 */
static void default_host_limits(struct api_host_limits *h, uint64_t *ret_host_memory)
{
	char buf[4096];
	uint64_t mem_kib = 0, pid_max = 32768;
	ssize_t n = read_file_at(AT_FDCWD, "/proc/meminfo", buf, sizeof(buf));
	const char *line = n > 0 ? memmem(buf, (size_t)n, "MemTotal:", 9) : NULL;
	if (line) { /* "MemTotal:       24522520 kB" */
		const char *p = line + 9, *end = buf + n;
		while (p < end && *p == ' ')
			p++;
		char num[24];
		size_t len = 0;
		while (p + len < end && len < sizeof(num) - 1 && p[len] >= '0' && p[len] <= '9')
			len++;
		memcpy(num, p, len);
		num[len] = '\0';
		if (parse_u64(num, &mem_kib) < 0)
			mem_kib = 0;
	}
	n = read_file_at(AT_FDCWD, "/proc/sys/kernel/pid_max", buf, 32);
	if (n > 0) {
		buf[strcspn(buf, "\n")] = '\0';
		(void)parse_u64(buf, &pid_max);
	}
	if (!h->memory_bytes && mem_kib)
		h->memory_bytes = mem_kib << 10;
	if (!h->disk_bytes && mem_kib)
		h->disk_bytes = mem_kib << 10;
	if (!h->pids)
		h->pids = limits_pids_one(pid_max);
	if (!h->queued_max)
		h->queued_max = DAEMON_QUEUED_MAX;
	*ret_host_memory = mem_kib << 10;
}

/* The totals of the fleet's admission, where no option said. */
static void default_admission(struct daemon_config *cfg, uint64_t host_memory)
{
	if (!cfg->sandboxes_max)
		cfg->sandboxes_max = DAEMON_SANDBOXES_MAX;
	if (!cfg->sandbox_memory_max)
		cfg->sandbox_memory_max = 2 * host_memory; /* 0 when unknown: no bound */
}

/* Root, and the helper binaries we start. 0, or the exit status. */
static int check_host(const struct daemon *d)
{
	if (geteuid() != 0)
		return fail("needs root (sandboxes need uid ranges and cgroups)");
	if (access(d->cfg.supervisor_path, X_OK) != 0)
		return fail("cannot run the supervisor %s: %s", d->cfg.supervisor_path,
			    strerror(errno));
	if (access(d->cfg.shim_path, X_OK) != 0)
		return fail("cannot run the shim %s: %s", d->cfg.shim_path, strerror(errno));
	/* a task's /state is an image on a loop device (supervisor/state.h) */
	if (access("/dev/loop-control", F_OK) != 0)
		fprintf(stderr,
			"agentboxd: warning: no /dev/loop-control: tasks will fail to start "
			"(load the loop module)\n");
	return 0;
}

/*
 * The OOM score adjustment that keeps our promise and no more: the kernel
 * scores a process by its share of memory (in thousandths) plus this. At
 * -(DAEMON_RSS_CEILING_MB in thousandths of the host's memory), the daemon
 * scores 0 up to its ceiling, so below it any other process is taken first,
 * and above it (a broken promise) it is taken like any other.
 */
static int daemon_oom_score_adj(uint64_t host_memory)
{
	uint64_t ceiling = (uint64_t)DAEMON_RSS_CEILING_MB << 20;
	if (!host_memory || ceiling >= host_memory)
		return -1000;
	return -(int)((ceiling * 1000 + host_memory - 1) / host_memory);
}

/* The process's own settings: file mode mask, signals, fd limit, OOM score. */
static void prepare_process(uint64_t host_memory)
{
	umask(077);
	signal(SIGPIPE, SIG_IGN);
	/* each running task holds an fd here; use what the hard limit allows */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	char adj[16];
	snprintf(adj, sizeof(adj), "%d", daemon_oom_score_adj(host_memory));
	int r = write_file_at(AT_FDCWD, "/proc/self/oom_score_adj", adj);
	if (r < 0) /* lowering it takes CAP_SYS_RESOURCE, which some containers drop */
		fprintf(stderr, "agentboxd: warning: cannot set oom_score_adj to %s: %s\n", adj,
			strerror(-r));
}

/*
 * The state directory (0700, with tasks/), its lock, the store (a pool
 * for the HTTP threads, one connection for the scheduler), the token.
 */
static int open_state(struct daemon *d, struct run *run, struct error *err)
{
	char tasks[4200], lock_path[4200];
	int r = mkdir_p_at(AT_FDCWD, d->cfg.state_dir, 0700);
	if (r == 0 && chmod(d->cfg.state_dir, 0700) < 0)
		r = -errno;
	if (r == 0)
		r = layout_state_file(tasks, sizeof(tasks), d->cfg.state_dir, LAYOUT_TASKS);
	if (r == 0)
		r = mkdir_p_at(AT_FDCWD, tasks, 0700);
	if (r == 0)
		r = layout_state_file(d->db_path, sizeof(d->db_path), d->cfg.state_dir, LAYOUT_DB);
	if (r == 0)
		r = layout_state_file(lock_path, sizeof(lock_path), d->cfg.state_dir,
				      LAYOUT_DAEMON_LOCK);
	if (r < 0)
		return error_set_errno(err, -r, "state dir %s", d->cfg.state_dir);
	/* one daemon per state dir: two schedulers would import the same journals */
	run->state_lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (run->state_lock < 0 || flock(run->state_lock, LOCK_EX | LOCK_NB) < 0)
		return error_set(err, errno,
				 "another agentboxd uses %s (or it cannot be locked: %s)",
				 d->cfg.state_dir, strerror(errno));
	if ((r = store_pool_init(&d->pool, d->db_path, err)) < 0 ||
	    (r = store_open_sqlite(d->db_path, &run->sched_store, err)) < 0)
		return r;
	/* an older state directory's token stays good, as the legacy admin key */
	if ((r = daemon_adopt_token(d->cfg.state_dir, run->sched_store, err)) < 0)
		return r;
	return daemon_socket_tenants(d, run->sched_store, err);
}

static void *sched_main(void *arg)
{
	struct daemon *d = arg;
	while (!d->stopping) {
		struct error err = {0};
		if (sched_step(d->sched, &err) < 0)
			fprintf(stderr, "agentboxd: scheduler: %s\n", err.msg);
		struct pollfd pfd = {.fd = d->wake_fd, .events = POLLIN};
		if (poll(&pfd, 1, SCHED_TICK_MS) > 0) {
			uint64_t n;
			(void)!read(d->wake_fd, &n, sizeof(n));
		}
	}
	return NULL;
}

static void log_line(void *data, const char *msg)
{
	(void)data;
	fprintf(stderr, "agentboxd: %s\n", msg);
}

/*
 * Find what ran before this start, on the scheduler's store, before any
 * thread uses it: the tasks' attempts (src/sched) and the interactive
 * sandboxes (src/fleet, which then keeps the pool of the default spec).
 */
static int admit_task(void *data, const char *tenant, const struct quota *limit,
		      const char *spec_json, bool force, struct quota *ret_amounts,
		      enum quota_id *ret_over)
{
	return fleet_admit_task(((struct daemon *)data)->fleet, tenant, limit, spec_json, force,
				ret_amounts, ret_over);
}

static void release_task(void *data, const char *tenant, const struct quota *amounts)
{
	fleet_release_task(((struct daemon *)data)->fleet, tenant, amounts);
}

/* A tenant's quotas now, read with the scheduler's store (in its claim). */
static int task_limits(void *data, struct store *st, const char *tenant, struct quota *ret)
{
	struct error err = {0};
	return api_tenant_limits(st, &((struct daemon *)data)->cfg.quota_defaults, tenant, ret,
				 &err);
}

static int recover(struct daemon *d, struct run *run, struct error *err)
{
	int r;
	struct sandbox_request def = {0};
	struct api_error e = {0};
	if (sandbox_request_parse("{}", 2, &def, &e) < 0)
		return error_set(err, EINVAL, "the default sandbox spec: %s", e.message);
	run->default_spec = TAKE_PTR(def.spec_json);
	sandbox_request_release(&def);
	json_t *egress = json_object(), *cidrs = json_array();
	for (size_t i = 0; cidrs && i < d->cfg.nallowed; i++)
		json_array_append_new(cidrs, json_string(d->cfg.allowed_text[i]));
	if (egress && cidrs)
		json_object_set_new(egress, "allow_cidr", cidrs);
	if (egress && d->cfg.resolver)
		json_object_set_new(egress, "resolver", json_string(d->cfg.resolver));
	if (egress && daemon_egress_ca(d, egress) < 0)
		json_decref(TAKE_PTR(egress));
	run->egress_json = egress ? json_dumps(egress, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(egress);
	if (!run->egress_json)
		return error_set(err, ENOMEM, "out of memory");
	if ((r = image_store_open(d->cfg.state_dir, &d->images, err)) < 0 ||
	    (r = daemon_image_pools(d, run->image_pools, err)) < 0)
		return r;
	struct fleet_config fc = {.state_dir = d->cfg.state_dir,
				  .shim_path = d->cfg.shim_path,
				  .db_path = d->db_path,
				  .default_spec_json = run->default_spec,
				  .egress_json = run->egress_json,
				  .pool_size = d->cfg.pool_size,
				  .pool_network = d->cfg.pool_network < 0
						      ? d->cfg.pool_size
						      : (unsigned)d->cfg.pool_network,
				  .image_pools = run->image_pools,
				  .nimage_pools = d->cfg.nimage_pools,
				  .link_mode = daemon_link_mode,
				  .sandboxes_max = d->cfg.sandboxes_max,
				  .memory_max = d->cfg.sandbox_memory_max,
				  .log = log_line};
	if ((r = fleet_new(&fc, &d->fleet, err)) < 0 ||
	    (r = fleet_recover(d->fleet, run->sched_store, err)) < 0)
		return r;
	/* before the scheduler and the listeners: nothing makes a task meanwhile */
	if ((r = daemon_retain_sweep(d, run->sched_store, err)) < 0)
		return r;
	/* after the fleet: tasks' memory counts against the sandboxes' total */
	struct sched_config sc = {.state_dir = d->cfg.state_dir,
				  .supervisor_path = d->cfg.supervisor_path,
				  .egress_json = run->egress_json,
				  .max_running = d->cfg.max_running,
				  .log = log_line,
				  .limits = task_limits,
				  .admit = admit_task,
				  .release = release_task,
				  .network_ready = daemon_network_ready,
				  .data = d};
	if ((r = sched_new(&sc, run->sched_store, &run->sched, err)) < 0 ||
	    (r = daemon_network_start(d, err)) < 0)
		return r;
	return sched_recover(run->sched, err);
}

/* The scheduler's thread (woken through wake_fd) and the fleet's keeper. */
static int start_threads(struct daemon *d, struct run *run, struct error *err)
{
	d->sched = run->sched;
	d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->wake_fd < 0)
		return error_set_errno(err, errno, "eventfd");
	if (pthread_create(&run->sched_tid, NULL, sched_main, d) != 0)
		return error_set(err, EAGAIN, "cannot start the scheduler thread");
	run->sched_started = true;
	int r = fleet_start(d->fleet, err);
	return r < 0 ? r : daemon_retain_start(d, err);
}

/* One HTTP listener on the unix socket (no token), one on TCP if asked (token). */
static int start_listeners(struct daemon *d, struct run *run, struct error *err)
{
	/* both sockets listen before either is served: once the unix socket
	 * answers, a TCP client is never refused for having come too early */
	const struct daemon_tls *tls = d->cfg.tls.cert ? &d->cfg.tls : NULL;
	int tfd = d->cfg.listen
		      ? listen_tcp(d->cfg.listen, tls != NULL, d->cfg.insecure_listen, err)
		      : -1;
	if (d->cfg.listen && tfd < 0)
		return tfd;
	int ufd = listen_unix(d->cfg.socket_path, err);
	if (ufd < 0) {
		if (tfd >= 0)
			close(tfd);
		return ufd;
	}
	int r = stat(d->cfg.socket_path, &run->sock_st) < 0
		    ? error_set_errno(err, errno, "%s", d->cfg.socket_path)
		    : 0;
	if (r == 0)
		r = socket_acl_set(d->cfg.socket_path, d->cfg.local_users, d->cfg.nlocal_users,
				   err);
	if (r == 0 && tfd >= 0)
		r = server_start(d, tfd, tls, &run->tcp_l, err);
	else if (tfd >= 0)
		close(tfd);
	daemon_tls_forget_key(&d->cfg.tls); /* GnuTLS holds its own copy now */
	if (r < 0) {
		close(ufd);
		return r;
	}
	return server_start(d, ufd, NULL, &run->unix_l, err);
}

/* Stop serving; what runs under supervisors and shims goes on. */
static void stop(struct daemon *d, struct run *run)
{
	d->stopping = 1;
	daemon_wake(d);
	server_stop(run->unix_l);
	server_stop(run->tcp_l);
	if (run->sched_started)
		pthread_join(run->sched_tid, NULL);
	daemon_retain_stop(d);
	fleet_free(d->fleet); /* sandboxes go on under their shims */
	image_store_free(d->images);
	image_registries_free(d->registries);
	/* a running task may not have made its link yet: any task alive keeps the table */
	uint64_t queued = 1, running = 1;
	struct error err = {0};
	(void)store_task_count(run->sched_store, TASK_QUEUED, &queued, &err);
	(void)store_task_count(run->sched_store, TASK_RUNNING, &running, &err);
	if (daemon_network_stop(d, queued + running > 0, &err) < 0)
		fprintf(stderr, "agentboxd: %s\n", err.msg);
	/* the path is ours to remove only if it is still our socket */
	struct stat now_st;
	if (run->unix_l && stat(d->cfg.socket_path, &now_st) == 0 &&
	    now_st.st_ino == run->sock_st.st_ino && now_st.st_dev == run->sock_st.st_dev)
		unlink(d->cfg.socket_path);
	sched_free(run->sched);
	store_close(run->sched_store);
	store_pool_release(&d->pool);
	daemon_rate_stop(d);
	free(run->default_spec);
	for (size_t i = 0; i < FLEET_IMAGE_POOLS_MAX; i++)
		free((char *)run->image_pools[i].spec_json);
	free(run->egress_json);
	daemon_tls_release(&d->cfg.tls);
}

int main(int argc, char **argv)
{
	/* whatever our parent left open must not reach the supervisors */
	(void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	char supervisor[4096], shim[4096];
	default_helper("agentbox-supervisor", "supervisor", supervisor, sizeof(supervisor));
	default_helper("agentbox-shim", "shim", shim, sizeof(shim));
	struct daemon d = {.cfg = {.socket_path = DAEMON_SOCKET_DEFAULT,
				   .state_dir = DAEMON_STATE_DIR_DEFAULT,
				   .supervisor_path = supervisor,
				   .shim_path = shim,
				   .max_running = SCHED_MAX_RUNNING_DEFAULT,
				   .pool_size = fleet_pool_default(),
				   .pool_network = -1,
				   .rate = DAEMON_RATE_DEFAULT,
				   .auth_fail_rate = DAEMON_AUTH_FAIL_RATE_DEFAULT},
			   .wake_fd = -1,
			   .network_lock = PTHREAD_MUTEX_INITIALIZER};
	bool print_token = false;
	quota_none(&d.cfg.quota_defaults);
	int status = parse_options(argc, argv, &d, &print_token);
	if (status >= 0)
		return status;
	if (print_token) {
		struct error err = {0};
		return daemon_print_key(d.cfg.state_dir, &err) < 0 ? fail("%s", err.msg) : 0;
	}
	if ((status = check_host(&d)) != 0)
		return status;
	uint64_t host_memory;
	default_host_limits(&d.cfg.host, &host_memory);
	default_admission(&d.cfg, host_memory);
	prepare_process(host_memory);

	struct run run = {.state_lock = -1};
	struct error err = {0};
	if (daemon_rate_start(&d, &err) < 0 || open_state(&d, &run, &err) < 0 ||
	    recover(&d, &run, &err) < 0)
		return fail("%s", err.msg);
	/* Every thread inherits this mask: only the main thread takes these signals. */
	sigset_t stop_signals;
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	if (start_threads(&d, &run, &err) < 0 || start_listeners(&d, &run, &err) < 0) {
		status = fail("%s", err.msg);
		/* the threads read d, which is main's: joined before its frame goes */
		stop(&d, &run);
		return status;
	}
	fprintf(stderr,
		"agentboxd: serving unix:%s%s%s, state in %s, %u tasks at once, "
		"%u warm sandboxes\n",
		d.cfg.socket_path,
		!d.cfg.listen	 ? ""
		: d.cfg.tls.cert ? " and https:"
				 : " and tcp:",
		d.cfg.listen ? d.cfg.listen : "", d.cfg.state_dir, d.cfg.max_running,
		d.cfg.pool_size);

	int sig;
	sigwait(&stop_signals, &sig);
	fprintf(stderr,
		"agentboxd: signal %d: stopping; running tasks and sandboxes go on under "
		"their supervisors\n",
		sig);
	stop(&d, &run);
	return 0;
}
