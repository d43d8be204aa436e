#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "shim/protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct op {
	const char *name;
	op_fn *handle;
	const char *const *fields; /* allowed besides "op"; NULL-terminated */
	bool takes_fd;
};

#define FIELDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_FIELDS   ((const char *const[]){NULL})

static const struct op ops[] = {
    {"exec", op_exec, FIELDS("command", "env", "cwd", "timeout_ms", "tty"), true},
    {"watch", op_watch, FIELDS("pid"), false},
    {"kill", op_kill, FIELDS("pid", "signal"), false},
    {"processes", op_processes, NO_FIELDS, false},
    {"open", op_open, FIELDS("path", "mode"), false},
    {"rename", op_rename, FIELDS("from", "to"), false},
    {"unlink", op_unlink, FIELDS("path"), false},
    {"pause", op_pause, NO_FIELDS, false},
    {"resume", op_resume, NO_FIELDS, false},
    {"upper", op_upper, NO_FIELDS, false},
    {"expire", op_expire, FIELDS("expires_at"), false},
    {"network", op_network, FIELDS("network", "egress", "expires_at"), false},
    {"status", op_status, NO_FIELDS, false},
    {"stop", op_stop, NO_FIELDS, false},
};

json_t *json_text(const char *text)
{
	json_t *j = json_string(text);
	if (j)
		return j;
	_cleanup_free_ char *copy = strdup(text);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	return json_string(copy);
}

static int check_fields(json_t *req, const struct op *op, struct error *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(req, key, v)
	{
		if (strcmp(key, "op") == 0)
			continue;
		bool known = false;
		for (const char *const *f = op->fields; *f && !known; f++)
			known = strcmp(*f, key) == 0;
		if (!known)
			return error_set(err, EINVAL, "%.64s: unknown field of %s", key, op->name);
	}
	return 0;
}

void reply_error(struct shim *s, struct conn *c, const struct error *err)
{
	int code = err->code > 0 ? err->code : EIO;
	_cleanup_json_ json_t *m = json_pack("{s:s, s:i, s:o}", "type", "error", "errno", code,
					     "message", json_text(err->msg));
	if (m)
		conn_send(s, c, m, -1);
}

void request_handle(struct shim *s, struct conn *c, json_t *req, int fd)
{
	_cleanup_close_ int passed = fd;
	struct error err = {0};
	const char *name = json_string_value(json_object_get(req, "op"));
	const struct op *op = NULL;
	for (size_t i = 0; name && i < ELEMENTSOF(ops) && !op; i++)
		if (strcmp(ops[i].name, name) == 0)
			op = &ops[i];
	int r;
	if (!name)
		r = error_set(&err, EINVAL, "op: missing, or not a string");
	else if (!op)
		r = error_set(&err, EINVAL, "op: no op '%.64s'", name);
	else if (passed >= 0 && !op->takes_fd)
		r = error_set(&err, EINVAL, "%s: takes no fd", op->name);
	else if ((r = check_fields(req, op, &err)) == 0)
		r = op->handle(s, c, req, passed, &err);
	if (r < 0)
		reply_error(s, c, &err);
}

int reply_ok(struct shim *s, struct conn *c)
{
	_cleanup_json_ json_t *m = json_pack("{s:s}", "type", "ok");
	if (!m)
		return -ENOMEM;
	conn_send(s, c, m, -1);
	return 0;
}

int req_int(json_t *req, const char *field, bool required, int64_t min, int64_t max, int64_t dflt,
	    int64_t *ret, struct error *err)
{
	json_t *v = json_object_get(req, field);
	if (!v) {
		if (required)
			return error_set(err, EINVAL, "%s: missing", field);
		*ret = dflt;
		return 0;
	}
	if (!json_is_integer(v))
		return error_set(err, EINVAL, "%s: not an integer", field);
	json_int_t n = json_integer_value(v);
	if (n < min || n > max)
		return error_set(err, EINVAL, "%s: must be from %" PRId64 " to %" PRId64, field,
				 min, max);
	*ret = n;
	return 0;
}

static bool has_nul(json_t *str)
{
	return strlen(json_string_value(str)) != json_string_length(str);
}

int req_path(json_t *req, const char *field, bool required, const char **ret, struct error *err)
{
	json_t *v = json_object_get(req, field);
	if (!v) {
		if (required)
			return error_set(err, EINVAL, "%s: missing", field);
		*ret = NULL;
		return 0;
	}
	if (!json_is_string(v))
		return error_set(err, EINVAL, "%s: not a string", field);
	if (json_string_value(v)[0] != '/' || has_nul(v))
		return error_set(err, EINVAL, "%s: not an absolute path", field);
	if (json_string_length(v) > SPEC_PATH_MAX)
		return error_set(err, EINVAL, "%s: longer than %d bytes", field, SPEC_PATH_MAX);
	*ret = json_string_value(v);
	return 0;
}

int req_strv(json_t *req, const char *field, size_t max, const char ***ret, struct error *err)
{
	json_t *v = json_object_get(req, field);
	if (!json_is_array(v))
		return error_set(err, EINVAL, "%s: %s", field,
				 v ? "not an array of strings" : "missing");
	size_t n = json_array_size(v);
	if (n > max)
		return error_set(err, EINVAL, "%s: more than %zu entries", field, max);
	const char **strv = calloc(n + 1, sizeof(char *));
	if (!strv)
		return error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || has_nul(e)) {
			free(strv);
			return error_set(err, EINVAL, "%s[%zu]: not a string", field, i);
		}
		strv[i] = json_string_value(e);
	}
	*ret = strv;
	return 0;
}
