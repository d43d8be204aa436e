/*
 * rate.c - agentboxd's rate limits: their options, and the two tables of
 * token buckets (api/ratelimit.h) the server's admission charges
 * (api.h: api_admit()), one per principal and one of failed auths per
 * source.
 */
#include "daemon/daemon.h"

#include "base/parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int daemon_rate_option(struct daemon_config *cfg, int opt, const char *arg)
{
	static const struct {
		int opt;
		const char *name;
		bool burst;
	} known[] = {
	    {'r', "rate", false},
	    {'b', "rate-burst", true},
	    {'f', "auth-fail-rate", false},
	    {'g', "auth-fail-burst", true},
	};
	uint32_t *field[] = {&cfg->rate, &cfg->rate_burst, &cfg->auth_fail_rate,
			     &cfg->auth_fail_burst};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].opt != opt)
			continue;
		uint64_t v;
		uint64_t min = known[i].burst ? 1 : 0;
		uint64_t max = known[i].burst ? RATELIMIT_BURST_MAX : RATELIMIT_RATE_MAX;
		if (parse_u64(arg, &v) < 0 || v < min || v > max) {
			fprintf(stderr, "agentboxd: --%s: '%s' is not %llu..%llu%s\n",
				known[i].name, arg, (unsigned long long)min,
				(unsigned long long)max,
				known[i].burst ? "" : " (requests a second; 0 = no limit)");
			return -EINVAL;
		}
		*field[i] = (uint32_t)v;
		return 0;
	}
	return -EINVAL;
}

static uint64_t random_seed(void)
{
	uint64_t seed = 0;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec;
	}
	return seed;
}

/* A table for rate and burst (0: DAEMON_RATE_BURST_FACTOR times rate); rate 0: none. */
static int table_new(uint32_t rate, uint32_t burst, struct ratelimit **ret, struct error *err)
{
	*ret = NULL;
	if (!rate)
		return 0;
	uint64_t b = burst ? burst : (uint64_t)rate * DAEMON_RATE_BURST_FACTOR;
	struct ratelimit_config cfg = {
	    .rate = rate,
	    .burst = (uint32_t)(b > RATELIMIT_BURST_MAX ? RATELIMIT_BURST_MAX : b),
	    .buckets = DAEMON_RATE_BUCKETS,
	    .seed = random_seed(),
	};
	int r = ratelimit_new(&cfg, ret);
	return r < 0 ? error_set(err, -r, "rate limits: %s", strerror(-r)) : 0;
}

int daemon_rate_start(struct daemon *d, struct error *err)
{
	d->rate = (struct api_rate){0};
	int r = table_new(d->cfg.rate, d->cfg.rate_burst, &d->rate.principals, err);
	if (r == 0)
		r = table_new(d->cfg.auth_fail_rate, d->cfg.auth_fail_burst, &d->rate.auth_failures,
			      err);
	if (r < 0)
		daemon_rate_stop(d);
	return r;
}

void daemon_rate_stop(struct daemon *d)
{
	d->rate.principals = ratelimit_free(d->rate.principals);
	d->rate.auth_failures = ratelimit_free(d->rate.auth_failures);
}
