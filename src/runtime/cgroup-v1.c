/*
 * cgroup-v1.c - the legacy hierarchies: one directory per controller.
 *
 * Limits: memory.limit_in_bytes and memory.memsw.limit_in_bytes (swap 0),
 * pids.max, cpu.cfs_quota_us over a 100 ms period. OOM kills come from the
 * "oom_kill" line of memory.oom_control (Linux 4.13 and later). Killing
 * freezes the group first so nothing can fork while it is being emptied.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "runtime/cgroup-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CPU_PERIOD_US 100000ULL

static int write_u64(struct cgroup *cg, int idx, const char *file, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cgroup_write(cg, cg->fds[idx], file, buf);
}

static int v1_create(struct cgroup *cg, const struct cgroup_limits *l, struct error *err)
{
	int r;
	if ((r = write_u64(cg, V1_MEMORY, "memory.limit_in_bytes", l->memory_bytes)) < 0)
		return error_set_errno(err, -r, "cgroup v1: cannot set memory.limit_in_bytes");
	/* memory+swap equal to memory means no swap; absent without swap accounting */
	r = write_u64(cg, V1_MEMORY, "memory.memsw.limit_in_bytes", l->memory_bytes);
	if (r < 0 && r != -ENOENT)
		return error_set_errno(err, -r,
				       "cgroup v1: cannot set memory.memsw.limit_in_bytes");
	(void)cgroup_write(cg, cg->fds[V1_MEMORY], "memory.swappiness", "0");
	if ((r = write_u64(cg, V1_PIDS, "pids.max", l->pids)) < 0)
		return error_set_errno(err, -r, "cgroup v1: cannot set pids.max");
	if ((r = write_u64(cg, V1_CPU, "cpu.cfs_period_us", CPU_PERIOD_US)) < 0 ||
	    (r = write_u64(cg, V1_CPU, "cpu.cfs_quota_us", l->cpu_milli * CPU_PERIOD_US / 1000)) <
		0)
		return error_set_errno(err, -r, "cgroup v1: cannot set the cpu quota");
	return 0;
}

static int v1_attach(struct cgroup *cg, pid_t pid)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	for (int i = 0; i < CGROUP_V1_NCTRL; i++) {
		int r = cgroup_write(cg, cg->fds[i], "cgroup.procs", buf);
		if (r < 0)
			return r;
	}
	return 0;
}

static int v1_stats(struct cgroup *cg, struct cgroup_stats *ret)
{
	char buf[512];
	struct cgroup_stats s = {0};
	ssize_t n = read_file_at(cg->fds[V1_MEMORY], "memory.oom_control", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	(void)keyed_u64(buf, "oom_kill", &s.oom_kills); /* absent before Linux 4.13 */
	(void)read_u64_at(cg->fds[V1_MEMORY], "memory.max_usage_in_bytes", &s.peak_memory_bytes);
	*ret = s;
	return 0;
}

static bool v1_is_empty(struct cgroup *cg)
{
	for (int i = 0; i < CGROUP_V1_NCTRL; i++) {
		char buf[16];
		ssize_t n = read_file_at(cg->fds[i], "cgroup.procs", buf, sizeof(buf));
		if (n > 0)
			return false;
	}
	return true;
}

static int v1_freeze(struct cgroup *cg, bool frozen)
{
	if (cg->fds[V1_FREEZER] < 0)
		return -EOPNOTSUPP; /* no freezer hierarchy */
	return cgroup_write(cg, cg->fds[V1_FREEZER], "freezer.state", frozen ? "FROZEN" : "THAWED");
}

/* "FROZEN", not "FREEZING": every task has stopped. */
static bool v1_is_frozen(struct cgroup *cg)
{
	char buf[32];
	if (cg->fds[V1_FREEZER] < 0 ||
	    read_file_at(cg->fds[V1_FREEZER], "freezer.state", buf, sizeof(buf)) < 0)
		return false;
	return strncmp(buf, "FROZEN", 6) == 0;
}

static int v1_kill(struct cgroup *cg)
{
	(void)v1_freeze(cg, true);
	for (int i = 0; i < CGROUP_V1_NCTRL; i++)
		(void)cgroup_kill_procs(cg->fds[i]);
	return v1_freeze(cg, false);
}

static int v1_remove(struct cgroup *cg)
{
	for (int i = 0; i < CGROUP_V1_NCTRL; i++) {
		if (unlinkat(cg->root->fds[i], cg->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}

const struct cgroup_ops cgroup_v1_ops = {
    .create = v1_create,
    .attach = v1_attach,
    .stats = v1_stats,
    .is_empty = v1_is_empty,
    .kill = v1_kill,
    .freeze = v1_freeze,
    .is_frozen = v1_is_frozen,
    .remove = v1_remove,
};
