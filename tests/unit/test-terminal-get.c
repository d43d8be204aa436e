/*
 * test-terminal-get.c - a terminal a browser can open (api/terminal-get.h),
 * without a socket: the exec request from a GET's query (each error the
 * POST body's, naming the same field), the key in the subprotocols, the
 * subprotocol the 101 names, and the Origin rule.
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

#include "api/terminal-get.h"

#define EXEC_PATH "/v1/sandboxes/sbx_8e3x0k0c3y7qk4f4h5vbb2s1mw/exec"
/* the text of a key of auth/key.h's form, and its base64url */
#define KEY "abx_0123456789ab_abcdefghjkmnpqrstvwxyz0123456789abcdefghjkmnpqrstv"
#define KEY_B64                                                                                    \
	"YWJ4XzAxMjM0NTY3ODlhYl9hYmNkZWZnaGprbW5wcXJzdHZ3eHl6MDEyMzQ1Njc4OWFiY2RlZmdoamttbnBxcnN0" \
	"dg"

static void query_bad(const char *query, enum api_error_code code, const char *field)
{
	struct exec_request x;
	struct api_error e = {0};
	int rc = exec_request_from_query(query, &x, &e);
	if (rc != -EINVAL || e.code != code || strcmp(e.field, field) != 0)
		fail_msg("%s: got %d %s field '%s' (%s), want %s '%s'", query, rc,
			 api_error_name(e.code), e.field, e.message, api_error_name(code), field);
	assert_null(x.command);
}

/* The POST body's error for the same request: the very same code and field. */
static void same_as_body(const char *query, const char *body)
{
	struct exec_request x;
	struct api_error eq = {0}, eb = {0};
	assert_int_equal(exec_request_from_query(query, &x, &eq), -EINVAL);
	assert_int_equal(exec_request_parse(body, strlen(body), &x, &eb), -EINVAL);
	assert_int_equal(eq.code, eb.code);
	assert_string_equal(eq.field, eb.field);
	assert_string_equal(eq.message, eb.message);
}

static void test_query_to_request(void **state)
{
	(void)state;
	struct exec_request x;
	struct api_error e = {0};
	assert_int_equal(exec_request_from_query("command=sh&command=-c&command=echo%20%22a%26b%22"
						 "&rows=33&cols=101&env=A%3D1%3D2&env=B%3D"
						 "&cwd=%2Ftmp&timeout_s=60",
						 &x, &e),
			 0);
	assert_true(x.tty);
	assert_int_equal(json_array_size(x.command), 3);
	assert_string_equal(json_string_value(json_array_get(x.command, 2)), "echo \"a&b\"");
	assert_int_equal(x.rows, 33);
	assert_int_equal(x.cols, 101);
	assert_string_equal(json_string_value(json_object_get(x.env, "A")), "1=2");
	assert_string_equal(json_string_value(json_object_get(x.env, "B")), "");
	assert_string_equal(x.cwd, "/tmp");
	assert_int_equal(x.timeout_ms, 60000);
	assert_false(x.background);
	assert_null(x.stdin_data);
	exec_request_release(&x);
	/* the defaults, and tty given */
	assert_int_equal(exec_request_from_query("command=bash&tty=true", &x, &e), 0);
	assert_true(x.tty);
	assert_int_equal(x.rows, 24);
	assert_int_equal(x.cols, 80);
	assert_null(x.env);
	exec_request_release(&x);
}

static void test_query_errors(void **state)
{
	(void)state;
	query_bad("", API_ERR_MISSING_FIELD, "command");
	query_bad("rows=3", API_ERR_MISSING_FIELD, "command");
	query_bad("command=sh&shell=1", API_ERR_UNKNOWN_FIELD, "shell");
	query_bad("command=sh&stdin=x", API_ERR_UNKNOWN_FIELD, "stdin");
	query_bad("command=sh&background=1", API_ERR_UNKNOWN_FIELD, "background");
	query_bad("command=sh&Rows=3", API_ERR_UNKNOWN_FIELD, "Rows");
	query_bad("command=sh&rows=0", API_ERR_INVALID_FIELD, "rows");
	query_bad("command=sh&rows=4097", API_ERR_INVALID_FIELD, "rows");
	query_bad("command=sh&rows=x", API_ERR_INVALID_FIELD, "rows");
	query_bad("command=sh&rows=", API_ERR_INVALID_FIELD, "rows");
	query_bad("command=sh&rows=99999999999999999999999", API_ERR_INVALID_FIELD, "rows");
	query_bad("command=sh&rows=3&rows=3", API_ERR_INVALID_FIELD, "rows");
	query_bad("command=sh&cols=-1", API_ERR_INVALID_FIELD, "cols");
	query_bad("command=sh&timeout_s=0", API_ERR_INVALID_FIELD, "timeout_s");
	query_bad("command=sh&timeout_s=86401", API_ERR_INVALID_FIELD, "timeout_s");
	query_bad("command=sh&cwd=rel", API_ERR_INVALID_FIELD, "cwd");
	query_bad("command=sh&tty=0", API_ERR_INVALID_FIELD, "tty");
	query_bad("command=sh&env=NOEQ", API_ERR_INVALID_FIELD, "env");
	query_bad("command=sh&env=A%3D1&env=A%3D2", API_ERR_INVALID_FIELD, "env.A");
	query_bad("command=sh&env=1X%3Dy", API_ERR_INVALID_FIELD, "env[\"1X\"]");
	query_bad("command=", API_ERR_INVALID_FIELD, "command[0]");
	query_bad("command=sh&command=a%00b", API_ERR_INVALID_FIELD, "query");
	query_bad("command=sh&%zz=1", API_ERR_INVALID_FIELD, "query");
	query_bad("command=sh&=1", API_ERR_INVALID_FIELD, "query");
	/* a key never goes in a URL: named, whatever its case */
	query_bad("command=sh&access_token=" KEY, API_ERR_INVALID_FIELD, "access_token");
	query_bad("command=sh&Token=x", API_ERR_INVALID_FIELD, "Token");
	query_bad("command=sh&key=x", API_ERR_INVALID_FIELD, "key");
	/* past API_QUERY_MAX */
	char big[API_QUERY_MAX + 64] = "command=";
	memset(big + 8, 'a', API_QUERY_MAX);
	big[API_QUERY_MAX + 8] = '\0';
	query_bad(big, API_ERR_INVALID_FIELD, "query");
	/* the body's very checks */
	same_as_body("command=sh&rows=0", "{\"command\":[\"sh\"],\"tty\":true,\"rows\":0}");
	same_as_body("command=sh&cols=x", "{\"command\":[\"sh\"],\"tty\":true,\"cols\":\"x\"}");
	same_as_body("command=sh&timeout_s=0",
		     "{\"command\":[\"sh\"],\"tty\":true,\"timeout_s\":0}");
	same_as_body("command=sh&env=1X%3Dy",
		     "{\"command\":[\"sh\"],\"tty\":true,\"env\":{\"1X\":\"y\"}}");
}

static struct api_request handshake(const char *method, const char *path, const char *protocols)
{
	return (struct api_request){.method = method,
				    .path = path,
				    .upgrade = "websocket",
				    .connection = "Upgrade",
				    .ws_protocol = protocols};
}

static void test_key_in_subprotocol(void **state)
{
	(void)state;
	char buf[API_WS_BEARER_SIZE];
	struct api_request req =
	    handshake("GET", EXEC_PATH, API_WS_PROTOCOL ", " API_WS_KEY_PREFIX KEY_B64);
	assert_int_equal(api_ws_bearer(&req, buf), 1);
	assert_string_equal(buf, "Bearer " KEY);
	assert_true(api_request_has_key(&req));
	/* the POST form's handshake may carry it too */
	req.method = "POST";
	assert_int_equal(api_ws_bearer(&req, buf), 1);
	/* not a terminal's handshake: never read there */
	req = handshake("GET", "/v1/sandboxes", API_WS_KEY_PREFIX KEY_B64);
	assert_int_equal(api_ws_bearer(&req, buf), 0);
	assert_false(api_request_has_key(&req));
	req = handshake("GET", EXEC_PATH, API_WS_KEY_PREFIX KEY_B64);
	req.upgrade = NULL;
	assert_int_equal(api_ws_bearer(&req, buf), 0);
	assert_false(api_request_has_key(&req));
	/* none */
	req = handshake("GET", EXEC_PATH, API_WS_PROTOCOL);
	assert_int_equal(api_ws_bearer(&req, buf), 0);
	assert_false(api_request_has_key(&req));
	/* malformed: not base64url, padded, the standard alphabet, empty, twice, too long, not
	 * printable */
	static const char *const bad[] = {
	    API_WS_KEY_PREFIX "a*b",
	    API_WS_KEY_PREFIX "YWJj=",
	    API_WS_KEY_PREFIX "a+b/",
	    API_WS_KEY_PREFIX,
	    API_WS_KEY_PREFIX KEY_B64 "," API_WS_KEY_PREFIX KEY_B64,
	    API_WS_KEY_PREFIX "YQ",   /* "a": fine */
	    API_WS_KEY_PREFIX "YSBi", /* "a b": a space */
	    API_WS_KEY_PREFIX "AA",   /* a NUL */
	    API_WS_KEY_PREFIX "a",    /* 1 mod 4 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req = handshake("GET", EXEC_PATH, bad[i]);
		int want = i == 5 ? 1 : -EINVAL;
		if (api_ws_bearer(&req, buf) != want)
			fail_msg("%s: not %d", bad[i], want);
		assert_true(api_request_has_key(&req));
	}
	char big[API_WS_KEY_B64_MAX + 64] = API_WS_KEY_PREFIX;
	size_t n = strlen(big);
	memset(big + n, 'Y', API_WS_KEY_B64_MAX + 4);
	big[n + API_WS_KEY_B64_MAX + 4] = '\0';
	req = handshake("GET", EXEC_PATH, big);
	assert_int_equal(api_ws_bearer(&req, buf), -EINVAL);
}

static void test_subprotocol_echo(void **state)
{
	(void)state;
	struct api_error e = {0};
	bool echo = true;
	struct api_request req = handshake("GET", EXEC_PATH, NULL);
	assert_int_equal(api_ws_protocol_check(&req, &echo, &e), 0);
	assert_false(echo);
	req.ws_protocol = "chat, " API_WS_PROTOCOL;
	assert_int_equal(api_ws_protocol_check(&req, &echo, &e), 0);
	assert_true(echo);
	req.ws_protocol = API_WS_KEY_PREFIX KEY_B64;
	assert_int_equal(api_ws_protocol_check(&req, &echo, &e), -EINVAL);
	assert_int_equal(e.code, API_ERR_BAD_HANDSHAKE);
	assert_string_equal(e.field, "Sec-WebSocket-Protocol");
	assert_null(strstr(e.message, KEY_B64));
}

static void test_origin(void **state)
{
	(void)state;
	assert_true(api_origin_is_valid("https://console.example"));
	assert_true(api_origin_is_valid("http://127.0.0.1:8080"));
	assert_true(api_origin_is_valid("https://[::1]:8443"));
	static const char *const bad[] = {"",
					  "console.example",
					  "https://",
					  "https://a.example/",
					  "https://a.example/x",
					  "https://u@a.example",
					  "https://a.example?x",
					  "ftp://a.example",
					  "null"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (api_origin_is_valid(bad[i]))
			fail_msg("%s is taken", bad[i]);

	static const char *const origins[] = {"https://console.example"};
	struct api_ctx ctx = {.origins = origins, .norigins = 1};
	struct api_error e = {0};
	struct api_request req = handshake("GET", EXEC_PATH, NULL);
	assert_int_equal(api_origin_check(&ctx, &req, &e), 0); /* not a page */
	req.origin = "https://CONSOLE.example";
	assert_int_equal(api_origin_check(&ctx, &req, &e), 0);
	static const char *const refused[] = {"https://evil.example", "null",
					      "https://console.example.evil.example",
					      "http://console.example"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		req.origin = refused[i];
		assert_int_equal(api_origin_check(&ctx, &req, &e), -EINVAL);
		assert_int_equal(e.code, API_ERR_FORBIDDEN);
		assert_string_equal(e.field, "Origin");
	}
	ctx.norigins = 0; /* none allowed: every page refused */
	req.origin = "https://console.example";
	assert_int_equal(api_origin_check(&ctx, &req, &e), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query_to_request),
	    cmocka_unit_test(test_query_errors),
	    cmocka_unit_test(test_key_in_subprotocol),
	    cmocka_unit_test(test_subprotocol_echo),
	    cmocka_unit_test(test_origin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
