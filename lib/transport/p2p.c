// SPDX-License-Identifier: MIT
/*
 * The P2P transport (ncclTransports[0]), after the seed's and NCCL 2.7's
 * p2p.cc.  Proxy-free: once connected, the FIFO is posted and polled
 * through the pointers wired here, with no host work.
 *
 * Each side allocates its own header page and buffers (rounded up to
 * CUDA_IPC_MIN, 2 MiB) on its own device, and sends the peer an 80-byte
 * p2pConnectInfo packed into the 128-byte ncclConnect:
 *
 *   same process (pidHash)        P2P/direct pointer: the raw pointer
 *   another process               P2P/IPC: the runtime's 64-byte handle
 *   relay (an intermediate rank)  P2P/indirect: the memory is allocated by
 *                                 the intermediate rank's bootstrap service
 *                                 on its own device; info.rank names it
 *
 * p2pMap resolves a p2pConnectInfo against the rank that holds the memory:
 * the pointer itself within one process, else an IPC open.  The remaining
 * 48 bytes of the ncclConnect carry struct p2pConnectExt: a magic, the
 * sender's buffer sizes and read flag, so both ends agree on the layout
 * even if their environments differ.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "bootstrap.h"
#include "log.h"
#include "rt/rt.h"
#include "topo.h"
#include "transport.h"
#include "util.h"

#define P2P_EXT_MAGIC	0x5843504dU	/* "MPCX" */
#define P2P_EXT_VERSION	1

struct p2pConnectExt {
	uint32_t magic;
	uint32_t version;
	int32_t buffSizes[NCCL_NUM_PROTOCOLS];
	int32_t read;
	int32_t mode;
	int32_t pad;
	uint64_t memSize;
};

struct p2pConnect {
	struct p2pConnectInfo info;
	struct p2pConnectExt ext;
};
_Static_assert(sizeof(struct p2pConnect) <= sizeof(struct ncclConnect),
	       "p2p connect blob is too big");
_Static_assert(offsetof(struct p2pConnect, ext) == 80, "ext after the 80 bytes");

static const char *p2pReadStr(int read)
{
	return read ? "/read" : "";
}

/* Determine if we can communicate with the peer through p2p. */
static ncclResult_t p2pCanConnect(int *ret, struct ncclTopoSystem *topo,
				  struct ncclTopoGraph *graph,
				  struct ncclPeerInfo *info1,
				  struct ncclPeerInfo *info2)
{
	struct ncclComm *comm = topo->comm;
	int p2p, read, intermediateRank, canAccess = 0, pds, sameCC;

	(void)graph;
	*ret = 0;
	if (comm->params.p2pDisable)
		return ncclSuccess;
	NCCLCHECK(ncclTopoCheckP2p(topo, info1, info2, &p2p, &read,
				   &intermediateRank));
	if (!p2p)
		return ncclSuccess;
	/*
	 * The pod refinements, where the seed asks them: one node's pair
	 * takes its D2D links or a relay; a pair on two nodes needs a pod
	 * path, the switch (pds) or a link of the point-to-point pod (the
	 * POD edge the runtime answered).
	 */
	NCCLCHECK(ncclTopoCheckPdsP2p(topo, info1, info2, &pds));
	NCCLCHECK(ncclTopoCheckSameIntraCC(topo, info1, info2, &sameCC));
	if (!sameCC && !pds &&
	    topo->edge[info1->rank * topo->nRanks + info2->rank] !=
	    MLAP2P_EDGE_POD) {
		TRACE(NCCL_INIT | NCCL_P2P, "P2P %d -> %d: different nodes and no pod path",
		      info1->rank, info2->rank);
		return ncclSuccess;
	}
	/* The runtime has the last word: the module's CAN_ACCESS_PEER. */
	NCCLCHECK(ncclRtDeviceCanAccessPeer(comm->rt, &canAccess,
					    info1->cudaDev, info2->cudaDev));
	if (!canAccess) {
		INFO(NCCL_INIT | NCCL_P2P, "Could not enable P2P between dev %d(=%lx) and dev %d(=%lx)",
		     info1->cudaDev, (long)info1->busId, info2->cudaDev,
		     (long)info2->busId);
		return ncclSuccess;
	}
	*ret = 1;
	return ncclSuccess;
}

/*
 * Resolve the memory described by @p2pInfo, which lives with the rank
 * @peerInfo (the peer, the intermediate, or ourselves).  Another rank's
 * raw pointer is pinned for @conn, so that rank freeing or aborting first
 * cannot pull the pages from under us (released at free).
 */
static ncclResult_t p2pMap(struct ncclComm *comm, struct mlap2p_conn *conn,
			   struct ncclPeerInfo *myInfo,
			   struct ncclPeerInfo *peerInfo,
			   struct p2pConnectInfo *p2pInfo, void **devMem,
			   void **ipcPtr)
{
	if (myInfo->pidHash == peerInfo->pidHash) {
		if (peerInfo->cudaDev != myInfo->cudaDev &&
		    ncclRtDeviceEnablePeerAccess(comm->rt, peerInfo->cudaDev,
						 0) != ncclSuccess) {
			WARN("failed to peer with device %d(=%lx): %s",
			     peerInfo->cudaDev, (long)peerInfo->busId,
			     mlap2p_strerror(mlap2p_errno_take(ncclInternalError)));
			return ncclInternalError;
		}
		*devMem = p2pInfo->directPtr;
		*ipcPtr = NULL;
		if (peerInfo->rank != myInfo->rank) {
			int slot = conn->pins[0] ? 1 : 0;

			if (conn->pins[slot] ||
			    mlap2p_rt_pin(p2pInfo->directPtr, &conn->pins[slot])) {
				WARN("rank %d: rank %d's memory %p is not mapped in this process",
				     myInfo->rank, peerInfo->rank,
				     p2pInfo->directPtr);
				return ncclInternalError;
			}
		}
		return ncclSuccess;
	}
	if (ncclRtIpcOpenMemHandle(comm->rt, devMem,
				   (struct ncclRtIpcMemHandle *)p2pInfo->devIpc,
				   1) != ncclSuccess) {
		WARN("rank %d failed to open the IPC handle of rank %d's memory",
		     myInfo->rank, peerInfo->rank);
		return ncclUnhandledCudaError;
	}
	*ipcPtr = *devMem;
	return ncclSuccess;
}

/* Allocation and blob common to send and recv setup. */
static ncclResult_t p2pSetupMem(struct ncclComm *comm,
				struct ncclPeerInfo *myInfo,
				struct ncclPeerInfo *peerInfo,
				struct ncclConnector *connector, size_t size,
				int useRead, int intermediateRank,
				struct p2pConnect *blob)
{
	struct mlap2p_conn *conn = container_of(connector, struct mlap2p_conn, c);
	struct p2pResources *resources;
	struct p2pConnectInfo *info = &blob->info;
	int p;

	resources = calloc(1, sizeof(*resources));
	if (!resources)
		return ncclSystemError;
	connector->transportResources = resources;
	resources->remoteId = -1;
	resources->bootstrap = comm->bootstrap;

	memset(blob, 0, sizeof(*blob));
	info->read = useRead;
	if (intermediateRank == -1) {
		NCCLCHECK(ncclRtCalloc(comm->rt, &info->directPtr, size));
		/* devMem is set below by p2pMap; free needs it on failure. */
		resources->devMem = info->directPtr;
		info->rank = myInfo->rank;
		if (myInfo->pidHash == peerInfo->pidHash) {
			if (!useRead)
				connector->conn.direct |= NCCL_DIRECT_GPU;
			conn->mode = MLAP2P_CONN_DIRECT;
		} else {
			NCCLCHECK(ncclRtIpcGetMemHandle(comm->rt,
				(struct ncclRtIpcMemHandle *)info->devIpc,
				info->directPtr));
			conn->mode = MLAP2P_CONN_IPC;
		}
	} else {
		NCCLCHECK(bootstrapRemAlloc(size, intermediateRank,
					    comm->bootstrap,
					    &resources->remoteId,
					    (struct ncclRtIpcMemHandle *)info->devIpc,
					    &info->directPtr));
		info->rank = intermediateRank;
		conn->mode = MLAP2P_CONN_INDIRECT;
	}
	resources->memRank = info->rank;
	conn->memRank = info->rank;
	conn->read = useRead;
	NCCLCHECK(p2pMap(comm, conn, myInfo, comm->peerInfo + info->rank, info,
			 &resources->devMem, &resources->ipcPtr));

	blob->ext.magic = P2P_EXT_MAGIC;
	blob->ext.version = P2P_EXT_VERSION;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		blob->ext.buffSizes[p] = comm->buffSizes[p];
	blob->ext.read = useRead;
	blob->ext.mode = (int32_t)conn->mode;
	blob->ext.memSize = size;
	return ncclSuccess;
}

/* Send: create and return connect structures for this peer to connect to me. */
static ncclResult_t p2pSendSetup(struct ncclComm *comm,
				 struct ncclTopoGraph *graph,
				 struct ncclPeerInfo *myInfo,
				 struct ncclPeerInfo *peerInfo,
				 struct ncclConnect *connectInfo,
				 struct ncclConnector *send, int channelId)
{
	int p2p, useRead, intermediateRank;
	struct p2pConnect blob;
	size_t sendSize;

	(void)graph;
	NCCLCHECK(ncclTopoCheckP2p(comm->topo, myInfo, peerInfo, &p2p, &useRead,
				   &intermediateRank));
	sendSize = offsetof(struct ncclSendMem, buff);
	/* For P2P read the SIMPLE buffer is tagged on behind ncclSendMem. */
	if (useRead)
		sendSize += (size_t)comm->buffSizes[NCCL_PROTO_SIMPLE];
	sendSize = ALIGN_UP(sendSize, CUDA_IPC_MIN);

	NCCLCHECK(p2pSetupMem(comm, myInfo, peerInfo, send, sendSize, useRead,
			      intermediateRank, &blob));
	if (intermediateRank == -1 && myInfo->pidHash == peerInfo->pidHash)
		INFO(NCCL_INIT | NCCL_P2P, "Channel %02d : %d[%d] -> %d[%d] via P2P/direct pointer%s",
		     channelId, myInfo->rank, myInfo->cudaDev, peerInfo->rank,
		     peerInfo->cudaDev, p2pReadStr(useRead));
	else if (intermediateRank == -1)
		INFO(NCCL_INIT | NCCL_P2P, "Channel %02d : %d[%d] -> %d[%d] via P2P/IPC%s",
		     channelId, myInfo->rank, myInfo->cudaDev, peerInfo->rank,
		     peerInfo->cudaDev, p2pReadStr(useRead));
	else
		/* The seed's text: the intermediate's busId, in hex. */
		INFO(NCCL_INIT | NCCL_P2P, "Channel %02d : %d[%d] -> %d[%d] via P2P/indirect/%d[%lx]%s",
		     channelId, myInfo->rank, myInfo->cudaDev, peerInfo->rank,
		     peerInfo->cudaDev, intermediateRank,
		     (long)comm->peerInfo[intermediateRank].busId,
		     p2pReadStr(useRead));
	memcpy(connectInfo, &blob, sizeof(blob));
	return ncclSuccess;
}

/* Recv: create and return connect structures for this peer to connect to me. */
static ncclResult_t p2pRecvSetup(struct ncclComm *comm,
				 struct ncclTopoGraph *graph,
				 struct ncclPeerInfo *myInfo,
				 struct ncclPeerInfo *peerInfo,
				 struct ncclConnect *connectInfo,
				 struct ncclConnector *recv, int channelId)
{
	int p2p, useRead, intermediateRank, p;
	struct p2pConnect blob;
	size_t recvSize;

	(void)graph;
	NCCLCHECK(ncclTopoCheckP2p(comm->topo, myInfo, peerInfo, &p2p, &useRead,
				   &intermediateRank));
	recvSize = offsetof(struct ncclRecvMem, buff);
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		if (!(useRead && p == NCCL_PROTO_SIMPLE))
			recvSize += (size_t)comm->buffSizes[p];
	recvSize = ALIGN_UP(recvSize, CUDA_IPC_MIN);

	NCCLCHECK(p2pSetupMem(comm, myInfo, peerInfo, recv, recvSize, useRead,
			      intermediateRank, &blob));
	TRACE(NCCL_INIT | NCCL_P2P, "Channel %02d : %d[%d] <- %d[%d] via %s",
	      channelId, myInfo->rank, myInfo->cudaDev, peerInfo->rank,
	      peerInfo->cudaDev,
	      mlap2p_conn_mode_name(container_of(recv, struct mlap2p_conn,
						 c)->mode));
	(void)channelId;
	memcpy(connectInfo, &blob, sizeof(blob));
	return ncclSuccess;
}

/*
 * Check the peer's blob and agree on the sizes: LL and LL128 (and SIMPLE
 * in write mode) live with the receiver, so the receiver's sizes count;
 * in read mode SIMPLE lives with the sender.
 */
static ncclResult_t p2pAgree(struct ncclComm *comm, struct mlap2p_conn *conn,
			     const struct p2pConnect *peer, int rank)
{
	int p, own;

	if (peer->ext.magic != P2P_EXT_MAGIC ||
	    peer->ext.version != P2P_EXT_VERSION) {
		WARN("rank %d: connect blob from rank %d is not from this library version",
		     rank, conn->peer);
		mlap2p_errno_stash(-EPROTO);
		return ncclInvalidUsage;
	}
	if (peer->info.read != conn->read) {
		WARN("ranks %d and %d disagree on NCCL_P2P_READ_ENABLE (%d vs %d)",
		     rank, conn->peer, conn->read, peer->info.read);
		mlap2p_errno_stash(-EINVAL);
		return ncclInvalidUsage;
	}
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		own = conn->read && p == NCCL_PROTO_SIMPLE ? conn->send :
							       !conn->send;
		conn->buffSizes[p] = own ? comm->buffSizes[p] :
					   peer->ext.buffSizes[p];
	}
	conn->peerMemRank = peer->info.rank;
	return ncclSuccess;
}

/* Connect/Send to this peer. */
static ncclResult_t p2pSendConnect(struct ncclComm *comm,
				   struct ncclConnect *connectInfo, int nranks,
				   int rank, struct ncclConnector *send)
{
	struct mlap2p_conn *conn = container_of(send, struct mlap2p_conn, c);
	struct p2pResources *resources = send->transportResources;
	struct p2pConnect *blob = (struct p2pConnect *)connectInfo;
	struct p2pConnectInfo *info = &blob->info;
	struct ncclSendMem *local;
	struct ncclRecvMem *remDevMem;
	size_t offset = 0;
	int p;

	(void)nranks;
	if (send->connected) {
		WARN("rank %d: send connector to rank %d is already connected",
		     rank, conn->peer);
		return ncclInternalError;
	}
	NCCLCHECK(p2pAgree(comm, conn, blob, rank));
	NCCLCHECK(p2pMap(comm, conn, comm->peerInfo + rank,
			 comm->peerInfo + info->rank, info,
			 (void **)&remDevMem, &resources->ipcPtr));
	local = resources->devMem;

	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		if (info->read && p == NCCL_PROTO_SIMPLE) {
			/* For P2P read the SIMPLE buffer is local (ncclSendMem). */
			send->conn.buffs[p] = local->buff;
		} else {
			send->conn.buffs[p] = remDevMem->buff + offset;
			offset += (size_t)conn->buffSizes[p];
		}
	}
	send->conn.tail = &remDevMem->tail;
	send->conn.head = &local->head;
	send->conn.ptrExchange = &local->ptrExchange;
	send->conn.sizesFifo = remDevMem->sizesFifo;
	send->conn.ptrsFifo = remDevMem->ptrsFifo;
	send->connected = 1;
	return ncclSuccess;
}

/* Connect/Recv from this peer. */
static ncclResult_t p2pRecvConnect(struct ncclComm *comm,
				   struct ncclConnect *connectInfo, int nranks,
				   int rank, struct ncclConnector *recv)
{
	struct mlap2p_conn *conn = container_of(recv, struct mlap2p_conn, c);
	struct p2pResources *resources = recv->transportResources;
	struct p2pConnect *blob = (struct p2pConnect *)connectInfo;
	struct p2pConnectInfo *info = &blob->info;
	struct ncclRecvMem *local;
	struct ncclSendMem *remDevMem;
	size_t offset = 0;
	int p;

	(void)nranks;
	if (recv->connected) {
		WARN("rank %d: recv connector from rank %d is already connected",
		     rank, conn->peer);
		return ncclInternalError;
	}
	NCCLCHECK(p2pAgree(comm, conn, blob, rank));
	NCCLCHECK(p2pMap(comm, conn, comm->peerInfo + rank,
			 comm->peerInfo + info->rank, info,
			 (void **)&remDevMem, &resources->ipcPtr));
	local = resources->devMem;

	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		if (info->read && p == NCCL_PROTO_SIMPLE) {
			/* For P2P read the SIMPLE buffer is remote (ncclSendMem). */
			recv->conn.buffs[p] = remDevMem->buff;
		} else {
			recv->conn.buffs[p] = local->buff + offset;
			offset += (size_t)conn->buffSizes[p];
		}
	}
	recv->conn.tail = &local->tail;
	recv->conn.head = &remDevMem->head;
	recv->conn.ptrExchange = &remDevMem->ptrExchange;
	recv->conn.sizesFifo = local->sizesFifo;
	recv->conn.ptrsFifo = local->ptrsFifo;
	recv->connected = 1;
	return ncclSuccess;
}

/*
 * Free one side: close the peer's imported memory, then our own FIFO --
 * back to the intermediate's service for a relay (the -1 sentinel tells
 * which), else to the runtime.
 */
static ncclResult_t p2pFree(void *res)
{
	struct p2pResources *resources = res;
	struct ncclRtPointerAttributes attr;
	ncclResult_t ret = ncclSuccess;
	struct ncclComm *comm;
	struct mlap2p_rt *rt;

	if (!resources)
		return ncclSuccess;
	comm = mlap2p_bootstrap_comm(resources->bootstrap);
	rt = comm->rt;
	if (resources->ipcPtr &&
	    ncclRtIpcCloseMemHandle(rt, resources->ipcPtr) != ncclSuccess)
		ret = ncclUnhandledCudaError;
	if (resources->remoteId != -1) {
		/* Relay memory: a mapping of ours if the server is elsewhere. */
		if (resources->devMem &&
		    rt->ops->pointerGetAttributes(rt, resources->devMem,
						  &attr) == 0 &&
		    !attr.owned &&
		    ncclRtIpcCloseMemHandle(rt, resources->devMem) != ncclSuccess)
			ret = ncclUnhandledCudaError;
		if (!mlap2p_comm_aborted(comm) &&
		    bootstrapRemFree(resources->remoteId, resources->memRank,
				     resources->bootstrap) != ncclSuccess)
			ret = ncclSystemError;
		resources->devMem = NULL;
	}
	if (resources->devMem &&
	    ncclRtFree(rt, resources->devMem) != ncclSuccess)
		ret = ncclUnhandledCudaError;
	free(resources);
	return ret;
}

static ncclResult_t p2pSendFree(void *resources)
{
	return p2pFree(resources);
}

static ncclResult_t p2pRecvFree(void *resources)
{
	return p2pFree(resources);
}

MLAP2P_EXPORT struct ncclTransport p2pTransport = {
	.name = "P2P",
	.canConnect = p2pCanConnect,
	.send = {
		.setup = p2pSendSetup,
		.connect = p2pSendConnect,
		.free = p2pSendFree,
		.proxy = NULL,
		.allocRequest = NULL,
		.freeRequest = NULL,
	},
	.recv = {
		.setup = p2pRecvSetup,
		.connect = p2pRecvConnect,
		.free = p2pRecvFree,
		.proxy = NULL,
		.allocRequest = NULL,
		.freeRequest = NULL,
	},
};
