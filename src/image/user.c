/*
 * user.c - an image's config User as the ids it names. See user.h.
 */
#include "image/user.h"

#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A decimal id of at most 10 digits below 2^32 - 1, or false. */
static bool parse_id(const char *s, unsigned *ret)
{
	size_t n = strlen(s);
	if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
		return false;
	unsigned long long v = strtoull(s, NULL, 10);
	if (v >= UINT_MAX)
		return false;
	*ret = (unsigned)v;
	return true;
}

/*
 * The tree's etc/<name> as a stream: resolved inside the tree (its
 * symlinks as if it were /), a regular file of at most IMAGE_USER_FILE_MAX
 * bytes. NULL with errno ENOENT when the tree has none.
 */
static FILE *open_etc(int tree_dfd, const char *name, struct error *err)
{
	char rel[32];
	snprintf(rel, sizeof(rel), "etc/%s", name);
	struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
			       .resolve =
				   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	int fd = (int)syscall(SYS_openat2, tree_dfd, rel, &how, sizeof(how));
	if (fd < 0) {
		int e = errno;
		/* but for a missing file or our own shortage, the tree's fault (a loop...) */
		if (e != ENOENT && e != ENOMEM && e != EMFILE && e != ENFILE && e != EIO)
			e = EINVAL;
		error_set_errno(err, e, "the image's /etc/%s", name);
		errno = e;
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > IMAGE_USER_FILE_MAX) {
		close(fd);
		error_set(err, EINVAL,
			  "the image's /etc/%s is not a regular file of at most %d bytes", name,
			  IMAGE_USER_FILE_MAX);
		errno = EINVAL;
		return NULL;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		int e = errno;
		close(fd);
		error_set_errno(err, e, "the image's /etc/%s", name);
		errno = e;
	}
	return f;
}

/*
 * The passwd entry of name (or, name NULL, of uid) in the tree: 0 and
 * *ret_uid, *ret_gid; -ENOENT when there is none (or no passwd at all);
 * -EINVAL or -errno as user.h says.
 */
static int find_user(int tree_dfd, const char *name, uid_t uid, uid_t *ret_uid, gid_t *ret_gid,
		     struct error *err)
{
	FILE *f = open_etc(tree_dfd, "passwd", err);
	if (!f)
		return -errno;
	char buf[IMAGE_USER_LINE_MAX];
	struct passwd pw, *found;
	int r;
	while ((r = fgetpwent_r(f, &pw, buf, sizeof(buf), &found)) == 0) {
		if (name ? strcmp(pw.pw_name, name) == 0 : pw.pw_uid == uid) {
			*ret_uid = pw.pw_uid;
			*ret_gid = pw.pw_gid;
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	if (r == ERANGE)
		return error_set(err, EINVAL, "the image's /etc/passwd has a line over %d bytes",
				 IMAGE_USER_LINE_MAX);
	return r == ENOENT ? -ENOENT : error_set_errno(err, r, "the image's /etc/passwd");
}

/* The group entry of name in the tree: as find_user(). */
static int find_group(int tree_dfd, const char *name, gid_t *ret_gid, struct error *err)
{
	FILE *f = open_etc(tree_dfd, "group", err);
	if (!f)
		return -errno;
	char buf[IMAGE_USER_LINE_MAX];
	struct group gr, *found;
	int r;
	while ((r = fgetgrent_r(f, &gr, buf, sizeof(buf), &found)) == 0) {
		if (strcmp(gr.gr_name, name) == 0) {
			*ret_gid = gr.gr_gid;
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	if (r == ERANGE)
		return error_set(err, EINVAL, "the image's /etc/group has a line over %d bytes",
				 IMAGE_USER_LINE_MAX);
	return r == ENOENT ? -ENOENT : error_set_errno(err, r, "the image's /etc/group");
}

int image_user_resolve(int tree_dfd, const char *user, uid_t *ret_uid, gid_t *ret_gid,
		       struct error *err)
{
	char copy[256];
	size_t n = strlen(user);
	if (n == 0 || n >= sizeof(copy))
		return error_set(err, EINVAL, "User '%.64s' is empty or longer than %zu bytes",
				 user, sizeof(copy) - 1);
	memcpy(copy, user, n + 1);
	char *group = strchr(copy, ':');
	if (group)
		*group++ = '\0';
	if (!copy[0] || (group && (!group[0] || strchr(group, ':'))))
		return error_set(err, EINVAL, "User '%s' is not USER or USER:GROUP", user);

	unsigned id;
	uid_t uid;
	gid_t gid = 0;
	int r;
	if (parse_id(copy, &id)) {
		uid = id;
		/* a numeric user's group: its passwd entry's, if the tree has one */
		if (!group && (r = find_user(tree_dfd, NULL, uid, &uid, &gid, err)) < 0) {
			if (r != -ENOENT)
				return r;
			gid = 0;
		}
	} else {
		r = find_user(tree_dfd, copy, 0, &uid, &gid, err);
		if (r == -ENOENT)
			return error_set(err, EINVAL,
					 "User '%s': the image's /etc/passwd has no %s", user,
					 copy);
		if (r < 0)
			return r;
	}
	if (group && parse_id(group, &id)) {
		gid = id;
	} else if (group) {
		r = find_group(tree_dfd, group, &gid, err);
		if (r == -ENOENT)
			return error_set(err, EINVAL, "User '%s': the image's /etc/group has no %s",
					 user, group);
		if (r < 0)
			return r;
	}
	*ret_uid = uid;
	*ret_gid = gid;
	return 0;
}
