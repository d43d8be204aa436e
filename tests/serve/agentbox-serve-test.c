/*
 * agentbox-serve-test - drive one serve-mode sandbox step by step, for the
 * integration tests (tests/integration/test_serve.py). Needs root.
 *
 *	agentbox-serve-test [--memory SIZE] [--pids N] [--file PATH=TEXT]... [STEP...]
 *
 * Starts a sandbox with spec->serve set (default limits otherwise) and
 * prints {"op": "start", ...}. Then runs the steps: each STEP argument,
 * or, when there is none, each line of stdin. A step is words separated
 * by tabs; "\t", "\n" and "\\" inside a word stand for themselves. Each
 * step prints one JSON object on one line (flushed): "op", "rc" (0 or
 * -errno), "err" (the message), and what the step returns.
 *
 *	spawn ARG...          run ARG... in the workdir; stdin /dev/null, stdout and
 *	                      stderr kept in memory files -> pid
 *	spawn-in DIR ARG...   the same in DIR
 *	wait [PID]            until PID (default: the last spawned) exits -> status,
 *	                      exit or signal, stdout, stderr (30 s at most)
 *	output [PID]          stdout and stderr so far
 *	signal PID SIG        sandbox_signal()
 *	read PATH             sandbox_open(READ) and read it all -> data, ms
 *	dir PATH              sandbox_open(DIR) and list it -> entries
 *	write PATH DATA       sandbox_open(WRITE), write DATA, sandbox_rename(temp, PATH)
 *	                      -> temp, rename_rc
 *	open-write PATH       sandbox_open(WRITE) only -> temp
 *	rename FROM TO        sandbox_rename()
 *	unlink PATH           sandbox_unlink()
 *	freeze | thaw         sandbox_freeze() -> ms
 *	oom-kills             sandbox_oom_kills() -> count
 *	info                  -> init_pid, control_fd
 *	big-spawn BYTES       a spawn whose argument alone is BYTES long
 *	sleep MS
 *	close                 shut our end of the control socket and wait for the end
 *	kill                  sandbox_kill() and wait for the end
 *
 * After the last step the control socket is closed as by "close" (unless
 * the sandbox has ended already), and the end is printed as
 * {"op": "end", "end": "exited", "exit_status": N, "term_signal": N, ...}.
 *
 * Exit status: 0 when the steps ran (whatever they returned), 1 when the
 * sandbox could not start, 2 on bad usage.
 */
#include "base/cleanup.h"
#include "base/parse.h"
#include "runtime/sandbox.h"
#include "runtime/serve.h"
#include "runtime/spec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILDREN_MAX 1024
#define WORDS_MAX    256
#define READ_MAX     (1 << 20)
#define WAIT_MS	     30000

struct child {
	pid_t pid;
	int out, err; /* memory files behind stdout and stderr */
	bool exited;
	int status;
};

static struct sandbox *sb;
static const struct spec *the_spec;
static char **sandbox_env;
static struct child children[CHILDREN_MAX];
static size_t nchildren;
static bool ended;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- JSON output ------------------------------------------------------ */

static void json_str(const char *s, size_t len)
{
	putchar('"');
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c); /* bytes as Latin-1: the tests compare ASCII */
		else
			putchar(c);
	}
	putchar('"');
}

static void begin(const char *op, int rc, const struct error *err)
{
	printf("{\"op\": ");
	json_str(op, strlen(op));
	printf(", \"rc\": %d, \"err\": ", rc);
	const char *msg = rc < 0 && err ? err->msg : "";
	json_str(msg, strlen(msg));
}

static void end_line(void)
{
	puts("}");
	fflush(stdout);
}

static void field_str(const char *key, const char *s, size_t len)
{
	printf(", \"%s\": ", key);
	json_str(s, len);
}

static void field_int(const char *key, long long v)
{
	printf(", \"%s\": %lld", key, v);
}

/* ---- children ----------------------------------------------------------- */

static struct child *find_child(pid_t pid)
{
	for (size_t i = 0; i < nchildren; i++)
		if (children[i].pid == pid)
			return &children[i];
	return NULL;
}

/* Take every exit report waiting. 0, or -EPIPE once init is gone. */
static int collect_exits(void)
{
	pid_t pid;
	int status, r;
	while ((r = sandbox_next_exit(sb, &pid, &status)) == 0) {
		struct child *c = find_child(pid);
		if (c) {
			c->exited = true;
			c->status = status;
		}
	}
	return r == -EAGAIN ? 0 : r;
}

static int wait_child(struct child *c)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	for (;;) {
		int r = collect_exits();
		if (c->exited)
			return 0;
		if (r < 0)
			return r;
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = sandbox_control_fd(sb), .events = POLLIN};
		if (poll(&pfd, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return -errno;
	}
}

static void field_file(const char *key, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		field_str(key, "", 0);
		return;
	}
	size_t size = (size_t)st.st_size < READ_MAX ? (size_t)st.st_size : READ_MAX;
	_cleanup_free_ char *buf = malloc(size + 1);
	ssize_t n = buf ? pread(fd, buf, size, 0) : -1;
	field_str(key, buf ? buf : "", n > 0 ? (size_t)n : 0);
}

static void print_output(const struct child *c)
{
	field_file("stdout", c->out);
	field_file("stderr", c->err);
}

/* ---- steps -------------------------------------------------------------- */

static void step_spawn(const char *op, const char *cwd, char **argv)
{
	struct error err = {0};
	if (nchildren >= CHILDREN_MAX) {
		begin(op, -EAGAIN, NULL);
		end_line();
		return;
	}
	_cleanup_close_ int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = memfd_create("stdout", MFD_CLOEXEC);
	_cleanup_close_ int errfd = memfd_create("stderr", MFD_CLOEXEC);
	if (in < 0 || out < 0 || errfd < 0) {
		begin(op, -errno, NULL);
		end_line();
		return;
	}
	struct serve_spawn req = {
	    .argv = (const char *const *)argv,
	    .envp = (const char *const *)sandbox_env,
	    .cwd = cwd,
	    .stdin_fd = in,
	    .stdout_fd = out,
	    .stderr_fd = errfd,
	};
	pid_t pid = 0;
	int r = sandbox_spawn(sb, &req, &pid, &err);
	begin(op, r, &err);
	if (r == 0) {
		children[nchildren++] =
		    (struct child){.pid = pid, .out = TAKE_FD(out), .err = TAKE_FD(errfd)};
		field_int("pid", pid);
	}
	end_line();
}

static struct child *child_arg(char **w, size_t n)
{
	if (n < 2)
		return nchildren ? &children[nchildren - 1] : NULL;
	uint64_t pid;
	return parse_u64(w[1], &pid) == 0 ? find_child((pid_t)pid) : NULL;
}

static void step_wait(char **w, size_t n)
{
	struct child *c = child_arg(w, n);
	if (!c) {
		begin("wait", -ESRCH, NULL);
		end_line();
		return;
	}
	int r = wait_child(c);
	begin("wait", r, NULL);
	field_int("pid", c->pid);
	if (r == 0) {
		field_int("status", c->status);
		if (WIFEXITED(c->status))
			field_int("exit", WEXITSTATUS(c->status));
		if (WIFSIGNALED(c->status))
			field_int("signal", WTERMSIG(c->status));
	}
	print_output(c);
	end_line();
}

static void step_output(char **w, size_t n)
{
	struct child *c = child_arg(w, n);
	begin("output", c ? 0 : -ESRCH, NULL);
	if (c)
		print_output(c);
	end_line();
}

static void step_signal(char **w, size_t n)
{
	struct error err = {0};
	uint64_t pid, sig;
	if (n != 3 || parse_u64(w[1], &pid) < 0 || parse_u64(w[2], &sig) < 0) {
		begin("signal", -EINVAL, NULL);
		end_line();
		return;
	}
	int r = sandbox_signal(sb, (pid_t)pid, (int)sig, &err);
	begin("signal", r, &err);
	end_line();
}

static void step_read(const char *path)
{
	struct error err = {0};
	int fd = -1;
	uint64_t t = now_ms();
	int r = sandbox_open(sb, path, SANDBOX_OPEN_READ, &fd, NULL, 0, &err);
	uint64_t took = now_ms() - t;
	_cleanup_close_ int owned = fd;
	begin("read", r, &err);
	field_int("ms", (long long)took);
	if (r == 0) {
		_cleanup_free_ char *buf = malloc(READ_MAX);
		ssize_t got = 0, k;
		while (buf && got < READ_MAX &&
		       (k = read(fd, buf + got, READ_MAX - (size_t)got)) > 0)
			got += k;
		field_str("data", buf ? buf : "", (size_t)got);
		int fl = fcntl(fd, F_GETFD);
		field_int("cloexec", fl >= 0 && (fl & FD_CLOEXEC));
	}
	end_line();
}

static void step_dir(const char *path)
{
	struct error err = {0};
	int fd = -1;
	int r = sandbox_open(sb, path, SANDBOX_OPEN_DIR, &fd, NULL, 0, &err);
	begin("dir", r, &err);
	if (r == 0) {
		DIR *d = fdopendir(fd);
		printf(", \"entries\": [");
		bool first = true;
		struct dirent *de;
		while (d && (de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (!first)
				printf(", ");
			json_str(de->d_name, strlen(de->d_name));
			first = false;
		}
		printf("]");
		if (d)
			closedir(d);
		else
			close(fd);
	}
	end_line();
}

static void step_write(const char *op, const char *path, const char *data, bool finish)
{
	struct error err = {0};
	char temp[SPEC_PATH_MAX + 32];
	int fd = -1;
	int r = sandbox_open(sb, path, SANDBOX_OPEN_WRITE, &fd, temp, sizeof(temp), &err);
	_cleanup_close_ int owned = fd;
	if (r == 0 && data && write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		r = error_set_errno(&err, errno, "write");
	begin(op, r, &err);
	if (r == 0) {
		field_str("temp", temp, strlen(temp));
		if (finish) {
			struct error rerr = {0};
			int rr = sandbox_rename(sb, temp, path, &rerr);
			field_int("rename_rc", rr);
			field_str("rename_err", rerr.msg, strlen(rerr.msg));
		}
	}
	end_line();
}

static void step_simple(char **w, size_t n)
{
	struct error err = {0};
	int r;
	const char *op = w[0];
	if (strcmp(op, "rename") == 0 && n == 3)
		r = sandbox_rename(sb, w[1], w[2], &err);
	else if (strcmp(op, "unlink") == 0 && n == 2)
		r = sandbox_unlink(sb, w[1], &err);
	else
		r = error_set(&err, EINVAL, "usage: %s", op);
	begin(op, r, &err);
	end_line();
}

static void step_freeze(const char *op, bool frozen)
{
	struct error err = {0};
	uint64_t t = now_ms();
	int r = sandbox_freeze(sb, frozen, &err);
	begin(op, r, &err);
	field_int("ms", (long long)(now_ms() - t));
	end_line();
}

static void step_big_spawn(const char *bytes)
{
	uint64_t n;
	if (parse_u64(bytes, &n) < 0 || n > (64u << 20)) {
		begin("big-spawn", -EINVAL, NULL);
		end_line();
		return;
	}
	_cleanup_free_ char *arg = malloc(n + 1);
	if (!arg) {
		begin("big-spawn", -ENOMEM, NULL);
		end_line();
		return;
	}
	memset(arg, 'x', n);
	arg[n] = '\0';
	char *argv[] = {"true", arg, NULL};
	step_spawn("big-spawn", the_spec->workdir, argv);
}

static const char *end_name(enum sandbox_end e)
{
	static const char *const names[] = {
	    [SANDBOX_EXITED] = "exited",
	    [SANDBOX_SIGNALED] = "signaled",
	    [SANDBOX_OOM_KILLED] = "oom_killed",
	    [SANDBOX_TIMED_OUT] = "timed_out",
	    [SANDBOX_CANCELLED] = "cancelled",
	    [SANDBOX_EXEC_FAILED] = "exec_failed",
	    [SANDBOX_SETUP_FAILED] = "setup_failed",
	};
	return (size_t)e < ELEMENTSOF(names) && names[e] ? names[e] : "unknown";
}

/* Wait for the sandbox to end and print how. */
static void finish(const char *op)
{
	struct error err = {0};
	struct sandbox_result res = {0};
	uint64_t t = now_ms();
	int r = sandbox_wait(sb, -1, &res, &err);
	ended = true;
	begin(op, r, &err);
	field_int("ms", (long long)(now_ms() - t));
	if (r == 0) {
		const char *name = end_name(res.end);
		field_str("end", name, strlen(name));
		field_int("exit_status", res.exit_status);
		field_int("term_signal", res.term_signal);
		printf(", \"oom_killed\": %s", res.oom_killed ? "true" : "false");
		if (res.end == SANDBOX_SETUP_FAILED)
			field_str("setup_err", err.msg, strlen(err.msg));
	}
	end_line();
}

static void step_close(void)
{
	/* Our end stays open (the handle owns it); init sees EOF all the same. */
	if (shutdown(sandbox_control_fd(sb), SHUT_RDWR) < 0) {
		begin("close", -errno, NULL);
		end_line();
		return;
	}
	finish("close");
}

static void run_step(char **w, size_t n)
{
	const char *op = w[0];
	if (ended && strcmp(op, "info") != 0) {
		begin(op, -EPIPE, NULL);
		end_line();
		return;
	}
	if (strcmp(op, "spawn") == 0 && n >= 2) {
		step_spawn(op, the_spec->workdir, w + 1);
	} else if (strcmp(op, "spawn-in") == 0 && n >= 3) {
		step_spawn(op, w[1], w + 2);
	} else if (strcmp(op, "wait") == 0) {
		step_wait(w, n);
	} else if (strcmp(op, "output") == 0) {
		step_output(w, n);
	} else if (strcmp(op, "signal") == 0) {
		step_signal(w, n);
	} else if (strcmp(op, "read") == 0 && n == 2) {
		step_read(w[1]);
	} else if (strcmp(op, "dir") == 0 && n == 2) {
		step_dir(w[1]);
	} else if (strcmp(op, "write") == 0 && n == 3) {
		step_write("write", w[1], w[2], true);
	} else if (strcmp(op, "open-write") == 0 && n == 2) {
		step_write("open-write", w[1], NULL, false);
	} else if (strcmp(op, "rename") == 0 || strcmp(op, "unlink") == 0) {
		step_simple(w, n);
	} else if (strcmp(op, "freeze") == 0 || strcmp(op, "thaw") == 0) {
		step_freeze(op, strcmp(op, "freeze") == 0);
	} else if (strcmp(op, "oom-kills") == 0) {
		uint64_t count = 0;
		int r = sandbox_oom_kills(sb, &count);
		begin(op, r, NULL);
		field_int("count", (long long)count);
		end_line();
	} else if (strcmp(op, "info") == 0) {
		begin(op, 0, NULL);
		field_int("init_pid", sandbox_init_pid(sb));
		field_int("control_fd", ended ? -1 : sandbox_control_fd(sb));
		end_line();
	} else if (strcmp(op, "big-spawn") == 0 && n == 2) {
		step_big_spawn(w[1]);
	} else if (strcmp(op, "sleep") == 0 && n == 2) {
		uint64_t ms;
		int r = parse_u64(w[1], &ms);
		if (r == 0) {
			struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
					      .tv_nsec = (long)(ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		begin(op, r, NULL);
		end_line();
	} else if (strcmp(op, "close") == 0) {
		step_close();
	} else if (strcmp(op, "kill") == 0) {
		int r = sandbox_kill(sb);
		if (r < 0) {
			begin(op, r, NULL);
			end_line();
		} else {
			finish(op);
		}
	} else {
		begin(op, -EINVAL, NULL);
		static const char usage_msg[] = "unknown step or wrong argument count";
		field_str("usage", usage_msg, sizeof(usage_msg) - 1);
		end_line();
	}
}

/* Split a line into tab-separated words, undoing \t, \n and \\ in place. */
static size_t split_line(char *line, char **words)
{
	size_t n = 0;
	char *p = line;
	while (n < WORDS_MAX - 1) {
		words[n++] = p;
		char *o = p;
		for (; *p && *p != '\t'; p++) {
			if (*p == '\\' && p[1]) {
				p++;
				*o++ = *p == 't' ? '\t' : *p == 'n' ? '\n' : *p;
			} else {
				*o++ = *p;
			}
		}
		bool more = *p == '\t';
		*o = '\0';
		if (!more)
			break;
		p++;
	}
	words[n] = NULL;
	return n;
}

static void run_line(char *line)
{
	char *words[WORDS_MAX];
	line[strcspn(line, "\n")] = '\0';
	if (!line[0])
		return;
	size_t n = split_line(line, words);
	run_step(words, n);
}

static int usage(void)
{
	fprintf(stderr, "usage: agentbox-serve-test [--memory SIZE] [--pids N] "
			"[--file PATH=TEXT]... [STEP...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static struct spec_file files[SPEC_FILES_MAX];
	struct spec spec;
	struct error err = {0};
	int i = 1;

	spec_init(&spec);
	spec.serve = true;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (i + 1 >= argc)
			return usage();
		if (strcmp(argv[i], "--memory") == 0) {
			if (parse_size(argv[++i], &spec.memory_bytes) < 0)
				return usage();
		} else if (strcmp(argv[i], "--pids") == 0) {
			if (parse_u64(argv[++i], &spec.pids) < 0)
				return usage();
		} else if (strcmp(argv[i], "--file") == 0) {
			char *eq = strchr(argv[++i], '=');
			if (!eq || spec.nfiles >= SPEC_FILES_MAX)
				return usage();
			*eq = '\0';
			files[spec.nfiles++] = (struct spec_file){
			    .path = argv[i], .data = eq + 1, .len = strlen(eq + 1)};
			spec.files = files;
		} else {
			return usage();
		}
	}
	the_spec = &spec;
	signal(SIGPIPE, SIG_IGN);

	int r = spec_validate(&spec, &err);
	if (r == 0)
		r = sandbox_start(&spec, &sb, &err);
	begin("start", r, &err);
	if (r == 0) {
		field_int("init_pid", sandbox_init_pid(sb));
		field_int("control_fd", sandbox_control_fd(sb));
	}
	end_line();
	if (r < 0)
		return 1;
	sandbox_env = spec_build_env(&spec);
	if (!sandbox_env)
		return 1;

	if (i < argc) {
		for (; i < argc; i++)
			run_line(argv[i]);
	} else {
		char *line = NULL;
		size_t cap = 0;
		while (getline(&line, &cap, stdin) > 0)
			run_line(line);
		free(line);
	}
	if (!ended)
		step_close();
	sb = sandbox_free(sb);
	free(sandbox_env);
	spec_release(&spec);
	return 0;
}
