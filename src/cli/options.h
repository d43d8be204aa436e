/*
 * options.h - the options several verbs share when they build a request
 * for agentboxd: the limits (--memory, --cpus, --pids, --disk), --env,
 * --metadata and --timeout. submit, sandbox create and exec take them
 * with the same spelling, the same checks and the same messages.
 *
 * A verb lists CLI_LIMIT_OPTIONS (and the others it takes) in its
 * struct option table with these values, numbers its own options from
 * CLI_OPT_VERB, and hands each shared one to cli_body_option().
 *
 * Errors: 0 or -errno, with err naming the option and what is wrong,
 * ready to print after "agentbox: VERB: " ("--memory: '12xb' is not a
 * size (e.g. 512m, 2g)"). Nothing here prints or sends.
 */
#ifndef AGENTBOX_CLI_OPTIONS_H
#define AGENTBOX_CLI_OPTIONS_H

#include "base/error.h"
#include "client/client.h"

#include <getopt.h>
#include <jansson.h>
#include <stdint.h>

enum {
	CLI_OPT_MEMORY = 256,
	CLI_OPT_CPUS,
	CLI_OPT_PIDS,
	CLI_OPT_DISK,
	CLI_OPT_ENV,
	CLI_OPT_METADATA,
	CLI_OPT_SOCKET,
	CLI_OPT_NETWORK,
	CLI_OPT_NETWORK_RATE,
	CLI_OPT_SECRET,
	CLI_OPT_IMAGE,
	CLI_OPT_USER,
	CLI_OPT_PULL,
	CLI_OPT_CWD,
	CLI_OPT_VERB = 300, /* a verb's own options are numbered from here */
};

#define CLI_LIMIT_OPTIONS                                                                          \
	{"memory", required_argument, NULL, CLI_OPT_MEMORY},                                       \
	    {"cpus", required_argument, NULL, CLI_OPT_CPUS},                                       \
	    {"pids", required_argument, NULL, CLI_OPT_PIDS},                                       \
	{                                                                                          \
		"disk", required_argument, NULL, CLI_OPT_DISK                                      \
	}

/* Their lines in a verb's --help. */
#define CLI_HELP_LIMITS                                                                            \
	"  --memory SIZE        memory limit (sent in MiB, rounded up)\n"                          \
	"  --cpus N             CPU quota, fractions allowed (0.5, 2)\n"                           \
	"  --pids N             most processes and threads at once\n"                              \
	"  --disk SIZE          writable space (sent in MiB, rounded up)\n"

#define CLI_HELP_NETWORK                                                                           \
	"  --network MODE       none (the default: only lo), open (any public address),\n"         \
	"                       or allow:DOMAIN[:PORT][,...] (only those; *.example.org\n"         \
	"                       for its subdomains; ports 80 and 443 by default)\n"                \
	"  --network-rate MBIT  cap its network at MBIT Mbit/s each way (1 to 100000;\n"           \
	"                       open and allow only)\n"                                            \
	"  --secret NAME@HOST[,HOST...]\n"                                                         \
	"                       $NAME of this shell, for those hosts only: inside, NAME\n"         \
	"                       holds a placeholder the proxy swaps for the value in\n"            \
	"                       requests to them (allow mode; repeatable)\n"

#define CLI_IMAGE_OPTIONS                                                                          \
	{"image", required_argument, NULL, CLI_OPT_IMAGE},                                         \
	    {"user", required_argument, NULL, CLI_OPT_USER},                                       \
	    {"pull", no_argument, NULL, CLI_OPT_PULL},                                             \
	{                                                                                          \
		"cwd", required_argument, NULL, CLI_OPT_CWD                                        \
	}

#define CLI_HELP_IMAGE                                                                             \
	"  --image REF          its root is this image of agentboxd's store (name:tag\n"           \
	"                       or sha256:digest), writable, its writes gone with it;\n"           \
	"                       the image's Env, WorkingDir (and for a task without a\n"           \
	"                       command, Entrypoint and Cmd) are the defaults\n"                   \
	"  --pull               pull --image first when the store does not have it\n"              \
	"  --user USER          sandbox (the default: uid 1000, no capabilities) or\n"             \
	"                       root (uid 0 of its own user namespace; needs --image)\n"           \
	"  --cwd DIR            where commands start (default: the image's WorkingDir,\n"          \
	"                       else /workspace)\n"

#define CLI_HELP_METADATA                                                                          \
	"  --metadata KEY=VALUE a string stored with it, for the caller; or a JSON\n"              \
	"                       object to merge in; repeatable\n"

/*
 * --socket in a verb whose options are this wide (CLIENT_HELP_SOCKET is
 * the narrow one); CLIENT_HELP_ENVIRONMENT follows it, with CLI_HELP_SIZES
 * between them in a verb that takes sizes.
 */
#define CLI_HELP_SOCKET_WIDE                                                                       \
	"  --socket PATH        agentboxd's unix socket (default $AGENTBOX_HOST,\n"                \
	"                       else " CLIENT_DEFAULT_SOCKET ")\n"
#define CLI_HELP_SIZES                                                                             \
	"\n"                                                                                       \
	"sizes take k, m, g, t (binary units).\n"

/*
 * Apply one shared option to the request body being built:
 *   CLI_OPT_MEMORY, CLI_OPT_DISK  SIZE (parse_size) as whole MiB, rounded
 *                                 up, into limits.memory_mb / disk_mb
 *   CLI_OPT_CPUS                  a positive number with at most three
 *                                 decimals into limits.cpus, an integer
 *                                 when whole
 *   CLI_OPT_PIDS                  a positive whole number into limits.pids
 *   CLI_OPT_ENV                   KEY=VALUE into env; a key given twice is
 *                                 an error
 *   CLI_OPT_NETWORK               none, open or allow:DOMAIN[,...]
 *                                 (egress/policy.h) into network
 *   CLI_OPT_NETWORK_RATE          MBIT (cli_parse_network_rate()) into
 *                                 network.rate_mbit, before or after
 *                                 --network; refused with mode none
 *   CLI_OPT_SECRET                NAME@HOST[,HOST...] into secrets.NAME:
 *                                 its value is $NAME of our own
 *                                 environment (never an argument, which
 *                                 any local user could read in /proc);
 *                                 unset or given twice is an error
 *   CLI_OPT_IMAGE                 REF into image (agentboxd checks it)
 *   CLI_OPT_USER                  root or sandbox into user
 *   CLI_OPT_PULL                  pull: true
 *   CLI_OPT_CWD                   an absolute path into cwd
 *   CLI_OPT_METADATA              KEY=VALUE (a string value), or a JSON
 *                                 object (the argument starts with '{' or
 *                                 '['), merged into metadata; a key given
 *                                 twice is an error
 * limits, env and metadata are created on first use. Any other opt is
 * -ENOENT (not an option of ours).
 */
int cli_body_option(json_t *body, int opt, const char *arg, struct error *err);

/*
 * The checks that span options, once every one is applied: a
 * --network-rate needs a --network open or allow. 0 or -EINVAL with err.
 */
int cli_body_finish(json_t *body, struct error *err);

/*
 * --network-rate MBIT: a whole number 1..EGRESS_RATE_MBIT_MAX. -EINVAL
 * with err: "--network-rate: '0' is not a number from 1 to 100000
 * (Mbit/s)".
 */
int cli_parse_network_rate(const char *arg, uint32_t *ret, struct error *err);

/* Its message when there is no network to cap. -EINVAL. */
int cli_network_rate_needs_network(struct error *err);

/*
 * A duration (parse_duration_ms: 500ms, 90s, 1h30m) of more than 0 ms;
 * name is what the message names ("--timeout", "DURATION"). -EINVAL with
 * err: "--timeout: 'soon' is not a duration (e.g. 90s, 2h)".
 */
int cli_parse_duration(const char *name, const char *arg, uint64_t *ret_ms, struct error *err);

/* ms as whole seconds, rounded up: the API's timeout_s of sandboxes and exec. */
static inline uint64_t cli_whole_seconds(uint64_t ms)
{
	return ms / 1000 + (ms % 1000 ? 1 : 0);
}

/*
 * A JSON number for milli / 1000 (ms as seconds, milli-CPUs as CPUs): an
 * integer when whole, else a fraction. NULL = ENOMEM.
 */
json_t *cli_thousandths(uint64_t milli);

/* body[key] = value (stolen, even on failure; NULL is -ENOMEM). 0 or -ENOMEM with err. */
int cli_body_set(json_t *body, const char *key, json_t *value, struct error *err);

/* body.limits[key] = value, as cli_body_set(); limits is created on first use. */
int cli_body_limit(json_t *body, const char *key, json_t *value, struct error *err);

#endif
