// SPDX-License-Identifier: MIT
/*
 * bench/reduce_bench: is lib/coll/reduce.c bound by memory?  One core
 * runs mlap2p_reduce2(d, a, b) over SIZE-byte buffers for every dtype (and
 * op, with -a) on every code path the CPU has, beside memcpy(d, a) of the
 * same size.  A reduction reads two buffers and writes one, memcpy reads
 * one and writes one, so a memory-bound reduce2 takes about 1.5x memcpy's
 * time: the "traffic" column (3 * SIZE / t) should come out near memcpy's
 * (2 * SIZE / t), the "buf" column (SIZE / t) near two thirds of memcpy's.
 *
 *   reduce_bench [-s SIZE] [-i ITERS] [-r REPEATS] [-c CPU] [-a] [-p] [-w]
 *
 * -a: every op, not only sum; -p: in place (d == a) as well; -w: wall
 * clock instead of the thread's CPU time.
 * Best of REPEATS runs of ITERS calls each; GB/s = 1e9 bytes/s.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/reduce.h"
#include "coll/reduce_impl.h"

/* CPU time of this thread: on a shared, loaded machine the wall clock
 * also counts the time other processes ran on this core.  Memory
 * bandwidth taken by the others still shows; compare rows of one run. */
static clockid_t clk = CLOCK_THREAD_CPUTIME_ID;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const path_names[] = { "scalar", "sse2", "avx2" };

int main(int argc, char **argv)
{
	size_t size = 64UL << 20;
	int iters = 5, repeats = 3, cpu = 0, c, all = 0, inplace = 0;
	double best = 1e30, memcpy_gbps;
	unsigned char *a, *b, *d;
	cpu_set_t set;

	while ((c = getopt(argc, argv, "s:i:r:c:apw")) != -1) {
		switch (c) {
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'i': iters = atoi(optarg); break;
		case 'r': repeats = atoi(optarg); break;
		case 'c': cpu = atoi(optarg); break;
		case 'a': all = 1; break;
		case 'p': inplace = 1; break;
		case 'w': clk = CLOCK_MONOTONIC; break;
		default:
			fprintf(stderr, "usage: reduce_bench [-s SIZE] [-i ITERS] [-r REPEATS] [-c CPU] [-a] [-p] [-w]\n");
			return 2;
		}
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("sched_setaffinity (continuing unpinned)");
	a = aligned_alloc(4096, size);
	b = aligned_alloc(4096, size);
	d = aligned_alloc(4096, size);
	if (!a || !b || !d) {
		perror("aligned_alloc");
		return 1;
	}
	/* Values that stay finite and ordinary in every type. */
	for (size_t i = 0; i < size; i++) {
		a[i] = (unsigned char)(0x31 + (i * 7) % 11);
		b[i] = (unsigned char)(0x32 + (i * 5) % 13);
	}
	memset(d, 0, size);

	for (int r = 0; r < repeats; r++) {
		double t0 = now_s(), t;

		for (int i = 0; i < iters; i++)
			memcpy(d, a, size);
		t = (now_s() - t0) / iters;
		best = t < best ? t : best;
	}
	memcpy_gbps = 2.0 * size / best / 1e9;
	printf("size %zu MiB, cpu %d, best of %d x %d, %s time\n", size >> 20,
	       cpu, repeats, iters, clk == CLOCK_MONOTONIC ? "wall" : "cpu");
	printf("%-9s %-5s %-6s %-3s %8s %9s %9s %6s\n", "dtype", "op", "path",
	       "ip", "ms", "buf_GB/s", "trafGB/s", "x_cpy");
	printf("%-9s %-5s %-6s %-3s %8.3f %9.2f %9.2f %6.2f\n", "memcpy", "-",
	       "libc", "-", best * 1e3, size / best / 1e9, memcpy_gbps, 1.0);

	for (int dt = 0; dt < MLAP2P_NUM_DTYPES; dt++)
	for (int op = 0; op < (all ? 4 : 1); op++)
	for (int p = 0; p < MLAP2P_REDUCE_NUM_PATHS; p++)
	for (int ip = 0; ip <= inplace; ip++) {
		size_t n = size / mlap2p_dtype_size(dt);

		if (!mlap2p_reduce_path_supported(p))
			continue;
		best = 1e30;
		for (int r = 0; r < repeats; r++) {
			double t0 = now_s(), t;

			for (int i = 0; i < iters; i++)
				mlap2p_reduce2_path(d, ip ? d : a, b, n, dt,
						    op, p);
			t = (now_s() - t0) / iters;
			best = t < best ? t : best;
		}
		printf("%-9s %-5s %-6s %-3s %8.3f %9.2f %9.2f %6.2f\n",
		       mlap2p_dtype_name(dt), mlap2p_redop_name(op),
		       path_names[p], ip ? "yes" : "no", best * 1e3,
		       size / best / 1e9, 3.0 * size / best / 1e9,
		       3.0 * size / best / 1e9 / memcpy_gbps);
		fflush(stdout);
	}
	free(a);
	free(b);
	free(d);
	return 0;
}
