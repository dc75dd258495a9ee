// SPDX-License-Identifier: MIT
/*
 * lib/proto_ll.c: the LL protocol, for the smallest messages.
 *
 * A line is 16 bytes, {data1, flag1, data2, flag2}, and carries 8 payload
 * bytes.  There is no tail and no fence: every 8-byte half is one aligned
 * store of (data32 | flag32 << 32), so a reader that sees the flag in a half
 * also sees that half's data.  The receiver takes a line only when both
 * flags equal step + 1, then returns the whole slot with one release store
 * of *head at the end of the step.
 *
 * Flags are 32 bits and steps 64.  Two rules keep a stale line from ever
 * matching.  Steps with (step & NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK,
 * one per slot every 2^31 steps, rewrite the unused lines of their slot with
 * their flag, so no line is ever 2^32 steps old.  And a step whose flag would
 * be 0 (one in 2^32; it is such a cleaning step) carries no data: the sender
 * zeroes the whole slot instead and the receiver skips it, so a zeroed line
 * never matches and a connection may start at any step.
 */
#include <errno.h>
#include <string.h>

#include "proto.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "LL halves are (data32 | flag32 << 32)");

static inline uint32_t ll_flag(uint64_t step)
{
	return (uint32_t)(step + 1);
}


static inline size_t ll_slot_lines(const struct mlap2p_link *link)
{
	return link->buffSizes[NCCL_PROTO_LL] / NCCL_STEPS / MLAP2P_LL_LINE;
}

static inline uint64_t *ll_slot(const struct mlap2p_link *link, uint64_t step)
{
	size_t lines = ll_slot_lines(link);

	return (uint64_t *)(link->conn->buffs[NCCL_PROTO_LL] +
			    (step % NCCL_STEPS) * lines * MLAP2P_LL_LINE);
}

/*
 * The receiver reads in groups of LL_AHEAD lines (four 64-byte cache
 * lines) and first waits for the group's last line.  Polling right behind
 * a writer that is still filling the same cache lines makes every line
 * cross twice; staying a group behind lets each cache line cross once.
 */
#define LL_AHEAD	16

static inline int ll_ready(const uint64_t *line, size_t i, uint32_t flag)
{
	return (uint32_t)(__atomic_load_n(&line[2 * i + 1], __ATOMIC_RELAXED) >> 32) == flag &&
	       (uint32_t)(__atomic_load_n(&line[2 * i], __ATOMIC_RELAXED) >> 32) == flag;
}

static inline void ll_store(uint64_t *line, uint64_t v, uint32_t flag)
{
	uint64_t f = (uint64_t)flag << 32;

	__atomic_store_n(&line[0], (v & 0xffffffffu) | f, __ATOMIC_RELAXED);
	__atomic_store_n(&line[1], (v >> 32) | f, __ATOMIC_RELAXED);
}

/* Write @n payload bytes (at least one line) as lines; lines written. */
static inline size_t ll_write(uint64_t *line, const char *src, size_t n,
			      uint32_t flag)
{
	size_t i;
	uint64_t v;

	for (i = 0; i < n / MLAP2P_LL_PAYLOAD; i++) {
		memcpy(&v, src + i * MLAP2P_LL_PAYLOAD, sizeof(v));
		ll_store(line + 2 * i, v, flag);
	}
	if (n % MLAP2P_LL_PAYLOAD || !n) {
		v = 0;
		if (n)
			memcpy(&v, src + i * MLAP2P_LL_PAYLOAD,
			       n % MLAP2P_LL_PAYLOAD);
		ll_store(line + 2 * i++, v, flag);
	}
	return i;
}

size_t mlap2p_proto_step_bytes(const struct mlap2p_link *link, int proto)
{
	size_t step = link->buffSizes[proto] / NCCL_STEPS;

	switch (proto) {
	case NCCL_PROTO_LL:
		return step / MLAP2P_LL_LINE * MLAP2P_LL_PAYLOAD;
	case NCCL_PROTO_LL128:
		return step / MLAP2P_LL128_LINE * MLAP2P_LL128_PAYLOAD;
	case NCCL_PROTO_SIMPLE:
		if (link->chunkSize && link->chunkSize < step)
			return link->chunkSize;
		return step;
	}
	return 0;
}

int mlap2p_ll_start(struct mlap2p_op *op)
{
	struct ncclConnInfo *conn = op->link->conn;

	op->perStep = mlap2p_proto_step_bytes(op->link, NCCL_PROTO_LL);
	if (!op->perStep || !conn->buffs[NCCL_PROTO_LL] ||
	    ((uintptr_t)conn->buffs[NCCL_PROTO_LL] & (MLAP2P_LL_LINE - 1)))
		return -EINVAL;
	op->first = op->step = conn->step;
	op->left = op->bytes ? (op->bytes + op->perStep - 1) / op->perStep : 1;
	op->off = 0;
	op->line = 0;
	op->state = 0;
	op->mode = MLAP2P_MODE_FIFO;
	return 0;
}

static int ll_send(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	size_t slotLines = ll_slot_lines(link);
	int moved = 0;

	while (op->left) {
		uint64_t s = op->step;
		uint32_t flag = ll_flag(s);
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		const char *src = op->buf + op->off;
		size_t i;
		uint64_t *line;

		if (!mlap2p_has_credit(link, s))
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		/* Announce the size before the lines (NCCL's connFifo): a
		 * NET proxy forwards a step once it is announced and all
		 * of its lines are there (lib/net.c). */
		if (conn->sizesFifo)
			__atomic_store_n(&conn->sizesFifo[s % NCCL_STEPS], (int)n,
					 __ATOMIC_RELAXED);
		line = ll_slot(link, s);
		if (!flag) {	/* the wrap: zero the slot, carry nothing */
			for (i = 0; i < slotLines; i++)
				ll_store(line + 2 * i, 0, 0);
			conn->llLastCleaning = s;
			op->step = s + 1;
			moved = 1;
			continue;
		}
		i = ll_write(line, src, n, flag);
		if ((s & NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK) {
			for (; i < slotLines; i++)
				ll_store(line + 2 * i, 0, flag);
			conn->llLastCleaning = s;
		}
		op->off += n;
		op->step = s + 1;
		op->left--;
		moved = 1;
	}
	conn->step = op->step;
	return MLAP2P_OP_DONE;
}

static int ll_recv(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	int moved = 0;

	while (op->left) {
		uint64_t s = op->step;
		uint32_t flag = ll_flag(s);
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		size_t lines = n ? (n + MLAP2P_LL_PAYLOAD - 1) / MLAP2P_LL_PAYLOAD : 1;
		char *dst = op->buf + op->off;
		const uint64_t *line = ll_slot(link, s);
		size_t i;

		if (!flag) {	/* the wrap step carries nothing */
			op->step = s + 1;
			mlap2p_store_release(conn->head, op->step);
			continue;
		}
		for (i = op->line; i < lines; i++) {
			uint64_t lo, hi, v;
			size_t at = i * MLAP2P_LL_PAYLOAD;

			if (!(i % LL_AHEAD) && i + 1 < lines &&
			    !ll_ready(line, mlap2p_min(i + LL_AHEAD, lines) - 1, flag)) {
				moved |= i > op->line;
				op->line = i;
				return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
			}
			lo = __atomic_load_n(&line[2 * i], __ATOMIC_RELAXED);
			hi = __atomic_load_n(&line[2 * i + 1], __ATOMIC_RELAXED);
			if ((uint32_t)(lo >> 32) != flag ||
			    (uint32_t)(hi >> 32) != flag) {
				moved |= i > op->line;
				op->line = i;
				return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
			}
			v = (lo & 0xffffffffu) | (hi << 32);
			if (at + MLAP2P_LL_PAYLOAD <= n)
				memcpy(dst + at, &v, sizeof(v));
			else if (at < n)
				memcpy(dst + at, &v, n - at);
		}
		op->line = 0;
		op->off += n;
		op->step = s + 1;
		op->left--;
		moved = 1;
		/* The loads above are ordered before this store. */
		mlap2p_store_release(conn->head, op->step);
	}
	conn->step = op->step;
	return MLAP2P_OP_DONE;
}

int mlap2p_ll_send_small(struct mlap2p_link *link, const void *buf, size_t n)
{
	struct ncclConnInfo *conn = link->conn;
	uint64_t s = conn->step;
	uint32_t flag = ll_flag(s);

	if (!flag || (s & NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK ||
	    !mlap2p_has_credit(link, s))
		return 0;
	/* no proxy reads sizesFifo: P2P only */
	ll_write(ll_slot(link, s), buf, n, flag);
	mlap2p_small_sent(link, s);
	return 1;
}

int mlap2p_ll_recv_small(struct mlap2p_link *link, void *buf, size_t n,
			 uint32_t polls)
{
	struct ncclConnInfo *conn = link->conn;
	uint64_t s = conn->step;
	uint32_t flag = ll_flag(s);
	size_t lines = n ? (n + MLAP2P_LL_PAYLOAD - 1) / MLAP2P_LL_PAYLOAD : 1;
	const uint64_t *line = ll_slot(link, s);
	char *dst = buf;
	size_t i;

	/* The last line first, as ll_recv() does; then every flag. */
	if (!flag)
		return 0;
	while (!ll_ready(line, lines - 1, flag))
		if (!--polls)
			return 0;
	for (i = 0; i < lines; i++) {
		uint64_t lo = __atomic_load_n(&line[2 * i], __ATOMIC_RELAXED);
		uint64_t hi = __atomic_load_n(&line[2 * i + 1], __ATOMIC_RELAXED);
		uint64_t v = (lo & 0xffffffffu) | (hi << 32);
		size_t at = i * MLAP2P_LL_PAYLOAD;

		if ((uint32_t)(lo >> 32) != flag || (uint32_t)(hi >> 32) != flag)
			return 0;	/* nothing taken yet: start over later */
		if (at < n)
			memcpy(dst + at, &v, mlap2p_min(n - at, sizeof(v)));
	}
	conn->step = s + 1;
	mlap2p_store_release(conn->head, s + 1);
	return 1;
}

int mlap2p_ll_watch(const struct mlap2p_op *op, struct mlap2p_watch *x)
{
	uint64_t s = op->step;
	size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
	size_t lines = n ? (n + MLAP2P_LL_PAYLOAD - 1) / MLAP2P_LL_PAYLOAD : 1;
	size_t i = op->line;

	if (!ll_flag(s))
		return 0;
	if (!(i % LL_AHEAD) && i + 1 < lines)	/* as ll_recv waits */
		i = mlap2p_min(i + LL_AHEAD, lines) - 1;
	x->w = ll_slot(op->link, s) + 2 * i + 1;
	x->want = ll_flag(s);
	x->shift = 32;
	return 1;
}

int mlap2p_ll_progress(struct mlap2p_op *op)
{
	return op->send ? ll_send(op) : ll_recv(op);
}
