/*
 * cgroup-internal.h - what cgroup.c shares with its two backends.
 *
 * Each backend fills an ops table; cgroup.c owns detection, the public
 * functions and the bounded waits, and calls the ops for what differs.
 */
#ifndef AGENTBOX_RUNTIME_CGROUP_INTERNAL_H
#define AGENTBOX_RUNTIME_CGROUP_INTERNAL_H

#include "runtime/cgroup.h"

#define CGROUP_V1_NCTRL CGROUP_HIERARCHIES_MAX /* memory, pids, cpu, freezer */
#define CGROUP_NAME_MAX 64
#define CGROUP_PATH_MAX 4096

struct cgroup_ops {
	int (*create)(struct cgroup *cg, const struct cgroup_limits *limits, struct error *err);
	int (*attach)(struct cgroup *cg, pid_t pid);
	int (*stats)(struct cgroup *cg, struct cgroup_stats *ret);
	bool (*is_empty)(struct cgroup *cg);
	int (*kill)(struct cgroup *cg);
	int (*freeze)(struct cgroup *cg, bool frozen);
	bool (*is_frozen)(struct cgroup *cg);
	int (*remove)(struct cgroup *cg); /* rmdir; -EBUSY while dying tasks remain */
};

struct cgroup_root {
	enum cgroup_version version;
	const struct cgroup_ops *ops;
	int nfds;		  /* 1 on v2, CGROUP_V1_NCTRL on v1 */
	int fds[CGROUP_V1_NCTRL]; /* O_PATH|O_DIRECTORY fds of the parent groups */
	bool fake_files;	  /* unit tests only: see cgroup_root_open_v2_at() */
	char describe[CGROUP_PATH_MAX + 256];
};

struct cgroup {
	struct cgroup_root *root;
	char name[CGROUP_NAME_MAX];
	int fds[CGROUP_V1_NCTRL]; /* directory fds of this group, per hierarchy */
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

/* The v1 controllers, in the order of cgroup_root.fds. */
extern const char *const cgroup_v1_controllers[CGROUP_V1_NCTRL];
enum { V1_MEMORY = 0, V1_PIDS = 1, V1_CPU = 2, V1_FREEZER = 3 };

/* Write s to an interface file of a group (O_CREAT in fake mode). */
int cgroup_write(const struct cgroup *cg, int fd, const char *file, const char *s);

/* Read the pids in a cgroup.procs file and SIGKILL each one. */
int cgroup_kill_procs(int dirfd);

#endif
