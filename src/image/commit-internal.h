/*
 * commit-internal.h - a commit's layer (commit-layer.c), for commit.c:
 * an overlayfs upper directory written as an OCI layer (commit.h says
 * what becomes what).
 */
#ifndef AGENTBOX_IMAGE_COMMIT_INTERNAL_H
#define AGENTBOX_IMAGE_COMMIT_INTERNAL_H

#include "image/commit.h"

/* A layer written: its digests (64 hex digits each) and its size. */
struct commit_layer {
	char hex[IMAGE_DIGEST_HEX + 1];	     /* of the gzip'd bytes: the blob */
	char diff_hex[IMAGE_DIGEST_HEX + 1]; /* of the tar: the config's diff_id */
	uint64_t size;			     /* bytes of the blob */
};

/*
 * Write upper_fd's tree to out_fd as a gzip'd tar (commit.h). lim's
 * limits are set (not 0). Borrows both fds. On failure out_fd holds a
 * partial layer: the caller removes it.
 */
int commit_layer_write(int upper_fd, uid_t id_base, const struct image_commit_opts *lim, int out_fd,
		       struct commit_layer *ret, struct image_commit_stats *stats,
		       struct error *err);

#endif
