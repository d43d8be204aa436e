/*
 * images.c - the image routes over the image store (image/store.h):
 * GET /v1/images, GET and DELETE /v1/images/{ref}, POST
 * /v1/images/prune, GET /v1/images/{ref}/export (the image as an OCI
 * layout tar, written to an unlinked temporary of the store and answered
 * from its fd), and POST /v1/images/import, whose body (an archive)
 * the server streams into a temporary file of the store (an upload,
 * api.h) before it is imported; POST /v1/images/bootstrap, which runs
 * debootstrap (image/bootstrap.h). Images are the host's, not a tenant's:
 * any principal may list and inspect them, only an admin change them.
 */
#include "api/api-internal.h"
#include "api/task-request-internal.h"
#include "base/json-cleanup.h"
#include "image/pull.h"
#include "image/commit.h"

#include "api/task-request-internal.h"
#include "image/bootstrap.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The store, or an internal error. */
static struct image_store *images_of(struct api_call *c)
{
	if (!c->ctx->images)
		api_error_internal(c->err, ENOSYS, "this agentboxd keeps no image store");
	return c->ctx->images;
}

int api_image_error(struct api_error *e, int r, const struct error *err)
{
	switch (r) {
	case -ENOENT:
		return api_error_set(e, API_ERR_NOT_FOUND, NULL, "%s", err->msg);
	case -EBUSY:
		return api_error_set(e, API_ERR_IMAGE_IN_USE, NULL, "%s", err->msg);
	case -EINVAL:
	case -E2BIG:
	case -EFBIG:
	case -ENOEXEC:
	case -EPERM:
	case -ENAMETOOLONG:
		return api_error_set(e, API_ERR_INVALID_IMAGE, NULL, "%s", err->msg);
	case -ENOSPC:
		return api_error_set(e, API_ERR_NO_SPACE, NULL, "%s", err->msg);
	case -ENOMEM:
		return r;
	default:
		return api_error_internal(e, -r, err->msg);
	}
}

static json_t *strings_json(char **v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

json_t *api_image_json(const struct image_info *i)
{
	return json_pack("{s:s?, s:s, s:s, s:I, s:I, s:o, s:o}", "name",
			 i->name[0] ? i->name : NULL, "digest", i->digest, "config_digest",
			 i->config_digest, "size", (json_int_t)i->size, "unpacked_size",
			 (json_int_t)i->unpacked, "created", api_time_json(i->created_ms),
			 "imported", api_time_json(i->imported_ms));
}

int api_images_list(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	struct image_info *v = NULL;
	size_t n = 0;
	struct error err = {0};
	int r = image_list(s, &v, &n, &err);
	if (r < 0)
		return api_image_error(c->err, r, &err);
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, api_image_json(&v[i])) < 0)
			json_decref(TAKE_PTR(a));
	free(v);
	return api_respond_json(c, 200, a ? json_pack("{s:o}", "images", a) : NULL);
}

int api_image_get(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	struct image_info info;
	struct image_manifest m = {0};
	struct image_config cfg = {0};
	struct error err = {0};
	int r = image_inspect(s, c->ref, &info, &m, &cfg, &err);
	if (r < 0)
		return api_image_error(c->err, r, &err);
	json_t *layers = json_array();
	for (size_t i = 0; layers && i < m.nlayers; i++)
		json_array_append_new(layers,
				      json_pack("{s:s, s:s, s:I}", "digest", m.layers[i].digest,
						"media_type", m.layers[i].media_type, "size",
						(json_int_t)m.layers[i].size));
	json_t *config =
	    json_pack("{s:o, s:s?, s:s?, s:o, s:o, s:s, s:s}", "env",
		      strings_json(cfg.env, cfg.nenv), "working_dir", cfg.working_dir, "user",
		      cfg.user, "entrypoint", strings_json(cfg.entrypoint, cfg.nentrypoint), "cmd",
		      strings_json(cfg.cmd, cfg.ncmd), "os", cfg.os, "architecture", cfg.arch);
	json_t *v = api_image_json(&info);
	if (v && config && layers) {
		json_object_set_new(v, "config", config);
		json_object_set_new(v, "layers", layers);
	} else {
		json_decref(config);
		json_decref(layers);
		json_decref(TAKE_PTR(v));
	}
	image_manifest_release(&m);
	image_config_release(&cfg);
	return api_respond_json(c, 200, v);
}

int api_image_delete(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	struct error err = {0};
	int r = image_remove(s, c->ref, &err);
	if (r < 0)
		return api_image_error(c->err, r, &err);
	return api_respond_json(c, 200, json_pack("{s:s, s:b}", "image", c->ref, "deleted", 1));
}

int api_images_prune(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	struct image_prune_stats st = {0};
	struct error err = {0};
	int r = image_prune(s, &st, &err);
	if (r < 0)
		return api_image_error(c->err, r, &err);
	return api_respond_json(
	    c, 200,
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "images_removed", (json_int_t)st.images,
		      "blobs_removed", (json_int_t)st.blobs, "trees_removed", (json_int_t)st.trees,
		      "bytes_freed", (json_int_t)st.bytes, "in_use", (json_int_t)st.busy));
}

int api_image_export(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	char path[PATH_MAX];
	int fd = -1;
	struct error err = {0};
	if (image_store_tmp(s, path, sizeof(path), &fd, &err) < 0)
		return api_error_internal(c->err, err.code, err.msg);
	(void)unlink(path); /* its fd keeps it until the answer is sent; a crash leaves nothing */
	struct stat st;
	int r = image_export(s, c->ref, fd, NULL, &err);
	if (r == 0 && (lseek(fd, 0, SEEK_SET) < 0 || fstat(fd, &st) < 0))
		r = error_set_errno(&err, errno, "the export's temporary file");
	if (r < 0) {
		close(fd);
		return api_image_error(c->err, r, &err);
	}
	struct api_response *res = api_respond_kind(c, 200, "application/x-tar", API_RESPONSE_FILE);
	res->fd = fd;
	res->size = (uint64_t)st.st_size;
	return 0;
}

int api_images_import(struct api_call *c)
{
	/* the server streams this body: api_upload_begin() */
	return api_error_internal(c->err, ENOSYS, "POST /v1/images/import reached api_handle()");
}

uint64_t api_image_import_max(const struct api_ctx *ctx)
{
	return ctx->image_import_max ? ctx->image_import_max : IMAGE_IMPORT_MAX;
}

int api_image_upload_open(struct api_call *c, char *path, size_t size, int *ret_fd, char *name,
			  size_t name_size)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	const char *asked = api_query_get(c->query, "name");
	struct error err = {0};
	name[0] = '\0';
	if (asked && image_ref_normalize(asked, name, name_size, &err) < 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "name", "%s", err.msg);
	if (image_store_tmp(s, path, size, ret_fd, &err) < 0)
		return api_error_internal(c->err, err.code, err.msg);
	return 0;
}

int api_image_upload_finish(struct image_store *s, const char *path, const char *name,
			    struct api_response *ret, struct api_error *e)
{
	struct image_info info;
	struct error err = {0};
	int r = image_import(s, path, name[0] ? name : NULL, &info, &err);
	(void)unlink(path);
	if (r < 0)
		return api_image_error(e, r, &err);
	json_t *v = api_image_json(&info);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	api_json_response(ret, 201, text);
	return 0;
}

/* ---- POST /v1/images/pull ------------------------------------------------------ */

static const char *const pull_fields[] = {"ref", "name", NULL};

int api_image_pull_error(struct api_error *e, int r, const struct error *err,
			 enum api_error_code missing, const char *field)
{
	switch (r) {
	case -ENOENT:
		return api_error_set(e, missing, field, "%s", err->msg);
	case -EACCES:
	case -EBADMSG:
	case -EPROTO:
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ETIMEDOUT:
	case -ECONNRESET:
		return api_error_set(e, API_ERR_REGISTRY, NULL, "%s", err->msg);
	default:
		return api_image_error(e, r, err);
	}
}

int api_images_pull(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	int r;
	_cleanup_json_ json_t *root = task_request_load(c->req->body, c->req->body_len, c->err, &r);
	if (!root)
		return r;
	if ((r = task_request_check_unknown(root, "", pull_fields, c->err)) < 0)
		return r;
	json_t *ref = json_object_get(root, "ref"), *name = json_object_get(root, "name");
	struct image_pull_ref parsed;
	char norm[IMAGE_REF_MAX];
	struct error err = {0};
	if (!ref)
		return api_error_set(
		    c->err, API_ERR_MISSING_FIELD, "ref",
		    "ref names the image to pull: [HOST[:PORT]/]REPO[:TAG][@DIGEST]");
	if (!json_is_string(ref) || strlen(json_string_value(ref)) != json_string_length(ref) ||
	    image_pull_ref_parse(json_string_value(ref), &parsed, &err) < 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "ref", "%s",
				     err.msg[0] ? err.msg : "ref is a string");
	if (name && (!json_is_string(name) ||
		     image_ref_normalize(json_string_value(name), norm, sizeof(norm), &err) < 0))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "name", "%s",
				     err.msg[0] ? err.msg : "name is a string");
	struct image_info info;
	r = image_pull(s, c->ctx->registries, json_string_value(ref), name ? norm : NULL, &info,
		       &err);
	if (r < 0)
		return api_image_pull_error(c->err, r, &err, API_ERR_NOT_FOUND, "ref");
	return api_respond_json(c, 201, api_image_json(&info));
}

/* ---- POST /v1/images/bootstrap ------------------------------------------------- */

static const char *const bootstrap_fields[] = {"image", "name", "mirror", NULL};

/* The string field key of root (NULL when absent), or an error naming it. */
static int string_field(struct api_call *c, json_t *root, const char *key, const char **ret)
{
	json_t *v = json_object_get(root, key);
	*ret = json_string_value(v);
	if (v && !*ret)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, key, "%s is a string", key);
	return 0;
}

/* Check the body's fields into *b (pointing into root); name into name_buf, normalized. */
static int bootstrap_request(struct api_call *c, json_t *root, struct image_bootstrap *b,
			     char *name_buf, size_t name_size)
{
	char suite[IMAGE_BOOTSTRAP_SUITE_MAX + 1];
	struct error err = {0};
	int r = task_request_check_unknown(root, "", bootstrap_fields, c->err);
	if (r == 0)
		r = string_field(c, root, "image", &b->image);
	if (r == 0)
		r = string_field(c, root, "name", &b->name);
	if (r == 0)
		r = string_field(c, root, "mirror", &b->mirror);
	if (r < 0)
		return r;
	if (!b->image)
		return api_error_set(c->err, API_ERR_MISSING_FIELD, "image",
				     "image is the image to make, \"debian:SUITE\"");
	if (image_bootstrap_suite(b->image, suite, &err) < 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "image", "%s", err.msg);
	if (!image_bootstrap_suite_is_known(suite))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "image",
				     "debootstrap knows no suite '%s'", suite);
	if (b->name && image_ref_normalize(b->name, name_buf, name_size, &err) < 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "name", "%s", err.msg);
	if (b->name)
		b->name = name_buf;
	if (b->mirror && image_bootstrap_check_mirror(b->mirror, &err) < 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "mirror", "%s", err.msg);
	if (!b->mirror)
		b->mirror = c->ctx->debian_mirror;
	b->keyring = c->ctx->debian_keyring;
	return 0;
}

/* 502 with msg, or its end when it is longer than a message: debootstrap's last words. */
static int bootstrap_failed(struct api_error *e, const char *msg)
{
	static const char head[] = "debootstrap failed: ...";
	size_t n = strlen(msg), room = API_MESSAGE_MAX - sizeof(head);
	if (n < API_MESSAGE_MAX)
		return api_error_set(e, API_ERR_BOOTSTRAP_FAILED, NULL, "%s", msg);
	return api_error_set(e, API_ERR_BOOTSTRAP_FAILED, NULL, "%s%s", head, msg + n - room);
}

int api_images_bootstrap(struct api_call *c)
{
	struct image_store *s = images_of(c);
	if (!s)
		return -EIO;
	int r;
	json_t *root = task_request_load(c->req->body, c->req->body_len, c->err, &r);
	if (!root)
		return r;
	struct image_bootstrap b = {0};
	char name[IMAGE_REF_MAX];
	if ((r = bootstrap_request(c, root, &b, name, sizeof(name))) < 0) {
		json_decref(root);
		return r;
	}
	snprintf(c->ref, sizeof(c->ref), "%s", b.name ? b.name : b.image); /* the audit's target */
	/* debootstrap runs for minutes: hold no store connection meanwhile */
	if (c->ctx->store_release)
		c->ctx->store_release(c->ctx);
	struct image_info info;
	struct error err = {0};
	r = image_bootstrap(s, &b, &info, &err);
	json_decref(root);
	if (r == -EREMOTEIO || r == -ETIMEDOUT)
		return bootstrap_failed(c->err, err.msg);
	if (r == -ENOKEY)
		return api_error_internal(c->err, ENOKEY, err.msg);
	if (r < 0)
		return api_image_error(c->err, r, &err);
	return api_respond_json(c, 201, api_image_json(&info));
}
