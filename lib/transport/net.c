// SPDX-License-Identifier: MIT
/*
 * The NET transport, ncclTransports[1], on libfabric.
 *
 * In the seed the second table entry is NET_NEURON over EFA: the one
 * transport with a host proxy, whose proxy/allocRequest/freeRequest slots
 * are populated where P2P's are NULL.  Here it runs on libfabric, the
 * engine EFA itself sits under, with whatever provider the host has
 * (`tcp` by default, i.e. the RDM endpoint "tcp;ofi_rxm"; MLAP2P_NET_PROVIDER
 * or FI_PROVIDER choose another).  libfabric is loaded with dlopen on first
 * use, as NCCL loads its net plugins: without it NET simply cannot
 * connect, and selectTransport ends in the seed's terminal error.
 *
 * Shape.  One RDM endpoint per communicator, bound to the address of the
 * bootstrap interface (NCCL_SOCKET_IFNAME).  canConnect: both peers share
 * a provider (ncclPeerInfo.netHash, from mlap2p_net_provider_hash() at
 * init); setup: a netConnectInfo in the 128-byte ncclConnect carrying the
 * endpoint's address, the provider's name and the receiver's FIFO sizes;
 * connect: the two provider names must match (checked again), the peer's
 * address goes into the AV, and the connection's memory is allocated and
 * registered (fi_mr_reg).
 *
 * Both sides of a NET connection own a complete local FIFO, wired into the
 * connector exactly like a P2P one (buffs[], tail, head, sizesFifo), so the
 * data plane posts and polls it with the same primitives:
 *
 *   send side: the data plane writes steps into the local FIFO.  The proxy
 *     sees LL/LL128 steps by their line flags and the size the sender
 *     announces in sizesFifo before its lines (NCCL's connFifo contract),
 *     SIMPLE steps by tail (size in sizesFifo), sends each step as one
 *     tagged message (SIMPLE straight from its slot; LL and LL128 as their
 *     payload, gathered out of the lines), and returns the slot through
 *     head once the send completed.  A SIMPLE step whose ptrsFifo[slot] is
 *     set goes from that address instead (lib/proto.h, MLAP2P_LINK_NETPTR):
 *     a send buffer from mlap2p_mem_alloc(), whose region the data plane
 *     had registered (mlap2p_net_reg(), a per-communicator cache of
 *     fi_mr_reg() keyed by region base, whose entries never overlap: an
 *     old one a new region overlaps, or whose region was freed, is closed
 *     when a region is registered), so the data plane copies nothing; if
 *     the provider refuses the registration (or MLAP2P_NET_REG=0) that
 *     region's sends copy through the slots.
 *   receive side: the proxy posts one tagged receive per free slot (head
 *     says which) into the SIMPLE slot, with a small overflow iov for the
 *     largest LL128 step; a SIMPLE step is delivered by writing sizesFifo
 *     and releasing tail, an LL or LL128 step by writing its lines with the
 *     step's flag (LL's cleaning and wrap rules included), then tail.
 *
 * Tags: 2 bits type, 2 bits protocol, 5 bits channel, 21 bits source rank,
 * 32 bits step; a receive ignores only the protocol bits.
 *
 * The proxy thread (one per communicator, started by the first connect)
 * reads the completion queue and calls each connection's proxy slot
 * (netSendProxy/netRecvProxy) through the vtable; requests come from
 * allocRequest/freeRequest, a per-communicator free list.  It also sends
 * every NET peer a heartbeat several times per MLAP2P_PEER_TIMEOUT and
 * declares a peer unreachable (-EHOSTDOWN) when nothing at all arrived from
 * it for a whole timeout, or dead (-ECONNRESET) when the fabric reports an
 * error; mlap2p_peer_alive() asks mlap2p_net_peer_alive(), so data-plane
 * waits fail naming the peer instead of hanging on a cut link.
 *
 * A rank that waits on a NET connection runs the proxy pass itself
 * (mlap2p_net_progress(), from the data plane's wait loop) rather than
 * hand every step to the proxy thread: on a host with fewer cores than
 * ranks plus proxies, that hand-over is a context switch per step.  The
 * proxy thread still does all the work nobody waits for.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/net_int.h"
#include "param.h"
#include "proto/proto.h"
#include "rt/rt.h"
#include "socket.h"
#include "util.h"

/* Registry: communicator -> NET state. */
static pthread_mutex_t net_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_comm *net_registry;
/* The state the calling proxy thread serves (allocRequest's fast path). */
__thread struct net_comm *net_tls;

struct net_comm *net_comm_find(struct ncclComm *comm)
{
	struct net_comm *nc;

	if (net_tls && net_tls->comm == comm)
		return net_tls;
	pthread_mutex_lock(&net_registry_lock);
	for (nc = net_registry; nc && nc->comm != comm; nc = nc->next)
		;
	pthread_mutex_unlock(&net_registry_lock);
	return nc;
}

void net_lock(struct net_comm *nc)
{
	__atomic_add_fetch(&nc->want, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&nc->lock);
	__atomic_sub_fetch(&nc->want, 1, __ATOMIC_ACQ_REL);
}

void net_unlock(struct net_comm *nc)
{
	pthread_mutex_unlock(&nc->lock);
}

void net_close_fid(struct fid *fid)
{
	if (fid)
		fi_close(fid);
}

static void net_comm_release(struct net_comm *nc)
{
	struct ncclProxyArgs *a;
	struct net_reg *g;
	struct net_req *r;

	if (nc->threadStarted) {
		__atomic_store_n(&nc->stop, 1, __ATOMIC_RELEASE);
		pthread_join(nc->thread, NULL);
	}
	/* The endpoint first: nothing may touch the FIFOs after this. */
	net_close_fid(nc->ep ? &nc->ep->fid : NULL);
	net_close_fid(nc->av ? &nc->av->fid : NULL);
	net_close_fid(nc->cq ? &nc->cq->fid : NULL);
	while ((g = nc->regs)) {
		nc->regs = g->next;
		net_close_fid(g->mr ? &g->mr->fid : NULL);
		free(g);
	}
	while ((a = nc->all)) {
		nc->all = a->allNext;
		net_close_fid(a->mr ? &a->mr->fid : NULL);
		if (a->mem)
			ncclRtFree(nc->comm->rt, a->mem);
		free(a);
	}
	net_close_fid(nc->domain ? &nc->domain->fid : NULL);
	net_close_fid(nc->fabric ? &nc->fabric->fid : NULL);
	if (nc->info)
		net_ofi.freeinfo(nc->info);
	while ((r = nc->allReqs)) {
		nc->allReqs = r->allNext;
		free(r);
	}
	free(nc->peers);
	pthread_mutex_destroy(&nc->lock);
	free(nc);
}

/* Open the fabric, domain, CQ, AV and endpoint of @nc. */
static int net_comm_open(struct net_comm *nc)
{
	struct fi_cq_attr cqAttr = { .format = FI_CQ_FORMAT_TAGGED,
				     .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr avAttr = { .type = FI_AV_TABLE };
	struct ncclComm *comm = nc->comm;
	char node[INET6_ADDRSTRLEN], why[384] = "";
	struct fi_info *info;
	size_t len;
	int ret;

	ret = net_local_node(node, sizeof(node));
	if (ret)
		return ret;
	ret = net_getinfo(node, &nc->info, why, sizeof(why));
	if (ret) {
		WARN("NET: rank %d: %s", comm->rank, why);
		return ret;
	}
	info = nc->info;
	snprintf(nc->prov, sizeof(nc->prov), "%s", info->fabric_attr->prov_name);
	snprintf(nc->dev, sizeof(nc->dev), "%s",
		 info->domain_attr->name ? info->domain_attr->name : "?");
	nc->mrLocal = !!(info->domain_attr->mr_mode & FI_MR_LOCAL);
	nc->provKey = !!(info->domain_attr->mr_mode & FI_MR_PROV_KEY);
	nc->iovLimit = info->rx_attr->iov_limit;
	nc->rxSize = info->rx_attr->size;
	cqAttr.size = info->tx_attr->size + info->rx_attr->size;

	ret = net_errno(net_ofi.fabric(info->fabric_attr, &nc->fabric, NULL));
	if (!ret)
		ret = net_errno(fi_domain(nc->fabric, info, &nc->domain, NULL));
	if (!ret)
		ret = net_errno(fi_cq_open(nc->domain, &cqAttr, &nc->cq, NULL));
	if (!ret)
		ret = net_errno(fi_av_open(nc->domain, &avAttr, &nc->av, NULL));
	if (!ret)
		ret = net_errno(fi_endpoint(nc->domain, info, &nc->ep, NULL));
	if (!ret)
		ret = net_errno(fi_ep_bind(nc->ep, &nc->cq->fid,
					   FI_TRANSMIT | FI_RECV));
	if (!ret)
		ret = net_errno(fi_ep_bind(nc->ep, &nc->av->fid, 0));
	if (!ret)
		ret = net_errno(fi_enable(nc->ep));
	len = sizeof(nc->addr);
	if (!ret)
		ret = net_errno(fi_getname(&nc->ep->fid, nc->addr, &len));
	if (ret) {
		WARN("NET: rank %d: cannot open a %s endpoint on %s (%s): %s",
		     comm->rank, nc->prov, node, nc->dev, net_strerror(ret));
		return ret;
	}
	nc->addrLen = len;
	INFO(NCCL_INIT | NCCL_NET, "NET/Libfabric: rank %d using provider %s, domain %s, address %s",
	     comm->rank, nc->prov, nc->dev, node);
	return 0;
}

/* The NET state of @comm, created on first use; a reference for the caller. */
static int net_comm_get(struct ncclComm *comm, struct net_comm **out)
{
	struct net_comm *nc;
	long timeoutMs, regOn;
	int ret, r;

	pthread_mutex_lock(&net_registry_lock);
	for (nc = net_registry; nc && nc->comm != comm; nc = nc->next)
		;
	if (nc) {
		nc->refs++;
		pthread_mutex_unlock(&net_registry_lock);
		*out = nc;
		return 0;
	}
	pthread_mutex_unlock(&net_registry_lock);

	if (comm->nRanks > NET_MAX_RANKS)
		return -E2BIG;
	ret = mlap2p_env_timeout("MLAP2P_PEER_TIMEOUT", NET_DEFAULT_TIMEOUT_MS,
				 &timeoutMs);
	if (!ret)
		ret = mlap2p_env_int("MLAP2P_NET_REG", 0, 1, 1, &regOn);
	if (ret)
		return ret;
	nc = calloc(1, sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	nc->comm = comm;
	nc->regOn = (int)regOn;
	nc->refs = 1;
	pthread_mutex_init(&nc->lock, NULL);
	nc->timeoutMs = timeoutMs;
	nc->hbEveryMs = timeoutMs / 5;
	if (nc->hbEveryMs < 20)
		nc->hbEveryMs = 20;
	if (nc->hbEveryMs > 1000)
		nc->hbEveryMs = 1000;
	nc->peers = calloc((size_t)comm->nRanks, sizeof(*nc->peers));
	if (!nc->peers) {
		net_comm_release(nc);
		return -ENOMEM;
	}
	for (r = 0; r < comm->nRanks; r++)
		nc->peers[r].addr = FI_ADDR_NOTAVAIL;
	ret = net_comm_open(nc);
	if (ret) {
		net_comm_release(nc);
		return ret;
	}
	pthread_mutex_lock(&net_registry_lock);
	nc->next = net_registry;
	net_registry = nc;
	pthread_mutex_unlock(&net_registry_lock);
	*out = nc;
	return 0;
}

static void net_comm_put(struct net_comm *nc)
{
	struct net_comm **p;
	int last;

	pthread_mutex_lock(&net_registry_lock);
	last = --nc->refs == 0;
	if (last) {
		for (p = &net_registry; *p && *p != nc; p = &(*p)->next)
			;
		if (*p)
			*p = nc->next;
	}
	pthread_mutex_unlock(&net_registry_lock);
	if (last)
		net_comm_release(nc);
}

/* Mark the path to @peer failed (first error wins); @nc->lock held. */
void net_peer_fail(struct net_comm *nc, int peer, int err,
		   const char *fmt, ...)
{
	struct net_peer *p;
	char msg[256];
	va_list ap;

	if (peer < 0 || peer >= nc->comm->nRanks)
		return;
	p = &nc->peers[peer];
	if (p->err)
		return;
	__atomic_store_n(&p->err, err, __ATOMIC_RELEASE);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	WARN("NET: rank %d: the network path to rank %d (%s) failed: %s",
	     nc->comm->rank, peer, p->name[0] ? p->name : "?", msg);
}

/* ------------------------------------------------------------------ */
/* The transport                                                      */
/* ------------------------------------------------------------------ */

static ncclResult_t netCanConnect(int *ret, struct ncclTopoSystem *topo,
				  struct ncclTopoGraph *graph,
				  struct ncclPeerInfo *info1,
				  struct ncclPeerInfo *info2)
{
	char prov[NET_PROV_MAX];

	(void)graph;
	*ret = 0;
	if (net_disabled()) {
		INFO(NCCL_INIT | NCCL_NET, "NET %d -> %d: disabled by MLAP2P_NET_DISABLE",
		     info1->rank, info2->rank);
		return ncclSuccess;
	}
	if (topo->nRanks > NET_MAX_RANKS)
		return ncclSuccess;
	if (net_probe_local(prov, sizeof(prov)))
		return ncclSuccess;
	/* Both ends must share the provider (connect checks the names). */
	if (!info2->netHash) {
		INFO(NCCL_INIT | NCCL_NET, "NET %d -> %d: rank %d has no libfabric provider (or NET disabled)",
		     info1->rank, info2->rank, info2->rank);
		return ncclSuccess;
	}
	if (info2->netHash != info1->netHash) {
		WARN("NET: ranks %d and %d share no libfabric provider: rank %d uses \"%s\", rank %d another (set MLAP2P_NET_PROVIDER or FI_PROVIDER alike everywhere)",
		     info1->rank, info2->rank, info1->rank, prov, info2->rank);
		return ncclSuccess;
	}
	*ret = 1;
	return ncclSuccess;
}

uint64_t mlap2p_net_provider_hash(void)
{
	const char *hint, *fi;
	char key[256];

	if (net_disabled())
		return 0;
	/*
	 * What this rank asks libfabric for, not what it finds: probing
	 * (dlopen, fi_getinfo) here would cost every init, NET or not, and
	 * run before the rank reaches the bootstrap root.  canConnect probes
	 * its own side; connect compares the names the two sides found.
	 */
	hint = net_provider_hint();
	fi = getenv("FI_PROVIDER");
	snprintf(key, sizeof(key), "%s|%s", hint ? hint : "", fi ? fi : "");
	return mlap2p_hash(key, strlen(key), NET_MAGIC) | 1;
}

static void net_fill_blob(struct net_comm *nc, struct ncclComm *comm,
			  int channelId, struct netConnectInfo *info)
{
	int p;

	memset(info, 0, sizeof(*info));
	info->magic = NET_MAGIC;
	info->version = NET_VERSION;
	info->addrLen = (uint16_t)nc->addrLen;
	info->rank = comm->rank;
	info->channel = channelId;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		info->buffSizes[p] = comm->buffSizes[p];
	snprintf(info->prov, sizeof(info->prov), "%s", nc->prov);
	memcpy(info->addr, nc->addr, nc->addrLen);
}

static ncclResult_t netSetup(struct ncclComm *comm, struct ncclPeerInfo *myInfo,
			     struct ncclPeerInfo *peerInfo,
			     struct ncclConnect *connectInfo,
			     struct ncclConnector *connector, int channelId,
			     int send)
{
	struct mlap2p_conn *conn = container_of(connector, struct mlap2p_conn, c);
	struct netConnectInfo info;
	struct ncclProxyArgs *a;
	int ret;

	if (comm->nRanks > NET_MAX_RANKS || channelId < 0 ||
	    channelId >= MAXCHANNELS)
		return ncclInvalidArgument;
	a = calloc(1, sizeof(*a));
	if (!a) {
		mlap2p_errno_stash(-ENOMEM);
		return ncclSystemError;
	}
	a->connector = connector;
	a->conn = conn;
	a->send = send;
	a->peer = peerInfo->rank;
	a->channel = channelId;
	connector->transportResources = a;
	connector->proxyAppend = a;
	ret = net_comm_get(comm, &a->nc);
	if (ret) {
		mlap2p_errno_stash(ret);
		return ncclSystemError;
	}
	net_fill_blob(a->nc, comm, channelId, &info);
	memcpy(connectInfo, &info, sizeof(info));
	INFO(NCCL_INIT | NCCL_NET, "Channel %02d : %d[%d] -> %d[%d] [%s] via NET/Libfabric/%s/%s",
	     channelId, send ? myInfo->rank : peerInfo->rank,
	     send ? myInfo->cudaDev : peerInfo->cudaDev,
	     send ? peerInfo->rank : myInfo->rank,
	     send ? peerInfo->cudaDev : myInfo->cudaDev,
	     send ? "send" : "receive", a->nc->prov, a->nc->dev);
	return ncclSuccess;
}

static ncclResult_t netSendSetup(struct ncclComm *comm,
				 struct ncclTopoGraph *graph,
				 struct ncclPeerInfo *myInfo,
				 struct ncclPeerInfo *peerInfo,
				 struct ncclConnect *connectInfo,
				 struct ncclConnector *send, int channelId)
{
	(void)graph;
	return netSetup(comm, myInfo, peerInfo, connectInfo, send, channelId, 1);
}

static ncclResult_t netRecvSetup(struct ncclComm *comm,
				 struct ncclTopoGraph *graph,
				 struct ncclPeerInfo *myInfo,
				 struct ncclPeerInfo *peerInfo,
				 struct ncclConnect *connectInfo,
				 struct ncclConnector *recv, int channelId)
{
	(void)graph;
	return netSetup(comm, myInfo, peerInfo, connectInfo, recv, channelId, 0);
}

/* Check the peer's blob; agree on the FIFO sizes (the receiver's count). */
static int net_agree(struct ncclComm *comm, struct ncclProxyArgs *a,
		     const struct netConnectInfo *peer)
{
	struct net_comm *nc = a->nc;
	int p;

	if (peer->magic != NET_MAGIC || peer->version != NET_VERSION ||
	    peer->addrLen == 0 || peer->addrLen > NET_ADDR_MAX ||
	    peer->rank != a->peer || peer->channel != a->channel) {
		WARN("NET: rank %d: the connect blob from rank %d (channel %d) is not from this library version",
		     comm->rank, a->peer, a->channel);
		return -EPROTO;
	}
	if (strncmp(peer->prov, nc->prov, sizeof(peer->prov))) {
		WARN("NET: ranks %d and %d share no libfabric provider: rank %d uses \"%s\", rank %d uses \"%.*s\" (set MLAP2P_NET_PROVIDER or FI_PROVIDER alike everywhere)",
		     comm->rank, a->peer, comm->rank, nc->prov, a->peer,
		     (int)sizeof(peer->prov), peer->prov);
		return -EPROTO;
	}
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		int size = a->send ? peer->buffSizes[p] : comm->buffSizes[p];

		if (size < 0)
			return -EPROTO;
		a->conn->buffSizes[p] = size;
	}
	return 0;
}

/* Lay out, allocate and register the connection's local FIFO. */
static int net_alloc(struct ncclComm *comm, struct ncclProxyArgs *a)
{
	const size_t hdr = offsetof(struct ncclSendMem, buff);
	size_t off = 2 * hdr, wire = 0, payloadMax = 0;
	struct net_comm *nc = a->nc;
	char *mem;
	int p, ret;

	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		size_t size = (size_t)a->conn->buffSizes[p];

		a->slot[p] = size / NCCL_STEPS;
		switch (p) {
		case NCCL_PROTO_LL:
			a->payload[p] = a->slot[p] / 16 * 8;
			break;
		case NCCL_PROTO_LL128:
			a->payload[p] = a->slot[p] / 128 * 120;
			break;
		default:
			a->payload[p] = a->slot[p];
		}
		if (p != NCCL_PROTO_SIMPLE && a->payload[p] > payloadMax)
			payloadMax = a->payload[p];
		if (a->payload[p] > wire)
			wire = a->payload[p];
	}
	/* send: gather room for LL/LL128; recv: what outgrows the SIMPLE slot */
	if (a->send)
		a->auxStep = payloadMax;
	else
		a->auxStep = wire > a->slot[NCCL_PROTO_SIMPLE] ?
			     wire - a->slot[NCCL_PROTO_SIMPLE] : 0;
	a->auxStep = ALIGN_UP(a->auxStep, 64);
	if (!a->send && a->slot[NCCL_PROTO_SIMPLE] && a->auxStep &&
	    nc->iovLimit < 2) {
		WARN("NET: provider %s takes one iov per receive; LL128 steps larger than SIMPLE's need two",
		     nc->prov);
		return -EOPNOTSUPP;
	}
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		off = ALIGN_UP(off, 4096);
		a->buffs[p] = (char *)(uintptr_t)off;	/* offsets for now */
		off += (size_t)a->conn->buffSizes[p];
	}
	off = ALIGN_UP(off, 4096);
	a->aux = (char *)(uintptr_t)off;
	off += NCCL_STEPS * a->auxStep;
	a->memSize = ALIGN_UP(off, 4096);

	if (ncclRtCalloc(comm->rt, &a->mem, a->memSize) != ncclSuccess)
		return mlap2p_errno_take(ncclSystemError);
	mem = a->mem;
	a->sendMem = (struct ncclSendMem *)mem;
	a->recvMem = (struct ncclRecvMem *)(mem + hdr);
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		a->buffs[p] = a->conn->buffSizes[p] ?
			      mem + (uintptr_t)a->buffs[p] : NULL;
	a->aux = mem + (uintptr_t)a->aux;
	for (p = 0; p < NCCL_STEPS; p++) {
		a->recvMem->sizesFifo[p] = -1;
		if (a->send && a->buffs[NCCL_PROTO_LL])
			net_ll_scrub(a, (uint64_t)p);
	}

	net_lock(nc);
	ret = net_errno(fi_mr_reg(nc->domain, mem, a->memSize,
				  FI_SEND | FI_RECV, 0,
				  nc->provKey ? 0 : nc->nextKey++, 0, &a->mr,
				  NULL));
	net_unlock(nc);
	if (ret) {
		a->mr = NULL;
		if (nc->mrLocal) {
			WARN("NET: rank %d: fi_mr_reg of %zu bytes for the connection to rank %d: %s",
			     comm->rank, a->memSize, a->peer, net_strerror(ret));
			return ret;
		}
		INFO(NCCL_NET, "NET: fi_mr_reg: %s; %s needs no registration",
		     net_strerror(ret), nc->prov);
	} else {
		a->desc = fi_mr_desc(a->mr);
	}
	return 0;
}

/*
 * How many receives each receive connection keeps posted: NCCL_STEPS when
 * the endpoint's receive queue holds them all, fewer (at least one, so
 * every connection can always make progress) when many connections share
 * it.  @nc->lock held.
 */
static void net_rx_depth(struct net_comm *nc, int delta)
{
	size_t room = nc->rxSize > 2 * NET_HB_RECVS ?
		      nc->rxSize - 2 * NET_HB_RECVS : 1;

	nc->recvConns += delta;
	nc->rxDepth = nc->recvConns > 0 ? (int)(room / (size_t)nc->recvConns) : NCCL_STEPS;
	if (nc->rxDepth > NCCL_STEPS)
		nc->rxDepth = NCCL_STEPS;
	if (nc->rxDepth < 1)
		nc->rxDepth = 1;
}

/* Make the peer addressable; @nc->lock held. */
static int net_peer_insert(struct ncclComm *comm, struct net_comm *nc,
			   int peer, const struct netConnectInfo *info)
{
	struct net_peer *p = &nc->peers[peer];
	size_t len = sizeof(p->name);

	if (p->addr != FI_ADDR_NOTAVAIL) {
		if (p->rawLen != info->addrLen ||
		    memcmp(p->raw, info->addr, p->rawLen)) {
			WARN("NET: rank %d: rank %d sent two different endpoint addresses",
			     comm->rank, peer);
			return -EPROTO;
		}
		return 0;
	}
	if (fi_av_insert(nc->av, info->addr, 1, &p->addr, 0, NULL) != 1) {
		p->addr = FI_ADDR_NOTAVAIL;
		WARN("NET: rank %d: cannot insert rank %d's address into the address vector",
		     comm->rank, peer);
		return -EINVAL;
	}
	memcpy(p->raw, info->addr, info->addrLen);
	p->rawLen = info->addrLen;
	if (!fi_av_straddr(nc->av, info->addr, p->name, &len))
		snprintf(p->name, sizeof(p->name), "?");
	p->lastHeard = mlap2p_now_ms();
	return 0;
}

static ncclResult_t netConnect(struct ncclComm *comm,
			       struct ncclConnect *connectInfo, int nranks,
			       int rank, struct ncclConnector *connector)
{
	struct ncclProxyArgs *a = connector->transportResources;
	const struct netConnectInfo *peer =
		(const struct netConnectInfo *)connectInfo;
	struct mlap2p_conn *conn;
	struct net_comm *nc;
	int ret, p;

	(void)nranks;
	(void)rank;
	if (!a || !a->nc || connector->connected)
		return ncclInternalError;
	nc = a->nc;
	conn = a->conn;
	ret = net_agree(comm, a, peer);
	if (!ret)
		ret = net_alloc(comm, a);
	if (ret) {
		mlap2p_errno_stash(ret);
		return ncclSystemError;
	}

	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		connector->conn.buffs[p] = a->buffs[p];
	connector->conn.tail = &a->recvMem->tail;
	connector->conn.head = &a->sendMem->head;
	connector->conn.sizesFifo = a->recvMem->sizesFifo;
	connector->conn.ptrsFifo = a->recvMem->ptrsFifo;
	connector->conn.ptrExchange = NULL;	/* no single copy over NET */
	connector->conn.direct = 0;
	conn->read = 0;
	conn->memRank = comm->rank;
	conn->peerMemRank = a->peer;
	a->tagBase = NET_TAG(NET_TYPE_DATA, 0, a->channel,
			     a->send ? comm->rank : a->peer, 0);

	net_lock(nc);
	ret = net_peer_insert(comm, nc, a->peer, peer);
	if (!ret && !nc->threadStarted) {
		ret = -pthread_create(&nc->thread, NULL, net_proxy_main, nc);
		if (!ret)
			nc->threadStarted = 1;
		else
			WARN("NET: rank %d: cannot start the proxy thread: %s",
			     comm->rank, strerror(-ret));
	}
	if (!ret) {
		nc->peers[a->peer].conns++;
		if (!a->send)
			net_rx_depth(nc, 1);
		a->active = 1;
		a->next = nc->conns;
		nc->conns = a;
		a->allNext = nc->all;
		nc->all = a;
	}
	net_unlock(nc);
	if (ret) {
		mlap2p_errno_stash(ret);
		return ncclSystemError;
	}
	connector->connected = 1;
	return ncclSuccess;
}

static ncclResult_t netFree(void *resources)
{
	struct ncclProxyArgs *a = resources, **pa;
	struct net_comm *nc;

	if (!a)
		return ncclSuccess;
	nc = a->nc;
	if (!nc) {
		free(a);
		return ncclSuccess;
	}
	net_lock(nc);
	if (a->active) {
		for (pa = &nc->conns; *pa && *pa != a; pa = &(*pa)->next)
			;
		if (*pa)
			*pa = a->next;
		a->active = 0;
		nc->peers[a->peer].conns--;
		if (!a->send)
			net_rx_depth(nc, -1);
	} else {
		/* never connected: not on nc->all, nothing registered */
		net_unlock(nc);
		if (a->mem)
			ncclRtFree(nc->comm->rt, a->mem);
		net_close_fid(a->mr ? &a->mr->fid : NULL);
		free(a);
		net_comm_put(nc);
		return ncclSuccess;
	}
	net_unlock(nc);
	/* Its memory goes with the endpoint, when the last connection goes. */
	net_comm_put(nc);
	return ncclSuccess;
}

int mlap2p_net_peer_alive(struct ncclComm *comm, int rank)
{
	struct net_comm *nc;
	int err = 0;

	if (rank < 0 || rank >= comm->nRanks)
		return 0;
	pthread_mutex_lock(&net_registry_lock);
	for (nc = net_registry; nc && nc->comm != comm; nc = nc->next)
		;
	if (nc)
		err = __atomic_load_n(&nc->peers[rank].err, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&net_registry_lock);
	return err;
}

MLAP2P_EXPORT struct ncclTransport netTransport = {
	.name = "NET",
	.canConnect = netCanConnect,
	.send = {
		.setup = netSendSetup,
		.connect = netConnect,
		.free = netFree,
		.proxy = netSendProxy,
		.allocRequest = netAllocRequest,
		.freeRequest = netFreeRequest,
	},
	.recv = {
		.setup = netRecvSetup,
		.connect = netConnect,
		.free = netFree,
		.proxy = netRecvProxy,
		.allocRequest = netAllocRequest,
		.freeRequest = netFreeRequest,
	},
};
