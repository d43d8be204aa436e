/*
 * shim-internal.h - the parts of agentbox-shim and what they share.
 *
 *	main.c        setup, the wait for the sandbox, the end
 *	loop.c        the event loop: one epoll fd inside sandbox_wait_io(),
 *	              its timer, ending the sandbox
 *	dir.c         the directory's files: sandbox.json in, end.json out
 *	procs.c       processes run by exec: output, exits, records
 *	conn.c        client connections: packets in and out, notices
 *	request.c     a request: the op table and strict field checks
 *	ops-proc.c    exec, watch, kill, processes
 *	ops-files.c   open, rename, unlink
 *	ops-sandbox.c pause, resume, expire, status, stop
 *
 * Everything runs on one thread, from the loop. Nothing is freed while an
 * epoll batch may still point at it: a closed connection stays in the
 * list with fd -1 until the batch is over, and a process record is freed
 * only when it has no fd left in epoll.
 */
#ifndef AGENTBOX_SHIM_INTERNAL_H
#define AGENTBOX_SHIM_INTERNAL_H

#include "base/error.h"
#include "base/json-cleanup.h"
#include "runtime/nethelper.h"
#include "runtime/sandbox.h"
#include "runtime/serve.h"
#include "runtime/spec.h"
#include "supervisor/spec-json.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What an epoll event points at. */
enum shim_source_kind {
	SOURCE_LISTEN,
	SOURCE_SIGNAL,
	SOURCE_CONTROL,
	SOURCE_TIMER,
	SOURCE_CONN,
	SOURCE_PIPE,
	SOURCE_PARKED, /* a parked link's helper (its output's hang-up: it ended) */
};

struct shim_source {
	enum shim_source_kind kind;
	int fd;	     /* -1 once closed */
	void *owner; /* the struct conn or struct proc, else the shim */
};

/* One of a process's output streams: a pipe drained into a capped file. */
struct proc_stream {
	struct shim_source src; /* the pipe's read end (non-blocking) */
	int file;		/* procs/<pid>.out or .err, -1 once closed */
	uint64_t size;		/* bytes in the file */
	bool truncated;		/* more came than the caps let in */
};

enum proc_state {
	PROC_RUNNING, /* no exit yet */
	PROC_EXITED,  /* exited; its output is still being read */
	PROC_ENDED,   /* recorded: procs/<pid>.json exists */
};

struct proc {
	struct proc *prev, *next; /* in start order */
	pid_t pid;		  /* inside the sandbox */
	json_t *command;	  /* the array of strings */
	enum proc_state state;
	struct proc_stream out, err;
	int status;	 /* wait status, once exited */
	bool timed_out;	 /* the shim killed it at its timeout */
	bool killed;	 /* a kill request sent it SIGKILL */
	bool oom_killed; /* SIGKILLed as the sandbox's OOM kills rose */
	uint64_t oom_kills_at_start;
	uint64_t duration_ms;	      /* once exited */
	uint64_t end_seq;	      /* once ended: the order of ends */
	int64_t started_at, ended_at; /* wall clock, ms */
	uint64_t start_ns;	      /* monotonic */
	uint64_t deadline_ns;	      /* timeout_ms; 0 = none */
	uint64_t drain_until_ns;      /* once exited: stop waiting for EOF */
	bool output_pending;	      /* output came since the last notice */
	uint64_t last_notice_ns;
	json_t *record; /* once ended: procs/<pid>.json */
};

struct conn {
	struct shim_source src;
	struct conn *prev, *next;
	bool requested;	      /* its one request has come */
	pid_t pid;	      /* > 0: it watches this process */
	uint64_t deadline_ns; /* for the request */
	char *last;	      /* a last message waiting for room, then close */
	size_t last_len;
};

struct shim {
	int dirfd, procs_fd;
	int epfd;
	struct shim_source listen, signal, control, timer;
	int reserve_fd; /* given up to accept() when out of fds */
	char *buf;	/* SHIM_MSG_MAX + 1, for requests */

	struct sandbox *sb;
	char id[64];
	struct spec spec;
	char **spec_env;    /* owned strings the spec points at */
	char **default_env; /* for exec without env: spec_build_env() */
	int64_t expires_at; /* wall clock ms; 0 = never */
	bool paused;
	bool networked; /* its link is made (at start, or by op_network at a claim) */
	struct spec_network net;
	struct spec_image image;      /* the spec's image, if it has one: its use held */
	bool park;		      /* a pooled sandbox whose link is made ahead (sandbox.json) */
	struct nethelper_park parked; /* that link, until op_network hands it out */
	struct shim_source parked_watch; /* a copy of its helper's output, watched meanwhile */
	char network_log[4200];		 /* the relay's refusals: <dir>/LAYOUT_NETWORK_LOG */

	const char *end_reason; /* set once the shim ends the sandbox itself */
	char end_detail[256];

	struct proc *procs, *procs_tail;
	size_t running, ended; /* records not PROC_ENDED, and those ended */
	uint64_t end_seq;
	struct proc *graveyard; /* dropped records, freed after the batch */
	uint64_t output_bytes;	/* in procs/ now: at most SHIM_OUTPUT_TOTAL_CAP */
	struct conn *conns;
	size_t nconns;
};

/* loop.c */
uint64_t shim_now_ns(void);
int shim_watch(struct shim *s, struct shim_source *src, uint32_t events);
int shim_rewatch(struct shim *s, struct shim_source *src, uint32_t events);
void shim_unwatch(struct shim *s, struct shim_source *src); /* and close the fd */
void shim_dispatch(struct shim *s);
/* End the sandbox for reason (the first call wins): it is killed, the wait returns. */
void shim_end(struct shim *s, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 0, or -ECANCELED/-EBUSY with err when the sandbox is ending or paused. */
int shim_need_running(struct shim *s, struct error *err);
void shim_close_listener(struct shim *s);
void shim_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* dir.c */
int dir_load(struct shim *s, struct error *err);
int dir_write_end(struct shim *s, const char *reason, const char *detail);

/* procs.c */
struct proc_exec {
	const char *const *argv, *const *envp;
	const char *cwd;
	int stdin_fd; /* not used with tty */
	uint64_t timeout_ms;
	json_t *command; /* a new reference is taken */
	bool tty;	 /* on a terminal of rows x cols: no output files are written */
	unsigned rows, cols;
};
/* With req->tty, *ret_master gets the terminal's master (the caller's); else untouched. */
int proc_exec(struct shim *s, const struct proc_exec *req, struct proc **ret, int *ret_master,
	      struct error *err);
struct proc *proc_find(struct shim *s, pid_t pid);
void proc_on_pipe(struct shim *s, struct proc_stream *st);
void proc_drain_exits(struct shim *s);
/* Timeouts, drain deadlines and notices due by now. */
void proc_tick(struct shim *s, uint64_t now);
/* The nearest of those deadlines; 0 = none. */
uint64_t proc_next_deadline(const struct shim *s);
/* The sandbox is gone: record every process still here as SIGKILLed. */
void proc_end_all(struct shim *s);
json_t *proc_summary(const struct proc *p);
/* {"type": "exit", ...record}, as text that fits a packet. */
char *proc_exit_message(const struct proc *p);
/* Free the dropped records (after a batch), or every record (at the end). */
void proc_sweep(struct shim *s);
void proc_free_all(struct shim *s);

/* conn.c */
void conn_accept(struct shim *s);
void conn_on_event(struct shim *s, struct conn *c, uint32_t events);
/* Send msg (and fd, >= 0) on c; a last message is kept until there is room. */
int conn_send(struct shim *s, struct conn *c, const json_t *msg, int fd);
int conn_send_last_text(struct shim *s, struct conn *c, const char *text);
void conn_close(struct shim *s, struct conn *c);
void conn_notify_output(struct shim *s, pid_t pid);
void conn_notify_exit(struct shim *s, const struct proc *p);
/* Close connections whose request is late; free the closed ones. */
void conn_tick(struct shim *s, uint64_t now);
uint64_t conn_next_deadline(const struct shim *s);
void conn_sweep(struct shim *s);
void conn_close_all(struct shim *s);

/* request.c */
/* Handle req and reply; fd (-1: none) came with it and is closed here. */
void request_handle(struct shim *s, struct conn *c, json_t *req, int fd);
int req_int(json_t *req, const char *field, bool required, int64_t min, int64_t max, int64_t dflt,
	    int64_t *ret, struct error *err);
int req_path(json_t *req, const char *field, bool required, const char **ret, struct error *err);
/* A NULL-terminated array pointing into req's strings: free() it alone. */
int req_strv(json_t *req, const char *field, size_t max, const char ***ret, struct error *err);
int reply_ok(struct shim *s, struct conn *c);
void reply_error(struct shim *s, struct conn *c, const struct error *err);
/* A JSON string of text, any byte that is not printable ASCII made '?' if
 * it is not valid UTF-8. A new reference, or NULL without memory. */
json_t *json_text(const char *text);

/* ops-*.c: each handles one op; on success it has sent its reply */
typedef int op_fn(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err);
op_fn op_exec, op_watch, op_kill, op_processes;
op_fn op_open, op_rename, op_unlink;
op_fn op_pause, op_resume, op_expire, op_network, op_status, op_stop, op_upper;

#endif
