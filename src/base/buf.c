/*
 * buf.c - the growable byte buffer of buf.h.
 *
 * The allocation starts at BUF_FIRST bytes and doubles, but never past
 * max + 1 when there is a max.
 */
#include "base/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST 256

/* Record the first failure; return the one that stays. */
static int fail(struct buf *b, int r)
{
	if (!b->failed)
		b->failed = r;
	return b->failed;
}

int buf_fail(struct buf *b, int r)
{
	return fail(b, r);
}

int buf_reserve(struct buf *b, size_t extra)
{
	if (b->failed)
		return b->failed;
	/* below SIZE_MAX / 2, doubling the allocation cannot overflow */
	if (extra > SIZE_MAX / 2 - b->len || (b->max && b->len + extra > b->max))
		return fail(b, -E2BIG);
	size_t need = b->len + extra + 1;
	if (b->data && need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : BUF_FIRST;
	while (cap < need)
		cap *= 2;
	if (b->max && cap > b->max + 1)
		cap = b->max + 1; /* need <= max + 1: checked above */
	char *p = realloc(b->data, cap);
	if (!p)
		return fail(b, -ENOMEM);
	if (!b->data)
		p[0] = '\0';
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
	int r = buf_reserve(b, len);
	if (r < 0)
		return r;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	if (b->failed)
		return b->failed;
	/* most pieces are short: format them once, on the stack */
	char small[128];
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	int r = 0;
	if (n < 0)
		r = fail(b, -EINVAL);
	else if ((size_t)n < sizeof(small))
		r = buf_append(b, small, (size_t)n);
	else if ((r = buf_reserve(b, (size_t)n)) == 0) {
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
		b->len += (size_t)n;
	}
	va_end(again);
	return r;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

void buf_truncate(struct buf *b, size_t len)
{
	if (b->failed == -E2BIG)
		b->failed = 0;
	if (len < b->len) {
		b->len = len;
		b->data[len] = '\0';
	}
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
	b->failed = 0;
}

int buf_steal(struct buf *b, char **ret, size_t *ret_len)
{
	int r = buf_reserve(b, 0); /* an empty buffer still gets its "" */
	if (r < 0) {
		buf_release(b);
		return r;
	}
	*ret = b->data;
	if (ret_len)
		*ret_len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return 0;
}

void buf_release(struct buf *b)
{
	if (!b)
		return;
	int saved = errno;
	free(b->data);
	errno = saved;
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}
