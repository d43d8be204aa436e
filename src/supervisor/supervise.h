/*
 * supervise.h - what every process that keeps a sandbox for the daemon
 * does the same way: agentbox-supervisor (one task attempt) and
 * agentbox-shim (one interactive sandbox).
 *
 * Each works in a directory of its own (0700) that the daemon made, and
 * proves it is alive by holding that directory's lock for its whole life.
 * The daemon reads what it leaves behind, so whatever marks an end is
 * written atomically: a temporary file, fsync, rename, fsync of the
 * directory.
 */
#ifndef AGENTBOX_SUPERVISOR_SUPERVISE_H
#define AGENTBOX_SUPERVISOR_SUPERVISE_H

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The fd on which the daemon hands the locked file over. */
#define SUPERVISE_LOCK_FD 3

/*
 * Hold dirfd's "lock" for as long as we live. The daemon takes it before
 * starting us and hands that open file over as fd 3; run by hand, we
 * take it ourselves. Returns the fd holding it (CLOEXEC), -EBUSY when
 * another process holds it, or -errno.
 */
int supervise_hold_lock(int dirfd);

/*
 * Write "<pid> <start time>\n" of ourselves to name under dirfd (0600,
 * fsync'd): with the start time a pid names one process even after it is
 * reused. 0 or -errno.
 */
int supervise_write_pid_file(int dirfd, const char *name);

/*
 * Read name under dirfd (not a symlink) as one JSON value, duplicate keys
 * refused. NULL with err set (naming the file) on failure.
 */
json_t *supervise_read_json(int dirfd, const char *name, struct error *err);

/*
 * Write j as one line of compact JSON to name under dirfd (0600),
 * replacing it atomically through "<name>.tmp". With durable the data and
 * the rename are fsync'd before we return. 0 or -errno.
 */
int supervise_write_json(int dirfd, const char *name, const json_t *j, bool durable);

#endif
