/*
 * ratelimit.h - token buckets by name in a bounded table: how often one
 * API key, local user or source address is served (api.h: api_admit()).
 *
 * A bucket holds at most `burst` tokens and gains `rate` tokens a second;
 * each request takes one, and a request that finds less than one takes
 * nothing and is told how long to wait. Levels are kept in thousandths of
 * a token: `rate` tokens a second is exactly `rate` thousandths a
 * millisecond, so a refill is integer arithmetic with no rounding and no
 * drift, however often or seldom a bucket is looked at.
 *
 * A name without a bucket has a full one: a bucket is made at the first
 * take, full less that token. So a full bucket and no bucket are the same,
 * and dropping a full bucket changes nothing.
 *
 * The table holds at most `buckets` buckets (a named limit of the
 * caller's). A new name in a full table takes the bucket of the least
 * recently used name (used: taken from or looked at). When that bucket is
 * full again, nothing is lost. When it is not, its name gets a full bucket
 * back early: someone who can bring `buckets` new names within the time a
 * bucket takes to refill (burst / rate seconds) can refill the buckets of
 * others this way, and keep its own from ever running dry. That is the
 * whole of what filling the table gives: the memory stays bounded, and
 * every name still pays one token per request it is served.
 *
 * The clock is the caller's, in milliseconds from any origin. One that
 * steps back is followed without a gain: a bucket refills from the
 * earlier time on.
 *
 * Names are compared by their first RATELIMIT_NAME_SIZE - 1 bytes.
 *
 * Threads: every call may come from any thread (one mutex per table,
 * held for one hash lookup).
 */
#ifndef AGENTBOX_API_RATELIMIT_H
#define AGENTBOX_API_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#define RATELIMIT_NAME_SIZE   64	 /* bytes of a name, NUL included */
#define RATELIMIT_RATE_MAX    1000000u	 /* tokens a second */
#define RATELIMIT_BURST_MAX   1000000u	 /* tokens a bucket holds */
#define RATELIMIT_BUCKETS_MAX (1u << 20) /* the largest table */

struct ratelimit_config {
	uint32_t rate;	  /* tokens a second: 1..RATELIMIT_RATE_MAX */
	uint32_t burst;	  /* the most a bucket holds: 1..RATELIMIT_BURST_MAX */
	uint32_t buckets; /* the most buckets at once: 1..RATELIMIT_BUCKETS_MAX */
	uint64_t seed;	  /* of the hash: random, so that names cannot be picked to collide */
};

struct ratelimit;

/* A table for cfg (copied): 0, -EINVAL (a value out of range) or -ENOMEM. */
int ratelimit_new(const struct ratelimit_config *cfg, struct ratelimit **ret);

/* Free the table; NULL is fine. Returns NULL. */
struct ratelimit *ratelimit_free(struct ratelimit *rl);

/* The table's configuration. */
const struct ratelimit_config *ratelimit_config(const struct ratelimit *rl);

/*
 * Take one token from name's bucket at now_ms. Returns 0 when one was
 * taken; else nothing is taken and the return value is the seconds until
 * the bucket holds a token (rounded up, at least 1): Retry-After.
 */
uint32_t ratelimit_take(struct ratelimit *rl, const char *name, int64_t now_ms);

/*
 * Like ratelimit_take() but takes nothing, and makes no bucket: 0 when
 * name's bucket holds a token at now_ms, else the seconds until it does.
 */
uint32_t ratelimit_peek(struct ratelimit *rl, const char *name, int64_t now_ms);

/* Buckets in the table now (at most cfg.buckets). */
size_t ratelimit_count(struct ratelimit *rl);

#endif
