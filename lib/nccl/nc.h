/* SPDX-License-Identifier: MIT */
/*
 * lib/nccl/nc.h: the NCCL layer's private interface (the files of lib/nccl).
 *
 * The layer sits on libmlap2p's public API (<mlap2p/mlap2p.h>,
 * <mlap2p/dataplane.h>, <mlap2p/coll.h>).  An ncclComm_t points at a
 * struct nc_comm (never at the library's struct ncclComm); it wraps one
 * struct mlap2p_comm with what NCCL adds: the order of posted work, the
 * async error and last error text, PreMulSum operators and the core.
 *
 * Order.  Every unit of work on a communicator (a call, or one group's
 * calls on it) takes a ticket when it is posted; it runs when the
 * communicator's "serving" counter reaches its ticket and advances it when
 * done.  So work runs in posting order, one thread at a time, whatever the
 * streams, and a stream's queue (tickets taken under the stream's lock) can
 * never wait for work queued behind it.  Ticket 0 is the init.
 *
 * NCCL's callers drive a communicator from one thread, so a ticket is
 * biased towards it: the first thread to take one owns the counter and
 * then takes tickets with a plain increment between a light fence's
 * Dekker pair (taking against shared).  Another thread's first ticket
 * ends the bias for good: it moves shared from NC_BIASED to NC_ENDING,
 * runs the heavy fence, waits until the owner is not taking one, and
 * sets NC_SHARED; from then on every ticket is a locked add, which no
 * thread takes before NC_SHARED (during NC_ENDING the owner may still be
 * in its plain increment).  Without the asymmetric fences the counter
 * starts NC_SHARED.
 */
#ifndef MLAP2P_NCCL_NC_H
#define MLAP2P_NCCL_NC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mlap2p/mlap2p.h"
#include "nccl/nccl.h"

#define NC_EXPORT		__attribute__((visibility("default")))
#define NC_MAGIC		0x6e63636cU	/* "nccl" */
#define NC_MAX_PREMUL		32
#define NC_ERR_LEN		512

enum { NC_BIASED, NC_ENDING, NC_SHARED };	/* struct nc_comm's shared */

enum nc_kind {
	NC_ALLREDUCE, NC_BROADCAST, NC_REDUCE, NC_ALLGATHER,
	NC_REDUCESCATTER, NC_ALLTOALL, NC_SEND, NC_RECV,
};

struct nc_op {
	int kind;		/* enum nc_kind */
	int dtype;
	int op;
	int root;		/* root, or peer for send/recv */
	const void *sbuf;
	void *rbuf;
	size_t count;
};

struct nc_premul {
	int used;
	int dtype;
	int residence;		/* ncclScalarDevice: read *ptr at run time */
	const void *ptr;
	unsigned char imm[8];	/* ncclScalarHostImmediate: the value */
};

/*
 * Communicators made together by one thread (ncclCommInitAll, or
 * ncclCommInitRank calls of one group).  libmlap2p's destroy is collective,
 * and NCCL programs destroy such communicators one after the other from
 * that thread; so a member's ncclCommDestroy only marks it, and the last
 * one destroys them all at once, a thread each.
 */
struct nc_clique {
	pthread_mutex_t lock;
	int n;			/* members */
	int done;		/* members destroyed or aborted */
	struct nc_comm **members;
};

struct nc_comm {
	unsigned int magic;
	struct nc_clique *clique;	/* or NULL: one rank of its thread */
	int nranks, rank, core;
	int blocking;

	struct mlap2p_comm *comm;	/* atomic; NULL until init done */
	int refs;			/* atomic: user + queued work */
	int initDone;			/* atomic */
	int initErr;			/* atomic: -errno of the init */
	int initThread;			/* a non-blocking init thread to join */
	pthread_t initTid;
	struct mlap2p_unique_id id;

	uint64_t next;			/* atomic: next ticket */
	uint64_t owner;			/* atomic: nc_thread_id() of the bias */
	int taking;			/* atomic: the owner is taking a ticket */
	int shared;			/* atomic: NC_BIASED, NC_ENDING or
					 * NC_SHARED (locked adds) */
	uint64_t serving;		/* atomic: ticket allowed to run */
	int waiters;			/* atomic: threads asleep on tcond */
	int aborted;			/* atomic */
	int inflight;			/* atomic: 1 while the turn's holder runs
					 * work (nc_enter to nc_leave) */
	int asym;			/* nc_fence_light/heavy may use membarrier */
	pthread_mutex_t tlock;
	pthread_cond_t tcond;

	int asyncErr;			/* atomic: first -errno of async work */

	pthread_mutex_t elock;		/* lastErr */
	char lastErr[NC_ERR_LEN];

	/* Only touched by the thread holding the turn. */
	unsigned char *conn;		/* nranks: P2P channels connected */
	void *scratch;
	size_t scratchBytes;
	pthread_mutex_t plock;		/* premul[] (created on any thread) */
	struct nc_premul premul[NC_MAX_PREMUL];
};

/* The work of one communicator in one posting (a call or a group). */
struct nc_batch {
	struct nc_comm *c;
	uint64_t ticket;
	int nops;
	struct nc_op *ops;
};

/* What a stream runs: batches run together, or a host function. */
struct nc_item {
	struct nc_item *next;
	int64_t seenNs;		/* CLOCK_MONOTONIC: the worker first saw it */
	int packed;		/* a struct nc_one: b and its op inside */
	int nb;
	struct nc_batch *b;
	int (*fn)(void *arg);
	void *arg;
};

/* One operation of one communicator, the item a call on a stream posts,
 * in one allocation; a stream keeps a few of them for reuse. */
struct nc_one {
	struct nc_item it;
	struct nc_batch b;
	struct nc_op op;
};

/*
 * Fences for the two handshakes every call passes (run.c): the turn
 * holder's inflight against an abort's aborted, and serving against a
 * thread about to sleep on tcond (waiters).  Each is a Dekker pair: one
 * side stores then loads what the other stores then loads.  The side
 * every call takes uses nc_fence_light(); the rare side (an abort, a
 * thread going to sleep) uses nc_fence_heavy().  With c->asym (membarrier(2)
 * registered, MLAP2P_MEMBARRIER not 0) the light fence is only a compiler
 * barrier and the heavy one MEMBARRIER_CMD_PRIVATE_EXPEDITED, which runs a
 * full barrier on every thread of the process; else both are full fences.
 */
static inline void nc_fence_full(void)
{
#ifdef __SANITIZE_THREAD__
	/* TSan refuses fences (it checks races, not orderings): a locked
	 * instruction orders the same on x86. */
	static __thread int word;

	__atomic_fetch_add(&word, 0, __ATOMIC_SEQ_CST);
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

static inline void nc_fence_light(const struct nc_comm *c)
{
	if (c->asym)
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	else
		nc_fence_full();
}
void nc_fence_heavy(const struct nc_comm *c);
/* Whether this process can use the asymmetric fences (registers it). */
int nc_fence_asym(void);

/* lib/nccl/nccl.c */
void nc_get(struct nc_comm *c);
void nc_put(struct nc_comm *c);
/* Run @nb batches (tickets taken) together; the first error. @async: the
 * error also becomes each failing communicator's async error. */
int nc_run_batches(struct nc_batch *b, int nb, int async);
void nc_item_free(struct nc_item *it);

/* lib/nccl/stream.c: queue @it (its batches take their tickets now). */
int nc_stream_post(struct mlap2p_stream *s, struct nc_item *it);
/* Queue @o of @c (taking a reference on @c), in a reused struct nc_one. */
int nc_stream_post_op(struct mlap2p_stream *s, struct nc_comm *c,
		      const struct nc_op *o);

/* lib/nccl/interrupt.c */
void mlap2p_comm_interrupt(struct mlap2p_comm *comm);

/* The -errno -> ncclResult_t rule (documented in <nccl.h>). */
ncclResult_t mlap2p_nccl_result(int err);

/* The plain NCCL name as a weak alias of its p-prefixed definition. */
#define NC_ALIAS(f)							\
	extern __typeof__(p##f) f					\
		__attribute__((weak, alias("p" #f), visibility("default")))

int nc_grow(void **arr, int *cap, int need, size_t elem);
void nc_keep_text(struct nc_comm *c, const char *text);
ncclResult_t nc_lib_fail(struct nc_comm *c, const char *call, int err);
size_t nc_dtype_size(int dtype);
uint64_t nc_ticket(struct nc_comm *c);
int nc_init_many(struct nc_comm **cs, int n);


struct nc_gop {
	struct mlap2p_stream *s;
	struct nc_comm *c;
	struct nc_op op;
};

/* An ncclCommSplit recorded in a group: run at its end (comm.c). */
struct nc_gsplit {
	struct nc_comm *c;
	int color, key, core, blocking;
	ncclComm_t *out;
	uint64_t ticket;
	struct nc_comm *child;
	int err;
};

struct nc_group {
	int depth;
	int err;			/* first ncclResult_t of the group */
	struct nc_gop *ops;
	int n, cap;
	struct nc_comm **inits;
	int ninit, initCap;
	struct nc_gsplit *splits;
	int nsplit, splitCap;
	uint64_t tid;			/* nc_thread_id(): 0 until asked */
};

/* Run the group's splits together; the first error's ncclResult_t. */
ncclResult_t nc_split_many(struct nc_gsplit *g, int n);
/* The calling thread's group (nccl.c). */
extern __thread struct nc_group nc_grp;

/* An error found here: text, then the ncclResult_t of @err. */
ncclResult_t nc_fail(struct nc_comm *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The steps every call takes, inline: each is its common case, with
 * anything else (another thread's ticket, a turn to wait for, a sleeper
 * to wake, a failed communicator) out of line in run.c.  An 8-byte
 * all-reduce takes about 0.2 us, so a call's instructions show
 * (docs/nccl.md, "Cost").
 */
static inline struct nc_comm *nc_of(ncclComm_t comm)
{
	struct nc_comm *c = (struct nc_comm *)(void *)comm;

	return c && c->magic == NC_MAGIC ? c : NULL;
}

uint64_t nc_ticket_shared(struct nc_comm *c, struct nc_group *g);
void nc_turn_sleep(struct nc_comm *c, uint64_t t);
void nc_turn_wake(struct nc_comm *c);
int nc_enter_failed(struct nc_comm *c);

/* A ticket for the thread whose group is @g (one TLS lookup for both):
 * the owner's plain increment (the top of this file), else the general
 * rule. */
static inline uint64_t nc_ticket_in(struct nc_comm *c, struct nc_group *g)
{
	uint64_t t;

	if (g->tid && __atomic_load_n(&c->owner, __ATOMIC_RELAXED) == g->tid) {
		__atomic_store_n(&c->taking, 1, __ATOMIC_RELAXED);
		nc_fence_light(c);	/* taking, then shared */
		if (__atomic_load_n(&c->shared, __ATOMIC_RELAXED) ==
		    NC_BIASED) {
			t = __atomic_load_n(&c->next, __ATOMIC_RELAXED);
			__atomic_store_n(&c->next, t + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&c->taking, 0, __ATOMIC_RELEASE);
			return t;
		}
		__atomic_store_n(&c->taking, 0, __ATOMIC_RELEASE);
	}
	return nc_ticket_shared(c, g);
}

/* Wait until ticket @t may run. */
static inline void nc_turn_wait(struct nc_comm *c, uint64_t t)
{
	if (__atomic_load_n(&c->serving, __ATOMIC_ACQUIRE) != t)
		nc_turn_sleep(c, t);
}

/* Ticket @t is done: the next may run. */
static inline void nc_turn_done(struct nc_comm *c, uint64_t t)
{
	__atomic_store_n(&c->serving, t + 1, __ATOMIC_RELEASE);
	nc_fence_light(c);	/* serving, then waiters: see nc_turn_sleep */
	if (__atomic_load_n(&c->waiters, __ATOMIC_RELAXED))
		nc_turn_wake(c);
}

/*
 * Enter the communicator to run work, holding the turn: 0, or why not
 * (aborted, failed).  inflight, then aborted: ncclCommAbort stores them
 * the other way round with a heavy fence between, so either it sees us
 * inside or we see it.
 */
static inline int nc_enter(struct nc_comm *c)
{
	__atomic_store_n(&c->inflight, 1, __ATOMIC_RELAXED);
	nc_fence_light(c);
	if (__atomic_load_n(&c->aborted, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&c->initErr, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE))
		return nc_enter_failed(c);
	return 0;
}

static inline void nc_leave(struct nc_comm *c)
{
	__atomic_store_n(&c->inflight, 0, __ATOMIC_RELEASE);
}
/* NC_DECLS */

#endif /* MLAP2P_NCCL_NC_H */
