/* SPDX-License-Identifier: MIT */
/*
 * lib/bootstrap.h: the bootstrap (lib/bootstrap.c): TCP rendezvous through
 * the unique id, all-gather of ncclPeerInfo, tagged point-to-point messages,
 * a barrier and the remote-allocation service used by relays.
 */
#ifndef MLAP2P_LIB_BOOTSTRAP_H
#define MLAP2P_LIB_BOOTSTRAP_H

#include "mlap2p/mlap2p.h"
#include "mlap2p/transport.h"
#include "rt/rt.h"

struct mlap2p_bootstrap;
struct ncclComm;

/*
 * Tags.  Values with MLAP2P_TAG_CORE set belong to the framework; other
 * users (the data plane) use tags below it.  A message matches on
 * (peer, tag); unmatched ones queue until received.
 */
#define MLAP2P_TAG_CORE		0x40000000

/* Fill a unique id: random magic plus the root's listening address. */
int mlap2p_bootstrap_get_unique_id(struct mlap2p_unique_id *id);
/*
 * Join rank @comm->rank of @comm->nRanks: rendezvous through the id's root,
 * all-gather @comm->peerInfo (own entry filled by the caller), start the
 * service.  Errors name the rank that never came.
 */
int mlap2p_bootstrap_init(struct ncclComm *comm,
			  const struct mlap2p_unique_id *id);
void mlap2p_bootstrap_close(struct mlap2p_bootstrap *state);
/* The communicator @state belongs to. */
struct ncclComm *mlap2p_bootstrap_comm(struct mlap2p_bootstrap *state);
/* Wake every wait of @state with -ECANCELED (abort, any thread). */
void mlap2p_bootstrap_abort(struct mlap2p_bootstrap *state);

/* Seed-named helpers; ncclResult_t and WARNs naming the peer. */
ncclResult_t bootstrapSend(struct mlap2p_bootstrap *state, int peer, int tag,
			   const void *data, int size);
ncclResult_t bootstrapRecv(struct mlap2p_bootstrap *state, int peer, int tag,
			   void *data, int size);
ncclResult_t bootstrapBarrier(struct mlap2p_bootstrap *state, int tag);
/*
 * bootstrapRecv for the connect path: also gives up (-ECONNABORTED) as
 * soon as @peer has posted MLAP2P_TAG_FAILED, i.e. failed its own side.
 */
ncclResult_t bootstrapRecvSetup(struct mlap2p_bootstrap *state, int peer,
				int tag, void *data, int size);
/* All-gather @size bytes per rank; rank r's slot at allData + r * size. */
ncclResult_t bootstrapAllGather(struct mlap2p_bootstrap *state, void *allData,
				int size);
/*
 * Ask rank @rank's service to allocate @size bytes on its own device.  It
 * returns an id for bootstrapRemFree, the region's IPC handle and the
 * pointer (valid only inside the server's process).
 */
ncclResult_t bootstrapRemAlloc(size_t size, int rank,
			       struct mlap2p_bootstrap *state, int *id,
			       struct ncclRtIpcMemHandle *ipc, void **ptr);
ncclResult_t bootstrapRemFree(int id, int rank, struct mlap2p_bootstrap *state);

/* Tags of the framework's messages. */
#define MLAP2P_TAG_CONNECT	(MLAP2P_TAG_CORE | 0x0000000)	/* + round */
#define MLAP2P_TAG_CONNECTED	(MLAP2P_TAG_CORE | 0x1000000)
#define MLAP2P_TAG_CLOSE	(MLAP2P_TAG_CORE | 0x2000000)
#define MLAP2P_TAG_BARRIER	(MLAP2P_TAG_CORE | 0x3000000)
#define MLAP2P_TAG_ALLGATHER	(MLAP2P_TAG_CORE | 0x4000000)
#define MLAP2P_TAG_RINGS	(MLAP2P_TAG_CORE | 0x5000000)
#define MLAP2P_TAG_FAILED	(MLAP2P_TAG_CORE | 0x6000000)	/* no payload */

#endif /* MLAP2P_LIB_BOOTSTRAP_H */
