/*
 * timeit.c - agentbox-timeit: measure how long commands take to start and exit.
 *
 *	agentbox-timeit [-n RUNS] [-w WARMUP] [-g GAP_MS] [--name NAME] [--mntns PATH]
 *	                -- CMD [ARG...]
 *	                [--- [--name NAME] [--mntns PATH] -- CMD [ARG...]]...
 *
 * Each command is run RUNS times with fork + execve + wait4, stdin, stdout
 * and stderr on /dev/null. One run is timed with CLOCK_MONOTONIC from just
 * before fork() to just after wait4() returns, so the time includes the
 * fork and exec of the command itself: running /bin/true directly measures
 * the floor that every other command pays too.
 *
 * Several commands (separated by "---") are interleaved round-robin in one
 * process, so noise on a shared machine hits all of them alike. Round r
 * starts with command r mod K, so no command always runs right after the
 * same neighbour. WARMUP untimed rounds come first. With -g, the tool
 * sleeps GAP_MS milliseconds (untimed) before every run, so each run starts
 * on a machine that has settled: deferred kernel work (RCU grace periods,
 * namespace teardown) that back-to-back runs share or overlap is paid again.
 *
 * Every run, warm-up included, must exit 0. Anything else (non-zero status,
 * a signal, a failed exec) stops the benchmark with exit status 1: a
 * benchmark must never time failures.
 *
 * Per-command options:
 *   --name NAME   label in the output (default: the command's basename)
 *   --mntns PATH  setns() the child into this mount namespace before exec
 *                 (e.g. /proc/PID/ns/mnt); a few microseconds, timed
 * An argument containing "{run}" has it replaced by a number unique to the
 * run (warm-up included), e.g. a container id: crun run ... bench-{run}.
 * "---" always separates commands; a command cannot take it as an argument.
 *
 * Output: one JSON object per command and line, on stdout:
 *   {"name":..., "n":..., "warmup":..., "gap_ms":..., "p50_ms":..., "p90_ms":...,
 *    "p99_ms":..., "mean_ms":..., "min_ms":..., "max_ms":...,
 *    "cpu_mean_ms":..., "argv":[...]}
 * Percentiles are nearest-rank (an observed sample, never interpolated).
 * cpu_mean_ms is the user+system CPU time wait4() reports for the command
 * and the descendants it waited for.
 *
 * Exit status: 0 every run exited 0; 1 a run failed; 2 usage error;
 * 3 system error (fork, wait4, memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/parse.h"

#define EXIT_RUN_FAILED 1
#define EXIT_USAGE	2
#define EXIT_SYSTEM	3

#define TIMEIT_RUNS_DEFAULT   100
#define TIMEIT_RUNS_MAX	      1000000
#define TIMEIT_WARMUP_DEFAULT 5
#define TIMEIT_WARMUP_MAX     10000
#define TIMEIT_GAP_MAX_MS     10000
#define TIMEIT_CMDS_MAX	      16
#define RUN_TOKEN	      "{run}"
#define DEFAULT_PATH	      "/usr/local/bin:/usr/bin:/bin"

extern char **environ;

struct bench_cmd {
	const char *name; /* label; points into argv or at path's basename */
	char *path;	  /* resolved executable, owned */
	char **argv;	  /* template, NULL-terminated; strings point into main's argv */
	char **run_argv;  /* argv for one run: template with RUN_TOKEN replaced */
	size_t argc;
	int mntns_fd;	   /* -1: stay in our mount namespace */
	double *sample_ms; /* one per timed run */
	double cpu_ms_sum;
};

struct bench {
	uint64_t runs;
	uint64_t warmup;
	uint64_t gap_ms; /* untimed sleep before every run */
	struct bench_cmd cmds[TIMEIT_CMDS_MAX];
	size_t n_cmds;
	uint64_t seq; /* source of RUN_TOKEN values */
	int devnull;
};

static void usage(FILE *f)
{
	fputs(
	    "usage: agentbox-timeit [-n RUNS] [-w WARMUP] [-g GAP_MS] [--name NAME] [--mntns "
	    "PATH]\n"
	    "                       -- CMD [ARG...]\n"
	    "                       [--- [--name NAME] [--mntns PATH] -- CMD [ARG...]]...\n"
	    "Runs each command RUNS times (default 100) after WARMUP untimed rounds (default 5),\n"
	    "interleaved round-robin, sleeping GAP_MS (default 0) before each run, and prints\n"
	    "one JSON line of latency statistics per command. Every run must exit 0.\n"
	    "\"{run}\" in an argument becomes a number unique to the run.\n"
	    "Exit status: 0 ok, 1 a run failed, 2 usage error, 3 system error.\n",
	    f);
}

static double timespec_ms(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static double timeval_ms(const struct timeval *tv)
{
	return (double)tv->tv_sec * 1e3 + (double)tv->tv_usec / 1e3;
}

static bool is_executable_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Resolves cmd like execvp() would, once, so lookups stay out of the timing. */
static int resolve_command(const char *cmd, char **ret_path)
{
	if (strchr(cmd, '/')) {
		if (!is_executable_file(cmd))
			return -ENOENT;
		char *p = strdup(cmd);
		if (!p)
			return -ENOMEM;
		*ret_path = p;
		return 0;
	}

	const char *search = getenv("PATH");
	if (!search || !*search)
		search = DEFAULT_PATH;
	for (const char *dir = search; *dir;) {
		size_t len = strcspn(dir, ":");
		_cleanup_free_ char *p = NULL;
		if (asprintf(&p, "%.*s/%s", len ? (int)len : 1, len ? dir : ".", cmd) < 0)
			return -ENOMEM;
		if (is_executable_file(p)) {
			*ret_path = TAKE_PTR(p);
			return 0;
		}
		dir += len;
		if (*dir == ':')
			dir++;
	}
	return -ENOENT;
}

/* Returns arg with every RUN_TOKEN replaced by value, in a new string. */
static char *substitute_token(const char *arg, const char *value)
{
	size_t tok = strlen(RUN_TOKEN), vlen = strlen(value), n = 0;
	for (const char *p = strstr(arg, RUN_TOKEN); p; p = strstr(p + tok, RUN_TOKEN))
		n++;
	size_t len = strlen(arg) + n * vlen - n * tok;
	char *out = malloc(len + 1), *o = out;
	if (!out)
		return NULL;
	for (const char *p = arg;;) {
		const char *hit = strstr(p, RUN_TOKEN);
		size_t chunk = hit ? (size_t)(hit - p) : strlen(p);
		memcpy(o, p, chunk);
		o += chunk;
		if (!hit)
			break;
		memcpy(o, value, vlen);
		o += vlen;
		p = hit + tok;
	}
	*o = '\0';
	return out;
}

/* Fills c->run_argv for the next run; strings that were substituted are owned. */
static int prepare_argv(struct bench_cmd *c, uint64_t seq)
{
	char value[24];
	snprintf(value, sizeof(value), "%" PRIu64, seq);
	for (size_t i = 0; i < c->argc; i++) {
		if (c->run_argv[i] != c->argv[i])
			free(c->run_argv[i]);
		c->run_argv[i] = c->argv[i];
		if (strstr(c->argv[i], RUN_TOKEN)) {
			char *s = substitute_token(c->argv[i], value);
			if (!s)
				return -ENOMEM;
			c->run_argv[i] = s;
		}
	}
	return 0;
}

static void describe_status(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exited with status %d%s", WEXITSTATUS(status),
			 WEXITSTATUS(status) == 127 ? " (exec failed?)" : "");
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, size, "ended with wait status 0x%x", (unsigned)status);
}

/*
 * Runs c once. Returns 0 and the wait status, wall time and CPU time, or
 * -errno if the run could not be made (fork or wait4 failed).
 */
static int run_once(const struct bench *b, struct bench_cmd *c, int *ret_status,
		    double *ret_wall_ms, double *ret_cpu_ms)
{
	struct timespec t0, t1;
	struct rusage ru;
	int status;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (c->mntns_fd >= 0 && setns(c->mntns_fd, CLONE_NEWNS) < 0)
			_exit(126);
		if (dup2(b->devnull, STDIN_FILENO) < 0 || dup2(b->devnull, STDOUT_FILENO) < 0 ||
		    dup2(b->devnull, STDERR_FILENO) < 0)
			_exit(126);
		execve(c->path, c->run_argv, environ);
		_exit(127);
	}
	for (;;) {
		pid_t r = wait4(pid, &status, 0, &ru);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);

	*ret_status = status;
	*ret_wall_ms = timespec_ms(&t0, &t1);
	*ret_cpu_ms = timeval_ms(&ru.ru_utime) + timeval_ms(&ru.ru_stime);
	return 0;
}

/* One round: every command once, starting with command `first`. */
static int run_round(struct bench *b, size_t first, bool timed, uint64_t round)
{
	for (size_t k = 0; k < b->n_cmds; k++) {
		struct bench_cmd *c = &b->cmds[(first + k) % b->n_cmds];
		int status = 0, r;
		double wall_ms = 0, cpu_ms = 0;

		r = prepare_argv(c, b->seq++);
		if (r < 0) {
			fprintf(stderr, "agentbox-timeit: %s\n", strerror(-r));
			return EXIT_SYSTEM;
		}
		if (b->gap_ms) {
			struct timespec gap = {
			    .tv_sec = (time_t)(b->gap_ms / 1000),
			    .tv_nsec = (long)(b->gap_ms % 1000) * 1000000L,
			};
			while (nanosleep(&gap, &gap) < 0 && errno == EINTR)
				;
		}
		r = run_once(b, c, &status, &wall_ms, &cpu_ms);
		if (r < 0) {
			fprintf(stderr, "agentbox-timeit: %s: %s\n", c->name, strerror(-r));
			return EXIT_SYSTEM;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			char what[128];
			describe_status(status, what, sizeof(what));
			fprintf(stderr,
				"agentbox-timeit: %s: %s run %" PRIu64 " %s; not timing failures "
				"(run it by hand to see its output)\n",
				c->name, timed ? "timed" : "warm-up", round + 1, what);
			return EXIT_RUN_FAILED;
		}
		if (timed) {
			c->sample_ms[round] = wall_ms;
			c->cpu_ms_sum += cpu_ms;
		}
	}
	return 0;
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted[0..n), 0 < pct <= 100. */
static double percentile(const double *sorted, uint64_t n, unsigned pct)
{
	uint64_t rank = (n * pct + 99) / 100; /* ceil(n * pct / 100) */
	if (rank == 0)
		rank = 1;
	return sorted[rank - 1];
}

static void print_json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void print_result(const struct bench *b, struct bench_cmd *c)
{
	uint64_t n = b->runs;
	double sum = 0;

	qsort(c->sample_ms, n, sizeof(double), compare_double);
	for (uint64_t i = 0; i < n; i++)
		sum += c->sample_ms[i];

	fputs("{\"name\":", stdout);
	print_json_string(c->name);
	printf(",\"n\":%" PRIu64 ",\"warmup\":%" PRIu64 ",\"gap_ms\":%" PRIu64, n, b->warmup,
	       b->gap_ms);
	printf(",\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f", percentile(c->sample_ms, n, 50),
	       percentile(c->sample_ms, n, 90), percentile(c->sample_ms, n, 99));
	printf(",\"mean_ms\":%.4f,\"min_ms\":%.4f,\"max_ms\":%.4f,\"cpu_mean_ms\":%.4f", sum / n,
	       c->sample_ms[0], c->sample_ms[n - 1], c->cpu_ms_sum / n);
	fputs(",\"argv\":[", stdout);
	for (size_t i = 0; i < c->argc; i++) {
		if (i)
			putchar(',');
		print_json_string(c->argv[i]);
	}
	fputs("]}\n", stdout);
}

static int parse_count(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *ret)
{
	uint64_t v;
	if (!arg || parse_u64(arg, &v) < 0 || v < min || v > max) {
		fprintf(stderr,
			"agentbox-timeit: %s wants a number from %" PRIu64 " to %" PRIu64 "\n", opt,
			min, max);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

/*
 * Parses argv into b. Global options (-n, -w, -g) are accepted before the
 * first command only. Returns 0, or -EINVAL after printing why.
 */
static int parse_args(int argc, char **argv, struct bench *b)
{
	int i = 1;

	while (i < argc) {
		if (b->n_cmds == TIMEIT_CMDS_MAX) {
			fprintf(stderr, "agentbox-timeit: at most %d commands\n", TIMEIT_CMDS_MAX);
			return -EINVAL;
		}
		struct bench_cmd *c = &b->cmds[b->n_cmds];
		const char *mntns = NULL;

		for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
			const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
			bool first = b->n_cmds == 0;
			if (first && (!strcmp(opt, "-n") || !strcmp(opt, "--runs"))) {
				if (parse_count(opt, arg, 1, TIMEIT_RUNS_MAX, &b->runs) < 0)
					return -EINVAL;
				i++;
			} else if (first && (!strcmp(opt, "-w") || !strcmp(opt, "--warmup"))) {
				if (parse_count(opt, arg, 0, TIMEIT_WARMUP_MAX, &b->warmup) < 0)
					return -EINVAL;
				i++;
			} else if (first && (!strcmp(opt, "-g") || !strcmp(opt, "--gap"))) {
				if (parse_count(opt, arg, 0, TIMEIT_GAP_MAX_MS, &b->gap_ms) < 0)
					return -EINVAL;
				i++;
			} else if (!strcmp(opt, "--name") && arg) {
				c->name = arg;
				i++;
			} else if (!strcmp(opt, "--mntns") && arg) {
				mntns = arg;
				i++;
			} else if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
				usage(stdout);
				exit(0);
			} else {
				fprintf(stderr, "agentbox-timeit: unexpected '%s' before '--'\n",
					opt);
				return -EINVAL;
			}
		}
		if (i >= argc) {
			fputs("agentbox-timeit: missing '-- CMD'\n", stderr);
			return -EINVAL;
		}
		i++; /* "--" */

		int start = i;
		while (i < argc && strcmp(argv[i], "---") != 0)
			i++;
		if (i == start) {
			fputs("agentbox-timeit: empty command after '--'\n", stderr);
			return -EINVAL;
		}
		c->argc = (size_t)(i - start);
		c->argv = calloc(c->argc + 1, sizeof(char *));
		c->run_argv = calloc(c->argc + 1, sizeof(char *));
		if (!c->argv || !c->run_argv)
			return -ENOMEM;
		memcpy(c->argv, &argv[start], c->argc * sizeof(char *));
		memcpy(c->run_argv, c->argv, c->argc * sizeof(char *));

		int r = resolve_command(c->argv[0], &c->path);
		if (r < 0) {
			fprintf(stderr, "agentbox-timeit: %s: no such executable\n", c->argv[0]);
			return -EINVAL;
		}
		if (!c->name) {
			const char *slash = strrchr(c->path, '/');
			c->name = slash ? slash + 1 : c->path;
		}
		c->mntns_fd = -1;
		if (mntns) {
			c->mntns_fd = open(mntns, O_RDONLY | O_CLOEXEC);
			if (c->mntns_fd < 0) {
				fprintf(stderr, "agentbox-timeit: --mntns %s: %s\n", mntns,
					strerror(errno));
				return -EINVAL;
			}
		}
		b->n_cmds++;

		if (i < argc) {
			i++; /* "---" */
			if (i == argc) {
				fputs("agentbox-timeit: nothing after '---'\n", stderr);
				return -EINVAL;
			}
		}
	}
	if (b->n_cmds == 0) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct bench b = {
	    .runs = TIMEIT_RUNS_DEFAULT,
	    .warmup = TIMEIT_WARMUP_DEFAULT,
	    .devnull = -1,
	};
	int r;

	r = parse_args(argc, argv, &b);
	if (r == -ENOMEM) {
		fputs("agentbox-timeit: out of memory\n", stderr);
		return EXIT_SYSTEM;
	}
	if (r < 0)
		return EXIT_USAGE;

	b.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (b.devnull < 0) {
		fprintf(stderr, "agentbox-timeit: /dev/null: %s\n", strerror(errno));
		return EXIT_SYSTEM;
	}
	for (size_t k = 0; k < b.n_cmds; k++) {
		b.cmds[k].sample_ms = calloc(b.runs, sizeof(double));
		if (!b.cmds[k].sample_ms) {
			fputs("agentbox-timeit: out of memory\n", stderr);
			return EXIT_SYSTEM;
		}
	}

	for (uint64_t round = 0; round < b.warmup; round++) {
		r = run_round(&b, round % b.n_cmds, false, round);
		if (r != 0)
			return r;
	}
	for (uint64_t round = 0; round < b.runs; round++) {
		r = run_round(&b, round % b.n_cmds, true, round);
		if (r != 0)
			return r;
	}

	for (size_t k = 0; k < b.n_cmds; k++)
		print_result(&b, &b.cmds[k]);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "agentbox-timeit: writing results: %s\n", strerror(errno));
		return EXIT_SYSTEM;
	}
	return 0;
}
