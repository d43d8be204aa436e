/*
 * probe-net.c - network probes and the cross-sandbox pair: "plant" makes
 * objects in one sandbox, X1/X2 look for them from another.
 *
 * No probe here ever completes a connection to a real address: before any
 * TCP connect to an outside address, a UDP connect (which sends nothing)
 * asks the kernel for a route, and only when there is none is TCP tried.
 */
#include "probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define PLANT_KEY  0x4147454e /* "AGEN" */
#define PLANT_PORT 47047

/* ------------------------------------------------------------------ */
/* N1: only lo, no route out */

static int udp_route_err(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int e = connect(fd, sa, len) < 0 ? errno : 0; /* a route lookup; sends nothing */
	close(fd);
	return e;
}

static int tcp_connect_err(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int e = connect(fd, sa, len) < 0 ? errno : 0;
	close(fd); /* EINPROGRESS: abandoned at once */
	return e;
}

static void no_route(const char *what, const struct sockaddr *sa, socklen_t len)
{
	char label[96];
	int e = udp_route_err(sa, len);
	snprintf(label, sizeof(label), "route:%s", what);
	if (e == 0) {
		check(false, "%s=exists", label);
		return; /* never send a SYN where there is a route */
	}
	expect_err(label, e, "ENETUNREACH|EAFNOSUPPORT|EPERM");
	if (e != ENETUNREACH)
		return;
	snprintf(label, sizeof(label), "tcp:%s", what);
	expect_err(label, tcp_connect_err(sa, len), "ENETUNREACH");
}

void probe_N1(void)
{
	FILE *f = fopen("/proc/net/dev", "re");
	if (!f) {
		check(false, "/proc/net/dev=%s", errname(errno));
	} else {
		char line[512];
		int n = 0, lineno = 0;
		while (fgets(line, sizeof(line), f)) {
			if (++lineno <= 2)
				continue; /* headers */
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = '\0';
			char *name = line + strspn(line, " ");
			n++;
			check(strcmp(name, "lo") == 0, "if:%s", name);
		}
		fclose(f);
		check(n == 1, "interfaces=%d", n);
	}

	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(80)};
	inet_pton(AF_INET, "10.0.0.1", &a4.sin_addr);
	no_route("10.0.0.1:80", (struct sockaddr *)&a4, sizeof(a4));
	a4.sin_port = htons(53);
	inet_pton(AF_INET, "1.1.1.1", &a4.sin_addr);
	no_route("1.1.1.1:53", (struct sockaddr *)&a4, sizeof(a4));
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(53)};
	inet_pton(AF_INET6, "2606:4700:4700::1111", &a6.sin6_addr);
	no_route("[2606:4700:4700::1111]:53", (struct sockaddr *)&a6, sizeof(a6));

	/* Loopback itself: info only. */
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(PLANT_PORT)};
	inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
	obs("lo-tcp=%s", errname(tcp_connect_err((struct sockaddr *)&lo, sizeof(lo))));
}

/* ------------------------------------------------------------------ */
/* N4/N5: raw sockets, netlink, interface changes */

static int socket_err(int domain, int type, int proto)
{
	int fd = socket(domain, type, proto);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

void probe_N4(void)
{
	expect_err("inet-raw-icmp", socket_err(AF_INET, SOCK_RAW, IPPROTO_ICMP), "EPERM");
	expect_err("inet-raw-tcp", socket_err(AF_INET, SOCK_RAW, IPPROTO_TCP), "EPERM");
	expect_err("inet-raw-raw", socket_err(AF_INET, SOCK_RAW, IPPROTO_RAW), "EPERM");
	expect_err("inet6-raw", socket_err(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6),
		   "EPERM|EAFNOSUPPORT");
	expect_err("packet-raw", socket_err(AF_PACKET, SOCK_RAW, htons(0x0003)),
		   "EPERM|EAFNOSUPPORT");
	expect_err("packet-dgram", socket_err(AF_PACKET, SOCK_DGRAM, htons(0x0003)),
		   "EPERM|EAFNOSUPPORT");
}

void probe_N5(void)
{
	/* ip link add / ip addr: rtnetlink; nft: netfilter netlink. */
	expect_err("netlink-route", socket_err(AF_NETLINK, SOCK_RAW, 0), "EPERM|EAFNOSUPPORT");
	expect_err("netlink-route-dgram", socket_err(AF_NETLINK, SOCK_DGRAM, 0),
		   "EPERM|EAFNOSUPPORT");
	expect_err("netlink-netfilter", socket_err(AF_NETLINK, SOCK_RAW, 12), "EPERM|EAFNOSUPPORT");
	expect_err("netlink-generic", socket_err(AF_NETLINK, SOCK_RAW, 16), "EPERM|EAFNOSUPPORT");
	expect_absent("/dev/net/tun", ERR(access("/dev/net/tun", F_OK)));

	/* Rewriting lo's flags with their current value: harmless if allowed. */
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		obs("inet-dgram=%s", errname(errno));
		return;
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		obs("SIOCGIFFLAGS=%s", errname(errno));
	} else {
		obs("lo=%s", (ifr.ifr_flags & IFF_UP) ? "up" : "down");
		expect_err("SIOCSIFFLAGS:lo", ERR(ioctl(fd, SIOCSIFFLAGS, &ifr)), "EPERM|EACCES");
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		expect_err("SIOCSIFMTU:lo", ERR(ioctl(fd, SIOCSIFMTU, &ifr)), "EPERM|EACCES");
	close(fd);
}

/* ------------------------------------------------------------------ */
/* N6: daemon sockets absent, no foreign unix sockets */

static int unix_connect_err(const char *path, bool abstract)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	if (n + 1 >= sizeof(sun.sun_path))
		return ENAMETOOLONG;
	memcpy(sun.sun_path + (abstract ? 1 : 0), path, n);
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int e = connect(fd, (struct sockaddr *)&sun, len) < 0 ? errno : 0;
	close(fd);
	return e;
}

void probe_N6(void)
{
	static const char *const daemons[] = {
	    "/run/agentbox/agentbox.sock", "/run/agentbox.sock",
	    "/var/run/docker.sock",	   "/run/containerd/containerd.sock",
	    "/run/dbus/system_bus_socket", "/run/systemd/private",
	    "/run/systemd/journal/socket", "/tmp/.X11-unix/X0",
	};
	for (size_t i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++)
		expect_err(daemons[i], unix_connect_err(daemons[i], false), "ENOENT");
	for (size_t i = 0; i < opt.nsecret_paths; i++) {
		struct stat st;
		expect_absent(opt.secret_paths[i], ERR(lstat(opt.secret_paths[i], &st)));
		char what[512];
		snprintf(what, sizeof(what), "connect:%s", opt.secret_paths[i]);
		expect_err(what, unix_connect_err(opt.secret_paths[i], false), "ENOENT");
	}
	/* Well-known abstract names of host daemons. */
	static const char *const abstract[] = {"agentbox", "agentboxd", "/org/kernel/udev/udevd",
					       "/tmp/.X11-unix/X0"};
	for (size_t i = 0; i < sizeof(abstract) / sizeof(abstract[0]); i++) {
		char what[128];
		snprintf(what, sizeof(what), "@%s", abstract[i]);
		expect_err(what, unix_connect_err(abstract[i], true), "ECONNREFUSED|EPERM");
	}

	/* /proc/net/unix lists the unix sockets of our network namespace. */
	FILE *f = fopen("/proc/net/unix", "re");
	if (!f) {
		obs("/proc/net/unix=%s", errname(errno));
		return;
	}
	char line[1024];
	int unnamed = 0, named = 0;
	bool header = true;
	while (fgets(line, sizeof(line), f)) {
		if (header) {
			header = false;
			continue;
		}
		/* Num RefCount Protocol Flags Type St Inode [Path] */
		char *save = NULL, *tok = strtok_r(line, " \n", &save);
		int k = 1;
		char *path = NULL;
		while ((tok = strtok_r(NULL, " \n", &save)))
			if (++k == 8)
				path = tok;
		if (!path) {
			unnamed++;
		} else {
			named++;
			if (named <= 5)
				check(false, "unix:%s", path);
		}
	}
	fclose(f);
	check(named == 0, "named-unix=%d", named);
	obs("unnamed-unix=%d", unnamed);
}

/* ------------------------------------------------------------------ */
/* plant / X1 / X2 */

static const char *plant_file(const char *dir)
{
	return join(dir, opt.plant_name);
}

static char plant_mq[256];

static const char *plant_mq_name(void)
{
	snprintf(plant_mq, sizeof(plant_mq), "/%s", opt.plant_name);
	return plant_mq;
}

static void note(const char *what, int err)
{
	fprintf(stderr, "agentbox-probe: plant %s: %s\n", what, err ? strerror(err) : "ok");
}

static int plant_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno;
	int e = write(fd, "planted\n", 8) < 0 ? errno : 0;
	close(fd);
	return e;
}

int mode_plant(const char *arg)
{
	char extra_dir[4096] = "";
	if (arg && arg[0] == '/')
		snprintf(extra_dir, sizeof(extra_dir), "%s", arg);
	else if (arg && *arg)
		opt.plant_name = arg;
	if (strlen(opt.plant_name) > 64 || strchr(opt.plant_name, '/')) {
		fprintf(stderr, "agentbox-probe: plant: bad name\n");
		return 2;
	}

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);

	char tmpf[512], shmf[512], extraf[4200] = "";
	snprintf(tmpf, sizeof(tmpf), "%s", plant_file("/tmp"));
	snprintf(shmf, sizeof(shmf), "%s", plant_file("/dev/shm"));
	note(tmpf, plant_write(tmpf));
	note(shmf, plant_write(shmf));
	if (extra_dir[0]) {
		snprintf(extraf, sizeof(extraf), "%s", plant_file(extra_dir));
		note(extraf, plant_write(extraf));
	}

	int shm = shmget(PLANT_KEY, 4096, IPC_CREAT | 0666);
	note("sysv-shm", shm < 0 ? errno : 0);
	int msq = msgget(PLANT_KEY, IPC_CREAT | 0666);
	note("sysv-msg", msq < 0 ? errno : 0);
	int sem = semget(PLANT_KEY, 1, IPC_CREAT | 0666);
	note("sysv-sem", sem < 0 ? errno : 0);
	struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 64};
	mqd_t mq = mq_open(plant_mq_name(), O_CREAT | O_RDWR | O_CLOEXEC, 0666, &attr);
	note("posix-mq", mq == (mqd_t)-1 ? errno : 0);

	int us = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t n = strlen(opt.plant_name);
	memcpy(sun.sun_path + 1, opt.plant_name, n);
	int e = us < 0 ? errno : 0;
	if (!e && (bind(us, (struct sockaddr *)&sun,
			(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0 ||
		   listen(us, 4) < 0))
		e = errno;
	note("abstract-socket", e);

	int ts = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(PLANT_PORT)};
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	int one = 1;
	e = ts < 0 ? errno : 0;
	if (!e) {
		setsockopt(ts, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ts, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(ts, 4) < 0)
			e = errno;
	}
	note("tcp-127.0.0.1:47047", e);

	printf("planted\n");
	fflush(stdout);

	int sig = 0;
	sigwait(&set, &sig);

	/* Clean up (matters on a host; a sandbox's namespaces vanish anyway). */
	unlink(tmpf);
	unlink(shmf);
	if (extraf[0])
		unlink(extraf);
	if (shm >= 0)
		shmctl(shm, IPC_RMID, NULL);
	if (msq >= 0)
		msgctl(msq, IPC_RMID, NULL);
	if (sem >= 0)
		semctl(sem, 0, IPC_RMID);
	if (mq != (mqd_t)-1) {
		mq_close(mq);
		mq_unlink(plant_mq_name());
	}
	return 0;
}

/* Does /proc/sysvipc/<kind> list our key? Info on the total too. */
static void sysvipc_list(const char *kind)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/sysvipc/%s", kind);
	FILE *f = fopen(path, "re");
	if (!f) {
		obs("%s=%s", path, errname(errno));
		return;
	}
	int total = 0;
	bool ours = false;
	bool header = true;
	while (fgets(line, sizeof(line), f)) {
		if (header) {
			header = false;
			continue;
		}
		total++;
		long key = strtol(line, NULL, 10);
		if (key == PLANT_KEY)
			ours = true;
	}
	fclose(f);
	check(!ours, "%s=%d%s", path, total, ours ? "(planted-key-visible)" : "");
}

void probe_X1(void)
{
	struct stat st;
	expect_absent(plant_file("/tmp"), ERR(lstat(plant_file("/tmp"), &st)));
	expect_absent(plant_file("/dev/shm"), ERR(lstat(plant_file("/dev/shm"), &st)));
	/* Invisible (ENOENT) or not even reachable (filtered). */
	expect_err("sysv-shm", ERR(shmget(PLANT_KEY, 0, 0)), "ENOENT|EPERM|ENOSYS");
	expect_err("sysv-msg", ERR(msgget(PLANT_KEY, 0)), "ENOENT|EPERM|ENOSYS");
	expect_err("sysv-sem", ERR(semget(PLANT_KEY, 0, 0)), "ENOENT|EPERM|ENOSYS");
	errno = 0;
	mqd_t mq = mq_open(plant_mq_name(), O_RDONLY | O_CLOEXEC);
	int e = mq == (mqd_t)-1 ? errno : 0;
	if (mq != (mqd_t)-1)
		mq_close(mq);
	expect_err("posix-mq", e, "ENOENT|EPERM|ENOSYS");
	sysvipc_list("shm");
	sysvipc_list("msg");
	sysvipc_list("sem");
}

void probe_X2(void)
{
	char what[128];
	snprintf(what, sizeof(what), "@%s", opt.plant_name);
	expect_err(what, unix_connect_err(opt.plant_name, true), "ECONNREFUSED|EPERM");
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(PLANT_PORT)};
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int e = fd < 0 ? errno : 0;
	if (!e && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		e = errno;
	if (fd >= 0)
		close(fd);
	expect_err("tcp:127.0.0.1:47047", e, "ECONNREFUSED|ENETUNREACH");

	/* No process of the planting sandbox is visible. */
	DIR *d = opendir("/proc");
	if (!d) {
		check(false, "/proc=%s", errname(errno));
		return;
	}
	struct dirent *de;
	int seen = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[300], cmd[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		long n = slurp(path, cmd, sizeof(cmd));
		if (n <= 0)
			continue;
		/* argv is NUL-separated: look for a "plant" argument. */
		for (long off = 0; off < n; off += (long)strlen(cmd + off) + 1)
			if (strcmp(cmd + off, "plant") == 0) {
				check(false, "plant-process-visible:pid=%s", de->d_name);
				seen++;
				break;
			}
	}
	closedir(d);
	if (!seen)
		obs("plant-process=invisible");
}
