// SPDX-License-Identifier: MIT
/*
 * bench/pingpong: the floor for small-message latency between two
 * processes, a cache-line ping-pong over shared memory.
 *
 * Two processes (fork), each pinned to its own CPU, share two 128-byte
 * lines, one per direction.  Rank 0 stores i into line A and spins until
 * line B holds i; rank 1 spins on A and answers on B.  The one-way latency
 * is half the round trip: what any flag-polling transport pays at least
 * for one message, since it must move at least one line each way.
 *
 *   pingpong [-i ITERS] [-w WARMUP] [-r REPEATS] [--cpus A,B]
 *
 * Prints one line per repeat, the median, and the best repeat as
 * "pingpong_ns <best>": on a shared machine a repeat that was not
 * preempted is the one that measures the hardware (mlap2p-perf's figures
 * in make bench are best-of-repeats the same way, over runs of the same
 * length).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct line {
	uint64_t v;
	char pad[120];
} __attribute__((aligned(128)));

struct shared {
	struct line a, b;	/* 0 -> 1, 1 -> 0 */
	struct line go;
};

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("sched_setaffinity");
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long iters = 20000, warmup = 1000, repeats = 9, r, i;
	int cpu0 = 0, cpu1 = 1, c;
	double res[64];
	struct shared *sh;
	pid_t pid;

	while ((c = getopt(argc, argv, "i:w:r:c:h")) != -1) {
		switch (c) {
		case 'i': iters = atol(optarg); break;
		case 'w': warmup = atol(optarg); break;
		case 'r': repeats = atol(optarg); break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &cpu0, &cpu1) != 2) {
				fprintf(stderr, "pingpong: -c A,B\n");
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: pingpong [-i ITERS] [-w WARMUP] [-r REPEATS] [-c CPU0,CPU1]\n");
			return 2;
		}
	}
	if (repeats < 1 || repeats > 64 || iters < 1)
		return 2;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		uint64_t n = (uint64_t)(warmup + iters) * repeats, k;

		pin(cpu1);
		for (k = 1; k <= n; k++) {
			while (__atomic_load_n(&sh->a.v, __ATOMIC_ACQUIRE) != k)
				;
			__atomic_store_n(&sh->b.v, k, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	pin(cpu0);
	{
		uint64_t k = 0;

		for (r = 0; r < repeats; r++) {
			double t0 = 0;

			for (i = -warmup; i < iters; i++) {
				if (i == 0)
					t0 = now_ns();
				k++;
				__atomic_store_n(&sh->a.v, k, __ATOMIC_RELEASE);
				while (__atomic_load_n(&sh->b.v, __ATOMIC_ACQUIRE) != k)
					;
			}
			res[r] = (now_ns() - t0) / iters / 2;
			printf("# repeat %ld: %.1f ns one-way\n", r, res[r]);
		}
	}
	waitpid(pid, NULL, 0);
	qsort(res, repeats, sizeof(res[0]), cmp);
	printf("# median %.1f ns\n", res[repeats / 2]);
	printf("pingpong_ns %.1f\n", res[0]);
	return 0;
}
