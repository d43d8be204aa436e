/*
 * relay.c - an allow-mode sandbox's resolver and proxy. See relay.h.
 *
 * Threads: one reads the resolver's UDP socket, one accepts its TCP
 * connections, one accepts the proxy's; each query being resolved and
 * each connection has a thread of its own (and a second one while it
 * splices, one per direction), bounded by RELAY_DNS_INFLIGHT and
 * RELAY_CONNECTIONS_MAX. Upstream names are resolved with glibc's
 * resolver (res_nquery), one resolver state per query.
 */
#include "network/relay.h"

#include "base/clock.h"
#include "base/fileio.h"
#include "egress/dns.h"
#include "egress/peek.h"
#include "network/link.h"
#include "network/table.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/netfilter_ipv4.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RESOLVED_MAX  32 /* A records kept of one answer */
#define BIND_RETRY_MS 2000

struct relay {
	struct relay_config c;
	int udp, dns_tcp, proxy;
	sem_t dns_slots;
	atomic_int connections;
	pthread_mutex_t events_lock;
	size_t events_written;
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- events ------------------------------------------------------------ */

static void event_detail(struct relay *r, const char *host, uint32_t addr, uint16_t port,
			 const char *reason, const char *detail)
{
	if (r->c.events_fd < 0)
		return;
	char text[INET_ADDRSTRLEN] = "";
	struct in_addr a = {.s_addr = htonl(addr)};
	if (addr)
		inet_ntop(AF_INET, &a, text, sizeof(text));
	json_t *j =
	    json_pack("{s:I, s:s, s:s?, s:s?, s:i, s:s, s:s?}", "time", (json_int_t)wall_clock_ms(),
		      "type", "egress_denied", "host", host && *host ? host : NULL, "address",
		      addr ? text : NULL, "port", (int)port, "reason", reason, "detail", detail);
	char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!line)
		return;
	pthread_mutex_lock(&r->events_lock);
	size_t n = strlen(line);
	if (r->events_written + n + 1 <= RELAY_EVENTS_MAX - 64) {
		line[n] = '\n'; /* json_dumps left room: its NUL */
		if (write(r->c.events_fd, line, n + 1) == (ssize_t)(n + 1))
			r->events_written += n + 1;
	} else if (r->events_written < RELAY_EVENTS_MAX) {
		static const char full[] = "{\"type\":\"events_capped\"}\n";
		(void)!write(r->c.events_fd, full, sizeof(full) - 1);
		r->events_written = RELAY_EVENTS_MAX;
	}
	pthread_mutex_unlock(&r->events_lock);
	free(line);
}

static void event(struct relay *r, const char *host, uint32_t addr, uint16_t port,
		  const char *reason)
{
	event_detail(r, host, addr, port, reason, NULL);
}

/* ---- which addresses a sandbox may reach ----------------------------------- */

/* Why a may not be reached, or NULL. */
static const char *refusal(const struct relay *r, uint32_t a)
{
	struct addr x = {.b = {[10] = 0xff, [11] = 0xff}};
	x.b[12] = (uint8_t)(a >> 24);
	x.b[13] = (uint8_t)(a >> 16);
	x.b[14] = (uint8_t)(a >> 8);
	x.b[15] = (uint8_t)a;
	enum addr_class why;
	if ((a >> (32 - NET_SUBNET_PREFIX)) == (NET_SUBNET_V4 >> (32 - NET_SUBNET_PREFIX)))
		return "sandbox"; /* even when --allow-cidr covers the sandboxes' subnet */
	if (!addr_is_reachable(&x, r->c.allowed, r->c.nallowed, &why))
		return addr_class_name(why);
	if (net_addr_is_local(a)) /* its addresses, and any local route's (AnyIP) */
		return "host";
	return NULL;
}

/*
 * name's IPv4 addresses, from upstream, in *n of out. 0; -ENOENT when the
 * name has none (NXDOMAIN, or no A record); -EIO when upstream fails.
 */
static int resolve(const struct relay *r, const char *name, uint32_t *out, size_t *n)
{
	struct __res_state st;
	memset(&st, 0, sizeof(st));
	if (res_ninit(&st) < 0)
		return -EIO;
	if (r->c.resolver) {
		st.nscount = 1;
		st.nsaddr_list[0] = (struct sockaddr_in){.sin_family = AF_INET,
							 .sin_port = htons(r->c.resolver_port),
							 .sin_addr.s_addr = htonl(r->c.resolver)};
	}
	st.options &= ~(unsigned long)(RES_DNSRCH | RES_DEFNAMES);
	uint8_t answer[DNS_MSG_MAX];
	int len = res_nquery(&st, name, ns_c_in, ns_t_a, answer, sizeof(answer));
	int herr = st.res_h_errno;
	res_nclose(&st);
	if (len < 0)
		return herr == HOST_NOT_FOUND || herr == NO_DATA ? -ENOENT : -EIO;
	ns_msg msg;
	if (ns_initparse(answer, len, &msg) < 0)
		return -EIO;
	*n = 0;
	for (int i = 0; i < ns_msg_count(msg, ns_s_an) && *n < RESOLVED_MAX; i++) {
		ns_rr rr;
		if (ns_parserr(&msg, ns_s_an, i, &rr) < 0)
			return -EIO;
		if (ns_rr_type(rr) == ns_t_a && ns_rr_class(rr) == ns_c_in &&
		    ns_rr_rdlen(rr) == 4) {
			const uint8_t *d = ns_rr_rdata(rr);
			out[(*n)++] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 |
				      (uint32_t)d[2] << 8 | d[3];
		}
	}
	return *n ? 0 : -ENOENT;
}

/* The reachable ones of name's addresses, in *n of out: 0, -ENOENT, -EIO, -EACCES. */
static int resolve_reachable(struct relay *r, const char *name, uint16_t port, uint32_t *out,
			     size_t *n)
{
	uint32_t all[RESOLVED_MAX];
	size_t nall = 0;
	int rc = resolve(r, name, all, &nall);
	if (rc < 0) {
		if (rc == -ENOENT)
			event(r, name, 0, port, "unresolved");
		return rc;
	}
	*n = 0;
	const char *why = NULL;
	for (size_t i = 0; i < nall; i++) {
		const char *w = refusal(r, all[i]);
		if (!w)
			out[(*n)++] = all[i];
		else if (!why)
			why = w;
	}
	if (why) /* even when others passed: the attempt is worth seeing */
		event(r, name, all[0], port, *n ? "refused_address_some" : "refused_address");
	return *n ? 0 : -EACCES;
}

/* ---- the resolver ------------------------------------------------------- */

static ssize_t dns_answer(struct relay *r, const uint8_t *q, size_t len, bool tcp, uint8_t *out,
			  size_t outlen)
{
	struct dns_query dq;
	int rc = dns_query_parse(q, len, &dq);
	if (rc == -EINVAL)
		return dns_error_build(dq.id, DNS_RCODE_FORMERR, out, outlen);
	if (rc == -EOPNOTSUPP)
		return dns_error_build(dq.id, DNS_RCODE_NOTIMP, out, outlen);
	if (rc < 0)
		return -1; /* not even a header: dropped */
	size_t max = tcp ? DNS_MSG_MAX : dns_query_udp_max(&dq);
	if (!egress_policy_allows_name(r->c.policy, dq.name)) {
		event(r, dq.name, 0, 53, "not_allowed");
		return dns_answer_build(q, &dq, DNS_RCODE_NXDOMAIN, NULL, 0, 0, max, out, outlen);
	}
	if (dq.qtype != DNS_TYPE_A)
		return dns_answer_build(q, &dq, DNS_RCODE_NOERROR, NULL, 0, 0, max, out, outlen);
	uint32_t addrs[RESOLVED_MAX];
	size_t n = 0;
	rc = resolve_reachable(r, dq.name, 53, addrs, &n);
	if (rc == -ENOENT)
		return dns_answer_build(q, &dq, DNS_RCODE_NXDOMAIN, NULL, 0, 0, max, out, outlen);
	if (rc == -EIO)
		return dns_answer_build(q, &dq, DNS_RCODE_SERVFAIL, NULL, 0, 0, max, out, outlen);
	uint8_t a4[RESOLVED_MAX][4];
	for (size_t i = 0; i < n; i++) {
		a4[i][0] = (uint8_t)(addrs[i] >> 24);
		a4[i][1] = (uint8_t)(addrs[i] >> 16);
		a4[i][2] = (uint8_t)(addrs[i] >> 8);
		a4[i][3] = (uint8_t)addrs[i];
	}
	return dns_answer_build(q, &dq, DNS_RCODE_NOERROR, n ? (const uint8_t(*)[4])a4 : NULL, n,
				60, max, out, outlen);
}

struct udp_query {
	struct relay *r;
	struct sockaddr_in peer;
	size_t len;
	uint8_t msg[DNS_MSG_MAX];
};

static void *udp_query_main(void *arg)
{
	struct udp_query *uq = arg;
	uint8_t out[DNS_MSG_MAX];
	ssize_t n = dns_answer(uq->r, uq->msg, uq->len, false, out, sizeof(out));
	if (n > 0)
		(void)sendto(uq->r->udp, out, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&uq->peer,
			     sizeof(uq->peer));
	sem_post(&uq->r->dns_slots);
	free(uq);
	return NULL;
}

static bool spawn(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	bool ok = pthread_create(&t, &attr, fn, arg) == 0;
	pthread_attr_destroy(&attr);
	return ok;
}

static bool from_sandbox(const struct relay *r, const struct sockaddr_in *peer)
{
	return peer->sin_family == AF_INET && ntohl(peer->sin_addr.s_addr) == r->c.sandbox;
}

static void *udp_main(void *arg)
{
	struct relay *r = arg;
	for (;;) {
		struct udp_query *uq = malloc(sizeof(*uq));
		if (!uq) {
			sleep_ms(100);
			continue;
		}
		socklen_t plen = sizeof(uq->peer);
		ssize_t n = recvfrom(r->udp, uq->msg, sizeof(uq->msg), 0,
				     (struct sockaddr *)&uq->peer, &plen);
		/* busy: dropped, and the client asks again */
		if (n <= 0 || !from_sandbox(r, &uq->peer) || sem_trywait(&r->dns_slots) < 0) {
			free(uq);
			continue;
		}
		uq->r = r;
		uq->len = (size_t)n;
		if (!spawn(udp_query_main, uq)) {
			sem_post(&r->dns_slots);
			free(uq);
		}
	}
	return NULL;
}

/* ---- connections: read with a deadline, write all --------------------------- */

struct conn {
	struct relay *r;
	int fd;
};

static ssize_t read_by(int fd, void *buf, size_t len, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int rc = poll(&p, 1, (int)left);
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (rc <= 0)
			continue;
		ssize_t n = read(fd, buf, len);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			return n < 0 ? -errno : n;
	}
}

static int write_all_fd(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void *dns_tcp_main(void *arg)
{
	struct conn *c = arg;
	uint8_t msg[DNS_MSG_MAX], out[DNS_MSG_MAX + 2];
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	if (getpeername(c->fd, (struct sockaddr *)&peer, &plen) < 0 || !from_sandbox(c->r, &peer))
		goto done;
	for (;;) {
		int64_t deadline = mono_ms() + RELAY_PEEK_TIMEOUT_MS;
		uint8_t hdr[2];
		size_t got = 0;
		while (got < 2) {
			ssize_t n = read_by(c->fd, hdr + got, 2 - got, deadline);
			if (n <= 0)
				goto done;
			got += (size_t)n;
		}
		size_t len = (size_t)hdr[0] << 8 | hdr[1];
		if (len > sizeof(msg))
			goto done;
		for (got = 0; got < len;) {
			ssize_t n = read_by(c->fd, msg + got, len - got, deadline);
			if (n <= 0)
				goto done;
			got += (size_t)n;
		}
		/* within the same bound as UDP's queries: busy, the connection goes */
		if (sem_trywait(&c->r->dns_slots) < 0)
			goto done;
		ssize_t n = dns_answer(c->r, msg, len, true, out + 2, sizeof(out) - 2);
		sem_post(&c->r->dns_slots);
		if (n <= 0)
			goto done;
		out[0] = (uint8_t)(n >> 8);
		out[1] = (uint8_t)n;
		if (write_all_fd(c->fd, out, (size_t)n + 2) < 0)
			goto done;
	}
done:
	close(c->fd);
	atomic_fetch_sub(&c->r->connections, 1);
	free(c);
	return NULL;
}

/* ---- the proxy ------------------------------------------------------------ */

/* Refuse a connection: an HTTP client gets a 403 that says why, any other a reset. */
static void refuse(int fd, bool http, const char *host, uint16_t port, const char *why)
{
	if (http) {
		char text[512];
		int n = snprintf(text, sizeof(text),
				 "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
				 "Connection: close\r\n\r\n"
				 "agentbox: egress to %s:%u is refused (%s)\n",
				 host && *host ? host : "?", port, why);
		(void)write_all_fd(fd, text, (size_t)n);
		return;
	}
	struct linger l = {.l_onoff = 1, .l_linger = 0};
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

static int connect_by(uint32_t addr, uint16_t port, int64_t deadline_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int64_t left = deadline_ms - mono_ms();
	int err = 0;
	socklen_t elen = sizeof(err);
	if (left <= 0 || poll(&p, 1, (int)left) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
		close(fd);
		return -(err ? err : ETIMEDOUT);
	}
	int flags = fcntl(fd, F_GETFL);
	(void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	return fd;
}

/*
 * Move from's bytes to to, through a pipe, until from ends them; then end
 * to's side (half-close). On an error, both sockets are shut down whole,
 * so that the other direction's thread wakes up too.
 */
static void one_way(int from, int to)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		shutdown(from, SHUT_RDWR);
		shutdown(to, SHUT_RDWR);
		return;
	}
	/* fewer, larger moves; a pipe's pages are taken only as bytes pass */
	(void)fcntl(p[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
	bool failed = false;
	for (;;) {
		ssize_t n = splice(from, NULL, p[1], NULL, RELAY_PIPE_SIZE, SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			failed = n < 0;
			break;
		}
		while (n > 0) {
			ssize_t m = splice(p[0], NULL, to, NULL, (size_t)n, SPLICE_F_MOVE);
			if (m < 0 && errno == EINTR)
				continue;
			if (m <= 0) {
				failed = true;
				goto out;
			}
			n -= m;
		}
	}
out:
	if (failed) {
		shutdown(from, SHUT_RDWR);
		shutdown(to, SHUT_RDWR);
	} else {
		shutdown(to, SHUT_WR);
	}
	close(p[0]);
	close(p[1]);
}

struct way {
	int from, to;
};

static void *way_main(void *arg)
{
	struct way *w = arg;
	one_way(w->from, w->to);
	return NULL;
}

/* Both ways at once, each in a thread of its own, on blocking sockets; until both end. */
static void splice_both(int a, int b)
{
	struct way back = {.from = b, .to = a};
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	bool threaded = pthread_create(&t, &attr, way_main, &back) == 0;
	pthread_attr_destroy(&attr);
	if (!threaded)
		return;
	one_way(a, b);
	pthread_join(t, NULL);
}

static void proxy(struct relay *r, int fd)
{
	struct sockaddr_in peer, orig;
	socklen_t plen = sizeof(peer), olen = sizeof(orig);
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) < 0 || !from_sandbox(r, &peer) ||
	    getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &olen) < 0)
		return;
	uint32_t odst = ntohl(orig.sin_addr.s_addr);
	uint16_t port = ntohs(orig.sin_port);
	/* told HTTP(S)_PROXY (EGRESS_PROXY_URL): the client speaks to us as to a proxy.
	 * (The gateway's own port is never reached so: the redirect leaves that tuple
	 * as it is, and the input chain takes only redirected connections.) */
	struct in_addr proxy_addr;
	inet_pton(AF_INET, EGRESS_PROXY_ADDRESS, &proxy_addr);
	bool to_proxy = port == NET_PROXY_PORT && odst == ntohl(proxy_addr.s_addr);

	static _Thread_local uint8_t buf[PEEK_MAX];
	size_t len = 0;
	struct peek pk = {.kind = PEEK_MORE};
	int64_t deadline = mono_ms() + RELAY_PEEK_TIMEOUT_MS;
	int rc = 0;
	while (pk.kind == PEEK_MORE) {
		ssize_t n = len < sizeof(buf) ? read_by(fd, buf + len, sizeof(buf) - len, deadline)
					      : -E2BIG;
		if (n <= 0) {
			if (n < 0 && n != -ECONNRESET)
				event(r, NULL, odst, port,
				      n == -ETIMEDOUT ? "no_host" : "unreadable");
			return;
		}
		len += (size_t)n;
		if ((rc = peek_parse(buf, len, &pk)) < 0)
			break;
	}
	bool http = pk.kind == PEEK_HTTP || pk.kind == PEEK_CONNECT || (rc < 0 && buf[0] != 0x16);
	if (rc < 0) {
		event(r, NULL, odst, port, rc == -ENOENT ? "no_host" : "unreadable");
		refuse(fd, http, NULL, port,
		       rc == -ENOENT ? "no server name" : "unreadable request");
		return;
	}
	if (to_proxy) {
		if (pk.kind == PEEK_TLS) {
			event(r, pk.host, odst, port, "unreadable");
			return refuse(fd, false, pk.host, port, "TLS to the proxy port");
		}
		port = pk.port ? pk.port : 80;
	} else if (pk.kind == PEEK_CONNECT) {
		event(r, pk.host, odst, port, "unreadable");
		return refuse(fd, true, pk.host, port, "CONNECT is for the proxy's address");
	}
	if (!egress_policy_allows(r->c.policy, pk.host, port)) {
		event(r, pk.host, odst, port, "not_allowed");
		return refuse(fd, http, pk.host, port, "not in the sandbox's allow list");
	}
	uint32_t addrs[RESOLVED_MAX];
	size_t n = 0;
	if ((rc = resolve_reachable(r, pk.host, port, addrs, &n)) < 0)
		return refuse(fd, http, pk.host, port,
			      rc == -EACCES ? "its address is refused" : "it does not resolve");
	int up = -1;
	deadline = mono_ms() + RELAY_CONNECT_TIMEOUT_MS;
	for (size_t i = 0; i < n && up < 0; i++)
		up = connect_by(addrs[i], port, deadline);
	if (up < 0)
		return refuse(fd, http, pk.host, port, "it does not answer");
	static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	if (r->c.intercept && pk.kind != PEEK_HTTP &&
	    r->c.intercept_wants(r->c.intercept, pk.host)) {
		/* a secret's host, over TLS: that TLS ends here, and its request gets the
		 * values (never over plain HTTP: such a request keeps its placeholders) */
		struct error err = {0};
		size_t skip = pk.kind == PEEK_CONNECT ? pk.head_len : 0;
		if (pk.kind == PEEK_CONNECT &&
		    write_all_fd(fd, established, sizeof(established) - 1) < 0) {
			close(up);
			return;
		}
		rc = r->c.intercept_serve(r->c.intercept, fd, buf + skip, len - skip, true, up,
					  pk.host, &err);
		/* a refusal, not a connection that merely ended badly (a reset, a timeout) */
		if (rc == -EPROTO || rc == -EINVAL || rc == -EACCES || rc == -E2BIG || rc == -EPERM)
			event_detail(r, pk.host, odst, port, "intercept_refused", err.msg);
		close(up);
		return;
	}
	if (pk.kind == PEEK_CONNECT)
		rc = write_all_fd(fd, established, sizeof(established) - 1) < 0 ||
			     write_all_fd(up, buf + pk.head_len, len - pk.head_len) < 0
			 ? -EIO
			 : 0;
	else
		rc = write_all_fd(up, buf, len);
	if (rc == 0)
		splice_both(fd, up);
	close(up);
}

static void *proxy_main(void *arg)
{
	struct conn *c = arg;
	proxy(c->r, c->fd);
	close(c->fd);
	atomic_fetch_sub(&c->r->connections, 1);
	free(c);
	return NULL;
}

/* Accept on fd forever, a thread of fn for each connection, within the bound. */
struct acceptor {
	struct relay *r;
	int fd;
	void *(*fn)(void *);
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;
	for (;;) {
		int fd = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				sleep_ms(50);
			continue;
		}
		struct conn *c = malloc(sizeof(*c));
		if (!c || atomic_fetch_add(&a->r->connections, 1) >= RELAY_CONNECTIONS_MAX) {
			if (c)
				atomic_fetch_sub(&a->r->connections, 1);
			free(c);
			close(fd);
			continue;
		}
		*c = (struct conn){.r = a->r, .fd = fd};
		if (!spawn(a->fn, c)) {
			atomic_fetch_sub(&a->r->connections, 1);
			close(fd);
			free(c);
		}
	}
	return NULL;
}

/* ---- setting up ----------------------------------------------------------- */

/* A socket on the gateway; the address may still be held a moment by the slot's last relay. */
static int bind_on(uint32_t addr, uint16_t port, int type, struct error *err)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_set_errno(err, errno, "relay: socket");
	int one = 1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
	int64_t until = mono_ms() + BIND_RETRY_MS;
	int rc;
	while ((rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0 && errno == EADDRINUSE &&
	       mono_ms() < until)
		sleep_ms(20);
	if (rc < 0 || (type == SOCK_STREAM && listen(fd, 128) < 0)) {
		int e = errno;
		close(fd);
		return error_set_errno(err, e, "relay: bind port %u", port);
	}
	return fd;
}

int relay_bind(const struct relay_config *c, struct relay **ret, struct error *err)
{
	struct relay *r = calloc(1, sizeof(*r));
	if (!r)
		return error_set(err, ENOMEM, "relay: out of memory");
	r->c = *c;
	r->udp = r->dns_tcp = r->proxy = -1;
	pthread_mutex_init(&r->events_lock, NULL);
	sem_init(&r->dns_slots, 0, RELAY_DNS_INFLIGHT);
	int fd;
	if ((fd = bind_on(c->gateway, NET_DNS_PORT, SOCK_DGRAM, err)) < 0)
		goto fail;
	r->udp = fd;
	if ((fd = bind_on(c->gateway, NET_DNS_PORT, SOCK_STREAM, err)) < 0)
		goto fail;
	r->dns_tcp = fd;
	if (!c->dns_only && (fd = bind_on(c->gateway, NET_PROXY_PORT, SOCK_STREAM, err)) < 0)
		goto fail;
	r->proxy = c->dns_only ? -1 : fd;
	*ret = r;
	return 0;
fail:
	if (r->udp >= 0)
		close(r->udp);
	if (r->dns_tcp >= 0)
		close(r->dns_tcp);
	free(r);
	return fd;
}

void relay_configure(struct relay *r, const struct relay_config *c)
{
	r->c = *c;
	if (c->dns_only && r->proxy >= 0) {
		close(r->proxy);
		r->proxy = -1;
	}
}

_Noreturn void relay_run(struct relay *r)
{
	static struct acceptor dns, prx;
	dns = (struct acceptor){.r = r, .fd = r->dns_tcp, .fn = dns_tcp_main};
	prx = (struct acceptor){.r = r, .fd = r->proxy, .fn = proxy_main};
	if (!spawn(accept_main, &dns) || (r->proxy >= 0 && !spawn(accept_main, &prx)))
		_exit(1);
	udp_main(r);
	_exit(1);
}
