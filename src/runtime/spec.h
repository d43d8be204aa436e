/*
 * spec.h - what a sandbox is asked to be: command, limits, mounts, env.
 *
 * A spec is plain data. The CLI (and later the daemon) fills one, calls
 * spec_validate() and only then creates anything, so bad input is refused
 * before a cgroup, mount or process exists.
 *
 * Ownership: a spec does not own its strings. argv, env, paths and volume
 * strings must outlive every use of the spec (the CLI points them at its
 * own argv). spec_release() frees only the arrays the spec_add_*() helpers
 * allocated.
 *
 * Inside every sandbox (the contract the probes and docs rely on):
 *   - the command runs as uid 1000, gid 1000 ("sandbox"), with no
 *     capabilities, no_new_privs, and the seccomp and Landlock policies;
 *     or, with user SPEC_USER_IDS, as spec->uid and spec->gid of the
 *     sandbox's user namespace (an image's User), the same otherwise;
 *     or, with user SPEC_USER_ROOT, as uid 0 of the sandbox's user
 *     namespace (its own host range, never the host's root) with only
 *     PRIVS_ROOT_CAPS (privs.h), and the same policies;
 *   - / is read-only; /tmp, /dev/shm and the workdir are writable and share
 *     one tmpfs of disk_bytes; rw volumes are writable too; spec->files
 *     are there, owned by the command's user, when the command starts;
 *   - with an image_tree, / is writable instead: an overlay whose upper
 *     layer lives in that same tmpfs, so it counts against disk_bytes
 *     (a full disk is ENOSPC), and vanishes with the sandbox;
 *   - the environment is exactly PATH, HOME (= workdir), LANG, and the
 *     caller's --env values, which win over the defaults;
 *   - the hostname is "agentbox"; the only network interface is lo, unless
 *     the launcher attaches a network (network_attach below): then eth0.
 */
#ifndef AGENTBOX_RUNTIME_SPEC_H
#define AGENTBOX_RUNTIME_SPEC_H

#include "base/error.h"
#include "core/limits.h" /* SPEC_*: the limits and defaults of every spec */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The identity the command runs as, inside the sandbox's user namespace. */
#define SANDBOX_UID	 1000
#define SANDBOX_GID	 1000
#define SANDBOX_HOSTNAME "agentbox"
/*
 * /etc/resolv.conf's name server (a default root). A sandbox with a network
 * has every DNS query answered by its resolver outside, whatever the address
 * (network/table.h); this one is egress/policy.h's EGRESS_PROXY_ADDRESS,
 * which no sandbox holds. Without a network it is unreachable.
 */
#define SANDBOX_RESOLVER "10.231.0.1"

struct volume {
	const char *host;   /* absolute host path: a directory, a file or a FIFO */
	const char *target; /* absolute path inside the sandbox */
	bool read_only;
	/*
	 * host is a file system image (loopfs.h): its file system is mounted
	 * at target, its root (owned by LOOPFS_ROOT_UID on disk) owned by the
	 * sandbox user. Set by launchers, never by a user's --volume.
	 */
	bool image;
};

/* A file created in the sandbox before the command starts, owned by it. */
/*
 * A file the sandbox starts with: data[0..len), or, when from_fd, len
 * bytes of fd from offset (a task's input, kept on the host's disk: init
 * copies it in, so its pages are the sandbox's). fd is the caller's, at
 * least SPEC_FILE_FD_MIN (init's own fds are below), and may be shared by
 * several files (the members of one tar); init reads it before the
 * command exists, and closes it once its last file is written.
 */
#define SPEC_FILE_FD_MIN 16
struct spec_file {
	const char *path; /* absolute, under the workdir or /tmp */
	const char *data;
	size_t len;
	bool from_fd;
	int fd;
	uint64_t offset;
};

enum network_mode {
	NETWORK_NONE = 0, /* a private net namespace with only lo */
};

/* Who the command runs as, inside the sandbox's user namespace. */
enum spec_user {
	SPEC_USER_SANDBOX = 0, /* SANDBOX_UID/GID, no capabilities: the default */
	SPEC_USER_ROOT,	       /* uid 0 of the namespace, PRIVS_ROOT_CAPS only */
	SPEC_USER_IDS,	       /* spec->uid/gid (an image's User), no capabilities */
};

struct spec {
	const char *const *argv; /* NULL-terminated; argv[0] is looked up in PATH */
	size_t argc;

	/*
	 * Serve mode (serve.h): init runs no command of its own but stays up
	 * and, on the launcher's request, spawns processes and opens files
	 * inside. argv may be NULL and is not run; timeout_ms is ignored (the
	 * launcher decides when the sandbox ends); files are placed as usual;
	 * an OOM kills the process that grew, not the whole sandbox.
	 */
	bool serve;
	/*
	 * Hand the launcher the workdir and /tmp: once they are mounted and
	 * before the command runs, init sends the launcher an O_PATH fd of
	 * each, which keep the data tmpfs readable after the sandbox is gone
	 * (sandbox_take_dirs(): a task's artifacts). Not with serve.
	 */
	bool export_dirs;
	uint64_t memory_bytes; /* memory limit; swap is always 0 */
	uint64_t cpu_milli;    /* CPU quota in thousandths of a CPU */
	uint64_t pids;	       /* most tasks alive at once */
	uint64_t disk_bytes;   /* size of the tmpfs behind /tmp, /dev/shm, workdir */
	uint64_t timeout_ms;   /* wall clock; 0 = none */

	const char **env; /* "KEY=VALUE" from the caller; spec-owned array */
	size_t nenv;

	struct volume *volumes; /* spec-owned array */
	size_t nvolumes;

	const struct spec_file *files; /* caller-owned array */
	size_t nfiles;

	const char *workdir; /* absolute; created empty and writable */
	/*
	 * Where the command starts (an image's WorkingDir): absolute; NULL =
	 * workdir. Made (as the command's user) when the root does not have it.
	 */
	const char *cwd;
	const char *rootfs; /* NULL = host /usr + synthesized /etc */
	/*
	 * An image's tree as the image store unpacks it (image/unpack.h): a
	 * host directory whose files belong to UIDRANGE_IMAGE_BASE + their id
	 * in the image. / is then an overlay: the tree as its lower layer,
	 * through an id-mapped mount that shows those ids as 0..65535 inside,
	 * read-only (the shared tree is never written), and an upper layer in
	 * the disk_bytes tmpfs. /etc/hosts, /etc/hostname and
	 * /etc/resolv.conf are the sandbox's own, written over the image's;
	 * everything else of /etc is the image's. NULL: none. Not with rootfs.
	 */
	const char *image_tree;
	enum spec_user user;
	uid_t uid; /* with SPEC_USER_IDS: 1..SPEC_IDS-1 inside (0 is SPEC_USER_ROOT's) */
	gid_t gid; /* with SPEC_USER_IDS: 0..SPEC_IDS-1 inside */
	enum network_mode network;

	/*
	 * Set by a launcher whose sandbox has a network: sandbox_start() then
	 * makes the network namespace with the others, and calls this once
	 * the ids are mapped and before anything runs inside, with init's
	 * pidfd and the sandbox's uid-range slot, to plumb it (network/link.h).
	 * A failure fails the start. NULL: only lo.
	 */
	int (*network_attach)(void *arg, int pidfd, unsigned slot, struct error *err);
	void *network_arg;
};

/* Fill spec with the defaults above; argv stays NULL. */
void spec_init(struct spec *spec);

/* Free the arrays allocated by spec_add_*(). The spec can be reused. */
void spec_release(struct spec *spec);

/*
 * Append "KEY=VALUE" (checked by spec_validate). 0 or -ENOMEM, or -E2BIG
 * past SPEC_ENV_MAX + SPEC_ENV_ADDED_MAX (a caller bounds its user's own
 * to SPEC_ENV_MAX).
 */
int spec_add_env(struct spec *spec, const char *kv);

/*
 * Parse "HOST_DIR:SANDBOX_DIR[:ro|:rw]" and append it. The string must
 * outlive the spec; it is split in place. 0 or -EINVAL (err says why).
 */
int spec_add_volume(struct spec *spec, char *arg, struct error *err);

/*
 * Who owns what the command's user owns (the workdir, a volume's files):
 * SANDBOX_UID/GID, or spec->uid/gid with SPEC_USER_IDS. Root's (SPEC_USER_
 * ROOT) are the sandbox user's too: root may write them anyway.
 */
void spec_command_ids(const struct spec *spec, uid_t *ret_uid, gid_t *ret_gid);

/*
 * Check every field against the limits above and the paths against the
 * file system (the rootfs and volume sources must be directories).
 * 0, or -EINVAL/-ENOENT/... with err naming the field.
 */
int spec_validate(const struct spec *spec, struct error *err);

/*
 * Build the sandbox environment: PATH, HOME, LANG, then spec->env (later
 * entries replace earlier ones with the same key). Returns a NULL-
 * terminated array in one allocation, to free() with one call.
 */
char **spec_build_env(const struct spec *spec);

#endif
