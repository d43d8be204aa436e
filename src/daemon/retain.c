/*
 * retain.c - removing what ended, in agentboxd: --retain, the start's
 * sweep of task directories no row names, and the thread that removes
 * ended tasks and sandbox records past --retain (sched/retain.h does the
 * work; this is its clock, its store and its thread).
 */
#include "daemon/daemon.h"

#include "api/api.h"
#include "base/fileio.h"
#include "core/limits.h"
#include "base/parse.h"
#include "sched/retain.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct daemon_retain {
	pthread_t tid;
	int stop_fd; /* eventfd: written once, to stop the thread */
	struct store *st;
	const char *state_dir;
	int64_t retain_ms;
};

int daemon_retain_option(struct daemon_config *cfg, const char *arg)
{
	uint64_t ms = 0;
	if (strcmp(arg, "none") == 0) {
		cfg->retain_ms = 0;
		return 0;
	}
	if (parse_duration_ms(arg, &ms) < 0 || ms < (uint64_t)RETAIN_MIN_MS ||
	    ms > (uint64_t)RETAIN_MAX_MS) {
		fprintf(stderr,
			"agentboxd: --retain: '%s' is not 'none' or a duration from 1s to 36500d "
			"(7d, 12h, 90m, 30s)\n",
			arg);
		return -EINVAL;
	}
	cfg->retain_ms = (int64_t)ms;
	return 0;
}

/* At most what a task may run: an input that waits longer is forgotten. */
#define INPUT_TTL_MAX_MS (30ULL * 86400 * 1000)

int daemon_input_ttl_option(struct daemon_config *cfg, const char *arg)
{
	uint64_t ms = 0;
	if (parse_duration_ms(arg, &ms) < 0 || ms < 1000 || ms > INPUT_TTL_MAX_MS || ms % 1000) {
		fprintf(stderr,
			"agentboxd: --input-ttl: '%s' is not a duration of whole seconds from 1s "
			"to 30d (1h, 90m, 30s)\n",
			arg);
		return -EINVAL;
	}
	cfg->input_ttl_s = ms / 1000;
	return 0;
}

int daemon_retain_sweep(struct daemon *d, struct store *st, struct error *err)
{
	/* inputs first: a task directory no row names may hold some to give back */
	struct error ie = {0};
	uint64_t ttl = d->cfg.input_ttl_s ? d->cfg.input_ttl_s : TASK_INPUT_TTL_DEFAULT_S;
	if (api_inputs_recover(st, d->cfg.state_dir, wall_clock_ms(), ttl, &ie) < 0)
		fprintf(stderr, "agentboxd: recovering inputs: %s\n", ie.msg);
	size_t removed = 0;
	struct error e = {0};
	int r = retain_sweep(st, d->cfg.state_dir, &removed, &e);
	if (r < 0)
		return error_set(err, -r, "finding task directories no task names: %s", e.msg);
	if (e.code) /* some could not be removed: say so, and serve */
		fprintf(stderr, "agentboxd: %s\n", e.msg);
	if (removed)
		fprintf(stderr,
			"agentboxd: removed %zu task director%s that no task names (left by a "
			"stop in the middle of a removal)\n",
			removed, removed == 1 ? "y" : "ies");
	return 0;
}

static void *retain_main(void *arg)
{
	struct daemon_retain *t = arg;
	int64_t tick = retain_tick_ms(t->retain_ms);
	for (;;) {
		struct retain_counts n = {0};
		struct error err = {0};
		if (retain_pass(t->st, t->state_dir, wall_clock_ms(), t->retain_ms, RETAIN_BATCH,
				&n, &err) < 0 ||
		    err.code)
			fprintf(stderr, "agentboxd: --retain: %s\n", err.msg);
		/* a full batch: there may be more, go on at once (a stop still wins) */
		bool more = n.tasks == RETAIN_BATCH || n.sandboxes == RETAIN_BATCH;
		struct pollfd pfd = {.fd = t->stop_fd, .events = POLLIN};
		if (poll(&pfd, 1, more ? 0 : (int)tick) > 0)
			break;
	}
	return NULL;
}

int daemon_retain_start(struct daemon *d, struct error *err)
{
	if (!d->cfg.retain_ms)
		return 0;
	struct daemon_retain *t = calloc(1, sizeof(*t));
	if (!t)
		return error_set(err, ENOMEM, "out of memory");
	t->state_dir = d->cfg.state_dir;
	t->retain_ms = d->cfg.retain_ms;
	t->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int r = t->stop_fd < 0 ? error_set_errno(err, errno, "eventfd") : 0;
	if (r == 0)
		r = store_open_sqlite(d->db_path, &t->st, err);
	if (r == 0 && pthread_create(&t->tid, NULL, retain_main, t) != 0)
		r = error_set(err, EAGAIN, "cannot start the --retain thread");
	if (r < 0) {
		store_close(t->st);
		if (t->stop_fd >= 0)
			close(t->stop_fd);
		free(t);
		return r;
	}
	d->retain = t;
	return 0;
}

void daemon_retain_stop(struct daemon *d)
{
	struct daemon_retain *t = d->retain;
	if (!t)
		return;
	uint64_t one = 1;
	(void)!write(t->stop_fd, &one, sizeof(one));
	pthread_join(t->tid, NULL);
	store_close(t->st);
	close(t->stop_fd);
	free(t);
	d->retain = NULL;
}
