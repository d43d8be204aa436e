/*
 * fleet.c - the daemon's interactive sandboxes (fleet.h): shims started
 * and found again, the warm pool, and the keeper that records ends.
 */
#include "daemon/fleet.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "runtime/spec.h"
#include "shim/client.h"
#include "shim/protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A sandbox whose shim we watch. */
struct member {
	char id[SANDBOX_ID_SIZE];
	int lock_fd; /* a second open of <dir>/lock: free once the shim is gone */
	bool pooled; /* in the pool, not handed out yet */
	bool ending; /* a delete is waiting for it: the keeper leaves it alone */
};

struct fleet {
	struct fleet_config cfg;
	char default_spec[512]; /* the canonical spec of the default limits */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a member went away */
	struct member *m;
	size_t n, cap;
	pthread_t keeper;
	bool keeper_started;
	volatile int stopping;
};

unsigned fleet_pool_default(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = (unsigned)(cpus > 0 ? cpus : 1) * FLEET_POOL_PER_CPU;
	return n > FLEET_POOL_MAX ? FLEET_POOL_MAX : n;
}

void fleet_dir(const struct fleet *f, const char *id, char *buf, size_t size)
{
	snprintf(buf, size, "%s/sandboxes/%s", f->cfg.state_dir, id);
}

int fleet_new(const struct fleet_config *cfg, struct fleet **ret, struct error *err)
{
	struct fleet *f = calloc(1, sizeof(*f));
	if (!f)
		return error_set(err, ENOMEM, "out of memory");
	f->cfg = *cfg;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->changed, NULL);
	struct sandbox_request def = {0};
	struct api_error e = {0};
	if (sandbox_request_parse("{}", 2, &def, &e) < 0) {
		free(f);
		return error_set(err, EINVAL, "the default sandbox spec: %s", e.message);
	}
	snprintf(f->default_spec, sizeof(f->default_spec), "%s", def.spec_json);
	sandbox_request_release(&def);
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sandboxes", cfg->state_dir);
	int r = mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r < 0) {
		free(f);
		return error_set_errno(err, -r, "%s", dir);
	}
	*ret = f;
	return 0;
}

/* ---- members ----------------------------------------------------------- */

static int add_member(struct fleet *f, const char *id, int lock_fd, bool pooled)
{
	pthread_mutex_lock(&f->lock);
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 32;
		struct member *m = realloc(f->m, cap * sizeof(*m));
		if (!m) {
			pthread_mutex_unlock(&f->lock);
			return -ENOMEM;
		}
		f->m = m;
		f->cap = cap;
	}
	struct member *m = &f->m[f->n++];
	*m = (struct member){.lock_fd = lock_fd, .pooled = pooled};
	snprintf(m->id, sizeof(m->id), "%s", id);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* With f->lock held. */
static struct member *find_member(struct fleet *f, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->m[i].id, id) == 0)
			return &f->m[i];
	return NULL;
}

/* With f->lock held. */
static void drop_member(struct fleet *f, struct member *m)
{
	CLOSE_FD(m->lock_fd);
	*m = f->m[--f->n];
	pthread_cond_broadcast(&f->changed);
}

static bool shim_alive(int lock_fd)
{
	if (lock_fd < 0)
		return false;
	if (flock(lock_fd, LOCK_EX | LOCK_NB) == 0) {
		flock(lock_fd, LOCK_UN);
		return false;
	}
	return errno == EWOULDBLOCK;
}

/* ---- starting a shim ----------------------------------------------------- */

static int write_json_file(int dirfd, const char *name, json_t *v)
{
	_cleanup_free_ char *text = json_dumps(v, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	_cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	return r;
}

/* Wait for the shim's ready line on fd: 0, or -EIO with err its message. */
static int wait_ready(int fd, struct error *err)
{
	char line[ERROR_MSG_MAX + 16];
	size_t len = 0;
	int64_t deadline = wall_clock_ms() + FLEET_READY_TIMEOUT_MS;
	while (len < sizeof(line) - 1) {
		int64_t left = deadline - wall_clock_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			return error_set(err, ETIMEDOUT, "the sandbox was not ready within %d ms",
					 FLEET_READY_TIMEOUT_MS);
		ssize_t n = read(fd, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	line[len] = '\0';
	if (strncmp(line, "ok", 2) == 0)
		return 0;
	line[strcspn(line, "\n")] = '\0';
	if (len == 0)
		return error_set(err, EIO, "the sandbox's supervisor ended before it was ready");
	return error_set(err, EIO, "%s", strncmp(line, "error: ", 7) == 0 ? line + 7 : line);
}

/*
 * Start the shim of sandbox id in a new directory, and wait until its
 * sandbox is ready. On success the fleet watches it.
 */
static int start_shim(struct fleet *f, const char *id, const char *spec_json,
		      const char *env_json, int64_t expires_at, bool pooled, struct error *err)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	if (mkdir(dir, 0700) < 0)
		return error_set_errno(err, errno, "%s", dir);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	json_t *spec = json_loads(spec_json, 0, NULL);
	json_t *sj = spec ? json_pack("{s:s, s:I, s:o}", "id", id, "expires_at", (json_int_t)expires_at,
				      "spec", spec)
			  : NULL;
	json_t *env = json_loads(env_json ? env_json : "{}", 0, NULL);
	int r = dfd < 0 ? -errno : (!sj || !env) ? -ENOMEM : 0;
	if (r == 0)
		r = write_json_file(dfd, "sandbox.json", sj);
	if (r == 0)
		r = write_json_file(dfd, "env.json", env);
	json_decref(sj);
	json_decref(env);
	if (r < 0)
		return error_set_errno(err, -r, "%s/sandbox.json", dir);

	_cleanup_close_ int lock = openat(dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		return error_set_errno(err, errno, "%s/lock", dir);
	_cleanup_close_ int probe = openat(dfd, "lock", O_RDWR | O_CLOEXEC);
	int ready[2];
	if (probe < 0 || pipe2(ready, O_CLOEXEC) < 0)
		return error_set_errno(err, errno, "%s", dir);
	_cleanup_close_ int ready_r = ready[0];

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	sigset_t stop, all;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &stop);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, lock, SHIM_LOCK_FD);
	posix_spawn_file_actions_adddup2(&fa, ready[1], SHIM_READY_FD);
	char *argv[] = {(char *)f->cfg.shim_path, dir, NULL};
	pid_t pid;
	r = posix_spawn(&pid, f->cfg.shim_path, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(ready[1]);
	if (r != 0)
		return error_set_errno(err, r, "cannot start %s", f->cfg.shim_path);
	CLOSE_FD(lock); /* the shim holds it now */
	r = wait_ready(ready_r, err);
	/* the shim is our child: reap it when it ends (the keeper does), never block */
	if (r < 0) {
		if (shim_alive(probe))
			kill(pid, SIGKILL); /* still ours: its pid cannot have been reused */
		(void)waitpid(pid, NULL, 0);
		return r;
	}
	if ((r = add_member(f, id, probe, pooled)) < 0)
		return error_set_errno(err, -r, "out of memory");
	probe = -1;
	return 0;
}

/* Remove a sandbox directory (the shim is gone): procs/ and the files. */
static void remove_dir(struct fleet *f, const char *id)
{
	char dir[4200], path[4400];
	fleet_dir(f, id, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/procs", dir);
	DIR *d = opendir(path);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				(void)unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
		rmdir(path);
	}
	d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				(void)unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

/* How the shim said its sandbox ended (end.json), or the reason we infer. */
static void read_end(struct fleet *f, const char *id, char *reason, size_t rsize, char *detail,
		     size_t dsize, int64_t *when)
{
	char path[4400];
	fleet_dir(f, id, path, sizeof(path) - 16);
	strncat(path, "/end.json", sizeof(path) - strlen(path) - 1);
	json_t *j = json_load_file(path, 0, NULL);
	const char *r = json_string_value(json_object_get(j, "reason"));
	const char *d = json_string_value(json_object_get(j, "detail"));
	json_t *t = json_object_get(j, "time");
	if (r && sandbox_end_reason_is_valid(r)) {
		snprintf(reason, rsize, "%s", r);
		snprintf(detail, dsize, "%s", d ? d : "");
		*when = json_is_integer(t) ? json_integer_value(t) : wall_clock_ms();
	} else {
		snprintf(reason, rsize, "failed");
		snprintf(detail, dsize, "its supervisor ended without recording why");
		*when = wall_clock_ms();
	}
	json_decref(j);
}

/* The shim of id is gone: record the end, remove its files. */
static void record_end(struct fleet *f, struct store *st, const char *id, bool pooled)
{
	char reason[32], detail[ERROR_MSG_MAX];
	int64_t when;
	struct error err = {0};
	read_end(f, id, reason, sizeof(reason), detail, sizeof(detail), &when);
	int r = pooled ? store_sandbox_delete(st, id, &err)
		       : store_sandbox_end(st, id, when, reason, detail[0] ? detail : NULL, &err);
	if (r < 0 && r != -ESTALE && r != -ENOENT)
		fprintf(stderr, "agentboxd: sandbox %s: cannot record its end: %s\n", id, err.msg);
	remove_dir(f, id);
}

/* ---- the pool and the keeper ------------------------------------------- */

static int make_pooled(struct fleet *f, struct store *st)
{
	struct sandbox_record s = {.status = SANDBOX_POOLED, .created_at = wall_clock_ms()};
	struct error err = {0};
	if (sandbox_id_new(s.id) < 0)
		return -EIO;
	s.spec_json = f->default_spec;
	s.metadata_json = (char *)"{}";
	int r = store_sandbox_insert(st, &s, &err);
	if (r == 0)
		r = start_shim(f, s.id, f->default_spec, "{}", 0, true, &err);
	if (r < 0) {
		fprintf(stderr, "agentboxd: warm pool: %s\n", err.msg);
		(void)store_sandbox_delete(st, s.id, &err);
		remove_dir(f, s.id);
	}
	return r;
}

static unsigned pooled_count(struct fleet *f)
{
	unsigned n = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n; i++)
		n += f->m[i].pooled;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static void keep(struct fleet *f, struct store *st)
{
	/* shims that are gone */
	for (;;) {
		char id[SANDBOX_ID_SIZE] = "";
		bool pooled = false;
		pthread_mutex_lock(&f->lock);
		for (size_t i = 0; i < f->n; i++) {
			struct member *m = &f->m[i];
			if (!m->ending && !shim_alive(m->lock_fd)) {
				snprintf(id, sizeof(id), "%s", m->id);
				pooled = m->pooled;
				drop_member(f, m);
				break;
			}
		}
		pthread_mutex_unlock(&f->lock);
		if (!id[0])
			break;
		record_end(f, st, id, pooled);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		; /* shims we started, now gone */
	/* the pool, one at a time so ends are seen between */
	if (!f->stopping && pooled_count(f) < f->cfg.pool_size)
		(void)make_pooled(f, st);
}

static void *keeper_main(void *arg)
{
	struct fleet *f = arg;
	struct store *st = NULL;
	struct error err = {0};
	if (store_open_sqlite(f->cfg.db_path, &st, &err) < 0) {
		fprintf(stderr, "agentboxd: sandbox keeper: %s\n", err.msg);
		return NULL;
	}
	while (!f->stopping) {
		keep(f, st);
		if (pooled_count(f) >= f->cfg.pool_size)
			usleep(FLEET_KEEPER_TICK_MS * 1000);
	}
	store_close(st);
	return NULL;
}

int fleet_start(struct fleet *f, struct error *err)
{
	if (pthread_create(&f->keeper, NULL, keeper_main, f) != 0)
		return error_set(err, EAGAIN, "cannot start the sandbox keeper thread");
	f->keeper_started = true;
	return 0;
}

/*
 * The pool is the daemon's own: on a clean stop its sandboxes end (the
 * next start makes new ones). Handed-out sandboxes go on.
 */
static void stop_pool(struct fleet *f)
{
	struct store *st = NULL;
	struct error err = {0};
	if (store_open_sqlite(f->cfg.db_path, &st, &err) < 0)
		return;
	for (size_t i = 0; i < f->n; i++) {
		if (!f->m[i].pooled)
			continue;
		char dir[4200];
		fleet_dir(f, f->m[i].id, dir, sizeof(dir));
		json_t *stop = json_pack("{s:s}", "op", "stop"), *reply = NULL;
		(void)shim_call(dir, stop, -1, 2000, &reply, NULL, &err);
		json_decref(stop);
		json_decref(reply);
	}
	int64_t deadline = wall_clock_ms() + 5000;
	for (size_t i = 0; i < f->n;) {
		struct member *m = &f->m[i];
		if (!m->pooled) {
			i++;
			continue;
		}
		if (shim_alive(m->lock_fd) && wall_clock_ms() < deadline) {
			usleep(2000);
			continue;
		}
		char id[SANDBOX_ID_SIZE];
		snprintf(id, sizeof(id), "%s", m->id);
		bool gone = !shim_alive(m->lock_fd);
		drop_member(f, m);
		if (gone)
			record_end(f, st, id, true);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	store_close(st);
}

void fleet_free(struct fleet *f)
{
	if (!f)
		return;
	f->stopping = 1;
	if (f->keeper_started)
		pthread_join(f->keeper, NULL);
	stop_pool(f);
	for (size_t i = 0; i < f->n; i++)
		CLOSE_FD(f->m[i].lock_fd);
	free(f->m);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->changed);
	free(f);
}

/* ---- recovery ----------------------------------------------------------- */

struct found {
	char (*ids)[SANDBOX_ID_SIZE];
	int64_t *expires;
	bool *pooled;
	size_t n, cap;
};

static int found_one(const struct sandbox_record *s, void *data)
{
	struct found *fo = data;
	if (fo->n == fo->cap) {
		size_t cap = fo->cap ? fo->cap * 2 : 64;
		void *a = realloc(fo->ids, cap * sizeof(*fo->ids));
		if (a)
			fo->ids = a;
		void *b = realloc(fo->expires, cap * sizeof(*fo->expires));
		if (b)
			fo->expires = b;
		void *c = realloc(fo->pooled, cap * sizeof(*fo->pooled));
		if (c)
			fo->pooled = c;
		if (!a || !b || !c)
			return -ENOMEM;
		fo->cap = cap;
	}
	snprintf(fo->ids[fo->n], SANDBOX_ID_SIZE, "%s", s->id);
	fo->expires[fo->n] = s->expires_at;
	fo->pooled[fo->n] = s->status == SANDBOX_POOLED;
	fo->n++;
	return 0;
}

int fleet_recover(struct fleet *f, struct store *st, struct error *err)
{
	struct found fo = {0};
	char after[SANDBOX_ID_SIZE] = "";
	int r = 0;
	for (;;) {
		size_t before = fo.n;
		struct sandbox_filter sf = {.statuses = SANDBOX_STATUS_BIT(SANDBOX_POOLED) |
							SANDBOX_STATUS_BIT(SANDBOX_RUNNING) |
							SANDBOX_STATUS_BIT(SANDBOX_PAUSED),
					    .after_id = after[0] ? after : NULL,
					    .limit = STORE_LIST_MAX};
		if ((r = store_sandbox_list(st, &sf, found_one, &fo, err)) < 0)
			goto out;
		if (fo.n - before < STORE_LIST_MAX)
			break;
		snprintf(after, sizeof(after), "%s", fo.ids[fo.n - 1]);
	}
	for (size_t i = 0; i < fo.n; i++) {
		char dir[4200], path[4300];
		fleet_dir(f, fo.ids[i], dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/lock", dir);
		int probe = open(path, O_RDWR | O_CLOEXEC);
		if (!shim_alive(probe)) {
			if (probe >= 0)
				close(probe);
			record_end(f, st, fo.ids[i], fo.pooled[i]);
			continue;
		}
		if ((r = add_member(f, fo.ids[i], probe, fo.pooled[i])) < 0) {
			close(probe);
			error_set(err, ENOMEM, "out of memory");
			goto out;
		}
		if (!fo.pooled[i]) {
			/* the store's expiry is the truth: a daemon may have died
			 * between recording a new one and telling the shim */
			json_t *req = json_pack("{s:s, s:I}", "op", "expire", "expires_at",
						(json_int_t)fo.expires[i]);
			json_t *reply = NULL;
			struct error e2 = {0};
			if (req && shim_call(dir, req, -1, 2000, &reply, NULL, &e2) < 0)
				fprintf(stderr, "agentboxd: sandbox %s: %s\n", fo.ids[i], e2.msg);
			json_decref(req);
			json_decref(reply);
		}
	}
	r = 0;
out:
	free(fo.ids);
	free(fo.expires);
	free(fo.pooled);
	return r;
}

/* ---- requests ------------------------------------------------------------ */

void fleet_error_response(struct api_response *resp, int errnum, const char *message,
			  const char *what)
{
	bool file = what && strcmp(what, "file") == 0;
	bool proc = what && strcmp(what, "process") == 0;
	const char *m = message && *message ? message : strerror(errnum);
	switch (errnum) {
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
		if (proc)
			api_error_response(resp, API_ERR_PROCESS_NOT_FOUND, NULL, "%s", m);
		else
			api_error_response(resp, API_ERR_FILE_NOT_FOUND, file ? "path" : NULL, "%s", m);
		return;
	case ESRCH:
		api_error_response(resp, API_ERR_PROCESS_ENDED, NULL, "%s", m);
		return;
	case EBUSY:
		api_error_response(resp, API_ERR_SANDBOX_PAUSED, NULL, "the sandbox is paused");
		return;
	case EAGAIN:
		api_error_response(resp, API_ERR_TOO_MANY_PROCESSES, NULL, "%s", m);
		return;
	case EACCES:
	case EPERM:
	case EROFS:
		api_error_response(resp, API_ERR_PERMISSION_DENIED, file ? "path" : NULL, "%s", m);
		return;
	case EISDIR:
	case ENXIO:
		api_error_response(resp, API_ERR_NOT_A_FILE, file ? "path" : NULL, "%s", m);
		return;
	case EINVAL:
		if (file)
			api_error_response(resp, API_ERR_NOT_A_FILE, "path", "%s", m);
		else
			api_error_response(resp, API_ERR_INVALID_FIELD, NULL, "%s", m);
		return;
	case ENOSPC:
	case EDQUOT:
		api_error_response(resp, API_ERR_NO_SPACE, NULL, "the sandbox's disk is full");
		return;
	case E2BIG:
	case ENAMETOOLONG:
		api_error_response(resp, API_ERR_INVALID_FIELD, file ? "path" : NULL, "%s", m);
		return;
	case EPIPE:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECANCELED: /* the sandbox is ending */
		api_error_response(resp, API_ERR_SANDBOX_ENDED, NULL, "the sandbox has ended");
		return;
	default:
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "shim: %s", m);
	}
}

int fleet_call(struct fleet *f, const char *id, json_t *request, int pass_fd, json_t **ret_reply,
	       int *ret_fd, const char *what, struct api_response *resp)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	struct error err = {0};
	int r = shim_call(dir, request, pass_fd, 30000, ret_reply, ret_fd, &err);
	if (r < 0) {
		fleet_error_response(resp, -r, err.msg, what);
		return -EINVAL;
	}
	return 0;
}

static int store_fail(struct api_response *resp, int r, const struct error *err, const char *id)
{
	if (r == -ENOENT)
		api_error_response(resp, API_ERR_NOT_FOUND, NULL, "no sandbox %s", id);
	else if (r == -ESTALE)
		api_error_response(resp, API_ERR_SANDBOX_ENDED, NULL, "the sandbox %s has ended", id);
	else {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "store: %s", err->msg);
	}
	return -EINVAL;
}

int fleet_get_live(struct fleet *f, struct store *st, const char *id, bool need_running,
		   struct sandbox_record *ret, struct api_response *resp)
{
	(void)f;
	struct error err = {0};
	int r = store_sandbox_get(st, id, ret, &err);
	if (r < 0)
		return store_fail(resp, r, &err, id);
	if (ret->status == SANDBOX_POOLED) {
		sandbox_record_release(ret);
		return store_fail(resp, -ENOENT, &err, id);
	}
	if (ret->status == SANDBOX_ENDED) {
		sandbox_record_release(ret);
		return store_fail(resp, -ESTALE, &err, id);
	}
	if (need_running && ret->status == SANDBOX_PAUSED) {
		sandbox_record_release(ret);
		api_error_response(resp, API_ERR_SANDBOX_PAUSED, NULL,
				   "the sandbox %s is paused: resume it first", id);
		return -EINVAL;
	}
	return 0;
}

/* Take a pooled sandbox, if one is ready. */
static bool take_pooled(struct fleet *f, char id[SANDBOX_ID_SIZE])
{
	bool got = false;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n && !got; i++) {
		if (f->m[i].pooled && shim_alive(f->m[i].lock_fd)) {
			f->m[i].pooled = false;
			memcpy(id, f->m[i].id, SANDBOX_ID_SIZE);
			got = true;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return got;
}

static int claim_pooled(struct fleet *f, struct store *st, const char *id,
			const struct sandbox_request *req, int64_t now, struct error *err)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	json_t *spec = json_loads(req->spec_json, 0, NULL);
	int r = dfd < 0 ? -errno : spec ? write_json_file(dfd, "env.json", json_object_get(spec, "env")) : -ENOMEM;
	json_decref(spec);
	if (r < 0)
		return error_set_errno(err, -r, "%s/env.json", dir);
	int64_t expires = now + req->timeout_ms;
	if ((r = store_sandbox_claim(st, id, now, expires, req->metadata_json, err)) < 0)
		return r;
	json_t *msg = json_pack("{s:s, s:I}", "op", "expire", "expires_at", (json_int_t)expires);
	json_t *reply = NULL;
	r = msg ? shim_call(dir, msg, -1, 5000, &reply, NULL, err) : -ENOMEM;
	json_decref(msg);
	json_decref(reply);
	return r;
}

int fleet_create(struct fleet *f, struct store *st, const struct sandbox_request *req,
		 int64_t now, struct sandbox_record *ret, struct api_response *resp)
{
	struct error err = {0};
	char id[SANDBOX_ID_SIZE];
	int r;
	while (req->default_limits && take_pooled(f, id)) {
		if ((r = claim_pooled(f, st, id, req, now, &err)) == 0)
			return fleet_get_live(f, st, id, false, ret, resp);
		/* that one was no good: it ends, and the next is tried */
		fprintf(stderr, "agentboxd: pooled sandbox %s: %s\n", id, err.msg);
		char dir[4200];
		fleet_dir(f, id, dir, sizeof(dir));
		json_t *stop = json_pack("{s:s}", "op", "stop");
		json_t *reply = NULL;
		(void)shim_call(dir, stop, -1, 2000, &reply, NULL, &err);
		json_decref(stop);
		json_decref(reply);
	}
	struct sandbox_record s = {.status = SANDBOX_RUNNING, .created_at = now,
			    .expires_at = now + req->timeout_ms, .spec_json = req->spec_json,
			    .metadata_json = req->metadata_json};
	if (sandbox_id_new(s.id) < 0)
		return store_fail(resp, -EIO, &err, "");
	if ((r = store_sandbox_insert(st, &s, &err)) < 0)
		return store_fail(resp, r, &err, s.id);
	json_t *spec = json_loads(req->spec_json, 0, NULL);
	_cleanup_free_ char *env = spec ? json_dumps(json_object_get(spec, "env"), JSON_COMPACT) : NULL;
	json_decref(spec);
	r = env ? start_shim(f, s.id, req->spec_json, env, s.expires_at, false, &err)
		: error_set(&err, ENOMEM, "out of memory");
	if (r < 0) {
		struct error e2 = {0};
		(void)store_sandbox_end(st, s.id, wall_clock_ms(), "failed", err.msg, &e2);
		remove_dir(f, s.id);
		api_error_response(resp, API_ERR_SANDBOX_FAILED, NULL, "the sandbox could not be built: %s",
				   err.msg);
		return -EIO;
	}
	return fleet_get_live(f, st, s.id, false, ret, resp);
}

int fleet_delete(struct fleet *f, struct store *st, const char *id, struct api_response *resp)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, resp);
	if (r < 0)
		return r;
	sandbox_record_release(&s);
	pthread_mutex_lock(&f->lock);
	struct member *m = find_member(f, id);
	if (m)
		m->ending = true;
	pthread_mutex_unlock(&f->lock);
	json_t *stop = json_pack("{s:s}", "op", "stop"), *reply = NULL;
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	struct error err = {0};
	(void)shim_call(dir, stop, -1, 5000, &reply, NULL, &err);
	json_decref(stop);
	json_decref(reply);
	/* wait for the shim to be gone (it writes end.json first) */
	int64_t deadline = wall_clock_ms() + 10000;
	pthread_mutex_lock(&f->lock);
	while ((m = find_member(f, id)) && shim_alive(m->lock_fd) && wall_clock_ms() < deadline) {
		pthread_mutex_unlock(&f->lock);
		usleep(2000);
		pthread_mutex_lock(&f->lock);
	}
	bool gone = !m || !shim_alive(m->lock_fd);
	if (m && gone)
		drop_member(f, m);
	else if (m)
		m->ending = false;
	pthread_mutex_unlock(&f->lock);
	if (!gone) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "sandbox %s: its supervisor did not stop", id);
		return -EIO;
	}
	char reason[32], detail[ERROR_MSG_MAX];
	int64_t when;
	read_end(f, id, reason, sizeof(reason), detail, sizeof(detail), &when);
	r = store_sandbox_end(st, id, when, "deleted", NULL, &err);
	remove_dir(f, id);
	if (r < 0 && r != -ESTALE)
		return store_fail(resp, r, &err, id);
	return 0;
}

int fleet_pause(struct fleet *f, struct store *st, const char *id, bool pause,
		struct api_response *resp)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, resp);
	if (r < 0)
		return r;
	enum sandbox_status from = s.status, to = pause ? SANDBOX_PAUSED : SANDBOX_RUNNING;
	sandbox_record_release(&s);
	if (from == to)
		return 0;
	json_t *msg = json_pack("{s:s}", "op", pause ? "pause" : "resume"), *reply = NULL;
	r = fleet_call(f, id, msg, -1, &reply, NULL, "sandbox", resp);
	json_decref(msg);
	json_decref(reply);
	if (r < 0)
		return r;
	struct error err = {0};
	r = store_sandbox_set_status(st, id, from, to, &err);
	return r < 0 ? store_fail(resp, r, &err, id) : 0;
}

int fleet_set_expiry(struct fleet *f, struct store *st, const char *id, int64_t expires_at,
		     struct api_response *resp)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, resp);
	if (r < 0)
		return r;
	sandbox_record_release(&s);
	struct error err = {0};
	if ((r = store_sandbox_set_expiry(st, id, expires_at, &err)) < 0)
		return store_fail(resp, r, &err, id);
	json_t *msg = json_pack("{s:s, s:I}", "op", "expire", "expires_at", (json_int_t)expires_at);
	json_t *reply = NULL;
	r = fleet_call(f, id, msg, -1, &reply, NULL, "sandbox", resp);
	json_decref(msg);
	json_decref(reply);
	return r;
}

json_t *fleet_exec_env(struct fleet *f, const char *id, json_t *extra)
{
	char path[4400];
	fleet_dir(f, id, path, sizeof(path) - 16);
	strncat(path, "/env.json", sizeof(path) - strlen(path) - 1);
	json_t *base = json_load_file(path, 0, NULL);
	json_t *merged = json_pack("{s:s, s:s, s:s}", "PATH", SPEC_DEFAULT_PATH, "HOME",
				   SPEC_DEFAULT_WORKDIR, "LANG", SPEC_DEFAULT_LANG);
	json_t *out = json_array();
	if (!merged || !out || (base && json_object_update(merged, base) < 0) ||
	    (extra && json_object_update(merged, extra) < 0)) {
		json_decref(base);
		json_decref(merged);
		json_decref(out);
		return NULL;
	}
	const char *k;
	json_t *v;
	json_object_foreach(merged, k, v)
	{
		const char *val = json_string_value(v);
		size_t n = strlen(k) + (val ? strlen(val) : 0) + 2;
		char *kv = malloc(n);
		if (!kv || json_array_append_new(out, json_string((snprintf(kv, n, "%s=%s", k, val ? val : ""), kv))) < 0) {
			free(kv);
			json_decref(out);
			out = NULL;
			break;
		}
		free(kv);
	}
	json_decref(base);
	json_decref(merged);
	return out;
}
