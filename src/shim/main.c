/*
 * agentbox-shim - keeps one interactive sandbox, and outlives the daemon
 * that started it (protocol.h).
 *
 *	agentbox-shim SANDBOX_DIR    (absolute; fd 3 = the held lock, fd 4 =
 *	                              where to say it is ready, both optional)
 *
 * It starts the sandbox of SANDBOX_DIR/sandbox.json in serve mode, serves
 * requests on SANDBOX_DIR/shim.sock, and keeps the output and the records
 * of the processes it runs under SANDBOX_DIR/procs/ until the sandbox
 * ends: by a "stop" request ("deleted"), its expiry ("expired"), SIGTERM,
 * SIGINT or SIGHUP ("stopped"), or by itself ("died"). It then writes
 * end.json and exits. The sandbox never outlives the shim: its init has
 * a parent-death signal.
 *
 * Exit status: 0 once end.json is written; 1 when the sandbox could not
 * be built ("failed" in end.json, and "error: ..." on fd 4) or its end
 * not recorded (shim.log says why); 2 for a usage error.
 */
#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"
#include "shim/protocol.h"
#include "supervisor/spec-json.h"
#include "supervisor/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

/* The one line on fd 4, if the daemon gave us one: "ok", or why not. */
static void tell_ready(int *fd, const char *error)
{
	if (*fd < 0)
		return;
	char line[ERROR_MSG_MAX + 16];
	if (error)
		snprintf(line, sizeof(line), "error: %s\n", error);
	else
		snprintf(line, sizeof(line), "ok\n");
	(void)write_all(*fd, line, strlen(line)); /* SIGPIPE is blocked: a gone reader is EPIPE */
	CLOSE_FD(*fd);
}

/* shim.sock, 0600: bound through the directory's fd, as sun_path holds only 108 bytes. */
static int listen_socket(struct shim *s, struct error *err)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", s->dirfd,
		 SHIM_SOCKET);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_set_errno(err, errno, "socket");
	s->listen = (struct shim_source){.kind = SOURCE_LISTEN, .fd = fd, .owner = s};
	if (unlinkat(s->dirfd, SHIM_SOCKET, 0) < 0 && errno != ENOENT)
		return error_set_errno(err, errno, "%s", SHIM_SOCKET);
	/* the umask is 077: the socket is born 0600 */
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    fchmodat(s->dirfd, SHIM_SOCKET, 0600, 0) < 0 || listen(fd, SOMAXCONN) < 0)
		return error_set_errno(err, errno, "%s", SHIM_SOCKET);
	return 0;
}

static int open_loop(struct shim *s, const sigset_t *stop, struct error *err)
{
	if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return error_set_errno(err, errno, "epoll");
	int fd = signalfd(-1, stop, SFD_NONBLOCK | SFD_CLOEXEC);
	s->signal = (struct shim_source){.kind = SOURCE_SIGNAL, .fd = fd, .owner = s};
	if (fd < 0)
		return error_set_errno(err, errno, "signalfd");
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	s->timer = (struct shim_source){.kind = SOURCE_TIMER, .fd = fd, .owner = s};
	if (fd < 0)
		return error_set_errno(err, errno, "timerfd");
	/* a spare fd, to refuse a connection when there is none left */
	if ((s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return error_set_errno(err, errno, "/dev/null");
	if (!(s->buf = malloc(SHIM_MSG_MAX + 1)))
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

/*
 * Start the sandbox, then make one request to its init, so that "ok"
 * means a sandbox that answers: a failure of its setup inside shows here.
 */
static int start_sandbox(struct shim *s, struct error *err)
{
	int r = spec_validate(&s->spec, err);
	if (r < 0 || (r = sandbox_start(&s->spec, &s->sb, err)) < 0)
		return r;
	s->networked = s->spec.network_attach != NULL;

	_cleanup_close_ int root = -1;
	struct error probe = {0};
	char unused[SPEC_PATH_MAX + 32];
	bool answers =
	    sandbox_open(s->sb, "/", SANDBOX_OPEN_DIR, &root, unused, sizeof(unused), &probe) == 0;
	/* a pooled sandbox's link, made ahead (in no mode's group until a claim) */
	if (answers &&
	    (!s->park || (r = sandbox_attach_network(s->sb, nethelper_park, &s->parked, err)) == 0))
		return 0;
	struct sandbox_result res = {0};
	sandbox_kill(s->sb);
	struct error ended = {0};
	if (!answers && sandbox_wait(s->sb, -1, &res, &ended) == 0 &&
	    res.end == SANDBOX_SETUP_FAILED)
		r = error_set(err, ended.code, "%s", ended.msg);
	else if (!answers)
		r = error_set(err, probe.code, "the sandbox does not answer: %s", probe.msg);
	else
		(void)sandbox_wait(s->sb, -1, &res, &ended);
	s->sb = sandbox_free(s->sb);
	return r;
}

static int setup(struct shim *s, const sigset_t *stop, struct error *err)
{
	int r;
	if ((r = dir_load(s, err)) < 0)
		return r;
	if (mkdirat(s->dirfd, LAYOUT_PROCS, 0700) < 0 && errno != EEXIST)
		return error_set_errno(err, errno, LAYOUT_PROCS);
	if ((s->procs_fd = openat(s->dirfd, LAYOUT_PROCS,
				  O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return error_set_errno(err, errno, LAYOUT_PROCS);
	if ((r = open_loop(s, stop, err)) < 0 || (r = listen_socket(s, err)) < 0 ||
	    (r = start_sandbox(s, err)) < 0)
		return r;
	s->control = (struct shim_source){
	    .kind = SOURCE_CONTROL, .fd = sandbox_control_fd(s->sb), .owner = s};
	if ((r = shim_watch(s, &s->listen, EPOLLIN)) < 0 ||
	    (r = shim_watch(s, &s->signal, EPOLLIN)) < 0 ||
	    (r = shim_watch(s, &s->timer, EPOLLIN)) < 0 ||
	    (r = shim_watch(s, &s->control, EPOLLIN)) < 0)
		return error_set_errno(err, -r, "epoll");
	/* a parked helper that ends ends the pooled sandbox: the keeper makes another */
	if (s->parked.helper > 0) {
		s->parked_watch =
		    (struct shim_source){.kind = SOURCE_PARKED,
					 .fd = fcntl(s->parked.out, F_DUPFD_CLOEXEC, 3),
					 .owner = s};
		if (s->parked_watch.fd < 0 || (r = shim_watch(s, &s->parked_watch, EPOLLIN)) < 0)
			return error_set_errno(err, s->parked_watch.fd < 0 ? errno : -r,
					       "watch the parked link's helper");
	}
	return 0;
}

static void on_ready(struct pollfd *pfd, size_t index, void *data)
{
	(void)pfd;
	(void)index;
	shim_dispatch(data);
}

/* Why the sandbox ended, when the shim did not end it. */
static const char *died_of(const struct sandbox_result *res, const struct error *err, char *detail,
			   size_t size)
{
	switch (res->end) {
	case SANDBOX_SETUP_FAILED:
		snprintf(detail, size, "%s", err->msg);
		return "failed";
	case SANDBOX_OOM_KILLED:
		snprintf(detail, size, "init was OOM-killed");
		break;
	case SANDBOX_SIGNALED:
		snprintf(detail, size, "init was killed by signal %d", res->term_signal);
		break;
	case SANDBOX_EXITED:
		snprintf(detail, size, "init exited with status %d", res->exit_status);
		break;
	default:
		snprintf(detail, size, "the sandbox ended");
		break;
	}
	return "died";
}

/* Serve until the sandbox ends; then record every process and the end. */
static int serve(struct shim *s)
{
	struct pollfd pfd = {.fd = s->epfd, .events = POLLIN};
	struct sandbox_io io = {.fds = &pfd, .nfds = 1, .ready = on_ready, .data = s};
	struct sandbox_result res = {0};
	struct error err = {0};
	shim_dispatch(s); /* arms the timer; an expiry in the past ends it now */
	int r = sandbox_wait_io(s->sb, -1, &io, &res, &err);
	s->sb = sandbox_free(s->sb);
	s->control.fd = -1;
	shim_close_listener(s);
	proc_end_all(s);
	conn_close_all(s);

	char detail[sizeof(s->end_detail)];
	const char *reason = s->end_reason;
	if (r < 0)
		shim_note("%s", err.msg);
	if (reason) {
		snprintf(detail, sizeof(detail), "%s", s->end_detail);
	} else if (r < 0) {
		reason = "died";
		snprintf(detail, sizeof(detail), "%s", err.msg);
	} else {
		reason = died_of(&res, &err, detail, sizeof(detail));
	}
	shim_note("the sandbox has ended (%s): %s", reason, detail);
	if ((r = dir_write_end(s, reason, detail)) < 0) {
		shim_note("cannot write end.json: %s", strerror(-r));
		return 1;
	}
	return 0;
}

static void release(struct shim *s)
{
	s->sb = sandbox_free(s->sb);
	proc_free_all(s);
	conn_close_all(s);
	shim_close_listener(s);
	CLOSE_FD(s->signal.fd);
	CLOSE_FD(s->timer.fd);
	CLOSE_FD(s->epfd);
	CLOSE_FD(s->reserve_fd);
	CLOSE_FD(s->procs_fd);
	free(s->buf);
	free(s->default_env);
	spec_release(&s->spec);
	spec_network_release(&s->net);
	spec_image_release(&s->image);
	shim_unwatch(s, &s->parked_watch);
	nethelper_park_release(&s->parked);
	strv_free(s->spec_env);
}

static int run(const char *dir, const sigset_t *stop, int ready_fd)
{
	struct shim s = {.dirfd = -1,
			 .procs_fd = -1,
			 .epfd = -1,
			 .reserve_fd = -1,
			 .listen.fd = -1,
			 .signal.fd = -1,
			 .control.fd = -1,
			 .timer.fd = -1,
			 .parked_watch.fd = -1,
			 .image.use_fd = -1};
	struct error err = {0};
	int r;

	s.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.dirfd < 0) {
		error_set_errno(&err, errno, "%s", dir);
		shim_note("%s", err.msg);
		tell_ready(&ready_fd, err.msg);
		return 1;
	}
	/* From here on, complaints go to shim.log. */
	int log = openat(s.dirfd, "shim.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log < 0 || dup2(log, 2) < 0) {
		error_set_errno(&err, errno, "%s/shim.log", dir);
		shim_note("%s", err.msg);
		tell_ready(&ready_fd, err.msg);
		return 1;
	}
	close(log);
	int lock = supervise_hold_lock(s.dirfd);
	if (lock < 0 || (r = supervise_write_pid_file(s.dirfd, LAYOUT_SHIM_PID)) < 0) {
		/* not ours to record: another shim may keep this sandbox */
		if (lock < 0)
			error_set(&err, -lock, "cannot hold the sandbox's lock: %s",
				  lock == -EBUSY ? "another shim keeps it" : strerror(-lock));
		else
			error_set_errno(&err, -r, "cannot write the pid file");
		shim_note("%s", err.msg);
		tell_ready(&ready_fd, err.msg);
		return 1;
	}
	if (setup(&s, stop, &err) < 0) {
		shim_note("%s", err.msg);
		if ((r = dir_write_end(&s, "failed", err.msg)) < 0)
			shim_note("cannot write end.json: %s", strerror(-r));
		release(&s);
		tell_ready(&ready_fd, err.msg);
		return 1;
	}
	shim_note("sandbox %s is up, init pid %d", s.id, (int)sandbox_init_pid(s.sb));
	tell_ready(&ready_fd, NULL);
	r = serve(&s);
	release(&s);
	return r;
}

int main(int argc, char **argv)
{
	/* First of all: a stop that arrives while we start must wait for the
	 * loop to take it; SIGPIPE must never kill us (EPIPE does the telling). */
	sigset_t stop, blocked;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	blocked = stop;
	sigaddset(&blocked, SIGPIPE);
	sigprocmask(SIG_BLOCK, &blocked, NULL);
	/* an ignored signal never reaches the signalfd: take no such habit from the daemon */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&stop, sig) == 1)
			(void)sigaction(sig, &dfl, NULL);
	/* before we open anything that could take its number */
	int ready_fd = fcntl(SHIM_READY_FD, F_SETFD, FD_CLOEXEC) == 0 ? SHIM_READY_FD : -1;
	if (argc != 2 || argv[1][0] != '/') {
		fputs("usage: agentbox-shim SANDBOX_DIR (an absolute path)\n", stderr);
		return 2;
	}
	umask(077);
	return run(argv[1], &stop, ready_fd);
}
