/*
 * loopfs.c - a file system image on a loop device, mounted detached.
 * See loopfs.h.
 */
#include "runtime/loopfs.h"

#include "base/cleanup.h"
#include "base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

/* LOOP_CTL_GET_FREE can hand two of us the same device: try again this often. */
#define LOOPFS_BIND_TRIES 16
#define LOOPFS_POLL_MS	  10

/* Hold the image's lock, waiting for an earlier mount of it to go away. */
static int lock_image(int fd, const char *path, struct error *err)
{
	for (long waited = 0;; waited += LOOPFS_POLL_MS) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return error_set_errno(err, errno, "%s: lock", path);
		if (waited >= LOOPFS_BUSY_WAIT_MS)
			return error_set(err, EBUSY, "%s is still mounted by an earlier sandbox",
					 path);
		sleep_ms(LOOPFS_POLL_MS);
	}
}

/* Bind a free loop device to the image; its fd, and its name in dev. */
static int bind_loop(int image_fd, char *dev, size_t size, struct error *err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return error_set_errno(err, errno == ENOENT ? ENODEV : errno,
				       "/dev/loop-control (is the loop module loaded?)");
	struct loop_config cfg = {
	    .fd = (uint32_t)image_fd,
	    /* no double caching; the kernel falls back to buffered I/O where it must */
	    .info = {.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO},
	};
	for (int i = 0; i < LOOPFS_BIND_TRIES; i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return error_set_errno(err, errno, "no free loop device");
		snprintf(dev, size, "/dev/loop%d", n);
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return error_set_errno(err, errno, "%s", dev);
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
			return fd;
		int e = errno;
		close(fd);
		if (e != EBUSY) /* taken by someone else between the two calls: next one */
			return error_set_errno(err, e, "%s: cannot bind the image", dev);
	}
	return error_set(err, EBUSY, "no loop device stayed free");
}

/* The kernel's own words on why fsconfig() failed, if it left any. */
static int fs_error(int fsfd, int e, const char *dev, struct error *err)
{
	char msg[256] = "";
	ssize_t n = fsfd >= 0 ? read(fsfd, msg, sizeof(msg) - 1) : -1;
	msg[n > 0 ? n : 0] = '\0';
	return error_set_errno(err, e, "mount %s on %s%s%s", LOOPFS_TYPE, dev, msg[0] ? ": " : "",
			       msg);
}

int loopfs_mount(const char *path, struct error *err)
{
	_cleanup_close_ int image = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (image < 0)
		return error_set_errno(err, errno, "%s", path);
	int r = lock_image(image, path, err);
	if (r < 0)
		return r;
	char dev[64];
	/* from here the loop device holds the image's open file, and so the lock */
	_cleanup_close_ int loop = bind_loop(image, dev, sizeof(dev), err);
	if (loop < 0)
		return loop;
	_cleanup_close_ int fsfd = fsopen(LOOPFS_TYPE, FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return error_set_errno(err, errno, "fsopen %s", LOOPFS_TYPE);
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    fsconfig(fsfd, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
	    /* mke2fs left the inode tables to be zeroed lazily: a sparse file reads zeros */
	    fsconfig(fsfd, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return fs_error(fsfd, errno, dev, err);
	int tree = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (tree < 0)
		return fs_error(fsfd, errno, dev, err);
	/* closing loop and image now leaves the mount their only user: autoclear */
	return tree;
}
