/*
 * cleanup.h - scope-bound ownership.
 *
 * A variable declared with one of the _cleanup_*_ attributes owns what it
 * holds: it is released when the variable leaves scope. To hand ownership
 * on, move it out with TAKE_PTR() or TAKE_FD(), which return the value and
 * leave NULL or -1 behind, so the cleanup becomes a no-op.
 *
 * Every destructor here accepts the "empty" value (NULL, -1) and does
 * nothing with it, and preserves errno so error paths can return -errno
 * after cleanup has run.
 */
#ifndef AGENTBOX_BASE_CLEANUP_H
#define AGENTBOX_BASE_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p)
{
	int saved = errno;
	free(*(void **)p);
	errno = saved;
}

static inline void cleanup_closep(const int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void cleanup_fclosep(FILE **f)
{
	if (*f) {
		int saved = errno;
		fclose(*f);
		errno = saved;
	}
}

#define _cleanup_(fn)	 __attribute__((cleanup(fn)))
#define _cleanup_free_	 _cleanup_(cleanup_freep)
#define _cleanup_close_	 _cleanup_(cleanup_closep)
#define _cleanup_fclose_ _cleanup_(cleanup_fclosep)

/* Move ownership out of a pointer variable; the variable becomes NULL. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) take_ptr_tmp_ = (p);                                                 \
		(p) = NULL;                                                                        \
		take_ptr_tmp_;                                                                     \
	})

/* Move ownership out of an fd variable; the variable becomes -1. */
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int take_fd_tmp_ = (fd);                                                           \
		(fd) = -1;                                                                         \
		take_fd_tmp_;                                                                      \
	})

/* Close an fd variable now, if it is open, and set it to -1. */
#define CLOSE_FD(fd)                                                                               \
	do {                                                                                       \
		if ((fd) >= 0) {                                                                   \
			close(fd);                                                                 \
			(fd) = -1;                                                                 \
		}                                                                                  \
	} while (0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

#endif
