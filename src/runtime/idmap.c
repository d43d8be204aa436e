#include "runtime/idmap.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_proc_file(pid_t pid, const char *file, const char *text)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	return write_file_at(AT_FDCWD, path, text);
}

/*
 * The helper only holds the namespace until it is killed. It shares our
 * memory (CLONE_VM): no page tables copied, and no copy-on-write fault
 * for every page we touch while it lives; it runs nothing but a blocking
 * system call, with every signal blocked, on a stack of its own.
 */
static char helper_stack[16384] __attribute__((aligned(16)));

static int hold(void *arg)
{
	(void)arg;
	for (;;)
		(void)syscall(SYS_pause);
	return 0;
}

static void reap(pid_t pid)
{
	while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
		;
}

void idmap_holders_reap(struct idmap_holders *h)
{
	for (size_t i = 0; i < h->n; i++)
		reap(h->pid[i]);
	h->n = 0;
}

void idmap_holders_reap_gone(struct idmap_holders *h)
{
	size_t kept = 0;
	for (size_t i = 0; i < h->n; i++)
		if (waitpid(h->pid[i], NULL, __WALL | WNOHANG) == 0)
			h->pid[kept++] = h->pid[i];
	h->n = kept;
}

int idmap_userns_open(uid_t disk_uid, gid_t disk_gid, uid_t host_first, unsigned count,
		      struct idmap_holders *holders)
{
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	/* no exit signal: see struct idmap_holders */
	pid_t pid =
	    clone(hold, helper_stack + sizeof(helper_stack), CLONE_VM | CLONE_NEWUSER, NULL);
	int r = pid < 0 ? -errno : 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;
	char uid_line[64], gid_line[64], path[64];
	snprintf(uid_line, sizeof(uid_line), "%u %u %u\n", (unsigned)disk_uid, (unsigned)host_first,
		 count);
	snprintf(gid_line, sizeof(gid_line), "%u %u %u\n", (unsigned)disk_gid, (unsigned)host_first,
		 count);
	r = write_proc_file(pid, "uid_map", uid_line);
	if (r == 0)
		r = write_proc_file(pid, "setgroups", "deny");
	if (r == 0)
		r = write_proc_file(pid, "gid_map", gid_line);
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		r = open(path, O_RDONLY | O_CLOEXEC);
		if (r < 0)
			r = -errno;
	}
	(void)kill(pid, SIGKILL);
	if (holders && holders->n < IDMAP_HOLDERS_MAX)
		holders->pid[holders->n++] = pid;
	else
		reap(pid);
	return r;
}

int idmap_mount(int tree_fd, uid_t disk_uid, gid_t disk_gid, uid_t host_first, unsigned count,
		uint64_t attr_set, struct idmap_holders *holders)
{
	_cleanup_close_ int userns =
	    idmap_userns_open(disk_uid, disk_gid, host_first, count, holders);
	if (userns < 0)
		return userns;
	struct mount_attr attr = {.attr_set = attr_set | MOUNT_ATTR_IDMAP,
				  .userns_fd = (uint64_t)userns};
	if (mount_setattr(tree_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return -errno;
	return 0;
}
