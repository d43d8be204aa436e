#include "runtime/landlock.h"

#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The kernel's Landlock UAPI, as far as ABI 6. Spelled out here because
 * build hosts may ship older headers than the kernels we run on.
 */
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH	  1

#define LL_FS_EXECUTE	  (1ULL << 0)
#define LL_FS_WRITE_FILE  (1ULL << 1)
#define LL_FS_READ_FILE	  (1ULL << 2)
#define LL_FS_READ_DIR	  (1ULL << 3)
#define LL_FS_REMOVE_DIR  (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR	  (1ULL << 6)
#define LL_FS_MAKE_DIR	  (1ULL << 7)
#define LL_FS_MAKE_REG	  (1ULL << 8)
#define LL_FS_MAKE_SOCK	  (1ULL << 9)
#define LL_FS_MAKE_FIFO	  (1ULL << 10)
#define LL_FS_MAKE_BLOCK  (1ULL << 11)
#define LL_FS_MAKE_SYM	  (1ULL << 12)
#define LL_FS_REFER	  (1ULL << 13) /* ABI 2 */
#define LL_FS_TRUNCATE	  (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV	  (1ULL << 15) /* ABI 5 */

#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL		      (1ULL << 1) /* ABI 6 */

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;	     /* ABI 6 */
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_FS_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define LL_FS_ABI1 ((LL_FS_MAKE_SYM << 1) - 1)

int landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	return v < 0 ? 0 : (int)v;
}

static uint64_t fs_rights_for(int abi)
{
	uint64_t all = LL_FS_ABI1;
	if (abi >= 2)
		all |= LL_FS_REFER;
	if (abi >= 3)
		all |= LL_FS_TRUNCATE;
	if (abi >= 5)
		all |= LL_FS_IOCTL_DEV;
	return all;
}

/* Rights Landlock accepts on a rule for a single file (not a directory). */
#define LL_FS_FILE                                                                                 \
	(LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

static int add_rule(int ruleset, const char *path, uint64_t access)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		access &= LL_FS_FILE;
	struct ll_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -errno;
	return 0;
}

int landlock_apply(const char *const *writable, size_t n, struct error *err)
{
	int abi = landlock_abi();
	if (abi <= 0)
		return -EOPNOTSUPP;
	uint64_t handled = fs_rights_for(abi);
	struct ll_ruleset_attr attr = {.handled_access_fs = handled};
	size_t attr_size = sizeof(uint64_t);
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
		attr_size = sizeof(attr);
	}
	_cleanup_close_ int ruleset =
	    (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0)
		return error_set_errno(err, errno, "landlock: create ruleset");

	/* Device nodes: use them, never create anything in /dev. */
	uint64_t dev = LL_FS_WRITE_FILE | (handled & (LL_FS_TRUNCATE | LL_FS_IOCTL_DEV));
	/* Nothing under /proc is writable: /proc/<pid>/mem would equal ptrace. */
	int r;
	if ((r = add_rule(ruleset, "/", LL_FS_READ)) < 0 ||
	    (r = add_rule(ruleset, "/dev", dev)) < 0)
		return error_set_errno(err, -r, "landlock: base rules");
	for (size_t i = 0; i < n; i++)
		if ((r = add_rule(ruleset, writable[i], handled)) < 0)
			return error_set_errno(err, -r, "landlock: rule for %s", writable[i]);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return error_set_errno(err, errno, "landlock: no_new_privs");
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		return error_set_errno(err, errno, "landlock: restrict_self");
	return 0;
}
