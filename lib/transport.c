// SPDX-License-Identifier: MIT
/*
 * The transport framework (the seed's and NCCL 2.7's transport.cc):
 * the two-entry table, selectTransport with its one fallthrough, and the
 * connect driver.
 *
 * ncclTransportP2pConnect only records, per peer, which channels want a
 * send or a receive connector.  ncclTransportP2pSetup then walks the peers
 * round-robin (round i: receive from rank - i, send to rank + i), selects a
 * transport and runs its setup for every channel, exchanges the 128-byte
 * ncclConnect slots (n << 7 bytes per peer and round), connects, and
 * mirrors each connector into device-visible memory with a real
 * ncclRtMemcpy.  A closing zero-byte handshake with every peer it touched
 * keeps a rank from returning (and perhaps tearing down) while a peer is
 * still mapping its buffers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"
#include "bootstrap.h"
#include "log.h"
#include "rt/rt.h"

MLAP2P_EXPORT struct ncclTransport *ncclTransports[2] = {
	&p2pTransport,
	&netTransport,
};

const char *mlap2p_conn_mode_name(enum mlap2p_conn_mode mode)
{
	switch (mode) {
	case MLAP2P_CONN_DIRECT:
		return "P2P/direct pointer";
	case MLAP2P_CONN_IPC:
		return "P2P/IPC";
	case MLAP2P_CONN_INDIRECT:
		return "P2P/indirect";
	case MLAP2P_CONN_NET:
		return "NET";
	case MLAP2P_CONN_NONE:
		break;
	}
	return "none";
}

/* Host connectors of channel @c, created on first use. */
static int mlap2p_channel_init(struct ncclComm *comm, int c)
{
	struct ncclChannel *ch = &comm->channels[c];
	int p;

	if (ch->peers)
		return 0;
	ch->peers = calloc((size_t)comm->nRanks, sizeof(*ch->peers));
	if (!ch->peers)
		return -ENOMEM;
	for (p = 0; p < comm->nRanks; p++) {
		struct mlap2p_channel_peer *cp = &ch->peers[p];

		cp->send.c.comm = comm;
		cp->send.send = 1;
		cp->send.peer = p;
		cp->send.channel = c;
		cp->send.memRank = cp->send.peerMemRank = -1;
		cp->recv.c.comm = comm;
		cp->recv.send = 0;
		cp->recv.peer = p;
		cp->recv.channel = c;
		cp->recv.memRank = cp->recv.peerMemRank = -1;
	}
	if (c >= comm->nChannels)
		comm->nChannels = c + 1;
	return 0;
}

struct mlap2p_conn *mlap2p_channel_conn(struct ncclComm *comm, int channel,
				     int peer, int send)
{
	struct ncclChannel *ch;

	if (channel < 0 || channel >= MAXCHANNELS || peer < 0 ||
	    peer >= comm->nRanks)
		return NULL;
	ch = &comm->channels[channel];
	if (!ch->peers)
		return NULL;
	return send ? &ch->peers[peer].send : &ch->peers[peer].recv;
}

/*
 * Ask for a connection on @channelId to (@send) or from each of @peers[0..n)
 * not yet connected; -1 stands for no peer, the rank itself is skipped.
 */
static ncclResult_t mlap2p_want_connect(struct ncclComm *comm, int channelId,
					const int *peers, int n, int send)
{
	uint32_t *want = send ? comm->connectSend : comm->connectRecv;
	int i;

	for (i = 0; i < n; i++) {
		int peer = peers[i];

		if (peer == -1)
			continue;
		if (peer < 0 || peer >= comm->nRanks) {
			mlap2p_errno_stash(-EINVAL);
			return ncclInvalidArgument;
		}
		if (peer == comm->rank ||
		    mlap2p_channel_conn(comm, channelId, peer, send)->c.connected)
			continue;
		want[peer] |= 1U << channelId;
	}
	return ncclSuccess;
}

MLAP2P_EXPORT ncclResult_t ncclTransportP2pConnect(struct ncclComm *comm,
						   int channelId, int nrecv,
						   int *peerRecv, int nsend,
						   int *peerSend)
{
	ncclResult_t res;

	if (!comm || channelId < 0 || channelId >= MAXCHANNELS || nrecv < 0 ||
	    nsend < 0 || (nrecv && !peerRecv) || (nsend && !peerSend)) {
		mlap2p_errno_stash(-EINVAL);
		return ncclInvalidArgument;
	}
	if (mlap2p_channel_init(comm, channelId)) {
		mlap2p_errno_stash(-ENOMEM);
		return ncclSystemError;
	}
	res = mlap2p_want_connect(comm, channelId, peerRecv, nrecv, 0);
	if (res == ncclSuccess)
		res = mlap2p_want_connect(comm, channelId, peerSend, nsend, 1);
	return res;
}

/*
 * type 0 = recv, 1 = send.  Start at index 0 (P2P); when it cannot connect
 * fall through once, to index 1 (NET); there is nothing after that.
 */
static ncclResult_t selectTransport(struct ncclComm *comm,
				    struct ncclTopoGraph *graph,
				    struct ncclPeerInfo *myInfo,
				    struct ncclPeerInfo *peerInfo,
				    struct ncclConnect *connect,
				    struct ncclConnector *connector,
				    int channelId, int type)
{
	struct ncclTransport **t = &ncclTransports[0];
	struct ncclTransportComm *transportComm;
	int ret = 0;

	NCCLCHECK((*t)->canConnect(&ret, comm->topo, graph, myInfo, peerInfo));
	if (!ret) {
		t++;
		NCCLCHECK((*t)->canConnect(&ret, comm->topo, graph, myInfo,
					   peerInfo));
	}
	if (!ret) {
		WARN("No transport found between devices %d and %d. Possible replica group misconfiguration",
		     myInfo->cudaDev, peerInfo->cudaDev);
		mlap2p_errno_stash(-EHOSTUNREACH);
		return ncclInternalError;
	}
	transportComm = type == 1 ? &(*t)->send : &(*t)->recv;
	connector->transportComm = transportComm;
	if (t != &ncclTransports[0])
		container_of(connector, struct mlap2p_conn, c)->mode =
			MLAP2P_CONN_NET;
	NCCLCHECK(transportComm->setup(comm, graph, myInfo, peerInfo, connect,
				       connector, channelId));
	return ncclSuccess;
}

/* The region holding every channel's device-visible connectors. */
static ncclResult_t mlap2p_dev_peers(struct ncclComm *comm)
{
	size_t size = sizeof(struct ncclPeer) * (size_t)MAXCHANNELS *
		      (size_t)comm->nRanks;
	int c;

	if (comm->devMem)
		return ncclSuccess;
	NCCLCHECK(ncclRtCalloc(comm->rt, &comm->devMem, size));
	for (c = 0; c < MAXCHANNELS; c++)
		comm->channels[c].devPeers = (struct ncclPeer *)comm->devMem +
					     (size_t)c * (size_t)comm->nRanks;
	return ncclSuccess;
}

/* Connect, then copy the connector to its device-visible mirror. */
static ncclResult_t mlap2p_connect_one(struct ncclComm *comm,
				       struct mlap2p_conn *conn,
				       struct ncclConnect *data)
{
	struct ncclChannel *ch = &comm->channels[conn->channel];
	struct ncclConnector *dev = conn->send ? &ch->devPeers[conn->peer].send :
						 &ch->devPeers[conn->peer].recv;

	NCCLCHECK(conn->c.transportComm->connect(comm, data, 1, comm->rank,
						 &conn->c));
	conn->c.connected = 1;
	NCCLCHECK(ncclRtMemcpy(comm->rt, dev, &conn->c,
			       sizeof(struct ncclConnector),
			       ncclRtMemcpyHostToDevice));
	conn->dev = dev;
	return ncclSuccess;
}

static ncclResult_t mlap2p_setup_round(struct ncclComm *comm,
				       struct ncclTopoGraph *graph, int i,
				       struct ncclConnect *data, char *touched)
{
	int n = comm->nRanks;
	int recvPeer = (comm->rank - i + n) % n;
	int sendPeer = (comm->rank + i) % n;
	uint32_t recvMask = comm->connectRecv[recvPeer];
	uint32_t sendMask = comm->connectSend[sendPeer];
	struct ncclConnect *recvData = data, *sendData;
	int sendChannels = 0, recvChannels = 0, c;
	int tag = MLAP2P_TAG_CONNECT + i;
	struct ncclPeerInfo *me = comm->peerInfo + comm->rank;

	/* The transports fill only their part of each 128-byte blob; the
	 * rest goes to the peer too, so it must not be this stack's bytes. */
	memset(data, 0, sizeof(*data) * (size_t)(__builtin_popcount(recvMask) +
						   __builtin_popcount(sendMask)));
	for (c = 0; c < MAXCHANNELS; c++) {
		if (!(recvMask & (1U << c)))
			continue;
		NCCLCHECK(selectTransport(comm, graph, me,
					  comm->peerInfo + recvPeer,
					  recvData + recvChannels++,
					  &comm->channels[c].peers[recvPeer].recv.c,
					  c, 0));
	}
	sendData = recvData + recvChannels;
	for (c = 0; c < MAXCHANNELS; c++) {
		if (!(sendMask & (1U << c)))
			continue;
		NCCLCHECK(selectTransport(comm, graph, me,
					  comm->peerInfo + sendPeer,
					  sendData + sendChannels++,
					  &comm->channels[c].peers[sendPeer].send.c,
					  c, 1));
	}

	if (sendPeer == recvPeer) {
		if (recvChannels + sendChannels) {
			NCCLCHECK(bootstrapSend(comm->bootstrap, recvPeer, tag, data,
						(recvChannels + sendChannels) << 7));
			NCCLCHECK(bootstrapRecvSetup(comm->bootstrap, recvPeer,
						     tag, data,
						     (recvChannels + sendChannels) << 7));
			sendData = data;
			recvData = data + sendChannels;
		}
	} else {
		if (recvChannels)
			NCCLCHECK(bootstrapSend(comm->bootstrap, recvPeer, tag,
						recvData, recvChannels << 7));
		if (sendChannels)
			NCCLCHECK(bootstrapSend(comm->bootstrap, sendPeer, tag,
						sendData, sendChannels << 7));
		if (sendChannels)
			NCCLCHECK(bootstrapRecvSetup(comm->bootstrap, sendPeer,
						     tag, sendData,
						     sendChannels << 7));
		if (recvChannels)
			NCCLCHECK(bootstrapRecvSetup(comm->bootstrap, recvPeer,
						     tag, recvData,
						     recvChannels << 7));
	}

	for (c = 0; c < MAXCHANNELS; c++) {
		if (sendMask & (1U << c))
			NCCLCHECK(mlap2p_connect_one(comm,
				&comm->channels[c].peers[sendPeer].send,
				sendData++));
	}
	for (c = 0; c < MAXCHANNELS; c++) {
		if (recvMask & (1U << c))
			NCCLCHECK(mlap2p_connect_one(comm,
				&comm->channels[c].peers[recvPeer].recv,
				recvData++));
	}
	comm->connectRecv[recvPeer] = 0;
	comm->connectSend[sendPeer] = 0;
	if (recvMask)
		touched[recvPeer] = 1;
	if (sendMask)
		touched[sendPeer] = 1;
	return ncclSuccess;
}

MLAP2P_EXPORT ncclResult_t ncclTransportP2pSetup(struct ncclComm *comm,
						 struct ncclTopoGraph *graph)
{
	struct ncclConnect data[2 * MAXCHANNELS];
	ncclResult_t res = ncclSuccess;
	char *touched;
	int i, p, err;

	if (!comm) {
		mlap2p_errno_stash(-EINVAL);
		return ncclInvalidArgument;
	}
	touched = calloc((size_t)comm->nRanks, 1);
	if (!touched) {
		mlap2p_errno_stash(-ENOMEM);
		return ncclSystemError;
	}
	NCCLCHECKGOTO(mlap2p_dev_peers(comm), res, fail);
	for (i = 1; i < comm->nRanks; i++)
		NCCLCHECKGOTO(mlap2p_setup_round(comm, graph, i, data, touched),
			      res, fail);

	/* Nobody leaves while a peer may still be mapping its memory. */
	for (p = 0; p < comm->nRanks; p++)
		if (touched[p])
			NCCLCHECKGOTO(bootstrapSend(comm->bootstrap, p,
						    MLAP2P_TAG_CONNECTED, NULL, 0),
				      res, fail);
	for (p = 0; p < comm->nRanks; p++)
		if (touched[p])
			NCCLCHECKGOTO(bootstrapRecvSetup(comm->bootstrap, p,
							 MLAP2P_TAG_CONNECTED,
							 NULL, 0),
				      res, fail);
	free(touched);
	return ncclSuccess;

fail:
	/*
	 * Tell every peer still counting on us, so it fails now rather than
	 * at its timeout; then drop what is pending (connectors set up so
	 * far are freed at destroy).
	 */
	err = mlap2p_errno_take(res);
	for (p = 0; p < comm->nRanks; p++)
		if (touched[p] || comm->connectSend[p] || comm->connectRecv[p])
			bootstrapSend(comm->bootstrap, p, MLAP2P_TAG_FAILED,
				      NULL, 0);
	mlap2p_errno_stash(err);
	memset(comm->connectSend, 0, sizeof(uint32_t) * (size_t)comm->nRanks);
	memset(comm->connectRecv, 0, sizeof(uint32_t) * (size_t)comm->nRanks);
	free(touched);
	return res;
}

static ncclResult_t mlap2p_free_conn(struct mlap2p_conn *conn)
{
	struct ncclConnector *c = &conn->c;
	ncclResult_t res = ncclSuccess;
	int i;

	if (c->transportComm && c->transportResources)
		res = c->transportComm->free(c->transportResources);
	/* Other ranks' mappings we held on to, now that we are done. */
	for (i = 0; i < (int)ARRAY_SIZE(conn->pins); i++) {
		if (conn->pins[i])
			mlap2p_rt_unpin(conn->pins[i]);
		conn->pins[i] = NULL;
	}
	c->transportResources = NULL;
	c->transportComm = NULL;
	c->connected = 0;
	memset(&c->conn, 0, sizeof(c->conn));
	conn->mode = MLAP2P_CONN_NONE;
	conn->dev = NULL;
	return res;
}

ncclResult_t mlap2p_transport_free_all(struct ncclComm *comm)
{
	ncclResult_t res = ncclSuccess, r;
	int c, p;

	for (c = 0; c < MAXCHANNELS; c++) {
		struct ncclChannel *ch = &comm->channels[c];

		if (!ch->peers)
			continue;
		for (p = 0; p < comm->nRanks; p++) {
			r = mlap2p_free_conn(&ch->peers[p].send);
			if (r != ncclSuccess && res == ncclSuccess)
				res = r;
			r = mlap2p_free_conn(&ch->peers[p].recv);
			if (r != ncclSuccess && res == ncclSuccess)
				res = r;
		}
	}
	return res;
}
