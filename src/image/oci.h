/*
 * oci.h - the documents of an OCI image (and of a `docker save` archive)
 * read strictly, as the untrusted input they are: digests, references,
 * an index (choosing linux/amd64), a manifest, an image's config.
 *
 * Pure functions on byte buffers (jansson). Every size, count and length
 * a document controls has a named limit below; a document past one is
 * refused (-E2BIG, or -EINVAL for a malformed one) with err naming what.
 *
 * Ownership: a struct image_manifest and a struct image_config own what
 * they point to; image_manifest_release() and image_config_release()
 * free it (a zeroed struct is fine), and leave the struct zeroed.
 */
#ifndef AGENTBOX_IMAGE_OCI_H
#define AGENTBOX_IMAGE_OCI_H

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "sha256:" + 64 lowercase hex digits, and its NUL. Only sha256 is taken. */
#define IMAGE_DIGEST_PREFIX "sha256:"
#define IMAGE_DIGEST_HEX    64
#define IMAGE_DIGEST_SIZE   (sizeof(IMAGE_DIGEST_PREFIX) - 1 + IMAGE_DIGEST_HEX + 1)

/* Named limits of the documents. */
#define IMAGE_INDEX_MAX		(4u << 20) /* bytes of an index.json, an index blob */
#define IMAGE_MANIFEST_MAX	(4u << 20) /* bytes of a manifest (a registry's own cap) */
#define IMAGE_CONFIG_MAX	(4u << 20) /* bytes of an image's config */
#define IMAGE_INDEX_ENTRIES_MAX 1024	   /* manifests in one index */
#define IMAGE_LAYERS_MAX	128	   /* layers of one image */
#define IMAGE_ENV_MAX		1024	   /* Env entries of a config */
#define IMAGE_ARGS_MAX		1024	   /* Entrypoint + Cmd words, each */
#define IMAGE_STRING_MAX	32768	   /* bytes of one Env entry, word, WorkingDir, User */
#define IMAGE_MEDIA_TYPE_MAX	128	   /* bytes of a media type, NUL included */
/* A reference, "name:tag", NUL included (a name is [a-z0-9._/-], a tag [A-Za-z0-9._-]). */
#define IMAGE_REF_MAX 256
#define IMAGE_TAG_MAX 128

/* The platform an index is read for. */
#define IMAGE_OS   "linux"
#define IMAGE_ARCH "amd64"

/* Media types (OCI's, and Docker's v2 that mean the same). */
#define IMAGE_MT_OCI_INDEX	 "application/vnd.oci.image.index.v1+json"
#define IMAGE_MT_OCI_MANIFEST	 "application/vnd.oci.image.manifest.v1+json"
#define IMAGE_MT_OCI_CONFIG	 "application/vnd.oci.image.config.v1+json"
#define IMAGE_MT_OCI_LAYER	 "application/vnd.oci.image.layer.v1.tar"
#define IMAGE_MT_DOCKER_LIST	 "application/vnd.docker.distribution.manifest.list.v2+json"
#define IMAGE_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* Annotations of an index's entries. */
#define IMAGE_ANN_REF_NAME	  "org.opencontainers.image.ref.name"
#define IMAGE_ANN_CONTAINERD_NAME "io.containerd.image.name"

struct image_descriptor {
	char media_type[IMAGE_MEDIA_TYPE_MAX];
	char digest[IMAGE_DIGEST_SIZE];
	uint64_t size;
};

/* Is s "sha256:" and 64 lowercase hex digits? */
bool image_digest_is_valid(const char *s);

/* The 64 hex digits of a valid digest. */
static inline const char *image_digest_hex(const char *digest)
{
	return digest + sizeof(IMAGE_DIGEST_PREFIX) - 1;
}

/*
 * A reference as the store keeps it, into out (IMAGE_REF_MAX): "name:tag",
 * ":latest" added when ref has no tag. Names are lowercase [a-z0-9._/-]
 * (no leading, trailing or doubled '/'), optionally with a registry's
 * ":port" before the first '/'; tags [A-Za-z0-9._-], at most
 * IMAGE_TAG_MAX. Nothing else is added (no "docker.io/library/"). 0, or
 * -EINVAL with err saying why.
 */
int image_ref_normalize(const char *ref, char *out, size_t size, struct error *err);

/* Is this a media type of an index (OCI's or Docker's manifest list)? */
bool image_media_type_is_index(const char *mt);
/* Of an image manifest (OCI's or Docker's v2)? */
bool image_media_type_is_manifest(const char *mt);

/*
 * Choose the image of an index (an OCI layout's index.json, an index
 * blob, a Docker manifest list): the first entry for linux/amd64; when no
 * entry names a platform, the first entry. An index whose entries all
 * name other platforms is -ENOEXEC (err lists them). *ret gets the
 * entry's descriptor (a manifest or another index); ret_name (size
 * bytes, may be NULL) its name: io.containerd.image.name, else
 * org.opencontainers.image.ref.name, else "".
 */
int image_index_choose(const char *json, size_t len, struct image_descriptor *ret, char *ret_name,
		       size_t name_size, struct error *err);

struct image_manifest {
	struct image_descriptor config;
	size_t nlayers;
	struct image_descriptor *layers; /* nlayers, at most IMAGE_LAYERS_MAX */
};

/* An image manifest (schemaVersion 2, OCI or Docker v2). */
int image_manifest_parse(const char *json, size_t len, struct image_manifest *ret,
			 struct error *err);
void image_manifest_release(struct image_manifest *m);

/*
 * A manifest's JSON (OCI media types; the layers' media types as given),
 * malloc'd into *ret, for an image that came without one (docker save).
 * 0 or -ENOMEM.
 */
int image_manifest_json(const struct image_manifest *m, char **ret, size_t *ret_len);

/*
 * An image's config, as the runtime takes it for defaults: what a task
 * or sandbox of the image runs with when its request does not say.
 *   env          "KEY=VALUE" strings (the config's Env), in order;
 *                the request's env is applied over them, key by key
 *   working_dir  the config's WorkingDir, absolute, or NULL (none)
 *   user         the config's User as written ("1000", "1000:1000",
 *                "app", "app:app"), or NULL (root of the image, uid 0);
 *                names are the image's /etc/passwd's to resolve, inside
 *   entrypoint,  the config's Entrypoint and Cmd: the command is
 *   cmd          entrypoint + cmd when the request gives none, and
 *                entrypoint + the request's command when it gives one
 *                (Docker's rule); either may be empty
 *   os, arch     "linux", "amd64" (an import refuses others)
 *   created_ms   the config's "created", ms since the epoch; 0 = absent
 *   diff_ids     rootfs.diff_ids: the sha256 of each layer uncompressed
 * Every array is NULL-terminated too (argv-ready), with its count.
 */
struct image_config {
	char **env;
	size_t nenv;
	char *working_dir;
	char *user;
	char **entrypoint;
	size_t nentrypoint;
	char **cmd;
	size_t ncmd;
	char os[32];
	char arch[32];
	int64_t created_ms;
	char **diff_ids;
	size_t ndiff_ids;
};

/*
 * Parse an image's config. Unknown members are ignored (they are many);
 * the ones above are checked (types, limits; every Env entry "KEY=..."
 * with a non-empty KEY and no NUL; WorkingDir absolute). 0, -EINVAL or
 * -E2BIG with err naming the member, or -ENOMEM.
 */
int image_config_parse(const char *json, size_t len, struct image_config *ret, struct error *err);
void image_config_release(struct image_config *c);

/*
 * The first image of a `docker save` archive's manifest.json:
 *	[{"Config": "<path>", "RepoTags": ["name:tag"], "Layers": ["<path>", ...]}]
 * Paths are the archive's, relative. *ret_name gets the first RepoTag
 * ("" when none).
 */
struct image_docker_save {
	char *config;
	char **layers;
	size_t nlayers;
	char name[IMAGE_REF_MAX];
};
int image_docker_save_parse(const char *json, size_t len, struct image_docker_save *ret,
			    struct error *err);
void image_docker_save_release(struct image_docker_save *d);

#endif
