/*
 * cli.h - the agentbox command: a table of verbs, one file per verb.
 *
 * Exit statuses of every verb (run adds the command's own, see
 * verb-run.c and `agentbox run --help`):
 *   0    success
 *   125  agentbox itself failed or was used wrongly; one line on stderr says why
 */
#ifndef AGENTBOX_CLI_CLI_H
#define AGENTBOX_CLI_CLI_H

#include <stdbool.h>

#define EXIT_AGENTBOX 125

struct verb {
	const char *name;
	const char *summary;
	int (*main)(int argc, char **argv); /* argv[0] is the verb */
};

int verb_run(int argc, char **argv);
int verb_info(int argc, char **argv);
int verb_gc(int argc, char **argv);

/* The verbs that talk to agentboxd (src/client/), one file each. */
int verb_submit(int argc, char **argv);
int verb_status(int argc, char **argv);
int verb_wait(int argc, char **argv);
int verb_logs(int argc, char **argv);
int verb_cancel(int argc, char **argv);
int verb_rm(int argc, char **argv);
int verb_ps(int argc, char **argv);
/* Interactive sandboxes: `sandbox` has subcommands (create, ls, ...). */
int verb_sandbox(int argc, char **argv);
/* sandbox commit (verb-sandbox-commit.c); argv[0] is "commit". */
int cli_sandbox_commit(int argc, char **argv);
int verb_exec(int argc, char **argv);
int verb_cp(int argc, char **argv);
int verb_artifacts(int argc, char **argv);
/* A sandbox's processes (verb-proc.c) and files beyond cp (verb-files.c). */
int verb_proc(int argc, char **argv);
int verb_files(int argc, char **argv);
/* Tenants and API keys (admin; verb-tenant.c, verb-key.c), and who we are to agentboxd. */
int verb_tenant(int argc, char **argv);
int verb_key(int argc, char **argv);
int verb_whoami(int argc, char **argv);
/* agentboxd's audit log (admin; verb-audit.c). */
int verb_audit(int argc, char **argv);
/* agentboxd's images (verb-image.c): import, ls, inspect, rm, prune. */
int verb_image(int argc, char **argv);

/*
 * Print "agentbox: <fmt>\n" to stderr and return EXIT_AGENTBOX. The
 * message is escaped for a terminal (client/term.h): what it quotes of
 * agentboxd's, a task's or a sandbox's text cannot drive the terminal.
 */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Print s, a string agentboxd sent (an id, a status), escaped for a
 * terminal, and a newline, to stdout and flush it. 0 or -EIO.
 */
int cli_print_text(const char *s);

/*
 * After getopt_long() returned ':' (an option without its value) or '?'
 * (an unknown option): print the one-line reason and return EXIT_AGENTBOX.
 */
int cli_option_error(const char *verb, int opt, char **argv);

/*
 * Options of a verb that takes only --socket and --help. Returns -1 with
 * *ret_socket set (NULL when not given) and optind at the first operand,
 * to go on; else the exit status to return (0 after --help, EXIT_AGENTBOX
 * on a usage error). verb is what messages name ("sandbox rm").
 */
int cli_parse_socket_only(const char *verb, const char *help, int argc, char **argv,
			  const char **ret_socket);

/*
 * As cli_parse_socket_only(), for a verb that takes exactly one ID: what
 * names it in the usage error ("task": "give one task ID"). Returns -1
 * with *ret_id set too, to go on.
 */
int cli_parse_id_only(const char *verb, const char *what, const char *help, int argc, char **argv,
		      const char **ret_socket, const char **ret_id);

/*
 * As cli_parse_id_only(), for a verb whose output is JSON already
 * (status, sandbox inspect): --json is taken too, and changes nothing.
 */
int cli_parse_id_json(const char *verb, const char *what, const char *help, int argc, char **argv,
		      const char **ret_socket, const char **ret_id);

/*
 * A listing verb's options: --json, -q (--quiet), --socket, --help. Prints
 * help and returns 0 for --help; returns -1 to go on with *ret filled and
 * exactly nargs operands from optind (else a usage error naming
 * operands, "a sandbox ID and a PATH", and EXIT_AGENTBOX); -q and --json
 * exclude each other.
 */
struct cli_list_opts {
	const char *socket_path;
	bool json, quiet;
};
int cli_parse_list_options(const char *verb, const char *help, int nargs, const char *operands,
			   int argc, char **argv, struct cli_list_opts *ret);

/*
 * 0 when name is a tenant's name (core/tenant.h), else print "agentbox:
 * VERB: WHAT'name' is not a tenant name (...)" and return EXIT_AGENTBOX.
 * what names the option it came from ("--tenant: "), or is "".
 */
int cli_check_tenant_name(const char *verb, const char *what, const char *name);

/* Is this "-h" or "--help"? */
int cli_is_help(const char *arg);

/*
 * "VERB [OPTIONS] NAME..." that deletes each (sandbox rm, key revoke,
 * tenant rm): argv[first..argc) are the names, of which there must be
 * one at least (what: "sandbox IDs"). Every name is checked with check
 * (0, or the exit status after saying why) before any request is sent;
 * then each is DELETEd at target's path (the name checked), printed
 * when done, and a name refused gets its line on stderr while the others
 * go on. 0 when all were done, else EXIT_AGENTBOX.
 */
int cli_delete_each(const char *verb, const char *what, const char *socket_path, int first,
		    int argc, char **argv, int (*check)(const char *verb, const char *name),
		    void (*target)(char *buf, size_t size, const char *name));

/*
 * A verb made of commands ("agentbox sandbox ls"): argv[1] names one of
 * the n in commands, run with argv + 1; none, or help (printed on stdout,
 * exit 0; none at all: on stderr, EXIT_AGENTBOX), or an unknown one
 * (EXIT_AGENTBOX, naming verb).
 */
int cli_dispatch(const char *verb, const char *help, const struct verb *commands, size_t n,
		 int argc, char **argv);

#endif
