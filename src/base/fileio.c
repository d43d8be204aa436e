#include "base/fileio.h"

#include "base/cleanup.h"
#include "base/parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int write_file_at(int dirfd, const char *name, const char *s)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return write_all(fd, s, strlen(s));
}

int create_file_at(int dirfd, const char *name, const char *s, mode_t mode)
{
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, mode);
	if (fd < 0)
		return -errno;
	return write_all(fd, s, strlen(s));
}

ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size)
{
	if (size == 0)
		return -EINVAL;
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	ssize_t n = read_all(fd, buf, size - 1);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return n;
}

int read_u64_at(int dirfd, const char *name, uint64_t *ret)
{
	char buf[64];
	ssize_t n = read_file_at(dirfd, name, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	buf[strcspn(buf, "\n")] = '\0';
	if (strcmp(buf, "max") == 0)
		return -ERANGE;
	return parse_u64(buf, ret);
}

int mkdir_p_at(int dirfd, const char *path, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdirat(dirfd, buf, mode) < 0 && errno != EEXIST)
				return -errno;
			if (c == '\0')
				break;
			*p = c;
		}
	}
	return 0;
}

int proc_start_time(pid_t pid, unsigned long long *ret)
{
	char path[64], stat[1024];
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/stat");
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file_at(AT_FDCWD, path, stat, sizeof(stat)) < 0)
		return -ESRCH;
	const char *p = strrchr(stat, ')');
	/* after "pid (comm)": state is field 3, starttime field 22 */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 ret) != 1)
		return -EINVAL;
	return 0;
}

int64_t wall_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int keyed_u64(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			char num[32];
			size_t nlen = len - klen - 1;
			if (nlen == 0 || nlen >= sizeof(num))
				return -EINVAL;
			memcpy(num, line + klen + 1, nlen);
			num[nlen] = '\0';
			return parse_u64(num, ret);
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* Remove what name holds (a directory, under dfd); deep ones moved up to topfd. */
static int remove_contents(int dfd, int topfd, unsigned depth, unsigned long *moved)
{
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		CLOSE_FD(dup_fd);
		return -errno;
	}
	rewinddir(d); /* the dup shares dfd's offset: an earlier pass left it at the end */
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dfd, de->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR) {
			r = r ? r : -errno;
			continue;
		}
		if (depth >= REMOVE_TREE_DEPTH_MAX) {
			char up[48];
			snprintf(up, sizeof(up), ".deep-%lu", (*moved)++);
			if (renameat(dfd, de->d_name, topfd, up) < 0)
				r = r ? r : -errno;
			continue;
		}
		int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			r = r ? r : -errno;
			continue;
		}
		int rr = remove_contents(sub, topfd, depth + 1, moved);
		close(sub);
		if (rr < 0 || unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0)
			r = r ? r : rr < 0 ? rr : -errno;
	}
	closedir(d);
	return r;
}

int remove_tree_at(int parentfd, const char *name)
{
	if (unlinkat(parentfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return -errno;
	_cleanup_close_ int fd =
	    openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* what was moved up lands in fd itself, and is removed by a later pass */
	unsigned long moved = 0, before;
	int r;
	do {
		before = moved;
		r = remove_contents(fd, fd, 0, &moved);
	} while (r == 0 && moved != before);
	if (r == 0 && unlinkat(parentfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}
