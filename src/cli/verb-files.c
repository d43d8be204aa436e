/*
 * agentbox files: the files of an interactive sandbox beyond cp, one
 * subcommand each: ls (GET /v1/sandboxes/ID/files?list=1), rm (DELETE
 * .../files) and mkdir. The API has no route for a directory: mkdir
 * writes an empty file inside it (PUT creates the parents of what it
 * writes, as the sandbox's user) and removes that file again, so it needs
 * nothing of the sandbox's image.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/cp.h"
#include "cli/options.h"
#include "client/client.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Bytes of a sandbox path (the API's limit). */
#define FILES_PATH_MAX	 1024
#define FILES_NAME_WIDTH 255

static const char help[] = "usage: agentbox files COMMAND [OPTIONS] ...\n"
			   "\n"
			   "The files of an interactive sandbox (agentbox cp copies them in and\n"
			   "out). Paths are absolute and resolved by the sandbox itself.\n"
			   "\n"
			   "commands:\n"
			   "  ls        list a directory\n"
			   "  rm        remove files\n"
			   "  mkdir     make directories, and their parents\n"
			   "\n"
			   "`agentbox files COMMAND --help` describes one.\n"
			   "exit status: 0 done; 125 agentbox or agentboxd failed or refused (one\n"
			   "line on stderr).\n";

enum { OPT_JSON = CLI_OPT_VERB };

/* A sandbox path as the API takes it: absolute, at most FILES_PATH_MAX bytes. */
static int check_path(const char *verb, const char *path)
{
	if (path[0] != '/')
		return cli_fail("%s: '%s' is not an absolute path", verb, path);
	if (strlen(path) > FILES_PATH_MAX)
		return cli_fail("%s: a path is longer than %d bytes", verb, FILES_PATH_MAX);
	return 0;
}

/* ---- ls ------------------------------------------------------------------------ */

static const char ls_help[] =
    "usage: agentbox files ls [OPTIONS] ID PATH\n"
    "\n"
    "List directory PATH of sandbox ID, sorted by name, one line each: TYPE\n"
    "(file, dir, symlink, other), MODE, SIZE (bytes), MODIFIED (how long ago)\n"
    "and NAME. At most 10000 entries (a note on stderr says when there are\n"
    "more).\n"
    "\n"
    "options:\n"
    "  --json          print agentboxd's answer as JSON (path, entries)\n"
    "  -q, --quiet     print only the names, one a line\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; (file_not_found), (not_a_file) for a file that is not a\n"
    "directory).\n";

static void print_entry(const json_t *e, int64_t now)
{
	char name[FILES_NAME_WIDTH * 4 + 1], mode[16], modified[32] = "-";
	struct term_line l; /* the names are the sandbox's: escaped */
	const char *s = json_string_value(json_object_get(e, "name"));
	term_line_init(&l, name, sizeof(name));
	term_line_adds(&l, s ? s : "?");
	s = json_string_value(json_object_get(e, "mode"));
	term_line_init(&l, mode, sizeof(mode));
	term_line_adds(&l, s ? s : "-");
	const char *type = json_string_value(json_object_get(e, "type"));
	if (!type || strspn(type, "abcdefghijklmnopqrstuvwxyz") != strlen(type) || strlen(type) > 8)
		type = "?";
	int64_t t;
	s = json_string_value(json_object_get(e, "mtime"));
	if (s && client_parse_time(s, &t) == 0) {
		char age[16];
		client_format_age(now - t, age, sizeof(age));
		snprintf(modified, sizeof(modified), "%s ago", age);
	}
	printf("%-7s  %-5s  %12" JSON_INTEGER_FORMAT "  %-9s  %s\n", type, mode,
	       json_integer_value(json_object_get(e, "size")), modified, name);
}

static int files_ls(int argc, char **argv)
{
	const char *verb = "files ls";
	struct cli_list_opts lo;
	int parsed =
	    cli_parse_list_options(verb, ls_help, 2, "a sandbox ID and a PATH", argc, argv, &lo);
	if (parsed >= 0)
		return parsed;
	const char *socket_path = lo.socket_path;
	bool as_json = lo.json, quiet = lo.quiet;
	int rc = check_path(verb, argv[optind + 1]);
	if (rc)
		return rc;
	struct error err = {0};
	_cleanup_free_ char *base = NULL, *target = NULL;
	if (client_sandbox_file_target(argv[optind], argv[optind + 1], &base, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (asprintf(&target, "%s&list=1", base) < 0) {
		target = NULL;
		return cli_fail("%s: out of memory", verb);
	}
	_cleanup_json_ json_t *answer = NULL;
	struct client c;
	int r = client_init(&c, socket_path, &err);
	if (r == 0)
		r = client_call(&c, "GET", target, NULL, &answer, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	json_t *entries = json_object_get(answer, "entries");
	if (!json_is_array(entries))
		return cli_fail("%s: agentboxd's answer has no entries", verb);
	if (as_json) {
		if (client_print_json(stdout, answer) < 0 || fflush(stdout) == EOF)
			return cli_fail("%s: cannot write the output", verb);
		return 0;
	}
	int64_t now = wall_clock_ms();
	if (!quiet)
		printf("%-7s  %-5s  %12s  %-9s  %s\n", "TYPE", "MODE", "SIZE", "MODIFIED", "NAME");
	size_t i;
	json_t *e;
	json_array_foreach(entries, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "name"));
		if (quiet && name && cli_print_text(name) < 0)
			return cli_fail("%s: cannot write the output", verb);
		if (!quiet)
			print_entry(e, now);
	}
	if (fflush(stdout) == EOF)
		return cli_fail("%s: cannot write the output", verb);
	if (json_is_true(json_object_get(answer, "truncated")))
		fprintf(stderr,
			"agentbox: %s: more entries than agentboxd lists; the first %zu "
			"are shown\n",
			verb, json_array_size(entries));
	return 0;
}

/* ---- rm and mkdir ----------------------------------------------------------------- */

static const char rm_help[] =
    "usage: agentbox files rm [OPTIONS] ID PATH...\n"
    "\n"
    "Remove each file PATH of sandbox ID (files, not directories). Every PATH\n"
    "is checked (absolute, at most 1024 bytes) before any request is sent;\n"
    "then one that cannot be removed gets its line on stderr and the others\n"
    "are still removed. Prints each path removed.\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all removed; 125 agentbox or agentboxd failed for one or\n"
    "more (one line on stderr for each; (file_not_found), (not_a_file) for\n"
    "a directory).\n";

static const char mkdir_help[] =
    "usage: agentbox files mkdir [OPTIONS] ID PATH...\n"
    "\n"
    "Make each directory PATH of sandbox ID, and its parents, owned by the\n"
    "sandbox's user; one that is there already is fine (as mkdir -p). Every\n"
    "PATH is checked before any request is sent. Prints each path made.\n"
    "(The API has no route for a directory: an empty file is written inside\n"
    "PATH, which makes it, and removed.)\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all made; 125 agentbox or agentboxd failed for one or more\n"
    "(one line on stderr for each).\n";

static int remove_one(struct client *c, const char *id, const char *path, struct error *err)
{
	_cleanup_free_ char *target = NULL;
	int r = client_sandbox_file_target(id, path, &target, err);
	if (r == 0)
		r = client_call(c, "DELETE", target, NULL, NULL, err);
	return r;
}

static int mkdir_one(struct client *c, const char *id, const char *path, struct error *err)
{
	return cp_sandbox_mkdir(c, id, path, err);
}

static int each_path(const char *verb, const char *help_text, int argc, char **argv,
		     int (*fn)(struct client *c, const char *id, const char *path,
			       struct error *err))
{
	const char *socket_path;
	int rc = cli_parse_socket_only(verb, help_text, argc, argv, &socket_path);
	if (rc >= 0)
		return rc;
	if (argc - optind < 2)
		return cli_fail("%s: give a sandbox ID and one or more PATHs (see agentbox %s "
				"--help)",
				verb, verb);
	const char *id = argv[optind];
	char target[CLIENT_TARGET_MAX];
	struct error err = {0};
	if (client_sandbox_target(target, sizeof(target), id, NULL, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	for (int i = optind + 1; i < argc; i++)
		if ((rc = check_path(verb, argv[i])) != 0)
			return rc;
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	rc = 0;
	for (int i = optind + 1; i < argc; i++) {
		if (fn(&c, id, argv[i], &err) < 0) {
			rc = cli_fail("%s: %s: %s", verb, argv[i], err.msg);
			continue;
		}
		if (cli_print_text(argv[i]) < 0) {
			rc = cli_fail("%s: cannot write the output", verb);
			break;
		}
	}
	client_release(&c);
	return rc;
}

static int files_rm(int argc, char **argv)
{
	return each_path("files rm", rm_help, argc, argv, remove_one);
}

static int files_mkdir(int argc, char **argv)
{
	return each_path("files mkdir", mkdir_help, argc, argv, mkdir_one);
}

static const struct verb subverbs[] = {
    {"ls", NULL, files_ls},
    {"rm", NULL, files_rm},
    {"mkdir", NULL, files_mkdir},
};

int verb_files(int argc, char **argv)
{
	return cli_dispatch("files", help, subverbs, sizeof(subverbs) / sizeof(subverbs[0]), argc,
			    argv);
}
