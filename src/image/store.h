/*
 * store.h - the image store: OCI images kept under the state directory,
 * content-addressed and verified, each unpacked once into a read-only
 * tree that every sandbox of the image shares.
 *
 * Layout (core/layout.h names it), itself a valid OCI image layout, so an
 * export is a copy of oci-layout, index.json and the blobs it names:
 *
 *   <state>/images/oci-layout              {"imageLayoutVersion": "1.0.0"}
 *   <state>/images/index.json              the refs: one entry per image
 *                                          (a manifest's descriptor), its
 *                                          name in org.opencontainers.image.
 *                                          ref.name ("name:tag"; none: an
 *                                          unnamed, "dangling" image), and
 *                                          io.agentbox.image.* annotations:
 *                                          config (its digest), size (bytes
 *                                          of its blobs), unpacked (bytes of
 *                                          its files), imported (ms)
 *   <state>/images/blobs/sha256/<hex>      manifests, configs, layers; each
 *                                          one's SHA-256 checked before it
 *                                          is renamed in
 *   <state>/images/trees/<config hex>/     the image unpacked (image/unpack.h:
 *                                          owners IMAGE_ID_BASE + the layer's
 *                                          ids); built in trees/.tmp-* and
 *                                          renamed in only when whole
 *   <state>/images/tmp/                    imports in progress (an upload, an
 *                                          archive's files); emptied at open
 *   <state>/images/lock                    the store's lock (below)
 *
 * index.json is replaced whole (a temporary, fsync, rename, fsync of the
 * directory): a reader sees the old refs or the new, never half.
 *
 * Locking. Every change (import, rm, prune) holds the store's lock
 * (flock LOCK_EX on images/lock, its own open file description, so it
 * works between threads and processes alike) for its whole run: they
 * happen one at a time, and an import's blobs are never pruned before
 * its ref lands. Reads (list, lookup, inspect) take no lock.
 *
 * In use. A tree in use is locked shared: image_use_begin() opens the
 * tree's directory and takes flock LOCK_SH on it; the use lasts while
 * that open file description does (the fd, and its copies across fork
 * and SCM_RIGHTS), and the kernel ends it when the last holder dies, so
 * a crash never leaves an image "in use" for ever. rm and prune take
 * LOCK_EX | LOCK_NB on the tree before they touch it: held, they refuse
 * (rm: -EBUSY) or leave it (prune). The runtime holds one use per
 * sandbox or task attempt made of the image, in the process that keeps
 * it (agentbox-shim, agentbox-supervisor), from before the sandbox's root
 * is built until it ends; see image_use_begin().
 *
 * Every function returns 0 or -errno with err saying why (a person's
 * line). Thread-safe: a struct image_store holds only its paths and an
 * fd of its directory; each call opens what it needs.
 */
#ifndef AGENTBOX_IMAGE_STORE_H
#define AGENTBOX_IMAGE_STORE_H

#include "base/error.h"
#include "image/oci.h"
#include "image/unpack.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Named limits of the store and of one import. */
#define IMAGE_IMPORT_MAX	  (4ULL << 30)	/* bytes of an archive POSTed to the API */
#define IMAGE_BLOBS_MAX		  (16ULL << 30) /* bytes of one image's blobs, together */
#define IMAGE_ARCHIVE_ENTRIES_MAX 10000		/* entries of an archive imported */
#define IMAGE_ARCHIVE_PATH_MAX	  1024		/* bytes of one archive entry's path */
#define IMAGE_REFS_MAX		  1024		/* images the store keeps */

struct image_store;

/*
 * Open (and make, mode 0700, owned by the caller) <state_dir>/images; a
 * fresh store gets oci-layout and an empty index.json. Leftovers of
 * imports a crash cut short (what tmp/ holds, trees/.tmp-*) are removed, under the
 * store's lock. *ret is the caller's (image_store_free()).
 */
int image_store_open(const char *state_dir, struct image_store **ret, struct error *err);
void image_store_free(struct image_store *s);

/* <state>/images: for temporaries beside the store (image_store_tmp()). */
const char *image_store_dir(const struct image_store *s);

/*
 * A new empty file in images/tmp, for a body on its way to
 * image_import(): its path into path (size bytes) and an fd open for
 * writing into *ret_fd. The caller unlinks it when done.
 */
int image_store_tmp(struct image_store *s, char *path, size_t size, int *ret_fd, struct error *err);

/* One image of the store, as lists show it. */
struct image_info {
	char name[IMAGE_REF_MAX];	       /* "name:tag"; "" = unnamed */
	char digest[IMAGE_DIGEST_SIZE];	       /* its manifest's: the image's id */
	char media_type[IMAGE_MEDIA_TYPE_MAX]; /* its manifest's */
	uint64_t manifest_size;		       /* bytes of its manifest */
	char config_digest[IMAGE_DIGEST_SIZE]; /* names its tree */
	uint64_t size;			       /* bytes of its blobs: manifest, config, layers */
	uint64_t unpacked;		       /* bytes of its tree's files */
	int64_t created_ms;		       /* the config's "created"; 0 = none */
	int64_t imported_ms;		       /* when it was imported */
};

/* Every image, by name (unnamed ones last, by digest), malloc'd into *ret. */
int image_list(struct image_store *s, struct image_info **ret, size_t *ret_n, struct error *err);

/*
 * The image ref names: "name[:tag]" (":latest" when no tag), or a
 * manifest digest "sha256:<hex>". -ENOENT when there is none; -EINVAL
 * for a ref that is neither.
 */
int image_lookup(struct image_store *s, const char *ref, struct image_info *ret, struct error *err);

/*
 * The image ref names (image_lookup()), its manifest and its config, read
 * back from its blobs. The caller releases manifest and config.
 */
int image_inspect(struct image_store *s, const char *ref, struct image_info *ret_info,
		  struct image_manifest *ret_manifest, struct image_config *ret_config,
		  struct error *err);

/* <state>/images/trees/<config hex>: where info's tree is. 0 or -ENAMETOOLONG. */
int image_tree_path(const struct image_store *s, const struct image_info *info, char *buf,
		    size_t size);

/*
 * Import the image at path: a directory holding an OCI image layout, or
 * a file holding one as a tar, or a `docker save` archive (a tar with
 * manifest.json; tar, tar.gz or tar.zst: libarchive tells). An index of
 * several images gives its linux/amd64 one (image_index_choose()).
 *
 * Verified, and refused on any mismatch (-EINVAL, err naming the blob):
 * every blob's SHA-256 and size against its descriptor (the layout's
 * blobs are named by digest: the name is checked too); a docker save's
 * layers against the config's rootfs.diff_ids; the config's platform
 * (linux/amd64). Limits: IMAGE_*_MAX of oci.h and above, and the layers'
 * (unpack.h: IMAGE_BYTES_MAX_DEFAULT, IMAGE_ENTRIES_MAX_DEFAULT).
 *
 * The layers are applied in order with unpack_layer() into a temporary
 * tree, renamed into trees/ once whole (an image whose tree exists is
 * not unpacked again). On any failure nothing of it is left: not its
 * blobs (but those other images have), not its tree, not its ref.
 *
 * name: the ref to give it (normalized: image_ref_normalize()); NULL
 * takes the archive's own (a layout's io.containerd.image.name or ref.name,
 * a docker save's RepoTags[0]) or none. A name that named another image
 * moves to this one; the other stays, unnamed, until prune or rm.
 * *ret (may be NULL) gets the image.
 */
int image_import(struct image_store *s, const char *path, const char *name, struct image_info *ret,
		 struct error *err);

/*
 * Remove an image: by name, that ref (the image goes with its last ref);
 * by digest, the image and every ref to it. Its tree, and its blobs that
 * no other image has, go with it. -ENOENT: no such image; -EBUSY: its
 * tree is in use (nothing changed).
 */
int image_remove(struct image_store *s, const char *ref, struct error *err);

/* What a prune did. */
struct image_prune_stats {
	uint64_t images; /* unnamed images removed */
	uint64_t blobs;	 /* blobs removed */
	uint64_t trees;	 /* trees removed */
	uint64_t bytes;	 /* bytes of the blobs removed */
	uint64_t busy;	 /* unnamed images or trees kept because in use */
};

/*
 * Remove the unnamed images no one uses, then every blob and tree no
 * image of index.json names (and no one uses).
 */
int image_prune(struct image_store *s, struct image_prune_stats *ret, struct error *err);

/*
 * Begin a use of the tree of the image whose config is config_digest
 * ("sha256:<hex>", as image_info's config_digest; a sandbox's spec keeps
 * that, not the name, which may move): *ret_fd is the tree's directory,
 * open O_RDONLY | O_DIRECTORY | O_CLOEXEC and locked shared. The runtime
 * mounts from it (open_tree(fd, "", AT_EMPTY_PATH | ...)) and keeps it
 * open for as long as the sandbox lives; image_use_end() (or the
 * process's death) ends the use. -ENOENT when the tree is not there (the
 * image was removed since it was looked up). libc only: no store, no
 * lock of the store; any process running as root may call it.
 */
int image_use_begin(const char *state_dir, const char *config_digest, int *ret_fd,
		    struct error *err);
void image_use_end(int fd);

#endif
