#include "supervisor/spec-json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t limit_u64(const json_t *limits, const char *key, uint64_t dflt)
{
	json_t *v = json_object_get(limits, key);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
							       : dflt;
}

void spec_json_limits(const json_t *limits, struct spec *s)
{
	s->memory_bytes = limit_u64(limits, "memory_mb", SPEC_DEFAULT_MEMORY >> 20) << 20;
	s->pids = limit_u64(limits, "pids", SPEC_DEFAULT_PIDS);
	s->disk_bytes = limit_u64(limits, "disk_mb", SPEC_DEFAULT_DISK >> 20) << 20;
	json_t *cpus = json_object_get(limits, "cpus");
	if (json_is_number(cpus))
		s->cpu_milli = (uint64_t)llround(json_number_value(cpus) * 1000.0);
	json_t *t = json_object_get(limits, "timeout_s");
	if (json_is_number(t))
		s->timeout_ms = (uint64_t)llround(json_number_value(t) * 1000.0);
}

uint64_t spec_json_state_bytes(const json_t *limits)
{
	return limit_u64(limits, "state_mb", SPEC_DEFAULT_STATE >> 20) << 20;
}

int spec_json_env(const json_t *env, size_t extra, const char *where, char ***ret,
		  struct error *err)
{
	if (env && !json_is_object(env))
		return error_set(err, EINVAL, "%s is not an object", where);
	size_t n = json_object_size(env), i = 0;
	char **v = calloc(n + extra + 1, sizeof(char *));
	if (!v)
		return error_set(err, ENOMEM, "out of memory");
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)env, key, val)
	{
		if (!json_is_string(val)) {
			strv_free(v);
			return error_set(err, EINVAL, "%s.%s is not a string", where, key);
		}
		if (asprintf(&v[i], "%s=%s", key, json_string_value(val)) < 0) {
			v[i] = NULL;
			strv_free(v);
			return error_set(err, ENOMEM, "out of memory");
		}
		i++;
	}
	*ret = v;
	return 0;
}

char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}
