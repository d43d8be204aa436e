/*
 * agentbox cancel: ask agentboxd to cancel a task and print the status it
 * has now: "cancelled" when it was queued; "running (cancel requested)"
 * while agentboxd stops a running one, which then ends cancelled.
 */
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "client/client.h"

#include <stdio.h>

static const char help[] =
    "usage: agentbox cancel [OPTIONS] ID\n"
    "\n"
    "Cancel task ID. A queued task ends at once; a running one is killed and\n"
    "ends as cancelled. Prints the task's status as agentboxd answered it:\n"
    "\"cancelled\", or \"running (cancel requested)\" while a running task is\n"
    "being stopped (agentbox wait ID then exits 130). Asking again is harmless;\n"
    "cancelling a task that has already ended is an error (conflict).\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 asked; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (conflict)).\n";

int verb_cancel(int argc, char **argv)
{
	const char *socket_path, *id;
	int rc = cli_parse_id_only("cancel", "task", help, argc, argv, &socket_path, &id);
	if (rc >= 0)
		return rc;
	struct error err = {0};
	_cleanup_json_ json_t *task = NULL;
	if (client_task_request(socket_path, "POST", id, "/cancel", &task, &err) < 0)
		return cli_fail("cancel: %s", err.msg);
	const char *status = json_string_value(json_object_get(task, "status"));
	if (!status)
		return cli_fail("cancel: agentboxd's answer has no status");
	bool requested = json_is_true(json_object_get(task, "cancel_requested"));
	char line[64];
	struct term_line l;
	term_line_init(&l, line, sizeof(line));
	term_line_adds(&l, status);
	if (requested && !client_status_is_final(status))
		term_line_adds(&l, " (cancel requested)");
	if (printf("%s\n", line) < 0 || fflush(stdout) == EOF)
		return cli_fail("cancel: cannot write the output");
	return 0;
}
