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
};

int avg_pre(const struct cop *o)
{
	return o->op == MLAP2P_AVG && is_float(o->dtype) &&
	       (o->kind == K_ALL_REDUCE || o->kind == K_REDUCE ||
		o->kind == K_REDUCE_SCATTER);
}

static char *slot_r(const struct cop *o, int s)
{
	return o->c->scratch + (size_t)s * 2 * o->c->chunk;
}

static char *slot_p(const struct cop *o, int s)
{
	return o->c->scratch + (size_t)s * 2 * o->c->chunk + o->c->chunk;
}

char *slot_t(const struct cop *o)
{
	return o->c->scratch + (size_t)2 * NSLOTS * o->c->chunk;
}

/* All-reduce loop l: the element range of block b. */
static void ar_block(const struct cop *o, uint64_t l, int b, size_t *off,
		     size_t *len)
{
	size_t n = (size_t)o->c->n, base = (size_t)l * n * o->E;
	size_t rem = o->count - base, cs, lo, hi;

	if (rem > n * o->E)
		rem = n * o->E;
	cs = (rem + n - 1) / n;
	if (cs > o->E)
		cs = o->E;
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
static void chunk_range(const struct cop *o, uint64_t l, size_t per,
			size_t *off, size_t *len)
{
	size_t lo = (size_t)l * o->E, hi = lo + o->E;

	if (hi > per)
		hi = per;
	*off = lo;
	*len = hi - lo;
}

/* Block position q's rank. */
static int qrank(const struct cop *o, int q)
{
	return o->c->order[mod(q, o->c->n)];
}

static void unit_send(struct cop *o, uint64_t u, struct unit *x)
{
	int n = o->c->n, pos = o->c->pos;
	uint64_t l = u / o->T;
	int t = (int)(u % o->T);
	size_t off, len, es = o->es;

	x->rslot = -1;
	x->pneed = 0;
	x->src = NULL;
	switch (o->kind) {
	case K_ALL_REDUCE:
		if (t < n - 1) {
			ar_block(o, l, mod(pos - t, n), &off, &len);
			x->bytes = len * es;
			if (t == 0) {
				x->buf = (char *)o->in + off * es;
				if (avg_pre(o)) {
					x->pneed = 1;
					x->src = x->buf;
				}
			} else {
				x->rslot = (int)((u - 1) % NSLOTS);
				x->buf = slot_r(o, x->rslot);
			}
		} else {
			ar_block(o, l, mod(pos + 1 - (t - (n - 1)), n), &off,
				 &len);
			x->bytes = len * es;
			x->buf = o->out + off * es;
		}
		break;
	case K_ALL_GATHER:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		if (t == 0)
			x->buf = (char *)o->in + off * es;
		else
			x->buf = o->out + ((size_t)qrank(o, pos - t) *
					   o->count + off) * es;
		break;
	case K_REDUCE_SCATTER:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		if (t == 0) {
			x->buf = (char *)o->in + ((size_t)qrank(o, pos - 1) *
						  o->count + off) * es;
			if (avg_pre(o)) {
				x->pneed = 1;
				x->src = x->buf;
			}
		} else {
			x->rslot = (int)((u - 1) % NSLOTS);
			x->buf = slot_r(o, x->rslot);
		}
		break;
	case K_BROADCAST:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		x->buf = (o->d == 0 ? (char *)o->in : o->out) + off * es;
		break;
	case K_REDUCE:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		if (o->d == 1) {
			x->buf = (char *)o->in + off * es;
			if (avg_pre(o)) {
				x->pneed = 1;
				x->src = x->buf;
			}
		} else {
			x->rslot = (int)(u % NSLOTS);
			x->buf = slot_r(o, x->rslot);
		}
		break;
	}
}

/* The receive unit u must have been processed before send u may go. */
static int64_t send_dep(const struct cop *o, uint64_t u)
{
	switch (o->kind) {
	case K_BROADCAST:
		return o->d == 0 ? -1 : (int64_t)u;
	case K_REDUCE:
		return o->d == 1 ? -1 : (int64_t)u;
	default:
		return u % o->T == 0 ? -1 : (int64_t)u - 1;
	}
}

static void unit_recv(struct cop *o, uint64_t u, struct unit *x)
{
	int n = o->c->n, pos = o->c->pos;
	uint64_t l = u / o->T;
	int t = (int)(u % o->T);
	size_t off, len, es = o->es;

	x->rslot = -1;
	x->pneed = 0;
	x->src = NULL;
	switch (o->kind) {
	case K_ALL_REDUCE:
		if (t < n - 1) {
			ar_block(o, l, mod(pos - t - 1, n), &off, &len);
			x->rslot = (int)(u % NSLOTS);
			x->buf = slot_r(o, x->rslot);
		} else {
			ar_block(o, l, mod(pos - (t - (n - 1)), n), &off, &len);
			x->buf = o->out + off * es;
		}
		x->bytes = len * es;
		break;
	case K_ALL_GATHER:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		x->buf = o->out + ((size_t)qrank(o, pos - t - 1) * o->count +
				   off) * es;
		break;
	case K_REDUCE_SCATTER:
	case K_REDUCE:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		x->rslot = (int)(u % NSLOTS);
		x->buf = slot_r(o, x->rslot);
		break;
	case K_BROADCAST:
		chunk_range(o, l, o->count, &off, &len);
		x->bytes = len * es;
		x->buf = o->out + off * es;
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
static int recv_done(struct cop *o, uint64_t u)
{
	int n = o->c->n, pos = o->c->pos;
	uint64_t l = u / o->T;
	int t = (int)(u % o->T), op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op;
	size_t off, len, es = o->es;
	char *r;

	switch (o->kind) {
	case K_ALL_REDUCE:
		if (t >= n - 1)
			return 1;
		ar_block(o, l, mod(pos - t - 1, n), &off, &len);
		r = slot_r(o, (int)(u % NSLOTS));
		if (t < n - 2) {
			mlap2p_reduce2(r, r, contrib(o, o->in + off * es, len),
				       len, o->dtype, op);
			return 0;
		}
		mlap2p_reduce2(o->out + off * es, r,
			       contrib(o, o->in + off * es, len), len,
			       o->dtype, op);
		finalize(o, o->out + off * es, len);
		return 1;
	case K_REDUCE_SCATTER: {
		int q = mod(pos - t - 2, n);
		const char *src;

		chunk_range(o, l, o->count, &off, &len);
		r = slot_r(o, (int)(u % NSLOTS));
		src = o->in + ((size_t)qrank(o, q) * o->count + off) * es;
		if (t < n - 2) {
			mlap2p_reduce2(r, r, contrib(o, src, len), len,
				       o->dtype, op);
			return 0;
		}
		mlap2p_reduce2(o->out + off * es, r, contrib(o, src, len), len,
			       o->dtype, op);
		finalize(o, o->out + off * es, len);
		return 1;
	}
	case K_REDUCE:
		chunk_range(o, l, o->count, &off, &len);
		r = slot_r(o, (int)(u % NSLOTS));
		if (o->d != 0) {
			mlap2p_reduce2(r, r, contrib(o, o->in + off * es, len),
				       len, o->dtype, op);
			return 0;
		}
		mlap2p_reduce2(o->out + off * es, r,
			       contrib(o, o->in + off * es, len), len,
			       o->dtype, op);
		finalize(o, o->out + off * es, len);
		return 1;
	}
	return 1;
}

void ring_setup(struct cop *o)
{
	struct coll *c = o->c;
	int n = c->n, i;
	uint64_t loops;

	o->E = c->chunk / o->es;
	o->sPost = o->sDone = o->rPost = o->rDone = 0;
	for (i = 0; i < NSLOTS; i++)
		o->rslot[i] = o->pslot[i] = -1;
	switch (o->kind) {
	case K_ALL_REDUCE:
		o->T = 2 * (uint64_t)(n - 1);
		loops = (o->count + (size_t)n * o->E - 1) / ((size_t)n * o->E);
		o->nsend = o->nrecv = loops * o->T;
		break;
	case K_ALL_GATHER:
	case K_REDUCE_SCATTER:
		o->T = (uint64_t)(n - 1);
		loops = (o->count + o->E - 1) / o->E;
		o->nsend = o->nrecv = loops * o->T;
		break;
	default:	/* chains */
		o->T = 1;
		loops = (o->count + o->E - 1) / o->E;
		for (i = 0; i < n && c->order[i] != o->root; i++)
			;
		o->d = mod(c->pos - i, n);
		if (o->kind == K_BROADCAST) {
			o->nrecv = o->d == 0 ? 0 : loops;
			o->nsend = o->d == n - 1 ? 0 : loops;
		} else {
			o->nrecv = o->d == 1 ? 0 : loops;
			o->nsend = o->d == 0 ? 0 : loops;
		}
		break;
	}
}

void ring_orphan(struct cop *o)
{
	uint64_t u;

	for (u = o->sDone; u < o->sPost; u++)
		orphan(o->c, &o->sreq[u % WIN]);
	for (u = o->rDone; u < o->rPost; u++)
		orphan(o->c, &o->rreq[u % WIN]);
}

/* 1 done, 0 not yet, -errno.  *moved when anything moved. */
int ring_progress(struct cop *o, int *moved)
{
	struct coll *c = o->c;
	struct unit x;
	int ret;

	for (;;) {
		int again = 0;

		/* Post receives ahead, into free slots. */
		while (o->rPost < o->nrecv && o->rPost - o->rDone < WIN) {
			int w = (int)(o->rPost % WIN);

			unit_recv(o, o->rPost, &x);
			if (x.bytes && x.rslot >= 0 && o->rslot[x.rslot] >= 0)
				break;
			o->rreq[w] = NULL;
			if (x.bytes) {
				ret = mlap2p_irecv(c->api, x.buf, x.bytes,
						   c->prev, &o->rreq[w]);
				if (ret)
					return ret;
				if (x.rslot >= 0)
					o->rslot[x.rslot] = (int64_t)o->rPost;
			}
			o->rPost++;
			again = 1;
		}
		/* Sends whose data is there. */
		while (o->sPost < o->nsend && o->sPost - o->sDone < WIN) {
			int w = (int)(o->sPost % WIN);
			int64_t dep = send_dep(o, o->sPost);
			int ps = (int)(o->sPost % NSLOTS);

			if (dep >= 0 && (int64_t)o->rDone <= dep)
				break;
			unit_send(o, o->sPost, &x);
			if (x.pneed && x.bytes && o->pslot[ps] >= 0)
				break;
			o->sreq[w] = NULL;
			o->sRel[w] = -1;
			o->sP[w] = -1;
			if (x.bytes) {
				if (x.pneed) {
					mlap2p_premul(slot_p(o, ps), x.src,
						      x.bytes / o->es, o->dtype,
						      1.0 / c->n);
					x.buf = slot_p(o, ps);
					o->pslot[ps] = (int64_t)o->sPost;
					o->sP[w] = ps;
				}
				ret = mlap2p_isend(c->api, x.buf, x.bytes,
						   c->next, &o->sreq[w]);
				if (ret)
					return ret;
			}
			o->sRel[w] = x.rslot;
			o->sPost++;
			again = 1;
		}
		/* Receives in order: reduce, free the slot if done with. */
		while (o->rDone < o->rPost) {
			int w = (int)(o->rDone % WIN);

			ret = req_test(c, &o->rreq[w]);
			if (ret < 0)
				return ret;
			if (!ret)
				break;
			unit_recv(o, o->rDone, &x);
			if (x.bytes && recv_done(o, o->rDone) && x.rslot >= 0)
				o->rslot[x.rslot] = -1;
			o->rDone++;
			again = 1;
		}
		/* Sends in order. */
		while (o->sDone < o->sPost) {
			int w = (int)(o->sDone % WIN);

			ret = req_test(c, &o->sreq[w]);
			if (ret < 0)
				return ret;
			if (!ret)
				break;
			if (o->sRel[w] >= 0)
				o->rslot[o->sRel[w]] = -1;
			if (o->sP[w] >= 0)
				o->pslot[o->sP[w]] = -1;
			o->sDone++;
			again = 1;
		}
		if (o->sDone == o->nsend && o->rDone == o->nrecv)
			return 1;
		if (!again)
			return 0;
		*moved = 1;
	}
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
