/*
 * test-image-unpack.c - a layer is untrusted input (image/unpack.h): each
 * hostile layer is written with libarchive's writer into a memfd, really
 * unpacked into a tree, and refused or neutralised; a sentinel directory
 * next to the tree and the host's /etc/shadow are compared before and
 * after every test. Then a normal layer, whiteouts and replacements across
 * two layers, the three compressions, and the fuzz corpus.
 *
 * Needs root (the ids are chowned); skipped, loudly, without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "corpus-replay.h"
#include "../../fuzz/fuzz-unpack.c"

#define SNAP_MAX 8192

enum comp { PLAIN, GZIP, ZSTD };

/* One entry of a crafted layer. */
struct ent {
	const char *path;
	unsigned type; /* AE_IF*; 0 is a regular file */
	unsigned mode; /* 0: 0644 (0755 for a directory) */
	long long uid, gid;
	const char *data; /* a file's; or a symlink's target */
	size_t size;	  /* of data; strlen(data) when 0 */
	const char *hard; /* a hard link's target */
	dev_t rdev;
};

#define FILE_(p, d)                                                                                \
	{                                                                                          \
		.path = (p), .data = (d)                                                           \
	}
#define DIR_(p)                                                                                    \
	{                                                                                          \
		.path = (p), .type = AE_IFDIR                                                      \
	}
#define LINK_(p, t)                                                                                \
	{                                                                                          \
		.path = (p), .type = AE_IFLNK, .data = (t)                                         \
	}
#define HARD_(p, t)                                                                                \
	{                                                                                          \
		.path = (p), .hard = (t)                                                           \
	}

struct fx {
	char base[256], tree[300], outside[300];
	int tree_fd;
	struct unpack_stats stats;
	struct unpack_limits lim;
	struct error err;
	char snap[SNAP_MAX];
};

static char snap_buf[SNAP_MAX];
static size_t snap_len;

static int snap_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag, (void)ftw;
	snap_len += (size_t)snprintf(
	    snap_buf + snap_len, SNAP_MAX - snap_len, "%s %o %u:%u %lld %lu %lld.%ld %lld.%ld\n",
	    path, st->st_mode, st->st_uid, st->st_gid, (long long)st->st_size,
	    (unsigned long)st->st_nlink, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
	    (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	assert_true(snap_len < SNAP_MAX - 1);
	return 0;
}

/* The sentinel directory and the host's shadow file, as text. */
static void snapshot(struct fx *fx, char *out)
{
	snap_len = 0;
	assert_int_equal(nftw(fx->outside, snap_one, 16, FTW_PHYS), 0);
	struct stat st;
	const char *shadow = access("/etc/shadow", F_OK) == 0 ? "/etc/shadow" : "/etc/passwd";
	assert_int_equal(stat(shadow, &st), 0);
	snap_one(shadow, &st, 0, NULL);
	memcpy(out, snap_buf, snap_len + 1);
}

static int create_secret(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, "secret", 6);
	close(fd);
	return n == 6 ? 0 : -EIO;
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	const char *tmp = getenv("TMPDIR");
	snprintf(fx->base, sizeof(fx->base), "%s/unpack-XXXXXX", tmp ? tmp : P_tmpdir);
	assert_non_null(mkdtemp(fx->base));
	snprintf(fx->tree, sizeof(fx->tree), "%s/tree", fx->base);
	snprintf(fx->outside, sizeof(fx->outside), "%s/outside", fx->base);
	assert_int_equal(mkdir(fx->tree, 0700), 0);
	assert_int_equal(mkdir(fx->outside, 0700), 0);
	int dfd = open(fx->outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(create_secret(dfd, "x"), 0);
	assert_int_equal(create_secret(dfd, "secret"), 0);
	close(dfd);
	fx->tree_fd = open(fx->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fx->tree_fd >= 0);
	fx->lim = (struct unpack_limits){IMAGE_BYTES_MAX_DEFAULT, IMAGE_ENTRIES_MAX_DEFAULT};
	snapshot(fx, fx->snap);
	*state = fx;
	return 0;
}

/* Whatever happened, nothing outside the tree changed. */
static int teardown(void **state)
{
	struct fx *fx = *state;
	char now[SNAP_MAX];
	snapshot(fx, now);
	assert_string_equal(fx->snap, now);
	close(fx->tree_fd);
	fuzz_remove_tree(fx->base);
	free(fx);
	return 0;
}

static struct fx *begin(void **state)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: unpacking chowns; run as root\n");
		skip();
	}
	return *state;
}

/* The layer of n entries, compressed as asked, in a memfd at offset 0. */
static int layer(enum comp c, const struct ent *ents, size_t n)
{
	int fd = memfd_create("layer", MFD_CLOEXEC);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_set_format_pax(a), ARCHIVE_OK);
	if (c == GZIP)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	if (c == ZSTD)
		assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		const struct ent *t = &ents[i];
		struct archive_entry *e = archive_entry_new();
		unsigned type = t->type ? t->type : AE_IFREG;
		size_t size = t->size ? t->size : (t->data ? strlen(t->data) : 0);
		archive_entry_set_pathname_utf8(e, t->path);
		archive_entry_set_filetype(e, type);
		archive_entry_set_perm(e, t->mode ? t->mode : type == AE_IFDIR ? 0755 : 0644);
		archive_entry_set_uid(e, t->uid);
		archive_entry_set_gid(e, t->gid);
		archive_entry_set_mtime(e, 1234567890, 0);
		archive_entry_set_rdev(e, t->rdev);
		if (type == AE_IFLNK)
			archive_entry_set_symlink(e, t->data);
		if (t->hard)
			archive_entry_set_hardlink(e, t->hard);
		bool data = type == AE_IFREG && !t->hard;
		archive_entry_set_size(e, data ? (la_int64_t)size : 0);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (data && size)
			assert_int_equal(archive_write_data(a, t->data, size), (la_ssize_t)size);
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static int unpack(struct fx *fx, enum comp c, const struct ent *ents, size_t n)
{
	int fd = layer(c, ents, n);
	fx->err = (struct error){0};
	int r = unpack_layer(fd, fx->tree_fd, &fx->lim, &fx->stats, &fx->err);
	close(fd);
	if (r < 0)
		printf("refused (%d): %s\n", r, fx->err.msg);
	return r;
}

#define UNPACK(fx, c, ...)                                                                         \
	unpack((fx), (c), (const struct ent[]){__VA_ARGS__},                                       \
	       sizeof((const struct ent[]){__VA_ARGS__}) / sizeof(struct ent))

static bool exists(struct fx *fx, const char *path)
{
	struct stat st;
	return fstatat(fx->tree_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static struct stat stat_of(struct fx *fx, const char *path)
{
	struct stat st;
	if (fstatat(fx->tree_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("%s: %s", path, strerror(errno));
	return st;
}

static void assert_content(struct fx *fx, const char *path, const char *want)
{
	char buf[256] = {0};
	int fd = openat(fx->tree_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) >= 0);
	close(fd);
	assert_string_equal(buf, want);
}

/* ../ and absolute paths: refused, nothing written next to the tree. */
static void test_dotdot_and_absolute(void **state)
{
	struct fx *fx = begin(state);
	char abs[400];
	snprintf(abs, sizeof(abs), "%s/abs", fx->outside);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("../outside/secret", "pwned")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("a/../../outside/y", "pwned")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_(abs, "pwned")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, DIR_("../escaped")), -EPERM);
	assert_false(exists(fx, "a"));
}

/* A symlink out of the tree, then a file through it: refused. */
static void test_symlink_then_file(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, LINK_("a", fx->outside), FILE_("a/x", "pwned")), -EPERM);
	assert_int_equal(UNPACK(fx, GZIP, LINK_("b", "../outside"), FILE_("b/y", "pwned")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, LINK_("c", ".."), DIR_("c/outside/d")), -EPERM);
	/* the symlinks themselves are made, as symlinks, and point where they said */
	assert_true(S_ISLNK(stat_of(fx, "a").st_mode));
	char target[400] = {0};
	assert_true(readlinkat(fx->tree_fd, "b", target, sizeof(target) - 1) > 0);
	assert_string_equal(target, "../outside");
}

/* Hard links to /etc/shadow, to ../outside/x and through a symlink: refused. */
static void test_hardlink_out(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, HARD_("shadow", "/etc/shadow")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, HARD_("x", "../outside/x")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, LINK_("etc", "/etc"), HARD_("s", "etc/shadow")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, LINK_("o", fx->outside), HARD_("s2", "o/x")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, HARD_("none", "not/there")), -ENOENT);
	assert_int_equal(UNPACK(fx, PLAIN, DIR_("d"), HARD_("dl", "d")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, LINK_("sl", "d"), HARD_("hl", "sl")), -EPERM);
	assert_false(exists(fx, "shadow") || exists(fx, "x") || exists(fx, "s") ||
		     exists(fx, "s2") || exists(fx, "dl") || exists(fx, "hl"));
}

/* Device nodes, a FIFO and a socket: dropped, counted. */
static void test_devices_dropped(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN,
				{.path = "dev/mem", .type = AE_IFCHR, .rdev = makedev(1, 1)},
				{.path = "dev/sda", .type = AE_IFBLK, .rdev = makedev(8, 0)},
				{.path = "fifo", .type = AE_IFIFO}, FILE_("ok", "ok")),
			 0);
	assert_int_equal(fx->stats.dropped_devices, 3);
	assert_false(exists(fx, "dev/mem") || exists(fx, "dev/sda") || exists(fx, "fifo"));
	assert_content(fx, "ok", "ok");
}

/* A setuid root binary: its bit cleared, owned by the image's root. */
static void test_setuid_root(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN,
				{.path = "bin/su",
				 .mode = 04755,
				 .data = "\x7f"
					 "ELF"},
				{.path = "bin/wall", .mode = 02755, .gid = 5, .data = "ELF"},
				{.path = "srv", .type = AE_IFDIR, .mode = 03775}),
			 0);
	struct stat st = stat_of(fx, "bin/su");
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(st.st_uid, IMAGE_ID_BASE);
	assert_int_equal(st.st_gid, IMAGE_ID_BASE);
	st = stat_of(fx, "bin/wall");
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(st.st_gid, IMAGE_ID_BASE + 5);
	assert_int_equal(stat_of(fx, "srv").st_mode & 07777, 01775); /* sticky kept */
	assert_int_equal(fx->stats.cleared_setid, 3);
}

/* Whiteouts of "..", "." and of nothing: refused; the tree and its parent intact. */
static void test_whiteout_dotdot(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("sub/keep", "k")), 0);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_(".wh...", "")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("sub/.wh...", "")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("sub/.wh..", "")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("sub/.wh.", "")), -EPERM);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_(".wh.sub/x", "")), -EPERM);
	assert_content(fx, "sub/keep", "k");
}

/* A gzip bomb: 16 MiB of zeros in a few KiB; a 1 MiB cap stops it at its header. */
static void test_gzip_bomb(void **state)
{
	struct fx *fx = begin(state);
	size_t big = 16 << 20;
	char *zeros = calloc(1, big);
	assert_non_null(zeros);
	int fd = layer(GZIP, (const struct ent[]){{.path = "bomb", .data = zeros, .size = big}}, 1);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_size < 64 * 1024);
	fx->lim.bytes_max = 1 << 20;
	assert_int_equal(unpack_layer(fd, fx->tree_fd, &fx->lim, &fx->stats, &fx->err), -EFBIG);
	close(fd);
	assert_false(exists(fx, "bomb"));
	/* many files, each under the cap, together past it */
	struct ent many[8];
	char names[8][8];
	for (int i = 0; i < 8; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		many[i] = (struct ent){.path = names[i], .data = zeros, .size = 256 << 10};
	}
	assert_int_equal(unpack(fx, ZSTD, many, 8), -EFBIG);
	assert_false(exists(fx, "f0"));
	assert_true(fx->stats.bytes <= fx->lim.bytes_max);
	free(zeros);
}

/* Too many entries, in one layer and across two. */
static void test_too_many_entries(void **state)
{
	struct fx *fx = begin(state);
	struct ent many[30];
	char names[30][8];
	for (int i = 0; i < 30; i++) {
		snprintf(names[i], sizeof(names[i]), "e%d", i);
		many[i] = (struct ent)FILE_(names[i], "");
	}
	fx->lim.entries_max = 20;
	assert_int_equal(unpack(fx, PLAIN, many, 30), -EFBIG);
	assert_false(exists(fx, "e0"));
	assert_int_equal(unpack(fx, PLAIN, many, 15), 0);
	assert_int_equal(fx->stats.entries, 15);
	assert_int_equal(unpack(fx, PLAIN, many + 15, 10), -EFBIG);
	assert_false(exists(fx, "e15"));
}

/* A path past IMAGE_PATH_MAX or IMAGE_DEPTH_MAX, a symlink target past it. */
static void test_path_too_long(void **state)
{
	struct fx *fx = begin(state);
	static char path[IMAGE_PATH_MAX + 64];
	memset(path, 'a', sizeof(path) - 1);
	for (size_t i = 200; i < sizeof(path) - 1; i += 201)
		path[i] = '/';
	path[IMAGE_PATH_MAX + 1] = '\0';
	assert_int_equal(UNPACK(fx, PLAIN, FILE_(path, "x")), -ENAMETOOLONG);
	assert_int_equal(UNPACK(fx, PLAIN, LINK_("l", path)), -ENAMETOOLONG);
	static char deep[2 * (IMAGE_DEPTH_MAX + 1) + 1];
	for (size_t i = 0; i < IMAGE_DEPTH_MAX + 1; i++)
		memcpy(deep + 2 * i, "d/", 2);
	deep[2 * IMAGE_DEPTH_MAX + 1] = '\0';
	assert_int_equal(UNPACK(fx, PLAIN, FILE_(deep, "x")), -ENAMETOOLONG);
	assert_false(exists(fx, "a") || exists(fx, "d") || exists(fx, "l"));
}

/* Ids past IMAGE_ID_MAX: refused; the last one mapped. */
static void test_ids_past_max(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, {.path = "u", .uid = IMAGE_ID_MAX + 1}), -ERANGE);
	assert_int_equal(UNPACK(fx, PLAIN, {.path = "g", .gid = 1000000}), -ERANGE);
	assert_int_equal(UNPACK(fx, PLAIN, {.path = "m", .uid = IMAGE_ID_MAX, .gid = IMAGE_ID_MAX}),
			 0);
	assert_int_equal(stat_of(fx, "m").st_uid, IMAGE_ID_BASE + IMAGE_ID_MAX);
	assert_false(exists(fx, "u") || exists(fx, "g"));
}

/* Whiteouts and opaque directories over a lower layer, wherever they stand. */
static void test_whiteouts_two_layers(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, DIR_("a"), DIR_("a/b"), DIR_("a/b/c"),
				FILE_("a/b/c/bar", "lower"), FILE_("a/top", "lower"),
				FILE_("etc/conf", "lower"), FILE_("etc/keep", "lower"),
				FILE_("d/x", "lower"), DIR_("d/y")),
			 0);
	/* the opaque marker of a/ after its siblings, d/'s before; a whiteout
	 * after its own layer's file leaves that file */
	assert_int_equal(UNPACK(fx, GZIP, DIR_("a"), DIR_("a/b"), DIR_("a/b/c"),
				FILE_("a/b/c/foo", "upper"), FILE_("a/.wh..wh..opq", ""),
				FILE_("etc/.wh.conf", ""), FILE_("d/.wh..wh..opq", ""),
				FILE_("d/z", "upper"), FILE_("n", "same layer"), FILE_(".wh.n", ""),
				FILE_(".wh.absent", ""), FILE_("etc/.wh..wh.plnk", "")),
			 0);
	assert_content(fx, "a/b/c/foo", "upper");
	assert_false(exists(fx, "a/b/c/bar") || exists(fx, "a/top"));
	assert_false(exists(fx, "etc/conf") || exists(fx, ".wh.n") || exists(fx, "etc/.wh.conf"));
	assert_content(fx, "etc/keep", "lower");
	assert_false(exists(fx, "d/x") || exists(fx, "d/y"));
	assert_content(fx, "d/z", "upper");
	assert_content(fx, "n", "same layer");
	assert_int_equal(fx->stats.whiteouts, 5); /* a/b, a/top, etc/conf, d/x, d/y */
}

/* An entry over a lower one of another type replaces it, never follows it. */
static void test_replace_types(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("x/inner", "i"), FILE_("y", "file"),
				LINK_("l", fx->outside), DIR_("k"), FILE_("k/old", "o")),
			 0);
	assert_int_equal(UNPACK(fx, ZSTD, FILE_("x", "now a file"), DIR_("y"), FILE_("y/f", "f"),
				DIR_("l"), FILE_("l/x", "inside"),
				{.path = "k", .type = AE_IFDIR, .mode = 0700}, FILE_("k/new", "n")),
			 0);
	assert_content(fx, "x", "now a file");
	assert_true(S_ISDIR(stat_of(fx, "y").st_mode));
	assert_content(fx, "y/f", "f");
	assert_true(S_ISDIR(stat_of(fx, "l").st_mode));
	assert_content(fx, "l/x", "inside");
	assert_int_equal(stat_of(fx, "k").st_mode & 07777, 0700); /* attributes replaced */
	assert_content(fx, "k/old", "o");			  /* contents kept */
	assert_content(fx, "k/new", "n");
}

/* A normal layer: files, directories, symlinks, hard links, modes, owners, times. */
static void test_normal_layer(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, {.path = "./", .type = AE_IFDIR, .mode = 0755},
				DIR_("./usr/"), DIR_("usr/bin"),
				{.path = "usr/bin/tool",
				 .mode = 0750,
				 .uid = 1000,
				 .gid = 100,
				 .data = "#!/bin/sh\n"},
				HARD_("usr/bin/tool2", "./usr/bin/tool"), LINK_("bin", "usr/bin"),
				LINK_("etc/passwd-link", "/etc/passwd"),
				{.path = "tmp", .type = AE_IFDIR, .mode = 01777},
				FILE_("var/lib/implied/f", "deep")),
			 0);
	struct stat st = stat_of(fx, "usr/bin/tool");
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(st.st_uid, IMAGE_ID_BASE + 1000);
	assert_int_equal(st.st_gid, IMAGE_ID_BASE + 100);
	assert_int_equal(st.st_mtim.tv_sec, 1234567890);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(stat_of(fx, "usr/bin/tool2").st_ino, st.st_ino);
	assert_content(fx, "usr/bin/tool2", "#!/bin/sh\n");
	st = stat_of(fx, "bin");
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_uid, IMAGE_ID_BASE);
	char target[64] = {0};
	assert_true(readlinkat(fx->tree_fd, "etc/passwd-link", target, sizeof(target) - 1) > 0);
	assert_string_equal(target, "/etc/passwd");
	assert_int_equal(stat_of(fx, "tmp").st_mode & 07777, 01777);
	st = stat_of(fx, "var/lib/implied");
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(st.st_uid, IMAGE_ID_BASE);
	assert_int_equal(st.st_gid, IMAGE_ID_BASE);
	assert_content(fx, "var/lib/implied/f", "deep");
	st = stat_of(fx, ".");
	assert_int_equal(st.st_uid, IMAGE_ID_BASE);
	assert_int_equal(fx->stats.entries, 9);
	assert_int_equal(fx->stats.bytes, strlen("#!/bin/sh\n") + strlen("deep"));
}

/* A pax header's UTF-8 name (Python's tarfile wrote this seed) is made as
 * its bytes, whatever the locale (a test's, like the daemon's, is "C"). */
static void test_utf8_name(void **state)
{
	struct fx *fx = begin(state);
	int fd = open(FUZZ_CORPUS_DIR "/utf8-name.tar", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(unpack_layer(fd, fx->tree_fd, &fx->lim, &fx->stats, &fx->err), 0);
	close(fd);
	assert_content(fx, "caf\xc3\xa9/na\xc3\xafve", "utf-8");
}

/* Plain, gzip and zstd all read; anything else is refused. */
static void test_compressions(void **state)
{
	struct fx *fx = begin(state);
	assert_int_equal(UNPACK(fx, PLAIN, FILE_("plain", "p")), 0);
	assert_int_equal(UNPACK(fx, GZIP, FILE_("gzip", "g")), 0);
	assert_int_equal(UNPACK(fx, ZSTD, FILE_("zstd", "z")), 0);
	assert_content(fx, "plain", "p");
	assert_content(fx, "gzip", "g");
	assert_content(fx, "zstd", "z");
	int fd = memfd_create("junk", MFD_CLOEXEC);
	assert_int_equal(write(fd, "not a tar at all, not even close\n", 33), 33);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(unpack_layer(fd, fx->tree_fd, &fx->lim, &fx->stats, &fx->err), -EINVAL);
	close(fd);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(unpack_layer(p[0], fx->tree_fd, &fx->lim, &fx->stats, &fx->err), -ESPIPE);
	close(p[0]);
	close(p[1]);
}

/* fuzz/corpus/unpack/: every seed through the fuzz target's checks. */
static void test_replay_corpus(void **state)
{
	(void)begin(state);
	size_t n = corpus_replay(FUZZ_CORPUS_DIR, 1 << 20, LLVMFuzzerTestOneInput);
	if (n < 8)
		fail_msg("only %zu inputs in %s: the corpus went missing", n, FUZZ_CORPUS_DIR);
	printf("replayed %zu inputs\n", n);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_dotdot_and_absolute),
	    T(test_symlink_then_file),
	    T(test_hardlink_out),
	    T(test_devices_dropped),
	    T(test_setuid_root),
	    T(test_whiteout_dotdot),
	    T(test_gzip_bomb),
	    T(test_too_many_entries),
	    T(test_path_too_long),
	    T(test_ids_past_max),
	    T(test_whiteouts_two_layers),
	    T(test_replace_types),
	    T(test_normal_layer),
	    T(test_utf8_name),
	    T(test_compressions),
	    T(test_replay_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
