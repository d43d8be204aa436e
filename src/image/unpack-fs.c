/*
 * unpack-fs.c - canonical paths, and directories opened, made and emptied
 * beneath an image's tree without following a symlink (unpack-internal.h).
 */
#include "unpack-internal.h"

#include "base/cleanup.h"
#include "image/unpack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int unpack_path_normalize(const char *raw, const char *what, char *out, struct error *err)
{
	size_t len = strlen(raw);
	if (len > IMAGE_PATH_MAX)
		return error_set(err, ENAMETOOLONG, "layer %s of %zu bytes (at most %d)", what, len,
				 IMAGE_PATH_MAX);
	if (raw[0] == '/')
		return error_set(err, EPERM, "layer %s '%.200s': an absolute path", what, raw);
	size_t n = 0;
	unsigned depth = 0;
	const char *p = raw;
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t clen = (size_t)(end - p);
		if (clen == 2 && p[0] == '.' && p[1] == '.')
			return error_set(err, EPERM, "layer %s '%.200s': a '..' component", what,
					 raw);
		if (clen > 0 && !(clen == 1 && p[0] == '.')) {
			if (++depth > IMAGE_DEPTH_MAX)
				return error_set(err, ENAMETOOLONG,
						 "layer %s '%.200s': more than %d components", what,
						 raw, IMAGE_DEPTH_MAX);
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, p, clen);
			n += clen;
		}
		p = *end ? end + 1 : end;
	}
	out[n] = '\0';
	return 0;
}

bool unpack_path_has_whiteout_parent(const char *path)
{
	const char *p = path;
	for (const char *slash; (slash = strchr(p, '/')); p = slash + 1)
		if (strncmp(p, WHITEOUT_PREFIX, WHITEOUT_PREFIX_LEN) == 0)
			return true;
	return false;
}

int unpack_open_beneath(int dirfd, const char *path, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC),
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

static int refuse_open(int r, const char *dir, const char *entry, struct error *err)
{
	if (r == -ELOOP)
		return error_set(err, EPERM,
				 "layer entry '%.200s': a symlink on the way ('%.200s')", entry,
				 dir);
	if (r == -EXDEV)
		return error_set(err, EPERM, "layer entry '%.200s': '%.200s' leaves the tree",
				 entry, dir);
	return error_set_errno(err, -r, "layer entry '%.200s': open '%.200s'", entry, dir);
}

/* One missing directory name of dirfd made (0755, IMAGE_ID_BASE), and opened. */
static int make_implied_dir(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	_cleanup_close_ int fd = unpack_open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	if (fchown(fd, IMAGE_ID_BASE, IMAGE_ID_BASE) < 0 || fchmod(fd, 0755) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int unpack_open_dir(int tree_fd, const char *dir, bool create, const char *entry, int *ret_fd,
		    struct error *err)
{
	int fd = unpack_open_beneath(tree_fd, *dir ? dir : ".", O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		*ret_fd = fd;
		return 0;
	}
	if (fd != -ENOENT || !create)
		return refuse_open(fd, dir, entry, err);

	/* Walk it, making what is missing: each component by itself, beneath the last. */
	char part[IMAGE_PATH_MAX + 1];
	snprintf(part, sizeof(part), "%s", dir);
	_cleanup_close_ int cur = unpack_open_beneath(tree_fd, ".", O_RDONLY | O_DIRECTORY);
	if (cur < 0)
		return refuse_open(cur, ".", entry, err);
	for (char *p = part, *end; p; p = end) {
		end = strchr(p, '/');
		if (end)
			*end++ = '\0';
		int next = unpack_open_beneath(cur, p, O_RDONLY | O_DIRECTORY);
		if (next == -ENOENT)
			next = make_implied_dir(cur, p);
		if (next < 0)
			return refuse_open(next, dir, entry, err);
		close(cur);
		cur = next;
	}
	*ret_fd = TAKE_FD(cur);
	return 0;
}

int unpack_remove(int dirfd, const char *name, unsigned depth)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 ? -errno : 1;
	if (depth >= IMAGE_DEPTH_MAX)
		return -ELOOP;
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = unpack_clear_dir(fd, depth + 1);
	if (r < 0)
		return r;
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 1;
}

int unpack_clear_dir(int dirfd, unsigned depth)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int r = -errno;
		close(fd);
		return r;
	}
	int n = 0, r = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			r = -errno;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		r = unpack_remove(dirfd, de->d_name, depth);
		if (r < 0)
			break;
		n += r;
	}
	closedir(d);
	return r < 0 ? r : n;
}
