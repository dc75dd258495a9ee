// SPDX-License-Identifier: MIT
/*
 * <nccl.h> on libmlap2p: communicators (init, split, finalize, destroy,
 * abort, queries) and PreMulSum.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlap2p/dataplane.h"
#include "mlap2p/stream.h"
#include "mlap2p/coll.h"
#include "nc.h"

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
	c->asym = nc_fence_asym();
	/* No bias without the light fence. */
	c->shared = c->asym ? NC_BIASED : NC_SHARED;
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
	__atomic_store_n(&c->initErr, ret, __ATOMIC_RELEASE);
	__atomic_store_n(&c->comm, m, __ATOMIC_RELEASE);
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
int nc_init_many(struct nc_comm **cs, int n)
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
		__atomic_store_n(&cs[i]->initErr, -EAGAIN, __ATOMIC_RELEASE);
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
	err = __atomic_load_n(&c->initErr, __ATOMIC_ACQUIRE);
	if (!err)
		err = __atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE);
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
	m = __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->comm, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&c->aborted, 1, __ATOMIC_SEQ_CST);
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
	__atomic_store_n(&c->aborted, 1, __ATOMIC_RELAXED);
	nc_fence_heavy(c);	/* aborted, then inflight: see nc_enter */
	m = __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE);
	if (m && __atomic_load_n(&c->inflight, __ATOMIC_ACQUIRE))
		mlap2p_comm_interrupt(m);
	/* The interrupted call returns within a wait's poll. */
	while (__atomic_load_n(&c->inflight, __ATOMIC_ACQUIRE))
		usleep(100);
	__atomic_store_n(&c->comm, NULL, __ATOMIC_RELEASE);
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
	err = __atomic_load_n(&c->initErr, __ATOMIC_ACQUIRE);
	if (!err)
		err = __atomic_load_n(&c->asyncErr, __ATOMIC_ACQUIRE);
	m = __atomic_load_n(&c->comm, __ATOMIC_ACQUIRE);
	if (!err && m)
		mlap2p_comm_get_async_error(m, &err);
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

/* A split holding ticket @g->ticket of its parent: g->child, g->err. */
static void nc_split_run(struct nc_gsplit *g)
{
	struct nc_comm *c = g->c, *nc;
	struct mlap2p_comm *child = NULL;
	int err;

	g->child = NULL;
	nc_turn_wait(c, g->ticket);
	err = nc_enter(c);
	if (!err) {
		err = mlap2p_comm_split(c->comm, g->color, g->key, g->core,
					&child);
		nc_leave(c);
	}
	nc_turn_done(c, g->ticket);
	g->err = err;
	if (err || !child)
		return;		/* NCCL_SPLIT_NOCOLOR: no child */
	nc = nc_alloc(mlap2p_comm_count(child), mlap2p_comm_rank(child),
		      mlap2p_comm_core(child), &(ncclUniqueId){ { 0 } });
	if (!nc) {
		mlap2p_comm_destroy(child);
		g->err = -ENOMEM;
		return;
	}
	nc->blocking = g->blocking;
	nc->comm = child;
	nc->initDone = 1;
	nc->serving = 1;
	g->child = nc;
}

static void *nc_split_thread(void *arg)
{
	nc_split_run(arg);
	return NULL;
}

/*
 * The splits one thread recorded in a group, each on its own thread (a
 * split waits for the parent's other ranks, which may be this thread's
 * too), their tickets taken in call order first.  Children made together
 * form a clique, so this thread can destroy them one after the other.
 */
ncclResult_t nc_split_many(struct nc_gsplit *g, int n)
{
	pthread_t *tid = calloc((size_t)n, sizeof(*tid));
	struct nc_comm **kids = calloc((size_t)n, sizeof(*kids));
	ncclResult_t res = ncclSuccess;
	int i, started, nk = 0;

	if (!tid || !kids) {
		free(kids);
		free(tid);
		return nc_fail(NULL, -ENOMEM, "ncclGroupEnd: out of memory");
	}
	for (i = 0; i < n; i++)
		g[i].ticket = nc_ticket(g[i].c);
	for (started = 0; started < n; started++)
		if (pthread_create(&tid[started], NULL, nc_split_thread,
				   &g[started]))
			break;
	/* Splits no thread could take run here, in order (a split whose
	 * peers are this thread's then fails by the bootstrap timeout). */
	for (i = started; i < n; i++)
		nc_split_run(&g[i]);
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	for (i = 0; i < n; i++) {
		if (g[i].err && res == ncclSuccess)
			res = nc_lib_fail(g[i].c, "ncclCommSplit", g[i].err);
		if (g[i].child)
			kids[nk++] = g[i].child;
		*g[i].out = (ncclComm_t)(void *)g[i].child;
	}
	if (nk > 1 && !nc_clique_new(kids, nk) && res == ncclSuccess)
		res = nc_fail(NULL, -ENOMEM, "ncclGroupEnd: out of memory");
	free(kids);
	free(tid);
	return res;
}

/* ncclCommSplit's arguments into @g (but its key). */
static ncclResult_t nc_split_args(struct nc_comm *c, int color,
				  ncclComm_t *newcomm, ncclConfig_t *config,
				  struct nc_gsplit *g)
{
	if (!c || !newcomm || color < NCCL_SPLIT_NOCOLOR)
		return nc_fail(c, -EINVAL, "ncclCommSplit: invalid arguments (color %d)",
			       color);
	*newcomm = NULL;
	g->c = c;
	g->color = color;
	g->core = -1;
	g->blocking = 1;
	g->out = newcomm;
	if (!config)
		return ncclSuccess;
	if (config->magic != 0xcafebeef ||
	    config->size < offsetof(ncclConfig_t, mlap2pCore))
		return nc_fail(c, -EINVAL,
			       "ncclCommSplit: config not initialized with NCCL_CONFIG_INITIALIZER");
	if (config->blocking != NCCL_CONFIG_UNDEF_INT)
		g->blocking = config->blocking != 0;
	if (config->size >= offsetof(ncclConfig_t, mlap2pCore) +
	    sizeof(int) && config->mlap2pCore >= 0)
		g->core = config->mlap2pCore;
	return ncclSuccess;
}

NC_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key,
				      ncclComm_t *newcomm,
				      ncclConfig_t *config)
{
	struct nc_comm *c = nc_of(comm);
	struct nc_gsplit g = { 0 };
	ncclResult_t res;

	res = nc_split_args(c, color, newcomm, config, &g);
	if (res != ncclSuccess) {
		/* A bad call fails its group as a whole (as nc_post's). */
		if (nc_grp.depth && nc_grp.err == ncclSuccess)
			nc_grp.err = res;
		return res;
	}
	g.key = key;
	/* In a group (one thread splitting several ranks): at its end. */
	if (nc_grp.depth) {
		if (nc_grow((void **)&nc_grp.splits, &nc_grp.splitCap,
			    nc_grp.nsplit + 1, sizeof(*nc_grp.splits))) {
			res = nc_fail(c, -ENOMEM, "ncclCommSplit: out of memory");
			if (nc_grp.err == ncclSuccess)
				nc_grp.err = res;
			return res;
		}
		nc_grp.splits[nc_grp.nsplit++] = g;
		return ncclSuccess;
	}
	/* A call of its own on the parent: after everything posted. */
	g.ticket = nc_ticket(c);
	nc_split_run(&g);
	if (g.err)
		return nc_lib_fail(c, "ncclCommSplit", g.err);
	*newcomm = (ncclComm_t)(void *)g.child;
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
