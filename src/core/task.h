/*
 * task.h - the domain model of a durable task. Plain data and rules, no
 * system calls: the store persists it, the scheduler drives it, the API
 * shows it.
 *
 * A task is a command with limits, run to its end in a fresh sandbox per
 * attempt. Its lifecycle is one table (task_transition_is_allowed()):
 *
 *	queued ──claim──▶ running ──attempt ends──▶ succeeded | failed |
 *	  │                  │                       oom_killed | timed_out |
 *	  └──cancel──▶ cancelled ◀──cancel──┘         cancelled | lost
 *	                     │
 *	                     └──ends in retry_on, attempts left──▶ queued
 *
 * The six end states are final: nothing leaves them. An attempt that ends
 * for a reason listed in retry_on goes back to queued for a new attempt
 * while attempt < max_attempts (task_after_attempt()).
 */
#ifndef AGENTBOX_CORE_TASK_H
#define AGENTBOX_CORE_TASK_H

#include "core/tenant.h"

#include <stdbool.h>
#include <stdint.h>

enum task_status {
	TASK_QUEUED = 0,
	TASK_RUNNING,
	TASK_SUCCEEDED,
	TASK_FAILED,	 /* exited non-zero or killed by a signal of its own */
	TASK_OOM_KILLED, /* read from the cgroup's oom_kill counter */
	TASK_TIMED_OUT,
	TASK_CANCELLED,
	TASK_LOST, /* its supervisor or machine vanished */
	TASK_STATUS_COUNT
};

/* Named limits of the task model. */
#define TASK_ID_SIZE	      32 /* "tsk_" + 26 base32 characters + NUL */
#define TASK_MAX_ATTEMPTS_MAX 100
#define TASK_DEFAULT_ATTEMPTS 1

/* The bit of status in a retry_on set. */
#define TASK_STATUS_BIT(s) (1u << (s))
/* Default retry_on: only a lost supervisor is retried. */
#define TASK_DEFAULT_RETRY_ON TASK_STATUS_BIT(TASK_LOST)

/* "queued", "running", ...; NULL for an out-of-range value. */
const char *task_status_name(enum task_status s);

/* The inverse of task_status_name(). 0, or -EINVAL for an unknown name. */
int task_status_parse(const char *name, enum task_status *ret);

/* Is s an end state (nothing leaves it)? */
bool task_status_is_final(enum task_status s);

/* May a task move from `from` to `to`? The one lifecycle table. */
bool task_transition_is_allowed(enum task_status from, enum task_status to);

/*
 * The status a running task takes when its attempt ended with `end` (a
 * final status): queued again if end is in retry_on and attempt <
 * max_attempts, else end itself.
 */
enum task_status task_after_attempt(enum task_status end, uint32_t attempt, uint32_t max_attempts,
				    uint32_t retry_on);

/* A fresh random id, "tsk_" + 26 base32 characters. 0 or -errno. */
int task_id_new(char id[TASK_ID_SIZE]);

/* Is s a well-formed task id (the API's first check on a path)? */
bool task_id_is_valid(const char *s);

/*
 * A task as stored. Strings are owned by the struct and freed by
 * task_release(); the JSON strings are compact, already validated text.
 */
struct task {
	char id[TASK_ID_SIZE];
	char tenant[TENANT_NAME_SIZE]; /* the owning tenant (tenant_name_is_valid()) */
	enum task_status status;
	uint32_t attempt; /* 0 before the first start; fences stale writers */
	uint32_t max_attempts;
	uint32_t retry_on;     /* TASK_STATUS_BIT()s */
	bool cancel_requested; /* set while running; the scheduler kills it */
	int exit_code;	       /* of the last attempt; -1 when there is none */
	int64_t created_at;    /* ms since the epoch */
	int64_t started_at;    /* first start; 0 = never */
	int64_t finished_at;   /* 0 = not final */
	char *spec_json;       /* command, limits, env, files, metadata */
	char *progress_json;   /* every progress event merged; "{}" at first */
	char *error;	       /* NULL, or why the task ended badly */
};

void task_release(struct task *t);

enum task_event_type {
	TASK_EVENT_PROGRESS = 0,  /* a JSON object the task wrote */
	TASK_EVENT_STATUS,	  /* {"status": ..., "exit_code": ..., "error": ...} */
	TASK_EVENT_EGRESS_DENIED, /* {"host", "address", "port", "reason"}: network/relay.h */
};

const char *task_event_type_name(enum task_event_type t);

struct task_event {
	int64_t seq; /* per task, from 1, gapless */
	uint32_t attempt;
	enum task_event_type type;
	int64_t time; /* ms since the epoch */
	const char *data_json;
};

#endif
