/*
 * spawn.c - start a detached helper (spawn.h).
 */
#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>

extern char **environ;

/*
 * What a helper may take of the caller's environment: the settings of
 * agentbox's own runtime (runtime/sandbox.h, runtime/cgroup.h), which every
 * launcher on a host must share (the run directory holds the uid range
 * locks). Nothing else: the caller's environment may hold its secrets.
 */
static const char *const env_passed[] = {
    "AGENTBOX_RUN_DIR", "AGENTBOX_CGROUP_ROOT", "AGENTBOX_CGROUP",
    /* the sanitizers' settings, so that a helper of a sanitized build
     * reports as its caller does (they hold no secret) */
    "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
#define ENV_PASSED_N (sizeof(env_passed) / sizeof(env_passed[0]))

/* A helper runs nothing by name; a fixed PATH all the same. */
static char env_path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/* The caller's "name=value" entry, or NULL. */
static char *env_entry(const char *name)
{
	size_t len = strlen(name);
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e;
	return NULL;
}

int spawn_helper(const char *path, const char *arg, const int *fds, size_t nfds, pid_t *ret_pid)
{
	if (nfds > SPAWN_FDS_MAX)
		return -E2BIG;
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] < 3 + (int)nfds)
			return -EINVAL; /* a dup2 before it could overwrite it */
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	if (posix_spawn_file_actions_init(&fa) != 0)
		return -ENOMEM;
	if (posix_spawnattr_init(&attr) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -ENOMEM;
	}
	sigset_t stop, all;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	sigfillset(&all);
	int r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						    POSIX_SPAWN_SETSIGDEF);
	r = r ?: posix_spawnattr_setsigmask(&attr, &stop);
	r = r ?: posix_spawnattr_setsigdefault(&attr, &all);
	r = r ?: posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	r = r ?: posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	r = r ?: posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	for (size_t i = 0; r == 0 && i < nfds; i++)
		r = posix_spawn_file_actions_adddup2(&fa, fds[i], 3 + (int)i);
	char *argv[] = {(char *)path, (char *)arg, NULL};
	char *envp[1 + ENV_PASSED_N + 1] = {env_path};
	size_t n = 1;
	for (size_t i = 0; i < ENV_PASSED_N; i++)
		if ((envp[n] = env_entry(env_passed[i])))
			n++;
	envp[n] = NULL;
	if (r == 0)
		r = posix_spawn(ret_pid, path, &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return -r;
}
