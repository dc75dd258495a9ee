/* SPDX-License-Identifier: MIT */
/*
 * lib/dataplane/dataplane.h: what the data plane offers the layers above
 * it (lib/coll/) beyond <mlap2p/dataplane.h>.
 */
#ifndef MLAP2P_LIB_DATAPLANE_H
#define MLAP2P_LIB_DATAPLANE_H

#include "mlap2p/mlap2p.h"

struct mlap2p_request;

/* The calling thread's group depth (mlap2p_group_start/end). */
int mlap2p_group_depth(void);
/*
 * The outermost mlap2p_group_end() first calls @fn, which runs what a
 * layer above recorded in the group (the collectives) and returns its
 * first error or 0.  Set once per process; every caller passes the same
 * function.
 */
void mlap2p_group_end_hook(int (*fn)(void));
/*
 * mlap2p_isend (@send = 1) or mlap2p_irecv on channel @channel rather than
 * the lowest one: messages on one channel are ordered, those on different
 * channels are not.  -ENOTCONN when that channel does not connect them.
 */
int mlap2p_ipost_on(struct mlap2p_comm *api, int channel, int send,
		    void *buf, size_t bytes, int peer,
		    struct mlap2p_request **req);
/*
 * A request that a layer above progresses itself: waits and tests on it
 * call poll(ext), which ends it with mlap2p_request_ext_done(req, status).
 */
struct mlap2p_request *mlap2p_request_ext(struct mlap2p_comm *api,
					  void (*poll)(void *ext), void *ext,
					  int *err);
void mlap2p_request_ext_done(struct mlap2p_request *req, int status);

#endif /* MLAP2P_LIB_DATAPLANE_H */
