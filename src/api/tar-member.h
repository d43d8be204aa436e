/*
 * tar-member.h - the one check of a tar member's name that the API
 * applies to every tar it takes from a client: a task's "tar_base64"
 * (task-request-tar.c) and a directory PUT into a sandbox
 * (sandbox-files-tar.c). Pure code.
 */
#ifndef AGENTBOX_API_TAR_MEMBER_H
#define AGENTBOX_API_TAR_MEMBER_H

#include <stddef.h>

/* Bytes of one component of a member's name. */
#define API_TAR_COMPONENT_MAX 255

/*
 * name, canonical and relative, into buf (size bytes): every leading
 * "./" dropped, then trailing '/' dropped; what is left must be non-empty,
 * not absolute, and have no empty, "." or ".." component nor one longer
 * than API_TAR_COMPONENT_MAX. Returns buf, or NULL when name is not such
 * a name (or does not fit). "." and "./" themselves are NULL: a caller
 * that takes the directory itself checks for them first.
 */
const char *api_tar_member_name(const char *name, char *buf, size_t size);

struct archive;
struct archive_entry;

/* Bytes of the message api_tar_next_file() gives for a refused member. */
#define API_TAR_WHY_MAX 1400

/*
 * The next regular file of a task's tar (task-request-tar.c, inputs-tar.c;
 * a: libarchive reading it, tar formats only): directories (made as its
 * files' parents) and the tar's own "." or "./" are skipped. 1 with
 * *ret_ent and its name, canonical (api_tar_member_name()), in buf
 * (size bytes) as *ret_name; 0 at the tar's end; -EINVAL with why
 * naming the member when its name is not relative and canonical, or it is
 * not a regular file (a link, a device, a FIFO, or sparse: its holes are
 * not in the tar); -EBADMSG with libarchive's why when a is not a whole
 * tar.
 */
int api_tar_next_file(struct archive *a, char *buf, size_t size, struct archive_entry **ret_ent,
		      const char **ret_name, char why[API_TAR_WHY_MAX]);

#endif
