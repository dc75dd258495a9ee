/* SPDX-License-Identifier: MIT */
/*
 * lib/dataplane/dp.h: <mlap2p/dataplane.h> on top of the protocol engines,
 * the state its files share: api.c (groups, send/recv, the small-message
 * path), link.c (parameters, protocol choice, building a link, teardown),
 * cma.c (single copy through the runtime and cross-memory attach, and
 * MLAP2P_CMA=auto), progress.c (queues, steps, checks, waits) and dump.c
 * (the state dump).
 *
 * Per communicator (comm->dp, created on first use) there is one link per
 * (peer, direction): the lowest connected channel's connector, its agreed
 * buffer sizes and a FIFO of operations.  Only the operation at the head of
 * a link's queue runs; the others wait their turn, so messages between two
 * ranks stay in order.  Links with queued operations sit on an active list,
 * and every wait is the same loop: one progress pass over the active list;
 * when nothing moved, spin/yield, and now and then check the abort flag and
 * the liveness of the peers being waited on.
 *
 * Blocking calls outside a group use an operation on the stack; groups and
 * isend/irecv allocate a request.
 */
#ifndef MLAP2P_LIB_DP_H
#define MLAP2P_LIB_DP_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mlap2p/dataplane.h"
#include "comm.h"
#include "log.h"
#include "param.h"
#include "proto/proto.h"
#include "transport.h"
#include "transport/net.h"
#include "util.h"
#include "dataplane/dataplane.h"

/* Defaults; docs/performance.md has the measurements behind them. */
#define DP_LL_MAX		64UL		/* LL up to this many bytes */
#define DP_LL128_MAX		(4UL << 10)	/* then LL128 up to this */
#define DP_CHUNK		(128UL << 10)	/* SIMPLE bytes per step */
#define DP_CMA_MIN		(8UL << 10)	/* cross-memory attach from */
#define DP_CMA_MAX		(64UL << 20)	/* auto, exchange: sender first below */
#define DP_CMA_ONEWAY_MAX	(32UL << 20)	/* auto, one way: single copy below */
/* Auto where a system call costs DP_CMA_SYSCALL_NS or more at either end
 * of a link: exchanges from DP_DEAR_CMA_MIN (to DP_CMA_MAX, as elsewhere)
 * by cross-memory attach, one way the FIFO. */
#define DP_CMA_SYSCALL_NS	1000
#define DP_DEAR_CMA_MIN		(256UL << 10)
#define DP_DEAR_CMA_ONEWAY_MAX	0UL
#define DP_DEAR_STEP_MIN	(32UL << 10)	/* link->stepMin there */
#define DP_UNSET		UINT64_MAX	/* a size the environment left */
#define DP_NT_MIN		MLAP2P_NT_MIN_DEFAULT	/* streaming copy-out from */
#define DP_SMALL_MAX		MLAP2P_LL128_SMALL	/* dp_small() up to this */
#define DP_PEER_TIMEOUT_MS	5000

struct dp;

struct dp_link {
	struct mlap2p_link l;
	struct dp *dp;
	struct mlap2p_conn *conn;
	struct mlap2p_op *qhead, *qtail;	/* qhead is started */
	struct dp_link *activeNext;
	int active;
	int err;			/* broken: every new op fails so */
	uint64_t ops;			/* completed, for the dump */
	uint64_t direct;		/* of which single copy */
	uint64_t split;			/* sends of which both cores copied */
	int cma;			/* may offer (receive) or publish (send)
					 * plain buffers' addresses */
	int peerChecked;		/* write_peer: 1 pid verified, -1 not */
	int pidfd;			/* the peer's process, or -1 */
	uint64_t cmaNext;		/* where the message's next step goes */
	/* struct dp's limits of the same names, or where the environment
	 * left them, those for the link's cost of a system call. */
	uint64_t cmaMin, cmaMax, cmaOneWayMax;
	unsigned int usable;		/* protocols these buffers carry */
	int small;			/* dp_small() fits: 1 LL, 2 LL128 */
	/* dp_small() takes LL messages of [0, llEnd) bytes and LL128 ones of
	 * [ll128Beg, ll128End): dp_small_ranges() from dp_pick(). */
	size_t llEnd, ll128Beg, ll128End;
};

struct dp {
	struct ncclComm *comm;
	/* Links by channel, [2 * peer + send] in each (allocated on first
	 * use), and the default one per (peer, direction): that of the lowest
	 * connected channel, which the public calls use. */
	struct dp_link **chan[MAXCHANNELS];
	struct dp_link **links;		/* [2 * peer + send], into chan[] */
	struct dp_link *active;
	int proto;			/* forced, or MLAP2P_PROTO_AUTO */
	unsigned int protoEpoch;	/* mlap2p_set_proto() calls so far */
	unsigned int protoMask;		/* NCCL_PROTO */
	uint64_t llMax, ll128Max, chunk;
	int noDirect;
	int noCma;
	int cmaAuto;			/* by size, one way or exchange */
	/* The environment's, DP_UNSET where it is silent: dp_cma_limits(). */
	uint64_t cmaMin;		/* smaller messages: the FIFO */
	uint64_t cmaMax;		/* auto, exchange: from this, the FIFO */
	uint64_t cmaOneWayMax;		/* auto, one way: from this, the FIFO */
	uint64_t cmaSyscallNs;		/* auto: dear system calls from this */
	int dearLogged;
	uint64_t ntMin;			/* link->ntMin */
	int noPull;
	long peerTimeoutMs, liveEveryMs;
	int64_t nextLive;
	uint32_t spinTight, spinYield;
	uint32_t dumpSeen;		/* dump signals already answered */
	int fence;			/* dp_in() may use plain stores */
	uint32_t inside;		/* calls of the owner thread inside */
	unsigned int pass;		/* progress passes, for waits on many */
};

#define DP_ABANDONED	2	/* req->done: its group waiter left (abort) */

/* MLAP2P_CMA=auto's rule: a system call of @ns is dear (dp_cma_limits()). */
static inline int dp_dear(const struct dp *dp, uint64_t ns)
{
	return dp->cmaAuto && ns >= dp->cmaSyscallNs;
}

struct mlap2p_request {
	struct mlap2p_op op;
	struct dp *dp;
	int status;
	int done;		/* 1 finished; DP_ABANDONED: see dp_abandon() */
	int group;		/* a group's: may be abandoned, see dp_finish() */
	struct mlap2p_request *groupNext;
	struct mlap2p_hold *hold;	/* a group's: of dp->comm */
	/* A collective's request (lib/coll/): no op; waits call poll(ext),
	 * which ends it with mlap2p_request_ext_done(). */
	void (*poll)(void *ext);
	void *ext;
};

/* api.c */
int dp_enter(struct mlap2p_comm *api, struct dp **dpp);
int dp_membarrier_ok(void);
void dp_out(struct dp *dp);
void dp_quiesce(struct dp *dp);

/* cma.c */
int dp_describe(void *arg, const void *buf, size_t bytes,
		struct mlap2p_xchg *x);
int dp_net_reg(void *arg, const void *buf, size_t bytes);
int dp_publish(void *arg, const void *buf, size_t bytes);
int dp_pull_peer(void *arg, uint64_t addr, void *dst, size_t bytes);
int dp_still_peer(void *arg);
int dp_read_peer(void *arg, uint64_t addr, void *dst, size_t bytes);
int dp_resolve(void *arg, const struct mlap2p_xchg *x, void **ptr);
int dp_write_peer(void *arg, uint64_t addr, const void *src,
		  size_t bytes);

/* dump.c */
void dp_install_dump_signal(void);
void dp_dump_init(struct dp *dp);
void dp_dump_poll(struct dp *dp);

/* link.c */
struct dp *dp_get(struct ncclComm *comm);
struct dp_link *dp_link(struct dp *dp, int peer, int send, int *err,
			int quiet);
struct dp_link *dp_link_on(struct dp *dp, int ch, int peer, int send,
			   int *err, int quiet);
#define dp_for_each_link(dp, c, i, k)					\
	for ((c) = 0; (c) < MAXCHANNELS; (c)++)				\
		for ((i) = 0; (dp)->chan[c] && (i) < 2 * (dp)->comm->nRanks; (i)++) \
			if (((k) = (dp)->chan[c][i]) != NULL)
int dp_pick(struct dp *dp, const struct dp_link *k, size_t bytes);
void dp_small_ranges(struct dp *dp, struct dp_link *k);

/* progress.c */
int dp_check(struct dp *dp);
void dp_complete(struct dp_link *k, int status);
int dp_post(struct dp *dp, struct mlap2p_request *req, int ch, int how,
	    void *buf, void *tee, size_t bytes, int peer, int now);
int dp_progress(struct dp *dp);
void dp_wait_reqs(struct mlap2p_request **reqs, int n);
void dp_withdraw(struct dp_link *k);


#endif /* MLAP2P_LIB_DP_H */
