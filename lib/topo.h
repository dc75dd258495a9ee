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
/* 0 if NCCL_RINGS (@str) is valid for @nranks, else a WARN and -EINVAL. */
int mlap2p_rings_check(const char *str, int nranks);

#endif /* MLAP2P_LIB_TOPO_H */
