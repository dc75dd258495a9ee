/* SPDX-License-Identifier: MIT */
/*
 * lib/net.h: the NET transport (ncclTransports[1], lib/net.c) as the rest
 * of the library sees it.
 *
 * NET moves a connection's FIFO over libfabric (Debian's libfabric1, loaded
 * with dlopen when first needed; the `tcp` provider by default).  Its host
 * proxy thread, one per communicator, is what makes the data plane's
 * primitives the same for P2P and NET: on the send side the data plane
 * posts into a local FIFO and the proxy sends each posted step; on the
 * receive side the proxy receives into the local FIFO and advances tail.
 *
 * Environment (docs/net.md):
 *   MLAP2P_NET_DISABLE=1        NET never connects (canConnect says no)
 *   MLAP2P_NET_PROVIDER=<name>  libfabric provider (default "tcp"; FI_PROVIDER
 *                               is honoured by libfabric itself when set)
 *   NCCL_SOCKET_IFNAME          the interface, as for the bootstrap
 *   MLAP2P_PEER_TIMEOUT         silence after which a NET peer is declared
 *                               unreachable (the data plane's peer timeout)
 *   MLAP2P_NET_REG=0            never register send buffers: SIMPLE sends
 *                               from mlap2p_mem_alloc() memory copy through
 *                               the FIFO like any other
 */
#ifndef MLAP2P_NET_H
#define MLAP2P_NET_H

#include <stddef.h>
#include <stdint.h>

struct ncclComm;

/*
 * 0 while the NET path to @rank is healthy, or when there is no NET
 * connection to it; otherwise the -errno the proxy saw: -EHOSTDOWN when
 * the peer fell silent for longer than MLAP2P_PEER_TIMEOUT (a cut link),
 * -ECONNRESET when the fabric reported an error on the path.  The proxy
 * has already logged a WARN naming the peer.  Called by
 * mlap2p_peer_alive(), so every data-plane wait notices a dead network
 * exactly as it notices a dead process.
 */
int mlap2p_net_peer_alive(struct ncclComm *comm, int rank);

/*
 * What ncclPeerInfo.netHash carries: a hash of the name of the libfabric
 * provider NET would use from this process, never 0; 0 when NET is
 * disabled or there is no provider.  netCanConnect() compares the two ends.
 */
uint64_t mlap2p_net_provider_hash(void);

struct ncclConnector;

/*
 * One pass of the NET proxy for the communicator of connector @c, called
 * by a rank waiting on a NET connection (the data plane's wait loop), so
 * the waiting thread moves its own steps instead of handing them to the
 * proxy thread.  Skips (0) while the proxy thread is busy; > 0 if anything
 * moved.  @c must be a connected NET connector.
 */
int mlap2p_net_progress(struct ncclConnector *c);

/*
 * Send in place (lib/proto.h, MLAP2P_LINK_NETPTR): 1 when the proxy of
 * NET send connector @c may send [buf, buf+bytes) straight from the
 * buffer, i.e. it lies in one region from mlap2p_mem_alloc() that the
 * fabric registered (once per region and communicator, on first use;
 * registering a region drops the cached ones it overlaps or that were
 * freed); 0 when the slots must carry it (not a region, the provider
 * refused the registration, MLAP2P_NET_REG=0).  Never an error.
 */
int mlap2p_net_reg(struct ncclConnector *c, const void *buf, size_t bytes);

/*
 * Receive in place (lib/proto.h, MLAP2P_LINK_NETRECV).  mlap2p_net_land():
 * the proxy of NET receive connector @c may post the receives of steps
 * [first, first + steps) that it has not posted yet straight into @buf at
 * (step - first) * perStep (@bytes in all), and marks each such step by
 * its address in ptrsFifo[slot] when it delivers it; 1 if so, 0 if this
 * connector cannot (the provider wants descriptors for receive buffers).
 * mlap2p_net_unland(): no more of that; receives into @buf still pending
 * (a receive ending unfinished) are cancelled and waited for up to
 * @timeoutMs; 1 when none is left, 0 at the deadline.  A cancelled step is
 * lost: the connection is broken after that.
 */
int mlap2p_net_land(struct ncclConnector *c, char *buf, uint64_t first,
		    uint64_t steps, size_t perStep, size_t bytes);
int mlap2p_net_unland(struct ncclConnector *c, long timeoutMs);

/*
 * For tests: how many regions the registration cache of NET connector
 * @c's communicator holds (registered or refused) that overlap
 * [buf, buf+bytes); -1 when @c is not a NET connector.  Regions freed and
 * overlapped by a later registration are gone from it.
 */
int mlap2p_net_reg_cached(struct ncclConnector *c, const void *buf,
			  size_t bytes);

#endif /* MLAP2P_NET_H */
