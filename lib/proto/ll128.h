/* SPDX-License-Identifier: MIT */
/*
 * lib/proto/ll128.h: the LL128 wire format (proto/ll128.c has the rules):
 * its one step writer, mlap2p_ll128_put(), and its one reader,
 * mlap2p_ll128_take(), shared by the op engine (proto/ll128.c) and the
 * latency path below.
 */
#ifndef MLAP2P_LIB_PROTO_LL128_H
#define MLAP2P_LIB_PROTO_LL128_H

#include "proto/proto.h"

/* Read in groups of MLAP2P_LL128_AHEAD lines, waiting for the group's
 * last flag first, so the reader does not pull cache lines the writer is
 * still filling (as MLAP2P_LL_AHEAD). */
#define MLAP2P_LL128_AHEAD	4
#define MLAP2P_LL128_WORDS	(MLAP2P_LL128_LINE / sizeof(uint64_t))

static inline uint64_t *mlap2p_ll128_slot(const struct mlap2p_link *link,
					  uint64_t step)
{
	return mlap2p_proto_slot(link, NCCL_PROTO_LL128, MLAP2P_LL128_LINE,
				 step);
}

/* Lines needed for @n payload bytes (a message of 0 bytes takes one). */
static inline size_t mlap2p_ll128_lines(size_t n)
{
	return n ? (n + MLAP2P_LL128_PAYLOAD - 1) / MLAP2P_LL128_PAYLOAD : 1;
}

/*
 * The one LL128 step writer, on the slot at @base: @n payload bytes of
 * step @s (the first @head at @src, the rest at @rest,
 * mlap2p_payload_read()), each line's payload and then its flag (s + 1)
 * with release.
 */
static inline void mlap2p_ll128_put_slot(uint64_t *base, uint64_t s,
					 const char *src, size_t head,
					 const char *rest, size_t n)
{
	uint64_t *line = base;
	size_t i;

	for (i = 0; i < mlap2p_min(head, n) / MLAP2P_LL128_PAYLOAD; i++) {
		memcpy(line, src + i * MLAP2P_LL128_PAYLOAD,
		       MLAP2P_LL128_PAYLOAD);
		__atomic_store_n(&line[MLAP2P_LL128_FLAG_WORD], s + 1,
				 __ATOMIC_RELEASE);
		line += MLAP2P_LL128_WORDS;
	}
	if (head >= n) {	/* every caller but the NET proxy */
		if (n % MLAP2P_LL128_PAYLOAD || !n) {	/* a short last line */
			if (n)
				memcpy(line, src + i * MLAP2P_LL128_PAYLOAD,
				       n % MLAP2P_LL128_PAYLOAD);
			__atomic_store_n(&line[MLAP2P_LL128_FLAG_WORD], s + 1,
					 __ATOMIC_RELEASE);
		}
		return;
	}
	for (; i < mlap2p_ll128_lines(n); i++) {	/* from @rest on */
		size_t at = i * MLAP2P_LL128_PAYLOAD;

		mlap2p_payload_read(src, head, rest, at, line,
				    mlap2p_min(n - at, MLAP2P_LL128_PAYLOAD));
		__atomic_store_n(&line[MLAP2P_LL128_FLAG_WORD], s + 1,
				 __ATOMIC_RELEASE);
		line += MLAP2P_LL128_WORDS;
	}
}

/*
 * mlap2p_ll128_put_slot() on @link's slot of step @s, from @n contiguous
 * bytes.  The caller took the credit and, where a proxy reads it,
 * announced @n in sizesFifo first.
 */
static inline void mlap2p_ll128_put(struct mlap2p_link *link, uint64_t s,
				    const char *src, size_t n)
{
	mlap2p_ll128_put_slot(mlap2p_ll128_slot(link, s), s, src, n, NULL, n);
}

/*
 * The one LL128 step reader (the NET proxy gathers with it too, given the
 * slot): copy lines @from onwards of step @s, @n
 * payload bytes in all, to @dst, a group of MLAP2P_LL128_AHEAD lines at a
 * time once the group's last flag is there, each line after its flag is
 * acquired.  Returns the first line not yet there (mlap2p_ll128_lines(@n)
 * once the step is complete).  The caller returns the slot through *head.
 */
static inline size_t mlap2p_ll128_take_slot(const uint64_t *base,
					    uint64_t s, char *dst, size_t n,
					    size_t from)
{
	size_t lines = mlap2p_ll128_lines(n), i;

	for (i = from; i < lines; i++) {
		const uint64_t *line = base + i * MLAP2P_LL128_WORDS;
		size_t at = i * MLAP2P_LL128_PAYLOAD;

		if (!(i % MLAP2P_LL128_AHEAD) && i + 1 < lines) {
			size_t last = mlap2p_min(i + MLAP2P_LL128_AHEAD,
						 lines) - 1;

			if (__atomic_load_n(&base[last * MLAP2P_LL128_WORDS +
						  MLAP2P_LL128_FLAG_WORD],
					    __ATOMIC_RELAXED) != s + 1)
				return i;
		}
		if (__atomic_load_n(&line[MLAP2P_LL128_FLAG_WORD],
				    __ATOMIC_ACQUIRE) != s + 1)
			return i;
		if (at + MLAP2P_LL128_PAYLOAD <= n)
			memcpy(dst + at, line, MLAP2P_LL128_PAYLOAD);
		else if (at < n)
			memcpy(dst + at, line, n - at);
	}
	return lines;
}

static inline size_t mlap2p_ll128_take(const struct mlap2p_link *link,
				       uint64_t s, char *dst, size_t n,
				       size_t from)
{
	return mlap2p_ll128_take_slot(mlap2p_ll128_slot(link, s), s, dst, n,
				      from);
}

/* The latency path (proto/proto.h, MLAP2P_LL128_SMALL): one step, no op. */
static inline int mlap2p_ll128_send_small(struct mlap2p_link *link,
					  const void *buf, size_t n)
{
	uint64_t s = link->conn->step;

	if (!mlap2p_has_credit(link, s))
		return 0;
	/* no proxy reads sizesFifo: P2P only */
	mlap2p_ll128_put(link, s, buf, n);
	mlap2p_small_sent(link, s);
	return 1;
}

/*
 * At most MLAP2P_LL128_SMALL bytes, one group of lines: wait for the last
 * line's flag, then take the step.
 */
static inline int mlap2p_ll128_recv_small(struct mlap2p_link *link,
					  void *buf, size_t n, uint32_t polls)
{
	struct ncclConnInfo *conn = link->conn;
	uint64_t s = conn->step;
	size_t lines = mlap2p_ll128_lines(n);
	const uint64_t *base = mlap2p_ll128_slot(link, s);

	_Static_assert(MLAP2P_LL128_SMALL <=
		       MLAP2P_LL128_AHEAD * MLAP2P_LL128_PAYLOAD,
		       "one group of lines");
	if (n > MLAP2P_LL128_SMALL)
		return 0;
	while (__atomic_load_n(&base[(lines - 1) * MLAP2P_LL128_WORDS +
				     MLAP2P_LL128_FLAG_WORD],
			       __ATOMIC_RELAXED) != s + 1)
		if (!--polls)
			return 0;
	if (mlap2p_ll128_take(link, s, buf, n, 0) < lines)
		return 0;	/* nothing consumed: start over later */
	conn->step = s + 1;
	mlap2p_store_release(conn->head, s + 1);
	return 1;
}

#endif /* MLAP2P_LIB_PROTO_LL128_H */
