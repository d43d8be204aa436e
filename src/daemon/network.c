/*
 * network.c - what agentboxd readies on the host for sandboxes with a
 * network, and takes away again (network/table.h).
 *
 * Nothing is touched until the first task or sandbox with a network is
 * admitted (daemon_network_ready(), the API's network_ready hook): a
 * daemon whose sandboxes have none never changes the host's network.
 * Then agentbox's table is installed (replacing a crashed daemon's) and
 * IPv4 forwarding is turned on, its value before that kept in
 * <state>/network.json so that a clean stop can put it back even after
 * a crash and a restart in between.
 *
 * At start, a table left there (by a daemon that crashed, or stopped
 * while networked sandboxes lived on) is replaced by this daemon's, so
 * that its --allow-cidr holds. A clean stop removes the table, and puts
 * forwarding back, when no sandbox link is left and no task waits or
 * runs; otherwise the sandboxes that live on keep their network, and the
 * next daemon takes the table over. The scheduler readies the host too
 * before it starts a task with a network (after a reboot, say, with such
 * tasks queued), so that no link is ever made without the rules. A table
 * removed behind a running daemon's back (nft flush ruleset) is not put
 * back until the next daemon: a link made meanwhile has no rules.
 */
#include "daemon/daemon.h"

#include "base/fileio.h"
#include "core/layout.h"
#include "egress/secret.h"
#include "network/intercept.h"
#include "network/link.h"
#include "network/table.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NETWORK_JSON "network.json" /* {"ip_forward": 0|1}: before agentbox turned it on */

static int network_file(const struct daemon *d, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s", d->cfg.state_dir, NETWORK_JSON);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int ready_locked(struct daemon *d, struct error *err)
{
	struct net_table_config c = {.allowed = d->cfg.allowed, .nallowed = d->cfg.nallowed};
	/* the links of sandboxes that outlived an older daemon, into the groups the rules match */
	int r = net_links_adopt(err);
	if (r == 0)
		r = net_table_install(&c, err);
	if (r < 0)
		return r;
	char path[4200];
	if (network_file(d, path, sizeof(path)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	int was = net_forwarding_get();
	if (was < 0)
		return error_set_errno(err, -was, "read net.ipv4.ip_forward");
	/* only the first time: a later daemon must not record agentbox's own 1 */
	if (access(path, F_OK) != 0) {
		char text[32];
		snprintf(text, sizeof(text), "{\"ip_forward\": %d}\n", was);
		if ((r = create_file_at(AT_FDCWD, path, text, 0600)) < 0)
			return error_set_errno(err, -r, "%s", path);
	}
	if (!was && (r = net_forwarding_set(true, err)) < 0)
		return r;
	d->network_ready = true;
	return 0;
}

int daemon_network_ready(void *data, struct error *err)
{
	struct daemon *d = data;
	int r = 0;
	pthread_mutex_lock(&d->network_lock);
	if (!d->network_ready)
		r = ready_locked(d, err);
	pthread_mutex_unlock(&d->network_lock);
	return r;
}

int daemon_link_mode(const char *host_if, bool allow, struct error *err)
{
	return net_link_set_group(host_if, allow ? NET_GROUP_ALLOW : NET_GROUP_OPEN, err);
}

int daemon_network_start(struct daemon *d, struct error *err)
{
	if (!net_table_exists())
		return 0;
	return daemon_network_ready(d, err);
}

int daemon_network_stop(struct daemon *d, bool tasks_waiting, struct error *err)
{
	if (!d->network_ready || tasks_waiting || net_links_left())
		return 0;
	int r = net_table_remove(err);
	if (r < 0)
		return r;
	d->network_ready = false;
	char path[4200], text[64];
	if (network_file(d, path, sizeof(path)) < 0)
		return 0;
	ssize_t n = read_file_at(AT_FDCWD, path, text, sizeof(text));
	if (n > 0 && strstr(text, "\"ip_forward\": 0") && (r = net_forwarding_set(false, err)) < 0)
		return r;
	(void)unlink(path);
	return 0;
}

static int ca_dir(const struct daemon *d, char *buf, size_t size)
{
	return layout_state_file(buf, size, d->cfg.state_dir, LAYOUT_EGRESS_CA);
}

int daemon_egress_ca(struct daemon *d, json_t *egress)
{
	char dir[4096], pub[4200];
	if (ca_dir(d, dir, sizeof(dir)) < 0)
		return -ENAMETOOLONG;
	snprintf(pub, sizeof(pub), "%s/%s", dir, INTERCEPT_CA_PUBLIC);
	if (json_object_set_new(egress, "ca_dir", json_string(dir)) < 0 ||
	    json_object_set_new(egress, "ca_public", json_string(pub)) < 0 ||
	    json_object_set_new(egress, "ca_mount", json_string(SECRET_CA_DIR)) < 0 ||
	    (d->cfg.egress_cacert &&
	     json_object_set_new(egress, "upstream_cacert", json_string(d->cfg.egress_cacert)) < 0))
		return -ENOMEM;
	return 0;
}

int daemon_secrets_ready(void *data, struct error *err)
{
	struct daemon *d = data;
	char dir[4096];
	if (ca_dir(d, dir, sizeof(dir)) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	int r = 0;
	pthread_mutex_lock(&d->network_lock);
	/* the host's trusted CAs where its OpenSSL keeps them, then ours */
	if (!d->secrets_ready && (r = intercept_ca_ensure(dir, NULL, err)) == 0)
		d->secrets_ready = true;
	pthread_mutex_unlock(&d->network_lock);
	return r;
}
