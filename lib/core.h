/* SPDX-License-Identifier: MIT */
/*
 * lib/core.h: the object model every layer above the runtime shares, types
 * only (as NCCL's include/comm.h): the communicator (struct ncclComm), its
 * channels, connectors and the rank-pair topology.  The functions on them
 * live with their layers: lib/comm.h, lib/topo.h, lib/transport.h.
 */
#ifndef MLAP2P_LIB_CORE_H
#define MLAP2P_LIB_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mlap2p/mlap2p.h"
#include "mlap2p/transport.h"
#include "param.h"
#include "rt/rt.h"
#include "util.h"

#define MAXCHANNELS		MLAP2P_MAXCHANNELS /* masks are uint32_t */

struct mlap2p_bootstrap;
struct mlap2p_import;

/* How a connection reaches its FIFO (struct mlap2p_conn.mode). */
enum mlap2p_conn_mode {
	MLAP2P_CONN_NONE = 0,
	MLAP2P_CONN_DIRECT = 1,		/* P2P/direct pointer */
	MLAP2P_CONN_IPC = 2,		/* P2P/IPC */
	MLAP2P_CONN_INDIRECT = 3,	/* P2P/indirect (relay) */
	MLAP2P_CONN_NET = 4,
};

/*
 * A host-side connector with what the data plane needs beside it.  The
 * framework only ever passes &conn->c to transports, so a transport (and
 * the data plane) may recover the wrapper with container_of().
 */
struct mlap2p_conn {
	struct ncclConnector c;		/* must stay first */
	struct ncclConnector *dev;	/* its device-visible mirror */
	int buffSizes[NCCL_NUM_PROTOCOLS]; /* agreed with the peer */
	int send;			/* 1: send side, 0: recv side */
	int peer;			/* the other rank */
	int channel;
	enum mlap2p_conn_mode mode;
	int read;			/* SIMPLE lives in the sender's mem */
	int memRank;			/* rank whose memory holds our mem */
	int peerMemRank;		/* rank whose memory holds the peer's */
	/* Mappings of other ranks of this process we hold (mlap2p_rt_pin). */
	void *pins[2];
};

/* Host-side peers of one channel. */
struct mlap2p_channel_peer {
	struct mlap2p_conn send;
	struct mlap2p_conn recv;
};

/* What a channel looks like in device-visible memory (NCCL 2.7 ncclPeer). */
struct ncclPeer {
	struct ncclConnector send;
	struct ncclConnector recv;
};
_Static_assert(sizeof(struct ncclPeer) == 0x100, "ncclPeer");

struct ncclChannel {
	int id;
	struct mlap2p_channel_peer *peers;	/* nRanks, or NULL if unused */
	struct ncclPeer *devPeers;		/* nRanks, in comm->devMem */
	int ringPrev, ringNext;			/* -1 without a ring */
	int *ringOrder;				/* nRanks ranks, or NULL */
};

/* Rank-pair topology, computed once after the all-gather. */
struct ncclTopoSystem {
	struct ncclComm *comm;
	int nRanks;
	int *edge;		/* [a * nRanks + b]: MLAP2P_EDGE_* */
	int *intermediate;	/* relay rank or -1, same indexing */
	int *relayMla;		/* relay MLA or -1, same indexing */
};

struct ncclComm {
	int nRanks;
	int rank;
	int cudaDev;			/* global logical core */
	int mla;			/* MLA of cudaDev */
	struct ncclPeerInfo *peerInfo;	/* nRanks, all-gathered */

	struct mlap2p_rt *rt;
	struct mlap2p_bootstrap *bootstrap;
	struct ncclTopoSystem *topo;
	struct mlap2p_params params;

	/*
	 * FIFO sizes for the next connections (from the environment).  The
	 * data plane may lower them (e.g. to 0 for a protocol NCCL_PROTO
	 * rules out) before it connects; each connection keeps its own copy.
	 */
	int buffSizes[NCCL_NUM_PROTOCOLS];

	struct ncclChannel channels[MAXCHANNELS];
	int nChannels;			/* highest channel used + 1 */
	/* Channel counts, mlap2p_topo_channels(): the rings collectives
	 * use, and NCCL's P2P channels (send/recv) and their share per
	 * peer. */
	int nRings;
	int p2pnChannels;
	int p2pnChannelsPerPeer;
	uint32_t *connectSend;		/* nRanks channel masks, pending */
	uint32_t *connectRecv;
	void *devMem;			/* region holding every devPeers */

	/*
	 * Non-zero once aborted; read it with __atomic_load_n(ACQUIRE) in
	 * every wait.  asyncError is 0 or the first -errno a background
	 * party (data plane, service) stored with mlap2p_comm_set_error().
	 */
	uint32_t abortFlag;
	int asyncError;

	pthread_mutex_t lock;		/* imports[] */
	struct mlap2p_import *imports;	/* cached peer-region mappings */

	/* Data-plane state, owned by lib/dataplane*.c; dpFree runs first at
	 * destroy and abort (with abortFlag already set on abort). */
	void *dp;
	void (*dpFree)(struct ncclComm *comm);

	/*
	 * 0 while a rank lives, -errno once it died: set by the communicator
	 * (mlap2p_peer_alive) for the layers below it, which may not call up.
	 */
	int (*peerAlive)(struct ncclComm *comm, int rank);

	/* Collectives' state, owned by lib/coll/; collFree runs right after
	 * dpFree at destroy and abort; collDump writes its line of
	 * mlap2p_dump_state(). */
	void *coll;
	void (*collFree)(struct ncclComm *comm);
	void (*collDump)(struct ncclComm *comm, int fd);

	/* Threads inside a blocking call (mlap2p_comm_enter); abort waits
	 * for it to drop to 0 before it frees anything. */
	int busy;
	/* What open groups hold of it (lib/comm.h, mlap2p_comm_hold). */
	struct mlap2p_hold *hold;
};

/* The public handle wraps the communicator. */
struct mlap2p_comm {
	struct ncclComm nccl;
};

static inline struct ncclComm *mlap2p_nccl(struct mlap2p_comm *comm)
{
	return &comm->nccl;
}

static inline struct mlap2p_comm *mlap2p_api(struct ncclComm *comm)
{
	return container_of(comm, struct mlap2p_comm, nccl);
}


static inline bool mlap2p_comm_aborted(const struct ncclComm *comm)
{
	return __atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE) != 0;
}

#endif /* MLAP2P_LIB_CORE_H */
