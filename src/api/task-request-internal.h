/*
 * task-request-internal.h - what the files of the task request parser
 * share. Each function checks one part of the body, fills r, and returns
 * 0, -EINVAL with e naming the field, or -ENOMEM.
 */
#ifndef AGENTBOX_API_TASK_REQUEST_INTERNAL_H
#define AGENTBOX_API_TASK_REQUEST_INTERNAL_H

#include "api/task-request.h"

#include <jansson.h>

#define INVALID(e, field, ...) api_error_set(e, API_ERR_INVALID_FIELD, field, __VA_ARGS__)

/*
 * network (NULL when absent): r->network, and out's "network" in its
 * canonical form (egress/policy.h) when it is not none.
 */
int task_request_parse_network(json_t *v, json_t *secrets, struct task_request *r, json_t *out,
			       struct api_error *e);

/* env (NULL when absent): r->env, r->nenv, sorted by name. */
int task_request_parse_env(json_t *env, struct task_request *r, struct api_error *e);

/*
 * files' {"tar_base64": ...} entries (task-request-tar.c) replaced, in
 * place, by one entry per regular file of each tar. 0, -EINVAL with e
 * naming the field, or -ENOMEM.
 */
int task_request_expand_tars(json_t *files, struct api_error *e);

/* files (NULL when absent): r->files, r->nfiles, sorted by path. */
int task_request_parse_files(json_t *files, struct task_request *r, struct api_error *e);

/*
 * artifacts (NULL when absent): checked paths (TASK_ARTIFACTS_PATHS_MAX,
 * none inside another), into out's "artifacts" when there are some.
 */
int task_request_parse_artifacts(json_t *v, json_t *out, struct api_error *e);

/* Every key of obj is in known (NULL-terminated), else unknown_field parent.key. */
int task_request_check_unknown(json_t *obj, const char *parent, const char *const *known,
			       struct api_error *e);

/*
 * Load a request body, of any route: a JSON object, no duplicate keys,
 * nesting at most TASK_REQUEST_DEPTH_MAX and at most
 * TASK_REQUEST_VALUES_MAX values, both checked before jansson parses it.
 * NULL with *ret = -EINVAL (e: invalid_json) or -ENOMEM.
 */
json_t *task_request_load(const char *body, size_t len, struct api_error *e, int *ret);

#endif
