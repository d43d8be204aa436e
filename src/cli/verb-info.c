/* agentbox info: which isolation layers this host gives a sandbox, and its sandboxes' links. */
#include "cli/cli.h"
#include "runtime/host.h"

#include <stdio.h>
#include <string.h>

/*
 * The links of the sandboxes with a network in this network namespace
 * (network/link.h names their host ends ab<mode><slot>), and the bytes
 * each carried, from /proc/self/net/dev: what the sandbox received is what
 * its host end sent.
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
		if (!colon || (strncmp(name, "abo", 3) != 0 && strncmp(name, "aba", 3) != 0) ||
		    sscanf(colon + 1, "%llu %*u %*u %*u %*u %*u %*u %*u %llu", &rx, &tx) != 2)
			continue;
		*colon = '\0';
		if (n++ == 0)
			printf("sandbox links:\n");
		printf("  %-12s %-5s in %llu bytes, out %llu bytes\n", name,
		       name[2] == 'o' ? "open" : "allow", tx, rx);
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
