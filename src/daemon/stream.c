/*
 * stream.c - a task's logs as they grow and its events as Server-Sent
 * Events (stream.h).
 */
#include "daemon/stream.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct stream {
	struct daemon *d;
	struct api_stream s;
	struct store *st;
	char *pending; /* bytes ready to send */
	size_t pending_len, pending_off;
	/* logs */
	uint32_t attempt; /* the attempt being read; 0 before the first */
	uint64_t offset;
	uint64_t skip; /* bytes of the stream still to leave out (offset=) */
	char last;     /* the stream's last byte so far, sent or skipped; '\n' at first */
	/* events */
	int64_t after;
	int64_t last_sent_ms;
	bool done;
};

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int append(struct stream *s, const char *buf, size_t len)
{
	if (len)
		s->last = buf[len - 1];
	if (s->skip) {
		size_t k = s->skip < len ? (size_t)s->skip : len;
		s->skip -= k;
		buf += k;
		len -= k;
		if (!len)
			return 0;
	}
	char *n = realloc(s->pending, s->pending_len + len);
	if (!n)
		return -ENOMEM;
	memcpy(n + s->pending_len, buf, len);
	s->pending = n;
	s->pending_len += len;
	return 0;
}

/* Is the task final? Errors count as final: a stream must end. */
static bool task_is_over(struct stream *s, uint32_t *ret_attempt)
{
	struct task t = {0};
	struct error err = {0};
	if (store_task_get(s->st, s->s.id, &t, &err) < 0)
		return true;
	bool over = task_status_is_final(t.status);
	*ret_attempt = t.attempt;
	task_release(&t);
	return over;
}

static void attempt_path(struct stream *s, uint32_t attempt, const char *file, char *buf,
			 size_t size)
{
	if (layout_attempt_file(buf, size, s->d->cfg.state_dir, s->s.id, attempt, file) < 0)
		buf[0] = '\0'; /* opens nothing */
}

/*
 * Read the durable new part of the current attempt's output into pending.
 * The stream's bytes are a function of the task alone, whenever it is
 * read, so that offset= resumes it exactly: each attempt after the first
 * starts with "[agentbox: attempt N]" on a line of its own; the first has
 * no such line (a stream begun in it cannot know whether another comes).
 */
static int fill_logs(struct stream *s)
{
	char path[4400];
	uint32_t attempt = 0;
	bool over = task_is_over(s, &attempt);
	if (s->attempt == 0) {
		if (attempt == 0)
			return over ? 1 : 0;
		s->attempt = 1;
	}
	uint64_t durable = 0;
	attempt_path(s, s->attempt, LAYOUT_OUTPUT_LEN, path, sizeof(path));
	(void)read_u64_at(AT_FDCWD, path, &durable);
	if (durable > s->offset) {
		size_t len = durable - s->offset > 65536 ? 65536 : (size_t)(durable - s->offset);
		char buf[65536];
		attempt_path(s, s->attempt, LAYOUT_OUTPUT, path, sizeof(path));
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t n = fd >= 0 ? pread(fd, buf, len, (off_t)s->offset) : -1;
		if (n > 0) {
			s->offset += (uint64_t)n;
			return append(s, buf, (size_t)n);
		}
	}
	/* this attempt's output is all sent: move on once it has ended */
	attempt_path(s, s->attempt, LAYOUT_RESULT, path, sizeof(path));
	bool ended = access(path, F_OK) == 0;
	if (ended && s->attempt < attempt) {
		char marker[64];
		int n = snprintf(marker, sizeof(marker), "%s[agentbox: attempt %" PRIu32 "]\n",
				 s->last == '\n' ? "" : "\n", ++s->attempt);
		s->offset = 0;
		return append(s, marker, (size_t)n);
	}
	return over && (ended || attempt == 0) ? 1 : 0;
}

struct event_fill {
	struct stream *s;
	int r;
};

static int add_event(const struct task_event *ev, void *data)
{
	struct event_fill *f = data;
	_cleanup_free_ char *json = NULL;
	size_t len;
	if (api_event_json(ev, &json, &len) < 0)
		return f->r = -ENOMEM;
	char head[96];
	int n = snprintf(head, sizeof(head), "id: %" PRId64 "\nevent: %s\ndata: ", ev->seq,
			 task_event_type_name(ev->type));
	if (append(f->s, head, (size_t)n) < 0 || append(f->s, json, len) < 0 ||
	    append(f->s, "\n\n", 2) < 0)
		return f->r = -ENOMEM;
	f->s->after = ev->seq;
	return 0;
}

static int fill_events(struct stream *s)
{
	uint32_t attempt;
	/* read the status first: events stored before it was final are then all seen */
	bool over = task_is_over(s, &attempt);
	struct event_fill f = {.s = s};
	struct error err = {0};
	if (store_events_list(s->st, s->s.id, s->after, 100, add_event, &f, &err) < 0 || f.r < 0)
		return -EIO;
	if (s->pending_len)
		return 0;
	return over ? 1 : 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	for (;;) {
		if (s->pending_off < s->pending_len) {
			size_t n = s->pending_len - s->pending_off;
			if (n > max)
				n = max;
			memcpy(buf, s->pending + s->pending_off, n);
			s->pending_off += n;
			if (s->pending_off == s->pending_len)
				s->pending_len = s->pending_off = 0;
			s->last_sent_ms = wall_clock_ms();
			return (ssize_t)n;
		}
		if (s->done || s->d->stopping)
			return MHD_CONTENT_READER_END_OF_STREAM;
		uint64_t offset = s->offset;
		uint32_t attempt = s->attempt;
		int r = s->s.route == API_ROUTE_TASK_LOGS ? fill_logs(s) : fill_events(s);
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r > 0)
			s->done = true;
		/* output read but left out (offset=): read on at once */
		bool moved = s->offset != offset || s->attempt != attempt;
		if (s->pending_len == 0 && !s->done && !moved) {
			if (s->s.route == API_ROUTE_TASK_EVENTS &&
			    wall_clock_ms() - s->last_sent_ms > STREAM_HEARTBEAT_MS)
				append(s, ": keepalive\n\n", 13);
			else
				sleep_ms(STREAM_POLL_MS);
		}
	}
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	store_close(s->st);
	free(s->pending);
	free(s);
}

enum MHD_Result stream_start(struct daemon *d, struct MHD_Connection *c,
			     const struct api_stream *as)
{
	struct stream *s = calloc(1, sizeof(*s));
	struct error err = {0};
	if (!s)
		return MHD_NO;
	*s = (struct stream){.d = d,
			     .s = *as,
			     .after = as->after_seq,
			     .skip = as->route == API_ROUTE_TASK_LOGS ? as->offset : 0,
			     .last = '\n',
			     .last_sent_ms = wall_clock_ms()};
	if (store_open_sqlite(d->db_path, &s->st, &err) < 0) {
		fprintf(stderr, "agentboxd: stream: %s\n", err.msg);
		free(s);
		return MHD_NO;
	}
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
								      stream_read, s, stream_free);
	if (!resp) {
		stream_free(s);
		return MHD_NO;
	}
	bool sse = as->route == API_ROUTE_TASK_EVENTS;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				sse ? "text/event-stream" : "text/plain; charset=utf-8");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ok;
}
