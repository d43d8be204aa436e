/*
 * options.c - the request options verbs share (options.h).
 */
#include "cli/options.h"

#include "egress/policy.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "base/parse.h"

#include <errno.h>
#include <string.h>

static int nomem(struct error *err)
{
	return error_set_errno(err, ENOMEM, "building the request");
}

int cli_body_set(json_t *body, const char *key, json_t *value, struct error *err)
{
	if (!value || json_object_set_new(body, key, value) < 0)
		return nomem(err);
	return 0;
}

/* body[key] as an object, created empty on first use; NULL = ENOMEM. */
static json_t *member(json_t *body, const char *key)
{
	json_t *m = json_object_get(body, key);
	if (m)
		return m;
	m = json_object();
	if (!m || json_object_set_new(body, key, m) < 0)
		return NULL;
	return m;
}

int cli_body_limit(json_t *body, const char *key, json_t *value, struct error *err)
{
	_cleanup_json_ json_t *v = value; /* ours, whatever happens */
	json_t *limits = member(body, "limits");
	if (!limits)
		return nomem(err);
	return cli_body_set(limits, key, TAKE_PTR(v), err);
}

json_t *cli_thousandths(uint64_t milli)
{
	if (milli % 1000 == 0)
		return json_integer((json_int_t)(milli / 1000));
	return json_real((double)milli / 1000.0);
}

int cli_parse_duration(const char *name, const char *arg, uint64_t *ret_ms, struct error *err)
{
	uint64_t ms;
	if (parse_duration_ms(arg, &ms) < 0 || ms == 0 || ms > INT64_MAX / 2)
		return error_set(err, EINVAL, "%s: '%s' is not a duration (e.g. 90s, 2h)", name,
				 arg);
	*ret_ms = ms;
	return 0;
}

static int size_mib(json_t *body, const char *opt, const char *arg, const char *key,
		    struct error *err)
{
	uint64_t bytes;
	if (parse_size(arg, &bytes) < 0)
		return error_set(err, EINVAL, "--%s: '%s' is not a size (e.g. 512m, 2g)", opt, arg);
	if (bytes == 0)
		return error_set(err, EINVAL, "--%s: must be more than 0", opt);
	uint64_t mib = bytes / (1u << 20) + (bytes % (1u << 20) ? 1 : 0);
	return cli_body_limit(body, key, json_integer((json_int_t)mib), err);
}

/* KEY=VALUE into body[member][KEY] as a string; a key given twice is an error. */
static int add_pair(json_t *body, const char *opt, const char *member_key, const char *arg,
		    struct error *err)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg)
		return error_set(err, EINVAL, "--%s: '%s' is not KEY=VALUE", opt, arg);
	_cleanup_free_ char *key = strndup(arg, (size_t)(eq - arg));
	json_t *m = member(body, member_key);
	if (!key || !m)
		return nomem(err);
	if (json_object_get(m, key))
		return error_set(err, EINVAL, "--%s: %s is given twice", opt, key);
	json_t *v = json_string(eq + 1);
	if (!v)
		return error_set(err, EINVAL, "--%s: the value of %s is not UTF-8 text", opt, key);
	return cli_body_set(m, key, v, err);
}

static int add_metadata(json_t *body, const char *arg, struct error *err)
{
	if (arg[0] != '{' && arg[0] != '[')
		return add_pair(body, "metadata", "metadata", arg, err);
	json_error_t jerr;
	_cleanup_json_ json_t *obj = json_loads(arg, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj)
		return error_set(err, EINVAL, "--metadata: not JSON: %s", jerr.text);
	json_t *m = member(body, "metadata");
	if (!json_is_object(obj))
		return error_set(err, EINVAL, "--metadata: must be a JSON object");
	if (!m)
		return nomem(err);
	const char *key;
	json_t *value;
	json_object_foreach(obj, key, value)
	{
		if (json_object_get(m, key))
			return error_set(err, EINVAL, "--metadata: %s is given twice", key);
		if (json_object_set(m, key, value) < 0)
			return nomem(err);
	}
	return 0;
}

/*
 * --network into body.network, keeping the rate_mbit of a --network-rate
 * given before it (alone, or with an earlier --network).
 */
static int add_network(json_t *body, const char *arg, struct error *err)
{
	struct egress_policy p;
	int r = egress_policy_parse_cli(arg, &p, err);
	if (r < 0)
		return r;
	json_t *rate = json_object_get(json_object_get(body, "network"), "rate_mbit");
	if (rate && p.mode == EGRESS_NONE)
		return cli_network_rate_needs_network(err);
	if (rate)
		p.rate_mbit = (uint32_t)json_integer_value(rate);
	json_t *j = egress_policy_to_json(&p);
	egress_policy_release(&p);
	return cli_body_set(body, "network", j, err);
}

/* --secret NAME@HOST[,HOST...] into body.secrets.NAME, the value from our environment. */
static int add_secret(json_t *body, const char *arg, struct error *err)
{
	const char *at = strchr(arg, '@');
	size_t n = at ? (size_t)(at - arg) : 0;
	char name[256];
	if (!at || n == 0 || n >= sizeof(name) || !at[1])
		return error_set(err, EINVAL, "--secret: '%s' is not NAME@HOST[,HOST...]", arg);
	memcpy(name, arg, n);
	name[n] = '\0';
	const char *value = getenv(name);
	if (!env_name_is_valid(name, n) || !value)
		return error_set(err, EINVAL,
				 "--secret: $%s is not set here: the value is taken from this "
				 "shell's environment, never from the command line",
				 name);
	json_t *secrets = json_object_get(body, "secrets");
	if (!secrets && cli_body_set(body, "secrets", json_object(), err) < 0)
		return -ENOMEM;
	secrets = json_object_get(body, "secrets");
	if (json_object_get(secrets, name))
		return error_set(err, EINVAL, "--secret: %s is given twice", name);
	json_t *hosts = json_array();
	for (const char *h = at + 1; hosts && *h;) {
		size_t len = strcspn(h, ",");
		if (json_array_append_new(hosts, json_stringn(h, len)) < 0)
			json_decref(TAKE_PTR(hosts));
		h += len + (h[len] == ',');
	}
	json_t *s = hosts ? json_pack("{s:s, s:o}", "value", value, "hosts", hosts) : NULL;
	if (!s || json_object_set_new(secrets, name, s) < 0)
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

/* --network-rate into body.network.rate_mbit; alone until a --network comes. */
static int add_network_rate(json_t *body, const char *arg, struct error *err)
{
	uint32_t rate = 0;
	int r = cli_parse_network_rate(arg, &rate, err);
	if (r < 0)
		return r;
	json_t *net = json_object_get(body, "network");
	const char *mode = json_string_value(json_object_get(net, "mode"));
	if (mode && strcmp(mode, "none") == 0)
		return cli_network_rate_needs_network(err);
	if (!net && cli_body_set(body, "network", json_object(), err) < 0)
		return -ENOMEM;
	net = json_object_get(body, "network");
	return cli_body_set(net, "rate_mbit", json_integer(rate), err);
}

int cli_body_option(json_t *body, int opt, const char *arg, struct error *err)
{
	uint64_t v;
	switch (opt) {
	case CLI_OPT_MEMORY:
		return size_mib(body, "memory", arg, "memory_mb", err);
	case CLI_OPT_DISK:
		return size_mib(body, "disk", arg, "disk_mb", err);
	case CLI_OPT_CPUS:
		if (parse_cpus_milli(arg, &v) < 0 || v == 0)
			return error_set(err, EINVAL,
					 "--cpus: '%s' is not a positive number (e.g. 0.5, 2)",
					 arg);
		return cli_body_limit(body, "cpus", cli_thousandths(v), err);
	case CLI_OPT_PIDS:
		if (parse_u64(arg, &v) < 0 || v == 0 || v > INT64_MAX)
			return error_set(err, EINVAL, "--pids: '%s' is not a positive whole number",
					 arg);
		return cli_body_limit(body, "pids", json_integer((json_int_t)v), err);
	case CLI_OPT_ENV:
		return add_pair(body, "env", "env", arg, err);
	case CLI_OPT_METADATA:
		return add_metadata(body, arg, err);
	case CLI_OPT_NETWORK:
		return add_network(body, arg, err);
	case CLI_OPT_NETWORK_RATE:
		return add_network_rate(body, arg, err);
	case CLI_OPT_SECRET:
		return add_secret(body, arg, err);
	case CLI_OPT_IMAGE:
		return cli_body_set(body, "image", json_string(arg), err);
	case CLI_OPT_USER:
		if (strcmp(arg, "root") != 0 && strcmp(arg, "sandbox") != 0)
			return error_set(err, EINVAL, "--user: '%s' is not root or sandbox", arg);
		return cli_body_set(body, "user", json_string(arg), err);
	case CLI_OPT_PULL:
		return cli_body_set(body, "pull", json_true(), err);
	case CLI_OPT_CWD:
		if (arg[0] != '/')
			return error_set(err, EINVAL, "--cwd: '%s' is not an absolute path", arg);
		return cli_body_set(body, "cwd", json_string(arg), err);
	}
	return -ENOENT;
}

int cli_parse_network_rate(const char *arg, uint32_t *ret, struct error *err)
{
	uint64_t v;
	if (parse_u64(arg, &v) < 0 || v == 0 || v > EGRESS_RATE_MBIT_MAX)
		return error_set(err, EINVAL,
				 "--network-rate: '%s' is not a number from 1 to %d (Mbit/s)", arg,
				 EGRESS_RATE_MBIT_MAX);
	*ret = (uint32_t)v;
	return 0;
}

int cli_network_rate_needs_network(struct error *err)
{
	return error_set(err, EINVAL,
			 "--network-rate: only with --network open or allow:DOMAIN[,DOMAIN...]");
}

int cli_body_finish(json_t *body, struct error *err)
{
	json_t *net = json_object_get(body, "network");
	if (net && !json_object_get(net, "mode")) /* a --network-rate alone */
		return cli_network_rate_needs_network(err);
	return 0;
}
