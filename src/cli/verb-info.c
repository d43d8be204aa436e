/* agentbox info: which isolation layers this host gives a sandbox. */
#include "cli/cli.h"
#include "runtime/host.h"

#include <stdio.h>
#include <string.h>

int verb_info(int argc, char **argv)
{
	if (argc > 1 && cli_is_help(argv[1])) {
		puts("usage: agentbox info\n\n"
		     "Print the isolation layers this host provides to sandboxes.\n"
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
	return f.user_namespaces && f.cgroup_version && f.seccomp ? 0 : EXIT_AGENTBOX;
}
