/* SPDX-License-Identifier: MIT */
/*
 * <mlap2p/dataplane.h>: moving bytes over a connected communicator.
 *
 * Point-to-point messages between ranks whose connection was set up with
 * mlap2p_connect_peers() or mlap2p_connect_ring().  A message travels over
 * the lowest channel that connects the two ranks, in order with every other
 * message between them in that direction.  The two ends must agree on the
 * size (and so on the protocol); a SIMPLE-sized mismatch fails with -EPROTO.
 *
 * Protocols, chosen per message by size (docs/performance.md has the
 * thresholds and how they were measured): LL for the smallest, LL128 for
 * mid sizes, SIMPLE for bulk.  NCCL_PROTO restricts the choice as in NCCL
 * ("LL,LL128", "^LL128", "Simple"); every rank must see the same value.
 *
 * Single copy.  When the receive buffer is device memory from
 * mlap2p_mem_alloc() (or any buffer, between threads of one process), the
 * sender of a SIMPLE message writes straight into it; in read mode
 * (NCCL_P2P_READ_ENABLE=1) the receiver reads straight from a registered
 * send buffer.  A SIMPLE send therefore waits until its receive is posted:
 * post both sides of an exchange inside a group.
 *
 * Waiting.  Blocking calls spin, then yield the CPU, so more ranks than
 * cores still progress.  Every wait ends with -ECANCELED once the
 * communicator is aborted (mlap2p_comm_abort() from another thread), and
 * with -ECONNRESET, naming the peer in mlap2p_last_error(), when a peer
 * process died: checked through its pid and start time, within
 * MLAP2P_PEER_TIMEOUT (default 5s; "0" turns the check off).
 *
 * Hangs.  SIGUSR1 (MLAP2P_DUMP_SIGNAL=<signo>, 0 = none; installed only if
 * the application has not set a handler) prints every connection's head,
 * tail and step to stderr; mlap2p_dump_state() does the same on demand.
 *
 * Threads: one thread at a time may post and wait on a communicator;
 * mlap2p_comm_abort() and mlap2p_dump_state() may be called from any.
 * Errors are -errno with errno set, as everywhere in libmlap2p.
 */
#ifndef MLAP2P_DATAPLANE_H
#define MLAP2P_DATAPLANE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mlap2p_comm;
struct mlap2p_request;		/* opaque */

/* Protocol numbers (NCCL's indices) for mlap2p_set_proto(). */
#define MLAP2P_PROTO_AUTO	(-1)
#define MLAP2P_PROTO_LL		0
#define MLAP2P_PROTO_LL128	1
#define MLAP2P_PROTO_SIMPLE	2

/*
 * Blocking: return once @buf may be reused (send) or holds the data.
 * A call that fails (a dead peer, an abort, a timeout) may leave its
 * buffers in use by the peer, as NCCL's may: reuse them once the
 * communicator is destroyed or mlap2p_comm_abort() has returned (which
 * withdraws every buffer still offered to a peer).  So for every call
 * here and in <mlap2p/coll.h>.
 */
int mlap2p_send(struct mlap2p_comm *comm, const void *buf, size_t bytes,
		int peer);
int mlap2p_recv(struct mlap2p_comm *comm, void *buf, size_t bytes, int peer);

/*
 * Groups (per thread, nestable).  Between start and end, mlap2p_send and
 * mlap2p_recv only post; the outermost mlap2p_group_end() progresses
 * everything posted together and returns when all of it is done (the
 * first error, if any).
 */
int mlap2p_group_start(void);
int mlap2p_group_end(void);

/* Non-blocking: post and return a request for test/wait. */
int mlap2p_isend(struct mlap2p_comm *comm, const void *buf, size_t bytes,
		 int peer, struct mlap2p_request **req);
int mlap2p_irecv(struct mlap2p_comm *comm, void *buf, size_t bytes, int peer,
		 struct mlap2p_request **req);
/*
 * Progress the communicator once.  *done = 1 when the request finished:
 * then it is freed, *req is set to NULL and its result returned.
 */
int mlap2p_request_test(struct mlap2p_request **req, int *done);
/* Block until the request finished; frees it and sets *req = NULL. */
int mlap2p_request_wait(struct mlap2p_request **req);
/* Wait for @n requests (NULL entries are skipped); the first error. */
int mlap2p_request_waitall(int n, struct mlap2p_request **reqs);

/* Force one protocol for messages posted from now on, or AUTO (by size).
 * Every rank must make the same choice. */
int mlap2p_set_proto(struct mlap2p_comm *comm, int proto);
/* The protocol a message of @bytes would take now; -errno if none may. */
int mlap2p_proto_for(struct mlap2p_comm *comm, size_t bytes);
/* "LL", "LL128", "SIMPLE" (or "?"). */
const char *mlap2p_proto_name(int proto);

/* Write every connection's state (head, tail, step, queued ops) to @fd,
 * and how many collectives ran each way (<mlap2p/coll.h>). */
int mlap2p_dump_state(struct mlap2p_comm *comm, int fd);

#ifdef __cplusplus
}
#endif

#endif /* MLAP2P_DATAPLANE_H */
