// SPDX-License-Identifier: MIT
/*
 * Collectives: groups, argument checks and <mlap2p/coll.h>'s calls,
 * blocking and non-blocking.
 */
#include "coll/coll.h"

/* ---- groups ---- */

static __thread struct cop *group_head, *group_tail;
static __thread int group_err;

/* Run the collectives the calling thread recorded in its group. */
static int coll_group_run(void)
{
	struct cop *o, **ops;
	int n = 0, m, i, ret, err;

	if (!group_head) {
		ret = group_err;
		group_err = 0;
		return ret;
	}
	for (o = group_head; o; o = o->groupNext)
		n++;
	ops = calloc((size_t)n, sizeof(*ops));
	if (!ops) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0, o = group_head; o; o = o->groupNext)
		ops[i++] = o;
	/* Enter every communicator, keeping the entered ones in front. */
	ret = 0;
	for (i = m = 0; i < n; i++) {
		struct cop *g = ops[i];
		int e = mlap2p_hold_enter(g->hold);

		/* Aborted, the communicator may be gone: touch nothing of it. */
		if (!e) {
			e = mlap2p_comm_enter(g->c->comm);
			mlap2p_hold_leave(g->hold);
		}
		if (e) {
			WARN("%s: not run: its communicator was aborted before or during mlap2p_group_end",
			     g->fn);
			if (!ret)
				ret = e;
			continue;
		}
		nb_drain(g->c);
		ops[m++] = g;
	}
	err = m ? run_ops(ops, m) : 0;
	if (!ret)
		ret = err;
	for (i = 0; i < m; i++) {
		if (!ret)
			ret = ops[i]->err;
		mlap2p_comm_leave(ops[i]->c->comm);
	}
	free(ops);
out:
	if (group_err && !ret)
		ret = group_err;
	while ((o = group_head)) {
		group_head = o->groupNext;
		mlap2p_hold_put(o->hold, 1);
		free(o);
	}
	group_tail = NULL;
	group_err = 0;
	return ret;
}

/*
 * The public group calls (<mlap2p/dataplane.h>) are this layer's, the one
 * that runs at the outermost end: the collectives recorded in the group
 * first (their progress moves the group's sends and receives too), then
 * the data plane waits for those.  Depth and nesting are the data plane's,
 * per thread, as NCCL's.
 */
MLAP2P_EXPORT int mlap2p_group_start(void)
{
	mlap2p_dp_group_start();
	return 0;
}

MLAP2P_EXPORT int mlap2p_group_end(void)
{
	int depth = mlap2p_dp_group_leave();

	if (depth < 0)
		return mlap2p_err(depth);
	if (depth)
		return 0;
	return mlap2p_err(mlap2p_dp_group_wait(coll_group_run()));
}

/* ---- argument checks and entry ---- */

static int overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return alen && blen && x < y + blen && y < x + alen;
}

static int bad_arg(const char *fn, const char *what)
{
	WARN("%s: %s", fn, what);
	return -EINVAL;
}

/* Checks common to all; 0 or -EINVAL with the reason. */
static int check_args(struct cop *o, struct mlap2p_comm *api, int reduces,
		      int rooted)
{
	char why[160];
	size_t es;
	int n;

	if (!api)
		return bad_arg(o->fn, "comm is NULL");
	n = mlap2p_comm_count(api);
	es = mlap2p_dtype_size(o->dtype);
	if (!es) {
		snprintf(why, sizeof(why),
			 "dtype %d is not an mlap2p_dtype (0..11)", o->dtype);
		return bad_arg(o->fn, why);
	}
	if (reduces && !mlap2p_redop_name(o->op)) {
		snprintf(why, sizeof(why),
			 "op %d is not an mlap2p_redop (0..4)", o->op);
		return bad_arg(o->fn, why);
	}
	if (rooted && (o->root < 0 || o->root >= n)) {
		snprintf(why, sizeof(why), "root %d is not a rank (0..%d)",
			 o->root, n - 1);
		return bad_arg(o->fn, why);
	}
	if (o->count > SIZE_MAX / es / (size_t)n) {
		snprintf(why, sizeof(why), "count %zu overflows", o->count);
		return bad_arg(o->fn, why);
	}
	o->es = es;
	return 0;
}

static int check_bufs(struct cop *o, const void *sendbuf, size_t sbytes,
		      int needSend, void *recvbuf, size_t rbytes,
		      int needRecv, int inplace)
{
	if (needSend && sbytes && !sendbuf)
		return bad_arg(o->fn, "sendbuf is NULL with a non-zero count");
	if (needRecv && rbytes && !recvbuf)
		return bad_arg(o->fn, "recvbuf is NULL with a non-zero count");
	if (needSend && needRecv && !inplace &&
	    overlap(sendbuf, sbytes, recvbuf, rbytes))
		return bad_arg(o->fn,
			       "sendbuf and recvbuf overlap, other than in place");
	return 0;
}

static int pick_algo(struct cop *o)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es;

	if (o->kind != K_ALL_REDUCE || c->n == 1)
		return ALGO_RING;
	if (!(c->algoMask & ALGO_RING))	/* if it fits, else the ring */
		return bytes <= c->chunk && (size_t)c->n <= PAIRS_MAX &&
		       bytes * (size_t)c->n <= 2 * NSLOTS * c->chunk ?
		       ALGO_ONESHOT : ALGO_RING;
	if (!(c->algoMask & ALGO_ONESHOT))
		return ALGO_RING;
	/* Auto: one-shot on 2 ranks up to the threshold. */
	return c->n == 2 && bytes <= c->oneshotMax ? ALGO_ONESHOT : ALGO_RING;
}

/* The 2-rank fast path's scratch (once per communicator): the peer's
 * data, then this rank's sent and own inputs premultiplied (AVG). */
enum { FAST_PEER, FAST_SENT, FAST_OWN, FAST_PARTS };

static char *fast_buf(struct coll *c, int part)
{
	if (!c->fast)
		c->fast = malloc(FAST_PARTS * FAST_MAX);
	return c->fast ? (char *)c->fast + (size_t)part * FAST_MAX : NULL;
}

/*
 * Data of fewer than this many bytes (up to FAST_MAX + 1) goes in the
 * fast path: its header and its data both leave before the peer
 * receives either (mlap2p_dp_sends_ahead_end: LL or LL128, within the
 * FIFO's steps), since both ranks send first.  The protocol and the steps grow
 * with the size only through thresholds, so the sizes that qualify
 * start at 0 (the scan stops at the first that does not: conservative).
 * Kept until mlap2p_set_proto() changes the choice: asking
 * mlap2p_proto_for() on every call took 132 of the 8-byte all-reduce's
 * 940 or so instructions outside its waits (callgrind).
 */
static size_t fast_end(struct coll *c)
{
	unsigned int e = mlap2p_dp_proto_epoch(c->api) + 1;
	int end;

	if (c->fastEpoch == e)
		return c->fastEnd;
	end = mlap2p_dp_sends_ahead_end(c->api, HDR_BYTES, FAST_MAX);
	if (end < 0)	/* an error (no link yet) is not kept */
		return 0;
	c->fastEnd = (size_t)end;
	c->fastEpoch = e;
	return c->fastEnd;
}

/* For a floating AVG, @x premultiplied into scratch part @part. */
static const char *fast_contrib(struct cop *o, const char *x, int part)
{
	char *d;

	if (!x || !avg_pre(o) || !o->count)
		return x;
	d = fast_buf(o->c, part);
	mlap2p_premul(d, x, o->count, o->dtype, 1.0 / o->c->n);
	return d;
}

/*
 * The small-message path: a blocking collective on 2 ranks over the data
 * plane's latency path, its data right behind its header rather than
 * after the preamble's round trip.  The header carries an all-reduce's
 * data up to INLINE_MAX bytes; else, up to FAST_MAX (while LL or LL128
 * carries it), the data follows the header at once, from the caller's
 * buffer.  On 2 ranks
 * that is the whole collective, one step each way: the all-reduce's
 * one-shot, and the one step of the others' rings, in their order of
 * operations (<mlap2p/coll.h>): each rank sends the peer what it needs
 * (all-reduce, all-gather: its input; reduce-scatter: the peer's block;
 * broadcast: the root its input; reduce: the other rank its input).
 * Ranks whose headers differ then fail with the data message unread: a
 * failed collective leaves the communicator unusable anyway.  1 done
 * (*ret says how), 0 not taken.
 */
static int fast_small(struct cop *o, int *ret)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es;
	int me = c->rank, peer = !me, op;
	/* Data in the header only where the request path puts it there too
	 * (the one-shot all-reduce's, pre_fill): a blocking call meets a
	 * grouped or non-blocking one of the other rank, whose ring expects
	 * the data in a message of its own.  A count of 0 is the header
	 * alone, as on the ring (which sends no step): whether a buffer
	 * pointer is NULL must not decide what goes on the wire. */
	int inl = (o->kind == K_ALL_REDUCE && bytes <= INLINE_MAX) || !bytes;
	size_t end;
	const char *snd = NULL, *own = NULL, *theirs;
	char *dst = NULL;	/* where the peer's data goes */

	if (c->n != 2 || o->kind == K_ALL_TO_ALL ||
	    (o->kind == K_ALL_REDUCE && o->algo != ALGO_ONESHOT))
		return 0;
	/* Both ranks send first: nothing may wait for the receive. */
	end = fast_end(c);
	if (!end || (!inl && bytes >= end))
		return 0;
	if ((!inl || avg_pre(o)) && !fast_buf(c, 0))
		return 0;
	switch (o->kind) {
	case K_ALL_REDUCE:
		snd = own = o->in;
		dst = fast_buf(c, FAST_PEER);
		break;
	case K_REDUCE_SCATTER:
		snd = o->in + (size_t)peer * bytes;
		own = o->in + (size_t)me * bytes;
		dst = fast_buf(c, FAST_PEER);
		break;
	case K_ALL_GATHER:
		snd = o->in;
		dst = o->out + (size_t)peer * bytes;
		break;
	case K_BROADCAST:
		if (me == o->root)
			snd = o->in;
		else
			dst = o->out;
		break;
	case K_REDUCE:
		if (me == o->root) {
			own = o->in;
			dst = fast_buf(c, FAST_PEER);
		} else {
			snd = o->in;
		}
		break;
	}
	own = own == snd ? fast_contrib(o, own, FAST_SENT) :
			   fast_contrib(o, own, FAST_OWN);
	snd = o->kind == K_ALL_REDUCE ? own : fast_contrib(o, snd, FAST_SENT);
	memset(o->smsg, 0, HDR_BYTES);
	o->smsg[0] = o->hdr[0];
	o->smsg[1] = o->hdr[1];
	if (snd && inl && bytes)
		memcpy(&o->smsg[2], snd, bytes);
	*ret = mlap2p_send(c->api, o->smsg, HDR_BYTES, c->next);
	if (!*ret && snd && !inl)
		*ret = mlap2p_send(c->api, snd, bytes, c->next);
	if (!*ret)
		*ret = mlap2p_recv(c->api, o->rmsg, HDR_BYTES, c->prev);
	if (*ret) {
		*ret = fail(o, *ret);
		return 1;
	}
	if (o->rmsg[0] != o->hdr[0] || o->rmsg[1] != o->hdr[1]) {
		o->badA = c->prev;
		o->descA[0] = o->rmsg[0];
		o->descA[1] = o->rmsg[1];
		o->badB = me;
		o->descB[0] = o->hdr[0];
		o->descB[1] = o->hdr[1];
		*ret = mismatch(o);
		return 1;
	}
	if (dst && !inl) {
		*ret = mlap2p_recv(c->api, dst, bytes, c->prev);
		if (*ret) {
			*ret = fail(o, *ret);
			return 1;
		}
	}
	theirs = inl ? (const char *)&o->rmsg[2] : dst;
	op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op;
	if (o->count) {
		switch (o->kind) {
		case K_ALL_REDUCE:	/* rank order (dst may be an input) */
			mlap2p_reduce2(o->out, me ? theirs : own,
				       me ? own : theirs, o->count, o->dtype,
				       op);
			finalize(o, o->out, o->count);
			break;
		case K_REDUCE_SCATTER:	/* the ring's: the peer's, then ours */
			mlap2p_reduce2(o->out, theirs, own, o->count,
				       o->dtype, op);
			finalize(o, o->out, o->count);
			break;
		case K_REDUCE:
			if (me != o->root)
				break;
			mlap2p_reduce2(o->out, theirs, own, o->count,
				       o->dtype, op);
			finalize(o, o->out, o->count);
			break;
		case K_ALL_GATHER:
			if (!o->inplace)
				memcpy(o->out + (size_t)me * bytes, o->in, bytes);
			if (inl)
				memcpy(dst, theirs, bytes);
			break;
		case K_BROADCAST:
			if (me == o->root && !o->inplace)
				memcpy(o->out, o->in, bytes);
			else if (me != o->root && inl)
				memcpy(dst, theirs, bytes);
			break;
		}
	}
	coll_count(c, o->kind == K_ALL_REDUCE ? CW_ONESHOT : CW_RING);
	*ret = 0;
	return 1;
}

/* Progress the pending non-blocking ops of @c, oldest first. */
static void nb_progress(struct coll *c)
{
	struct nbop *h;

	while ((h = c->pendHead)) {
		int moved = 0, ret = cop_progress(&h->o, &moved);

		if (!ret) {
			int64_t now;

			if (moved)
				return;
			now = mlap2p_now_ms();
			if (now < c->nextCheck)
				return;
			c->nextCheck = now + 20;
			ret = check_peers(&h->o);
			if (!ret)
				return;
			fail(&h->o, ret);
		}
		c->pendHead = h->next;
		if (!c->pendHead)
			c->pendTail = NULL;
		mlap2p_request_ext_done(h->req, h->o.err);
		free(h);
	}
}

static void nb_poll(void *ext)
{
	nb_progress(((struct nbop *)ext)->o.c);
}

/* Finish every pending non-blocking op of @c (before a blocking one). */
void nb_drain(struct coll *c)
{
	struct nbop *h;
	struct cop **ops;
	int n = 0, i;

	for (h = c->pendHead; h; h = h->next)
		n++;
	if (!n)
		return;
	ops = calloc((size_t)n, sizeof(*ops));
	if (ops) {
		for (i = 0, h = c->pendHead; h; h = h->next)
			ops[i++] = &h->o;
		run_ops(ops, n);
		free(ops);
	} else {
		for (h = c->pendHead; h; h = h->next)
			run_ops(&(struct cop *){ &h->o }, 1);
	}
	while ((h = c->pendHead)) {
		c->pendHead = h->next;
		mlap2p_request_ext_done(h->req, h->o.err);
		free(h);
	}
	c->pendTail = NULL;
}

/* Start (blocking, in a group, or non-blocking into *req) the
 * collective described by *proto. */
static int coll_run(struct mlap2p_comm *api, struct cop *proto,
		    struct mlap2p_request **req)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	struct cop *o, *ops[1];
	struct coll *c;
	int ret;

	if (req && mlap2p_group_depth() > 0)
		return mlap2p_err(bad_arg(proto->fn,
					  "not inside mlap2p_group_start/end: use the blocking form"));
	ret = mlap2p_comm_enter(comm);
	if (ret)
		return mlap2p_err(ret);
	c = coll_get(api, &ret);
	if (!c) {
		mlap2p_comm_leave(comm);
		return mlap2p_err(ret);
	}
	proto->c = c;
	proto->algo = pick_algo(proto);
	hdr_make(proto);
	c->seq++;
	proto->phase = PH_CONNECT;
	if (req) {
		struct nbop *nb = malloc(sizeof(*nb));

		if (!nb) {
			mlap2p_comm_leave(comm);
			return mlap2p_err(-ENOMEM);
		}
		nb->o = *proto;
		nb->next = NULL;
		nb->req = mlap2p_request_ext(api, nb_poll, nb, &ret);
		if (!nb->req) {
			free(nb);
			mlap2p_comm_leave(comm);
			return mlap2p_err(ret);
		}
		if (c->pendTail)
			c->pendTail->next = nb;
		else
			c->pendHead = nb;
		c->pendTail = nb;
		*req = nb->req;
		nb_progress(c);		/* post what can go now */
		mlap2p_comm_leave(comm);
		return 0;
	}
	if (mlap2p_group_depth() > 0) {
		o = malloc(sizeof(*o));
		if (!o) {
			mlap2p_comm_leave(comm);
			if (!group_err)
				group_err = -ENOMEM;
			return mlap2p_err(-ENOMEM);
		}
		*o = *proto;
		o->hold = mlap2p_comm_hold(comm);
		mlap2p_comm_leave(comm);
		o->groupNext = NULL;
		if (group_tail)
			group_tail->groupNext = o;
		else
			group_head = o;
		group_tail = o;
		return 0;
	}
	nb_drain(c);
	if (fast_small(proto, &ret)) {
		mlap2p_comm_leave(comm);
		return mlap2p_err(ret);
	}
	ops[0] = proto;
	ret = run_ops(ops, 1);
	mlap2p_comm_leave(comm);
	return mlap2p_err(ret);
}

static void cop_init(struct cop *o, const char *fn, int nb, int kind,
		     const void *sendbuf, void *recvbuf, size_t count,
		     int dtype, int op, int root)
{
	static const char *const names[2][7] = {
		{ "?", "mlap2p_all_reduce", "mlap2p_broadcast", "mlap2p_reduce",
		  "mlap2p_all_gather", "mlap2p_reduce_scatter",
		  "mlap2p_all_to_all" },
		{ "?", "mlap2p_iall_reduce", "mlap2p_ibroadcast",
		  "mlap2p_ireduce", "mlap2p_iall_gather",
		  "mlap2p_ireduce_scatter", "mlap2p_iall_to_all" },
	};

	memset(o, 0, COP_CLEAR);
	o->fn = fn ? fn : names[nb][kind];
	o->kind = kind;
	o->in = sendbuf;
	o->out = recvbuf;
	o->count = count;
	o->dtype = dtype;
	o->op = op;
	o->root = root;
}

static int do_all_reduce(struct mlap2p_request **req, struct mlap2p_comm *comm,
			 const void *sendbuf, void *recvbuf,
			 size_t count, int dtype, int op)
{
	struct cop o;
	size_t b;
	int ret;

	cop_init(&o, NULL, req != NULL, K_ALL_REDUCE, sendbuf, recvbuf, count, dtype,
		 op, 0);
	ret = check_args(&o, comm, 1, 0);
	if (ret)
		return mlap2p_err(ret);
	b = count * o.es;
	o.inplace = sendbuf == recvbuf;
	ret = check_bufs(&o, sendbuf, b, 1, recvbuf, b, 1, o.inplace);
	if (ret)
		return mlap2p_err(ret);
	return coll_run(comm, &o, req);
}

static int do_broadcast(struct mlap2p_request **req, struct mlap2p_comm *comm,
			const void *sendbuf, void *recvbuf,
			size_t count, int dtype, int root)
{
	struct cop o;
	size_t b;
	int ret, isroot;

	cop_init(&o, NULL, req != NULL, K_BROADCAST, sendbuf, recvbuf, count, dtype,
		 0, root);
	ret = check_args(&o, comm, 0, 1);
	if (ret)
		return mlap2p_err(ret);
	b = count * o.es;
	isroot = mlap2p_comm_rank(comm) == root;
	o.inplace = sendbuf == recvbuf;
	ret = check_bufs(&o, sendbuf, b, isroot, recvbuf, b, 1, o.inplace);
	if (ret)
		return mlap2p_err(ret);
	return coll_run(comm, &o, req);
}

static int do_reduce(struct mlap2p_request **req, struct mlap2p_comm *comm, const void *sendbuf,
		     void *recvbuf, size_t count, int dtype, int op,
		     int root)
{
	struct cop o;
	size_t b;
	int ret, isroot;

	cop_init(&o, NULL, req != NULL, K_REDUCE, sendbuf, recvbuf, count, dtype, op,
		 root);
	ret = check_args(&o, comm, 1, 1);
	if (ret)
		return mlap2p_err(ret);
	b = count * o.es;
	isroot = mlap2p_comm_rank(comm) == root;
	o.inplace = sendbuf == recvbuf;
	ret = check_bufs(&o, sendbuf, b, 1, recvbuf, b, isroot, o.inplace);
	if (ret)
		return mlap2p_err(ret);
	return coll_run(comm, &o, req);
}

static int do_all_gather(struct mlap2p_request **req, struct mlap2p_comm *comm,
			 const void *sendbuf, void *recvbuf,
			 size_t sendcount, int dtype)
{
	struct cop o;
	size_t b;
	int ret, n;

	cop_init(&o, NULL, req != NULL, K_ALL_GATHER, sendbuf, recvbuf, sendcount,
		 dtype, 0, 0);
	ret = check_args(&o, comm, 0, 0);
	if (ret)
		return mlap2p_err(ret);
	b = sendcount * o.es;
	n = mlap2p_comm_count(comm);
	o.inplace = recvbuf && sendbuf ==
		    (char *)recvbuf + (size_t)mlap2p_comm_rank(comm) * b;
	ret = check_bufs(&o, sendbuf, b, 1, recvbuf, b * (size_t)n, 1,
			 o.inplace);
	if (ret)
		return mlap2p_err(ret);
	return coll_run(comm, &o, req);
}

static int do_reduce_scatter(struct mlap2p_request **req, struct mlap2p_comm *comm,
			     const void *sendbuf, void *recvbuf,
			     size_t recvcount, int dtype, int op)
{
	struct cop o;
	size_t b;
	int ret, n;

	cop_init(&o, NULL, req != NULL, K_REDUCE_SCATTER, sendbuf, recvbuf, recvcount,
		 dtype, op, 0);
	ret = check_args(&o, comm, 1, 0);
	if (ret)
		return mlap2p_err(ret);
	b = recvcount * o.es;
	n = mlap2p_comm_count(comm);
	o.inplace = sendbuf && (const char *)sendbuf +
		    (size_t)mlap2p_comm_rank(comm) * b == recvbuf;
	ret = check_bufs(&o, sendbuf, b * (size_t)n, 1, recvbuf, b, 1,
			 o.inplace);
	if (ret)
		return mlap2p_err(ret);
	return coll_run(comm, &o, req);
}

static int do_all_to_all(struct mlap2p_request **req, struct mlap2p_comm *comm,
			 const void *sendbuf, void *recvbuf,
			 size_t count, int dtype)
{
	struct cop o;
	size_t b;
	int ret, n;

	cop_init(&o, NULL, req != NULL, K_ALL_TO_ALL, sendbuf, recvbuf, count, dtype,
		 0, 0);
	ret = check_args(&o, comm, 0, 0);
	if (ret)
		return mlap2p_err(ret);
	n = mlap2p_comm_count(comm);
	b = count * o.es * (size_t)n;
	ret = check_bufs(&o, sendbuf, b, 1, recvbuf, b, 1, 0);
	if (ret)
		return mlap2p_err(ret);
	if (n > PAIRS_MAX)
		return mlap2p_err(bad_arg(o.fn,
					  "more than 64 ranks: not supported"));
	return coll_run(comm, &o, req);
}

/* ---- the API: blocking and non-blocking ---- */

MLAP2P_EXPORT int mlap2p_all_reduce(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype, int op)
{
	return do_all_reduce(NULL, comm, sendbuf, recvbuf, count, dtype, op);
}

MLAP2P_EXPORT int mlap2p_iall_reduce(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype, int op,
				     struct mlap2p_request **req)
{
	if (!req)
		return mlap2p_err(bad_arg("mlap2p_iall_reduce", "req is NULL"));
	*req = NULL;
	return do_all_reduce(req, comm, sendbuf, recvbuf, count, dtype, op);
}

MLAP2P_EXPORT int mlap2p_broadcast(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype, int root)
{
	return do_broadcast(NULL, comm, sendbuf, recvbuf, count, dtype, root);
}

MLAP2P_EXPORT int mlap2p_ibroadcast(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype, int root,
				    struct mlap2p_request **req)
{
	if (!req)
		return mlap2p_err(bad_arg("mlap2p_ibroadcast", "req is NULL"));
	*req = NULL;
	return do_broadcast(req, comm, sendbuf, recvbuf, count, dtype, root);
}

MLAP2P_EXPORT int mlap2p_reduce(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype, int op, int root)
{
	return do_reduce(NULL, comm, sendbuf, recvbuf, count, dtype, op, root);
}

MLAP2P_EXPORT int mlap2p_ireduce(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype, int op, int root,
				 struct mlap2p_request **req)
{
	if (!req)
		return mlap2p_err(bad_arg("mlap2p_ireduce", "req is NULL"));
	*req = NULL;
	return do_reduce(req, comm, sendbuf, recvbuf, count, dtype, op, root);
}

MLAP2P_EXPORT int mlap2p_all_gather(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount, int dtype)
{
	return do_all_gather(NULL, comm, sendbuf, recvbuf, sendcount, dtype);
}

MLAP2P_EXPORT int mlap2p_iall_gather(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount, int dtype,
				     struct mlap2p_request **req)
{
	if (!req)
		return mlap2p_err(bad_arg("mlap2p_iall_gather", "req is NULL"));
	*req = NULL;
	return do_all_gather(req, comm, sendbuf, recvbuf, sendcount, dtype);
}

MLAP2P_EXPORT int mlap2p_reduce_scatter(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount, int dtype, int op)
{
	return do_reduce_scatter(NULL, comm, sendbuf, recvbuf, recvcount, dtype, op);
}

MLAP2P_EXPORT int mlap2p_ireduce_scatter(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount, int dtype, int op,
					 struct mlap2p_request **req)
{
	if (!req)
		return mlap2p_err(bad_arg("mlap2p_ireduce_scatter", "req is NULL"));
	*req = NULL;
	return do_reduce_scatter(req, comm, sendbuf, recvbuf, recvcount, dtype, op);
}

MLAP2P_EXPORT int mlap2p_all_to_all(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype)
{
	return do_all_to_all(NULL, comm, sendbuf, recvbuf, count, dtype);
}

MLAP2P_EXPORT int mlap2p_iall_to_all(struct mlap2p_comm *comm, const void *sendbuf, void *recvbuf, size_t count, int dtype,
				     struct mlap2p_request **req)
{
	if (!req)
		return mlap2p_err(bad_arg("mlap2p_iall_to_all", "req is NULL"));
	*req = NULL;
	return do_all_to_all(req, comm, sendbuf, recvbuf, count, dtype);
}
