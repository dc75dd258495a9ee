// SPDX-License-Identifier: MIT
/*
 * NET built without libfabric (make NET=none, or NET=auto without its
 * headers): the table entry exists, canConnect says no and logs why, so
 * selectTransport ends in the seed's terminal error.
 */
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "log.h"
#include "transport/net.h"
#include "util.h"

static ncclResult_t netCanConnect(int *ret, struct ncclTopoSystem *topo,
				  struct ncclTopoGraph *graph,
				  struct ncclPeerInfo *info1,
				  struct ncclPeerInfo *info2)
{
	(void)topo;
	(void)graph;
	(void)info1;
	(void)info2;
	*ret = 0;
	INFO(NCCL_INIT | NCCL_NET, "NET: built without libfabric headers");
	return ncclSuccess;
}

static ncclResult_t netNoSetup(struct ncclComm *comm,
			       struct ncclTopoGraph *graph,
			       struct ncclPeerInfo *myInfo,
			       struct ncclPeerInfo *peerInfo,
			       struct ncclConnect *connectInfo,
			       struct ncclConnector *connector, int channelId)
{
	(void)comm;
	(void)graph;
	(void)myInfo;
	(void)peerInfo;
	(void)connectInfo;
	(void)connector;
	(void)channelId;
	return ncclInternalError;
}

static ncclResult_t netNoConnect(struct ncclComm *comm,
				 struct ncclConnect *connectInfo, int nranks,
				 int rank, struct ncclConnector *connector)
{
	(void)comm;
	(void)connectInfo;
	(void)nranks;
	(void)rank;
	(void)connector;
	return ncclInternalError;
}

static ncclResult_t netNoFree(void *resources)
{
	(void)resources;
	return ncclSuccess;
}

static ncclResult_t netNoProxy(struct ncclProxyArgs *args)
{
	(void)args;
	return ncclInternalError;
}

static ncclResult_t netNoAllocRequest(struct ncclComm *comm, void **request)
{
	(void)comm;
	*request = NULL;
	return ncclInternalError;
}

static ncclResult_t netNoFreeRequest(struct ncclComm *comm, void *request)
{
	(void)comm;
	(void)request;
	return ncclSuccess;
}

int mlap2p_net_peer_alive(struct ncclComm *comm, int rank)
{
	(void)comm;
	(void)rank;
	return 0;
}

uint64_t mlap2p_net_provider_hash(void)
{
	return 0;
}

int mlap2p_net_progress(struct ncclConnector *c)
{
	(void)c;
	return 0;
}

int mlap2p_net_reg(struct ncclConnector *c, const void *buf, size_t bytes)
{
	(void)c;
	(void)buf;
	(void)bytes;
	return 0;
}

int mlap2p_net_land(struct ncclConnector *c, char *buf, uint64_t first,
		    uint64_t steps, size_t perStep, size_t bytes)
{
	(void)c;
	(void)buf;
	(void)first;
	(void)steps;
	(void)perStep;
	(void)bytes;
	return 0;
}

int mlap2p_net_unland(struct ncclConnector *c, long timeoutMs)
{
	(void)c;
	(void)timeoutMs;
	return 1;
}

#define NET_NO_COMM {							\
	.setup = netNoSetup, .connect = netNoConnect, .free = netNoFree,	\
	.proxy = netNoProxy, .allocRequest = netNoAllocRequest,		\
	.freeRequest = netNoFreeRequest }

MLAP2P_EXPORT struct ncclTransport netTransport = {
	.name = "NET",
	.canConnect = netCanConnect,
	.send = NET_NO_COMM,
	.recv = NET_NO_COMM,
};

int mlap2p_net_reg_cached(struct ncclConnector *c, const void *buf,
			  size_t bytes)
{
	(void)c;
	(void)buf;
	(void)bytes;
	return -1;
}
