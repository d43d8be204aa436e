/*
 * unpack.h - one OCI layer (a tar, plain, gzip or zstd) applied to an
 * image's tree, treated as the untrusted input it is.
 *
 * The tree is a directory the caller opened (tree_fd); every path of the
 * layer is resolved beneath it without following a symlink
 * (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS),
 * so nothing is ever written outside it, whatever the layer says:
 *   - absolute paths and ".." components are refused (-EPERM, the entry
 *     named in err);
 *   - a symlink is created as a symlink, never followed while unpacking;
 *     an entry whose parent is a symlink is refused;
 *   - a hard link must point at a regular file already in the tree (a
 *     target outside it, through a symlink, or absent, is refused);
 *   - device nodes and FIFOs are dropped (counted in stats);
 *   - setuid and setgid bits are cleared (counted);
 *   - whiteouts (".wh.NAME") remove NAME from the tree, and an opaque
 *     directory (".wh..wh..opq") empties its directory of what lower
 *     layers put there; a whiteout of ".", ".." or of nothing is refused;
 *   - ownership is mapped: uid and gid u of the layer become
 *     IMAGE_ID_BASE + u on the host (u at most IMAGE_ID_MAX, else
 *     refused), so no file of an image is ever the host's root's; a
 *     sandbox sees them as 0..65535 through an idmapped mount;
 *   - sizes are bounded (struct unpack_limits): the bytes written and the
 *     entries, across the layers of one image (the caller keeps the
 *     running totals in stats), and one path's length; a decompression
 *     bomb stops at the cap with -EFBIG.
 * Runs as root in the daemon (it chowns). Not thread-safe per tree.
 * 0, or -errno with err saying which entry and why; on failure the tree
 * is left half-made and the caller removes it (image trees are built in a
 * temporary directory and renamed into place only when whole).
 */
#ifndef AGENTBOX_IMAGE_UNPACK_H
#define AGENTBOX_IMAGE_UNPACK_H

#include "base/error.h"

#include <stdint.h>

/* Host ids of an image's files: IMAGE_ID_BASE + the layer's id (just below
 * the sandboxes' ranges, runtime/uidrange.h). */
#define IMAGE_ID_BASE 199934464u
#define IMAGE_ID_MAX  65535u

/* Named limits of one image's layers, together. */
#define IMAGE_BYTES_MAX_DEFAULT	  (8ULL << 30) /* bytes of file data written */
#define IMAGE_ENTRIES_MAX_DEFAULT 1000000ULL   /* entries of every layer */
#define IMAGE_PATH_MAX		  4096	       /* bytes of one entry's path */

struct unpack_limits {
	uint64_t bytes_max;   /* of file data, all layers so far included */
	uint64_t entries_max; /* likewise */
};

/* Running totals of one image's layers (zero them before its first layer). */
struct unpack_stats {
	uint64_t bytes, entries;
	uint64_t dropped_devices; /* device nodes and FIFOs not made */
	uint64_t cleared_setid;	  /* setuid/setgid bits cleared */
	uint64_t whiteouts;	  /* entries a whiteout removed, opaque dirs included */
};

/*
 * Apply the layer read from layer_fd (a tar, compressed with gzip or zstd
 * or not; libarchive tells which) to the tree tree_fd. See above.
 */
int unpack_layer(int layer_fd, int tree_fd, const struct unpack_limits *lim,
		 struct unpack_stats *stats, struct error *err);

#endif
