// SPDX-License-Identifier: GPL-2.0
/*
 * An interposer for lib_interpose_test: another library that defines the
 * seed's exported names (the transport table, the P2P vtable, the
 * framework drivers).  The test links it ahead of libmlap2p.so, so every
 * lookup by name finds these first; libmlap2p must keep using its own.
 * Using any of these would fail: the vtable has no functions and the
 * drivers count the call and return an error.
 */
#include <mlap2p/transport.h>

int interpose_calls;

struct ncclTransport p2pTransport = { .name = "INTERPOSED" };
struct ncclTransport netTransport = { .name = "INTERPOSED" };
struct ncclTransport *ncclTransports[2] = { &p2pTransport, &netTransport };

ncclResult_t ncclTransportP2pConnect(struct ncclComm *comm, int channelId,
				     int nrecv, int *peerRecv, int nsend,
				     int *peerSend)
{
	(void)comm;
	(void)channelId;
	(void)nrecv;
	(void)peerRecv;
	(void)nsend;
	(void)peerSend;
	__atomic_add_fetch(&interpose_calls, 1, __ATOMIC_RELAXED);
	return ncclInternalError;
}

ncclResult_t ncclTransportP2pSetup(struct ncclComm *comm,
				   struct ncclTopoGraph *graph)
{
	(void)comm;
	(void)graph;
	__atomic_add_fetch(&interpose_calls, 1, __ATOMIC_RELAXED);
	return ncclInternalError;
}
