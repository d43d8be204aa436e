/*
 * fleet-ops.c - what the API asks of the fleet: make a sandbox (from the
 * pool, or on demand), find a live one, delete, pause, set the expiry,
 * call its shim, and what a shim's errno means as an API error.
 */
#include "daemon/fleet-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/limits.h"
#include "shim/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- requests ------------------------------------------------------------ */

void fleet_error_response(struct api_response *resp, int errnum, const char *message,
			  const char *what)
{
	bool file = what && strcmp(what, "file") == 0;
	bool proc = what && strcmp(what, "process") == 0;
	const char *m = message && *message ? message : strerror(errnum);
	switch (errnum) {
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
		if (proc)
			api_error_response(resp, API_ERR_PROCESS_NOT_FOUND, NULL, "%s", m);
		else
			api_error_response(resp, API_ERR_FILE_NOT_FOUND, file ? "path" : NULL, "%s",
					   m);
		return;
	case ESRCH:
		api_error_response(resp, API_ERR_PROCESS_ENDED, NULL, "%s", m);
		return;
	case EBUSY:
		api_error_response(resp, API_ERR_SANDBOX_PAUSED, NULL, "the sandbox is paused");
		return;
	case EAGAIN:
		api_error_response(resp, API_ERR_TOO_MANY_PROCESSES, NULL, "%s", m);
		return;
	case EACCES:
	case EPERM:
	case EROFS:
		api_error_response(resp, API_ERR_PERMISSION_DENIED, file ? "path" : NULL, "%s", m);
		return;
	case EISDIR:
	case ENXIO:
		api_error_response(resp, API_ERR_NOT_A_FILE, file ? "path" : NULL, "%s", m);
		return;
	case EINVAL:
		if (file)
			api_error_response(resp, API_ERR_NOT_A_FILE, "path", "%s", m);
		else
			api_error_response(resp, API_ERR_INVALID_FIELD, NULL, "%s", m);
		return;
	case ENOSPC:
	case EDQUOT:
		api_error_response(resp, API_ERR_NO_SPACE, NULL, "the sandbox's disk is full");
		return;
	case E2BIG:
	case ENAMETOOLONG:
		api_error_response(resp, API_ERR_INVALID_FIELD, file ? "path" : NULL, "%s", m);
		return;
	case EPIPE:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECANCELED: /* the sandbox is ending */
		api_error_response(resp, API_ERR_SANDBOX_ENDED, NULL, "the sandbox has ended");
		return;
	default:
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "shim: %s", m);
	}
}

int fleet_call(struct fleet *f, const char *id, json_t *request, int pass_fd, json_t **ret_reply,
	       int *ret_fd, const char *what, struct api_response *resp)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	struct error err = {0};
	int r = shim_call(dir, request, pass_fd, 30000, ret_reply, ret_fd, &err);
	if (r < 0) {
		fleet_error_response(resp, -r, err.msg, what);
		return -EINVAL;
	}
	return 0;
}

static int store_fail(struct api_response *resp, int r, const struct error *err, const char *id)
{
	if (r == -ENOENT)
		api_error_response(resp, API_ERR_NOT_FOUND, NULL, "no sandbox %s", id);
	else if (r == -ESTALE)
		api_error_response(resp, API_ERR_SANDBOX_ENDED, NULL, "the sandbox %s has ended",
				   id);
	else {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "store: %s", err->msg);
	}
	return -EINVAL;
}

int fleet_get_live(struct fleet *f, struct store *st, const char *id, bool need_running,
		   struct sandbox_record *ret, struct api_response *resp)
{
	(void)f;
	struct error err = {0};
	int r = store_sandbox_get(st, id, ret, &err);
	if (r < 0)
		return store_fail(resp, r, &err, id);
	if (ret->status == SANDBOX_POOLED) {
		sandbox_record_release(ret);
		return store_fail(resp, -ENOENT, &err, id);
	}
	if (ret->status == SANDBOX_ENDED) {
		sandbox_record_release(ret);
		return store_fail(resp, -ESTALE, &err, id);
	}
	if (need_running && ret->status == SANDBOX_PAUSED) {
		sandbox_record_release(ret);
		api_error_response(resp, API_ERR_SANDBOX_PAUSED, NULL,
				   "the sandbox %s is paused: resume it first", id);
		return -EINVAL;
	}
	return 0;
}

/* Take a pooled sandbox, if one is ready. */
static bool take_pooled(struct fleet *f, char id[SANDBOX_ID_SIZE])
{
	bool got = false;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n && !got; i++) {
		if (f->m[i].pooled && fleet_shim_alive(f->m[i].lock_fd)) {
			f->m[i].pooled = false;
			memcpy(id, f->m[i].id, SANDBOX_ID_SIZE);
			got = true;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return got;
}

static int claim_pooled(struct fleet *f, struct store *st, const char *id,
			const struct sandbox_request *req, int64_t now, struct error *err)
{
	char dir[4200];
	fleet_dir(f, id, dir, sizeof(dir));
	json_t *spec = json_loads(req->spec_json, 0, NULL);
	json_t *env = json_object_get(spec, "env");
	int r = spec ? 0 : -ENOMEM;
	if (r == 0 && json_object_size(env) > 0) {
		/* a pooled sandbox was made with an empty env.json: only a real env is written */
		_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		r = dfd < 0 ? -errno : fleet_write_json(dfd, "env.json", env);
	}
	json_decref(spec);
	if (r < 0)
		return error_set_errno(err, -r, "%s/env.json", dir);
	int64_t expires = now + req->timeout_ms;
	if ((r = store_sandbox_claim(st, id, now, expires, req->metadata_json, err)) < 0)
		return r;
	return fleet_tell(f, id, "expire", expires, 5000, err);
}

int fleet_create(struct fleet *f, struct store *st, const struct sandbox_request *req, int64_t now,
		 struct sandbox_record *ret, struct api_response *resp)
{
	struct error err = {0};
	char id[SANDBOX_ID_SIZE];
	int r;
	while (req->default_limits && take_pooled(f, id)) {
		if ((r = claim_pooled(f, st, id, req, now, &err)) == 0)
			return fleet_get_live(f, st, id, false, ret, resp);
		/* that one was no good: it ends, and the next is tried */
		fprintf(stderr, "agentboxd: pooled sandbox %s: %s\n", id, err.msg);
		(void)fleet_tell(f, id, "stop", 0, 2000, &err);
	}
	struct sandbox_record s = {.status = SANDBOX_RUNNING,
				   .created_at = now,
				   .expires_at = now + req->timeout_ms,
				   .spec_json = req->spec_json,
				   .metadata_json = req->metadata_json};
	if (sandbox_id_new(s.id) < 0)
		return store_fail(resp, -EIO, &err, "");
	if ((r = store_sandbox_insert(st, &s, &err)) < 0)
		return store_fail(resp, r, &err, s.id);
	json_t *spec = json_loads(req->spec_json, 0, NULL);
	_cleanup_free_ char *env =
	    spec ? json_dumps(json_object_get(spec, "env"), JSON_COMPACT) : NULL;
	json_decref(spec);
	r = env ? fleet_start_shim(f, s.id, req->spec_json, env, s.expires_at, false, &err)
		: error_set(&err, ENOMEM, "out of memory");
	if (r < 0) {
		struct error e2 = {0};
		(void)store_sandbox_end(st, s.id, wall_clock_ms(), "failed", err.msg, &e2);
		fleet_remove_dir(f, s.id);
		api_error_response(resp, API_ERR_SANDBOX_FAILED, NULL,
				   "the sandbox could not be built: %s", err.msg);
		return -EIO;
	}
	return fleet_get_live(f, st, s.id, false, ret, resp);
}

int fleet_delete(struct fleet *f, struct store *st, const char *id, struct api_response *resp)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, resp);
	if (r < 0)
		return r;
	sandbox_record_release(&s);
	pthread_mutex_lock(&f->lock);
	struct member *m = fleet_find_member(f, id);
	if (m)
		m->ending = true;
	pthread_mutex_unlock(&f->lock);
	struct error err = {0};
	(void)fleet_tell(f, id, "stop", 0, 5000, &err);
	/* wait for the shim to be gone (it writes end.json first) */
	int64_t deadline = wall_clock_ms() + 10000;
	pthread_mutex_lock(&f->lock);
	while ((m = fleet_find_member(f, id)) && fleet_shim_alive(m->lock_fd) &&
	       wall_clock_ms() < deadline) {
		pthread_mutex_unlock(&f->lock);
		usleep(2000);
		pthread_mutex_lock(&f->lock);
	}
	bool gone = !m || !fleet_shim_alive(m->lock_fd);
	if (m && gone)
		fleet_drop_member(f, m);
	else if (m)
		m->ending = false;
	pthread_mutex_unlock(&f->lock);
	if (!gone) {
		api_error_response(resp, API_ERR_INTERNAL, NULL, "internal error");
		snprintf(resp->log, sizeof(resp->log), "sandbox %s: its supervisor did not stop",
			 id);
		return -EIO;
	}
	/* end.json says "deleted": the shim wrote it for our stop */
	r = fleet_record_end(f, st, id, false, &err);
	return r < 0 ? store_fail(resp, r, &err, id) : 0;
}

int fleet_pause(struct fleet *f, struct store *st, const char *id, bool pause,
		struct api_response *resp)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, resp);
	if (r < 0)
		return r;
	enum sandbox_status from = s.status, to = pause ? SANDBOX_PAUSED : SANDBOX_RUNNING;
	sandbox_record_release(&s);
	if (from == to)
		return 0;
	struct error err = {0};
	if ((r = fleet_tell(f, id, pause ? "pause" : "resume", 0, 30000, &err)) < 0) {
		fleet_error_response(resp, -r, err.msg, "sandbox");
		return -EINVAL;
	}
	r = store_sandbox_set_status(st, id, from, to, &err);
	return r < 0 ? store_fail(resp, r, &err, id) : 0;
}

int fleet_set_expiry(struct fleet *f, struct store *st, const char *id, int64_t expires_at,
		     struct api_response *resp)
{
	struct sandbox_record s = {0};
	int r = fleet_get_live(f, st, id, false, &s, resp);
	if (r < 0)
		return r;
	sandbox_record_release(&s);
	struct error err = {0};
	if ((r = store_sandbox_set_expiry(st, id, expires_at, &err)) < 0)
		return store_fail(resp, r, &err, id);
	if ((r = fleet_tell(f, id, "expire", expires_at, 30000, &err)) < 0) {
		fleet_error_response(resp, -r, err.msg, "sandbox");
		return -EINVAL;
	}
	return 0;
}

json_t *fleet_exec_env(struct fleet *f, const char *id, json_t *extra)
{
	char path[4400];
	fleet_dir(f, id, path, sizeof(path) - 16);
	strncat(path, "/env.json", sizeof(path) - strlen(path) - 1);
	json_t *base = json_load_file(path, 0, NULL);
	json_t *merged = json_pack("{s:s, s:s, s:s}", "PATH", SPEC_DEFAULT_PATH, "HOME",
				   SPEC_DEFAULT_WORKDIR, "LANG", SPEC_DEFAULT_LANG);
	json_t *out = json_array();
	if (!merged || !out || (base && json_object_update(merged, base) < 0) ||
	    (extra && json_object_update(merged, extra) < 0)) {
		json_decref(base);
		json_decref(merged);
		json_decref(out);
		return NULL;
	}
	const char *k;
	json_t *v;
	json_object_foreach(merged, k, v)
	{
		const char *val = json_string_value(v);
		size_t n = strlen(k) + (val ? strlen(val) : 0) + 2;
		char *kv = malloc(n);
		if (!kv ||
		    json_array_append_new(
			out, json_string((snprintf(kv, n, "%s=%s", k, val ? val : ""), kv))) < 0) {
			free(kv);
			json_decref(out);
			out = NULL;
			break;
		}
		free(kv);
	}
	json_decref(base);
	json_decref(merged);
	return out;
}
