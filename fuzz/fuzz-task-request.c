/*
 * fuzz-task-request.c - libFuzzer entry for the request bodies of the API:
 * POST /v1/tasks, and the bodies of the sandbox routes.
 *
 * Each input goes to task_request_parse() and, as a request, through
 * api_handle() against a SQLite store in a scratch directory ($TMPDIR, or
 * /tmp; point TMPDIR at a tmpfs such as /dev/shm when fuzzing, for speed).
 * It checks what must hold for every input:
 *   - a refused body names one of the four request errors and says why;
 *   - an accepted body's canonical spec_json parses again to itself;
 *   - every response is one JSON object (or, for 201, a task that GET
 *     then shows), with the status the error table gives its code.
 * The same bytes also go to the sandbox routes' parsers (create, exec,
 * timeout, kill: a refusal names a request error, an acceptance holds
 * its invariants), and serve as a query string and as a path segment,
 * for the task routes and the sandbox routes' checks.
 *
 * tests/unit/test-fuzz-corpus.c includes this file to replay the corpus
 * in the ordinary (ASan+UBSan) build, without clang or libFuzzer.
 */
#include "api/api.h"
#include "api/sandbox-request.h"
#include "api/task-request.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tasks created before the store starts afresh (it only grows otherwise). */
#define FUZZ_STORE_TASKS_MAX 512

#include "fuzz-check.h"

static struct {
	char dir[256];
	char db[300];
	struct store *st;
	size_t tasks;
} fz;

static void fuzz_store_remove(void)
{
	fz.st = store_close(fz.st);
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		char path[320];
		snprintf(path, sizeof(path), "%s%s", fz.db, suffixes[i]);
		unlink(path);
	}
}

static void fuzz_cleanup(void)
{
	fuzz_store_remove();
	if (fz.dir[0])
		rmdir(fz.dir);
}

static struct store *fuzz_store(void)
{
	if (fz.st && fz.tasks < FUZZ_STORE_TASKS_MAX)
		return fz.st;
	if (!fz.dir[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(fz.dir, sizeof(fz.dir), "%s/fuzz-task-request.XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		CHECK(mkdtemp(fz.dir));
		snprintf(fz.db, sizeof(fz.db), "%s/store.db", fz.dir);
		atexit(fuzz_cleanup);
	}
	fuzz_store_remove();
	struct error err = {0};
	if (store_open_sqlite(fz.db, &fz.st, &err) < 0) {
		fprintf(stderr, "fuzz: %s\n", err.msg);
		abort();
	}
	fz.tasks = 0;
	return fz.st;
}

static int64_t fixed_now(void)
{
	return 1700000000000;
}

/* The response is well-formed, and an error one has the table's status. */
static json_t *check_response(const struct api_response *r)
{
	CHECK(r->audit[0] == '\0'); /* whatever came, its audit row was recorded */
	if (r->kind != API_RESPONSE_BODY)
		return NULL; /* a stream or a file, for the server: checked, nothing to parse */
	CHECK(r->body && r->content_type);
	if (r->status == 200 && strncmp(r->content_type, "text/plain", 10) == 0)
		return NULL; /* logs */
	CHECK(strlen(r->body) == r->body_len);
	json_error_t jerr;
	json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
	CHECK(j && json_is_object(j));
	json_t *e = json_object_get(j, "error");
	if (r->status >= 400) {
		const char *code = json_string_value(json_object_get(e, "code"));
		CHECK(code);
		bool known = false;
		for (int c = 0; c < API_ERR_COUNT; c++)
			if (strcmp(code, api_error_name((enum api_error_code)c)) == 0) {
				CHECK(api_error_status((enum api_error_code)c) == r->status);
				known = true;
			}
		CHECK(known);
		CHECK(json_string_length(json_object_get(e, "message")) > 0);
	} else {
		CHECK(!json_is_object(e)); /* a task has "error": null or a string */
	}
	return j;
}

static void fuzz_parser(const char *body, size_t size)
{
	struct task_request r, again;
	struct api_error e = {0};
	int rc = task_request_parse(body, size, &r, &e);
	if (rc < 0) {
		CHECK(rc == -EINVAL || rc == -ENOMEM);
		if (rc == -EINVAL) {
			CHECK(e.code == API_ERR_INVALID_JSON || e.code == API_ERR_INVALID_FIELD ||
			      e.code == API_ERR_MISSING_FIELD || e.code == API_ERR_UNKNOWN_FIELD);
			CHECK(e.message[0] != '\0');
			CHECK(strlen(e.field) < API_FIELD_MAX);
		}
		return;
	}
	CHECK(r.argc >= 1 && r.argv[r.argc] == NULL && r.env[r.nenv] == NULL);
	CHECK(r.max_attempts >= 1 && r.max_attempts <= TASK_MAX_ATTEMPTS_MAX);
	CHECK(strlen(r.spec_json) == r.spec_len);
	rc = task_request_from_spec_json(r.spec_json, &again, &e);
	CHECK(rc == 0 || rc == -ENOMEM);
	if (rc == 0) {
		CHECK(strcmp(again.spec_json, r.spec_json) == 0);
		CHECK(again.argc == r.argc && again.nenv == r.nenv && again.nfiles == r.nfiles);
		CHECK(again.memory_bytes == r.memory_bytes && again.cpu_milli == r.cpu_milli &&
		      again.pids == r.pids && again.disk_bytes == r.disk_bytes &&
		      again.timeout_ms == r.timeout_ms && again.retry_on == r.retry_on);
		task_request_release(&again);
	}
	task_request_release(&r);
}

static void fuzz_api(const char *body, size_t size)
{
	struct api_ctx ctx = {.store = fuzz_store(), .state_dir = fz.dir, .now_ms = fixed_now};
	struct api_request req = {.method = "POST",
				  .path = "/v1/tasks",
				  .body = body,
				  .body_len = size,
				  .content_type = "application/json"};
	struct api_response res;
	if (api_handle(&ctx, &req, &res) < 0) {
		api_response_release(&res);
		return; /* out of memory */
	}
	json_t *j = check_response(&res);
	CHECK(res.status == 201 || res.status == 400 || res.status == 413 || res.status == 500);
	if (res.status == 201) {
		fz.tasks++;
		char path[64];
		snprintf(path, sizeof(path), "/v1/tasks/%s",
			 json_string_value(json_object_get(j, "id")));
		struct api_request get = {.method = "GET", .path = path};
		struct api_response got;
		CHECK(api_handle(&ctx, &get, &got) == 0 && got.status == 200);
		json_decref(check_response(&got));
		api_response_release(&got);
	}
	json_decref(j);
	api_response_release(&res);
}

static void check_refusal(int rc, const struct api_error *e)
{
	CHECK(rc == -EINVAL || rc == -ENOMEM);
	if (rc == -EINVAL) {
		CHECK(e->code == API_ERR_INVALID_JSON || e->code == API_ERR_INVALID_FIELD ||
		      e->code == API_ERR_MISSING_FIELD || e->code == API_ERR_UNKNOWN_FIELD);
		CHECK(e->message[0] != '\0');
	}
}

static void fuzz_sandbox_bodies(const char *body, size_t size)
{
	struct api_error e = {0};
	struct sandbox_request sr;
	int rc = sandbox_request_parse(body, size, &sr, &e);
	if (rc == 0) {
		json_t *spec = json_loads(sr.spec_json, 0, NULL);
		CHECK(spec && json_is_object(json_object_get(spec, "limits")) &&
		      json_is_object(json_object_get(spec, "env")));
		json_decref(spec);
		CHECK(sr.timeout_ms >= 1000 && sr.timeout_ms <= SANDBOX_TIMEOUT_MAX_S * 1000LL);
		sandbox_request_release(&sr);
	} else {
		check_refusal(rc, &e);
	}
	struct exec_request x;
	rc = exec_request_parse(body, size, &x, &e);
	if (rc == 0) {
		CHECK(json_array_size(x.command) >= 1 && (x.cwd[0] == '/' || x.cwd[0] == '\0'));
		CHECK(x.stdin_len <= EXEC_STDIN_MAX && x.timeout_ms <= EXEC_TIMEOUT_MAX_S * 1000LL);
		exec_request_release(&x);
	} else {
		check_refusal(rc, &e);
	}
	int64_t ms;
	int sig;
	rc = sandbox_timeout_parse(body, size, &ms, &e);
	CHECK(rc == 0 ? ms >= 1000 && ms <= SANDBOX_TIMEOUT_MAX_S * 1000LL
		      : rc == -EINVAL || rc == -ENOMEM);
	rc = process_kill_parse(body, size, &sig, &e);
	CHECK(rc == 0 ? sig >= 1 && sig <= 64 : rc == -EINVAL || rc == -ENOMEM);
}

/* The bytes as the query and the {id} of the sandbox routes' checks. */
static void fuzz_sandbox_checks(const char *text)
{
	char path[600];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files", text);
	const struct api_request reqs[] = {
	    {.method = "GET",
	     .path = "/v1/sandboxes/sbx_8e3x0k0c3y7qk4f4h5vbb2s1mw/files",
	     .query = text},
	    {.method = "GET", .path = "/v1/sandboxes", .query = text},
	    {.method = "PUT", .path = path, .query = "path=%2Ftmp%2Fa"},
	};
	/* no fleet: every check runs, and a request that passes them all is a 500 */
	struct api_ctx ctx = {.store = fuzz_store(), .state_dir = fz.dir, .now_ms = fixed_now};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		struct api_response res = {0};
		if (api_request_takes_raw_body(&reqs[i])) {
			struct api_upload *u = api_upload_begin(&ctx, &reqs[i]);
			CHECK(u != NULL);
			CHECK(api_upload_write(u, "x", 1));
			api_upload_end(u, ctx.store, &res);
			api_upload_free(u);
		} else {
			CHECK(api_handle(&ctx, &reqs[i], &res) == 0);
		}
		json_decref(check_response(&res));
		api_response_release(&res);
	}
}

/* The bytes as a query string and as the {id} of a path. */
static void fuzz_query_and_path(const char *s, size_t size)
{
	if (size > 512 || memchr(s, '\0', size))
		return;
	char text[513], path[600];
	memcpy(text, s, size);
	text[size] = '\0';
	struct api_ctx ctx = {.store = fuzz_store(), .state_dir = fz.dir, .now_ms = fixed_now};
	snprintf(path, sizeof(path), "/v1/tasks/%s/events", text);
	const struct api_request reqs[] = {
	    {.method = "GET", .path = "/v1/tasks", .query = text},
	    {.method = "GET", .path = path},
	    {.method = "GET", .path = text},
	};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		struct api_response res;
		if (api_handle(&ctx, &reqs[i], &res) == 0)
			json_decref(check_response(&res));
		api_response_release(&res);
	}
	fuzz_sandbox_checks(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	fuzz_parser(body, size);
	fuzz_api(body, size);
	fuzz_sandbox_bodies(body, size);
	fuzz_query_and_path(body, size);
	return 0;
}
