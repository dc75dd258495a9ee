/* SPDX-License-Identifier: MIT */
/*
 * <mlap2p/coll.h>: collectives over a communicator, NCCL's argument order
 * without the stream.  docs/collectives.md has the algorithms, the
 * thresholds and the measurements behind them.
 *
 * Every call returns 0 or -errno (errno set too) and says what was wrong in
 * mlap2p_last_error():
 *
 *  -EINVAL   a bad dtype, op or root, a NULL buffer with a non-zero count,
 *            buffers that overlap other than in the in-place form (checked
 *            before anything is sent, also when the count is 0)
 *  -EPROTO   the ranks called different collectives at this point: another
 *            call, count, dtype, op or root, or a different sequence
 *            number (a rank skipped a collective).  The message names the
 *            rank and both calls.  Every rank of the communicator fails so;
 *            the communicator is then unusable (abort or destroy it).
 *  -ECONNRESET  a peer died (checked within MLAP2P_PEER_TIMEOUT, as the
 *            data plane does; the message names the rank)
 *  -ECANCELED   mlap2p_comm_abort() from another thread
 *
 * In place as NCCL defines it: sendbuf == recvbuf for all-reduce,
 * broadcast and reduce; sendbuf == recvbuf + rank * sendcount (elements)
 * for all-gather; sendbuf + rank * recvcount == recvbuf for reduce-scatter.
 * All-to-all has no in-place form.
 *
 * Connections: a collective connects what it needs on first use: the
 * communicator's rings, one per channel (two by default, a ring and its
 * reverse: NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS) and, for all-to-all
 * and a forced one-shot all-reduce on 3 ranks or more, every pair
 * (mlap2p_connect_peers).  Connecting is collective: every rank must make
 * the same first calls.  Rings connected by an explicit
 * mlap2p_connect_ring() first are used as they are.  A ring collective's
 * lanes (below) each use their own channel.
 *
 * Environment (every rank must see the same values):
 *   NCCL_ALGO      "Ring", "OneShot" (all-reduce only), a comma list, or
 *                  "^name" to exclude.  Default: both, by size.
 *   NCCL_PROTO     as for send/recv (the data plane picks per message).
 *   MLAP2P_COLL_CHUNK     ring chunk in bytes (default 2M, 4K to 64M)
 *   MLAP2P_COLL_ONESHOT_MAX  largest all-reduce taken one-shot (default
 *                  docs/collectives.md; 0 = never)
 *   MLAP2P_COLL_DIRECT    1 (default) or 0: the direct all-reduce (below)
 *                  where every rank's buffers allow it.  The ranks agree
 *                  on it per call, so this one may differ between them.
 *   MLAP2P_COLL_CMA_MIN   least all-reduce, in bytes, taken direct by
 *                  address when the buffers are plain (default 64K;
 *                  0 = never, in place too); per call, as
 *                  MLAP2P_COLL_DIRECT
 *   MLAP2P_COLL_CMA_MAX   all-reduces of this many bytes or more are not
 *                  taken by address (0 = no limit); when set, none below
 *                  MLAP2P_COLL_CMA_MIN either.  Default 0, or 512K where
 *                  a peer is another process and system calls are dear
 *                  (MLAP2P_CMA_SYSCALL_NS); per call, as above
 *
 * Direct all-reduce: an all-reduce that would run on the ring, whose
 * sendbuf and recvbuf lie in regions from mlap2p_mem_alloc() on every
 * rank, runs without the ring: each rank maps every other rank's buffers
 * and reduces its slice of the elements (rank r: [count*r/n,
 * count*(r+1)/n)) from all n inputs into all n outputs, so every byte is
 * read once and written once.  Where some rank's buffers are plain
 * memory, from MLAP2P_COLL_CMA_MIN bytes, it runs the same way by
 * address when every peer is a thread of the same process (memcpy) or a
 * process on this host that cross-memory attach reaches (MLAP2P_CMA not
 * 0): each rank reads the peers' inputs with process_vm_readv and writes
 * their outputs with process_vm_writev, a block at a time.  The first one
 * on a communicator tries a read of every peer; if the kernel refuses any
 * (Yama's ptrace_scope, a process that is not dumpable), that all-reduce
 * and every later one run the ring.  Otherwise (or on a rank with
 * MLAP2P_COLL_DIRECT=0) every rank runs the ring.  The first direct one
 * connects every pair of ranks (as all-to-all does); above 8 ranks it
 * runs only once something else has.  A 2-rank all-reduce of more than
 * 4 KiB that would run one-shot goes direct too when every rank offers it:
 * regions, peers that are all threads of this process, or plain buffers
 * in place on every rank (below MLAP2P_COLL_CMA_MIN too: the one-shot
 * would have a peer read the buffer its owner has just written).  Plain
 * buffers out of place across processes stay one-shot below it.
 *
 * Channels (lanes): a ring collective splits its data over L =
 * min(rings, count * element size / chunk, 4) rings (at least 1), where
 * rings = the channels 0, 1, ... that have one (mlap2p_ring_get()).  Lane
 * k takes elements [count*k/L, count*(k+1)/L) (of each rank's block, for
 * all-gather and reduce-scatter) over ring k, channel k, with chunks of
 * floor(chunk / L) rounded down to 64 bytes.  Below, each lane follows
 * the rules on its own slice (offsets from the slice's start).
 *
 * Order of operations (reproducible bit for bit; every pairwise op rounds
 * to the type, as NCCL): per lane, with ring = that lane's ring order,
 * pos(r) a rank's index in it, n ranks, E = lane chunk bytes / element
 * size:
 *
 *  - all-reduce, ring: elements are taken in loops of n * E; loop l starts
 *    at base = l*n*E, covers rem = count - base elements (at most n*E),
 *    and is cut into n blocks of cs = min(E, ceil(rem / n)) elements
 *    (block b: [base + b*cs, base + min((b+1)*cs, rem))).  Block b is
 *    reduced x[ring[b]] op x[ring[b+1]] op ... op x[ring[b+n-1]] (indices
 *    mod n), left to right.
 *  - all-reduce, one-shot: x[0] op x[1] op ... op x[n-1] in rank order.
 *  - all-reduce, direct (no lanes): x[0] op x[1] op ... op x[n-1] in rank
 *    order, as the one-shot.  On 2 ranks the ring gives the same bits:
 *    each element is one op of the two inputs, and every op here is
 *    commutative.
 *  - reduce-scatter: the output of rank ring[q] (elements q*recvcount on)
 *    is x[ring[q+1]] op x[ring[q+2]] op ... op x[ring[q]] (mod n).
 *  - reduce to root: x[ring[p+1]] op x[ring[p+2]] op ... op x[ring[p]]
 *    with p = pos(root).
 *  - AVG: floating types reduce x[r] = input * (1/n rounded to the type)
 *    (each product rounded) with SUM; integer types SUM, then divide by n
 *    (truncating) once at the end.
 *
 * Groups: between mlap2p_group_start() and mlap2p_group_end() a collective
 * only records the call (its buffers must stay valid); the outermost
 * group_end() runs the collectives and progresses them together with the
 * group's send/recv: the group's send and receive messages between two
 * ranks come first, before those of the collectives, and the collectives
 * of one communicator run in the order they were called.  Collectives of
 * different communicators progress together.
 *
 * Threads: one thread at a time per communicator, as for send/recv.
 */
#ifndef MLAP2P_COLL_H
#define MLAP2P_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mlap2p_comm;
struct mlap2p_request;		/* <mlap2p/dataplane.h> */

#ifndef MLAP2P_COLL_DTYPES
#define MLAP2P_COLL_DTYPES
/* Values equal NCCL's ncclDataType_t and ncclRedOp_t. */
enum mlap2p_dtype { MLAP2P_INT8 = 0, MLAP2P_UINT8 = 1, MLAP2P_INT32 = 2,
	MLAP2P_UINT32 = 3, MLAP2P_INT64 = 4, MLAP2P_UINT64 = 5,
	MLAP2P_FLOAT16 = 6, MLAP2P_FLOAT32 = 7, MLAP2P_FLOAT64 = 8,
	MLAP2P_BFLOAT16 = 9, MLAP2P_FP8_E4M3 = 10, MLAP2P_FP8_E5M2 = 11 };
enum mlap2p_redop { MLAP2P_SUM = 0, MLAP2P_PROD = 1, MLAP2P_MAX = 2,
	MLAP2P_MIN = 3, MLAP2P_AVG = 4 };
#endif

int mlap2p_all_reduce(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, int dtype, int op);
int mlap2p_broadcast(struct mlap2p_comm *comm, const void *sendbuf,
		     void *recvbuf, size_t count, int dtype, int root);
int mlap2p_reduce(struct mlap2p_comm *comm, const void *sendbuf,
		  void *recvbuf, size_t count, int dtype, int op, int root);
int mlap2p_all_gather(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t sendcount, int dtype);
int mlap2p_reduce_scatter(struct mlap2p_comm *comm, const void *sendbuf,
			  void *recvbuf, size_t recvcount, int dtype, int op);
int mlap2p_all_to_all(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, int dtype);

/*
 * Non-blocking forms: check the arguments, start the collective and return
 * a request for mlap2p_request_test/wait/waitall (<mlap2p/dataplane.h>),
 * whose result is the collective's.  The buffers must stay valid until it
 * completes.  Collectives of one communicator still run in call order: a
 * test or wait on any of them progresses the oldest first, and a blocking
 * collective (or a group's end) first finishes the pending ones.  Not
 * inside a group (-EINVAL).
 */
int mlap2p_iall_reduce(struct mlap2p_comm *comm, const void *sendbuf,
		       void *recvbuf, size_t count, int dtype, int op,
		       struct mlap2p_request **req);
int mlap2p_ibroadcast(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, int dtype, int root,
		      struct mlap2p_request **req);
int mlap2p_ireduce(struct mlap2p_comm *comm, const void *sendbuf,
		   void *recvbuf, size_t count, int dtype, int op, int root,
		   struct mlap2p_request **req);
int mlap2p_iall_gather(struct mlap2p_comm *comm, const void *sendbuf,
		       void *recvbuf, size_t sendcount, int dtype,
		       struct mlap2p_request **req);
int mlap2p_ireduce_scatter(struct mlap2p_comm *comm, const void *sendbuf,
			   void *recvbuf, size_t recvcount, int dtype, int op,
			   struct mlap2p_request **req);
int mlap2p_iall_to_all(struct mlap2p_comm *comm, const void *sendbuf,
		       void *recvbuf, size_t count, int dtype,
		       struct mlap2p_request **req);

#ifdef __cplusplus
}
#endif

#endif /* MLAP2P_COLL_H */
