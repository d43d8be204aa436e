/*
 * store-internal.h - what the image store's files share (store.c: the
 * store, its refs, removal; import.c: imports).
 */
#ifndef AGENTBOX_IMAGE_STORE_INTERNAL_H
#define AGENTBOX_IMAGE_STORE_INTERNAL_H

#include "image/store.h"

#include <limits.h>

/* The annotations of index.json's entries that are agentbox's own. */
#define IMAGE_ANN_CONFIG   "io.agentbox.image.config"
#define IMAGE_ANN_SIZE	   "io.agentbox.image.size"
#define IMAGE_ANN_UNPACKED "io.agentbox.image.unpacked"
#define IMAGE_ANN_CREATED  "io.agentbox.image.created"
#define IMAGE_ANN_IMPORTED "io.agentbox.image.imported"

struct image_store {
	char state_dir[PATH_MAX];
	char dir[PATH_MAX]; /* <state>/images */
	int dirfd;	    /* of dir */
};

/* Take the store's lock (store.h), blocking: *ret_fd holds it until closed. */
int store_lock(struct image_store *s, int *ret_fd, struct error *err);

/* index.json's entries, malloc'd (IMAGE_REFS_MAX at most). */
int store_index_read(struct image_store *s, struct image_info **ret, size_t *ret_n,
		     struct error *err);
/* Replace index.json with these n entries (atomically, durably). Under the lock. */
int store_index_write(struct image_store *s, const struct image_info *v, size_t n,
		      struct error *err);

/* Blob digest's bytes (at most max), malloc'd and NUL-terminated. */
int store_blob_read(struct image_store *s, const char *digest, size_t max, char **ret,
		    size_t *ret_len, struct error *err);

/* Open dir/name (a directory under the store, or "blobs/sha256"), O_DIRECTORY. */
int store_open_dir(struct image_store *s, const char *name, int *ret_fd, struct error *err);

/*
 * Remove name under parentfd and everything in it, without following a
 * symlink, however deep (deep directories are moved up to parentfd to be
 * removed from there). Best effort; 0 or the first -errno.
 */
int store_remove_all(int parentfd, const char *name);

/*
 * Remove tree hex (trees/<hex>) unless it is in use: -EBUSY then. Under
 * the lock. A tree that is not there is 0.
 */
int store_tree_remove(struct image_store *s, const char *hex, struct error *err);

/* "2024-05-01T12:00:00.123Z" of ms into out (32 bytes). */
void store_format_time(int64_t ms, char out[32]);

#endif
