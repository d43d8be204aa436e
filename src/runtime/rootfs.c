#include "runtime/rootfs.h"
#include "runtime/rootfs-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The small tmpfs holding /etc and the mount points; read-only at the end. */
#define ROOT_TMPFS_OPTS "size=1m,nr_inodes=4096,mode=0755"
#define DEV_TMPFS_OPTS	"size=64k,nr_inodes=128,mode=0755"
/* One inode per 4 KiB of --disk: a million empty files cannot pin memory. */
#define DATA_INODE_BYTES 4096ULL

static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
/* Files in /proc that reveal or change the host kernel: covered with /dev/null. */
static const char *const proc_masked_files[] = {
    "proc/kcore",      "proc/keys",	     "proc/timer_list",	   "proc/sched_debug",
    "proc/kallsyms",   "proc/latency_stats", "proc/sysrq-trigger", "proc/kpagecount",
    "proc/kpageflags", "proc/kpagecgroup",   "proc/config.gz",
};
/* Directories in /proc: covered with an empty read-only tmpfs. */
static const char *const proc_masked_dirs[] = {"proc/acpi", "proc/scsi", "proc/asound",
					       "proc/driver"};
/* Directories in /proc made read-only. */
static const char *const proc_readonly[] = {"proc/sys", "proc/irq", "proc/bus", "proc/fs"};
/* Host /etc entries a default sandbox reads: the loader cache and Debian's alternatives. */
static const char *const etc_from_host[] = {"ld.so.cache", "alternatives", "localtime",
					    "ssl/certs"};

static int set_attr(const char *path, uint64_t set, unsigned flags)
{
	struct mount_attr attr = {.attr_set = set};
	if (mount_setattr(AT_FDCWD, path, flags, &attr, sizeof(attr)) < 0)
		return -errno;
	return 0;
}

/* Bind src (a host path, or one in the tree) onto dst, read-only, recursively. */
static int bind_ro(const char *src, const char *dst, struct error *err)
{
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return error_set_errno(err, errno, "bind %s", src);
	int r =
	    set_attr(dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, AT_RECURSIVE);
	if (r < 0)
		return error_set_errno(err, -r, "make %s read-only", dst);
	return 0;
}

static int touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Recreate the host entry /name at name: a symlink as a symlink, else a read-only bind. */
static int mirror_entry(const char *host_dir, const char *name, struct error *err)
{
	char src[PATH_MAX];
	struct stat st;
	snprintf(src, sizeof(src), "%s/%s", host_dir, name);
	if (lstat(src, &st) < 0)
		return errno == ENOENT ? 0 : error_set_errno(err, errno, "stat %s", src);
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return error_set_errno(err, errno, "readlink %s", src);
		target[n] = '\0';
		if (symlink(target, name) < 0)
			return error_set_errno(err, errno, "symlink %s", name);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(name, 0755) < 0 && errno != EEXIST)
			return error_set_errno(err, errno, "mkdir %s", name);
	} else if (S_ISREG(st.st_mode)) {
		int r = touch(name);
		if (r < 0)
			return error_set_errno(err, -r, "create %s", name);
	} else {
		return 0; /* devices, sockets, fifos of an image are not carried over */
	}
	return bind_ro(src, name, err);
}

static int populate_host(struct error *err)
{
	static const char *const top[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"};
	int r;
	for (size_t i = 0; i < ELEMENTSOF(top); i++)
		if ((r = mirror_entry("", top[i], err)) < 0)
			return r;
	if (mkdir("etc", 0755) < 0)
		return error_set_errno(err, errno, "mkdir etc");
	static const struct {
		const char *name, *text;
	} files[] = {
	    {"etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
			   "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	    {"etc/group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"},
	    {"etc/hosts", ROOTFS_ETC_HOSTS},
	    {"etc/hostname", ROOTFS_ETC_HOSTNAME},
	    {"etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n"},
	    {"etc/resolv.conf", ROOTFS_ETC_RESOLV},
	};
	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		if ((r = create_file_at(AT_FDCWD, files[i].name, files[i].text, 0644)) < 0)
			return error_set_errno(err, -r, "write %s", files[i].name);
	/* the host's trusted CAs (their files live under /usr): TLS clients verify */
	if (mkdir("etc/ssl", 0755) < 0)
		return error_set_errno(err, errno, "mkdir etc/ssl");
	for (size_t i = 0; i < ELEMENTSOF(etc_from_host); i++) {
		char name[64];
		snprintf(name, sizeof(name), "etc/%s", etc_from_host[i]);
		if ((r = mirror_entry("", name, err)) < 0)
			return r;
	}
	return 0;
}

/* A mount point for a directory tree, or (is_dir false) for one file. */
static int make_mount_point(const char *target, bool is_dir)
{
	if (is_dir)
		return mkdir_p_at(AT_FDCWD, target, 0755);
	char parent[SPEC_PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", target);
	char *slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		int r = mkdir_p_at(AT_FDCWD, parent, 0755);
		if (r < 0)
			return r;
	}
	return touch(target);
}

static int attach_tree_at(int *tree_fd, const char *target, bool is_dir, struct error *err)
{
	int r = make_mount_point(target, is_dir);
	if (r < 0)
		return error_set_errno(err, -r, "create mount point /%s", target);
	if (move_mount(*tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return error_set_errno(err, errno, "mount /%s", target);
	CLOSE_FD(*tree_fd);
	return 0;
}

static int attach_tree(int *tree_fd, const char *target, struct error *err)
{
	return attach_tree_at(tree_fd, target, true, err);
}

/*
 * Every top-level entry of an image, read-only; the sandbox's own mounts
 * are skipped. The launcher opened the image (tree_fd); it is attached at
 * a hidden staging directory while we copy its entries, then removed.
 */
#define IMAGE_STAGING ".agentbox-image"
static int populate_image(int *tree_fd, struct error *err)
{
	static const char *const skip[] = {".", "..", "proc", "sys", "dev", "tmp"};
	const char *image = IMAGE_STAGING;
	int r = attach_tree(tree_fd, image, err);
	if (r < 0)
		return r;
	DIR *d = opendir(image);
	if (!d)
		return error_set_errno(err, errno, "--rootfs: cannot list the image");
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		bool skipped = false;
		for (size_t i = 0; i < ELEMENTSOF(skip); i++)
			skipped = skipped || strcmp(de->d_name, skip[i]) == 0;
		if (!skipped)
			r = mirror_entry(image, de->d_name, err);
	}
	closedir(d);
	if (r == 0 && (umount2(image, MNT_DETACH) < 0 || rmdir(image) < 0))
		r = error_set_errno(err, errno, "--rootfs: cannot remove the staging mount");
	return r;
}

/*
 * The writable storage: one tmpfs, cut into detached trees for /tmp,
 * /dev/shm and the workdir, so all three share the --disk size; with an
 * image (image_root), the overlay whose upper layer is in it too.
 */
struct data_trees {
	int tmp, shm, work, root, upper;
};

static int make_data_trees(const struct launch_ctx *ctx, bool image_root, struct data_trees *ret,
			   struct error *err)
{
	const char *mnt_dir = ctx->mnt_dir;
	uint64_t disk = ctx->spec->disk_bytes;
	char opts[128];
	snprintf(opts, sizeof(opts), "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=0755", disk,
		 (uint64_t)(disk / DATA_INODE_BYTES + 64));
	if (mount("tmpfs", mnt_dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return error_set_errno(err, errno, "mount the data tmpfs");
	_cleanup_close_ int dfd = open(mnt_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return error_set_errno(err, errno, "open the data tmpfs");
	static const char *const names[] = {"tmp", "shm", "work"};
	uid_t uid; /* the workdir is the command's user's */
	gid_t gid;
	spec_command_ids(ctx->spec, &uid, &gid);
	int *fds[] = {&ret->tmp, &ret->shm, &ret->work};
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		bool is_work = i == 2;
		if (mkdirat(dfd, names[i], 0755) < 0 ||
		    fchmodat(dfd, names[i], is_work ? 0755 : 01777, 0) < 0 ||
		    (is_work && fchownat(dfd, names[i], uid, gid, 0) < 0))
			return error_set_errno(err, errno, "prepare %s", names[i]);
		*fds[i] = open_tree(dfd, names[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (*fds[i] < 0)
			return error_set_errno(err, errno, "clone %s", names[i]);
	}
	int r;
	if (image_root && (r = rootfs_image_overlay(ctx, dfd, &ret->root, &ret->upper, err)) < 0)
		return r;
	if (umount2(mnt_dir, MNT_DETACH) < 0)
		return error_set_errno(err, errno, "detach the data tmpfs");
	return 0;
}

static int setup_dev(int *shm_fd, struct error *err)
{
	if ((mkdir("dev", 0755) < 0 && errno != EEXIST) ||
	    mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC | MS_NODEV, DEV_TMPFS_OPTS) < 0)
		return error_set_errno(err, errno, "mount /dev");
	for (size_t i = 0; i < ELEMENTSOF(devices); i++) {
		char src[32], dst[32];
		snprintf(src, sizeof(src), "/dev/%s", devices[i]);
		snprintf(dst, sizeof(dst), "dev/%s", devices[i]);
		int r = touch(dst);
		if (r < 0)
			return error_set_errno(err, -r, "create %s", dst);
		/* the one place without nodev: these six nodes must work */
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return error_set_errno(err, errno, "bind %s", src);
	}
	if (mkdir("dev/pts", 0755) < 0 ||
	    mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		return error_set_errno(err, errno, "mount /dev/pts");
	static const struct {
		const char *target, *name;
	} links[] = {
	    {"pts/ptmx", "dev/ptmx"},	       {"/proc/self/fd", "dev/fd"},
	    {"/proc/self/fd/0", "dev/stdin"},  {"/proc/self/fd/1", "dev/stdout"},
	    {"/proc/self/fd/2", "dev/stderr"},
	};
	for (size_t i = 0; i < ELEMENTSOF(links); i++)
		if (symlink(links[i].target, links[i].name) < 0)
			return error_set_errno(err, errno, "symlink %s", links[i].name);
	int r = attach_tree(shm_fd, "dev/shm", err);
	if (r < 0)
		return r;
	/* nosuid, noexec for everything below /dev; read-only for /dev itself */
	if ((r = set_attr("dev", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, AT_RECURSIVE)) < 0 ||
	    (r = set_attr("dev", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV, 0)) < 0)
		return error_set_errno(err, -r, "restrict /dev");
	return 0;
}

/* Must run before pivot_root: a new proc needs a visible one in the namespace. */
static int setup_proc(struct error *err)
{
	if ((mkdir("proc", 0555) < 0 && errno != EEXIST) ||
	    mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return error_set_errno(err, errno, "mount /proc");
	/* What this kernel lacks needs no mask: ENOENT is fine, anything else is not. */
	for (size_t i = 0; i < ELEMENTSOF(proc_masked_files); i++)
		if (mount("dev/null", proc_masked_files[i], NULL, MS_BIND, NULL) < 0 &&
		    errno != ENOENT)
			return error_set_errno(err, errno, "mask /%s", proc_masked_files[i]);
	for (size_t i = 0; i < ELEMENTSOF(proc_masked_dirs); i++)
		if (mount("tmpfs", proc_masked_dirs[i], "tmpfs",
			  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555") < 0 &&
		    errno != ENOENT)
			return error_set_errno(err, errno, "mask /%s", proc_masked_dirs[i]);
	for (size_t i = 0; i < ELEMENTSOF(proc_readonly); i++) {
		if (mount(proc_readonly[i], proc_readonly[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
			if (errno == ENOENT)
				continue;
			return error_set_errno(err, errno, "bind /%s", proc_readonly[i]);
		}
		int r = set_attr(proc_readonly[i],
				 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
				 AT_RECURSIVE);
		if (r < 0)
			return error_set_errno(err, -r, "make /%s read-only", proc_readonly[i]);
	}
	return 0;
}

int rootfs_setup(const struct launch_ctx *ctx, int *ret_upper, struct error *err)
{
	const struct spec *spec = ctx->spec;
	struct data_trees data = {-1, -1, -1, -1, -1};
	bool image_root = spec->image_tree != NULL;
	int r;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return error_set_errno(err, errno, "make mounts private");
	if ((r = make_data_trees(ctx, image_root, &data, err)) < 0)
		goto out;
	if (image_root) { /* / is the overlay, made ready: everything else goes in it */
		if (move_mount(data.root, "", AT_FDCWD, ctx->mnt_dir, MOVE_MOUNT_F_EMPTY_PATH) <
			0 ||
		    chdir(ctx->mnt_dir) < 0)
			r = error_set_errno(err, errno, "image root: attach the overlay");
	} else if (mount("tmpfs", ctx->mnt_dir, "tmpfs", MS_NOSUID | MS_NODEV, ROOT_TMPFS_OPTS) <
		       0 ||
		   chdir(ctx->mnt_dir) < 0) {
		r = error_set_errno(err, errno, "mount the root tmpfs");
	} else {
		int rootfs_fd = ctx->rootfs_fd;
		r = rootfs_fd >= 0 ? populate_image(&rootfs_fd, err) : populate_host(err);
	}
	if (r < 0)
		goto out;
	if ((r = attach_tree(&data.tmp, "tmp", err)) < 0 ||
	    (r = attach_tree(&data.work, spec->workdir + 1, err)) < 0 ||
	    (r = setup_dev(&data.shm, err)) < 0 || (r = setup_proc(err)) < 0)
		goto out;
	for (size_t i = 0; i < ctx->nvolumes; i++) {
		int fd = ctx->volumes[i].tree_fd;
		r = attach_tree_at(&fd, ctx->volumes[i].target + 1, ctx->volumes[i].is_dir, err);
		if (r < 0)
			goto out;
	}
	if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0) {
		r = error_set_errno(err, errno, "pivot_root");
		goto out;
	}
	/* an image's overlay stays writable: its upper layer is the sandbox's own */
	if (!image_root &&
	    (r = set_attr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0)) < 0)
		error_set_errno(err, -r, "make / read-only");
out:
	if (r >= 0)
		*ret_upper = TAKE_FD(data.upper);
	CLOSE_FD(data.upper);
	CLOSE_FD(data.root);
	CLOSE_FD(data.tmp);
	CLOSE_FD(data.shm);
	CLOSE_FD(data.work);
	return r < 0 ? r : 0;
}
