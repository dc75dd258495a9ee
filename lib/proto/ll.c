// SPDX-License-Identifier: MIT
/*
 * lib/proto/ll.c: the LL protocol's op engine, for the smallest messages
 * (the line writer and reader are proto/ll.h's).
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
	int moved = 0;

	while (op->left) {
		uint64_t s = op->step;
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);

		if (!mlap2p_has_credit(link, s))
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		/* Announce the size before the lines (NCCL's connFifo): a
		 * NET proxy forwards a step once it is announced and all
		 * of its lines are there (lib/transport/net_proxy.c). */
		if (conn->sizesFifo)
			__atomic_store_n(&conn->sizesFifo[s % NCCL_STEPS], (int)n,
					 __ATOMIC_RELAXED);
		moved = 1;
		op->step = s + 1;
		if (!mlap2p_ll_flag(s)) {
			mlap2p_ll_put_wrap(link, s);
			continue;
		}
		mlap2p_ll_put(link, s, op->buf + op->off, n);
		op->off += n;
		op->left--;
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
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		size_t i;

		if (!mlap2p_ll_flag(s)) {	/* the wrap step carries nothing */
			op->step = s + 1;
			mlap2p_store_release(conn->head, op->step);
			continue;
		}
		i = mlap2p_ll_take(link, s, op->buf + op->off, n, op->line);
		if (i < mlap2p_ll_lines(n)) {
			moved |= i > op->line;
			op->line = i;
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		}
		op->line = 0;
		op->off += n;
		op->step = s + 1;
		op->left--;
		moved = 1;
		/* The loads of the lines are ordered before this store. */
		mlap2p_store_release(conn->head, op->step);
	}
	conn->step = op->step;
	return MLAP2P_OP_DONE;
}

int mlap2p_ll_watch(const struct mlap2p_op *op, struct mlap2p_watch *x)
{
	uint64_t s = op->step;
	size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
	size_t lines = mlap2p_ll_lines(n);
	size_t i = op->line;

	if (!mlap2p_ll_flag(s))
		return 0;
	if (!(i % MLAP2P_LL_AHEAD) && i + 1 < lines)	/* as ll_take waits */
		i = mlap2p_min(i + MLAP2P_LL_AHEAD, lines) - 1;
	x->w = mlap2p_ll_slot(op->link, s) + 2 * i + 1;
	x->want = mlap2p_ll_flag(s);
	x->shift = 32;
	return 1;
}

int mlap2p_ll_progress(struct mlap2p_op *op)
{
	return op->send ? ll_send(op) : ll_recv(op);
}
