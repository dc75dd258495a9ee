/* SPDX-License-Identifier: MIT */
/*
 * lib/copy.h: memcpy with non-temporal stores, for destinations the
 * copier will not read again soon (lib/copy.c).  Also built into
 * bench/ring2copy.
 */
#ifndef MLAP2P_COPY_H
#define MLAP2P_COPY_H

#include <stddef.h>

/* memcpy(dst, src, n) around the caches, ordered by a store fence. */
void mlap2p_copy_nt(void *dst, const void *src, size_t n);
/*
 * One small block (a few hundred bytes) into @dst1 and, unless NULL,
 * @dst2 with streaming stores and no fence: a caller that streams many
 * blocks, each just computed in the cache, fences once after the last
 * (mlap2p_copy_fence).  Bytes not 16-byte aligned go with memcpy.
 */
void mlap2p_stream_block(void *dst1, void *dst2, const void *src, size_t n);
/* Order every streaming store before it (a store fence). */
void mlap2p_copy_fence(void);

#endif
