/*
 * init-child.c - what every child of the sandbox's init does between
 * fork() and exec: the command of a run (init.c) and each process a
 * serve-mode init spawns (serve-init.c). See launch-internal.h.
 */
#include "runtime/launch-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void init_child_reset_signals(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int init_child_exec(const char *const *argv, char *const *envp)
{
	const char *file = argv[0];
	if (strchr(file, '/')) {
		execve(file, (char *const *)argv, envp);
		return errno;
	}
	const char *path = SPEC_DEFAULT_PATH;
	for (char *const *e = envp; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	int saved = ENOENT;
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, ":");
		char buf[4096];
		if (len > 0 && len + strlen(file) + 2 <= sizeof(buf)) {
			snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, p, file);
			execve(buf, (char *const *)argv, envp);
			if (errno == EACCES || errno == ENOEXEC || errno == ETXTBSY)
				saved = errno; /* found but not runnable: remember it */
			else if (errno != ENOENT && errno != ENOTDIR && saved == ENOENT)
				saved = errno;
		}
		p += len;
		if (*p == ':')
			p++;
	}
	return saved;
}
