/*
 * init.c - pid 1 of a sandbox: finish the isolation, run the command,
 * reap, report, exit.
 *
 * Order matters, and each step is what it is for a reason:
 *  0. forget the launcher (its argv and environment came with our copy of
 *     its memory); join our cgroup (v1; on v2 clone3 put us there), a new
 *     cgroup namespace rooted at it, a new net namespace: all while the
 *     launcher maps our ids
 *  1. wait for the launcher's go (ids mapped); EOF = it died
 *  2. become root of the new user namespace
 *  3. hostname, lo up, root file system, pivot_root     (rootfs.c)
 *  4. rlimits while hard limits may still be set          (privs.c)
 *  5. Landlock, then drop to uid 1000 with no capabilities (landlock.c, privs.c),
 *     or, for user root, keep uid 0 with PRIVS_ROOT_CAPS alone; then create
 *     spec->files as that user
 *  6. parent-death signal and non-dumpable again (credential changes
 *     reset both), then close every fd but 0-2 and the status pipe (and,
 *     in serve mode, the control socket; 0-2 become /dev/null)
 *  7. seccomp last, then fork the command and reap until it exits, or,
 *     in serve mode, answer requests until the launcher hangs up
 *     (serve-init.c)
 *
 * A failure anywhere is sent to the launcher as one LAUNCH_MSG_SETUP_FAILED
 * record and init exits; the launcher turns it into exit status 125.
 */
#include "base/cleanup.h"
#include "base/fdpass.h"
#include "base/fileio.h"
#include "runtime/landlock.h"
#include "runtime/launch-internal.h"
#include "runtime/privs.h"
#include "runtime/rootfs.h"
#include "seccomp/seccomp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int syscall_close_range(unsigned first)
{
	return close_range(first, ~0U, 0);
}

static void send_msg(int fd, enum launch_msg_type type, int code, const char *text)
{
	struct launch_msg msg = {.type = type, .code = code};
	snprintf(msg.text, sizeof(msg.text), "%s", text ? text : "");
	(void)write_all(fd, &msg, sizeof(msg));
}

static _Noreturn void fail(int fd, const struct error *err)
{
	send_msg(fd, LAUNCH_MSG_SETUP_FAILED, err->code ? err->code : EIO, err->msg);
	_exit(125);
}

static int bring_up_lo(struct error *err)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return error_set_errno(err, errno, "socket for lo");
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return error_set_errno(err, errno, "read lo flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return error_set_errno(err, errno, "bring lo up");
	return 0;
}

static int enter_namespaces(struct error *err)
{
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return error_set_errno(err, errno, "become root of the user namespace");
	if (sethostname(SANDBOX_HOSTNAME, strlen(SANDBOX_HOSTNAME)) < 0)
		return error_set_errno(err, errno, "sethostname");
	return bring_up_lo(err);
}

/*
 * An image root is writable where its own permissions allow: Landlock
 * grants every real directory and file at its top (not symlinks: one
 * could name /proc), but /dev and /proc, whose writes stay refused. A new
 * entry at the top itself is refused. Up to ROOTFS_IMAGE_TOP_MAX entries.
 *
 * The names are packed ("/NAME\0" each), so pid 1 touches only the pages
 * they fill, and listed with getdents64() into the stack: readdir()'s
 * 32 KiB buffer would be malloc'd in pid 1, which lives as long as the
 * sandbox, and the pages would stay charged to it.
 */
static char image_top[ROOTFS_IMAGE_TOP_MAX * (NAME_MAX + 2)];

/* name's type: the directory entry's, or lstat's where the file system gives none */
static unsigned char entry_type(int dfd, const char *name, unsigned char type)
{
	struct stat st;
	if (type != DT_UNKNOWN)
		return type;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return DT_UNKNOWN;
	return S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
}

static int image_writable(const char **writable, size_t *n, struct error *err)
{
	_cleanup_close_ int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "landlock: list /");
	char buf[4096] __attribute__((aligned(8)));
	size_t used = 0, count = 0;
	ssize_t len;
	while ((len = getdents64(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < len;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);
			const char *name = de->d_name;
			off += de->d_reclen;
			if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
			    strcmp(name, "dev") == 0 || strcmp(name, "proc") == 0)
				continue;
			unsigned char type = entry_type(fd, name, de->d_type);
			if (type != DT_DIR && type != DT_REG)
				continue;
			if (count == ROOTFS_IMAGE_TOP_MAX)
				return error_set(err, E2BIG,
						 "the image's / has more than %d entries",
						 ROOTFS_IMAGE_TOP_MAX);
			int k = snprintf(image_top + used, sizeof(image_top) - used, "/%s", name);
			writable[(*n)++] = image_top + used;
			used += (size_t)k + 1;
			count++;
		}
	}
	return len < 0 ? error_set_errno(err, errno, "landlock: list /") : 0;
}

/*
 * An image's WorkingDir (spec->cwd) need not be in its tree: made now,
 * as root of the namespace in the writable overlay (mode 0755), as other
 * runtimes do. Without an image, cwd must already be there.
 */
static int make_cwd(const struct spec *spec, struct error *err)
{
	if (!spec->cwd || !spec->image_tree)
		return 0;
	int r = mkdir_p_at(AT_FDCWD, spec->cwd, 0755);
	return r < 0 ? error_set_errno(err, -r, "the image's WorkingDir %s", spec->cwd) : 0;
}

static int restrict_files(const struct launch_ctx *ctx, struct error *err)
{
	const char *writable[3 + SPEC_VOLUMES_MAX + ROOTFS_IMAGE_TOP_MAX];
	size_t n = 0;
	writable[n++] = "/tmp";
	writable[n++] = "/dev/shm";
	writable[n++] = ctx->spec->workdir;
	for (size_t i = 0; i < ctx->nvolumes; i++)
		if (!ctx->volumes[i].read_only)
			writable[n++] = ctx->volumes[i].target;
	int r;
	if (ctx->spec->image_tree && (r = image_writable(writable, &n, err)) < 0)
		return r;
	r = landlock_apply(writable, n, err);
	return r == -EOPNOTSUPP ? 0 : r; /* absent: the other layers stand alone */
}

/* Step 5's drop: to the command's user, or (user root) to root's few caps. */
static int drop_privileges(const struct spec *spec, struct error *err)
{
	if (spec->user == SPEC_USER_ROOT)
		return privs_keep_root(err);
	uid_t uid;
	gid_t gid;
	spec_command_ids(spec, &uid, &gid);
	return privs_drop(uid, gid, err);
}

/*
 * spec->export_dirs: the workdir and /tmp as just mounted, to the
 * launcher on the go socket (sandbox_take_dirs()), before anything of the
 * sandbox's own runs. O_PATH: they open nothing, they only hold.
 */
static int export_dirs(const struct launch_ctx *ctx, struct error *err)
{
	if (!ctx->spec->export_dirs || ctx->spec->serve)
		return 0;
	_cleanup_close_ int work =
	    open(ctx->spec->workdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int tmp = open("/tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (work < 0 || tmp < 0)
		return error_set_errno(err, errno, "open the workdir and /tmp");
	int fds[2] = {work, tmp};
	union fdpass_buf buf;
	struct iovec iov = {.iov_base = "d", .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	fdpass_attach(&mh, &buf, fds, 2);
	if (sendmsg(ctx->sync_fd, &mh, MSG_NOSIGNAL) != 1)
		return error_set_errno(err, errno, "hand the workdir and /tmp over");
	return 0;
}

/*
 * An input's bytes, from its fd (a file of the host's, opened read-only
 * outside) into out: sendfile() between files, in the kernel, so the
 * pages written are this cgroup's. 0, or -errno (ENOSPC: the sandbox's
 * disk is full; EIO: the input is shorter than it was when checked).
 */
static int copy_input(const struct spec_file *f, int out)
{
	off_t off = (off_t)f->offset;
	uint64_t left = f->len;
	while (left > 0) {
		ssize_t n = sendfile(out, f->fd, &off, left > (1u << 30) ? (1u << 30) : left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		left -= (uint64_t)n;
	}
	return 0;
}

/* Does a file after spec->files[i] read the same input fd (parts of one tar)? */
static bool fd_used_after(const struct spec *spec, size_t i)
{
	for (size_t k = i + 1; k < spec->nfiles; k++)
		if (spec->files[k].from_fd && spec->files[k].fd == spec->files[i].fd)
			return true;
	return false;
}

/*
 * Create spec->files, as the sandbox user (after the drop), so they belong
 * to it; their parents are made as needed. Paths were checked to lie under
 * the workdir or /tmp.
 */
static int place_files(const struct spec *spec, struct error *err)
{
	for (size_t i = 0; i < spec->nfiles; i++) {
		const struct spec_file *f = &spec->files[i];
		char parent[SPEC_PATH_MAX];
		snprintf(parent, sizeof(parent), "%s", f->path);
		*strrchr(parent, '/') = '\0';
		int r = mkdir_p_at(AT_FDCWD, parent, 0755);
		if (r < 0)
			return error_set_errno(err, -r, "files: create %s", parent);
		_cleanup_close_ int fd =
		    open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			return error_set_errno(err, errno, "files: create %s", f->path);
		if ((r = f->from_fd ? copy_input(f, fd) : write_all(fd, f->data, f->len)) < 0)
			return error_set_errno(err, -r, "files: write %s", f->path);
		if (f->from_fd && !fd_used_after(spec, i))
			close(f->fd); /* nothing of the host's disk stays open in pid 1 */
	}
	return 0;
}

/*
 * Forget the launcher. Our memory is a copy of its own, argv and environ
 * strings included (host paths, and whatever its caller put in its
 * environment), and the kernel shows those bytes as /proc/1/cmdline and
 * /proc/1/environ for as long as we live. So: no environ, both areas
 * zeroed in place, our name where argv[0] was, and our comm. Nothing in
 * ctx points into these areas (launch-internal.h).
 *
 * The kernel reads all of [arg_start, arg_end) for cmdline, so that is our
 * name and NULs, and environ all NULs; PR_SET_MM_MAP (no capability
 * needed, but CONFIG_CHECKPOINT_RESTORE) then shrinks them to the name
 * alone and nothing. Where it fails, the zeroed areas are what shows.
 */
static void forget_launcher(const struct prctl_mm_map *layout)
{
	clearenv();
	memset((void *)(uintptr_t)layout->arg_start, 0, layout->arg_end - layout->arg_start);
	memset((void *)(uintptr_t)layout->env_start, 0, layout->env_end - layout->env_start);
	size_t len = sizeof(INIT_PROC_NAME); /* with its NUL, which the area ends with */
	if (len > layout->arg_end - layout->arg_start)
		len = layout->arg_end - layout->arg_start;
	memcpy((void *)(uintptr_t)layout->arg_start, INIT_PROC_NAME, len - 1);

	struct prctl_mm_map mm = *layout;
	mm.brk = (uint64_t)syscall(SYS_brk, 0); /* ours as it is: unchanged */
	mm.arg_end = mm.arg_start + len;
	mm.env_start = mm.env_end = mm.arg_end;
	(void)prctl(PR_SET_MM, PR_SET_MM_MAP, &mm, sizeof(mm), 0);
	(void)prctl(PR_SET_NAME, INIT_PROC_NAME, 0, 0, 0);
}

/* The command of a run: in its cwd or the workdir, with the sandbox's environment. */
static _Noreturn void run_command(const struct launch_ctx *ctx)
{
	init_child_reset_signals();
	const char *cwd = ctx->spec->cwd ? ctx->spec->cwd : ctx->spec->workdir;
	if (chdir(cwd) < 0) {
		send_msg(INIT_STATUS_FD, LAUNCH_MSG_EXEC_FAILED, errno, cwd);
		_exit(126);
	}
	int e = init_child_exec(ctx->spec->argv, ctx->envp);
	send_msg(INIT_STATUS_FD, LAUNCH_MSG_EXEC_FAILED, e, ctx->spec->argv[0]);
	_exit(e == ENOENT ? 127 : 126);
}

/* Reap every child; return the command's wait status once it has exited. */
static int reap_until(pid_t cmd)
{
	for (;;) {
		int status;
		pid_t p = waitpid(-1, &status, 0);
		if (p == cmd)
			return status;
		if (p < 0 && errno != EINTR)
			return 0;
	}
}

_Noreturn void init_main(struct launch_ctx *ctx)
{
	struct error err = {0};
	char go;

	forget_launcher(&ctx->layout);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	if (dup3(ctx->status_fd, INIT_STATUS_FD, O_CLOEXEC) < 0)
		_exit(125);
	/* A daemon that shields itself from the OOM killer must not shield us. */
	(void)write_file_at(AT_FDCWD, "/proc/self/oom_score_adj", "0");
	int r = cgroup_join_self(&ctx->join);
	if (r < 0) {
		error_set_errno(&err, -r, "join the sandbox's cgroup");
		fail(INIT_STATUS_FD, &err);
	}
	/* a networked sandbox's namespace came with the clone: see clone_init() */
	if (unshare(CLONE_NEWCGROUP | (ctx->spec->network_attach ? 0 : CLONE_NEWNET)) < 0) {
		error_set_errno(&err, errno, "new cgroup and network namespaces");
		fail(INIT_STATUS_FD, &err);
	}
	if (read(ctx->sync_fd, &go, 1) != 1)
		_exit(125); /* the launcher is gone */
	umask(022);

	int upper = -1;
	if (enter_namespaces(&err) < 0 || rootfs_setup(ctx, &upper, &err) < 0 ||
	    make_cwd(ctx->spec, &err) < 0 || export_dirs(ctx, &err) < 0 ||
	    privs_set_rlimits(ctx->spec, &err) < 0 || restrict_files(ctx, &err) < 0 ||
	    drop_privileges(ctx->spec, &err) < 0 || place_files(ctx->spec, &err) < 0)
		fail(INIT_STATUS_FD, &err);

	/* Credential changes cleared both; nothing of ours may be inspected from inside. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0) {
		error_set_errno(&err, errno, "prctl");
		fail(INIT_STATUS_FD, &err);
	}
	/* The launcher may have died before the death signal was armed again. */
	struct pollfd pfd = {.fd = ctx->sync_fd, .events = POLLIN};
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLIN)))
		_exit(125);
	if (setsid() < 0) {
		error_set_errno(&err, errno, "setsid");
		fail(INIT_STATUS_FD, &err);
	}
	if (ctx->spec->serve && serve_init_prepare(ctx->control_fd, &err) < 0)
		fail(INIT_STATUS_FD, &err);
	/* a served image's upper layer stays at INIT_UPPER_FD (close-on-exec), for a commit */
	int last = ctx->spec->serve ? INIT_CONTROL_FD : INIT_STATUS_FD;
	if (ctx->spec->serve && upper >= 0 &&
	    (upper == INIT_UPPER_FD || dup3(upper, INIT_UPPER_FD, O_CLOEXEC) == INIT_UPPER_FD))
		last = INIT_UPPER_FD;
	if (syscall_close_range(last + 1) < 0) {
		error_set_errno(&err, errno, "close fds");
		fail(INIT_STATUS_FD, &err);
	}

	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	if (seccomp_install(&err) < 0)
		fail(INIT_STATUS_FD, &err);
	if (ctx->spec->serve) {
		(void)serve_init_run(&err); /* returns only if it cannot start */
		fail(INIT_STATUS_FD, &err);
	}

	pid_t cmd = fork();
	if (cmd < 0) {
		error_set_errno(&err, errno, "fork the command");
		fail(INIT_STATUS_FD, &err);
	}
	if (cmd == 0)
		run_command(ctx);
	int status = reap_until(cmd);
	send_msg(INIT_STATUS_FD, LAUNCH_MSG_EXIT, status, NULL);
	_exit(0);
}
