/*
 * unpack.h - one OCI layer (a tar, plain, gzip or zstd) applied to an
 * image's tree, treated as the untrusted input it is.
 *
 * The tree is a directory the caller opened (tree_fd, O_RDONLY |
 * O_DIRECTORY); every path of the layer is resolved beneath it without
 * following a symlink (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS, then *at() calls on the parent's fd), so nothing
 * is ever written outside it, whatever the layer says:
 *   - absolute paths and ".." components are refused (-EPERM, the entry
 *     named in err); "." and empty components are dropped ("./a//b" is
 *     "a/b"; "./" is the tree itself, whose attributes a directory entry
 *     sets);
 *   - a symlink is created as a symlink (its target as written, never
 *     followed while unpacking); an entry with a symlink among its
 *     parents is refused (-EPERM);
 *   - a hard link must point at a regular file already in the tree (a
 *     target outside it or through a symlink is refused with -EPERM, an
 *     absent one with -ENOENT, anything but a regular file with -EPERM);
 *   - device nodes, FIFOs and sockets are dropped (counted in stats);
 *   - setuid and setgid bits are cleared (counted), of files and
 *     directories alike; the sticky bit is kept; no extended attribute
 *     (file capabilities among them) or ACL of the layer is ever set;
 *   - whiteouts (".wh.NAME") remove NAME from the tree, and an opaque
 *     directory (".wh..wh..opq") empties its directory of what lower
 *     layers put there: as the OCI image spec says, a whiteout applies to
 *     the lower layers only, wherever it stands in its layer, so the
 *     layer is read twice: its whiteouts first, then its entries. A
 *     whiteout of ".", ".." or of an empty name is refused (-EPERM); one
 *     of a name the tree lacks removes nothing; other ".wh..wh." names
 *     (aufs' metadata) are ignored; a ".wh." name is never created, and
 *     one among an entry's parents is refused (-EPERM);
 *   - an entry over an existing one replaces it (a directory over a
 *     directory keeps its contents and takes the entry's attributes;
 *     anything else is removed first, a directory with all it holds);
 *   - ownership is mapped: uid and gid u of the layer become
 *     IMAGE_ID_BASE + u on the host (u at most IMAGE_ID_MAX, else -ERANGE),
 *     so no file of an image is ever the host's root's; a sandbox sees
 *     them as 0..65535 through an idmapped mount. A directory the layer
 *     implies but does not list is made 0755, owned by IMAGE_ID_BASE;
 *   - modes (but the setid bits) and modification times are the layer's
 *     (a directory's time is that of its last change while unpacking);
 *   - sizes are bounded (struct unpack_limits): the bytes of file data
 *     and the entries, across the layers of one image (the caller keeps
 *     the running totals in stats), checked against each header before
 *     its data is read, so a decompression bomb stops at its first header
 *     past the cap with -EFBIG (too many entries: -EFBIG too); one path's
 *     or link target's length (IMAGE_PATH_MAX) and its depth
 *     (IMAGE_DEPTH_MAX): -ENAMETOOLONG.
 * Only libarchive's built-in gzip and zstd readers are used, never an
 * external program; only tar formats (ustar, pax, GNU) are read.
 * Runs as root in the daemon (it chowns, and links by fd). Not
 * thread-safe per tree.
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
#define IMAGE_PATH_MAX		  4096	       /* bytes of one entry's path or link target */
#define IMAGE_DEPTH_MAX		  256	       /* components of one entry's path */

struct unpack_limits {
	uint64_t bytes_max;   /* of file data, all layers so far included */
	uint64_t entries_max; /* likewise; every header counts, whiteouts too */
};

/* Running totals of one image's layers (zero them before its first layer). */
struct unpack_stats {
	uint64_t bytes, entries;
	uint64_t dropped_devices; /* device nodes, FIFOs and sockets not made */
	uint64_t cleared_setid;	  /* entries whose setuid/setgid bits were cleared */
	uint64_t whiteouts;	  /* entries a whiteout removed, opaque dirs' children included */
};

/*
 * Apply the layer read from layer_fd (a tar, compressed with gzip or zstd
 * or not; libarchive tells which) to the tree tree_fd. See above.
 * layer_fd is read from its current offset, twice (whiteouts first), so
 * it must be seekable: a regular file or a memfd (else -ESPIPE).
 * Borrows both fds.
 */
int unpack_layer(int layer_fd, int tree_fd, const struct unpack_limits *lim,
		 struct unpack_stats *stats, struct error *err);

#endif
