/*
 * upload.h - a local regular file as a request's body, streamed piece by
 * piece, never held whole: cp's PUT of a file (verb-cp.c) and of a
 * directory's tar (cp-tree.c), an image's archive (verb-image.c) and
 * submit's inputs (verb-submit.c, POST /v1/inputs).
 */
#ifndef AGENTBOX_CLI_UPLOAD_H
#define AGENTBOX_CLI_UPLOAD_H

#include "client/client.h"

#include <stdint.h>

/* What is being sent: the caller's fd, its name for messages, its size at the start. */
struct cli_upload {
	int fd;
	const char *name;
	uint64_t size, sent;
};

/*
 * Make req send u's file as its body (Content-Length u->size). The file
 * must neither shrink nor grow while it is sent: either fails the request
 * with a message naming it. u must outlive the request.
 */
void cli_upload_body(struct client_request *req, struct cli_upload *u);

#endif
