// SPDX-License-Identifier: MIT
/*
 * The data plane's queues: starting, stepping and completing operations,
 * checks for aborts and dead peers, and waiting.
 */
#include "dataplane/dp.h"
#include "proto/copy.h"

/* ---- queues ---- */

static const char *dp_what(const struct mlap2p_op *op)
{
	return op->send ? "send to" : "receive from";
}

static void dp_finish(struct mlap2p_op *op, int status)
{
	struct mlap2p_request *req = op->owner;

	req->status = status;
	if (!req->group) {
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
		return;
	}
	/* A group's waiter that left at an abort left it to us (api.c). */
	if (__atomic_exchange_n(&req->done, 1, __ATOMIC_ACQ_REL) ==
	    DP_ABANDONED)
		free(req);
}

/*
 * Start @op, now at the head of @k.  A SIMPLE receive over NET announces
 * its buffer to the proxy, which then receives the steps it has not posted
 * yet straight into it (lib/proto.h, MLAP2P_LINK_NETRECV).
 */
static int dp_start(struct dp_link *k, struct mlap2p_op *op)
{
	int ret = mlap2p_op_start(op);

	/* Only SIMPLE's steps tee as they go (lib/proto/simple.c). */
	if (!ret && op->tee && (op->proto != NCCL_PROTO_SIMPLE ||
				op->mode == MLAP2P_MODE_PULL)) {
		if (op->teeNt)
			mlap2p_copy_nt(op->tee, op->buf, op->bytes);
		else
			memcpy(op->tee, op->buf, op->bytes);
		op->tee = NULL;
	}
	if (!ret && !op->send && op->proto == NCCL_PROTO_SIMPLE &&
	    (k->l.flags & MLAP2P_LINK_NETRECV))
		op->landed = mlap2p_net_land(&k->conn->c, op->buf, op->first,
					     op->left, op->perStep, op->bytes);
	return ret;
}

/* @op ends: the NET proxy receives into its buffer no more. */
static void dp_unland(struct dp_link *k, struct mlap2p_op *op, int status)
{
	struct dp *dp = k->dp;
	long tmo = dp->peerTimeoutMs ? dp->peerTimeoutMs : DP_PEER_TIMEOUT_MS;

	if (!op->landed)
		return;
	op->landed = 0;
	if (!mlap2p_net_unland(&k->conn->c, status ? tmo : 0))
		WARN("rank %d: a receive from rank %d into a cancelled buffer of %zu bytes was still pending after %ld ms",
		     dp->comm->rank, k->l.peer, op->bytes, tmo);
}

/* Pop the head of @k with @status and start what follows. */
void dp_complete(struct dp_link *k, int status)
{
	struct mlap2p_op *op = k->qhead;

	k->qhead = op->next;
	if (!k->qhead)
		k->qtail = NULL;
	k->ops++;
	if (!status && op->proto == NCCL_PROTO_SIMPLE) {
		if (op->mode != MLAP2P_MODE_FIFO &&
		    op->mode != MLAP2P_MODE_REFUSED)
			k->direct++;
		if (op->send && op->split)	/* only SIMPLE sets it */
			k->split++;
	}
	if (status && !k->err)
		k->err = status;
	dp_unland(k, op, status);
	dp_finish(op, status);
	while (k->qhead) {
		int ret = k->err ? k->err : dp_start(k, k->qhead);

		if (!ret)
			break;
		op = k->qhead;
		k->qhead = op->next;
		if (!k->qhead)
			k->qtail = NULL;
		dp_finish(op, ret);
	}
}

/* Fail everything queued on @k with @err (the link is broken). */
/*
 * A receive that offered its buffer's address to a peer process is about
 * to end unfinished: wait until the sender can write into it no more
 * (mlap2p_simple_revoke), or the sender is gone, or the peer timeout.
 */
void dp_withdraw(struct dp_link *k)
{
	struct dp *dp = k->dp;
	int64_t deadline;

	if (!k->qhead || mlap2p_simple_revoke(k->qhead))
		return;
	deadline = mlap2p_now_ms() + (dp->peerTimeoutMs ? dp->peerTimeoutMs :
				      DP_PEER_TIMEOUT_MS);
	while (!mlap2p_simple_revoke(k->qhead)) {
		if (mlap2p_peer_alive(dp->comm, k->l.peer))
			return;
		if (mlap2p_now_ms() > deadline) {
			WARN("rank %d: rank %d did not confirm it stopped writing into a cancelled receive of %zu bytes",
			     dp->comm->rank, k->l.peer, k->qhead->bytes);
			return;
		}
		sched_yield();
	}
}

static void dp_fail_link(struct dp_link *k, int err)
{
	k->err = err;
	dp_withdraw(k);
	while (k->qhead)
		dp_complete(k, err);
}

static void dp_activate(struct dp *dp, struct dp_link *k)
{
	if (k->active)
		return;
	k->active = 1;
	k->activeNext = dp->active;
	dp->active = k;
}

/* Progress the head of @k once; 1 if anything moved (or failed). */
static int dp_step(struct dp *dp, struct dp_link *k)
{
	int net = k->conn->mode == MLAP2P_CONN_NET, moved = 0, ret;

	/* NET: move the link's steps here rather than wait for the proxy
	 * thread (lib/net.c); P2P links have no proxy.  A receive takes what
	 * the pass delivers, a send hands the pass what it just wrote. */
	if (net && !k->conn->send && mlap2p_net_progress(&k->conn->c) > 0)
		moved = 1;
	ret = mlap2p_op_progress(k->qhead);
	if (net && k->conn->send && mlap2p_net_progress(&k->conn->c) > 0)
		moved = 1;
	if (ret == MLAP2P_OP_DONE) {
		dp_complete(k, 0);
		return 1;
	}
	if (ret < 0) {
		struct mlap2p_op *op = k->qhead;

		if (ret == -EPROTO)
			WARN("rank %d: %s rank %d: %zu bytes (%s) do not match what the peer posted",
			     dp->comm->rank, dp_what(op), k->l.peer,
			     op->bytes, mlap2p_proto_name(op->proto));
		else if (ret == -ECANCELED)
			WARN("rank %d: %s rank %d: %zu bytes (%s) cancelled by that rank",
			     dp->comm->rank, dp_what(op), k->l.peer,
			     op->bytes, mlap2p_proto_name(op->proto));
		else if (ret != -ECONNRESET)	/* that one said who */
			WARN("rank %d: %s rank %d failed: %s",
			     dp->comm->rank, dp_what(op), k->l.peer,
			     strerror(-ret));
		mlap2p_comm_set_error(dp->comm, ret);
		dp_fail_link(k, ret);
		return 1;
	}
	return moved || ret == MLAP2P_OP_MOVED;
}

/*
 * Queue @req on its link and start it if the link is idle; @now: also move
 * it at once, so a message that fits (an LL send with credit) completes
 * without entering a wait.
 */
int dp_post(struct dp *dp, struct mlap2p_request *req, int ch, int how,
	    void *buf, void *tee, size_t bytes, int peer, int now)
{
	int send = !!(how & MLAP2P_POST_SEND), ret = 0, proto;
	struct mlap2p_op *op = &req->op;
	struct dp_link *k;

	req->dp = dp;
	req->status = 0;
	req->done = 0;
	req->groupNext = NULL;
	req->poll = NULL;
	req->ext = NULL;
	k = ch < 0 ? dp_link(dp, peer, send, &ret, 0) :
		     dp_link_on(dp, ch, peer, send, &ret, 0);
	if (!k)
		return ret;
	if (k->err)
		return k->err;
	proto = dp_pick(dp, k, bytes);
	if (proto < 0) {
		WARN("rank %d: no protocol may carry %zu bytes (NCCL_PROTO, buffer sizes)",
		     dp->comm->rank, bytes);
		return proto;
	}
	op->link = &k->l;
	op->proto = proto;
	op->send = send;
	op->noPublish = !!(how & MLAP2P_POST_FIFO);
	op->buf = buf;
	op->tee = send ? tee : NULL;
	op->teeNt = !!(how & MLAP2P_POST_TEE_NT);
	op->bytes = bytes;
	op->owner = req;
	op->next = NULL;
	op->landed = 0;		/* dp_start() sets it for NET receives */
	if (k->qtail) {
		k->qtail->next = op;
		k->qtail = op;
		return 0;
	}
	ret = dp_start(k, op);
	if (ret)
		return ret;
	k->qhead = k->qtail = op;
	if (now && dp_step(dp, k) && !k->qhead)
		return 0;	/* done, or failed: req says which */
	dp_activate(dp, k);
	return 0;
}

/* One pass over the active links; 1 if anything moved. */
int dp_progress(struct dp *dp)
{
	struct dp_link **pk = &dp->active;
	int moved = 0;

	dp->pass++;
	while (*pk) {
		struct dp_link *k = *pk;

		moved |= dp_step(dp, k);
		if (!k->qhead) {
			k->active = 0;
			*pk = k->activeNext;
		} else {
			pk = &k->activeNext;
		}
	}
	return moved;
}

/*
 * The word a lone waiting receive can poll instead of passes of
 * dp_progress() (the latency path): only when its link is the only active
 * one and has no proxy to drive.
 */
static int dp_watch(const struct dp *dp, const struct mlap2p_request *req,
		    struct mlap2p_watch *x)
{
	const struct dp_link *k = dp->active;

	if (!k || k->activeNext || k->qhead != &req->op ||
	    k->conn->mode == MLAP2P_CONN_NET)
		return 0;
	return mlap2p_op_watch(&req->op, x);
}

/*
 * Abort and liveness, when the spinner says it is time.  Fails the ops of
 * the links concerned; returns non-zero if anything failed.
 */
int dp_check(struct dp *dp)
{
	struct ncclComm *comm = dp->comm;
	struct dp_link *k, *o;
	int64_t now;
	int failed = 0, c, i;

	dp_dump_poll(dp);
	if (mlap2p_comm_aborted(comm)) {
		while ((k = dp->active)) {
			dp->active = k->activeNext;
			k->active = 0;
			dp_fail_link(k, -ECANCELED);
		}
		return 1;
	}
	if (!dp->peerTimeoutMs)
		return 0;
	now = mlap2p_now_ms();
	if (now < dp->nextLive)
		return 0;
	dp->nextLive = now + dp->liveEveryMs;
	for (k = dp->active; k; k = k->activeNext) {
		int peer = k->l.peer, ret, proto;
		const char *what;
		size_t bytes;

		if (!k->qhead)
			continue;
		ret = mlap2p_peer_alive(comm, peer);
		if (!ret)
			continue;
		what = k->qhead->send ? "a send to" : "a receive from";
		bytes = k->qhead->bytes;
		proto = k->qhead->proto;
		mlap2p_comm_set_error(comm, -ECONNRESET);
		dp_fail_link(k, -ECONNRESET);
		/* Anything else queued for that rank fails too. */
		dp_for_each_link(dp, c, i, o)
			if (o != k && o->l.peer == peer)
				dp_fail_link(o, -ECONNRESET);
		/* Last, so that it is the error the caller reads, after
		 * what failing the ops had to say (dp_unland). */
		if (ret == -ESRCH)
			WARN("rank %d: peer rank %d (pid %d) died; %s it failed (%zu bytes, %s, channel %d)",
			     comm->rank, peer, comm->peerInfo[peer].pid, what,
			     bytes, mlap2p_proto_name(proto), k->l.channel);
		else	/* NET: the peer may live, but nothing reaches it */
			WARN("rank %d: the network path to peer rank %d failed (%s); %s it failed (%zu bytes, %s, channel %d)",
			     comm->rank, peer, strerror(-ret), what, bytes,
			     mlap2p_proto_name(proto), k->l.channel);
		failed = 1;
	}
	if (failed) {	/* drop emptied links from the active list */
		struct dp_link **pk = &dp->active;

		while ((k = *pk)) {
			if (!k->qhead) {
				k->active = 0;
				*pk = k->activeNext;
			} else {
				pk = &k->activeNext;
			}
		}
	}
	return failed;
}

static int dp_all_done(struct mlap2p_request **reqs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (reqs[i] && !__atomic_load_n(&reqs[i]->done, __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

/*
 * Progress until every request of reqs[0..n) is done.  They may belong to
 * several communicators; each is progressed once per round.  A request
 * done already may be one that its communicator's abort or destroy ended:
 * its dp is freed, and nothing here reads it.
 */
void dp_wait_reqs(struct mlap2p_request **reqs, int n)
{
	struct mlap2p_spin spin;
	unsigned int round = 0;
	int i;

	if (dp_all_done(reqs, n))
		return;
	if (n == 1) {	/* the latency path */
		struct dp *dp = reqs[0]->dp;

		mlap2p_spin_init(&spin, dp->spinTight, dp->spinYield);
		while (!reqs[0]->done) {
			struct mlap2p_watch x;
			int w;

			if (reqs[0]->poll) {
				reqs[0]->poll(reqs[0]->ext);
				if (reqs[0]->done)
					break;
			}
			if (dp_progress(dp)) {
				mlap2p_spin_moved(&spin);
				continue;
			}
			w = dp_watch(dp, reqs[0], &x);
			do {
				if (mlap2p_spin_idle(&spin)) {
					dp_check(dp);
					break;
				}
			} while (w && !mlap2p_watch_ready(&x));
		}
		return;
	}
	mlap2p_spin_init(&spin, MLAP2P_SPIN_TIGHT, MLAP2P_SPIN_YIELD);
	for (i = 0; i < n; i++)
		if (reqs[i] && !__atomic_load_n(&reqs[i]->done, __ATOMIC_ACQUIRE) &&
		    reqs[i]->dp->spinYield < spin.yield) {
			spin.yield = reqs[i]->dp->spinYield;
			spin.tight = reqs[i]->dp->spinTight;
		}
	while (!dp_all_done(reqs, n)) {
		int moved = 0, check;

		round++;
		for (i = 0; i < n; i++) {
			struct dp *dp = reqs[i] ? reqs[i]->dp : NULL;

			if (dp && !reqs[i]->done && reqs[i]->poll)
				reqs[i]->poll(reqs[i]->ext);
			if (!dp || reqs[i]->done || dp->pass == round)
				continue;
			moved |= dp_progress(dp);
			dp->pass = round;
		}
		if (moved) {
			mlap2p_spin_moved(&spin);
			continue;
		}
		check = mlap2p_spin_idle(&spin);
		for (i = 0; check && i < n; i++)
			if (reqs[i] && !reqs[i]->done)
				dp_check(reqs[i]->dp);
	}
}
