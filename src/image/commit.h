/*
 * commit.h - a new image made of an overlayfs upper directory on top of
 * the image it was the upper of (image_commit()), and an image written
 * out as an OCI image layout tar (image_export()).
 *
 * Commit. The upper directory is read, never changed, and turned into
 * one OCI layer (a tar, gzip), in name order, without following a
 * symlink (every step is openat(O_NOFOLLOW) / fstatat(AT_SYMLINK_
 * NOFOLLOW) beneath the fd given):
 *   - regular files (their bytes, read from an fd opened O_NOFOLLOW |
 *     O_NONBLOCK and checked to be a regular file), directories, symlinks
 *     (their target as written) and FIFOs become entries with their mode
 *     (setuid, setgid and sticky bits as they are: the unpacker's rules
 *     apply when the image is imported, unpack.h) and modification time
 *     (nanoseconds kept, pax); a regular file met again (the same inode:
 *     st_nlink > 1) is a hard link entry to the path it was first met at;
 *   - overlayfs's whiteout, a character device 0/0 (or an empty regular
 *     file with the xattr trusted.overlay.whiteout or user.overlay.
 *     whiteout), becomes an OCI whiteout ".wh.NAME";
 *   - an opaque directory (xattr trusted.overlay.opaque or user.overlay.
 *     opaque = "y") becomes its entry and "DIR/.wh..wh..opq";
 *   - other device nodes and sockets are dropped (counted in stats);
 *     extended attributes and ACLs are not carried (the unpacker sets
 *     none either);
 *   - a directory with overlayfs's redirect (overlay.redirect) or a
 *     metacopy-only file (overlay.metacopy) is refused (-EOPNOTSUPP):
 *     its content lives in the lower layer and would be lost (the
 *     runtime's overlay, userxattr, has neither);
 *   - the upper directory itself is not an entry (the image's / keeps
 *     the base's attributes).
 * Owners: the upper's files are made by the sandbox's processes, in its
 * user namespace, so their host ids are id_base + the id inside; the
 * layer gets the id inside (host id - id_base). An owner outside
 * [id_base, id_base + COMMIT_ID_RANGE) is refused (-ERANGE, err naming
 * the path): such a file was not made inside that sandbox, and the fd or
 * the base given must be wrong; nothing is guessed.
 *
 * Limits (struct image_commit_opts; 0 = the default): the bytes of file
 * data (checked against each file's size before its data is read, so a
 * sparse or growing file stops at its header) and the entries (every
 * header, whiteouts included) of the layer: -EFBIG. A path longer than
 * IMAGE_PATH_MAX or deeper than IMAGE_DEPTH_MAX: -ENAMETOOLONG. A file
 * that shrinks while it is read: -EIO (pause the sandbox first: the
 * upper is read as it is, not as a snapshot).
 *
 * The new image: the base's config with the layer's uncompressed digest
 * appended to rootfs.diff_ids, a history entry ("created_by": "agentbox
 * commit", its time, comment), "created" (and "author", when given) set;
 * a manifest of the base's layers and the new one. They are assembled as
 * an OCI layout in the store's tmp/ (the base's blobs hard-linked) and
 * imported with image_import(), so a committed image is verified and
 * unpacked by the one path every image takes. The temporary is removed
 * on every path; a refused commit leaves nothing (no blob, tree, ref).
 *
 * Where the upper is (for the caller): the runtime's image root
 * (runtime/rootfs-image.c) puts the overlay's upper at "root-upper" in
 * the sandbox's data tmpfs (its --disk), and detaches that tmpfs once
 * the overlay is mounted: no path reaches the upper afterwards, not even
 * /proc/<pid>/root. The caller must open it (open(O_RDONLY | O_DIRECTORY),
 * or open_tree(OPEN_TREE_CLONE)) before the detach and keep that fd for
 * the sandbox's life. /tmp, /dev/shm and the workdir are trees of their
 * own in the same tmpfs, not the upper: a commit does not carry them.
 *
 * Export. The image ref names, as an OCI image layout in a tar (pax):
 * oci-layout, index.json (the one manifest, with org.opencontainers.
 * image.ref.name = its "name:tag" when it has one), blobs/sha256/<hex>
 * of its manifest, config and layers, byte for byte as the store keeps
 * them (so the manifest digest is the same wherever it is imported).
 * Every blob is opened before the first byte is written (an image
 * removed meanwhile fails before, not halfway).
 *
 * Both take the store's lock only through image_import() (export: none);
 * both run as root in the daemon. 0 or -errno with err saying why.
 */
#ifndef AGENTBOX_IMAGE_COMMIT_H
#define AGENTBOX_IMAGE_COMMIT_H

#include "image/store.h"

#include <stdint.h>
#include <sys/types.h>

/* Ids of one sandbox's range (runtime/uidrange.h's UIDRANGE_SIZE). */
#define COMMIT_ID_RANGE (IMAGE_ID_MAX + 1u)
/* Named limits of a committed layer (the defaults of struct image_commit_opts). */
#define IMAGE_COMMIT_BYTES_MAX	 IMAGE_BYTES_MAX_DEFAULT   /* bytes of file data */
#define IMAGE_COMMIT_ENTRIES_MAX IMAGE_ENTRIES_MAX_DEFAULT /* entries */
#define IMAGE_COMMIT_TEXT_MAX	 1024			   /* bytes of a comment or an author */
/* Bytes of an export: its blobs (IMAGE_BLOBS_MAX at import) and the tar's own. */
#define IMAGE_EXPORT_MAX (IMAGE_BLOBS_MAX + (1ULL << 20))

struct image_commit_opts {
	const char *comment;  /* the history entry's; NULL = none */
	const char *author;   /* the config's and history's "author"; NULL = none */
	uint64_t bytes_max;   /* 0 = IMAGE_COMMIT_BYTES_MAX */
	uint64_t entries_max; /* 0 = IMAGE_COMMIT_ENTRIES_MAX */
};

/* What a commit's layer holds. */
struct image_commit_stats {
	uint64_t bytes, entries; /* file data; headers */
	uint64_t whiteouts;	 /* ".wh." entries, opaque markers included */
	uint64_t dropped;	 /* device nodes and sockets left out */
};

/*
 * Commit the upper directory upper_fd (borrowed; O_RDONLY | O_DIRECTORY)
 * on top of the image base: its config digest (as a sandbox keeps it,
 * image_info's config_digest) or its manifest digest or name
 * (image_lookup()). The new image is named name ("name:tag", normalized
 * as an import does; NULL: unnamed) and *ret (may be NULL) gets it;
 * stats (may be NULL) what the layer holds. See above.
 */
int image_commit(struct image_store *s, const char *base, int upper_fd, uid_t id_base,
		 const char *name, const struct image_commit_opts *opts, struct image_info *ret,
		 struct image_commit_stats *stats, struct error *err);

/*
 * Write the image ref names (image_lookup()) to out_fd as an OCI image
 * layout tar (see above), at most IMAGE_EXPORT_MAX bytes (-EFBIG). *ret
 * (may be NULL) gets the image. A failure may leave a partial tar in
 * out_fd: the caller drops it.
 */
int image_export(struct image_store *s, const char *ref, int out_fd, struct image_info *ret,
		 struct error *err);

#endif
