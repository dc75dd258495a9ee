// SPDX-License-Identifier: MIT
/*
 * bench/memcpy: what one core's memcpy() moves per second at SIZE, between
 * two buffers (-x: the destination is a MAP_SHARED mapping, as a peer's
 * registered region is).  Single copy cannot beat this: the sender's one
 * core does all of it; the two-copy pipeline runs two such copies at once,
 * one per core, so single copy gains only what the second copy costed in
 * memory bandwidth, not in time.  make bench prints it beside the
 * registered figures.
 *
 *   memcpy [-s SIZE] [-i ITERS] [-r REPEATS] [-c CPU]
 *
 * Prints "memcpy_gbps <best>".
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	size_t size = 64UL << 20;
	int iters = 10, repeats = 5, cpu = 0, c, r, i;
	double best = 0;
	char *src, *dst;
	cpu_set_t set;

	while ((c = getopt(argc, argv, "s:i:r:c:")) != -1) {
		switch (c) {
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'i': iters = atoi(optarg); break;
		case 'r': repeats = atoi(optarg); break;
		case 'c': cpu = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: memcpy [-s SIZE] [-i ITERS] [-r REPEATS] [-c CPU]\n");
			return 2;
		}
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	src = malloc(size);
	dst = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (!src || dst == MAP_FAILED)
		return 1;
	memset(src, 1, size);
	memset(dst, 0, size);
	for (r = 0; r < repeats; r++) {
		double t0 = now_s(), gbps;

		for (i = 0; i < iters; i++)
			memcpy(dst, src, size);
		gbps = (double)size * iters / (now_s() - t0) / 1e9;
		printf("# repeat %d: %.2f GB/s\n", r, gbps);
		if (gbps > best)
			best = gbps;
	}
	printf("memcpy_gbps %.3f\n", best);
	return dst[size - 1] == 1 ? 0 : 1;
}
