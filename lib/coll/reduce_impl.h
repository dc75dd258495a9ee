/* SPDX-License-Identifier: MIT */
/*
 * lib/coll/reduce_impl.h: the reductions with the code path chosen by the
 * caller, for the tests and the benchmark (lib/coll/reduce.c).  The
 * mlap2p_reduce2/premul/divide of reduce.h take the best path the CPU has.
 */
#ifndef MLAP2P_COLL_REDUCE_IMPL_H
#define MLAP2P_COLL_REDUCE_IMPL_H

#include <stddef.h>

enum {
	MLAP2P_REDUCE_PATH_SCALAR = 0,	/* plain C, not vectorised */
	MLAP2P_REDUCE_PATH_BASE = 1,	/* vectorised, default target (SSE2) */
	MLAP2P_REDUCE_PATH_AVX2 = 2,	/* vectorised for AVX2 (x86-64, GCC) */
	MLAP2P_REDUCE_NUM_PATHS = 3
};

/* 1 if @path can run on this CPU with this build. */
int mlap2p_reduce_path_supported(int path);
void mlap2p_reduce2_path(void *dst, const void *a, const void *b, size_t n,
			 int dtype, int op, int path);
void mlap2p_premul_path(void *dst, const void *src, size_t n, int dtype,
			double scalar, int path);
void mlap2p_divide_path(void *dst, size_t n, int dtype, int nranks, int path);

#endif
