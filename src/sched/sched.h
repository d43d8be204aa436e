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
 * sched_recover() finds each running task's supervisor again (pid and
 * start time in its attempt directory), or records the attempt as lost.
 * Importing is idempotent: journal lines already in the store (counted
 * per attempt) are skipped, so a crash between import and commit never
 * duplicates or drops an event.
 *
 * Single-threaded: one thread calls every function, with its own store.
 */
#ifndef AGENTBOX_SCHED_SCHED_H
#define AGENTBOX_SCHED_SCHED_H

#include "base/error.h"
#include "store/store.h"

#include <stdbool.h>
#include <stdint.h>

#define SCHED_MAX_RUNNING_DEFAULT 16
#define SCHED_MAX_RUNNING_MAX	  1024

struct sched_config {
	const char *state_dir;	     /* <state>/tasks/... (see supervisor/attempt.h) */
	const char *supervisor_path; /* the agentbox-supervisor binary */
	unsigned max_running;
};

struct sched;

int sched_new(const struct sched_config *cfg, struct store *st, struct sched **ret,
	      struct error *err);
struct sched *sched_free(struct sched *s);

/* At startup: reattach to the supervisors of running tasks. */
int sched_recover(struct sched *s, struct error *err);

/* One pass of the loop above. Errors of one task are recorded on it, not returned. */
int sched_step(struct sched *s, struct error *err);

/* How many attempts are running now. */
unsigned sched_running(const struct sched *s);

#endif
