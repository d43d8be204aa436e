/*
 * sandbox.h - the domain model of an interactive sandbox. Plain data and
 * rules, no system calls: the store persists it, the daemon drives it,
 * the API shows it.
 *
 * An interactive sandbox stays up between requests, until it is ended.
 * Its lifecycle is one table (sandbox_transition_is_allowed()):
 *
 *	pooled ──claim──▶ running ◀──resume / pause──▶ paused
 *	   │                 │                            │
 *	   └─────────────────┴──────────end──────────────┴──▶ ended
 *
 * A pooled sandbox was made ahead of time, in the warm pool, and has not
 * been handed out: users never see it. Ended is final: nothing leaves it,
 * and end_reason says why it ended (sandbox_end_reason_is_valid()).
 */
#ifndef AGENTBOX_CORE_SANDBOX_H
#define AGENTBOX_CORE_SANDBOX_H

#include "core/tenant.h"

#include <stdbool.h>
#include <stdint.h>

enum sandbox_status {
	SANDBOX_POOLED = 0, /* made ahead, in the warm pool; not handed out */
	SANDBOX_RUNNING,
	SANDBOX_PAUSED, /* frozen; resumes as running */
	SANDBOX_ENDED,
	SANDBOX_STATUS_COUNT
};

/* Named limits of the sandbox model. */
#define SANDBOX_ID_SIZE	     32		   /* "sbx_" + 26 base32 characters + NUL */
#define SANDBOX_METADATA_MAX (64 * 1024)   /* bytes of metadata_json */
#define SANDBOX_SPEC_MAX     (1024 * 1024) /* bytes of spec_json */

/* The bit of status in a set of statuses. */
#define SANDBOX_STATUS_BIT(s) (1u << (s))

/* "pooled", "running", "paused", "ended"; NULL for an out-of-range value. */
const char *sandbox_status_name(enum sandbox_status s);

/* The inverse of sandbox_status_name(). 0, or -EINVAL for an unknown name. */
int sandbox_status_parse(const char *name, enum sandbox_status *ret);

/* May a sandbox move from `from` to `to`? The one lifecycle table. */
bool sandbox_transition_is_allowed(enum sandbox_status from, enum sandbox_status to);

/*
 * Is reason one of the reasons a sandbox ends for?
 *	"expired"  its expires_at passed
 *	"deleted"  a user deleted it
 *	"died"     its init went away on its own (killed, OOM)
 *	"failed"   agentbox could not make or keep it
 *	"stopped"  agentbox shut it down (the daemon stopping, the pool shrinking)
 */
bool sandbox_end_reason_is_valid(const char *reason);

/* A fresh random id, "sbx_" + 26 base32 characters. 0 or -errno. */
int sandbox_id_new(char id[SANDBOX_ID_SIZE]);

/* Is s a well-formed sandbox id (the API's first check on a path)? */
bool sandbox_id_is_valid(const char *s);

/*
 * A sandbox as stored. Strings are owned by the struct and freed by
 * sandbox_record_release(); the JSON strings are compact, already validated
 * objects.
 */
struct sandbox_record {
	char id[SANDBOX_ID_SIZE];
	char tenant[TENANT_NAME_SIZE]; /* the owning tenant; a pooled sandbox's is TENANT_DEFAULT */
	enum sandbox_status status;
	int64_t created_at;  /* ms since the epoch; once claimed, when it was handed out */
	int64_t expires_at;  /* ms since the epoch; 0 = never */
	int64_t ended_at;    /* 0 = not ended */
	char *end_reason;    /* NULL until ended; then a sandbox_end_reason_is_valid() word */
	char *end_detail;    /* NULL, or more about the end (an error message) */
	char *spec_json;     /* limits and env, canonical; never changes */
	char *metadata_json; /* the user's; "{}" when none */
};

void sandbox_record_release(struct sandbox_record *s);

#endif
