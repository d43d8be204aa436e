/*
 * upload.c - a local file as a request's body (upload.h).
 */
#include "cli/upload.h"

#include "base/fileio.h"

#include <errno.h>
#include <unistd.h>

/* Hands the file on piece by piece; it must neither shrink nor grow meanwhile. */
static ssize_t read_piece(void *data, char *buf, size_t size, struct error *err)
{
	struct cli_upload *u = data;
	ssize_t n = read_all(u->fd, buf, size);
	if (n < 0)
		return error_set_errno(err, (int)-n, "reading %s", u->name);
	u->sent += (uint64_t)n;
	if ((size_t)n < size)
		return error_set(err, EIO, "%s shrank while it was being sent", u->name);
	if (u->sent == u->size) {
		char extra;
		ssize_t k = read(u->fd, &extra, 1);
		if (k < 0)
			return error_set_errno(err, errno, "reading %s", u->name);
		if (k > 0)
			return error_set(err, EIO, "%s grew while it was being sent", u->name);
	}
	return n;
}

void cli_upload_body(struct client_request *req, struct cli_upload *u)
{
	req->body_len = (size_t)u->size;
	if (u->size > 0) {
		req->read_body = read_piece;
		req->read_body_data = u;
	} else {
		req->body = "";
	}
}
