/*
 * agentbox - run commands in sandboxes.
 *
 * main() only takes the options before the verb (--cacert), finds the
 * verb and hands over; each verb lives in its own verb-*.c file.
 *
 * Built twice (src/cli/meson.build): agentbox, without TLS, and
 * agentbox-tls (AGENTBOX_TLS), the same with OpenSSL. agentbox hands a
 * verb that talks to an https:// AGENTBOX_URL to agentbox-tls, beside it,
 * with the same arguments: libcrypto's relocations would cost every start
 * of a sandbox (agentbox run) a few ms.
 */
#include "cli/cli.h"

#include "base/buf.h"
#include "cli/options.h"
#include "client/client.h"
#include "client/term.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct verb verbs[] = {
    {"run", "run a command in a new sandbox and return its exit status", verb_run},
    {"info", "show which isolation layers this host provides", verb_info},
    {"gc", "reclaim what crashed runs left behind", verb_gc},
    {"submit", "queue a task with agentboxd and print its id", verb_submit},
    {"status", "show a task as JSON", verb_status},
    {"wait", "follow a task to its end; the exit status tells how it ended", verb_wait},
    {"logs", "print a task's output (-f: follow it)", verb_logs},
    {"cancel", "cancel a task", verb_cancel},
    {"artifacts", "download or list a task's artifacts", verb_artifacts},
    {"rm", "remove ended tasks: their records and files", verb_rm},
    {"ps", "list tasks", verb_ps},
    {"sandbox", "create, list, pause, resume, remove interactive sandboxes", verb_sandbox},
    {"exec", "run a command in an interactive sandbox", verb_exec},
    {"cp", "copy a file into or out of an interactive sandbox", verb_cp},
    {"proc", "list a sandbox's processes, print their output, signal them", verb_proc},
    {"files", "list, remove, make files and directories of a sandbox", verb_files},
    {"tenant", "create, list, show, remove tenants (admin)", verb_tenant},
    {"key", "create, list, revoke API keys (admin)", verb_key},
    {"whoami", "show the tenant and role agentboxd takes us for", verb_whoami},
    {"audit", "show agentboxd's audit log (admin)", verb_audit},
    {"image", "import, list, inspect, remove images", verb_image},
};

int cli_fail(const char *fmt, ...)
{
	_cleanup_buf_ struct buf msg = {0};
	_cleanup_buf_ struct buf line = {0};
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&msg, fmt, ap);
	va_end(ap);
	/* a reason may quote what agentboxd, a task or a sandbox wrote */
	buf_puts(&line, "agentbox: ");
	term_escape(msg.data ? msg.data : "", msg.len, 0, &line);
	buf_puts(&line, "\n");
	if (msg.failed || line.failed)
		fputs("agentbox: out of memory\n", stderr);
	else
		fputs(line.data, stderr);
	return EXIT_AGENTBOX;
}

int cli_print_text(const char *s)
{
	_cleanup_buf_ struct buf line = {0};
	term_escape(s, strlen(s), 0, &line);
	buf_puts(&line, "\n");
	if (line.failed || fputs(line.data, stdout) == EOF || fflush(stdout) == EOF)
		return -EIO;
	return 0;
}

int cli_option_error(const char *verb, int opt, char **argv)
{
	if (opt == ':')
		return cli_fail("%s: option '%s' needs a value", verb, argv[optind - 1]);
	return cli_fail("%s: unknown option '%s' (see agentbox %s --help)", verb, argv[optind - 1],
			verb);
}

/* --socket and --help, and --json (which changes nothing) when json_ok. */
static int parse_socket(const char *verb, const char *help, bool json_ok, int argc, char **argv,
			const char **ret_socket)
{
	static const struct option options[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, 'j'},
	    {0},
	};
	const char *socket_path = NULL;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		if (opt == 'h') {
			fputs(help, stdout);
			return 0;
		}
		if (opt == 'j' && json_ok)
			continue;
		if (opt != 's')
			return cli_option_error(verb, opt == 'j' ? '?' : opt, argv);
		socket_path = optarg;
	}
	*ret_socket = socket_path;
	return -1;
}

int cli_parse_socket_only(const char *verb, const char *help, int argc, char **argv,
			  const char **ret_socket)
{
	return parse_socket(verb, help, false, argc, argv, ret_socket);
}

static int parse_id(const char *verb, const char *what, const char *help, bool json_ok, int argc,
		    char **argv, const char **ret_socket, const char **ret_id)
{
	int rc = parse_socket(verb, help, json_ok, argc, argv, ret_socket);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one %s ID (see agentbox %s --help)", verb, what, verb);
	*ret_id = argv[optind];
	return -1;
}

int cli_parse_id_only(const char *verb, const char *what, const char *help, int argc, char **argv,
		      const char **ret_socket, const char **ret_id)
{
	return parse_id(verb, what, help, false, argc, argv, ret_socket, ret_id);
}

int cli_parse_id_json(const char *verb, const char *what, const char *help, int argc, char **argv,
		      const char **ret_socket, const char **ret_id)
{
	return parse_id(verb, what, help, true, argc, argv, ret_socket, ret_id);
}

int cli_parse_list_options(const char *verb, const char *help, int nargs, const char *operands,
			   int argc, char **argv, struct cli_list_opts *ret)
{
	enum { OPT_LIST_JSON = CLI_OPT_VERB };
	static const struct option options[] = {
	    {"json", no_argument, NULL, OPT_LIST_JSON},
	    {"quiet", no_argument, NULL, 'q'},
	    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	*ret = (struct cli_list_opts){0};
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":qh", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case 'q':
			ret->quiet = true;
			break;
		case OPT_LIST_JSON:
			ret->json = true;
			break;
		case CLI_OPT_SOCKET:
			ret->socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	if (argc - optind != nargs)
		return cli_fail("%s: give %s (see agentbox %s --help)", verb, operands, verb);
	if (ret->quiet && ret->json)
		return cli_fail("%s: -q and --json exclude each other", verb);
	return -1;
}

int cli_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_delete_each(const char *verb, const char *what, const char *socket_path, int first,
		    int argc, char **argv, int (*check)(const char *verb, const char *name),
		    void (*target)(char *buf, size_t size, const char *name))
{
	if (first >= argc)
		return cli_fail("%s: give one or more %s (see agentbox %s --help)", verb, what,
				verb);
	int rc;
	for (int i = first; i < argc; i++)
		if ((rc = check(verb, argv[i])) != 0)
			return rc;
	struct error err = {0};
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	rc = 0;
	char path[CLIENT_TARGET_MAX];
	for (int i = first; i < argc; i++) {
		target(path, sizeof(path), argv[i]);
		if (client_call(&c, "DELETE", path, NULL, NULL, &err) < 0) {
			rc = cli_fail("%s: %s", verb, err.msg);
			continue;
		}
		if (printf("%s\n", argv[i]) < 0 || fflush(stdout) == EOF) {
			rc = cli_fail("%s: cannot write the output", verb);
			break;
		}
	}
	client_release(&c);
	return rc;
}

int cli_dispatch(const char *verb, const char *help, const struct verb *commands, size_t n,
		 int argc, char **argv)
{
	if (argc < 2) {
		fputs(help, stderr);
		return EXIT_AGENTBOX;
	}
	if (cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
		fputs(help, stdout);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].main(argc - 1, argv + 1);
	return cli_fail("%s: unknown command '%s' (see agentbox %s --help)", verb, argv[1], verb);
}

static int usage(FILE *out)
{
	fputs("usage: agentbox [--cacert FILE] VERB [OPTIONS] ...\n\nverbs:\n", out);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(out, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
	fputs("\n  --cacert FILE  the CAs (PEM) that an https:// AGENTBOX_URL's certificate\n"
	      "                 must come from (default $AGENTBOX_CACERT, else the\n"
	      "                 system's)\n"
	      "\n`agentbox VERB --help` describes one verb.\n"
	      "exit status: 0 on success, 125 when agentbox itself fails;\n"
	      "run and exec return their command's status (see their --help).\n",
	      out);
	return out == stdout ? 0 : EXIT_AGENTBOX;
}

/* Sandboxes inherit fds 0-2: make sure they exist, so nothing else lands there. */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			(void)open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

/*
 * The options before the verb, for every verb that talks to agentboxd:
 * --cacert FILE (or --cacert=FILE). How many arguments they took, or -1
 * after a usage error (said).
 */
static int global_options(int argc, char **argv)
{
	int i = 1;
	while (i < argc && strncmp(argv[i], "--cacert", 8) == 0) {
		const char *v = NULL;
		if (argv[i][8] == '=') {
			v = argv[i] + 9;
			i++;
		} else if (argv[i][8] == '\0' && i + 1 < argc) {
			v = argv[i + 1];
			i += 2;
		} else if (argv[i][8] == '\0') {
			cli_fail("option '--cacert' needs a value");
			return -1;
		} else {
			break; /* not ours: the verb lookup says so */
		}
		if (!*v) {
			cli_fail("--cacert: an empty path");
			return -1;
		}
		client_set_cacert(v);
	}
	return i - 1;
}

#ifndef AGENTBOX_TLS
/* Verbs that never talk to agentboxd: they never need TLS. */
static bool verb_is_local(const char *verb)
{
	static const char *const local[] = {"run", "info",   "gc",	 "help",
					    "-h",  "--help", "--version"};
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if (strcmp(verb, local[i]) == 0)
			return true;
	return false;
}

/*
 * An https:// AGENTBOX_URL for a verb that talks to agentboxd: become
 * agentbox-tls, beside us, with argv as it is. Returns only when there is
 * nothing to hand over (0), or after saying why it could not (125).
 */
static int hand_over_https(int argc, char **argv, const char *verb)
{
	const char *url = getenv("AGENTBOX_URL");
	if (!url || strncasecmp(url, "https://", 8) != 0 || !verb || verb_is_local(verb))
		return 0;
	char exe[PATH_MAX], path[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return cli_fail("https: cannot find agentbox-tls: /proc/self/exe: %s",
				strerror(errno));
	exe[n] = '\0';
	snprintf(path, sizeof(path), "%s/agentbox-tls", dirname(exe));
	(void)argc;
	execv(path, argv);
	return cli_fail("https: cannot run %s: %s", path, strerror(errno));
}
#endif

int main(int argc, char **argv)
{
	ensure_std_fds();
	int taken = global_options(argc, argv);
#ifndef AGENTBOX_TLS
	if (taken >= 0 && taken + 1 < argc) {
		int rc = hand_over_https(argc, argv, argv[taken + 1]);
		if (rc)
			return rc;
	}
#endif
	if (taken < 0)
		return EXIT_AGENTBOX;
	argc -= taken;
	argv += taken;
	if (argc < 2)
		return usage(stderr);
	if (cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0)
		return usage(stdout);
	if (strcmp(argv[1], "--version") == 0) {
		puts("agentbox " AGENTBOX_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(argv[1], verbs[i].name) == 0)
			return verbs[i].main(argc - 1, argv + 1);
	return cli_fail("unknown verb '%s' (see agentbox --help)", argv[1]);
}
