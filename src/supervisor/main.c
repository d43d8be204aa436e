/*
 * agentbox-supervisor - runs one attempt of one task, and outlives the
 * daemon that started it.
 *
 *	agentbox-supervisor ATTEMPT_DIR
 *
 * It starts the task's sandbox, keeps its output (capped) and its accepted
 * progress lines in journals that it makes durable every 50 ms and at the
 * end, and writes result.json when the attempt ends (see attempt.h for
 * the files). SIGTERM, SIGINT or SIGHUP cancel the attempt. The daemon
 * may die and come back meanwhile: nothing here depends on it.
 *
 * While it runs it holds a lock on <attempt>/lock (inherited as fd 3 from
 * the daemon, or taken itself): the daemon's proof that the attempt is
 * still supervised, whatever became of pids.
 *
 * Exit status: 0 once result.json is written; 1 when the attempt could
 * not be run or recorded (supervisor.log says why); 2 for a usage error.
 * A supervisor that vanishes without result.json leaves its task "lost".
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"
#include "runtime/sandbox.h"
#include "runtime/serve.h" /* sandbox_init_pid() */
#include "supervisor/artifacts.h"
#include "supervisor/attempt.h"
#include "supervisor/journal.h"
#include "supervisor/progress.h"
#include "supervisor/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SYNC_EVERY_MS 50
#define OUTPUT_MARKER "\n[agentbox: output truncated: the log cap was reached]\n"

struct supervisor {
	int dirfd;
	int out_fd;  /* read end of the task's stdout+stderr */
	int fifo_fd; /* the progress channel, held open read-write */
	struct journal output, events;
	struct progress progress;
	struct pollfd fds[2];
	int failed; /* first journal error, -errno */
	const struct attempt *a;
	struct sandbox *sb;	      /* while it runs */
	uint64_t network_read;	      /* bytes of the relay's events file journaled */
	uint64_t bytes_in, bytes_out; /* the link's counters, the most read */
};

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	fputs("agentbox-supervisor: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void keep_error(struct supervisor *s, int r)
{
	if (r < 0 && s->failed == 0)
		s->failed = r;
}

/* Read what is there; returns false at EOF or on an error. */
static bool pump_output(struct supervisor *s)
{
	char buf[65536];
	ssize_t n = read(s->out_fd, buf, sizeof(buf));
	if (n > 0) {
		keep_error(s, journal_append(&s->output, buf, (size_t)n));
		return true;
	}
	return n < 0 && (errno == EINTR || errno == EAGAIN);
}

static bool pump_progress(struct supervisor *s)
{
	char buf[65536];
	ssize_t n = read(s->fifo_fd, buf, sizeof(buf));
	if (n > 0) {
		keep_error(s, progress_feed(&s->progress, buf, (size_t)n));
		return true;
	}
	return false; /* EAGAIN: we hold a writer, so the FIFO never reports EOF */
}

static void on_ready(struct pollfd *pfd, size_t index, void *data)
{
	struct supervisor *s = data;
	if (index == 0) {
		if (!pump_output(s))
			pfd->fd = -1;
	} else {
		/* a bounded helping (1 MiB, 10 ms), so the wait loop still sees
		 * deadlines, cancels and ticks however fast the task writes */
		int64_t until = wall_clock_ms() + 10;
		for (int i = 0; i < 16 && wall_clock_ms() < until && pump_progress(s); i++)
			;
	}
}

/* The relay's new refusals into the events journal; whole lines only. */
static void pump_network(struct supervisor *s)
{
	if (!s->a || !s->a->net.allow)
		return;
	_cleanup_close_ int fd = open(s->a->network_log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[16384];
	ssize_t n;
	while (fd >= 0 && (n = pread(fd, buf, sizeof(buf), (off_t)s->network_read)) > 0) {
		size_t used = 0;
		char *nl;
		while ((nl = memchr(buf + used, '\n', (size_t)n - used))) {
			keep_error(s, progress_egress(&s->progress, buf + used,
						      (size_t)(nl - buf) - used));
			used = (size_t)(nl - buf) + 1;
		}
		if (!used)
			break; /* a line longer than buf, or one still being written */
		s->network_read += used;
	}
}

static void on_tick(void *data)
{
	struct supervisor *s = data;
	uint64_t in, out;
	/* only while the sandbox runs: once it has ended, its link's name may be another's */
	if (s->sb && s->a && s->a->net.host_if[0] &&
	    spec_network_bytes(&s->a->net, sandbox_init_pid(s->sb), &in, &out) == 0) {
		/* counters only grow: a read as the link goes (its peer gone, eth0's
		 * namespace with it) may see less, never more */
		s->bytes_in = in > s->bytes_in ? in : s->bytes_in;
		s->bytes_out = out > s->bytes_out ? out : s->bytes_out;
	}
	pump_network(s);
	keep_error(s, journal_sync(&s->output));
	keep_error(s, journal_sync(&s->events));
}

/* The task's stdout and stderr are one pipe; stdin is /dev/null. */
static int redirect_for_sandbox(int out_w)
{
	_cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out_w, 1) < 0 || dup2(out_w, 2) < 0)
		return -errno;
	return 0;
}

static int open_channels(struct supervisor *s)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	s->out_fd = p[0];
	if (mkfifoat(s->dirfd, "progress", 0600) < 0 && errno != EEXIST)
		return -errno;
	s->fifo_fd = openat(s->dirfd, "progress", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (s->fifo_fd < 0)
		return -errno;
	int r = journal_open(&s->output, s->dirfd, LAYOUT_OUTPUT, ATTEMPT_OUTPUT_CAP_DEFAULT,
			     OUTPUT_MARKER);
	if (r == 0)
		r = journal_open(&s->events, s->dirfd, LAYOUT_EVENTS, ATTEMPT_EVENTS_CAP, NULL);
	if (r < 0)
		return r;
	return p[1];
}

/*
 * The task's artifacts out of the sandbox's data (the fds init handed
 * over, or none), into <task>/artifacts/, before result.json says the
 * attempt ended. A failure here is the host's (its disk full): said in
 * supervisor.log, the unfinished set removed, and the attempt recorded
 * all the same, its end being what it was (the earlier set, if any,
 * stays, its manifest naming its attempt).
 */
static void collect_artifacts(struct supervisor *s, int work_fd, int tmp_fd)
{
	struct error err = {0};
	_cleanup_close_ int task = openat(s->dirfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = task < 0 ? error_set_errno(&err, errno, "open the task's directory")
			 : artifacts_collect(task, s->a->attempt, s->a->artifacts,
					     s->a->spec.workdir, work_fd, tmp_fd, &err);
	if (r < 0) {
		note("cannot keep the artifacts: %s", err.msg);
		if (task >= 0)
			(void)artifacts_remove_tree(task, LAYOUT_ARTIFACTS_NEW);
	}
}

static int run(const char *dir, const sigset_t *cancel)
{
	struct supervisor s = {.out_fd = -1, .fifo_fd = -1};
	struct attempt a;
	struct error err = {0};
	int r;

	s.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.dirfd < 0) {
		note("%s: %s", dir, strerror(errno));
		return 1;
	}
	/* From here on, complaints go to supervisor.log. */
	int log =
	    openat(s.dirfd, "supervisor.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log < 0 || dup2(log, 2) < 0) {
		note("%s/supervisor.log: %s", dir, strerror(errno));
		return 1;
	}
	close(log);
	if ((r = supervise_hold_lock(s.dirfd)) < 0) {
		note("cannot hold the attempt's lock: %s",
		     r == -EBUSY ? "another supervisor runs this attempt" : strerror(-r));
		return 1;
	}
	if ((r = supervise_write_pid_file(s.dirfd, LAYOUT_SUPERVISOR_PID)) < 0) {
		note("cannot write the pid file: %s", strerror(-r));
		return 1;
	}
	if (attempt_load(dir, s.dirfd, &a, &err) < 0) {
		note("%s", err.msg);
		return 1;
	}
	s.a = &a;
	int out_w = open_channels(&s);
	if (out_w < 0) {
		note("cannot open the attempt's files: %s", strerror(-out_w));
		return 1;
	}
	s.progress = (struct progress){.events = &s.events, .now_ms = wall_clock_ms};

	/* blocked since main(): a cancel sent at any point is pending here */
	_cleanup_close_ int sigfd = signalfd(-1, cancel, SFD_CLOEXEC);

	struct sandbox_result res = {0};
	const char *error = NULL;
	struct sandbox *sb = NULL;
	_cleanup_close_ int work_fd = -1, tmp_fd = -1; /* the sandbox's, for its artifacts */
	int saved_err = fcntl(2, F_DUPFD_CLOEXEC, 3);
	if (sigfd < 0 || saved_err < 0 || redirect_for_sandbox(out_w) < 0) {
		note("cannot prepare the sandbox's stdio: %s", strerror(errno));
		return 1;
	}
	r = spec_validate(&a.spec, &err);
	if (r == 0)
		r = sandbox_start(&a.spec, &sb, &err);
	/* our stdout goes nowhere, our stderr back to the log; the task keeps the pipe */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	dup2(null, 1);
	dup2(saved_err, 2);
	close(null);
	close(saved_err);
	close(out_w);

	if (r < 0) {
		res = (struct sandbox_result){.end = SANDBOX_SETUP_FAILED};
		error = err.msg;
	} else {
		s.fds[0] = (struct pollfd){.fd = s.out_fd, .events = POLLIN};
		s.fds[1] = (struct pollfd){.fd = s.fifo_fd, .events = POLLIN};
		struct sandbox_io io = {.fds = s.fds,
					.nfds = 2,
					.ready = on_ready,
					.tick_ms = SYNC_EVERY_MS,
					.tick = on_tick,
					.data = &s};
		s.sb = sb; /* init is our child: its pid stays ours until this wait reaps it */
		r = sandbox_wait_io(sb, sigfd, &io, &res, &err);
		s.sb = NULL;
		if (r == 0 && a.artifacts)
			(void)sandbox_take_dirs(sb, &work_fd, &tmp_fd);
		sandbox_free(sb);
		if (r < 0) {
			note("%s", err.msg);
			return 1;
		}
		if (res.end == SANDBOX_SETUP_FAILED)
			error = err.msg;
		else if (res.end == SANDBOX_EXEC_FAILED)
			error = res.exec_errno == ENOENT ? "command not found"
							 : strerror(res.exec_errno);
	}
	/* Whatever is left in the pipe and the channel belongs to the record. */
	while (s.fds[0].fd >= 0 && pump_output(&s))
		;
	while (pump_progress(&s))
		;
	keep_error(&s, progress_finish(&s.progress));
	on_tick(&s);
	if (s.failed < 0) {
		note("cannot keep the journals: %s", strerror(-s.failed));
		return 1;
	}
	if (a.artifacts)
		collect_artifacts(&s, work_fd, tmp_fd);
	struct attempt_counts counts = {
	    .progress_lines = s.progress.accepted - s.progress.egress,
	    .egress_denied = s.progress.egress,
	    .network_bytes_in = s.bytes_in,
	    .network_bytes_out = s.bytes_out,
	    .malformed_progress = s.progress.malformed,
	    .oversized_progress = s.progress.oversized,
	    .dropped_progress = s.progress.dropped,
	    .output_bytes = s.output.size,
	    .output_dropped = s.output.dropped,
	};
	if ((r = attempt_write_result(s.dirfd, &res, error, &counts)) < 0) {
		note("cannot write result.json: %s", strerror(-r));
		return 1;
	}
	attempt_release(&a);
	return 0;
}

int main(int argc, char **argv)
{
	/* First of all: a cancel that arrives while we start must not kill us
	 * unrecorded, but wait for the sandbox to take it. */
	sigset_t cancel;
	sigemptyset(&cancel);
	sigaddset(&cancel, SIGTERM);
	sigaddset(&cancel, SIGINT);
	sigaddset(&cancel, SIGHUP);
	sigprocmask(SIG_BLOCK, &cancel, NULL);
	if (argc != 2 || argv[1][0] != '/') {
		fputs("usage: agentbox-supervisor ATTEMPT_DIR (an absolute path)\n", stderr);
		return 2;
	}
	return run(argv[1], &cancel);
}
