// SPDX-License-Identifier: MIT
/*
 * <nccl.h> on libmlap2p: communicators, errors, posting and groups.
 *
 * Every NCCL entry point is defined as its p-prefixed name (pncclX); the
 * plain name is a weak alias of it (NC_ALIAS), as NCCL does for profilers.
 * lib/nccl/nc.h explains the ticket order; lib/nccl/stream.c the streams.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlap2p/dataplane.h"
#include "mlap2p/stream.h"
#if __has_include("mlap2p/coll.h")
#include "mlap2p/coll.h"
#else
#include "coll_tmp.h"
#endif
#include "nc.h"

#define NC_ALIAS(f)							\
	extern __typeof__(p##f) f					\
		__attribute__((weak, alias("p" #f), visibility("default")))

/* ------------------------------------------------------------------ */
/* Results and error text                                             */
/* ------------------------------------------------------------------ */

static __thread char nc_tls_err[NC_ERR_LEN];
static __thread char nc_tls_copy[NC_ERR_LEN];

ncclResult_t mlap2p_nccl_result(int err)
{
	switch (err) {
	case 0:
		return ncclSuccess;
	case -EINVAL:
		return ncclInvalidArgument;
	case -EPERM:
	case -EBUSY:
	case -EALREADY:
	case -ENOTCONN:
	case -EISCONN:
	case -EOPNOTSUPP:
		return ncclInvalidUsage;
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ECONNREFUSED:
	case -EPIPE:
	case -ESRCH:
	case -EPROTO:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETDOWN:
	case -ENETUNREACH:
		return ncclRemoteError;
	case -EINPROGRESS:
		return ncclInProgress;
	case -ENOTRECOVERABLE:
	case -EFAULT:
		return ncclInternalError;
	default:
		return ncclSystemError;
	}
}

/* Keep @text as this thread's and @c's last error. */
static void nc_keep_text(struct nc_comm *c, const char *text)
{
	snprintf(nc_tls_err, sizeof(nc_tls_err), "%s", text);
	if (c) {
		pthread_mutex_lock(&c->elock);
		snprintf(c->lastErr, sizeof(c->lastErr), "%s", text);
		pthread_mutex_unlock(&c->elock);
	}
}

/* An error found here: text, then the ncclResult_t of @err. */
static ncclResult_t __attribute__((format(printf, 3, 4)))
nc_fail(struct nc_comm *c, int err, const char *fmt, ...)
{
	char buf[NC_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	nc_keep_text(c, buf);
	return mlap2p_nccl_result(err);
}

/* An error from libmlap2p (its text is mlap2p_last_error()). */
static ncclResult_t nc_lib_fail(struct nc_comm *c, const char *call, int err)
{
	const char *t = mlap2p_last_error();

	return nc_fail(c, err, "%s: %s%s%s", call, mlap2p_strerror(err),
		       t && *t ? ": " : "", t ? t : "");
}

NC_EXPORT const char *pncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError:
		return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError:
		return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument:
		return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage:
		return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "unknown result code";
	}
}
NC_ALIAS(ncclGetErrorString);

static struct nc_comm *nc_of(ncclComm_t comm)
{
	struct nc_comm *c = (struct nc_comm *)(void *)comm;

	return c && c->magic == NC_MAGIC ? c : NULL;
}

NC_EXPORT const char *pncclGetLastError(ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);

	if (!c)
		return nc_tls_err;
	pthread_mutex_lock(&c->elock);
	memcpy(nc_tls_copy, c->lastErr, sizeof(nc_tls_copy));
	pthread_mutex_unlock(&c->elock);
	return nc_tls_copy;
}
NC_ALIAS(ncclGetLastError);

NC_EXPORT ncclResult_t pncclGetVersion(int *version)
{
	if (!version)
		return nc_fail(NULL, -EINVAL, "ncclGetVersion: version is NULL");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
NC_ALIAS(ncclGetVersion);

NC_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
	struct mlap2p_unique_id id;
	int ret;

	_Static_assert(sizeof(id) == sizeof(*uniqueId), "unique id size");
	if (!uniqueId)
		return nc_fail(NULL, -EINVAL, "ncclGetUniqueId: uniqueId is NULL");
	ret = mlap2p_get_unique_id(&id);
	if (ret)
		return nc_lib_fail(NULL, "ncclGetUniqueId", ret);
	memcpy(uniqueId, &id, sizeof(id));
	return ncclSuccess;
}
NC_ALIAS(ncclGetUniqueId);

/* ------------------------------------------------------------------ */
/* Tickets                                                            */
/* ------------------------------------------------------------------ */

static void nc_turn_wait(struct nc_comm *c, uint64_t t)
{
	int i;

	for (i = 0; i < 256; i++) {
		if (__atomic_load_n(&c->serving, __ATOMIC_ACQUIRE) == t)
			return;
		if (i >= 32)
			sched_yield();
	}
	pthread_mutex_lock(&c->tlock);
	__atomic_add_fetch(&c->waiters, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&c->serving, __ATOMIC_SEQ_CST) != t)
		pthread_cond_wait(&c->tcond, &c->tlock);
	__atomic_sub_fetch(&c->waiters, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&c->tlock);
}

static void nc_turn_done(struct nc_comm *c, uint64_t t)
{
	__atomic_store_n(&c->serving, t + 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&c->tlock);
		pthread_cond_broadcast(&c->tcond);
		pthread_mutex_unlock(&c->tlock);
	}
}

static uint64_t nc_ticket(struct nc_comm *c)
{
	return __atomic_fetch_add(&c->next, 1, __ATOMIC_ACQ_REL);
}

/* Enter the communicator to run work: 0, or why not (aborted, failed). */
static int nc_enter(struct nc_comm *c)
{
	int err;

	pthread_mutex_lock(&c->tlock);
	if (c->aborted)
		err = -ECANCELED;
	else if (c->initErr)
		err = c->initErr;
	else
		err = __atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE);
	if (!err)
		c->inflight++;
	pthread_mutex_unlock(&c->tlock);
	return err;
}

static void nc_leave(struct nc_comm *c)
{
	pthread_mutex_lock(&c->tlock);
	if (--c->inflight == 0 && c->aborted)
		pthread_cond_broadcast(&c->tcond);
	pthread_mutex_unlock(&c->tlock);
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

static size_t nc_dtype_size(int dtype)
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

/* Connect, on channel 0, every direction the batch needs and lacks. */
static int nc_connect(struct nc_comm *c, struct mlap2p_comm *m,
		      const struct nc_op *ops, int n)
{
	int *send = NULL, *recv = NULL, ns = 0, nr = 0, i, ch, ret = 0;
	unsigned char *want;
	struct mlap2p_conn_desc d;

	want = calloc((size_t)c->nranks, 1);
	if (!want)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		if ((ops[i].kind == NC_SEND || ops[i].kind == NC_RECV) &&
		    ops[i].root != c->rank)
			want[ops[i].root] = 3;	/* both ways: the peer agrees */
	for (i = 0; i < c->nranks; i++) {
		if (!want[i])
			continue;
		/* Whatever a ring or earlier call already connected. */
		for (ch = 0; ch < 32 && (c->conn[i] & 3) != 3; ch++) {
			if (!(c->conn[i] & 1) &&
			    !mlap2p_conn_get(m, ch, i, MLAP2P_DIR_SEND, &d))
				c->conn[i] |= 1;
			if (!(c->conn[i] & 2) &&
			    !mlap2p_conn_get(m, ch, i, MLAP2P_DIR_RECV, &d))
				c->conn[i] |= 2;
		}
		want[i] &= (unsigned char)~c->conn[i];
		ns += want[i] & 1;
		nr += (want[i] >> 1) & 1;
	}
	if (ns + nr) {
		send = calloc((size_t)ns + 1, sizeof(int));
		recv = calloc((size_t)nr + 1, sizeof(int));
		if (!send || !recv) {
			ret = -ENOMEM;
			goto out;
		}
		ns = nr = 0;
		for (i = 0; i < c->nranks; i++) {
			if (want[i] & 1)
				send[ns++] = i;
			if (want[i] & 2)
				recv[nr++] = i;
		}
		ret = mlap2p_connect_peers(m, 1, nr, recv, ns, send);
		if (!ret)
			for (i = 0; i < c->nranks; i++)
				c->conn[i] |= want[i];
	}
out:
	free(send);
	free(recv);
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
 * One batch: its collectives in order, then its send/recv together in one
 * libmlap2p group (so every rank schedules a mixed group alike).
 */
static int nc_ops_run(struct nc_comm *c, const struct nc_op *ops, int n)
{
	struct mlap2p_comm *m = __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE);
	int i, p2p = 0, ret = 0, r;

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
	mlap2p_group_start();
	for (i = 0; i < n; i++) {
		size_t bytes = ops[i].count * nc_dtype_size(ops[i].dtype);

		if (ops[i].root == c->rank)
			continue;
		if (ops[i].kind == NC_SEND)
			r = mlap2p_send(m, ops[i].sbuf, bytes, ops[i].root);
		else if (ops[i].kind == NC_RECV)
			r = mlap2p_recv(m, ops[i].rbuf, bytes, ops[i].root);
		else
			r = 0;
		if (r && !ret)
			ret = r;
	}
	r = mlap2p_group_end();
	return ret ? ret : r;
}

static int nc_batch_run(struct nc_batch *b, int async)
{
	struct nc_comm *c = b->c;
	int err;

	nc_turn_wait(c, b->ticket);
	err = nc_enter(c);
	if (!err) {
		err = nc_ops_run(c, b->ops, b->nops);
		if (err) {
			const char *t = mlap2p_last_error();
			char buf[NC_ERR_LEN];

			snprintf(buf, sizeof(buf), "%s%s%s",
				 mlap2p_strerror(err), t && *t ? ": " : "",
				 t ? t : "");
			nc_keep_text(c, buf);
			/* Argument errors on the caller's own thread do not
			 * break the communicator; anything else does. */
			if (async || mlap2p_nccl_result(err) !=
			    ncclInvalidArgument) {
				int zero = 0;

				__atomic_compare_exchange_n(&c->asyncErr, &zero,
							    err, 0,
							    __ATOMIC_ACQ_REL,
							    __ATOMIC_ACQUIRE);
			}
		}
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
		free(it->b[i].ops);
	}
	free(it->b);
	free(it);
}

/* ------------------------------------------------------------------ */
/* Groups (per thread, as NCCL's)                                     */
/* ------------------------------------------------------------------ */

struct nc_gop {
	struct mlap2p_stream *s;
	struct nc_comm *c;
	struct nc_op op;
};

struct nc_group {
	int depth;
	int err;			/* first ncclResult_t of the group */
	struct nc_gop *ops;
	int n, cap;
	struct nc_comm **inits;
	int ninit, initCap;
};

static __thread struct nc_group nc_grp;

static int nc_grow(void **arr, int *cap, int need, size_t elem)
{
	void *p;
	int ncap;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

static void nc_group_reset(void)
{
	free(nc_grp.ops);
	free(nc_grp.inits);
	memset(&nc_grp, 0, sizeof(nc_grp));
}

/* Build the item for stream @s from the group's ops (per comm, in order). */
static struct nc_item *nc_group_item(struct mlap2p_stream *s)
{
	struct nc_item *it = calloc(1, sizeof(*it));
	int i, j, k;

	if (!it)
		return NULL;
	it->b = calloc((size_t)nc_grp.n, sizeof(*it->b));
	if (!it->b) {
		free(it);
		return NULL;
	}
	for (i = 0; i < nc_grp.n; i++) {
		struct nc_gop *g = &nc_grp.ops[i];

		if (g->s != s)
			continue;
		for (j = 0; j < it->nb && it->b[j].c != g->c; j++)
			;
		if (j == it->nb) {
			it->b[j].c = g->c;
			nc_get(g->c);
			it->nb++;
			it->b[j].ops = calloc((size_t)nc_grp.n,
					      sizeof(struct nc_op));
			if (!it->b[j].ops) {
				nc_item_free(it);
				return NULL;
			}
		}
		k = it->b[j].nops++;
		it->b[j].ops[k] = g->op;
	}
	return it;
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

static ncclResult_t nc_post(ncclComm_t comm, struct nc_op *o,
			    cudaStream_t stream)
{
	struct mlap2p_stream *s = (struct mlap2p_stream *)(void *)stream;
	struct nc_comm *c = nc_of(comm);
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
	else
		res = ncclSuccess;
	if (res != ncclSuccess) {
		if (nc_grp.depth && nc_grp.err == ncclSuccess)
			nc_grp.err = res;
		return res;
	}
	if (nc_grp.depth) {
		if (nc_grow((void **)&nc_grp.ops, &nc_grp.cap, nc_grp.n + 1,
			    sizeof(*nc_grp.ops))) {
			res = nc_fail(c, -ENOMEM, "%s: out of memory", name);
			if (nc_grp.err == ncclSuccess)
				nc_grp.err = res;
			return res;
		}
		nc_grp.ops[nc_grp.n].s = s;
		nc_grp.ops[nc_grp.n].c = c;
		nc_grp.ops[nc_grp.n].op = *o;
		nc_grp.n++;
		return ncclSuccess;
	}
	if (!s) {
		struct nc_batch b = { .c = c, .nops = 1, .ops = o };

		b.ticket = nc_ticket(c);
		err = nc_run_batches(&b, 1, 0);
		return err ? mlap2p_nccl_result(err) : ncclSuccess;
	} else {
		struct nc_item *it = calloc(1, sizeof(*it));

		if (it)
			it->b = calloc(1, sizeof(*it->b));
		if (it && it->b)
			it->b->ops = malloc(sizeof(*o));
		if (!it || !it->b || !it->b->ops) {
			if (it)
				free(it->b);
			free(it);
			return nc_fail(c, -ENOMEM, "%s: out of memory", name);
		}
		*it->b->ops = *o;
		it->b->nops = 1;
		it->b->c = c;
		it->nb = 1;
		nc_get(c);
		err = nc_stream_post(s, it);
		if (err) {
			nc_item_free(it);
			return nc_fail(c, err, "%s: the stream is being destroyed",
				       name);
		}
		return ncclSuccess;
	}
}

NC_EXPORT ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff,
				      size_t count, ncclDataType_t datatype,
				      ncclRedOp_t op, ncclComm_t comm,
				      cudaStream_t stream)
{
	struct nc_op o = { NC_ALLREDUCE, datatype, op, 0, sendbuff, recvbuff,
			   count };

	return nc_post(comm, &o, stream);
}
NC_ALIAS(ncclAllReduce);

NC_EXPORT ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff,
				      size_t count, ncclDataType_t datatype,
				      int root, ncclComm_t comm,
				      cudaStream_t stream)
{
	struct nc_op o = { NC_BROADCAST, datatype, 0, root, sendbuff,
			   recvbuff, count };

	return nc_post(comm, &o, stream);
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

	return nc_post(comm, &o, stream);
}
NC_ALIAS(ncclReduce);

NC_EXPORT ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff,
				      size_t sendcount,
				      ncclDataType_t datatype,
				      ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_ALLGATHER, datatype, 0, 0, sendbuff, recvbuff,
			   sendcount };

	return nc_post(comm, &o, stream);
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

	return nc_post(comm, &o, stream);
}
NC_ALIAS(ncclReduceScatter);

NC_EXPORT ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff,
				     size_t count, ncclDataType_t datatype,
				     ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_ALLTOALL, datatype, 0, 0, sendbuff, recvbuff,
			   count };

	return nc_post(comm, &o, stream);
}
NC_ALIAS(ncclAlltoAll);

NC_EXPORT ncclResult_t pncclSend(const void *sendbuff, size_t count,
				 ncclDataType_t datatype, int peer,
				 ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_SEND, datatype, 0, peer, sendbuff, NULL, count };

	return nc_post(comm, &o, stream);
}
NC_ALIAS(ncclSend);

NC_EXPORT ncclResult_t pncclRecv(void *recvbuff, size_t count,
				 ncclDataType_t datatype, int peer,
				 ncclComm_t comm, cudaStream_t stream)
{
	struct nc_op o = { NC_RECV, datatype, 0, peer, NULL, recvbuff, count };

	return nc_post(comm, &o, stream);
}
NC_ALIAS(ncclRecv);

/* ------------------------------------------------------------------ */
/* Communicators                                                      */
/* ------------------------------------------------------------------ */

static int nc_env_core(int rank, int *core)
{
	static const char *const local[] = {
		"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
		"MPI_LOCALRANKID",
	};
	const char *v;
	char *end;
	long n;
	size_t i;

	v = getenv("MLAP2P_CORE");
	if (v && *v) {
		n = strtol(v, &end, 10);
		if (*end || n < 0 || n > 1 << 20) {
			nc_fail(NULL, -EINVAL, "MLAP2P_CORE=%s: not a core number", v);
			return -EINVAL;
		}
		*core = (int)n;
		return 0;
	}
	v = getenv("NEURON_RT_VISIBLE_CORES");
	if (v && *v) {
		n = strtol(v, &end, 10);
		if (end == v || (*end && *end != ',' && *end != '-') || n < 0 ||
		    n > 1 << 20) {
			nc_fail(NULL, -EINVAL,
				"NEURON_RT_VISIBLE_CORES=%s: not a core list", v);
			return -EINVAL;
		}
		*core = (int)n;
		return 0;
	}
	for (i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
		v = getenv(local[i]);
		if (v && *v) {
			n = strtol(v, &end, 10);
			if (*end || n < 0 || n > 1 << 20) {
				nc_fail(NULL, -EINVAL, "%s=%s: not a rank",
					local[i], v);
				return -EINVAL;
			}
			*core = (int)n;
			return 0;
		}
	}
	*core = rank;
	return 0;
}

static struct nc_comm *nc_alloc(int nranks, int rank, int core,
				const ncclUniqueId *id)
{
	struct nc_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->conn = calloc((size_t)nranks, 1);
	if (!c->conn) {
		free(c);
		return NULL;
	}
	c->magic = NC_MAGIC;
	c->nranks = nranks;
	c->rank = rank;
	c->core = core;
	c->blocking = 1;
	c->refs = 1;
	c->next = 1;		/* ticket 0: the init */
	memcpy(&c->id, id, sizeof(c->id));
	pthread_mutex_init(&c->tlock, NULL);
	pthread_cond_init(&c->tcond, NULL);
	pthread_mutex_init(&c->elock, NULL);
	pthread_mutex_init(&c->plock, NULL);
	return c;
}

/* Ticket 0: join the communicator (any thread). */
static int nc_init_run(struct nc_comm *c)
{
	struct mlap2p_comm *m = NULL;
	int ret;

	ret = mlap2p_comm_init_rank(&m, c->nranks, &c->id, c->rank, c->core);
	if (ret) {
		const char *t = mlap2p_last_error();
		char buf[NC_ERR_LEN];

		snprintf(buf, sizeof(buf), "ncclCommInitRank: %s%s%s",
			 mlap2p_strerror(ret), t && *t ? ": " : "", t);
		nc_keep_text(c, buf);
	}
	pthread_mutex_lock(&c->tlock);
	c->initErr = ret;
	__atomic_store_n(&c->comm, m, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->tlock);
	__atomic_store_n(&c->initDone, 1, __ATOMIC_RELEASE);
	nc_turn_done(c, 0);
	return ret;
}

static void *nc_init_thread(void *arg)
{
	return (void *)(intptr_t)nc_init_run(arg);
}

static ncclResult_t nc_init(ncclComm_t *comm, int nranks, ncclUniqueId id,
			    int rank, int core, int blocking)
{
	struct nc_comm *c;
	int ret;

	if (!comm)
		return nc_fail(NULL, -EINVAL, "ncclCommInitRank: comm is NULL");
	*comm = NULL;
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return nc_fail(NULL, -EINVAL,
			       "ncclCommInitRank: invalid rank %d of %d ranks",
			       rank, nranks);
	if (core == NCCL_CONFIG_UNDEF_INT || core < 0) {
		ret = nc_env_core(rank, &core);
		if (ret)
			return mlap2p_nccl_result(ret);
	}
	c = nc_alloc(nranks, rank, core, &id);
	if (!c)
		return nc_fail(NULL, -ENOMEM, "ncclCommInitRank: out of memory");
	c->blocking = blocking;
	if (nc_grp.depth) {
		if (nc_grow((void **)&nc_grp.inits, &nc_grp.initCap,
			    nc_grp.ninit + 1, sizeof(*nc_grp.inits))) {
			nc_put(c);
			return nc_fail(NULL, -ENOMEM,
				       "ncclCommInitRank: out of memory");
		}
		nc_grp.inits[nc_grp.ninit++] = c;
		*comm = (ncclComm_t)(void *)c;
		return ncclSuccess;
	}
	if (!blocking) {
		ret = pthread_create(&c->initTid, NULL, nc_init_thread, c);
		if (ret) {
			nc_put(c);
			return nc_fail(NULL, -ret,
				       "ncclCommInitRank: no init thread");
		}
		c->initThread = 1;
		*comm = (ncclComm_t)(void *)c;
		return ncclInProgress;
	}
	ret = nc_init_run(c);
	if (ret) {
		nc_fail(NULL, ret, "%s", c->lastErr);
		nc_put(c);
		return mlap2p_nccl_result(ret);
	}
	*comm = (ncclComm_t)(void *)c;
	return ncclSuccess;
}

NC_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks,
					 ncclUniqueId commId, int rank)
{
	return nc_init(comm, nranks, commId, rank, NCCL_CONFIG_UNDEF_INT, 1);
}
NC_ALIAS(ncclCommInitRank);

NC_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks,
					       ncclUniqueId commId, int rank,
					       ncclConfig_t *config)
{
	int core = NCCL_CONFIG_UNDEF_INT, blocking = 1;

	if (config) {
		if (config->magic != 0xcafebeef ||
		    config->size < offsetof(ncclConfig_t, mlap2pCore))
			return nc_fail(NULL, -EINVAL,
				       "ncclCommInitRankConfig: config not initialized with NCCL_CONFIG_INITIALIZER");
		if (config->blocking != NCCL_CONFIG_UNDEF_INT)
			blocking = config->blocking != 0;
		if (config->size >= offsetof(ncclConfig_t, mlap2pCore) +
		    sizeof(int))
			core = config->mlap2pCore;
	}
	return nc_init(comm, nranks, commId, rank, core, blocking);
}
NC_ALIAS(ncclCommInitRankConfig);

struct nc_all_arg {
	struct nc_comm *c;
	int ret;
};

static void *nc_all_thread(void *arg)
{
	struct nc_all_arg *a = arg;

	a->ret = nc_init_run(a->c);
	return NULL;
}

static struct nc_clique *nc_clique_new(struct nc_comm **cs, int n)
{
	struct nc_clique *q = calloc(1, sizeof(*q));
	int i;

	if (q)
		q->members = calloc((size_t)n, sizeof(*q->members));
	if (!q || !q->members) {
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->n = n;
	for (i = 0; i < n; i++) {
		q->members[i] = cs[i];
		cs[i]->clique = q;
	}
	return q;
}

/* Init every communicator of @cs at once (they wait for each other). */
static int nc_init_many(struct nc_comm **cs, int n)
{
	struct nc_all_arg *a = calloc((size_t)n, sizeof(*a));
	pthread_t *tid = calloc((size_t)n, sizeof(*tid));
	int i, ret = 0, started;

	if (!a || !tid || (n > 1 && !nc_clique_new(cs, n))) {
		free(a);
		free(tid);
		return -ENOMEM;
	}
	for (started = 0; started < n; started++) {
		a[started].c = cs[started];
		if (pthread_create(&tid[started], NULL, nc_all_thread,
				   &a[started]))
			break;
	}
	/* Ranks no thread could take fail (their peers time out). */
	for (i = started; i < n; i++) {
		pthread_mutex_lock(&cs[i]->tlock);
		cs[i]->initErr = -EAGAIN;
		pthread_mutex_unlock(&cs[i]->tlock);
		__atomic_store_n(&cs[i]->initDone, 1, __ATOMIC_RELEASE);
		nc_turn_done(cs[i], 0);
		a[i].ret = -EAGAIN;
	}
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	for (i = 0; i < n; i++)
		if (a[i].ret && !ret)
			ret = a[i].ret;
	free(a);
	free(tid);
	return ret;
}

NC_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm);

NC_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev,
					const int *devlist)
{
	struct nc_comm **cs;
	ncclUniqueId id;
	ncclResult_t res;
	int i, ret;

	if (!comms || ndev < 1)
		return nc_fail(NULL, -EINVAL, "ncclCommInitAll: invalid arguments (ndev %d)",
			       ndev);
	for (i = 0; devlist && i < ndev; i++)
		if (devlist[i] < 0)
			return nc_fail(NULL, -EINVAL,
				       "ncclCommInitAll: invalid device %d",
				       devlist[i]);
	res = pncclGetUniqueId(&id);
	if (res != ncclSuccess)
		return res;
	cs = calloc((size_t)ndev, sizeof(*cs));
	if (!cs)
		return nc_fail(NULL, -ENOMEM, "ncclCommInitAll: out of memory");
	for (i = 0; i < ndev; i++) {
		cs[i] = nc_alloc(ndev, i, devlist ? devlist[i] : i, &id);
		if (!cs[i])
			break;
	}
	ret = i < ndev ? -ENOMEM : nc_init_many(cs, ndev);
	for (i = 0; i < ndev; i++) {
		if (ret && cs[i])
			pncclCommDestroy((ncclComm_t)(void *)cs[i]);
		comms[i] = ret ? NULL : (ncclComm_t)(void *)cs[i];
	}
	free(cs);
	if (ret)
		return nc_fail(NULL, ret, "ncclCommInitAll: %s",
			       mlap2p_strerror(ret));
	return ncclSuccess;
}
NC_ALIAS(ncclCommInitAll);

static void nc_join_init(struct nc_comm *c)
{
	if (c->initThread) {
		pthread_join(c->initTid, NULL);
		c->initThread = 0;
	}
}

NC_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);
	uint64_t t;
	int err;

	if (!c)
		return nc_fail(NULL, -EINVAL, "ncclCommFinalize: invalid communicator");
	t = nc_ticket(c);
	nc_turn_wait(c, t);
	pthread_mutex_lock(&c->tlock);
	err = c->initErr ? c->initErr :
		__atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&c->tlock);
	nc_turn_done(c, t);
	return err ? mlap2p_nccl_result(err) : ncclSuccess;
}
NC_ALIAS(ncclCommFinalize);

/* Take @c's libmlap2p communicator after everything posted before. */
static struct mlap2p_comm *nc_detach(struct nc_comm *c)
{
	struct mlap2p_comm *m;
	uint64_t t;

	nc_join_init(c);
	t = nc_ticket(c);
	nc_turn_wait(c, t);
	pthread_mutex_lock(&c->tlock);
	m = c->comm;
	__atomic_store_n(&c->comm, NULL, __ATOMIC_RELEASE);
	c->aborted = 1;
	pthread_mutex_unlock(&c->tlock);
	nc_turn_done(c, t);
	return m;
}

static void *nc_destroy_thread(void *arg)
{
	return (void *)(intptr_t)mlap2p_comm_destroy(arg);
}

/* The last member of a clique: destroy every member's comm at once. */
static int nc_clique_destroy(struct nc_clique *q)
{
	pthread_t *tid = calloc((size_t)q->n, sizeof(*tid));
	char *started = calloc((size_t)q->n, 1);
	int i, err = 0, r;
	void *res;

	for (i = 0; i < q->n; i++) {
		struct mlap2p_comm *m = q->members[i]->comm ?
			q->members[i]->comm : NULL;

		if (!m)
			continue;
		if (tid && started && !pthread_create(&tid[i], NULL,
						      nc_destroy_thread, m)) {
			started[i] = 1;
			continue;
		}
		r = mlap2p_comm_abort(m);	/* cannot wait for peers */
		if (r && !err)
			err = r;
	}
	for (i = 0; i < q->n; i++) {
		if (!started || !started[i])
			continue;
		pthread_join(tid[i], &res);
		if ((int)(intptr_t)res && !err)
			err = (int)(intptr_t)res;
	}
	for (i = 0; i < q->n; i++) {
		q->members[i]->clique = NULL;
		q->members[i]->comm = NULL;
		nc_put(q->members[i]);
	}
	free(started);
	free(tid);
	pthread_mutex_destroy(&q->lock);
	free(q->members);
	free(q);
	return err;
}

NC_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);
	struct nc_clique *q;
	struct mlap2p_comm *m;
	int err = 0, last;

	if (!c)
		return nc_fail(NULL, -EINVAL, "ncclCommDestroy: invalid communicator");
	q = c->clique;
	m = nc_detach(c);
	if (q) {
		/* Keep the libmlap2p comm for the clique's last destroy. */
		c->comm = m;
		pthread_mutex_lock(&q->lock);
		last = ++q->done == q->n;
		pthread_mutex_unlock(&q->lock);
		if (!last)
			return ncclSuccess;
		err = nc_clique_destroy(q);
		return err ? nc_lib_fail(NULL, "ncclCommDestroy", err) :
			ncclSuccess;
	}
	if (m)
		err = mlap2p_comm_destroy(m);
	nc_put(c);
	return err ? nc_lib_fail(NULL, "ncclCommDestroy", err) : ncclSuccess;
}
NC_ALIAS(ncclCommDestroy);

NC_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);
	struct mlap2p_comm *m;

	if (!c)
		return nc_fail(NULL, -EINVAL, "ncclCommAbort: invalid communicator");
	nc_join_init(c);
	pthread_mutex_lock(&c->tlock);
	c->aborted = 1;
	m = c->comm;
	if (m && c->inflight)
		mlap2p_comm_interrupt(m);
	while (c->inflight)
		pthread_cond_wait(&c->tcond, &c->tlock);
	__atomic_store_n(&c->comm, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->tlock);
	if (m)
		mlap2p_comm_abort(m);
	if (c->clique) {
		struct nc_clique *q = c->clique;
		int last;

		pthread_mutex_lock(&q->lock);
		last = ++q->done == q->n;
		pthread_mutex_unlock(&q->lock);
		if (last)
			nc_clique_destroy(q);
		return ncclSuccess;
	}
	/* Queued work still holds references and fails with -ECANCELED. */
	nc_put(c);
	return ncclSuccess;
}
NC_ALIAS(ncclCommAbort);

NC_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm,
					      ncclResult_t *asyncError)
{
	struct nc_comm *c = nc_of(comm);
	struct mlap2p_comm *m;
	int err = 0;

	if (!c || !asyncError)
		return nc_fail(c, -EINVAL, "ncclCommGetAsyncError: invalid arguments");
	if (!__atomic_load_n(&c->initDone, __ATOMIC_ACQUIRE)) {
		*asyncError = ncclInProgress;
		return ncclSuccess;
	}
	pthread_mutex_lock(&c->tlock);
	err = c->initErr;
	if (!err)
		err = __atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE);
	m = c->comm;
	if (!err && m)
		mlap2p_comm_get_async_error(m, &err);
	pthread_mutex_unlock(&c->tlock);
	*asyncError = mlap2p_nccl_result(err);
	return ncclSuccess;
}
NC_ALIAS(ncclCommGetAsyncError);

NC_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
	struct nc_comm *c = nc_of(comm);

	if (!c || !count)
		return nc_fail(c, -EINVAL, "ncclCommCount: invalid arguments");
	*count = c->nranks;
	return ncclSuccess;
}
NC_ALIAS(ncclCommCount);

NC_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
	struct nc_comm *c = nc_of(comm);

	if (!c || !device)
		return nc_fail(c, -EINVAL, "ncclCommCuDevice: invalid arguments");
	*device = c->core;
	return ncclSuccess;
}
NC_ALIAS(ncclCommCuDevice);

NC_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
	struct nc_comm *c = nc_of(comm);

	if (!c || !rank)
		return nc_fail(c, -EINVAL, "ncclCommUserRank: invalid arguments");
	*rank = c->rank;
	return ncclSuccess;
}
NC_ALIAS(ncclCommUserRank);

NC_EXPORT struct mlap2p_comm *mlap2p_nccl_comm(ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);

	return c ? __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE) : NULL;
}

NC_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key,
				      ncclComm_t *newcomm,
				      ncclConfig_t *config)
{
	struct nc_comm *c = nc_of(comm), *nc;
	struct mlap2p_comm *child = NULL;
	int core = -1, blocking = 1, err;
	uint64_t t;

	if (!c || !newcomm || color < NCCL_SPLIT_NOCOLOR)
		return nc_fail(c, -EINVAL, "ncclCommSplit: invalid arguments (color %d)",
			       color);
	*newcomm = NULL;
	if (config) {
		if (config->magic != 0xcafebeef ||
		    config->size < offsetof(ncclConfig_t, mlap2pCore))
			return nc_fail(c, -EINVAL,
				       "ncclCommSplit: config not initialized with NCCL_CONFIG_INITIALIZER");
		if (config->blocking != NCCL_CONFIG_UNDEF_INT)
			blocking = config->blocking != 0;
		if (config->size >= offsetof(ncclConfig_t, mlap2pCore) +
		    sizeof(int) && config->mlap2pCore >= 0)
			core = config->mlap2pCore;
	}
	/* A call of its own on the parent: after everything posted. */
	t = nc_ticket(c);
	nc_turn_wait(c, t);
	err = nc_enter(c);
	if (!err) {
		err = mlap2p_comm_split(c->comm, color, key, core, &child);
		nc_leave(c);
	}
	nc_turn_done(c, t);
	if (err)
		return nc_lib_fail(c, "ncclCommSplit", err);
	if (!child)
		return ncclSuccess;	/* NCCL_SPLIT_NOCOLOR */
	nc = nc_alloc(mlap2p_comm_count(child), mlap2p_comm_rank(child),
		      mlap2p_comm_core(child), &(ncclUniqueId){ { 0 } });
	if (!nc) {
		mlap2p_comm_destroy(child);
		return nc_fail(c, -ENOMEM, "ncclCommSplit: out of memory");
	}
	nc->blocking = blocking;
	nc->comm = child;
	nc->initDone = 1;
	nc->serving = 1;
	*newcomm = (ncclComm_t)(void *)nc;
	return ncclSuccess;
}
NC_ALIAS(ncclCommSplit);

/* ------------------------------------------------------------------ */
/* PreMulSum                                                          */
/* ------------------------------------------------------------------ */

NC_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op,
						 void *scalar,
						 ncclDataType_t datatype,
						 ncclScalarResidence_t residence,
						 ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);
	size_t sz = nc_dtype_size(datatype);
	int i;

	if (!c || !op || !scalar || !sz || datatype > ncclBfloat16 ||
	    (residence != ncclScalarDevice &&
	     residence != ncclScalarHostImmediate))
		return nc_fail(c, -EINVAL, "ncclRedOpCreatePreMulSum: invalid arguments");
	pthread_mutex_lock(&c->plock);
	for (i = 0; i < NC_MAX_PREMUL && c->premul[i].used; i++)
		;
	if (i < NC_MAX_PREMUL) {
		c->premul[i].used = 1;
		c->premul[i].dtype = datatype;
		c->premul[i].residence = residence;
		c->premul[i].ptr = scalar;
		memset(c->premul[i].imm, 0, sizeof(c->premul[i].imm));
		memcpy(c->premul[i].imm, scalar, sz);
	}
	pthread_mutex_unlock(&c->plock);
	if (i == NC_MAX_PREMUL)
		return nc_fail(c, -ENOSPC, "ncclRedOpCreatePreMulSum: all %d operators in use",
			       NC_MAX_PREMUL);
	*op = (ncclRedOp_t)(ncclNumOps + i);
	return ncclSuccess;
}
NC_ALIAS(ncclRedOpCreatePreMulSum);

NC_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);
	int i = (int)op - ncclNumOps, ok;

	if (!c)
		return nc_fail(NULL, -EINVAL, "ncclRedOpDestroy: invalid communicator");
	if ((int)op >= 0 && (int)op < ncclNumOps)
		return nc_fail(c, -EINVAL, "ncclRedOpDestroy: operator %d is a builtin",
			       (int)op);
	pthread_mutex_lock(&c->plock);
	ok = i >= 0 && i < NC_MAX_PREMUL && c->premul[i].used;
	if (ok)
		c->premul[i].used = 0;
	pthread_mutex_unlock(&c->plock);
	if (!ok)
		return nc_fail(c, -EINVAL, "ncclRedOpDestroy: operator %d was not created on this communicator",
			       (int)op);
	return ncclSuccess;
}
NC_ALIAS(ncclRedOpDestroy);

/* ------------------------------------------------------------------ */
/* Group start / end                                                  */
/* ------------------------------------------------------------------ */

NC_EXPORT ncclResult_t pncclGroupStart(void)
{
	nc_grp.depth++;
	return ncclSuccess;
}
NC_ALIAS(ncclGroupStart);

NC_EXPORT ncclResult_t pncclGroupEnd(void)
{
	ncclResult_t res;
	int i, j, err = 0, r;

	if (nc_grp.depth == 0)
		return nc_fail(NULL, -EPERM, "ncclGroupEnd: not in a group call");
	if (--nc_grp.depth)
		return ncclSuccess;
	res = nc_grp.err;
	if (res == ncclSuccess && nc_grp.ninit) {
		err = nc_init_many(nc_grp.inits, nc_grp.ninit);
		if (err)
			res = nc_fail(NULL, err, "ncclGroupEnd: ncclCommInitRank: %s",
				      mlap2p_strerror(err));
	}
	for (i = 0; res == ncclSuccess && i < nc_grp.n; i++) {
		struct mlap2p_stream *s = nc_grp.ops[i].s;
		struct nc_item *it;

		for (j = 0; j < i && nc_grp.ops[j].s != s; j++)
			;
		if (j < i)
			continue;	/* stream already posted */
		it = nc_group_item(s);
		if (!it) {
			res = nc_fail(NULL, -ENOMEM, "ncclGroupEnd: out of memory");
			break;
		}
		if (s) {
			r = nc_stream_post(s, it);
			if (r) {
				nc_item_free(it);
				res = nc_fail(NULL, r, "ncclGroupEnd: the stream is being destroyed");
			}
			continue;
		}
		for (j = 0; j < it->nb; j++)
			it->b[j].ticket = nc_ticket(it->b[j].c);
		r = nc_run_batches(it->b, it->nb, 0);
		nc_item_free(it);
		if (r)
			res = mlap2p_nccl_result(r);
	}
	nc_group_reset();
	return res;
}
NC_ALIAS(ncclGroupEnd);
