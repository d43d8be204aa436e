/*
 * progress.h - the lines a task writes to its progress channel, turned
 * into journal records.
 *
 * Each line must be one JSON object of at most PROGRESS_LINE_MAX bytes.
 * An accepted line becomes {"line": N, "time": MS, "data": {...}} in the
 * events journal (N counts accepted lines from 1, gapless). Malformed and
 * oversized lines are counted, never kept, and never stop anything; so are
 * lines past the journal's cap (ATTEMPT_EVENTS_CAP): whatever the task
 * writes, the supervisor's memory and disk stay bounded.
 */
#ifndef AGENTBOX_SUPERVISOR_PROGRESS_H
#define AGENTBOX_SUPERVISOR_PROGRESS_H

#include "supervisor/journal.h"

#include <stddef.h>
#include <stdint.h>

#define PROGRESS_LINE_MAX (64 * 1024)

struct progress {
	struct journal *events;
	char line[PROGRESS_LINE_MAX + 1];
	size_t len;
	bool skipping;	    /* inside an oversized line, until its newline */
	uint64_t accepted;  /* the last line number written */
	uint64_t malformed; /* not one JSON object */
	uint64_t oversized; /* longer than PROGRESS_LINE_MAX */
	uint64_t dropped;   /* well-formed, but past the events journal's cap */
	uint64_t egress;    /* of the lines written: the network's refusals */
	int64_t (*now_ms)(void);
};

/* Feed bytes as they come from the channel. 0, or -errno if the journal fails. */
int progress_feed(struct progress *p, const char *buf, size_t len);

/* The channel closed: a last line without its newline counts too. */
int progress_finish(struct progress *p);

/*
 * One refusal of the sandbox's network (a line of the relay's events file,
 * network/relay.h) into the events journal, numbered with the progress
 * lines, as {"line", "time", "type": "egress_denied", "data"}: the
 * scheduler stores it as a task event of that type. A line that is not a
 * JSON object is skipped; one past the journal's cap is dropped. 0 or -errno.
 */
int progress_egress(struct progress *p, const char *line, size_t len);

#endif
