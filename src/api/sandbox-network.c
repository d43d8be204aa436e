/*
 * sandbox-network.c - GET /v1/sandboxes/{id}/network: a sandbox's link
 * now (its mode, the bytes it received and sent) and what its network
 * refused, from the relay's events file (network/relay.h), newest last.
 */
#include "api/api-internal.h"

#include "api/json-util.h"
#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The newest refusals of the events file, at most API_NETWORK_DENIED_MAX. */
static json_t *denied(const struct api_call *c, size_t *ret_total)
{
	char path[4200];
	json_t *list = json_array();
	*ret_total = 0;
	if (!list || layout_sandbox_file(path, sizeof(path), c->ctx->state_dir, c->id,
					 LAYOUT_NETWORK_LOG) < 0)
		return list;
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		json_t *e = json_loads(line, 0, NULL);
		if (!json_is_object(e) ||
		    strcmp(json_string_value(json_object_get(e, "type")) ?: "", "egress_denied")) {
			json_decref(e);
			continue;
		}
		(*ret_total)++;
		json_t *t = json_object_get(e, "time");
		json_object_set_new(e, "time", api_time_json(json_integer_value(t)));
		json_object_del(e, "type");
		if (json_array_size(list) == API_NETWORK_DENIED_MAX)
			json_array_remove(list, 0);
		json_array_append_new(list, e);
	}
	return list;
}

int api_sandbox_network(struct api_call *c)
{
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops)
		return -EIO;
	struct sandbox_record s = {0};
	struct error err = {0};
	int r = store_sandbox_get(c->ctx->store, c->id, &s, &err);
	if (r == -ENOENT || (r == 0 && s.status == SANDBOX_POOLED)) {
		sandbox_record_release(&s);
		return api_error_set(c->err, API_ERR_NOT_FOUND, NULL, "no sandbox %s", c->id);
	}
	if (r < 0)
		return api_error_internal(c->err, -r, err.msg);
	bool live = s.status != SANDBOX_ENDED;
	json_t *mode = NULL;
	const char *v;
	size_t len;
	if (s.spec_json && json_member_raw(s.spec_json, "network", &v, &len) == 0) {
		json_t *n = json_loadb(v, len, 0, NULL);
		mode = json_incref(json_object_get(n, "mode"));
		json_decref(n);
	}
	sandbox_record_release(&s);
	/* the link's counters, while there is a link */
	json_t *now = NULL;
	if (live && mode && (r = ops->network(c->ctx->fleet, c->id, &now, &err)) < 0) {
		json_decref(mode);
		return api_fleet_error(c, r, &err, "sandbox");
	}
	size_t total;
	json_t *list = denied(c, &total);
	json_t *in = json_object_get(now, "bytes_in"), *out = json_object_get(now, "bytes_out");
	json_t *body = json_pack("{s:o, s:O, s:O, s:o, s:I}", "mode", mode ?: json_string("none"),
				 "bytes_in", in ?: json_null(), "bytes_out", out ?: json_null(),
				 "denied", list ?: json_array(), "denied_total", (json_int_t)total);
	json_decref(now);
	return api_respond_json(c, 200, body);
}
