/* SPDX-License-Identifier: MIT */
/*
 * lib/topo.h: topology (lib/topo.c): the edge class between every pair of
 * ranks, whether P2P may use an edge, and rings.
 */
#ifndef MLAP2P_LIB_TOPO_H
#define MLAP2P_LIB_TOPO_H

#include "core.h"

/* After the all-gather: check consistency, compute comm->topo. */
int mlap2p_topo_compute(struct ncclComm *comm);
void mlap2p_topo_free(struct ncclTopoSystem *topo);

/*
 * Whether rank @a reaches @b by P2P, the seed's ncclTopoCheckP2p: edge
 * class within NCCL_P2P_LEVEL, same host, a rank to relay through.
 */
ncclResult_t ncclTopoCheckP2p(struct ncclTopoSystem *topo,
			      struct ncclPeerInfo *a, struct ncclPeerInfo *b,
			      int *p2p, int *read, int *intermediateRank);
/*
 * The seed's pod refinements, asked by p2pCanConnect after
 * ncclTopoCheckP2p: @pds = 1 if @a and @b are on different nodes of one
 * switch pod (the Trn3 switch path); @sameCC = 1 if they are on one node
 * of one host.  Both always succeed.
 */
ncclResult_t ncclTopoCheckPdsP2p(struct ncclTopoSystem *topo,
				 struct ncclPeerInfo *a, struct ncclPeerInfo *b,
				 int *pds);
ncclResult_t ncclTopoCheckSameIntraCC(struct ncclTopoSystem *topo,
				      struct ncclPeerInfo *a,
				      struct ncclPeerInfo *b, int *sameCC);
/*
 * Rings for @nrings channels: order[r * nRanks + i] is the i-th rank of
 * ring r.  NCCL_RINGS overrides the search.  0 or -errno.
 */
int mlap2p_topo_rings(struct ncclComm *comm, int nrings, int *order);
/*
 * The channel counts of NCCL's ncclTopoComputeP2pChannels, on this
 * topology: comm->nRings (NCCL_MIN_NCHANNELS .. NCCL_MAX_NCHANNELS around
 * 2, a ring and its reverse), comm->p2pnChannels (that, within
 * NCCL_MIN_P2P_NCHANNELS .. NCCL_MAX_P2P_NCHANNELS, rounded up to a power
 * of 2) and comm->p2pnChannelsPerPeer (the fewest any peer takes: 2 over
 * P2P, NCCL_NCHANNELS_PER_NET_PEER over NET; a power of 2).  0 or -EINVAL.
 */
int mlap2p_topo_channels(struct ncclComm *comm);
/* The @i-th of the p2pnChannelsPerPeer channels from @send to @recv. */
int mlap2p_p2p_channel(const struct ncclComm *comm, int send, int recv,
		       int i);
/* 0 if NCCL_RINGS (@str) is valid for @nranks, else a WARN and -EINVAL. */
int mlap2p_rings_check(const char *str, int nranks);

#endif /* MLAP2P_LIB_TOPO_H */
