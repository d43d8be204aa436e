/*
 * quotas.c - tenants' quotas in the API (core/quota.h).
 *
 * A tenant's own quotas are kept in the store as a JSON object of the
 * quotas it overrides (tenants.quotas_json): each a whole number (cpus: a
 * number with at most three decimals), or "none" for no bound. What is
 * not there is the daemon's default (agentboxd --tenant-quota, in
 * api_ctx.quota_defaults). PATCH /v1/tenants/{name} merges into it; null
 * takes an override away.
 *
 * A create past a quota is 429 quota_exceeded, and the error names the
 * quota, its limit, the tenant's use and what was asked.
 */
#include "api/api-internal.h"

#include "api/json-util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A quota's value in JSON: a number in its unit, or "none". 0 or invalid_field. */
static int quota_value(json_t *v, enum quota_id id, const char *field, uint64_t *ret,
		       struct api_error *e)
{
	if (json_is_string(v) && strcmp(json_string_value(v), "none") == 0) {
		*ret = QUOTA_NONE;
		return 0;
	}
	uint64_t scale = id == QUOTA_CPUS ? 1000 : 1;
	double d = json_is_number(v) ? json_number_value(v) * (double)scale : -1;
	/* cpus in thousandths: 1.001 * 1000 is 1000.9999999999999 as a double */
	double whole = id == QUOTA_CPUS ? round(d) : d;
	if (!(d >= 0) || d > (double)QUOTA_VALUE_MAX || fabs(d - whole) > 1e-6 ||
	    (!json_is_integer(v) && whole != floor(whole)))
		return api_error_set(e, API_ERR_INVALID_FIELD, field,
				     "%s is %s from 0 to %llu, or \"none\" for no bound", field,
				     id == QUOTA_CPUS ? "a number of CPUs, to the thousandth,"
						      : "a whole number",
				     (unsigned long long)(QUOTA_VALUE_MAX / scale));
	*ret = (uint64_t)whole;
	return 0;
}

/* Overlay a stored object (checked when it was set) on q. */
static void overlay(struct quota *q, const char *stored_json)
{
	json_t *o = stored_json ? json_loads(stored_json, 0, NULL) : NULL;
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		enum quota_id id = quota_find(k);
		uint64_t n;
		if (id != QUOTA_COUNT && quota_value(v, id, k, &n, NULL) == 0)
			q->v[id] = n;
	}
	json_decref(o);
}

void api_quotas_effective(const struct quota *defaults, const char *stored_json, struct quota *ret)
{
	if (defaults)
		*ret = *defaults;
	else
		quota_none(ret);
	overlay(ret, stored_json);
}

int api_tenant_limits(struct store *st, const struct quota *defaults, const char *tenant,
		      struct quota *ret, struct error *err)
{
	struct tenant_record t;
	int r = store_tenant_get(st, tenant, &t, err);
	if (r < 0)
		return r;
	api_quotas_effective(defaults, t.quotas_json, ret);
	tenant_record_release(&t);
	return 0;
}

int api_quotas_merge(const char *stored_json, json_t *patch, char **ret_json, struct api_error *e)
{
	if (!json_is_object(patch))
		return api_error_set(e, API_ERR_INVALID_FIELD, "quotas",
				     "quotas is an object of quota names to limits");
	json_t *o = json_loads(stored_json ? stored_json : "{}", 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	const char *k;
	json_t *v;
	int r = o ? 0 : -ENOMEM;
	json_object_foreach(patch, k, v)
	{
		char field[API_FIELD_MAX];
		api_field_key(field, "quotas", k);
		enum quota_id id = quota_find(k);
		uint64_t n;
		if (id == QUOTA_COUNT)
			r = api_error_set(e, API_ERR_UNKNOWN_FIELD, field,
					  "no quota is called that: sandboxes, tasks_running, "
					  "tasks_queued, memory_mb, cpus, disk_mb, timeout_s");
		else if (json_is_null(v))
			json_object_del(o, k);
		else if ((r = quota_value(v, id, field, &n, e)) == 0 &&
			 json_object_set(o, k, v) < 0)
			r = -ENOMEM;
		if (r < 0)
			break;
	}
	*ret_json = r == 0 ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (r == 0 && !*ret_json)
		r = -ENOMEM;
	return r;
}

/* A quota's value as the API shows it: a number in its unit, or "none" (quoted). */
static void value_text(enum quota_id id, uint64_t v, char out[static 32])
{
	if (v == QUOTA_NONE)
		snprintf(out, 32, "\"none\"");
	else if (id == QUOTA_CPUS && v % 1000)
		snprintf(out, 32, "%llu.%03llu", (unsigned long long)(v / 1000),
			 (unsigned long long)(v % 1000));
	else
		snprintf(out, 32, "%llu", (unsigned long long)(id == QUOTA_CPUS ? v / 1000 : v));
}

static void put_value(struct buf *b, enum quota_id id, uint64_t v)
{
	char t[32];
	value_text(id, v, t);
	buf_puts(b, t);
}

void api_put_quotas(struct buf *b, const struct quota *q, bool skip_timeout)
{
	buf_puts(b, "{");
	for (int i = 0, n = 0; i < QUOTA_COUNT; i++) {
		if (skip_timeout && i == QUOTA_TIMEOUT_S)
			continue;
		buf_printf(b, "%s\"%s\":", n++ ? "," : "", quota_name((enum quota_id)i));
		put_value(b, (enum quota_id)i, q->v[i]);
	}
	buf_puts(b, "}");
}

int api_call_limits(struct api_call *c, const char *tenant, struct quota *ret)
{
	struct error err = {0};
	int r = api_tenant_limits(c->ctx->store, c->ctx->quota_defaults, tenant, ret, &err);
	return r < 0 ? api_error_internal(c->err, -r, err.msg) : 0;
}

int api_quota_refuse(struct api_call *c, enum quota_id id, const struct quota *limit,
		     const struct quota *use, const struct quota *ask)
{
	char lim[32], held[32], asked[32];
	value_text(id, limit->v[id], lim);
	value_text(id, use->v[id], held);
	value_text(id, ask->v[id], asked);
	int r =
	    id == QUOTA_TIMEOUT_S
		? api_error_set(c->err, API_ERR_QUOTA_EXCEEDED, NULL,
				"the tenant's quota timeout_s is %s: %s s is past it", lim, asked)
		: api_error_set(c->err, API_ERR_QUOTA_EXCEEDED, NULL,
				"the tenant's quota %s is %s: it holds %s, and %s more would "
				"pass it",
				quota_name(id), lim, held, asked);
	snprintf(c->err->extra, sizeof(c->err->extra),
		 "\"quota\":\"%s\",\"limit\":%s,\"use\":%s,\"asked\":%s", quota_name(id), lim, held,
		 asked);
	return r;
}
