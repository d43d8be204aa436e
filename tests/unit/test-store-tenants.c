/*
 * test-store-tenants.c - the contract of store.h, part four: tenants and
 * API keys. Tenants: the default one, insert, get, list, quotas, delete
 * (refused while a key not revoked, a task not final or a sandbox not
 * ended is the tenant's; allowed once they are revoked or have ended).
 * Keys: insert, get, list by tenant, revoke (twice), count. The tenant of
 * tasks and sandboxes: stored, filtered on in lists (pages across
 * tenants), moved by a claim from the pool. Every error, calls inside a
 * caller's transaction, reopening. Runs against every backend in
 * store-contract.h.
 */
#include "store-contract.h"

#define S(s)	((uint32_t)SANDBOX_STATUS_BIT(s))
#define ALL_SBX ((1u << SANDBOX_STATUS_COUNT) - 1)

/* ---- helpers ----------------------------------------------------------- */

static void tenant_add(struct fx *f, const char *name, int64_t now)
{
	OK(store_tenant_insert(f->st, name, now, NULL, err));
}

static struct tenant_record tenant_get(struct fx *f, const char *name)
{
	struct tenant_record t = {0};
	OK(store_tenant_get(f->st, name, &t, err));
	return t;
}

static bool tenant_exists(struct fx *f, const char *name)
{
	struct tenant_record t = {0};
	struct error err = {0};
	int r = store_tenant_get(f->st, name, &t, &err);
	if (r != 0 && r != -ENOENT)
		fail_msg("store_tenant_get(%s) = %d: %s", name, r, err.msg);
	tenant_record_release(&t);
	return r == 0;
}

/* A hash of 32 bytes from seed, with a NUL byte in it (a BLOB, not text). */
static void hash_of(uint8_t seed, uint8_t hash[KEY_HASH_SIZE])
{
	for (int i = 0; i < KEY_HASH_SIZE; i++)
		hash[i] = (uint8_t)(seed * 31 + i * 7);
	hash[5] = 0;
}

/* A key of tenant with id, created at created; no expiry, no label. */
static struct key_record key_of(const char *id, const char *tenant, enum key_role role,
				int64_t created)
{
	struct key_record k = {.role = role, .created_at = created};
	snprintf(k.id, sizeof(k.id), "%s", id);
	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	hash_of((uint8_t)id[0], k.hash);
	return k;
}

static void key_add(struct fx *f, const char *id, const char *tenant, int64_t created)
{
	struct key_record k = key_of(id, tenant, KEY_ROLE_MEMBER, created);
	OK(store_key_insert(f->st, &k, err));
}

static struct key_record key_get(struct fx *f, const char *id)
{
	struct key_record k = {0};
	OK(store_key_get(f->st, id, &k, err));
	return k;
}

static uint64_t key_count(struct fx *f)
{
	uint64_t n = 99;
	OK(store_key_count(f->st, &n, err));
	return n;
}

/* Names, in the order a list gave them. */
struct names {
	size_t n;
	char v[32][TENANT_NAME_SIZE];
	int stop_after;	    /* > 0: return -EINTR on this call */
	struct store *call; /* non-NULL: read each one again from inside fn */
};

static int collect_tenant(const struct tenant_record *t, void *data)
{
	struct names *ns = data;
	assert_true(ns->n < 32);
	assert_non_null(t->quotas_json);
	memcpy(ns->v[ns->n++], t->name, TENANT_NAME_SIZE);
	if (ns->call) {
		struct tenant_record again = {0};
		struct error err = {0};
		assert_int_equal(store_tenant_get(ns->call, t->name, &again, &err), 0);
		tenant_record_release(&again);
	}
	return ns->stop_after && (int)ns->n == ns->stop_after ? -EINTR : 0;
}

static void tenant_list(struct fx *f, struct names *ret)
{
	memset(ret, 0, sizeof(*ret));
	OK(store_tenant_list(f->st, collect_tenant, ret, err));
}

static int collect_key(const struct key_record *k, void *data)
{
	struct names *ns = data;
	assert_true(ns->n < 32);
	snprintf(ns->v[ns->n++], TENANT_NAME_SIZE, "%s", k->id);
	if (ns->call) /* fn may write to the store */
		(void)store_key_revoke(ns->call, k->id, 77, NULL);
	return ns->stop_after && (int)ns->n == ns->stop_after ? -EINTR : 0;
}

static void key_list(struct fx *f, const char *tenant, struct names *ret)
{
	memset(ret, 0, sizeof(*ret));
	OK(store_key_list(f->st, tenant, collect_key, ret, err));
}

/* A task of tenant, created at created; its id goes to id. */
static void task_add(struct fx *f, const char *tenant, int64_t created, char id[TASK_ID_SIZE])
{
	struct task t = {.max_attempts = 1, .created_at = created, .spec_json = SPEC};
	snprintf(t.tenant, sizeof(t.tenant), "%s", tenant);
	assert_int_equal(task_id_new(t.id), 0);
	OK(store_task_insert(f->st, &t, err));
	memcpy(id, t.id, TASK_ID_SIZE);
}

/* List tasks of tenant (NULL: all) with statuses, after, limit. */
static void task_list(struct fx *f, const char *tenant, uint32_t statuses, const char *after,
		      size_t limit, struct ids *ret)
{
	struct task_filter flt = {
	    .statuses = statuses, .after_id = after, .limit = limit, .tenant = tenant};
	memset(ret, 0, sizeof(*ret));
	OK(store_task_list(f->st, &flt, collect_id, ret, err));
}

/* A sandbox of tenant in status (pooled: the default tenant's); its id goes to id. */
static void sbx_add(struct fx *f, const char *tenant, enum sandbox_status status, int64_t created,
		    char id[SANDBOX_ID_SIZE])
{
	struct sandbox_record sb = {.status = status, .created_at = created, .spec_json = "{}"};
	snprintf(sb.tenant, sizeof(sb.tenant), "%s", tenant);
	assert_int_equal(sandbox_id_new(sb.id), 0);
	OK(store_sandbox_insert(f->st, &sb, err));
	memcpy(id, sb.id, SANDBOX_ID_SIZE);
}

struct sbx_ids {
	size_t n;
	char v[32][SANDBOX_ID_SIZE];
	char tenant[32][TENANT_NAME_SIZE];
};

static int collect_sbx(const struct sandbox_record *sb, void *data)
{
	struct sbx_ids *ids = data;
	assert_true(ids->n < 32);
	memcpy(ids->tenant[ids->n], sb->tenant, TENANT_NAME_SIZE);
	memcpy(ids->v[ids->n++], sb->id, SANDBOX_ID_SIZE);
	return 0;
}

static void sbx_list(struct fx *f, const char *tenant, uint32_t statuses, const char *after,
		     size_t limit, struct sbx_ids *ret)
{
	struct sandbox_filter flt = {
	    .statuses = statuses, .after_id = after, .limit = limit, .tenant = tenant};
	memset(ret, 0, sizeof(*ret));
	OK(store_sandbox_list(f->st, &flt, collect_sbx, ret, err));
}

static struct sandbox_record sbx_get(struct fx *f, const char *id)
{
	struct sandbox_record sb = {0};
	OK(store_sandbox_get(f->st, id, &sb, err));
	return sb;
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

/* ---- tenants ----------------------------------------------------------- */

static void test_default_tenant(void **state)
{
	struct fx *f = *state;
	struct tenant_record t = tenant_get(f, TENANT_DEFAULT);
	assert_string_equal(t.name, TENANT_DEFAULT);
	assert_int_equal(t.created_at, 0);
	assert_string_equal(t.quotas_json, "{}");
	tenant_record_release(&t);
	assert_null(t.quotas_json); /* release leaves nothing dangling */
	tenant_record_release(&t);  /* twice is harmless */
	struct names got;
	tenant_list(f, &got);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.v[0], TENANT_DEFAULT);
	FAILS(EEXIST, store_tenant_insert(f->st, TENANT_DEFAULT, 5, NULL, err));
	FAILS(EPERM, store_tenant_delete(f->st, TENANT_DEFAULT, 1000, err));
	assert_true(tenant_exists(f, TENANT_DEFAULT));
	/* its quotas may be set like anyone's */
	OK(store_tenant_set_quotas(f->st, TENANT_DEFAULT, "{\"tasks\":5}", err));
	t = tenant_get(f, TENANT_DEFAULT);
	assert_string_equal(t.quotas_json, "{\"tasks\":5}");
	tenant_record_release(&t);
}

static void test_tenant_insert_get(void **state)
{
	struct fx *f = *state;
	OK(store_tenant_insert(f->st, "acme", 1700000000123, "{\"max_running\":4,\"memory\":[1,2]}",
			       err));
	struct tenant_record t = tenant_get(f, "acme");
	assert_string_equal(t.name, "acme");
	assert_int_equal(t.created_at, 1700000000123);
	assert_string_equal(t.quotas_json, "{\"max_running\":4,\"memory\":[1,2]}");
	tenant_record_release(&t);
	/* no quotas: "{}" */
	tenant_add(f, "b-2", 7);
	t = tenant_get(f, "b-2");
	assert_string_equal(t.quotas_json, "{}");
	assert_int_equal(t.created_at, 7);
	tenant_record_release(&t);
	/* the longest name */
	char longest[TENANT_NAME_SIZE];
	memset(longest, 'z', TENANT_NAME_MAX);
	longest[TENANT_NAME_MAX] = '\0';
	tenant_add(f, longest, 8);
	t = tenant_get(f, longest);
	assert_string_equal(t.name, longest);
	tenant_record_release(&t);
}

static void test_tenant_insert_errors(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "acme", 10);
	FAILS(EEXIST, store_tenant_insert(f->st, "acme", 20, "{\"a\":1}", err));
	struct tenant_record t = tenant_get(f, "acme"); /* the first is untouched */
	assert_int_equal(t.created_at, 10);
	assert_string_equal(t.quotas_json, "{}");
	tenant_record_release(&t);
	/* names */
	static const char *const bad[] = {"",	 "Acme", "-a",	"a-",
					  "a b", "a_b",	 "a/b", "caf\xc3\xa9"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		FAILS(EINVAL, store_tenant_insert(f->st, bad[i], 1, NULL, err));
	FAILS(EINVAL, store_tenant_insert(f->st, NULL, 1, NULL, err));
	char too_long[TENANT_NAME_SIZE + 1];
	memset(too_long, 'a', TENANT_NAME_SIZE);
	too_long[TENANT_NAME_SIZE] = '\0';
	FAILS(EINVAL, store_tenant_insert(f->st, too_long, 1, NULL, err));
	/* quotas: one JSON object, of at most TENANT_QUOTAS_MAX bytes */
	static const char *const not_objects[] = {"",  "[]",	"{",	      "\"x\"",
						  "1", "{} {}", "{\"a\":1,}", "null"};
	for (size_t i = 0; i < sizeof(not_objects) / sizeof(not_objects[0]); i++)
		FAILS(EINVAL, store_tenant_insert(f->st, "other", 1, not_objects[i], err));
	char *at = object_of_size(TENANT_QUOTAS_MAX);
	char *past = object_of_size(TENANT_QUOTAS_MAX + 1);
	FAILS(EINVAL, store_tenant_insert(f->st, "other", 1, past, err));
	assert_false(tenant_exists(f, "other"));
	OK(store_tenant_insert(f->st, "other", 1, at, err));
	t = tenant_get(f, "other");
	assert_string_equal(t.quotas_json, at);
	tenant_record_release(&t);
	free(at);
	free(past);
	/* get: none of that name (a name none can have too) */
	t.created_at = 42;
	FAILS(ENOENT, store_tenant_get(f->st, "nobody", &t, err));
	FAILS(ENOENT, store_tenant_get(f->st, "Not A Name", &t, err));
	FAILS(ENOENT, store_tenant_get(f->st, too_long, &t, err));
	assert_int_equal(t.created_at, 42); /* ret is written only on success */
	FAILS(EINVAL, store_tenant_get(f->st, NULL, &t, err));
	FAILS(EINVAL, store_tenant_get(f->st, "acme", NULL, err));
	struct names got;
	tenant_list(f, &got);
	assert_int_equal(got.n, 3);
}

static void test_tenant_list(void **state)
{
	struct fx *f = *state;
	/* by name, whatever the order they came in */
	tenant_add(f, "zeta", 1);
	tenant_add(f, "alpha", 2);
	tenant_add(f, "m-1", 3);
	tenant_add(f, "m", 4);
	tenant_add(f, "9lives", 5);
	struct names got;
	tenant_list(f, &got);
	static const char *const want[] = {"9lives", "alpha", "default", "m", "m-1", "zeta"};
	assert_int_equal(got.n, 6);
	for (size_t i = 0; i < got.n; i++)
		assert_string_equal(got.v[i], want[i]);
	/* fn stops the walk with its own error */
	memset(&got, 0, sizeof(got));
	got.stop_after = 2;
	struct error e = {0};
	assert_int_equal(store_tenant_list(f->st, collect_tenant, &got, &e), -EINTR);
	assert_int_equal(got.n, 2);
	/* rows are read before fn runs: fn may call the store */
	memset(&got, 0, sizeof(got));
	got.call = f->st;
	OK(store_tenant_list(f->st, collect_tenant, &got, err));
	assert_int_equal(got.n, 6);
	FAILS(EINVAL, store_tenant_list(f->st, NULL, &got, err));
}

static void test_tenant_set_quotas(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "acme", 1);
	OK(store_tenant_set_quotas(f->st, "acme", "{\"sandboxes\":3}", err));
	struct tenant_record t = tenant_get(f, "acme");
	assert_string_equal(t.quotas_json, "{\"sandboxes\":3}");
	assert_int_equal(t.created_at, 1);
	tenant_record_release(&t);
	OK(store_tenant_set_quotas(f->st, "acme", "{}", err));
	t = tenant_get(f, "acme");
	assert_string_equal(t.quotas_json, "{}");
	tenant_record_release(&t);
	FAILS(ENOENT, store_tenant_set_quotas(f->st, "nobody", "{}", err));
	FAILS(ENOENT, store_tenant_set_quotas(f->st, "Not A Name", "{}", err));
	FAILS(EINVAL, store_tenant_set_quotas(f->st, NULL, "{}", err));
	FAILS(EINVAL, store_tenant_set_quotas(f->st, "acme", NULL, err));
	FAILS(EINVAL, store_tenant_set_quotas(f->st, "acme", "[1]", err));
	FAILS(EINVAL, store_tenant_set_quotas(f->st, "acme", "{\"a\":", err));
	char *past = object_of_size(TENANT_QUOTAS_MAX + 1);
	FAILS(EINVAL, store_tenant_set_quotas(f->st, "acme", past, err));
	free(past);
	t = tenant_get(f, "acme"); /* untouched by the failures */
	assert_string_equal(t.quotas_json, "{}");
	tenant_record_release(&t);
}

static void test_tenant_delete(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "acme", 1);
	tenant_add(f, "other", 1);
	OK(store_tenant_delete(f->st, "acme", 1000, err)); /* nothing of it: gone at once */
	assert_false(tenant_exists(f, "acme"));
	FAILS(ENOENT, store_tenant_delete(f->st, "acme", 1000, err));
	FAILS(ENOENT, store_tenant_delete(f->st, "Not A Name", 1000, err));
	FAILS(EINVAL, store_tenant_delete(f->st, NULL, 1000, err));
	FAILS(EPERM, store_tenant_delete(f->st, TENANT_DEFAULT, 1000, err));
	/* its name is never given again: nobody called acme later inherits what it left */
	FAILS(EEXIST, store_tenant_insert(f->st, "acme", 2, NULL, err));
	struct names got;
	tenant_list(f, &got);
	assert_int_equal(got.n, 2); /* default and other */
	/* and nothing new is made for it */
	struct task t = {.max_attempts = 1, .created_at = 3, .spec_json = "{}"};
	snprintf(t.tenant, sizeof(t.tenant), "acme");
	assert_int_equal(task_id_new(t.id), 0);
	FAILS(ENOENT, store_task_insert(f->st, &t, err));
	struct sandbox_record sb = {.status = SANDBOX_RUNNING, .created_at = 3, .spec_json = "{}"};
	snprintf(sb.tenant, sizeof(sb.tenant), "acme");
	assert_int_equal(sandbox_id_new(sb.id), 0);
	FAILS(ENOENT, store_sandbox_insert(f->st, &sb, err));
	struct sandbox_record pooled = {
	    .status = SANDBOX_POOLED, .created_at = 3, .spec_json = "{}", .tenant = TENANT_DEFAULT};
	assert_int_equal(sandbox_id_new(pooled.id), 0);
	OK(store_sandbox_insert(f->st, &pooled, err));
	FAILS(ENOENT, store_sandbox_claim(f->st, pooled.id, "acme", 4, 0, NULL, NULL, err));
	OK(store_sandbox_claim(f->st, pooled.id, "other", 4, 0, NULL, NULL, err));
}

/*
 * Claims are fair across tenants: of each tenant's oldest queued task,
 * that of the tenant with the fewest running goes first, then the oldest;
 * within a tenant, first in first out.
 */
static void test_claims_are_fair_across_tenants(void **state)
{
	struct fx *f = *state;
	char a[5][TASK_ID_SIZE], b[2][TASK_ID_SIZE], c[TASK_ID_SIZE];
	tenant_add(f, "a", 1);
	tenant_add(f, "b", 1);
	tenant_add(f, "c", 1);
	for (int i = 0; i < 5; i++)
		task_add(f, "a", 10 + i, a[i]); /* a queued five first */
	task_add(f, "b", 20, b[0]);
	task_add(f, "b", 21, b[1]);
	task_add(f, "c", 30, c);
	/* nobody runs: the oldest head, a's */
	(void)claim(f, 100, a[0]);
	/* a runs one: b's and c's heads come before a's next, b's the older */
	(void)claim(f, 101, b[0]);
	(void)claim(f, 102, c);
	/* each runs one: the oldest head again, a's; then b's (a runs two) */
	(void)claim(f, 103, a[1]);
	(void)claim(f, 104, b[1]);
	/* only a has any queued: first in first out */
	(void)claim(f, 105, a[2]);
	(void)claim(f, 106, a[3]);
	(void)claim(f, 107, a[4]);
	struct task none;
	FAILS(ENOENT, store_task_claim(f->st, 108, &none, err));
}

/* A tenant skipped (at a quota) waits; the others' heads go on, fairly. */
static void test_claims_skip_tenants(void **state)
{
	struct fx *f = *state;
	char a[2][TASK_ID_SIZE], b[TASK_ID_SIZE];
	tenant_add(f, "a", 1);
	tenant_add(f, "b", 1);
	task_add(f, "a", 10, a[0]);
	task_add(f, "a", 11, a[1]);
	task_add(f, "b", 20, b);
	const char *skip_a[] = {"a"};
	const char *skip_both[] = {"a", "b"};
	const char *bad[] = {"A b"};
	struct task t = {0};
	OK(store_task_claim_if(f->st, 100, skip_a, 1, NULL, NULL, &t, err));
	assert_string_equal(t.id, b); /* a's head is older, but a is skipped */
	task_release(&t);
	FAILS(ENOENT, store_task_claim_if(f->st, 101, skip_both, 2, NULL, NULL, &t, err));
	FAILS(EINVAL, store_task_claim_if(f->st, 101, bad, 1, NULL, NULL, &t, err));
	FAILS(EINVAL, store_task_claim_if(f->st, 101, skip_a, STORE_CLAIM_SKIP_MAX + 1, NULL, NULL,
					  &t, err));
	uint64_t n = 0;
	OK(store_task_count_tenant(f->st, "a", TASK_QUEUED, &n, err));
	assert_int_equal(n, 2);
	OK(store_task_count_tenant(f->st, "b", TASK_RUNNING, &n, err));
	assert_int_equal(n, 1);
	FAILS(EINVAL, store_task_count_tenant(f->st, "A", TASK_QUEUED, &n, err));
	(void)claim(f, 102, a[0]); /* not skipped: first in first out */
}

/* A tenant's queued tasks are counted with the insert: past the bound, nothing is added. */
static void test_insert_within_queued_bound(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "a", 1);
	tenant_add(f, "b", 1);
	for (int i = 0; i < 3; i++) {
		struct task t = {.max_attempts = 1, .created_at = 10 + i, .spec_json = SPEC};
		snprintf(t.tenant, sizeof(t.tenant), "a");
		assert_int_equal(task_id_new(t.id), 0);
		uint64_t queued = 99;
		if (i < 2) {
			OK(store_task_insert_within(f->st, &t, 2, &queued, err));
			assert_int_equal(queued, 99); /* told only when refused */
		} else {
			FAILS(EDQUOT, store_task_insert_within(f->st, &t, 2, &queued, err));
			assert_int_equal(queued, 2);
			struct task none = {0};
			FAILS(ENOENT, store_task_get(f->st, t.id, &none, err));
		}
	}
	/* another tenant's queue is its own */
	struct task t = {.max_attempts = 1, .created_at = 20, .spec_json = SPEC};
	snprintf(t.tenant, sizeof(t.tenant), "b");
	assert_int_equal(task_id_new(t.id), 0);
	OK(store_task_insert_within(f->st, &t, 1, NULL, err));
}

static void test_tenant_delete_refused_while_a_key(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "acme", 1);
	tenant_add(f, "other", 1);
	key_add(f, "k1", "acme", 10);
	struct key_record expired = key_of("k2", "acme", KEY_ROLE_ADMIN, 11);
	expired.expires_at = 12; /* long past: it counts until it is revoked */
	OK(store_key_insert(f->st, &expired, err));
	key_add(f, "k3", "other", 12); /* another tenant's keeps only that one */
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err));
	assert_true(tenant_exists(f, "acme"));
	OK(store_key_revoke(f->st, "k1", 20, err));
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err));
	OK(store_key_revoke(f->st, "k2", 21, err));
	OK(store_tenant_delete(f->st, "acme", 1000, err));
	assert_false(tenant_exists(f, "acme"));
	/* its revoked keys stay, under its name; no new key can be its */
	struct key_record k = key_get(f, "k1");
	assert_string_equal(k.tenant, "acme");
	assert_int_equal(k.revoked_at, 20);
	key_record_release(&k);
	FAILS(ENOENT, store_key_insert(f->st, &expired, err));
	FAILS(EBUSY, store_tenant_delete(f->st, "other", 1000, err));
}

static void test_tenant_delete_refused_while_a_task(void **state)
{
	struct fx *f = *state;
	char t1[TASK_ID_SIZE], t2[TASK_ID_SIZE], o[TASK_ID_SIZE];
	tenant_add(f, "acme", 1);
	tenant_add(f, "other", 1);
	task_add(f, "acme", 10, t1);
	task_add(f, "acme", 20, t2);
	task_add(f, "other", 30, o); /* another tenant's keeps only that one */
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err)); /* queued */
	uint32_t attempt = claim(f, 100, t1);
	enum task_status s = TASK_STATUS_COUNT;
	OK(store_task_cancel(f->st, t2, 101, &s, err));
	assert_int_equal(s, TASK_CANCELLED);
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err)); /* running */
	assert_true(tenant_exists(f, "acme"));
	assert_int_equal(end(f, t1, attempt, TASK_SUCCEEDED, 0, NULL, 102), TASK_SUCCEEDED);
	OK(store_tenant_delete(f->st, "acme", 1000, err));
	assert_false(tenant_exists(f, "acme"));
	/* its final tasks stay, under its name */
	struct ids got;
	task_list(f, "acme", 0, NULL, 10, &got);
	assert_int_equal(got.n, 2);
	struct task t = get(f, t1);
	assert_string_equal(t.tenant, "acme");
	task_release(&t);
	FAILS(EBUSY, store_tenant_delete(f->st, "other", 1000, err));
}

static void test_tenant_delete_refused_while_a_sandbox(void **state)
{
	struct fx *f = *state;
	char r[SANDBOX_ID_SIZE], p[SANDBOX_ID_SIZE], pooled[SANDBOX_ID_SIZE], o[SANDBOX_ID_SIZE];
	tenant_add(f, "acme", 1);
	tenant_add(f, "gone", 1);
	tenant_add(f, "other", 1);
	sbx_add(f, TENANT_DEFAULT, SANDBOX_POOLED, 5, pooled); /* the pool is nobody's */
	OK(store_tenant_delete(f->st, "gone", 1000, err));
	sbx_add(f, "acme", SANDBOX_RUNNING, 10, r);
	sbx_add(f, "acme", SANDBOX_RUNNING, 11, p);
	sbx_add(f, "other", SANDBOX_RUNNING, 12, o);
	OK(store_sandbox_set_status(f->st, p, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err));
	OK(store_sandbox_end(f->st, r, 20, "deleted", NULL, err));
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err)); /* paused */
	assert_true(tenant_exists(f, "acme"));
	OK(store_sandbox_end(f->st, p, 21, "expired", NULL, err));
	OK(store_tenant_delete(f->st, "acme", 1000, err));
	assert_false(tenant_exists(f, "acme"));
	/* its ended sandboxes stay, under its name */
	struct sbx_ids got;
	sbx_list(f, "acme", 0, NULL, 10, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.tenant[0], "acme");
	FAILS(EBUSY, store_tenant_delete(f->st, "other", 1000, err));
}

/* ---- keys -------------------------------------------------------------- */

static void test_key_insert_get(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "acme", 1);
	struct key_record in = key_of("0123456789ab", "acme", KEY_ROLE_ADMIN, 1700000000123);
	in.expires_at = 1700000600123;
	in.revoked_at = 5; /* ignored: a new key is not revoked */
	in.label = "ci bot \xe2\x9c\x93";
	OK(store_key_insert(f->st, &in, err));
	struct key_record k = key_get(f, "0123456789ab");
	assert_string_equal(k.id, "0123456789ab");
	assert_string_equal(k.tenant, "acme");
	assert_int_equal(k.role, KEY_ROLE_ADMIN);
	assert_memory_equal(k.hash, in.hash, KEY_HASH_SIZE); /* every byte, its NUL too */
	assert_int_equal(k.created_at, 1700000000123);
	assert_int_equal(k.expires_at, 1700000600123);
	assert_int_equal(k.revoked_at, 0);
	assert_string_equal(k.label, "ci bot \xe2\x9c\x93");
	key_record_release(&k);
	assert_null(k.label); /* release leaves nothing dangling */
	key_record_release(&k);
	/* no label, no expiry, a member; ids are opaque text to the store */
	struct key_record m = key_of("legacy", TENANT_DEFAULT, KEY_ROLE_MEMBER, 2);
	OK(store_key_insert(f->st, &m, err));
	k = key_get(f, "legacy");
	assert_string_equal(k.tenant, TENANT_DEFAULT);
	assert_int_equal(k.role, KEY_ROLE_MEMBER);
	assert_int_equal(k.expires_at, 0);
	assert_null(k.label);
	key_record_release(&k);
	/* a label of exactly KEY_LABEL_MAX bytes, empty too */
	char label[KEY_LABEL_MAX + 2];
	memset(label, 'l', KEY_LABEL_MAX);
	label[KEY_LABEL_MAX] = '\0';
	struct key_record l = key_of("l", "acme", KEY_ROLE_MEMBER, 3);
	l.label = label;
	OK(store_key_insert(f->st, &l, err));
	k = key_get(f, "l");
	assert_string_equal(k.label, label);
	key_record_release(&k);
	struct key_record e = key_of("e", "acme", KEY_ROLE_MEMBER, 3);
	e.label = "";
	OK(store_key_insert(f->st, &e, err));
	k = key_get(f, "e");
	assert_string_equal(k.label, "");
	key_record_release(&k);
	assert_int_equal(key_count(f), 4);
}

static void test_key_insert_errors(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "acme", 1);
	tenant_add(f, "other", 1);
	key_add(f, "k1", "acme", 10);
	/* the id is taken, whatever the tenant */
	struct key_record k = key_of("k1", "other", KEY_ROLE_ADMIN, 20);
	FAILS(EEXIST, store_key_insert(f->st, &k, err));
	struct key_record old = key_get(f, "k1"); /* the first is untouched */
	assert_string_equal(old.tenant, "acme");
	assert_int_equal(old.role, KEY_ROLE_MEMBER);
	assert_int_equal(old.created_at, 10);
	key_record_release(&old);
	/* no such tenant */
	k = key_of("k2", "nobody", KEY_ROLE_MEMBER, 20);
	FAILS(ENOENT, store_key_insert(f->st, &k, err));
	/* ids: not empty, NUL-terminated within KEY_ID_SIZE */
	k = key_of("", "acme", KEY_ROLE_MEMBER, 20);
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	memset(k.id, 'a', sizeof(k.id));
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	k = key_of("k2", "acme", KEY_ROLE_MEMBER, 20);
	/* tenants' names */
	static const char *const bad[] = {"", "Acme", "a-", "a b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(k.tenant, sizeof(k.tenant), "%s", bad[i]);
		FAILS(EINVAL, store_key_insert(f->st, &k, err));
	}
	memset(k.tenant, 'a', sizeof(k.tenant));
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	snprintf(k.tenant, sizeof(k.tenant), "acme");
	/* roles */
	k.role = KEY_ROLE_COUNT;
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	k.role = (enum key_role) - 1;
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	k.role = KEY_ROLE_MEMBER;
	/* expiry */
	k.expires_at = -1;
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	k.expires_at = 0;
	/* a label of one byte too many */
	char label[KEY_LABEL_MAX + 2];
	memset(label, 'l', KEY_LABEL_MAX + 1);
	label[KEY_LABEL_MAX + 1] = '\0';
	k.label = label;
	FAILS(EINVAL, store_key_insert(f->st, &k, err));
	FAILS(EINVAL, store_key_insert(f->st, NULL, err));
	/* none of them went in */
	struct key_record got = {.created_at = 42};
	FAILS(ENOENT, store_key_get(f->st, "k2", &got, err));
	assert_int_equal(got.created_at, 42); /* ret is written only on success */
	FAILS(ENOENT, store_key_get(f->st, "", &got, err));
	FAILS(ENOENT, store_key_get(f->st, "a much longer id than any", &got, err));
	FAILS(EINVAL, store_key_get(f->st, NULL, &got, err));
	FAILS(EINVAL, store_key_get(f->st, "k1", NULL, err));
	assert_int_equal(key_count(f), 1);
}

static void test_key_list(void **state)
{
	struct fx *f = *state;
	tenant_add(f, "a", 1);
	tenant_add(f, "b", 1);
	tenant_add(f, "empty", 1);
	/* by created_at, then id, whatever the order they came in */
	key_add(f, "a3", "a", 30);
	key_add(f, "b1", "b", 10);
	key_add(f, "a2z", "a", 10);
	key_add(f, "a2a", "a", 10);
	key_add(f, "a0", "a", 5);
	key_add(f, "d0", TENANT_DEFAULT, 20);
	OK(store_key_revoke(f->st, "a0", 50, err)); /* revoked ones are listed too */
	struct names got;
	key_list(f, "a", &got);
	static const char *const want_a[] = {"a0", "a2a", "a2z", "a3"};
	assert_int_equal(got.n, 4);
	for (size_t i = 0; i < got.n; i++)
		assert_string_equal(got.v[i], want_a[i]);
	key_list(f, "b", &got);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.v[0], "b1");
	key_list(f, NULL, &got);
	static const char *const want_all[] = {"a0", "a2a", "a2z", "b1", "d0", "a3"};
	assert_int_equal(got.n, 6);
	for (size_t i = 0; i < got.n; i++)
		assert_string_equal(got.v[i], want_all[i]);
	/* a tenant without keys, or none of that name, has none */
	key_list(f, "empty", &got);
	assert_int_equal(got.n, 0);
	key_list(f, "nobody", &got);
	assert_int_equal(got.n, 0);
	FAILS(EINVAL, store_key_list(f->st, "Not A Name", collect_key, &got, err));
	FAILS(EINVAL, store_key_list(f->st, "a", NULL, &got, err));
	/* fn stops the walk with its own error */
	memset(&got, 0, sizeof(got));
	got.stop_after = 2;
	struct error e = {0};
	assert_int_equal(store_key_list(f->st, "a", collect_key, &got, &e), -EINTR);
	assert_int_equal(got.n, 2);
	/* rows are read before fn runs: fn may write to the store */
	memset(&got, 0, sizeof(got));
	got.call = f->st;
	OK(store_key_list(f->st, "a", collect_key, &got, err));
	assert_int_equal(got.n, 4);
	struct key_record k = key_get(f, "a3");
	assert_int_equal(k.revoked_at, 77);
	key_record_release(&k);
	k = key_get(f, "a0");
	assert_int_equal(k.revoked_at, 50); /* the first revocation stayed */
	key_record_release(&k);
}

static void test_key_revoke_and_count(void **state)
{
	struct fx *f = *state;
	assert_int_equal(key_count(f), 0);
	tenant_add(f, "acme", 1);
	key_add(f, "k1", "acme", 10);
	key_add(f, "k2", TENANT_DEFAULT, 11);
	struct key_record expired = key_of("k3", "acme", KEY_ROLE_MEMBER, 12);
	expired.expires_at = 13;
	OK(store_key_insert(f->st, &expired, err));
	assert_int_equal(key_count(f), 3); /* expired ones too: they are not revoked */
	OK(store_key_revoke(f->st, "k1", 50, err));
	assert_int_equal(key_count(f), 2);
	struct key_record k = key_get(f, "k1");
	assert_int_equal(k.revoked_at, 50);
	assert_int_equal(k.created_at, 10); /* the rest is as it was */
	assert_string_equal(k.tenant, "acme");
	key_record_release(&k);
	/* twice: the first revocation stays */
	FAILS(ESTALE, store_key_revoke(f->st, "k1", 60, err));
	k = key_get(f, "k1");
	assert_int_equal(k.revoked_at, 50);
	key_record_release(&k);
	FAILS(ENOENT, store_key_revoke(f->st, "nope", 60, err));
	FAILS(EINVAL, store_key_revoke(f->st, NULL, 60, err));
	FAILS(EINVAL, store_key_revoke(f->st, "k2", 0, err)); /* 0 would mean "not revoked" */
	FAILS(EINVAL, store_key_revoke(f->st, "k2", -1, err));
	assert_int_equal(key_count(f), 2);
	OK(store_key_revoke(f->st, "k3", 61, err));
	OK(store_key_revoke(f->st, "k2", 62, err));
	assert_int_equal(key_count(f), 0);
	FAILS(EINVAL, store_key_count(f->st, NULL, err));
}

/* ---- the tenant of tasks ----------------------------------------------- */

static void test_task_lists_by_tenant(void **state)
{
	struct fx *f = *state;
	/* two tenants' tasks interleaved, ties straddling the pages */
	char a[4][TASK_ID_SIZE], b[3][TASK_ID_SIZE];
	tenant_add(f, "a", 1);
	tenant_add(f, "b", 1);
	task_add(f, "a", 10, a[0]);
	task_add(f, "b", 10, b[0]);
	task_add(f, "a", 20, a[1]);
	task_add(f, "b", 20, b[1]);
	task_add(f, "a", 20, a[2]);
	task_add(f, "b", 30, b[2]);
	task_add(f, "a", 40, a[3]);
	struct task t = get(f, b[1]);
	assert_string_equal(t.tenant, "b");
	task_release(&t);
	/* the same pages whether the filter is none, one status, several or all */
	static const uint32_t filters[] = {0, B(TASK_QUEUED), B(TASK_QUEUED) | B(TASK_FAILED),
					   (1u << TASK_STATUS_COUNT) - 1};
	struct ids page;
	for (size_t k = 0; k < sizeof(filters) / sizeof(filters[0]); k++) {
		char after[TASK_ID_SIZE] = "";
		size_t seen = 0;
		static const size_t sizes[] = {3, 1, 0};
		for (int p = 0; p < 3; p++) {
			task_list(f, "a", filters[k], p ? after : NULL, 3, &page);
			assert_int_equal(page.n, sizes[p]);
			for (size_t i = 0; i < page.n; i++) /* none missing, none twice */
				assert_string_equal(page.v[i], a[seen++]);
			if (page.n)
				memcpy(after, page.v[page.n - 1], TASK_ID_SIZE);
		}
		assert_int_equal(seen, 4);
		task_list(f, "b", filters[k], NULL, 10, &page);
		assert_int_equal(page.n, 3);
		for (size_t i = 0; i < page.n; i++)
			assert_string_equal(page.v[i], b[i]);
	}
	/* statuses within a tenant */
	claim(f, 100, a[0]);
	claim(f, 101, b[0]);
	task_list(f, "a", B(TASK_RUNNING), NULL, 10, &page);
	assert_int_equal(page.n, 1);
	assert_string_equal(page.v[0], a[0]);
	task_list(f, "a", B(TASK_QUEUED), NULL, 10, &page);
	assert_int_equal(page.n, 3);
	assert_string_equal(page.v[0], a[1]);
	/* a page may start after a task of its tenant the filter leaves out */
	task_list(f, "a", B(TASK_QUEUED), a[0], 2, &page);
	assert_int_equal(page.n, 2);
	assert_string_equal(page.v[0], a[1]);
	assert_string_equal(page.v[1], a[2]);
	/* but not after another tenant's task: to a tenant, that one does not exist */
	struct task_filter flt = {.after_id = b[1], .limit = 10, .tenant = "a"};
	FAILS(ENOENT, store_task_list(f->st, &flt, collect_id, &page, err));
	flt.statuses = B(TASK_QUEUED);
	FAILS(ENOENT, store_task_list(f->st, &flt, collect_id, &page, err));
	/* every tenant: every task, and pages after anyone's */
	task_list(f, NULL, 0, NULL, 10, &page);
	assert_int_equal(page.n, 7);
	task_list(f, NULL, 0, b[1], 10, &page);
	assert_int_equal(page.n, 3);
	assert_string_equal(page.v[0], a[2]);
	/* a tenant with no tasks has none; a name that is not one is refused */
	task_list(f, TENANT_DEFAULT, 0, NULL, 10, &page);
	assert_int_equal(page.n, 0);
	flt = (struct task_filter){.limit = 10, .tenant = "Not A Name"};
	FAILS(EINVAL, store_task_list(f->st, &flt, collect_id, &page, err));
	flt.tenant = "";
	FAILS(EINVAL, store_task_list(f->st, &flt, collect_id, &page, err));
}

/* ---- the tenant of sandboxes ------------------------------------------- */

static void test_sandbox_lists_by_tenant(void **state)
{
	struct fx *f = *state;
	char a1[SANDBOX_ID_SIZE], a2[SANDBOX_ID_SIZE], a3[SANDBOX_ID_SIZE], b1[SANDBOX_ID_SIZE],
	    b2[SANDBOX_ID_SIZE], p[SANDBOX_ID_SIZE];
	tenant_add(f, "a", 1);
	tenant_add(f, "b", 1);
	sbx_add(f, "a", SANDBOX_RUNNING, 10, a1);
	sbx_add(f, "b", SANDBOX_RUNNING, 10, b1);
	sbx_add(f, TENANT_DEFAULT, SANDBOX_POOLED, 15, p);
	sbx_add(f, "a", SANDBOX_RUNNING, 20, a2);
	sbx_add(f, "b", SANDBOX_RUNNING, 20, b2);
	sbx_add(f, "a", SANDBOX_RUNNING, 30, a3);
	OK(store_sandbox_set_status(f->st, b2, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	OK(store_sandbox_end(f->st, a3, 40, "deleted", NULL, err));
	struct sandbox_record sb = sbx_get(f, b2);
	assert_string_equal(sb.tenant, "b");
	sandbox_record_release(&sb);
	struct sbx_ids got;
	/* no statuses: what users may see, of that tenant */
	sbx_list(f, "a", 0, NULL, 10, &got);
	assert_int_equal(got.n, 3);
	assert_string_equal(got.v[0], a1);
	assert_string_equal(got.v[1], a2);
	assert_string_equal(got.v[2], a3);
	for (size_t i = 0; i < got.n; i++)
		assert_string_equal(got.tenant[i], "a");
	sbx_list(f, "a", S(SANDBOX_RUNNING), NULL, 10, &got);
	assert_int_equal(got.n, 2);
	sbx_list(f, "b", S(SANDBOX_PAUSED), NULL, 10, &got);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.v[0], b2);
	/* the pool is the default tenant's, shown only when asked for */
	sbx_list(f, TENANT_DEFAULT, 0, NULL, 10, &got);
	assert_int_equal(got.n, 0);
	sbx_list(f, TENANT_DEFAULT, S(SANDBOX_POOLED), NULL, 10, &got);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.v[0], p);
	sbx_list(f, NULL, ALL_SBX, NULL, 10, &got);
	assert_int_equal(got.n, 6);
	/* pages within a tenant, whatever the filter */
	static const uint32_t filters[] = {0, S(SANDBOX_RUNNING) | S(SANDBOX_ENDED), ALL_SBX};
	for (size_t k = 0; k < sizeof(filters) / sizeof(filters[0]); k++) {
		const char *want[] = {a1, a2, a3};
		char after[SANDBOX_ID_SIZE] = "";
		for (int i = 0; i < 4; i++) {
			sbx_list(f, "a", filters[k], i ? after : NULL, 1, &got);
			assert_int_equal(got.n, i < 3 ? 1 : 0);
			if (i < 3) {
				assert_string_equal(got.v[0], want[i]);
				memcpy(after, got.v[0], SANDBOX_ID_SIZE);
			}
		}
	}
	/* not after another tenant's sandbox */
	struct sandbox_filter flt = {.after_id = b1, .limit = 10, .tenant = "a"};
	FAILS(ENOENT, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	flt.statuses = ALL_SBX;
	FAILS(ENOENT, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	flt.after_id = p; /* the pool's is the default tenant's */
	FAILS(ENOENT, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	flt = (struct sandbox_filter){.limit = 10, .tenant = "A"};
	FAILS(EINVAL, store_sandbox_list(f->st, &flt, collect_sbx, &got, err));
	/* every tenant: pages after anyone's */
	sbx_list(f, NULL, 0, b1, 10, &got);
	assert_int_equal(got.n, 3);
	assert_string_equal(got.v[0], a2);
}

static void test_claim_moves_to_the_claimers_tenant(void **state)
{
	struct fx *f = *state;
	char p[SANDBOX_ID_SIZE], q[SANDBOX_ID_SIZE];
	tenant_add(f, "acme", 1);
	sbx_add(f, TENANT_DEFAULT, SANDBOX_POOLED, 10, p);
	sbx_add(f, TENANT_DEFAULT, SANDBOX_POOLED, 11, q);
	/* a claim with a name that is not a tenant's changes nothing */
	FAILS(EINVAL, store_sandbox_claim(f->st, q, "Acme", 50, 0, NULL, NULL, err));
	FAILS(EINVAL, store_sandbox_claim(f->st, q, "", 50, 0, NULL, NULL, err));
	FAILS(EINVAL, store_sandbox_claim(f->st, q, NULL, 50, 0, NULL, NULL, err));
	struct sandbox_record sb = sbx_get(f, q);
	assert_int_equal(sb.status, SANDBOX_POOLED);
	assert_string_equal(sb.tenant, TENANT_DEFAULT);
	sandbox_record_release(&sb);
	/* claimed: the claimer's tenant's from now on */
	OK(store_sandbox_claim(f->st, p, "acme", 50, 0, NULL, "{\"u\":1}", err));
	sb = sbx_get(f, p);
	assert_int_equal(sb.status, SANDBOX_RUNNING);
	assert_string_equal(sb.tenant, "acme");
	assert_int_equal(sb.created_at, 50);
	sandbox_record_release(&sb);
	struct sbx_ids got;
	sbx_list(f, "acme", 0, NULL, 10, &got);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.v[0], p);
	sbx_list(f, TENANT_DEFAULT, ALL_SBX, NULL, 10, &got);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.v[0], q);
	/* and it keeps its tenant from being deleted until it ends */
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err));
	OK(store_sandbox_end(f->st, p, 60, "deleted", NULL, err));
	sb = sbx_get(f, p);
	assert_string_equal(sb.tenant, "acme"); /* ending does not move it */
	sandbox_record_release(&sb);
	OK(store_tenant_delete(f->st, "acme", 1000, err));
	/* the default tenant's claim is a claim like any other */
	OK(store_sandbox_claim(f->st, q, TENANT_DEFAULT, 70, 0, NULL, NULL, err));
	sb = sbx_get(f, q);
	assert_string_equal(sb.tenant, TENANT_DEFAULT);
	sandbox_record_release(&sb);
}

/* ---- transactions, reopening ------------------------------------------- */

static void test_tx(void **state)
{
	struct fx *f = *state;
	OK(store_tx_begin(f->st, err));
	tenant_add(f, "acme", 1);
	key_add(f, "k1", "acme", 2);
	/* a failing call undoes only itself; the group goes on */
	FAILS(EEXIST, store_tenant_insert(f->st, "acme", 3, NULL, err));
	struct key_record dup = key_of("k1", "acme", KEY_ROLE_ADMIN, 4);
	FAILS(EEXIST, store_key_insert(f->st, &dup, err));
	FAILS(EBUSY, store_tenant_delete(f->st, "acme", 1000, err));
	OK(store_key_revoke(f->st, "k1", 5, err));
	FAILS(ESTALE, store_key_revoke(f->st, "k1", 6, err));
	OK(store_tx_commit(f->st, err));
	struct key_record k = key_get(f, "k1");
	assert_int_equal(k.role, KEY_ROLE_MEMBER);
	assert_int_equal(k.revoked_at, 5);
	key_record_release(&k);
	/* a rolled-back group leaves nothing */
	OK(store_tx_begin(f->st, err));
	tenant_add(f, "gone", 1);
	key_add(f, "k2", "gone", 2);
	OK(store_tenant_delete(f->st, "acme", 1000, err));
	store_tx_rollback(f->st);
	assert_false(tenant_exists(f, "gone"));
	assert_true(tenant_exists(f, "acme"));
	FAILS(ENOENT, store_key_get(f->st, "k2", &k, err));
	assert_int_equal(key_count(f), 0);
}

static void test_reopen_keeps_everything(void **state)
{
	struct fx *f = *state;
	OK(store_tenant_insert(f->st, "acme", 3, "{\"q\":1}", err));
	struct key_record in = key_of("k1", "acme", KEY_ROLE_ADMIN, 4);
	in.expires_at = 9;
	in.label = "label";
	OK(store_key_insert(f->st, &in, err));
	char t[TASK_ID_SIZE], p[SANDBOX_ID_SIZE];
	task_add(f, "acme", 5, t);
	sbx_add(f, TENANT_DEFAULT, SANDBOX_POOLED, 6, p);
	OK(store_sandbox_claim(f->st, p, "acme", 7, 0, NULL, NULL, err));
	reopen(f);
	struct tenant_record tr = tenant_get(f, "acme");
	assert_int_equal(tr.created_at, 3);
	assert_string_equal(tr.quotas_json, "{\"q\":1}");
	tenant_record_release(&tr);
	assert_true(tenant_exists(f, TENANT_DEFAULT));
	struct key_record k = key_get(f, "k1");
	assert_string_equal(k.tenant, "acme");
	assert_int_equal(k.role, KEY_ROLE_ADMIN);
	assert_memory_equal(k.hash, in.hash, KEY_HASH_SIZE);
	assert_int_equal(k.expires_at, 9);
	assert_string_equal(k.label, "label");
	key_record_release(&k);
	struct task task = get(f, t);
	assert_string_equal(task.tenant, "acme");
	task_release(&task);
	struct sandbox_record sb = sbx_get(f, p);
	assert_string_equal(sb.tenant, "acme");
	sandbox_record_release(&sb);
	assert_int_equal(key_count(f), 1);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_default_tenant),
	    T(test_tenant_insert_get),
	    T(test_tenant_insert_errors),
	    T(test_tenant_list),
	    T(test_tenant_set_quotas),
	    T(test_tenant_delete),
	    T(test_claims_are_fair_across_tenants),
	    T(test_claims_skip_tenants),
	    T(test_insert_within_queued_bound),
	    T(test_tenant_delete_refused_while_a_key),
	    T(test_tenant_delete_refused_while_a_task),
	    T(test_tenant_delete_refused_while_a_sandbox),
	    T(test_key_insert_get),
	    T(test_key_insert_errors),
	    T(test_key_list),
	    T(test_key_revoke_and_count),
	    T(test_task_lists_by_tenant),
	    T(test_sandbox_lists_by_tenant),
	    T(test_claim_moves_to_the_claimers_tenant),
	    T(test_tx),
	    T(test_reopen_keeps_everything),
	};
#undef T
	return run_per_backend("store: tenants and keys", tests, sizeof(tests) / sizeof(tests[0]));
}
