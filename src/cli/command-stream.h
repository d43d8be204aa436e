/*
 * command-stream.h - a command of a sandbox followed to its end: what it
 * writes to stdout and stderr copied to ours as it comes, and its exit
 * status made ours (exec, proc output -f).
 *
 * The stream's events (docs/api.md): start {"pid"}, stdout and stderr
 * {"data", "encoding"?}, and last exit {"exit_code", "signal",
 * "oom_killed", "timed_out", "truncated", ...}. A daemon that answers
 * with the whole result as JSON instead ({"stdout", "stderr",
 * "exit_code", ...}) is understood too.
 */
#ifndef AGENTBOX_CLI_COMMAND_STREAM_H
#define AGENTBOX_CLI_COMMAND_STREAM_H

#include "client/client.h"

#include <jansson.h>

/* The exit statuses a command's end gives: --timeout passed, out of memory. */
#define EXIT_TIMED_OUT 124
#define EXIT_OOM       137

/*
 * Send method target (with body as JSON when not NULL) asking for an
 * event stream, copy the output to our stdout and stderr unbuffered, and
 * return the command's exit status (cli_command_exit_status()), or
 * EXIT_AGENTBOX after a line on stderr naming verb ("exec") when
 * agentboxd refused, went away, or sent what cannot be read.
 */
int cli_command_stream(struct client *c, const char *verb, const char *method, const char *target,
		       const json_t *body);

/*
 * The exit status of a command that ended as ex says (an exit event, or a
 * whole answer): exit_code; 128+signal; EXIT_TIMED_OUT and EXIT_OOM with
 * a line on stderr. A note on stderr when its output was cut
 * (truncated). EXIT_AGENTBOX when ex says none.
 */
int cli_command_exit_status(const char *verb, const json_t *ex);

/*
 * Write output that came as a JSON string to fd: the text itself, or, when
 * encoding is "base64", the bytes it encodes. 0, -EPROTO (an encoding
 * unknown here, or bad base64), or -errno of the write.
 */
int cli_write_output(int fd, const json_t *text, const json_t *encoding);

#endif
