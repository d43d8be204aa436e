/*
 * task-request.h - the body of POST /v1/tasks: parse, validate, and
 * write it back as the canonical spec_json the task is stored with.
 *
 * Validation is strict: unknown fields anywhere are unknown_field, wrong
 * types invalid_field, a missing command missing_field, each naming the
 * field by its JSON path ("limits.memroy_mb", "command[2]",
 * env["1X"]). Checks run in a fixed order (top-level unknown fields,
 * then command, limits, env, files, max_attempts, retry_on, metadata,
 * network), so
 * the same body always gets the same error. docs/api.md lists every rule.
 *
 * The canonical spec_json has every default filled in, so the supervisor
 * never applies a default itself:
 *	{"command":[...],"env":{...},"files":{...},"limits":{"cpus":1,
 *	 "disk_mb":1024,"memory_mb":512,"pids":256,"state_mb":256,"timeout_s":null},
 *	 "max_attempts":1,"metadata":{},"retry_on":["lost"]}
 * and "network" (egress/policy.h's canonical form) only when it is not
 * none, "secrets" (egress/secret.h's public form: hosts and placeholders,
 * never a value) only when there are some.
 * compact, keys sorted, in json-util.h's canonical form. It is itself a
 * valid request, and parsing it gives it back byte for byte, but for
 * "secrets": that form, with placeholders and no values, is read back only
 * by task_request_from_spec_json(). No string in
 * it holds a NUL (\u0000 is refused everywhere, as invalid_field), so any
 * JSON reader, jansson with its default flags included, can read it.
 *
 * struct task_request is the parsed form the supervisor builds a sandbox
 * spec from (task_request_from_spec_json() re-reads a stored spec). It
 * owns everything it points at until task_request_release().
 */
#ifndef AGENTBOX_API_TASK_REQUEST_H
#define AGENTBOX_API_TASK_REQUEST_H

#include "api/errors.h"
#include "core/task.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Named limits of a request (with the SPEC_* limits of core/limits.h).
 *
 * DEPTH_MAX and VALUES_MAX bound every JSON body of the API (tasks, and
 * the sandbox routes: sandbox-request.h), checked before the body is
 * parsed, so that what jansson may build for any body is bounded:
 * VALUES_MAX values of a few hundred bytes each (a few MiB), plus strings
 * no longer than the body. VALUES_MAX (root, array elements and object
 * members, nested ones included) is the largest legitimate task body
 * rounded up to a power of two: the root; command and its SPEC_ARGV_MAX
 * items; limits and its 6 members; env and its SPEC_ENV_MAX entries;
 * files and its TASK_REQUEST_FILES_MAX entries (two values each in the
 * {"base64"} form); max_attempts; retry_on
 * and its 4 names; and metadata, whose compact JSON of at most
 * TASK_REQUEST_METADATA_MAX bytes holds at most half as many values (each
 * takes a byte and a comma or bracket); artifacts and its
 * TASK_ARTIFACTS_PATHS_MAX paths: 15,626 in all (task-request.c asserts it). Every other body takes
 * a part of these fields.
 */
#define TASK_REQUEST_DEPTH_MAX	     64		       /* nesting of the whole body */
#define TASK_REQUEST_VALUES_MAX	     16384	       /* values in the whole body */
#define TASK_REQUEST_ARG_MAX	     (64 * 1024)       /* bytes of one command item */
#define TASK_REQUEST_ARGV_BYTES_MAX  (1024 * 1024)     /* bytes of all command items */
#define TASK_REQUEST_ENV_BYTES_MAX   (512 * 1024)      /* bytes of all KEY=VALUE */
#define TASK_REQUEST_FILES_MAX	     1024	       /* entries in files (= SPEC_FILES_MAX) */
#define TASK_REQUEST_FILES_BYTES_MAX (4 * 1024 * 1024) /* content of all files, decoded */
#define TASK_REQUEST_FILE_NAME_MAX   255	       /* bytes of one path component */
#define TASK_REQUEST_TAR_BYTES_MAX   (4 * 1024 * 1024) /* one "tar_base64", decoded */
#define TASK_REQUEST_METADATA_MAX    (16 * 1024)       /* metadata, canonical JSON */
#define TASK_REQUEST_TIMEOUT_MAX_S   (30 * 86400)      /* = SPEC_TIMEOUT_MAX_MS */
/* Env names starting with this are agentbox's own (invalid_field). */
#define TASK_REQUEST_ENV_RESERVED "AGENTBOX_"

/* The statuses retry_on may name. */
#define TASK_REQUEST_RETRYABLE                                                                     \
	(TASK_STATUS_BIT(TASK_FAILED) | TASK_STATUS_BIT(TASK_OOM_KILLED) |                         \
	 TASK_STATUS_BIT(TASK_TIMED_OUT) | TASK_STATUS_BIT(TASK_LOST))

struct task_request_file {
	const char *path;    /* absolute, canonical, under /workspace/ or /tmp/ */
	const char *content; /* len bytes of UTF-8 text, no NUL; NUL-terminated; NULL for
				base64 content ({"base64": ...}: len bytes once decoded) */
	size_t len;
	/* {"input": ID}: an input (POST /v1/inputs), its bytes on the host; len 0,
	 * content NULL. A stored spec's has its "offset" and "size" too. A
	 * request's {"tar_input": ID} too, whose path is a directory's (it ends
	 * in '/'): api_inputs_take() makes it files. */
	const char *input;
};

struct task_request {
	const char **argv; /* argc items + NULL */
	size_t argc;

	uint64_t memory_bytes; /* from memory_mb */
	uint64_t cpu_milli;    /* from cpus, rounded to the nearest 0.001 */
	uint64_t pids;
	uint64_t disk_bytes;  /* from disk_mb */
	uint64_t state_bytes; /* from state_mb: the task's /state image */
	uint64_t timeout_ms;  /* from timeout_s, rounded to the ms (at least 1); 0 = none */

	const char **env; /* nenv "KEY=VALUE" strings, sorted by key, + NULL */
	size_t nenv;

	struct task_request_file *files; /* sorted by path */
	size_t nfiles;
	size_t ninputs; /* of files, those that name an input */

	int network; /* enum egress_mode (egress/policy.h): none, allow or open */

	uint32_t max_attempts;
	uint32_t retry_on; /* TASK_STATUS_BIT()s within TASK_REQUEST_RETRYABLE */

	char *spec_json; /* the canonical form; NUL-terminated */
	size_t spec_len;

	/*
	 * The "secrets" with their values (egress/secret.h's private form,
	 * compact JSON), or NULL: never in spec_json, which has the public
	 * form. Wiped by task_request_release().
	 */
	char *secrets_json;
	bool stored; /* read back by task_request_from_spec_json() */

	void *priv; /* the parsed tree the pointers above point into */
};

/*
 * Parse and validate len bytes of body. 0 with *ret filled; -EINVAL with
 * e saying what and where (e->code is one of invalid_json, invalid_field,
 * missing_field, unknown_field); -ENOMEM. *ret is untouched on failure.
 */
int task_request_parse(const char *body, size_t len, struct task_request *ret, struct api_error *e);

/* The same, for a spec_json the store holds (NUL-terminated). */
int task_request_from_spec_json(const char *spec_json, struct task_request *ret,
				struct api_error *e);

/* Free everything; r is zeroed and may be reused. */
void task_request_release(struct task_request *r);

#endif
