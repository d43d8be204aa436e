#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "shim/packet.h"
#include "shim/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPTS_EACH 64 /* connections taken per readiness */
#define NS_PER_MS    1000000ULL

static const char output_notice[] = "{\"type\":\"output\"}";

static uint64_t deadline_from(uint64_t now)
{
	return now + SHIM_REQUEST_TIMEOUT_MS * NS_PER_MS;
}

/* Out of fds: give up the reserve for a moment to take one off the queue and close it. */
static void shed_one(struct shim *s)
{
	if (s->reserve_fd < 0)
		return;
	CLOSE_FD(s->reserve_fd);
	int fd = accept4(s->listen.fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	shim_note("out of file descriptors: a connection was refused");
}

void conn_accept(struct shim *s)
{
	for (int i = 0; i < ACCEPTS_EACH && s->listen.fd >= 0; i++) {
		int fd = accept4(s->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				shed_one(s);
			return;
		}
		struct conn *c = s->nconns < SHIM_CONNS_MAX ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			close(fd);
			continue;
		}
		c->src = (struct shim_source){.kind = SOURCE_CONN, .fd = fd, .owner = c};
		c->deadline_ns = deadline_from(shim_now_ns());
		(void)shim_packet_prepare(fd);
		if (shim_watch(s, &c->src, EPOLLIN | EPOLLRDHUP) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->nconns++;
	}
}

void conn_close(struct shim *s, struct conn *c)
{
	if (c->src.fd < 0)
		return;
	shim_unwatch(s, &c->src);
	free(c->last);
	c->last = NULL;
	c->pid = 0;
	s->nconns--;
}

void conn_sweep(struct shim *s)
{
	struct conn *c = s->conns;
	while (c) {
		struct conn *next = c->next;
		if (c->src.fd < 0) {
			if (c->prev)
				c->prev->next = next;
			else
				s->conns = next;
			if (next)
				next->prev = c->prev;
			free(c);
		}
		c = next;
	}
}

void conn_close_all(struct shim *s)
{
	for (struct conn *c = s->conns; c; c = c->next)
		conn_close(s, c);
	conn_sweep(s);
}

int conn_send(struct shim *s, struct conn *c, const json_t *msg, int fd)
{
	if (c->src.fd < 0)
		return -EPIPE;
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	int r = shim_packet_send(c->src.fd, text, strlen(text), fd, MSG_DONTWAIT);
	if (r < 0)
		conn_close(s, c);
	return r;
}

/* The last message of c: sent now, or once there is room; then c is closed. */
int conn_send_last_text(struct shim *s, struct conn *c, const char *text)
{
	if (c->src.fd < 0)
		return -EPIPE;
	c->pid = 0;
	size_t len = strlen(text);
	int r = shim_packet_send(c->src.fd, text, len, -1, MSG_DONTWAIT);
	if (r == -EAGAIN && (c->last = strdup(text))) {
		c->last_len = len;
		c->deadline_ns = deadline_from(shim_now_ns());
		if ((r = shim_rewatch(s, &c->src, EPOLLOUT | EPOLLRDHUP)) == 0)
			return 0;
	}
	conn_close(s, c);
	return r;
}

static void flush_last(struct shim *s, struct conn *c)
{
	int r = shim_packet_send(c->src.fd, c->last, c->last_len, -1, MSG_DONTWAIT);
	if (r != -EAGAIN)
		conn_close(s, c);
}

static void read_request(struct shim *s, struct conn *c)
{
	size_t len = 0;
	int fd = -1;
	int r = shim_packet_recv(c->src.fd, s->buf, SHIM_MSG_MAX + 1, MSG_DONTWAIT, &len, &fd);
	if (r == -EAGAIN)
		return;
	c->requested = true;
	struct error err = {0};
	if (r == -EMSGSIZE) {
		error_set(&err, E2BIG, "a request is at most %d bytes", SHIM_MSG_MAX);
		reply_error(s, c, &err);
	} else if (r == 0 && len > 0) {
		json_error_t jerr;
		_cleanup_json_ json_t *req = json_loadb(s->buf, len, JSON_REJECT_DUPLICATES, &jerr);
		if (json_is_object(req)) {
			request_handle(s, c, req, TAKE_FD(fd));
		} else {
			error_set(&err, EINVAL, "the request is not a JSON object: %s",
				  req ? "another value" : jerr.text);
			reply_error(s, c, &err);
		}
	}
	CLOSE_FD(fd);
	/* one request, one reply; a watcher stays for its notices */
	if (c->src.fd >= 0 && c->pid <= 0 && !c->last)
		conn_close(s, c);
}

void conn_on_event(struct shim *s, struct conn *c, uint32_t events)
{
	if (c->last) {
		if (events & EPOLLOUT)
			flush_last(s, c);
		else if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
			conn_close(s, c);
		return;
	}
	if (!c->requested && (events & EPOLLIN)) {
		read_request(s, c);
		return;
	}
	/* after its request, a client has nothing more to say: more, or its end, ends it */
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
		conn_close(s, c);
}

void conn_notify_output(struct shim *s, pid_t pid)
{
	for (struct conn *c = s->conns; c; c = c->next) {
		if (c->src.fd < 0 || c->pid != pid || c->last)
			continue;
		int r = shim_packet_send(c->src.fd, output_notice, sizeof(output_notice) - 1, -1,
					 MSG_DONTWAIT);
		/* no room: a notice is waiting unread already, and says the same */
		if (r < 0 && r != -EAGAIN)
			conn_close(s, c);
	}
}

void conn_notify_exit(struct shim *s, const struct proc *p)
{
	_cleanup_free_ char *text = NULL;
	for (struct conn *c = s->conns; c; c = c->next) {
		if (c->src.fd < 0 || c->pid != p->pid || c->last)
			continue;
		if (!text && !(text = proc_exit_message(p))) {
			conn_close(s, c);
			continue;
		}
		conn_send_last_text(s, c, text);
	}
}

void conn_tick(struct shim *s, uint64_t now)
{
	for (struct conn *c = s->conns; c; c = c->next)
		if (c->src.fd >= 0 && (!c->requested || c->last) && now >= c->deadline_ns)
			conn_close(s, c);
}

uint64_t conn_next_deadline(const struct shim *s)
{
	uint64_t next = 0;
	for (const struct conn *c = s->conns; c; c = c->next)
		if (c->src.fd >= 0 && (!c->requested || c->last) &&
		    (!next || c->deadline_ns < next))
			next = c->deadline_ns;
	return next;
}
