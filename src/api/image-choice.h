/*
 * image-choice.h - the image a task or a sandbox is made of: the
 * "image", "user", "cwd" and "pull" fields of POST /v1/tasks and POST
 * /v1/sandboxes.
 *
 * Two steps. The request parsers (task-request.c, sandbox-request.c)
 * check the fields' form with image_fields_parse(), pure code, and copy
 * them into the canonical spec. The create handlers then resolve the
 * image against the store with api_image_apply(): its name becomes what
 * the runtime holds on to, {"name", "digest", "config"} (a name may move
 * to another image later; the digests do not), and the image's config
 * gives the defaults:
 *   - Env: each entry whose name the request's env does not set (and not
 *     reserved, AGENTBOX_*) is added to "env";
 *   - WorkingDir: "cwd", when the request has none;
 *   - Entrypoint + Cmd: a task's "command", when the request has none. A
 *     command given is run as it is, as an exec is (no Entrypoint
 *     before it).
 * An image's User is not taken: commands run as the sandbox user unless
 * the request asks for "user": "root" (root of the sandbox's own user
 * namespace, runtime/spec.h), which needs an image.
 *
 * The result is canonical spec JSON again, which parses back byte for
 * byte (the object form of "image" is taken by the parsers too).
 */
#ifndef AGENTBOX_API_IMAGE_CHOICE_H
#define AGENTBOX_API_IMAGE_CHOICE_H

#include "api/errors.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct api_call;
struct image_store;
struct image_registries;

/*
 * Check root's "image" (a ref string of 1 to IMAGE_REF_MAX - 1 bytes, or
 * the object {"name", "digest", "config"} a canonical spec has), "user"
 * ("root" or "sandbox"; root only with an image), "cwd" (an absolute
 * path) and "pull" (a boolean), and copy what applies into out ("user"
 * only when root, "pull" only when true). *ret_image: root has an image.
 * 0, -EINVAL with e naming the field, or -ENOMEM.
 */
int image_fields_parse(json_t *root, json_t *out, bool *ret_image, struct api_error *e);

/* What api_image_apply() found. */
struct image_choice {
	bool image;	 /* the spec names an image */
	bool poolable;	 /* ... as an image's pool makes them: the sandbox user, its WorkingDir */
	char config[80]; /* its config's digest ("sha256:<hex>"), when image */
};

/*
 * Resolve *spec_json's image (when it has one) against store, and apply
 * its config's defaults (above); task: a task's spec (the command may
 * come from the image), else a sandbox's. *spec_json is replaced (the
 * caller owns the new one); *ret says what was found. An image not in
 * the store is invalid_field "image", naming it, unless the spec has
 * "pull": true: then it is pulled first (image/pull.h, with regs), in
 * the caller's thread. 0, -EINVAL with e
 * (-EIO: an internal error in e), or -ENOMEM.
 */
int image_choice_apply(struct image_store *store, const struct image_registries *regs,
		       char **spec_json, bool task, struct image_choice *ret, struct api_error *e);

/* image_choice_apply() with the call's store and error; ret may be NULL. */
int api_image_apply(struct api_call *c, char **spec_json, bool task, struct image_choice *ret);

#endif
