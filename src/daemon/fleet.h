/*
 * fleet.h - the daemon's interactive sandboxes: where they are, how one
 * is made (from the warm pool or on demand), how one is asked to do
 * something, and how their ends get recorded.
 *
 * Each sandbox is kept by its own agentbox-shim (src/shim/protocol.h),
 * in <state>/sandboxes/<id>/, which outlives the daemon. The fleet
 * knows them by id and by the lock each shim holds for its life; the
 * store holds their records. A keeper thread:
 *   - notices shims that are gone (their lock is free), reads their
 *     end.json and records the end (reason and detail) in the store, then
 *     removes the directory;
 *   - keeps the warm pool at its size: sandboxes with the default limits,
 *     made ahead (status "pooled" in the store), handed out by
 *     fleet_create() with one store write and one message to the shim.
 * At start, fleet_recover() finds every sandbox the store says is alive:
 * those whose shim still runs are adopted (expiry sent again), the others
 * are recorded as ended.
 *
 * Thread safety: every function may be called from any HTTP thread; the
 * fleet locks what it shares. Each caller passes its own store.
 */
#ifndef AGENTBOX_DAEMON_FLEET_H
#define AGENTBOX_DAEMON_FLEET_H

#include "api/api.h"
#include "api/sandbox-request.h"
#include "base/error.h"
#include "core/sandbox.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>

/* The default size of the warm pool: per CPU, within bounds. */
#define FLEET_POOL_PER_CPU 2
#define FLEET_POOL_MAX	   64
/* How long a shim may take to report its sandbox ready. */
#define FLEET_READY_TIMEOUT_MS 10000
/* How often the keeper looks at the shims and the pool. */
#define FLEET_KEEPER_TICK_MS 50

struct fleet;

struct fleet_config {
	const char *state_dir;
	const char *shim_path;
	const char *db_path; /* the keeper opens its own store */
	unsigned pool_size;  /* 0 = no pool */
};

/* The default pool size of this machine. */
unsigned fleet_pool_default(void);

int fleet_new(const struct fleet_config *cfg, struct fleet **ret, struct error *err);

/* Adopt or end what the store says is alive. Call once, before serving. */
int fleet_recover(struct fleet *f, struct store *st, struct error *err);

/* Start the keeper thread. */
int fleet_start(struct fleet *f, struct error *err);

/* Stop the keeper; sandboxes and their shims go on. Frees f. */
void fleet_free(struct fleet *f);

/* The directory of sandbox id: <state>/sandboxes/<id>. */
void fleet_dir(const struct fleet *f, const char *id, char *buf, size_t size);

/*
 * Make a sandbox for req: from the pool when req has the default limits
 * and one is ready, else built now. *ret gets its stored record. 0, or
 * -EINVAL/-EIO with resp an error response.
 */
int fleet_create(struct fleet *f, struct store *st, const struct sandbox_request *req, int64_t now,
		 struct sandbox_record *ret, struct api_response *resp);

/*
 * The live sandbox id, for a request that needs it running: 0 with *ret
 * filled; or -EINVAL with resp set (404 not_found, 409 sandbox_ended, and
 * when need_running, 409 sandbox_paused).
 */
int fleet_get_live(struct fleet *f, struct store *st, const char *id, bool need_running,
		   struct sandbox_record *ret, struct api_response *resp);

/* Delete: stop the shim, record the end "deleted". resp as above. */
int fleet_delete(struct fleet *f, struct store *st, const char *id, struct api_response *resp);

/* Pause (true) or resume the sandbox. */
int fleet_pause(struct fleet *f, struct store *st, const char *id, bool pause,
		struct api_response *resp);

/* New expiry. */
int fleet_set_expiry(struct fleet *f, struct store *st, const char *id, int64_t expires_at,
		     struct api_response *resp);

/*
 * Send request to the shim of id and take its one reply (and fd, if
 * ret_fd). On a shim error, resp gets the API error that errno means for
 * `what` ("file", "process", "exec") and -EINVAL is returned.
 */
int fleet_call(struct fleet *f, const char *id, json_t *request, int pass_fd, json_t **ret_reply,
	       int *ret_fd, const char *what, struct api_response *resp);

/* The API error a shim's errno means (see fleet_call). */
void fleet_error_response(struct api_response *resp, int errnum, const char *message,
			  const char *what);

/*
 * The whole environment of an exec in sandbox id: the defaults (PATH,
 * HOME, LANG), the sandbox's env, then extra (an object, or NULL). A
 * JSON array of "K=V" (caller decrefs), or NULL.
 */
json_t *fleet_exec_env(struct fleet *f, const char *id, json_t *extra);

#endif
