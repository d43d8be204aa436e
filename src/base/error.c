#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>

#define EIO_FALLBACK EIO

static int error_vset(struct error *err, int code, bool with_errno, const char *fmt, va_list ap)
{
	if (code <= 0)
		code = EIO_FALLBACK;
	if (!err)
		return -code;
	err->code = code;
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (with_errno && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(code));
	return -code;
}

int error_set(struct error *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, false, fmt, ap);
	va_end(ap);
	return r;
}

int error_set_errno(struct error *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, true, fmt, ap);
	va_end(ap);
	return r;
}

int error_prefix(struct error *err, const char *fmt, ...)
{
	if (!err)
		return -EIO_FALLBACK;
	char prefix[ERROR_MSG_MAX];
	char old[ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	size_t plen = strnlen(prefix, sizeof(err->msg) - 1);
	size_t olen = strnlen(old, sizeof(old) - 1);
	if (plen + olen > sizeof(err->msg) - 1)
		olen = sizeof(err->msg) - 1 - plen;
	memcpy(err->msg, prefix, plen);
	memcpy(err->msg + plen, old, olen);
	err->msg[plen + olen] = '\0';
	if (err->code == 0)
		err->code = EIO_FALLBACK;
	return -err->code;
}
