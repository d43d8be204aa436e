/*
 * terminal-get.c - a terminal a browser can open (terminal-get.h): the
 * exec request from a query, the key from the subprotocols, the Origin
 * rule.
 */
#include "api/terminal-get.h"
#include "api/api-internal.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "base/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool api_header_has_token(const char *list, const char *token)
{
	size_t n = strlen(token);
	for (const char *p = list; p && *p;) {
		p += strspn(p, " \t,");
		size_t len = strcspn(p, ",");
		size_t end = len;
		while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t'))
			end--;
		if (end == n && strncasecmp(p, token, n) == 0)
			return true;
		p += len;
	}
	return false;
}

bool api_is_terminal_handshake(const struct api_request *req)
{
	if (!api_header_has_token(req->upgrade, "websocket"))
		return false;
	struct api_match m;
	api_route_match(req->method, req->path, &m);
	return m.route &&
	       (m.route->id == API_ROUTE_SANDBOX_EXEC || m.route->id == API_ROUTE_SANDBOX_EXEC_GET);
}

/* base64url (RFC 4648 section 5, without padding) of a printable key into b. */
static int key_decode(const char *s, size_t len, struct buf *b)
{
	char text[API_WS_KEY_B64_MAX + 4];
	if (len == 0 || len > API_WS_KEY_B64_MAX || len % 4 == 1)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (c == '+' || c == '/' || c == '=')
			return -EINVAL; /* the standard alphabet's, not base64url's */
		text[i] = c;
	}
	size_t n = len;
	while (n % 4)
		text[n++] = '=';
	int r = base64_decode(b, text, n);
	explicit_bzero(text, sizeof(text));
	if (r < 0)
		return -EINVAL;
	for (size_t i = 0; i < b->len; i++)
		if ((unsigned char)b->data[i] <= ' ' || (unsigned char)b->data[i] >= 0x7f)
			return -EINVAL; /* a key is printable ASCII: no NUL, space or CR */
	return b->len ? 0 : -EINVAL;
}

int api_ws_bearer(const struct api_request *req, char buf[API_WS_BEARER_SIZE])
{
	buf[0] = '\0';
	if (!req->ws_protocol || !api_is_terminal_handshake(req))
		return 0;
	static const size_t plen = sizeof(API_WS_KEY_PREFIX) - 1;
	int found = 0;
	for (const char *p = req->ws_protocol; *p;) {
		p += strspn(p, " \t,");
		size_t len = strcspn(p, ",");
		size_t end = len;
		while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t'))
			end--;
		if (end >= plen && strncasecmp(p, API_WS_KEY_PREFIX, plen) == 0) {
			struct buf b = {.max = API_WS_BEARER_SIZE - 8};
			int r = found ? -EINVAL : key_decode(p + plen, end - plen, &b);
			if (r == 0)
				snprintf(buf, API_WS_BEARER_SIZE, "Bearer %s", b.data);
			if (b.data)
				explicit_bzero(b.data, b.cap);
			buf_release(&b);
			if (r < 0) {
				explicit_bzero(buf, API_WS_BEARER_SIZE);
				return r;
			}
			found = 1;
		}
		p += len;
	}
	return found;
}

bool api_request_has_key(const struct api_request *req)
{
	if (req->authorization)
		return true;
	if (!req->ws_protocol || !api_is_terminal_handshake(req))
		return false;
	static const size_t plen = sizeof(API_WS_KEY_PREFIX) - 1;
	for (const char *p = req->ws_protocol; *p;) {
		p += strspn(p, " \t,");
		if (strncasecmp(p, API_WS_KEY_PREFIX, plen) == 0)
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

int api_ws_protocol_check(const struct api_request *req, bool *ret_echo, struct api_error *e)
{
	*ret_echo = false;
	if (!req->ws_protocol)
		return 0;
	if (!api_header_has_token(req->ws_protocol, API_WS_PROTOCOL))
		return api_error_set(e, API_ERR_BAD_HANDSHAKE, "Sec-WebSocket-Protocol",
				     "a terminal's subprotocols must include " API_WS_PROTOCOL);
	*ret_echo = true;
	return 0;
}

bool api_origin_is_valid(const char *s)
{
	const char *host;
	if (!s || strlen(s) >= API_ORIGIN_MAX)
		return false;
	if (strncmp(s, "http://", 7) == 0)
		host = s + 7;
	else if (strncmp(s, "https://", 8) == 0)
		host = s + 8;
	else
		return false;
	if (!*host)
		return false;
	/* a host (a name, an IPv4 or a [IPv6] address) and a port: no path, query or user */
	for (const char *p = host; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(".-:[]", *p)))
			return false;
	return true;
}

int api_origin_check(const struct api_ctx *ctx, const struct api_request *req, struct api_error *e)
{
	if (!req->origin)
		return 0;
	for (size_t i = 0; ctx->origins && i < ctx->norigins; i++)
		if (strcasecmp(req->origin, ctx->origins[i]) == 0)
			return 0;
	return api_error_set(e, API_ERR_FORBIDDEN, "Origin",
			     "a page of this origin may not open a terminal (agentboxd "
			     "--allow-origin names those that may)");
}

/* The query parameters that would be a key in a URL (any case). */
static const char *const key_params[] = {
    "key",	     "token",  "access_token", "api_key",  "apikey",
    "authorization", "bearer", "auth",	       "password", NULL};

static bool in_list(const char *const *list, const char *name)
{
	for (; *list; list++)
		if (strcasecmp(*list, name) == 0)
			return true;
	return false;
}

/* A number as a JSON integer, anything else as a string: exec's own check then words it. */
static json_t *number_or_string(const char *v)
{
	uint64_t n;
	if (parse_u64(v, &n) == 0 && n <= INT64_MAX)
		return json_integer((json_int_t)n);
	return json_string(v);
}

/* One decoded parameter into the exec body's JSON. */
static int put_param(json_t *body, json_t *command, json_t *env, const char *name,
		     const char *value, struct api_error *e)
{
	char field[API_FIELD_MAX];
	api_field_key(field, "", name);
	if (strcmp(name, "command") == 0)
		return json_array_append_new(command, json_string(value)) < 0 ? -ENOMEM : 0;
	if (strcmp(name, "env") == 0) {
		const char *eq = strchr(value, '=');
		if (!eq)
			return api_error_set(e, API_ERR_INVALID_FIELD, "env",
					     "env is NAME=VALUE, once per variable");
		_cleanup_free_ char *key = strndup(value, (size_t)(eq - value));
		if (!key)
			return -ENOMEM;
		if (json_object_get(env, key)) {
			api_field_key(field, "env", key);
			return api_error_set(e, API_ERR_INVALID_FIELD, field, "%s is given twice",
					     field);
		}
		return json_object_set_new(env, key, json_string(eq + 1)) < 0 ? -ENOMEM : 0;
	}
	if (in_list(key_params, name))
		return api_error_set(e, API_ERR_INVALID_FIELD, field,
				     "a key never goes in a URL, which logs keep: send it as the "
				     "subprotocol " API_WS_KEY_PREFIX "<base64url of the key>");
	static const char *const scalars[] = {"cwd", "timeout_s", "rows", "cols", "tty"};
	bool known = false;
	for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++)
		known = known || strcmp(scalars[i], name) == 0;
	if (!known)
		return api_error_set(e, API_ERR_UNKNOWN_FIELD, field,
				     "a terminal's GET takes no query parameter %s", field);
	if (json_object_get(body, name))
		return api_error_set(e, API_ERR_INVALID_FIELD, field,
				     "query parameter %s is given twice", field);
	json_t *v;
	if (strcmp(name, "tty") == 0) {
		if (strcmp(value, "1") != 0 && strcmp(value, "true") != 0)
			return api_error_set(
			    e, API_ERR_INVALID_FIELD, "tty",
			    "a GET of exec is a terminal: tty is 1, true or absent");
		v = json_true();
	} else if (strcmp(name, "cwd") == 0) {
		v = json_string(value);
	} else {
		v = number_or_string(value);
	}
	return json_object_set_new(body, name, v) < 0 ? -ENOMEM : 0;
}

struct exec_query {
	json_t *body, *command, *env;
};

static int each_param(const char *name, const char *value, void *data, struct api_error *e)
{
	struct exec_query *q = data;
	return put_param(q->body, q->command, q->env, name, value, e);
}

int exec_request_from_query(const char *query, struct exec_request *ret, struct api_error *e)
{
	memset(ret, 0, sizeof(*ret));
	if (query && strlen(query) > API_QUERY_MAX)
		return api_error_set(e, API_ERR_INVALID_FIELD, "query",
				     "the query string is longer than %d bytes", API_QUERY_MAX);
	_cleanup_free_ char *s = strdup(query ? query : "");
	_cleanup_json_ json_t *body = json_object();
	_cleanup_json_ json_t *command = json_array();
	_cleanup_json_ json_t *env = json_object();
	if (!s || !body || !command || !env)
		return -ENOMEM;
	struct exec_query q = {.body = body, .command = command, .env = env};
	int r = api_query_each(s, each_param, &q, e);
	if (r < 0)
		return r;
	/* absent "command" stays absent: missing_field, as for a body without it */
	if ((json_array_size(command) && json_object_set(body, "command", command) < 0) ||
	    (json_object_size(env) && json_object_set(body, "env", env) < 0) ||
	    json_object_set_new(body, "tty", json_true()) < 0)
		return -ENOMEM;
	return exec_request_from_json(TAKE_PTR(body), ret, e);
}
