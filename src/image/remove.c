/*
 * remove.c - rm and prune (store.h): what stays named, and every blob and
 * tree that nothing names any more removed, under the store's lock.
 */
#include "image/store-internal.h"

#include "base/cleanup.h"
#include "core/layout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- rm, prune -------------------------------------------------------------- */

static int hex_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The blobs and trees the n images of v name, as sorted hex strings into *ret. */
struct live_set {
	char **blobs; /* point into store */
	size_t nblobs;
	char **trees;
	size_t ntrees;
	char (*store)[IMAGE_DIGEST_HEX + 1];
};

static void live_release(struct live_set *l)
{
	free(l->blobs);
	free(l->trees);
	free(l->store);
	memset(l, 0, sizeof(*l));
}

static char *live_add(struct live_set *l, size_t *used, const char *digest)
{
	char *p = l->store[(*used)++];
	snprintf(p, IMAGE_DIGEST_HEX + 1, "%s", image_digest_hex(digest));
	return p;
}

static int live_collect(struct image_store *s, const struct image_info *v, size_t n,
			struct live_set *l, struct error *err)
{
	/* each image: its manifest, config and layers, and its tree */
	size_t cap = n * (IMAGE_LAYERS_MAX + 3), used = 0;
	l->store = calloc(cap ? cap : 1, sizeof(*l->store));
	l->blobs = calloc(cap ? cap : 1, sizeof(*l->blobs));
	l->trees = calloc(n ? n : 1, sizeof(*l->trees));
	if (!l->store || !l->blobs || !l->trees)
		return error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		struct image_manifest m;
		/* a manifest we cannot read leaves us not knowing what is live: stop */
		int r = store_blob_read(s, v[i].digest, IMAGE_MANIFEST_MAX, &text, &len, err);
		if (r < 0 || (r = image_manifest_parse(text, len, &m, err)) < 0)
			return r;
		l->blobs[l->nblobs++] = live_add(l, &used, v[i].digest);
		l->blobs[l->nblobs++] = live_add(l, &used, m.config.digest);
		for (size_t k = 0; k < m.nlayers; k++)
			l->blobs[l->nblobs++] = live_add(l, &used, m.layers[k].digest);
		image_manifest_release(&m);
		if (v[i].config_digest[0])
			l->trees[l->ntrees++] = live_add(l, &used, v[i].config_digest);
	}
	qsort(l->blobs, l->nblobs, sizeof(*l->blobs), hex_cmp);
	qsort(l->trees, l->ntrees, sizeof(*l->trees), hex_cmp);
	return 0;
}

static bool live_has(char **set, size_t n, const char *hex)
{
	return n && bsearch(&hex, set, n, sizeof(*set), hex_cmp);
}

/* Remove every blob and tree the images v do not name. Under the lock. */
static int store_collect(struct image_store *s, const struct image_info *v, size_t n,
			 struct image_prune_stats *st, struct error *err)
{
	struct live_set l = {0};
	int r = live_collect(s, v, n, &l, err);
	const char *dirs[] = {LAYOUT_IMAGE_BLOBS "/" LAYOUT_IMAGE_SHA256, LAYOUT_IMAGE_TREES};
	for (size_t k = 0; r == 0 && k < ELEMENTSOF(dirs); k++) {
		_cleanup_close_ int fd = -1;
		if ((r = store_open_dir(s, dirs[k], &fd, err)) < 0)
			break;
		int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
		if (!d) {
			CLOSE_FD(dup_fd);
			r = error_set_errno(err, errno, "%s/%s", s->dir, dirs[k]);
			break;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			const char *name = de->d_name;
			if (strlen(name) != IMAGE_DIGEST_HEX || name[0] == '.')
				continue;
			struct stat sb;
			if (k == 0 && !live_has(l.blobs, l.nblobs, name)) {
				if (fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
				    unlinkat(fd, name, 0) == 0) {
					st->blobs++;
					st->bytes += (uint64_t)sb.st_size;
				}
			} else if (k == 1 && !live_has(l.trees, l.ntrees, name)) {
				struct error terr = {0};
				int tr = store_tree_remove(s, name, &terr);
				if (tr == -EBUSY)
					st->busy++;
				else if (tr == 0)
					st->trees++;
			}
		}
		closedir(d);
	}
	live_release(&l);
	return r;
}

int image_remove(struct image_store *s, const char *ref, struct error *err)
{
	bool digest = image_digest_is_valid(ref);
	char name[IMAGE_REF_MAX] = "";
	int r;
	if (!digest && (r = image_ref_normalize(ref, name, sizeof(name), err)) < 0)
		return r;
	_cleanup_close_ int lock = -1;
	if ((r = store_lock(s, &lock, err)) < 0)
		return r;
	_cleanup_free_ struct image_info *v = NULL;
	size_t n = 0;
	if ((r = store_index_read(s, &v, &n, err)) < 0)
		return r;
	char target[IMAGE_DIGEST_SIZE] = "", config[IMAGE_DIGEST_SIZE] = "";
	for (size_t i = 0; i < n && !target[0]; i++)
		if (digest ? strcmp(v[i].digest, ref) == 0 : strcmp(v[i].name, name) == 0) {
			snprintf(target, sizeof(target), "%s", v[i].digest);
			snprintf(config, sizeof(config), "%s", v[i].config_digest);
		}
	if (!target[0])
		return error_set(err, ENOENT, "no image %s", digest ? ref : name);
	/* what stays: by name, every other entry; by digest, those of other images */
	size_t k = 0;
	bool image_stays = false, tree_stays = false;
	for (size_t i = 0; i < n; i++) {
		bool drop =
		    digest ? strcmp(v[i].digest, target) == 0 : strcmp(v[i].name, name) == 0;
		if (drop)
			continue;
		image_stays |= strcmp(v[i].digest, target) == 0;
		tree_stays |= strcmp(v[i].config_digest, config) == 0;
		v[k++] = v[i];
	}
	if (!image_stays && !tree_stays && config[0]) {
		/* the tree goes: refused while in use, before anything changes */
		_cleanup_close_ int trees = -1;
		if ((r = store_open_dir(s, LAYOUT_IMAGE_TREES, &trees, err)) < 0)
			return r;
		_cleanup_close_ int fd = openat(trees, image_digest_hex(config),
						O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
			return error_set(err, EBUSY, "image %s is in use", digest ? ref : name);
		/* the use check holds: the store's lock keeps new removals out,
		 * and a use that begins now finds the tree, which goes below
		 * only through store_tree_remove()'s own check */
	}
	if ((r = store_index_write(s, v, k, err)) < 0)
		return r;
	if (image_stays)
		return 0;
	struct image_prune_stats st = {0};
	if ((r = store_collect(s, v, k, &st, err)) < 0)
		return error_prefix(
		    err, "image %s removed, but not all of its files: ", digest ? ref : name);
	if (st.busy)
		return error_set(err, EBUSY, "image %s was removed, but its tree is in use",
				 digest ? ref : name);
	return 0;
}

int image_prune(struct image_store *s, struct image_prune_stats *ret, struct error *err)
{
	struct image_prune_stats st = {0};
	_cleanup_close_ int lock = -1;
	int r = store_lock(s, &lock, err);
	if (r < 0)
		return r;
	_cleanup_free_ struct image_info *v = NULL;
	size_t n = 0, k = 0;
	if ((r = store_index_read(s, &v, &n, err)) < 0)
		return r;
	_cleanup_close_ int trees = -1;
	if ((r = store_open_dir(s, LAYOUT_IMAGE_TREES, &trees, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		bool keep = v[i].name[0] != '\0';
		if (!keep && v[i].config_digest[0]) {
			/* an unnamed image in use stays */
			_cleanup_close_ int fd =
			    openat(trees, image_digest_hex(v[i].config_digest),
				   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
				keep = true;
				st.busy++;
			}
		}
		if (keep)
			v[k++] = v[i];
		else
			st.images++;
	}
	if (k != n && (r = store_index_write(s, v, k, err)) < 0)
		return r;
	if ((r = store_collect(s, v, k, &st, err)) < 0)
		return r;
	if (ret)
		*ret = st;
	return 0;
}
