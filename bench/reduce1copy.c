// SPDX-License-Identifier: MIT
/*
 * bench/reduce1copy: the single-copy ceiling of a 2-rank all-reduce, with
 * no library around it.
 *
 * Two processes (fork), pinned to their own CPUs, share both inputs and
 * both outputs (SIZE bytes of fp32 each, MAP_SHARED).  Per all-reduce,
 * rank r takes its half of the elements, reads them from both inputs and
 * writes the sum into both outputs: each rank reads SIZE bytes and writes
 * SIZE bytes, the least memory traffic any 2-rank all-reduce can have
 * (collectives-anchors.md 3.6: XHC's or DeepSpeed's "distributed" scheme,
 * what mlap2p can do when the user buffers are mlap2p_mem_alloc regions).
 * The two meet at a shared counter between calls.
 *
 *   reduce1copy [-s SIZE] [-i ITERS] [-r REPEATS] [-n] [-c A,B]
 *
 * Prints each repeat and "reduce1copy_gbps <best>": SIZE / time of the
 * fastest repeat (algbw = busbw for 2 ranks, as mlap2p-perf reports an
 * all-reduce).  -n: every second repeat writes the outputs with streaming
 * (non-temporal) stores, and "reduce1copy_nt_gbps <best>" of those
 * follows.  Exits 1 if a sum is wrong.
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"

struct sync {
	uint64_t arrive[2] __attribute__((aligned(128)));
	uint64_t pad[14];
};

/* Both ranks at call k: each publishes k and waits for the other's. */
static void meet(struct sync *s, int rank, uint64_t k)
{
	__atomic_store_n(&s->arrive[rank], k, __ATOMIC_RELEASE);
	while (__atomic_load_n(&s->arrive[!rank], __ATOMIC_ACQUIRE) < k)
		;
}

static void reduce_plain(float *restrict o0, float *restrict o1,
			 const float *restrict a0, const float *restrict a1,
			 size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		float v = a0[i] + a1[i];

		o0[i] = v;
		o1[i] = v;
	}
}

/* n a multiple of 4, pointers 16-byte aligned */
static void reduce_nt(float *o0, float *o1, const float *a0, const float *a1,
		      size_t n)
{
	size_t i;

	for (i = 0; i < n; i += 4) {
		__m128 v = _mm_add_ps(_mm_load_ps(a0 + i), _mm_load_ps(a1 + i));

		_mm_stream_ps(o0 + i, v);
		_mm_stream_ps(o1 + i, v);
	}
	_mm_sfence();
}

int main(int argc, char **argv)
{
	size_t size = 64 << 20, n, half;
	long iters = 10, repeats = 5, r, i;
	int alt = 0, cpu0 = 0, cpu1 = 1, c, rank, st, bad = 0;
	double res[64], nt[64];
	long nres = 0, nnt = 0;
	float *a[2], *o[2];
	struct sync *s;
	uint64_t k = 0;
	pid_t pid;

	while ((c = getopt(argc, argv, "s:i:r:nc:h")) != -1) {
		switch (c) {
		case 's': size = pair_parse_size(optarg); break;
		case 'i': iters = atol(optarg); break;
		case 'r': repeats = atol(optarg); break;
		case 'n': alt = 1; break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &cpu0, &cpu1) != 2)
				return 2;
			break;
		default:
			fprintf(stderr, "usage: reduce1copy [-s SIZE] [-i ITERS] [-r REPEATS] [-n] [-c A,B]\n");
			return 2;
		}
	}
	n = size / sizeof(float) & ~(size_t)7;	/* two halves of whole vectors */
	size = n * sizeof(float);
	half = n / 2;
	if (!n || repeats < 1 || repeats > 64 || iters < 1)
		return 2;
	s = pair_shared(sizeof(*s));
	if (!s)
		return 1;
	for (c = 0; c < 2; c++) {
		a[c] = pair_shared(size);
		o[c] = pair_shared(size);
		if (!a[c] || !o[c])
			return 1;
	}
	pid = fork();
	if (pid < 0)
		return 1;
	rank = pid == 0;
	pair_pin(rank ? cpu1 : cpu0);
	/* each rank writes its own input (first touch on its side) */
	for (i = 0; i < (long)n; i++)
		a[rank][i] = (float)(rank + 1) * (float)(i & 1023);
	for (r = 0; r < repeats; r++) {
		int streaming = alt && (r & 1);
		double t0 = 0, t;

		for (i = -1; i < iters; i++) {	/* one warm-up */
			size_t lo = rank * half;

			meet(s, rank, ++k);
			if (i == 0)
				t0 = pair_now_s();
			if (streaming)
				reduce_nt(o[0] + lo, o[1] + lo, a[0] + lo,
					  a[1] + lo, half);
			else
				reduce_plain(o[0] + lo, o[1] + lo, a[0] + lo,
					     a[1] + lo, half);
		}
		meet(s, rank, ++k);
		t = (pair_now_s() - t0) / iters;
		if (rank)
			continue;
		if (streaming)
			nt[nnt++] = t;
		else
			res[nres++] = t;
		printf("# repeat %ld%s: %.1f us per all-reduce of %zu bytes, %.2f GB/s\n",
		       r, streaming ? " (streaming)" : "", t * 1e6, size,
		       size / t / 1e9);
	}
	/* both outputs, both halves: 3 * (i & 1023) */
	for (c = 0; c < 2; c++)
		for (i = 0; i < (long)n; i++)
			bad += o[c][i] != 3.0f * (float)(i & 1023);
	if (rank)
		_exit(bad ? 1 : 0);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) || bad) {
		fprintf(stderr, "reduce1copy: wrong sums\n");
		return 1;
	}
	pair_report("reduce1copy", size, res, nres, nt, nnt);
	return 0;
}
