#include "supervisor/spec-json.h"

#include "base/cleanup.h"
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
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

char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}

int spec_json_network(const json_t *network, const json_t *egress, const char *events,
		      struct spec_network *net, struct spec *s, struct error *err)
{
	const char *mode = network ? json_string_value(json_object_get(network, "mode")) : "none";
	if (!mode)
		return error_set(err, EINVAL, "spec.network.mode is not a string");
	if (strcmp(mode, "none") == 0)
		return 0;
	if (strcmp(mode, "open") != 0 && strcmp(mode, "allow") != 0)
		return error_set(err, EINVAL, "spec.network.mode: '%s' is not a mode", mode);
	struct spec_network n = {.allow = strcmp(mode, "allow") == 0};
	/* agentbox-net's options: --rate, then the host's resolver and --allow-cidr */
	json_int_t rate = json_integer_value(json_object_get(network, "rate_mbit"));
	json_t *cidrs = json_object_get(egress, "allow_cidr");
	const char *resolver = json_string_value(json_object_get(egress, "resolver"));
	size_t k = 0, count = 2 + 2 + 2 * json_array_size(cidrs) + 1;
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
	if (!ok) {
		spec_network_release(&n);
		return error_set(err, ENOMEM, "out of memory");
	}
	*net = n;
	s->network_attach = spec_network_attach;
	s->network_arg = net;
	return 0;
}

void spec_network_release(struct spec_network *net)
{
	free(net->policy);
	free(net->events);
	strv_free(net->extra);
	*net = (struct spec_network){0};
}

/* agentbox-net next to this executable, or in the build tree's src/network/. */
static void net_helper(char *buf, size_t size)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(buf, size, "agentbox-net");
		return;
	}
	exe[n] = '\0';
	char *dir = dirname(exe);
	snprintf(buf, size, "%s/agentbox-net", dir);
	if (access(buf, X_OK) != 0)
		snprintf(buf, size, "%s/../network/agentbox-net", dir);
}

#define NET_ARGS_MAX 160 /* agentbox-net's argv: 9 + 2 per --allow-cidr (64 at most) */

int spec_network_attach(void *arg, int pidfd, unsigned slot, struct error *err)
{
	struct spec_network *net = arg;
	char helper[4200], slot_text[16];
	const char *argv[NET_ARGS_MAX] = {"agentbox-net", net->allow ? "allow" : "open", slot_text};
	size_t argc = 3;
	net_helper(helper, sizeof(helper));
	snprintf(slot_text, sizeof(slot_text), "%u", slot);
	if (net->allow) {
		argv[argc++] = "--policy";
		argv[argc++] = net->policy;
		argv[argc++] = "--events";
		argv[argc++] = net->events;
	}
	for (char **e = net->extra; e && *e && argc < NET_ARGS_MAX - 1; e++)
		argv[argc++] = *e;
	argv[argc] = NULL;
	int out[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		return error_set_errno(err, errno, "network: pipe");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		return error_set_errno(err, e, "network: fork");
	}
	if (pid == 0) {
		/* fd 3 the pidfd, without close-on-exec; stdout and stderr into the pipe */
		if (dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0 ||
		    (pidfd == 3 ? fcntl(3, F_SETFD, 0) : dup2(pidfd, 3)) < 0)
			_exit(127);
		execv(helper, (char *const *)argv);
		dprintf(2, "cannot run %s: %s\n", helper, strerror(errno));
		_exit(127);
	}
	close(out[1]);
	/* "ready IFNAME" once the link is made and the relay serves; it then stays */
	char msg[512];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(out[0], msg + len, sizeof(msg) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(msg, '\n', len) || len == sizeof(msg) - 1)
			break;
	}
	close(out[0]);
	msg[len] = '\0';
	char *ready = strstr(msg, "ready ");
	char *end = ready ? strchr(ready, '\n') : NULL;
	if (ready && (ready == msg || ready[-1] == '\n') && end) {
		*end = '\0';
		snprintf(net->host_if, sizeof(net->host_if), "%s", ready + 6);
		net->relay = pid;
		return 0;
	}
	/* not ready: whatever it is doing, it goes (a relay would never exit by itself) */
	kill(pid, SIGKILL);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	net->host_if[0] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	return error_set(err, EIO, "network: %s", msg[0] ? msg : "agentbox-net failed");
}

/* name's received and sent bytes in the /proc/.../net/dev file at path. 0 or -errno. */
static int dev_bytes(const char *path, const char *name, uint64_t *ret_rx, uint64_t *ret_tx)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char line[512];
	size_t n = strlen(name);
	while (fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " ");
		unsigned long long rx, tx;
		if (strncmp(p, name, n) != 0 || p[n] != ':')
			continue;
		/* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes ... */
		if (sscanf(p + n + 1, "%llu %*u %*u %*u %*u %*u %*u %*u %llu", &rx, &tx) != 2)
			return -EIO;
		*ret_rx = rx;
		*ret_tx = tx;
		return 0;
	}
	return -ENOENT;
}

int spec_network_bytes(const struct spec_network *net, pid_t init_pid, uint64_t *ret_in,
		       uint64_t *ret_out)
{
	if (!net->host_if[0])
		return -ENODEV;
	/* the host end, in this process's network namespace (not sysfs's), and eth0 in
	 * init's: a veth's counters may stand on either end, whatever the kernel's path */
	char inside[64];
	uint64_t host_rx = 0, host_tx = 0, eth_rx = 0, eth_tx = 0;
	snprintf(inside, sizeof(inside), "/proc/%d/net/dev", (int)init_pid);
	int r = dev_bytes("/proc/self/net/dev", net->host_if, &host_rx, &host_tx);
	if (r < 0)
		return r;
	if (init_pid > 0)
		(void)dev_bytes(inside, "eth0", &eth_rx, &eth_tx);
	*ret_in = host_tx > eth_rx ? host_tx : eth_rx;
	*ret_out = host_rx > eth_tx ? host_rx : eth_tx;
	return 0;
}
