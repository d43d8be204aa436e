/*
 * source.c - where an import reads an image from (import-internal.h): a
 * layout directory, or an archive whose files are staged first.
 *
 * An archive (tar; gzip or zstd) is read once, in order, by libarchive:
 * each regular file is copied into the import's staging directory under
 * a number, its SHA-256 computed on the way; symlinks and hard links are
 * kept as names of other entries. Paths are the archive's, cleaned
 * ("./a" is "a"); an absolute path or a ".." is refused. Nothing of the
 * archive is ever created under its own name: the staging directory
 * holds only numbers.
 */
#include "image/import-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Links followed to find a file of an archive. */
#define SOURCE_LINKS_MAX 8
#define SOURCE_BLOCK	 (128u * 1024)

int sha256_init(struct sha256 *h)
{
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		sha256_release(h);
		return -ENOMEM;
	}
	return 0;
}

void sha256_update(struct sha256 *h, const void *data, size_t len)
{
	EVP_DigestUpdate(h->ctx, data, len);
}

void sha256_final(struct sha256 *h, char hex[IMAGE_DIGEST_HEX + 1])
{
	unsigned char md[32];
	unsigned int n = 0;
	EVP_DigestFinal_ex(h->ctx, md, &n);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	sha256_release(h);
}

void sha256_release(struct sha256 *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

/* Clean an archive path into out: no "./", no "//", no trailing '/'; -EINVAL for '/' or "..". */
static int clean_path(const char *p, char *out, size_t size)
{
	size_t n = 0;
	if (p[0] == '/')
		return -EINVAL;
	while (*p) {
		size_t len = strcspn(p, "/");
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n + len + 2 > size)
				return -ENAMETOOLONG;
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
		while (*p == '/')
			p++;
	}
	out[n] = '\0';
	return n ? 0 : -EINVAL;
}

/* A symlink's target, relative to the entry's directory, as an archive path. */
static int link_target(const char *entry, const char *target, char *out, size_t size)
{
	char joined[2 * IMAGE_ARCHIVE_PATH_MAX + 2];
	const char *slash = strrchr(entry, '/');
	if (target[0] == '/')
		return -EINVAL;
	snprintf(joined, sizeof(joined), "%.*s%s%s", slash ? (int)(slash - entry) : 0, entry,
		 slash ? "/" : "", target);
	/* resolve ".." lexically, never above the archive's top */
	char parts[2 * IMAGE_ARCHIVE_PATH_MAX + 2] = "";
	size_t n = 0;
	for (const char *p = joined; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (n == 0)
				return -EINVAL;
			while (n > 0 && parts[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
		} else if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n + len + 2 > sizeof(parts))
				return -ENAMETOOLONG;
			if (n)
				parts[n++] = '/';
			memcpy(parts + n, p, len);
			n += len;
		}
		p += len;
		while (*p == '/')
			p++;
	}
	parts[n] = '\0';
	if (n == 0 || n >= size)
		return -EINVAL;
	memcpy(out, parts, n + 1);
	return 0;
}

static struct source_file *source_add(struct source *src, const char *path, struct error *err)
{
	if (src->n == IMAGE_ARCHIVE_ENTRIES_MAX) {
		error_set(err, E2BIG, "the archive has more than %d files",
			  IMAGE_ARCHIVE_ENTRIES_MAX);
		return NULL;
	}
	if (src->n == src->cap) {
		size_t cap = src->cap ? 2 * src->cap : 64;
		struct source_file *v = realloc(src->files, cap * sizeof(*v));
		if (!v) {
			error_set(err, ENOMEM, "out of memory");
			return NULL;
		}
		src->files = v;
		src->cap = cap;
	}
	struct source_file *f = &src->files[src->n];
	memset(f, 0, sizeof(*f));
	if (!(f->path = strdup(path))) {
		error_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	src->n++;
	return f;
}

/* Copy the entry's data into staged file number idx, hashing it. */
static int stage_data(struct source *src, struct archive *a, struct source_file *f, size_t idx,
		      struct error *err)
{
	char name[24];
	snprintf(name, sizeof(name), "%zu", idx);
	_cleanup_close_ int fd =
	    openat(src->stagefd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_set_errno(err, errno, "staging %s", f->path);
	struct sha256 h;
	_cleanup_free_ char *block = malloc(SOURCE_BLOCK);
	if (!block || sha256_init(&h) < 0)
		return error_set(err, ENOMEM, "out of memory");
	for (;;) {
		la_ssize_t n = archive_read_data(a, block, SOURCE_BLOCK);
		if (n == 0)
			break;
		if (n < 0) {
			sha256_release(&h);
			return error_set(err, EINVAL, "the archive: %s: %s", f->path,
					 archive_error_string(a));
		}
		src->bytes += (uint64_t)n;
		if (src->bytes > IMAGE_BLOBS_MAX) {
			sha256_release(&h);
			return error_set(err, EFBIG, "the archive holds more than %llu bytes",
					 (unsigned long long)IMAGE_BLOBS_MAX);
		}
		sha256_update(&h, block, (size_t)n);
		int r = write_all(fd, block, (size_t)n);
		if (r < 0) {
			sha256_release(&h);
			return error_set_errno(err, -r, "staging %s", f->path);
		}
		f->size += (uint64_t)n;
	}
	sha256_final(&h, f->hex);
	f->staged = true;
	return 0;
}

static int source_read_archive(struct source *src, int fd, struct error *err)
{
	struct archive *a = archive_read_new();
	if (!a)
		return error_set(err, ENOMEM, "out of memory");
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	int r = 0;
	if (archive_read_open_fd(a, fd, SOURCE_BLOCK) != ARCHIVE_OK) {
		r = error_set(err, EINVAL, "not a tar archive: %s", archive_error_string(a));
		archive_read_free(a);
		return r;
	}
	struct archive_entry *e;
	int ar;
	size_t headers = 0;
	while (r == 0 && (ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (++headers > IMAGE_ARCHIVE_ENTRIES_MAX) {
			r = error_set(err, E2BIG, "the archive has more than %d entries",
				      IMAGE_ARCHIVE_ENTRIES_MAX);
			break;
		}
		const char *raw = archive_entry_pathname(e);
		char path[IMAGE_ARCHIVE_PATH_MAX], target[IMAGE_ARCHIVE_PATH_MAX];
		if (!raw || strlen(raw) >= IMAGE_ARCHIVE_PATH_MAX) {
			r = error_set(err, EINVAL, "the archive has a path longer than %d bytes",
				      IMAGE_ARCHIVE_PATH_MAX - 1);
			break;
		}
		if (clean_path(raw, path, sizeof(path)) < 0) {
			if (strcmp(raw, "./") == 0 || strcmp(raw, ".") == 0)
				continue;
			r = error_set(err, EINVAL,
				      "the archive's entry '%s' is not a relative path", raw);
			break;
		}
		const char *hard = archive_entry_hardlink(e);
		mode_t type = archive_entry_filetype(e);
		if (type == AE_IFDIR || (!hard && type != AE_IFREG && type != AE_IFLNK))
			continue;
		struct source_file *f = source_add(src, path, err);
		if (!f) {
			r = -err->code;
			break;
		}
		if (hard || type == AE_IFLNK) {
			int lr = hard ? clean_path(hard, target, sizeof(target))
				      : link_target(path, archive_entry_symlink(e) ?: "", target,
						    sizeof(target));
			if (lr < 0 || !(f->link = strdup(target)))
				f->link = NULL; /* a link out of the archive: a dead end */
			continue;
		}
		r = stage_data(src, a, f, src->n - 1, err);
	}
	if (r == 0 && ar != ARCHIVE_EOF)
		r = error_set(err, EINVAL, "the archive: %s", archive_error_string(a));
	archive_read_free(a);
	return r;
}

int source_open(struct source *src, struct image_store *s, const char *path, struct error *err)
{
	*src = (struct source){.dirfd = -1, .stagefd = -1};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "%s", path);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return error_set_errno(err, e, "%s", path);
	}
	if (S_ISDIR(st.st_mode)) {
		src->dirfd = fd;
		return 0;
	}
	_cleanup_close_ int archive = fd;
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "%s: neither a directory nor a file", path);
	int n = snprintf(src->stage_path, sizeof(src->stage_path),
			 "%s/" LAYOUT_IMAGE_TMP "/import-XXXXXX", image_store_dir(s));
	if (n < 0 || (size_t)n >= sizeof(src->stage_path) || !mkdtemp(src->stage_path)) {
		src->stage_path[0] = '\0';
		return error_set_errno(err, errno, "a staging directory in %s", image_store_dir(s));
	}
	src->stagefd = open(src->stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (src->stagefd < 0)
		return error_set_errno(err, errno, "%s", src->stage_path);
	return source_read_archive(src, archive, err);
}

void source_release(struct source *src)
{
	CLOSE_FD(src->dirfd);
	CLOSE_FD(src->stagefd);
	if (src->stage_path[0]) {
		char *slash = strrchr(src->stage_path, '/');
		*slash = '\0';
		int parent = open(src->stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent >= 0) {
			(void)store_remove_all(parent, slash + 1);
			close(parent);
		}
	}
	for (size_t i = 0; i < src->n; i++) {
		free(src->files[i].path);
		free(src->files[i].link);
	}
	free(src->files);
	memset(src, 0, sizeof(*src));
	src->dirfd = src->stagefd = -1;
}

struct source_file *source_find(struct source *src, const char *path)
{
	char clean[IMAGE_ARCHIVE_PATH_MAX];
	if (clean_path(path, clean, sizeof(clean)) < 0)
		return NULL;
	for (int hops = 0; hops <= SOURCE_LINKS_MAX; hops++) {
		struct source_file *f = NULL;
		for (size_t i = src->n; i-- > 0;) /* a later entry of a tar wins */
			if (strcmp(src->files[i].path, clean) == 0) {
				f = &src->files[i];
				break;
			}
		if (!f || !f->link)
			return f && f->staged ? f : NULL;
		snprintf(clean, sizeof(clean), "%s", f->link);
	}
	return NULL;
}

int source_open_file(struct source *src, const char *path, int *ret_fd, struct error *err)
{
	if (src->dirfd >= 0) {
		struct open_how how = {
		    .flags = O_RDONLY | O_CLOEXEC,
		    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
		};
		int fd = (int)syscall(SYS_openat2, src->dirfd, path, &how, sizeof(how));
		if (fd < 0)
			return error_set_errno(err, errno, "%s", path);
		struct stat st;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return error_set(err, EINVAL, "%s: not a regular file", path);
		}
		*ret_fd = fd;
		return 0;
	}
	struct source_file *f = source_find(src, path);
	if (!f)
		return error_set(err, ENOENT, "the archive has no %s", path);
	char name[24];
	snprintf(name, sizeof(name), "%zu", (size_t)(f - src->files));
	int fd = openat(src->stagefd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "%s (staged)", path);
	*ret_fd = fd;
	return 0;
}

int source_read(struct source *src, const char *path, size_t max, char **ret, size_t *ret_len,
		struct error *err)
{
	_cleanup_close_ int fd = -1;
	int r = source_open_file(src, path, &fd, err);
	if (r < 0)
		return r;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return error_set_errno(err, errno, "%s", path);
	if ((uint64_t)st.st_size > max)
		return error_set(err, E2BIG, "%s: larger than %zu bytes", path, max);
	_cleanup_free_ char *b = malloc((size_t)st.st_size + 1);
	if (!b)
		return error_set(err, ENOMEM, "out of memory");
	ssize_t n = read_all(fd, b, (size_t)st.st_size);
	if (n != st.st_size)
		return error_set(err, EIO, "%s: short read", path);
	b[n] = '\0';
	*ret = TAKE_PTR(b);
	*ret_len = (size_t)n;
	return 0;
}

bool source_has(struct source *src, const char *path)
{
	if (src->dirfd >= 0)
		return faccessat(src->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	return source_find(src, path) != NULL;
}
