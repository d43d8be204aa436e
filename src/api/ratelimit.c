/*
 * ratelimit.c - token buckets by name (ratelimit.h): a fixed array of
 * buckets, a chained hash index into it and a least-recently-used list
 * through it, all by 32-bit index, allocated once.
 */
#include "api/ratelimit.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NIL   UINT32_MAX
#define MILLI 1000u /* a token, in the thousandths a level is kept in */

struct bucket {
	char name[RATELIMIT_NAME_SIZE];
	uint64_t level; /* thousandths of a token, at most burst * MILLI */
	int64_t at;	/* when level was last brought up to date (ms) */
	uint32_t next;	/* the next bucket in this hash chain */
	uint32_t newer, older;
};

struct ratelimit {
	pthread_mutex_t lock;
	struct ratelimit_config cfg;
	uint64_t full;	 /* burst * MILLI */
	uint32_t n;	 /* buckets in use: b[0..n) */
	uint32_t mask;	 /* slots - 1: a power of two, at least twice the buckets */
	uint32_t newest; /* the least recently used is at oldest */
	uint32_t oldest;
	uint32_t *slot; /* the first bucket of each hash chain */
	struct bucket b[];
};

int ratelimit_new(const struct ratelimit_config *cfg, struct ratelimit **ret)
{
	if (cfg->rate < 1 || cfg->rate > RATELIMIT_RATE_MAX || cfg->burst < 1 ||
	    cfg->burst > RATELIMIT_BURST_MAX || cfg->buckets < 1 ||
	    cfg->buckets > RATELIMIT_BUCKETS_MAX)
		return -EINVAL;
	uint32_t slots = 2;
	while (slots < 2 * cfg->buckets)
		slots <<= 1;
	struct ratelimit *rl = calloc(1, sizeof(*rl) + (size_t)cfg->buckets * sizeof(rl->b[0]));
	if (!rl)
		return -ENOMEM;
	rl->slot = malloc((size_t)slots * sizeof(rl->slot[0]));
	if (!rl->slot) {
		free(rl);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < slots; i++)
		rl->slot[i] = NIL;
	pthread_mutex_init(&rl->lock, NULL);
	rl->cfg = *cfg;
	rl->full = (uint64_t)cfg->burst * MILLI;
	rl->mask = slots - 1;
	rl->newest = rl->oldest = NIL;
	*ret = rl;
	return 0;
}

struct ratelimit *ratelimit_free(struct ratelimit *rl)
{
	if (!rl)
		return NULL;
	pthread_mutex_destroy(&rl->lock);
	free(rl->slot);
	free(rl);
	return NULL;
}

const struct ratelimit_config *ratelimit_config(const struct ratelimit *rl)
{
	return &rl->cfg;
}

/* FNV-1a from a seeded basis, then a 64-bit finalizer to spread the bits. */
static uint32_t slot_of(const struct ratelimit *rl, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ rl->cfg.seed;
	for (size_t i = 0; name[i] && i < RATELIMIT_NAME_SIZE - 1; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (uint32_t)h & rl->mask;
}

static void lru_unlink(struct ratelimit *rl, uint32_t i)
{
	struct bucket *b = &rl->b[i];
	if (b->newer != NIL)
		rl->b[b->newer].older = b->older;
	else
		rl->newest = b->older;
	if (b->older != NIL)
		rl->b[b->older].newer = b->newer;
	else
		rl->oldest = b->newer;
}

static void lru_push(struct ratelimit *rl, uint32_t i)
{
	struct bucket *b = &rl->b[i];
	b->newer = NIL;
	b->older = rl->newest;
	if (rl->newest != NIL)
		rl->b[rl->newest].newer = i;
	rl->newest = i;
	if (rl->oldest == NIL)
		rl->oldest = i;
}

static uint32_t find(const struct ratelimit *rl, const char *name, uint32_t slot)
{
	for (uint32_t i = rl->slot[slot]; i != NIL; i = rl->b[i].next)
		if (strncmp(rl->b[i].name, name, RATELIMIT_NAME_SIZE - 1) == 0)
			return i;
	return NIL;
}

/* Take bucket i out of its hash chain. */
static void unhash(struct ratelimit *rl, uint32_t i)
{
	uint32_t *p = &rl->slot[slot_of(rl, rl->b[i].name)];
	while (*p != i)
		p = &rl->b[*p].next;
	*p = rl->b[i].next;
}

/* A full bucket for name: a new one, or the least recently used one's. */
static uint32_t make(struct ratelimit *rl, const char *name, uint32_t slot, int64_t now)
{
	uint32_t i;
	if (rl->n < rl->cfg.buckets) {
		i = rl->n++;
	} else {
		i = rl->oldest;
		unhash(rl, i);
		lru_unlink(rl, i);
	}
	struct bucket *b = &rl->b[i];
	size_t len = strnlen(name, RATELIMIT_NAME_SIZE - 1);
	memcpy(b->name, name, len);
	b->name[len] = '\0';
	b->level = rl->full;
	b->at = now;
	b->next = rl->slot[slot];
	rl->slot[slot] = i;
	lru_push(rl, i);
	return i;
}

/* Bring b's level up to now; a clock that stepped back is followed with no gain. */
static void refill(const struct ratelimit *rl, struct bucket *b, int64_t now)
{
	if (now <= b->at) {
		b->at = now;
		return;
	}
	uint64_t dt = (uint64_t)(now - b->at);
	uint64_t room = rl->full - b->level;
	/* rate thousandths a millisecond; dt is capped first, so no product overflows */
	if (dt >= room / rl->cfg.rate + 1)
		b->level = rl->full;
	else
		b->level += dt * rl->cfg.rate;
	b->at = now;
}

/* Seconds until b holds a token (it holds less than one): rounded up, at least 1. */
static uint32_t wait_s(const struct ratelimit *rl, const struct bucket *b)
{
	uint64_t need = MILLI - b->level;
	uint64_t ms = (need + rl->cfg.rate - 1) / rl->cfg.rate;
	uint64_t s = (ms + 999) / 1000;
	return s ? (uint32_t)s : 1;
}

/* The bucket's wait after an optional take; make: give a name without one a bucket. */
static uint32_t visit(struct ratelimit *rl, const char *name, int64_t now, bool take)
{
	uint32_t wait = 0;
	pthread_mutex_lock(&rl->lock);
	uint32_t slot = slot_of(rl, name);
	uint32_t i = find(rl, name, slot);
	if (i == NIL && take)
		i = make(rl, name, slot, now);
	if (i != NIL) {
		struct bucket *b = &rl->b[i];
		refill(rl, b, now);
		if (b->level < MILLI)
			wait = wait_s(rl, b);
		else if (take)
			b->level -= MILLI;
		lru_unlink(rl, i);
		lru_push(rl, i);
	}
	pthread_mutex_unlock(&rl->lock);
	return wait;
}

uint32_t ratelimit_take(struct ratelimit *rl, const char *name, int64_t now_ms)
{
	return visit(rl, name, now_ms, true);
}

uint32_t ratelimit_peek(struct ratelimit *rl, const char *name, int64_t now_ms)
{
	return visit(rl, name, now_ms, false);
}

size_t ratelimit_count(struct ratelimit *rl)
{
	pthread_mutex_lock(&rl->lock);
	size_t n = rl->n;
	pthread_mutex_unlock(&rl->lock);
	return n;
}
