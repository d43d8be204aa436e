/*
 * sse.h - a parser for Server-Sent Events (the text/event-stream format),
 * fed the bytes of a stream as they arrive, in pieces of any size.
 *
 * The format, as the WHATWG HTML standard defines it: lines end in CRLF,
 * LF or CR; "field: value" (one space after the colon is dropped; a line
 * without a colon is a field with an empty value); a line starting with
 * ':' is a comment; a blank line dispatches the event. "data" lines join
 * with "\n"; "event" names the type ("message" when absent); "id" sets
 * the last event id, which lasts across events (an id holding NUL is
 * ignored); "retry" and unknown fields are ignored. An event with no data
 * is not dispatched. At the end of the stream, an event not ended by a
 * blank line is dropped (it may have been cut short): sse_parser_finish()
 * says whether that happened.
 *
 * Limits: a line is at most SSE_LINE_MAX bytes and an event's data at
 * most SSE_DATA_MAX; more is -E2BIG, and the parser is then spent.
 *
 * Ownership: the parser owns its buffers (sse_parser_release()); an event
 * handed to the callback points into them and lives only for the call.
 */
#ifndef AGENTBOX_CLIENT_SSE_H
#define AGENTBOX_CLIENT_SSE_H

#include "base/buf.h"
#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>

#define SSE_LINE_MAX (1u << 20)
#define SSE_DATA_MAX (4u << 20)
#define SSE_ID_MAX   128

struct sse_event {
	const char *type; /* "message" when the event named none */
	const char *id;	  /* the last event id, "" when none was ever set */
	const char *data; /* the data lines joined with "\n", NUL-terminated */
	size_t data_len;
};

/* Return 0 to go on, or non-zero to stop: sse_parser_feed() returns it. */
typedef int (*sse_event_fn)(const struct sse_event *ev, void *data);

struct sse_parser {
	sse_event_fn fn;
	void *fn_data;
	struct buf line; /* the line being read, not yet ended; max SSE_LINE_MAX */
	struct buf data; /* the event's data so far, each line followed by "\n"; max SSE_DATA_MAX */
	bool has_data;
	char type[64];
	bool type_set;
	char id[SSE_ID_MAX];
	bool after_cr; /* the last byte was CR: an LF next belongs to it */
	bool failed;
};

void sse_parser_init(struct sse_parser *p, sse_event_fn fn, void *data);
void sse_parser_release(struct sse_parser *p);

/*
 * Feed len bytes. Calls fn for each complete event. Returns 0, the
 * callback's non-zero value (the rest of buf is not parsed), or -E2BIG /
 * -ENOMEM with err set.
 */
int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len, struct error *err);

/*
 * The stream ended. Returns 1 when a started event (or line) was dropped
 * because no blank line ended it, else 0. The parser is reset.
 */
int sse_parser_finish(struct sse_parser *p);

#endif
