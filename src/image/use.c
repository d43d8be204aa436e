/*
 * use.c - a use of an image's tree: its directory, locked shared
 * (store.h: "In use"). libc only, so that any of our processes can hold
 * one without the store.
 */
#include "image/store.h"

#include "base/cleanup.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>

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
