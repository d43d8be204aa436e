/*
 * test-image-store.c - the image store (image/store.h): imports of OCI
 * layouts (a directory, a tar) and docker save archives that the test
 * writes itself (libarchive's writer, OpenSSL's SHA-256), their trees'
 * content and owners, what is verified (a blob's digest, its size, a
 * docker layer's diff_id, the platform) and that a refused import leaves
 * nothing; ls, inspect, rm (busy while a use holds the tree), prune.
 * Runs as root (the trees are chowned); skipped otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "image/store.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OK(x)                                                                                      \
	do {                                                                                       \
		struct error e_ = {0};                                                             \
		int r_ = (x);                                                                      \
		if (r_ < 0)                                                                        \
			fail_msg("%s: %d %s", #x, r_, e_.msg);                                     \
	} while (0)

struct fx {
	char state[64];
	struct image_store *s;
	struct error err;
};

/* ---- making images ------------------------------------------------------------ */

/* A file of a layout or an archive: path and bytes. */
struct file {
	char path[160];
	char *data;
	size_t len;
};

struct files {
	struct file v[32];
	size_t n;
};

static void add_file(struct files *fs, const char *path, const char *data, size_t len)
{
	assert_true(fs->n < 32);
	struct file *f = &fs->v[fs->n++];
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->data = malloc(len + 1);
	memcpy(f->data, data, len);
	f->data[len] = '\0';
	f->len = len;
}

static void files_free(struct files *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		free(fs->v[i].data);
	fs->n = 0;
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int n;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* A layer: a tar of (name, content, uid) regular files. */
static char *make_layer(const char *const *names, const char *const *contents, int uid,
			size_t *ret_len)
{
	size_t cap = 1 << 20, used = 0;
	char *buf = malloc(cap);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	struct archive_entry *dir = archive_entry_new(); /* every name is under etc/ */
	archive_entry_set_pathname(dir, "etc");
	archive_entry_set_filetype(dir, AE_IFDIR);
	archive_entry_set_perm(dir, 0755);
	archive_write_header(a, dir);
	archive_entry_free(dir);
	for (size_t i = 0; names[i]; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, names[i]);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_uid(e, uid);
		archive_entry_set_gid(e, uid);
		archive_entry_set_size(e, (la_int64_t)strlen(contents[i]));
		archive_write_header(a, e);
		archive_write_data(a, contents[i], strlen(contents[i]));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	*ret_len = used;
	return buf;
}

/* Write fs under dir (a layout directory). */
static void write_dir(const struct files *fs, const char *dir)
{
	char path[512];
	for (size_t i = 0; i < fs->n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, fs->v[i].path);
		for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fwrite(fs->v[i].data, 1, fs->v[i].len, f);
		fclose(f);
	}
}

/* Write fs as a tar at path. */
static void write_tar(const struct files *fs, const char *path)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < fs->n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, fs->v[i].path);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)fs->v[i].len);
		archive_write_header(a, e);
		archive_write_data(a, fs->v[i].data, fs->v[i].len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
}

/* Add a blob to a layout: blobs/sha256/<hex>; its digest into digest. */
static void add_blob(struct files *fs, const char *data, size_t len, char digest[72])
{
	char hex[65], path[128];
	sha256_hex(data, len, hex);
	snprintf(digest, 72, "sha256:%s", hex);
	snprintf(path, sizeof(path), "blobs/sha256/%s", hex);
	add_file(fs, path, data, len);
}

#define CONFIG_FMT                                                                                 \
	"{\"architecture\":\"%s\",\"os\":\"linux\",\"created\":\"2024-05-01T12:00:00Z\","          \
	"\"config\":{\"Env\":[\"PATH=/usr/bin\",\"WHO=%s\"],\"WorkingDir\":\"/work\","             \
	"\"User\":\"1000:1000\",\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":[\"echo hi\"]},"       \
	"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]}}"

/*
 * An image's blobs into fs (layer with file etc/who = who, uid 1000; its
 * config for arch), the manifest's descriptor into mdesc (JSON).
 */
static void add_image(struct files *fs, const char *who, const char *arch, char *mdesc,
		      size_t mdesc_size)
{
	const char *names[] = {"etc/who", NULL};
	const char *contents[] = {who, NULL};
	size_t llen;
	char *layer = make_layer(names, contents, 1000, &llen);
	char ldigest[72], cdigest[72], mdigest[72], config[1024], manifest[1024];
	add_blob(fs, layer, llen, ldigest);
	snprintf(config, sizeof(config), CONFIG_FMT, arch, who, ldigest);
	add_blob(fs, config, strlen(config), cdigest);
	snprintf(manifest, sizeof(manifest),
		 "{\"schemaVersion\":2,\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST "\","
		 "\"config\":{\"mediaType\":\"" IMAGE_MT_OCI_CONFIG "\",\"digest\":\"%s\","
		 "\"size\":%zu},\"layers\":[{\"mediaType\":\"" IMAGE_MT_OCI_LAYER "\","
		 "\"digest\":\"%s\",\"size\":%zu}]}",
		 cdigest, strlen(config), ldigest, llen);
	add_blob(fs, manifest, strlen(manifest), mdigest);
	snprintf(mdesc, mdesc_size,
		 "{\"mediaType\":\"" IMAGE_MT_OCI_MANIFEST "\",\"digest\":\"%s\",\"size\":%zu,"
		 "\"platform\":{\"os\":\"linux\",\"architecture\":\"%s\"},"
		 "\"annotations\":{\"" IMAGE_ANN_CONTAINERD_NAME "\":\"layout/%s:1\"}}",
		 mdigest, strlen(manifest), arch, who);
	free(layer);
}

/* A layout of the images whose descriptors are given, in that order. */
static void add_index(struct files *fs, const char *d1, const char *d2)
{
	char index[4096];
	snprintf(index, sizeof(index),
		 "{\"schemaVersion\":2,\"mediaType\":\"" IMAGE_MT_OCI_INDEX
		 "\",\"manifests\":[%s%s%s]}",
		 d1, d2 ? "," : "", d2 ? d2 : "");
	add_file(fs, "index.json", index, strlen(index));
	add_file(fs, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
}

static void one_image_layout(struct files *fs, const char *who)
{
	char d[1024];
	add_image(fs, who, "amd64", d, sizeof(d));
	add_index(fs, d, NULL);
}

/* ---- looking at the store --------------------------------------------------------- */

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

/* The store holds nothing at all: no image, blob, tree or temporary. */
static void assert_store_empty(struct fx *f)
{
	assert_int_equal(image_count(f), 0);
	assert_int_equal(count_entries(f, "blobs/sha256"), 0);
	assert_int_equal(count_entries(f, "trees"), 0);
	assert_int_equal(count_entries(f, "tmp"), 0);
}

static void tree_file(struct fx *f, const struct image_info *i, const char *name, char *out,
		      size_t size, struct stat *st)
{
	char path[512];
	assert_int_equal(image_tree_path(f->s, i, path, sizeof(path)), 0);
	size_t plen = strlen(path);
	snprintf(path + plen, sizeof(path) - plen, "/%s", name);
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	size_t n = fread(out, 1, size - 1, fp);
	out[n] = '\0';
	fclose(fp);
	assert_int_equal(lstat(path, st), 0);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->state, sizeof(f->state), "/tmp/test-image-store-XXXXXX");
	assert_non_null(mkdtemp(f->state));
	assert_int_equal(image_store_open(f->state, &f->s, &f->err), 0);
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

/* Write fs into the fixture's directory as a layout dir ("dir") or a tar ("tar"). */
static void stage(struct fx *f, const struct files *fs, const char *kind, char *path, size_t size)
{
	snprintf(path, size, "%s/in-%s", f->state, kind);
	if (strcmp(kind, "dir") == 0) {
		mkdir(path, 0755);
		write_dir(fs, path);
	} else {
		write_tar(fs, path);
	}
}

/* ---- imports ------------------------------------------------------------------------ */

static void check_imported(struct fx *f, const struct image_info *i, const char *who)
{
	char text[64];
	struct stat st;
	tree_file(f, i, "etc/who", text, sizeof(text), &st);
	assert_string_equal(text, who);
	/* the layer's uid 1000 is IMAGE_ID_BASE + 1000 on the host, never root */
	assert_int_equal(st.st_uid, IMAGE_ID_BASE + 1000);
	assert_int_equal(st.st_gid, IMAGE_ID_BASE + 1000);
	assert_true(i->size > 0);
	assert_int_equal(i->unpacked, strlen(who));
	assert_true(image_digest_is_valid(i->digest));
	assert_true(image_digest_is_valid(i->config_digest));
	assert_int_equal(count_entries(f, "tmp"), 0);
}

static void test_import_layout_dir(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256];
	one_image_layout(&fs, "dir");
	stage(f, &fs, "dir", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, "mine", &i, &f->err), 0);
	assert_string_equal(i.name, "mine:latest");
	check_imported(f, &i, "dir");

	/* ls, lookup by name and by digest, inspect: the config as the runtime takes it */
	assert_int_equal(image_count(f), 1);
	struct image_info by;
	assert_int_equal(image_lookup(f->s, "mine", &by, &f->err), 0);
	assert_string_equal(by.digest, i.digest);
	assert_int_equal(image_lookup(f->s, i.digest, &by, &f->err), 0);
	assert_string_equal(by.name, "mine:latest");
	assert_int_equal(image_lookup(f->s, "other", &by, &f->err), -ENOENT);
	struct image_manifest m;
	struct image_config c;
	assert_int_equal(image_inspect(f->s, "mine:latest", &by, &m, &c, &f->err), 0);
	assert_int_equal(m.nlayers, 1);
	assert_int_equal(c.nenv, 2);
	assert_string_equal(c.env[1], "WHO=dir");
	assert_string_equal(c.working_dir, "/work");
	assert_string_equal(c.user, "1000:1000");
	assert_int_equal(c.nentrypoint, 2);
	assert_string_equal(c.cmd[0], "echo hi");
	assert_null(c.cmd[1]);
	assert_int_equal(by.created_ms, 1714564800000LL);
	image_manifest_release(&m);
	image_config_release(&c);
	files_free(&fs);
}

static void test_import_layout_tar_takes_its_name(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256];
	one_image_layout(&fs, "tar");
	stage(f, &fs, "tar", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), 0);
	assert_string_equal(i.name, "layout/tar:1"); /* io.containerd.image.name */
	check_imported(f, &i, "tar");
	/* the same again: one image, no second tree */
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), 0);
	assert_int_equal(image_count(f), 1);
	assert_int_equal(count_entries(f, "trees"), 1);
	files_free(&fs);
}

static void test_index_gives_linux_amd64(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char arm[1024], amd[1024], path[256];
	add_image(&fs, "arm", "arm64", arm, sizeof(arm));
	add_image(&fs, "amd", "amd64", amd, sizeof(amd));
	add_index(&fs, arm, amd);
	stage(f, &fs, "tar", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), 0);
	check_imported(f, &i, "amd");
	files_free(&fs);

	/* an index of other platforms only is refused, and leaves nothing */
	assert_int_equal(image_remove(f->s, i.digest, &f->err), 0);
	add_image(&fs, "arm", "arm64", arm, sizeof(arm));
	add_index(&fs, arm, NULL);
	stage(f, &fs, "tar", path, sizeof(path));
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), -ENOEXEC);
	assert_non_null(strstr(f->err.msg, "arm64"));
	assert_store_empty(f);
	files_free(&fs);
}

static void test_digest_mismatch_leaves_nothing(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256];
	one_image_layout(&fs, "bad");
	/* the layer's bytes change under their name: its digest no longer holds */
	size_t changed = 0;
	for (size_t k = 0; k < fs.n; k++) {
		char *p = memmem(fs.v[k].data, fs.v[k].len, "bad", 3);
		if (p && strncmp(fs.v[k].path, "blobs/", 6) == 0 &&
		    !memmem(fs.v[k].data, fs.v[k].len, "WHO=", 4)) {
			p[0] = 'B';
			changed++;
		}
	}
	assert_int_equal(changed, 1);
	stage(f, &fs, "tar", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, "bad", &i, &f->err), -EINVAL);
	assert_non_null(strstr(f->err.msg, "digest"));
	assert_store_empty(f);
	files_free(&fs);
}

static void test_size_mismatch_refused(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256], d[1024];
	add_image(&fs, "size", "amd64", d, sizeof(d));
	/* the manifest's descriptor says one byte more than the manifest has */
	char *size = strstr(d, "\"size\":");
	long n = strtol(size + 7, NULL, 10);
	char fixed[1024];
	snprintf(fixed, sizeof(fixed), "%.*s\"size\":%ld%s", (int)(size - d), d, n + 1,
		 strchr(size + 7, ','));
	add_index(&fs, fixed, NULL);
	stage(f, &fs, "dir", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, "size", &i, &f->err), -EINVAL);
	assert_non_null(strstr(f->err.msg, "bytes"));
	assert_store_empty(f);
	files_free(&fs);
}

/* A docker save: manifest.json, <hex>.json, <id>/layer.tar; layer_ok false breaks the layer. */
static void docker_save(struct files *fs, bool layer_ok)
{
	const char *names[] = {"etc/who", NULL};
	const char *contents[] = {"docker", NULL};
	size_t llen;
	char *layer = make_layer(names, contents, 1000, &llen);
	char lhex[65], chex[65], config[1024], path[128], manifest[512];
	sha256_hex(layer, llen, lhex);
	char diff[72];
	snprintf(diff, sizeof(diff), "sha256:%s", lhex);
	snprintf(config, sizeof(config), CONFIG_FMT, "amd64", "docker", diff);
	sha256_hex(config, strlen(config), chex);
	snprintf(path, sizeof(path), "%s.json", chex);
	add_file(fs, path, config, strlen(config));
	if (!layer_ok)
		memcpy(memmem(layer, llen, "docker", 6), "DOCKER", 6);
	add_file(fs, "0123abcd/layer.tar", layer, llen);
	snprintf(manifest, sizeof(manifest),
		 "[{\"Config\":\"%s\",\"RepoTags\":[\"saved/app:2\"],"
		 "\"Layers\":[\"0123abcd/layer.tar\"]}]",
		 path);
	add_file(fs, "manifest.json", manifest, strlen(manifest));
	free(layer);
}

static void test_docker_save(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256];
	docker_save(&fs, true);
	stage(f, &fs, "tar", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), 0);
	assert_string_equal(i.name, "saved/app:2");
	check_imported(f, &i, "docker");
	/* the store wrote the OCI manifest it keeps: inspect reads it back */
	struct image_manifest m;
	struct image_config c;
	assert_int_equal(image_inspect(f->s, "saved/app:2", &i, &m, &c, &f->err), 0);
	assert_string_equal(m.layers[0].media_type, IMAGE_MT_OCI_LAYER);
	image_manifest_release(&m);
	image_config_release(&c);
	files_free(&fs);
}

static void test_docker_save_layer_not_its_diff_id(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256];
	docker_save(&fs, false);
	stage(f, &fs, "tar", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), -EINVAL);
	assert_non_null(strstr(f->err.msg, "layer.tar"));
	assert_store_empty(f);
	files_free(&fs);
}

static void test_not_an_image(void **state)
{
	struct fx *f = *state;
	struct files fs = {0};
	char path[256];
	add_file(&fs, "hello", "hi", 2);
	stage(f, &fs, "tar", path, sizeof(path));
	struct image_info i;
	assert_int_equal(image_import(f->s, path, NULL, &i, &f->err), -EINVAL);
	assert_store_empty(f);
	files_free(&fs);
}

/* ---- rm, prune, uses ------------------------------------------------------------------ */

static void import_named(struct fx *f, const char *who, const char *name, struct image_info *i)
{
	struct files fs = {0};
	char path[256];
	one_image_layout(&fs, who);
	stage(f, &fs, "tar", path, sizeof(path));
	assert_int_equal(image_import(f->s, path, name, i, &f->err), 0);
	files_free(&fs);
}

static void test_rm_refused_while_in_use(void **state)
{
	struct fx *f = *state;
	struct image_info i;
	import_named(f, "busy", "busy:1", &i);
	int use = -1;
	assert_int_equal(image_use_begin(f->state, i.config_digest, &use, &f->err), 0);
	assert_int_equal(image_remove(f->s, "busy:1", &f->err), -EBUSY);
	assert_int_equal(image_count(f), 1); /* nothing changed */
	assert_int_equal(image_remove(f->s, i.digest, &f->err), -EBUSY);
	/* prune keeps it too: it is named */
	struct image_prune_stats st;
	assert_int_equal(image_prune(f->s, &st, &f->err), 0);
	assert_int_equal(image_count(f), 1);
	image_use_end(use);
	assert_int_equal(image_remove(f->s, "busy:1", &f->err), 0);
	assert_store_empty(f);
	/* a use of what is gone */
	assert_int_equal(image_use_begin(f->state, i.config_digest, &use, &f->err), -ENOENT);
	assert_int_equal(image_remove(f->s, "busy:1", &f->err), -ENOENT);
}

static void test_rm_one_of_two_names(void **state)
{
	struct fx *f = *state;
	struct image_info i;
	import_named(f, "two", "a:1", &i);
	import_named(f, "two", "b:1", &i);
	assert_int_equal(image_count(f), 2);
	int use = -1;
	assert_int_equal(image_use_begin(f->state, i.config_digest, &use, &f->err), 0);
	/* the image stays (b:1): its name goes, in use or not */
	assert_int_equal(image_remove(f->s, "a:1", &f->err), 0);
	assert_int_equal(image_count(f), 1);
	assert_int_equal(count_entries(f, "trees"), 1);
	image_use_end(use);
}

static void test_prune_removes_unnamed(void **state)
{
	struct fx *f = *state;
	struct image_info old, cur;
	import_named(f, "old", "app:1", &old);
	size_t blobs_one = count_entries(f, "blobs/sha256");
	import_named(f, "new", "app:1", &cur); /* the name moves; the old image stays, unnamed */
	assert_int_equal(image_count(f), 2);
	struct image_info *v = NULL;
	size_t n = 0;
	assert_int_equal(image_list(f->s, &v, &n, &f->err), 0);
	assert_string_equal(v[0].name, "app:1");
	assert_string_equal(v[0].digest, cur.digest);
	assert_string_equal(v[1].name, "");
	free(v);

	/* an unnamed image in use stays */
	int use = -1;
	struct image_prune_stats st;
	assert_int_equal(image_use_begin(f->state, old.config_digest, &use, &f->err), 0);
	assert_int_equal(image_prune(f->s, &st, &f->err), 0);
	assert_int_equal(st.images, 0);
	assert_int_equal(st.busy, 1);
	assert_int_equal(image_count(f), 2);
	image_use_end(use);

	assert_int_equal(image_prune(f->s, &st, &f->err), 0);
	assert_int_equal(st.images, 1);
	assert_int_equal(st.trees, 1);
	assert_int_equal(st.blobs, 3); /* its manifest, config and layer */
	assert_true(st.bytes > 0);
	assert_int_equal(image_count(f), 1);
	assert_int_equal(count_entries(f, "trees"), 1);
	assert_int_equal(count_entries(f, "blobs/sha256"), blobs_one);
	char text[16];
	struct stat sb;
	tree_file(f, &cur, "etc/who", text, sizeof(text), &sb);
	assert_string_equal(text, "new");
}

static void test_open_cleans_leftovers(void **state)
{
	struct fx *f = *state;
	char path[256];
	snprintf(path, sizeof(path), "%s/images/tmp/upload-x", f->state);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/images/trees/.tmp-half", f->state);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/images/trees/.tmp-half/deep", f->state);
	mkdir(path, 0700);
	image_store_free(f->s);
	assert_int_equal(image_store_open(f->state, &f->s, &f->err), 0);
	assert_store_empty(f);
	/* the store is an OCI layout */
	snprintf(path, sizeof(path), "%s/images/oci-layout", f->state);
	assert_int_equal(access(path, R_OK), 0);
}

static void test_remove_all_deep(void **state)
{
	struct fx *f = *state;
	/* deeper than a removal descends: moved up, and removed all the same */
	char path[4096];
	int n = snprintf(path, sizeof(path), "%s/images/trees/.tmp-deep", f->state);
	for (int i = 0; i < 100 && n < 3900; i++) {
		mkdir(path, 0700);
		n += snprintf(path + n, sizeof(path) - (size_t)n, "/d");
	}
	image_store_free(f->s);
	assert_int_equal(image_store_open(f->state, &f->s, &f->err), 0);
	assert_int_equal(count_entries(f, "trees"), 0);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("not root: the image store chowns its trees; skipped\n");
		return 77; /* meson: skipped */
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_import_layout_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_import_layout_tar_takes_its_name, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_index_gives_linux_amd64, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_digest_mismatch_leaves_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_size_mismatch_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_docker_save, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_docker_save_layer_not_its_diff_id, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_not_an_image, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_refused_while_in_use, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rm_one_of_two_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prune_removes_unnamed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_cleans_leftovers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_remove_all_deep, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
