/*
 * test-egress-policy.c - the "network" field and --network: every name the
 * policy takes and every one it refuses, each refusal with the field it
 * names; wildcards, ports, case and trailing dots in matching; the limits
 * at their edges; the canonical JSON and its round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "egress/policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a failed parse must leave in *ret: it is written only on success. */
static const struct egress_policy untouched = {.mode = EGRESS_OPEN, .rate_mbit = 77};

static json_t *load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v)
		fail_msg("test JSON %s: %s", text, jerr.text);
	return v;
}

static void assert_untouched(const struct egress_policy *p)
{
	assert_int_equal(p->mode, untouched.mode);
	assert_null(p->rules);
	assert_int_equal(p->nrules, 0);
	assert_int_equal(p->rate_mbit, untouched.rate_mbit);
}

static void assert_msg_has(const struct error *err, const char *needle, const char *input)
{
	if (!strstr(err->msg, needle))
		fail_msg("%s: message \"%s\" lacks \"%s\"", input, err->msg, needle);
	if (strchr(err->msg, '\n'))
		fail_msg("%s: message \"%s\" is not one line", input, err->msg);
}

/* text, the value of "network", is refused with a message holding needle. */
static void json_refused(const char *text, const char *needle)
{
	json_t *v = load(text);
	struct egress_policy p = untouched;
	struct error err = {0};
	int r = egress_policy_from_json(v, &p, &err);
	if (r != -EINVAL)
		fail_msg("%s: %d, expected -EINVAL", text, r);
	assert_int_equal(err.code, EINVAL);
	assert_msg_has(&err, needle, text);
	assert_untouched(&p);
	json_decref(v);
}

static void json_ok(const char *text, struct egress_policy *ret)
{
	json_t *v = load(text);
	struct error err = {0};
	int r = egress_policy_from_json(v, ret, &err);
	if (r != 0)
		fail_msg("%s: refused (%d): %s", text, r, err.msg);
	json_decref(v);
}

/* {"mode":"allow","allow":[entry]} is refused with needle. */
static void entry_refused(const char *entry, const char *needle)
{
	json_t *v = json_pack("{s:s, s:[s]}", "mode", "allow", "allow", entry);
	assert_non_null(v);
	struct egress_policy p = untouched;
	struct error err = {0};
	int r = egress_policy_from_json(v, &p, &err);
	if (r != -EINVAL)
		fail_msg("'%s': %d, expected -EINVAL", entry, r);
	assert_msg_has(&err, needle, entry);
	assert_untouched(&p);
	json_decref(v);
}

/* The canonical entry string that entry becomes, through the JSON. */
static void entry_becomes(const char *entry, const char *canonical)
{
	json_t *v = json_pack("{s:s, s:[s]}", "mode", "allow", "allow", entry);
	assert_non_null(v);
	struct egress_policy p;
	struct error err = {0};
	if (egress_policy_from_json(v, &p, &err) != 0)
		fail_msg("'%s' refused: %s", entry, err.msg);
	assert_int_equal(p.nrules, 1);
	json_t *out = egress_policy_to_json(&p);
	assert_non_null(out);
	const char *got = json_string_value(json_array_get(json_object_get(out, "allow"), 0));
	assert_non_null(got);
	if (strcmp(got, canonical) != 0)
		fail_msg("'%s' became '%s', expected '%s'", entry, got, canonical);
	json_decref(out);
	json_decref(v);
	egress_policy_release(&p);
}

static void cli_refused(const char *arg, const char *needle)
{
	struct egress_policy p = untouched;
	struct error err = {0};
	int r = egress_policy_parse_cli(arg, &p, &err);
	if (r != -EINVAL)
		fail_msg("--network %s: %d, expected -EINVAL", arg ? arg : "(null)", r);
	if (strncmp(err.msg, "--network: ", 11) != 0)
		fail_msg("--network %s: message \"%s\" does not start with --network: ", arg,
			 err.msg);
	assert_msg_has(&err, needle, arg ? arg : "(null)");
	assert_untouched(&p);
}

/* "<label of n x c>" */
static void label(char *out, size_t n, char c)
{
	memset(out, c, n);
	out[n] = '\0';
}

/* A name of exactly len characters, of 63-character labels and a shorter last one. */
static void name_of_length(char *out, size_t len)
{
	size_t i = 0;
	while (len - i > 64) {
		memset(out + i, 'a', 63);
		out[i + 63] = '.';
		i += 64;
	}
	memset(out + i, 'b', len - i);
	out[len] = '\0';
}

static void test_mode_names(void **state)
{
	(void)state;
	assert_string_equal(egress_mode_name(EGRESS_NONE), "none");
	assert_string_equal(egress_mode_name(EGRESS_ALLOW), "allow");
	assert_string_equal(egress_mode_name(EGRESS_OPEN), "open");
	assert_string_equal(egress_mode_name((enum egress_mode)42), "unknown");
	assert_int_equal(EGRESS_NONE, 0);
}

static void test_absent_null_and_modes(void **state)
{
	(void)state;
	struct egress_policy p = untouched;
	struct error err = {0};
	assert_int_equal(egress_policy_from_json(NULL, &p, &err), 0);
	assert_int_equal(p.mode, EGRESS_NONE);
	assert_null(p.rules);
	assert_int_equal(p.nrules, 0);
	assert_int_equal(p.rate_mbit, 0);

	p = untouched;
	json_ok("null", &p);
	assert_int_equal(p.mode, EGRESS_NONE);
	assert_int_equal(p.rate_mbit, 0);

	json_ok("{\"mode\": \"none\"}", &p);
	assert_int_equal(p.mode, EGRESS_NONE);
	json_ok("{\"mode\": \"open\"}", &p);
	assert_int_equal(p.mode, EGRESS_OPEN);
	assert_int_equal(p.nrules, 0);
	json_ok("{\"mode\": \"open\", \"rate_mbit\": 100000}", &p);
	assert_int_equal(p.rate_mbit, 100000);
	json_ok("{\"mode\": \"open\", \"rate_mbit\": null}", &p);
	assert_int_equal(p.rate_mbit, 0);
	json_ok("{\"mode\": \"none\", \"rate_mbit\": null}", &p);
	json_ok("{\"mode\": \"allow\", \"allow\": [\"a.com\"], \"rate_mbit\": 1}", &p);
	assert_int_equal(p.mode, EGRESS_ALLOW);
	assert_int_equal(p.nrules, 1);
	assert_string_equal(p.rules[0].name, "a.com");
	assert_false(p.rules[0].wildcard);
	assert_int_equal(p.rules[0].port, 0);
	assert_int_equal(p.rate_mbit, 1);
	egress_policy_release(&p);
	assert_null(p.rules);
	assert_int_equal(p.nrules, 0);
	assert_int_equal(p.mode, EGRESS_NONE);
	assert_int_equal(p.rate_mbit, 0);
	egress_policy_release(&p); /* twice: still fine */
	egress_policy_release(NULL);
}

static void test_valid_names(void **state)
{
	(void)state;
	char l63[64], l63b[64], name253[254], name[300];
	label(l63, 63, 'x');
	label(l63b, 63, 'y');
	name_of_length(name253, 253);
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"api.example.com", "api.example.com"},
	    {"API.Example.COM", "api.example.com"},
	    {"example.com.", "example.com"},
	    {"Example.COM.", "example.com"},
	    {"a.b", "a.b"},
	    {"a-b.c-d.com", "a-b.c-d.com"},
	    {"a--b.com", "a--b.com"},
	    {"_dmarc.example.com", "_dmarc.example.com"},
	    {"under_score.example.com", "under_score.example.com"},
	    {"1a.example.com", "1a.example.com"},
	    {"123.example.com", "123.example.com"},
	    {"example.com1", "example.com1"},
	    {"xn--bcher-kva.example", "xn--bcher-kva.example"},
	    {"*.example.org", "*.example.org"},
	    {"*.Example.Org.", "*.example.org"},
	    {"*.a.b.example.org", "*.a.b.example.org"},
	    {"api.example.com:8443", "api.example.com:8443"},
	    {"api.example.com:1", "api.example.com:1"},
	    {"api.example.com:65535", "api.example.com:65535"},
	    {"API.example.com.:443", "api.example.com:443"},
	    {"*.Example.org:8443", "*.example.org:8443"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		entry_becomes(cases[i].in, cases[i].out);

	snprintf(name, sizeof(name), "%s.%s.com", l63, l63b); /* 63-character labels */
	entry_becomes(name, name);
	entry_becomes(name253, name253); /* 253 characters */
	snprintf(name, sizeof(name), "%s.", name253);
	entry_becomes(name, name253); /* 254 with the trailing dot */
	snprintf(name, sizeof(name), "%s:443", name253);
	char expect[300];
	snprintf(expect, sizeof(expect), "%s:443", name253);
	entry_becomes(name, expect);
	/* a wildcard: "*." and its name within 253 */
	name_of_length(name + 2, 251);
	memcpy(name, "*.", 2);
	entry_becomes(name, name);

	/* what the rule holds: the name without "*.", the flag, the port */
	struct egress_policy p;
	json_ok("{\"mode\":\"allow\",\"allow\":[\"*.Example.org:8443\"]}", &p);
	assert_string_equal(p.rules[0].name, "example.org");
	assert_true(p.rules[0].wildcard);
	assert_int_equal(p.rules[0].port, 8443);
	egress_policy_release(&p);
}

static void test_refused_names(void **state)
{
	(void)state;
	char l64[65], name[300], msg[400];
	label(l64, 64, 'x');
	static const struct {
		const char *entry, *needle;
	} cases[] = {
	    {"foo..com", "network.allow[0]: 'foo..com' is not a domain name (an empty label)"},
	    {"", "network.allow[0]: '' is not a domain name (empty)"},
	    {".", "network.allow[0]: '.' is not a domain name (empty)"},
	    {".a.com", "network.allow[0]: '.a.com' is not a domain name (an empty label)"},
	    {"a.com..", "network.allow[0]: 'a.com..' is not a domain name (an empty label)"},
	    {"-a.com", "network.allow[0]: '-a.com' is not a domain name (a label starts or ends "
		       "with '-')"},
	    {"a-.com", "network.allow[0]: 'a-.com' is not a domain name (a label starts or ends "
		       "with '-')"},
	    {"a.com-", "'a.com-' is not a domain name (a label starts or ends with '-')"},
	    {"localhost", "network.allow[0]: 'localhost' is not a domain name (a single label"},
	    {"com.", "network.allow[0]: 'com.' is not a domain name (a single label"},
	    {"a b.com", "network.allow[0]: 'a b.com' is not a domain name (a label has a "
			"character other than"},
	    {"a/b.com", "'a/b.com' is not a domain name"},
	    {"a@b.com", "'a@b.com' is not a domain name"},
	    {"b\xc3\xbc"
	     "cher.de",
	     "'b??cher.de' is not a domain name"},
	    {"http://a.com", "'http://a.com'"},
	    {"[a.com]", "network.allow[0]: '[a.com]' is not a domain name"},
	    {"*", "network.allow[0]: '*' is not a domain name (a single label"},
	    {"*.com", "network.allow[0]: '*.com' is not a domain name (a wildcard needs at least "
		      "two labels"},
	    {"*.com.", "'*.com.' is not a domain name (a wildcard needs"},
	    {"a.*.com", "network.allow[0]: 'a.*.com' is not a domain name ('*' only as the whole "
			"first label"},
	    {"*a.example.com", "'*a.example.com' is not a domain name ('*' only as the whole"},
	    {"ex*.example.com", "'ex*.example.com' is not a domain name ('*' only"},
	    {"*.*.example.com", "'*.*.example.com' is not a domain name ('*' only"},
	    {"**.example.com", "'**.example.com' is not a domain name ('*' only"},
	    {"a.com:0", "network.allow[0]: 'a.com:0': the port must be a number from 1 to 65535"},
	    {"a.com:65536", "network.allow[0]: 'a.com:65536': the port must be a number from 1"},
	    {"a.com:99999999", "'a.com:99999999': the port must be"},
	    {"a.com:", "network.allow[0]: 'a.com:': the port must be"},
	    {"a.com:x", "'a.com:x': the port must be"},
	    {"a.com:080", "'a.com:080': the port must be"},
	    {"a.com:+80", "'a.com:+80': the port must be"},
	    {"a.com:-1", "'a.com:-1': the port must be"},
	    {"a.com:80:90", "'a.com:80:90': the port must be"},
	    {":443", "network.allow[0]: ':443' is not a domain name (empty)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		entry_refused(cases[i].entry, cases[i].needle);

	/* the index is the entry's own */
	json_refused("{\"mode\":\"allow\",\"allow\":[\"a.com\",\"b.com\",\"c.com\",\"foo..com\"]}",
		     "network.allow[3]: 'foo..com' is not a domain name");

	snprintf(name, sizeof(name), "%s.com", l64);
	snprintf(msg, sizeof(msg), "network.allow[0]: '%.40s", name);
	entry_refused(name, msg);
	entry_refused(name, "is not a domain name (a label longer than 63 characters)");

	name_of_length(name, 254);
	entry_refused(name, "is not a domain name (longer than 253 characters)");
	entry_refused(name, "network.allow[0]: '");
	entry_refused(name, "...' is not"); /* a long entry is cut in the message */
	memcpy(name, "*.", 2);		    /* "*." and 252: 254 in all */
	entry_refused(name, "is not a domain name (longer than 253 characters)");

	/* a NUL inside the string is not the end of the name */
	json_t *v =
	    json_pack("{s:s, s:[s#]}", "mode", "allow", "allow", "a.com\0.evil.com", (size_t)15);
	struct egress_policy p = untouched;
	struct error err = {0};
	assert_int_equal(egress_policy_from_json(v, &p, &err), -EINVAL);
	assert_msg_has(&err, "network.allow[0]: 'a.com?.evil.com' is not a domain name",
		       "embedded NUL");
	assert_untouched(&p);
	json_decref(v);

	/* a control character stays out of the one-line message */
	entry_refused("a\n.com", "network.allow[0]: 'a?.com' is not a domain name");
}

static void test_ip_literals(void **state)
{
	(void)state;
	static const char *const literals[] = {
	    "1.2.3.4",
	    "10.0.0.1",
	    "169.254.169.254",
	    "1.2.3.4:443",
	    "127.0.0.1:8080",
	    "[::1]",
	    "[::1]:443",
	    "[2001:db8::1]:8443",
	    "[fe80::1%eth0]",
	    "[1.2.3.4]",
	    "[::ffff:169.254.169.254]",
	    "::1",
	    "2001:db8::1",
	    "::ffff:10.0.0.1",
	    "1.2.3",
	    "256.1.1.1",
	    "example.123",
	    "example.123.",
	    "a.0",
	    "0x7f.1",
	    "*.example.42",
	    "example.123:443",
	};
	char needle[200];
	for (size_t i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
		snprintf(needle, sizeof(needle), "network.allow[0]: '%s' is an IP literal",
			 literals[i]);
		entry_refused(literals[i], needle);
		entry_refused(literals[i], "IP literals are not allowed");
	}
	cli_refused("allow:a.com,1.2.3.4", "--network: '1.2.3.4' is an IP literal");
	cli_refused("allow:[::1]:443", "IP literals are not allowed");
	cli_refused("allow:::1", "--network: '::1' is an IP literal");
}

/* {"mode":"allow","allow":["host0.example.com", ... n of them]} */
static json_t *allow_list(size_t n, bool same)
{
	json_t *allow = json_array();
	assert_non_null(allow);
	for (size_t i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "host%zu.example.com", same ? 0 : i);
		assert_int_equal(json_array_append_new(allow, json_string(name)), 0);
	}
	json_t *v = json_pack("{s:s, s:o}", "mode", "allow", "allow", allow);
	assert_non_null(v);
	return v;
}

static void test_allow_limit(void **state)
{
	(void)state;
	struct egress_policy p = untouched;
	struct error err = {0};
	json_t *v = allow_list(EGRESS_ALLOW_MAX, false);
	assert_int_equal(egress_policy_from_json(v, &p, &err), 0);
	assert_int_equal(p.nrules, 256);
	assert_string_equal(p.rules[255].name, "host255.example.com");
	assert_true(egress_policy_allows(&p, "host255.example.com", 443));

	/* the round trip holds at the limit */
	json_t *out = egress_policy_to_json(&p);
	assert_non_null(out);
	assert_true(json_equal(out, v));
	json_decref(out);
	json_decref(v);
	egress_policy_release(&p);

	p = untouched;
	v = allow_list(EGRESS_ALLOW_MAX + 1, false);
	assert_int_equal(egress_policy_from_json(v, &p, &err), -EINVAL);
	assert_msg_has(&err, "network.allow: more than 256 entries", "257 entries");
	assert_untouched(&p);
	json_decref(v);

	/* counted as given, before duplicates merge */
	v = allow_list(EGRESS_ALLOW_MAX + 1, true);
	assert_int_equal(egress_policy_from_json(v, &p, &err), -EINVAL);
	assert_msg_has(&err, "network.allow: more than 256 entries", "257 duplicates");
	json_decref(v);

	/* the CLI: the same limit */
	char arg[EGRESS_ALLOW_MAX * 8 + 16];
	size_t len = (size_t)snprintf(arg, sizeof(arg), "allow:");
	for (size_t i = 0; i < EGRESS_ALLOW_MAX; i++)
		len += (size_t)snprintf(arg + len, sizeof(arg) - len, "%sh%zu.io", i ? "," : "", i);
	assert_int_equal(egress_policy_parse_cli(arg, &p, &err), 0);
	assert_int_equal(p.nrules, 256);
	egress_policy_release(&p);
	snprintf(arg + len, sizeof(arg) - len, ",x.io");
	cli_refused(arg, "--network: more than 256 entries");
}

static void test_duplicates_merge(void **state)
{
	(void)state;
	struct egress_policy p;
	json_ok("{\"mode\":\"allow\",\"allow\":[\"a.com\",\"A.COM.\",\"a.com:443\",\"a.com:443\","
		"\"*.a.com\",\"*.A.com.\",\"a.com\"]}",
		&p);
	assert_int_equal(p.nrules, 3);
	assert_string_equal(p.rules[0].name, "a.com");
	assert_int_equal(p.rules[0].port, 0);
	assert_false(p.rules[0].wildcard);
	assert_string_equal(p.rules[1].name, "a.com");
	assert_int_equal(p.rules[1].port, 443);
	assert_string_equal(p.rules[2].name, "a.com");
	assert_true(p.rules[2].wildcard);
	egress_policy_release(&p);

	struct error err = {0};
	assert_int_equal(egress_policy_parse_cli("allow:a.com,A.com.,a.com", &p, &err), 0);
	assert_int_equal(p.nrules, 1);
	egress_policy_release(&p);
}

static void test_structure_refused(void **state)
{
	(void)state;
	static const struct {
		const char *json, *needle;
	} cases[] = {
	    {"[]", "network: must be an object"},
	    {"\"allow\"", "network: must be an object"},
	    {"3", "network: must be an object"},
	    {"true", "network: must be an object"},
	    {"{}", "network.mode: required"},
	    {"{\"allow\":[\"a.com\"]}", "network.mode: required"},
	    {"{\"mode\":\"ALLOW\",\"allow\":[\"a.com\"]}", "network.mode: must be \"none\", "
							   "\"allow\" or \"open\""},
	    {"{\"mode\":\"closed\"}", "network.mode: must be"},
	    {"{\"mode\":\"\"}", "network.mode: must be"},
	    {"{\"mode\":1}", "network.mode: must be"},
	    {"{\"mode\":null}", "network.mode: must be"},
	    {"{\"mode\":\"open\",\"extra\":1}", "network.extra: unknown field"},
	    {"{\"mode\":\"open\",\"Mode\":\"open\"}", "network.Mode: unknown field"},
	    {"{\"mode\":\"open\",\"rate\":10}", "network.rate: unknown field"},
	    {"{\"mode\":\"none\",\"allow\":[\"a.com\"]}", "network.allow: only with mode "
							  "\"allow\", not \"none\""},
	    {"{\"mode\":\"open\",\"allow\":[\"a.com\"]}", "network.allow: only with mode "
							  "\"allow\", not \"open\""},
	    {"{\"mode\":\"open\",\"allow\":[]}", "network.allow: only with mode \"allow\""},
	    {"{\"mode\":\"open\",\"allow\":null}", "network.allow: only with mode \"allow\""},
	    {"{\"mode\":\"allow\"}", "network.allow: required with mode \"allow\""},
	    {"{\"mode\":\"allow\",\"allow\":[]}", "network.allow: must not be empty"},
	    {"{\"mode\":\"allow\",\"allow\":null}", "network.allow: must be an array"},
	    {"{\"mode\":\"allow\",\"allow\":\"a.com\"}", "network.allow: must be an array"},
	    {"{\"mode\":\"allow\",\"allow\":{\"a.com\":1}}", "network.allow: must be an array"},
	    {"{\"mode\":\"allow\",\"allow\":[\"a.com\",7]}", "network.allow[1]: must be a string"},
	    {"{\"mode\":\"allow\",\"allow\":[null]}", "network.allow[0]: must be a string"},
	    {"{\"mode\":\"allow\",\"allow\":[[\"a.com\"]]}", "network.allow[0]: must be a string"},
	    {"{\"mode\":\"open\",\"rate_mbit\":0}", "network.rate_mbit: must be an integer from 1 "
						    "to 100000"},
	    {"{\"mode\":\"open\",\"rate_mbit\":-1}", "network.rate_mbit: must be an integer"},
	    {"{\"mode\":\"open\",\"rate_mbit\":100001}", "network.rate_mbit: must be an integer"},
	    {"{\"mode\":\"open\",\"rate_mbit\":1.5}", "network.rate_mbit: must be an integer"},
	    {"{\"mode\":\"open\",\"rate_mbit\":10.0}", "network.rate_mbit: must be an integer"},
	    {"{\"mode\":\"open\",\"rate_mbit\":\"10\"}", "network.rate_mbit: must be an integer"},
	    {"{\"mode\":\"open\",\"rate_mbit\":true}", "network.rate_mbit: must be an integer"},
	    {"{\"mode\":\"open\",\"rate_mbit\":4294967297}", "network.rate_mbit: must be an "
							     "integer"},
	    {"{\"mode\":\"none\",\"rate_mbit\":10}", "network.rate_mbit: not with mode \"none\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		json_refused(cases[i].json, cases[i].needle);

	/* the err pointer may be NULL */
	json_t *v = load("{\"mode\":\"bad\"}");
	struct egress_policy p = untouched;
	assert_int_equal(egress_policy_from_json(v, &p, NULL), -EINVAL);
	assert_untouched(&p);
	json_decref(v);
}

static void test_matching(void **state)
{
	(void)state;
	struct egress_policy p;
	struct error err = {0};
	assert_int_equal(
	    egress_policy_parse_cli(
		"allow:api.example.com,*.example.org,svc.example.net:8443,*.cdn.example:9000", &p,
		&err),
	    0);
	static const struct {
		const char *host;
		uint16_t port;
		bool allowed;
	} cases[] = {
	    /* a name: 80 and 443 without a port */
	    {"api.example.com", 443, true},
	    {"api.example.com", 80, true},
	    {"api.example.com", 8080, false},
	    {"api.example.com", 8443, false},
	    {"api.example.com", 0, false},
	    {"API.EXAMPLE.COM", 443, true},
	    {"Api.Example.Com.", 80, true},
	    {"api.example.com..", 443, false},
	    {"x.api.example.com", 443, false},
	    {"example.com", 443, false},
	    {"api.example.co", 443, false},
	    {"api.example.com.evil.net", 443, false},
	    {"pi.example.com", 443, false},
	    /* a wildcard: one label or more, never the apex */
	    {"a.example.org", 443, true},
	    {"a.b.example.org", 443, true},
	    {"a.b.c.d.example.org", 80, true},
	    {"Deep.A.Example.Org.", 443, true},
	    {"_x.example.org", 443, true},
	    {"example.org", 443, false},
	    {"example.org.", 443, false},
	    {"badexample.org", 443, false},
	    {"xexample.org", 443, false},
	    {".example.org", 443, false},
	    {"a..example.org", 443, false},
	    {"a.example.org", 22, false},
	    {"*.example.org", 443, false},
	    {"a.example.org.evil.net", 443, false},
	    /* a port */
	    {"svc.example.net", 8443, true},
	    {"SVC.example.net.", 8443, true},
	    {"svc.example.net", 443, false},
	    {"svc.example.net", 80, false},
	    {"a.svc.example.net", 8443, false},
	    {"x.cdn.example", 9000, true},
	    {"x.cdn.example", 443, false},
	    {"cdn.example", 9000, false},
	    /* not names: never */
	    {"1.2.3.4", 443, false},
	    {"::1", 443, false},
	    {"[::1]", 443, false},
	    {"", 443, false},
	    {".", 443, false},
	    {"api.example.com:443", 443, false},
	    {"api example.com", 443, false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (egress_policy_allows(&p, cases[i].host, cases[i].port) != cases[i].allowed)
			fail_msg("%s:%u: expected %s", cases[i].host, (unsigned)cases[i].port,
				 cases[i].allowed ? "allowed" : "refused");
	assert_false(egress_policy_allows(&p, NULL, 443));

	/* a host longer than any name, even with the rule's suffix */
	char host[600];
	memset(host, 'a', 500);
	memcpy(host + 500, ".example.org", 13);
	assert_false(egress_policy_allows(&p, host, 443));
	egress_policy_release(&p);

	struct egress_policy open = {.mode = EGRESS_OPEN};
	assert_true(egress_policy_allows(&open, "anything.example", 1));
	assert_true(egress_policy_allows(&open, "1.2.3.4", 443));
	assert_true(egress_policy_allows(&open, NULL, 0));
	struct egress_policy none = {.mode = EGRESS_NONE};
	assert_false(egress_policy_allows(&none, "api.example.com", 443));
	assert_false(egress_policy_allows(NULL, "api.example.com", 443));
	struct egress_policy bogus = {.mode = (enum egress_mode)9};
	assert_false(egress_policy_allows(&bogus, "api.example.com", 443));
	/* allow with no rules allows nothing */
	struct egress_policy empty = {.mode = EGRESS_ALLOW};
	assert_false(egress_policy_allows(&empty, "api.example.com", 443));
}

/* text goes through from_json and to_json as canonical, and back to the same policy. */
static void round_trip(const char *text, const char *canonical)
{
	struct egress_policy p, q;
	json_ok(text, &p);
	json_t *out = egress_policy_to_json(&p);
	assert_non_null(out);
	char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(s);
	if (strcmp(s, canonical) != 0)
		fail_msg("%s: canonical %s, expected %s", text, s, canonical);
	struct error err = {0};
	if (egress_policy_from_json(out, &q, &err) != 0)
		fail_msg("%s: its canonical form %s refused: %s", text, s, err.msg);
	assert_int_equal(q.mode, p.mode);
	assert_int_equal(q.rate_mbit, p.rate_mbit);
	assert_int_equal(q.nrules, p.nrules);
	for (size_t i = 0; i < p.nrules; i++) {
		assert_string_equal(q.rules[i].name, p.rules[i].name);
		assert_int_equal(q.rules[i].wildcard, p.rules[i].wildcard);
		assert_int_equal(q.rules[i].port, p.rules[i].port);
	}
	free(s);
	json_decref(out);
	egress_policy_release(&p);
	egress_policy_release(&q);
}

static void test_round_trip(void **state)
{
	(void)state;
	round_trip("null", "{\"mode\":\"none\"}");
	round_trip("{\"mode\":\"none\"}", "{\"mode\":\"none\"}");
	round_trip("{\"mode\":\"open\"}", "{\"mode\":\"open\"}");
	round_trip("{\"mode\":\"open\",\"rate_mbit\":5}", "{\"mode\":\"open\",\"rate_mbit\":5}");
	round_trip("{\"rate_mbit\":20,\"allow\":[\"*.Example.org:8443\",\"A.com.\",\"a.com\","
		   "\"b.org:443\"],\"mode\":\"allow\"}",
		   "{\"allow\":[\"*.example.org:8443\",\"a.com\",\"b.org:443\"],\"mode\":\"allow\","
		   "\"rate_mbit\":20}");

	/* a policy made by hand, not by a parse */
	struct egress_rule rules[] = {
	    {.name = "example.org", .wildcard = true, .port = 0},
	    {.name = "api.example.com", .port = 65535},
	};
	struct egress_policy p = {.mode = EGRESS_ALLOW, .rules = rules, .nrules = 2};
	json_t *out = egress_policy_to_json(&p);
	assert_non_null(out);
	char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"allow\":[\"*.example.org\",\"api.example.com:65535\"],"
			       "\"mode\":\"allow\"}");
	free(s);
	json_decref(out);
	struct egress_policy none = {0};
	out = egress_policy_to_json(&none);
	assert_non_null(out);
	assert_string_equal(json_string_value(json_object_get(out, "mode")), "none");
	assert_int_equal(json_object_size(out), 1);
	json_decref(out);
}

static void test_to_json_refuses_broken_policies(void **state)
{
	(void)state;
	struct egress_rule good = {.name = "a.com"};
	struct egress_rule upper = {.name = "A.com"};
	struct egress_rule one_label = {.name = "com", .wildcard = true};
	struct egress_rule ip = {.name = "1.2.3.4"};
	const struct egress_policy broken[] = {
	    {.mode = EGRESS_ALLOW},
	    {.mode = EGRESS_ALLOW, .nrules = 1},
	    {.mode = EGRESS_ALLOW, .rules = &good, .nrules = EGRESS_ALLOW_MAX + 1},
	    {.mode = EGRESS_ALLOW, .rules = &upper, .nrules = 1},
	    {.mode = EGRESS_ALLOW, .rules = &one_label, .nrules = 1},
	    {.mode = EGRESS_ALLOW, .rules = &ip, .nrules = 1},
	    {.mode = EGRESS_NONE, .rate_mbit = 10},
	    {.mode = EGRESS_NONE, .rules = &good, .nrules = 1},
	    {.mode = EGRESS_OPEN, .rules = &good, .nrules = 1},
	    {.mode = EGRESS_OPEN, .rate_mbit = EGRESS_RATE_MBIT_MAX + 1},
	    {.mode = (enum egress_mode)3},
	};
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++)
		if (egress_policy_to_json(&broken[i]))
			fail_msg("broken policy %zu rendered", i);
	assert_null(egress_policy_to_json(NULL));
}

static void test_cli(void **state)
{
	(void)state;
	struct egress_policy p = untouched;
	struct error err = {0};
	assert_int_equal(egress_policy_parse_cli("none", &p, &err), 0);
	assert_int_equal(p.mode, EGRESS_NONE);
	assert_null(p.rules);
	assert_int_equal(p.rate_mbit, 0);
	p = untouched;
	assert_int_equal(egress_policy_parse_cli("open", &p, &err), 0);
	assert_int_equal(p.mode, EGRESS_OPEN);
	assert_int_equal(p.nrules, 0);
	assert_int_equal(p.rate_mbit, 0);

	assert_int_equal(egress_policy_parse_cli("allow:a.com,b.org:8443", &p, &err), 0);
	assert_int_equal(p.mode, EGRESS_ALLOW);
	assert_int_equal(p.nrules, 2);
	assert_string_equal(p.rules[0].name, "a.com");
	assert_int_equal(p.rules[0].port, 0);
	assert_false(p.rules[0].wildcard);
	assert_string_equal(p.rules[1].name, "b.org");
	assert_int_equal(p.rules[1].port, 8443);
	assert_true(egress_policy_allows(&p, "b.org", 8443));
	assert_false(egress_policy_allows(&p, "b.org", 443));
	/* the CLI and the JSON make the same policy */
	json_t *out = egress_policy_to_json(&p);
	char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"allow\":[\"a.com\",\"b.org:8443\"],\"mode\":\"allow\"}");
	free(s);
	json_decref(out);
	egress_policy_release(&p);

	assert_int_equal(egress_policy_parse_cli("allow:*.Example.ORG.", &p, &err), 0);
	assert_int_equal(p.nrules, 1);
	assert_true(p.rules[0].wildcard);
	assert_string_equal(p.rules[0].name, "example.org");
	egress_policy_release(&p);

	cli_refused("allow:", "--network: allow: needs at least one domain");
	cli_refused("allow", "--network: allow needs its domains");
	cli_refused("closed", "--network: 'closed' is not none, open or allow:DOMAIN");
	cli_refused("", "--network: '' is not none, open or allow:");
	cli_refused("NONE", "--network: 'NONE' is not none, open");
	cli_refused("Allow:a.com", "--network: 'Allow:a.com' is not none");
	cli_refused("none ", "--network: 'none ' is not none");
	cli_refused("allow=a.com", "--network: 'allow=a.com' is not");
	cli_refused(NULL, "--network: missing");
	cli_refused("allow:a.com,,b.org", "--network: an empty entry in 'allow:a.com,,b.org'");
	cli_refused("allow:a.com,", "--network: an empty entry");
	cli_refused("allow:,a.com", "--network: an empty entry");
	cli_refused("allow:foo..com",
		    "--network: 'foo..com' is not a domain name (an empty label)");
	cli_refused("allow:a.com,b.org:0",
		    "--network: 'b.org:0': the port must be a number from 1");
	cli_refused("allow:a.com, b.org", "--network: ' b.org' is not a domain name");
	cli_refused("allow:*.com", "--network: '*.com' is not a domain name (a wildcard needs");
	cli_refused("allow:localhost", "--network: 'localhost' is not a domain name");

	/* NULL err is fine */
	p = untouched;
	assert_int_equal(egress_policy_parse_cli("bad", &p, NULL), -EINVAL);
	assert_untouched(&p);
}

static void test_normalize(void **state)
{
	(void)state;
	char out[EGRESS_NAME_MAX + 1];
	assert_int_equal(egress_name_normalize("API.Example.COM.", out, sizeof(out)), 0);
	assert_string_equal(out, "api.example.com");
	assert_int_equal(egress_name_normalize("a.b", out, sizeof(out)), 0);
	assert_string_equal(out, "a.b");

	/* in place */
	char buf[32] = "Mixed.Case.Org.";
	assert_int_equal(egress_name_normalize(buf, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "mixed.case.org");

	/* too small a buffer: -ENOBUFS, and nothing written */
	char small[8] = "keep";
	assert_int_equal(egress_name_normalize("example.com", small, sizeof(small)), -ENOBUFS);
	assert_string_equal(small, "keep");
	char tight[11] = "keep"; /* "example.com" and no room for its NUL */
	assert_int_equal(egress_name_normalize("example.com", tight, sizeof(tight)), -ENOBUFS);
	assert_string_equal(tight, "keep");
	char exact[12];
	assert_int_equal(egress_name_normalize("Example.com.", exact, sizeof(exact)), 0);
	assert_string_equal(exact, "example.com");

	/* the longest name, and one more */
	char name[300];
	name_of_length(name, 253);
	assert_int_equal(egress_name_normalize(name, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), 253);
	name[253] = '.';
	name[254] = '\0';
	assert_int_equal(egress_name_normalize(name, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), 253);
	name_of_length(name, 254);
	assert_int_equal(egress_name_normalize(name, out, sizeof(out)), -EINVAL);
	memset(name, 'a', 299);
	name[299] = '\0';
	assert_int_equal(egress_name_normalize(name, out, sizeof(out)), -EINVAL);

	static const char *const bad[] = {
	    "",	       ".",	    "a..b",	  "localhost", "*.example.com", "a.*.com",
	    "1.2.3.4", "::1",	    "[::1]",	  "a.123",     "-a.com",	"a-.com",
	    "a b.com", "a.com:80",  "a.com..",	  ".a.com",    "b\xc3\xbc.de",	"a/b.com",
	    "a.com\n", "a\t.b.com", "a%2e.b.com",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char keep[] = "untouched";
		int r = egress_name_normalize(bad[i], keep, sizeof(keep));
		if (r != -EINVAL)
			fail_msg("'%s': %d, expected -EINVAL", bad[i], r);
		assert_string_equal(keep, "untouched");
	}
	assert_int_equal(egress_name_normalize(NULL, out, sizeof(out)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mode_names),
	    cmocka_unit_test(test_absent_null_and_modes),
	    cmocka_unit_test(test_valid_names),
	    cmocka_unit_test(test_refused_names),
	    cmocka_unit_test(test_ip_literals),
	    cmocka_unit_test(test_allow_limit),
	    cmocka_unit_test(test_duplicates_merge),
	    cmocka_unit_test(test_structure_refused),
	    cmocka_unit_test(test_matching),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_to_json_refuses_broken_policies),
	    cmocka_unit_test(test_cli),
	    cmocka_unit_test(test_normalize),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
