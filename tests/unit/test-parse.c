/*
 * test-parse.c - the strict value parsers of base/parse.h and the small
 * file helpers of base/fileio.h.
 *
 * Every parser check starts the output at a sentinel, so a case also
 * proves that a failing parse leaves *ret alone. Failures name the input,
 * since one helper serves many strings.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/parse.h"

#define SENTINEL UINT64_C(0xdeadbeefcafef00d)

typedef int (*parser_fn)(const char *s, uint64_t *ret);

static void check_ok(parser_fn fn, const char *name, const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;
	int r = fn(s, &v);
	if (r != 0 || v != want)
		fail_msg("%s(\"%s\") = %d, %" PRIu64 "; want 0, %" PRIu64, name, s, r, v, want);
}

static void check_err(parser_fn fn, const char *name, const char *s, int want)
{
	uint64_t v = SENTINEL;
	int r = fn(s, &v);
	if (r != want)
		fail_msg("%s(\"%s\") = %d (value %" PRIu64 "); want %d", name, s ? s : "(null)", r,
			 v, want);
	if (v != SENTINEL)
		fail_msg("%s(\"%s\") failed but wrote %" PRIu64, name, s ? s : "(null)", v);
}

#define OK(fn, s, want)	 check_ok(fn, #fn, s, want)
#define ERR(fn, s, want) check_err(fn, #fn, s, want)

/* ---- parse_u64 -------------------------------------------------------- */

static void test_u64_accepts(void **state)
{
	(void)state;
	OK(parse_u64, "0", 0);
	OK(parse_u64, "42", 42);
	OK(parse_u64, "007", 7);
	OK(parse_u64, "18446744073709551615", UINT64_MAX);
}

static void test_u64_rejects(void **state)
{
	(void)state;
	ERR(parse_u64, "", -EINVAL);
	ERR(parse_u64, "-1", -EINVAL);
	ERR(parse_u64, "+1", -EINVAL);
	ERR(parse_u64, " 1", -EINVAL);
	ERR(parse_u64, "1 ", -EINVAL);
	ERR(parse_u64, "1k", -EINVAL);
	ERR(parse_u64, "0x10", -EINVAL);
	ERR(parse_u64, "1.0", -EINVAL);
	ERR(parse_u64, "18446744073709551616", -ERANGE);
	ERR(parse_u64, "99999999999999999999", -ERANGE);
	ERR(parse_u64, NULL, -EINVAL);
}

/* ---- parse_size ------------------------------------------------------- */

static void test_size_units(void **state)
{
	(void)state;
	OK(parse_size, "0", 0);
	OK(parse_size, "4096", 4096);
	OK(parse_size, "4096b", 4096);
	OK(parse_size, "64k", 64ULL << 10);
	OK(parse_size, "512m", 512ULL << 20);
	OK(parse_size, "1g", 1ULL << 30);
	OK(parse_size, "2t", 2ULL << 40);
	OK(parse_size, "1kb", 1ULL << 10);
	OK(parse_size, "1kib", 1ULL << 10);
	OK(parse_size, "1mb", 1ULL << 20);
	OK(parse_size, "1MiB", 1ULL << 20);
	OK(parse_size, "3gib", 3ULL << 30);
	OK(parse_size, "1tb", 1ULL << 40);
}

static void test_size_case_insensitive(void **state)
{
	(void)state;
	OK(parse_size, "64K", 64ULL << 10);
	OK(parse_size, "512M", 512ULL << 20);
	OK(parse_size, "1G", 1ULL << 30);
	OK(parse_size, "2T", 2ULL << 40);
	OK(parse_size, "1MB", 1ULL << 20);
	OK(parse_size, "1mIb", 1ULL << 20);
	OK(parse_size, "1GiB", 1ULL << 30);
	OK(parse_size, "7B", 7);
}

static void test_size_rejects(void **state)
{
	(void)state;
	ERR(parse_size, "", -EINVAL);
	ERR(parse_size, "k", -EINVAL);
	ERR(parse_size, "12xb", -EINVAL);
	ERR(parse_size, "12x", -EINVAL);
	ERR(parse_size, "1bb", -EINVAL);
	ERR(parse_size, "1ki", -EINVAL);
	ERR(parse_size, "1mibs", -EINVAL);
	ERR(parse_size, "-1", -EINVAL);
	ERR(parse_size, "+1", -EINVAL);
	ERR(parse_size, " 1", -EINVAL);
	ERR(parse_size, "1 ", -EINVAL);
	ERR(parse_size, "1.5g", -EINVAL);
	ERR(parse_size, "1 g", -EINVAL);
	ERR(parse_size, "1g ", -EINVAL);
	ERR(parse_size, NULL, -EINVAL);
}

static void test_size_overflow(void **state)
{
	(void)state;
	OK(parse_size, "18446744073709551615", UINT64_MAX);
	ERR(parse_size, "18446744073709551616", -ERANGE);
	ERR(parse_size, "99999999999999999999", -ERANGE);
	/* 2^34 GiB is exactly 2^64: one past the end */
	ERR(parse_size, "17179869184g", -ERANGE);
	OK(parse_size, "17179869183g", UINT64_MAX - (1ULL << 30) + 1);
	ERR(parse_size, "16777216t", -ERANGE);
	OK(parse_size, "16777215t", UINT64_MAX - (1ULL << 40) + 1);
}

/* ---- parse_duration_ms ------------------------------------------------ */

static void test_duration_units(void **state)
{
	(void)state;
	OK(parse_duration_ms, "500ms", 500);
	OK(parse_duration_ms, "90s", 90000);
	OK(parse_duration_ms, "5m", 300000);
	OK(parse_duration_ms, "2h", 7200000);
	OK(parse_duration_ms, "1d", 86400000);
	OK(parse_duration_ms, "0s", 0);
	OK(parse_duration_ms, "0ms", 0);
}

static void test_duration_bare_is_seconds(void **state)
{
	(void)state;
	OK(parse_duration_ms, "90", 90000);
	OK(parse_duration_ms, "0", 0);
	OK(parse_duration_ms, "1", 1000);
}

static void test_duration_groups(void **state)
{
	(void)state;
	OK(parse_duration_ms, "1h30m", 5400000);
	OK(parse_duration_ms, "1d2h3m4s5ms", 86400000 + 7200000 + 180000 + 4000 + 5);
	OK(parse_duration_ms, "1m500ms", 60500);
	/* "ms" is one unit, not minutes followed by seconds */
	OK(parse_duration_ms, "2ms", 2);
	/* groups simply add up */
	OK(parse_duration_ms, "1s1s", 2000);
}

static void test_duration_rejects(void **state)
{
	(void)state;
	ERR(parse_duration_ms, "", -EINVAL);
	ERR(parse_duration_ms, "1x", -EINVAL);
	ERR(parse_duration_ms, "s", -EINVAL);
	ERR(parse_duration_ms, "ms", -EINVAL);
	ERR(parse_duration_ms, "-1s", -EINVAL);
	ERR(parse_duration_ms, "+1s", -EINVAL);
	ERR(parse_duration_ms, "1.5s", -EINVAL);
	ERR(parse_duration_ms, " 1s", -EINVAL);
	ERR(parse_duration_ms, "1s ", -EINVAL);
	ERR(parse_duration_ms, "1 s", -EINVAL);
	/* a bare number is only allowed alone, not as a trailing group */
	ERR(parse_duration_ms, "1ms5", -EINVAL);
	ERR(parse_duration_ms, "1m30", -EINVAL);
	/* a unit must end where the letters end */
	ERR(parse_duration_ms, "1sec", -EINVAL);
	ERR(parse_duration_ms, "1msx", -EINVAL);
	ERR(parse_duration_ms, "1hs", -EINVAL);
	ERR(parse_duration_ms, "1h1", -EINVAL);
	ERR(parse_duration_ms, NULL, -EINVAL);
}

static void test_duration_overflow(void **state)
{
	(void)state;
	ERR(parse_duration_ms, "99999999999999999999", -ERANGE);
	ERR(parse_duration_ms, "99999999999999999999ms", -ERANGE);
	OK(parse_duration_ms, "18446744073709551615ms", UINT64_MAX);
	/* the bare number is multiplied by 1000 */
	ERR(parse_duration_ms, "18446744073709552", -ERANGE);
	OK(parse_duration_ms, "18446744073709551", 18446744073709551000ULL);
	/* the unit product overflows */
	ERR(parse_duration_ms, "18446744073709552s", -ERANGE);
	ERR(parse_duration_ms, "213503982336d", -ERANGE);
	/* each group fits, the sum does not */
	ERR(parse_duration_ms, "18446744073709551615ms1ms", -ERANGE);
	OK(parse_duration_ms, "18446744073709551614ms1ms", UINT64_MAX);
}

/* ---- parse_cpus_milli ------------------------------------------------- */

static void test_cpus_accepts(void **state)
{
	(void)state;
	OK(parse_cpus_milli, "1", 1000);
	OK(parse_cpus_milli, "0.5", 500);
	OK(parse_cpus_milli, "2.25", 2250);
	OK(parse_cpus_milli, "0.001", 1);
	OK(parse_cpus_milli, "0.010", 10);
	OK(parse_cpus_milli, "16", 16000);
	OK(parse_cpus_milli, "0", 0);
	OK(parse_cpus_milli, "3.125", 3125);
}

static void test_cpus_rejects(void **state)
{
	(void)state;
	ERR(parse_cpus_milli, "", -EINVAL);
	ERR(parse_cpus_milli, "-1", -EINVAL);
	ERR(parse_cpus_milli, "0.0001", -EINVAL);
	ERR(parse_cpus_milli, "1.2345", -EINVAL);
	ERR(parse_cpus_milli, "1.", -EINVAL);
	ERR(parse_cpus_milli, ".5", -EINVAL);
	ERR(parse_cpus_milli, "abc", -EINVAL);
	ERR(parse_cpus_milli, "1e3", -EINVAL);
	ERR(parse_cpus_milli, "1,5", -EINVAL);
	ERR(parse_cpus_milli, "1.5.0", -EINVAL);
	ERR(parse_cpus_milli, " 1", -EINVAL);
	ERR(parse_cpus_milli, "1 ", -EINVAL);
	ERR(parse_cpus_milli, NULL, -EINVAL);
}

static void test_cpus_overflow(void **state)
{
	(void)state;
	OK(parse_cpus_milli, "18446744073709551.615", UINT64_MAX);
	ERR(parse_cpus_milli, "18446744073709551.616", -ERANGE);
	ERR(parse_cpus_milli, "18446744073709552", -ERANGE);
	ERR(parse_cpus_milli, "99999999999999999999", -ERANGE);
}

/* ---- keyed_u64 -------------------------------------------------------- */

static const char memory_events[] = "low 0\n"
				    "high 0\n"
				    "max 5\n"
				    "oom 2\n"
				    "oom_kill 3\n"
				    "oom_group_kill 0\n";

static void test_keyed_finds_keys(void **state)
{
	(void)state;
	uint64_t v = SENTINEL;
	assert_int_equal(keyed_u64(memory_events, "oom_kill", &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(keyed_u64(memory_events, "oom", &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(keyed_u64(memory_events, "low", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(keyed_u64(memory_events, "max", &v), 0);
	assert_int_equal(v, 5);
	assert_int_equal(keyed_u64(memory_events, "oom_group_kill", &v), 0);
	assert_int_equal(v, 0);
}

static void test_keyed_prefix_is_not_a_match(void **state)
{
	(void)state;
	uint64_t v = SENTINEL;
	assert_int_equal(keyed_u64("oom_kill_disable 0\noom_kill 2", "oom_kill", &v), 0);
	assert_int_equal(v, 2);
	/* the key must start the line */
	v = SENTINEL;
	assert_int_equal(keyed_u64("xoom_kill 9\noom_kill 4\n", "oom_kill", &v), 0);
	assert_int_equal(v, 4);
	/* a shorter key is not found inside a longer one */
	v = SENTINEL;
	assert_int_equal(keyed_u64("oom_kill 9\n", "oom", &v), -ENOENT);
	assert_int_equal(v, SENTINEL);
}

static void test_keyed_last_line_without_newline(void **state)
{
	(void)state;
	uint64_t v = SENTINEL;
	assert_int_equal(keyed_u64("a 1\nb 22", "b", &v), 0);
	assert_int_equal(v, 22);
}

static void test_keyed_absent_and_malformed(void **state)
{
	(void)state;
	uint64_t v = SENTINEL;
	assert_int_equal(keyed_u64("", "oom_kill", &v), -ENOENT);
	assert_int_equal(keyed_u64("low 0\nhigh 0\n", "oom_kill", &v), -ENOENT);
	assert_int_equal(keyed_u64("oom_kill\n", "oom_kill", &v), -ENOENT);
	assert_int_equal(keyed_u64("oom_kill \n", "oom_kill", &v), -EINVAL);
	assert_int_equal(keyed_u64("oom_kill x\n", "oom_kill", &v), -EINVAL);
	assert_int_equal(keyed_u64("oom_kill -1\n", "oom_kill", &v), -EINVAL);
	assert_int_equal(keyed_u64("oom_kill 99999999999999999999\n", "oom_kill", &v), -ERANGE);
	assert_int_equal(v, SENTINEL);
}

/* ---- fileio on a scratch directory ------------------------------------ */

struct scratch {
	char path[64];
	int fd;
};

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int scratch_setup(void **state)
{
	struct scratch *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	snprintf(s->path, sizeof(s->path), "/tmp/test-parse.XXXXXX");
	if (!mkdtemp(s->path)) {
		free(s);
		return -1;
	}
	s->fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->fd < 0) {
		rmdir(s->path);
		free(s);
		return -1;
	}
	*state = s;
	return 0;
}

static int scratch_teardown(void **state)
{
	struct scratch *s = *state;
	close(s->fd);
	int r = nftw(s->path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(s);
	return r;
}

static void assert_file_is(int dirfd, const char *name, const char *want)
{
	char buf[256];
	ssize_t n = read_file_at(dirfd, name, buf, sizeof(buf));
	if (n < 0)
		fail_msg("reading %s: %s", name, strerror((int)-n));
	assert_int_equal(n, strlen(want));
	assert_string_equal(buf, want);
}

static void test_create_and_read(void **state)
{
	struct scratch *s = *state;
	mode_t old = umask(022);
	assert_int_equal(create_file_at(s->fd, "f", "hello\n", 0600), 0);
	umask(old);
	assert_file_is(s->fd, "f", "hello\n");
	struct stat st;
	assert_int_equal(fstatat(s->fd, "f", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	/* create_file_at truncates what was there */
	assert_int_equal(create_file_at(s->fd, "f", "ab", 0644), 0);
	assert_file_is(s->fd, "f", "ab");
}

static void test_write_file_at(void **state)
{
	struct scratch *s = *state;
	/* no create */
	assert_int_equal(write_file_at(s->fd, "missing", "1"), -ENOENT);
	assert_int_equal(faccessat(s->fd, "missing", F_OK, 0), -1);
	assert_int_equal(errno, ENOENT);

	/* no truncate: it writes from the start over what was there */
	assert_int_equal(create_file_at(s->fd, "g", "xyz", 0644), 0);
	assert_int_equal(write_file_at(s->fd, "g", "ab"), 0);
	assert_file_is(s->fd, "g", "abz");

	/* a directory cannot be written */
	assert_int_equal(mkdirat(s->fd, "d", 0755), 0);
	assert_int_equal(write_file_at(s->fd, "d", "1"), -EISDIR);
}

static void test_read_file_at_bounds(void **state)
{
	struct scratch *s = *state;
	char buf[4];
	assert_int_equal(create_file_at(s->fd, "long", "abcdefgh", 0644), 0);
	/* at most size-1 bytes, always terminated */
	memset(buf, 'Z', sizeof(buf));
	assert_int_equal(read_file_at(s->fd, "long", buf, sizeof(buf)), 3);
	assert_string_equal(buf, "abc");
	assert_int_equal(read_file_at(s->fd, "long", buf, 0), -EINVAL);
	assert_int_equal(read_file_at(s->fd, "nope", buf, sizeof(buf)), -ENOENT);

	assert_int_equal(create_file_at(s->fd, "empty", "", 0644), 0);
	memset(buf, 'Z', sizeof(buf));
	assert_int_equal(read_file_at(s->fd, "empty", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static void test_read_u64_at(void **state)
{
	struct scratch *s = *state;
	uint64_t v = SENTINEL;

	assert_int_equal(create_file_at(s->fd, "n", "134217728\n", 0644), 0);
	assert_int_equal(read_u64_at(s->fd, "n", &v), 0);
	assert_int_equal(v, 134217728);

	assert_int_equal(create_file_at(s->fd, "n", "42", 0644), 0);
	assert_int_equal(read_u64_at(s->fd, "n", &v), 0);
	assert_int_equal(v, 42);

	v = SENTINEL;
	assert_int_equal(create_file_at(s->fd, "n", "max\n", 0644), 0);
	assert_int_equal(read_u64_at(s->fd, "n", &v), -ERANGE);
	assert_int_equal(create_file_at(s->fd, "n", "", 0644), 0);
	assert_int_equal(read_u64_at(s->fd, "n", &v), -EINVAL);
	assert_int_equal(create_file_at(s->fd, "n", "12 34\n", 0644), 0);
	assert_int_equal(read_u64_at(s->fd, "n", &v), -EINVAL);
	assert_int_equal(create_file_at(s->fd, "n", "-5\n", 0644), 0);
	assert_int_equal(read_u64_at(s->fd, "n", &v), -EINVAL);
	assert_int_equal(read_u64_at(s->fd, "absent", &v), -ENOENT);
	assert_int_equal(v, SENTINEL);
}

/* ---- env_name_is_valid ---------------------------------------------------- */

static void test_env_names(void **state)
{
	(void)state;
	static const char *const good[] = {"A", "_", "PATH", "x1", "_9", "LC_ALL", "aB_3c"};
	static const char *const bad[] = {"", "1A", "A-B", "A B", "A=B", "é", "A.B", "9"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(env_name_is_valid(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(env_name_is_valid(bad[i], strlen(bad[i])));
	/* only len bytes count: the name of "KEY=VALUE" is its first three */
	assert_true(env_name_is_valid("KEY=VALUE", 3));
	assert_false(env_name_is_valid("KEY=VALUE", 4));
	assert_false(env_name_is_valid("A", 0));
}

/* ---- parse_ipv4_port ------------------------------------------------------ */

static void test_ipv4_port(void **state)
{
	(void)state;
	uint32_t a = 0;
	uint16_t port = 0;
	assert_int_equal(parse_ipv4_port("198.51.100.1", 53, &a, &port), 0);
	assert_int_equal(a, 0xc6336401u);
	assert_int_equal(port, 53);
	assert_int_equal(parse_ipv4_port("10.0.0.2:5353", 53, &a, &port), 0);
	assert_int_equal(a, 0x0a000002u);
	assert_int_equal(port, 5353);
	static const char *const bad[] = {
	    "",	       ":53", "10.0.0.2:", "10.0.0.2:0",  "10.0.0.2:65536", "10.0.0.2:+5",
	    "10.1",    "::1", "[::1]:53",  "dns.example", "10.0.0.2:5:3",   "10.0.0.256",
	    "1.2.3.4 "};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = 7;
		assert_int_equal(parse_ipv4_port(bad[i], 53, &a, &port), -EINVAL);
		assert_int_equal(a, 7); /* untouched */
	}
}

static void test_rfc3339(void **state)
{
	(void)state;
	int64_t t = 7;
	assert_int_equal(parse_rfc3339_ms("2023-11-14T22:13:20.123Z", &t), 0);
	assert_int_equal(t, 1700000000123);
	assert_int_equal(parse_rfc3339_ms("2023-11-14T23:13:20.1234+01:00", &t), 0);
	assert_int_equal(t, 1700000000123); /* an offset; past the ms dropped */
	assert_int_equal(parse_rfc3339_ms("2023-11-14t22:13:20z", &t), 0);
	assert_int_equal(t, 1700000000000);
	static const char *const bad[] = {"",
					  "2023-11-14",
					  "2023-11-14T22:13:20",
					  "2023-13-14T22:13:20Z",
					  "2023-11-14T24:13:20Z",
					  "2023-11-14T22:13:20.Z",
					  "2023-11-14T22:13:20Z ",
					  "2023-11-14T22:13:20+0100",
					  "1700000000123"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = 7;
		assert_int_equal(parse_rfc3339_ms(bad[i], &t), -EINVAL);
		assert_int_equal(t, 7); /* written only on success */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_u64_accepts),
	    cmocka_unit_test(test_u64_rejects),
	    cmocka_unit_test(test_size_units),
	    cmocka_unit_test(test_size_case_insensitive),
	    cmocka_unit_test(test_size_rejects),
	    cmocka_unit_test(test_size_overflow),
	    cmocka_unit_test(test_duration_units),
	    cmocka_unit_test(test_duration_bare_is_seconds),
	    cmocka_unit_test(test_duration_groups),
	    cmocka_unit_test(test_duration_rejects),
	    cmocka_unit_test(test_duration_overflow),
	    cmocka_unit_test(test_cpus_accepts),
	    cmocka_unit_test(test_cpus_rejects),
	    cmocka_unit_test(test_cpus_overflow),
	    cmocka_unit_test(test_keyed_finds_keys),
	    cmocka_unit_test(test_keyed_prefix_is_not_a_match),
	    cmocka_unit_test(test_keyed_last_line_without_newline),
	    cmocka_unit_test(test_keyed_absent_and_malformed),
	    cmocka_unit_test(test_env_names),
	    cmocka_unit_test(test_ipv4_port),
	    cmocka_unit_test(test_rfc3339),
	    cmocka_unit_test_setup_teardown(test_create_and_read, scratch_setup, scratch_teardown),
	    cmocka_unit_test_setup_teardown(test_write_file_at, scratch_setup, scratch_teardown),
	    cmocka_unit_test_setup_teardown(test_read_file_at_bounds, scratch_setup,
					    scratch_teardown),
	    cmocka_unit_test_setup_teardown(test_read_u64_at, scratch_setup, scratch_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
