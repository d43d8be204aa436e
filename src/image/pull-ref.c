/*
 * pull-ref.c - what a pull reads before it speaks to anyone (pull.h): a
 * reference, and a registry's WWW-Authenticate challenge. Pure functions
 * on strings.
 */
#include "image/pull.h"

#include "base/parse.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

/* "host[:port]", lowercase, a port 1..65535. */
static bool host_is_valid(const char *s, size_t len)
{
	const char *colon = memchr(s, ':', len);
	size_t host_len = colon ? (size_t)(colon - s) : len;
	if (host_len == 0 || s[0] == '-' || s[0] == '.' || s[host_len - 1] == '.')
		return false;
	for (size_t i = 0; i < host_len; i++)
		if (!is_host_char(s[i]))
			return false;
	if (!colon)
		return true;
	char port[8];
	size_t plen = len - host_len - 1;
	uint64_t v;
	if (plen == 0 || plen >= sizeof(port))
		return false;
	memcpy(port, colon + 1, plen);
	port[plen] = '\0';
	return parse_u64(port, &v) == 0 && v >= 1 && v <= 65535 && port[0] != '0';
}

/* Is the first component of a reference, len bytes, a registry (Docker's rule)? */
static bool is_registry(const char *s, size_t len)
{
	return memchr(s, '.', len) || memchr(s, ':', len) ||
	       (len == 9 && memcmp(s, "localhost", 9) == 0);
}

static bool is_docker_hub(const char *s, size_t len)
{
	return (len == 9 && memcmp(s, "docker.io", 9) == 0) ||
	       (len == 15 && memcmp(s, "index.docker.io", 15) == 0);
}

int image_pull_ref_parse(const char *ref, struct image_pull_ref *ret, struct error *err)
{
	struct image_pull_ref r = {0};
	size_t len = ref ? strlen(ref) : 0;
	if (len == 0 || len >= PULL_REF_MAX)
		return error_set(err, EINVAL, "a reference has 1 to %d bytes", PULL_REF_MAX - 1);
	char text[PULL_REF_MAX];
	memcpy(text, ref, len + 1);
	char *at = strchr(text, '@');
	if (at) {
		*at = '\0';
		if (!image_digest_is_valid(at + 1))
			return error_set(err, EINVAL,
					 "'%s': after '@' comes a digest, sha256:<64 lowercase hex "
					 "digits>",
					 ref);
		snprintf(r.digest, sizeof(r.digest), "%s", at + 1);
	}
	/* the tag: after the last ':' that comes after the last '/' */
	char *slash = strrchr(text, '/');
	char *colon = strrchr(slash ? slash : text, ':');
	if (colon) {
		*colon = '\0';
		if (strlen(colon + 1) > IMAGE_TAG_MAX)
			return error_set(err, EINVAL, "'%s': a tag has 1 to %d characters", ref,
					 IMAGE_TAG_MAX);
		snprintf(r.tag, sizeof(r.tag), "%s", colon + 1);
		if (!r.tag[0])
			return error_set(err, EINVAL, "'%s': an empty tag", ref);
	} else if (!r.digest[0]) {
		snprintf(r.tag, sizeof(r.tag), "latest");
	}
	/* the registry: a first component that names one */
	const char *repo = text, *first = strchr(text, '/');
	bool hub = true;
	if (first && is_registry(text, (size_t)(first - text))) {
		size_t hlen = (size_t)(first - text);
		if (!is_docker_hub(text, hlen)) {
			if (hlen >= sizeof(r.registry) || !host_is_valid(text, hlen))
				return error_set(err, EINVAL,
						 "'%s': '%.*s' is not a registry's host[:port] "
						 "(lowercase; IPv6 is not taken)",
						 ref, (int)hlen, text);
			memcpy(r.registry, text, hlen);
			hub = false;
		}
		repo = first + 1;
	}
	if (hub)
		snprintf(r.registry, sizeof(r.registry), DOCKER_HUB_REGISTRY);
	int n = snprintf(r.repo, sizeof(r.repo), "%s%s",
			 hub && !strchr(repo, '/') ? DOCKER_HUB_LIBRARY : "", repo);
	if (n < 0 || (size_t)n >= sizeof(r.repo))
		return error_set(err, EINVAL, "'%s': a repository has at most %d bytes", ref,
				 IMAGE_REF_MAX - 1);
	/* what the store calls it: Docker Hub's as it is usually written */
	char name[PULL_REF_MAX + 8];
	const char *short_repo = r.repo;
	if (hub && strncmp(short_repo, DOCKER_HUB_LIBRARY, strlen(DOCKER_HUB_LIBRARY)) == 0 &&
	    !strchr(short_repo + strlen(DOCKER_HUB_LIBRARY), '/'))
		short_repo += strlen(DOCKER_HUB_LIBRARY);
	snprintf(name, sizeof(name), "%s%s%s:%s", hub ? "" : r.registry, hub ? "" : "/", short_repo,
		 r.tag[0] ? r.tag : "latest");
	/* the name's rules are the store's (and they check the repository's and the tag's) */
	char norm[IMAGE_REF_MAX];
	struct error nerr = {0};
	if (image_ref_normalize(name, norm, sizeof(norm), &nerr) < 0) {
		/* its message names the name it was given ("'...': why"): ref's instead */
		const char *why = strstr(nerr.msg, "': ");
		return error_set(err, EINVAL, "'%s': %s", ref, why ? why + 3 : nerr.msg);
	}
	if (r.tag[0])
		snprintf(r.name, sizeof(r.name), "%s", norm);
	*ret = r;
	return 0;
}

/* ---- WWW-Authenticate ------------------------------------------------------- */

static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* A token or a quoted string at *pp into out (size bytes); *pp moves past it. */
static int param_value(const char **pp, char *out, size_t size, const char *name, struct error *err)
{
	const char *p = *pp;
	size_t n = 0;
	if (*p == '"') {
		for (p++; *p != '"'; p++) {
			if (*p == '\\' && p[1])
				p++;
			if (!*p || (unsigned char)*p < 0x20 || *p == 0x7f)
				return error_set(err, EPROTO,
						 "WWW-Authenticate: %s's quoted value does not end",
						 name);
			if (n + 1 >= size)
				return error_set(err, EPROTO,
						 "WWW-Authenticate: %s is longer than %zu bytes",
						 name, size - 1);
			out[n++] = *p;
		}
		p++;
	} else {
		/* a bare value (a token; some registries send a URL bare): to ',' or space */
		for (; (unsigned char)*p > 0x20 && *p != 0x7f && *p != ',' && *p != '"'; p++) {
			if (n + 1 >= size)
				return error_set(err, EPROTO,
						 "WWW-Authenticate: %s is longer than %zu bytes",
						 name, size - 1);
			out[n++] = *p;
		}
		if (n == 0)
			return error_set(err, EPROTO, "WWW-Authenticate: %s has no value", name);
	}
	out[n] = '\0';
	*pp = p;
	return 0;
}

int image_auth_challenge_parse(const char *value, struct image_auth_challenge *ret,
			       struct error *err)
{
	struct image_auth_challenge c = {0};
	const char *p = skip_ows(value ? value : "");
	size_t slen = 0;
	while (is_tchar(p[slen]))
		slen++;
	if (slen == 5 && strncasecmp(p, "Basic", 5) == 0)
		c.scheme = IMAGE_AUTH_BASIC;
	else if (slen == 6 && strncasecmp(p, "Bearer", 6) == 0)
		c.scheme = IMAGE_AUTH_BEARER;
	else
		return error_set(err, EPROTO,
				 "the registry asks for authentication by '%.*s', not Basic or "
				 "Bearer",
				 (int)(slen > 32 ? 32 : slen), p);
	p = skip_ows(p + slen);
	while (*p) {
		size_t nlen = 0;
		while (is_tchar(p[nlen]))
			nlen++;
		char pname[32];
		if (nlen == 0 || nlen >= sizeof(pname))
			return error_set(err, EPROTO, "WWW-Authenticate: malformed parameters");
		memcpy(pname, p, nlen);
		pname[nlen] = '\0';
		p = skip_ows(p + nlen);
		if (*p != '=')
			return error_set(err, EPROTO, "WWW-Authenticate: %s has no '='", pname);
		p = skip_ows(p + 1);
		char scratch[PULL_REALM_MAX];
		char *out = scratch;
		size_t size = sizeof(scratch);
		if (strcasecmp(pname, "realm") == 0)
			out = c.realm, size = sizeof(c.realm);
		else if (strcasecmp(pname, "service") == 0)
			out = c.service, size = sizeof(c.service);
		else if (strcasecmp(pname, "scope") == 0)
			out = c.scope, size = sizeof(c.scope);
		int r = param_value(&p, out, size, pname, err);
		if (r < 0)
			return r;
		p = skip_ows(p);
		if (*p == ',')
			p = skip_ows(p + 1);
		else if (*p)
			return error_set(err, EPROTO, "WWW-Authenticate: malformed after %s",
					 pname);
	}
	if (c.scheme == IMAGE_AUTH_BEARER && !c.realm[0])
		return error_set(err, EPROTO, "WWW-Authenticate: Bearer without a realm");
	*ret = c;
	return 0;
}
