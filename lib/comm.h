/* SPDX-License-Identifier: MIT */
/*
 * lib/comm.h: the communicator (lib/comm.c): init and teardown, the
 * public-API bracket, the asynchronous error, peer info and liveness, and
 * the cache of peer regions mapped into this process.
 */
#ifndef MLAP2P_LIB_COMM_H
#define MLAP2P_LIB_COMM_H

#include <sys/types.h>

#include "core.h"

/* Own ncclPeerInfo (rank, core, hashes, pid, start time, node, MLA). */
int mlap2p_fill_peer_info(struct ncclComm *comm, struct ncclPeerInfo *info);

/* Record the first asynchronous error (-errno) of @comm. */
void mlap2p_comm_set_error(struct ncclComm *comm, int err);

/*
 * Bracket every blocking public call: enter fails with -ECANCELED once the
 * communicator is aborted; abort (from any thread) sets the flag, then
 * waits until every thread inside has left before freeing.
 */
int mlap2p_comm_enter(struct ncclComm *comm);
void mlap2p_comm_leave(struct ncclComm *comm);

/*
 * A group (mlap2p_group_start) records work on a communicator that its
 * end runs or waits for, and by then the communicator may be aborted and
 * freed.  Each record takes a hold (mlap2p_comm_hold, called inside the
 * communicator), which outlives it.  At the group's end,
 * mlap2p_hold_enter() is -ECANCELED once the communicator was aborted;
 * on 0 the communicator is still there until mlap2p_hold_leave(), and
 * whoever means to use it longer enters it (mlap2p_comm_enter) before
 * that.  mlap2p_hold_put(h, n) drops n holds (records that share one
 * may be put together).  While holds are out,
 * mlap2p_comm_destroy() fails with -EBUSY; abort always goes ahead.
 */
struct mlap2p_hold;
struct mlap2p_hold *mlap2p_comm_hold(struct ncclComm *comm);
int mlap2p_hold_enter(struct mlap2p_hold *h);
void mlap2p_hold_leave(struct mlap2p_hold *h);
void mlap2p_hold_put(struct mlap2p_hold *h, unsigned int n);

/*
 * 0 while @rank's process lives (same pid and start time as at init),
 * -ESRCH once it died or its pid was reused, or NET's -errno once the
 * network path to it failed.  Cheap: one /proc read.
 */
int mlap2p_peer_alive(struct ncclComm *comm, int rank);
/* ncclPeerInfo.pidHash of @pid in this process's pid namespace. */
uint64_t mlap2p_pid_hash(pid_t pid);

/*
 * Map a region a peer exported (an IPC handle, e.g. from ptrExchange) into
 * this process.  The first call per region opens it; later calls return
 * the cached mapping.  Everything is unmapped at destroy/abort.  Thread
 * safe.  0 or -errno.
 */
int mlap2p_import_region(struct ncclComm *comm,
			 const struct ncclRtIpcMemHandle *ipc, void **base,
			 size_t *size);
/*
 * The IPC handle and offset of @ptr if it lies in a region of this comm's
 * runtime (mlap2p_mem_alloc, FIFOs); -ENOENT otherwise.
 */
int mlap2p_region_lookup(struct ncclComm *comm, const void *ptr,
			 struct ncclRtIpcMemHandle *ipc, size_t *offset,
			 size_t *bytesAfter);

/* Is rank @peer a thread of this process (its address space ours)? */
static inline int mlap2p_same_process(const struct ncclComm *comm, int peer)
{
	const struct ncclPeerInfo *p = &comm->peerInfo[peer];
	const struct ncclPeerInfo *me = &comm->peerInfo[comm->rank];

	return p->pidHash == me->pidHash && p->hostHash == me->hostHash;
}

#endif /* MLAP2P_LIB_COMM_H */
