/*
 * pull.h - `agentbox image pull`: an image fetched from a registry that
 * speaks the OCI distribution API (Docker's registry v2), then imported
 * into the store (store.h) like any OCI image layout.
 *
 * A pull, in order:
 *   1. the reference is parsed (image_pull_ref_parse()): which registry,
 *      which repository, which tag or digest;
 *   2. GET /v2/<repo>/manifests/<tag|digest>, accepting OCI's and
 *      Docker v2's manifests, indexes and manifest lists; an index gives
 *      its linux/amd64 manifest (image_index_choose()), fetched by digest;
 *   3. the config and layers (gzip or zstd, OCI's or Docker's media types)
 *      are fetched into a temporary OCI image layout under images/tmp/;
 *      a blob the store has already is linked, not fetched;
 *   4. image_import() of that layout, which verifies every blob again and
 *      unpacks the layers; the layout is removed however the pull ends.
 *
 * Verified while fetched: a manifest asked for by digest is that digest
 * (and one asked for by tag, what Docker-Content-Digest says, if it
 * says); every blob is exactly its descriptor's size (a body past it is
 * cut off at once) and digest. Limits: PULL_* below, IMAGE_MANIFEST_MAX
 * and IMAGE_BLOBS_MAX (of the image's descriptors, added before a blob
 * is fetched).
 *
 * Authentication (the registry's 401 and its WWW-Authenticate):
 *   Basic      the registry's configured username and password;
 *   Bearer     a token from the realm it names (service, scope), asked with
 *              the configured username and password if any, anonymously
 *              otherwise; its "token" (or "access_token") is then sent
 *              as "Authorization: Bearer" to that registry alone (never
 *              to a host a redirect leads to).
 * Transport: https, always verified (the system's CAs and the registry's
 * configured cacert); plain http only for a registry configured
 * insecure_http. Redirects (blobs to storage) are followed, at most
 * PULL_REDIRECTS_MAX, to https only (http too for an insecure_http
 * registry). The token realm is reached with the same rules.
 *
 * Errors (0 or -errno, err a person's line; credentials never in it):
 *   -EINVAL       a reference that is not one (image_pull_ref_parse()), or
 *                 an image the import refuses (store.h: -EINVAL, -E2BIG,
 *                 -EFBIG, -ENOEXEC for another platform)
 *   -ENOENT       the registry has no such repository, tag or digest
 *   -EACCES       the registry (or its token service) refused us: no
 *                 credentials configured, or wrong ones, or no access
 *   -EBADMSG      the registry sent what its descriptors do not say (a
 *                 digest or size that does not match, a body too large)
 *   -EPROTO       an answer that is not the protocol (a status, a media
 *                 type, a challenge we cannot take), or TLS refused
 *   -ECONNREFUSED, -EHOSTUNREACH, -ETIMEDOUT, -ECONNRESET: the network
 *
 * Thread-safe: each pull has its own libcurl handle; the registries'
 * table is read only.
 */
#ifndef AGENTBOX_IMAGE_PULL_H
#define AGENTBOX_IMAGE_PULL_H

#include "base/error.h"
#include "image/oci.h"
#include "image/store.h"

#include <stdbool.h>
#include <stddef.h>

/* Named limits and timeouts of a pull. */
#define PULL_REF_MAX	       512	   /* bytes of a reference asked for */
#define PULL_HOST_MAX	       256	   /* bytes of "host[:port]", NUL included */
#define PULL_TOKEN_MAX	       (64u << 10) /* bytes of a token service's answer */
#define PULL_ERROR_BODY_MAX    4096	   /* bytes of an error answer kept (its message) */
#define PULL_HEADER_MAX	       4096	   /* bytes of a header's value we keep */
#define PULL_REDIRECTS_MAX     5	   /* redirects followed by one request */
#define PULL_INDEX_DEPTH_MAX   2	   /* indexes an index may lead through */
#define PULL_CONNECT_TIMEOUT_S 30	   /* to connect (and TLS) */
#define PULL_DOC_TIMEOUT_S     120	   /* a whole manifest or token request */
#define PULL_BLOB_TIMEOUT_S    (6 * 3600)  /* a whole blob */
#define PULL_STALL_TIMEOUT_S   60	   /* no byte for this long: given up */
#define DOCKER_HUB_REGISTRY    "registry-1.docker.io" /* "debian:12" is there */
#define DOCKER_HUB_LIBRARY     "library/"	      /* its official images' namespace */

/* ---- references ----------------------------------------------------------- */

/*
 * A reference as a pull reads it:
 *   [HOST[:PORT]/]REPO[:TAG][@sha256:HEX]
 * The first component is a registry when it has a '.' or a ':' or is
 * "localhost" (Docker's rule); otherwise the registry is Docker Hub's,
 * and a one-component REPO there is in "library/". "docker.io/..." and
 * "index.docker.io/..." are Docker Hub too. Without tag or digest, the
 * tag is "latest". Hosts and repositories are lowercase; IPv6 addresses
 * are not taken.
 */
struct image_pull_ref {
	char registry[PULL_HOST_MAX];	/* "127.0.0.1:5000", DOCKER_HUB_REGISTRY */
	char repo[IMAGE_REF_MAX];	/* "library/debian", "team/app" */
	char tag[IMAGE_TAG_MAX + 1];	/* "12"; "" when only a digest is asked */
	char digest[IMAGE_DIGEST_SIZE]; /* "sha256:..."; "" when by tag */
	char name[IMAGE_REF_MAX];	/* the store's name: "debian:12",
					 * "127.0.0.1:5000/app:1"; "" for a digest alone */
};

/* Parse ref into *ret. 0, or -EINVAL with err saying why. */
int image_pull_ref_parse(const char *ref, struct image_pull_ref *ret, struct error *err);

/* ---- WWW-Authenticate ------------------------------------------------------ */

enum image_auth_scheme { IMAGE_AUTH_BASIC = 1, IMAGE_AUTH_BEARER };

#define PULL_REALM_MAX	 1024
#define PULL_SERVICE_MAX 256
#define PULL_SCOPE_MAX	 512

/* A registry's challenge: its scheme, and a Bearer's parameters ("" when absent). */
struct image_auth_challenge {
	enum image_auth_scheme scheme;
	char realm[PULL_REALM_MAX];
	char service[PULL_SERVICE_MAX];
	char scope[PULL_SCOPE_MAX];
};

/*
 * Parse one WWW-Authenticate value (RFC 7235: a scheme, then
 * name=token or name="quoted string" pairs, comma separated; unknown
 * parameters are skipped). 0; -EPROTO for a scheme other than Basic and
 * Bearer, a Bearer with no realm, malformed text or a value past its
 * size above (err says which).
 */
int image_auth_challenge_parse(const char *value, struct image_auth_challenge *ret,
			       struct error *err);

/* ---- the registries' configuration ---------------------------------------- */

#define PULL_CONFIG_FILE_MAX  (1u << 20) /* bytes of --registry-config */
#define PULL_REGISTRIES_MAX   64	 /* registries it names */
#define PULL_CREDENTIAL_MAX   1024	 /* bytes of a username or a password */
#define PULL_CACERT_FILE_MAX  (1u << 20) /* bytes of a registry's cacert file */
#define PULL_CACERT_CERTS_MAX 64	 /* certificates in it */

/*
 * agentboxd --registry-config FILE, read once at start:
 *   {"registries": {"HOST[:PORT]": {"username": "...", "password": "...",
 *                                   "cacert": "/abs/ca.pem",
 *                                   "insecure_http": false}}}
 * Every member is optional; username and password go together. cacert:
 * PEM certificates trusted for that registry (and its token service and
 * redirects) beside the system's. insecure_http: speak plain http to it.
 * Unknown members are refused, so a typo is not silently ignored.
 *
 * Credentials are kept in memory only, zeroed when freed, and never put
 * in an error message.
 */
struct image_registries;

/*
 * Read and check path (NULL: no registry configured) into *ret (the
 * caller's: image_registries_free()). Also initializes libcurl, so call
 * it once before any thread starts. -EINVAL (err naming the registry and
 * member, never a value), -E2BIG, or the errno of a file that cannot be
 * read.
 */
int image_registries_load(const char *path, struct image_registries **ret, struct error *err);
void image_registries_free(struct image_registries *r);
/* How many registries it names. */
size_t image_registries_count(const struct image_registries *r);

/* ---- the pull --------------------------------------------------------------- */

/*
 * Pull ref (image_pull_ref_parse()) into store s, using regs (may be NULL:
 * none configured). name: the store's name for it (normalized:
 * image_ref_normalize()); NULL takes the reference's own (struct
 * image_pull_ref's name; unnamed for a digest alone). *ret (may be NULL)
 * gets the image as image_import() gives it. Nothing of a failed pull is
 * left (store.h). The errors are above.
 */
int image_pull(struct image_store *s, const struct image_registries *regs, const char *ref,
	       const char *name, struct image_info *ret, struct error *err);

#endif
