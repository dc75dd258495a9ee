// SPDX-License-Identifier: MIT
/*
 * NET: user regions registered for sends in place, and receive buffers
 * that steps land in (lib/transport/net.c has the design).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/net_int.h"
#include "param.h"
#include "proto/proto.h"
#include "rt/rt.h"
#include "socket.h"
#include "util.h"

/*
 * Before caching region @attr: close and drop every entry that overlaps it
 * or whose region no longer exists (freed, or another region now at its
 * base).  Either way the application freed that region, which it may only
 * do once every send from it completed, so no step in flight uses the
 * entry; the proxies' lastReg is forgotten all the same.  This keeps a
 * pointer in exactly one entry (a stale one would hand the proxy the old
 * pages' descriptor) and the cache no larger than the live regions sent
 * from plus those freed since the last registration.  @nc->lock held.
 */
static void net_reg_prune(struct net_comm *nc,
			  const struct ncclRtPointerAttributes *attr)
{
	struct mlap2p_rt *rt = nc->comm->rt;
	const char *lo = attr->base, *hi = lo + attr->size;
	struct ncclRtPointerAttributes live;
	struct ncclProxyArgs *a;
	struct net_reg **p = &nc->regs, *g;
	int dropped = 0;

	while ((g = *p)) {
		if ((g->base < hi && lo < g->base + g->size) ||
		    rt->ops->pointerGetAttributes(rt, g->base, &live) ||
		    live.base != g->base || live.size != g->size ||
		    live.regionId != g->regionId) {
			*p = g->next;
			net_close_fid(g->mr ? &g->mr->fid : NULL);
			free(g);
			dropped = 1;
		} else {
			p = &g->next;
		}
	}
	if (dropped)
		for (a = nc->all; a; a = a->allNext)
			a->lastReg = NULL;
}

/*
 * May the proxy of send connector @c send [buf, buf+bytes) in place?  Yes
 * when it lies in one region of this communicator's runtime (a buffer from
 * mlap2p_mem_alloc()) that the fabric registered: on first use each region
 * is registered once with fi_mr_reg() and cached per communicator (closed
 * when a later region overlaps it or it was freed, see net_reg_prune(), or
 * with the domain at teardown).  A region the provider refuses (or every
 * region, MLAP2P_NET_REG=0) is remembered as refused: INFO once, and its
 * sends copy through the slots.  Any other buffer goes in place when the
 * provider needs no descriptors (FI_MR_LOCAL unset, as tcp;ofi_rxm) and
 * MLAP2P_NET_REG is not 0, as receives land in place.  1 or 0; never an
 * error.
 */
int mlap2p_net_reg(struct ncclConnector *c, const void *buf, size_t bytes)
{
	struct ncclProxyArgs *a = c->proxyAppend;
	struct ncclRtPointerAttributes attr;
	struct net_comm *nc;
	struct ncclComm *comm;
	struct net_reg *g;
	int ret, ok;

	if (!a || !a->nc || !a->send || !bytes)
		return 0;
	nc = a->nc;
	comm = nc->comm;
	if (comm->rt->ops->pointerGetAttributes(comm->rt, buf, &attr) ||
	    !attr.owned || attr.offset > attr.size ||
	    attr.size - attr.offset < bytes)
		return nc->regOn && !nc->mrLocal;	/* no descriptor needed */
	net_lock(nc);
	for (g = nc->regs; g && (g->base != (char *)attr.base ||
				 g->regionId != attr.regionId ||
				 g->size != attr.size); g = g->next)
		;
	if (g) {
		ok = g->mr != NULL;
		net_unlock(nc);
		return ok;
	}
	/* new here; an entry at the same base is a freed region's */
	net_reg_prune(nc, &attr);
	g = calloc(1, sizeof(*g));
	if (!g) {
		net_unlock(nc);
		return 0;
	}
	g->next = nc->regs;
	nc->regs = g;
	g->base = attr.base;
	g->size = attr.size;
	g->regionId = attr.regionId;
	ret = -EPERM;
	if (nc->regOn)
		ret = net_errno(fi_mr_reg(nc->domain, g->base, g->size, FI_SEND,
					  0, nc->provKey ? 0 : nc->nextKey++,
					  0, &g->mr, NULL));
	if (ret) {
		g->mr = NULL;
		INFO(NCCL_NET, "NET: rank %d: region %p (%zu bytes) not registered (%s); SIMPLE sends from it copy through the FIFO",
		     comm->rank, attr.base, attr.size,
		     nc->regOn ? net_strerror(ret) : "MLAP2P_NET_REG=0");
	} else {
		g->desc = fi_mr_desc(g->mr);
		INFO(NCCL_NET, "NET: rank %d: region %p (%zu bytes) registered with %s; SIMPLE sends from it go in place",
		     comm->rank, attr.base, attr.size, nc->prov);
	}
	ok = g->mr != NULL;
	net_unlock(nc);
	return ok;
}

/*
 * How many entries of the registration cache of NET connector @c's
 * communicator (registered or refused) overlap [buf, buf+bytes); -1 when
 * @c is not a NET connector.  For tests.
 */
int mlap2p_net_reg_cached(struct ncclConnector *c, const void *buf,
			  size_t bytes)
{
	struct ncclProxyArgs *a = c->proxyAppend;
	uintptr_t lo = (uintptr_t)buf, hi = lo + bytes;
	struct net_reg *g;
	int n = 0;

	if (!a || !a->nc)
		return -1;
	if (hi < lo)
		hi = UINTPTR_MAX;
	net_lock(a->nc);
	for (g = a->nc->regs; g; g = g->next)
		if ((uintptr_t)g->base < hi && lo < (uintptr_t)g->base + g->size)
			n++;
	net_unlock(a->nc);
	return n;
}

/*
 * The steps of a new landing window already posted into their slots (a
 * short message's, all of them): cancel those receives, and post each
 * again into the buffer once the provider confirms the cancel
 * (net_poll_cq, netRecvProxy); one that matched its message first
 * completes into the slot as usual.  Only for steps long enough that the
 * copy it saves costs more than the cancel (NET_RELAND_MIN).
 */
static void net_reland(struct ncclProxyArgs *a)
{
	uint64_t s;

	for (s = a->done; s < a->posted; s++) {
		int slot = (int)(s % NCCL_STEPS);
		struct net_req *r = a->rreq[slot];
		size_t len;

		if (!r || r->cancelled || r->reland || a->landed[slot] ||
		    a->complete[slot] || !net_landing(a, s, &len) ||
		    len < NET_RELAND_MIN)
			continue;
		r->reland = 1;
		fi_cancel(&a->nc->ep->fid, &r->ctx);
	}
}

/*
 * Receive in place (lib/proto.h, MLAP2P_LINK_NETRECV): from now on the
 * proxy of NET receive connector @c posts the receive of each step of
 * [first, first + steps) that it has not posted yet straight into @buf,
 * at (step - first) * perStep (up to @bytes in all), takes back those it
 * posted into slots (net_reland), and says so in ptrsFifo[slot] when it
 * delivers the step.  1 if it may; 0 if not (not a
 * NET receive connector, or the provider needs descriptors for receive
 * buffers).
 */
int mlap2p_net_land(struct ncclConnector *c, char *buf, uint64_t first,
		    uint64_t steps, size_t perStep, size_t bytes)
{
	struct ncclProxyArgs *a = c->proxyAppend;

	if (!a || !a->nc || a->send || a->nc->mrLocal || !bytes)
		return 0;
	net_lock(a->nc);
	a->winFirst = first;
	a->winSteps = steps;
	a->winPer = perStep;
	a->winBytes = bytes;
	a->winBuf = buf;
	net_reland(a);
	net_unlock(a->nc);
	return 1;
}

/*
 * The end of mlap2p_net_land()'s window: no receive is posted into that
 * buffer from now on, and those already posted but not complete (only if
 * the receive ends unfinished) are cancelled and waited for, at most
 * @timeoutMs.  Returns 1 when nothing can write into the buffer any more,
 * 0 if a receive into it was still pending at the deadline.  A cancelled
 * step is lost, so the connection is broken (-ECANCELED) after one.
 */
int mlap2p_net_unland(struct ncclConnector *c, long timeoutMs)
{
	struct ncclProxyArgs *a = c->proxyAppend;
	int64_t deadline = mlap2p_now_ms() + timeoutMs;
	struct net_comm *nc;
	int pending, i;

	if (!a || !a->nc)
		return 1;
	nc = a->nc;
	net_lock(nc);
	a->winBuf = NULL;
	for (;;) {
		pending = 0;
		for (i = 0; i < NCCL_STEPS; i++) {
			struct net_req *r = a->rreq[i];

			if (!r || !a->landed[i])
				continue;
			pending = 1;
			if (!r->cancelled) {
				r->cancelled = 1;
				fi_cancel(&nc->ep->fid, &r->ctx);
			}
		}
		if (!pending || mlap2p_now_ms() > deadline)
			break;
		if (!net_poll_cq(nc)) {
			net_unlock(nc);
			sched_yield();
			net_lock(nc);
		}
	}
	net_unlock(nc);
	return !pending;
}
