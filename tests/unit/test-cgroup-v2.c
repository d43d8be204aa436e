/*
 * test-cgroup-v2.c - the cgroup v2 backend against a fake cgroupfs.
 *
 * Each case gets a fresh scratch directory opened as a v2 root in fake
 * mode, where interface files are created as regular files when written.
 * The test plays the kernel's part: it reads what the backend wrote and
 * writes what the kernel would report (memory.events, cgroup.events).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "runtime/cgroup.h"

struct fake {
	char dir[64];
	int dirfd;
	struct cgroup_root *root;
};

static const struct cgroup_limits limits_128m = {
    .memory_bytes = 128ULL << 20,
    .cpu_milli = 500,
    .pids = 64,
};

/* ---- helpers ----------------------------------------------------------- */

static void assert_file_is(int dirfd, const char *name, const char *want)
{
	char buf[512];
	ssize_t n = read_file_at(dirfd, name, buf, sizeof(buf));
	if (n < 0)
		fail_msg("reading %s: %s", name, strerror((int)-n));
	if (strcmp(buf, want) != 0)
		fail_msg("%s holds '%s'; want '%s'", name, buf, want);
}

static void assert_absent(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		fail_msg("%s still exists", name);
	assert_int_equal(errno, ENOENT);
}

/* Play the kernel: put text into a file of the fake tree. */
static void put(int dirfd, const char *name, const char *text)
{
	int r = create_file_at(dirfd, name, text, 0644);
	if (r < 0)
		fail_msg("writing %s: %s", name, strerror(-r));
}

static struct cgroup *create_group(struct fake *f, const char *name,
				   const struct cgroup_limits *limits)
{
	struct cgroup *cg = NULL;
	struct error err = {0};
	int r = cgroup_create(f->root, name, limits, &cg, &err);
	if (r < 0)
		fail_msg("cgroup_create(%s) = %d: %s", name, r, err.msg);
	assert_non_null(cg);
	return cg;
}

static void destroy_group(struct cgroup *cg)
{
	struct error err = {0};
	int r = cgroup_destroy(cg, &err);
	if (r < 0)
		fail_msg("cgroup_destroy = %d: %s", r, err.msg);
}

/* ---- fixture ----------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int fake_setup(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->dirfd = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test-cgroup-v2.XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	*state = f;
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->dirfd < 0)
		return -1;
	struct error err = {0};
	if (cgroup_root_open_v2_at(f->dir, true, &f->root, &err) < 0) {
		fprintf(stderr, "cgroup_root_open_v2_at: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int fake_teardown(void **state)
{
	struct fake *f = *state;
	if (!f)
		return 0;
	cgroup_root_free(f->root);
	if (f->dirfd >= 0)
		close(f->dirfd);
	int r = nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

/* ---- the root ---------------------------------------------------------- */

static void test_root_enables_controllers(void **state)
{
	struct fake *f = *state;
	assert_int_equal(cgroup_root_version(f->root), CGROUP_V2);
	assert_file_is(f->dirfd, "cgroup.subtree_control", "+memory\n+pids\n+cpu\n");

	char want[128];
	snprintf(want, sizeof(want), "v2 %s", f->dir);
	assert_string_equal(cgroup_root_describe(f->root), want);
}

static void test_root_open_missing_dir(void **state)
{
	struct fake *f = *state;
	char missing[128];
	snprintf(missing, sizeof(missing), "%s/absent", f->dir);
	/* a poison value that must stay untouched */
	struct cgroup_root *const before = (struct cgroup_root *)(uintptr_t)0x10;
	struct cgroup_root *root = before;
	struct error err = {0};
	assert_int_equal(cgroup_root_open_v2_at(missing, true, &root, &err), -ENOENT);
	assert_ptr_equal(root, before);
	assert_int_equal(err.code, ENOENT);
	assert_non_null(strstr(err.msg, "absent"));
}

static void test_root_without_fake_files_needs_real_files(void **state)
{
	struct fake *f = *state;
	/* outside fake mode nothing is created: a plain directory is refused */
	assert_int_equal(mkdirat(f->dirfd, "plain", 0755), 0);
	char plain[128];
	snprintf(plain, sizeof(plain), "%s/plain", f->dir);
	struct cgroup_root *root = NULL;
	struct error err = {0};
	assert_int_equal(cgroup_root_open_v2_at(plain, false, &root, &err), -ENOENT);
	assert_null(root);
	assert_non_null(strstr(err.msg, "cannot enable"));
	assert_absent(f->dirfd, "plain/cgroup.subtree_control");
}

/* ---- create: the limit files ------------------------------------------ */

static void test_create_writes_limits(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);

	struct stat st;
	assert_int_equal(fstatat(f->dirfd, "sb-1", &st, 0), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_file_is(f->dirfd, "sb-1/memory.max", "134217728");
	assert_file_is(f->dirfd, "sb-1/memory.swap.max", "0");
	assert_file_is(f->dirfd, "sb-1/memory.oom.group", "1");
	assert_file_is(f->dirfd, "sb-1/pids.max", "64");
	assert_file_is(f->dirfd, "sb-1/cpu.max", "50000 100000");
	/* nothing else was asked of the kernel yet */
	assert_absent(f->dirfd, "sb-1/cgroup.procs");
	assert_absent(f->dirfd, "sb-1/cgroup.kill");
	assert_absent(f->dirfd, "sb-1/cgroup.freeze");
	destroy_group(cg);
}

static void test_create_serve_mode_is_no_oom_group(void **state)
{
	struct fake *f = *state;
	struct cgroup_limits l = limits_128m;
	l.oom_kills_one = true;
	struct cgroup *cg = create_group(f, "sb-1", &l);
	/* an OOM kill takes the process that grew, not the whole sandbox */
	assert_file_is(f->dirfd, "sb-1/memory.oom.group", "0");
	assert_file_is(f->dirfd, "sb-1/memory.max", "134217728");
	destroy_group(cg);
}

static void test_create_cpu_max_scaling(void **state)
{
	struct fake *f = *state;
	static const struct {
		uint64_t milli;
		const char *want;
	} cases[] = {
	    {10, "1000 100000"},
	    {1000, "100000 100000"},
	    {2250, "225000 100000"},
	    {1024000, "102400000 100000"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cgroup_limits l = {
		    .memory_bytes = 4ULL << 20, .cpu_milli = cases[i].milli, .pids = 1};
		struct cgroup *cg = create_group(f, "cpu", &l);
		assert_file_is(f->dirfd, "cpu/cpu.max", cases[i].want);
		assert_file_is(f->dirfd, "cpu/memory.max", "4194304");
		assert_file_is(f->dirfd, "cpu/pids.max", "1");
		destroy_group(cg);
	}
}

static void test_clone_fd_is_the_group_dir(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	assert_true(fd >= 0);
	struct stat by_fd, by_name;
	assert_int_equal(fstat(fd, &by_fd), 0);
	assert_int_equal(fstatat(f->dirfd, "sb-1", &by_name, 0), 0);
	assert_true(S_ISDIR(by_fd.st_mode));
	assert_int_equal(by_fd.st_dev, by_name.st_dev);
	assert_int_equal(by_fd.st_ino, by_name.st_ino);
	destroy_group(cg);
}

static void test_bad_names(void **state)
{
	struct fake *f = *state;
	static const char *const bad[] = {
	    "a/b",
	    ".hidden",
	    "..",
	    ".",
	    "0123456789012345678901234567890123456789012345678901234567890123", /* 64 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cgroup *cg = NULL;
		struct error err = {0};
		int r = cgroup_create(f->root, bad[i], &limits_128m, &cg, &err);
		if (r != -EINVAL)
			fail_msg("cgroup_create('%s') = %d (%s); want -EINVAL", bad[i], r, err.msg);
		assert_null(cg);
	}
	/* 63 bytes is the longest name */
	const char *longest = "012345678901234567890123456789012345678901234567890123456789012";
	struct cgroup *cg = create_group(f, longest, &limits_128m);
	destroy_group(cg);
	assert_absent(f->dirfd, longest);
}

/* ---- attach, freeze, kill --------------------------------------------- */

static void test_attach_writes_pid(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	struct error err = {0};
	assert_int_equal(cgroup_attach(cg, 1234, &err), 0);
	assert_file_is(f->dirfd, "sb-1/cgroup.procs", "1234");
	/* no process list may be left for a kill fallback to act on */
	assert_int_equal(unlinkat(f->dirfd, "sb-1/cgroup.procs", 0), 0);
	destroy_group(cg);
}

static void test_freeze_and_thaw(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	assert_int_equal(cgroup_freeze(cg, true), 0);
	assert_file_is(f->dirfd, "sb-1/cgroup.freeze", "1");
	assert_int_equal(cgroup_freeze(cg, false), 0);
	assert_file_is(f->dirfd, "sb-1/cgroup.freeze", "0");
	assert_absent(f->dirfd, "sb-1/cgroup.kill");
	destroy_group(cg);
}

static void test_is_frozen_reads_cgroup_events(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	assert_false(cgroup_is_frozen(cg)); /* no cgroup.events: not frozen */
	put(f->dirfd, "sb-1/cgroup.events", "populated 1\nfrozen 0\n");
	assert_false(cgroup_is_frozen(cg));
	put(f->dirfd, "sb-1/cgroup.events", "populated 1\nfrozen 1\n");
	assert_true(cgroup_is_frozen(cg));
	assert_int_equal(unlinkat(f->dirfd, "sb-1/cgroup.events", 0), 0);
	destroy_group(cg);
}

static void test_kill_writes_cgroup_kill(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	assert_int_equal(cgroup_kill(cg), 0);
	assert_file_is(f->dirfd, "sb-1/cgroup.kill", "1");
	/* cgroup.kill exists, so the freeze-and-kill fallback is not used */
	assert_absent(f->dirfd, "sb-1/cgroup.freeze");
	destroy_group(cg);
}

/* ---- stats ------------------------------------------------------------- */

static void test_stats_oom_and_peak(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	put(fd, "memory.events", "low 0\nhigh 0\nmax 5\noom 2\noom_kill 1\noom_group_kill 0\n");
	put(fd, "memory.peak", "4096\n");
	struct cgroup_stats st = {.oom_kills = 99, .peak_memory_bytes = 99};
	assert_int_equal(cgroup_read_stats(cg, &st), 0);
	assert_int_equal(st.oom_kills, 1);
	assert_int_equal(st.peak_memory_bytes, 4096);

	put(fd, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
	put(fd, "memory.peak", "134217728\n");
	assert_int_equal(cgroup_read_stats(cg, &st), 0);
	assert_int_equal(st.oom_kills, 0);
	assert_int_equal(st.peak_memory_bytes, 134217728);
	destroy_group(cg);
}

static void test_stats_read_from_memory_events_only(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	/* decoys: the local counter file, and a longer key sorted first */
	put(fd, "memory.events.local", "oom_kill 7\n");
	put(fd, "memory.events", "oom_group_kill 9\noom 3\noom_kill 1\n");
	struct cgroup_stats st = {0};
	assert_int_equal(cgroup_read_stats(cg, &st), 0);
	assert_int_equal(st.oom_kills, 1);
	destroy_group(cg);
}

static void test_stats_without_peak(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	/* kernels before 5.19 have no memory.peak: the peak is 0 */
	put(fd, "memory.events", "oom_kill 2\n");
	struct cgroup_stats st = {.oom_kills = 99, .peak_memory_bytes = 99};
	assert_int_equal(cgroup_read_stats(cg, &st), 0);
	assert_int_equal(st.oom_kills, 2);
	assert_int_equal(st.peak_memory_bytes, 0);
	destroy_group(cg);
}

static void test_stats_errors_leave_ret_alone(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	struct cgroup_stats st = {.oom_kills = 99, .peak_memory_bytes = 99};
	/* no memory.events at all */
	assert_int_equal(cgroup_read_stats(cg, &st), -ENOENT);
	/* memory.events without an oom_kill line */
	put(fd, "memory.events", "low 0\noom 4\noom_group_kill 1\n");
	put(fd, "memory.peak", "4096\n");
	assert_int_equal(cgroup_read_stats(cg, &st), -ENOENT);
	/* a garbled counter */
	put(fd, "memory.events", "oom_kill x\n");
	assert_int_equal(cgroup_read_stats(cg, &st), -EINVAL);
	assert_int_equal(st.oom_kills, 99);
	assert_int_equal(st.peak_memory_bytes, 99);
	destroy_group(cg);
}

/* ---- emptiness --------------------------------------------------------- */

static void test_is_empty(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	put(fd, "cgroup.events", "populated 1\nfrozen 0\n");
	assert_false(cgroup_is_empty(cg));
	put(fd, "cgroup.events", "populated 0\nfrozen 0\n");
	assert_true(cgroup_is_empty(cg));
	put(fd, "cgroup.events", "frozen 1\npopulated 1\n");
	assert_false(cgroup_is_empty(cg));
	put(fd, "cgroup.events", "populated 0\nfrozen 1\n");
	assert_true(cgroup_is_empty(cg));
	destroy_group(cg);
}

/* ---- destroy ----------------------------------------------------------- */

static void test_destroy_removes_group(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(cg);
	put(fd, "memory.events", "oom_kill 0\n");
	put(fd, "cgroup.events", "populated 0\nfrozen 0\n");
	struct error err = {0};
	assert_int_equal(cgroup_destroy(cg, &err), 0);
	assert_int_equal(err.code, 0);
	assert_absent(f->dirfd, "sb-1");
	/* the root is left alone */
	assert_file_is(f->dirfd, "cgroup.subtree_control", "+memory\n+pids\n+cpu\n");
	assert_int_equal(cgroup_destroy(NULL, &err), 0);
}

static void test_destroy_kills_a_populated_group(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = create_group(f, "sb-1", &limits_128m);
	/* a populated group is killed through cgroup.kill, then removed */
	put(cgroup_clone_fd(cg), "cgroup.events", "populated 1\nfrozen 0\n");
	struct error err = {0};
	assert_int_equal(cgroup_destroy(cg, &err), 0);
	assert_absent(f->dirfd, "sb-1");
}

static void test_open_existing_and_missing(void **state)
{
	struct fake *f = *state;
	struct cgroup *cg = NULL;
	assert_int_equal(cgroup_open(f->root, "sb-1", &cg), -ENOENT);
	assert_null(cg);

	struct cgroup *made = create_group(f, "sb-1", &limits_128m);
	cgroup_free(made);
	/* freeing the handle leaves the group */
	assert_file_is(f->dirfd, "sb-1/pids.max", "64");
	assert_int_equal(cgroup_open(f->root, "sb-1", &cg), 0);
	assert_non_null(cg);
	assert_int_equal(cgroup_freeze(cg, true), 0);
	assert_file_is(f->dirfd, "sb-1/cgroup.freeze", "1");
	destroy_group(cg);
	assert_absent(f->dirfd, "sb-1");
}

/* ---- listing and reclaiming ------------------------------------------- */

struct seen {
	int count;
	int sb1, sb2;
	char other[64];
};

static int collect(const char *name, void *data)
{
	struct seen *s = data;
	s->count++;
	if (strcmp(name, "sb-1") == 0)
		s->sb1++;
	else if (strcmp(name, "sb-2") == 0)
		s->sb2++;
	else
		snprintf(s->other, sizeof(s->other), "%s", name);
	return 0;
}

static int stop_at_first(const char *name, void *data)
{
	(void)name;
	(*(int *)data)++;
	return -ECANCELED;
}

static void test_for_each_lists_groups(void **state)
{
	struct fake *f = *state;
	struct seen s = {0};
	assert_int_equal(cgroup_root_for_each(f->root, collect, &s), 0);
	assert_int_equal(s.count, 0);

	struct cgroup *a = create_group(f, "sb-1", &limits_128m);
	struct cgroup *b = create_group(f, "sb-2", &limits_128m);
	memset(&s, 0, sizeof(s));
	assert_int_equal(cgroup_root_for_each(f->root, collect, &s), 0);
	if (s.other[0])
		fail_msg("unexpected entry '%s'", s.other);
	/* regular files of the root (cgroup.subtree_control) are not groups */
	assert_int_equal(s.count, 2);
	assert_int_equal(s.sb1, 1);
	assert_int_equal(s.sb2, 1);

	int calls = 0;
	assert_int_equal(cgroup_root_for_each(f->root, stop_at_first, &calls), -ECANCELED);
	assert_int_equal(calls, 1);

	destroy_group(a);
	memset(&s, 0, sizeof(s));
	assert_int_equal(cgroup_root_for_each(f->root, collect, &s), 0);
	assert_int_equal(s.count, 1);
	assert_int_equal(s.sb1, 0);
	assert_int_equal(s.sb2, 1);
	destroy_group(b);
}

static void test_create_reclaims_leftover(void **state)
{
	struct fake *f = *state;
	struct cgroup *old = create_group(f, "sb-1", &limits_128m);
	int fd = cgroup_clone_fd(old);
	put(fd, "leftover", "x");
	put(fd, "memory.events", "oom_kill 5\n");
	put(fd, "cgroup.events", "populated 0\n");
	struct cgroup_stats st = {0};
	assert_int_equal(cgroup_read_stats(old, &st), 0);
	assert_int_equal(st.oom_kills, 5);
	/* the run dies without cleaning up */
	cgroup_free(old);

	struct cgroup_limits l = {.memory_bytes = 256ULL << 20, .cpu_milli = 2000, .pids = 10};
	struct cgroup *cg = create_group(f, "sb-1", &l);
	assert_absent(f->dirfd, "sb-1/leftover");
	assert_absent(f->dirfd, "sb-1/memory.events");
	assert_absent(f->dirfd, "sb-1/cgroup.events");
	assert_file_is(f->dirfd, "sb-1/memory.max", "268435456");
	assert_file_is(f->dirfd, "sb-1/pids.max", "10");
	assert_file_is(f->dirfd, "sb-1/cpu.max", "200000 100000");
	assert_int_equal(cgroup_read_stats(cg, &st), -ENOENT);
	destroy_group(cg);
	assert_absent(f->dirfd, "sb-1");
}

#define FAKE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fake_setup, fake_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FAKE_TEST(test_root_enables_controllers),
	    FAKE_TEST(test_root_open_missing_dir),
	    FAKE_TEST(test_root_without_fake_files_needs_real_files),
	    FAKE_TEST(test_create_writes_limits),
	    FAKE_TEST(test_create_serve_mode_is_no_oom_group),
	    FAKE_TEST(test_create_cpu_max_scaling),
	    FAKE_TEST(test_clone_fd_is_the_group_dir),
	    FAKE_TEST(test_bad_names),
	    FAKE_TEST(test_attach_writes_pid),
	    FAKE_TEST(test_freeze_and_thaw),
	    FAKE_TEST(test_is_frozen_reads_cgroup_events),
	    FAKE_TEST(test_kill_writes_cgroup_kill),
	    FAKE_TEST(test_stats_oom_and_peak),
	    FAKE_TEST(test_stats_read_from_memory_events_only),
	    FAKE_TEST(test_stats_without_peak),
	    FAKE_TEST(test_stats_errors_leave_ret_alone),
	    FAKE_TEST(test_is_empty),
	    FAKE_TEST(test_destroy_removes_group),
	    FAKE_TEST(test_destroy_kills_a_populated_group),
	    FAKE_TEST(test_open_existing_and_missing),
	    FAKE_TEST(test_for_each_lists_groups),
	    FAKE_TEST(test_create_reclaims_leftover),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
