/*
 * policy.c - the "network" field: parsing, canonical JSON, matching. See
 * policy.h.
 */
#include "egress/policy.h"
#include "egress/addr.h"
#include "base/cleanup.h"
#include "base/json-cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_USAGE "none, open or allow:DOMAIN[,DOMAIN...]"
#define MODES	  "\"none\", \"allow\" or \"open\""

/* What is quoted of an input in a message, and the buffer that holds it. */
#define QUOTE_MAX 80
#define QUOTE_BUF (QUOTE_MAX + sizeof("..."))

/* "*." + a name + ":65535" */
#define ENTRY_BUF (2 + EGRESS_NAME_MAX + 6 + 1)

/*
 * s[0..len) as it can go in a one-line message: at most QUOTE_MAX bytes,
 * control and non-ASCII bytes as '?', "..." when cut.
 */
static const char *quote(char out[QUOTE_BUF], const char *s, size_t len)
{
	size_t n = len < QUOTE_MAX ? len : QUOTE_MAX, i;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		out[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
	}
	if (n < len) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

const char *egress_mode_name(enum egress_mode m)
{
	switch (m) {
	case EGRESS_NONE:
		return "none";
	case EGRESS_ALLOW:
		return "allow";
	case EGRESS_OPEN:
		return "open";
	}
	return "unknown";
}

static int mode_from_name(const char *s, enum egress_mode *ret)
{
	static const enum egress_mode modes[] = {EGRESS_NONE, EGRESS_ALLOW, EGRESS_OPEN};
	for (size_t i = 0; i < ELEMENTSOF(modes); i++)
		if (strcmp(s, egress_mode_name(modes[i])) == 0) {
			*ret = modes[i];
			return 0;
		}
	return -EINVAL;
}

/* Why a name is refused. */
enum name_fault {
	NAME_OK = 0,
	NAME_EMPTY,
	NAME_TOO_LONG,
	NAME_EMPTY_LABEL,
	NAME_LABEL_TOO_LONG,
	NAME_BAD_CHAR,
	NAME_HYPHEN_EDGE,
	NAME_STAR_PLACE,
	NAME_ONE_LABEL,
	NAME_WILDCARD_BROAD,
	NAME_NUMERIC, /* the last label is all digits: an IP literal */
};

static const char *name_fault_reason(enum name_fault f)
{
	switch (f) {
	case NAME_OK:
		break;
	case NAME_EMPTY:
		return "empty";
	case NAME_TOO_LONG:
		return "longer than 253 characters";
	case NAME_EMPTY_LABEL:
		return "an empty label";
	case NAME_LABEL_TOO_LONG:
		return "a label longer than 63 characters";
	case NAME_BAD_CHAR:
		return "a label has a character other than letters, digits, '-' and '_'";
	case NAME_HYPHEN_EDGE:
		return "a label starts or ends with '-'";
	case NAME_STAR_PLACE:
		return "'*' only as the whole first label, as in *.example.org";
	case NAME_ONE_LABEL:
		return "a single label; a domain has at least two, as in example.com";
	case NAME_WILDCARD_BROAD:
		return "a wildcard needs at least two labels after '*.', as in *.example.org";
	case NAME_NUMERIC:
		return "its last label is all digits";
	}
	return "";
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/*
 * Check in[0..len) and write its normalised form to out (with the "*." of a
 * wildcard when wildcard_ok). out is scratch when the answer is not NAME_OK.
 */
static enum name_fault name_check(const char *in, size_t len, bool wildcard_ok,
				  char out[EGRESS_NAME_MAX + 1])
{
	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0)
		return NAME_EMPTY;
	if (len > EGRESS_NAME_MAX)
		return NAME_TOO_LONG;
	size_t labels = 0, start = 0;
	bool wildcard = false, digits_only = false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && in[i] != '.')
			continue;
		const char *label = in + start;
		size_t n = i - start;
		if (n == 0)
			return NAME_EMPTY_LABEL;
		if (n > EGRESS_LABEL_MAX)
			return NAME_LABEL_TOO_LONG;
		if (wildcard_ok && labels == 0 && n == 1 && label[0] == '*') {
			wildcard = true;
			out[start] = '*';
		} else {
			digits_only = true;
			for (size_t j = 0; j < n; j++) {
				char c = label[j];
				if (c >= 'A' && c <= 'Z')
					c = (char)(c - 'A' + 'a');
				if (c == '*' && wildcard_ok)
					return NAME_STAR_PLACE;
				if (!is_name_char(c))
					return NAME_BAD_CHAR;
				if (c < '0' || c > '9')
					digits_only = false;
				out[start + j] = c;
			}
			if (label[0] == '-' || label[n - 1] == '-')
				return NAME_HYPHEN_EDGE;
		}
		if (i < len)
			out[i] = '.';
		labels++;
		start = i + 1;
	}
	out[len] = '\0';
	if (labels < 2)
		return NAME_ONE_LABEL;
	if (wildcard && labels < 3)
		return NAME_WILDCARD_BROAD;
	if (digits_only)
		return NAME_NUMERIC;
	return NAME_OK;
}

int egress_name_normalize(const char *in, char *out, size_t outlen)
{
	if (!in)
		return -EINVAL;
	char name[EGRESS_NAME_MAX + 1];
	/* one more than a name with its trailing dot, so longer is seen as such */
	size_t len = strnlen(in, EGRESS_NAME_MAX + 2);
	if (name_check(in, len, false, name) != NAME_OK)
		return -EINVAL;
	size_t n = strlen(name);
	if (!out || outlen < n + 1)
		return -ENOBUFS;
	memcpy(out, name, n + 1);
	return 0;
}

/* Is s[0..len) an address literal, as addr_parse() reads one? */
static bool parses_as_addr(const char *s, size_t len)
{
	char buf[64];
	struct addr a;
	if (len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return addr_parse(buf, &a) == 0;
}

/*
 * An IP literal as an entry: "[v6]" or "[v6]:port" (anything with ':'
 * inside brackets), a bare address, or an IPv4 address with a port. The
 * names whose last label is all digits are found by name_check().
 */
static bool is_ip_literal(const char *s, size_t len)
{
	if (len > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		size_t n = close ? (size_t)(close - s) - 1 : len - 1;
		return memchr(s + 1, ':', n) != NULL || parses_as_addr(s + 1, n);
	}
	if (parses_as_addr(s, len))
		return true;
	const char *colon = memchr(s, ':', len);
	return colon && parses_as_addr(s, (size_t)(colon - s));
}

/* "1".."65535", no sign, no leading zero. */
static int parse_port(const char *s, size_t len, uint16_t *ret)
{
	if (len == 0 || len > 5 || s[0] == '0')
		return -EINVAL;
	unsigned long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

/* One allow entry s[0..len), for the field named field. */
static int parse_entry(const char *s, size_t len, const char *field, struct egress_rule *ret,
		       struct error *err)
{
	char q[QUOTE_BUF];
	if (is_ip_literal(s, len))
		return error_set(err, EINVAL,
				 "%s: '%s' is an IP literal: IP literals are not allowed, only "
				 "domain names",
				 field, quote(q, s, len));
	const char *colon = memchr(s, ':', len);
	size_t hostlen = colon ? (size_t)(colon - s) : len;
	uint16_t port = 0;
	if (colon && parse_port(colon + 1, len - hostlen - 1, &port) < 0)
		return error_set(err, EINVAL, "%s: '%s': the port must be a number from 1 to 65535",
				 field, quote(q, s, len));
	char name[EGRESS_NAME_MAX + 1];
	enum name_fault f = name_check(s, hostlen, true, name);
	if (f == NAME_NUMERIC)
		return error_set(
		    err, EINVAL,
		    "%s: '%s' is an IP literal (%s): IP literals are not allowed, only "
		    "domain names",
		    field, quote(q, s, len), name_fault_reason(f));
	if (f != NAME_OK)
		return error_set(err, EINVAL, "%s: '%s' is not a domain name (%s)", field,
				 quote(q, s, len), name_fault_reason(f));
	struct egress_rule r = {.wildcard = name[0] == '*', .port = port};
	const char *base = r.wildcard ? name + 2 : name;
	memcpy(r.name, base, strlen(base) + 1);
	*ret = r;
	return 0;
}

static bool rule_equal(const struct egress_rule *a, const struct egress_rule *b)
{
	return a->wildcard == b->wildcard && a->port == b->port && strcmp(a->name, b->name) == 0;
}

/* Append r to rules[0..*n) unless an equal rule is there already. */
static void add_rule(struct egress_rule *rules, size_t *n, const struct egress_rule *r)
{
	for (size_t i = 0; i < *n; i++)
		if (rule_equal(&rules[i], r))
			return;
	rules[(*n)++] = *r;
}

static int check_unknown_members(const json_t *v, struct error *err)
{
	static const char *const known[] = {"mode", "allow", "rate_mbit"};
	const char *key;
	json_t *member;
	json_object_foreach((json_t *)v, key, member)
	{
		size_t i = 0;
		while (i < ELEMENTSOF(known) && strcmp(key, known[i]) != 0)
			i++;
		if (i == ELEMENTSOF(known)) {
			char q[QUOTE_BUF];
			return error_set(err, EINVAL,
					 "network.%s: unknown field (network has mode, allow and "
					 "rate_mbit)",
					 quote(q, key, strlen(key)));
		}
	}
	return 0;
}

static int parse_allow_json(const json_t *allow, struct egress_rule **ret, size_t *ret_n,
			    struct error *err)
{
	if (!json_is_array(allow))
		return error_set(err, EINVAL, "network.allow: must be an array of domain names");
	size_t count = json_array_size(allow);
	if (count == 0)
		return error_set(err, EINVAL,
				 "network.allow: must not be empty with mode \"allow\" (mode "
				 "\"none\" allows nothing)");
	if (count > EGRESS_ALLOW_MAX)
		return error_set(err, EINVAL, "network.allow: more than %d entries",
				 EGRESS_ALLOW_MAX);
	_cleanup_free_ struct egress_rule *rules = calloc(count, sizeof(*rules));
	if (!rules)
		return error_set(err, ENOMEM, "network.allow: out of memory");
	size_t n = 0;
	for (size_t i = 0; i < count; i++) {
		const json_t *item = json_array_get(allow, i);
		char field[32];
		snprintf(field, sizeof(field), "network.allow[%zu]", i);
		if (!json_is_string(item))
			return error_set(err, EINVAL, "%s: must be a string (a domain name)",
					 field);
		struct egress_rule rule;
		int r = parse_entry(json_string_value(item), json_string_length(item), field, &rule,
				    err);
		if (r < 0)
			return r;
		add_rule(rules, &n, &rule);
	}
	*ret = TAKE_PTR(rules);
	*ret_n = n;
	return 0;
}

static int parse_rate_json(const json_t *v, enum egress_mode mode, uint32_t *ret, struct error *err)
{
	if (!v || json_is_null(v)) {
		*ret = 0;
		return 0;
	}
	if (mode == EGRESS_NONE)
		return error_set(err, EINVAL,
				 "network.rate_mbit: not with mode \"none\" (no traffic to limit)");
	json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
	if (n < 1 || n > EGRESS_RATE_MBIT_MAX)
		return error_set(err, EINVAL,
				 "network.rate_mbit: must be an integer from 1 to %d (megabits per "
				 "second), or null for no limit",
				 EGRESS_RATE_MBIT_MAX);
	*ret = (uint32_t)n;
	return 0;
}

int egress_policy_from_json(const json_t *v, struct egress_policy *ret, struct error *err)
{
	if (!v || json_is_null(v)) {
		*ret = (struct egress_policy){.mode = EGRESS_NONE};
		return 0;
	}
	if (!json_is_object(v))
		return error_set(err, EINVAL,
				 "network: must be an object, as {\"mode\": \"allow\", \"allow\": "
				 "[\"example.com\"]}");
	int r = check_unknown_members(v, err);
	if (r < 0)
		return r;

	const json_t *mode_v = json_object_get(v, "mode");
	if (!mode_v)
		return error_set(err, EINVAL, "network.mode: required: " MODES);
	struct egress_policy p = {0};
	if (!json_is_string(mode_v) || mode_from_name(json_string_value(mode_v), &p.mode) < 0)
		return error_set(err, EINVAL, "network.mode: must be " MODES);

	const json_t *allow = json_object_get(v, "allow");
	if (p.mode != EGRESS_ALLOW && allow)
		return error_set(err, EINVAL, "network.allow: only with mode \"allow\", not \"%s\"",
				 egress_mode_name(p.mode));
	if (p.mode == EGRESS_ALLOW && !allow)
		return error_set(err, EINVAL, "network.allow: required with mode \"allow\"");

	r = parse_rate_json(json_object_get(v, "rate_mbit"), p.mode, &p.rate_mbit, err);
	if (r < 0)
		return r;
	if (allow) {
		r = parse_allow_json(allow, &p.rules, &p.nrules, err);
		if (r < 0)
			return r;
	}
	*ret = p;
	return 0;
}

/* Does p hold the invariants of policy.h (the ones to_json relies on)? */
static bool policy_is_valid(const struct egress_policy *p)
{
	if (p->rate_mbit > EGRESS_RATE_MBIT_MAX)
		return false;
	switch (p->mode) {
	case EGRESS_NONE:
		return p->nrules == 0 && p->rate_mbit == 0;
	case EGRESS_OPEN:
		return p->nrules == 0;
	case EGRESS_ALLOW:
		if (p->nrules == 0 || p->nrules > EGRESS_ALLOW_MAX || !p->rules)
			return false;
		for (size_t i = 0; i < p->nrules; i++) {
			const struct egress_rule *r = &p->rules[i];
			char name[EGRESS_NAME_MAX + 1];
			size_t len = strnlen(r->name, sizeof(r->name));
			if (len == sizeof(r->name) ||
			    name_check(r->name, len, false, name) != NAME_OK ||
			    strcmp(name, r->name) != 0 ||
			    (r->wildcard && len + 2 > EGRESS_NAME_MAX))
				return false;
		}
		return true;
	}
	return false;
}

/* The entry string of r: "*.name:port" in its canonical form. */
static void rule_format(const struct egress_rule *r, char out[ENTRY_BUF])
{
	char port[8] = "";
	if (r->port)
		snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
	snprintf(out, ENTRY_BUF, "%s%s%s", r->wildcard ? "*." : "", r->name, port);
}

json_t *egress_policy_to_json(const struct egress_policy *p)
{
	if (!p || !policy_is_valid(p))
		return NULL;
	_cleanup_json_ json_t *o = json_object();
	if (!o || json_object_set_new(o, "mode", json_string(egress_mode_name(p->mode))) < 0)
		return NULL;
	if (p->mode == EGRESS_ALLOW) {
		json_t *allow = json_array();
		if (json_object_set_new(o, "allow", allow) < 0)
			return NULL;
		for (size_t i = 0; i < p->nrules; i++) {
			char entry[ENTRY_BUF];
			rule_format(&p->rules[i], entry);
			if (json_array_append_new(allow, json_string(entry)) < 0)
				return NULL;
		}
	}
	if (p->rate_mbit &&
	    json_object_set_new(o, "rate_mbit", json_integer((json_int_t)p->rate_mbit)) < 0)
		return NULL;
	return TAKE_PTR(o);
}

int egress_policy_parse_cli(const char *arg, struct egress_policy *ret, struct error *err)
{
	char q[QUOTE_BUF];
	if (!arg)
		return error_set(err, EINVAL, "--network: missing: " CLI_USAGE);
	if (strcmp(arg, "none") == 0 || strcmp(arg, "open") == 0) {
		*ret = (struct egress_policy){.mode = arg[0] == 'o' ? EGRESS_OPEN : EGRESS_NONE};
		return 0;
	}
	if (strcmp(arg, "allow") == 0)
		return error_set(err, EINVAL, "--network: allow needs its domains: " CLI_USAGE);
	if (strncmp(arg, "allow:", 6) != 0)
		return error_set(err, EINVAL, "--network: '%s' is not " CLI_USAGE,
				 quote(q, arg, strlen(arg)));
	const char *list = arg + 6;
	if (!*list)
		return error_set(err, EINVAL,
				 "--network: allow: needs at least one domain: " CLI_USAGE);
	size_t count = 1;
	for (const char *c = list; *c; c++)
		count += *c == ',';
	if (count > EGRESS_ALLOW_MAX)
		return error_set(err, EINVAL, "--network: more than %d entries", EGRESS_ALLOW_MAX);
	_cleanup_free_ struct egress_rule *rules = calloc(count, sizeof(*rules));
	if (!rules)
		return error_set(err, ENOMEM, "--network: out of memory");
	size_t n = 0;
	for (const char *s = list;;) {
		size_t len = strcspn(s, ",");
		if (len == 0)
			return error_set(err, EINVAL, "--network: an empty entry in '%s'",
					 quote(q, arg, strlen(arg)));
		struct egress_rule rule;
		int r = parse_entry(s, len, "--network", &rule, err);
		if (r < 0)
			return r;
		add_rule(rules, &n, &rule);
		if (!s[len])
			break;
		s += len + 1;
	}
	*ret = (struct egress_policy){.mode = EGRESS_ALLOW, .rules = TAKE_PTR(rules), .nrules = n};
	return 0;
}

void egress_policy_release(struct egress_policy *p)
{
	if (!p)
		return;
	free(p->rules);
	*p = (struct egress_policy){0};
}

/* port EGRESS_ANY_PORT: the name alone */
#define EGRESS_ANY_PORT 0

static bool rule_matches(const struct egress_rule *r, const char *host, size_t hostlen,
			 uint16_t port)
{
	if (port != EGRESS_ANY_PORT &&
	    (r->port ? port != r->port
		     : port != EGRESS_DEFAULT_PORT_A && port != EGRESS_DEFAULT_PORT_B))
		return false;
	if (!r->wildcard)
		return strcmp(host, r->name) == 0;
	/* one label or more, then '.', then the name: never the name itself */
	size_t n = strlen(r->name);
	return hostlen > n + 1 && host[hostlen - n - 1] == '.' &&
	       strcmp(host + hostlen - n, r->name) == 0;
}

static bool allows(const struct egress_policy *p, const char *host, uint16_t port)
{
	if (!p || p->mode == EGRESS_NONE)
		return false;
	if (p->mode == EGRESS_OPEN)
		return true;
	if (p->mode != EGRESS_ALLOW)
		return false;
	char h[EGRESS_NAME_MAX + 1];
	if (egress_name_normalize(host, h, sizeof(h)) < 0)
		return false;
	size_t hostlen = strlen(h);
	for (size_t i = 0; i < p->nrules; i++)
		if (rule_matches(&p->rules[i], h, hostlen, port))
			return true;
	return false;
}

bool egress_policy_allows(const struct egress_policy *p, const char *host, uint16_t port)
{
	if (p && p->mode == EGRESS_OPEN)
		return true;
	return port != EGRESS_ANY_PORT && allows(p, host, port);
}

bool egress_policy_allows_name(const struct egress_policy *p, const char *host)
{
	return allows(p, host, EGRESS_ANY_PORT);
}
