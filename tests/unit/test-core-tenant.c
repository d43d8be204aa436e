/*
 * test-core-tenant.c - tenants' names (every rule, at and past the
 * limit) and keys' roles (names, parsing).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "core/tenant.h"

/* ---- names ------------------------------------------------------------- */

static void test_names_valid(void **state)
{
	(void)state;
	static const char *const good[] = {
	    "default", "a", "0", "acme", "acme-corp", "a-b-c", "a--b", "team-42", "42", "9-a",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!tenant_name_is_valid(good[i]))
			fail_msg("'%s' was refused as a tenant's name", good[i]);
	assert_true(tenant_name_is_valid(TENANT_DEFAULT));
}

static void test_names_invalid(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",	     "-",   "-a",  "a-",  "Acme",     "ACME", "acme corp", " acme",
	    "acme ", "a_b", "a.b", "a/b", "../a",     "a\n",  "\tA",	   "caf\xc3\xa9",
	    "a\\b",  "a:b", "a@b", "a+b", "acme\x7f", "\x80", "a%2f",	   "a*",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tenant_name_is_valid(bad[i]))
			fail_msg("'%s' was taken for a tenant's name", bad[i]);
	assert_false(tenant_name_is_valid(NULL));
}

static void test_names_length(void **state)
{
	(void)state;
	char name[TENANT_NAME_SIZE + 2];
	memset(name, 'a', sizeof(name));
	name[TENANT_NAME_MAX] = '\0'; /* exactly the most */
	assert_true(tenant_name_is_valid(name));
	name[TENANT_NAME_MAX - 1] = '-'; /* the most, but ending in '-' */
	assert_false(tenant_name_is_valid(name));
	name[TENANT_NAME_MAX - 1] = '9';
	name[TENANT_NAME_MAX] = 'a'; /* one past */
	name[TENANT_NAME_MAX + 1] = '\0';
	assert_false(tenant_name_is_valid(name));
	name[TENANT_NAME_MAX + 1] = 'a'; /* two past */
	name[TENANT_NAME_MAX + 2] = '\0';
	assert_false(tenant_name_is_valid(name));
	assert_int_equal(TENANT_NAME_SIZE, TENANT_NAME_MAX + 1);
}

/* ---- roles ------------------------------------------------------------- */

static void test_roles_round_trip(void **state)
{
	(void)state;
	assert_string_equal(key_role_name(KEY_ROLE_MEMBER), "member");
	assert_string_equal(key_role_name(KEY_ROLE_ADMIN), "admin");
	assert_int_equal(KEY_ROLE_MEMBER, 0); /* a zeroed record is the least role */
	for (int r = 0; r < KEY_ROLE_COUNT; r++) {
		enum key_role back = KEY_ROLE_COUNT;
		assert_int_equal(key_role_parse(key_role_name((enum key_role)r), &back), 0);
		assert_int_equal(back, r);
	}
	assert_null(key_role_name(KEY_ROLE_COUNT));
	assert_null(key_role_name((enum key_role) - 1));
}

static void test_roles_unknown(void **state)
{
	(void)state;
	static const char *const bad[] = {"",	      "Admin", "ADMIN", "admin ", " member",
					  "member\n", "root",  "owner", "adm",	  "admins"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum key_role r = KEY_ROLE_ADMIN;
		assert_int_equal(key_role_parse(bad[i], &r), -EINVAL);
		assert_int_equal(r, KEY_ROLE_ADMIN); /* left alone */
		r = KEY_ROLE_MEMBER;
		assert_int_equal(key_role_parse(bad[i], &r), -EINVAL);
		assert_int_equal(r, KEY_ROLE_MEMBER);
	}
	enum key_role r = KEY_ROLE_MEMBER;
	assert_int_equal(key_role_parse(NULL, &r), -EINVAL);
}

static void test_limits(void **state)
{
	(void)state;
	/* the sizes auth/key.h's keys have (checked against it where both are seen: api/auth.c) */
	assert_int_equal(KEY_ID_SIZE, 13);
	assert_int_equal(KEY_HASH_SIZE, 32);
	assert_true(KEY_LABEL_MAX > 0);
	assert_true(TENANT_QUOTAS_MAX >= 2); /* "{}" fits */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_valid),	  cmocka_unit_test(test_names_invalid),
	    cmocka_unit_test(test_names_length),  cmocka_unit_test(test_roles_round_trip),
	    cmocka_unit_test(test_roles_unknown), cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
