// SPDX-License-Identifier: MIT
/*
 * Collectives: the direct all-reduce, for ranks whose buffers are all
 * regions of the runtime (mlap2p_mem_alloc).
 *
 * Each rank maps every other rank's input and output and reduces its own
 * slice of the elements (rank r: [count*r/n, count*(r+1)/n)) straight from
 * all n inputs into all n outputs: every input byte is read once and every
 * output byte written once, the traffic of bench/reduce1copy, where the
 * ring moves every byte through a step of its own.
 *
 * The ranks agree on it in the preamble: a rank whose buffers are regions
 * says so in its header message (DIRECT_OFFER), and each later hop
 * carries the sender's run, the number of ranks up to and including it,
 * going back round the ring, known to have offered (direct_hop).  After
 * the n - 1 hops a rank's run is n exactly when every rank offered, so
 * every rank makes the same choice: direct, or the ring as it would have
 * run.  Direct, every rank sends its handles to every other (one message
 * each way per pair, all at once), maps what it gets, reduces its slice,
 * and sends every other rank an 8-byte done word: once a rank has all of
 * them, nobody reads its input or writes its output any more, and it
 * returns.  A rank that cannot map what it got still sends its done
 * words, with its errno in them, and waits for the others' before it
 * returns the error: the others have mapped its buffers by then, and fail
 * too once they see the word.
 *
 * Pair connections cost every rank a FIFO per peer, so above
 * DIRECT_CONNECT_MAX ranks only a communicator that has them already
 * (from an all-to-all or a one-shot) offers.
 */
#include <stdatomic.h>

#include "coll/coll.h"
#include "proto/copy.h"

#define DIRECT_STEP	(1UL << 20)	/* bytes reduced per progress call */
/* Bytes per direct_reduce() call, and reduced into T at a time. */
#define DIRECT_SUB	(8UL << 10)
/*
 * ... and at a time when an output is streamed (from MLAP2P_NT_MIN): a
 * block small enough that T's lines are stored out while still in L1.
 * 64 MiB out of place, 2 ranks, Intel Xeon guest, 2026-12-05: 4.6-5.3 ms
 * in 512-byte blocks against 5.2-5.9 in 8 KiB ones (docs/collectives.md).
 */
#define DIRECT_BLOCK_NT	512UL

/* Are @o's buffers regions the peers can map?  Fills our c->dx entry. */
int direct_offer(struct cop *o)
{
	struct coll *c = o->c;
	struct ddesc *d;
	size_t bytes = o->count * o->es, after;
	struct ncclRtIpcMemHandle ipc;
	size_t off;

	if (!c->direct || !c->dx || o->kind != K_ALL_REDUCE ||
	    o->algo != ALGO_RING || !bytes ||
	    (c->n > DIRECT_CONNECT_MAX && !c->allPeers))
		return 0;
	d = &c->dx[c->rank].d;
	_Static_assert(sizeof(ipc) == sizeof(d->ipcIn), "handle size");
	if (mlap2p_region_lookup(c->comm, o->in, &ipc, &off, &after) ||
	    after < bytes)
		return 0;
	memcpy(d->ipcIn, &ipc, sizeof(ipc));
	d->offIn = off;
	if (mlap2p_region_lookup(c->comm, o->out, &ipc, &off, &after) ||
	    after < bytes)
		return 0;
	memcpy(d->ipcOut, &ipc, sizeof(ipc));
	d->offOut = off;
	d->bytes = bytes;
	return 1;
}

/* A preamble hop's message from prev is in o->rmsg: our run after it. */
void direct_hop(struct cop *o)
{
	uint64_t prev = o->hop ? o->rmsg[7] : o->rmsg[2] == DIRECT_OFFER;
	uint64_t n = (uint64_t)o->c->n;

	o->drun = o->direct ? (int)(prev < n ? prev + 1 : n) : 0;
}

/* After the preamble: did every rank offer? */
int direct_all(const struct cop *o)
{
	return o->direct && o->drun == o->c->n;
}

/* The swap's requests: 1 all ended (npreq is 0 again), 0 not yet,
 * -errno. */
static int direct_wait(struct cop *o, int *moved)
{
	int ret = pairs_progress(o, moved);

	if (ret > 0)
		o->npreq = 0;
	return ret;
}

/* @len bytes of @what: from every peer into its c->dx entry, ours to
 * every peer.  0 or -errno. */
static int direct_swap(struct cop *o, size_t at, size_t len)
{
	struct coll *c = o->c;
	int p, ret;

	o->npreq = 0;
	for (p = 0; p < c->n; p++) {
		if (p == c->rank)
			continue;
		ret = mlap2p_irecv(c->api, (char *)&c->dx[p] + at, len, p,
				   &o->preq[o->npreq]);
		if (ret)
			return ret;
		o->npreq++;
		ret = mlap2p_isend(c->api, (char *)&c->dx[c->rank] + at, len,
				   p, &o->preq[o->npreq]);
		if (ret)
			return ret;
		o->npreq++;
	}
	return 0;
}

/* After the preamble: 1 direct (the handles are on their way), 0 the
 * ring, -errno. */
int direct_start(struct cop *o)
{
	o->dstate = 0;
	o->derr = 0;
	if (!direct_all(o)) {
		o->direct = 0;
		return 0;
	}
	return direct_swap(o, offsetof(struct dpeer, d), sizeof(struct ddesc));
}

static int direct_map(struct cop *o, int p, const unsigned char *h,
		      uint64_t off, void **ptr)
{
	struct coll *c = o->c;
	struct ncclRtIpcMemHandle ipc;
	uint64_t bytes = c->dx[p].d.bytes;
	size_t size;
	void *base;
	int ret;

	memcpy(&ipc, h, sizeof(ipc));
	ret = mlap2p_import_region(c->comm, &ipc, &base, &size);
	if (ret) {
		WARN("%s: rank %d: cannot map the buffer rank %d offered: %s",
		     o->fn, c->rank, p, strerror(-ret));
		return ret;
	}
	if (off > size || size - off < bytes) {
		WARN("%s: rank %d: rank %d offered %llu bytes at %llu of a %zu-byte region",
		     o->fn, c->rank, p, (unsigned long long)bytes,
		     (unsigned long long)off, size);
		return -EPROTO;
	}
	*ptr = (char *)base + off;
	return 0;
}

/*
 * Every peer's buffers, mapped and checked, and how each output is
 * stored: streaming from MLAP2P_NT_MIN bytes on, unless it is its rank's
 * input too (in place), whose lines the reduction has just brought into
 * the cache (streaming stores to them took a 64 MiB in-place all-reduce
 * from 3.7 to 10 ms on a Xeon VM).  0 or -errno.
 */
static int direct_map_all(struct cop *o)
{
	struct coll *c = o->c;
	int nt = c->ntMin && o->count * o->es >= c->ntMin, p, ret;
	void *q;

	for (p = 0; p < c->n; p++) {
		struct dpeer *x = &c->dx[p];

		if (p == c->rank) {
			x->in = o->in;
			x->out = o->out;
			x->nt = nt && x->out != x->in;
			continue;
		}
		if (x->d.bytes != o->count * o->es) {
			WARN("%s: rank %d: rank %d offered %llu bytes for a %zu-byte all-reduce",
			     o->fn, c->rank, p, (unsigned long long)x->d.bytes,
			     o->count * o->es);
			return -EPROTO;
		}
		ret = direct_map(o, p, x->d.ipcIn, x->d.offIn, &q);
		if (ret)
			return ret;
		x->in = q;
		ret = direct_map(o, p, x->d.ipcOut, x->d.offOut, &q);
		if (ret)
			return ret;
		x->out = q;
		x->nt = nt && x->out != x->in;
	}
	return 0;
}

/* Elements [i, i + n) of the result into every output, x[0] op x[1] op
 * ... op x[n-1] left to right (as the one-shot), a block at a time. */
static void direct_reduce(struct cop *o, size_t i, size_t n)
{
	struct coll *c = o->c;
	size_t es = o->es, blk = DIRECT_SUB, k, m, b, at;
	char *t = slot_t(o), *u;
	char *pend;
	int op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op, r;

	for (r = 0; r < c->n; r++)
		if (c->dx[r].nt)
			blk = DIRECT_BLOCK_NT;
	if (blk > c->chunk / 2)
		blk = c->chunk / 2;
	u = t + blk;			/* T is a chunk: two blocks fit */
	blk /= es;
	for (k = 0; k < n; k += m) {
		m = n - k < blk ? n - k : blk;
		b = m * es;
		at = (i + k) * es;
		if (avg_pre(o)) {
			mlap2p_premul(t, c->dx[0].in + at, m, o->dtype,
				      1.0 / c->n);
			for (r = 1; r < c->n; r++) {
				mlap2p_premul(u, c->dx[r].in + at, m, o->dtype,
					      1.0 / c->n);
				mlap2p_reduce2(t, t, u, m, o->dtype, op);
			}
		} else {
			mlap2p_reduce2(t, c->dx[0].in + at, c->dx[1].in + at,
				       m, o->dtype, op);
			for (r = 2; r < c->n; r++)
				mlap2p_reduce2(t, t, c->dx[r].in + at, m,
					       o->dtype, op);
			if (o->op == MLAP2P_AVG)
				mlap2p_divide(t, m, o->dtype, c->n);
		}
		pend = NULL;
		for (r = 0; r < c->n; r++) {
			char *d = c->dx[r].out + at;

			if (!c->dx[r].nt) {
				memcpy(d, t, b);
			} else if (pend) {	/* two streams in one pass */
				mlap2p_stream_block(pend, d, t, b);
				pend = NULL;
			} else {
				pend = d;
			}
		}
		if (pend)
			mlap2p_stream_block(pend, NULL, t, b);
	}
}

/* 1 done, 0 not yet, -errno. */
int direct_progress(struct cop *o, int *moved)
{
	struct coll *c = o->c;
	size_t sub = DIRECT_SUB / o->es, step = DIRECT_STEP / o->es;
	uint64_t seq = o->hdr[0] >> 32;
	int ret, p;

	switch (o->dstate) {
	case 0:		/* the handles */
		ret = direct_wait(o, moved);
		if (ret <= 0)
			return ret;
		o->derr = direct_map_all(o);
		o->dnext = o->count * (size_t)c->rank / (size_t)c->n;
		o->dend = o->derr ? o->dnext :
			  o->count * (size_t)(c->rank + 1) / (size_t)c->n;
		o->dstate = 1;
		/* fall through */
	case 1:		/* our slice, a step per call */
		for (size_t end = o->dnext + step; o->dnext < o->dend &&
		     o->dnext < end;) {
			size_t n = o->dend - o->dnext < sub ?
				   o->dend - o->dnext : sub;

			direct_reduce(o, o->dnext, n);
			o->dnext += n;
		}
		*moved = 1;
		if (o->dnext < o->dend) {
			/* The rest of the slice may be progressed on another
			 * thread (a non-blocking all-reduce): fence our
			 * streaming stores here, once per step. */
			mlap2p_copy_fence();
			return 0;
		}
		/* Our stores into the peers' outputs before the words that
		 * say they are done: the streaming ones (never fenced on
		 * the way: a store fence per 8 KiB cost a 64 MiB all-reduce
		 * a fifth of its time), then the rest. */
		mlap2p_copy_fence();
		atomic_thread_fence(memory_order_seq_cst);
		c->dx[c->rank].fin = seq | (uint64_t)(uint32_t)-o->derr << 32;
		ret = direct_swap(o, offsetof(struct dpeer, fin),
				  sizeof(uint64_t));
		if (ret)
			return ret;
		o->dstate = 2;
		/* fall through */
	case 2:		/* the peers are done with our buffers */
		ret = direct_wait(o, moved);
		if (ret <= 0)
			return ret;
		/* And the peers' stores into our output before our loads. */
		atomic_thread_fence(memory_order_seq_cst);
		if (o->derr)
			return o->derr;
		for (p = 0; p < c->n; p++) {
			uint64_t fin = c->dx[p].fin;

			if (fin == seq)
				continue;
			if ((uint32_t)fin == seq && fin >> 32)
				WARN("%s: rank %d: rank %d could not take part in all-reduce #%llu: %s",
				     o->fn, c->rank, p, (unsigned long long)seq,
				     strerror((int)(fin >> 32)));
			else
				WARN("%s: rank %d: rank %d ended all-reduce #%llu, this rank #%llu",
				     o->fn, c->rank, p,
				     (unsigned long long)(uint32_t)fin,
				     (unsigned long long)seq);
			return -EPROTO;
		}
		o->dstate = 3;
		return 1;
	}
	return 1;
}
