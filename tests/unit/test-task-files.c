/*
 * test-task-files.c - the binary-safe parts of POST /v1/tasks: "files"
 * with {"base64"} and {"tar_base64"} contents, and "artifacts": every rule
 * with the field it names, the canonical spec they give, and its round
 * trip through task_request_from_spec_json().
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/task-request.h"
#include "base/base64.h"
#include "base/buf.h"
#include "core/limits.h"

static void parse_ok(const char *body, struct task_request *r)
{
	struct api_error e = {0};
	int rc = task_request_parse(body, strlen(body), r, &e);
	if (rc != 0)
		fail_msg("%.300s: %d %s field=%s: %s", body, rc, api_error_name(e.code), e.field,
			 e.message);
}

static void parse_bad(const char *body, const char *field, const char *says)
{
	struct task_request r = {0};
	struct api_error e = {0};
	int rc = task_request_parse(body, strlen(body), &r, &e);
	if (rc != -EINVAL || e.code != API_ERR_INVALID_FIELD || strcmp(e.field, field) != 0 ||
	    !strstr(e.message, says))
		fail_msg("%.300s: got %d %s field '%s' (%s), want field '%s' saying '%s'", body, rc,
			 api_error_name(e.code), e.field, e.message, field, says);
}

/* The canonical spec of body, re-read: the same spec, the same files. */
static void check_round_trip(const struct task_request *r)
{
	struct task_request again = {0};
	struct api_error e = {0};
	assert_int_equal(task_request_from_spec_json(r->spec_json, &again, &e), 0);
	assert_string_equal(again.spec_json, r->spec_json);
	assert_int_equal(again.nfiles, r->nfiles);
	for (size_t i = 0; i < r->nfiles; i++) {
		assert_string_equal(again.files[i].path, r->files[i].path);
		assert_int_equal(again.files[i].len, r->files[i].len);
	}
	task_request_release(&again);
}

static void test_base64_files(void **state)
{
	(void)state;
	struct task_request r = {0};
	/* "AAEC/w==" is 00 01 02 ff: a NUL and a byte that is not UTF-8 */
	parse_ok("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{\"base64\":\"AAEC/w==\"},"
		 "\"/tmp/t\":\"text\"}}",
		 &r);
	assert_int_equal(r.nfiles, 2);
	assert_string_equal(r.files[0].path, "/tmp/t");
	assert_string_equal(r.files[0].content, "text");
	assert_string_equal(r.files[1].path, "/workspace/b");
	assert_null(r.files[1].content);
	assert_int_equal(r.files[1].len, 4);
	assert_non_null(strstr(r.spec_json, "\"/workspace/b\":{\"base64\":\"AAEC/w==\"}"));
	check_round_trip(&r);
	task_request_release(&r);

	const char *f = "files[\"/workspace/b\"]";
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{\"base64\":\"AAE\"}}}", f,
		  "strict base64");
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{\"base64\":\"AA==AA==\"}}}",
		  f, "strict base64");
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{\"base64\":\"AA\\n==\"}}}",
		  f, "strict base64");
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{\"base64\":1}}}", f,
		  "base64");
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{\"base64\":\"\",\"x\":1}}}",
		  f, "base64");
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":{}}}", f, "base64");
	parse_bad("{\"command\":[\"true\"],\"files\":{\"/workspace/b\":[]}}", f, "base64");
}

/* A body with one base64 file of n zero bytes. */
static char *base64_body(size_t n)
{
	struct buf b = {0};
	char *zeros = calloc(1, n ? n : 1);
	buf_puts(&b, "{\"command\":[\"true\"],\"files\":{\"/workspace/z\":{\"base64\":\"");
	base64_encode(&b, zeros, n);
	buf_puts(&b, "\"}}}");
	free(zeros);
	char *out = NULL;
	size_t len;
	assert_int_equal(buf_steal(&b, &out, &len), 0);
	return out;
}

static void test_base64_counts_decoded_bytes(void **state)
{
	(void)state;
	/* the body's own cap (API_BODY_MAX) is the server's: the parser counts bytes */
	char *body = base64_body(TASK_REQUEST_FILES_BYTES_MAX);
	struct task_request r = {0};
	parse_ok(body, &r);
	assert_int_equal(r.files[0].len, TASK_REQUEST_FILES_BYTES_MAX);
	task_request_release(&r);
	free(body);
	body = base64_body(TASK_REQUEST_FILES_BYTES_MAX + 1);
	parse_bad(body, "files", "bytes in all");
	free(body);
}

static void test_artifacts(void **state)
{
	(void)state;
	struct task_request r = {0};
	parse_ok("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/out/\",\"/workspace/r.csv\","
		 "\"/tmp/x\"]}",
		 &r);
	assert_non_null(strstr(
	    r.spec_json, "\"artifacts\":[\"/workspace/out/\",\"/workspace/r.csv\",\"/tmp/x\"]"));
	check_round_trip(&r);
	task_request_release(&r);
	parse_ok("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/\",\"/tmp/\"]}", &r);
	task_request_release(&r);
	/* none: not in the canonical spec at all */
	parse_ok("{\"command\":[\"true\"],\"artifacts\":[]}", &r);
	assert_null(strstr(r.spec_json, "artifacts"));
	task_request_release(&r);

	parse_bad("{\"command\":[\"true\"],\"artifacts\":\"/workspace/x\"}", "artifacts", "array");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[1]}", "artifacts[0]", "string");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/etc/passwd\"]}", "artifacts[0]",
		  "under /workspace/ or /tmp/");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/a/../b\"]}", "artifacts[0]",
		  ". or ..");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace//b\"]}", "artifacts[0]",
		  "empty components");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/b//\"]}", "artifacts[0]",
		  "empty components");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspaces/b\"]}", "artifacts[0]",
		  "under /workspace/");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace\"]}", "artifacts[0]",
		  "under /workspace/");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/a\",\"/workspace/a/\"]}",
		  "artifacts[1]", "inside");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/a/b\",\"/workspace/a/\"]}",
		  "artifacts[1]", "a parent of");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/\",\"/workspace/x\"]}",
		  "artifacts[1]", "inside");
	parse_bad("{\"command\":[\"true\"],\"artifacts\":[\"/workspace/a\\u0000\"]}",
		  "artifacts[0]", "NUL");

	struct buf b = {0};
	buf_puts(&b, "{\"command\":[\"true\"],\"artifacts\":[");
	for (int i = 0; i <= TASK_ARTIFACTS_PATHS_MAX; i++)
		buf_printf(&b, "%s\"/workspace/%d\"", i ? "," : "", i);
	buf_puts(&b, "]}");
	parse_bad(b.data, "artifacts", "more than 32 paths");
	buf_release(&b);
}

/* A tar of the given members: type 'f' (content) or 'd' or 'l' (a symlink to content). */
struct member {
	char type;
	const char *name;
	const char *content;
	size_t len;
};

static char *tar_body(const char *key, const struct member *m, size_t n)
{
	static char tar[1 << 16];
	size_t used = 0;
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_memory(a, tar, sizeof(tar), &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, m[i].name);
		archive_entry_set_perm(e, 0644);
		if (m[i].type == 'f') {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_size(e, (la_int64_t)m[i].len);
		} else if (m[i].type == 'd') {
			archive_entry_set_filetype(e, AE_IFDIR);
		} else {
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, m[i].content);
		}
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (m[i].type == 'f' && m[i].len)
			assert_int_equal(archive_write_data(a, m[i].content, m[i].len),
					 (la_ssize_t)m[i].len);
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	struct buf b = {0};
	buf_printf(&b, "{\"command\":[\"true\"],\"files\":{\"%s\":{\"tar_base64\":\"", key);
	base64_encode(&b, tar, used);
	buf_puts(&b, "\"}}}");
	char *out = NULL;
	size_t len;
	assert_int_equal(buf_steal(&b, &out, &len), 0);
	return out;
}

static void test_tar_directories(void **state)
{
	(void)state;
	const struct member ok[] = {
	    {'d', "./", NULL, 0},
	    {'d', "sub/", NULL, 0},
	    {'f', "./sub/b.bin", "\0\1\xff", 3},
	    {'f', "t.txt", "text\n", 5},
	    {'d', "empty/", NULL, 0},
	};
	char *body = tar_body("/workspace/d/", ok, 5);
	struct task_request r = {0};
	parse_ok(body, &r);
	free(body);
	assert_int_equal(r.nfiles, 2);
	assert_string_equal(r.files[0].path, "/workspace/d/sub/b.bin");
	assert_null(r.files[0].content);
	assert_int_equal(r.files[0].len, 3);
	assert_string_equal(r.files[1].path, "/workspace/d/t.txt");
	assert_string_equal(r.files[1].content, "text\n");
	/* the canonical spec has the files, not the tar */
	assert_null(strstr(r.spec_json, "tar_base64"));
	assert_non_null(strstr(r.spec_json, "\"/workspace/d/sub/b.bin\":{\"base64\":\"AAH/\"}"));
	check_round_trip(&r);
	task_request_release(&r);

	const char *f = "files[\"/workspace/d/\"]";
	const struct member dotdot[] = {{'f', "../x", "x", 1}};
	const struct member inner_dotdot[] = {{'f', "a/../../x", "x", 1}};
	const struct member absolute[] = {{'f', "/etc/x", "x", 1}};
	const struct member link[] = {{'l', "l", "/etc/shadow", 0}};
	const struct member empty_name[] = {{'f', "a//b", "x", 1}};
	struct {
		const struct member *m;
		const char *says;
	} bad[] = {
	    {dotdot, "canonical"},	  {inner_dotdot, "canonical"}, {absolute, "canonical"},
	    {link, "not a regular file"}, {empty_name, "canonical"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		body = tar_body("/workspace/d/", bad[i].m, 1);
		parse_bad(body, f, bad[i].says);
		free(body);
	}
	body = tar_body("/workspace/d", ok, 5);
	parse_bad(body, "files[\"/workspace/d\"]", "end in one '/'");
	free(body);
	body = tar_body("/etc/", ok, 5);
	parse_bad(body, "files[\"/etc/sub/b.bin\"]", "under /workspace/ or /tmp/");
	free(body);
	parse_bad(
	    "{\"command\":[\"true\"],\"files\":{\"/workspace/d/\":{\"tar_base64\":\"AAAA\"}}}", f,
	    "tar");
	/* a member that is also a file of its own */
	body = tar_body("/workspace/d/", ok, 5);
	char *twice = NULL;
	assert_true(asprintf(&twice, "%.*s,\"/workspace/d/t.txt\":\"x\"}}", (int)strlen(body) - 2,
			     body) > 0);
	parse_bad(twice, "files[\"/workspace/d/t.txt\"]", "given twice");
	free(twice);
	free(body);
}

/* {path} is the rest of the path, slashes and all; {id} is still checked as a task's. */
static void test_artifact_routes(void **state)
{
	(void)state;
	struct api_match m;
	api_route_match("GET", "/v1/tasks/tsk_a/artifacts/workspace/out/a.bin", &m);
	assert_non_null(m.route);
	assert_int_equal(m.route->id, API_ROUTE_TASK_ARTIFACT);
	assert_int_equal(m.param_len, 5);
	assert_memory_equal(m.param, "tsk_a", 5);
	assert_int_equal(m.param2_len, strlen("workspace/out/a.bin"));
	assert_memory_equal(m.param2, "workspace/out/a.bin", m.param2_len);
	api_route_match("GET", "/v1/tasks/tsk_a/artifacts", &m);
	assert_int_equal(m.route->id, API_ROUTE_TASK_ARTIFACTS);
	api_route_match("GET", "/v1/tasks/tsk_a/artifacts/", &m);
	assert_null(m.route); /* an empty {path} is no path */
	api_route_match("POST", "/v1/tasks/tsk_a/artifacts/x", &m);
	assert_null(m.route);
	assert_true(m.path_known);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_base64_files),
	    cmocka_unit_test(test_base64_counts_decoded_bytes),
	    cmocka_unit_test(test_artifacts),
	    cmocka_unit_test(test_tar_directories),
	    cmocka_unit_test(test_artifact_routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
