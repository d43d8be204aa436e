/*
 * agentbox tenant: agentboxd's tenants, one subcommand each: create, ls,
 * show, set (its quotas), rm. A tenant owns tasks, sandboxes and API keys (verb-key.c).
 * These are admin routes: agentboxd answers them for an admin key
 * (AGENTBOX_KEY) or root on its unix socket, and refuses a member with
 * (forbidden).
 */
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"
#include "core/quota.h"
#include "core/tenant.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* A tenant's name as a column: TENANT_NAME_MAX, escaped and cut beyond (client/term.h). */
#define NAME_COLUMN_SIZE (TENANT_NAME_MAX + 1)

static const char help[] =
    "usage: agentbox tenant COMMAND [OPTIONS] ...\n"
    "\n"
    "Tenants: each owns its tasks, sandboxes and API keys (agentbox key), and\n"
    "sees only those. Every command here needs an admin key ($AGENTBOX_KEY)\n"
    "or root on agentboxd's unix socket.\n"
    "\n"
    "commands:\n"
    "  create    create a tenant and print its name\n"
    "  ls        list tenants\n"
    "  show      show a tenant: its quotas, and what it holds of them\n"
    "  set       set a tenant's quotas\n"
    "  rm        delete tenants that have nothing left: no key, task or sandbox\n"
    "\n"
    "`agentbox tenant COMMAND --help` describes one.\n"
    "exit status: 0 done; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

#define HELP_NAME                                                                                  \
	"A tenant's name is 1 to 63 characters of a-z, 0-9 and '-', starting with\n"               \
	"a letter or digit and not ending in '-'.\n"

int cli_check_tenant_name(const char *verb, const char *what, const char *name)
{
	if (tenant_name_is_valid(name))
		return 0;
	return cli_fail("%s: %s'%s' is not a tenant name (1 to %d of a-z, 0-9 and '-', not "
			"starting or ending with '-')",
			verb, what, name, TENANT_NAME_MAX);
}

/* ---- what the subcommands share ------------------------------------------ */

enum { OPT_JSON = CLI_OPT_VERB };

static const struct option options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

struct opts {
	const char *socket_path; /* NULL = not given */
	bool json, quiet;
};

/*
 * --json, --socket, --help, and -q/--quiet where quiet_ok. -1 with *o
 * filled and optind at the first operand, to go on; else the exit status.
 */
static int parse_options(const char *verb, const char *help_text, bool quiet_ok, int argc,
			 char **argv, struct opts *o)
{
	*o = (struct opts){0};
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, quiet_ok ? ":qh" : ":h", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help_text, stdout);
			return 0;
		case 'q':
			if (!quiet_ok)
				return cli_option_error(verb, '?', argv);
			o->quiet = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case CLI_OPT_SOCKET:
			o->socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	if (o->json && o->quiet)
		return cli_fail("%s: -q and --json exclude each other", verb);
	return -1;
}

/* "/v1/tenants/NAME" into buf; the name has passed cli_check_tenant_name(). */
static void tenant_target(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "/v1/tenants/%s", name);
}

/* One call: connect (socket_path as for client_init()), call, disconnect. */
static int call_once(const char *socket_path, const char *method, const char *target,
		     const json_t *body, json_t **ret, struct error *err)
{
	struct client c;
	int r = client_init(&c, socket_path, err);
	if (r == 0)
		r = client_call(&c, method, target, body, ret, err);
	client_release(&c);
	return r;
}

static void escape_member(const json_t *obj, const char *key, char *buf, size_t size)
{
	const char *s = json_string_value(json_object_get(obj, key));
	struct term_line l;
	term_line_init(&l, buf, size);
	term_line_adds(&l, s ? s : "?");
}

/* created_at (ms since the epoch) as "3d ago", or "-". */
static void format_created(const json_t *obj, int64_t now, char *buf, size_t size)
{
	const json_t *t = json_object_get(obj, "created_at");
	if (!json_is_integer(t)) {
		snprintf(buf, size, "-");
		return;
	}
	char age[16];
	client_format_age(now - (int64_t)json_integer_value(t), age, sizeof(age));
	snprintf(buf, size, "%s ago", age);
}

/* Print the tenant's name (or the whole answer with --json) after create and show. */
static int print_tenant(const char *verb, const json_t *tenant, bool as_json)
{
	int r;
	if (as_json) {
		r = client_print_json(stdout, tenant);
	} else {
		const char *name = json_string_value(json_object_get(tenant, "name"));
		if (!name)
			return cli_fail("%s: agentboxd's answer has no name", verb);
		r = cli_print_text(name);
	}
	if (r < 0 || fflush(stdout) == EOF)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- create -------------------------------------------------------------- */

static const char create_help[] =
    "usage: agentbox tenant create [OPTIONS] NAME\n"
    "\n"
    "Create tenant NAME and print its name. A name that is taken is refused\n"
    "(conflict). Give it keys with agentbox key create --tenant NAME.\n" HELP_NAME "\n"
    "options:\n"
    "  --json          print the tenant as agentboxd answered it: a JSON object\n"
    "                  with name and created_at (ms since the epoch)\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 created; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; an error of agentboxd's ends in its code, e.g. (conflict)).\n";

static int tenant_create(int argc, char **argv)
{
	const char *verb = "tenant create";
	struct opts o;
	int rc = parse_options(verb, create_help, false, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one tenant NAME (see agentbox %s --help)", verb, verb);
	const char *name = argv[optind];
	if ((rc = cli_check_tenant_name(verb, "", name)) != 0)
		return rc;
	_cleanup_json_ json_t *body = json_pack("{s:s}", "name", name);
	if (!body)
		return cli_fail("%s: out of memory", verb);
	struct error err = {0};
	_cleanup_json_ json_t *tenant = NULL;
	if (call_once(o.socket_path, "POST", "/v1/tenants", body, &tenant, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	return print_tenant(verb, tenant, o.json);
}

/* ---- ls ------------------------------------------------------------------ */

static const char ls_help[] =
    "usage: agentbox tenant ls [OPTIONS]\n"
    "\n"
    "List tenants, one line each: NAME and CREATED (how long ago).\n"
    "\n"
    "options:\n"
    "  -q, --quiet     print only the names, one a line\n"
    "  --json          print a JSON array of the tenants as agentboxd shows\n"
    "                  them, instead of the table\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

static int collect_page(json_t *items, int page, void *data, struct error *err)
{
	(void)page;
	if (json_array_extend(data, items) < 0)
		return error_set_errno(err, ENOMEM, "collecting the list");
	return 0;
}

static void print_table(const json_t *tenants, int64_t now)
{
	char name[NAME_COLUMN_SIZE], created[32];
	int width = (int)strlen("NAME");
	size_t i;
	json_t *t;
	json_array_foreach(tenants, i, t)
	{
		escape_member(t, "name", name, sizeof(name));
		if ((int)strlen(name) > width)
			width = (int)strlen(name);
	}
	printf("%-*s  %s\n", width, "NAME", "CREATED");
	json_array_foreach(tenants, i, t)
	{
		escape_member(t, "name", name, sizeof(name));
		format_created(t, now, created, sizeof(created));
		printf("%-*s  %s\n", width, name, created);
	}
}

static int tenant_ls(int argc, char **argv)
{
	const char *verb = "tenant ls";
	struct opts o;
	int rc = parse_options(verb, ls_help, true, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (optind < argc)
		return cli_fail("%s: unexpected argument '%s' (see agentbox %s --help)", verb,
				argv[optind], verb);
	_cleanup_json_ json_t *tenants = json_array();
	if (!tenants)
		return cli_fail("%s: out of memory", verb);
	struct error err = {0};
	struct client c;
	int r = client_init(&c, o.socket_path, &err);
	if (r == 0)
		r = client_list(&c, "/v1/tenants", "tenants", collect_page, tenants, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (o.json) {
		r = client_print_json(stdout, tenants);
	} else if (o.quiet) {
		char name[NAME_COLUMN_SIZE];
		size_t i;
		json_t *t;
		json_array_foreach(tenants, i, t)
		{
			escape_member(t, "name", name, sizeof(name));
			printf("%s\n", name);
		}
	} else {
		print_table(tenants, wall_clock_ms());
	}
	if (r < 0 || fflush(stdout) == EOF || ferror(stdout))
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- show ---------------------------------------------------------------- */

static const char show_help[] =
    "usage: agentbox tenant show [OPTIONS] NAME\n"
    "\n"
    "Show tenant NAME: its name, and when it was created (RFC 3339, in UTC,\n"
    "and how long ago). A tenant that does not exist is an error (not_found).\n"
    "\n"
    "options:\n"
    "  --json          print the tenant as agentboxd shows it: a JSON object\n"
    "                  with name and created_at (ms since the epoch)\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 shown; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; an error of agentboxd's ends in its code, e.g. (not_found)).\n";

/* A quota's limit or use as agentboxd sent it: a number, "none", or "-". */
static void format_amount(const json_t *v, char *buf, size_t size)
{
	if (json_is_integer(v))
		snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, size, "%.3f", json_real_value(v));
	else if (json_is_string(v) && strcmp(json_string_value(v), "none") == 0)
		snprintf(buf, size, "none");
	else
		snprintf(buf, size, "-");
}

/* QUOTA, LIMIT (its own or the daemon's default), USE: a line each. */
static void print_quotas(const json_t *tenant)
{
	const json_t *quotas = json_object_get(tenant, "quotas");
	const json_t *own = json_object_get(tenant, "own_quotas");
	const json_t *use = json_object_get(tenant, "use");
	if (!json_is_object(quotas))
		return;
	printf("\n%-14s %-10s %-10s %s\n", "QUOTA", "LIMIT", "USE", "SET BY");
	for (int i = 0; i < QUOTA_COUNT; i++) {
		const char *name = quota_name((enum quota_id)i);
		char limit[32], held[32];
		format_amount(json_object_get(quotas, name), limit, sizeof(limit));
		format_amount(json_object_get(use, name), held, sizeof(held));
		printf("%-14s %-10s %-10s %s\n", name, limit, held,
		       json_object_get(own, name) ? "tenant" : "default");
	}
}

/* ms since the epoch as agentboxd writes times elsewhere: 2024-05-01T12:00:00.123Z. */
static void format_time(int64_t ms, char *buf, size_t size)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	if (ms < 0 || !gmtime_r(&s, &tm)) {
		snprintf(buf, size, "-");
		return;
	}
	char date[32];
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03dZ", date, (int)(ms % 1000));
}

static int tenant_show(int argc, char **argv)
{
	const char *verb = "tenant show";
	struct opts o;
	int rc = parse_options(verb, show_help, false, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one tenant NAME (see agentbox %s --help)", verb, verb);
	const char *name = argv[optind];
	if ((rc = cli_check_tenant_name(verb, "", name)) != 0)
		return rc;
	char target[CLIENT_TARGET_MAX];
	tenant_target(target, sizeof(target), name);
	struct error err = {0};
	_cleanup_json_ json_t *tenant = NULL;
	if (call_once(o.socket_path, "GET", target, NULL, &tenant, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (o.json)
		return print_tenant(verb, tenant, true);
	char shown[NAME_COLUMN_SIZE], when[40] = "-", ago[32];
	escape_member(tenant, "name", shown, sizeof(shown));
	const json_t *t = json_object_get(tenant, "created_at");
	format_created(tenant, wall_clock_ms(), ago, sizeof(ago));
	if (json_is_integer(t))
		format_time((int64_t)json_integer_value(t), when, sizeof(when));
	printf("name     %s\n", shown);
	if (json_is_integer(t))
		printf("created  %s (%s)\n", when, ago);
	else
		printf("created  -\n");
	print_quotas(tenant);
	if (fflush(stdout) == EOF || ferror(stdout))
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- set ----------------------------------------------------------------- */

static const char set_help[] =
    "usage: agentbox tenant set [OPTIONS] NAME QUOTA=VALUE...\n"
    "\n"
    "Set tenant NAME's own quotas, over agentboxd's defaults (agentboxd\n"
    "--tenant-quota), and show the tenant. QUOTA is one of:\n"
    "  sandboxes      interactive sandboxes running (or paused) at once\n"
    "  tasks_running  tasks running at once; more wait in the queue\n"
    "  tasks_queued   tasks waiting at once; a submit past it is refused\n"
    "  memory_mb      memory of its running sandboxes and tasks together (MiB)\n"
    "  cpus           CPUs of those together (to the thousandth: 1.5)\n"
    "  disk_mb        disk of those together (MiB)\n"
    "  timeout_s      the longest timeout one task or sandbox may have (also\n"
    "                 the timeout of a task that asks for none)\n"
    "VALUE is a number, none (no bound) or default (agentboxd's again). A\n"
    "create past a quota is refused (quota_exceeded), naming the quota, its\n"
    "limit and the tenant's use.\n"
    "\n"
    "options:\n"
    "  --json          print the tenant as agentboxd answered it\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 set; 125 agentbox or agentboxd failed or refused (one line\n"
    "on stderr).\n";

/* QUOTA=VALUE into body's member QUOTA: a number, "none", or null for "default". */
static int add_quota(const char *verb, const char *arg, json_t *body)
{
	const char *eq = strchr(arg, '=');
	struct quota q;
	quota_none(&q);
	char name[32];
	size_t len = eq ? (size_t)(eq - arg) : 0;
	if (!eq || len >= sizeof(name))
		return cli_fail("%s: '%s' is not QUOTA=VALUE", verb, arg);
	memcpy(name, arg, len);
	name[len] = '\0';
	enum quota_id id = quota_find(name);
	json_t *v;
	if (id == QUOTA_COUNT)
		return cli_fail("%s: '%s' is no quota (see agentbox %s --help)", verb, name, verb);
	if (strcmp(eq + 1, "default") == 0)
		v = json_null();
	else if (strcmp(eq + 1, "none") == 0)
		v = json_string("none");
	else if (quota_set_text(&q, arg) < 0)
		return cli_fail("%s: %s: '%s' is not a number, none or default", verb, name,
				eq + 1);
	else if (id == QUOTA_CPUS && q.v[id] % 1000)
		v = json_real((double)q.v[id] / 1000.0);
	else
		v = json_integer((json_int_t)(id == QUOTA_CPUS ? q.v[id] / 1000 : q.v[id]));
	if (!v || json_object_set_new(body, name, v) < 0)
		return cli_fail("%s: out of memory", verb);
	return 0;
}

static int tenant_set(int argc, char **argv)
{
	const char *verb = "tenant set";
	struct opts o;
	int rc = parse_options(verb, set_help, false, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind < 2)
		return cli_fail("%s: give a tenant NAME and QUOTA=VALUE (see agentbox %s --help)",
				verb, verb);
	const char *name = argv[optind];
	if ((rc = cli_check_tenant_name(verb, "", name)) != 0)
		return rc;
	_cleanup_json_ json_t *quotas = json_object();
	if (!quotas)
		return cli_fail("%s: out of memory", verb);
	for (int i = optind + 1; i < argc; i++)
		if ((rc = add_quota(verb, argv[i], quotas)) != 0)
			return rc;
	_cleanup_json_ json_t *body = json_pack("{s:O}", "quotas", quotas);
	if (!body)
		return cli_fail("%s: out of memory", verb);
	char target[CLIENT_TARGET_MAX];
	tenant_target(target, sizeof(target), name);
	struct error err = {0};
	_cleanup_json_ json_t *tenant = NULL;
	if (call_once(o.socket_path, "PATCH", target, body, &tenant, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (o.json)
		return print_tenant(verb, tenant, true);
	char shown[NAME_COLUMN_SIZE];
	escape_member(tenant, "name", shown, sizeof(shown));
	printf("name     %s\n", shown);
	print_quotas(tenant);
	if (fflush(stdout) == EOF || ferror(stdout))
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- rm ------------------------------------------------------------------ */

static const char rm_help[] =
    "usage: agentbox tenant rm [OPTIONS] NAME...\n"
    "\n"
    "Delete each tenant NAME, and print each name deleted. A tenant that still\n"
    "has a key that is not revoked, or a task or sandbox that has not ended, is\n"
    "refused (conflict), as is default: revoke its keys (agentbox key revoke)\n"
    "and let its work end first. Every name's form is checked before any\n"
    "request is sent; then a tenant that cannot be deleted gets its line on\n"
    "stderr and the others are still deleted.\n"
    "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all deleted; 125 agentbox or agentboxd failed or refused\n"
    "for one or more (one line on stderr for each).\n";

static int check_name(const char *verb, const char *name)
{
	return cli_check_tenant_name(verb, "", name);
}

static int tenant_rm(int argc, char **argv)
{
	const char *verb = "tenant rm", *socket_path;
	int rc = cli_parse_socket_only(verb, rm_help, argc, argv, &socket_path);
	if (rc >= 0)
		return rc;
	return cli_delete_each(verb, "tenant NAMEs", socket_path, optind, argc, argv, check_name,
			       tenant_target);
}

/* ---- the dispatch -------------------------------------------------------- */

static const struct verb subverbs[] = {
    {"create", NULL, tenant_create}, {"ls", NULL, tenant_ls}, {"show", NULL, tenant_show},
    {"set", NULL, tenant_set},	     {"rm", NULL, tenant_rm},
};

int verb_tenant(int argc, char **argv)
{
	return cli_dispatch("tenant", help, subverbs, sizeof(subverbs) / sizeof(subverbs[0]), argc,
			    argv);
}
