/*
 * fleet.c - the fleet's members (fleet.h): shims started and watched by
 * their locks, requests to them, and the record of their ends. The
 * keeper, the warm pool and recovery are in fleet-pool.c.
 */
#include "fleet/fleet-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/spawn.h"
#include "core/layout.h"
#include "shim/client.h"
#include "shim/protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

unsigned fleet_pool_default(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = (unsigned)(cpus > 0 ? cpus : 1) * FLEET_POOL_PER_CPU;
	return n > FLEET_POOL_MAX ? FLEET_POOL_MAX : n;
}

int fleet_dir(const struct fleet *f, const char *id, char *buf, size_t size)
{
	return layout_sandbox_dir(buf, size, f->cfg.state_dir, id);
}

int64_t fleet_now(const struct fleet *f)
{
	return f->cfg.now_ms ? f->cfg.now_ms() : wall_clock_ms();
}

void fleet_log(struct fleet *f, const char *fmt, ...)
{
	if (!f->cfg.log)
		return;
	char line[ERROR_MSG_MAX + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	f->cfg.log(f->cfg.log_data, line);
}

int fleet_new(const struct fleet_config *cfg, struct fleet **ret, struct error *err)
{
	struct fleet *f = calloc(1, sizeof(*f));
	if (!f)
		return error_set(err, ENOMEM, "out of memory");
	f->cfg = *cfg;
	if (!cfg->default_spec_json) {
		free(f);
		return error_set(err, EINVAL, "the fleet needs the default sandbox spec");
	}
	if (cfg->nimage_pools > FLEET_IMAGE_POOLS_MAX) {
		free(f);
		return error_set(err, E2BIG, "more than %d images' pools", FLEET_IMAGE_POOLS_MAX);
	}
	char dir[4200];
	int r = layout_state_file(dir, sizeof(dir), cfg->state_dir, LAYOUT_SANDBOXES);
	if (r == 0)
		r = mkdir_p_at(AT_FDCWD, dir, 0700);
	if (r < 0) {
		free(f);
		return error_set_errno(err, -r, "%s", dir);
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->changed, NULL);
	*ret = f;
	return 0;
}

/* ---- members ----------------------------------------------------------- */

/* A whole number of limits (memory_mb, disk_mb), or 0. */
static uint64_t limit_of(json_t *limits, const char *name)
{
	json_t *v = json_object_get(limits, name);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
							       : 0;
}

void fleet_spec_amounts(const char *spec_json, struct quota *ret)
{
	*ret = (struct quota){0};
	json_t *spec = spec_json ? json_loads(spec_json, 0, NULL) : NULL;
	json_t *limits = json_object_get(spec, "limits");
	ret->v[QUOTA_MEMORY_MB] = limit_of(limits, "memory_mb");
	ret->v[QUOTA_DISK_MB] = limit_of(limits, "disk_mb");
	json_t *cpus = json_object_get(limits, "cpus"); /* 1, or 1.5 */
	if (json_is_number(cpus) && json_number_value(cpus) > 0)
		ret->v[QUOTA_CPUS] = (uint64_t)llround(json_number_value(cpus) * 1000.0);
	json_decref(spec);
}

void fleet_spec_image(const char *spec_json, char *buf, size_t size)
{
	json_t *spec = spec_json ? json_loads(spec_json, 0, NULL) : NULL;
	const char *config =
	    json_string_value(json_object_get(json_object_get(spec, "image"), "config"));
	snprintf(buf, size, "%s", config ? config : "");
	json_decref(spec);
}

void fleet_tenant_held(const struct fleet *f, const char *tenant, struct quota *ret)
{
	*ret = (struct quota){0};
	for (size_t i = 0; i < f->n; i++)
		if (!f->m[i].pooled && strcmp(f->m[i].tenant, tenant) == 0)
			quota_add(ret, &f->m[i].amounts, 1);
	for (size_t i = 0; i < f->ncharges; i++)
		if (strcmp(f->charges[i].tenant, tenant) == 0)
			quota_add(ret, &f->charges[i].amounts, 1);
}

int fleet_charge(struct fleet *f, const char *tenant, const struct quota *amounts)
{
	if (f->ncharges == f->capcharges) {
		size_t cap = f->capcharges ? f->capcharges * 2 : 32;
		struct charge *c = realloc(f->charges, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		f->charges = c;
		f->capcharges = cap;
	}
	struct charge *c = &f->charges[f->ncharges++];
	snprintf(c->tenant, sizeof(c->tenant), "%s", tenant);
	c->amounts = *amounts;
	return 0;
}

void fleet_uncharge(struct fleet *f, const char *tenant, const struct quota *amounts)
{
	for (size_t i = 0; i < f->ncharges; i++) {
		struct charge *c = &f->charges[i];
		if (strcmp(c->tenant, tenant) == 0 &&
		    memcmp(&c->amounts, amounts, sizeof(*amounts)) == 0) {
			*c = f->charges[--f->ncharges];
			return;
		}
	}
}

void fleet_tenant_use(struct fleet *f, const char *tenant, struct quota *ret)
{
	pthread_mutex_lock(&f->lock);
	fleet_tenant_held(f, tenant, ret);
	pthread_mutex_unlock(&f->lock);
}

int fleet_add_member(struct fleet *f, const char *id, int lock_fd, enum fleet_kind kind,
		     const char *spec_json, const char *tenant)
{
	struct quota amounts;
	char image[sizeof(((struct member *)0)->image)];
	fleet_spec_amounts(spec_json, &amounts);
	fleet_spec_image(spec_json, image, sizeof(image));
	amounts.v[QUOTA_SANDBOXES] = 1;
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
	*m = (struct member){.lock_fd = lock_fd,
			     .pooled = kind != FLEET_HANDED_OUT,
			     .parked = kind == FLEET_PARKED,
			     .memory = amounts.v[QUOTA_MEMORY_MB] << 20,
			     .amounts = amounts};
	snprintf(m->id, sizeof(m->id), "%s", id);
	snprintf(m->tenant, sizeof(m->tenant), "%s", tenant ? tenant : "");
	snprintf(m->image, sizeof(m->image), "%s", image);
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
int fleet_start_shim(struct fleet *f, const char *id, const char *tenant, const char *spec_json,
		     const char *env_json, const char *secrets_json, int64_t expires_at,
		     enum fleet_kind kind, struct error *err)
{
	char dir[4200];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	if (mkdir(dir, 0700) < 0)
		return error_set_errno(err, errno, "%s", dir);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	json_t *spec = json_loads(spec_json, 0, NULL);
	json_t *egress = json_loads(f->cfg.egress_json ? f->cfg.egress_json : "{}", 0, NULL);
	if (!egress)
		json_decref(TAKE_PTR(spec));
	json_t *sj = spec && egress ? json_pack("{s:s, s:I, s:o, s:O, s:b}", "id", id, "expires_at",
						(json_int_t)expires_at, "spec", spec, "egress",
						egress, "park_network", kind == FLEET_PARKED)
				    : NULL;
	json_decref(egress);
	json_t *env = json_loads(env_json ? env_json : "{}", 0, NULL);
	int r = dfd < 0 ? -errno : (!sj || !env) ? -ENOMEM : 0;
	if (r == 0)
		r = fleet_write_json(dfd, LAYOUT_SANDBOX_JSON, sj);
	if (r == 0)
		r = fleet_write_json(dfd, LAYOUT_ENV_JSON, env);
	/* read and removed by the shim before its sandbox starts; mode 0600 */
	if (r == 0 && secrets_json)
		r = create_file_at(dfd, LAYOUT_SECRETS, secrets_json, 0600);
	json_decref(sj);
	json_decref(env);
	if (r < 0)
		return error_set_errno(err, -r, "%s/sandbox.json", dir);

	_cleanup_close_ int lock = openat(dfd, LAYOUT_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		return error_set_errno(err, errno, "%s/lock", dir);
	_cleanup_close_ int probe = openat(dfd, LAYOUT_LOCK, O_RDWR | O_CLOEXEC);
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
	if ((r = fleet_add_member(f, id, probe, kind, spec_json, tenant)) < 0)
		return error_set_errno(err, -r, "out of memory");
	probe = -1;
	return 0;
}

int fleet_tell(struct fleet *f, const char *id, const char *op, int64_t expires_at, int timeout_ms,
	       struct error *err)
{
	char dir[4200];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
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

int fleet_call(struct fleet *f, const char *id, json_t *request, int pass_fd, json_t **ret_reply,
	       int *ret_fd, struct error *err)
{
	char dir[4200];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	int r = shim_call(dir, request, pass_fd, FLEET_CALL_TIMEOUT_MS, ret_reply, ret_fd, err);
	return r < 0 ? fleet_shim_refused(r, err) : 0;
}

int fleet_shim_refused(int r, struct error *err)
{
	err->code = -r;
	return -EREMOTEIO;
}

/* Remove a sandbox directory (the shim is gone): procs/ and the files. */
void fleet_remove_dir(struct fleet *f, const char *id)
{
	char dir[4200], path[4400];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0 ||
	    layout_sandbox_file(path, sizeof(path), f->cfg.state_dir, id, LAYOUT_PROCS) < 0)
		return;
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
	json_t *j =
	    layout_sandbox_file(path, sizeof(path), f->cfg.state_dir, id, LAYOUT_END_JSON) == 0
		? json_load_file(path, 0, NULL)
		: NULL;
	const char *r = json_string_value(json_object_get(j, "reason"));
	const char *d = json_string_value(json_object_get(j, "detail"));
	json_t *t = json_object_get(j, "time");
	if (r && sandbox_end_reason_is_valid(r)) {
		snprintf(reason, rsize, "%s", r);
		snprintf(detail, dsize, "%s", d ? d : "");
		*when = json_is_integer(t) ? json_integer_value(t) : fleet_now(f);
	} else {
		snprintf(reason, rsize, "failed");
		snprintf(detail, dsize, "its supervisor ended without recording why");
		*when = fleet_now(f);
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

void fleet_record_end_or_log(struct fleet *f, struct store *st, const char *id, bool pooled)
{
	struct error err = {0};
	if (fleet_record_end(f, st, id, pooled, &err) < 0)
		fleet_log(f, "sandbox %s: cannot record its end: %s", id, err.msg);
}
