/*
 * tar-member.c - a tar member's name as the API takes it (tar-member.h).
 */
#include "api/tar-member.h"

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
