/*
 * test-api-sandboxes.c - component tests of the interactive sandbox
 * routes: every /v1/sandboxes route through api_handle() (and PUT
 * .../files through api_upload_*), against a real SQLite store in a
 * scratch directory and a fake fleet (struct fleet_ops) that records
 * every call and answers as programmed. No socket, no shim, no sandbox:
 * the fake's "sandbox" file system is a directory of the scratch one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "egress/policy.h"
#include "core/sandbox.h"

#define NOW	    1700000000123 /* 2023-11-14T22:13:20.123Z */
#define NOW_TEXT    "2023-11-14T22:13:20.123Z"
#define UNKNOWN_SBX "sbx_8e3x0k0c3y7qk4f4h5vbb2s1mw"

static int64_t fake_now = NOW;
static int64_t now_ms(void)
{
	return fake_now;
}

/* ---- the fake fleet ------------------------------------------------------ */

enum fake_op {
	OP_CREATE,
	OP_GET_LIVE,
	OP_REMOVE,
	OP_PAUSE,
	OP_SET_EXPIRY,
	OP_EXEC_START,
	OP_EXEC_WAIT,
	OP_WATCH,
	OP_PROCESSES,
	OP_NETWORK,
	OP_KILL,
	OP_READ_OUTPUT,
	OP_EXIT_RECORD,
	OP_OPEN,
	OP_UNLINK,
	OP_RENAME,
	OP_DONE,
	OP_COUNT
};

/* One call of the fleet, with what it was given. */
struct fake_call {
	enum fake_op op;
	char id[SANDBOX_ID_SIZE];
	char path[1100];  /* open, unlink; rename's from */
	char to[1100];	  /* rename; open "write": the temporary path it made */
	char mode[8];	  /* open */
	char ext[8];	  /* read_output */
	size_t max;	  /* read_output */
	long pid;	  /* watch, kill, read_output, exit_record */
	int sig;	  /* kill */
	bool flag;	  /* get_live: need_running; pause: pause; create: default_limits */
	int64_t value;	  /* set_expiry: expires_at; create: now; exec: timeout_ms */
	int fd;		  /* exec_wait */
	char spec[1024];  /* create: spec_json; exec: the command */
	char meta[512];	  /* create: metadata_json; exec: env (or "") */
	int64_t timeout;  /* create: timeout_ms */
	char cwd[1100];	  /* exec */
	char stdin_[256]; /* exec; "(none)" for NULL */
};

#define CALLS_MAX 64
#define PEERS_MAX 32

enum exit_state { EXIT_NONE, EXIT_RUNNING, EXIT_DONE };

struct fleet {
	char root[200]; /* the sandbox's file system */
	struct fake_call calls[CALLS_MAX];
	size_t n;
	struct {
		bool set;
		int r;
		int code;
		char msg[200];
	} next[OP_COUNT];
	long next_pid;	 /* exec_start's pid */
	int handed_fd;	 /* the fd exec_start or watch handed out last */
	int handed_peer; /* its other end */
	int peers[PEERS_MAX];
	size_t npeers;
	json_t *exec_exit; /* exec_wait's exit record (a copy is returned) */
	json_t *procs;	   /* processes' list */
	enum exit_state exit_state;
	json_t *exit_rec; /* exit_record's, when EXIT_DONE */
	const char *out, *err;
	size_t out_len, err_len;
	bool out_more, err_more;
	bool write_full; /* open "write" hands out /dev/full (ENOSPC on write) */
};

static struct fake_call *record(struct fleet *fl, enum fake_op op, const char *id)
{
	assert_true(fl->n < CALLS_MAX);
	struct fake_call *c = &fl->calls[fl->n++];
	memset(c, 0, sizeof(*c));
	c->op = op;
	c->fd = -1;
	snprintf(c->id, sizeof(c->id), "%s", id ? id : "");
	return c;
}

/* The next result of op, as programmed (once): true with *r and err set. */
static bool programmed(struct fleet *fl, enum fake_op op, struct error *err, int *r)
{
	if (!fl->next[op].set)
		return false;
	fl->next[op].set = false;
	*r = fl->next[op].r;
	if (err) {
		err->code = fl->next[op].code;
		snprintf(err->msg, sizeof(err->msg), "%s", fl->next[op].msg);
	}
	return true;
}

/* Program the next call of op to fail with r, err->code and msg. */
static void program(struct fleet *fl, enum fake_op op, int r, int code, const char *msg)
{
	fl->next[op].set = true;
	fl->next[op].r = r;
	fl->next[op].code = code;
	snprintf(fl->next[op].msg, sizeof(fl->next[op].msg), "%s", msg);
}

/* A shim's refusal, as the real fleet reports one. */
static int refused(struct error *err, int code, const char *what)
{
	err->code = code;
	snprintf(err->msg, sizeof(err->msg), "%s: %s", what, strerror(code));
	return -EREMOTEIO;
}

static void host_path(struct fleet *fl, const char *path, char *buf, size_t size)
{
	assert_true((size_t)snprintf(buf, size, "%s%s", fl->root, path) < size);
}

/* fleet_get_live(), on the store. */
static int live(struct store *st, const char *id, bool need_running, struct sandbox_record *ret,
		struct error *err)
{
	int r = store_sandbox_get(st, id, ret, err);
	if (r == -ENOENT)
		return error_set(err, ENOENT, "no sandbox %s", id);
	if (r < 0)
		return r;
	if (ret->status == SANDBOX_POOLED) {
		sandbox_record_release(ret);
		return error_set(err, ENOENT, "no sandbox %s", id);
	}
	if (ret->status == SANDBOX_ENDED) {
		sandbox_record_release(ret);
		return error_set(err, ESTALE, "the sandbox %s has ended", id);
	}
	if (need_running && ret->status == SANDBOX_PAUSED) {
		sandbox_record_release(ret);
		return error_set(err, EBUSY, "the sandbox %s is paused: resume it first", id);
	}
	return 0;
}

static int fake_create(struct fleet *fl, struct store *st, const struct fleet_spec *spec,
		       int64_t now, struct sandbox_record *ret, struct error *err)
{
	struct fake_call *c = record(fl, OP_CREATE, NULL);
	snprintf(c->spec, sizeof(c->spec), "%s", spec->spec_json);
	snprintf(c->meta, sizeof(c->meta), "%s", spec->metadata_json);
	c->timeout = spec->timeout_ms;
	c->flag = spec->default_limits;
	c->value = now;
	int r;
	if (programmed(fl, OP_CREATE, err, &r))
		return r;
	struct sandbox_record s = {.tenant = TENANT_DEFAULT,
				   .status = SANDBOX_RUNNING,
				   .created_at = now,
				   .expires_at = now + spec->timeout_ms,
				   .spec_json = (char *)spec->spec_json,
				   .metadata_json = (char *)spec->metadata_json};
	assert_int_equal(sandbox_id_new(s.id), 0);
	if ((r = store_sandbox_insert(st, &s, err)) < 0)
		return r;
	snprintf(c->id, sizeof(c->id), "%s", s.id);
	return store_sandbox_get(st, s.id, ret, err);
}

static int fake_get_live(struct fleet *fl, struct store *st, const char *id, bool need_running,
			 struct sandbox_record *ret, struct error *err)
{
	record(fl, OP_GET_LIVE, id)->flag = need_running;
	int r;
	if (programmed(fl, OP_GET_LIVE, err, &r))
		return r;
	return live(st, id, need_running, ret, err);
}

static int fake_remove(struct fleet *fl, struct store *st, const char *id, struct error *err)
{
	record(fl, OP_REMOVE, id);
	struct sandbox_record s = {0};
	int r;
	if (programmed(fl, OP_REMOVE, err, &r))
		return r;
	if ((r = live(st, id, false, &s, err)) < 0)
		return r;
	sandbox_record_release(&s);
	return store_sandbox_end(st, id, fake_now, "deleted", NULL, err);
}

static int fake_pause(struct fleet *fl, struct store *st, const char *id, bool pause,
		      struct error *err)
{
	record(fl, OP_PAUSE, id)->flag = pause;
	struct sandbox_record s = {0};
	int r;
	if (programmed(fl, OP_PAUSE, err, &r))
		return r;
	if ((r = live(st, id, false, &s, err)) < 0)
		return r;
	enum sandbox_status from = s.status, to = pause ? SANDBOX_PAUSED : SANDBOX_RUNNING;
	sandbox_record_release(&s);
	return from == to ? 0 : store_sandbox_set_status(st, id, from, to, err);
}

static int fake_set_expiry(struct fleet *fl, struct store *st, const char *id, int64_t expires_at,
			   struct error *err)
{
	record(fl, OP_SET_EXPIRY, id)->value = expires_at;
	struct sandbox_record s = {0};
	int r;
	if (programmed(fl, OP_SET_EXPIRY, err, &r))
		return r;
	if ((r = live(st, id, false, &s, err)) < 0)
		return r;
	sandbox_record_release(&s);
	return store_sandbox_set_expiry(st, id, expires_at, err);
}

/* A connection the shim would go on replying on: one end of a socketpair. */
static int hand_out_connection(struct fleet *fl, int *ret_fd)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_true(fl->npeers < PEERS_MAX);
	fl->peers[fl->npeers++] = sv[1];
	fl->handed_fd = sv[0];
	fl->handed_peer = sv[1];
	*ret_fd = sv[0];
	return 0;
}

static void dump(char *buf, size_t size, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	snprintf(buf, size, "%s", text ? text : "");
	free(text);
}

static int fake_exec_start(struct fleet *fl, const char *id, const struct fleet_exec *x,
			   int *ret_fd, long *ret_pid, struct error *err)
{
	struct fake_call *c = record(fl, OP_EXEC_START, id);
	dump(c->spec, sizeof(c->spec), x->command);
	dump(c->meta, sizeof(c->meta), x->env);
	snprintf(c->cwd, sizeof(c->cwd), "%s", x->cwd);
	c->value = x->timeout_ms;
	if (x->stdin_data)
		snprintf(c->stdin_, sizeof(c->stdin_), "%.*s", (int)x->stdin_len, x->stdin_data);
	else
		snprintf(c->stdin_, sizeof(c->stdin_), "(none)");
	int r;
	if (programmed(fl, OP_EXEC_START, err, &r))
		return r;
	*ret_pid = fl->next_pid;
	return hand_out_connection(fl, ret_fd);
}

static int fake_exec_wait(struct fleet *fl, int fd, json_t **ret_exit, struct error *err)
{
	record(fl, OP_EXEC_WAIT, NULL)->fd = fd;
	int r;
	if (programmed(fl, OP_EXEC_WAIT, err, &r))
		return r;
	*ret_exit = fl->exec_exit
			? json_deep_copy(fl->exec_exit)
			: json_pack("{s:i, s:n, s:i}", "exit_code", 0, "signal", "duration_ms", 12);
	return 0;
}

/* A terminal: recorded as an exec (value: rows * 10000 + cols); the master is /dev/null. */
static int fake_exec_tty(struct fleet *fl, const char *id, const struct fleet_exec *x, int *ret_fd,
			 long *ret_pid, int *ret_master, struct error *err)
{
	struct fake_call *c = record(fl, OP_EXEC_START, id);
	dump(c->spec, sizeof(c->spec), x->command);
	c->value = (int64_t)x->rows * 10000 + x->cols;
	int r;
	if (programmed(fl, OP_EXEC_START, err, &r))
		return r;
	*ret_pid = fl->next_pid;
	*ret_master = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(*ret_master >= 0);
	return hand_out_connection(fl, ret_fd);
}

static void fake_done(struct fleet *fl, const char *id, int fd)
{
	record(fl, OP_DONE, id)->fd = fd;
	close(fd);
}

static int fake_watch(struct fleet *fl, const char *id, long pid, int *ret_fd, struct error *err)
{
	record(fl, OP_WATCH, id)->pid = pid;
	int r;
	if (programmed(fl, OP_WATCH, err, &r))
		return r;
	return hand_out_connection(fl, ret_fd);
}

static int fake_processes(struct fleet *fl, const char *id, json_t **ret, struct error *err)
{
	record(fl, OP_PROCESSES, id);
	int r;
	if (programmed(fl, OP_PROCESSES, err, &r))
		return r;
	*ret = fl->procs ? json_deep_copy(fl->procs) : json_array();
	return 0;
}

static int fake_network(struct fleet *fl, const char *id, json_t **ret, struct error *err)
{
	record(fl, OP_NETWORK, id);
	int r;
	if (programmed(fl, OP_NETWORK, err, &r))
		return r;
	*ret = json_pack("{s:s, s:i, s:i}", "mode", "open", "bytes_in", 1234, "bytes_out", 56);
	return 0;
}

static int fake_kill(struct fleet *fl, const char *id, long pid, int sig, struct error *err)
{
	struct fake_call *c = record(fl, OP_KILL, id);
	c->pid = pid;
	c->sig = sig;
	int r;
	if (programmed(fl, OP_KILL, err, &r))
		return r;
	return 0;
}

static int fake_read_output(struct fleet *fl, const char *id, long pid, const char *ext, size_t max,
			    char **ret, size_t *ret_len, bool *ret_more)
{
	struct fake_call *c = record(fl, OP_READ_OUTPUT, id);
	c->pid = pid;
	snprintf(c->ext, sizeof(c->ext), "%s", ext);
	c->max = max;
	int r;
	if (programmed(fl, OP_READ_OUTPUT, NULL, &r))
		return r;
	bool out = strcmp(ext, "out") == 0;
	const char *text = out ? fl->out : fl->err;
	size_t len = out ? fl->out_len : fl->err_len;
	if (!text)
		text = "", len = 0;
	*ret = malloc(len + 1);
	assert_non_null(*ret);
	memcpy(*ret, text, len);
	(*ret)[len] = '\0';
	*ret_len = len;
	if (out ? fl->out_more : fl->err_more)
		*ret_more = true;
	return 0;
}

static int fake_exit_record(struct fleet *fl, const char *id, long pid, json_t **ret_exit)
{
	record(fl, OP_EXIT_RECORD, id)->pid = pid;
	int r;
	if (programmed(fl, OP_EXIT_RECORD, NULL, &r))
		return r;
	switch (fl->exit_state) {
	case EXIT_NONE:
		return -ENOENT;
	case EXIT_RUNNING:
		*ret_exit = NULL;
		return 0;
	default:
		*ret_exit = json_deep_copy(fl->exit_rec);
		return 0;
	}
}

static int fake_open(struct fleet *fl, const char *id, const char *path, const char *mode,
		     int *ret_fd, char *ret_temp, size_t temp_size, struct error *err)
{
	struct fake_call *c = record(fl, OP_OPEN, id);
	snprintf(c->path, sizeof(c->path), "%s", path);
	snprintf(c->mode, sizeof(c->mode), "%s", mode);
	int r;
	if (programmed(fl, OP_OPEN, err, &r))
		return r;
	char host[1400];
	int fd;
	if (strcmp(mode, "write") == 0) {
		const char *slash = strrchr(path, '/');
		char temp[1100];
		snprintf(temp, sizeof(temp), "%.*s/.agentbox-XXXXXX", (int)(slash - path), path);
		host_path(fl, temp, host, sizeof(host));
		fd = mkstemp(host);
		if (fd < 0)
			return refused(err, errno, path);
		/* the temporary path as the sandbox names it: the X's filled in */
		snprintf(temp, sizeof(temp), "%s", host + strlen(fl->root));
		assert_true(strlen(temp) < temp_size);
		snprintf(ret_temp, temp_size, "%s", temp);
		snprintf(c->to, sizeof(c->to), "%s", temp);
		if (fl->write_full) {
			close(fd);
			fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
			assert_true(fd >= 0);
		}
	} else {
		host_path(fl, path, host, sizeof(host));
		int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW;
		if (strcmp(mode, "dir") == 0)
			flags |= O_DIRECTORY;
		fd = open(host, flags);
		if (fd < 0)
			return refused(err, errno, path);
	}
	*ret_fd = fd;
	return 0;
}

static int fake_unlink(struct fleet *fl, const char *id, const char *path, struct error *err)
{
	snprintf(record(fl, OP_UNLINK, id)->path, sizeof(fl->calls[0].path), "%s", path);
	int r;
	if (programmed(fl, OP_UNLINK, err, &r))
		return r;
	char host[1400];
	host_path(fl, path, host, sizeof(host));
	return unlink(host) < 0 ? refused(err, errno, path) : 0;
}

static int fake_rename(struct fleet *fl, const char *id, const char *from, const char *to,
		       struct error *err)
{
	struct fake_call *c = record(fl, OP_RENAME, id);
	snprintf(c->path, sizeof(c->path), "%s", from);
	snprintf(c->to, sizeof(c->to), "%s", to);
	int r;
	if (programmed(fl, OP_RENAME, err, &r))
		return r;
	char a[1400], b[1400];
	host_path(fl, from, a, sizeof(a));
	host_path(fl, to, b, sizeof(b));
	return rename(a, b) < 0 ? refused(err, errno, to) : 0;
}

static const struct fleet_ops fake_ops = {
    .create = fake_create,
    .get_live = fake_get_live,
    .remove = fake_remove,
    .pause = fake_pause,
    .set_expiry = fake_set_expiry,
    .exec_start = fake_exec_start,
    .exec_tty = fake_exec_tty,
    .exec_wait = fake_exec_wait,
    .done = fake_done,
    .watch = fake_watch,
    .processes = fake_processes,
    .network = fake_network,
    .kill = fake_kill,
    .read_output = fake_read_output,
    .exit_record = fake_exit_record,
    .open = fake_open,
    .unlink = fake_unlink,
    .rename = fake_rename,
};

/* How many calls of op (OP_COUNT: of any) the fleet had. */
static size_t count(struct fleet *fl, enum fake_op op)
{
	size_t n = 0;
	for (size_t i = 0; i < fl->n; i++)
		n += op == OP_COUNT || fl->calls[i].op == op;
	return n;
}

/* The last call of op, which must have happened. */
static struct fake_call *last(struct fleet *fl, enum fake_op op)
{
	for (size_t i = fl->n; i > 0; i--)
		if (fl->calls[i - 1].op == op)
			return &fl->calls[i - 1];
	fail_msg("the fleet had no call %d", op);
	return NULL;
}

/* Forget the calls so far. */
static void forget(struct fleet *fl)
{
	fl->n = 0;
}

/* Is the other end of a handed-out connection closed (the API closed its fd)? */
static bool peer_sees_close(int peer)
{
	char c;
	return recv(peer, &c, 1, MSG_DONTWAIT) == 0;
}

/* ---- fixture ------------------------------------------------------------- */

struct fx {
	char dir[128];
	char state[160];
	struct store *st;
	struct fleet *fl;
	struct api_ctx ctx;
	int fds; /* open fds after setup: no test may leave one open */
};

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test-api-sbx.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	char db[200];
	snprintf(db, sizeof(db), "%s/store.db", f->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	struct error err = {0};
	if (store_open_sqlite(db, &f->st, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	f->fl = calloc(1, sizeof(*f->fl));
	if (!f->fl)
		return -1;
	snprintf(f->fl->root, sizeof(f->fl->root), "%s/root", f->dir);
	char tmpdir[240];
	snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", f->fl->root);
	if (mkdir(f->fl->root, 0755) < 0 || mkdir(tmpdir, 0755) < 0)
		return -1;
	f->fl->next_pid = 7;
	f->fl->handed_fd = f->fl->handed_peer = -1;
	fake_now = NOW;
	f->ctx = (struct api_ctx){.store = f->st,
				  .state_dir = f->state,
				  .now_ms = now_ms,
				  .fleet_ops = &fake_ops,
				  .fleet = f->fl};
	f->fds = open_fds();
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int rc = 0;
	for (size_t i = 0; i < f->fl->npeers; i++)
		close(f->fl->peers[i]);
	if (open_fds() != f->fds) {
		fprintf(stderr, "an fd was left open: %d, were %d\n", open_fds(), f->fds);
		rc = -1;
	}
	json_decref(f->fl->exec_exit);
	json_decref(f->fl->procs);
	json_decref(f->fl->exit_rec);
	free(f->fl);
	store_close(f->st);
	if (nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
		rc = -1;
	free(f);
	return rc;
}

/* ---- calling the API ----------------------------------------------------- */

struct reply {
	struct api_response r;
	json_t *json; /* the body parsed, when it is JSON */
};

static struct reply call_req(struct fx *f, const struct api_request *req)
{
	struct reply rep = {0};
	assert_int_equal(api_handle(&f->ctx, req, &rep.r), 0);
	assert_non_null(rep.r.content_type);
	if (strcmp(rep.r.content_type, "application/json") == 0) {
		json_error_t jerr;
		assert_int_equal(rep.r.kind, API_RESPONSE_BODY);
		assert_non_null(rep.r.body);
		assert_int_equal(strlen(rep.r.body), rep.r.body_len);
		rep.json = json_loadb(rep.r.body, rep.r.body_len, JSON_REJECT_DUPLICATES, &jerr);
		if (!rep.json)
			fail_msg("not JSON: %s: %s", jerr.text, rep.r.body);
	}
	if (rep.r.status == 500)
		assert_true(rep.r.log[0] != '\0');
	else
		assert_string_equal(rep.r.log, "");
	return rep;
}

static struct reply call_accept(struct fx *f, const char *method, const char *path,
				const char *query, const char *body, const char *accept)
{
	struct api_request req = {.method = method,
				  .path = path,
				  .query = query,
				  .body = body,
				  .body_len = body ? strlen(body) : 0,
				  .content_type = body ? "application/json" : NULL,
				  .accept = accept};
	return call_req(f, &req);
}

static struct reply call(struct fx *f, const char *method, const char *path, const char *query,
			 const char *body)
{
	return call_accept(f, method, path, query, body, NULL);
}

static void reply_free(struct reply *rep)
{
	json_decref(rep->json);
	api_response_release(&rep->r);
}

/* The reply must be the error (status, code, field or NULL), in the one shape. */
static void expect_error(struct reply rep, int status, const char *code, const char *field)
{
	if (rep.r.status != status)
		fail_msg("status %d, want %d: %s", rep.r.status, status, rep.r.body);
	assert_int_equal(rep.r.kind, API_RESPONSE_BODY);
	assert_non_null(rep.json);
	assert_int_equal(json_object_size(rep.json), 1);
	json_t *e = json_object_get(rep.json, "error");
	assert_true(json_is_object(e));
	if (strcmp(json_string_value(json_object_get(e, "code")), code) != 0)
		fail_msg("code %s, want %s: %s", json_string_value(json_object_get(e, "code")),
			 code, rep.r.body);
	assert_true(json_string_length(json_object_get(e, "message")) > 0);
	if (field) {
		assert_int_equal(json_object_size(e), 3);
		assert_string_equal(json_string_value(json_object_get(e, "field")), field);
	} else {
		assert_int_equal(json_object_size(e), 2);
	}
	reply_free(&rep);
}

/* The reply must have this status and a JSON body; it is kept for more checks. */
static void expect_status(struct reply *rep, int status)
{
	if (rep->r.status != status)
		fail_msg("status %d, want %d: %s", rep->r.status, status,
			 rep->r.body ? rep->r.body : "");
}

static const char *str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

static json_int_t num(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v))
		fail_msg("%s is not an integer", key);
	return json_integer_value(v);
}

static bool is_null(json_t *obj, const char *key)
{
	return json_is_null(json_object_get(obj, key));
}

static bool is_true(json_t *obj, const char *key)
{
	return json_is_true(json_object_get(obj, key));
}

static bool is_false(json_t *obj, const char *key)
{
	return json_is_false(json_object_get(obj, key));
}

/* "/v1/sandboxes/<id><suffix>", in one of a few rotating buffers. */
static const char *sbx(const char *id, const char *suffix)
{
	static char bufs[4][256];
	static unsigned i;
	char *b = bufs[i++ % 4];
	snprintf(b, sizeof(bufs[0]), "/v1/sandboxes/%s%s", id, suffix);
	return b;
}

/* POST /v1/sandboxes {}; its id goes to id. */
static void create(struct fx *f, char id[SANDBOX_ID_SIZE])
{
	struct reply rep = call(f, "POST", "/v1/sandboxes", NULL, "{}");
	expect_status(&rep, 201);
	snprintf(id, SANDBOX_ID_SIZE, "%s", str(rep.json, "id"));
	reply_free(&rep);
}

/* A sandbox straight into the store, with status (pooled, running or ended). */
static void insert(struct fx *f, enum sandbox_status status, char id[SANDBOX_ID_SIZE])
{
	struct sandbox_record s = {.tenant = TENANT_DEFAULT,
				   .status =
				       status == SANDBOX_POOLED ? SANDBOX_POOLED : SANDBOX_RUNNING,
				   .created_at = fake_now,
				   .spec_json = "{\"env\":{},\"limits\":{\"memory_mb\":512}}",
				   .metadata_json = "{}"};
	struct error err = {0};
	assert_int_equal(sandbox_id_new(s.id), 0);
	assert_int_equal(store_sandbox_insert(f->st, &s, &err), 0);
	if (status == SANDBOX_ENDED)
		assert_int_equal(store_sandbox_end(f->st, s.id, fake_now, "died", "oom", &err), 0);
	snprintf(id, SANDBOX_ID_SIZE, "%s", s.id);
}

static void write_file(struct fx *f, const char *path, const char *text)
{
	char host[1400];
	host_path(f->fl, path, host, sizeof(host));
	FILE *fp = fopen(host, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

/* The content of the sandbox's file path, or NULL when absent (caller frees). */
static char *read_file(struct fx *f, const char *path)
{
	char host[1400];
	host_path(f->fl, path, host, sizeof(host));
	FILE *fp = fopen(host, "r");
	if (!fp)
		return NULL;
	char *buf = calloc(1, 4096);
	assert_non_null(buf);
	size_t n = fread(buf, 1, 4095, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

static bool exists(struct fx *f, const char *path)
{
	char host[1400];
	struct stat st;
	host_path(f->fl, path, host, sizeof(host));
	return lstat(host, &st) == 0;
}

/* ---- the route table ----------------------------------------------------- */

/* Every sandbox route answers through api_handle(), but PUT .../files. */
static void test_route_walk(void **state)
{
	struct fx *f = *state;
	size_t n;
	const struct api_route *routes = api_routes(&n);
	assert_int_equal(n, API_ROUTE_COUNT);
	f->fl->exit_state = EXIT_DONE;
	f->fl->exit_rec = json_pack("{s:i}", "exit_code", 0);
	size_t sandbox_routes = 0;
	for (size_t i = 0; i < n; i++) {
		const struct api_route *rt = &routes[i];
		struct api_request req = {.method = rt->method, .path = "/v1/tasks"};
		if (!API_ROUTE_IS_SANDBOX(rt->id)) {
			char path[128];
			snprintf(path, sizeof(path), "%s", rt->pattern);
			req.path = path;
			/* the other raw bodies: an image's archive, a task's input */
			assert_int_equal(api_request_takes_raw_body(&req),
					 rt->id == API_ROUTE_IMAGES_IMPORT ||
					     rt->id == API_ROUTE_INPUTS_CREATE);
			continue;
		}
		sandbox_routes++;
		/* a sandbox of its own for each route, and a file to get */
		char id[SANDBOX_ID_SIZE];
		create(f, id);
		write_file(f, "/a", "x");
		char path[256] = "";
		for (const char *p = rt->pattern; *p;) {
			size_t len = strlen(path);
			if (strncmp(p, "{id}", 4) == 0)
				snprintf(path + len, sizeof(path) - len, "%s", id), p += 4;
			else if (strncmp(p, "{pid}", 5) == 0)
				snprintf(path + len, sizeof(path) - len, "42"), p += 5;
			else
				path[len] = *p++, path[len + 1] = '\0';
		}
		req.path = path;
		bool files = strstr(rt->pattern, "/files") != NULL;
		req.query = files ? "path=%2Fa" : NULL;
		const char *body = NULL;
		if (strcmp(rt->method, "POST") == 0)
			body = rt->id == API_ROUTE_SANDBOX_EXEC	     ? "{\"command\":[\"true\"]}"
			       : rt->id == API_ROUTE_SANDBOX_TIMEOUT ? "{\"timeout_s\":5}"
								     : "{}";
		req.body = body;
		req.body_len = body ? strlen(body) : 0;
		req.content_type = body ? "application/json" : NULL;

		bool raw = rt->id == API_ROUTE_FILES_PUT;
		assert_int_equal(api_request_takes_raw_body(&req), raw);
		assert_int_equal(!!(rt->flags & API_ROUTE_RAW_BODY), raw);
		struct reply rep = call_req(f, &req);
		if (raw) {
			/* served by api_upload_*(): api_handle() must not be reached */
			expect_error(rep, 500, "internal", NULL);
			continue;
		}
		if (rt->id == API_ROUTE_SANDBOX_EXEC_GET) {
			/* a terminal's handshake or nothing (tests/unit/test-terminal-get.c) */
			expect_error(rep, 400, "bad_handshake", NULL);
			continue;
		}
		if (rt->id == API_ROUTE_SANDBOX_COMMIT) {
			/* its body is checked first; the commit itself needs an image store
			 * and a shim (tests/integration/test_image_choice.py) */
			expect_error(rep, 400, "missing_field", "name");
			continue;
		}
		if (rep.r.status < 200 || rep.r.status > 202)
			fail_msg("%s %s: %d %s", rt->method, rt->pattern, rep.r.status,
				 rep.r.body ? rep.r.body : "");
		reply_free(&rep);
	}
	assert_int_equal(sandbox_routes, API_ROUTE_FILES_DELETE + 1 - API_ROUTE_SANDBOXES_LIST + 1);
}

/* The checks before a handler, and what reaches the fleet. */
static void test_route_checks(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);

	expect_error(call(f, "GET", "/v1/sandboxes/tsk_8e3x0k0c3y7qk4f4h5vbb2s1mw", NULL, NULL),
		     400, "invalid_id", NULL);
	expect_error(call(f, "GET", "/v1/sandboxes/sbx_x", NULL, NULL), 400, "invalid_id", NULL);
	const char *pids[] = {"0", "-1", "007", "99999999", "4194305", "+1", "1x", " 42", "\t7"};
	for (size_t i = 0; i < sizeof(pids) / sizeof(*pids); i++) {
		char suffix[64];
		snprintf(suffix, sizeof(suffix), "/processes/%s/output", pids[i]);
		expect_error(call(f, "GET", sbx(id, suffix), NULL, NULL), 400, "invalid_id", NULL);
		snprintf(suffix, sizeof(suffix), "/processes/%s/kill", pids[i]);
		expect_error(call(f, "POST", sbx(id, suffix), NULL, "{}"), 400, "invalid_id", NULL);
	}
	struct reply rep = call(f, "PATCH", sbx(id, ""), NULL, NULL);
	assert_string_equal(rep.r.allow, "GET, DELETE");
	expect_error(rep, 405, "method_not_allowed", NULL);
	expect_error(call(f, "GET", sbx(id, "/files"), NULL, NULL), 400, "missing_field", "path");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=rel", NULL), 400, "invalid_field",
		     "path");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Fa%00b", NULL), 400, "invalid_field",
		     "query");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Fa&mode=4755", NULL), 400,
		     "unknown_field", "mode");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Fa&list=2", NULL), 400,
		     "invalid_field", "list");
	expect_error(call(f, "DELETE", sbx(id, "/files"), "path=%2Fa&list=1", NULL), 400,
		     "unknown_field", "list");
	expect_error(call(f, "GET", "/v1/sandboxes", "after=nope", NULL), 400, "invalid_field",
		     "after");
	expect_error(call(f, "GET", "/v1/sandboxes", "limit=0", NULL), 400, "invalid_field",
		     "limit");
	/* no status at all is not "every status" */
	expect_error(call(f, "GET", "/v1/sandboxes", "status=", NULL), 400, "invalid_field",
		     "status");
	expect_error(call(f, "GET", "/v1/sandboxes", "status=%2C", NULL), 400, "invalid_field",
		     "status");
	/* none of these reached the fleet */
	assert_int_equal(count(f->fl, OP_COUNT), 0);

	rep = call(f, "GET", "/v1/sandboxes", "status=ended&limit=3", NULL);
	expect_status(&rep, 200);
	assert_int_equal(json_array_size(json_object_get(rep.json, "sandboxes")), 0);
	reply_free(&rep);

	/* follow=1 reaches the fleet's watch: the server streams its fd */
	f->fl->exit_state = EXIT_RUNNING;
	rep = call(f, "GET", sbx(id, "/processes/42/output"), "follow=1", NULL);
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_PROCESS_STREAM);
	assert_string_equal(rep.r.content_type, "text/event-stream");
	assert_int_equal(last(f->fl, OP_WATCH)->pid, 42);
	assert_string_equal(last(f->fl, OP_WATCH)->id, id);
	assert_int_equal(last(f->fl, OP_EXIT_RECORD)->pid, 42);
	assert_int_equal(rep.r.process.pid, 42);
	assert_string_equal(rep.r.process.id, id);
	assert_int_equal(rep.r.fd, f->fl->handed_fd);
	int peer = f->fl->handed_peer;
	assert_false(peer_sees_close(peer));
	reply_free(&rep); /* closes the fd */
	assert_true(peer_sees_close(peer));

	/* a directory listing opens the path as "dir" */
	char host[400];
	snprintf(host, sizeof(host), "%s/tmp/a", f->fl->root);
	assert_int_equal(mkdir(host, 0755), 0);
	rep = call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fa&list=1", NULL);
	expect_status(&rep, 200);
	assert_string_equal(last(f->fl, OP_OPEN)->path, "/tmp/a");
	assert_string_equal(last(f->fl, OP_OPEN)->mode, "dir");
	assert_string_equal(str(rep.json, "path"), "/tmp/a");
	assert_int_equal(json_array_size(json_object_get(rep.json, "entries")), 0);
	reply_free(&rep);

	/* a raw file body may be larger than a JSON body */
	forget(f->fl);
	struct api_request req = {.method = "PUT",
				  .path = sbx(id, "/files"),
				  .query = "path=%2Ftmp%2Fa.txt",
				  .content_type = "application/octet-stream",
				  .body_len = API_BODY_MAX + 1};
	struct api_upload *u = api_upload_begin(&f->ctx, &req);
	assert_non_null(u);
	assert_string_equal(last(f->fl, OP_OPEN)->mode, "write");
	assert_string_equal(last(f->fl, OP_OPEN)->path, "/tmp/a.txt");
	struct api_response res;
	api_upload_end(u, f->ctx.store, &res);
	assert_int_equal(res.status, 201);
	api_response_release(&res);
	api_upload_free(u);

	/* a JSON one may not */
	char *big = malloc(API_BODY_MAX + 1);
	assert_non_null(big);
	memset(big, ' ', API_BODY_MAX + 1);
	big[0] = '{', big[API_BODY_MAX] = '}';
	forget(f->fl);
	req = (struct api_request){.method = "POST",
				   .path = sbx(id, "/exec"),
				   .content_type = "application/json",
				   .body = big,
				   .body_len = API_BODY_MAX + 1};
	expect_error(call_req(f, &req), 413, "body_too_large", NULL);
	free(big);
	/* exec needs a JSON body */
	req.body = "{\"command\":[\"a\"]}";
	req.body_len = strlen(req.body);
	req.content_type = "text/plain";
	expect_error(call_req(f, &req), 415, "unsupported_media_type", NULL);
	req.content_type = "application/json; charset=utf-8";
	rep = call_req(f, &req);
	expect_status(&rep, 200);
	reply_free(&rep);
	assert_int_equal(count(f->fl, OP_EXEC_START), 1);
}

/* ---- create, get, list, delete, timeout, pause ----------------------------- */

static void test_create(void **state)
{
	struct fx *f = *state;
	/* more than this host allows one sandbox: refused before the fleet is asked */
	const struct api_host_limits host = {.memory_bytes = 1ULL << 30, .pids = 300};
	f->ctx.host = &host;
	expect_error(call(f, "POST", "/v1/sandboxes", NULL, "{\"limits\":{\"memory_mb\":1048576}}"),
		     400, "invalid_field", "limits.memory_mb");
	expect_error(call(f, "POST", "/v1/sandboxes", NULL, "{\"limits\":{\"pids\":301}}"), 400,
		     "invalid_field", "limits.pids");
	assert_int_equal(count(f->fl, OP_CREATE), 0);
	struct reply rep = call(f, "POST", "/v1/sandboxes", NULL, "{}");
	expect_status(&rep, 201);
	assert_int_equal(count(f->fl, OP_CREATE), 1);
	struct fake_call *c = last(f->fl, OP_CREATE);
	assert_true(c->flag); /* default_limits */
	assert_int_equal(c->timeout, 300000);
	assert_int_equal(c->value, NOW);
	assert_string_equal(c->meta, "{}");
	json_t *spec = json_loads(c->spec, 0, NULL);
	assert_non_null(spec);
	assert_true(json_is_object(json_object_get(spec, "env")));
	assert_int_equal(json_object_size(json_object_get(spec, "env")), 0);
	assert_true(json_is_object(json_object_get(spec, "limits")));
	json_decref(spec);

	json_t *s = rep.json;
	assert_int_equal(json_object_size(s), 11);
	assert_string_equal(str(s, "tenant"), TENANT_DEFAULT);
	assert_string_equal(str(json_object_get(s, "network"), "mode"), "none");
	assert_string_equal(str(s, "id"), c->id);
	assert_true(sandbox_id_is_valid(str(s, "id")));
	assert_string_equal(str(s, "status"), "running");
	assert_string_equal(str(s, "created_at"), NOW_TEXT);
	assert_string_equal(str(s, "expires_at"), "2023-11-14T22:18:20.123Z");
	assert_true(is_null(s, "ended_at"));
	assert_true(is_null(s, "end_reason"));
	assert_true(is_null(s, "end_detail"));
	json_t *limits = json_object_get(s, "limits");
	assert_true(json_is_object(limits));
	assert_true(json_is_integer(json_object_get(limits, "memory_mb")));
	assert_null(json_object_get(limits, "timeout_s"));
	assert_int_equal(json_object_size(json_object_get(s, "metadata")), 0);
	reply_free(&rep);

	/* no body at all: every default too (but only with the JSON content type) */
	struct api_request req = {
	    .method = "POST", .path = "/v1/sandboxes", .content_type = "application/json"};
	rep = call_req(f, &req);
	expect_status(&rep, 201);
	assert_true(last(f->fl, OP_CREATE)->flag);
	reply_free(&rep);

	/* everything given */
	rep = call(f, "POST", "/v1/sandboxes", NULL,
		   "{\"limits\":{\"memory_mb\":256},\"timeout_s\":60,\"env\":{\"A\":\"b\"},"
		   "\"metadata\":{\"owner\":\"agent-7\"}}");
	expect_status(&rep, 201);
	c = last(f->fl, OP_CREATE);
	assert_false(c->flag);
	assert_int_equal(c->timeout, 60000);
	assert_string_equal(c->meta, "{\"owner\":\"agent-7\"}");
	spec = json_loads(c->spec, 0, NULL);
	assert_string_equal(str(json_object_get(spec, "env"), "A"), "b");
	assert_int_equal(num(json_object_get(spec, "limits"), "memory_mb"), 256);
	json_decref(spec);
	assert_string_equal(str(rep.json, "expires_at"), "2023-11-14T22:14:20.123Z");
	assert_int_equal(num(json_object_get(rep.json, "limits"), "memory_mb"), 256);
	assert_string_equal(str(json_object_get(rep.json, "metadata"), "owner"), "agent-7");
	assert_null(json_object_get(rep.json, "env")); /* env is never shown */
	reply_free(&rep);

	/* a bad body is 400 naming the field, and never reaches the fleet */
	forget(f->fl);
	static const struct {
		const char *body, *code, *field;
	} bad[] = {
	    {"{\"nope\":1}", "unknown_field", "nope"},
	    {"{\"limits\":{\"memory_mb\":1}}", "invalid_field", "limits.memory_mb"},
	    {"{\"limits\":{\"timeout_s\":5}}", "unknown_field", "limits.timeout_s"},
	    {"{\"timeout_s\":0}", "invalid_field", "timeout_s"},
	    {"{\"timeout_s\":604801}", "invalid_field", "timeout_s"},
	    {"{\"timeout_s\":\"5\"}", "invalid_field", "timeout_s"},
	    {"{\"env\":{\"1X\":\"a\"}}", "invalid_field", "env[\"1X\"]"},
	    {"{\"metadata\":[]}", "invalid_field", "metadata"},
	    {"[", "invalid_json", NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		expect_error(call(f, "POST", "/v1/sandboxes", NULL, bad[i].body), 400, bad[i].code,
			     bad[i].field);
	req.body = "{}";
	req.body_len = 2;
	req.content_type = "text/plain";
	expect_error(call_req(f, &req), 415, "unsupported_media_type", NULL);
	assert_int_equal(count(f->fl, OP_COUNT), 0);

	/* the sandbox could not be built */
	program(f->fl, OP_CREATE, -ECHILD, ECHILD, "the shim did not start");
	rep = call(f, "POST", "/v1/sandboxes", NULL, "{}");
	json_t *e = json_object_get(rep.json, "error");
	assert_non_null(strstr(str(e, "message"), "the shim did not start"));
	expect_error(rep, 503, "sandbox_failed", NULL);
	/* any other failure is internal */
	program(f->fl, OP_CREATE, -EIO, EIO, "the store broke");
	rep = call(f, "POST", "/v1/sandboxes", NULL, "{}");
	assert_non_null(strstr(rep.r.log, "the store broke"));
	expect_error(rep, 500, "internal", NULL);
}

static int network_ready_ok(void *data, struct error *err)
{
	(void)err;
	(*(int *)data)++;
	return 0;
}

static int network_ready_fails(void *data, struct error *err)
{
	(void)data;
	return error_set(err, EIO, "nftables: install the agentbox table: no such file");
}

/* "network": validated, the host readied first, kept in the spec and shown */
static void test_create_network(void **state)
{
	struct fx *f = *state;
	const char *open_body = "{\"network\":{\"mode\":\"open\"}}";
	/* a daemon that gives sandboxes no network */
	expect_error(call(f, "POST", "/v1/sandboxes", NULL, open_body), 503, "network_unavailable",
		     "network");
	f->ctx.network_ready = network_ready_fails;
	expect_error(call(f, "POST", "/v1/sandboxes", NULL, open_body), 503, "network_unavailable",
		     "network");
	expect_error(call(f, "POST", "/v1/sandboxes", NULL,
			  "{\"network\":{\"mode\":\"allow\",\"allow\":[\"a.example.com\","
			  "\"1.2.3.4\"]}}"),
		     400, "invalid_field", "network.allow[1]");
	expect_error(call(f, "POST", "/v1/sandboxes", NULL, "{\"network\":{\"mode\":\"wide\"}}"),
		     400, "invalid_field", "network.mode");
	assert_int_equal(count(f->fl, OP_CREATE), 0);

	int readied = 0;
	f->ctx.network_ready = network_ready_ok;
	f->ctx.hook_data = &readied;
	struct reply rep = call(f, "POST", "/v1/sandboxes", NULL, open_body);
	expect_status(&rep, 201);
	assert_int_equal(readied, 1);
	struct fake_call *c = last(f->fl, OP_CREATE);
	assert_true(c->flag); /* default limits: the pool serves it */
	json_t *spec = json_loads(c->spec, 0, NULL);
	assert_non_null(spec);
	assert_string_equal(str(json_object_get(spec, "network"), "mode"), "open");
	json_decref(spec);
	assert_string_equal(str(json_object_get(rep.json, "network"), "mode"), "open");
	reply_free(&rep);
	/* allow: the list, canonical; the proxy in the environment unless it says otherwise */
	rep = call(f, "POST", "/v1/sandboxes", NULL,
		   "{\"env\":{\"https_proxy\":\"mine\"},\"network\":{\"mode\":\"allow\","
		   "\"allow\":[\"API.example.com.\",\"*.example.org:8443\"]}}");
	expect_status(&rep, 201);
	assert_int_equal(readied, 2);
	spec = json_loads(last(f->fl, OP_CREATE)->spec, 0, NULL);
	assert_non_null(spec);
	json_t *allow = json_object_get(json_object_get(spec, "network"), "allow");
	assert_int_equal(json_array_size(allow), 2);
	assert_string_equal(json_string_value(json_array_get(allow, 0)), "api.example.com");
	assert_string_equal(json_string_value(json_array_get(allow, 1)), "*.example.org:8443");
	json_t *env = json_object_get(spec, "env");
	assert_string_equal(str(env, "HTTP_PROXY"), EGRESS_PROXY_URL);
	assert_string_equal(str(env, "HTTPS_PROXY"), EGRESS_PROXY_URL);
	assert_string_equal(str(env, "http_proxy"), EGRESS_PROXY_URL);
	assert_string_equal(str(env, "https_proxy"), "mine");
	json_decref(spec);
	reply_free(&rep);
	/* none is as before: no network in the spec, and the host is not readied */
	rep = call(f, "POST", "/v1/sandboxes", NULL, "{\"network\":{\"mode\":\"none\"}}");
	expect_status(&rep, 201);
	assert_int_equal(readied, 2);
	assert_null(strstr(last(f->fl, OP_CREATE)->spec, "network"));
	reply_free(&rep);
	/* GET .../network: the link's counters from the fleet, no refusals yet */
	int ok = 0;
	f->ctx.network_ready = network_ready_ok;
	f->ctx.hook_data = &ok;
	rep = call(f, "POST", "/v1/sandboxes", NULL, open_body);
	expect_status(&rep, 201);
	char id[SANDBOX_ID_SIZE];
	snprintf(id, sizeof(id), "%s", str(rep.json, "id"));
	reply_free(&rep);
	rep = call(f, "GET", sbx(id, "/network"), NULL, NULL);
	expect_status(&rep, 200);
	assert_string_equal(str(rep.json, "mode"), "open");
	assert_int_equal(num(rep.json, "bytes_in"), 1234);
	assert_int_equal(num(rep.json, "bytes_out"), 56);
	assert_int_equal(json_array_size(json_object_get(rep.json, "denied")), 0);
	assert_int_equal(num(rep.json, "denied_total"), 0);
	reply_free(&rep);
	assert_int_equal(count(f->fl, OP_NETWORK), 1);
	f->ctx.network_ready = NULL;
	f->ctx.hook_data = NULL;
}

static void test_get(void **state)
{
	struct fx *f = *state;
	char running[SANDBOX_ID_SIZE], pooled[SANDBOX_ID_SIZE], ended[SANDBOX_ID_SIZE];
	create(f, running);
	insert(f, SANDBOX_POOLED, pooled);
	insert(f, SANDBOX_ENDED, ended);
	forget(f->fl);

	struct reply rep = call(f, "GET", sbx(running, ""), NULL, NULL);
	expect_status(&rep, 200);
	assert_string_equal(str(rep.json, "id"), running);
	assert_string_equal(str(rep.json, "status"), "running");
	reply_free(&rep);

	rep = call(f, "GET", sbx(ended, ""), NULL, NULL);
	expect_status(&rep, 200);
	assert_string_equal(str(rep.json, "status"), "ended");
	assert_string_equal(str(rep.json, "end_reason"), "died");
	assert_string_equal(str(rep.json, "end_detail"), "oom");
	assert_string_equal(str(rep.json, "ended_at"), NOW_TEXT);
	assert_int_equal(num(json_object_get(rep.json, "limits"), "memory_mb"), 512);
	reply_free(&rep);

	/* a pooled sandbox is nobody's: as unknown */
	expect_error(call(f, "GET", sbx(pooled, ""), NULL, NULL), 404, "not_found", NULL);
	expect_error(call(f, "GET", sbx(UNKNOWN_SBX, ""), NULL, NULL), 404, "not_found", NULL);
	expect_error(call(f, "GET", sbx(running, ""), "x=1", NULL), 400, "unknown_field", "x");
	/* from the store alone */
	assert_int_equal(count(f->fl, OP_COUNT), 0);
}

/* The ids of a list reply's sandboxes, comma-separated, and its next. */
static void list_ids(struct reply *rep, char *buf, size_t size)
{
	json_t *arr = json_object_get(rep->json, "sandboxes"), *s;
	size_t i, len = 0;
	buf[0] = '\0';
	assert_true(json_is_array(arr));
	json_array_foreach(arr, i, s)
	{
		assert_int_equal(json_object_size(s), 11); /* tenant too */
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", str(s, "id"));
	}
}

static void test_list(void **state)
{
	struct fx *f = *state;
	char a[SANDBOX_ID_SIZE], b[SANDBOX_ID_SIZE], c[SANDBOX_ID_SIZE], d[SANDBOX_ID_SIZE];
	char pooled[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_POOLED, pooled);
	fake_now++;
	create(f, a);
	fake_now++;
	create(f, b);
	fake_now++;
	create(f, c);
	fake_now++;
	create(f, d);
	struct reply rep = call(f, "POST", sbx(b, "/pause"), NULL, NULL);
	expect_status(&rep, 200);
	reply_free(&rep);
	rep = call(f, "DELETE", sbx(c, ""), NULL, NULL);
	expect_status(&rep, 200);
	reply_free(&rep);
	forget(f->fl);

	char ids[512], want[512];
	/* the default: running and paused, oldest first */
	rep = call(f, "GET", "/v1/sandboxes", NULL, NULL);
	expect_status(&rep, 200);
	assert_int_equal(json_object_size(rep.json), 2);
	list_ids(&rep, ids, sizeof(ids));
	snprintf(want, sizeof(want), "%s,%s,%s", a, b, d);
	assert_string_equal(ids, want);
	assert_true(is_null(rep.json, "next"));
	assert_string_equal(
	    str(json_array_get(json_object_get(rep.json, "sandboxes"), 1), "status"), "paused");
	reply_free(&rep);

	rep = call(f, "GET", "/v1/sandboxes", "status=ended", NULL);
	expect_status(&rep, 200);
	list_ids(&rep, ids, sizeof(ids));
	assert_string_equal(ids, c);
	reply_free(&rep);

	rep = call(f, "GET", "/v1/sandboxes", "status=running,ended", NULL);
	expect_status(&rep, 200);
	list_ids(&rep, ids, sizeof(ids));
	snprintf(want, sizeof(want), "%s,%s,%s", a, c, d);
	assert_string_equal(ids, want);
	reply_free(&rep);

	/* paging */
	rep = call(f, "GET", "/v1/sandboxes", "limit=2", NULL);
	expect_status(&rep, 200);
	list_ids(&rep, ids, sizeof(ids));
	snprintf(want, sizeof(want), "%s,%s", a, b);
	assert_string_equal(ids, want);
	assert_string_equal(str(rep.json, "next"), b);
	reply_free(&rep);
	char query[128];
	snprintf(query, sizeof(query), "limit=2&after=%s", b);
	rep = call(f, "GET", "/v1/sandboxes", query, NULL);
	expect_status(&rep, 200);
	list_ids(&rep, ids, sizeof(ids));
	assert_string_equal(ids, d);
	assert_true(is_null(rep.json, "next"));
	reply_free(&rep);

	expect_error(call(f, "GET", "/v1/sandboxes", "after=" UNKNOWN_SBX, NULL), 400,
		     "invalid_field", "after");
	expect_error(call(f, "GET", "/v1/sandboxes", "after=tsk_8e3x0k0c3y7qk4f4h5vbb2s1mw", NULL),
		     400, "invalid_field", "after");
	expect_error(call(f, "GET", "/v1/sandboxes", "status=pooled", NULL), 400, "invalid_field",
		     "status");
	expect_error(call(f, "GET", "/v1/sandboxes", "status=running,nope", NULL), 400,
		     "invalid_field", "status");
	expect_error(call(f, "GET", "/v1/sandboxes", "limit=1001", NULL), 400, "invalid_field",
		     "limit");
	expect_error(call(f, "GET", "/v1/sandboxes", "limit=x", NULL), 400, "invalid_field",
		     "limit");
	expect_error(call(f, "GET", "/v1/sandboxes", "sort=id", NULL), 400, "unknown_field",
		     "sort");
	/* the list is the store's */
	assert_int_equal(count(f->fl, OP_COUNT), 0);
}

static void test_delete(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);
	fake_now = NOW + 1000;
	struct reply rep = call(f, "DELETE", sbx(id, ""), NULL, NULL);
	expect_status(&rep, 200);
	assert_int_equal(count(f->fl, OP_REMOVE), 1);
	assert_string_equal(last(f->fl, OP_REMOVE)->id, id);
	assert_string_equal(str(rep.json, "id"), id);
	assert_string_equal(str(rep.json, "status"), "ended");
	assert_string_equal(str(rep.json, "end_reason"), "deleted");
	assert_string_equal(str(rep.json, "ended_at"), "2023-11-14T22:13:21.123Z");
	reply_free(&rep);
	/* once */
	expect_error(call(f, "DELETE", sbx(id, ""), NULL, NULL), 409, "sandbox_ended", NULL);
	expect_error(call(f, "DELETE", sbx(UNKNOWN_SBX, ""), NULL, NULL), 404, "not_found", NULL);

	/* the shim did not stop in time */
	create(f, id);
	program(f->fl, OP_REMOVE, -ETIMEDOUT, ETIMEDOUT, "its supervisor did not stop");
	rep = call(f, "DELETE", sbx(id, ""), NULL, NULL);
	assert_non_null(strstr(rep.r.log, "its supervisor did not stop"));
	expect_error(rep, 500, "internal", NULL);
	rep = call(f, "GET", sbx(id, ""), NULL, NULL);
	assert_string_equal(str(rep.json, "status"), "running");
	reply_free(&rep);
}

static void test_timeout(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);
	fake_now = NOW + 5000;
	struct reply rep = call(f, "POST", sbx(id, "/timeout"), NULL, "{\"timeout_s\":60}");
	expect_status(&rep, 200);
	assert_int_equal(count(f->fl, OP_SET_EXPIRY), 1);
	assert_string_equal(last(f->fl, OP_SET_EXPIRY)->id, id);
	assert_int_equal(last(f->fl, OP_SET_EXPIRY)->value, NOW + 5000 + 60000);
	assert_string_equal(str(rep.json, "expires_at"), "2023-11-14T22:14:25.123Z");
	assert_string_equal(str(rep.json, "created_at"), NOW_TEXT);
	reply_free(&rep);

	forget(f->fl);
	expect_error(call(f, "POST", sbx(id, "/timeout"), NULL, "{}"), 400, "missing_field",
		     "timeout_s");
	expect_error(call(f, "POST", sbx(id, "/timeout"), NULL, "{\"timeout_s\":0}"), 400,
		     "invalid_field", "timeout_s");
	expect_error(call(f, "POST", sbx(id, "/timeout"), NULL, "{\"timeout_s\":604801}"), 400,
		     "invalid_field", "timeout_s");
	expect_error(call(f, "POST", sbx(id, "/timeout"), NULL, "{\"timeout\":5}"), 400,
		     "unknown_field", "timeout");
	expect_error(call(f, "POST", sbx(id, "/timeout"), NULL, NULL), 415,
		     "unsupported_media_type", NULL);
	assert_int_equal(count(f->fl, OP_COUNT), 0);

	expect_error(call(f, "POST", sbx(UNKNOWN_SBX, "/timeout"), NULL, "{\"timeout_s\":5}"), 404,
		     "not_found", NULL);
	char ended[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_ENDED, ended);
	expect_error(call(f, "POST", sbx(ended, "/timeout"), NULL, "{\"timeout_s\":5}"), 409,
		     "sandbox_ended", NULL);
}

static void test_pause_resume(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);
	struct reply rep = call(f, "POST", sbx(id, "/pause"), NULL, NULL);
	expect_status(&rep, 200);
	assert_true(last(f->fl, OP_PAUSE)->flag);
	assert_string_equal(last(f->fl, OP_PAUSE)->id, id);
	assert_string_equal(str(rep.json, "status"), "paused");
	reply_free(&rep);
	rep = call(f, "POST", sbx(id, "/pause"), NULL, NULL); /* idempotent */
	expect_status(&rep, 200);
	assert_string_equal(str(rep.json, "status"), "paused");
	reply_free(&rep);

	/* exec and files need it running */
	forget(f->fl);
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}"), 409,
		     "sandbox_paused", NULL);
	assert_true(last(f->fl, OP_GET_LIVE)->flag);
	assert_int_equal(count(f->fl, OP_EXEC_START), 0);
	write_file(f, "/tmp/x", "x");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fx", NULL), 409,
		     "sandbox_paused", NULL);
	expect_error(call(f, "DELETE", sbx(id, "/files"), "path=%2Ftmp%2Fx", NULL), 409,
		     "sandbox_paused", NULL);
	struct api_request req = {
	    .method = "PUT", .path = sbx(id, "/files"), .query = "path=%2Ftmp%2Fx"};
	struct api_upload *u = api_upload_begin(&f->ctx, &req);
	assert_true(api_upload_write(u, "y", 1));
	struct api_response res;
	api_upload_end(u, f->ctx.store, &res);
	assert_int_equal(res.status, 409);
	api_response_release(&res);
	api_upload_free(u);
	assert_int_equal(count(f->fl, OP_OPEN), 0);
	assert_int_equal(count(f->fl, OP_UNLINK), 0);
	assert_true(exists(f, "/tmp/x"));
	/* its processes can still be looked at */
	rep = call(f, "GET", sbx(id, "/processes"), NULL, NULL);
	expect_status(&rep, 200);
	assert_false(last(f->fl, OP_GET_LIVE)->flag);
	reply_free(&rep);

	forget(f->fl);
	rep = call(f, "POST", sbx(id, "/resume"), NULL, NULL);
	expect_status(&rep, 200);
	assert_false(last(f->fl, OP_PAUSE)->flag);
	assert_string_equal(str(rep.json, "status"), "running");
	reply_free(&rep);
	rep = call(f, "POST", sbx(id, "/resume"), NULL, NULL);
	expect_status(&rep, 200);
	reply_free(&rep);
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}");
	expect_status(&rep, 200);
	reply_free(&rep);

	expect_error(call(f, "POST", sbx(UNKNOWN_SBX, "/pause"), NULL, NULL), 404, "not_found",
		     NULL);
	char ended[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_ENDED, ended);
	expect_error(call(f, "POST", sbx(ended, "/resume"), NULL, NULL), 409, "sandbox_ended",
		     NULL);
}

/* ---- exec and processes ---------------------------------------------------- */

/* The data of the event `name` in an SSE body, parsed. */
static json_t *sse_event(const char *body, const char *name)
{
	char head[64];
	snprintf(head, sizeof(head), "event: %s\ndata: ", name);
	const char *p = strstr(body, head);
	if (!p)
		return NULL;
	p += strlen(head);
	const char *end = strstr(p, "\n\n");
	assert_non_null(end);
	return json_loadb(p, (size_t)(end - p), 0, NULL);
}

static void test_exec_not_executable(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	program(f->fl, OP_EXEC_START, -EREMOTEIO, ENOENT, "python4: No such file or directory");
	struct reply rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"python4\"]}");
	expect_status(&rep, 200);
	json_t *x = rep.json;
	assert_int_equal(json_object_size(x), 9);
	assert_int_equal(num(x, "exit_code"), 127);
	assert_true(is_null(x, "pid"));
	assert_true(is_null(x, "signal"));
	assert_string_equal(str(x, "stdout"), "");
	assert_string_equal(str(x, "stderr"), "agentbox: python4: No such file or directory\n");
	assert_true(is_false(x, "oom_killed"));
	assert_true(is_false(x, "timed_out"));
	assert_true(is_false(x, "truncated"));
	assert_int_equal(num(x, "duration_ms"), 0);
	reply_free(&rep);

	/* found but not runnable: 126 */
	program(f->fl, OP_EXEC_START, -EREMOTEIO, EACCES, "/a: Permission denied");
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"/a\"]}");
	expect_status(&rep, 200);
	assert_int_equal(num(rep.json, "exit_code"), 126);
	assert_string_equal(str(rep.json, "stderr"), "agentbox: /a: Permission denied\n");
	reply_free(&rep);

	/* the same as the stream of one */
	program(f->fl, OP_EXEC_START, -EREMOTEIO, ENOENT, "python4: No such file or directory");
	rep = call_accept(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"python4\"]}",
			  "text/event-stream");
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_BODY);
	assert_string_equal(rep.r.content_type, "text/event-stream");
	assert_non_null(rep.r.body);
	assert_int_equal(strlen(rep.r.body), rep.r.body_len);
	json_t *err = sse_event(rep.r.body, "stderr");
	assert_non_null(err);
	assert_string_equal(str(err, "data"), "agentbox: python4: No such file or directory\n");
	json_decref(err);
	json_t *exit = sse_event(rep.r.body, "exit");
	assert_non_null(exit);
	assert_int_equal(num(exit, "exit_code"), 127);
	assert_null(json_object_get(exit, "stdout"));
	assert_null(json_object_get(exit, "stderr"));
	assert_true(is_false(exit, "truncated"));
	json_decref(exit);
	/* stderr comes before exit, and the body ends with the exit event */
	assert_true(strstr(rep.r.body, "event: stderr") < strstr(rep.r.body, "event: exit"));
	assert_int_equal(strcmp(rep.r.body + rep.r.body_len - 2, "\n\n"), 0);
	reply_free(&rep);

	/* an errno about the sandbox, not the command, is an error */
	program(f->fl, OP_EXEC_START, -EREMOTEIO, EAGAIN, "64 processes run already");
	expect_error(call_accept(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}",
				 "text/event-stream"),
		     429, "too_many_processes", NULL);
}

/* exec with "tty" and a valid handshake: the terminal's response, which owns the master. */
static void test_exec_terminal(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);
	const char *body = "{\"command\":[\"sh\"],\"tty\":true,\"rows\":33,\"cols\":101}";
	struct api_request req = {.method = "POST",
				  .path = sbx(id, "/exec"),
				  .body = body,
				  .body_len = strlen(body),
				  .content_type = "application/json",
				  .upgrade = "WebSocket",
				  .connection = "keep-alive, Upgrade",
				  .ws_key = "dGhlIHNhbXBsZSBub25jZQ==",
				  .ws_version = "13"};
	struct reply rep = call_req(f, &req);
	assert_int_equal(rep.r.status, 101);
	assert_int_equal(rep.r.kind, API_RESPONSE_TERMINAL);
	assert_string_equal(rep.r.terminal.key, "dGhlIHNhbXBsZSBub25jZQ==");
	assert_string_equal(rep.r.terminal.id, id);
	assert_int_equal(rep.r.terminal.pid, f->fl->next_pid);
	assert_true(rep.r.terminal.master >= 0);
	assert_int_equal(rep.r.fd, f->fl->handed_fd);
	assert_int_equal(f->fl->calls[1].op, OP_EXEC_START);
	assert_int_equal(f->fl->calls[1].value, 33 * 10000 + 101);
	int master = rep.r.terminal.master;
	reply_free(&rep); /* a response never served: the master closed, the waiter given back */
	assert_int_equal(fcntl(master, F_GETFD), -1);
	assert_int_equal(count(f->fl, OP_DONE), 1);

	/* a key that is not 16 bytes, a version that is not 13: nothing starts */
	forget(f->fl);
	req.ws_key = "c2hvcnQ=";
	expect_error(call_req(f, &req), 400, "bad_handshake", NULL);
	req.ws_key = "dGhlIHNhbXBsZSBub25jZQ==", req.ws_version = "8";
	expect_error(call_req(f, &req), 400, "bad_handshake", NULL);
	assert_int_equal(count(f->fl, OP_EXEC_START), 0);
}

static void test_exec(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);
	f->fl->exec_exit = json_pack("{s:i, s:n, s:i, s:b, s:b}", "exit_code", 0, "signal",
				     "duration_ms", 12, "oom_killed", 0, "timed_out", 0);
	f->fl->out = "1\n", f->fl->out_len = 2;
	f->fl->err = "w", f->fl->err_len = 1;
	struct reply rep = call(
	    f, "POST", sbx(id, "/exec"), NULL,
	    "{\"command\":[\"python3\",\"-c\",\"print(1)\"],\"stdin\":\"in\",\"env\":{\"K\":\"v\"},"
	    "\"cwd\":\"/srv\",\"timeout_s\":60}");
	expect_status(&rep, 200);
	/* what the fleet was asked, in order */
	assert_int_equal(f->fl->n, 6);
	assert_int_equal(f->fl->calls[0].op, OP_GET_LIVE);
	assert_true(f->fl->calls[0].flag);
	assert_int_equal(f->fl->calls[1].op, OP_EXEC_START);
	assert_int_equal(f->fl->calls[2].op, OP_EXEC_WAIT);
	assert_int_equal(f->fl->calls[3].op, OP_DONE); /* the waiter is given back before reading */
	assert_int_equal(f->fl->calls[3].fd, f->fl->handed_fd);
	assert_int_equal(f->fl->calls[4].op, OP_READ_OUTPUT);
	assert_int_equal(f->fl->calls[5].op, OP_READ_OUTPUT);
	struct fake_call *c = &f->fl->calls[1];
	assert_string_equal(c->id, id);
	assert_string_equal(c->spec, "[\"python3\",\"-c\",\"print(1)\"]");
	assert_string_equal(c->meta, "{\"K\":\"v\"}");
	assert_string_equal(c->cwd, "/srv");
	assert_string_equal(c->stdin_, "in");
	assert_int_equal(c->value, 60000);
	assert_int_equal(f->fl->calls[2].fd, f->fl->handed_fd);
	assert_string_equal(f->fl->calls[4].ext, "out");
	assert_string_equal(f->fl->calls[5].ext, "err");
	for (int i = 4; i <= 5; i++) {
		assert_int_equal(f->fl->calls[i].pid, 7);
		assert_int_equal(f->fl->calls[i].max, 1024 * 1024);
		assert_string_equal(f->fl->calls[i].id, id);
	}
	assert_true(peer_sees_close(f->fl->handed_peer)); /* the connection was closed */
	json_t *x = rep.json;
	assert_int_equal(json_object_size(x), 9);
	assert_int_equal(num(x, "pid"), 7);
	assert_int_equal(num(x, "exit_code"), 0);
	assert_true(is_null(x, "signal"));
	assert_string_equal(str(x, "stdout"), "1\n");
	assert_string_equal(str(x, "stderr"), "w");
	assert_true(is_false(x, "oom_killed"));
	assert_true(is_false(x, "timed_out"));
	assert_int_equal(num(x, "duration_ms"), 12);
	assert_true(is_false(x, "truncated"));
	reply_free(&rep);

	/* the defaults: the shim's cwd (none sent), no env, no stdin, no timeout */
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}");
	expect_status(&rep, 200);
	c = last(f->fl, OP_EXEC_START);
	assert_string_equal(c->cwd, "");
	assert_string_equal(c->meta, "");
	assert_string_equal(c->stdin_, "(none)");
	assert_int_equal(c->value, 0);
	reply_free(&rep);

	/* more output than the response carries; invalid UTF-8; a signal */
	json_decref(f->fl->exec_exit);
	f->fl->exec_exit = json_pack("{s:i, s:i, s:i, s:b}", "exit_code", 137, "signal", 9,
				     "duration_ms", 3, "oom_killed", 1);
	f->fl->out = "a\xff"
		     "b";
	f->fl->out_len = 3;
	f->fl->err_more = true;
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}");
	expect_status(&rep, 200);
	assert_int_equal(num(rep.json, "exit_code"), 137);
	assert_int_equal(num(rep.json, "signal"), 9);
	assert_true(is_true(rep.json, "oom_killed"));
	/* output that is not text is its bytes in base64, and says so */
	assert_string_equal(str(rep.json, "stdout"), "Yf9i");
	assert_string_equal(str(rep.json, "stdout_encoding"), "base64");
	assert_null(json_object_get(rep.json, "stderr_encoding"));
	assert_true(is_true(rep.json, "truncated"));
	reply_free(&rep);
	/* or the shim says it truncated */
	f->fl->err_more = false;
	json_object_set_new(f->fl->exec_exit, "truncated", json_true());
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}");
	expect_status(&rep, 200);
	assert_true(is_true(rep.json, "truncated"));
	reply_free(&rep);

	/* background: 202 with the pid at once, the connection closed */
	forget(f->fl);
	f->fl->next_pid = 12;
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"],\"background\":true}");
	expect_status(&rep, 202);
	assert_int_equal(json_object_size(rep.json), 1);
	assert_int_equal(num(rep.json, "pid"), 12);
	assert_int_equal(count(f->fl, OP_EXEC_WAIT), 0);
	assert_int_equal(count(f->fl, OP_READ_OUTPUT), 0);
	assert_true(peer_sees_close(f->fl->handed_peer));
	reply_free(&rep);

	/* Accept: text/event-stream: the server streams the connection */
	forget(f->fl);
	rep = call_accept(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}",
			  "text/html, text/event-stream");
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_PROCESS_STREAM);
	assert_string_equal(rep.r.content_type, "text/event-stream");
	assert_int_equal(rep.r.process.pid, 12);
	assert_string_equal(rep.r.process.id, id);
	assert_int_equal(count(f->fl, OP_EXEC_WAIT), 0);
	int peer = f->fl->handed_peer;
	int fd = api_response_take_fd(&rep.r);
	assert_int_equal(fd, f->fl->handed_fd);
	assert_int_equal(api_response_take_fd(&rep.r), -1);
	reply_free(&rep);
	assert_false(peer_sees_close(peer)); /* the fd is ours now */
	close(fd);
	assert_true(peer_sees_close(peer));

	/* exec_wait failing: the connection is closed all the same */
	program(f->fl, OP_EXEC_WAIT, -EREMOTEIO, ECONNRESET, "the shim went away");
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}"), 409,
		     "sandbox_ended", NULL);
	assert_true(peer_sees_close(f->fl->handed_peer));

	/* a bad body never reaches the fleet */
	forget(f->fl);
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{}"), 400, "missing_field",
		     "command");
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[]}"), 400,
		     "invalid_field", "command");
	expect_error(
	    call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"],\"cwd\":\"rel\"}"), 400,
	    "invalid_field", "cwd");
	expect_error(
	    call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"],\"background\":1}"), 400,
	    "invalid_field", "background");
	expect_error(
	    call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"],\"timeout_s\":86401}"),
	    400, "invalid_field", "timeout_s");
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"],\"pty\":true}"),
		     400, "unknown_field", "pty");
	/* a terminal is an upgrade: without the WebSocket handshake nothing starts */
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"],\"tty\":true}"),
		     400, "bad_handshake", "tty");
	assert_int_equal(count(f->fl, OP_COUNT), 0);

	expect_error(call(f, "POST", sbx(UNKNOWN_SBX, "/exec"), NULL, "{\"command\":[\"a\"]}"), 404,
		     "not_found", NULL);
	char ended[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_ENDED, ended);
	expect_error(call(f, "POST", sbx(ended, "/exec"), NULL, "{\"command\":[\"a\"]}"), 409,
		     "sandbox_ended", NULL);
	assert_int_equal(count(f->fl, OP_EXEC_START), 0);

	/* as many waiting as the fleet allows: 429, the command not started */
	program(f->fl, OP_EXEC_START, -EUSERS, EUSERS, "agentboxd waits on 128 commands already");
	rep = call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}");
	assert_non_null(strstr(str(json_object_get(rep.json, "error"), "message"), "128 commands"));
	expect_error(rep, 429, "too_many_requests", NULL);
}

static void test_processes(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	f->fl->procs = json_pack(
	    "[{s:i, s:[s,s], s:b, s:n, s:n, s:I, s:i, s:s}, {s:i, s:[s], s:b, s:i, s:n, s:I, s:I}]",
	    "pid", 7, "command", "sleep", "9", "running", 1, "exit_code", "signal", "started_at",
	    (json_int_t)NOW, "ended_at", 0, "cwd", "/workspace", "pid", 8, "command", "true",
	    "running", 0, "exit_code", 0, "signal", "started_at", (json_int_t)NOW, "ended_at",
	    (json_int_t)NOW + 1000);
	assert_non_null(f->fl->procs);
	forget(f->fl);
	struct reply rep = call(f, "GET", sbx(id, "/processes"), NULL, NULL);
	expect_status(&rep, 200);
	assert_string_equal(last(f->fl, OP_PROCESSES)->id, id);
	assert_int_equal(json_object_size(rep.json), 1);
	json_t *list = json_object_get(rep.json, "processes");
	assert_int_equal(json_array_size(list), 2);
	json_t *p = json_array_get(list, 0);
	assert_int_equal(json_object_size(p), 7); /* the shim's cwd is not shown */
	assert_int_equal(num(p, "pid"), 7);
	assert_int_equal(json_array_size(json_object_get(p, "command")), 2);
	assert_true(is_true(p, "running"));
	assert_true(is_null(p, "exit_code"));
	assert_true(is_null(p, "signal"));
	assert_string_equal(str(p, "started_at"), NOW_TEXT);
	assert_true(is_null(p, "ended_at"));
	p = json_array_get(list, 1);
	assert_int_equal(num(p, "pid"), 8);
	assert_true(is_false(p, "running"));
	assert_int_equal(num(p, "exit_code"), 0);
	assert_string_equal(str(p, "ended_at"), "2023-11-14T22:13:21.123Z");
	reply_free(&rep);

	char ended[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_ENDED, ended);
	expect_error(call(f, "GET", sbx(ended, "/processes"), NULL, NULL), 409, "sandbox_ended",
		     NULL);
	expect_error(call(f, "GET", sbx(UNKNOWN_SBX, "/processes"), NULL, NULL), 404, "not_found",
		     NULL);
}

static void test_process_output(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	f->fl->out = "o", f->fl->out_len = 1;
	f->fl->err = "e", f->fl->err_len = 1;

	/* still running */
	f->fl->exit_state = EXIT_RUNNING;
	forget(f->fl);
	struct reply rep = call(f, "GET", sbx(id, "/processes/42/output"), NULL, NULL);
	expect_status(&rep, 200);
	assert_int_equal(json_object_size(rep.json), 6);
	assert_int_equal(num(rep.json, "pid"), 42);
	assert_true(is_true(rep.json, "running"));
	assert_string_equal(str(rep.json, "stdout"), "o");
	assert_string_equal(str(rep.json, "stderr"), "e");
	assert_true(is_false(rep.json, "truncated"));
	assert_true(is_null(rep.json, "exit"));
	assert_int_equal(last(f->fl, OP_EXIT_RECORD)->pid, 42);
	assert_int_equal(count(f->fl, OP_READ_OUTPUT), 2);
	assert_int_equal(last(f->fl, OP_READ_OUTPUT)->pid, 42);
	assert_int_equal(count(f->fl, OP_WATCH), 0);
	reply_free(&rep);

	/* ended */
	f->fl->exit_state = EXIT_DONE;
	f->fl->exit_rec = json_pack("{s:i, s:n, s:i}", "exit_code", 1, "signal", "duration_ms", 5);
	f->fl->out_more = true;
	rep = call(f, "GET", sbx(id, "/processes/42/output"), "follow=0", NULL);
	expect_status(&rep, 200);
	assert_true(is_false(rep.json, "running"));
	assert_true(is_true(rep.json, "truncated"));
	json_t *exit = json_object_get(rep.json, "exit");
	assert_int_equal(json_object_size(exit), 7);
	assert_int_equal(num(exit, "pid"), 42);
	assert_int_equal(num(exit, "exit_code"), 1);
	assert_true(is_null(exit, "signal"));
	assert_int_equal(num(exit, "duration_ms"), 5);
	assert_true(is_true(exit, "truncated"));
	assert_null(json_object_get(exit, "stdout"));
	reply_free(&rep);

	/* no such process */
	f->fl->exit_state = EXIT_NONE;
	expect_error(call(f, "GET", sbx(id, "/processes/43/output"), NULL, NULL), 404,
		     "process_not_found", NULL);
	assert_int_equal(last(f->fl, OP_EXIT_RECORD)->pid, 43);
	expect_error(call(f, "GET", sbx(id, "/processes/43/output"), "follow=1", NULL), 404,
		     "process_not_found", NULL);
	expect_error(call(f, "GET", sbx(id, "/processes/42/output"), "follow=2", NULL), 400,
		     "invalid_field", "follow");
	char ended[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_ENDED, ended);
	expect_error(call(f, "GET", sbx(ended, "/processes/42/output"), NULL, NULL), 409,
		     "sandbox_ended", NULL);
}

static void test_kill(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	forget(f->fl);
	struct reply rep = call(f, "POST", sbx(id, "/processes/42/kill"), NULL, NULL);
	expect_status(&rep, 200);
	assert_int_equal(last(f->fl, OP_KILL)->pid, 42);
	assert_int_equal(last(f->fl, OP_KILL)->sig, 9);
	assert_string_equal(last(f->fl, OP_KILL)->id, id);
	assert_int_equal(json_object_size(rep.json), 2);
	assert_int_equal(num(rep.json, "pid"), 42);
	assert_int_equal(num(rep.json, "signal"), 9);
	reply_free(&rep);
	rep = call(f, "POST", sbx(id, "/processes/42/kill"), NULL, "{\"signal\":15}");
	expect_status(&rep, 200);
	assert_int_equal(last(f->fl, OP_KILL)->sig, 15);
	assert_int_equal(num(rep.json, "signal"), 15);
	reply_free(&rep);

	forget(f->fl);
	expect_error(call(f, "POST", sbx(id, "/processes/42/kill"), NULL, "{\"signal\":0}"), 400,
		     "invalid_field", "signal");
	expect_error(call(f, "POST", sbx(id, "/processes/42/kill"), NULL, "{\"signal\":65}"), 400,
		     "invalid_field", "signal");
	expect_error(call(f, "POST", sbx(id, "/processes/42/kill"), NULL, "{\"sig\":1}"), 400,
		     "unknown_field", "sig");
	assert_int_equal(count(f->fl, OP_KILL), 0);
}

/* The shim's errno through the routes, as docs/api.md maps them. */
static void test_shim_errors(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	write_file(f, "/tmp/x", "x");
	f->fl->exit_state = EXIT_RUNNING;
	static const struct {
		const char *method, *suffix, *query, *body;
		enum fake_op op;
		int errnum;
		int status;
		const char *code, *field;
	} cases[] = {
	    {"GET", "/files", "path=%2Ftmp%2Fx", NULL, OP_OPEN, EACCES, 403, "permission_denied",
	     "path"},
	    {"GET", "/files", "path=%2Fproc%2F1", NULL, OP_OPEN, EPERM, 403, "permission_denied",
	     "path"},
	    {"GET", "/files", "path=%2Ftmp%2Fx", NULL, OP_OPEN, ENOENT, 404, "file_not_found",
	     "path"},
	    {"GET", "/files", "path=%2Ftmp%2Fx", NULL, OP_OPEN, ELOOP, 404, "file_not_found",
	     "path"},
	    {"GET", "/files", "path=%2Ftmp%2Fx&list=1", NULL, OP_OPEN, ENOTDIR, 404,
	     "file_not_found", "path"},
	    {"GET", "/files", "path=%2Fdev%2Fnull", NULL, OP_OPEN, ENXIO, 400, "not_a_file",
	     "path"},
	    {"GET", "/files", "path=%2Ftmp%2Fx", NULL, OP_OPEN, ENAMETOOLONG, 400, "invalid_field",
	     "path"},
	    {"GET", "/files", "path=%2Ftmp%2Fx", NULL, OP_OPEN, EIO, 500, "internal", NULL},
	    {"DELETE", "/files", "path=%2Ftmp", NULL, OP_UNLINK, EISDIR, 400, "not_a_file", "path"},
	    {"DELETE", "/files", "path=%2Ftmp%2Fx", NULL, OP_UNLINK, EROFS, 403,
	     "permission_denied", "path"},
	    {"POST", "/processes/42/kill", NULL, "{}", OP_KILL, ESRCH, 409, "process_ended", NULL},
	    {"POST", "/processes/42/kill", NULL, "{}", OP_KILL, ENOENT, 404, "process_not_found",
	     NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}", OP_EXEC_START, EAGAIN, 429,
	     "too_many_processes", NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}", OP_EXEC_START, ECONNREFUSED, 409,
	     "sandbox_ended", NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}", OP_EXEC_START, ENOSPC, 507, "no_space",
	     NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}", OP_EXEC_START, EBUSY, 409,
	     "sandbox_paused", NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}", OP_EXEC_START, E2BIG, 400,
	     "invalid_field", NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}", OP_EXEC_WAIT, ECANCELED, 409,
	     "sandbox_ended", NULL},
	    {"GET", "/processes", NULL, NULL, OP_PROCESSES, ECONNRESET, 409, "sandbox_ended", NULL},
	    {"GET", "/processes/42/output", "follow=1", NULL, OP_WATCH, ENOENT, 404,
	     "process_not_found", NULL},
	    {"POST", "/pause", NULL, NULL, OP_PAUSE, EPIPE, 409, "sandbox_ended", NULL},
	    {"POST", "/timeout", NULL, "{\"timeout_s\":5}", OP_SET_EXPIRY, EDQUOT, 507, "no_space",
	     NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		program(f->fl, cases[i].op, -EREMOTEIO, cases[i].errnum, "the shim says no");
		struct reply rep = call(f, cases[i].method, sbx(id, cases[i].suffix),
					cases[i].query, cases[i].body);
		if (rep.r.status != cases[i].status)
			fail_msg("case %zu (%s %s, %s): %d %s", i, cases[i].method, cases[i].suffix,
				 strerror(cases[i].errnum), rep.r.status, rep.r.body);
		if (cases[i].status == 500)
			assert_non_null(strstr(rep.r.log, "shim: the shim says no"));
		expect_error(rep, cases[i].status, cases[i].code, cases[i].field);
		if (f->fl->next[cases[i].op].set)
			fail_msg("case %zu: the fleet's op %d was not called", i, cases[i].op);
	}

	/* the fleet's own codes, wherever it answers them */
	program(f->fl, OP_GET_LIVE, -ENOENT, ENOENT, "no sandbox");
	expect_error(call(f, "GET", sbx(id, "/processes"), NULL, NULL), 404, "not_found", NULL);
	program(f->fl, OP_GET_LIVE, -ESTALE, ESTALE, "the sandbox has ended");
	expect_error(call(f, "POST", sbx(id, "/exec"), NULL, "{\"command\":[\"a\"]}"), 409,
		     "sandbox_ended", NULL);
	program(f->fl, OP_GET_LIVE, -EBUSY, EBUSY, "the sandbox is paused");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fx", NULL), 409,
		     "sandbox_paused", NULL);
	program(f->fl, OP_KILL, -EIO, EIO, "the state directory broke");
	struct reply rep = call(f, "POST", sbx(id, "/processes/42/kill"), NULL, NULL);
	assert_non_null(strstr(rep.r.log, "the state directory broke"));
	expect_error(rep, 500, "internal", NULL);
}

/* ---- files ---------------------------------------------------------------- */

static void test_files_get(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	write_file(f, "/tmp/hello", "hello world");
	forget(f->fl);
	struct reply rep = call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fhello", NULL);
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_FILE);
	assert_string_equal(rep.r.content_type, "application/octet-stream");
	assert_int_equal(rep.r.size, 11);
	assert_null(rep.r.body);
	assert_string_equal(last(f->fl, OP_OPEN)->path, "/tmp/hello");
	assert_string_equal(last(f->fl, OP_OPEN)->mode, "read");
	assert_true(last(f->fl, OP_GET_LIVE)->flag);
	int fd = api_response_take_fd(&rep.r);
	assert_true(fd >= 0);
	reply_free(&rep);
	char buf[32] = "";
	assert_int_equal(pread(fd, buf, sizeof(buf) - 1, 0), 11);
	assert_string_equal(buf, "hello world");
	close(fd);

	/* a directory listing, sorted by name */
	char host[400];
	snprintf(host, sizeof(host), "%s/tmp/d", f->fl->root);
	assert_int_equal(mkdir(host, 0755), 0);
	write_file(f, "/tmp/d/b.txt", "abc");
	write_file(f, "/tmp/d/a.py", "print(1)\n");
	write_file(f, "/tmp/d/Z", "");
	snprintf(host, sizeof(host), "%s/tmp/d/a.py", f->fl->root);
	assert_int_equal(chmod(host, 0644), 0);
	snprintf(host, sizeof(host), "%s/tmp/d/c", f->fl->root);
	assert_int_equal(mkdir(host, 0700), 0);
	assert_int_equal(chmod(host, 0700), 0);
	snprintf(host, sizeof(host), "%s/tmp/d/link", f->fl->root);
	assert_int_equal(symlink("a.py", host), 0);
	rep = call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fd&list=true", NULL);
	expect_status(&rep, 200);
	assert_string_equal(last(f->fl, OP_OPEN)->mode, "dir");
	assert_int_equal(json_object_size(rep.json), 2);
	assert_string_equal(str(rep.json, "path"), "/tmp/d");
	json_t *entries = json_object_get(rep.json, "entries");
	static const char *const names[] = {"Z", "a.py", "b.txt", "c", "link"};
	static const char *const types[] = {"file", "file", "file", "dir", "symlink"};
	assert_int_equal(json_array_size(entries), 5);
	for (size_t i = 0; i < 5; i++) {
		json_t *e = json_array_get(entries, i);
		assert_int_equal(json_object_size(e), 5);
		assert_string_equal(str(e, "name"), names[i]);
		assert_string_equal(str(e, "type"), types[i]);
		assert_true(json_is_string(json_object_get(e, "mtime")));
	}
	assert_int_equal(num(json_array_get(entries, 1), "size"), 9);
	assert_string_equal(str(json_array_get(entries, 1), "mode"), "0644");
	assert_int_equal(num(json_array_get(entries, 2), "size"), 3);
	assert_string_equal(str(json_array_get(entries, 3), "mode"), "0700");
	reply_free(&rep);

	/* a directory is not a file (its fd is closed: teardown counts them) */
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fd", NULL), 400, "not_a_file",
		     "path");
	/* listing a file is the sandbox's ENOTDIR */
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fhello&list=1", NULL), 404,
		     "file_not_found", "path");
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fnope", NULL), 404,
		     "file_not_found", "path");
	/* too large to send */
	snprintf(host, sizeof(host), "%s/tmp/big", f->fl->root);
	int big = open(host, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(big >= 0);
	assert_int_equal(ftruncate(big, (off_t)API_FILE_MAX + 1), 0);
	close(big);
	expect_error(call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fbig", NULL), 413,
		     "file_too_large", "path");
	assert_int_equal(truncate(host, API_FILE_MAX), 0);
	rep = call(f, "GET", sbx(id, "/files"), "path=%2Ftmp%2Fbig", NULL);
	assert_int_equal(rep.r.kind, API_RESPONSE_FILE);
	assert_int_equal(rep.r.size, API_FILE_MAX);
	reply_free(&rep); /* closes its fd */
}

static void test_files_delete(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	write_file(f, "/tmp/gone", "x");
	forget(f->fl);
	struct reply rep = call(f, "DELETE", sbx(id, "/files"), "path=%2Ftmp%2Fgone", NULL);
	expect_status(&rep, 200);
	assert_int_equal(count(f->fl, OP_UNLINK), 1);
	assert_string_equal(last(f->fl, OP_UNLINK)->path, "/tmp/gone");
	assert_string_equal(last(f->fl, OP_UNLINK)->id, id);
	assert_true(last(f->fl, OP_GET_LIVE)->flag);
	assert_int_equal(json_object_size(rep.json), 2);
	assert_string_equal(str(rep.json, "path"), "/tmp/gone");
	assert_true(is_true(rep.json, "deleted"));
	reply_free(&rep);
	assert_false(exists(f, "/tmp/gone"));
	expect_error(call(f, "DELETE", sbx(id, "/files"), "path=%2Ftmp%2Fgone", NULL), 404,
		     "file_not_found", "path");
	/* not a directory */
	expect_error(call(f, "DELETE", sbx(id, "/files"), "path=%2Ftmp", NULL), 400, "not_a_file",
		     "path");
	assert_true(exists(f, "/tmp"));
	expect_error(call(f, "DELETE", sbx(id, "/files"), NULL, NULL), 400, "missing_field",
		     "path");
	expect_error(call(f, "DELETE", sbx(UNKNOWN_SBX, "/files"), "path=%2Ftmp%2Fa", NULL), 404,
		     "not_found", NULL);
}

/* PUT .../files as the server runs it. */
static struct api_upload *upload_begin(struct fx *f, const char *id, const char *query)
{
	struct api_request req = {.method = "PUT",
				  .path = sbx(id, "/files"),
				  .query = query,
				  .content_type = "application/octet-stream"};
	assert_true(api_request_takes_raw_body(&req));
	struct api_upload *u = api_upload_begin(&f->ctx, &req);
	assert_non_null(u);
	return u;
}

/* End and free u: its answer. */
static struct reply upload_end_in(struct fx *f, struct api_upload *u)
{
	struct reply rep = {0};
	api_upload_end(u, f->ctx.store, &rep.r);
	api_upload_free(u);
	assert_string_equal(rep.r.content_type, "application/json");
	rep.json = json_loadb(rep.r.body, rep.r.body_len, 0, NULL);
	assert_non_null(rep.json);
	if (rep.r.status == 500)
		assert_true(rep.r.log[0] != '\0');
	return rep;
}

static void test_upload(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	write_file(f, "/tmp/up.txt", "old");
	forget(f->fl);
	struct api_upload *u = upload_begin(f, id, "path=%2Ftmp%2Fup.txt");
	struct fake_call *open_call = last(f->fl, OP_OPEN);
	assert_string_equal(open_call->path, "/tmp/up.txt");
	assert_string_equal(open_call->mode, "write");
	assert_true(last(f->fl, OP_GET_LIVE)->flag);
	char temp[1100];
	snprintf(temp, sizeof(temp), "%s", open_call->to);
	assert_int_equal(strncmp(temp, "/tmp/.agentbox-", 15), 0);
	assert_true(api_upload_write(u, "hel", 3));
	assert_true(api_upload_write(u, "lo ", 3));
	assert_true(api_upload_write(u, "", 0));
	assert_true(api_upload_write(u, "world", 5));
	/* nothing is in place before the end */
	char *text = read_file(f, "/tmp/up.txt");
	assert_string_equal(text, "old");
	free(text);
	struct reply rep = upload_end_in(f, u);
	expect_status(&rep, 201);
	assert_int_equal(json_object_size(rep.json), 2);
	assert_string_equal(str(rep.json, "path"), "/tmp/up.txt");
	assert_int_equal(num(rep.json, "size"), 11);
	reply_free(&rep);
	assert_int_equal(count(f->fl, OP_RENAME), 1);
	assert_string_equal(last(f->fl, OP_RENAME)->path, temp);
	assert_string_equal(last(f->fl, OP_RENAME)->to, "/tmp/up.txt");
	assert_string_equal(last(f->fl, OP_RENAME)->id, id);
	assert_int_equal(count(f->fl, OP_UNLINK), 0);
	text = read_file(f, "/tmp/up.txt");
	assert_string_equal(text, "hello world");
	free(text);
	assert_false(exists(f, temp));

	/* an empty file */
	u = upload_begin(f, id, "path=%2Ftmp%2Fempty");
	rep = upload_end_in(f, u);
	expect_status(&rep, 201);
	assert_int_equal(num(rep.json, "size"), 0);
	reply_free(&rep);
	assert_true(exists(f, "/tmp/empty"));
}

static void test_upload_refused(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	create(f, id);
	char *big = calloc(1, API_FILE_MAX); /* never touched: only its length counts */
	assert_non_null(big);

	/* past API_FILE_MAX: 413, and the temporary file is gone */
	forget(f->fl);
	struct api_upload *u = upload_begin(f, id, "path=%2Ftmp%2Fbig");
	char temp[1100];
	snprintf(temp, sizeof(temp), "%s", last(f->fl, OP_OPEN)->to);
	assert_true(exists(f, temp));
	assert_true(api_upload_write(u, "abc", 3));
	assert_true(api_upload_write(u, big, API_FILE_MAX));
	assert_true(api_upload_write(u, "x", 1)); /* the rest is read and dropped */
	struct reply rep = upload_end_in(f, u);
	expect_error(rep, 413, "file_too_large", NULL);
	assert_int_equal(count(f->fl, OP_RENAME), 0);
	assert_int_equal(count(f->fl, OP_UNLINK), 1);
	assert_string_equal(last(f->fl, OP_UNLINK)->path, temp);
	assert_false(exists(f, temp));
	assert_false(exists(f, "/tmp/big"));

	/* a full disk: 507, nothing left */
	forget(f->fl);
	f->fl->write_full = true;
	u = upload_begin(f, id, "path=%2Ftmp%2Ffull");
	snprintf(temp, sizeof(temp), "%s", last(f->fl, OP_OPEN)->to);
	assert_true(api_upload_write(u, "abc", 3));
	assert_true(api_upload_write(u, "def", 3));
	expect_error(upload_end_in(f, u), 507, "no_space", NULL);
	assert_string_equal(last(f->fl, OP_UNLINK)->path, temp);
	assert_int_equal(count(f->fl, OP_RENAME), 0);
	assert_false(exists(f, temp));
	f->fl->write_full = false;

	/* the rename refused */
	forget(f->fl);
	u = upload_begin(f, id, "path=%2Ftmp%2Fro");
	snprintf(temp, sizeof(temp), "%s", last(f->fl, OP_OPEN)->to);
	assert_true(api_upload_write(u, "abc", 3));
	program(f->fl, OP_RENAME, -EREMOTEIO, EACCES, "/tmp/ro: Permission denied");
	expect_error(upload_end_in(f, u), 403, "permission_denied", "path");
	assert_string_equal(last(f->fl, OP_UNLINK)->path, temp);
	assert_false(exists(f, temp));

	/* freed before its end (the connection dropped): the temporary file goes */
	forget(f->fl);
	u = upload_begin(f, id, "path=%2Ftmp%2Fdropped");
	snprintf(temp, sizeof(temp), "%s", last(f->fl, OP_OPEN)->to);
	assert_true(api_upload_write(u, "abc", 3));
	api_upload_free(u);
	assert_int_equal(count(f->fl, OP_UNLINK), 1);
	assert_string_equal(last(f->fl, OP_UNLINK)->path, temp);
	assert_false(exists(f, temp));
	assert_false(exists(f, "/tmp/dropped"));

	/* an unknown sandbox: the body is read and dropped, then 404 */
	forget(f->fl);
	u = upload_begin(f, UNKNOWN_SBX, "path=%2Ftmp%2Fa");
	assert_true(api_upload_write(u, "abc", 3));
	assert_true(api_upload_write(u, big, API_FILE_MAX));
	expect_error(upload_end_in(f, u), 404, "not_found", NULL);
	assert_int_equal(count(f->fl, OP_OPEN), 0);
	/* ... but not without end: past twice API_FILE_MAX, drop the connection */
	u = upload_begin(f, UNKNOWN_SBX, "path=%2Ftmp%2Fa");
	assert_true(api_upload_write(u, big, API_FILE_MAX));
	assert_true(api_upload_write(u, big, API_FILE_MAX));
	assert_false(api_upload_write(u, "x", 1));
	expect_error(upload_end_in(f, u), 404, "not_found", NULL);

	/* the checks of the route, before the body */
	u = upload_begin(f, id, NULL);
	assert_true(api_upload_write(u, "abc", 3));
	expect_error(upload_end_in(f, u), 400, "missing_field", "path");
	u = upload_begin(f, id, "path=rel");
	expect_error(upload_end_in(f, u), 400, "invalid_field", "path");
	u = upload_begin(f, id, "path=%2Fa&list=1");
	expect_error(upload_end_in(f, u), 400, "unknown_field", "list");
	u = upload_begin(f, "sbx_x", "path=%2Fa");
	expect_error(upload_end_in(f, u), 400, "invalid_id", NULL);
	char ended[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_ENDED, ended);
	u = upload_begin(f, ended, "path=%2Fa");
	expect_error(upload_end_in(f, u), 409, "sandbox_ended", NULL);
	program(f->fl, OP_OPEN, -EREMOTEIO, EROFS, "/a: Read-only file system");
	u = upload_begin(f, id, "path=%2Fa");
	assert_true(api_upload_write(u, "abc", 3));
	expect_error(upload_end_in(f, u), 403, "permission_denied", "path");
	assert_int_equal(count(f->fl, OP_OPEN), 1);
	assert_int_equal(count(f->fl, OP_UNLINK), 0);
	assert_int_equal(count(f->fl, OP_RENAME), 0);
	api_upload_free(NULL);
	free(big);
}

/* ---- without a fleet --------------------------------------------------------- */

static void test_no_fleet(void **state)
{
	struct fx *f = *state;
	char id[SANDBOX_ID_SIZE];
	insert(f, SANDBOX_RUNNING, id);
	f->ctx.fleet_ops = NULL;
	f->ctx.fleet = NULL;

	/* the store alone answers these */
	struct reply rep = call(f, "GET", "/v1/sandboxes", NULL, NULL);
	expect_status(&rep, 200);
	char ids[128];
	list_ids(&rep, ids, sizeof(ids));
	assert_string_equal(ids, id);
	reply_free(&rep);
	rep = call(f, "GET", sbx(id, ""), NULL, NULL);
	expect_status(&rep, 200);
	reply_free(&rep);

	static const struct {
		const char *method, *suffix, *query, *body;
	} cases[] = {
	    {"DELETE", "", NULL, NULL},
	    {"POST", "/timeout", NULL, "{\"timeout_s\":5}"},
	    {"POST", "/pause", NULL, NULL},
	    {"POST", "/resume", NULL, NULL},
	    {"POST", "/exec", NULL, "{\"command\":[\"a\"]}"},
	    {"GET", "/processes", NULL, NULL},
	    {"GET", "/processes/42/output", NULL, NULL},
	    {"GET", "/processes/42/output", "follow=1", NULL},
	    {"POST", "/processes/42/kill", NULL, NULL},
	    {"GET", "/files", "path=%2Fa", NULL},
	    {"DELETE", "/files", "path=%2Fa", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		rep = call(f, cases[i].method, sbx(id, cases[i].suffix), cases[i].query,
			   cases[i].body);
		if (!strstr(rep.r.log, "serves no sandboxes"))
			fail_msg("%s %s: log %s", cases[i].method, cases[i].suffix, rep.r.log);
		expect_error(rep, 500, "internal", NULL);
	}
	rep = call(f, "POST", "/v1/sandboxes", NULL, "{}");
	assert_non_null(strstr(rep.r.log, "serves no sandboxes"));
	expect_error(rep, 500, "internal", NULL);
	struct api_upload *u = upload_begin(f, id, "path=%2Fa");
	assert_true(api_upload_write(u, "abc", 3));
	rep = upload_end_in(f, u);
	assert_non_null(strstr(rep.r.log, "serves no sandboxes"));
	expect_error(rep, 500, "internal", NULL);
	/* the request's own errors come first */
	expect_error(call(f, "POST", "/v1/sandboxes", NULL, "{\"x\":1}"), 400, "unknown_field",
		     "x");
	assert_int_equal(count(f->fl, OP_COUNT), 0);
}

/* ---- task streams through api_handle() -------------------------------------- */

static void test_task_streams(void **state)
{
	struct fx *f = *state;
	struct reply rep = call(f, "POST", "/v1/tasks", NULL, "{\"command\":[\"a\"]}");
	expect_status(&rep, 201);
	char id[TASK_ID_SIZE];
	snprintf(id, sizeof(id), "%s", str(rep.json, "id"));
	reply_free(&rep);
	char path[128];
	snprintf(path, sizeof(path), "/v1/tasks/%s/logs", id);
	rep = call(f, "GET", path, "follow=1", NULL);
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_TASK_STREAM);
	assert_string_equal(rep.r.content_type, "text/plain; charset=utf-8");
	assert_int_equal(rep.r.task.route, API_ROUTE_TASK_LOGS);
	assert_string_equal(rep.r.task.id, id);
	assert_null(rep.r.body);
	assert_int_equal(api_response_take_fd(&rep.r), -1);
	reply_free(&rep);
	rep = call(f, "GET", path, "follow=0", NULL);
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_PIECES); /* read as it is sent */
	assert_int_equal(rep.r.pieces->total, 0);	   /* no attempt has run */
	reply_free(&rep);
	expect_error(call(f, "GET", path, "follow=2", NULL), 400, "invalid_field", "follow");

	snprintf(path, sizeof(path), "/v1/tasks/%s/events", id);
	rep = call_accept(f, "GET", path, "after=3", NULL, "text/event-stream");
	assert_int_equal(rep.r.status, 200);
	assert_int_equal(rep.r.kind, API_RESPONSE_TASK_STREAM);
	assert_string_equal(rep.r.content_type, "text/event-stream");
	assert_int_equal(rep.r.task.route, API_ROUTE_TASK_EVENTS);
	assert_int_equal(rep.r.task.after_seq, 3);
	reply_free(&rep);

	snprintf(path, sizeof(path), "/v1/tasks/tsk_8e3x0k0c3y7qk4f4h5vbb2s1mw/logs");
	expect_error(call(f, "GET", path, "follow=1", NULL), 404, "not_found", NULL);
	assert_int_equal(count(f->fl, OP_COUNT), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_route_walk, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_route_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_network, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exec_not_executable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exec, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exec_terminal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_processes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_process_output, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kill, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shim_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_files_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_files_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_upload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_upload_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_fleet, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_task_streams, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
