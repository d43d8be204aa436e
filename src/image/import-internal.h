/*
 * import-internal.h - an import's pieces: SHA-256 (OpenSSL) and the
 * source an image is read from (source.c), for import.c.
 */
#ifndef AGENTBOX_IMAGE_IMPORT_INTERNAL_H
#define AGENTBOX_IMAGE_IMPORT_INTERNAL_H

#include "core/layout.h"
#include "image/store-internal.h"

#include <stdbool.h>

/* ---- SHA-256 ---------------------------------------------------------------- */

struct sha256 {
	void *ctx; /* an EVP_MD_CTX */
};
int sha256_init(struct sha256 *h); /* 0 or -ENOMEM */
void sha256_update(struct sha256 *h, const void *data, size_t len);
/* The digest's 64 hex digits into hex; releases h. */
void sha256_final(struct sha256 *h, char hex[IMAGE_DIGEST_HEX + 1]);
void sha256_release(struct sha256 *h);

/* ---- sources ------------------------------------------------------------------ */

/* A file of an archive: staged under its index, or a link to another path. */
struct source_file {
	char *path; /* the archive's, cleaned */
	char *link; /* a symlink's or hard link's target path; NULL: none */
	bool staged;
	uint64_t size;
	char hex[IMAGE_DIGEST_HEX + 1]; /* its SHA-256, when staged */
};

struct source {
	int dirfd;   /* a layout directory; -1 for an archive */
	int stagefd; /* an archive's staging directory (images/tmp/import-*) */
	char stage_path[PATH_MAX];
	struct source_file *files;
	size_t n, cap;
	uint64_t bytes; /* staged so far (IMAGE_BLOBS_MAX) */
};

/* Open path (a directory, or an archive read and staged whole). Release it even on failure. */
int source_open(struct source *src, struct image_store *s, const char *path, struct error *err);
void source_release(struct source *src);
bool source_has(struct source *src, const char *path);
/* The staged file path names (links followed), or NULL; archives only. */
struct source_file *source_find(struct source *src, const char *path);
/* A regular file of the source, open for reading. */
int source_open_file(struct source *src, const char *path, int *ret_fd, struct error *err);
/* A file of the source, whole (at most max bytes), malloc'd and NUL-terminated. */
int source_read(struct source *src, const char *path, size_t max, char **ret, size_t *ret_len,
		struct error *err);

#endif
