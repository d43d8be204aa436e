/*
 * stream.h - the two responses that last as long as a task does:
 * GET .../logs?follow=1 (the output as it grows, across attempts) and
 * GET .../events with Accept: text/event-stream (Server-Sent Events).
 *
 * Each stream has a store connection of its own and polls: the files the
 * supervisor publishes as durable (output.len), and the store's events.
 * It ends when the task is final and everything has been sent.
 */
#ifndef AGENTBOX_DAEMON_STREAM_H
#define AGENTBOX_DAEMON_STREAM_H

#include "api/api.h"
#include "daemon/daemon.h"

#include <microhttpd.h>

#define STREAM_POLL_MS	    100
#define STREAM_HEARTBEAT_MS 15000

enum MHD_Result stream_start(struct daemon *d, struct MHD_Connection *c,
			     const struct api_stream *s);

#endif
