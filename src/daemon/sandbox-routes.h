/*
 * sandbox-routes.h - the HTTP side of interactive sandboxes: every
 * /v1/sandboxes route, served by asking the store and each sandbox's
 * shim (fleet.h). The checks every route shares (auth, route, id, query)
 * are the API's (api_sandbox_begin()); the answers are built here.
 *
 * Three kinds of response:
 *   - JSON in one piece (most routes, exec without a stream);
 *   - streams: exec with Accept: text/event-stream and .../output?follow=1
 *     as Server-Sent Events, read from the process's output files as the
 *     shim reports them growing (sandbox-stream.c);
 *   - raw files: GET .../files is served from the fd the sandbox opened,
 *     PUT .../files is written to a temporary file the sandbox made, as
 *     the body arrives (never held in memory), then renamed in place.
 */
#ifndef AGENTBOX_DAEMON_SANDBOX_ROUTES_H
#define AGENTBOX_DAEMON_SANDBOX_ROUTES_H

#include "api/api.h"
#include "daemon/daemon.h"

#include <jansson.h>
#include <microhttpd.h>

/* Answer a sandbox route (api_request_is_sandbox()) whose body is complete. */
enum MHD_Result sandbox_serve(struct daemon *d, struct MHD_Connection *c, struct api_ctx *ctx,
			      const struct api_request *req);

/* An upload in progress (PUT .../files). */
struct upload;

/*
 * Before the body of a PUT .../files: check the request and open the
 * temporary file. Always returns an upload (NULL only when out of
 * memory); one that failed keeps its error response and discards the body.
 */
struct upload *upload_begin(struct daemon *d, struct api_ctx *ctx, const struct api_request *req);

/*
 * A chunk of the body. An upload refused before or during the body reads
 * the rest and drops it, to answer once it is all in (clients send the
 * whole body before they read); false once that passes twice API_FILE_MAX:
 * then the connection is dropped.
 */
bool upload_write(struct upload *u, const char *data, size_t len);

/* The body is complete: rename (or remove) the file, and answer. */
enum MHD_Result upload_end(struct upload *u, struct MHD_Connection *c);

/* Free (a temporary file left is removed). */
void upload_free(struct upload *u);

/* Send r as the response (server.c). */
enum MHD_Result server_send(struct MHD_Connection *c, const struct api_response *r);

/* The SSE stream of a process's output (sandbox-stream.c): exec or follow. */
enum MHD_Result sandbox_stream_start(struct daemon *d, struct MHD_Connection *c, const char *id,
				     int shim_fd, long pid, bool exec);

/* The SSE stream of a command that could not be executed: stderr, then exit (takes result). */
enum MHD_Result sandbox_stream_failed(struct MHD_Connection *c, json_t *result);

#endif
