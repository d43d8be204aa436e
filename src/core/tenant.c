#include "core/tenant.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const char *const role_names[KEY_ROLE_COUNT] = {
    [KEY_ROLE_MEMBER] = "member",
    [KEY_ROLE_ADMIN] = "admin",
};

_Static_assert(sizeof(TENANT_DEFAULT) <= TENANT_NAME_SIZE, "the default tenant's name fits");

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

bool tenant_name_is_valid(const char *name)
{
	if (!name || !*name || *name == '-')
		return false;
	size_t n = 0;
	for (; name[n]; n++)
		if (n >= TENANT_NAME_MAX || !name_char(name[n]))
			return false;
	return name[n - 1] != '-';
}

const char *key_role_name(enum key_role r)
{
	return (unsigned)r < KEY_ROLE_COUNT ? role_names[r] : NULL;
}

int key_role_parse(const char *s, enum key_role *ret)
{
	for (int r = 0; r < KEY_ROLE_COUNT; r++)
		if (s && strcmp(s, role_names[r]) == 0) {
			*ret = (enum key_role)r;
			return 0;
		}
	return -EINVAL;
}
