/* SPDX-License-Identifier: MIT */
/*
 * bench/pair.h: what the two-process baselines (ring2copy, reduce1copy)
 * share: their size argument, pinning, the clock, memory both processes
 * of a fork see, and the best-of-repeats figures they print.
 */
#ifndef MLAP2P_BENCH_PAIR_H
#define MLAP2P_BENCH_PAIR_H

#include <stddef.h>

/* "64M", "512k", "1.5G": bytes (K, M, G are powers of 1024). */
size_t pair_parse_size(const char *s);

/* Run this process on @cpu only (a failure is reported, not fatal). */
void pair_pin(int cpu);

/* CLOCK_MONOTONIC in seconds. */
double pair_now_s(void);

/* @bytes of zeroed memory shared with the children forked after; NULL if
 * the mapping fails. */
void *pair_shared(size_t bytes);

/*
 * Print "<name>_gbps <best>", @size / the shortest of the @nres times in
 * @res (seconds), and, when @nnt > 0, "<name>_nt_gbps <best>" of @nt.
 * Sorts both arrays.
 */
void pair_report(const char *name, size_t size, double *res, long nres,
		 double *nt, long nnt);

#endif /* MLAP2P_BENCH_PAIR_H */
