/*
 * spawn.c - start a detached helper (spawn.h).
 */
#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

extern char **environ;

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
	if (r == 0)
		r = posix_spawn(ret_pid, path, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return -r;
}
