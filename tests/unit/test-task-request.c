/*
 * test-task-request.c - the body of POST /v1/tasks: every validation
 * rule with the field it names, the defaults, the canonical spec_json
 * (stable, idempotent) and the round trip through
 * task_request_from_spec_json().
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sandbox-request.h"
#include "api/task-request.h"
#include "runtime/spec.h"

#define DEFAULT_SPEC                                                                               \
	"{\"command\":[\"true\"],\"env\":{},\"files\":{},\"limits\":{\"cpus\":1,\"disk_mb\":1024," \
	"\"memory_mb\":512,\"pids\":256,\"state_mb\":256,\"timeout_s\":null},\"max_attempts\":1,"  \
	"\"metadata\":{},"                                                                         \
	"\"retry_on\":[\"lost\"]}"

static void parse_ok_n(const char *body, size_t len, struct task_request *r)
{
	struct api_error e = {0};
	int rc = task_request_parse(body, len, r, &e);
	if (rc != 0)
		fail_msg("%.200s: %d %s field=%s: %s", body, rc, api_error_name(e.code), e.field,
			 e.message);
}

static void parse_ok(const char *body, struct task_request *r)
{
	parse_ok_n(body, strlen(body), r);
}

/* body must fail with code, naming field ("" = none). */
static void parse_bad_n(const char *body, size_t len, enum api_error_code code, const char *field)
{
	struct task_request r = {.argc = 77};
	struct api_error e = {0};
	int rc = task_request_parse(body, len, &r, &e);
	if (rc != -EINVAL || e.code != code || strcmp(e.field, field) != 0)
		fail_msg("%.200s: got %d %s field '%s' (%s), want %s field '%s'", body, rc,
			 api_error_name(e.code), e.field, e.message, api_error_name(code), field);
	assert_true(e.message[0] != '\0');
	assert_int_equal(r.argc, 77); /* untouched on failure */
}

static void parse_bad(const char *body, enum api_error_code code, const char *field)
{
	parse_bad_n(body, strlen(body), code, field);
}

/* ---- defaults and canonical form -------------------------------------- */

static void test_defaults(void **state)
{
	(void)state;
	struct task_request r;
	parse_ok("{\"command\":[\"true\"]}", &r);
	assert_string_equal(r.spec_json, DEFAULT_SPEC);
	assert_int_equal(r.spec_len, strlen(DEFAULT_SPEC));
	assert_int_equal(r.argc, 1);
	assert_string_equal(r.argv[0], "true");
	assert_null(r.argv[1]);
	assert_int_equal(r.memory_bytes, SPEC_DEFAULT_MEMORY);
	assert_int_equal(r.cpu_milli, SPEC_DEFAULT_CPU_MILLI);
	assert_int_equal(r.pids, SPEC_DEFAULT_PIDS);
	assert_int_equal(r.disk_bytes, SPEC_DEFAULT_DISK);
	assert_int_equal(r.timeout_ms, 0);
	assert_int_equal(r.nenv, 0);
	assert_non_null(r.env);
	assert_null(r.env[0]);
	assert_int_equal(r.nfiles, 0);
	assert_int_equal(r.max_attempts, 1);
	assert_int_equal(r.retry_on, TASK_STATUS_BIT(TASK_LOST));
	task_request_release(&r);
	assert_null(r.spec_json);
}

static const char full_body[] =
    "{\"metadata\": {\"z\": [1, 2.5, \"\\u00e9\"], \"a\": {\"nested\": true, \"n\": null}},\n"
    " \"retry_on\": [\"lost\", \"oom_killed\", \"failed\"], \"max_attempts\": 3,\n"
    " \"files\": {\"/workspace/b.py\": \"print(1)\\n\", \"/tmp/a\": \"x\\ty\",\n"
    "            \"/workspace/dir/a.txt\": \"\"},\n"
    " \"env\": {\"Z\": \"last\", \"A1\": \"1\", \"A\": \"a=b\", \"_x\": \"\"},\n"
    " \"limits\": {\"timeout_s\": 1.5, \"disk_mb\": 2048, \"pids\": 10, \"cpus\": 0.25,\n"
    "            \"state_mb\": 32,\n"
    "            \"memory_mb\": 64},\n"
    " \"command\": [\"python3\", \"-c\", \"print('h\\u00e9')\"]}";

static const char full_spec[] =
    "{\"command\":[\"python3\",\"-c\",\"print('h\xc3\xa9')\"],\"env\":{\"A\":\"a=b\","
    "\"A1\":\"1\",\"Z\":\"last\",\"_x\":\"\"},\"files\":{\"/tmp/a\":\"x\\ty\","
    "\"/workspace/b.py\":\"print(1)\\n\",\"/workspace/dir/a.txt\":\"\"},\"limits\":"
    "{\"cpus\":0.25,\"disk_mb\":2048,\"memory_mb\":64,\"pids\":10,\"state_mb\":32,"
    "\"timeout_s\":1.5},"
    "\"max_attempts\":3,\"metadata\":{\"a\":{\"n\":null,\"nested\":true},\"z\":[1,2.5,"
    "\"\xc3\xa9\"]},\"retry_on\":[\"failed\",\"oom_killed\",\"lost\"]}";

static void check_full(const struct task_request *r)
{
	assert_string_equal(r->spec_json, full_spec);
	assert_int_equal(r->argc, 3);
	assert_string_equal(r->argv[2], "print('h\xc3\xa9')");
	assert_int_equal(r->memory_bytes, 64ULL << 20);
	assert_int_equal(r->cpu_milli, 250);
	assert_int_equal(r->pids, 10);
	assert_int_equal(r->disk_bytes, 2048ULL << 20);
	assert_int_equal(r->state_bytes, 32ULL << 20);
	assert_int_equal(r->timeout_ms, 1500);
	assert_int_equal(r->nenv, 4); /* sorted by name */
	assert_string_equal(r->env[0], "A=a=b");
	assert_string_equal(r->env[1], "A1=1");
	assert_string_equal(r->env[2], "Z=last");
	assert_string_equal(r->env[3], "_x=");
	assert_null(r->env[4]);
	assert_int_equal(r->nfiles, 3); /* sorted by path */
	assert_string_equal(r->files[0].path, "/tmp/a");
	assert_int_equal(r->files[0].len, 3);
	assert_string_equal(r->files[0].content, "x\ty");
	assert_string_equal(r->files[1].path, "/workspace/b.py");
	assert_string_equal(r->files[1].content, "print(1)\n");
	assert_int_equal(r->files[2].len, 0);
	assert_int_equal(r->max_attempts, 3);
	assert_int_equal(r->retry_on, TASK_STATUS_BIT(TASK_FAILED) |
					  TASK_STATUS_BIT(TASK_OOM_KILLED) |
					  TASK_STATUS_BIT(TASK_LOST));
}

static void test_full_request(void **state)
{
	(void)state;
	struct task_request r;
	parse_ok(full_body, &r);
	check_full(&r);
	task_request_release(&r);
}

static void test_round_trip(void **state)
{
	(void)state;
	struct task_request a, b;
	parse_ok(full_body, &a);
	struct api_error e = {0};
	assert_int_equal(task_request_from_spec_json(a.spec_json, &b, &e), 0);
	check_full(&b); /* the same request, and the same canonical text */
	task_request_release(&a);
	task_request_release(&b);

	assert_int_equal(task_request_from_spec_json(DEFAULT_SPEC, &b, &e), 0);
	assert_string_equal(b.spec_json, DEFAULT_SPEC);
	task_request_release(&b);
	assert_int_equal(task_request_from_spec_json(NULL, &b, &e), -EINVAL);
	assert_int_equal(e.code, API_ERR_INVALID_JSON);
}

static void test_canonical_is_stable(void **state)
{
	(void)state;
	/* order, spacing and escapes of the input do not matter */
	static const char *const same[] = {
	    "{\"command\":[\"a\"],\"metadata\":{\"y\":1,\"x\":[true,false]}}",
	    " { \"metadata\" : { \"x\" : [ true , false ] , \"y\" : 1 } , \"command\" : [ "
	    "\"\\u0061\" ] } ",
	    "{\"command\":[\"a\"],\"limits\":{},\"env\":{},\"files\":{},\"max_attempts\":1,"
	    "\"retry_on\":[\"lost\"],\"metadata\":{\"x\":[true,false],\"y\":1}}",
	};
	struct task_request r;
	parse_ok(same[0], &r);
	char *first = strdup(r.spec_json);
	task_request_release(&r);
	for (size_t i = 1; i < sizeof(same) / sizeof(same[0]); i++) {
		parse_ok(same[i], &r);
		assert_string_equal(r.spec_json, first);
		task_request_release(&r);
	}
	free(first);

	/* numbers: integers stay integers, reals in their shortest form */
	parse_ok("{\"command\":[\"a\"],\"metadata\":{\"f\":0.1,\"g\":1e300,\"h\":-0.0,\"i\":"
		 "-9223372036854775808,\"j\":2.0,\"k\":1E2}}",
		 &r);
	assert_non_null(strstr(r.spec_json, "\"metadata\":{\"f\":0.1,\"g\":1e+300,\"h\":-0.0,"
					    "\"i\":-9223372036854775808,\"j\":2.0,\"k\":100.0}"));
	char *again = strdup(r.spec_json);
	task_request_release(&r);
	parse_ok(again, &r); /* idempotent */
	assert_string_equal(r.spec_json, again);
	task_request_release(&r);
	free(again);

	/* strings: control characters escaped, the rest as UTF-8 */
	parse_ok("{\"command\":[\"a\\t\\\"\\\\\\/\\u001f\\ud83d\\ude00\"]}", &r);
	assert_non_null(strstr(r.spec_json, "[\"a\\t\\\"\\\\/\\u001f\xf0\x9f\x98\x80\"]"));
	task_request_release(&r);
}

static void test_limits_rounding(void **state)
{
	(void)state;
	struct task_request r;
	parse_ok("{\"command\":[\"a\"],\"limits\":{\"cpus\":0.0125,\"timeout_s\":0.0001}}", &r);
	assert_int_equal(r.cpu_milli, 13);
	assert_int_equal(r.timeout_ms, 1); /* above 0 stays above 0 */
	assert_non_null(strstr(r.spec_json, "\"cpus\":0.013,"));
	assert_non_null(strstr(r.spec_json, "\"timeout_s\":0.001}"));
	task_request_release(&r);

	parse_ok("{\"command\":[\"a\"],\"limits\":{\"cpus\":2,\"timeout_s\":60,\"memory_mb\":4,"
		 "\"pids\":1,\"disk_mb\":1,\"state_mb\":1}}",
		 &r);
	assert_non_null(strstr(r.spec_json, "{\"cpus\":2,\"disk_mb\":1,\"memory_mb\":4,\"pids\":1,"
					    "\"state_mb\":1,\"timeout_s\":60}"));
	assert_int_equal(r.state_bytes, SPEC_STATE_MIN);
	assert_int_equal(r.timeout_ms, 60000);
	assert_int_equal(r.memory_bytes, SPEC_MEMORY_MIN);
	assert_int_equal(r.disk_bytes, SPEC_DISK_MIN);
	task_request_release(&r);

	parse_ok(
	    "{\"command\":[\"a\"],\"limits\":{\"cpus\":1024,\"timeout_s\":2592000,"
	    "\"memory_mb\":1048576,\"pids\":1000000,\"disk_mb\":1048576,\"state_mb\":1048576}}",
	    &r);
	assert_int_equal(r.cpu_milli, SPEC_CPU_MILLI_MAX);
	assert_int_equal(r.timeout_ms, SPEC_TIMEOUT_MAX_MS);
	assert_int_equal(r.memory_bytes, SPEC_MEMORY_MAX);
	assert_int_equal(r.pids, SPEC_PIDS_MAX);
	assert_int_equal(r.disk_bytes, SPEC_DISK_MAX);
	assert_int_equal(r.state_bytes, SPEC_STATE_MAX);
	task_request_release(&r);

	parse_ok("{\"command\":[\"a\"],\"limits\":{\"cpus\":0.01,\"timeout_s\":null}}", &r);
	assert_int_equal(r.cpu_milli, SPEC_CPU_MILLI_MIN);
	assert_int_equal(r.timeout_ms, 0);
	task_request_release(&r);

	parse_ok("{\"command\":[\"a\"],\"retry_on\":[]}", &r); /* retry nothing */
	assert_int_equal(r.retry_on, 0);
	assert_non_null(strstr(r.spec_json, "\"retry_on\":[]"));
	task_request_release(&r);
}

/* ---- every rule, and the field it names -------------------------------- */

#define CMD "{\"command\":[\"a\"],"
static const struct {
	const char *body;
	enum api_error_code code;
	const char *field;
} bad[] = {
    /* not JSON, or not an object */
    {"", API_ERR_INVALID_JSON, ""},
    {"nope", API_ERR_INVALID_JSON, ""},
    {"[\"command\"]", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[\"a\"]} x", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[\"a\"],}", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[\"a\"],\"command\":[\"b\"]}", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[\"\xff\"]}", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[\"\xed\xa0\x80\"]}", API_ERR_INVALID_JSON, ""}, /* a surrogate */
    {"{\"command\":[\"\\ud800\"]}", API_ERR_INVALID_JSON, ""},
    {CMD "\"limits\":{\"pids\":99999999999999999999}}", API_ERR_INVALID_JSON, ""},
    {CMD "\"metadata\":{\"x\":1e400}}", API_ERR_INVALID_JSON, ""},
    {CMD "\"metadata\":{\"a\\u0000b\":1}}", API_ERR_INVALID_JSON, ""},
    {"{'command':['a']}", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[\"a\"]/*c*/}", API_ERR_INVALID_JSON, ""},
    {"{\"command\":[NaN]}", API_ERR_INVALID_JSON, ""},
    /* unknown fields, before anything else */
    {"{\"comand\":[\"a\"]}", API_ERR_UNKNOWN_FIELD, "comand"},
    {CMD "\"bogus\":1}", API_ERR_UNKNOWN_FIELD, "bogus"},
    {CMD "\"a b\":1}", API_ERR_UNKNOWN_FIELD, "[\"a b\"]"},
    {CMD "\"limits\":{\"memroy_mb\":5}}", API_ERR_UNKNOWN_FIELD, "limits.memroy_mb"},
    {CMD "\"limits\":{\"memory\":\"5m\"}}", API_ERR_UNKNOWN_FIELD, "limits.memory"},
    /* command */
    {"{}", API_ERR_MISSING_FIELD, "command"},
    {"{\"env\":{}}", API_ERR_MISSING_FIELD, "command"},
    {"{\"command\":null}", API_ERR_INVALID_FIELD, "command"},
    {"{\"command\":\"ls -l\"}", API_ERR_INVALID_FIELD, "command"},
    {"{\"command\":{}}", API_ERR_INVALID_FIELD, "command"},
    {"{\"command\":[]}", API_ERR_INVALID_FIELD, "command"},
    {"{\"command\":[\"\"]}", API_ERR_INVALID_FIELD, "command[0]"},
    {"{\"command\":[\"a\",1]}", API_ERR_INVALID_FIELD, "command[1]"},
    {"{\"command\":[\"a\",\"b\",null]}", API_ERR_INVALID_FIELD, "command[2]"},
    {"{\"command\":[[\"a\"]]}", API_ERR_INVALID_FIELD, "command[0]"},
    {"{\"command\":[\"a\\u0000b\"]}", API_ERR_INVALID_FIELD, "command[0]"},
    /* limits */
    {CMD "\"limits\":[]}", API_ERR_INVALID_FIELD, "limits"},
    {CMD "\"limits\":null}", API_ERR_INVALID_FIELD, "limits"},
    {CMD "\"limits\":{\"memory_mb\":3}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":1048577}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":-512}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":\"512\"}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":512.0}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":5e2}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":512.5}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":true}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"memory_mb\":null}}", API_ERR_INVALID_FIELD, "limits.memory_mb"},
    {CMD "\"limits\":{\"cpus\":0.009}}", API_ERR_INVALID_FIELD, "limits.cpus"},
    {CMD "\"limits\":{\"cpus\":0}}", API_ERR_INVALID_FIELD, "limits.cpus"},
    {CMD "\"limits\":{\"cpus\":1024.001}}", API_ERR_INVALID_FIELD, "limits.cpus"},
    {CMD "\"limits\":{\"cpus\":\"1\"}}", API_ERR_INVALID_FIELD, "limits.cpus"},
    {CMD "\"limits\":{\"cpus\":true}}", API_ERR_INVALID_FIELD, "limits.cpus"},
    {CMD "\"limits\":{\"pids\":0}}", API_ERR_INVALID_FIELD, "limits.pids"},
    {CMD "\"limits\":{\"pids\":1000001}}", API_ERR_INVALID_FIELD, "limits.pids"},
    {CMD "\"limits\":{\"pids\":1.5}}", API_ERR_INVALID_FIELD, "limits.pids"},
    {CMD "\"limits\":{\"disk_mb\":0}}", API_ERR_INVALID_FIELD, "limits.disk_mb"},
    {CMD "\"limits\":{\"disk_mb\":1048577}}", API_ERR_INVALID_FIELD, "limits.disk_mb"},
    {CMD "\"limits\":{\"state_mb\":0}}", API_ERR_INVALID_FIELD, "limits.state_mb"},
    {CMD "\"limits\":{\"state_mb\":1048577}}", API_ERR_INVALID_FIELD, "limits.state_mb"},
    {CMD "\"limits\":{\"state_mb\":\"8\"}}", API_ERR_INVALID_FIELD, "limits.state_mb"},
    {CMD "\"limits\":{\"timeout_s\":0}}", API_ERR_INVALID_FIELD, "limits.timeout_s"},
    {CMD "\"limits\":{\"timeout_s\":-1}}", API_ERR_INVALID_FIELD, "limits.timeout_s"},
    {CMD "\"limits\":{\"timeout_s\":2592000.5}}", API_ERR_INVALID_FIELD, "limits.timeout_s"},
    {CMD "\"limits\":{\"timeout_s\":\"5s\"}}", API_ERR_INVALID_FIELD, "limits.timeout_s"},
    {CMD "\"limits\":{\"timeout_s\":false}}", API_ERR_INVALID_FIELD, "limits.timeout_s"},
    /* env */
    {CMD "\"env\":[]}", API_ERR_INVALID_FIELD, "env"},
    {CMD "\"env\":\"A=1\"}", API_ERR_INVALID_FIELD, "env"},
    {CMD "\"env\":{\"1A\":\"x\"}}", API_ERR_INVALID_FIELD, "env[\"1A\"]"},
    {CMD "\"env\":{\"A-B\":\"x\"}}", API_ERR_INVALID_FIELD, "env[\"A-B\"]"},
    {CMD "\"env\":{\"A=B\":\"x\"}}", API_ERR_INVALID_FIELD, "env[\"A=B\"]"},
    {CMD "\"env\":{\"\":\"x\"}}", API_ERR_INVALID_FIELD, "env[\"\"]"},
    {CMD "\"env\":{\"\xc3\xa9\":\"x\"}}", API_ERR_INVALID_FIELD, "env[\"\xc3\xa9\"]"},
    {CMD "\"env\":{\"OK\":\"1\",\"AGENTBOX_X\":\"1\"}}", API_ERR_INVALID_FIELD, "env.AGENTBOX_X"},
    {CMD "\"env\":{\"AGENTBOX_\":\"1\"}}", API_ERR_INVALID_FIELD, "env.AGENTBOX_"},
    {CMD "\"env\":{\"A\":1}}", API_ERR_INVALID_FIELD, "env.A"},
    {CMD "\"env\":{\"A\":null}}", API_ERR_INVALID_FIELD, "env.A"},
    {CMD "\"env\":{\"A\":\"x\\u0000\"}}", API_ERR_INVALID_FIELD, "env.A"},
    /* files */
    {CMD "\"files\":[]}", API_ERR_INVALID_FIELD, "files"},
    {CMD "\"files\":{\"/etc/passwd\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/etc/passwd\"]"},
    {CMD "\"files\":{\"workspace/x\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"workspace/x\"]"},
    {CMD "\"files\":{\"/workspace\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/workspace\"]"},
    {CMD "\"files\":{\"/workspace/\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/workspace/\"]"},
    {CMD "\"files\":{\"/tmp/\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/tmp/\"]"},
    {CMD "\"files\":{\"/tmpx/a\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/tmpx/a\"]"},
    {CMD "\"files\":{\"/workspace/a/\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/workspace/a/\"]"},
    {CMD "\"files\":{\"/workspace//a\":\"x\"}}", API_ERR_INVALID_FIELD, "files[\"/workspace//a\"]"},
    {CMD "\"files\":{\"/workspace/./a\":\"x\"}}", API_ERR_INVALID_FIELD,
     "files[\"/workspace/./a\"]"},
    {CMD "\"files\":{\"/workspace/a/..\":\"x\"}}", API_ERR_INVALID_FIELD,
     "files[\"/workspace/a/..\"]"},
    {CMD "\"files\":{\"/workspace/../etc/x\":\"x\"}}", API_ERR_INVALID_FIELD,
     "files[\"/workspace/../etc/x\"]"},
    {CMD "\"files\":{\"/tmp/x\":1}}", API_ERR_INVALID_FIELD, "files[\"/tmp/x\"]"},
    {CMD "\"files\":{\"/tmp/x\":null}}", API_ERR_INVALID_FIELD, "files[\"/tmp/x\"]"},
    {CMD "\"files\":{\"/tmp/x\":\"a\\u0000\"}}", API_ERR_INVALID_FIELD, "files[\"/tmp/x\"]"},
    {CMD "\"files\":{\"/tmp/a/b\":\"2\",\"/tmp/a\":\"1\"}}", API_ERR_INVALID_FIELD,
     "files[\"/tmp/a/b\"]"},
    /* max_attempts */
    {CMD "\"max_attempts\":0}", API_ERR_INVALID_FIELD, "max_attempts"},
    {CMD "\"max_attempts\":101}", API_ERR_INVALID_FIELD, "max_attempts"},
    {CMD "\"max_attempts\":2.0}", API_ERR_INVALID_FIELD, "max_attempts"},
    {CMD "\"max_attempts\":\"3\"}", API_ERR_INVALID_FIELD, "max_attempts"},
    {CMD "\"max_attempts\":null}", API_ERR_INVALID_FIELD, "max_attempts"},
    /* retry_on */
    {CMD "\"retry_on\":\"lost\"}", API_ERR_INVALID_FIELD, "retry_on"},
    {CMD "\"retry_on\":null}", API_ERR_INVALID_FIELD, "retry_on"},
    {CMD "\"retry_on\":[\"succeeded\"]}", API_ERR_INVALID_FIELD, "retry_on[0]"},
    {CMD "\"retry_on\":[\"lost\",\"cancelled\"]}", API_ERR_INVALID_FIELD, "retry_on[1]"},
    {CMD "\"retry_on\":[\"queued\"]}", API_ERR_INVALID_FIELD, "retry_on[0]"},
    {CMD "\"retry_on\":[\"LOST\"]}", API_ERR_INVALID_FIELD, "retry_on[0]"},
    {CMD "\"retry_on\":[1]}", API_ERR_INVALID_FIELD, "retry_on[0]"},
    {CMD "\"retry_on\":[\"lost\",\"failed\",\"lost\"]}", API_ERR_INVALID_FIELD, "retry_on[2]"},
    /* metadata */
    {CMD "\"metadata\":[]}", API_ERR_INVALID_FIELD, "metadata"},
    {CMD "\"metadata\":\"x\"}", API_ERR_INVALID_FIELD, "metadata"},
    {CMD "\"metadata\":null}", API_ERR_INVALID_FIELD, "metadata"},
    {CMD "\"metadata\":{\"a\":\"\\u0000\"}}", API_ERR_INVALID_FIELD, "metadata.a"},
    {CMD "\"metadata\":{\"a\":[1,{\"b c\":[\"x\",\"\\u0000\"]}]}}", API_ERR_INVALID_FIELD,
     "metadata.a[1][\"b c\"][1]"},
};

static void test_bad_requests(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		parse_bad(bad[i].body, bad[i].code, bad[i].field);
	parse_bad_n(NULL, 0, API_ERR_INVALID_JSON, "");
	parse_bad_n("{\"command\":[\"a\"]}\0", 18, API_ERR_INVALID_JSON, "");
}

/* ---- sizes: every limit, at it and one past it ------------------------- */

struct text {
	char *p;
	size_t len, cap;
};

static void add(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void adds(struct text *t, const char *s)
{
	add(t, s, strlen(s));
}

static void add_repeat(struct text *t, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		add(t, &c, 1);
}

/* {"command":[ n items of `len` bytes ]} */
static char *command_body(size_t n, size_t len)
{
	struct text t = {0};
	adds(&t, "{\"command\":[");
	for (size_t i = 0; i < n; i++) {
		adds(&t, i ? ",\"" : "\"");
		add_repeat(&t, 'a', len);
		adds(&t, "\"");
	}
	adds(&t, "]}");
	return t.p;
}

static void check_size(char *body, bool ok, const char *field)
{
	if (ok) {
		struct task_request r;
		parse_ok(body, &r);
		task_request_release(&r);
	} else {
		parse_bad(body, API_ERR_INVALID_FIELD, field);
	}
	free(body);
}

static void test_command_sizes(void **state)
{
	(void)state;
	check_size(command_body(SPEC_ARGV_MAX, 1), true, NULL);
	check_size(command_body(SPEC_ARGV_MAX + 1, 1), false, "command");
	check_size(command_body(1, TASK_REQUEST_ARG_MAX), true, NULL);
	check_size(command_body(1, TASK_REQUEST_ARG_MAX + 1), false, "command[0]");
	/* every item fits, all of them together do not */
	check_size(command_body(TASK_REQUEST_ARGV_BYTES_MAX / TASK_REQUEST_ARG_MAX + 1,
				TASK_REQUEST_ARG_MAX),
		   false, "command");
}

/* {"command":["a"],"env":{ n entries NAMEi: `len` bytes }} */
static char *env_body(size_t n, size_t len)
{
	struct text t = {0};
	adds(&t, CMD "\"env\":{");
	for (size_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%s\"V%zu\":\"", i ? "," : "", i);
		adds(&t, name);
		add_repeat(&t, 'v', len);
		adds(&t, "\"");
	}
	adds(&t, "}}");
	return t.p;
}

static void test_env_sizes(void **state)
{
	(void)state;
	check_size(env_body(SPEC_ENV_MAX, 1), true, NULL);
	check_size(env_body(SPEC_ENV_MAX + 1, 1), false, "env");
	/* "V0=" + value is one entry */
	check_size(env_body(1, SPEC_ENV_ENTRY_MAX - 3), true, NULL);
	check_size(env_body(1, SPEC_ENV_ENTRY_MAX - 2), false, "env.V0");
	check_size(env_body(TASK_REQUEST_ENV_BYTES_MAX / (SPEC_ENV_ENTRY_MAX - 8) + 1,
			    SPEC_ENV_ENTRY_MAX - 8),
		   false, "env");
}

/* n files /tmp/fI of `len` bytes each. */
static char *files_body(size_t n, size_t len)
{
	struct text t = {0};
	adds(&t, CMD "\"files\":{");
	for (size_t i = 0; i < n; i++) {
		char name[48];
		snprintf(name, sizeof(name), "%s\"/tmp/f%zu\":\"", i ? "," : "", i);
		adds(&t, name);
		add_repeat(&t, 'c', len);
		adds(&t, "\"");
	}
	adds(&t, "}}");
	return t.p;
}

static char *one_file_body(const char *dir, size_t component_len, size_t components)
{
	struct text t = {0};
	adds(&t, CMD "\"files\":{\"");
	adds(&t, dir);
	for (size_t i = 0; i < components; i++) {
		adds(&t, "/");
		add_repeat(&t, 'n', component_len);
	}
	adds(&t, "\":\"\"}}");
	return t.p;
}

static void test_files_sizes(void **state)
{
	(void)state;
	check_size(files_body(TASK_REQUEST_FILES_MAX, 1), true, NULL);
	check_size(files_body(TASK_REQUEST_FILES_MAX + 1, 1), false, "files");
	check_size(files_body(1, TASK_REQUEST_FILES_BYTES_MAX), true, NULL);
	check_size(files_body(2, TASK_REQUEST_FILES_BYTES_MAX / 2 + 1), false, "files");
	check_size(one_file_body("/tmp", TASK_REQUEST_FILE_NAME_MAX, 1), true, NULL);
	char *b = one_file_body("/tmp", TASK_REQUEST_FILE_NAME_MAX + 1, 1);
	struct api_error e = {0};
	struct task_request r;
	assert_int_equal(task_request_parse(b, strlen(b), &r, &e), -EINVAL);
	assert_int_equal(e.code, API_ERR_INVALID_FIELD);
	assert_non_null(strstr(e.field, "files[\"/tmp/nnn")); /* a long key is cut... */
	assert_non_null(strstr(e.field, "\"...]"));	      /* ...and says so */
	assert_true(strlen(e.field) < API_FIELD_MAX);
	free(b);
	/* "/tmp" + 5 * 200 + ... just past SPEC_PATH_MAX bytes in all */
	b = one_file_body("/tmp", 200, 5);
	assert_int_equal(task_request_parse(b, strlen(b), &r, &e), 0);
	task_request_release(&r);
	free(b);
	b = one_file_body("/tmp", 200, 6);
	assert_int_equal(task_request_parse(b, strlen(b), &r, &e), -EINVAL);
	assert_int_equal(e.code, API_ERR_INVALID_FIELD);
	free(b);
}

static char *metadata_body(size_t value_len)
{
	struct text t = {0};
	adds(&t, CMD "\"metadata\":{\"k\":\"");
	add_repeat(&t, 'm', value_len);
	adds(&t, "\"}}");
	return t.p;
}

/* {"command":["a"],"metadata": depth-1 nested objects} has this depth. */
static char *nested_body(size_t depth, const char *open, const char *close)
{
	struct text t = {0};
	adds(&t, CMD "\"metadata\":");
	for (size_t i = 1; i < depth; i++)
		adds(&t, open);
	adds(&t, "1");
	for (size_t i = 1; i < depth; i++)
		adds(&t, close);
	adds(&t, "}");
	return t.p;
}

static void test_metadata_and_depth(void **state)
{
	(void)state;
	/* {"k":"..."} is 8 bytes around the value */
	check_size(metadata_body(TASK_REQUEST_METADATA_MAX - 8), true, NULL);
	check_size(metadata_body(TASK_REQUEST_METADATA_MAX - 7), false, "metadata");

	struct task_request r;
	char *b = nested_body(TASK_REQUEST_DEPTH_MAX, "{\"a\":", "}");
	parse_ok(b, &r);
	task_request_release(&r);
	free(b);
	b = nested_body(TASK_REQUEST_DEPTH_MAX + 1, "{\"a\":", "}");
	parse_bad(b, API_ERR_INVALID_JSON, "");
	free(b);
	b = nested_body(TASK_REQUEST_DEPTH_MAX + 1, "[", "]");
	parse_bad(b, API_ERR_INVALID_JSON, "");
	free(b);
	b = nested_body(200000, "[", "]"); /* no stack is harmed */
	parse_bad(b, API_ERR_INVALID_JSON, "");
	free(b);
	/* brackets in strings do not count */
	struct text t = {0};
	adds(&t, CMD "\"metadata\":{\"s\":\"");
	add_repeat(&t, '[', 1000);
	adds(&t, "\\\"{{{\"}}");
	parse_ok(t.p, &r);
	task_request_release(&r);
	free(t.p);
}

/* ---- what a body may cost: depth and values, before parsing ----------- */

/* {"command":["a"],"metadata":{"a":[ n zeros ]}} holds 5 + n values. */
static char *values_body(size_t n)
{
	struct text t = {0};
	adds(&t, CMD "\"metadata\":{\"a\":[");
	for (size_t i = 0; i < n; i++)
		adds(&t, i ? ",0" : "0");
	adds(&t, "]}}");
	return t.p;
}

static void test_values_limit(void **state)
{
	(void)state;
	/* at the limit the body is parsed (and its metadata found too long) */
	check_size(values_body(TASK_REQUEST_VALUES_MAX - 5), false, "metadata");
	/* one past it, it is not: invalid_json, naming the limit */
	char *b = values_body(TASK_REQUEST_VALUES_MAX - 4);
	parse_bad(b, API_ERR_INVALID_JSON, "");
	struct task_request r;
	struct api_error e = {0};
	char want[64];
	snprintf(want, sizeof(want), "more than %d values", TASK_REQUEST_VALUES_MAX);
	assert_int_equal(task_request_parse(b, strlen(b), &r, &e), -EINVAL);
	assert_non_null(strstr(e.message, want));
	free(b);
}

/* Every field at its largest: the values limit leaves room for it. */
static void test_the_largest_task_fits(void **state)
{
	(void)state;
	struct text t = {0};
	adds(&t, "{\"command\":[");
	for (size_t i = 0; i < SPEC_ARGV_MAX; i++)
		adds(&t, i ? ",\"a\"" : "\"a\"");
	adds(&t, "],\"limits\":{\"memory_mb\":512,\"cpus\":1,\"pids\":256,\"disk_mb\":1024,"
		 "\"timeout_s\":60},\"env\":{");
	for (size_t i = 0; i < SPEC_ENV_MAX; i++) {
		char entry[32];
		snprintf(entry, sizeof(entry), "%s\"V%zu\":\"v\"", i ? "," : "", i);
		adds(&t, entry);
	}
	adds(&t, "},\"files\":{");
	for (size_t i = 0; i < TASK_REQUEST_FILES_MAX; i++) {
		char entry[32];
		snprintf(entry, sizeof(entry), "%s\"/tmp/f%zu\":\"x\"", i ? "," : "", i);
		adds(&t, entry);
	}
	adds(&t, "},\"max_attempts\":3,\"retry_on\":[\"failed\",\"oom_killed\",\"timed_out\","
		 "\"lost\"],\"metadata\":{\"a\":[");
	/* {"a":[0,...]} is 8 bytes around 2n - 1: as many values as 16 KiB holds */
	size_t n = (TASK_REQUEST_METADATA_MAX - 8 + 1) / 2;
	for (size_t i = 0; i < n; i++)
		adds(&t, i ? ",0" : "0");
	adds(&t, "]}}");
	struct task_request r, again;
	parse_ok(t.p, &r);
	assert_int_equal(r.argc, SPEC_ARGV_MAX);
	assert_int_equal(r.nenv, SPEC_ENV_MAX);
	assert_int_equal(r.nfiles, TASK_REQUEST_FILES_MAX);
	/* and its canonical spec, with every default, fits as well */
	struct api_error e = {0};
	assert_int_equal(task_request_from_spec_json(r.spec_json, &again, &e), 0);
	assert_string_equal(again.spec_json, r.spec_json);
	task_request_release(&again);
	task_request_release(&r);
	/* one more metadata value is too long for metadata, not too many values */
	t.len -= 3;
	adds(&t, ",0]}}");
	parse_bad(t.p, API_ERR_INVALID_FIELD, "metadata");
	free(t.p);
}

/* Every route that reads a JSON body holds it to both limits first. */
static void check_every_parser(const char *body, const char *want)
{
	size_t len = strlen(body);
	struct api_error e[5] = {0};
	struct task_request tr;
	struct sandbox_request sr;
	struct exec_request xr;
	int64_t ms;
	int sig;
	int rc[5] = {
	    task_request_parse(body, len, &tr, &e[0]),
	    sandbox_request_parse(body, len, &sr, &e[1]),
	    exec_request_parse(body, len, &xr, &e[2]),
	    sandbox_timeout_parse(body, len, &ms, &e[3]),
	    process_kill_parse(body, len, &sig, &e[4]),
	};
	for (size_t i = 0; i < 5; i++) {
		if (rc[i] != -EINVAL || e[i].code != API_ERR_INVALID_JSON ||
		    !strstr(e[i].message, want))
			fail_msg("parser %zu: %d %s: %s, want invalid_json: ...%s...", i, rc[i],
				 api_error_name(e[i].code), e[i].message, want);
	}
}

static void test_every_body_route_has_the_limits(void **state)
{
	(void)state;
	char want[64];
	snprintf(want, sizeof(want), "more than %d values", TASK_REQUEST_VALUES_MAX);
	struct text t = {0};
	adds(&t, "[");
	for (size_t i = 0; i < TASK_REQUEST_VALUES_MAX; i++)
		adds(&t, i ? ",[]" : "[]");
	adds(&t, "]");
	check_every_parser(t.p, want);
	free(t.p);
	/* inside an object, where each route takes one */
	t = (struct text){0};
	adds(&t, "{\"metadata\":{\"a\":[");
	for (size_t i = 0; i < TASK_REQUEST_VALUES_MAX; i++)
		adds(&t, i ? ",\"\"" : "\"\"");
	adds(&t, "]}}");
	check_every_parser(t.p, want);
	free(t.p);
	snprintf(want, sizeof(want), "deeper than %d levels", TASK_REQUEST_DEPTH_MAX);
	char *b = nested_body(TASK_REQUEST_DEPTH_MAX + 1, "[", "]");
	check_every_parser(b, want);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_full_request),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_canonical_is_stable),
	    cmocka_unit_test(test_limits_rounding),
	    cmocka_unit_test(test_bad_requests),
	    cmocka_unit_test(test_command_sizes),
	    cmocka_unit_test(test_env_sizes),
	    cmocka_unit_test(test_files_sizes),
	    cmocka_unit_test(test_metadata_and_depth),
	    cmocka_unit_test(test_values_limit),
	    cmocka_unit_test(test_the_largest_task_fits),
	    cmocka_unit_test(test_every_body_route_has_the_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
