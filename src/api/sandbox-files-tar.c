/*
 * sandbox-files-tar.c - a sandbox's directory as a tar, both ways:
 *
 *	GET /v1/sandboxes/{id}/files?path=DIR&format=tar
 *	    DIR as a tar (application/x-tar), named from its own name ("dir/",
 *	    "dir/a.txt", "dir/sub/"), as a task's directory artifact is
 *	    (artifacts.c): pax restricted, directories 0755, files 0644.
 *	PUT /v1/sandboxes/{id}/files?path=DIR&format=tar
 *	    the body, a tar, unpacked into DIR (made, with its parents).
 *
 * The host never resolves a path of the sandbox's: GET has the sandbox
 * open every directory it lists and every file it sends (fleet_open(),
 * as GET .../files does), and reads a listing's types without following
 * anything (fstatat(AT_SYMLINK_NOFOLLOW)). Only regular files and
 * directories go into the tar; a symlink, FIFO, socket or device is left
 * out and counted (the response's API_FILES_TAR_SKIPPED_HEADER), and so is
 * an entry that changed between its listing and its open (another inode:
 * a directory swapped for a symlink meanwhile is not followed).
 *
 * PUT's tar is untrusted input: the body is spooled to an unnamed
 * temporary file (O_TMPFILE in the state directory, at most
 * API_FILES_TAR_BYTES_MAX bytes) and read twice by libarchive (tar
 * formats only, no compression). The first pass checks every member and
 * writes nothing: a name must be relative and canonical once a leading
 * "./" is dropped (api_tar_member_name(), the check a task's tar_base64
 * gets), a member must be a regular file or a directory (a symlink, hard
 * link, device or FIFO is 400 naming it), and there are at most
 * API_FILES_TAR_ENTRIES_MAX. The second writes: a directory is made
 * through the sandbox, a file through its copier as PUT of one file is
 * (a temporary renamed in place). A failure half way stops there: what
 * was written stays.
 */
#include "api/api-internal.h"
#include "api/sandbox-request.h"
#include "api/tar-member.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/limits.h"

#include <archive.h>
#include <archive_entry.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What one tar header (and a pax header for a long name) may take in the spool. */
#define TAR_HEADER_COST 1536
/* The bytes of a sandbox path the files routes take (api_sandbox_path_check()). */
#define TAR_PATH_MAX 1024

/* A spool: an unnamed temporary file of the state directory's. -errno with e. */
static int open_spool(const char *state_dir, int *ret_fd, struct api_error *e)
{
	int fd = state_dir ? open(state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
	if (fd < 0)
		return api_error_internal(e, state_dir ? errno : EINVAL,
					  "files: a temporary file for a tar");
	*ret_fd = fd;
	return 0;
}

int api_files_tar_spool(struct api_call *c, int *ret_fd)
{
	return open_spool(c->ctx->state_dir, ret_fd, c->err);
}

/* "dir/name", or "/name" under "/", into out (TAR_PATH_MAX + 1); false: too long. */
static bool join(char out[TAR_PATH_MAX + 1], const char *dir, const char *name)
{
	size_t n = strlen(dir);
	int w =
	    snprintf(out, TAR_PATH_MAX + 1, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
	return w > 0 && w <= TAR_PATH_MAX;
}

/* ---- GET: the directory as a tar ------------------------------------------------ */

struct walk {
	struct api_call *c;
	const struct fleet_ops *ops;
	struct archive *a;
	uint64_t entries;
	uint64_t bytes; /* what the spool holds at most so far */
	uint64_t skipped;
	char *buf; /* WALK_BUF_SIZE bytes: a file's bytes on their way */
};

#define WALK_BUF_SIZE 65536

struct listed {
	char *name;
	mode_t mode;
	dev_t dev;
	ino_t ino;
};

static int listed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct listed *)a)->name, ((const struct listed *)b)->name);
}

static void listed_free(struct listed *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i].name);
	free(l);
}

/* Count one more entry of size bytes: 0, or 413 past a limit. */
static int take(struct walk *w, const char *path, uint64_t size)
{
	if (++w->entries > API_FILES_TAR_ENTRIES_MAX)
		return api_error_set(w->c->err, API_ERR_FILE_TOO_LARGE, "path",
				     "%s holds more than %d entries", path,
				     API_FILES_TAR_ENTRIES_MAX);
	uint64_t cost = TAR_HEADER_COST + (size + 511) / 512 * 512;
	if (size > API_FILES_TAR_BYTES_MAX || cost > API_FILES_TAR_BYTES_MAX - w->bytes)
		return api_error_set(w->c->err, API_ERR_FILE_TOO_LARGE, "path",
				     "%s makes a tar of more than %llu bytes", path,
				     (unsigned long long)API_FILES_TAR_BYTES_MAX);
	w->bytes += cost;
	return 0;
}

/* A member's header: a directory, or a regular file of size bytes. */
static int put_header(struct walk *w, const char *member, bool dir, uint64_t size,
		      const struct stat *st)
{
	struct archive_entry *ent = archive_entry_new();
	if (!ent)
		return api_error_internal(w->c->err, ENOMEM, "files: tar entry");
	archive_entry_set_pathname(ent, member);
	archive_entry_set_filetype(ent, dir ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(ent, dir ? 0755 : 0644);
	archive_entry_set_size(ent, dir ? 0 : (la_int64_t)size);
	archive_entry_set_mtime(ent, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	int r = archive_write_header(w->a, ent) == ARCHIVE_OK
		    ? 0
		    : api_error_internal(w->c->err, EIO, "files: writing the tar");
	archive_entry_free(ent);
	return r;
}

/* Regular file path, as listed (l): its bytes, as they are when the sandbox opens it. */
static int add_file(struct walk *w, const char *path, const char *member, const struct listed *l)
{
	struct error err = {0};
	int fd = -1;
	int r = w->ops->open(w->c->ctx->fleet, w->c->id, path, "read", &fd, NULL, 0, &err);
	if (r < 0) {
		if (r == -EREMOTEIO && (err.code == ENOENT || err.code == EINVAL)) {
			w->skipped++; /* gone, or no longer a file, since the listing */
			return 0;
		}
		return api_fleet_error(w->c, r, &err, "file");
	}
	_cleanup_close_ int f = fd;
	struct stat st;
	if (fstat(f, &st) < 0)
		return api_error_internal(w->c->err, errno, "files: fstat");
	if (!S_ISREG(st.st_mode) || st.st_dev != l->dev || st.st_ino != l->ino) {
		w->skipped++; /* another file than was listed: swapped meanwhile */
		return 0;
	}
	uint64_t size = (uint64_t)st.st_size;
	if ((r = take(w, path, size)) < 0 || (r = put_header(w, member, false, size, &st)) < 0)
		return r;
	/* exactly size bytes: a file that grows is cut, one that shrinks padded with zeros */
	char *buf = w->buf;
	uint64_t left = size;
	while (left > 0) {
		size_t want = left < WALK_BUF_SIZE ? (size_t)left : WALK_BUF_SIZE;
		ssize_t n = read(f, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return api_error_internal(w->c->err, errno, "files: reading a file");
		if (n == 0) {
			memset(buf, 0, want);
			n = (ssize_t)want;
		}
		if (archive_write_data(w->a, buf, (size_t)n) != n)
			return api_error_internal(w->c->err, EIO, "files: writing the tar");
		left -= (uint64_t)n;
	}
	return 0;
}

/* The entries of directory fd (taken), sorted by name, without following any. */
static int list(struct walk *w, int fd, const char *path, struct listed **ret, size_t *ret_n)
{
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int e = errno;
		close(fd);
		return api_error_internal(w->c->err, e, "files: fdopendir");
	}
	struct listed *items = NULL;
	size_t n = 0;
	int r = 0;
	struct dirent *de;
	while ((errno = 0, de = readdir(dir))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (w->entries + n >= API_FILES_TAR_ENTRIES_MAX) {
			r = api_error_set(w->c->err, API_ERR_FILE_TOO_LARGE, "path",
					  "%s holds more than %d entries", path,
					  API_FILES_TAR_ENTRIES_MAX);
			break;
		}
		struct stat st;
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone since readdir() */
		struct listed *grown = realloc(items, (n + 1) * sizeof(*items));
		char *name = grown ? strdup(de->d_name) : NULL;
		if (grown)
			items = grown;
		if (!name) {
			r = api_error_internal(w->c->err, ENOMEM, "files: listing a directory");
			break;
		}
		items[n++] = (struct listed){name, st.st_mode, st.st_dev, st.st_ino};
	}
	if (r == 0 && errno != 0)
		r = api_error_internal(w->c->err, errno, "files: listing a directory");
	closedir(dir);
	if (r < 0) {
		listed_free(items, n);
		return r;
	}
	if (n)
		qsort(items, n, sizeof(*items), listed_cmp);
	*ret = items;
	*ret_n = n;
	return 0;
}

/*
 * Directory path as member (its name, no '/'), depth levels below the
 * top; l: how its parent's listing saw it (NULL for the top).
 */
static int add_dir(struct walk *w, const char *path, const char *member, int depth,
		   const struct listed *l)
{
	struct error err = {0};
	int fd = -1;
	int r = w->ops->open(w->c->ctx->fleet, w->c->id, path, "dir", &fd, NULL, 0, &err);
	if (r < 0) {
		if (!l && r == -EREMOTEIO && err.code == ENOTDIR)
			return api_error_set(w->c->err, API_ERR_NOT_A_FILE, "path",
					     "%s is not a directory: format=tar copies one", path);
		if (l && r == -EREMOTEIO && (err.code == ENOENT || err.code == ENOTDIR)) {
			w->skipped++; /* gone, or no longer a directory, since the listing */
			return 0;
		}
		return api_fleet_error(w->c, r, &err, "file");
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    (l && (st.st_dev != l->dev || st.st_ino != l->ino))) {
		close(fd);
		w->skipped++; /* another directory than was listed: swapped meanwhile */
		return 0;
	}
	char name[TAR_PATH_MAX + 2];
	snprintf(name, sizeof(name), "%s/", member);
	if ((r = take(w, path, 0)) < 0 || (r = put_header(w, name, true, 0, &st)) < 0) {
		close(fd);
		return r;
	}
	struct listed *items = NULL;
	size_t n = 0;
	if ((r = list(w, fd, path, &items, &n)) < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++) {
		char child[TAR_PATH_MAX + 1], cmember[TAR_PATH_MAX + 1];
		if (!join(child, path, items[i].name) || !join(cmember, member, items[i].name)) {
			w->skipped++; /* a path longer than the sandbox's routes take */
			continue;
		}
		if (S_ISDIR(items[i].mode)) {
			if (depth + 1 > API_FILES_TAR_DEPTH_MAX)
				r = api_error_set(w->c->err, API_ERR_FILE_TOO_LARGE, "path",
						  "%s is more than %d levels deep", child,
						  API_FILES_TAR_DEPTH_MAX);
			else
				r = add_dir(w, child, cmember, depth + 1, &items[i]);
		} else if (S_ISREG(items[i].mode)) {
			r = add_file(w, child, cmember, &items[i]);
		} else {
			w->skipped++; /* a symlink, FIFO, socket or device */
		}
	}
	listed_free(items, n);
	return r;
}

int api_files_get_tar(struct api_call *c, const struct fleet_ops *ops, const char *path)
{
	char top[TAR_PATH_MAX + 1];
	snprintf(top, sizeof(top), "%s", path);
	size_t n = strlen(top);
	while (n > 1 && top[n - 1] == '/')
		top[--n] = '\0';
	const char *name = strrchr(top, '/') + 1;
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "path",
				     "format=tar names its members from the directory's own "
				     "name: %s has none",
				     path);
	/* the walk waits on the sandbox, and makes no store call */
	if (c->ctx->store_release)
		c->ctx->store_release(c->ctx);
	_cleanup_close_ int fd = -1;
	int r = open_spool(c->ctx->state_dir, &fd, c->err);
	if (r < 0)
		return r;
	_cleanup_free_ char *buf = malloc(WALK_BUF_SIZE);
	struct walk w = {.c = c, .ops = ops, .a = archive_write_new(), .buf = buf};
	if (!buf || !w.a || archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK ||
	    archive_write_open_fd(w.a, fd) != ARCHIVE_OK) {
		archive_write_free(w.a);
		return api_error_internal(c->err, EIO, "files: cannot start the tar");
	}
	r = add_dir(&w, top, name, 0, NULL);
	if (archive_write_close(w.a) != ARCHIVE_OK && r == 0)
		r = api_error_internal(c->err, EIO, "files: cannot write the tar");
	archive_write_free(w.a);
	struct stat st;
	if (r == 0 && fstat(fd, &st) < 0)
		r = api_error_internal(c->err, errno, "files: the tar");
	if (r < 0)
		return r;
	struct api_response *res = api_respond_kind(c, 200, "application/x-tar", API_RESPONSE_FILE);
	res->fd = TAKE_FD(fd);
	res->size = (uint64_t)st.st_size;
	res->skipped = w.skipped;
	return 0;
}

/* ---- PUT: a tar unpacked into the sandbox --------------------------------------- */

struct unpack {
	const struct fleet_ops *ops;
	struct fleet *fleet;
	const char *id;
	const char *dest;
	struct api_error *e;
	uint64_t files, dirs, bytes;
};

/* A failed fleet call r (err) as the API says it, for a write into the sandbox. */
static int fleet_failed(struct unpack *u, int r, const struct error *err)
{
	switch (r) {
	case -ENOMEM:
		return r;
	case -EREMOTEIO:
		return api_upload_error(u->e, err->code, err->msg);
	case -ENOENT:
		return api_error_set(u->e, API_ERR_NOT_FOUND, NULL, "%s", err->msg);
	case -ESTALE:
		return api_error_set(u->e, API_ERR_SANDBOX_ENDED, NULL, "%s", err->msg);
	case -EBUSY:
		return api_error_set(u->e, API_ERR_SANDBOX_PAUSED, NULL, "%s", err->msg);
	case -EUSERS:
		return api_error_set(u->e, API_ERR_TOO_MANY_REQUESTS, NULL, "%s", err->msg);
	default:
		return api_error_internal(u->e, -r, err->msg[0] ? err->msg : "files: the sandbox");
	}
}

/*
 * Make directory dir in the sandbox, with its parents: there is no mkdir
 * through the fleet, but a write makes the parents of what it writes, so
 * a write into dir is begun and given up (its temporary removed).
 */
static int make_dir(struct unpack *u, const char *dir)
{
	char probe[TAR_PATH_MAX + 1], temp[TAR_PATH_MAX + 64];
	if (!join(probe, dir, ".agentbox-mkdir"))
		return api_error_set(u->e, API_ERR_INVALID_FIELD, "path", "%s is too long a path",
				     dir);
	struct error err = {0};
	int fd = -1;
	int r = u->ops->open(u->fleet, u->id, probe, "write", &fd, temp, sizeof(temp), &err);
	if (r < 0)
		return fleet_failed(u, r, &err);
	close(fd);
	if ((r = u->ops->unlink(u->fleet, u->id, temp, &err)) < 0)
		return fleet_failed(u, r, &err);
	return 0;
}

/* The member's data, read from a, as file path of the sandbox (a temporary renamed in). */
static int write_file(struct unpack *u, struct archive *a, const char *path)
{
	char temp[TAR_PATH_MAX + 64];
	struct error err = {0};
	int fd = -1;
	int r = u->ops->open(u->fleet, u->id, path, "write", &fd, temp, sizeof(temp), &err);
	if (r < 0)
		return fleet_failed(u, r, &err);
	bool copier = api_copier_prepare(fd);
	bool ended = false;
	int werr = 0;
	const void *buf;
	size_t len;
	la_int64_t off;
	int h;
	while ((h = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
		if (ended || werr)
			continue;
		int s = copier ? api_copier_send(fd, buf, len) : write_all(fd, buf, len);
		if (s == -EPIPE || s == -ECONNRESET)
			ended = true; /* the copier failed: the rename says why */
		else if (s < 0)
			werr = s == -EAGAIN ? ETIMEDOUT : -s;
		u->bytes += len;
	}
	if (h != ARCHIVE_EOF && !werr)
		werr = EIO; /* the spool was checked whole: not to happen */
	if (copier && !werr)
		api_copier_wait(fd);
	close(fd);
	if (werr) {
		(void)u->ops->unlink(u->fleet, u->id, temp, &err);
		return werr == EIO ? api_error_internal(u->e, EIO, "files: reading the tar")
				   : api_upload_error(u->e, werr, NULL);
	}
	if ((r = u->ops->rename(u->fleet, u->id, temp, path, &err)) < 0) {
		struct error ignored = {0};
		(void)u->ops->unlink(u->fleet, u->id, temp, &ignored);
		return fleet_failed(u, r, &err);
	}
	u->files++;
	return 0;
}

/*
 * One pass over the tar in spool: check (write false: every member, and
 * nothing written) or write (every member into the sandbox).
 */
static int pass(struct unpack *u, int spool, bool write)
{
	if (lseek(spool, 0, SEEK_SET) < 0)
		return api_error_internal(u->e, errno, "files: the spool");
	struct archive *a = archive_read_new();
	if (!a)
		return -ENOMEM;
	archive_read_support_format_tar(a);
	int r = 0;
	if (archive_read_open_fd(a, spool, 65536) != ARCHIVE_OK) {
		r = api_error_set(u->e, API_ERR_INVALID_FIELD, "body", "the body is not a tar: %s",
				  archive_error_string(a));
		goto out;
	}
	size_t members = 0;
	struct archive_entry *ent;
	int h;
	while ((h = archive_read_next_header(a, &ent)) == ARCHIVE_OK) {
		char nbuf[TAR_PATH_MAX + 1], path[TAR_PATH_MAX + 1], field[API_FIELD_MAX];
		const char *raw = archive_entry_pathname(ent);
		mode_t type = archive_entry_filetype(ent);
		api_field_key(field, "tar", raw ? raw : "");
		if (++members > API_FILES_TAR_ENTRIES_MAX) {
			r = api_error_set(u->e, API_ERR_BODY_TOO_LARGE, "body",
					  "the tar holds more than %d members",
					  API_FILES_TAR_ENTRIES_MAX);
			break;
		}
		if (raw && type == AE_IFDIR && (strcmp(raw, ".") == 0 || strcmp(raw, "./") == 0))
			continue; /* dest itself */
		const char *name = raw ? api_tar_member_name(raw, nbuf, sizeof(nbuf)) : NULL;
		if (!name) {
			r = api_error_set(u->e, API_ERR_INVALID_FIELD, field,
					  "member '%s' of the tar is not a relative, canonical "
					  "name",
					  raw ? raw : "");
			break;
		}
		if (archive_entry_hardlink(ent) || (type != AE_IFREG && type != AE_IFDIR) ||
		    archive_entry_sparse_count(ent) > 0) {
			const char *what = archive_entry_hardlink(ent) ? "a hard link"
					   : type == AE_IFLNK	       ? "a symlink"
					   : type == AE_IFREG	       ? "a sparse file"
								       : "not a regular file";
			r = api_error_set(u->e, API_ERR_INVALID_FIELD, field,
					  "member '%s' of the tar is %s: only regular files and "
					  "directories are taken",
					  name, what);
			break;
		}
		if (!join(path, u->dest, name)) {
			r = api_error_set(u->e, API_ERR_INVALID_FIELD, field,
					  "member '%s' makes a path longer than %d bytes", name,
					  TAR_PATH_MAX);
			break;
		}
		if (!write)
			continue;
		if (type == AE_IFDIR) {
			if ((r = make_dir(u, path)) < 0)
				break;
			u->dirs++;
		} else if ((r = write_file(u, a, path)) < 0) {
			break;
		}
	}
	if (r == 0 && h != ARCHIVE_EOF)
		r = api_error_set(u->e, API_ERR_INVALID_FIELD, "body",
				  "the body is not a whole tar: %s", archive_error_string(a));
out:
	archive_read_free(a);
	return r;
}

int api_files_tar_unpack(const struct fleet_ops *ops, struct fleet *f, const char *id,
			 const char *dest, int spool, struct api_response *ret, struct api_error *e)
{
	char top[TAR_PATH_MAX + 1];
	snprintf(top, sizeof(top), "%s", dest);
	size_t n = strlen(top);
	while (n > 1 && top[n - 1] == '/')
		top[--n] = '\0';
	struct unpack u = {.ops = ops, .fleet = f, .id = id, .dest = top, .e = e};
	int r = pass(&u, spool, false);
	if (r == 0)
		r = make_dir(&u, top);
	if (r == 0)
		r = pass(&u, spool, true);
	if (r < 0)
		return r;
	json_t *v = json_pack("{s:s, s:I, s:I, s:I}", "path", top, "files", (json_int_t)u.files,
			      "directories", (json_int_t)u.dirs, "bytes", (json_int_t)u.bytes);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return -ENOMEM;
	api_json_response(ret, 200, text);
	return 0;
}
