/* SPDX-License-Identifier: MIT */
/*
 * lib/coll/reduce_f16c.h: fp16 and fp8 sum/prod with the F16C
 * conversions (vcvtph2ps, vcvtps2ph with round to nearest even), for the
 * AVX2 path of lib/coll/reduce.c, which includes this under
 * target("avx2,f16c").  The generic loops convert with integer and float
 * ops on 32-bit lanes; these are 3-6x faster and give the same bits
 * (coll_reduce_test compares every fp8 pair and a million fp16 pairs on
 * every path).
 *
 * fp16: widen, op in float, narrow (vcvtps2ph: IEEE RNE, overflow to inf),
 * NaN lanes replaced by 0x7fff.
 *
 * fp8: through fp16, as NCCL's sm90 kernels do.  e5m2 is the top byte of
 * an fp16; e4m3 placed as fp16 bits ((b & 0x7f) << 7) is the value / 256,
 * subnormals included, so the float is scaled by 256 after widening and by
 * 1/256 (exact) before narrowing.  The float result is rounded to fp16 and
 * then to fp8 on 16-bit lanes: RNE on the bits dropped, saturate, NaN.
 * Both extra roundings are innocuous (24 >= 2*11+2 and 11 >= 2p+2), which
 * the exhaustive pair test confirms for sum and prod of both types.
 */
#include <immintrin.h>

#define F16C_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* 8 halves of r, NaN lanes as 0x7fff. */
static inline __m128i f16c_narrow(__m256 r)
{
	__m128i h = _mm256_cvtps_ph(r, F16C_RNE);
	__m256i m = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_UNORD_Q));
	__m128i m16 = _mm_packs_epi32(_mm256_castsi256_si128(m),
				      _mm256_extracti128_si256(m, 1));

	return _mm_blendv_epi8(h, _mm_set1_epi16(0x7fff), m16);
}

#define F16C_F16(name, OP, TAIL)					\
static void name(void *dst, const void *pa, const void *pb, size_t n)	\
{									\
	unsigned char *d = dst;						\
	const unsigned char *a = pa, *b = pb;				\
	size_t i = 0;							\
									\
	for (; i + 16 <= n; i += 16) {					\
		const unsigned char *x = a + 2 * i, *y = b + 2 * i;	\
		__m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x)); \
		__m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 16))); \
		__m256 y0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)y)); \
		__m256 y1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + 16))); \
									\
		_mm_storeu_si128((__m128i *)(d + 2 * i),		\
				 f16c_narrow(OP(x0, y0)));		\
		_mm_storeu_si128((__m128i *)(d + 2 * i + 16),		\
				 f16c_narrow(OP(x1, y1)));		\
	}								\
	TAIL(d + 2 * i, a + 2 * i, b + 2 * i, n - i);			\
}

F16C_F16(sum_f16_f16c, _mm256_add_ps, sum_f16_avx2)
F16C_F16(prod_f16_f16c, _mm256_mul_ps, prod_f16_avx2)

/* 16 fp8 codes -> 16 halves (e4m3: the value / 256). */
static inline __m256i f8_to_h_e5m2(__m128i v)
{
	return _mm256_slli_epi16(_mm256_cvtepu8_epi16(v), 8);
}

static inline __m256i f8_to_h_e4m3(__m128i v)
{
	__m256i w = _mm256_cvtepu8_epi16(v);
	__m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
	__m256i h = _mm256_or_si256(_mm256_slli_epi16(mag, 7),
		_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
	__m256i nan = _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f));

	return _mm256_blendv_epi8(h, _mm256_set1_epi16(0x7e00), nan);
}

/* 16 halves -> 16 fp8 codes: drop SHIFT bits RNE, saturate to MAX. */
static inline __m128i h_to_f8(__m256i h, int shift, short max)
{
	__m256i mag = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
	__m256i nan = _mm256_cmpgt_epi16(mag, _mm256_set1_epi16(0x7c00));
	__m256i odd = _mm256_and_si256(_mm256_srli_epi16(mag, shift),
				       _mm256_set1_epi16(1));
	__m256i half = _mm256_set1_epi16((short)((1 << (shift - 1)) - 1));
	__m256i q = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(mag, half),
						       odd), shift);

	q = _mm256_min_epu16(q, _mm256_set1_epi16(max));
	q = _mm256_or_si256(q, _mm256_and_si256(_mm256_srli_epi16(h, 8),
						_mm256_set1_epi16(0x80)));
	q = _mm256_blendv_epi8(q, _mm256_set1_epi16(0x7f), nan);
	return _mm_packus_epi16(_mm256_castsi256_si128(q),
				_mm256_extracti128_si256(q, 1));
}

#define F16C_F8(name, OP, TOH, SCALE, SHIFT, MAX, TAIL)		\
static void name(void *dst, const void *pa, const void *pb, size_t n)	\
{									\
	unsigned char *d = dst;						\
	const unsigned char *a = pa, *b = pb;				\
	const __m256 up = _mm256_set1_ps(SCALE);			\
	const __m256 down = _mm256_set1_ps(1.0f / (SCALE));		\
	size_t i = 0;							\
									\
	for (; i + 16 <= n; i += 16) {					\
		__m256i ha = TOH(_mm_loadu_si128((const __m128i *)(a + i))); \
		__m256i hb = TOH(_mm_loadu_si128((const __m128i *)(b + i))); \
		__m256 x0 = _mm256_mul_ps(up, _mm256_cvtph_ps(_mm256_castsi256_si128(ha))); \
		__m256 x1 = _mm256_mul_ps(up, _mm256_cvtph_ps(_mm256_extracti128_si256(ha, 1))); \
		__m256 y0 = _mm256_mul_ps(up, _mm256_cvtph_ps(_mm256_castsi256_si128(hb))); \
		__m256 y1 = _mm256_mul_ps(up, _mm256_cvtph_ps(_mm256_extracti128_si256(hb, 1))); \
		__m128i r0 = _mm256_cvtps_ph(_mm256_mul_ps(down, OP(x0, y0)), F16C_RNE); \
		__m128i r1 = _mm256_cvtps_ph(_mm256_mul_ps(down, OP(x1, y1)), F16C_RNE); \
									\
		_mm_storeu_si128((__m128i *)(d + i),			\
			h_to_f8(_mm256_set_m128i(r1, r0), SHIFT, MAX));	\
	}								\
	TAIL(d + i, a + i, b + i, n - i);				\
}

F16C_F8(sum_e5m2_f16c, _mm256_add_ps, f8_to_h_e5m2, 1.0f, 8, 0x7b, sum_e5m2_avx2)
F16C_F8(prod_e5m2_f16c, _mm256_mul_ps, f8_to_h_e5m2, 1.0f, 8, 0x7b, prod_e5m2_avx2)
F16C_F8(sum_e4m3_f16c, _mm256_add_ps, f8_to_h_e4m3, 256.0f, 7, 0x7e, sum_e4m3_avx2)
F16C_F8(prod_e4m3_f16c, _mm256_mul_ps, f8_to_h_e4m3, 256.0f, 7, 0x7e, prod_e4m3_avx2)
