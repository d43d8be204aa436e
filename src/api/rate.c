/*
 * rate.c - the admission of a request before its body (api.h:
 * api_admit()): the bucket of a source's failed auths, auth, then the
 * principal's bucket, and the 429 rate_limited that names the limit.
 */
#include "api/api-internal.h"
#include "api/terminal-get.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

_Static_assert(API_SOURCE_SIZE <= RATELIMIT_NAME_SIZE, "a source is a bucket's whole name");

static int64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void api_rate_source(const char *source, char out[API_SOURCE_SIZE])
{
	struct in6_addr a6;
	struct in_addr a4;
	snprintf(out, API_SOURCE_SIZE, "%s", source);
	if (inet_pton(AF_INET6, source, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6)) {
			memcpy(&a4, &a6.s6_addr[12], 4);
			inet_ntop(AF_INET, &a4, out, API_SOURCE_SIZE);
		} else {
			char text[INET6_ADDRSTRLEN];
			memset(&a6.s6_addr[8], 0, 8);
			inet_ntop(AF_INET6, &a6, text, sizeof(text));
			snprintf(out, API_SOURCE_SIZE, "%s/64", text);
			return;
		}
	}
	if (inet_pton(AF_INET, out, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127)
		snprintf(out, API_SOURCE_SIZE, "127.0.0.0/8");
}

/* 429 rate_limited: which limit ("key" or "auth_failures"), its rate and burst, the wait. */
static void rate_limited(struct api_response *ret, const struct ratelimit *rl, const char *limit,
			 const char *message, uint32_t wait_s)
{
	const struct ratelimit_config *cfg = ratelimit_config(rl);
	struct api_error e;
	api_error_set(&e, API_ERR_RATE_LIMITED, NULL,
		      "%s: %u a second, %u at once; try again in %u s", message, cfg->rate,
		      cfg->burst, wait_s);
	snprintf(e.extra, sizeof(e.extra),
		 "\"limit\":\"%s\",\"rate\":%u,\"burst\":%u,\"retry_after_s\":%u", limit, cfg->rate,
		 cfg->burst, wait_s);
	*ret = (struct api_response){.retry_after = wait_s, .fd = -1};
	if (api_error_respond(&e, ret) < 0) {
		ret->status = 500;
		ret->content_type = API_JSON;
	}
}

/*
 * A refusal before the body, counted in the audit log as a 401 is (one
 * row per source, reason, key and minute): a flood writes a row a minute.
 */
static void audit_refusal(struct api_ctx *ctx, int64_t now, const char *reason,
			  const struct api_principal *who, const char *key_id,
			  enum api_error_code code, struct api_response *ret)
{
	struct api_audit_entry a = {.wanted = true,
				    .refusal = true,
				    .time = now,
				    .uid = -1,
				    .reason = reason,
				    .keep = ctx->audit_rows};
	snprintf(a.source, sizeof(a.source), "%s", ctx->source);
	if (who) {
		snprintf(a.tenant, sizeof(a.tenant), "%s", who->tenant);
		a.uid = who->key_id[0] ? -1 : who->uid;
	}
	snprintf(a.key_id, sizeof(a.key_id), "%s", key_id ? key_id : "");
	api_audit_record(&a, code, ctx->store, ret);
}

/* The error e as the answer; a 401 says how to authenticate. */
static void refused(struct api_response *ret, const struct api_error *e)
{
	*ret = (struct api_response){.fd = -1};
	if (e->code == API_ERR_UNAUTHORIZED)
		snprintf(ret->www_authenticate, sizeof(ret->www_authenticate), "Bearer");
	if (api_error_respond(e, ret) < 0) {
		ret->status = 500;
		ret->content_type = API_JSON;
	}
}

bool api_admit(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret)
{
	if (api_route_is_public(req->path))
		return true;
	const struct api_rate *rate = ctx->rate;
	int64_t mono = rate && rate->now_ms ? rate->now_ms() : monotonic_ms();
	char source[API_SOURCE_SIZE];
	api_rate_source(ctx->source, source);
	uint32_t wait;
	int64_t now = ctx->now_ms ? ctx->now_ms() : wall_clock_ms();
	if (rate && rate->auth_failures && api_request_has_key(req) &&
	    (wait = ratelimit_peek(rate->auth_failures, source, mono))) {
		rate_limited(ret, rate->auth_failures, "auth_failures",
			     "too many failed authentications from this address", wait);
		audit_refusal(ctx, now, "auth_rate_limited", NULL, NULL, API_ERR_RATE_LIMITED, ret);
		return false;
	}
	struct api_principal who;
	struct api_error e = {.code = API_ERR_COUNT};
	struct api_refusal why = {0};
	if (api_authenticate_why(ctx, req, now, &who, &e, &why) < 0) {
		/* only a key costs a lookup: one without is refused as cheaply as a 429 */
		if (rate && rate->auth_failures && api_request_has_key(req) &&
		    e.code == API_ERR_UNAUTHORIZED)
			(void)ratelimit_take(rate->auth_failures, source, mono);
		refused(ret, &e);
		if (e.code == API_ERR_UNAUTHORIZED)
			audit_refusal(ctx, now, why.reason ? why.reason : "unauthorized", NULL,
				      why.key_id, e.code, ret);
		return false;
	}
	/* root on the unix socket: the operator, whom no limit could hold anyway */
	if (!rate || !rate->principals || (!who.key_id[0] && who.uid == 0))
		return true;
	char name[RATELIMIT_NAME_SIZE];
	if (who.key_id[0])
		snprintf(name, sizeof(name), "%s", who.key_id);
	else
		snprintf(name, sizeof(name), "uid:%ld", who.uid);
	if ((wait = ratelimit_take(rate->principals, name, mono))) {
		rate_limited(ret, rate->principals, "key",
			     who.key_id[0] ? "this key's requests are over their rate"
					   : "this local user's requests are over their rate",
			     wait);
		audit_refusal(ctx, now, "rate_limited", &who, who.key_id, API_ERR_RATE_LIMITED,
			      ret);
		return false;
	}
	return true;
}
