/*
 * tenants.c - tenants and their API keys (admin routes), and /v1/me.
 *
 *	GET    /v1/tenants              every tenant, by name
 *	POST   /v1/tenants              {"name"} -> 201 the tenant; 409 if taken
 *	GET    /v1/tenants/{name}       one
 *	PATCH  /v1/tenants/{name}       {"quotas": {...}}: its own quotas, merged
 *	                                (quotas.c); null takes one away
 *	DELETE /v1/tenants/{name}       409 while it has a key not revoked, or a
 *	                                task or sandbox that has not ended; the
 *	                                default tenant stays
 *	GET    /v1/keys[?tenant=T]      keys (never their secrets), oldest first
 *	POST   /v1/keys                 {"tenant", "role", "expires_in_s", "label"}
 *	                                -> 201 with "key", the one time it is shown
 *	DELETE /v1/keys/{id}            revoke: 401 at the key's next request
 *	GET    /v1/me                   who asks: tenant, role, key id, and its
 *	                                tenant's quotas and use
 *
 * A tenant's JSON has its quotas in effect ("quotas": the daemon's
 * defaults with its own over them) and its own ("own_quotas"); one tenant
 * (GET, PATCH, /v1/me) also what it holds now ("use").
 *
 * The router lets only admins reach the first eight (API_ROUTE_ADMIN).
 */
#include "api/api-internal.h"

#include "api/json-util.h"
#include "api/task-request-internal.h"
#include "auth/key.h"
#include "base/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * What tenant holds now: its running sandboxes and tasks with their
 * memory, CPUs and disk (the fleet counts them), and its queued tasks.
 */
static int tenant_use(struct api_call *c, const char *tenant, struct quota *ret)
{
	struct error err = {0};
	*ret = (struct quota){0};
	if (c->ctx->fleet_ops && c->ctx->fleet_ops->tenant_use)
		c->ctx->fleet_ops->tenant_use(c->ctx->fleet, tenant, ret);
	int r = store_task_count_tenant(c->ctx->store, tenant, TASK_QUEUED,
					&ret->v[QUOTA_TASKS_QUEUED], &err);
	return r < 0 ? api_error_internal(c->err, -r, err.msg) : 0;
}

/* ,"quotas":{...},"own_quotas":{...}[,"use":{...}] of a tenant. */
static void put_quotas(struct api_call *c, struct buf *b, const char *own_json,
		       const struct quota *use)
{
	struct quota q;
	api_quotas_effective(c->ctx->quota_defaults, own_json, &q);
	buf_puts(b, ",\"quotas\":");
	api_put_quotas(b, &q, false);
	buf_puts(b, ",\"own_quotas\":");
	buf_puts(b, own_json && *own_json ? own_json : "{}");
	if (use) {
		buf_puts(b, ",\"use\":");
		api_put_quotas(b, use, true);
	}
}

static void put_tenant(struct api_call *c, struct buf *b, const struct tenant_record *t,
		       const struct quota *use)
{
	buf_puts(b, "{\"name\":");
	json_put_str(b, t->name, strlen(t->name));
	buf_printf(b, ",\"created_at\":%lld", (long long)t->created_at);
	put_quotas(c, b, t->quotas_json, use);
	buf_puts(b, "}");
}

struct tenant_list {
	struct api_call *c;
	struct buf b;
};

static int each_tenant(const struct tenant_record *t, void *data)
{
	struct tenant_list *l = data;
	if (l->b.len && l->b.data[l->b.len - 1] == '}')
		buf_puts(&l->b, ",");
	put_tenant(l->c, &l->b, t, NULL);
	return 0;
}

int api_tenants_list(struct api_call *c)
{
	struct tenant_list l = {.c = c};
	struct error err = {0};
	buf_puts(&l.b, "{\"tenants\":[");
	int r = store_tenant_list(c->ctx->store, each_tenant, &l, &err);
	if (r < 0) {
		buf_release(&l.b);
		return api_error_internal(c->err, -r, err.msg);
	}
	buf_puts(&l.b, "]}");
	return api_respond(c, 200, API_JSON, &l.b);
}

static const char *const tenant_fields[] = {"name", "quotas", NULL};

/* One tenant, with what it holds now, as the answer: status 200 or 201. */
static int respond_tenant(struct api_call *c, const char *name, int status)
{
	struct tenant_record t = {0};
	struct error err = {0};
	struct quota use;
	int r = store_tenant_get(c->ctx->store, name, &t, &err);
	if (r == -ENOENT)
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no tenant %s", name);
	if (r < 0)
		return api_error_internal(c->err, -r, err.msg);
	if ((r = tenant_use(c, name, &use)) < 0) {
		tenant_record_release(&t);
		return r;
	}
	struct buf b = {0};
	put_tenant(c, &b, &t, &use);
	tenant_record_release(&t);
	return api_respond(c, status, API_JSON, &b);
}

int api_tenants_create(struct api_call *c)
{
	int r;
	json_t *root = task_request_load(c->req->body, c->req->body_len, c->err, &r);
	if (!root)
		return r;
	const char *name = json_string_value(json_object_get(root, "name"));
	if ((r = task_request_check_unknown(root, "", tenant_fields, c->err)) == 0 && !name)
		r = api_error_set(c->err,
				  json_object_get(root, "name") ? API_ERR_INVALID_FIELD
								: API_ERR_MISSING_FIELD,
				  "name", "name is the tenant's name, a string");
	if (r == 0 && !tenant_name_is_valid(name))
		r = api_error_set(c->err, API_ERR_INVALID_FIELD, "name",
				  "a tenant's name is 1 to %d of a-z, 0-9 and '-', starting with "
				  "a letter or digit and not ending with '-'",
				  TENANT_NAME_MAX);
	struct error err = {0};
	_cleanup_free_ char *quotas = NULL;
	json_t *asked = json_object_get(root, "quotas");
	if (r == 0 && asked && (r = api_quotas_merge("{}", asked, &quotas, c->err)) < 0) {
		json_decref(root);
		return r;
	}
	if (r == 0 && (r = store_tenant_insert(c->ctx->store, name, c->now, quotas, &err)) < 0)
		r = r == -EEXIST ? api_error_set(c->err, API_ERR_CONFLICT, "name",
						 "there is, or was, a tenant '%s': a name is never "
						 "given again",
						 name)
				 : api_error_internal(c->err, -r, err.msg);
	if (r == 0) {
		snprintf(c->name, sizeof(c->name), "%s", name); /* the audit log's target */
		r = respond_tenant(c, name, 201);
	}
	json_decref(root);
	return r;
}

int api_tenant_get(struct api_call *c)
{
	return respond_tenant(c, c->name, 200);
}

static const char *const tenant_set_fields[] = {"quotas", NULL};

int api_tenant_set(struct api_call *c)
{
	int r;
	json_t *root = task_request_load(c->req->body, c->req->body_len, c->err, &r);
	if (!root)
		return r;
	struct tenant_record t = {0};
	struct error err = {0};
	_cleanup_free_ char *quotas = NULL;
	json_t *asked = json_object_get(root, "quotas");
	if ((r = task_request_check_unknown(root, "", tenant_set_fields, c->err)) == 0 && !asked)
		r = api_error_set(c->err, API_ERR_MISSING_FIELD, "quotas",
				  "quotas is an object of quota names to limits");
	if (r == 0 && (r = store_tenant_get(c->ctx->store, c->name, &t, &err)) < 0)
		r = r == -ENOENT
			? api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no tenant %s", c->name)
			: api_error_internal(c->err, -r, err.msg);
	if (r == 0)
		r = api_quotas_merge(t.quotas_json, asked, &quotas, c->err);
	if (r == 0 && strlen(quotas) > TENANT_QUOTAS_MAX)
		r = api_error_set(c->err, API_ERR_INVALID_FIELD, "quotas",
				  "a tenant's quotas are at most %d bytes of JSON",
				  TENANT_QUOTAS_MAX);
	if (r == 0 && (r = store_tenant_set_quotas(c->ctx->store, c->name, quotas, &err)) < 0)
		r = r == -ENOENT
			? api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no tenant %s", c->name)
			: api_error_internal(c->err, -r, err.msg);
	tenant_record_release(&t);
	json_decref(root);
	return r < 0 ? r : respond_tenant(c, c->name, 200);
}

int api_tenant_delete(struct api_call *c)
{
	struct error err = {0};
	for (size_t i = 0; i < c->ctx->nlocal_users; i++)
		if (strcmp(c->ctx->local_users[i].tenant, c->name) == 0)
			return api_error_set(c->err, API_ERR_CONFLICT, NULL,
					     "the tenant %s is local user %u's (agentboxd "
					     "--socket-user): it stays while agentboxd says so",
					     c->name, (unsigned)c->ctx->local_users[i].uid);
	int r = store_tenant_delete(c->ctx->store, c->name, c->now, &err);
	if (r == -ENOENT)
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no tenant %s", c->name);
	if (r == -EPERM)
		return api_error_set(c->err, API_ERR_CONFLICT, NULL,
				     "the tenant %s is root's and every older row's: it stays",
				     TENANT_DEFAULT);
	if (r == -EBUSY)
		return api_error_set(c->err, API_ERR_CONFLICT, NULL,
				     "the tenant %s has a key not revoked, or a task or sandbox "
				     "that has not ended",
				     c->name);
	if (r < 0)
		return api_error_internal(c->err, -r, err.msg);
	struct buf b = {0};
	buf_puts(&b, "{\"name\":");
	json_put_str(&b, c->name, strlen(c->name));
	buf_puts(&b, ",\"deleted\":true}");
	return api_respond(c, 200, API_JSON, &b);
}

/* ---- keys ---------------------------------------------------------------- */

static void put_time_or_null(struct buf *b, const char *name, int64_t t)
{
	if (t)
		buf_printf(b, ",\"%s\":%lld", name, (long long)t);
	else
		buf_printf(b, ",\"%s\":null", name);
}

static void put_key(struct buf *b, const struct key_record *k, const char *text)
{
	buf_puts(b, "{\"id\":");
	json_put_str(b, k->id, strlen(k->id));
	if (text) {
		buf_puts(b, ",\"key\":");
		json_put_str(b, text, strlen(text));
	}
	buf_puts(b, ",\"tenant\":");
	json_put_str(b, k->tenant, strlen(k->tenant));
	buf_printf(b, ",\"role\":\"%s\",\"created_at\":%lld", key_role_name(k->role),
		   (long long)k->created_at);
	put_time_or_null(b, "expires_at", k->expires_at);
	put_time_or_null(b, "revoked_at", k->revoked_at);
	buf_puts(b, ",\"label\":");
	json_put_str_or_null(b, k->label);
	buf_puts(b, "}");
}

static int each_key(const struct key_record *k, void *data)
{
	struct buf *b = data;
	if (b->len && b->data[b->len - 1] == '}')
		buf_puts(b, ",");
	put_key(b, k, NULL);
	return 0;
}

int api_keys_list(struct api_call *c)
{
	const char *tenant = api_query_get(c->query, "tenant");
	if (tenant && !tenant_name_is_valid(tenant))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "tenant",
				     "not a tenant's name");
	struct buf b = {0};
	struct error err = {0};
	buf_puts(&b, "{\"keys\":[");
	int r = store_key_list(c->ctx->store, tenant, each_key, &b, &err);
	if (r < 0) {
		buf_release(&b);
		return api_error_internal(c->err, -r, err.msg);
	}
	buf_puts(&b, "]}");
	return api_respond(c, 200, API_JSON, &b);
}

static const char *const key_fields[] = {"tenant", "role", "expires_in_s", "label", NULL};

/* The request's fields into k (id and hash apart). 0 or -EINVAL with c->err. */
static int key_request(struct api_call *c, json_t *root, struct key_record *k)
{
	int r = task_request_check_unknown(root, "", key_fields, c->err);
	if (r < 0)
		return r;
	json_t *tenant = json_object_get(root, "tenant"), *role = json_object_get(root, "role");
	json_t *expires = json_object_get(root, "expires_in_s");
	json_t *label = json_object_get(root, "label");
	if (!tenant)
		return api_error_set(c->err, API_ERR_MISSING_FIELD, "tenant",
				     "tenant names the tenant the key acts for");
	if (!tenant_name_is_valid(json_string_value(tenant)))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "tenant",
				     "not a tenant's name");
	snprintf(k->tenant, sizeof(k->tenant), "%s", json_string_value(tenant));
	k->role = KEY_ROLE_MEMBER;
	if (role &&
	    (!json_is_string(role) || key_role_parse(json_string_value(role), &k->role) < 0))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "role",
				     "role is \"member\" (its tenant's tasks and sandboxes) or "
				     "\"admin\" (everything)");
	if (expires) {
		json_int_t s = json_integer_value(expires);
		if (!json_is_integer(expires) || s < 1 || s > API_KEY_EXPIRES_MAX_S)
			return api_error_set(c->err, API_ERR_INVALID_FIELD, "expires_in_s",
					     "expires_in_s is 1 to %lld seconds (absent: never)",
					     (long long)API_KEY_EXPIRES_MAX_S);
		k->expires_at = c->now + (int64_t)s * 1000;
	}
	if (label && (!json_is_string(label) || json_string_length(label) > KEY_LABEL_MAX ||
		      !utf8_is_valid(json_string_value(label), json_string_length(label)) ||
		      memchr(json_string_value(label), '\0', json_string_length(label))))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "label",
				     "label is text of at most %d bytes", KEY_LABEL_MAX);
	k->label = label ? (char *)json_string_value(label) : NULL;
	return 0;
}

int api_keys_create(struct api_call *c)
{
	int r;
	json_t *root = task_request_load(c->req->body, c->req->body_len, c->err, &r);
	if (!root)
		return r;
	struct key_record k = {.created_at = c->now};
	char text[AUTH_KEY_TEXT_MAX];
	struct auth_key key;
	struct error err = {0};
	r = key_request(c, root, &k);
	if (r == 0 && auth_key_new(text, &key, &err) < 0)
		r = api_error_internal(c->err, err.code, err.msg);
	if (r == 0) {
		memcpy(k.id, key.id, sizeof(k.id));
		memcpy(k.hash, key.hash, sizeof(k.hash));
		r = store_key_insert(c->ctx->store, &k, &err);
		if (r == -ENOENT)
			r = api_error_set(c->err, API_ERR_INVALID_FIELD, "tenant",
					  "there is no tenant '%s'", k.tenant);
		else if (r < 0)
			r = api_error_internal(c->err, -r, err.msg);
	}
	struct buf b = {0};
	if (r == 0)
		put_key(&b, &k, text);
	explicit_bzero(text, sizeof(text));
	json_decref(root); /* k.label pointed into it */
	if (r < 0)
		return r;
	snprintf(c->name, sizeof(c->name), "%s", k.id); /* the audit log's target */
	int sent = api_respond(c, 201, API_JSON, &b);
	return sent;
}

int api_key_revoke(struct api_call *c)
{
	struct error err = {0};
	int r = store_key_revoke(c->ctx->store, c->name, c->now, &err);
	if (r == -ENOENT)
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no key %s", c->name);
	if (r < 0 && r != -ESTALE)
		return api_error_internal(c->err, -r, err.msg);
	struct key_record k;
	if ((r = store_key_get(c->ctx->store, c->name, &k, &err)) < 0)
		return api_error_internal(c->err, -r, err.msg);
	struct buf b = {0};
	put_key(&b, &k, NULL);
	key_record_release(&k);
	return api_respond(c, 200, API_JSON, &b);
}

int api_me(struct api_call *c)
{
	struct buf b = {0};
	buf_puts(&b, "{\"tenant\":");
	json_put_str(&b, c->who.tenant, strlen(c->who.tenant));
	buf_printf(&b, ",\"role\":\"%s\",\"key_id\":", key_role_name(c->who.role));
	json_put_str_or_null(&b, c->who.key_id[0] ? c->who.key_id : NULL);
	if (c->who.uid >= 0)
		buf_printf(&b, ",\"uid\":%ld", c->who.uid);
	else
		buf_puts(&b, ",\"uid\":null");
	struct tenant_record t = {0};
	struct error err = {0};
	struct quota use;
	int r = store_tenant_get(c->ctx->store, c->who.tenant, &t, &err);
	if (r < 0)
		r = api_error_internal(c->err, -r, err.msg);
	if (r == 0 && (r = tenant_use(c, c->who.tenant, &use)) == 0)
		put_quotas(c, &b, t.quotas_json, &use);
	tenant_record_release(&t);
	if (r < 0) {
		buf_release(&b);
		return r;
	}
	buf_puts(&b, "}");
	return api_respond(c, 200, API_JSON, &b);
}
