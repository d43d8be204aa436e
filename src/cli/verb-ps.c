/*
 * agentbox ps: tasks as a table, one line each, page after page as
 * agentboxd hands them out (following "next").
 */
#include "base/fileio.h"
#include "base/cleanup.h"
#include "cli/cli.h"
#include "client/client.h"
#include "core/task.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define PS_PROGRESS_WIDTH 30
#define PS_COMMAND_WIDTH  60

static const char help[] =
    "usage: agentbox ps [OPTIONS]\n"
    "\n"
    "List tasks, one line each: ID, STATUS, ATTEMPT (this one/most), AGE\n"
    "(since it was submitted), PROGRESS (its progress keys, cut to fit) and\n"
    "COMMAND (cut to fit). Without options only queued and running tasks\n"
    "are listed.\n"
    "\n"
    "options:\n"
    "  --status LIST   only tasks in these statuses, comma-separated: queued,\n"
    "                  running, succeeded, failed, oom_killed, timed_out,\n"
    "                  cancelled, lost\n"
    "  -a, --all       tasks in every status\n"
    "  --json          print a JSON array of the tasks as agentboxd shows them,\n"
    "                  instead of the table\n"
    "  -q, --quiet     print only their ids, one a line\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr).\n";

enum { OPT_STATUS = 256, OPT_SOCKET, OPT_JSON };

static const struct option options[] = {
    {"status", required_argument, NULL, OPT_STATUS},
    {"all", no_argument, NULL, 'a'},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

/* Every name in list must be a status. */
static int check_statuses(const char *list, struct error *err)
{
	_cleanup_free_ char *copy = strdup(list);
	if (!copy)
		return error_set_errno(err, ENOMEM, "--status");
	char *save = NULL;
	int n = 0;
	for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		enum task_status s;
		if (task_status_parse(name, &s) < 0)
			return error_set(err, EINVAL, "--status: '%s' is not a task status", name);
		n++;
	}
	if (n == 0 || list[0] == ',' || list[strlen(list) - 1] == ',' || strstr(list, ",,"))
		return error_set(err, EINVAL, "--status: '%s' is not a comma-separated list", list);
	return 0;
}

static void print_row(const json_t *task, int64_t now)
{
	char id[CLIENT_ID_MAX + 1], status[16], attempt[32], age[16] = "-";
	char progress[PS_PROGRESS_WIDTH + 1], command[PS_COMMAND_WIDTH + 1];
	/* what the daemon and the task sent goes to the terminal escaped (client/term.h) */
	struct term_line l;
	const char *s = json_string_value(json_object_get(task, "id"));
	term_line_init(&l, id, sizeof(id));
	term_line_adds(&l, s ? s : "?");
	s = json_string_value(json_object_get(task, "status"));
	term_line_init(&l, status, sizeof(status));
	term_line_adds(&l, s ? s : "?");
	snprintf(attempt, sizeof(attempt), "%lld/%lld",
		 (long long)json_integer_value(json_object_get(task, "attempt")),
		 (long long)json_integer_value(json_object_get(task, "max_attempts")));
	int64_t created;
	s = json_string_value(json_object_get(task, "created_at"));
	if (s && client_parse_time(s, &created) == 0)
		client_format_age(now - created, age, sizeof(age));
	client_format_progress(json_object_get(task, "progress"), progress, sizeof(progress));
	client_format_command(json_object_get(task, "command"), command, sizeof(command));
	printf("%-30s  %-10s  %-7s  %-4s  %-*s  %s\n", id, status, attempt, age, PS_PROGRESS_WIDTH,
	       progress[0] ? progress : "-", command);
}

struct lister {
	int64_t now;
	bool quiet;  /* -q: ids only */
	json_t *all; /* --json: every task, page after page; else NULL */
};

/* The header once the first page is there, then a line per task. */
static int print_page(json_t *tasks, int page, void *data, struct error *err)
{
	const struct lister *l = data;
	size_t i;
	json_t *task;
	if (l->all) {
		if (json_array_extend(l->all, tasks) < 0)
			return error_set_errno(err, ENOMEM, "collecting the list");
		return 0;
	}
	if (l->quiet) {
		json_array_foreach(tasks, i, task)
		{
			const char *id = json_string_value(json_object_get(task, "id"));
			if (id && cli_print_text(id) < 0)
				return error_set(err, EIO, "cannot write the output");
		}
		return 0;
	}
	if (page == 0)
		printf("%-30s  %-10s  %-7s  %-4s  %-*s  %s\n", "ID", "STATUS", "ATTEMPT", "AGE",
		       PS_PROGRESS_WIDTH, "PROGRESS", "COMMAND");
	json_array_foreach(tasks, i, task)
	{
		print_row(task, l->now);
	}
	return 0;
}

int verb_ps(int argc, char **argv)
{
	const char *socket_path = NULL, *statuses = NULL;
	bool all = false, quiet = false, as_json = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":aqh", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case 'a':
			all = true;
			break;
		case OPT_STATUS:
			statuses = optarg;
			break;
		case 'q':
			quiet = true;
			break;
		case OPT_JSON:
			as_json = true;
			break;
		case OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error("ps", opt, argv);
		}
	}
	if (optind < argc)
		return cli_fail("ps: unexpected argument '%s' (see agentbox ps --help)",
				argv[optind]);
	struct error err = {0};
	if (all && statuses)
		return cli_fail("ps: --all and --status exclude each other");
	if (quiet && as_json)
		return cli_fail("ps: -q and --json exclude each other");
	if (statuses && check_statuses(statuses, &err) < 0)
		return cli_fail("ps: %s", err.msg);
	if (!all && !statuses)
		statuses = "queued,running";

	char target[CLIENT_TARGET_MAX];
	snprintf(target, sizeof(target), "/v1/tasks%s%s", statuses ? "?status=" : "",
		 statuses ? statuses : "");
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("ps: %s", err.msg);
	struct lister l = {
	    .now = wall_clock_ms(), .quiet = quiet, .all = as_json ? json_array() : NULL};
	int rc = 0;
	if (as_json && !l.all)
		rc = cli_fail("ps: out of memory");
	else if (client_list(&c, target, "tasks", print_page, &l, &err) < 0)
		rc = cli_fail("ps: %s", err.msg);
	else if (as_json && client_print_json(stdout, l.all) < 0)
		rc = cli_fail("ps: cannot write the output");
	client_release(&c);
	json_decref(l.all);
	if (fflush(stdout) == EOF)
		return cli_fail("ps: cannot write the output");
	return rc;
}
