/*
 * import.c - image_import() (store.h): an OCI layout or a docker save,
 * verified blob by blob into the store, unpacked into a tree that is
 * renamed in only when whole, then named in index.json; or, on any
 * failure, nothing of it left.
 */
#include "image/import-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Indexes an index may point through before a manifest. */
#define IMPORT_INDEX_DEPTH_MAX 2
#define IMPORT_BLOCK	       (128u * 1024)
#define ANY_SIZE	       UINT64_MAX

struct import {
	struct image_store *s;
	struct source src;
	int blobsfd, treesfd;
	char (*added)[IMAGE_DIGEST_HEX + 1]; /* blobs this import put in */
	size_t nadded;
	char tree_tmp[64];		     /* trees/.tmp-*, while it is built */
	char tree_new[IMAGE_DIGEST_HEX + 1]; /* the tree this import renamed in */
	uint64_t bytes;			     /* of the image's blobs (IMAGE_BLOBS_MAX) */
};

static bool blob_exists(struct import *imp, const char *hex)
{
	return faccessat(imp->blobsfd, hex, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static int note_added(struct import *imp, const char *hex, struct error *err)
{
	void *v = realloc(imp->added, (imp->nadded + 1) * sizeof(*imp->added));
	if (!v)
		return error_set(err, ENOMEM, "out of memory");
	imp->added = v;
	snprintf(imp->added[imp->nadded++], IMAGE_DIGEST_HEX + 1, "%s", hex);
	return 0;
}

/* What a blob got is what its descriptor said, or -EINVAL naming it. */
static int blob_check(const char *what, const char *got_hex, uint64_t got_size,
		      const char *expect_hex, uint64_t expect_size, struct error *err)
{
	if (expect_hex && strcmp(got_hex, expect_hex) != 0)
		return error_set(err, EINVAL,
				 "%s: its content's digest is sha256:%s, not sha256:%s: refused",
				 what, got_hex, expect_hex);
	if (expect_size != ANY_SIZE && got_size != expect_size)
		return error_set(err, EINVAL, "%s: %llu bytes, not the %llu its descriptor says",
				 what, (unsigned long long)got_size,
				 (unsigned long long)expect_size);
	return 0;
}

/* Copy fd into a temporary of the store, hashing; check; rename it in as its digest. */
static int blob_put_fd(struct import *imp, int fd, const char *what, const char *expect_hex,
		       uint64_t expect_size, char ret_hex[IMAGE_DIGEST_HEX + 1], struct error *err)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/" LAYOUT_IMAGE_TMP "/blob-XXXXXX", image_store_dir(imp->s));
	_cleanup_close_ int out = mkostemp(tmp, O_CLOEXEC);
	if (out < 0)
		return error_set_errno(err, errno, "a temporary blob");
	struct sha256 h = {0};
	uint64_t size = 0;
	_cleanup_free_ char *block = malloc(IMPORT_BLOCK);
	int r = !block || sha256_init(&h) < 0 ? error_set(err, ENOMEM, "out of memory") : 0;
	while (r == 0) {
		ssize_t n = read(fd, block, IMPORT_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = error_set_errno(err, errno, "%s: read", what);
		if (n <= 0)
			break;
		size += (uint64_t)n;
		if (size > IMAGE_BLOBS_MAX)
			r = error_set(err, EFBIG, "%s: larger than %llu bytes", what,
				      (unsigned long long)IMAGE_BLOBS_MAX);
		else if ((r = write_all(out, block, (size_t)n)) < 0)
			r = error_set_errno(err, -r, "%s: write", what);
		else
			sha256_update(&h, block, (size_t)n);
	}
	char hex[IMAGE_DIGEST_HEX + 1];
	if (r < 0)
		sha256_release(&h);
	else
		sha256_final(&h, hex);
	if (r == 0)
		r = blob_check(what, hex, size, expect_hex, expect_size, err);
	if (r == 0 && fsync(out) < 0)
		r = error_set_errno(err, errno, "%s: fsync", what);
	if (r == 0 && !blob_exists(imp, hex)) {
		if (renameat(AT_FDCWD, tmp, imp->blobsfd, hex) < 0)
			r = error_set_errno(err, errno, "%s: rename", what);
		else if ((r = note_added(imp, hex, err)) == 0)
			tmp[0] = '\0';
	}
	if (tmp[0])
		(void)unlink(tmp);
	if (r == 0)
		memcpy(ret_hex, hex, sizeof(hex));
	return r;
}

/* The source's file path as a blob (expect_hex NULL: whatever its digest). */
static int blob_put_path(struct import *imp, const char *path, const char *expect_hex,
			 uint64_t expect_size, char ret_hex[IMAGE_DIGEST_HEX + 1],
			 uint64_t *ret_size, struct error *err)
{
	int r;
	if (imp->src.dirfd >= 0) {
		_cleanup_close_ int fd = -1;
		struct stat st;
		if ((r = source_open_file(&imp->src, path, &fd, err)) < 0)
			return r;
		if (fstat(fd, &st) < 0)
			return error_set_errno(err, errno, "%s", path);
		if ((r = blob_put_fd(imp, fd, path, expect_hex, expect_size, ret_hex, err)) < 0)
			return r;
		*ret_size = (uint64_t)st.st_size;
		return 0;
	}
	/* an archive's file was hashed as it was staged: move it in */
	struct source_file *f = source_find(&imp->src, path);
	if (!f)
		return error_set(err, ENOENT, "the archive has no %s", path);
	if ((r = blob_check(path, f->hex, f->size, expect_hex, expect_size, err)) < 0)
		return r;
	char name[24];
	snprintf(name, sizeof(name), "%zu", (size_t)(f - imp->src.files));
	if (!blob_exists(imp, f->hex)) {
		_cleanup_close_ int fd = openat(imp->src.stagefd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fsync(fd) < 0)
			return error_set_errno(err, errno, "%s (staged)", path);
		if (renameat(imp->src.stagefd, name, imp->blobsfd, f->hex) < 0)
			return error_set_errno(err, errno, "%s: rename", path);
		if ((r = note_added(imp, f->hex, err)) < 0)
			return r;
	}
	memcpy(ret_hex, f->hex, IMAGE_DIGEST_HEX + 1);
	*ret_size = f->size;
	return 0;
}

/* A blob of the source named by its descriptor: "blobs/sha256/<hex>", checked. */
static int blob_put_desc(struct import *imp, const struct image_descriptor *d, struct error *err)
{
	char path[128], hex[IMAGE_DIGEST_HEX + 1];
	uint64_t size;
	imp->bytes += d->size;
	if (imp->bytes > IMAGE_BLOBS_MAX)
		return error_set(err, EFBIG, "the image's blobs are larger than %llu bytes",
				 (unsigned long long)IMAGE_BLOBS_MAX);
	snprintf(path, sizeof(path), "blobs/sha256/%s", image_digest_hex(d->digest));
	return blob_put_path(imp, path, image_digest_hex(d->digest), d->size, hex, &size, err);
}

/* Bytes in memory as a blob (a manifest we wrote). */
static int blob_put_mem(struct import *imp, const char *data, size_t len,
			char ret_hex[IMAGE_DIGEST_HEX + 1], struct error *err)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/" LAYOUT_IMAGE_TMP "/mem-XXXXXX", image_store_dir(imp->s));
	_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "a temporary blob");
	int r = write_all(fd, data, len);
	if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
		r = -errno;
	(void)unlink(tmp);
	if (r < 0)
		return error_set_errno(err, -r, "a temporary blob");
	return blob_put_fd(imp, fd, "the manifest", NULL, ANY_SIZE, ret_hex, err);
}

/* An OCI layout: index.json, down to a manifest; every blob of the image checked in. */
static int import_oci(struct import *imp, struct image_manifest *m, struct image_info *info,
		      char *name, size_t name_size, struct error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct image_descriptor d;
	int r = source_read(&imp->src, LAYOUT_IMAGE_INDEX, IMAGE_INDEX_MAX, &text, &len, err);
	if (r < 0 || (r = image_index_choose(text, len, &d, name, name_size, err)) < 0)
		return r;
	for (int depth = 0; image_media_type_is_index(d.media_type); depth++) {
		if (depth == IMPORT_INDEX_DEPTH_MAX)
			return error_set(err, EINVAL, "indexes nest deeper than %d",
					 IMPORT_INDEX_DEPTH_MAX);
		free(TAKE_PTR(text));
		if ((r = blob_put_desc(imp, &d, err)) < 0 ||
		    (r = store_blob_read(imp->s, d.digest, IMAGE_INDEX_MAX, &text, &len, err)) <
			0 ||
		    (r = image_index_choose(text, len, &d, NULL, 0, err)) < 0)
			return r;
	}
	free(TAKE_PTR(text));
	if ((r = blob_put_desc(imp, &d, err)) < 0 ||
	    (r = store_blob_read(imp->s, d.digest, IMAGE_MANIFEST_MAX, &text, &len, err)) < 0 ||
	    (r = image_manifest_parse(text, len, m, err)) < 0)
		return r;
	snprintf(info->digest, sizeof(info->digest), "%s", d.digest);
	snprintf(info->media_type, sizeof(info->media_type), "%s", d.media_type);
	info->manifest_size = d.size;
	if ((r = blob_put_desc(imp, &m->config, err)) < 0)
		return r;
	for (size_t i = 0; i < m->nlayers; i++)
		if ((r = blob_put_desc(imp, &m->layers[i], err)) < 0)
			return r;
	return 0;
}

/* The hex a docker save's file name promises ("<hex>.json", "blobs/sha256/<hex>"), or NULL. */
static const char *name_hex(const char *path, char out[IMAGE_DIGEST_HEX + 1])
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	char digest[IMAGE_DIGEST_SIZE];
	snprintf(digest, sizeof(digest), IMAGE_DIGEST_PREFIX "%.*s", IMAGE_DIGEST_HEX, base);
	size_t rest = strlen(base) > IMAGE_DIGEST_HEX ? strlen(base) - IMAGE_DIGEST_HEX : 0;
	if (!image_digest_is_valid(digest) ||
	    !(rest == 0 || (rest == 5 && strcmp(base + IMAGE_DIGEST_HEX, ".json") == 0)))
		return NULL;
	memcpy(out, image_digest_hex(digest), IMAGE_DIGEST_HEX + 1);
	return out;
}

/*
 * A docker save: manifest.json names the config and the layers by path.
 * The config is checked against its file name when that is a digest, each
 * layer against the config's rootfs.diff_ids; the OCI manifest the store
 * keeps is written here.
 */
static int import_docker(struct import *imp, struct image_manifest *m, struct image_info *info,
			 char *name, size_t name_size, struct error *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct image_docker_save ds = {0};
	struct image_config cfg = {0};
	char hex[IMAGE_DIGEST_HEX + 1], want[IMAGE_DIGEST_HEX + 1];
	uint64_t size;
	int r = source_read(&imp->src, "manifest.json", IMAGE_MANIFEST_MAX, &text, &len, err);
	if (r < 0 || (r = image_docker_save_parse(text, len, &ds, err)) < 0)
		return r;
	snprintf(name, name_size, "%s", ds.name);
	free(TAKE_PTR(text));
	if ((r = blob_put_path(imp, ds.config, name_hex(ds.config, want), ANY_SIZE, hex, &size,
			       err)) < 0)
		goto out;
	snprintf(m->config.media_type, sizeof(m->config.media_type), IMAGE_MT_OCI_CONFIG);
	snprintf(m->config.digest, sizeof(m->config.digest), IMAGE_DIGEST_PREFIX "%s", hex);
	m->config.size = size;
	imp->bytes += size;
	if ((r = store_blob_read(imp->s, m->config.digest, IMAGE_CONFIG_MAX, &text, &len, err)) <
		0 ||
	    (r = image_config_parse(text, len, &cfg, err)) < 0)
		goto out;
	if (cfg.ndiff_ids != ds.nlayers) {
		r = error_set(err, EINVAL, "the config has %zu diff_ids for %zu layers",
			      cfg.ndiff_ids, ds.nlayers);
		goto out;
	}
	if (!(m->layers = calloc(ds.nlayers ? ds.nlayers : 1, sizeof(*m->layers)))) {
		r = error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < ds.nlayers; i++) {
		if (!image_digest_is_valid(cfg.diff_ids[i])) {
			r = error_set(err, EINVAL, "the config's diff_ids[%zu] is not a digest", i);
			goto out;
		}
		if ((r = blob_put_path(imp, ds.layers[i], image_digest_hex(cfg.diff_ids[i]),
				       ANY_SIZE, hex, &size, err)) < 0)
			goto out;
		imp->bytes += size;
		if (imp->bytes > IMAGE_BLOBS_MAX) {
			r = error_set(err, EFBIG, "the image's blobs are larger than %llu bytes",
				      (unsigned long long)IMAGE_BLOBS_MAX);
			goto out;
		}
		struct image_descriptor *d = &m->layers[m->nlayers++];
		snprintf(d->media_type, sizeof(d->media_type), IMAGE_MT_OCI_LAYER);
		snprintf(d->digest, sizeof(d->digest), IMAGE_DIGEST_PREFIX "%s", hex);
		d->size = size;
	}
	free(TAKE_PTR(text));
	if ((r = image_manifest_json(m, &text, &len)) < 0) {
		r = error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if ((r = blob_put_mem(imp, text, len, hex, err)) < 0)
		goto out;
	snprintf(info->digest, sizeof(info->digest), IMAGE_DIGEST_PREFIX "%s", hex);
	snprintf(info->media_type, sizeof(info->media_type), IMAGE_MT_OCI_MANIFEST);
	info->manifest_size = len;
out:
	image_docker_save_release(&ds);
	image_config_release(&cfg);
	return r;
}

/* Unpack m's layers, in order, into trees/.tmp-*, renamed to trees/<hex> when whole. */
static int build_tree(struct import *imp, const struct image_manifest *m, const char *hex,
		      struct unpack_stats *stats, struct error *err)
{
	if (faccessat(imp->treesfd, hex, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0; /* another image with this config: its tree is ours */
	char path[PATH_MAX];
	snprintf(path, sizeof(path),
		 "%s/" LAYOUT_IMAGE_TREES "/" LAYOUT_IMAGE_TREE_TEMP_PREFIX "XXXXXX",
		 image_store_dir(imp->s));
	if (!mkdtemp(path))
		return error_set_errno(err, errno, "a temporary tree");
	snprintf(imp->tree_tmp, sizeof(imp->tree_tmp), "%s", strrchr(path, '/') + 1);
	_cleanup_close_ int tree = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* the image's / is its root's (uid 0 inside: IMAGE_ID_BASE here); a layer may change it */
	if (tree < 0 || fchown(tree, IMAGE_ID_BASE, IMAGE_ID_BASE) < 0 || fchmod(tree, 0755) < 0)
		return error_set_errno(err, errno, "%s", path);
	const struct unpack_limits lim = {.bytes_max = IMAGE_BYTES_MAX_DEFAULT,
					  .entries_max = IMAGE_ENTRIES_MAX_DEFAULT};
	memset(stats, 0, sizeof(*stats));
	for (size_t i = 0; i < m->nlayers; i++) {
		_cleanup_close_ int fd = openat(imp->blobsfd, image_digest_hex(m->layers[i].digest),
						O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return error_set_errno(err, errno, "layer %s", m->layers[i].digest);
		int r = unpack_layer(fd, tree, &lim, stats, err);
		if (r < 0)
			return error_prefix(err, "layer %zu (%s): ", i, m->layers[i].digest);
	}
	if (syncfs(tree) < 0)
		return error_set_errno(err, errno, "syncfs");
	if (renameat(imp->treesfd, imp->tree_tmp, imp->treesfd, hex) < 0)
		return error_set_errno(err, errno, "tree %s: rename", hex);
	imp->tree_tmp[0] = '\0';
	snprintf(imp->tree_new, sizeof(imp->tree_new), "%s", hex);
	return 0;
}

/* Name the image in index.json (a name it takes from another image leaves that one unnamed). */
static int import_ref(struct import *imp, struct image_info *info, struct error *err)
{
	_cleanup_free_ struct image_info *v = NULL;
	size_t n = 0, k = 0;
	int r = store_index_read(imp->s, &v, &n, err);
	if (r < 0)
		return r;
	struct image_info *out = calloc(n + 1, sizeof(*out));
	if (!out)
		return error_set(err, ENOMEM, "out of memory");
	bool have = false; /* the image already has an entry that stays */
	for (size_t i = 0; i < n; i++) {
		struct image_info e = v[i];
		bool same = strcmp(e.digest, info->digest) == 0;
		if (info->name[0] && strcmp(e.name, info->name) == 0) {
			if (same)
				continue; /* replaced by the new entry */
			e.name[0] = '\0'; /* the name moves */
		}
		if (!e.name[0] && same)
			continue; /* the image is named now, or listed once unnamed */
		bool dup = false; /* an unnamed entry of an image listed already */
		for (size_t j = 0; !e.name[0] && j < k; j++)
			dup |= strcmp(out[j].digest, e.digest) == 0;
		if (!dup)
			out[k++] = e;
		have |= same;
	}
	if (info->name[0] || !have)
		out[k++] = *info;
	if (k > IMAGE_REFS_MAX)
		r = error_set(err, ENOSPC, "the store holds %d images already (rm or prune some)",
			      IMAGE_REFS_MAX);
	else
		r = store_index_write(imp->s, out, k, err);
	free(out);
	return r;
}

/* The bytes of the tree of config: another image's, made before (0: none says). */
static uint64_t tree_bytes(struct image_store *s, const char *config)
{
	_cleanup_free_ struct image_info *v = NULL;
	size_t n = 0;
	if (store_index_read(s, &v, &n, NULL) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].config_digest, config) == 0)
			return v[i].unpacked;
	return 0;
}

/* The image's name: the caller's, or the archive's when it is a full reference. */
static int choose_name(const char *asked, const char *archive, char out[IMAGE_REF_MAX],
		       struct error *err)
{
	out[0] = '\0';
	if (asked)
		return image_ref_normalize(asked, out, IMAGE_REF_MAX, err);
	/* a layout's ref.name is often a bare tag ("latest"): no name then */
	if (archive[0] && (strchr(archive, ':') || strchr(archive, '/')) &&
	    image_ref_normalize(archive, out, IMAGE_REF_MAX, NULL) < 0)
		out[0] = '\0';
	return 0;
}

static int import_run(struct import *imp, const char *path, const char *name,
		      struct image_info *info, struct error *err)
{
	char archive_name[IMAGE_REF_MAX] = "";
	struct image_manifest m = {0};
	struct image_config cfg = {0};
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = source_open(&imp->src, imp->s, path, err);
	if (r < 0)
		return r;
	if (source_has(&imp->src, LAYOUT_IMAGE_INDEX))
		r = import_oci(imp, &m, info, archive_name, sizeof(archive_name), err);
	else if (source_has(&imp->src, "manifest.json"))
		r = import_docker(imp, &m, info, archive_name, sizeof(archive_name), err);
	else
		r = error_set(err, EINVAL,
			      "neither an OCI image layout (index.json) nor a docker save "
			      "archive (manifest.json)");
	if (r == 0)
		r = choose_name(name, archive_name, info->name, err);
	if (r == 0)
		r = store_blob_read(imp->s, m.config.digest, IMAGE_CONFIG_MAX, &text, &len, err);
	if (r == 0)
		r = image_config_parse(text, len, &cfg, err);
	if (r == 0 && ((cfg.os[0] && strcmp(cfg.os, IMAGE_OS) != 0) ||
		       (cfg.arch[0] && strcmp(cfg.arch, IMAGE_ARCH) != 0)))
		r = error_set(err, ENOEXEC, "the image is for %s/%s, not %s/%s", cfg.os, cfg.arch,
			      IMAGE_OS, IMAGE_ARCH);
	if (r == 0) {
		struct unpack_stats stats = {0};
		const char *hex = image_digest_hex(m.config.digest);
		snprintf(info->config_digest, sizeof(info->config_digest), "%s", m.config.digest);
		info->created_ms = cfg.created_ms;
		info->imported_ms = wall_clock_ms();
		info->size = info->manifest_size + m.config.size;
		for (size_t i = 0; i < m.nlayers; i++)
			info->size += m.layers[i].size;
		r = build_tree(imp, &m, hex, &stats, err);
		info->unpacked = stats.bytes;
		if (r == 0 && !imp->tree_new[0])
			info->unpacked = tree_bytes(imp->s, m.config.digest);
	}
	/* the blobs' and the tree's names are durable before a ref names them */
	if (r == 0 && (fsync(imp->blobsfd) < 0 || fsync(imp->treesfd) < 0))
		r = error_set_errno(err, errno, "fsync of the store's directories");
	if (r == 0)
		r = import_ref(imp, info, err);
	image_manifest_release(&m);
	image_config_release(&cfg);
	return r;
}

int image_import(struct image_store *s, const char *path, const char *name, struct image_info *ret,
		 struct error *err)
{
	_cleanup_close_ int lock = -1;
	int r = store_lock(s, &lock, err);
	if (r < 0)
		return r;
	struct import imp = {.s = s, .blobsfd = -1, .treesfd = -1};
	imp.src.dirfd = imp.src.stagefd = -1;
	struct image_info info = {0};
	if ((r = store_open_dir(s, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, &imp.blobsfd,
				err)) == 0 &&
	    (r = store_open_dir(s, LAYOUT_IMAGE_TREES, &imp.treesfd, err)) == 0)
		r = import_run(&imp, path, name, &info, err);
	if (r < 0) {
		/* nothing of it is left: its tree, its blobs (no ref names them) */
		if (imp.tree_tmp[0])
			(void)store_remove_all(imp.treesfd, imp.tree_tmp);
		if (imp.tree_new[0])
			(void)store_remove_all(imp.treesfd, imp.tree_new);
		for (size_t i = 0; i < imp.nadded; i++)
			(void)unlinkat(imp.blobsfd, imp.added[i], 0);
	} else if (ret) {
		*ret = info;
	}
	source_release(&imp.src);
	free(imp.added);
	CLOSE_FD(imp.blobsfd);
	CLOSE_FD(imp.treesfd);
	return r;
}
