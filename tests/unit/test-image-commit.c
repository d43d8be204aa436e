/*
 * test-image-commit.c - image_commit() and image_export() (image/
 * commit.h): an overlayfs upper directory the test makes itself (files,
 * a directory, a symlink, a hard link pair, a whiteout, an opaque
 * directory, owned by a sandbox's host ids) committed on top of a small
 * image it imports; the new image's tree, owners and config; a layer
 * past its limits, or a file not the sandbox's, refused with nothing
 * left; an export imported again into another store gives the same
 * manifest digest; and the markers a real overlayfs (userxattr, as the
 * runtime mounts it) writes in its upper. Runs as root (trees are chowned, whiteouts are
 * character devices, trusted.* xattrs); skipped otherwise.
 */
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

static void sha256_hex(const void *data, size_t len, char hex[65])
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

static char *make_layer(const struct ent *v, size_t *ret_len)
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

static void write_at(const char *dir, const char *name, const char *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* blobs/sha256/<hex> of data under dir; "sha256:<hex>" into digest. */
static void put_blob(const char *dir, const char *data, size_t len, char digest[72])
{
	char hex[65], name[128];
	sha256_hex(data, len, hex);
	snprintf(digest, 72, "sha256:%s", hex);
	snprintf(name, sizeof(name), "blobs/sha256/%s", hex);
	write_at(dir, name, data, len);
}

static void import_base(struct fx *f)
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

static void up_path(struct fx *f, const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", f->upper, name);
}

static void up_dir(struct fx *f, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	char p[256];
	up_path(f, name, p, sizeof(p));
	assert_int_equal(mkdir(p, mode), 0);
	assert_int_equal(chmod(p, mode), 0);
	assert_int_equal(lchown(p, uid, gid), 0);
}

static void up_file(struct fx *f, const char *name, const char *data, mode_t mode, uid_t uid)
{
	char p[256];
	up_path(f, name, p, sizeof(p));
	write_at(f->upper, name, data, strlen(data));
	assert_int_equal(chmod(p, mode), 0);
	assert_int_equal(lchown(p, uid, uid), 0);
}

/* The upper of a sandbox of the base that changed things (see the top). */
static void make_upper(struct fx *f)
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

static int open_upper(struct fx *f)
{
	int fd = open(f->upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* ---- looking at the store ------------------------------------------------------ */

static size_t count_entries(struct fx *f, const char *sub)
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

static size_t image_count(struct fx *f)
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

static struct census census(struct fx *f)
{
	return (struct census){image_count(f), count_entries(f, "blobs/sha256"),
			       count_entries(f, "trees"), count_entries(f, "tmp")};
}

static void assert_census(struct fx *f, struct census want)
{
	struct census got = census(f);
	assert_int_equal(got.images, want.images);
	assert_int_equal(got.blobs, want.blobs);
	assert_int_equal(got.trees, want.trees);
	assert_int_equal(got.tmp, 0);
}

static void tree_path(struct fx *f, const struct image_info *i, const char *name, char *out,
		      size_t size)
{
	char tree[512];
	assert_int_equal(image_tree_path(f->s, i, tree, sizeof(tree)), 0);
	snprintf(out, size, "%s/%s", tree, name);
}

static void assert_tree_file(struct fx *f, const struct image_info *i, const char *name,
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

static bool tree_has(struct fx *f, const struct image_info *i, const char *name)
{
	char p[640];
	struct stat st;
	tree_path(f, i, name, p, sizeof(p));
	return lstat(p, &st) == 0;
}

/* The SHA-256 of blob digest uncompressed (libarchive's raw reader): a diff_id. */
static void blob_diff_id(struct fx *f, const char *digest, char out[72])
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

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
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

static int teardown(void **state)
{
	struct fx *f = *state;
	image_store_free(f->s);
	assert_int_equal(nftw(f->state, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
	free(f);
	return 0;
}

/* ---- commits ------------------------------------------------------------------- */

static void test_commit_upper(void **state)
{
	struct fx *f = *state;
	make_upper(f);
	int fd = open_upper(f);
	struct image_info ni;
	struct image_commit_stats st;
	struct image_commit_opts o = {.comment = "installed things", .author = "test"};
	/* the base as a sandbox keeps it: its config's digest */
	int r =
	    image_commit(f->s, f->base.config_digest, fd, SBX, "committed", &o, &ni, &st, &f->err);
	close(fd);
	if (r < 0)
		fail_msg("image_commit: %d %s", r, f->err.msg);
	assert_string_equal(ni.name, "committed:latest");
	assert_string_not_equal(ni.digest, f->base.digest);
	assert_int_equal(st.whiteouts, 2); /* etc/gone, opt's opaque marker */
	assert_int_equal(st.dropped, 1);   /* newdir/null */
	assert_int_equal(count_entries(f, "tmp"), 0);

	struct stat sb, sb2;
	assert_tree_file(f, &ni, "etc/who", "base", &sb); /* the base's, kept */
	assert_tree_file(f, &ni, "keep/x", "x", &sb);
	assert_tree_file(f, &ni, "etc/new", "new", &sb);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE + 1000); /* inside 1000, as the image's */
	assert_int_equal(sb.st_gid, IMAGE_ID_BASE + 1000);
	assert_int_equal(sb.st_mode & 07777, 0640);
	assert_false(tree_has(f, &ni, "etc/gone")); /* the whiteout removed it */
	assert_false(tree_has(f, &ni, "opt/a"));    /* the opaque dir hid the base's */
	assert_false(tree_has(f, &ni, "opt/b"));
	assert_tree_file(f, &ni, "opt/c", "c", &sb);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE);
	assert_tree_file(f, &ni, "etc/h1", "hard", &sb);
	assert_tree_file(f, &ni, "etc/h2", "hard", &sb2);
	assert_int_equal(sb.st_ino, sb2.st_ino); /* still one file */
	char p[640], target[64];
	tree_path(f, &ni, "etc/link", p, sizeof(p));
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	assert_int_equal(n, 3);
	target[n] = '\0';
	assert_string_equal(target, "new");
	tree_path(f, &ni, "escape", p, sizeof(p));
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	tree_path(f, &ni, "newdir", p, sizeof(p));
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0750);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE + 5);
	assert_int_equal(sb.st_gid, IMAGE_ID_BASE + 6);
	assert_false(tree_has(f, &ni, "newdir/null"));

	/* the config: one more diff_id, the layer's uncompressed digest */
	struct image_info ii;
	struct image_manifest m = {0};
	struct image_config c = {0};
	assert_int_equal(image_inspect(f->s, "committed", &ii, &m, &c, &f->err), 0);
	assert_int_equal(c.ndiff_ids, 2);
	assert_int_equal(m.nlayers, 2);
	assert_string_equal(m.layers[1].media_type, "application/vnd.oci.image.layer.v1.tar+gzip");
	char diff[72];
	blob_diff_id(f, m.layers[1].digest, diff);
	assert_string_equal(c.diff_ids[1], diff);
	assert_string_equal(c.diff_ids[0], m.layers[0].digest);
	assert_true(c.created_ms > 0);
	image_manifest_release(&m);
	image_config_release(&c);
	/* the base is untouched */
	assert_true(tree_has(f, &f->base, "etc/gone"));
	assert_true(tree_has(f, &f->base, "opt/a"));
	assert_int_equal(image_count(f), 2);
}

static void test_commit_refusals_leave_nothing(void **state)
{
	struct fx *f = *state;
	struct census before = census(f);
	char p[256];
	up_dir(f, "d", 0755, SBX, SBX);
	/* a bomb: one sparse file past the bytes' limit, stopped at its header */
	up_path(f, "d/big", p, sizeof(p));
	int big = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(big >= 0);
	assert_int_equal(ftruncate(big, (off_t)IMAGE_COMMIT_BYTES_MAX + 1), 0);
	assert_int_equal(fchown(big, SBX, SBX), 0);
	close(big);
	int fd = open_upper(f);
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "bomb", NULL, NULL, NULL, &f->err),
			 -EFBIG);
	assert_non_null(strstr(f->err.msg, "d/big"));
	assert_census(f, before);
	assert_int_equal(unlink(p), 0);

	/* too many entries */
	for (int i = 0; i < 5; i++) {
		char name[32];
		snprintf(name, sizeof(name), "d/f%d", i);
		up_file(f, name, "x", 0644, SBX);
	}
	struct image_commit_opts o = {.entries_max = 4};
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "many", &o, NULL, NULL, &f->err),
			 -EFBIG);
	assert_census(f, before);
	o.entries_max = 6; /* d and its five: fits */
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "many", &o, NULL, NULL, &f->err), 0);
	before.images++, before.blobs += 3, before.trees++; /* manifest, config, layer */
	assert_census(f, before);

	/* a file that is not the sandbox's (the host's root): refused, not guessed */
	up_file(f, "d/root", "r", 0644, 0);
	assert_int_equal(image_commit(f->s, "base:1", fd, SBX, "root", NULL, NULL, NULL, &f->err),
			 -ERANGE);
	assert_non_null(strstr(f->err.msg, "d/root"));
	assert_census(f, before);
	/* the same upper seen with another sandbox's base: every owner is outside */
	assert_int_equal(
	    image_commit(f->s, "base:1", fd, SBX + 65536, "x", NULL, NULL, NULL, &f->err), -ERANGE);
	/* a base that is not there */
	assert_int_equal(image_commit(f->s, "nope:1", fd, SBX, "x", NULL, NULL, NULL, &f->err),
			 -ENOENT);
	assert_census(f, before);
	close(fd);
}

/* ---- export -------------------------------------------------------------------- */

/* The names of the tar at path, one per line, into out. */
static void tar_names(const char *path, char *out, size_t size)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	out[0] = '\0';
	while (archive_read_next_header(a, &e) == ARCHIVE_OK)
		n += (size_t)snprintf(out + n, size - n, "%s\n", archive_entry_pathname(e));
	archive_read_free(a);
}

static void test_export_imports_back(void **state)
{
	struct fx *f = *state;
	make_upper(f);
	int fd = open_upper(f);
	struct image_info ni;
	assert_int_equal(
	    image_commit(f->s, "base:1", fd, SBX, "t/made:2", NULL, &ni, NULL, &f->err), 0);
	close(fd);
	char path[128], names[4096];
	snprintf(path, sizeof(path), "%s/export.tar", f->state);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0);
	struct image_info ei;
	assert_int_equal(image_export(f->s, "t/made:2", out, &ei, &f->err), 0);
	close(out);
	assert_string_equal(ei.digest, ni.digest);
	tar_names(path, names, sizeof(names));
	assert_non_null(strstr(names, "oci-layout\n"));
	assert_non_null(strstr(names, "index.json\n"));
	char blob[128];
	snprintf(blob, sizeof(blob), "blobs/sha256/%s\n", ni.digest + 7);
	assert_non_null(strstr(names, blob));
	snprintf(blob, sizeof(blob), "blobs/sha256/%s\n", ni.config_digest + 7);
	assert_non_null(strstr(names, blob));

	/* into another store: the same image, by its name */
	char state2[64];
	snprintf(state2, sizeof(state2), "%s/other", f->state);
	assert_int_equal(mkdir(state2, 0700), 0);
	struct image_store *s2 = NULL;
	struct image_info back;
	assert_int_equal(image_store_open(state2, &s2, &f->err), 0);
	int r = image_import(s2, path, NULL, &back, &f->err);
	if (r < 0)
		fail_msg("import of the export: %s", f->err.msg);
	assert_string_equal(back.digest, ni.digest);
	assert_string_equal(back.config_digest, ni.config_digest);
	assert_string_equal(back.name, "t/made:2");
	image_store_free(s2);

	/* an image that is not there */
	out = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_int_equal(image_export(f->s, "nope:1", out, NULL, &f->err), -ENOENT);
	close(out);
}

/* ---- a real overlay ------------------------------------------------------------ */

static void in_dir(const char *dir, const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", dir, name);
}

/*
 * The runtime's overlay (userxattr) over the base's tree, changed through
 * the mount: the kernel's own whiteout and opaque directory in the upper.
 * The lower is not id-mapped here: copied-up directories keep the image's
 * host ids, so the commit's id base is IMAGE_ID_BASE.
 */
static void test_commit_real_overlay(void **state)
{
	struct fx *f = *state;
	char data[128], lower[640], opts[1024], p[256];
	snprintf(data, sizeof(data), "%s/ovl", f->state);
	assert_int_equal(mkdir(data, 0755), 0);
	assert_int_equal(mount("tmpfs", data, "tmpfs", 0, "size=16m"), 0);
	const char *dirs[] = {"upper", "work", "mnt"};
	for (size_t i = 0; i < 3; i++) {
		in_dir(data, dirs[i], p, sizeof(p));
		assert_int_equal(mkdir(p, 0755), 0);
	}
	tree_path(f, &f->base, "", lower, sizeof(lower));
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,userxattr",
		 lower, data, data);
	char mnt[160], upper[160];
	in_dir(data, "mnt", mnt, sizeof(mnt));
	in_dir(data, "upper", upper, sizeof(upper));
	if (mount("overlay", mnt, "overlay", 0, opts) < 0) {
		int e = errno;
		umount2(data, MNT_DETACH);
		if (e == ENODEV || e == EINVAL)
			skip(); /* no overlayfs, or no userxattr (before Linux 5.11) */
		fail_msg("mount overlay: %s", strerror(e));
	}
	in_dir(mnt, "etc/gone", p, sizeof(p));
	assert_int_equal(unlink(p), 0); /* a whiteout */
	in_dir(mnt, "opt/a", p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	in_dir(mnt, "opt/b", p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	in_dir(mnt, "opt", p, sizeof(p));
	assert_int_equal(rmdir(p), 0);
	assert_int_equal(mkdir(p, 0755), 0); /* a new, opaque, directory */
	assert_int_equal(chown(p, IMAGE_ID_BASE, IMAGE_ID_BASE), 0);
	write_at(mnt, "opt/c", "c", 1);
	in_dir(mnt, "opt/c", p, sizeof(p));
	assert_int_equal(chown(p, IMAGE_ID_BASE + 7, IMAGE_ID_BASE + 7), 0);
	write_at(mnt, "etc/who", "changed", 7); /* a copy-up */
	assert_int_equal(umount2(mnt, 0), 0);
	char v[4] = "";
	in_dir(upper, "opt", p, sizeof(p));
	assert_int_equal(getxattr(p, "user.overlay.opaque", v, sizeof(v)), 1);

	int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct image_info ni;
	struct image_commit_stats st;
	int r = image_commit(f->s, "base:1", fd, IMAGE_ID_BASE, "real:1", NULL, &ni, &st, &f->err);
	close(fd);
	umount2(data, MNT_DETACH);
	if (r < 0)
		fail_msg("image_commit: %d %s", r, f->err.msg);
	assert_int_equal(st.whiteouts, 2);
	struct stat sb;
	assert_false(tree_has(f, &ni, "etc/gone"));
	assert_false(tree_has(f, &ni, "opt/a"));
	assert_tree_file(f, &ni, "opt/c", "c", &sb);
	assert_int_equal(sb.st_uid, IMAGE_ID_BASE + 7);
	assert_tree_file(f, &ni, "etc/who", "changed", &sb);
	assert_tree_file(f, &ni, "keep/x", "x", &sb);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("not root: a commit's trees are chowned, its whiteouts are devices; "
		       "skipped\n");
		return 77; /* meson: skipped */
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_commit_upper, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_refusals_leave_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_export_imports_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_real_overlay, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
