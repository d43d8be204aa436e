/*
 * agentbox logs: a task's output (stdout and stderr as the task wrote
 * them), copied to our stdout as it arrives; with -f, followed until the
 * task ends.
 */
#include "base/fileio.h"
#include "cli/cli.h"
#include "client/client.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char help[] =
    "usage: agentbox logs [OPTIONS] ID\n"
    "\n"
    "Print the output of task ID: what its command wrote to stdout and\n"
    "stderr, interleaved as written, attempt after attempt (each after a line\n"
    "\"[agentbox: attempt N]\" when there were several); at most the last\n"
    "64 MiB. With -f, a broken connection (agentboxd restarted) ends it\n"
    "with 125: run it again to see the output so far.\n"
    "\n"
    "options:\n"
    "  -f, --follow    keep printing as the task writes, until it ends\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 the output was printed (with -f: the task ended); 125\n"
    "agentbox or agentboxd failed, or the stream broke (one line on stderr).\n";

enum { OPT_SOCKET = 256 };

static const struct option options[] = {
    {"follow", no_argument, NULL, 'f'},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int copy_out(const struct http_response *res, const char *buf, size_t len, void *data,
		    struct error *err)
{
	(void)res;
	(void)data;
	int r = write_all(STDOUT_FILENO, buf, len);
	if (r < 0)
		return error_set_errno(err, -r, "writing the output");
	return 0;
}

int verb_logs(int argc, char **argv)
{
	const char *socket_path = NULL;
	bool follow = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":fh", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case 'f':
			follow = true;
			break;
		case OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error("logs", opt, argv);
		}
	}
	if (argc - optind != 1)
		return cli_fail("logs: give one task ID (see agentbox logs --help)");

	struct error err = {0};
	char target[CLIENT_TARGET_MAX];
	if (client_task_target(target, sizeof(target), argv[optind],
			       follow ? "/logs?follow=1" : "/logs", &err) < 0)
		return cli_fail("logs: %s", err.msg);
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("logs: %s", err.msg);
	/* without -f the whole output is there at once: a silent daemon is an error */
	int r = client_stream(&c, target, "text/plain", 0, follow ? 0 : c.read_timeout_ms, copy_out,
			      NULL, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("logs: %s", err.msg);
	return 0;
}
