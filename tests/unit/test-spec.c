/*
 * test-spec.c - the sandbox spec: defaults, validation and the environment.
 *
 * Each validation case starts from a spec that passes and breaks exactly
 * one field, then checks the error code and that err.msg names the field.
 * Host paths (rootfs, volume sources) point into a scratch directory made
 * for the group: one subdirectory and one regular file.
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

#include "image/unpack.h"
#include "runtime/spec.h"
#include "runtime/uidrange.h"

static char scratch[64];       /* the group's scratch directory */
static char scratch_dir[128];  /* scratch/dir: a directory */
static char scratch_file[128]; /* scratch/file: a regular file */
static char scratch_none[128]; /* scratch/none: does not exist */

static const char *const good_argv[] = {"sh", "-c", "true", NULL};

static void good_spec(struct spec *s)
{
	spec_init(s);
	s->argv = good_argv;
	s->argc = 3;
}

/* Validation must fail with code and a message containing needle. */
static void expect_invalid(const struct spec *s, int code, const char *needle)
{
	struct error err = {0};
	int r = spec_validate(s, &err);
	if (r != -code)
		fail_msg("spec_validate = %d (%s); want %d, message with '%s'", r, err.msg, -code,
			 needle);
	assert_int_equal(err.code, code);
	if (!strstr(err.msg, needle))
		fail_msg("message '%s' does not contain '%s'", err.msg, needle);
}

static void expect_valid(const struct spec *s)
{
	struct error err = {0};
	int r = spec_validate(s, &err);
	if (r != 0)
		fail_msg("spec_validate = %d: %s", r, err.msg);
	assert_int_equal(err.code, 0);
}

static void expect_workdir_invalid(const char *workdir, int code, const char *needle)
{
	struct spec s;
	good_spec(&s);
	s.workdir = workdir;
	struct error err = {0};
	int r = spec_validate(&s, &err);
	if (r != -code)
		fail_msg("workdir '%s': spec_validate = %d (%s); want %d", workdir, r, err.msg,
			 -code);
	if (!strstr(err.msg, needle))
		fail_msg("workdir '%s': message '%s' does not contain '%s'", workdir, err.msg,
			 needle);
}

static void test_files_accepted_under_workdir_and_tmp(void **state)
{
	(void)state;
	static const struct spec_file files[] = {
	    {"/workspace/main.py", "print(1)\n", 9},
	    {"/workspace/pkg/deep/x.txt", "", 0},
	    {"/tmp/input.csv", "a,b\n", 4},
	};
	struct spec s;
	good_spec(&s);
	s.files = files;
	s.nfiles = 3;
	expect_valid(&s);
}

static void test_files_refused_outside_or_too_many(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	static const struct spec_file etc[] = {{"/etc/passwd", "x", 1}};
	s.files = etc;
	s.nfiles = 1;
	expect_invalid(&s, EINVAL, "not under /workspace or /tmp");
	static const struct spec_file dir_itself[] = {{"/workspace", "x", 1}};
	s.files = dir_itself;
	expect_invalid(&s, EINVAL, "not under /workspace or /tmp");
	static const struct spec_file prefix_trick[] = {{"/workspaces/x", "x", 1}};
	s.files = prefix_trick;
	expect_invalid(&s, EINVAL, "not under /workspace or /tmp");
	static const struct spec_file dots[] = {{"/workspace/../etc/x", "x", 1}};
	s.files = dots;
	expect_invalid(&s, EINVAL, "'.' or '..'");
	static struct spec_file many[SPEC_FILES_MAX + 1];
	for (size_t i = 0; i < SPEC_FILES_MAX + 1; i++)
		many[i] = (struct spec_file){"/tmp/f", "", 0};
	s.files = many;
	s.nfiles = SPEC_FILES_MAX + 1;
	expect_invalid(&s, E2BIG, "more than 1024 files");
	static const struct spec_file big[] = {{"/tmp/a", "", SPEC_FILES_BYTES_MAX},
					       {"/tmp/b", "", 1}};
	s.files = big;
	s.nfiles = 2;
	expect_invalid(&s, E2BIG, "bytes in all");
}

/* Add one volume string (copied, since it is split in place) and validate. */
static int validate_with_volume(const char *arg, char *buf, size_t size, struct error *err)
{
	struct spec s;
	good_spec(&s);
	snprintf(buf, size, "%s", arg);
	int r = spec_add_volume(&s, buf, err);
	if (r == 0)
		r = spec_validate(&s, err);
	spec_release(&s);
	return r;
}

static void expect_volume_invalid(const char *arg, int code, const char *needle)
{
	char buf[512];
	struct error err = {0};
	int r = validate_with_volume(arg, buf, sizeof(buf), &err);
	if (r != -code)
		fail_msg("volume '%s': %d (%s); want %d", arg, r, err.msg, -code);
	if (!strstr(err.msg, needle))
		fail_msg("volume '%s': message '%s' does not contain '%s'", arg, err.msg, needle);
}

/* ---- defaults ---------------------------------------------------------- */

static void test_init_defaults(void **state)
{
	(void)state;
	struct spec s;
	memset(&s, 0xa5, sizeof(s));
	spec_init(&s);
	assert_null(s.argv);
	assert_int_equal(s.argc, 0);
	assert_int_equal(s.memory_bytes, 512ULL << 20);
	assert_int_equal(s.cpu_milli, 1000);
	assert_int_equal(s.pids, 256);
	assert_int_equal(s.disk_bytes, 1ULL << 30);
	assert_int_equal(s.timeout_ms, 0);
	assert_null(s.env);
	assert_int_equal(s.nenv, 0);
	assert_null(s.volumes);
	assert_int_equal(s.nvolumes, 0);
	assert_string_equal(s.workdir, "/workspace");
	assert_null(s.rootfs);
	assert_int_equal(s.network, NETWORK_NONE);
}

static void test_validate_good(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	expect_valid(&s);

	/* every limit at both of its bounds */
	s.memory_bytes = 4ULL << 20;
	s.cpu_milli = 10;
	s.pids = 1;
	s.disk_bytes = 1ULL << 20;
	s.timeout_ms = 30ULL * 86400 * 1000;
	expect_valid(&s);
	s.memory_bytes = 1ULL << 40;
	s.cpu_milli = 1024000;
	s.pids = 1000000;
	s.disk_bytes = 1ULL << 40;
	s.timeout_ms = 0;
	expect_valid(&s);

	/* a full spec: rootfs, env, an ro and an rw volume */
	char v1[256], v2[256];
	snprintf(v1, sizeof(v1), "%s:/data:ro", scratch_dir);
	snprintf(v2, sizeof(v2), "%s:/out:rw", scratch_dir);
	struct error err = {0};
	s.rootfs = scratch_dir;
	s.workdir = "/home/agent/work";
	assert_int_equal(spec_add_env(&s, "FOO=bar"), 0);
	assert_int_equal(spec_add_env(&s, "_x1=a=b"), 0);
	assert_int_equal(spec_add_env(&s, "EMPTY="), 0);
	assert_int_equal(spec_add_volume(&s, v1, &err), 0);
	assert_int_equal(spec_add_volume(&s, v2, &err), 0);
	expect_valid(&s);
	spec_release(&s);
}

/* ---- command and limits ------------------------------------------------ */

static void test_missing_command(void **state)
{
	(void)state;
	struct spec s;
	spec_init(&s);
	expect_invalid(&s, EINVAL, "missing command");

	static const char *const empty[] = {NULL};
	s.argv = empty;
	s.argc = 0;
	expect_invalid(&s, EINVAL, "missing command");

	static const char *const blank[] = {"", NULL};
	s.argv = blank;
	s.argc = 1;
	expect_invalid(&s, EINVAL, "missing command");
}

static void test_serve_needs_no_command(void **state)
{
	(void)state;
	struct spec s;
	spec_init(&s);
	s.serve = true;
	struct error err = {0};
	assert_int_equal(spec_validate(&s, &err), 0);
	/* ...and its timeout is not checked against a command it does not run */
	s.timeout_ms = 1000;
	assert_int_equal(spec_validate(&s, &err), 0);
	/* the rest is checked as ever */
	s.memory_bytes = 1;
	expect_invalid(&s, ERANGE, "--memory");
	s.memory_bytes = SPEC_DEFAULT_MEMORY;
	s.serve = false;
	expect_invalid(&s, EINVAL, "missing command");
}

static void test_too_many_arguments(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	const char **argv = calloc(SPEC_ARGV_MAX + 2, sizeof(*argv));
	assert_non_null(argv);
	for (size_t i = 0; i < SPEC_ARGV_MAX + 1; i++)
		argv[i] = "x";
	s.argv = argv;
	s.argc = SPEC_ARGV_MAX;
	expect_valid(&s);
	s.argc = SPEC_ARGV_MAX + 1;
	expect_invalid(&s, E2BIG, "command");
	free(argv);
}

static void test_memory_bounds(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.memory_bytes = (4ULL << 20) - 1;
	expect_invalid(&s, ERANGE, "--memory");
	s.memory_bytes = 0;
	expect_invalid(&s, ERANGE, "--memory");
	s.memory_bytes = (1ULL << 40) + 1;
	expect_invalid(&s, ERANGE, "--memory");
}

static void test_cpus_bounds(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.cpu_milli = 0;
	expect_invalid(&s, ERANGE, "--cpus");
	s.cpu_milli = 9;
	expect_invalid(&s, ERANGE, "--cpus");
	s.cpu_milli = 1024001;
	expect_invalid(&s, ERANGE, "--cpus");
}

static void test_pids_bounds(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.pids = 0;
	expect_invalid(&s, ERANGE, "--pids");
	s.pids = 1000001;
	expect_invalid(&s, ERANGE, "--pids");
}

static void test_disk_bounds(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.disk_bytes = (1ULL << 20) - 1;
	expect_invalid(&s, ERANGE, "--disk");
	s.disk_bytes = 0;
	expect_invalid(&s, ERANGE, "--disk");
	s.disk_bytes = (1ULL << 40) + 1;
	expect_invalid(&s, ERANGE, "--disk");
}

static void test_timeout_bound(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.timeout_ms = 30ULL * 86400 * 1000 + 1;
	expect_invalid(&s, ERANGE, "--timeout");
	s.timeout_ms = UINT64_MAX;
	expect_invalid(&s, ERANGE, "--timeout");
}

/* ---- workdir ----------------------------------------------------------- */

static void test_workdir_shape(void **state)
{
	(void)state;
	expect_workdir_invalid("workspace", EINVAL, "--workdir");
	expect_workdir_invalid("", EINVAL, "--workdir");
	expect_workdir_invalid("/", EINVAL, "--workdir");
	expect_workdir_invalid("/a/../b", EINVAL, "--workdir");
	expect_workdir_invalid("/..", EINVAL, "--workdir");
	expect_workdir_invalid("/srv/..", EINVAL, "--workdir");
	expect_workdir_invalid("/a/./b", EINVAL, "--workdir");
	expect_workdir_invalid("/a/.", EINVAL, "--workdir");

	struct spec s;
	good_spec(&s);
	s.workdir = NULL;
	expect_invalid(&s, EINVAL, "--workdir");

	/* names that merely contain dots are fine */
	s.workdir = "/a/..b/.c/d..";
	expect_valid(&s);
}

static void test_workdir_too_long(void **state)
{
	(void)state;
	char *p = malloc(SPEC_PATH_MAX + 1);
	assert_non_null(p);
	memset(p, 'a', SPEC_PATH_MAX);
	p[0] = '/';
	p[SPEC_PATH_MAX] = '\0';
	expect_workdir_invalid(p, ENAMETOOLONG, "--workdir");
	p[SPEC_PATH_MAX - 1] = '\0'; /* 1023 bytes: the longest allowed */
	struct spec s;
	good_spec(&s);
	s.workdir = p;
	expect_valid(&s);
	free(p);
}

static void test_workdir_reserved(void **state)
{
	(void)state;
	static const char *const reserved[] = {
	    "/proc", "/proc/x", "/tmp", "/tmp/x", "/usr", "/usr/local/src", "/dev",
	    "/sys",  "/etc",	"/bin", "/sbin",  "/lib", "/lib64",	    "/dev/shm"};
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		expect_workdir_invalid(reserved[i], EINVAL, "reserved");

	/* a prefix of a reserved name is not reserved */
	struct spec s;
	good_spec(&s);
	static const char *const free_names[] = {"/tmpx",    "/procfs",	  "/usrdata",
						 "/library", "/home/tmp", "/srv/proc"};
	for (size_t i = 0; i < sizeof(free_names) / sizeof(free_names[0]); i++) {
		s.workdir = free_names[i];
		expect_valid(&s);
	}
}

/*
 * Sandbox paths must be canonical: no empty components, not '/' itself.
 * The runtime mounts the workdir at workdir + 1 relative to the new root,
 * so a leading "//" would turn that into an absolute path, and it would
 * also slip past the reserved-prefix check.
 */
static void test_workdir_double_slash_is_root(void **state)
{
	(void)state;
	expect_workdir_invalid("//", EINVAL, "--workdir");
}

static void test_workdir_empty_component(void **state)
{
	(void)state;
	expect_workdir_invalid("/a//b", EINVAL, "--workdir");
	/* a trailing '/' is an empty last component */
	expect_workdir_invalid("/workspace/", EINVAL, "--workdir");
	expect_workdir_invalid("/a/b//", EINVAL, "--workdir");
}

static void test_workdir_reserved_behind_double_slash(void **state)
{
	(void)state;
	expect_workdir_invalid("//proc", EINVAL, "--workdir");
}

/* ---- rootfs ------------------------------------------------------------ */

static void test_rootfs(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.rootfs = scratch_none;
	expect_invalid(&s, ENOENT, "--rootfs");
	s.rootfs = scratch_file;
	expect_invalid(&s, ENOTDIR, "--rootfs");
	s.rootfs = "relative/dir";
	expect_invalid(&s, EINVAL, "--rootfs");
	s.rootfs = scratch_dir;
	expect_valid(&s);
}

/* ---- image tree and user ------------------------------------------------ */

/* The image store's host ids are the range the runtime maps from. */
_Static_assert(UIDRANGE_IMAGE_BASE == IMAGE_ID_BASE, "image ids: one base");
_Static_assert(UIDRANGE_SIZE == IMAGE_ID_MAX + 1u, "image ids: one size");

static void test_image_tree(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	s.image_tree = scratch_none;
	expect_invalid(&s, ENOENT, "--image-tree");
	s.image_tree = scratch_file;
	expect_invalid(&s, ENOTDIR, "--image-tree");
	s.image_tree = "relative/dir";
	expect_invalid(&s, EINVAL, "--image-tree");
	s.image_tree = scratch_dir;
	expect_valid(&s);
	s.rootfs = scratch_dir; /* one root or the other */
	expect_invalid(&s, EINVAL, "--image-tree");
}

static void test_user(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	assert_int_equal(s.user, SPEC_USER_SANDBOX);
	s.user = SPEC_USER_ROOT;
	expect_valid(&s);
	s.user = (enum spec_user)7;
	expect_invalid(&s, EINVAL, "--user");
}

/* ---- env --------------------------------------------------------------- */

static void expect_env_invalid(const char *kv, int code)
{
	struct spec s;
	good_spec(&s);
	assert_int_equal(spec_add_env(&s, kv), 0);
	struct error err = {0};
	int r = spec_validate(&s, &err);
	spec_release(&s);
	if (r != -code)
		fail_msg("env '%s': spec_validate = %d (%s); want %d", kv, r, err.msg, -code);
	if (!strstr(err.msg, "--env"))
		fail_msg("env '%s': message '%s' does not name --env", kv, err.msg);
}

static void test_env_invalid(void **state)
{
	(void)state;
	expect_env_invalid("NOEQUALS", EINVAL);
	expect_env_invalid("=x", EINVAL);
	expect_env_invalid("1A=x", EINVAL);
	expect_env_invalid("A-B=x", EINVAL);
	expect_env_invalid("A B=x", EINVAL);
	expect_env_invalid("A.B=x", EINVAL);
	expect_env_invalid("", EINVAL);
}

static void test_env_entry_too_long(void **state)
{
	(void)state;
	char *kv = malloc(SPEC_ENV_ENTRY_MAX + 1);
	assert_non_null(kv);
	memset(kv, 'v', SPEC_ENV_ENTRY_MAX);
	memcpy(kv, "K=", 2);
	kv[SPEC_ENV_ENTRY_MAX] = '\0';
	expect_env_invalid(kv, E2BIG);

	kv[SPEC_ENV_ENTRY_MAX - 1] = '\0'; /* the longest allowed */
	struct spec s;
	good_spec(&s);
	assert_int_equal(spec_add_env(&s, kv), 0);
	expect_valid(&s);
	spec_release(&s);
	free(kv);
}

static void test_env_valid_names(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	assert_int_equal(spec_add_env(&s, "A=1"), 0);
	assert_int_equal(spec_add_env(&s, "a_b9=x y"), 0);
	assert_int_equal(spec_add_env(&s, "_=="), 0);
	assert_int_equal(spec_add_env(&s, "Z9_="), 0);
	expect_valid(&s);
	spec_release(&s);
}

static void test_env_too_many(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	/* a user's SPEC_ENV_MAX, and room for what agentbox adds to them */
	for (int i = 0; i < SPEC_ENV_MAX + SPEC_ENV_ADDED_MAX; i++)
		assert_int_equal(spec_add_env(&s, "K=v"), 0);
	assert_int_equal(s.nenv, SPEC_ENV_MAX + SPEC_ENV_ADDED_MAX);
	assert_int_equal(spec_add_env(&s, "K=v"), -E2BIG);
	assert_int_equal(s.nenv, SPEC_ENV_MAX + SPEC_ENV_ADDED_MAX);
	expect_valid(&s);
	spec_release(&s);
}

/* ---- volumes ----------------------------------------------------------- */

static void test_volume_parse(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	struct error err = {0};
	char a[] = "/h1:/t1";
	char b[] = "/h2:/t2:ro";
	char c[] = "/h3:/t3:rw";
	assert_int_equal(spec_add_volume(&s, a, &err), 0);
	assert_int_equal(spec_add_volume(&s, b, &err), 0);
	assert_int_equal(spec_add_volume(&s, c, &err), 0);
	assert_int_equal(s.nvolumes, 3);
	assert_string_equal(s.volumes[0].host, "/h1");
	assert_string_equal(s.volumes[0].target, "/t1");
	assert_false(s.volumes[0].read_only);
	assert_string_equal(s.volumes[1].host, "/h2");
	assert_string_equal(s.volumes[1].target, "/t2");
	assert_true(s.volumes[1].read_only);
	assert_string_equal(s.volumes[2].host, "/h3");
	assert_string_equal(s.volumes[2].target, "/t3");
	assert_false(s.volumes[2].read_only);
	/* split in place: the strings point into the caller's buffer */
	assert_ptr_equal(s.volumes[0].host, a);
	assert_ptr_equal(s.volumes[0].target, a + 4);
	spec_release(&s);
}

static void test_volume_bad_syntax(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	struct error err = {0};
	char nocolon[] = "/tmp";
	assert_int_equal(spec_add_volume(&s, nocolon, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--volume"));

	memset(&err, 0, sizeof(err));
	char bogus[] = "/tmp:/x:bogus";
	assert_int_equal(spec_add_volume(&s, bogus, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--volume"));
	assert_non_null(strstr(err.msg, "bogus"));

	char upper[] = "/tmp:/x:RO";
	assert_int_equal(spec_add_volume(&s, upper, &err), -EINVAL);
	char extra[] = "/tmp:/x:ro:ro";
	assert_int_equal(spec_add_volume(&s, extra, &err), -EINVAL);
	assert_int_equal(s.nvolumes, 0);
	assert_null(s.volumes);
	spec_release(&s);
}

static void test_volume_rw_ok(void **state)
{
	(void)state;
	char arg[256], buf[512];
	struct error err = {0};
	snprintf(arg, sizeof(arg), "%s:/x:rw", scratch_dir);
	assert_int_equal(validate_with_volume(arg, buf, sizeof(buf), &err), 0);
	snprintf(arg, sizeof(arg), "%s:/x", scratch_dir);
	assert_int_equal(validate_with_volume(arg, buf, sizeof(buf), &err), 0);
	/* a target that only starts like a reserved one */
	snprintf(arg, sizeof(arg), "%s:/tmpdata:ro", scratch_dir);
	assert_int_equal(validate_with_volume(arg, buf, sizeof(buf), &err), 0);
	assert_int_equal(err.code, 0);
}

static void test_volume_host(void **state)
{
	(void)state;
	char arg[256];
	expect_volume_invalid("rel:/x", EINVAL, "--volume");
	snprintf(arg, sizeof(arg), "%s:/x", scratch_none);
	expect_volume_invalid(arg, ENOENT, "--volume");
	/* a single file (or a FIFO) may be a volume; a device may not */
	char buf[256];
	struct error err = {0};
	snprintf(arg, sizeof(arg), "%s:/x", scratch_file);
	assert_int_equal(validate_with_volume(arg, buf, sizeof(buf), &err), 0);
	expect_volume_invalid("/dev/null:/x", EINVAL, "not a directory, file or FIFO");
}

static void test_volume_target(void **state)
{
	(void)state;
	char arg[256];
	snprintf(arg, sizeof(arg), "%s:rel", scratch_dir);
	expect_volume_invalid(arg, EINVAL, "--volume");
	snprintf(arg, sizeof(arg), "%s:", scratch_dir);
	expect_volume_invalid(arg, EINVAL, "--volume");
	snprintf(arg, sizeof(arg), "%s:/", scratch_dir);
	expect_volume_invalid(arg, EINVAL, "--volume");
	snprintf(arg, sizeof(arg), "%s:/a/../proc", scratch_dir);
	expect_volume_invalid(arg, EINVAL, "--volume");
	static const char *const reserved[] = {"/proc",	   "/tmp", "/tmp/x", "/usr",
					       "/etc/ssl", "/dev", "/sys",   "/lib64"};
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		snprintf(arg, sizeof(arg), "%s:%s:ro", scratch_dir, reserved[i]);
		expect_volume_invalid(arg, EINVAL, "reserved");
	}
}

static void test_volume_target_reserved_behind_double_slash(void **state)
{
	(void)state;
	char arg[256];
	snprintf(arg, sizeof(arg), "%s://usr", scratch_dir);
	expect_volume_invalid(arg, EINVAL, "--volume");
	snprintf(arg, sizeof(arg), "%s:/data/", scratch_dir);
	expect_volume_invalid(arg, EINVAL, "--volume");
}

static void test_volume_too_many(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	struct error err = {0};
	char bufs[SPEC_VOLUMES_MAX + 1][256];
	for (int i = 0; i < SPEC_VOLUMES_MAX; i++) {
		snprintf(bufs[i], sizeof(bufs[i]), "%s:/v%d", scratch_dir, i);
		assert_int_equal(spec_add_volume(&s, bufs[i], &err), 0);
	}
	assert_int_equal(s.nvolumes, SPEC_VOLUMES_MAX);
	expect_valid(&s);
	snprintf(bufs[SPEC_VOLUMES_MAX], sizeof(bufs[0]), "%s:/extra", scratch_dir);
	assert_int_equal(spec_add_volume(&s, bufs[SPEC_VOLUMES_MAX], &err), -E2BIG);
	assert_non_null(strstr(err.msg, "--volume"));
	assert_int_equal(s.nvolumes, SPEC_VOLUMES_MAX);
	spec_release(&s);
}

/* ---- spec_build_env ---------------------------------------------------- */

static size_t env_len(char **env)
{
	size_t n = 0;
	while (env[n])
		n++;
	return n;
}

static void test_build_env_defaults(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	char **env = spec_build_env(&s);
	assert_non_null(env);
	assert_int_equal(env_len(env), 3);
	assert_string_equal(env[0],
			    "PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin");
	assert_string_equal(env[1], "HOME=/workspace");
	assert_string_equal(env[2], "LANG=C.UTF-8");
	assert_null(env[3]);
	free(env);

	s.workdir = "/home/agent";
	env = spec_build_env(&s);
	assert_non_null(env);
	assert_string_equal(env[1], "HOME=/home/agent");
	free(env);
}

static void test_build_env_override_and_order(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	assert_int_equal(spec_add_env(&s, "FOO=1"), 0);
	assert_int_equal(spec_add_env(&s, "PATH=/x"), 0);
	assert_int_equal(spec_add_env(&s, "PATHX=2"), 0);
	assert_int_equal(spec_add_env(&s, "BAR=a=b"), 0);
	assert_int_equal(spec_add_env(&s, "FOO=3"), 0);
	assert_int_equal(spec_add_env(&s, "LANG=en_US.UTF-8"), 0);
	char **env = spec_build_env(&s);
	assert_non_null(env);
	/* replaced keys keep their place; new keys follow in the caller's order */
	assert_int_equal(env_len(env), 6);
	assert_string_equal(env[0], "PATH=/x");
	assert_string_equal(env[1], "HOME=/workspace");
	assert_string_equal(env[2], "LANG=en_US.UTF-8");
	assert_string_equal(env[3], "FOO=3");
	assert_string_equal(env[4], "PATHX=2");
	assert_string_equal(env[5], "BAR=a=b");
	assert_null(env[6]);
	/* one allocation: the strings are copies, not the caller's pointers */
	assert_ptr_not_equal(env[3], s.env[4]);
	free(env);
	spec_release(&s);
}

static void test_build_env_home_override(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	assert_int_equal(spec_add_env(&s, "HOME=/h"), 0);
	assert_int_equal(spec_add_env(&s, "HOM=short"), 0);
	char **env = spec_build_env(&s);
	assert_non_null(env);
	assert_int_equal(env_len(env), 4);
	assert_string_equal(env[1], "HOME=/h");
	assert_string_equal(env[3], "HOM=short");
	free(env);
	spec_release(&s);
}

static void test_build_env_full(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	static char kv[SPEC_ENV_MAX][16];
	for (int i = 0; i < SPEC_ENV_MAX; i++) {
		snprintf(kv[i], sizeof(kv[i]), "V%d=%d", i, i);
		assert_int_equal(spec_add_env(&s, kv[i]), 0);
	}
	char **env = spec_build_env(&s);
	assert_non_null(env);
	assert_int_equal(env_len(env), SPEC_ENV_MAX + 3);
	assert_string_equal(env[3], "V0=0");
	assert_string_equal(env[SPEC_ENV_MAX + 2], "V255=255");
	assert_null(env[SPEC_ENV_MAX + 3]);
	free(env);
	spec_release(&s);
}

/* ---- spec_release ------------------------------------------------------ */

static void test_release(void **state)
{
	(void)state;
	struct spec s;
	good_spec(&s);
	struct error err = {0};
	char v[] = "/a:/b";
	assert_int_equal(spec_add_env(&s, "A=1"), 0);
	assert_int_equal(spec_add_volume(&s, v, &err), 0);
	spec_release(&s);
	assert_null(s.env);
	assert_int_equal(s.nenv, 0);
	assert_null(s.volumes);
	assert_int_equal(s.nvolumes, 0);
	/* the rest of the spec is kept */
	assert_ptr_equal(s.argv, good_argv);
	assert_string_equal(s.workdir, "/workspace");
	/* reusable, and releasing twice is harmless */
	assert_int_equal(spec_add_env(&s, "B=2"), 0);
	assert_int_equal(s.nenv, 1);
	assert_string_equal(s.env[0], "B=2");
	spec_release(&s);
	spec_release(&s);
	assert_null(s.env);
}

/* ---- scratch directory ------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int setup_scratch(void **state)
{
	(void)state;
	snprintf(scratch, sizeof(scratch), "/tmp/test-spec.XXXXXX");
	if (!mkdtemp(scratch))
		return -1;
	snprintf(scratch_dir, sizeof(scratch_dir), "%s/dir", scratch);
	snprintf(scratch_file, sizeof(scratch_file), "%s/file", scratch);
	snprintf(scratch_none, sizeof(scratch_none), "%s/none", scratch);
	if (mkdir(scratch_dir, 0755) < 0)
		return -1;
	int fd = open(scratch_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown_scratch(void **state)
{
	(void)state;
	return nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_defaults),
	    cmocka_unit_test(test_validate_good),
	    cmocka_unit_test(test_missing_command),
	    cmocka_unit_test(test_serve_needs_no_command),
	    cmocka_unit_test(test_too_many_arguments),
	    cmocka_unit_test(test_memory_bounds),
	    cmocka_unit_test(test_cpus_bounds),
	    cmocka_unit_test(test_pids_bounds),
	    cmocka_unit_test(test_disk_bounds),
	    cmocka_unit_test(test_timeout_bound),
	    cmocka_unit_test(test_workdir_shape),
	    cmocka_unit_test(test_workdir_too_long),
	    cmocka_unit_test(test_workdir_reserved),
	    cmocka_unit_test(test_image_tree),
	    cmocka_unit_test(test_user),
	    cmocka_unit_test(test_workdir_double_slash_is_root),
	    cmocka_unit_test(test_workdir_empty_component),
	    cmocka_unit_test(test_workdir_reserved_behind_double_slash),
	    cmocka_unit_test(test_rootfs),
	    cmocka_unit_test(test_env_invalid),
	    cmocka_unit_test(test_env_entry_too_long),
	    cmocka_unit_test(test_env_valid_names),
	    cmocka_unit_test(test_env_too_many),
	    cmocka_unit_test(test_volume_parse),
	    cmocka_unit_test(test_volume_bad_syntax),
	    cmocka_unit_test(test_volume_rw_ok),
	    cmocka_unit_test(test_volume_host),
	    cmocka_unit_test(test_volume_target),
	    cmocka_unit_test(test_volume_target_reserved_behind_double_slash),
	    cmocka_unit_test(test_volume_too_many),
	    cmocka_unit_test(test_build_env_defaults),
	    cmocka_unit_test(test_build_env_override_and_order),
	    cmocka_unit_test(test_build_env_home_override),
	    cmocka_unit_test(test_build_env_full),
	    cmocka_unit_test(test_release),
	    cmocka_unit_test(test_files_accepted_under_workdir_and_tmp),
	    cmocka_unit_test(test_files_refused_outside_or_too_many),
	};
	return cmocka_run_group_tests(tests, setup_scratch, teardown_scratch);
}
