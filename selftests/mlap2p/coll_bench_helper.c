// SPDX-License-Identifier: GPL-2.0
/*
 * coll_bench_helper: time one collective between N processes, each pinned
 * to CPU (rank % ncpus), for the thresholds in docs/collectives.md.
 *
 *   coll_bench_helper [-n RANKS] [-t allreduce|allgather|reducescatter|
 *                     broadcast|reduce|alltoall] [-d float32|...]
 *                     [-b BYTES]... [-i ITERS] [-r REPEATS] [--inplace]
 *                     [--registered]
 *
 * For each size: REPEATS timed loops of ITERS calls (after ITERS/10 warm
 * up), each loop's mean per call taken on every rank and the slowest rank
 * kept; prints the best and the median loop.  -b takes K and M suffixes
 * and may repeat.  NCCL_ALGO, NCCL_PROTO and MLAP2P_COLL_* pass through.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mlap2p/mlap2p.h"
#include "mlap2p/dataplane.h"
#include "mlap2p/coll.h"

#define MAXR	64
#define MAXS	64

struct shared {
	double t[MAXR];
	struct mlap2p_unique_id id;
	int ready;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s)
{
	char *e;
	size_t v = strtoull(s, &e, 0);

	if (*e == 'K' || *e == 'k')
		v <<= 10;
	else if (*e == 'M' || *e == 'm')
		v <<= 20;
	return v;
}

static int dtype_of(const char *s)
{
	static const char *const names[] = {
		"int8", "uint8", "int32", "uint32", "int64", "uint64",
		"float16", "float32", "float64", "bfloat16", "fp8_e4m3",
		"fp8_e5m2",
	};
	int i;

	for (i = 0; i < 12; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int run(struct mlap2p_comm *comm, const char *t, void *s, void *r,
	       size_t count, int dt)
{
	if (!strcmp(t, "allreduce"))
		return mlap2p_all_reduce(comm, s, r, count, dt, MLAP2P_SUM);
	if (!strcmp(t, "allgather"))
		return mlap2p_all_gather(comm, s, r, count, dt);
	if (!strcmp(t, "reducescatter"))
		return mlap2p_reduce_scatter(comm, s, r, count, dt, MLAP2P_SUM);
	if (!strcmp(t, "broadcast"))
		return mlap2p_broadcast(comm, s, r, count, dt, 0);
	if (!strcmp(t, "reduce"))
		return mlap2p_reduce(comm, s, r, count, dt, MLAP2P_SUM, 0);
	return mlap2p_all_to_all(comm, s, r, count, dt);
}

int main(int argc, char **argv)
{
	size_t sizes[MAXS];
	int nsizes = 0, n = 2, iters = 0, reps = 5, inplace = 0, reg = 0, dt;
	const char *test = "allreduce", *dts = "float32";
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct shared *sh;
	pid_t pid[MAXR];
	int i, st, bad = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			test = argv[++i];
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			dts = argv[++i];
		else if (!strcmp(argv[i], "-b") && i + 1 < argc && nsizes < MAXS)
			sizes[nsizes++] = parse_size(argv[++i]);
		else if (!strcmp(argv[i], "-i") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--inplace"))
			inplace = 1;
		else if (!strcmp(argv[i], "--registered"))
			reg = 1;
		else {
			fprintf(stderr, "usage: see the source\n");
			return 2;
		}
	}
	dt = dtype_of(dts);
	if (dt < 0 || n < 1 || n > MAXR || reps < 1 || reps > 99)
		return 2;
	if (!nsizes)
		sizes[nsizes++] = 8;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		if (!pid[i]) {
			struct mlap2p_comm *comm;
			cpu_set_t set;
			int rank = i, s, k, it;

			CPU_ZERO(&set);
			CPU_SET(rank % ncpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
			while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE))
				usleep(1000);
			if (mlap2p_comm_init_rank(&comm, n, &sh->id, rank, rank)) {
				fprintf(stderr, "init: %s\n", mlap2p_last_error());
				_exit(1);
			}
			for (s = 0; s < nsizes; s++) {
				size_t es = dt == 0 || dt == 1 || dt >= 10 ? 1 :
					    dt == 6 || dt == 9 ? 2 :
					    dt == 4 || dt == 5 || dt == 8 ? 8 : 4;
				size_t count = sizes[s] / es, big = sizes[s] * n + 64;
				int loops = iters ? iters :
					    sizes[s] <= 64 * 1024 ? 20000 :
					    sizes[s] <= (4 << 20) ? 200 : 10;
				double res[100];
				char *sb, *rb;

				if (!strcmp(test, "allgather") ||
				    !strcmp(test, "reducescatter"))
					count = sizes[s] / es / n;
				if (reg) {
					if (mlap2p_mem_alloc(comm, big, (void **)&sb) ||
					    mlap2p_mem_alloc(comm, big, (void **)&rb))
						_exit(3);
				} else {
					sb = malloc(big);
					rb = malloc(big);
				}
				memset(sb, 1, big);
				memset(rb, 0, big);
				if (inplace)
					sb = !strcmp(test, "allgather") ?
					     rb + (size_t)rank * count * es : rb;
				for (it = 0; it < loops / 10 + 1; it++)
					if (run(comm, test, sb, rb, count, dt))
						_exit(4);
				for (k = 0; k < reps; k++) {
					double t0 = now();

					for (it = 0; it < loops; it++)
						if (run(comm, test, sb, rb, count, dt)) {
							fprintf(stderr, "%s\n", mlap2p_last_error());
							_exit(5);
						}
					sh->t[rank] = (now() - t0) / loops;
					if (mlap2p_all_reduce(comm, &sh->t[rank],
							      &res[k], 1,
							      MLAP2P_FLOAT64,
							      MLAP2P_MAX))
						_exit(6);
				}
				if (!rank) {
					qsort(res, (size_t)reps, sizeof(double), cmpd);
					printf("%s %s n=%d bytes=%zu%s: best %.3f us, median %.3f us, algbw(best) %.2f GB/s\n",
					       test, dts, n, sizes[s],
					       inplace ? " inplace" : "",
					       res[0] * 1e6, res[reps / 2] * 1e6,
					       sizes[s] / res[0] / 1e9);
					fflush(stdout);
				}
			}
			mlap2p_comm_destroy(comm);
			_exit(0);
		}
	}
	if (mlap2p_get_unique_id(&sh->id))
		return 1;
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	for (i = 0; i < n; i++) {
		waitpid(pid[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	return bad;
}
