/*
 * output.h - a command's output in the API's JSON. Output is bytes: text
 * that is well-formed UTF-8 without NUL travels as a JSON string as it
 * is; anything else travels as base64, and the JSON says so beside it
 * ("stdout_encoding": "base64" in a result, "encoding": "base64" in an
 * output event; docs/api.md). Either way the client gets the exact
 * bytes, and the exit status always comes through.
 */
#ifndef AGENTBOX_API_OUTPUT_H
#define AGENTBOX_API_OUTPUT_H

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * How much of buf[0..len) to send now when more may follow: all of it,
 * less an incomplete UTF-8 sequence at its end (at most 3 bytes), which
 * is better sent whole with what comes next.
 */
size_t output_cut(const char *buf, size_t len);

/* Does buf[0..len) travel as text (well-formed UTF-8, no NUL)? */
bool output_is_text(const char *buf, size_t len);

/*
 * Append buf[0..len) to b as one JSON string: the text itself, or its
 * base64 (*ret_base64 says which).
 */
void output_put_json(struct buf *b, const char *buf, size_t len, bool *ret_base64);

#endif
