/*
 * export.c - image_export() (commit.h): one image of the store as an
 * OCI image layout in a tar, written by libarchive as it is read from
 * the store's blobs.
 */
#include "image/commit.h"
#include "image/import-internal.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT_BLOCK (128u * 1024)

/* One blob to write: its store fd, opened before anything is written. */
struct export_blob {
	char hex[IMAGE_DIGEST_HEX + 1];
	int fd;
	uint64_t size;
};

struct export
{
	struct export_blob *blobs; /* manifest, config, layers (each once) */
	size_t n;
	time_t mtime;
	struct archive *a;
	char *block;
};

static int blob_add(struct export *x, int blobsfd, const struct image_descriptor *d,
		    uint64_t *total, struct error *err)
{
	const char *hex = image_digest_hex(d->digest);
	for (size_t i = 0; i < x->n; i++)
		if (strcmp(x->blobs[i].hex, hex) == 0)
			return 0;
	struct export_blob *b = &x->blobs[x->n];
	b->fd = openat(blobsfd, hex, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (b->fd < 0 || fstat(b->fd, &st) < 0) {
		int e = errno;
		CLOSE_FD(b->fd);
		return error_set_errno(err, e, "blob %s", d->digest);
	}
	x->n++;
	snprintf(b->hex, sizeof(b->hex), "%s", hex);
	b->size = (uint64_t)st.st_size;
	if (b->size != d->size)
		return error_set(err, EIO, "blob %s: %llu bytes, not the %llu its descriptor says",
				 d->digest, (unsigned long long)b->size,
				 (unsigned long long)d->size);
	*total += b->size;
	if (*total > IMAGE_BLOBS_MAX) /* and the tar's own: IMAGE_EXPORT_MAX */
		return error_set(err, EFBIG, "the image's blobs are larger than %llu bytes",
				 (unsigned long long)IMAGE_BLOBS_MAX);
	return 0;
}

static int put_header(struct export *x, const char *path, mode_t type, uint64_t size,
		      struct error *err)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return error_set(err, ENOMEM, "out of memory");
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
	archive_entry_set_mtime(e, x->mtime, 0);
	if (type == AE_IFREG)
		archive_entry_set_size(e, (la_int64_t)size);
	int r = archive_write_header(x->a, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return error_set(err, EIO, "export: %s: %s", path,
				 archive_error_string(x->a) ?: "write");
	return 0;
}

static int put_text(struct export *x, const char *path, const char *text, struct error *err)
{
	size_t len = strlen(text);
	int r = put_header(x, path, AE_IFREG, len, err);
	if (r == 0 && archive_write_data(x->a, text, len) != (la_ssize_t)len)
		r = error_set(err, EIO, "export: %s: %s", path,
			      archive_error_string(x->a) ?: "write");
	return r;
}

static int put_blob(struct export *x, const struct export_blob *b, struct error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "blobs/sha256/%s", b->hex);
	int r = put_header(x, path, AE_IFREG, b->size, err);
	for (uint64_t left = b->size; r == 0 && left > 0;) {
		ssize_t n = read(b->fd, x->block, left < EXPORT_BLOCK ? left : EXPORT_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? error_set_errno(err, errno, "blob sha256:%s", b->hex)
				     : error_set(err, EIO, "blob sha256:%s shrank", b->hex);
		if (archive_write_data(x->a, x->block, (size_t)n) != n)
			return error_set(err, EIO, "export: %s: %s", path,
					 archive_error_string(x->a) ?: "write");
		left -= (uint64_t)n;
	}
	return r;
}

/* index.json of the one image: its manifest's descriptor, named when it has a name. */
static char *index_json(const struct image_info *info)
{
	json_t *ann = info->name[0] ? json_pack("{s:s}", IMAGE_ANN_REF_NAME, info->name) : NULL;
	_cleanup_json_ json_t *v =
	    json_pack("{s:i, s:s, s:[{s:s, s:s, s:I, s:{s:s, s:s}, s:o*}]}", "schemaVersion", 2,
		      "mediaType", IMAGE_MT_OCI_INDEX, "manifests", "mediaType", info->media_type,
		      "digest", info->digest, "size", (json_int_t)info->manifest_size, "platform",
		      "os", IMAGE_OS, "architecture", IMAGE_ARCH, "annotations", ann);
	return v ? json_dumps(v, JSON_COMPACT) : NULL;
}

static int export_write(struct export *x, const struct image_info *info, int out_fd,
			struct error *err)
{
	_cleanup_free_ char *index = index_json(info);
	if (!index || !(x->block = malloc(EXPORT_BLOCK)) || !(x->a = archive_write_new()))
		return error_set(err, ENOMEM, "out of memory");
	if (archive_write_set_format_pax_restricted(x->a) != ARCHIVE_OK ||
	    archive_write_open_fd(x->a, out_fd) != ARCHIVE_OK)
		return error_set(err, EIO, "export: %s", archive_error_string(x->a) ?: "open");
	int r = put_text(x, LAYOUT_IMAGE_OCI_LAYOUT, "{\"imageLayoutVersion\":\"1.0.0\"}", err);
	if (r == 0)
		r = put_text(x, LAYOUT_IMAGE_INDEX, index, err);
	if (r == 0)
		r = put_header(x, "blobs", AE_IFDIR, 0, err);
	if (r == 0)
		r = put_header(x, "blobs/sha256", AE_IFDIR, 0, err);
	for (size_t i = 0; r == 0 && i < x->n; i++)
		r = put_blob(x, &x->blobs[i], err);
	if (r == 0 && archive_write_close(x->a) != ARCHIVE_OK)
		r = error_set(err, EIO, "export: %s", archive_error_string(x->a) ?: "write");
	return r;
}

int image_export(struct image_store *s, const char *ref, int out_fd, struct image_info *ret,
		 struct error *err)
{
	struct image_info info;
	struct image_manifest m = {0};
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int blobsfd = -1;
	size_t len = 0;
	uint64_t total = 0;
	struct export x = {0};
	int r = image_lookup(s, ref, &info, err);
	if (r == 0)
		r = store_blob_read(s, info.digest, IMAGE_MANIFEST_MAX, &text, &len, err);
	if (r == 0)
		r = image_manifest_parse(text, len, &m, err);
	if (r == 0)
		r = store_open_dir(s, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, &blobsfd, err);
	if (r == 0 && !(x.blobs = calloc(m.nlayers + 2, sizeof(*x.blobs))))
		r = error_set(err, ENOMEM, "out of memory");
	if (r == 0) {
		struct image_descriptor md = {.size = info.manifest_size};
		snprintf(md.digest, sizeof(md.digest), "%s", info.digest);
		r = blob_add(&x, blobsfd, &md, &total, err);
	}
	if (r == 0)
		r = blob_add(&x, blobsfd, &m.config, &total, err);
	for (size_t i = 0; r == 0 && i < m.nlayers; i++)
		r = blob_add(&x, blobsfd, &m.layers[i], &total, err);
	x.mtime = (time_t)(info.imported_ms / 1000);
	if (r == 0)
		r = export_write(&x, &info, out_fd, err);
	if (x.a)
		archive_write_free(x.a);
	for (size_t i = 0; i < x.n; i++)
		CLOSE_FD(x.blobs[i].fd);
	free(x.blobs);
	free(x.block);
	image_manifest_release(&m);
	if (r == 0 && ret)
		*ret = info;
	return r;
}
