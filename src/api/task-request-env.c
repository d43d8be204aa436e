/*
 * task-request-env.c - what a task request gives its sandbox: env and
 * files. Part of task-request.c's validation (see task-request.h).
 */
#include "api/task-request-internal.h"
#include "core/limits.h"

#include "base/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Order "KEY=VALUE" strings by KEY. */
static int env_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t xl = strcspn(x, "="), yl = strcspn(y, "=");
	int c = memcmp(x, y, xl < yl ? xl : yl);
	return c ? c : (xl > yl) - (xl < yl);
}

int task_request_parse_env(json_t *env, struct task_request *r, struct api_error *e)
{
	if (!env)
		return (r->env = calloc(1, sizeof(*r->env))) ? 0 : -ENOMEM;
	if (!json_is_object(env))
		return INVALID(e, "env", "env must be an object of strings");
	size_t n = json_object_size(env), total = 0;
	if (n > SPEC_ENV_MAX)
		return INVALID(e, "env", "env has more than %d entries", SPEC_ENV_MAX);
	r->env = calloc(n + 1, sizeof(*r->env));
	if (!r->env)
		return -ENOMEM;
	const char *key;
	json_t *v;
	json_object_foreach(env, key, v)
	{
		char field[API_FIELD_MAX];
		api_field_key(field, "env", key);
		if (!env_name_is_valid(key, strlen(key)))
			return INVALID(e, field, "env names must match [A-Za-z_][A-Za-z0-9_]*");
		if (strncmp(key, TASK_REQUEST_ENV_RESERVED, strlen(TASK_REQUEST_ENV_RESERVED)) == 0)
			return INVALID(e, field, "env names starting with %s are reserved",
				       TASK_REQUEST_ENV_RESERVED);
		if (!json_is_string(v))
			return INVALID(e, field, "%s must be a string", field);
		size_t klen = strlen(key), vlen = json_string_length(v);
		if (memchr(json_string_value(v), '\0', vlen))
			return INVALID(e, field, "%s must not contain a NUL character", field);
		if (klen + 1 + vlen > SPEC_ENV_ENTRY_MAX)
			return INVALID(e, field, "%s=VALUE is longer than %d bytes", key,
				       SPEC_ENV_ENTRY_MAX);
		total += klen + 2 + vlen;
		if (total > TASK_REQUEST_ENV_BYTES_MAX)
			return INVALID(e, "env", "env is longer than %d bytes in all",
				       TASK_REQUEST_ENV_BYTES_MAX);
		char *kv = malloc(klen + vlen + 2);
		if (!kv)
			return -ENOMEM;
		memcpy(kv, key, klen);
		kv[klen] = '=';
		memcpy(kv + klen + 1, json_string_value(v), vlen + 1);
		r->env[r->nenv++] = kv;
	}
	if (r->nenv)
		qsort(r->env, r->nenv, sizeof(*r->env), env_cmp);
	return 0;
}

/* An absolute canonical path strictly under /workspace/ or /tmp/? */
static const char *file_path_problem(const char *path)
{
	if (strlen(path) > SPEC_PATH_MAX)
		return "is longer than the path limit";
	if (strncmp(path, "/workspace/", 11) != 0 && strncmp(path, "/tmp/", 5) != 0)
		return "must be under /workspace/ or /tmp/";
	for (const char *p = path + 1;;) {
		size_t n = strcspn(p, "/");
		if (n == 0)
			return "must not have empty components (// or a trailing /)";
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return "must not have . or .. components";
		if (n > TASK_REQUEST_FILE_NAME_MAX)
			return "has a component longer than 255 bytes";
		if (p[n] == '\0')
			return NULL;
		p += n + 1;
	}
}

static int file_cmp(const void *a, const void *b)
{
	return strcmp(((const struct task_request_file *)a)->path,
		      ((const struct task_request_file *)b)->path);
}

int task_request_parse_files(json_t *files, struct task_request *r, struct api_error *e)
{
	if (!files)
		return (r->files = calloc(1, sizeof(*r->files))) ? 0 : -ENOMEM;
	if (!json_is_object(files))
		return INVALID(e, "files", "files must be an object of path: content");
	size_t n = json_object_size(files), total = 0;
	if (n > TASK_REQUEST_FILES_MAX)
		return INVALID(e, "files", "files has more than %d entries",
			       TASK_REQUEST_FILES_MAX);
	r->files = calloc(n ? n : 1, sizeof(*r->files));
	if (!r->files)
		return -ENOMEM;
	const char *key;
	json_t *v;
	json_object_foreach(files, key, v)
	{
		char field[API_FIELD_MAX];
		api_field_key(field, "files", key);
		const char *problem = file_path_problem(key);
		if (problem)
			return INVALID(e, field, "file path %s", problem);
		if (!json_is_string(v))
			return INVALID(e, field, "%s must be a string (the file's content)", field);
		if (memchr(json_string_value(v), '\0', json_string_length(v)))
			return INVALID(e, field, "%s must not contain a NUL character", field);
		total += json_string_length(v);
		if (total > TASK_REQUEST_FILES_BYTES_MAX)
			return INVALID(e, "files", "files hold more than %d bytes in all",
				       TASK_REQUEST_FILES_BYTES_MAX);
		r->files[r->nfiles++] = (struct task_request_file){
		    .path = key, .content = json_string_value(v), .len = json_string_length(v)};
	}
	if (r->nfiles)
		qsort(r->files, r->nfiles, sizeof(*r->files), file_cmp);
	/* No file may be another's directory: sorted, a parent comes first. */
	for (size_t j = 1; j < r->nfiles; j++)
		for (size_t i = 0; i < j; i++) {
			size_t len = strlen(r->files[i].path);
			if (strncmp(r->files[j].path, r->files[i].path, len) == 0 &&
			    r->files[j].path[len] == '/') {
				char field[API_FIELD_MAX];
				api_field_key(field, "files", r->files[j].path);
				return INVALID(e, field, "%s is inside another file's path", field);
			}
		}
	return 0;
}
