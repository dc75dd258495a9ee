/* SPDX-License-Identifier: MIT */
/*
 * lib/coll/reduce_kern.h: the reduction loops, one function per
 * (dtype, op).  Included by lib/coll/reduce.c once per code path, with
 * KSUF naming the path (scalar, base, avx2) and the target and optimize
 * pragmas around the #include choosing how the compiler may vectorise.
 * Every loop body is branch-free (selects, no calls) so that GCC turns it
 * into SIMD; see reduce.c for what the generated code looks like.
 */

#define KCAT2(a, b) a##_##b
#define KCAT(a, b) KCAT2(a, b)
#define KN(name) KCAT(name, KSUF)

/* dst[i] = EXPR(x, y) with x = a[i], y = b[i], all of storage type T. */
#define KERNEL2(name, T, EXPR)						\
static void KN(name)(void *dst, const void *pa, const void *pb,	size_t n) \
{									\
	T##_un *d = dst;						\
	const T##_un *a = pa, *b = pb;					\
									\
	for (size_t i = 0; i < n; i++) {				\
		T x = a[i], y = b[i];					\
									\
		d[i] = EXPR;						\
	}								\
}

/* Integers: sum and prod on the unsigned type (wrap, no UB); min, max on
 * the signed or unsigned one. */
#define INT_KERNELS(S, U)						\
KERNEL2(sum_##S, U, (U)(x + y))						\
KERNEL2(prod_##S, U, (U)(x * y))					\
KERNEL2(max_##S, S, x > y ? x : y)					\
KERNEL2(min_##S, S, x < y ? x : y)

INT_KERNELS(int8_t, uint8_t)
INT_KERNELS(int32_t, uint32_t)
INT_KERNELS(int64_t, uint64_t)
KERNEL2(max_uint8_t, uint8_t, x > y ? x : y)
KERNEL2(min_uint8_t, uint8_t, x < y ? x : y)
KERNEL2(max_uint32_t, uint32_t, x > y ? x : y)
KERNEL2(min_uint32_t, uint32_t, x < y ? x : y)
KERNEL2(max_uint64_t, uint64_t, x > y ? x : y)
KERNEL2(min_uint64_t, uint64_t, x < y ? x : y)

/* Floating types, stored as their bits. */
KERNEL2(sum_f32, uint32_t, m2p_canon32(m2p_u2f(x) + m2p_u2f(y)))
KERNEL2(prod_f32, uint32_t, m2p_canon32(m2p_u2f(x) * m2p_u2f(y)))
KERNEL2(max_f32, uint32_t, m2p_max32(x, y))
KERNEL2(min_f32, uint32_t, m2p_min32(x, y))
KERNEL2(sum_f64, uint64_t, m2p_canon64(m2p_u2d(x) + m2p_u2d(y)))
KERNEL2(prod_f64, uint64_t, m2p_canon64(m2p_u2d(x) * m2p_u2d(y)))
KERNEL2(max_f64, uint64_t, m2p_max64(x, y))
KERNEL2(min_f64, uint64_t, m2p_min64(x, y))

#define NARROW_KERNELS(name, T, TO, FROM, MAX, MIN)			\
KERNEL2(sum_##name, T, TO(FROM(x) + FROM(y)))				\
KERNEL2(prod_##name, T, TO(FROM(x) * FROM(y)))				\
KERNEL2(max_##name, T, MAX(x, y))					\
KERNEL2(min_##name, T, MIN(x, y))

NARROW_KERNELS(f16, uint16_t, m2p_f32_to_f16, m2p_f16_to_f32, m2p_max_f16, m2p_min_f16)
NARROW_KERNELS(bf16, uint16_t, m2p_f32_to_bf16, m2p_bf16_to_f32, m2p_max_bf16, m2p_min_bf16)
NARROW_KERNELS(e4m3, uint8_t, m2p_f32_to_e4m3, m2p_e4m3_to_f32, m2p_max_e4m3, m2p_min_e4m3)
NARROW_KERNELS(e5m2, uint8_t, m2p_f32_to_e5m2, m2p_e5m2_to_f32, m2p_max_e5m2, m2p_min_e5m2)

/* The table reduce.c dispatches through: [dtype][op], op < AVG. */
static const mlap2p_kern2_fn KN(kern2)[MLAP2P_NUM_DTYPES][4] = {
#define KROW(s, m) { KN(sum_##s), KN(prod_##s), KN(max_##m), KN(min_##m) }
	[MLAP2P_INT8] = KROW(int8_t, int8_t),
	[MLAP2P_UINT8] = KROW(int8_t, uint8_t),
	[MLAP2P_INT32] = KROW(int32_t, int32_t),
	[MLAP2P_UINT32] = KROW(int32_t, uint32_t),
	[MLAP2P_INT64] = KROW(int64_t, int64_t),
	[MLAP2P_UINT64] = KROW(int64_t, uint64_t),
	[MLAP2P_FLOAT16] = KROW(f16, f16),
	[MLAP2P_FLOAT32] = KROW(f32, f32),
	[MLAP2P_FLOAT64] = KROW(f64, f64),
	[MLAP2P_BFLOAT16] = KROW(bf16, bf16),
	[MLAP2P_FP8_E4M3] = KROW(e4m3, e4m3),
	[MLAP2P_FP8_E5M2] = KROW(e5m2, e5m2),
#undef KROW
};

/* premul: dst[i] = src[i] * s, s already rounded to the type by the caller
 * (passed as its bits, or as the integer multiplier). */
#define KERNEL1(name, T, ST, EXPR)					\
static void KN(name)(void *dst, const void *ps, size_t n, ST s)	\
{									\
	T##_un *d = dst;						\
	const T##_un *a = ps;						\
									\
	for (size_t i = 0; i < n; i++) {				\
		T x = a[i];						\
									\
		d[i] = EXPR;						\
	}								\
}

KERNEL1(premul_u8, uint8_t, uint64_t, (uint8_t)(x * (uint8_t)s))
KERNEL1(premul_u32, uint32_t, uint64_t, (uint32_t)(x * (uint32_t)s))
KERNEL1(premul_u64, uint64_t, uint64_t, (uint64_t)(x * s))
KERNEL1(premul_f32, uint32_t, uint64_t,
	m2p_canon32(m2p_u2f(x) * m2p_u2f((uint32_t)s)))
KERNEL1(premul_f64, uint64_t, uint64_t, m2p_canon64(m2p_u2d(x) * m2p_u2d(s)))
KERNEL1(premul_f16, uint16_t, uint64_t,
	m2p_f32_to_f16(m2p_f16_to_f32(x) * m2p_f16_to_f32((uint16_t)s)))
KERNEL1(premul_bf16, uint16_t, uint64_t,
	m2p_f32_to_bf16(m2p_bf16_to_f32(x) * m2p_bf16_to_f32((uint16_t)s)))
KERNEL1(premul_e4m3, uint8_t, uint64_t,
	m2p_f32_to_e4m3(m2p_e4m3_to_f32(x) * m2p_e4m3_to_f32((uint8_t)s)))
KERNEL1(premul_e5m2, uint8_t, uint64_t,
	m2p_f32_to_e5m2(m2p_e5m2_to_f32(x) * m2p_e5m2_to_f32((uint8_t)s)))

static const mlap2p_kern1_fn KN(premul)[MLAP2P_NUM_DTYPES] = {
	[MLAP2P_INT8] = KN(premul_u8), [MLAP2P_UINT8] = KN(premul_u8),
	[MLAP2P_INT32] = KN(premul_u32), [MLAP2P_UINT32] = KN(premul_u32),
	[MLAP2P_INT64] = KN(premul_u64), [MLAP2P_UINT64] = KN(premul_u64),
	[MLAP2P_FLOAT16] = KN(premul_f16), [MLAP2P_FLOAT32] = KN(premul_f32),
	[MLAP2P_FLOAT64] = KN(premul_f64), [MLAP2P_BFLOAT16] = KN(premul_bf16),
	[MLAP2P_FP8_E4M3] = KN(premul_e4m3), [MLAP2P_FP8_E5M2] = KN(premul_e5m2),
};

/* divide in place by nr >= 1: integers truncate toward zero (C's /), the
 * floating types round the quotient to the type. */
#define KERNELD(name, T, EXPR)						\
static void KN(name)(void *dst, size_t n, int nr)			\
{									\
	T##_un *d = dst;						\
									\
	for (size_t i = 0; i < n; i++) {				\
		T x = d[i];						\
									\
		d[i] = EXPR;						\
	}								\
}

KERNELD(div_int8_t, int8_t, (int8_t)(x / nr))
KERNELD(div_uint8_t, uint8_t, (uint8_t)(x / nr))
KERNELD(div_int32_t, int32_t, (int32_t)(x / nr))
KERNELD(div_uint32_t, uint32_t, x / (uint32_t)nr)
KERNELD(div_int64_t, int64_t, x / (int64_t)nr)
KERNELD(div_uint64_t, uint64_t, x / (uint64_t)nr)
KERNELD(div_f32, uint32_t, m2p_canon32(m2p_u2f(x) / (float)nr))
KERNELD(div_f64, uint64_t, m2p_canon64(m2p_u2d(x) / (double)nr))
KERNELD(div_f16, uint16_t, m2p_f32_to_f16(m2p_f16_to_f32(x) / (float)nr))
KERNELD(div_bf16, uint16_t, m2p_f32_to_bf16(m2p_bf16_to_f32(x) / (float)nr))
KERNELD(div_e4m3, uint8_t, m2p_f32_to_e4m3(m2p_e4m3_to_f32(x) / (float)nr))
KERNELD(div_e5m2, uint8_t, m2p_f32_to_e5m2(m2p_e5m2_to_f32(x) / (float)nr))

static const mlap2p_kernd_fn KN(divide)[MLAP2P_NUM_DTYPES] = {
	[MLAP2P_INT8] = KN(div_int8_t), [MLAP2P_UINT8] = KN(div_uint8_t),
	[MLAP2P_INT32] = KN(div_int32_t), [MLAP2P_UINT32] = KN(div_uint32_t),
	[MLAP2P_INT64] = KN(div_int64_t), [MLAP2P_UINT64] = KN(div_uint64_t),
	[MLAP2P_FLOAT16] = KN(div_f16), [MLAP2P_FLOAT32] = KN(div_f32),
	[MLAP2P_FLOAT64] = KN(div_f64), [MLAP2P_BFLOAT16] = KN(div_bf16),
	[MLAP2P_FP8_E4M3] = KN(div_e4m3), [MLAP2P_FP8_E5M2] = KN(div_e5m2),
};

#undef KERNEL2
#undef KERNEL1
#undef KERNELD
#undef INT_KERNELS
#undef NARROW_KERNELS
