/*
 * sandbox.h - run one command in one fresh sandbox, from the outside.
 *
 * The caller (the launcher) stays outside the sandbox and supervises it:
 *
 *	sandbox_start()  acquire a uid range and a cgroup, clone the sandbox's
 *	                 init into new namespaces, map ids, let it go
 *	sandbox_wait()   until it ends, the timeout passes or cancel_fd wakes
 *	                 us; then collect exit, OOM and usage facts, kill what
 *	                 is left, remove the cgroup and release the uid range
 *	sandbox_free()   drop the handle (kills the sandbox if still running)
 *
 * Inside, our init (pid 1) finishes the isolation (mounts, pivot_root,
 * Landlock, capabilities, seccomp), runs the command as its child, reaps
 * everything, and exits when the command does; the kernel then kills
 * whatever else is left in the pid namespace. If the launcher dies, init
 * gets SIGKILL (parent-death signal) and the sandbox goes with it; the
 * leftover cgroup is reclaimed by the next run or `agentbox gc`.
 *
 * With spec->serve, init runs no command of its own but stays up and
 * answers requests: see serve.h.
 *
 * The launcher must be single-threaded while it calls sandbox_start().
 */
#ifndef AGENTBOX_RUNTIME_SANDBOX_H
#define AGENTBOX_RUNTIME_SANDBOX_H

#include "base/error.h"
#include "runtime/spec.h"

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

/* Where agentbox keeps its runtime files; AGENTBOX_RUN_DIR overrides. */
#define SANDBOX_RUN_DIR_DEFAULT "/run/agentbox"

enum sandbox_end {
	SANDBOX_EXITED,	     /* the command exited by itself: see exit_status */
	SANDBOX_SIGNALED,    /* the command was killed by a signal: see term_signal */
	SANDBOX_OOM_KILLED,  /* the kernel's OOM killer ended it (from the cgroup) */
	SANDBOX_TIMED_OUT,   /* the wall-clock timeout passed */
	SANDBOX_CANCELLED,   /* the caller asked it to stop (cancel_fd) */
	SANDBOX_EXEC_FAILED, /* the command could not be executed: see exec_errno */
	SANDBOX_SETUP_FAILED /* agentbox could not build the sandbox: see sandbox_wait's err */
};

struct sandbox_result {
	enum sandbox_end end;
	int exit_status; /* SANDBOX_EXITED: 0..255 */
	int term_signal; /* SANDBOX_SIGNALED / OOM_KILLED: the signal, else 0 */
	int exec_errno;	 /* SANDBOX_EXEC_FAILED: ENOENT, EACCES, ... */
	bool oom_killed; /* the cgroup's oom_kill counter moved, whatever the end */
	uint64_t wall_ms;
	uint64_t cpu_ms;	    /* user + system time of the sandbox's processes */
	uint64_t peak_memory_bytes; /* 0 when the kernel does not report it */
};

struct sandbox;

/*
 * Start spec (already validated) in a new sandbox. On failure nothing is
 * left behind: no process, cgroup or uid range.
 */
int sandbox_start(const struct spec *spec, struct sandbox **ret, struct error *err);

/*
 * Wait for the sandbox to end and tear it down. When cancel_fd (>= 0)
 * becomes readable, the sandbox is killed and reported cancelled. A setup
 * failure inside the sandbox is returned as SANDBOX_SETUP_FAILED with err
 * filled. Returns 0, or -errno if the wait itself failed.
 */
int sandbox_wait(struct sandbox *sb, int cancel_fd, struct sandbox_result *ret, struct error *err);

/*
 * Work a supervisor does while it waits: watch fds (an entry with fd < 0
 * is skipped, as poll() does; ready() may set it to -1 to stop watching),
 * and call tick() every tick_ms (0 = never). At most 14 fds.
 */
struct sandbox_io {
	struct pollfd *fds;
	size_t nfds;
	void (*ready)(struct pollfd *pfd, size_t index, void *data);
	unsigned tick_ms;
	void (*tick)(void *data);
	void *data;
};

/* sandbox_wait() that serves io meanwhile. */
int sandbox_wait_io(struct sandbox *sb, int cancel_fd, const struct sandbox_io *io,
		    struct sandbox_result *ret, struct error *err);

/* Kill the sandbox now (the wait then reports how it ended). */
int sandbox_kill(struct sandbox *sb);

/* Free the handle, killing and removing a sandbox still running. NULL. */
struct sandbox *sandbox_free(struct sandbox *sb);

/*
 * A running sandbox's network, attached after its start (a pooled sandbox
 * given a network when it is claimed): spec->network_attach's work, on a
 * sandbox whose init already runs. attach gets init's pidfd and the slot.
 */
int sandbox_attach_network(struct sandbox *sb,
			   int (*attach)(void *arg, int pidfd, unsigned slot, struct error *err),
			   void *arg, struct error *err);

/*
 * After sandbox_wait(), with spec->export_dirs: the O_PATH directory fds
 * init handed over of the workdir (*ret_work) and /tmp (*ret_tmp), now
 * the caller's (O_CLOEXEC). They hold the sandbox's data tmpfs, which no
 * process of the sandbox can change any more: whatever is read beneath
 * them is the sandbox's content, untrusted (symlinks, FIFOs, devices).
 * -ENOENT when init never sent them (it failed before its command).
 */
int sandbox_take_dirs(struct sandbox *sb, int *ret_work, int *ret_tmp);

/* The run directory (AGENTBOX_RUN_DIR or the default). */
const char *sandbox_run_dir(void);

/*
 * Reclaim what dead launchers left: cgroups whose uid range is no longer
 * held. Sets *ret_reclaimed to how many. 0 or -errno.
 */
int sandbox_gc(unsigned *ret_reclaimed, struct error *err);

#endif
