/*
 * quota.h - what one tenant may hold at once, and the check against it.
 * Plain data and rules, no system calls, no JSON: the daemon sets the
 * defaults (agentboxd --tenant-quota NAME=VALUE), a tenant's own
 * overrides live in the store (its quotas_json, read by the API), the
 * fleet counts what each tenant holds (fleet/fleet.h) and the API and the
 * scheduler ask quota_check() before a sandbox or a task takes more.
 *
 * Every quota is a whole number in the unit its name says: the count of
 * running sandboxes (handed out and not ended: running or paused), of
 * running tasks, of queued tasks; the total memory (MiB), CPUs
 * (thousandths of a CPU: "cpus": 1.5 in JSON is 1500 here) and disk (MiB)
 * of the running sandboxes and tasks together; and the longest timeout_s
 * one task or sandbox may ask for. QUOTA_NONE means no bound.
 */
#ifndef AGENTBOX_CORE_QUOTA_H
#define AGENTBOX_CORE_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

enum quota_id {
	QUOTA_SANDBOXES = 0, /* running sandboxes */
	QUOTA_TASKS_RUNNING,
	QUOTA_TASKS_QUEUED,
	QUOTA_MEMORY_MB, /* of running sandboxes and tasks, summed */
	QUOTA_CPUS,	 /* thousandths of a CPU, summed likewise */
	QUOTA_DISK_MB,	 /* summed likewise */
	QUOTA_TIMEOUT_S, /* the longest one task or sandbox may ask for */
	QUOTA_COUNT
};

#define QUOTA_NONE UINT64_MAX /* no bound */
/* The largest bound that can be set (beyond it, QUOTA_NONE says "none"). */
#define QUOTA_VALUE_MAX (UINT64_C(1) << 50)

/* Bounds, or amounts held or asked for, by enum quota_id. */
struct quota {
	uint64_t v[QUOTA_COUNT];
};

/* "sandboxes", "tasks_running", ...: the names of the API and of the options. NULL out of range. */
const char *quota_name(enum quota_id id);

/* The id named name, or QUOTA_COUNT for none. */
enum quota_id quota_find(const char *name);

/* Every quota QUOTA_NONE. */
void quota_none(struct quota *q);

/*
 * Parse one "NAME=VALUE" (agentboxd --tenant-quota) into q: VALUE a whole
 * number (for cpus a decimal with at most three places: "1.5") at most
 * QUOTA_VALUE_MAX, or "none". 0, or -EINVAL for an unknown name or a bad
 * value.
 */
int quota_set_text(struct quota *q, const char *text);

/*
 * Does holding use plus ask stay within limit? Only the quotas ask names
 * (nonzero) are checked: a create asks one sandbox and its amounts, so a
 * tenant over a bound that has since been lowered may still end things.
 * QUOTA_TIMEOUT_S compares ask alone against the bound. True, or false
 * with *ret_id the first quota that would be exceeded.
 */
bool quota_check(const struct quota *limit, const struct quota *use, const struct quota *ask,
		 enum quota_id *ret_id);

/* Add (sign > 0) or take away amounts: use += or -= by, never below 0. */
void quota_add(struct quota *use, const struct quota *by, int sign);

#endif
