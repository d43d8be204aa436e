/*
 * fleet-proc.c - commands and files in a sandbox, through its shim
 * (fleet.h): exec and the processes it started, their output files and
 * exit records, and the files the sandbox opens for us. Also the table
 * of operations the API is handed (fleet_shim_ops).
 */
#include "fleet/fleet-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "core/layout.h"
#include "core/limits.h"
#include "shim/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The whole environment of an exec in sandbox id: the defaults (PATH,
 * HOME, LANG), the sandbox's env.json, then extra (an object, or NULL).
 * A JSON array of "K=V" (caller decrefs), or NULL.
 */
static json_t *exec_env(struct fleet *f, const char *id, json_t *extra)
{
	char path[4400];
	_cleanup_json_ json_t *base =
	    layout_sandbox_file(path, sizeof(path), f->cfg.state_dir, id, LAYOUT_ENV_JSON) == 0
		? json_load_file(path, 0, NULL)
		: NULL;
	_cleanup_json_ json_t *merged =
	    json_pack("{s:s, s:s, s:s}", "PATH", SPEC_DEFAULT_PATH, "HOME", SPEC_DEFAULT_WORKDIR,
		      "LANG", SPEC_DEFAULT_LANG);
	_cleanup_json_ json_t *out = json_array();
	if (!merged || !out || (base && json_object_update(merged, base) < 0) ||
	    (extra && json_object_update(merged, extra) < 0))
		return NULL;
	const char *k;
	json_t *v;
	json_object_foreach(merged, k, v)
	{
		const char *val = json_string_value(v);
		size_t n = strlen(k) + (val ? strlen(val) : 0) + 2;
		_cleanup_free_ char *kv = malloc(n);
		if (!kv)
			return NULL;
		snprintf(kv, n, "%s=%s", k, val ? val : "");
		if (json_array_append_new(out, json_string(kv)) < 0)
			return NULL;
	}
	return TAKE_PTR(out);
}

/* A memfd holding data, at offset 0. */
static int stdin_memfd(const char *data, size_t len)
{
	int fd = memfd_create("agentbox-stdin", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, data, len);
	if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
		r = -errno;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* ---- waiters ------------------------------------------------------------- */

/* Take a waiter of sandbox id, if the limits allow. 0 or -EUSERS with err. */
static int waiter_take(struct fleet *f, const char *id, struct error *err)
{
	int r = 0;
	pthread_mutex_lock(&f->lock);
	struct waiters *w = NULL;
	for (size_t i = 0; i < f->nw && !w; i++)
		if (strcmp(f->w[i].id, id) == 0)
			w = &f->w[i];
	if (f->waiters >= FLEET_WAITERS_MAX) {
		r = error_set(err, EUSERS,
			      "agentboxd waits on %d commands already: try again later",
			      FLEET_WAITERS_MAX);
	} else if (w && w->n >= FLEET_WAITERS_PER_SANDBOX_MAX) {
		r = error_set(err, EUSERS,
			      "%d connections wait on commands of this sandbox already: try "
			      "again later",
			      FLEET_WAITERS_PER_SANDBOX_MAX);
	} else if (!w && f->nw == f->capw) {
		size_t cap = f->capw ? f->capw * 2 : 16;
		struct waiters *grown = realloc(f->w, cap * sizeof(*grown));
		if (!grown)
			r = error_set(err, ENOMEM, "out of memory");
		else
			f->w = grown, f->capw = cap;
	}
	if (r == 0) {
		if (!w) {
			w = &f->w[f->nw++];
			*w = (struct waiters){.n = 0};
			snprintf(w->id, sizeof(w->id), "%s", id);
		}
		w->n++;
		f->waiters++;
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

static void waiter_give(struct fleet *f, const char *id)
{
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->nw; i++) {
		struct waiters *w = &f->w[i];
		if (strcmp(w->id, id) != 0)
			continue;
		if (--w->n == 0)
			*w = f->w[--f->nw];
		f->waiters--;
		break;
	}
	pthread_mutex_unlock(&f->lock);
}

void fleet_done(struct fleet *f, const char *id, int fd)
{
	if (fd < 0)
		return;
	close(fd);
	waiter_give(f, id);
}

/* ---- commands ------------------------------------------------------------ */

/* As fleet_exec_start() (ret_master NULL) or fleet_exec_tty(), with the waiter taken. */
static int exec_start(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
		      long *ret_pid, int *ret_master, struct error *err)
{
	char dir[4200];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	json_t *env = exec_env(f, id, x->env);
	_cleanup_json_ json_t *msg =
	    env ? json_pack("{s:s, s:O, s:o, s:s*, s:I}", "op", "exec", "command", x->command,
			    "env", env, "cwd", x->cwd && *x->cwd ? x->cwd : NULL, "timeout_ms",
			    (json_int_t)x->timeout_ms)
		: NULL;
	if (msg && ret_master &&
	    json_object_set_new(
		msg, "tty", json_pack("{s:i, s:i}", "rows", (int)x->rows, "cols", (int)x->cols)) <
		0)
		json_decref(TAKE_PTR(msg));
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int in = -1;
	if (x->stdin_data && (in = stdin_memfd(x->stdin_data, x->stdin_len)) < 0)
		return error_set_errno(err, -in, "memfd for stdin");
	_cleanup_close_ int fd = -1;
	int r = shim_connect(dir, &fd, err);
	if (r == 0)
		r = shim_send(fd, text, in, err);
	_cleanup_json_ json_t *reply = NULL;
	_cleanup_close_ int master = -1;
	if (r == 0)
		r = shim_recv(fd, FLEET_CALL_TIMEOUT_MS, &reply, ret_master ? &master : NULL, err);
	if (r < 0)
		return fleet_shim_refused(r, err);
	json_t *pid = json_object_get(reply, "pid");
	if (!json_is_integer(pid))
		return error_set(err, EPROTO, "shim: exec reply without a pid");
	if (ret_master && master < 0)
		return error_set(err, EPROTO, "shim: exec reply without the terminal");
	*ret_pid = (long)json_integer_value(pid);
	*ret_fd = TAKE_FD(fd);
	if (ret_master)
		*ret_master = TAKE_FD(master);
	return 0;
}

int fleet_exec_start(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
		     long *ret_pid, struct error *err)
{
	int r = waiter_take(f, id, err);
	if (r == 0 && (r = exec_start(f, id, x, ret_fd, ret_pid, NULL, err)) < 0)
		waiter_give(f, id);
	return r;
}

int fleet_exec_tty(struct fleet *f, const char *id, const struct fleet_exec *x, int *ret_fd,
		   long *ret_pid, int *ret_master, struct error *err)
{
	int r = waiter_take(f, id, err);
	if (r == 0 && (r = exec_start(f, id, x, ret_fd, ret_pid, ret_master, err)) < 0)
		waiter_give(f, id);
	return r;
}

int fleet_next_notice(int fd, int timeout_ms, json_t **ret, struct error *err)
{
	return shim_recv(fd, timeout_ms, ret, NULL, err);
}

int fleet_exec_wait(struct fleet *f, int fd, json_t **ret_exit, struct error *err)
{
	(void)f;
	/* output notices are not needed: the files hold it all */
	for (;;) {
		json_t *m = NULL;
		int r = shim_recv(fd, -1, &m, NULL, err);
		if (r < 0)
			return fleet_shim_refused(r, err);
		if (strcmp(json_string_value(json_object_get(m, "type")) ?: "", "exit") == 0) {
			*ret_exit = m;
			return 0;
		}
		json_decref(m);
	}
}

static int watch(struct fleet *f, const char *id, long pid, int *ret_fd, struct error *err)
{
	char dir[4200];
	if (fleet_dir(f, id, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	_cleanup_json_ json_t *msg = json_pack("{s:s, s:I}", "op", "watch", "pid", (json_int_t)pid);
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int fd = -1;
	int r = shim_connect(dir, &fd, err);
	if (r == 0)
		r = shim_send(fd, text, -1, err);
	if (r < 0)
		return fleet_shim_refused(r, err);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int fleet_watch(struct fleet *f, const char *id, long pid, int *ret_fd, struct error *err)
{
	int r = waiter_take(f, id, err);
	if (r == 0 && (r = watch(f, id, pid, ret_fd, err)) < 0)
		waiter_give(f, id);
	return r;
}

/* One request to the shim of id whose reply is dropped. */
static int call_simple(struct fleet *f, const char *id, json_t *request, struct error *err)
{
	_cleanup_json_ json_t *msg = request, *reply = NULL;
	if (!msg)
		return error_set(err, ENOMEM, "out of memory");
	return fleet_call(f, id, msg, -1, &reply, NULL, err);
}

int fleet_processes(struct fleet *f, const char *id, json_t **ret, struct error *err)
{
	_cleanup_json_ json_t *msg = json_pack("{s:s}", "op", "processes"), *reply = NULL;
	if (!msg)
		return error_set(err, ENOMEM, "out of memory");
	int r = fleet_call(f, id, msg, -1, &reply, NULL, err);
	if (r < 0)
		return r;
	json_t *list = json_object_get(reply, "processes");
	*ret = json_incref(json_is_array(list) ? list : NULL) ?: json_array();
	return *ret ? 0 : error_set(err, ENOMEM, "out of memory");
}

int fleet_network(struct fleet *f, const char *id, json_t **ret, struct error *err)
{
	_cleanup_json_ json_t *msg = json_pack("{s:s}", "op", "status"), *reply = NULL;
	if (!msg)
		return error_set(err, ENOMEM, "out of memory");
	int r = fleet_call(f, id, msg, -1, &reply, NULL, err);
	if (r < 0)
		return r;
	json_t *net = json_object_get(reply, "network");
	*ret = json_incref(json_is_object(net) ? net : NULL) ?: json_null();
	return 0;
}

int fleet_kill(struct fleet *f, const char *id, long pid, int sig, struct error *err)
{
	return call_simple(
	    f, id,
	    json_pack("{s:s, s:I, s:i}", "op", "kill", "pid", (json_int_t)pid, "signal", sig), err);
}

int fleet_read_output(struct fleet *f, const char *id, long pid, const char *ext, size_t max,
		      char **ret, size_t *ret_len, bool *ret_more)
{
	char path[4400];
	if (layout_proc_file(path, sizeof(path), f->cfg.state_dir, id, pid, ext) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	size_t len = 0;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		len = (size_t)st.st_size < max ? (size_t)st.st_size : max;
		if ((size_t)st.st_size > max)
			*ret_more = true;
	}
	char *buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	ssize_t got = len ? pread(fd, buf, len, 0) : 0;
	if (got < 0) {
		free(buf);
		return -EIO;
	}
	buf[got] = '\0';
	*ret = buf;
	*ret_len = (size_t)got;
	return 0;
}

int fleet_exit_record(struct fleet *f, const char *id, long pid, json_t **ret_exit)
{
	char path[4400];
	if (layout_proc_file(path, sizeof(path), f->cfg.state_dir, id, pid, LAYOUT_PROC_EXIT) < 0)
		return -ENAMETOOLONG;
	json_t *j = json_load_file(path, 0, NULL);
	if (!j &&
	    (layout_proc_file(path, sizeof(path), f->cfg.state_dir, id, pid, LAYOUT_PROC_OUT) < 0 ||
	     access(path, F_OK) != 0))
		return -ENOENT;
	*ret_exit = j;
	return 0;
}

int fleet_open(struct fleet *f, const char *id, const char *path, const char *mode, int *ret_fd,
	       char *ret_temp, size_t temp_size, struct error *err)
{
	_cleanup_json_ json_t *msg =
	    json_pack("{s:s, s:s, s:s}", "op", "open", "path", path, "mode", mode);
	_cleanup_json_ json_t *reply = NULL;
	int fd = -1;
	if (!msg)
		return error_set(err, ENOMEM, "out of memory");
	int r = fleet_call(f, id, msg, -1, &reply, &fd, err);
	const char *temp = json_string_value(json_object_get(reply, "temp"));
	if (r == 0 && fd < 0)
		r = error_set(err, EPROTO, "shim: open without an fd");
	else if (r == 0 && strcmp(mode, "write") == 0 && !temp)
		r = error_set(err, EPROTO, "shim: open for writing without a temporary file");
	if (r == 0 && ret_temp)
		snprintf(ret_temp, temp_size, "%s", temp ? temp : "");
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

int fleet_unlink(struct fleet *f, const char *id, const char *path, struct error *err)
{
	return call_simple(f, id, json_pack("{s:s, s:s}", "op", "unlink", "path", path), err);
}

int fleet_rename(struct fleet *f, const char *id, const char *from, const char *to,
		 struct error *err)
{
	return call_simple(
	    f, id, json_pack("{s:s, s:s, s:s}", "op", "rename", "from", from, "to", to), err);
}

int fleet_upper(struct fleet *f, const char *id, int *ret_fd, uint64_t *ret_id_base,
		struct error *err)
{
	_cleanup_json_ json_t *msg = json_pack("{s:s}", "op", "upper");
	_cleanup_json_ json_t *reply = NULL;
	int fd = -1;
	if (!msg)
		return error_set(err, ENOMEM, "out of memory");
	int r = fleet_call(f, id, msg, -1, &reply, &fd, err);
	json_t *base = json_object_get(reply, "id_base");
	if (r == 0 && (fd < 0 || !json_is_integer(base) || json_integer_value(base) <= 0))
		r = error_set(err, EPROTO, "shim: upper without an fd or an id base");
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	*ret_fd = fd;
	*ret_id_base = (uint64_t)json_integer_value(base);
	return 0;
}

const struct fleet_ops fleet_shim_ops = {
    .create = fleet_create,
    .get_live = fleet_get_live,
    .remove = fleet_delete,
    .pause = fleet_pause,
    .set_expiry = fleet_set_expiry,
    .exec_start = fleet_exec_start,
    .exec_wait = fleet_exec_wait,
    .exec_tty = fleet_exec_tty,
    .done = fleet_done,
    .watch = fleet_watch,
    .processes = fleet_processes,
    .network = fleet_network,
    .kill = fleet_kill,
    .read_output = fleet_read_output,
    .exit_record = fleet_exit_record,
    .open = fleet_open,
    .unlink = fleet_unlink,
    .rename = fleet_rename,
    .upper = fleet_upper,
    .tenant_use = fleet_tenant_use,
};
