// SPDX-License-Identifier: MIT
/*
 * lib/coll/reduce.c: element-wise reductions for the collectives.
 *
 * Semantics (what a caller reproducing results needs):
 *
 * - One pairwise op per element per call, rounded to the element type
 *   before it is stored, as NCCL rounds after every pairwise op.
 * - Integers: SUM and PROD wrap modulo 2^bits (computed on the unsigned
 *   type); MAX, MIN compare as the signed or unsigned type.
 * - fp16, bf16, fp8: both operands are widened to float (exact), the op is
 *   done in float and the result rounded once to the type, to nearest
 *   even.  For + and * this equals the correctly rounded op in the narrow
 *   type (float's 24 bits >= 2p+2 for p = 11, 8, 4, 3: double rounding is
 *   innocuous), so it equals both NCCL paths: __hadd/__hmul on sm80+ and
 *   float-then-round below; for fp8, NCCL's sm90 path through half (11
 *   bits) is also innocuous and gives the same results.  Overflow: fp16
 *   and bf16 give inf; fp8 saturates to +-max (see coll/dtype.h).
 * - float32, float64: the C operator, in the default FP environment.
 * - NaN: a floating result that is NaN is stored as the type's canonical
 *   NaN, positive with every payload bit set (0x7fff, 0x7fffffff,
 *   0x7fffffffffffffff, 0x7f): results do not depend on which operand's
 *   payload the hardware would keep, and match CUDA's canonical NaNs.
 * - MAX, MIN on floating types: IEEE 754-2019 maximumNumber /
 *   minimumNumber, like C's fmax/fmin and CUDA's fmaxf/__hmax, which NCCL
 *   uses: a NaN operand is ignored (the other one is the result), two NaNs
 *   give the canonical NaN, and -0 < +0 so the result does not depend on
 *   operand order.  The result is one of the inputs, bit for bit, so
 *   these are done on the bits (an ordered integer key) without
 *   conversion.
 * - AVG: reduce2 sums; mlap2p_premul and mlap2p_divide do the rest (see
 *   reduce.h).
 *
 * Code paths: the loops in coll/reduce_kern.h are compiled three times:
 * scalar (vectorisation off: the plain-C reference the tests compare the
 * others with), base (the compiler's default target: SSE2 on x86-64) and,
 * on x86-64 with GCC, AVX2, chosen at run time by __builtin_cpu_supports.
 * This file is built with -O3 (lib/Makefile) because -O2's very-cheap
 * vectoriser cost model refuses loops that need an alias check, which
 * every loop here does (dst may be a or b).
 *
 * Generated code (GCC 12.2, objdump -d of reduce.o, AVX2 path): every
 * kernel's main loop is 256-bit.  float32 sum: vmovdqu, vaddps,
 * vcmpunordps, vblendvps, 8 lanes.  fp16 sum: vpmovzxwd widening, the
 * conversions as vpslld/vpand/vpaddd/vpcmpeqd/vpblendvb and vaddps/vsubps
 * on 8 lanes, vpackusdw narrowing.  fp8: the same on 32 lanes widened in
 * four.  max/min on floats: vpxor/vpcmpgt/vpblendvb on the keys.  int64
 * prod: vpmuludq/vpsrlq/vpsllq (no vpmullq in AVX2).  Integer divide
 * stays scalar (no SIMD division; it runs once per all-reduce).
 * The measured throughput is in bench/reduce_bench.c and the report.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/dtype.h"
#include "coll/reduce.h"
#include "coll/reduce_impl.h"

typedef uint8_t uint8_t_un __attribute__((aligned(1), may_alias));
typedef int8_t int8_t_un __attribute__((aligned(1), may_alias));
typedef uint16_t uint16_t_un __attribute__((aligned(1), may_alias));
typedef uint32_t uint32_t_un __attribute__((aligned(1), may_alias));
typedef int32_t int32_t_un __attribute__((aligned(1), may_alias));
typedef uint64_t uint64_t_un __attribute__((aligned(1), may_alias));
typedef int64_t int64_t_un __attribute__((aligned(1), may_alias));

typedef void (*mlap2p_kern2_fn)(void *, const void *, const void *, size_t);
typedef void (*mlap2p_kern1_fn)(void *, const void *, size_t, uint64_t);
typedef void (*mlap2p_kernd_fn)(void *, size_t, int);

static inline uint32_t m2p_canon32(float r)
{
	return r != r ? MLAP2P_F32_NAN : m2p_f2u(r);
}

static inline uint64_t m2p_canon64(double r)
{
	return r != r ? MLAP2P_F64_NAN : m2p_d2u(r);
}

/*
 * Sign-magnitude bits -> an unsigned key in the values' order: negative
 * values have every bit flipped, positive ones the sign bit set.  -0 sorts
 * just below +0.  max/min pick on the key, then fix up NaNs.
 */
#define M2P_MINMAX(name, T, SIGN, ISNAN, CANON)				\
static inline T m2p_key_##name(T u)					\
{									\
	return (T)(u ^ ((T)(0 - (T)(u >> (sizeof(T) * 8 - 1))) | SIGN));\
}									\
static inline T m2p_pick_##name(T a, T b, T r)				\
{									\
	bool na = ISNAN(a), nb = ISNAN(b);				\
									\
	r = nb ? a : r;							\
	r = na ? b : r;							\
	return na && nb ? (T)CANON : r;					\
}									\
static inline T m2p_max_##name(T a, T b)				\
{									\
	return m2p_pick_##name(a, b,					\
		m2p_key_##name(a) >= m2p_key_##name(b) ? a : b);	\
}									\
static inline T m2p_min_##name(T a, T b)				\
{									\
	return m2p_pick_##name(a, b,					\
		m2p_key_##name(a) <= m2p_key_##name(b) ? a : b);	\
}

#define NAN_F16(x) (((x) & 0x7fffu) > 0x7c00u)
#define NAN_BF16(x) (((x) & 0x7fffu) > 0x7f80u)
#define NAN_E4M3(x) (((x) & 0x7fu) == 0x7fu)
#define NAN_E5M2(x) (((x) & 0x7fu) > 0x7cu)
#define NAN_F32(x) (((x) & 0x7fffffffu) > 0x7f800000u)
#define NAN_F64(x) (((x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)

M2P_MINMAX(f16, uint16_t, 0x8000u, NAN_F16, MLAP2P_F16_NAN)
M2P_MINMAX(bf16, uint16_t, 0x8000u, NAN_BF16, MLAP2P_BF16_NAN)
M2P_MINMAX(e4m3, uint8_t, 0x80u, NAN_E4M3, MLAP2P_F8_NAN)
M2P_MINMAX(e5m2, uint8_t, 0x80u, NAN_E5M2, MLAP2P_F8_NAN)
M2P_MINMAX(f32x, uint32_t, 0x80000000u, NAN_F32, MLAP2P_F32_NAN)
M2P_MINMAX(f64x, uint64_t, 0x8000000000000000ull, NAN_F64, MLAP2P_F64_NAN)
#define m2p_max32 m2p_max_f32x
#define m2p_min32 m2p_min_f32x
#define m2p_max64 m2p_max_f64x
#define m2p_min64 m2p_min_f64x

/* Path 0: scalar, the compiler told not to vectorise. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-tree-vectorize", "no-tree-slp-vectorize")
#endif
#define KSUF scalar
#include "coll/reduce_kern.h"
#undef KSUF
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* Path 1: the default target (SSE2 on x86-64). */
#define KSUF base
#include "coll/reduce_kern.h"
#undef KSUF

/* Path 2: AVX2, when the CPU has it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MLAP2P_HAVE_AVX2_PATH 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define KSUF avx2
#include "coll/reduce_kern.h"
#undef KSUF
#pragma GCC pop_options
#endif

static int best_path(void)
{
#ifdef MLAP2P_HAVE_AVX2_PATH
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		return MLAP2P_REDUCE_PATH_AVX2;
#endif
	return MLAP2P_REDUCE_PATH_BASE;
}

int mlap2p_reduce_path_supported(int path)
{
	switch (path) {
	case MLAP2P_REDUCE_PATH_SCALAR:
	case MLAP2P_REDUCE_PATH_BASE:
		return 1;
	case MLAP2P_REDUCE_PATH_AVX2:
		return best_path() == MLAP2P_REDUCE_PATH_AVX2;
	default:
		return 0;
	}
}

static const mlap2p_kern2_fn (*kern2_table(int path))[4]
{
	switch (path) {
	case MLAP2P_REDUCE_PATH_SCALAR:
		return kern2_scalar;
#ifdef MLAP2P_HAVE_AVX2_PATH
	case MLAP2P_REDUCE_PATH_AVX2:
		return kern2_avx2;
#endif
	default:
		return kern2_base;
	}
}

static const mlap2p_kern1_fn *premul_table(int path)
{
	switch (path) {
	case MLAP2P_REDUCE_PATH_SCALAR:
		return premul_scalar;
#ifdef MLAP2P_HAVE_AVX2_PATH
	case MLAP2P_REDUCE_PATH_AVX2:
		return premul_avx2;
#endif
	default:
		return premul_base;
	}
}

static const mlap2p_kernd_fn *divide_table(int path)
{
	switch (path) {
	case MLAP2P_REDUCE_PATH_SCALAR:
		return divide_scalar;
#ifdef MLAP2P_HAVE_AVX2_PATH
	case MLAP2P_REDUCE_PATH_AVX2:
		return divide_avx2;
#endif
	default:
		return divide_base;
	}
}

static const struct {
	const char *name;
	size_t size;
} dtypes[MLAP2P_NUM_DTYPES] = {
	[MLAP2P_INT8] = { "int8", 1 },
	[MLAP2P_UINT8] = { "uint8", 1 },
	[MLAP2P_INT32] = { "int32", 4 },
	[MLAP2P_UINT32] = { "uint32", 4 },
	[MLAP2P_INT64] = { "int64", 8 },
	[MLAP2P_UINT64] = { "uint64", 8 },
	[MLAP2P_FLOAT16] = { "float16", 2 },
	[MLAP2P_FLOAT32] = { "float32", 4 },
	[MLAP2P_FLOAT64] = { "float64", 8 },
	[MLAP2P_BFLOAT16] = { "bfloat16", 2 },
	[MLAP2P_FP8_E4M3] = { "fp8_e4m3", 1 },
	[MLAP2P_FP8_E5M2] = { "fp8_e5m2", 1 },
};

static const char *const redops[MLAP2P_NUM_REDOPS] = {
	[MLAP2P_SUM] = "sum", [MLAP2P_PROD] = "prod", [MLAP2P_MAX] = "max",
	[MLAP2P_MIN] = "min", [MLAP2P_AVG] = "avg",
};

static bool dtype_ok(int dtype)
{
	return dtype >= 0 && dtype < MLAP2P_NUM_DTYPES;
}

size_t mlap2p_dtype_size(int dtype)
{
	return dtype_ok(dtype) ? dtypes[dtype].size : 0;
}

const char *mlap2p_dtype_name(int dtype)
{
	return dtype_ok(dtype) ? dtypes[dtype].name : NULL;
}

const char *mlap2p_redop_name(int op)
{
	return op >= 0 && op < MLAP2P_NUM_REDOPS ? redops[op] : NULL;
}

void mlap2p_reduce2_path(void *dst, const void *a, const void *b, size_t n,
			 int dtype, int op, int path)
{
	if (!dtype_ok(dtype) || op < 0 || op >= MLAP2P_NUM_REDOPS || !n)
		return;
	if (op == MLAP2P_AVG)
		op = MLAP2P_SUM;
	kern2_table(path)[dtype][op](dst, a, b, n);
}

void mlap2p_reduce2(void *dst, const void *a, const void *b, size_t n,
		    int dtype, int op)
{
	mlap2p_reduce2_path(dst, a, b, n, dtype, op, best_path());
}

/* The scalar as NCCL's hostToDevRedOp stores it: rounded to the element
 * type (through float for the narrow types, as NCCL's float(1.0/n)). */
static uint64_t premul_scalar_bits(int dtype, double scalar)
{
	float f = (float)scalar;

	switch (dtype) {
	case MLAP2P_FLOAT16:
		return m2p_f32_to_f16(f);
	case MLAP2P_BFLOAT16:
		return m2p_f32_to_bf16(f);
	case MLAP2P_FP8_E4M3:
		return m2p_f32_to_e4m3(f);
	case MLAP2P_FP8_E5M2:
		return m2p_f32_to_e5m2(f);
	case MLAP2P_FLOAT32:
		return m2p_f2u(f);
	case MLAP2P_FLOAT64:
		return m2p_d2u(scalar);
	default:
		/* Integers: the multiplier truncated toward zero (0 when it
		 * does not fit), then taken modulo 2^bits. */
		if (!(scalar > -9223372036854775808.0 &&
		      scalar < 9223372036854775808.0))
			return 0;
		return (uint64_t)(int64_t)scalar;
	}
}

void mlap2p_premul_path(void *dst, const void *src, size_t n, int dtype,
			double scalar, int path)
{
	if (!dtype_ok(dtype) || !n)
		return;
	premul_table(path)[dtype](dst, src, n,
				  premul_scalar_bits(dtype, scalar));
}

void mlap2p_premul(void *dst, const void *src, size_t n, int dtype,
		   double scalar)
{
	mlap2p_premul_path(dst, src, n, dtype, scalar, best_path());
}

void mlap2p_divide_path(void *dst, size_t n, int dtype, int nranks, int path)
{
	if (!dtype_ok(dtype) || !n || nranks < 1)
		return;
	divide_table(path)[dtype](dst, n, nranks);
}

void mlap2p_divide(void *dst, size_t n, int dtype, int nranks)
{
	mlap2p_divide_path(dst, n, dtype, nranks, best_path());
}
