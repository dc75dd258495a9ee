/* SPDX-License-Identifier: MIT */
/*
 * lib/coll/dtype.h: conversions between float and the narrow floating
 * types the collectives reduce (fp16, bf16, fp8 e4m3 and e5m2), written
 * branch-free on 32-bit lanes so that loops calling them vectorise.
 * Out-of-line copies (lib/coll/dtype.c) serve callers outside the hot
 * loops and the tests.
 *
 * Narrow -> float is exact.  Float -> narrow rounds to nearest, ties to
 * even, in the default floating-point environment (the denormal paths
 * let one float addition do the rounding: they need MXCSR's round to
 * nearest and no flush-to-zero, as every other float op here does).
 *
 *   fp16 (IEEE binary16): overflow gives +-inf, as IEEE and CUDA's
 *        __float2half_rn.
 *   bf16: overflow gives +-inf, as __float2bfloat16_rn.
 *   fp8 e4m3 (OCP "FN": no inf, NaN = S.1111.111, max 448) and fp8 e5m2
 *        (IEEE-like, has inf): saturating, as CUDA's __nv_fp8_e4m3 and
 *        __nv_fp8_e5m2 constructors (__NV_SATFINITE), which is what NCCL
 *        2.19+ reduces with: a result beyond the largest finite value,
 *        including +-inf, becomes +-max (448, 57344).  An e5m2 inf input
 *        therefore comes out of any arithmetic op as +-57344.
 *   NaN: any NaN becomes the type's canonical NaN, positive with every
 *        payload bit set: 0x7fff (fp16, bf16), 0x7f (both fp8), as CUDA
 *        produces.  NaN in gives NaN out; the sign and payload are not kept.
 */
#ifndef MLAP2P_COLL_DTYPE_H
#define MLAP2P_COLL_DTYPE_H

#include <stdint.h>
#include <string.h>

#define MLAP2P_F16_NAN 0x7fffu
#define MLAP2P_BF16_NAN 0x7fffu
#define MLAP2P_F8_NAN 0x7fu
#define MLAP2P_F32_NAN 0x7fffffffu
#define MLAP2P_F64_NAN 0x7fffffffffffffffull

static inline float m2p_u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t m2p_f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline double m2p_u2d(uint64_t u)
{
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

static inline uint64_t m2p_d2u(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

/* fp16 -> float.  Subnormals: build 2^-14 * (1 + m/1024), subtract 2^-14. */
static inline float m2p_f16_to_f32(uint16_t h)
{
	uint32_t a = (uint32_t)(h & 0x7fffu) << 13;
	uint32_t e = a & 0x0f800000u;
	uint32_t s = (uint32_t)(h & 0x8000u) << 16;
	uint32_t n = a + (112u << 23);			/* rebias 15 -> 127 */
	uint32_t d = m2p_f2u(m2p_u2f(n + (1u << 23)) - m2p_u2f(113u << 23));

	n = e == 0x0f800000u ? n + (112u << 23) : n;	/* inf, NaN */
	n = e == 0 ? d : n;
	return m2p_u2f(n | s);
}

/* float -> fp16, RNE.  |x| < 2^-14: 0.5 + |x| rounds |x| to the 2^-24
 * grid and the low bits are the subnormal code. */
static inline uint16_t m2p_f32_to_f16(float x)
{
	uint32_t u = m2p_f2u(x);
	uint32_t s = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	uint32_t odd = (a >> 13) & 1u;
	uint32_t r = (a - (112u << 23) + 0xfffu + odd) >> 13;
	uint32_t d = m2p_f2u(m2p_u2f(a) + m2p_u2f(126u << 23)) - (126u << 23);

	r = a < (113u << 23) ? d : r;
	r = a >= (143u << 23) ? 0x7c00u : r;		/* >= 65536: inf */
	r |= s;
	r = a > 0x7f800000u ? MLAP2P_F16_NAN : r;
	return (uint16_t)r;
}

static inline float m2p_bf16_to_f32(uint16_t b)
{
	return m2p_u2f((uint32_t)b << 16);
}

static inline uint16_t m2p_f32_to_bf16(float x)
{
	uint32_t u = m2p_f2u(x);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;

	r = (u & 0x7fffffffu) > 0x7f800000u ? MLAP2P_BF16_NAN : r;
	return (uint16_t)r;
}

/* e4m3 -> float.  S.EEEE.MMM, bias 7; subnormals m * 2^-9. */
static inline float m2p_e4m3_to_f32(uint8_t b)
{
	uint32_t a = (uint32_t)(b & 0x7fu) << 20;
	uint32_t s = (uint32_t)(b & 0x80u) << 24;
	uint32_t n = a + (120u << 23);
	uint32_t d = m2p_f2u(m2p_u2f(n + (1u << 23)) - m2p_u2f(121u << 23));

	n = (b & 0x78u) == 0 ? d : n;
	n = (b & 0x7fu) == 0x7fu ? 0x7fc00000u : n;
	return m2p_u2f(n | s);
}

/* float -> e4m3, RNE, saturating.  Above 464 (the midpoint between 448
 * and the NaN code) and +-inf: +-448.  Subnormals: 2^14 + |x| rounds to
 * the 2^-9 grid. */
static inline uint8_t m2p_f32_to_e4m3(float x)
{
	uint32_t u = m2p_f2u(x);
	uint32_t s = (u >> 24) & 0x80u;
	uint32_t a = u & 0x7fffffffu;
	uint32_t odd = (a >> 20) & 1u;
	uint32_t r = (a - (120u << 23) + 0x7ffffu + odd) >> 20;
	uint32_t d = m2p_f2u(m2p_u2f(a) + m2p_u2f(141u << 23)) - (141u << 23);

	r = a < (121u << 23) ? d : r;
	r = a > 0x43e80000u ? 0x7eu : r;		/* > 464.0f */
	r |= s;
	r = a > 0x7f800000u ? MLAP2P_F8_NAN : r;
	return (uint8_t)r;
}

/* e5m2 is the top byte of an fp16. */
static inline float m2p_e5m2_to_f32(uint8_t b)
{
	return m2p_f16_to_f32((uint16_t)((uint32_t)b << 8));
}

/* float -> e5m2, RNE, saturating: from 61440 (the midpoint between 57344
 * and 65536) up, and +-inf: +-57344.  Subnormals: 2^7 + |x| rounds to the
 * 2^-16 grid. */
static inline uint8_t m2p_f32_to_e5m2(float x)
{
	uint32_t u = m2p_f2u(x);
	uint32_t s = (u >> 24) & 0x80u;
	uint32_t a = u & 0x7fffffffu;
	uint32_t odd = (a >> 21) & 1u;
	uint32_t r = (a - (112u << 23) + 0xfffffu + odd) >> 21;
	uint32_t d = m2p_f2u(m2p_u2f(a) + m2p_u2f(134u << 23)) - (134u << 23);

	r = a < (113u << 23) ? d : r;
	r = a >= 0x47700000u ? 0x7bu : r;		/* >= 61440.0f */
	r |= s;
	r = a > 0x7f800000u ? MLAP2P_F8_NAN : r;
	return (uint8_t)r;
}

/* Out-of-line copies (lib/coll/dtype.c). */
float mlap2p_f16_to_f32(uint16_t h);
uint16_t mlap2p_f32_to_f16(float x);
float mlap2p_bf16_to_f32(uint16_t b);
uint16_t mlap2p_f32_to_bf16(float x);
float mlap2p_e4m3_to_f32(uint8_t b);
uint8_t mlap2p_f32_to_e4m3(float x);
float mlap2p_e5m2_to_f32(uint8_t b);
uint8_t mlap2p_f32_to_e5m2(float x);

#endif
