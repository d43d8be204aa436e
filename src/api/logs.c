/*
 * logs.c - GET /v1/tasks/{id}/logs without follow: the output of every
 * attempt, in order, as plain text.
 *
 * Attempt N's output is <state_dir>/tasks/<id>/attempt-<N>/output, written
 * by its supervisor (stdout and stderr share one pipe, so they are
 * interleaved as written). Only its first output.len bytes are shown when
 * that file exists (the supervisor writes it after each fsync, so what is
 * shown is durable); otherwise all of it. A missing file is empty output.
 * With more than one attempt, each attempt's output is preceded by
 * "[agentbox: attempt N]\n" on a line of its own. At most API_LOGS_MAX
 * bytes are returned: the tail, after a line saying how much was left out.
 */
#include "api/api-internal.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int api_output_path(const char *state_dir, const char *id, uint32_t attempt, const char *name,
		    char *buf, size_t size)
{
	return layout_attempt_file(buf, size, state_dir, id, attempt, name);
}

/* Open attempt n's output; *ret_len is what may be shown of it. -1 if none. */
static int open_output(int taskfd, uint32_t n, uint64_t *ret_len)
{
	char name[32];
	if (layout_attempt_name(name, sizeof(name), n) < 0)
		return -1;
	_cleanup_close_ int dirfd = openat(taskfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -1;
	int fd = openat(dirfd, LAYOUT_OUTPUT, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	uint64_t len = (uint64_t)st.st_size, recorded;
	if (read_u64_at(dirfd, LAYOUT_OUTPUT_LEN, &recorded) == 0 && recorded < len)
		len = recorded;
	*ret_len = len;
	return fd;
}

void api_pieces_free(struct api_pieces *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n; i++)
		if (ps->piece[i].fd >= 0)
			close(ps->piece[i].fd);
	free(ps);
}

ssize_t api_pieces_read(const struct api_pieces *ps, uint64_t pos, char *buf, size_t max)
{
	size_t done = 0;
	for (size_t i = 0; i < ps->n && done < max; i++) {
		const struct api_piece *p = &ps->piece[i];
		if (pos >= p->len) {
			pos -= p->len;
			continue;
		}
		size_t want = p->len - pos < max - done ? (size_t)(p->len - pos) : max - done;
		if (p->fd < 0) {
			memcpy(buf + done, p->text + pos, want);
		} else {
			ssize_t got;
			do
				got = pread(p->fd, buf + done, want, (off_t)(p->off + pos));
			while (got < 0 && errno == EINTR);
			if (got <= 0)
				return done ? (ssize_t)done : -EIO; /* the file shrank */
			want = (size_t)got;
		}
		done += want;
		pos = 0;
	}
	return (ssize_t)done;
}

/*
 * Keep the last API_LOGS_MAX bytes of ps: drop or shorten pieces from the
 * front and put a notice first. ps has room for one more piece.
 */
static void keep_tail(struct api_pieces *ps)
{
	if (ps->total <= API_LOGS_MAX)
		return;
	uint64_t skip = ps->total - API_LOGS_MAX;
	size_t first = 0;
	for (uint64_t left = skip; first < ps->n; first++) {
		struct api_piece *p = &ps->piece[first];
		if (left < p->len) {
			if (p->fd >= 0)
				p->off += left;
			else
				memmove(p->text, p->text + left, (size_t)(p->len - left) + 1);
			p->len -= left;
			break;
		}
		left -= p->len;
		if (p->fd >= 0)
			close(p->fd);
	}
	memmove(&ps->piece[1], &ps->piece[first], (ps->n - first) * sizeof(ps->piece[0]));
	ps->n = ps->n - first + 1;
	struct api_piece *notice = &ps->piece[0];
	*notice = (struct api_piece){.fd = -1};
	snprintf(notice->text, sizeof(notice->text),
		 "[agentbox: output truncated: the first %llu bytes are not shown]\n",
		 (unsigned long long)skip);
	notice->len = strlen(notice->text);
	ps->total = API_LOGS_MAX + notice->len;
}

int api_task_logs(struct api_call *c)
{
	const char *follow = api_query_get(c->query, "follow");
	if (follow && strcmp(follow, "0") != 0 && strcmp(follow, "1") != 0 &&
	    strcmp(follow, "true") != 0 && strcmp(follow, "false") != 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "follow",
				     "follow must be 0, 1, true or false");
	if (api_query_get(c->query, "offset"))
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "offset",
				     "offset is for follow=1 only");
	struct task t = {0};
	struct error se = {0};
	int r = store_task_get(c->ctx->store, c->id, &t, &se);
	uint32_t attempts = t.attempt;
	task_release(&t);
	if (r < 0)
		return api_store_error(c, r, &se);
	if (!c->ctx->state_dir)
		return api_error_internal(c->err, EINVAL, "logs: no state directory configured");
	if (attempts > TASK_MAX_ATTEMPTS_MAX)
		attempts = TASK_MAX_ATTEMPTS_MAX;

	char path[4096];
	if (layout_task_dir(path, sizeof(path), c->ctx->state_dir, c->id) < 0)
		return api_error_internal(c->err, ENAMETOOLONG, "logs: the state directory's path");
	_cleanup_close_ int taskfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* per attempt a marker and its output; one more for the notice of keep_tail() */
	size_t cap = 2 * (size_t)attempts + 1;
	struct api_pieces *ps = calloc(1, sizeof(*ps) + cap * sizeof(ps->piece[0]));
	if (!ps)
		return -ENOMEM;
	char last = '\n'; /* the last byte so far */
	for (uint32_t a = 1; a <= attempts; a++) {
		uint64_t len = 0;
		int fd = open_output(taskfd, a, &len);
		if (attempts > 1) {
			struct api_piece *p = &ps->piece[ps->n++];
			*p = (struct api_piece){.fd = -1};
			snprintf(p->text, sizeof(p->text), "%s[agentbox: attempt %u]\n",
				 last == '\n' ? "" : "\n", a);
			p->len = strlen(p->text);
			ps->total += p->len;
			last = '\n';
		}
		if (fd < 0)
			continue;
		char end;
		if (len == 0 || pread(fd, &end, 1, (off_t)(len - 1)) != 1) {
			close(fd);
			continue;
		}
		last = end;
		ps->piece[ps->n++] = (struct api_piece){.fd = fd, .off = 0, .len = len};
		ps->total += len;
	}
	keep_tail(ps);
	api_respond_kind(c, 200, API_TEXT, API_RESPONSE_PIECES)->pieces = ps;
	return 0;
}
