/*
 * secret.c - the "secrets" field: validation, placeholders, the proxy's
 * rules. See secret.h.
 */
#include "egress/secret.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "egress/peek.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define RESERVED_PREFIX "AGENTBOX_"

static bool value_is_valid(const char *s, size_t len)
{
	/* no NUL inside; long enough that confirming a guess of it is no shortcut */
	return strlen(s) == len && len >= SECRET_VALUE_MIN && inject_value_is_valid(s);
}

static int placeholder_new(char out[SECRET_PLACEHOLDER_LEN + 1])
{
	uint8_t rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(SECRET_PLACEHOLDER_PREFIX);
	memcpy(out, SECRET_PLACEHOLDER_PREFIX, n);
	for (size_t i = 0; i < sizeof(rnd); i++) {
		out[n + 2 * i] = hex[rnd[i] >> 4];
		out[n + 2 * i + 1] = hex[rnd[i] & 15];
	}
	out[SECRET_PLACEHOLDER_LEN] = '\0';
	return 0;
}

/*
 * The hosts of secret name, normalised, into a new array. p NULL: not
 * checked against a policy (the private form, re-read).
 */
static int parse_hosts(const char *name, const json_t *hosts, const struct egress_policy *p,
		       json_t **ret, struct error *err)
{
	if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
	    json_array_size(hosts) > SECRET_HOSTS_MAX)
		return error_set(err, EINVAL,
				 "secrets.%s.hosts: must be an array of 1 to %d domain names", name,
				 SECRET_HOSTS_MAX);
	_cleanup_json_ json_t *out = json_array();
	if (!out)
		return -ENOMEM;
	size_t i;
	json_t *h;
	json_array_foreach(hosts, i, h)
	{
		char norm[EGRESS_NAME_MAX + 1];
		const char *s = json_string_value(h);
		if (!s || egress_name_normalize(s, norm, sizeof(norm)) < 0 ||
		    !peek_is_host_name(norm))
			return error_set(err, EINVAL,
					 "secrets.%s.hosts[%zu]: must be a domain name (no "
					 "wildcard, no port, no IP literal)",
					 name, i);
		if (p && !egress_policy_allows_name(p, norm))
			return error_set(err, EINVAL,
					 "secrets.%s.hosts[%zu]: '%s' is not allowed by "
					 "network.allow: a secret goes only where the sandbox may",
					 name, i, norm);
		bool seen = false;
		for (size_t k = 0; k < json_array_size(out) && !seen; k++)
			seen = !strcmp(json_string_value(json_array_get(out, k)), norm);
		if (!seen && json_array_append_new(out, json_string(norm)) < 0)
			return -ENOMEM;
	}
	*ret = out;
	out = NULL;
	return 0;
}

static int check_members(const char *name, const json_t *s, bool private, struct error *err)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)s, key, v)
	{
		if (strcmp(key, "value") && strcmp(key, "hosts") &&
		    !(private && !strcmp(key, "placeholder")))
			return error_set(err, EINVAL,
					 "secrets.%s.%s: unknown field (a secret has "
					 "\"value\" and \"hosts\")",
					 name, key);
	}
	return 0;
}

static int check_name(const char *name, const json_t *env, struct error *err)
{
	/* the variables agentbox sets itself for a sandbox with secrets */
	static const char *const taken[] = {
	    "HTTP_PROXY",    "HTTPS_PROXY",    "http_proxy",	     "https_proxy",
	    "SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"};
	if (strlen(name) > SECRET_NAME_MAX || !env_name_is_valid(name, strlen(name)))
		return error_set(err, EINVAL,
				 "secrets: '%.64s' is not an environment variable name "
				 "([A-Za-z_][A-Za-z0-9_]*, at most %d characters)",
				 name, SECRET_NAME_MAX);
	if (!strncmp(name, RESERVED_PREFIX, strlen(RESERVED_PREFIX)))
		return error_set(err, EINVAL, "secrets.%s: names starting with %s are agentbox's",
				 name, RESERVED_PREFIX);
	for (size_t i = 0; i < sizeof(taken) / sizeof(*taken); i++)
		if (!strcmp(name, taken[i]))
			return error_set(err, EINVAL,
					 "secrets.%s: agentbox sets %s itself for a sandbox with "
					 "secrets",
					 name, name);
	if (env && json_object_get(env, name))
		return error_set(err, EINVAL,
				 "secrets.%s: env has %s too: a secret sets its variable itself",
				 name, name);
	return 0;
}

int secret_parse(const json_t *v, const struct egress_policy *p, const json_t *env, bool stored,
		 json_t **ret_public, json_t **ret_private, struct error *err)
{
	if (!v) {
		*ret_public = *ret_private = NULL;
		return 0;
	}
	if (!json_is_object(v) || json_object_size(v) > SECRET_MAX)
		return error_set(err, EINVAL, "secrets: must be an object of at most %d secrets",
				 SECRET_MAX);
	if (json_object_size(v) && (!p || p->mode != EGRESS_ALLOW))
		return error_set(err, EINVAL,
				 "secrets: need network mode allow (the proxy that puts them in "
				 "place runs only there)");
	_cleanup_json_ json_t *pub = json_object(), *priv = json_object();
	if (!pub || !priv)
		return -ENOMEM;
	const char *name;
	json_t *s;
	json_object_foreach((json_t *)v, name, s)
	{
		int r;
		if ((r = check_name(name, stored ? NULL : env, err)) < 0)
			return r;
		if (!json_is_object(s))
			return error_set(err, EINVAL,
					 "secrets.%s: must be an object {\"value\", \"hosts\"}",
					 name);
		if ((r = check_members(name, s, stored, err)) < 0)
			return r;
		json_t *value = json_object_get(s, "value");
		const char *given = json_string_value(json_object_get(s, "placeholder"));
		if (stored && (value || !given || !inject_placeholder_is_valid(given)))
			return error_set(
			    err, EINVAL,
			    "secrets.%s: a stored secret has a placeholder and no value", name);
		if (!stored &&
		    (!json_is_string(value) ||
		     !value_is_valid(json_string_value(value), json_string_length(value))))
			return error_set(err, EINVAL,
					 "secrets.%s.value: must be %d to %d bytes of printable "
					 "ASCII, space or tab",
					 name, SECRET_VALUE_MIN, SECRET_VALUE_MAX);
		_cleanup_json_ json_t *hosts = NULL;
		if ((r = parse_hosts(name, json_object_get(s, "hosts"), p, &hosts, err)) < 0)
			return r;
		char ph[SECRET_PLACEHOLDER_LEN + 1];
		if (stored && strcmp(json_string_value(json_object_get(env, name)) ?: "", given))
			return error_set(err, EINVAL,
					 "secrets.%s: env must hold its placeholder, as stored",
					 name);
		if (stored)
			memcpy(ph, given, sizeof(ph));
		else if (placeholder_new(ph) < 0)
			return error_set(err, EIO, "secrets: no randomness for a placeholder");
		json_t *a = json_pack("{s:O, s:s}", "hosts", hosts, "placeholder", ph);
		if (json_object_set_new(pub, name, a) < 0)
			return -ENOMEM;
		if (!stored &&
		    json_object_set_new(priv, name,
					json_pack("{s:O, s:s, s:O}", "hosts", hosts, "placeholder",
						  ph, "value", value)) < 0)
			return -ENOMEM;
	}
	*ret_public = pub;
	*ret_private = stored ? NULL : priv;
	pub = NULL;
	if (!stored)
		priv = NULL;
	return 0;
}

int secret_rules_from_json(const json_t *private, struct secret_rule **ret, size_t *ret_n,
			   struct error *err)
{
	if (!json_is_object(private) || json_object_size(private) > SECRET_MAX)
		return error_set(err, EINVAL, "secrets: must be an object of at most %d secrets",
				 SECRET_MAX);
	size_t max = json_object_size(private) * SECRET_HOSTS_MAX, n = 0;
	struct secret_rule *rules = calloc(max ? max : 1, sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	int r = 0;
	const char *name;
	json_t *s;
	json_object_foreach((json_t *)private, name, s)
	{
		if ((r = check_name(name, NULL, err)) < 0)
			break;
		json_t *value = json_object_get(s, "value"), *hosts = NULL, *h;
		const char *ph = json_string_value(json_object_get(s, "placeholder"));
		if (!json_is_object(s) || !json_is_string(value) ||
		    !value_is_valid(json_string_value(value), json_string_length(value)) || !ph ||
		    !inject_placeholder_is_valid(ph)) {
			r = error_set(err, EINVAL, "secrets.%s: no valid value and placeholder",
				      name);
			break;
		}
		if ((r = check_members(name, s, true, err)) < 0 ||
		    (r = parse_hosts(name, json_object_get(s, "hosts"), NULL, &hosts, err)) < 0)
			break;
		size_t i;
		json_array_foreach(hosts, i, h)
		{
			struct secret_rule *x = &rules[n++];
			snprintf(x->host, sizeof(x->host), "%s", json_string_value(h));
			memcpy(x->placeholder, ph, SECRET_PLACEHOLDER_LEN + 1);
			memcpy(x->value, json_string_value(value), json_string_length(value) + 1);
		}
		json_decref(hosts);
	}
	if (r < 0) {
		secret_rules_free(rules, max);
		return r;
	}
	*ret = rules;
	*ret_n = n;
	return 0;
}

void secret_rules_free(struct secret_rule *rules, size_t n)
{
	if (!rules)
		return;
	explicit_bzero(rules, n * sizeof(*rules));
	free(rules);
}
