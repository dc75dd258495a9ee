// SPDX-License-Identifier: MIT
/*
 * lib/copy.c: copies into memory the copier will not read again soon.
 *
 * A receive buffer much larger than the caches is written once and the
 * slot it comes from is reused at once: a plain memcpy first reads every
 * destination line in (for ownership) and then evicts it dirty, so each
 * byte crosses the memory bus twice on its way out.  Non-temporal stores
 * write whole lines around the caches.  Only where SSE2 is (every x86-64);
 * elsewhere, memcpy.
 */
#include <stdint.h>
#include <string.h>

#include "proto/copy.h"

#if defined(__x86_64__)
#include <emmintrin.h>

void mlap2p_copy_nt(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;
	size_t head = -(uintptr_t)d & 15;

	if (n < 1024) {
		memcpy(d, s, n);
		return;
	}
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* The sanitizers see no streaming store: let them check the same
	 * range written the plain way first (the loop below rewrites it). */
	memcpy(d, s, n);
#endif
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
	/* Streaming stores are weakly ordered: have them all visible before
	 * whatever this copy is followed by (a head release, a completion). */
	_mm_sfence();
}

/* Whole 16-byte units, @d (and @e) aligned. */
static inline void stream16(char *d, char *e, const char *s, size_t n)
{
	size_t k;

	if (!e) {
		for (k = 0; k < n; k += 16)
			_mm_stream_si128((__m128i *)(d + k),
					 _mm_loadu_si128((const __m128i *)(s + k)));
		return;
	}
	for (k = 0; k < n; k += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *)(s + k));

		_mm_stream_si128((__m128i *)(d + k), a);
		_mm_stream_si128((__m128i *)(e + k), a);
	}
}

void mlap2p_stream_block(void *dst1, void *dst2, const void *src, size_t n)
{
	char *d = dst1, *e = dst2;
	const char *s = src;
	size_t head = -(uintptr_t)d & 15, body;

	if (e && ((uintptr_t)d ^ (uintptr_t)e) & 15) {
		mlap2p_stream_block(d, NULL, s, n);
		mlap2p_stream_block(e, NULL, s, n);
		return;
	}
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	memcpy(d, s, n);	/* as in mlap2p_copy_nt */
	if (e)
		memcpy(e, s, n);
#endif
	if (head > n)
		head = n;
	if (head) {
		memcpy(d, s, head);
		if (e)
			memcpy(e, s, head);
	}
	body = (n - head) & ~(size_t)15;
	stream16(d + head, e ? e + head : NULL, s + head, body);
	if (n - head - body) {
		memcpy(d + head + body, s + head + body, n - head - body);
		if (e)
			memcpy(e + head + body, s + head + body,
			       n - head - body);
	}
}

void mlap2p_copy_fence(void)
{
	_mm_sfence();
}
#else
void mlap2p_copy_nt(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

void mlap2p_stream_block(void *dst1, void *dst2, const void *src, size_t n)
{
	memcpy(dst1, src, n);
	if (dst2)
		memcpy(dst2, src, n);
}

void mlap2p_copy_fence(void)
{
}
#endif
