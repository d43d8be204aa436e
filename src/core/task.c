#include "core/task.h"

#include "core/id.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[TASK_STATUS_COUNT] = {
    [TASK_QUEUED] = "queued",	      [TASK_RUNNING] = "running",
    [TASK_SUCCEEDED] = "succeeded",   [TASK_FAILED] = "failed",
    [TASK_OOM_KILLED] = "oom_killed", [TASK_TIMED_OUT] = "timed_out",
    [TASK_CANCELLED] = "cancelled",   [TASK_LOST] = "lost",
};

/* allowed[from] is the set of statuses `from` may move to. */
#define B(s) TASK_STATUS_BIT(s)
#define ENDS                                                                                       \
	(B(TASK_SUCCEEDED) | B(TASK_FAILED) | B(TASK_OOM_KILLED) | B(TASK_TIMED_OUT) |             \
	 B(TASK_CANCELLED) | B(TASK_LOST))
static const uint32_t allowed[TASK_STATUS_COUNT] = {
    [TASK_QUEUED] = B(TASK_RUNNING) | B(TASK_CANCELLED), [TASK_RUNNING] = ENDS | B(TASK_QUEUED),
    /* the ends: nothing */
};
#undef B

const char *task_status_name(enum task_status s)
{
	return (unsigned)s < TASK_STATUS_COUNT ? status_names[s] : NULL;
}

int task_status_parse(const char *name, enum task_status *ret)
{
	for (int s = 0; s < TASK_STATUS_COUNT; s++)
		if (name && strcmp(name, status_names[s]) == 0) {
			*ret = (enum task_status)s;
			return 0;
		}
	return -EINVAL;
}

bool task_status_is_final(enum task_status s)
{
	return (unsigned)s < TASK_STATUS_COUNT && s != TASK_QUEUED && s != TASK_RUNNING;
}

bool task_transition_is_allowed(enum task_status from, enum task_status to)
{
	if ((unsigned)from >= TASK_STATUS_COUNT || (unsigned)to >= TASK_STATUS_COUNT)
		return false;
	return allowed[from] & TASK_STATUS_BIT(to);
}

enum task_status task_after_attempt(enum task_status end, uint32_t attempt, uint32_t max_attempts,
				    uint32_t retry_on)
{
	bool retry = end != TASK_SUCCEEDED && end != TASK_CANCELLED &&
		     (retry_on & TASK_STATUS_BIT(end)) && attempt < max_attempts;
	return retry ? TASK_QUEUED : end;
}

#define ID_PREFIX "tsk_"
_Static_assert(sizeof(ID_PREFIX) - 1 + ID_RANDOM_CHARS < TASK_ID_SIZE, "a task id fits");

int task_id_new(char id[TASK_ID_SIZE])
{
	return id_new(ID_PREFIX, id, TASK_ID_SIZE);
}

bool task_id_is_valid(const char *s)
{
	return id_is_valid(ID_PREFIX, s);
}

void task_release(struct task *t)
{
	free(t->spec_json);
	free(t->progress_json);
	free(t->error);
	t->spec_json = t->progress_json = t->error = NULL;
}

const char *task_event_type_name(enum task_event_type t)
{
	switch (t) {
	case TASK_EVENT_PROGRESS:
		return "progress";
	case TASK_EVENT_STATUS:
		return "status";
	case TASK_EVENT_EGRESS_DENIED:
		return "egress_denied";
	}
	return NULL;
}
