/*
 * use.c - a use of an image's tree: its directory, locked shared
 * (store.h: "In use"), and what a digest looks like (oci.h). libc only,
 * its own library (image_use_dep), so that any of our processes, the
 * static supervisor and shim among them, can hold one without the store.
 */
#include "image/store.h"

#include "base/cleanup.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <string.h>
#include <sys/stat.h>

bool image_digest_is_valid(const char *s)
{
	size_t p = sizeof(IMAGE_DIGEST_PREFIX) - 1;
	if (!s || strncmp(s, IMAGE_DIGEST_PREFIX, p) != 0 || strlen(s) != p + IMAGE_DIGEST_HEX)
		return false;
	for (size_t i = p; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int image_use_begin(const char *state_dir, const char *config_digest, int *ret_fd,
		    struct error *err)
{
	if (!image_digest_is_valid(config_digest))
		return error_set(err, EINVAL, "'%s' is not an image's config digest",
				 config_digest);
	char path[PATH_MAX];
	if (layout_image_tree(path, sizeof(path), state_dir, image_digest_hex(config_digest)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "image %s", config_digest);
	if (flock(fd, LOCK_SH) < 0)
		return error_set_errno(err, errno, "image %s: lock", config_digest);
	/*
	 * rm may have renamed the tree away between our open and our lock
	 * (it locks, renames, unlocks): then the path names another inode,
	 * or none, and this use would hold a tree being removed.
	 */
	struct stat held, now;
	if (fstat(fd, &held) < 0 || stat(path, &now) < 0 || held.st_ino != now.st_ino ||
	    held.st_dev != now.st_dev)
		return error_set(err, ENOENT, "image %s: removed meanwhile", config_digest);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

void image_use_end(int fd)
{
	if (fd >= 0)
		close(fd); /* the lock goes with the last copy of the open file description */
}
