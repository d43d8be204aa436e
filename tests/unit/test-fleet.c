/*
 * test-fleet.c - the fleet (src/fleet/fleet.h): the warm pool and its
 * hand-outs, sandboxes built on demand (and failing to be), the keeper
 * recording the ends of shims that are gone, delete, pause, expiry,
 * recovery of what a previous daemon left, and fleet_free(). Each case
 * has a real SQLite store in a fresh state directory, an injected clock,
 * and fake-shim.c (FAKE_SHIM_PATH) in place of agentbox-shim: its log,
 * <state>/fake-shim.log, says what each shim was told, and the pids by
 * which the teardown kills every shim a case started.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "base/spawn.h"
#include "core/layout.h"
#include "fleet/fleet.h"
#include "shim/client.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIMITS	     "\"limits\":{\"cpus\":1,\"memory\":268435456}"
#define DEFAULT_SPEC "{\"env\":{}," LIMITS "}"
#define SPEC_ENV(e)  "{\"env\":" e "," LIMITS "}"
#define T0	     1700000000000LL /* the injected clock, at first */
#define WAIT_MS	     10000	     /* the most any WAIT_FOR() waits */
#define MAX_IDS	     16
#define NO_WHY	     "its supervisor ended without recording why"

static _Atomic int64_t clock_now = T0;

static int64_t fake_now(void)
{
	return clock_now;
}

static void log_stderr(void *data, const char *msg)
{
	(void)data;
	fprintf(stderr, "fleet: %s\n", msg);
}

/* Fail the case with err's reason unless expr returns 0. */
#define OK(expr)                                                                                   \
	do {                                                                                       \
		struct error err_ = {0};                                                           \
		struct error *err = &err_;                                                         \
		int r_ = (expr);                                                                   \
		if (r_ != 0)                                                                       \
			fail_msg("%s = %d: %s", #expr, r_, err_.msg);                              \
	} while (0)

/* Expect expr to fail with -want, err->code want and a message. */
#define FAILS(want, expr)                                                                          \
	do {                                                                                       \
		struct error err_ = {0};                                                           \
		struct error *err = &err_;                                                         \
		int r_ = (expr);                                                                   \
		if (r_ != -(want))                                                                 \
			fail_msg("%s = %d (%s), want %d", #expr, r_, err_.msg, -(want));           \
		assert_int_equal(err_.code, want);                                                 \
		assert_true(err_.msg[0] != '\0');                                                  \
	} while (0)

/* Poll cond until it holds, failing the case after WAIT_MS. */
#define WAIT_FOR(cond)                                                                             \
	do {                                                                                       \
		int64_t deadline_ = wall_clock_ms() + WAIT_MS;                                     \
		while (!(cond)) {                                                                  \
			if (wall_clock_ms() > deadline_)                                           \
				fail_msg("waited %d ms in vain for %s", WAIT_MS, #cond);           \
			usleep(2000);                                                              \
		}                                                                                  \
	} while (0)

struct fx {
	char dir[64]; /* the state directory */
	char db[128];
	struct store *st;
	struct fleet *f;
	struct fleet_config cfg;
};

/* ---- the state directory, and the shims in it ---------------------------- */

static void sbx_path(struct fx *fx, const char *id, const char *name, char *buf, size_t size)
{
	int r = name ? layout_sandbox_file(buf, size, fx->dir, id, name)
		     : layout_sandbox_dir(buf, size, fx->dir, id);
	assert_int_equal(r, 0);
}

static bool dir_exists(struct fx *fx, const char *id)
{
	char path[256];
	struct stat sb;
	sbx_path(fx, id, NULL, path, sizeof(path));
	return stat(path, &sb) == 0;
}

/* Is the sandbox's lock held (by its shim)? */
static bool lock_held(struct fx *fx, const char *id)
{
	char path[256];
	sbx_path(fx, id, LAYOUT_LOCK, path, sizeof(path));
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

/* The pid in the shim's pid file, or -1. */
static pid_t shim_pid(struct fx *fx, const char *id)
{
	char path[256], text[64];
	sbx_path(fx, id, NULL, path, sizeof(path));
	int dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	ssize_t n = read_file_at(dfd, LAYOUT_SHIM_PID, text, sizeof(text));
	close(dfd);
	long pid = n > 0 ? strtol(text, NULL, 10) : -1;
	return pid > 0 ? (pid_t)pid : -1;
}

/* Does the shim of id live: its process there, its lock held, its socket bound? */
static bool shim_alive(struct fx *fx, const char *id)
{
	char path[256];
	struct stat sb;
	pid_t pid = shim_pid(fx, id);
	sbx_path(fx, id, LAYOUT_SHIM_SOCK, path, sizeof(path));
	return pid > 0 && kill(pid, 0) == 0 && lock_held(fx, id) && stat(path, &sb) == 0 &&
	       S_ISSOCK(sb.st_mode);
}

static void read_sbx_file(struct fx *fx, const char *id, const char *name, char *buf, size_t size)
{
	char path[256];
	sbx_path(fx, id, NULL, path, sizeof(path));
	int dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	ssize_t n = read_file_at(dfd, name, buf, size);
	close(dfd);
	if (n < 0)
		fail_msg("%s/%s: %s", path, name, strerror((int)-n));
}

/*
 * Lines of fake-shim.log for id and op (id NULL: any): how many, and the
 * number of the last one in *ret_n (for "start", its pid).
 */
static int log_count(struct fx *fx, const char *id, const char *op, int64_t *ret_n)
{
	char path[128], line[256];
	snprintf(path, sizeof(path), "%s/fake-shim.log", fx->dir);
	FILE *f = fopen(path, "re");
	int count = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char lid[64], lop[32];
		long long a, b;
		if (sscanf(line, "%63s %31s %lld %lld", lid, lop, &a, &b) != 4)
			fail_msg("fake-shim.log: a bad line: %s", line);
		if ((id && strcmp(id, lid) != 0) || strcmp(op, lop) != 0)
			continue;
		count++;
		if (ret_n)
			*ret_n = a;
	}
	if (f)
		fclose(f);
	return count;
}

/* SIGKILL every fake shim the log says started (and still is that process), and reap it. */
static void kill_shims(struct fx *fx)
{
	char path[128], line[256];
	snprintf(path, sizeof(path), "%s/fake-shim.log", fx->dir);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char lid[64], lop[32];
		long long pid, start;
		unsigned long long now_start;
		if (sscanf(line, "%63s %31s %lld %lld", lid, lop, &pid, &start) != 4 ||
		    strcmp(lop, "start") != 0 || pid <= 0)
			continue;
		if (proc_start_time((pid_t)pid, &now_start) == 0 &&
		    now_start == (unsigned long long)start) {
			kill((pid_t)pid, SIGKILL);
			(void)waitpid((pid_t)pid, NULL, 0); /* ECHILD if the fleet reaped it */
		}
	}
	if (f)
		fclose(f);
}

/*
 * Start a fake shim for id as a previous daemon would have (the fleet's
 * way: sandbox.json, the lock flock'ed as fd 3, the ready pipe as fd 4),
 * and wait for its "ok".
 */
static void spawn_shim(struct fx *fx, const char *id, int64_t expires_at)
{
	char dir[256], sj[512];
	sbx_path(fx, id, NULL, dir, sizeof(dir));
	assert_int_equal(mkdir_p_at(AT_FDCWD, dir, 0700), 0);
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	snprintf(sj, sizeof(sj), "{\"id\":\"%s\",\"expires_at\":%lld,\"spec\":%s}", id,
		 (long long)expires_at, DEFAULT_SPEC);
	assert_int_equal(create_file_at(dfd, LAYOUT_SANDBOX_JSON, sj, 0600), 0);
	assert_int_equal(create_file_at(dfd, LAYOUT_ENV_JSON, "{}", 0600), 0);
	int lock = openat(dfd, LAYOUT_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	close(dfd);
	assert_true(lock >= 0);
	assert_int_equal(flock(lock, LOCK_EX | LOCK_NB), 0);
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	/* spawn_helper() wants fds above those it hands over */
	int fds[] = {fcntl(lock, F_DUPFD_CLOEXEC, 10), fcntl(ready[1], F_DUPFD_CLOEXEC, 10)};
	close(lock);
	close(ready[1]);
	pid_t pid;
	int r = spawn_helper(FAKE_SHIM_PATH, dir, fds, 2, &pid);
	close(fds[0]);
	close(fds[1]);
	char line[64] = "";
	struct pollfd p = {.fd = ready[0], .events = POLLIN};
	ssize_t n =
	    r == 0 && poll(&p, 1, WAIT_MS) == 1 ? read(ready[0], line, sizeof(line) - 1) : -1;
	close(ready[0]);
	assert_int_equal(r, 0);
	assert_true(n == 3);
	assert_memory_equal(line, "ok\n", 3);
}

/* ---- the store ------------------------------------------------------------ */

static struct sandbox_record get(struct fx *fx, const char *id)
{
	struct sandbox_record s = {0};
	OK(store_sandbox_get(fx->st, id, &s, err));
	return s;
}

static bool row_exists(struct fx *fx, const char *id)
{
	struct sandbox_record s = {0};
	struct error err = {0};
	int r = store_sandbox_get(fx->st, id, &s, &err);
	if (r != 0 && r != -ENOENT)
		fail_msg("store_sandbox_get(%s) = %d: %s", id, r, err.msg);
	sandbox_record_release(&s);
	return r == 0;
}

static enum sandbox_status status_of(struct fx *fx, const char *id)
{
	struct sandbox_record s = get(fx, id);
	sandbox_record_release(&s);
	return s.status;
}

/* An ended sandbox's end: reason, detail ("" for none) and time. */
static void assert_ended(struct fx *fx, const char *id, const char *reason, const char *detail,
			 int64_t ended_at)
{
	struct sandbox_record s = get(fx, id);
	assert_int_equal(s.status, SANDBOX_ENDED);
	assert_non_null(s.end_reason);
	assert_string_equal(s.end_reason, reason);
	assert_string_equal(s.end_detail ? s.end_detail : "", detail);
	assert_int_equal(s.ended_at, ended_at);
	sandbox_record_release(&s);
}

struct ids {
	size_t n;
	char v[MAX_IDS][SANDBOX_ID_SIZE];
};

static int collect(const struct sandbox_record *s, void *data)
{
	struct ids *ids = data;
	assert_true(ids->n < MAX_IDS);
	memcpy(ids->v[ids->n++], s->id, SANDBOX_ID_SIZE);
	return 0;
}

static size_t list(struct fx *fx, enum sandbox_status status, struct ids *ret)
{
	struct sandbox_filter flt = {.statuses = SANDBOX_STATUS_BIT(status), .limit = MAX_IDS};
	memset(ret, 0, sizeof(*ret));
	OK(store_sandbox_list(fx->st, &flt, collect, ret, err));
	return ret->n;
}

static bool has_id(const struct ids *ids, const char *id)
{
	for (size_t i = 0; i < ids->n; i++)
		if (strcmp(ids->v[i], id) == 0)
			return true;
	return false;
}

/* The pooled sandboxes in the store, when each has its live shim; else -1. */
static int pool_ready(struct fx *fx, struct ids *ret)
{
	list(fx, SANDBOX_POOLED, ret);
	for (size_t i = 0; i < ret->n; i++)
		if (!shim_alive(fx, ret->v[i]))
			return -1;
	return (int)ret->n;
}

/* A sandbox inserted in the store as a previous daemon would have. */
static void insert(struct fx *fx, enum sandbox_status status, int64_t expires_at,
		   char id[SANDBOX_ID_SIZE])
{
	struct sandbox_record s = {.tenant = TENANT_DEFAULT,
				   .status =
				       status == SANDBOX_POOLED ? SANDBOX_POOLED : SANDBOX_RUNNING,
				   .created_at = T0 - 1000,
				   .expires_at = expires_at,
				   .spec_json = DEFAULT_SPEC};
	assert_int_equal(sandbox_id_new(s.id), 0);
	OK(store_sandbox_insert(fx->st, &s, err));
	if (status == SANDBOX_PAUSED)
		OK(store_sandbox_set_status(fx->st, s.id, SANDBOX_RUNNING, SANDBOX_PAUSED, err));
	memcpy(id, s.id, SANDBOX_ID_SIZE);
}

/* ---- the fixture ---------------------------------------------------------- */

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test-fleet-XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->db, sizeof(fx->db), "%s/" LAYOUT_DB, fx->dir);
	OK(store_open_sqlite(fx->db, &fx->st, err));
	clock_now = T0;
	fx->cfg = (struct fleet_config){.state_dir = fx->dir,
					.shim_path = FAKE_SHIM_PATH,
					.db_path = fx->db,
					.default_spec_json = DEFAULT_SPEC,
					.log = log_stderr,
					.now_ms = fake_now};
	*state = fx;
	return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

/* Runs after a failed case too: nothing it started may outlive it. */
static int teardown(void **state)
{
	struct fx *fx = *state;
	fleet_free(fx->f);
	kill_shims(fx);
	store_close(fx->st);
	int r = nftw(fx->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return r;
}

/* The fleet of the case: pool_size, its keeper started if asked. */
static void fleet_up(struct fx *fx, unsigned pool_size, bool keeper)
{
	fx->cfg.pool_size = pool_size;
	OK(fleet_new(&fx->cfg, &fx->f, err));
	if (keeper)
		OK(fleet_start(fx->f, err));
}

/* fleet_create() of a sandbox with spec_json, on demand or from the pool. */
static void create(struct fx *fx, const char *spec_json, bool default_limits, int64_t now,
		   struct sandbox_record *ret)
{
	struct fleet_spec spec = {.spec_json = spec_json,
				  .metadata_json = "{\"k\":\"v\"}",
				  .timeout_ms = 60000,
				  .default_limits = default_limits};
	OK(fleet_create(fx->f, fx->st, &spec, now, ret, err));
}

/* ---- the warm pool -------------------------------------------------------- */

static void test_pool_fills_and_hands_out(void **state)
{
	struct fx *fx = *state;
	struct ids pool, again;
	fleet_up(fx, 2, true);
	WAIT_FOR(pool_ready(fx, &pool) == 2);
	assert_int_equal(log_count(fx, NULL, "start", NULL), 2);
	for (size_t i = 0; i < pool.n; i++) {
		struct sandbox_record s = get(fx, pool.v[i]);
		assert_int_equal(s.created_at, T0);
		assert_int_equal(s.expires_at, 0);
		assert_string_equal(s.spec_json, DEFAULT_SPEC);
		sandbox_record_release(&s);
		assert_true(dir_exists(fx, pool.v[i]));
		/* users do not see the pool */
		FAILS(ENOENT, fleet_delete(fx->f, fx->st, pool.v[i], err));
		assert_true(shim_alive(fx, pool.v[i]));
	}

	/* the default limits: one of the pool, handed out */
	const int64_t t1 = T0 + 1000;
	clock_now = t1;
	struct sandbox_record s = {0};
	create(fx, DEFAULT_SPEC, true, t1, &s);
	assert_true(has_id(&pool, s.id));
	assert_int_equal(s.status, SANDBOX_RUNNING);
	assert_int_equal(s.created_at, t1);
	assert_int_equal(s.expires_at, t1 + 60000);
	assert_string_equal(s.metadata_json, "{\"k\":\"v\"}");
	sandbox_record_release(&s);
	s = get(fx, s.id);
	assert_int_equal(s.status, SANDBOX_RUNNING);
	assert_int_equal(s.created_at, t1);
	assert_int_equal(s.expires_at, t1 + 60000);
	int64_t n = 0;
	assert_int_equal(log_count(fx, s.id, "expire", &n), 1);
	assert_int_equal(n, t1 + 60000);
	assert_true(shim_alive(fx, s.id));

	/* the keeper makes one more */
	WAIT_FOR(pool_ready(fx, &again) == 2);
	assert_false(has_id(&again, s.id));
	size_t kept = 0;
	for (size_t i = 0; i < again.n; i++) {
		struct sandbox_record p = get(fx, again.v[i]);
		assert_int_equal(p.created_at, has_id(&pool, p.id) ? T0 : t1);
		kept += has_id(&pool, p.id);
		sandbox_record_release(&p);
	}
	assert_int_equal(kept, 1);
	assert_int_equal(log_count(fx, NULL, "start", NULL), 3);

	/* the default limits with an env: from the pool, its env.json written */
	struct sandbox_record e = {0};
	char text[256];
	create(fx, SPEC_ENV("{\"A\":\"b\"}"), true, t1, &e);
	assert_true(has_id(&again, e.id));
	read_sbx_file(fx, e.id, LAYOUT_ENV_JSON, text, sizeof(text));
	assert_string_equal(text, "{\"A\":\"b\"}");
	WAIT_FOR(pool_ready(fx, &again) == 2);

	/* other limits: built on demand, the pool untouched */
	struct sandbox_record d = {0};
	create(fx, SPEC_ENV("{\"X\":\"1\"}"), false, t1, &d);
	assert_false(has_id(&again, d.id));
	assert_int_equal(d.status, SANDBOX_RUNNING);
	assert_int_equal(d.created_at, t1);
	assert_int_equal(d.expires_at, t1 + 60000);
	assert_string_equal(d.spec_json, SPEC_ENV("{\"X\":\"1\"}"));
	assert_true(shim_alive(fx, d.id));
	read_sbx_file(fx, d.id, LAYOUT_ENV_JSON, text, sizeof(text));
	assert_string_equal(text, "{\"X\":\"1\"}");
	read_sbx_file(fx, d.id, LAYOUT_SANDBOX_JSON, text, sizeof(text));
	assert_non_null(strstr(text, "\"expires_at\":1700000061000"));
	assert_int_equal(log_count(fx, d.id, "expire", NULL), 0);
	assert_int_equal(log_count(fx, NULL, "start", NULL), 5);
	assert_int_equal(pool_ready(fx, &pool), 2);
	assert_int_equal(memcmp(&pool, &again, sizeof(pool)), 0);
	sandbox_record_release(&s);
	sandbox_record_release(&e);
	sandbox_record_release(&d);
}

/* ---- a shim that cannot start --------------------------------------------- */

/* The one ended sandbox of the store: ended "failed" for detail, directory gone, shim reaped. */
static void assert_failed_create(struct fx *fx, const char *detail)
{
	struct ids ended;
	assert_int_equal(list(fx, SANDBOX_ENDED, &ended), 1);
	assert_ended(fx, ended.v[0], "failed", detail, clock_now);
	assert_false(dir_exists(fx, ended.v[0]));
	int64_t pid = 0;
	assert_int_equal(log_count(fx, ended.v[0], "start", &pid), 1);
	assert_int_equal(kill((pid_t)pid, 0), -1); /* gone and reaped: no zombie left */
	assert_int_equal(errno, ESRCH);
}

static void test_create_shim_fails(void **state)
{
	struct fx *fx = *state;
	fleet_up(fx, 0, false);
	clock_now = T0 + 5;
	struct fleet_spec spec = {.spec_json = SPEC_ENV("{\"FAKE_SHIM\":\"fail\"}"),
				  .metadata_json = "{}",
				  .timeout_ms = 1000};
	struct sandbox_record s = {0};
	struct error err = {0};
	assert_int_equal(fleet_create(fx->f, fx->st, &spec, T0, &s, &err), -ECHILD);
	assert_int_equal(err.code, ECHILD);
	assert_string_equal(err.msg, "no good");
	assert_failed_create(fx, "no good");
}

/* Not ready within FLEET_READY_TIMEOUT_MS: SIGTERM'ed, reaped, recorded (slow: ~10 s). */
static void test_create_shim_never_ready(void **state)
{
	struct fx *fx = *state;
	fleet_up(fx, 0, false);
	struct fleet_spec spec = {.spec_json = SPEC_ENV("{\"FAKE_SHIM\":\"slow\"}"),
				  .metadata_json = "{}",
				  .timeout_ms = 1000};
	struct sandbox_record s = {0};
	struct error err = {0};
	assert_int_equal(fleet_create(fx->f, fx->st, &spec, T0, &s, &err), -ECHILD);
	assert_int_equal(err.code, ECHILD);
	assert_string_equal(err.msg, "the sandbox was not ready within 10000 ms");
	assert_failed_create(fx, "the sandbox was not ready within 10000 ms");
}

/* ---- the keeper ------------------------------------------------------------ */

static void test_keeper_records_ends(void **state)
{
	struct fx *fx = *state;
	struct sandbox_record a = {0}, b = {0};
	fleet_up(fx, 0, true);
	create(fx, DEFAULT_SPEC, false, T0, &a);
	create(fx, DEFAULT_SPEC, false, T0, &b);
	assert_true(shim_alive(fx, a.id));
	assert_true(shim_alive(fx, b.id));

	/* killed: no end.json */
	clock_now = T0 + 5000;
	assert_int_equal(kill(shim_pid(fx, a.id), SIGKILL), 0);
	WAIT_FOR(status_of(fx, a.id) == SANDBOX_ENDED);
	assert_ended(fx, a.id, "failed", NO_WHY, T0 + 5000);
	WAIT_FOR(!dir_exists(fx, a.id));
	struct sandbox_record g = {0};
	FAILS(ESTALE, fleet_get_live(fx->f, fx->st, a.id, false, &g, err));

	/* ended by itself, saying so */
	char dir[256];
	sbx_path(fx, b.id, NULL, dir, sizeof(dir));
	json_t *req = json_pack("{s:s, s:s, s:I}", "op", "fake-end", "reason", "expired", "time",
				(json_int_t)(T0 + 777));
	json_t *reply = NULL;
	OK(shim_call(dir, req, -1, WAIT_MS, &reply, NULL, err));
	json_decref(req);
	json_decref(reply);
	WAIT_FOR(status_of(fx, b.id) == SANDBOX_ENDED);
	assert_ended(fx, b.id, "expired", "", T0 + 777);
	WAIT_FOR(!dir_exists(fx, b.id));
	sandbox_record_release(&a);
	sandbox_record_release(&b);
}

/* ---- delete, pause, expiry ------------------------------------------------- */

static void test_delete(void **state)
{
	struct fx *fx = *state;
	struct sandbox_record a = {0};
	fleet_up(fx, 0, true);
	create(fx, DEFAULT_SPEC, false, T0, &a);
	int64_t before = wall_clock_ms();
	OK(fleet_delete(fx->f, fx->st, a.id, err));
	int64_t after = wall_clock_ms();
	assert_int_equal(log_count(fx, a.id, "stop", NULL), 1);
	/* the time is end.json's, written by the shim for the stop */
	struct sandbox_record s = get(fx, a.id);
	assert_int_equal(s.status, SANDBOX_ENDED);
	assert_string_equal(s.end_reason, "deleted");
	assert_true(s.ended_at >= before && s.ended_at <= after);
	sandbox_record_release(&s);
	assert_false(dir_exists(fx, a.id));

	FAILS(ESTALE, fleet_delete(fx->f, fx->st, a.id, err));
	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	FAILS(ENOENT, fleet_delete(fx->f, fx->st, unknown, err));
	sandbox_record_release(&a);
}

static void test_pause_and_expiry(void **state)
{
	struct fx *fx = *state;
	struct sandbox_record a = {0}, b = {0}, g = {0};
	fleet_up(fx, 0, true);
	create(fx, DEFAULT_SPEC, false, T0, &a);

	OK(fleet_pause(fx->f, fx->st, a.id, true, err));
	assert_int_equal(status_of(fx, a.id), SANDBOX_PAUSED);
	assert_int_equal(log_count(fx, a.id, "pause", NULL), 1);
	FAILS(EBUSY, fleet_get_live(fx->f, fx->st, a.id, true, &g, err));
	OK(fleet_get_live(fx->f, fx->st, a.id, false, &g, err));
	sandbox_record_release(&g);
	OK(fleet_pause(fx->f, fx->st, a.id, true, err)); /* paused already: the shim not asked */
	assert_int_equal(log_count(fx, a.id, "pause", NULL), 1);
	OK(fleet_pause(fx->f, fx->st, a.id, false, err));
	assert_int_equal(status_of(fx, a.id), SANDBOX_RUNNING);
	assert_int_equal(log_count(fx, a.id, "resume", NULL), 1);

	OK(fleet_set_expiry(fx->f, fx->st, a.id, T0 + 99999, err));
	struct sandbox_record s = get(fx, a.id);
	assert_int_equal(s.expires_at, T0 + 99999);
	sandbox_record_release(&s);
	int64_t n = 0;
	assert_int_equal(log_count(fx, a.id, "expire", &n), 1);
	assert_int_equal(n, T0 + 99999);

	/* a shim that refuses: -EREMOTEIO with its errno; the expiry is stored first */
	create(fx, SPEC_ENV("{\"FAKE_SHIM\":\"refuse\"}"), false, T0, &b);
	struct error e = {0};
	assert_int_equal(fleet_pause(fx->f, fx->st, b.id, true, &e), -EREMOTEIO);
	assert_int_equal(e.code, EIO);
	assert_string_equal(e.msg, "refused");
	assert_int_equal(status_of(fx, b.id), SANDBOX_RUNNING);
	e = (struct error){0};
	assert_int_equal(fleet_set_expiry(fx->f, fx->st, b.id, T0 + 5, &e), -EREMOTEIO);
	assert_int_equal(e.code, EIO);
	assert_string_equal(e.msg, "refused");
	s = get(fx, b.id);
	assert_int_equal(s.expires_at, T0 + 5);
	sandbox_record_release(&s);

	/* unknown, ended */
	char unknown[SANDBOX_ID_SIZE];
	assert_int_equal(sandbox_id_new(unknown), 0);
	FAILS(ENOENT, fleet_pause(fx->f, fx->st, unknown, true, err));
	FAILS(ENOENT, fleet_set_expiry(fx->f, fx->st, unknown, T0, err));
	OK(fleet_delete(fx->f, fx->st, b.id, err));
	FAILS(ESTALE, fleet_pause(fx->f, fx->st, b.id, true, err));
	FAILS(ESTALE, fleet_set_expiry(fx->f, fx->st, b.id, T0, err));
	assert_int_equal(log_count(fx, b.id, "expire", NULL), 1);
	sandbox_record_release(&a);
	sandbox_record_release(&b);
}

/* ---- recovery --------------------------------------------------------------- */

static void test_recover(void **state)
{
	struct fx *fx = *state;
	char run[SANDBOX_ID_SIZE], paused[SANDBOX_ID_SIZE], expired[SANDBOX_ID_SIZE],
	    nodir[SANDBOX_ID_SIZE], pool_gone[SANDBOX_ID_SIZE], pool_alive[SANDBOX_ID_SIZE];
	/* what a previous daemon left */
	insert(fx, SANDBOX_RUNNING, T0 + 50000, run);
	spawn_shim(fx, run, T0 + 40000); /* it was told an older expiry */
	insert(fx, SANDBOX_PAUSED, T0 + 60000, paused);
	spawn_shim(fx, paused, T0 + 60000);
	insert(fx, SANDBOX_RUNNING, T0 + 70000, expired);
	char dir[256];
	sbx_path(fx, expired, NULL, dir, sizeof(dir));
	assert_int_equal(mkdir_p_at(AT_FDCWD, dir, 0700), 0);
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(create_file_at(dfd, LAYOUT_LOCK, "", 0600), 0);
	assert_int_equal(
	    create_file_at(dfd, LAYOUT_END_JSON,
			   "{\"reason\":\"expired\",\"detail\":\"\",\"time\":1700000000123}", 0600),
	    0);
	close(dfd);
	insert(fx, SANDBOX_RUNNING, T0 + 80000, nodir);
	insert(fx, SANDBOX_POOLED, 0, pool_gone);
	sbx_path(fx, pool_gone, NULL, dir, sizeof(dir));
	assert_int_equal(mkdir_p_at(AT_FDCWD, dir, 0700), 0);
	insert(fx, SANDBOX_POOLED, 0, pool_alive);
	spawn_shim(fx, pool_alive, 0);

	clock_now = T0 + 42;
	fleet_up(fx, 0, false);
	OK(fleet_recover(fx->f, fx->st, err));

	/* alive: adopted, told the stored expiry */
	int64_t n = 0;
	assert_int_equal(status_of(fx, run), SANDBOX_RUNNING);
	assert_int_equal(log_count(fx, run, "expire", &n), 1);
	assert_int_equal(n, T0 + 50000);
	assert_true(shim_alive(fx, run));
	assert_int_equal(status_of(fx, paused), SANDBOX_PAUSED);
	assert_int_equal(log_count(fx, paused, "expire", &n), 1);
	assert_int_equal(n, T0 + 60000);
	assert_true(shim_alive(fx, paused));
	assert_int_equal(status_of(fx, pool_alive), SANDBOX_POOLED);
	assert_int_equal(log_count(fx, pool_alive, "expire", NULL), 0);
	assert_true(shim_alive(fx, pool_alive));
	/* gone: ended as end.json says, or as unknown; the pool's row deleted */
	assert_ended(fx, expired, "expired", "", T0 + 123);
	assert_false(dir_exists(fx, expired));
	assert_ended(fx, nodir, "failed", NO_WHY, T0 + 42);
	assert_false(row_exists(fx, pool_gone));
	assert_false(dir_exists(fx, pool_gone));

	/* the adopted are watched: the keeper sees one go */
	OK(fleet_start(fx->f, err));
	clock_now = T0 + 43;
	assert_int_equal(kill(shim_pid(fx, run), SIGKILL), 0);
	WAIT_FOR(status_of(fx, run) == SANDBOX_ENDED);
	assert_ended(fx, run, "failed", NO_WHY, T0 + 43);
	WAIT_FOR(!dir_exists(fx, run));
	/* and the adopted pool is the fleet's: fleet_free() ends it */
	fleet_free(fx->f);
	fx->f = NULL;
	assert_false(row_exists(fx, pool_alive));
	assert_false(dir_exists(fx, pool_alive));
	assert_int_equal(status_of(fx, paused), SANDBOX_PAUSED);
	assert_true(shim_alive(fx, paused));
}

/* ---- fleet_free() ----------------------------------------------------------- */

static void test_free_stops_the_pool_only(void **state)
{
	struct fx *fx = *state;
	struct ids pool;
	struct sandbox_record a = {0}, d = {0};
	fleet_up(fx, 2, true);
	WAIT_FOR(pool_ready(fx, &pool) == 2);
	create(fx, DEFAULT_SPEC, true, T0, &a);
	create(fx, SPEC_ENV("{\"X\":\"1\"}"), false, T0, &d);
	WAIT_FOR(pool_ready(fx, &pool) == 2);
	pid_t pa = shim_pid(fx, a.id), pd = shim_pid(fx, d.id);

	fleet_free(fx->f);
	fx->f = NULL;
	struct ids left;
	assert_int_equal(list(fx, SANDBOX_POOLED, &left), 0);
	for (size_t i = 0; i < pool.n; i++) {
		assert_false(row_exists(fx, pool.v[i]));
		assert_false(dir_exists(fx, pool.v[i]));
		assert_int_equal(log_count(fx, pool.v[i], "stop", NULL), 1);
	}
	/* handed out: they go on, untold */
	assert_int_equal(status_of(fx, a.id), SANDBOX_RUNNING);
	assert_int_equal(status_of(fx, d.id), SANDBOX_RUNNING);
	assert_true(shim_alive(fx, a.id));
	assert_true(shim_alive(fx, d.id));
	assert_int_equal(shim_pid(fx, a.id), pa);
	assert_int_equal(shim_pid(fx, d.id), pd);
	assert_int_equal(log_count(fx, a.id, "stop", NULL), 0);
	assert_int_equal(log_count(fx, d.id, "stop", NULL), 0);
	sandbox_record_release(&a);
	sandbox_record_release(&d);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pool_fills_and_hands_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_shim_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keeper_records_ends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pause_and_expiry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recover, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_stops_the_pool_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_shim_never_ready, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
