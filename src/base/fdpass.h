/*
 * fdpass.h - file descriptors beside a message on a unix socket
 * (SCM_RIGHTS): the two halves every sender and receiver of ours share.
 */
#ifndef AGENTBOX_BASE_FDPASS_H
#define AGENTBOX_BASE_FDPASS_H

#include <stddef.h>
#include <sys/socket.h>

/* The most fds one of our messages carries. */
#define FDPASS_MAX 4

/* Control buffer for up to FDPASS_MAX fds, aligned for a cmsghdr. */
union fdpass_buf {
	char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
	struct cmsghdr align;
};

/*
 * Attach fds[0..nfds) to mh (nfds <= FDPASS_MAX), using buf as its
 * control buffer. nfds == 0 attaches nothing.
 */
void fdpass_attach(struct msghdr *mh, union fdpass_buf *buf, const int *fds, size_t nfds);

/*
 * Take the fds a received mh carries: the first max go to fds[], every
 * other one is closed (a peer cannot make us hold more than we asked
 * for). Returns how many went to fds[].
 */
size_t fdpass_take(struct msghdr *mh, int *fds, size_t max);

#endif
