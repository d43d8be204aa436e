/*
 * agentbox key: agentboxd's API keys, one subcommand each: create, ls,
 * revoke (admin routes: an admin key or root on the unix socket); and
 * agentbox whoami, who agentboxd takes the caller for (any caller).
 *
 * A key's text (abx_<id>_<secret>) is printed once, by create, alone on
 * stdout, so that `export AGENTBOX_KEY=$(agentbox key create ...)` keeps
 * it; agentboxd keeps only its id and a hash. Nothing else here ever
 * prints or quotes a key's text: ls shows ids, and revoke takes ids.
 */
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"
#include "core/tenant.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * A key's id: KEY_ID_SIZE - 1 characters of lower-case Crockford base32
 * (auth/key.h's form, which the CLI may not include: docs/ARCHITECTURE.md).
 */
#define KEY_ID_ALPHABET "0123456789abcdefghjkmnpqrstvwxyz"
#define KEY_ID_LEN	(KEY_ID_SIZE - 1)
/* What starts a key's text: a key given where its id belongs. */
#define KEY_TEXT_PREFIX "abx_"
/* The most expires_in_s agentboxd takes: ten years of 365 days. */
#define KEY_EXPIRES_MAX_S (10ull * 365 * 24 * 3600)
/* A tenant's name as a column (client/term.h cuts beyond). */
#define TENANT_COLUMN_SIZE (TENANT_NAME_MAX + 1)

static const char help[] = "usage: agentbox key COMMAND [OPTIONS] ...\n"
			   "\n"
			   "API keys: each belongs to one tenant, as a member (acting within its\n"
			   "tenant) or an admin (acting on every tenant, and managing tenants and\n"
			   "keys). Every verb sends $AGENTBOX_KEY as its key. Every command here\n"
			   "needs an admin key or root on agentboxd's unix socket.\n"
			   "\n"
			   "commands:\n"
			   "  create    make a key and print it: the only time it is shown\n"
			   "  ls        list keys (ids, never their secrets)\n"
			   "  revoke    revoke keys: agentboxd refuses them from then on\n"
			   "\n"
			   "`agentbox key COMMAND --help` describes one; `agentbox whoami` shows\n"
			   "the key in use.\n"
			   "exit status: 0 done; 125 agentbox or agentboxd failed or refused (one\n"
			   "line on stderr).\n";

/* ---- what the subcommands share ------------------------------------------ */

/* Does id have a key id's form? Then it is safe in a path. */
static bool key_id_is_valid(const char *id)
{
	return strlen(id) == KEY_ID_LEN && strspn(id, KEY_ID_ALPHABET) == KEY_ID_LEN;
}

/* 0 when id has a key id's form, else the exit status after the reason. */
static int check_key_id(const char *verb, const char *id)
{
	if (key_id_is_valid(id))
		return 0;
	/* never quote what may be a key's secret */
	if (strncmp(id, KEY_TEXT_PREFIX, strlen(KEY_TEXT_PREFIX)) == 0)
		return cli_fail("%s: that is a key, not a key's id: give the %d characters "
				"after " KEY_TEXT_PREFIX " (agentbox key ls lists them)",
				verb, KEY_ID_LEN);
	return cli_fail("%s: '%s' is not a key id (%d characters of 0-9 and a-z but i, l, o, "
			"u)",
			verb, id, KEY_ID_LEN);
}

static void escape_member(const json_t *obj, const char *key, char *buf, size_t size)
{
	const char *s = json_string_value(json_object_get(obj, key));
	struct term_line l;
	term_line_init(&l, buf, size);
	term_line_adds(&l, s ? s : "?");
}

static int write_error(const char *verb)
{
	return cli_fail("%s: cannot write the output", verb);
}

/* ---- create -------------------------------------------------------------- */

static const char create_help[] =
    "usage: agentbox key create --tenant NAME [OPTIONS]\n"
    "\n"
    "Make an API key for tenant NAME and print its text (abx_...) alone on\n"
    "stdout. This is the only time it is shown: agentboxd keeps only its id\n"
    "and a hash. Keep it at once, e.g.\n"
    "  export AGENTBOX_KEY=$(agentbox key create --tenant acme)\n"
    "A note on stderr gives its id, which agentbox key ls and revoke name it by.\n"
    "\n"
    "options:\n"
    "  --tenant NAME   the tenant it acts for (required)\n"
    "  --role ROLE     member (the default: acts within its tenant) or admin\n"
    "                  (acts on every tenant, and manages tenants and keys)\n"
    "  --expires DUR   refused DUR from now: 30d, 12h, 90m, 3600s (whole\n"
    "                  seconds, rounded up; at most 3650d); default: never\n"
    "  --label TEXT    a note kept with it, at most 128 bytes\n"
    "  --json          print the key as agentboxd answered it, a JSON object:\n"
    "                  id, tenant, role, created_at, expires_at, revoked_at,\n"
    "                  label, and key, its text\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 made (its text is on stdout); 125 agentbox or agentboxd\n"
    "failed or refused (one line on stderr; an error of agentboxd's ends in\n"
    "its code, e.g. (not_found)).\n";

enum { OPT_JSON = CLI_OPT_VERB, OPT_TENANT, OPT_ROLE, OPT_EXPIRES, OPT_LABEL };

static const struct option create_options[] = {
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"role", required_argument, NULL, OPT_ROLE},
    {"expires", required_argument, NULL, OPT_EXPIRES},
    {"label", required_argument, NULL, OPT_LABEL},
    {"json", no_argument, NULL, OPT_JSON},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

struct create_args {
	const char *socket_path, *tenant, *label;
	enum key_role role;
	uint64_t expires_s; /* 0 = never */
	bool json;
};

/* -1 with *a filled, to go on; else the exit status. */
static int create_parse(const char *verb, int argc, char **argv, struct create_args *a)
{
	*a = (struct create_args){.role = KEY_ROLE_MEMBER};
	struct error err = {0};
	uint64_t ms;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", create_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(create_help, stdout);
			return 0;
		case OPT_TENANT:
			a->tenant = optarg;
			break;
		case OPT_ROLE:
			if (key_role_parse(optarg, &a->role) < 0)
				return cli_fail("%s: --role: '%s' is not member or admin", verb,
						optarg);
			break;
		case OPT_EXPIRES:
			if (cli_parse_duration("--expires", optarg, &ms, &err) < 0)
				return cli_fail("%s: %s", verb, err.msg);
			a->expires_s = cli_whole_seconds(ms);
			if (a->expires_s > KEY_EXPIRES_MAX_S)
				return cli_fail("%s: --expires: '%s' is more than 3650d", verb,
						optarg);
			break;
		case OPT_LABEL:
			if (strlen(optarg) > KEY_LABEL_MAX)
				return cli_fail("%s: --label: longer than %d bytes", verb,
						KEY_LABEL_MAX);
			a->label = optarg;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case CLI_OPT_SOCKET:
			a->socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	if (optind < argc)
		return cli_fail("%s: unexpected argument '%s' (see agentbox %s --help)", verb,
				argv[optind], verb);
	if (!a->tenant)
		return cli_fail("%s: --tenant NAME is required (see agentbox %s --help)", verb,
				verb);
	return cli_check_tenant_name(verb, "--tenant: ", a->tenant) != 0 ? EXIT_AGENTBOX : -1;
}

static json_t *create_body(const char *verb, const struct create_args *a, int *rc)
{
	json_t *body = json_pack("{s:s, s:s}", "tenant", a->tenant, "role", key_role_name(a->role));
	if (!body) {
		*rc = cli_fail("%s: out of memory", verb);
		return NULL;
	}
	int r = 0;
	if (a->expires_s)
		r = json_object_set_new(body, "expires_in_s",
					json_integer((json_int_t)a->expires_s));
	if (r == 0 && a->label) {
		json_t *label = json_string(a->label);
		if (!label) {
			json_decref(body);
			*rc = cli_fail("%s: --label: not UTF-8 text", verb);
			return NULL;
		}
		r = json_object_set_new(body, "label", label);
	}
	if (r < 0) {
		json_decref(body);
		*rc = cli_fail("%s: out of memory", verb);
		return NULL;
	}
	return body;
}

static int key_create(int argc, char **argv)
{
	const char *verb = "key create";
	struct create_args a;
	int rc = create_parse(verb, argc, argv, &a);
	if (rc >= 0)
		return rc;
	_cleanup_json_ json_t *body = create_body(verb, &a, &rc);
	if (!body)
		return rc;
	struct error err = {0};
	_cleanup_json_ json_t *key = NULL;
	struct client c;
	int r = client_init(&c, a.socket_path, &err);
	if (r == 0)
		r = client_call(&c, "POST", "/v1/keys", body, &key, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	const char *text = json_string_value(json_object_get(key, "key"));
	if (!text)
		return cli_fail("%s: agentboxd's answer has no key", verb);
	if (a.json)
		r = client_print_json(stdout, key);
	else
		r = cli_print_text(text);
	if (r < 0 || fflush(stdout) == EOF)
		return write_error(verb);
	char id[KEY_ID_LEN + 8], tenant[TENANT_COLUMN_SIZE], role[16];
	escape_member(key, "id", id, sizeof(id));
	escape_member(key, "tenant", tenant, sizeof(tenant));
	escape_member(key, "role", role, sizeof(role));
	fprintf(stderr,
		"agentbox: key create: key %s (tenant %s, %s): its text is shown only this "
		"once; keep it now\n",
		id, tenant, role);
	return 0;
}

/* ---- ls ------------------------------------------------------------------ */

static const char ls_help[] =
    "usage: agentbox key ls [OPTIONS]\n"
    "\n"
    "List API keys, one line each: ID, TENANT, ROLE (member or admin), CREATED\n"
    "(how long ago), EXPIRES (never, in how long, or how long ago) and STATE\n"
    "(active, revoked or expired). No key's text is shown: agentboxd does not\n"
    "keep it.\n"
    "\n"
    "options:\n"
    "  --tenant NAME   only the keys of tenant NAME\n"
    "  -q, --quiet     print only the ids, one a line\n"
    "  --json          print a JSON array of the keys as agentboxd shows them\n"
    "                  (with label; times in ms since the epoch, or null),\n"
    "                  instead of the table\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

static const struct option ls_options[] = {
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, OPT_JSON},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int collect_page(json_t *items, int page, void *data, struct error *err)
{
	(void)page;
	if (json_array_extend(data, items) < 0)
		return error_set_errno(err, ENOMEM, "collecting the list");
	return 0;
}

/* A time member in ms since the epoch, or null / missing: false. */
static bool member_time(const json_t *obj, const char *key, int64_t *ret)
{
	const json_t *t = json_object_get(obj, key);
	if (!json_is_integer(t))
		return false;
	*ret = (int64_t)json_integer_value(t);
	return true;
}

static const char *key_state(const json_t *key, int64_t now)
{
	int64_t t;
	if (member_time(key, "revoked_at", &t))
		return "revoked";
	if (member_time(key, "expires_at", &t) && t <= now)
		return "expired";
	return "active";
}

struct key_row {
	char id[KEY_ID_LEN + 8], tenant[TENANT_COLUMN_SIZE], role[16];
	char created[32], expires[32];
	const char *state;
};

static void key_row(const json_t *key, int64_t now, struct key_row *row)
{
	char age[16];
	int64_t t;
	escape_member(key, "id", row->id, sizeof(row->id));
	escape_member(key, "tenant", row->tenant, sizeof(row->tenant));
	escape_member(key, "role", row->role, sizeof(row->role));
	snprintf(row->created, sizeof(row->created), "-");
	if (member_time(key, "created_at", &t)) {
		client_format_age(now - t, age, sizeof(age));
		snprintf(row->created, sizeof(row->created), "%s ago", age);
	}
	if (!member_time(key, "expires_at", &t)) {
		snprintf(row->expires, sizeof(row->expires), "never");
	} else if (t > now) {
		client_format_age(t - now, age, sizeof(age));
		snprintf(row->expires, sizeof(row->expires), "in %s", age);
	} else {
		client_format_age(now - t, age, sizeof(age));
		snprintf(row->expires, sizeof(row->expires), "%s ago", age);
	}
	row->state = key_state(key, now);
}

static void print_table(const json_t *keys, int64_t now)
{
	struct key_row row;
	int width = (int)strlen("TENANT");
	size_t i;
	json_t *k;
	json_array_foreach(keys, i, k)
	{
		key_row(k, now, &row);
		if ((int)strlen(row.tenant) > width)
			width = (int)strlen(row.tenant);
	}
	printf("%-*s  %-*s  %-6s  %-9s  %-9s  %s\n", KEY_ID_LEN, "ID", width, "TENANT", "ROLE",
	       "CREATED", "EXPIRES", "STATE");
	json_array_foreach(keys, i, k)
	{
		key_row(k, now, &row);
		printf("%-*s  %-*s  %-6s  %-9s  %-9s  %s\n", KEY_ID_LEN, row.id, width, row.tenant,
		       row.role, row.created, row.expires, row.state);
	}
}

static int key_ls(int argc, char **argv)
{
	const char *verb = "key ls", *socket_path = NULL, *tenant = NULL;
	bool as_json = false, quiet = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":qh", ls_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(ls_help, stdout);
			return 0;
		case 'q':
			quiet = true;
			break;
		case OPT_TENANT:
			tenant = optarg;
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
	if (optind < argc)
		return cli_fail("%s: unexpected argument '%s' (see agentbox %s --help)", verb,
				argv[optind], verb);
	if (as_json && quiet)
		return cli_fail("%s: -q and --json exclude each other", verb);
	int rc;
	if (tenant && (rc = cli_check_tenant_name(verb, "--tenant: ", tenant)) != 0)
		return rc;

	char target[CLIENT_TARGET_MAX];
	snprintf(target, sizeof(target), "/v1/keys%s%s", tenant ? "?tenant=" : "",
		 tenant ? tenant : "");
	_cleanup_json_ json_t *keys = json_array();
	if (!keys)
		return cli_fail("%s: out of memory", verb);
	struct error err = {0};
	struct client c;
	int r = client_init(&c, socket_path, &err);
	if (r == 0)
		r = client_list(&c, target, "keys", collect_page, keys, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (as_json) {
		r = client_print_json(stdout, keys);
	} else if (quiet) {
		char id[KEY_ID_LEN + 8];
		size_t i;
		json_t *k;
		json_array_foreach(keys, i, k)
		{
			escape_member(k, "id", id, sizeof(id));
			printf("%s\n", id);
		}
	} else {
		print_table(keys, wall_clock_ms());
	}
	if (r < 0 || fflush(stdout) == EOF || ferror(stdout))
		return write_error(verb);
	return 0;
}

/* ---- revoke -------------------------------------------------------------- */

static const char revoke_help[] =
    "usage: agentbox key revoke [OPTIONS] ID...\n"
    "\n"
    "Revoke each key ID (the 12 characters after abx_, as agentbox key ls\n"
    "shows them): agentboxd refuses it from its next request on. Prints each\n"
    "id revoked. Every id's form is checked before any request is sent; then\n"
    "a key that cannot be revoked (it does not exist: not_found) gets its line\n"
    "on stderr, and the others are still revoked.\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all revoked; 125 agentbox or agentboxd failed or refused\n"
    "for one or more (one line on stderr for each).\n";

static void key_target(char *buf, size_t size, const char *id)
{
	snprintf(buf, size, "/v1/keys/%s", id);
}

static int key_revoke(int argc, char **argv)
{
	const char *verb = "key revoke", *socket_path;
	int rc = cli_parse_socket_only(verb, revoke_help, argc, argv, &socket_path);
	if (rc >= 0)
		return rc;
	return cli_delete_each(verb, "key IDs", socket_path, optind, argc, argv, check_key_id,
			       key_target);
}

/* ---- the dispatch -------------------------------------------------------- */

static const struct verb subverbs[] = {
    {"create", NULL, key_create},
    {"ls", NULL, key_ls},
    {"revoke", NULL, key_revoke},
};

int verb_key(int argc, char **argv)
{
	return cli_dispatch("key", help, subverbs, sizeof(subverbs) / sizeof(subverbs[0]), argc,
			    argv);
}

/* ---- whoami -------------------------------------------------------------- */

static const char whoami_help[] =
    "usage: agentbox whoami [OPTIONS]\n"
    "\n"
    "Print who agentboxd takes us for: \"tenant T, role R\", then \", key ID\"\n"
    "when we sent a key ($AGENTBOX_KEY) and \", uid U\" when it knows us by our\n"
    "user id on its unix socket.\n"
    "\n"
    "options:\n"
    "  --json          print agentboxd's answer, a JSON object: tenant, role,\n"
    "                  key_id and uid (null when there is none)\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 printed; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

static const struct option whoami_options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int verb_whoami(int argc, char **argv)
{
	const char *verb = "whoami", *socket_path = NULL;
	bool as_json = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", whoami_options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(whoami_help, stdout);
			return 0;
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
	if (optind < argc)
		return cli_fail("%s: unexpected argument '%s' (see agentbox %s --help)", verb,
				argv[optind], verb);
	struct error err = {0};
	_cleanup_json_ json_t *me = NULL;
	struct client c;
	int r = client_init(&c, socket_path, &err);
	if (r == 0)
		r = client_call(&c, "GET", "/v1/me", NULL, &me, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (as_json) {
		if (client_print_json(stdout, me) < 0 || fflush(stdout) == EOF)
			return write_error(verb);
		return 0;
	}
	if (!json_is_string(json_object_get(me, "tenant")) ||
	    !json_is_string(json_object_get(me, "role")))
		return cli_fail("%s: agentboxd's answer has no tenant or role", verb);
	/* the line escaped as a whole (client/term.h), cut only if absurdly long */
	char line[256];
	struct term_line l;
	term_line_init(&l, line, sizeof(line));
	term_line_adds(&l, "tenant ");
	term_line_adds(&l, json_string_value(json_object_get(me, "tenant")));
	term_line_adds(&l, ", role ");
	term_line_adds(&l, json_string_value(json_object_get(me, "role")));
	const char *key_id = json_string_value(json_object_get(me, "key_id"));
	if (key_id) {
		term_line_adds(&l, ", key ");
		term_line_adds(&l, key_id);
	}
	const json_t *uid = json_object_get(me, "uid");
	if (json_is_integer(uid)) {
		char n[32];
		snprintf(n, sizeof(n), ", uid %" PRId64, (int64_t)json_integer_value(uid));
		term_line_adds(&l, n);
	}
	if (printf("%s\n", line) < 0 || fflush(stdout) == EOF)
		return write_error(verb);
	return 0;
}
