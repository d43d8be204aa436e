/*
 * test-auth-key.c - API keys (auth/key.h): new keys and their text, the
 * round trip through parsing, the hash of the secret, strict refusals
 * whose messages quote nothing of the text, the Authorization header,
 * ids, and the hash of a legacy token.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "auth/key.h"

static const char base32[] = "0123456789abcdefghjkmnpqrstvwxyz";

/* A fixed well-formed key, so that refusals and their messages are the same every run. */
#define GOOD_ID	    "0123456789ab"
#define GOOD_SECRET "zyxwvtsrqpnmkjhgfedcba9876543210zyxwvtsrqpnmkjhgfedc"
#define GOOD_KEY    AUTH_KEY_PREFIX GOOD_ID "_" GOOD_SECRET

static bool is_base32(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(base32, s[i]))
			return false;
	return true;
}

/* Does msg hold any 5 characters in a row of text? */
static bool quotes(const char *msg, const char *text)
{
	size_t len = strlen(text);
	for (size_t i = 0; i + 5 <= len; i++) {
		char w[6];
		memcpy(w, text + i, 5);
		w[5] = '\0';
		if (strstr(msg, w))
			return true;
	}
	return false;
}

/* ---- new keys ----------------------------------------------------------- */

static void test_new_key_has_its_form(void **state)
{
	(void)state;
	char text[AUTH_KEY_TEXT_MAX];
	struct auth_key key;
	struct error err = {0};
	assert_int_equal(auth_key_new(text, &key, &err), 0);
	assert_int_equal(strlen(text), AUTH_KEY_TEXT_LEN);
	assert_int_equal(AUTH_KEY_TEXT_LEN, 4 + 12 + 1 + 52);
	assert_memory_equal(text, "abx_", 4);
	assert_true(is_base32(text + 4, AUTH_KEY_ID_LEN));
	assert_int_equal(text[4 + AUTH_KEY_ID_LEN], '_');
	assert_true(is_base32(text + 4 + AUTH_KEY_ID_LEN + 1, AUTH_KEY_SECRET_LEN));
	assert_int_equal(strlen(key.id), AUTH_KEY_ID_LEN);
	assert_memory_equal(key.id, text + 4, AUTH_KEY_ID_LEN);
	assert_true(auth_key_id_is_valid(key.id));
	assert_false(error_is_set(&err));
}

static void test_new_key_parses_back(void **state)
{
	(void)state;
	for (int i = 0; i < 50; i++) {
		char text[AUTH_KEY_TEXT_MAX];
		struct auth_key made, parsed;
		assert_int_equal(auth_key_new(text, &made, NULL), 0);
		assert_int_equal(auth_key_parse(text, &parsed, NULL), 0);
		assert_string_equal(parsed.id, made.id);
		assert_memory_equal(parsed.hash, made.hash, AUTH_KEY_HASH_SIZE);
		assert_true(auth_hash_equal(parsed.hash, made.hash));
	}
}

static void test_new_keys_differ(void **state)
{
	(void)state;
	char a[AUTH_KEY_TEXT_MAX], b[AUTH_KEY_TEXT_MAX];
	struct auth_key ka, kb;
	assert_int_equal(auth_key_new(a, &ka, NULL), 0);
	assert_int_equal(auth_key_new(b, &kb, NULL), 0);
	assert_string_not_equal(ka.id, kb.id);
	const char *sa = a + AUTH_KEY_TEXT_LEN - AUTH_KEY_SECRET_LEN;
	const char *sb = b + AUTH_KEY_TEXT_LEN - AUTH_KEY_SECRET_LEN;
	assert_string_not_equal(sa, sb);
	assert_false(auth_hash_equal(ka.hash, kb.hash));
}

/* ---- the hash of the secret --------------------------------------------- */

static void test_hash_is_of_the_secret(void **state)
{
	(void)state;
	struct auth_key k1, k2;
	assert_int_equal(auth_key_parse(GOOD_KEY, &k1, NULL), 0);
	assert_string_equal(k1.id, GOOD_ID);

	/* the same secret under another id: the same hash */
	assert_int_equal(auth_key_parse("abx_zzzzzzzzzzzz_" GOOD_SECRET, &k2, NULL), 0);
	assert_string_equal(k2.id, "zzzzzzzzzzzz");
	assert_true(auth_hash_equal(k1.hash, k2.hash));

	/* one character of the secret changed, at either end or between: another */
	size_t at[] = {0, 25, AUTH_KEY_SECRET_LEN - 1};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		char text[] = GOOD_KEY;
		char *c = text + AUTH_KEY_TEXT_LEN - AUTH_KEY_SECRET_LEN + at[i];
		*c = *c == '0' ? '1' : '0';
		assert_int_equal(auth_key_parse(text, &k2, NULL), 0);
		assert_string_equal(k2.id, GOOD_ID);
		assert_false(auth_hash_equal(k1.hash, k2.hash));
	}

	/* it is the SHA-256 of the secret's characters */
	uint8_t h[AUTH_KEY_HASH_SIZE];
	auth_token_hash(GOOD_SECRET, h);
	assert_true(auth_hash_equal(k1.hash, h));
}

static void test_hash_equal(void **state)
{
	(void)state;
	uint8_t a[AUTH_KEY_HASH_SIZE], b[AUTH_KEY_HASH_SIZE];
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = b[i] = (uint8_t)(i * 37 + 1);
	assert_true(auth_hash_equal(a, b));
	for (size_t i = 0; i < sizeof(a); i++) {
		b[i] ^= 0x80;
		assert_false(auth_hash_equal(a, b));
		b[i] ^= 0x80;
	}
	assert_true(auth_hash_equal(a, b));
}

/* ---- refusals ----------------------------------------------------------- */

static void test_malformed_keys_fail(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",
	    GOOD_ID "_" GOOD_SECRET,		 /* no prefix */
	    "ABX_" GOOD_ID "_" GOOD_SECRET,	 /* the prefix's case */
	    "Abx_" GOOD_ID "_" GOOD_SECRET,	 /* the prefix's case */
	    "abx-" GOOD_ID "_" GOOD_SECRET,	 /* the prefix's separator */
	    "abx_0123456789a_" GOOD_SECRET,	 /* id too short */
	    "abx_0123456789abc_" GOOD_SECRET,	 /* id too long */
	    "abx__" GOOD_SECRET,		 /* no id */
	    "abx_0123456789aB_" GOOD_SECRET,	 /* upper case in the id */
	    "abx_0123i56789ab_" GOOD_SECRET,	 /* i is not of the alphabet */
	    "abx_01234-6789ab_" GOOD_SECRET,	 /* nor is - */
	    "abx_01234 6789ab_" GOOD_SECRET,	 /* a space in the id */
	    "abx_" GOOD_ID GOOD_SECRET,		 /* no '_' */
	    "abx_" GOOD_ID "-" GOOD_SECRET,	 /* another separator */
	    "abx_" GOOD_ID,			 /* no secret */
	    "abx_" GOOD_ID "_",			 /* an empty secret */
	    "abx_" GOOD_ID "_" GOOD_SECRET "x",	 /* secret too long */
	    "abx_" GOOD_ID "_" GOOD_SECRET " ",	 /* trailing space */
	    "abx_" GOOD_ID "_" GOOD_SECRET "\n", /* trailing newline */
	    "abx_" GOOD_ID "_" GOOD_SECRET "_",	 /* trailing garbage */
	    "abx_" GOOD_ID "_" GOOD_SECRET "!!", /* trailing garbage */
	    " abx_" GOOD_ID "_" GOOD_SECRET,	 /* leading space */
	    "abx_" GOOD_ID "_zyxwvtsrqpnmkjhgfedcba9876543210zyxwvtsrqpnmkjhgfed",  /* short */
	    "abx_" GOOD_ID "_zyxwvtsrqpnmkjhgfedcbo9876543210zyxwvtsrqpnmkjhgfedc", /* o */
	    "abx_" GOOD_ID "_zyxwvtsrqpnmkjhgfedcbA9876543210zyxwvtsrqpnmkjhgfedc", /* A */
	    "abx_" GOOD_ID "_zyxwvtsrqpnmkjhgfedcb+9876543210zyxwvtsrqpnmkjhgfedc", /* + */
	    "abx_" GOOD_ID "_zyxwvtsrqpnmkjhg edcba9876543210zyxwvtsrqpnmkjhgfedc", /* space */
	    "abx_" GOOD_ID "_zyxwvtsrqpnmkjhgfedcba9876543210zyxwvtsrqpnmkjhgfed\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct auth_key key = {.id = "untouched"};
		struct error err = {0};
		if (auth_key_parse(bad[i], &key, &err) != -EINVAL)
			fail_msg("bad[%zu] '%s' was accepted", i, bad[i]);
		assert_int_equal(err.code, EINVAL);
		assert_true(strlen(err.msg) > 0);
		if (quotes(err.msg, bad[i]))
			fail_msg("bad[%zu]: the message '%s' quotes the text", i, err.msg);
		assert_string_equal(key.id, "untouched"); /* written only on success */
	}
	struct error err = {0};
	struct auth_key key;
	assert_int_equal(auth_key_parse(NULL, &key, &err), -EINVAL);
	assert_int_equal(err.code, EINVAL);
	/* an error struct is optional */
	assert_int_equal(auth_key_parse("abx_", &key, NULL), -EINVAL);
}

static void test_messages_say_what_is_wrong(void **state)
{
	(void)state;
	static const struct {
		const char *text, *says;
	} cases[] = {
	    {"", "none given"},
	    {"xyz_" GOOD_ID "_" GOOD_SECRET, "begin"},
	    {"abx_0123456789a_" GOOD_SECRET, "id is shorter"},
	    {"abx_0123456789abc_" GOOD_SECRET, "after the id"},
	    {"abx_01234 6789ab_" GOOD_SECRET, "id has a character"},
	    {"abx_" GOOD_ID GOOD_SECRET, "after the id"},
	    {"abx_" GOOD_ID "_abc", "secret is shorter"},
	    {"abx_" GOOD_ID "_zyxwvtsrqpnmkjhgfedcbo9876543210zyxwvtsrqpnmkjhgfedc",
	     "secret has a character"},
	    {"abx_" GOOD_ID "_" GOOD_SECRET "0", "follows the secret"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct auth_key key;
		struct error err = {0};
		assert_int_equal(auth_key_parse(cases[i].text, &key, &err), -EINVAL);
		if (!strstr(err.msg, cases[i].says))
			fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, cases[i].says);
	}
}

/* ---- the Authorization header ------------------------------------------- */

static void test_bearer(void **state)
{
	(void)state;
	struct auth_key want, key;
	assert_int_equal(auth_key_parse(GOOD_KEY, &want, NULL), 0);

	static const char *const good[] = {"Bearer " GOOD_KEY, "bearer " GOOD_KEY,
					   "BEARER " GOOD_KEY};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		memset(&key, 0, sizeof(key));
		assert_int_equal(auth_bearer_parse(good[i], &key, NULL), 0);
		assert_string_equal(key.id, want.id);
		assert_true(auth_hash_equal(key.hash, want.hash));
	}

	static const char *const bad[] = {
	    GOOD_KEY,			  /* no scheme */
	    "Bearer" GOOD_KEY,		  /* no space */
	    "Bearer",			  /* nothing else */
	    "Bearer ",			  /* no key */
	    "Bearer  " GOOD_KEY,	  /* two spaces */
	    " Bearer " GOOD_KEY,	  /* a leading space */
	    "Bearer\t" GOOD_KEY,	  /* a tab */
	    "Bearer " GOOD_KEY " ",	  /* a trailing space */
	    "Basic " GOOD_KEY,		  /* another scheme */
	    "Bearerx " GOOD_KEY,	  /* another scheme */
	    "Bearer sekrit-legacy-token", /* not of the abx_ form */
	    "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct error err = {0};
		if (auth_bearer_parse(bad[i], &key, &err) != -EINVAL)
			fail_msg("bad[%zu] '%s' was accepted", i, bad[i]);
		assert_int_equal(err.code, EINVAL);
		/* the scheme may be named; nothing of the key or token may */
		if (quotes(err.msg, GOOD_ID "_" GOOD_SECRET) || strstr(err.msg, "sekrit"))
			fail_msg("bad[%zu]: the message '%s' quotes the text", i, err.msg);
	}
	struct error err = {0};
	assert_int_equal(auth_bearer_parse(NULL, &key, &err), -EINVAL);
	assert_int_equal(err.code, EINVAL);
}

/* ---- ids and legacy tokens ---------------------------------------------- */

static void test_id_is_valid(void **state)
{
	(void)state;
	assert_true(auth_key_id_is_valid(GOOD_ID));
	assert_true(auth_key_id_is_valid("zzzzzzzzzzzz"));
	assert_true(auth_key_id_is_valid("000000000000"));
	assert_false(auth_key_id_is_valid(NULL));
	assert_false(auth_key_id_is_valid(""));
	assert_false(auth_key_id_is_valid("0123456789a"));   /* 11 */
	assert_false(auth_key_id_is_valid("0123456789abc")); /* 13 */
	assert_false(auth_key_id_is_valid("0123456789aB"));  /* upper case */
	assert_false(auth_key_id_is_valid("0123456789al"));  /* l */
	assert_false(auth_key_id_is_valid("0123456789au"));  /* u */
	assert_false(auth_key_id_is_valid("01234567 9ab"));  /* a space */
	assert_false(auth_key_id_is_valid("0123456789a/"));  /* a slash */
	assert_false(auth_key_id_is_valid("0123456789ab\n"));
	assert_false(auth_key_id_is_valid("abx_0123456789ab"));
}

static void test_token_hash(void **state)
{
	(void)state;
	uint8_t a[AUTH_KEY_HASH_SIZE], b[AUTH_KEY_HASH_SIZE], c[AUTH_KEY_HASH_SIZE];
	auth_token_hash("an-old-state-dir-token", a);
	auth_token_hash("an-old-state-dir-token", b);
	auth_token_hash("an-old-state-dir-tokeN", c);
	assert_true(auth_hash_equal(a, b));
	assert_false(auth_hash_equal(a, c));

	/* SHA-256 itself (FIPS 180-2's "abc") */
	static const uint8_t abc[AUTH_KEY_HASH_SIZE] = {
	    0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
	    0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
	    0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
	auth_token_hash("abc", a);
	assert_memory_equal(a, abc, sizeof(abc));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_key_has_its_form),
	    cmocka_unit_test(test_new_key_parses_back),
	    cmocka_unit_test(test_new_keys_differ),
	    cmocka_unit_test(test_hash_is_of_the_secret),
	    cmocka_unit_test(test_hash_equal),
	    cmocka_unit_test(test_malformed_keys_fail),
	    cmocka_unit_test(test_messages_say_what_is_wrong),
	    cmocka_unit_test(test_bearer),
	    cmocka_unit_test(test_id_is_valid),
	    cmocka_unit_test(test_token_hash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
