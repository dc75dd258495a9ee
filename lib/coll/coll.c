// SPDX-License-Identifier: MIT
/*
 * lib/coll/coll.c: <mlap2p/coll.h>, NCCL's ring collectives (and a
 * one-shot all-reduce for small messages on 2 ranks) on the public data
 * plane: isend/irecv/request_test between ring neighbours.
 *
 * Every collective is a small state machine (struct cop): connect, a
 * preamble that checks that all ranks make the same call, the data phase,
 * a local finish.  A blocking call runs one to completion; a group's
 * outermost mlap2p_group_end() runs those recorded inside it together
 * (mlap2p_coll_group_end()).
 *
 * The preamble.  On 2 ranks: one 32-byte message each way, the header
 * {seq | root | kind | dtype | op | algo, count} (+ up to 16 data bytes
 * for the one-shot all-reduce, so that an 8-byte all-reduce is one LL
 * message each way and one add).  On n >= 3: n - 1 hops around the ring
 * (hop 0: the 32-byte header to next; hops 1..n-2: 64 bytes, the sender's
 * header and the first mismatch it knows of), so that every rank learns
 * of any mismatch before anything else moves: a ring has at least two
 * edges where neighbours differ, and each finding travels n - 2 hops.
 * Every first message is 32 bytes whatever the call, so ranks that
 * disagree still read whole messages.
 *
 * The ring data phase.  A collective is cut into units; unit u of the
 * sender's sends to next is unit u of the receiver's receives from prev
 * (messages between two ranks are ordered).  Receives are posted ahead
 * into NSLOTS scratch slots (or straight into the output), sends as soon
 * as what they carry is there, so the next chunk moves while this one is
 * reduced.  Scratch is allocated once per communicator
 * (mlap2p_mem_alloc, so peers' sends write straight into it).
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"
#include "mlap2p/dataplane.h"
#include "reduce.h"
#include "mlap2p/coll.h"

/* Collectives, as in the header's kind field (and the messages). */
enum {
	K_ALL_REDUCE = 1,
	K_BROADCAST = 2,
	K_REDUCE = 3,
	K_ALL_GATHER = 4,
	K_REDUCE_SCATTER = 5,
	K_ALL_TO_ALL = 6,
};

#define ALGO_RING	1
#define ALGO_ONESHOT	2

#define HDR_BYTES	32	/* every first message */
#define STAT_BYTES	64	/* preamble hops 1..n-2 */
#define INLINE_MAX	16	/* data bytes a 2-rank header carries */
#define NSLOTS		4	/* scratch receive slots */
#define WIN		8	/* requests in flight per direction */
#define DEF_CHUNK	(512UL << 10)
#define DEF_ONESHOT_MAX	(16UL << 10)
#define PAIRS_MAX	64	/* ranks all-to-all and one-shot take */

/* Per communicator (comm->coll). */
struct coll {
	struct ncclComm *comm;
	struct mlap2p_comm *api;
	int n, rank, pos, prev, next;
	int *order;			/* ring of channel 0 */
	uint32_t seq;			/* collectives started */
	unsigned int algoMask;		/* NCCL_ALGO */
	size_t chunk;			/* MLAP2P_COLL_CHUNK */
	size_t oneshotMax;		/* MLAP2P_COLL_ONESHOT_MAX */
	int allPeers;			/* every pair connected */
	char *scratch;
	size_t scratchBytes;
	int scratchMem;			/* from mlap2p_mem_alloc */
	long peerTimeoutMs;
	uint32_t spinYield;		/* idle passes before sched_yield() */
	/* Requests left behind by a failed collective: the data plane ends
	 * them at destroy/abort, we free them (collFree runs after dpFree). */
	struct mlap2p_request **orphans;
	int norphans, maxOrphans;
};

/* One collective in progress. */
struct cop {
	struct coll *c;
	const char *fn;			/* "mlap2p_all_reduce", for messages */
	int kind, dtype, op, root, algo;
	size_t count, es;
	const char *in;
	char *out;
	int inplace;
	uint64_t hdr[2];
	int phase;
	int err;
	struct cop *groupNext;

	/* preamble */
	int hop;
	struct mlap2p_request *ps, *pr;
	uint64_t smsg[STAT_BYTES / 8], rmsg[STAT_BYTES / 8];
	int bad, badA, badB;
	uint64_t descA[2], descB[2];

	/* ring units */
	uint64_t nsend, nrecv, T;
	uint64_t sPost, sDone, rPost, rDone;
	struct mlap2p_request *sreq[WIN], *rreq[WIN];
	int sRel[WIN], sP[WIN];		/* slots a send frees at its end */
	int64_t rslot[NSLOTS];		/* receive unit in R slot s, or -1 */
	int64_t pslot[NSLOTS];		/* send unit in P slot s, or -1 */
	size_t E;			/* chunk elements */
	int d;				/* chain distance from root */

	/* pairs (one-shot data, all-to-all) */
	struct mlap2p_request *preq[2 * PAIRS_MAX];
	int npreq;
};

enum { PH_CONNECT, PH_PRE, PH_CONNECT_ALL, PH_DATA, PH_FINISH, PH_DONE };

static const char *kind_name(int kind)
{
	static const char *const names[] = {
		"?", "all_reduce", "broadcast", "reduce", "all_gather",
		"reduce_scatter", "all_to_all",
	};

	return kind >= 1 && kind <= 6 ? names[kind] : "?";
}

static int is_float(int dtype)
{
	return dtype >= MLAP2P_FLOAT16;
}

/* A call as text, from its header words. */
static void hdr_text(const uint64_t *h, char *buf, size_t len)
{
	int kind = (int)(h[0] >> 12 & 0xf), dtype = (int)(h[0] >> 8 & 0xf);
	int op = (int)(h[0] >> 4 & 0xf), root = (int)(h[0] >> 16 & 0xffff);
	const char *dn = mlap2p_dtype_name(dtype), *on = mlap2p_redop_name(op);
	unsigned int seq = (unsigned int)(h[0] >> 32);
	unsigned long long count = (unsigned long long)h[1];

	switch (kind) {
	case K_ALL_REDUCE:
	case K_REDUCE_SCATTER:
		snprintf(buf, len, "%s(count %llu, %s, %s) #%u",
			 kind_name(kind), count, dn ? dn : "?", on ? on : "?",
			 seq);
		break;
	case K_REDUCE:
		snprintf(buf, len, "%s(count %llu, %s, %s, root %d) #%u",
			 kind_name(kind), count, dn ? dn : "?", on ? on : "?",
			 root, seq);
		break;
	case K_BROADCAST:
		snprintf(buf, len, "%s(count %llu, %s, root %d) #%u",
			 kind_name(kind), count, dn ? dn : "?", root, seq);
		break;
	case K_ALL_GATHER:
	case K_ALL_TO_ALL:
		snprintf(buf, len, "%s(count %llu, %s) #%u", kind_name(kind),
			 count, dn ? dn : "?", seq);
		break;
	default:
		snprintf(buf, len, "no collective (header %016llx %016llx)",
			 (unsigned long long)h[0], count);
	}
}

/* ---- per-communicator state ---- */

static void coll_free(struct ncclComm *comm)
{
	struct coll *c = comm->coll;
	int i;

	if (!c)
		return;
	/* dpFree ran first: every request is complete; free what a failed
	 * collective left. */
	for (i = 0; i < c->norphans; i++)
		free(c->orphans[i]);
	free(c->orphans);
	if (c->scratch && !c->scratchMem)
		free(c->scratch);
	/* A region from mlap2p_mem_alloc goes with the runtime. */
	free(c->order);
	free(c);
	comm->coll = NULL;
	comm->collFree = NULL;
}

static int parse_algo(unsigned int *mask)
{
	const char *s = getenv("NCCL_ALGO");
	char buf[256], *tok, *save = NULL;
	unsigned int m = 0;
	int invert = 0;

	*mask = ALGO_RING | ALGO_ONESHOT;
	if (!s || !*s)
		return 0;
	if (*s == '^') {
		invert = 1;
		s++;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcasecmp(tok, "ring"))
			m |= ALGO_RING;
		else if (!strcasecmp(tok, "oneshot"))
			m |= ALGO_ONESHOT;
		else if (!strcasecmp(tok, "tree") || !strcasecmp(tok, "nvls") ||
			 !strcasecmp(tok, "nvlstree") ||
			 !strcasecmp(tok, "collnetdirect") ||
			 !strcasecmp(tok, "collnetchain") ||
			 !strcasecmp(tok, "pat"))
			;	/* NCCL's: none here */
		else {
			WARN("NCCL_ALGO=%s: unknown algorithm '%s' (Ring, OneShot)",
			     getenv("NCCL_ALGO"), tok);
			return -EINVAL;
		}
	}
	m = invert ? (ALGO_RING | ALGO_ONESHOT) & ~m : m;
	/* The ring runs everything: it stays if nothing else may. */
	if (!(m & ALGO_RING) && !(m & ALGO_ONESHOT)) {
		WARN("NCCL_ALGO=%s leaves no algorithm (Ring, OneShot)",
		     getenv("NCCL_ALGO"));
		return -EINVAL;
	}
	*mask = m;
	return 0;
}

static int conn_both(struct mlap2p_comm *api, int peer)
{
	struct mlap2p_conn_desc d;

	return !mlap2p_conn_get(api, 0, peer, MLAP2P_DIR_SEND, &d) &&
	       !mlap2p_conn_get(api, 0, peer, MLAP2P_DIR_RECV, &d);
}

static int all_peers_connected(struct coll *c)
{
	int p;

	for (p = 0; p < c->n; p++)
		if (p != c->rank && !conn_both(c->api, p))
			return 0;
	return 1;
}

/* The ring of channel 0 (connecting it first if needed). */
static int coll_ring(struct coll *c)
{
	int ret, i;

	ret = mlap2p_ring_get(c->api, 0, c->order, &c->prev, &c->next);
	if (ret == -ENOTCONN) {
		ret = mlap2p_connect_ring(c->api, 1);
		if (ret)
			return ret;
		ret = mlap2p_ring_get(c->api, 0, c->order, &c->prev, &c->next);
	}
	if (ret)
		return ret;
	for (i = 0; i < c->n && c->order[i] != c->rank; i++)
		;
	c->pos = i;
	c->allPeers = all_peers_connected(c);
	return 0;
}

static struct coll *coll_get(struct mlap2p_comm *api, int *err)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	struct coll *c = comm->coll;
	uint64_t v;
	int ret;

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	c->comm = comm;
	c->api = api;
	c->n = comm->nRanks;
	c->rank = comm->rank;
	c->order = calloc((size_t)c->n, sizeof(int));
	ret = c->order ? parse_algo(&c->algoMask) : -ENOMEM;
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_COLL_CHUNK", 4096, 64UL << 20,
				      DEF_CHUNK, &v);
	if (!ret) {
		c->chunk = (size_t)v & ~(size_t)63;
		ret = mlap2p_env_size("MLAP2P_COLL_ONESHOT_MAX", 0, c->chunk,
				      DEF_ONESHOT_MAX, &v);
	}
	if (!ret) {
		c->oneshotMax = (size_t)v < c->chunk ? (size_t)v : c->chunk;
		ret = mlap2p_env_timeout("MLAP2P_PEER_TIMEOUT", 5000,
					 &c->peerTimeoutMs);
	}
	if (!ret) {
		/* As the data plane: more ranks than cores yield at once. */
		v = c->n > sysconf(_SC_NPROCESSORS_ONLN) ? 64 : 4096;
		ret = mlap2p_env_size("MLAP2P_SPIN", 1, 1UL << 30, v, &v);
		c->spinYield = (uint32_t)v;
	}
	if (!ret && c->n > 1) {
		/* R and P per slot, then T; one-shot inputs use R and P. */
		c->scratchBytes = (2 * NSLOTS + 1) * c->chunk;
		if (!mlap2p_mem_alloc(api, c->scratchBytes,
				      (void **)&c->scratch)) {
			c->scratchMem = 1;
		} else if (posix_memalign((void **)&c->scratch, 4096,
					  c->scratchBytes)) {
			c->scratch = NULL;
			ret = -ENOMEM;
		}
	}
	if (!ret && c->n > 1)
		ret = coll_ring(c);
	if (ret) {
		if (c->scratch && !c->scratchMem)
			free(c->scratch);
		free(c->order);
		free(c);
		*err = ret;
		return NULL;
	}
	comm->coll = c;
	comm->collFree = coll_free;
	return c;
}

static void orphan(struct coll *c, struct mlap2p_request **req)
{
	if (!*req)
		return;
	if (c->norphans == c->maxOrphans) {
		int m = c->maxOrphans ? 2 * c->maxOrphans : 16;
		void *p = realloc(c->orphans, sizeof(*c->orphans) * (size_t)m);

		if (!p) {
			*req = NULL;	/* lost: better than a double use */
			return;
		}
		c->orphans = p;
		c->maxOrphans = m;
	}
	c->orphans[c->norphans++] = *req;
	*req = NULL;
}

/* ---- requests ---- */

/* Test *req: 1 done (req freed), 0 not yet, -errno failed. */
static int req_test(struct coll *c, struct mlap2p_request **req)
{
	int done = 0, ret;

	if (!*req)
		return 1;
	ret = mlap2p_request_test(req, &done);
	if (ret < 0) {
		if (!done)
			orphan(c, req);
		*req = NULL;
		return ret;
	}
	return done;
}

/* ---- the preamble ---- */

static void hdr_make(struct cop *o)
{
	int root = o->kind == K_BROADCAST || o->kind == K_REDUCE ? o->root : 0;
	int op = o->kind == K_ALL_REDUCE || o->kind == K_REDUCE ||
		 o->kind == K_REDUCE_SCATTER ? o->op : 0;

	o->hdr[0] = (uint64_t)o->c->seq << 32 | (uint64_t)(root & 0xffff) << 16 |
		    (uint64_t)(o->kind & 0xf) << 12 |
		    (uint64_t)(o->dtype & 0xf) << 8 | (uint64_t)(op & 0xf) << 4 |
		    (uint64_t)(o->algo & 0xf);
	o->hdr[1] = o->count;
}

static int mismatch(struct cop *o)
{
	struct coll *c = o->c;
	char a[160], b[160];

	hdr_text(o->descA, a, sizeof(a));
	hdr_text(o->descB, b, sizeof(b));
	WARN("%s: rank %d: collective mismatch: rank %d called %s, rank %d called %s",
	     o->fn, c->rank, o->badA, a, o->badB, b);
	return -EPROTO;
}

/* The 2-rank one-shot's inline bytes, where the header carries data. */
static int oneshot_inline(const struct cop *o)
{
	return o->algo == ALGO_ONESHOT && o->c->n == 2 &&
	       o->count * o->es <= INLINE_MAX;
}

static void pre_fill(struct cop *o)
{
	memset(o->smsg, 0, sizeof(o->smsg));
	o->smsg[0] = o->hdr[0];
	o->smsg[1] = o->hdr[1];
	if (o->hop == 0) {
		if (oneshot_inline(o)) {
			if (o->op == MLAP2P_AVG && is_float(o->dtype))
				mlap2p_premul(&o->smsg[2], o->in, o->count,
					      o->dtype, 1.0 / o->c->n);
			else if (o->count)
				memcpy(&o->smsg[2], o->in, o->count * o->es);
		}
		return;
	}
	if (o->bad) {
		o->smsg[2] = 1 | (uint64_t)(uint32_t)o->badA << 8 |
			     (uint64_t)(uint32_t)o->badB << 32;
		o->smsg[3] = o->descA[0];
		o->smsg[4] = o->descA[1];
		o->smsg[5] = o->descB[0];
		o->smsg[6] = o->descB[1];
	}
}

/* A hop's message from prev is in o->rmsg. */
static void pre_check(struct cop *o)
{
	struct coll *c = o->c;

	if (!o->bad && (o->rmsg[0] != o->hdr[0] || o->rmsg[1] != o->hdr[1])) {
		o->bad = 1;
		o->badA = c->prev;
		o->descA[0] = o->rmsg[0];
		o->descA[1] = o->rmsg[1];
		o->badB = c->rank;
		o->descB[0] = o->hdr[0];
		o->descB[1] = o->hdr[1];
	}
	if (!o->bad && o->hop > 0 && (o->rmsg[2] & 1)) {
		o->bad = 1;
		o->badA = (int)(o->rmsg[2] >> 8 & 0xffffff);
		o->badB = (int)(o->rmsg[2] >> 32);
		o->descA[0] = o->rmsg[3];
		o->descA[1] = o->rmsg[4];
		o->descB[0] = o->rmsg[5];
		o->descB[1] = o->rmsg[6];
	}
}

static size_t pre_bytes(const struct cop *o)
{
	return o->hop == 0 ? HDR_BYTES : STAT_BYTES;
}

/* 1 when the preamble is over (o->bad says how), 0 not yet, -errno. */
static int pre_progress(struct cop *o, int *moved)
{
	struct coll *c = o->c;
	int ret;

	while (o->hop < c->n - 1) {
		if (!o->ps && !o->pr) {
			pre_fill(o);
			ret = mlap2p_irecv(c->api, o->rmsg, pre_bytes(o),
					   c->prev, &o->pr);
			if (!ret)
				ret = mlap2p_isend(c->api, o->smsg,
						   pre_bytes(o), c->next,
						   &o->ps);
			if (ret)
				return ret;
			*moved = 1;
		}
		ret = req_test(c, &o->ps);
		if (ret < 0)
			return ret;
		ret = req_test(c, &o->pr);
		if (ret < 0)
			return ret;
		if (o->ps || o->pr)
			return 0;
		pre_check(o);
		o->hop++;
		*moved = 1;
	}
	return 1;
}

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

static int avg_pre(const struct cop *o)
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

static char *slot_t(const struct cop *o)
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

static void finalize(struct cop *o, void *dst, size_t len)
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

static void ring_setup(struct cop *o)
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

static void ring_orphan(struct cop *o)
{
	uint64_t u;

	for (u = o->sDone; u < o->sPost; u++)
		orphan(o->c, &o->sreq[u % WIN]);
	for (u = o->rDone; u < o->rPost; u++)
		orphan(o->c, &o->rreq[u % WIN]);
}

/* 1 done, 0 not yet, -errno.  *moved when anything moved. */
static int ring_progress(struct cop *o, int *moved)
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

static int pairs_post(struct cop *o)
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

static int pairs_progress(struct cop *o, int *moved)
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
static void oneshot_finish(struct cop *o)
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

/* ---- running a collective ---- */

static void local_copies(struct cop *o)
{
	struct coll *c = o->c;
	size_t bytes = o->count * o->es;

	switch (o->kind) {
	case K_ALL_GATHER:
		if (!o->inplace && bytes)
			memcpy(o->out + (size_t)c->rank * bytes, o->in, bytes);
		break;
	case K_BROADCAST:
		if (o->root == c->rank && !o->inplace && bytes)
			memcpy(o->out, o->in, bytes);
		break;
	case K_ALL_TO_ALL:
		if (bytes)
			memcpy(o->out + (size_t)c->rank * bytes,
			       o->in + (size_t)c->rank * bytes, bytes);
		break;
	}
}

static int fail(struct cop *o, int err)
{
	char prev[1024];

	if (o->phase == PH_PRE) {
		orphan(o->c, &o->ps);
		orphan(o->c, &o->pr);
	}
	ring_orphan(o);
	for (int i = 0; i < o->npreq; i++)
		orphan(o->c, &o->preq[i]);
	o->npreq = 0;
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

/* One step of @o: 1 done, 0 not yet, -errno. */
static int cop_progress(struct cop *o, int *moved)
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
		o->nsend = o->nrecv = 0;
		o->sPost = o->sDone = o->rPost = o->rDone = 0;
		if (avg_pre(o) && o->algo == ALGO_ONESHOT && !oneshot_inline(o))
			mlap2p_premul(slot_t(o), o->in, o->count, o->dtype,
				      1.0 / c->n);
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
		if ((o->kind == K_ALL_TO_ALL || o->algo == ALGO_ONESHOT) &&
		    !c->allPeers) {
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
		if (o->kind == K_ALL_TO_ALL ||
		    (o->algo == ALGO_ONESHOT && !oneshot_inline(o))) {
			ret = o->count ? pairs_post(o) : 0;
			if (ret)
				return fail(o, ret);
		} else if (o->algo == ALGO_RING) {
			ring_setup(o);
		}
		o->phase = PH_DATA;
		/* fall through */
	case PH_DATA:
		if (o->npreq)
			ret = pairs_progress(o, moved);
		else if (o->algo == ALGO_RING && o->kind != K_ALL_TO_ALL)
			ret = ring_progress(o, moved);
		else
			ret = 1;
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
		} else if (o->kind == K_ALL_REDUCE && o->algo == ALGO_ONESHOT) {
			oneshot_finish(o);
		}
		o->phase = PH_DONE;
		return 1;
	}
	return o->err ? o->err : 1;
}

/* Liveness of every rank (not only those we wait on directly): a dead
 * rank further round the ring would otherwise leave us waiting on a live
 * neighbour forever. */
static int check_peers(struct cop *o)
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
static int run_ops(struct cop **ops, int n)
{
	uint32_t idle = 0, yield = ops[0]->c->spinYield;
	int64_t nextCheck = mlap2p_now_ms() + 20;
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
		if ((idle & 15) == 0 && mlap2p_now_ms() >= nextCheck) {
			nextCheck = mlap2p_now_ms() + 20;
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

/* ---- groups ---- */

static __thread struct cop *group_head, *group_tail;
static __thread int group_err;

int mlap2p_coll_group_end(void)
{
	struct cop *o, **ops;
	int n = 0, i, ret;

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
	ret = 0;
	for (i = 0; i < n; i++)
		if (mlap2p_comm_enter(ops[i]->c->comm)) {
			fail(ops[i], -ECANCELED);
			ops[i]->c = NULL;
		}
	/* Skip entered-and-failed ones by marking them done. */
	{
		struct cop **live = calloc((size_t)n, sizeof(*live));
		int m = 0;

		if (!live) {
			ret = -ENOMEM;
		} else {
			for (i = 0; i < n; i++)
				if (ops[i]->c)
					live[m++] = ops[i];
			ret = run_ops(live, m);
			for (i = 0; i < m; i++)
				mlap2p_comm_leave(live[i]->c->comm);
			free(live);
		}
	}
	for (i = 0; i < n && !ret; i++)
		ret = ops[i]->err;
	free(ops);
out:
	if (group_err && !ret)
		ret = group_err;
	while ((o = group_head)) {
		group_head = o->groupNext;
		free(o);
	}
	group_tail = NULL;
	group_err = 0;
	return ret;
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

/*
 * The 8-byte path: a blocking 2-rank one-shot all-reduce whose header
 * carries the data, over the data plane's latency path (blocking LL
 * send, then receive).  1 done (*ret says how), 0 not taken.
 */
static int fast_allreduce(struct cop *o, int *ret)
{
	struct coll *c = o->c;
	int p, op;

	if (c->n != 2 || o->algo != ALGO_ONESHOT || !oneshot_inline(o))
		return 0;
	p = mlap2p_proto_for(c->api, HDR_BYTES);
	if (p != MLAP2P_PROTO_LL && p != MLAP2P_PROTO_LL128)
		return 0;	/* a SIMPLE send would wait for the receive */
	o->hop = 0;
	pre_fill(o);
	*ret = mlap2p_send(c->api, o->smsg, HDR_BYTES, c->next);
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
		o->badB = c->rank;
		o->descB[0] = o->hdr[0];
		o->descB[1] = o->hdr[1];
		*ret = mismatch(o);
		return 1;
	}
	if (o->count) {
		const void *a = c->rank ? &o->rmsg[2] : &o->smsg[2];
		const void *b = c->rank ? &o->smsg[2] : &o->rmsg[2];

		op = o->op == MLAP2P_AVG ? MLAP2P_SUM : o->op;
		mlap2p_reduce2(o->out, a, b, o->count, o->dtype, op);
		finalize(o, o->out, o->count);
	}
	*ret = 0;
	return 1;
}

/* Start (blocking or in a group) the collective described by *proto. */
static int coll_run(struct mlap2p_comm *api, struct cop *proto)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	struct cop *o, *ops[1];
	struct coll *c;
	int ret;

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
	if (mlap2p_group_depth() > 0) {
		o = malloc(sizeof(*o));
		mlap2p_comm_leave(comm);
		if (!o) {
			if (!group_err)
				group_err = -ENOMEM;
			return mlap2p_err(-ENOMEM);
		}
		*o = *proto;
		o->groupNext = NULL;
		if (group_tail)
			group_tail->groupNext = o;
		else
			group_head = o;
		group_tail = o;
		return 0;
	}
	if (fast_allreduce(proto, &ret)) {
		mlap2p_comm_leave(comm);
		return mlap2p_err(ret);
	}
	ops[0] = proto;
	ret = run_ops(ops, 1);
	mlap2p_comm_leave(comm);
	return mlap2p_err(ret);
}

static void cop_init(struct cop *o, const char *fn, int kind,
		     const void *sendbuf, void *recvbuf, size_t count,
		     int dtype, int op, int root)
{
	memset(o, 0, sizeof(*o));
	o->fn = fn;
	o->kind = kind;
	o->in = sendbuf;
	o->out = recvbuf;
	o->count = count;
	o->dtype = dtype;
	o->op = op;
	o->root = root;
}

MLAP2P_EXPORT int mlap2p_all_reduce(struct mlap2p_comm *comm,
				    const void *sendbuf, void *recvbuf,
				    size_t count, int dtype, int op)
{
	struct cop o;
	size_t b;
	int ret;

	cop_init(&o, __func__, K_ALL_REDUCE, sendbuf, recvbuf, count, dtype,
		 op, 0);
	ret = check_args(&o, comm, 1, 0);
	if (ret)
		return mlap2p_err(ret);
	b = count * o.es;
	o.inplace = sendbuf == recvbuf;
	ret = check_bufs(&o, sendbuf, b, 1, recvbuf, b, 1, o.inplace);
	if (ret)
		return mlap2p_err(ret);
	return coll_run(comm, &o);
}

MLAP2P_EXPORT int mlap2p_broadcast(struct mlap2p_comm *comm,
				   const void *sendbuf, void *recvbuf,
				   size_t count, int dtype, int root)
{
	struct cop o;
	size_t b;
	int ret, isroot;

	cop_init(&o, __func__, K_BROADCAST, sendbuf, recvbuf, count, dtype,
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
	return coll_run(comm, &o);
}

MLAP2P_EXPORT int mlap2p_reduce(struct mlap2p_comm *comm, const void *sendbuf,
				void *recvbuf, size_t count, int dtype, int op,
				int root)
{
	struct cop o;
	size_t b;
	int ret, isroot;

	cop_init(&o, __func__, K_REDUCE, sendbuf, recvbuf, count, dtype, op,
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
	return coll_run(comm, &o);
}

MLAP2P_EXPORT int mlap2p_all_gather(struct mlap2p_comm *comm,
				    const void *sendbuf, void *recvbuf,
				    size_t sendcount, int dtype)
{
	struct cop o;
	size_t b;
	int ret, n;

	cop_init(&o, __func__, K_ALL_GATHER, sendbuf, recvbuf, sendcount,
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
	return coll_run(comm, &o);
}

MLAP2P_EXPORT int mlap2p_reduce_scatter(struct mlap2p_comm *comm,
					const void *sendbuf, void *recvbuf,
					size_t recvcount, int dtype, int op)
{
	struct cop o;
	size_t b;
	int ret, n;

	cop_init(&o, __func__, K_REDUCE_SCATTER, sendbuf, recvbuf, recvcount,
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
	return coll_run(comm, &o);
}

MLAP2P_EXPORT int mlap2p_all_to_all(struct mlap2p_comm *comm,
				    const void *sendbuf, void *recvbuf,
				    size_t count, int dtype)
{
	struct cop o;
	size_t b;
	int ret, n;

	cop_init(&o, __func__, K_ALL_TO_ALL, sendbuf, recvbuf, count, dtype,
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
		return mlap2p_err(bad_arg(__func__,
					  "more than 64 ranks: not supported"));
	return coll_run(comm, &o);
}
