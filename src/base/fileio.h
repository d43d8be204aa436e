/*
 * fileio.h - small, complete reads and writes.
 *
 * The *_at() helpers take a directory fd and a name relative to it, so
 * callers work from an fd they opened once (a cgroup directory, say)
 * instead of building paths. Every fd they open is O_CLOEXEC and closed
 * before they return.
 */
#ifndef AGENTBOX_BASE_FILEIO_H
#define AGENTBOX_BASE_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all of buf, retrying on EINTR and short writes. 0 or -errno. */
int write_all(int fd, const void *buf, size_t len);

/* Read until len bytes or EOF. Returns the count read, or -errno. */
ssize_t read_all(int fd, void *buf, size_t len);

/* Open name under dirfd for writing (no create, no truncate) and write s. */
int write_file_at(int dirfd, const char *name, const char *s);

/* As write_file_at(), creating or truncating the file with mode. */
int create_file_at(int dirfd, const char *name, const char *s, mode_t mode);

/*
 * Read at most size-1 bytes of name under dirfd into buf, NUL-terminated.
 * Returns the length read, or -errno.
 */
ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size);

/* Read a file holding one decimal number ("max" is -ERANGE). */
int read_u64_at(int dirfd, const char *name, uint64_t *ret);

/*
 * mkdir -p: create path (relative to dirfd, or absolute) and its missing
 * parents with mode; existing directories are fine. 0 or -errno.
 */
int mkdir_p_at(int dirfd, const char *path, mode_t mode);

/*
 * Remove name under parentfd and everything in it, without following a
 * symlink, however deep: past REMOVE_TREE_DEPTH_MAX levels, what is
 * deeper is moved up into name itself and removed from there, so that the
 * fds held and the stack stay bounded whatever a tree's depth. What is not
 * there is no error. Best effort: it goes on past a failure, and returns 0
 * or the first -errno.
 */
#define REMOVE_TREE_DEPTH_MAX 32
int remove_tree_at(int parentfd, const char *name);

/*
 * The start time of process pid (0 = ourselves), in clock ticks since
 * boot, from /proc/<pid>/stat: with the pid, it names one process even
 * after the pid is reused. 0, -ESRCH when there is no such process, or
 * -EINVAL.
 */
int proc_start_time(pid_t pid, unsigned long long *ret);

/* The wall clock (CLOCK_REALTIME) in milliseconds since the epoch. */
int64_t wall_clock_ms(void);

/*
 * Find "key <number>" lines, as in memory.events or cpu.stat, in text.
 * Returns 0 and sets *ret, or -ENOENT when the key is absent.
 */
int keyed_u64(const char *text, const char *key, uint64_t *ret);

#endif
