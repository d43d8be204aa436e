/*
 * sandbox-routes.c - the /v1/sandboxes routes (sandbox-routes.h): the
 * dispatch, the sandbox's own lifecycle, and lists. exec and processes
 * are in sandbox-exec.c, files in sandbox-files.c.
 */
#include "daemon/sandbox-internal.h"

#include "api/json-util.h"
#include "api/sandbox-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "daemon/fleet.h"
#include "shim/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sandbox_respond_json(struct api_response *resp, int status, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	api_json_response(resp, status, text);
}

static void respond_sandbox(struct api_response *resp, struct store *st, const char *id, int status)
{
	struct sandbox_record s = {0};
	struct error err = {0};
	if (store_sandbox_get(st, id, &s, &err) < 0) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "store: %s", err.msg);
		return;
	}
	api_json_response(resp, status, api_sandbox_json(&s));
	sandbox_record_release(&s);
}

/* ---- list --------------------------------------------------------------- */

struct list_ctx {
	struct jbuf b; /* the "sandboxes" array, written as it is read */
	char last[SANDBOX_ID_SIZE];
	size_t n;
};

static int list_one(const struct sandbox_record *s, void *data)
{
	struct list_ctx *l = data;
	char *text = api_sandbox_json(s);
	if (!text)
		return -ENOMEM;
	jbuf_puts(&l->b, l->n ? "," : "");
	jbuf_puts(&l->b, text);
	free(text);
	snprintf(l->last, sizeof(l->last), "%s", s->id);
	l->n++;
	return l->b.failed;
}

static void list_sandboxes(struct store *st, const struct api_sandbox_call *call,
			   struct api_response *resp)
{
	uint32_t statuses =
	    SANDBOX_STATUS_BIT(SANDBOX_RUNNING) | SANDBOX_STATUS_BIT(SANDBOX_PAUSED);
	if (call->status[0]) {
		statuses = 0;
		char buf[sizeof(call->status)];
		snprintf(buf, sizeof(buf), "%s", call->status);
		char *save = NULL;
		for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			enum sandbox_status s;
			if (sandbox_status_parse(tok, &s) < 0 || s == SANDBOX_POOLED) {
				api_error_response(resp, API_ERR_INVALID_FIELD, "status",
						   "status must be running, paused or ended, "
						   "comma-separated");
				return;
			}
			statuses |= SANDBOX_STATUS_BIT(s);
		}
	}
	struct list_ctx l = {0};
	struct sandbox_filter f = {.statuses = statuses,
				   .after_id = call->after[0] ? call->after : NULL,
				   .limit = (size_t)call->limit};
	struct error err = {0};
	jbuf_puts(&l.b, "{\"sandboxes\":[");
	int r = store_sandbox_list(st, &f, list_one, &l, &err);
	if (r == -ENOENT) {
		jbuf_release(&l.b);
		api_error_response(resp, API_ERR_INVALID_FIELD, "after", "no sandbox %s",
				   call->after);
		return;
	}
	if (r < 0) {
		jbuf_release(&l.b);
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "store: %s", err.msg);
		return;
	}
	jbuf_puts(&l.b, "],\"next\":");
	jbuf_str_or_null(&l.b, l.n == (size_t)call->limit ? l.last : NULL);
	jbuf_puts(&l.b, "}");
	char *text = NULL;
	size_t len;
	api_json_response(resp, 200, jbuf_finish(&l.b, &text, &len) == 0 ? text : NULL);
}

/* ---- dispatch ------------------------------------------------------------- */

enum MHD_Result sandbox_serve(struct daemon *d, struct MHD_Connection *c, struct api_ctx *ctx,
			      const struct api_request *req)
{
	struct api_response resp = {0};
	struct api_sandbox_call call;
	enum MHD_Result ok;
	struct store *st = ctx->store;
	struct api_error e = {0};
	if (api_sandbox_begin(ctx, req, &call, &resp) < 0) {
		ok = server_send(c, &resp);
		api_response_release(&resp);
		return ok;
	}
	switch (call.route) {
	case API_ROUTE_SANDBOXES_LIST:
		list_sandboxes(st, &call, &resp);
		break;
	case API_ROUTE_SANDBOXES_CREATE: {
		struct sandbox_request sr = {0};
		struct sandbox_record s = {0};
		if (sandbox_request_parse(req->body, req->body_len, &sr, &e) < 0) {
			api_error_respond(&e, &resp);
			break;
		}
		if (fleet_create(d->fleet, st, &sr, call.now, &s, &resp) == 0) {
			api_json_response(&resp, 201, api_sandbox_json(&s));
			sandbox_record_release(&s);
		}
		sandbox_request_release(&sr);
		break;
	}
	case API_ROUTE_SANDBOX_GET: {
		struct sandbox_record s = {0};
		struct error err = {0};
		int r = store_sandbox_get(st, call.id, &s, &err);
		if (r == 0 && s.status != SANDBOX_POOLED)
			api_json_response(&resp, 200, api_sandbox_json(&s));
		else if (r == 0 || r == -ENOENT)
			api_error_response(&resp, API_ERR_NOT_FOUND, NULL, "no sandbox %s",
					   call.id);
		else
			api_error_response(&resp, API_ERR_INTERNAL, NULL, "internal error");
		sandbox_record_release(&s);
		break;
	}
	case API_ROUTE_SANDBOX_DELETE:
		if (fleet_delete(d->fleet, st, call.id, &resp) == 0)
			respond_sandbox(&resp, st, call.id, 200);
		break;
	case API_ROUTE_SANDBOX_TIMEOUT: {
		int64_t ms = 0;
		if (sandbox_timeout_parse(req->body, req->body_len, &ms, &e) < 0)
			api_error_respond(&e, &resp);
		else if (fleet_set_expiry(d->fleet, st, call.id, call.now + ms, &resp) == 0)
			respond_sandbox(&resp, st, call.id, 200);
		break;
	}
	case API_ROUTE_SANDBOX_PAUSE:
	case API_ROUTE_SANDBOX_RESUME:
		if (fleet_pause(d->fleet, st, call.id, call.route == API_ROUTE_SANDBOX_PAUSE,
				&resp) == 0)
			respond_sandbox(&resp, st, call.id, 200);
		break;
	case API_ROUTE_SANDBOX_EXEC:
		ok = sandbox_exec(d, c, st, &call, req, &resp);
		api_response_release(&resp);
		return ok;
	case API_ROUTE_SANDBOX_PROCESSES:
	case API_ROUTE_PROCESS_OUTPUT:
	case API_ROUTE_PROCESS_KILL:
	case API_ROUTE_FILES_GET:
	case API_ROUTE_FILES_DELETE: {
		struct sandbox_record s = {0};
		bool running = call.route != API_ROUTE_SANDBOX_PROCESSES &&
			       call.route != API_ROUTE_PROCESS_OUTPUT;
		if (fleet_get_live(d->fleet, st, call.id, running, &s, &resp) < 0)
			break;
		sandbox_record_release(&s);
		if (call.route == API_ROUTE_SANDBOX_PROCESSES)
			sandbox_processes(d, &call, &resp);
		else if (call.route == API_ROUTE_PROCESS_KILL)
			sandbox_process_kill(d, &call, req, &resp);
		else if (call.route == API_ROUTE_FILES_DELETE)
			sandbox_files_delete(d, &call, &resp);
		else {
			ok = call.route == API_ROUTE_FILES_GET
				 ? sandbox_files_get(d, c, &call, &resp)
				 : sandbox_process_output(d, c, &call, &resp);
			api_response_release(&resp);
			return ok;
		}
		break;
	}
	default:
		api_error_response(&resp, API_ERR_NOT_FOUND, NULL, "no such route");
	}
	ok = server_send(c, &resp);
	api_response_release(&resp);
	return ok;
}
