/*
 * agentbox status: one task, as agentboxd shows it, pretty-printed JSON.
 */
#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "client/client.h"

#include <stdio.h>

static const char help[] =
    "usage: agentbox status [OPTIONS] ID\n"
    "\n"
    "Print task ID as agentboxd knows it: a JSON object with id, status,\n"
    "attempt, max_attempts, exit_code, progress, created_at, started_at,\n"
    "finished_at, error, metadata, command and limits, indented.\n"
    "\n"
    "options:\n"
    "  --json          the same: the output is JSON\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 printed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (not_found)).\n";

int verb_status(int argc, char **argv)
{
	const char *socket_path, *id;
	int rc = cli_parse_id_json("status", "task", help, argc, argv, &socket_path, &id);
	if (rc >= 0)
		return rc;
	struct error err = {0};
	_cleanup_json_ json_t *task = NULL;
	if (client_task_request(socket_path, "GET", id, NULL, &task, &err) < 0)
		return cli_fail("status: %s", err.msg);
	int r = client_print_json(stdout, task);
	if (r < 0 || fflush(stdout) == EOF)
		return cli_fail("status: cannot write the output");
	return 0;
}
