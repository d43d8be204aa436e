/*
 * users.c - the local users of the unix socket: agentboxd --socket-user
 * UID=TENANT makes a local user a member of a tenant (root is always an
 * admin), and the socket's ACL lets exactly root and those users connect.
 */
#include "daemon/daemon.h"

#include "base/fileio.h"
#include "base/parse.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/acl.h>
#include <sys/stat.h>

int socket_user_parse(const char *text, struct api_local_user *ret, struct error *err)
{
	const char *eq = strchr(text, '=');
	char who[64];
	if (!eq || eq == text || (size_t)(eq - text) >= sizeof(who))
		return error_set(err, EINVAL, "--socket-user: '%s' is not UID=TENANT", text);
	snprintf(who, sizeof(who), "%.*s", (int)(eq - text), text);
	uint64_t uid;
	if (parse_u64(who, &uid) < 0) {
		/* a name: the system's users */
		struct passwd pw, *found = NULL;
		char buf[4096];
		if (getpwnam_r(who, &pw, buf, sizeof(buf), &found) != 0 || !found)
			return error_set(err, EINVAL, "--socket-user: no user '%s'", who);
		uid = found->pw_uid;
	}
	if (uid == 0 || uid >= (uid_t)-1)
		return error_set(err, EINVAL,
				 "--socket-user: uid %llu: root is an admin already; others are "
				 "1 to %u",
				 (unsigned long long)uid, (unsigned)((uid_t)-1) - 1);
	if (!tenant_name_is_valid(eq + 1))
		return error_set(err, EINVAL,
				 "--socket-user: '%s' is not a tenant's name (a-z, 0-9 and '-', "
				 "at most %d, starting with a letter or digit)",
				 eq + 1, TENANT_NAME_MAX);
	*ret = (struct api_local_user){.uid = (uid_t)uid};
	snprintf(ret->tenant, sizeof(ret->tenant), "%s", eq + 1);
	return 0;
}

int daemon_socket_tenants(struct daemon *d, struct store *st, struct error *err)
{
	for (size_t i = 0; i < d->cfg.nlocal_users; i++) {
		const char *name = d->cfg.local_users[i].tenant;
		struct tenant_record t = {0};
		int r = store_tenant_get(st, name, &t, err);
		tenant_record_release(&t);
		if (r == -ENOENT)
			r = store_tenant_insert(st, name, wall_clock_ms(), NULL, err);
		if (r == -EEXIST)
			return error_set(err, EEXIST,
					 "--socket-user: the tenant %s was deleted, and a name is "
					 "never given again",
					 name);
		if (r < 0 && r != -EEXIST)
			return r;
	}
	return 0;
}

int socket_acl_set(const char *path, const struct api_local_user *users, size_t n,
		   struct error *err)
{
	if (chmod(path, 0600) < 0)
		return error_set_errno(err, errno, "--socket %s: chmod", path);
	if (n == 0)
		return 0; /* root alone: the mode says it */
	/* u::rw-,g::---,o::---,m::rw-, and u:UID:rw- for each */
	char text[64 + DAEMON_SOCKET_USERS_MAX * 24];
	size_t len = (size_t)snprintf(text, sizeof(text), "u::rw-,g::---,o::---,m::rw-");
	for (size_t i = 0; i < n && len < sizeof(text); i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, ",u:%u:rw-",
					(unsigned)users[i].uid);
	if (len >= sizeof(text))
		return error_set(err, E2BIG, "--socket-user: too many users");
	acl_t acl = acl_from_text(text);
	if (!acl)
		return error_set_errno(err, errno, "--socket-user: the socket's ACL");
	int r = acl_set_file(path, ACL_TYPE_ACCESS, acl) < 0 ? -errno : 0;
	acl_free(acl);
	if (r == -EOPNOTSUPP || r == -ENOTSUP)
		return error_set(
		    err, ENOTSUP,
		    "--socket-user: the file system of %s keeps no ACLs, so the socket "
		    "cannot let exactly these users in; put --socket elsewhere (a tmpfs "
		    "such as /run keeps them)",
		    path);
	return r < 0 ? error_set_errno(err, -r, "--socket %s: set its ACL", path) : 0;
}
