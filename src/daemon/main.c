/*
 * agentboxd - the agentbox daemon: durable tasks over HTTP+JSON.
 *
 *	agentboxd [--socket PATH] [--state-dir DIR] [--listen ADDR:PORT]
 *	          [--max-running N] [--pool N] [--supervisor PATH] [--shim PATH]
 *	agentboxd --print-token [--state-dir DIR]
 *
 * main() parses, prepares the state directory, and wires the pieces: the
 * store (SQLite in the state dir), the scheduler thread (src/sched), the
 * interactive sandboxes and their warm pool (fleet.c), and one HTTP
 * listener per socket (server.c). It then waits for SIGTERM or
 * SIGINT and stops; running tasks go on under their supervisors and are
 * found again by the next start.
 *
 * Exit status: 0 after a clean stop; 1 when it cannot start or serve; 2
 * for a usage error.
 */
#include "daemon/daemon.h"
#include "daemon/fleet.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/parse.h"
#include "sched/sched.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <netinet/in.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SCHED_TICK_MS 25

static const char usage_text[] =
    "usage: agentboxd [--socket PATH] [--state-dir DIR] [--listen ADDR:PORT]\n"
    "                 [--max-running N] [--pool N] [--supervisor PATH] [--shim PATH]\n"
    "       agentboxd --print-token [--state-dir DIR]\n"
    "\n"
    "  --socket PATH      unix socket to serve, mode 0660 (default " DAEMON_SOCKET_DEFAULT ")\n"
    "  --state-dir DIR    the database, task files and token (default " DAEMON_STATE_DIR_DEFAULT
    ")\n"
    "  --listen ADDR:PORT also serve TCP; every request then needs\n"
    "                     'Authorization: Bearer <token>' (see --print-token)\n"
    "  --max-running N    tasks running at once; the rest wait, first in first out\n"
    "                     (default 16)\n"
    "  --pool N           interactive sandboxes kept ready with the default limits\n"
    "                     (default 2 per CPU, at most 64; 0 = none)\n"
    "  --supervisor PATH  the agentbox-supervisor binary (default: next to agentboxd)\n"
    "  --shim PATH        the agentbox-shim binary (default: next to agentboxd)\n"
    "  --print-token      print the TCP token (made at first start) and exit\n"
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

/* The TCP token: 32 random bytes as hex, made once, kept 0600 in the state dir. */
static int load_token(const char *state_dir, bool create, char token[65])
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/token", state_dir);
	ssize_t n = read_file_at(AT_FDCWD, path, token, 65);
	if (n == 64)
		return 0;
	if (!create)
		return n < 0 ? (int)n : -EINVAL;
	unsigned char rnd[32];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	return create_file_at(AT_FDCWD, path, token, 0600);
}

static int prepare_state_dir(struct daemon *d, struct error *err)
{
	char tasks[4200];
	int r = mkdir_p_at(AT_FDCWD, d->cfg.state_dir, 0700);
	if (r == 0 && chmod(d->cfg.state_dir, 0700) < 0)
		r = -errno;
	snprintf(tasks, sizeof(tasks), "%s/tasks", d->cfg.state_dir);
	if (r == 0)
		r = mkdir_p_at(AT_FDCWD, tasks, 0700);
	if (r < 0)
		return error_set_errno(err, -r, "state dir %s", d->cfg.state_dir);
	snprintf(d->db_path, sizeof(d->db_path), "%s/agentbox.db", d->cfg.state_dir);
	return 0;
}

static int listen_unix(const char *path, struct error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return error_set(err, ENAMETOOLONG, "--socket: path too long");
	memcpy(sa.sun_path, path, strlen(path) + 1);
	char dir[sizeof(sa.sun_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	mode_t mask = umask(022); /* the socket's group must reach it: 0755 */
	(void)mkdir_p_at(AT_FDCWD, dirname(dir), 0755);
	umask(mask);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_set_errno(err, errno, "socket");
	/* a socket file nobody answers on is a leftover of a crash: replace it */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return error_set(err, EADDRINUSE, "another agentboxd serves %s", path);
	}
	unlink(path);
	mode_t old = umask(0117);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 128) < 0) {
		r = errno;
		close(fd);
		return error_set_errno(err, r, "--socket %s", path);
	}
	return fd;
}

static int listen_tcp(const char *spec, struct error *err)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	uint64_t port;
	if (!colon || (size_t)(colon - spec) >= sizeof(host) || parse_u64(colon + 1, &port) < 0 ||
	    port == 0 || port > 65535)
		return error_set(err, EINVAL, "--listen: '%s' is not ADDR:PORT", spec);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
	struct sockaddr_storage ss = {0};
	socklen_t len;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	size_t hl = strlen(host);
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
			return error_set(err, EINVAL, "--listen: bad IPv6 address '%s'", host);
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		len = sizeof(*in6);
	} else {
		if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
			return error_set(err, EINVAL, "--listen: bad IPv4 address '%s'", host);
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		len = sizeof(*in4);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return error_set_errno(err, e, "--listen %s", spec);
	}
	return fd;
}

struct sched_thread {
	struct daemon *d;
	struct sched *sched;
};

static void *sched_main(void *arg)
{
	struct sched_thread *t = arg;
	while (!t->d->stopping) {
		struct error err = {0};
		if (sched_step(t->sched, &err) < 0)
			fprintf(stderr, "agentboxd: scheduler: %s\n", err.msg);
		struct pollfd pfd = {.fd = t->d->wake_fd, .events = POLLIN};
		if (poll(&pfd, 1, SCHED_TICK_MS) > 0) {
			uint64_t n;
			(void)!read(t->d->wake_fd, &n, sizeof(n));
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"state-dir", required_argument, NULL, 'd'},
	    {"listen", required_argument, NULL, 'l'},
	    {"max-running", required_argument, NULL, 'm'},
	    {"supervisor", required_argument, NULL, 'x'},
	    {"shim", required_argument, NULL, 'y'},
	    {"pool", required_argument, NULL, 'P'},
	    {"print-token", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
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
				   .pool_size = fleet_pool_default()}};
	bool print_token = false;
	int opt;
	uint64_t v;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			d.cfg.socket_path = optarg;
			break;
		case 'd':
			d.cfg.state_dir = optarg;
			break;
		case 'l':
			d.cfg.listen = optarg;
			break;
		case 'x':
			d.cfg.supervisor_path = optarg;
			break;
		case 'y':
			d.cfg.shim_path = optarg;
			break;
		case 'P':
			if (parse_u64(optarg, &v) < 0 || v > FLEET_POOL_MAX) {
				fprintf(stderr, "agentboxd: --pool: '%s' is not 0..%d\n", optarg,
					FLEET_POOL_MAX);
				return 2;
			}
			d.cfg.pool_size = (unsigned)v;
			break;
		case 'p':
			print_token = true;
			break;
		case 'm':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > SCHED_MAX_RUNNING_MAX) {
				fprintf(stderr, "agentboxd: --max-running: '%s' is not 1..%d\n",
					optarg, SCHED_MAX_RUNNING_MAX);
				return 2;
			}
			d.cfg.max_running = (unsigned)v;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
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
	if (d.cfg.state_dir[0] != '/')
		return fprintf(stderr, "agentboxd: --state-dir must be absolute\n"), 2;
	if (print_token) {
		int r = load_token(d.cfg.state_dir, false, d.token);
		if (r < 0)
			return fail("no token in %s (start agentboxd with --listen once): %s",
				    d.cfg.state_dir, strerror(-r));
		puts(d.token);
		return 0;
	}
	if (geteuid() != 0)
		return fail("needs root (sandboxes need uid ranges and cgroups)");
	if (access(d.cfg.supervisor_path, X_OK) != 0)
		return fail("cannot run the supervisor %s: %s", d.cfg.supervisor_path,
			    strerror(errno));
	if (access(d.cfg.shim_path, X_OK) != 0)
		return fail("cannot run the shim %s: %s", d.cfg.shim_path, strerror(errno));

	umask(077);
	signal(SIGPIPE, SIG_IGN);
	/* each running task holds an fd here; use what the hard limit allows */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	/* The daemon holds the record of every task: the OOM killer takes a sandbox first. */
	(void)write_file_at(AT_FDCWD, "/proc/self/oom_score_adj", "-1000");

	struct error err = {0};
	struct store *sched_store = NULL;
	struct sched *sched = NULL;
	if (prepare_state_dir(&d, &err) < 0)
		return fail("%s", err.msg);
	/* one daemon per state dir: two schedulers would import the same journals */
	char lock_path[4200];
	snprintf(lock_path, sizeof(lock_path), "%s/daemon.lock", d.cfg.state_dir);
	int state_lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (state_lock < 0 || flock(state_lock, LOCK_EX | LOCK_NB) < 0)
		return fail("another agentboxd uses %s (or it cannot be locked: %s)",
			    d.cfg.state_dir, strerror(errno));
	if (store_pool_init(&d.pool, d.db_path, &err) < 0 ||
	    store_open_sqlite(d.db_path, &sched_store, &err) < 0)
		return fail("%s", err.msg);
	if (d.cfg.listen && load_token(d.cfg.state_dir, true, d.token) < 0)
		return fail("cannot create the token in %s", d.cfg.state_dir);
	struct sched_config sc = {.state_dir = d.cfg.state_dir,
				  .supervisor_path = d.cfg.supervisor_path,
				  .max_running = d.cfg.max_running};
	if (sched_new(&sc, sched_store, &sched, &err) < 0 || sched_recover(sched, &err) < 0)
		return fail("%s", err.msg);
	struct fleet_config fc = {.state_dir = d.cfg.state_dir,
				  .shim_path = d.cfg.shim_path,
				  .db_path = d.db_path,
				  .pool_size = d.cfg.pool_size};
	if (fleet_new(&fc, &d.fleet, &err) < 0 || fleet_recover(d.fleet, sched_store, &err) < 0)
		return fail("%s", err.msg);
	d.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d.wake_fd < 0)
		return fail("eventfd: %s", strerror(errno));

	/* Every thread inherits this mask: only the main thread takes these signals. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);

	struct sched_thread st = {.d = &d, .sched = sched};
	pthread_t sched_tid;
	if (pthread_create(&sched_tid, NULL, sched_main, &st) != 0)
		return fail("cannot start the scheduler thread");

	if (fleet_start(d.fleet, &err) < 0)
		return fail("%s", err.msg);

	struct listener *unix_l = NULL, *tcp_l = NULL;
	int ufd = listen_unix(d.cfg.socket_path, &err);
	struct stat sock_st = {0};
	if (ufd < 0 || stat(d.cfg.socket_path, &sock_st) < 0 ||
	    server_start(&d, ufd, NULL, &unix_l, &err) < 0)
		return fail("%s", err.msg);
	if (d.cfg.listen) {
		int tfd = listen_tcp(d.cfg.listen, &err);
		if (tfd < 0 || server_start(&d, tfd, d.token, &tcp_l, &err) < 0)
			return fail("%s", err.msg);
	}
	fprintf(stderr,
		"agentboxd: serving unix:%s%s%s, state in %s, %u tasks at once, "
		"%u warm sandboxes\n",
		d.cfg.socket_path, d.cfg.listen ? " and tcp:" : "",
		d.cfg.listen ? d.cfg.listen : "", d.cfg.state_dir, d.cfg.max_running,
		d.cfg.pool_size);

	int sig;
	sigwait(&stop, &sig);
	fprintf(stderr,
		"agentboxd: signal %d: stopping; running tasks and sandboxes go on under "
		"their supervisors\n",
		sig);
	d.stopping = 1;
	daemon_wake(&d);
	server_stop(unix_l);
	server_stop(tcp_l);
	pthread_join(sched_tid, NULL);
	fleet_free(d.fleet); /* sandboxes go on under their shims */
	/* the path is ours to remove only if it is still our socket */
	struct stat now_st;
	if (stat(d.cfg.socket_path, &now_st) == 0 && now_st.st_ino == sock_st.st_ino &&
	    now_st.st_dev == sock_st.st_dev)
		unlink(d.cfg.socket_path);
	sched_free(sched);
	store_close(sched_store);
	store_pool_release(&d.pool);
	return 0;
}
