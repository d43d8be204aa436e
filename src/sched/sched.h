/*
 * sched.h - the scheduler: from queued tasks to supervised attempts and
 * back to a recorded end.
 *
 * One step (sched_step()) does, in order:
 *  1. import what running attempts have made durable (progress lines from
 *     their events journal, up to events.len) into the store;
 *  2. end the attempts that ended: result.json written, or the supervisor
 *     gone without one (lost); retries go back to queued;
 *  3. ask supervisors of cancelled tasks to stop (SIGTERM);
 *  4. claim queued tasks, first in first out, while fewer than
 *     max_running run, and start a supervisor for each.
 *
 * The supervisors are not tied to the daemon: after a restart,
 * sched_recover() finds each running task's supervisor again by the lock
 * it holds on its attempt. An attempt whose lock is free is ended by the
 * next step: from its result.json, or as lost when it has none. One with
 * a free lock, no pid file and no result was claimed by a daemon that
 * stopped before starting it: it never ran, and is started now.
 * Importing is idempotent: journal lines already in the store (counted
 * per attempt) are skipped, so a crash between import and commit never
 * duplicates or drops an event.
 *
 * Single-threaded: one thread calls every function, with its own store.
 */
#ifndef AGENTBOX_SCHED_SCHED_H
#define AGENTBOX_SCHED_SCHED_H

#include "base/error.h"
#include "core/quota.h"
#include "store/store.h"

#include <stdbool.h>
#include <stdint.h>

#define SCHED_MAX_RUNNING_DEFAULT 16
#define SCHED_MAX_RUNNING_MAX	  1024

struct sched_config {
	const char *state_dir;	     /* <state>/tasks/... (core/layout.h) */
	const char *supervisor_path; /* the agentbox-supervisor binary */
	/*
	 * The host's egress settings for a task with a network, written into
	 * attempt.json as "egress" (supervisor/spec-json.h): a JSON object,
	 * {"resolver": "ADDR:PORT", "allow_cidr": [...]}. NULL: none.
	 */
	const char *egress_json;

	/*
	 * Called before a task with a network (its spec has "network") is
	 * started: ready the host for it (daemon/network.c). A failure fails
	 * the attempt's start, so that no sandbox gets a link the host's rules
	 * do not cover. NULL: no task may have a network.
	 */
	int (*network_ready)(void *data, struct error *err);
	unsigned max_running;

	/*
	 * What a person running the daemon should know and no caller gets
	 * back as an error: a task's end that cannot be recorded yet,
	 * progress lines the store refused, an attempt started again after
	 * a restart. msg is one line without a newline or a program name,
	 * valid only during the call. NULL: say nothing.
	 */
	void (*log)(void *data, const char *msg);

	/*
	 * The time stamped on claims and ends, in ms since the epoch. NULL:
	 * the wall clock (wall_clock_ms()).
	 */
	int64_t (*now_ms)(void *data);

	/*
	 * Start the supervisor of the attempt in attempt_dir (which holds
	 * attempt.json), handing it lock_fd as its fd 3, and return without
	 * waiting for it: 0, or -errno (the attempt is then recorded as
	 * lost). lock_fd is the attempt's lock file, flock()ed LOCK_EX by
	 * the scheduler; the scheduler closes its own copy once spawn
	 * returns, so the attempt counts as running exactly while whoever
	 * spawn gave that open file to keeps it. NULL: spawn_helper()
	 * (base/spawn.h) runs supervisor_path with attempt_dir as argument.
	 */
	int (*spawn)(void *data, const char *supervisor_path, const char *attempt_dir, int lock_fd);

	/*
	 * The host's memory and the tenants' quotas, shared with the
	 * interactive sandboxes (fleet_admit_task()): a task starts only once
	 * admit() took what it holds, under limit, its tenant's quotas
	 * (limits(), read at each claim: NULL, none). -EAGAIN: the host's
	 * memory is short, the task stays first in the queue and the queue
	 * waits until something ends. -EXFULL: its tenant is at a quota
	 * (running tasks, memory, CPUs, disk); that tenant's tasks wait and
	 * the other tenants' go on. release() gives back *ret_amounts when its
	 * attempt ends. force: a task found running at start is counted,
	 * whatever the totals. NULL: no bound but max_running.
	 */
	int (*limits)(void *data, struct store *st, const char *tenant, struct quota *ret);
	int (*admit)(void *data, const char *tenant, const struct quota *limit,
		     const char *spec_json, bool force, struct quota *ret_amounts,
		     enum quota_id *ret_over);
	void (*release)(void *data, const char *tenant, const struct quota *amounts);

	void *data; /* handed to log, now_ms, spawn, limits, admit and release */
};

struct sched;

int sched_new(const struct sched_config *cfg, struct store *st, struct sched **ret,
	      struct error *err);
struct sched *sched_free(struct sched *s);

/* At startup: reattach to the supervisors of running tasks (see above). */
int sched_recover(struct sched *s, struct error *err);

/* One pass of the loop above. Errors of one task are recorded on it, not returned. */
int sched_step(struct sched *s, struct error *err);

/* How many attempts are running now. */
unsigned sched_running(const struct sched *s);

#endif
