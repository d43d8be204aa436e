/*
 * cgroup.c - finding the hierarchy, and the backend-independent half of
 * every cgroup operation. See cgroup.h for the contract.
 */
#include "runtime/cgroup.h"

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "base/parse.h"
#include "core/limits.h"
#include "runtime/cgroup-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AGENTBOX_GROUP "agentbox"
/* The leaf a launcher steps into when it must empty its own group (v2). */
#define AGENTBOX_LAUNCHER_GROUP "agentbox.launcher"
/* How long cgroup_destroy() waits for dying tasks before giving up. */
#define DESTROY_WAIT_MS 5000

const char *const cgroup_v1_controllers[CGROUP_V1_NCTRL] = {"memory", "pids", "cpu", "freezer"};

struct mount_cgroup {
	char mountpoint[CGROUP_PATH_MAX];
	char root[CGROUP_PATH_MAX];
};

static bool has_token(const char *list, const char *token)
{
	size_t len = strlen(token);
	for (const char *p = list; p && *p;) {
		if (strncmp(p, token, len) == 0 &&
		    (p[len] == ',' || p[len] == '\0' || p[len] == '\n'))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

/* /proc/self/mountinfo and /proc/self/cgroup, read once per root_open. */
struct proc_tables {
	char mountinfo[32768];
	char cgroup[8192];
};

static int proc_tables_read(struct proc_tables *t)
{
	ssize_t n =
	    read_file_at(AT_FDCWD, "/proc/self/mountinfo", t->mountinfo, sizeof(t->mountinfo));
	if (n < 0)
		return (int)n;
	n = read_file_at(AT_FDCWD, "/proc/self/cgroup", t->cgroup, sizeof(t->cgroup));
	return n < 0 ? (int)n : 0;
}

/* Copy the line starting at p (without its newline) into buf; return the next line. */
static const char *next_line(const char *p, char *buf, size_t size)
{
	size_t len = strcspn(p, "\n");
	size_t copy = len < size - 1 ? len : size - 1;
	memcpy(buf, p, copy);
	buf[copy] = '\0';
	return p[len] ? p + len + 1 : p + len;
}

/*
 * Find a cgroup mount in mountinfo: fstype "cgroup2", or "cgroup" with
 * controller among its super options.
 */
static int find_mount(const struct proc_tables *t, const char *fstype, const char *controller,
		      struct mount_cgroup *ret)
{
	char line[8192];
	for (const char *p = t->mountinfo; *p;) {
		p = next_line(p, line, sizeof(line));
		char root[CGROUP_PATH_MAX], mnt[CGROUP_PATH_MAX];
		/* id parent maj:min root mountpoint ... - fstype source superoptions */
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
			continue;
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char type[64], source[256], opts[2048];
		if (sscanf(sep + 3, "%63s %255s %2047s", type, source, opts) != 3)
			continue;
		if (strcmp(type, fstype) != 0)
			continue;
		if (controller && !has_token(opts, controller))
			continue;
		snprintf(ret->mountpoint, sizeof(ret->mountpoint), "%s", mnt);
		snprintf(ret->root, sizeof(ret->root), "%s", root);
		return 0;
	}
	return -ENOENT;
}

/*
 * Our own cgroup path in the hierarchy holding controller ("" = the v2
 * line "0::/path").
 */
static int own_path(const struct proc_tables *t, const char *controller, char *buf, size_t size)
{
	char line[CGROUP_PATH_MAX + 256];
	for (const char *p = t->cgroup; *p;) {
		p = next_line(p, line, sizeof(line));
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = '\0';
		*c2 = '\0';
		const char *ctrls = c1 + 1; /* "id:controllers:path" */
		bool match = controller[0] ? has_token(ctrls, controller)
					   : (strcmp(line, "0") == 0 && ctrls[0] == '\0');
		if (match) {
			snprintf(buf, size, "%s", c2 + 1);
			return 0;
		}
	}
	return -ENOENT;
}

/* mountpoint + (own path less the mount's root) + "/" + leaf */
static void join_group_path(const struct mount_cgroup *m, const char *own, const char *leaf,
			    char *buf, size_t size)
{
	size_t rootlen = strlen(m->root);
	if (strcmp(m->root, "/") != 0 && strncmp(own, m->root, rootlen) == 0)
		own += rootlen;
	if (strcmp(own, "/") == 0)
		own = "";
	snprintf(buf, size, "%s%s%s%s", m->mountpoint, own, leaf[0] ? "/" : "", leaf);
}

static int open_dir(const char *path, int *ret)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*ret = fd;
	return 0;
}

static struct cgroup_root *root_new(enum cgroup_version v)
{
	struct cgroup_root *root = calloc(1, sizeof(*root));
	if (!root)
		return NULL;
	root->version = v;
	root->ops = v == CGROUP_V2 ? &cgroup_v2_ops : &cgroup_v1_ops;
	root->nfds = v == CGROUP_V2 ? 1 : CGROUP_V1_NCTRL;
	for (int i = 0; i < CGROUP_V1_NCTRL; i++)
		root->fds[i] = -1;
	return root;
}

struct cgroup_root *cgroup_root_free(struct cgroup_root *root)
{
	if (!root)
		return NULL;
	for (int i = 0; i < CGROUP_V1_NCTRL; i++)
		if (root->fds[i] >= 0)
			close(root->fds[i]);
	free(root);
	return NULL;
}

uint64_t cgroup_pids_total_max(void)
{
	char buf[32];
	uint64_t pid_max = 32768; /* the kernel's default, should /proc not say */
	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/pid_max", buf, sizeof(buf)) > 0) {
		buf[strcspn(buf, "\n")] = '\0';
		(void)parse_u64(buf, &pid_max);
	}
	return limits_pids_total(pid_max);
}

/*
 * Bound the pids of all sandboxes together: pids.max of the parent group
 * in dirfd. Best effort (a group we may not write, as a fake tree in the
 * unit tests, keeps what it has): the limit of each sandbox holds anyway.
 */
static void limit_all_pids(int dirfd)
{
	char value[32];
	snprintf(value, sizeof(value), "%llu", (unsigned long long)cgroup_pids_total_max());
	(void)write_file_at(dirfd, "pids.max", value);
}

static int root_open_v1(const struct proc_tables *t, struct cgroup_root **ret, struct error *err)
{
	struct cgroup_root *root = root_new(CGROUP_V1);
	if (!root)
		return error_set(err, ENOMEM, "cgroup: out of memory");
	for (int i = 0; i < CGROUP_V1_NCTRL; i++) {
		const char *c = cgroup_v1_controllers[i];
		struct mount_cgroup m;
		char own[CGROUP_PATH_MAX], path[CGROUP_PATH_MAX + 64];
		int r = find_mount(t, "cgroup", c, &m);
		if (r == 0)
			r = own_path(t, c, own, sizeof(own));
		if (r < 0) {
			cgroup_root_free(root);
			return error_set(err, ENOTSUP,
					 "cgroup v1: the %s controller is not mounted", c);
		}
		join_group_path(&m, own, AGENTBOX_GROUP, path, sizeof(path));
		r = open_dir(path, &root->fds[i]);
		if (r == -ENOENT && (mkdir(path, 0755) == 0 || errno == EEXIST))
			r = open_dir(path, &root->fds[i]);
		if (r < 0) {
			cgroup_root_free(root);
			return error_set_errno(err, -r, "cgroup v1: cannot open %s", path);
		}
		if (i == V1_MEMORY)
			snprintf(root->describe, sizeof(root->describe), "v1 %s", path);
	}
	limit_all_pids(root->fds[V1_PIDS]);
	*ret = root;
	return 0;
}

/* Enable memory, pids and cpu for the children of the group at dirfd. */
static int enable_controllers(struct cgroup_root *root, int dirfd)
{
	int flags = O_WRONLY | O_CLOEXEC | (root->fake_files ? O_CREAT | O_APPEND : 0);
	_cleanup_close_ int fd = openat(dirfd, "cgroup.subtree_control", flags, 0644);
	if (fd < 0)
		return -errno;
	/* One write per controller: a failure names the one that failed. */
	static const char *const ctrls[] = {"+memory", "+pids", "+cpu"};
	for (size_t i = 0; i < ELEMENTSOF(ctrls); i++) {
		int r = write_all(fd, ctrls[i], strlen(ctrls[i]));
		if (r < 0)
			return r;
		if (root->fake_files && write_all(fd, "\n", 1) < 0)
			return -errno;
	}
	return 0;
}

int cgroup_root_open_v2_at(const char *dir, bool fake_files, struct cgroup_root **ret,
			   struct error *err)
{
	struct cgroup_root *root = root_new(CGROUP_V2);
	if (!root)
		return error_set(err, ENOMEM, "cgroup: out of memory");
	root->fake_files = fake_files;
	snprintf(root->describe, sizeof(root->describe), "v2 %s", dir);
	int r = open_dir(dir, &root->fds[0]);
	if (r < 0) {
		cgroup_root_free(root);
		return error_set_errno(err, -r, "cgroup v2: cannot open %s", dir);
	}
	if ((r = enable_controllers(root, root->fds[0])) < 0) {
		cgroup_root_free(root);
		return error_set_errno(err, -r,
				       "cgroup v2: cannot enable memory, pids and cpu under %s "
				       "(is the subtree delegated?)",
				       dir);
	}
	if (!fake_files)
		limit_all_pids(root->fds[0]);
	*ret = root;
	return 0;
}

/* Is token one of the space-separated words of list? */
static bool has_token_space(const char *list, const char *token)
{
	size_t len = strlen(token);
	for (const char *p = list; *p;) {
		if (strncmp(p, token, len) == 0 && (p[len] == ' ' || p[len] == '\0'))
			return true;
		p = strchr(p, ' ');
		if (!p)
			break;
		p++;
	}
	return false;
}

static bool v2_has_controllers(const char *mountpoint)
{
	char path[CGROUP_PATH_MAX + 32], buf[512];
	snprintf(path, sizeof(path), "%s/cgroup.controllers", mountpoint);
	if (read_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return false;
	buf[strcspn(buf, "\n")] = '\0';
	return has_token_space(buf, "memory") && has_token_space(buf, "pids") &&
	       has_token_space(buf, "cpu");
}

/* Are we the only process in the group at dirfd? */
static bool is_sole_process(int dirfd)
{
	char buf[256], self[32];
	if (read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf)) < 0)
		return false;
	snprintf(self, sizeof(self), "%d\n", (int)getpid());
	return strcmp(buf, self) == 0;
}

/*
 * Make the group at dir pass memory, pids and cpu down to its children.
 * v2 forbids that while processes live in it (except at the root). If we
 * are its only process, we step into a leaf of it first, as a delegated
 * systemd service must.
 */
static int delegate_below(const char *dir)
{
	/* A group not handed memory, pids and cpu (a systemd unit without
	 * Delegate=yes) cannot hold sandboxes: leave it untouched rather than
	 * half-enable it and step into a leaf of it. */
	if (!v2_has_controllers(dir))
		return -ENOTSUP;
	_cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct cgroup_root plain = {.fake_files = false};
	int r = enable_controllers(&plain, fd);
	if (r != -EBUSY || !is_sole_process(fd))
		return r;
	if (mkdirat(fd, AGENTBOX_LAUNCHER_GROUP, 0755) < 0 && errno != EEXIST)
		return -errno;
	_cleanup_close_ int leaf =
	    openat(fd, AGENTBOX_LAUNCHER_GROUP, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (leaf < 0 || (r = write_file_at(leaf, "cgroup.procs", pid)) < 0)
		return leaf < 0 ? -errno : r;
	return enable_controllers(&plain, fd);
}

static int open_v2_below(const char *dir, struct cgroup_root **ret, struct error *err)
{
	char path[CGROUP_PATH_MAX + 128];
	int r = delegate_below(dir);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/%s", dir, AGENTBOX_GROUP);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return cgroup_root_open_v2_at(path, false, ret, err);
}

/*
 * Where sandbox groups live on v2: the first of
 *  1. $AGENTBOX_CGROUP_ROOT/agentbox, below a group the caller delegated;
 *  2. <our own group>/agentbox, when our group can pass controllers down
 *     (the root, or a group of ours alone, such as a Delegate=yes service);
 *  3. <the top of the hierarchy>/agentbox, as container engines do when
 *     they manage cgroups themselves.
 */
static int root_open_v2(const struct proc_tables *t, struct cgroup_root **ret, struct error *err)
{
	struct mount_cgroup m;
	char own[CGROUP_PATH_MAX], base[CGROUP_PATH_MAX + 64];
	const char *forced = getenv("AGENTBOX_CGROUP_ROOT");
	if (forced && forced[0] == '/') {
		int r = open_v2_below(forced, ret, err);
		if (r < 0 && !error_is_set(err))
			error_set_errno(err, -r, "cgroup v2: cannot use AGENTBOX_CGROUP_ROOT=%s",
					forced);
		return r;
	}
	if (find_mount(t, "cgroup2", NULL, &m) < 0 || own_path(t, "", own, sizeof(own)) < 0)
		return error_set(err, ENOTSUP, "cgroup v2: not mounted");
	join_group_path(&m, own, "", base, sizeof(base));
	int r = open_v2_below(base, ret, err);
	if (r == 0 || error_is_set(err) || strcmp(base, m.mountpoint) == 0)
		goto out;
	r = open_v2_below(m.mountpoint, ret, err);
out:
	if (r < 0 && !error_is_set(err))
		error_set_errno(err, -r,
				"cgroup v2: cannot delegate memory, pids and cpu below %s%s%s; "
				"set AGENTBOX_CGROUP_ROOT to a delegated group",
				base, strcmp(base, m.mountpoint) ? " or " : "",
				strcmp(base, m.mountpoint) ? m.mountpoint : "");
	return r;
}

int cgroup_root_open(struct cgroup_root **ret, struct error *err)
{
	_cleanup_free_ struct proc_tables *t = malloc(sizeof(*t));
	if (!t)
		return error_set(err, ENOMEM, "cgroup: out of memory");
	int r = proc_tables_read(t);
	if (r < 0)
		return error_set_errno(err, -r, "cgroup: cannot read /proc/self");
	const char *force = getenv("AGENTBOX_CGROUP");
	if (force && strcmp(force, "v1") == 0)
		return root_open_v1(t, ret, err);
	if (force && strcmp(force, "v2") == 0)
		return root_open_v2(t, ret, err);
	struct mount_cgroup m;
	if (find_mount(t, "cgroup2", NULL, &m) == 0 && v2_has_controllers(m.mountpoint))
		return root_open_v2(t, ret, err);
	return root_open_v1(t, ret, err);
}

enum cgroup_version cgroup_root_version(const struct cgroup_root *root)
{
	return root->version;
}

const char *cgroup_root_describe(const struct cgroup_root *root)
{
	return root->describe;
}

int cgroup_root_for_each(struct cgroup_root *root, int (*fn)(const char *name, void *data),
			 void *data)
{
	int fd = openat(root->fds[0], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		r = fn(de->d_name, data);
	}
	closedir(d);
	return r;
}

static struct cgroup *cgroup_new(struct cgroup_root *root, const char *name)
{
	if (strlen(name) >= CGROUP_NAME_MAX || strchr(name, '/') || name[0] == '.')
		return NULL;
	struct cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return NULL;
	cg->root = root;
	snprintf(cg->name, sizeof(cg->name), "%s", name);
	for (int i = 0; i < CGROUP_V1_NCTRL; i++)
		cg->fds[i] = -1;
	return cg;
}

struct cgroup *cgroup_free(struct cgroup *cg)
{
	if (!cg)
		return NULL;
	for (int i = 0; i < CGROUP_V1_NCTRL; i++)
		if (cg->fds[i] >= 0)
			close(cg->fds[i]);
	free(cg);
	return NULL;
}

static int open_group_fds(struct cgroup *cg)
{
	for (int i = 0; i < cg->root->nfds; i++) {
		cg->fds[i] = openat(cg->root->fds[i], cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cg->fds[i] < 0)
			return -errno;
	}
	return 0;
}

int cgroup_open(struct cgroup_root *root, const char *name, struct cgroup **ret)
{
	struct cgroup *cg = cgroup_new(root, name);
	if (!cg)
		return -EINVAL;
	int r = open_group_fds(cg);
	if (r < 0) {
		cgroup_free(cg);
		return r;
	}
	*ret = cg;
	return 0;
}

int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *limits,
		  struct cgroup **ret, struct error *err)
{
	struct cgroup *old;
	if (cgroup_open(root, name, &old) == 0) {
		int r = cgroup_destroy(old, err);
		if (r < 0)
			return error_prefix(err, "cgroup: reclaiming a leftover group: ");
	}
	struct cgroup *cg = cgroup_new(root, name);
	if (!cg)
		return error_set(err, EINVAL, "cgroup: bad group name '%s'", name);
	for (int i = 0; i < root->nfds; i++) {
		if (mkdirat(root->fds[i], name, 0755) < 0) {
			int r = -errno;
			cgroup_destroy(cg, NULL);
			return error_set_errno(err, -r, "cgroup: cannot create group %s", name);
		}
	}
	int r = open_group_fds(cg);
	if (r == 0)
		r = root->ops->create(cg, limits, err);
	else
		error_set_errno(err, -r, "cgroup: cannot open group %s", name);
	if (r < 0) {
		cgroup_destroy(cg, NULL);
		return r;
	}
	*ret = cg;
	return 0;
}

int cgroup_write(const struct cgroup *cg, int fd, const char *file, const char *s)
{
	if (cg->root->fake_files)
		return create_file_at(fd, file, s, 0644);
	return write_file_at(fd, file, s);
}

int cgroup_attach(struct cgroup *cg, pid_t pid, struct error *err)
{
	int r = cg->root->ops->attach(cg, pid);
	if (r < 0)
		return error_set_errno(err, -r, "cgroup: cannot move pid %d into %s", (int)pid,
				       cg->name);
	return 0;
}

int cgroup_join_prepare(struct cgroup *cg, struct cgroup_join *j)
{
	*j = (struct cgroup_join){.n = 0};
	if (cg->root->version == CGROUP_V2)
		return 0;
	for (int i = 0; i < cg->root->nfds; i++) {
		int fd = openat(cg->fds[i], "tasks", O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			int r = -errno;
			cgroup_join_release(j);
			return r;
		}
		j->fds[j->n++] = fd;
	}
	return 0;
}

int cgroup_join_self(struct cgroup_join *j)
{
	int r = 0;
	for (int i = 0; i < j->n; i++)
		if (r == 0 && write(j->fds[i], "0", 1) != 1)
			r = -errno;
	cgroup_join_release(j);
	return r;
}

void cgroup_join_release(struct cgroup_join *j)
{
	for (int i = 0; i < j->n; i++)
		close(j->fds[i]);
	j->n = 0;
}

int cgroup_clone_fd(const struct cgroup *cg)
{
	return cg->root->version == CGROUP_V2 ? cg->fds[0] : -1;
}

int cgroup_read_stats(struct cgroup *cg, struct cgroup_stats *ret)
{
	return cg->root->ops->stats(cg, ret);
}

bool cgroup_is_empty(struct cgroup *cg)
{
	return cg->root->ops->is_empty(cg);
}

int cgroup_kill(struct cgroup *cg)
{
	return cg->root->ops->kill(cg);
}

int cgroup_freeze(struct cgroup *cg, bool frozen)
{
	return cg->root->ops->freeze(cg, frozen);
}

bool cgroup_is_frozen(struct cgroup *cg)
{
	return cg->root->ops->is_frozen(cg);
}

int cgroup_kill_procs(int dirfd)
{
	char buf[16384];
	ssize_t n = read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	for (char *p = buf; *p;) {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0)
			kill((pid_t)pid, SIGKILL);
		p = end;
		while (*p == '\n')
			p++;
	}
	return 0;
}

int cgroup_destroy(struct cgroup *cg, struct error *err)
{
	if (!cg)
		return 0;
	int r = 0;
	/* Polls start fast: a group is usually empty within a millisecond. */
	for (long waited = 0, step = 1;; waited += step, step = step < 50 ? step * 2 : 50) {
		if (!cgroup_is_empty(cg))
			cgroup_kill(cg);
		r = cg->root->ops->remove(cg);
		if (r != -EBUSY || waited >= DESTROY_WAIT_MS)
			break;
		sleep_ms(step);
	}
	if (r < 0)
		error_set_errno(err, -r, "cgroup: cannot remove group %s", cg->name);
	cgroup_free(cg);
	return r;
}
