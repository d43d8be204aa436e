/*
 * sandbox-request.c - parse the bodies of the sandbox routes.
 *
 * limits, env and command follow the rules of tasks, and are checked by
 * the task request parser itself: the parts are put in a task body of
 * their own and parsed as one, so both APIs always agree on them.
 */
#include "api/sandbox-request.h"

#include "api/json-util.h"
#include "api/task-request-internal.h"
#include "base/cleanup.h"
#include "core/limits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const create_fields[] = {"limits",  "timeout_s", "env",   "metadata",
					    "network", "secrets",   "image", "user",
					    "cwd",     "pull",	    NULL};
/* what a sandbox's spec keeps of the task spec it is checked as, beside env and limits */
static const char *const kept_fields[] = {"network", "secrets", "image", "user",
					  "cwd",     "pull",	NULL};
static const char *const exec_fields[] = {"command",	"stdin", "env",	 "cwd",	 "timeout_s",
					  "background", "tty",	 "rows", "cols", NULL};

static int get_seconds(json_t *v, const char *field, int64_t max, int64_t *ret_ms,
		       struct api_error *e)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
		return INVALID(e, field, "%s must be an integer from 1 to %lld", field,
			       (long long)max);
	*ret_ms = json_integer_value(v) * 1000;
	return 0;
}

/* Parse the task body made of parts (stolen) with the task parser. */
static int parse_as_task(json_t *parts, struct task_request *ret, struct api_error *e)
{
	_cleanup_free_ char *text = json_dumps(parts, JSON_COMPACT);
	json_decref(parts);
	if (!text)
		return -ENOMEM;
	return task_request_parse(text, strlen(text), ret, e);
}

static int set_part(json_t *body, const char *key, json_t *from)
{
	json_t *v = json_object_get(from, key);
	return v ? json_object_set(body, key, v) : 0;
}

int sandbox_request_parse(const char *body, size_t len, struct sandbox_request *ret,
			  struct api_error *e)
{
	int r;
	bool empty = !body || len == 0; /* no body: every default */
	json_t *root = task_request_load(empty ? "{}" : body, empty ? 2 : len, e, &r);
	if (!root)
		return r;
	struct sandbox_request sr = {.timeout_ms = SANDBOX_TIMEOUT_DEFAULT_S * 1000LL};
	struct task_request tr = {0};
	json_t *limits = json_object_get(root, "limits");
	json_t *t = json_object_get(root, "timeout_s");
	json_t *task = json_pack("{s:[s]}", "command", "sandbox");
	r = task_request_check_unknown(root, "", create_fields, e);
	if (r == 0 && json_is_object(limits) && json_object_get(limits, "timeout_s"))
		r = api_error_set(e, API_ERR_UNKNOWN_FIELD, "limits.timeout_s",
				  "limits.timeout_s is for tasks: a sandbox takes timeout_s");
	if (r == 0 && json_is_object(limits) && json_object_get(limits, "state_mb"))
		r = api_error_set(e, API_ERR_UNKNOWN_FIELD, "limits.state_mb",
				  "limits.state_mb is for tasks: a sandbox has no /state");
	if (r == 0 && !task)
		r = -ENOMEM;
	if (r == 0 && (set_part(task, "limits", root) < 0 || set_part(task, "env", root) < 0 ||
		       set_part(task, "metadata", root) < 0 || set_part(task, "image", root) < 0 ||
		       set_part(task, "user", root) < 0 || set_part(task, "cwd", root) < 0 ||
		       set_part(task, "pull", root) < 0 || set_part(task, "network", root) < 0 ||
		       set_part(task, "secrets", root) < 0))
		r = -ENOMEM;
	if (r == 0) {
		r = parse_as_task(task, &tr, e);
		task = NULL;
	}
	if (r == 0 && t) {
		r = get_seconds(t, "timeout_s", SANDBOX_TIMEOUT_MAX_S, &sr.timeout_ms, e);
		sr.timeout_given = true;
	}
	json_decref(task);
	if (r == 0) {
		/* keep env and limits of the canonical task spec; metadata apart */
		json_t *spec = json_loads(tr.spec_json, 0, NULL);
		/* the task parser filled in a /state size; a sandbox has none */
		(void)json_object_del(json_object_get(spec, "limits"), "state_mb");
		json_t *out = spec ? json_pack("{s:O, s:O}", "env", json_object_get(spec, "env"),
					       "limits", json_object_get(spec, "limits"))
				   : NULL;
		for (const char *const *k = kept_fields; out && *k; k++)
			if (set_part(out, *k, spec) < 0)
				json_decref(TAKE_PTR(out));
		sr.secrets_json = TAKE_PTR(tr.secrets_json);
		struct buf a = {0}, b = {0};
		if (out) {
			json_put(&a, out);
			json_put(&b, json_object_get(spec, "metadata"));
		} else {
			a.failed = -ENOMEM;
		}
		size_t n;
		r = buf_steal(&a, &sr.spec_json, &n);
		int r2 = buf_steal(&b, &sr.metadata_json, &n);
		if (r == 0)
			r = r2;
		sr.network = tr.network;
		sr.memory_bytes = tr.memory_bytes;
		sr.disk_bytes = tr.disk_bytes;
		sr.pids = tr.pids;
		sr.cpu_milli = tr.cpu_milli;
		sr.default_limits = tr.memory_bytes == SPEC_DEFAULT_MEMORY &&
				    tr.cpu_milli == SPEC_DEFAULT_CPU_MILLI &&
				    tr.pids == SPEC_DEFAULT_PIDS &&
				    tr.disk_bytes == SPEC_DEFAULT_DISK;
		json_decref(out);
		json_decref(spec);
	}
	task_request_release(&tr);
	json_decref(root);
	if (r < 0) {
		sandbox_request_release(&sr);
		return r;
	}
	*ret = sr;
	return 0;
}

void sandbox_request_release(struct sandbox_request *r)
{
	free(r->spec_json);
	free(r->metadata_json);
	if (r->secrets_json) {
		explicit_bzero(r->secrets_json, strlen(r->secrets_json));
		free(r->secrets_json);
	}
	memset(r, 0, sizeof(*r));
}

int api_sandbox_path_check(const char *path, const char *field, struct api_error *e)
{
	if (!path)
		return api_error_set(e, API_ERR_MISSING_FIELD, field, "%s is required", field);
	size_t n = strlen(path);
	if (path[0] != '/')
		return INVALID(e, field, "%s must be an absolute path", field);
	if (n > 1024)
		return INVALID(e, field, "%s is longer than 1024 bytes", field);
	return 0;
}

/* "tty", and the terminal's "rows" and "cols", which need it. */
static int parse_tty(json_t *root, struct exec_request *x, struct api_error *e)
{
	json_t *v = json_object_get(root, "tty");
	if (v && !json_is_boolean(v))
		return INVALID(e, "tty", "tty must be true or false");
	x->tty = json_is_true(v);
	x->rows = 24;
	x->cols = 80;
	static const char *const dims[] = {"rows", "cols"};
	for (size_t i = 0; i < 2; i++) {
		v = json_object_get(root, dims[i]);
		if (!v)
			continue;
		if (!x->tty)
			return INVALID(e, dims[i], "%s needs \"tty\": true", dims[i]);
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > SPEC_TTY_DIM_MAX)
			return INVALID(e, dims[i], "%s must be an integer from 1 to %d", dims[i],
				       SPEC_TTY_DIM_MAX);
		*(i == 0 ? &x->rows : &x->cols) = (unsigned)json_integer_value(v);
	}
	if (x->tty && x->stdin_data)
		return INVALID(e, "stdin",
			       "a terminal's input comes over its WebSocket, not stdin");
	if (x->tty && x->background)
		return INVALID(e, "background",
			       "a terminal lives with its WebSocket: no background");
	return 0;
}

static int parse_exec(json_t *root, struct exec_request *x, struct api_error *e)
{
	int r = task_request_check_unknown(root, "", exec_fields, e);
	if (r < 0)
		return r;
	/* command and env, by the rules of tasks */
	struct task_request tr = {0};
	json_t *task = json_object();
	if (!task || set_part(task, "command", root) < 0 || set_part(task, "env", root) < 0) {
		json_decref(task);
		return -ENOMEM;
	}
	r = parse_as_task(task, &tr, e);
	task_request_release(&tr);
	if (r < 0)
		return r;
	x->command = json_object_get(root, "command");
	x->env = json_object_get(root, "env");

	json_t *v = json_object_get(root, "stdin");
	if (v) {
		if (!json_is_string(v))
			return INVALID(e, "stdin", "stdin must be a string");
		if (json_string_length(v) > EXEC_STDIN_MAX)
			return INVALID(e, "stdin", "stdin is longer than %d bytes", EXEC_STDIN_MAX);
		x->stdin_data = (char *)json_string_value(v);
		x->stdin_len = json_string_length(v);
	}
	x->cwd[0] = '\0'; /* the shim's default: the image's WorkingDir, else /workspace */
	v = json_object_get(root, "cwd");
	if (v) {
		if (!json_is_string(v))
			return INVALID(e, "cwd", "cwd must be a string");
		if (memchr(json_string_value(v), '\0', json_string_length(v)))
			return INVALID(e, "cwd", "cwd must not contain a NUL character");
		if ((r = api_sandbox_path_check(json_string_value(v), "cwd", e)) < 0)
			return r;
		snprintf(x->cwd, sizeof(x->cwd), "%s", json_string_value(v));
	}
	v = json_object_get(root, "timeout_s");
	if (v && (r = get_seconds(v, "timeout_s", EXEC_TIMEOUT_MAX_S, &x->timeout_ms, e)) < 0)
		return r;
	v = json_object_get(root, "background");
	if (v) {
		if (!json_is_boolean(v))
			return INVALID(e, "background", "background must be true or false");
		x->background = json_is_true(v);
	}
	return parse_tty(root, x, e);
}

int exec_request_parse(const char *body, size_t len, struct exec_request *ret, struct api_error *e)
{
	int r;
	json_t *root = task_request_load(body ? body : "", body ? len : 0, e, &r);
	if (!root)
		return r;
	return exec_request_from_json(root, ret, e);
}

int exec_request_from_json(json_t *root, struct exec_request *ret, struct api_error *e)
{
	int r;
	struct exec_request x = {.priv = root};
	r = parse_exec(root, &x, e);
	if (r < 0) {
		exec_request_release(&x);
		return r;
	}
	*ret = x;
	return 0;
}

void exec_request_release(struct exec_request *r)
{
	json_decref(r->priv);
	memset(r, 0, sizeof(*r));
}

static int parse_one_int(const char *body, size_t len, const char *name, bool required, int64_t min,
			 int64_t max, int64_t *ret, struct api_error *e)
{
	int r;
	json_t *root = task_request_load(body && len ? body : "{}", body && len ? len : 2, e, &r);
	if (!root)
		return r;
	const char *fields[] = {name, NULL};
	r = task_request_check_unknown(root, "", fields, e);
	json_t *v = json_object_get(root, name);
	if (r == 0 && !v && required)
		r = api_error_set(e, API_ERR_MISSING_FIELD, name, "%s is required", name);
	if (r == 0 && v &&
	    (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max))
		r = INVALID(e, name, "%s must be an integer from %lld to %lld", name,
			    (long long)min, (long long)max);
	if (r == 0 && v)
		*ret = json_integer_value(v);
	json_decref(root);
	return r;
}

int sandbox_timeout_parse(const char *body, size_t len, int64_t *ret_ms, struct api_error *e)
{
	int64_t s = 0;
	int r = parse_one_int(body, len, "timeout_s", true, 1, SANDBOX_TIMEOUT_MAX_S, &s, e);
	if (r == 0)
		*ret_ms = s * 1000;
	return r;
}

int process_kill_parse(const char *body, size_t len, int *ret_signal, struct api_error *e)
{
	int64_t sig = 9;
	int r = parse_one_int(body, len, "signal", false, 1, 64, &sig, e);
	if (r == 0)
		*ret_signal = (int)sig;
	return r;
}
