/*
 * fuzz-unpack.c - libFuzzer entry for a layer's unpacking
 * (src/image/unpack.h): every input is a layer from a hostile registry,
 * unpacked into a fresh tree inside a fresh directory.
 *
 * It checks what must hold for every input:
 *   - unpack_layer() returns 0 with no error, or -errno with err saying
 *     the same code;
 *   - the running totals stay within the limits;
 *   - the tree's parent holds the tree and nothing else (nothing was made,
 *     removed or renamed beside it), and the tree is still a directory.
 * As root it unpacks for real (chowns included); as anyone else the
 * chowns fail and it checks the same. Writes under $TMPDIR.
 *
 * tests/unit/test-image-unpack.c includes this file and replays
 * fuzz/corpus/unpack/ through it, in the ordinary build.
 */
#include "image/unpack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-check.h"

#define FUZZ_BYTES_MAX	 (4u << 20)
#define FUZZ_ENTRIES_MAX 2000u

static int fuzz_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* rm -rf path, never following a symlink. */
static void fuzz_remove_tree(const char *path)
{
	nftw(path, fuzz_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* How many entries dir holds, and whether "tree" is one of them and a directory. */
static size_t fuzz_count_beside(const char *dir, int *ret_tree_is_dir)
{
	DIR *d = opendir(dir);
	CHECK(d);
	size_t n = 0;
	struct dirent *de;
	*ret_tree_is_dir = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n++;
		if (strcmp(de->d_name, "tree") == 0)
			*ret_tree_is_dir = de->d_type == DT_DIR;
	}
	closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("layer", MFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);

	const char *tmp = getenv("TMPDIR");
	char base[512], tree[600];
	snprintf(base, sizeof(base), "%s/fuzz-unpack-XXXXXX", tmp ? tmp : P_tmpdir);
	CHECK(mkdtemp(base));
	snprintf(tree, sizeof(tree), "%s/tree", base);
	CHECK(mkdir(tree, 0700) == 0);
	int tree_fd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(tree_fd >= 0);

	struct unpack_limits lim = {FUZZ_BYTES_MAX, FUZZ_ENTRIES_MAX};
	struct unpack_stats stats = {0};
	struct error err = {0};
	int r = unpack_layer(fd, tree_fd, &lim, &stats, &err);
	CHECK(r <= 0);
	CHECK(r == 0 ? !error_is_set(&err) : err.code == -r && err.msg[0]);
	CHECK(stats.bytes <= lim.bytes_max && stats.entries <= lim.entries_max);
	int tree_is_dir;
	CHECK(fuzz_count_beside(base, &tree_is_dir) == 1 && tree_is_dir);

	close(tree_fd);
	close(fd);
	fuzz_remove_tree(base);
	return 0;
}
