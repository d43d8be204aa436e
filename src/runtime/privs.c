#include "runtime/privs.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int last_cap(void)
{
	/* Probe instead of trusting headers: the running kernel may know more caps. */
	int cap = CAP_LAST_CAP;
	while (prctl(PR_CAPBSET_READ, cap + 1, 0, 0, 0) >= 0)
		cap++;
	return cap;
}

int privs_drop(uid_t uid, gid_t gid, struct error *err)
{
	int top = last_cap();
	for (int cap = 0; cap <= top; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return error_set_errno(err, errno, "drop bounding capability %d", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return error_set_errno(err, errno, "clear ambient capabilities");
	/* No root magic ever again: exec of uid 0 or setuid-root gains nothing. */
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return error_set_errno(err, errno, "lock securebits");
	if (setresgid(gid, gid, gid) < 0)
		return error_set_errno(err, errno, "setresgid %u", (unsigned)gid);
	if (setresuid(uid, uid, uid) < 0)
		return error_set_errno(err, errno, "setresuid %u", (unsigned)uid);
	/* Leaving uid 0 cleared the sets already; say so explicitly all the same. */
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {{0}};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return error_set_errno(err, errno, "clear capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return error_set_errno(err, errno, "set no_new_privs");
	return 0;
}

int privs_keep_root(struct error *err)
{
	int top = last_cap();
	for (int cap = 0; cap <= top; cap++)
		if (!(cap < 64 && (PRIVS_ROOT_CAPS & (1ULL << cap))) &&
		    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return error_set_errno(err, errno, "drop bounding capability %d", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return error_set_errno(err, errno, "clear ambient capabilities");
	/* root's rules, locked: exec as uid 0 gets the bounding set (these caps),
	 * a switch away from uid 0 clears them, nothing raises ambient ones */
	unsigned long bits = SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return error_set_errno(err, errno, "lock securebits");
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {{0}};
	for (int i = 0; i < 2; i++)
		data[i].effective = data[i].permitted = (uint32_t)(PRIVS_ROOT_CAPS >> (32 * i));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return error_set_errno(err, errno, "set capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return error_set_errno(err, errno, "set no_new_privs");
	return 0;
}

int privs_set_rlimits(const struct spec *spec, struct error *err)
{
	uint64_t fsize = spec->disk_bytes * 2;
	if (fsize < SANDBOX_FSIZE_MIN)
		fsize = SANDBOX_FSIZE_MIN;
	const struct {
		int resource;
		const char *name;
		struct rlimit lim;
	} limits[] = {
	    {RLIMIT_CORE, "core", {0, 0}},
	    {RLIMIT_NOFILE, "nofile", {SANDBOX_NOFILE_SOFT, SANDBOX_NOFILE_HARD}},
	    {RLIMIT_FSIZE, "fsize", {fsize, fsize}},
	    {RLIMIT_MEMLOCK, "memlock", {SANDBOX_MEMLOCK, SANDBOX_MEMLOCK}},
	    {RLIMIT_RTPRIO, "rtprio", {0, 0}},
	};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (setrlimit(limits[i].resource, &limits[i].lim) < 0)
			return error_set_errno(err, errno, "set rlimit %s", limits[i].name);
	return 0;
}
