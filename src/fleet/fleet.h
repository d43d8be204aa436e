/*
 * fleet.h - the interactive sandboxes: where they are, how one is made
 * (from the warm pool or on demand), how one is asked to do something,
 * and how their ends get recorded. A library: it answers with 0 or
 * -errno and a struct error, never with HTTP; the API maps its codes to
 * statuses (api/sandbox-*.c, through the one error table).
 *
 * Each sandbox is kept by its own agentbox-shim (src/shim/protocol.h),
 * in <state>/sandboxes/<id>/ (core/layout.h), which outlives the daemon.
 * The fleet knows them by id and by the lock each shim holds for its
 * life; the store holds their records. A keeper thread (fleet-pool.c):
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
 * Result codes. Every operation returns 0 or one of these, with err
 * saying why:
 *   -ENOENT     no such sandbox (unknown, or still in the pool)
 *   -ESTALE     the sandbox has ended
 *   -EBUSY      the sandbox is paused, and the operation needs it running
 *   -EREMOTEIO  the sandbox's shim refused: err->code is the errno it
 *               sent (ENOENT for a missing file, ESRCH for an ended
 *               process, ECONNREFUSED when the shim is gone, ...), and
 *               err->msg its message
 *   -ECHILD     fleet_create(): the sandbox could not be built
 *   -ETIMEDOUT  fleet_delete(): the shim did not stop in time
 *   -EDQUOT     fleet_create(): the host holds as many sandboxes, or as
 *               much of their memory, as the fleet may give
 *               (fleet_config's sandboxes_max, memory_max)
 *   -EUSERS     fleet_exec_start(), fleet_watch(): as many connections
 *               wait on commands as the fleet allows, in all
 *               (FLEET_WAITERS_MAX) or in this sandbox
 *               (FLEET_WAITERS_PER_SANDBOX_MAX); try again later
 *   -ENOMEM, or any other -errno: an internal failure (the store, the
 *               state directory)
 *
 * The API does not call these functions by name: it is handed the
 * operations as a struct fleet_ops (fleet_shim_ops is the real one), so
 * its handlers are tested against a fake fleet without any shim.
 *
 * Thread safety: every function may be called from any thread; the fleet
 * locks what it shares. Each caller passes its own store (a store is not
 * thread-safe). fds handed out (ret_fd) belong to the caller.
 */
#ifndef AGENTBOX_FLEET_FLEET_H
#define AGENTBOX_FLEET_FLEET_H

#include "base/error.h"
#include "core/quota.h"
#include "core/sandbox.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default size of the warm pool: per CPU, within bounds. */
#define FLEET_POOL_PER_CPU 2
#define FLEET_POOL_MAX	   64
/* How long a shim may take to report its sandbox ready. */
#define FLEET_READY_TIMEOUT_MS 10000
/* How often the keeper looks at the shims and the pool. */
#define FLEET_KEEPER_TICK_MS 50
/* The longest pause before the pool is tried again after it failed to grow. */
#define FLEET_POOL_BACKOFF_MAX_MS 5000
/* How long one request to a shim may wait for its reply. */
#define FLEET_CALL_TIMEOUT_MS 30000
/*
 * Connections that wait on a command's end or output (a blocking exec, an
 * exec or output stream), at most: in all, and in one sandbox. Each holds
 * a thread of the daemon while it waits, so the total stays well below
 * the daemon's connection limit: other clients always get through.
 */
#define FLEET_WAITERS_MAX	      128
#define FLEET_WAITERS_PER_SANDBOX_MAX 32

struct fleet;

/*
 * A warm pool of one image's sandboxes: made with spec_json, and handed
 * to a create whose fleet_spec.pool_image is config. No link is parked
 * for them: one with a network gets its link at the claim.
 */
#define FLEET_IMAGE_POOLS_MAX 16
struct fleet_image_pool {
	char config[80];       /* the image's config digest, "sha256:<hex>" */
	const char *spec_json; /* the canonical spec: default limits, the image's defaults */
	unsigned size;
};

struct fleet_config {
	const char *state_dir;
	const char *shim_path;
	const char *db_path;	       /* the keeper opens its own store */
	const char *default_spec_json; /* the canonical spec of the default limits */
	unsigned pool_size;	       /* 0 = no pool */
	/* Pooled sandboxes kept beyond pool_size with their link made ahead
	 * (parked: up, in no mode's group), for creates with a network, once
	 * one that a pooled sandbox fits has asked for it (0 = none: such
	 * creates take a plain pooled sandbox and make its link then). */
	unsigned pool_network;
	/* Warm pools of images' sandboxes (agentboxd --pool IMAGE=N), kept
	 * after the default pool and the parked links; NULL: none. */
	const struct fleet_image_pool *image_pools;
	size_t nimage_pools;
	/* Put a handed-out parked link, host_if, into its mode's group
	 * (network/link.h): the daemon's, which may. 0 or -errno with err. */
	int (*link_mode)(const char *host_if, bool allow, struct error *err);
	/* The host's egress settings, as sched.h's egress_json: written into
	 * sandbox.json and the claim's "network" request. NULL: none. */
	const char *egress_json;
	/* Admission: the most sandboxes handed out at once, and the most
	 * their memory limits, with those of running tasks
	 * (fleet_admit_task()), may add up to (0 = no bound). The warm pool
	 * is not counted: it is the daemon's own, with the default limits. */
	unsigned sandboxes_max;
	uint64_t memory_max;
	/* Told of what went wrong where no caller waits (the keeper, the
	 * pool, recovery): one line, no newline. NULL = silent. */
	void (*log)(void *data, const char *msg);
	void *log_data;
	/* The wall clock in ms, for the times the store records (when a
	 * pooled sandbox was made, when one ended without saying when).
	 * NULL = CLOCK_REALTIME. Timeouts are not read from it. */
	int64_t (*now_ms)(void);
};

/* The default pool size of this machine. */
unsigned fleet_pool_default(void);

/* A fleet for cfg (its strings must outlive it). 0 or -errno with err. */
int fleet_new(const struct fleet_config *cfg, struct fleet **ret, struct error *err);

/* Adopt or end what the store says is alive. Call once, before serving. */
int fleet_recover(struct fleet *f, struct store *st, struct error *err);

/* Start the keeper thread. */
int fleet_start(struct fleet *f, struct error *err);

/* Stop the keeper and the pool; handed-out sandboxes go on. Frees f; NULL is fine. */
void fleet_free(struct fleet *f);

/*
 * A running task counts against the same totals as the sandboxes: the
 * host's memory (fleet_config.memory_max) and its tenant's quotas
 * (core/quota.h). Admit the task of tenant with spec_json (its canonical
 * spec) under limit, the tenant's quotas (NULL: none): 0 with *ret_amounts
 * what it now holds (one running task, its memory, CPUs and disk), to be
 * given back with fleet_release_task() when it ends; -EXFULL when the
 * tenant's quota would be exceeded (*ret_over says which); -EAGAIN when
 * the host's memory is short. force: count it whatever the totals (a task
 * that runs already). Thread-safe; the scheduler calls them
 * (sched_config.admit, release).
 */
int fleet_admit_task(struct fleet *f, const char *tenant, const struct quota *limit,
		     const char *spec_json, bool force, struct quota *ret_amounts,
		     enum quota_id *ret_over);
void fleet_release_task(struct fleet *f, const char *tenant, const struct quota *amounts);

/*
 * What tenant holds now: its running sandboxes and tasks, and their
 * memory, CPUs and disk (tasks_queued and timeout_s are 0: the store and
 * the requests know those). Thread-safe.
 */
void fleet_tenant_use(struct fleet *f, const char *tenant, struct quota *ret);

/* ---- what a sandbox is asked to be and do ------------------------------ */

/* POST /v1/sandboxes, checked (api/sandbox-request.h). */
struct fleet_spec {
	const char *spec_json;	   /* canonical {"env":{...},"limits":{...}} */
	const char *metadata_json; /* canonical object */
	int64_t timeout_ms;
	bool default_limits; /* a pooled sandbox fits */
	/* The image's config digest when an image's pool fits (its image, as
	 * the image's own defaults ask: cwd, the sandbox user); NULL: the
	 * default pool's (no image) */
	const char *pool_image;
	bool network;	       /* a mode other than none: a parked link suits it */
	uint64_t memory_bytes; /* its memory limit, for admission */
	/*
	 * egress/secret.h's private form, or NULL. Never in the store: it goes
	 * to the shim in a 0600 file that the shim reads and removes before
	 * its sandbox starts (core/layout.h). A sandbox with secrets is never
	 * a pooled one: the CA its proxy signs with is mounted at its start.
	 */
	const char *secrets_json;
	const char *tenant; /* the claimer's tenant; NULL: TENANT_DEFAULT */
	/*
	 * The tenant's quotas (NULL: none): a create that would take it past
	 * one is -EXFULL, and *over (when not NULL) names the quota.
	 */
	const struct quota *quota;
	enum quota_id *over;
};

/* A command to run in a sandbox (POST .../exec, checked). */
struct fleet_exec {
	json_t *command;	/* array of strings */
	json_t *env;		/* object of strings over the sandbox's env, or NULL */
	const char *cwd;	/* absolute; NULL or "": the shim's default */
	int64_t timeout_ms;	/* 0 = none */
	const char *stdin_data; /* NULL = no stdin */
	size_t stdin_len;
	/* fleet_exec_tty(): the terminal's size (1..SPEC_TTY_DIM_MAX); no stdin_data */
	unsigned rows, cols;
};

/* The operations the API uses; each is documented at its fleet_* function. */
struct fleet_ops {
	int (*create)(struct fleet *f, struct store *st, const struct fleet_spec *spec, int64_t now,
		      struct sandbox_record *ret, struct error *err);
	int (*get_live)(struct fleet *f, struct store *st, const char *id, bool need_running,
			struct sandbox_record *ret, struct error *err);
	int (*remove)(struct fleet *f, struct store *st, const char *id, struct error *err);
	int (*pause)(struct fleet *f, struct store *st, const char *id, bool pause,
		     struct error *err);
	int (*set_expiry)(struct fleet *f, struct store *st, const char *id, int64_t expires_at,
			  struct error *err);
	int (*exec_start)(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
			  long *ret_pid, struct error *err);
	int (*exec_wait)(struct fleet *f, int fd, json_t **ret_exit, struct error *err);
	int (*exec_tty)(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
			long *ret_pid, int *ret_master, struct error *err);
	void (*done)(struct fleet *f, const char *id, int fd);
	int (*watch)(struct fleet *f, const char *id, long pid, int *ret_fd, struct error *err);
	int (*processes)(struct fleet *f, const char *id, json_t **ret, struct error *err);
	/* {"mode", "bytes_in", "bytes_out"} of its link now, or JSON null without one */
	int (*network)(struct fleet *f, const char *id, json_t **ret, struct error *err);
	int (*kill)(struct fleet *f, const char *id, long pid, int sig, struct error *err);
	int (*read_output)(struct fleet *f, const char *id, long pid, const char *ext, size_t max,
			   char **ret, size_t *ret_len, bool *ret_more);
	int (*exit_record)(struct fleet *f, const char *id, long pid, json_t **ret_exit);
	int (*open)(struct fleet *f, const char *id, const char *path, const char *mode,
		    int *ret_fd, char *ret_temp, size_t temp_size, struct error *err);
	int (*unlink)(struct fleet *f, const char *id, const char *path, struct error *err);
	int (*rename)(struct fleet *f, const char *id, const char *from, const char *to,
		      struct error *err);
	void (*tenant_use)(struct fleet *f, const char *tenant, struct quota *ret);
	int (*upper)(struct fleet *f, const char *id, int *ret_fd, uint64_t *ret_id_base,
		     struct error *err);
};

/* The fleet of shims: every operation below. */
extern const struct fleet_ops fleet_shim_ops;

/*
 * Make a sandbox for spec: from the pool when spec has the default limits
 * and one is ready, else built now (-ECHILD when that fails: its record
 * ends "failed"). *ret gets its stored record. -EDQUOT when the host holds
 * as many as it may; -EXFULL past the tenant's quota (fleet_spec.quota).
 */
int fleet_create(struct fleet *f, struct store *st, const struct fleet_spec *spec, int64_t now,
		 struct sandbox_record *ret, struct error *err);

/*
 * The live sandbox id: 0 with *ret filled (release it); -ENOENT, -ESTALE,
 * or -EBUSY when need_running and it is paused.
 */
int fleet_get_live(struct fleet *f, struct store *st, const char *id, bool need_running,
		   struct sandbox_record *ret, struct error *err);

/* Delete: stop the shim, wait for it, record the end "deleted". */
int fleet_delete(struct fleet *f, struct store *st, const char *id, struct error *err);

/* Pause (true) or resume the sandbox; the store follows the shim. */
int fleet_pause(struct fleet *f, struct store *st, const char *id, bool pause, struct error *err);

/*
 * A paused sandbox of an image: its overlay's upper directory (*ret_fd,
 * the caller's) and the first host id of its range, for a commit
 * (image/commit.h). A running one is -EREMOTEIO (EBUSY), one without an
 * image -EREMOTEIO (ENOENT).
 */
int fleet_upper(struct fleet *f, const char *id, int *ret_fd, uint64_t *ret_id_base,
		struct error *err);

/* A new expiry, stored first, then told to the shim. */
int fleet_set_expiry(struct fleet *f, struct store *st, const char *id, int64_t expires_at,
		     struct error *err);

/*
 * Start a command: *ret_fd is the connection its shim goes on replying
 * on ("output" notices, then "exit": fleet_exec_wait()), *ret_pid its pid.
 * The connection counts as one waiter until fleet_done() (-EUSERS when
 * there are as many as allowed: the command is not started). A command
 * that could not be executed at all is -EREMOTEIO with the errno of its
 * exec (ENOENT, EACCES, ...) in err->code.
 */
int fleet_exec_start(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
		     long *ret_pid, struct error *err);

/*
 * As fleet_exec_start(), on a terminal of x->rows x x->cols inside the
 * sandbox (shim/protocol.h's exec "tty"): *ret_master is its master, the
 * caller's (read the output, write the input, TIOCSWINSZ to resize;
 * closing it hangs the session up). *ret_fd reports the exit as for exec
 * (no "output" notices: the output files stay empty).
 */
int fleet_exec_tty(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
		   long *ret_pid, int *ret_master, struct error *err);

/*
 * The next notice on an exec's or a watch's connection fd, waiting at
 * most timeout_ms (0: only what is there; -1: forever): {"type":
 * "output"} when the output files grew, {"type": "exit", ...} at the end
 * (caller decrefs). -ETIMEDOUT when nothing came; any other -errno means
 * the connection is over (the shim has gone).
 */
int fleet_next_notice(int fd, int timeout_ms, json_t **ret, struct error *err);

/* Wait on an exec's connection fd for the exit record (caller decrefs). */
int fleet_exec_wait(struct fleet *f, int fd, json_t **ret_exit, struct error *err);

/*
 * A connection on which the shim reports process pid's output and exit,
 * as for exec; one waiter until fleet_done(), as for exec.
 */
int fleet_watch(struct fleet *f, const char *id, long pid, int *ret_fd, struct error *err);

/* Done with the connection fd of sandbox id that exec or watch gave: close it, free its waiter. */
void fleet_done(struct fleet *f, const char *id, int fd);

/* The shim's list of processes (its "processes" array; caller decrefs). */
int fleet_processes(struct fleet *f, const char *id, json_t **ret, struct error *err);
int fleet_network(struct fleet *f, const char *id, json_t **ret, struct error *err);

/* Send signal sig to process pid of the sandbox. */
int fleet_kill(struct fleet *f, const char *id, long pid, int sig, struct error *err);

/*
 * Up to max bytes of process pid's output file (ext LAYOUT_PROC_OUT or
 * LAYOUT_PROC_ERR), malloc'd in *ret (NUL-terminated; an absent file is
 * empty); *ret_more set when the file is longer. 0 or -ENOMEM/-EIO.
 */
int fleet_read_output(struct fleet *f, const char *id, long pid, const char *ext, size_t max,
		      char **ret, size_t *ret_len, bool *ret_more);

/*
 * Process pid's exit record (procs/<pid>.json) in *ret_exit, or NULL
 * while it runs. -ENOENT when the sandbox has no such process.
 */
int fleet_exit_record(struct fleet *f, const char *id, long pid, json_t **ret_exit);

/*
 * Have the sandbox open path, as its own user, inside: mode "read" (a
 * file), "dir" (a directory), or "write": an upload (shim/protocol.h,
 * runtime/serve.h) into a new temporary file beside path, whose path
 * goes to ret_temp. For "write" *ret_fd is not the file but a stream
 * socket to the sandbox's copier, which writes the file from inside, so
 * that its memory is the sandbox's: send the content (EPIPE: the copier
 * failed), shut down the sending side, wait for EOF, then rename it in
 * with fleet_rename() (which answers with the copier's failure, if any:
 * -EREMOTEIO with ENOSPC, ENOMEM, ...) or give it up with fleet_unlink().
 */
int fleet_open(struct fleet *f, const char *id, const char *path, const char *mode, int *ret_fd,
	       char *ret_temp, size_t temp_size, struct error *err);

/* Remove path in the sandbox (an upload's temporary: its copier ends too). */
int fleet_unlink(struct fleet *f, const char *id, const char *path, struct error *err);

/* Rename from to to in the sandbox (an upload's temporary: once its copier is done). */
int fleet_rename(struct fleet *f, const char *id, const char *from, const char *to,
		 struct error *err);

#endif
