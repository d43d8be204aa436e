/*
 * fdpass.h - file descriptors beside a message on a unix socket
 * (SCM_RIGHTS): the halves every sender and receiver of ours share.
 *
 * A sender builds its msghdr and attaches fds with fdpass_attach(). A
 * receiver calls fdpass_recv(), which does the recvmsg() and the control
 * buffer, or, with a msghdr of its own, takes the fds with fdpass_take().
 * Nothing here allocates: all of it is safe in a sandbox's init after
 * clone().
 */
#ifndef AGENTBOX_BASE_FDPASS_H
#define AGENTBOX_BASE_FDPASS_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

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

/*
 * Receive one message (one packet, on a SOCK_SEQPACKET or datagram
 * socket) into buf[0..size) and the fds beside it. Every fd is born
 * O_CLOEXEC (MSG_CMSG_CLOEXEC). flags are recvmsg()'s (MSG_DONTWAIT);
 * EINTR is retried.
 *
 * The control buffer has room for FDPASS_MAX fds: the kernel drops any
 * more and sets MSG_CTRUNC. Of those that came, the first max (<=
 * FDPASS_MAX) go to fds[] and the rest are closed, as fdpass_take() does;
 * *ret_nfds, if not NULL, gets how many went to fds[]. *ret_flags, if not
 * NULL, gets the message's flags: MSG_TRUNC when it was longer than size
 * (the rest is lost), MSG_CTRUNC as said. Whether either makes the
 * message bad is the caller's to say (and its fds are then the caller's
 * to close).
 *
 * Returns the payload's length (0 is also what a peer that hung up
 * sends), or -errno, with nothing received.
 */
ssize_t fdpass_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max,
		    size_t *ret_nfds, int *ret_flags);

#endif
