#include "runtime/host.h"

#include "base/fileio.h"
#include "runtime/cgroup.h"
#include "runtime/landlock.h"
#include "seccomp/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

void host_probe(struct host_features *ret)
{
	struct host_features f = {0};
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(f.kernel, sizeof(f.kernel), "%s %s", u.sysname, u.release);

	uint64_t max_userns = 0;
	f.user_namespaces =
	    read_u64_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", &max_userns) == 0 &&
	    max_userns > 0;

	struct error err = {0};
	struct cgroup_root *root;
	if (cgroup_root_open(&root, &err) == 0) {
		f.cgroup_version = cgroup_root_version(root);
		snprintf(f.cgroup_root, sizeof(f.cgroup_root), "%s", cgroup_root_describe(root));
		cgroup_root_free(root);
	} else {
		snprintf(f.cgroup_error, sizeof(f.cgroup_error), "%s", err.msg);
	}

	f.landlock_abi = landlock_abi();
	/* PR_GET_SECCOMP answers 0 when seccomp exists and we are not filtered. */
	f.seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
	f.seccomp_instructions = seccomp_filter_len();
	*ret = f;
}
