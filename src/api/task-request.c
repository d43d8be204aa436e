/*
 * task-request.c - POST /v1/tasks bodies: parse with jansson, validate
 * every field, write the canonical spec_json. See task-request.h.
 *
 * runtime/spec.h is included for its SPEC_* limits only: the API layer
 * links nothing of the runtime.
 */
#include "api/image-choice.h"
#include "api/task-request-internal.h"
#include "api/json-util.h"
#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "core/limits.h"
#include "egress/policy.h"
#include "egress/secret.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TASK_REQUEST_TIMEOUT_MAX_S * 1000ULL == SPEC_TIMEOUT_MAX_MS, "one timeout limit");
/* AGENTBOX_* (3), the proxy's (4), the CA's (4) and the secrets': room beside a full env */
_Static_assert(3 + 4 + 4 + SECRET_MAX <= SPEC_ENV_ADDED_MAX, "what agentbox adds to env fits");
/* The largest legitimate body in values, as task-request.h counts it. */
_Static_assert(TASK_REQUEST_VALUES_MAX >= 1 + (1 + SPEC_ARGV_MAX) + (1 + 6) + (1 + SPEC_ENV_MAX) +
					      (1 + 2 * TASK_REQUEST_FILES_MAX) + 1 + (1 + 4) +
					      (1 + TASK_ARTIFACTS_PATHS_MAX) +
					      (TASK_REQUEST_METADATA_MAX + 1) / 2 +
					      (1 + SECRET_MAX * (1 + 2 + SECRET_HOSTS_MAX)),
	       "the values of a body bound the largest legitimate one");

static const char *const top_fields[] = {
    "command", "limits", "env",	 "files", "max_attempts", "retry_on",  "metadata", "network",
    "secrets", "image",	 "user", "cwd",	  "pull",	  "artifacts", NULL};
static const char *const limit_fields[] = {"memory_mb", "cpus",	     "pids", "disk_mb",
					   "state_mb",	"timeout_s", NULL};

int task_request_check_unknown(json_t *obj, const char *parent, const char *const *known,
			       struct api_error *e)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v)
	{
		const char *const *k = known;
		while (*k && strcmp(*k, key) != 0)
			k++;
		if (!*k) {
			char field[API_FIELD_MAX];
			api_field_key(field, parent, key);
			return api_error_set(e, API_ERR_UNKNOWN_FIELD, field, "unknown field %s",
					     field);
		}
	}
	return 0;
}

static int get_int(json_t *v, const char *field, int64_t min, int64_t max, int64_t *ret,
		   struct api_error *e)
{
	if (json_is_real(v))
		return INVALID(e, field,
			       "%s must be an integer (written without a fraction or "
			       "exponent: 2, not 2.0)",
			       field);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return INVALID(e, field, "%s must be an integer from %lld to %lld", field,
			       (long long)min, (long long)max);
	*ret = json_integer_value(v);
	return 0;
}

/* A limit given in MiB, checked against byte limits, defaulting to def bytes. */
static int get_mb(json_t *lim, const char *name, uint64_t min, uint64_t max, uint64_t def,
		  uint64_t *ret, json_t *out, struct api_error *e)
{
	char field[API_FIELD_MAX];
	api_field_key(field, "limits", name);
	int64_t mb = (int64_t)(def >> 20);
	json_t *v = lim ? json_object_get(lim, name) : NULL;
	if (v && get_int(v, field, (int64_t)(min >> 20), (int64_t)(max >> 20), &mb, e) < 0)
		return -EINVAL;
	*ret = (uint64_t)mb << 20;
	return json_object_set_new(out, name, json_integer(mb)) < 0 ? -ENOMEM : 0;
}

/* units/1000 as a JSON number: an integer when whole. */
static json_t *milli_number(uint64_t milli)
{
	return milli % 1000 == 0 ? json_integer((json_int_t)(milli / 1000))
				 : json_real((double)milli / 1000.0);
}

static int parse_limits(json_t *lim, struct task_request *r, json_t *out, struct api_error *e)
{
	if (lim && !json_is_object(lim))
		return INVALID(e, "limits", "limits must be an object");
	if (lim && task_request_check_unknown(lim, "limits", limit_fields, e) < 0)
		return -EINVAL;
	int ret = get_mb(lim, "memory_mb", SPEC_MEMORY_MIN, SPEC_MEMORY_MAX, SPEC_DEFAULT_MEMORY,
			 &r->memory_bytes, out, e);
	if (ret < 0)
		return ret;

	json_t *v = lim ? json_object_get(lim, "cpus") : NULL;
	r->cpu_milli = SPEC_DEFAULT_CPU_MILLI;
	if (v) {
		double cpus = json_number_value(v);
		if (!json_is_number(v) || cpus < SPEC_CPU_MILLI_MIN / 1000.0 ||
		    cpus > SPEC_CPU_MILLI_MAX / 1000.0)
			return INVALID(e, "limits.cpus",
				       "limits.cpus must be a number from %g to %g",
				       SPEC_CPU_MILLI_MIN / 1000.0, SPEC_CPU_MILLI_MAX / 1000.0);
		r->cpu_milli = (uint64_t)llround(cpus * 1000.0);
	}
	if (json_object_set_new(out, "cpus", milli_number(r->cpu_milli)) < 0)
		return -ENOMEM;

	int64_t pids = SPEC_DEFAULT_PIDS;
	v = lim ? json_object_get(lim, "pids") : NULL;
	if (v && get_int(v, "limits.pids", 1, SPEC_PIDS_MAX, &pids, e) < 0)
		return -EINVAL;
	r->pids = (uint64_t)pids;
	if (json_object_set_new(out, "pids", json_integer(pids)) < 0)
		return -ENOMEM;

	ret = get_mb(lim, "disk_mb", SPEC_DISK_MIN, SPEC_DISK_MAX, SPEC_DEFAULT_DISK,
		     &r->disk_bytes, out, e);
	if (ret < 0)
		return ret;
	ret = get_mb(lim, "state_mb", SPEC_STATE_MIN, SPEC_STATE_MAX, SPEC_DEFAULT_STATE,
		     &r->state_bytes, out, e);
	if (ret < 0)
		return ret;

	v = lim ? json_object_get(lim, "timeout_s") : NULL;
	r->timeout_ms = 0;
	if (v && !json_is_null(v)) {
		double s = json_number_value(v);
		if (!json_is_number(v) || !(s > 0) || s > TASK_REQUEST_TIMEOUT_MAX_S)
			return INVALID(
			    e, "limits.timeout_s",
			    "limits.timeout_s must be a number of seconds above 0 and at "
			    "most %d (30 days), or null for none",
			    TASK_REQUEST_TIMEOUT_MAX_S);
		long long ms = llround(s * 1000.0);
		r->timeout_ms = ms < 1 ? 1 : (uint64_t)ms;
	}
	json_t *t = r->timeout_ms ? milli_number(r->timeout_ms) : json_null();
	return json_object_set_new(out, "timeout_s", t) < 0 ? -ENOMEM : 0;
}

static int parse_command(json_t *cmd, struct task_request *r, struct api_error *e)
{
	if (!cmd)
		return api_error_set(e, API_ERR_MISSING_FIELD, "command",
				     "command is required: a non-empty array of strings");
	if (!json_is_array(cmd))
		return INVALID(e, "command", "command must be an array of strings");
	size_t n = json_array_size(cmd), total = 0;
	if (n == 0)
		return INVALID(e, "command", "command must not be empty");
	if (n > SPEC_ARGV_MAX)
		return INVALID(e, "command", "command has more than %d items", SPEC_ARGV_MAX);
	r->argv = calloc(n + 1, sizeof(*r->argv));
	if (!r->argv)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char field[API_FIELD_MAX];
		json_t *item = json_array_get(cmd, i);
		api_field_index(field, "command", i);
		if (!json_is_string(item))
			return INVALID(e, field, "%s must be a string", field);
		size_t len = json_string_length(item);
		if (len == 0)
			return INVALID(e, field, "%s must not be empty", field);
		if (len > TASK_REQUEST_ARG_MAX)
			return INVALID(e, field, "%s is longer than %d bytes", field,
				       TASK_REQUEST_ARG_MAX);
		if (memchr(json_string_value(item), '\0', len))
			return INVALID(e, field, "%s must not contain a NUL character", field);
		total += len + 1;
		if (total > TASK_REQUEST_ARGV_BYTES_MAX)
			return INVALID(e, "command", "command is longer than %d bytes in all",
				       TASK_REQUEST_ARGV_BYTES_MAX);
		r->argv[i] = json_string_value(item);
	}
	r->argc = n;
	return 0;
}

static int parse_retry_on(json_t *v, struct task_request *r, json_t *out, struct api_error *e)
{
	r->retry_on = TASK_DEFAULT_RETRY_ON;
	if (v) {
		if (!json_is_array(v))
			return INVALID(e, "retry_on", "retry_on must be an array of status names");
		r->retry_on = 0;
		for (size_t i = 0; i < json_array_size(v); i++) {
			char field[API_FIELD_MAX];
			api_field_index(field, "retry_on", i);
			json_t *item = json_array_get(v, i);
			enum task_status s;
			if (!json_is_string(item) ||
			    task_status_parse(json_string_value(item), &s) < 0 ||
			    !(TASK_STATUS_BIT(s) & TASK_REQUEST_RETRYABLE))
				return INVALID(e, field,
					       "%s must be one of failed, oom_killed, "
					       "timed_out, lost",
					       field);
			if (r->retry_on & TASK_STATUS_BIT(s))
				return INVALID(e, field, "%s names %s a second time", field,
					       task_status_name(s));
			r->retry_on |= TASK_STATUS_BIT(s);
		}
	}
	for (int s = 0; s < TASK_STATUS_COUNT; s++) /* canonical: in status order */
		if ((r->retry_on & TASK_STATUS_BIT(s)) &&
		    json_array_append_new(out, json_string(task_status_name((enum task_status)s))) <
			0)
			return -ENOMEM;
	return 0;
}

/* No string anywhere in v (at path) holds a NUL: consumers of spec_json
 * may read it with jansson's default flags, which refuse \u0000. */
static int check_no_nul(json_t *v, const char *path, struct api_error *e)
{
	char field[API_FIELD_MAX];
	const char *key;
	json_t *item;
	size_t i;
	switch (json_typeof(v)) {
	case JSON_STRING:
		if (memchr(json_string_value(v), '\0', json_string_length(v)))
			return INVALID(e, path, "%s must not contain a NUL character", path);
		return 0;
	case JSON_OBJECT:
		json_object_foreach(v, key, item)
		{
			api_field_key(field, path, key);
			if (check_no_nul(item, field, e) < 0)
				return -EINVAL;
		}
		return 0;
	case JSON_ARRAY:
		json_array_foreach(v, i, item)
		{
			api_field_index(field, path, i);
			if (check_no_nul(item, field, e) < 0)
				return -EINVAL;
		}
		return 0;
	default:
		return 0;
	}
}

static int check_metadata(json_t *v, struct api_error *e)
{
	if (!json_is_object(v))
		return INVALID(e, "metadata", "metadata must be an object");
	if (check_no_nul(v, "metadata", e) < 0)
		return -EINVAL;
	struct buf b = {.max = TASK_REQUEST_METADATA_MAX};
	json_put(&b, v);
	int r = b.failed;
	buf_release(&b);
	if (r == -E2BIG)
		return INVALID(e, "metadata", "metadata is longer than %d bytes as compact JSON",
			       TASK_REQUEST_METADATA_MAX);
	return r;
}

/* Parse root (an object) into r, and build the canonical spec in out. */
static int parse_root(json_t *root, struct task_request *r, json_t *out, struct api_error *e)
{
	if (task_request_check_unknown(root, "", top_fields, e) < 0)
		return -EINVAL;
	json_t *cmd = json_object_get(root, "command");
	/* with an image, the command may be its Entrypoint and Cmd (image-choice.h) */
	int ret = cmd || !json_object_get(root, "image") ? parse_command(cmd, r, e) : 0;
	if (ret < 0)
		return ret;
	if (cmd && json_object_set(out, "command", cmd) < 0)
		return -ENOMEM;

	json_t *limits = json_object();
	if (!limits || json_object_set_new(out, "limits", limits) < 0)
		return -ENOMEM;
	ret = parse_limits(json_object_get(root, "limits"), r, limits, e);
	if (ret < 0)
		return ret;

	json_t *env = json_object_get(root, "env"), *files = json_object_get(root, "files");
	ret = task_request_parse_env(env, r, e);
	if (ret == 0)
		ret = task_request_expand_tars(files, e);
	if (ret == 0)
		ret = task_request_parse_files(files, r, e);
	if (ret < 0)
		return ret;
	if (json_object_set_new(out, "env", env ? json_incref(env) : json_object()) < 0 ||
	    json_object_set_new(out, "files", files ? json_incref(files) : json_object()) < 0)
		return -ENOMEM;

	int64_t attempts = TASK_DEFAULT_ATTEMPTS;
	json_t *v = json_object_get(root, "max_attempts");
	if (v && get_int(v, "max_attempts", 1, TASK_MAX_ATTEMPTS_MAX, &attempts, e) < 0)
		return -EINVAL;
	r->max_attempts = (uint32_t)attempts;
	if (json_object_set_new(out, "max_attempts", json_integer(attempts)) < 0)
		return -ENOMEM;

	json_t *retry = json_array();
	if (!retry || json_object_set_new(out, "retry_on", retry) < 0)
		return -ENOMEM;
	ret = parse_retry_on(json_object_get(root, "retry_on"), r, retry, e);
	if (ret < 0)
		return ret;

	v = json_object_get(root, "metadata");
	if (v && (ret = check_metadata(v, e)) < 0)
		return ret;
	if (json_object_set_new(out, "metadata", v ? json_incref(v) : json_object()) < 0)
		return -ENOMEM;
	bool image;
	if ((ret = image_fields_parse(root, out, &image, e)) < 0 ||
	    (ret = task_request_parse_artifacts(json_object_get(root, "artifacts"), out, e)) < 0)
		return ret;
	return task_request_parse_network(json_object_get(root, "network"),
					  json_object_get(root, "secrets"), r, out, e);
}

/* egress names the field first: "network.allow[3]: ...", "secrets.KEY.hosts[0]: ..." */
static int egress_invalid(const struct error *err, struct api_error *e)
{
	char field[API_FIELD_MAX];
	size_t n = strcspn(err->msg, ": ");
	snprintf(field, sizeof(field), "%.*s", (int)n, err->msg);
	return INVALID(e, field, "%s", err->msg);
}

/*
 * "secrets" (egress/secret.h), for the policy p: the public form into out,
 * the private one into r->secrets_json (a request; a stored spec has none).
 */
static int parse_secrets(json_t *v, const struct egress_policy *p, struct task_request *r,
			 json_t *out, struct api_error *e)
{
	struct error err = {0};
	_cleanup_json_ json_t *pub = NULL, *priv = NULL;
	int ret = secret_parse(v, p, json_object_get(out, "env"), r->stored, &pub, &priv, &err);
	if (ret == -EINVAL && strstr(err.msg, ": unknown field")) {
		char field[API_FIELD_MAX];
		snprintf(field, sizeof(field), "%.*s", (int)strcspn(err.msg, ":"), err.msg);
		return api_error_set(e, API_ERR_UNKNOWN_FIELD, field, "%s", err.msg);
	}
	if (ret == -EINVAL)
		return egress_invalid(&err, e);
	if (ret < 0)
		return ret == -EIO ? api_error_internal(e, EIO, err.msg) : ret;
	if (!pub || json_object_size(pub) == 0)
		return 0;
	if (json_object_set(out, "secrets", pub) < 0)
		return -ENOMEM;
	/* inside, each secret's variable holds its placeholder, never its value */
	json_t *env = json_object_get(out, "env");
	const char *name;
	json_t *sv;
	json_object_foreach(pub, name, sv)
	{
		if (json_object_set(env, name, json_object_get(sv, "placeholder")) < 0)
			return -ENOMEM;
	}
	/* the proxy's certificates for the secrets' hosts verify: unless the task says */
	static const char *const ca_env[][2] = SECRET_CA_ENV;
	for (size_t i = 0; env && i < sizeof(ca_env) / sizeof(*ca_env); i++)
		if (!json_object_get(env, ca_env[i][0]) &&
		    json_object_set_new(env, ca_env[i][0], json_string(ca_env[i][1])) < 0)
			return -ENOMEM;
	if (priv && !(r->secrets_json = json_dumps(priv, JSON_COMPACT)))
		return -ENOMEM;
	return 0;
}

int task_request_parse_network(json_t *v, json_t *secrets, struct task_request *r, json_t *out,
			       struct api_error *e)
{
	struct egress_policy p;
	struct error err = {0};
	int ret = egress_policy_from_json(v, &p, &err);
	if (ret == -ENOMEM)
		return -ENOMEM;
	if (ret < 0)
		return egress_invalid(&err, e);
	if ((ret = parse_secrets(secrets, &p, r, out, e)) < 0) {
		egress_policy_release(&p);
		return ret;
	}
	r->network = p.mode;
	if (p.mode == EGRESS_ALLOW) {
		/* for tools that prefer a proxy to the transparent one: unless the task says */
		json_t *env = json_object_get(out, "env");
		static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
						    "https_proxy"};
		for (size_t i = 0; env && i < sizeof(names) / sizeof(*names); i++)
			if (!json_object_get(env, names[i]) &&
			    json_object_set_new(env, names[i], json_string(EGRESS_PROXY_URL)) < 0) {
				egress_policy_release(&p);
				return -ENOMEM;
			}
	}
	/* the canonical spec names a network only when it has one: none is as before */
	json_t *canon = p.mode != EGRESS_NONE ? egress_policy_to_json(&p) : NULL;
	egress_policy_release(&p);
	if (r->network != EGRESS_NONE && (!canon || json_object_set_new(out, "network", canon) < 0))
		return -ENOMEM;
	return 0;
}

json_t *task_request_load(const char *body, size_t len, struct api_error *e, int *ret)
{
	json_error_t jerr;
	*ret = -EINVAL;
	if (len == 0) {
		api_error_set(e, API_ERR_INVALID_JSON, NULL,
			      "the body is empty: send a JSON object");
		return NULL;
	}
	/* before jansson builds anything: what it may build is bounded */
	static const struct json_limits limits = {.depth_max = TASK_REQUEST_DEPTH_MAX,
						  .values_max = TASK_REQUEST_VALUES_MAX};
	switch (json_limits_check(body, len, &limits)) {
	case JSON_WITHIN_LIMITS:
		break;
	case JSON_TOO_DEEP:
		api_error_set(e, API_ERR_INVALID_JSON, NULL, "the body nests deeper than %d levels",
			      TASK_REQUEST_DEPTH_MAX);
		return NULL;
	case JSON_TOO_MANY_VALUES:
		api_error_set(e, API_ERR_INVALID_JSON, NULL,
			      "the body has more than %d values (array elements and object "
			      "members, nested ones included)",
			      TASK_REQUEST_VALUES_MAX);
		return NULL;
	}
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_out_of_memory)
			*ret = -ENOMEM;
		else
			api_error_set(e, API_ERR_INVALID_JSON, NULL,
				      "not valid JSON: %s (line %d, column %d)", jerr.text,
				      jerr.line, jerr.column);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		api_error_set(e, API_ERR_INVALID_JSON, NULL, "the body must be a JSON object");
		return NULL;
	}
	*ret = 0;
	return root;
}

static int parse(const char *body, size_t len, bool stored, struct task_request *ret,
		 struct api_error *e)
{
	struct task_request r = {.stored = stored};
	int rc;
	json_t *root = task_request_load(body ? body : "", body ? len : 0, e, &rc);
	if (!root)
		return rc;
	r.priv = root;
	json_t *out = json_object();
	rc = out ? parse_root(root, &r, out, e) : -ENOMEM;
	if (rc == 0) {
		struct buf b = {0};
		json_put(&b, out);
		rc = buf_steal(&b, &r.spec_json, &r.spec_len);
	}
	json_decref(out);
	if (rc < 0) {
		task_request_release(&r);
		return rc;
	}
	*ret = r;
	return 0;
}

int task_request_parse(const char *body, size_t len, struct task_request *ret, struct api_error *e)
{
	return parse(body, len, false, ret, e);
}

int task_request_from_spec_json(const char *spec_json, struct task_request *ret,
				struct api_error *e)
{
	return parse(spec_json, spec_json ? strlen(spec_json) : 0, true, ret, e);
}

void task_request_release(struct task_request *r)
{
	free(r->argv);
	for (size_t i = 0; r->env && i < r->nenv; i++)
		free((char *)r->env[i]);
	free(r->env);
	free(r->files);
	free(r->spec_json);
	if (r->secrets_json) {
		explicit_bzero(r->secrets_json, strlen(r->secrets_json));
		free(r->secrets_json);
	}
	json_decref(r->priv);
	memset(r, 0, sizeof(*r));
}
