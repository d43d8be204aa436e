/*
 * fleet-ops.c - a sandbox's lifecycle as the API asks for it (fleet.h):
 * make one (from the pool, or on demand), find a live one, delete,
 * pause, set the expiry.
 */
#include "fleet/fleet-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"
#include "core/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fleet_get_live(struct fleet *f, struct store *st, const char *id, bool need_running,
		   struct sandbox_record *ret, struct error *err)
{
	(void)f;
	int r = store_sandbox_get(st, id, ret, err);
	if (r == -ENOENT)
		return error_set(err, ENOENT, "no sandbox %s", id);
	if (r < 0)
		return r;
	if (ret->status == SANDBOX_POOLED) {
		sandbox_record_release(ret);
		return error_set(err, ENOENT, "no sandbox %s", id);
	}
	if (ret->status == SANDBOX_ENDED) {
		sandbox_record_release(ret);
		return error_set(err, ESTALE, "the sandbox %s has ended", id);
	}
	if (need_running && ret->status == SANDBOX_PAUSED) {
		sandbox_record_release(ret);
		return error_set(err, EBUSY, "the sandbox %s is paused: resume it first", id);
	}
	return 0;
}

/* A store failure r on sandbox id, in fleet.h's codes. */
static int store_failed(int r, const char *id, struct error *err)
{
	if (r == -ENOENT)
		return error_set(err, ENOENT, "no sandbox %s", id);
	if (r == -ESTALE)
		return error_set(err, ESTALE, "the sandbox %s has ended", id);
	return r;
}

/*
 * Take a pooled sandbox of image (a config digest; "": the default
 * pool's), if one is ready: for a sandbox with a network,
 * one whose link is parked, else any; for one without, never such one
 * (its eth0 would show, and taking the link back costs more than
 * a sandbox made now).
 */
static bool take_pooled(struct fleet *f, bool network, const char *image, const char *tenant,
			char id[SANDBOX_ID_SIZE])
{
	bool got = false;
	pthread_mutex_lock(&f->lock);
	for (int pass = network ? 0 : 1; pass < 2 && !got; pass++) {
		for (size_t i = 0; i < f->n && !got; i++) {
			struct member *m = &f->m[i];
			if (m->pooled && m->parked == (pass == 0) && strcmp(m->image, image) == 0 &&
			    fleet_shim_alive(m->lock_fd)) {
				m->pooled = m->parked = false;
				memcpy(id, m->id, SANDBOX_ID_SIZE);
				snprintf(m->tenant, sizeof(m->tenant), "%s", tenant);
				got = true;
			}
		}
	}
	pthread_mutex_unlock(&f->lock);
	return got;
}

/*
 * Whether dir's env.json holds env already: an image's pooled sandbox
 * starts with its image's Env (fleet-pool.c), which a claim that adds
 * nothing leaves as it is. Read, not assumed: a sandbox pooled by an
 * earlier agentboxd may hold another.
 */
static bool env_on_disk(const char *dir, json_t *env)
{
	char path[4300];
	if (snprintf(path, sizeof(path), "%s/" LAYOUT_ENV_JSON, dir) >= (int)sizeof(path))
		return false;
	json_t *old = json_load_file(path, 0, NULL);
	bool same = old && json_equal(old, env);
	json_decref(old);
	return same;
}

static int claim_pooled(struct fleet *f, struct store *st, const char *id,
			const struct fleet_spec *spec, int64_t now, struct error *err)
{
	char dir[4200];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	json_t *sj = json_loads(spec->spec_json, 0, NULL);
	json_t *env = json_object_get(sj, "env");
	int r = sj ? 0 : -ENOMEM;
	if (r == 0 && json_object_size(env) > 0 && !(spec->pool_image && env_on_disk(dir, env))) {
		/* the default pool's sandboxes are made with an empty env.json, an
		 * image's with its Env: only an env that differs is written */
		_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		r = dfd < 0 ? -errno : fleet_write_json(dfd, LAYOUT_ENV_JSON, env);
	}
	if (r < 0) {
		json_decref(sj);
		return error_set_errno(err, -r, "%s/" LAYOUT_ENV_JSON, dir);
	}
	/*
	 * Claimed in the store first: a sandbox given a network is never pooled
	 * again, so a daemon that dies between the two steps leaves a claimed
	 * sandbox (ended as its shim ends it), never a pooled one whose link is
	 * in a mode (a parked link is in none: the table drops it).
	 */
	int64_t expires = now + spec->timeout_ms;
	if ((r = store_sandbox_claim(st, id, spec->tenant ? spec->tenant : TENANT_DEFAULT, now,
				     expires, spec->spec_json, spec->metadata_json, err)) < 0) {
		json_decref(sj);
		return r;
	}
	/*
	 * and its network now, with its expiry in the same message: a link
	 * parked with it is handed out (the shim names it, and it is put into
	 * its mode's group here, before the sandbox is), else one is made
	 */
	json_t *net = json_object_get(sj, "network");
	bool allow = strcmp(json_string_value(json_object_get(net, "mode")) ?: "", "allow") == 0;
	json_t *egress = json_loads(f->cfg.egress_json ? f->cfg.egress_json : "{}", 0, NULL);
	json_t *msg = net && egress
			  ? json_pack("{s:s, s:O, s:O, s:I}", "op", "network", "network", net,
				      "egress", egress, "expires_at", (json_int_t)expires)
			  : NULL;
	json_decref(egress);
	json_t *reply = NULL;
	if (net)
		r = msg ? fleet_call(f, id, msg, -1, &reply, NULL, err)
			: error_set(err, ENOMEM, "out of memory");
	const char *link = json_string_value(json_object_get(reply, "link"));
	if (r == 0 && link)
		r = f->cfg.link_mode ? f->cfg.link_mode(link, allow, err)
				     : error_set(err, ENOTSUP, "no way to set a link's mode");
	json_decref(reply);
	json_decref(msg);
	json_decref(sj);
	if (r < 0) {
		/* it is stopped by the caller; its record ends now, not as a phantom */
		struct error ignored = {0};
		(void)store_sandbox_end(st, id, fleet_now(f), "failed", err->msg, &ignored);
		return r;
	}
	return net ? 0 : fleet_tell(f, id, "expire", expires, 5000, err);
}

/*
 * The sandboxes handed out or being admitted, in *ret_n, and the memory
 * limits of those and of running tasks. Under f->lock.
 */
static uint64_t held_memory(const struct fleet *f, unsigned *ret_n)
{
	unsigned n = f->admitting;
	uint64_t sum = f->admitting_memory + f->tasks_memory;
	for (size_t i = 0; i < f->n; i++)
		if (!f->m[i].pooled) {
			n++;
			sum += f->m[i].memory;
		}
	*ret_n = n;
	return sum;
}

/*
 * What a create of spec asks of its tenant's quotas: one sandbox, and its
 * memory, CPUs and disk.
 */
static void create_amounts(const struct fleet_spec *spec, struct quota *ret)
{
	fleet_spec_amounts(spec->spec_json, ret);
	ret->v[QUOTA_SANDBOXES] = 1;
}

/* The tenant's quota refuses: -EXFULL, naming it. */
static int over_quota(const char *tenant, enum quota_id id, enum quota_id *over, struct error *err)
{
	if (over)
		*over = id;
	return error_set(err, EXFULL, "the tenant %s is at its quota %s", tenant, quota_name(id));
}

/*
 * Admit one more sandbox of memory bytes, if the host may hold it and its
 * tenant's quotas allow it: it is counted as admitted until admit_end(),
 * so that creates at once cannot all pass the same check. 0, -EDQUOT or
 * -EXFULL with err.
 */
static int admit(struct fleet *f, const struct fleet_spec *spec, const char *tenant,
		 const struct quota *ask, struct error *err)
{
	unsigned n;
	int r = 0;
	uint64_t memory = spec->memory_bytes;
	pthread_mutex_lock(&f->lock);
	uint64_t sum = held_memory(f, &n);
	struct quota held;
	enum quota_id id = QUOTA_COUNT;
	if (spec->quota) {
		fleet_tenant_held(f, tenant, &held);
		if (!quota_check(spec->quota, &held, ask, &id))
			r = over_quota(tenant, id, spec->over, err);
	}
	if (r < 0)
		;
	else if (f->cfg.sandboxes_max && n + 1 > f->cfg.sandboxes_max)
		r = error_set(err, EDQUOT, "this host holds %u sandboxes, as many as it may",
			      f->cfg.sandboxes_max);
	else if (f->cfg.memory_max && sum + memory > f->cfg.memory_max)
		r = error_set(err, EDQUOT,
			      "the sandboxes and tasks of this host have %llu of their %llu MiB "
			      "of memory already; %llu more do not fit",
			      (unsigned long long)(sum >> 20),
			      (unsigned long long)(f->cfg.memory_max >> 20),
			      (unsigned long long)(memory >> 20));
	if (r == 0 && fleet_charge(f, tenant, ask) < 0)
		r = error_set(err, ENOMEM, "out of memory");
	if (r == 0) {
		f->admitting++;
		f->admitting_memory += memory;
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* A task's memory limit in bytes, from its amounts (the API always sets it; its default else). */
static uint64_t task_memory(const struct quota *amounts)
{
	uint64_t mb = amounts->v[QUOTA_MEMORY_MB];
	return mb ? mb << 20 : SPEC_DEFAULT_MEMORY;
}

int fleet_admit_task(struct fleet *f, const char *tenant, const struct quota *limit,
		     const char *spec_json, bool force, struct quota *ret_amounts,
		     enum quota_id *ret_over)
{
	struct quota ask, held;
	fleet_spec_amounts(spec_json, &ask);
	ask.v[QUOTA_TASKS_RUNNING] = 1;
	uint64_t memory = task_memory(&ask);
	unsigned n;
	int r = 0;
	enum quota_id id;
	pthread_mutex_lock(&f->lock);
	uint64_t sum = held_memory(f, &n);
	if (!force && limit) {
		fleet_tenant_held(f, tenant, &held);
		if (!quota_check(limit, &held, &ask, &id)) {
			*ret_over = id;
			r = -EXFULL;
		}
	}
	if (r == 0 && !force && f->cfg.memory_max && sum + memory > f->cfg.memory_max)
		r = -EAGAIN;
	if (r == 0 && fleet_charge(f, tenant, &ask) < 0)
		r = -ENOMEM;
	if (r == 0)
		f->tasks_memory += memory;
	pthread_mutex_unlock(&f->lock);
	*ret_amounts = ask;
	return r;
}

void fleet_release_task(struct fleet *f, const char *tenant, const struct quota *amounts)
{
	uint64_t memory = task_memory(amounts);
	pthread_mutex_lock(&f->lock);
	f->tasks_memory -= memory < f->tasks_memory ? memory : f->tasks_memory;
	fleet_uncharge(f, tenant, amounts);
	pthread_mutex_unlock(&f->lock);
}

static void admit_end(struct fleet *f, uint64_t memory, const char *tenant, const struct quota *ask)
{
	pthread_mutex_lock(&f->lock);
	f->admitting--;
	f->admitting_memory -= memory;
	fleet_uncharge(f, tenant, ask);
	pthread_mutex_unlock(&f->lock);
}

/* As fleet_create(), once admitted. */
static int create(struct fleet *f, struct store *st, const struct fleet_spec *spec, int64_t now,
		  struct sandbox_record *ret, struct error *err)
{
	char id[SANDBOX_ID_SIZE];
	int r;
	const char *tenant = spec->tenant ? spec->tenant : TENANT_DEFAULT;
	if (!tenant_name_is_valid(tenant)) /* before the pool: a claim would refuse it */
		return error_set(err, EINVAL, "not a tenant's name");
	bool network = spec->network;
	if (network && spec->default_limits && !spec->secrets_json)
		atomic_store(&f->network_used, true); /* from now on the keeper parks links too */
	while (spec->default_limits && !spec->secrets_json &&
	       take_pooled(f, network, spec->pool_image ? spec->pool_image : "", tenant, id)) {
		if ((r = claim_pooled(f, st, id, spec, now, err)) == 0)
			return fleet_get_live(f, st, id, false, ret, err);
		/* that one was no good: it ends, and the next is tried */
		fleet_log(f, "pooled sandbox %s: %s", id, err->msg);
		(void)fleet_tell(f, id, "stop", 0, 2000, err);
	}
	struct sandbox_record s = {.status = SANDBOX_RUNNING,
				   .created_at = now,
				   .expires_at = now + spec->timeout_ms,
				   .spec_json = (char *)spec->spec_json,
				   .metadata_json = (char *)spec->metadata_json};
	if ((r = sandbox_id_new(s.id)) < 0)
		return error_set_errno(err, -r, "a new sandbox id");
	memcpy(s.tenant, tenant, strlen(tenant) + 1);
	if ((r = store_sandbox_insert(st, &s, err)) < 0)
		return r;
	json_t *sj = json_loads(spec->spec_json, 0, NULL);
	_cleanup_free_ char *env = sj ? json_dumps(json_object_get(sj, "env"), JSON_COMPACT) : NULL;
	json_decref(sj);
	r = env ? fleet_start_shim(f, s.id, tenant, spec->spec_json, env, spec->secrets_json,
				   s.expires_at, FLEET_HANDED_OUT, err)
		: error_set(err, ENOMEM, "out of memory");
	if (r < 0) {
		struct error e2 = {0};
		(void)store_sandbox_end(st, s.id, fleet_now(f), "failed", err->msg, &e2);
		fleet_remove_dir(f, s.id);
		err->code = ECHILD;
		return -ECHILD;
	}
	return fleet_get_live(f, st, s.id, false, ret, err);
}

int fleet_create(struct fleet *f, struct store *st, const struct fleet_spec *spec, int64_t now,
		 struct sandbox_record *ret, struct error *err)
{
	const char *tenant = spec->tenant ? spec->tenant : TENANT_DEFAULT;
	struct quota ask;
	create_amounts(spec, &ask);
	int r = admit(f, spec, tenant, &ask, err);
	if (r < 0)
		return r;
	r = create(f, st, spec, now, ret, err);
	admit_end(f, spec->memory_bytes, tenant, &ask);
	return r;
}

int fleet_delete(struct fleet *f, struct store *st, const char *id, struct error *err)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, err);
	if (r < 0)
		return r;
	sandbox_record_release(&s);
	pthread_mutex_lock(&f->lock);
	struct member *m = fleet_find_member(f, id);
	if (m)
		m->ending = true;
	pthread_mutex_unlock(&f->lock);
	struct error ignored = {0};
	(void)fleet_tell(f, id, "stop", 0, 5000, &ignored);
	/* wait for the shim to be gone (it writes end.json first) */
	int64_t deadline = wall_clock_ms() + 10000;
	pthread_mutex_lock(&f->lock);
	while ((m = fleet_find_member(f, id)) && fleet_shim_alive(m->lock_fd) &&
	       wall_clock_ms() < deadline) {
		pthread_mutex_unlock(&f->lock);
		usleep(2000);
		pthread_mutex_lock(&f->lock);
	}
	bool gone = !m || !fleet_shim_alive(m->lock_fd);
	if (m && gone)
		fleet_drop_member(f, m);
	else if (m)
		m->ending = false;
	pthread_mutex_unlock(&f->lock);
	if (!gone)
		return error_set(err, ETIMEDOUT, "sandbox %s: its supervisor did not stop", id);
	/* end.json says "deleted": the shim wrote it for our stop */
	r = fleet_record_end(f, st, id, false, err);
	return r < 0 ? store_failed(r, id, err) : 0;
}

int fleet_pause(struct fleet *f, struct store *st, const char *id, bool pause, struct error *err)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, err);
	if (r < 0)
		return r;
	enum sandbox_status from = s.status, to = pause ? SANDBOX_PAUSED : SANDBOX_RUNNING;
	sandbox_record_release(&s);
	if (from == to)
		return 0;
	if ((r = fleet_tell(f, id, pause ? "pause" : "resume", 0, FLEET_CALL_TIMEOUT_MS, err)) < 0)
		return fleet_shim_refused(r, err);
	r = store_sandbox_set_status(st, id, from, to, err);
	return r < 0 ? store_failed(r, id, err) : 0;
}

int fleet_set_expiry(struct fleet *f, struct store *st, const char *id, int64_t expires_at,
		     struct error *err)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, err);
	if (r < 0)
		return r;
	sandbox_record_release(&s);
	if ((r = store_sandbox_set_expiry(st, id, expires_at, err)) < 0)
		return store_failed(r, id, err);
	if ((r = fleet_tell(f, id, "expire", expires_at, FLEET_CALL_TIMEOUT_MS, err)) < 0)
		return fleet_shim_refused(r, err);
	return 0;
}
