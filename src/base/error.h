/*
 * error.h - the one error convention of agentbox.
 *
 * Actions return 0 on success or a negative errno value on failure.
 * Predicates return bool and are named as questions (cgroup_is_empty()).
 * Output parameters are named ret_* and are written only on success.
 *
 * Where a person will need to know *why*, the caller passes a struct error.
 * It holds the errno value and a one-line message in an inline buffer, so
 * filling it needs no malloc and is safe in a child between clone() and
 * exec(). Library code fills it and never logs; the caller prints it once.
 *
 *	struct error err = {0};
 *	if (cgroup_create(..., &err) < 0)
 *		fprintf(stderr, "agentbox: %s\n", err.msg);
 *
 * Every error_* function returns -code, so a failing path reads
 *	return error_set(err, EINVAL, "--memory: '%s' is not a size", arg);
 * The struct error pointer may be NULL when the caller needs no message.
 */
#ifndef AGENTBOX_BASE_ERROR_H
#define AGENTBOX_BASE_ERROR_H

#include <stdbool.h>

#define ERROR_MSG_MAX 512

struct error {
	int code;		 /* positive errno value; 0 while unset */
	char msg[ERROR_MSG_MAX]; /* one line, no trailing newline */
};

/* Record code and a formatted message. Returns -code. */
int error_set(struct error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As error_set(), with ": <strerror(code)>" appended. Returns -code. */
int error_set_errno(struct error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an already-set message with more context ("cgroup: " + msg). */
int error_prefix(struct error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline bool error_is_set(const struct error *err)
{
	return err && err->code != 0;
}

#endif
