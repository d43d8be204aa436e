/*
 * nethelper.c - a launcher's side of agentbox-net. See nethelper.h.
 */
#include "runtime/nethelper.h"

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* agentbox-net next to this executable, or in the build tree's src/network/. */
static void helper_path(char *buf, size_t size)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(buf, size, "agentbox-net");
		return;
	}
	exe[n] = '\0';
	char *dir = dirname(exe);
	snprintf(buf, size, "%s/agentbox-net", dir);
	if (access(buf, X_OK) != 0)
		snprintf(buf, size, "%s/../network/agentbox-net", dir);
}

/* fd as fd to, without close-on-exec (in a child, before exec). 0 or -1. */
static int move_fd(int fd, int to)
{
	return fd == to ? fcntl(fd, F_SETFD, 0) : dup2(fd, to);
}

/*
 * Start agentbox-net with argv (argv[0] included), its stdout and stderr
 * into a pipe whose read end is *ret_out, pidfd (when >= 0) as fd 3 and
 * secrets_fd (when >= 0) as fd 4; with ret_in, its stdin a pipe whose
 * write end is *ret_in.
 */
static int spawn(const char *const *argv, int pidfd, int secrets_fd, pid_t *ret_pid, int *ret_out,
		 int *ret_in, struct error *err)
{
	char helper[4200];
	helper_path(helper, sizeof(helper));
	int out[2], in[2] = {-1, -1};
	if (pipe2(out, O_CLOEXEC) < 0)
		return error_set_errno(err, errno, "network: pipe");
	if (ret_in && pipe2(in, O_CLOEXEC) < 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		return error_set_errno(err, e, "network: pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		if (ret_in) {
			close(in[0]);
			close(in[1]);
		}
		return error_set_errno(err, e, "network: fork");
	}
	if (pid == 0) {
		/* stdout and stderr into the pipe; fd 3 the pidfd, fd 4 the secrets: the
		 * secrets first out of the way of the others */
		if (secrets_fd >= 0 && secrets_fd < 4 &&
		    (secrets_fd = fcntl(secrets_fd, F_DUPFD_CLOEXEC, 5)) < 0)
			_exit(127);
		if ((ret_in && dup2(in[0], 0) < 0) || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0 ||
		    (pidfd >= 0 && move_fd(pidfd, 3) < 0) ||
		    (secrets_fd >= 0 && move_fd(secrets_fd, 4) < 0))
			_exit(127);
		execv(helper, (char *const *)argv);
		dprintf(2, "cannot run %s: %s\n", helper, strerror(errno));
		_exit(127);
	}
	close(out[1]);
	if (ret_in) {
		close(in[0]);
		*ret_in = in[1];
	}
	*ret_pid = pid;
	*ret_out = out[0];
	return 0;
}

/*
 * Read fd into buf (NUL-terminated) until EOF, or, with line, until the
 * first newline. What does not fit is read and dropped (to EOF only).
 */
static size_t read_output(int fd, char *buf, size_t size, bool line)
{
	size_t len = 0;
	char drop[256];
	for (;;) {
		bool full = len == size - 1;
		ssize_t n =
		    full ? read(fd, drop, sizeof(drop)) : read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (full && line))
			break;
		if (!full)
			len += (size_t)n;
		if (line && memchr(buf, '\n', len))
			break;
	}
	buf[len] = '\0';
	return len;
}

static void reap(pid_t pid, int *ret_status)
{
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ret_status)
		*ret_status = status;
}

/*
 * Wait for the helper pid's line "WORD IFNAME" on out (word is "WORD "),
 * and put IFNAME into ifname. 0; else the helper is killed and reaped,
 * whatever it was doing (a relay never exits by itself), and -EIO with
 * err saying what it printed.
 */
static int await_line(pid_t pid, int out, const char *word, char *ifname, size_t size,
		      struct error *err)
{
	char msg[512];
	read_output(out, msg, sizeof(msg), true);
	char *at = strstr(msg, word);
	char *end = at ? strchr(at, '\n') : NULL;
	if (at && (at == msg || at[-1] == '\n') && end) {
		*end = '\0';
		snprintf(ifname, size, "%s", at + strlen(word));
		return 0;
	}
	kill(pid, SIGKILL);
	reap(pid, NULL);
	msg[strcspn(msg, "\n")] = '\0';
	return error_set(err, EIO, "network: %s", msg[0] ? msg : "agentbox-net failed");
}

int nethelper_attach(void *arg, int pidfd, unsigned slot, struct error *err)
{
	struct nethelper_link *l = arg;
	char slot_text[16];
	const char *argv[NETHELPER_ARGS_MAX] = {"agentbox-net", l->allow ? "allow" : "open",
						slot_text};
	size_t argc = 3;
	snprintf(slot_text, sizeof(slot_text), "%u", slot);
	if (l->allow) {
		argv[argc++] = "--policy";
		argv[argc++] = l->policy;
		argv[argc++] = "--events";
		argv[argc++] = l->events;
	}
	int secrets = l->secrets_fd > 0 ? l->secrets_fd : -1;
	if (secrets >= 0) {
		argv[argc++] = "--secrets-fd";
		argv[argc++] = "4";
	}
	for (char *const *e = l->extra; e && *e && argc < NETHELPER_ARGS_MAX - 1; e++)
		argv[argc++] = *e;
	argv[argc] = NULL;
	pid_t pid;
	_cleanup_close_ int out = -1;
	int r = spawn(argv, pidfd, secrets, &pid, &out, NULL, err);
	if (r < 0)
		return r;
	return await_line(pid, out, "ready ", l->host_if, sizeof(l->host_if), err) < 0
		   ? -EIO
		   : (l->relay = pid, 0);
}

int nethelper_park(void *arg, int pidfd, unsigned slot, struct error *err)
{
	struct nethelper_park *p = arg;
	char slot_text[16];
	snprintf(slot_text, sizeof(slot_text), "%u", slot);
	const char *argv[] = {"agentbox-net", "park", slot_text, NULL};
	*p = (struct nethelper_park){.args = -1, .out = -1};
	pid_t pid;
	int out, in;
	int r = spawn(argv, pidfd, -1, &pid, &out, &in, err);
	if (r < 0)
		return r;
	if (await_line(pid, out, "parked ", p->host_if, sizeof(p->host_if), err) < 0) {
		close(in);
		close(out);
		return -EIO;
	}
	p->helper = pid;
	p->args = in;
	p->out = out;
	return 0;
}

/* Append s and its NUL to buf at *len, if it fits. */
static bool put_arg(char *buf, size_t size, size_t *len, const char *s)
{
	size_t n = strlen(s) + 1;
	if (n > size - *len)
		return false;
	memcpy(buf + *len, s, n);
	*len += n;
	return true;
}

int nethelper_hand_out(struct nethelper_park *p, struct nethelper_link *l, struct error *err)
{
	if (p->helper <= 0)
		return error_set(err, ENODEV, "network: no parked link");
	if (l->secrets_fd > 0) {
		nethelper_park_release(p);
		return error_set(err, EINVAL, "network: a parked link takes no secrets");
	}
	size_t size = NETHELPER_PARK_ARGS_MAX, len = 0;
	_cleanup_free_ char *buf = malloc(size);
	bool ok = buf && put_arg(buf, size, &len, l->allow ? "allow" : "open");
	if (ok && l->allow)
		ok = put_arg(buf, size, &len, "--policy") && put_arg(buf, size, &len, l->policy) &&
		     put_arg(buf, size, &len, "--events") && put_arg(buf, size, &len, l->events);
	for (char *const *e = l->extra; ok && e && *e; e++)
		ok = put_arg(buf, size, &len, *e);
	int r = ok ? 0 : error_set(err, E2BIG, "network: the relay's arguments are too long");
	if (!buf)
		r = error_set(err, ENOMEM, "out of memory");
	/* written whole, then EOF: the helper reads to it (it may be more than a pipe holds) */
	for (size_t at = 0; r == 0 && at < len;) {
		ssize_t n = write(p->args, buf + at, len - at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = error_set_errno(err, errno, "network: the parked link's helper");
		else
			at += (size_t)n;
	}
	CLOSE_FD(p->args);
	pid_t pid = p->helper;
	p->helper = 0;
	_cleanup_close_ int out = p->out;
	p->out = -1;
	if (r < 0) {
		kill(pid, SIGKILL);
		reap(pid, NULL);
		return r;
	}
	if (await_line(pid, out, "ready ", l->host_if, sizeof(l->host_if), err) < 0)
		return -EIO;
	l->relay = pid;
	return 0;
}

bool nethelper_park_alive(struct nethelper_park *p)
{
	if (p->helper <= 0)
		return false;
	int status;
	pid_t r = waitpid(p->helper, &status, WNOHANG);
	if (r == 0)
		return true;
	/* gone (reaped now, or by someone else already): nothing to release but fds */
	p->helper = 0;
	CLOSE_FD(p->args);
	CLOSE_FD(p->out);
	return false;
}

void nethelper_park_release(struct nethelper_park *p)
{
	if (p->helper <= 0)
		return; /* none, or handed out: its fds are closed */
	CLOSE_FD(p->args);
	CLOSE_FD(p->out);
	kill(p->helper, SIGKILL);
	reap(p->helper, NULL);
	p->helper = 0;
}

int nethelper_run(const char *const *args, char *out, size_t size, struct error *err)
{
	const char *argv[NETHELPER_ARGS_MAX] = {"agentbox-net"};
	size_t argc = 1;
	for (; args[argc - 1] && argc < NETHELPER_ARGS_MAX - 1; argc++)
		argv[argc] = args[argc - 1];
	argv[argc] = NULL;
	pid_t pid;
	_cleanup_close_ int fd = -1;
	int r = spawn(argv, -1, -1, &pid, &fd, NULL, err);
	if (r < 0)
		return r;
	char msg[512];
	read_output(fd, msg, sizeof(msg), false);
	int status;
	reap(pid, &status);
	msg[strcspn(msg, "\n")] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		if (out && size)
			snprintf(out, size, "%s", msg);
		return 0;
	}
	if (msg[0])
		return error_set(err, EIO, "network: %s", msg);
	if (WIFSIGNALED(status))
		return error_set(err, EIO, "network: agentbox-net %s: killed by signal %d", args[0],
				 WTERMSIG(status));
	return error_set(err, EIO, "network: agentbox-net %s: exit status %d", args[0],
			 WEXITSTATUS(status));
}

void nethelper_reap(pid_t relay, unsigned wait_ms)
{
	if (relay <= 0)
		return;
	for (unsigned waited = 0;; waited += 10) {
		pid_t r = waitpid(relay, NULL, WNOHANG);
		if (r == relay || (r < 0 && errno != EINTR))
			return;
		if (waited >= wait_ms)
			break;
		sleep_ms(10);
	}
	kill(relay, SIGKILL);
	reap(relay, NULL);
}

/* name's received and sent bytes in the /proc/.../net/dev file at path. 0 or -errno. */
static int dev_bytes(const char *path, const char *name, uint64_t *ret_rx, uint64_t *ret_tx)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char line[512];
	size_t n = strlen(name);
	while (fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " ");
		unsigned long long rx, tx;
		if (strncmp(p, name, n) != 0 || p[n] != ':')
			continue;
		/* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes ... */
		if (sscanf(p + n + 1, "%llu %*u %*u %*u %*u %*u %*u %*u %llu", &rx, &tx) != 2)
			return -EIO;
		*ret_rx = rx;
		*ret_tx = tx;
		return 0;
	}
	return -ENOENT;
}

int nethelper_bytes(const char *host_if, pid_t init_pid, uint64_t *ret_in, uint64_t *ret_out)
{
	if (!host_if[0])
		return -ENODEV;
	/* the host end, in this process's network namespace (not sysfs's), and eth0 in
	 * init's: a veth's counters may stand on either end, whatever the kernel's path */
	char inside[64];
	uint64_t host_rx = 0, host_tx = 0, eth_rx = 0, eth_tx = 0;
	snprintf(inside, sizeof(inside), "/proc/%d/net/dev", (int)init_pid);
	int r = dev_bytes("/proc/self/net/dev", host_if, &host_rx, &host_tx);
	if (r < 0)
		return r;
	if (init_pid > 0)
		(void)dev_bytes(inside, "eth0", &eth_rx, &eth_tx);
	*ret_in = host_tx > eth_rx ? host_tx : eth_rx;
	*ret_out = host_rx > eth_tx ? host_rx : eth_tx;
	return 0;
}
