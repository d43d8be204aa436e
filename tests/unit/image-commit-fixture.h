/*
 * image-commit-fixture.h - what test-image-commit.c and
 * test-image-export.c share: a store with a small base image imported
 * ("base:1": etc/who, etc/gone, opt/a, opt/b, keep/x), an upper
 * directory to fill as a sandbox's would be (owned by SBX + the ids
 * inside), and looks at the store and at trees. Static inline helpers,
 * so each program takes what it uses.
 */
#ifndef AGENTBOX_TESTS_IMAGE_COMMIT_FIXTURE_H
#define AGENTBOX_TESTS_IMAGE_COMMIT_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "image/commit.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

/* A sandbox's host ids: inside id N is SBX + N. */
#define SBX 200065536u

struct fx {
	char state[64], upper[96];
	struct image_store *s;
	struct image_info base;
	struct error err;
};

static inline void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int n;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* ---- the base image ----------------------------------------------------------- */

/* path: a directory when content is NULL. */
struct ent {
	const char *path, *content;
};

static const struct ent base_layer[] = {
    {"etc", NULL},  {"etc/who", "base"}, {"etc/gone", "bye"}, {"opt", NULL}, {"opt/a", "a"},
    {"opt/b", "b"}, {"keep", NULL},	 {"keep/x", "x"},     {NULL, NULL},
};

static inline char *make_layer(const struct ent *v, size_t *ret_len)
{
	size_t cap = 1 << 20, used = 0;
	char *buf = malloc(cap);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	for (; v->path; v++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, v->path);
		archive_entry_set_filetype(e, v->content ? AE_IFREG : AE_IFDIR);
		archive_entry_set_perm(e, v->content ? 0644 : 0755);
		if (v->content)
			archive_entry_set_size(e, (la_int64_t)strlen(v->content));
		archive_write_header(a, e);
		if (v->content)
			archive_write_data(a, v->content, strlen(v->content));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	*ret_len = used;
	return buf;
}

static inline void write_at(const char *dir, const char *name, const char *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* blobs/sha256/<hex> of data under dir; "sha256:<hex>" into digest. */
static inline void put_blob(const char *dir, const char *data, size_t len, char digest[72])
{
	char hex[65], name[128];
	sha256_hex(data, len, hex);
	snprintf(digest, 72, "sha256:%s", hex);
	snprintf(name, sizeof(name), "blobs/sha256/%s", hex);
	write_at(dir, name, data, len);
}

static inline void import_base(struct fx *f)
{
	char dir[128], sub[160], ld[72], cd[72], md[72], config[1024], manifest[1024], index[512];
	snprintf(dir, sizeof(dir), "%s/base", f->state);
	mkdir(dir, 0755);
	snprintf(sub, sizeof(sub), "%s/blobs", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/blobs/sha256", dir);
	mkdir(sub, 0755);
	size_t llen;
	char *layer = make_layer(base_layer, &llen);
	put_blob(dir, layer, llen, ld);
	free(layer);
	snprintf(config, sizeof(config),
		 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"A=1\"]},"
		 "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]},"
		 "\"history\":[{\"created_by\":\"test\"}]}",
		 ld); /* an uncompressed layer: its digest is its diff_id */
	put_blob(dir, config, strlen(config), cd);
	snprintf(manifest, sizeof(manifest),
		 "{\"schemaVersion\":2,\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST "\","
		 "\"config\":{\"mediaType\":\"" IMAGE_MT_OCI_CONFIG "\",\"digest\":\"%s\","
		 "\"size\":%zu},\"layers\":[{\"mediaType\":\"" IMAGE_MT_OCI_LAYER "\","
		 "\"digest\":\"%s\",\"size\":%zu}]}",
		 cd, strlen(config), ld, llen);
	put_blob(dir, manifest, strlen(manifest), md);
	snprintf(index, sizeof(index),
		 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST
		 "\",\"digest\":\"%s\",\"size\":%zu}]}",
		 md, strlen(manifest));
	write_at(dir, "index.json", index, strlen(index));
	write_at(dir, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	assert_int_equal(image_import(f->s, dir, "base:1", &f->base, &f->err), 0);
}

/* ---- the upper directory ------------------------------------------------------ */

static inline void up_path(struct fx *f, const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", f->upper, name);
}

static inline void up_dir(struct fx *f, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	char p[256];
	up_path(f, name, p, sizeof(p));
	assert_int_equal(mkdir(p, mode), 0);
	assert_int_equal(chmod(p, mode), 0);
	assert_int_equal(lchown(p, uid, gid), 0);
}

static inline void up_file(struct fx *f, const char *name, const char *data, mode_t mode, uid_t uid)
{
	char p[256];
	up_path(f, name, p, sizeof(p));
	write_at(f->upper, name, data, strlen(data));
	assert_int_equal(chmod(p, mode), 0);
	assert_int_equal(lchown(p, uid, uid), 0);
}

/* The upper of a sandbox of the base that changed things (see the top). */
static inline void make_upper(struct fx *f)
{
	char p[256], q[256];
	up_dir(f, "etc", 0755, SBX, SBX);
	up_file(f, "etc/new", "new", 0640, SBX + 1000);
	up_path(f, "etc/gone", p, sizeof(p)); /* overlayfs's whiteout */
	assert_int_equal(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	up_path(f, "etc/link", p, sizeof(p));
	assert_int_equal(symlink("new", p), 0);
	assert_int_equal(lchown(p, SBX + 1000, SBX + 1000), 0);
	up_file(f, "etc/h1", "hard", 0644, SBX);
	up_path(f, "etc/h1", p, sizeof(p));
	up_path(f, "etc/h2", q, sizeof(q));
	assert_int_equal(link(p, q), 0);
	up_dir(f, "opt", 0755, SBX, SBX); /* opaque: hides the base's opt/a, opt/b */
	up_path(f, "opt", p, sizeof(p));
	assert_int_equal(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
	up_file(f, "opt/c", "c", 0644, SBX);
	up_dir(f, "newdir", 0750, SBX + 5, SBX + 6);
	up_path(f, "newdir/null", p, sizeof(p)); /* a device: dropped */
	assert_int_equal(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
	up_path(f, "escape", p, sizeof(p)); /* a symlink out: kept as one, never followed */
	assert_int_equal(symlink("/", p), 0);
	assert_int_equal(lchown(p, SBX, SBX), 0);
}

static inline int open_upper(struct fx *f)
{
	int fd = open(f->upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* ---- looking at the store ------------------------------------------------------ */

static inline size_t count_entries(struct fx *f, const char *sub)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/images/%s", f->state, sub);
	DIR *d = opendir(path);
	assert_non_null(d);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static inline size_t image_count(struct fx *f)
{
	struct image_info *v = NULL;
	size_t n = 0;
	assert_int_equal(image_list(f->s, &v, &n, &f->err), 0);
	free(v);
	return n;
}

/* What the store holds: images, blobs, trees, temporaries. */
struct census {
	size_t images, blobs, trees, tmp;
};

static inline struct census census(struct fx *f)
{
	return (struct census){image_count(f), count_entries(f, "blobs/sha256"),
			       count_entries(f, "trees"), count_entries(f, "tmp")};
}

static inline void assert_census(struct fx *f, struct census want)
{
	struct census got = census(f);
	assert_int_equal(got.images, want.images);
	assert_int_equal(got.blobs, want.blobs);
	assert_int_equal(got.trees, want.trees);
	assert_int_equal(got.tmp, 0);
}

static inline void tree_path(struct fx *f, const struct image_info *i, const char *name, char *out,
			     size_t size)
{
	char tree[512];
	assert_int_equal(image_tree_path(f->s, i, tree, sizeof(tree)), 0);
	snprintf(out, size, "%s/%s", tree, name);
}

static inline void assert_tree_file(struct fx *f, const struct image_info *i, const char *name,
				    const char *want, struct stat *st)
{
	char p[640], text[64] = "";
	tree_path(f, i, name, p, sizeof(p));
	FILE *fp = fopen(p, "r");
	if (!fp)
		fail_msg("%s is not in the tree", name);
	size_t n = fread(text, 1, sizeof(text) - 1, fp);
	text[n] = '\0';
	fclose(fp);
	assert_string_equal(text, want);
	assert_int_equal(lstat(p, st), 0);
}

static inline bool tree_has(struct fx *f, const struct image_info *i, const char *name)
{
	char p[640];
	struct stat st;
	tree_path(f, i, name, p, sizeof(p));
	return lstat(p, &st) == 0;
}

/* The SHA-256 of blob digest uncompressed (libarchive's raw reader): a diff_id. */
static inline void blob_diff_id(struct fx *f, const char *digest, char out[72])
{
	char path[256];
	snprintf(path, sizeof(path), "%s/images/blobs/sha256/%s", f->state, digest + 7);
	struct archive *a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_format_raw(a);
	assert_int_equal(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	assert_int_equal(archive_read_next_header(a, &e), ARCHIVE_OK);
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	char buf[65536];
	la_ssize_t n;
	while ((n = archive_read_data(a, buf, sizeof(buf))) > 0)
		EVP_DigestUpdate(h, buf, (size_t)n);
	assert_int_equal(n, 0);
	unsigned char md[32];
	unsigned int len;
	EVP_DigestFinal_ex(h, md, &len);
	EVP_MD_CTX_free(h);
	archive_read_free(a);
	int k = snprintf(out, 72, "sha256:");
	for (int i = 0; i < 32; i++)
		k += snprintf(out + k, 72 - (size_t)k, "%02x", md[i]);
}

/* ---- fixtures ------------------------------------------------------------------ */

static inline int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static inline int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->state, sizeof(f->state), "/tmp/test-image-commit-XXXXXX");
	assert_non_null(mkdtemp(f->state));
	snprintf(f->upper, sizeof(f->upper), "%s/upper", f->state);
	assert_int_equal(mkdir(f->upper, 0755), 0);
	assert_int_equal(image_store_open(f->state, &f->s, &f->err), 0);
	import_base(f);
	*state = f;
	return 0;
}

static inline int teardown(void **state)
{
	struct fx *f = *state;
	image_store_free(f->s);
	assert_int_equal(nftw(f->state, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
	free(f);
	return 0;
}

#endif
