// SPDX-License-Identifier: MIT
/*
 * Collectives: the direct all-reduce, for ranks whose buffers are all
 * regions of the runtime (mlap2p_mem_alloc, DIRECT_MAP), or that can all
 * reach each other's plain buffers by address (DIRECT_CMA).
 *
 * DIRECT_MAP: each rank maps every other rank's input and output and
 * reduces its own slice of the elements (rank r: [count*r/n,
 * count*(r+1)/n)) straight from all n inputs into all n outputs: every
 * input byte is read once and every output byte written once, the traffic
 * of bench/reduce1copy, where the ring moves every byte through a step of
 * its own.
 *
 * DIRECT_CMA, from MLAP2P_COLL_CMA_MIN bytes (below MLAP2P_COLL_CMA_MAX,
 * when set) when every peer is a thread of this process or a process on
 * this host (and MLAP2P_CMA is not 0):
 * the same slices, the peers' inputs read and their outputs written a
 * block at a time by process_vm_readv/writev (between threads, memcpy),
 * so each byte is copied once by the kernel where the FIFO ring copies it
 * twice and reduces from its copy (docs/collectives.md has the figures).
 * The first time on a communicator every rank tries a read of every other
 * and they trade what they got (cma_probe): if the kernel refused any,
 * every rank runs this all-reduce, and the communicator's later ones,
 * round the ring.
 *
 * The ranks agree on the way in the preamble: a rank says in its header
 * message which ways it offers (DIRECT_OFFER | DIRECT_MAP | DIRECT_CMA),
 * and each later hop carries the sender's runs, for each way the number
 * of ranks up to and including it, going back round the ring, known to
 * have offered it (direct_hop).  After the n - 1 hops a rank's run is n
 * exactly when every rank offered, so every rank makes the same choice:
 * regions, addresses, or the ring as it would have run.  Direct, every
 * rank sends its handles and addresses to every other (one message each
 * way per pair, all at once), maps what it gets, reduces its slice, and
 * sends every other rank an 8-byte done word: once a rank has all of
 * them, nobody reads its input or writes its output any more, and it
 * returns.  A rank that cannot map what it got (or whose copy fails, a
 * peer that died) still sends its done words, with its errno in them,
 * and waits for the others' before it returns the error: the others have
 * mapped its buffers by then, and fail too once they see the word.
 *
 * A 2-rank all-reduce the one-shot would take (above FAST_MAX) offers
 * the same ways, by address only in place or between threads (or from
 * MLAP2P_COLL_CMA_MIN): in place, the one-shot's peer would copy the
 * buffer its owner's reduction has just written, line by line out of
 * the other core's cache.  Not agreed, or refused by the probe, it runs
 * the one-shot (cop_progress).
 *
 * Where a system call is dear (mlap2p_dp_syscall_dear: 1.3-1.6 us for a
 * small process_vm_readv on the AMD PVM guests of issue 19) and a peer
 * is another process, MLAP2P_COLL_CMA_MAX defaults to DEAR_CMA_MAX and
 * nothing below MLAP2P_COLL_CMA_MIN goes by address: there the FIFO ran
 * the in-place one-shot of 8-32 KiB in 0.35-0.75 of the time, and the
 * ring 1-4 MiB in 0.5-0.65 of it, 16-64 MiB in 0.85-0.95
 * (docs/collectives.md).
 *
 * Pair connections cost every rank a FIFO per peer, so above
 * DIRECT_CONNECT_MAX ranks only a communicator that has them already
 * (from an all-to-all or a one-shot) offers.
 */
#include <pthread.h>
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
/*
 * DIRECT_CMA: bytes per cross-memory attach call (at most a chunk, the
 * scratch each of U and V has).  2 ranks, Intel Xeon guest, 2026-12-05,
 * in place: 16 MiB 1.35-1.40 ms in 128 KiB to 512 KiB pieces, 2.8 ms in
 * 1 MiB ones (docs/collectives.md).
 */
#define DIRECT_CMA_BLOCK (256UL << 10)

/*
 * DIRECT_CMA between threads of one process: a rank reads another's
 * input, writes its output and adds to its sync word with plain loads and
 * stores, at the addresses of its offer.  When that rank is aborted (or
 * a call of it fails) while they are out, its buffers go back to its
 * caller and its coll is freed, so every such access must have stopped
 * first.  The communicators with a peer thread are registered
 * process-wide: a rank touches a peer thread's memory only under the
 * read side of live_lock and only while the peer is registered (its
 * coll's sync address and serial number, which no later coll reuses).
 * direct_live_del() takes a rank out under the write side: once it
 * returns no peer is inside, and the next access of any fails with
 * -ECANCELED.  A peer process is the kernel's to check.
 */
static pthread_rwlock_t live_lock;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;
static struct coll *live_head;		/* under live_lock */
static uint64_t live_serial;		/* under live_lock's write side */

/* A rank that withdraws waits for the step in progress, not for
 * readers that keep coming. */
static void live_init(void)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&live_lock, &a);
	pthread_rwlockattr_destroy(&a);
}

/* At init, for a communicator with a peer thread. */
void direct_live_add(struct coll *c)
{
	pthread_once(&live_once, live_init);
	pthread_rwlock_wrlock(&live_lock);
	c->serial = ++live_serial;
	c->liveNext = live_head;
	live_head = c;
	c->live = 1;
	pthread_rwlock_unlock(&live_lock);
}

/* At free, and when a call fails while our addresses may be out. */
void direct_live_del(struct coll *c)
{
	struct coll **pp;

	if (!c->threadPeers)
		return;
	pthread_rwlock_wrlock(&live_lock);
	for (pp = &live_head; *pp && *pp != c; pp = &(*pp)->liveNext)
		;
	if (*pp)
		*pp = c->liveNext;
	c->live = 0;
	pthread_rwlock_unlock(&live_lock);
}

/*
 * 1 if the peer threads' memory may be touched now: every one is still
 * registered, and live_lock is read-held until peers_out() (never
 * across a wait: a rank that withdraws waits for it).  0 if one has
 * withdrawn (said in the log).  Without peer threads, 1 and no lock.
 */
static int peers_in(const struct cop *o)
{
	const struct coll *c = o->c, *e;

	if (!c->threadPeers)
		return 1;
	pthread_rwlock_rdlock(&live_lock);
	for (int p = 0; p < c->n; p++) {
		const struct ddesc *d = &c->dx[p].d;

		if (p == c->rank || !mlap2p_same_process(c->comm, p))
			continue;
		for (e = live_head; e; e = e->liveNext)
			if ((uintptr_t)&e->sync == d->addrSync &&
			    e->serial == d->serial)
				break;
		if (!e) {
			pthread_rwlock_unlock(&live_lock);
			WARN("%s: rank %d: rank %d withdrew its buffers (aborted, or its call failed)",
			     o->fn, c->rank, p);
			return 0;
		}
	}
	return 1;
}

static void peers_out(const struct cop *o)
{
	if (o->c->threadPeers)
		pthread_rwlock_unlock(&live_lock);
}

/* Are @o's buffers regions the peers can map (DIRECT_MAP)?  Can they
 * reach them by address (DIRECT_CMA)?  Fills our c->dx entry. */
int direct_offer(struct cop *o)
{
	struct coll *c = o->c;
	struct ddesc *d;
	size_t bytes = o->count * o->es, after;
	struct ncclRtIpcMemHandle ipc;
	size_t off;
	int ways = 0;

	if (!c->direct || !c->dx || o->kind != K_ALL_REDUCE || !bytes ||
	    (o->algo == ALGO_ONESHOT && (bytes <= FAST_MAX || c->n != 2)) ||
	    (c->n > DIRECT_CONNECT_MAX && !c->allPeers))
		return 0;
	d = &c->dx[c->rank].d;
	d->bytes = bytes;
	d->addrIn = (uintptr_t)o->in;
	d->addrOut = (uintptr_t)o->out;
	d->addrSync = (uintptr_t)&c->sync;
	d->serial = c->serial;
	/* Withdrawn after a failure: the peer threads could not reach us. */
	if (c->cmaState >= 0 && c->cmaMin && (c->live || !c->threadPeers) &&
	    (bytes >= c->cmaMin ? !c->cmaMax || bytes < c->cmaMax :
	     !c->cmaMax && o->algo == ALGO_ONESHOT &&
	     (o->in == o->out || c->cmaThreads)))
		ways = DIRECT_CMA;
	_Static_assert(sizeof(ipc) == sizeof(d->ipcIn), "handle size");
	if (mlap2p_region_lookup(c->comm, o->in, &ipc, &off, &after) ||
	    after < bytes)
		return ways;
	memcpy(d->ipcIn, &ipc, sizeof(ipc));
	d->offIn = off;
	if (mlap2p_region_lookup(c->comm, o->out, &ipc, &off, &after) ||
	    after < bytes)
		return ways;
	memcpy(d->ipcOut, &ipc, sizeof(ipc));
	d->offOut = off;
	return ways | DIRECT_MAP;
}

/* Our run of one way, after prev's (@prev) and our own offer. */
static int direct_run(int offered, uint64_t prev, uint64_t n)
{
	return offered ? (int)(prev < n ? prev + 1 : n) : 0;
}

/* A preamble hop's message from prev is in o->rmsg: our runs after it. */
void direct_hop(struct cop *o)
{
	uint64_t n = (uint64_t)o->c->n, m, x = o->rmsg[2], ways;

	if (o->hop) {
		m = (uint32_t)o->rmsg[7];
		x = o->rmsg[7] >> 32;
	} else {
		ways = (x & ~DIRECT_WAYS) == DIRECT_OFFER ? x & DIRECT_WAYS : 0;
		m = !!(ways & DIRECT_MAP);
		x = !!(ways & DIRECT_CMA);
	}
	o->drun = direct_run(o->direct & DIRECT_MAP, m, n);
	o->crun = direct_run(o->direct & DIRECT_CMA, x, n);
}

/* After the preamble: the way every rank offered (regions first), or 0. */
int direct_all(const struct cop *o)
{
	if (o->drun == o->c->n)
		return DIRECT_MAP;
	return o->crun == o->c->n ? DIRECT_CMA : 0;
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

/*
 * DIRECT_CMA between threads of one process: the messages that order a
 * rank's accesses to another's buffers (handles, done words) travel in
 * LL lines, whose flag loads and stores are relaxed, so each also gets a
 * release/acquire pair, as every other hand-off between threads in the
 * library does.  Each pair is on the sync word of a rank that cannot
 * have returned yet: before the handles, each rank's own (its peers
 * load it once the handles are in); before the done words (and the
 * probe's, which follow its read of a byte in another rank's slice),
 * each peer's (each rank loads its own once they are in: a peer may be
 * gone by then).
 */
static uint64_t *peer_sync(const struct coll *c, int p)
{
	return (uint64_t *)(uintptr_t)c->dx[p].d.addrSync;
}

/* @handles: after the handles came in, else after the done (or the
 * probe's) words. */
static void direct_acquire(const struct cop *o, int handles)
{
	struct coll *c = o->c;

	if (o->direct != DIRECT_CMA)
		return;
	if (!handles) {
		(void)__atomic_load_n(&c->sync, __ATOMIC_ACQUIRE);
		return;
	}
	for (int p = 0; p < c->n; p++)
		if (p != c->rank && mlap2p_same_process(c->comm, p))
			(void)__atomic_load_n(peer_sync(c, p), __ATOMIC_ACQUIRE);
}

/* @handles: before the handles go out, else before the done (or the
 * probe's) words. */
static void direct_release(const struct cop *o, int handles)
{
	struct coll *c = o->c;

	if (o->direct != DIRECT_CMA)
		return;
	if (handles) {
		__atomic_store_n(&c->sync, 1, __ATOMIC_RELEASE);
		return;
	}
	for (int p = 0; p < c->n; p++)
		if (p != c->rank && mlap2p_same_process(c->comm, p))
			__atomic_fetch_add(peer_sync(c, p), 1, __ATOMIC_RELEASE);
}

/* After the preamble: 1 direct (the handles are on their way), 0 the
 * ring, -errno. */
int direct_start(struct cop *o)
{
	o->dstate = 0;
	o->derr = 0;
	o->direct = direct_all(o);
	if (!o->direct)
		return 0;
	direct_release(o, 1);
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

/*
 * DIRECT_CMA: x[p]'s bytes [at, at + b) where we can read them: our own
 * input, or peer p's copied into @buf.  Premultiplied for a floating AVG
 * (into @buf).  0 or -errno.
 */
static int cma_get(struct cop *o, int p, size_t at, size_t b, char *buf,
		   const char **x)
{
	struct coll *c = o->c;
	size_t m = b / o->es;
	int ret;

	if (p == c->rank) {
		*x = o->in + at;
	} else {
		ret = mlap2p_peer_copy(c->api, p, c->dx[p].d.addrIn + at, buf,
				       b, 0);
		if (ret)
			return ret;
		*x = buf;
	}
	if (avg_pre(o)) {
		mlap2p_premul(buf, *x, m, o->dtype, 1.0 / c->n);
		*x = buf;
	}
	return 0;
}

/*
 * DIRECT_CMA: elements [i, i + n) of the result into every output, in
 * direct_reduce()'s order, a block at a time: each peer's input read into
 * U (and V) by process_vm_readv, reduced into our output (T, in place on
 * rank 2 and up, whose input the first reductions have not read yet), and
 * written into each peer's output by process_vm_writev.  0 or -errno.
 */
static int cma_reduce(struct cop *o, size_t i, size_t n)
{
	struct coll *c = o->c;
	size_t es = o->es, blk, k, m, b, at;
	char *u = c->scratch, *v = c->scratch + c->chunk, *t;
	const char *x, *y;
	int op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op, r, ret;

	blk = (c->chunk < DIRECT_CMA_BLOCK ? c->chunk : DIRECT_CMA_BLOCK) / es;
	for (k = 0; k < n; k += m) {
		m = n - k < blk ? n - k : blk;
		b = m * es;
		at = (i + k) * es;
		t = o->in == o->out && c->rank > 1 ? slot_t(o) : o->out + at;
		ret = cma_get(o, 0, at, b, u, &x);
		if (!ret)
			ret = cma_get(o, 1, at, b, v, &y);
		if (ret)
			return ret;
		mlap2p_reduce2(t, x, y, m, o->dtype, op);
		for (r = 2; r < c->n; r++) {
			ret = cma_get(o, r, at, b, u, &x);
			if (ret)
				return ret;
			mlap2p_reduce2(t, t, x, m, o->dtype, op);
		}
		if (o->op == MLAP2P_AVG && !avg_pre(o))
			mlap2p_divide(t, m, o->dtype, c->n);
		for (r = 0; r < c->n; r++) {
			if (r == c->rank)
				continue;
			ret = mlap2p_peer_copy(c->api, r,
					       c->dx[r].d.addrOut + at, t, b, 1);
			if (ret)
				return ret;
		}
		if (t != o->out + at)
			memcpy(o->out + at, t, b);
	}
	return 0;
}

/* DIRECT_CMA: the offers' sizes. */
static int cma_check_all(struct cop *o)
{
	struct coll *c = o->c;

	for (int p = 0; p < c->n; p++)
		if (c->dx[p].d.bytes != o->count * o->es) {
			WARN("%s: rank %d: rank %d offered %llu bytes for a %zu-byte all-reduce",
			     o->fn, c->rank, p,
			     (unsigned long long)c->dx[p].d.bytes,
			     o->count * o->es);
			return -EPROTO;
		}
	return 0;
}

/*
 * DIRECT_CMA, the first time on a communicator: may every rank read every
 * other?  The kernel may refuse (Yama's ptrace_scope, a process that is
 * not dumpable), which no rank can know before it tries: each reads a
 * byte of each peer's input and tells every other what it got.
 */
static int cma_probe(struct cop *o)
{
	struct coll *c = o->c;
	char byte;
	int p, ret = 0;

	if (!peers_in(o))
		return -ECANCELED;
	for (p = 0; p < c->n && !ret; p++)
		if (p != c->rank)
			ret = mlap2p_peer_copy(c->api, p, c->dx[p].d.addrIn,
					       &byte, 1, 0);
	c->dx[c->rank].ok = (uint64_t)(uint32_t)-ret;
	direct_release(o, 0);	/* our reads before the word */
	peers_out(o);
	return direct_swap(o, offsetof(struct dpeer, ok), sizeof(uint64_t));
}

/* After the probe's words: 1 every rank can go on, 0 one cannot (the
 * communicator's all-reduces go round the ring from now on). */
static int cma_probed(struct cop *o)
{
	struct coll *c = o->c;

	for (int p = 0; p < c->n; p++)
		if (c->dx[p].ok) {
			INFO(NCCL_COLL, "%s: rank %d: rank %d cannot read the other ranks' memory (%s): all-reduces of plain buffers no longer go direct by address",
			     o->fn, c->rank, p,
			     strerror((int)(uint32_t)c->dx[p].ok));
			c->cmaState = -1;
			return 0;
		}
	c->cmaState = 1;
	return 1;
}

/* Our slice of the elements, after the swap (and the probe). */
static void direct_slice(struct cop *o)
{
	struct coll *c = o->c;

	o->dnext = o->count * (size_t)c->rank / (size_t)c->n;
	o->dend = o->derr ? o->dnext :
		  o->count * (size_t)(c->rank + 1) / (size_t)c->n;
	o->dstate = 1;
}

/* 1 done, 0 not yet, 2 go round the ring instead (DIRECT_CMA refused),
 * -errno. */
int direct_progress(struct cop *o, int *moved)
{
	struct coll *c = o->c;
	size_t sub = DIRECT_SUB / o->es, step = DIRECT_STEP / o->es;
	uint64_t seq = o->hdr[0] >> 32;
	int ret, p, held = 0;	/* peers_in() */

	switch (o->dstate) {
	case 0:		/* the handles */
		ret = direct_wait(o, moved);
		if (ret <= 0)
			return ret;
		if (o->direct == DIRECT_MAP) {
			o->derr = direct_map_all(o);
		} else {
			if (!peers_in(o))
				return -ECANCELED;
			held = 1;
			direct_acquire(o, 1);
			o->derr = cma_check_all(o);
			if (!c->cmaState) {
				peers_out(o);
				ret = cma_probe(o);
				if (ret)
					return ret;
				o->dstate = 4;
				return 0;
			}
		}
		direct_slice(o);
		/* fall through */
	case 1:		/* our slice, a step per call */
		if (o->direct == DIRECT_CMA) {
			size_t n = o->dend - o->dnext < step ?
				   o->dend - o->dnext : step;

			if (!held && !peers_in(o))
				return -ECANCELED;
			held = 1;
			ret = n ? cma_reduce(o, o->dnext, n) : 0;
			if (ret) {
				o->derr = ret;
				o->dend = o->dnext;
			}
			o->dnext += ret ? 0 : n;
		} else {
			for (size_t end = o->dnext + step;
			     o->dnext < o->dend && o->dnext < end;) {
				size_t n = o->dend - o->dnext < sub ?
					   o->dend - o->dnext : sub;

				direct_reduce(o, o->dnext, n);
				o->dnext += n;
			}
		}
		*moved = 1;
		if (o->dnext < o->dend) {
			/* The rest of the slice may be progressed on another
			 * thread (a non-blocking all-reduce): fence our
			 * streaming stores here, once per step. */
			mlap2p_copy_fence();
			if (held)
				peers_out(o);
			return 0;
		}
		/* Our stores into the peers' outputs before the words that
		 * say they are done: the streaming ones (never fenced on
		 * the way: a store fence per 8 KiB cost a 64 MiB all-reduce
		 * a fifth of its time), then the rest. */
		mlap2p_copy_fence();
		atomic_thread_fence(memory_order_seq_cst);
		direct_release(o, 0);
		if (held)
			peers_out(o);
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
		direct_acquire(o, 0);
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
	case 4:		/* DIRECT_CMA: the probe's words */
		ret = direct_wait(o, moved);
		if (ret <= 0)
			return ret;
		direct_acquire(o, 0);
		if (!cma_probed(o))
			return 2;
		direct_slice(o);
		return 0;
	}
	return 1;
}
