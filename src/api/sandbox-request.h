/*
 * sandbox-request.h - the bodies of the interactive sandbox routes:
 * POST /v1/sandboxes, .../exec, .../timeout and .../processes/{pid}/kill.
 * Parsed and validated strictly, as task requests are (task-request.h):
 * unknown fields are unknown_field, wrong types invalid_field, each
 * naming its field. limits and env follow the very rules of tasks (the
 * same code checks them); docs/api.md lists every rule. Every body is
 * first held, before it is parsed, to the nesting and the number of
 * values of any request body (TASK_REQUEST_DEPTH_MAX and
 * TASK_REQUEST_VALUES_MAX, task-request.h): past either, invalid_json.
 *
 * Ownership: a parsed request owns what it points at until its release.
 */
#ifndef AGENTBOX_API_SANDBOX_REQUEST_H
#define AGENTBOX_API_SANDBOX_REQUEST_H

#include "api/errors.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SANDBOX_TIMEOUT_DEFAULT_S 300
#define SANDBOX_TIMEOUT_MAX_S	  (7 * 86400)
#define EXEC_TIMEOUT_MAX_S	  86400
#define EXEC_STDIN_MAX		  (1024 * 1024)

/* POST /v1/sandboxes */
struct sandbox_request {
	char *spec_json;     /* canonical {"env":{...},"limits":{...}[,"network":{...}]
				[,"secrets":{...}]}, limits defaulted; network only when
				not none, secrets (public form) only when some */
	char *metadata_json; /* canonical object, "{}" when absent */
	int64_t timeout_ms;
	bool timeout_given;  /* timeout_ms was asked for, not SANDBOX_TIMEOUT_DEFAULT_S */
	bool default_limits; /* limits are all defaults: a pooled sandbox fits */
	uint64_t memory_bytes, disk_bytes, pids; /* the limits, defaulted */
	uint64_t cpu_milli;
	int network;	    /* enum egress_mode (egress/policy.h) */
	char *secrets_json; /* the private "secrets" (egress/secret.h), or NULL: never in
			       spec_json (its "secrets" is the public form); wiped on release */
};

int sandbox_request_parse(const char *body, size_t len, struct sandbox_request *ret,
			  struct api_error *e);
void sandbox_request_release(struct sandbox_request *r);

/* POST /v1/sandboxes/{id}/exec */
struct exec_request {
	json_t *command;  /* array of strings, checked as a task's command */
	json_t *env;	  /* object of strings (checked as a task's env), or NULL */
	char *stdin_data; /* NULL when absent */
	size_t stdin_len;
	char cwd[1024 + 1]; /* absolute; "": the sandbox's image's WorkingDir, else /workspace */
	int64_t timeout_ms; /* 0 = none */
	bool background;
	bool tty;	     /* on a terminal: the request is a WebSocket upgrade */
	unsigned rows, cols; /* the terminal's first size (1..SPEC_TTY_DIM_MAX; 24 x 80) */
	json_t *priv;
};

int exec_request_parse(const char *body, size_t len, struct exec_request *ret, struct api_error *e);
/* The same, from the body's JSON object root (taken, even on failure). */
int exec_request_from_json(json_t *root, struct exec_request *ret, struct api_error *e);
void exec_request_release(struct exec_request *r);

/* POST .../timeout: {"timeout_s": N}, 1..SANDBOX_TIMEOUT_MAX_S, in ms. */
int sandbox_timeout_parse(const char *body, size_t len, int64_t *ret_ms, struct api_error *e);

/* POST .../kill: {"signal": N} (optional; 1..64, default 9). An empty body is {}. */
int process_kill_parse(const char *body, size_t len, int *ret_signal, struct api_error *e);

/*
 * A path for the files routes: absolute, at most 1024 bytes, no NUL (the
 * query decoder refuses an escaped NUL). field names it in the error.
 */
int api_sandbox_path_check(const char *path, const char *field, struct api_error *e);

#endif
