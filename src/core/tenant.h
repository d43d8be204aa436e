/*
 * tenant.h - tenants and the roles of their API keys. Plain data and
 * rules, no system calls: the store persists tenants and keys, the API
 * decides with them who sees what.
 *
 * A tenant is a name that owns tasks, sandboxes and API keys. Its name is
 * tenant_name_is_valid(): lower-case letters, digits and '-', so that it
 * can appear in URLs, logs and file names as it is. TENANT_DEFAULT owns
 * every row from before tenants, and root's (on the unix socket); it
 * always exists.
 *
 * An API key belongs to one tenant, with a role: a member acts within its
 * tenant, an admin on every tenant. The key's text form is auth/key.h's;
 * what is kept of it is its public id and the hash of its secret, whose
 * sizes are repeated here (KEY_ID_SIZE, KEY_HASH_SIZE) so that the store
 * need not know the text form (the API checks that the two agree).
 */
#ifndef AGENTBOX_CORE_TENANT_H
#define AGENTBOX_CORE_TENANT_H

#include <stdbool.h>

/* Named limits of tenants and keys. */
#define TENANT_NAME_MAX	  63			/* bytes of a tenant's name */
#define TENANT_NAME_SIZE  (TENANT_NAME_MAX + 1) /* with its NUL */
#define TENANT_DEFAULT	  "default"		/* every row from before tenants, and root's */
#define KEY_ID_SIZE	  13   /* an API key's public id with its NUL (AUTH_KEY_ID_SIZE) */
#define KEY_HASH_SIZE	  32   /* the SHA-256 of its secret (AUTH_KEY_HASH_SIZE) */
#define KEY_LABEL_MAX	  128  /* bytes of a key's label */
#define TENANT_QUOTAS_MAX 4096 /* bytes of a tenant's quotas JSON */

/*
 * Is name a tenant's name: 1..TENANT_NAME_MAX characters of [a-z0-9-],
 * the first a letter or digit, the last not '-'? (NULL: no.)
 */
bool tenant_name_is_valid(const char *name);

enum key_role {
	KEY_ROLE_MEMBER = 0, /* acts within its tenant */
	KEY_ROLE_ADMIN,	     /* acts on every tenant, and manages tenants and keys */
	KEY_ROLE_COUNT
};

/* "member", "admin"; NULL for an out-of-range value. */
const char *key_role_name(enum key_role r);

/* The inverse of key_role_name(). 0, or -EINVAL for an unknown name (*ret left alone). */
int key_role_parse(const char *s, enum key_role *ret);

#endif
