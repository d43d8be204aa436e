/*
 * uidrange.h - a host uid/gid range of its own for every sandbox.
 *
 * Slot N owns host ids UIDRANGE_BASE + N * UIDRANGE_SIZE and the
 * UIDRANGE_SIZE ids after it; inside the sandbox they appear as 0..65535.
 * The range is never 0 and never the caller's (the base is far above any
 * normal account).
 *
 * A slot is held by an open-file-description lock on byte N of the file
 * <run dir>/uidranges.lock. The kernel drops the lock when its holder
 * exits, however it exits, so a crashed launcher can never leak a slot;
 * and a slot is never handed to two live sandboxes at once.
 */
#ifndef AGENTBOX_RUNTIME_UIDRANGE_H
#define AGENTBOX_RUNTIME_UIDRANGE_H

#include "base/error.h"
#include "core/limits.h"

#include <stdbool.h>
#include <sys/types.h>

#define UIDRANGE_BASE  200000000u
#define UIDRANGE_SIZE  SPEC_IDS
#define UIDRANGE_SLOTS 16384u /* top id: 200000000 + 2^30, below 2^31 */
/*
 * The range just below the sandboxes': the host ids of the files of an
 * image's tree (image/unpack.h's IMAGE_ID_BASE, which must equal it).
 * No sandbox runs as them; a sandbox sees them through an id-mapped
 * mount as its own 0..65535.
 */
#define UIDRANGE_IMAGE_BASE (UIDRANGE_BASE - UIDRANGE_SIZE)

struct uidrange {
	int lock_fd; /* holds the lock; -1 when released */
	unsigned slot;
	uid_t base; /* host id of uid/gid 0 inside the sandbox */
};

/* Take a free slot. The fd is O_CLOEXEC; close it to let go. */
int uidrange_acquire(const char *run_dir, struct uidrange *ret, struct error *err);

/* Release the slot (idempotent). */
void uidrange_release(struct uidrange *r);

/*
 * Is slot held by a live process? lock_fd is any fd of the lock file
 * (for example from uidrange_open_lock()).
 */
bool uidrange_slot_is_busy(int lock_fd, unsigned slot);

/* Open the lock file of run_dir (created if missing). fd or -errno. */
int uidrange_open_lock(const char *run_dir);

#endif
