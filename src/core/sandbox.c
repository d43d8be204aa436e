#include "core/sandbox.h"

#include "core/id.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[SANDBOX_STATUS_COUNT] = {
    [SANDBOX_POOLED] = "pooled",
    [SANDBOX_RUNNING] = "running",
    [SANDBOX_PAUSED] = "paused",
    [SANDBOX_ENDED] = "ended",
};

/* allowed[from] is the set of statuses `from` may move to. */
#define B(s) SANDBOX_STATUS_BIT(s)
static const uint32_t allowed[SANDBOX_STATUS_COUNT] = {
    [SANDBOX_POOLED] = B(SANDBOX_RUNNING) | B(SANDBOX_ENDED),
    [SANDBOX_RUNNING] = B(SANDBOX_PAUSED) | B(SANDBOX_ENDED),
    [SANDBOX_PAUSED] = B(SANDBOX_RUNNING) | B(SANDBOX_ENDED),
    /* ended: nothing */
};
#undef B

static const char *const end_reasons[] = {"expired", "deleted", "died", "failed", "stopped"};

const char *sandbox_status_name(enum sandbox_status s)
{
	return (unsigned)s < SANDBOX_STATUS_COUNT ? status_names[s] : NULL;
}

int sandbox_status_parse(const char *name, enum sandbox_status *ret)
{
	for (int s = 0; s < SANDBOX_STATUS_COUNT; s++)
		if (name && strcmp(name, status_names[s]) == 0) {
			*ret = (enum sandbox_status)s;
			return 0;
		}
	return -EINVAL;
}

bool sandbox_transition_is_allowed(enum sandbox_status from, enum sandbox_status to)
{
	if ((unsigned)from >= SANDBOX_STATUS_COUNT || (unsigned)to >= SANDBOX_STATUS_COUNT)
		return false;
	return allowed[from] & SANDBOX_STATUS_BIT(to);
}

bool sandbox_end_reason_is_valid(const char *reason)
{
	for (size_t i = 0; reason && i < sizeof(end_reasons) / sizeof(end_reasons[0]); i++)
		if (strcmp(reason, end_reasons[i]) == 0)
			return true;
	return false;
}

#define ID_PREFIX "sbx_"
_Static_assert(sizeof(ID_PREFIX) - 1 + ID_RANDOM_CHARS < SANDBOX_ID_SIZE, "a sandbox id fits");

int sandbox_id_new(char id[SANDBOX_ID_SIZE])
{
	return id_new(ID_PREFIX, id, SANDBOX_ID_SIZE);
}

bool sandbox_id_is_valid(const char *s)
{
	return id_is_valid(ID_PREFIX, s);
}

void sandbox_record_release(struct sandbox_record *s)
{
	free(s->end_reason);
	free(s->end_detail);
	free(s->spec_json);
	free(s->metadata_json);
	s->end_reason = s->end_detail = s->spec_json = s->metadata_json = NULL;
}
