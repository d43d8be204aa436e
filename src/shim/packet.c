#include "shim/packet.h"

#include "base/fdpass.h"

#include "shim/protocol.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for the packet and the kernel's overhead per packet. */
#define SNDBUF_WANTED (2 * SHIM_MSG_MAX)

int shim_packet_prepare(int fd)
{
	int size = SNDBUF_WANTED;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) == 0)
		return 0;
	return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) < 0 ? -errno : 0;
}

int shim_packet_send(int fd, const void *buf, size_t len, int pass_fd, int flags)
{
	if (len > SHIM_MSG_MAX)
		return -EMSGSIZE;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union fdpass_buf control;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	fdpass_attach(&msg, &control, &pass_fd, pass_fd >= 0 ? 1 : 0);
	for (;;) {
		ssize_t n = sendmsg(fd, &msg, flags | MSG_NOSIGNAL);
		if (n >= 0)
			return 0;
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/* Close every fd of the message's SCM_RIGHTS; return the first if keep. */
static int take_fds(struct msghdr *msg, bool keep)
{
	int first = -1;
	(void)fdpass_take(msg, &first, keep ? 1 : 0);
	return first;
}

int shim_packet_recv(int fd, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd)
{
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	/* room for a few fds: a peer that sends more must not leak them into us */
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	ssize_t n;
	do
		n = recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n > SHIM_MSG_MAX) {
		take_fds(&msg, false);
		return -EMSGSIZE;
	}
	*ret_fd = take_fds(&msg, true);
	*ret_len = (size_t)n;
	return 0;
}
