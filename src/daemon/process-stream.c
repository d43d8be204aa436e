/*
 * process-stream.c - a process's output as Server-Sent Events, for exec
 * with Accept: text/event-stream and .../processes/{pid}/output?follow=1
 * (the API checked the request and started or found the process: its
 * response is an API_RESPONSE_PROCESS_STREAM).
 *
 * The shim writes the output to procs/<pid>.out and .err and tells the
 * connection when they grew ("output") and when the process ended
 * ("exit"). The stream reads the files from where it stopped, so a notice
 * the shim had to drop (a full socket) loses nothing, and ends after the
 * exit record with everything before it sent. A client that goes away
 * closes only this connection: the process goes on.
 */
#include "daemon/stream.h"

#include "api/json-util.h"
#include "api/output.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SSE_CHUNK	 (32 * 1024) /* bytes of output in one event at most */
#define SSE_WAIT_MS	 250	     /* how long one read waits for the shim */
#define SSE_HEARTBEAT_MS 15000

struct sse {
	struct daemon *d;
	char id[SANDBOX_ID_SIZE];
	long pid;
	int shim_fd;
	int out_fd, err_fd;
	uint64_t out_off, err_off;
	json_t *exit; /* the exit record, once the shim sent it */
	bool shim_gone;
	bool start_sent, done;
	struct buf pending; /* events ready to send */
	size_t pending_off;
	int64_t last_sent_ms;
};

static int open_output(struct sse *s, const char *ext)
{
	char path[4400];
	if (layout_proc_file(path, sizeof(path), s->d->cfg.state_dir, s->id, s->pid, ext) < 0)
		return -1;
	return open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

/*
 * One event of n bytes of buf from stream name (stdout/stderr): the text,
 * or its base64 with "encoding": "base64" (api/output.h).
 */
static void put_output_event(struct sse *s, const char *name, const char *buf, size_t n)
{
	bool base64;
	buf_printf(&s->pending, "event: %s\ndata: {\"data\":", name);
	output_put_json(&s->pending, buf, n, &base64);
	buf_puts(&s->pending, base64 ? ",\"encoding\":\"base64\"}\n\n" : "}\n\n");
}

/* Read new output of one file into events. Returns bytes read. */
static size_t drain(struct sse *s, int *fd, uint64_t *off, const char *ext, const char *name)
{
	if (*fd < 0)
		*fd = open_output(s, ext);
	if (*fd < 0)
		return 0;
	char buf[SSE_CHUNK];
	ssize_t n = pread(*fd, buf, sizeof(buf), (off_t)*off);
	if (n <= 0)
		return 0;
	size_t len = (size_t)n;
	/* a full chunk: a character it cuts in two goes whole into the next event */
	if (len == sizeof(buf))
		len = output_cut(buf, len);
	put_output_event(s, name, buf, len);
	*off += len;
	return len;
}

/* Take the shim's messages for up to wait_ms. */
static void listen_shim(struct sse *s, int wait_ms)
{
	if (s->shim_gone || s->exit)
		return;
	struct pollfd p = {.fd = s->shim_fd, .events = POLLIN};
	if (poll(&p, 1, wait_ms) <= 0)
		return;
	for (;;) {
		json_t *m = NULL;
		struct error err = {0};
		int r = fleet_next_notice(s->shim_fd, 0, &m, &err);
		if (r == -ETIMEDOUT)
			return;
		if (r < 0) {
			s->shim_gone = true;
			return;
		}
		const char *type = json_string_value(json_object_get(m, "type"));
		if (type && strcmp(type, "exit") == 0) {
			s->exit = m;
			return;
		}
		json_decref(m);
	}
}

/* Fill pending with what there is to send; done once the exit is sent. */
static void fill(struct sse *s)
{
	if (!s->start_sent) {
		buf_printf(&s->pending, "event: start\ndata: {\"pid\":%ld}\n\n", s->pid);
		s->start_sent = true;
		return;
	}
	bool had_exit = s->exit != NULL;
	size_t got = drain(s, &s->out_fd, &s->out_off, LAYOUT_PROC_OUT, "stdout");
	got += drain(s, &s->err_fd, &s->err_off, LAYOUT_PROC_ERR, "stderr");
	if (got)
		return;
	if (had_exit) {
		/* every byte written before the exit record was read above */
		json_t *r = api_exit_json(s->pid, s->exit);
		buf_puts(&s->pending, "event: exit\ndata: ");
		json_put(&s->pending, r ? r : json_object());
		buf_puts(&s->pending, "\n\n");
		json_decref(r);
		s->done = true;
		return;
	}
	if (s->shim_gone) {
		buf_puts(&s->pending,
			 "event: error\ndata: {\"error\":{\"code\":\"sandbox_ended\","
			 "\"message\":\"the sandbox ended before the process did\"}}\n\n");
		s->done = true;
		return;
	}
	listen_shim(s, SSE_WAIT_MS);
	if (!s->pending.len && wall_clock_ms() - s->last_sent_ms > SSE_HEARTBEAT_MS)
		buf_puts(&s->pending, ": keep-alive\n\n");
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct sse *s = cls;
	for (;;) {
		if (s->pending.failed)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (s->pending_off < s->pending.len) {
			size_t n = s->pending.len - s->pending_off;
			if (n > max)
				n = max;
			memcpy(buf, s->pending.data + s->pending_off, n);
			s->pending_off += n;
			if (s->pending_off == s->pending.len) {
				buf_truncate(&s->pending, 0);
				s->pending_off = 0;
			}
			s->last_sent_ms = wall_clock_ms();
			return (ssize_t)n;
		}
		if (s->done || s->d->stopping)
			return MHD_CONTENT_READER_END_OF_STREAM;
		fill(s);
	}
}

static void sse_free(void *cls)
{
	struct sse *s = cls;
	fleet_done(s->d->fleet, s->id, s->shim_fd); /* closes it, and frees its waiter */
	CLOSE_FD(s->out_fd);
	CLOSE_FD(s->err_fd);
	json_decref(s->exit);
	buf_release(&s->pending);
	free(s);
}

enum MHD_Result process_stream_start(struct daemon *d, struct MHD_Connection *c, const char *id,
				     int shim_fd, long pid)
{
	struct sse *s = calloc(1, sizeof(*s));
	if (!s) {
		fleet_done(d->fleet, id, shim_fd);
		return MHD_NO;
	}
	*s = (struct sse){.d = d,
			  .pid = pid,
			  .shim_fd = shim_fd,
			  .out_fd = -1,
			  .err_fd = -1,
			  .last_sent_ms = wall_clock_ms()};
	snprintf(s->id, sizeof(s->id), "%s", id);
	struct MHD_Response *r =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, s, sse_free);
	if (!r) {
		sse_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	enum MHD_Result ok = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ok;
}
