/*
 * client.h - the daemon's side of the shim protocol (protocol.h): connect
 * to a sandbox's shim, send one request, read its replies.
 *
 * There is no state beyond the arguments: any thread may call any of
 * these at once, on different connections. Every fd made here is
 * O_CLOEXEC, and the connection is a blocking SOCK_SEQPACKET socket that
 * the caller owns and closes. One request per connection: exec and watch
 * go on replying on it until "exit"; the others reply once (shim_call()).
 *
 * Error replies of the shim come back as the negative errno they carry,
 * with err holding their message; -EPIPE means the shim closed the
 * connection (it has ended, or refused us).
 */
#ifndef AGENTBOX_SHIM_CLIENT_H
#define AGENTBOX_SHIM_CLIENT_H

#include "base/error.h"

#include <jansson.h>

/*
 * Connect to sandbox_dir/shim.sock (sandbox_dir absolute, of any length:
 * the socket's name is reached through an O_PATH fd of the directory).
 * -ECONNREFUSED when no shim listens there (none started, or its sandbox
 * has ended: the shim removes its socket first), -ENOENT when
 * sandbox_dir does not exist, -EAGAIN when the shim has too many pending
 * connections. 0 or -errno with err.
 */
int shim_connect(const char *sandbox_dir, int *ret_fd, struct error *err);

/* Send one request (JSON text), with pass_fd (-1: none) beside it. 0 or -errno. */
int shim_send(int fd, const char *json, int pass_fd, struct error *err);

/*
 * Receive one message, waiting at most timeout_ms (-1: forever):
 * -ETIMEDOUT, -EPIPE at the end of the connection, -EPROTO when it is not
 * a JSON object with a "type". The fd that came with it goes to *ret_fd
 * (-1 when none; closed when ret_fd is NULL). An {"type": "error"} reply
 * is returned as -its errno, with its message in err.
 */
int shim_recv(int fd, int timeout_ms, json_t **ret_msg, int *ret_fd, struct error *err);

/*
 * One request with one reply, on a connection of its own: connect, send
 * request (with pass_fd, -1: none), wait at most timeout_ms (-1: forever)
 * for the reply, close. For exec and watch, use the calls above.
 */
int shim_call(const char *sandbox_dir, json_t *request, int pass_fd, int timeout_ms,
	      json_t **ret_reply, int *ret_fd, struct error *err);

#endif
