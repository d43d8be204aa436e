/*
 * serve.c - the launcher's half of serve mode: requests to a sandbox's
 * init, the queue of exit reports, and the cgroup-side controls (freeze,
 * OOM count). See serve.h; the wire is in serve-internal.h.
 */
#include "runtime/serve.h"

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fdpass.h"
#include "base/fileio.h"
#include "runtime/cgroup.h"
#include "runtime/launch-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/oom.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* How long sandbox_freeze() waits for the kernel to report the group frozen. */
#define FREEZE_WAIT_MS 2000
/* Bytes of init's list of children read, at most, to find an upload's copier in. */
#define CHILDREN_LIST_MAX (64 * 1024)
/* Bytes of a /proc/<pid>/status read, at most: NSpid comes well before the end. */
#define PROC_STATUS_MAX 4096

/* A packet from init: header, text payload (NUL-terminated), at most one fd. */
struct packet {
	struct serve_msg msg;
	char text[SERVE_REPLY_TEXT_MAX];
	int fd;
};

static int check_serving(struct sandbox *sb, struct error *err)
{
	if (!sb->serve)
		return error_set(err, EOPNOTSUPP, "the sandbox was not started in serve mode");
	if (sb->ctl.fd < 0 || sb->ctl.gone)
		return error_set(err, EPIPE, "the sandbox's init is gone");
	sandbox_reap_holders(sb);
	return 0;
}

static int check_path(const char *what, const char *p, struct error *err)
{
	if (!p || !serve_path_is_valid(p, strnlen(p, SPEC_PATH_MAX)))
		return error_set(err, EINVAL, "%s: '%.100s' is not an absolute path under %d bytes",
				 what, p ? p : "", SPEC_PATH_MAX);
	return 0;
}

static void queue_exit(struct serve_host *h, pid_t pid, int status)
{
	if (h->live > 0)
		h->live--;
	if (h->nexits >= SERVE_CHILDREN_MAX)
		return; /* cannot happen: see the invariant in serve-internal.h */
	h->exits[(h->head + h->nexits) % SERVE_CHILDREN_MAX] =
	    (struct serve_exit){.pid = pid, .status = status};
	h->nexits++;
}

/*
 * Receive one packet. 1 with one, 0 when init has hung up (h->gone is
 * set), -EAGAIN when nonblocking and nothing is there, -errno.
 */
static int receive(struct serve_host *h, struct packet *p, bool block)
{
	char buf[sizeof(struct serve_msg) + SERVE_REPLY_TEXT_MAX];
	int fd = -1, flags = 0;
	/* more fds than any reply carries are closed */
	ssize_t n =
	    fdpass_recv(h->fd, buf, sizeof(buf), block ? 0 : MSG_DONTWAIT, &fd, 1, NULL, &flags);
	if (n == -ECONNRESET || n == -EPIPE || n == 0) {
		CLOSE_FD(fd); /* whatever came with an empty packet */
		h->gone = true;
		return 0;
	}
	if (n < 0)
		return (int)n;
	*p = (struct packet){.fd = fd};
	if ((size_t)n < sizeof(struct serve_msg) || (flags & MSG_TRUNC)) {
		CLOSE_FD(p->fd);
		return -EBADMSG;
	}
	memcpy(&p->msg, buf, sizeof(p->msg));
	size_t len = (size_t)n - sizeof(struct serve_msg);
	if (len >= sizeof(p->text))
		len = sizeof(p->text) - 1;
	memcpy(p->text, buf + sizeof(struct serve_msg), len);
	p->text[len] = '\0';
	return 1;
}

/*
 * Send a request and wait for its reply, queueing the exit reports that
 * come first. Returns the reply's code (0 or -errno, err filled with init's
 * reason), or -EPIPE when init went away before it answered.
 */
static int call(struct sandbox *sb, struct serve_msg *req, const void *payload, const int *fds,
		size_t nfds, struct packet *ret, struct error *err)
{
	struct serve_host *h = &sb->ctl;
	req->seq = ++h->seq;
	struct iovec iov[2] = {{.iov_base = req, .iov_len = sizeof(*req)},
			       {.iov_base = (void *)payload, .iov_len = req->len}};
	union fdpass_buf cmsg_buf;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = req->len ? 2 : 1};
	fdpass_attach(&mh, &cmsg_buf, fds, nfds);
	ssize_t n;
	do
		n = sendmsg(h->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EPIPE || errno == ECONNRESET) {
			h->gone = true;
			return error_set(err, EPIPE, "the sandbox's init is gone");
		}
		return error_set_errno(err, errno, "sending a request to the sandbox");
	}
	for (;;) {
		int r = receive(h, ret, true);
		if (r == 0)
			return error_set(err, EPIPE, "the sandbox's init is gone");
		if (r < 0)
			return error_set_errno(err, -r, "reading the sandbox's reply");
		if (ret->msg.op == SERVE_OP_EXITED) {
			queue_exit(h, ret->msg.pid, ret->msg.value);
			continue;
		}
		if (ret->msg.op == SERVE_OP_REPLY && ret->msg.seq == req->seq)
			break;
		CLOSE_FD(ret->fd); /* stale or unknown: not ours */
	}
	if (ret->msg.code < 0) {
		CLOSE_FD(ret->fd);
		return error_set_errno(err, -ret->msg.code, "%s",
				       ret->text[0] ? ret->text : "request failed");
	}
	return 0;
}

/* A SPAWN: with req's three fds, or (tty) on a new terminal whose master comes back. */
static int spawn(struct sandbox *sb, const struct serve_spawn *req, bool tty, unsigned rows,
		 unsigned cols, pid_t *ret_pid, int *ret_master, struct error *err)
{
	int r = check_serving(sb, err);
	if (r < 0)
		return r;
	if (!req->argv || !req->argv[0] || !req->argv[0][0])
		return error_set(err, EINVAL, "spawn: no command");
	if ((r = check_path("spawn: cwd", req->cwd, err)) < 0)
		return r;
	int fds[SERVE_SPAWN_FDS] = {req->stdin_fd, req->stdout_fd, req->stderr_fd};
	for (size_t i = 0; !tty && i < SERVE_SPAWN_FDS; i++)
		if (fds[i] < 0)
			return error_set(err, EBADF, "spawn: fd %zu is not open", i);
	if (tty && (rows < 1 || rows > SERVE_TTY_DIM_MAX || cols < 1 || cols > SERVE_TTY_DIM_MAX))
		return error_set(err, EINVAL, "spawn: a terminal of %ux%u (1 to %d each)", rows,
				 cols, SERVE_TTY_DIM_MAX);

	static const char *const no_env[] = {NULL};
	const char *const *envp = req->envp ? req->envp : no_env;
	size_t bytes = strlen(req->cwd) + 1, argc = 0, nenv = 0;
	for (; req->argv[argc]; argc++) {
		bytes += strlen(req->argv[argc]) + 1;
		if (bytes > SERVE_SPAWN_BYTES_MAX)
			break;
	}
	for (; bytes <= SERVE_SPAWN_BYTES_MAX && envp[nenv]; nenv++)
		bytes += strlen(envp[nenv]) + 1;
	if (bytes > SERVE_SPAWN_BYTES_MAX)
		return error_set(err, E2BIG, "spawn: command and environment exceed %d bytes",
				 SERVE_SPAWN_BYTES_MAX);
	if (sb->ctl.live + sb->ctl.nexits >= SERVE_CHILDREN_MAX)
		return error_set(err, EAGAIN,
				 "spawn: %d children running or not yet collected with "
				 "sandbox_next_exit()",
				 SERVE_CHILDREN_MAX);

	_cleanup_free_ char *payload = malloc(bytes);
	if (!payload)
		return error_set(err, ENOMEM, "spawn: out of memory");
	char *p = payload;
	const char *const *lists[2] = {req->argv, envp};
	size_t counts[2] = {argc, nenv};
	size_t len = strlen(req->cwd) + 1;
	memcpy(p, req->cwd, len);
	p += len;
	for (size_t l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			len = strlen(lists[l][i]) + 1;
			memcpy(p, lists[l][i], len);
			p += len;
		}

	struct serve_msg m = {.op = SERVE_OP_SPAWN,
			      .value = tty ? (int32_t)SERVE_SPAWN_TTY : 0,
			      .argc = (uint32_t)argc,
			      .nenv = (uint32_t)nenv,
			      .len = (uint32_t)bytes,
			      .rows = (uint16_t)(tty ? rows : 0),
			      .cols = (uint16_t)(tty ? cols : 0)};
	struct packet rep;
	if ((r = call(sb, &m, payload, fds, tty ? 0 : SERVE_SPAWN_FDS, &rep, err)) < 0)
		return r;
	if (rep.msg.pid <= 0) {
		CLOSE_FD(rep.fd);
		return error_set(err, EBADMSG, "spawn: init replied without a pid");
	}
	sb->ctl.live++; /* it runs: its EXITED will come, whatever happens here */
	if (tty && rep.fd < 0) {
		struct error ignored = {0};
		(void)sandbox_signal(sb, rep.msg.pid, SIGKILL, &ignored);
		return error_set(err, EBADMSG, "spawn: init replied without the terminal");
	}
	*ret_pid = rep.msg.pid;
	if (tty)
		*ret_master = TAKE_FD(rep.fd);
	CLOSE_FD(rep.fd);
	return 0;
}

int sandbox_spawn(struct sandbox *sb, const struct serve_spawn *req, pid_t *ret_pid,
		  struct error *err)
{
	return spawn(sb, req, false, 0, 0, ret_pid, NULL, err);
}

int sandbox_spawn_tty(struct sandbox *sb, const struct serve_spawn *req, unsigned rows,
		      unsigned cols, pid_t *ret_pid, int *ret_master, struct error *err)
{
	return spawn(sb, req, true, rows, cols, ret_pid, ret_master, err);
}

int sandbox_signal(struct sandbox *sb, pid_t pid, int sig, struct error *err)
{
	int r = check_serving(sb, err);
	if (r < 0)
		return r;
	if (pid <= 0)
		return error_set(err, ESRCH, "signal: %d is not a child", (int)pid);
	struct serve_msg m = {.op = SERVE_OP_SIGNAL, .pid = pid, .value = sig};
	struct packet rep;
	if ((r = call(sb, &m, NULL, NULL, 0, &rep, err)) < 0)
		return r;
	CLOSE_FD(rep.fd);
	return 0;
}

int sandbox_control_fd(const struct sandbox *sb)
{
	return sb->serve ? sb->ctl.fd : -1;
}

int sandbox_next_exit(struct sandbox *sb, pid_t *ret_pid, int *ret_status)
{
	struct serve_host *h = &sb->ctl;
	if (!sb->serve)
		return -EOPNOTSUPP;
	while (h->nexits == 0) {
		if (h->fd < 0 || h->gone)
			return -EPIPE;
		struct packet p;
		int r = receive(h, &p, false);
		if (r == 0)
			return -EPIPE;
		if (r < 0)
			return r;
		CLOSE_FD(p.fd);
		if (p.msg.op == SERVE_OP_EXITED)
			queue_exit(h, p.msg.pid, p.msg.value);
		/* anything else is a reply nobody waits for any more: dropped */
	}
	*ret_pid = h->exits[h->head].pid;
	*ret_status = h->exits[h->head].status;
	h->head = (h->head + 1) % SERVE_CHILDREN_MAX;
	h->nexits--;
	return 0;
}

/* One or two paths as a payload: "a\0" or "a\0b\0". */
static int path_payload(const char *a, const char *b, char *buf, size_t size, uint32_t *ret_len)
{
	size_t la = strlen(a) + 1, lb = b ? strlen(b) + 1 : 0;
	if (la + lb > size)
		return -ENAMETOOLONG;
	memcpy(buf, a, la);
	if (b)
		memcpy(buf + la, b, lb);
	*ret_len = (uint32_t)(la + lb);
	return 0;
}

/* The number after "\n<key>" in a /proc status text, and how many follow it (levels). */
static long status_field(const char *status, const char *key, unsigned *ret_levels)
{
	const char *line = strstr(status, key);
	if (!line)
		return -1;
	const char *last = NULL;
	unsigned levels = 0;
	for (const char *p = line + strlen(key); *p && *p != '\n'; p++)
		if ((*p == ' ' || *p == '\t') && p[1] >= '0' && p[1] <= '9') {
			last = p + 1;
			levels++;
		}
	if (ret_levels)
		*ret_levels = levels;
	return last ? strtol(last, NULL, 10) : -1;
}

/*
 * If pid is the copier, nspid inside the sandbox of init_pid, give it
 * oom_score_adj OOM_SCORE_ADJ_MAX: 0, -ESRCH when pid is another process,
 * or -errno. /proc/<pid> is opened first and then read and written
 * through, so a pid reused meanwhile is never written to.
 */
static int mark_if_copier(long pid, pid_t init_pid, pid_t nspid)
{
	char path[32], status[PROC_STATUS_MAX];
	snprintf(path, sizeof(path), "/proc/%ld", pid);
	_cleanup_close_ int dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0 || read_file_at(dir, "status", status, sizeof(status)) < 0)
		return -ESRCH; /* gone: not ours */
	unsigned levels = 0;
	/* init's child, and in a pid namespace below ours: never a host process */
	if (status_field(status, "\nPPid:", NULL) != (long)init_pid ||
	    status_field(status, "\nNSpid:", &levels) != (long)nspid || levels < 2)
		return -ESRCH;
	char adj[16];
	snprintf(adj, sizeof(adj), "%d", OOM_SCORE_ADJ_MAX);
	return write_file_at(dir, "oom_score_adj", adj);
}

/* Without CONFIG_PROC_CHILDREN: every process of the host is looked at. */
static int mark_copier_by_scan(pid_t init_pid, pid_t nspid)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	int r = -ESRCH;
	struct dirent *de;
	while (r == -ESRCH && (de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			r = mark_if_copier(strtol(de->d_name, NULL, 10), init_pid, nspid);
	closedir(d);
	return r;
}

/*
 * Make the copier of an upload, nspid inside, the OOM killer's first
 * choice in its sandbox. Its pages are few and mostly init's, so by size
 * alone the kernel would take init (and the sandbox with it) or the
 * sandbox's largest process, and leave the upload to fill the memory
 * again; marked, an upload the sandbox's memory cannot hold fails, and
 * nothing else does. Inside, nothing under /proc is writable, so it is
 * done from here. 0, -ESRCH (no such copier: it has gone), or -errno.
 */
static int make_oom_victim(pid_t init_pid, pid_t nspid)
{
	char path[80];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init_pid, (int)init_pid);
	_cleanup_free_ char *list = malloc(CHILDREN_LIST_MAX);
	if (!list)
		return -ENOMEM;
	ssize_t n = read_file_at(AT_FDCWD, path, list, CHILDREN_LIST_MAX);
	if (n == -ENOENT)
		return mark_copier_by_scan(init_pid, nspid);
	if (n < 0)
		return (int)n;
	int r = -ESRCH;
	for (char *p = list, *end; r == -ESRCH; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		r = mark_if_copier(pid, init_pid, nspid);
	}
	return r;
}

int sandbox_open(struct sandbox *sb, const char *path, enum sandbox_open_mode mode, int *ret_fd,
		 char *temp, size_t temp_size, struct error *err)
{
	int r = check_serving(sb, err);
	if (r < 0)
		return r;
	if ((r = check_path("open", path, err)) < 0)
		return r;
	if (mode != SANDBOX_OPEN_READ && mode != SANDBOX_OPEN_WRITE && mode != SANDBOX_OPEN_DIR)
		return error_set(err, EINVAL, "open: unknown mode %d", (int)mode);
	if (mode == SANDBOX_OPEN_WRITE && (!temp || temp_size < SPEC_PATH_MAX + 32))
		return error_set(err, EINVAL, "open: the temp buffer must hold %d bytes",
				 SPEC_PATH_MAX + 32);
	char payload[SPEC_PATH_MAX + 1];
	struct serve_msg m = {.op = SERVE_OP_OPEN, .value = (int32_t)mode};
	if (path_payload(path, NULL, payload, sizeof(payload), &m.len) < 0)
		return error_set(err, EINVAL, "open: path too long");
	struct packet rep;
	if ((r = call(sb, &m, payload, NULL, 0, &rep, err)) < 0)
		return r;
	if (rep.fd < 0)
		return error_set(err, EBADMSG, "open %.200s: init replied without an fd", path);
	if (mode == SANDBOX_OPEN_WRITE) {
		size_t len = strlen(rep.text);
		if (len == 0 || len >= temp_size) {
			CLOSE_FD(rep.fd);
			return error_set(err, EBADMSG, "open %.200s: bad temporary name", path);
		}
		memcpy(temp, rep.text, len + 1);
		/* unmarked, a copier could have init killed in its place: no upload then */
		r = rep.msg.pid > 0 ? make_oom_victim(sb->pid, rep.msg.pid) : -EBADMSG;
		if (r < 0) {
			CLOSE_FD(rep.fd);
			struct error ignored = {0};
			(void)sandbox_unlink(sb, temp, &ignored); /* and its copier is killed */
			/* EIO whatever the cause: an ESRCH here is no process of the caller's */
			return error_set(err, EIO,
					 "open %.200s: cannot make the upload's copier the OOM "
					 "killer's first choice (%s)",
					 path, strerror(-r));
		}
	}
	*ret_fd = rep.fd;
	return 0;
}

int sandbox_rename(struct sandbox *sb, const char *from, const char *to, struct error *err)
{
	int r = check_serving(sb, err);
	if (r < 0)
		return r;
	if ((r = check_path("rename", from, err)) < 0 || (r = check_path("rename", to, err)) < 0)
		return r;
	char payload[2 * SPEC_PATH_MAX];
	struct serve_msg m = {.op = SERVE_OP_RENAME};
	if (path_payload(from, to, payload, sizeof(payload), &m.len) < 0)
		return error_set(err, EINVAL, "rename: path too long");
	struct packet rep;
	if ((r = call(sb, &m, payload, NULL, 0, &rep, err)) < 0)
		return r;
	CLOSE_FD(rep.fd);
	return 0;
}

int sandbox_unlink(struct sandbox *sb, const char *path, struct error *err)
{
	int r = check_serving(sb, err);
	if (r < 0)
		return r;
	if ((r = check_path("unlink", path, err)) < 0)
		return r;
	char payload[SPEC_PATH_MAX + 1];
	struct serve_msg m = {.op = SERVE_OP_UNLINK};
	if (path_payload(path, NULL, payload, sizeof(payload), &m.len) < 0)
		return error_set(err, EINVAL, "unlink: path too long");
	struct packet rep;
	if ((r = call(sb, &m, payload, NULL, 0, &rep, err)) < 0)
		return r;
	CLOSE_FD(rep.fd);
	return 0;
}

int sandbox_upper(struct sandbox *sb, int *ret_fd, struct error *err)
{
	if (!sb->serve)
		return error_set(err, ENOENT, "the sandbox has no image");
	if (sb->reaped)
		return error_set(err, ESRCH, "the sandbox is gone");
	int fd = (int)syscall(SYS_pidfd_getfd, sb->pidfd, INIT_UPPER_FD, 0);
	if (fd < 0 && errno == EBADF)
		return error_set(err, ENOENT, "the sandbox has no image");
	if (fd < 0)
		return error_set_errno(err, errno, "the sandbox's upper layer");
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		close(fd);
		return error_set(err, ENOENT, "the sandbox has no image");
	}
	*ret_fd = fd;
	return 0;
}

uid_t sandbox_id_base(const struct sandbox *sb)
{
	return sb->ids.base;
}

int sandbox_freeze(struct sandbox *sb, bool frozen, struct error *err)
{
	if (!sb->cg || sb->reaped)
		return error_set(err, ESRCH, "the sandbox is gone");
	int r = cgroup_freeze(sb->cg, frozen);
	if (r == -EOPNOTSUPP)
		return error_set(err, EOPNOTSUPP,
				 "cgroup v1: the freezer hierarchy is not mounted, so %s cannot "
				 "be frozen",
				 sb->name);
	if (r < 0)
		return error_set_errno(err, -r, "cgroup: cannot %s %s", frozen ? "freeze" : "thaw",
				       sb->name);
	if (!frozen)
		return 0;
	/* The kernel freezes task by task: done only when it says so. */
	for (long waited = 0, step = 1; !cgroup_is_frozen(sb->cg);
	     waited += step, step = step < 50 ? step * 2 : 50) {
		if (waited >= FREEZE_WAIT_MS)
			return error_set(err, ETIMEDOUT,
					 "cgroup: %s is still freezing after %d ms (it stays "
					 "asked to freeze; thaw to undo)",
					 sb->name, FREEZE_WAIT_MS);
		sleep_ms(step);
	}
	return 0;
}

int sandbox_oom_kills(struct sandbox *sb, uint64_t *ret)
{
	if (!sb->cg)
		return -ESRCH;
	struct cgroup_stats stats;
	int r = cgroup_read_stats(sb->cg, &stats);
	if (r < 0)
		return r;
	*ret = stats.oom_kills;
	return 0;
}

pid_t sandbox_init_pid(const struct sandbox *sb)
{
	return sb->pid;
}
