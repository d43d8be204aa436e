/*
 * secrets.c - where a task's secret values wait for its supervisors:
 * <state>/tasks/<id>/secrets.json (core/layout.h), 0600 in a 0700
 * directory, made durable (file, directory, and the directory's entry)
 * before the task is stored, so that a task the store holds always finds
 * them; never in the store itself. The scheduler removes the file when
 * the task ends, and a cancel of a queued task does; one left by a crash
 * in between (its task ended, or never stored) goes at the next start
 * (sched_recover()).
 */
#include "api/api-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRETS_TEMP LAYOUT_SECRETS ".tmp"

/* Write json to dfd's LAYOUT_SECRETS, durably: a temporary file, fsync, rename. */
static int write_durably(int dfd, const char *json)
{
	_cleanup_close_ int fd =
	    openat(dfd, SECRETS_TEMP, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, json, strlen(json));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dfd, SECRETS_TEMP, dfd, LAYOUT_SECRETS) < 0)
		r = -errno;
	return r;
}

/* fsync the directory path. 0 or -errno. */
static int sync_dir(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 || fsync(fd) < 0 ? -errno : 0;
}

int api_secrets_keep(const char *state_dir, const char *id, const char *json, struct error *err)
{
	char dir[PATH_MAX], parent[PATH_MAX];
	if (layout_task_dir(dir, sizeof(dir), state_dir, id) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	snprintf(parent, sizeof(parent), "%s", dir);
	*strrchr(parent, '/') = '\0';
	int r = mkdir_p_at(AT_FDCWD, parent, 0700);
	if (r < 0)
		return error_set_errno(err, -r, "%s", parent);
	/* a new directory: an id whose directory exists is taken (-EEXIST: draw another) */
	if (mkdir(dir, 0700) < 0)
		return errno == EEXIST ? -EEXIST : error_set_errno(err, errno, "%s", dir);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	r = dfd < 0 ? -errno : write_durably(dfd, json);
	if (r == 0)
		r = sync_dir(dir);
	if (r == 0)
		r = sync_dir(parent); /* the new directory's entry */
	if (r < 0) {
		/* nothing of it stays: neither name, nor the directory */
		if (dfd >= 0) {
			(void)unlinkat(dfd, SECRETS_TEMP, 0);
			(void)unlinkat(dfd, LAYOUT_SECRETS, 0);
		}
		(void)rmdir(dir);
		return error_set_errno(err, -r, "%s/%s", dir, LAYOUT_SECRETS);
	}
	return 0;
}
