/*
 * registries.c - agentboxd --registry-config (pull.h): read once at
 * start, checked whole, kept read-only. Errors name the file, the
 * registry and the member; never a username's or a password's value.
 */
#include "image/pull-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A regular file's whole content (at most max bytes), malloc'd and NUL-terminated. */
static int read_whole(const char *path, size_t max, char **ret, size_t *ret_len, const char *what,
		      struct error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return error_set_errno(err, errno, "%s %s", what, path);
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "%s %s is not a regular file", what, path);
	if ((uint64_t)st.st_size > max)
		return error_set(err, E2BIG, "%s %s is larger than %zu bytes", what, path, max);
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return error_set(err, ENOMEM, "out of memory");
	ssize_t n = read_all(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		return error_set_errno(err, (int)-n, "%s %s", what, path);
	}
	buf[n] = '\0';
	*ret = buf;
	*ret_len = (size_t)n;
	return 0;
}

/* A registry's cacert: PEM certificates, at least one. */
static int load_cacert(struct image_registry *reg, const char *path, struct error *err)
{
	if (path[0] != '/')
		return error_set(err, EINVAL, "registry %s: cacert is an absolute path", reg->host);
	_cleanup_free_ char *pem = NULL;
	size_t len = 0;
	int r = read_whole(path, PULL_CACERT_FILE_MAX, &pem, &len, "cacert", err);
	if (r < 0)
		return error_prefix(err, "registry %s: ", reg->host);
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	reg->cas = sk_X509_new_null();
	if (!bio || !reg->cas) {
		BIO_free(bio);
		return error_set(err, ENOMEM, "out of memory");
	}
	X509 *x;
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (sk_X509_num(reg->cas) == PULL_CACERT_CERTS_MAX || !sk_X509_push(reg->cas, x)) {
			X509_free(x);
			BIO_free(bio);
			return error_set(err, E2BIG,
					 "registry %s: cacert %s has more than %d "
					 "certificates",
					 reg->host, path, PULL_CACERT_CERTS_MAX);
		}
	}
	BIO_free(bio);
	if (sk_X509_num(reg->cas) == 0)
		return error_set(err, EINVAL, "registry %s: cacert %s holds no PEM certificate",
				 reg->host, path);
	return 0;
}

static int string_member(struct image_registry *reg, json_t *v, const char *key, char **ret,
			 struct error *err)
{
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > PULL_CREDENTIAL_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return error_set(err, EINVAL, "registry %s: %s is a string of 1 to %d bytes",
				 reg->host, key, PULL_CREDENTIAL_MAX);
	if (!(*ret = strdup(json_string_value(v))))
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

static int load_registry(struct image_registry *reg, const char *host, json_t *o, struct error *err)
{
	struct image_pull_ref probe;
	char ref[PULL_HOST_MAX + 8];
	snprintf(reg->host, sizeof(reg->host), "%s", host);
	snprintf(ref, sizeof(ref), "%s/x", host);
	/* the key is what a reference's first component names (pull-ref.c's rules) */
	if (strlen(host) >= PULL_HOST_MAX || image_pull_ref_parse(ref, &probe, NULL) < 0 ||
	    strcmp(probe.registry, host) != 0)
		return error_set(err, EINVAL,
				 "'%.64s' is not a registry's host[:port] (lowercase, with a '.', "
				 "a port or \"localhost\")",
				 host);
	if (!json_is_object(o))
		return error_set(err, EINVAL, "registry %s: an object", host);
	const char *key;
	json_t *v;
	int r = 0;
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "username") == 0)
			r = string_member(reg, v, key, &reg->username, err);
		else if (strcmp(key, "password") == 0)
			r = string_member(reg, v, key, &reg->password, err);
		else if (strcmp(key, "cacert") == 0)
			r = json_is_string(v)
				? load_cacert(reg, json_string_value(v), err)
				: error_set(err, EINVAL, "registry %s: cacert is a path", host);
		else if (strcmp(key, "insecure_http") == 0 && json_is_boolean(v))
			reg->insecure_http = json_is_true(v);
		else if (strcmp(key, "insecure_http") == 0)
			r = error_set(err, EINVAL, "registry %s: insecure_http is true or false",
				      host);
		else
			r = error_set(err, EINVAL,
				      "registry %s: unknown member '%.64s' (username, password, "
				      "cacert, insecure_http)",
				      host, key);
		if (r < 0)
			return r;
	}
	if (!reg->username != !reg->password)
		return error_set(err, EINVAL, "registry %s: username and password go together",
				 host);
	if (reg->username && strchr(reg->username, ':'))
		return error_set(err, EINVAL, "registry %s: a username has no ':' (Basic)", host);
	return 0;
}

static void registry_release(struct image_registry *reg)
{
	if (reg->username)
		explicit_bzero(reg->username, strlen(reg->username));
	if (reg->password)
		explicit_bzero(reg->password, strlen(reg->password));
	free(reg->username);
	free(reg->password);
	if (reg->cas)
		sk_X509_pop_free(reg->cas, X509_free);
	memset(reg, 0, sizeof(*reg));
}

int image_registries_load(const char *path, struct image_registries **ret, struct error *err)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return error_set(err, ENOMEM, "libcurl cannot start");
	struct image_registries *regs = calloc(1, sizeof(*regs));
	if (!regs)
		return error_set(err, ENOMEM, "out of memory");
	if (!path) {
		*ret = regs;
		return 0;
	}
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_whole(path, PULL_CONFIG_FILE_MAX, &text, &len, "--registry-config", err);
	json_error_t jerr;
	_cleanup_json_ json_t *root = NULL;
	if (r == 0 && !(root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)))
		/* jansson's text may quote the file (a password): only where */
		r = error_set(err, EINVAL,
			      "--registry-config %s: not valid JSON (line %d, "
			      "column %d)",
			      path, jerr.line, jerr.column);
	json_t *table = root ? json_object_get(root, "registries") : NULL;
	if (r == 0 &&
	    (!json_is_object(root) || json_object_size(root) != 1 || !json_is_object(table)))
		r = error_set(err, EINVAL,
			      "--registry-config %s: {\"registries\": {\"HOST[:PORT]\": {...}}} "
			      "and nothing else",
			      path);
	if (r == 0 && json_object_size(table) > PULL_REGISTRIES_MAX)
		r = error_set(err, E2BIG, "--registry-config %s: more than %d registries", path,
			      PULL_REGISTRIES_MAX);
	const char *host;
	json_t *v;
	if (r == 0)
		json_object_foreach(table, host, v)
		{
			if ((r = load_registry(&regs->v[regs->n++], host, v, err)) < 0) {
				error_prefix(err, "--registry-config %s: ", path);
				break;
			}
		}
	if (text)
		explicit_bzero(text, len);
	if (r < 0) {
		image_registries_free(regs);
		return r;
	}
	*ret = regs;
	return 0;
}

void image_registries_free(struct image_registries *regs)
{
	if (!regs)
		return;
	for (size_t i = 0; i < regs->n; i++)
		registry_release(&regs->v[i]);
	free(regs);
}

size_t image_registries_count(const struct image_registries *regs)
{
	return regs ? regs->n : 0;
}

const struct image_registry *registries_find(const struct image_registries *regs, const char *host)
{
	for (size_t i = 0; regs && i < regs->n; i++)
		if (strcmp(regs->v[i].host, host) == 0)
			return &regs->v[i];
	return NULL;
}
