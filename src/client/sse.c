/*
 * sse.c - the Server-Sent Events parser of sse.h.
 *
 * Bytes collect in p->line until a line ends (CR, LF or CRLF; a CR at the
 * end of one piece and an LF at the start of the next are one line end),
 * then the line is processed at once.
 */
#include "client/sse.h"

#include <errno.h>
#include <string.h>

void sse_parser_init(struct sse_parser *p, sse_event_fn fn, void *data)
{
	*p = (struct sse_parser){.fn = fn,
				 .fn_data = data,
				 .line = {.max = SSE_LINE_MAX},
				 .data = {.max = SSE_DATA_MAX}};
}

void sse_parser_release(struct sse_parser *p)
{
	if (!p)
		return;
	buf_release(&p->line);
	buf_release(&p->data);
}

static void reset_event(struct sse_parser *p)
{
	buf_reset(&p->data);
	p->has_data = false;
	p->type[0] = '\0';
	p->type_set = false;
}

static int dispatch(struct sse_parser *p)
{
	if (!p->has_data) {
		reset_event(p);
		return 0;
	}
	/* drop the "\n" after the last data line */
	if (p->data.len > 0 && p->data.data[p->data.len - 1] == '\n')
		buf_truncate(&p->data, p->data.len - 1);
	struct sse_event ev = {
	    .type = p->type_set && p->type[0] ? p->type : "message",
	    .id = p->id,
	    .data = p->data.data ? p->data.data : "",
	    .data_len = p->data.len,
	};
	int r = p->fn ? p->fn(&ev, p->fn_data) : 0;
	reset_event(p);
	return r;
}

static int process_line(struct sse_parser *p, const char *line, size_t len, struct error *err)
{
	if (len == 0)
		return dispatch(p);
	if (line[0] == ':')
		return 0; /* a comment */
	const char *colon = memchr(line, ':', len);
	size_t nlen = colon ? (size_t)(colon - line) : len;
	const char *value = colon ? colon + 1 : line + len;
	size_t vlen = colon ? len - nlen - 1 : 0;
	if (vlen > 0 && value[0] == ' ') {
		value++;
		vlen--;
	}

	if (nlen == 4 && memcmp(line, "data", 4) == 0) {
		buf_append(&p->data, value, vlen);
		int r = buf_append(&p->data, "\n", 1);
		if (r == -E2BIG)
			return error_set(err, E2BIG, "an event's data is larger than %u bytes",
					 SSE_DATA_MAX);
		if (r < 0)
			return error_set_errno(err, -r, "reading an event");
		p->has_data = true;
	} else if (nlen == 5 && memcmp(line, "event", 5) == 0) {
		if (vlen >= sizeof(p->type) || memchr(value, '\0', vlen))
			return 0; /* no type of ours is that long: keep the default */
		memcpy(p->type, value, vlen);
		p->type[vlen] = '\0';
		p->type_set = true;
	} else if (nlen == 2 && memcmp(line, "id", 2) == 0) {
		if (vlen < sizeof(p->id) && !memchr(value, '\0', vlen)) {
			memcpy(p->id, value, vlen);
			p->id[vlen] = '\0';
		}
	}
	/* "retry" and anything else: ignored */
	return 0;
}

int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len, struct error *err)
{
	if (p->failed)
		return error_set(err, EINVAL, "internal: the event parser failed before");
	size_t i = 0;
	while (i < len) {
		if (p->after_cr) {
			p->after_cr = false;
			if (buf[i] == '\n') {
				i++;
				continue;
			}
		}
		/* the next line end in this piece */
		size_t j = i;
		while (j < len && buf[j] != '\r' && buf[j] != '\n')
			j++;
		const char *line = buf + i;
		size_t line_len = j - i;
		if (p->line.len > 0 || j == len) {
			/* a line split across pieces: collect it */
			int r = buf_append(&p->line, buf + i, j - i);
			if (r < 0) {
				p->failed = true;
				if (r == -E2BIG)
					return error_set(
					    err, E2BIG,
					    "an event stream line is longer than %u bytes",
					    SSE_LINE_MAX);
				return error_set_errno(err, -r, "reading an event");
			}
			if (j == len)
				return 0;
			line = p->line.data;
			line_len = p->line.len;
		} else if (line_len > SSE_LINE_MAX) {
			p->failed = true;
			return error_set(err, E2BIG, "an event stream line is longer than %u bytes",
					 SSE_LINE_MAX);
		}
		p->after_cr = buf[j] == '\r';
		i = j + 1;
		int r = process_line(p, line, line_len, err);
		buf_reset(&p->line);
		if (r < 0)
			p->failed = true;
		if (r != 0)
			return r;
	}
	return 0;
}

int sse_parser_finish(struct sse_parser *p)
{
	bool partial_line = p->line.len > 0 && p->line.data[0] != ':';
	bool dropped = p->has_data || p->type_set || partial_line;
	buf_reset(&p->line);
	p->after_cr = false;
	p->failed = false;
	reset_event(p);
	return dropped ? 1 : 0;
}
