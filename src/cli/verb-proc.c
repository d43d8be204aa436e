/*
 * agentbox proc: the processes exec started in an interactive sandbox,
 * one subcommand each: ls (GET /v1/sandboxes/ID/processes), output (GET
 * .../processes/PID/output, -f: its event stream) and kill (POST
 * .../processes/PID/kill).
 */
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/command-stream.h"
#include "cli/options.h"
#include "client/client.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PROC_STATE_WIDTH   16
#define PROC_COMMAND_WIDTH 60
/* The largest pid a sandbox has (the kernel's PID_MAX_LIMIT). */
#define PROC_PID_MAX (1 << 22)

static const char help[] = "usage: agentbox proc COMMAND [OPTIONS] ...\n"
			   "\n"
			   "The processes agentbox exec started in an interactive sandbox: those\n"
			   "running and the last 64 that ended.\n"
			   "\n"
			   "commands:\n"
			   "  ls        list them\n"
			   "  output    print what one wrote (-f: follow it to its end)\n"
			   "  kill      send one a signal (its whole process group)\n"
			   "\n"
			   "`agentbox proc COMMAND --help` describes one.\n"
			   "exit status: 0 done; 125 agentbox or agentboxd failed or refused (one\n"
			   "line on stderr).\n";

/* "ID PID" after the options: the sandbox's target with suffix, and the pid. */
static int id_and_pid(const char *verb, int argc, char **argv, const char *suffix, char *target,
		      size_t size)
{
	if (argc - optind != 2)
		return cli_fail("%s: give a sandbox ID and a PID (see agentbox %s --help)", verb,
				verb);
	uint64_t pid;
	if (parse_u64(argv[optind + 1], &pid) < 0 || pid == 0 || pid > PROC_PID_MAX)
		return cli_fail("%s: '%s' is not a pid", verb, argv[optind + 1]);
	char tail[96];
	snprintf(tail, sizeof(tail), "/processes/%" PRIu64 "%s", pid, suffix);
	struct error err = {0};
	if (client_sandbox_target(target, size, argv[optind], tail, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	return 0;
}

/* ---- ls --------------------------------------------------------------------- */

static const char ls_help[] =
    "usage: agentbox proc ls [OPTIONS] ID\n"
    "\n"
    "List the processes of sandbox ID, one line each: PID (in the sandbox),\n"
    "STATE (running, exited N, or killed by signal N), STARTED (how long ago)\n"
    "and COMMAND (cut to fit).\n"
    "\n"
    "options:\n"
    "  --json          print the JSON array as agentboxd sent it\n"
    "  -q, --quiet     print only their pids, one a line\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr).\n";

enum { OPT_JSON = CLI_OPT_VERB, OPT_SIGNAL };

static void print_process(const json_t *p, int64_t now)
{
	char state[PROC_STATE_WIDTH + 1], started[32] = "-", command[PROC_COMMAND_WIDTH + 1];
	json_t *code = json_object_get(p, "exit_code"), *sig = json_object_get(p, "signal");
	if (json_is_true(json_object_get(p, "running")))
		snprintf(state, sizeof(state), "running");
	else if (json_is_integer(sig) && json_integer_value(sig) > 0)
		snprintf(state, sizeof(state), "killed %" JSON_INTEGER_FORMAT,
			 json_integer_value(sig));
	else if (json_is_integer(code))
		snprintf(state, sizeof(state), "exited %" JSON_INTEGER_FORMAT,
			 json_integer_value(code));
	else
		snprintf(state, sizeof(state), "ended");
	int64_t t;
	const char *s = json_string_value(json_object_get(p, "started_at"));
	if (s && client_parse_time(s, &t) == 0) {
		char age[16];
		client_format_age(now - t, age, sizeof(age));
		snprintf(started, sizeof(started), "%s ago", age);
	}
	client_format_command(json_object_get(p, "command"), command, sizeof(command));
	printf("%-7" JSON_INTEGER_FORMAT "  %-*s  %-9s  %s\n",
	       json_integer_value(json_object_get(p, "pid")), PROC_STATE_WIDTH, state, started,
	       command);
}

static int proc_ls(int argc, char **argv)
{
	const char *verb = "proc ls";
	struct cli_list_opts lo;
	int parsed = cli_parse_list_options(verb, ls_help, 1, "one sandbox ID", argc, argv, &lo);
	if (parsed >= 0)
		return parsed;
	const char *socket_path = lo.socket_path;
	bool as_json = lo.json, quiet = lo.quiet;
	struct error err = {0};
	_cleanup_json_ json_t *answer = NULL;
	if (client_sandbox_request(socket_path, "GET", argv[optind], "/processes", NULL, &answer,
				   &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	json_t *list = json_object_get(answer, "processes");
	if (!json_is_array(list))
		return cli_fail("%s: agentboxd's answer has no processes", verb);
	if (as_json) {
		if (client_print_json(stdout, list) < 0 || fflush(stdout) == EOF)
			return cli_fail("%s: cannot write the output", verb);
		return 0;
	}
	int64_t now = wall_clock_ms();
	size_t i;
	json_t *p;
	if (!quiet)
		printf("%-7s  %-*s  %-9s  %s\n", "PID", PROC_STATE_WIDTH, "STATE", "STARTED",
		       "COMMAND");
	json_array_foreach(list, i, p)
	{
		if (quiet)
			printf("%" JSON_INTEGER_FORMAT "\n",
			       json_integer_value(json_object_get(p, "pid")));
		else
			print_process(p, now);
	}
	if (fflush(stdout) == EOF)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- output ------------------------------------------------------------------- */

static const char output_help[] =
    "usage: agentbox proc output [OPTIONS] ID PID\n"
    "\n"
    "Print what process PID of sandbox ID wrote: its stdout to our stdout, its\n"
    "stderr to our stderr, byte for byte (agentboxd keeps up to 16 MiB of\n"
    "each). With -f, follow it from the start until the process ends, and\n"
    "exit with its exit status, as agentbox exec does; stopping agentbox does\n"
    "not stop the process.\n"
    "\n"
    "options:\n"
    "  -f, --follow    stream the output as it comes, until the process ends\n"
    "  --json          without -f: print agentboxd's answer as JSON (pid,\n"
    "                  running, stdout, stderr, truncated, exit)\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 printed; with -f the process's own (124, 137, 128+N as\n"
    "for exec); 125 agentbox or agentboxd failed (one line on stderr;\n"
    "(process_not_found) for a pid it does not know).\n";

static const struct option output_options[] = {
    {"follow", no_argument, NULL, 'f'},
    {"json", no_argument, NULL, OPT_JSON},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int print_output(const char *verb, const json_t *answer)
{
	static const char *const streams[] = {"stdout", "stderr"};
	for (int i = 0; i < 2; i++) {
		json_t *text = json_object_get(answer, streams[i]);
		char enc[32];
		snprintf(enc, sizeof(enc), "%s_encoding", streams[i]);
		if (!json_is_string(text))
			continue;
		fflush(stdout);
		int r = cli_write_output(i == 0 ? STDOUT_FILENO : STDERR_FILENO, text,
					 json_object_get(answer, enc));
		if (r == -EPROTO)
			return cli_fail("%s: agentboxd sent output in an encoding unknown here",
					verb);
		if (r < 0)
			return cli_fail("%s: writing the output: %s", verb, strerror(-r));
	}
	if (json_is_true(json_object_get(answer, "truncated")))
		fprintf(stderr,
			"agentbox: %s: the process wrote more output than agentboxd keeps; "
			"the rest is not shown\n",
			verb);
	return 0;
}

static int proc_output(int argc, char **argv)
{
	const char *verb = "proc output", *socket_path = NULL;
	bool follow = false, as_json = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":fh", output_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(output_help, stdout);
			return 0;
		case 'f':
			follow = true;
			break;
		case OPT_JSON:
			as_json = true;
			break;
		case CLI_OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	if (follow && as_json)
		return cli_fail("%s: -f and --json exclude each other", verb);
	char target[CLIENT_TARGET_MAX];
	int rc = id_and_pid(verb, argc, argv, follow ? "/output?follow=1" : "/output", target,
			    sizeof(target));
	if (rc)
		return rc;
	struct error err = {0};
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (follow) {
		rc = cli_command_stream(&c, verb, "GET", target, NULL);
	} else {
		_cleanup_json_ json_t *answer = NULL;
		if (client_call(&c, "GET", target, NULL, &answer, &err) < 0)
			rc = cli_fail("%s: %s", verb, err.msg);
		else if (as_json &&
			 (client_print_json(stdout, answer) < 0 || fflush(stdout) == EOF))
			rc = cli_fail("%s: cannot write the output", verb);
		else if (!as_json)
			rc = print_output(verb, answer);
	}
	client_release(&c);
	return rc;
}

/* ---- kill ---------------------------------------------------------------------- */

static const char kill_help[] =
    "usage: agentbox proc kill [OPTIONS] ID PID\n"
    "\n"
    "Send a signal to process PID of sandbox ID and its whole process group\n"
    "(SIGKILL unless -s says otherwise). Prints the pid.\n"
    "\n"
    "options:\n"
    "  -s, --signal SIG  the signal: a number (15) or a name (TERM, SIGTERM,\n"
    "                    INT, HUP, KILL, QUIT, USR1, USR2, STOP, CONT)\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 sent; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; (process_ended) for one that has ended).\n";

static const struct option kill_options[] = {
    {"signal", required_argument, NULL, 's'},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

/* A signal's number from "15", "TERM" or "SIGTERM"; -EINVAL for none. */
static int parse_signal(const char *arg)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {
	    {"HUP", SIGHUP},   {"INT", SIGINT},	  {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
	    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"STOP", SIGSTOP},
	    {"CONT", SIGCONT}, {"ALRM", SIGALRM},
	};
	uint64_t n;
	if (parse_u64(arg, &n) == 0)
		return n >= 1 && n <= 64 ? (int)n : -EINVAL;
	const char *name = strncasecmp(arg, "SIG", 3) == 0 ? arg + 3 : arg;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i].name) == 0)
			return names[i].sig;
	return -EINVAL;
}

static int proc_kill(int argc, char **argv)
{
	const char *verb = "proc kill", *socket_path = NULL;
	int sig = SIGKILL, opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":s:h", kill_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(kill_help, stdout);
			return 0;
		case 's':
			if ((sig = parse_signal(optarg)) < 0)
				return cli_fail("%s: -s: '%s' is not a signal (e.g. TERM, 15)",
						verb, optarg);
			break;
		case CLI_OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	char target[CLIENT_TARGET_MAX];
	int rc = id_and_pid(verb, argc, argv, "/kill", target, sizeof(target));
	if (rc)
		return rc;
	_cleanup_json_ json_t *body = json_pack("{s:i}", "signal", sig);
	if (!body)
		return cli_fail("%s: out of memory", verb);
	struct error err = {0};
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (client_call(&c, "POST", target, body, NULL, &err) < 0)
		rc = cli_fail("%s: %s", verb, err.msg);
	else if (printf("%s\n", argv[optind + 1]) < 0 || fflush(stdout) == EOF)
		rc = cli_fail("%s: cannot write the output", verb);
	client_release(&c);
	return rc;
}

static const struct verb subverbs[] = {
    {"ls", NULL, proc_ls},
    {"output", NULL, proc_output},
    {"kill", NULL, proc_kill},
};

int verb_proc(int argc, char **argv)
{
	return cli_dispatch("proc", help, subverbs, sizeof(subverbs) / sizeof(subverbs[0]), argc,
			    argv);
}
