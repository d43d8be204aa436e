/*
 * tar-check.h - what `agentbox cp -r` lets through to the host's tar
 * from agentboxd (GET .../files?format=tar): the CLI does not trust the
 * server either. A tar is fed through tar_check_feed() as it arrives, and
 * each piece is handed on only once it has passed, so a refused member
 * never reaches tar. Pure code on byte buffers.
 *
 * Taken: ustar headers (their checksums right) of regular files ('0',
 * NUL) and directories ('5'); a pax extended header ('x') whose records
 * are well-formed and say nothing of "size", "linkpath" or GNU.sparse;
 * a GNU long name ('L'); the end (zero blocks). Every member's name
 * (prefix/name, a pax "path", a long name) must be relative, with no ".."
 * component. Anything else (a symlink, a hard link, a device, a FIFO, a
 * global header, a sparse file, a size in base-256) is refused.
 */
#ifndef AGENTBOX_CLI_TAR_CHECK_H
#define AGENTBOX_CLI_TAR_CHECK_H

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes a pax header's records or a GNU long name may hold. */
#define TAR_CHECK_META_MAX 65536

struct tar_check {
	unsigned char block[512]; /* the header being read */
	size_t have;		  /* bytes of it so far */
	uint64_t data;		  /* bytes of the member's data still to come */
	uint64_t pad;		  /* then padding to the next block */
	char meta_type;		  /* 'x' or 'L' while its data is gathered, else 0 */
	char meta[TAR_CHECK_META_MAX + 1];
	size_t meta_len;
	bool named; /* the next header's name was given by a pax path or a long name */
	bool ended; /* a zero block was read: nothing more is looked at */
};

/* A checker at the start of a tar. */
void tar_check_init(struct tar_check *t);

/*
 * The next len bytes of the tar. 0: they pass; -EPROTO with err naming
 * the member and why: refuse the tar (nothing of these bytes is to be
 * handed on).
 */
int tar_check_feed(struct tar_check *t, const char *buf, size_t len, struct error *err);

/* Has the tar ended where a tar may (a zero block, not within a member)? */
bool tar_check_done(const struct tar_check *t);

#endif
