/*
 * cgroup-v2.c - the unified hierarchy: one directory per group.
 *
 * Limits: memory.max, memory.swap.max = 0, memory.oom.group = 1 (an OOM
 * kill takes the whole sandbox, not one random process; 0 when the
 * limits ask for oom_kills_one, as serve mode does), pids.max and
 * cpu.max. OOM kills come from the "oom_kill" line of memory.events.
 * cgroup.kill (Linux 5.14) kills everything at once; before it, the group
 * is frozen and its processes killed one by one.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "runtime/cgroup-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CPU_PERIOD_US 100000ULL

static int v2_create(struct cgroup *cg, const struct cgroup_limits *l, struct error *err)
{
	char buf[64];
	int fd = cg->fds[0], r;
	snprintf(buf, sizeof(buf), "%" PRIu64, l->memory_bytes);
	if ((r = cgroup_write(cg, fd, "memory.max", buf)) < 0)
		return error_set_errno(err, -r, "cgroup v2: cannot set memory.max");
	/* absent when the kernel has no swap accounting: then there is no swap */
	r = cgroup_write(cg, fd, "memory.swap.max", "0");
	if (r < 0 && r != -ENOENT)
		return error_set_errno(err, -r, "cgroup v2: cannot set memory.swap.max");
	if ((r = cgroup_write(cg, fd, "memory.oom.group", l->oom_kills_one ? "0" : "1")) < 0)
		return error_set_errno(err, -r, "cgroup v2: cannot set memory.oom.group");
	snprintf(buf, sizeof(buf), "%" PRIu64, l->pids);
	if ((r = cgroup_write(cg, fd, "pids.max", buf)) < 0)
		return error_set_errno(err, -r, "cgroup v2: cannot set pids.max");
	snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64,
		 (uint64_t)(l->cpu_milli * CPU_PERIOD_US / 1000), (uint64_t)CPU_PERIOD_US);
	if ((r = cgroup_write(cg, fd, "cpu.max", buf)) < 0)
		return error_set_errno(err, -r, "cgroup v2: cannot set cpu.max");
	return 0;
}

static int v2_attach(struct cgroup *cg, pid_t pid)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	return cgroup_write(cg, cg->fds[0], "cgroup.procs", buf);
}

static int v2_stats(struct cgroup *cg, struct cgroup_stats *ret)
{
	char buf[1024];
	struct cgroup_stats s = {0};
	ssize_t n = read_file_at(cg->fds[0], "memory.events", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	int r = keyed_u64(buf, "oom_kill", &s.oom_kills);
	if (r < 0)
		return r;
	(void)read_u64_at(cg->fds[0], "memory.peak", &s.peak_memory_bytes); /* Linux 5.19 */
	*ret = s;
	return 0;
}

static bool v2_is_empty(struct cgroup *cg)
{
	char buf[256];
	uint64_t populated;
	if (read_file_at(cg->fds[0], "cgroup.events", buf, sizeof(buf)) < 0 ||
	    keyed_u64(buf, "populated", &populated) < 0)
		return true; /* the group is gone */
	return populated == 0;
}

static int v2_freeze(struct cgroup *cg, bool frozen)
{
	return cgroup_write(cg, cg->fds[0], "cgroup.freeze", frozen ? "1" : "0");
}

static bool v2_is_frozen(struct cgroup *cg)
{
	char buf[256];
	uint64_t frozen;
	if (read_file_at(cg->fds[0], "cgroup.events", buf, sizeof(buf)) < 0 ||
	    keyed_u64(buf, "frozen", &frozen) < 0)
		return false;
	return frozen == 1;
}

static int v2_kill(struct cgroup *cg)
{
	int r = cgroup_write(cg, cg->fds[0], "cgroup.kill", "1");
	if (r != -ENOENT)
		return r;
	(void)v2_freeze(cg, true);
	(void)cgroup_kill_procs(cg->fds[0]);
	return v2_freeze(cg, false);
}

/* Fake trees hold regular files, which a real cgroupfs rmdir ignores. */
static void remove_fake_files(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_type == DT_REG)
			unlinkat(dirfd, de->d_name, 0);
	closedir(d);
}

static int v2_remove(struct cgroup *cg)
{
	if (cg->root->fake_files && cg->fds[0] >= 0)
		remove_fake_files(cg->fds[0]);
	if (unlinkat(cg->root->fds[0], cg->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

const struct cgroup_ops cgroup_v2_ops = {
    .create = v2_create,
    .attach = v2_attach,
    .stats = v2_stats,
    .is_empty = v2_is_empty,
    .kill = v2_kill,
    .freeze = v2_freeze,
    .is_frozen = v2_is_frozen,
    .remove = v2_remove,
};
