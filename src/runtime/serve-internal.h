/*
 * serve-internal.h - the wire between the launcher (serve.c) and a
 * serve-mode init (serve-init.c). See serve.h for what it is for.
 *
 * One SOCK_SEQPACKET socketpair; init holds its end at INIT_CONTROL_FD
 * (launch-internal.h).
 * Every packet is one struct serve_msg followed by msg.len payload bytes;
 * fds travel beside it as SCM_RIGHTS. Strings in a payload are NUL-
 * terminated and packed back to back, and the payload holds exactly the
 * strings its op names, nothing more.
 *
 *	launcher -> init                     init -> launcher
 *	SPAWN   cwd, argv[argc], envp[nenv]  REPLY   code 0 + pid, or -errno + reason
 *	        + 3 fds (stdin/out/err)
 *	SPAWN   value = SERVE_SPAWN_TTY,     REPLY   code 0 + pid + 1 fd: the terminal's
 *	        rows, cols; the same strings         master, or -errno + reason
 *	        and no fd
 *	SIGNAL  pid, value = signal          REPLY   code
 *	OPEN    value = mode, path           REPLY   code + 1 fd; WRITE: temp path,
 *	                                             pid = the copier, the fd a socket to it
 *	RENAME  from, to                     REPLY   code (an upload's temp: its result)
 *	UNLINK  path                         REPLY   code (an upload's temp: copier killed)
 *	                                     EXITED  pid, value = wait status
 *
 * Requests are answered in order, one at a time; a REPLY repeats its
 * request's seq. EXITED is unsolicited: init sends one whenever it reaps a
 * child it spawned, so it may come before any REPLY. A failed REPLY's
 * payload is a one-line reason (no errno text: the launcher adds it).
 * Copiers (OPEN WRITE) are children of init too, but never EXITED: their
 * end is the answer to the RENAME of their temporary.
 *
 * Init trusts nothing in a request: every count, length and path is
 * checked on both sides.
 */
#ifndef AGENTBOX_RUNTIME_SERVE_INTERNAL_H
#define AGENTBOX_RUNTIME_SERVE_INTERNAL_H

#include "base/fdpass.h"
#include "base/error.h"
#include "runtime/serve.h"
#include "runtime/spec.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

enum serve_op {
	SERVE_OP_SPAWN = 1,
	SERVE_OP_SIGNAL = 2,
	SERVE_OP_OPEN = 3,
	SERVE_OP_RENAME = 4,
	SERVE_OP_UNLINK = 5,
	SERVE_OP_REPLY = 64,
	SERVE_OP_EXITED = 65,
};

struct serve_msg {
	uint32_t op;   /* enum serve_op */
	uint32_t seq;  /* request number; a REPLY repeats it */
	int32_t code;  /* REPLY: 0 or -errno */
	int32_t pid;   /* SIGNAL, EXITED; SPAWN's REPLY */
	int32_t value; /* SIGNAL: the signal; OPEN: the mode; EXITED: the wait status */
	uint32_t argc; /* SPAWN: strings in argv */
	uint32_t nenv; /* SPAWN: strings in envp */
	uint32_t len;  /* payload bytes after this header */
	uint16_t rows; /* SPAWN with SERVE_SPAWN_TTY: the terminal's size */
	uint16_t cols;
};

/* SPAWN's value: flags. */
#define SERVE_SPAWN_TTY 1u /* a new terminal of the sandbox's devpts on 0-2 */

/* The largest packet either side sends. */
#define SERVE_MSG_MAX (sizeof(struct serve_msg) + SERVE_SPAWN_BYTES_MAX)
/* A REPLY's payload: a temp path (< SPEC_PATH_MAX + 32) or a reason. */
#define SERVE_REPLY_TEXT_MAX ERROR_MSG_MAX
_Static_assert(SERVE_REPLY_TEXT_MAX >= SPEC_PATH_MAX / 2, "a reason names a path");
/* The fds of a SPAWN request. */
#define SERVE_SPAWN_FDS 3

/* The name OPEN WRITE gives its temporary: this prefix and 16 hex digits. */
#define SERVE_UPLOAD_PREFIX	".agentbox-upload-"
#define SERVE_UPLOAD_SUFFIX_LEN 16

/*
 * A copier's exit status: 0 once it has written everything up to EOF, else
 * the errno of the read or write that failed (1..255; anything else is
 * EIO). Killed by SIGKILL, it is taken for the OOM killer's (ENOMEM).
 */
#define SERVE_COPIER_ERRNO_MAX 255

/*
 * A path a request may name: absolute and shorter than SPEC_PATH_MAX
 * (len is what the caller found with strnlen; a NUL ends it, so it holds
 * none). Anything else is -EINVAL on either side.
 */
static inline bool serve_path_is_valid(const char *p, size_t len)
{
	return len > 0 && len < SPEC_PATH_MAX && p[0] == '/';
}

/*
 * The launcher's half of the conversation, kept in struct sandbox.
 * Invariant: live + nexits <= SERVE_CHILDREN_MAX, because every queued
 * exit was a live child; so the queue never overflows, and a spawn is
 * refused (-EAGAIN) once the caller lets exits pile up.
 */
struct serve_exit {
	pid_t pid;
	int status;
};

struct serve_host {
	int fd;	       /* our end of the control socket, or -1 */
	bool gone;     /* EOF seen: init has exited */
	uint32_t seq;  /* of the last request sent */
	unsigned live; /* spawned children whose EXITED has not arrived */
	struct serve_exit exits[SERVE_CHILDREN_MAX]; /* ring of exits not handed out */
	unsigned head, nexits;
};

/*
 * In init, before the close_range() and seccomp: move the control socket
 * (ctl_fd) to INIT_CONTROL_FD and put /dev/null on 0-2, so that init holds
 * nothing of the host a request could reach through /proc/self/fd.
 */
int serve_init_prepare(int ctl_fd, struct error *err);

/*
 * In init, last: answer requests until the launcher closes its end, then
 * exit 0 (1 if the loop itself fails). Returns only if the loop cannot
 * start, with -errno and err filled.
 */
int serve_init_run(struct error *err);

_Static_assert(SERVE_SPAWN_FDS <= FDPASS_MAX, "a spawn's fds fit one message (base/fdpass.h)");

#endif
