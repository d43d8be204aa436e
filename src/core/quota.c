#include "core/quota.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const char *const names[QUOTA_COUNT] = {
    [QUOTA_SANDBOXES] = "sandboxes",
    [QUOTA_TASKS_RUNNING] = "tasks_running",
    [QUOTA_TASKS_QUEUED] = "tasks_queued",
    [QUOTA_MEMORY_MB] = "memory_mb",
    [QUOTA_CPUS] = "cpus",
    [QUOTA_DISK_MB] = "disk_mb",
    [QUOTA_TIMEOUT_S] = "timeout_s",
};

const char *quota_name(enum quota_id id)
{
	return (unsigned)id < QUOTA_COUNT ? names[id] : NULL;
}

enum quota_id quota_find(const char *name)
{
	for (int i = 0; name && i < QUOTA_COUNT; i++)
		if (strcmp(names[i], name) == 0)
			return (enum quota_id)i;
	return QUOTA_COUNT;
}

void quota_none(struct quota *q)
{
	for (int i = 0; i < QUOTA_COUNT; i++)
		q->v[i] = QUOTA_NONE;
}

/* digits[.ddd] into a whole number times scale (1 or 1000). -EINVAL if not that. */
static int parse_amount(const char *s, uint64_t scale, uint64_t *ret)
{
	uint64_t whole = 0, frac = 0, fscale = scale;
	size_t n = 0;
	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		if (whole > QUOTA_VALUE_MAX)
			return -EINVAL;
		whole = whole * 10 + (uint64_t)(s[n] - '0');
	}
	if (n == 0)
		return -EINVAL;
	if (s[n] == '.' && scale > 1) {
		size_t d = ++n;
		for (; s[n] >= '0' && s[n] <= '9' && fscale > 1; n++) {
			fscale /= 10;
			frac += (uint64_t)(s[n] - '0') * fscale;
		}
		if (n == d)
			return -EINVAL;
	}
	if (s[n] || whole > QUOTA_VALUE_MAX / scale)
		return -EINVAL;
	*ret = whole * scale + frac;
	return *ret > QUOTA_VALUE_MAX ? -EINVAL : 0;
}

int quota_set_text(struct quota *q, const char *text)
{
	const char *eq = text ? strchr(text, '=') : NULL;
	if (!eq)
		return -EINVAL;
	char name[32];
	size_t len = (size_t)(eq - text);
	if (len >= sizeof(name))
		return -EINVAL;
	memcpy(name, text, len);
	name[len] = '\0';
	enum quota_id id = quota_find(name);
	if (id == QUOTA_COUNT)
		return -EINVAL;
	uint64_t v;
	if (strcmp(eq + 1, "none") == 0)
		v = QUOTA_NONE;
	else if (parse_amount(eq + 1, id == QUOTA_CPUS ? 1000 : 1, &v) < 0)
		return -EINVAL;
	q->v[id] = v;
	return 0;
}

bool quota_check(const struct quota *limit, const struct quota *use, const struct quota *ask,
		 enum quota_id *ret_id)
{
	for (int i = 0; i < QUOTA_COUNT; i++) {
		if (!ask->v[i] || limit->v[i] == QUOTA_NONE)
			continue;
		uint64_t held = i == QUOTA_TIMEOUT_S ? 0 : use->v[i];
		if (held > limit->v[i] || ask->v[i] > limit->v[i] - held) {
			*ret_id = (enum quota_id)i;
			return false;
		}
	}
	return true;
}

void quota_add(struct quota *use, const struct quota *by, int sign)
{
	for (int i = 0; i < QUOTA_COUNT; i++) {
		if (sign > 0)
			use->v[i] += by->v[i];
		else
			use->v[i] -= by->v[i] < use->v[i] ? by->v[i] : use->v[i];
	}
}
