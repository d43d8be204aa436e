/*
 * client.c - finding agentboxd, one JSON call, one stream, and turning
 * the daemon's error answers into one line (client.h).
 */
#include "client/client.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_PEER "agentboxd"

/*
 * The key sent as "Authorization: Bearer", over TCP and over a unix socket
 * alike (a local user who is not root may hold one): AGENTBOX_KEY, else
 * AGENTBOX_TOKEN, its older name. Neither set (or both empty): none.
 */
static int auth_from_env(struct client *c, struct error *err)
{
	const char *name = "AGENTBOX_KEY";
	const char *key = getenv(name);
	if (!key || !*key) {
		name = "AGENTBOX_TOKEN";
		key = getenv(name);
	}
	if (!key || !*key)
		return 0;
	size_t n = strlen(key);
	if (n > CLIENT_TOKEN_MAX)
		return error_set(err, EINVAL, "%s is longer than %d bytes", name, CLIENT_TOKEN_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)key[i];
		if (ch <= ' ' || ch == 0x7f)
			return error_set(err, EINVAL, "%s holds spaces or control characters",
					 name);
	}
	if (asprintf(&c->auth_header, "Authorization: Bearer %s", key) < 0) {
		c->auth_header = NULL;
		return error_set_errno(err, ENOMEM, "%s", name);
	}
	return 0;
}

/* --cacert (client_set_cacert()), for every client the command makes. */
static const char *cacert_option;

void client_set_cacert(const char *path)
{
	cacert_option = path;
}

/* The CAs to trust over https: --cacert, else AGENTBOX_CACERT, else none (the system's). */
static int cacert_choose(struct client *c, struct error *err)
{
	const char *env = getenv("AGENTBOX_CACERT");
	const char *path = cacert_option ? cacert_option : env && *env ? env : NULL;
	const char *name = cacert_option ? "--cacert" : "AGENTBOX_CACERT";
	if (!path)
		return 0;
	if (cacert_option && !(c->ep.transport == HTTP_TCP && c->ep.tls))
		return error_set(err, EINVAL,
				 "--cacert is for an https:// AGENTBOX_URL; agentboxd at %s is "
				 "not reached over TLS",
				 c->ep.name);
	if (strlen(path) >= CLIENT_PATH_MAX)
		return error_set(err, ENAMETOOLONG, "%s: the path is longer than %d bytes", name,
				 CLIENT_PATH_MAX - 1);
	snprintf(c->cacert, sizeof(c->cacert), "%s", path);
	return 0;
}

int client_init(struct client *c, const char *socket_path, struct error *err)
{
	*c = (struct client){
	    .connect_timeout_ms = CLIENT_CONNECT_TIMEOUT_MS,
	    .read_timeout_ms = CLIENT_READ_TIMEOUT_MS,
	};
	const char *url = getenv("AGENTBOX_URL");
	const char *host = getenv("AGENTBOX_HOST");
	int r;
	if (socket_path) {
		if ((r = http_endpoint_unix(socket_path, &c->ep, err)) < 0)
			return error_prefix(err, "--socket: ");
	} else if (url && *url) {
		if ((r = http_endpoint_parse_url(url, &c->ep, err)) < 0)
			return error_prefix(err, "AGENTBOX_URL: ");
	} else if (host && *host) {
		if ((r = http_endpoint_parse(host, &c->ep, err)) < 0)
			return error_prefix(err, "AGENTBOX_HOST: ");
	} else if ((r = http_endpoint_unix(CLIENT_DEFAULT_SOCKET, &c->ep, err)) < 0) {
		return r;
	}
	if ((r = cacert_choose(c, err)) < 0)
		return r;
	return auth_from_env(c, err);
}

void client_release(struct client *c)
{
	if (!c)
		return;
	free(c->auth_header);
	c->auth_header = NULL;
}

static int status_errno(int status)
{
	switch (status) {
	case 400:
		return EINVAL;
	case 401:
		return EACCES;
	case 404:
		return ENOENT;
	case 409:
		return EBUSY;
	case 413:
		return E2BIG;
	}
	return EREMOTEIO;
}

/* The daemon said no: its message and code, or what we can tell without them. */
static int api_error(const struct client *c, const struct http_response *res, struct error *err)
{
	int code = status_errno(res->status);
	_cleanup_json_ json_t *root =
	    res->body ? json_loadb(res->body, res->body_len, 0, NULL) : NULL;
	json_t *e = json_object_get(root, "error");
	const char *name = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *field = json_string_value(json_object_get(e, "field"));
	if (name && msg) {
		if (field && *field)
			error_set(err, code, "%s (%s, field %s)", msg, name, field);
		else
			error_set(err, code, "%s (%s)", msg, name);
	} else {
		error_set(err, code, "%s at %s answered %d %s", CLIENT_PEER, c->ep.name,
			  res->status, res->reason);
	}
	if (err && res->status == 401 && !c->auth_header)
		error_prefix(err, "AGENTBOX_KEY is not set: ");
	return -code;
}

static void fill_request(const struct client *c, struct http_request *req, const char *headers[3],
			 const char *accept)
{
	size_t n = 0;
	if (c->auth_header)
		headers[n++] = c->auth_header;
	if (accept)
		headers[n++] = accept;
	headers[n] = NULL;
	req->headers = headers;
	req->host = c->ep.transport == HTTP_TCP ? c->ep.authority : "localhost";
}

struct stream_relay {
	struct client *c;
	http_body_fn fn;
	void *data;
};

/* Note the status as soon as the body starts: a stream can break later. */
static int relay_body(const struct http_response *res, const char *buf, size_t len, void *data,
		      struct error *err)
{
	struct stream_relay *s = data;
	s->c->last_status = res->status;
	return s->fn(res, buf, len, s->data, err);
}

int client_request(struct client *c, const struct client_request *creq, json_t **ret,
		   struct error *err)
{
	c->last_status = 0;
	_cleanup_free_ char *text = NULL;
	struct http_request req = {
	    .method = creq->method,
	    .target = creq->target,
	    .body = creq->body,
	    .body_len = creq->body_len,
	    .read_body = creq->read_body,
	    .read_body_data = creq->read_body_data,
	    .content_type = creq->content_type ? creq->content_type : "application/octet-stream",
	};
	if (creq->json) {
		text = json_dumps(creq->json, JSON_COMPACT | JSON_REAL_PRECISION(15));
		if (!text)
			return error_set_errno(err, ENOMEM, "encoding the request");
		req.body = text;
		req.body_len = strlen(text);
		req.read_body = NULL;
		req.content_type = "application/json";
	}
	char accept_line[128];
	const char *headers[3];
	snprintf(accept_line, sizeof(accept_line), "Accept: %s",
		 creq->accept ? creq->accept : "application/json");
	fill_request(c, &req, headers, accept_line);
	struct stream_relay relay = {.c = c, .fn = creq->on_body, .data = creq->data};
	int read_timeout_ms = creq->read_timeout_ms;
	if (read_timeout_ms == 0)
		read_timeout_ms = c->read_timeout_ms;
	else if (read_timeout_ms < 0)
		read_timeout_ms = 0; /* http-client.h: 0 = no limit */
	struct http_options opt = {
	    .connect_timeout_ms = c->connect_timeout_ms,
	    .read_timeout_ms = read_timeout_ms,
	    .deadline_ms = creq->deadline_ms,
	    .peer = CLIENT_PEER,
	    .cacert = c->cacert[0] ? c->cacert : NULL,
	    .on_body = creq->on_body ? relay_body : NULL,
	    .data = &relay,
	};
	struct http_response res;
	int r = http_request(&c->ep, &req, &opt, &res, err);
	if (r == -EKEYREJECTED && !c->cacert[0] && err) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 " (give its CA with --cacert FILE or AGENTBOX_CACERT)");
	}
	if (r < 0)
		return r;
	c->last_status = res.status;
	if (res.status / 100 != 2) {
		r = api_error(c, &res, err);
		http_response_release(&res);
		return r;
	}
	if (creq->on_body) {
		http_response_release(&res);
		return 0;
	}
	json_error_t jerr;
	_cleanup_json_ json_t *json =
	    json_loadb(res.body ? res.body : "", res.body_len, JSON_DECODE_ANY, &jerr);
	http_response_release(&res);
	if (!json) {
		return error_set(err, EPROTO,
				 "%s at %s answered with something that is not JSON: %s",
				 CLIENT_PEER, c->ep.name, jerr.text);
	}
	if (ret)
		*ret = TAKE_PTR(json);
	return 0;
}

int client_call(struct client *c, const char *method, const char *target, const json_t *body,
		json_t **ret, struct error *err)
{
	struct client_request req = {.method = method, .target = target, .json = body};
	return client_request(c, &req, ret, err);
}

int client_stream(struct client *c, const char *target, const char *accept, int64_t deadline_ms,
		  int read_timeout_ms, http_body_fn fn, void *data, struct error *err)
{
	struct client_request req = {
	    .method = "GET",
	    .target = target,
	    .accept = accept ? accept : "*/*",
	    .on_body = fn,
	    .data = data,
	    .read_timeout_ms = read_timeout_ms > 0 ? read_timeout_ms : -1,
	    .deadline_ms = deadline_ms,
	};
	return client_request(c, &req, NULL, err);
}

int client_list(struct client *c, const char *target, const char *key, client_page_fn fn,
		void *data, struct error *err)
{
	char after[CLIENT_ID_MAX + 1] = "";
	bool has_query = strchr(target, '?') != NULL;
	for (int page = 0; page < CLIENT_PAGES_MAX; page++) {
		_cleanup_free_ char *url = NULL;
		if (asprintf(&url, "%s%s%s", target,
			     after[0] ? (has_query ? "&after=" : "?after=") : "", after) < 0) {
			url = NULL;
			return error_set_errno(err, ENOMEM, "building the request");
		}
		_cleanup_json_ json_t *list = NULL;
		int r = client_call(c, "GET", url, NULL, &list, err);
		if (r < 0)
			return r;
		json_t *items = json_object_get(list, key);
		if (!json_is_array(items))
			return error_set(err, EPROTO, "%s's answer has no %s list", CLIENT_PEER,
					 key);
		r = fn(items, page, data, err);
		json_t *next = json_object_get(list, "next");
		const char *n = json_string_value(next);
		if (r == 0 && n && (!client_id_is_valid(n) || strcmp(n, after) == 0))
			r = error_set(err, EPROTO, "%s's answer has a bad next page", CLIENT_PEER);
		else if (r == 0 && !n && next && !json_is_null(next))
			r = error_set(err, EPROTO, "%s's answer has a bad next page", CLIENT_PEER);
		if (r == 0 && n)
			snprintf(after, sizeof(after), "%s", n);
		if (r < 0 || !n)
			return r;
	}
	return error_set(err, EPROTO, "stopped after %d pages", CLIENT_PAGES_MAX);
}

/* Connect, one call, disconnect. */
static int call_once(const char *socket_path, const char *method, const char *target,
		     const json_t *body, json_t **ret, struct error *err)
{
	struct client c;
	int r = client_init(&c, socket_path, err);
	if (r < 0)
		return r;
	r = client_call(&c, method, target, body, ret, err);
	client_release(&c);
	return r;
}

int client_task_request(const char *socket_path, const char *method, const char *id,
			const char *suffix, json_t **ret, struct error *err)
{
	char target[CLIENT_TARGET_MAX];
	int r = client_task_target(target, sizeof(target), id, suffix, err);
	if (r < 0)
		return r;
	return call_once(socket_path, method, target, NULL, ret, err);
}

int client_sandbox_request(const char *socket_path, const char *method, const char *id,
			   const char *suffix, const json_t *body, json_t **ret, struct error *err)
{
	char target[CLIENT_TARGET_MAX];
	int r = client_sandbox_target(target, sizeof(target), id, suffix, err);
	if (r < 0)
		return r;
	return call_once(socket_path, method, target, body, ret, err);
}
