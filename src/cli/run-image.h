/*
 * run-image.h - agentbox run --image REF: an image of agentboxd's store as
 * the root of a run, which needs no daemon otherwise.
 *
 * The store is agentboxd's, so agentboxd says what REF is (GET
 * /v1/images/{ref}, on its socket as every verb finds it); the tree is
 * then read where agentboxd keeps it, under --state-dir (the daemon's,
 * default DAEMON_STATE_DIR_DEFAULT), and held in use for the run
 * (image/store.h's image_use_begin()), so that it cannot be removed
 * meanwhile. The image's config gives the defaults, as for a task
 * (docs/images.md): its Env beneath --env, its WorkingDir as where the
 * command starts, its User (but root, which stays --user root's) unless
 * --user is given, and its Entrypoint + Cmd when the run gives no command.
 */
#ifndef AGENTBOX_CLI_RUN_IMAGE_H
#define AGENTBOX_CLI_RUN_IMAGE_H

#include "base/error.h"
#include "runtime/spec.h"

#include <jansson.h>
#include <stdbool.h>

#define RUN_STATE_DIR_DEFAULT "/var/lib/agentbox" /* agentboxd's own default */

struct run_image {
	const char *ref;       /* --image, or NULL: none */
	const char *state_dir; /* --state-dir */
	int use_fd;	       /* the tree, in use; -1 */
	char tree[32];	       /* "/proc/self/fd/N": spec.image_tree */
	char cwd[4096];	       /* its WorkingDir, without a trailing '/': spec.cwd */
	json_t *image;	       /* agentboxd's answer: the strings the spec gets point into it */
	const char **env;      /* the image's Env, then the spec's own */
	const char **argv;     /* Entrypoint + Cmd, for a run without a command */
	bool user_given;       /* --user: the image's User is not the default */
};

void run_image_init(struct run_image *im);

/*
 * Resolve im->ref and apply it to s (parsed options and command): s gets
 * image_tree, cwd (when the image has a WorkingDir), its env with the
 * image's beneath, and argv when it has none. s must not have a rootfs
 * or an image_tree already. 0 or -errno with err ("no image X in
 * agentboxd's store (not_found)", "cannot reach agentboxd ...", "image
 * X's tree is not under DIR: agentboxd --state-dir elsewhere? give
 * --state-dir").
 */
int run_image_apply(struct run_image *im, struct spec *s, struct error *err);

/* End the use; free what im holds. */
void run_image_release(struct run_image *im);

#endif
