// SPDX-License-Identifier: MIT
/*
 * Collectives: per-communicator state, requests and the preamble that
 * checks every rank makes the same call.
 */
#include "coll/coll.h"

const char *kind_name(int kind)
{
	static const char *const names[] = {
		"?", "all_reduce", "broadcast", "reduce", "all_gather",
		"reduce_scatter", "all_to_all",
	};

	return kind >= 1 && kind <= 6 ? names[kind] : "?";
}

int is_float(int dtype)
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
	/* No peer thread touches our buffers or c after this. */
	direct_live_del(c);
	/* Unfinished non-blocking ones: their requests are the caller's,
	 * ended as cancelled (as the data plane's are), so that a wait
	 * after the abort or destroy frees them; the ops go, their data
	 * plane requests join those failed collectives left. */
	while (c->pendHead) {
		struct nbop *nb = c->pendHead;

		c->pendHead = nb->next;
		mlap2p_request_ext_done(nb->req, -ECANCELED);
		ring_orphan_all(&nb->o);
		free(nb);
	}
	/* dpFree ran first: every one of those is complete. */
	for (i = 0; i < c->norphans; i++)
		free(c->orphans[i]);
	free(c->orphans);
	free(c->fast);
	free(c->dx);
	if (c->scratch && !c->scratchMem)
		free(c->scratch);
	/* A region from mlap2p_mem_alloc goes with the runtime. */
	free(c->order);
	free(c->orders);
	free(c->poss);
	free(c);
	comm->coll = NULL;
	comm->collFree = NULL;
	comm->collDump = NULL;
}

/* mlap2p_dump_state()'s line for the collectives: how many ran each way. */
static void coll_dump(struct ncclComm *comm, int fd)
{
	struct coll *c = comm->coll;
	unsigned long long w[CW_N];

	for (int i = 0; i < CW_N; i++)
		w[i] = __atomic_load_n(&c->ways[i], __ATOMIC_RELAXED);
	dprintf(fd, "mlap2p: rank %d collectives: ring %llu one-shot %llu pairs %llu direct-regions %llu direct-address %llu\n",
		comm->rank, w[CW_RING], w[CW_ONESHOT], w[CW_PAIRS], w[CW_MAP],
		w[CW_CMA]);
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
	/* Only NCCL's names, none of them here: the ring runs everything. */
	if (!invert && !m) {
		INFO(NCCL_COLL, "NCCL_ALGO=%s names no algorithm of mlap2p's (Ring, OneShot): the ring",
		     getenv("NCCL_ALGO"));
		m = ALGO_RING;
	}
	m = invert ? (ALGO_RING | ALGO_ONESHOT) & ~m : m;
	if (!m) {
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

/*
 * The rings: those already connected on channels 0, 1, ... (an explicit
 * mlap2p_connect_ring), else the communicator's nRings connected now.
 */
static int coll_ring(struct coll *c)
{
	int ret, i, r;

	ret = mlap2p_ring_get(c->api, 0, c->order, &c->prev, &c->next);
	if (ret == -ENOTCONN) {
		ret = mlap2p_connect_ring(c->api, c->comm->nRings);
		if (ret)
			return ret;
		ret = mlap2p_ring_get(c->api, 0, c->order, &c->prev, &c->next);
	}
	if (ret)
		return ret;
	for (i = 0; i < c->n && c->order[i] != c->rank; i++)
		;
	c->pos = i;
	c->orders = malloc(sizeof(int) * (size_t)c->n * LANES_MAX);
	c->poss = malloc(sizeof(int) * LANES_MAX);
	if (!c->orders || !c->poss)
		return -ENOMEM;
	for (r = 0; r < LANES_MAX; r++) {
		int *order = c->orders + (size_t)r * (size_t)c->n;

		if (mlap2p_ring_get(c->api, r, order, NULL, NULL))
			break;
		for (i = 0; i < c->n && order[i] != c->rank; i++)
			;
		c->poss[r] = i;
	}
	c->nrings = r;
	c->allPeers = all_peers_connected(c);
	return 0;
}

struct coll *coll_get(struct mlap2p_comm *api, int *err)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	struct coll *c = comm->coll;
	uint64_t v;
	long l;
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
		ret = mlap2p_env_int("MLAP2P_COLL_DIRECT", 0, 1, 1, &l);
		c->direct = (int)l;
	}
	if (!ret) {
		ret = mlap2p_env_size("MLAP2P_COLL_CMA_MIN", 0, 1ULL << 40,
				      DEF_CMA_MIN, &v);
		c->cmaMin = (size_t)v;
	}
	if (!ret) {
		ret = mlap2p_dp_nt_min(api, &c->ntMin);
	}
	/* Every peer a thread of ours or a process on this host that
	 * MLAP2P_CMA lets us read: the direct all-reduce may go by address. */
	c->cmaThreads = 1;
	for (int p = 0; !ret && p < c->n; p++) {
		if (p != c->rank && !mlap2p_peer_cma(api, p))
			c->cmaState = -1;
		if (p != c->rank && !mlap2p_same_process(comm, p))
			c->cmaThreads = 0;
		else if (p != c->rank)
			c->threadPeers = 1;
	}
	if (!ret) {
		/* Between threads the way by address is memcpy: no calls. */
		int dear = 0;

		if (!c->cmaThreads)
			ret = mlap2p_dp_syscall_dear(api, &dear);
		if (!ret)
			ret = mlap2p_env_size("MLAP2P_COLL_CMA_MAX", 0,
					      1ULL << 40,
					      dear ? DEAR_CMA_MAX : 0, &v);
		c->cmaMax = (size_t)v;
	}
	if (!ret) {
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
	if (!ret && c->n > 1 && c->n <= PAIRS_MAX) {
		c->dx = calloc((size_t)c->n, sizeof(*c->dx));
		if (!c->dx)
			ret = -ENOMEM;
	}
	if (!ret && c->n > 1)
		ret = coll_ring(c);
	if (ret) {
		if (c->scratch && !c->scratchMem)
			free(c->scratch);
		free(c->dx);
		free(c->order);
		free(c->orders);
		free(c->poss);
		free(c);
		*err = ret;
		return NULL;
	}
	if (c->threadPeers)
		direct_live_add(c);
	comm->coll = c;
	comm->collFree = coll_free;
	comm->collDump = coll_dump;
	return c;
}

void orphan(struct coll *c, struct mlap2p_request **req)
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
int req_test(struct coll *c, struct mlap2p_request **req)
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

void hdr_make(struct cop *o)
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

int mismatch(struct cop *o)
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
int oneshot_inline(const struct cop *o)
{
	return o->algo == ALGO_ONESHOT && o->c->n == 2 &&
	       o->count * o->es <= INLINE_MAX;
}

void pre_fill(struct cop *o)
{
	memset(o->smsg, 0, sizeof(o->smsg));
	o->smsg[0] = o->hdr[0];
	o->smsg[1] = o->hdr[1];
	if (o->hop == 0) {
		if (o->direct)
			o->smsg[2] = DIRECT_OFFER | (uint64_t)o->direct;
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
	o->smsg[7] = (uint64_t)o->drun | (uint64_t)o->crun << 32;
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
int pre_progress(struct cop *o, int *moved)
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
		direct_hop(o);
		o->hop++;
		*moved = 1;
	}
	return 1;
}
