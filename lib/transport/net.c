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

#include "transport/net.h"
#include "core.h"
#include "log.h"
#include "param.h"
#include "proto/proto.h"
#include "rt/rt.h"
#include "socket.h"
#include "util.h"

#if defined(__has_include) && !defined(MLAP2P_NO_OFI)
#if __has_include(<rdma/fabric.h>)
#define MLAP2P_HAVE_OFI 1
#endif
#endif

#ifdef MLAP2P_HAVE_OFI
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#endif

#define NET_MAGIC		0x54454e4dU	/* "MNET" */
#define NET_VERSION		1
#define NET_ADDR_MAX		64
#define NET_PROV_MAX		24
#define NET_DEFAULT_PROVIDER	"tcp"
#define NET_DEFAULT_TIMEOUT_MS	5000		/* = the data plane's default */

/* The NET connect blob, packed into ncclConnect.data. */
struct netConnectInfo {
	uint32_t magic;
	uint16_t version;
	uint16_t addrLen;
	int32_t rank;
	int32_t channel;
	int32_t buffSizes[NCCL_NUM_PROTOCOLS];	/* the sender's own sizes */
	char prov[NET_PROV_MAX];		/* provider name, NUL-terminated */
	uint8_t addr[NET_ADDR_MAX];		/* fi_getname() of the endpoint */
};
_Static_assert(sizeof(struct netConnectInfo) <= sizeof(struct ncclConnect),
	       "NET connect blob is too big");

#ifndef MLAP2P_HAVE_OFI

/* Built without libfabric's headers: NET exists but never connects. */

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

#define NET_COMM(x) {							\
	.setup = netNoSetup, .connect = netNoConnect, .free = netNoFree,	\
	.proxy = netNoProxy, .allocRequest = netNoAllocRequest,		\
	.freeRequest = netNoFreeRequest }

MLAP2P_EXPORT struct ncclTransport netTransport = {
	.name = "NET",
	.canConnect = netCanConnect,
	.send = NET_COMM(send),
	.recv = NET_COMM(recv),
};

#else /* MLAP2P_HAVE_OFI */

/* ------------------------------------------------------------------ */
/* libfabric, loaded on first use                                     */
/* ------------------------------------------------------------------ */

/*
 * Only these five are real symbols; everything else in libfabric's API is
 * an inline call through the objects' ops tables, so nothing else needs
 * resolving and libmlap2p does not link against libfabric.
 */
static struct {
	void *dl;
	int (*getinfo)(uint32_t version, const char *node, const char *service,
		       uint64_t flags, const struct fi_info *hints,
		       struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		      void *context);
	const char *(*strerror)(int errnum);
	char why[256];		/* why libfabric is unusable, or "" */
} net_ofi;
static pthread_once_t net_ofi_once = PTHREAD_ONCE_INIT;

static void net_ofi_load(void)
{
	static const char *const names[] = { "libfabric.so.1", "libfabric.so" };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(names) && !net_ofi.dl; i++)
		net_ofi.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!net_ofi.dl) {
		snprintf(net_ofi.why, sizeof(net_ofi.why),
			 "cannot load libfabric.so.1 (%s); install libfabric1",
			 dlerror());
		return;
	}
	*(void **)&net_ofi.getinfo = dlsym(net_ofi.dl, "fi_getinfo");
	*(void **)&net_ofi.freeinfo = dlsym(net_ofi.dl, "fi_freeinfo");
	*(void **)&net_ofi.dupinfo = dlsym(net_ofi.dl, "fi_dupinfo");
	*(void **)&net_ofi.fabric = dlsym(net_ofi.dl, "fi_fabric");
	*(void **)&net_ofi.strerror = dlsym(net_ofi.dl, "fi_strerror");
	if (!net_ofi.getinfo || !net_ofi.freeinfo || !net_ofi.dupinfo ||
	    !net_ofi.fabric || !net_ofi.strerror) {
		snprintf(net_ofi.why, sizeof(net_ofi.why),
			 "libfabric.so.1 lacks fi_getinfo/fi_fabric");
		dlclose(net_ofi.dl);
		net_ofi.dl = NULL;
	}
}

static const char *net_strerror(int err)
{
	if (err < 0)
		err = -err;
	return net_ofi.strerror ? net_ofi.strerror(err) : strerror(err);
}

/* libfabric's -FI_E* are -errno for the errno range; keep the rest EIO. */
static int net_errno(ssize_t ret)
{
	if (ret >= 0)
		return 0;
	if (ret <= -FI_ERRNO_OFFSET)
		return -EIO;
	return (int)ret;
}

/* ------------------------------------------------------------------ */
/* Provider choice                                                    */
/* ------------------------------------------------------------------ */

/* Whether NET may connect at all (MLAP2P_NET_DISABLE). */
static int net_disabled(void)
{
	long v = 0;

	if (mlap2p_env_int("MLAP2P_NET_DISABLE", 0, 1, 0, &v))
		return 1;	/* a bad value: refuse, the WARN says why */
	return (int)v;
}

/* The local address NET binds to: the bootstrap's interface. */
static int net_local_node(char *node, size_t len)
{
	union mlap2p_sockaddr a;
	const void *ip;
	int ret;

	ret = mlap2p_sock_local_addr(&a);
	if (ret)
		return ret;
	ip = a.sa.sa_family == AF_INET ? (const void *)&a.sin.sin_addr :
					 (const void *)&a.sin6.sin6_addr;
	if (!inet_ntop(a.sa.sa_family, ip, node, (socklen_t)len))
		return -errno;
	return 0;
}

static const char *net_provider_hint(void)
{
	const char *p = getenv("MLAP2P_NET_PROVIDER");

	if (p && *p)
		return p;
	/* FI_PROVIDER filters inside libfabric; do not contradict it. */
	p = getenv("FI_PROVIDER");
	if (p && *p)
		return NULL;
	return NET_DEFAULT_PROVIDER;
}

/*
 * fi_getinfo for an RDM endpoint with tagged messages on @node.  On
 * failure @why says what was asked for.
 */
static int net_getinfo(const char *node, struct fi_info **out, char *why,
		       size_t whyLen)
{
	const char *prov = net_provider_hint();
	struct fi_info *hints;
	int ret;

	pthread_once(&net_ofi_once, net_ofi_load);
	if (!net_ofi.dl) {
		snprintf(why, whyLen, "%s", net_ofi.why);
		return -ENOENT;
	}
	hints = net_ofi.dupinfo(NULL);
	if (!hints)
		return -ENOMEM;
	hints->caps = FI_TAGGED | FI_SEND | FI_RECV;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->av_type = FI_AV_TABLE;
	if (prov)
		hints->fabric_attr->prov_name = strdup(prov);
	ret = net_ofi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
			      node, NULL, FI_SOURCE, hints, out);
	net_ofi.freeinfo(hints);	/* frees prov_name too */
	if (ret) {
		snprintf(why, whyLen,
			 "no libfabric provider %s%s%sfor an RDM endpoint with tagged messages on %s: %s",
			 prov ? "\"" : "", prov ? prov : "",
			 prov ? "\" " : "", node, net_strerror(ret));
		return net_errno(ret);
	}
	return 0;
}

/*
 * canConnect's question, once per process and configuration: does this
 * host have a provider?  The answer (and its reason) is cached by the
 * environment it was asked under.
 */
static struct {
	pthread_mutex_t lock;
	char key[256];
	int ret;
	char prov[NET_PROV_MAX];
	char why[384];
} net_probe = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int net_probe_local(char *prov, size_t provLen)
{
	char node[INET6_ADDRSTRLEN], key[256];
	const char *p = getenv("FI_PROVIDER"), *hint;
	struct fi_info *info = NULL;
	int ret;

	ret = net_local_node(node, sizeof(node));
	if (ret)
		return ret;
	hint = net_provider_hint();
	snprintf(key, sizeof(key), "%s|%s|%s", node, hint ? hint : "",
		 p ? p : "");
	pthread_mutex_lock(&net_probe.lock);
	if (strcmp(key, net_probe.key)) {
		net_probe.why[0] = '\0';
		net_probe.prov[0] = '\0';
		net_probe.ret = net_getinfo(node, &info, net_probe.why,
					    sizeof(net_probe.why));
		if (!net_probe.ret) {
			snprintf(net_probe.prov, sizeof(net_probe.prov), "%s",
				 info->fabric_attr->prov_name);
			net_ofi.freeinfo(info);
		}
		snprintf(net_probe.key, sizeof(net_probe.key), "%s", key);
		if (net_probe.ret)
			INFO(NCCL_INIT | NCCL_NET, "NET: %s", net_probe.why);
	}
	ret = net_probe.ret;
	snprintf(prov, provLen, "%s", net_probe.prov);
	pthread_mutex_unlock(&net_probe.lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Per-communicator state                                             */
/* ------------------------------------------------------------------ */

/* Tag layout. */
#define NET_TYPE_DATA		1ULL
#define NET_TYPE_HB		2ULL
#define NET_TAG(type, proto, ch, src, step)				\
	(((uint64_t)(type) << 60) | ((uint64_t)(proto) << 58) |		\
	 ((uint64_t)(ch) << 53) | ((uint64_t)(src) << 32) |		\
	 ((uint64_t)(step) & 0xffffffffULL))
#define NET_TAG_PROTO(t)	((int)(((t) >> 58) & 3))
#define NET_TAG_SRC(t)		((int)(((t) >> 32) & 0x1fffff))
#define NET_IGNORE_PROTO	(3ULL << 58)
#define NET_IGNORE_SRC		(0x1fffffULL << 32)
#define NET_MAX_RANKS		(1 << 21)
_Static_assert(MAXCHANNELS <= 32, "5 bits of channel in the tag");

#define NET_HB_RECVS		4	/* heartbeat receives kept posted */
#define NET_CQ_BATCH		16
#define NET_RELAND_MIN		(32UL << 10)	/* net_reland(): bytes of a step */
_Static_assert(NCCL_STEPS <= 32, "ncclProxyArgs.repost has a bit per slot");

enum net_req_kind {
	NET_REQ_SEND = 1,
	NET_REQ_RECV,
	NET_REQ_HB,
};

/* One fabric operation in flight; the context must come first. */
struct net_req {
	struct fi_context2 ctx;
	struct net_req *next;		/* free list */
	struct net_req *allNext;	/* every request, freed at close */
	struct ncclProxyArgs *args;
	uint64_t step;
	int kind;
	int cancelled;			/* by mlap2p_net_unland() */
	int reland;			/* by mlap2p_net_land(): post again */
};

/*
 * A user region (mlap2p_mem_alloc) registered for sends in place, or
 * refused (@mr NULL: its sends copy through the slots).  Keyed by @base;
 * @regionId tells a region freed and allocated again at the same address.
 * The entries of a communicator never overlap (mlap2p_net_reg drops the
 * old ones a new region overlaps), so the one entry that holds a step's
 * pointer is the region the data plane registered for it.  Only under
 * @nc->lock; closed when dropped or with the domain.
 */
struct net_reg {
	struct net_reg *next;
	char *base;
	size_t size;
	uint64_t regionId;
	struct fid_mr *mr;
	void *desc;
};

struct net_peer {
	fi_addr_t addr;			/* FI_ADDR_NOTAVAIL until inserted */
	uint8_t raw[NET_ADDR_MAX];	/* its endpoint name */
	size_t rawLen;
	int conns;			/* connected NET connectors */
	int err;			/* 0, or -errno once the path failed */
	int64_t lastHeard;		/* ms: last message of any kind */
	char name[64];			/* address, for messages */
};

struct net_comm {
	struct net_comm *next;		/* registry */
	struct ncclComm *comm;
	int refs;			/* connectors with resources */

	/*
	 * @lock serializes every use of the fabric objects (the domain is
	 * FI_THREAD_DOMAIN) and protects @conns, @peers and the request
	 * pool.  The proxy thread holds it while it works and hands it over
	 * when @want says another thread waits.
	 */
	pthread_mutex_t lock;
	int want;

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	uint8_t addr[NET_ADDR_MAX];
	size_t addrLen;
	char prov[NET_PROV_MAX];
	char dev[64];			/* the domain (interface) */
	int mrLocal;			/* FI_MR_LOCAL: pass descriptors */
	int provKey;			/* FI_MR_PROV_KEY */
	uint64_t nextKey;
	int regOn;			/* MLAP2P_NET_REG: register user regions */
	struct net_reg *regs;		/* user regions seen by mlap2p_net_reg */
	size_t iovLimit;
	size_t rxSize;			/* receives the endpoint can hold */
	int recvConns;			/* receive connections on @conns */
	int rxDepth;			/* receives each may keep posted */

	struct net_peer *peers;		/* nRanks */
	struct ncclProxyArgs *conns;	/* progressed by the proxy */
	struct ncclProxyArgs *all;	/* every connection, freed at close */
	struct net_req *freeReqs;
	struct net_req *allReqs;	/* in flight at close are freed too */
	struct net_req hb[NET_HB_RECVS];
	uint64_t hbBuf[NET_HB_RECVS];
	uint64_t hbOut;

	pthread_t thread;
	int threadStarted;
	unsigned int helps;		/* mlap2p_net_progress() calls */
	int stop;
	long timeoutMs;			/* 0: no liveness checks */
	long hbEveryMs;
	int64_t nextHb;
};

/*
 * The proxy state of one connection (the seed's struct ncclProxyArgs,
 * opaque to the framework): what the proxy slot progresses.
 */
struct ncclProxyArgs {
	struct ncclProxyArgs *next;	/* nc->conns */
	struct ncclProxyArgs *allNext;	/* nc->all */
	struct net_comm *nc;
	struct ncclConnector *connector;
	struct mlap2p_conn *conn;
	int send;
	int peer;
	int channel;
	int active;			/* on nc->conns */
	int moved;			/* the last proxy call did something */
	int err;

	void *mem;			/* the connection's region */
	size_t memSize;
	struct fid_mr *mr;
	void *desc;
	struct ncclSendMem *sendMem;	/* head (credit), local */
	struct ncclRecvMem *recvMem;	/* tail and sizesFifo, local */
	char *buffs[NCCL_NUM_PROTOCOLS];
	size_t slot[NCCL_NUM_PROTOCOLS];	/* FIFO bytes per step */
	size_t payload[NCCL_NUM_PROTOCOLS];	/* payload bytes per step */
	char *aux;			/* send: gather; recv: landing overflow */
	size_t auxStep;
	struct net_reg *lastReg;	/* send: the last region sent from */

	uint64_t posted;		/* next step to send / to post */
	uint64_t done;			/* next step completed / delivered */
	/* recv: the receive buffer steps may land in (mlap2p_net_land) */
	char *winBuf;
	uint64_t winFirst, winSteps;
	size_t winPer, winBytes;
	char *landed[NCCL_STEPS];	/* recv: where the receive was posted,
					 * NULL for the slot */
	struct net_req *rreq[NCCL_STEPS];	/* recv: posted, not complete */
	unsigned int repost;		/* recv: slots (bits) cancelled to land,
					 * to post again */
	uint8_t complete[NCCL_STEPS];
	uint8_t rproto[NCCL_STEPS];
	uint32_t rlen[NCCL_STEPS];
	uint64_t tagBase;		/* NET_TAG(DATA, 0, channel, src, 0) */
};

/* Registry: communicator -> NET state. */
static pthread_mutex_t net_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_comm *net_registry;
/* The state the calling proxy thread serves (allocRequest's fast path). */
static __thread struct net_comm *net_tls;

static struct net_comm *net_comm_find(struct ncclComm *comm)
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

static void net_lock(struct net_comm *nc)
{
	__atomic_add_fetch(&nc->want, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&nc->lock);
	__atomic_sub_fetch(&nc->want, 1, __ATOMIC_ACQ_REL);
}

static void net_unlock(struct net_comm *nc)
{
	pthread_mutex_unlock(&nc->lock);
}

static void net_close_fid(struct fid *fid)
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
static void net_peer_fail(struct net_comm *nc, int peer, int err,
			  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void net_peer_fail(struct net_comm *nc, int peer, int err,
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
/* Requests: the allocRequest/freeRequest slots                       */
/* ------------------------------------------------------------------ */

static ncclResult_t netAllocRequest(struct ncclComm *comm, void **request)
{
	struct net_comm *nc = net_comm_find(comm);
	struct net_req *r;

	*request = NULL;
	if (!nc)
		return ncclInternalError;
	r = nc->freeReqs;
	if (r) {
		nc->freeReqs = r->next;
	} else {
		r = malloc(sizeof(*r));
		if (!r)
			return ncclSystemError;
		r->allNext = nc->allReqs;
		nc->allReqs = r;
	}
	memset(r, 0, offsetof(struct net_req, allNext));
	r->args = NULL;
	r->step = 0;
	r->kind = 0;
	r->cancelled = 0;
	r->reland = 0;
	*request = r;
	return ncclSuccess;
}

static ncclResult_t netFreeRequest(struct ncclComm *comm, void *request)
{
	struct net_comm *nc = net_comm_find(comm);
	struct net_req *r = request;

	if (!r)
		return ncclSuccess;
	if (!nc)
		return ncclInternalError;	/* freed with its state */
	r->next = nc->freeReqs;
	nc->freeReqs = r;
	return ncclSuccess;
}

static struct net_req *net_req_get(struct ncclProxyArgs *a, int kind,
				   uint64_t step)
{
	struct ncclTransportComm *tc = a->connector->transportComm;
	void *r;

	if (tc->allocRequest(a->nc->comm, &r) != ncclSuccess)
		return NULL;
	((struct net_req *)r)->args = a;
	((struct net_req *)r)->kind = kind;
	((struct net_req *)r)->step = step;
	return r;
}

static void net_req_put(struct ncclProxyArgs *a, struct net_req *r)
{
	if (r->kind == NET_REQ_RECV && a->rreq[r->step % NCCL_STEPS] == r)
		a->rreq[r->step % NCCL_STEPS] = NULL;
	a->connector->transportComm->freeRequest(a->nc->comm, r);
}

/* ------------------------------------------------------------------ */
/* Send side                                                          */
/* ------------------------------------------------------------------ */

static inline char *net_slot(struct ncclProxyArgs *a, int p, uint64_t step)
{
	return a->buffs[p] + (step % NCCL_STEPS) * a->slot[p];
}

/*
 * Is LL step @s (size @n announced) fully written?  Then gather its
 * payload into @out.  The wrap step (flag 0) carries nothing.
 */
static int net_ll_gather(struct ncclProxyArgs *a, uint64_t s, size_t n,
			 char *out, size_t *len)
{
	const uint64_t *line = (const uint64_t *)net_slot(a, NCCL_PROTO_LL, s);
	uint32_t flag = (uint32_t)(s + 1);
	size_t lines = n ? (n + 7) / 8 : 1, i;

	if (!flag) {
		*len = 0;
		return 1;
	}
	if (n > a->payload[NCCL_PROTO_LL])
		return -EPROTO;
	for (i = 0; i < lines; i++) {
		uint64_t lo = __atomic_load_n(&line[2 * i], __ATOMIC_ACQUIRE);
		uint64_t hi = __atomic_load_n(&line[2 * i + 1], __ATOMIC_ACQUIRE);
		uint64_t v;
		size_t at = i * 8;

		if ((uint32_t)(lo >> 32) != flag || (uint32_t)(hi >> 32) != flag)
			return 0;
		v = (lo & 0xffffffffu) | (hi << 32);
		memcpy(out + at, &v, n - at < 8 ? n - at : 8);
	}
	*len = n;
	return 1;
}

static int net_ll128_gather(struct ncclProxyArgs *a, uint64_t s, size_t n,
			    char *out, size_t *len)
{
	const uint64_t *base = (const uint64_t *)net_slot(a, NCCL_PROTO_LL128, s);
	size_t lines = n ? (n + 119) / 120 : 1, i;

	if (n > a->payload[NCCL_PROTO_LL128])
		return -EPROTO;
	for (i = 0; i < lines; i++) {
		const uint64_t *line = base + i * 16;
		size_t at = i * 120;

		if (__atomic_load_n(&line[15], __ATOMIC_ACQUIRE) != s + 1)
			return 0;
		if (at < n)
			memcpy(out + at, line, n - at < 120 ? n - at : 120);
	}
	*len = n;
	return 1;
}

/*
 * Line 0 of every send-side LL slot holds, whenever the proxy is not
 * looking at a posted LL step, flags that no step of that slot can carry:
 * steps of slot j have flags = j + 1 (mod 8), the scrub value is off by 4.
 * So an LL flag match on line 0 always means "LL step s", even at the
 * 32-bit wrap and however long the connection has not used LL.
 */
static void net_ll_scrub(struct ncclProxyArgs *a, uint64_t s)
{
	uint64_t *line = (uint64_t *)net_slot(a, NCCL_PROTO_LL, s);
	uint64_t f = (uint64_t)(uint32_t)(s + 1 + 4) << 32;

	__atomic_store_n(&line[0], f, __ATOMIC_RELAXED);
	__atomic_store_n(&line[1], f, __ATOMIC_RELAXED);
}

static inline int net_reg_holds(const struct net_reg *g, const char *ptr,
				size_t len)
{
	return g->mr && ptr >= g->base && len <= g->size &&
	       (size_t)(ptr - g->base) <= g->size - len;
}

/* The registered region [ptr, ptr+len) lies in; @a->nc->lock held. */
static struct net_reg *net_reg_find(struct ncclProxyArgs *a, const char *ptr,
				    size_t len)
{
	struct net_reg *g = a->lastReg;

	if (g && net_reg_holds(g, ptr, len))
		return g;
	for (g = a->nc->regs; g; g = g->next)
		if (net_reg_holds(g, ptr, len))
			return a->lastReg = g;
	return NULL;
}

/*
 * What step @s is, once the data plane posted it.  The sender announces
 * every step's size in sizesFifo before its data (SIMPLE: before tail;
 * LL, LL128: before the lines).  Line 0's flag says LL or LL128 (then the
 * announced size says where the step ends); a step whose flags do not
 * match is SIMPLE once tail has passed it (tail passing s also means every
 * line of earlier steps is visible, since the sender writes steps in
 * order).  sizesFifo is read only after an acquire that orders it: SIMPLE
 * writes it with a plain store.  0 = not yet, 1 = ready (@proto, @buf,
 * @len), -errno.
 */
static int net_send_ready(struct ncclProxyArgs *a, uint64_t s, int *proto,
			  char **buf, size_t *len, void **desc)
{
	int *sizes = a->recvMem->sizesFifo;
	int slot = (int)(s % NCCL_STEPS);
	const uint64_t *line;
	uint64_t tail;
	char *out = a->aux + (size_t)slot * a->auxStep;
	void *ptr;
	int n;

	tail = __atomic_load_n(&a->recvMem->tail, __ATOMIC_ACQUIRE);
	if (a->payload[NCCL_PROTO_LL]) {
		line = (const uint64_t *)net_slot(a, NCCL_PROTO_LL, s);
		if ((uint32_t)(__atomic_load_n(&line[0], __ATOMIC_ACQUIRE) >> 32) ==
		    (uint32_t)(s + 1)) {
			n = __atomic_load_n(&sizes[slot], __ATOMIC_ACQUIRE);
			if (n < 0)
				return 0;	/* the announcement is on its way */
			*proto = NCCL_PROTO_LL;
			*buf = out;
			return net_ll_gather(a, s, (size_t)n, out, len);
		}
	}
	if (a->payload[NCCL_PROTO_LL128]) {
		line = (const uint64_t *)net_slot(a, NCCL_PROTO_LL128, s);
		if (__atomic_load_n(&line[15], __ATOMIC_ACQUIRE) == s + 1) {
			n = __atomic_load_n(&sizes[slot], __ATOMIC_ACQUIRE);
			if (n < 0)
				return 0;
			*proto = NCCL_PROTO_LL128;
			*buf = out;
			return net_ll128_gather(a, s, (size_t)n, out, len);
		}
	}
	if (tail <= s)
		return 0;
	n = __atomic_load_n(&sizes[slot], __ATOMIC_RELAXED);
	if (n < 0 || (size_t)n > a->slot[NCCL_PROTO_SIMPLE] ||
	    !a->slot[NCCL_PROTO_SIMPLE])
		return -EPROTO;
	*proto = NCCL_PROTO_SIMPLE;
	*buf = net_slot(a, NCCL_PROTO_SIMPLE, s);
	*len = (size_t)n;
	ptr = __atomic_load_n(&a->recvMem->ptrsFifo[slot], __ATOMIC_RELAXED);
	if (ptr) {	/* in place: from a registered region, or any
			 * buffer when the provider needs no descriptors */
		struct net_reg *g = net_reg_find(a, ptr, (size_t)n);

		if (!g && a->nc->mrLocal)
			return -EFAULT;
		*buf = ptr;
		*desc = g ? g->desc : NULL;
	}
	return 1;
}

/* The send side's proxy slot: send what the data plane posted. */
static ncclResult_t netSendProxy(struct ncclProxyArgs *a)
{
	struct net_comm *nc = a->nc;
	struct fid_ep *ep = nc->ep;
	fi_addr_t dest = nc->peers[a->peer].addr;

	a->moved = 0;
	if (a->err || nc->peers[a->peer].err)
		return ncclSuccess;
	while (a->posted < a->done + NCCL_STEPS) {
		uint64_t s = a->posted;
		struct net_req *r;
		size_t len = 0;
		char *buf = NULL;
		void *desc = a->desc;
		int proto = 0, ret;
		ssize_t rc;

		ret = net_send_ready(a, s, &proto, &buf, &len, &desc);
		if (ret < 0) {
			a->err = ret;
			net_peer_fail(nc, a->peer, ret,
				      ret == -EFAULT ?
				      "channel %d: step %llu posted from a buffer no registered region holds" :
				      "channel %d: step %llu posted with a size its FIFO cannot hold",
				      a->channel, (unsigned long long)s);
			return ncclInternalError;
		}
		if (!ret)
			break;
		r = net_req_get(a, NET_REQ_SEND, s);
		if (!r)
			return ncclSystemError;
		rc = fi_tsend(ep, buf, len, desc, dest,
			      a->tagBase | NET_TAG(0, proto, 0, 0, s), &r->ctx);
		if (rc == -FI_EAGAIN) {
			net_req_put(a, r);
			break;
		}
		if (rc) {
			net_req_put(a, r);
			a->err = net_errno(rc);
			net_peer_fail(nc, a->peer, -ECONNRESET,
				      "fi_tsend on channel %d: %s", a->channel,
				      net_strerror((int)rc));
			return ncclSystemError;
		}
		/* Consumed (only now: EAGAIN above retries the same step): the
		 * data plane announces step s + 8 afresh, and LL's line 0
		 * must not look posted until it does; a later step of this
		 * slot is in the slot unless it says otherwise. */
		__atomic_store_n(&a->recvMem->sizesFifo[s % NCCL_STEPS], -1,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&a->recvMem->ptrsFifo[s % NCCL_STEPS], NULL,
				 __ATOMIC_RELAXED);
		if (proto == NCCL_PROTO_LL)
			net_ll_scrub(a, s);
		a->posted = s + 1;
		a->moved = 1;
	}
	return ncclSuccess;
}

static void net_send_done(struct ncclProxyArgs *a, uint64_t step)
{
	a->complete[step % NCCL_STEPS] = 1;
	while (a->done < a->posted && a->complete[a->done % NCCL_STEPS]) {
		a->complete[a->done % NCCL_STEPS] = 0;
		a->done++;
	}
	/* The slots are free again: credit for the data plane's sender. */
	__atomic_store_n(&a->sendMem->head, a->done, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* Receive side                                                       */
/* ------------------------------------------------------------------ */

/* Copy @len bytes at @off of step @s's landing area (SIMPLE slot + aux). */
static void net_landing_read(struct ncclProxyArgs *a, uint64_t s, size_t off,
			     void *dst, size_t len)
{
	size_t first = a->slot[NCCL_PROTO_SIMPLE];
	const char *simple = first ? net_slot(a, NCCL_PROTO_SIMPLE, s) : NULL;
	const char *aux = a->aux + (s % NCCL_STEPS) * a->auxStep;
	char *d = dst;

	if (off < first) {
		size_t n = first - off < len ? first - off : len;

		memcpy(d, simple + off, n);
		d += n;
		off += n;
		len -= n;
	}
	if (len)
		memcpy(d, aux + (off - first), len);
}

/* Write LL step @s (payload @n bytes in the landing area) as lines. */
static void net_ll_deliver(struct ncclProxyArgs *a, uint64_t s, size_t n)
{
	uint64_t *line = (uint64_t *)net_slot(a, NCCL_PROTO_LL, s);
	size_t slotLines = a->slot[NCCL_PROTO_LL] / 16, lines, i;
	uint32_t flag = (uint32_t)(s + 1);
	uint64_t f = (uint64_t)flag << 32, v;

	if (!flag) {	/* the wrap step: zero the slot, as the sender does */
		for (i = 0; i < 2 * slotLines; i++)
			__atomic_store_n(&line[i], 0, __ATOMIC_RELAXED);
		return;
	}
	lines = n ? (n + 7) / 8 : 1;
	for (i = 0; i < lines; i++) {
		size_t at = i * 8;

		v = 0;
		if (at < n)
			net_landing_read(a, s, at, &v, n - at < 8 ? n - at : 8);
		__atomic_store_n(&line[2 * i], (v & 0xffffffffu) | f,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&line[2 * i + 1], (v >> 32) | f,
				 __ATOMIC_RELAXED);
	}
	/* The sender's cleaning rule, so no line here grows 2^32 steps old. */
	if ((s & NCCL_LL_CLEAN_MASK) == NCCL_LL_CLEAN_MASK)
		for (; i < slotLines; i++) {
			__atomic_store_n(&line[2 * i], f, __ATOMIC_RELAXED);
			__atomic_store_n(&line[2 * i + 1], f, __ATOMIC_RELAXED);
		}
}

static void net_ll128_deliver(struct ncclProxyArgs *a, uint64_t s, size_t n)
{
	uint64_t *base = (uint64_t *)net_slot(a, NCCL_PROTO_LL128, s);
	size_t lines = n ? (n + 119) / 120 : 1, i;

	for (i = 0; i < lines; i++) {
		uint64_t *line = base + i * 16;
		size_t at = i * 120;

		if (at < n)
			net_landing_read(a, s, at, line,
					 n - at < 120 ? n - at : 120);
		__atomic_store_n(&line[15], s + 1, __ATOMIC_RELEASE);
	}
}

/* Hand received steps to the data plane, in order. */
static void net_recv_deliver(struct ncclProxyArgs *a)
{
	while (a->done < a->posted && a->complete[a->done % NCCL_STEPS]) {
		uint64_t s = a->done;
		int slot = (int)(s % NCCL_STEPS);
		size_t n = a->rlen[slot];

		switch (a->rproto[slot]) {
		case NCCL_PROTO_LL:
			net_ll_deliver(a, s, n);
			break;
		case NCCL_PROTO_LL128:
			net_ll128_deliver(a, s, n);
			break;
		default:
			__atomic_store_n(&a->recvMem->sizesFifo[slot], (int)n,
					 __ATOMIC_RELAXED);
			/* where it is: the slot (NULL) or the receive buffer */
			__atomic_store_n(&a->recvMem->ptrsFifo[slot],
					 a->landed[slot], __ATOMIC_RELAXED);
			break;
		}
		a->landed[slot] = NULL;
		a->complete[slot] = 0;
		a->done = s + 1;
		__atomic_store_n(&a->recvMem->tail, a->done, __ATOMIC_RELEASE);
		a->moved = 1;
	}
}

/*
 * Where step @s's receive may be posted other than its slot: into the
 * receive buffer that mlap2p_net_land() announced, if @s is one of its
 * steps and the provider needs no descriptor for it.  NULL: the slot.
 */
static char *net_landing(struct ncclProxyArgs *a, uint64_t s, size_t *len)
{
	size_t off;

	if (!a->winBuf || s < a->winFirst || s - a->winFirst >= a->winSteps ||
	    a->nc->mrLocal)
		return NULL;
	off = (size_t)(s - a->winFirst) * a->winPer;
	*len = a->winBytes - off < a->winPer ? a->winBytes - off : a->winPer;
	return *len ? a->winBuf + off : NULL;
}

/*
 * Post the receive of step @s: into the receive buffer if it lands there
 * (net_landing), else into its slot.  0, 1 when the provider is full (try
 * again later) or -errno (the connection is broken).
 */
static int net_recv_post(struct ncclProxyArgs *a, uint64_t s)
{
	struct net_comm *nc = a->nc;
	uint64_t tag = a->tagBase | NET_TAG(0, 0, 0, 0, s);
	void *desc[2] = { a->desc, a->desc };
	struct iovec iov[2];
	struct net_req *r;
	size_t cnt = 0, landLen;
	char *land;
	ssize_t rc;

	if (a->slot[NCCL_PROTO_SIMPLE]) {
		iov[cnt].iov_base = net_slot(a, NCCL_PROTO_SIMPLE, s);
		iov[cnt++].iov_len = a->slot[NCCL_PROTO_SIMPLE];
	}
	if (a->auxStep) {
		iov[cnt].iov_base = a->aux + (s % NCCL_STEPS) * a->auxStep;
		iov[cnt++].iov_len = a->auxStep;
	}
	land = net_landing(a, s, &landLen);
	r = net_req_get(a, NET_REQ_RECV, s);
	if (!r)
		return -ENOMEM;
	if (land)
		rc = fi_trecv(nc->ep, land, landLen, NULL, FI_ADDR_UNSPEC, tag,
			      NET_IGNORE_PROTO, &r->ctx);
	else if (cnt == 1)
		rc = fi_trecv(nc->ep, iov[0].iov_base, iov[0].iov_len,
			      a->desc, FI_ADDR_UNSPEC, tag, NET_IGNORE_PROTO,
			      &r->ctx);
	else
		rc = fi_trecvv(nc->ep, iov, desc, cnt, FI_ADDR_UNSPEC, tag,
			       NET_IGNORE_PROTO, &r->ctx);
	if (rc == -FI_EAGAIN) {
		net_req_put(a, r);
		return 1;
	}
	if (rc) {
		net_req_put(a, r);
		a->err = net_errno(rc);
		net_peer_fail(nc, a->peer, -ECONNRESET,
			      "fi_trecv on channel %d: %s", a->channel,
			      net_strerror((int)rc));
		return a->err;
	}
	a->landed[s % NCCL_STEPS] = land;
	a->rreq[s % NCCL_STEPS] = r;
	a->moved = 1;
	return 0;
}

/* The receive side's proxy slot: keep a receive posted per free slot. */
static ncclResult_t netRecvProxy(struct ncclProxyArgs *a)
{
	struct net_comm *nc = a->nc;
	uint64_t head, s;
	int ret;

	a->moved = 0;
	net_recv_deliver(a);
	if (a->err || nc->peers[a->peer].err)
		return ncclSuccess;
	/* Receives mlap2p_net_land() took back from their slots. */
	for (s = a->done; a->repost && s < a->posted; s++) {
		unsigned int bit = 1U << (s % NCCL_STEPS);

		if (!(a->repost & bit))
			continue;
		ret = net_recv_post(a, s);
		if (ret < 0)
			return ncclSystemError;
		if (ret)
			return ncclSuccess;
		a->repost &= ~bit;
	}
	head = __atomic_load_n(&a->sendMem->head, __ATOMIC_ACQUIRE);
	while (a->posted < head + NCCL_STEPS &&
	       a->posted < a->done + (uint64_t)nc->rxDepth) {
		ret = net_recv_post(a, a->posted);
		if (ret < 0)
			return ncclSystemError;
		if (ret)
			break;
		a->posted++;
	}
	return ncclSuccess;
}

static void net_recv_done(struct ncclProxyArgs *a, uint64_t step,
			  const struct fi_cq_tagged_entry *e)
{
	struct net_comm *nc = a->nc;
	int slot = (int)(step % NCCL_STEPS), proto = NET_TAG_PROTO(e->tag);
	size_t max = proto < NCCL_NUM_PROTOCOLS ?
		     (proto == NCCL_PROTO_SIMPLE ? a->slot[proto] :
						  a->payload[proto]) : 0;

	nc->peers[a->peer].lastHeard = mlap2p_now_ms();
	if (proto >= NCCL_NUM_PROTOCOLS || e->len > max ||
	    (proto != NCCL_PROTO_SIMPLE && !a->slot[proto])) {
		a->err = -EPROTO;
		net_peer_fail(nc, a->peer, -EPROTO,
			      "channel %d: step %llu arrived as %zu bytes of protocol %d, which this FIFO cannot hold",
			      a->channel, (unsigned long long)step, e->len, proto);
		return;
	}
	if (a->landed[slot] && proto != NCCL_PROTO_SIMPLE) {
		a->err = -EPROTO;
		net_peer_fail(nc, a->peer, -EPROTO,
			      "channel %d: step %llu arrived as protocol %d where a SIMPLE receive was posted",
			      a->channel, (unsigned long long)step, proto);
		return;
	}
	a->rproto[slot] = (uint8_t)proto;
	a->rlen[slot] = (uint32_t)e->len;
	a->complete[slot] = 1;
	net_recv_deliver(a);
}

/* ------------------------------------------------------------------ */
/* The proxy thread                                                   */
/* ------------------------------------------------------------------ */

static void net_hb_post(struct net_comm *nc, int i)
{
	ssize_t rc;

	nc->hb[i].kind = NET_REQ_HB;
	rc = fi_trecv(nc->ep, &nc->hbBuf[i], sizeof(nc->hbBuf[i]), NULL,
		      FI_ADDR_UNSPEC, NET_TAG(NET_TYPE_HB, 0, 0, 0, 0),
		      NET_IGNORE_SRC | 0xffffffffULL, &nc->hb[i].ctx);
	/* EAGAIN: reposted by the next pass (args == NULL marks it). */
	nc->hb[i].args = rc ? NULL : (struct ncclProxyArgs *)nc;
}

static void net_heartbeats(struct net_comm *nc, int64_t now)
{
	int r, i;

	for (i = 0; i < NET_HB_RECVS; i++)
		if (!nc->hb[i].args)
			net_hb_post(nc, i);
	if (!nc->timeoutMs || now < nc->nextHb)
		return;
	nc->nextHb = now + nc->hbEveryMs;
	for (r = 0; r < nc->comm->nRanks; r++) {
		struct net_peer *p = &nc->peers[r];

		if (!p->conns || p->err || p->addr == FI_ADDR_NOTAVAIL)
			continue;
		/* Best effort: a full queue just skips a beat. */
		fi_tinject(nc->ep, &nc->hbOut, sizeof(nc->hbOut), p->addr,
			   NET_TAG(NET_TYPE_HB, 0, 0, nc->comm->rank, 0));
		if (now - p->lastHeard > nc->timeoutMs)
			net_peer_fail(nc, r, -EHOSTDOWN,
				      "nothing arrived from it for %lld ms (MLAP2P_PEER_TIMEOUT=%ld ms); the link is down or the peer is stuck",
				      (long long)(now - p->lastHeard),
				      nc->timeoutMs);
	}
}

static int net_poll_cq(struct net_comm *nc)
{
	struct fi_cq_tagged_entry e[NET_CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t n, i;

	n = fi_cq_read(nc->cq, e, NET_CQ_BATCH);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct net_req *r;
		char buf[128] = "";

		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(nc->cq, &err, 0) != 1)
			return 0;
		r = err.op_context;
		if (!r)
			return 1;
		if (r->kind == NET_REQ_HB) {
			r->args = NULL;	/* repost */
			return 1;
		}
		/*
		 * Only mlap2p_net_unland() cancels requests for good
		 * (receives into a buffer its receiver gave up), and
		 * mlap2p_net_land() to post them again in place; one the
		 * provider cancelled while the communicator runs is a lost
		 * step, and waiting on it would hang both ends with every
		 * heartbeat fine.
		 */
		if (r->cancelled) {	/* mlap2p_net_unland(): step lost */
			if (!r->args->err)
				r->args->err = -ECANCELED;
		} else if (r->reland && err.err == FI_ECANCELED) {
			/* mlap2p_net_land(): post it where it lands */
			r->args->repost |= 1U << (r->step % NCCL_STEPS);
			r->args->moved = 1;
		} else if (err.err != FI_ECANCELED ||
			   !__atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE)) {
			fi_cq_strerror(nc->cq, err.prov_errno, err.err_data,
				       buf, sizeof(buf));
			r->args->err = -ECONNRESET;
			net_peer_fail(nc, r->args->peer, -ECONNRESET,
				      "%s of step %llu on channel %d: %s%s%s",
				      r->kind == NET_REQ_SEND ? "send" : "receive",
				      (unsigned long long)r->step,
				      r->args->channel, net_strerror(err.err),
				      buf[0] ? " / " : "", buf);
		}
		net_req_put(r->args, r);
		return 1;
	}
	if (n < 0) {
		WARN("NET: rank %d: fi_cq_read: %s", nc->comm->rank,
		     net_strerror((int)n));
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct net_req *r = e[i].op_context;
		struct ncclProxyArgs *a;

		if (!r)
			continue;
		if (r->kind == NET_REQ_HB) {
			int src = NET_TAG_SRC(e[i].tag);

			if (src < nc->comm->nRanks)
				nc->peers[src].lastHeard = mlap2p_now_ms();
			net_hb_post(nc, (int)(r - nc->hb));
			continue;
		}
		a = r->args;
		if (r->kind == NET_REQ_SEND)
			net_send_done(a, r->step);
		else
			net_recv_done(a, r->step, &e[i]);
		net_req_put(a, r);
	}
	return 1;
}

/*
 * One proxy pass for the communicator of NET connector @c, from a thread
 * that waits on it (the data plane's wait loop): the rank that waits for a
 * step moves it itself instead of handing over to the proxy thread, which
 * costs a context switch whenever ranks and proxies share cores.  Only if
 * the proxy lock is free; > 0 if something moved.
 */
int mlap2p_net_progress(struct ncclConnector *c)
{
	struct ncclProxyArgs *a = c->proxyAppend, *b;
	struct net_comm *nc, *saved = net_tls;
	int moved;

	if (!a || !a->nc || !a->active)
		return 0;
	nc = a->nc;
	__atomic_add_fetch(&nc->helps, 1, __ATOMIC_RELAXED);
	if (pthread_mutex_trylock(&nc->lock))
		return 0;
	net_tls = nc;
	moved = net_poll_cq(nc);
	for (b = nc->conns; b; b = b->next) {
		b->connector->transportComm->proxy(b);
		moved |= b->moved;
	}
	net_tls = saved;
	pthread_mutex_unlock(&nc->lock);
	return moved;
}

/*
 * Before caching region @attr: close and drop every entry that overlaps it
 * or whose region no longer exists (freed, or another region now at its
 * base).  Either way the application freed that region, which it may only
 * do once every send from it completed, so no step in flight uses the
 * entry; the proxies' lastReg is forgotten all the same.  This keeps a
 * pointer in exactly one entry (a stale one would hand the proxy the old
 * pages' descriptor) and the cache no larger than the live regions sent
 * from plus those freed since the last registration.  @nc->lock held.
 */
static void net_reg_prune(struct net_comm *nc,
			  const struct ncclRtPointerAttributes *attr)
{
	struct mlap2p_rt *rt = nc->comm->rt;
	const char *lo = attr->base, *hi = lo + attr->size;
	struct ncclRtPointerAttributes live;
	struct ncclProxyArgs *a;
	struct net_reg **p = &nc->regs, *g;
	int dropped = 0;

	while ((g = *p)) {
		if ((g->base < hi && lo < g->base + g->size) ||
		    rt->ops->pointerGetAttributes(rt, g->base, &live) ||
		    live.base != g->base || live.size != g->size ||
		    live.regionId != g->regionId) {
			*p = g->next;
			net_close_fid(g->mr ? &g->mr->fid : NULL);
			free(g);
			dropped = 1;
		} else {
			p = &g->next;
		}
	}
	if (dropped)
		for (a = nc->all; a; a = a->allNext)
			a->lastReg = NULL;
}

/*
 * May the proxy of send connector @c send [buf, buf+bytes) in place?  Yes
 * when it lies in one region of this communicator's runtime (a buffer from
 * mlap2p_mem_alloc()) that the fabric registered: on first use each region
 * is registered once with fi_mr_reg() and cached per communicator (closed
 * when a later region overlaps it or it was freed, see net_reg_prune(), or
 * with the domain at teardown).  A region the provider refuses (or every
 * region, MLAP2P_NET_REG=0) is remembered as refused: INFO once, and its
 * sends copy through the slots.  Any other buffer goes in place when the
 * provider needs no descriptors (FI_MR_LOCAL unset, as tcp;ofi_rxm) and
 * MLAP2P_NET_REG is not 0, as receives land in place.  1 or 0; never an
 * error.
 */
int mlap2p_net_reg(struct ncclConnector *c, const void *buf, size_t bytes)
{
	struct ncclProxyArgs *a = c->proxyAppend;
	struct ncclRtPointerAttributes attr;
	struct net_comm *nc;
	struct ncclComm *comm;
	struct net_reg *g;
	int ret, ok;

	if (!a || !a->nc || !a->send || !bytes)
		return 0;
	nc = a->nc;
	comm = nc->comm;
	if (comm->rt->ops->pointerGetAttributes(comm->rt, buf, &attr) ||
	    !attr.owned || attr.offset > attr.size ||
	    attr.size - attr.offset < bytes)
		return nc->regOn && !nc->mrLocal;	/* no descriptor needed */
	net_lock(nc);
	for (g = nc->regs; g && (g->base != (char *)attr.base ||
				 g->regionId != attr.regionId ||
				 g->size != attr.size); g = g->next)
		;
	if (g) {
		ok = g->mr != NULL;
		net_unlock(nc);
		return ok;
	}
	/* new here; an entry at the same base is a freed region's */
	net_reg_prune(nc, &attr);
	g = calloc(1, sizeof(*g));
	if (!g) {
		net_unlock(nc);
		return 0;
	}
	g->next = nc->regs;
	nc->regs = g;
	g->base = attr.base;
	g->size = attr.size;
	g->regionId = attr.regionId;
	ret = -EPERM;
	if (nc->regOn)
		ret = net_errno(fi_mr_reg(nc->domain, g->base, g->size, FI_SEND,
					  0, nc->provKey ? 0 : nc->nextKey++,
					  0, &g->mr, NULL));
	if (ret) {
		g->mr = NULL;
		INFO(NCCL_NET, "NET: rank %d: region %p (%zu bytes) not registered (%s); SIMPLE sends from it copy through the FIFO",
		     comm->rank, attr.base, attr.size,
		     nc->regOn ? net_strerror(ret) : "MLAP2P_NET_REG=0");
	} else {
		g->desc = fi_mr_desc(g->mr);
		INFO(NCCL_NET, "NET: rank %d: region %p (%zu bytes) registered with %s; SIMPLE sends from it go in place",
		     comm->rank, attr.base, attr.size, nc->prov);
	}
	ok = g->mr != NULL;
	net_unlock(nc);
	return ok;
}

/*
 * How many entries of the registration cache of NET connector @c's
 * communicator (registered or refused) overlap [buf, buf+bytes); -1 when
 * @c is not a NET connector.  For tests.
 */
int mlap2p_net_reg_cached(struct ncclConnector *c, const void *buf,
			  size_t bytes)
{
	struct ncclProxyArgs *a = c->proxyAppend;
	uintptr_t lo = (uintptr_t)buf, hi = lo + bytes;
	struct net_reg *g;
	int n = 0;

	if (!a || !a->nc)
		return -1;
	if (hi < lo)
		hi = UINTPTR_MAX;
	net_lock(a->nc);
	for (g = a->nc->regs; g; g = g->next)
		if ((uintptr_t)g->base < hi && lo < (uintptr_t)g->base + g->size)
			n++;
	net_unlock(a->nc);
	return n;
}

/*
 * The steps of a new landing window already posted into their slots (a
 * short message's, all of them): cancel those receives, and post each
 * again into the buffer once the provider confirms the cancel
 * (net_poll_cq, netRecvProxy); one that matched its message first
 * completes into the slot as usual.  Only for steps long enough that the
 * copy it saves costs more than the cancel (NET_RELAND_MIN).
 */
static void net_reland(struct ncclProxyArgs *a)
{
	uint64_t s;

	for (s = a->done; s < a->posted; s++) {
		int slot = (int)(s % NCCL_STEPS);
		struct net_req *r = a->rreq[slot];
		size_t len;

		if (!r || r->cancelled || r->reland || a->landed[slot] ||
		    a->complete[slot] || !net_landing(a, s, &len) ||
		    len < NET_RELAND_MIN)
			continue;
		r->reland = 1;
		fi_cancel(&a->nc->ep->fid, &r->ctx);
	}
}

/*
 * Receive in place (lib/proto.h, MLAP2P_LINK_NETRECV): from now on the
 * proxy of NET receive connector @c posts the receive of each step of
 * [first, first + steps) that it has not posted yet straight into @buf,
 * at (step - first) * perStep (up to @bytes in all), takes back those it
 * posted into slots (net_reland), and says so in ptrsFifo[slot] when it
 * delivers the step.  1 if it may; 0 if not (not a
 * NET receive connector, or the provider needs descriptors for receive
 * buffers).
 */
int mlap2p_net_land(struct ncclConnector *c, char *buf, uint64_t first,
		    uint64_t steps, size_t perStep, size_t bytes)
{
	struct ncclProxyArgs *a = c->proxyAppend;

	if (!a || !a->nc || a->send || a->nc->mrLocal || !bytes)
		return 0;
	net_lock(a->nc);
	a->winFirst = first;
	a->winSteps = steps;
	a->winPer = perStep;
	a->winBytes = bytes;
	a->winBuf = buf;
	net_reland(a);
	net_unlock(a->nc);
	return 1;
}

/*
 * The end of mlap2p_net_land()'s window: no receive is posted into that
 * buffer from now on, and those already posted but not complete (only if
 * the receive ends unfinished) are cancelled and waited for, at most
 * @timeoutMs.  Returns 1 when nothing can write into the buffer any more,
 * 0 if a receive into it was still pending at the deadline.  A cancelled
 * step is lost, so the connection is broken (-ECANCELED) after one.
 */
int mlap2p_net_unland(struct ncclConnector *c, long timeoutMs)
{
	struct ncclProxyArgs *a = c->proxyAppend;
	int64_t deadline = mlap2p_now_ms() + timeoutMs;
	struct net_comm *nc;
	int pending, i;

	if (!a || !a->nc)
		return 1;
	nc = a->nc;
	net_lock(nc);
	a->winBuf = NULL;
	for (;;) {
		pending = 0;
		for (i = 0; i < NCCL_STEPS; i++) {
			struct net_req *r = a->rreq[i];

			if (!r || !a->landed[i])
				continue;
			pending = 1;
			if (!r->cancelled) {
				r->cancelled = 1;
				fi_cancel(&nc->ep->fid, &r->ctx);
			}
		}
		if (!pending || mlap2p_now_ms() > deadline)
			break;
		if (!net_poll_cq(nc)) {
			net_unlock(nc);
			sched_yield();
			net_lock(nc);
		}
	}
	net_unlock(nc);
	return !pending;
}


/*
 * Idle policy.  Nothing tells the proxy that the data plane posted a step
 * (it only writes the FIFO), so it polls: tight for NET_SPIN_POLLS passes,
 * then yielding the CPU (ranks and proxies may outnumber cores) for
 * NET_YIELD_MS, then napping, longer once a communicator has been idle for
 * NET_NAP_MS.  A busy stream never leaves the first two phases.  While a
 * rank waits on NET it runs the passes itself (mlap2p_net_progress), so
 * then the proxy thread naps and leaves it the CPU (net_proxy_yield), up
 * to NET_HELPED_MAX_US at a time while the rank keeps polling.  A rank
 * hands what it posts to the fabric itself before it returns (dp_step()
 * runs a send's pass after the op), so the proxy's naps delay only what
 * nobody waits for: late completions and the provider's own protocol.
 */
#define NET_SPIN_POLLS		16
#define NET_YIELD_MS		20
#define NET_NAP_MS		1000
#define NET_HELPED_MAX_US	1600

/*
 * While a rank polls for us (mlap2p_net_progress() counts nc->helps),
 * stay out of its way: a pass here holds the lock its passes need and
 * races it for the provider's sockets, and waking at all preempts it on
 * a host with fewer cores than ranks plus proxies.  Sleep 50 us, doubling
 * up to NET_HELPED_MAX_US while the rank keeps polling; send the
 * heartbeats when due.  Called and returns with @nc->lock held.
 */
static void net_proxy_yield(struct net_comm *nc, unsigned int *helps,
			    int64_t *nextTick)
{
	long us = 50;

	pthread_mutex_unlock(&nc->lock);
	do {
		struct timespec ts = { 0, us * 1000 };
		int64_t now;

		*helps = __atomic_load_n(&nc->helps, __ATOMIC_RELAXED);
		nanosleep(&ts, NULL);
		now = mlap2p_now_ms();
		if (now >= *nextTick) {
			pthread_mutex_lock(&nc->lock);
			net_heartbeats(nc, now);
			pthread_mutex_unlock(&nc->lock);
			*nextTick = now + 10;
		}
		if (us < NET_HELPED_MAX_US)
			us *= 2;
	} while (*helps != __atomic_load_n(&nc->helps, __ATOMIC_RELAXED) &&
		 !__atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE));
	while (__atomic_load_n(&nc->want, __ATOMIC_ACQUIRE))
		sched_yield();
	pthread_mutex_lock(&nc->lock);
}

static void *net_proxy_main(void *arg)
{
	struct net_comm *nc = arg;
	unsigned int idle = 0, helps = 0;
	int64_t now, nextTick = 0, idleSince = 0;

	net_tls = nc;
	mlap2p_log_set_core(nc->comm->cudaDev);
	pthread_mutex_lock(&nc->lock);
	while (!__atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE)) {
		struct ncclProxyArgs *a;
		int moved;

		if (helps != __atomic_load_n(&nc->helps, __ATOMIC_RELAXED)) {
			net_proxy_yield(nc, &helps, &nextTick);
			idle = 0;
			continue;
		}
		moved = net_poll_cq(nc);
		for (a = nc->conns; a; a = a->next) {
			a->connector->transportComm->proxy(a);
			moved |= a->moved;
		}
		if (moved || ++idle % 64 == 0) {
			now = mlap2p_now_ms();
			if (now >= nextTick) {
				net_heartbeats(nc, now);
				nextTick = now + 10;
			}
		}
		if (moved) {
			idle = 0;
			if (!__atomic_load_n(&nc->want, __ATOMIC_ACQUIRE))
				continue;
		}
		/* Idle (or wanted): let others in, then back off. */
		pthread_mutex_unlock(&nc->lock);
		if (idle == 1)
			idleSince = mlap2p_now_ms();
		if (idle < NET_SPIN_POLLS) {
			mlap2p_cpu_relax();
		} else {
			int64_t quiet = mlap2p_now_ms() - idleSince;
			struct timespec ts = { 0, 0 };

			if (quiet < NET_YIELD_MS) {
				sched_yield();
			} else {
				ts.tv_nsec = quiet < NET_NAP_MS ? 50000 : 1000000;
				nanosleep(&ts, NULL);
			}
		}
		while (__atomic_load_n(&nc->want, __ATOMIC_ACQUIRE))
			sched_yield();
		pthread_mutex_lock(&nc->lock);
	}
	pthread_mutex_unlock(&nc->lock);
	return NULL;
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

#endif /* MLAP2P_HAVE_OFI */
