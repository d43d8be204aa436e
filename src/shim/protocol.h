/*
 * protocol.h - the files and the socket protocol between agentboxd and
 * agentbox-shim, the supervisor of one interactive sandbox.
 *
 * A shim starts one sandbox in serve mode (runtime/serve.h), keeps it for
 * its whole life and outlives the daemon: a daemon that dies and comes
 * back finds the shim by its directory and talks to it again.
 *
 *	agentbox-shim SANDBOX_DIR        (absolute; fd 3 = the held lock)
 *
 * The daemon's side of the socket is client.h; the shim's exit statuses
 * are in its main.c.
 *
 * The directory, <state>/sandboxes/<id>/ (0700, files 0600):
 *   sandbox.json  written by the daemon before it starts the shim:
 *                 {"id": "...", "expires_at": ms or 0 (none), "spec": {...},
 *                  "egress": {...}, "park_network": b}
 *                 spec as for a task (limits, env), without command/files;
 *                 park_network: a pooled sandbox whose link is made ahead
 *                 (agentbox-net park, runtime/nethelper.h)
 *   lock          flock'ed by the shim for as long as it lives (inherited
 *                 as fd 3, like a task supervisor's)
 *   shim          "<pid> <start time>\n" of the shim
 *   shim.sock     the shim's SOCK_SEQPACKET listening socket
 *   shim.log      the shim's own complaints
 *   procs/<pid>.out, procs/<pid>.err   output of each process run by exec,
 *                 capped at SHIM_OUTPUT_CAP bytes each, and at
 *                 SHIM_OUTPUT_TOTAL_CAP for all of them together (then
 *                 truncated)
 *   procs/<pid>.json   written (atomically) when the process has ended:
 *                 {"pid", "command": [..], "exit_code", "signal",
 *                  "oom_killed", "timed_out", "duration_ms", "truncated",
 *                  "started_at", "ended_at"}
 *                 exit_code is the exit status, or 128+N when signal N
 *                 ended it ("signal": N, else null); a process still
 *                 running when the sandbox ends is recorded as SIGKILLed.
 *                 It has ended once it has exited and both its stdout and
 *                 stderr reached end of file, or SHIM_DRAIN_GRACE_MS after
 *                 its exit if something it left behind holds them open
 *                 (they are closed then: that one writes into a broken
 *                 pipe). Only the last SHIM_PROCS_KEPT ended processes
 *                 keep their files; a pid used again replaces them.
 *   end.json      written (atomically) as the sandbox ends, before the
 *                 shim lets go of the lock:
 *                 {"reason": "expired"|"deleted"|"died"|"failed"|"stopped",
 *                  "detail": "...", "time": ms}
 *                 "stopped": the shim got SIGTERM, SIGINT or SIGHUP (the
 *                 machine or the daemon's service manager stopping it);
 *                 "deleted" comes only from a "stop" request.
 *
 * Readiness: the shim writes one line to fd 4, if open, then closes it:
 * "ok\n" once the sandbox runs and shim.sock listens, else
 * "error: <message>\n" (and exits 1).
 *
 * The socket: one request per connection, then that request's replies on
 * the same connection. Every message is one packet of JSON text, at most
 * SHIM_MSG_MAX bytes; a reply that carries an fd carries it as SCM_RIGHTS
 * with its packet. (A packet that large needs a send buffer above the
 * usual default: both ends raise theirs, see shim_packet_prepare().) An
 * error reply, to any request:
 *	{"type": "error", "errno": E, "message": "..."}
 * The shim never waits for a client: a request must come within
 * SHIM_REQUEST_TIMEOUT_MS of the connection, a connection beyond
 * SHIM_CONNS_MAX is closed at once, a packet a client has no room for is
 * dropped if it is an "output" notice (one is waiting unread already) and
 * kept until there is room if it is the last one. After its request a
 * client only reads: a packet from it, or its shutdown of its sending
 * side, ends the connection (a watch with it). The fields of a request
 * are checked strictly: an unknown field, a wrong type or a size over its
 * limit is EINVAL naming the field; an fd with any request but exec too.
 *
 * Requests, and their replies:
 *   {"op": "exec", "command": [..], "env": ["K=V", ..] (the whole
 *    environment), "cwd": "/workspace", "timeout_ms": N (0 = none)}
 *	  only command is required: env defaults to the sandbox's own (the
 *	  spec's env over PATH, HOME, LANG), cwd to /workspace; the sizes of
 *	  command, env and cwd together as in SERVE_SPAWN_BYTES_MAX (E2BIG)
 *	  stdin: one fd may come with the packet (else /dev/null)
 *	  -> {"type": "started", "pid": N}
 *	  then, while the connection stays open: {"type": "output"} whenever
 *	  procs/<pid>.out or .err grew (coalesced, at most one per
 *	  SHIM_NOTICE_MS: read the files from where you stopped), and last
 *	  {"type": "exit", ...procs/<pid>.json...} (its command abbreviated
 *	  as in "processes" if the whole would not fit a packet).
 *	  Closing the connection does not touch the process. A command that
 *	  cannot be run is an error reply: ENOENT (not found), EACCES, ...
 *	  timeout_ms kills the process group (SIGKILL) once it passes
 *	  ("timed_out": true); while the sandbox is paused it waits for the
 *	  resume.
 *	  "tty": {"rows": R, "cols": C} (1..SERVE_TTY_DIM_MAX; no stdin fd
 *	  with it): the command runs on a new terminal of the sandbox's own
 *	  devpts (runtime/serve.h: sandbox_spawn_tty()) and "started" carries
 *	  its master as an fd; the output files stay empty (the output is
 *	  the master's), "exit" comes as for any exec. The shim keeps no
 *	  copy of the master: once its receiver closes it, the session gets
 *	  SIGHUP.
 *   {"op": "watch", "pid": N}
 *	  -> {"type": "output"}... {"type": "exit", ...} as for exec, for a
 *	  process started earlier; at once "exit" if it has ended already
 *   {"op": "kill", "pid": N, "signal": S}           -> {"type": "ok"}
 *	  to the process group; signal 1..64, default 9 (SIGKILL)
 *   {"op": "processes"}
 *	  -> {"type": "processes", "processes": [{"pid", "command", "running",
 *	      "exit_code", "signal", "started_at", "ended_at"}, ...]}
 *	  the running ones and the kept ended ones, oldest first; a command
 *	  is abbreviated to about SHIM_COMMAND_BRIEF bytes of JSON (then
 *	  "command_truncated": true): procs/<pid>.json has it whole
 *   {"op": "open", "path": "/abs", "mode": "read"|"write"|"dir"}
 *	  -> {"type": "opened", "temp": "/abs/.agentbox-..."} + the fd
 *	     (temp only for "write"; see sandbox_open())
 *	  "write" is an upload: the fd is not the file but a stream socket
 *	  to a copier inside the sandbox (in its cgroup, so the file's
 *	  memory is the sandbox's), which writes what it reads into temp.
 *	  Send the content, shut down the sending side (or close), wait for
 *	  EOF on the fd (the copier has ended), then rename temp in, or
 *	  unlink it to give up. EPIPE while sending: the copier failed; the
 *	  rename says why.
 *   {"op": "rename", "from": "/abs", "to": "/abs"}  -> {"type": "ok"}
 *	  from an upload's temp: the upload ends first (nothing more comes
 *	  in; its copier is waited for, at most SERVE_UPLOAD_FINISH_MS);
 *	  a failed upload is an error reply with its errno: ENOSPC (the
 *	  disk is full), ENOMEM (its copier was SIGKILLed: the OOM killer,
 *	  the sandbox's memory is full), EFBIG, ETIMEDOUT (not done in
 *	  time, killed), EIO; its temp is gone already
 *   {"op": "unlink", "path": "/abs"}                -> {"type": "ok"}
 *	  an upload's temp: its copier is killed too
 *   {"op": "pause"} / {"op": "resume"}              -> {"type": "ok"}
 *	  idempotent; a sandbox that does not freeze in time is thawed
 *	  again and the pause answered with the error
 *   {"op": "expire", "expires_at": ms (0 = none)}   -> {"type": "ok"}
 *	  a time already past ends the sandbox now ("expired")
 *   {"op": "network", "network": {...}, "egress": {...}, "expires_at": ms}
 *	  a pooled sandbox claimed: its network (supervisor/spec-json.h) and
 *	  its expiry (optional, as "expire"). A link made now -> {"type":
 *	  "ok"}; a parked one (sandbox.json's "park_network") -> {"type":
 *	  "ok", "link": "abp<slot>"}, for the daemon to put into the mode's
 *	  group (network/link.h); the helper then gets its arguments, and a
 *	  helper that fails ends the sandbox ("failed"). EINVAL: a mode of
 *	  none for a sandbox with a parked link; ENODEV: its helper is gone
 *   {"op": "status"}
 *	  -> {"type": "status", "paused": b, "expires_at": ms, "init_pid": N,
 *	      "running": N (processes running), "ending": b (it is being
 *	      stopped, has expired or died; end.json follows)}
 *   {"op": "stop"}
 *	  -> {"type": "ok"}; the sandbox is killed, end.json says "deleted",
 *	     and the shim exits
 *
 * errno values in error replies: ENOENT (no such process/path), ESRCH
 * (process ended), EBUSY (paused: exec, kill and files need a running
 * sandbox), EAGAIN (too many processes, or SERVE_UPLOADS_MAX uploads in
 * flight), EINVAL (bad request), E2BIG, EACCES, EISDIR, ENOTDIR, EROFS,
 * ENOSPC, ENOMEM, EFBIG and ETIMEDOUT (an upload's rename, above),
 * ECANCELED (the sandbox is ending: a stop, an expiry or its death is
 * under way): the daemon maps them to HTTP statuses.
 */
#ifndef AGENTBOX_SHIM_PROTOCOL_H
#define AGENTBOX_SHIM_PROTOCOL_H

#include "core/layout.h"

#define SHIM_MSG_MAX	(256 * 1024)
#define SHIM_OUTPUT_CAP (16ULL << 20) /* per process and stream */
/* all the output files of one sandbox together (what its procs/ may hold on the host's disk) */
#define SHIM_OUTPUT_TOTAL_CAP	(256ULL << 20)
#define SHIM_PROCS_KEPT		64 /* ended processes whose records stay */
#define SHIM_RUNNING_MAX	64 /* processes running at once by exec */
#define SHIM_SOCKET		LAYOUT_SHIM_SOCK
#define SHIM_LOCK_FD		3
#define SHIM_READY_FD		4
#define SHIM_CONNS_MAX		256   /* connections at once */
#define SHIM_REQUEST_TIMEOUT_MS 10000 /* from connect to the request */
#define SHIM_NOTICE_MS		20    /* "output" notices per process, at most one per */
#define SHIM_DRAIN_GRACE_MS	1000  /* output still read after a process exited */
#define SHIM_COMMAND_BRIEF	1024  /* bytes of a command in "processes" */

#endif
