/* SPDX-License-Identifier: MIT */
/*
 * lib/transport/net_int.h: what the files of the NET transport share:
 * net.c (per-communicator state, the vtable), net_ofi.c (libfabric,
 * loaded on first use, and the provider probe), net_proxy.c (requests,
 * the send and receive proxies, the completion queue, heartbeats, the
 * proxy thread) and net_reg.c (registration and landing).  Nothing
 * outside lib/transport/ includes it.
 */
#ifndef MLAP2P_LIB_NET_INT_H
#define MLAP2P_LIB_NET_INT_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core.h"
#include "log.h"
#include "transport/net.h"

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

/* libfabric, as net_ofi.c resolves it: its five real symbols. */
struct net_ofi_api {
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
};
extern struct net_ofi_api net_ofi;
/* The state the calling proxy thread serves (allocRequest's fast path). */
extern __thread struct net_comm *net_tls;

/* net.c */
void net_peer_fail(struct net_comm *nc, int peer, int err,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
struct net_comm *net_comm_find(struct ncclComm *comm);
void net_close_fid(struct fid *fid);
void net_lock(struct net_comm *nc);
void net_unlock(struct net_comm *nc);

/* net_ofi.c */
int net_local_node(char *node, size_t len);
int net_getinfo(const char *node, struct fi_info **out, char *why,
		size_t whyLen);
int net_errno(ssize_t ret);
const char *net_strerror(int err);
int net_disabled(void);
int net_probe_local(char *prov, size_t provLen);
const char *net_provider_hint(void);

/* net_proxy.c */
void net_ll_scrub(struct ncclProxyArgs *a, uint64_t s);
void *net_proxy_main(void *arg);
ncclResult_t netSendProxy(struct ncclProxyArgs *a);
ncclResult_t netAllocRequest(struct ncclComm *comm, void **request);
ncclResult_t netFreeRequest(struct ncclComm *comm, void *request);
ncclResult_t netRecvProxy(struct ncclProxyArgs *a);
char *net_landing(struct ncclProxyArgs *a, uint64_t s, size_t *len);
int net_poll_cq(struct net_comm *nc);

#endif /* MLAP2P_LIB_NET_INT_H */
