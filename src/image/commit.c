/*
 * commit.c - image_commit() (commit.h): the upper's layer, the base's
 * config and manifest with it added, assembled as an OCI layout in
 * tmp/commit-* (the base's layers hard-linked in) and imported from
 * there by image_import(); the temporary goes on every path.
 */
#include "image/commit-internal.h"
#include "image/import-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMMIT_CREATED_BY "agentbox commit"
#define COMMIT_LAYER_MT	  "application/vnd.oci.image.layer.v1.tar+gzip"
#define COMMIT_TEMP	  "commit-XXXXXX"
/* Docker's name for a gzip'd layer: the same bytes as OCI's COMMIT_LAYER_MT */
#define DOCKER_LAYER_GZIP_MT "application/vnd.docker.image.rootfs.diff.tar.gzip"

/* The temporary layout: tmp/commit-*, its blobs/sha256. */
struct staging {
	int tmpfd;			/* images/tmp */
	char name[sizeof(COMMIT_TEMP)]; /* commit-*, "" until made */
	int dirfd, blobsfd;
};

/* The image base names: by name or manifest digest, else a config digest. */
static int base_lookup(struct image_store *s, const char *base, struct image_info *ret,
		       struct error *err)
{
	int r = image_lookup(s, base, ret, err);
	if (r != -ENOENT || !image_digest_is_valid(base))
		return r;
	_cleanup_free_ struct image_info *v = NULL;
	size_t n = 0;
	if ((r = store_index_read(s, &v, &n, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].config_digest, base) == 0) {
			*ret = v[i];
			return 0;
		}
	return error_set(err, ENOENT, "no image %s (the base of the commit)", base);
}

static int staging_open(struct image_store *s, struct staging *st, struct error *err)
{
	char path[PATH_MAX];
	int r = store_open_dir(s, LAYOUT_IMAGE_TMP, &st->tmpfd, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/" LAYOUT_IMAGE_TMP "/" COMMIT_TEMP, image_store_dir(s));
	if (!mkdtemp(path))
		return error_set_errno(err, errno, "a temporary directory in %s/" LAYOUT_IMAGE_TMP,
				       image_store_dir(s));
	snprintf(st->name, sizeof(st->name), "%s", strrchr(path, '/') + 1);
	st->dirfd = openat(st->tmpfd, st->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (st->dirfd < 0 || mkdirat(st->dirfd, LAYOUT_IMAGE_BLOBS, 0700) < 0 ||
	    mkdirat(st->dirfd, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, 0700) < 0)
		return error_set_errno(err, errno, "%s", path);
	st->blobsfd = openat(st->dirfd, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (st->blobsfd < 0)
		return error_set_errno(err, errno, "%s/blobs/sha256", path);
	return 0;
}

static void staging_remove(struct staging *st)
{
	CLOSE_FD(st->blobsfd);
	CLOSE_FD(st->dirfd);
	if (st->name[0])
		(void)store_remove_all(st->tmpfd, st->name);
	CLOSE_FD(st->tmpfd);
}

/* text as a blob of the layout; its descriptor into d. */
static int staging_blob(struct staging *st, const char *mt, const char *text,
			struct image_descriptor *d, struct error *err)
{
	struct sha256 h = {0};
	char hex[IMAGE_DIGEST_HEX + 1];
	size_t len = strlen(text);
	if (sha256_init(&h) < 0)
		return error_set(err, ENOMEM, "out of memory");
	sha256_update(&h, text, len);
	sha256_final(&h, hex);
	_cleanup_close_ int fd =
	    openat(st->blobsfd, hex, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = fd < 0 ? -errno : write_all(fd, text, len);
	if (r < 0)
		return error_set_errno(err, -r, "a blob of the commit");
	snprintf(d->media_type, sizeof(d->media_type), "%s", mt);
	snprintf(d->digest, sizeof(d->digest), IMAGE_DIGEST_PREFIX "%s", hex);
	d->size = len;
	return 0;
}

/* The upper's layer into the layout; its descriptor into d, its diff_id into diff. */
static int staging_layer(struct staging *st, int upper_fd, uid_t id_base,
			 const struct image_commit_opts *lim, struct image_descriptor *d,
			 char diff[IMAGE_DIGEST_SIZE], struct image_commit_stats *stats,
			 struct error *err)
{
	static const char part[] = "layer.part";
	_cleanup_close_ int fd =
	    openat(st->dirfd, part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(err, errno, "the commit's layer");
	struct commit_layer l;
	int r = commit_layer_write(upper_fd, id_base, lim, fd, &l, stats, err);
	if (r < 0)
		return error_prefix(err, "commit: ");
	if (renameat(st->dirfd, part, st->blobsfd, l.hex) < 0)
		return error_set_errno(err, errno, "the commit's layer");
	snprintf(d->media_type, sizeof(d->media_type), COMMIT_LAYER_MT);
	snprintf(d->digest, sizeof(d->digest), IMAGE_DIGEST_PREFIX "%s", l.hex);
	d->size = l.size;
	snprintf(diff, IMAGE_DIGEST_SIZE, IMAGE_DIGEST_PREFIX "%s", l.diff_hex);
	return 0;
}

/* json_object_set_new() that fails on a NULL value, as on any failure. */
static int set_new(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0 ? 0 : -ENOMEM;
}

/*
 * The base's config (text) with the layer: diff_id appended to
 * rootfs.diff_ids, a history entry, "created" and "author"; malloc'd.
 */
static int config_with_layer(const char *text, size_t len, const char *diff,
			     const struct image_commit_opts *o, char **ret, struct error *err)
{
	json_error_t je;
	_cleanup_json_ json_t *c = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(c))
		return error_set(err, EINVAL, "the base's config: %s",
				 c ? "not an object" : je.text);
	json_t *rootfs = json_object_get(c, "rootfs");
	json_t *ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_object(rootfs) || !json_is_array(ids))
		return error_set(err, EINVAL, "the base's config has no rootfs.diff_ids");
	json_t *history = json_object_get(c, "history");
	if (history && !json_is_array(history))
		return error_set(err, EINVAL, "the base's config: history is not an array");
	char created[32];
	store_format_time(wall_clock_ms(), created);
	json_t *h = json_pack("{s:s, s:s}", "created", created, "created_by", COMMIT_CREATED_BY);
	int r = h ? 0 : -ENOMEM;
	if (r == 0 && o->comment)
		r = set_new(h, "comment", json_string(o->comment));
	if (r == 0 && o->author)
		r = set_new(h, "author", json_string(o->author));
	if (r == 0 && !history)
		r = set_new(c, "history", history = json_array());
	if (r == 0 && json_array_append_new(history, TAKE_PTR(h)) < 0)
		r = -ENOMEM;
	json_decref(h);
	if (r == 0 && json_array_append_new(ids, json_string(diff)) < 0)
		r = -ENOMEM;
	if (r == 0)
		r = set_new(c, "created", json_string(created));
	if (r == 0 && o->author)
		r = set_new(c, "author", json_string(o->author));
	if (r < 0 || !(*ret = json_dumps(c, JSON_COMPACT)))
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

/* Hard-link the base's layers from the store into the layout. */
static int staging_link_layers(struct image_store *s, struct staging *st,
			       const struct image_manifest *m, struct error *err)
{
	_cleanup_close_ int blobs = -1;
	int r = store_open_dir(s, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, &blobs, err);
	for (size_t i = 0; r == 0 && i < m->nlayers; i++) {
		const char *hex = image_digest_hex(m->layers[i].digest);
		if (linkat(blobs, hex, st->blobsfd, hex, 0) < 0 && errno != EEXIST)
			r = error_set_errno(err, errno, "the base's layer %s", m->layers[i].digest);
	}
	return r;
}

/* The new manifest (the base's layers and d), and the layout's index.json and oci-layout. */
static int staging_manifest(struct staging *st, const struct image_manifest *base,
			    const struct image_descriptor *config,
			    const struct image_descriptor *layer, struct error *err)
{
	struct image_manifest m = {.config = *config, .nlayers = base->nlayers + 1};
	_cleanup_free_ struct image_descriptor *layers = calloc(m.nlayers, sizeof(*layers));
	if (!layers)
		return error_set(err, ENOMEM, "out of memory");
	memcpy(layers, base->layers, base->nlayers * sizeof(*layers));
	for (size_t i = 0; i < base->nlayers; i++) /* an OCI manifest names OCI's types */
		if (strcmp(layers[i].media_type, DOCKER_LAYER_GZIP_MT) == 0)
			snprintf(layers[i].media_type, sizeof(layers[i].media_type),
				 COMMIT_LAYER_MT);
	layers[base->nlayers] = *layer;
	m.layers = layers;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct image_descriptor md;
	int r = image_manifest_json(&m, &text, &len);
	if (r < 0)
		return error_set(err, ENOMEM, "out of memory");
	if ((r = staging_blob(st, IMAGE_MT_OCI_MANIFEST, text, &md, err)) < 0)
		return r;
	_cleanup_json_ json_t *index =
	    json_pack("{s:i, s:s, s:[{s:s, s:s, s:I}]}", "schemaVersion", 2, "mediaType",
		      IMAGE_MT_OCI_INDEX, "manifests", "mediaType", md.media_type, "digest",
		      md.digest, "size", (json_int_t)md.size);
	_cleanup_free_ char *itext = index ? json_dumps(index, JSON_COMPACT) : NULL;
	if (!itext)
		return error_set(err, ENOMEM, "out of memory");
	if (create_file_at(st->dirfd, LAYOUT_IMAGE_INDEX, itext, 0600) < 0 ||
	    create_file_at(st->dirfd, LAYOUT_IMAGE_OCI_LAYOUT, "{\"imageLayoutVersion\":\"1.0.0\"}",
			   0600) < 0)
		return error_set_errno(err, errno, "the commit's index.json");
	return 0;
}

static int commit_run(struct image_store *s, struct staging *st, const char *base, int upper_fd,
		      uid_t id_base, const char *name, const struct image_commit_opts *lim,
		      struct image_info *ret, struct image_commit_stats *stats, struct error *err)
{
	struct image_info info;
	struct image_manifest m = {0};
	_cleanup_free_ char *mtext = NULL, *ctext = NULL, *config = NULL;
	size_t mlen = 0, clen = 0;
	struct image_descriptor layer, cdesc;
	char diff[IMAGE_DIGEST_SIZE], path[PATH_MAX];
	int r = base_lookup(s, base, &info, err);
	if (r == 0)
		r = store_blob_read(s, info.digest, IMAGE_MANIFEST_MAX, &mtext, &mlen, err);
	if (r == 0)
		r = image_manifest_parse(mtext, mlen, &m, err);
	if (r == 0 && m.nlayers + 1 > IMAGE_LAYERS_MAX)
		r = error_set(err, E2BIG, "the base has %zu layers already: one more is past %d",
			      m.nlayers, IMAGE_LAYERS_MAX);
	if (r == 0)
		r = store_blob_read(s, m.config.digest, IMAGE_CONFIG_MAX, &ctext, &clen, err);
	if (r == 0)
		r = staging_open(s, st, err);
	if (r == 0)
		r = staging_layer(st, upper_fd, id_base, lim, &layer, diff, stats, err);
	if (r == 0)
		r = config_with_layer(ctext, clen, diff, lim, &config, err);
	if (r == 0)
		r = staging_blob(st, IMAGE_MT_OCI_CONFIG, config, &cdesc, err);
	if (r == 0)
		r = staging_link_layers(s, st, &m, err);
	if (r == 0)
		r = staging_manifest(st, &m, &cdesc, &layer, err);
	image_manifest_release(&m);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/" LAYOUT_IMAGE_TMP "/%s", image_store_dir(s), st->name);
	return image_import(s, path, name, ret, err);
}

int image_commit(struct image_store *s, const char *base, int upper_fd, uid_t id_base,
		 const char *name, const struct image_commit_opts *opts, struct image_info *ret,
		 struct image_commit_stats *stats, struct error *err)
{
	struct image_commit_opts lim = opts ? *opts : (struct image_commit_opts){0};
	struct image_commit_stats scratch;
	char norm[IMAGE_REF_MAX];
	int r;
	if (!lim.bytes_max)
		lim.bytes_max = IMAGE_COMMIT_BYTES_MAX;
	if (!lim.entries_max)
		lim.entries_max = IMAGE_COMMIT_ENTRIES_MAX;
	if ((lim.comment && strlen(lim.comment) > IMAGE_COMMIT_TEXT_MAX) ||
	    (lim.author && strlen(lim.author) > IMAGE_COMMIT_TEXT_MAX))
		return error_set(err, E2BIG, "a comment or an author is longer than %d bytes",
				 IMAGE_COMMIT_TEXT_MAX);
	const char *texts[] = {lim.comment, lim.author};
	for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
		json_t *v = texts[i] ? json_string(texts[i]) : NULL;
		if (texts[i] && !v)
			return error_set(err, EINVAL, "a comment or an author is not UTF-8 text");
		json_decref(v);
	}
	if (name && (r = image_ref_normalize(name, norm, sizeof(norm), err)) < 0)
		return r;
	struct staging st = {.tmpfd = -1, .dirfd = -1, .blobsfd = -1};
	r = commit_run(s, &st, base, upper_fd, id_base, name ? norm : NULL, &lim, ret,
		       stats ? stats : &scratch, err);
	staging_remove(&st);
	return r;
}
