/*
 * run-image.c - agentbox run --image: see run-image.h.
 */
#include "cli/run-image.h"

#include "client/client.h"
#include "image/store.h"
#include "image/user.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void run_image_init(struct run_image *im)
{
	*im = (struct run_image){.state_dir = RUN_STATE_DIR_DEFAULT, .use_fd = -1};
}

void run_image_release(struct run_image *im)
{
	image_use_end(im->use_fd);
	json_decref(im->image);
	free(im->env);
	free(im->argv);
	run_image_init(im);
}

/* GET /v1/images/{ref} from agentboxd. */
static int ask(struct run_image *im, struct error *err)
{
	char target[CLIENT_TARGET_MAX];
	size_t len = strlen(im->ref);
	if (len == 0 || len >= IMAGE_REF_MAX || strpbrk(im->ref, "?#% "))
		return error_set(err, EINVAL, "--image: '%s' is not an image's name or digest",
				 im->ref);
	snprintf(target, sizeof(target), "/v1/images/%s", im->ref);
	struct client c;
	int r = client_init(&c, NULL, err);
	if (r == 0)
		r = client_call(&c, "GET", target, NULL, &im->image, err);
	client_release(&c);
	if (r < 0)
		return error_set(err, -r, "--image %s: %s", im->ref, err->msg);
	return 0;
}

/* The strings of array (NULL: none) appended to v at *n; -EINVAL when one is not a string. */
static int add_strings(const json_t *array, const char **v, size_t *n)
{
	size_t i;
	json_t *s;
	json_array_foreach(array, i, s)
	{
		if (!json_is_string(s))
			return -EINVAL;
		v[(*n)++] = json_string_value(s);
	}
	return 0;
}

int run_image_apply(struct run_image *im, struct spec *s, struct error *err)
{
	if (!im->ref)
		return 0;
	if (s->rootfs || s->image_tree)
		return error_set(err, EINVAL, "--image excludes --rootfs and --image-tree");
	int r = ask(im, err);
	if (r < 0)
		return r;
	const char *config = json_string_value(json_object_get(im->image, "config_digest"));
	json_t *cfg = json_object_get(im->image, "config");
	json_t *env = json_object_get(cfg, "env"), *entry = json_object_get(cfg, "entrypoint");
	json_t *cmd = json_object_get(cfg, "cmd");
	const char *workdir = json_string_value(json_object_get(cfg, "working_dir"));
	if (!config)
		return error_set(err, EPROTO, "--image %s: agentboxd's answer has no config_digest",
				 im->ref);
	if ((r = image_use_begin(im->state_dir, config, &im->use_fd, err)) < 0)
		return error_set(
		    err, -r,
		    "--image %s: its tree is not under %s/images (%s): agentboxd keeps "
		    "its state elsewhere? give --state-dir",
		    im->ref, im->state_dir, err->msg);
	snprintf(im->tree, sizeof(im->tree), "/proc/self/fd/%d", im->use_fd);
	s->image_tree = im->tree;
	size_t wlen = workdir ? strlen(workdir) : 0;
	while (wlen > 1 && workdir[wlen - 1] == '/') /* "/app/" is "/app" */
		wlen--;
	if (wlen > 0 && wlen < sizeof(im->cwd)) {
		memcpy(im->cwd, workdir, wlen);
		im->cwd[wlen] = '\0';
		s->cwd = im->cwd;
	}

	/* its User, as agentboxd makes it a sandbox's default (image-choice.c): root stays opt-in
	 */
	const char *user = json_string_value(json_object_get(cfg, "user"));
	if (user && *user && !im->user_given) {
		uid_t uid;
		gid_t gid;
		if ((r = image_user_resolve(im->use_fd, user, &uid, &gid, err)) < 0)
			return error_set(err, -r, "--image %s: its %s", im->ref, err->msg);
		if (uid >= SPEC_IDS || gid >= SPEC_IDS)
			return error_set(err, EINVAL,
					 "--image %s: its User '%s' is past a sandbox's ids",
					 im->ref, user);
		if (uid != 0) {
			s->user = SPEC_USER_IDS;
			s->uid = uid;
			s->gid = gid;
		}
	}

	/* the image's Env first: the run's own --env, later, wins (spec_build_env()) */
	size_t n = 0, own = s->nenv;
	im->env = calloc(json_array_size(env) + own + 1, sizeof(*im->env));
	if (!im->env)
		return error_set(err, ENOMEM, "out of memory");
	if (add_strings(env, im->env, &n) < 0)
		return error_set(err, EPROTO, "--image %s: its Env is not strings", im->ref);
	for (size_t i = 0; i < own; i++)
		im->env[n++] = s->env[i];
	s->nenv = 0;
	for (size_t i = 0; i < n; i++)
		if ((r = spec_add_env(s, im->env[i])) < 0)
			return error_set(
			    err, -r, "--image %s: its Env and --env: too many variables", im->ref);

	if (s->argc > 0)
		return 0;
	n = 0;
	im->argv = calloc(json_array_size(entry) + json_array_size(cmd) + 1, sizeof(*im->argv));
	if (!im->argv)
		return error_set(err, ENOMEM, "out of memory");
	if (add_strings(entry, im->argv, &n) < 0 || add_strings(cmd, im->argv, &n) < 0)
		return error_set(err, EPROTO, "--image %s: its Entrypoint or Cmd is not strings",
				 im->ref);
	if (n == 0)
		return error_set(err, EINVAL,
				 "no command given, and image %s has no Entrypoint or Cmd",
				 im->ref);
	s->argv = im->argv;
	s->argc = n;
	return 0;
}
