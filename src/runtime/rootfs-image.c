/*
 * rootfs-image.c - / as an overlay of an image's tree: see spec.h
 * (image_tree) and rootfs-internal.h.
 */
#include "runtime/rootfs-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Names in the data tmpfs, beside tmp, shm and work (rootfs.c). */
#define LOWER	  "root-lower" /* the image, attached only while the overlay is made */
#define UPPER	  "root-upper"
#define OVL_WORK  "root-work"
#define LOG_BYTES 256

/* The overlay's own words on why it refused (the fs context's log), if any. */
static int fs_fail(int fsfd, int e, const char *what, struct error *err)
{
	char log[LOG_BYTES];
	ssize_t n = read(fsfd, log, sizeof(log) - 1);
	if (n <= 0)
		return error_set_errno(err, e, "image root: %s", what);
	log[n] = '\0';
	log[strcspn(log, "\n")] = '\0';
	return error_set_errno(err, e, "image root: %s (%s)", what, log);
}

int rootfs_image_overlay(int data_dfd, int *image_fd, int *ret_root, int *ret_upper,
			 struct error *err)
{
	static const char *const dirs[] = {LOWER, UPPER, OVL_WORK};
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if (mkdirat(data_dfd, dirs[i], 0755) < 0)
			return error_set_errno(err, errno, "image root: mkdir %s", dirs[i]);
	if (move_mount(*image_fd, "", data_dfd, LOWER, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return error_set_errno(err, errno, "image root: attach the image");
	CLOSE_FD(*image_fd);
	/* the layers are named relative to the data tmpfs: no path escaping */
	if (fchdir(data_dfd) < 0)
		return error_set_errno(err, errno, "image root: chdir");
	_cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return error_set_errno(err, errno, "image root: this kernel has no overlayfs");
	/* userxattr: its own user.overlay.* attributes, the only ones a user
	 * namespace may set; the tmpfs has them */
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", LOWER, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", UPPER, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "workdir", OVL_WORK, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
		return fs_fail(fs, errno, "overlay options", err);
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return fs_fail(fs, errno, "cannot mount the overlay", err);
	int root = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (root < 0)
		return fs_fail(fs, errno, "cannot mount the overlay", err);
	/* the overlay holds its own private copy of the lower layer */
	if (umount2(LOWER, MNT_DETACH) < 0) {
		int e = errno;
		close(root);
		return error_set_errno(err, e, "image root: detach the image");
	}
	int upper = openat(data_dfd, UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (upper < 0) {
		int e = errno;
		close(root);
		return error_set_errno(err, e, "image root: open the upper layer");
	}
	*ret_root = root;
	*ret_upper = upper;
	return 0;
}

/*
 * path (relative, canonical: spec_validate() saw to it) as real
 * directories all the way down, from the cwd.
 */
static int ensure_dir(const char *path, struct error *err)
{
	char buf[SPEC_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	_cleanup_close_ int dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return error_set_errno(err, errno, "image root: open /");
	char *save = NULL;
	for (char *name = strtok_r(buf, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
		struct stat st;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
		    unlinkat(dfd, name, 0) < 0)
			return error_set_errno(err, errno, "image root: remove /%s", path);
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
			return error_set_errno(err, errno, "image root: mkdir /%s", path);
		int next = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return error_set_errno(err, errno, "image root: open /%s", path);
		close(dfd);
		dfd = next;
	}
	return 0;
}

/* Replace name in etc_dfd with a new file of ours holding text. */
static int replace_file(int etc_dfd, const char *name, const char *text, struct error *err)
{
	if (unlinkat(etc_dfd, name, 0) < 0 && errno != ENOENT)
		return error_set_errno(err, errno, "image root: remove /etc/%s", name);
	_cleanup_close_ int fd =
	    openat(etc_dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return error_set_errno(err, errno, "image root: create /etc/%s", name);
	int r = write_all(fd, text, strlen(text));
	if (r < 0)
		return error_set_errno(err, -r, "image root: write /etc/%s", name);
	return 0;
}

int rootfs_image_prepare(const struct launch_ctx *ctx, struct error *err)
{
	static const char *const dirs[] = {"dev", "proc", "tmp", "etc"};
	int r;
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if ((r = ensure_dir(dirs[i], err)) < 0)
			return r;
	if ((r = ensure_dir(ctx->spec->workdir + 1, err)) < 0)
		return r;
	for (size_t i = 0; i < ctx->nvolumes; i++) {
		char dir[SPEC_PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", ctx->volumes[i].target + 1);
		char *slash = strrchr(dir, '/');
		if (!ctx->volumes[i].is_dir) /* a file's mount point: its parent */
			*(slash ? slash : dir) = '\0';
		if (dir[0] && (r = ensure_dir(dir, err)) < 0)
			return r;
	}
	_cleanup_close_ int etc = open("etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return error_set_errno(err, errno, "image root: open /etc");
	if ((r = replace_file(etc, "hosts", ROOTFS_ETC_HOSTS, err)) < 0 ||
	    (r = replace_file(etc, "hostname", ROOTFS_ETC_HOSTNAME, err)) < 0 ||
	    (r = replace_file(etc, "resolv.conf", ROOTFS_ETC_RESOLV, err)) < 0)
		return r;
	return 0;
}
