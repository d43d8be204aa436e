/*
 * pull-internal.h - a pull's pieces (pull.h): the registries' table
 * (registries.c), HTTP with libcurl (pull-http.c), and the pull itself
 * (pull.c).
 */
#ifndef AGENTBOX_IMAGE_PULL_INTERNAL_H
#define AGENTBOX_IMAGE_PULL_INTERNAL_H

#include "image/import-internal.h"
#include "image/pull.h"

#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>

/* One registry of --registry-config. Owned by its table. */
struct image_registry {
	char host[PULL_HOST_MAX];
	char *username; /* both or neither; zeroed when freed */
	char *password;
	STACK_OF(X509) * cas; /* its cacert's certificates; NULL: none */
	bool insecure_http;
};

struct image_registries {
	size_t n;
	struct image_registry v[PULL_REGISTRIES_MAX];
};

/* The configured registry of host ("host[:port]"), or NULL. regs may be NULL. */
const struct image_registry *registries_find(const struct image_registries *regs, const char *host);

/* ---- HTTP (pull-http.c) --------------------------------------------------- */

/* Where a body goes: memory (at most max bytes) or a file (hashed on the way). */
struct pull_sink {
	int fd;	    /* -1: memory */
	char *buf;  /* memory: malloc'd, NUL-terminated; the caller frees it */
	size_t len; /* bytes in buf */
	size_t cap; /* bytes buf holds */
	uint64_t got;
	uint64_t max;	 /* more is refused (-EBADMSG) */
	struct sha256 h; /* of a file's bytes, when hash */
	bool hash;
	bool over;	 /* the body went past max */
	int write_error; /* a file's write failed: its errno */
};

/* What an answer said, besides its body. */
struct pull_answer {
	long status;
	char content_type[IMAGE_MEDIA_TYPE_MAX];
	char digest[IMAGE_DIGEST_SIZE + 8]; /* Docker-Content-Digest, as sent */
};

/* One pull's connection to one registry. */
struct pull_http {
	void *curl;			  /* a CURL * */
	const struct image_registry *reg; /* NULL: not configured */
	char host[PULL_HOST_MAX];
	char base[PULL_HOST_MAX + 16];	/* "https://host[:port]" */
	char scope[IMAGE_REF_MAX + 32]; /* "repository:<repo>:pull" */
	char *token;			/* a Bearer's, once got */
	bool basic;			/* send the configured credentials (Basic) */
};

/* 0, or -ENOMEM. pull_http_release() even on failure. */
int pull_http_init(struct pull_http *h, const char *host, const struct image_registry *reg,
		   const char *repo, struct error *err);
void pull_http_release(struct pull_http *h);

/*
 * GET base + path with Accept accept (NULL: none), authenticating as the
 * registry asks (pull.h); blob: a blob's timeouts. A 2xx body goes into
 * sink; ans gets the final answer's status and headers. 0 on 2xx, else
 * the error of pull.h (-ENOENT for 404) with err saying what.
 */
int pull_http_get(struct pull_http *h, const char *path, const char *accept, bool blob,
		  struct pull_sink *sink, struct pull_answer *ans, struct error *err);

#endif
