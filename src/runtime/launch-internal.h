/*
 * launch-internal.h - what the launcher (launch.c) hands to the sandbox's
 * init (init.c) across clone(), and the messages init sends back.
 *
 * The child gets a copy of the launcher's memory, so the context is plain
 * data prepared before clone(); nothing in it is freed by the child.
 */
#ifndef AGENTBOX_RUNTIME_LAUNCH_INTERNAL_H
#define AGENTBOX_RUNTIME_LAUNCH_INTERNAL_H

#include "base/error.h"
#include "runtime/cgroup.h"
#include "runtime/spec.h"

#include <stdint.h>

/* A volume prepared by the launcher: a detached mount to attach inside. */
struct launch_volume {
	int tree_fd; /* from open_tree(OPEN_TREE_CLONE), ids mapped, flags set */
	const char *target;
	bool read_only;
	bool is_dir; /* else a single file or FIFO */
};

struct launch_ctx {
	const struct spec *spec;
	char **envp;          /* the sandbox's environment */
	const char *mnt_dir;  /* empty host directory to build the root on */
	int sync_fd;          /* our end of the go socket: one byte once ids are mapped */
	struct cgroup_join join; /* v1: how init moves itself into its cgroup */
	int status_fd;        /* write end: struct launch_msg records to the launcher */
	int rootfs_fd;        /* --rootfs: a detached copy of the image, or -1 */
	struct launch_volume volumes[SPEC_VOLUMES_MAX];
	size_t nvolumes;
};

enum launch_msg_type {
	LAUNCH_MSG_SETUP_FAILED = 1, /* code = errno, text = reason */
	LAUNCH_MSG_EXEC_FAILED = 2,  /* code = errno, text = argv[0] */
	LAUNCH_MSG_EXIT = 3,         /* code = the command's wait status */
};

/* One record; well under PIPE_BUF, so each write is atomic. */
struct launch_msg {
	uint32_t type;
	int32_t code;
	char text[ERROR_MSG_MAX];
};

/* The sandbox's init: runs in the clone()d child. Never returns. */
_Noreturn void init_main(struct launch_ctx *ctx);

#endif
