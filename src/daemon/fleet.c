/*
 * fleet.c - the daemon's interactive sandboxes (fleet.h): shims started
 * and found again, the warm pool, and the keeper that records ends.
 */
#include "daemon/fleet-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/spawn.h"
#include "core/limits.h"
#include "shim/client.h"
#include "shim/protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A sandbox whose shim we watch. */
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
struct member *fleet_find_member(struct fleet *f, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->m[i].id, id) == 0)
			return &f->m[i];
	return NULL;
}

/* With f->lock held. */
void fleet_drop_member(struct fleet *f, struct member *m)
{
	CLOSE_FD(m->lock_fd);
	*m = f->m[--f->n];
	pthread_cond_broadcast(&f->changed);
}

bool fleet_shim_alive(int lock_fd)
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

int fleet_write_json(int dirfd, const char *name, json_t *v)
{
	_cleanup_free_ char *text = json_dumps(v, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	_cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* no fsync: these files matter only while the shim lives, and a crash
	 * of the machine ends the shim too; the store holds what must last */
	int r = write_all(fd, text, strlen(text));
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
int fleet_start_shim(struct fleet *f, const char *id, const char *spec_json, const char *env_json,
		     int64_t expires_at, bool pooled, struct error *err)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	if (mkdir(dir, 0700) < 0)
		return error_set_errno(err, errno, "%s", dir);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	json_t *spec = json_loads(spec_json, 0, NULL);
	json_t *sj = spec ? json_pack("{s:s, s:I, s:o}", "id", id, "expires_at",
				      (json_int_t)expires_at, "spec", spec)
			  : NULL;
	json_t *env = json_loads(env_json ? env_json : "{}", 0, NULL);
	int r = dfd < 0 ? -errno : (!sj || !env) ? -ENOMEM : 0;
	if (r == 0)
		r = fleet_write_json(dfd, "sandbox.json", sj);
	if (r == 0)
		r = fleet_write_json(dfd, "env.json", env);
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

	pid_t pid;
	_Static_assert(SHIM_LOCK_FD == 3 && SHIM_READY_FD == 4,
		       "spawn_helper() hands fds over from 3");
	int fds[] = {lock, ready[1]};
	r = spawn_helper(f->cfg.shim_path, dir, fds, 2, &pid);
	close(ready[1]);
	if (r < 0)
		return error_set_errno(err, -r, "cannot start %s", f->cfg.shim_path);
	CLOSE_FD(lock); /* the shim holds it now */
	r = wait_ready(ready_r, err);
	if (r < 0) {
		/* Not ready in time: ask it to stop (it then tears its sandbox down,
		 * cgroup included), and kill it only if it will not. It is our
		 * unreaped child, so its pid cannot have been reused meanwhile. */
		if (fleet_shim_alive(probe))
			kill(pid, SIGTERM);
		for (int i = 0; i < 500 && fleet_shim_alive(probe); i++)
			usleep(10000);
		if (fleet_shim_alive(probe))
			kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		return r;
	}
	if ((r = add_member(f, id, probe, pooled)) < 0)
		return error_set_errno(err, -r, "out of memory");
	probe = -1;
	return 0;
}

int fleet_tell(struct fleet *f, const char *id, const char *op, int64_t expires_at, int timeout_ms,
	       struct error *err)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	json_t *msg = strcmp(op, "expire") == 0
			  ? json_pack("{s:s, s:I}", "op", op, "expires_at", (json_int_t)expires_at)
			  : json_pack("{s:s}", "op", op);
	json_t *reply = NULL;
	int r = msg ? shim_call(dir, msg, -1, timeout_ms, &reply, NULL, err)
		    : error_set(err, ENOMEM, "out of memory");
	json_decref(msg);
	json_decref(reply);
	return r;
}

/* Remove a sandbox directory (the shim is gone): procs/ and the files. */
void fleet_remove_dir(struct fleet *f, const char *id)
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
int fleet_record_end(struct fleet *f, struct store *st, const char *id, bool pooled,
		     struct error *err)
{
	char reason[32], detail[ERROR_MSG_MAX];
	int64_t when;
	read_end(f, id, reason, sizeof(reason), detail, sizeof(detail), &when);
	int r = pooled ? store_sandbox_delete(st, id, err)
		       : store_sandbox_end(st, id, when, reason, detail[0] ? detail : NULL, err);
	fleet_remove_dir(f, id);
	return r == -ESTALE || r == -ENOENT ? 0 : r; /* recorded already */
}

static void record_end(struct fleet *f, struct store *st, const char *id, bool pooled)
{
	struct error err = {0};
	if (fleet_record_end(f, st, id, pooled, &err) < 0)
		fprintf(stderr, "agentboxd: sandbox %s: cannot record its end: %s\n", id, err.msg);
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
		r = fleet_start_shim(f, s.id, f->default_spec, "{}", 0, true, &err);
	if (r < 0) {
		fprintf(stderr, "agentboxd: warm pool: %s\n", err.msg);
		(void)store_sandbox_delete(st, s.id, &err);
		fleet_remove_dir(f, s.id);
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
			if (!m->ending && !fleet_shim_alive(m->lock_fd)) {
				snprintf(id, sizeof(id), "%s", m->id);
				pooled = m->pooled;
				fleet_drop_member(f, m);
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
		(void)fleet_tell(f, f->m[i].id, "stop", 0, 2000, &err);
	}
	int64_t deadline = wall_clock_ms() + 5000;
	for (size_t i = 0; i < f->n;) {
		struct member *m = &f->m[i];
		if (!m->pooled) {
			i++;
			continue;
		}
		if (fleet_shim_alive(m->lock_fd) && wall_clock_ms() < deadline) {
			usleep(2000);
			continue;
		}
		char id[SANDBOX_ID_SIZE];
		snprintf(id, sizeof(id), "%s", m->id);
		bool gone = !fleet_shim_alive(m->lock_fd);
		fleet_drop_member(f, m);
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
		if (!fleet_shim_alive(probe)) {
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
			struct error e2 = {0};
			if (fleet_tell(f, fo.ids[i], "expire", fo.expires[i], 2000, &e2) < 0)
				fprintf(stderr, "agentboxd: sandbox %s: %s\n", fo.ids[i], e2.msg);
		}
	}
	r = 0;
out:
	free(fo.ids);
	free(fo.expires);
	free(fo.pooled);
	return r;
}
