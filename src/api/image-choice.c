/*
 * image-choice.c - the image of a task or a sandbox: its fields checked,
 * then resolved against the store with its config's defaults
 * (image-choice.h).
 */
#include "api/image-choice.h"

#include "api/api-internal.h"
#include "api/task-request-internal.h"
#include "core/limits.h"
#include "image/pull.h"
#include "image/store.h"
#include "image/user.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int check_digest(json_t *obj, const char *key, bool required, struct api_error *e)
{
	char field[API_FIELD_MAX];
	api_field_key(field, "image", key);
	json_t *v = json_object_get(obj, key);
	if (!v && !required)
		return 0;
	if (!json_is_string(v) || !image_digest_is_valid(json_string_value(v)))
		return INVALID(e, field, "%s must be sha256:<64 lowercase hex digits>", field);
	return 0;
}

static int parse_image(json_t *v, struct api_error *e)
{
	if (json_is_string(v)) {
		size_t n = json_string_length(v);
		if (n == 0 || n >= IMAGE_REF_MAX)
			return INVALID(e, "image",
				       "image must be a name or digest of 1 to %d bytes",
				       IMAGE_REF_MAX - 1);
		if (memchr(json_string_value(v), '\0', n))
			return INVALID(e, "image", "image must not contain a NUL character");
		return 0;
	}
	if (!json_is_object(v))
		return INVALID(e, "image", "image must be a string (\"name:tag\" or a digest)");
	static const char *const known[] = {"name", "digest", "config", NULL};
	int r = task_request_check_unknown(v, "image", known, e);
	if (r < 0 || (r = check_digest(v, "digest", true, e)) < 0 ||
	    (r = check_digest(v, "config", false, e)) < 0)
		return r;
	json_t *name = json_object_get(v, "name");
	if (name && (!json_is_string(name) || json_string_length(name) >= IMAGE_REF_MAX ||
		     memchr(json_string_value(name), '\0', json_string_length(name))))
		return INVALID(e, "image.name", "image.name must be a string of at most %d bytes",
			       IMAGE_REF_MAX - 1);
	return 0;
}

int image_fields_parse(json_t *root, json_t *out, bool *ret_image, struct api_error *e)
{
	json_t *image = json_object_get(root, "image"), *user = json_object_get(root, "user");
	json_t *cwd = json_object_get(root, "cwd"), *pull = json_object_get(root, "pull");
	int r;
	*ret_image = image != NULL;
	if (image && (r = parse_image(image, e)) < 0)
		return r;
	bool root_user = false;
	if (user) {
		const char *u = json_string_value(user);
		if (!u || (strcmp(u, "root") != 0 && strcmp(u, "sandbox") != 0))
			return INVALID(e, "user", "user must be \"root\" or \"sandbox\"");
		root_user = strcmp(u, "root") == 0;
		if (root_user && !image)
			return INVALID(
			    e, "user",
			    "user \"root\" needs an image: the host's /usr is read-only");
	}
	if (cwd) {
		if (!json_is_string(cwd))
			return INVALID(e, "cwd", "cwd must be a string");
		if (memchr(json_string_value(cwd), '\0', json_string_length(cwd)))
			return INVALID(e, "cwd", "cwd must not contain a NUL character");
		if (strcmp(json_string_value(cwd), "/") != 0 &&
		    (r = api_sandbox_path_check(json_string_value(cwd), "cwd", e)) < 0)
			return r;
	}
	if (pull && !json_is_boolean(pull))
		return INVALID(e, "pull", "pull must be true or false");
	if (pull && json_is_true(pull) && !image)
		return INVALID(e, "pull", "pull needs an image");
	if ((image && json_object_set(out, "image", image) < 0) ||
	    (user && image && json_object_set(out, "user", user) < 0) ||
	    (cwd && json_object_set(out, "cwd", cwd) < 0) ||
	    (json_is_true(pull) && json_object_set(out, "pull", pull) < 0))
		return -ENOMEM;
	return 0;
}

/* ---- resolving --------------------------------------------------------------------- */

/* The image's Env beneath env: entries env has win. */
static int merge_env(json_t *spec, const struct image_config *cfg, struct api_error *e)
{
	json_t *env = json_object_get(spec, "env");
	if (!env) {
		if (json_object_set_new(spec, "env", json_object()) < 0)
			return -ENOMEM;
		env = json_object_get(spec, "env");
	}
	for (size_t i = 0; i < cfg->nenv; i++) {
		const char *kv = cfg->env[i], *eq = strchr(kv, '=');
		size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
		if (strncmp(kv, TASK_REQUEST_ENV_RESERVED, strlen(TASK_REQUEST_ENV_RESERVED)) ==
			0 ||
		    json_object_getn(env, kv, klen))
			continue;
		if (json_object_setn_new(env, kv, klen, json_string(eq ? eq + 1 : "")) < 0)
			return -ENOMEM;
	}
	/* the merged env is held to a request's rules: the same checks, the same limits */
	struct task_request scratch = {0};
	struct api_error inner = {0};
	int r = task_request_parse_env(env, &scratch, &inner);
	task_request_release(&scratch);
	if (r == -EINVAL)
		return INVALID(e, "image", "the image's Env with env: %s", inner.message);
	return r;
}

/* WorkingDir as cwd ("/app/" is "/app"; "" none), unless the request has one. */
static int default_cwd(json_t *spec, const struct image_config *cfg, struct api_error *e)
{
	if (json_object_get(spec, "cwd") || !cfg->working_dir || !*cfg->working_dir)
		return 0;
	char dir[SPEC_PATH_MAX];
	size_t n = strlen(cfg->working_dir);
	while (n > 1 && cfg->working_dir[n - 1] == '/')
		n--;
	if (n >= sizeof(dir))
		return INVALID(e, "image", "the image's WorkingDir is longer than %d bytes",
			       SPEC_PATH_MAX - 1);
	memcpy(dir, cfg->working_dir, n);
	dir[n] = '\0';
	struct api_error inner = {0};
	if (strcmp(dir, "/") != 0 && api_sandbox_path_check(dir, "cwd", &inner) < 0)
		return INVALID(e, "image", "the image's WorkingDir: %s", inner.message);
	return json_object_set_new(spec, "cwd", json_string(dir)) < 0 ? -ENOMEM : 0;
}

/*
 * The image's User, as "UID:GID", unless the request says who runs ("user":
 * "root", or "sandbox", which is dropped here: no "user" is the sandbox
 * user). Root stays opt-in: an image whose User is root runs as the
 * sandbox user unless the request asks for root. The ids must be the
 * sandbox's own (below SPEC_IDS).
 */
static int default_user(json_t *spec, struct image_store *store, const struct image_info *info,
			const struct image_config *cfg, struct api_error *e)
{
	const char *asked = json_string_value(json_object_get(spec, "user"));
	if (asked) {
		if (strcmp(asked, "sandbox") == 0)
			(void)json_object_del(spec, "user");
		return 0;
	}
	if (!cfg->user || !*cfg->user)
		return 0;
	char path[PATH_MAX];
	if (image_tree_path(store, info, path, sizeof(path)) < 0)
		return api_error_internal(e, ENAMETOOLONG, "the image's tree: path too long");
	int tree = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (tree < 0)
		return api_error_internal(e, errno, "cannot open the image's tree");
	uid_t uid;
	gid_t gid;
	struct error err = {0};
	int r = image_user_resolve(tree, cfg->user, &uid, &gid, &err);
	close(tree);
	if (r == -EINVAL)
		return INVALID(e, "image", "the image's %s", err.msg);
	if (r < 0)
		return r == -ENOMEM ? r : api_error_internal(e, -r, err.msg);
	if (uid == 0)
		return 0;
	if (uid >= SPEC_IDS || gid >= SPEC_IDS)
		return INVALID(e, "image",
			       "the image's User '%s' is %u:%u, past a sandbox's ids (below %u)",
			       cfg->user, (unsigned)uid, (unsigned)gid, SPEC_IDS);
	char text[32];
	snprintf(text, sizeof(text), "%u:%u", (unsigned)uid, (unsigned)gid);
	return json_object_set_new(spec, "user", json_string(text)) < 0 ? -ENOMEM : 0;
}

/* Entrypoint + Cmd as a task's command, unless the request has one. */
static int default_command(json_t *spec, const struct image_config *cfg, struct api_error *e)
{
	if (json_object_get(spec, "command"))
		return 0;
	size_t n = cfg->nentrypoint + cfg->ncmd, total = 0;
	if (n == 0)
		return api_error_set(e, API_ERR_MISSING_FIELD, "command",
				     "command is required: the image has no Entrypoint or Cmd");
	if (n > SPEC_ARGV_MAX)
		return INVALID(e, "image", "the image's Entrypoint and Cmd have more than %d words",
			       SPEC_ARGV_MAX);
	json_t *cmd = json_array();
	if (!cmd || json_object_set_new(spec, "command", cmd) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *w =
		    i < cfg->nentrypoint ? cfg->entrypoint[i] : cfg->cmd[i - cfg->nentrypoint];
		size_t len = strlen(w);
		total += len + 1;
		if (len == 0 || len > TASK_REQUEST_ARG_MAX || total > TASK_REQUEST_ARGV_BYTES_MAX)
			return INVALID(e, "image",
				       "the image's Entrypoint and Cmd are not a command a request "
				       "may give (an empty word, or past %d bytes)",
				       TASK_REQUEST_ARGV_BYTES_MAX);
		if (json_array_append_new(cmd, json_string(w)) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Look the image up: by its digest (the object form) or by what the request names. */
static int lookup(struct image_store *store, const struct image_registries *regs, bool pull,
		  json_t *image, struct image_info *info, struct image_manifest *m,
		  struct image_config *cfg, struct api_error *e)
{
	const char *ref = json_is_string(image)
			      ? json_string_value(image)
			      : json_string_value(json_object_get(image, "digest"));
	struct error err = {0};
	int r = image_inspect(store, ref, info, m, cfg, &err);
	if (r == -ENOENT && pull && json_is_string(image)) {
		struct image_info pulled;
		if ((r = image_pull(store, regs, ref, NULL, &pulled, &err)) < 0)
			return api_image_pull_error(e, r, &err, API_ERR_INVALID_FIELD, "image");
		r = image_inspect(store, pulled.digest, info, m, cfg, &err);
	}
	if (r == -ENOENT)
		return INVALID(e, "image",
			       "no image %s in the store: pull or import it first (agentbox image "
			       "pull, agentbox image import)",
			       ref);
	if (r == -EINVAL)
		return INVALID(e, "image", "image %s: %s", ref, err.msg);
	if (r < 0)
		return r == -ENOMEM ? r : api_error_internal(e, -r, err.msg);
	const char *config = json_string_value(json_object_get(image, "config"));
	if (config && strcmp(config, info->config_digest) != 0) {
		image_manifest_release(m);
		image_config_release(cfg);
		return INVALID(e, "image.config", "image %s has config %s, not %s", ref,
			       info->config_digest, config);
	}
	return 0;
}

int image_choice_apply(struct image_store *store, const struct image_registries *regs,
		       char **spec_json, bool task, struct image_choice *ret, struct api_error *e)
{
	const char *raw;
	size_t rawlen;
	*ret = (struct image_choice){0};
	if (json_member_raw(*spec_json, "image", &raw, &rawlen) != 0)
		return 0; /* the host's /usr, as before */
	if (!store)
		return api_error_internal(e, EIO, "the daemon has no image store");
	json_t *spec = json_loads(*spec_json, 0, NULL);
	if (!spec)
		return -ENOMEM;
	struct image_info info;
	struct image_manifest m;
	struct image_config cfg;
	int r = lookup(store, regs, json_is_true(json_object_get(spec, "pull")),
		       json_object_get(spec, "image"), &info, &m, &cfg, e);
	if (r < 0) {
		json_decref(spec);
		return r;
	}
	/* as an image's pool makes its sandboxes: its defaults alone */
	bool poolable = !json_object_get(spec, "user") && !json_object_get(spec, "cwd");
	json_t *chosen =
	    json_pack("{s:s, s:s, s:s}", "name", info.name[0] ? info.name : info.digest, "digest",
		      info.digest, "config", info.config_digest);
	r = chosen && json_object_set_new(spec, "image", chosen) == 0 ? 0 : -ENOMEM;
	if (r == 0)
		r = merge_env(spec, &cfg, e);
	if (r == 0)
		r = default_cwd(spec, &cfg, e);
	if (r == 0)
		r = default_user(spec, store, &info, &cfg, e);
	if (r == 0 && task)
		r = default_command(spec, &cfg, e);
	(void)json_object_del(spec, "pull");
	image_manifest_release(&m);
	image_config_release(&cfg);
	if (r == 0) {
		struct buf b = {0};
		json_put(&b, spec);
		char *text;
		size_t len;
		if ((r = buf_steal(&b, &text, &len)) == 0) {
			free(*spec_json);
			*spec_json = text;
		}
	}
	json_decref(spec);
	if (r == 0) {
		ret->image = true;
		ret->poolable = poolable;
		snprintf(ret->config, sizeof(ret->config), "%s", info.config_digest);
	}
	return r;
}

int api_image_apply(struct api_call *c, char **spec_json, bool task, struct image_choice *ret)
{
	struct image_choice ignored;
	return image_choice_apply(c->ctx->images, c->ctx->registries, spec_json, task,
				  ret ? ret : &ignored, c->err);
}
