#include "supervisor/supervise.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int supervise_hold_lock(int dirfd)
{
	struct stat mine, lock;
	if (fstatat(dirfd, LAYOUT_LOCK, &lock, AT_SYMLINK_NOFOLLOW) == 0 &&
	    fstat(SUPERVISE_LOCK_FD, &mine) == 0 && mine.st_dev == lock.st_dev &&
	    mine.st_ino == lock.st_ino)
		return fcntl(SUPERVISE_LOCK_FD, F_SETFD, FD_CLOEXEC) < 0 ? -errno
									 : SUPERVISE_LOCK_FD;
	int fd = openat(dirfd, LAYOUT_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return r;
	}
	return fd;
}

int supervise_write_pid_file(int dirfd, const char *name)
{
	char text[64];
	unsigned long long start = 0;
	int r = proc_start_time(0, &start);
	if (r < 0)
		return r;
	snprintf(text, sizeof(text), "%d %llu\n", (int)getpid(), start);
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	r = write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	return r;
}

/*
 * jansson's reader of a file descriptor: a buffer of its own at a time
 * (json_loadfd() reads one byte per read(2), some 500 calls for a
 * sandbox.json). 0 at the end, (size_t)-1 on an error.
 */
static size_t read_chunk(void *buf, size_t len, void *data)
{
	int fd = *(const int *)data;
	ssize_t n;
	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? (size_t)-1 : (size_t)n;
}

json_t *supervise_read_json(int dirfd, const char *name, struct error *err)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		error_set_errno(err, errno, "%s", name);
		return NULL;
	}
	json_error_t jerr;
	json_t *j = json_load_callback(read_chunk, &fd, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		error_set(err, EINVAL, "%s: line %d: %s", name, jerr.line, jerr.text);
	return j;
}

int supervise_write_json(int dirfd, const char *name, const json_t *j, bool durable)
{
	char tmp[256];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= sizeof(tmp))
		return -ENAMETOOLONG;
	_cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	int r;
	_cleanup_close_ int fd =
	    openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if ((r = write_all(fd, text, strlen(text))) < 0 || (r = write_all(fd, "\n", 1)) < 0)
		return r;
	if (durable && fsync(fd) < 0)
		return -errno;
	if (renameat(dirfd, tmp, dirfd, name) < 0)
		return -errno;
	if (durable && fsync(dirfd) < 0)
		return -errno;
	return 0;
}
