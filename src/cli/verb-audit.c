/*
 * agentbox audit: agentboxd's audit log (GET /v1/audit, an admin's), the
 * last recorded first, as a table or as JSON, page after page up to
 * --limit rows.
 */
#include "base/buf.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"
#include "core/tenant.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

/* Rows printed at most, and by default; a page asks for at most AUDIT_PAGE. */
#define AUDIT_LIMIT_MAX	    100000
#define AUDIT_LIMIT_DEFAULT 50
#define AUDIT_PAGE	    1000
/* Bytes of --route: the API's bound. */
#define AUDIT_ROUTE_MAX 64

static const char help[] =
    "usage: agentbox audit [OPTIONS]\n"
    "\n"
    "Show agentboxd's audit log, the last recorded first: one line per mutating\n"
    "request (POST, PUT, DELETE, PATCH), and one per source, reason and minute\n"
    "of refused keys, with their count. Columns: TIME, STATUS (and the error\n"
    "code, or why a key was refused), COUNT, WHO (tenant, and key id or local\n"
    "uid), REQUEST (method and route), TARGET (the id it named or made) and\n"
    "SOURCE (address, or unix:uid=N). Needs an admin key ($AGENTBOX_KEY) or\n"
    "root on agentboxd's unix socket.\n"
    "\n"
    "options:\n"
    "  --tenant NAME   only requests of tenant NAME's principals\n"
    "  --since WHEN    only rows from WHEN on: a duration back from now (90s,\n"
    "                  2h, 1d) or a time (2024-05-01T12:00:00Z)\n"
    "  --until WHEN    only rows before WHEN (the same forms)\n"
    "  --route ROUTE   only these requests: a method (POST), a route (\"/v1/tasks\",\n"
    "                  or a prefix \"/v1/sandboxes*\"), or both (\"POST /v1/tasks\")\n"
    "  --limit N       print at most N rows (1 to 100000; default 50)\n"
    "  --json          print a JSON array of the rows as agentboxd shows them,\n"
    "                  instead of the table\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

enum { OPT_TENANT = CLI_OPT_VERB, OPT_SINCE, OPT_UNTIL, OPT_ROUTE, OPT_LIMIT, OPT_JSON };

static const struct option options[] = {
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"since", required_argument, NULL, OPT_SINCE},
    {"until", required_argument, NULL, OPT_UNTIL},
    {"route", required_argument, NULL, OPT_ROUTE},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"json", no_argument, NULL, OPT_JSON},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

/* WHEN: a time, or a duration back from now. ms since the epoch, or -1 after saying why. */
static int64_t parse_when(const char *name, const char *arg, int64_t now)
{
	int64_t t;
	uint64_t ms;
	if (parse_rfc3339_ms(arg, &t) == 0 && t > 0)
		return t;
	if (parse_duration_ms(arg, &ms) == 0 && ms > 0 && ms < (uint64_t)now)
		return now - (int64_t)ms;
	cli_fail("audit: %s: '%s' is neither a duration (90s, 2h, 1d) nor a time "
		 "(2024-05-01T12:00:00Z)",
		 name, arg);
	return -1;
}

/* s percent-encoded for a query value, appended to b. */
static void put_encoded(struct buf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~/*", ch))
			buf_printf(b, "%c", ch);
		else
			buf_printf(b, "%%%02X", ch);
	}
}

/* s escaped for a terminal, into buf (cut to fit); "-" for none. */
static void column(const char *s, char *buf, size_t size)
{
	struct term_line l;
	term_line_init(&l, buf, size);
	term_line_adds(&l, s && *s ? s : "-");
}

static void print_row(const json_t *row)
{
	const char *s;
	char time[40], status[48], who[96], request[96], target[72], source[72], text[80];
	column(json_string_value(json_object_get(row, "time")), time, sizeof(time));
	s = json_string_value(json_object_get(row, "error"));
	const char *reason = json_string_value(json_object_get(row, "reason"));
	snprintf(text, sizeof(text), "%lld%s%s",
		 (long long)json_integer_value(json_object_get(row, "status")),
		 reason || s ? " " : "",
		 reason ? reason
		 : s	? s
			: "");
	column(text, status, sizeof(status));
	const char *tenant = json_string_value(json_object_get(row, "tenant"));
	const char *key = json_string_value(json_object_get(row, "key_id"));
	const json_t *uid = json_object_get(row, "uid");
	if (key)
		snprintf(text, sizeof(text), "%s key %s", tenant ? tenant : "-", key);
	else if (json_is_integer(uid))
		snprintf(text, sizeof(text), "%s uid %lld", tenant ? tenant : "-",
			 (long long)json_integer_value(uid));
	else
		snprintf(text, sizeof(text), "%s", tenant ? tenant : "-");
	column(text, who, sizeof(who));
	const char *method = json_string_value(json_object_get(row, "method"));
	const char *route = json_string_value(json_object_get(row, "route"));
	snprintf(text, sizeof(text), "%s%s%s", method ? method : "", method && route ? " " : "",
		 route	  ? route
		 : method ? "(no route)"
			  : "");
	column(text, request, sizeof(request));
	column(json_string_value(json_object_get(row, "target")), target, sizeof(target));
	column(json_string_value(json_object_get(row, "source")), source, sizeof(source));
	printf("%-24s  %-20s  %5lld  %-28s  %-34s  %-30s  %s\n", time, status,
	       (long long)json_integer_value(json_object_get(row, "count")), who, request, target,
	       source);
}

struct args {
	const char *socket_path, *tenant, *route;
	int64_t since, until;
	uint64_t limit;
	bool json;
};

/* Fill a from argv: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct args *a)
{
	int64_t now = wall_clock_ms();
	*a = (struct args){.limit = AUDIT_LIMIT_DEFAULT};
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case OPT_TENANT:
			if (cli_check_tenant_name("audit", "--tenant: ", optarg) != 0)
				return EXIT_AGENTBOX;
			a->tenant = optarg;
			break;
		case OPT_SINCE:
		case OPT_UNTIL: {
			int64_t t =
			    parse_when(opt == OPT_SINCE ? "--since" : "--until", optarg, now);
			if (t < 0)
				return EXIT_AGENTBOX;
			*(opt == OPT_SINCE ? &a->since : &a->until) = t;
			break;
		}
		case OPT_ROUTE:
			if (!*optarg || strlen(optarg) > AUDIT_ROUTE_MAX)
				return cli_fail("audit: --route: 1 to %d bytes, such as \"POST "
						"/v1/tasks\"",
						AUDIT_ROUTE_MAX);
			a->route = optarg;
			break;
		case OPT_LIMIT:
			if (parse_u64(optarg, &a->limit) < 0 || a->limit < 1 ||
			    a->limit > AUDIT_LIMIT_MAX)
				return cli_fail("audit: --limit: '%s' is not a number from 1 to %d",
						optarg, AUDIT_LIMIT_MAX);
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case CLI_OPT_SOCKET:
			a->socket_path = optarg;
			break;
		default:
			return cli_option_error("audit", opt, argv);
		}
	}
	if (optind < argc)
		return cli_fail("audit: unexpected argument '%s' (see agentbox audit --help)",
				argv[optind]);
	return -1;
}

/* The first page's target: "/v1/audit?..." without limit and after. */
static int base_target(const struct args *a, struct buf *b)
{
	buf_puts(b, "/v1/audit?");
	if (a->tenant)
		buf_printf(b, "tenant=%s&", a->tenant);
	if (a->since)
		buf_printf(b, "since=%lld&", (long long)a->since);
	if (a->until)
		buf_printf(b, "until=%lld&", (long long)a->until);
	if (a->route) {
		buf_puts(b, "route=");
		put_encoded(b, a->route);
		buf_puts(b, "&");
	}
	return b->failed;
}

int verb_audit(int argc, char **argv)
{
	struct args a;
	int rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	_cleanup_buf_ struct buf base = {0};
	if (base_target(&a, &base) < 0)
		return cli_fail("audit: out of memory");
	struct error err = {0};
	struct client c;
	if (client_init(&c, a.socket_path, &err) < 0)
		return cli_fail("audit: %s", err.msg);
	_cleanup_json_ json_t *all = a.json ? json_array() : NULL;
	uint64_t shown = 0;
	long long after = 0;
	rc = 0;
	while (rc == 0 && shown < a.limit) {
		uint64_t want = a.limit - shown < AUDIT_PAGE ? a.limit - shown : AUDIT_PAGE;
		char target[CLIENT_TARGET_MAX];
		if (after)
			snprintf(target, sizeof(target), "%slimit=%llu&after=%lld", base.data,
				 (unsigned long long)want, after);
		else
			snprintf(target, sizeof(target), "%slimit=%llu", base.data,
				 (unsigned long long)want);
		_cleanup_json_ json_t *page = NULL;
		if (client_call(&c, "GET", target, NULL, &page, &err) < 0) {
			rc = cli_fail("audit: %s", err.msg);
			break;
		}
		json_t *rows = json_object_get(page, "entries");
		json_t *next = json_object_get(page, "next");
		if (!json_is_array(rows) || json_array_size(rows) > want ||
		    (!json_is_null(next) &&
		     !(json_is_integer(next) && json_integer_value(next) > 0 &&
		       (!after || json_integer_value(next) < after)))) {
			rc = cli_fail("audit: agentboxd's answer is not an audit log page");
			break;
		}
		if (!a.json && shown == 0)
			printf("%-24s  %-20s  %5s  %-28s  %-34s  %-30s  %s\n", "TIME", "STATUS",
			       "COUNT", "WHO", "REQUEST", "TARGET", "SOURCE");
		size_t i;
		json_t *row;
		json_array_foreach(rows, i, row)
		{
			if (a.json)
				json_array_append(all, row);
			else
				print_row(row);
		}
		shown += json_array_size(rows);
		if (json_is_null(next) || json_array_size(rows) == 0)
			break;
		after = (long long)json_integer_value(next);
	}
	client_release(&c);
	if (rc == 0 && a.json && client_print_json(stdout, all) < 0)
		rc = cli_fail("audit: cannot write the output");
	if (fflush(stdout) == EOF)
		return cli_fail("audit: cannot write the output");
	return rc;
}
