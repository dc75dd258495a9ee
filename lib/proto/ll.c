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

#include "proto/proto.h"

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
	size_t slotLines = mlap2p_proto_slot_lines(link, NCCL_PROTO_LL,
						   MLAP2P_LL_LINE);
	int moved = 0;

	while (op->left) {
		uint64_t s = op->step;
		uint32_t flag = mlap2p_ll_flag(s);
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
		line = mlap2p_ll_slot(link, s);
		if (!flag) {	/* the wrap: zero the slot, carry nothing */
			for (i = 0; i < slotLines; i++)
				mlap2p_ll_store(line + 2 * i, 0, 0);
			conn->llLastCleaning = s;
			op->step = s + 1;
			moved = 1;
			continue;
		}
		i = mlap2p_ll_write(line, src, n, flag);
		if ((s & NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK) {
			for (; i < slotLines; i++)
				mlap2p_ll_store(line + 2 * i, 0, flag);
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
		uint32_t flag = mlap2p_ll_flag(s);
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		size_t lines = n ? (n + MLAP2P_LL_PAYLOAD - 1) / MLAP2P_LL_PAYLOAD : 1;
		char *dst = op->buf + op->off;
		const uint64_t *line = mlap2p_ll_slot(link, s);
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

int mlap2p_ll_watch(const struct mlap2p_op *op, struct mlap2p_watch *x)
{
	uint64_t s = op->step;
	size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
	size_t lines = n ? (n + MLAP2P_LL_PAYLOAD - 1) / MLAP2P_LL_PAYLOAD : 1;
	size_t i = op->line;

	if (!mlap2p_ll_flag(s))
		return 0;
	if (!(i % LL_AHEAD) && i + 1 < lines)	/* as ll_recv waits */
		i = mlap2p_min(i + LL_AHEAD, lines) - 1;
	x->w = mlap2p_ll_slot(op->link, s) + 2 * i + 1;
	x->want = mlap2p_ll_flag(s);
	x->shift = 32;
	return 1;
}

int mlap2p_ll_progress(struct mlap2p_op *op)
{
	return op->send ? ll_send(op) : ll_recv(op);
}
