// SPDX-License-Identifier: MIT
/*
 * <nccl.h> on libmlap2p: tickets, running operations on the thread that
 * holds the turn, and posting them (lib/nccl/nc.h explains the order).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "mlap2p/dataplane.h"
#include "mlap2p/stream.h"
#include "mlap2p/coll.h"
#include "comm.h"
#include "dataplane/dataplane.h"
#include "topo.h"
#include "nc.h"

/* ------------------------------------------------------------------ */
/* Fences (nc.h)                                                      */
/* ------------------------------------------------------------------ */

static int nc_membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

int nc_fence_asym(void)
{
	const char *v = getenv("MLAP2P_MEMBARRIER");
	int cmds;

	if (v && !strcmp(v, "0"))
		return 0;
	cmds = nc_membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
	    !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		return 0;
	/* Per process, and idempotent: each communicator asks again (a
	 * child of fork(2) makes its own). */
	return !nc_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}

void nc_fence_heavy(const struct nc_comm *c)
{
	if (!c->asym) {
		nc_fence_full();
		return;
	}
	/* Registered when @c was made, so only a transient -ENOMEM can
	 * fail it (membarrier(2)); a full fence here would not match the
	 * other side's compiler barrier, so wait for memory instead. */
	while (nc_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
		if (errno != ENOMEM && errno != EINTR) {
			fprintf(stderr, "libmlap2p: membarrier(PRIVATE_EXPEDITED): %s\n",
				mlap2p_strerror(-errno));
			abort();
		}
		usleep(1000);
	}
}

/* ------------------------------------------------------------------ */
/* Tickets                                                            */
/* ------------------------------------------------------------------ */

void nc_turn_sleep(struct nc_comm *c, uint64_t t)
{
	int i;

	for (i = 0; i < 256; i++) {
		if (__atomic_load_n(&c->serving, __ATOMIC_ACQUIRE) == t)
			return;
		if (i >= 32)
			sched_yield();
	}
	pthread_mutex_lock(&c->tlock);
	__atomic_add_fetch(&c->waiters, 1, __ATOMIC_RELAXED);
	nc_fence_heavy(c);	/* waiters, then serving: see nc_turn_done */
	while (__atomic_load_n(&c->serving, __ATOMIC_ACQUIRE) != t)
		pthread_cond_wait(&c->tcond, &c->tlock);
	__atomic_sub_fetch(&c->waiters, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->tlock);
}

void nc_turn_wake(struct nc_comm *c)
{
	pthread_mutex_lock(&c->tlock);
	pthread_cond_broadcast(&c->tcond);
	pthread_mutex_unlock(&c->tlock);
}

/* The id of the thread whose group is @g, for the tickets' bias: never
 * 0, never reused.  It lives in the group so that a call which looks at
 * its group finds both with one TLS lookup (__tls_get_addr, in a shared
 * library). */
static uint64_t nc_thread_id(struct nc_group *g)
{
	static uint64_t last;		/* atomic: ids handed out */

	if (!g->tid)
		g->tid = __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
	return g->tid;
}

uint64_t nc_ticket(struct nc_comm *c)
{
	return nc_ticket_in(c, &nc_grp);
}

/* Not the owner's plain increment (nc_ticket_in): the first ticket,
 * which takes the bias, or any once the bias is ending or over. */
uint64_t nc_ticket_shared(struct nc_comm *c, struct nc_group *g)
{
	uint64_t me = nc_thread_id(g), own;
	int state = NC_BIASED;

	if (__atomic_load_n(&c->shared, __ATOMIC_ACQUIRE) == NC_BIASED) {
		own = __atomic_load_n(&c->owner, __ATOMIC_RELAXED);
		if (!own && __atomic_compare_exchange_n(&c->owner, &own, me, 0,
							__ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
			return nc_ticket_in(c, g);
		/* Another thread owns the counter: end the bias, once.
		 * shared, then taking, against the owner's taking, then
		 * shared. */
		if (__atomic_compare_exchange_n(&c->shared, &state, NC_ENDING,
						0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			nc_fence_heavy(c);
			while (__atomic_load_n(&c->taking, __ATOMIC_ACQUIRE))
				sched_yield();
			__atomic_store_n(&c->shared, NC_SHARED,
					 __ATOMIC_RELEASE);
		}
	}
	/* Until the bias has ended, the owner may be inside a plain
	 * increment that a locked add here would duplicate. */
	while (__atomic_load_n(&c->shared, __ATOMIC_ACQUIRE) != NC_SHARED)
		sched_yield();
	return __atomic_fetch_add(&c->next, 1, __ATOMIC_ACQ_REL);
}

/* nc_enter() found the communicator aborted or failed: why, and out. */
int nc_enter_failed(struct nc_comm *c)
{
	int err;

	if (__atomic_load_n(&c->aborted, __ATOMIC_RELAXED))
		err = -ECANCELED;
	else if (!(err = __atomic_load_n(&c->initErr, __ATOMIC_ACQUIRE)))
		err = __atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE);
	if (err)
		nc_leave(c);
	return err;
}

void nc_get(struct nc_comm *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void nc_put(struct nc_comm *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL))
		return;
	c->magic = 0;
	pthread_mutex_destroy(&c->plock);
	pthread_mutex_destroy(&c->elock);
	pthread_cond_destroy(&c->tcond);
	pthread_mutex_destroy(&c->tlock);
	free(c->conn);
	free(c->scratch);
	free(c);
}

/* ------------------------------------------------------------------ */
/* Running operations (on the thread holding the turn)                */
/* ------------------------------------------------------------------ */

size_t nc_dtype_size(int dtype)
{
	static const unsigned char sz[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

	return dtype >= 0 && dtype < (int)sizeof(sz) ? sz[dtype] : 0;
}

static float nc_bf16_to_float(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Round to nearest even, NaN kept quiet. */
static uint16_t nc_float_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffU) > 0x7f800000U)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffU + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/* dst[i] = src[i] * scalar, in the element type (NCCL's PreMulSum). */
static int nc_scale(void *dst, const void *src, size_t n, int dtype,
		    const void *scalar)
{
	size_t i;

#define NC_SCALE(T)							\
	do {								\
		T s__, *d__ = dst;					\
		const T *x__ = src;					\
		memcpy(&s__, scalar, sizeof(T));			\
		for (i = 0; i < n; i++)					\
			d__[i] = (T)(x__[i] * s__);			\
	} while (0)
	switch (dtype) {
	case ncclInt8: NC_SCALE(int8_t); break;
	case ncclUint8: NC_SCALE(uint8_t); break;
	case ncclInt32: NC_SCALE(int32_t); break;
	case ncclUint32: NC_SCALE(uint32_t); break;
	case ncclInt64: NC_SCALE(int64_t); break;
	case ncclUint64: NC_SCALE(uint64_t); break;
	case ncclFloat32: NC_SCALE(float); break;
	case ncclFloat64: NC_SCALE(double); break;
	case ncclFloat16: NC_SCALE(_Float16); break;
	case ncclBfloat16: {
		const uint16_t *x = src;
		uint16_t s, *d = dst;
		float sf;

		memcpy(&s, scalar, sizeof(s));
		sf = nc_bf16_to_float(s);
		for (i = 0; i < n; i++)
			d[i] = nc_float_to_bf16(nc_bf16_to_float(x[i]) * sf);
		break;
	}
	default:
		return -EINVAL;
	}
#undef NC_SCALE
	return 0;
}

static int nc_scratch(struct nc_comm *c, size_t bytes, void **out)
{
	void *p;

	if (bytes > c->scratchBytes) {
		p = realloc(c->scratch, bytes);
		if (!p)
			return -ENOMEM;
		c->scratch = p;
		c->scratchBytes = bytes;
	}
	*out = c->scratch;
	return 0;
}

/* Collective @o on @m, sending @sbuf and reducing with @op (a built-in
 * one).  Inline, so that a caller which knows the kind calls the one
 * function. */
static inline __attribute__((always_inline)) int
nc_coll_as(struct mlap2p_comm *m, const struct nc_op *o, const void *sbuf,
	   int op)
{
	switch (o->kind) {
	case NC_ALLREDUCE:
		return mlap2p_all_reduce(m, sbuf, o->rbuf, o->count, o->dtype,
					 op);
	case NC_BROADCAST:
		return mlap2p_broadcast(m, sbuf, o->rbuf, o->count, o->dtype,
					o->root);
	case NC_REDUCE:
		return mlap2p_reduce(m, sbuf, o->rbuf, o->count, o->dtype, op,
				     o->root);
	case NC_ALLGATHER:
		return mlap2p_all_gather(m, sbuf, o->rbuf, o->count, o->dtype);
	case NC_REDUCESCATTER:
		return mlap2p_reduce_scatter(m, sbuf, o->rbuf, o->count,
					     o->dtype, op);
	case NC_ALLTOALL:
		return mlap2p_all_to_all(m, sbuf, o->rbuf, o->count, o->dtype);
	}
	return -EINVAL;
}

static int nc_coll(struct nc_comm *c, struct mlap2p_comm *m,
		   const struct nc_op *o)
{
	const void *sbuf = o->sbuf;
	int op = o->op, ret;

	if (op >= ncclNumOps) {
		struct nc_premul pm;
		size_t n = o->kind == NC_REDUCESCATTER ?
			o->count * (size_t)c->nranks : o->count;
		void *tmp = NULL;

		pthread_mutex_lock(&c->plock);
		pm = c->premul[op - ncclNumOps];
		pthread_mutex_unlock(&c->plock);
		if (!pm.used)
			return -EINVAL;
		if (n) {
			ret = nc_scratch(c, n * nc_dtype_size(o->dtype), &tmp);
			if (!ret)
				ret = nc_scale(tmp, o->sbuf, n, o->dtype,
					       pm.residence == ncclScalarDevice ?
					       pm.ptr : pm.imm);
			if (ret)
				return ret;
		}
		sbuf = tmp;
		op = ncclSum;
	}
	return nc_coll_as(m, o, sbuf, op);
}

/*
 * NCCL's P2P channels: the @k-th of the p2pnChannelsPerPeer channels a
 * message from @src to @dst uses (mlap2p_p2p_channel), and how many parts
 * a message of @bytes is cut into: one per channel from NC_P2P_PART bytes
 * a part, else one.  Both ends compute the same from the size they agree
 * on.
 */
#define NC_P2P_PART	(256UL << 10)

static int nc_p2p_parts(const struct ncclComm *comm, size_t bytes)
{
	int k = comm->p2pnChannelsPerPeer;

	return k > 1 && bytes >= (size_t)k * NC_P2P_PART ? k : 1;
}

/* Every channel a send to and a receive from @peer may use, connected. */
static int nc_p2p_ready(struct mlap2p_comm *m, int peer)
{
	const struct ncclComm *comm = mlap2p_nccl(m);
	struct mlap2p_conn_desc d;
	int k;

	for (k = 0; k < comm->p2pnChannelsPerPeer; k++)
		if (mlap2p_conn_get(m, mlap2p_p2p_channel(comm, comm->rank, peer, k),
				    peer, MLAP2P_DIR_SEND, &d) ||
		    mlap2p_conn_get(m, mlap2p_p2p_channel(comm, peer, comm->rank, k),
				    peer, MLAP2P_DIR_RECV, &d))
			return 0;
	return 1;
}

/*
 * Connect, both ways, every peer the batch sends to or receives from whose
 * P2P channels are not all connected yet (connect_peers over the
 * p2pnChannels channels: the peer makes the same call).
 */
static int nc_connect(struct nc_comm *c, struct mlap2p_comm *m,
		      const struct nc_op *ops, int n)
{
	int *peers = NULL, np = 0, i, ret = 0;
	unsigned char *want;

	want = calloc((size_t)c->nranks, 1);
	if (!want)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		if ((ops[i].kind == NC_SEND || ops[i].kind == NC_RECV) &&
		    ops[i].root != c->rank)
			want[ops[i].root] = 1;
	for (i = 0; i < c->nranks; i++) {
		if (!want[i] || c->conn[i])
			continue;
		if (nc_p2p_ready(m, i))
			c->conn[i] = 1;
		else
			np++;
	}
	if (np) {
		peers = calloc((size_t)np, sizeof(int));
		if (!peers) {
			ret = -ENOMEM;
			goto out;
		}
		np = 0;
		for (i = 0; i < c->nranks; i++)
			if (want[i] && !c->conn[i])
				peers[np++] = i;
		ret = mlap2p_connect_peers(m, mlap2p_nccl(m)->p2pnChannels, np,
					   peers, np, peers);
		for (i = 0; i < np && !ret; i++)
			c->conn[peers[i]] = 1;
	}
out:
	free(peers);
	free(want);
	return ret;
}

/* Sends to self meet receives from self in order. */
static int nc_self(struct nc_comm *c, const struct nc_op *ops, int n)
{
	int i, j = 0;
	size_t bytes;

	for (i = 0; i < n; i++) {
		if (ops[i].kind != NC_SEND || ops[i].root != c->rank)
			continue;
		for (; j < n; j++)
			if (ops[j].kind == NC_RECV && ops[j].root == c->rank)
				break;
		if (j == n)
			return -EINVAL;
		bytes = ops[i].count * nc_dtype_size(ops[i].dtype);
		if (bytes != ops[j].count * nc_dtype_size(ops[j].dtype))
			return -EINVAL;
		if (bytes)
			memmove(ops[j].rbuf, ops[i].sbuf, bytes);
		j++;
	}
	for (; j < n; j++)
		if (ops[j].kind == NC_RECV && ops[j].root == c->rank)
			return -EINVAL;
	return 0;
}

/*
 * One message to or from @peer over the pair's P2P channels: a message of
 * several parts (nc_p2p_parts) puts part k, bytes [bytes*k/K,
 * bytes*(k+1)/K), on the k-th channel. Both ends cut it by this rule.
 * Each part posted adds a request at reqs[*nreq].
 */
static int nc_p2p_post_one(struct mlap2p_comm *m, int send, char *buf,
			   size_t bytes, int me, int peer,
			   struct mlap2p_request **reqs, int *nreq)
{
	const struct ncclComm *comm = mlap2p_nccl(m);
	int k, parts = nc_p2p_parts(comm, bytes), ret = 0;

	for (k = 0; k < parts && !ret; k++) {
		size_t lo = bytes * (size_t)k / (size_t)parts;
		size_t hi = bytes * (size_t)(k + 1) / (size_t)parts;
		int ch = send ? mlap2p_p2p_channel(comm, me, peer, k) :
				mlap2p_p2p_channel(comm, peer, me, k);

		ret = mlap2p_ipost_on(m, ch, send, buf + lo, hi - lo, peer,
				      &reqs[*nreq]);
		if (!ret)
			(*nreq)++;
	}
	return ret;
}

/* The batch's send/recv, all posted before any is waited on (NCCL's
 * group semantics). */
static int nc_p2p_post(struct mlap2p_comm *m, const struct nc_op *ops, int n,
		       int me)
{
	const struct ncclComm *comm = mlap2p_nccl(m);
	struct mlap2p_request **req;
	int i, nreq = 0, ret = 0, r;

	req = calloc((size_t)n * (size_t)comm->p2pnChannelsPerPeer,
		     sizeof(*req));
	if (!req)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++) {
		size_t bytes = ops[i].count * nc_dtype_size(ops[i].dtype);
		int send = ops[i].kind == NC_SEND;

		if ((!send && ops[i].kind != NC_RECV) || ops[i].root == me)
			continue;
		ret = nc_p2p_post_one(m, send,
				      send ? (char *)ops[i].sbuf : ops[i].rbuf,
				      bytes, me, ops[i].root, req, &nreq);
	}
	r = nreq ? mlap2p_request_waitall(nreq, req) : 0;
	free(req);
	return ret ? ret : r;
}

/*
 * One batch: its collectives in order, then its send/recv, posted
 * together (so every rank schedules a mixed group alike).
 */
static int nc_ops_run(struct nc_comm *c, const struct nc_op *ops, int n)
{
	struct mlap2p_comm *m = __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE);
	int i, p2p = 0, ret = 0;

	for (i = 0; i < n && !ret; i++) {
		if (ops[i].kind == NC_SEND || ops[i].kind == NC_RECV)
			p2p++;
		else
			ret = nc_coll(c, m, &ops[i]);
	}
	if (ret || !p2p)
		return ret;
	ret = nc_connect(c, m, ops, n);
	if (ret)
		return ret;
	ret = nc_self(c, ops, n);
	if (ret)
		return ret;
	return nc_p2p_post(m, ops, n, c->rank);
}

/* Work of @c failed with @err: keep its text; and, but for an argument
 * error on the caller's own thread, the communicator is broken. */
static __attribute__((noinline, cold)) void nc_ops_failed(struct nc_comm *c,
							  int err, int async)
{
	const char *t = mlap2p_last_error();
	char buf[NC_ERR_LEN];
	int zero = 0;

	snprintf(buf, sizeof(buf), "%s%s%s", mlap2p_strerror(err),
		 t && *t ? ": " : "", t ? t : "");
	nc_keep_text(c, buf);
	if (async || mlap2p_nccl_result(err) != ncclInvalidArgument)
		__atomic_compare_exchange_n(&c->asyncErr, &zero, err, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/*
 * mlap2p extension (<nccl.h>): an ncclSend (@send) or ncclRecv posted as
 * requests, over the same channels and in the same parts, in its turn.
 */
_Static_assert(MAXCHANNELS <= MLAP2P_NCCL_IPOST_MAX,
	       "a message has at most one part per channel");
NC_EXPORT int mlap2p_nccl_ipost(ncclComm_t comm, int send, void *buf,
				size_t count, ncclDataType_t datatype,
				int peer, struct mlap2p_request **reqs,
				int *nreqs)
{
	const char *name = send ? "mlap2p_nccl_ipost(send)" :
				  "mlap2p_nccl_ipost(recv)";
	struct nc_comm *c = nc_of(comm);
	struct mlap2p_comm *m;
	size_t bytes;
	int err;
	uint64_t t;

	if (nreqs)
		*nreqs = 0;
	if (!c) {
		nc_fail(NULL, -EINVAL, "%s: invalid communicator", name);
		return -EINVAL;
	}
	if ((send != 0 && send != 1) || !reqs || !nreqs) {
		nc_fail(c, -EINVAL, "%s: send must be 0 or 1, reqs and nreqs "
			"not NULL", name);
		return -EINVAL;
	}
	if (!nc_dtype_size(datatype)) {
		nc_fail(c, -EINVAL, "%s: invalid datatype %d", name, datatype);
		return -EINVAL;
	}
	if (peer < 0 || peer >= c->nranks || peer == c->rank) {
		nc_fail(c, -EINVAL, "%s: invalid peer %d (rank %d of %d)",
			name, peer, c->rank, c->nranks);
		return -EINVAL;
	}
	if (count && !buf) {
		nc_fail(c, -EINVAL, "%s: NULL buffer with count %zu", name,
			count);
		return -EINVAL;
	}
	if (count > SIZE_MAX / nc_dtype_size(datatype)) {
		nc_fail(c, -EINVAL, "%s: count %zu overflows", name, count);
		return -EINVAL;
	}
	bytes = count * nc_dtype_size(datatype);
	if (!__atomic_load_n(&c->initDone, __ATOMIC_ACQUIRE)) {
		nc_fail(c, -EINPROGRESS, "%s: the communicator's init is still "
			"running", name);
		return -EINPROGRESS;
	}
	t = nc_ticket(c);
	nc_turn_wait(c, t);
	err = nc_enter(c);
	if (err) {
		nc_turn_done(c, t);
		return err;
	}
	m = __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE);
	if (!c->conn[peer] && nc_p2p_ready(m, peer))
		c->conn[peer] = 1;
	if (!c->conn[peer]) {
		err = -ENOTCONN;
		nc_fail(c, err, "%s: rank %d is not connected to rank %d: an "
			"ncclSend/ncclRecv between them connects the pair",
			name, c->rank, peer);
	}
	if (!err) {
		err = nc_p2p_post_one(m, send, buf, bytes, c->rank, peer, reqs,
				      nreqs);
		if (err)
			nc_lib_fail(c, name, err);
	}
	if (err && err != -ENOTCONN)
		nc_ops_failed(c, err, 0);
	nc_leave(c);
	nc_turn_done(c, t);
	return err;
}

static int nc_batch_run(struct nc_batch *b, int async)
{
	struct nc_comm *c = b->c;
	int err;

	nc_turn_wait(c, b->ticket);
	err = nc_enter(c);
	if (!err) {
		err = nc_ops_run(c, b->ops, b->nops);
		if (err)
			nc_ops_failed(c, err, async);
		nc_leave(c);
	}
	nc_turn_done(c, b->ticket);
	return err;
}

static void *nc_batch_thread(void *arg)
{
	struct nc_batch *b = arg;

	return (void *)(intptr_t)nc_batch_run(b, 1);
}

int nc_run_batches(struct nc_batch *b, int nb, int async)
{
	pthread_t *tid = NULL;
	int i, err, r, started = 0;
	void *res;

	if (nb == 1)
		return nc_batch_run(&b[0], async);
	/* Several communicators at once (ranks of one clique): each needs
	 * its own thread, as in-process ranks progress together. */
	tid = calloc((size_t)nb, sizeof(*tid));
	if (tid)
		for (started = 1; started < nb; started++)
			if (pthread_create(&tid[started], NULL,
					   nc_batch_thread, &b[started]))
				break;
	err = nc_batch_run(&b[0], async);
	for (i = 1; i < started; i++) {
		pthread_join(tid[i], &res);
		r = (int)(intptr_t)res;
		if (r && !err)
			err = r;
	}
	/* Batches no thread could take still run, in order. */
	for (i = started > 0 ? started : 1; i < nb; i++) {
		r = nc_batch_run(&b[i], async);
		if (r && !err)
			err = r;
	}
	free(tid);
	return err;
}

void nc_item_free(struct nc_item *it)
{
	int i;

	for (i = 0; i < it->nb; i++) {
		nc_put(it->b[i].c);
		if (!it->packed)
			free(it->b[i].ops);
	}
	if (!it->packed)
		free(it->b);
	free(it);
}

/* ------------------------------------------------------------------ */
/* Posting                                                            */
/* ------------------------------------------------------------------ */

static int nc_valid_op(struct nc_comm *c, int op, int dtype)
{
	int ok;

	if (op >= 0 && op < ncclNumOps)
		return 1;
	if (op < ncclNumOps || op >= ncclNumOps + NC_MAX_PREMUL)
		return 0;
	pthread_mutex_lock(&c->plock);
	ok = c->premul[op - ncclNumOps].used &&
	     c->premul[op - ncclNumOps].dtype == dtype;
	pthread_mutex_unlock(&c->plock);
	return ok;
}

/* Which buffers a rank's call reads and writes (NCCL: only the root's
 * send buffer of a broadcast and receive buffer of a reduce). */
static int nc_needs_send(const struct nc_comm *c, const struct nc_op *o)
{
	return o->kind != NC_RECV &&
	       !(o->kind == NC_BROADCAST && o->root != c->rank);
}

static int nc_needs_recv(const struct nc_comm *c, const struct nc_op *o)
{
	return o->kind != NC_SEND &&
	       !(o->kind == NC_REDUCE && o->root != c->rank);
}

static const char *const nc_names[] = {
	"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
	"ncclReduceScatter", "ncclAlltoAll", "ncclSend", "ncclRecv",
};

/* A collective whose arguments pass every check of nc_post_any(),
 * tested cheaply: a valid type, a built-in operator, a rank for root,
 * both buffers. */
static inline int nc_plain(const struct nc_comm *c, const struct nc_op *o)
{
	return o->kind < NC_SEND && nc_dtype_size(o->dtype) &&
	       (unsigned int)o->op < ncclNumOps &&
	       (unsigned int)o->root < (unsigned int)c->nranks &&
	       (!o->count || (o->sbuf && o->rbuf));
}

static __attribute__((noinline)) ncclResult_t
nc_post_any(struct nc_comm *c, struct nc_group *g, struct nc_op op,
	    struct mlap2p_stream *s)
{
	struct nc_op *o = &op;
	const char *name = nc_names[o->kind];
	ncclResult_t res;
	int err;

	if (!c)
		res = nc_fail(NULL, -EINVAL, "%s: invalid communicator", name);
	else if (!nc_dtype_size(o->dtype))
		res = nc_fail(c, -EINVAL, "%s: invalid datatype %d", name,
			      o->dtype);
	else if ((o->kind == NC_ALLREDUCE || o->kind == NC_REDUCE ||
		  o->kind == NC_REDUCESCATTER) && !nc_valid_op(c, o->op,
							       o->dtype))
		res = nc_fail(c, -EINVAL, "%s: invalid reduction operation %d",
			      name, o->op);
	else if ((o->kind == NC_BROADCAST || o->kind == NC_REDUCE ||
		  o->kind == NC_SEND || o->kind == NC_RECV) &&
		 (o->root < 0 || o->root >= c->nranks))
		res = nc_fail(c, -EINVAL, "%s: invalid %s %d (nranks %d)", name,
			      o->kind >= NC_SEND ? "peer" : "root", o->root,
			      c->nranks);
	else if (o->count && ((nc_needs_send(c, o) && !o->sbuf) ||
			      (nc_needs_recv(c, o) && !o->rbuf)))
		res = nc_fail(c, -EINVAL, "%s: NULL buffer with count %zu",
			      name, o->count);
	else if (o->count > SIZE_MAX / nc_dtype_size(o->dtype) /
			    (size_t)c->nranks)
		/* Before a PreMulSum's scratch is sized from it. */
		res = nc_fail(c, -EINVAL, "%s: count %zu overflows", name,
			      o->count);
	else
		res = ncclSuccess;
	if (res != ncclSuccess) {
		if (g->depth && g->err == ncclSuccess)
			g->err = res;
		return res;
	}
	if (g->depth) {
		if (nc_grow((void **)&g->ops, &g->cap, g->n + 1,
			    sizeof(*g->ops))) {
			res = nc_fail(c, -ENOMEM, "%s: out of memory", name);
			if (g->err == ncclSuccess)
				g->err = res;
			return res;
		}
		g->ops[g->n].s = s;
		g->ops[g->n].c = c;
		g->ops[g->n].op = *o;
		g->n++;
		return ncclSuccess;
	}
	if (!s) {
		struct nc_batch b = { .c = c, .nops = 1, .ops = o };

		b.ticket = nc_ticket_in(c, g);
		err = nc_run_batches(&b, 1, 0);
		return err ? mlap2p_nccl_result(err) : ncclSuccess;
	}
	err = nc_stream_post_op(s, c, o);
	if (err == -ENOMEM)
		return nc_fail(c, err, "%s: out of memory", name);
	if (err)
		return nc_fail(c, err, "%s: the stream is being destroyed", name);
	return ncclSuccess;
}

/*
 * Post @o.  The common call (the NULL stream, no group, plain arguments)
 * runs here, as nc_batch_run() would run it, with nothing out of line
 * but the library's call: inline in each entry point, where the kind is
 * a constant.  The rest is nc_post_any()'s.
 */
static inline __attribute__((always_inline)) ncclResult_t
nc_post(ncclComm_t comm, const struct nc_op op, cudaStream_t stream)
{
	const struct nc_op *o = &op;
	struct mlap2p_stream *s = (struct mlap2p_stream *)(void *)stream;
	struct nc_comm *c = nc_of(comm);
	struct nc_group *g = &nc_grp;
	uint64_t t;
	int err;

	/* One __tls_get_addr for the call: keep its result, not the
	 * recipe the compiler would run again after each fence. */
	__asm__("" : "+r"(g));
	if (!c || s || g->depth || !nc_plain(c, o))
		return nc_post_any(c, g, op, s);
	t = nc_ticket_in(c, g);
	nc_turn_wait(c, t);
	err = nc_enter(c);
	if (!err) {
		err = nc_coll_as(__atomic_load_n(&c->comm, __ATOMIC_ACQUIRE),
				 o, o->sbuf, o->op);
		if (err)
			nc_ops_failed(c, err, 0);
		nc_leave(c);
	}
	nc_turn_done(c, t);
	return err ? mlap2p_nccl_result(err) : ncclSuccess;
}

NC_EXPORT ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff,
				      size_t count, ncclDataType_t datatype,
				      ncclRedOp_t op, ncclComm_t comm,
				      cudaStream_t stream)
{
	struct nc_op o = { NC_ALLREDUCE, datatype, op, 0, sendbuff, recvbuff,
			   count };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclAllReduce);

NC_EXPORT ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff,
				      size_t count, ncclDataType_t datatype,
				      int root, ncclComm_t comm,
				      cudaStream_t stream)
{
	struct nc_op o = { NC_BROADCAST, datatype, 0, root, sendbuff,
			   recvbuff, count };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclBroadcast);

NC_EXPORT ncclResult_t pncclBcast(void *buff, size_t count,
				  ncclDataType_t datatype, int root,
				  ncclComm_t comm, cudaStream_t stream)
{
	return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
NC_ALIAS(ncclBcast);

NC_EXPORT ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff,
				   size_t count, ncclDataType_t datatype,
				   ncclRedOp_t op, int root, ncclComm_t comm,
				   cudaStream_t stream)
{
	struct nc_op o = { NC_REDUCE, datatype, op, root, sendbuff, recvbuff,
			   count };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclReduce);

NC_EXPORT ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff,
				      size_t sendcount,
				      ncclDataType_t datatype,
				      ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_ALLGATHER, datatype, 0, 0, sendbuff, recvbuff,
			   sendcount };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclAllGather);

NC_EXPORT ncclResult_t pncclReduceScatter(const void *sendbuff,
					  void *recvbuff, size_t recvcount,
					  ncclDataType_t datatype,
					  ncclRedOp_t op, ncclComm_t comm,
					  cudaStream_t stream)
{
	struct nc_op o = { NC_REDUCESCATTER, datatype, op, 0, sendbuff,
			   recvbuff, recvcount };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclReduceScatter);

NC_EXPORT ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff,
				     size_t count, ncclDataType_t datatype,
				     ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_ALLTOALL, datatype, 0, 0, sendbuff, recvbuff,
			   count };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclAlltoAll);

NC_EXPORT ncclResult_t pncclSend(const void *sendbuff, size_t count,
				 ncclDataType_t datatype, int peer,
				 ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_SEND, datatype, 0, peer, sendbuff, NULL, count };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclSend);

NC_EXPORT ncclResult_t pncclRecv(void *recvbuff, size_t count,
				 ncclDataType_t datatype, int peer,
				 ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_RECV, datatype, 0, peer, NULL, recvbuff, count };

	return nc_post(comm, o, stream);
}
NC_ALIAS(ncclRecv);
