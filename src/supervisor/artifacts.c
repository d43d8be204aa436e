#include "supervisor/artifacts.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "core/layout.h"
#include "core/limits.h"
#include "supervisor/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_BLOCK (64u * 1024)

struct walk {
	json_t *entries;
	uint64_t bytes; /* file bytes copied */
	uint32_t count; /* entries copied (files and directories) */
	bool truncated; /* a cap was reached somewhere */
	dev_t dev;	/* the sandbox's data tmpfs: nothing else is read */
	char buf[COPY_BLOCK];
};

static const char *type_name(mode_t m)
{
	return S_ISREG(m)		    ? "file"
	       : S_ISDIR(m)		    ? "directory"
	       : S_ISLNK(m)		    ? "symlink"
	       : S_ISFIFO(m)		    ? "fifo"
	       : S_ISSOCK(m)		    ? "socket"
	       : (S_ISCHR(m) || S_ISBLK(m)) ? "device"
					    : "other";
}

/* Append {"path","type","size","truncated"}; the entry, or NULL (out of memory). */
static json_t *add_entry(struct walk *w, const char *path, const char *type, uint64_t size,
			 bool truncated)
{
	json_t *e = json_pack("{s:s, s:s, s:I, s:b}", "path", path, "type", type, "size",
			      (json_int_t)size, "truncated", truncated);
	if (!e || json_array_append_new(w->entries, e) < 0)
		return NULL;
	return e;
}

static void mark_truncated(json_t *e)
{
	if (e)
		json_object_set_new(e, "truncated", json_true());
}

/* Copy what fits of src (st: its stat) to name under out. 0 or -errno (the host's side). */
static int copy_file(struct walk *w, int src, const struct stat *st, int out, const char *name,
		     const char *spath)
{
	_cleanup_close_ int dst =
	    openat(out, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0)
		return -errno;
	uint64_t room = TASK_ARTIFACTS_BYTES_MAX - w->bytes, copied = 0;
	bool truncated = false;
	for (;;) {
		ssize_t n = read(src, w->buf, sizeof(w->buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t take = (uint64_t)n < room - copied ? (size_t)n : (size_t)(room - copied);
		int r = write_all(dst, w->buf, take);
		if (r < 0)
			return r;
		copied += take;
		if (take < (size_t)n) {
			truncated = true;
			break;
		}
	}
	w->bytes += copied;
	w->truncated |= truncated;
	return add_entry(w, spath, "file", (uint64_t)st->st_size, truncated) ? 0 : -ENOMEM;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int copy_at(struct walk *w, int src_parent, const char *name, const char *spath, int out,
		   unsigned depth, json_t *parent_entry);

/*
 * The names in src (at most what the entry cap leaves room for, sorted),
 * each copied beneath out. 0 or -errno (the host's side).
 */
static int copy_dir(struct walk *w, int src, const char *spath, int out, unsigned depth,
		    json_t *entry)
{
	int fd = dup(src);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		mark_truncated(entry);
		return 0; /* unreadable: nothing of it */
	}
	size_t room = TASK_ARTIFACTS_ENTRIES_MAX - w->count, n = 0;
	char **names = calloc(room + 1, sizeof(*names));
	struct dirent *de;
	int r = 0;
	while (names && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == room) {
			w->truncated = true;
			mark_truncated(entry);
			break;
		}
		if (!(names[n++] = strdup(de->d_name))) {
			r = -ENOMEM;
			break;
		}
	}
	closedir(d);
	if (!names)
		return -ENOMEM;
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n && r == 0; i++) {
		char child[SPEC_PATH_MAX + 1];
		json_t *s = json_string(names[i]); /* NULL: not UTF-8, not representable */
		json_decref(s);
		if (!s || (size_t)snprintf(child, sizeof(child), "%s/%s", spath, names[i]) >=
			      sizeof(child)) {
			w->truncated = true;
			mark_truncated(entry);
			continue;
		}
		r = copy_at(w, src, names[i], child, out, depth + 1, entry);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/*
 * Copy name under src_parent (spath: its sandbox path) to name under out.
 * Only the host's failures are errors; the sandbox's oddities are entries.
 */
static int copy_at(struct walk *w, int src_parent, const char *name, const char *spath, int out,
		   unsigned depth, json_t *parent_entry)
{
	struct stat st;
	if (fstatat(src_parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return add_entry(w, spath, "missing", 0, false) ? 0 : -ENOMEM;
	if (st.st_dev != w->dev || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
		return add_entry(w, spath, st.st_dev != w->dev ? "other" : type_name(st.st_mode), 0,
				 false)
			   ? 0
			   : -ENOMEM;
	if (w->count >= TASK_ARTIFACTS_ENTRIES_MAX || depth > TASK_ARTIFACTS_DEPTH_MAX) {
		w->truncated = true;
		mark_truncated(parent_entry);
		return 0;
	}
	int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	_cleanup_close_ int src =
	    openat(src_parent, name, S_ISDIR(st.st_mode) ? flags | O_DIRECTORY : flags);
	struct stat again;
	if (src < 0 || fstat(src, &again) < 0 || again.st_ino != st.st_ino ||
	    again.st_dev != st.st_dev || (again.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
		return add_entry(w, spath, "missing", 0, false) ? 0 : -ENOMEM;
	w->count++;
	if (S_ISREG(st.st_mode))
		return copy_file(w, src, &again, out, name, spath);
	if (mkdirat(out, name, 0700) < 0)
		return -errno;
	_cleanup_close_ int sub =
	    openat(out, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -errno;
	json_t *e = add_entry(w, spath, "directory", 0, false);
	if (!e)
		return -ENOMEM;
	return copy_dir(w, src, spath, sub, depth, e);
}

/* mkdir -p of host_rel's parents under out; the last one's fd, or -errno. */
static int make_parents(int out, const char *host_rel)
{
	char p[SPEC_PATH_MAX + 1];
	snprintf(p, sizeof(p), "%s", host_rel);
	int fd = fcntl(out, F_DUPFD_CLOEXEC, 3);
	char *s = p, *slash;
	while (fd >= 0 && (slash = strchr(s, '/'))) {
		*slash = '\0';
		if (mkdirat(fd, s, 0700) < 0 && errno != EEXIST) {
			int r = -errno;
			close(fd);
			return r;
		}
		int next = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int r = -errno;
		close(fd);
		if (next < 0)
			return r;
		fd = next;
		s = slash + 1;
	}
	return fd < 0 ? -errno : fd;
}

/*
 * Walk to rel's parent from root one component at a time (O_NOFOLLOW: a
 * symlink on the way is the end of it); its fd, or -1 when there is none.
 */
static int open_parent(int root, const char *rel)
{
	char p[SPEC_PATH_MAX + 1];
	snprintf(p, sizeof(p), "%s", rel);
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
	char *s = p, *slash;
	while (fd >= 0 && (slash = strchr(s, '/'))) {
		*slash = '\0';
		int next = openat(fd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		s = slash + 1;
	}
	return fd;
}

/* One declared path. */
static int collect_one(struct walk *w, const char *declared, const char *workdir, int work_fd,
		       int tmp_fd, int files)
{
	char spath[SPEC_PATH_MAX + 1];
	snprintf(spath, sizeof(spath), "%s", declared);
	size_t len = strlen(spath);
	while (len > 1 && spath[len - 1] == '/')
		spath[--len] = '\0';
	size_t wl = strlen(workdir);
	int root;
	const char *rel;
	if (strncmp(spath, workdir, wl) == 0 && (spath[wl] == '/' || spath[wl] == '\0')) {
		root = work_fd;
		rel = spath[wl] ? spath + wl + 1 : "";
	} else if (strncmp(spath, "/tmp", 4) == 0 && (spath[4] == '/' || spath[4] == '\0')) {
		root = tmp_fd;
		rel = spath[4] ? spath + 5 : "";
	} else {
		root = -1, rel = "";
	}
	if (root < 0)
		return add_entry(w, spath, "missing", 0, false) ? 0 : -ENOMEM;
	/* the copy's place: files/<spath without its '/'> */
	_cleanup_close_ int out = make_parents(files, spath + 1);
	if (out < 0)
		return out;
	const char *name = strrchr(spath, '/') + 1;
	if (!*rel) { /* the workdir or /tmp itself */
		_cleanup_close_ int src =
		    openat(root, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (src < 0)
			return add_entry(w, spath, "missing", 0, false) ? 0 : -ENOMEM;
		if (mkdirat(out, name, 0700) < 0 && errno != EEXIST)
			return -errno;
		_cleanup_close_ int sub =
		    openat(out, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		json_t *e = add_entry(w, spath, "directory", 0, false);
		if (sub < 0)
			return -errno;
		if (!e)
			return -ENOMEM;
		w->count++;
		return copy_dir(w, src, spath, sub, 0, e);
	}
	_cleanup_close_ int parent = open_parent(root, rel);
	if (parent < 0)
		return add_entry(w, spath, "missing", 0, false) ? 0 : -ENOMEM;
	return copy_at(w, parent, name, spath, out, 0, NULL);
}

int artifacts_remove_tree(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd < 0 ? NULL : fdopendir(fd);
		if (!d) {
			if (fd >= 0)
				close(fd);
			return -errno;
		}
		struct dirent *de;
		int r = 0;
		while ((de = readdir(d)) && r == 0)
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				r = artifacts_remove_tree(dirfd(d), de->d_name);
		closedir(d);
		if (r < 0)
			return r;
	}
	if (unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int artifacts_collect(int task_dirfd, uint32_t attempt, const json_t *paths, const char *workdir,
		      int work_fd, int tmp_fd, struct error *err)
{
	struct stat st;
	int r = artifacts_remove_tree(task_dirfd, LAYOUT_ARTIFACTS_NEW); /* a crash's */
	if (r < 0)
		return error_set_errno(err, -r, "remove the unfinished artifacts");
	if (mkdirat(task_dirfd, LAYOUT_ARTIFACTS_NEW, 0700) < 0)
		return error_set_errno(err, errno, "make %s", LAYOUT_ARTIFACTS_NEW);
	_cleanup_close_ int dir = openat(task_dirfd, LAYOUT_ARTIFACTS_NEW,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || mkdirat(dir, LAYOUT_ARTIFACTS_FILES, 0700) < 0)
		return error_set_errno(err, errno, "make %s", LAYOUT_ARTIFACTS_NEW);
	_cleanup_close_ int files =
	    openat(dir, LAYOUT_ARTIFACTS_FILES, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct walk *w = calloc(1, sizeof(*w));
	_cleanup_json_ json_t *entries = json_array();
	if (files < 0 || !w || !entries) {
		free(w);
		return error_set_errno(err, files < 0 ? errno : ENOMEM, "artifacts");
	}
	w->entries = entries;
	/* no fd: the sandbox never ran; the walk finds nothing then */
	bool have = work_fd >= 0 && tmp_fd >= 0 && fstat(work_fd, &st) == 0;
	w->dev = have ? st.st_dev : 0;
	size_t i;
	json_t *p;
	json_array_foreach(paths, i, p)
	{
		const char *s = json_string_value(p);
		if (!s || s[0] != '/')
			continue; /* the API checked them: not ours to judge */
		r = collect_one(w, s, workdir, have ? work_fd : -1, have ? tmp_fd : -1, files);
		if (r < 0)
			break;
	}
	_cleanup_json_ json_t *manifest =
	    r < 0 ? NULL
		  : json_pack("{s:I, s:I, s:b, s:O}", "attempt", (json_int_t)attempt, "bytes",
			      (json_int_t)w->bytes, "truncated", w->truncated, "entries", entries);
	free(w);
	if (r < 0)
		return error_set_errno(err, -r, "copy the artifacts");
	if (!manifest)
		return error_set(err, ENOMEM, "out of memory");
	if ((r = supervise_write_json(dir, LAYOUT_ARTIFACTS_MANIFEST, manifest, false)) < 0)
		return error_set_errno(err, -r, "write the artifacts' manifest");
	if (syncfs(dir) < 0)
		return error_set_errno(err, errno, "sync the artifacts");
	/* swap it in whole; the old set, if any, is then the one to remove */
	if (renameat2(task_dirfd, LAYOUT_ARTIFACTS_NEW, task_dirfd, LAYOUT_ARTIFACTS,
		      RENAME_EXCHANGE) < 0) {
		if (errno != ENOENT ||
		    renameat(task_dirfd, LAYOUT_ARTIFACTS_NEW, task_dirfd, LAYOUT_ARTIFACTS) < 0)
			return error_set_errno(err, errno, "put the artifacts in place");
	}
	(void)fsync(task_dirfd);
	r = artifacts_remove_tree(task_dirfd, LAYOUT_ARTIFACTS_NEW);
	return r < 0 ? error_set_errno(err, -r, "remove the older artifacts") : 0;
}
