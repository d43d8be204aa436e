#include "shim/packet.h"

#include "base/fdpass.h"

#include "shim/protocol.h"

#include <errno.h>
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

int shim_packet_recv(int fd, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd)
{
	int pass_fd = -1, msg_flags = 0;
	ssize_t n = fdpass_recv(fd, buf, size, flags, &pass_fd, 1, NULL, &msg_flags);
	if (n < 0)
		return (int)n;
	if ((msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n > SHIM_MSG_MAX) {
		if (pass_fd >= 0)
			close(pass_fd);
		return -EMSGSIZE;
	}
	*ret_fd = pass_fd;
	*ret_len = (size_t)n;
	return 0;
}
