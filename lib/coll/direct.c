// SPDX-License-Identifier: MIT
/*
 * Collectives: the direct all-reduce, for 2 ranks whose buffers are all
 * regions of the runtime (mlap2p_mem_alloc).
 *
 * Each rank maps the peer's input and output and reduces its own half of
 * the elements straight from both inputs into both outputs: every input
 * byte is read once and every output byte written once, the traffic of
 * bench/reduce1copy, where the ring moves every byte through a step of
 * its own.  The ranks agree on it after the preamble: each says in its
 * header message whether its buffers are regions (DIRECT_OFFER) and, if
 * they are, sends their IPC handles right after; the algorithm runs when
 * both offered, else the ring runs as it would have.  A rank may return
 * once the peer has said it is done (one 8-byte message each way): by then
 * the peer no longer reads our input or writes our output.
 */
#include <stdatomic.h>

#include "coll/coll.h"
#include "proto/copy.h"

#define DIRECT_STEP	(1UL << 20)	/* bytes reduced per progress call */
#define DIRECT_SUB	(8UL << 10)	/* bytes per pass through T */

/* Are @o's buffers regions the peer can map?  Fills o->dmine. */
int direct_offer(struct cop *o)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es, after;
	struct ncclRtIpcMemHandle ipc;
	size_t off;

	if (!c->direct || c->n != 2 || o->kind != K_ALL_REDUCE ||
	    o->algo != ALGO_RING || !bytes)
		return 0;
	_Static_assert(sizeof(ipc) == sizeof(o->dmine.ipcIn), "handle size");
	if (mlap2p_region_lookup(c->comm, o->in, &ipc, &off, &after) ||
	    after < bytes)
		return 0;
	memcpy(o->dmine.ipcIn, &ipc, sizeof(ipc));
	o->dmine.offIn = off;
	if (mlap2p_region_lookup(c->comm, o->out, &ipc, &off, &after) ||
	    after < bytes)
		return 0;
	memcpy(o->dmine.ipcOut, &ipc, sizeof(ipc));
	o->dmine.offOut = off;
	o->dmine.bytes = bytes;
	return 1;
}

/* After the preamble: send our handles, expect the peer's.  0 or -errno. */
int direct_start(struct cop *o)
{
	struct coll *c = o->c;
	int ret;

	o->dpeer = c->n == 2 && o->kind == K_ALL_REDUCE &&
		   o->algo == ALGO_RING && o->rmsg[2] == DIRECT_OFFER;
	o->dstate = 0;
	if (!o->direct && !o->dpeer)
		return 0;
	if (o->dpeer) {
		ret = mlap2p_irecv(c->api, &o->dtheirs, sizeof(o->dtheirs),
				   c->prev, &o->dr);
		if (ret)
			return ret;
	}
	if (o->direct)
		return mlap2p_isend(c->api, &o->dmine, sizeof(o->dmine),
				    c->next, &o->ds);
	return 0;
}

/* 1 when @o exchanges handles (direct_progress runs), 0 when not. */
int direct_pending(const struct cop *o)
{
	return o->direct || o->dpeer;
}

static int direct_map(struct cop *o, const unsigned char *h, uint64_t off,
		      void **ptr)
{
	struct coll *c = o->c;
	struct ncclRtIpcMemHandle ipc;
	size_t size;
	void *base;
	int ret;

	memcpy(&ipc, h, sizeof(ipc));
	ret = mlap2p_import_region(c->comm, &ipc, &base, &size);
	if (ret) {
		WARN("%s: rank %d: cannot map the buffer rank %d offered: %s",
		     o->fn, c->rank, c->prev, strerror(-ret));
		return ret;
	}
	if (off > size || size - off < o->dtheirs.bytes) {
		WARN("%s: rank %d: rank %d offered %llu bytes at %llu of a %zu-byte region",
		     o->fn, c->rank, c->prev,
		     (unsigned long long)o->dtheirs.bytes,
		     (unsigned long long)off, size);
		return -EPROTO;
	}
	*ptr = (char *)base + off;
	return 0;
}

/* Our half: rank 0 the first count / 2 elements, rank 1 the rest. */
static void direct_slice(struct cop *o)
{
	size_t half = o->count / 2;

	o->dnext = o->c->rank ? half : 0;
	o->dend = o->c->rank ? o->count : half;
}

/* Elements [i, i + n) of the result into both outputs. */
static void direct_reduce(struct cop *o, size_t i, size_t n)
{
	struct coll *c = o->c;
	size_t es = o->es, b = n * es;
	const char *a = c->rank ? o->dpin : o->in;	/* rank 0's */
	const char *x = c->rank ? o->in : o->dpin;	/* rank 1's */
	char *t = slot_t(o), *u = t + b;	/* n <= direct_sub(o) */
	int op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op;

	a += i * es;
	x += i * es;
	if (avg_pre(o)) {
		mlap2p_premul(t, a, n, o->dtype, 1.0 / c->n);
		mlap2p_premul(u, x, n, o->dtype, 1.0 / c->n);
		mlap2p_reduce2(t, t, u, n, o->dtype, op);
	} else {
		mlap2p_reduce2(t, a, x, n, o->dtype, op);
		if (o->op == MLAP2P_AVG)
			mlap2p_divide(t, n, o->dtype, c->n);
	}
	if (c->ntMin && o->count * es >= c->ntMin) {
		mlap2p_copy_nt2(o->out + i * es, o->dpout + i * es, t, b);
	} else {
		memcpy(o->out + i * es, t, b);
		memcpy(o->dpout + i * es, t, b);
	}
}

/* Both of o->ds, o->dr ended: 1, not yet 0, -errno. */
static int direct_wait(struct cop *o)
{
	int ret = req_test(o->c, &o->ds);

	if (ret >= 0)
		ret = req_test(o->c, &o->dr);
	if (ret < 0)
		return ret;
	return !o->ds && !o->dr;
}

/* Elements per pass through T: two of them fit (AVG premultiplies
 * both inputs there). */
static size_t direct_sub(const struct cop *o)
{
	size_t bytes = DIRECT_SUB < o->c->chunk / 2 ? DIRECT_SUB :
		       o->c->chunk / 2;

	return bytes / o->es;
}

/* 1 done, 0 not yet, -errno.  When only one rank offered, sets up the
 * ring instead (direct_pending() is 0 after that). */
int direct_progress(struct cop *o, int *moved)
{
	struct coll *c = o->c;
	size_t sub = direct_sub(o), step = DIRECT_STEP / o->es;
	void *p;
	int ret;

	switch (o->dstate) {
	case 0:		/* the handles */
		ret = direct_wait(o);
		if (ret <= 0)
			return ret;
		*moved = 1;
		if (!o->direct || !o->dpeer) {
			o->direct = o->dpeer = 0;	/* the ring, then */
			ring_setup(o);
			return 0;
		}
		if (o->dtheirs.bytes != o->count * o->es) {
			WARN("%s: rank %d: rank %d offered %llu bytes for a %zu-byte all-reduce",
			     o->fn, c->rank, c->prev,
			     (unsigned long long)o->dtheirs.bytes,
			     o->count * o->es);
			return -EPROTO;
		}
		ret = direct_map(o, o->dtheirs.ipcIn, o->dtheirs.offIn, &p);
		if (ret)
			return ret;
		o->dpin = p;
		ret = direct_map(o, o->dtheirs.ipcOut, o->dtheirs.offOut, &p);
		if (ret)
			return ret;
		o->dpout = p;
		direct_slice(o);
		o->dstate = 1;
		/* fall through */
	case 1:		/* our half, a step per call */
		for (size_t end = o->dnext + step; o->dnext < o->dend &&
		     o->dnext < end;) {
			size_t n = o->dend - o->dnext < sub ?
				   o->dend - o->dnext : sub;

			direct_reduce(o, o->dnext, n);
			o->dnext += n;
		}
		*moved = 1;
		if (o->dnext < o->dend)
			return 0;
		/* Our stores into the peer's output before the word that
		 * says they are done (streaming ones included). */
		atomic_thread_fence(memory_order_seq_cst);
		o->dfin[0] = o->hdr[0] >> 32;	/* its number */
		ret = mlap2p_irecv(c->api, &o->dfin[1], sizeof(o->dfin[1]),
				   c->prev, &o->dr);
		if (!ret)
			ret = mlap2p_isend(c->api, &o->dfin[0],
					   sizeof(o->dfin[0]), c->next, &o->ds);
		if (ret)
			return ret;
		o->dstate = 2;
		/* fall through */
	case 2:		/* the peer is done with our buffers */
		ret = direct_wait(o);
		if (ret <= 0)
			return ret;
		*moved = 1;
		/* And the peer's stores into our output before our loads. */
		atomic_thread_fence(memory_order_seq_cst);
		if (o->dfin[1] != o->dfin[0]) {
			WARN("%s: rank %d: rank %d ended all-reduce #%llu, this rank #%llu",
			     o->fn, c->rank, c->prev,
			     (unsigned long long)o->dfin[1],
			     (unsigned long long)o->dfin[0]);
			return -EPROTO;
		}
		o->dstate = 3;
		return 1;
	}
	return 1;
}

/* Requests @o's direct phase still holds, to the orphans. */
void direct_orphan(struct cop *o)
{
	orphan(o->c, &o->ds);
	orphan(o->c, &o->dr);
}
