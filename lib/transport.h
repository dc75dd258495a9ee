/* SPDX-License-Identifier: MIT */
/*
 * lib/transport.h: the transport framework (lib/transport.c):
 * ncclTransports[] = { p2pTransport, netTransport }, selectTransport, the
 * connect driver (ncclTransportP2pSetup/Connect) and teardown.
 */
#ifndef MLAP2P_LIB_TRANSPORT_H
#define MLAP2P_LIB_TRANSPORT_H

#include "core.h"

/* The connection of @channel to @peer (send or recv side), or NULL. */
struct mlap2p_conn *mlap2p_channel_conn(struct ncclComm *comm, int channel,
				     int peer, int send);

/* Free every connection's resources (after the closing handshake). */
ncclResult_t mlap2p_transport_free_all(struct ncclComm *comm);
/* Mode name as logged: "P2P/direct pointer", "P2P/IPC", ... */
const char *mlap2p_conn_mode_name(enum mlap2p_conn_mode mode);

#endif /* MLAP2P_LIB_TRANSPORT_H */
