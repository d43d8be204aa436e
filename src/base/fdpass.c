/*
 * fdpass.c - SCM_RIGHTS in and out (fdpass.h).
 */
#include "base/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

void fdpass_attach(struct msghdr *mh, union fdpass_buf *buf, const int *fds, size_t nfds)
{
	if (nfds == 0 || nfds > FDPASS_MAX)
		return;
	memset(buf, 0, sizeof(*buf));
	mh->msg_control = buf->buf;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	struct cmsghdr *c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
}

size_t fdpass_take(struct msghdr *mh, int *fds, size_t max)
{
	size_t n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

ssize_t fdpass_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max,
		    size_t *ret_nfds, int *ret_flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	union fdpass_buf control;
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = control.buf,
			    .msg_controllen = sizeof(control.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	size_t k = fdpass_take(&mh, fds, max);
	if (ret_nfds)
		*ret_nfds = k;
	if (ret_flags)
		*ret_flags = mh.msg_flags;
	return n;
}
