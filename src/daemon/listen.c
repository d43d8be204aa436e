/*
 * listen.c - the daemon's listening sockets: a unix socket (root's, and
 * --socket-user's through its ACL: users.c; its directory made 0755; a
 * leftover socket file of a crash is replaced, a live daemon's is not)
 * and a TCP address (loopback, unless it serves TLS or --insecure-listen
 * says the network is trusted).
 */
#include "daemon/daemon.h"

#include "base/fileio.h"
#include "base/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int listen_unix(const char *path, struct error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return error_set(err, ENAMETOOLONG, "--socket: path too long");
	memcpy(sa.sun_path, path, strlen(path) + 1);
	char dir[sizeof(sa.sun_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	mode_t mask = umask(022); /* the socket's group must reach it: 0755 */
	(void)mkdir_p_at(AT_FDCWD, dirname(dir), 0755);
	umask(mask);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_set_errno(err, errno, "socket");
	/* a socket file nobody answers on is a leftover of a crash: replace it */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return error_set(err, EADDRINUSE, "another agentboxd serves %s", path);
	}
	unlink(path);
	mode_t old = umask(0177); /* root's alone until its ACL lets --socket-user's in */
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 128) < 0) {
		r = errno;
		close(fd);
		return error_set_errno(err, r, "--socket %s", path);
	}
	return fd;
}

/* spec's address into *ss and *ret_len, checked as listen_tcp() says. 0 or -errno with err. */
static int parse_listen(const char *spec, bool tls, bool insecure, struct sockaddr_storage *ret,
			socklen_t *ret_len, struct error *err)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	uint64_t port;
	if (!colon || (size_t)(colon - spec) >= sizeof(host) || parse_u64(colon + 1, &port) < 0 ||
	    port == 0 || port > 65535)
		return error_set(err, EINVAL, "--listen: '%s' is not ADDR:PORT", spec);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
	struct sockaddr_storage ss = {0};
	socklen_t len = 0;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	size_t hl = strlen(host);
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
			return error_set(err, EINVAL, "--listen: bad IPv6 address '%s'", host);
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		len = sizeof(*in6);
	} else {
		if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
			return error_set(err, EINVAL, "--listen: bad IPv4 address '%s'", host);
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		len = sizeof(*in4);
	}
	/* a key sent over a network in clear is a key given away: loopback only, unless told */
	bool loopback = ss.ss_family == AF_INET ? (ntohl(in4->sin_addr.s_addr) >> 24) == 127
						: IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	if (!loopback && !tls && !insecure)
		return error_set(err, EPERM,
				 "--listen %s: not a loopback address, and no TLS: every API key "
				 "would cross the network in clear. Give --tls-cert and --tls-key, "
				 "or pass --insecure-listen for a network you trust",
				 spec);
	*ret = ss;
	*ret_len = len;
	return 0;
}

int listen_tcp_check(const char *spec, bool tls, bool insecure, struct error *err)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	return parse_listen(spec, tls, insecure, &ss, &len, err);
}

int listen_tcp(const char *spec, bool tls, bool insecure, struct error *err)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	int r = parse_listen(spec, tls, insecure, &ss, &len, err);
	if (r < 0)
		return r;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return error_set_errno(err, e, "--listen %s", spec);
	}
	return fd;
}
