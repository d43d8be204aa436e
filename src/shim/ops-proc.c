/* exec, watch, kill, processes: the processes a client runs in the sandbox. */
#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "shim/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>

static size_t strv_bytes(const char *const *v)
{
	size_t n = 0;
	for (; v && *v; v++)
		n += strlen(*v) + 1;
	return n;
}

static int check_env(const char *const *env, struct error *err)
{
	for (size_t i = 0; env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			return error_set(err, EINVAL, "env[%zu]: not KEY=VALUE", i);
	}
	return 0;
}

int op_exec(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	_cleanup_free_ const char **argv = NULL;
	_cleanup_free_ const char **env = NULL;
	const char *cwd = NULL;
	int64_t timeout_ms = 0;
	int r;
	if ((r = req_strv(req, "command", SPEC_ARGV_MAX, &argv, err)) < 0)
		return r;
	if (!argv[0] || !argv[0][0])
		return error_set(err, EINVAL, "command: empty");
	if (json_object_get(req, "env") &&
	    ((r = req_strv(req, "env", SPEC_ARGV_MAX, &env, err)) < 0 ||
	     (r = check_env(env, err)) < 0))
		return r;
	if ((r = req_path(req, "cwd", false, &cwd, err)) < 0)
		return r;
	r = req_int(req, "timeout_ms", false, 0, SPEC_TIMEOUT_MAX_MS, 0, &timeout_ms, err);
	if (r < 0)
		return r;
	/* "tty": {"rows", "cols"}: on a terminal, whose master comes back with "started" */
	json_t *tty = json_object_get(req, "tty");
	int64_t rows = 0, cols = 0;
	if (tty && (!json_is_object(tty) ||
		    (r = req_int(tty, "rows", true, 1, SERVE_TTY_DIM_MAX, 0, &rows, err)) < 0 ||
		    (r = req_int(tty, "cols", true, 1, SERVE_TTY_DIM_MAX, 0, &cols, err)) < 0))
		return r < 0 ? r : error_set(err, EINVAL, "tty: not an object");
	if (tty && fd >= 0)
		return error_set(err, EINVAL, "tty: a terminal has no stdin of its own");
	const char *const *envp = env ? env : (const char *const *)s->default_env;
	if (!cwd) /* the image's WorkingDir, else the workdir */
		cwd = s->spec.cwd ? s->spec.cwd : s->spec.workdir;
	size_t bytes = strv_bytes(argv) + strv_bytes(envp) + strlen(cwd) + 1;
	if (bytes > SERVE_SPAWN_BYTES_MAX)
		return error_set(err, E2BIG, "command, env and cwd: %zu bytes, above %d", bytes,
				 SERVE_SPAWN_BYTES_MAX);
	if ((r = shim_need_running(s, err)) < 0)
		return r;
	if (s->running >= SHIM_RUNNING_MAX)
		return error_set(err, EAGAIN, "%d processes are running already", SHIM_RUNNING_MAX);

	_cleanup_close_ int null = -1;
	if (fd < 0 && (fd = null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return error_set_errno(err, errno, "/dev/null");
	struct proc_exec pe = {
	    .argv = argv,
	    .envp = envp,
	    .cwd = cwd,
	    .stdin_fd = fd,
	    .timeout_ms = (uint64_t)timeout_ms,
	    .command = json_object_get(req, "command"),
	    .tty = tty != NULL,
	    .rows = (unsigned)rows,
	    .cols = (unsigned)cols,
	};
	struct proc *p = NULL;
	_cleanup_close_ int master = -1;
	if ((r = proc_exec(s, &pe, &p, &master, err)) < 0)
		return r;
	_cleanup_json_ json_t *m = json_pack("{s:s, s:i}", "type", "started", "pid", (int)p->pid);
	/* a client gone already leaves the process running, as a closed connection does
	 * (a terminal's: its master closed here, the session hangs up) */
	if (m && conn_send(s, c, m, master) == 0)
		c->pid = p->pid;
	return 0;
}

static int find_pid(struct shim *s, json_t *req, struct proc **ret, struct error *err)
{
	int64_t pid;
	int r = req_int(req, "pid", true, 1, INT_MAX, 0, &pid, err);
	if (r < 0)
		return r;
	struct proc *p = proc_find(s, (pid_t)pid);
	if (!p)
		return error_set(err, ENOENT, "no process %d", (int)pid);
	*ret = p;
	return 0;
}

int op_watch(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	struct proc *p = NULL;
	int r = find_pid(s, req, &p, err);
	if (r < 0)
		return r;
	if (p->state != PROC_ENDED) {
		c->pid = p->pid;
		return 0;
	}
	_cleanup_free_ char *text = proc_exit_message(p);
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	conn_send_last_text(s, c, text);
	return 0;
}

int op_kill(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	struct proc *p = NULL;
	int64_t sig;
	int r = req_int(req, "signal", false, 1, SIGRTMAX, SIGKILL, &sig, err);
	if (r < 0 || (r = find_pid(s, req, &p, err)) < 0)
		return r;
	if (p->state != PROC_RUNNING)
		return error_set(err, ESRCH, "process %d has ended", (int)p->pid);
	if ((r = shim_need_running(s, err)) < 0)
		return r;
	if ((r = sandbox_signal(s->sb, p->pid, (int)sig, err)) < 0)
		return r;
	if (sig == SIGKILL)
		p->killed = true;
	return reply_ok(s, c);
}

int op_processes(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)req;
	(void)fd;
	json_t *list = json_array();
	for (struct proc *p = s->procs; list && p; p = p->next)
		if (json_array_append_new(list, proc_summary(p)) < 0)
			json_decref(TAKE_PTR(list));
	/* "o" takes list's reference */
	_cleanup_json_ json_t *m =
	    list ? json_pack("{s:s, s:o}", "type", "processes", "processes", list) : NULL;
	if (!m)
		return error_set(err, ENOMEM, "out of memory");
	conn_send(s, c, m, -1);
	return 0;
}
