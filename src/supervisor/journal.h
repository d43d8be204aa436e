/*
 * journal.h - an append-only file of an attempt that others read while it
 * grows (the task's output, its accepted progress events).
 *
 * Appends go to the file at once; journal_sync() makes them durable
 * (fdatasync) and then publishes the durable length in "<name>.len", so a
 * reader (the daemon, the API) never acts on bytes a crash could take back.
 * A journal has a cap: past it, one marker line is written and the rest is
 * counted and dropped, so a flood costs neither memory nor disk.
 */
#ifndef AGENTBOX_SUPERVISOR_JOURNAL_H
#define AGENTBOX_SUPERVISOR_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct journal {
	int fd, len_fd;
	uint64_t size;	    /* bytes written so far */
	uint64_t synced;    /* bytes known durable and published */
	uint64_t cap;	    /* most bytes kept, marker excluded */
	uint64_t dropped;   /* bytes past the cap */
	const char *marker; /* written once when the cap is reached */
};

/* Create (or continue) <dirfd>/<name> and <name>.len. 0 or -errno. */
int journal_open(struct journal *j, int dirfd, const char *name, uint64_t cap, const char *marker);

/* Append len bytes; what passes the cap is dropped (and counted). 0 or -errno. */
int journal_append(struct journal *j, const void *buf, size_t len);

/* Make everything appended durable and publish its length. 0 or -errno. */
int journal_sync(struct journal *j);

/* Has the cap been reached? */
bool journal_is_full(const struct journal *j);

void journal_close(struct journal *j);

#endif
