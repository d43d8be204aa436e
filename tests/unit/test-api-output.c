/*
 * test-api-output.c - command output in the API's JSON (api/output.h):
 * text stays text, anything else is base64, and a cut never splits a
 * character.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/output.h"

static void test_cut_keeps_whole_characters(void **state)
{
	(void)state;
	assert_int_equal(output_cut("abc", 3), 3);
	assert_int_equal(output_cut("a\xc3\xa9", 3), 3);	 /* é whole */
	assert_int_equal(output_cut("a\xc3", 2), 1);		 /* é cut after its lead */
	assert_int_equal(output_cut("a\xe2\x82", 3), 1);	 /* € cut after two */
	assert_int_equal(output_cut("a\xe2\x82\xac", 4), 4);	 /* € whole */
	assert_int_equal(output_cut("a\xf0\x9f\x98", 4), 1);	 /* an emoji cut */
	assert_int_equal(output_cut("a\xf0\x9f\x98\x80", 5), 5); /* whole */
	assert_int_equal(output_cut("\x80\x80\x80\x80", 4), 4);	 /* not UTF-8: as it is */
	assert_int_equal(output_cut("", 0), 0);
}

static void test_text_or_base64(void **state)
{
	(void)state;
	assert_true(output_is_text("h\xc3\xa9llo\n", 7));
	assert_false(output_is_text("a\0b", 3));
	assert_false(output_is_text("\xff", 1));
	assert_false(output_is_text("\xc3", 1));
	assert_false(output_is_text("\xed\xa0\x80", 3)); /* a surrogate */

	struct buf b = {0};
	bool base64 = true;
	output_put_json(&b, "h\xc3\xa9", 3, &base64);
	assert_false(base64);
	assert_string_equal(b.data, "\"h\xc3\xa9\"");
	buf_release(&b);
	output_put_json(&b, "a\0b\xff", 4, &base64);
	assert_true(base64);
	assert_string_equal(b.data, "\"YQBi/w==\"");
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cut_keeps_whole_characters),
	    cmocka_unit_test(test_text_or_base64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
