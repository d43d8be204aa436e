/*
 * errors.h - the API's stable error codes, and the one table (errors.c)
 * that maps each to its HTTP status and wire name.
 *
 * Every error the API sends is
 *	{"error": {"code": "<name>", "message": "<for humans>", "field": "<path>"}}
 * and some codes' own members beside them (quota_exceeded: "quota",
 * "limit", "use", "asked"), with "field" only when one field (a JSON path such as
 * "limits.memory_mb", "command[2]" or env["1X"], or a query parameter's
 * name) is at fault. Names never change once published; messages may.
 *
 * A struct api_error carries one such error from where it is found to
 * where the response is written, in inline buffers (no malloc).
 */
#ifndef AGENTBOX_API_ERRORS_H
#define AGENTBOX_API_ERRORS_H

#include "base/error.h"

#include <stddef.h>

enum api_error_code {
	API_ERR_INVALID_JSON = 0,	/* 400: not JSON, too deep, not an object */
	API_ERR_INVALID_FIELD,		/* 400: wrong type or value */
	API_ERR_MISSING_FIELD,		/* 400: a required field is absent */
	API_ERR_UNKNOWN_FIELD,		/* 400: a field or query parameter we do not know */
	API_ERR_INVALID_ID,		/* 400: a malformed task id in the path */
	API_ERR_BODY_TOO_LARGE,		/* 413 */
	API_ERR_NOT_FOUND,		/* 404: no such route or task */
	API_ERR_METHOD_NOT_ALLOWED,	/* 405 */
	API_ERR_CONFLICT,		/* 409: the task's state forbids it */
	API_ERR_UNAUTHORIZED,		/* 401 */
	API_ERR_FORBIDDEN,		/* 403: an admin's route, asked by a member */
	API_ERR_UNSUPPORTED_MEDIA_TYPE, /* 415: a body that is not application/json */
	API_ERR_INTERNAL,		/* 500 */
	/* interactive sandboxes */
	API_ERR_SANDBOX_ENDED,	     /* 409: the sandbox has ended */
	API_ERR_SANDBOX_PAUSED,	     /* 409: exec and files need it running */
	API_ERR_SANDBOX_FAILED,	     /* 503: a sandbox could not be built */
	API_ERR_TOO_MANY_PROCESSES,  /* 429: the sandbox runs as many as it may */
	API_ERR_PROCESS_NOT_FOUND,   /* 404: no such process in the sandbox */
	API_ERR_PROCESS_ENDED,	     /* 409: the process has ended */
	API_ERR_FILE_NOT_FOUND,	     /* 404: no such file or directory in the sandbox */
	API_ERR_PERMISSION_DENIED,   /* 403: the sandbox user may not (or /proc) */
	API_ERR_NOT_A_FILE,	     /* 400: a directory, FIFO, device or socket */
	API_ERR_FILE_TOO_LARGE,	     /* 413: past API_FILE_MAX */
	API_ERR_NO_SPACE,	     /* 507: the sandbox's disk is full */
	API_ERR_TOO_MANY_REQUESTS,   /* 429: as many requests wait as the daemon allows */
	API_ERR_HOST_FULL,	     /* 503: the host holds as many sandboxes as it may */
	API_ERR_QUEUE_FULL,	     /* 503: as many tasks are queued as the daemon keeps */
	API_ERR_BUSY,		     /* 503: the daemon holds as many request bodies as it may */
	API_ERR_NETWORK_UNAVAILABLE, /* 503: the host could not give a sandbox its network */
	API_ERR_QUOTA_EXCEEDED,	     /* 429: past one of the tenant's quotas (extra names it) */
	API_ERR_RATE_LIMITED,	     /* 429: over a key's rate, or a source's failed auths */
	/* images */
	API_ERR_INVALID_IMAGE, /* 400: an import that is malformed, past a limit or not verified */
	API_ERR_IMAGE_IN_USE,  /* 409: a sandbox or task uses the image */
	API_ERR_REGISTRY,      /* 502: a registry unreachable, refusing us, or answering wrong */
	API_ERR_BOOTSTRAP_FAILED, /* 502: debootstrap failed or ran past its time */
	/* terminals */
	API_ERR_BAD_HANDSHAKE, /* 400: exec with "tty" without a valid WebSocket upgrade */
	/* a task's inputs (inputs.c) */
	API_ERR_TOO_MANY_INPUTS, /* 429: the tenant holds as many untaken inputs as it may */
	API_ERR_COUNT
};

#define API_FIELD_MAX	    256 /* bytes of a field path, NUL included; longer paths are cut */
#define API_MESSAGE_MAX	    256
#define API_ERROR_EXTRA_MAX 192 /* bytes of an error's extra members, NUL included */

struct api_error {
	enum api_error_code code;
	char field[API_FIELD_MAX]; /* "" when no one field is at fault */
	char message[API_MESSAGE_MAX];
	/* more members of the error object, as JSON text ("\"quota\":\"cpus\",..."),
	 * or "": set after api_error_set(), which clears it */
	char extra[API_ERROR_EXTRA_MAX];
	char log[ERROR_MSG_MAX]; /* internal errors only: the cause, for the server's log */
};

/* "invalid_json", ...; NULL out of range. */
const char *api_error_name(enum api_error_code code);

/* 400, ...; 500 out of range. */
int api_error_status(enum api_error_code code);

/*
 * Fill e (may be NULL) with code, field (NULL = none) and a formatted
 * message. Returns -EINVAL, so a check reads
 *	return api_error_set(e, API_ERR_INVALID_FIELD, "limits.pids", "must be ...");
 */
int api_error_set(struct api_error *e, enum api_error_code code, const char *field, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

/*
 * An internal error: the client is told only that one happened; log
 * (may be NULL) and errnum say why, for the server's log. Returns -EIO.
 */
int api_error_internal(struct api_error *e, int errnum, const char *log);

/*
 * Field paths. `parent` is a path or "" (the top level); the result is
 * parent.key when key is a plain identifier, else parent["key"] with the
 * key JSON-escaped and cut to a bounded length; or parent[index].
 */
void api_field_key(char out[API_FIELD_MAX], const char *parent, const char *key);
void api_field_index(char out[API_FIELD_MAX], const char *parent, size_t index);

#endif
