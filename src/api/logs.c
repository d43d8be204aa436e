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

/* One piece of the response: text, or bytes [off, off+len) of fd. */
struct seg {
	char text[48];
	int fd; /* -1 for text */
	uint64_t off, len;
};

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

static void close_segs(struct seg *segs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (segs[i].fd >= 0)
			close(segs[i].fd);
}

/* Concatenate segs, keeping the last API_LOGS_MAX bytes, into *ret. */
static int assemble(struct seg *segs, size_t n, char **ret, size_t *ret_len)
{
	uint64_t total = 0, skip = 0;
	for (size_t i = 0; i < n; i++)
		total += segs[i].len;
	char notice[96] = "";
	if (total > API_LOGS_MAX) {
		skip = total - API_LOGS_MAX;
		snprintf(notice, sizeof(notice),
			 "[agentbox: output truncated: the first %llu bytes are not shown]\n",
			 (unsigned long long)skip);
	}
	size_t nlen = strlen(notice), cap = nlen + (size_t)(total - skip);
	char *out = malloc(cap + 1), *p = out;
	if (!out)
		return -ENOMEM;
	memcpy(p, notice, nlen);
	p += nlen;
	for (size_t i = 0; i < n; i++) {
		uint64_t off = skip < segs[i].len ? skip : segs[i].len;
		skip -= off;
		uint64_t want = segs[i].len - off;
		if (segs[i].fd < 0) {
			memcpy(p, segs[i].text + off, (size_t)want);
			p += want;
			continue;
		}
		while (want > 0) { /* a file that shrank meanwhile just ends early */
			ssize_t got =
			    pread(segs[i].fd, p, (size_t)want, (off_t)(segs[i].off + off));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				break;
			p += got;
			off += (uint64_t)got;
			want -= (uint64_t)got;
		}
	}
	*p = '\0';
	*ret = out;
	*ret_len = (size_t)(p - out);
	return 0;
}

int api_task_logs(struct api_call *c)
{
	const char *follow = api_query_get(c->query, "follow");
	if (follow && strcmp(follow, "0") != 0 && strcmp(follow, "1") != 0 &&
	    strcmp(follow, "true") != 0 && strcmp(follow, "false") != 0)
		return api_error_set(c->err, API_ERR_INVALID_FIELD, "follow",
				     "follow must be 0, 1, true or false");
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
	struct seg segs[3 * TASK_MAX_ATTEMPTS_MAX];
	size_t n = 0;
	char last = '\n'; /* the last byte so far */
	for (uint32_t a = 1; a <= attempts; a++) {
		uint64_t len = 0;
		int fd = open_output(taskfd, a, &len);
		if (attempts > 1) {
			struct seg *s = &segs[n++];
			s->fd = -1;
			snprintf(s->text, sizeof(s->text), "%s[agentbox: attempt %u]\n",
				 last == '\n' ? "" : "\n", a);
			s->len = strlen(s->text);
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
		segs[n++] = (struct seg){.fd = fd, .off = 0, .len = len};
	}
	struct buf b = {0};
	r = assemble(segs, n, &b.data, &b.len);
	close_segs(segs, n);
	if (r < 0)
		return r;
	b.cap = b.len + 1;
	return api_respond(c, 200, API_TEXT, &b);
}
