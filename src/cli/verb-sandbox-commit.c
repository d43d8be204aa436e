/*
 * agentbox sandbox commit (verb-sandbox.c dispatches it): a sandbox of an
 * image made into a new image of agentboxd's store, POST
 * /v1/sandboxes/ID/commit.
 */
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"

#include <getopt.h>
#include <stdio.h>

/* How long a commit may take: agentboxd reads the sandbox's writes and unpacks the image. */
#define COMMIT_ANSWER_TIMEOUT_MS (60 * 60 * 1000)

static const char commit_help[] =
    "usage: agentbox sandbox commit [OPTIONS] ID NAME\n"
    "\n"
    "Make sandbox ID, a sandbox of an image (sandbox create --image), into a\n"
    "new image NAME (name:tag) of agentboxd's store: its image's layers and\n"
    "one more, everything the sandbox wrote to its root (not /tmp, /dev/shm or\n"
    "/workspace, which are not part of it). The sandbox is paused meanwhile\n"
    "and resumed after, when it was running. Prints the image's name. An\n"
    "admin's: an admin key, or root on agentboxd's unix socket.\n"
    "\n"
    "options:\n"
    "  --comment TEXT  the new layer's history comment (at most 1024 bytes)\n"
    "  --json          print the image as agentboxd answered\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 committed; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; (conflict) for a sandbox without an image).\n";

enum { OPT_COMMENT = CLI_OPT_VERB, OPT_COMMIT_JSON };

static const struct option commit_options[] = {
    {"comment", required_argument, NULL, OPT_COMMENT},
    {"json", no_argument, NULL, OPT_COMMIT_JSON},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int cli_sandbox_commit(int argc, char **argv)
{
	const char *verb = "sandbox commit", *socket_path = NULL, *comment = NULL;
	bool json = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", commit_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(commit_help, stdout);
			return 0;
		case OPT_COMMENT:
			comment = optarg;
			break;
		case OPT_COMMIT_JSON:
			json = true;
			break;
		case CLI_OPT_SOCKET:
			socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	if (argc - optind != 2)
		return cli_fail("%s: give a sandbox ID and a NAME (see agentbox %s --help)", verb,
				verb);
	char target[CLIENT_TARGET_MAX];
	struct error err = {0};
	if (client_sandbox_target(target, sizeof(target), argv[optind], "/commit", &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	_cleanup_json_ json_t *body = json_pack("{s:s}", "name", argv[optind + 1]);
	if (body && comment && json_object_set_new(body, "comment", json_string(comment)) < 0)
		json_decref(TAKE_PTR(body));
	if (!body)
		return cli_fail("%s: NAME and --comment must be UTF-8 text", verb);
	struct client_request req = {
	    .method = "POST",
	    .target = target,
	    .json = body,
	    .read_timeout_ms = COMMIT_ANSWER_TIMEOUT_MS,
	};
	struct client c;
	_cleanup_json_ json_t *image = NULL;
	int r = client_init(&c, socket_path, &err);
	if (r == 0)
		r = client_request(&c, &req, &image, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (json && (client_print_json(stdout, image) < 0 || fflush(stdout) == EOF))
		return cli_fail("%s: cannot write the output", verb);
	if (json)
		return 0;
	const char *name = json_string_value(json_object_get(image, "name"));
	if (!name)
		return cli_fail("%s: agentboxd's answer has no name", verb);
	if (cli_print_text(name) < 0)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}
