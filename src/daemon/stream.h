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
 * A terminal whose 101 is queued, in the request's state: libmicrohttpd
 * hands the socket over only once the 101 is sent. When the request ends
 * without that (the client went away first), terminal_abandon() frees the
 * terminal, closing its master (the session hangs up); once upgraded, the
 * relay owns it and terminal_abandon() does nothing. Zeroed: none.
 */
struct terminal_pending {
	struct term *t;
	bool upgraded;
};

/*
 * A process's terminal (terminal.c): answer 101 and relay r->terminal
 * over WebSocket (takes the response's fd and master). pending lives in
 * the request's state until the request completes.
 */
enum MHD_Result terminal_start(struct daemon *d, struct MHD_Connection *c, struct api_response *r,
			       struct terminal_pending *pending);
void terminal_abandon(struct terminal_pending *pending);

/*
 * Once d->stopping is set: wait until every terminal's relay has closed
 * its WebSocket (1001) and let go of its socket, at most
 * TERMINAL_STOP_WAIT_MS; before libmicrohttpd stops, which takes the
 * sockets away.
 */
#define TERMINAL_STOP_WAIT_MS 5000
void terminal_wait_all(void);

/* Serve process pid's output in sandbox id on c; shim_fd (taken) reports it. */
enum MHD_Result process_stream_start(struct daemon *d, struct MHD_Connection *c, const char *id,
				     int shim_fd, long pid);

#endif
