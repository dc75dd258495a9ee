// SPDX-License-Identifier: MIT
/*
 * The communicator API (<mlap2p/mlap2p.h>): init, connect, memory,
 * teardown.  Every function returns 0 or -errno and sets errno.
 *
 * Init: read the environment, create the runtime instance (kmod or host),
 * check the core, fill our ncclPeerInfo, bootstrap (rendezvous and
 * all-gather), compute the rank-pair topology.
 *
 * Destroy: the data plane first, then the closing handshake with every
 * connected peer (so nobody frees memory a peer still uses), then each
 * connection's resources (relay memory goes back to its server), a barrier
 * (so every relay server outlives its clients' frees), the bootstrap, the
 * runtime.  Abort skips the handshakes and the barrier.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "bootstrap.h"
#include "log.h"
#include "param.h"
#include "rt/rt.h"
#include "topo.h"
#include "transport.h"
#include "transport/net.h"
#include "util.h"

struct mlap2p_import {
	struct mlap2p_import *next;
	struct ncclRtIpcMemHandle ipc;
	void *base;
	size_t size;
};

/* ---- version and errors ---- */

MLAP2P_EXPORT int mlap2p_version(int *major, int *minor, int *patch)
{
	if (major)
		*major = MLAP2P_VERSION_MAJOR;
	if (minor)
		*minor = MLAP2P_VERSION_MINOR;
	if (patch)
		*patch = MLAP2P_VERSION_PATCH;
	return MLAP2P_VERSION_CODE(MLAP2P_VERSION_MAJOR, MLAP2P_VERSION_MINOR,
				   MLAP2P_VERSION_PATCH);
}

MLAP2P_EXPORT const char *mlap2p_version_string(void)
{
	return MLAP2P_VERSION_STRING;
}

/* Turn an ncclResult_t from the seed-style layers into -errno. */
static int mlap2p_nccl_err(ncclResult_t res)
{
	return mlap2p_errno_take(res);
}

/* ---- peer info ---- */

static uint64_t mlap2p_host_hash(void)
{
	const char *id = getenv("NCCL_HOSTID");
	char buf[512] = "";
	size_t n;
	int fd;

	if (id && *id)
		return mlap2p_hash(id, strlen(id), 0);
	if (gethostname(buf, 256))
		strcpy(buf, "localhost");
	buf[255] = '\0';
	n = strlen(buf);
	/* The boot id tells two machines (or containers) of one name apart. */
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n - 1);

		if (r > 0)
			n += (size_t)r;
		close(fd);
	}
	return mlap2p_hash(buf, n, 0);
}

/* hash(pid, pid namespace), as NCCL's getPidHash. */
uint64_t mlap2p_pid_hash(pid_t pid)
{
	char ns[256] = "";
	ssize_t n;

	n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
	if (n < 0)
		n = 0;
	ns[n] = '\0';
	return mlap2p_hash(ns, (size_t)n, (uint64_t)pid * 0x9e3779b97f4a7c15ULL);
}

int mlap2p_fill_peer_info(struct ncclComm *comm, struct ncclPeerInfo *info)
{
	struct mlap2p_topo cfg = comm->rt->topo;
	uint64_t h;
	int ret;

	memset(info, 0, sizeof(*info));
	info->rank = comm->rank;
	info->cudaDev = comm->cudaDev;
	info->busId = comm->cudaDev;
	info->hostHash = mlap2p_host_hash();
	info->pid = (int32_t)getpid();
	info->pidHash = mlap2p_pid_hash(getpid());
	info->mla = (uint32_t)comm->mla;
	info->node = (uint32_t)comm->cudaDev /
		     mlap2p_topo_cores_per_node(&comm->rt->topo);
	info->rtKind = comm->rt->kind;
	info->netHash = mlap2p_net_provider_hash();
	info->syscallNs = mlap2p_syscall_ns();
	/* Which node this host is does not change who reaches whom. */
	cfg.node = 0;
	h = mlap2p_hash(&cfg, sizeof(cfg), info->rtKind);
	info->topoHash = (uint32_t)(h ^ (h >> 32));
	h = mlap2p_hash(&info->hostHash, sizeof(info->hostHash), h);
	info->pod = (uint32_t)(h ^ (h >> 32));
	ret = mlap2p_proc_start_time(getpid(), &info->startTime);
	if (ret)
		WARN("cannot read this process's start time: %s", strerror(-ret));
	return ret;
}

int mlap2p_peer_alive(struct ncclComm *comm, int rank)
{
	const struct ncclPeerInfo *me = &comm->peerInfo[comm->rank];
	const struct ncclPeerInfo *p = &comm->peerInfo[rank];
	uint64_t start;
	int ret;

	/* A NET peer whose network path failed is as gone as a dead one. */
	ret = mlap2p_net_peer_alive(comm, rank);
	if (ret)
		return ret;
	if (p->hostHash != me->hostHash || p->pidHash == me->pidHash)
		return 0;
	/* Only a process of our pid namespace can be looked up by pid. */
	if (mlap2p_pid_hash(p->pid) != p->pidHash)
		return 0;
	if (mlap2p_proc_start_time(p->pid, &start) || start != p->startTime)
		return -ESRCH;
	return 0;
}

/* ---- state shared with the data plane ---- */

void mlap2p_comm_set_error(struct ncclComm *comm, int err)
{
	int zero = 0;

	if (err < 0)
		__atomic_compare_exchange_n(&comm->asyncError, &zero, err, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/*
 * Enter and abort are a store-buffering pair (busy then the flag here, the
 * flag then busy in abort): sequentially consistent on both sides, so
 * that one of them sees the other.
 */
int mlap2p_comm_enter(struct ncclComm *comm)
{
	__atomic_add_fetch(&comm->busy, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&comm->abortFlag, __ATOMIC_SEQ_CST)) {
		__atomic_sub_fetch(&comm->busy, 1, __ATOMIC_ACQ_REL);
		return -ECANCELED;
	}
	return 0;
}

void mlap2p_comm_leave(struct ncclComm *comm)
{
	__atomic_sub_fetch(&comm->busy, 1, __ATOMIC_ACQ_REL);
}

/* ---- holds of open groups (comm.h) ---- */

struct mlap2p_hold {
	uint32_t refs;		/* 1 for the communicator, 1 per record */
	uint32_t entering;	/* hold_enter() to hold_leave() */
	uint32_t gone;		/* aborted: the communicator may be freed */
};

static struct mlap2p_hold *mlap2p_hold_new(void)
{
	struct mlap2p_hold *h = calloc(1, sizeof(*h));

	if (h)
		h->refs = 1;
	return h;
}

struct mlap2p_hold *mlap2p_comm_hold(struct ncclComm *comm)
{
	__atomic_add_fetch(&comm->hold->refs, 1, __ATOMIC_RELAXED);
	return comm->hold;
}

/* Entering, then gone here; gone, then entering in mlap2p_hold_gone(). */
int mlap2p_hold_enter(struct mlap2p_hold *h)
{
	__atomic_add_fetch(&h->entering, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&h->gone, __ATOMIC_SEQ_CST))
		return 0;
	mlap2p_hold_leave(h);
	return -ECANCELED;
}

void mlap2p_hold_leave(struct mlap2p_hold *h)
{
	__atomic_sub_fetch(&h->entering, 1, __ATOMIC_RELEASE);
}

void mlap2p_hold_put(struct mlap2p_hold *h, unsigned int n)
{
	if (h && n && !__atomic_sub_fetch(&h->refs, n, __ATOMIC_ACQ_REL))
		free(h);
}

/* Abort: no group's end touches the communicator after this. */
static void mlap2p_hold_gone(struct mlap2p_hold *h)
{
	struct timespec ts = { 0, 100 * 1000 };

	if (!h)
		return;
	__atomic_store_n(&h->gone, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&h->entering, __ATOMIC_SEQ_CST))
		nanosleep(&ts, NULL);
}

int mlap2p_import_region(struct ncclComm *comm,
			 const struct ncclRtIpcMemHandle *ipc, void **base,
			 size_t *size)
{
	struct ncclRtPointerAttributes attr;
	struct mlap2p_import *im;
	void *ptr;
	int ret;

	pthread_mutex_lock(&comm->lock);
	for (im = comm->imports; im; im = im->next) {
		if (!memcmp(&im->ipc, ipc, sizeof(*ipc))) {
			*base = im->base;
			if (size)
				*size = im->size;
			pthread_mutex_unlock(&comm->lock);
			return 0;
		}
	}
	/* Open under the lock: one mapping per handle, however many ask. */
	ret = comm->rt->ops->ipcOpenMemHandle(comm->rt, &ptr, ipc, 1);
	if (!ret)
		ret = comm->rt->ops->pointerGetAttributes(comm->rt, ptr, &attr);
	if (!ret) {
		im = calloc(1, sizeof(*im));
		if (!im) {
			comm->rt->ops->ipcCloseMemHandle(comm->rt, ptr);
			ret = -ENOMEM;
		}
	}
	if (!ret) {
		im->ipc = *ipc;
		im->base = ptr;
		im->size = attr.size;
		im->next = comm->imports;
		comm->imports = im;
		*base = ptr;
		if (size)
			*size = attr.size;
	}
	pthread_mutex_unlock(&comm->lock);
	return ret;
}

int mlap2p_region_lookup(struct ncclComm *comm, const void *ptr,
			 struct ncclRtIpcMemHandle *ipc, size_t *offset,
			 size_t *bytesAfter)
{
	struct ncclRtPointerAttributes attr;
	int ret;

	ret = comm->rt->ops->pointerGetAttributes(comm->rt, ptr, &attr);
	if (ret)
		return ret;
	if (!attr.owned)
		return -ENOENT;
	ret = comm->rt->ops->ipcGetMemHandle(comm->rt, ipc, attr.base);
	if (ret)
		return ret;
	if (offset)
		*offset = attr.offset;
	if (bytesAfter)
		*bytesAfter = attr.size - attr.offset;
	return 0;
}

static void mlap2p_imports_free(struct ncclComm *comm)
{
	struct mlap2p_import *im;

	while ((im = comm->imports)) {
		comm->imports = im->next;
		comm->rt->ops->ipcCloseMemHandle(comm->rt, im->base);
		free(im);
	}
}

/* ---- init ---- */

static void mlap2p_comm_free(struct mlap2p_comm *api)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	int c;

	for (c = 0; c < MAXCHANNELS; c++) {
		free(comm->channels[c].peers);
		free(comm->channels[c].ringOrder);
	}
	if (comm->rt) {
		mlap2p_imports_free(comm);
		if (comm->devMem)
			comm->rt->ops->free(comm->rt, comm->devMem);
	}
	mlap2p_bootstrap_close(comm->bootstrap);
	mlap2p_rt_destroy(comm->rt);
	mlap2p_topo_free(comm->topo);
	mlap2p_params_free(&comm->params);
	free(comm->peerInfo);
	free(comm->connectSend);
	free(comm->connectRecv);
	pthread_mutex_destroy(&comm->lock);
	mlap2p_hold_put(comm->hold, 1);
	free(api);
}

static int mlap2p_comm_setup(struct ncclComm *comm,
			     const struct mlap2p_unique_id *id, int core)
{
	int ret, p;

	ret = mlap2p_params_load(&comm->params);
	if (ret)
		return ret;
	if (comm->params.rings) {
		ret = mlap2p_rings_check(comm->params.rings, comm->nRanks);
		if (ret)
			return ret;
	}
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		comm->buffSizes[p] = comm->params.buffSizes[p];

	ret = mlap2p_rt_create(&comm->rt);
	if (ret)
		return ret;
	if (comm->rt->ops->coreGetDevice(comm->rt, core, &comm->mla)) {
		WARN("rank %d: core %d does not exist in this topology (cores 0..%u)",
		     comm->rank, core,
		     mlap2p_topo_total_cores(&comm->rt->topo) - 1);
		return -EINVAL;
	}
	if (ncclRtSetDevice(comm->rt, comm->mla) != ncclSuccess)
		return mlap2p_nccl_err(ncclInternalError);

	comm->peerInfo = calloc((size_t)comm->nRanks, sizeof(*comm->peerInfo));
	comm->connectSend = calloc((size_t)comm->nRanks, sizeof(uint32_t));
	comm->connectRecv = calloc((size_t)comm->nRanks, sizeof(uint32_t));
	if (!comm->peerInfo || !comm->connectSend || !comm->connectRecv)
		return -ENOMEM;
	ret = mlap2p_fill_peer_info(comm, &comm->peerInfo[comm->rank]);
	if (ret)
		return ret;
	comm->peerAlive = mlap2p_peer_alive;
	ret = mlap2p_bootstrap_init(comm, id);
	if (ret)
		return ret;
	ret = mlap2p_topo_compute(comm);
	return ret ? ret : mlap2p_topo_channels(comm);
}

MLAP2P_EXPORT int mlap2p_get_unique_id(struct mlap2p_unique_id *id)
{
	if (!id)
		return mlap2p_err(-EINVAL);
	return mlap2p_err(mlap2p_bootstrap_get_unique_id(id));
}

MLAP2P_EXPORT int mlap2p_comm_init_rank(struct mlap2p_comm **out, int nranks,
					const struct mlap2p_unique_id *id,
					int rank, int core)
{
	struct mlap2p_comm *api;
	struct ncclComm *comm;
	int c, ret;

	if (!out || !id || nranks < 1 || rank < 0 || rank >= nranks ||
	    core < 0) {
		WARN("mlap2p_comm_init_rank: invalid arguments (nranks %d, rank %d, core %d)",
		     nranks, rank, core);
		return mlap2p_err(-EINVAL);
	}
	api = calloc(1, sizeof(*api));
	if (!api)
		return mlap2p_err(-ENOMEM);
	comm = mlap2p_nccl(api);
	comm->hold = mlap2p_hold_new();
	if (!comm->hold) {
		free(api);
		return mlap2p_err(-ENOMEM);
	}
	comm->nRanks = nranks;
	comm->rank = rank;
	comm->cudaDev = core;
	pthread_mutex_init(&comm->lock, NULL);
	for (c = 0; c < MAXCHANNELS; c++) {
		comm->channels[c].id = c;
		comm->channels[c].ringPrev = -1;
		comm->channels[c].ringNext = -1;
	}
	mlap2p_log_set_core(core);

	ret = mlap2p_comm_setup(comm, id, core);
	if (ret) {
		mlap2p_comm_free(api);
		return mlap2p_err(ret);
	}
	INFO(NCCL_INIT, "comm %p rank %d nranks %d core %d mla %d runtime %s - Init COMPLETE",
	     (void *)api, rank, nranks, core, comm->mla, comm->rt->ops->name);
	*out = api;
	return 0;
}

/* ---- teardown ---- */

static void mlap2p_wait_idle(struct ncclComm *comm)
{
	struct timespec ts = { 0, 1000 * 1000 };

	while (__atomic_load_n(&comm->busy, __ATOMIC_SEQ_CST))
		nanosleep(&ts, NULL);
}

/*
 * Peers with a connected connector: they may map our memory.  A failed
 * setup leaves connectors with resources but not connected; their peers
 * were told (MLAP2P_TAG_FAILED) and never mapped anything of ours.
 */
static char *mlap2p_connected_peers(struct ncclComm *comm)
{
	char *peers = calloc((size_t)comm->nRanks, 1);
	int c, p;

	if (!peers)
		return NULL;
	for (c = 0; c < MAXCHANNELS; c++) {
		struct ncclChannel *ch = &comm->channels[c];

		if (!ch->peers)
			continue;
		for (p = 0; p < comm->nRanks; p++)
			if (ch->peers[p].send.c.connected ||
			    ch->peers[p].recv.c.connected)
				peers[p] = 1;
	}
	return peers;
}

static int mlap2p_close_handshake(struct ncclComm *comm)
{
	char *peers = mlap2p_connected_peers(comm);
	int p, ret = 0;

	if (!peers)
		return -ENOMEM;
	for (p = 0; p < comm->nRanks; p++)
		if (peers[p] && bootstrapSend(comm->bootstrap, p,
					      MLAP2P_TAG_CLOSE, NULL, 0) &&
		    !ret)
			ret = mlap2p_nccl_err(ncclSystemError);
	for (p = 0; p < comm->nRanks; p++)
		if (peers[p] && bootstrapRecvSetup(comm->bootstrap, p,
						   MLAP2P_TAG_CLOSE, NULL, 0) &&
		    !ret)
			ret = mlap2p_nccl_err(ncclSystemError);
	free(peers);
	return ret;
}

MLAP2P_EXPORT int mlap2p_comm_destroy(struct mlap2p_comm *api)
{
	struct ncclComm *comm;
	uint32_t held;
	int ret = 0, r;

	if (!api)
		return mlap2p_err(-EINVAL);
	comm = mlap2p_nccl(api);
	held = __atomic_load_n(&comm->hold->refs, __ATOMIC_ACQUIRE) - 1;
	if (held) {
		WARN("mlap2p_comm_destroy: rank %d: an open group holds %u operation(s) on the communicator: end the group (mlap2p_group_end) first, or abort",
		     comm->rank, held);
		return mlap2p_err(-EBUSY);
	}
	if (comm->dpFree)
		comm->dpFree(comm);
	if (comm->collFree)
		comm->collFree(comm);
	if (!mlap2p_comm_aborted(comm))
		ret = mlap2p_close_handshake(comm);
	if (mlap2p_transport_free_all(comm) != ncclSuccess && !ret)
		ret = mlap2p_nccl_err(ncclSystemError);
	/* Relay servers stay up until every client has given memory back. */
	if (!mlap2p_comm_aborted(comm) && comm->nRanks > 1) {
		r = bootstrapBarrier(comm->bootstrap, MLAP2P_TAG_BARRIER) ==
		    ncclSuccess ? 0 : mlap2p_nccl_err(ncclSystemError);
		if (r && !ret)
			ret = r;
	}
	INFO(NCCL_INIT, "comm %p rank %d - Destroy COMPLETE", (void *)api,
	     comm->rank);
	mlap2p_comm_free(api);
	return mlap2p_err(ret);
}

MLAP2P_EXPORT int mlap2p_comm_abort(struct mlap2p_comm *api)
{
	struct ncclComm *comm;

	if (!api)
		return mlap2p_err(-EINVAL);
	comm = mlap2p_nccl(api);
	__atomic_store_n(&comm->abortFlag, 1, __ATOMIC_SEQ_CST);
	mlap2p_hold_gone(comm->hold);
	mlap2p_bootstrap_abort(comm->bootstrap);
	mlap2p_wait_idle(comm);
	if (comm->dpFree)
		comm->dpFree(comm);
	if (comm->collFree)
		comm->collFree(comm);
	mlap2p_transport_free_all(comm);
	INFO(NCCL_INIT, "comm %p rank %d - Abort COMPLETE", (void *)api,
	     comm->rank);
	mlap2p_comm_free(api);
	return 0;
}

MLAP2P_EXPORT int mlap2p_comm_get_async_error(struct mlap2p_comm *api,
					      int *error)
{
	if (!api || !error)
		return mlap2p_err(-EINVAL);
	*error = __atomic_load_n(&mlap2p_nccl(api)->asyncError,
				 __ATOMIC_ACQUIRE);
	return 0;
}

MLAP2P_EXPORT int mlap2p_comm_count(const struct mlap2p_comm *api)
{
	return api ? api->nccl.nRanks : mlap2p_err(-EINVAL);
}

MLAP2P_EXPORT int mlap2p_comm_rank(const struct mlap2p_comm *api)
{
	return api ? api->nccl.rank : mlap2p_err(-EINVAL);
}

MLAP2P_EXPORT int mlap2p_comm_core(const struct mlap2p_comm *api)
{
	return api ? api->nccl.cudaDev : mlap2p_err(-EINVAL);
}

MLAP2P_EXPORT const char *mlap2p_comm_runtime(const struct mlap2p_comm *api)
{
	if (!api) {
		errno = EINVAL;
		return NULL;
	}
	return api->nccl.rt->ops->name;
}

/* ---- connect ---- */

static int mlap2p_setup(struct ncclComm *comm)
{
	ncclResult_t res = ncclTransportP2pSetup(comm, NULL);

	return res == ncclSuccess ? 0 : mlap2p_nccl_err(res);
}

MLAP2P_EXPORT int mlap2p_connect_peers(struct mlap2p_comm *api, int nchannels,
				       int nrecv, const int *recv_peers,
				       int nsend, const int *send_peers)
{
	struct ncclComm *comm;
	int c, ret;

	if (!api || nchannels < 1 || nchannels > MAXCHANNELS || nrecv < 0 ||
	    nsend < 0 || (nrecv && !recv_peers) || (nsend && !send_peers))
		return mlap2p_err(-EINVAL);
	comm = mlap2p_nccl(api);
	ret = mlap2p_comm_enter(comm);
	if (ret)
		return mlap2p_err(ret);
	for (c = 0; c < nchannels && !ret; c++) {
		ncclResult_t res = ncclTransportP2pConnect(comm, c, nrecv,
							   (int *)recv_peers,
							   nsend,
							   (int *)send_peers);

		if (res != ncclSuccess)
			ret = mlap2p_nccl_err(res);
	}
	if (!ret)
		ret = mlap2p_setup(comm);
	mlap2p_comm_leave(comm);
	return mlap2p_err(ret);
}

/*
 * Rank 0 computes the rings and sends them (status first) to everyone, so
 * every rank connects the same rings even if environments differ.
 */
static int mlap2p_rings_share(struct ncclComm *comm, int nrings, int *order)
{
	size_t count = (size_t)nrings * (size_t)comm->nRanks + 1;
	int *msg, r, ret = 0;

	msg = calloc(count, sizeof(int));
	if (!msg)
		return -ENOMEM;
	if (comm->rank == 0) {
		msg[0] = mlap2p_topo_rings(comm, nrings, msg + 1);
		for (r = 1; r < comm->nRanks && !ret; r++)
			if (bootstrapSend(comm->bootstrap, r, MLAP2P_TAG_RINGS,
					  msg, (int)(count * sizeof(int))))
				ret = mlap2p_nccl_err(ncclSystemError);
	} else if (bootstrapRecv(comm->bootstrap, 0, MLAP2P_TAG_RINGS, msg,
				 (int)(count * sizeof(int)))) {
		ret = mlap2p_nccl_err(ncclSystemError);
	}
	if (!ret && msg[0]) {
		ret = msg[0];
		if (comm->rank)
			WARN("rank %d: rank 0 could not compute the rings: %s",
			     comm->rank, mlap2p_strerror(ret));
	}
	if (!ret)
		memcpy(order, msg + 1, (count - 1) * sizeof(int));
	free(msg);
	return ret;
}

MLAP2P_EXPORT int mlap2p_connect_ring(struct mlap2p_comm *api, int nchannels)
{
	struct ncclComm *comm;
	int n, c, i, ret;
	int *order;

	if (!api || nchannels < 1 || nchannels > MAXCHANNELS)
		return mlap2p_err(-EINVAL);
	comm = mlap2p_nccl(api);
	n = comm->nRanks;
	ret = mlap2p_comm_enter(comm);
	if (ret)
		return mlap2p_err(ret);
	order = malloc(sizeof(int) * (size_t)n * (size_t)nchannels);
	if (!order) {
		ret = -ENOMEM;
		goto out_leave;
	}
	ret = mlap2p_rings_share(comm, nchannels, order);
	for (c = 0; c < nchannels && !ret; c++) {
		struct ncclChannel *ch = &comm->channels[c];
		const int *ring = order + c * n;
		ncclResult_t res;

		for (i = 0; i < n && ring[i] != comm->rank; i++)
			;
		if (!ch->ringOrder) {
			ch->ringOrder = malloc(sizeof(int) * (size_t)n);
			if (!ch->ringOrder) {
				ret = -ENOMEM;
				break;
			}
		}
		memcpy(ch->ringOrder, ring, sizeof(int) * (size_t)n);
		ch->ringPrev = ring[(i + n - 1) % n];
		ch->ringNext = ring[(i + 1) % n];
		res = ncclTransportP2pConnect(comm, c, 1, &ch->ringPrev, 1,
					      &ch->ringNext);
		if (res != ncclSuccess)
			ret = mlap2p_nccl_err(res);
	}
	if (!ret)
		ret = mlap2p_setup(comm);
	free(order);
out_leave:
	mlap2p_comm_leave(comm);
	return mlap2p_err(ret);
}

MLAP2P_EXPORT int mlap2p_ring_get(const struct mlap2p_comm *api, int channel,
				  int *order, int *prev, int *next)
{
	const struct ncclChannel *ch;

	if (!api || channel < 0 || channel >= MAXCHANNELS)
		return mlap2p_err(-EINVAL);
	ch = &api->nccl.channels[channel];
	if (!ch->ringOrder)
		return mlap2p_err(-ENOTCONN);
	if (order)
		memcpy(order, ch->ringOrder,
		       sizeof(int) * (size_t)api->nccl.nRanks);
	if (prev)
		*prev = ch->ringPrev;
	if (next)
		*next = ch->ringNext;
	return 0;
}

MLAP2P_EXPORT int mlap2p_conn_get(struct mlap2p_comm *api, int channel,
				  int peer, int dir,
				  struct mlap2p_conn_desc *desc)
{
	struct mlap2p_conn *conn;
	int p;

	if (!api || !desc || (dir != MLAP2P_DIR_SEND && dir != MLAP2P_DIR_RECV))
		return mlap2p_err(-EINVAL);
	conn = mlap2p_channel_conn(mlap2p_nccl(api), channel, peer,
				dir == MLAP2P_DIR_SEND);
	if (!conn || !conn->c.connected)
		return mlap2p_err(-ENOTCONN);
	memset(desc, 0, sizeof(*desc));
	desc->path = (int)conn->mode;
	desc->read = conn->read;
	desc->mem_rank = conn->memRank;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		desc->buff_sizes[p] = conn->buffSizes[p];
	desc->host = &conn->c;
	desc->dev = conn->dev;
	return 0;
}

/* ---- memory ---- */

MLAP2P_EXPORT int mlap2p_mem_alloc(struct mlap2p_comm *api, size_t size,
				   void **ptr)
{
	struct ncclComm *comm;

	if (!api || !ptr || !size)
		return mlap2p_err(-EINVAL);
	comm = mlap2p_nccl(api);
	if (ncclRtCalloc(comm->rt, ptr, size) != ncclSuccess)
		return mlap2p_err(mlap2p_nccl_err(ncclSystemError));
	pthread_mutex_lock(&comm->rt->lock);
	mlap2p_rt_find(comm->rt, *ptr)->user = 1;
	pthread_mutex_unlock(&comm->rt->lock);
	return 0;
}

MLAP2P_EXPORT int mlap2p_mem_free(struct mlap2p_comm *api, void *ptr)
{
	struct mlap2p_rt_region *r;
	struct ncclComm *comm;
	bool user;

	if (!api || !ptr)
		return mlap2p_err(-EINVAL);
	comm = mlap2p_nccl(api);
	/* Only what mlap2p_mem_alloc gave: never a FIFO under a connection. */
	pthread_mutex_lock(&comm->rt->lock);
	r = mlap2p_rt_find(comm->rt, ptr);
	user = r && r->user && r->base == ptr;
	pthread_mutex_unlock(&comm->rt->lock);
	if (!user)
		return mlap2p_err(-EINVAL);
	return mlap2p_err(comm->rt->ops->free(comm->rt, ptr));
}
