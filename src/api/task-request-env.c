/*
 * task-request-env.c - what a task request gives its sandbox: env and
 * files. Part of task-request.c's validation (see task-request.h).
 */
#include "api/task-request-internal.h"
#include "core/limits.h"

#include "base/base64.h"
#include "base/parse.h"
#include "core/id.h"

#include <errno.h>
#include <stdio.h>
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

/*
 * {"input": ID} (a request), {"input": ID, "offset": O, "size": N} (a
 * stored spec: the API took the input in, api/inputs.h); or, a
 * directory's (a key ending in '/'), {"tar_input": ID}. *ret_id: ID.
 */
static int file_input(json_t *v, const char *field, bool stored, bool tar, const char **ret_id,
		      struct api_error *e)
{
	const char *key = tar ? "tar_input" : "input";
	const char *id = json_string_value(json_object_get(v, key));
	json_t *off = json_object_get(v, "offset"), *size = json_object_get(v, "size");
	if (!id || !id_is_valid(INPUT_ID_PREFIX, id))
		return INVALID(e, field, "%s.%s must be an input's id (%s...)", field, key,
			       INPUT_ID_PREFIX);
	/* a canonical spec is read again before its inputs are taken (a default timeout) */
	bool taken = stored && !tar && json_object_size(v) == 3;
	if (!taken && json_object_size(v) != 1)
		return INVALID(e, field, "%s must be {\"%s\": \"%s...\"} and nothing else", field,
			       key, INPUT_ID_PREFIX);
	if (taken && (!json_is_integer(off) || !json_is_integer(size) ||
		      json_integer_value(off) < 0 || json_integer_value(size) < 0 ||
		      (uint64_t)json_integer_value(size) > SPEC_FILE_INPUT_MAX))
		return INVALID(e, field, "%s is not a taken input", field);
	*ret_id = id;
	return 0;
}

/*
 * A file's content: a string (UTF-8 text, no NUL), or {"base64": "..."}
 * (any bytes, strict base64). *ret_len gets its length in bytes.
 */
static int file_content(json_t *v, const char *field, size_t *ret_len, struct api_error *e)
{
	if (json_is_string(v)) {
		if (memchr(json_string_value(v), '\0', json_string_length(v)))
			return INVALID(e, field, "%s must not contain a NUL character", field);
		*ret_len = json_string_length(v);
		return 0;
	}
	json_t *b64 = json_object_get(v, "base64");
	if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_string(b64))
		return INVALID(e, field,
			       "%s must be a string (the file's text) or {\"base64\": \"...\"}",
			       field);
	size_t n = json_string_length(b64);
	/* 4 characters for 3 bytes, less its padding: checked before any decoding */
	if (n / 4 * 3 > TASK_REQUEST_FILES_BYTES_MAX + 2)
		return INVALID(e, "files", "files hold more than %d bytes in all",
			       TASK_REQUEST_FILES_BYTES_MAX);
	struct buf b = {.max = TASK_REQUEST_FILES_BYTES_MAX};
	int r = base64_decode(&b, json_string_value(b64), n);
	size_t len = b.len;
	buf_release(&b);
	if (r == -EINVAL)
		return INVALID(e, field, "%s.base64 is not strict base64 (RFC 4648, padded)",
			       field);
	if (r == -E2BIG)
		return INVALID(e, "files", "files hold more than %d bytes in all",
			       TASK_REQUEST_FILES_BYTES_MAX);
	if (r < 0)
		return r;
	*ret_len = len;
	return 0;
}

/*
 * An artifact's path: as a file's, or a directory's with a trailing '/',
 * the workdir and /tmp themselves included ("/workspace/").
 */
static const char *artifact_path_problem(const char *path)
{
	size_t len = strlen(path);
	if (strcmp(path, "/workspace/") == 0 || strcmp(path, "/tmp/") == 0)
		return NULL;
	if (len > 1 && path[len - 1] == '/' && path[len - 2] != '/') {
		char copy[SPEC_PATH_MAX + 2];
		if (len > SPEC_PATH_MAX)
			return "is longer than the path limit";
		memcpy(copy, path, len - 1);
		copy[len - 1] = '\0';
		return file_path_problem(copy);
	}
	return file_path_problem(path);
}

/* Is a (without a trailing '/') b or an ancestor of it? */
static bool path_covers(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	while (la > 1 && a[la - 1] == '/')
		la--;
	while (lb > 1 && b[lb - 1] == '/')
		lb--;
	return la <= lb && strncmp(a, b, la) == 0 && (la == lb || b[la] == '/');
}

int task_request_parse_artifacts(json_t *v, json_t *out, struct api_error *e)
{
	if (!v)
		return 0;
	size_t n = json_array_size(v);
	if (!json_is_array(v))
		return INVALID(e, "artifacts", "artifacts must be an array of paths");
	if (n > TASK_ARTIFACTS_PATHS_MAX)
		return INVALID(e, "artifacts", "artifacts has more than %d paths",
			       TASK_ARTIFACTS_PATHS_MAX);
	for (size_t i = 0; i < n; i++) {
		char field[API_FIELD_MAX];
		snprintf(field, sizeof(field), "artifacts[%zu]", i);
		const char *p = json_string_value(json_array_get(v, i));
		if (!p)
			return INVALID(e, field, "%s must be a string (a path)", field);
		if (memchr(p, '\0', json_string_length(json_array_get(v, i))))
			return INVALID(e, field, "%s must not contain a NUL character", field);
		const char *problem = artifact_path_problem(p);
		if (problem)
			return INVALID(e, field, "artifact path %s", problem);
		for (size_t j = 0; j < i; j++) {
			const char *q = json_string_value(json_array_get(v, j));
			if (path_covers(q, p) || path_covers(p, q))
				return INVALID(e, field, "%s is %s artifacts[%zu]", field,
					       path_covers(q, p) ? "inside (or the same as)"
								 : "a parent of",
					       j);
		}
	}
	if (n && json_object_set(out, "artifacts", v) < 0)
		return -ENOMEM;
	return 0;
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
	size_t n = json_object_size(files), total = 0, ninputs = 0;
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
		/* a directory from a tar input: its key ends in one '/' */
		bool tar = json_object_get(v, "tar_input") != NULL;
		size_t klen = strlen(key);
		char dir[SPEC_PATH_MAX + 2];
		if (tar && (klen < 2 || key[klen - 1] != '/' || key[klen - 2] == '/' ||
			    klen > SPEC_PATH_MAX))
			return INVALID(e, field,
				       "a tar goes to a directory: %s must end in one '/'", field);
		snprintf(dir, sizeof(dir), "%.*s", (int)(tar ? klen - 1 : klen), key);
		const char *problem = file_path_problem(dir);
		if (problem)
			return INVALID(e, field, "file path %s", problem);
		size_t len = 0;
		const char *input = NULL;
		int ret = json_object_get(v, "input") || tar
			      ? file_input(v, field, r->stored, tar, &input, e)
			      : file_content(v, field, &len, e);
		if (ret < 0)
			return ret;
		for (size_t i = 0; input && i < r->nfiles; i++)
			if (r->files[i].input && strcmp(r->files[i].input, input) == 0 &&
			    !r->stored)
				return INVALID(e, field, "%s names input %s, as %s does", field,
					       input, r->files[i].path);
		if (input && ++ninputs > TASK_INPUTS_MAX && !r->stored)
			return INVALID(e, "files", "files name more than %d inputs",
				       TASK_INPUTS_MAX);
		total += len;
		if (total > TASK_REQUEST_FILES_BYTES_MAX)
			return INVALID(e, "files", "files hold more than %d bytes in all",
				       TASK_REQUEST_FILES_BYTES_MAX);
		r->files[r->nfiles++] = (struct task_request_file){
		    .path = key,
		    .content = json_is_string(v) ? json_string_value(v) : NULL,
		    .len = len,
		    .input = input};
	}
	r->ninputs = ninputs;
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
