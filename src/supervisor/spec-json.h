/*
 * spec-json.h - the sandbox spec as the daemon writes it for a supervisor
 * (the "spec" of attempt.json and of sandbox.json), read into a struct
 * spec. The API validated it before the daemon wrote it; what is read
 * here is checked again by spec_validate() before anything is built.
 *
 *	"limits": {"memory_mb", "cpus", "pids", "disk_mb", "timeout_s"}
 *	          absent or non-positive values are the defaults
 *	"env":    {"KEY": "value", ...}
 */
#ifndef AGENTBOX_SUPERVISOR_SPEC_JSON_H
#define AGENTBOX_SUPERVISOR_SPEC_JSON_H

#include "base/error.h"
#include "runtime/spec.h"

#include <jansson.h>

/* Set s's limits from limits (an object, or NULL for the defaults). */
void spec_json_limits(const json_t *limits, struct spec *s);

/* A task's limits.state_mb in bytes (SPEC_DEFAULT_STATE without one). */
uint64_t spec_json_state_bytes(const json_t *limits);

/*
 * Turn env (an object of strings, or NULL) into "KEY=VALUE" strings, in a
 * NULL-terminated array with room for extra more entries before its NULL.
 * The caller owns the array and its strings (strv_free()). where names
 * the field in errors ("attempt.json: spec.env"). 0 or -errno with err.
 */
int spec_json_env(const json_t *env, size_t extra, const char *where, char ***ret,
		  struct error *err);

/* Free a NULL-terminated array of strings and the strings. NULL. */
char **strv_free(char **v);

#endif
