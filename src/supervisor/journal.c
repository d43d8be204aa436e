#include "supervisor/journal.h"

#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int journal_open(struct journal *j, int dirfd, const char *name, uint64_t cap, const char *marker)
{
	char len_name[256];
	snprintf(len_name, sizeof(len_name), "%s.len", name);
	*j = (struct journal){.fd = -1, .len_fd = -1, .cap = cap, .marker = marker};
	j->fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (j->fd < 0)
		return -errno;
	j->len_fd = openat(dirfd, len_name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	struct stat st;
	if (j->len_fd < 0 || fstat(j->fd, &st) < 0) {
		int r = -errno;
		journal_close(j);
		return r;
	}
	j->size = j->synced = (uint64_t)st.st_size;
	return 0;
}

bool journal_is_full(const struct journal *j)
{
	return j->size >= j->cap;
}

int journal_append(struct journal *j, const void *buf, size_t len)
{
	size_t keep = len;
	if (j->size + len > j->cap)
		keep = j->size >= j->cap ? 0 : (size_t)(j->cap - j->size);
	if (keep > 0) {
		int r = write_all(j->fd, buf, keep);
		if (r < 0)
			return r;
		j->size += keep;
	}
	if (keep < len) {
		if (j->dropped == 0 && j->marker) {
			int r = write_all(j->fd, j->marker, strlen(j->marker));
			if (r < 0)
				return r;
			j->size += strlen(j->marker);
		}
		j->dropped += len - keep;
	}
	return 0;
}

int journal_sync(struct journal *j)
{
	if (j->synced == j->size)
		return 0;
	if (fdatasync(j->fd) < 0)
		return -errno;
	char num[32];
	int n = snprintf(num, sizeof(num), "%" PRIu64 "\n", j->size);
	if (pwrite(j->len_fd, num, (size_t)n, 0) != n || ftruncate(j->len_fd, n) < 0)
		return -errno;
	j->synced = j->size;
	return 0;
}

void journal_close(struct journal *j)
{
	if (j->fd >= 0)
		close(j->fd);
	if (j->len_fd >= 0)
		close(j->len_fd);
	j->fd = j->len_fd = -1;
}
