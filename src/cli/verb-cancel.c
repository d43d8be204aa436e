/*
 * agentbox cancel: ask agentboxd to cancel a task and print the status it
 * has now: "cancelled" when it was queued; "running (cancel requested)"
 * while agentboxd stops a running one, which then ends cancelled.
 */
#include "cli/cli.h"
#include "client/client.h"

#include <getopt.h>
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
    "options:\n"
    "  --socket PATH   agentboxd's unix socket (default $AGENTBOX_HOST, else\n"
    "                  " CLIENT_DEFAULT_SOCKET ")\n"
    "\n"
    "environment:\n"
    "  AGENTBOX_HOST   /path/to/socket, or HOST:PORT to use TCP\n"
    "  AGENTBOX_TOKEN  the bearer token sent over TCP\n"
    "\n"
    "exit status: 0 asked; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (conflict)).\n";

enum { OPT_SOCKET = 256 };

static const struct option options[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int verb_cancel(int argc, char **argv)
{
	const char *socket_path = NULL;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error("cancel", opt, argv);
		}
	}
	if (argc - optind != 1)
		return cli_fail("cancel: give one task ID (see agentbox cancel --help)");

	struct error err = {0};
	json_t *task = NULL;
	if (client_task_request(socket_path, "POST", argv[optind], "/cancel", &task, &err) < 0)
		return cli_fail("cancel: %s", err.msg);
	const char *status = json_string_value(json_object_get(task, "status"));
	if (!status) {
		json_decref(task);
		return cli_fail("cancel: agentboxd's answer has no status");
	}
	bool requested = json_is_true(json_object_get(task, "cancel_requested"));
	printf("%s%s\n", status,
	       requested && !client_status_is_final(status) ? " (cancel requested)" : "");
	json_decref(task);
	if (fflush(stdout) == EOF)
		return cli_fail("cancel: cannot write the output");
	return 0;
}
