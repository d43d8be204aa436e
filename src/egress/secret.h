/*
 * secret.h - the "secrets" field of a task or a sandbox: values a sandbox
 * may use but never read.
 *
 *	"secrets": {"OPENAI_API_KEY": {"value": "sk-...", "hosts": ["api.openai.com"]}}
 *
 * Each secret becomes an environment variable whose value inside is a
 * placeholder, SECRET_PLACEHOLDER_PREFIX and 32 random lowercase hex
 * digits, never the value. The sandbox's proxy (network/intercept.h)
 * puts the value in place of the placeholder in the headers of requests
 * to the secret's hosts, and only there. So secrets need the network
 * mode allow, and each host must be one that mode allows.
 *
 * Two forms come out of a request:
 *   public:  {"NAME": {"hosts": [...], "placeholder": "agentbox-secret-..."}}
 *            what the canonical spec holds, the store keeps and GET shows;
 *   private: the same with "value" too: what the launcher hands to the
 *            proxy, and only to it (the daemon keeps it in a 0600 file of
 *            its own, never in the store: core/layout.h).
 *
 * Rules, each refused with a message that names the field
 * ("secrets.API_KEY.hosts[1]: ..."): at most SECRET_MAX secrets; a name
 * is an environment variable name (base/parse.h) of at most
 * SECRET_NAME_MAX characters, not one of agentbox's own (AGENTBOX_..., and
 * the proxy and CA variables it sets), and not also in "env"; "value" is
 * SECRET_VALUE_MIN..SECRET_VALUE_MAX bytes of printable ASCII, space or
 * tab (it goes in an HTTP header: no CR, LF or NUL); "hosts" is
 * 1..SECRET_HOSTS_MAX domain names (no wildcard, no port, no IP literal:
 * egress/policy.h's names, normalised, that are host names as
 * egress/peek.h reads them), each allowed by the network policy on some
 * port, a name given twice kept once; no other member ("unknown field").
 *
 * Not pure like the rest of egress: placeholders come from getrandom().
 */
#ifndef AGENTBOX_EGRESS_SECRET_H
#define AGENTBOX_EGRESS_SECRET_H

#include "base/error.h"
#include "egress/inject.h"
#include "egress/policy.h"

#include <jansson.h>
#include <stddef.h>

#define SECRET_MAX		  16 /* secrets of one task or sandbox */
#define SECRET_VALUE_MIN	  8  /* bytes of one value */
#define SECRET_VALUE_MAX	  INJECT_VALUE_MAX
#define SECRET_NAME_MAX		  128 /* characters of a secret's name */
#define SECRET_HOSTS_MAX	  16  /* hosts of one secret */
#define SECRET_PLACEHOLDER_PREFIX INJECT_PLACEHOLDER_PREFIX
#define SECRET_PLACEHOLDER_LEN	  INJECT_PLACEHOLDER_LEN

/*
 * Where a sandbox with secrets finds the daemon's CA (network/intercept.h)
 * that signs the certificates its proxy shows for the secrets' hosts: its
 * launcher mounts the CA's public files there, read-only, and the API sets
 * SECRET_CA_ENV to them (unless env sets them itself): the host's trusted
 * CAs and agentbox's in one file, and agentbox's alone for Node.js, which
 * adds it to its own.
 */
#define SECRET_CA_DIR	 "/run/agentbox/ca"
#define SECRET_CA_BUNDLE SECRET_CA_DIR "/bundle.pem"
#define SECRET_CA_CERT	 SECRET_CA_DIR "/ca.pem"
#define SECRET_CA_ENV                                                                              \
	{                                                                                          \
		{"SSL_CERT_FILE", SECRET_CA_BUNDLE}, {"CURL_CA_BUNDLE", SECRET_CA_BUNDLE},         \
		    {"REQUESTS_CA_BUNDLE", SECRET_CA_BUNDLE},                                      \
		{                                                                                  \
			"NODE_EXTRA_CA_CERTS", SECRET_CA_CERT                                      \
		}                                                                                  \
	}

/*
 * Validate v, the "secrets" member of a request (NULL when absent), for a
 * request whose network policy is p and whose env object is env (NULL:
 * none), as above. 0 with *ret_public and *ret_private new references
 * (both NULL when v is NULL); -EINVAL with err naming the field; -ENOMEM;
 * -EIO when no randomness is to be had.
 *
 * The caller puts each NAME=placeholder in the request's env.
 *
 * stored: v is a public form read back (a stored spec): each secret has
 * "hosts" and a well-formed "placeholder" and no "value", env holds
 * NAME=placeholder, the placeholder is kept, and *ret_private is NULL.
 */
int secret_parse(const json_t *v, const struct egress_policy *p, const json_t *env, bool stored,
		 json_t **ret_public, json_t **ret_private, struct error *err);

/* One placeholder to put in place of one value, on one host. */
struct secret_rule {
	char host[EGRESS_NAME_MAX + 1];
	char placeholder[SECRET_PLACEHOLDER_LEN + 1];
	char value[SECRET_VALUE_MAX + 1];
};

/*
 * The rules of a private form (a secret with two hosts makes two), checked
 * again as above but for the policy; *ret (malloc'd, the caller frees it
 * after wiping it with secret_rules_free()) and *ret_n. 0, -EINVAL with
 * err, -ENOMEM.
 */
int secret_rules_from_json(const json_t *private, struct secret_rule **ret, size_t *ret_n,
			   struct error *err);

/* Wipe and free n rules. rules may be NULL. */
void secret_rules_free(struct secret_rule *rules, size_t n);

#endif
