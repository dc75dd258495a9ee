// SPDX-License-Identifier: MIT
/*
 * lib/proto/ll128.c: LL128 in its CPU form, for mid-sized messages: the op
 * engine (the line writer and reader are proto/ll128.h's).
 *
 * A line is 128 bytes: 15 payload words and a flag word (the last), so 120
 * of every 128 bytes are payload.  On a GPU LL128 relies on 128-byte stores
 * landing whole; a CPU has no such store, so here the writer copies the
 * payload and then stores the flag (= step + 1, 64 bits, never wraps) with
 * release, and the reader acquires the flag before it reads the payload.
 * The receiver consumes lines as they arrive, so a message streams through
 * line by line instead of slot by slot, and returns the slot with one
 * release store of *head per step.
 */
#include <errno.h>
#include <string.h>

#include "proto/proto.h"

int mlap2p_ll128_start(struct mlap2p_op *op)
{
	struct ncclConnInfo *conn = op->link->conn;

	op->perStep = mlap2p_proto_step_bytes(op->link, NCCL_PROTO_LL128);
	if (!op->perStep || !conn->buffs[NCCL_PROTO_LL128] ||
	    ((uintptr_t)conn->buffs[NCCL_PROTO_LL128] & 7))
		return -EINVAL;
	op->first = op->step = conn->step;
	op->left = op->bytes ? (op->bytes + op->perStep - 1) / op->perStep : 1;
	op->off = 0;
	op->line = 0;
	op->state = 0;
	op->mode = MLAP2P_MODE_FIFO;
	return 0;
}

static int ll128_send(struct mlap2p_op *op)
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
		mlap2p_ll128_put(link, s, op->buf + op->off, n);
		op->off += n;
		op->step = s + 1;
		op->left--;
		moved = 1;
	}
	conn->step = op->step;
	return MLAP2P_OP_DONE;
}

static int ll128_recv(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	int moved = 0;

	while (op->left) {
		uint64_t s = op->step;
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		size_t i;

		i = mlap2p_ll128_take(link, s, op->buf + op->off, n, op->line);
		if (i < mlap2p_ll128_lines(n)) {
			moved |= i > op->line;
			op->line = i;
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		}
		op->line = 0;
		op->off += n;
		op->step = s + 1;
		op->left--;
		moved = 1;
		mlap2p_store_release(conn->head, op->step);
	}
	conn->step = op->step;
	return MLAP2P_OP_DONE;
}

int mlap2p_ll128_watch(const struct mlap2p_op *op, struct mlap2p_watch *x)
{
	uint64_t s = op->step;
	size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
	size_t lines = mlap2p_ll128_lines(n);
	size_t i = op->line;

	if (!(i % MLAP2P_LL128_AHEAD) && i + 1 < lines)	/* as ll128_take waits */
		i = mlap2p_min(i + MLAP2P_LL128_AHEAD, lines) - 1;
	x->w = mlap2p_ll128_slot(op->link, s) + i * MLAP2P_LL128_WORDS +
	       MLAP2P_LL128_FLAG_WORD;
	x->want = s + 1;
	x->shift = 0;
	return 1;
}

int mlap2p_ll128_progress(struct mlap2p_op *op)
{
	return op->send ? ll128_send(op) : ll128_recv(op);
}
