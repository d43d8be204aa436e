/*
 * probe.c - agentbox-probe: run escape probes and report what happened.
 *
 *   agentbox-probe [OPTIONS] [ID...]     run probes (default: the default set)
 *   agentbox-probe plant [DIR-OR-NAME]   plant objects for X1/X2, sleep
 *   agentbox-probe fill PATH             write into PATH until it fails
 *
 * Output, one line per probe:
 *   ID  expect=...  observed=...  ok|FAIL|skip  description
 * or with --json one object per line. Exit 0 when every probe matched its
 * expectation, 1 when one did not, 2 on a usage error.
 */
#include "probe.h"

#include "base/parse.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

struct probe_options opt = {
    .fill_max = 256ULL << 20,
    .plant_name = "agentbox-plant",
};

static struct probe_result *cur; /* the running probe's result (shared) */

#define DEFAULT_TIMEOUT_S 30

static const struct probe probes[] = {
    {"F1", "ENOENT", "host secrets (k8s token, /root/.ssh, /etc/shadow, --secret-path) absent",
     probe_F1, PROBE_DEFAULT, 0},
    {"F2", "clean", "environment, /proc/1/environ, cmdline and /proc show only this sandbox",
     probe_F2, PROBE_DEFAULT, 0},
    {"F3", "clean",
     "mountinfo has no host mounts; every mount nosuid/nodev; no socket files under /", probe_F3,
     PROBE_DEFAULT, 120},
    {"F4", "EROFS/EPERM", "writes to /usr and /etc fail EROFS; mount and remount fail EPERM",
     probe_F4, PROBE_DEFAULT, 0},
    {"F5", "denied", "writes to core_pattern, sysrq-trigger, drop_caches denied", probe_F5,
     PROBE_DEFAULT, 0},
    {"F6", "masked", "/proc/kcore, keys, timer_list... masked; /sys absent", probe_F6,
     PROBE_DEFAULT, 0},
    {"F7", "fds=0,1,2", "only fds 0-2 open; cwd inside the root", probe_F7, PROBE_DEFAULT, 0},
    {"F9", "minimal", "/dev minimal; mknod EPERM; /dev/mem, kmsg, kvm absent", probe_F9,
     PROBE_DEFAULT, 0},
    {"F10", "denied", "hard links to files we do not own fail", probe_F10, PROBE_DEFAULT, 0},
    {"P1", "EPERM", "ptrace and process_vm_readv/writev of pid 1 and of a child denied", probe_P1,
     PROBE_DEFAULT, 0},
    {"K1", "EPERM/ENOSYS", "unshare/clone with namespace flags EPERM; clone3 ENOSYS", probe_K1,
     PROBE_DEFAULT, 0},
    {"K2", "EPERM", "setns, mount, umount2, pivot_root, chroot, new mount API denied", probe_K2,
     PROBE_DEFAULT, 0},
    {"K3", "EPERM", "bpf, perf_event_open, userfaultfd, io_uring denied", probe_K3, PROBE_DEFAULT,
     0},
    {"K4", "EPERM", "keyctl, add_key, request_key denied", probe_K4, PROBE_DEFAULT, 0},
    {"K5", "EPERM", "init_module, finit_module, delete_module denied", probe_K5, PROBE_DEFAULT, 0},
    {"K6", "EPERM", "kexec_load, kexec_file_load, reboot denied", probe_K6, PROBE_DEFAULT, 0},
    {"K7", "EPERM", "swapon, swapoff, syslog, iopl, ioperm denied", probe_K7, PROBE_DEFAULT, 0},
    {"K8", "EPERM", "clock_settime, settimeofday, adjtimex, open_by_handle_at denied", probe_K8,
     PROBE_DEFAULT, 0},
    {"K9", "denied", "only UNIX/INET/INET6 non-raw sockets can be created", probe_K9, PROBE_DEFAULT,
     0},
    {"K10", "EPERM", "ioctl TIOCSTI/TIOCLINUX denied, also with high bits set", probe_K10,
     PROBE_DEFAULT, 0},
    {"K11", "SIGSYS", "foreign syscall ABIs (i386 int 0x80, x32) kill the process", probe_K11,
     PROBE_DEFAULT, 0},
    {"N1", "lo-only", "only lo exists; connecting out fails with ENETUNREACH", probe_N1,
     PROBE_DEFAULT, 0},
    {"N4", "EPERM", "no raw or packet sockets", probe_N4, PROBE_DEFAULT, 0},
    {"N5", "denied", "no netlink (ip link add, nft); interface flags unchangeable", probe_N5,
     PROBE_DEFAULT, 0},
    {"N6", "absent", "daemon socket (--secret-path) absent; no foreign unix sockets visible",
     probe_N6, PROBE_DEFAULT, 0},
    {"R3", "ENOSPC", "filling /tmp stops with ENOSPC", probe_R3, PROBE_DEFAULT, 120},
    {"R4", "ENOSPC", "filling /dev/shm and the workdir stops with ENOSPC", probe_R4, PROBE_DEFAULT,
     120},
    {"R6", "EPERM", "nice -20 and realtime scheduling denied", probe_R6, PROBE_DEFAULT, 0},
    {"R7", "EMFILE", "opening fds stops with EMFILE", probe_R7, PROBE_DEFAULT, 60},
    {"R10", "denied", "no cgroup files; hard rlimits cannot be raised", probe_R10, PROBE_DEFAULT,
     0},
    {"E1", "caps=0", "CapEff/Prm/Bnd/Amb/Inh 0, NoNewPrivs 1, Seccomp 2", probe_E1, PROBE_DEFAULT,
     0},
    {"E2", "EPERM", "setuid(0), setgid(0), setgroups, capset, uid_map writes fail", probe_E2,
     PROBE_DEFAULT, 0},
    {"E3", "no-gain", "setuid binaries gain nothing; setting S_ISUID is EPERM", probe_E3,
     PROBE_DEFAULT, 0},
    {"E4", "core=0", "RLIMIT_CORE hard limit 0; no core dumps", probe_E4, PROBE_DEFAULT, 0},
    {"E5", "EACCES", "Landlock denies writes outside the writable paths", probe_E5, PROBE_DEFAULT,
     0},
    {"X1", "invisible", "planted files, /dev/shm, SysV IPC, POSIX mq of another sandbox invisible",
     probe_X1, 0, 0},
    {"X2", "unreachable", "planted sockets and processes of another sandbox unreachable", probe_X2,
     0, 0},
    {"P2", "only-sandbox", "kill(-1, SIGKILL) kills only this sandbox's processes", probe_P2,
     PROBE_DEFAULT | PROBE_INPROC, 0},
};

/* ------------------------------------------------------------------ */
/* result building */

static void vappend(const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void vappend(const char *prefix, const char *fmt, va_list ap)
{
	if (!cur)
		return;
	size_t cap = sizeof(cur->observed);
	if (cur->len >= cap - 1)
		return;
	int n =
	    snprintf(cur->observed + cur->len, cap - cur->len, "%s%s", cur->len ? "," : "", prefix);
	if (n < 0)
		return;
	cur->len += (size_t)n;
	if (cur->len >= cap) {
		cur->len = cap - 1;
		return;
	}
	n = vsnprintf(cur->observed + cur->len, cap - cur->len, fmt, ap);
	if (n < 0)
		return;
	cur->len += (size_t)n;
	if (cur->len >= cap)
		cur->len = cap - 1;
	/* Keep the line one token: no spaces or control characters. */
	for (char *p = cur->observed; *p; p++)
		if (isspace((unsigned char)*p) || (unsigned char)*p < 0x20)
			*p = '_';
}

void obs(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappend("", fmt, ap);
	va_end(ap);
}

void check(bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappend(ok ? "" : "!", fmt, ap);
	va_end(ap);
	if (!ok && cur)
		cur->failed = true;
}

void skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappend("skipped:", fmt, ap);
	va_end(ap);
	if (cur)
		cur->skipped = true;
}

const char *errname(int err)
{
	static char buf[16];
	if (err == 0)
		return "allowed";
	const char *n = strerrorname_np(err);
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "E%d", err);
	return buf;
}

static bool name_in_set(const char *name, const char *set)
{
	size_t len = strlen(name);
	for (const char *p = set; *p;) {
		const char *end = strchr(p, '|');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == len && strncmp(p, name, n) == 0)
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

void expect_err(const char *what, int err, const char *accept)
{
	const char *n = errname(err);
	check(name_in_set(n, accept), "%s=%s", what, n);
}

void expect_absent(const char *what, int err)
{
	if (err == 0)
		check(false, "%s=present", what);
	else
		expect_err(what, err, "ENOENT");
}

/* ------------------------------------------------------------------ */
/* helpers */

int in_child(int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		alarm(10);
		int e = fn(arg);
		_exit(e & 0xff);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return errno;
	if (WIFSIGNALED(status))
		return -WTERMSIG(status);
	return WEXITSTATUS(status);
}

long slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < size) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return (long)got;
}

const char *status_field(const char *status, const char *key, char *out, size_t size)
{
	size_t klen = strlen(key);
	for (const char *p = status; p && *p;) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			const char *v = p + klen + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t n = strcspn(v, "\n");
			if (n >= size)
				n = size - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return out;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

int count_pids(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			n++;
	closedir(d);
	return n;
}

/* Does our uid 0 stand for the host's root (uid_map "0 0 ...")? */
static bool root_is_host_root(void)
{
	char map[4096];
	unsigned long in, out, count;
	if (slurp("/proc/self/uid_map", map, sizeof(map)) < 0)
		return true;
	for (char *line = map; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (sscanf(line, "%lu %lu %lu", &in, &out, &count) == 3 && in == 0 && out != 0)
			return false;
	return true;
}

bool privileged_host(void)
{
	char st[4096], v[64];
	if (slurp("/proc/self/status", st, sizeof(st)) < 0)
		return true; /* cannot tell: assume the worst */
	if (!status_field(st, "CapEff", v, sizeof(v)))
		return true;
	/* --as-root: root, but of a namespace of its own and with only its caps */
	if (opt.as_root)
		return strtoull(v, NULL, 16) != opt.root_caps || root_is_host_root();
	if (geteuid() == 0)
		return true;
	return strspn(v, "0") != strlen(v);
}

bool scratch_mountns(void)
{
	if (unshare(CLONE_NEWNS) < 0)
		return false;
	return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

const char *join(const char *dir, const char *name)
{
	static char buf[4096];
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

/* ------------------------------------------------------------------ */
/* output */

static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static const char *verdict(const struct probe_result *r)
{
	if (r->failed)
		return "FAIL";
	if (r->skipped)
		return "skip";
	return "ok";
}

static void report(const struct probe *p, const struct probe_result *r)
{
	const char *observed = r->len ? r->observed : "-";
	if (opt.json) {
		fputs("{\"id\":", stdout);
		json_str(p->id);
		fputs(",\"expect\":", stdout);
		json_str(p->expect);
		fputs(",\"observed\":", stdout);
		json_str(observed);
		printf(",\"ok\":%s,\"status\":\"%s\",\"desc\":", r->failed ? "false" : "true",
		       verdict(r));
		json_str(p->desc);
		fputs("}\n", stdout);
	} else {
		printf("%-4s  expect=%s  observed=%s  %s  %s\n", p->id, p->expect, observed,
		       verdict(r), p->desc);
	}
	fflush(stdout);
}

/* Run p in a child with a timeout; fill r. */
static void run_forked(const struct probe *p, struct probe_result *r)
{
	memset(r, 0, sizeof(*r));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cur = r;
		check(false, "fork=%s", errname(errno));
		cur = NULL;
		return;
	}
	if (pid == 0) {
		cur = r;
		alarm(p->timeout_s ? p->timeout_s : DEFAULT_TIMEOUT_S);
		p->run();
		r->done = true;
		fflush(NULL);
		_exit(0);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = 0;
			break;
		}
	}
	cur = r;
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		check(false, "probe-killed-by-%s", sig == SIGALRM ? "timeout" : sigabbrev_np(sig));
	} else if (!r->done) {
		check(false, "probe-exited-early");
	}
	cur = NULL;
}

static void run_inproc(const struct probe *p, struct probe_result *r)
{
	memset(r, 0, sizeof(*r));
	cur = r;
	p->run();
	r->done = true;
	cur = NULL;
}

int run_adhoc(const struct probe *p)
{
	struct probe_result *r =
	    mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED) {
		fprintf(stderr, "agentbox-probe: mmap: %s\n", strerror(errno));
		return 1;
	}
	run_forked(p, r);
	report(p, r);
	return r->failed ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* main */

static void usage(FILE *f)
{
	fputs("usage: agentbox-probe [--json] [--secret-path P]... [--allow-env NAME]...\n"
	      "                      [--allow-mount DIR]... [--fill-max SIZE]\n"
	      "                      [--plant-name NAME] [--as-root CAPS] [ID...]\n"
	      "       agentbox-probe plant [DIR-OR-NAME]\n"
	      "       agentbox-probe fill PATH\n"
	      "       agentbox-probe --list\n",
	      f);
}

static const struct probe *find_probe(const char *id)
{
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (strcasecmp(probes[i].id, id) == 0)
			return &probes[i];
	return NULL;
}

static int add_list(const char **list, size_t *n, const char *v, const char *flag)
{
	if (*n >= PROBE_LIST_MAX) {
		fprintf(stderr, "agentbox-probe: too many %s\n", flag);
		return -1;
	}
	list[(*n)++] = v;
	return 0;
}

int main(int argc, char **argv)
{
	const struct probe *selected[sizeof(probes) / sizeof(probes[0])];
	size_t nselected = 0;
	bool any_id = false;

	setvbuf(stdout, NULL, _IOLBF, 0);

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--json") == 0) {
			opt.json = true;
		} else if (strcmp(a, "--list") == 0) {
			for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++)
				printf("%-4s %s%s\n", probes[k].id, probes[k].desc,
				       probes[k].flags & PROBE_DEFAULT ? "" : " (only when named)");
			return 0;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--secret-path") == 0 || strcmp(a, "--allow-env") == 0 ||
			   strcmp(a, "--allow-mount") == 0 || strcmp(a, "--fill-max") == 0 ||
			   strcmp(a, "--plant-name") == 0 || strcmp(a, "--as-root") == 0) {
			if (!val || !*val) {
				fprintf(stderr, "agentbox-probe: %s needs a value\n", a);
				return 2;
			}
			i++;
			int rc = 0;
			if (strcmp(a, "--secret-path") == 0)
				rc = add_list(opt.secret_paths, &opt.nsecret_paths, val, a);
			else if (strcmp(a, "--allow-env") == 0)
				rc = add_list(opt.allow_env, &opt.nallow_env, val, a);
			else if (strcmp(a, "--allow-mount") == 0)
				rc = add_list(opt.allow_mounts, &opt.nallow_mounts, val, a);
			else if (strcmp(a, "--plant-name") == 0)
				opt.plant_name = val;
			else if (strcmp(a, "--as-root") == 0) {
				char *end;
				errno = 0;
				opt.root_caps = strtoull(val, &end, 16);
				opt.as_root = true;
				if (errno || *end) {
					fprintf(stderr,
						"agentbox-probe: --as-root: bad caps '%s'\n", val);
					return 2;
				}
			} else if (parse_size(val, &opt.fill_max) < 0) {
				fprintf(stderr, "agentbox-probe: --fill-max: bad size '%s'\n", val);
				return 2;
			}
			if (rc < 0)
				return 2;
		} else if (a[0] == '-') {
			fprintf(stderr, "agentbox-probe: unknown option %s\n", a);
			usage(stderr);
			return 2;
		} else if (!any_id && strcmp(a, "plant") == 0) {
			/* Modes: options may come first (--json fill /tmp). */
			if (argc - i > 2) {
				usage(stderr);
				return 2;
			}
			return mode_plant(i + 1 < argc ? argv[i + 1] : NULL);
		} else if (!any_id && strcmp(a, "fill") == 0) {
			if (argc - i != 2) {
				usage(stderr);
				return 2;
			}
			return mode_fill(argv[i + 1]);
		} else {
			const struct probe *p = find_probe(a);
			if (!p) {
				fprintf(stderr,
					"agentbox-probe: unknown probe id %s (see --list)\n", a);
				return 2;
			}
			any_id = true;
			bool dup = false;
			for (size_t k = 0; k < nselected; k++)
				dup |= selected[k] == p;
			if (!dup)
				selected[nselected++] = p;
		}
	}
	if (!any_id)
		for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++)
			if (probes[k].flags & PROBE_DEFAULT)
				selected[nselected++] = &probes[k];

	struct probe_result *r =
	    mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED) {
		fprintf(stderr, "agentbox-probe: mmap: %s\n", strerror(errno));
		return 1;
	}

	bool failed = false;
	/* Forked probes first, in order; in-process ones (P2 kills) last. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < nselected; k++) {
			const struct probe *p = selected[k];
			bool inproc = p->flags & PROBE_INPROC;
			if (inproc != (pass == 1))
				continue;
			if (inproc)
				run_inproc(p, r);
			else
				run_forked(p, r);
			report(p, r);
			failed |= r->failed;
		}
	}
	return failed ? 1 : 0;
}
