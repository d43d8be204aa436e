/* agentbox gc: reclaim cgroups that runs killed with SIGKILL left behind. */
#include "cli/cli.h"
#include "runtime/sandbox.h"

#include <stdio.h>

int verb_gc(int argc, char **argv)
{
	if (argc > 1 && cli_is_help(argv[1])) {
		puts("usage: agentbox gc\n\n"
		     "Remove the cgroups of sandboxes whose launcher died (their processes\n"
		     "are already gone with their pid namespace). Live sandboxes are never\n"
		     "touched. Every `agentbox run` does this too.");
		return 0;
	}
	if (argc > 1)
		return cli_fail("gc: unexpected argument '%s'", argv[1]);
	struct error err = {0};
	unsigned n = 0;
	if (sandbox_gc(&n, &err) < 0)
		return cli_fail("gc: %s", err.msg);
	printf("reclaimed %u leftover sandbox group%s\n", n, n == 1 ? "" : "s");
	return 0;
}
