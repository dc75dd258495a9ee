// SPDX-License-Identifier: MIT
/*
 * NET: the request pool, the send and receive proxies, the completion
 * queue and heartbeats, and the proxy thread (lib/transport/net.c has the
 * design).
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

/* ------------------------------------------------------------------ */
/* Requests: the allocRequest/freeRequest slots                       */
/* ------------------------------------------------------------------ */

ncclResult_t netAllocRequest(struct ncclComm *comm, void **request)
{
	struct net_comm *nc = net_comm_find(comm);
	struct net_req *r;

	*request = NULL;
	if (!nc)
		return ncclInternalError;
	r = nc->freeReqs;
	if (r) {
		nc->freeReqs = r->next;
	} else {
		r = malloc(sizeof(*r));
		if (!r)
			return ncclSystemError;
		r->allNext = nc->allReqs;
		nc->allReqs = r;
	}
	memset(r, 0, offsetof(struct net_req, allNext));
	r->args = NULL;
	r->step = 0;
	r->kind = 0;
	r->cancelled = 0;
	r->reland = 0;
	*request = r;
	return ncclSuccess;
}

ncclResult_t netFreeRequest(struct ncclComm *comm, void *request)
{
	struct net_comm *nc = net_comm_find(comm);
	struct net_req *r = request;

	if (!r)
		return ncclSuccess;
	if (!nc)
		return ncclInternalError;	/* freed with its state */
	r->next = nc->freeReqs;
	nc->freeReqs = r;
	return ncclSuccess;
}

static struct net_req *net_req_get(struct ncclProxyArgs *a, int kind,
				   uint64_t step)
{
	struct ncclTransportComm *tc = a->connector->transportComm;
	void *r;

	if (tc->allocRequest(a->nc->comm, &r) != ncclSuccess)
		return NULL;
	((struct net_req *)r)->args = a;
	((struct net_req *)r)->kind = kind;
	((struct net_req *)r)->step = step;
	return r;
}

static void net_req_put(struct ncclProxyArgs *a, struct net_req *r)
{
	if (r->kind == NET_REQ_RECV && a->rreq[r->step % NCCL_STEPS] == r)
		a->rreq[r->step % NCCL_STEPS] = NULL;
	a->connector->transportComm->freeRequest(a->nc->comm, r);
}

/* ------------------------------------------------------------------ */
/* Send side                                                          */
/* ------------------------------------------------------------------ */

static inline char *net_slot(struct ncclProxyArgs *a, int p, uint64_t step)
{
	return a->buffs[p] + (step % NCCL_STEPS) * a->slot[p];
}

/*
 * Is LL step @s (size @n announced) fully written?  Then gather its
 * payload into @out.  The wrap step (flag 0) carries nothing.
 */
static int net_ll_gather(struct ncclProxyArgs *a, uint64_t s, size_t n,
			 char *out, size_t *len)
{
	const uint64_t *line = (const uint64_t *)net_slot(a, NCCL_PROTO_LL, s);

	if (!mlap2p_ll_flag(s)) {
		*len = 0;
		return 1;
	}
	if (n > a->payload[NCCL_PROTO_LL])
		return -EPROTO;
	if (mlap2p_ll_take_slot(line, s, out, n, 0) < mlap2p_ll_lines(n))
		return 0;
	*len = n;
	return 1;
}

static int net_ll128_gather(struct ncclProxyArgs *a, uint64_t s, size_t n,
			    char *out, size_t *len)
{
	const uint64_t *base = (const uint64_t *)net_slot(a, NCCL_PROTO_LL128, s);

	if (n > a->payload[NCCL_PROTO_LL128])
		return -EPROTO;
	if (mlap2p_ll128_take_slot(base, s, out, n, 0) < mlap2p_ll128_lines(n))
		return 0;
	*len = n;
	return 1;
}

/*
 * Line 0 of every send-side LL slot holds, whenever the proxy is not
 * looking at a posted LL step, flags that no step of that slot can carry:
 * steps of slot j have flags = j + 1 (mod 8), the scrub value is off by 4.
 * So an LL flag match on line 0 always means "LL step s", even at the
 * 32-bit wrap and however long the connection has not used LL.
 */
void net_ll_scrub(struct ncclProxyArgs *a, uint64_t s)
{
	uint64_t *line = (uint64_t *)net_slot(a, NCCL_PROTO_LL, s);

	mlap2p_ll_store(line, 0, mlap2p_ll_flag(s + 4));
}

static inline int net_reg_holds(const struct net_reg *g, const char *ptr,
				size_t len)
{
	return g->mr && ptr >= g->base && len <= g->size &&
	       (size_t)(ptr - g->base) <= g->size - len;
}

/* The registered region [ptr, ptr+len) lies in; @a->nc->lock held. */
static struct net_reg *net_reg_find(struct ncclProxyArgs *a, const char *ptr,
				    size_t len)
{
	struct net_reg *g = a->lastReg;

	if (g && net_reg_holds(g, ptr, len))
		return g;
	for (g = a->nc->regs; g; g = g->next)
		if (net_reg_holds(g, ptr, len))
			return a->lastReg = g;
	return NULL;
}

/*
 * What step @s is, once the data plane posted it.  The sender announces
 * every step's size in sizesFifo before its data (SIMPLE: before tail;
 * LL, LL128: before the lines).  Line 0's flag says LL or LL128 (then the
 * announced size says where the step ends); a step whose flags do not
 * match is SIMPLE once tail has passed it (tail passing s also means every
 * line of earlier steps is visible, since the sender writes steps in
 * order).  sizesFifo is read only after an acquire that orders it: SIMPLE
 * writes it with a plain store.  0 = not yet, 1 = ready (@proto, @buf,
 * @len), -errno.
 */
static int net_send_ready(struct ncclProxyArgs *a, uint64_t s, int *proto,
			  char **buf, size_t *len, void **desc)
{
	int *sizes = a->recvMem->sizesFifo;
	int slot = (int)(s % NCCL_STEPS);
	const uint64_t *line;
	uint64_t tail;
	char *out = a->aux + (size_t)slot * a->auxStep;
	void *ptr;
	int n;

	tail = __atomic_load_n(&a->recvMem->tail, __ATOMIC_ACQUIRE);
	if (a->payload[NCCL_PROTO_LL]) {
		line = (const uint64_t *)net_slot(a, NCCL_PROTO_LL, s);
		if ((uint32_t)(__atomic_load_n(&line[0], __ATOMIC_ACQUIRE) >> 32) ==
		    mlap2p_ll_flag(s)) {
			n = __atomic_load_n(&sizes[slot], __ATOMIC_ACQUIRE);
			if (n < 0)
				return 0;	/* the announcement is on its way */
			*proto = NCCL_PROTO_LL;
			*buf = out;
			return net_ll_gather(a, s, (size_t)n, out, len);
		}
	}
	if (a->payload[NCCL_PROTO_LL128]) {
		line = (const uint64_t *)net_slot(a, NCCL_PROTO_LL128, s);
		if (__atomic_load_n(&line[MLAP2P_LL128_FLAG_WORD],
				    __ATOMIC_ACQUIRE) == s + 1) {
			n = __atomic_load_n(&sizes[slot], __ATOMIC_ACQUIRE);
			if (n < 0)
				return 0;
			*proto = NCCL_PROTO_LL128;
			*buf = out;
			return net_ll128_gather(a, s, (size_t)n, out, len);
		}
	}
	if (tail <= s)
		return 0;
	n = __atomic_load_n(&sizes[slot], __ATOMIC_RELAXED);
	if (n < 0 || (size_t)n > a->slot[NCCL_PROTO_SIMPLE] ||
	    !a->slot[NCCL_PROTO_SIMPLE])
		return -EPROTO;
	*proto = NCCL_PROTO_SIMPLE;
	*buf = net_slot(a, NCCL_PROTO_SIMPLE, s);
	*len = (size_t)n;
	ptr = __atomic_load_n(&a->recvMem->ptrsFifo[slot], __ATOMIC_RELAXED);
	if (ptr) {	/* in place: from a registered region, or any
			 * buffer when the provider needs no descriptors */
		struct net_reg *g = net_reg_find(a, ptr, (size_t)n);

		if (!g && a->nc->mrLocal)
			return -EFAULT;
		*buf = ptr;
		*desc = g ? g->desc : NULL;
	}
	return 1;
}

/* The send side's proxy slot: send what the data plane posted. */
ncclResult_t netSendProxy(struct ncclProxyArgs *a)
{
	struct net_comm *nc = a->nc;
	struct fid_ep *ep = nc->ep;
	fi_addr_t dest = nc->peers[a->peer].addr;

	a->moved = 0;
	if (a->err || nc->peers[a->peer].err)
		return ncclSuccess;
	while (a->posted < a->done + NCCL_STEPS) {
		uint64_t s = a->posted;
		struct net_req *r;
		size_t len = 0;
		char *buf = NULL;
		void *desc = a->desc;
		int proto = 0, ret;
		ssize_t rc;

		ret = net_send_ready(a, s, &proto, &buf, &len, &desc);
		if (ret < 0) {
			a->err = ret;
			net_peer_fail(nc, a->peer, ret,
				      ret == -EFAULT ?
				      "channel %d: step %llu posted from a buffer no registered region holds" :
				      "channel %d: step %llu posted with a size its FIFO cannot hold",
				      a->channel, (unsigned long long)s);
			return ncclInternalError;
		}
		if (!ret)
			break;
		r = net_req_get(a, NET_REQ_SEND, s);
		if (!r)
			return ncclSystemError;
		rc = fi_tsend(ep, buf, len, desc, dest,
			      a->tagBase | NET_TAG(0, proto, 0, 0, s), &r->ctx);
		if (rc == -FI_EAGAIN) {
			net_req_put(a, r);
			break;
		}
		if (rc) {
			net_req_put(a, r);
			a->err = net_errno(rc);
			net_peer_fail(nc, a->peer, -ECONNRESET,
				      "fi_tsend on channel %d: %s", a->channel,
				      net_strerror((int)rc));
			return ncclSystemError;
		}
		/* Consumed (only now: EAGAIN above retries the same step): the
		 * data plane announces step s + 8 afresh, and LL's line 0
		 * must not look posted until it does; a later step of this
		 * slot is in the slot unless it says otherwise. */
		__atomic_store_n(&a->recvMem->sizesFifo[s % NCCL_STEPS], -1,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&a->recvMem->ptrsFifo[s % NCCL_STEPS], NULL,
				 __ATOMIC_RELAXED);
		if (proto == NCCL_PROTO_LL)
			net_ll_scrub(a, s);
		a->posted = s + 1;
		a->moved = 1;
	}
	return ncclSuccess;
}

static void net_send_done(struct ncclProxyArgs *a, uint64_t step)
{
	a->complete[step % NCCL_STEPS] = 1;
	while (a->done < a->posted && a->complete[a->done % NCCL_STEPS]) {
		a->complete[a->done % NCCL_STEPS] = 0;
		a->done++;
	}
	/* The slots are free again: credit for the data plane's sender. */
	__atomic_store_n(&a->sendMem->head, a->done, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* Receive side                                                       */
/* ------------------------------------------------------------------ */

/*
 * Write received LL or LL128 step @s (payload @n bytes in the landing
 * area, the SIMPLE slot and then aux) into its slot with the sender's
 * writer, so the receiver reads what a P2P sender would have written.
 */
static void net_line_deliver(struct ncclProxyArgs *a, int proto, uint64_t s,
			     size_t n)
{
	size_t first = a->slot[NCCL_PROTO_SIMPLE];
	const char *simple = first ? net_slot(a, NCCL_PROTO_SIMPLE, s) : NULL;
	const char *aux = a->aux + (s % NCCL_STEPS) * a->auxStep;
	uint64_t *line = (uint64_t *)net_slot(a, proto, s);
	size_t slotLines = a->slot[NCCL_PROTO_LL] / MLAP2P_LL_LINE;

	if (proto == NCCL_PROTO_LL128)
		mlap2p_ll128_put_slot(line, s, simple, first, aux, n);
	else if (!mlap2p_ll_flag(s))
		mlap2p_ll_put_wrap_slot(line, slotLines);
	else
		mlap2p_ll_put_slot(line, slotLines, s, simple, first, aux, n);
}

/* Hand received steps to the data plane, in order. */
static void net_recv_deliver(struct ncclProxyArgs *a)
{
	while (a->done < a->posted && a->complete[a->done % NCCL_STEPS]) {
		uint64_t s = a->done;
		int slot = (int)(s % NCCL_STEPS);
		size_t n = a->rlen[slot];

		switch (a->rproto[slot]) {
		case NCCL_PROTO_LL:
		case NCCL_PROTO_LL128:
			net_line_deliver(a, a->rproto[slot], s, n);
			break;
		default:
			__atomic_store_n(&a->recvMem->sizesFifo[slot], (int)n,
					 __ATOMIC_RELAXED);
			/* where it is: the slot (NULL) or the receive buffer */
			__atomic_store_n(&a->recvMem->ptrsFifo[slot],
					 a->landed[slot], __ATOMIC_RELAXED);
			break;
		}
		a->landed[slot] = NULL;
		a->complete[slot] = 0;
		a->done = s + 1;
		__atomic_store_n(&a->recvMem->tail, a->done, __ATOMIC_RELEASE);
		a->moved = 1;
	}
}

/*
 * Where step @s's receive may be posted other than its slot: into the
 * receive buffer that mlap2p_net_land() announced, if @s is one of its
 * steps and the provider needs no descriptor for it.  NULL: the slot.
 */
char *net_landing(struct ncclProxyArgs *a, uint64_t s, size_t *len)
{
	size_t off;

	if (!a->winBuf || s < a->winFirst || s - a->winFirst >= a->winSteps ||
	    a->nc->mrLocal)
		return NULL;
	off = (size_t)(s - a->winFirst) * a->winPer;
	*len = a->winBytes - off < a->winPer ? a->winBytes - off : a->winPer;
	return *len ? a->winBuf + off : NULL;
}

/*
 * Post the receive of step @s: into the receive buffer if it lands there
 * (net_landing), else into its slot.  0, 1 when the provider is full (try
 * again later) or -errno (the connection is broken).
 */
static int net_recv_post(struct ncclProxyArgs *a, uint64_t s)
{
	struct net_comm *nc = a->nc;
	uint64_t tag = a->tagBase | NET_TAG(0, 0, 0, 0, s);
	void *desc[2] = { a->desc, a->desc };
	struct iovec iov[2];
	struct net_req *r;
	size_t cnt = 0, landLen;
	char *land;
	ssize_t rc;

	if (a->slot[NCCL_PROTO_SIMPLE]) {
		iov[cnt].iov_base = net_slot(a, NCCL_PROTO_SIMPLE, s);
		iov[cnt++].iov_len = a->slot[NCCL_PROTO_SIMPLE];
	}
	if (a->auxStep) {
		iov[cnt].iov_base = a->aux + (s % NCCL_STEPS) * a->auxStep;
		iov[cnt++].iov_len = a->auxStep;
	}
	land = net_landing(a, s, &landLen);
	r = net_req_get(a, NET_REQ_RECV, s);
	if (!r)
		return -ENOMEM;
	if (land)
		rc = fi_trecv(nc->ep, land, landLen, NULL, FI_ADDR_UNSPEC, tag,
			      NET_IGNORE_PROTO, &r->ctx);
	else if (cnt == 1)
		rc = fi_trecv(nc->ep, iov[0].iov_base, iov[0].iov_len,
			      a->desc, FI_ADDR_UNSPEC, tag, NET_IGNORE_PROTO,
			      &r->ctx);
	else
		rc = fi_trecvv(nc->ep, iov, desc, cnt, FI_ADDR_UNSPEC, tag,
			       NET_IGNORE_PROTO, &r->ctx);
	if (rc == -FI_EAGAIN) {
		net_req_put(a, r);
		return 1;
	}
	if (rc) {
		net_req_put(a, r);
		a->err = net_errno(rc);
		net_peer_fail(nc, a->peer, -ECONNRESET,
			      "fi_trecv on channel %d: %s", a->channel,
			      net_strerror((int)rc));
		return a->err;
	}
	a->landed[s % NCCL_STEPS] = land;
	a->rreq[s % NCCL_STEPS] = r;
	a->moved = 1;
	return 0;
}

/* The receive side's proxy slot: keep a receive posted per free slot. */
ncclResult_t netRecvProxy(struct ncclProxyArgs *a)
{
	struct net_comm *nc = a->nc;
	uint64_t head, s;
	int ret;

	a->moved = 0;
	net_recv_deliver(a);
	if (a->err || nc->peers[a->peer].err)
		return ncclSuccess;
	/* Receives mlap2p_net_land() took back from their slots. */
	for (s = a->done; a->repost && s < a->posted; s++) {
		unsigned int bit = 1U << (s % NCCL_STEPS);

		if (!(a->repost & bit))
			continue;
		ret = net_recv_post(a, s);
		if (ret < 0)
			return ncclSystemError;
		if (ret)
			return ncclSuccess;
		a->repost &= ~bit;
	}
	head = __atomic_load_n(&a->sendMem->head, __ATOMIC_ACQUIRE);
	while (a->posted < head + NCCL_STEPS &&
	       a->posted < a->done + (uint64_t)nc->rxDepth) {
		ret = net_recv_post(a, a->posted);
		if (ret < 0)
			return ncclSystemError;
		if (ret)
			break;
		a->posted++;
	}
	return ncclSuccess;
}

static void net_recv_done(struct ncclProxyArgs *a, uint64_t step,
			  const struct fi_cq_tagged_entry *e)
{
	struct net_comm *nc = a->nc;
	int slot = (int)(step % NCCL_STEPS), proto = NET_TAG_PROTO(e->tag);
	size_t max = proto < NCCL_NUM_PROTOCOLS ?
		     (proto == NCCL_PROTO_SIMPLE ? a->slot[proto] :
						  a->payload[proto]) : 0;

	nc->peers[a->peer].lastHeard = mlap2p_now_ms();
	if (proto >= NCCL_NUM_PROTOCOLS || e->len > max ||
	    (proto != NCCL_PROTO_SIMPLE && !a->slot[proto])) {
		a->err = -EPROTO;
		net_peer_fail(nc, a->peer, -EPROTO,
			      "channel %d: step %llu arrived as %zu bytes of protocol %d, which this FIFO cannot hold",
			      a->channel, (unsigned long long)step, e->len, proto);
		return;
	}
	if (a->landed[slot] && proto != NCCL_PROTO_SIMPLE) {
		a->err = -EPROTO;
		net_peer_fail(nc, a->peer, -EPROTO,
			      "channel %d: step %llu arrived as protocol %d where a SIMPLE receive was posted",
			      a->channel, (unsigned long long)step, proto);
		return;
	}
	a->rproto[slot] = (uint8_t)proto;
	a->rlen[slot] = (uint32_t)e->len;
	a->complete[slot] = 1;
	net_recv_deliver(a);
}

/* ------------------------------------------------------------------ */
/* The proxy thread                                                   */
/* ------------------------------------------------------------------ */

static void net_hb_post(struct net_comm *nc, int i)
{
	ssize_t rc;

	nc->hb[i].kind = NET_REQ_HB;
	rc = fi_trecv(nc->ep, &nc->hbBuf[i], sizeof(nc->hbBuf[i]), NULL,
		      FI_ADDR_UNSPEC, NET_TAG(NET_TYPE_HB, 0, 0, 0, 0),
		      NET_IGNORE_SRC | 0xffffffffULL, &nc->hb[i].ctx);
	/* EAGAIN: reposted by the next pass (args == NULL marks it). */
	nc->hb[i].args = rc ? NULL : (struct ncclProxyArgs *)nc;
}

static void net_heartbeats(struct net_comm *nc, int64_t now)
{
	int r, i;

	for (i = 0; i < NET_HB_RECVS; i++)
		if (!nc->hb[i].args)
			net_hb_post(nc, i);
	if (!nc->timeoutMs || now < nc->nextHb)
		return;
	nc->nextHb = now + nc->hbEveryMs;
	for (r = 0; r < nc->comm->nRanks; r++) {
		struct net_peer *p = &nc->peers[r];

		if (!p->conns || p->err || p->addr == FI_ADDR_NOTAVAIL)
			continue;
		/* Best effort: a full queue just skips a beat. */
		fi_tinject(nc->ep, &nc->hbOut, sizeof(nc->hbOut), p->addr,
			   NET_TAG(NET_TYPE_HB, 0, 0, nc->comm->rank, 0));
		if (now - p->lastHeard > nc->timeoutMs)
			net_peer_fail(nc, r, -EHOSTDOWN,
				      "nothing arrived from it for %lld ms (MLAP2P_PEER_TIMEOUT=%ld ms); the link is down or the peer is stuck",
				      (long long)(now - p->lastHeard),
				      nc->timeoutMs);
	}
}

int net_poll_cq(struct net_comm *nc)
{
	struct fi_cq_tagged_entry e[NET_CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t n, i;

	n = fi_cq_read(nc->cq, e, NET_CQ_BATCH);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct net_req *r;
		char buf[128] = "";

		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(nc->cq, &err, 0) != 1)
			return 0;
		r = err.op_context;
		if (!r)
			return 1;
		if (r->kind == NET_REQ_HB) {
			r->args = NULL;	/* repost */
			return 1;
		}
		/*
		 * Only mlap2p_net_unland() cancels requests for good
		 * (receives into a buffer its receiver gave up), and
		 * mlap2p_net_land() to post them again in place; one the
		 * provider cancelled while the communicator runs is a lost
		 * step, and waiting on it would hang both ends with every
		 * heartbeat fine.
		 */
		if (r->cancelled) {	/* mlap2p_net_unland(): step lost */
			if (!r->args->err)
				r->args->err = -ECANCELED;
		} else if (r->reland && err.err == FI_ECANCELED) {
			/* mlap2p_net_land(): post it where it lands */
			r->args->repost |= 1U << (r->step % NCCL_STEPS);
			r->args->moved = 1;
		} else if (err.err != FI_ECANCELED ||
			   !__atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE)) {
			fi_cq_strerror(nc->cq, err.prov_errno, err.err_data,
				       buf, sizeof(buf));
			r->args->err = -ECONNRESET;
			net_peer_fail(nc, r->args->peer, -ECONNRESET,
				      "%s of step %llu on channel %d: %s%s%s",
				      r->kind == NET_REQ_SEND ? "send" : "receive",
				      (unsigned long long)r->step,
				      r->args->channel, net_strerror(err.err),
				      buf[0] ? " / " : "", buf);
		}
		net_req_put(r->args, r);
		return 1;
	}
	if (n < 0) {
		WARN("NET: rank %d: fi_cq_read: %s", nc->comm->rank,
		     net_strerror((int)n));
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct net_req *r = e[i].op_context;
		struct ncclProxyArgs *a;

		if (!r)
			continue;
		if (r->kind == NET_REQ_HB) {
			int src = NET_TAG_SRC(e[i].tag);

			if (src < nc->comm->nRanks)
				nc->peers[src].lastHeard = mlap2p_now_ms();
			net_hb_post(nc, (int)(r - nc->hb));
			continue;
		}
		a = r->args;
		if (r->kind == NET_REQ_SEND)
			net_send_done(a, r->step);
		else
			net_recv_done(a, r->step, &e[i]);
		net_req_put(a, r);
	}
	return 1;
}

/*
 * One proxy pass for the communicator of NET connector @c, from a thread
 * that waits on it (the data plane's wait loop): the rank that waits for a
 * step moves it itself instead of handing over to the proxy thread, which
 * costs a context switch whenever ranks and proxies share cores.  Only if
 * the proxy lock is free; > 0 if something moved.
 */
int mlap2p_net_progress(struct ncclConnector *c)
{
	struct ncclProxyArgs *a = c->proxyAppend, *b;
	struct net_comm *nc, *saved = net_tls;
	int moved;

	if (!a || !a->nc || !a->active)
		return 0;
	nc = a->nc;
	__atomic_add_fetch(&nc->helps, 1, __ATOMIC_RELAXED);
	if (pthread_mutex_trylock(&nc->lock))
		return 0;
	net_tls = nc;
	moved = net_poll_cq(nc);
	for (b = nc->conns; b; b = b->next) {
		b->connector->transportComm->proxy(b);
		moved |= b->moved;
	}
	net_tls = saved;
	pthread_mutex_unlock(&nc->lock);
	return moved;
}

/*
 * Idle policy.  Nothing tells the proxy that the data plane posted a step
 * (it only writes the FIFO), so it polls: tight for NET_SPIN_POLLS passes,
 * then yielding the CPU (ranks and proxies may outnumber cores) for
 * NET_YIELD_MS, then napping, longer once a communicator has been idle for
 * NET_NAP_MS.  A busy stream never leaves the first two phases.  While a
 * rank waits on NET it runs the passes itself (mlap2p_net_progress), so
 * then the proxy thread naps and leaves it the CPU (net_proxy_yield), up
 * to NET_HELPED_MAX_US at a time while the rank keeps polling.  A rank
 * hands what it posts to the fabric itself before it returns (dp_step()
 * runs a send's pass after the op), so the proxy's naps delay only what
 * nobody waits for: late completions and the provider's own protocol.
 */
#define NET_SPIN_POLLS		16
#define NET_YIELD_MS		20
#define NET_NAP_MS		1000
#define NET_HELPED_MAX_US	1600

/*
 * While a rank polls for us (mlap2p_net_progress() counts nc->helps),
 * stay out of its way: a pass here holds the lock its passes need and
 * races it for the provider's sockets, and waking at all preempts it on
 * a host with fewer cores than ranks plus proxies.  Sleep 50 us, doubling
 * up to NET_HELPED_MAX_US while the rank keeps polling; send the
 * heartbeats when due.  Called and returns with @nc->lock held.
 */
static void net_proxy_yield(struct net_comm *nc, unsigned int *helps,
			    int64_t *nextTick)
{
	long us = 50;

	pthread_mutex_unlock(&nc->lock);
	do {
		struct timespec ts = { 0, us * 1000 };
		int64_t now;

		*helps = __atomic_load_n(&nc->helps, __ATOMIC_RELAXED);
		nanosleep(&ts, NULL);
		now = mlap2p_now_ms();
		if (now >= *nextTick) {
			pthread_mutex_lock(&nc->lock);
			net_heartbeats(nc, now);
			pthread_mutex_unlock(&nc->lock);
			*nextTick = now + 10;
		}
		if (us < NET_HELPED_MAX_US)
			us *= 2;
	} while (*helps != __atomic_load_n(&nc->helps, __ATOMIC_RELAXED) &&
		 !__atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE));
	while (__atomic_load_n(&nc->want, __ATOMIC_ACQUIRE))
		sched_yield();
	pthread_mutex_lock(&nc->lock);
}

void *net_proxy_main(void *arg)
{
	struct net_comm *nc = arg;
	unsigned int idle = 0, helps = 0;
	int64_t now, nextTick = 0, idleSince = 0;

	net_tls = nc;
	mlap2p_log_set_core(nc->comm->cudaDev);
	pthread_mutex_lock(&nc->lock);
	while (!__atomic_load_n(&nc->stop, __ATOMIC_ACQUIRE)) {
		struct ncclProxyArgs *a;
		int moved;

		if (helps != __atomic_load_n(&nc->helps, __ATOMIC_RELAXED)) {
			net_proxy_yield(nc, &helps, &nextTick);
			idle = 0;
			continue;
		}
		moved = net_poll_cq(nc);
		for (a = nc->conns; a; a = a->next) {
			a->connector->transportComm->proxy(a);
			moved |= a->moved;
		}
		if (moved || ++idle % 64 == 0) {
			now = mlap2p_now_ms();
			if (now >= nextTick) {
				net_heartbeats(nc, now);
				nextTick = now + 10;
			}
		}
		if (moved) {
			idle = 0;
			if (!__atomic_load_n(&nc->want, __ATOMIC_ACQUIRE))
				continue;
		}
		/* Idle (or wanted): let others in, then back off. */
		pthread_mutex_unlock(&nc->lock);
		if (idle == 1)
			idleSince = mlap2p_now_ms();
		if (idle < NET_SPIN_POLLS) {
			mlap2p_cpu_relax();
		} else {
			int64_t quiet = mlap2p_now_ms() - idleSince;
			struct timespec ts = { 0, 0 };

			if (quiet < NET_YIELD_MS) {
				sched_yield();
			} else {
				ts.tv_nsec = quiet < NET_NAP_MS ? 50000 : 1000000;
				nanosleep(&ts, NULL);
			}
		}
		while (__atomic_load_n(&nc->want, __ATOMIC_ACQUIRE))
			sched_yield();
		pthread_mutex_lock(&nc->lock);
	}
	pthread_mutex_unlock(&nc->lock);
	return NULL;
}
