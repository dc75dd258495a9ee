/* SPDX-License-Identifier: MIT */
/*
 * lib/proto/ll.h: the LL wire format (proto/ll.c has the rules): its one
 * step writer, mlap2p_ll_put(), and its one reader, mlap2p_ll_take(),
 * shared by the op engine (proto/ll.c) and the latency path below.  Inline
 * so that a blocking 8-byte message is one call deep: at 60-70 ns a
 * message, each call level and pointer load on the way from the peer's
 * flag to ours shows.
 */
#ifndef MLAP2P_LIB_PROTO_LL_H
#define MLAP2P_LIB_PROTO_LL_H

#include "proto/proto.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "LL halves are (data32 | flag32 << 32)");

/*
 * The reader takes lines in groups of MLAP2P_LL_AHEAD (four 64-byte cache
 * lines) and first waits for the group's last line.  Polling right behind
 * a writer that is still filling the same cache lines makes every line
 * cross twice; staying a group behind lets each cache line cross once.
 */
#define MLAP2P_LL_AHEAD		16

static inline uint32_t mlap2p_ll_flag(uint64_t step)
{
	return (uint32_t)(step + 1);
}

static inline uint64_t *mlap2p_ll_slot(const struct mlap2p_link *link,
				       uint64_t step)
{
	return mlap2p_proto_slot(link, NCCL_PROTO_LL, MLAP2P_LL_LINE, step);
}

/* Lines needed for @n payload bytes (a message of 0 bytes takes one). */
static inline size_t mlap2p_ll_lines(size_t n)
{
	return n ? (n + MLAP2P_LL_PAYLOAD - 1) / MLAP2P_LL_PAYLOAD : 1;
}

static inline void mlap2p_ll_store(uint64_t *line, uint64_t v, uint32_t flag)
{
	uint64_t f = (uint64_t)flag << 32;

	__atomic_store_n(&line[0], (v & 0xffffffffu) | f, __ATOMIC_RELAXED);
	__atomic_store_n(&line[1], (v >> 32) | f, __ATOMIC_RELAXED);
}

/* Both halves of line @i carry @flag. */
static inline int mlap2p_ll_ready(const uint64_t *line, size_t i,
				  uint32_t flag)
{
	return (uint32_t)(__atomic_load_n(&line[2 * i + 1],
					  __ATOMIC_RELAXED) >> 32) == flag &&
	       (uint32_t)(__atomic_load_n(&line[2 * i],
					  __ATOMIC_RELAXED) >> 32) == flag;
}

/*
 * The one LL step writer, on the slot at @line of @slotLines lines: @n
 * payload bytes of step @s (the first @head at @src, the rest at @rest,
 * mlap2p_payload_read()) as lines with the step's flag, which must not be
 * 0 (that step is mlap2p_ll_put_wrap_slot()'s).  A cleaning step,
 * (s & NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK, also rewrites the slot's
 * unused lines with its flag; returns whether @s was one.
 */
static inline int mlap2p_ll_put_slot(uint64_t *line, size_t slotLines,
				     uint64_t s, const char *src, size_t head,
				     const char *rest, size_t n)
{
	uint32_t flag = mlap2p_ll_flag(s);
	uint64_t v;
	size_t i;

	for (i = 0; i < mlap2p_min(head, n) / MLAP2P_LL_PAYLOAD; i++) {
		memcpy(&v, src + i * MLAP2P_LL_PAYLOAD, sizeof(v));
		mlap2p_ll_store(line + 2 * i, v, flag);
	}
	if (head >= n) {	/* every caller but the NET proxy */
		if (n % MLAP2P_LL_PAYLOAD || !n) {	/* a short last line */
			v = 0;
			if (n)
				memcpy(&v, src + i * MLAP2P_LL_PAYLOAD,
				       n % MLAP2P_LL_PAYLOAD);
			mlap2p_ll_store(line + 2 * i++, v, flag);
		}
	} else {
		for (; i < mlap2p_ll_lines(n); i++) {	/* from @rest on */
			size_t at = i * MLAP2P_LL_PAYLOAD;

			v = 0;
			mlap2p_payload_read(src, head, rest, at, &v,
					    mlap2p_min(n - at,
						       MLAP2P_LL_PAYLOAD));
			mlap2p_ll_store(line + 2 * i, v, flag);
		}
	}
	if (__builtin_expect((s & NCCL_LL_CLEAN_MASK) != NCCL_LL_CLEAN_MASK, 1))
		return 0;
	for (; i < slotLines; i++)
		mlap2p_ll_store(line + 2 * i, 0, flag);
	return 1;
}

/* The flag wrap, the step whose flag is 0: zero its slot, carry nothing. */
static inline void mlap2p_ll_put_wrap_slot(uint64_t *line, size_t slotLines)
{
	size_t i;

	for (i = 0; i < slotLines; i++)
		mlap2p_ll_store(line + 2 * i, 0, 0);
}

/*
 * mlap2p_ll_put_slot() on @link's slot of step @s, from @n contiguous
 * bytes.  The caller took the credit and, where a proxy reads it,
 * announced @n in sizesFifo first.
 */
static inline void mlap2p_ll_put(struct mlap2p_link *link, uint64_t s,
				 const char *src, size_t n)
{
	size_t lines = mlap2p_proto_slot_lines(link, NCCL_PROTO_LL,
					       MLAP2P_LL_LINE);

	if (mlap2p_ll_put_slot(mlap2p_ll_slot(link, s), lines, s, src, n,
			       NULL, n))
		link->conn->llLastCleaning = s;
}

static inline void mlap2p_ll_put_wrap(struct mlap2p_link *link, uint64_t s)
{
	mlap2p_ll_put_wrap_slot(mlap2p_ll_slot(link, s),
				mlap2p_proto_slot_lines(link, NCCL_PROTO_LL,
							MLAP2P_LL_LINE));
	link->conn->llLastCleaning = s;
}

/*
 * The one LL step reader (the NET proxy gathers with it too, given the
 * slot): copy lines @from onwards of step @s, @n payload bytes in all, to
 * @dst, a group of MLAP2P_LL_AHEAD lines at a time once
 * the group's last line is there.  Returns the first line not yet there
 * (mlap2p_ll_lines(@n) once the step is complete); the lines before it
 * are in @dst.  The caller returns the slot through *head.
 */
static inline size_t mlap2p_ll_take_slot(const uint64_t *line, uint64_t s,
					 char *dst, size_t n, size_t from)
{
	uint32_t flag = mlap2p_ll_flag(s);
	size_t lines = mlap2p_ll_lines(n), i;

	for (i = from; i < lines; i++) {
		size_t at = i * MLAP2P_LL_PAYLOAD;
		uint64_t lo, hi, v;

		if (!(i % MLAP2P_LL_AHEAD) && i + 1 < lines &&
		    !mlap2p_ll_ready(line, mlap2p_min(i + MLAP2P_LL_AHEAD,
						      lines) - 1, flag))
			return i;
		lo = __atomic_load_n(&line[2 * i], __ATOMIC_RELAXED);
		hi = __atomic_load_n(&line[2 * i + 1], __ATOMIC_RELAXED);
		if ((uint32_t)(lo >> 32) != flag || (uint32_t)(hi >> 32) != flag)
			return i;
		v = (lo & 0xffffffffu) | (hi << 32);
		if (at + MLAP2P_LL_PAYLOAD <= n)
			memcpy(dst + at, &v, sizeof(v));
		else if (at < n)
			memcpy(dst + at, &v, n - at);
	}
	return lines;
}

static inline size_t mlap2p_ll_take(const struct mlap2p_link *link,
				    uint64_t s, char *dst, size_t n,
				    size_t from)
{
	return mlap2p_ll_take_slot(mlap2p_ll_slot(link, s), s, dst, n, from);
}

/* The latency path (proto/proto.h, MLAP2P_LL_SMALL): one step, no op. */
static inline int mlap2p_ll_send_small(struct mlap2p_link *link,
				       const void *buf, size_t n)
{
	uint64_t s = link->conn->step;

	if (!mlap2p_ll_flag(s) || !mlap2p_has_credit(link, s))
		return 0;
	/* no proxy reads sizesFifo: P2P only */
	mlap2p_ll_put(link, s, buf, n);
	mlap2p_small_sent(link, s);
	return 1;
}

static inline int mlap2p_ll_recv_small(struct mlap2p_link *link, void *buf,
				       size_t n, uint32_t polls)
{
	struct ncclConnInfo *conn = link->conn;
	uint64_t s = conn->step;
	uint32_t flag = mlap2p_ll_flag(s);
	size_t lines = mlap2p_ll_lines(n);

	if (!flag)
		return 0;
	/* The last line first, then every line in order. */
	while (!mlap2p_ll_ready(mlap2p_ll_slot(link, s), lines - 1, flag))
		if (!--polls)
			return 0;
	if (mlap2p_ll_take(link, s, buf, n, 0) < lines)
		return 0;	/* nothing consumed: start over later */
	conn->step = s + 1;
	mlap2p_store_release(conn->head, s + 1);
	return 1;
}

#endif /* MLAP2P_LIB_PROTO_LL_H */
