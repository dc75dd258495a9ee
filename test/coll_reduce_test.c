// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The reduction kernels of lib/coll/reduce.c against a slow reference
 * written here from the formats' definitions:
 *
 *  - narrow formats are decoded with ldexp from their fields, and encoded
 *    by searching the sorted table of every finite value of the format
 *    for the nearest one (ties to the even code), then saturating (fp8) or
 *    overflowing to inf (fp16, bf16); no bit tricks shared with the
 *    library;
 *  - the reference op is done in double and rounded once: exact or
 *    innocuously double-rounded for every narrow type and for float32;
 *  - every conversion is checked for all 2^16 / 2^8 codes (decode and
 *    round trip), at every midpoint between neighbours and one float ulp
 *    either side, at literal round-to-nearest-even edge cases, and on a
 *    million random floats;
 *  - every dtype x op x count (0, 1, 7, 33, 1000, 4097) x code path
 *    (scalar, SSE2, AVX2 where the CPU has it, and the dispatched entry
 *    point) on random bits and on random values of similar magnitude,
 *    byte for byte, with guard bytes after dst, out of place, in place
 *    (dst == a, dst == b) and on misaligned buffers;
 *  - every pair of fp8 codes, and a million random fp16 / bf16 pairs;
 *  - premul and divide for every dtype, and AVG worked through.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/dtype.h"
#include "coll/reduce.h"
#include "coll/reduce_impl.h"

/* The 6.1 harness and its TEST() wrappers have unused parameters. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"

/* ---- reference formats ------------------------------------------------ */

struct fmt {
	int bits;	/* 8 or 16 */
	int ebits;	/* exponent field width */
	int mbits;	/* mantissa field width */
	bool has_inf;	/* IEEE-like all-ones exponent; else e4m3's FN rule */
	bool saturate;	/* overflow: +-max (fp8) or +-inf */
	unsigned int nan;	/* canonical NaN code */
	/* filled by fmt_init: */
	unsigned int nfin;	/* positive finite codes 0..nfin-1 */
	double *val;		/* val[code] for positive finite codes */
};

static struct fmt F16 = { 16, 5, 10, true, false, 0x7fff, 0, NULL };
static struct fmt BF16 = { 16, 8, 7, true, false, 0x7fff, 0, NULL };
static struct fmt E4M3 = { 8, 4, 3, false, true, 0x7f, 0, NULL };
static struct fmt E5M2 = { 8, 5, 2, true, true, 0x7f, 0, NULL };

static unsigned int fmt_sign(const struct fmt *f)
{
	return 1u << (f->bits - 1);
}

static bool fmt_isnan(const struct fmt *f, unsigned int c)
{
	unsigned int mag = c & (fmt_sign(f) - 1);
	unsigned int emax = (1u << f->ebits) - 1;
	unsigned int e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);

	if (f->has_inf)
		return e == emax && m != 0;
	return e == emax && m == (1u << f->mbits) - 1;	/* e4m3: S.1111.111 */
}

static bool fmt_isinf(const struct fmt *f, unsigned int c)
{
	unsigned int mag = c & (fmt_sign(f) - 1);

	return f->has_inf && mag == ((1u << f->ebits) - 1) << f->mbits;
}

/* Value of a code from its fields. */
static double fmt_decode(const struct fmt *f, unsigned int c)
{
	int bias = (1 << (f->ebits - 1)) - 1;
	unsigned int mag = c & (fmt_sign(f) - 1);
	int e = (int)(mag >> f->mbits);
	double m = (double)(mag & ((1u << f->mbits) - 1));
	double v;

	if (fmt_isnan(f, c))
		return NAN;
	if (fmt_isinf(f, c))
		v = INFINITY;
	else if (e == 0)
		v = ldexp(m, 1 - bias - f->mbits);
	else
		v = ldexp(1.0 + m / (double)(1u << f->mbits), e - bias);
	return (c & fmt_sign(f)) ? -v : v;
}

static void fmt_init(struct fmt *f)
{
	unsigned int c;

	if (f->val)
		return;
	/* Positive finite codes are 0 up to the first inf/NaN code. */
	for (c = 0; c < fmt_sign(f); c++)
		if (fmt_isnan(f, c) || fmt_isinf(f, c))
			break;
	f->nfin = c;
	f->val = calloc(f->nfin + 1, sizeof(double));
	for (c = 0; c < f->nfin; c++)
		f->val[c] = fmt_decode(f, c);
	/* The value one step past the largest, as if the exponent went on:
	 * rounding to it means overflow. */
	f->val[f->nfin] = 2 * f->val[f->nfin - 1] - f->val[f->nfin - 2];
}

/* Round a double to the format: nearest, ties to the even code. */
static unsigned int fmt_encode(struct fmt *f, double x)
{
	unsigned int s, lo = 0, hi, c;
	double a = fabs(x);

	fmt_init(f);	/* each TEST runs in its own child */
	s = signbit(x) ? fmt_sign(f) : 0;
	hi = f->nfin;

	if (isnan(x))
		return f->nan;
	if (a >= f->val[f->nfin]) {
		c = f->nfin;
	} else {
		/* val[lo] <= a < val[hi] */
		while (hi - lo > 1) {
			unsigned int mid = (lo + hi) / 2;

			if (f->val[mid] <= a)
				lo = mid;
			else
				hi = mid;
		}
		if (a - f->val[lo] < f->val[hi] - a)
			c = lo;
		else if (a - f->val[lo] > f->val[hi] - a)
			c = hi;
		else
			c = (lo & 1) ? hi : lo;
	}
	if (c == f->nfin)	/* overflow */
		c = f->saturate ? f->nfin - 1 : c;	/* nfin is inf's code */
	return c | s;
}

/* ---- reference reductions --------------------------------------------- */

static bool is_float(int dt)
{
	return dt == MLAP2P_FLOAT16 || dt == MLAP2P_FLOAT32 ||
	       dt == MLAP2P_FLOAT64 || dt == MLAP2P_BFLOAT16 ||
	       dt == MLAP2P_FP8_E4M3 || dt == MLAP2P_FP8_E5M2;
}

static struct fmt *narrow_fmt(int dt)
{
	switch (dt) {
	case MLAP2P_FLOAT16: return &F16;
	case MLAP2P_BFLOAT16: return &BF16;
	case MLAP2P_FP8_E4M3: return &E4M3;
	case MLAP2P_FP8_E5M2: return &E5M2;
	default: return NULL;
	}
}

static size_t ref_size(int dt)
{
	static const size_t sz[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

	return sz[dt];
}

static uint64_t load(const void *p, size_t i, size_t sz)
{
	uint64_t v = 0;

	memcpy(&v, (const char *)p + i * sz, sz);	/* little endian */
	return v;
}

static void store(void *p, size_t i, size_t sz, uint64_t v)
{
	memcpy((char *)p + i * sz, &v, sz);
}

static int64_t sext(uint64_t v, size_t sz)
{
	int sh = 64 - 8 * (int)sz;

	return (int64_t)(v << sh) >> sh;
}

static double to_double(int dt, uint64_t v)
{
	float f;
	double d;
	uint32_t u;

	switch (dt) {
	case MLAP2P_FLOAT32:
		u = (uint32_t)v;
		memcpy(&f, &u, 4);
		return f;
	case MLAP2P_FLOAT64:
		memcpy(&d, &v, 8);
		return d;
	default:
		return fmt_decode(narrow_fmt(dt), (unsigned int)v);
	}
}

/* Round to the type; NaN to its canonical code. */
static uint64_t from_double(int dt, double x)
{
	float f;
	uint32_t u;
	uint64_t q;

	switch (dt) {
	case MLAP2P_FLOAT32:
		if (isnan(x))
			return 0x7fffffffu;
		f = (float)x;
		memcpy(&u, &f, 4);
		return u;
	case MLAP2P_FLOAT64:
		if (isnan(x))
			return 0x7fffffffffffffffull;
		memcpy(&q, &x, 8);
		return q;
	default:
		return fmt_encode(narrow_fmt(dt), x);
	}
}

static uint64_t ref_minmax(int dt, uint64_t a, uint64_t b, bool max)
{
	double x = to_double(dt, a), y = to_double(dt, b);

	if (isnan(x) && isnan(y))
		return from_double(dt, NAN);
	if (isnan(x))
		return b;
	if (isnan(y))
		return a;
	if (x == y) {
		if (x == 0 && signbit(x) != signbit(y))
			return (max == !signbit(x)) ? a : b;
		return a;
	}
	return (max ? x > y : x < y) ? a : b;
}

static uint64_t ref_op(int dt, int op, uint64_t a, uint64_t b)
{
	size_t sz = ref_size(dt);
	uint64_t mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
	bool sgn = dt == MLAP2P_INT8 || dt == MLAP2P_INT32 ||
		   dt == MLAP2P_INT64;

	if (op == MLAP2P_AVG)
		op = MLAP2P_SUM;
	if (is_float(dt)) {
		double x = to_double(dt, a), y = to_double(dt, b);

		switch (op) {
		case MLAP2P_SUM: return from_double(dt, x + y);
		case MLAP2P_PROD: return from_double(dt, x * y);
		default: return ref_minmax(dt, a, b, op == MLAP2P_MAX);
		}
	}
	switch (op) {
	case MLAP2P_SUM:
		return (a + b) & mask;
	case MLAP2P_PROD:
		return (a * b) & mask;
	default:
		if (sgn) {
			int64_t x = sext(a, sz), y = sext(b, sz);

			return (op == MLAP2P_MAX ? x > y : x < y) ? a : b;
		}
		return (op == MLAP2P_MAX ? a > b : a < b) ? a : b;
	}
}

/* NCCL's scalar: rounded to the type through float. */
static uint64_t ref_scalar(int dt, double s)
{
	if (dt == MLAP2P_FLOAT64)
		return from_double(dt, s);
	if (is_float(dt))
		return from_double(dt, (double)(float)s);
	if (!(fabs(s) < 0x1p63))	/* documented: no multiplier, 0 */
		return 0;
	return (uint64_t)(int64_t)s;
}

static uint64_t ref_premul(int dt, uint64_t a, double s)
{
	size_t sz = ref_size(dt);
	uint64_t mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
	uint64_t sc = ref_scalar(dt, s);

	if (is_float(dt))
		return from_double(dt, to_double(dt, a) * to_double(dt, sc));
	return (a * sc) & mask;
}

static uint64_t ref_divide(int dt, uint64_t a, int n)
{
	size_t sz = ref_size(dt);
	uint64_t mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;

	if (is_float(dt))
		return from_double(dt, to_double(dt, a) / n);
	if (dt == MLAP2P_INT8 || dt == MLAP2P_INT32 || dt == MLAP2P_INT64)
		return (uint64_t)(sext(a, sz) / n) & mask;
	return a / (uint64_t)n;
}

/* ---- inputs ------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * mode 0: random bits (every code: NaN, inf, subnormals, huge and tiny).
 * mode 1: floating values within a few binades of 1 (sums that round),
 *         integers near the type's extremes and zero.
 */
static uint64_t rnd_elem(int dt, int mode)
{
	size_t sz = ref_size(dt);
	uint64_t r = rnd();
	double v;

	if (mode == 0)
		return sz == 8 ? r : r & ((1ull << (8 * sz)) - 1);
	if (!is_float(dt)) {
		uint64_t small = (r >> 8) % 5;	/* -2..2 */
		uint64_t base = (r & 3) == 0 ? 0 : (r & 3) == 1 ?
			(1ull << (8 * sz - 1)) : (r & 3) == 2 ?
			(1ull << (8 * sz - 1)) - 1 : (r >> 16);
		uint64_t v2 = base + small - 2;

		return sz == 8 ? v2 : v2 & ((1ull << (8 * sz)) - 1);
	}
	v = ldexp(1.0 + (double)(r >> 40) / (double)(1ull << 24),
		  (int)((r >> 8) % 7) - 3);
	if (r & 1)
		v = -v;
	return from_double(dt, v);
}

static void fill(void *p, size_t n, int dt, int mode)
{
	for (size_t i = 0; i < n; i++)
		store(p, i, ref_size(dt), rnd_elem(dt, mode));
}

/* ---- names and sizes --------------------------------------------------- */

TEST(names_and_sizes)
{
	static const char *const dn[] = { "int8", "uint8", "int32", "uint32",
		"int64", "uint64", "float16", "float32", "float64", "bfloat16",
		"fp8_e4m3", "fp8_e5m2" };
	static const char *const on[] = { "sum", "prod", "max", "min", "avg" };
	int i;

	ASSERT_EQ(12, MLAP2P_NUM_DTYPES);
	ASSERT_EQ(5, MLAP2P_NUM_REDOPS);
	for (i = 0; i < MLAP2P_NUM_DTYPES; i++) {
		ASSERT_EQ(ref_size(i), mlap2p_dtype_size(i));
		ASSERT_STREQ(dn[i], mlap2p_dtype_name(i));
	}
	for (i = 0; i < MLAP2P_NUM_REDOPS; i++)
		ASSERT_STREQ(on[i], mlap2p_redop_name(i));
	ASSERT_EQ(0, mlap2p_dtype_size(-1));
	ASSERT_EQ(0, mlap2p_dtype_size(12));
	ASSERT_NULL(mlap2p_dtype_name(-1));
	ASSERT_NULL(mlap2p_dtype_name(12));
	ASSERT_NULL(mlap2p_redop_name(-1));
	ASSERT_NULL(mlap2p_redop_name(5));
}

/* ---- conversions --------------------------------------------------------- */

struct conv {
	struct fmt *f;
	float (*dec)(unsigned int c);
	unsigned int (*enc)(float x);
};

static float dec_f16(unsigned int c) { return mlap2p_f16_to_f32((uint16_t)c); }
static float dec_bf16(unsigned int c) { return mlap2p_bf16_to_f32((uint16_t)c); }
static float dec_e4m3(unsigned int c) { return mlap2p_e4m3_to_f32((uint8_t)c); }
static float dec_e5m2(unsigned int c) { return mlap2p_e5m2_to_f32((uint8_t)c); }
static unsigned int enc_f16(float x) { return mlap2p_f32_to_f16(x); }
static unsigned int enc_bf16(float x) { return mlap2p_f32_to_bf16(x); }
static unsigned int enc_e4m3(float x) { return mlap2p_f32_to_e4m3(x); }
static unsigned int enc_e5m2(float x) { return mlap2p_f32_to_e5m2(x); }

static struct conv convs[] = {
	{ &F16, dec_f16, enc_f16 }, { &BF16, dec_bf16, enc_bf16 },
	{ &E4M3, dec_e4m3, enc_e4m3 }, { &E5M2, dec_e5m2, enc_e5m2 },
};

/* Every code decodes to its value and encodes back to itself, except
 * NaNs (canonical NaN) and, in fp8 e5m2, +-inf (saturated to +-max). */
TEST(conversions_every_code)
{
	for (size_t k = 0; k < sizeof(convs) / sizeof(convs[0]); k++) {
		struct conv *cv = &convs[k];
		struct fmt *f = cv->f;
		unsigned int ncodes = 1u << f->bits, c, fails = 0;

		fmt_init(f);
		for (c = 0; c < ncodes; c++) {
			double want = fmt_decode(f, c);
			float got = cv->dec(c);
			unsigned int back = cv->enc(got), wback = c;

			if (isnan(want) ? !isnan(got) :
			    ((double)got != want || !signbit(got) != !signbit(want))) {
				if (fails++ < 5)
					TH_LOG("fmt %zu code %#x -> %a, want %a",
					       k, c, got, want);
			}
			if (fmt_isnan(f, c))
				wback = f->nan;
			else if (fmt_isinf(f, c) && f->saturate)
				wback = (c & fmt_sign(f)) | (f->nfin - 1);
			if (back != wback) {
				if (fails++ < 5)
					TH_LOG("fmt %zu code %#x -> %a -> %#x, want %#x",
					       k, c, got, back, wback);
			}
		}
		ASSERT_EQ(0, fails);
	}
}

static void check_enc(struct __test_metadata *_metadata, struct conv *cv,
		      float x, unsigned int *fails)
{
	unsigned int want = fmt_encode(cv->f, x), got = cv->enc(x);

	if (want != got && (*fails)++ < 5)
		TH_LOG("encode %a: got %#x want %#x", x, got, want);
}

/* Every midpoint between neighbours (ties to even), one float ulp either
 * side of it, every value itself, +-0, +-inf, NaNs, the largest float, a
 * million random floats and the float subnormals. */
TEST(conversions_round_to_nearest_even)
{
	for (size_t k = 0; k < sizeof(convs) / sizeof(convs[0]); k++) {
		struct conv *cv = &convs[k];
		struct fmt *f = cv->f;
		unsigned int c, fails = 0, i;
		static const float special[] = { 0.0f, -0.0f, INFINITY,
			-INFINITY, NAN, -NAN, 3.4028235e38f, -3.4028235e38f,
			1.4e-45f, -1.4e-45f, 1.17549435e-38f };

		fmt_init(f);
		for (c = 0; c <= f->nfin; c++) {
			float mid, v = (float)f->val[c < f->nfin ? c : f->nfin];
			double dmid;

			for (int s = 0; s < 2; s++) {
				check_enc(_metadata, cv, s ? -v : v, &fails);
				if (c == f->nfin)
					continue;
				dmid = (f->val[c] + f->val[c + 1]) / 2;
				mid = (float)dmid;
				ASSERT_EQ(dmid, (double)mid);	/* exact */
				mid = s ? -mid : mid;
				check_enc(_metadata, cv, mid, &fails);
				check_enc(_metadata, cv, nextafterf(mid, INFINITY), &fails);
				check_enc(_metadata, cv, nextafterf(mid, -INFINITY), &fails);
			}
		}
		for (i = 0; i < sizeof(special) / sizeof(special[0]); i++)
			check_enc(_metadata, cv, special[i], &fails);
		rng_state = 42 + k;
		for (i = 0; i < 1000000; i++) {
			uint32_t u = (uint32_t)rnd();
			float x;

			/* half of them near the format's range */
			if (i & 1)
				u = (u & 0x807fffffu) |
				    ((uint32_t)(100 + (u >> 24) % 56) << 23);
			memcpy(&x, &u, 4);
			check_enc(_metadata, cv, x, &fails);
		}
		for (i = 1; i < (1u << 23); i += 4099) {
			float x;

			memcpy(&x, &i, 4);
			check_enc(_metadata, cv, x, &fails);
		}
		ASSERT_EQ(0, fails);
	}
}

/* The edge cases by value, written out. */
TEST(conversions_literal_edges)
{
	/* fp16 */
	ASSERT_EQ(0x3c00, mlap2p_f32_to_f16(1.0f + 0x1p-11f));	/* tie, even */
	ASSERT_EQ(0x3c02, mlap2p_f32_to_f16(1.0f + 0x3p-11f));	/* tie, up */
	ASSERT_EQ(0x3c01, mlap2p_f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f));
	ASSERT_EQ(0x7bff, mlap2p_f32_to_f16(65519.0f));
	ASSERT_EQ(0x7c00, mlap2p_f32_to_f16(65520.0f));		/* to inf */
	ASSERT_EQ(0xfc00, mlap2p_f32_to_f16(-1e30f));
	ASSERT_EQ(0x0000, mlap2p_f32_to_f16(0x1p-25f));		/* tie to 0 */
	ASSERT_EQ(0x0001, mlap2p_f32_to_f16(0x1.000002p-25f));
	ASSERT_EQ(0x0002, mlap2p_f32_to_f16(0x3p-25f));		/* tie, even */
	ASSERT_EQ(0x0400, mlap2p_f32_to_f16(0x1.ffcp-15f));	/* tie, to normal */
	ASSERT_EQ(0x8000, mlap2p_f32_to_f16(-0.0f));
	ASSERT_EQ(0x7fff, mlap2p_f32_to_f16(-NAN));
	ASSERT_EQ(0x7fff, mlap2p_f32_to_f16(NAN));
	/* bf16 */
	ASSERT_EQ(0x3f80, mlap2p_f32_to_bf16(0x1.01p0f));	/* tie, even */
	ASSERT_EQ(0x3f82, mlap2p_f32_to_bf16(0x1.03p0f));	/* tie, up */
	ASSERT_EQ(0x7f80, mlap2p_f32_to_bf16(3.4028235e38f));	/* to inf */
	ASSERT_EQ(0x7f7f, mlap2p_f32_to_bf16(0x1.fep127f));
	ASSERT_EQ(0x0001, mlap2p_f32_to_bf16(0x1.4p-133f));	/* sub, down */
	ASSERT_EQ(0x0002, mlap2p_f32_to_bf16(0x1.8p-133f));	/* sub, tie */
	ASSERT_EQ(0x7fff, mlap2p_f32_to_bf16(-NAN));
	/* e4m3 */
	ASSERT_EQ(0x7e, mlap2p_f32_to_e4m3(448.0f));
	ASSERT_EQ(0x7e, mlap2p_f32_to_e4m3(464.0f));		/* tie, even */
	ASSERT_EQ(0x7e, mlap2p_f32_to_e4m3(464.1f));		/* saturate */
	ASSERT_EQ(0x7e, mlap2p_f32_to_e4m3(INFINITY));
	ASSERT_EQ(0xfe, mlap2p_f32_to_e4m3(-INFINITY));
	ASSERT_EQ(0x7d, mlap2p_f32_to_e4m3(415.0f));
	ASSERT_EQ(0x00, mlap2p_f32_to_e4m3(0x1p-10f));		/* tie to 0 */
	ASSERT_EQ(0x01, mlap2p_f32_to_e4m3(0x1.000002p-10f));
	ASSERT_EQ(0x02, mlap2p_f32_to_e4m3(0x3p-10f));		/* tie, even */
	ASSERT_EQ(0x08, mlap2p_f32_to_e4m3(0x1.fp-7f));		/* to normal */
	ASSERT_EQ(0x38, mlap2p_f32_to_e4m3(1.0625f));		/* tie, even */
	ASSERT_EQ(0x3a, mlap2p_f32_to_e4m3(1.1875f));		/* tie, up */
	ASSERT_EQ(0x7f, mlap2p_f32_to_e4m3(-NAN));
	ASSERT_EQ(448.0f, mlap2p_e4m3_to_f32(0x7e));
	ASSERT_EQ(0x1p-9f, mlap2p_e4m3_to_f32(0x01));
	ASSERT_TRUE(isnan(mlap2p_e4m3_to_f32(0xff)));
	/* e5m2 */
	ASSERT_EQ(0x7b, mlap2p_f32_to_e5m2(57344.0f));
	ASSERT_EQ(0x7b, mlap2p_f32_to_e5m2(61439.0f));
	ASSERT_EQ(0x7b, mlap2p_f32_to_e5m2(61440.0f));		/* saturate */
	ASSERT_EQ(0x7b, mlap2p_f32_to_e5m2(INFINITY));
	ASSERT_EQ(0xfb, mlap2p_f32_to_e5m2(-INFINITY));
	ASSERT_EQ(0x00, mlap2p_f32_to_e5m2(0x1p-17f));		/* tie to 0 */
	ASSERT_EQ(0x02, mlap2p_f32_to_e5m2(0x3p-17f));		/* tie, even */
	ASSERT_EQ(0x3c, mlap2p_f32_to_e5m2(1.125f));		/* tie, even */
	ASSERT_EQ(0x3e, mlap2p_f32_to_e5m2(1.625f));		/* tie, up */
	ASSERT_EQ(0x7f, mlap2p_f32_to_e5m2(NAN));
	ASSERT_TRUE(isinf(mlap2p_e5m2_to_f32(0x7c)));
	ASSERT_TRUE(isnan(mlap2p_e5m2_to_f32(0x7d)));
}

/* ---- reduce2 ----------------------------------------------------------- */

#define GUARD 64
static const size_t counts[] = { 0, 1, 7, 33, 1000, 4097 };

static int npaths(void)
{
	return MLAP2P_REDUCE_NUM_PATHS + 1;	/* + the dispatched entry */
}

static bool path_ok(int p)
{
	return p == MLAP2P_REDUCE_NUM_PATHS || mlap2p_reduce_path_supported(p);
}

static void run2(int p, void *d, const void *a, const void *b, size_t n,
		 int dt, int op)
{
	if (p == MLAP2P_REDUCE_NUM_PATHS)
		mlap2p_reduce2(d, a, b, n, dt, op);
	else
		mlap2p_reduce2_path(d, a, b, n, dt, op, p);
}

/* Compare n elements of got with want; report the first few. */
static unsigned int diff(struct __test_metadata *_metadata, const char *what,
			 int dt, int op, int p, size_t n, const void *a,
			 const void *b, const void *got, const void *want)
{
	size_t sz = ref_size(dt);
	unsigned int bad = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t g = load(got, i, sz), w = load(want, i, sz);

		if (g != w && bad++ < 3)
			TH_LOG("%s %s %s path %d n %zu [%zu]: %#llx op %#llx = %#llx, want %#llx",
			       what, mlap2p_dtype_name(dt),
			       mlap2p_redop_name(op), p, n, i,
			       (unsigned long long)load(a, i, sz),
			       (unsigned long long)(b ? load(b, i, sz) : 0),
			       (unsigned long long)g, (unsigned long long)w);
	}
	return bad;
}

static bool guard_intact(const unsigned char *g)
{
	for (int i = 0; i < GUARD; i++)
		if (g[i] != 0xa5)
			return false;
	return true;
}

TEST(reduce2_every_dtype_op_count_path)
{
	size_t maxb = 4097 * 8 + GUARD + 8;
	unsigned char *a = malloc(maxb), *b = malloc(maxb);
	unsigned char *want = malloc(maxb), *d = malloc(maxb);
	unsigned int bad = 0;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_NE(NULL, want);
	ASSERT_NE(NULL, d);
	fmt_init(&F16);
	fmt_init(&BF16);
	fmt_init(&E4M3);
	fmt_init(&E5M2);
	for (int dt = 0; dt < MLAP2P_NUM_DTYPES; dt++)
	for (int op = 0; op < MLAP2P_NUM_REDOPS; op++)
	for (int mode = 0; mode < 2; mode++)
	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
	for (int mis = 0; mis < 2; mis++) {
		size_t n = counts[ci], sz = ref_size(dt);
		unsigned char *pa = a + mis, *pb = b + 2 * mis;

		rng_state = 1000003ull * (uint64_t)(dt * 64 + op * 8 + mode) + n;
		fill(pa, n, dt, mode);
		fill(pb, n, dt, mode);
		for (size_t i = 0; i < n; i++)
			store(want, i, sz, ref_op(dt, op, load(pa, i, sz),
						  load(pb, i, sz)));
		for (int p = 0; p < npaths(); p++) {
			unsigned char *pd = d + 3 * mis;

			if (!path_ok(p))
				continue;
			/* out of place */
			memset(d, 0xa5, maxb);
			run2(p, pd, pa, pb, n, dt, op);
			bad += diff(_metadata, "out", dt, op, p, n, pa, pb, pd, want);
			if (!guard_intact(pd + n * sz)) {
				bad++;
				TH_LOG("guard %s n %zu", mlap2p_dtype_name(dt), n);
			}
			/* dst == a */
			memset(d, 0xa5, maxb);
			memcpy(pd, pa, n * sz);
			run2(p, pd, pd, pb, n, dt, op);
			bad += diff(_metadata, "dst=a", dt, op, p, n, pa, pb, pd, want);
			if (!guard_intact(pd + n * sz))
				bad++;
			/* dst == b */
			memset(d, 0xa5, maxb);
			memcpy(pd, pb, n * sz);
			run2(p, pd, pa, pd, n, dt, op);
			bad += diff(_metadata, "dst=b", dt, op, p, n, pa, pb, pd, want);
			if (!guard_intact(pd + n * sz))
				bad++;
		}
	}
	ASSERT_EQ(0, bad);
	free(a);
	free(b);
	free(want);
	free(d);
}

/* n == 0 touches nothing (NULL is fine); a bad dtype or op writes nothing. */
TEST(reduce2_nothing_to_do)
{
	uint32_t a[4] = { 1, 2, 3, 4 }, b[4] = { 5, 6, 7, 8 }, d[4];

	mlap2p_reduce2(NULL, NULL, NULL, 0, MLAP2P_FLOAT32, MLAP2P_SUM);
	mlap2p_premul(NULL, NULL, 0, MLAP2P_FLOAT32, 0.5);
	mlap2p_divide(NULL, 0, MLAP2P_INT32, 2);
	memset(d, 0x5a, sizeof(d));
	mlap2p_reduce2(d, a, b, 4, MLAP2P_NUM_DTYPES, MLAP2P_SUM);
	mlap2p_reduce2(d, a, b, 4, -1, MLAP2P_SUM);
	mlap2p_reduce2(d, a, b, 4, MLAP2P_INT32, MLAP2P_NUM_REDOPS);
	mlap2p_reduce2(d, a, b, 4, MLAP2P_INT32, -1);
	mlap2p_premul(d, a, 4, 12, 2.0);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0x5a5a5a5au, d[i]);
	mlap2p_divide(a, 4, MLAP2P_INT32, 0);
	mlap2p_divide(a, 4, MLAP2P_INT32, -3);
	mlap2p_divide(a, 4, 12, 2);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ((uint32_t)i + 1, a[i]);
}

/* Every pair of fp8 codes, every op, every path. */
TEST(reduce2_fp8_every_pair)
{
	unsigned char *a = malloc(65536), *b = malloc(65536);
	unsigned char *d = malloc(65536), *want = malloc(65536);
	unsigned int bad = 0;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, want);
	fmt_init(&E4M3);
	fmt_init(&E5M2);
	for (unsigned int i = 0; i < 65536; i++) {
		a[i] = (unsigned char)(i >> 8);
		b[i] = (unsigned char)i;
	}
	for (int dt = MLAP2P_FP8_E4M3; dt <= MLAP2P_FP8_E5M2; dt++)
	for (int op = 0; op < 4; op++) {
		for (unsigned int i = 0; i < 65536; i++)
			want[i] = (unsigned char)ref_op(dt, op, a[i], b[i]);
		for (int p = 0; p < npaths(); p++) {
			if (!path_ok(p))
				continue;
			run2(p, d, a, b, 65536, dt, op);
			bad += diff(_metadata, "pairs", dt, op, p, 65536, a, b, d, want);
		}
	}
	ASSERT_EQ(0, bad);
	free(a);
	free(b);
	free(d);
	free(want);
}

/* A million random fp16 and bf16 pairs, half of them of similar size. */
TEST(reduce2_half_bf16_random_pairs)
{
	size_t n = 1 << 20;
	uint16_t *a = malloc(2 * n), *b = malloc(2 * n);
	uint16_t *d = malloc(2 * n), *want = malloc(2 * n);
	unsigned int bad = 0;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, want);
	fmt_init(&F16);
	fmt_init(&BF16);
	for (int dt = MLAP2P_FLOAT16; dt <= MLAP2P_BFLOAT16; dt += 3)
	for (int op = 0; op < 4; op++) {
		rng_state = 7 + (uint64_t)dt * 16 + (uint64_t)op;
		for (size_t i = 0; i < n; i++) {
			uint64_t r = rnd();

			a[i] = (uint16_t)r;
			b[i] = (uint16_t)(r >> 16);
			if (i & 1)	/* same exponent field, within 2 */
				b[i] = (uint16_t)((a[i] & 0xff80u) ^
					 ((r >> 32) & 0x8100u)) |
				       (uint16_t)((r >> 48) & 0x7f);
			want[i] = (uint16_t)ref_op(dt, op, a[i], b[i]);
		}
		for (int p = 0; p < npaths(); p++) {
			if (!path_ok(p))
				continue;
			run2(p, d, a, b, n, dt, op);
			bad += diff(_metadata, "pairs", dt, op, p, n, a, b, d, want);
		}
	}
	ASSERT_EQ(0, bad);
	free(a);
	free(b);
	free(d);
	free(want);
}

/* NaN and signed-zero rules by value. */
TEST(reduce2_nan_and_zero_rules)
{
	float a[6] = { NAN, 1.0f, NAN, 0.0f, -0.0f, INFINITY };
	float b[6] = { 2.0f, NAN, -NAN, -0.0f, 0.0f, -INFINITY };
	uint32_t d[6];
	uint16_t ha[2] = { 0x7c01, 0x0000 }, hb[2] = { 0xfe00, 0x8000 }, hd[2];
	uint8_t ea[2] = { 0x7c, 0xff }, eb[2] = { 0x38, 0x38 }, ed[2];

	mlap2p_reduce2(d, a, b, 6, MLAP2P_FLOAT32, MLAP2P_MAX);
	ASSERT_EQ(0x40000000u, d[0]);	/* NaN ignored */
	ASSERT_EQ(0x3f800000u, d[1]);
	ASSERT_EQ(0x7fffffffu, d[2]);	/* two NaNs: canonical */
	ASSERT_EQ(0x00000000u, d[3]);	/* +0 > -0 either way round */
	ASSERT_EQ(0x00000000u, d[4]);
	ASSERT_EQ(0x7f800000u, d[5]);
	mlap2p_reduce2(d, a, b, 6, MLAP2P_FLOAT32, MLAP2P_MIN);
	ASSERT_EQ(0x40000000u, d[0]);
	ASSERT_EQ(0x80000000u, d[3]);
	ASSERT_EQ(0x80000000u, d[4]);
	ASSERT_EQ(0xff800000u, d[5]);
	mlap2p_reduce2(d, a, b, 6, MLAP2P_FLOAT32, MLAP2P_SUM);
	ASSERT_EQ(0x7fffffffu, d[0]);	/* NaN canonical */
	ASSERT_EQ(0x7fffffffu, d[5]);	/* inf - inf */
	ASSERT_EQ(0x00000000u, d[3]);
	mlap2p_reduce2(hd, ha, hb, 2, MLAP2P_FLOAT16, MLAP2P_SUM);
	ASSERT_EQ(0x7fff, hd[0]);
	ASSERT_EQ(0x0000, hd[1]);	/* +0 + -0 */
	mlap2p_reduce2(ed, ea, eb, 2, MLAP2P_FP8_E5M2, MLAP2P_SUM);
	ASSERT_EQ(0x7b, ed[0]);		/* inf + 1 saturates to 57344 */
	ASSERT_EQ(0x7f, ed[1]);
	mlap2p_reduce2(ed, ea, eb, 2, MLAP2P_FP8_E5M2, MLAP2P_MAX);
	ASSERT_EQ(0x7c, ed[0]);		/* max returns an input: inf */
	ASSERT_EQ(0x38, ed[1]);
}

/* ---- AVG's pieces -------------------------------------------------------- */

TEST(premul_every_dtype)
{
	static const double scalars[] = { 1.0, 0.5, 1.0 / 3, 0.25, 0.2,
		1.0 / 6, 1.0 / 7, 0.125, 1.0 / 64, -2.5, 3.0, 0.0, 1e300 };
	size_t n = 4097, maxb = n * 8 + GUARD;
	unsigned char *a = malloc(maxb), *d = malloc(maxb), *want = malloc(maxb);
	unsigned int bad = 0;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, want);
	for (int dt = 0; dt < MLAP2P_NUM_DTYPES; dt++)
	for (size_t si = 0; si < sizeof(scalars) / sizeof(scalars[0]); si++)
	for (int mode = 0; mode < 2; mode++) {
		size_t sz = ref_size(dt);

		rng_state = (uint64_t)dt * 100 + si * 2 + (uint64_t)mode;
		fill(a, n, dt, mode);
		for (size_t i = 0; i < n; i++)
			store(want, i, sz, ref_premul(dt, load(a, i, sz), scalars[si]));
		for (int p = 0; p < npaths(); p++) {
			if (!path_ok(p))
				continue;
			memset(d, 0xa5, maxb);
			if (p == MLAP2P_REDUCE_NUM_PATHS)
				mlap2p_premul(d, a, n, dt, scalars[si]);
			else
				mlap2p_premul_path(d, a, n, dt, scalars[si], p);
			bad += diff(_metadata, "premul", dt, 0, p, n, a, NULL, d, want);
			if (!guard_intact(d + n * sz))
				bad++;
			/* in place */
			memcpy(d, a, n * sz);
			mlap2p_premul_path(d, d, n, dt, scalars[si],
					   p % MLAP2P_REDUCE_NUM_PATHS);
			bad += diff(_metadata, "premul=", dt, 0, p, n, a, NULL, d, want);
		}
	}
	ASSERT_EQ(0, bad);
	free(a);
	free(d);
	free(want);
}

TEST(divide_every_dtype)
{
	static const int ranks[] = { 1, 2, 3, 4, 5, 7, 8, 64, 1000, 2147483647 };
	size_t n = 4097, maxb = n * 8 + GUARD;
	unsigned char *a = malloc(maxb), *d = malloc(maxb), *want = malloc(maxb);
	unsigned int bad = 0;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, want);
	for (int dt = 0; dt < MLAP2P_NUM_DTYPES; dt++)
	for (size_t ri = 0; ri < sizeof(ranks) / sizeof(ranks[0]); ri++)
	for (int mode = 0; mode < 2; mode++) {
		size_t sz = ref_size(dt);

		rng_state = (uint64_t)dt * 1000 + ri * 2 + (uint64_t)mode;
		fill(a, n, dt, mode);
		for (size_t i = 0; i < n; i++)
			store(want, i, sz, ref_divide(dt, load(a, i, sz), ranks[ri]));
		for (int p = 0; p < npaths(); p++) {
			if (!path_ok(p))
				continue;
			memset(d, 0xa5, maxb);
			memcpy(d, a, n * sz);
			if (p == MLAP2P_REDUCE_NUM_PATHS)
				mlap2p_divide(d, n, dt, ranks[ri]);
			else
				mlap2p_divide_path(d, n, dt, ranks[ri], p);
			bad += diff(_metadata, "divide", dt, 0, p, n, a, NULL, d, want);
			if (!guard_intact(d + n * sz))
				bad++;
		}
	}
	ASSERT_EQ(0, bad);
	free(a);
	free(d);
	free(want);
}

/* AVG worked through: integers truncate toward zero after the sum; floats
 * take the scalar rounded to their type before it. */
TEST(avg_worked_examples)
{
	int32_t x[3] = { 7, -8, 2 }, y[3] = { -7, -1, 0 }, s[3];
	int8_t i8[2] = { -128, 127 }, j8[2] = { -1, 1 };
	uint16_t h = 0x3c00, hd;	/* fp16 1.0 */
	uint8_t e = 0x38, ed;		/* e4m3 1.0 */
	float f = 3.0f, fd;

	mlap2p_reduce2(s, x, y, 3, MLAP2P_INT32, MLAP2P_AVG);
	ASSERT_EQ(0, s[0]);
	ASSERT_EQ(-9, s[1]);
	ASSERT_EQ(2, s[2]);
	mlap2p_divide(s, 3, MLAP2P_INT32, 2);
	ASSERT_EQ(0, s[0]);
	ASSERT_EQ(-4, s[1]);		/* -4.5 toward zero, not -5 */
	ASSERT_EQ(1, s[2]);
	mlap2p_reduce2(i8, i8, j8, 2, MLAP2P_INT8, MLAP2P_AVG);
	ASSERT_EQ(127, i8[0]);		/* -128 + -1 wraps */
	ASSERT_EQ(-128, i8[1]);
	mlap2p_divide(i8, 2, MLAP2P_INT8, 3);
	ASSERT_EQ(42, i8[0]);
	ASSERT_EQ(-42, i8[1]);
	mlap2p_premul(&hd, &h, 1, MLAP2P_FLOAT16, 1.0 / 3);
	ASSERT_EQ(0x3555, hd);		/* fp16(1/3) = 0.33325195 */
	mlap2p_premul(&ed, &e, 1, MLAP2P_FP8_E4M3, 1.0 / 3);
	ASSERT_EQ(0x2b, ed);		/* e4m3(1/3) = 0.34375 */
	mlap2p_premul(&fd, &f, 1, MLAP2P_FLOAT32, 1.0 / 3);
	ASSERT_EQ(1.0f, fd);		/* 3 * float(1/3) rounds to 1 */
}

TEST_HARNESS_MAIN
