/*
 * cp-tree.c - cp -r (cp.h): a directory as one tar through the files API
 * (GET and PUT /v1/sandboxes/ID/files?path=PATH&format=tar). agentbox is
 * static and links no libarchive, so the host's tar makes and unpacks it:
 *
 *   in:  the local tree is walked here (regular files and directories;
 *        anything else is left out with a line on stderr), and the list
 *        of what it holds given to `tar -c --no-recursion --null -T -`,
 *        whose tar is spooled to an unnamed temporary file (the request
 *        needs its Content-Length), then sent; agentboxd unpacks it into
 *        PATH.
 *   out: agentboxd's tar, named from PATH's own name, goes as it arrives
 *        through tar_check (cli/tar-check.h: only regular files and
 *        directories with relative names, no "..") into `tar -x
 *        --strip-components=1 -C DEST`; GNU tar itself also drops a
 *        leading '/' and refuses a ".." member.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/cp.h"
#include "cli/upload.h"
#include "cli/tar-check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <paths.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Bytes of a sandbox path (the API's limit). */
#define CP_TREE_PATH_MAX 1024
/* The largest tar agentboxd takes or gives (API_FILES_TAR_BYTES_MAX). */
#define CP_TREE_TAR_MAX (UINT64_C(256) << 20)

/* "dir/name" into a malloc'd string, or NULL. */
static char *join(const char *dir, const char *name)
{
	char *p;
	size_t n = strlen(dir);
	if (asprintf(&p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return p;
}

/* Where a tree goes: dest itself, or base's name inside it (into_dir). */
static char *tree_dest(const char *dest, const char *base, bool into_dir)
{
	if (!into_dir)
		return strdup(dest);
	_cleanup_free_ char *copy = strdup(base);
	if (!copy)
		return NULL;
	size_t n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	const char *slash = strrchr(copy, '/');
	const char *name = slash ? slash + 1 : copy;
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return strdup(dest); /* "cp -r . ID:/dir/": its contents, into /dir */
	return join(dest, name);
}

int cp_sandbox_mkdir(struct client *c, const char *id, const char *path, struct error *err)
{
	char probe[CP_TREE_PATH_MAX + 64];
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	snprintf(probe, sizeof(probe), "%.*s/.agentbox-mkdir-%ld-%lld", (int)n, path,
		 (long)getpid(), (long long)wall_clock_ms());
	_cleanup_free_ char *target = NULL;
	int r = client_sandbox_file_target(id, probe, &target, err);
	if (r < 0)
		return r;
	struct client_request req = {.method = "PUT",
				     .target = target,
				     .body = "",
				     .content_type = "application/octet-stream"};
	if ((r = client_request(c, &req, NULL, err)) < 0)
		return r;
	return client_call(c, "DELETE", target, NULL, NULL, err);
}

/* An unnamed temporary file ($TMPDIR, else /tmp). -1 with errno. */
static int temp_file(void)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = _PATH_TMP;
	return open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

/* The target of the files route for rem's id and path, with &format=tar. */
static int tar_target(const char *id, const char *path, char **ret)
{
	struct error err = {0};
	_cleanup_free_ char *base = NULL;
	if (client_sandbox_file_target(id, path, &base, &err) < 0)
		return cli_fail("cp: %s", err.msg);
	if (asprintf(ret, "%s&format=tar", base) < 0) {
		*ret = NULL;
		return cli_fail("cp: out of memory");
	}
	return 0;
}

/*
 * Run the host's tar with argv, stdin and stdout as given (-1: ours), in
 * *ret_pid. 0, or EXIT_NO_TAR / EXIT_AGENTBOX with the line printed.
 */
static int tar_start(char *const argv[], int in, int out, pid_t *ret_pid)
{
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return cli_fail("cp: pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(report[0]);
		close(report[1]);
		return cli_fail("cp: fork: %s", strerror(e));
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		if ((in >= 0 && dup2(in, STDIN_FILENO) < 0) ||
		    (out >= 0 && dup2(out, STDOUT_FILENO) < 0))
			_exit(126);
		execvp("tar", argv);
		int e = errno;
		(void)!write(report[1], &e, sizeof(e));
		_exit(127);
	}
	close(report[1]);
	int e = 0;
	ssize_t n = read(report[0], &e, sizeof(e));
	close(report[0]);
	if (n == (ssize_t)sizeof(e)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (e == ENOENT) {
			(void)cli_fail("cp: cp -r needs the host's tar (GNU tar), and there "
				       "is no tar in PATH");
			return CP_EXIT_NO_TAR;
		}
		return cli_fail("cp: cannot run tar: %s", strerror(e));
	}
	*ret_pid = pid;
	return 0;
}

/* Wait for tar; 0 when it succeeded, else (a line unless quiet) EXIT_AGENTBOX. */
static int tar_wait(pid_t pid, bool quiet)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return cli_fail("cp: waitpid tar: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (quiet)
		return EXIT_AGENTBOX;
	if (WIFEXITED(status))
		return cli_fail("cp: tar failed (exit status %d)", WEXITSTATUS(status));
	return cli_fail("cp: tar was killed by signal %d", WTERMSIG(status));
}

/* ---- into the sandbox --------------------------------------------------------- */

struct walk {
	int list; /* the names for tar, NUL-terminated, relative to the top ("./a/b") */
	size_t entries;
};

/* A line on stderr, escaped as every message is (cli_fail()); the copy goes on. */
static void left_out(const char *path)
{
	(void)cli_fail("cp: %s: left out: not a regular file or directory", path);
}

static int list_name(struct walk *w, const char *rel)
{
	if (++w->entries > CP_TREE_ENTRIES_MAX)
		return cli_fail("cp: more than %d entries: cp -r stops there", CP_TREE_ENTRIES_MAX);
	int r = write_all(w->list, rel, strlen(rel) + 1);
	if (r < 0)
		return cli_fail("cp: writing the list of files: %s", strerror(-r));
	return 0;
}

/* Directory dirfd (local, rel under the top): its name, then what it holds. */
static int walk_in(struct walk *w, int dirfd, const char *local, const char *rel, int depth)
{
	if (depth > CP_TREE_DEPTH_MAX)
		return cli_fail("cp: %s: more than %d levels deep", local, CP_TREE_DEPTH_MAX);
	if (strlen(rel) > CP_TREE_PATH_MAX)
		return cli_fail("cp: %s: the sandbox path would be longer than %d bytes", local,
				CP_TREE_PATH_MAX);
	int rc = list_name(w, rel);
	if (rc)
		return rc;
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return cli_fail("cp: %s: %s", local, strerror(errno));
	}
	struct dirent *de;
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		_cleanup_free_ char *lp = join(local, de->d_name), *rp = join(rel, de->d_name);
		if (!lp || !rp) {
			rc = cli_fail("cp: out of memory");
			break;
		}
		struct stat st;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = cli_fail("cp: %s: %s", lp, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int sub = openat(
			    dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				rc = cli_fail("cp: %s: %s", lp, strerror(errno));
			else
				rc = walk_in(w, sub, lp, rp, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			if (strlen(rp) > CP_TREE_PATH_MAX)
				rc = cli_fail("cp: %s: the sandbox path would be longer than %d "
					      "bytes",
					      lp, CP_TREE_PATH_MAX);
			else
				rc = list_name(w, rp);
		} else {
			left_out(lp);
		}
	}
	if (rc == 0 && errno != 0)
		rc = cli_fail("cp: %s: %s", local, strerror(errno));
	closedir(d);
	return rc;
}

int cp_tree_in(struct client *c, const char *local, const struct cp_remote *rem)
{
	_cleanup_close_ int fd = open(local, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cli_fail("cp: %s: %s", local,
				errno == ENOTDIR ? "not a directory (cp without -r copies a file)"
						 : strerror(errno));
	size_t n = strlen(rem->path);
	_cleanup_free_ char *dest = tree_dest(rem->path, local, rem->path[n - 1] == '/');
	if (!dest)
		return cli_fail("cp: out of memory");
	if (strlen(dest) > CP_TREE_PATH_MAX)
		return cli_fail("cp: the sandbox path is longer than %d bytes", CP_TREE_PATH_MAX);
	_cleanup_free_ char *target = NULL;
	int rc = tar_target(rem->id, dest, &target);
	if (rc)
		return rc;

	/* what goes: the list of names, for tar */
	_cleanup_close_ int list = temp_file();
	_cleanup_close_ int spool = temp_file();
	if (list < 0 || spool < 0)
		return cli_fail("cp: a temporary file: %s", strerror(errno));
	struct walk w = {.list = list};
	if ((rc = walk_in(&w, fd, local, ".", 0)) != 0)
		return rc;
	if (lseek(list, 0, SEEK_SET) < 0)
		return cli_fail("cp: the list of files: %s", strerror(errno));

	/* the tar, made by the host's tar from the list */
	char *argv[] = {"tar",	  "-c", "-f", "-", "-C", (char *)local, "--no-recursion",
			"--null", "-T", "-",  NULL};
	pid_t pid;
	if ((rc = tar_start(argv, list, spool, &pid)) != 0 || (rc = tar_wait(pid, false)) != 0)
		return rc;
	struct stat st;
	if (fstat(spool, &st) < 0 || lseek(spool, 0, SEEK_SET) < 0)
		return cli_fail("cp: the tar: %s", strerror(errno));
	if ((uint64_t)st.st_size > CP_TREE_TAR_MAX)
		return cli_fail("cp: %s makes a tar of more than %" PRIu64
				" MiB, the most agentboxd takes",
				local, CP_TREE_TAR_MAX >> 20);

	struct cli_upload u = {.fd = spool, .name = "the tar", .size = (uint64_t)st.st_size};
	struct client_request req = {
	    .method = "PUT", .target = target, .content_type = "application/x-tar"};
	cli_upload_body(&req, &u);
	struct error err = {0};
	_cleanup_json_ json_t *answer = NULL;
	if (client_request(c, &req, &answer, &err) < 0)
		return cli_fail("cp: %s:%s: %s", rem->id, dest, err.msg);
	return 0;
}

/* ---- out of the sandbox ---------------------------------------------------------- */

struct download {
	char *dest;
	int fd; /* tar's stdin, once tar runs: -1 before */
	pid_t pid;
	int no_tar; /* tar could not be run: tar_start()'s exit status */
	uint64_t got;
	const struct cp_remote *rem;
	struct tar_check check;
};

/*
 * Make dest and run tar on the first piece of a 2xx body (an error answer
 * makes and runs nothing), its stdin a pipe from us: the members are
 * named from PATH's own name, which is dest.
 */
static int start_extract(struct download *d, struct error *err)
{
	mode_t mask = umask(0);
	umask(mask);
	struct stat st;
	if (mkdir(d->dest, 0777 & ~mask) < 0 && errno != EEXIST)
		return error_set_errno(err, errno, "%s", d->dest);
	if (lstat(d->dest, &st) < 0 || !S_ISDIR(st.st_mode))
		return error_set(err, ENOTDIR, "%s: not a directory", d->dest);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return error_set_errno(err, errno, "pipe");
	char *argv[] = {"tar",
			"-x",
			"-f",
			"-",
			"-C",
			d->dest,
			"--strip-components=1",
			"--no-same-owner",
			"--no-same-permissions",
			"--no-overwrite-dir",
			"-m",
			NULL};
	int rc = tar_start(argv, p[0], -1, &d->pid);
	close(p[0]);
	if (rc) {
		close(p[1]);
		d->no_tar = rc;
		return error_set(err, ENOENT, "tar");
	}
	d->fd = p[1];
	return 0;
}

/* X-Agentbox-Skipped (the API's API_FILES_TAR_SKIPPED_HEADER): entries left out. */
#define SKIPPED_HEADER "X-Agentbox-Skipped"

static int tar_piece(const struct http_response *res, const char *buf, size_t len, void *data,
		     struct error *err)
{
	struct download *d = data;
	if (d->fd < 0) {
		int r = start_extract(d, err);
		if (r < 0)
			return r;
		const char *skipped = http_response_header(res, SKIPPED_HEADER);
		if (skipped && strcmp(skipped, "0") != 0)
			(void)cli_fail("cp: %s:%s: %s entries left out: not regular files or "
				       "directories",
				       d->rem->id, d->rem->path, skipped);
	}
	if (len > CP_TREE_TAR_MAX - d->got)
		return error_set(err, EFBIG, "agentboxd sent more than %" PRIu64 " MiB",
				 CP_TREE_TAR_MAX >> 20);
	d->got += len;
	int r = tar_check_feed(&d->check, buf, len, err);
	if (r < 0)
		return r;
	if ((r = write_all(d->fd, buf, len)) < 0)
		return error_set_errno(err, -r, "writing to tar");
	return 0;
}

int cp_tree_out(struct client *c, const struct cp_remote *rem, const char *local)
{
	struct stat st;
	size_t n = strlen(local);
	bool into = local[n - 1] == '/' || (stat(local, &st) == 0 && S_ISDIR(st.st_mode));
	_cleanup_free_ char *dest = tree_dest(local, rem->path, into);
	_cleanup_free_ char *target = NULL;
	if (!dest)
		return cli_fail("cp: out of memory");
	int rc = tar_target(rem->id, rem->path, &target);
	if (rc)
		return rc;

	/* tar may end first: a write then fails with EPIPE, not the signal */
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &old);
	struct download d = {.dest = dest, .fd = -1, .rem = rem};
	tar_check_init(&d.check);
	struct client_request req = {
	    .method = "GET",
	    .target = target,
	    .accept = "application/x-tar",
	    .on_body = tar_piece,
	    .data = &d,
	};
	struct error err = {0};
	int r = client_request(c, &req, NULL, &err);
	bool whole = r == 0 && tar_check_done(&d.check);
	int trc = 0;
	if (d.fd >= 0) {
		close(d.fd);
		trc = tar_wait(d.pid, !whole); /* a tar cut short: our reason, not tar's */
	}
	sigaction(SIGPIPE, &old, NULL);
	if (d.no_tar)
		return d.no_tar; /* said */
	if (r < 0)
		return cli_fail("cp: %s:%s: %s", rem->id, rem->path, err.msg);
	if (!whole)
		return cli_fail("cp: %s:%s: agentboxd's tar ended early", rem->id, rem->path);
	return trc;
}
