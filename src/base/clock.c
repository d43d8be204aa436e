/*
 * clock.c - see clock.h.
 */
#include "base/clock.h"

#include <errno.h>
#include <time.h>

void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
