/*
 * auth.c - who asks, and what they may see (api.h: struct api_principal).
 *
 * Over TCP every request carries "Authorization: Bearer <key>": an API
 * key (auth/key.h) found in the store by its id, its secret's hash
 * compared in constant time, not revoked, not expired; or the single
 * token of an older state directory, kept as the legacy admin key
 * (API_LEGACY_KEY_ID). Nothing is cached: a key revoked or expired is
 * refused at its next request.
 *
 * A terminal's handshake may carry its key in Sec-WebSocket-Protocol
 * instead (a browser's WebSocket cannot set a header: terminal-get.h).
 *
 * On the unix socket the peer's credentials decide (SO_PEERCRED, read by
 * the server): root is an admin of the default tenant; a user that
 * agentboxd --socket-user maps is a member of its tenant; anyone else is
 * refused. A key, if one is sent there too, is checked as over TCP.
 *
 * A member sees only its own tenant's tasks and sandboxes: another's is
 * answered exactly as one that does not exist (api_may_see()).
 */
#include "api/api-internal.h"

#include "api/terminal-get.h"
#include "auth/key.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

_Static_assert(AUTH_KEY_ID_SIZE == KEY_ID_SIZE, "the store keeps auth/key.h's ids");
_Static_assert(AUTH_KEY_HASH_SIZE == KEY_HASH_SIZE, "the store keeps auth/key.h's hashes");

#define REFUSED "this API needs the header Authorization: Bearer <key>"

/* Refuse with why, and say which kind of refusal it is (the audit log's reason). */
static int unauthorized(struct api_error *e, struct api_refusal *ret, const char *reason,
			const char *why)
{
	if (ret)
		ret->reason = reason;
	return api_error_set(e, API_ERR_UNAUTHORIZED, NULL, "%s", why);
}

/* The key behind header (a Bearer key, or the legacy token): its record. */
static int find_key(struct api_ctx *ctx, const char *header, int64_t now, struct key_record *ret,
		    struct api_error *e, struct api_refusal *why_ret)
{
	struct auth_key key;
	struct error err = {0};
	if (!header || strncasecmp(header, "Bearer ", 7) != 0)
		return unauthorized(e, why_ret, "no_key", REFUSED);
	if (strncmp(header + 7, AUTH_KEY_PREFIX, AUTH_KEY_PREFIX_LEN) == 0) {
		if (auth_bearer_parse(header, &key, &err) < 0)
			return unauthorized(e, why_ret, "malformed_key", err.msg);
	} else {
		/* an older state directory's token: the legacy admin key, by its hash */
		snprintf(key.id, sizeof(key.id), "%s", API_LEGACY_KEY_ID);
		auth_token_hash(header + 7, key.hash);
	}
	int r = store_key_get(ctx->store, key.id, ret, &err);
	if (r == -ENOENT)
		return unauthorized(e, why_ret, "unknown_key", "no such key");
	if (r < 0)
		return api_error_internal(e, -r, err.msg);
	bool known = auth_hash_equal(ret->hash, key.hash);
	const char *why = !known				      ? "no such key"
			  : ret->revoked_at			      ? "the key is revoked"
			  : ret->expires_at && now >= ret->expires_at ? "the key has expired"
								      : NULL;
	const char *reason = !known	       ? "unknown_key"
			     : ret->revoked_at ? "revoked_key"
					       : "expired_key";
	/* a key that is ours (its secret right) is named: its id is not the client's to choose */
	if (why && known && why_ret)
		snprintf(why_ret->key_id, sizeof(why_ret->key_id), "%s", ret->id);
	if (!why)
		return 0;
	key_record_release(ret);
	return unauthorized(e, why_ret, reason, why);
}

int api_authenticate(struct api_ctx *ctx, const struct api_request *req, int64_t now,
		     struct api_principal *ret, struct api_error *e)
{
	return api_authenticate_why(ctx, req, now, ret, e, NULL);
}

/*
 * The key of req: its Authorization, or on a terminal's handshake the one
 * in its subprotocols (terminal-get.h; written into buf, which the caller
 * wipes). Both at once, or a malformed one there: refused.
 */
static int key_header(const struct api_request *req, char buf[API_WS_BEARER_SIZE], const char **ret,
		      struct api_error *e, struct api_refusal *why)
{
	int found = api_ws_bearer(req, buf);
	*ret = req->authorization;
	if (found < 0)
		return unauthorized(e, why, "malformed_key",
				    "the subprotocol " API_WS_KEY_PREFIX
				    "<key> must be the base64url of one key, once");
	if (found && req->authorization)
		return unauthorized(e, why, "malformed_key",
				    "a key in Authorization and one in Sec-WebSocket-Protocol: "
				    "send one");
	if (found)
		*ret = buf;
	return 0;
}

/* Who asks, by the key header (NULL: none; then the peer's uid on the unix socket). */
static int authenticate(struct api_ctx *ctx, const char *header, int64_t now,
			struct api_principal *ret, struct api_error *e, struct api_refusal *why)
{
	if (!ctx->tcp && !header) {
		if (ctx->peer_uid == 0) {
			snprintf(ret->tenant, sizeof(ret->tenant), "%s", TENANT_DEFAULT);
			ret->role = KEY_ROLE_ADMIN;
			ret->uid = 0;
			return 0;
		}
		for (size_t i = 0; ctx->peer_uid > 0 && i < ctx->nlocal_users; i++) {
			if ((long)ctx->local_users[i].uid != ctx->peer_uid)
				continue;
			snprintf(ret->tenant, sizeof(ret->tenant), "%s",
				 ctx->local_users[i].tenant);
			ret->role = KEY_ROLE_MEMBER;
			ret->uid = ctx->peer_uid;
			return 0;
		}
		return unauthorized(e, why, "unknown_user",
				    "this local user is no tenant's (agentboxd --socket-user "
				    "UID=TENANT), and sent no key");
	}
	struct key_record k;
	int r = find_key(ctx, header, now, &k, e, why);
	if (r < 0)
		return r;
	snprintf(ret->tenant, sizeof(ret->tenant), "%s", k.tenant);
	snprintf(ret->key_id, sizeof(ret->key_id), "%s", k.id);
	ret->role = k.role;
	key_record_release(&k);
	return 0;
}

int api_authenticate_why(struct api_ctx *ctx, const struct api_request *req, int64_t now,
			 struct api_principal *ret, struct api_error *e, struct api_refusal *why)
{
	*ret = (struct api_principal){.uid = -1};
	char buf[API_WS_BEARER_SIZE];
	const char *header = NULL;
	int r = key_header(req, buf, &header, e, why);
	if (r == 0)
		r = authenticate(ctx, header, now, ret, e, why);
	explicit_bzero(buf, sizeof(buf));
	return r;
}

int api_check_owner(struct api_call *c, bool sandbox)
{
	if (c->who.role == KEY_ROLE_ADMIN || !c->id[0])
		return 0;
	struct error err = {0};
	char tenant[TENANT_NAME_SIZE] = "";
	int r;
	if (sandbox) {
		struct sandbox_record s = {0};
		r = store_sandbox_get(c->ctx->store, c->id, &s, &err);
		snprintf(tenant, sizeof(tenant), "%s", s.tenant);
		/* the pool's are nobody's until claimed: a claim may give one away meanwhile */
		if (r == 0 && s.status == SANDBOX_POOLED)
			r = -ENOENT;
		sandbox_record_release(&s);
	} else {
		struct task t = {0};
		r = store_task_get(c->ctx->store, c->id, &t, &err);
		snprintf(tenant, sizeof(tenant), "%s", t.tenant);
		task_release(&t);
	}
	if (r < 0 && r != -ENOENT)
		return api_error_internal(c->err, -r, err.msg);
	if (r == 0 && api_may_see(c, tenant))
		return 0;
	/*
	 * Another tenant's, or none: the same answer, before the handler looks
	 * at the body or the query (which it would refuse differently), so
	 * that nothing tells the two apart
	 */
	return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no %s %s",
			     sandbox ? "sandbox" : "task", c->id);
}

bool api_may_see(const struct api_call *c, const char *tenant)
{
	return c->who.role == KEY_ROLE_ADMIN || strcmp(c->who.tenant, tenant) == 0;
}

int api_list_tenant(const struct api_call *c, const char **ret)
{
	const char *asked = api_query_get(c->query, "tenant");
	if (c->who.role != KEY_ROLE_ADMIN) {
		*ret = c->who.tenant; /* whatever it asked for */
		return 0;
	}
	if (asked && !tenant_name_is_valid(asked))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "tenant",
				     "tenant is a tenant's name: a-z, 0-9 and '-'");
	*ret = asked;
	return 0;
}
