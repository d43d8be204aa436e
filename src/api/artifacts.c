/*
 * artifacts.c - a task's artifacts, as its last ended attempt's
 * supervisor kept them (supervisor/artifacts.h, core/layout.h):
 *
 *	GET /v1/tasks/{id}/artifacts          the manifest: every entry's path,
 *	                                      type, size and truncated
 *	GET /v1/tasks/{id}/artifacts/{path}   a file's bytes as copied
 *	                                      (application/octet-stream); a
 *	                                      directory as a tar (application/
 *	                                      x-tar) of what was copied of it,
 *	                                      named from the directory's own name
 *	                                      ("out/", "out/a.txt")
 *
 * Only a path the manifest lists as "file" or "directory" is answered;
 * any other path is 404 file_not_found. The copies are opened beneath the
 * task's artifacts directory without following a symlink (there are none:
 * the supervisor makes only files and directories).
 */
#include "api/api-internal.h"
#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "core/layout.h"
#include "core/limits.h"

#include <archive.h>
#include <archive_entry.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The manifest, or an empty one when the task kept none (yet). NULL: error set. */
static json_t *load_manifest(struct api_call *c, int *ret_dirfd)
{
	char path[4096];
	*ret_dirfd = -1;
	if (!c->ctx->state_dir || layout_task_dir(path, sizeof(path), c->ctx->state_dir, c->id) < 0)
		return api_error_internal(c->err, EINVAL, "artifacts: no state directory"), NULL;
	size_t n = strlen(path);
	snprintf(path + n, sizeof(path) - n, "/%s", LAYOUT_ARTIFACTS);
	int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	json_t *m = NULL;
	if (dirfd >= 0) {
		_cleanup_close_ int fd = openat(dirfd, LAYOUT_ARTIFACTS_MANIFEST,
						O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
		m = fd < 0 ? NULL : json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
	}
	if (!m || !json_is_array(json_object_get(m, "entries"))) {
		json_decref(m);
		if (dirfd >= 0)
			close(dirfd);
		dirfd = -1;
		m = json_pack("{s:n, s:i, s:b, s:[]}", "attempt", "bytes", 0, "truncated", 0,
			      "entries");
		if (!m)
			return api_error_internal(c->err, ENOMEM, "out of memory"), NULL;
	}
	*ret_dirfd = dirfd;
	return m;
}

int api_task_artifacts(struct api_call *c)
{
	struct task t = {0};
	struct error se = {0};
	int r = store_task_get(c->ctx->store, c->id, &t, &se);
	task_release(&t);
	if (r < 0)
		return api_store_error(c, r, &se);
	int dirfd;
	json_t *m = load_manifest(c, &dirfd);
	if (!m)
		return -EINVAL;
	if (dirfd >= 0)
		close(dirfd);
	return api_respond_json(c, 200, m);
}

/* Is p (no trailing '/') under dir (no trailing '/')? */
static bool is_beneath(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(p, dir, n) == 0 && p[n] == '/';
}

/* A copy's fd: files/<path>, beneath dirfd, no symlink on the way; -1 if none. */
static int open_copy(int dirfd, const char *path)
{
	char rel[SPEC_PATH_MAX + 16];
	snprintf(rel, sizeof(rel), "%s%s", LAYOUT_ARTIFACTS_FILES, path);
	struct open_how how = {.flags = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	int fd = dirfd < 0 ? -1 : (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* One member: a directory, or the file fd's bytes. 0, or -EIO (libarchive's). */
static int add_member(struct archive *a, const char *name, int fd)
{
	struct archive_entry *ent = archive_entry_new();
	struct stat st = {0};
	if (!ent || (fd >= 0 && fstat(fd, &st) < 0)) {
		archive_entry_free(ent);
		return -EIO;
	}
	archive_entry_set_pathname(ent, name);
	archive_entry_set_filetype(ent, fd >= 0 ? AE_IFREG : AE_IFDIR);
	archive_entry_set_perm(ent, fd >= 0 ? 0644 : 0755);
	archive_entry_set_size(ent, fd >= 0 ? st.st_size : 0);
	int r = archive_write_header(a, ent) == ARCHIVE_OK ? 0 : -EIO;
	archive_entry_free(ent);
	char buf[65536];
	ssize_t n;
	while (r == 0 && fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		if (archive_write_data(a, buf, (size_t)n) != n)
			r = -EIO;
	return r;
}

/*
 * Directory want as a tar, built into an unnamed temporary file beside
 * the artifacts (O_TMPFILE: nothing is left if we die) and sent from it:
 * at most what the supervisor copied, TASK_ARTIFACTS_BYTES_MAX, plus the
 * headers of TASK_ARTIFACTS_ENTRIES_MAX members.
 */
static int respond_tar(struct api_call *c, int dirfd, json_t *entries, const char *want)
{
	_cleanup_close_ int fd =
	    dirfd < 0 ? -1 : openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return api_error_internal(c->err, errno, "artifacts: a temporary file for the tar");
	struct archive *a = archive_write_new();
	if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		archive_write_free(a);
		return api_error_internal(c->err, EIO, "artifacts: cannot start the tar");
	}
	size_t skip = (size_t)(strrchr(want, '/') - want) + 1; /* names from want's own name */
	size_t i;
	json_t *e;
	int r = 0;
	json_array_foreach(entries, i, e)
	{
		const char *p = json_string_value(json_object_get(e, "path"));
		const char *type = json_string_value(json_object_get(e, "type"));
		if (!p || !type || (strcmp(p, want) != 0 && !is_beneath(p, want)))
			continue;
		bool dir = strcmp(type, "directory") == 0;
		if (!dir && strcmp(type, "file") != 0)
			continue;
		_cleanup_close_ int f = dir ? -1 : open_copy(dirfd, p);
		if (!dir && f < 0)
			continue; /* listed, but not there: nothing to send */
		char name[SPEC_PATH_MAX + 2];
		snprintf(name, sizeof(name), "%s%s", p + skip, dir ? "/" : "");
		if ((r = add_member(a, name, f)) < 0)
			break;
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		r = -EIO;
	archive_write_free(a);
	struct stat st;
	if (r < 0 || fstat(fd, &st) < 0)
		return api_error_internal(c->err, r < 0 ? -r : errno,
					  "artifacts: cannot write the tar");
	struct api_response *res = api_respond_kind(c, 200, "application/x-tar", API_RESPONSE_FILE);
	res->fd = TAKE_FD(fd);
	res->size = (uint64_t)st.st_size;
	return 0;
}

int api_task_artifact(struct api_call *c)
{
	struct task t = {0};
	struct error se = {0};
	int r = store_task_get(c->ctx->store, c->id, &t, &se);
	task_release(&t);
	if (r < 0)
		return api_store_error(c, r, &se);
	char want[SPEC_PATH_MAX + 2];
	size_t len = c->match->param2_len;
	while (len > 0 && c->match->param2[len - 1] == '/')
		len--;
	if (len == 0 || len >= sizeof(want) - 1)
		return api_error_set(c->err, API_ERR_FILE_NOT_FOUND, NULL, "no such artifact");
	want[0] = '/';
	memcpy(want + 1, c->match->param2, len);
	want[len + 1] = '\0';

	_cleanup_close_ int dirfd = -1;
	_cleanup_json_ json_t *m = load_manifest(c, &dirfd);
	if (!m)
		return -EINVAL;
	json_t *entries = json_object_get(m, "entries"), *e, *found = NULL;
	size_t i;
	json_array_foreach(entries, i, e)
	{
		char p[SPEC_PATH_MAX + 2];
		snprintf(p, sizeof(p), "%s", json_string_value(json_object_get(e, "path")));
		size_t n = strlen(p);
		while (n > 1 && p[n - 1] == '/')
			p[--n] = '\0';
		if (strcmp(p, want) == 0) {
			found = e;
			break;
		}
	}
	const char *type = json_string_value(json_object_get(found, "type"));
	if (!type || (strcmp(type, "file") != 0 && strcmp(type, "directory") != 0))
		return api_error_set(c->err, API_ERR_FILE_NOT_FOUND, NULL,
				     found ? "artifact %s is a %s: not kept" : "no artifact %s",
				     want, type ? type : "");
	if (strcmp(type, "directory") == 0)
		return respond_tar(c, dirfd, entries, want);
	int fd = open_copy(dirfd, want);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return api_error_set(c->err, API_ERR_FILE_NOT_FOUND, NULL, "no artifact %s", want);
	}
	struct api_response *res =
	    api_respond_kind(c, 200, "application/octet-stream", API_RESPONSE_FILE);
	res->fd = fd;
	res->size = (uint64_t)st.st_size;
	return 0;
}
