/*
 * user.h - an image's config User as the ids it names.
 *
 * An OCI config's User is "USER" or "USER:GROUP", each a number or a
 * name (docker's and runc's forms). A name is looked up in the image's
 * own /etc/passwd or /etc/group, read inside its tree (never a file of
 * the host's: a symlink in the tree resolves within it); a user without
 * a group takes its passwd entry's group, or 0 when the tree has no entry
 * for a numeric user, as runc does.
 */
#ifndef AGENTBOX_IMAGE_USER_H
#define AGENTBOX_IMAGE_USER_H

#include "base/error.h"

#include <sys/types.h>

/* Bytes of the tree's /etc/passwd or /etc/group read, and of one line. */
#define IMAGE_USER_FILE_MAX (1 << 20)
#define IMAGE_USER_LINE_MAX 4096

/*
 * user (a config's User, not empty) resolved within the tree open at
 * tree_dfd: *ret_uid and *ret_gid. 0; -EINVAL when user is malformed or
 * names what the tree's files lack (a missing file, a line past
 * IMAGE_USER_LINE_MAX, a file past IMAGE_USER_FILE_MAX or not a regular
 * file among them), err saying which; -errno when a file cannot be read.
 * The ids are not checked against any range: the caller's to say.
 */
int image_user_resolve(int tree_dfd, const char *user, uid_t *ret_uid, gid_t *ret_gid,
		       struct error *err);

#endif
