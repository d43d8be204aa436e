/*
 * launch-internal.h - what the launcher (launch.c) hands to the sandbox's
 * init (init.c) across clone(), the messages init sends back, and the
 * launcher's handle, shared with serve.c.
 *
 * The child gets a copy of the launcher's memory, so the context is plain
 * data prepared before clone(); nothing in it is freed by the child.
 *
 * That copy holds the launcher's argv and environ strings too: host paths
 * and whatever the launcher's own caller put in its environment. The
 * kernel shows them as /proc/<pid>/cmdline and environ. So init wipes
 * them before anything else (init.c), and nothing in the context may point
 * into them: the spec init reads is a copy the launcher made.
 */
#ifndef AGENTBOX_RUNTIME_LAUNCH_INTERNAL_H
#define AGENTBOX_RUNTIME_LAUNCH_INTERNAL_H

#include "base/error.h"
#include "runtime/cgroup.h"
#include "runtime/idmap.h"
#include "runtime/serve-internal.h"
#include "runtime/spec.h"
#include "runtime/uidrange.h"

#include <linux/prctl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Fixed fd numbers in init, so everything above them can be closed at once. */
#define INIT_STATUS_FD	3 /* struct launch_msg records to the launcher */
#define INIT_CONTROL_FD 4 /* serve mode: the request socket (serve-internal.h) */
/* serve mode with an image: its overlay's upper directory, kept for sandbox_upper() */
#define INIT_UPPER_FD 5

/* A volume prepared by the launcher: a detached mount to attach inside. */
struct launch_volume {
	int tree_fd; /* from open_tree(OPEN_TREE_CLONE), ids mapped, flags set */
	const char *target;
	bool read_only;
	bool is_dir; /* else a single file or FIFO */
};

/* What init shows as its comm and its whole cmdline. */
#define INIT_PROC_NAME "agentbox-init"

struct launch_ctx {
	const struct spec *spec; /* a copy, in memory of its own (not in the argv area) */
	/*
	 * The launcher's memory layout as the kernel keeps it, read from
	 * /proc/self/stat before clone() (proc(5), fields 26-28, 45-51; brk
	 * is left 0): [arg_start, arg_end) holds its argv strings and
	 * [env_start, env_end) its environ strings. init wipes both first.
	 */
	struct prctl_mm_map layout;
	char **envp;		 /* the sandbox's environment */
	const char *mnt_dir;	 /* empty host directory to build the root on */
	int sync_fd;		 /* our end of the go socket: one byte once ids are mapped, then
				    an image's tree (rootfs_image_overlay()) */
	struct cgroup_join join; /* v1: how init moves itself into its cgroup */
	int status_fd;		 /* write end: struct launch_msg records to the launcher */
	int control_fd;		 /* serve mode: init's end of the request socket, else -1 */
	int rootfs_fd;		 /* --rootfs: a detached copy of the image, or -1 */
	struct launch_volume volumes[SPEC_VOLUMES_MAX];
	size_t nvolumes;
};

enum launch_msg_type {
	LAUNCH_MSG_SETUP_FAILED = 1, /* code = errno, text = reason */
	LAUNCH_MSG_EXEC_FAILED = 2,  /* code = errno, text = argv[0] */
	LAUNCH_MSG_EXIT = 3,	     /* code = the command's wait status */
};

/* One record; well under PIPE_BUF, so each write is atomic. */
struct launch_msg {
	uint32_t type;
	int32_t code;
	char text[ERROR_MSG_MAX];
};

/* The launcher's handle on one sandbox (see sandbox.h). */
struct sandbox {
	struct uidrange ids;
	struct cgroup_root *cgroot;
	struct cgroup *cg;
	pid_t pid;
	int pidfd;
	int status_fd;	 /* read end of init's status pipe */
	int lifeline_fd; /* our end of the go socket; init sees EOF if we die */
	uint64_t start_ns;
	uint64_t timeout_ms;
	bool reaped, timed_out, cancelled;
	bool serve;	       /* spec->serve: init answers requests */
	struct serve_host ctl; /* serve mode: the request socket and exit queue */
	char **envp;
	char name[32];
	bool export_dirs; /* spec->export_dirs */
	int dirs[2];	  /* what init sent of them: workdir, /tmp; or -1 */
	/* killed, reaped once gone (sandbox_reap_holders()), or at the end */
	struct idmap_holders holders;
};

/* Reap those of sb's id-mapping holders that are gone (idmap.h). */
void sandbox_reap_holders(struct sandbox *sb);

/* The sandbox's init: runs in the clone()d child. Never returns. */
_Noreturn void init_main(struct launch_ctx *ctx);

/*
 * For init's children, between fork() and exec (init-child.c): both
 * async-signal-safe and allocation-free.
 *
 * Start clean: default dispositions, nothing blocked (init's mask and
 * ignored signals are not the command's business).
 */
void init_child_reset_signals(void);

/* Look argv[0] up in envp's PATH (or the default) and exec it; returns the errno to report. */
int init_child_exec(const char *const *argv, char *const *envp);

#endif
