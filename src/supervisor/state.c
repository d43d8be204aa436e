/*
 * state.c - a task's /state image: made once, whole or not at all.
 * See state.h.
 */
#include "supervisor/state.h"

#include "base/cleanup.h"
#include "core/layout.h"
#include "runtime/loopfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run mke2fs on path; its complaints go to our stderr (supervisor.log). */
static int make_fs(const char *path, struct error *err)
{
	char opts[128];
	snprintf(opts, sizeof(opts),
		 "root_owner=%d:%d,lazy_itable_init=1,lazy_journal_init=1,nodiscard",
		 LOOPFS_ROOT_UID, LOOPFS_ROOT_GID);
	/* -m 0: the sandbox user is never ext4's "root", so no blocks are kept for one */
	char *argv[] = {STATE_MKFS, "-q",    "-F", "-t", LOOPFS_TYPE,  "-m", "0",
			"-L",	    "state", "-E", opts, (char *)path, NULL};
	char *envp[] = {"PATH=" STATE_MKFS_PATH, "LC_ALL=C", NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	char exe[256] = "";
	for (const char *d = STATE_MKFS_PATH; *d && !exe[0]; d += strcspn(d, ":"), d += *d == ':') {
		snprintf(exe, sizeof(exe), "%.*s/%s", (int)strcspn(d, ":"), d, STATE_MKFS);
		if (access(exe, X_OK) < 0)
			exe[0] = '\0';
	}
	pid_t pid;
	int e = exe[0] ? posix_spawn(&pid, exe, &fa, NULL, argv, envp) : ENOENT;
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		return error_set_errno(err, e, "cannot run %s (install e2fsprogs)", STATE_MKFS);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return error_set_errno(err, errno, "waitpid %s", STATE_MKFS);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return error_set(err, EIO, "%s failed (status %d) on %s", STATE_MKFS, status, path);
	return 0;
}

static int make_image(int dirfd, const char *task_dir, uint64_t bytes, struct error *err)
{
	char temp[2048];
	if ((size_t)snprintf(temp, sizeof(temp), "%s/%s", task_dir, LAYOUT_TASK_STATE_TEMP) >=
	    sizeof(temp))
		return error_set(err, ENAMETOOLONG, "%s: path too long", task_dir);
	(void)unlinkat(dirfd, LAYOUT_TASK_STATE_TEMP, 0); /* left by a crash */
	_cleanup_close_ int fd =
	    openat(dirfd, LAYOUT_TASK_STATE_TEMP, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(err, errno, "%s", temp);
	int r = 0;
	if (ftruncate(fd, (off_t)bytes) < 0)
		r = error_set_errno(err, errno, "%s: size %" PRIu64, temp, bytes);
	if (r == 0)
		r = make_fs(temp, err);
	if (r == 0 && fsync(fd) < 0)
		r = error_set_errno(err, errno, "fsync %s", temp);
	if (r == 0 && renameat(dirfd, LAYOUT_TASK_STATE_TEMP, dirfd, LAYOUT_TASK_STATE_IMAGE) < 0)
		r = error_set_errno(err, errno, "rename %s", temp);
	if (r == 0 && fsync(dirfd) < 0)
		r = error_set_errno(err, errno, "fsync %s", task_dir);
	if (r < 0)
		(void)unlinkat(dirfd, LAYOUT_TASK_STATE_TEMP, 0);
	return r;
}

int state_prepare(const char *task_dir, uint64_t bytes, char *path, size_t size, bool *ret_image,
		  struct error *err)
{
	_cleanup_close_ int dirfd = open(task_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return error_set_errno(err, errno, "%s", task_dir);
	struct stat st;
	bool image = true;
	const char *name = LAYOUT_TASK_STATE_IMAGE;
	if (fstatat(dirfd, LAYOUT_TASK_STATE_IMAGE, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return error_set_errno(err, errno, "%s/%s", task_dir,
					       LAYOUT_TASK_STATE_IMAGE);
		if (fstatat(dirfd, LAYOUT_TASK_STATE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			image = false; /* an older task's directory */
			name = LAYOUT_TASK_STATE;
		} else {
			int r = make_image(dirfd, task_dir, bytes, err);
			if (r < 0)
				return r;
		}
	} else if (!S_ISREG(st.st_mode)) {
		return error_set(err, EINVAL, "%s/%s is not a regular file", task_dir,
				 LAYOUT_TASK_STATE_IMAGE);
	}
	if ((size_t)snprintf(path, size, "%s/%s", task_dir, name) >= size)
		return error_set(err, ENAMETOOLONG, "%s: path too long", task_dir);
	*ret_image = image;
	return 0;
}
