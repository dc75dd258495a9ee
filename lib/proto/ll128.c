// SPDX-License-Identifier: MIT
/*
 * lib/proto_ll128.c: LL128 in its CPU form, for mid-sized messages.
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

/* Read in groups of LL128_AHEAD lines, waiting for the group's last flag
 * first, so the reader does not pull cache lines the writer is still
 * filling (see LL_AHEAD in proto_ll.c). */
#define LL128_AHEAD	4

static inline uint64_t *ll128_slot(const struct mlap2p_link *link,
				   uint64_t step)
{
	return mlap2p_proto_slot(link, NCCL_PROTO_LL128, MLAP2P_LL128_LINE,
				 step);
}

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

/* One step of n bytes into its lines: each line's payload, then its flag
 * with release. */
static void ll128_write(uint64_t *line, const char *src, size_t n,
			uint64_t flag)
{
	size_t full = n / MLAP2P_LL128_PAYLOAD, i;

	for (i = 0; i < full; i++) {
		memcpy(line, src + i * MLAP2P_LL128_PAYLOAD,
		       MLAP2P_LL128_PAYLOAD);
		__atomic_store_n(&line[MLAP2P_LL128_FLAG_WORD], flag,
				 __ATOMIC_RELEASE);
		line += MLAP2P_LL128_LINE / sizeof(*line);
	}
	if (n % MLAP2P_LL128_PAYLOAD || !n) {	/* a short last line */
		if (n)
			memcpy(line, src + i * MLAP2P_LL128_PAYLOAD,
			       n % MLAP2P_LL128_PAYLOAD);
		__atomic_store_n(&line[MLAP2P_LL128_FLAG_WORD], flag,
				 __ATOMIC_RELEASE);
	}
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
		 * of its lines are there (lib/net.c). */
		if (conn->sizesFifo)
			__atomic_store_n(&conn->sizesFifo[s % NCCL_STEPS], (int)n,
					 __ATOMIC_RELAXED);
		ll128_write(ll128_slot(link, s), op->buf + op->off, n, s + 1);
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
		size_t lines = n ? (n + MLAP2P_LL128_PAYLOAD - 1) / MLAP2P_LL128_PAYLOAD : 1;
		char *dst = op->buf + op->off;
		const uint64_t *base = ll128_slot(link, s);
		size_t i;

		for (i = op->line; i < lines; i++) {
			const uint64_t *line = base + i * (MLAP2P_LL128_LINE / sizeof(*line));
			size_t at = i * MLAP2P_LL128_PAYLOAD;

			if (!(i % LL128_AHEAD) && i + 1 < lines) {
				size_t last = mlap2p_min(i + LL128_AHEAD, lines) - 1;
				const uint64_t *probe = base + last *
					(MLAP2P_LL128_LINE / sizeof(*probe));

				if (__atomic_load_n(&probe[MLAP2P_LL128_FLAG_WORD],
						    __ATOMIC_RELAXED) != s + 1) {
					moved |= i > op->line;
					op->line = i;
					return moved ? MLAP2P_OP_MOVED :
						       MLAP2P_OP_IDLE;
				}
			}
			if (__atomic_load_n(&line[MLAP2P_LL128_FLAG_WORD],
					    __ATOMIC_ACQUIRE) != s + 1) {
				moved |= i > op->line;
				op->line = i;
				return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
			}
			if (at + MLAP2P_LL128_PAYLOAD <= n)
				memcpy(dst + at, line, MLAP2P_LL128_PAYLOAD);
			else if (at < n)
				memcpy(dst + at, line, n - at);
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

int mlap2p_ll128_send_small(struct mlap2p_link *link, const void *buf,
			    size_t n)
{
	uint64_t s = link->conn->step;

	if (!mlap2p_has_credit(link, s))
		return 0;
	/* no proxy reads sizesFifo: P2P only */
	ll128_write(ll128_slot(link, s), buf, n, s + 1);
	mlap2p_small_sent(link, s);
	return 1;
}

/*
 * At most MLAP2P_LL128_SMALL bytes, one group of LL128_AHEAD lines: the
 * last line's flag, acquired, says they are all there (the writer
 * released it after the lines before it).
 */
int mlap2p_ll128_recv_small(struct mlap2p_link *link, void *buf, size_t n,
			    uint32_t polls)
{
	struct ncclConnInfo *conn = link->conn;
	uint64_t s = conn->step;
	size_t lines = n ? (n + MLAP2P_LL128_PAYLOAD - 1) / MLAP2P_LL128_PAYLOAD : 1;
	const uint64_t *base = ll128_slot(link, s);
	const size_t words = MLAP2P_LL128_LINE / sizeof(*base);
	char *dst = buf;
	size_t i;

	_Static_assert(MLAP2P_LL128_SMALL <= LL128_AHEAD * MLAP2P_LL128_PAYLOAD,
		       "one group of lines");
	if (n > MLAP2P_LL128_SMALL)
		return 0;
	while (__atomic_load_n(&base[(lines - 1) * words + MLAP2P_LL128_FLAG_WORD],
			       __ATOMIC_ACQUIRE) != s + 1)
		if (!--polls)
			return 0;
	for (i = 0; n && i < lines; i++) {
		size_t at = i * MLAP2P_LL128_PAYLOAD;

		memcpy(dst + at, base + i * words,
		       mlap2p_min(n - at, MLAP2P_LL128_PAYLOAD));
	}
	conn->step = s + 1;
	mlap2p_store_release(conn->head, s + 1);
	return 1;
}

int mlap2p_ll128_watch(const struct mlap2p_op *op, struct mlap2p_watch *x)
{
	uint64_t s = op->step;
	size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
	size_t lines = n ? (n + MLAP2P_LL128_PAYLOAD - 1) / MLAP2P_LL128_PAYLOAD : 1;
	size_t i = op->line;

	if (!(i % LL128_AHEAD) && i + 1 < lines)	/* as ll128_recv waits */
		i = mlap2p_min(i + LL128_AHEAD, lines) - 1;
	x->w = ll128_slot(op->link, s) + i * (MLAP2P_LL128_LINE / sizeof(uint64_t)) +
	       MLAP2P_LL128_FLAG_WORD;
	x->want = s + 1;
	x->shift = 0;
	return 1;
}

int mlap2p_ll128_progress(struct mlap2p_op *op)
{
	return op->send ? ll128_send(op) : ll128_recv(op);
}
