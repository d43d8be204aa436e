/*
 * spawn.h - start one of agentbox's own long-lived helpers (a task's
 * supervisor, a sandbox's shim) so that it owes nothing to its parent.
 *
 * The helper gets a session of its own (a signal to the daemon's process
 * group never reaches it), stdin/stdout/stderr on /dev/null, every signal
 * at its default disposition, and SIGTERM, SIGINT and SIGHUP blocked: a
 * stop sent before it is ready waits for it, and is handled as a stop. The
 * caller's fds pass as fd 3, 4, ... in order; every other fd the caller
 * has must be O_CLOEXEC.
 *
 * Its environment is explicit: a fixed PATH, and AGENTBOX_RUN_DIR,
 * AGENTBOX_CGROUP_ROOT and AGENTBOX_CGROUP where the caller has them
 * (agentbox's own settings, which every launcher on a host must share);
 * nothing else of the caller's environment, which may hold its secrets.
 */
#ifndef AGENTBOX_BASE_SPAWN_H
#define AGENTBOX_BASE_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* The most fds a helper is handed (as fd 3 upward). */
#define SPAWN_FDS_MAX 4

/*
 * Run path with the one argument arg, fds[i] as fd 3 + i. 0 with
 * *ret_pid, or -errno: -E2BIG past SPAWN_FDS_MAX, -EINVAL when an fd is
 * below 3 + nfds (handing them over could overwrite it).
 */
int spawn_helper(const char *path, const char *arg, const int *fds, size_t nfds, pid_t *ret_pid);

#endif
