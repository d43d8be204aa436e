#include "supervisor/spec-json.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "image/store.h"
#include "runtime/nethelper.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t limit_u64(const json_t *limits, const char *key, uint64_t dflt)
{
	json_t *v = json_object_get(limits, key);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
							       : dflt;
}

void spec_json_limits(const json_t *limits, struct spec *s)
{
	s->memory_bytes = limit_u64(limits, "memory_mb", SPEC_DEFAULT_MEMORY >> 20) << 20;
	s->pids = limit_u64(limits, "pids", SPEC_DEFAULT_PIDS);
	s->disk_bytes = limit_u64(limits, "disk_mb", SPEC_DEFAULT_DISK >> 20) << 20;
	json_t *cpus = json_object_get(limits, "cpus");
	if (json_is_number(cpus))
		s->cpu_milli = (uint64_t)llround(json_number_value(cpus) * 1000.0);
	json_t *t = json_object_get(limits, "timeout_s");
	if (json_is_number(t))
		s->timeout_ms = (uint64_t)llround(json_number_value(t) * 1000.0);
}

uint64_t spec_json_state_bytes(const json_t *limits)
{
	return limit_u64(limits, "state_mb", SPEC_DEFAULT_STATE >> 20) << 20;
}

int spec_json_env(const json_t *env, size_t extra, const char *where, char ***ret,
		  struct error *err)
{
	if (env && !json_is_object(env))
		return error_set(err, EINVAL, "%s is not an object", where);
	size_t n = json_object_size(env), i = 0;
	char **v = calloc(n + extra + 1, sizeof(char *));
	if (!v)
		return error_set(err, ENOMEM, "out of memory");
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)env, key, val)
	{
		if (!json_is_string(val)) {
			strv_free(v);
			return error_set(err, EINVAL, "%s.%s is not a string", where, key);
		}
		if (asprintf(&v[i], "%s=%s", key, json_string_value(val)) < 0) {
			v[i] = NULL;
			strv_free(v);
			return error_set(err, ENOMEM, "out of memory");
		}
		i++;
	}
	*ret = v;
	return 0;
}

int spec_json_image(const json_t *spec, const char *state_dir, struct spec_image *img,
		    struct spec *s, struct error *err)
{
	img->use_fd = -1;
	img->tree[0] = img->cwd[0] = '\0';
	json_t *image = json_object_get(spec, "image");
	const char *user = json_string_value(json_object_get(spec, "user"));
	const char *cwd = json_string_value(json_object_get(spec, "cwd"));
	if (!image)
		return user || cwd ? error_set(err, EINVAL, "spec: user and cwd need an image") : 0;
	const char *config = json_string_value(json_object_get(image, "config"));
	if (!config || !image_digest_is_valid(config))
		return error_set(err, EINVAL, "spec.image: no config digest");
	unsigned uid = 0, gid = 0;
	char end = 0;
	bool ids = user && sscanf(user, "%u:%u%c", &uid, &gid, &end) == 2;
	if (user && strcmp(user, "root") != 0 && !ids)
		return error_set(err, EINVAL, "spec.user: '%s' is not root or UID:GID", user);
	if (cwd && (cwd[0] != '/' || strlen(cwd) >= sizeof(img->cwd)))
		return error_set(err, EINVAL, "spec.cwd: not an absolute path");
	int r = image_use_begin(state_dir, config, &img->use_fd, err);
	if (r < 0)
		return r;
	/* the tree by its open fd: what is mounted is what is held */
	snprintf(img->tree, sizeof(img->tree), "/proc/self/fd/%d", img->use_fd);
	s->image_tree = img->tree;
	s->user = ids ? SPEC_USER_IDS : user ? SPEC_USER_ROOT : SPEC_USER_SANDBOX;
	s->uid = uid; /* spec_validate() checks their range */
	s->gid = gid;
	if (cwd) {
		snprintf(img->cwd, sizeof(img->cwd), "%s", cwd);
		s->cwd = img->cwd;
	}
	return 0;
}

void spec_image_release(struct spec_image *img)
{
	image_use_end(img->use_fd);
	img->use_fd = -1;
}

char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}

int spec_json_network(const json_t *network, const json_t *egress, int secrets_fd,
		      const char *events, struct spec_network *net, struct spec *s,
		      struct error *err)
{
	const char *mode = network ? json_string_value(json_object_get(network, "mode")) : "none";
	if (!mode)
		return error_set(err, EINVAL, "spec.network.mode is not a string");
	if (strcmp(mode, "none") == 0)
		return secrets_fd > 0 ? error_set(err, EINVAL, "secrets need mode allow") : 0;
	if (strcmp(mode, "open") != 0 && strcmp(mode, "allow") != 0)
		return error_set(err, EINVAL, "spec.network.mode: '%s' is not a mode", mode);
	struct spec_network n = {.allow = strcmp(mode, "allow") == 0};
	/* agentbox-net's options: --rate, then the host's resolver and --allow-cidr */
	json_int_t rate = json_integer_value(json_object_get(network, "rate_mbit"));
	json_t *cidrs = json_object_get(egress, "allow_cidr");
	const char *resolver = json_string_value(json_object_get(egress, "resolver"));
	/* secrets: their values' file for the proxy alone, and the CA it signs with */
	const char *ca_dir = json_string_value(json_object_get(egress, "ca_dir"));
	const char *ca_public = json_string_value(json_object_get(egress, "ca_public"));
	const char *ca_mount = json_string_value(json_object_get(egress, "ca_mount"));
	const char *upstream_ca = json_string_value(json_object_get(egress, "upstream_cacert"));
	bool has_secrets = secrets_fd > 0;
	if (has_secrets && (strcmp(mode, "allow") != 0 || !ca_dir || !ca_public || !ca_mount))
		return error_set(err, EINVAL, "secrets need mode allow and the daemon's CA");
	size_t k = 0, count = 2 + 2 + 2 * json_array_size(cidrs) + 4 + 1;
	char rate_text[32];
	snprintf(rate_text, sizeof(rate_text), "%lld", (long long)rate);
	bool ok = (n.extra = calloc(count, sizeof(char *))) != NULL;
	if (ok && rate > 0)
		ok = (n.extra[k++] = strdup("--rate")) && (n.extra[k++] = strdup(rate_text));
	if (ok && resolver)
		ok = (n.extra[k++] = strdup("--resolver")) && (n.extra[k++] = strdup(resolver));
	size_t i;
	json_t *v;
	json_array_foreach(cidrs, i, v)
	{
		if (ok && json_is_string(v))
			ok = (n.extra[k++] = strdup("--allow-cidr")) &&
			     (n.extra[k++] = strdup(json_string_value(v)));
	}
	if (ok && n.allow)
		ok = (n.policy = json_dumps(network, JSON_COMPACT)) && (n.events = strdup(events));
	if (ok && has_secrets) {
		ok = (n.extra[k++] = strdup("--ca")) && (n.extra[k++] = strdup(ca_dir)) &&
		     asprintf(&n.ca_volume, "%s:%s:ro", ca_public, ca_mount) > 0;
		if (ok && upstream_ca)
			ok = (n.extra[k++] = strdup("--upstream-cacert")) &&
			     (n.extra[k++] = strdup(upstream_ca));
	}
	if (ok && n.ca_volume && spec_add_volume(s, n.ca_volume, err) < 0) {
		spec_network_release(&n);
		return -EINVAL;
	}
	if (!ok) {
		spec_network_release(&n);
		return error_set(err, ENOMEM, "out of memory");
	}
	n.secrets_fd = secrets_fd;
	*net = n;
	s->network_attach = spec_network_attach;
	s->network_arg = net;
	return 0;
}

int spec_json_secrets(const json_t *spec, const char *path, bool consume, int *ret_fd,
		      struct error *err)
{
	*ret_fd = 0;
	if (!json_object_get(spec, "secrets"))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	int e = errno;
	if (consume)
		(void)unlink(path);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
		e = EINVAL;
	}
	if (fd < 0)
		return error_set_errno(err, e, "the secrets' values are not there");
	/* above the fds a launcher hands over, so that none of them is clobbered */
	if (fd < 10) {
		int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
		close(fd);
		if (high < 0)
			return error_set_errno(err, errno, "the secrets' values");
		fd = high;
	}
	*ret_fd = fd;
	return 0;
}

void spec_network_release(struct spec_network *net)
{
	if (net->secrets_fd > 0)
		close(net->secrets_fd);
	free(net->ca_volume);
	free(net->policy);
	free(net->events);
	strv_free(net->extra);
	*net = (struct spec_network){0};
}

int spec_network_attach(void *arg, int pidfd, unsigned slot, struct error *err)
{
	struct spec_network *net = arg;
	struct nethelper_link l = {.allow = net->allow,
				   .policy = net->policy,
				   .events = net->events,
				   .extra = net->extra,
				   .secrets_fd = net->secrets_fd};
	net->host_if[0] = '\0';
	int r = nethelper_attach(&l, pidfd, slot, err);
	if (r < 0)
		return r;
	net->relay = l.relay;
	snprintf(net->host_if, sizeof(net->host_if), "%s", l.host_if);
	return 0;
}

int spec_network_hand_out(struct spec_network *net, struct nethelper_park *p, struct error *err)
{
	struct nethelper_link l = {.allow = net->allow,
				   .policy = net->policy,
				   .events = net->events,
				   .extra = net->extra,
				   .secrets_fd = net->secrets_fd};
	net->host_if[0] = '\0';
	int r = nethelper_hand_out(p, &l, err);
	if (r < 0)
		return r;
	net->relay = l.relay;
	snprintf(net->host_if, sizeof(net->host_if), "%s", l.host_if);
	return 0;
}

int spec_network_bytes(const struct spec_network *net, pid_t init_pid, uint64_t *ret_in,
		       uint64_t *ret_out)
{
	return nethelper_bytes(net->host_if, init_pid, ret_in, ret_out);
}
