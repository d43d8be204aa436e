/*
 * bootstrap.c - debootstrap into the store's tmp/, then a layout of the
 * tree (bootstrap-pack.c) imported (bootstrap.h).
 */
#include "image/bootstrap.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"
#include "image/bootstrap-internal.h"
#include "image/store-internal.h"
#include "image/unpack-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The output's tail: at most this many lines of it in an error. */
#define LOG_LINES_SHOWN 4

int image_bootstrap_suite(const char *image, char suite[IMAGE_BOOTSTRAP_SUITE_MAX + 1],
			  struct error *err)
{
	static const char prefix[] = IMAGE_BOOTSTRAP_PREFIX;
	if (!image || strncmp(image, prefix, sizeof(prefix) - 1) != 0)
		return error_set(err, EINVAL,
				 "a bootstrapped image is \"debian:SUITE\" (debian:bookworm)");
	const char *s = image + sizeof(prefix) - 1;
	size_t n = strlen(s);
	if (n < 2 || n > IMAGE_BOOTSTRAP_SUITE_MAX)
		return error_set(err, EINVAL, "a suite's name has 2 to %d letters",
				 IMAGE_BOOTSTRAP_SUITE_MAX);
	for (size_t i = 0; i < n; i++)
		if (s[i] < 'a' || s[i] > 'z')
			return error_set(err, EINVAL,
					 "a suite's name is lowercase letters only (bookworm)");
	memcpy(suite, s, n + 1);
	return 0;
}

bool image_bootstrap_suite_is_known(const char *suite)
{
	char script[sizeof(IMAGE_DEBOOTSTRAP_SCRIPTS) + IMAGE_BOOTSTRAP_SUITE_MAX + 2];
	if (snprintf(script, sizeof(script), "%s/%s", IMAGE_DEBOOTSTRAP_SCRIPTS, suite) >=
	    (int)sizeof(script))
		return false;
	return access(script, R_OK) == 0;
}

int image_bootstrap_check_mirror(const char *mirror, struct error *err)
{
	size_t n = mirror ? strlen(mirror) : 0;
	if (n == 0 || n > IMAGE_BOOTSTRAP_MIRROR_MAX)
		return error_set(err, EINVAL, "a mirror's URL has 1 to %d bytes",
				 IMAGE_BOOTSTRAP_MIRROR_MAX);
	const char *host = strncmp(mirror, "http://", 7) == 0	 ? mirror + 7
			   : strncmp(mirror, "https://", 8) == 0 ? mirror + 8
								 : NULL;
	if (!host)
		return error_set(err, EINVAL, "a mirror is an http:// or https:// URL");
	if (!*host || *host == '/')
		return error_set(err, EINVAL, "a mirror's URL names a host");
	for (size_t i = 0; i < n; i++) {
		char c = mirror[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || strchr("-._~:/@%+[]", c);
		if (!ok || c == '\0')
			return error_set(
			    err, EINVAL,
			    "a mirror's URL has letters, digits and - . _ ~ : / @ %% + "
			    "[ ] only");
	}
	return 0;
}

/* ---- the run ---------------------------------------------------------------- */

/* The last IMAGE_BOOTSTRAP_LOG_MAX bytes of the output. */
struct tail {
	char buf[IMAGE_BOOTSTRAP_LOG_MAX];
	size_t len;
};

static void tail_add(struct tail *t, const char *p, size_t n)
{
	if (n >= sizeof(t->buf)) {
		memcpy(t->buf, p + n - sizeof(t->buf), sizeof(t->buf));
		t->len = sizeof(t->buf);
		return;
	}
	if (t->len + n > sizeof(t->buf)) {
		size_t drop = t->len + n - sizeof(t->buf);
		memmove(t->buf, t->buf + drop, t->len - drop);
		t->len -= drop;
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
}

/*
 * The last lines of t (LOG_LINES_SHOWN at most), joined by " | ", into
 * out: one line for an error. Its end is kept; a start that does not fit
 * is cut.
 */
static void tail_lines(const struct tail *t, char *out, size_t size)
{
	size_t end = t->len, start;
	int lines = 0;
	while (end > 0 && (t->buf[end - 1] == '\n' || t->buf[end - 1] == '\r'))
		end--;
	for (start = end; start > 0; start--)
		if (t->buf[start - 1] == '\n' && ++lines == LOG_LINES_SHOWN)
			break;
	size_t newlines = 0;
	for (size_t i = start; i < end; i++)
		newlines += t->buf[i] == '\n';
	while (start < end && (end - start) + 2 * newlines + 1 > size) /* " | " for each '\n' */
		newlines -= t->buf[start++] == '\n';
	size_t o = 0;
	for (size_t i = start; i < end && o + 4 <= size; i++) {
		char c = t->buf[i];
		if (c == '\n') {
			memcpy(out + o, " | ", 3);
			o += 3;
		} else if (c == ' ' || c == '\t') {
			if (o > 0 && out[o - 1] != ' ') /* runs of blanks as one */
				out[o++] = ' ';
		} else if ((unsigned char)c >= 0x20 && c != 0x7f) {
			out[o++] = c;
		}
	}
	out[o] = '\0';
	if (o == 0)
		snprintf(out, size, "(no output)");
}

/*
 * In the child: its own session and mount namespace, killed if agentboxd
 * dies (its next start removes tmp/), then debootstrap. Never returns.
 */
static void child_exec(pid_t parent, int out_fd, char *const argv[])
{
	static char *const envp[] = {
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
	    "DEBIAN_FRONTEND=noninteractive", "HOME=/root", NULL};
	sigset_t none;
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)signal(SIGPIPE, SIG_DFL);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || setsid() < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || devnull < 0 ||
	    dup2(devnull, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(out_fd, STDERR_FILENO) < 0)
		_exit(127);
	(void)syscall(SYS_close_range, 3U, ~0U, 0U);
	execve(argv[0], argv, envp);
	_exit(127);
}

/* Wait for the child pidfd (its output on out_fd) until it ends or the deadline. */
static int run_wait(int pidfd, int out_fd, int64_t deadline_ms, struct tail *t, bool *timed_out)
{
	char buf[4096];
	bool out_open = true;
	for (;;) {
		int64_t left = deadline_ms - wall_clock_ms();
		if (left <= 0) {
			*timed_out = true;
			return 0;
		}
		struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN},
				      {.fd = out_open ? out_fd : -1, .events = POLLIN}};
		int n = poll(p, 2, left > 60000 ? 60000 : (int)left);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		if (p[1].revents) {
			ssize_t got = read(out_fd, buf, sizeof(buf));
			if (got > 0)
				tail_add(t, buf, (size_t)got);
			else if (got == 0 || (errno != EAGAIN && errno != EINTR))
				out_open = false;
		}
		if (p[0].revents & POLLIN) {
			ssize_t got;
			while ((got = read(out_fd, buf, sizeof(buf))) > 0) /* what is left */
				tail_add(t, buf, (size_t)got);
			return 0;
		}
	}
}

/*
 * Run argv (debootstrap): 0 when it exited 0; -EREMOTEIO (its exit) or
 * -ETIMEDOUT (killed) with err ending in its last lines.
 */
static int run_debootstrap(char *const argv[], unsigned timeout_s, struct error *err)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return error_set_errno(err, errno, "a pipe for debootstrap");
	_cleanup_close_ int rd = pipefd[0];
	_cleanup_close_ int wr = pipefd[1];
	if (fcntl(rd, F_SETFL, O_NONBLOCK) < 0)
		return error_set_errno(err, errno, "a pipe for debootstrap");
	int pidfd_raw = -1;
	struct clone_args args = {
	    .flags = CLONE_NEWNS | CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)&pidfd_raw,
	    .exit_signal = 0, /* no SIGCHLD: waitpid(-1) elsewhere never reaps it */
	};
	pid_t parent = getpid();
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		return error_set_errno(err, errno, "starting debootstrap");
	if (pid == 0)
		child_exec(parent, wr, argv);
	_cleanup_close_ int pidfd = pidfd_raw;
	CLOSE_FD(wr);
	_cleanup_free_ struct tail *t = calloc(1, sizeof(*t));
	bool timed_out = false;
	int r = t ? run_wait(pidfd, rd, wall_clock_ms() + (int64_t)timeout_s * 1000, t, &timed_out)
		  : -ENOMEM;
	/* its session, before it is reaped (its pid, the session's id, is not reused) */
	(void)kill(-(pid_t)pid, SIGKILL);
	siginfo_t info = {0};
	while (syscall(SYS_waitid, P_PIDFD, pidfd, &info, WEXITED | __WALL, NULL) < 0)
		if (errno != EINTR)
			return error_set_errno(err, errno, "waiting for debootstrap");
	if (r < 0)
		return error_set_errno(err, -r, "debootstrap's output");
	char last[ERROR_MSG_MAX - 96];
	tail_lines(t, last, sizeof(last));
	if (timed_out)
		return error_set(err, ETIMEDOUT, "debootstrap ran past %u s and was killed: %s",
				 timeout_s, last);
	if (info.si_code == CLD_EXITED && info.si_status == 0)
		return 0;
	if (info.si_code == CLD_EXITED && info.si_status == 127 && t->len == 0)
		return error_set(err, EREMOTEIO, "debootstrap could not be started (%s)",
				 IMAGE_DEBOOTSTRAP);
	return error_set(err, EREMOTEIO, "debootstrap failed (%s %d): %s",
			 info.si_code == CLD_EXITED ? "exit status" : "signal", info.si_status,
			 last);
}

/* ---- the tree ---------------------------------------------------------------- */

/* Remove the files of dir (beneath rootfd) whose names end in suffix ("": all). */
static void remove_files(int rootfd, const char *dir, const char *suffix)
{
	int fd = unpack_open_beneath(rootfd, dir, O_RDONLY | O_DIRECTORY);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		CLOSE_FD(fd);
		return;
	}
	size_t slen = strlen(suffix);
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (de->d_type == DT_REG && n >= slen &&
		    strcmp(de->d_name + n - slen, suffix) == 0 && strcmp(de->d_name, "lock") != 0)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/*
 * What debootstrap leaves that is not the image's: the host's name and
 * resolvers (etc/hostname, etc/resolv.conf: emptied), the .debs it
 * installed and the mirror's indexes (apt-get update fetches them again).
 */
static int scrub_tree(int workfd, struct error *err)
{
	_cleanup_close_ int rootfd =
	    openat(workfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		return error_set_errno(err, errno, "the bootstrapped tree");
	static const char *const emptied[] = {"etc/hostname", "etc/resolv.conf"};
	for (size_t i = 0; i < ELEMENTSOF(emptied); i++) {
		int fd = unpack_open_beneath(rootfd, emptied[i],
					     O_WRONLY | O_TRUNC | O_NOCTTY | O_NONBLOCK);
		if (fd >= 0)
			close(fd);
	}
	remove_files(rootfd, "var/cache/apt/archives", ".deb");
	remove_files(rootfd, "var/lib/apt/lists", "");
	return 0;
}

/* ---- the whole -------------------------------------------------------------- */

/* Check what b asks, and fill the suite, mirror and keyring. */
static int check_request(const struct image_bootstrap *b, char suite[IMAGE_BOOTSTRAP_SUITE_MAX + 1],
			 const char **mirror, const char **keyring, struct error *err)
{
	int r = image_bootstrap_suite(b->image, suite, err);
	if (r < 0)
		return r;
	*mirror = b->mirror ? b->mirror : IMAGE_BOOTSTRAP_MIRROR_DEFAULT;
	if ((r = image_bootstrap_check_mirror(*mirror, err)) < 0)
		return r;
	*keyring = b->keyring ? b->keyring : IMAGE_BOOTSTRAP_KEYRING_DEFAULT;
	if (access(*keyring, R_OK) < 0)
		return error_set_errno(
		    err, errno == ENOENT ? ENOKEY : errno,
		    "the keyring %s (a mirror's Release is never taken unsigned)", *keyring);
	if (access(IMAGE_DEBOOTSTRAP, X_OK) < 0)
		return error_set_errno(err, errno, "%s (Debian's debootstrap package)",
				       IMAGE_DEBOOTSTRAP);
	if (!image_bootstrap_suite_is_known(suite))
		return error_set(err, EINVAL, "debootstrap knows no suite '%s'", suite);
	return 0;
}

/* debootstrap into <work>/rootfs, pack it into <work>/layout, import that. */
static int bootstrap_in(struct image_store *s, const char *work, int workfd,
			const struct image_bootstrap *b, const char *suite, const char *mirror,
			const char *keyring, struct image_info *ret, struct error *err)
{
	char rootfs[PATH_MAX], layout[PATH_MAX], keyring_opt[PATH_MAX + 16];
	char target[8 + IMAGE_BOOTSTRAP_SUITE_MAX];
	if (snprintf(rootfs, sizeof(rootfs), "%s/rootfs", work) >= (int)sizeof(rootfs) ||
	    snprintf(layout, sizeof(layout), "%s/layout", work) >= (int)sizeof(layout) ||
	    snprintf(keyring_opt, sizeof(keyring_opt), "--keyring=%s", keyring) >=
		(int)sizeof(keyring_opt))
		return error_set(err, ENAMETOOLONG, "the store's path is too long");
	snprintf(target, sizeof(target), "%s", suite);
	char *const argv[] = {IMAGE_DEBOOTSTRAP,
			      "--variant=minbase",
			      "--arch=amd64",
			      keyring_opt,
			      target,
			      rootfs,
			      (char *)mirror,
			      NULL};
	unsigned timeout_s = b->timeout_s ? b->timeout_s : IMAGE_BOOTSTRAP_TIMEOUT_S;
	int r = run_debootstrap(argv, timeout_s, err);
	if (r < 0 || (r = scrub_tree(workfd, err)) < 0)
		return r;
	if (mkdirat(workfd, "layout", 0700) < 0)
		return error_set_errno(err, errno, "%s", layout);
	_cleanup_close_ int layoutfd =
	    openat(workfd, "layout", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layoutfd < 0)
		return error_set_errno(err, errno, "%s", layout);
	char created_by[128 + IMAGE_BOOTSTRAP_MIRROR_MAX];
	snprintf(created_by, sizeof(created_by),
		 "agentbox image bootstrap %s (debootstrap --variant=minbase %s %s)", b->image,
		 suite, mirror);
	if ((r = bootstrap_pack(rootfs, layoutfd, created_by, err)) < 0)
		return r;
	/* the tree is packed: away with it before the import unpacks its copy */
	(void)store_remove_all(workfd, "rootfs");
	return image_import(s, layout, b->name ? b->name : b->image, ret, err);
}

int image_bootstrap(struct image_store *s, const struct image_bootstrap *b, struct image_info *ret,
		    struct error *err)
{
	char suite[IMAGE_BOOTSTRAP_SUITE_MAX + 1];
	const char *mirror, *keyring;
	int r = check_request(b, suite, &mirror, &keyring, err);
	if (r < 0)
		return r;
	char work[PATH_MAX];
	if (snprintf(work, sizeof(work), "%s/" LAYOUT_IMAGE_TMP "/bootstrap-XXXXXX",
		     image_store_dir(s)) >= (int)sizeof(work))
		return error_set(err, ENAMETOOLONG, "the store's path is too long");
	if (!mkdtemp(work)) /* mode 0700 */
		return error_set_errno(err, errno, "%s", work);
	_cleanup_close_ int tmpfd = -1;
	_cleanup_close_ int workfd = open(work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (workfd < 0 || store_open_dir(s, LAYOUT_IMAGE_TMP, &tmpfd, err) < 0) {
		r = workfd < 0 ? error_set_errno(err, errno, "%s", work) : -err->code;
		(void)rmdir(work);
		return r;
	}
	struct image_info info;
	r = bootstrap_in(s, work, workfd, b, suite, mirror, keyring, &info, err);
	const char *base = strrchr(work, '/') + 1;
	(void)store_remove_all(tmpfd, base);
	if (r < 0)
		return r;
	if (ret)
		*ret = info;
	return 0;
}
