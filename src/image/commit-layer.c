/*
 * commit-layer.c - an overlayfs upper directory as an OCI layer
 * (commit-internal.h, commit.h): walked by fd, in name order, never
 * through a symlink; written by libarchive as a pax tar whose bytes are
 * hashed (the diff_id) and handed to a second libarchive writer that
 * gzips them (the "raw" format: one stream, no headers) and whose output
 * is hashed again (the blob's digest) on its way to the file.
 */
#include "image/commit-internal.h"
#include "image/import-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define LAYER_BLOCK (128u * 1024)
#define WH_PREFIX   ".wh."
#define WH_OPAQUE   ".wh..wh..opq"

/* overlayfs's markers, in the two namespaces it may use (userxattr: user.) */
static const char *const xattr_opaque[] = {"trusted.overlay.opaque", "user.overlay.opaque"};
static const char *const xattr_whiteout[] = {"trusted.overlay.whiteout", "user.overlay.whiteout"};
static const char *const xattr_lossy[] = {"trusted.overlay.redirect", "user.overlay.redirect",
					  "trusted.overlay.metacopy", "user.overlay.metacopy"};

/* A regular file met with st_nlink > 1: where it was first written. */
struct seen {
	dev_t dev;
	ino_t ino;
	char *path;
};

struct walk {
	struct archive *tar, *gz;
	int out_fd;
	struct sha256 diff, blob;
	uint64_t size; /* bytes of the blob written */
	int out_err;   /* a write's -errno */
	uid_t id_base;
	const struct image_commit_opts *lim;
	struct image_commit_stats *st;
	struct seen *seen;
	size_t nseen, seen_cap;	       /* an open-addressed table: seen_cap a power of 2 */
	char path[IMAGE_PATH_MAX + 1]; /* the entry's, relative to the upper */
	char *block;
	struct error *err;
};

/* ---- the two writers ---------------------------------------------------------- */

static la_ssize_t gz_out(struct archive *a, void *data, const void *buf, size_t len)
{
	struct walk *w = data;
	int r = write_all(w->out_fd, buf, len);
	if (r < 0) {
		w->out_err = r;
		archive_set_error(a, -r, "write");
		return -1;
	}
	sha256_update(&w->blob, buf, len);
	w->size += len;
	return (la_ssize_t)len;
}

static la_ssize_t tar_out(struct archive *a, void *data, const void *buf, size_t len)
{
	struct walk *w = data;
	sha256_update(&w->diff, buf, len);
	la_ssize_t n = archive_write_data(w->gz, buf, len);
	if (n < 0 || (size_t)n != len) {
		archive_set_error(a, EIO, "%s", archive_error_string(w->gz) ?: "gzip");
		return -1;
	}
	return n;
}

static int writers_open(struct walk *w)
{
	w->gz = archive_write_new();
	w->tar = archive_write_new();
	if (!w->gz || !w->tar || sha256_init(&w->diff) < 0 || sha256_init(&w->blob) < 0)
		return error_set(w->err, ENOMEM, "out of memory");
	/* ARCHIVE_WARN would mean an external gzip program: never */
	if (archive_write_add_filter_gzip(w->gz) != ARCHIVE_OK ||
	    archive_write_set_format_raw(w->gz) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(w->gz, 0) != ARCHIVE_OK ||
	    archive_write_open2(w->gz, w, NULL, gz_out, NULL, NULL) != ARCHIVE_OK)
		return error_set(w->err, EIO, "libarchive's gzip writer: %s",
				 archive_error_string(w->gz) ?: "unavailable");
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return error_set(w->err, ENOMEM, "out of memory");
	archive_entry_set_pathname(e, "layer.tar");
	archive_entry_set_filetype(e, AE_IFREG);
	int r = archive_write_header(w->gz, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK || archive_write_set_format_pax_restricted(w->tar) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(w->tar, 0) != ARCHIVE_OK ||
	    archive_write_open2(w->tar, w, NULL, tar_out, NULL, NULL) != ARCHIVE_OK)
		return error_set(w->err, EIO, "libarchive's tar writer: %s",
				 archive_error_string(w->tar) ?: "unavailable");
	return 0;
}

/* Close both writers (the tar's end into the gzip stream, then its trailer). */
static int writers_close(struct walk *w)
{
	if (archive_write_close(w->tar) != ARCHIVE_OK)
		return error_set(w->err, w->out_err ? -w->out_err : EIO, "the layer: %s",
				 archive_error_string(w->tar) ?: "write");
	if (archive_write_close(w->gz) != ARCHIVE_OK)
		return error_set(w->err, w->out_err ? -w->out_err : EIO, "the layer: %s",
				 archive_error_string(w->gz) ?: "write");
	return 0;
}

static void writers_free(struct walk *w)
{
	if (w->tar)
		archive_write_free(w->tar);
	if (w->gz)
		archive_write_free(w->gz);
	sha256_release(&w->diff);
	sha256_release(&w->blob);
}

/* ---- entries ------------------------------------------------------------------- */

/* One more header: within the entries' limit? */
static int count_entry(struct walk *w)
{
	if (++w->st->entries > w->lim->entries_max)
		return error_set(w->err, EFBIG, "the layer would have more than %llu entries",
				 (unsigned long long)w->lim->entries_max);
	return 0;
}

/* The header of e (its path set), or an error naming path. */
static int put_header(struct walk *w, struct archive_entry *e, const char *path)
{
	int r = count_entry(w);
	if (r < 0)
		return r;
	if (archive_write_header(w->tar, e) != ARCHIVE_OK)
		return error_set(w->err, w->out_err ? -w->out_err : EIO, "%s: %s", path,
				 archive_error_string(w->tar) ?: "cannot write its header");
	return 0;
}

/* An entry of path with st's mode, owner (mapped) and time. */
static int entry_from_stat(struct walk *w, const char *path, const struct stat *st,
			   struct archive_entry **ret)
{
	if (st->st_uid < w->id_base || st->st_uid - w->id_base >= COMMIT_ID_RANGE ||
	    st->st_gid < w->id_base || st->st_gid - w->id_base >= COMMIT_ID_RANGE)
		return error_set(
		    w->err, ERANGE, "%s: owned by %u:%u, outside the sandbox's ids %u..%u: refused",
		    path, (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)w->id_base,
		    (unsigned)(w->id_base + COMMIT_ID_RANGE - 1));
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return error_set(w->err, ENOMEM, "out of memory");
	archive_entry_set_pathname(e, path);
	archive_entry_set_mode(e, st->st_mode & (S_IFMT | 07777));
	archive_entry_set_uid(e, st->st_uid - w->id_base);
	archive_entry_set_gid(e, st->st_gid - w->id_base);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	*ret = e;
	return 0;
}

/* ".wh.NAME" (or ".wh..wh..opq" in dir) beside path: an empty file, owned by 0. */
static int put_whiteout(struct walk *w, size_t dir_len, const char *name, const struct stat *st)
{
	char path[IMAGE_PATH_MAX + 1];
	int n = snprintf(path, sizeof(path), "%.*s%s%s%s", (int)dir_len, w->path,
			 dir_len ? "/" : "", name ? WH_PREFIX : WH_OPAQUE, name ? name : "");
	if (n < 0 || (size_t)n >= sizeof(path))
		return error_set(w->err, ENAMETOOLONG, "%s: its whiteout's path is too long",
				 w->path);
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return error_set(w->err, ENOMEM, "out of memory");
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 0);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	int r = put_header(w, e, path);
	archive_entry_free(e);
	if (r == 0)
		w->st->whiteouts++;
	return r;
}

/* Does fd carry one of these xattrs (with value "y", when want_y)? */
static bool has_xattr(int fd, const char *const *names, size_t n, bool want_y)
{
	for (size_t i = 0; i < n; i++) {
		char v[8];
		ssize_t len = fgetxattr(fd, names[i], v, sizeof(v));
		if (len >= 0 && (!want_y || (len == 1 && v[0] == 'y')))
			return true;
		if (len < 0 && errno == ERANGE && !want_y)
			return true;
	}
	return false;
}

static int refuse_lossy(struct walk *w, int fd)
{
	if (has_xattr(fd, xattr_lossy, ELEMENTSOF(xattr_lossy), false))
		return error_set(w->err, EOPNOTSUPP,
				 "%s: an overlayfs redirect or metacopy (its content is in the "
				 "lower layer): cannot be committed",
				 w->path);
	return 0;
}

static size_t seen_slot(const struct walk *w, dev_t dev, ino_t ino)
{
	uint64_t h =
	    ((uint64_t)dev * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)ino * 0xff51afd7ed558ccdULL);
	size_t i = (size_t)(h ^ (h >> 29)) & (w->seen_cap - 1);
	while (w->seen[i].path && !(w->seen[i].dev == dev && w->seen[i].ino == ino))
		i = (i + 1) & (w->seen_cap - 1);
	return i;
}

/*
 * The first path of a regular file met again (the same inode) into *ret,
 * or NULL when it is new (then noted). An open-addressed table, kept at
 * most half full: as many links as the entries' limit cost no quadratic walk.
 */
static int seen_lookup(struct walk *w, const struct stat *st, const char **ret)
{
	*ret = NULL;
	if (w->seen_cap && w->seen[seen_slot(w, st->st_dev, st->st_ino)].path) {
		*ret = w->seen[seen_slot(w, st->st_dev, st->st_ino)].path;
		return 0;
	}
	if (2 * (w->nseen + 1) > w->seen_cap) {
		struct seen *old = w->seen;
		size_t old_cap = w->seen_cap;
		w->seen_cap = old_cap ? 2 * old_cap : 64;
		if (!(w->seen = calloc(w->seen_cap, sizeof(*w->seen)))) {
			w->seen = old, w->seen_cap = old_cap;
			return error_set(w->err, ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].path)
				w->seen[seen_slot(w, old[i].dev, old[i].ino)] = old[i];
		free(old);
	}
	char *p = strdup(w->path);
	if (!p)
		return error_set(w->err, ENOMEM, "out of memory");
	w->seen[seen_slot(w, st->st_dev, st->st_ino)] = (struct seen){st->st_dev, st->st_ino, p};
	w->nseen++;
	return 0;
}

static int put_regular(struct walk *w, int dfd, const char *name, size_t dir_len)
{
	_cleanup_close_ int fd =
	    openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return error_set_errno(w->err, errno, "%s", w->path);
	if (!S_ISREG(st.st_mode))
		return error_set(w->err, EIO, "%s: changed while it was committed", w->path);
	if (st.st_size == 0 && has_xattr(fd, xattr_whiteout, ELEMENTSOF(xattr_whiteout), false))
		return put_whiteout(w, dir_len, name, &st);
	int r = refuse_lossy(w, fd);
	const char *first = NULL;
	if (r == 0 && st.st_nlink > 1)
		r = seen_lookup(w, &st, &first);
	struct archive_entry *e = NULL;
	if (r < 0 || (r = entry_from_stat(w, w->path, &st, &e)) < 0)
		return r;
	uint64_t size = first ? 0 : (uint64_t)st.st_size;
	if (first)
		archive_entry_set_hardlink(e, first);
	else
		archive_entry_set_size(e, (la_int64_t)size);
	if (size > w->lim->bytes_max - w->st->bytes) {
		archive_entry_free(e);
		return error_set(w->err, EFBIG,
				 "%s: the layer's files would be larger than %llu bytes", w->path,
				 (unsigned long long)w->lim->bytes_max);
	}
	r = put_header(w, e, w->path);
	archive_entry_free(e);
	for (uint64_t left = size; r == 0 && left > 0;) {
		ssize_t n = read(fd, w->block, left < LAYER_BLOCK ? left : LAYER_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? error_set_errno(w->err, errno, "%s: read", w->path)
				     : error_set(w->err, EIO, "%s: shrank while it was committed",
						 w->path);
		if (archive_write_data(w->tar, w->block, (size_t)n) != n)
			return error_set(w->err, w->out_err ? -w->out_err : EIO, "%s: %s", w->path,
					 archive_error_string(w->tar) ?: "write");
		left -= (uint64_t)n;
	}
	if (r == 0)
		w->st->bytes += size;
	return r;
}

static int walk_dir(struct walk *w, int dfd, size_t len, unsigned depth);

static int put_dir(struct walk *w, int dfd, const char *name, size_t len, unsigned depth)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return error_set_errno(w->err, errno, "%s", w->path);
	struct archive_entry *e = NULL;
	int r = refuse_lossy(w, fd);
	if (r < 0 || (r = entry_from_stat(w, w->path, &st, &e)) < 0)
		return r;
	r = put_header(w, e, w->path);
	archive_entry_free(e);
	if (r == 0 && has_xattr(fd, xattr_opaque, ELEMENTSOF(xattr_opaque), true))
		r = put_whiteout(w, len, NULL, &st);
	if (r == 0)
		r = walk_dir(w, fd, len, depth + 1);
	return r;
}

/* The entry name in dfd, whose path (w->path) is len bytes long. */
static int put_entry(struct walk *w, int dfd, const char *name, size_t dir_len, unsigned depth)
{
	size_t len = dir_len + (dir_len ? 1 : 0) + strlen(name);
	if (len > IMAGE_PATH_MAX || depth >= IMAGE_DEPTH_MAX)
		return error_set(w->err, ENAMETOOLONG,
				 "%.*s/%s: deeper or longer than a layer takes", (int)dir_len,
				 w->path, name);
	snprintf(w->path + dir_len, sizeof(w->path) - dir_len, "%s%s", dir_len ? "/" : "", name);
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return error_set_errno(w->err, errno, "%s", w->path);
	struct archive_entry *e = NULL;
	int r = 0;
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return put_regular(w, dfd, name, dir_len);
	case S_IFDIR:
		return put_dir(w, dfd, name, len, depth);
	case S_IFCHR:
		if (major(st.st_rdev) == 0 && minor(st.st_rdev) == 0)
			return put_whiteout(w, dir_len, name, &st);
		w->st->dropped++; /* another device */
		return 0;
	case S_IFBLK:
	case S_IFSOCK:
		w->st->dropped++;
		return 0;
	case S_IFLNK: {
		char target[IMAGE_PATH_MAX + 1];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target));
		if (n < 0)
			return error_set_errno(w->err, errno, "%s", w->path);
		if ((size_t)n >= sizeof(target))
			return error_set(w->err, ENAMETOOLONG, "%s: its target is too long",
					 w->path);
		target[n] = '\0';
		if ((r = entry_from_stat(w, w->path, &st, &e)) < 0)
			return r;
		archive_entry_set_symlink(e, target);
		break;
	}
	case S_IFIFO:
		if ((r = entry_from_stat(w, w->path, &st, &e)) < 0)
			return r;
		break;
	default:
		w->st->dropped++;
		return 0;
	}
	r = put_header(w, e, w->path);
	archive_entry_free(e);
	return r;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every entry of directory dfd (path w->path, len bytes), in name order. */
static int walk_dir(struct walk *w, int dfd, size_t len, unsigned depth)
{
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		CLOSE_FD(dup_fd);
		return error_set_errno(w->err, errno, "%s", len ? w->path : "the upper directory");
	}
	rewinddir(d); /* the dup shares dfd's offset: a walk before may have left it at the end */
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (w->st->entries + n >= w->lim->entries_max) {
			r = error_set(w->err, EFBIG, "the layer would have more than %llu entries",
				      (unsigned long long)w->lim->entries_max);
			break;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			void *v = realloc(names, cap * sizeof(*names));
			if (!v) {
				r = error_set(w->err, ENOMEM, "out of memory");
				break;
			}
			names = v;
		}
		if (!(names[n] = strdup(de->d_name)))
			r = error_set(w->err, ENOMEM, "out of memory");
		else
			n++;
	}
	closedir(d);
	if (r == 0 && n > 1)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = put_entry(w, dfd, names[i], len, depth);
	w->path[len] = '\0';
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

int commit_layer_write(int upper_fd, uid_t id_base, const struct image_commit_opts *lim, int out_fd,
		       struct commit_layer *ret, struct image_commit_stats *stats,
		       struct error *err)
{
	struct walk w = {.out_fd = out_fd, .id_base = id_base, .lim = lim, .st = stats, .err = err};
	memset(stats, 0, sizeof(*stats));
	int r = (w.block = malloc(LAYER_BLOCK)) ? 0 : error_set(err, ENOMEM, "out of memory");
	if (r == 0)
		r = writers_open(&w);
	if (r == 0)
		r = walk_dir(&w, upper_fd, 0, 0);
	if (r == 0)
		r = writers_close(&w);
	if (r == 0) {
		sha256_final(&w.diff, ret->diff_hex);
		sha256_final(&w.blob, ret->hex);
		ret->size = w.size;
	}
	writers_free(&w);
	for (size_t i = 0; i < w.seen_cap; i++)
		free(w.seen[i].path);
	free(w.seen);
	free(w.block);
	return r;
}
