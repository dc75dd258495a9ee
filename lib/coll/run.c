// SPDX-License-Identifier: MIT
/*
 * Collectives: running one, phase by phase.
 */
#include "coll/coll.h"

/* ---- running a collective ---- */

/* All-to-all's own block.  (A broadcast root's and an all-gather's own
 * copies go with their sends: ring.c, mlap2p_isend_tee.) */
static void local_copies(struct cop *o)
{
	size_t bytes = o->count * o->es, at = (size_t)o->c->rank * bytes;

	if (o->kind == K_ALL_TO_ALL && bytes)
		memcpy(o->out + at, o->in + at, bytes);
}

/* Every request @o still holds goes to the orphans. */
void ring_orphan_all(struct cop *o)
{
	if (o->phase == PH_PRE) {
		orphan(o->c, &o->ps);
		orphan(o->c, &o->pr);
	}
	ring_orphan(o);
	for (int i = 0; i < o->npreq; i++)
		orphan(o->c, &o->preq[i]);
	o->npreq = 0;
}

int fail(struct cop *o, int err)
{
	char prev[1024];

	ring_orphan_all(o);
	/* Our addresses may be out: the peer threads must let go of them
	 * before our caller has the buffers back. */
	if (o->direct == DIRECT_CMA)
		direct_live_del(o->c);
	if (err != -EPROTO && err != -EINVAL) {
		snprintf(prev, sizeof(prev), "%s", mlap2p_last_error());
		WARN("%s: rank %d: collective #%u failed: %s%s%s", o->fn,
		     o->c->rank, o->c->seq - 1, mlap2p_strerror(err),
		     prev[0] ? ": " : "", prev);
	}
	o->err = err;
	o->phase = PH_DONE;
	return err;
}

/* After the preamble, @o not direct (or refused): an all-to-all's or a
 * one-shot's pair messages, or the ring.  0 or -errno. */
static int plain_start(struct cop *o)
{
	if (o->kind == K_ALL_TO_ALL ||
	    (o->algo == ALGO_ONESHOT && !oneshot_inline(o))) {
		if (!o->count)
			return 0;
		if (o->kind == K_ALL_REDUCE && avg_pre(o))
			mlap2p_premul(slot_t(o), o->in, o->count, o->dtype,
				      1.0 / o->c->n);
		return pairs_post(o);
	}
	if (o->algo == ALGO_RING)
		ring_setup(o);
	return 0;
}

/* ... and its progress: 1 done, 0 not yet, -errno. */
static int plain_progress(struct cop *o, int *moved)
{
	if (o->npreq)
		return pairs_progress(o, moved);
	if (o->algo == ALGO_RING && o->kind != K_ALL_TO_ALL)
		return ring_progress(o, moved);
	return 1;
}

/* One step of @o: 1 done, 0 not yet, -errno. */
int cop_progress(struct cop *o, int *moved)
{
	struct coll *c = o->c;
	int ret;

	switch (o->phase) {
	case PH_CONNECT:
		if (c->n == 1) {
			o->phase = PH_FINISH;
			*moved = 1;
			return cop_progress(o, moved);
		}
		o->hop = 0;
		o->bad = 0;
		o->ps = o->pr = NULL;
		o->npreq = 0;
		o->nlanes = 0;
		o->direct = direct_offer(o);
		o->drun = 0;
		o->crun = 0;
		o->phase = PH_PRE;
		/* fall through */
	case PH_PRE:
		ret = pre_progress(o, moved);
		if (ret <= 0)
			return ret < 0 ? fail(o, ret) : 0;
		if (o->bad)
			return fail(o, mismatch(o));
		o->phase = PH_CONNECT_ALL;
		*moved = 1;
		/* fall through */
	case PH_CONNECT_ALL:
		if ((o->kind == K_ALL_TO_ALL || o->algo == ALGO_ONESHOT ||
		     direct_all(o)) && !c->allPeers) {
			int *peers = malloc(sizeof(int) * (size_t)c->n), k = 0;

			if (!peers)
				return fail(o, -ENOMEM);
			for (int p = 0; p < c->n; p++)
				if (p != c->rank)
					peers[k++] = p;
			ret = mlap2p_connect_peers(c->api, 1, k, peers, k, peers);
			free(peers);
			if (ret)
				return fail(o, ret);
			c->allPeers = 1;
		}
		local_copies(o);
		ret = o->kind == K_ALL_REDUCE ? direct_start(o) : 0;
		if (!ret && !o->direct)
			ret = plain_start(o);
		if (ret)
			return fail(o, ret);
		o->phase = PH_DATA;
		/* fall through */
	case PH_DATA:
		ret = o->direct ? direct_progress(o, moved) :
				  plain_progress(o, moved);
		if (ret == 2) {	/* refused by address: the way it would have run */
			o->direct = 0;
			ret = plain_start(o);
			if (!ret)
				ret = plain_progress(o, moved);
		}
		if (ret <= 0)
			return ret < 0 ? fail(o, ret) : 0;
		o->npreq = 0;
		o->phase = PH_FINISH;
		*moved = 1;
		/* fall through */
	case PH_FINISH:
		if (c->n == 1) {
			if (o->count && o->out != o->in)
				memmove(o->out, o->in, o->count * o->es);
		} else if (o->kind == K_ALL_REDUCE && o->algo == ALGO_ONESHOT &&
			   !o->direct) {
			oneshot_finish(o);
		}
		if (c->n > 1)
			coll_count(c, o->direct == DIRECT_MAP ? CW_MAP :
				      o->direct ? CW_CMA :
				      o->kind == K_ALL_TO_ALL ? CW_PAIRS :
				      o->algo == ALGO_ONESHOT ? CW_ONESHOT :
				      CW_RING);
		o->phase = PH_DONE;
		return 1;
	}
	return o->err ? o->err : 1;
}

/* Liveness of every rank (not only those we wait on directly): a dead
 * rank further round the ring would otherwise leave us waiting on a live
 * neighbour forever. */
int check_peers(struct cop *o)
{
	struct coll *c = o->c;
	int r, ret;

	if (mlap2p_comm_aborted(c->comm))
		return -ECANCELED;
	if (!c->peerTimeoutMs)
		return 0;
	for (r = 0; r < c->n; r++) {
		if (r == c->rank)
			continue;
		ret = mlap2p_peer_alive(c->comm, r);
		if (!ret)
			continue;
		mlap2p_comm_set_error(c->comm, -ECONNRESET);
		if (ret == -ESRCH)
			WARN("rank %d: peer rank %d (pid %d) died during %s #%u",
			     c->rank, r, c->comm->peerInfo[r].pid,
			     kind_name(o->kind), c->seq - 1);
		else
			WARN("rank %d: the path to peer rank %d failed (%s) during %s #%u",
			     c->rank, r, strerror(-ret), kind_name(o->kind),
			     c->seq - 1);
		return -ECONNRESET;
	}
	return 0;
}

/* Run every op of @ops to its end; ops of one communicator in order. */
int run_ops(struct cop **ops, int n)
{
	uint32_t idle = 0, stalls = 0, yield = ops[0]->c->spinYield;
	int64_t nextCheck = 0, now;	/* 20 ms after the ops first stall:
					 * a call that never waits reads no
					 * clock */
	int left = n, i, j, first = 0;

	while (left) {
		int moved = 0;

		for (i = 0; i < n; i++) {
			struct cop *o = ops[i];
			int blocked = 0, ret;

			if (o->phase == PH_DONE)
				continue;
			for (j = 0; j < i && !blocked; j++)
				blocked = ops[j]->c == o->c &&
					  ops[j]->phase != PH_DONE;
			if (blocked)
				continue;
			ret = cop_progress(o, &moved);
			if (ret) {
				left--;
				moved = 1;
			}
		}
		if (moved) {
			idle = 0;
			continue;
		}
		if (++idle >= yield) {
			idle = yield;
			sched_yield();
		}
		/* The clock every 16 idle rounds: not from idle, which stops
		 * at MLAP2P_SPIN, any number. */
		if (++stalls & 15)
			continue;
		now = mlap2p_now_ms();
		if (!nextCheck)
			nextCheck = now + 20;
		if (now >= nextCheck) {
			nextCheck = now + 20;
			for (i = 0; i < n; i++) {
				int ret;

				if (ops[i]->phase == PH_DONE)
					continue;
				ret = check_peers(ops[i]);
				if (ret) {
					fail(ops[i], ret);
					left--;
				}
			}
		}
	}
	for (i = 0; i < n; i++)
		if (ops[i]->err && !first)
			first = ops[i]->err;
	return first;
}
