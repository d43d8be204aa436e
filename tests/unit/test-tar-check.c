/*
 * test-tar-check.c - what `agentbox cp -r` lets through from agentboxd's
 * tar to the host's tar (cli/tar-check.h): regular files, directories,
 * pax headers and long names pass, whole or a byte at a time; links,
 * devices, escaping names, a pax size and a bad checksum are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/tar-check.h"

/* A tar being built in memory. */
struct tb {
	char data[16384];
	size_t len;
};

/* A ustar header of name, type and size, its checksum right, then size bytes of data. */
static void add(struct tb *t, const char *name, char type, const char *body, size_t size)
{
	unsigned char *h = (unsigned char *)t->data + t->len;
	memset(h, 0, 512);
	memcpy(h, name, strlen(name) < 100 ? strlen(name) : 100);
	memcpy(h + 100, "0000644", 7);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)size);
	h[156] = (unsigned char)type;
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	t->len += 512;
	memset(t->data + t->len, 0, (size + 511) / 512 * 512);
	if (body)
		memcpy(t->data + t->len, body, size);
	t->len += (size + 511) / 512 * 512;
}

static void end(struct tb *t)
{
	memset(t->data + t->len, 0, 1024);
	t->len += 1024;
}

/* Feed t whole (step 0) or step bytes at a time: 0 or the first failure. */
static int feed(const struct tb *t, size_t step, struct tar_check *c, struct error *err)
{
	tar_check_init(c);
	if (!step)
		return tar_check_feed(c, t->data, t->len, err);
	for (size_t i = 0; i < t->len; i += step) {
		size_t n = t->len - i < step ? t->len - i : step;
		int r = tar_check_feed(c, t->data + i, n, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static struct tar_check check;

static void test_files_directories_pax_and_long_names_pass(void **state)
{
	(void)state;
	static struct tb t;
	t.len = 0;
	add(&t, "d/", '5', NULL, 0);
	add(&t, "d/a.txt", '0', "hello", 5);
	static const char pax[] = "20 path=d/long/name\n30 mtime=1796225288.171010038\n";
	add(&t, "d/PaxHeaders/x", 'x', pax, strlen(pax));
	add(&t, "d/long/nam", '0', "x", 1);
	add(&t, "././@LongLink", 'L', "d/gnu-long-name", 16);
	add(&t, "d/gnu-long-na", '0', NULL, 0);
	add(&t, "d/zero", '\0', NULL, 0);
	end(&t);
	static const size_t steps[] = {0, 1, 7, 511, 512, 513};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct error err = {0};
		assert_int_equal(feed(&t, steps[i], &check, &err), 0);
		assert_true(tar_check_done(&check));
	}
}

static void test_a_tar_cut_short_is_not_done(void **state)
{
	(void)state;
	static struct tb t;
	t.len = 0;
	add(&t, "d/a", '0', "abc", 3);
	struct error err = {0};
	assert_int_equal(feed(&t, 0, &check, &err), 0);
	assert_false(tar_check_done(&check));
}

static void refused(const char *name, char type, const char *body, size_t size, const char *why)
{
	static struct tb t;
	t.len = 0;
	add(&t, "d/", '5', NULL, 0);
	add(&t, name, type, body, size);
	end(&t);
	for (size_t step = 0; step <= 1; step++) {
		struct error err = {0};
		assert_int_equal(feed(&t, step, &check, &err), -EPROTO);
		if (!strstr(err.msg, why))
			fail_msg("%s: '%s' does not say '%s'", name, err.msg, why);
	}
}

static void test_links_devices_and_escapes_are_refused(void **state)
{
	(void)state;
	refused("d/ln", '2', NULL, 0, "a symlink: 'd/ln'");
	refused("d/hl", '1', NULL, 0, "a hard link: 'd/hl'");
	refused("d/chr", '3', NULL, 0, "not a regular file or directory");
	refused("d/fifo", '6', NULL, 0, "not a regular file or directory");
	refused("g", 'g', "9 a=b\n", 6, "not a regular file or directory");
	refused("../x", '0', NULL, 0, "'..'");
	refused("d/../../x", '0', NULL, 0, "'..'");
	refused("/etc/passwd", '0', NULL, 0, "absolute");
	refused("d/..", '5', NULL, 0, "'..'");
	refused("x", 'x', "14 path=../up\n", 14, "'..'");
	refused("x", 'x', "15 path=/etc/x\n", 15, "absolute");
	refused("x", 'x', "12 size=100\n", 12, "pax header it does not take");
	refused("x", 'x', "17 linkpath=/etc\n", 17, "pax header it does not take");
	refused("x", 'x', "99 path=x\n", 10, "malformed pax header");
	refused("././@LongLink", 'L', "/etc/shadow", 12, "absolute");
}

static void test_a_bad_checksum_is_refused(void **state)
{
	(void)state;
	static struct tb t;
	t.len = 0;
	add(&t, "d/a", '0', "abc", 3);
	t.data[0] = 'e'; /* after the checksum was computed */
	end(&t);
	struct error err = {0};
	assert_int_equal(feed(&t, 0, &check, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "not a tar's"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_files_directories_pax_and_long_names_pass),
	    cmocka_unit_test(test_a_tar_cut_short_is_not_done),
	    cmocka_unit_test(test_links_devices_and_escapes_are_refused),
	    cmocka_unit_test(test_a_bad_checksum_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
