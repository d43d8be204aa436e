/*
 * launch.c - the outside half of a sandbox: start it, supervise it,
 * collect how it ended, and leave nothing behind. See sandbox.h.
 */
#include "runtime/sandbox.h"

#include "base/cleanup.h"
#include "base/fdpass.h"
#include "base/fileio.h"
#include "runtime/cgroup.h"
#include "runtime/idmap.h"
#include "runtime/launch-internal.h"
#include "runtime/loopfs.h"
#include "runtime/uidrange.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* struct clone_args as of Linux 5.7, spelled out to avoid header clashes. */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	    set_tid_size, cgroup;
};

/* The child's pipe ends live at or above this fd, clear of init's fixed fds. */
#define CHILD_FD_MIN 10

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

const char *sandbox_run_dir(void)
{
	const char *d = getenv("AGENTBOX_RUN_DIR");
	return d && d[0] == '/' ? d : SANDBOX_RUN_DIR_DEFAULT;
}

/*
 * The run dir may be passed through (0711) but not listed: init, already
 * in its user namespace, must reach mnt/ to mount its root there.
 */
static int ensure_run_dirs(const char *run_dir, char *mnt, size_t size, struct error *err)
{
	if (mkdir(run_dir, 0711) < 0 && errno != EEXIST)
		return error_set_errno(err, errno, "cannot create %s", run_dir);
	if (chmod(run_dir, 0711) < 0)
		return error_set_errno(err, errno, "cannot chmod %s", run_dir);
	snprintf(mnt, size, "%s/mnt", run_dir);
	if (mkdir(mnt, 0755) < 0 && errno != EEXIST)
		return error_set_errno(err, errno, "cannot create %s", mnt);
	return 0;
}

/*
 * Our memory layout (launch-internal.h): fields 26-28 and 45-51 of
 * /proc/self/stat, counted from the state (field 3) after the ')' that
 * ends comm, which may hold spaces.
 */
static int read_layout(struct prctl_mm_map *ret)
{
	char stat[2048];
	ssize_t n = read_file_at(AT_FDCWD, "/proc/self/stat", stat, sizeof(stat));
	if (n < 0)
		return (int)n;
	uint64_t f[52] = {0};
	const char *p = strrchr(stat, ')');
	for (int i = 3; i < 52; i++) {
		if (!p || !(p = strchr(p, ' ')))
			return -EBADMSG;
		p++;
		if (i < 26 || (i > 28 && i < 45))
			continue; /* not ours; some are signed */
		char *end;
		errno = 0;
		f[i] = strtoull(p, &end, 10);
		if (end == p || errno || (*end != ' ' && *end != '\n'))
			return -EBADMSG;
	}
	/* Zero when the kernel hides them; an area out of order is no area. */
	if (!f[48] || f[48] >= f[49] || f[50] > f[51])
		return -EBADMSG;
	*ret = (struct prctl_mm_map){.start_code = f[26],
				     .end_code = f[27],
				     .start_stack = f[28],
				     .start_data = f[45],
				     .end_data = f[46],
				     .start_brk = f[47],
				     .arg_start = f[48],
				     .arg_end = f[49],
				     .env_start = f[50],
				     .env_end = f[51],
				     .exe_fd = (uint32_t)-1};
	return 0;
}

/* One block filled in two passes: the first (base NULL) only measures. */
struct block {
	char *base;
	size_t used;
};

/* Room for len bytes aligned to align, src copied in; NULL while measuring. */
static void *block_put(struct block *b, const void *src, size_t len, size_t align)
{
	size_t at = (b->used + align - 1) / align * align;
	b->used = at + len;
	if (!b->base)
		return NULL;
	if (src && len)
		memcpy(b->base + at, src, len);
	return b->base + at;
}

static const char *block_str(struct block *b, const char *s)
{
	return s ? block_put(b, s, strlen(s) + 1, 1) : NULL;
}

static struct spec *copy_spec_pass(struct block *b, const struct spec *src)
{
	size_t argc = 0;
	while (src->argv && src->argv[argc])
		argc++;
	struct spec *dst = block_put(b, src, sizeof(*src), _Alignof(struct spec));
	const char **argv = block_put(b, NULL, (argc + 1) * sizeof(*argv), _Alignof(char *));
	struct volume *vols =
	    block_put(b, src->volumes, src->nvolumes * sizeof(*vols), _Alignof(struct volume));
	struct spec_file *files =
	    block_put(b, src->files, src->nfiles * sizeof(*files), _Alignof(struct spec_file));
	const char *workdir = block_str(b, src->workdir);
	const char *cwd = block_str(b, src->cwd);
	const char *rootfs = block_str(b, src->rootfs);
	const char *image_tree = block_str(b, src->image_tree);
	for (size_t i = 0; i < argc; i++) {
		const char *a = block_str(b, src->argv[i]);
		if (argv)
			argv[i] = a;
	}
	for (size_t i = 0; i < src->nvolumes; i++) {
		const char *host = block_str(b, src->volumes[i].host);
		const char *target = block_str(b, src->volumes[i].target);
		if (vols) {
			vols[i].host = host;
			vols[i].target = target;
		}
	}
	for (size_t i = 0; i < src->nfiles; i++) {
		const char *path = block_str(b, src->files[i].path);
		/* an input stays in its fd, which init inherits with the rest */
		const char *data = src->files[i].from_fd
				       ? NULL
				       : block_put(b, src->files[i].data, src->files[i].len, 1);
		if (files) {
			files[i].path = path;
			files[i].data = data;
		}
	}
	if (!dst)
		return NULL;
	argv[argc] = NULL;
	dst->argv = src->argv ? argv : NULL;
	dst->env = NULL; /* init takes its environment from ctx->envp */
	dst->nenv = 0;
	dst->volumes = vols;
	dst->files = files;
	dst->workdir = workdir;
	dst->cwd = cwd;
	dst->rootfs = rootfs;
	dst->image_tree = image_tree;
	return dst;
}

/*
 * spec, copied into one block for init to read: the caller's strings may
 * lie in our argv (the CLI's do), which init wipes first thing. Free it
 * with free(); NULL when out of memory.
 */
static struct spec *copy_spec(const struct spec *src)
{
	struct block b = {0};
	(void)copy_spec_pass(&b, src);
	if (!(b.base = malloc(b.used)))
		return NULL;
	b.used = 0;
	return copy_spec_pass(&b, src);
}

static int write_proc_file(pid_t pid, const char *file, const char *text)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	return write_file_at(AT_FDCWD, path, text);
}

/*
 * Map ids 0..UIDRANGE_SIZE-1 inside to base.. outside. setgroups is denied
 * inside, but for root (SPEC_USER_ROOT): package managers set their
 * helpers' groups (apt's _apt). init has no supplementary groups to shed
 * (the launcher dropped its own), and the groups it may take are its
 * range's, so allowing it opens nothing.
 */
static int map_ids(pid_t pid, uid_t base, unsigned count, bool setgroups_allowed)
{
	char map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, count);
	int r = write_proc_file(pid, "uid_map", map);
	if (r == 0)
		r = write_proc_file(pid, "setgroups", setgroups_allowed ? "allow" : "deny");
	if (r == 0)
		r = write_proc_file(pid, "gid_map", map);
	return r;
}

/*
 * Detach a copy of the volume's host directory, with its owner mapped to
 * the sandbox user where the file system supports id-mapped mounts, and
 * nosuid, nodev (and rdonly) set. init attaches it inside.
 */
static int prepare_volume(const struct volume *v, uid_t sandbox_kuid, struct launch_volume *ret,
			  struct idmap_holders *holders, struct error *err)
{
	struct stat st;
	if (stat(v->host, &st) < 0)
		return error_set_errno(err, errno, "--volume %s", v->host);
	_cleanup_close_ int tree =
	    v->image ? loopfs_mount(v->host, err)
		     : open_tree(AT_FDCWD, v->host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0 && v->image)
		return tree;
	if (tree < 0)
		return error_set_errno(err, errno, "--volume %s: cannot clone the mount", v->host);
	if (v->image) { /* the owner that counts is the image root's, inside it */
		st.st_uid = LOOPFS_ROOT_UID;
		st.st_gid = LOOPFS_ROOT_GID;
		st.st_mode = S_IFDIR;
	}
	struct mount_attr attr = {
	    .attr_set =
		MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (v->read_only ? MOUNT_ATTR_RDONLY : 0),
	};
	/* the owner on disk appears as the sandbox user */
	int r = idmap_mount(tree, st.st_uid, st.st_gid, sandbox_kuid, 1, attr.attr_set, holders);
	if (r == 0)
		goto done;
	/* an image's files would belong to no one inside: no fallback */
	if (v->image)
		return error_set_errno(err, -r, "%s: cannot map its owner to the sandbox user",
				       v->host);
	/* No id-mapped mounts here: the sandbox gets the directory's "other" permissions. */
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return error_set_errno(err, errno, "--volume %s: cannot set mount flags", v->host);
done:
	*ret = (struct launch_volume){
	    .tree_fd = TAKE_FD(tree),
	    .target = v->target,
	    .read_only = v->read_only,
	    .is_dir = S_ISDIR(st.st_mode),
	};
	return 0;
}

/*
 * The lower layer of an image root: a detached copy of the tree, its
 * image ids shown as the sandbox's range (so as 0..65535 inside),
 * read-only, nosuid, nodev. Without id-mapped mounts there is no correct
 * image root (its files would belong to no one inside): no fallback.
 */
static int open_image_tree(const char *path, uid_t sandbox_base, struct idmap_holders *holders,
			   struct error *err)
{
	_cleanup_close_ int tree = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return error_set_errno(err, errno, "--image-tree %s: cannot clone the mount", path);
	int r =
	    idmap_mount(tree, UIDRANGE_IMAGE_BASE, UIDRANGE_IMAGE_BASE, sandbox_base, UIDRANGE_SIZE,
			MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, holders);
	if (r < 0)
		return error_set_errno(err, -r, "--image-tree %s: cannot map its ids", path);
	return TAKE_FD(tree);
}

/*
 * An image's tree goes to init after the go: init makes its namespaces'
 * insides and the data tmpfs meanwhile (on another CPU), and waits for it
 * only at the overlay (rootfs_image_overlay()), so the third of a
 * millisecond a mapping namespace costs to make is mostly off the path.
 */
static int send_image_tree(struct sandbox *sb, const char *path, struct error *err)
{
	int tree = open_image_tree(path, sb->ids.base, &sb->holders, err);
	if (tree < 0)
		return tree;
	union fdpass_buf buf;
	struct iovec iov = {.iov_base = "i", .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	fdpass_attach(&mh, &buf, &tree, 1);
	/* as for the go: if init has died already, sandbox_wait() reports why */
	(void)sendmsg(sb->lifeline_fd, &mh, MSG_NOSIGNAL);
	close(tree);
	return 0;
}

static int move_fd_high(int *fd)
{
	int n = fcntl(*fd, F_DUPFD_CLOEXEC, CHILD_FD_MIN);
	if (n < 0)
		return -errno;
	close(*fd);
	*fd = n;
	return 0;
}

/* Close what only the child needed. */
static void close_volumes(struct launch_ctx *ctx)
{
	cgroup_join_release(&ctx->join);
	CLOSE_FD(ctx->rootfs_fd);
	for (size_t i = 0; i < ctx->nvolumes; i++)
		CLOSE_FD(ctx->volumes[i].tree_fd);
	ctx->nvolumes = 0;
}

void sandbox_reap_holders(struct sandbox *sb)
{
	if (sb->holders.n)
		idmap_holders_reap_gone(&sb->holders);
}

/* Tear down what sandbox_start() built before the sandbox ran. */
static void sandbox_release(struct sandbox *sb)
{
	idmap_holders_reap(&sb->holders);
	if (sb->cg) {
		cgroup_destroy(sb->cg, NULL);
		sb->cg = NULL;
	}
	sb->cgroot = cgroup_root_free(sb->cgroot);
	uidrange_release(&sb->ids);
	CLOSE_FD(sb->pidfd);
	CLOSE_FD(sb->status_fd);
	CLOSE_FD(sb->lifeline_fd);
	CLOSE_FD(sb->ctl.fd);
	free(sb->envp);
	sb->envp = NULL;
}

struct gc_ctx {
	struct cgroup_root *root;
	int lock_fd;
	unsigned reclaimed;
};

static int gc_one(const char *name, void *data)
{
	struct gc_ctx *gc = data;
	unsigned slot;
	char tail;
	if (sscanf(name, "sb-%u%c", &slot, &tail) != 1 || slot >= UIDRANGE_SLOTS)
		return 0;
	if (uidrange_slot_is_busy(gc->lock_fd, slot))
		return 0;
	struct cgroup *cg;
	if (cgroup_open(gc->root, name, &cg) == 0 && cgroup_destroy(cg, NULL) == 0)
		gc->reclaimed++;
	return 0;
}

static int gc_with_root(struct cgroup_root *root, unsigned *ret_reclaimed)
{
	struct gc_ctx gc = {.root = root, .lock_fd = uidrange_open_lock(sandbox_run_dir())};
	if (gc.lock_fd < 0)
		return gc.lock_fd;
	int r = cgroup_root_for_each(root, gc_one, &gc);
	close(gc.lock_fd);
	if (ret_reclaimed)
		*ret_reclaimed = gc.reclaimed;
	return r;
}

int sandbox_gc(unsigned *ret_reclaimed, struct error *err)
{
	char mnt[4096];
	struct cgroup_root *root;
	int r = ensure_run_dirs(sandbox_run_dir(), mnt, sizeof(mnt), err);
	if (r < 0)
		return r;
	if ((r = cgroup_root_open(&root, err)) < 0)
		return r;
	r = gc_with_root(root, ret_reclaimed);
	cgroup_root_free(root);
	if (r < 0)
		return error_set_errno(err, -r, "gc");
	return 0;
}

static int create_cgroup(struct sandbox *sb, const struct spec *spec, struct error *err)
{
	/* Serve mode: an OOM kills the process that grew; init and the rest go on. */
	struct cgroup_limits limits = {.memory_bytes = spec->memory_bytes,
				       .cpu_milli = spec->cpu_milli,
				       .pids = spec->pids,
				       .oom_kills_one = spec->serve};
	return cgroup_create(sb->cgroot, sb->name, &limits, &sb->cg, err);
}

/*
 * Serve mode: the request socket. ret[0] is init's end (moved clear of
 * its fixed fds), ret[1] ours; room for the largest request.
 */
static int open_control(int ret[2], struct error *err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ret) < 0)
		return error_set_errno(err, errno, "serve: socketpair");
	int r = move_fd_high(&ret[0]);
	if (r < 0)
		return error_set_errno(err, -r, "serve: socketpair");
	/* The kernel doubles the value; FORCE passes a low wmem_max (we are root). */
	int size = (int)SERVE_MSG_MAX + 4096;
	if (setsockopt(ret[1], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(ret[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	return 0;
}

static int clone_init(struct sandbox *sb, struct launch_ctx *ctx, struct error *err)
{
	/* CLONE_NEWNET is left to init: it costs a third of a millisecond,
	 * which init spends while we map its ids. */
	uint64_t flags =
	    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
	int cgfd = sb->cg ? cgroup_clone_fd(sb->cg) : -1;
	if (cgfd >= 0)
		flags |= CLONE_INTO_CGROUP;
	/* ...unless the launcher plumbs it before init goes on */
	if (ctx->spec->network_attach)
		flags |= CLONE_NEWNET;
	int pidfd = -1;
	struct clone3_args args = {
	    .flags = flags,
	    .pidfd = (uint64_t)(uintptr_t)&pidfd,
	    .exit_signal = SIGCHLD,
	    .cgroup = cgfd >= 0 ? (uint64_t)cgfd : 0,
	};
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		return error_set_errno(err, errno, "clone3 into new namespaces");
	if (pid == 0)
		init_main(ctx);
	sb->pid = (pid_t)pid;
	sb->pidfd = pidfd;
	return 0;
}

int sandbox_start(const struct spec *spec, struct sandbox **ret, struct error *err)
{
	char mnt[4096];
	const char *run_dir = sandbox_run_dir();
	/* init reads its own copy of the spec: see launch-internal.h */
	_cleanup_free_ struct spec *init_spec = copy_spec(spec);
	if (!init_spec)
		return error_set(err, ENOMEM, "out of memory");
	struct launch_ctx ctx = {
	    .spec = init_spec, .mnt_dir = mnt, .rootfs_fd = -1, .control_fd = -1, .join = {.n = 0}};
	int sync_pipe[2] = {-1, -1}, status_pipe[2] = {-1, -1}, control[2] = {-1, -1};
	int r = read_layout(&ctx.layout);
	if (r < 0)
		return error_set_errno(err, -r,
				       "cannot find our argv and environ in /proc/self/stat");

	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return error_set(err, ENOMEM, "out of memory");
	*sb = (struct sandbox){.ids.lock_fd = -1,
			       .pidfd = -1,
			       .status_fd = -1,
			       .lifeline_fd = -1,
			       .serve = spec->serve,
			       .export_dirs = spec->export_dirs && !spec->serve,
			       .dirs = {-1, -1},
			       .ctl.fd = -1,
			       .timeout_ms = spec->serve ? 0 : spec->timeout_ms,
			       .start_ns = now_ns()};

	if ((r = ensure_run_dirs(run_dir, mnt, sizeof(mnt), err)) < 0)
		goto fail;
	/* Our supplementary groups would follow us into the sandbox: drop them. */
	if (setgroups(0, NULL) < 0) {
		r = error_set_errno(err, errno, "setgroups");
		goto fail;
	}
	if ((r = uidrange_acquire(run_dir, &sb->ids, err)) < 0 ||
	    (r = cgroup_root_open(&sb->cgroot, err)) < 0)
		goto fail;
	(void)gc_with_root(sb->cgroot, NULL);
	snprintf(sb->name, sizeof(sb->name), "sb-%u", sb->ids.slot);
	/* v2: clone3 puts init straight into the group; v1: init joins it itself. */
	if ((r = create_cgroup(sb, spec, err)) < 0)
		goto fail;
	if ((r = cgroup_join_prepare(sb->cg, &ctx.join)) < 0) {
		error_set_errno(err, -r, "cgroup: cannot open %s for joining", sb->name);
		goto fail;
	}
	/* Host paths are opened here, as root: init may not traverse them. */
	if (spec->rootfs) {
		ctx.rootfs_fd = open_tree(AT_FDCWD, spec->rootfs,
					  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (ctx.rootfs_fd < 0) {
			r = error_set_errno(err, errno, "--rootfs %s", spec->rootfs);
			goto fail;
		}
	}
	uid_t command_uid;
	gid_t command_gid;
	spec_command_ids(spec, &command_uid, &command_gid);
	for (size_t i = 0; i < spec->nvolumes; i++) {
		r = prepare_volume(&init_spec->volumes[i], sb->ids.base + command_uid,
				   &ctx.volumes[ctx.nvolumes], &sb->holders, err);
		if (r < 0)
			goto fail;
		ctx.nvolumes++;
	}
	if (!(sb->envp = ctx.envp = spec_build_env(spec))) {
		r = error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	/* a socket for the go signals: send(MSG_NOSIGNAL) cannot raise SIGPIPE */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync_pipe) < 0 ||
	    pipe2(status_pipe, O_CLOEXEC) < 0 || move_fd_high(&sync_pipe[0]) < 0 ||
	    move_fd_high(&status_pipe[1]) < 0) {
		r = error_set_errno(err, errno, "pipe");
		goto fail;
	}
	ctx.sync_fd = sync_pipe[0];
	ctx.status_fd = status_pipe[1];
	sb->lifeline_fd = TAKE_FD(sync_pipe[1]);
	sb->status_fd = TAKE_FD(status_pipe[0]);
	if (spec->serve && (r = open_control(control, err)) < 0)
		goto fail;
	ctx.control_fd = control[0];
	sb->ctl.fd = TAKE_FD(control[1]);

	if ((r = clone_init(sb, &ctx, err)) < 0)
		goto fail;
	CLOSE_FD(sync_pipe[0]);
	CLOSE_FD(status_pipe[1]);
	CLOSE_FD(control[0]);
	close_volumes(&ctx);

	if ((r = map_ids(sb->pid, sb->ids.base, UIDRANGE_SIZE, spec->user == SPEC_USER_ROOT)) < 0) {
		error_set_errno(err, -r, "cannot map the sandbox's user ids");
		goto fail_started;
	}
	if (spec->network_attach &&
	    (r = spec->network_attach(spec->network_arg, sb->pidfd, sb->ids.slot, err)) < 0)
		goto fail_started;
	/* Go. If init has died already, sandbox_wait() reports why. */
	(void)send(sb->lifeline_fd, "g", 1, MSG_NOSIGNAL);
	if (spec->image_tree && (r = send_image_tree(sb, spec->image_tree, err)) < 0)
		goto fail_started;
	/* their exits are off the sandbox's path: reaped once gone */
	idmap_holders_reap_gone(&sb->holders);
	*ret = sb;
	return 0;

fail_started:
	sandbox_free(sb);
	return r;
fail:
	CLOSE_FD(sync_pipe[0]);
	CLOSE_FD(sync_pipe[1]);
	CLOSE_FD(control[0]);
	CLOSE_FD(control[1]);
	CLOSE_FD(status_pipe[0]);
	CLOSE_FD(status_pipe[1]);
	close_volumes(&ctx);
	sandbox_release(sb);
	free(sb);
	return r;
}

/*
 * The dirs init sent on the go socket before its command ran (one byte
 * 'd' and two fds); it sends nothing else that way. Called once init is
 * reaped, so whatever it sent is queued.
 */
static void receive_dirs(struct sandbox *sb)
{
	char c = 0;
	int fds[2] = {-1, -1};
	size_t n = 0;
	int flags = 0;
	ssize_t r = fdpass_recv(sb->lifeline_fd, &c, 1, MSG_DONTWAIT, fds, 2, &n, &flags);
	if (r == 1 && c == 'd' && n == 2 && !(flags & MSG_CTRUNC)) {
		sb->dirs[0] = fds[0];
		sb->dirs[1] = fds[1];
		return;
	}
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

int sandbox_take_dirs(struct sandbox *sb, int *ret_work, int *ret_tmp)
{
	if (sb->dirs[0] < 0 || sb->dirs[1] < 0)
		return -ENOENT;
	*ret_work = TAKE_FD(sb->dirs[0]);
	*ret_tmp = TAKE_FD(sb->dirs[1]);
	return 0;
}

int sandbox_kill(struct sandbox *sb)
{
	if (sb->reaped)
		return 0;
	if (syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
		return -errno;
	if (sb->cg)
		(void)cgroup_kill(sb->cg);
	return 0;
}

#define WAIT_FDS_MAX 16

/* Milliseconds until the nearest of the deadline and the next tick; -1 = none. */
static int poll_timeout(uint64_t now, uint64_t deadline, uint64_t next_tick)
{
	uint64_t until = deadline ? deadline : next_tick;
	if (next_tick && next_tick < until)
		until = next_tick;
	if (!until)
		return -1;
	return now >= until ? 0 : (int)((until - now + 999999) / 1000000);
}

/*
 * Wait for init to exit, until the deadline, or until cancel_fd wakes us;
 * meanwhile serve io's fds and ticks.
 */
static int wait_exit(struct sandbox *sb, int cancel_fd, const struct sandbox_io *io)
{
	uint64_t deadline = sb->timeout_ms ? sb->start_ns + sb->timeout_ms * 1000000ULL : 0;
	uint64_t tick_ns = io && io->tick_ms ? io->tick_ms * 1000000ULL : 0;
	uint64_t next_tick = tick_ns ? now_ns() + tick_ns : 0;
	size_t nio = io ? io->nfds : 0;
	if (nio > WAIT_FDS_MAX - 2)
		return -E2BIG;
	for (;;) {
		struct pollfd pfd[WAIT_FDS_MAX] = {{.fd = sb->pidfd, .events = POLLIN},
						   {.fd = cancel_fd, .events = POLLIN}};
		for (size_t i = 0; i < nio; i++)
			pfd[2 + i] = io->fds[i];
		uint64_t now = now_ns();
		int n =
		    poll(pfd, 2 + nio, poll_timeout(now, sb->timed_out ? 0 : deadline, next_tick));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		sandbox_reap_holders(sb);
		for (size_t i = 0; i < nio; i++) {
			io->fds[i].revents = pfd[2 + i].revents;
			if (pfd[2 + i].revents)
				io->ready(&io->fds[i], i, io->data);
		}
		now = now_ns();
		if (next_tick && now >= next_tick) {
			io->tick(io->data);
			next_tick = now + tick_ns;
		}
		if (pfd[0].revents)
			return 0;
		if (deadline && !sb->timed_out && now >= deadline) {
			sb->timed_out = true;
			sandbox_kill(sb);
		} else if (pfd[1].revents) {
			sb->cancelled = true;
			sandbox_kill(sb);
			cancel_fd = -1;
		}
	}
}

/* Drain init's status records; the last of each kind wins. */
static void read_messages(int fd, struct launch_msg *setup, struct launch_msg *exec_fail,
			  struct launch_msg *exit_msg)
{
	struct launch_msg msg;
	while (read_all(fd, &msg, sizeof(msg)) == (ssize_t)sizeof(msg)) {
		msg.text[sizeof(msg.text) - 1] = '\0';
		if (msg.type == LAUNCH_MSG_SETUP_FAILED)
			*setup = msg;
		else if (msg.type == LAUNCH_MSG_EXEC_FAILED)
			*exec_fail = msg;
		else if (msg.type == LAUNCH_MSG_EXIT)
			*exit_msg = msg;
	}
}

static void classify(const struct sandbox *sb, int init_status, const struct launch_msg *exec_fail,
		     const struct launch_msg *exit_msg, struct sandbox_result *res)
{
	int status = exit_msg->type ? exit_msg->code : init_status;
	if (sb->timed_out) {
		res->end = SANDBOX_TIMED_OUT;
		res->term_signal = SIGKILL;
	} else if (sb->cancelled) {
		res->end = SANDBOX_CANCELLED;
		res->term_signal = SIGKILL;
	} else if (exec_fail->type) {
		res->end = SANDBOX_EXEC_FAILED;
		res->exec_errno = exec_fail->code;
	} else if (WIFEXITED(status)) {
		res->end = SANDBOX_EXITED;
		res->exit_status = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		res->term_signal = WTERMSIG(status);
		res->end = res->oom_killed && res->term_signal == SIGKILL ? SANDBOX_OOM_KILLED
									  : SANDBOX_SIGNALED;
	}
}

int sandbox_wait(struct sandbox *sb, int cancel_fd, struct sandbox_result *ret, struct error *err)
{
	return sandbox_wait_io(sb, cancel_fd, NULL, ret, err);
}

int sandbox_wait_io(struct sandbox *sb, int cancel_fd, const struct sandbox_io *io,
		    struct sandbox_result *ret, struct error *err)
{
	struct sandbox_result res = {0};
	int r = wait_exit(sb, cancel_fd, io);
	if (r < 0)
		return error_set_errno(err, -r, "waiting for the sandbox");
	siginfo_t info = {0};
	struct rusage ru = {0};
	if (syscall(SYS_waitid, P_PIDFD, sb->pidfd, &info, WEXITED, &ru) < 0)
		return error_set_errno(err, errno, "waitid");
	sb->reaped = true;
	res.wall_ms = (now_ns() - sb->start_ns) / 1000000ULL;
	res.cpu_ms = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000ULL +
		     (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000ULL;
	/* back to a wait(2) status: exit code in bits 8-15, or the signal in 0-6 */
	int init_status =
	    info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8 : info.si_status & 0x7f;

	struct launch_msg setup = {0}, exec_fail = {0}, exit_msg = {0};
	if (sb->export_dirs)
		receive_dirs(sb);
	CLOSE_FD(sb->lifeline_fd);
	read_messages(sb->status_fd, &setup, &exec_fail, &exit_msg);

	struct cgroup_stats stats = {0};
	if (cgroup_read_stats(sb->cg, &stats) == 0) {
		res.oom_killed = stats.oom_kills > 0;
		res.peak_memory_bytes = stats.peak_memory_bytes;
	}
	struct cgroup *cg = TAKE_PTR(sb->cg);
	r = cgroup_destroy(cg, err);
	sandbox_release(sb);
	if (r < 0)
		return r;

	if (setup.type) {
		res.end = SANDBOX_SETUP_FAILED;
		error_set(err, setup.code, "sandbox setup failed: %s", setup.text);
	} else {
		classify(sb, init_status, &exec_fail, &exit_msg, &res);
	}
	*ret = res;
	return 0;
}

int sandbox_attach_network(struct sandbox *sb,
			   int (*attach)(void *arg, int pidfd, unsigned slot, struct error *err),
			   void *arg, struct error *err)
{
	if (sb->reaped || sb->pidfd < 0)
		return error_set(err, ESRCH, "the sandbox has ended");
	return attach(arg, sb->pidfd, sb->ids.slot, err);
}

struct sandbox *sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return NULL;
	if (!sb->reaped && sb->pidfd >= 0) {
		sandbox_kill(sb);
		siginfo_t info;
		(void)syscall(SYS_waitid, P_PIDFD, sb->pidfd, &info, WEXITED, NULL);
	}
	sandbox_release(sb);
	CLOSE_FD(sb->dirs[0]); /* not taken: sandbox_take_dirs() */
	CLOSE_FD(sb->dirs[1]);
	free(sb);
	return NULL;
}
