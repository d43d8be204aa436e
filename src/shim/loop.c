#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "shim/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define BATCH_MAX 64
/* The timer looks at the wall clock at least this often, for the expiry. */
#define EXPIRY_RECHECK_NS (60ULL * 1000000000ULL)

void shim_note(const char *fmt, ...)
{
	va_list ap;
	fputs("agentbox-shim: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

uint64_t shim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int shim_watch(struct shim *s, struct shim_source *src, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, src->fd, &ev) < 0 ? -errno : 0;
}

int shim_rewatch(struct shim *s, struct shim_source *src, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};
	return epoll_ctl(s->epfd, EPOLL_CTL_MOD, src->fd, &ev) < 0 ? -errno : 0;
}

void shim_unwatch(struct shim *s, struct shim_source *src)
{
	if (src->fd < 0)
		return;
	(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, src->fd, NULL);
	CLOSE_FD(src->fd);
}

void shim_close_listener(struct shim *s)
{
	if (s->listen.fd < 0)
		return;
	shim_unwatch(s, &s->listen);
	(void)unlinkat(s->dirfd, SHIM_SOCKET, 0);
}

void shim_end(struct shim *s, const char *reason, const char *fmt, ...)
{
	if (s->end_reason)
		return;
	s->end_reason = reason;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->end_detail, sizeof(s->end_detail), fmt, ap);
	va_end(ap);
	shim_note("ending the sandbox (%s): %s", reason, s->end_detail);
	shim_close_listener(s);
	if (!s->sb)
		return;
	/* a frozen process does not die of SIGKILL until it is thawed (cgroup v1) */
	struct error err = {0};
	if (s->paused && sandbox_freeze(s->sb, false, &err) < 0)
		shim_note("%s", err.msg);
	s->paused = false;
	int r = sandbox_kill(s->sb);
	if (r < 0)
		shim_note("cannot kill the sandbox: %s", strerror(-r));
}

int shim_need_running(struct shim *s, struct error *err)
{
	if (s->end_reason || !s->sb)
		return error_set(err, ECANCELED, "the sandbox is ending");
	if (s->paused)
		return error_set(err, EBUSY, "the sandbox is paused");
	return 0;
}

static void on_signal(struct shim *s)
{
	struct signalfd_siginfo si;
	while (read(s->signal.fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		shim_end(s, "stopped", "agentbox-shim got signal %u (%s)", si.ssi_signo,
			 strsignal((int)si.ssi_signo));
}

static void on_control(struct shim *s, uint32_t events)
{
	proc_drain_exits(s);
	/* init is gone: the wait returns as soon as its pidfd says so; until
	 * then a hung-up socket must not keep the loop spinning */
	if (events & (EPOLLHUP | EPOLLERR)) {
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->control.fd, NULL);
		s->control.fd = -1; /* the sandbox's own: not ours to close */
	}
}

static uint64_t expiry_deadline(const struct shim *s, uint64_t now)
{
	if (s->expires_at <= 0 || s->end_reason)
		return 0;
	int64_t left_ms = s->expires_at - wall_clock_ms();
	if (left_ms <= 0)
		return now;
	uint64_t left = (uint64_t)left_ms * 1000000ULL;
	return now + (left < EXPIRY_RECHECK_NS ? left : EXPIRY_RECHECK_NS);
}

static uint64_t earliest(uint64_t a, uint64_t b)
{
	if (!a)
		return b;
	return b && b < a ? b : a;
}

static void arm_timer(struct shim *s, uint64_t now)
{
	uint64_t next = earliest(expiry_deadline(s, now), proc_next_deadline(s));
	next = earliest(next, conn_next_deadline(s));
	struct itimerspec its = {0};
	if (next) {
		if (next <= now)
			next = now + 1;
		its.it_value.tv_sec = (time_t)(next / 1000000000ULL);
		its.it_value.tv_nsec = (long)(next % 1000000000ULL);
	}
	if (timerfd_settime(s->timer.fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		shim_note("timerfd_settime: %s", strerror(errno));
}

/* After every batch: what requests queued, what is due, what was closed. */
static void after_batch(struct shim *s)
{
	if (!s->end_reason && s->expires_at > 0 && wall_clock_ms() >= s->expires_at)
		shim_end(s, "expired", "expires_at %lld passed", (long long)s->expires_at);
	proc_drain_exits(s);
	uint64_t now = shim_now_ns();
	proc_tick(s, now);
	conn_tick(s, now);
	conn_sweep(s);
	proc_sweep(s);
	arm_timer(s, now);
}

void shim_dispatch(struct shim *s)
{
	struct epoll_event ev[BATCH_MAX];
	int n = epoll_wait(s->epfd, ev, BATCH_MAX, 0);
	for (int i = 0; i < n; i++) {
		struct shim_source *src = ev[i].data.ptr;
		if (src->fd < 0)
			continue;
		switch (src->kind) {
		case SOURCE_LISTEN:
			conn_accept(s);
			break;
		case SOURCE_SIGNAL:
			on_signal(s);
			break;
		case SOURCE_CONTROL:
			on_control(s, ev[i].events);
			break;
		case SOURCE_TIMER: {
			uint64_t expirations;
			(void)!read(src->fd, &expirations, sizeof(expirations));
			break;
		}
		case SOURCE_CONN:
			conn_on_event(s, src->owner, ev[i].events);
			break;
		case SOURCE_PIPE:
			proc_on_pipe(s, (struct proc_stream *)src);
			break;
		case SOURCE_PARKED:
			/* it says nothing while parked: any event is its end */
			shim_unwatch(s, src);
			if (s->parked.helper > 0)
				shim_end(s, "failed", "the parked link's helper ended");
			break;
		}
	}
	after_batch(s);
}
