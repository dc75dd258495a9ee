/* SPDX-License-Identifier: MIT */
/*
 * <mlap2p/transport.h>: the seed's transport ABI, byte-exact.
 *
 * These are the types of Neuron's NCCL fork (the seed, after upstream NCCL
 * 2.7), with the seed's names and layouts.  Every offset the seed fixes is
 * checked below with _Static_assert; do not reorder anything.
 */
#ifndef MLAP2P_TRANSPORT_H
#define MLAP2P_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_STEPS		8
#define NCCL_NUM_PROTOCOLS	3
#define NCCL_PROTO_LL		0
#define NCCL_PROTO_LL128	1
#define NCCL_PROTO_SIMPLE	2
#define CACHE_LINE_SIZE		128
#define MEM_ALIGN		4096
#define CONNECT_SIZE		128
#define NCCL_LL_CLEAN_MASK	0x7ffffff8

/* ncclConnInfo.direct bits. */
#define NCCL_DIRECT_GPU		0x01
#define NCCL_DIRECT_NIC		0x10

/* ncclResult_t: one definition, shared with mlap2p's <nccl.h>. */
#include <mlap2p/result.h>

struct ncclComm;
struct ncclTopoSystem;
struct ncclTopoGraph;
struct ncclProxyArgs;

/* What every rank learns about every other rank at init (all-gathered). */
struct ncclPeerInfo {
	int rank;
	int cudaDev;		/* the rank's global logical core */
	int64_t busId;		/* = cudaDev: the seed passes busIds to topology */
	uint64_t hostHash;	/* same host <=> same hostHash */
	uint64_t pidHash;	/* same process <=> same pidHash */
	uint32_t node;		/* emulated node within the pod */
	uint32_t pod;		/* pod identity (hash) */
	uint32_t mla;		/* MLA the core sits on */
	int32_t pid;		/* for liveness checks */
	uint64_t startTime;	/* process start time (clock ticks), pid reuse */
	uint32_t rtKind;	/* runtime backend (1 kmod, 2 host) */
	uint32_t topoHash;	/* fingerprint of the locality configuration */
	uint64_t netHash;	/* NET: its libfabric provider's name, 0 none */
	uint32_t syscallNs;	/* what a system call costs there, ns */
};

/* The bootstrap exchange unit: one per connection, n << 7 bytes for n. */
struct ncclConnect {
	char data[CONNECT_SIZE];
};

/* The FIFO descriptor the collective kernels post to and poll. */
struct ncclConnInfo {
	char *buffs[NCCL_NUM_PROTOCOLS];	/* local for recv, remote for send */
	uint64_t *tail;				/* local for recv, remote for send */
	uint64_t *head;				/* local for send, remote for recv */
	int direct;				/* NCCL_DIRECT_* */
	int shared;				/* buffers shared (seed +0x2c); P2P: 0 */
	void **ptrExchange;			/* single-copy pointer exchange */
	int *sizesFifo;				/* per-step sizes */
	void **ptrsFifo;			/* per-step pointers */
	uint64_t step;				/* where we are */
	uint64_t llLastCleaning;
};

struct ncclTransportComm;

struct ncclConnector {
	int connected;
	struct ncclProxyArgs *proxyAppend;
	struct ncclTransportComm *transportComm;
	void *transportResources;
	struct ncclConnInfo conn;
	struct ncclComm *comm;
};

/* Sender-side header: the receiver writes head and ptrExchange here. */
struct ncclSendMem {
	union {
		struct {
			uint64_t head;
			char pad1[CACHE_LINE_SIZE - sizeof(uint64_t)];
			void *ptrExchange;
			char pad2[CACHE_LINE_SIZE - sizeof(void *)];
		};
		char pad3[MEM_ALIGN];
	};
	char buff[1];	/* actually larger */
};

/* Receiver-side header: the sender writes tail and the FIFOs here. */
struct ncclRecvMem {
	union {
		struct {
			uint64_t tail;
			char pad1[CACHE_LINE_SIZE - sizeof(uint64_t)];
			int sizesFifo[NCCL_STEPS];
			void *ptrsFifo[NCCL_STEPS];
		};
		char pad4[MEM_ALIGN];
	};
	char buff[1];	/* actually larger */
};

struct ncclTransportComm {
	ncclResult_t (*setup)(struct ncclComm *comm, struct ncclTopoGraph *graph,
			      struct ncclPeerInfo *myInfo,
			      struct ncclPeerInfo *peerInfo,
			      struct ncclConnect *connectInfo,
			      struct ncclConnector *connector, int channelId);
	ncclResult_t (*connect)(struct ncclComm *comm,
				struct ncclConnect *connectInfo, int nranks,
				int rank, struct ncclConnector *connector);
	ncclResult_t (*free)(void *resources);
	ncclResult_t (*proxy)(struct ncclProxyArgs *args);
	ncclResult_t (*allocRequest)(struct ncclComm *comm, void **request);
	ncclResult_t (*freeRequest)(struct ncclComm *comm, void *request);
};

struct ncclTransport {
	char name[16];
	ncclResult_t (*canConnect)(int *ret, struct ncclTopoSystem *topo,
				   struct ncclTopoGraph *graph,
				   struct ncclPeerInfo *myInfo,
				   struct ncclPeerInfo *peerInfo);
	struct ncclTransportComm send;
	struct ncclTransportComm recv;
};

/* The 80-byte P2P connect blob, packed into ncclConnect.data. */
struct p2pConnectInfo {
	int rank;
	int read;
	void *directPtr;
	char devIpc[64];
};

/* P2P send/recv resources (32 B). */
struct p2pResources {
	void *devMem;		/* own FIFO allocation */
	void *ipcPtr;		/* imported peer FIFO, closed at free */
	int remoteId;		/* -1 sentinel, checked at free */
	int memRank;		/* rank whose memory holds the FIFO */
	void *bootstrap;
};

extern struct ncclTransport p2pTransport;
extern struct ncclTransport netTransport;
extern struct ncclTransport *ncclTransports[2];

/* The framework drivers (seed: ncclTransportP2pSetup/Connect). */
ncclResult_t ncclTransportP2pConnect(struct ncclComm *comm, int channelId,
				     int nrecv, int *peerRecv, int nsend,
				     int *peerSend);
ncclResult_t ncclTransportP2pSetup(struct ncclComm *comm,
				   struct ncclTopoGraph *graph);

/* Layout checks: every offset the seed fixes. */
_Static_assert(sizeof(struct ncclTransportComm) == 48, "ncclTransportComm");
_Static_assert(sizeof(struct ncclTransport) == 120, "ncclTransport");
_Static_assert(offsetof(struct ncclTransport, canConnect) == 0x10, "canConnect");
_Static_assert(offsetof(struct ncclTransport, send) == 0x18, "send");
_Static_assert(offsetof(struct ncclTransport, recv) == 0x48, "recv");
_Static_assert(offsetof(struct ncclTransportComm, proxy) == 0x18, "proxy");
_Static_assert(offsetof(struct ncclTransportComm, freeRequest) == 0x28, "freeRequest");
_Static_assert(sizeof(struct ncclConnect) == 128, "ncclConnect");
_Static_assert(sizeof(struct p2pConnectInfo) == 80, "p2pConnectInfo");
_Static_assert(offsetof(struct p2pConnectInfo, read) == 4, "read");
_Static_assert(offsetof(struct p2pConnectInfo, directPtr) == 0x08, "directPtr");
_Static_assert(offsetof(struct p2pConnectInfo, devIpc) == 0x10, "devIpc");
_Static_assert(sizeof(struct p2pConnectInfo) <= sizeof(struct ncclConnect), "blob");
_Static_assert(offsetof(struct ncclConnInfo, buffs) == 0x00, "buffs");
_Static_assert(offsetof(struct ncclConnInfo, tail) == 0x18, "tail");
_Static_assert(offsetof(struct ncclConnInfo, head) == 0x20, "head");
_Static_assert(offsetof(struct ncclConnInfo, direct) == 0x28, "direct");
_Static_assert(offsetof(struct ncclConnInfo, shared) == 0x2c, "shared");
_Static_assert(offsetof(struct ncclConnInfo, ptrExchange) == 0x30, "ptrExchange");
_Static_assert(offsetof(struct ncclConnInfo, sizesFifo) == 0x38, "sizesFifo");
_Static_assert(offsetof(struct ncclConnInfo, ptrsFifo) == 0x40, "ptrsFifo");
_Static_assert(offsetof(struct ncclConnInfo, step) == 0x48, "step");
_Static_assert(offsetof(struct ncclConnInfo, llLastCleaning) == 0x50, "llLastCleaning");
_Static_assert(sizeof(struct ncclConnector) == 0x80, "ncclConnector");
_Static_assert(offsetof(struct ncclConnector, conn) == 0x20, "conn");
_Static_assert(offsetof(struct ncclSendMem, head) == 0, "head");
_Static_assert(offsetof(struct ncclSendMem, ptrExchange) == 0x80, "ptrExchange");
_Static_assert(offsetof(struct ncclSendMem, buff) == 0x1000, "send buff");
_Static_assert(offsetof(struct ncclRecvMem, tail) == 0, "tail");
_Static_assert(offsetof(struct ncclRecvMem, sizesFifo) == 0x80, "sizesFifo");
_Static_assert(offsetof(struct ncclRecvMem, ptrsFifo) == 0xA0, "ptrsFifo");
_Static_assert(offsetof(struct ncclRecvMem, buff) == 0x1000, "recv buff");
_Static_assert(sizeof(struct p2pResources) == 32, "p2pResources");
_Static_assert(offsetof(struct p2pResources, remoteId) == 0x10, "remoteId");
_Static_assert(offsetof(struct p2pResources, memRank) == 0x14, "memRank");
_Static_assert(offsetof(struct p2pResources, bootstrap) == 0x18, "bootstrap");

#ifdef __cplusplus
}
#endif

#endif /* MLAP2P_TRANSPORT_H */
