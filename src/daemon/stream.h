/*
 * stream.h - the responses that last: the server serves them once the API
 * has checked the request and described the stream (api.h's response
 * kinds).
 *
 * A task's streams (stream.c): GET .../logs?follow=1 (the output as it
 * grows, across attempts) and GET .../events with Accept:
 * text/event-stream (Server-Sent Events). Each has a store connection of
 * its own and polls: the files the supervisor publishes as durable
 * (output.len), and the store's events. It ends when the task is final
 * and everything has been sent.
 *
 * A process's stream (process-stream.c): exec with Accept:
 * text/event-stream and .../processes/{pid}/output?follow=1, read from
 * the process's output files as the shim reports them growing.
 *
 * A process's terminal (terminal.c): exec with "tty", a WebSocket.
 */
#ifndef AGENTBOX_DAEMON_STREAM_H
#define AGENTBOX_DAEMON_STREAM_H

#include "api/api.h"
#include "daemon/daemon.h"

#include <microhttpd.h>

#define STREAM_POLL_MS	    100
#define STREAM_HEARTBEAT_MS 15000

/* Serve the task stream s on c. */
enum MHD_Result stream_start(struct daemon *d, struct MHD_Connection *c,
			     const struct api_stream *s);

/*
 * A process's terminal (terminal.c): answer 101 and relay r->terminal
 * over WebSocket (takes the response's fd and master).
 */
enum MHD_Result terminal_start(struct daemon *d, struct MHD_Connection *c, struct api_response *r);

/* Serve process pid's output in sandbox id on c; shim_fd (taken) reports it. */
enum MHD_Result process_stream_start(struct daemon *d, struct MHD_Connection *c, const char *id,
				     int shim_fd, long pid);

#endif
