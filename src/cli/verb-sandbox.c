/*
 * agentbox sandbox: interactive sandboxes, one subcommand each: create,
 * ls, inspect, pause, resume, timeout, rm. A sandbox lives in agentboxd
 * until it is removed, expires or dies; exec (verb-exec.c) runs commands
 * in it and cp (verb-cp.c) copies files in and out.
 */
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define LS_STATUS_WIDTH 16

static const char help[] =
    "usage: agentbox sandbox COMMAND [OPTIONS] ...\n"
    "\n"
    "Interactive sandboxes: a sandbox that stays up, in agentboxd, until it\n"
    "is removed, its timeout passes or it dies, and runs many commands\n"
    "(agentbox exec) and file copies (agentbox cp) along the way.\n"
    "\n"
    "commands:\n"
    "  create    create a sandbox and print its id\n"
    "  ls        list sandboxes\n"
    "  inspect   print a sandbox as JSON\n"
    "  pause     freeze every process of a sandbox\n"
    "  resume    thaw a paused sandbox\n"
    "  timeout   set when a sandbox expires, counted from now\n"
    "  network   print a sandbox's network use and what its network refused\n"
    "  rm        remove sandboxes: their processes are killed, their files gone\n"
    "  commit    make a sandbox of an image into a new image of the store\n"
    "\n"
    "`agentbox sandbox COMMAND --help` describes one.\n"
    "exit status: 0 done; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

/* ---- create ------------------------------------------------------------- */

static const char create_help[] =
    "usage: agentbox sandbox create [OPTIONS]\n"
    "\n"
    "Create an interactive sandbox and print its id (sbx_...). It lives until\n"
    "agentbox sandbox rm, until its timeout passes (agentbox sandbox timeout\n"
    "moves it), or until it dies. Run commands in it with agentbox exec, copy\n"
    "files in and out with agentbox cp.\n"
    "\n"
    "options (what is not given is agentboxd's default):\n" CLI_HELP_LIMITS
    "  --timeout DUR        end it DUR from now (default 5m; at most 7d): 90s,\n"
    "                       5m, 1h30m, sent in whole seconds, rounded up\n"
    "  --env KEY=VALUE      a variable of every command run in it; repeatable\n" CLI_HELP_NETWORK
	CLI_HELP_IMAGE CLI_HELP_METADATA CLI_HELP_SOCKET_WIDE CLI_HELP_SIZES CLIENT_HELP_ENVIRONMENT
    "\n"
    "exit status: 0 created (the id is on stdout); 125 agentbox or agentboxd\n"
    "failed or refused (one line on stderr; an error of agentboxd's ends in\n"
    "its code and the field at fault).\n";

enum { OPT_TIMEOUT = CLI_OPT_VERB };

static const struct option create_options[] = {
    CLI_LIMIT_OPTIONS,
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"env", required_argument, NULL, CLI_OPT_ENV},
    {"metadata", required_argument, NULL, CLI_OPT_METADATA},
    {"network", required_argument, NULL, CLI_OPT_NETWORK},
    {"network-rate", required_argument, NULL, CLI_OPT_NETWORK_RATE},
    {"secret", required_argument, NULL, CLI_OPT_SECRET},
    CLI_IMAGE_OPTIONS,
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int create_body(int argc, char **argv, json_t *body, const char **ret_socket, bool *ret_help,
		       struct error *err)
{
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", create_options, NULL)) != -1) {
		int r = cli_body_option(body, opt, optarg, err);
		if (r != -ENOENT) {
			if (r < 0)
				return r;
			continue;
		}
		uint64_t ms;
		switch (opt) {
		case 'h':
			*ret_help = true;
			return 0;
		case OPT_TIMEOUT:
			if ((r = cli_parse_duration("--timeout", optarg, &ms, err)) < 0)
				return r;
			r = cli_body_set(body, "timeout_s",
					 json_integer((json_int_t)cli_whole_seconds(ms)), err);
			if (r < 0)
				return r;
			break;
		case CLI_OPT_SOCKET:
			*ret_socket = optarg;
			break;
		case ':':
			return error_set(err, EINVAL, "option '%s' needs a value",
					 argv[optind - 1]);
		default:
			return error_set(err, EINVAL,
					 "unknown option '%s' (see agentbox sandbox create --help)",
					 argv[optind - 1]);
		}
	}
	if (optind < argc)
		return error_set(err, EINVAL,
				 "unexpected argument '%s' (see agentbox sandbox create --help)",
				 argv[optind]);
	return cli_body_finish(body, err);
}

/* Print the string member key of an answer on a line of its own. */
static int print_member(const char *verb, const json_t *answer, const char *key)
{
	const char *v = json_string_value(json_object_get(answer, key));
	if (!v)
		return cli_fail("%s: agentboxd's answer has no %s", verb, key);
	if (cli_print_text(v) < 0)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

static int sandbox_create(int argc, char **argv)
{
	_cleanup_json_ json_t *body = json_object();
	if (!body)
		return cli_fail("sandbox create: out of memory");
	const char *socket_path = NULL;
	bool want_help = false;
	struct error err = {0};
	if (create_body(argc, argv, body, &socket_path, &want_help, &err) < 0)
		return cli_fail("sandbox create: %s", err.msg);
	if (want_help) {
		fputs(create_help, stdout);
		return 0;
	}
	_cleanup_json_ json_t *sandbox = NULL;
	struct client c;
	int r = client_init(&c, socket_path, &err);
	if (r == 0)
		r = client_call(&c, "POST", "/v1/sandboxes", body, &sandbox, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("sandbox create: %s", err.msg);
	return print_member("sandbox create", sandbox, "id");
}

/* ---- ls ----------------------------------------------------------------- */

static const char ls_help[] =
    "usage: agentbox sandbox ls [OPTIONS]\n"
    "\n"
    "List sandboxes, oldest first, one line each: ID, STATUS (running,\n"
    "paused, or ended and why), CREATED (how long ago) and EXPIRES (how long\n"
    "from now). Without -a only running and paused sandboxes are listed.\n"
    "\n"
    "options:\n"
    "  -a, --all       ended sandboxes too\n"
    "  --json          print a JSON array of the sandboxes as agentboxd shows\n"
    "                  them, instead of the table\n"
    "  -q, --quiet     print only their ids, one a line\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr).\n";

enum { OPT_JSON = CLI_OPT_VERB };

static const struct option ls_options[] = {
    {"all", no_argument, NULL, 'a'},   {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, 'q'}, {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},  {0},
};

struct lister {
	int64_t now;
	bool quiet;  /* -q: ids only */
	json_t *all; /* --json: every sandbox, page after page; else NULL */
};

static void print_sandbox(const json_t *sb, int64_t now)
{
	char id[CLIENT_ID_MAX + 1], status[LS_STATUS_WIDTH + 16];
	char created[32] = "-", expires[32] = "-";
	/* what the daemon sent goes to the terminal escaped (client/term.h) */
	struct term_line l;
	const char *s = json_string_value(json_object_get(sb, "id"));
	term_line_init(&l, id, sizeof(id));
	term_line_adds(&l, s ? s : "?");
	s = json_string_value(json_object_get(sb, "status"));
	const char *reason = json_string_value(json_object_get(sb, "end_reason"));
	term_line_init(&l, status, sizeof(status));
	term_line_adds(&l, s ? s : "?");
	if (s && reason && strcmp(s, "ended") == 0) {
		term_line_adds(&l, " (");
		term_line_adds(&l, reason);
		term_line_adds(&l, ")");
	}
	int64_t t;
	s = json_string_value(json_object_get(sb, "created_at"));
	if (s && client_parse_time(s, &t) == 0) {
		char age[16];
		client_format_age(now - t, age, sizeof(age));
		snprintf(created, sizeof(created), "%s ago", age);
	}
	s = json_string_value(json_object_get(sb, "expires_at"));
	const char *st = json_string_value(json_object_get(sb, "status"));
	if (s && client_parse_time(s, &t) == 0 && !(st && strcmp(st, "ended") == 0)) {
		char left[16];
		client_format_age(t - now, left, sizeof(left));
		if (t > now)
			snprintf(expires, sizeof(expires), "in %s", left);
		else
			snprintf(expires, sizeof(expires), "now");
	}
	printf("%-30s  %-*s  %-9s  %s\n", id, LS_STATUS_WIDTH, status, created, expires);
}

static int ls_page(json_t *sandboxes, int page, void *data, struct error *err)
{
	struct lister *l = data;
	if (l->all) {
		if (json_array_extend(l->all, sandboxes) < 0)
			return error_set_errno(err, ENOMEM, "collecting the list");
		return 0;
	}
	size_t i;
	json_t *sb;
	if (l->quiet) {
		json_array_foreach(sandboxes, i, sb)
		{
			const char *id = json_string_value(json_object_get(sb, "id"));
			if (id && cli_print_text(id) < 0)
				return error_set(err, EIO, "cannot write the output");
		}
		return 0;
	}
	if (page == 0)
		printf("%-30s  %-*s  %-9s  %s\n", "ID", LS_STATUS_WIDTH, "STATUS", "CREATED",
		       "EXPIRES");
	json_array_foreach(sandboxes, i, sb)
	{
		print_sandbox(sb, l->now);
	}
	return 0;
}

static int sandbox_ls(int argc, char **argv)
{
	const char *socket_path = NULL;
	bool all = false, as_json = false, quiet = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":aqh", ls_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(ls_help, stdout);
			return 0;
		case 'a':
			all = true;
			break;
		case OPT_JSON:
			as_json = true;
			break;
		case 'q':
			quiet = true;
			break;
		case CLI_OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error("sandbox ls", opt, argv);
		}
	}
	if (optind < argc)
		return cli_fail("sandbox ls: unexpected argument '%s' (see agentbox sandbox ls "
				"--help)",
				argv[optind]);
	if (quiet && as_json)
		return cli_fail("sandbox ls: -q and --json exclude each other");

	struct error err = {0};
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("sandbox ls: %s", err.msg);
	struct lister l = {
	    .now = wall_clock_ms(), .quiet = quiet, .all = as_json ? json_array() : NULL};
	const char *target = all ? "/v1/sandboxes?status=running,paused,ended"
				 : "/v1/sandboxes?status=running,paused";
	int rc = 0;
	if (as_json && !l.all)
		rc = cli_fail("sandbox ls: out of memory");
	else if (client_list(&c, target, "sandboxes", ls_page, &l, &err) < 0)
		rc = cli_fail("sandbox ls: %s", err.msg);
	else if (as_json && client_print_json(stdout, l.all) < 0)
		rc = cli_fail("sandbox ls: cannot write the output");
	client_release(&c);
	json_decref(l.all);
	if (fflush(stdout) == EOF)
		return cli_fail("sandbox ls: cannot write the output");
	return rc;
}

/* ---- inspect, pause, resume --------------------------------------------- */

static const char inspect_help[] =
    "usage: agentbox sandbox inspect [OPTIONS] ID\n"
    "\n"
    "Print sandbox ID as agentboxd knows it: a JSON object with id, status,\n"
    "created_at, expires_at, ended_at, end_reason, end_detail, limits and\n"
    "metadata, indented.\n"
    "\n"
    "options:\n"
    "  --json          the same: the output is JSON\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 printed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (not_found)).\n";

static const char pause_help[] =
    "usage: agentbox sandbox pause [OPTIONS] ID\n"
    "\n"
    "Freeze every process of sandbox ID: it uses no CPU and keeps its memory\n"
    "and processes; its timeout still runs. exec and cp are refused until it\n"
    "is resumed. Pausing a paused sandbox is harmless. Prints its status as\n"
    "agentboxd answered it (paused).\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 paused; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (sandbox_ended)).\n";

static const char resume_help[] =
    "usage: agentbox sandbox resume [OPTIONS] ID\n"
    "\n"
    "Thaw every process of sandbox ID after agentbox sandbox pause. Resuming\n"
    "a running sandbox is harmless. Prints its status as agentboxd answered\n"
    "it (running).\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 resumed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (sandbox_ended)).\n";

/* A subcommand that takes one ID, makes one call and prints a member (NULL = all, as JSON). */
static int one_call(const char *verb, const char *help_text, const char *method, const char *suffix,
		    const char *print, int argc, char **argv)
{
	const char *socket_path, *id;
	/* a subcommand that prints JSON takes --json too, which changes nothing */
	int rc = print
		     ? cli_parse_id_only(verb, "sandbox", help_text, argc, argv, &socket_path, &id)
		     : cli_parse_id_json(verb, "sandbox", help_text, argc, argv, &socket_path, &id);
	if (rc >= 0)
		return rc;
	struct error err = {0};
	_cleanup_json_ json_t *sandbox = NULL;
	if (client_sandbox_request(socket_path, method, id, suffix, NULL, &sandbox, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (print)
		return print_member(verb, sandbox, print);
	if (client_print_json(stdout, sandbox) < 0 || fflush(stdout) == EOF)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

static const char network_help[] =
    "usage: agentbox sandbox network [OPTIONS] ID\n"
    "\n"
    "Print the network of sandbox ID as JSON, indented: its mode, the bytes it\n"
    "received and sent (bytes_in, bytes_out) and what its network refused\n"
    "(denied, the newest 1000 of denied_total), as docs/api.md describes.\n"
    "\n"
    "options:\n"
    "  --json          the same: the output is JSON\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 printed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr).\n";

static int sandbox_network(int argc, char **argv)
{
	return one_call("sandbox network", network_help, "GET", "/network", NULL, argc, argv);
}

static int sandbox_inspect(int argc, char **argv)
{
	return one_call("sandbox inspect", inspect_help, "GET", NULL, NULL, argc, argv);
}

static int sandbox_pause(int argc, char **argv)
{
	return one_call("sandbox pause", pause_help, "POST", "/pause", "status", argc, argv);
}

static int sandbox_resume(int argc, char **argv)
{
	return one_call("sandbox resume", resume_help, "POST", "/resume", "status", argc, argv);
}

/* ---- timeout ------------------------------------------------------------ */

static const char timeout_help[] =
    "usage: agentbox sandbox timeout [OPTIONS] ID DURATION\n"
    "\n"
    "Make sandbox ID expire DURATION from now (90s, 5m, 1h30m; whole seconds,\n"
    "rounded up; at most 7d), sooner or later than it would have. Prints the\n"
    "new expiry time (expires_at, RFC 3339 in UTC).\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 set; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (sandbox_ended)).\n";

static int sandbox_timeout(int argc, char **argv)
{
	const char *verb = "sandbox timeout", *socket_path;
	int rc = cli_parse_socket_only(verb, timeout_help, argc, argv, &socket_path);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_fail("%s: give a sandbox ID and a DURATION (see agentbox %s --help)",
				verb, verb);
	struct error err = {0};
	uint64_t ms;
	if (cli_parse_duration("DURATION", argv[optind + 1], &ms, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	_cleanup_json_ json_t *body =
	    json_pack("{s:I}", "timeout_s", (json_int_t)cli_whole_seconds(ms));
	if (!body)
		return cli_fail("%s: out of memory", verb);
	_cleanup_json_ json_t *sandbox = NULL;
	if (client_sandbox_request(socket_path, "POST", argv[optind], "/timeout", body, &sandbox,
				   &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	return print_member(verb, sandbox, "expires_at");
}

/* ---- rm ------------------------------------------------------------------ */

static const char rm_help[] =
    "usage: agentbox sandbox rm [OPTIONS] ID...\n"
    "\n"
    "Remove each sandbox ID: every process in it is killed and its files are\n"
    "gone. Prints each id removed. Every ID is checked first: when one is\n"
    "malformed or names no sandbox, none is removed. A sandbox that has ended\n"
    "already is an error (sandbox_ended); the others are still removed.\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all removed; 125 agentbox or agentboxd failed for one or\n"
    "more (one line on stderr for each).\n";

static int check_sandbox(const char *verb, const char *id)
{
	char target[CLIENT_TARGET_MAX];
	struct error err = {0};
	if (client_sandbox_target(target, sizeof(target), id, NULL, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	return 0;
}

static void sandbox_target(char *buf, size_t size, const char *id)
{
	client_sandbox_target(buf, size, id, NULL, NULL); /* checked: it fits */
}

/*
 * Before any is removed, every id must name a sandbox agentboxd knows:
 * one typo must not leave the others half removed. 0, or EXIT_AGENTBOX
 * after a line on stderr for each that does not.
 */
static int check_all_exist(const char *verb, const char *socket_path, int first, int argc,
			   char **argv)
{
	int rc = 0;
	for (int i = first; i < argc; i++)
		if (check_sandbox(verb, argv[i]) != 0)
			rc = EXIT_AGENTBOX;
	if (rc)
		return rc;
	struct error err = {0};
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	char target[CLIENT_TARGET_MAX];
	for (int i = first; i < argc; i++) {
		sandbox_target(target, sizeof(target), argv[i]);
		if (client_call(&c, "GET", target, NULL, NULL, &err) < 0)
			rc = argc - first > 1 ? cli_fail("%s: %s; none removed", verb, err.msg)
					      : cli_fail("%s: %s", verb, err.msg);
	}
	client_release(&c);
	return rc;
}

static int sandbox_rm(int argc, char **argv)
{
	const char *verb = "sandbox rm", *socket_path;
	int rc = cli_parse_socket_only(verb, rm_help, argc, argv, &socket_path);
	if (rc >= 0)
		return rc;
	if (optind < argc && (rc = check_all_exist(verb, socket_path, optind, argc, argv)) != 0)
		return rc;
	return cli_delete_each(verb, "sandbox IDs", socket_path, optind, argc, argv, check_sandbox,
			       sandbox_target);
}

/* ---- the dispatch -------------------------------------------------------- */

static const struct verb subverbs[] = {
    {"create", NULL, sandbox_create},	{"ls", NULL, sandbox_ls},
    {"inspect", NULL, sandbox_inspect}, {"pause", NULL, sandbox_pause},
    {"resume", NULL, sandbox_resume},	{"timeout", NULL, sandbox_timeout},
    {"rm", NULL, sandbox_rm},		{"commit", NULL, cli_sandbox_commit},
    {"network", NULL, sandbox_network},
};

int verb_sandbox(int argc, char **argv)
{
	return cli_dispatch("sandbox", help, subverbs, sizeof(subverbs) / sizeof(subverbs[0]), argc,
			    argv);
}
