/*
 * cp-tree.c - cp -r (cp.h): a directory copied file by file through the
 * files API, walked here (a local directory, with openat) or there (a
 * sandbox's, with GET files?list=1). The API has neither an archive nor a
 * directory route, and a sandbox's image need not hold tar, so nothing
 * runs in the sandbox: each file is one PUT or GET as cp moves it, and a
 * directory is made with cp_sandbox_mkdir().
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/cp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes of a sandbox path (the API's limit). */
#define CP_TREE_PATH_MAX 1024

struct walk {
	struct client *c;
	char id[CLIENT_ID_MAX + 1];
	size_t entries;
};

static int count_entry(struct walk *w)
{
	if (++w->entries > CP_TREE_ENTRIES_MAX)
		return cli_fail("cp: more than %d entries: cp -r stops there", CP_TREE_ENTRIES_MAX);
	return 0;
}

/* A line on stderr, escaped as every message is (cli_fail()); the copy goes on. */
static void left_out(const char *path)
{
	(void)cli_fail("cp: %s: left out: not a regular file or directory", path);
}

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

/* ---- into the sandbox --------------------------------------------------------- */

static int walk_in(struct walk *w, int dirfd, const char *local, const char *remote, int depth)
{
	if (depth > CP_TREE_DEPTH_MAX)
		return cli_fail("cp: %s: more than %d levels deep", local, CP_TREE_DEPTH_MAX);
	if (strlen(remote) > CP_TREE_PATH_MAX)
		return cli_fail("cp: %s: the sandbox path is longer than %d bytes", remote,
				CP_TREE_PATH_MAX);
	struct error err = {0};
	if (cp_sandbox_mkdir(w->c, w->id, remote, &err) < 0)
		return cli_fail("cp: %s:%s: %s", w->id, remote, err.msg);
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return cli_fail("cp: %s: %s", local, strerror(errno));
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((rc = count_entry(w)) != 0)
			break;
		_cleanup_free_ char *lp = join(local, de->d_name), *rp = join(remote, de->d_name);
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
			struct cp_remote rem = {.path = rp};
			memcpy(rem.id, w->id, sizeof(rem.id));
			rc = cp_file_in(w->c, lp, &rem);
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
	struct walk w = {.c = c};
	memcpy(w.id, rem->id, sizeof(w.id));
	return walk_in(&w, fd, local, dest, 0);
}

/* ---- out of the sandbox ---------------------------------------------------------- */

static int walk_out(struct walk *w, const char *remote, const char *local, int depth)
{
	if (depth > CP_TREE_DEPTH_MAX)
		return cli_fail("cp: %s:%s: more than %d levels deep", w->id, remote,
				CP_TREE_DEPTH_MAX);
	struct error err = {0};
	_cleanup_free_ char *base = NULL, *target = NULL;
	if (client_sandbox_file_target(w->id, remote, &base, &err) < 0)
		return cli_fail("cp: %s", err.msg);
	if (asprintf(&target, "%s&list=1", base) < 0) {
		target = NULL;
		return cli_fail("cp: out of memory");
	}
	_cleanup_json_ json_t *answer = NULL;
	if (client_call(w->c, "GET", target, NULL, &answer, &err) < 0)
		return cli_fail("cp: %s:%s: %s", w->id, remote, err.msg);
	json_t *entries = json_object_get(answer, "entries");
	if (!json_is_array(entries))
		return cli_fail("cp: agentboxd's answer has no entries");
	if (json_is_true(json_object_get(answer, "truncated")))
		return cli_fail("cp: %s:%s holds more entries than agentboxd lists", w->id, remote);
	mode_t mask = umask(0);
	umask(mask);
	if (mkdir(local, 0777 & ~mask) < 0 && errno != EEXIST)
		return cli_fail("cp: %s: %s", local, strerror(errno));
	struct stat st;
	if (lstat(local, &st) < 0 || !S_ISDIR(st.st_mode))
		return cli_fail("cp: %s: not a directory", local);
	size_t i;
	json_t *e;
	json_array_foreach(entries, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *type = json_string_value(json_object_get(e, "type"));
		if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 ||
		    strcmp(name, "..") == 0)
			return cli_fail("cp: agentboxd sent an entry that is not a name");
		int rc = count_entry(w);
		if (rc)
			return rc;
		_cleanup_free_ char *rp = join(remote, name), *lp = join(local, name);
		if (!rp || !lp)
			return cli_fail("cp: out of memory");
		if (type && strcmp(type, "dir") == 0) {
			rc = walk_out(w, rp, lp, depth + 1);
		} else if (type && strcmp(type, "file") == 0) {
			struct cp_remote rem = {.path = rp};
			memcpy(rem.id, w->id, sizeof(rem.id));
			rc = cp_file_out(w->c, &rem, lp);
		} else {
			left_out(lp);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int cp_tree_out(struct client *c, const struct cp_remote *rem, const char *local)
{
	struct stat st;
	size_t n = strlen(local);
	bool into = local[n - 1] == '/' || (stat(local, &st) == 0 && S_ISDIR(st.st_mode));
	_cleanup_free_ char *dest = tree_dest(local, rem->path, into);
	if (!dest)
		return cli_fail("cp: out of memory");
	struct walk w = {.c = c};
	memcpy(w.id, rem->id, sizeof(w.id));
	return walk_out(&w, rem->path, dest, 0);
}
