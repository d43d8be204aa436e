/*
 * fdpass.c - SCM_RIGHTS in and out (fdpass.h).
 */
#include "base/fdpass.h"

#include <string.h>
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
