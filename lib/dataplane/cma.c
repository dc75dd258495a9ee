// SPDX-License-Identifier: MIT
/*
 * Single copy through the runtime: describing buffers to the peer,
 * publishing send buffers (sender first), resolving the peer's offers,
 * cross-memory attach and MLAP2P_CMA=auto.
 */
#include "dataplane/dp.h"

/* ---- single copy through the runtime ---- */

/*
 * Which way a plain buffer goes to another process.  MLAP2P_CMA=1: from
 * cmaMin on (below, the system call and the handshake cost more than two
 * copies through the FIFO) sender first (lib/proto.h): the send
 * publishes its buffer's address for the receiver to read with one
 * process_vm_readv, as Open MPI's vader does.  MLAP2P_CMA=auto, from
 * cmaMin too:
 *
 * - in an exchange (the send is posted in a group, or this rank has a
 *   SIMPLE receive of cmaMin or more queued) sender first below cmaMax:
 *   each core reads the message it receives, the directions overlap;
 * - one way, below cmaOneWayMax: a message of one step sender first; a
 *   longer one the receiver offers by address (dp_describe), the sender
 *   writes steps from the front with process_vm_writev while the
 *   receiver reads from the back, so both cores copy it once;
 * - larger ones through the FIFO.
 *
 * Those are the limits where a system call is cheap; where it is dear at
 * either end of the link, exchanges of 256 KiB to cmaMax go sender first
 * and everything else through the FIFO (dp_cma_limits()).
 *
 * On the Intel guest measured this beat vader's single read one way
 * (0.6-0.7x its time from 256 KiB to 64 MiB) and met it in exchanges,
 * where the FIFO lost by 1.5-2x; on the AMD guest the FIFO ran from 3x
 * faster to 2x slower than cross-memory attach by where the two vCPUs
 * sat, which a guest cannot see (docs/performance.md, issue 19).  The
 * sender decides and marks the message: the ends cannot disagree.  A
 * region goes the offer's way: the receiver's own region is then written
 * in place, with no system call.
 */
static int dp_exchange(const struct dp *dp)
{
	const struct dp_link *k;
	const struct mlap2p_op *op;

	if (mlap2p_group_depth() > 0)
		return 1;
	for (k = dp->active; k; k = k->activeNext)
		for (op = k->qhead; op; op = op->next)
			if (!op->send && op->proto == NCCL_PROTO_SIMPLE &&
			    op->bytes >= k->cmaMin)
				return 1;
	return 0;
}

/* A send buffer the receiver can read by address: not in a region. */
static int dp_plain(struct dp_link *k, const void *buf)
{
	struct ncclRtIpcMemHandle ipc;
	size_t offset, after;

	return mlap2p_region_lookup(k->dp->comm, buf, &ipc, &offset,
				    &after) != 0;
}

/* link->publish: the way above, MLAP2P_SEND_*. */
int dp_publish(void *arg, const void *buf, size_t bytes)
{
	struct dp_link *k = arg;
	const struct dp *dp = k->dp;

	if (!k->cma || bytes < k->cmaMin)
		return MLAP2P_SEND_OFFER;
	if (!dp->cmaAuto)
		return dp_plain(k, buf) ? MLAP2P_SEND_PULL : MLAP2P_SEND_OFFER;
	if (dp_exchange(dp))
		return bytes < k->cmaMax && dp_plain(k, buf) ?
		       MLAP2P_SEND_PULL : MLAP2P_SEND_FIFO;
	if (bytes >= k->cmaOneWayMax)
		return MLAP2P_SEND_FIFO;
	return bytes <= dp->chunk && dp_plain(k, buf) ? MLAP2P_SEND_PULL :
							 MLAP2P_SEND_OFFER;
}

int dp_describe(void *arg, const void *buf, size_t bytes,
		struct mlap2p_xchg *x)
{
	struct dp_link *k = arg;
	struct ncclRtIpcMemHandle ipc;
	size_t offset, after;

	_Static_assert(sizeof(ipc) == sizeof(x->ipc), "ipc handle size");
	if (!mlap2p_region_lookup(k->dp->comm, buf, &ipc, &offset, &after) &&
	    after >= bytes) {
		memcpy(x->ipc, &ipc, sizeof(x->ipc));
		x->offset = offset;
		return MLAP2P_DESCRIBE_HANDLE;
	}
	/* Below cmaMin the two copies through the FIFO cost less than the
	 * system call and handshake (docs/performance.md).  Auto: only
	 * below cmaOneWayMax, where the sender may take it (dp_publish);
	 * a sender that goes sender first takes the offer back unused. */
	if (!k->cma || bytes < k->cmaMin ||
	    (k->dp->cmaAuto && bytes >= k->cmaOneWayMax))
		return 0;
	x->offset = (uintptr_t)buf;
	return MLAP2P_DESCRIBE_ADDR;
}

/*
 * Cross-memory attach: copy into (@write) or out of the peer's process.
 * Its pid is the one the liveness checks watch; that it still names the
 * peer (and the same pid namespace) is checked once against the start time
 * the peer reported, and before each message's first step (@check) by a
 * poll of its pidfd: it has not exited, so its pid is not another
 * process's.  A pull skips that system call (1.2 us here, a tenth of a
 * 128 KiB exchange) because the engine proves it after the read instead
 * (lib/proto/simple.c, simple_taken).  The kernel checks ptrace access and
 * answers -EPERM when it is refused.
 */
/* Has the peer's process exited?  Its pidfd says so (0 without one). */
static int dp_peer_exited(const struct dp_link *k)
{
	struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

	return k->pidfd >= 0 && poll(&p, 1, 0) > 0;
}

static int dp_peer_copy(struct dp_link *k, uint64_t addr, void *buf,
			size_t bytes, int write, int check)
{
	const struct ncclPeerInfo *pi = &k->dp->comm->peerInfo[k->l.peer];
	struct iovec local = { .iov_base = buf, .iov_len = bytes };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr,
				.iov_len = bytes };
	ssize_t n;

	if (!k->peerChecked) {
		uint64_t t;

		k->peerChecked = mlap2p_pid_hash(pi->pid) == pi->pidHash &&
				 !mlap2p_proc_start_time(pi->pid, &t) &&
				 t == pi->startTime ? 1 : -1;
		if (k->peerChecked < 0)
			INFO(NCCL_P2P, "rank %d: pid %d is not rank %d as this process sees it; no cross-memory attach",
			     k->dp->comm->rank, pi->pid, k->l.peer);
#ifdef SYS_pidfd_open
		/* Holds on to that very process: it shows when it exits, so
		 * a recycled pid is never written to. */
		if (k->peerChecked > 0)
			k->pidfd = (int)syscall(SYS_pidfd_open, pi->pid, 0);
#endif
	}
	if (k->peerChecked < 0)
		return -EPERM;
	/* Each message's first step: is the peer still that process?  A
	 * pull is checked after instead, by the sender's answer. */
	if (check && addr != k->cmaNext && dp_peer_exited(k))
		goto died;
	k->cmaNext = check ? addr + bytes : 0;
	while (local.iov_len) {
		n = write ? process_vm_writev(pi->pid, &local, 1, &remote, 1, 0) :
			    process_vm_readv(pi->pid, &local, 1, &remote, 1, 0);
		if (n < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			if (err == ESRCH)
				goto died;
			if (err == EPERM || err == ENOSYS)
				INFO(NCCL_P2P, "rank %d: cannot %s rank %d (pid %d): %s; %s",
				     k->dp->comm->rank,
				     write ? "write into" : "read from",
				     k->l.peer, pi->pid, strerror(err),
				     write ? "two copies from now on" :
				     "the sender copies alone");
			return -err;
		}
		if (!n)
			return -EFAULT;
		local.iov_base = (char *)local.iov_base + n;
		local.iov_len -= (size_t)n;
		remote.iov_base = (char *)remote.iov_base + n;
		remote.iov_len -= (size_t)n;
	}
	return 0;
died:	/* as the liveness check says it */
	WARN("rank %d: peer rank %d (pid %d) died; a %s it failed (%zu bytes by cross-memory attach)",
	     k->dp->comm->rank, k->l.peer, pi->pid,
	     write ? "send to" : "receive from", bytes);
	return -ECONNRESET;
}

int dp_write_peer(void *arg, uint64_t addr, const void *src,
		  size_t bytes)
{
	return dp_peer_copy(arg, addr, (void *)src, bytes, 1, 1);
}

int dp_read_peer(void *arg, uint64_t addr, void *dst, size_t bytes)
{
	return dp_peer_copy(arg, addr, dst, bytes, 0, 1);
}

int dp_pull_peer(void *arg, uint64_t addr, void *dst, size_t bytes)
{
	return dp_peer_copy(arg, addr, dst, bytes, 0, 0);
}

/*
 * After a pull: has the peer's process exited since?  Its pidfd, or
 * without one the start time the liveness checks compare.
 */
int dp_still_peer(void *arg)
{
	struct dp_link *k = arg;
	int ret = k->pidfd >= 0 ? dp_peer_exited(k) :
		  mlap2p_peer_alive(k->dp->comm, k->l.peer);

	if (ret)
		WARN("rank %d: peer rank %d (pid %d) died; a receive from it failed (read by cross-memory attach, not answered)",
		     k->dp->comm->rank, k->l.peer,
		     k->dp->comm->peerInfo[k->l.peer].pid);
	return ret ? -ECONNRESET : 0;
}

static int dp_cma_may(const struct dp *dp, int peer)
{
	const struct ncclComm *comm = dp->comm;

	if (peer < 0 || peer >= comm->nRanks || peer == comm->rank)
		return 0;
	return mlap2p_same_process(comm, peer) ||
	       (!dp->noCma && comm->peerInfo[peer].hostHash ==
			      comm->peerInfo[comm->rank].hostHash);
}

int mlap2p_peer_cma(struct mlap2p_comm *api, int peer)
{
	struct dp *dp;
	int ret = dp_enter(api, &dp);

	if (ret)
		return 0;
	ret = dp_cma_may(dp, peer);
	dp_out(dp);
	return ret;
}

int mlap2p_peer_copy(struct mlap2p_comm *api, int peer, uint64_t addr,
		     void *buf, size_t bytes, int write)
{
	struct dp_link *k;
	struct dp *dp;
	int ret = dp_enter(api, &dp);

	if (ret)
		return ret;
	if (!dp_cma_may(dp, peer)) {
		ret = -EOPNOTSUPP;
	} else if (mlap2p_same_process(dp->comm, peer)) {
		void *at = (void *)(uintptr_t)addr;

		memcpy(write ? at : buf, write ? buf : at, bytes);
	} else {
		k = dp->links[2 * peer + 1] ? dp->links[2 * peer + 1] :
					      dp->links[2 * peer];
		ret = k ? dp_peer_copy(k, addr, buf, bytes, write, 1) :
			  -ENOTCONN;
	}
	dp_out(dp);
	return ret;
}

/* NET: may the proxy send this buffer in place (a registered region)? */
int dp_net_reg(void *arg, const void *buf, size_t bytes)
{
	struct dp_link *k = arg;

	return mlap2p_net_reg(&k->conn->c, buf, bytes);
}

int dp_resolve(void *arg, const struct mlap2p_xchg *x, void **ptr)
{
	struct dp_link *k = arg;
	struct ncclRtIpcMemHandle ipc;
	size_t size;
	void *base;
	int ret;

	memcpy(&ipc, x->ipc, sizeof(ipc));
	ret = mlap2p_import_region(k->dp->comm, &ipc, &base, &size);
	if (ret) {
		WARN("rank %d: cannot map the buffer rank %d offered: %s",
		     k->dp->comm->rank, k->l.peer, strerror(-ret));
		return ret;
	}
	if (x->offset > size || size - x->offset < x->bytes) {
		WARN("rank %d: rank %d offered %llu bytes at %llu of a %zu-byte region",
		     k->dp->comm->rank, k->l.peer,
		     (unsigned long long)x->bytes,
		     (unsigned long long)x->offset, size);
		return -EPROTO;
	}
	*ptr = (char *)base + x->offset;
	return 0;
}
