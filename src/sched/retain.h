/*
 * retain.h - removing what ended: agentboxd --retain's passes over ended
 * tasks and sandbox records, and, at the start, the task directories no
 * row names.
 *
 * A task is removed rows first, in one transaction (store_task_delete():
 * its row, spec and events), then its directory (core/layout.h's
 * <state>/tasks/<id>/, whatever it holds: attempts, /state's image,
 * secrets, artifacts). A crash between the two leaves a directory that
 * no row names, never a row whose files are gone, and retain_sweep() at
 * the next start removes that directory. DELETE /v1/tasks/{id}
 * (api/tasks.c) removes a task in the same order.
 *
 * A sandbox's record is removed with store_sandbox_delete(), then its
 * directory if one is left (the fleet removes it when the sandbox ends).
 *
 * Time is passed in (now, ms since the epoch): the caller's clock, a
 * test's own. Each call uses the store it is given, from one thread.
 * Library code: nothing is printed; what went wrong is in err.
 */
#ifndef AGENTBOX_SCHED_RETAIN_H
#define AGENTBOX_SCHED_RETAIN_H

#include "base/error.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

/* agentboxd --retain's bounds: a second to a hundred years. */
#define RETAIN_MIN_MS ((int64_t)1000)
#define RETAIN_MAX_MS ((int64_t)36500 * 86400 * 1000)
/* Tasks, and as many sandbox records, one pass removes at most. */
#define RETAIN_BATCH 100
/* The pause between passes: a tenth of the retention, within these. */
#define RETAIN_TICK_MIN_MS 1000
#define RETAIN_TICK_MAX_MS 60000

/*
 * Remove ended task id: its rows, then its directory. -EBUSY if it has
 * not ended, -ENOENT if there is no such task (nothing is removed then);
 * another -errno with err when the rows went but the files could not
 * (they are removed at the next start).
 */
int retain_task_remove(struct store *st, const char *state_dir, const char *id, struct error *err);

struct retain_counts {
	size_t tasks;	  /* tasks removed */
	size_t sandboxes; /* sandbox records removed */
};

/*
 * One pass: remove at most batch (1..STORE_LIST_MAX) tasks that ended
 * before now - retain_ms, the earliest ended first, and at most batch
 * ended sandbox records as old. *ret gets what was removed (a full batch
 * of either: there may be more, the caller may go again at once). One
 * that cannot be removed (its files) does not stop the pass: 0, with the
 * first failure in err (err->code set). -errno only when the store
 * cannot be read.
 */
int retain_pass(struct store *st, const char *state_dir, int64_t now, int64_t retain_ms,
		size_t batch, struct retain_counts *ret, struct error *err);

/* The pause between passes for retain_ms: retain_ms / 10 within the bounds above. */
int64_t retain_tick_ms(int64_t retain_ms);

/*
 * At the start, before anything makes a task: remove every directory of
 * <state>/tasks/ named as a task id (core/id.h) that names no task in
 * the store, which a crash between a removal's rows and its files left,
 * or between a submit's secrets and its row. *ret_removed (may be NULL)
 * gets how many. 0, or -errno when the directory or the store cannot be
 * read (what could not be removed is skipped, the first failure in err).
 */
int retain_sweep(struct store *st, const char *state_dir, size_t *ret_removed, struct error *err);

#endif
