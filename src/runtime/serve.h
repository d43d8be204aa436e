/*
 * serve.h - an interactive sandbox: its init stays up and, on request,
 * runs commands and opens files inside.
 *
 * A spec with serve = true starts a sandbox whose init runs no command of
 * its own. Once the isolation is complete (pivot_root, Landlock, the drop
 * to uid 1000, seccomp: exactly as for a command), init waits for
 * requests from the launcher on a private SOCK_SEQPACKET socketpair and
 * answers each. Everything it starts is its child, so it inherits every
 * restriction; everything it opens is opened with the sandbox user's
 * rights in the sandbox's own view of the file system. The host never
 * resolves a sandbox path itself.
 *
 * The sandbox ends when init dies (OOM, say), when the launcher calls
 * sandbox_kill() or dies, exactly as for a command: sandbox_wait_io()
 * reports init's own end. In serve mode the cgroup is not an OOM group: an
 * OOM kills the process that grew, not the sandbox.
 *
 * Requests are synchronous and come from one thread (the launcher's): each
 * call blocks until init has answered (a frozen init answers only once
 * thawed). Exit reports of children arrive asynchronously on the same
 * socket; the request calls queue them, and sandbox_next_exit() hands them
 * out. The launcher must keep reading them (init waits to send when the
 * socket is full). Paths in requests are absolute, under SPEC_PATH_MAX
 * bytes, else -EINVAL; init checks them again.
 *
 * When the launcher closes its end, init exits 0 and the sandbox ends with
 * it. Every request after init has gone returns -EPIPE.
 */
#ifndef AGENTBOX_RUNTIME_SERVE_H
#define AGENTBOX_RUNTIME_SERVE_H

#include "base/error.h"
#include "runtime/sandbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes of argv + env + cwd in one spawn request (NULs included). */
#define SERVE_SPAWN_BYTES_MAX (128 * 1024)
/* Children of init running at once through sandbox_spawn(). */
#define SERVE_CHILDREN_MAX 256
/* Uploads (SANDBOX_OPEN_WRITE) whose copier runs at once; one more is -EAGAIN. */
#define SERVE_UPLOADS_MAX 64
/*
 * How long sandbox_rename() of an upload's temporary waits for its copier
 * to write what it was sent, once no more may come; then the copier is
 * killed and the rename is -ETIMEDOUT. Only a copier stopped from inside
 * (SIGSTOP) or stuck takes that long: close the fd and wait for its EOF
 * first, and the wait is nil.
 */
#define SERVE_UPLOAD_FINISH_MS 2000
/* The name (comm) of an upload's copier, as ps shows it inside and out. */
#define SERVE_COPIER_NAME "agentbox-upload"

struct serve_spawn {
	const char *const *argv;	    /* NULL-terminated; argv[0] looked up in envp's PATH */
	const char *const *envp;	    /* NULL-terminated: the whole environment */
	const char *cwd;		    /* absolute, inside the sandbox */
	int stdin_fd, stdout_fd, stderr_fd; /* host fds, handed to the child (not closed here) */
};

/*
 * Start a command as a child of init, in its own session and process
 * group, with default signal dispositions and nothing blocked, the three
 * fds on 0-2, in cwd. Returns once it has been exec'd: *ret_pid is its pid
 * inside the sandbox. -ENOENT (not found, or no cwd), -EACCES, ... when it
 * could not be exec'd, -E2BIG over SERVE_SPAWN_BYTES_MAX, -EAGAIN at
 * SERVE_CHILDREN_MAX (children running plus exits not yet taken with
 * sandbox_next_exit()), with err saying which; -EPIPE when init is gone.
 */
int sandbox_spawn(struct sandbox *sb, const struct serve_spawn *req, pid_t *ret_pid,
		  struct error *err);

/* A terminal's rows and columns: 1 up to this. */
#define SERVE_TTY_DIM_MAX SPEC_TTY_DIM_MAX

/*
 * As sandbox_spawn(), on a terminal instead of req's three fds (which are
 * not used): init opens a new pseudo-terminal of the sandbox's own devpts
 * (/dev/pts, its own instance: no host terminal is reachable from it),
 * sizes it rows x cols (1..SERVE_TTY_DIM_MAX), and the child, a session
 * leader, takes its slave as its controlling terminal on 0-2. The master
 * comes back in *ret_master (O_CLOEXEC, blocking, the caller's): what is
 * written to it is typed (0x03 is Ctrl-C: the line discipline signals the
 * foreground process group), what is read from it is the terminal's
 * output; TIOCSWINSZ on it resizes (SIGWINCH to the foreground group).
 * When the last holder of the master closes it, the session gets SIGHUP.
 */
int sandbox_spawn_tty(struct sandbox *sb, const struct serve_spawn *req, unsigned rows,
		      unsigned cols, pid_t *ret_pid, int *ret_master, struct error *err);

/*
 * Send sig to the process group of pid, a child from sandbox_spawn() that
 * init has not reaped yet (else -ESRCH). 0 or -errno.
 */
int sandbox_signal(struct sandbox *sb, pid_t pid, int sig, struct error *err);

/*
 * The socket init reports exits on: readable when sandbox_next_exit() may
 * have something (it may also have been queued by a request: call
 * sandbox_next_exit() after every request too). -1 for a sandbox not in
 * serve mode. It stays owned by sb.
 */
int sandbox_control_fd(const struct sandbox *sb);

/*
 * One exit of a spawned child: its pid and wait status. Never blocks:
 * -EAGAIN when none is there yet, -EPIPE when none is left and init has
 * gone (stop watching the control fd then), -EOPNOTSUPP when not serving.
 */
int sandbox_next_exit(struct sandbox *sb, pid_t *ret_pid, int *ret_status);

enum sandbox_open_mode {
	SANDBOX_OPEN_READ,  /* an existing regular file, O_RDONLY */
	SANDBOX_OPEN_WRITE, /* an upload: a socket to a copier into a new temporary file */
	SANDBOX_OPEN_DIR,   /* an existing directory, O_RDONLY|O_DIRECTORY, for listing */
};

/*
 * Open path (absolute, as the sandbox sees it) inside the sandbox, as its
 * user, and hand the fd out (O_CLOEXEC). Only regular files and
 * directories, never on /proc: a FIFO, socket or device gives -EINVAL
 * without blocking, a procfs path -EACCES. A write outside the writable
 * places is -EROFS or -EACCES. Symlinks resolve in the sandbox's view.
 *
 * SANDBOX_OPEN_WRITE is an upload. The file is a fresh temporary (mode
 * 0644, O_EXCL) in path's directory (its parents created), whose
 * absolute path goes to temp (size >= SPEC_PATH_MAX + 32); its name adds
 * 34 bytes to path, and must stay under SPEC_PATH_MAX too (else
 * -ENAMETOOLONG). The caller never gets the file: the fd is its end of an
 * AF_UNIX stream socket, and a copier, a child of init named
 * SERVE_COPIER_NAME, writes what comes out of the other end into the
 * file. The copier lives in the sandbox's cgroup, so the file's pages
 * (memory, on the sandbox's tmpfs) are charged to the sandbox: its memory
 * limit holds for uploads. It is made the first the OOM killer takes in
 * the sandbox (oom_score_adj 1000, written from here through the host's
 * /proc), so an upload the memory cannot hold fails and init and the
 * sandbox's own processes live on; an open that cannot do that fails
 * (nothing is left). Only SIGKILL and SIGSTOP reach the copier (it runs
 * as the sandbox user, with every other signal blocked); a sandbox that
 * sends them fails its own upload. -EAGAIN with SERVE_UPLOADS_MAX
 * copiers running.
 *
 * Then: write the content into the fd (the copier only reads it; EPIPE:
 * the copier has ended, so it failed). Shut down its sending side and
 * wait until it reads EOF: that comes once the copier has ended and init
 * has taken its status, so the rename that follows does not make init
 * wait. Then sandbox_rename(temp, path) commits the upload: what was sent
 * before it is the file (a rename without that wait, the fd open or
 * closed, makes init wait for the copier instead), or sandbox_unlink(temp)
 * gives it up (the copier is killed). A copier that failed has removed
 * the temporary already (so its memory is given back at once), and the
 * rename answers with its error:
 * -ENOSPC (the disk, disk_mb, is full), -EFBIG (over the file size
 * limit), -ENOMEM (it was SIGKILLed: the OOM killer, as the sandbox's
 * memory could not hold the file; or a kill from inside), -ETIMEDOUT (it
 * did not finish within SERVE_UPLOAD_FINISH_MS of the rename and was
 * killed), -EIO.
 */
int sandbox_open(struct sandbox *sb, const char *path, enum sandbox_open_mode mode, int *ret_fd,
		 char *temp, size_t temp_size, struct error *err);

/*
 * rename(from, to) inside the sandbox; to may not be a directory (-EISDIR).
 * When from is the temporary of an upload, the upload ends first: nothing
 * more may be sent, what was sent is written (the copier is waited for, at
 * most SERVE_UPLOAD_FINISH_MS), and a failed upload is its error (see
 * sandbox_open()). 0 or -errno.
 */
int sandbox_rename(struct sandbox *sb, const char *from, const char *to, struct error *err);

/*
 * unlink(path) inside the sandbox: not a directory (-EISDIR). When path is
 * the temporary of an upload, its copier is killed first; the temporary
 * of a failed upload is gone already (0). 0 or -errno.
 */
int sandbox_unlink(struct sandbox *sb, const char *path, struct error *err);

/*
 * Freeze (true) or thaw the whole sandbox, init included, with the cgroup
 * freezer (v2 cgroup.freeze, v1 freezer.state). Freezing returns once the
 * kernel reports every task frozen: -ETIMEDOUT after 2 s (still asked to
 * freeze). -EOPNOTSUPP on v1 without the freezer hierarchy. Requests wait
 * while frozen. 0 or -errno.
 */
int sandbox_freeze(struct sandbox *sb, bool frozen, struct error *err);

/*
 * The upper layer of a served image's root (spec.h: image_tree): its
 * directory in the sandbox's disk tmpfs, which init keeps open and no
 * path reaches, as an fd of ours (O_RDONLY | O_DIRECTORY | O_CLOEXEC),
 * taken from init with pidfd_getfd(). Its files belong to the sandbox's
 * host id range. For a commit (image/commit.h): freeze the sandbox first
 * for a snapshot that holds still. -ENOENT without an image (or not
 * serving), -ESRCH once ended, or -errno.
 */
int sandbox_upper(struct sandbox *sb, int *ret_fd, struct error *err);

/* The first host id of the sandbox's range (runtime/uidrange.h): uid 0 inside. */
uid_t sandbox_id_base(const struct sandbox *sb);

/* The cgroup's OOM kill count so far (cgroup_read_stats()). 0 or -errno (-ESRCH once ended). */
int sandbox_oom_kills(struct sandbox *sb, uint64_t *ret);

/* init's pid on the host. */
pid_t sandbox_init_pid(const struct sandbox *sb);

#endif
