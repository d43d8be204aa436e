/*
 * agentbox rm: remove ended tasks, their records and their files, through
 * DELETE /v1/tasks/{id}. Every id's form is checked before any request.
 */
#include "cli/cli.h"
#include "client/client.h"
#include "core/task.h"

#include <getopt.h>
#include <stddef.h>

static const char help[] =
    "usage: agentbox rm [OPTIONS] ID...\n"
    "\n"
    "Remove each ended task ID: its record, its events, its logs, its /state\n"
    "and every file agentboxd kept of it. Prints each id removed. Every id's\n"
    "form is checked before any request is sent. A task that has not ended is\n"
    "an error (conflict: cancel it first, remove it once it has ended), as is\n"
    "one that does not exist (not_found); the others are still removed.\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all removed; 125 agentbox or agentboxd failed for one or\n"
    "more (one line on stderr for each).\n";

/* A task's id exactly (core/task.h), not just a name safe in a path. */
static int check_task(const char *verb, const char *id)
{
	char target[CLIENT_TARGET_MAX];
	struct error err = {0};
	if (client_task_target(target, sizeof(target), id, NULL, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (!task_id_is_valid(id))
		return cli_fail("%s: '%s' is not a task id: ids look like tsk_ and 26 of 0-9 a-z "
				"without i, l, o, u; nothing was removed",
				verb, id);
	return 0;
}

static void task_target(char *buf, size_t size, const char *id)
{
	client_task_target(buf, size, id, NULL, NULL); /* checked: it fits */
}

int verb_rm(int argc, char **argv)
{
	const char *socket_path;
	int rc = cli_parse_socket_only("rm", help, argc, argv, &socket_path);
	if (rc >= 0)
		return rc;
	return cli_delete_each("rm", "task IDs", socket_path, optind, argc, argv, check_task,
			       task_target);
}
