/* agentbox info: which isolation layers this host gives a sandbox, and its sandboxes' links. */
#include "cli/cli.h"
#include "network/link.h" /* its names and groups only: nothing of libmnl */
#include "runtime/host.h"

#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of /sys/class/net/<name>/<what> as a number, or -1. */
static long sys_net(const char *name, const char *what)
{
	char path[128], text[32];
	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", name, what);
	FILE *f = fopen(path, "re");
	long v = f && fgets(text, sizeof(text), f) ? (long)strtoul(text, NULL, 0) : -1;
	if (f)
		fclose(f);
	return v;
}

/*
 * The mode of the sandbox link name: its device group, from sysfs when
 * sysfs is this network namespace's (the link's index there is ours),
 * else what its name says; NULL for a parked link (a pooled sandbox's,
 * with no mode yet).
 */
static const char *link_mode(const char *name)
{
	long index = sys_net(name, "ifindex"), group = sys_net(name, "netdev_group");
	bool known = index > 0 && group >= 0 && (unsigned)index == if_nametoindex(name);
	if (known && (unsigned long)group == NET_GROUP_OPEN)
		return "open";
	if (known && (unsigned long)group == NET_GROUP_ALLOW)
		return "allow";
	if (known && (unsigned long)group == NET_GROUP_PARKED)
		return NULL;
	return name[2] == 'o' ? "open" : name[2] == 'a' ? "allow" : "?";
}

/*
 * The links of the sandboxes with a network in this network namespace
 * (network/link.h names their host ends ab<o|a|p><slot>), and the bytes
 * each carried, from /proc/self/net/dev: what the sandbox received is what
 * its host end sent. Links parked for the warm pool are not shown.
 */
static void print_links(void)
{
	FILE *f = fopen("/proc/self/net/dev", "re");
	char line[512];
	unsigned n = 0;
	unsigned long long in_all = 0, out_all = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char *name = line + strspn(line, " "), *colon = strchr(name, ':');
		unsigned long long rx, tx;
		if (!colon || strncmp(name, NET_IFNAME_PREFIX, strlen(NET_IFNAME_PREFIX)) != 0 ||
		    !name[2] || !strchr("oap", name[2]) ||
		    sscanf(colon + 1, "%llu %*u %*u %*u %*u %*u %*u %*u %llu", &rx, &tx) != 2)
			continue;
		*colon = '\0';
		const char *mode = link_mode(name);
		if (!mode)
			continue;
		if (n++ == 0)
			printf("sandbox links:\n");
		printf("  %-12s %-5s in %llu bytes, out %llu bytes\n", name, mode, tx, rx);
		in_all += tx;
		out_all += rx;
	}
	if (f)
		fclose(f);
	if (n == 0)
		printf("sandbox links:    none (no sandbox with a network runs here)\n");
	else
		printf("  %u links, in %llu bytes, out %llu bytes\n", n, in_all, out_all);
}

int verb_info(int argc, char **argv)
{
	if (argc > 1 && cli_is_help(argv[1])) {
		puts("usage: agentbox info\n\n"
		     "Print the isolation layers this host provides to sandboxes, and the\n"
		     "network links of the sandboxes that have one, with their bytes.\n"
		     "Required layers that are missing are marked 'MISSING'.");
		return 0;
	}
	if (argc > 1)
		return cli_fail("info: unexpected argument '%s'", argv[1]);
	struct host_features f;
	host_probe(&f);
	printf("kernel:           %s\n", f.kernel);
	printf("user namespaces:  %s\n", f.user_namespaces ? "yes" : "MISSING");
	printf("namespaces:       user pid mount ipc uts net cgroup\n");
	if (f.cgroup_version)
		printf("cgroups:          v%d (%s)\n", f.cgroup_version, f.cgroup_root);
	else
		printf("cgroups:          MISSING (%s)\n", f.cgroup_error);
	printf("seccomp:          %s (%u BPF instructions)\n", f.seccomp ? "yes" : "MISSING",
	       f.seccomp_instructions);
	if (f.landlock_abi > 0)
		printf("landlock:         yes (ABI %d%s)\n", f.landlock_abi,
		       f.landlock_abi >= 6 ? ", with socket and signal scoping" : "");
	else
		printf("landlock:         no (the other layers still apply)\n");
	print_links();
	return f.user_namespaces && f.cgroup_version && f.seccomp ? 0 : EXIT_AGENTBOX;
}
