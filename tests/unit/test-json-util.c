/*
 * test-json-util.c - the pre-check of what parsing a JSON text may cost
 * (json_limits_check()): it counts exactly what jansson builds from valid
 * text, ignores brackets and commas in strings, stops at the first limit
 * passed, and on malformed text never lets jansson build more than the
 * limits allow. jansson's allocator is counted here, so the bound in
 * bytes that task-request.h promises for a body within the limits is
 * checked too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json-util.h"
#include "api/task-request.h"

/* ---- jansson's allocations, counted ------------------------------------ */

static size_t live_bytes, peak_bytes;

struct alloc_head {
	size_t size;
	max_align_t align;
};

static void *counting_malloc(size_t size)
{
	struct alloc_head *h = malloc(sizeof(*h) + size);
	if (!h)
		return NULL;
	h->size = size;
	live_bytes += size;
	if (live_bytes > peak_bytes)
		peak_bytes = live_bytes;
	return h + 1;
}

static void counting_free(void *p)
{
	if (!p)
		return;
	struct alloc_head *h = (struct alloc_head *)p - 1;
	live_bytes -= h->size;
	free(h);
}

/* Bytes jansson holds at most while parsing s[0..n) (with any flags). */
static size_t parse_peak(const char *s, size_t n)
{
	size_t before = live_bytes;
	peak_bytes = live_bytes;
	json_error_t jerr;
	json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	json_decref(v);
	assert_int_equal(live_bytes, before);
	return peak_bytes - before;
}

/* ---- helpers ------------------------------------------------------------ */

/* the limits of every request body (task-request.h) */
static const struct json_limits body_limits = {.depth_max = TASK_REQUEST_DEPTH_MAX,
					       .values_max = TASK_REQUEST_VALUES_MAX};

static enum json_excess check(const char *s, size_t depth_max, size_t values_max)
{
	struct json_limits lim = {.depth_max = depth_max, .values_max = values_max};
	return json_limits_check(s, strlen(s), &lim);
}

/* Values (the root, array elements, object members) and depth of v. */
static void shape(json_t *v, size_t depth, size_t *values, size_t *max_depth)
{
	const char *key;
	json_t *item;
	size_t i;
	(*values)++;
	if (json_is_array(v) || json_is_object(v))
		depth++;
	if (depth > *max_depth)
		*max_depth = depth;
	if (json_is_array(v))
		json_array_foreach(v, i, item) shape(item, depth, values, max_depth);
	if (json_is_object(v))
		json_object_foreach(v, key, item) shape(item, depth, values, max_depth);
}

/* A growable string for the big texts. */
struct text {
	char *p;
	size_t len, cap;
};

static void adds(struct text *t, const char *s)
{
	size_t n = strlen(s);
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	memcpy(t->p + t->len, s, n + 1);
	t->len += n;
}

/* head, then unit n times separated by sep, then tail. */
static char *repeat(const char *head, const char *unit, const char *sep, size_t n, const char *tail)
{
	struct text t = {0};
	adds(&t, head);
	for (size_t i = 0; i < n; i++) {
		if (i)
			adds(&t, sep);
		adds(&t, unit);
	}
	adds(&t, tail);
	return t.p;
}

/* head, then n members "0":value,"1":value,... (keys in hex), then tail. */
static char *members(const char *head, size_t n, const char *value, const char *tail)
{
	struct text t = {0};
	adds(&t, head);
	for (size_t i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof(key), "%s\"%zx\":", i ? "," : "", i);
		adds(&t, key);
		adds(&t, value);
	}
	adds(&t, tail);
	return t.p;
}

/* ---- tests ------------------------------------------------------------- */

static const char *const valid[] = {
    "1",
    "\"a\"",
    "[]",
    "{}",
    " [ ] ",
    "\t{\r\n}\n",
    "[[]]",
    "[1]",
    "[ 1 ]",
    "[1,2,3]",
    "[ 1 , 2 ,\n3 ]",
    "[[],[],[]]",
    "[{},{},{}]",
    "{\"a\":1}",
    "{\"a\":1,\"b\":[true,false,null],\"c\":{}}",
    "{ \"a\" : [ ] , \"b\" : { \"c\" : [ 1 , [ ] ] } }",
    "[[[[[1]]]]]",
    "[\"[\",\"{\",\"]\",\"}\",\",\",\":\"]",
    "{\"a,b\":\"[\",\"c]\":\"{\",\"d}\":\",,,\"}",
    "[\"\\\"\",\"\\\\\",\"\\\\\\\"[\"]",
    "[\"\\\\\",[],\"\\\"],[\"]",
    "[\"\\u005b\\u002c\",\"\\ud83d\\ude00\",\"\xc3\xa9,[\"]",
    "[-1.5e3,0,1E+2,true,false,null,\"\"]",
    "{\"\":{\"\":{\"\":[]}}}",
    "[{\"a\":[{\"b\":[{}]}]},[[],[{}]]]",
};

static void test_counts_exactly_what_jansson_builds(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		const char *s = valid[i];
		json_error_t jerr;
		json_t *v = json_loads(s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
		if (!v)
			fail_msg("%s: %s", s, jerr.text);
		size_t values = 0, depth = 0;
		shape(v, 0, &values, &depth);
		json_decref(v);
		/* exactly at both limits passes; one below either does not */
		if (check(s, depth, values) != JSON_WITHIN_LIMITS)
			fail_msg("%s: refused at its own depth %zu and values %zu", s, depth,
				 values);
		if (check(s, SIZE_MAX, values - 1) != JSON_TOO_MANY_VALUES)
			fail_msg("%s: %zu values not counted", s, values);
		if (depth > 0 && check(s, depth - 1, SIZE_MAX) != JSON_TOO_DEEP)
			fail_msg("%s: depth %zu not seen", s, depth);
	}
}

static void test_stops_at_the_first_limit(void **state)
{
	(void)state;
	/* the second '[' is the second value and the second level */
	assert_int_equal(check("[[1,1,1]]", 1, 2), JSON_TOO_DEEP);
	/* the third value comes before the third level */
	assert_int_equal(check("[1,[[1]]]", 2, 2), JSON_TOO_MANY_VALUES);
	assert_int_equal(check("[1,[[1]]]", 2, 5), JSON_TOO_DEEP);
	/* a closing bracket gives a level back; one too many is ignored */
	assert_int_equal(check("[[]][[]][[]]", 2, SIZE_MAX), JSON_WITHIN_LIMITS);
	assert_int_equal(check("]]]][[", 2, SIZE_MAX), JSON_WITHIN_LIMITS);
	assert_int_equal(check("]]]][[[", 2, SIZE_MAX), JSON_TOO_DEEP);
	/* nothing is not a value; the empty text passes any limit */
	assert_int_equal(check("", 0, 0), JSON_WITHIN_LIMITS);
	assert_int_equal(check(" \n", 0, 0), JSON_WITHIN_LIMITS);
	assert_int_equal(check("1", 0, 0), JSON_TOO_MANY_VALUES);
	assert_int_equal(check("[]", 0, 1), JSON_TOO_DEEP);
	/* a NUL in the text is a byte like any other (the parser refuses it) */
	struct json_limits lim = {.depth_max = 1, .values_max = 2};
	assert_int_equal(json_limits_check("[1,\0,1]", 7, &lim), JSON_TOO_MANY_VALUES);
	assert_int_equal(json_limits_check("[\"\0,\"]", 6, &lim), JSON_WITHIN_LIMITS);
}

static void test_strings_hide_brackets_and_commas(void **state)
{
	(void)state;
	char *s = repeat("[\"", "[{,", "", 100000, "\"]");
	assert_int_equal(check(s, 1, 2), JSON_WITHIN_LIMITS);
	free(s);
	/* an escaped quote does not end the string; an escaped backslash does */
	assert_int_equal(check("[\"\\\",[[[,,\"]", 1, 2), JSON_WITHIN_LIMITS);
	assert_int_equal(check("[\"\\\\\",[[[,,\"]", 1, 2), JSON_TOO_MANY_VALUES);
	/* an unterminated string hides the rest; the parser refuses it */
	assert_int_equal(check("[\"[[[[,,,,", 1, 2), JSON_WITHIN_LIMITS);
	/* a backslash as the last byte does not read past the end */
	struct json_limits lim = {.depth_max = 1, .values_max = 2};
	assert_int_equal(json_limits_check("[\"\\", 3, &lim), JSON_WITHIN_LIMITS);
}

/*
 * Malformed text: whatever jansson builds before it fails, it builds from
 * a valid prefix, whose values the check counted. Every prefix of these
 * texts (and the texts themselves, cut or with garbage appended) that
 * passes a small limit costs jansson no more than that limit's worth.
 */
static void test_malformed_text_is_bounded_too(void **state)
{
	(void)state;
	const size_t values_max = 40, per_value = 512;
	char *texts[] = {
	    repeat("[", "[]", ",", 400, "]"),
	    repeat("[", "{}", ",", 400, "]"),
	    members("{\"m\":{", 400, "0", "}}"),
	    repeat("[", "\"\"", ",", 400, "]"),
	    repeat("[", "{\"a\":[1,{\"b\":\"[\"}]}", " , ", 50, "] x"),
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		const char *s = texts[i];
		size_t n = strlen(s);
		for (size_t cut = 0; cut <= n; cut++) {
			struct json_limits lim = {.depth_max = 8, .values_max = values_max};
			if (json_limits_check(s, cut, &lim) != JSON_WITHIN_LIMITS)
				continue;
			size_t peak = parse_peak(s, cut);
			/* the values, and the lexer's buffers for the text */
			if (peak > values_max * per_value + 4 * cut + 1024)
				fail_msg("text %zu cut at %zu: jansson held %zu bytes", i, cut,
					 peak);
		}
		free(texts[i]);
	}
}

/* 4 MiB bombs: refused, by the limit that bounds them. */
static void test_bombs_are_refused(void **state)
{
	(void)state;
	const size_t max = 4u << 20;
	struct {
		char *text;
		enum json_excess want;
	} bombs[] = {
	    {repeat("[", "[]", ",", (max - 2) / 3, "]"), JSON_TOO_MANY_VALUES},
	    {repeat("[", "0", ",", (max - 2) / 2, "]"), JSON_TOO_MANY_VALUES},
	    {repeat("[", "\"\"", ",", (max - 2) / 3, "]"), JSON_TOO_MANY_VALUES},
	    {repeat("", "{\"a\":", "", max / 6, "1"), JSON_TOO_DEEP},
	    {repeat("", "[", "", max, ""), JSON_TOO_DEEP},
	};
	for (size_t i = 0; i < sizeof(bombs) / sizeof(bombs[0]); i++) {
		assert_true(strlen(bombs[i].text) <= max);
		assert_int_equal(
		    json_limits_check(bombs[i].text, strlen(bombs[i].text), &body_limits),
		    bombs[i].want);
		free(bombs[i].text);
	}
	/* many members, each key distinct: "66666":0, is 10 bytes */
	char *t = members("{", max / 10, "0", "}");
	assert_true(strlen(t) <= max);
	assert_int_equal(json_limits_check(t, strlen(t), &body_limits), JSON_TOO_MANY_VALUES);
	free(t);
}

/*
 * Within the limits, the costliest values (empty objects, and members
 * holding them) cost jansson a few MiB, as task-request.h says: at most
 * 512 bytes each. (Its strings cost their length, bounded by the body.)
 */
static void test_a_body_within_the_limits_costs_a_few_mib(void **state)
{
	(void)state;
	const size_t n = TASK_REQUEST_VALUES_MAX - 1;
	char *texts[] = {
	    repeat("[", "{}", ",", n, "]"),
	    repeat("[", "[]", ",", n, "]"),
	    repeat("[", "\"\"", ",", n, "]"),
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		assert_int_equal(json_limits_check(texts[i], strlen(texts[i]), &body_limits),
				 JSON_WITHIN_LIMITS);
		size_t peak = parse_peak(texts[i], strlen(texts[i]));
		printf("%zu values of %.2s: jansson held %zu bytes (%zu a value)\n", n + 1,
		       texts[i] + 1, peak, peak / (n + 1));
		assert_true(peak <= (size_t)TASK_REQUEST_VALUES_MAX * 512);
		free(texts[i]);
	}
	/* members of an object, each holding an empty object */
	char *t = members("{", n, "{}", "}");
	assert_int_equal(json_limits_check(t, strlen(t), &body_limits), JSON_WITHIN_LIMITS);
	size_t peak = parse_peak(t, strlen(t));
	printf("%zu members holding {}: jansson held %zu bytes (%zu a value)\n", n, peak,
	       peak / (n + 1));
	assert_true(peak <= (size_t)TASK_REQUEST_VALUES_MAX * 512);
	free(t);
}

int main(void)
{
	json_set_alloc_funcs(counting_malloc, counting_free);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_exactly_what_jansson_builds),
	    cmocka_unit_test(test_stops_at_the_first_limit),
	    cmocka_unit_test(test_strings_hide_brackets_and_commas),
	    cmocka_unit_test(test_malformed_text_is_bounded_too),
	    cmocka_unit_test(test_bombs_are_refused),
	    cmocka_unit_test(test_a_body_within_the_limits_costs_a_few_mib),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
