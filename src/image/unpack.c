/*
 * unpack.c - one layer applied to an image's tree (unpack.h): libarchive
 * reads the tar and its compression; every entry is made here, by fd,
 * beneath the tree (unpack-fs.c), never by archive_read_extract().
 *
 * Two passes over the layer: the first checks every header against the
 * limits and applies the whiteouts (to the lower layers only, as the
 * spec asks, since nothing of this layer is there yet); the second makes
 * the entries.
 */
#include "image/unpack.h"

#include "base/cleanup.h"
#include "unpack-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNPACK_READ_BLOCK (64 * 1024)

struct unpack {
	struct archive *a;
	int tree_fd;
	const struct unpack_limits *lim;
	struct unpack_stats *stats;
	struct error *err;
	char path[IMAGE_PATH_MAX + 1]; /* the entry's, canonical */
	char link[IMAGE_PATH_MAX + 1]; /* its hard link target's, canonical */
	const char *name;	       /* its last component, in path ("" for the tree) */
	uid_t uid;
	gid_t gid;
};

static void archive_read_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

static int open_reader(int layer_fd, off_t start, struct archive **ret, struct error *err)
{
	if (lseek(layer_fd, start, SEEK_SET) < 0)
		return error_set_errno(err, errno, "layer: rewind");
	struct archive *a = archive_read_new();
	if (!a)
		return error_set(err, ENOMEM, "layer: archive_read_new");
	/* ARCHIVE_WARN would mean an external program: never for a layer. */
	if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(a) != ARCHIVE_OK) {
		archive_read_free(a);
		return error_set(err, EOPNOTSUPP,
				 "layer: this libarchive has no built-in gzip or zstd");
	}
	if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_open_fd(a, layer_fd, UNPACK_READ_BLOCK) != ARCHIVE_OK) {
		int r = error_set(err, EINVAL, "layer: %s", archive_error_string(a));
		archive_read_free(a);
		return r;
	}
	*ret = a;
	return 0;
}

/* The next header into *ret_e: 1, 0 at the end, or -errno. */
static int next_header(struct unpack *u, struct archive_entry **ret_e)
{
	int r = archive_read_next_header(u->a, ret_e);
	if (r == ARCHIVE_EOF)
		return 0;
	if (r < ARCHIVE_WARN)
		return error_set(u->err, EINVAL, "layer: %s", archive_error_string(u->a));
	return 1;
}

/* A name of the layer as its bytes: UTF-8 as written in a pax header (in
 * any locale, the daemon's C one included), else the header's raw bytes. */
static const char *entry_name(const char *utf8, const char *raw)
{
	return utf8 ? utf8 : raw;
}

/* What both passes check of an entry: its path, ids and names. */
static int check_entry(struct unpack *u, struct archive_entry *e)
{
	const char *raw = entry_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
	if (!raw)
		return error_set(u->err, EINVAL, "layer: an entry without a readable path");
	int r = unpack_path_normalize(raw, "entry", u->path, u->err);
	if (r < 0)
		return r;
	if (unpack_path_has_whiteout_parent(u->path))
		return error_set(u->err, EPERM, "layer entry '%.200s': under a whiteout's name",
				 u->path);
	const char *slash = strrchr(u->path, '/');
	u->name = slash ? slash + 1 : u->path;
	la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
	if (uid < 0 || uid > IMAGE_ID_MAX || gid < 0 || gid > IMAGE_ID_MAX)
		return error_set(u->err, ERANGE,
				 "layer entry '%.200s': owner %lld:%lld (ids up to %u)", u->path,
				 (long long)uid, (long long)gid, IMAGE_ID_MAX);
	u->uid = IMAGE_ID_BASE + (uid_t)uid;
	u->gid = IMAGE_ID_BASE + (gid_t)gid;
	return 0;
}

static bool is_whiteout(const char *name)
{
	return strncmp(name, WHITEOUT_PREFIX, WHITEOUT_PREFIX_LEN) == 0;
}

static bool is_file_data(struct archive_entry *e)
{
	return archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e);
}

/* u->path's parent, opened (made when create) into *ret_fd. */
static int open_parent(struct unpack *u, bool create, int *ret_fd)
{
	char dir[IMAGE_PATH_MAX + 1];
	size_t len = (size_t)(u->name - u->path);
	memcpy(dir, u->path, len ? len - 1 : 0);
	dir[len ? len - 1 : 0] = '\0';
	return unpack_open_dir(u->tree_fd, dir, create, u->path, ret_fd, u->err);
}

/* Pass one's work on a whiteout: the lower layers' victim removed. */
static int apply_whiteout(struct unpack *u)
{
	const char *victim = u->name + WHITEOUT_PREFIX_LEN;
	bool opaque = strcmp(u->name, WHITEOUT_OPAQUE) == 0;
	if (!opaque && is_whiteout(victim))
		return 0; /* aufs' own metadata (.wh..wh.plnk and the like) */
	if (!opaque && (!*victim || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0))
		return error_set(u->err, EPERM, "layer entry '%.200s': a whiteout of '%s'", u->path,
				 victim);
	_cleanup_close_ int dirfd = -1;
	int r = open_parent(u, false, &dirfd);
	if (r == -ENOENT || r == -ENOTDIR) {
		if (u->err)
			*u->err = (struct error){0};
		return 0; /* nothing below to hide */
	}
	if (r < 0)
		return r;
	r = opaque ? unpack_clear_dir(dirfd, 1) : unpack_remove(dirfd, victim, 1);
	if (r < 0)
		return error_set_errno(u->err, -r, "layer entry '%.200s': apply the whiteout",
				       u->path);
	u->stats->whiteouts += (uint64_t)r;
	return 0;
}

/* Pass one: every header checked and counted, the whiteouts applied. */
static int pass_whiteouts(struct unpack *u)
{
	uint64_t entries = u->stats->entries, bytes = u->stats->bytes;
	struct archive_entry *e;
	int r;
	while ((r = next_header(u, &e)) > 0) {
		if (++entries > u->lim->entries_max)
			return error_set(u->err, EFBIG,
					 "layer: more than %llu entries in the image",
					 (unsigned long long)u->lim->entries_max);
		r = check_entry(u, e);
		if (r < 0)
			return r;
		if (is_file_data(e)) {
			la_int64_t size = archive_entry_size(e);
			if (size < 0 || (uint64_t)size > u->lim->bytes_max - bytes)
				return error_set(
				    u->err, EFBIG,
				    "layer entry '%.200s': %lld bytes, past the image's "
				    "%llu",
				    u->path, (long long)size,
				    (unsigned long long)u->lim->bytes_max);
			bytes += (uint64_t)size;
		}
		if (is_whiteout(u->name)) {
			r = apply_whiteout(u);
			if (r < 0)
				return r;
		}
	}
	return r;
}

/* What holds name in dirfd removed, unless both are directories: whether one is kept. */
static int clear_slot(struct unpack *u, int dirfd, bool want_dir, bool *ret_kept)
{
	struct stat st;
	*ret_kept = false;
	if (fstatat(dirfd, u->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT
			   ? 0
			   : error_set_errno(u->err, errno, "layer entry '%.200s'", u->path);
	if (want_dir && S_ISDIR(st.st_mode)) {
		*ret_kept = true;
		return 0;
	}
	int r = unpack_remove(dirfd, u->name, 1);
	return r < 0 ? error_set_errno(u->err, -r, "layer entry '%.200s': replace", u->path) : 0;
}

static mode_t entry_mode(struct unpack *u, struct archive_entry *e)
{
	mode_t mode = archive_entry_perm(e) & 07777;
	if (mode & (S_ISUID | S_ISGID)) {
		mode &= ~(mode_t)(S_ISUID | S_ISGID);
		u->stats->cleared_setid++;
	}
	return mode;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	ts[1] = (struct timespec){.tv_nsec = UTIME_OMIT};
	if (archive_entry_mtime_is_set(e))
		ts[1] = (struct timespec){archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
	ts[0] = ts[1];
	if (archive_entry_atime_is_set(e))
		ts[0] = (struct timespec){archive_entry_atime(e), archive_entry_atime_nsec(e)};
}

/* Owner, mode and times of what fd holds: the entry's. */
static int set_attrs(struct unpack *u, struct archive_entry *e, int fd)
{
	struct timespec ts[2];
	entry_times(e, ts);
	if (fchown(fd, u->uid, u->gid) < 0 || fchmod(fd, entry_mode(u, e)) < 0 ||
	    futimens(fd, ts) < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s': attributes", u->path);
	return 0;
}

static int make_dir(struct unpack *u, struct archive_entry *e, int dirfd)
{
	bool kept;
	int r = clear_slot(u, dirfd, true, &kept);
	if (r < 0)
		return r;
	if (!kept && mkdirat(dirfd, u->name, 0700) < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s': mkdir", u->path);
	_cleanup_close_ int fd =
	    openat(dirfd, u->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s': open", u->path);
	return set_attrs(u, e, fd);
}

static int make_file(struct unpack *u, struct archive_entry *e, int dirfd)
{
	la_int64_t size = archive_entry_size(e);
	if (size < 0 || (uint64_t)size > u->lim->bytes_max - u->stats->bytes)
		return error_set(u->err, EFBIG, "layer entry '%.200s': past the image's %llu bytes",
				 u->path, (unsigned long long)u->lim->bytes_max);
	u->stats->bytes += (uint64_t)size;
	bool kept;
	int r = clear_slot(u, dirfd, false, &kept);
	if (r < 0)
		return r;
	_cleanup_close_ int fd =
	    openat(dirfd, u->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s': create", u->path);
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		r = archive_read_data_block(u->a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return error_set(u->err, EINVAL, "layer entry '%.200s': %s", u->path,
					 archive_error_string(u->a));
		if (off < 0 || (uint64_t)off > (uint64_t)size || len > (uint64_t)(size - off))
			return error_set(u->err, EFBIG, "layer entry '%.200s': data past its size",
					 u->path);
		for (size_t done = 0; done < len;) {
			ssize_t n =
			    pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return error_set_errno(u->err, n < 0 ? errno : EIO,
						       "layer entry '%.200s': write", u->path);
			done += (size_t)n;
		}
	}
	if (ftruncate(fd, size) < 0) /* a sparse file's last hole */
		return error_set_errno(u->err, errno, "layer entry '%.200s': truncate", u->path);
	return set_attrs(u, e, fd);
}

static int make_symlink(struct unpack *u, struct archive_entry *e, int dirfd)
{
	const char *target = entry_name(archive_entry_symlink_utf8(e), archive_entry_symlink(e));
	if (!target || !*target)
		return error_set(u->err, EINVAL, "layer entry '%.200s': a symlink to nothing",
				 u->path);
	if (strlen(target) > IMAGE_PATH_MAX)
		return error_set(u->err, ENAMETOOLONG,
				 "layer entry '%.200s': a symlink target past %d bytes", u->path,
				 IMAGE_PATH_MAX);
	bool kept;
	int r = clear_slot(u, dirfd, false, &kept);
	if (r < 0)
		return r;
	struct timespec ts[2];
	entry_times(e, ts);
	if (symlinkat(target, dirfd, u->name) < 0 ||
	    fchownat(dirfd, u->name, u->uid, u->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(dirfd, u->name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s': symlink", u->path);
	return 0;
}

static int make_hardlink(struct unpack *u, struct archive_entry *e, int dirfd)
{
	int r = unpack_path_normalize(
	    entry_name(archive_entry_hardlink_utf8(e), archive_entry_hardlink(e)),
	    "hard link target", u->link, u->err);
	if (r < 0) {
		error_prefix(u->err, "layer entry '%.200s': ", u->path);
		return r;
	}
	_cleanup_close_ int fd =
	    unpack_open_beneath(u->tree_fd, *u->link ? u->link : ".", O_PATH | O_NOFOLLOW);
	if (fd == -ELOOP || fd == -EXDEV)
		return error_set(u->err, EPERM,
				 "layer entry '%.200s': a hard link to '%.200s', through a symlink "
				 "or out of the tree",
				 u->path, u->link);
	if (fd < 0)
		return error_set_errno(u->err, -fd, "layer entry '%.200s': a hard link to '%.200s'",
				       u->path, u->link);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s'", u->path);
	if (!S_ISREG(st.st_mode))
		return error_set(
		    u->err, EPERM,
		    "layer entry '%.200s': a hard link to '%.200s', not a regular file", u->path,
		    u->link);
	bool kept;
	r = clear_slot(u, dirfd, false, &kept);
	if (r < 0)
		return r;
	if (linkat(fd, "", dirfd, u->name, AT_EMPTY_PATH) < 0)
		return error_set_errno(u->err, errno, "layer entry '%.200s': link", u->path);
	return 0;
}

/* The tree itself ("./"): a directory entry sets its attributes. */
static int apply_root(struct unpack *u, struct archive_entry *e)
{
	if (archive_entry_filetype(e) != AE_IFDIR)
		return error_set(u->err, EPERM, "layer: the tree itself as a non-directory");
	return set_attrs(u, e, u->tree_fd);
}

static int apply_entry(struct unpack *u, struct archive_entry *e)
{
	if (is_whiteout(u->name))
		return 0; /* pass one's */
	if (!*u->path)
		return apply_root(u, e);
	mode_t type = archive_entry_filetype(e);
	if (!archive_entry_hardlink(e) &&
	    (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO || type == AE_IFSOCK)) {
		u->stats->dropped_devices++;
		return 0;
	}
	_cleanup_close_ int dirfd = -1;
	int r = open_parent(u, true, &dirfd);
	if (r < 0)
		return r;
	if (archive_entry_hardlink(e))
		return make_hardlink(u, e, dirfd);
	switch (type) {
	case AE_IFDIR:
		return make_dir(u, e, dirfd);
	case AE_IFREG:
		return make_file(u, e, dirfd);
	case AE_IFLNK:
		return make_symlink(u, e, dirfd);
	default:
		return error_set(u->err, EINVAL, "layer entry '%.200s': unknown type 0%o", u->path,
				 (unsigned)type);
	}
}

/* Pass two: the entries made. */
static int pass_entries(struct unpack *u)
{
	struct archive_entry *e;
	int r;
	while ((r = next_header(u, &e)) > 0) {
		u->stats->entries++;
		r = check_entry(u, e);
		if (r >= 0)
			r = apply_entry(u, e);
		if (r < 0)
			return r;
	}
	return r;
}

int unpack_layer(int layer_fd, int tree_fd, const struct unpack_limits *lim,
		 struct unpack_stats *stats, struct error *err)
{
	off_t start = lseek(layer_fd, 0, SEEK_CUR);
	if (start < 0)
		return error_set_errno(err, errno, "layer: not seekable (it is read twice)");
	if (stats->bytes > lim->bytes_max || stats->entries > lim->entries_max)
		return error_set(err, EFBIG, "layer: the image is past its limits already");
	int (*const passes[])(struct unpack *) = {pass_whiteouts, pass_entries};
	for (size_t i = 0; i < ELEMENTSOF(passes); i++) {
		struct unpack u = {.tree_fd = tree_fd, .lim = lim, .stats = stats, .err = err};
		__attribute__((cleanup(archive_read_freep))) struct archive *a = NULL;
		int r = open_reader(layer_fd, start, &a, err);
		if (r < 0)
			return r;
		u.a = a;
		r = passes[i](&u);
		if (r < 0)
			return r;
	}
	return 0;
}
