/*
 * clock.h - waiting a while: the one sleep of the polls that wait with a
 * deadline (a mount going away, a copier ending, a cgroup emptying).
 */
#ifndef AGENTBOX_BASE_CLOCK_H
#define AGENTBOX_BASE_CLOCK_H

/* Sleep ms milliseconds, the whole of them: a signal does not cut it short. */
void sleep_ms(long ms);

#endif
