/*
 * unpack-internal.h - the tree side of unpack.c: a layer's paths made
 * canonical, and directories opened, made and emptied beneath the tree
 * without following a symlink. Every function takes fds it borrows.
 */
#ifndef AGENTBOX_IMAGE_UNPACK_INTERNAL_H
#define AGENTBOX_IMAGE_UNPACK_INTERNAL_H

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WHITEOUT_PREFIX	    ".wh."
#define WHITEOUT_PREFIX_LEN 4
#define WHITEOUT_OPAQUE	    ".wh..wh..opq"

/*
 * raw (a path or hard link target of the layer) made canonical into out
 * (IMAGE_PATH_MAX + 1 bytes): "." and empty components dropped, "" for the
 * tree itself. -EPERM for an absolute path or a ".." component,
 * -ENAMETOOLONG past IMAGE_PATH_MAX bytes or IMAGE_DEPTH_MAX components.
 * what names raw in err ("entry", "hard link target").
 */
int unpack_path_normalize(const char *raw, const char *what, char *out, struct error *err);

/* Whether a component of path but its last starts with ".wh.". */
bool unpack_path_has_whiteout_parent(const char *path);

/*
 * openat2(dirfd, path, flags | O_CLOEXEC) with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: an fd, or -errno (-ELOOP
 * for a symlink on the way, -EXDEV for a way out).
 */
int unpack_open_beneath(int dirfd, const char *path, int flags);

/*
 * The directory dir (canonical, "" for the tree) opened O_RDONLY, into
 * *ret_fd. Where a component is missing, create makes it (0755, owned by
 * IMAGE_ID_BASE); without create, -ENOENT. A symlink or a way out is
 * -EPERM, a non-directory -ENOTDIR; err names entry.
 */
int unpack_open_dir(int tree_fd, const char *dir, bool create, const char *entry, int *ret_fd,
		    struct error *err);

/*
 * Remove name from dirfd, a directory with everything beneath it, never
 * following a symlink. 1 when something was removed, 0 when name was
 * absent, or -errno (-ELOOP deeper than IMAGE_DEPTH_MAX).
 */
int unpack_remove(int dirfd, const char *name, unsigned depth);

/* Remove everything in the directory dirfd; how many of its entries, or -errno. */
int unpack_clear_dir(int dirfd, unsigned depth);

#endif
