/*
 * test-sandbox-request.c - the bodies and checks of the interactive
 * sandbox routes, without a socket: create, exec, timeout and kill bodies
 * with the field each error names, and api_sandbox_begin()'s checks of
 * ids, pids and query parameters.
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

#include "api/api.h"
#include "api/sandbox-request.h"

#define SBX "sbx_8e3x0k0c3y7qk4f4h5vbb2s1mw"

static void create_bad(const char *body, enum api_error_code code, const char *field)
{
	struct sandbox_request r = {0};
	struct api_error e = {0};
	int rc = sandbox_request_parse(body, strlen(body), &r, &e);
	if (rc != -EINVAL || e.code != code || strcmp(e.field, field) != 0)
		fail_msg("%s: got %d %s field '%s' (%s), want %s '%s'", body, rc,
			 api_error_name(e.code), e.field, e.message, api_error_name(code), field);
	assert_null(r.spec_json);
}

static void test_create_defaults(void **state)
{
	(void)state;
	struct sandbox_request r = {0};
	struct api_error e = {0};
	assert_int_equal(sandbox_request_parse("{}", 2, &r, &e), 0);
	assert_string_equal(r.spec_json, "{\"env\":{},\"limits\":{\"cpus\":1,\"disk_mb\":1024,"
					 "\"memory_mb\":512,\"pids\":256,\"timeout_s\":null}}");
	assert_string_equal(r.metadata_json, "{}");
	assert_int_equal(r.timeout_ms, SANDBOX_TIMEOUT_DEFAULT_S * 1000);
	assert_true(r.default_limits);
	sandbox_request_release(&r);
	/* an empty body is the defaults too, whatever its pointer (found by the
	 * fuzzer: a zero-length body was read as two bytes) */
	assert_int_equal(sandbox_request_parse(NULL, 0, &r, &e), 0);
	assert_true(r.default_limits);
	sandbox_request_release(&r);
	char *one = malloc(1);
	assert_non_null(one);
	one[0] = 'x';
	assert_int_equal(sandbox_request_parse(one, 0, &r, &e), 0);
	assert_true(r.default_limits);
	sandbox_request_release(&r);
	free(one);
}

static void test_create_full(void **state)
{
	(void)state;
	struct sandbox_request r = {0};
	struct api_error e = {0};
	const char *body = "{\"limits\":{\"memory_mb\":128,\"cpus\":0.5},\"timeout_s\":60,"
			   "\"env\":{\"B\":\"2\",\"A\":\"1\"},\"metadata\":{\"owner\":\"x\"}}";
	assert_int_equal(sandbox_request_parse(body, strlen(body), &r, &e), 0);
	assert_string_equal(r.spec_json,
			    "{\"env\":{\"A\":\"1\",\"B\":\"2\"},\"limits\":{\"cpus\":0.5,"
			    "\"disk_mb\":1024,\"memory_mb\":128,\"pids\":256,"
			    "\"timeout_s\":null}}");
	assert_string_equal(r.metadata_json, "{\"owner\":\"x\"}");
	assert_int_equal(r.timeout_ms, 60000);
	assert_false(r.default_limits);
	sandbox_request_release(&r);
	/* the defaults written out are still the defaults: the pool fits */
	body = "{\"limits\":{\"memory_mb\":512,\"cpus\":1,\"pids\":256,\"disk_mb\":1024}}";
	assert_int_equal(sandbox_request_parse(body, strlen(body), &r, &e), 0);
	assert_true(r.default_limits);
	sandbox_request_release(&r);
}

static void test_create_errors(void **state)
{
	(void)state;
	create_bad("[]", API_ERR_INVALID_JSON, "");
	create_bad("{\"a\":1,\"a\":2}", API_ERR_INVALID_JSON, "");
	create_bad("{\"colour\":1}", API_ERR_UNKNOWN_FIELD, "colour");
	create_bad("{\"command\":[\"x\"]}", API_ERR_UNKNOWN_FIELD, "command");
	create_bad("{\"limits\":{\"timeout_s\":3}}", API_ERR_UNKNOWN_FIELD, "limits.timeout_s");
	create_bad("{\"limits\":{\"state_mb\":8}}", API_ERR_UNKNOWN_FIELD, "limits.state_mb");
	create_bad("{\"limits\":{\"memory_mb\":1}}", API_ERR_INVALID_FIELD, "limits.memory_mb");
	create_bad("{\"limits\":{\"memroy_mb\":1}}", API_ERR_UNKNOWN_FIELD, "limits.memroy_mb");
	create_bad("{\"timeout_s\":0}", API_ERR_INVALID_FIELD, "timeout_s");
	create_bad("{\"timeout_s\":604801}", API_ERR_INVALID_FIELD, "timeout_s");
	create_bad("{\"timeout_s\":1.5}", API_ERR_INVALID_FIELD, "timeout_s");
	create_bad("{\"env\":{\"AGENTBOX_X\":\"1\"}}", API_ERR_INVALID_FIELD, "env.AGENTBOX_X");
	create_bad("{\"env\":[]}", API_ERR_INVALID_FIELD, "env");
	create_bad("{\"metadata\":1}", API_ERR_INVALID_FIELD, "metadata");
}

static void exec_bad(const char *body, enum api_error_code code, const char *field)
{
	struct exec_request x = {0};
	struct api_error e = {0};
	int rc = exec_request_parse(body, strlen(body), &x, &e);
	if (rc != -EINVAL || e.code != code || strcmp(e.field, field) != 0)
		fail_msg("%s: got %d %s field '%s' (%s), want %s '%s'", body, rc,
			 api_error_name(e.code), e.field, e.message, api_error_name(code), field);
	assert_null(x.command);
}

static void test_exec(void **state)
{
	(void)state;
	struct exec_request x = {0};
	struct api_error e = {0};
	const char *body =
	    "{\"command\":[\"sh\",\"-c\",\"cat\"],\"stdin\":\"in\",\"env\":{\"K\":\"v\"},"
	    "\"cwd\":\"/tmp\",\"timeout_s\":5,\"background\":true}";
	assert_int_equal(exec_request_parse(body, strlen(body), &x, &e), 0);
	assert_int_equal(json_array_size(x.command), 3);
	assert_string_equal(json_string_value(json_object_get(x.env, "K")), "v");
	assert_int_equal(x.stdin_len, 2);
	assert_memory_equal(x.stdin_data, "in", 2);
	assert_string_equal(x.cwd, "/tmp");
	assert_int_equal(x.timeout_ms, 5000);
	assert_true(x.background);
	exec_request_release(&x);
	body = "{\"command\":[\"true\"]}";
	assert_int_equal(exec_request_parse(body, strlen(body), &x, &e), 0);
	assert_string_equal(x.cwd, ""); /* the shim's default: WorkingDir, else /workspace */
	assert_null(x.stdin_data);
	assert_null(x.env);
	assert_int_equal(x.timeout_ms, 0);
	assert_false(x.background);
	exec_request_release(&x);

	exec_bad("{}", API_ERR_MISSING_FIELD, "command");
	exec_bad("{\"command\":[]}", API_ERR_INVALID_FIELD, "command");
	exec_bad("{\"command\":[\"a\",1]}", API_ERR_INVALID_FIELD, "command[1]");
	exec_bad("{\"command\":[\"a\"],\"cwd\":\"rel\"}", API_ERR_INVALID_FIELD, "cwd");
	exec_bad("{\"command\":[\"a\"],\"cwd\":\"/a\\u0000b\"}", API_ERR_INVALID_FIELD, "cwd");
	exec_bad("{\"command\":[\"a\"],\"stdin\":1}", API_ERR_INVALID_FIELD, "stdin");
	exec_bad("{\"command\":[\"a\"],\"timeout_s\":86401}", API_ERR_INVALID_FIELD, "timeout_s");
	exec_bad("{\"command\":[\"a\"],\"background\":\"yes\"}", API_ERR_INVALID_FIELD,
		 "background");
	exec_bad("{\"command\":[\"a\"],\"pty\":true}", API_ERR_UNKNOWN_FIELD, "pty");
	exec_bad("{\"command\":[\"a\"],\"tty\":1}", API_ERR_INVALID_FIELD, "tty");
	exec_bad("{\"command\":[\"a\"],\"rows\":24}", API_ERR_INVALID_FIELD, "rows");
	exec_bad("{\"command\":[\"a\"],\"tty\":true,\"rows\":0}", API_ERR_INVALID_FIELD, "rows");
	exec_bad("{\"command\":[\"a\"],\"tty\":true,\"cols\":4097}", API_ERR_INVALID_FIELD, "cols");
	exec_bad("{\"command\":[\"a\"],\"tty\":true,\"stdin\":\"x\"}", API_ERR_INVALID_FIELD,
		 "stdin");
	exec_bad("{\"command\":[\"a\"],\"tty\":true,\"background\":true}", API_ERR_INVALID_FIELD,
		 "background");
	body = "{\"command\":[\"sh\"],\"tty\":true,\"rows\":4096,\"cols\":1}";
	assert_int_equal(exec_request_parse(body, strlen(body), &x, &e), 0);
	assert_true(x.tty);
	assert_int_equal(x.rows, 4096);
	assert_int_equal(x.cols, 1);
	exec_request_release(&x);
	body = "{\"command\":[\"sh\"],\"tty\":true}";
	assert_int_equal(exec_request_parse(body, strlen(body), &x, &e), 0);
	assert_int_equal(x.rows, 24); /* the defaults */
	assert_int_equal(x.cols, 80);
	exec_request_release(&x);
	exec_bad("{\"command\":[\"a\"],\"env\":{\"1X\":\"y\"}}", API_ERR_INVALID_FIELD,
		 "env[\"1X\"]");

	/* stdin: at most EXEC_STDIN_MAX bytes */
	size_t n = EXEC_STDIN_MAX + 1;
	char *big = malloc(n + 64);
	assert_non_null(big);
	int off = snprintf(big, 64, "{\"command\":[\"a\"],\"stdin\":\"");
	memset(big + off, 'x', n);
	memcpy(big + off + n, "\"}", 3);
	exec_bad(big, API_ERR_INVALID_FIELD, "stdin");
	free(big);
}

static void test_timeout_and_kill(void **state)
{
	(void)state;
	int64_t ms = 0;
	int sig = 0;
	struct api_error e = {0};
	assert_int_equal(sandbox_timeout_parse("{\"timeout_s\":7}", 15, &ms, &e), 0);
	assert_int_equal(ms, 7000);
	assert_int_equal(sandbox_timeout_parse("{}", 2, &ms, &e), -EINVAL);
	assert_string_equal(e.field, "timeout_s");
	assert_int_equal(e.code, API_ERR_MISSING_FIELD);
	assert_int_equal(sandbox_timeout_parse("{\"timeout_s\":-1}", 16, &ms, &e), -EINVAL);
	assert_int_equal(process_kill_parse(NULL, 0, &sig, &e), 0);
	assert_int_equal(sig, 9);
	assert_int_equal(process_kill_parse("{\"signal\":15}", 13, &sig, &e), 0);
	assert_int_equal(sig, 15);
	assert_int_equal(process_kill_parse("{\"signal\":65}", 13, &sig, &e), -EINVAL);
	assert_string_equal(e.field, "signal");
	assert_int_equal(process_kill_parse("{\"sig\":1}", 9, &sig, &e), -EINVAL);
	assert_int_equal(e.code, API_ERR_UNKNOWN_FIELD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_defaults),  cmocka_unit_test(test_create_full),
	    cmocka_unit_test(test_create_errors),    cmocka_unit_test(test_exec),
	    cmocka_unit_test(test_timeout_and_kill),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
