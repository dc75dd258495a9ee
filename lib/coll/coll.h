/* SPDX-License-Identifier: MIT */
/*
 * lib/coll/coll.h: <mlap2p/coll.h>, NCCL's ring collectives (and a
 * one-shot all-reduce for small messages on 2 ranks) on the public data
 * plane: isend/irecv/request_test between ring neighbours (and between
 * every pair, for all-to-all, one-shot and the direct all-reduce).
 * What the files of lib/coll/ share: state.c (per-communicator state,
 * requests, the preamble), ring.c (unit geometry, the ring and pair
 * data phases), run.c (running a collective), direct.c (the all-reduce
 * straight between regions), api.c (groups, argument checks, the API).
 *
 * Every collective is a small state machine (struct cop): connect, a
 * preamble that checks that all ranks make the same call, the data phase,
 * a local finish.  A blocking call runs one to completion; a group's
 * outermost mlap2p_group_end() (api.c: the public group calls are this
 * layer's) runs those recorded inside it together.
 *
 * The preamble.  On 2 ranks: one 32-byte message each way, the header
 * {seq | root | kind | dtype | op | algo, count} (+ up to 16 data bytes
 * for the one-shot all-reduce, so that an 8-byte all-reduce is one LL
 * message each way and one add; a blocking call sends the other
 * collectives' data right behind it, api.c's fast_small).  On n >= 3: n - 1 hops around the ring (hop 0: the
 * 32-byte header to next; hops 1..n-2: 64 bytes, the sender's header,
 * the first mismatch it knows of and its direct run, direct.c), so that
 * every rank learns of any mismatch before anything else moves: a ring
 * has at least two edges where neighbours differ, and each finding
 * travels n - 2 hops.  Every first message is 32 bytes whatever the
 * call, so ranks that disagree still read whole messages.
 *
 * The ring data phase.  A collective is cut into units; unit u of the
 * sender's sends to next is unit u of the receiver's receives from prev
 * (messages between two ranks are ordered).  Receives are posted ahead
 * into NSLOTS scratch slots (or straight into the output), sends as soon
 * as what they carry is there, so the next chunk moves while this one is
 * reduced.  Scratch is allocated once per communicator
 * (mlap2p_mem_alloc, so peers' sends write straight into it).
 */
#ifndef MLAP2P_LIB_COLL_H
#define MLAP2P_LIB_COLL_H

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mlap2p/coll.h"
#include "mlap2p/dataplane.h"
#include "coll/reduce.h"
#include "comm.h"
#include "dataplane/dataplane.h"
#include "log.h"
#include "param.h"
#include "util.h"

/* Collectives, as in the header's kind field (and the messages). */
enum {
	K_ALL_REDUCE = 1,
	K_BROADCAST = 2,
	K_REDUCE = 3,
	K_ALL_GATHER = 4,
	K_REDUCE_SCATTER = 5,
	K_ALL_TO_ALL = 6,
};

#define ALGO_RING	1
#define ALGO_ONESHOT	2

/* The way a collective ran (struct coll's ways[]). */
enum { CW_RING, CW_ONESHOT, CW_PAIRS, CW_MAP, CW_CMA, CW_N };

/* A ring all-reduce's header message (a one-shot's above FAST_MAX) at
 * [2]: DIRECT_OFFER | the ways this rank offers to go direct (direct.c);
 * hops 1..n-2 carry the runs of ranks that offer each way at [7]
 * (regions low, CMA high 32 bits). */
#define DIRECT_OFFER	0x6d6c616469720000ULL	/* "mladir" */
#define DIRECT_WAYS	3ULL
#define DIRECT_MAP	1	/* buffers are regions: mapped */
#define DIRECT_CMA	2	/* plain: cross-memory attach (or a
				 * memcpy, between threads) */

#define HDR_BYTES	32	/* every first message */
#define STAT_BYTES	64	/* preamble hops 1..n-2 */
#define INLINE_MAX	16	/* data bytes a 2-rank one-shot all-reduce's
				 * header carries */
#define FAST_MAX	4096	/* a 2-rank blocking call's data sent
				 * right after its header (api.c) */
#define NSLOTS		4	/* scratch receive slots */
#define WIN		8	/* requests in flight per direction */
#define DEF_CHUNK	(2UL << 20)
#define DEF_ONESHOT_MAX	(64UL << 10)
#define PAIRS_MAX	64	/* ranks all-to-all and one-shot take */
#define DIRECT_CONNECT_MAX 8	/* ranks up to which the direct all-reduce
				 * connects every pair itself (direct.c) */
#define DEF_CMA_MIN	(64UL << 10)	/* MLAP2P_COLL_CMA_MIN (direct.c) */
/* MLAP2P_COLL_CMA_MAX where a system call is dear (direct.c); else 0. */
#define DEAR_CMA_MAX	(512UL << 10)
#define LANES_MAX	4	/* channels one collective's rings use */

/* Per communicator (comm->coll). */
struct coll {
	struct ncclComm *comm;
	struct mlap2p_comm *api;
	int n, rank, pos, prev, next;
	int *order;			/* ring of channel 0 */
	int nrings;			/* channels with a ring, 0 .. */
	int *orders;			/* [ring * n + i], nrings rings */
	int *poss;			/* [ring]: our place in it */
	uint32_t seq;			/* collectives started */
	unsigned int algoMask;		/* NCCL_ALGO */
	size_t chunk;			/* MLAP2P_COLL_CHUNK */
	size_t oneshotMax;		/* MLAP2P_COLL_ONESHOT_MAX */
	int direct;			/* MLAP2P_COLL_DIRECT */
	size_t cmaMin;			/* MLAP2P_COLL_CMA_MIN, 0: never */
	size_t cmaMax;			/* MLAP2P_COLL_CMA_MAX, 0: no limit */
	int cmaState;			/* 0 untried, 1 works, -1 refused */
	int cmaThreads;			/* every peer a thread of ours */
	uint64_t ways[CW_N];		/* collectives completed per way, for
					 * mlap2p_dump_state(): one writer,
					 * any reader */
	uint64_t sync;			/* DIRECT_CMA between threads: the
					 * release/acquire pairs (direct.c) */
	int threadPeers;		/* a peer is a thread of ours */
	int live;			/* registered for them (direct.c) */
	uint64_t serial;		/* ... under this number */
	struct coll *liveNext;
	uint64_t ntMin;			/* MLAP2P_NT_MIN */
	int allPeers;			/* every pair connected */
	char *scratch;
	size_t scratchBytes;
	void *fast;			/* 3 x FAST_MAX (api.c's fast_buf) */
	size_t fastEnd;			/* data below this many bytes may go
					 * the fast path (api.c's fast_end) */
	unsigned int fastEpoch;		/* ... of this proto epoch, + 1 */
	int scratchMem;			/* from mlap2p_mem_alloc */
	struct dpeer *dx;		/* [n], the direct all-reduce's */
	long peerTimeoutMs;
	uint32_t spinYield;		/* idle passes before sched_yield() */
	/* Requests left behind by a failed collective: the data plane ends
	 * them at destroy/abort, we free them (collFree runs after dpFree). */
	struct mlap2p_request **orphans;
	int norphans, maxOrphans;
	/* Non-blocking collectives not finished yet, in call order. */
	struct nbop *pendHead, *pendTail;
	int64_t nextCheck;
};

/*
 * One ring of a collective: the slice of the data (of each rank's block,
 * for all-gather and reduce-scatter) that one channel's ring carries, as
 * NCCL's channels do.  Its units go over that channel only.
 */
struct lane {
	int ch;				/* channel, and so the ring */
	int pos, prev, next;		/* on that ring */
	const int *order;
	size_t off, count;		/* elements: where the slice starts */
	const char *in;			/* o->in + off elements */
	char *out;			/* o->out + off elements */
	char *scratch;			/* its R and P slots */
	size_t chunk;			/* bytes per unit, at most */
	uint64_t nsend, nrecv, T;
	uint64_t sPost, sDone, rPost, rDone;
	struct mlap2p_request *sreq[WIN], *rreq[WIN];
	int sRel[WIN], sP[WIN];		/* slots a send frees at its end */
	int64_t rslot[NSLOTS];		/* receive unit in R slot s, or -1 */
	int64_t pslot[NSLOTS];		/* send unit in P slot s, or -1 */
	size_t E;			/* chunk elements */
	int d;				/* chain distance from root */
};

/* What a rank offering the direct all-reduce sends (direct.c). */
struct ddesc {
	unsigned char ipcIn[MLAP2P_IPC_HANDLE_SIZE];
	unsigned char ipcOut[MLAP2P_IPC_HANDLE_SIZE];
	uint64_t offIn, offOut;		/* in the regions */
	uint64_t bytes;			/* of each buffer */
	uint64_t addrIn, addrOut;	/* in its process (DIRECT_CMA) */
	uint64_t addrSync;		/* &its coll's sync (DIRECT_CMA) */
	uint64_t serial;		/* its coll's (DIRECT_CMA) */
};

/* Per rank, for the one direct all-reduce a communicator runs at a time
 * (its collectives run one after another): what it offered, where its
 * buffers are mapped here, its done word. */
struct dpeer {
	struct ddesc d;
	const char *in;
	char *out;
	int nt;				/* streaming stores into out */
	uint64_t fin;			/* done word: seq | errno << 32 */
	uint64_t ok;			/* DIRECT_CMA's first: errno reading */
};

/* One collective in progress. */
struct cop {
	struct coll *c;
	const char *fn;			/* "mlap2p_all_reduce", for messages */
	int kind, dtype, op, root, algo;
	size_t count, es;
	const char *in;
	char *out;
	int inplace;
	uint64_t hdr[2];
	int phase;
	int err;
	struct cop *groupNext;
	struct mlap2p_hold *hold;	/* a group's: of c->comm */

	/* preamble */
	int hop;
	struct mlap2p_request *ps, *pr;
	uint64_t smsg[STAT_BYTES / 8], rmsg[STAT_BYTES / 8];
	int bad, badA, badB;
	uint64_t descA[2], descB[2];

	int nlanes;			/* lane[0 .. nlanes) are set up */
	int npreq;			/* preq[0 .. npreq) are in use */

	/* direct (direct.c); its messages use preq */
	int direct;			/* the DIRECT_* ways we offered; after
					 * direct_start(), the one that runs */
	int drun, crun;			/* ranks up to us known to offer
					 * DIRECT_MAP, DIRECT_CMA */
	int dstate;
	int derr;			/* why we could not do our slice */
	size_t dnext, dend;		/* our slice's elements left */

	/*
	 * From here on (COP_CLEAR), nothing is zeroed when a call starts
	 * (cop_init): 2.6 of the struct's 3 KiB, which the 8-byte
	 * all-reduce never touches.  Only the first nlanes lanes and npreq
	 * requests are read, each written first.
	 */
	struct lane lane[LANES_MAX];	/* ring units, per lane */
	/* pairs (one-shot data, all-to-all, the direct all-reduce) */
	struct mlap2p_request *preq[2 * PAIRS_MAX];
};

#define COP_CLEAR	offsetof(struct cop, lane)

/* A non-blocking collective: its request ends when the op does. */
struct nbop {
	struct cop o;
	struct mlap2p_request *req;
	struct nbop *next;
};

enum { PH_CONNECT, PH_PRE, PH_CONNECT_ALL, PH_DATA, PH_FINISH, PH_DONE };

/* One more collective that ran @way (CW_*): the communicator's one
 * thread writes, mlap2p_dump_state() may read from any. */
static inline void coll_count(struct coll *c, int way)
{
	__atomic_store_n(&c->ways[way],
			 __atomic_load_n(&c->ways[way], __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

/* state.c */
struct coll *coll_get(struct mlap2p_comm *api, int *err);
void hdr_make(struct cop *o);
int is_float(int dtype);
const char *kind_name(int kind);
int mismatch(struct cop *o);
int oneshot_inline(const struct cop *o);
void orphan(struct coll *c, struct mlap2p_request **req);
void pre_fill(struct cop *o);
int pre_progress(struct cop *o, int *moved);
int req_test(struct coll *c, struct mlap2p_request **req);

/* ring.c */
int avg_pre(const struct cop *o);
void finalize(struct cop *o, void *dst, size_t len);
void oneshot_finish(struct cop *o);
int pairs_post(struct cop *o);
int pairs_progress(struct cop *o, int *moved);
void ring_orphan(struct cop *o);
int ring_progress(struct cop *o, int *moved);
void ring_setup(struct cop *o);
char *slot_t(const struct cop *o);

/* direct.c */
int direct_offer(struct cop *o);
void direct_hop(struct cop *o);
int direct_all(const struct cop *o);
int direct_start(struct cop *o);
int direct_progress(struct cop *o, int *moved);
void direct_live_add(struct coll *c);
void direct_live_del(struct coll *c);

/* run.c */
int check_peers(struct cop *o);
int cop_progress(struct cop *o, int *moved);
int fail(struct cop *o, int err);
void ring_orphan_all(struct cop *o);
int run_ops(struct cop **ops, int n);

/* api.c */
void nb_drain(struct coll *c);

#endif /* MLAP2P_LIB_COLL_H */
