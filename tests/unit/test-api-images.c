/*
 * test-api-images.c - the image routes through api_handle() and the
 * upload of POST /v1/images/import (api_upload_begin/write/end), with a
 * real store and a real image store, without a socket: who may do what
 * (members read, admins change), an import streamed in chunks, inspect
 * by name (slashes and all) and by digest, rm refused while in use
 * (image_in_use), a malformed archive (invalid_image), an archive over
 * the limit (413, announced or not), a bad ref (invalid_id), prune;
 * an export (an admin's: a file answer, an OCI layout tar, nothing left
 * in the store's tmp/).
 * POST /v1/images/bootstrap's refusals before debootstrap runs (who, each
 * field named, a keyring that is not there).
 * Imports chown: root only, skipped otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "auth/key.h"

#define NOW 1700000000123

struct fx {
	char dir[128];
	struct store *st;
	struct image_store *images;
	struct api_ctx ctx;
	char member[AUTH_KEY_TEXT_MAX + 16], admin[AUTH_KEY_TEXT_MAX + 16];
	char *archive;
	size_t archive_len;
};

static int64_t now_ms(void)
{
	return NOW;
}

static void make_key(struct fx *f, const char *tenant, enum key_role role, char *header)
{
	char text[AUTH_KEY_TEXT_MAX];
	struct auth_key key;
	struct error err = {0};
	assert_int_equal(auth_key_new(text, &key, &err), 0);
	struct key_record k = {.role = role, .created_at = NOW};
	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	memcpy(k.id, key.id, sizeof(k.id));
	memcpy(k.hash, key.hash, sizeof(k.hash));
	assert_int_equal(store_key_insert(f->st, &k, &err), 0);
	snprintf(header, AUTH_KEY_TEXT_MAX + 16, "Bearer %s", text);
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int n;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void tar_add(struct archive *a, const char *path, const void *data, size_t len)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_write_header(a, e);
	archive_write_data(a, data, len);
	archive_entry_free(e);
}

/* A docker save archive of one image (etc/hello = "api") into f->archive. */
static void make_archive(struct fx *f)
{
	size_t cap = 1 << 20, llen = 0, alen = 0;
	char *layer = malloc(cap);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_memory(a, layer, cap, &llen);
	struct archive_entry *dir = archive_entry_new();
	archive_entry_set_pathname(dir, "etc");
	archive_entry_set_filetype(dir, AE_IFDIR);
	archive_entry_set_perm(dir, 0755);
	archive_write_header(a, dir);
	archive_entry_free(dir);
	tar_add(a, "etc/hello", "api", 3);
	archive_write_close(a);
	archive_write_free(a);
	char lhex[65], chex[65], config[512], cname[80], manifest[256];
	sha256_hex(layer, llen, lhex);
	snprintf(config, sizeof(config),
		 "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":{\"Env\":[\"X=1\"],"
		 "\"Cmd\":[\"sh\"]},\"rootfs\":{\"diff_ids\":[\"sha256:%s\"]}}",
		 lhex);
	sha256_hex(config, strlen(config), chex);
	snprintf(cname, sizeof(cname), "%s.json", chex);
	snprintf(manifest, sizeof(manifest),
		 "[{\"Config\":\"%s\",\"RepoTags\":null,\"Layers\":[\"l/layer.tar\"]}]", cname);
	f->archive = malloc(cap);
	a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_memory(a, f->archive, cap, &alen);
	tar_add(a, "manifest.json", manifest, strlen(manifest));
	tar_add(a, cname, config, strlen(config));
	tar_add(a, "l/layer.tar", layer, llen);
	archive_write_close(a);
	archive_write_free(a);
	f->archive_len = alen;
	free(layer);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test-api-images.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	char db[200];
	snprintf(db, sizeof(db), "%s/store.db", f->dir);
	struct error err = {0};
	assert_int_equal(store_open_sqlite(db, &f->st, &err), 0);
	assert_int_equal(store_tenant_insert(f->st, "team-a", NOW, NULL, &err), 0);
	assert_int_equal(image_store_open(f->dir, &f->images, &err), 0);
	f->ctx = (struct api_ctx){.store = f->st,
				  .state_dir = f->dir,
				  .now_ms = now_ms,
				  .tcp = true,
				  .peer_uid = -1,
				  .images = f->images};
	make_key(f, "team-a", KEY_ROLE_MEMBER, f->member);
	make_key(f, TENANT_DEFAULT, KEY_ROLE_ADMIN, f->admin);
	make_archive(f);
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->st);
	image_store_free(f->images);
	assert_int_equal(nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
	free(f->archive);
	free(f);
	return 0;
}

struct reply {
	int status;
	json_t *json;
};

static struct reply call(struct fx *f, const char *auth, const char *method, const char *path)
{
	struct api_request req = {.method = method, .path = path, .authorization = auth};
	struct api_response res = {0};
	assert_int_equal(api_handle(&f->ctx, &req, &res), 0);
	struct reply r = {.status = res.status};
	r.json = res.body ? json_loads(res.body, 0, NULL) : NULL;
	api_response_release(&res);
	return r;
}

/* A request with a JSON body. */
static struct reply call_json(struct fx *f, const char *auth, const char *method, const char *path,
			      const char *body)
{
	struct api_request req = {.method = method,
				  .path = path,
				  .authorization = auth,
				  .content_type = "application/json",
				  .body = body,
				  .body_len = strlen(body)};
	struct api_response res = {0};
	assert_int_equal(api_handle(&f->ctx, &req, &res), 0);
	struct reply r = {.status = res.status};
	r.json = res.body ? json_loads(res.body, 0, NULL) : NULL;
	api_response_release(&res);
	return r;
}

static const char *code_of(const struct reply *r)
{
	return json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
}

/* An import: the body in chunks of chunk bytes; announce: its Content-Length first. */
static struct reply upload(struct fx *f, const char *auth, const char *query, const char *body,
			   size_t len, size_t chunk, bool announce)
{
	struct api_request req = {
	    .method = "POST", .path = "/v1/images/import", .query = query, .authorization = auth};
	assert_true(api_request_takes_raw_body(&req));
	struct api_upload *u = api_upload_begin(&f->ctx, &req);
	assert_non_null(u);
	if (!announce || api_upload_expect(u, len))
		for (size_t off = 0; off < len; off += chunk)
			assert_true(
			    api_upload_write(u, body + off, off + chunk > len ? len - off : chunk));
	struct api_response res = {0};
	api_upload_end(u, f->st, &res);
	api_upload_free(u);
	struct reply r = {.status = res.status};
	r.json = res.body ? json_loads(res.body, 0, NULL) : NULL;
	api_response_release(&res);
	return r;
}

static void test_import_inspect_rm(void **state)
{
	struct fx *f = *state;
	struct reply r = call(f, f->member, "GET", "/v1/images");
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "images")), 0);
	json_decref(r.json);

	r = upload(f, f->admin, "name=team/tool:1", f->archive, f->archive_len, 1000, true);
	assert_int_equal(r.status, 201);
	assert_string_equal(json_string_value(json_object_get(r.json, "name")), "team/tool:1");
	char digest[80], config[80];
	snprintf(digest, sizeof(digest), "%s",
		 json_string_value(json_object_get(r.json, "digest")));
	snprintf(config, sizeof(config), "%s",
		 json_string_value(json_object_get(r.json, "config_digest")));
	json_decref(r.json);

	/* a member lists and inspects, by name (slashes in the path) and by digest */
	r = call(f, f->member, "GET", "/v1/images/team/tool:1");
	assert_int_equal(r.status, 200);
	json_t *cfg = json_object_get(r.json, "config");
	assert_string_equal(json_string_value(json_array_get(json_object_get(cfg, "env"), 0)),
			    "X=1");
	assert_string_equal(json_string_value(json_array_get(json_object_get(cfg, "cmd"), 0)),
			    "sh");
	assert_int_equal(json_array_size(json_object_get(r.json, "layers")), 1);
	json_decref(r.json);
	char path[160];
	snprintf(path, sizeof(path), "/v1/images/%s", digest);
	r = call(f, f->member, "GET", path);
	assert_int_equal(r.status, 200);
	json_decref(r.json);
	r = call(f, f->member, "GET", "/v1/images/team/other");
	assert_int_equal(r.status, 404);
	json_decref(r.json);
	r = call(f, f->member, "GET", "/v1/images/Team");
	assert_int_equal(r.status, 400);
	assert_string_equal(code_of(&r), "invalid_id");
	json_decref(r.json);

	/* a member changes nothing */
	r = call(f, f->member, "DELETE", "/v1/images/team/tool:1");
	assert_int_equal(r.status, 403);
	json_decref(r.json);
	r = call(f, f->member, "POST", "/v1/images/prune");
	assert_int_equal(r.status, 403);
	json_decref(r.json);
	r = upload(f, f->member, NULL, f->archive, f->archive_len, 4096, true);
	assert_int_equal(r.status, 403);
	json_decref(r.json);

	/* in use: refused */
	int use = -1;
	struct error err = {0};
	assert_int_equal(image_use_begin(f->dir, config, &use, &err), 0);
	r = call(f, f->admin, "DELETE", "/v1/images/team/tool:1");
	assert_int_equal(r.status, 409);
	assert_string_equal(code_of(&r), "image_in_use");
	json_decref(r.json);
	image_use_end(use);
	r = call(f, f->admin, "DELETE", "/v1/images/team/tool:1");
	assert_int_equal(r.status, 200);
	json_decref(r.json);
	r = call(f, f->admin, "GET", "/v1/images/team/tool:1");
	assert_int_equal(r.status, 404);
	json_decref(r.json);
	r = call(f, f->admin, "POST", "/v1/images/prune");
	assert_int_equal(r.status, 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "blobs_removed")), 0);
	json_decref(r.json);
}

static void test_import_refusals(void **state)
{
	struct fx *f = *state;
	/* not an image */
	struct reply r = upload(f, f->admin, NULL, "garbage", 7, 7, true);
	assert_int_equal(r.status, 400);
	assert_string_equal(code_of(&r), "invalid_image");
	json_decref(r.json);
	/* a bad name */
	r = upload(f, f->admin, "name=Bad", f->archive, f->archive_len, 4096, true);
	assert_int_equal(r.status, 400);
	assert_string_equal(code_of(&r), "invalid_field");
	json_decref(r.json);
	/* over the limit: announced (answered before the body), or found as it comes */
	f->ctx.image_import_max = f->archive_len - 1;
	r = upload(f, f->admin, NULL, f->archive, f->archive_len, 4096, true);
	assert_int_equal(r.status, 413);
	assert_string_equal(code_of(&r), "body_too_large");
	json_decref(r.json);
	r = upload(f, f->admin, NULL, f->archive, f->archive_len, 4096, false);
	assert_int_equal(r.status, 413);
	json_decref(r.json);
	f->ctx.image_import_max = 0;
	/* nothing of any of them is left */
	r = call(f, f->admin, "GET", "/v1/images");
	assert_int_equal(json_array_size(json_object_get(r.json, "images")), 0);
	json_decref(r.json);
	char tmp[200];
	snprintf(tmp, sizeof(tmp), "%s/images/tmp", f->dir);
	assert_int_equal(rmdir(tmp), 0); /* empty */
	assert_int_equal(mkdir(tmp, 0700), 0);
}

static void test_export(void **state)
{
	struct fx *f = *state;
	struct reply r =
	    upload(f, f->admin, "name=team/tool:1", f->archive, f->archive_len, 4096, true);
	assert_int_equal(r.status, 201);
	json_decref(r.json);
	r = call(f, f->member, "GET", "/v1/images/team/tool:1/export");
	assert_int_equal(r.status, 403);
	json_decref(r.json);
	r = call(f, f->admin, "GET", "/v1/images/team/none:1/export");
	assert_int_equal(r.status, 404);
	json_decref(r.json);
	/* the word ends the path: "export" alone is an image's name; a DELETE is not an export */
	struct api_match m;
	api_route_match("GET", "/v1/images/export", &m);
	assert_int_equal(m.route->id, API_ROUTE_IMAGE_GET);
	api_route_match("GET", "/v1/images/a/b:1/export", &m);
	assert_int_equal(m.route->id, API_ROUTE_IMAGE_EXPORT);
	assert_int_equal(m.param_len, 5);
	assert_memory_equal(m.param, "a/b:1", 5);
	api_route_match("DELETE", "/v1/images/a/export", &m);
	assert_int_equal(m.route->id, API_ROUTE_IMAGE_DELETE);
	assert_int_equal(m.param_len, 8);

	struct api_request req = {
	    .method = "GET", .path = "/v1/images/team/tool:1/export", .authorization = f->admin};
	struct api_response res = {0};
	assert_int_equal(api_handle(&f->ctx, &req, &res), 0);
	assert_int_equal(res.status, 200);
	assert_int_equal(res.kind, API_RESPONSE_FILE);
	assert_string_equal(res.content_type, "application/x-tar");
	int fd = api_response_take_fd(&res);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal((uint64_t)st.st_size, res.size);
	assert_int_equal(st.st_nlink, 0); /* unlinked: nothing stays in the store */
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_fd(a, fd, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	bool index = false;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		index |= strcmp(archive_entry_pathname(e), "index.json") == 0;
		n++;
	}
	archive_read_free(a);
	close(fd);
	api_response_release(&res);
	assert_true(index);
	assert_int_equal(n, 7); /* oci-layout, index.json, blobs/, blobs/sha256/, 3 blobs */
	char tmp[200];
	snprintf(tmp, sizeof(tmp), "%s/images/tmp", f->dir);
	assert_int_equal(rmdir(tmp), 0); /* empty */
	assert_int_equal(mkdir(tmp, 0700), 0);
}

static const char *field_of(const struct reply *r)
{
	return json_string_value(json_object_get(json_object_get(r->json, "error"), "field"));
}

/* Refused before debootstrap runs: nothing reaches the network. */
static void test_bootstrap_refusals(void **state)
{
	struct fx *f = *state;
	static const char *const path = "/v1/images/bootstrap";
	struct reply r = call_json(f, f->member, "POST", path, "{\"image\":\"debian:bookworm\"}");
	assert_int_equal(r.status, 403);
	json_decref(r.json);
	static const struct {
		const char *body, *code, *field;
	} bad[] = {
	    {"{}", "missing_field", "image"},
	    {"{\"image\":1}", "invalid_field", "image"},
	    {"{\"image\":\"bookworm\"}", "invalid_field", "image"},
	    {"{\"image\":\"debian:Bookworm\"}", "invalid_field", "image"},
	    {"{\"image\":\"debian:b\"}", "invalid_field", "image"},
	    {"{\"image\":\"debian:abcdefghijklmnopq\"}", "invalid_field", "image"},
	    {"{\"image\":\"debian:nosuchsuite\"}", "invalid_field", "image"},
	    {"{\"image\":\"debian:bookworm\",\"name\":\"A B\"}", "invalid_field", "name"},
	    {"{\"image\":\"debian:bookworm\",\"mirror\":\"ftp://h/debian\"}", "invalid_field",
	     "mirror"},
	    {"{\"image\":\"debian:bookworm\",\"mirror\":\"http:///debian\"}", "invalid_field",
	     "mirror"},
	    {"{\"image\":\"debian:bookworm\",\"mirror\":\"http://h/a b\"}", "invalid_field",
	     "mirror"},
	    {"{\"image\":\"debian:bookworm\",\"mirror\":\"http://h/?q=1\"}", "invalid_field",
	     "mirror"},
	    {"{\"image\":\"debian:bookworm\",\"keyring\":\"/k\"}", "unknown_field", "keyring"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = call_json(f, f->admin, "POST", path, bad[i].body);
		if (r.status != 400 || strcmp(code_of(&r), bad[i].code) != 0 ||
		    strcmp(field_of(&r), bad[i].field) != 0)
			fail_msg("%s: %d %s", bad[i].body, r.status, json_dumps(r.json, 0));
		json_decref(r.json);
	}
	/* a mirror's Release is never taken unsigned: no keyring, no bootstrap */
	f->ctx.debian_keyring = "/nonexistent/keyring.gpg";
	r = call_json(f, f->admin, "POST", path, "{\"image\":\"debian:bookworm\"}");
	assert_int_equal(r.status, 500);
	json_decref(r.json);
	r = call(f, f->member, "GET", "/v1/images");
	assert_int_equal(json_array_size(json_object_get(r.json, "images")), 0);
	json_decref(r.json);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("not root: imports chown their trees; skipped\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_import_inspect_rm, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_import_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_export, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bootstrap_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
