#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"
#include "shim/protocol.h"
#include "supervisor/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIPE_READ_CHUNK 65536
#define PIPE_READS_EACH 4 /* chunks per readiness, so no pipe starves the rest */
#define NS_PER_MS	1000000ULL

static void name_of(char *buf, size_t size, pid_t pid, const char *ext)
{
	snprintf(buf, size, "%d.%s", (int)pid, ext);
}

static int open_output(struct shim *s, pid_t pid, const char *ext)
{
	char name[32];
	name_of(name, sizeof(name), pid, ext);
	int fd =
	    openat(s->procs_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

static void remove_files(struct shim *s, pid_t pid)
{
	static const char *const exts[] = {LAYOUT_PROC_OUT, LAYOUT_PROC_ERR, LAYOUT_PROC_EXIT};
	char name[32];
	for (size_t i = 0; i < ELEMENTSOF(exts); i++) {
		name_of(name, sizeof(name), pid, exts[i]);
		(void)unlinkat(s->procs_fd, name, 0);
	}
}

/* Remove the files of p, and give their bytes back to the sandbox's output cap. */
static void forget_files(struct shim *s, struct proc *p)
{
	uint64_t bytes = p->out.size + p->err.size;
	s->output_bytes = s->output_bytes > bytes ? s->output_bytes - bytes : 0;
	p->out.size = p->err.size = 0;
	remove_files(s, p->pid);
}

struct proc *proc_find(struct shim *s, pid_t pid)
{
	for (struct proc *p = s->procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

static void unlink_proc(struct shim *s, struct proc *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		s->procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		s->procs_tail = p->prev;
	p->prev = p->next = NULL;
}

static void close_streams(struct shim *s, struct proc *p)
{
	shim_unwatch(s, &p->out.src);
	shim_unwatch(s, &p->err.src);
	CLOSE_FD(p->out.file);
	CLOSE_FD(p->err.file);
}

static struct proc *proc_free(struct shim *s, struct proc *p)
{
	close_streams(s, p);
	json_decref(p->command);
	json_decref(p->record);
	free(p);
	return NULL;
}

/* Out of the list; freed once the current batch no longer points at it. */
static void drop(struct shim *s, struct proc *p)
{
	unlink_proc(s, p);
	if (p->state == PROC_ENDED)
		s->ended--;
	else
		s->running--;
	close_streams(s, p);
	p->next = s->graveyard;
	s->graveyard = p;
}

void proc_sweep(struct shim *s)
{
	while (s->graveyard) {
		struct proc *p = s->graveyard;
		s->graveyard = p->next;
		proc_free(s, p);
	}
}

void proc_free_all(struct shim *s)
{
	proc_sweep(s);
	while (s->procs) {
		struct proc *p = s->procs;
		unlink_proc(s, p);
		proc_free(s, p);
	}
	s->running = s->ended = 0;
}

/*
 * Keep what fits under the caps (the stream's, and the sandbox's for all
 * its output files); the rest only marks the stream truncated.
 */
static void keep(struct shim *s, struct proc *p, struct proc_stream *st, const char *buf, size_t n)
{
	uint64_t room = st->size < SHIM_OUTPUT_CAP ? SHIM_OUTPUT_CAP - st->size : 0;
	uint64_t total_room =
	    s->output_bytes < SHIM_OUTPUT_TOTAL_CAP ? SHIM_OUTPUT_TOTAL_CAP - s->output_bytes : 0;
	if (room > total_room)
		room = total_room;
	size_t k = n < room ? n : (size_t)room;
	if (k < n)
		st->truncated = true;
	if (k == 0 || st->file < 0)
		return;
	int r = write_all(st->file, buf, k);
	if (r < 0) {
		shim_note("process %d: cannot keep its output: %s", (int)p->pid, strerror(-r));
		CLOSE_FD(st->file);
		st->truncated = true;
		return;
	}
	st->size += k;
	s->output_bytes += k;
	p->output_pending = true;
}

enum pump_result {
	PUMP_AGAIN, /* nothing more for now */
	PUMP_MORE,  /* it read its fill: there may be more */
	PUMP_END,   /* the pipe is at its end, and closed */
};

/* Read what the pipe has, a bounded amount. */
static enum pump_result pump(struct shim *s, struct proc *p, struct proc_stream *st)
{
	char buf[PIPE_READ_CHUNK];
	for (int i = 0; i < PIPE_READS_EACH; i++) {
		if (st->src.fd < 0)
			return PUMP_END;
		ssize_t n = read(st->src.fd, buf, sizeof(buf));
		if (n > 0) {
			keep(s, p, st, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return PUMP_AGAIN;
		shim_unwatch(s, &st->src); /* end of file, or a pipe error: the same for us */
	}
	return st->src.fd < 0 ? PUMP_END : PUMP_MORE;
}

/* Read until the pipe has nothing more now (the writers are gone, say). */
static void pump_all(struct shim *s, struct proc *p, struct proc_stream *st)
{
	/* bounded: a pipe buffer holds far less than this */
	for (int i = 0; i < 1024 && pump(s, p, st) == PUMP_MORE; i++)
		;
}

static json_t *record_of(const struct proc *p)
{
	int st = p->status;
	bool signaled = WIFSIGNALED(st);
	int code = signaled ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
	return json_pack("{s:i, s:O, s:i, s:o, s:b, s:b, s:I, s:b, s:I, s:I}", "pid", (int)p->pid,
			 "command", p->command, "exit_code", code, "signal",
			 signaled ? json_integer(WTERMSIG(st)) : json_null(), "oom_killed",
			 p->oom_killed, "timed_out", p->timed_out, "duration_ms",
			 (json_int_t)p->duration_ms, "truncated",
			 p->out.truncated || p->err.truncated, "started_at",
			 (json_int_t)p->started_at, "ended_at", (json_int_t)p->ended_at);
}

/* Forget the oldest ended records beyond SHIM_PROCS_KEPT, files and all. */
static void retain(struct shim *s)
{
	while (s->ended > SHIM_PROCS_KEPT) {
		struct proc *oldest = NULL;
		for (struct proc *p = s->procs; p; p = p->next)
			if (p->state == PROC_ENDED && (!oldest || p->end_seq < oldest->end_seq))
				oldest = p;
		if (!oldest)
			return;
		forget_files(s, oldest);
		drop(s, oldest);
	}
}

/* Exited and read to the end (or given up on): write the record, tell the watchers. */
static void finish(struct shim *s, struct proc *p)
{
	close_streams(s, p);
	p->record = record_of(p);
	if (p->record) {
		char name[32];
		name_of(name, sizeof(name), p->pid, LAYOUT_PROC_EXIT);
		int r = supervise_write_json(s->procs_fd, name, p->record, false);
		if (r < 0)
			shim_note("process %d: cannot write %s: %s", (int)p->pid, name,
				  strerror(-r));
	} else {
		shim_note("process %d: out of memory for its record", (int)p->pid);
	}
	p->state = PROC_ENDED;
	p->end_seq = ++s->end_seq;
	p->output_pending = false;
	s->running--;
	s->ended++;
	retain(s); /* first: a watcher told of the exit sees the files as they stay */
	if (p->record)
		conn_notify_exit(s, p);
}

static void maybe_finish(struct shim *s, struct proc *p)
{
	if (p->state == PROC_EXITED && p->out.src.fd < 0 && p->err.src.fd < 0)
		finish(s, p);
}

void proc_on_pipe(struct shim *s, struct proc_stream *st)
{
	struct proc *p = st->src.owner;
	if (pump(s, p, st) == PUMP_END)
		maybe_finish(s, p);
}

/* A process the sandbox took with it, whose exit no one reported. */
static void mark_killed(struct proc *p)
{
	p->status = SIGKILL; /* a wait status: killed by SIGKILL */
	p->state = PROC_EXITED;
	p->ended_at = wall_clock_ms();
	p->duration_ms = (shim_now_ns() - p->start_ns) / NS_PER_MS;
}

static void record_exit(struct shim *s, struct proc *p, int status)
{
	uint64_t now = shim_now_ns();
	p->status = status;
	p->state = PROC_EXITED;
	p->ended_at = wall_clock_ms();
	p->duration_ms = (now - p->start_ns) / NS_PER_MS;
	p->drain_until_ns = now + SHIM_DRAIN_GRACE_MS * NS_PER_MS;
	uint64_t oom = 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !p->timed_out && !p->killed &&
	    s->sb && sandbox_oom_kills(s->sb, &oom) == 0 && oom > p->oom_kills_at_start)
		p->oom_killed = true;
	if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
		p->timed_out = false; /* it ended by itself before the kill took */
	pump_all(s, p, &p->out);
	pump_all(s, p, &p->err);
	maybe_finish(s, p);
}

void proc_drain_exits(struct shim *s)
{
	pid_t pid;
	int status;
	while (s->sb && sandbox_next_exit(s->sb, &pid, &status) == 0) {
		struct proc *p = proc_find(s, pid);
		if (p && p->state == PROC_RUNNING)
			record_exit(s, p, status);
	}
}

static void stream_init(struct proc_stream *st, struct proc *p)
{
	*st = (struct proc_stream){.src = {.kind = SOURCE_PIPE, .fd = -1, .owner = p}, .file = -1};
}

/* A pipe whose read end is ours (non-blocking) and write end the child's. */
static int make_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		int r = -errno;
		CLOSE_FD(fds[0]);
		CLOSE_FD(fds[1]);
		return r;
	}
	return 0;
}

/* The record and files of pid, if it names a process we had: the pid is used again. */
static void forget_pid(struct shim *s, pid_t pid)
{
	struct proc *old = proc_find(s, pid);
	if (!old)
		return;
	if (old->state != PROC_ENDED) {
		if (old->state == PROC_RUNNING) /* its exit was lost: it cannot run on */
			mark_killed(old);
		finish(s, old);
	}
	forget_files(s, old);
	drop(s, old);
}

static int add_proc(struct shim *s, const struct proc_exec *req, pid_t pid, int out_r, int err_r,
		    uint64_t oom, struct proc **ret, struct error *err)
{
	struct proc *p = calloc(1, sizeof(*p));
	if (!p) {
		close(out_r);
		close(err_r);
		return error_set(err, ENOMEM, "out of memory");
	}
	stream_init(&p->out, p);
	stream_init(&p->err, p);
	p->out.src.fd = out_r;
	p->err.src.fd = err_r;
	p->pid = pid;
	p->command = json_incref(req->command);
	p->state = PROC_RUNNING;
	p->oom_kills_at_start = oom;
	p->started_at = wall_clock_ms();
	p->start_ns = shim_now_ns();
	p->deadline_ns = req->timeout_ms ? p->start_ns + req->timeout_ms * NS_PER_MS : 0;
	int r = 0;
	if ((p->out.file = open_output(s, pid, LAYOUT_PROC_OUT)) < 0)
		r = p->out.file;
	else if ((p->err.file = open_output(s, pid, LAYOUT_PROC_ERR)) < 0)
		r = p->err.file;
	/* a terminal's output goes to whoever holds its master: no pipes to watch */
	if (r == 0 && out_r >= 0 && (r = shim_watch(s, &p->out.src, EPOLLIN)) == 0)
		r = shim_watch(s, &p->err.src, EPOLLIN);
	if (r < 0) {
		p->out.file = p->out.file < 0 ? -1 : p->out.file;
		p->err.file = p->err.file < 0 ? -1 : p->err.file;
		proc_free(s, p); /* unwatches what it watched */
		remove_files(s, pid);
		return error_set_errno(err, -r, "cannot keep the output of process %d", (int)pid);
	}
	p->prev = s->procs_tail;
	if (s->procs_tail)
		s->procs_tail->next = p;
	else
		s->procs = p;
	s->procs_tail = p;
	s->running++;
	*ret = p;
	return 0;
}

/* A process on a terminal: its master goes to the caller, nothing to drain here. */
static int proc_exec_tty(struct shim *s, const struct proc_exec *req, struct proc **ret,
			 int *ret_master, struct error *err)
{
	proc_drain_exits(s);
	uint64_t oom = 0;
	(void)sandbox_oom_kills(s->sb, &oom);
	struct serve_spawn spawn = {.argv = req->argv, .envp = req->envp, .cwd = req->cwd};
	pid_t pid = 0;
	_cleanup_close_ int master = -1;
	int r = sandbox_spawn_tty(s->sb, &spawn, req->rows, req->cols, &pid, &master, err);
	if (r < 0)
		return r;
	forget_pid(s, pid);
	if ((r = add_proc(s, req, pid, -1, -1, oom, ret, err)) < 0) {
		struct error ignored = {0};
		(void)sandbox_signal(s->sb, pid, SIGKILL, &ignored);
		return r;
	}
	*ret_master = TAKE_FD(master);
	return 0;
}

int proc_exec(struct shim *s, const struct proc_exec *req, struct proc **ret, int *ret_master,
	      struct error *err)
{
	if (req->tty)
		return proc_exec_tty(s, req, ret, ret_master, err);
	int out[2] = {-1, -1}, errp[2] = {-1, -1};
	int r = make_pipe(out);
	if (r == 0 && (r = make_pipe(errp)) < 0) {
		CLOSE_FD(out[0]);
		CLOSE_FD(out[1]);
	}
	if (r < 0)
		return error_set_errno(err, -r, "cannot make the output pipes");
	/* exits reported until now belong to processes started before this one */
	proc_drain_exits(s);
	uint64_t oom = 0;
	(void)sandbox_oom_kills(s->sb, &oom);
	struct serve_spawn spawn = {
	    .argv = req->argv,
	    .envp = req->envp,
	    .cwd = req->cwd,
	    .stdin_fd = req->stdin_fd,
	    .stdout_fd = out[1],
	    .stderr_fd = errp[1],
	};
	pid_t pid = 0;
	r = sandbox_spawn(s->sb, &spawn, &pid, err);
	CLOSE_FD(out[1]);
	CLOSE_FD(errp[1]);
	if (r < 0) {
		CLOSE_FD(out[0]);
		CLOSE_FD(errp[0]);
		return r;
	}
	forget_pid(s, pid);
	r = add_proc(s, req, pid, out[0], errp[0], oom, ret, err);
	if (r < 0) {
		struct error ignored = {0};
		(void)sandbox_signal(s->sb, pid, SIGKILL, &ignored);
	}
	return r;
}

void proc_tick(struct shim *s, uint64_t now)
{
	for (struct proc *p = s->procs; p; p = p->next) {
		if (p->state == PROC_RUNNING && p->deadline_ns && now >= p->deadline_ns &&
		    !p->timed_out && !s->paused && !s->end_reason && s->sb) {
			struct error err = {0};
			p->timed_out = true;
			if (sandbox_signal(s->sb, p->pid, SIGKILL, &err) < 0 && err.code != ESRCH)
				shim_note("process %d: cannot kill it at its timeout: %s",
					  (int)p->pid, err.msg);
		}
		if (p->output_pending && now >= p->last_notice_ns + SHIM_NOTICE_MS * NS_PER_MS) {
			p->output_pending = false;
			p->last_notice_ns = now;
			conn_notify_output(s, p->pid);
		}
	}
	/* finish() may drop ended records: walk again from the start each time */
	for (bool again = true; again;) {
		again = false;
		for (struct proc *p = s->procs; p; p = p->next) {
			if (p->state == PROC_EXITED && now >= p->drain_until_ns) {
				pump_all(s, p, &p->out);
				pump_all(s, p, &p->err);
				finish(s, p);
				again = true;
				break;
			}
		}
	}
}

uint64_t proc_next_deadline(const struct shim *s)
{
	uint64_t next = 0;
	for (const struct proc *p = s->procs; p; p = p->next) {
		uint64_t t = 0;
		if (p->state == PROC_RUNNING && p->deadline_ns && !p->timed_out && !s->paused)
			t = p->deadline_ns;
		else if (p->state == PROC_EXITED)
			t = p->drain_until_ns;
		if (t && (!next || t < next))
			next = t;
		if (p->output_pending) {
			t = p->last_notice_ns + SHIM_NOTICE_MS * NS_PER_MS;
			if (!next || t < next)
				next = t;
		}
	}
	return next;
}

void proc_end_all(struct shim *s)
{
	for (bool again = true; again;) {
		again = false;
		for (struct proc *p = s->procs; p; p = p->next) {
			if (p->state == PROC_ENDED)
				continue;
			/* the sandbox is gone, and every writer with it: this reads to the end */
			pump_all(s, p, &p->out);
			pump_all(s, p, &p->err);
			if (p->state == PROC_RUNNING)
				mark_killed(p);
			finish(s, p);
			again = true;
			break;
		}
	}
}

/*
 * The command for a listing: whole arguments while they fit about
 * SHIM_COMMAND_BRIEF bytes of JSON, then the start of the next one (cut
 * between UTF-8 characters).
 */
static json_t *command_brief(const json_t *cmd, bool *ret_cut)
{
	json_t *out = json_array();
	size_t budget = SHIM_COMMAND_BRIEF;
	*ret_cut = false;
	size_t i;
	json_t *arg;
	json_array_foreach(cmd, i, arg)
	{
		const unsigned char *a = (const unsigned char *)json_string_value(arg);
		size_t len = json_string_length(arg), cost = 3, fit = 0;
		for (; fit < len; fit++) {
			size_t c = a[fit] < 0x20 ? 6 : a[fit] == '"' || a[fit] == '\\' ? 2 : 1;
			if (cost + c > budget)
				break;
			cost += c;
		}
		if (fit < len) {
			while (fit > 0 && (a[fit] & 0xc0) == 0x80)
				fit--;
			*ret_cut = true;
		}
		if (fit > 0 || len == 0)
			json_array_append_new(out, json_stringn((const char *)a, fit));
		if (*ret_cut)
			break;
		budget -= cost;
	}
	return out;
}

static json_t *record_field(const struct proc *p, const char *key)
{
	json_t *v = json_object_get(p->record, key);
	return v ? json_incref(v) : json_null();
}

json_t *proc_summary(const struct proc *p)
{
	bool cut;
	json_t *j =
	    json_pack("{s:i, s:o, s:b, s:o, s:o, s:I, s:o}", "pid", (int)p->pid, "command",
		      command_brief(p->command, &cut), "running", p->state != PROC_ENDED,
		      "exit_code", record_field(p, "exit_code"), "signal",
		      record_field(p, "signal"), "started_at", (json_int_t)p->started_at,
		      "ended_at", p->state == PROC_ENDED ? json_integer(p->ended_at) : json_null());
	if (j && cut)
		json_object_set_new(j, "command_truncated", json_true());
	return j;
}

char *proc_exit_message(const struct proc *p)
{
	_cleanup_json_ json_t *m = json_pack("{s:s}", "type", "exit");
	if (!m || json_object_update(m, p->record) < 0)
		return NULL;
	char *text = json_dumps(m, JSON_COMPACT);
	if (text && strlen(text) > SHIM_MSG_MAX) {
		bool cut;
		free(text);
		json_object_set_new(m, "command", command_brief(p->command, &cut));
		json_object_set_new(m, "command_truncated", json_true());
		text = json_dumps(m, JSON_COMPACT);
	}
	return text;
}
