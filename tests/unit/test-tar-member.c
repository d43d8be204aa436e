/*
 * test-tar-member.c - the tar member-name check the API applies to every
 * tar a client sends (api/tar-member.h): what passes, canonical, and
 * what is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/tar-member.h"

static void test_relative_names_pass_canonical(void **state)
{
	(void)state;
	static const char *const in[] = {"a",	    "./a", "././a/b", "a/b/",	  "dir/",
					 "a b/c d", "..a", "a..",     ".hidden/x"};
	static const char *const out[] = {"a",	     "a",   "a/b", "a/b",      "dir",
					  "a b/c d", "..a", "a..", ".hidden/x"};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		char buf[64];
		const char *n = api_tar_member_name(in[i], buf, sizeof(buf));
		assert_non_null(n);
		assert_string_equal(n, out[i]);
	}
}

static void test_escapes_and_odd_names_are_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {"..",	   "../x",   "a/../../x", "a/..", "/etc/passwd",
					  "/",	   "",	     ".",	  "./",	  "a//b",
					  "a/./b", "./../x", ".//x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char buf[64];
		assert_null(api_tar_member_name(bad[i], buf, sizeof(buf)));
	}
}

static void test_long_components_and_names_are_refused(void **state)
{
	(void)state;
	char name[API_TAR_COMPONENT_MAX + 8], buf[512];
	memset(name, 'a', API_TAR_COMPONENT_MAX);
	name[API_TAR_COMPONENT_MAX] = '\0';
	assert_non_null(api_tar_member_name(name, buf, sizeof(buf)));
	name[API_TAR_COMPONENT_MAX] = 'a';
	name[API_TAR_COMPONENT_MAX + 1] = '\0';
	assert_null(api_tar_member_name(name, buf, sizeof(buf)));
	/* a name that does not fit the caller's buffer */
	assert_null(api_tar_member_name("abcdefgh", buf, 8));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_relative_names_pass_canonical),
	    cmocka_unit_test(test_escapes_and_odd_names_are_refused),
	    cmocka_unit_test(test_long_components_and_names_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
