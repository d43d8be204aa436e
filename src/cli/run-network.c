/*
 * run-network.c - agentbox run's network, without agentboxd. See
 * run-network.h.
 */
#include "cli/run-network.h"

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/term.h"
#include "runtime/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_HOST	0	   /* byte 0: host-up and host-down, one at a time */
#define LOCK_RUNS	1	   /* byte 1: shared by each live run */
#define EVENTS_READ_MAX (2u << 20) /* the relay stops at 1 MiB (network/relay.h) */

void run_network_init(struct run_network *n)
{
	*n = (struct run_network){.lock_fd = -1, .events_fd = -1, .events_start = -1};
}

static bool has_network(const struct run_network *n)
{
	return n->policy.mode != EGRESS_NONE;
}

/* Is KEY set by the caller's --env? key is "KEY=". */
static bool env_has(const struct spec *s, const char *key)
{
	for (size_t i = 0; i < s->nenv; i++)
		if (strncmp(s->env[i], key, strlen(key)) == 0)
			return true;
	return false;
}

int run_network_check(struct run_network *n, struct spec *s, struct error *err)
{
	static const char *const proxies[] = {
	    "HTTP_PROXY=" EGRESS_PROXY_URL,
	    "HTTPS_PROXY=" EGRESS_PROXY_URL,
	    "http_proxy=" EGRESS_PROXY_URL,
	    "https_proxy=" EGRESS_PROXY_URL,
	};
	if (n->rate_mbit && !has_network(n))
		return cli_network_rate_needs_network(err);
	if (n->resolver && !has_network(n))
		return error_set(
		    err, EINVAL,
		    "--resolver: only with --network open or allow:DOMAIN[,DOMAIN...]");
	if (n->log_path && n->policy.mode != EGRESS_ALLOW)
		return error_set(err, EINVAL,
				 "--network-log: only with --network allow:DOMAIN[,DOMAIN...] (the "
				 "refusals are allow mode's)");
	n->policy.rate_mbit = n->rate_mbit;
	if (n->policy.mode != EGRESS_ALLOW)
		return 0;
	/* for tools that prefer a proxy to the transparent one, as agentboxd does */
	for (size_t i = 0; i < sizeof(proxies) / sizeof(*proxies); i++) {
		char key[16];
		snprintf(key, sizeof(key), "%.*s", (int)(strchr(proxies[i], '=') - proxies[i] + 1),
			 proxies[i]);
		int r;
		if (!env_has(s, key) && (r = spec_add_env(s, proxies[i])) < 0)
			return error_set(err, -r, "--env: more than %d variables", SPEC_ENV_MAX);
	}
	return 0;
}

/* An OFD lock on byte `byte` of fd: F_RDLCK, F_WRLCK or F_UNLCK; waiting or not. */
static int lock_byte(int fd, int byte, short type, bool wait)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
	int r;
	while ((r = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl)) < 0 && errno == EINTR)
		;
	return r < 0 ? -errno : 0;
}

/*
 * The lock file of this network namespace, opened with byte 1 held shared,
 * and the record's path beside it. The run that takes the host's side down
 * removes the file: one that opened it before then finds it is no longer
 * the file at its path once it holds the lock, and opens the new one.
 */
static int open_lock(struct run_network *n, struct error *err)
{
	const char *dir = sandbox_run_dir();
	struct stat ns;
	int r;
	if (stat("/proc/self/ns/net", &ns) < 0)
		return error_set_errno(err, errno, "network: /proc/self/ns/net");
	if ((r = mkdir_p_at(AT_FDCWD, dir, 0711)) < 0)
		return error_set_errno(err, -r, "network: cannot create %s", dir);
	snprintf(n->lock_path, sizeof(n->lock_path), "%s/network-%llu.lock", dir,
		 (unsigned long long)ns.st_ino);
	snprintf(n->record, sizeof(n->record), "%s/network-%llu.json", dir,
		 (unsigned long long)ns.st_ino);
	for (;;) {
		_cleanup_close_ int fd =
		    open(n->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return error_set_errno(err, errno, "network: %s", n->lock_path);
		if ((r = lock_byte(fd, LOCK_RUNS, F_RDLCK, true)) < 0)
			return error_set_errno(err, -r, "network: lock %s", n->lock_path);
		struct stat held, now;
		if (fstat(fd, &held) < 0)
			return error_set_errno(err, errno, "network: %s", n->lock_path);
		if (stat(n->lock_path, &now) == 0 && now.st_dev == held.st_dev &&
		    now.st_ino == held.st_ino) {
			n->lock_fd = TAKE_FD(fd);
			return 0;
		}
	}
}

/* The forwarding a run found, from the record: 0 or 1, or -1 without one. */
static int recorded_forwarding(const struct run_network *n)
{
	char text[64];
	if (read_file_at(AT_FDCWD, n->record, text, sizeof(text)) <= 0)
		return -1;
	if (strstr(text, "\"ip_forward\": 0"))
		return 0;
	return strstr(text, "\"ip_forward\": 1") ? 1 : -1;
}

/* host-up, under the host lock. */
static int host_up(struct run_network *n, struct error *err)
{
	static const char *const args[] = {"host-up", NULL};
	char out[64];
	int r = nethelper_run(args, out, sizeof(out), err);
	if (r < 0)
		return r;
	if (strcmp(out, "present") == 0)
		return 0;
	if (strcmp(out, "installed 0") != 0 && strcmp(out, "installed 1") != 0)
		return error_set(err, EIO, "network: agentbox-net host-up said '%s'", out);
	/* only when there is none: an earlier run's record holds the value before agentbox */
	_cleanup_close_ int fd =
	    open(n->record, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST)
		return 0;
	char text[32];
	int len = snprintf(text, sizeof(text), "{\"ip_forward\": %c}\n", out[10]);
	if (fd < 0 || (r = write_all(fd, text, (size_t)len)) < 0)
		return error_set_errno(err, fd < 0 ? errno : -r, "network: %s", n->record);
	return 0;
}

/* host-down, under the host lock, when no other run is live. */
static int host_down(struct run_network *n, struct error *err)
{
	int was = recorded_forwarding(n);
	const char *args[] = {"host-down", "--forwarding", was ? "1" : "0", NULL};
	if (was < 0)
		args[1] = NULL;
	char out[64];
	int r = nethelper_run(args, out, sizeof(out), err);
	if (r < 0)
		return r;
	/* removed or absent: forwarding is back, nothing of ours is left; busy (a link
	 * left) or kept (agentboxd's): the record stays for a later run */
	if (strcmp(out, "removed") == 0 || strcmp(out, "absent") == 0) {
		(void)unlink(n->record);
		(void)unlink(n->lock_path);
	}
	return 0;
}

/* spec->network_attach: the link, and its host end's index to wait for at the end. */
static int attach(void *arg, int pidfd, unsigned slot, struct error *err)
{
	struct run_network *n = arg;
	int r = nethelper_attach(&n->link, pidfd, slot, err);
	if (r == 0)
		n->link_index = if_nametoindex(n->link.host_if);
	return r;
}

/*
 * Where the relay writes the refusals: --network-log FILE, or an unnamed
 * file in the run directory. The relay, a child of ours, opens it by
 * /proc/<our pid>/fd/N: the same file, whatever happens to the path.
 */
static int open_events(struct run_network *n, struct error *err)
{
	if (n->log_path)
		n->events_fd =
		    open(n->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
	else
		n->events_fd = open(sandbox_run_dir(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (n->events_fd < 0)
		return error_set_errno(err, errno, "%s%s",
				       n->log_path ? "--network-log: " : "network: ",
				       n->log_path ? n->log_path : "a file for the refusals");
	struct stat st;
	if (fstat(n->events_fd, &st) == 0 && S_ISREG(st.st_mode))
		n->events_start = st.st_size; /* a pipe or a terminal is not read back */
	snprintf(n->events_path, sizeof(n->events_path), "/proc/%d/fd/%d", (int)getpid(),
		 n->events_fd);
	return 0;
}

int run_network_up(struct run_network *n, struct spec *s, struct error *err)
{
	if (!has_network(n))
		return 0;
	/* live from here: no other run takes the table down until our end */
	int r = open_lock(n, err);
	if (r < 0)
		return r;
	if ((r = lock_byte(n->lock_fd, LOCK_HOST, F_WRLCK, true)) < 0)
		return error_set_errno(err, -r, "network: lock the host's network");
	r = host_up(n, err);
	(void)lock_byte(n->lock_fd, LOCK_HOST, F_UNLCK, false);
	if (r < 0)
		return r;

	size_t k = 0;
	if (n->policy.rate_mbit) {
		snprintf(n->rate_text, sizeof(n->rate_text), "%u", n->policy.rate_mbit);
		n->extra[k++] = "--rate";
		n->extra[k++] = n->rate_text;
	}
	if (n->resolver) {
		n->extra[k++] = "--resolver";
		n->extra[k++] = (char *)n->resolver;
	}
	n->link.allow = n->policy.mode == EGRESS_ALLOW;
	n->link.extra = n->extra;
	if (n->link.allow) {
		_cleanup_json_ json_t *j = egress_policy_to_json(&n->policy);
		if (!j || !(n->policy_json = json_dumps(j, JSON_COMPACT)))
			return error_set(err, ENOMEM, "out of memory");
		if ((r = open_events(n, err)) < 0)
			return r;
		n->link.policy = n->policy_json;
		n->link.events = n->events_path;
	}
	s->network_attach = attach;
	s->network_arg = n;
	return 0;
}

/* Wait, bounded, for our link's host end to go with the sandbox's namespace. */
static void wait_link_gone(const struct run_network *n)
{
	for (unsigned waited = 0; n->link_index && waited < RUN_NETWORK_LINK_WAIT_MS;
	     waited += 10) {
		if (if_nametoindex(n->link.host_if) != n->link_index)
			return; /* gone (or a later sandbox's, in the same slot) */
		sleep_ms(10);
	}
}

/* One refusal on stderr: "agentbox: network: refused HOST:PORT (REASON)", escaped. */
static void print_refusal(const json_t *e)
{
	const char *host = json_string_value(json_object_get(e, "host"));
	const char *addr = json_string_value(json_object_get(e, "address"));
	const char *reason = json_string_value(json_object_get(e, "reason"));
	json_int_t port = json_integer_value(json_object_get(e, "port"));
	_cleanup_buf_ struct buf text = {0};
	_cleanup_buf_ struct buf line = {0};
	buf_printf(&text, "%s:%lld (%s)",
		   host	  ? host
		   : addr ? addr
			  : "?",
		   (long long)port, reason ? reason : "?");
	buf_puts(&line, "agentbox: network: refused ");
	term_escape(text.data ? text.data : "", text.len, 0, &line);
	buf_puts(&line, "\n");
	if (!line.failed)
		fputs(line.data, stderr);
}

/*
 * The refusals written since the sandbox started: their number, and, when
 * print, each on stderr (at most RUN_NETWORK_PRINT_MAX). -1 when they
 * cannot be read back (a pipe, a terminal).
 */
static long read_refusals(const struct run_network *n, bool print)
{
	if (n->events_fd < 0 || n->events_start < 0)
		return -1;
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", n->events_fd);
	_cleanup_close_ int fd = open(self, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *text = malloc(EVENTS_READ_MAX + 1);
	if (fd < 0 || !text || lseek(fd, n->events_start, SEEK_SET) < 0)
		return -1;
	ssize_t len = read_all(fd, text, EVENTS_READ_MAX);
	if (len < 0)
		return -1;
	text[len] = '\0';
	long count = 0;
	bool capped = false;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		_cleanup_json_ json_t *e = json_loads(l, 0, NULL);
		const char *type = json_string_value(json_object_get(e, "type"));
		if (type && strcmp(type, "events_capped") == 0)
			capped = true;
		if (!type || strcmp(type, "egress_denied") != 0)
			continue;
		if (print && count < RUN_NETWORK_PRINT_MAX)
			print_refusal(e);
		count++;
	}
	if (print && (count > RUN_NETWORK_PRINT_MAX || capped))
		fprintf(stderr,
			"agentbox: network: %ld refusals%s (--network-log FILE keeps them)\n",
			count, capped ? " and more, uncounted" : " in all");
	return count;
}

int run_network_down(struct run_network *n, long *ret_denied, struct error *err)
{
	int r = 0;
	*ret_denied = -1;
	if (n->lock_fd >= 0) {
		nethelper_reap(n->link.relay, RUN_NETWORK_RELAY_WAIT_MS);
		wait_link_gone(n);
		if (n->link.allow)
			*ret_denied = read_refusals(n, !n->log_path);
		/* the last live run (byte 1 ours alone) takes the host's side down */
		if ((r = lock_byte(n->lock_fd, LOCK_HOST, F_WRLCK, true)) < 0)
			r = error_set_errno(err, -r, "network: lock the host's network");
		else if (lock_byte(n->lock_fd, LOCK_RUNS, F_WRLCK, false) == 0)
			r = host_down(n, err);
	}
	CLOSE_FD(n->lock_fd); /* every lock of ours goes with it */
	CLOSE_FD(n->events_fd);
	free(n->policy_json);
	egress_policy_release(&n->policy);
	run_network_init(n);
	return r;
}
