/*
 * test-base64.c - base64 (base/base64.h): RFC 4648's test vectors, every
 * byte value both ways, and the strictness of decoding.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "base/base64.h"

static void test_rfc4648_vectors(void **state)
{
	(void)state;
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const coded[] = {"",		"Zg==",	    "Zm8=",    "Zm9v",
					    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		struct buf b = {0};
		assert_int_equal(base64_encode(&b, plain[i], strlen(plain[i])), 0);
		assert_int_equal(b.len, strlen(coded[i]));
		assert_int_equal(base64_encoded_len(strlen(plain[i])), strlen(coded[i]));
		if (b.len)
			assert_string_equal(b.data, coded[i]);
		buf_release(&b);
		assert_int_equal(base64_decode(&b, coded[i], strlen(coded[i])), 0);
		assert_int_equal(b.len, strlen(plain[i]));
		if (b.len)
			assert_memory_equal(b.data, plain[i], b.len);
		buf_release(&b);
	}
}

static void test_every_byte_round_trips(void **state)
{
	(void)state;
	unsigned char bytes[256 * 3 + 2];
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(i * 7 + 3);
	for (size_t n = 0; n <= sizeof(bytes); n += n < 8 ? 1 : 97) {
		struct buf coded = {0}, back = {0};
		assert_int_equal(base64_encode(&coded, bytes, n), 0);
		assert_int_equal(base64_decode(&back, coded.data ? coded.data : "", coded.len), 0);
		assert_int_equal(back.len, n);
		if (n)
			assert_memory_equal(back.data, bytes, n);
		buf_release(&coded);
		buf_release(&back);
	}
	/* NUL and high bytes, the reason this exists */
	struct buf b = {0};
	assert_int_equal(base64_encode(&b, "a\0b\xff", 4), 0);
	assert_string_equal(b.data, "YQBi/w==");
	buf_release(&b);
}

static void test_decoding_is_strict(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "Zg=",	/* not a multiple of 4 */
	    "Zg==Zg==", /* padding in the middle */
	    "Z===",	/* too much padding */
	    "Zh==",	/* unused bits set */
	    "Zm9=",	/* unused bits set */
	    "Zm9v\n",	/* a newline */
	    "Zm 9",	/* a space */
	    "Zm-_",	/* the URL alphabet */
	    "=Zg=",	/* padding first */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct buf b = {0};
		assert_int_equal(buf_puts(&b, "kept"), 0);
		if (base64_decode(&b, bad[i], strlen(bad[i])) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
		assert_int_equal(b.len, 4); /* left as it was */
		assert_string_equal(b.data, "kept");
		buf_release(&b);
	}
}

static void test_the_cap_holds(void **state)
{
	(void)state;
	struct buf b = {.max = 7};
	assert_int_equal(base64_encode(&b, "foobar", 6), -E2BIG);
	assert_int_equal(b.failed, -E2BIG);
	buf_release(&b);
	struct buf d = {.max = 5};
	assert_int_equal(base64_decode(&d, "Zm9vYmFy", 8), -E2BIG);
	buf_release(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rfc4648_vectors),
	    cmocka_unit_test(test_every_byte_round_trips),
	    cmocka_unit_test(test_decoding_is_strict),
	    cmocka_unit_test(test_the_cap_holds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
