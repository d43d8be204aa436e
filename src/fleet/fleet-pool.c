/*
 * fleet-pool.c - the fleet's keeper thread (it records the ends of shims
 * that are gone, and keeps the warm pool full), the pool's stop on a
 * clean exit, and recovery at start (fleet.h).
 */
#include "fleet/fleet-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the pool and the keeper ------------------------------------------- */

/*
 * The pools the keeper fills, in this order: slot 0 the default pool
 * (FLEET_POOLED), slot 1 its parked links (FLEET_PARKED), slot 2 + i
 * cfg.image_pools[i] (FLEET_POOLED, of that image).
 */
#define SLOT_PLAIN  0
#define SLOT_PARKED 1
#define SLOT_IMAGE  2

static enum fleet_kind slot_kind(size_t slot)
{
	return slot == SLOT_PARKED ? FLEET_PARKED : FLEET_POOLED;
}

static const char *slot_spec(const struct fleet *f, size_t slot)
{
	return slot >= SLOT_IMAGE ? f->cfg.image_pools[slot - SLOT_IMAGE].spec_json
				  : f->cfg.default_spec_json;
}

static int make_pooled(struct fleet *f, struct store *st, size_t slot)
{
	enum fleet_kind kind = slot_kind(slot);
	const char *spec_json = slot_spec(f, slot);
	struct sandbox_record s = {
	    .tenant = TENANT_DEFAULT, .status = SANDBOX_POOLED, .created_at = fleet_now(f)};
	struct error err = {0};
	if (sandbox_id_new(s.id) < 0)
		return -EIO;
	s.spec_json = (char *)spec_json;
	s.metadata_json = (char *)"{}";
	/* an image's sandbox starts with its spec's env, the image's Env: a
	 * claim that adds nothing to it then need not write env.json */
	_cleanup_free_ char *env_json = NULL;
	if (slot >= SLOT_IMAGE) {
		json_t *sj = json_loads(spec_json, 0, NULL);
		json_t *env = json_object_get(sj, "env");
		if (json_is_object(env)) /* else (or out of memory) {}, which a claim rewrites */
			env_json = json_dumps(env, JSON_COMPACT);
		json_decref(sj);
	}
	int r = store_sandbox_insert(st, &s, &err);
	if (r == 0)
		r = fleet_start_shim(f, s.id, NULL, spec_json, env_json ? env_json : "{}", NULL, 0,
				     kind, &err);
	if (r < 0) {
		fleet_log(f, "warm pool: %s", err.msg);
		(void)store_sandbox_delete(st, s.id, &err);
		fleet_remove_dir(f, s.id);
	}
	return r;
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The slot (above) the pool is short of, of those ok (a bit per slot):
 * the default pool first, then its parked links (once a sandbox has
 * asked for a network: a daemon whose sandboxes have none never touches
 * the host's network), then the images' pools; -1 when none is short.
 */
#define SLOT_BIT(k) (1ull << (k))
static int pool_short(struct fleet *f, uint64_t ok)
{
	unsigned count[SLOT_IMAGE + FLEET_IMAGE_POOLS_MAX] = {0};
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n; i++) {
		const struct member *m = &f->m[i];
		if (!m->pooled)
			continue;
		if (!m->image[0]) {
			count[m->parked ? SLOT_PARKED : SLOT_PLAIN]++;
			continue;
		}
		for (size_t k = 0; k < f->cfg.nimage_pools; k++)
			if (strcmp(m->image, f->cfg.image_pools[k].config) == 0)
				count[SLOT_IMAGE + k]++;
	}
	pthread_mutex_unlock(&f->lock);
	if ((ok & SLOT_BIT(SLOT_PLAIN)) && count[SLOT_PLAIN] < f->cfg.pool_size)
		return SLOT_PLAIN;
	if ((ok & SLOT_BIT(SLOT_PARKED)) && atomic_load(&f->network_used) &&
	    count[SLOT_PARKED] < f->cfg.pool_network)
		return SLOT_PARKED;
	for (size_t k = 0; k < f->cfg.nimage_pools; k++)
		if ((ok & SLOT_BIT(SLOT_IMAGE + k)) &&
		    count[SLOT_IMAGE + k] < f->cfg.image_pools[k].size)
			return (int)(SLOT_IMAGE + k);
	return -1;
}

/*
 * One round of the keeper: record the ends of the shims that are gone,
 * then make one pooled sandbox of a slot in ok (SLOT_BIT()s) if the pool
 * is short of it, its slot into *ret_slot. 1 when one was made, 0 when
 * none was needed (or allowed), -errno when making one failed.
 */
static int keep(struct fleet *f, struct store *st, uint64_t ok, int *ret_slot)
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
		fleet_record_end_or_log(f, st, id, pooled);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		; /* shims we started, now gone */
	/* the pool, one at a time so ends are seen between */
	int slot = *ret_slot = f->stopping ? -1 : pool_short(f, ok);
	if (slot < 0)
		return 0;
	int r = make_pooled(f, st, (size_t)slot);
	return r < 0 ? r : 1;
}

static void *keeper_main(void *arg)
{
	struct fleet *f = arg;
	struct store *st = NULL;
	struct error err = {0};
	if (store_open_sqlite(f->cfg.db_path, &st, &err) < 0) {
		fleet_log(f, "sandbox keeper: %s", err.msg);
		return NULL;
	}
	/* a slot whose sandbox cannot be made (a broken shim, no memory;
	 * agentbox-net missing for parked links; an image's tree gone) is
	 * tried again after a pause that doubles up to
	 * FLEET_POOL_BACKOFF_MAX_MS, the others meanwhile as usual, and ends
	 * are still recorded every tick */
	int64_t backoff[SLOT_IMAGE + FLEET_IMAGE_POOLS_MAX] = {0};
	int64_t next[SLOT_IMAGE + FLEET_IMAGE_POOLS_MAX] = {0};
	size_t slots = SLOT_IMAGE + f->cfg.nimage_pools;
	while (!f->stopping) {
		int64_t now = monotonic_ms();
		uint64_t ok = 0;
		for (size_t k = 0; k < slots; k++)
			ok |= now >= next[k] ? SLOT_BIT(k) : 0;
		int slot;
		int r = keep(f, st, ok, &slot);
		if (r < 0) {
			backoff[slot] = backoff[slot] ? backoff[slot] * 2 : FLEET_KEEPER_TICK_MS;
			if (backoff[slot] > FLEET_POOL_BACKOFF_MAX_MS)
				backoff[slot] = FLEET_POOL_BACKOFF_MAX_MS;
			next[slot] = now + backoff[slot];
		} else if (r > 0) {
			backoff[slot] = 0;
		}
		if (r <= 0 || pool_short(f, ok) < 0)
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
			fleet_record_end_or_log(f, st, id, true);
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
	free(f->w);
	free(f->charges);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->changed);
	free(f);
}

/* ---- recovery ----------------------------------------------------------- */

struct found {
	char (*ids)[SANDBOX_ID_SIZE];
	int64_t *expires;
	bool *pooled;
	char **specs;
	char (*tenants)[TENANT_NAME_SIZE];
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
		void *d = realloc(fo->specs, cap * sizeof(*fo->specs));
		if (d)
			fo->specs = d;
		void *e = realloc(fo->tenants, cap * sizeof(*fo->tenants));
		if (e)
			fo->tenants = e;
		if (!a || !b || !c || !d || !e)
			return -ENOMEM;
		fo->cap = cap;
	}
	snprintf(fo->ids[fo->n], SANDBOX_ID_SIZE, "%s", s->id);
	fo->expires[fo->n] = s->expires_at;
	fo->pooled[fo->n] = s->status == SANDBOX_POOLED;
	snprintf(fo->tenants[fo->n], TENANT_NAME_SIZE, "%s", fo->pooled[fo->n] ? "" : s->tenant);
	if (!(fo->specs[fo->n] = strdup(s->spec_json ? s->spec_json : "{}")))
		return -ENOMEM;
	fo->n++;
	return 0;
}

/* Was the pooled sandbox id made with a parked link (its sandbox.json says)? */
static bool parked_on_disk(struct fleet *f, const char *id)
{
	char path[4300];
	if (layout_sandbox_file(path, sizeof(path), f->cfg.state_dir, id, LAYOUT_SANDBOX_JSON) < 0)
		return false;
	json_t *j = json_load_file(path, 0, NULL);
	bool parked = json_is_true(json_object_get(j, "park_network"));
	json_decref(j);
	return parked;
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
		char path[4300];
		int probe = layout_sandbox_file(path, sizeof(path), f->cfg.state_dir, fo.ids[i],
						LAYOUT_LOCK) == 0
				? open(path, O_RDWR | O_CLOEXEC)
				: -1;
		if (!fleet_shim_alive(probe)) {
			if (probe >= 0)
				close(probe);
			fleet_record_end_or_log(f, st, fo.ids[i], fo.pooled[i]);
			continue;
		}
		enum fleet_kind kind = !fo.pooled[i]		      ? FLEET_HANDED_OUT
				       : parked_on_disk(f, fo.ids[i]) ? FLEET_PARKED
								      : FLEET_POOLED;
		if ((r = fleet_add_member(f, fo.ids[i], probe, kind, fo.specs[i], fo.tenants[i])) <
		    0) {
			close(probe);
			error_set(err, ENOMEM, "out of memory");
			goto out;
		}
		if (!fo.pooled[i]) {
			/* the store's expiry is the truth: a daemon may have died
			 * between recording a new one and telling the shim */
			struct error e2 = {0};
			if (fleet_tell(f, fo.ids[i], "expire", fo.expires[i], 2000, &e2) < 0)
				fleet_log(f, "sandbox %s: %s", fo.ids[i], e2.msg);
		}
	}
	r = 0;
out:
	for (size_t i = 0; i < fo.n; i++)
		free(fo.specs[i]);
	free(fo.specs);
	free(fo.ids);
	free(fo.expires);
	free(fo.pooled);
	free(fo.tenants);
	return r;
}
