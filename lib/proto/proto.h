/* SPDX-License-Identifier: MIT */
/*
 * lib/proto.h: the data plane's protocol engines over one wired ncclConnInfo.
 *
 * On the hardware the collective kernels post and poll the FIFO; here the
 * host does it, through the pointers the connect path wired into an
 * ncclConnInfo.  The engines know nothing of communicators: they move one
 * message over one link (a connector plus its buffer sizes) and never block.
 * mlap2p_op_progress() does what can be done now and says whether it moved
 * anything; callers (lib/dataplane.c, the unit tests) loop over their pending
 * operations and, when a whole pass moved nothing, call mlap2p_spin_idle()
 * and, when it says so, check abort and peer liveness.  A group of sends and
 * receives therefore progresses together and a ring cannot deadlock.
 *
 * Contracts:
 *
 *  - Each connector keeps a 64-bit step counter in conn.step that only grows.
 *    Slot = step % NCCL_STEPS.  The receiver returns credit by storing the
 *    next step into *head (release); the sender may use step s only once
 *    *head + NCCL_STEPS >= s + 1 (acquire).
 *  - SIMPLE: the sender copies one step's payload into the slot (or straight
 *    into the peer's buffer, see below), writes sizesFifo[slot], then stores
 *    *tail = step + 1 with release; the receiver acquires *tail, copies out,
 *    releases *head.  Empty messages still move one step.
 *  - LL: 16-byte lines {data32, flag32, data32, flag32}, flag = step + 1,
 *    each half written as one aligned 8-byte store; the receiver takes a line
 *    only when both flags match.  No tail.  A step with (step &
 *    NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK also rewrites the unused lines
 *    of its slot with its flag, so no line keeps a flag old enough to match
 *    again after the 32-bit wrap; the step whose flag would be 0 carries no
 *    data (the sender zeroes its slot, the receiver skips it), so a zeroed
 *    buffer never looks full whatever step a connection starts at.
 *  - LL128 (CPU form): 128-byte lines of 15 payload words and a 64-bit flag
 *    word (= step + 1) stored last with release; the reader acquires the
 *    flag, then reads the payload.  The flag never wraps.
 *
 * Single copy (SIMPLE only).  Every SIMPLE message starts with an offer in
 * the sender's ncclSendMem: the provider (the receiver in write mode, the
 * sender in read mode) waits for *ptrExchange == NULL, fills the descriptor
 * at MLAP2P_XCHG_OFFSET, then publishes *ptrExchange with release; the
 * acceptor waits for non-NULL, reads the descriptor and clears the slot.
 * *ptrExchange is the raw buffer pointer within one process (the legacy
 * P2P/direct pointer contract), MLAP2P_XCHG_HANDLE when the descriptor holds a
 * region's IPC handle and offset (across processes; the acceptor resolves it
 * through the runtime and caches the mapping), MLAP2P_XCHG_ADDR when it holds
 * the receive buffer's address in the receiver's process (write mode only:
 * the sender writes there through link->write_peer, process_vm_writev(2)),
 * or MLAP2P_XCHG_FIFO when the buffer cannot be reached and the slots carry
 * the data.  A sender that may not write into the receiver's process
 * (-EPERM or -ENOSYS on the first step, e.g. Yama's ptrace_scope) refuses
 * an address offer: it copies through the slots and writes ~n instead of n
 * to sizesFifo, which tells the receiver to copy out, and it refuses at once
 * from then on (MLAP2P_LINK_NOREMOTE); -EFAULT on the first step (a
 * buffer the kernel cannot write so) refuses that message only.  A
 * receiver that gives up a message whose address it offered (abort,
 * destroy, an error) must not return while the sender may still write into
 * its buffer: mlap2p_simple_revoke() takes the offer back if it was not
 * taken yet (both sides take it with a compare-and-swap), else sets
 * x->revoked; the sender checks that before every write and while it
 * waits for credit, and answers x->revokeAck.  The descriptor names the
 * message's first step, so an offer can never be applied to the
 * wrong message.  The step handshake runs unchanged in every mode; in read
 * mode the sender returns only once *head shows the receiver has read all.
 *
 * Split (MODE_REMOTE, messages of two steps or more).  One core copying
 * while the other waits gets half of what the two can: so once it took
 * the offer the sender publishes its own buffer's address (x->src, then
 * x->split = first + 1 with release, before its first step's tail), and the
 * two ends take steps from either end of the message with a
 * compare-and-swap on x->claim: the sender steps 0, 1, ... (each written
 * by write_peer and signalled as usual), the receiver steps from n-1
 * down, a quarter of those left at a time (one once fewer than 8 are
 * left), each run in one link->read_peer call.  When nothing is left
 * to take, the sender releases *tail = first + n (the steps in between
 * were the receiver's) and drains: it returns once *head = first + n says
 * the receiver has finished reading (also when it took every step
 * itself: the receiver may be reading its probe byte).  A receiver that
 * cannot read the sender's process (a one-byte probe fails before it
 * takes any step) takes none, and the sender writes them all
 * (MLAP2P_LINK_NOPULL once it is refused for good).  A sender that gives
 * up a split message (abort, destroy) stores x->unpublished = first + 1
 * and a full fence, as a sender-first one does (below), and the receiver
 * looks after each of its reads and while it waits: -ECANCELED, so it
 * never delivers bytes the caller may have changed after the send
 * failed.  Whether a send takes an offered address at all is decided
 * when it starts (link->publish), so the choice does not depend on when
 * the offer arrives.
 *
 * Sender first (MODE_PULL; write mode across processes).  A send whose
 * plain buffer link->publish() accepts does not wait for the receiver's
 * offer: when it starts (at the post, if the link is idle and it has
 * credit) it writes a struct mlap2p_pull {first, its buffer's address,
 * bytes} into its first step's slot, sizesFifo[slot] = MLAP2P_SIZE_PULL,
 * and releases *tail = first + 1; so in an exchange both messages are
 * published before either end copies anything, as Open MPI's vader does.
 * The receiver still publishes its offer first, as for every message (so
 * a sender that does not publish finds it), and then, seeing the marker on
 * the first step, reads the whole message into op->buf with one
 * link->read_peer call, stores x->pulled = (first + 1) << 2 | MLAP2P_PULL_*
 * and releases *head = first + 1.  The sender, once *head says so, takes
 * the receiver's offer out of ptrExchange (it must be there, for this
 * message: the receiver offered before it looked at the step) and reads
 * x->pulled: MLAP2P_PULL_DONE, the message took one step and the send
 * completes (the buffer may be reused only now, as for every send).  The
 * receive completes only once the sender has taken the offer (or has
 * withdrawn the message after the read, see below): a store the sender
 * made after the read ended, so the pid read from was the sender's
 * throughout, and link->pull_peer need not check it before the read (a
 * system call per message, 1.2 us on this machine's VM).  A sender that
 * does not answer within MLAP2P_PULL_WAITS idle checks (it is busy
 * elsewhere: an isend left to progress later) is asked after instead, by
 * link->still_peer (a poll of its pidfd), so that the receive never waits
 * for the sender's next call into the library.
 * MLAP2P_PULL_AGAIN (-EFAULT) or MLAP2P_PULL_NEVER (-EPERM, -ENOSYS: Yama,
 * no CONFIG_CROSS_MEMORY_ATTACH; the sender then sets
 * MLAP2P_LINK_NOPUBLISH and publishes no more): the sender pushes the
 * whole message through the slots in steps first + 1, ... marked ~n as
 * MODE_REFUSED, and the message took 1 + its steps.  The sender decides
 * and the receiver follows the marker, so the ends agree by construction;
 * a receiver that gives up before the marker arrives only withdraws its
 * offer as usual, the sender never writes into its process.  A send that
 * gives up a published message (abort, destroy, a dead link) before the
 * answer withdraws it: mlap2p_simple_revoke() stores x->unpublished =
 * first + 1 and a full fence, and returns at once (a read of another
 * process cannot harm this one).  The receiver looks at x->unpublished
 * before its read and again after it (a fence between): if it is set, the
 * bytes may be the buffer's next contents, or the read -EFAULT, and the
 * receive fails with -ECANCELED instead of delivering them; and, once it
 * answered MLAP2P_PULL_AGAIN or _NEVER, while it waits for the first
 * pushed step, which a sender that withdrew before it saw the answer
 * never writes.  If it is not set after the read, no byte read can have
 * seen a write made after the withdrawal, so none the caller made to the
 * buffer after the send failed.
 *
 * A consequence worth knowing: a SIMPLE send waits for its receive to be
 * posted (a rendezvous), as NCCL's does; post both inside a group.
 *
 * Send in place over NET (MLAP2P_LINK_NETPTR; ptrExchange is NULL there).
 * A proxy sends each SIMPLE step of such a link: normally from its slot, but
 * from conn->ptrsFifo[slot] when that entry is not NULL.  A SIMPLE send whose
 * whole buffer link->reg() accepts (a region the transport registered with
 * the fabric) copies nothing: for each step it stores the step's address in
 * ptrsFifo[slot], writes sizesFifo[slot] and releases *tail as usual (tail's
 * release orders the pointer too).  The proxy takes the pointer after its
 * acquire of *tail and stores NULL back once it handed the step to the
 * fabric, before it returns the slot through *head; so a NULL entry always
 * means "the data is in the slot", and copies through the slot never write
 * ptrsFifo.  *head on such a link advances only once the fabric has
 * completed the send of a step (the buffer may be reused), so the sender
 * returns, as in read mode, only once *head has caught up with its last
 * step (MLAP2P_MODE_NETPTR, SIMPLE_DRAIN).  reg() saying no (registration
 * refused, MLAP2P_NET_REG=0) means the slots carry that message.
 *
 * Receive in place over NET (MLAP2P_LINK_NETRECV).  The receive side's
 * proxy posts each step's receive ahead, normally into the step's slot.
 * When a SIMPLE receive starts, the caller may announce its buffer to the
 * proxy (lib/net.h, mlap2p_net_land) with op->landed set: the steps of the
 * message the proxy has not posted yet (all but the first NCCL_STEPS or
 * so of a long one) are then received straight into op->buf at their
 * offset, and the proxy stores that address in ptrsFifo[slot] when it
 * delivers the step (NULL: in the slot) before it releases *tail.  The
 * receiver copies a step out of its slot unless ptrsFifo[slot] is where
 * the step belongs in op->buf.  The caller withdraws the announcement
 * when the op ends (mlap2p_net_unland), which for an unfinished op also
 * cancels and waits for the receives still posted into the buffer.
 */
#ifndef MLAP2P_PROTO_H
#define MLAP2P_PROTO_H

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <mlap2p/transport.h>

#include "clock.h"
#include "proto/copy.h"

/* Where the single-copy descriptor lives: ncclSendMem's header page. */
#define MLAP2P_XCHG_OFFSET	0x100

/* *ptrExchange values other than a raw pointer. */
#define MLAP2P_XCHG_FIFO	((void *)(uintptr_t)1)
#define MLAP2P_XCHG_HANDLE	((void *)(uintptr_t)2)
#define MLAP2P_XCHG_ADDR	((void *)(uintptr_t)3)

/* What link->describe() found. */
#define MLAP2P_DESCRIBE_HANDLE	1	/* x->ipc and x->offset: a region */
#define MLAP2P_DESCRIBE_ADDR	2	/* x->offset: the address, write mode */

struct mlap2p_xchg {
	uint64_t step;		/* first step of the message offered */
	uint64_t bytes;		/* bytes reachable from offset */
	uint64_t offset;	/* into the region named by ipc, or the address */
	uint64_t start;		/* unused (MLAP2P_CMA=auto's timing was) */
	uint8_t ipc[64];	/* the region's IPC handle */
	uint64_t revoked;	/* receiver: step + 1, the address is withdrawn */
	uint64_t revokeAck;	/* sender: step + 1, it writes there no more */
	uint64_t src;		/* sender: its buffer's address, to pull from */
	uint64_t split;		/* sender: step + 1 once src is valid */
	uint64_t claim;		/* steps taken: front (sender) | back << 32 */
	uint64_t pulled;	/* receiver of a sender-first message:
				 * (step + 1) << 2 | MLAP2P_PULL_* */
	uint64_t unpublished;	/* sender: step + 1, the message it published
				 * is withdrawn: do not deliver it */
};

/*
 * Sender first: sizesFifo[slot] of the message's first step, whose slot
 * then holds a struct mlap2p_pull (not payload).  No payload size can be
 * this (a step carries less than INT32_MAX bytes, so ~n > INT32_MIN).
 */
#define MLAP2P_SIZE_PULL	INT32_MIN

/* Idle checks a pulled receive waits for the sender's answer before it
 * asks link->still_peer instead (about 5 us of passes). */
#define MLAP2P_PULL_WAITS	64

struct mlap2p_pull {
	uint64_t step;		/* the message's first step */
	uint64_t addr;		/* the send buffer, in the sender's process */
	uint64_t bytes;		/* the message's size */
};

/* How the receiver of a sender-first message answers (x->pulled & 3). */
#define MLAP2P_PULL_DONE	0	/* read it all: the send is complete */
#define MLAP2P_PULL_AGAIN	1	/* could not (-EFAULT): push this one
					 * through the slots */
#define MLAP2P_PULL_NEVER	2	/* not allowed (-EPERM, -ENOSYS): push
					 * it, and never publish again */

_Static_assert(MLAP2P_XCHG_OFFSET >= offsetof(struct ncclSendMem, ptrExchange) +
	       CACHE_LINE_SIZE, "descriptor must not share ptrExchange's line");
_Static_assert(MLAP2P_XCHG_OFFSET + sizeof(struct mlap2p_xchg) <= MEM_ALIGN,
	       "descriptor must fit the header page");

/* LL and LL128 line geometry. */
#define MLAP2P_LL_LINE		16
#define MLAP2P_LL_PAYLOAD	8
#define MLAP2P_LL128_LINE	128
#define MLAP2P_LL128_PAYLOAD	120
#define MLAP2P_LL128_FLAG_WORD	15

/* struct mlap2p_link flags. */
#define MLAP2P_LINK_READ	0x1	/* SIMPLE read mode: the receiver pulls */
#define MLAP2P_LINK_SAMEPROC	0x2	/* raw pointers are valid on both ends */
#define MLAP2P_LINK_NODIRECT	0x4	/* never offer this end's buffer */
#define MLAP2P_LINK_NOREMOTE	0x8	/* write_peer was refused: stop trying */
#define MLAP2P_LINK_NETPTR	0x10	/* a proxy sends SIMPLE steps from
					 * ptrsFifo[slot] when set (NET) */
#define MLAP2P_LINK_NETRECV	0x20	/* a proxy may have received a SIMPLE
					 * step in place: ptrsFifo[slot] says */
#define MLAP2P_LINK_NOPULL	0x40	/* read_peer was refused: stop trying */
#define MLAP2P_LINK_NOPUBLISH	0x80	/* the peer may not read our process:
					 * no sender-first message */

/*
 * One end of a connection as the engines see it.  The callbacks belong to
 * the caller; the engines call them only from mlap2p_op_progress().
 */
struct mlap2p_link {
	struct ncclConnInfo *conn;	/* wired by the connect path */
	size_t buffSizes[NCCL_NUM_PROTOCOLS];
	size_t chunkSize;		/* SIMPLE bytes per step; 0 = stepSize */
	size_t stepMin;			/* SIMPLE: a message of fewer than
					 * MLAP2P_SIMPLE_STEPS_MIN such steps
					 * takes steps halved down to this
					 * (mlap2p_simple_step()); 0 = never */
	size_t ntMin;			/* SIMPLE messages of at least this many
					 * bytes go into the receive buffer with
					 * mlap2p_copy_nt(); 0 = never */
	unsigned int flags;		/* MLAP2P_LINK_* */
	int peer;			/* peer rank, for messages */
	int channel;
	const volatile uint32_t *abortFlag;	/* non-zero: give up */
	/* 0 while the peer lives, else -errno (the caller logs who died). */
	int (*alive)(void *arg);
	/* Single copy: can this end offer [buf, buf+bytes)?  Fill x and
	 * return MLAP2P_DESCRIBE_*, or return 0. */
	int (*describe)(void *arg, const void *buf, size_t bytes,
			struct mlap2p_xchg *x);
	/* Map the peer's offer to a local pointer (cached); 0 or -errno. */
	int (*resolve)(void *arg, const struct mlap2p_xchg *x, void **ptr);
	/* Copy bytes from src to addr in the peer's process; 0 or -errno,
	 * -EPERM or -ENOSYS when that is not allowed at all. */
	int (*write_peer)(void *arg, uint64_t addr, const void *src,
			  size_t bytes);
	/* Receiver of an address offer: copy bytes from addr in the peer's
	 * process to dst (process_vm_readv); 0 or -errno as write_peer. */
	int (*read_peer)(void *arg, uint64_t addr, void *dst, size_t bytes);
	/* Sender first: read_peer for a whole published message, which
	 * need not check that the peer's pid is still the peer's before
	 * the read (the engine waits for the sender's answer after it);
	 * 0 or -errno as read_peer.  NULL: as -ENOSYS, the sender pushes
	 * the message through the slots. */
	int (*pull_peer)(void *arg, uint64_t addr, void *dst, size_t bytes);
	/* After a pull_peer read: 0 if the peer's process has not exited
	 * since (so the pid read from was the peer's throughout), else
	 * -errno.  Asked when the sender is slow to answer.  NULL: the
	 * receive waits for the answer. */
	int (*still_peer)(void *arg);
	/* MLAP2P_LINK_NETPTR: may the proxy send [buf, buf+bytes) in place
	 * (it lies in one region the fabric registered)?  1 yes, 0 no: the
	 * slots carry it.  Called once per SIMPLE send, when it starts. */
	int (*reg)(void *arg, const void *buf, size_t bytes);
	/* Which way does this send of [buf, buf+bytes) go: MLAP2P_SEND_PULL,
	 * sender first (a plain buffer the peer process can reach with
	 * read_peer); MLAP2P_SEND_OFFER, the receiver's offer's way (an
	 * address offer written with write_peer, split); MLAP2P_SEND_FIFO,
	 * the slots even if an address is offered.  Called once per SIMPLE
	 * send across processes in write mode, when it starts.  A
	 * MLAP2P_POST_FIFO send never asks: the slots. */
	int (*publish)(void *arg, const void *buf, size_t bytes);
	void *arg;

	/* engine state that outlives one message */
	uint64_t head;			/* cached *conn->head (sender) */
	uint64_t tail;			/* cached *conn->tail (receiver) */
};

/* link->publish(). */
#define MLAP2P_SEND_OFFER	0
#define MLAP2P_SEND_PULL	1
#define MLAP2P_SEND_FIFO	2

/* Results of mlap2p_op_progress() besides -errno. */
#define MLAP2P_OP_IDLE	0	/* nothing could move */
#define MLAP2P_OP_MOVED	1	/* something moved; call again */
#define MLAP2P_OP_DONE	2	/* the message is complete */

/* How the data of a SIMPLE message travels (op->mode). */
#define MLAP2P_MODE_FIFO	0
#define MLAP2P_MODE_WRITE	1	/* sender writes into the peer's buffer */
#define MLAP2P_MODE_READ	2	/* receiver reads the peer's buffer */
#define MLAP2P_MODE_REMOTE	3	/* sender writes through write_peer */
#define MLAP2P_MODE_REFUSED	4	/* an address offer was refused: the
					 * slots carry the data, sizes ~n */
#define MLAP2P_MODE_NETPTR	5	/* the proxy sends from the sender's
					 * buffer (ptrsFifo); no copy */
#define MLAP2P_MODE_PULL	6	/* sender first: the receiver read the
					 * whole message with read_peer */

struct mlap2p_op {
	/* set by the caller */
	struct mlap2p_link *link;
	int proto;			/* NCCL_PROTO_* */
	int send;			/* 1 = send, 0 = receive */
	int noPublish;			/* send: never sender first */
	int noTake;			/* send: refuse an address offer */
	char *tee;			/* send: also leave the payload here */
	int teeNt;			/* tee: with streaming stores */
	char *buf;
	size_t bytes;
	struct mlap2p_op *next;		/* free for the caller's queues */
	void *owner;			/* free for the caller */

	/* engine state, set by mlap2p_op_start() */
	int state;
	int mode;			/* MLAP2P_MODE_*, SIMPLE only */
	uint64_t step;			/* next step to move (absolute) */
	uint64_t left;			/* payload steps still to move */
	uint64_t first;			/* first step of the message */
	size_t perStep;			/* payload bytes per step */
	size_t off;			/* payload bytes moved so far */
	size_t line;			/* lines done in the current step */
	int landed;			/* caller: a NET proxy may receive
					 * into buf (MLAP2P_LINK_NETRECV) */
	char *peerBuf;			/* the peer's buffer, single copy */
	uint64_t peerAddr;		/* or its address, MODE_REMOTE */
	int offeredAddr;		/* this receiver offered an address */
	int split;			/* MODE_REMOTE: the receiver may pull */
	uint64_t steps;			/* payload steps of the message */
	uint64_t copied;		/* split receiver: steps the slots
					 * carried (refused by the peer) */
	unsigned int waits;		/* pulled receiver: idle checks for
					 * the sender's answer */
};

/* Per-protocol engines (lib/proto_ll.c, proto_ll128.c, proto_simple.c). */
int mlap2p_ll_start(struct mlap2p_op *op);
int mlap2p_ll_progress(struct mlap2p_op *op);
int mlap2p_ll128_start(struct mlap2p_op *op);
int mlap2p_ll128_progress(struct mlap2p_op *op);
int mlap2p_simple_start(struct mlap2p_op *op);
int mlap2p_simple_progress(struct mlap2p_op *op);
/*
 * A receive that will not complete withdraws its address offer.  1 when
 * the sender can no longer write into op->buf, 0 while it may: call again
 * (the caller bounds the wait by the peer's liveness and a deadline).  A
 * send that will not complete withdraws the message it published (sender
 * first), and gets 1 at once: the receiver will not deliver it.
 */
int mlap2p_simple_revoke(struct mlap2p_op *op);

/*
 * What a waiting receive needs next, for a waiter that polls one word
 * instead of calling mlap2p_op_progress() in a loop: the op can move once
 * (*w >> shift) == want.  A hint only; progress still checks everything.
 */
struct mlap2p_watch {
	const uint64_t *w;
	uint64_t want;
	unsigned int shift;
};

int mlap2p_ll_watch(const struct mlap2p_op *op, struct mlap2p_watch *x);
int mlap2p_ll128_watch(const struct mlap2p_op *op, struct mlap2p_watch *x);

/*
 * The latency path for LL messages of at most MLAP2P_LL_SMALL bytes on an
 * idle P2P link (no proxy: sizesFifo is not written), without an op: 1
 * moved (conn.step then points past it), 0 not now (no credit, not arrived
 * within @polls polls, or the flag wrap step, which only the op engine
 * handles).  The caller then takes the op path, which does the same thing
 * the long way.  proto/ll.h: mlap2p_ll_send_small(), mlap2p_ll_recv_small().
 */
#define MLAP2P_LL_SMALL		64
/* The same for LL128 messages of at most MLAP2P_LL128_SMALL bytes (one
 * group of lines: longer ones stream better through the op engine) that
 * fit one step.  proto/ll128.h: mlap2p_ll128_send_small(), _recv_small(). */
#define MLAP2P_LL128_SMALL	480

/* 1 and *x filled when op is a receive that can be watched so, else 0. */
static inline int mlap2p_op_watch(const struct mlap2p_op *op,
				  struct mlap2p_watch *x)
{
	if (op->send || !op->left)
		return 0;
	switch (op->proto) {
	case NCCL_PROTO_LL:
		return mlap2p_ll_watch(op, x);
	case NCCL_PROTO_LL128:
		return mlap2p_ll128_watch(op, x);
	}
	return 0;
}

static inline int mlap2p_watch_ready(const struct mlap2p_watch *x)
{
	return __atomic_load_n(x->w, __ATOMIC_RELAXED) >> x->shift == x->want;
}


/*
 * Start an operation once it is at the head of its link's queue (its first
 * step is conn.step then).  0 or -errno.
 */
static inline int mlap2p_op_start(struct mlap2p_op *op)
{
	switch (op->proto) {
	case NCCL_PROTO_LL:
		return mlap2p_ll_start(op);
	case NCCL_PROTO_LL128:
		return mlap2p_ll128_start(op);
	case NCCL_PROTO_SIMPLE:
		return mlap2p_simple_start(op);
	}
	return -EINVAL;
}

/* MLAP2P_OP_IDLE, _MOVED, _DONE (conn.step then points past it), -errno. */
static inline int mlap2p_op_progress(struct mlap2p_op *op)
{
	switch (op->proto) {
	case NCCL_PROTO_LL:
		return mlap2p_ll_progress(op);
	case NCCL_PROTO_LL128:
		return mlap2p_ll128_progress(op);
	default:
		return mlap2p_simple_progress(op);
	}
}

/* Shared helpers for the engines. */
static inline uint64_t mlap2p_load_acquire(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void mlap2p_store_release(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/*
 * Sender credit: may step s be written?  Reloads *head only when the cached
 * value says no, so the sender touches the shared line once per NCCL_STEPS
 * messages in a steady stream.
 */
static inline int mlap2p_has_credit(struct mlap2p_link *link, uint64_t s)
{
	if (link->head + NCCL_STEPS >= s + 1)
		return 1;
	link->head = mlap2p_load_acquire(link->conn->head);
	return link->head + NCCL_STEPS >= s + 1;
}

/*
 * The latency path's sender, step @s written: move on, and if the next
 * step would have to reload *head (a line the receiver writes), load it
 * now, while the caller goes on to wait anyway, not on the next
 * message's path.
 */
static inline void mlap2p_small_sent(struct mlap2p_link *link, uint64_t s)
{
	link->conn->step = s + 1;
	if (link->head + NCCL_STEPS < s + 2)
		link->head = mlap2p_load_acquire(link->conn->head);
}

/* Receiver: has step s arrived (SIMPLE)? */
static inline int mlap2p_has_data(struct mlap2p_link *link, uint64_t s)
{
	if (link->tail >= s + 1)
		return 1;
	link->tail = mlap2p_load_acquire(link->conn->tail);
	return link->tail >= s + 1;
}

static inline size_t mlap2p_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

/*
 * Copy @len bytes at @at of a payload whose first @head bytes are at @src
 * and the rest at @rest (the NET proxy's landing area, the SIMPLE slot and
 * then aux; everyone else passes @head = the whole payload).
 */
static inline void mlap2p_payload_read(const char *src, size_t head,
				       const char *rest, size_t at, void *dst,
				       size_t len)
{
	size_t n0 = at < head ? mlap2p_min(head - at, len) : 0;

	if (n0)
		memcpy(dst, src + at, n0);
	if (len > n0)
		memcpy((char *)dst + n0, rest + (at + n0 - head), len - n0);
}

/* How many whole lines of @line bytes a slot of @proto's buffer holds. */
static inline size_t mlap2p_proto_slot_lines(const struct mlap2p_link *link,
					     int proto, size_t line)
{
	return link->buffSizes[proto] / NCCL_STEPS / line;
}

/* Where step @step's slot of @proto's buffer, of lines of @line bytes, is. */
static inline void *mlap2p_proto_slot(const struct mlap2p_link *link,
				      int proto, size_t line, uint64_t step)
{
	return link->conn->buffs[proto] + (step % NCCL_STEPS) *
	       mlap2p_proto_slot_lines(link, proto, line) * line;
}

/* Payload bytes one step of @proto carries on @link (0: unusable). */
static inline size_t mlap2p_proto_step_bytes(const struct mlap2p_link *link,
					     int proto)
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

/*
 * SIMPLE payload bytes per step for a message of @bytes on @link: the
 * step halved while the message has fewer than MLAP2P_SIMPLE_STEPS_MIN
 * steps, down to link->stepMin, so that the two cores' copies overlap
 * for more of it (docs/performance.md, issue 19).  A function of the size
 * alone, which both ends know and the receiver checks.
 */
#define MLAP2P_SIMPLE_STEPS_MIN	8

static inline size_t mlap2p_simple_step(const struct mlap2p_link *link,
					size_t bytes)
{
	size_t step = mlap2p_proto_step_bytes(link, NCCL_PROTO_SIMPLE);

	while (link->stepMin && step / 2 >= link->stepMin &&
	       step > bytes / MLAP2P_SIMPLE_STEPS_MIN)
		step /= 2;
	return step;
}

/*
 * The checks a waiter makes when mlap2p_spin_idle() says so: the abort flag,
 * then the peer's liveness.  0, -ECANCELED or the callback's -errno.
 */
static inline int mlap2p_link_check(const struct mlap2p_link *link)
{
	if (link->abortFlag &&
	    __atomic_load_n(link->abortFlag, __ATOMIC_RELAXED))
		return -ECANCELED;
	return link->alive ? link->alive(link->arg) : 0;
}

/*
 * Idle waiting.  Callers loop "progress everything; if nothing moved,
 * mlap2p_spin_idle()".  It spins tight at first (latency), then with pause,
 * then yields the CPU on every call so that more ranks than cores still
 * progress.  It returns 1 when the caller should check abort and liveness
 * (every 256 idle calls, and on every yielding call).
 */
static inline void mlap2p_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

struct mlap2p_spin {
	uint32_t idle;
	uint32_t tight;		/* idle calls before pausing */
	uint32_t yield;		/* idle calls before yielding */
};

#define MLAP2P_SPIN_TIGHT	1024
#define MLAP2P_SPIN_YIELD	4096

static inline void mlap2p_spin_init(struct mlap2p_spin *s, uint32_t tight,
				    uint32_t yield)
{
	s->idle = 0;
	s->tight = tight;
	s->yield = yield;
}

static inline void mlap2p_spin_moved(struct mlap2p_spin *s)
{
	s->idle = 0;
}

static inline int mlap2p_spin_idle(struct mlap2p_spin *s)
{
	uint32_t n = ++s->idle;

	if (n >= s->yield) {
		s->idle = s->yield;	/* saturate */
		sched_yield();
		return 1;
	}
	if (n >= s->tight)
		mlap2p_cpu_relax();
	return (n & 255) == 0;
}

/* The wire formats: one writer and one reader each, shared by the op
 * engine, the latency path and the NET proxy. */
#include "proto/ll.h"
#include "proto/ll128.h"

#endif /* MLAP2P_PROTO_H */
