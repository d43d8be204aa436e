/*
 * agentbox exec: run a command in an interactive sandbox and become it, as
 * far as a caller can tell: its stdout and stderr are copied to ours as
 * they arrive (Server-Sent Events from POST /v1/sandboxes/ID/exec, written
 * unbuffered), and its exit status is ours. With -d the command is only
 * started, and its pid printed.
 *
 * The stream's events: start {"pid"}, stdout and stderr {"data"}, and
 * last exit {"exit_code", "signal", "oom_killed", "timed_out", ...}. A
 * daemon that answers with the whole result as JSON instead is understood
 * too. The command goes on in the sandbox if we go away (the API's rule).
 * With -t it runs on a terminal instead (exec-tty.c).
 */
#include "base/base64.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/exec-tty.h"
#include "cli/options.h"
#include "client/client.h"
#include "cli/command-stream.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* What -i sends at most: the API's limit on stdin. */
#define EXEC_STDIN_MAX (1u << 20)

static const char help[] =
    "usage: agentbox exec [OPTIONS] ID [--] COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND in interactive sandbox ID (agentbox sandbox create) and wait\n"
    "for it. What it writes to stdout and stderr is copied to ours as it\n"
    "comes, and agentbox exits with its exit status. COMMAND is looked up in\n"
    "the sandbox's PATH. Options come before or after ID, up to -- or\n"
    "COMMAND. Interrupting agentbox does not stop the command: it runs on in\n"
    "the sandbox (use --timeout).\n"
    "\n"
    "options:\n"
    "  --env KEY=VALUE      add to (or override) the sandbox's environment;\n"
    "                       repeatable\n"
    "  --cwd DIR            working directory, absolute (default: the sandbox's,\n"
    "                       its image's WorkingDir, else /workspace)\n"
    "  --timeout DUR        kill the command's process group after DUR (90s,\n"
    "                       5m; whole seconds, rounded up; at most 24h)\n"
    "  -i, --stdin          send our stdin, read to its end, as the command's\n"
    "                       (UTF-8 text, at most 1 MiB); without it the\n"
    "                       command's stdin is empty\n"
    "  -d, --detach         start the command in the background and print its\n"
    "                       pid (in the sandbox); do not wait for it\n"
    "  -t, --tty            run the command on a terminal in the sandbox, of our\n"
    "                       terminal's size (and resized with it); its output\n"
    "                       comes to ours as it is. With -i (-it), what we type\n"
    "                       goes to it, our terminal raw meanwhile: Ctrl-C\n"
    "                       interrupts the command, not agentbox. Ending\n"
    "                       agentbox (a signal) hangs the terminal up "
    "(SIGHUP)\n" CLI_HELP_SOCKET_WIDE CLIENT_HELP_ENVIRONMENT "\n"
    "exit status:\n"
    "  N    the command's own exit status; 128+N when signal N killed it\n"
    "  126  the command could not be executed\n"
    "  127  the command was not found\n"
    "  124  --timeout passed and the command was killed\n"
    "       (\"agentbox: command timed out\" on stderr)\n"
    "  137  the command ran out of memory and was killed\n"
    "       (\"agentbox: command killed: out of memory\" on stderr)\n"
    "  125  agentbox or agentboxd failed or refused (one line on stderr;\n"
    "       an error of agentboxd's ends in its code, e.g. (sandbox_paused))\n"
    "  with -d: 0 started (its pid is on stdout), or 125.\n";

enum {
	OPT_CWD = CLI_OPT_VERB,
	OPT_TIMEOUT,
};

static const struct option options[] = {
    {"env", required_argument, NULL, CLI_OPT_ENV},
    {"cwd", required_argument, NULL, OPT_CWD},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"stdin", no_argument, NULL, 'i'},
    {"detach", no_argument, NULL, 'd'},
    {"tty", no_argument, NULL, 't'},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

struct exec_args {
	json_t *body;
	const char *socket_path;
	const char *id;
	bool stdin, detach, tty, help;
};

static int parse_args(int argc, char **argv, struct exec_args *a, struct error *err)
{
	opterr = 0;
	optind = 1;
	int opt;
	/*
	 * "+": options stop at the first operand. They come before ID and
	 * after it, up to "--" or COMMAND, so the command's own flags are its
	 * own: getopt resumes once past ID.
	 */
	for (;;) {
		int before = optind;
		opt = getopt_long(argc, argv, "+:idth", options, NULL);
		if (opt == -1) {
			/* "--" before ID ends the options as well */
			bool dashes = optind == before + 1 && strcmp(argv[before], "--") == 0;
			if (a->id || optind >= argc)
				break;
			a->id = argv[optind++];
			if (dashes)
				break;
			continue;
		}
		int r = cli_body_option(a->body, opt, optarg, err);
		if (r != -ENOENT) {
			if (r < 0)
				return r;
			continue;
		}
		uint64_t ms;
		switch (opt) {
		case 'h':
			a->help = true;
			return 0;
		case 'i':
			a->stdin = true;
			break;
		case 't':
			a->tty = true;
			break;
		case 'd':
			a->detach = true;
			break;
		case OPT_CWD: {
			if (optarg[0] != '/')
				return error_set(err, EINVAL, "--cwd: '%s' is not an absolute path",
						 optarg);
			json_t *cwd = json_string(optarg);
			if (!cwd)
				return error_set(err, EINVAL, "--cwd: '%s' is not UTF-8 text",
						 optarg);
			if ((r = cli_body_set(a->body, "cwd", cwd, err)) < 0)
				return r;
			break;
		}
		case OPT_TIMEOUT:
			if ((r = cli_parse_duration("--timeout", optarg, &ms, err)) < 0)
				return r;
			r = cli_body_set(a->body, "timeout_s",
					 json_integer((json_int_t)cli_whole_seconds(ms)), err);
			if (r < 0)
				return r;
			break;
		case CLI_OPT_SOCKET:
			a->socket_path = optarg;
			break;
		case ':':
			return error_set(err, EINVAL, "option '%s' needs a value",
					 argv[optind - 1]);
		default:
			return error_set(err, EINVAL,
					 "unknown option '%s' (see agentbox exec --help)",
					 argv[optind - 1]);
		}
	}
	if (!a->id)
		return error_set(err, EINVAL,
				 "no sandbox given (agentbox exec [OPTIONS] ID -- COMMAND)");
	if (optind >= argc)
		return error_set(err, EINVAL,
				 "no command given (agentbox exec [OPTIONS] ID -- COMMAND)");
	json_t *command = json_array();
	if (cli_body_set(a->body, "command", command, err) < 0)
		return -ENOMEM;
	for (int i = optind; i < argc; i++) {
		json_t *s = json_string(argv[i]);
		if (!s)
			return error_set(err, EINVAL, "the command's argument %d is not UTF-8 text",
					 i - optind);
		if (json_array_append_new(command, s) < 0)
			return error_set_errno(err, ENOMEM, "building the request");
	}
	if (a->detach && a->tty)
		return error_set(err, EINVAL, "-t and -d: a terminal lives with agentbox");
	if (a->detach && cli_body_set(a->body, "background", json_true(), err) < 0)
		return -ENOMEM;
	return 0;
}

/* -i: all of our stdin, at most EXEC_STDIN_MAX bytes of UTF-8 text, into body.stdin. */
static int read_stdin(json_t *body, struct error *err)
{
	char *buf = malloc(EXEC_STDIN_MAX + 1);
	if (!buf)
		return error_set_errno(err, ENOMEM, "--stdin");
	/* one byte more than allowed, to tell "exactly the most" from "more" */
	ssize_t n = read_all(STDIN_FILENO, buf, EXEC_STDIN_MAX + 1);
	int r = 0;
	if (n < 0)
		r = error_set_errno(err, (int)-n, "--stdin: reading stdin");
	else if ((size_t)n > EXEC_STDIN_MAX)
		r = error_set(err, EFBIG, "--stdin: stdin holds more than %u MiB",
			      EXEC_STDIN_MAX >> 20);
	else {
		json_t *s = json_stringn(buf, (size_t)n);
		if (!s)
			r = error_set(err, EINVAL, "--stdin: stdin is not UTF-8 text");
		else
			r = cli_body_set(body, "stdin", s, err);
	}
	free(buf);
	return r;
}

static int detach(struct client *c, const char *target, const json_t *body)
{
	struct error err = {0};
	_cleanup_json_ json_t *answer = NULL;
	if (client_call(c, "POST", target, body, &answer, &err) < 0)
		return cli_fail("exec: %s", err.msg);
	json_t *pid = json_object_get(answer, "pid");
	if (!json_is_integer(pid))
		return cli_fail("exec: agentboxd's answer has no pid");
	if (printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(pid)) < 0 ||
	    fflush(stdout) == EOF)
		return cli_fail("exec: cannot write the output");
	return 0;
}

int exec_exit_status(const json_t *ex)
{
	return cli_command_exit_status("exec", ex);
}

int verb_exec(int argc, char **argv)
{
	_cleanup_json_ json_t *body = json_object();
	struct exec_args a = {.body = body}; /* borrowed: body owns it */
	struct error err = {0};
	if (!body)
		return cli_fail("exec: out of memory");
	int rc;
	char target[CLIENT_TARGET_MAX];
	struct client c = {0};
	if (parse_args(argc, argv, &a, &err) < 0) {
		rc = cli_fail("exec: %s", err.msg);
	} else if (a.help) {
		fputs(help, stdout);
		rc = 0;
	} else if (client_sandbox_target(target, sizeof(target), a.id, "/exec", &err) < 0 ||
		   (a.stdin && !a.tty && read_stdin(a.body, &err) < 0) ||
		   client_init(&c, a.socket_path, &err) < 0) {
		rc = cli_fail("exec: %s", err.msg);
	} else {
		rc = a.tty	? exec_tty_run(&c, target, a.body, a.stdin)
		     : a.detach ? detach(&c, target, a.body)
				: cli_command_stream(&c, "exec", "POST", target, a.body);
	}
	client_release(&c);
	return rc;
}
