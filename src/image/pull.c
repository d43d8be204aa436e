/*
 * pull.c - image_pull() (pull.h): the manifest (through an index to its
 * linux/amd64 manifest), the config and the layers, each checked as it
 * arrives, into a temporary OCI image layout under images/tmp/, then
 * image_import() of it. The layout goes however the pull ends.
 */
#include "image/pull-internal.h"

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

/* What a manifest request accepts: an image's manifest or an index, OCI's or Docker's. */
#define PULL_ACCEPT                                                                                \
	IMAGE_MT_OCI_MANIFEST ", " IMAGE_MT_OCI_INDEX ", " IMAGE_MT_DOCKER_MANIFEST                \
			      ", " IMAGE_MT_DOCKER_LIST

/* The layers' media types a pull takes (libarchive reads each: tar, gzip, zstd). */
static const char *const layer_types[] = {
    IMAGE_MT_OCI_LAYER,
    IMAGE_MT_OCI_LAYER "+gzip",
    IMAGE_MT_OCI_LAYER "+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar.zstd",
};

struct pull {
	struct image_store *s;
	struct pull_http http;
	struct image_pull_ref ref;
	int tmpfd;	   /* images/tmp */
	char dir[32];	   /* the layout: images/tmp/<dir> */
	int blobsfd;	   /* the layout's blobs/sha256 */
	int store_blobsfd; /* the store's blobs/sha256 */
};

static int hex_of(const char *data, size_t len, char hex[IMAGE_DIGEST_HEX + 1])
{
	struct sha256 h = {0};
	if (sha256_init(&h) < 0)
		return -ENOMEM;
	sha256_update(&h, data, len);
	sha256_final(&h, hex);
	return 0;
}

/* A document as a blob of the layout, named by its digest. */
static int put_doc(struct pull *p, const char *hex, const char *data, size_t len, struct error *err)
{
	_cleanup_close_ int fd =
	    openat(p->blobsfd, hex, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = fd < 0 ? -errno : write_all(fd, data, len);
	if (r < 0)
		return error_set_errno(err, -r, "a blob of the pull's layout");
	return 0;
}

/*
 * The manifest or index at reference (a tag or a digest), into *ret
 * (malloc'd); expect_size: its descriptor's (0: none known). Checked: its
 * digest against a digest reference and Docker-Content-Digest; its media
 * type (its own mediaType, else Content-Type) into d.
 */
static int fetch_manifest(struct pull *p, const char *reference, uint64_t expect_size,
			  struct image_descriptor *d, char **ret, size_t *ret_len,
			  struct error *err)
{
	char path[IMAGE_REF_MAX * 2 + 32];
	snprintf(path, sizeof(path), "/v2/%s/manifests/%s", p->ref.repo, reference);
	struct pull_sink sink = {.fd = -1, .max = expect_size ? expect_size : IMAGE_MANIFEST_MAX};
	struct pull_answer ans = {0};
	_cleanup_free_ char *buf = NULL;
	int r = pull_http_get(&p->http, path, PULL_ACCEPT, false, &sink, &ans, err);
	buf = sink.buf;
	if (r < 0)
		return r;
	char hex[IMAGE_DIGEST_HEX + 1];
	if (!buf || hex_of(buf, sink.len, hex) < 0)
		return error_set(err, buf ? ENOMEM : EBADMSG, "registry %s sent an empty manifest",
				 p->http.host);
	char got[IMAGE_DIGEST_SIZE];
	snprintf(got, sizeof(got), IMAGE_DIGEST_PREFIX "%s", hex);
	if (image_digest_is_valid(reference) && strcmp(reference, got) != 0)
		return error_set(err, EBADMSG,
				 "registry %s sent a manifest whose digest is %s, "
				 "not the %s asked for",
				 p->http.host, got, reference);
	if (expect_size && sink.len != expect_size)
		return error_set(err, EBADMSG, "registry %s sent a manifest of %zu bytes, not %llu",
				 p->http.host, sink.len, (unsigned long long)expect_size);
	if (image_digest_is_valid(ans.digest) && strcmp(ans.digest, got) != 0)
		return error_set(err, EBADMSG,
				 "registry %s sent a manifest whose digest is %s, "
				 "not the %s it says",
				 p->http.host, got, ans.digest);
	json_error_t jerr;
	_cleanup_json_ json_t *v = json_loadb(buf, sink.len, 0, &jerr);
	const char *mt = json_string_value(json_object_get(v, "mediaType"));
	if (!mt)
		mt = ans.content_type;
	if (!image_media_type_is_index(mt) && !image_media_type_is_manifest(mt))
		return error_set(err, EPROTO,
				 "registry %s sent a manifest of media type '%.100s': neither an "
				 "OCI or Docker v2 manifest nor an index (Docker's schema 1 is not "
				 "taken)",
				 p->http.host, mt);
	snprintf(d->media_type, sizeof(d->media_type), "%s", mt);
	snprintf(d->digest, sizeof(d->digest), "%s", got);
	d->size = sink.len;
	*ret = TAKE_PTR(buf);
	*ret_len = sink.len;
	return 0;
}

/* A blob (config or layer) into the layout: linked from the store if there, else fetched. */
static int fetch_blob(struct pull *p, const struct image_descriptor *d, struct error *err)
{
	const char *hex = image_digest_hex(d->digest);
	if (linkat(p->store_blobsfd, hex, p->blobsfd, hex, 0) == 0)
		return 0; /* image_import() verifies it as any other */
	char part[IMAGE_DIGEST_HEX + 8], path[IMAGE_REF_MAX + 128];
	snprintf(part, sizeof(part), "%s.part", hex);
	snprintf(path, sizeof(path), "/v2/%s/blobs/%s", p->ref.repo, d->digest);
	_cleanup_close_ int fd =
	    openat(p->blobsfd, part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(err, errno, "a blob of the pull's layout");
	struct pull_sink sink = {.fd = fd, .max = d->size, .hash = true};
	struct pull_answer ans = {0};
	if (sha256_init(&sink.h) < 0)
		return error_set(err, ENOMEM, "out of memory");
	int r = pull_http_get(&p->http, path, NULL, true, &sink, &ans, err);
	if (r < 0) {
		sha256_release(&sink.h);
		return r;
	}
	char got[IMAGE_DIGEST_HEX + 1];
	sha256_final(&sink.h, got);
	if (sink.got != d->size)
		return error_set(err, EBADMSG, "registry %s sent %llu bytes of %s, not %llu",
				 p->http.host, (unsigned long long)sink.got, d->digest,
				 (unsigned long long)d->size);
	if (strcmp(got, hex) != 0)
		return error_set(err, EBADMSG, "registry %s sent blob %s whose digest is sha256:%s",
				 p->http.host, d->digest, got);
	if (renameat(p->blobsfd, part, p->blobsfd, hex) < 0)
		return error_set_errno(err, errno, "a blob of the pull's layout");
	return 0;
}

static bool layer_type_is_taken(const char *mt)
{
	for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++)
		if (strcmp(mt, layer_types[i]) == 0)
			return true;
	return false;
}

/* The layout's oci-layout and index.json, naming manifest d alone. */
static int write_layout(struct pull *p, int layoutfd, const struct image_descriptor *d,
			struct error *err)
{
	_cleanup_json_ json_t *index =
	    json_pack("{s:i, s:s, s:[{s:s, s:s, s:I}]}", "schemaVersion", 2, "mediaType",
		      IMAGE_MT_OCI_INDEX, "manifests", "mediaType", d->media_type, "digest",
		      d->digest, "size", (json_int_t)d->size);
	_cleanup_free_ char *text = index ? json_dumps(index, JSON_COMPACT) : NULL;
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	int r = create_file_at(layoutfd, LAYOUT_IMAGE_OCI_LAYOUT,
			       "{\"imageLayoutVersion\": \"1.0.0\"}", 0600);
	if (r == 0)
		r = create_file_at(layoutfd, LAYOUT_IMAGE_INDEX, text, 0600);
	if (r < 0)
		return error_set_errno(err, -r, "the pull's layout");
	(void)p;
	return 0;
}

/* Everything of the image into the layout at layoutfd; *d gets its manifest's descriptor. */
static int pull_layout(struct pull *p, int layoutfd, struct image_descriptor *d, struct error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct image_manifest m = {0};
	const char *reference = p->ref.digest[0] ? p->ref.digest : p->ref.tag;
	int r = fetch_manifest(p, reference, 0, d, &text, &len, err);
	for (int depth = 0; r == 0 && image_media_type_is_index(d->media_type); depth++) {
		struct image_descriptor next;
		if (depth == PULL_INDEX_DEPTH_MAX)
			return error_set(err, EINVAL, "indexes nest deeper than %d",
					 PULL_INDEX_DEPTH_MAX);
		if ((r = image_index_choose(text, len, &next, NULL, 0, err)) < 0)
			return r;
		if (next.size > IMAGE_MANIFEST_MAX)
			return error_set(err, E2BIG, "the manifest %s is larger than %u bytes",
					 next.digest, IMAGE_MANIFEST_MAX);
		free(TAKE_PTR(text));
		r = fetch_manifest(p, next.digest, next.size, d, &text, &len, err);
		if (r == 0 && strcmp(d->media_type, next.media_type) != 0 && next.media_type[0])
			r = error_set(err, EBADMSG, "registry %s sent a %s where its index says %s",
				      p->http.host, d->media_type, next.media_type);
	}
	if (r < 0 || (r = image_manifest_parse(text, len, &m, err)) < 0)
		return r;
	uint64_t bytes = len + m.config.size;
	for (size_t i = 0; i < m.nlayers && r == 0; i++) {
		bytes += m.layers[i].size;
		if (!layer_type_is_taken(m.layers[i].media_type))
			r = error_set(
			    err, EINVAL,
			    "layer %zu's media type '%s' is not taken (a tar: plain, gzip "
			    "or zstd)",
			    i, m.layers[i].media_type);
	}
	if (r == 0 && bytes > IMAGE_BLOBS_MAX)
		r = error_set(err, EFBIG, "the image's blobs are larger than %llu bytes",
			      (unsigned long long)IMAGE_BLOBS_MAX);
	if (r == 0)
		r = put_doc(p, image_digest_hex(d->digest), text, len, err);
	if (r == 0)
		r = fetch_blob(p, &m.config, err);
	for (size_t i = 0; i < m.nlayers && r == 0; i++)
		r = fetch_blob(p, &m.layers[i], err);
	if (r == 0)
		r = write_layout(p, layoutfd, d, err);
	image_manifest_release(&m);
	return r;
}

int image_pull(struct image_store *s, const struct image_registries *regs, const char *ref,
	       const char *name, struct image_info *ret, struct error *err)
{
	struct pull p = {.s = s, .tmpfd = -1, .blobsfd = -1, .store_blobsfd = -1};
	int r = image_pull_ref_parse(ref, &p.ref, err);
	if (r < 0)
		return r;
	char path[PATH_MAX];
	snprintf(p.dir, sizeof(p.dir), "pull-XXXXXX");
	int n =
	    snprintf(path, sizeof(path), "%s/" LAYOUT_IMAGE_TMP "/%s", image_store_dir(s), p.dir);
	if (n < 0 || (size_t)n >= sizeof(path))
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	if ((r = store_open_dir(s, LAYOUT_IMAGE_TMP, &p.tmpfd, err)) < 0)
		return r;
	if (!mkdtemp(path)) {
		CLOSE_FD(p.tmpfd);
		return error_set_errno(err, errno, "a temporary directory in %s",
				       image_store_dir(s));
	}
	snprintf(p.dir, sizeof(p.dir), "%s", strrchr(path, '/') + 1);
	_cleanup_close_ int layoutfd =
	    openat(p.tmpfd, p.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layoutfd < 0 || mkdirat(layoutfd, LAYOUT_IMAGE_BLOBS, 0700) < 0 ||
	    mkdirat(layoutfd, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, 0700) < 0 ||
	    (p.blobsfd = openat(layoutfd, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256,
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		r = error_set_errno(err, errno, "%s", path);
	if (r == 0)
		r = store_open_dir(s, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, &p.store_blobsfd,
				   err);
	if (r == 0)
		r = pull_http_init(&p.http, p.ref.registry, registries_find(regs, p.ref.registry),
				   p.ref.repo, err);
	struct image_descriptor d = {0};
	if (r == 0)
		r = pull_layout(&p, layoutfd, &d, err);
	pull_http_release(&p.http);
	if (r == 0)
		r = image_import(s, path, name ? name : (p.ref.name[0] ? p.ref.name : NULL), ret,
				 err);
	/* nothing of the pull stays but what the import took into the store */
	(void)store_remove_all(p.tmpfd, p.dir);
	CLOSE_FD(p.blobsfd);
	CLOSE_FD(p.store_blobsfd);
	CLOSE_FD(p.tmpfd);
	return r;
}
