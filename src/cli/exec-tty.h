/*
 * exec-tty.h - agentbox exec -t (exec-tty.c) and what it shares with the
 * rest of agentbox exec (verb-exec.c).
 */
#ifndef AGENTBOX_CLI_EXEC_TTY_H
#define AGENTBOX_CLI_EXEC_TTY_H

#include "client/client.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Run the exec request body (command, env, cwd, timeout_s; "tty", "rows"
 * and "cols" are added here) at target on a terminal in the sandbox, and
 * relay ours: our stdin too when input (-i: it must be a terminal, put in
 * raw mode for the run and restored on every way out). Returns the exit
 * status agentbox exec gives (exec_exit_status()), 128+N when signal N
 * stopped us (the session in the sandbox is hung up), or 125 after one
 * line on stderr.
 */
int exec_tty_run(struct client *c, const char *target, json_t *body, bool input);

/* The exit status for an exit object of the API, with its lines on stderr (verb-exec.c). */
int exec_exit_status(const json_t *ex);

#endif
