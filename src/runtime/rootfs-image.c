/*
 * rootfs-image.c - / as an overlay of an image's tree: see spec.h
 * (image_tree) and rootfs-internal.h.
 */
#include "runtime/rootfs-internal.h"

#include "base/cleanup.h"
#include "base/fdpass.h"
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

/*
 * The runtime's own entries are made in the upper layer before the
 * overlay exists, as plain tmpfs writes: through the overlay, each would
 * look the lower layer up, and /etc's files would be copied up and
 * whited out first (together about a third of what an image's root added
 * to a create). A directory of ours over one of the image's takes its
 * mode and owner, as a copy-up would, and the two merge; over anything
 * else of the image's (a symlink, a file) ours hides it, so an image
 * cannot send a mount or a write out of its root. The lower layer is
 * read without following a symlink.
 */

/*
 * path (relative, canonical: spec_validate() saw to it) as directories in
 * upper. With mount_point, its last one is only where a mount goes: made
 * as it is, the image's not looked at, since nothing sees it.
 */
static int upper_dirs(int upper, int lower, const char *path, bool mount_point, struct error *err)
{
	char buf[SPEC_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	_cleanup_close_ int ud = openat(upper, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int ld = openat(lower, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ud < 0 || ld < 0)
		return error_set_errno(err, errno, "image root: open its layers");
	char *save = NULL;
	for (char *name = strtok_r(buf, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
		struct stat st;
		bool last = !save || !*save;
		bool over = !(mount_point && last) && ld >= 0 &&
			    fstatat(ld, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
		if (mkdirat(ud, name, 0755) == 0) {
			if (over &&
			    (fchmodat(ud, name, st.st_mode & 07777, 0) < 0 ||
			     fchownat(ud, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0))
				return error_set_errno(err, errno, "image root: /%s as the image's",
						       path);
		} else if (errno != EEXIST) {
			return error_set_errno(err, errno, "image root: mkdir /%s", path);
		}
		if (last)
			break;
		int next = openat(ud, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return error_set_errno(err, errno, "image root: open /%s", path);
		close(ud);
		ud = next;
		next = over ? openat(ld, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
		CLOSE_FD(ld);
		ld = next;
	}
	return 0;
}

/* A new file of ours in etc_dfd holding text. */
static int etc_file(int etc_dfd, const char *name, const char *text, struct error *err)
{
	_cleanup_close_ int fd =
	    openat(etc_dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return error_set_errno(err, errno, "image root: create /etc/%s", name);
	int r = write_all(fd, text, strlen(text));
	if (r < 0)
		return error_set_errno(err, -r, "image root: write /etc/%s", name);
	return 0;
}

static int prepare_upper(const struct launch_ctx *ctx, int data_dfd, struct error *err)
{
	static const char *const mount_points[] = {"dev", "proc", "tmp"};
	_cleanup_close_ int upper = openat(data_dfd, UPPER, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int lower = openat(data_dfd, LOWER, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (upper < 0 || lower < 0)
		return error_set_errno(err, errno, "image root: open its layers");
	int r;
	for (size_t i = 0; i < ELEMENTSOF(mount_points); i++)
		if (mkdirat(upper, mount_points[i], 0755) < 0)
			return error_set_errno(err, errno, "image root: mkdir /%s",
					       mount_points[i]);
	if ((r = upper_dirs(upper, lower, "etc", false, err)) < 0 ||
	    (r = upper_dirs(upper, lower, ctx->spec->workdir + 1, true, err)) < 0)
		return r;
	for (size_t i = 0; i < ctx->nvolumes; i++) {
		char dir[SPEC_PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", ctx->volumes[i].target + 1);
		char *slash = strrchr(dir, '/');
		bool is_dir = ctx->volumes[i].is_dir;
		if (!is_dir) /* a file's mount point: its parent */
			*(slash ? slash : dir) = '\0';
		if (dir[0] && (r = upper_dirs(upper, lower, dir, is_dir, err)) < 0)
			return r;
	}
	_cleanup_close_ int etc =
	    openat(upper, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return error_set_errno(err, errno, "image root: open /etc");
	if ((r = etc_file(etc, "hosts", ROOTFS_ETC_HOSTS, err)) < 0 ||
	    (r = etc_file(etc, "hostname", ROOTFS_ETC_HOSTNAME, err)) < 0 ||
	    (r = etc_file(etc, "resolv.conf", ROOTFS_ETC_RESOLV, err)) < 0)
		return r;
	return 0;
}

/* The image's tree, from the launcher (send_image_tree() in launch.c). */
static int receive_tree(const struct launch_ctx *ctx, struct error *err)
{
	char c = 0;
	int tree = -1;
	size_t n = 0;
	ssize_t len = fdpass_recv(ctx->sync_fd, &c, 1, 0, &tree, 1, &n, NULL);
	if (len == 1 && c == 'i' && n == 1)
		return tree;
	if (n)
		close(tree);
	return error_set(err, len < 0 ? (int)-len : EPROTO,
			 "image root: the launcher sent no tree");
}

int rootfs_image_overlay(const struct launch_ctx *ctx, int data_dfd, int *ret_root, int *ret_upper,
			 struct error *err)
{
	static const char *const dirs[] = {LOWER, UPPER, OVL_WORK};
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if (mkdirat(data_dfd, dirs[i], 0755) < 0)
			return error_set_errno(err, errno, "image root: mkdir %s", dirs[i]);
	_cleanup_close_ int tree = receive_tree(ctx, err);
	if (tree < 0)
		return tree;
	if (move_mount(tree, "", data_dfd, LOWER, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return error_set_errno(err, errno, "image root: attach the image");
	CLOSE_FD(tree);
	int r = prepare_upper(ctx, data_dfd, err);
	if (r < 0)
		return r;
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
	/*
	 * The overlay holds its own private copy of the lower layer. The one
	 * attached at LOWER goes with the data tmpfs, which the caller
	 * detaches whole: one detach, so one RCU grace period, for both.
	 */
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
