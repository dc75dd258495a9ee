// SPDX-License-Identifier: MIT
/*
 * Collectives: the unit geometry and the data phases, on the ring and
 * between pairs (one-shot, all-to-all).
 */
#include "coll/coll.h"

/* ---- unit geometry ---- */

static int mod(int a, int n)
{
	a %= n;
	return a < 0 ? a + n : a;
}

struct unit {
	char *buf;
	size_t bytes;
	int rslot;	/* recv: the R slot it fills; send: R slot to free */
	int pneed;	/* send: its own input, premultiplied into P */
	const char *src; /* pneed: what to premultiply */
	char *copy;	/* send: where this rank's own input goes in its
			 * output (a broadcast root's, an all-gather's first
			 * step), which the send fills as it goes */
};

int avg_pre(const struct cop *o)
{
	return o->op == MLAP2P_AVG && is_float(o->dtype) &&
	       (o->kind == K_ALL_REDUCE || o->kind == K_REDUCE ||
		o->kind == K_REDUCE_SCATTER);
}

static char *slot_r(const struct lane *L, int s)
{
	return L->scratch + (size_t)s * 2 * L->chunk;
}

static char *slot_p(const struct lane *L, int s)
{
	return L->scratch + (size_t)s * 2 * L->chunk + L->chunk;
}

char *slot_t(const struct cop *o)
{
	return o->c->scratch + (size_t)2 * NSLOTS * o->c->chunk;
}

/* All-reduce loop l: the element range of block b. */
static void ar_block(const struct cop *o, const struct lane *L, uint64_t l,
		     int b, size_t *off, size_t *len)
{
	size_t n = (size_t)o->c->n, base = (size_t)l * n * L->E;
	size_t rem = L->count - base, cs, lo, hi;

	if (rem > n * L->E)
		rem = n * L->E;
	cs = (rem + n - 1) / n;
	if (cs > L->E)
		cs = L->E;
	lo = (size_t)b * cs;
	hi = lo + cs;
	if (lo > rem)
		lo = rem;
	if (hi > rem)
		hi = rem;
	*off = base + lo;
	*len = hi - lo;
}

/* Chunk l of a per-rank block of @per elements. */
static void chunk_range(const struct lane *L, uint64_t l, size_t per,
			size_t *off, size_t *len)
{
	size_t lo = (size_t)l * L->E, hi = lo + L->E;

	if (hi > per)
		hi = per;
	*off = lo;
	*len = hi - lo;
}

/* Block position q's rank. */
static int qrank(const struct cop *o, const struct lane *L, int q)
{
	return L->order[mod(q, o->c->n)];
}

static void unit_send(struct cop *o, struct lane *L, uint64_t u,
		      struct unit *x)
{
	int n = o->c->n, pos = L->pos;
	uint64_t l = u / L->T;
	int t = (int)(u % L->T);
	size_t off, len, es = o->es;

	x->rslot = -1;
	x->pneed = 0;
	x->src = NULL;
	x->copy = NULL;
	switch (o->kind) {
	case K_ALL_REDUCE:
		if (t < n - 1) {
			ar_block(o, L, l, mod(pos - t, n), &off, &len);
			x->bytes = len * es;
			if (t == 0) {
				x->buf = (char *)L->in + off * es;
				if (avg_pre(o)) {
					x->pneed = 1;
					x->src = x->buf;
				}
			} else {
				x->rslot = (int)((u - 1) % NSLOTS);
				x->buf = slot_r(L, x->rslot);
			}
		} else {
			ar_block(o, L, l, mod(pos + 1 - (t - (n - 1)), n), &off,
				 &len);
			x->bytes = len * es;
			x->buf = L->out + off * es;
		}
		break;
	case K_ALL_GATHER:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		if (t == 0) {
			x->buf = (char *)L->in + off * es;
			if (!o->inplace)
				x->copy = L->out + ((size_t)o->c->rank *
						    o->count + off) * es;
		} else
			x->buf = L->out + ((size_t)qrank(o, L, pos - t) *
					   o->count + off) * es;
		break;
	case K_REDUCE_SCATTER:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		if (t == 0) {
			x->buf = (char *)L->in + ((size_t)qrank(o, L, pos - 1) *
						  o->count + off) * es;
			if (avg_pre(o)) {
				x->pneed = 1;
				x->src = x->buf;
			}
		} else {
			x->rslot = (int)((u - 1) % NSLOTS);
			x->buf = slot_r(L, x->rslot);
		}
		break;
	case K_BROADCAST:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		x->buf = (L->d == 0 ? (char *)L->in : L->out) + off * es;
		if (L->d == 0 && !o->inplace)
			x->copy = L->out + off * es;
		break;
	case K_REDUCE:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		if (L->d == 1) {
			x->buf = (char *)L->in + off * es;
			if (avg_pre(o)) {
				x->pneed = 1;
				x->src = x->buf;
			}
		} else {
			x->rslot = (int)(u % NSLOTS);
			x->buf = slot_r(L, x->rslot);
		}
		break;
	}
}

/* The receive unit u must have been processed before send u may go. */
static int64_t send_dep(const struct cop *o, const struct lane *L,
			uint64_t u)
{
	switch (o->kind) {
	case K_BROADCAST:
		return L->d == 0 ? -1 : (int64_t)u;
	case K_REDUCE:
		return L->d == 1 ? -1 : (int64_t)u;
	default:
		return u % L->T == 0 ? -1 : (int64_t)u - 1;
	}
}

static void unit_recv(struct cop *o, struct lane *L, uint64_t u,
		      struct unit *x)
{
	int n = o->c->n, pos = L->pos;
	uint64_t l = u / L->T;
	int t = (int)(u % L->T);
	size_t off, len, es = o->es;

	x->rslot = -1;
	x->pneed = 0;
	x->src = NULL;
	x->copy = NULL;
	switch (o->kind) {
	case K_ALL_REDUCE:
		if (t < n - 1) {
			ar_block(o, L, l, mod(pos - t - 1, n), &off, &len);
			x->rslot = (int)(u % NSLOTS);
			x->buf = slot_r(L, x->rslot);
		} else {
			ar_block(o, L, l, mod(pos - (t - (n - 1)), n), &off, &len);
			x->buf = L->out + off * es;
		}
		x->bytes = len * es;
		break;
	case K_ALL_GATHER:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		x->buf = L->out + ((size_t)qrank(o, L, pos - t - 1) * o->count +
				   off) * es;
		break;
	case K_REDUCE_SCATTER:
	case K_REDUCE:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		x->rslot = (int)(u % NSLOTS);
		x->buf = slot_r(L, x->rslot);
		break;
	case K_BROADCAST:
		chunk_range(L, l, L->count, &off, &len);
		x->bytes = len * es;
		x->buf = L->out + off * es;
		break;
	}
}

/* Own contribution of @len elements at @src: premultiplied into T for a
 * floating AVG. */
static const void *contrib(struct cop *o, const char *src, size_t len)
{
	if (!avg_pre(o))
		return src;
	mlap2p_premul(slot_t(o), src, len, o->dtype, 1.0 / o->c->n);
	return slot_t(o);
}

void finalize(struct cop *o, void *dst, size_t len)
{
	if (o->op == MLAP2P_AVG && !is_float(o->dtype))
		mlap2p_divide(dst, len, o->dtype, o->c->n);
}

/* Receive unit u arrived: reduce it.  1 if its R slot is free now. */
static int recv_done(struct cop *o, struct lane *L, uint64_t u)
{
	int n = o->c->n, pos = L->pos;
	uint64_t l = u / L->T;
	int t = (int)(u % L->T), op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op;
	size_t off, len, es = o->es;
	char *r;

	switch (o->kind) {
	case K_ALL_REDUCE:
		if (t >= n - 1)
			return 1;
		ar_block(o, L, l, mod(pos - t - 1, n), &off, &len);
		r = slot_r(L, (int)(u % NSLOTS));
		if (t < n - 2) {
			mlap2p_reduce2(r, r, contrib(o, L->in + off * es, len),
				       len, o->dtype, op);
			return 0;
		}
		mlap2p_reduce2(L->out + off * es, r,
			       contrib(o, L->in + off * es, len), len,
			       o->dtype, op);
		finalize(o, L->out + off * es, len);
		return 1;
	case K_REDUCE_SCATTER: {
		int q = mod(pos - t - 2, n);
		const char *src;

		chunk_range(L, l, L->count, &off, &len);
		r = slot_r(L, (int)(u % NSLOTS));
		src = L->in + ((size_t)qrank(o, L, q) * o->count + off) * es;
		if (t < n - 2) {
			mlap2p_reduce2(r, r, contrib(o, src, len), len,
				       o->dtype, op);
			return 0;
		}
		mlap2p_reduce2(L->out + off * es, r, contrib(o, src, len), len,
			       o->dtype, op);
		finalize(o, L->out + off * es, len);
		return 1;
	}
	case K_REDUCE:
		chunk_range(L, l, L->count, &off, &len);
		r = slot_r(L, (int)(u % NSLOTS));
		if (L->d != 0) {
			mlap2p_reduce2(r, r, contrib(o, L->in + off * es, len),
				       len, o->dtype, op);
			return 0;
		}
		mlap2p_reduce2(L->out + off * es, r,
			       contrib(o, L->in + off * es, len), len,
			       o->dtype, op);
		finalize(o, L->out + off * es, len);
		return 1;
	}
	return 1;
}

/*
 * How many lanes (channels) @o's rings use: one per ring the communicator
 * has, but a lane only for each full chunk of data, so that small and mid
 * sizes keep whole units.  Every rank computes the same from the (checked)
 * count.
 */
static int lanes_for(const struct cop *o)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es, k;

	k = bytes / c->chunk;
	if (k > (size_t)c->nrings)
		k = (size_t)c->nrings;
	if (k > LANES_MAX)
		k = LANES_MAX;
	return k ? (int)k : 1;
}

static void lane_setup(struct cop *o, struct lane *L)
{
	struct coll *c = o->c;
	int n = c->n, i;
	uint64_t loops;

	L->E = L->chunk / o->es;
	L->sPost = L->sDone = L->rPost = L->rDone = 0;
	for (i = 0; i < NSLOTS; i++)
		L->rslot[i] = L->pslot[i] = -1;
	switch (o->kind) {
	case K_ALL_REDUCE:
		L->T = 2 * (uint64_t)(n - 1);
		loops = (L->count + (size_t)n * L->E - 1) / ((size_t)n * L->E);
		L->nsend = L->nrecv = loops * L->T;
		break;
	case K_ALL_GATHER:
	case K_REDUCE_SCATTER:
		L->T = (uint64_t)(n - 1);
		loops = (L->count + L->E - 1) / L->E;
		L->nsend = L->nrecv = loops * L->T;
		break;
	default:	/* chains */
		L->T = 1;
		loops = (L->count + L->E - 1) / L->E;
		for (i = 0; i < n && L->order[i] != o->root; i++)
			;
		L->d = mod(L->pos - i, n);
		if (o->kind == K_BROADCAST) {
			L->nrecv = L->d == 0 ? 0 : loops;
			L->nsend = L->d == n - 1 ? 0 : loops;
		} else {
			L->nrecv = L->d == 1 ? 0 : loops;
			L->nsend = L->d == 0 ? 0 : loops;
		}
		break;
	}
}

void ring_setup(struct cop *o)
{
	struct coll *c = o->c;
	size_t lchunk;
	int k;

	o->nlanes = lanes_for(o);
	/* The lanes share the R and P slots' space (T stays whole). */
	lchunk = (c->chunk / (size_t)o->nlanes) & ~(size_t)63;
	lchunk -= lchunk % o->es;
	for (k = 0; k < o->nlanes; k++) {
		struct lane *L = &o->lane[k];
		size_t off = o->count * (size_t)k / (size_t)o->nlanes;

		L->ch = k;
		L->order = c->orders + (size_t)k * (size_t)c->n;
		L->pos = c->poss[k];
		L->prev = L->order[mod(L->pos - 1, c->n)];
		L->next = L->order[mod(L->pos + 1, c->n)];
		L->off = off;
		L->count = o->count * (size_t)(k + 1) / (size_t)o->nlanes - off;
		L->in = o->in + off * o->es;
		L->out = o->out + off * o->es;
		L->chunk = lchunk;
		L->scratch = c->scratch + (size_t)k * 2 * NSLOTS * lchunk;
		lane_setup(o, L);
	}
}

void ring_orphan(struct cop *o)
{
	uint64_t u;
	int k;

	for (k = 0; k < o->nlanes; k++) {
		struct lane *L = &o->lane[k];

		for (u = L->sDone; u < L->sPost; u++)
			orphan(o->c, &L->sreq[u % WIN]);
		for (u = L->rDone; u < L->rPost; u++)
			orphan(o->c, &L->rreq[u % WIN]);
	}
	o->nlanes = 0;
}

/*
 * How a step is sent.  A step whose data the receiver reduces before it
 * moves on (all-reduce, reduce-scatter, reduce) takes the FIFO, never
 * sender first: its steps pipeline with the reduction, where sender
 * first makes the reduction wait for a read of the whole step.  So do an
 * all-reduce's all-gather steps, though they only move data: sent as
 * plain sends, mixed on one channel with the reduce-scatter steps, they
 * took a 64 MiB all-reduce from 15 to 25 ms.  The steps of a collective
 * that only moves data (all-gather, broadcast) go as a plain send does,
 * sender first where the data plane chooses it: one copy, not two
 * (docs/collectives.md).
 */
static int send_how(const struct cop *o)
{
	if (o->kind == K_ALL_GATHER || o->kind == K_BROADCAST)
		return MLAP2P_POST_SEND;
	return MLAP2P_POST_SEND | MLAP2P_POST_FIFO;
}

/* A send's copy into this rank's own output streams from MLAP2P_NT_MIN
 * bytes of output on, as the direct all-reduce's stores do (a 64 MiB
 * all-gather out of place: 7.8-8.2 ms with plain stores, 6.1-6.2 so). */
static int tee_how(const struct cop *o)
{
	size_t out = o->count * o->es *
		     (o->kind == K_ALL_GATHER ? (size_t)o->c->n : 1);

	return o->c->ntMin && out >= o->c->ntMin ? MLAP2P_POST_TEE_NT : 0;
}

/* One lane: 1 done, 0 not yet, -errno.  *moved when anything moved. */
static int lane_progress(struct cop *o, struct lane *L, int *moved)
{
	struct coll *c = o->c;
	struct unit x;
	int ret;

	for (;;) {
		int again = 0;

		/* Post receives ahead, into free slots. */
		while (L->rPost < L->nrecv && L->rPost - L->rDone < WIN) {
			int w = (int)(L->rPost % WIN);

			unit_recv(o, L, L->rPost, &x);
			if (x.bytes && x.rslot >= 0 && L->rslot[x.rslot] >= 0)
				break;
			L->rreq[w] = NULL;
			if (x.bytes) {
				ret = mlap2p_ipost_on(c->api, L->ch,
						      MLAP2P_POST_RECV, x.buf,
						      x.bytes, L->prev,
						      &L->rreq[w]);
				if (ret)
					return ret;
				if (x.rslot >= 0)
					L->rslot[x.rslot] = (int64_t)L->rPost;
			}
			L->rPost++;
			again = 1;
		}
		/* Sends whose data is there. */
		while (L->sPost < L->nsend && L->sPost - L->sDone < WIN) {
			int w = (int)(L->sPost % WIN);
			int64_t dep = send_dep(o, L, L->sPost);
			int ps = (int)(L->sPost % NSLOTS);

			if (dep >= 0 && (int64_t)L->rDone <= dep)
				break;
			unit_send(o, L, L->sPost, &x);
			if (x.pneed && x.bytes && L->pslot[ps] >= 0)
				break;
			L->sreq[w] = NULL;
			L->sRel[w] = -1;
			L->sP[w] = -1;
			if (x.bytes) {
				if (x.pneed) {
					mlap2p_premul(slot_p(L, ps), x.src,
						      x.bytes / o->es, o->dtype,
						      1.0 / c->n);
					x.buf = slot_p(L, ps);
					L->pslot[ps] = (int64_t)L->sPost;
					L->sP[w] = ps;
				}
				if (x.copy)
					ret = mlap2p_isend_tee(c->api, L->ch,
							       send_how(o) |
							       tee_how(o),
							       x.buf, x.copy,
							       x.bytes, L->next,
							       &L->sreq[w]);
				else
					ret = mlap2p_ipost_on(c->api, L->ch,
							      send_how(o),
							      x.buf, x.bytes,
							      L->next,
							      &L->sreq[w]);
				if (ret)
					return ret;
			}
			L->sRel[w] = x.rslot;
			L->sPost++;
			again = 1;
		}
		/* Receives in order: reduce, free the slot if done with. */
		while (L->rDone < L->rPost) {
			int w = (int)(L->rDone % WIN);

			ret = req_test(c, &L->rreq[w]);
			if (ret < 0)
				return ret;
			if (!ret)
				break;
			unit_recv(o, L, L->rDone, &x);
			if (x.bytes && recv_done(o, L, L->rDone) && x.rslot >= 0)
				L->rslot[x.rslot] = -1;
			L->rDone++;
			again = 1;
		}
		/* Sends in order. */
		while (L->sDone < L->sPost) {
			int w = (int)(L->sDone % WIN);

			ret = req_test(c, &L->sreq[w]);
			if (ret < 0)
				return ret;
			if (!ret)
				break;
			if (L->sRel[w] >= 0)
				L->rslot[L->sRel[w]] = -1;
			if (L->sP[w] >= 0)
				L->pslot[L->sP[w]] = -1;
			L->sDone++;
			again = 1;
		}
		if (L->sDone == L->nsend && L->rDone == L->nrecv)
			return 1;
		if (!again)
			return 0;
		*moved = 1;
	}
}

/* 1 when every lane is done, 0 not yet, -errno. */
int ring_progress(struct cop *o, int *moved)
{
	int k, ret, done = 1;

	for (k = 0; k < o->nlanes; k++) {
		ret = lane_progress(o, &o->lane[k], moved);
		if (ret < 0)
			return ret;
		done &= ret;
	}
	return done;
}

/* ---- pairs: one-shot data and all-to-all ---- */

int pairs_post(struct cop *o)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es;
	int p, k = 0, ret = 0;

	o->npreq = 0;
	for (p = 0; p < c->n && !ret; p++) {
		if (p == c->rank)
			continue;
		if (o->kind == K_ALL_TO_ALL) {
			ret = mlap2p_irecv(c->api, o->out + (size_t)p * bytes,
					   bytes, p, &o->preq[o->npreq]);
			if (ret)
				break;
			o->npreq++;
			ret = mlap2p_isend(c->api, o->in + (size_t)p * bytes,
					   bytes, p, &o->preq[o->npreq]);
			if (!ret)
				o->npreq++;
		} else {	/* one-shot: peer's input into its scratch area */
			const char *src = avg_pre(o) ? slot_t(o) : o->in;
			int idx = p < c->rank ? p : p - 1;

			ret = mlap2p_irecv(c->api,
					   c->scratch + (size_t)idx * bytes,
					   bytes, p, &o->preq[o->npreq]);
			if (ret)
				break;
			o->npreq++;
			ret = mlap2p_isend(c->api, src, bytes, p,
					   &o->preq[o->npreq]);
			if (!ret)
				o->npreq++;
		}
		k++;
	}
	return ret;
}

int pairs_progress(struct cop *o, int *moved)
{
	int i, ret, left = 0;

	for (i = 0; i < o->npreq; i++) {
		if (!o->preq[i])
			continue;
		ret = req_test(o->c, &o->preq[i]);
		if (ret < 0)
			return ret;
		if (ret)
			*moved = 1;
		else
			left = 1;
	}
	return !left;
}

/* The one-shot reduction, in rank order (all requests are done). */
void oneshot_finish(struct cop *o)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es;
	int op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op, r;
	const char *x[PAIRS_MAX];
	const char *own = avg_pre(o) ? slot_t(o) : o->in;

	if (!o->count)
		return;
	if (c->n == 2 && bytes <= INLINE_MAX) {
		x[c->rank] = (const char *)&o->smsg[2];
		x[!c->rank] = (const char *)&o->rmsg[2];
	} else {
		for (r = 0; r < c->n; r++)
			x[r] = r == c->rank ? own :
			       c->scratch + (size_t)(r < c->rank ? r : r - 1) *
			       bytes;
		/* In place, rank order would overwrite our input before it is
		 * used: keep a copy past the peers' inputs. */
		if (own == o->out && c->rank >= 2) {
			char *keep = c->scratch + (size_t)(c->n - 1) * bytes;

			memcpy(keep, own, bytes);
			x[c->rank] = keep;
		}
	}
	mlap2p_reduce2(o->out, x[0], x[1], o->count, o->dtype, op);
	for (r = 2; r < c->n; r++)
		mlap2p_reduce2(o->out, o->out, x[r], o->count, o->dtype, op);
	finalize(o, o->out, o->count);
}
