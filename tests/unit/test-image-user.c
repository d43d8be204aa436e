/*
 * test-image-user.c - image_user_resolve() (image/user.h): a config's
 * User by number and by name, from the tree's own /etc/passwd and
 * /etc/group; a symlink to a host file resolves inside the tree; every
 * malformed or unknown User, and an oversized file, is -EINVAL.
 */
#include "image/user.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

struct fx {
	char dir[64];
	int tree;
};

static void put(int dfd, const char *name, const char *text)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/test-image-user-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->tree = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->tree >= 0);
	assert_int_equal(mkdirat(f->tree, "etc", 0755), 0);
	int etc = openat(f->tree, "etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	put(etc, "passwd",
	    "root:x:0:0:root:/root:/bin/sh\n"
	    "app:x:1234:1235:the app:/app:/bin/sh\n"
	    "nogroup-user:x:2000:2001::/:/bin/sh\n");
	put(etc, "group", "root:x:0:\napp:x:1235:\nstaff:x:50:app\n");
	close(etc);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	/* etc holds files, symlinks and a fifo only */
	int etc = openat(f->tree, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fdopendir(etc);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			assert_int_equal(unlinkat(dirfd(d), de->d_name, 0), 0);
	closedir(d);
	assert_int_equal(unlinkat(f->tree, "etc", AT_REMOVEDIR), 0);
	close(f->tree);
	assert_int_equal(rmdir(f->dir), 0);
	free(f);
	return 0;
}

static void expect(struct fx *f, const char *user, int r, uid_t uid, gid_t gid)
{
	struct error err = {0};
	uid_t u = 99;
	gid_t g = 99;
	assert_int_equal(image_user_resolve(f->tree, user, &u, &g, &err), r);
	if (r == 0) {
		assert_int_equal(u, uid);
		assert_int_equal(g, gid);
	} else {
		assert_true(err.msg[0] != '\0');
	}
}

static void test_numbers_and_names(void **state)
{
	struct fx *f = *state;
	expect(f, "app", 0, 1234, 1235);     /* a name: its passwd entry's group */
	expect(f, "app:staff", 0, 1234, 50); /* a group by name */
	expect(f, "app:7", 0, 1234, 7);	     /* a group by number */
	expect(f, "1234", 0, 1234, 1235);    /* a number the passwd has: its group */
	expect(f, "4321", 0, 4321, 0);	     /* one it lacks: group 0, as runc */
	expect(f, "4321:4322", 0, 4321, 4322);
	expect(f, "0", 0, 0, 0); /* root: the caller decides */
	expect(f, "root", 0, 0, 0);
}

static void test_what_the_tree_lacks_or_garbles(void **state)
{
	struct fx *f = *state;
	expect(f, "nobody", -EINVAL, 0, 0);
	expect(f, "app:wheel", -EINVAL, 0, 0);
	expect(f, "", -EINVAL, 0, 0);
	expect(f, ":1", -EINVAL, 0, 0);
	expect(f, "app:", -EINVAL, 0, 0);
	expect(f, "a:b:c", -EINVAL, 0, 0);
	expect(f, "99999999999", -EINVAL, 0, 0); /* not a number below 2^32: a name it lacks */
}

static void test_a_symlink_resolves_inside_the_tree(void **state)
{
	struct fx *f = *state;
	int etc = openat(f->tree, "etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* /etc/passwd -> /etc/host-passwd: the tree's, not the host's /etc */
	assert_int_equal(renameat(etc, "passwd", etc, "host-passwd"), 0);
	assert_int_equal(symlinkat("/etc/host-passwd", etc, "passwd"), 0);
	expect(f, "app", 0, 1234, 1235);
	/* to a path only the host has: missing, so the name is unknown */
	assert_int_equal(unlinkat(etc, "passwd", 0), 0);
	assert_int_equal(symlinkat("/../../../../etc/hostname-of-the-host", etc, "passwd"), 0);
	expect(f, "app", -EINVAL, 0, 0);
	expect(f, "4321", 0, 4321, 0);
	close(etc);
}

static void test_files_past_the_limits(void **state)
{
	struct fx *f = *state;
	int etc = openat(f->tree, "etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *line = malloc(IMAGE_USER_LINE_MAX + 64);
	memset(line, 'a', IMAGE_USER_LINE_MAX + 32);
	memcpy(line + IMAGE_USER_LINE_MAX + 32, ":x:1:1::/:/bin/sh\n", 19);
	put(etc, "passwd", line);
	expect(f, "app", -EINVAL, 0, 0); /* a line past the limit */
	free(line);
	int fd = openat(etc, "passwd", O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_int_equal(ftruncate(fd, IMAGE_USER_FILE_MAX + 1), 0);
	close(fd);
	expect(f, "app", -EINVAL, 0, 0); /* a file past the limit */
	assert_int_equal(unlinkat(etc, "passwd", 0), 0);
	assert_int_equal(mkfifoat(etc, "passwd", 0644), 0);
	expect(f, "app", -EINVAL, 0, 0); /* not a regular file: never blocks */
	close(etc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_numbers_and_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_what_the_tree_lacks_or_garbles, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_a_symlink_resolves_inside_the_tree, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_files_past_the_limits, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
