/*
 * store.c - the image store (store.h): its directory, its refs
 * (index.json), lookups, the removal of a tree; rm and prune are
 * remove.c's.
 */
#include "image/store-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "core/layout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char oci_layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}\n";

int store_open_dir(struct image_store *s, const char *name, int *ret_fd, struct error *err)
{
	int fd = openat(s->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "%s/%s", s->dir, name);
	*ret_fd = fd;
	return 0;
}

int store_lock(struct image_store *s, int *ret_fd, struct error *err)
{
	int fd =
	    openat(s->dirfd, LAYOUT_IMAGE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(err, errno, "%s/" LAYOUT_IMAGE_LOCK, s->dir);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			return error_set_errno(err, e, "the image store's lock");
		}
	}
	*ret_fd = fd;
	return 0;
}

void store_format_time(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char day[24];
	gmtime_r(&t, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 32, "%s.%03dZ", day, (int)(ms % 1000));
}

int store_remove_all(int parentfd, const char *name)
{
	return remove_tree_at(parentfd, name);
}

int store_tree_remove(struct image_store *s, const char *hex, struct error *err)
{
	_cleanup_close_ int trees = -1;
	int r = store_open_dir(s, LAYOUT_IMAGE_TREES, &trees, err);
	if (r < 0)
		return r;
	_cleanup_close_ int fd =
	    openat(trees, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : error_set_errno(err, errno, "tree %s", hex);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? error_set(err, EBUSY, "the image is in use")
					    : error_set_errno(err, errno, "tree %s: lock", hex);
	char gone[96];
	snprintf(gone, sizeof(gone), LAYOUT_IMAGE_TREE_TEMP_PREFIX "rm-%s", hex);
	(void)store_remove_all(trees, gone); /* one a crash left */
	if (renameat(trees, hex, trees, gone) < 0)
		return error_set_errno(err, errno, "tree %s: rename", hex);
	CLOSE_FD(fd); /* a use that opened it before the rename now sees it gone */
	if ((r = store_remove_all(trees, gone)) < 0)
		return error_set_errno(err, -r, "tree %s: remove", hex);
	return 0;
}

/* Write oci-layout and an empty index.json where they are missing. */
static int store_init_files(struct image_store *s, struct error *err)
{
	if (faccessat(s->dirfd, LAYOUT_IMAGE_OCI_LAYOUT, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
	    create_file_at(s->dirfd, LAYOUT_IMAGE_OCI_LAYOUT, oci_layout, 0600) < 0)
		return error_set_errno(err, errno, "%s/" LAYOUT_IMAGE_OCI_LAYOUT, s->dir);
	if (faccessat(s->dirfd, LAYOUT_IMAGE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	return store_index_write(s, NULL, 0, err);
}

/* Remove what imports a crash cut short: everything in tmp/, trees/.tmp-*. Under the lock. */
static void store_clean(struct image_store *s)
{
	const char *dirs[] = {LAYOUT_IMAGE_TMP, LAYOUT_IMAGE_TREES};
	size_t plen = strlen(LAYOUT_IMAGE_TREE_TEMP_PREFIX);
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		_cleanup_close_ int fd = -1;
		if (store_open_dir(s, dirs[i], &fd, NULL) < 0)
			continue;
		int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
		if (!d) {
			CLOSE_FD(dup_fd);
			continue;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			const char *n = de->d_name;
			if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
				continue;
			if (i == 0 || strncmp(n, LAYOUT_IMAGE_TREE_TEMP_PREFIX, plen) == 0)
				(void)store_remove_all(fd, n);
		}
		closedir(d);
	}
}

int image_store_open(const char *state_dir, struct image_store **ret, struct error *err)
{
	_cleanup_free_ struct image_store *s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "out of memory");
	s->dirfd = -1;
	if (snprintf(s->state_dir, sizeof(s->state_dir), "%s", state_dir) >=
		(int)sizeof(s->state_dir) ||
	    layout_images_dir(s->dir, sizeof(s->dir), state_dir) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	if (mkdir(s->dir, 0700) < 0 && errno != EEXIST)
		return error_set_errno(err, errno, "%s", s->dir);
	s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dirfd < 0)
		return error_set_errno(err, errno, "%s", s->dir);
	const char *dirs[] = {LAYOUT_IMAGE_BLOBS, LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256,
			      LAYOUT_IMAGE_TREES, LAYOUT_IMAGE_TMP};
	int r = 0;
	for (size_t i = 0; i < ELEMENTSOF(dirs) && r == 0; i++)
		if (mkdirat(s->dirfd, dirs[i], 0700) < 0 && errno != EEXIST)
			r = error_set_errno(err, errno, "%s/%s", s->dir, dirs[i]);
	int lock = -1;
	if (r == 0 && (r = store_lock(s, &lock, err)) == 0) {
		r = store_init_files(s, err);
		if (r == 0)
			store_clean(s);
		close(lock);
	}
	if (r < 0) {
		close(s->dirfd);
		return r;
	}
	*ret = TAKE_PTR(s);
	return 0;
}

void image_store_free(struct image_store *s)
{
	if (!s)
		return;
	CLOSE_FD(s->dirfd);
	free(s);
}

const char *image_store_dir(const struct image_store *s)
{
	return s->dir;
}

int image_store_tmp(struct image_store *s, char *path, size_t size, int *ret_fd, struct error *err)
{
	int n = snprintf(path, size, "%s/" LAYOUT_IMAGE_TMP "/upload-XXXXXX", s->dir);
	if (n < 0 || (size_t)n >= size)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "a temporary file in %s", s->dir);
	*ret_fd = fd;
	return 0;
}

int image_tree_path(const struct image_store *s, const struct image_info *info, char *buf,
		    size_t size)
{
	if (!image_digest_is_valid(info->config_digest))
		return -EINVAL;
	return layout_image_tree(buf, size, s->state_dir, image_digest_hex(info->config_digest));
}

int store_blob_read(struct image_store *s, const char *digest, size_t max, char **ret,
		    size_t *ret_len, struct error *err)
{
	char name[128];
	snprintf(name, sizeof(name), LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256 "/%s",
		 image_digest_hex(digest));
	_cleanup_close_ int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return error_set_errno(err, errno, "blob %s", digest);
	if ((uint64_t)st.st_size > max)
		return error_set(err, E2BIG, "blob %s: larger than %zu bytes", digest, max);
	_cleanup_free_ char *b = malloc((size_t)st.st_size + 1);
	if (!b)
		return error_set(err, ENOMEM, "out of memory");
	ssize_t n = read_all(fd, b, (size_t)st.st_size);
	if (n != st.st_size)
		return error_set_errno(err, n < 0 ? (int)-n : EIO, "blob %s: read", digest);
	b[n] = '\0';
	*ret = TAKE_PTR(b);
	*ret_len = (size_t)n;
	return 0;
}

/* ---- index.json ------------------------------------------------------------- */

static const char *ann(json_t *a, const char *key)
{
	json_t *v = json_object_get(a, key);
	return json_is_string(v) ? json_string_value(v) : "";
}

static void entry_from_json(json_t *e, struct image_info *i)
{
	json_t *a = json_object_get(e, "annotations");
	snprintf(i->media_type, sizeof(i->media_type), "%s",
		 json_string_value(json_object_get(e, "mediaType")) ?: IMAGE_MT_OCI_MANIFEST);
	snprintf(i->digest, sizeof(i->digest), "%s",
		 json_string_value(json_object_get(e, "digest")));
	i->manifest_size = (uint64_t)json_integer_value(json_object_get(e, "size"));
	if (strlen(ann(a, IMAGE_ANN_REF_NAME)) < sizeof(i->name))
		snprintf(i->name, sizeof(i->name), "%s", ann(a, IMAGE_ANN_REF_NAME));
	if (image_digest_is_valid(ann(a, IMAGE_ANN_CONFIG)))
		snprintf(i->config_digest, sizeof(i->config_digest), "%s",
			 ann(a, IMAGE_ANN_CONFIG));
	(void)parse_u64(ann(a, IMAGE_ANN_SIZE), &i->size);
	(void)parse_u64(ann(a, IMAGE_ANN_UNPACKED), &i->unpacked);
	(void)parse_rfc3339_ms(ann(a, IMAGE_ANN_CREATED), &i->created_ms);
	(void)parse_rfc3339_ms(ann(a, IMAGE_ANN_IMPORTED), &i->imported_ms);
}

int store_index_read(struct image_store *s, struct image_info **ret, size_t *ret_n,
		     struct error *err)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/" LAYOUT_IMAGE_INDEX, s->dir);
	json_error_t je;
	_cleanup_json_ json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!v)
		return error_set(err, EIO, "%s: %s", path, je.text);
	json_t *ms = json_object_get(v, "manifests");
	size_t n = json_array_size(ms);
	if (n > IMAGE_REFS_MAX)
		return error_set(err, E2BIG, "%s: more than %d images", path, IMAGE_REFS_MAX);
	struct image_info *list = calloc(n ? n : 1, sizeof(*list));
	if (!list)
		return error_set(err, ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(ms, i);
		if (!json_is_object(e) ||
		    !image_digest_is_valid(json_string_value(json_object_get(e, "digest"))))
			continue; /* not ours to understand; not listed */
		entry_from_json(e, &list[k++]);
	}
	*ret = list;
	*ret_n = k;
	return 0;
}

static json_t *entry_json(const struct image_info *i)
{
	char created[32], imported[32], size[24], unpacked[24];
	store_format_time(i->created_ms, created);
	store_format_time(i->imported_ms, imported);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)i->size);
	snprintf(unpacked, sizeof(unpacked), "%llu", (unsigned long long)i->unpacked);
	json_t *a =
	    json_pack("{s:s, s:s, s:s, s:s}", IMAGE_ANN_CONFIG, i->config_digest, IMAGE_ANN_SIZE,
		      size, IMAGE_ANN_UNPACKED, unpacked, IMAGE_ANN_IMPORTED, imported);
	if (a && i->created_ms)
		json_object_set_new(a, IMAGE_ANN_CREATED, json_string(created));
	if (a && i->name[0])
		json_object_set_new(a, IMAGE_ANN_REF_NAME, json_string(i->name));
	return json_pack("{s:s, s:s, s:I, s:o*}", "mediaType", i->media_type, "digest", i->digest,
			 "size", (json_int_t)i->manifest_size, "annotations", a);
}

int store_index_write(struct image_store *s, const struct image_info *v, size_t n,
		      struct error *err)
{
	json_t *ms = json_array();
	for (size_t i = 0; ms && i < n; i++)
		if (json_array_append_new(ms, entry_json(&v[i])) < 0) {
			json_decref(ms);
			ms = NULL;
		}
	_cleanup_json_ json_t *doc = json_pack("{s:i, s:s, s:o*}", "schemaVersion", 2, "mediaType",
					       IMAGE_MT_OCI_INDEX, "manifests", ms);
	_cleanup_free_ char *text = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	static const char tmp[] = LAYOUT_IMAGE_TMP "/" LAYOUT_IMAGE_INDEX;
	_cleanup_close_ int fd =
	    openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r;
	if (fd < 0)
		return error_set_errno(err, errno, "%s/%s", s->dir, tmp);
	if ((r = write_all(fd, text, strlen(text))) < 0 || (r = write_all(fd, "\n", 1)) < 0 ||
	    (fsync(fd) < 0 && (r = -errno) < 0))
		return error_set_errno(err, -r, "%s/%s", s->dir, tmp);
	if (renameat(s->dirfd, tmp, s->dirfd, LAYOUT_IMAGE_INDEX) < 0 || fsync(s->dirfd) < 0)
		return error_set_errno(err, errno, "%s/" LAYOUT_IMAGE_INDEX, s->dir);
	return 0;
}

/* ---- lookups ------------------------------------------------------------------- */

static int info_cmp(const void *a, const void *b)
{
	const struct image_info *x = a, *y = b;
	if (!x->name[0] != !y->name[0])
		return x->name[0] ? -1 : 1;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->digest, y->digest);
}

int image_list(struct image_store *s, struct image_info **ret, size_t *ret_n, struct error *err)
{
	int r = store_index_read(s, ret, ret_n, err);
	if (r == 0 && *ret_n > 1)
		qsort(*ret, *ret_n, sizeof(**ret), info_cmp);
	return r;
}

int image_lookup(struct image_store *s, const char *ref, struct image_info *ret, struct error *err)
{
	char name[IMAGE_REF_MAX] = "";
	bool digest = image_digest_is_valid(ref);
	int r;
	if (!digest && (r = image_ref_normalize(ref, name, sizeof(name), err)) < 0)
		return r;
	_cleanup_free_ struct image_info *v = NULL;
	size_t n = 0;
	if ((r = store_index_read(s, &v, &n, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (digest ? strcmp(v[i].digest, ref) == 0 : strcmp(v[i].name, name) == 0) {
			*ret = v[i];
			return 0;
		}
	return error_set(err, ENOENT, "no image %s", digest ? ref : name);
}

int image_inspect(struct image_store *s, const char *ref, struct image_info *ret_info,
		  struct image_manifest *ret_manifest, struct image_config *ret_config,
		  struct error *err)
{
	struct image_info info;
	int r = image_lookup(s, ref, &info, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *m = NULL, *c = NULL;
	size_t mlen = 0, clen = 0;
	if ((r = store_blob_read(s, info.digest, IMAGE_MANIFEST_MAX, &m, &mlen, err)) < 0 ||
	    (r = image_manifest_parse(m, mlen, ret_manifest, err)) < 0)
		return r;
	if ((r = store_blob_read(s, ret_manifest->config.digest, IMAGE_CONFIG_MAX, &c, &clen,
				 err)) < 0 ||
	    (r = image_config_parse(c, clen, ret_config, err)) < 0) {
		image_manifest_release(ret_manifest);
		return r;
	}
	*ret_info = info;
	return 0;
}
