// SPDX-License-Identifier: MIT
/*
 * The kmod runtime: every slot is an ioctl on /dev/mlap2p (one open file
 * per runtime instance) or a mapping by the module's mmap cookie.  Regions,
 * their lifetime and the locality answers all come from the module; the
 * library only remembers which mapping is which handle.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "rt/backend.h"

struct mlap2p_kmod {
	int fd;
};

static int mlap2p_kmod_fd(struct mlap2p_rt *rt)
{
	return ((struct mlap2p_kmod *)rt->priv)->fd;
}

static int mlap2p_kmod_ioctl(struct mlap2p_rt *rt, unsigned long cmd, void *arg)
{
	int ret;

	do {
		ret = ioctl(mlap2p_kmod_fd(rt), cmd, arg);
	} while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : 0;
}

static int mlap2p_kmod_init(struct mlap2p_rt *rt)
{
	struct mlap2p_kmod *k;
	int ret;

	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->fd = open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (k->fd < 0) {
		ret = -errno;
		WARN("cannot open %s: %s%s", MLAP2P_DEVICE_PATH, strerror(-ret),
		     ret == -EACCES ? " (check the node's permissions, or use MLAP2P_RUNTIME=host)" : "");
		free(k);
		return ret;
	}
	rt->priv = k;
	ret = mlap2p_kmod_ioctl(rt, MLAP2P_IOC_GET_INFO, &rt->info);
	if (ret) {
		WARN("%s: GET_INFO failed: %s", MLAP2P_DEVICE_PATH,
		     strerror(-ret));
		goto out_close;
	}
	if (rt->info.abi_major != MLAP2P_ABI_MAJOR) {
		WARN("%s speaks ABI %u.%u, this library %u.%u: rebuild one of them",
		     MLAP2P_DEVICE_PATH, rt->info.abi_major, rt->info.abi_minor,
		     MLAP2P_ABI_MAJOR, MLAP2P_ABI_MINOR);
		ret = -EPROTO;
		goto out_close;
	}
	if ((rt->info.features & (MLAP2P_FEAT_IPC_HANDLE | MLAP2P_FEAT_LOCALITY)) !=
	    (MLAP2P_FEAT_IPC_HANDLE | MLAP2P_FEAT_LOCALITY)) {
		WARN("%s lacks IPC handles or locality (features %#llx)",
		     MLAP2P_DEVICE_PATH, (unsigned long long)rt->info.features);
		ret = -EOPNOTSUPP;
		goto out_close;
	}
	rt->topo.family = rt->info.family;
	rt->topo.num_devices = rt->info.num_devices;
	rt->topo.cores_per_device = rt->info.cores_per_device;
	rt->topo.lnc = rt->info.lnc;
	rt->topo.pod_type = rt->info.pod_type;
	rt->topo.pod_nodes = rt->info.pod_nodes;
	rt->topo.node = rt->info.node;
	if (mlap2p_topo_validate(&rt->topo)) {
		WARN("%s reports a topology this library does not understand",
		     MLAP2P_DEVICE_PATH);
		ret = -EPROTO;
		goto out_close;
	}
	return 0;

out_close:
	close(k->fd);
	free(k);
	rt->priv = NULL;
	return ret;
}

static void mlap2p_kmod_region_free(struct mlap2p_rt *rt,
				    struct mlap2p_rt_region *r)
{
	struct mlap2p_handle_op op = { .handle = r->kHandle };
	int ret;

	/* The module keeps the pages while any mapping remains. */
	mlap2p_rt_region_unmap(r);
	ret = mlap2p_kmod_ioctl(rt, r->owned ? MLAP2P_IOC_MEM_FREE :
					       MLAP2P_IOC_IPC_CLOSE_HANDLE, &op);
	if (ret)
		WARN("%s handle %u: %s", r->owned ? "MEM_FREE" : "IPC_CLOSE_HANDLE",
		     r->kHandle, strerror(-ret));
	free(r);
}

static void mlap2p_kmod_fini(struct mlap2p_rt *rt)
{
	mlap2p_rt_free_all(rt, mlap2p_kmod_region_free);
	/* Closing the file drops anything the module still holds for us. */
	close(mlap2p_kmod_fd(rt));
	free(rt->priv);
	rt->priv = NULL;
}

static int mlap2p_kmod_dev_info(struct mlap2p_rt *rt, int device,
				struct mlap2p_dev_info *info)
{
	memset(info, 0, sizeof(*info));
	info->device = (__u32)device;
	return mlap2p_kmod_ioctl(rt, MLAP2P_IOC_DEV_INFO, info);
}

static int mlap2p_kmod_peer(struct mlap2p_rt *rt, int core, int peerCore,
			    struct mlap2p_peer_query *q)
{
	if (core < 0 || peerCore < 0)
		return -EINVAL;
	memset(q, 0, sizeof(*q));
	q->core_a = (__u32)core;
	q->core_b = (__u32)peerCore;
	return mlap2p_kmod_ioctl(rt, MLAP2P_IOC_CAN_ACCESS_PEER, q);
}

static int mlap2p_kmod_edge(struct mlap2p_rt *rt, int *edge,
			    int *intermediate, int core, int peerCore)
{
	struct mlap2p_peer_query q;
	int ret;

	ret = mlap2p_kmod_peer(rt, core, peerCore, &q);
	if (ret)
		return ret;
	*edge = (int)q.edge_class;
	if (intermediate)
		*intermediate = q.intermediate_mla == MLAP2P_NO_MLA ?
				-1 : (int)q.intermediate_mla;
	return 0;
}

static int mlap2p_kmod_can_access(struct mlap2p_rt *rt, int *canAccess,
				  int core, int peerCore)
{
	struct mlap2p_peer_query q;
	int ret;

	ret = mlap2p_kmod_peer(rt, core, peerCore, &q);
	if (!ret)
		*canAccess = q.access ? 1 : 0;
	return ret;
}

/* Map @cookie and record the region; on failure the handle is released. */
static int mlap2p_kmod_map(struct mlap2p_rt *rt, struct mlap2p_rt_region *r,
			   uint64_t cookie)
{
	r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       mlap2p_kmod_fd(rt), (off_t)cookie);
	if (r->base == MAP_FAILED) {
		struct mlap2p_handle_op op = { .handle = r->kHandle };
		int ret = -errno;

		mlap2p_kmod_ioctl(rt, r->owned ? MLAP2P_IOC_MEM_FREE :
						 MLAP2P_IOC_IPC_CLOSE_HANDLE,
				  &op);
		return ret;
	}
	return 0;
}

static int mlap2p_kmod_malloc(struct mlap2p_rt *rt, void **ptr, size_t size)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_region_info ri;
	struct mlap2p_rt_region *r;
	int device, ret;

	if (!size)
		return -EINVAL;
	ret = rt->ops->getDevice(rt, &device);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	memset(&a, 0, sizeof(a));
	a.size = size;
	a.device = (__u32)device;
	ret = mlap2p_kmod_ioctl(rt, MLAP2P_IOC_MEM_ALLOC, &a);
	if (ret)
		goto out_free;
	r->kHandle = a.handle;
	r->size = a.alloc_size;
	r->device = device;
	r->owned = 1;
	r->refs = 1;
	r->fd = -1;
	memset(&ri, 0, sizeof(ri));
	ri.handle = a.handle;
	if (rt->info.features & MLAP2P_FEAT_REGION_INFO &&
	    !mlap2p_kmod_ioctl(rt, MLAP2P_IOC_REGION_INFO, &ri))
		r->regionId = ri.region_id;
	ret = mlap2p_kmod_map(rt, r, a.mmap_cookie);
	if (ret)
		goto out_free;
	ret = mlap2p_rt_mapped(r->base, r->size);
	if (ret) {
		struct mlap2p_handle_op op = { .handle = r->kHandle };

		munmap(r->base, r->size);
		mlap2p_kmod_ioctl(rt, MLAP2P_IOC_MEM_FREE, &op);
		goto out_free;
	}

	mlap2p_rt_add(rt, r);
	*ptr = r->base;
	return 0;

out_free:
	free(r);
	return ret;
}

static int mlap2p_kmod_free(struct mlap2p_rt *rt, void *ptr)
{
	return mlap2p_rt_put(rt, ptr, 1, mlap2p_kmod_region_free);
}

static int mlap2p_kmod_ipc_get(struct mlap2p_rt *rt,
			       struct ncclRtIpcMemHandle *handle, void *ptr)
{
	struct mlap2p_rt_region *r;
	struct mlap2p_ipc_get g;
	int ret;

	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find(rt, ptr);
	if (r && r->owned && r->ipcValid) {
		memcpy(handle, &r->ipc, sizeof(*handle));
		pthread_mutex_unlock(&rt->lock);
		return 0;
	}
	memset(&g, 0, sizeof(g));
	if (r && r->owned)
		g.handle = r->kHandle;
	pthread_mutex_unlock(&rt->lock);
	if (!r || !r->owned)
		return -EINVAL;

	ret = mlap2p_kmod_ioctl(rt, MLAP2P_IOC_IPC_GET_HANDLE, &g);
	if (ret)
		return ret;
	memcpy(handle, g.ipc, sizeof(*handle));
	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find(rt, ptr);
	if (r && r->owned) {
		memcpy(&r->ipc, g.ipc, sizeof(r->ipc));
		r->ipcValid = 1;
	}
	pthread_mutex_unlock(&rt->lock);
	return 0;
}

static int mlap2p_kmod_ipc_open(struct mlap2p_rt *rt, void **ptr,
				const struct ncclRtIpcMemHandle *handle,
				unsigned int flags)
{
	struct mlap2p_rt_region *r;
	struct mlap2p_ipc_open o;
	void *base;
	int ret;

	(void)flags;
	memset(&o, 0, sizeof(o));
	memcpy(o.ipc, handle, sizeof(o.ipc));
	ret = mlap2p_kmod_ioctl(rt, MLAP2P_IOC_IPC_OPEN_HANDLE, &o);
	if (ret)
		return ret;

	/* Opened before: keep the one mapping, drop the new handle. */
	base = mlap2p_rt_get_import(rt, o.region_id);
	if (base) {
		struct mlap2p_handle_op op = { .handle = o.handle };

		mlap2p_kmod_ioctl(rt, MLAP2P_IOC_IPC_CLOSE_HANDLE, &op);
		*ptr = base;
		return 0;
	}

	r = calloc(1, sizeof(*r));
	if (!r) {
		struct mlap2p_handle_op op = { .handle = o.handle };

		mlap2p_kmod_ioctl(rt, MLAP2P_IOC_IPC_CLOSE_HANDLE, &op);
		return -ENOMEM;
	}
	r->kHandle = o.handle;
	r->size = o.size;
	r->device = (int)o.device;
	r->regionId = o.region_id;
	r->owned = 0;
	r->refs = 1;
	r->fd = -1;
	memcpy(&r->ipc, handle, sizeof(r->ipc));
	r->ipcValid = 1;
	ret = mlap2p_kmod_map(rt, r, o.mmap_cookie);
	if (ret) {
		free(r);
		return ret;
	}
	/* Another thread may have opened it meanwhile: keep one mapping. */
	base = mlap2p_rt_add_import(rt, r);
	if (base != r->base)
		mlap2p_kmod_region_free(rt, r);
	*ptr = base;
	return 0;
}

static int mlap2p_kmod_ipc_close(struct mlap2p_rt *rt, void *ptr)
{
	return mlap2p_rt_put(rt, ptr, 0, mlap2p_kmod_region_free);
}

const struct ncclRt mlap2p_rt_kmod = {
	.name = "kmod",
	.init = mlap2p_kmod_init,
	.fini = mlap2p_kmod_fini,
	.getInfo = mlap2p_rt_generic_get_info,
	.getDeviceCount = mlap2p_rt_generic_device_count,
	.coreGetDevice = mlap2p_rt_generic_core_device,
	.deviceGetInfo = mlap2p_kmod_dev_info,
	.memGetInfo = mlap2p_rt_generic_mem_info,
	.pointerGetAttributes = mlap2p_rt_generic_pointer_attr,
	.deviceSynchronize = mlap2p_rt_generic_synchronize,
	.deviceGetP2PAttribute = mlap2p_kmod_edge,
	.deviceCanAccessPeer = mlap2p_kmod_can_access,
	.deviceEnablePeerAccess = mlap2p_rt_generic_enable_peer,
	.deviceDisablePeerAccess = mlap2p_rt_generic_disable_peer,
	.ipcCloseMemHandle = mlap2p_kmod_ipc_close,
	.ipcOpenMemHandle = mlap2p_kmod_ipc_open,
	.ipcGetMemHandle = mlap2p_kmod_ipc_get,
	.setDevice = mlap2p_rt_generic_set_device,
	.malloc = mlap2p_kmod_malloc,
	.free = mlap2p_kmod_free,
	.getDevice = mlap2p_rt_generic_get_device,
	.memset = mlap2p_rt_generic_memset,
	.memGetAllocationGranularity = mlap2p_rt_generic_granularity,
	.getErrorString = mlap2p_rt_generic_error_string,
	.memcpyPeer = mlap2p_rt_generic_memcpy_peer,
	.memcpy = mlap2p_rt_generic_memcpy,
};
