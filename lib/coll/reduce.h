/* SPDX-License-Identifier: MIT */
/*
 * lib/coll/reduce.h: the element-wise reductions the collectives run on
 * every step (lib/coll/reduce.c).  Values of the two enums equal NCCL's
 * ncclDataType_t and ncclRedOp_t.
 *
 * Order of operations, so a caller can reproduce results: every call
 * computes one pairwise op per element and rounds the result to the
 * element type (fp16, bf16, fp8: through float, round to nearest even),
 * as NCCL does after every pairwise op.  A ring of n ranks therefore
 * rounds n-1 times per element, in ring order.
 */
#ifndef MLAP2P_COLL_REDUCE_H
#define MLAP2P_COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#ifndef MLAP2P_COLL_DTYPES
#define MLAP2P_COLL_DTYPES
enum mlap2p_dtype {
	MLAP2P_INT8 = 0, MLAP2P_UINT8 = 1, MLAP2P_INT32 = 2,
	MLAP2P_UINT32 = 3, MLAP2P_INT64 = 4, MLAP2P_UINT64 = 5,
	MLAP2P_FLOAT16 = 6, MLAP2P_FLOAT32 = 7, MLAP2P_FLOAT64 = 8,
	MLAP2P_BFLOAT16 = 9, MLAP2P_FP8_E4M3 = 10, MLAP2P_FP8_E5M2 = 11,
	MLAP2P_NUM_DTYPES = 12
};
enum mlap2p_redop {
	MLAP2P_SUM = 0, MLAP2P_PROD = 1, MLAP2P_MAX = 2, MLAP2P_MIN = 3,
	MLAP2P_AVG = 4, MLAP2P_NUM_REDOPS = 5
};
#endif

/* Bytes per element; 0 for an invalid dtype. */
size_t mlap2p_dtype_size(int dtype);
/* "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
 * "float32", "float64", "bfloat16", "fp8_e4m3", "fp8_e5m2"; NULL if
 * invalid. */
const char *mlap2p_dtype_name(int dtype);
/* "sum", "prod", "max", "min", "avg"; NULL if invalid. */
const char *mlap2p_redop_name(int op);

/*
 * dst[i] = a[i] OP b[i] for i < n elements.  dst may equal a or b (in
 * place); any other overlap is undefined.  For AVG this is a SUM (the
 * caller scales, see below).  Integers wrap (two's complement) for sum
 * and prod.  Rounds to the type after each op, as NCCL.  An invalid
 * dtype or op does nothing (the caller validates).
 */
void mlap2p_reduce2(void *dst, const void *a, const void *b, size_t n,
		    int dtype, int op);

/*
 * AVG as NCCL does it: floating types are premultiplied by 1/nranks
 * before the sum: mlap2p_premul(dst, src, n, dtype, 1.0 / nranks) gives
 * dst[i] = src[i] * scalar rounded to the type (scalar first rounded to
 * the type, as NCCL's ncclDevPreMulSum; dst may equal src).  Integer types are
 * summed, then mlap2p_divide(dst, n, dtype, nranks) divides in place,
 * truncating toward zero like C.  premul on an integer type and divide
 * on a floating type also work (premul: multiply by (integer)scalar with
 * wrap; divide: dst[i] / nranks rounded to the type).
 */
void mlap2p_premul(void *dst, const void *src, size_t n, int dtype,
		   double scalar);
void mlap2p_divide(void *dst, size_t n, int dtype, int nranks);

#endif
