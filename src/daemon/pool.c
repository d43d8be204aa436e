/* A fixed pool of store connections for the HTTP threads. */
#include "daemon/daemon.h"

#include <errno.h>
#include <stdio.h>

int store_pool_init(struct store_pool *p, const char *db_path, struct error *err)
{
	*p = (struct store_pool){0};
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->free_cond, NULL);
	for (int i = 0; i < DAEMON_POOL_SIZE; i++) {
		int r = store_open_sqlite(db_path, &p->stores[i], err);
		if (r < 0) {
			store_pool_release(p);
			return r;
		}
	}
	return 0;
}

/* Blocks until a connection is free. */
struct store *store_pool_get(struct store_pool *p)
{
	pthread_mutex_lock(&p->lock);
	for (;;) {
		for (int i = 0; i < DAEMON_POOL_SIZE; i++)
			if (!p->busy[i]) {
				p->busy[i] = true;
				pthread_mutex_unlock(&p->lock);
				return p->stores[i];
			}
		pthread_cond_wait(&p->free_cond, &p->lock);
	}
}

void store_pool_put(struct store_pool *p, struct store *st)
{
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < DAEMON_POOL_SIZE; i++)
		if (p->stores[i] == st)
			p->busy[i] = false;
	pthread_cond_signal(&p->free_cond);
	pthread_mutex_unlock(&p->lock);
}

void store_pool_release(struct store_pool *p)
{
	for (int i = 0; i < DAEMON_POOL_SIZE; i++)
		p->stores[i] = store_close(p->stores[i]);
}
