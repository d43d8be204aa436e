/*
 * test-egress-secret.c - the "secrets" field: what it takes, each refusal
 * with the field it names, placeholders (fresh, well-formed, the same in
 * both forms), the public form without values, the stored form read back,
 * and the proxy's rules made from the private form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "egress/secret.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v)
		fail_msg("test JSON %s: %s", text, jerr.text);
	return v;
}

static struct egress_policy allow(const char *entries)
{
	struct egress_policy p;
	struct error err = {0};
	char text[512];
	snprintf(text, sizeof(text), "{\"mode\": \"allow\", \"allow\": %s}", entries);
	json_t *j = load(text);
	if (egress_policy_from_json(j, &p, &err) < 0)
		fail_msg("policy %s: %s", text, err.msg);
	json_decref(j);
	return p;
}

/* secrets_text refused for policy p and env, with a message starting with field. */
static void refused(const struct egress_policy *p, const char *env_text, const char *secrets_text,
		    const char *field)
{
	json_t *v = load(secrets_text), *env = env_text ? load(env_text) : NULL;
	json_t *pub = (json_t *)1, *priv = (json_t *)1;
	struct error err = {0};
	int r = secret_parse(v, p, env, false, &pub, &priv, &err);
	if (r != -EINVAL)
		fail_msg("%s: accepted (%d)", secrets_text, r);
	if (strncmp(err.msg, field, strlen(field)) != 0 || err.msg[strlen(field)] != ':')
		fail_msg("%s: message '%s' does not start with '%s:'", secrets_text, err.msg,
			 field);
	assert_ptr_equal(pub, (json_t *)1); /* written only on success */
	assert_ptr_equal(priv, (json_t *)1);
	assert_null(strstr(err.msg, "s3cr3t"));
	json_decref(v);
	json_decref(env);
}

static void test_refusals(void **state)
{
	(void)state;
	struct egress_policy p = allow("[\"api.example.com\", \"*.example.org:8443\"]");
	struct egress_policy open = {.mode = EGRESS_OPEN};
	const char *ok = "{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"]}}";
	refused(&open, NULL, ok, "secrets");
	refused(NULL, NULL, ok, "secrets");
	refused(&p, NULL, "[]", "secrets");
	refused(&p, NULL, "{\"1K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"]}}",
		"secrets");
	refused(&p, NULL,
		"{\"AGENTBOX_K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.AGENTBOX_K");
	refused(&p, "{\"K\": \"x\"}", ok, "secrets.K");
	refused(&p, NULL, "{\"K\": \"s3cr3t v\"}", "secrets.K");
	refused(&p, NULL,
		"{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"], "
		"\"placeholder\": \"agentbox-secret-00000000000000000000000000000000\"}}",
		"secrets.K.placeholder");
	refused(&p, NULL, "{\"K\": {\"value\": \"\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.K.value");
	refused(&p, NULL, "{\"K\": {\"value\": \"short\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.K.value");
	refused(&p, NULL,
		"{\"SSL_CERT_FILE\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.SSL_CERT_FILE");
	refused(&p, NULL,
		"{\"HTTPS_PROXY\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.HTTPS_PROXY");
	char longname[512];
	snprintf(longname, sizeof(longname),
		 "{\"%0*d\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com\"]}}",
		 SECRET_NAME_MAX + 1, 0);
	longname[2] = 'K'; /* a name, not a number */
	refused(&p, NULL, longname, "secrets");
	struct egress_policy digits = allow("[\"svc.1x\"]");
	refused(&digits, NULL, "{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"svc.1x\"]}}",
		"secrets.K.hosts[0]");
	egress_policy_release(&digits);
	refused(&p, NULL, "{\"K\": {\"value\": \"a\\r\\nX: y\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.K.value");
	refused(&p, NULL, "{\"K\": {\"value\": \"caf\\u00e9\", \"hosts\": [\"api.example.com\"]}}",
		"secrets.K.value");
	refused(&p, NULL, "{\"K\": {\"value\": 5, \"hosts\": [\"api.example.com\"]}}",
		"secrets.K.value");
	refused(&p, NULL, "{\"K\": {\"value\": \"s3cr3t v\"}}", "secrets.K.hosts");
	refused(&p, NULL, "{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": []}}", "secrets.K.hosts");
	refused(&p, NULL, "{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"other.com\"]}}",
		"secrets.K.hosts[0]");
	refused(&p, NULL, "{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"*.example.org\"]}}",
		"secrets.K.hosts[0]");
	refused(&p, NULL,
		"{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"api.example.com:443\"]}}",
		"secrets.K.hosts[0]");
	refused(&p, NULL, "{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"10.0.0.1\"]}}",
		"secrets.K.hosts[0]");

	/* the limits, one past them */
	char big[SECRET_VALUE_MAX + 200];
	int n =
	    snprintf(big, sizeof(big), "{\"K\": {\"hosts\": [\"api.example.com\"], \"value\": \"");
	memset(big + n, 'a', SECRET_VALUE_MAX + 1);
	snprintf(big + n + SECRET_VALUE_MAX + 1, 8, "\"}}");
	refused(&p, NULL, big, "secrets.K.value");
	char many[4096] = "{";
	for (int i = 0; i <= SECRET_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
			 "%s\"K%d\": {\"value\": \"vvvvvvvv\", \"hosts\": [\"api.example.com\"]}",
			 i ? "," : "", i);
	snprintf(many + strlen(many), sizeof(many) - strlen(many), "}");
	refused(&p, NULL, many, "secrets");
	char hosts[4096] = "{\"K\": {\"value\": \"vvvvvvvv\", \"hosts\": [";
	for (int i = 0; i <= SECRET_HOSTS_MAX; i++)
		snprintf(hosts + strlen(hosts), sizeof(hosts) - strlen(hosts),
			 "%s\"api.example.com\"", i ? "," : "");
	snprintf(hosts + strlen(hosts), sizeof(hosts) - strlen(hosts), "]}}");
	refused(&p, NULL, hosts, "secrets.K.hosts");
	egress_policy_release(&p);
}

static void test_forms_and_rules(void **state)
{
	(void)state;
	struct egress_policy p = allow("[\"api.example.com\", \"*.example.org:8443\"]");
	json_t *v = load("{\"K\": {\"value\": \"s3cr3t v\", \"hosts\": [\"API.example.com.\", "
			 "\"b.example.org\", \"api.example.com\"]}, \"L\": {\"value\": "
			 "\"two two two\", \"hosts\": [\"api.example.com\"]}}");
	json_t *pub, *priv, *pub2, *priv2;
	struct error err = {0};
	assert_int_equal(secret_parse(v, &p, NULL, false, &pub, &priv, &err), 0);
	assert_int_equal(secret_parse(v, &p, NULL, false, &pub2, &priv2, &err), 0);
	const char *ph =
	    json_string_value(json_object_get(json_object_get(pub, "K"), "placeholder"));
	const char *ph2 =
	    json_string_value(json_object_get(json_object_get(pub2, "K"), "placeholder"));
	assert_int_equal(strlen(ph), SECRET_PLACEHOLDER_LEN);
	assert_int_equal(strncmp(ph, SECRET_PLACEHOLDER_PREFIX, strlen(SECRET_PLACEHOLDER_PREFIX)),
			 0);
	assert_string_not_equal(ph, ph2); /* fresh each time */
	char *text = json_dumps(pub, JSON_COMPACT | JSON_SORT_KEYS);
	assert_null(strstr(text, "s3cr3t"));
	/* normalised, a name given twice kept once */
	assert_non_null(strstr(text, "\"hosts\":[\"api.example.com\",\"b.example.org\"]"));
	free(text);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(priv, "K"), "placeholder")), ph);

	/* the stored form: read back with its placeholders, env holding them */
	json_t *env =
	    json_pack("{s:s, s:s}", "K", ph, "L",
		      json_string_value(json_object_get(json_object_get(pub, "L"), "placeholder")));
	json_t *back, *none = (json_t *)1;
	assert_int_equal(secret_parse(pub, &p, env, true, &back, &none, &err), 0);
	assert_null(none);
	assert_true(json_equal(back, pub));
	json_decref(back);
	json_object_set_new(env, "K", json_string("changed"));
	assert_int_equal(secret_parse(pub, &p, env, true, &back, &none, &err), -EINVAL);
	assert_int_equal(secret_parse(priv, &p, env, true, &back, &none, &err), -EINVAL);
	json_decref(env);

	/* the proxy's rules: one per host */
	struct secret_rule *rules;
	size_t nrules;
	assert_int_equal(secret_rules_from_json(priv, &rules, &nrules, &err), 0);
	assert_int_equal(nrules, 3);
	int k = 0;
	for (size_t i = 0; i < nrules; i++)
		if (!strcmp(rules[i].value, "s3cr3t v")) {
			k++;
			assert_string_equal(rules[i].placeholder, ph);
			assert_true(!strcmp(rules[i].host, "api.example.com") ||
				    !strcmp(rules[i].host, "b.example.org"));
		}
	assert_int_equal(k, 2);
	secret_rules_free(rules, nrules);
	/* the public form has no values: no rules come of it */
	assert_int_equal(secret_rules_from_json(pub, &rules, &nrules, &err), -EINVAL);

	/* absent: nothing, and no error */
	assert_int_equal(secret_parse(NULL, &p, NULL, false, &back, &none, &err), 0);
	assert_null(back);
	assert_null(none);
	json_decref(pub);
	json_decref(priv);
	json_decref(pub2);
	json_decref(priv2);
	json_decref(v);
	egress_policy_release(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_forms_and_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
