/*
 * buf.h - a growable byte buffer, in the manner of git's strbuf.
 *
 * Invariants:
 *
 *  - data is NULL until the first byte is reserved. From then on it is
 *    always NUL-terminated: data[len] == '\0', and len does not count that
 *    NUL. Text in a buffer is a C string; binary data may hold NULs of its
 *    own (trust len, not strlen).
 *  - cap is the size of the allocation, at least len + 1 once data is set.
 *  - max, when not 0, is the most bytes len may reach. Set it before the
 *    first append ({.max = N}); it may be changed later (0 lifts it).
 *  - failed is sticky. The first append that cannot be done sets it to
 *    -ENOMEM (out of memory), -E2BIG (past max, or a size that would
 *    overflow) or -EINVAL (a format vsnprintf() cannot render) and leaves
 *    the contents as they were; every later append then does nothing and
 *    returns the same value. A writer may append many times and check
 *    once, at the end: buf_steal() returns the first failure.
 *
 * A zeroed struct buf is an empty buffer, ready to use: there is no _init.
 * The buffer owns data until buf_steal() hands it over; buf_release() (or
 * _cleanup_buf_) frees it. Nothing here is safe between clone() and exec().
 *
 * Actions return 0 or -errno (the value of failed).
 */
#ifndef AGENTBOX_BASE_BUF_H
#define AGENTBOX_BASE_BUF_H

#include "base/cleanup.h"

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data; /* owned; NULL, or NUL-terminated at data[len] */
	size_t len; /* bytes held, without the NUL */
	size_t cap; /* bytes allocated */
	size_t max; /* most bytes len may reach; 0 = no cap */
	int failed; /* 0, or the first failure: -ENOMEM, -E2BIG or -EINVAL */
};

/* ---- growing ----------------------------------------------------------- */

/*
 * Make room for extra more bytes and the NUL after them. Once it has
 * succeeded, appending up to extra bytes cannot fail. buf_reserve(b, 0)
 * gives an empty buffer its "" (data is no longer NULL).
 */
int buf_reserve(struct buf *b, size_t extra);

/* Append len bytes of data (which may hold NULs). */
int buf_append(struct buf *b, const void *data, size_t len);

/* Append the C string s, without its NUL. */
int buf_puts(struct buf *b, const char *s);

/* Append what printf would print. */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/*
 * Fail the buffer with r (a negative errno) as if an append had failed,
 * for a writer built on it that meets something it cannot write. The
 * first failure stays: returns b->failed.
 */
int buf_fail(struct buf *b, int r);

/* ---- shrinking and handing over ---------------------------------------- */

/*
 * Cut the contents back to their first len bytes (nothing happens when
 * there are not more). This undoes appends, so it clears an -E2BIG
 * failure; any other failure stays.
 */
void buf_truncate(struct buf *b, size_t len);

/* Empty the buffer for reuse, keeping its allocation and max; clears failed. */
void buf_reset(struct buf *b);

/*
 * Hand the bytes over: *ret gets data (NUL-terminated, never NULL: "" for
 * an empty buffer; the caller frees it) and *ret_len, if ret_len is not
 * NULL, its length. Returns 0, or the first failure (-ENOMEM, -E2BIG,
 * -EINVAL; nothing is written to *ret). Either way the buffer is left
 * empty, with its max.
 */
int buf_steal(struct buf *b, char **ret, size_t *ret_len);

/* Free data and empty the buffer (max is kept; failed is cleared). Accepts NULL. */
void buf_release(struct buf *b);

/* A struct buf variable whose data is freed when it leaves scope. */
#define _cleanup_buf_ _cleanup_(buf_release)

#endif
