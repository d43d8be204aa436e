/*
 * agentbox status: one task, as agentboxd shows it, pretty-printed JSON.
 */
#include "base/cleanup.h"
#include "cli/cli.h"
#include "client/client.h"

#include <getopt.h>
#include <stdio.h>

static const char help[] =
    "usage: agentbox status [OPTIONS] ID\n"
    "\n"
    "Print task ID as agentboxd knows it: a JSON object with id, status,\n"
    "attempt, max_attempts, exit_code, progress, created_at, started_at,\n"
    "finished_at, error, metadata, command and limits, indented.\n"
    "\n"
    "options:\n"
    "  --socket PATH   agentboxd's unix socket (default $AGENTBOX_HOST, else\n"
    "                  " CLIENT_DEFAULT_SOCKET ")\n"
    "\n"
    "environment:\n"
    "  AGENTBOX_HOST   /path/to/socket, or HOST:PORT to use TCP\n"
    "  AGENTBOX_TOKEN  the bearer token sent over TCP\n"
    "\n"
    "exit status: 0 printed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (not_found)).\n";

enum { OPT_SOCKET = 256 };

static const struct option options[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int verb_status(int argc, char **argv)
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
			return cli_option_error("status", opt, argv);
		}
	}
	if (argc - optind != 1)
		return cli_fail("status: give one task ID (see agentbox status --help)");

	struct error err = {0};
	json_t *task = NULL;
	if (client_task_request(socket_path, "GET", argv[optind], NULL, &task, &err) < 0)
		return cli_fail("status: %s", err.msg);
	int r = client_print_json(stdout, task);
	json_decref(task);
	if (r < 0 || fflush(stdout) == EOF)
		return cli_fail("status: cannot write the output");
	return 0;
}
