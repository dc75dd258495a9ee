// SPDX-License-Identifier: MIT
/*
 * The NET slot, ncclTransports[1].  In the seed this is NET_NEURON over
 * EFA with a host proxy; here it holds the place until the libfabric
 * transport lands (its own issue).  canConnect says no, so an edge P2P
 * cannot take ends in selectTransport's terminal error, exactly as the
 * seed does when NET fails too.  The other entries exist so the table is
 * complete; nothing can reach them while canConnect refuses.
 */
#include "internal.h"

static ncclResult_t netCanConnect(int *ret, struct ncclTopoSystem *topo,
				  struct ncclTopoGraph *graph,
				  struct ncclPeerInfo *info1,
				  struct ncclPeerInfo *info2)
{
	(void)topo;
	(void)graph;
	*ret = 0;
	TRACE(NCCL_INIT | NCCL_NET, "NET %d -> %d: no network plugin",
	      info1->rank, info2->rank);
	(void)info1;
	(void)info2;
	return ncclSuccess;
}

static ncclResult_t netSetup(struct ncclComm *comm, struct ncclTopoGraph *graph,
			     struct ncclPeerInfo *myInfo,
			     struct ncclPeerInfo *peerInfo,
			     struct ncclConnect *connectInfo,
			     struct ncclConnector *connector, int channelId)
{
	(void)comm;
	(void)graph;
	(void)connectInfo;
	(void)connector;
	WARN("Channel %02d : %d -> %d: the NET transport has no network plugin",
	     channelId, myInfo->rank, peerInfo->rank);
	return ncclInternalError;
}

static ncclResult_t netConnect(struct ncclComm *comm,
			       struct ncclConnect *connectInfo, int nranks,
			       int rank, struct ncclConnector *connector)
{
	(void)comm;
	(void)connectInfo;
	(void)nranks;
	(void)connector;
	WARN("rank %d: the NET transport has no network plugin", rank);
	return ncclInternalError;
}

static ncclResult_t netFree(void *resources)
{
	(void)resources;
	return ncclSuccess;
}

MLAP2P_EXPORT struct ncclTransport netTransport = {
	.name = "NET",
	.canConnect = netCanConnect,
	.send = { .setup = netSetup, .connect = netConnect, .free = netFree },
	.recv = { .setup = netSetup, .connect = netConnect, .free = netFree },
};
