/*
 * test-buf.c - the growable byte buffer of base/buf.h: appends keep the
 * contents NUL-terminated, the cap and out-of-memory fail stickily and
 * leave the contents alone, and buf_steal() hands the bytes over.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

/*
 * The out-of-memory case asks for far more than any allocator has. Under
 * AddressSanitizer such a request aborts unless the allocator may return
 * NULL, as libc's does.
 */
const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/* The buffer's invariants, checked after every step of a test. */
static void check_invariants(const struct buf *b)
{
	if (!b->data) {
		assert_int_equal(b->len, 0);
		return;
	}
	assert_true(b->cap >= b->len + 1);
	assert_int_equal(b->data[b->len], '\0');
	if (b->max)
		assert_true(b->len <= b->max);
}

static void test_zeroed_is_empty(void **state)
{
	(void)state;
	struct buf b = {0};
	check_invariants(&b);
	assert_null(b.data);
	assert_int_equal(buf_reserve(&b, 0), 0);
	assert_non_null(b.data);
	assert_string_equal(b.data, "");
	check_invariants(&b);
	buf_release(&b);
	assert_null(b.data);
	buf_release(NULL); /* accepted, as every destructor's empty value is */
}

static void test_append(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {0};
	assert_int_equal(buf_append(&b, "abc", 3), 0);
	check_invariants(&b);
	assert_int_equal(b.len, 3);
	assert_string_equal(b.data, "abc");
	assert_int_equal(buf_append(&b, "d\0e", 3), 0); /* binary: the NUL is kept */
	assert_int_equal(b.len, 6);
	assert_memory_equal(b.data, "abcd\0e", 7);
	assert_int_equal(buf_puts(&b, "fg"), 0);
	assert_int_equal(buf_append(&b, NULL, 0), 0);
	assert_int_equal(b.len, 8);
	assert_memory_equal(b.data, "abcd\0efg", 9);
	check_invariants(&b);
}

static void test_append_grows(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {0};
	for (int i = 0; i < 100000; i++) {
		char c = (char)('a' + i % 26);
		assert_int_equal(buf_append(&b, &c, 1), 0);
	}
	check_invariants(&b);
	assert_int_equal(b.len, 100000);
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] != (char)('a' + i % 26))
			fail_msg("byte %zu is '%c'", i, b.data[i]);
}

static void test_reserve_then_append_cannot_fail(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {.max = 64};
	assert_int_equal(buf_reserve(&b, 64), 0);
	char *before = b.data;
	char block[64];
	memset(block, 'x', sizeof(block));
	assert_int_equal(buf_append(&b, block, sizeof(block)), 0);
	assert_ptr_equal(b.data, before); /* no allocation was needed */
	assert_int_equal(b.len, 64);
	check_invariants(&b);
	assert_int_equal(buf_reserve(&b, 1), -E2BIG); /* past the cap */
}

static void test_printf(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {0};
	assert_int_equal(buf_printf(&b, "%d-%s", 42, "x"), 0);
	assert_string_equal(b.data, "42-x");
	/* longer than the stack piece buf_vprintf() tries first */
	char longer[1000];
	memset(longer, 'y', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	assert_int_equal(buf_printf(&b, "[%s]%05d", longer, 7), 0);
	check_invariants(&b);
	assert_int_equal(b.len, 4 + 1 + 999 + 1 + 5);
	assert_memory_equal(b.data, "42-x[yyy", 8);
	assert_string_equal(b.data + b.len - 6, "]00007");
	assert_int_equal(buf_printf(&b, "%s", ""), 0);
	assert_int_equal(b.len, 4 + 1 + 999 + 1 + 5);
}

static void test_cap_fails_stickily(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {.max = 8};
	assert_int_equal(buf_append(&b, "12345", 5), 0);
	assert_int_equal(buf_puts(&b, "678"), 0); /* exactly max */
	assert_int_equal(b.len, 8);
	assert_int_equal(buf_append(&b, "9", 1), -E2BIG);
	assert_int_equal(b.failed, -E2BIG);
	assert_string_equal(b.data, "12345678"); /* left as it was */
	check_invariants(&b);
	/* every later append does nothing and says why */
	assert_int_equal(buf_append(&b, "", 0), -E2BIG);
	assert_int_equal(buf_printf(&b, "%d", 1), -E2BIG);
	assert_int_equal(buf_reserve(&b, 0), -E2BIG);
	assert_string_equal(b.data, "12345678");
	char *text = (char *)"untouched";
	size_t len = 99;
	assert_int_equal(buf_steal(&b, &text, &len), -E2BIG);
	assert_string_equal(text, "untouched");
	assert_int_equal(len, 99);
	/* the buffer is left empty, with its max, and can be used again */
	assert_null(b.data);
	assert_int_equal(b.failed, 0);
	assert_int_equal(b.max, 8);
	assert_int_equal(buf_puts(&b, "again"), 0);
	assert_string_equal(b.data, "again");
}

static void test_cap_refuses_a_whole_printf(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {.max = 200};
	char longer[300];
	memset(longer, 'z', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	assert_int_equal(buf_puts(&b, "head"), 0);
	assert_int_equal(buf_printf(&b, "%s", longer), -E2BIG);
	assert_string_equal(b.data, "head");
	check_invariants(&b);
}

static void test_truncate_clears_only_the_cap(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {.max = 4};
	assert_int_equal(buf_puts(&b, "abcd"), 0);
	assert_int_equal(buf_puts(&b, "e"), -E2BIG);
	buf_truncate(&b, 2);
	assert_int_equal(b.failed, 0);
	assert_string_equal(b.data, "ab");
	assert_int_equal(buf_puts(&b, "XY"), 0);
	assert_string_equal(b.data, "abXY");
	buf_truncate(&b, 10); /* not shorter: nothing changes */
	assert_string_equal(b.data, "abXY");
	assert_int_equal(buf_fail(&b, -ENOMEM), -ENOMEM);
	buf_truncate(&b, 1);
	assert_int_equal(b.failed, -ENOMEM); /* only -E2BIG is undone */
	assert_string_equal(b.data, "a");
	check_invariants(&b);
}

static void test_out_of_memory_fails_stickily(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {0};
	assert_int_equal(buf_puts(&b, "kept"), 0);
	assert_int_equal(buf_reserve(&b, SIZE_MAX / 4), -ENOMEM);
	assert_int_equal(b.failed, -ENOMEM);
	assert_string_equal(b.data, "kept");
	check_invariants(&b);
	assert_int_equal(buf_puts(&b, "more"), -ENOMEM);
	assert_int_equal(buf_printf(&b, "%s", "more"), -ENOMEM);
	assert_string_equal(b.data, "kept");
	/* too large to ask for at all */
	struct buf huge = {0};
	assert_int_equal(buf_reserve(&huge, SIZE_MAX - 1), -E2BIG);
	assert_null(huge.data);
	/* reset starts over, keeping the allocation */
	buf_reset(&b);
	assert_int_equal(b.failed, 0);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.data, "");
	assert_int_equal(buf_puts(&b, "ok"), 0);
	assert_string_equal(b.data, "ok");
}

static void test_fail_keeps_the_first(void **state)
{
	(void)state;
	_cleanup_buf_ struct buf b = {0};
	assert_int_equal(buf_puts(&b, "x"), 0);
	assert_int_equal(buf_fail(&b, -EINVAL), -EINVAL);
	assert_int_equal(buf_fail(&b, -ENOMEM), -EINVAL);
	assert_int_equal(buf_puts(&b, "y"), -EINVAL);
	char *text = NULL;
	assert_int_equal(buf_steal(&b, &text, NULL), -EINVAL);
	assert_null(text);
	assert_null(b.data);
}

static void test_steal(void **state)
{
	(void)state;
	struct buf b = {.max = 100};
	assert_int_equal(buf_printf(&b, "%s=%d", "n", 5), 0);
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(buf_steal(&b, &text, &len), 0);
	assert_string_equal(text, "n=5");
	assert_int_equal(len, 3);
	/* the buffer no longer owns it, and starts again empty */
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_int_equal(b.max, 100);
	free(text);

	/* an empty buffer hands over "", never NULL */
	assert_int_equal(buf_steal(&b, &text, &len), 0);
	assert_non_null(text);
	assert_string_equal(text, "");
	assert_int_equal(len, 0);
	free(text);

	/* ret_len may be NULL */
	assert_int_equal(buf_puts(&b, "abc"), 0);
	assert_int_equal(buf_steal(&b, &text, NULL), 0);
	assert_string_equal(text, "abc");
	free(text);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_zeroed_is_empty),
	    cmocka_unit_test(test_append),
	    cmocka_unit_test(test_append_grows),
	    cmocka_unit_test(test_reserve_then_append_cannot_fail),
	    cmocka_unit_test(test_printf),
	    cmocka_unit_test(test_cap_fails_stickily),
	    cmocka_unit_test(test_cap_refuses_a_whole_printf),
	    cmocka_unit_test(test_truncate_clears_only_the_cap),
	    cmocka_unit_test(test_out_of_memory_fails_stickily),
	    cmocka_unit_test(test_fail_keeps_the_first),
	    cmocka_unit_test(test_steal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
