// SPDX-License-Identifier: MIT
/*
 * lib/proto_simple.c: SIMPLE, the bulk protocol, and single copy.
 *
 * A step carries up to perStep bytes (the slot, buffSizes[SIMPLE] /
 * NCCL_STEPS, or the link's smaller chunk).  Sender: wait for credit on
 * *head, copy into the slot, write sizesFifo[slot], release *tail.  Receiver:
 * acquire *tail, check sizesFifo[slot], copy out, release *head.  At most
 * one step is copied per progress call, so a rank that both sends and
 * receives interleaves the two.
 *
 * Every message starts with the ptrExchange offer (lib/proto.h); when it
 * names a buffer the data skips the slot: in write mode the sender copies
 * straight into the receiver's buffer, in read mode the receiver copies
 * straight out of the sender's and the sender returns only once *head says
 * it has.  An address offer (MLAP2P_XCHG_ADDR) has the sender write each
 * step with link->write_peer instead of memcpy; a sender that may not do so
 * refuses it step by step through sizesFifo (~n), which the receiver
 * recognises on the first step.  The step handshake is the same in all
 * modes.
 *
 * On a NET link (MLAP2P_LINK_NETPTR) a send from a buffer the transport
 * registered (link->reg) copies nothing: each step publishes its address in
 * ptrsFifo[slot] for the proxy to send from, and the sender drains, as in
 * read mode, until *head says the fabric is done with every step.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proto/proto.h"
#include "util.h"

enum { SIMPLE_XCHG, SIMPLE_STEPS, SIMPLE_DRAIN, SIMPLE_PUBLISH, SIMPLE_PULLED,
       SIMPLE_TAKEN };

static inline struct mlap2p_xchg *simple_xchg(struct ncclConnInfo *conn)
{
	char *sendMem = (char *)conn->ptrExchange -
			offsetof(struct ncclSendMem, ptrExchange);

	return (struct mlap2p_xchg *)(sendMem + MLAP2P_XCHG_OFFSET);
}

/* sizesFifo lives in the receiver's ncclRecvMem, which *tail points into. */
static inline int *simple_sizes(struct ncclConnInfo *conn)
{
	if (conn->sizesFifo)
		return conn->sizesFifo;
	return ((struct ncclRecvMem *)conn->tail)->sizesFifo;
}

static inline char *simple_slot(struct mlap2p_op *op, uint64_t step)
{
	struct mlap2p_link *link = op->link;

	return link->conn->buffs[NCCL_PROTO_SIMPLE] +
	       (step % NCCL_STEPS) *
	       (link->buffSizes[NCCL_PROTO_SIMPLE] / NCCL_STEPS);
}

/* Copy a step into the receive buffer, from a slot or the send buffer. */
static inline void simple_deliver(const struct mlap2p_op *op, void *dst,
				   const void *src, size_t n)
{
	if (op->link->ntMin && op->bytes >= op->link->ntMin)
		mlap2p_copy_nt(dst, src, n);
	else
		memcpy(dst, src, n);
}

/*
 * A send with a tee leaves each step's payload there too, from where it
 * was just written or read (so in cache): the one read of the send buffer
 * serves both, as NCCL's copySend primitive.
 */
static inline void simple_tee(const struct mlap2p_op *op, const void *src,
			      size_t n)
{
	if (op->tee && op->teeNt)
		mlap2p_copy_nt(op->tee + op->off, src, n);
	else if (op->tee)
		simple_deliver(op, op->tee + op->off, src, n);
}

/* NET: did the proxy receive step @s in place, where it belongs? */
static inline int simple_landed(const struct mlap2p_op *op, uint64_t s)
{
	const struct ncclConnInfo *conn = op->link->conn;

	return op->landed && conn->ptrsFifo &&
	       __atomic_load_n(&conn->ptrsFifo[s % NCCL_STEPS],
			       __ATOMIC_RELAXED) == (void *)(op->buf + op->off);
}

/* Does this end publish the offer (else it accepts it)? */
static inline int simple_provider(const struct mlap2p_op *op)
{
	return !!(op->link->flags & MLAP2P_LINK_READ) == !!op->send;
}

/* Which way this send goes (lib/proto.h): MLAP2P_SEND_*. */
static int simple_way(const struct mlap2p_op *op)
{
	const struct mlap2p_link *link = op->link;

	if (op->noPublish)
		return MLAP2P_SEND_FIFO;
	if (!op->send || !op->bytes || !link->conn->ptrExchange ||
	    !link->publish ||
	    (link->flags & (MLAP2P_LINK_READ | MLAP2P_LINK_SAMEPROC |
			    MLAP2P_LINK_NODIRECT | MLAP2P_LINK_NOPUBLISH)))
		return MLAP2P_SEND_OFFER;
	return link->publish(link->arg, op->buf, op->bytes);
}

/* Sender first: the header into the first step's slot, once it has
 * credit; the receiver reads the rest from our buffer. */
static int simple_publish(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct mlap2p_pull *h;

	if (!mlap2p_has_credit(link, op->first))
		return MLAP2P_OP_IDLE;
	h = (struct mlap2p_pull *)simple_slot(op, op->first);
	h->step = op->first;
	h->addr = (uintptr_t)op->buf;
	h->bytes = op->bytes;
	simple_sizes(link->conn)[op->first % NCCL_STEPS] = MLAP2P_SIZE_PULL;
	mlap2p_store_release(link->conn->tail, op->first + 1);
	op->state = SIMPLE_PULLED;
	return MLAP2P_OP_MOVED;
}

/*
 * Sender first, *head = first + 1: the receiver has answered.  Take its
 * offer for this message out of ptrExchange, then complete or push the
 * message through the slots.
 */
static int simple_pulled(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	struct mlap2p_xchg *x = simple_xchg(conn);
	void **px = conn->ptrExchange;
	uint64_t v, tag = op->first + 1;
	void *val;

	if (mlap2p_load_acquire(conn->head) < tag)
		return MLAP2P_OP_IDLE;
	link->head = tag;
	v = __atomic_load_n(&x->pulled, __ATOMIC_RELAXED);
	val = __atomic_load_n(px, __ATOMIC_ACQUIRE);
	if (v >> 2 != tag || !val || x->step != op->first)
		return -EPROTO;
	/* An address offer the receiver could still withdraw (it will
	 * not, having answered): take it the same way. */
	if (!__atomic_compare_exchange_n(px, &val, NULL, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return -EPROTO;
	op->step = tag;
	if ((v & 3) == MLAP2P_PULL_DONE) {
		op->left = 0;
		op->off = op->bytes;
		conn->step = op->step;
		return MLAP2P_OP_DONE;
	}
	if ((v & 3) == MLAP2P_PULL_NEVER)
		link->flags |= MLAP2P_LINK_NOPUBLISH;
	else if ((v & 3) != MLAP2P_PULL_AGAIN)
		return -EPROTO;
	op->mode = MLAP2P_MODE_REFUSED;
	op->state = SIMPLE_STEPS;
	return MLAP2P_OP_MOVED;
}

int mlap2p_simple_start(struct mlap2p_op *op)
{
	struct ncclConnInfo *conn = op->link->conn;
	int way;

	op->perStep = mlap2p_simple_step(op->link, op->bytes);
	if (!op->perStep || op->perStep >= INT32_MAX ||
	    !conn->buffs[NCCL_PROTO_SIMPLE])
		return -EINVAL;
	op->first = op->step = conn->step;
	op->left = op->bytes ? (op->bytes + op->perStep - 1) / op->perStep : 1;
	op->off = 0;
	op->line = 0;
	op->mode = MLAP2P_MODE_FIFO;
	op->peerBuf = NULL;
	op->peerAddr = 0;
	op->offeredAddr = 0;
	op->landed = 0;
	op->split = 0;
	op->copied = 0;
	op->waits = 0;
	op->steps = op->left;
	op->state = conn->ptrExchange ? SIMPLE_XCHG : SIMPLE_STEPS;
	if (op->send && op->bytes && !conn->ptrExchange && conn->ptrsFifo &&
	    (op->link->flags & MLAP2P_LINK_NETPTR) && op->link->reg &&
	    op->link->reg(op->link->arg, op->buf, op->bytes) == 1)
		op->mode = MLAP2P_MODE_NETPTR;
	/* Decided now, not when an offer arrives (lib/proto.h). */
	way = simple_way(op);
	op->noTake = way == MLAP2P_SEND_FIFO;
	if (way == MLAP2P_SEND_PULL) {
		op->mode = MLAP2P_MODE_PULL;
		op->state = SIMPLE_PUBLISH;
		simple_publish(op);	/* now, if there is credit */
	}
	return 0;
}

/* Publish this end's buffer, or say the slots will carry the data. */
static int simple_offer(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	void **px = link->conn->ptrExchange;
	struct mlap2p_xchg *x = simple_xchg(link->conn);
	void *val = MLAP2P_XCHG_FIFO;
	int kind = 0;

	if (__atomic_load_n(px, __ATOMIC_ACQUIRE))
		return MLAP2P_OP_IDLE;	/* the last offer is not taken yet */
	/* Up to the tagged words, which the sender of the last message
	 * may still read (and the tags tell messages apart anyway). */
	memset(x, 0, offsetof(struct mlap2p_xchg, revoked));
	x->step = op->first;
	x->bytes = op->bytes;
	if (op->bytes && !(link->flags & MLAP2P_LINK_NODIRECT)) {
		if (link->flags & MLAP2P_LINK_SAMEPROC)
			val = op->buf;
		else if (link->describe)
			kind = link->describe(link->arg, op->buf, op->bytes, x);
	}
	if (kind == MLAP2P_DESCRIBE_HANDLE) {
		val = MLAP2P_XCHG_HANDLE;
	} else if (kind == MLAP2P_DESCRIBE_ADDR && !op->send) {
		val = MLAP2P_XCHG_ADDR;
		op->offeredAddr = 1;
	}
	if (val != MLAP2P_XCHG_FIFO)
		op->mode = op->send ? MLAP2P_MODE_READ : MLAP2P_MODE_WRITE;
	__atomic_store_n(px, val, __ATOMIC_RELEASE);
	op->state = SIMPLE_STEPS;
	return MLAP2P_OP_MOVED;
}

/*
 * Split: take the next steps from the front (sender: one, it hands each
 * over through sizesFifo) or the back (receiver: a quarter of what is left,
 * at least one, so a lone receiver reads a message in a few large
 * process_vm_readv calls as Open MPI's vader does in one, and a sender that
 * copies too still finds steps to take).  The index of the first step
 * taken from the message's first, *@count of them; -1 when every step is
 * taken.
 */
static int64_t simple_take(struct mlap2p_op *op, int back, uint64_t *count)
{
	uint64_t *claim = &simple_xchg(op->link->conn)->claim;
	uint64_t c = __atomic_load_n(claim, __ATOMIC_ACQUIRE);

	for (;;) {
		uint64_t front = c & 0xffffffffU, tail = c >> 32, k = 1;

		if (front + tail >= op->steps)
			return -1;
		if (back && op->steps - front - tail >= 8)
			k = (op->steps - front - tail) / 4;
		if (__atomic_compare_exchange_n(claim, &c,
						c + (back ? k << 32 : 1),
						false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			*count = k;
			return back ? (int64_t)(op->steps - tail - k) :
				      (int64_t)front;
		}
	}
}

/* Sender, offer taken: let the receiver take steps from the back. */
static void simple_split_publish(struct mlap2p_op *op)
{
	struct mlap2p_xchg *x = simple_xchg(op->link->conn);

	if (op->steps < 2)
		return;
	__atomic_store_n(&x->claim, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&x->src, (uintptr_t)op->buf, __ATOMIC_RELAXED);
	__atomic_store_n(&x->split, op->first + 1, __ATOMIC_RELEASE);
	op->split = 1;
}

/* Take the peer's offer for this message. */
static int simple_accept(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	void **px = link->conn->ptrExchange;
	struct mlap2p_xchg *x = simple_xchg(link->conn);
	void *val = __atomic_load_n(px, __ATOMIC_ACQUIRE);
	void *ptr = NULL;
	int ret;

	if (!val)
		return MLAP2P_OP_IDLE;
	if (x->step != op->first || x->bytes != op->bytes)
		return -EPROTO;	/* the two ends disagree on the message */
	if (val == MLAP2P_XCHG_HANDLE) {
		if (!link->resolve)
			return -EPROTO;
		ret = link->resolve(link->arg, x, &ptr);
		if (ret < 0)
			return ret;
	} else if (val == MLAP2P_XCHG_ADDR) {
		if (!op->send)
			return -EPROTO;	/* only a receiver offers an address */
		/* Read the descriptor before the slot is free for the next
		 * offer; the receiver may withdraw this one (revoke). */
		op->peerAddr = x->offset;
		if (!__atomic_compare_exchange_n(px, &val, NULL, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			return MLAP2P_OP_IDLE;
		if (link->write_peer && !(link->flags & MLAP2P_LINK_NOREMOTE) &&
		    !op->noTake) {
			op->mode = MLAP2P_MODE_REMOTE;
			simple_split_publish(op);
		} else {
			op->mode = MLAP2P_MODE_REFUSED;
		}
	} else if (val != MLAP2P_XCHG_FIFO) {
		ptr = val;
	}
	if (ptr) {
		op->peerBuf = ptr;
		op->mode = op->send ? MLAP2P_MODE_WRITE : MLAP2P_MODE_READ;
	}
	if (val != MLAP2P_XCHG_ADDR)
		__atomic_store_n(px, NULL, __ATOMIC_RELEASE);
	op->state = SIMPLE_STEPS;
	return MLAP2P_OP_MOVED;
}

/* Sender of an address offer: has the receiver withdrawn it?  Then say
 * we heard, and write no more. */
static int simple_revoked(struct mlap2p_op *op)
{
	struct mlap2p_xchg *x = simple_xchg(op->link->conn);
	uint64_t tag = op->first + 1;

	if (__atomic_load_n(&x->revoked, __ATOMIC_SEQ_CST) != tag)
		return 0;
	__atomic_store_n(&x->revokeAck, tag, __ATOMIC_RELEASE);
	return 1;
}

int mlap2p_simple_revoke(struct mlap2p_op *op)
{
	struct ncclConnInfo *conn = op->link->conn;
	void *val = MLAP2P_XCHG_ADDR;
	struct mlap2p_xchg *x;
	uint64_t tag = op->first + 1;

	/* Sender first, published and not answered: withdraw it, and
	 * touch the buffer only after (the fence; lib/proto.h). */
	if (op->proto == NCCL_PROTO_SIMPLE && op->send &&
	    op->state == SIMPLE_PULLED) {
		__atomic_store_n(&simple_xchg(conn)->unpublished, tag,
				 __ATOMIC_SEQ_CST);
		mlap2p_fence(__ATOMIC_SEQ_CST);
		return 1;
	}
	/* Took or refused an address: it writes there no more, so a
	 * receiver withdrawing its offer need not wait for us; split, the
	 * receiver must not deliver what it reads from our buffer now. */
	if (op->proto == NCCL_PROTO_SIMPLE && op->send &&
	    (op->mode == MLAP2P_MODE_REMOTE ||
	     op->mode == MLAP2P_MODE_REFUSED)) {
		x = simple_xchg(conn);
		__atomic_store_n(&x->revokeAck, tag, __ATOMIC_RELEASE);
		if (op->split) {
			__atomic_store_n(&x->unpublished, tag,
					 __ATOMIC_SEQ_CST);
			mlap2p_fence(__ATOMIC_SEQ_CST);
		}
		return 1;
	}
	if (op->proto != NCCL_PROTO_SIMPLE || op->send || !op->offeredAddr ||
	    op->mode == MLAP2P_MODE_REFUSED)
		return 1;
	/* Not taken yet: take it back, and the sender never writes. */
	if (__atomic_compare_exchange_n(conn->ptrExchange, &val, NULL, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		op->offeredAddr = 0;
		return 1;
	}
	x = simple_xchg(conn);
	if (__atomic_load_n(&x->revoked, __ATOMIC_RELAXED) != tag)
		__atomic_store_n(&x->revoked, tag, __ATOMIC_SEQ_CST);
	/* Every step already written: nothing more can come. */
	if (mlap2p_load_acquire(conn->tail) >= op->step + op->left)
		return 1;
	return __atomic_load_n(&x->revokeAck, __ATOMIC_ACQUIRE) == tag;
}

static int simple_send_steps(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	int *sizes = simple_sizes(conn);
	int moved = 0;
	uint64_t k;

	while (op->left) {
		uint64_t s = op->step;
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);

		if ((op->mode == MLAP2P_MODE_REMOTE ||
		     op->mode == MLAP2P_MODE_REFUSED) && simple_revoked(op))
			return -ECANCELED;	/* the receiver gave up */
		if (!mlap2p_has_credit(link, s))
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		if (op->split && simple_take(op, 0, &k) < 0) {
			/* nothing left: the receiver pulls the rest */
			simple_tee(op, op->buf + op->off, op->bytes - op->off);
			op->step = op->first + op->steps;
			op->left = 0;
			mlap2p_store_release(conn->tail, op->step);
			break;
		}
		if (op->mode == MLAP2P_MODE_REMOTE) {
			int ret = link->write_peer(link->arg, op->peerAddr + op->off,
						   op->buf + op->off, n);

			/*
			 * Not allowed at all (-EPERM, -ENOSYS): refuse this and
			 * every later offer.  This buffer cannot be written so
			 * (-EFAULT: e.g. another driver's PFN mapping): refuse
			 * this one.  Both only before anything was written.
			 */
			if (ret && !op->off && (ret == -EPERM || ret == -ENOSYS ||
						ret == -EFAULT)) {
				if (ret != -EFAULT)
					link->flags |= MLAP2P_LINK_NOREMOTE;
				op->mode = MLAP2P_MODE_REFUSED;
			} else if (ret) {
				return ret;
			}
		}
		if (op->mode == MLAP2P_MODE_NETPTR)
			__atomic_store_n(&conn->ptrsFifo[s % NCCL_STEPS],
					 (void *)(op->buf + op->off),
					 __ATOMIC_RELAXED);
		else if (op->mode == MLAP2P_MODE_WRITE)
			simple_deliver(op, op->peerBuf + op->off,
				       op->buf + op->off, n);
		else if (op->mode == MLAP2P_MODE_FIFO ||
			 op->mode == MLAP2P_MODE_REFUSED)
			memcpy(simple_slot(op, s), op->buf + op->off, n);
		simple_tee(op, op->mode == MLAP2P_MODE_FIFO ||
			   op->mode == MLAP2P_MODE_REFUSED ?
			   simple_slot(op, s) : op->buf + op->off, n);
		sizes[s % NCCL_STEPS] = op->mode == MLAP2P_MODE_REFUSED ?
					~(int)n : (int)n;
		op->off += n;
		op->step = s + 1;
		op->left--;
		mlap2p_store_release(conn->tail, op->step);
		moved = 1;
		if (op->mode != MLAP2P_MODE_READ &&
		    op->mode != MLAP2P_MODE_NETPTR && op->left)
			return MLAP2P_OP_MOVED;	/* one copy per call */
	}
	conn->step = op->step;
	/* Split, though every step was ours: the receiver may still look
	 * at the buffer (simple_pull_ok) until it has taken the last one. */
	if (op->mode == MLAP2P_MODE_READ || op->mode == MLAP2P_MODE_NETPTR ||
	    op->split) {
		op->state = SIMPLE_DRAIN;
		return MLAP2P_OP_MOVED;
	}
	return MLAP2P_OP_DONE;
}

/*
 * Receiver: may it read the sender's process?  One byte of the buffer the
 * first step came from, before it takes any step it must then copy.
 */
static int simple_pull_ok(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	char byte;
	int ret;

	if (!link->read_peer || (link->flags & MLAP2P_LINK_NOPULL))
		return 0;
	ret = link->read_peer(link->arg, op->peerAddr, &byte, 1);
	if (ret == -EPERM || ret == -ENOSYS)
		link->flags |= MLAP2P_LINK_NOPULL;
	return !ret;
}

/* Receiver: has the sender split this message (it accepted our address)? */
static int simple_split_seen(struct mlap2p_op *op)
{
	const struct mlap2p_xchg *x;

	if (op->split)
		return 1;
	/* (no offer, no descriptor: NET links have no ptrExchange) */
	if (!op->offeredAddr || op->steps < 2 || op->step - op->first > 1)
		return 0;
	x = simple_xchg(op->link->conn);
	if (__atomic_load_n(&x->split, __ATOMIC_ACQUIRE) != op->first + 1)
		return 0;
	op->peerAddr = __atomic_load_n(&x->src, __ATOMIC_RELAXED);
	op->split = 1 + simple_pull_ok(op);
	return 1;
}

/* Receiver: step op->step (n bytes) is in; return its slot. */
static void simple_recv_next(struct mlap2p_op *op, size_t n)
{
	op->off += n;
	op->step++;
	op->left--;
	mlap2p_store_release(op->link->conn->head, op->step);
}

/* Receiver: has the sender withdrawn the message it published (sender
 * first) or split? */
static int simple_unpublished(const struct mlap2p_op *op)
{
	const struct mlap2p_xchg *x = simple_xchg(op->link->conn);

	return __atomic_load_n(&x->unpublished, __ATOMIC_RELAXED) ==
	       op->first + 1;
}

/*
 * Receiver of a split message: the steps from the front arrive as usual
 * (sizesFifo, *tail), the ones from the back it copies itself, and it is
 * done when all are taken, the front is in and *tail says the sender has
 * stopped.
 */
static int simple_recv_split(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	const int *sizes = simple_sizes(conn);
	const uint64_t *claim = &simple_xchg(conn)->claim;
	int moved = 0;

	for (;;) {
		uint64_t c = __atomic_load_n(claim, __ATOMIC_ACQUIRE);
		uint64_t front = c & 0xffffffffU, s = op->step;
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		int copy = 0, size;
		uint64_t k;
		int64_t i;

		if (s - op->first < front && mlap2p_has_data(link, s)) {
			size = sizes[s % NCCL_STEPS];
			if (size == (int)n) {	/* written in place */
				simple_recv_next(op, n);
				moved = 1;
				continue;
			}
			/* refused: the sender could not write to us */
			if (size != ~(int)n)
				return -EPROTO;
			copy = 1;
		}
		/* Pull before copying out of a slot: that keeps both busy. */
		if (op->split > 1 && (i = simple_take(op, 1, &k)) >= 0) {
			size_t at = (size_t)i * op->perStep;
			int ret;

			ret = link->read_peer(link->arg, op->peerAddr + at,
					      op->buf + at,
					      mlap2p_min(op->bytes - at,
							 k * op->perStep));
			/* Withdrawn meanwhile: what was read may not be the
			 * message (lib/proto.h). */
			mlap2p_fence(__ATOMIC_SEQ_CST);
			if (simple_unpublished(op))
				return -ECANCELED;
			if (ret)
				return ret;
			op->left -= k;
			return MLAP2P_OP_MOVED;	/* one copy per call */
		}
		if (copy) {
			simple_deliver(op, op->buf + op->off,
					simple_slot(op, s), n);
			simple_recv_next(op, n);
			op->copied++;
			return MLAP2P_OP_MOVED;
		}
		if (op->left || !mlap2p_has_data(link, op->first + op->steps - 1)) {
			if (!moved && simple_unpublished(op))
				return -ECANCELED;	/* never comes */
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		}
		/* Every step through the slots: no single copy after all. */
		if (op->copied == op->steps)
			op->mode = MLAP2P_MODE_REFUSED;
		op->step = op->first + op->steps;
		conn->step = op->step;
		mlap2p_store_release(conn->head, op->step);
		return MLAP2P_OP_DONE;
	}
}

/*
 * Receiver of a sender-first message it read and answered "done": the
 * receive completes once the sender has taken our offer out of
 * ptrExchange, or has withdrawn the message after our read (we looked
 * after it and it was not).  Either is a store the sender made after the
 * read ended, so the pid read from was the sender's the whole time: one it
 * had left and another process took could not have answered.  That is
 * what lets pull_peer skip the system call that checks the pid before
 * each read (lib/proto.h).  A sender that does not answer within
 * MLAP2P_PULL_WAITS checks is asked by link->still_peer instead: alive
 * after the read proves the same.
 */
static int simple_taken(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	int ret;

	if (!__atomic_load_n(link->conn->ptrExchange, __ATOMIC_ACQUIRE) ||
	    simple_unpublished(op))
		return MLAP2P_OP_DONE;
	if (!link->still_peer || ++op->waits < MLAP2P_PULL_WAITS)
		return MLAP2P_OP_IDLE;
	/* Busy elsewhere: prove it the other way, at a system call. */
	ret = link->still_peer(link->arg);
	return ret ? ret : MLAP2P_OP_DONE;
}

/*
 * Receiver, the first step is a sender-first header: read the whole
 * message from the sender's buffer in one read_peer call and answer
 * (lib/proto.h).  Refused: the sender pushes it through the slots next.
 */
static int simple_recv_pull(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	const struct mlap2p_pull *h = (const void *)simple_slot(op, op->first);
	uint64_t tag = op->first + 1, code = MLAP2P_PULL_DONE;
	int ret;

	if (h->step != op->first || h->bytes != op->bytes)
		return -EPROTO;	/* the two ends disagree on the message */
	/* The sender takes our offer back itself, once we answer. */
	op->offeredAddr = 0;
	if (simple_unpublished(op))
		return -ECANCELED;
	ret = link->pull_peer ? link->pull_peer(link->arg, h->addr, op->buf,
						op->bytes) : -ENOSYS;
	/* Withdrawn meanwhile: what was read may not be the message. */
	mlap2p_fence(__ATOMIC_SEQ_CST);
	if (simple_unpublished(op))
		return -ECANCELED;
	if (ret == -EPERM || ret == -ENOSYS)
		code = MLAP2P_PULL_NEVER;
	else if (ret == -EFAULT)
		code = MLAP2P_PULL_AGAIN;
	else if (ret)
		return ret;	/* -ECONNRESET: the sender died */
	__atomic_store_n(&simple_xchg(conn)->pulled, tag << 2 | code,
			 __ATOMIC_RELAXED);
	op->step = tag;
	mlap2p_store_release(conn->head, tag);
	if (code == MLAP2P_PULL_DONE) {
		op->mode = MLAP2P_MODE_PULL;
		op->left = 0;
		op->off = op->bytes;
		conn->step = tag;
		op->state = SIMPLE_TAKEN;
		return simple_taken(op) == MLAP2P_OP_DONE ? MLAP2P_OP_DONE :
		       MLAP2P_OP_MOVED;
	}
	op->mode = MLAP2P_MODE_REFUSED;	/* op->left steps through the slots */
	return MLAP2P_OP_MOVED;
}

static int simple_recv_steps(struct mlap2p_op *op)
{
	struct mlap2p_link *link = op->link;
	struct ncclConnInfo *conn = link->conn;
	const int *sizes = simple_sizes(conn);
	int moved = 0;

	if (simple_split_seen(op))
		return simple_recv_split(op);
	while (op->left) {
		uint64_t s = op->step;
		size_t n = mlap2p_min(op->bytes - op->off, op->perStep);
		int size;

		if (!mlap2p_has_data(link, s)) {
			/* Sender first, answered "push it": the sender may
			 * have withdrawn it before it saw the answer. */
			if (op->mode == MLAP2P_MODE_REFUSED &&
			    s == op->first + 1 && simple_unpublished(op))
				return -ECANCELED;
			return moved ? MLAP2P_OP_MOVED : MLAP2P_OP_IDLE;
		}
		size = sizes[s % NCCL_STEPS];
		/* sender first: it published its buffer's address */
		if (size == MLAP2P_SIZE_PULL && s == op->first &&
		    conn->ptrExchange && op->mode != MLAP2P_MODE_READ)
			return simple_recv_pull(op);
		/* the sender refused our address: the slots carry it all */
		if (op->offeredAddr && !op->off && size == ~(int)n)
			op->mode = MLAP2P_MODE_REFUSED;
		if (size != (op->mode == MLAP2P_MODE_REFUSED ? ~(int)n : (int)n))
			return -EPROTO;
		if (op->mode == MLAP2P_MODE_READ)
			simple_deliver(op, op->buf + op->off,
					op->peerBuf + op->off, n);
		else if ((op->mode == MLAP2P_MODE_FIFO ||
			  op->mode == MLAP2P_MODE_REFUSED) &&
			 !simple_landed(op, s))
			simple_deliver(op, op->buf + op->off,
					simple_slot(op, s), n);
		simple_recv_next(op, n);
		moved = 1;
		if (op->off == n && simple_split_seen(op))
			return simple_recv_split(op);
		if (op->mode != MLAP2P_MODE_WRITE && op->left)
			return MLAP2P_OP_MOVED;
	}
	conn->step = op->step;
	return MLAP2P_OP_DONE;
}

int mlap2p_simple_progress(struct mlap2p_op *op)
{
	int ret;

	switch (op->state) {
	case SIMPLE_XCHG:
		ret = simple_provider(op) ? simple_offer(op) : simple_accept(op);
		if (ret != MLAP2P_OP_MOVED)
			return ret;
		ret = op->send ? simple_send_steps(op) : simple_recv_steps(op);
		return ret == MLAP2P_OP_IDLE ? MLAP2P_OP_MOVED : ret;
	case SIMPLE_STEPS:
		return op->send ? simple_send_steps(op) : simple_recv_steps(op);
	case SIMPLE_PUBLISH:
		return simple_publish(op);
	case SIMPLE_PULLED:
		return simple_pulled(op);
	case SIMPLE_TAKEN:
		return simple_taken(op);
	case SIMPLE_DRAIN:
		/* Read mode and split: the receiver copies from our buffer
		 * until *head catches up with the last step; NETPTR: the proxy
		 * sends from it until then. */
		if (mlap2p_load_acquire(op->link->conn->head) < op->step)
			return op->split && simple_revoked(op) ? -ECANCELED :
			       MLAP2P_OP_IDLE;
		op->link->head = op->step;
		return MLAP2P_OP_DONE;
	}
	return -EINVAL;
}
