/*
 * packet.h - one message of the shim protocol (protocol.h) on a
 * SOCK_SEQPACKET socket: a packet of at most SHIM_MSG_MAX bytes, with at
 * most one fd beside it (SCM_RIGHTS). Both ends use these; they allocate
 * nothing and know nothing of JSON.
 */
#ifndef AGENTBOX_SHIM_PACKET_H
#define AGENTBOX_SHIM_PACKET_H

#include <stddef.h>

/*
 * Raise fd's send buffer so that a packet of SHIM_MSG_MAX bytes fits (the
 * kernel refuses a packet larger than the sender's buffer). Privileged
 * callers get it whatever net.core.wmem_max says; others up to that.
 * 0 or -errno.
 */
int shim_packet_prepare(int fd);

/*
 * Send buf as one packet, with pass_fd beside it when >= 0 (it stays
 * ours). flags: 0 or MSG_DONTWAIT (MSG_NOSIGNAL is implied). 0, -EMSGSIZE
 * above SHIM_MSG_MAX, -EAGAIN when the peer has no room, or -errno.
 */
int shim_packet_send(int fd, const void *buf, size_t len, int pass_fd, int flags);

/*
 * Receive one packet into buf, which must hold SHIM_MSG_MAX + 1 bytes.
 * flags: 0 or MSG_DONTWAIT. Sets *ret_len (0: the peer closed) and
 * *ret_fd: the fd that came with it (O_CLOEXEC, ours to close), or -1; any
 * further fds are closed. 0, -EMSGSIZE when the packet was larger than
 * SHIM_MSG_MAX or came with more fds than FDPASS_MAX (base/fdpass.h; its
 * fds are closed), -EAGAIN, or -errno.
 */
int shim_packet_recv(int fd, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd);

#endif
