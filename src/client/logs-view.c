/*
 * logs-view.c - a task's output, as GET /v1/tasks/{id}/logs serves it,
 * for a terminal (client.h): escaped, with agentboxd's attempt headers
 * marked where they can be told from the task's own lines.
 *
 * agentboxd puts a line "[agentbox: attempt N]" before each attempt's
 * output when there were several (src/api/logs.c): the first at byte 0,
 * the next ones each at the start of a line, in order 1, 2, ..., K. A task
 * can write the same line, byte for byte, so the body alone cannot say
 * which lines are agentboxd's. What it can say: the real headers are a
 * subsequence 1..K of the lines that read like headers, the first of them
 * at byte 0. A line is marked when it is that header in every such
 * subsequence: the leftmost and the rightmost matching of 1..K (greedy
 * from each end) bound every other, so a header both put on the same line
 * is on it in all of them. Every other header-like line is the task's, or
 * cannot be told from one the task wrote, and is shown as output.
 */
#include "client/client.h"

#include "base/cleanup.h"
#include "core/task.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HEADER_PREFIX	 "[agentbox: attempt "
#define TRUNCATED_PREFIX "[agentbox: output truncated: the first "
/* Bytes of output escaped at a time. */
#define LOGS_PIECE 65536

/*
 * N when the line s[0..len) (with its \n) reads "[agentbox: attempt N]\n",
 * N written as agentboxd writes it (no leading zero, at most 10 digits);
 * 0 when it does not.
 */
static uint64_t header_number(const char *s, size_t len)
{
	size_t p = strlen(HEADER_PREFIX);
	if (len < p + 3 || memcmp(s, HEADER_PREFIX, p) != 0 || s[len - 1] != '\n' ||
	    s[len - 2] != ']')
		return 0;
	size_t digits = len - 2 - p;
	if (digits > 10 || s[p] == '0')
		return 0;
	uint64_t n = 0;
	for (size_t i = p; i < p + digits; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	return n;
}

/* The end (after its \n, or len) of the line that starts at pos. */
static size_t line_end(const char *body, size_t len, size_t pos)
{
	const char *nl = memchr(body + pos, '\n', len - pos);
	return nl ? (size_t)(nl - body) + 1 : len;
}

/* The start of the line that ends at end (> 0). */
static size_t line_start(const char *body, size_t end)
{
	if (end < 2)
		return 0;
	const char *nl = memrchr(body, '\n', end - 1);
	return nl ? (size_t)(nl - body) + 1 : 0;
}

/*
 * The offsets of the headers that are agentboxd's in every reading of the
 * body, increasing, into forced; their number is returned.
 */
static size_t find_headers(const char *body, size_t len, int64_t attempts,
			   size_t forced[TASK_MAX_ATTEMPTS_MAX])
{
	if (attempts < 2 || attempts > TASK_MAX_ATTEMPTS_MAX)
		return 0; /* one attempt has no header; an unknown count proves none */
	size_t k = (size_t)attempts;
	size_t left[TASK_MAX_ATTEMPTS_MAX], right[TASK_MAX_ATTEMPTS_MAX];
	size_t j = 0;
	for (size_t pos = 0; pos < len && j < k;) {
		size_t end = line_end(body, len, pos);
		if (header_number(body + pos, end - pos) == j + 1 && (j > 0 || pos == 0))
			left[j++] = pos;
		pos = end;
	}
	if (j < k)
		return 0; /* not the body agentboxd sends for k attempts */
	j = k;
	for (size_t end = len; end > 0 && j > 0;) {
		size_t pos = line_start(body, end);
		if (header_number(body + pos, end - pos) == j && (j > 1 || pos == 0))
			right[--j] = pos;
		end = pos;
	}
	size_t n = 0;
	for (j = 0; j < k; j++)
		if (left[j] == right[j])
			forced[n++] = left[j];
	return n;
}

static int flush(struct buf *b, FILE *f)
{
	if (b->failed)
		return b->failed;
	if (b->len && fwrite(b->data, 1, b->len, f) != b->len)
		return -EIO;
	buf_reset(b);
	return 0;
}

int client_logs_render(const char *body, size_t len, int64_t attempts, FILE *f,
		       struct client_logs_view *ret)
{
	struct client_logs_view view = {0};
	size_t forced[TASK_MAX_ATTEMPTS_MAX], nforced = 0, next = 0;
	/* past the limit, agentboxd cut the output: its first line says so */
	bool truncated = len > CLIENT_LOGS_MAX && len >= strlen(TRUNCATED_PREFIX) &&
			 memcmp(body, TRUNCATED_PREFIX, strlen(TRUNCATED_PREFIX)) == 0;
	if (!truncated)
		nforced = find_headers(body, len, attempts, forced);

	_cleanup_buf_ struct buf b = {0};
	struct term_stream ts = {.flags = TERM_KEEP_NEWLINE | TERM_KEEP_TAB};
	int r = 0;
	for (size_t pos = 0; pos < len && r == 0;) {
		size_t end = line_end(body, len, pos);
		bool mark = (next < nforced && forced[next] == pos) || (truncated && pos == 0);
		if (mark) {
			if (next < nforced && forced[next] == pos)
				next++;
			view.headers++;
			buf_puts(&b, TERM_MARK_ON);
			term_escape(body + pos, end - pos - (body[end - 1] == '\n'), 0, &b);
			buf_puts(&b, TERM_MARK_OFF "\n");
			r = flush(&b, f);
			pos = end;
			continue;
		}
		if (header_number(body + pos, end - pos))
			view.unmarked++;
		while (pos < end && r == 0) {
			size_t piece = end - pos > LOGS_PIECE ? LOGS_PIECE : end - pos;
			term_stream_feed(&ts, body + pos, piece, &b);
			pos += piece;
			r = flush(&b, f);
		}
	}
	if (r == 0) {
		term_stream_finish(&ts, &b);
		r = flush(&b, f);
	}
	if (r < 0)
		return r;
	if (ret)
		*ret = view;
	return 0;
}
