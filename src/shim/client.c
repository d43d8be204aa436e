#include "shim/client.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "shim/packet.h"
#include "shim/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int shim_connect(const char *sandbox_dir, int *ret_fd, struct error *err)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	/* the directory first: its absence is not the absence of a shim */
	_cleanup_close_ int dirfd = open(sandbox_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return error_set_errno(err, errno, "%s", sandbox_dir);
	/* sun_path holds 108 bytes: a longer path goes through the directory's fd */
	if ((size_t)snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", sandbox_dir,
			     SHIM_SOCKET) >= sizeof(addr.sun_path))
		snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dirfd,
			 SHIM_SOCKET);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error_set_errno(err, errno, "socket");
	/* non-blocking: a shim with a full backlog is busy, not a reason to hang */
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno == EAGAIN)
			return error_set(err, EAGAIN, "%s: the shim has too many connections",
					 sandbox_dir);
		/* a shim removes its socket as its sandbox ends */
		if (errno == ENOENT || errno == ECONNREFUSED)
			return error_set(err, ECONNREFUSED, "%s: no shim listens there",
					 sandbox_dir);
		return error_set_errno(err, errno, "%s/%s", sandbox_dir, SHIM_SOCKET);
	}
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
		return error_set_errno(err, errno, "fcntl");
	/* without it only the largest packets fail: a shim_send() error says so */
	(void)shim_packet_prepare(fd);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int shim_send(int fd, const char *json, int pass_fd, struct error *err)
{
	size_t len = strlen(json);
	if (len > SHIM_MSG_MAX)
		return error_set(err, E2BIG, "a request of %zu bytes is above %d", len,
				 SHIM_MSG_MAX);
	int r = shim_packet_send(fd, json, len, pass_fd, 0);
	if (r < 0)
		return error_set_errno(err, -r, "sending to the shim");
	return 0;
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is readable or timeout_ms (-1: forever) has passed. */
static int wait_readable(int fd, int timeout_ms, struct error *err)
{
	int64_t deadline = timeout_ms >= 0 ? monotonic_ms() + timeout_ms : -1;
	for (;;) {
		int left = -1;
		if (deadline >= 0) {
			int64_t now = monotonic_ms();
			left = now >= deadline ? 0 : (int)(deadline - now);
		}
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int n = poll(&pfd, 1, left);
		if (n > 0)
			return 0;
		if (n == 0)
			return error_set(err, ETIMEDOUT, "no reply from the shim in %d ms",
					 timeout_ms);
		if (errno != EINTR)
			return error_set_errno(err, errno, "poll");
	}
}

/* An error reply as -its errno, with its message in err. */
static int error_reply(json_t *msg, struct error *err)
{
	json_t *e = json_object_get(msg, "errno");
	const char *text = json_string_value(json_object_get(msg, "message"));
	if (!json_is_integer(e) || json_integer_value(e) <= 0 || json_integer_value(e) > 4095)
		return error_set(err, EPROTO, "the shim sent a malformed error reply");
	return error_set(err, (int)json_integer_value(e), "%s", text ? text : "shim error");
}

int shim_recv(int fd, int timeout_ms, json_t **ret_msg, int *ret_fd, struct error *err)
{
	_cleanup_free_ char *buf = malloc(SHIM_MSG_MAX + 1);
	if (!buf)
		return error_set(err, ENOMEM, "out of memory");
	size_t len = 0;
	_cleanup_close_ int got_fd = -1;
	int r;
	for (;;) {
		if ((r = wait_readable(fd, timeout_ms, err)) < 0)
			return r;
		r = shim_packet_recv(fd, buf, SHIM_MSG_MAX + 1, MSG_DONTWAIT, &len, &got_fd);
		if (r != -EAGAIN)
			break;
	}
	if (r == -EMSGSIZE)
		return error_set(err, EPROTO, "the shim sent a packet above %d bytes",
				 SHIM_MSG_MAX);
	if (r == -ECONNRESET)
		r = -EPIPE;
	if (r < 0)
		return error_set_errno(err, -r, "reading from the shim");
	if (len == 0)
		return error_set(err, EPIPE, "the shim closed the connection");
	json_error_t jerr;
	_cleanup_json_ json_t *msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (!json_is_object(msg) || !type)
		return error_set(err, EPROTO, "the shim sent a malformed message");
	if (strcmp(type, "error") == 0)
		return error_reply(msg, err);
	*ret_msg = TAKE_PTR(msg);
	if (ret_fd)
		*ret_fd = TAKE_FD(got_fd);
	return 0;
}

int shim_call(const char *sandbox_dir, json_t *request, int pass_fd, int timeout_ms,
	      json_t **ret_reply, int *ret_fd, struct error *err)
{
	_cleanup_free_ char *text = json_dumps(request, JSON_COMPACT);
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int fd = -1;
	int r = shim_connect(sandbox_dir, &fd, err);
	if (r < 0)
		return r;
	if ((r = shim_send(fd, text, pass_fd, err)) < 0)
		return r;
	return shim_recv(fd, timeout_ms, ret_reply, ret_fd, err);
}
