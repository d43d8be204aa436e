/*
 * cgroup.h - one control group per sandbox, on cgroup v2 or v1.
 *
 * agentbox never changes the host's cgroup mounts. It creates its groups
 * under the cgroup the calling process lives in:
 *   v2: <own path>/agentbox/<name> when our group can delegate (it is the
 *       root, or we are its only process: we step into the leaf
 *       <own path>/agentbox.launcher first, as a Delegate=yes service
 *       must); else <top>/agentbox/<name>; $AGENTBOX_CGROUP_ROOT overrides
 *   v1: <controller mount>/<own path>/agentbox/<name> for each of the
 *       memory, pids, cpu and freezer hierarchies
 * v2 is tried first; v1 is used when the v2 tree has none of the needed
 * controllers (hybrid hosts).
 *
 * Ownership: a struct cgroup_root is opened once and outlives every
 * struct cgroup made from it. cgroup_destroy() and cgroup_free() end a
 * struct cgroup; only cgroup_destroy() removes the group from the kernel.
 *
 * OOM kills are read from the kernel's counters (memory.events "oom_kill"
 * on v2, memory.oom_control "oom_kill" on v1), never guessed from signals.
 */
#ifndef AGENTBOX_RUNTIME_CGROUP_H
#define AGENTBOX_RUNTIME_CGROUP_H

#include "base/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_version {
	CGROUP_V1 = 1,
	CGROUP_V2 = 2,
};

struct cgroup_limits {
	uint64_t memory_bytes; /* hard limit; swap is set to 0 */
	uint64_t cpu_milli;    /* quota in thousandths of a CPU per 100 ms period */
	uint64_t pids;	       /* most tasks at once */
	bool oom_kills_one;    /* v2: an OOM kill takes the process that grew, not the
				* whole group (memory.oom.group 0); v1 always does */
};

struct cgroup_stats {
	uint64_t oom_kills;	    /* processes the OOM killer took in this group */
	uint64_t peak_memory_bytes; /* 0 when the kernel does not say */
};

struct cgroup_root;
struct cgroup;

#define CGROUP_HIERARCHIES_MAX 4 /* v1: memory, pids, cpu, freezer; v2: one */

/*
 * v1: the group's "tasks" files, opened for writing by the launcher, so a
 * freshly cloned child can move itself in with cgroup_join_self(). A
 * thread writing "0" to "tasks" moves only itself and skips the global
 * lock that makes a write to cgroup.procs wait for an RCU grace period
 * (milliseconds on an idle machine). On v2, clone3(CLONE_INTO_CGROUP)
 * does the job and n is 0.
 */
struct cgroup_join {
	int fds[CGROUP_HIERARCHIES_MAX];
	int n;
};

/*
 * The pids all sandboxes together may hold (pids.max of agentbox's parent
 * group): core/limits.h's limits_pids_total() of this host's pid_max, so
 * that no number of fork-bombing sandboxes can take the host's last pids.
 */
uint64_t cgroup_pids_total_max(void);

/*
 * Find the hierarchy to use (AGENTBOX_CGROUP=v1|v2 forces one) and make
 * sure agentbox's parent group exists with the controllers enabled and
 * its pids.max at cgroup_pids_total_max().
 */
int cgroup_root_open(struct cgroup_root **ret, struct error *err);

/*
 * Open a v2 root at an explicit directory: the parent of the sandbox
 * groups. With fake_files, interface files are created as regular files
 * when written: only for unit tests against a fake tree.
 */
int cgroup_root_open_v2_at(const char *dir, bool fake_files, struct cgroup_root **ret,
			   struct error *err);

struct cgroup_root *cgroup_root_free(struct cgroup_root *root);
enum cgroup_version cgroup_root_version(const struct cgroup_root *root);

/* Describe the root for `agentbox info`: "v1 /sys/fs/cgroup/memory/..." */
const char *cgroup_root_describe(const struct cgroup_root *root);

/*
 * Call fn for each group name under the root (for garbage collection).
 * fn returns 0 to go on or a negative errno to stop with it.
 */
int cgroup_root_for_each(struct cgroup_root *root, int (*fn)(const char *name, void *data),
			 void *data);

/*
 * Create group name with limits. A group of that name left over from a
 * dead run is emptied and removed first.
 */
int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *limits,
		  struct cgroup **ret, struct error *err);

/* Open an existing group (to reclaim it). -ENOENT if there is none. */
int cgroup_open(struct cgroup_root *root, const char *name, struct cgroup **ret);

/* Move pid into the group (all hierarchies on v1). */
int cgroup_attach(struct cgroup *cg, pid_t pid, struct error *err);

/* Fill j for cgroup_join_self(); every fd is O_CLOEXEC. 0 or -errno. */
int cgroup_join_prepare(struct cgroup *cg, struct cgroup_join *j);

/* In a single-threaded child: move ourselves into the group. Closes j's fds. */
int cgroup_join_self(struct cgroup_join *j);

/* Close j's fds (in the launcher, once the child has them). */
void cgroup_join_release(struct cgroup_join *j);

/* v2: the group's directory fd, for clone3(CLONE_INTO_CGROUP); v1: -1. */
int cgroup_clone_fd(const struct cgroup *cg);

int cgroup_read_stats(struct cgroup *cg, struct cgroup_stats *ret);

/* True when no process is left in the group. */
bool cgroup_is_empty(struct cgroup *cg);

/* SIGKILL every process in the group, daemonized ones too. */
int cgroup_kill(struct cgroup *cg);

/*
 * Ask the kernel to freeze or thaw every process in the group; freezing
 * completes asynchronously (see cgroup_is_frozen()). -EOPNOTSUPP on v1
 * without a freezer hierarchy.
 */
int cgroup_freeze(struct cgroup *cg, bool frozen);

/* True once every process in the group is frozen (v2 cgroup.events, v1 freezer.state). */
bool cgroup_is_frozen(struct cgroup *cg);

/*
 * Kill what is left, wait (bounded) until the group is empty, remove it,
 * and free cg. cg is freed even on failure. 0 or -errno.
 */
int cgroup_destroy(struct cgroup *cg, struct error *err);

/* Free the handle only; the group stays. Returns NULL. */
struct cgroup *cgroup_free(struct cgroup *cg);

#endif
