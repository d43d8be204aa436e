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

#endif
