/*
 * sandbox-commit.c - POST /v1/sandboxes/{id}/commit: a sandbox of an
 * image becomes a new image of the store, its base's layers and one more,
 * what the sandbox wrote (its overlay's upper layer: image/commit.h).
 *
 * The sandbox is paused for the commit, so what is read holds still, and
 * resumed after it when it was running; the upper layer comes from its
 * shim (fleet_ops.upper), which takes it from the sandbox's init.
 */
#include "api/api-internal.h"

#include "api/task-request-internal.h"
#include "base/json-cleanup.h"
#include "image/commit.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char *const commit_fields[] = {"name", "comment", "author", NULL};

/* An optional string of body, at most max bytes, no NUL: into *ret (NULL when absent). */
static int text_field(json_t *body, const char *key, size_t max, const char **ret,
		      struct api_error *e)
{
	json_t *v = json_object_get(body, key);
	*ret = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v) || json_string_length(v) > max ||
	    memchr(json_string_value(v), '\0', json_string_length(v)))
		return INVALID(e, key, "%s must be a string of at most %zu bytes, without NUL", key,
			       max);
	*ret = json_string_value(v);
	return 0;
}

/* The config digest of the image a sandbox's spec names, or NULL. */
static const char *base_of(json_t *spec)
{
	return json_string_value(json_object_get(json_object_get(spec, "image"), "config"));
}

int api_sandbox_commit(struct api_call *c)
{
	const struct fleet_ops *ops = api_fleet(c);
	if (!ops)
		return -EIO;
	int r;
	_cleanup_json_ json_t *body = task_request_load(c->req->body, c->req->body_len, c->err, &r);
	if (!body)
		return r;
	const char *name, *comment, *author;
	char norm[IMAGE_REF_MAX];
	struct error err = {0};
	if ((r = task_request_check_unknown(body, "", commit_fields, c->err)) < 0 ||
	    (r = text_field(body, "name", IMAGE_REF_MAX - 1, &name, c->err)) < 0 ||
	    (r = text_field(body, "comment", IMAGE_COMMIT_TEXT_MAX, &comment, c->err)) < 0 ||
	    (r = text_field(body, "author", IMAGE_COMMIT_TEXT_MAX, &author, c->err)) < 0)
		return r;
	if (!name)
		return api_error_set(c->err, API_ERR_MISSING_FIELD, "name",
				     "name is required: the new image's name:tag");
	if (image_ref_normalize(name, norm, sizeof(norm), &err) < 0)
		return INVALID(c->err, "name", "%s", err.msg);
	if (!c->ctx->images || !ops->upper)
		return api_error_internal(c->err, ENOSYS, "this agentboxd cannot commit sandboxes");

	struct sandbox_record s = {0};
	if ((r = ops->get_live(c->ctx->fleet, c->ctx->store, c->id, false, &s, &err)) < 0)
		return api_fleet_error(c, r, &err, "sandbox");
	bool was_paused = s.status == SANDBOX_PAUSED;
	_cleanup_json_ json_t *spec = json_loads(s.spec_json ? s.spec_json : "{}", 0, NULL);
	sandbox_record_release(&s);
	const char *base = base_of(spec);
	if (!base)
		return api_error_set(c->err, API_ERR_CONFLICT, NULL,
				     "sandbox %s has no image: only a sandbox made of an image "
				     "(\"image\" on its create) can be committed",
				     c->id);
	if (!was_paused && (r = ops->pause(c->ctx->fleet, c->ctx->store, c->id, true, &err)) < 0)
		return api_fleet_error(c, r, &err, "sandbox");
	int upper = -1;
	uint64_t id_base = 0;
	struct image_info info;
	struct image_commit_opts opts = {.comment = comment, .author = author};
	r = ops->upper(c->ctx->fleet, c->id, &upper, &id_base, &err);
	if (r < 0)
		r = api_fleet_error(c, r, &err, "sandbox");
	else if ((r = image_commit(c->ctx->images, base, upper, (uid_t)id_base, norm, &opts, &info,
				   NULL, &err)) < 0)
		r = api_image_error(c->err, r, &err);
	if (upper >= 0)
		close(upper);
	/* resumed whatever came of it; one that will not resume shows as paused */
	struct error resumed = {0};
	if (!was_paused)
		(void)ops->pause(c->ctx->fleet, c->ctx->store, c->id, false, &resumed);
	if (r < 0)
		return r;
	return api_respond_json(c, 201, api_image_json(&info));
}
