/* SPDX-License-Identifier: MIT */
/*
 * lib/clock.h: the library's one clock, CLOCK_MONOTONIC, inline for the
 * protocol engines (a timed SIMPLE message reads it on both ends);
 * mlap2p_now_ms() in lib/util.c is built on it.
 */
#ifndef MLAP2P_LIB_CLOCK_H
#define MLAP2P_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t mlap2p_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif
