/*
 * test-store-sandboxes.c - the contract of store.h, part three:
 * interactive sandboxes. Insert and its limits, get, list (the pool left
 * out unless asked for, filters, order, pages), claim from the pool,
 * pause and resume, expiry, end (final), delete, every error, calls
 * inside a caller's transaction, reopening, and claims of one pool
 * racing from several processes. Runs against every backend in
 * store-contract.h.
 */
#include "store-contract.h"

#include <sys/wait.h>
#include <unistd.h>

#define S(s)	 SANDBOX_STATUS_BIT(s)
#define SBX_SPEC "{\"limits\":{\"memory\":268435456,\"cpus\":1},\"env\":{\"A\":\"\xc3\xa9\"}}"
#define ALL_SBX	 ((1u << SANDBOX_STATUS_COUNT) - 1)

/* ---- helpers ----------------------------------------------------------- */

/* Insert a sandbox in status (pooled or running), spec SBX_SPEC; its id goes to id. */
static void sbx_add(struct fx *f, enum sandbox_status status, int64_t created,
		    char id[SANDBOX_ID_SIZE])
{
	struct sandbox_record sb = {.tenant = TENANT_DEFAULT,
				    .status = status,
				    .created_at = created,
				    .spec_json = SBX_SPEC};
	assert_int_equal(sandbox_id_new(sb.id), 0);
	OK(store_sandbox_insert(f->st, &sb, err));
	memcpy(id, sb.id, SANDBOX_ID_SIZE);
}

static struct sandbox_record sbx_get(struct fx *f, const char *id)
{
	struct sandbox_record sb = {0};
	OK(store_sandbox_get(f->st, id, &sb, err));
	return sb;
}

static enum sandbox_status sbx_status(struct fx *f, const char *id)
{
	struct sandbox_record sb = sbx_get(f, id);
	sandbox_record_release(&sb);
	return sb.status;
}

static bool sbx_exists(struct fx *f, const char *id)
{
	struct sandbox_record sb = {0};
	struct error err = {0};
	int r = store_sandbox_get(f->st, id, &sb, &err);
	if (r != 0 && r != -ENOENT)
		fail_msg("store_sandbox_get(%s) = %d: %s", id, r, err.msg);
	sandbox_record_release(&sb);
	return r == 0;
}

struct sbx_ids {
	size_t n;
	char v[64][SANDBOX_ID_SIZE];
	int stop_after;		/* > 0: return -EINTR on this call */
	struct store *end_each; /* non-NULL: end each sandbox from inside fn */
};

static int collect_sbx(const struct sandbox_record *sb, void *data)
{
	struct sbx_ids *ids = data;
	assert_true(ids->n < 64);
	assert_non_null(sb->spec_json);
	assert_non_null(sb->metadata_json);
	memcpy(ids->v[ids->n++], sb->id, SANDBOX_ID_SIZE);
	if (ids->end_each)
		OK(store_sandbox_end(ids->end_each, sb->id, 99, "stopped", NULL, err));
	return ids->stop_after && (int)ids->n == ids->stop_after ? -EINTR : 0;
}

static void sbx_list(struct fx *f, uint32_t statuses, const char *after, size_t limit,
		     struct sbx_ids *ret)
{
	struct sandbox_filter flt = {.statuses = statuses, .after_id = after, .limit = limit};
	memset(ret, 0, sizeof(*ret));
	OK(store_sandbox_list(f->st, &flt, collect_sbx, ret, err));
}

/* A string of exactly n bytes that is a JSON object: {"x":"aaa...a"}. */
static char *object_of_size(size_t n)
{
	assert_true(n >= 8);
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, "{\"x\":\"", 6);
	memset(s + 6, 'a', n - 8);
	memcpy(s + n - 2, "\"}", 3);
	assert_int_equal(strlen(s), n);
	return s;
}

/* ---- insert, get ------------------------------------------------------- */

static void test_insert_get_round_trip(void **state)
{
	struct fx *f = *state;
	struct sandbox_record in = {
	    .tenant = "acme",
	    .status = SANDBOX_RUNNING,
	    .created_at = 1700000000123,
	    .expires_at = 1700000600123,
	    .spec_json = SBX_SPEC,
	    .metadata_json = "{\"owner\":\"ci\",\"n\":[1,2]}",
	    /* the store sets these itself: insert ignores them */
	    .ended_at = 5,
	    .end_reason = "died",
	    .end_detail = "boom",
	};
	assert_int_equal(sandbox_id_new(in.id), 0);
	FAILS(ENOENT, store_sandbox_insert(f->st, &in, err)); /* no such tenant yet */
	OK(store_tenant_insert(f->st, in.tenant, 1, NULL, err));
	OK(store_sandbox_insert(f->st, &in, err));
	struct sandbox_record sb = sbx_get(f, in.id);
	assert_string_equal(sb.id, in.id);
	assert_string_equal(sb.tenant, "acme");
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	assert_int_equal(sb.created_at, 1700000000123);
	assert_int_equal(sb.expires_at, 1700000600123);
	assert_int_equal(sb.ended_at, 0);
	assert_null(sb.end_reason);
	assert_null(sb.end_detail);
	assert_string_equal(sb.spec_json, SBX_SPEC);
	assert_string_equal(sb.metadata_json, "{\"owner\":\"ci\",\"n\":[1,2]}");
	sandbox_record_release(&sb);
	assert_null(sb.spec_json); /* release leaves nothing dangling */

	/* pooled, no metadata, no expiry */
	struct sandbox_record pooled = {
	    .tenant = TENANT_DEFAULT, .status = SANDBOX_POOLED, .created_at = 7, .spec_json = "{}"};
	assert_int_equal(sandbox_id_new(pooled.id), 0);
	OK(store_sandbox_insert(f->st, &pooled, err));
	sb = sbx_get(f, pooled.id);
	assert_int_equal(sb.status, SANDBOX_POOLED);
	assert_int_equal(sb.created_at, 7);
	assert_int_equal(sb.expires_at, 0);
	assert_string_equal(sb.spec_json, "{}");
	assert_string_equal(sb.metadata_json, "{}");
	sandbox_record_release(&sb);
}

static void test_insert_errors(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_RUNNING, 10, id);
	struct sandbox_record sb = {.tenant = TENANT_DEFAULT,
				    .status = SANDBOX_POOLED,
				    .created_at = 99,
				    .spec_json = "{}"};
	memcpy(sb.id, id, SANDBOX_ID_SIZE);
	FAILS(EEXIST, store_sandbox_insert(f->st, &sb, err));
	struct sandbox_record old = sbx_get(f, id); /* the first is untouched */
	assert_int_equal(old.status, SANDBOX_RUNNING);
	assert_int_equal(old.created_at, 10);
	assert_string_equal(old.spec_json, SBX_SPEC);
	sandbox_record_release(&old);

	assert_int_equal(sandbox_id_new(sb.id), 0);
	/* a new sandbox is pooled or running */
	static const enum sandbox_status bad_status[] = {SANDBOX_PAUSED, SANDBOX_ENDED,
							 SANDBOX_STATUS_COUNT};
	for (size_t i = 0; i < sizeof(bad_status) / sizeof(bad_status[0]); i++) {
		sb.status = bad_status[i];
		FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	}
	sb.status = SANDBOX_POOLED;
	sb.expires_at = -1;
	FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	sb.expires_at = 0;
	/* the spec and the metadata are JSON objects */
	static char *const not_objects[] = {"",	 "[]",	  "{",		"\"x\"",
					    "1", "{} {}", "{\"a\":1,}", "null"};
	sb.spec_json = NULL;
	FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	for (size_t i = 0; i < sizeof(not_objects) / sizeof(not_objects[0]); i++) {
		sb.spec_json = not_objects[i];
		FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
		sb.spec_json = "{}";
		sb.metadata_json = not_objects[i];
		FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
		sb.metadata_json = NULL;
	}
	/* a tenant's name; a pooled sandbox is the default tenant's */
	static const char *const not_tenants[] = {"", "Acme", "-acme", "acme-", "a b"};
	for (size_t i = 0; i < sizeof(not_tenants) / sizeof(not_tenants[0]); i++) {
		snprintf(sb.tenant, sizeof(sb.tenant), "%s", not_tenants[i]);
		FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	}
	snprintf(sb.tenant, sizeof(sb.tenant), "acme");
	FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	snprintf(sb.tenant, sizeof(sb.tenant), "%s", TENANT_DEFAULT);
	/* ids: ours only, and no task's */
	memcpy(sb.id, "sbx_../", 8);
	FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	assert_int_equal(task_id_new(sb.id), 0);
	FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	memset(sb.id, 'a', sizeof(sb.id)); /* not even terminated */
	FAILS(EINVAL, store_sandbox_insert(f->st, &sb, err));
	FAILS(EINVAL, store_sandbox_insert(f->st, NULL, err));

	struct sbx_ids all;
	sbx_list(f, ALL_SBX, NULL, 10, &all);
	assert_int_equal(all.n, 1);
}

static void test_insert_limits(void **state)
{
	struct fx *f = *state;
	char *spec = object_of_size(SANDBOX_SPEC_MAX);
	char *meta = object_of_size(SANDBOX_METADATA_MAX);
	struct sandbox_record sb = {.tenant = TENANT_DEFAULT,
				    .status = SANDBOX_POOLED,
				    .spec_json = spec,
				    .metadata_json = meta};
	/* one byte past either limit */
	char *big_spec = object_of_size(SANDBOX_SPEC_MAX + 1);
	char *big_meta = object_of_size(SANDBOX_METADATA_MAX + 1);
	assert_int_equal(sandbox_id_new(sb.id), 0);
	sb.spec_json = big_spec;
	FAILS(E2BIG, store_sandbox_insert(f->st, &sb, err));
	sb.spec_json = spec;
	sb.metadata_json = big_meta;
	FAILS(E2BIG, store_sandbox_insert(f->st, &sb, err));
	assert_false(sbx_exists(f, sb.id));
	/* exactly at the limits is fine, and comes back whole */
	sb.metadata_json = meta;
	OK(store_sandbox_insert(f->st, &sb, err));
	struct sandbox_record got = sbx_get(f, sb.id);
	assert_string_equal(got.spec_json, spec);
	assert_string_equal(got.metadata_json, meta);
	sandbox_record_release(&got);
	/* claim has the metadata limit too */
	FAILS(E2BIG, store_sandbox_claim(f->st, sb.id, TENANT_DEFAULT, 5, 0, NULL, big_meta, err));
	assert_int_equal(sbx_status(f, sb.id), SANDBOX_POOLED);
	OK(store_sandbox_claim(f->st, sb.id, TENANT_DEFAULT, 5, 0, NULL, meta, err));
	free(spec);
	free(meta);
	free(big_spec);
	free(big_meta);
}

static void test_get_unknown(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE], task[TASK_ID_SIZE];
	assert_int_equal(sandbox_id_new(id), 0);
	struct sandbox_record sb = {.created_at = 42};
	FAILS(ENOENT, store_sandbox_get(f->st, id, &sb, err));
	FAILS(ENOENT, store_sandbox_get(f->st, "nonsense", &sb, err));
	assert_int_equal(sb.created_at, 42); /* ret is written only on success */
	/* tasks and sandboxes are apart */
	add(f, 1, 1, 0, task);
	FAILS(ENOENT, store_sandbox_get(f->st, task, &sb, err));
	sbx_add(f, SANDBOX_RUNNING, 1, id);
	struct task t = {0};
	FAILS(ENOENT, store_task_get(f->st, id, &t, err));
	FAILS(EINVAL, store_sandbox_get(f->st, NULL, &sb, err));
}

/* ---- list -------------------------------------------------------------- */

static void test_list_filter_and_order(void **state)
{
	struct fx *f = *state;
	char a[SANDBOX_ID_SIZE], b[SANDBOX_ID_SIZE], c[SANDBOX_ID_SIZE], d[SANDBOX_ID_SIZE],
	    p[SANDBOX_ID_SIZE], q[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_RUNNING, 300, a);
	sbx_add(f, SANDBOX_RUNNING, 100, b);
	sbx_add(f, SANDBOX_POOLED, 50, p);
	sbx_add(f, SANDBOX_RUNNING, 200, c);
	sbx_add(f, SANDBOX_RUNNING, 100, d); /* ties with b: insertion order breaks it */
	sbx_add(f, SANDBOX_POOLED, 60, q);
	OK(store_sandbox_end(f->st, b, 1000, "deleted", NULL, err));
	OK(store_sandbox_set_status(f->st, d, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	struct sbx_ids got;
	/* no statuses: what users may see, the pool left out */
	sbx_list(f, 0, NULL, 10, &got);
	assert_int_equal(got.n, 4);
	assert_string_equal(got.v[0], b);
	assert_string_equal(got.v[1], d);
	assert_string_equal(got.v[2], c);
	assert_string_equal(got.v[3], a);
	/* the pool only when asked for */
	sbx_list(f, S(SANDBOX_POOLED), NULL, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], p);
	assert_string_equal(got.v[1], q);
	sbx_list(f, ALL_SBX, NULL, 10, &got);
	assert_int_equal(got.n, 6);
	assert_string_equal(got.v[0], p);
	assert_string_equal(got.v[1], q);
	assert_string_equal(got.v[2], b);
	sbx_list(f, S(SANDBOX_RUNNING), NULL, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], c);
	assert_string_equal(got.v[1], a);
	sbx_list(f, S(SANDBOX_PAUSED) | S(SANDBOX_ENDED), NULL, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], b);
	assert_string_equal(got.v[1], d);
	sbx_list(f, S(SANDBOX_POOLED) | S(SANDBOX_RUNNING), NULL, 10, &got);
	assert_int_equal(got.n, 4);
	assert_string_equal(got.v[0], p);
	assert_string_equal(got.v[3], a);
	/* a page may start after a sandbox the filter leaves out */
	sbx_list(f, S(SANDBOX_RUNNING), d, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.v[0], c);
	sbx_list(f, 0, p, 10, &got);
	assert_int_equal(got.n, 4);
	/* a claim moves a sandbox to its hand-out time */
	OK(store_sandbox_claim(f->st, p, TENANT_DEFAULT, 250, 0, NULL, NULL, err));
	sbx_list(f, 0, NULL, 10, &got);
	assert_int_equal(got.n, 5);
	assert_string_equal(got.v[3], p);
	assert_string_equal(got.v[4], a);
	/* tasks are not sandboxes */
	char task[TASK_ID_SIZE];
	add(f, 1, 1, 0, task);
	sbx_list(f, ALL_SBX, NULL, 10, &got);
	assert_int_equal(got.n, 6);
}

static void test_list_pages(void **state)
{
	struct fx *f = *state;
	char ids[7][SANDBOX_ID_SIZE];
	static const int64_t created[7] = {10, 20, 20, 20, 40, 40, 40}; /* ties straddle pages */
	for (int i = 0; i < 7; i++)
		sbx_add(f, SANDBOX_RUNNING, created[i], ids[i]);
	/* the same pages whether the filter is none, one status, several or all */
	static const uint32_t filters[] = {0, S(SANDBOX_RUNNING),
					   S(SANDBOX_RUNNING) | S(SANDBOX_ENDED), ALL_SBX};
	struct sbx_ids page;
	for (size_t k = 0; k < sizeof(filters) / sizeof(filters[0]); k++) {
		char after[SANDBOX_ID_SIZE] = "";
		size_t seen = 0;
		static const size_t sizes[] = {3, 3, 1, 0};
		for (int p = 0; p < 4; p++) {
			sbx_list(f, filters[k], p ? after : NULL, 3, &page);
			assert_int_equal(page.n, sizes[p]);
			for (size_t i = 0; i < page.n; i++) /* none missing, none twice */
				assert_string_equal(page.v[i], ids[seen++]);
			if (page.n)
				memcpy(after, page.v[page.n - 1], SANDBOX_ID_SIZE);
		}
		assert_int_equal(seen, 7);
	}
	sbx_list(f, 0, NULL, 1, &page);
	assert_int_equal(page.n, 1);
	assert_string_equal(page.v[0], ids[0]);
}

static void test_list_limits_and_errors(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	for (int i = 0; i < 3; i++)
		sbx_add(f, SANDBOX_RUNNING, i, id);
	struct sbx_ids got = {0};
	struct sandbox_filter flt = {.limit = 0};
	FAILS(EINVAL, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	flt.limit = STORE_LIST_MAX + 1;
	FAILS(EINVAL, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	flt.limit = 10;
	flt.statuses = 1u << SANDBOX_STATUS_COUNT;
	FAILS(EINVAL, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	flt.statuses = 0;
	FAILS(EINVAL, store_sandbox_list(f->st, NULL, collect_sbx, &got, err));
	FAILS(EINVAL, store_sandbox_list(f->st, &flt, NULL, &got, err));
	assert_int_equal(got.n, 0);
	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	flt.after_id = unknown;
	FAILS(ENOENT, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	char task[TASK_ID_SIZE];
	add(f, 1, 1, 0, task);
	flt.after_id = task;
	FAILS(ENOENT, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	sbx_list(f, 0, NULL, STORE_LIST_MAX, &got);
	assert_int_equal(got.n, 3);
	/* fn stops the walk with its own error */
	memset(&got, 0, sizeof(got));
	got.stop_after = 2;
	flt.after_id = NULL;
	struct error e = {0};
	assert_int_equal(store_sandbox_list(f->st, &flt, collect_sbx, &got, &e), -EINTR);
	assert_int_equal(got.n, 2);
	/* rows are read before fn runs: fn may write to the store */
	memset(&got, 0, sizeof(got));
	got.end_each = f->st;
	OK(store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	assert_int_equal(got.n, 3);
	for (size_t i = 0; i < got.n; i++)
		assert_int_equal(sbx_status(f, got.v[i]), SANDBOX_ENDED);
}

/* ---- claim ------------------------------------------------------------- */

static void test_claim(void **state)
{
	struct fx *f = *state;
	char p[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 10, p);
	OK(store_sandbox_claim(f->st, p, TENANT_DEFAULT, 500, 900, NULL, "{\"user\":\"me\"}", err));
	struct sandbox_record sb = sbx_get(f, p);
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	assert_int_equal(sb.created_at, 500); /* when the user got it */
	assert_int_equal(sb.expires_at, 900);
	assert_int_equal(sb.ended_at, 0);
	assert_null(sb.end_reason);
	assert_string_equal(sb.metadata_json, "{\"user\":\"me\"}");
	assert_string_equal(sb.spec_json, SBX_SPEC);
	sandbox_record_release(&sb);
	/* only a pooled sandbox is claimed, and only once */
	FAILS(ESTALE, store_sandbox_claim(f->st, p, TENANT_DEFAULT, 600, 0, NULL, NULL, err));
	OK(store_sandbox_set_status(f->st, p, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	FAILS(ESTALE, store_sandbox_claim(f->st, p, TENANT_DEFAULT, 600, 0, NULL, NULL, err));
	OK(store_sandbox_end(f->st, p, 700, "deleted", NULL, err));
	FAILS(ESTALE, store_sandbox_claim(f->st, p, TENANT_DEFAULT, 800, 0, NULL, NULL, err));
	sb = sbx_get(f, p); /* the failed claims changed nothing */
	assert_int_equal(sb.created_at, 500);
	assert_int_equal(sb.expires_at, 900);
	assert_string_equal(sb.metadata_json, "{\"user\":\"me\"}");
	sandbox_record_release(&sb);

	char r[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_RUNNING, 10, r);
	FAILS(ESTALE, store_sandbox_claim(f->st, r, TENANT_DEFAULT, 600, 0, NULL, NULL, err));

	/* the claimer's spec (its env, its network) replaces the pool's */
	char n[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 15, n);
	const char *net = "{\"env\":{},\"limits\":{},\"network\":{\"mode\":\"open\"}}";
	FAILS(EINVAL, store_sandbox_claim(f->st, n, TENANT_DEFAULT, 600, 0, "[1]", NULL, err));
	OK(store_sandbox_claim(f->st, n, TENANT_DEFAULT, 600, 0, net, NULL, err));
	sb = sbx_get(f, n);
	assert_string_equal(sb.spec_json, net);
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	sandbox_record_release(&sb);

	/* no metadata is {}; no expiry is 0 */
	char q[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 20, q);
	OK(store_sandbox_claim(f->st, q, TENANT_DEFAULT, 30, 0, NULL, NULL, err));
	sb = sbx_get(f, q);
	assert_string_equal(sb.metadata_json, "{}");
	assert_int_equal(sb.expires_at, 0);
	sandbox_record_release(&sb);

	/* errors leave the pooled sandbox pooled */
	char z[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 40, z);
	FAILS(EINVAL, store_sandbox_claim(f->st, z, TENANT_DEFAULT, 50, -1, NULL, NULL, err));
	FAILS(EINVAL, store_sandbox_claim(f->st, z, TENANT_DEFAULT, 50, 0, NULL, "[1]", err));
	FAILS(EINVAL, store_sandbox_claim(f->st, z, TENANT_DEFAULT, 50, 0, NULL, "{\"a\":", err));
	FAILS(EINVAL, store_sandbox_claim(f->st, NULL, TENANT_DEFAULT, 50, 0, NULL, NULL, err));
	sb = sbx_get(f, z);
	assert_int_equal(sb.status, SANDBOX_POOLED);
	assert_int_equal(sb.created_at, 40);
	sandbox_record_release(&sb);
	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	FAILS(ENOENT, store_sandbox_claim(f->st, unknown, TENANT_DEFAULT, 50, 0, NULL, NULL, err));
}

/* ---- pause, resume, expiry --------------------------------------------- */

static void test_pause_resume(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_RUNNING, 10, id);
	OK(store_sandbox_set_status(f->st, id, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	assert_int_equal(sbx_status(f, id), SANDBOX_PAUSED);
	/* fenced by `from`: a second pause finds it paused */
	FAILS(ESTALE, store_sandbox_set_status(f->st, id, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	OK(store_sandbox_set_status(f->st, id, SANDBOX_PAUSED, SANDBOX_RUNNING, err));
	assert_int_equal(sbx_status(f, id), SANDBOX_RUNNING);
	FAILS(ESTALE, store_sandbox_set_status(f->st, id, SANDBOX_PAUSED, SANDBOX_RUNNING, err));
	assert_int_equal(sbx_status(f, id), SANDBOX_RUNNING);

	/* only pause and resume: claims and ends have their own calls */
	static const struct {
		enum sandbox_status from, to;
	} bad[] = {
	    {SANDBOX_POOLED, SANDBOX_RUNNING},	     {SANDBOX_RUNNING, SANDBOX_ENDED},
	    {SANDBOX_PAUSED, SANDBOX_ENDED},	     {SANDBOX_RUNNING, SANDBOX_RUNNING},
	    {SANDBOX_PAUSED, SANDBOX_PAUSED},	     {SANDBOX_ENDED, SANDBOX_RUNNING},
	    {SANDBOX_RUNNING, SANDBOX_POOLED},	     {SANDBOX_RUNNING, SANDBOX_STATUS_COUNT},
	    {SANDBOX_STATUS_COUNT, SANDBOX_RUNNING},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		FAILS(EINVAL, store_sandbox_set_status(f->st, id, bad[i].from, bad[i].to, err));
	assert_int_equal(sbx_status(f, id), SANDBOX_RUNNING);

	/* a pooled sandbox is neither running nor paused */
	char p[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 10, p);
	FAILS(ESTALE, store_sandbox_set_status(f->st, p, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	FAILS(ESTALE, store_sandbox_set_status(f->st, p, SANDBOX_PAUSED, SANDBOX_RUNNING, err));
	assert_int_equal(sbx_status(f, p), SANDBOX_POOLED);

	/* ended is final */
	OK(store_sandbox_end(f->st, id, 20, "expired", NULL, err));
	FAILS(ESTALE, store_sandbox_set_status(f->st, id, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	FAILS(ESTALE, store_sandbox_set_status(f->st, id, SANDBOX_PAUSED, SANDBOX_RUNNING, err));
	assert_int_equal(sbx_status(f, id), SANDBOX_ENDED);

	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	FAILS(ENOENT,
	      store_sandbox_set_status(f->st, unknown, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	FAILS(EINVAL, store_sandbox_set_status(f->st, NULL, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
}

static void test_set_expiry(void **state)
{
	struct fx *f = *state;
	char r[SANDBOX_ID_SIZE], p[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_RUNNING, 10, r);
	sbx_add(f, SANDBOX_POOLED, 10, p);
	OK(store_sandbox_set_expiry(f->st, r, 5000, err));
	struct sandbox_record sb = sbx_get(f, r);
	assert_int_equal(sb.expires_at, 5000);
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	assert_int_equal(sb.created_at, 10);
	sandbox_record_release(&sb);
	OK(store_sandbox_set_expiry(f->st, r, 5000, err)); /* the same again is fine */
	OK(store_sandbox_set_status(f->st, r, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	OK(store_sandbox_set_expiry(f->st, r, 6000, err)); /* paused too */
	sb = sbx_get(f, r);
	assert_int_equal(sb.expires_at, 6000);
	assert_int_equal(sb.status, SANDBOX_PAUSED);
	sandbox_record_release(&sb);
	OK(store_sandbox_set_expiry(f->st, r, 0, err)); /* never */
	sb = sbx_get(f, r);
	assert_int_equal(sb.expires_at, 0);
	sandbox_record_release(&sb);
	OK(store_sandbox_set_expiry(f->st, p, 7000, err)); /* and pooled */
	sb = sbx_get(f, p);
	assert_int_equal(sb.expires_at, 7000);
	sandbox_record_release(&sb);

	FAILS(EINVAL, store_sandbox_set_expiry(f->st, r, -5, err));
	OK(store_sandbox_end(f->st, r, 20, "expired", NULL, err));
	FAILS(ESTALE, store_sandbox_set_expiry(f->st, r, 8000, err));
	sb = sbx_get(f, r);
	assert_int_equal(sb.expires_at, 0);
	sandbox_record_release(&sb);
	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	FAILS(ENOENT, store_sandbox_set_expiry(f->st, unknown, 1, err));
	FAILS(EINVAL, store_sandbox_set_expiry(f->st, NULL, 1, err));
}

/* ---- end and delete ---------------------------------------------------- */

static void test_end(void **state)
{
	struct fx *f = *state;
	/* from every status but ended, for every reason */
	static const char *const reasons[] = {"expired", "deleted", "died", "failed", "stopped"};
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		char id[SANDBOX_ID_SIZE];
		enum sandbox_status from = (enum sandbox_status)(i % 3);
		sbx_add(f, from == SANDBOX_POOLED ? SANDBOX_POOLED : SANDBOX_RUNNING, 10, id);
		if (from == SANDBOX_PAUSED)
			OK(store_sandbox_set_status(f->st, id, SANDBOX_RUNNING, SANDBOX_PAUSED,
						    err));
		const char *detail = i % 2 ? "init was killed by signal 9" : NULL;
		OK(store_sandbox_end(f->st, id, 100 + (int64_t)i, reasons[i], detail, err));
		struct sandbox_record sb = sbx_get(f, id);
		assert_int_equal(sb.status, SANDBOX_ENDED);
		assert_int_equal(sb.ended_at, 100 + (int64_t)i);
		assert_string_equal(sb.end_reason, reasons[i]);
		if (detail)
			assert_string_equal(sb.end_detail, detail);
		else
			assert_null(sb.end_detail);
		assert_int_equal(sb.created_at, 10);
		assert_string_equal(sb.spec_json, SBX_SPEC);
		sandbox_record_release(&sb);
		/* the first end stays */
		FAILS(ESTALE, store_sandbox_end(f->st, id, 500, "deleted", "again", err));
		sb = sbx_get(f, id);
		assert_int_equal(sb.ended_at, 100 + (int64_t)i);
		assert_string_equal(sb.end_reason, reasons[i]);
		sandbox_record_release(&sb);
	}
	char id[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_RUNNING, 10, id);
	static const char *const bad[] = {"", "Expired", "expired ", "killed", "ended"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		FAILS(EINVAL, store_sandbox_end(f->st, id, 1, bad[i], NULL, err));
	FAILS(EINVAL, store_sandbox_end(f->st, id, 1, NULL, NULL, err));
	FAILS(EINVAL, store_sandbox_end(f->st, NULL, 1, "deleted", NULL, err));
	assert_int_equal(sbx_status(f, id), SANDBOX_RUNNING);
	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	FAILS(ENOENT, store_sandbox_end(f->st, unknown, 1, "deleted", NULL, err));
	/* any text is a detail */
	const char *odd = "line 1\nline 2 \"quoted\" \xc3\xa9 \\";
	OK(store_sandbox_end(f->st, id, 2, "failed", odd, err));
	struct sandbox_record sb = sbx_get(f, id);
	assert_string_equal(sb.end_detail, odd);
	sandbox_record_release(&sb);
}

static void test_delete(void **state)
{
	struct fx *f = *state;
	char p[SANDBOX_ID_SIZE], r[SANDBOX_ID_SIZE], e[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 10, p);
	sbx_add(f, SANDBOX_RUNNING, 20, r);
	sbx_add(f, SANDBOX_RUNNING, 30, e);
	OK(store_sandbox_end(f->st, e, 40, "died", NULL, err));
	/* a discarded pooled sandbox and a forgotten ended one go */
	OK(store_sandbox_delete(f->st, p, err));
	assert_false(sbx_exists(f, p));
	OK(store_sandbox_delete(f->st, e, err));
	assert_false(sbx_exists(f, e));
	FAILS(ENOENT, store_sandbox_delete(f->st, p, err));
	FAILS(ENOENT, store_sandbox_claim(f->st, p, TENANT_DEFAULT, 50, 0, NULL, NULL, err));
	/* a live one stays: it is ended first */
	FAILS(ESTALE, store_sandbox_delete(f->st, r, err));
	OK(store_sandbox_set_status(f->st, r, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	FAILS(ESTALE, store_sandbox_delete(f->st, r, err));
	assert_int_equal(sbx_status(f, r), SANDBOX_PAUSED);
	FAILS(EINVAL, store_sandbox_delete(f->st, NULL, err));
	struct sbx_ids all;
	sbx_list(f, ALL_SBX, NULL, 10, &all);
	assert_int_equal(all.n, 1);
	assert_string_equal(all.v[0], r);
	/* its id is free again, spec and all */
	struct sandbox_record sb = {.tenant = TENANT_DEFAULT,
				    .status = SANDBOX_POOLED,
				    .created_at = 60,
				    .spec_json = "{\"b\":2}"};
	memcpy(sb.id, p, SANDBOX_ID_SIZE);
	OK(store_sandbox_insert(f->st, &sb, err));
	struct sandbox_record got = sbx_get(f, p);
	assert_string_equal(got.spec_json, "{\"b\":2}");
	assert_int_equal(got.created_at, 60);
	sandbox_record_release(&got);
}

/* ---- transactions and durability --------------------------------------- */

static void test_tx(void **state)
{
	struct fx *f = *state;
	char p[SANDBOX_ID_SIZE], r[SANDBOX_ID_SIZE], n[SANDBOX_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 10, p);
	sbx_add(f, SANDBOX_RUNNING, 20, r);
	/* a rollback undoes claims, ends and inserts */
	OK(store_tx_begin(f->st, err));
	OK(store_sandbox_claim(f->st, p, TENANT_DEFAULT, 30, 40, NULL, "{\"a\":1}", err));
	OK(store_sandbox_end(f->st, r, 30, "deleted", NULL, err));
	sbx_add(f, SANDBOX_RUNNING, 30, n);
	store_tx_rollback(f->st);
	struct sandbox_record sb = sbx_get(f, p);
	assert_int_equal(sb.status, SANDBOX_POOLED);
	assert_int_equal(sb.created_at, 10);
	assert_string_equal(sb.metadata_json, "{}");
	sandbox_record_release(&sb);
	assert_int_equal(sbx_status(f, r), SANDBOX_RUNNING);
	assert_false(sbx_exists(f, n));
	/* a failing call undoes only itself; the group goes on */
	OK(store_tx_begin(f->st, err));
	OK(store_sandbox_claim(f->st, p, TENANT_DEFAULT, 30, 40, NULL, NULL, err));
	FAILS(ESTALE, store_sandbox_claim(f->st, p, TENANT_DEFAULT, 31, 41, NULL, NULL, err));
	FAILS(ESTALE, store_sandbox_delete(f->st, r, err));
	FAILS(EINVAL, store_sandbox_end(f->st, r, 32, "nope", NULL, err));
	OK(store_sandbox_set_status(f->st, r, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	OK(store_tx_commit(f->st, err));
	reopen(f);
	sb = sbx_get(f, p);
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	assert_int_equal(sb.created_at, 30);
	assert_int_equal(sb.expires_at, 40);
	sandbox_record_release(&sb);
	assert_int_equal(sbx_status(f, r), SANDBOX_PAUSED);
}

/* Every sandbox, the pool too, as text. */
static char *sbx_dump(struct fx *f)
{
	struct sbx_ids all;
	sbx_list(f, ALL_SBX, NULL, 64, &all);
	size_t size = 16384, len = 0;
	char *buf = calloc(1, size);
	assert_non_null(buf);
	for (size_t i = 0; i < all.n; i++) {
		struct sandbox_record sb = sbx_get(f, all.v[i]);
		len += (size_t)snprintf(
		    buf + len, size - len, "%s %d %lld %lld %lld %s %s %s %s\n", sb.id, sb.status,
		    (long long)sb.created_at, (long long)sb.expires_at, (long long)sb.ended_at,
		    sb.end_reason ? sb.end_reason : "-", sb.end_detail ? sb.end_detail : "-",
		    sb.spec_json, sb.metadata_json);
		sandbox_record_release(&sb);
		assert_true(len < size - 1);
	}
	return buf;
}

static void test_reopen_keeps_everything(void **state)
{
	struct fx *f = *state;
	char a[SANDBOX_ID_SIZE], b[SANDBOX_ID_SIZE], c[SANDBOX_ID_SIZE], d[SANDBOX_ID_SIZE],
	    e[SANDBOX_ID_SIZE], gone[SANDBOX_ID_SIZE], task[TASK_ID_SIZE];
	sbx_add(f, SANDBOX_POOLED, 1, a);
	sbx_add(f, SANDBOX_POOLED, 2, b);
	sbx_add(f, SANDBOX_RUNNING, 3, c);
	sbx_add(f, SANDBOX_RUNNING, 4, d);
	sbx_add(f, SANDBOX_RUNNING, 5, e);
	sbx_add(f, SANDBOX_POOLED, 6, gone);
	add(f, 1, 1, 0, task);
	OK(store_sandbox_claim(f->st, a, TENANT_DEFAULT, 10, 1000, NULL, "{\"k\":\"v\"}", err));
	OK(store_sandbox_set_status(f->st, c, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	OK(store_sandbox_set_expiry(f->st, d, 2000, err));
	OK(store_sandbox_end(f->st, e, 11, "died", "oom", err));
	OK(store_sandbox_delete(f->st, gone, err));
	char *before = sbx_dump(f);
	reopen(f);
	char *after = sbx_dump(f);
	assert_string_equal(before, after);
	assert_int_equal(sbx_status(f, a), SANDBOX_RUNNING);
	assert_int_equal(sbx_status(f, b), SANDBOX_POOLED);
	assert_int_equal(sbx_status(f, c), SANDBOX_PAUSED);
	assert_int_equal(sbx_status(f, e), SANDBOX_ENDED);
	assert_false(sbx_exists(f, gone));
	assert_int_equal(status_of(f, task), TASK_QUEUED);
	free(before);
	free(after);
	/* and it all goes on after a reopen */
	OK(store_sandbox_claim(f->st, b, TENANT_DEFAULT, 20, 0, NULL, NULL, err));
	OK(store_sandbox_set_status(f->st, c, SANDBOX_PAUSED, SANDBOX_RUNNING, err));
	FAILS(ESTALE, store_sandbox_end(f->st, e, 21, "deleted", NULL, err));
}

static void test_claims_race_across_processes(void **state)
{
	struct fx *f = *state;
	enum { POOL = 40, CLAIMERS = 3 };
	char ids[POOL][SANDBOX_ID_SIZE];
	for (int i = 0; i < POOL; i++)
		sbx_add(f, SANDBOX_POOLED, i, ids[i]);
	f->st = store_close(f->st);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pids[CLAIMERS];
	for (int c = 0; c < CLAIMERS; c++) {
		pids[c] = fork();
		assert_true(pids[c] >= 0);
		if (pids[c] > 0)
			continue;
		close(fds[0]);
		struct store *st = NULL;
		if (backend->open(f->dir, &st, NULL) < 0)
			_exit(2);
		/* every claimer tries every sandbox; -ESTALE means another got it */
		for (int i = 0; i < POOL; i++) {
			int r;
			while ((r = store_sandbox_claim(st, ids[i], TENANT_DEFAULT, 100 + c, 0,
							NULL, NULL, NULL)) == -EBUSY)
				;
			if (r == -ESTALE)
				continue;
			if (r < 0)
				_exit(3);
			char line[SANDBOX_ID_SIZE];
			snprintf(line, sizeof(line), "%s\n", ids[i]);
			if (write(fds[1], line, SANDBOX_ID_SIZE - 1) != SANDBOX_ID_SIZE - 1)
				_exit(4);
		}
		_exit(0);
	}
	close(fds[1]);
	char got[POOL + 1][SANDBOX_ID_SIZE];
	int n = 0;
	while (n <= POOL && read(fds[0], got[n], SANDBOX_ID_SIZE - 1) == SANDBOX_ID_SIZE - 1) {
		got[n][SANDBOX_ID_SIZE - 2] = '\0';
		n++;
	}
	close(fds[0]);
	for (int c = 0; c < CLAIMERS; c++) {
		int status;
		assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(n, POOL); /* each sandbox claimed once, none twice */
	for (int i = 0; i < POOL; i++) {
		int seen = 0;
		for (int j = 0; j < n; j++)
			seen += strcmp(ids[i], got[j]) == 0;
		if (seen != 1)
			fail_msg("sandbox %s was claimed %d times", ids[i], seen);
	}
	OK(backend->open(f->dir, &f->st, err));
	struct sbx_ids left;
	sbx_list(f, S(SANDBOX_POOLED), NULL, 64, &left);
	assert_int_equal(left.n, 0);
	sbx_list(f, S(SANDBOX_RUNNING), NULL, 64, &left);
	assert_int_equal(left.n, POOL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_insert_get_round_trip),
	    T(test_insert_errors),
	    T(test_insert_limits),
	    T(test_get_unknown),
	    T(test_list_filter_and_order),
	    T(test_list_pages),
	    T(test_list_limits_and_errors),
	    T(test_claim),
	    T(test_pause_resume),
	    T(test_set_expiry),
	    T(test_end),
	    T(test_delete),
	    T(test_tx),
	    T(test_reopen_keeps_everything),
	    T(test_claims_race_across_processes),
	};
#undef T
	return run_per_backend("store: sandboxes", tests, sizeof(tests) / sizeof(tests[0]));
}
