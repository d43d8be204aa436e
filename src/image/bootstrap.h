/*
 * bootstrap.h - a Debian base image made from nothing: debootstrap
 * (--variant=minbase) from a Debian mirror into a temporary directory of
 * the store, the tree packed as one layer (a tar, gzip), an OCI image
 * layout made of it, and that imported like any other (image_import()).
 *
 * debootstrap runs as a child of the caller (root: it chroots and runs
 * dpkg in the tree) with a clean environment (a fixed PATH, LC_ALL=C,
 * DEBIAN_FRONTEND=noninteractive), stdin on /dev/null, its output into a
 * pipe whose last IMAGE_BOOTSTRAP_LOG_MAX bytes are kept for the error,
 * in a session and a mount namespace of its own: what it mounts in the
 * tree (proc, sys) is gone with it, whatever way it ends, and never
 * seen by the caller's namespace. It is killed (PR_SET_PDEATHSIG) if the
 * caller's thread dies. It is made with exit signal 0, so a
 * caller's waitpid(-1) (the scheduler's, the fleet's reapers) never
 * reaps it; past its timeout its whole session is killed.
 *
 * The tree is built under <state>/images/tmp/bootstrap-*, mode 0700: it
 * holds root-owned set-id programs until it is packed, where no one else
 * can reach them. That directory is removed on every path, success
 * included; a crash leaves it to image_store_open()'s cleanup.
 *
 * The image's config: os linux, architecture amd64, Env PATH (Debian's
 * default), Cmd ["/bin/bash"], a history entry naming the suite and the
 * mirror. Its name: "debian:SUITE" unless another is given.
 */
#ifndef AGENTBOX_IMAGE_BOOTSTRAP_H
#define AGENTBOX_IMAGE_BOOTSTRAP_H

#include "base/error.h"
#include "image/store.h"

#include <stdbool.h>

#define IMAGE_BOOTSTRAP_SUITE_MAX  16	     /* bytes of a suite's name: "bookworm" */
#define IMAGE_BOOTSTRAP_MIRROR_MAX 255	     /* bytes of a mirror's URL */
#define IMAGE_BOOTSTRAP_TIMEOUT_S  (30 * 60) /* a debootstrap run, before it is killed */
#define IMAGE_BOOTSTRAP_LOG_MAX	   4096	     /* bytes of its output kept (the last ones) */
#define IMAGE_BOOTSTRAP_PREFIX	   "debian:" /* the one family of images it makes */

#define IMAGE_BOOTSTRAP_MIRROR_DEFAULT	"http://deb.debian.org/debian"
#define IMAGE_BOOTSTRAP_KEYRING_DEFAULT "/usr/share/keyrings/debian-archive-keyring.gpg"
#define IMAGE_DEBOOTSTRAP		"/usr/sbin/debootstrap"
/* Where debootstrap keeps a script per suite it knows. */
#define IMAGE_DEBOOTSTRAP_SCRIPTS "/usr/share/debootstrap/scripts"

/* What to bootstrap. */
struct image_bootstrap {
	const char *image;   /* "debian:SUITE" */
	const char *name;    /* the image's name; NULL: image */
	const char *mirror;  /* NULL: IMAGE_BOOTSTRAP_MIRROR_DEFAULT */
	const char *keyring; /* the Release file's signers; NULL: IMAGE_BOOTSTRAP_KEYRING_DEFAULT */
	unsigned timeout_s;  /* 0: IMAGE_BOOTSTRAP_TIMEOUT_S */
};

/*
 * The suite of image, "debian:SUITE", into suite: 2 to
 * IMAGE_BOOTSTRAP_SUITE_MAX lowercase letters (bookworm, trixie, sid,
 * stable, testing...). -EINVAL with err saying why. Whether debootstrap
 * knows it is image_bootstrap()'s to check.
 */
int image_bootstrap_suite(const char *image, char suite[IMAGE_BOOTSTRAP_SUITE_MAX + 1],
			  struct error *err);

/* Has debootstrap a script for suite (IMAGE_DEBOOTSTRAP_SCRIPTS/<suite>)? */
bool image_bootstrap_suite_is_known(const char *suite);

/*
 * Is mirror a mirror's URL that may be handed to debootstrap: http:// or
 * https://, a host, at most IMAGE_BOOTSTRAP_MIRROR_MAX bytes of letters,
 * digits and - . _ ~ : / @ % + [ ] (no quote, space, query or fragment).
 * -EINVAL with err saying why.
 */
int image_bootstrap_check_mirror(const char *mirror, struct error *err);

/*
 * Bootstrap b into the store (see top), *ret (may be NULL) the image as
 * image_import() gives it. -EINVAL: a bad image, suite (one debootstrap
 * has no script for) or mirror; -ENOKEY: the keyring is not there (a
 * mirror's Release is never taken unsigned); -EREMOTEIO: debootstrap
 * failed, err ending in the last lines of its output; -ETIMEDOUT: it ran
 * past its timeout and was killed; else what packing or image_import()
 * returns. Blocks for as long as debootstrap runs (minutes).
 */
int image_bootstrap(struct image_store *s, const struct image_bootstrap *b, struct image_info *ret,
		    struct error *err);

#endif
