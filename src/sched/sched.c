#include "sched/sched.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/spawn.h"
#include "core/layout.h"
#include "core/limits.h"
#include "core/task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* fd number of the attempt lock in a freshly spawned supervisor */
#define SUPERVISOR_LOCK_FD 3
_Static_assert(SUPERVISOR_LOCK_FD == 3, "spawn_helper() hands the first fd over as 3");
/* how much of an events journal one step imports at most: every step is
 * bounded, so one busy task never holds up the others or the queue */
#define IMPORT_CHUNK	 (1u << 20)
#define IMPORT_LINES_MAX 2000

/* What a task holds of the host and of its tenant's quotas (cfg.admit). */
struct held {
	bool admitted;
	char tenant[TENANT_NAME_SIZE];
	struct quota amounts;
};

struct running {
	char id[TASK_ID_SIZE];
	uint32_t attempt;
	int lock_fd;	   /* <attempt>/lock: held by the supervisor while it lives */
	uint64_t offset;   /* bytes of the events journal consumed */
	uint64_t imported; /* progress lines of this attempt in the store */
	uint64_t refused;  /* lines the store would not take (logged at the end) */
	bool cancel_sent;
	struct held held; /* admitted (cfg.admit) until it ends */
};

struct sched {
	struct sched_config cfg;
	struct store *st;
	struct running *run;
	size_t nrun, cap;
};

/* <state>/tasks/<id>/attempt-<N>/<name> into buf[PATH_MAX]: 0 or -ENAMETOOLONG. */
static int attempt_file(const struct sched *s, const char *id, uint32_t attempt, const char *name,
			char buf[static PATH_MAX])
{
	return layout_attempt_file(buf, PATH_MAX, s->cfg.state_dir, id, attempt, name);
}

static int64_t now_ms(const struct sched *s)
{
	return s->cfg.now_ms ? s->cfg.now_ms(s->cfg.data) : wall_clock_ms();
}

/* Tell cfg.log, if any: the caller's program prints it, or not. */
__attribute__((format(printf, 2, 3))) static void say(const struct sched *s, const char *fmt, ...)
{
	if (!s->cfg.log)
		return;
	char msg[ERROR_MSG_MAX + 128]; /* a task id and an error message fit */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->cfg.log(s->cfg.data, msg);
}

int sched_new(const struct sched_config *cfg, struct store *st, struct sched **ret,
	      struct error *err)
{
	if (cfg->max_running < 1 || cfg->max_running > SCHED_MAX_RUNNING_MAX)
		return error_set(err, EINVAL, "max running tasks must be between 1 and %d",
				 SCHED_MAX_RUNNING_MAX);
	struct sched *s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->st = st;
	*ret = s;
	return 0;
}

struct sched *sched_free(struct sched *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->nrun; i++)
		CLOSE_FD(s->run[i].lock_fd);
	free(s->run);
	free(s);
	return NULL;
}

unsigned sched_running(const struct sched *s)
{
	return (unsigned)s->nrun;
}

static struct running *track(struct sched *s, const char *id, uint32_t attempt, int lock_fd)
{
	if (s->nrun == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct running *n = realloc(s->run, cap * sizeof(*n));
		if (!n)
			return NULL;
		s->run = n;
		s->cap = cap;
	}
	struct running *r = &s->run[s->nrun++];
	*r = (struct running){.attempt = attempt, .lock_fd = lock_fd};
	snprintf(r->id, sizeof(r->id), "%s", id);
	return r;
}

static void untrack(struct sched *s, struct running *r)
{
	CLOSE_FD(r->lock_fd);
	*r = s->run[--s->nrun];
}

static void release_held(struct sched *s, struct held *h)
{
	if (h->admitted && s->cfg.release)
		s->cfg.release(s->cfg.data, h->tenant, &h->amounts);
	h->admitted = false;
}

/* Count t, which runs already, whatever the totals. */
static void admit_running(struct sched *s, const struct task *t, struct held *h)
{
	enum quota_id over;
	*h = (struct held){0};
	snprintf(h->tenant, sizeof(h->tenant), "%s", t->tenant);
	h->admitted = s->cfg.admit && s->cfg.admit(s->cfg.data, t->tenant, NULL, t->spec_json, true,
						   &h->amounts, &over) == 0;
}

/* Is the supervisor of r alive? Its lock answers, whatever became of its pid. */
static bool supervisor_is_alive(struct running *r)
{
	if (r->lock_fd < 0)
		return false;
	if (flock(r->lock_fd, LOCK_EX | LOCK_NB) == 0) {
		flock(r->lock_fd, LOCK_UN);
		return false;
	}
	return errno == EWOULDBLOCK;
}

struct count_ctx {
	uint32_t attempt;
	uint64_t n;
	int64_t last;
};

static int count_progress(const struct task_event *ev, void *data)
{
	struct count_ctx *c = data;
	/* the journal numbers both kinds of its lines in one sequence */
	if ((ev->type == TASK_EVENT_PROGRESS || ev->type == TASK_EVENT_EGRESS_DENIED) &&
	    ev->attempt == c->attempt)
		c->n++;
	c->last = ev->seq;
	return 0;
}

/* How many journal lines (progress, egress_denied) of this attempt the store holds already. */
static int count_imported(struct sched *s, struct running *r, struct error *err)
{
	struct count_ctx c = {.attempt = r->attempt};
	for (;;) {
		int64_t before = c.last;
		int rr = store_events_list(s->st, r->id, c.last, STORE_LIST_MAX, count_progress, &c,
					   err);
		if (rr < 0)
			return rr;
		if (c.last == before)
			break;
	}
	r->imported = c.n;
	return 0;
}

/*
 * Import the durable, complete lines of r's events journal, at most
 * IMPORT_CHUNK bytes of them. Returns 1 when it has caught up with the
 * durable length, 0 when more is left, or -errno.
 */
static int import_events(struct sched *s, struct running *r, struct error *err)
{
	char path[PATH_MAX];
	uint64_t durable;
	if (attempt_file(s, r->id, r->attempt, LAYOUT_EVENTS_LEN, path) < 0 ||
	    read_u64_at(AT_FDCWD, path, &durable) < 0 || durable <= r->offset)
		return 1;
	bool last = durable - r->offset <= IMPORT_CHUNK;
	if (!last)
		durable = r->offset + IMPORT_CHUNK;
	if (attempt_file(s, r->id, r->attempt, LAYOUT_EVENTS, path) < 0)
		return 1;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 1;
	size_t len = (size_t)(durable - r->offset);
	_cleanup_free_ char *buf = malloc(len + 1);
	if (!buf)
		return error_set(err, ENOMEM, "out of memory");
	ssize_t n = pread(fd, buf, len, (off_t)r->offset);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	int rr = store_tx_begin(s->st, err);
	if (rr < 0)
		return rr;
	char *line = buf, *nl;
	uint64_t consumed = 0, imported = r->imported;
	unsigned lines = 0;
	while (lines++ < IMPORT_LINES_MAX && (nl = strchr(line, '\n'))) {
		*nl = '\0';
		json_t *rec = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
		json_int_t no = json_integer_value(json_object_get(rec, "line"));
		json_int_t t = json_integer_value(json_object_get(rec, "time"));
		json_t *data = json_object_get(rec, "data");
		if (rec && json_is_object(data) && (uint64_t)no > imported) {
			_cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);
			const char *type = json_string_value(json_object_get(rec, "type"));
			bool egress = type && strcmp(type, "egress_denied") == 0;
			rr = !text    ? -ENOMEM
			     : egress ? store_egress_denied_append(s->st, r->id, r->attempt, text,
								   t, err)
				      : store_progress_append(s->st, r->id, r->attempt, text, t,
							      NULL, err);
			/* refused for good (the merged progress would pass its cap): the
			 * line is dropped, its savepoint undone, the import goes on */
			if (rr == -E2BIG || rr == -EINVAL) {
				r->refused++;
				rr = 0;
			}
			if (rr == 0)
				imported = (uint64_t)no;
		}
		json_decref(rec);
		if (rr < 0)
			break;
		consumed += (uint64_t)(nl - line) + 1;
		line = nl + 1;
	}
	if (rr < 0) {
		store_tx_rollback(s->st);
		return rr;
	}
	if ((rr = store_tx_commit(s->st, err)) < 0)
		return rr;
	r->offset += consumed;
	r->imported = imported;
	return last && r->offset == durable ? 1 : 0;
}

/*
 * End an attempt in the store; when that ends the task, its secret values
 * (core/layout.h's LAYOUT_SECRETS) and its inputs go: no later attempt
 * needs them.
 */
static int end_attempt(struct sched *s, const char *id, uint32_t attempt, enum task_status end,
		       int exit_code, const char *error, struct error *err)
{
	enum task_status status = TASK_RUNNING;
	int r = store_task_end_attempt(s->st, id, attempt, end, exit_code, error, now_ms(s),
				       &status, err);
	if (r == 0 && task_status_is_final(status)) {
		layout_secrets_forget(s->cfg.state_dir, id, false);
		layout_inputs_forget(s->cfg.state_dir, id);
	}
	return r;
}

/* Read result.json of r's attempt: -ENOENT while the attempt has not ended. */
static int read_result(struct sched *s, struct running *r, enum task_status *end, int *exit_code,
		       char **error)
{
	char path[PATH_MAX];
	if (attempt_file(s, r->id, r->attempt, LAYOUT_RESULT, path) < 0)
		return -EINVAL;
	json_t *j = json_load_file(path, 0, NULL);
	if (!j)
		return access(path, F_OK) == 0 ? -EINVAL : -ENOENT;
	const char *e = json_string_value(json_object_get(j, "end"));
	json_t *code = json_object_get(j, "exit_code");
	const char *msg = json_string_value(json_object_get(j, "error"));
	int r2 = e ? task_status_parse(e, end) : -EINVAL;
	if (r2 == 0 && !task_status_is_final(*end))
		r2 = -EINVAL;
	*exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	*error = msg ? strdup(msg) : NULL;
	json_decref(j);
	return r2;
}

/*
 * The attempt of r ended (its supervisor is gone): record how, once every
 * durable line of its journal is in the store. -EAGAIN while lines are
 * left: the next step goes on with them (bounded work per step).
 */
static int finish(struct sched *s, struct running *r, struct error *err)
{
	int rr = import_events(s, r, err);
	if (rr == 0)
		return -EAGAIN;
	if (rr < 0)
		return rr;
	if (r->refused)
		say(s, "%s: %" PRIu64 " progress lines refused by the store", r->id, r->refused);
	enum task_status end;
	int exit_code = -1;
	_cleanup_free_ char *error = NULL;
	rr = read_result(s, r, &end, &exit_code, &error);
	if (rr < 0) {
		end = TASK_LOST;
		exit_code = -1;
		free(error);
		error = strdup(rr == -ENOENT ? "the supervisor ended without a result"
					     : "the attempt's result.json is unreadable");
	}
	rr = end_attempt(s, r->id, r->attempt, end, exit_code, error, err);
	if (rr == -ESTALE)
		rr = 0; /* recorded already, by an earlier run of ours */
	return rr;
}

/*
 * A pidfd of r's supervisor, or -1. The pid comes from its "supervisor"
 * file and is trusted only if the process behind it started when that
 * file says: a pid the kernel handed to someone else is never signalled.
 */
static int supervisor_pidfd(struct sched *s, struct running *r)
{
	char path[PATH_MAX], text[64];
	int pid = 0;
	unsigned long long want = 0, have = 0;
	if (attempt_file(s, r->id, r->attempt, LAYOUT_SUPERVISOR_PID, path) < 0 ||
	    read_file_at(AT_FDCWD, path, text, sizeof(text)) <= 0 ||
	    sscanf(text, "%d %llu", &pid, &want) != 2 || pid <= 0)
		return -1;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -1;
	/* checked after the pidfd is held: it keeps naming this very process */
	if (proc_start_time(pid, &have) < 0 || have != want) {
		close(fd);
		return -1;
	}
	return fd;
}

static void cancel_if_asked(struct sched *s, struct running *r)
{
	if (r->cancel_sent)
		return;
	struct task t = {0};
	struct error err = {0};
	if (store_task_get(s->st, r->id, &t, &err) < 0)
		return;
	bool asked = t.cancel_requested;
	task_release(&t);
	if (!asked || !supervisor_is_alive(r))
		return;
	_cleanup_close_ int pidfd = supervisor_pidfd(s, r);
	if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == 0)
		r->cancel_sent = true;
}

static int write_attempt_json(const struct sched *s, const char *path, const struct task *t)
{
	json_t *spec = json_loads(t->spec_json, 0, NULL);
	json_t *egress = json_loads(s->cfg.egress_json ? s->cfg.egress_json : "{}", 0, NULL);
	if (!spec || !egress) {
		json_decref(spec);
		json_decref(egress);
		return -EINVAL;
	}
	/* "o" steals both references, on failure too */
	json_t *root = json_pack("{s:s, s:I, s:o, s:o}", "task_id", t->id, "attempt",
				 (json_int_t)t->attempt, "spec", spec, "egress", egress);
	if (!root)
		return -EINVAL;
	_cleanup_free_ char *text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	return r;
}

static int spawn_real(const char *supervisor_path, const char *attempt_dir, int lock_fd)
{
	pid_t pid;
	return spawn_helper(supervisor_path, attempt_dir, &lock_fd, 1, &pid);
}

/*
 * Start the supervisor of t's new attempt. We take the attempt's lock and
 * hand that very open file to the supervisor as fd 3, then let go of ours:
 * from the first instant, the lock is held exactly while it lives.
 */
/* Start t's attempt, which holds *held (admitted): on failure, the caller gives it back. */
static int start_attempt(struct sched *s, const struct task *t, const struct held *held,
			 struct error *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	json_t *spec = t->spec_json ? json_loads(t->spec_json, 0, NULL) : NULL;
	bool networked = json_object_get(spec, "network") != NULL;
	json_decref(spec);
	int r = 0;
	if (networked && !s->cfg.network_ready)
		return error_set(err, EOPNOTSUPP, "this daemon gives tasks no network");
	if (networked && (r = s->cfg.network_ready(s->cfg.data, err)) < 0)
		return r;
	r = layout_attempt_dir(dir, sizeof(dir), s->cfg.state_dir, t->id, t->attempt);
	if (r < 0 || (r = mkdir_p_at(AT_FDCWD, dir, 0700)) < 0)
		return error_set_errno(err, -r, "%s", dir);
	if ((r = attempt_file(s, t->id, t->attempt, LAYOUT_ATTEMPT_JSON, path)) < 0 ||
	    (r = write_attempt_json(s, path, t)) < 0)
		return error_set_errno(err, -r, "%s", path);
	if ((r = attempt_file(s, t->id, t->attempt, LAYOUT_LOCK, path)) < 0)
		return error_set_errno(err, -r, "%s", path);
	_cleanup_close_ int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		return error_set_errno(err, errno, "%s", path);
	/* a second open, to probe the lock without sharing it; made before the
	 * spawn, so a supervisor never runs that we could not watch */
	_cleanup_close_ int probe = open(path, O_RDWR | O_CLOEXEC);
	if (probe < 0)
		return error_set_errno(err, errno, "%s", path);
	struct running *tracked = track(s, t->id, t->attempt, -1);
	if (!tracked)
		return error_set(err, ENOMEM, "out of memory");
	/* born with the cancel signals blocked: a cancel sent before the
	 * supervisor is ready waits for it, and is recorded as a cancel */
	r = s->cfg.spawn ? s->cfg.spawn(s->cfg.data, s->cfg.supervisor_path, dir, lock)
			 : spawn_real(s->cfg.supervisor_path, dir, lock);
	if (r < 0) {
		untrack(s, tracked);
		return error_set_errno(err, -r, "cannot start %s", s->cfg.supervisor_path);
	}
	tracked->lock_fd = TAKE_FD(probe);
	tracked->held = *held;
	return 0;
}

static void reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

struct fit {
	struct sched *s;
	struct held held; /* admitted, once fits() said yes */
};

/*
 * May the next queued task start now, with the memory the host has left
 * and within its tenant's quotas? 0, -EAGAIN (the host), -EXFULL (the
 * tenant: fit->held.tenant says which).
 */
static int fits(const struct task *t, void *data, struct error *err)
{
	struct fit *f = data;
	struct sched *s = f->s;
	struct quota limit;
	snprintf(f->held.tenant, sizeof(f->held.tenant), "%s", t->tenant);
	if (!s->cfg.admit)
		return 0;
	bool limited = s->cfg.limits && s->cfg.limits(s->cfg.data, s->st, t->tenant, &limit) == 0;
	enum quota_id over = QUOTA_COUNT;
	int r = s->cfg.admit(s->cfg.data, t->tenant, limited ? &limit : NULL, t->spec_json, false,
			     &f->held.amounts, &over);
	if (r == -EXFULL)
		return error_set(err, EXFULL, "tenant %s is at its quota %s", t->tenant,
				 quota_name(over));
	if (r < 0)
		return error_set(err, -r, "task %s does not fit now", t->id);
	f->held.admitted = true;
	return 0;
}

/* The tenants at a quota in one claim_and_start(): their tasks wait, the others' go on. */
struct skipped {
	char (*names)[TENANT_NAME_SIZE];
	const char **ptrs;
	size_t n;
};

static int skip_tenant(struct skipped *k, const char *tenant)
{
	if (k->n >= STORE_CLAIM_SKIP_MAX)
		return -E2BIG;
	void *a = realloc(k->names, (k->n + 1) * sizeof(*k->names));
	if (a)
		k->names = a;
	void *b = realloc(k->ptrs, (k->n + 1) * sizeof(*k->ptrs));
	if (b)
		k->ptrs = b;
	if (!a || !b)
		return -ENOMEM;
	snprintf(k->names[k->n], TENANT_NAME_SIZE, "%s", tenant);
	k->n++;
	for (size_t i = 0; i < k->n; i++) /* realloc may have moved them */
		k->ptrs[i] = k->names[i];
	return 0;
}

static int claim_and_start(struct sched *s, struct error *err)
{
	struct skipped k = {0};
	int r = 0;
	while (s->nrun < s->cfg.max_running) {
		struct task t = {0};
		struct fit fit = {.s = s};
		r = store_task_claim_if(s->st, now_ms(s), k.ptrs, k.n, fits, &fit, &t, err);
		if (r < 0)
			release_held(s, &fit.held);
		if (r == -EXFULL && skip_tenant(&k, fit.held.tenant) == 0) {
			r = 0;
			continue;
		}
		if (r == -ENOENT || r == -EAGAIN || r == -EXFULL) {
			r = 0; /* none queued; the first waits for room */
			break;
		}
		if (r < 0)
			break;
		struct error serr = {0};
		if (start_attempt(s, &t, &fit.held, &serr) < 0) {
			release_held(s, &fit.held);
			/* this attempt never ran: it is lost, and retried if the task allows */
			(void)end_attempt(s, t.id, t.attempt, TASK_LOST, -1, serr.msg, err);
		}
		task_release(&t);
	}
	free(k.names);
	free(k.ptrs);
	return r;
}

int sched_step(struct sched *s, struct error *err)
{
	reap_children();
	for (size_t i = 0; i < s->nrun;) {
		struct running *r = &s->run[i];
		struct error terr = {0};
		bool alive = supervisor_is_alive(r);
		if (alive)
			(void)import_events(s, r, &terr);
		if (!alive) {
			int rr = finish(s, r, &terr);
			if (rr < 0) {
				/* again next step; the others and the queue go on meanwhile */
				if (rr != -EAGAIN)
					say(s, "%s: %s", r->id, terr.msg);
				i++;
				continue;
			}
			release_held(s, &r->held);
			untrack(s, r);
			continue;
		}
		cancel_if_asked(s, r);
		i++;
	}
	return claim_and_start(s, err);
}

static int recover_one(const struct task *t, void *data)
{
	struct sched *s = data;
	char path[PATH_MAX];
	int probe = attempt_file(s, t->id, t->attempt, LAYOUT_LOCK, path) < 0
			? -1
			: open(path, O_RDWR | O_CLOEXEC);
	struct running *r = track(s, t->id, t->attempt, probe);
	if (!r) {
		if (probe >= 0)
			close(probe);
		return -ENOMEM;
	}
	admit_running(s, t, &r->held); /* it runs already: counted whatever the totals */
	return 0;
}

/*
 * Did r's attempt never start? Its claim is in the store, but no
 * supervisor holds the lock and none ever wrote its pid file or a result:
 * the daemon stopped between the claim and the spawn. The task did not
 * run, so the attempt is not lost; it is started now.
 */
static bool never_started(struct sched *s, struct running *r)
{
	if (supervisor_is_alive(r))
		return false;
	char path[PATH_MAX];
	if (attempt_file(s, r->id, r->attempt, LAYOUT_SUPERVISOR_PID, path) < 0 ||
	    access(path, F_OK) == 0 || errno != ENOENT)
		return false;
	if (attempt_file(s, r->id, r->attempt, LAYOUT_RESULT, path) < 0)
		return false;
	return access(path, F_OK) < 0 && errno == ENOENT;
}

static int restart_unstarted(struct sched *s, struct error *err)
{
	size_t n = 0;
	_cleanup_free_ char(*ids)[TASK_ID_SIZE] = calloc(s->nrun + 1, sizeof(*ids));
	if (!ids)
		return error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < s->nrun;) {
		if (!never_started(s, &s->run[i])) {
			i++;
			continue;
		}
		memcpy(ids[n++], s->run[i].id, TASK_ID_SIZE);
		release_held(s, &s->run[i].held); /* admitted again as it starts */
		untrack(s, &s->run[i]);
	}
	for (size_t i = 0; i < n; i++) {
		struct task t = {0};
		struct error serr = {0};
		int r = store_task_get(s->st, ids[i], &t, &serr);
		if (r == 0 && t.status == TASK_RUNNING) {
			say(s, "%s: attempt %" PRIu32 " was claimed but never started; starting it",
			    t.id, t.attempt);
			struct held held;
			admit_running(s, &t, &held);
			if (start_attempt(s, &t, &held, &serr) < 0) {
				release_held(s, &held);
				(void)end_attempt(s, t.id, t.attempt, TASK_LOST, -1, serr.msg,
						  &serr);
			}
		}
		task_release(&t);
	}
	return 0;
}

/*
 * The secrets' files that outlived their task: a daemon that died after a
 * task's end was stored and before its file went, or between the API's
 * writing one and storing its task (no task then: its directory goes too).
 */
static void sweep_secrets(struct sched *s)
{
	char dir[PATH_MAX];
	if (layout_state_file(dir, sizeof(dir), s->cfg.state_dir, LAYOUT_TASKS) < 0)
		return;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[PATH_MAX + 2 * NAME_MAX];
		struct task t = {0};
		struct error ignored = {0};
		if (de->d_name[0] == '.' || strlen(de->d_name) >= TASK_ID_SIZE)
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", dir, de->d_name, LAYOUT_SECRETS);
		if (access(path, F_OK) < 0)
			continue;
		int r = store_task_get(s->st, de->d_name, &t, &ignored);
		if (r == -ENOENT || (r == 0 && task_status_is_final(t.status)))
			layout_secrets_forget(s->cfg.state_dir, de->d_name, r == -ENOENT);
		task_release(&t);
	}
	if (d)
		closedir(d);
}

int sched_recover(struct sched *s, struct error *err)
{
	sweep_secrets(s);
	char after[TASK_ID_SIZE] = "";
	for (;;) {
		size_t before = s->nrun;
		struct task_filter f = {.statuses = TASK_STATUS_BIT(TASK_RUNNING),
					.after_id = after[0] ? after : NULL,
					.limit = STORE_LIST_MAX};
		int r = store_task_list(s->st, &f, recover_one, s, err);
		if (r < 0)
			return r;
		if (s->nrun - before < STORE_LIST_MAX)
			break;
		snprintf(after, sizeof(after), "%s", s->run[s->nrun - 1].id);
	}
	int r;
	if ((r = restart_unstarted(s, err)) < 0)
		return r;
	for (size_t i = 0; i < s->nrun; i++)
		if ((r = count_imported(s, &s->run[i], err)) < 0)
			return r;
	return 0;
}
