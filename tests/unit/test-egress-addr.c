/*
 * test-egress-addr.c - every refused range, in every spelling that carries
 * it, and the operator's --allow-cidr opening only what it may.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "egress/addr.h"

static enum addr_class class_of(const char *s)
{
	struct addr a;
	assert_int_equal(addr_parse(s, &a), 0);
	return addr_classify(&a);
}

static void test_classes(void **state)
{
	(void)state;
	static const struct {
		const char *addr;
		enum addr_class c;
	} cases[] = {
	    {"169.254.169.254", ADDR_LINK_LOCAL},
	    {"::ffff:169.254.169.254", ADDR_LINK_LOCAL},
	    {"64:ff9b::a9fe:a9fe", ADDR_LINK_LOCAL}, /* NAT64 of 169.254.169.254 */
	    {"2002:a9fe:a9fe::1", ADDR_LINK_LOCAL},  /* 6to4 of it */
	    {"::169.254.169.254", ADDR_LINK_LOCAL},  /* IPv4-compatible */
	    {"fe80::1", ADDR_LINK_LOCAL},
	    {"fd00:ec2::254", ADDR_ULA},
	    {"fc00::1", ADDR_ULA},
	    {"127.0.0.1", ADDR_LOOPBACK},
	    {"127.255.255.254", ADDR_LOOPBACK},
	    {"::1", ADDR_LOOPBACK},
	    {"::ffff:127.0.0.1", ADDR_LOOPBACK},
	    {"0.0.0.0", ADDR_UNSPECIFIED},
	    {"0.1.2.3", ADDR_UNSPECIFIED},
	    {"::", ADDR_UNSPECIFIED},
	    {"10.0.0.1", ADDR_PRIVATE},
	    {"172.16.0.1", ADDR_PRIVATE},
	    {"172.31.255.255", ADDR_PRIVATE},
	    {"192.168.1.1", ADDR_PRIVATE},
	    {"fec0::1", ADDR_PRIVATE},
	    {"100.64.0.1", ADDR_SHARED},
	    {"100.127.255.255", ADDR_SHARED},
	    {"224.0.0.1", ADDR_MULTICAST},
	    {"239.255.255.250", ADDR_MULTICAST},
	    {"ff02::1", ADDR_MULTICAST},
	    {"255.255.255.255", ADDR_RESERVED},
	    {"240.0.0.1", ADDR_RESERVED},
	    {"192.0.0.8", ADDR_RESERVED},
	    {"198.18.0.1", ADDR_RESERVED},
	    {"2001::1", ADDR_RESERVED}, /* Teredo */
	    {"100::1", ADDR_RESERVED},
	    /* just outside the ranges */
	    {"172.15.255.255", ADDR_PUBLIC},
	    {"172.32.0.0", ADDR_PUBLIC},
	    {"100.63.255.255", ADDR_PUBLIC},
	    {"100.128.0.0", ADDR_PUBLIC},
	    {"169.253.255.255", ADDR_PUBLIC},
	    {"198.20.0.0", ADDR_PUBLIC},
	    {"223.255.255.255", ADDR_PUBLIC},
	    {"1.1.1.1", ADDR_PUBLIC},
	    {"2606:4700::1111", ADDR_PUBLIC},
	    {"2002:0101:0101::1", ADDR_PUBLIC}, /* 6to4 of 1.1.1.1 */
	    /* documentation ranges: a test's fake internet */
	    {"198.51.100.7", ADDR_PUBLIC},
	    {"203.0.113.9", ADDR_PUBLIC},
	    {"2001:db8::1", ADDR_PUBLIC},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum addr_class c = class_of(cases[i].addr);
		if (c != cases[i].c)
			fail_msg("%s: %s, expected %s", cases[i].addr, addr_class_name(c),
				 addr_class_name(cases[i].c));
	}
}

static void test_parse_refuses_what_is_not_a_literal(void **state)
{
	(void)state;
	struct addr a;
	struct cidr c;
	const char *bad[] = {"",	   "1.2.3",	  "1.2.3.256",
			     "01.2.3.4",   "[::1]",	  "fe80::1%eth0",
			     "1.2.3.4:80", "example.com", " 1.2.3.4"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(addr_parse(bad[i], &a), 0);
	assert_int_not_equal(addr_parse(NULL, &a), 0);
	const char *bad_cidr[] = {"10.0.0.0",	 "10.0.0.0/",	"10.0.0.0/33",
				  "10.0.0.1/8",	 "fd00::/129",	"fd00::1/64",
				  "10.0.0.0/-1", "10.0.0.0/8x", "10.0.0.0/0008"};
	for (size_t i = 0; i < sizeof(bad_cidr) / sizeof(bad_cidr[0]); i++)
		if (cidr_parse(bad_cidr[i], &c) == 0)
			fail_msg("%s parsed as a network", bad_cidr[i]);
	assert_int_equal(cidr_parse("10.0.0.0/8", &c), 0);
	assert_int_equal(c.prefix, 104);
	assert_int_equal(cidr_parse("0.0.0.0/0", &c), 0);
	assert_int_equal(cidr_parse("fd00::/8", &c), 0);
}

static bool reachable(const char *s, const struct cidr *allowed, size_t n, enum addr_class *why)
{
	struct addr a;
	assert_int_equal(addr_parse(s, &a), 0);
	return addr_is_reachable(&a, allowed, n, why);
}

static void test_allow_cidr_opens_only_what_it_may(void **state)
{
	(void)state;
	struct cidr allowed[3];
	assert_int_equal(cidr_parse("10.1.0.0/16", &allowed[0]), 0);
	assert_int_equal(cidr_parse("fd12::/16", &allowed[1]), 0);
	assert_int_equal(cidr_parse("0.0.0.0/0", &allowed[2]), 0); /* everything: still not all */
	enum addr_class why;
	assert_true(reachable("1.1.1.1", NULL, 0, &why));
	assert_int_equal(why, ADDR_PUBLIC);
	assert_false(reachable("10.1.2.3", NULL, 0, &why));
	assert_int_equal(why, ADDR_PRIVATE);
	assert_true(reachable("10.1.2.3", allowed, 1, &why));
	assert_false(reachable("10.2.0.1", allowed, 1, &why));
	assert_true(reachable("::ffff:10.1.2.3", allowed, 1, &why));
	assert_true(reachable("fd12::5", allowed, 2, &why));
	assert_true(reachable("100.64.0.1", allowed, 3, &why));
	/* never opened, whatever the operator lists */
	const char *never[] = {"169.254.169.254", "127.0.0.1", "224.0.0.1",
			       "0.0.0.0",	  "240.0.0.1", "64:ff9b::a9fe:a9fe"};
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (reachable(never[i], allowed, 3, &why))
			fail_msg("%s opened by --allow-cidr", never[i]);
	assert_false(reachable("fe80::1", allowed, 3, &why));
	assert_int_equal(why, ADDR_LINK_LOCAL);
	assert_string_equal(addr_class_name(why), "link_local");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_classes),
	    cmocka_unit_test(test_parse_refuses_what_is_not_a_literal),
	    cmocka_unit_test(test_allow_cidr_opens_only_what_it_may),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
