/*
 * tar-member.c - a tar member's name as the API takes it (tar-member.h).
 */
#include "api/tar-member.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *api_tar_member_name(const char *name, char *buf, size_t size)
{
	while (name[0] == '.' && name[1] == '/')
		name += 2;
	if ((size_t)snprintf(buf, size, "%s", name) >= size)
		return NULL;
	size_t n = strlen(buf);
	while (n > 0 && buf[n - 1] == '/')
		buf[--n] = '\0';
	if (n == 0 || buf[0] == '/')
		return NULL;
	for (const char *p = buf;;) {
		size_t k = strcspn(p, "/");
		if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.') ||
		    k > API_TAR_COMPONENT_MAX)
			return NULL;
		if (!p[k])
			return buf;
		p += k + 1;
	}
}

int api_tar_next_file(struct archive *a, char *buf, size_t size, struct archive_entry **ret_ent,
		      const char **ret_name, char why[API_TAR_WHY_MAX])
{
	struct archive_entry *ent;
	int h;
	while ((h = archive_read_next_header(a, &ent)) == ARCHIVE_OK) {
		const char *raw = archive_entry_pathname(ent);
		mode_t type = archive_entry_filetype(ent);
		if (raw && type == AE_IFDIR && (strcmp(raw, ".") == 0 || strcmp(raw, "./") == 0))
			continue; /* the directory itself */
		const char *name = raw ? api_tar_member_name(raw, buf, size) : NULL;
		if (!name) {
			snprintf(why, API_TAR_WHY_MAX,
				 "member '%.1024s' is not a relative, canonical path",
				 raw ? raw : "");
			return -EINVAL;
		}
		if (type == AE_IFDIR)
			continue;
		if (type != AE_IFREG || archive_entry_hardlink(ent) ||
		    archive_entry_sparse_count(ent) > 0) {
			snprintf(why, API_TAR_WHY_MAX,
				 "member %.1024s is not a regular file or a directory%s", name,
				 type == AE_IFREG && !archive_entry_hardlink(ent)
				     ? " (it is sparse: its holes are not in the tar)"
				     : "");
			return -EINVAL;
		}
		*ret_ent = ent;
		*ret_name = name;
		return 1;
	}
	if (h == ARCHIVE_EOF)
		return 0;
	snprintf(why, API_TAR_WHY_MAX, "%s", archive_error_string(a));
	return -EBADMSG;
}
