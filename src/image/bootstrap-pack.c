/*
 * bootstrap-pack.c - a bootstrapped tree as an OCI image layout
 * (bootstrap-internal.h): libarchive walks the tree (never following a
 * symlink) and writes a pax tar, which goes through a second archive
 * (raw format, gzip) into the layer's blob; both streams are hashed on
 * the way, the tar for the config's diff_id, the gzip for the blob's
 * digest. jansson writes the config, the manifest and index.json.
 */
#include "image/bootstrap-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "image/import-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PACK_BLOCK (128u * 1024)
#define LAYER_TMP  "layer.tmp"
/* Debian's default PATH, as its images have it. */
#define IMAGE_PATH_ENV "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The gzip stream on its way to the layer's file. */
struct gz_out {
	int fd;
	struct sha256 hash;
	uint64_t size;
	int error; /* errno of a failed write */
};

/* The tar stream on its way into the gzip archive. */
struct tar_out {
	struct archive *gz;
	struct sha256 hash;
};

static la_ssize_t gz_write(struct archive *a, void *data, const void *buf, size_t len)
{
	struct gz_out *o = data;
	int r = write_all(o->fd, buf, len);
	if (r < 0) {
		o->error = -r;
		archive_set_error(a, -r, "writing the layer: %s", strerror(-r));
		return -1;
	}
	sha256_update(&o->hash, buf, len);
	o->size += len;
	return (la_ssize_t)len;
}

static la_ssize_t tar_write(struct archive *a, void *data, const void *buf, size_t len)
{
	struct tar_out *o = data;
	la_ssize_t n = archive_write_data(o->gz, buf, len);
	if (n < 0 || (size_t)n != len) {
		archive_set_error(a, EIO, "gzip: %s", archive_error_string(o->gz));
		return -1;
	}
	sha256_update(&o->hash, buf, len);
	return (la_ssize_t)len;
}

static void archive_write_freep(struct archive **a)
{
	if (*a)
		archive_write_free(*a);
}

static void archive_read_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

/* One entry of the tree, its path made relative (prefix_len: rootfs's). */
static int pack_entry(struct archive *disk, struct archive *tar,
		      struct archive_entry_linkresolver *links, struct archive_entry *e,
		      size_t prefix_len, struct error *err)
{
	const char *path = archive_entry_pathname(e);
	if (!path || strlen(path) < prefix_len)
		return error_set(err, EINVAL, "packing: an entry outside the tree");
	const char *rel = path + prefix_len;
	while (*rel == '/')
		rel++;
	mode_t type = archive_entry_filetype(e);
	if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return 0; /* devices, fifos, sockets: an unpack drops them */
	_cleanup_free_ char *name = strdup(*rel ? rel : ".");
	if (!name)
		return error_set(err, ENOMEM, "out of memory");
	archive_entry_copy_pathname(e, name);
	archive_entry_unset_atime(e);
	archive_entry_unset_ctime(e);
	archive_entry_unset_birthtime(e);
	struct archive_entry *sparse = NULL;
	archive_entry_linkify(links, &e, &sparse); /* tar's strategy: e stays, maybe a hard link */
	if (archive_write_header(tar, e) < ARCHIVE_WARN)
		return error_set(err, EIO, "packing %s: %s", name, archive_error_string(tar));
	if (type != AE_IFREG || archive_entry_hardlink(e) || archive_entry_size(e) == 0)
		return 0;
	char buf[PACK_BLOCK];
	la_ssize_t n;
	while ((n = archive_read_data(disk, buf, sizeof(buf))) > 0)
		if (archive_write_data(tar, buf, (size_t)n) != n)
			return error_set(err, EIO, "packing %s: %s", name,
					 archive_error_string(tar));
	if (n < 0)
		return error_set(err, EIO, "reading %s: %s", name, archive_error_string(disk));
	return 0;
}

/* Walk rootfs into tar. */
static int pack_tree(const char *rootfs, struct archive *tar, struct error *err)
{
	__attribute__((cleanup(archive_read_freep))) struct archive *disk = archive_read_disk_new();
	struct archive_entry_linkresolver *links = archive_entry_linkresolver_new();
	struct archive_entry *e = archive_entry_new();
	int r = 0;
	if (!disk || !links || !e) {
		r = error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	archive_entry_linkresolver_set_strategy(links, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
	archive_read_disk_set_symlink_physical(disk);
	/* owners by number only: no name of the host's is looked up */
	if (archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_XATTR |
						     ARCHIVE_READDISK_NO_ACL |
						     ARCHIVE_READDISK_NO_FFLAGS) != ARCHIVE_OK ||
	    archive_read_disk_open(disk, rootfs) != ARCHIVE_OK) {
		r = error_set(err, EIO, "%s: %s", rootfs, archive_error_string(disk));
		goto out;
	}
	size_t prefix_len = strlen(rootfs);
	for (;;) {
		archive_entry_clear(e);
		int got = archive_read_next_header2(disk, e);
		if (got == ARCHIVE_EOF)
			break;
		if (got < ARCHIVE_WARN) {
			r = error_set(err, EIO, "%s: %s", rootfs, archive_error_string(disk));
			break;
		}
		if (archive_entry_filetype(e) == AE_IFDIR &&
		    archive_read_disk_descend(disk) != ARCHIVE_OK) {
			r = error_set(err, EIO, "%s: %s", rootfs, archive_error_string(disk));
			break;
		}
		if ((r = pack_entry(disk, tar, links, e, prefix_len, err)) < 0)
			break;
	}
out:
	archive_entry_free(e);
	archive_entry_linkresolver_free(links);
	return r;
}

/* The layer: layer.tmp in layoutfd, its digest and diff_id in hex. */
static int write_layer(const char *rootfs, int layoutfd, char digest[IMAGE_DIGEST_HEX + 1],
		       char diff_id[IMAGE_DIGEST_HEX + 1], uint64_t *ret_size, struct error *err)
{
	_cleanup_close_ int fd =
	    openat(layoutfd, LAYER_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(err, errno, "the layer's file");
	struct gz_out gz_o = {.fd = fd};
	struct tar_out tar_o = {0};
	if (sha256_init(&gz_o.hash) < 0 || sha256_init(&tar_o.hash) < 0) {
		sha256_release(&gz_o.hash);
		return error_set(err, ENOMEM, "out of memory");
	}
	__attribute__((cleanup(archive_write_freep))) struct archive *gz = archive_write_new();
	__attribute__((cleanup(archive_write_freep))) struct archive *tar = archive_write_new();
	struct archive_entry *raw = archive_entry_new();
	int r = 0;
	if (!gz || !tar || !raw) {
		r = error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	archive_entry_set_filetype(raw, AE_IFREG);
	archive_entry_set_pathname(raw, "layer.tar");
	tar_o.gz = gz;
	if (archive_write_set_format_raw(gz) != ARCHIVE_OK ||
	    archive_write_add_filter_gzip(gz) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(gz, 1) != ARCHIVE_OK ||
	    archive_write_open(gz, &gz_o, NULL, gz_write, NULL) != ARCHIVE_OK ||
	    archive_write_header(gz, raw) != ARCHIVE_OK) {
		r = error_set(err, EIO, "gzip: %s", archive_error_string(gz));
		goto out;
	}
	if (archive_write_set_format_pax_restricted(tar) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(tar, 1) != ARCHIVE_OK ||
	    archive_write_open(tar, &tar_o, NULL, tar_write, NULL) != ARCHIVE_OK) {
		r = error_set(err, EIO, "tar: %s", archive_error_string(tar));
		goto out;
	}
	if ((r = pack_tree(rootfs, tar, err)) < 0)
		goto out;
	if (archive_write_close(tar) != ARCHIVE_OK) {
		r = error_set(err, EIO, "tar: %s", archive_error_string(tar));
		goto out;
	}
	if (archive_write_close(gz) != ARCHIVE_OK) {
		r = gz_o.error ? error_set_errno(err, gz_o.error, "the layer")
			       : error_set(err, EIO, "gzip: %s", archive_error_string(gz));
		goto out;
	}
	if (fsync(fd) < 0) {
		r = error_set_errno(err, errno, "the layer");
		goto out;
	}
	sha256_final(&gz_o.hash, digest);
	sha256_final(&tar_o.hash, diff_id);
	*ret_size = gz_o.size;
out:
	archive_entry_free(raw);
	sha256_release(&gz_o.hash);
	sha256_release(&tar_o.hash);
	return r;
}

/* A JSON document as a blob of layoutfd: its digest into hex, its size. */
static int write_blob(int layoutfd, const json_t *doc, char hex[IMAGE_DIGEST_HEX + 1],
		      uint64_t *ret_size, struct error *err)
{
	_cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	struct sha256 h;
	if (sha256_init(&h) < 0)
		return error_set(err, ENOMEM, "out of memory");
	size_t len = strlen(text);
	sha256_update(&h, text, len);
	sha256_final(&h, hex);
	char name[16 + IMAGE_DIGEST_HEX];
	snprintf(name, sizeof(name), "blobs/sha256/%s", hex);
	int r = create_file_at(layoutfd, name, text, 0600);
	if (r < 0)
		return error_set_errno(err, -r, "the layout's %s", name);
	*ret_size = len;
	return 0;
}

static json_t *descriptor(const char *media_type, const char *hex, uint64_t size)
{
	return json_pack("{s:s, s:s+, s:I}", "mediaType", media_type, "digest", IMAGE_DIGEST_PREFIX,
			 hex, "size", (json_int_t)size);
}

int bootstrap_pack(const char *rootfs, int layoutfd, const char *created_by, struct error *err)
{
	if (mkdirat(layoutfd, "blobs", 0700) < 0 || mkdirat(layoutfd, "blobs/sha256", 0700) < 0)
		return error_set_errno(err, errno, "the layout's blobs/");
	char layer[IMAGE_DIGEST_HEX + 1], diff_id[IMAGE_DIGEST_HEX + 1];
	char config[IMAGE_DIGEST_HEX + 1], manifest[IMAGE_DIGEST_HEX + 1];
	uint64_t layer_size = 0, config_size = 0, manifest_size = 0;
	int r = write_layer(rootfs, layoutfd, layer, diff_id, &layer_size, err);
	if (r < 0)
		return r;
	char name[16 + IMAGE_DIGEST_HEX];
	snprintf(name, sizeof(name), "blobs/sha256/%s", layer);
	if (renameat(layoutfd, LAYER_TMP, layoutfd, name) < 0)
		return error_set_errno(err, errno, "the layout's layer");

	char created[32];
	store_format_time(wall_clock_ms(), created);
	_cleanup_json_ json_t *cfg = json_pack(
	    "{s:s, s:s, s:s, s:{s:[s], s:[s]}, s:{s:s, s:[s+]}, s:[{s:s, s:s}]}", "created",
	    created, "architecture", "amd64", "os", "linux", "config", "Env", IMAGE_PATH_ENV, "Cmd",
	    "/bin/bash", "rootfs", "type", "layers", "diff_ids", IMAGE_DIGEST_PREFIX, diff_id,
	    "history", "created", created, "created_by", created_by);
	if (!cfg)
		return error_set(err, ENOMEM, "out of memory");
	if ((r = write_blob(layoutfd, cfg, config, &config_size, err)) < 0)
		return r;
	_cleanup_json_ json_t *man = json_pack(
	    "{s:i, s:s, s:o, s:[o]}", "schemaVersion", 2, "mediaType",
	    "application/vnd.oci.image.manifest.v1+json", "config",
	    descriptor("application/vnd.oci.image.config.v1+json", config, config_size), "layers",
	    descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer, layer_size));
	if (!man)
		return error_set(err, ENOMEM, "out of memory");
	if ((r = write_blob(layoutfd, man, manifest, &manifest_size, err)) < 0)
		return r;
	_cleanup_json_ json_t *index = json_pack(
	    "{s:i, s:s, s:[o]}", "schemaVersion", 2, "mediaType",
	    "application/vnd.oci.image.index.v1+json", "manifests",
	    descriptor("application/vnd.oci.image.manifest.v1+json", manifest, manifest_size));
	_cleanup_free_ char *text = index ? json_dumps(index, JSON_COMPACT) : NULL;
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	if ((r = create_file_at(layoutfd, "index.json", text, 0600)) < 0 ||
	    (r = create_file_at(layoutfd, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}",
				0600)) < 0)
		return error_set_errno(err, -r, "the layout's index.json");
	return 0;
}
