// SPDX-License-Identifier: MIT
/*
 * The host runtime: device memory without the module.
 *
 * Regions are memfd pages (memfd_create, fallocate so that running out of
 * memory fails here rather than as a SIGBUS later, sealed against resizing),
 * mapped MAP_SHARED.  Locality comes from the same rules the module uses
 * (common/mlap2p_topo.c), configured by the environment:
 *
 *   MLAP2P_FAMILY          trn1 | trn2 | trn3          (default trn2)
 *   MLAP2P_DEVICES         MLAs per node               (family default)
 *   MLAP2P_CORES_PER_DEVICE physical cores per MLA     (family default)
 *   MLAP2P_LNC             1 | 2                       (family default)
 *   MLAP2P_POD             none | p2p | switch         (default none)
 *   MLAP2P_POD_NODES       nodes in the pod            (1, or 2 with a pod)
 *   MLAP2P_NODE            this host's node            (default 0)
 *   MLAP2P_DEV_CAPACITY_MB memory per MLA, per process (default 1024)
 *
 * IPC.  A handle names the exporting runtime instance (a random 64-bit id),
 * the region and a 128-bit random secret.  Each instance that exports runs
 * one thread listening on an abstract Unix socket named after that id;
 * an importer connects, presents the region id and secret, and receives the
 * memfd with SCM_RIGHTS, maps it and closes the descriptor.  Nothing has a
 * name in any filesystem, so nothing is left behind when any process dies
 * at any point: the socket vanishes with its process, and pages live exactly
 * as long as some process maps them (an importer keeps its pages after the
 * exporter exits, as with the module).  The exporter checks the importer's
 * credentials (SO_PEERCRED): same uid, or root.  Abstract sockets belong to
 * the network namespace, so ranks of one job must share it (as NCCL's cuMem
 * path requires).  pidfd_getfd(2) was the other candidate; it needs ptrace
 * rights over the exporter, which Yama and container seccomp profiles
 * commonly deny, so it was not used.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rt/backend.h"
#include "socket.h"

#define MLAP2P_HOST_IPC_MAGIC	0x31484c4dU	/* "MLH1" */
#define MLAP2P_HOST_REQ_MAGIC	0x51484c4dU	/* "MLHQ" */
#define MLAP2P_HOST_IO_TIMEOUT	5		/* seconds */

struct mlap2p_host_ipc {
	uint32_t magic;
	uint32_t pid;		/* exporter, for messages */
	uint64_t instance;	/* names the exporter's socket */
	uint64_t regionId;
	uint64_t size;
	unsigned char secret[16];
	uint32_t device;
	uint32_t reserved;
	uint64_t pad;
};
_Static_assert(sizeof(struct mlap2p_host_ipc) == MLAP2P_IPC_HANDLE_SIZE,
	       "host IPC handle must be 64 bytes");

struct mlap2p_host_req {
	uint32_t magic;
	uint32_t pad;
	uint64_t regionId;
	unsigned char secret[16];
};

struct mlap2p_host_rep {
	int32_t status;		/* 0 or -errno */
	uint32_t device;
	uint64_t size;
};

struct mlap2p_host {
	uint64_t instance;
	uint64_t capacity;	/* bytes per MLA */
	uint64_t nextRegion;	/* protected by rt->lock */
	/* exporter, started by the first ipcGetMemHandle (rt->lock) */
	int listenFd;
	int stopFd;
	int started;
	pthread_t thread;
};

static struct mlap2p_host *mlap2p_host(struct mlap2p_rt *rt)
{
	return rt->priv;
}

static void mlap2p_host_sockname(uint64_t instance, struct sockaddr_un *sun,
				 socklen_t *len)
{
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	/* Abstract namespace: sun_path[0] == '\0'. */
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
		     "mlap2p-host/%016" PRIx64, instance);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* ---- topology from the environment ---- */

static int mlap2p_host_topo_check(const struct mlap2p_topo *t, const char *var)
{
	if (!mlap2p_topo_validate(t))
		return 0;
	WARN("%s: the host runtime's topology (family %s, %u MLAs, %u cores per MLA, LNC %u, pod %s of %u nodes, node %u) is not valid; see docs/topology.md",
	     var, mlap2p_topo_family_name(t->family) ?: "?", t->num_devices,
	     t->cores_per_device, t->lnc,
	     mlap2p_topo_pod_name(t->pod_type) ?: "?", t->pod_nodes, t->node);
	return -EINVAL;
}

int mlap2p_rt_host_topo_env(struct mlap2p_topo *t, uint64_t *capacity)
{
	static const char *const families[] = {
		[0] = NULL,
		[MLAP2P_FAMILY_TRN1] = "trn1",
		[MLAP2P_FAMILY_TRN2] = "trn2",
		[MLAP2P_FAMILY_TRN3] = "trn3",
	};
	static const char *const pods[] = {
		[MLAP2P_POD_NONE] = "none",
		[MLAP2P_POD_P2P] = "p2p",
		[MLAP2P_POD_SWITCH] = "switch",
	};
	long v;
	int fam, pod, ret;

	ret = mlap2p_env_enum("MLAP2P_FAMILY", families, ARRAY_SIZE(families),
			      MLAP2P_FAMILY_TRN2, &fam);
	if (ret)
		return ret;
	mlap2p_topo_defaults(t, (__u32)fam);

	ret = mlap2p_env_int("MLAP2P_DEVICES", 1, MLAP2P_TOPO_MAX_DEVICES,
			     t->num_devices, &v);
	if (ret)
		return ret;
	t->num_devices = (__u32)v;
	ret = mlap2p_host_topo_check(t, "MLAP2P_DEVICES");
	if (ret)
		return ret;

	ret = mlap2p_env_int("MLAP2P_CORES_PER_DEVICE", 1,
			     MLAP2P_TOPO_MAX_CORES_PER_DEV,
			     t->cores_per_device, &v);
	if (ret)
		return ret;
	t->cores_per_device = (__u32)v;
	ret = mlap2p_env_int("MLAP2P_LNC", 1, 2, t->lnc, &v);
	if (ret)
		return ret;
	t->lnc = (__u32)v;
	ret = mlap2p_host_topo_check(t, "MLAP2P_CORES_PER_DEVICE/MLAP2P_LNC");
	if (ret)
		return ret;

	ret = mlap2p_env_enum("MLAP2P_POD", pods, ARRAY_SIZE(pods),
			      MLAP2P_POD_NONE, &pod);
	if (ret)
		return ret;
	t->pod_type = (__u32)pod;
	ret = mlap2p_env_int("MLAP2P_POD_NODES", 1, MLAP2P_TOPO_MAX_POD_NODES,
			     pod == MLAP2P_POD_NONE ? 1 : 2, &v);
	if (ret)
		return ret;
	t->pod_nodes = (__u32)v;
	ret = mlap2p_host_topo_check(t, "MLAP2P_POD/MLAP2P_POD_NODES");
	if (ret)
		return ret;

	ret = mlap2p_env_int("MLAP2P_NODE", 0, MLAP2P_TOPO_MAX_POD_NODES - 1,
			     0, &v);
	if (ret)
		return ret;
	t->node = (__u32)v;
	ret = mlap2p_host_topo_check(t, "MLAP2P_NODE");
	if (ret)
		return ret;

	ret = mlap2p_env_int("MLAP2P_DEV_CAPACITY_MB", 1, 1L << 20, 1024, &v);
	if (ret)
		return ret;
	*capacity = (uint64_t)v << 20;
	return 0;
}

/* ---- exporter ---- */

static int mlap2p_host_send_fd(int sock, const struct mlap2p_host_rep *rep,
			       int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)rep, sizeof(*rep) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(*rep) ?
	       0 : -errno;
}

/* One importer's request (mlap2p_sock_serve()). */
static void mlap2p_host_serve(void *arg, int sock)
{
	struct mlap2p_rt *rt = arg;
	struct timeval tv = { MLAP2P_HOST_IO_TIMEOUT, 0 };
	struct mlap2p_host_rep rep = { .status = -ENOENT };
	struct mlap2p_rt_region *r;
	struct mlap2p_host_req req;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = -1;

	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (recv(sock, &req, sizeof(req), 0) != (ssize_t)sizeof(req) ||
	    req.magic != MLAP2P_HOST_REQ_MAGIC)
		return;
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    (cred.uid != geteuid() && cred.uid != 0)) {
		rep.status = -EACCES;
		mlap2p_host_send_fd(sock, &rep, -1);
		return;
	}

	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find_id(rt, req.regionId, 1);
	if (r && !mlap2p_memeq_ct(r->secret, req.secret, sizeof(r->secret))) {
		fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
		rep.status = fd < 0 ? -errno : 0;
		rep.size = r->size;
		rep.device = (uint32_t)r->device;
	}
	pthread_mutex_unlock(&rt->lock);

	mlap2p_host_send_fd(sock, &rep, fd);
	if (fd >= 0)
		close(fd);
}

static void *mlap2p_host_exporter(void *arg)
{
	struct mlap2p_rt *rt = arg;
	struct mlap2p_host *h = mlap2p_host(rt);

	mlap2p_sock_serve(h->listenFd, h->stopFd, mlap2p_host_serve, rt);
	return NULL;
}

/* Called with rt->lock held. */
static int mlap2p_host_start_exporter(struct mlap2p_rt *rt)
{
	struct mlap2p_host *h = mlap2p_host(rt);
	struct sockaddr_un sun;
	socklen_t len;
	int ret;

	if (h->started)
		return 0;
	h->listenFd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (h->listenFd < 0)
		return -errno;
	mlap2p_host_sockname(h->instance, &sun, &len);
	if (bind(h->listenFd, (struct sockaddr *)&sun, len) ||
	    listen(h->listenFd, 64)) {
		ret = -errno;
		goto out_close_listen;
	}
	h->stopFd = eventfd(0, EFD_CLOEXEC);
	if (h->stopFd < 0) {
		ret = -errno;
		goto out_close_listen;
	}
	ret = -pthread_create(&h->thread, NULL, mlap2p_host_exporter, rt);
	if (ret)
		goto out_close_stop;
	h->started = 1;
	return 0;

out_close_stop:
	close(h->stopFd);
	h->stopFd = -1;
out_close_listen:
	close(h->listenFd);
	h->listenFd = -1;
	return ret;
}

/* ---- slots ---- */

static int mlap2p_host_init(struct mlap2p_rt *rt)
{
	struct mlap2p_host *h;
	int ret;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->listenFd = -1;
	h->stopFd = -1;
	ret = mlap2p_rt_host_topo_env(&rt->topo, &h->capacity);
	if (!ret)
		ret = mlap2p_random(&h->instance, sizeof(h->instance));
	if (ret) {
		free(h);
		return ret;
	}
	rt->priv = h;
	rt->info.abi_major = MLAP2P_ABI_MAJOR;
	rt->info.abi_minor = MLAP2P_ABI_MINOR;
	rt->info.features = MLAP2P_FEAT_IPC_HANDLE | MLAP2P_FEAT_LOCALITY |
			    MLAP2P_FEAT_REGION_INFO;
	rt->info.dev_capacity = h->capacity;
	rt->info.max_bytes_per_file = h->capacity *
				      mlap2p_topo_total_mlas(&rt->topo);
	rt->info.max_regions_per_file = 1U << 20;
	mlap2p_rt_info_from_topo(rt);
	return 0;
}

static void mlap2p_host_region_free(struct mlap2p_rt *rt,
				    struct mlap2p_rt_region *r)
{
	(void)rt;
	mlap2p_rt_region_unmap(r);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

static void mlap2p_host_fini(struct mlap2p_rt *rt)
{
	struct mlap2p_host *h = mlap2p_host(rt);
	uint64_t one = 1;

	if (h->started) {
		if (write(h->stopFd, &one, sizeof(one)) != sizeof(one))
			WARN("host runtime: cannot stop the exporter: %s",
			     strerror(errno));
		pthread_join(h->thread, NULL);
		close(h->stopFd);
		close(h->listenFd);
	}
	mlap2p_rt_free_all(rt, mlap2p_host_region_free);
	free(h);
	rt->priv = NULL;
}

static uint64_t mlap2p_host_used(struct mlap2p_rt *rt, int device)
{
	struct mlap2p_rt_region *r;
	uint64_t used = 0;

	for (r = rt->regions; r; r = r->next)
		if (r->owned && r->device == device)
			used += r->size;
	return used;
}

static int mlap2p_host_dev_info(struct mlap2p_rt *rt, int device,
				struct mlap2p_dev_info *info)
{
	struct mlap2p_topo_dev d;
	__u32 i;

	if (device < 0 || mlap2p_topo_dev(&rt->topo, (__u32)device, &d))
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->device = (__u32)device;
	info->node = d.node;
	info->local_index = d.local_index;
	info->peer_mla = d.peer_mla;
	info->torus_x = d.torus_x;
	info->torus_y = d.torus_y;
	info->num_neighbours = d.num_neighbours;
	for (i = 0; i < MLAP2P_MAX_NEIGHBOURS; i++)
		info->neighbours[i] = d.neighbours[i];
	info->first_core = d.first_core;
	info->num_cores = d.num_cores;
	info->capacity = mlap2p_host(rt)->capacity;
	pthread_mutex_lock(&rt->lock);
	info->used = mlap2p_host_used(rt, device);
	pthread_mutex_unlock(&rt->lock);
	return 0;
}

static int mlap2p_host_edge(struct mlap2p_rt *rt, int *edge,
			    int *intermediate, int core, int peerCore)
{
	__u32 e, mid;

	if (core < 0 || peerCore < 0 ||
	    mlap2p_topo_core_edge(&rt->topo, (__u32)core, (__u32)peerCore, &e,
				  &mid))
		return -EINVAL;
	*edge = (int)e;
	if (intermediate)
		*intermediate = mid == MLAP2P_NO_MLA ? -1 : (int)mid;
	return 0;
}

static int mlap2p_host_can_access(struct mlap2p_rt *rt, int *canAccess,
				  int core, int peerCore)
{
	int edge, ret;

	ret = mlap2p_host_edge(rt, &edge, NULL, core, peerCore);
	if (!ret)
		*canAccess = edge != MLAP2P_EDGE_NONE;
	return ret;
}

static int mlap2p_host_malloc(struct mlap2p_rt *rt, void **ptr, size_t size)
{
	struct mlap2p_host *h = mlap2p_host(rt);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct mlap2p_rt_region *r;
	char name[32];
	int ret, device;

	if (!size)
		return -EINVAL;
	size = ALIGN_UP(size, page);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	ret = mlap2p_random(r->secret, sizeof(r->secret));
	if (ret)
		goto out_free;

	pthread_mutex_lock(&rt->lock);
	device = rt->device;
	if (device < 0)
		ret = -ENODEV;
	else if (mlap2p_host_used(rt, device) + size > h->capacity)
		ret = -ENOMEM;
	r->regionId = (h->instance << 20) ^ ++h->nextRegion;
	pthread_mutex_unlock(&rt->lock);
	if (ret)
		goto out_free;

	snprintf(name, sizeof(name), "mlap2p-mla%d", device);
	r->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0) {
		ret = -errno;
		goto out_free;
	}
	/* Reserve now: no SIGBUS on first touch when memory runs short. */
	ret = fallocate(r->fd, 0, 0, (off_t)size);
	if (ret) {
		ret = errno == ENOSPC ? -ENOMEM : -errno;
		goto out_close;
	}
	if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -errno;
		goto out_close;
	}
	r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		ret = -errno;
		goto out_close;
	}
	/* Like the module's VM_DONTCOPY|VM_DONTDUMP. */
	madvise(r->base, size, MADV_DONTFORK);
	madvise(r->base, size, MADV_DONTDUMP);
	r->size = size;
	r->device = device;
	r->owned = 1;
	r->refs = 1;
	ret = mlap2p_rt_mapped(r->base, size);
	if (ret) {
		munmap(r->base, size);
		goto out_close;
	}

	mlap2p_rt_add(rt, r);
	*ptr = r->base;
	return 0;

out_close:
	close(r->fd);
out_free:
	free(r);
	return ret;
}

static int mlap2p_host_free(struct mlap2p_rt *rt, void *ptr)
{
	return mlap2p_rt_put(rt, ptr, 1, mlap2p_host_region_free);
}

static int mlap2p_host_ipc_get(struct mlap2p_rt *rt,
			       struct ncclRtIpcMemHandle *handle, void *ptr)
{
	struct mlap2p_host *h = mlap2p_host(rt);
	struct mlap2p_host_ipc ipc;
	struct mlap2p_rt_region *r;
	int ret;

	memset(&ipc, 0, sizeof(ipc));
	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find(rt, ptr);
	if (!r || !r->owned) {
		ret = -EINVAL;
	} else {
		ret = mlap2p_host_start_exporter(rt);
		ipc.magic = MLAP2P_HOST_IPC_MAGIC;
		ipc.pid = (uint32_t)getpid();
		ipc.instance = h->instance;
		ipc.regionId = r->regionId;
		ipc.size = r->size;
		memcpy(ipc.secret, r->secret, sizeof(ipc.secret));
		ipc.device = (uint32_t)r->device;
	}
	pthread_mutex_unlock(&rt->lock);
	if (ret)
		return ret;
	memcpy(handle, &ipc, sizeof(ipc));
	return 0;
}

/* Ask the exporter for the memfd; 0 and *fd, or -errno. */
static int mlap2p_host_fetch(const struct mlap2p_host_ipc *ipc, int *fd,
			     struct mlap2p_host_rep *rep)
{
	struct timeval tv = { MLAP2P_HOST_IO_TIMEOUT, 0 };
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { rep, sizeof(*rep) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct mlap2p_host_req req;
	struct sockaddr_un sun;
	struct cmsghdr *cm;
	socklen_t len;
	int sock, ret;

	memset(&req, 0, sizeof(req));
	req.magic = MLAP2P_HOST_REQ_MAGIC;
	req.regionId = ipc->regionId;
	memcpy(req.secret, ipc->secret, sizeof(req.secret));

	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	mlap2p_host_sockname(ipc->instance, &sun, &len);
	if (connect(sock, (struct sockaddr *)&sun, len)) {
		/* The exporter is gone: its regions can no longer be opened. */
		ret = errno == ECONNREFUSED ? -ENOENT : -errno;
		goto out;
	}
	if (send(sock, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
		ret = -errno;
		goto out;
	}
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*rep)) {
		ret = errno ? -errno : -EPROTO;
		goto out;
	}
	*fd = -1;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
	ret = rep->status;
	if (!ret && *fd < 0)
		ret = -EPROTO;
	if (ret && *fd >= 0)
		close(*fd);
out:
	close(sock);
	return ret;
}

static int mlap2p_host_ipc_open(struct mlap2p_rt *rt, void **ptr,
				const struct ncclRtIpcMemHandle *handle,
				unsigned int flags)
{
	struct mlap2p_host_ipc ipc;
	struct mlap2p_host_rep rep;
	struct mlap2p_rt_region *r;
	int fd = -1, ret;
	void *base;

	(void)flags;
	memcpy(&ipc, handle, sizeof(ipc));
	if (ipc.magic != MLAP2P_HOST_IPC_MAGIC)
		return -EINVAL;

	base = mlap2p_rt_get_import(rt, ipc.regionId);
	if (base) {
		*ptr = base;
		return 0;
	}

	ret = mlap2p_host_fetch(&ipc, &fd, &rep);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		return -ENOMEM;
	}
	r->base = mmap(NULL, rep.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       0);
	close(fd);
	if (r->base == MAP_FAILED) {
		ret = -errno;
		free(r);
		return ret;
	}
	madvise(r->base, rep.size, MADV_DONTFORK);
	madvise(r->base, rep.size, MADV_DONTDUMP);
	r->size = rep.size;
	r->device = (int)rep.device;
	r->owned = 0;
	r->refs = 1;
	r->regionId = ipc.regionId;
	r->fd = -1;
	memcpy(&r->ipc, handle, sizeof(r->ipc));
	r->ipcValid = 1;

	/* Another thread may have opened it meanwhile: keep one mapping. */
	base = mlap2p_rt_add_import(rt, r);
	if (base != r->base)
		mlap2p_host_region_free(rt, r);
	*ptr = base;
	return 0;
}

static int mlap2p_host_ipc_close(struct mlap2p_rt *rt, void *ptr)
{
	return mlap2p_rt_put(rt, ptr, 0, mlap2p_host_region_free);
}

const struct ncclRt mlap2p_rt_host = {
	.name = "host",
	.init = mlap2p_host_init,
	.fini = mlap2p_host_fini,
	.getInfo = mlap2p_rt_generic_get_info,
	.getDeviceCount = mlap2p_rt_generic_device_count,
	.coreGetDevice = mlap2p_rt_generic_core_device,
	.deviceGetInfo = mlap2p_host_dev_info,
	.memGetInfo = mlap2p_rt_generic_mem_info,
	.pointerGetAttributes = mlap2p_rt_generic_pointer_attr,
	.deviceSynchronize = mlap2p_rt_generic_synchronize,
	.deviceGetP2PAttribute = mlap2p_host_edge,
	.deviceCanAccessPeer = mlap2p_host_can_access,
	.deviceEnablePeerAccess = mlap2p_rt_generic_enable_peer,
	.deviceDisablePeerAccess = mlap2p_rt_generic_disable_peer,
	.ipcCloseMemHandle = mlap2p_host_ipc_close,
	.ipcOpenMemHandle = mlap2p_host_ipc_open,
	.ipcGetMemHandle = mlap2p_host_ipc_get,
	.setDevice = mlap2p_rt_generic_set_device,
	.malloc = mlap2p_host_malloc,
	.free = mlap2p_host_free,
	.getDevice = mlap2p_rt_generic_get_device,
	.memset = mlap2p_rt_generic_memset,
	.memGetAllocationGranularity = mlap2p_rt_generic_granularity,
	.getErrorString = mlap2p_rt_generic_error_string,
	.memcpyPeer = mlap2p_rt_generic_memcpy_peer,
	.memcpy = mlap2p_rt_generic_memcpy,
};
