/*
 * serve-init.c - a serve-mode init: answer the launcher's requests from
 * inside the finished sandbox. See serve.h and serve-internal.h.
 *
 * By the time serve_init_run() is called init is uid 1000 with no
 * capabilities, under Landlock and seccomp, with every signal blocked and
 * only 0-2 (/dev/null), the status pipe and the control socket open. So
 * every process it spawns and every file it opens gets exactly the
 * sandbox user's rights in the sandbox's view of the file system.
 *
 * One loop, one thread: poll the control socket and a signalfd for
 * SIGCHLD. Each request is answered before the next is read; a child's
 * exec is awaited (it takes microseconds) so a failure is reported as the
 * request's own result. Every reaped child init spawned is reported with
 * an EXITED message; orphans that end up with init are reaped silently.
 *
 * Uploads are written by copiers, children of init that never exec: the
 * pages of a file on the sandbox's tmpfs are charged to the memory cgroup
 * of whoever writes them, and a copier is in the sandbox's, so memory_mb
 * holds for uploads as for anything the sandbox writes itself. A copier
 * reads a socket whose other end the launcher hands out, until EOF, and
 * exits with the errno of what failed. init keeps its own reference to
 * the copier's end (input): the RENAME of the temporary shuts it for
 * reading, so whatever was sent before the rename is the file and
 * nothing after it is; and since the launcher's end reads EOF only once
 * that reference is closed too, at the reap, a launcher that waits for
 * EOF before it renames never makes init wait. A failed copier's
 * temporary is removed as soon as it is reaped: its pages are the
 * sandbox's memory, which an OOM kill found full.
 */
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fdpass.h"
#include "base/fileio.h"
#include "runtime/launch-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A copier's buffer: the most it reads from the socket and writes at once. */
#define COPIER_BUF_SIZE (64 * 1024)
/* The longest sleep between two looks at a copier a rename waits for. */
#define COPIER_POLL_MAX_MS 50

/* Children spawned on request and not reaped yet. */
static pid_t children[SERVE_CHILDREN_MAX];
static size_t nchildren;

/*
 * The uploads: a slot per copier, from OPEN WRITE until the RENAME or
 * UNLINK of its temporary. A slot whose copier has ended and that nobody
 * came back for (the launcher died) is taken again when no slot is free,
 * the oldest first.
 */
struct upload {
	pid_t pid;	/* the copier; 0: a free slot */
	int input;	/* init's reference to the copier's end of the socket; -1 once ended */
	bool ended;	/* reaped: status is its wait status */
	bool timed_out; /* killed by init itself, after SERVE_UPLOAD_FINISH_MS */
	int status;
	uint64_t seq; /* order of opening */
	char temp[SPEC_PATH_MAX];
};
static struct upload uploads[SERVE_UPLOADS_MAX];
static uint64_t uploads_opened;

/* One received request: header, payload (NUL-terminated past its end), fds. */
struct request {
	struct serve_msg msg;
	char *payload;
	int fds[SERVE_SPAWN_FDS];
	size_t nfds;
};

/* The reply being built: code, pid, a reason or temp path, an fd to pass. */
struct reply {
	struct serve_msg msg;
	char text[SERVE_REPLY_TEXT_MAX];
	int fd;
};

static bool is_child(pid_t pid, size_t *ret_index)
{
	for (size_t i = 0; i < nchildren; i++)
		if (children[i] == pid) {
			if (ret_index)
				*ret_index = i;
			return true;
		}
	return false;
}

int serve_init_prepare(int ctl_fd, struct error *err)
{
	if (dup3(ctl_fd, INIT_CONTROL_FD, O_CLOEXEC) < 0)
		return error_set_errno(err, errno, "serve: control socket");
	_cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return error_set_errno(err, errno, "serve: open /dev/null");
	for (int fd = 0; fd <= 2; fd++)
		if (dup2(null, fd) < 0)
			return error_set_errno(err, errno, "serve: /dev/null on fd %d", fd);
	return 0;
}

/* Send m with its payload and at most one fd. 0, or -errno (-EPIPE: the launcher is gone). */
static int send_packet(const struct serve_msg *m, const void *payload, int fd)
{
	struct iovec iov[2] = {{.iov_base = (void *)m, .iov_len = sizeof(*m)},
			       {.iov_base = (void *)payload, .iov_len = m->len}};
	union fdpass_buf cmsg_buf;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = m->len ? 2 : 1};
	fdpass_attach(&mh, &cmsg_buf, &fd, fd >= 0 ? 1 : 0);
	while (sendmsg(INIT_CONTROL_FD, &mh, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* The launcher is gone or the socket broke: nothing more to do here. */
static _Noreturn void hang_up(int r)
{
	_exit(r == -EPIPE || r == -ECONNRESET ? 0 : 1);
}

/*
 * Split a payload into exactly n NUL-terminated strings. -EINVAL when it
 * holds fewer, more, or bytes after the last NUL.
 */
static int split_strings(char *p, size_t len, const char **out, size_t n)
{
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (off >= len)
			return -EINVAL;
		char *end = memchr(p + off, '\0', len - off);
		if (!end)
			return -EINVAL;
		out[i] = p + off;
		off = (size_t)(end - p) + 1;
	}
	return off == len ? 0 : -EINVAL;
}

/* One path argument, checked as serve_path_is_valid() says. */
static int path_arg(const char *p, struct error *err)
{
	if (!serve_path_is_valid(p, strnlen(p, SPEC_PATH_MAX)))
		return error_set(err, EINVAL, "'%.100s' is not an absolute path under %d bytes", p,
				 SPEC_PATH_MAX);
	return 0;
}

/*
 * The child's terminal: the slave of master (its own devpts), made the
 * controlling terminal of the new session, on 0-2. 0 or an errno.
 */
static int take_terminal(int master)
{
	int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		return errno;
	/* init's own 0-2 are always open, so slave is above 2 */
	for (int i = 0; i < 3; i++)
		if (dup2(slave, i) < 0)
			return errno;
	return 0;
}

/*
 * The child: its own session, the three fds (or the terminal of master,
 * when >= 0) on 0-2, cwd, exec. Reports errno on pipe_fd.
 */
static _Noreturn void spawn_child(const int *fds, int master, const char *cwd,
				  const char *const *argv, char *const *envp, int pipe_fd)
{
	init_child_reset_signals();
	int e = 0;
	if (setsid() < 0)
		e = errno;
	if (e == 0 && master >= 0)
		e = take_terminal(master);
	/* init's own 0-2 are always open, so the received fds are all above 2. */
	for (int i = 0; e == 0 && master < 0 && i < SERVE_SPAWN_FDS; i++)
		if (dup2(fds[i], i) < 0)
			e = errno;
	int step = 0; /* 0 = set up, 1 = chdir, 2 = exec */
	if (e == 0) {
		step = 1;
		if (chdir(cwd) < 0)
			e = errno;
	}
	if (e == 0) {
		step = 2;
		e = init_child_exec(argv, envp);
	}
	int report[2] = {e, step};
	(void)!write(pipe_fd, report, sizeof(report));
	_exit(e == ENOENT ? 127 : 126);
}

/*
 * A new terminal of the sandbox's devpts, unlocked and sized: its master
 * (O_CLOEXEC). Opened by init, as the sandbox user, in the sandbox's
 * /dev: no other devpts instance is reachable from here.
 */
static int open_terminal(unsigned rows, unsigned cols, int *ret_master, struct error *err)
{
	if (rows < 1 || rows > SERVE_TTY_DIM_MAX || cols < 1 || cols > SERVE_TTY_DIM_MAX)
		return error_set(err, EINVAL, "spawn: a terminal of %ux%u", rows, cols);
	_cleanup_close_ int master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return error_set(err, errno, "spawn: open /dev/pts/ptmx");
	int unlock = 0;
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0 || ioctl(master, TIOCSWINSZ, &ws) < 0)
		return error_set(err, errno, "spawn: set up the terminal");
	*ret_master = TAKE_FD(master);
	return 0;
}

static int do_spawn(struct request *req, struct reply *rep, struct error *err)
{
	const struct serve_msg *m = &req->msg;
	bool tty = m->value & SERVE_SPAWN_TTY;
	size_t nfds = tty ? 0 : SERVE_SPAWN_FDS;
	if (req->nfds != nfds)
		return error_set(err, EINVAL, "spawn: %zu fds instead of %zu", req->nfds, nfds);
	if (m->argc < 1 || m->len > SERVE_SPAWN_BYTES_MAX || (size_t)m->argc + m->nenv + 1 > m->len)
		return error_set(err, EINVAL, "spawn: bad argument counts");
	size_t n = 1 + (size_t)m->argc + m->nenv;
	/* strs: cwd, argv[argc], NULL, envp[nenv], NULL */
	_cleanup_free_ const char **strs = calloc(n + 2, sizeof(*strs));
	if (!strs)
		return error_set(err, ENOMEM, "spawn: out of memory");
	if (split_strings(req->payload, m->len, strs, n) < 0)
		return error_set(err, EINVAL, "spawn: malformed request");
	const char **envp = strs + 1 + m->argc + 1;
	memmove(envp, strs + 1 + m->argc, m->nenv * sizeof(*strs));
	envp[-1] = NULL;
	const char *cwd = strs[0];
	const char *const *argv = strs + 1;
	int r = path_arg(cwd, err);
	if (r < 0)
		return error_prefix(err, "spawn: cwd ");
	if (!argv[0][0])
		return error_set(err, EINVAL, "spawn: empty command");
	if (nchildren >= SERVE_CHILDREN_MAX)
		return error_set(err, EAGAIN, "spawn: %d children already running",
				 SERVE_CHILDREN_MAX);

	_cleanup_close_ int master = -1;
	if (tty && (r = open_terminal(m->rows, m->cols, &master, err)) < 0)
		return r;
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return error_set(err, errno, "spawn: pipe");
	pid_t pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		spawn_child(req->fds, master, cwd, argv, (char *const *)envp, pipefd[1]);
	}
	int e = errno;
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		return error_set(err, e, "spawn: fork");
	}
	int report[2];
	ssize_t got = read_all(pipefd[0], report, sizeof(report));
	close(pipefd[0]);
	if (got == (ssize_t)sizeof(report)) {
		/* It could not exec and has exited, or is about to: take it now. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (report[0] <= 0)
			report[0] = EIO;
		if (report[1] == 2)
			return error_set(err, report[0], "exec %.200s", argv[0]);
		if (report[1] == 1)
			return error_set(err, report[0], "chdir %.200s", cwd);
		return error_set(err, report[0], "spawn: child setup");
	}
	children[nchildren++] = pid;
	rep->msg.pid = pid;
	rep->fd = TAKE_FD(master); /* -1 without a terminal */
	return 0;
}

static int do_signal(const struct request *req, struct error *err)
{
	pid_t pid = req->msg.pid;
	if (pid <= 0 || !is_child(pid, NULL))
		return error_set(err, ESRCH, "signal: %d is not a running child", (int)pid);
	if (kill(-pid, req->msg.value) < 0)
		return error_set(err, errno, "signal %d to group %d", req->msg.value, (int)pid);
	return 0;
}

/* /proc and /sys hold init's own secrets and the kernel's: never hand them out. */
static int check_fs(int fd, const char *path, struct error *err)
{
	struct statfs sfs;
	if (fstatfs(fd, &sfs) < 0)
		return error_set(err, errno, "statfs %.200s", path);
	if (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC)
		return error_set(err, EACCES, "%.200s is on /proc or /sys", path);
	return 0;
}

static int open_read(const char *path, bool dir, int *ret_fd, struct error *err)
{
	int flags = dir ? O_RDONLY | O_DIRECTORY | O_NOCTTY | O_CLOEXEC
			: O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC; /* a FIFO must not block */
	_cleanup_close_ int fd = open(path, flags);
	if (fd < 0)
		return error_set(err, errno, "open %.200s", path);
	int r = check_fs(fd, path, err);
	if (r < 0)
		return r;
	if (!dir) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return error_set(err, errno, "stat %.200s", path);
		if (!S_ISREG(st.st_mode))
			return error_set(err, EINVAL, "%.200s is not a regular file", path);
		if (fcntl(fd, F_SETFL, 0) < 0)
			return error_set(err, errno, "fcntl %.200s", path);
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* A fresh temporary beside path, its parents made as the sandbox user. */
static int open_write(const char *path, int *ret_fd, char *temp, size_t temp_size,
		      struct error *err)
{
	char parent[SPEC_PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (!slash[1])
		return error_set(err, EINVAL, "'%.200s' names no file", path);
	if (strlen(path) + 1 + strlen(SERVE_UPLOAD_PREFIX) + SERVE_UPLOAD_SUFFIX_LEN >=
	    SPEC_PATH_MAX)
		return error_set(err, ENAMETOOLONG, "'%.100s...': no room for a temporary name",
				 path);
	if (slash == parent)
		slash[1] = '\0'; /* "/name": the parent is "/" */
	else
		*slash = '\0';
	int r = mkdir_p_at(AT_FDCWD, parent, 0755);
	if (r < 0)
		return error_set(err, -r, "mkdir %.200s", parent);
	_cleanup_close_ int dirfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return error_set(err, errno, "open %.200s", parent);
	if ((r = check_fs(dirfd, parent, err)) < 0)
		return r;
	unsigned char rnd[SERVE_UPLOAD_SUFFIX_LEN / 2];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return error_set(err, EIO, "getrandom");
	char name[64];
	int len = snprintf(name, sizeof(name), "%s", SERVE_UPLOAD_PREFIX);
	for (size_t i = 0; i < sizeof(rnd); i++)
		len += snprintf(name + len, sizeof(name) - (size_t)len, "%02x", rnd[i]);
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return error_set(err, errno, "create a file in %.200s", parent);
	snprintf(temp, temp_size, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", name);
	*ret_fd = fd;
	return 0;
}

/* ---- uploads -------------------------------------------------------------- */

/* The errno an ended copier reports: 0 when it wrote everything. */
static int upload_errno(const struct upload *u)
{
	if (u->timed_out)
		return ETIMEDOUT;
	if (WIFEXITED(u->status))
		return WEXITSTATUS(u->status);
	/* nothing but SIGKILL and SIGSTOP reaches it: see copier_main() */
	return WIFSIGNALED(u->status) && WTERMSIG(u->status) == SIGKILL ? ENOMEM : EIO;
}

static struct upload *upload_running(pid_t pid)
{
	for (size_t i = 0; i < SERVE_UPLOADS_MAX; i++)
		if (uploads[i].pid == pid && !uploads[i].ended)
			return &uploads[i];
	return NULL;
}

static struct upload *upload_of(const char *temp)
{
	for (size_t i = 0; i < SERVE_UPLOADS_MAX; i++)
		if (uploads[i].pid && strcmp(uploads[i].temp, temp) == 0)
			return &uploads[i];
	return NULL;
}

/* A free slot, else the oldest whose copier has ended; NULL when all run. */
static struct upload *upload_slot(void)
{
	struct upload *oldest = NULL;
	for (size_t i = 0; i < SERVE_UPLOADS_MAX; i++) {
		struct upload *u = &uploads[i];
		if (!u->pid)
			return u;
		if (u->ended && (!oldest || u->seq < oldest->seq))
			oldest = u;
	}
	return oldest;
}

/* Its copier has been reaped with status. */
static void upload_ended(struct upload *u, int status)
{
	u->ended = true;
	u->status = status;
	CLOSE_FD(u->input); /* the launcher's end reads EOF now */
	/* half a file is no use, and its pages are the sandbox's memory: give them back now */
	if (upload_errno(u) != 0)
		(void)unlink(u->temp);
}

static void upload_forget(struct upload *u)
{
	if (!u->ended) {
		/* reaped silently later, as an orphan */
		(void)kill(u->pid, SIGKILL);
		CLOSE_FD(u->input);
	}
	*u = (struct upload){.input = -1};
}

/*
 * The upload ends: nothing more comes in, the copier writes what it was
 * sent and is reaped, within SERVE_UPLOAD_FINISH_MS or killed. 0, or the
 * copier's errno with err.
 */
static int upload_finish(struct upload *u, struct error *err)
{
	if (!u->ended)
		(void)shutdown(u->input, SHUT_RD); /* it reads what is queued, then EOF */
	for (long waited = 0, step = 1; !u->ended;
	     waited += step, step = step * 2 < COPIER_POLL_MAX_MS ? step * 2 : COPIER_POLL_MAX_MS) {
		int status;
		pid_t p = waitpid(u->pid, &status, WNOHANG);
		if (p == u->pid) {
			upload_ended(u, status);
			break;
		}
		if (waited >= SERVE_UPLOAD_FINISH_MS) {
			/* stopped from inside, or stuck: the upload fails, init goes on */
			(void)kill(u->pid, SIGKILL);
			while (waitpid(u->pid, &status, 0) < 0 && errno == EINTR)
				;
			u->timed_out = true;
			upload_ended(u, status);
			break;
		}
		sleep_ms(step);
	}
	int e = upload_errno(u);
	switch (e) {
	case 0:
		return 0;
	case ENOMEM:
		return error_set(
		    err, e,
		    "upload to %.200s: killed while writing, as the OOM killer does when "
		    "the sandbox's memory is full",
		    u->temp);
	case ETIMEDOUT:
		return error_set(err, e, "upload to %.200s: not written within %d ms", u->temp,
				 SERVE_UPLOAD_FINISH_MS);
	default:
		return error_set(err, e, "upload to %.200s: write", u->temp);
	}
}

/* The copier's exit status for errno e (serve-internal.h). */
static int copier_status(int e)
{
	return e > 0 && e <= SERVE_COPIER_ERRNO_MAX ? e : EIO;
}

/*
 * The copier: socket (input) to file, until EOF. It keeps init's
 * credentials and signal mask (all blocked: a SIGXFSZ is EFBIG, and only
 * SIGKILL and SIGSTOP reach it), and holds nothing else of init's.
 */
static _Noreturn void copier_main(int input, int file)
{
	(void)prctl(PR_SET_NAME, SERVE_COPIER_NAME, 0, 0, 0);
	/* init's 0-2 are always open, so both are above 2 */
	if (dup2(input, 0) < 0 || dup2(file, 1) < 0 || close_range(3, ~0U, 0) < 0)
		_exit(copier_status(errno));
	/* never touched by init: its pages are the copier's own, charged to the sandbox */
	static char buf[COPIER_BUF_SIZE];
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n == 0)
			_exit(0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			_exit(copier_status(errno));
		}
		int r = write_all(1, buf, (size_t)n);
		if (r < 0) {
			(void)ftruncate(1, 0); /* the memory back at once, before init removes it */
			_exit(copier_status(-r));
		}
	}
}

/* OPEN WRITE: the temporary, its copier, and our end of the socket in rep. */
static int open_upload(const char *path, struct reply *rep, struct error *err)
{
	struct upload *u = upload_slot();
	if (!u)
		return error_set(err, EAGAIN, "upload: %d uploads in flight already",
				 SERVE_UPLOADS_MAX);
	_cleanup_close_ int file = -1;
	int r = open_write(path, &file, rep->text, sizeof(rep->text), err);
	if (r < 0)
		return r;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = error_set(err, errno, "upload: socketpair");
		(void)unlink(rep->text);
		return r;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		copier_main(sv[1], file);
	}
	if (pid < 0) {
		r = error_set(err, errno, "upload: fork the copier");
		close(sv[0]);
		close(sv[1]);
		(void)unlink(rep->text);
		return r;
	}
	if (u->pid)
		upload_forget(u); /* ended, and nobody came back for it */
	*u = (struct upload){.pid = pid, .input = sv[1], .seq = ++uploads_opened};
	snprintf(u->temp, sizeof(u->temp), "%s", rep->text);
	rep->fd = sv[0];
	rep->msg.pid = pid;
	rep->msg.len = (uint32_t)strlen(rep->text) + 1;
	return 0;
}

/* Reap every child that has ended; report the ones we spawned. */
static void reap(void)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		size_t i;
		if (!is_child(pid, &i)) {
			struct upload *u = upload_running(pid);
			if (u)
				upload_ended(u, status);
			continue; /* else an orphan that fell to us */
		}
		children[i] = children[--nchildren];
		struct serve_msg m = {.op = SERVE_OP_EXITED, .pid = pid, .value = status};
		int r = send_packet(&m, NULL, -1);
		if (r < 0)
			hang_up(r);
	}
}

static int do_open(const struct request *req, struct reply *rep, struct error *err)
{
	const char *path;
	if (split_strings(req->payload, req->msg.len, &path, 1) < 0)
		return error_set(err, EINVAL, "open: malformed request");
	int r = path_arg(path, err);
	if (r < 0)
		return r;
	switch (req->msg.value) {
	case SANDBOX_OPEN_READ:
		return open_read(path, false, &rep->fd, err);
	case SANDBOX_OPEN_DIR:
		return open_read(path, true, &rep->fd, err);
	case SANDBOX_OPEN_WRITE:
		return open_upload(path, rep, err);
	default:
		return error_set(err, EINVAL, "open: unknown mode %d", req->msg.value);
	}
}

static int do_rename(const struct request *req, struct error *err)
{
	const char *p[2];
	if (split_strings(req->payload, req->msg.len, p, 2) < 0)
		return error_set(err, EINVAL, "rename: malformed request");
	int r;
	if ((r = path_arg(p[0], err)) < 0 || (r = path_arg(p[1], err)) < 0)
		return r;
	struct upload *u = upload_of(p[0]);
	if (u) {
		r = upload_finish(u, err);
		upload_forget(u);
		if (r < 0)
			return r;
	}
	/* A directory is never replaced (rename(2) would take an empty one). */
	struct stat st;
	if (lstat(p[1], &st) == 0 && S_ISDIR(st.st_mode))
		return error_set(err, EISDIR, "rename: %.200s is a directory", p[1]);
	if (renameat(AT_FDCWD, p[0], AT_FDCWD, p[1]) < 0)
		return error_set(err, errno, "rename %.200s to %.200s", p[0], p[1]);
	return 0;
}

static int do_unlink(const struct request *req, struct error *err)
{
	const char *path;
	if (split_strings(req->payload, req->msg.len, &path, 1) < 0)
		return error_set(err, EINVAL, "unlink: malformed request");
	int r = path_arg(path, err);
	if (r < 0)
		return r;
	struct upload *u = upload_of(path);
	if (u) {
		bool gone = u->ended && upload_errno(u) != 0; /* removed at its reap */
		upload_forget(u);
		if (gone)
			return 0;
	}
	/* Linux refuses a directory with EISDIR itself: no window to race. */
	if (unlinkat(AT_FDCWD, path, 0) < 0)
		return error_set(err, errno, "unlink %.200s", path);
	return 0;
}

/* Answer one request; a broken socket ends init. */
static void handle(struct request *req)
{
	struct reply rep = {.msg = {.op = SERVE_OP_REPLY, .seq = req->msg.seq}, .fd = -1};
	struct error err = {0};
	int r;
	switch (req->msg.op) {
	case SERVE_OP_SPAWN:
		r = do_spawn(req, &rep, &err);
		break;
	case SERVE_OP_SIGNAL:
		r = do_signal(req, &err);
		break;
	case SERVE_OP_OPEN:
		r = do_open(req, &rep, &err);
		break;
	case SERVE_OP_RENAME:
		r = do_rename(req, &err);
		break;
	case SERVE_OP_UNLINK:
		r = do_unlink(req, &err);
		break;
	default:
		r = error_set(&err, EINVAL, "unknown request %u", req->msg.op);
	}
	if (r < 0) {
		rep.msg.code = err.code ? -err.code : -EIO;
		snprintf(rep.text, sizeof(rep.text), "%s", err.msg);
		rep.msg.len = (uint32_t)strlen(rep.text) + 1;
		CLOSE_FD(rep.fd);
	}
	r = send_packet(&rep.msg, rep.text, rep.fd);
	CLOSE_FD(rep.fd);
	if (r < 0)
		hang_up(r);
}

/* The request buffer: one packet of the largest size, and a NUL after it. */
static union {
	struct serve_msg msg;
	char buf[SERVE_MSG_MAX + 1];
} in;

/*
 * Receive one packet into req. 1 with a request, 0 on EOF, -errno. A
 * packet that does not fit (or brings more fds than a request may) is
 * answered with -E2BIG / -EINVAL here and reported as "none" (-EAGAIN).
 */
static int receive(struct request *req)
{
	*req = (struct request){.payload = in.buf + sizeof(struct serve_msg)};
	int flags = 0;
	ssize_t n = fdpass_recv(INIT_CONTROL_FD, in.buf, SERVE_MSG_MAX, 0, req->fds,
				SERVE_SPAWN_FDS, &req->nfds, &flags);
	if (n <= 0)
		return (int)n; /* -EAGAIN: none after all (EINTR is retried) */
	int bad = 0;
	if (flags & MSG_TRUNC)
		bad = E2BIG;
	else if (flags & MSG_CTRUNC)
		bad = EINVAL;
	else if ((size_t)n < sizeof(struct serve_msg) ||
		 in.msg.len != (size_t)n - sizeof(struct serve_msg))
		bad = EINVAL;
	if (!bad) {
		req->msg = in.msg;
		in.buf[n] = '\0';
		return 1;
	}
	for (size_t i = 0; i < req->nfds; i++)
		close(req->fds[i]);
	struct serve_msg rep = {.op = SERVE_OP_REPLY, .code = -bad};
	if ((size_t)n >= sizeof(uint32_t) * 2)
		memcpy(&rep.seq, in.buf + sizeof(uint32_t), sizeof(rep.seq));
	int r = send_packet(&rep, NULL, -1);
	return r < 0 ? r : -EAGAIN;
}

int serve_init_run(struct error *err)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	/* SIGCHLD is blocked already (init blocks everything): it queues here. */
	_cleanup_close_ int sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		return error_set_errno(err, errno, "serve: signalfd");

	for (;;) {
		struct pollfd pfd[2] = {{.fd = INIT_CONTROL_FD, .events = POLLIN},
					{.fd = sigfd, .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si[8];
			while (read(sigfd, si, sizeof(si)) > 0)
				;
			reap();
		}
		if (!pfd[0].revents)
			continue;
		struct request req;
		int r = receive(&req);
		if (r == 0)
			_exit(0); /* the launcher hung up: the sandbox ends with us */
		if (r == -EAGAIN)
			continue;
		if (r < 0)
			hang_up(r);
		handle(&req);
		for (size_t i = 0; i < req.nfds; i++)
			close(req.fds[i]);
	}
}
