// SPDX-License-Identifier: MIT
/*
 * bench/nccl_layer: what <nccl.h> costs over the mlap2p call, at one size.
 *
 *   nccl_layer [-n RANKS] [-b BYTES] [-i ITERS] [-k BLOCKS]
 *
 * RANKS processes (default 2), rank r pinned to CPU r, run blocks of ITERS
 * float32 sum all-reduces of BYTES (default 8) in three ways, interleaved
 * block by block so load changes hit all three alike:
 *   mlap2p   mlap2p_all_reduce on the libmlap2p comm under the ncclComm_t
 *   nccl     ncclAllReduce on the NULL stream
 *   stream   ncclAllReduce posted to a host stream, then
 *            mlap2p_stream_synchronize, every call
 * Rank 0 prints, per way, the per-call time of the fastest block and the
 * median block, and the ratios to mlap2p (median of the per-block ratios).
 * Built by hand (not part of make bench):
 *   cc -O2 -o build/bench/nccl_layer bench/nccl_layer.c \
 *      $(PKG_CONFIG_PATH=build/lib pkg-config --cflags --libs mlap2p-nccl) \
 *      -Wl,-rpath,$PWD/build/lib
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>
#include <mlap2p/coll.h>

#define MAXB 512

static double now(void)
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

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run(int rank, int n, ncclUniqueId id, size_t bytes, int iters,
	       int blocks)
{
	static double t[3][MAXB], r[2][MAXB];
	static const char *const name[3] = { "mlap2p", "nccl", "stream" };
	size_t count = bytes / 4;
	float *s = calloc(count + 1, 4), *d = calloc(count + 1, 4);
	struct mlap2p_comm *m;
	cudaStream_t st;
	ncclComm_t c;
	cpu_set_t set;
	int b, w, i;

	CPU_ZERO(&set);
	CPU_SET(rank, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("sched_setaffinity");
	if (ncclCommInitRank(&c, n, id, rank) || mlap2p_stream_create(&st))
		return 1;
	m = mlap2p_nccl_comm(c);
	for (b = -1; b < blocks; b++) {
		for (w = 0; w < 3; w++) {
			double t0 = now();

			for (i = 0; i < iters; i++) {
				int err;

				if (w == 0)
					err = mlap2p_all_reduce(m, s, d, count, 7, 0);
				else if (w == 1)
					err = ncclAllReduce(s, d, count, ncclFloat,
							    ncclSum, c, NULL);
				else
					err = ncclAllReduce(s, d, count, ncclFloat,
							    ncclSum, c, st) ||
					      mlap2p_stream_synchronize(st);
				if (err) {
					fprintf(stderr, "rank %d: %s failed\n",
						rank, name[w]);
					return 1;
				}
			}
			if (b >= 0)
				t[w][b] = (now() - t0) / iters;
		}
		if (b >= 0) {
			r[0][b] = t[1][b] / t[0][b];
			r[1][b] = t[2][b] / t[0][b];
		}
	}
	if (rank == 0) {
		for (w = 0; w < 3; w++) {
			double mn = t[w][0];

			for (b = 1; b < blocks; b++)
				mn = t[w][b] < mn ? t[w][b] : mn;
			printf("%-7s %zu B x %d ranks: fastest block %.0f ns/call, median block %.0f ns/call\n",
			       name[w], bytes, n, mn, median(t[w], blocks));
		}
		printf("nccl/mlap2p   median of per-block ratios %.3f\n",
		       median(r[0], blocks));
		printf("stream/mlap2p median of per-block ratios %.3f\n",
		       median(r[1], blocks));
	}
	fflush(stdout);
	mlap2p_stream_destroy(st);
	ncclCommDestroy(c);
	free(s);
	free(d);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 2, iters = 2000, blocks = 41, opt, r, fds[8][2], bad = 0;
	size_t bytes = 8;
	pid_t pid[8];
	ncclUniqueId id;

	while ((opt = getopt(argc, argv, "n:b:i:k:")) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'b': bytes = strtoul(optarg, NULL, 0); break;
		case 'i': iters = atoi(optarg); break;
		case 'k': blocks = atoi(optarg); break;
		default: return 2;
		}
	}
	if (n < 1 || n > 8 || blocks < 1 || blocks > MAXB || iters < 1)
		return 2;
	for (r = 0; r < n; r++) {
		if (pipe(fds[r]))
			return 1;
		pid[r] = fork();
		if (pid[r] == 0) {
			close(fds[r][1]);
			if (read(fds[r][0], &id, sizeof(id)) != sizeof(id))
				_exit(1);
			_exit(run(r, n, id, bytes, iters, blocks));
		}
		close(fds[r][0]);
	}
	if (ncclGetUniqueId(&id))
		return 1;
	for (r = 0; r < n; r++)
		if (write(fds[r][1], &id, sizeof(id)) != sizeof(id))
			return 1;
	for (r = 0; r < n; r++) {
		int st;

		waitpid(pid[r], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return bad;
}
