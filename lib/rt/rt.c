// SPDX-License-Identifier: MIT
/*
 * The runtime layer: the seed's ncclRt* entry points, dispatched through
 * one struct ncclRt vtable per backend, and the choice of backend.
 *
 *   MLAP2P_RUNTIME=kmod   /dev/mlap2p (fails, saying how to load it, when
 *                         the module is absent)
 *   MLAP2P_RUNTIME=host   memfd regions, locality from the environment
 *   unset or auto         kmod when /dev/mlap2p exists, else host
 *
 * Each communicator owns one instance (struct mlap2p_rt): its file, its
 * regions and its current device.  The vtables themselves are constant.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "rt/backend.h"

const char *mlap2p_rt_kind_name(enum mlap2p_rt_kind kind)
{
	switch (kind) {
	case MLAP2P_RT_KMOD:
		return "kmod";
	case MLAP2P_RT_HOST:
		return "host";
	}
	return "?";
}

static int mlap2p_rt_choose(const struct ncclRt **ops, enum mlap2p_rt_kind *kind)
{
	static const char *const names[] = { "auto", "kmod", "host" };
	int choice, ret;

	ret = mlap2p_env_enum("MLAP2P_RUNTIME", names, ARRAY_SIZE(names), 0,
			      &choice);
	if (ret)
		return ret;
	if (choice == 0)
		choice = access(MLAP2P_DEVICE_PATH, F_OK) ? MLAP2P_RT_HOST :
							     MLAP2P_RT_KMOD;
	if (choice == MLAP2P_RT_KMOD && access(MLAP2P_DEVICE_PATH, F_OK)) {
		WARN("MLAP2P_RUNTIME=kmod but %s does not exist: load the module first (sudo modprobe mlap2p, or sudo insmod mlap2p.ko from the build tree), or use MLAP2P_RUNTIME=host",
		     MLAP2P_DEVICE_PATH);
		return -ENODEV;
	}
	*kind = (enum mlap2p_rt_kind)choice;
	*ops = choice == MLAP2P_RT_KMOD ? &mlap2p_rt_kmod : &mlap2p_rt_host;
	return 0;
}

int mlap2p_rt_create(struct mlap2p_rt **out)
{
	const struct ncclRt *ops;
	enum mlap2p_rt_kind kind;
	struct mlap2p_rt *rt;
	int ret;

	ret = mlap2p_rt_choose(&ops, &kind);
	if (ret)
		return ret;
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->ops = ops;
	rt->kind = kind;
	rt->device = -1;
	pthread_mutex_init(&rt->lock, NULL);
	ret = ops->init(rt);
	if (ret) {
		pthread_mutex_destroy(&rt->lock);
		free(rt);
		return ret;
	}
	INFO(NCCL_INIT, "runtime %s: %s, %u MLAs per node, %u cores per MLA, LNC %u, pod %s x%u, node %u",
	     ops->name, mlap2p_topo_family_name(rt->topo.family),
	     rt->topo.num_devices, rt->topo.cores_per_device, rt->topo.lnc,
	     mlap2p_topo_pod_name(rt->topo.pod_type), rt->topo.pod_nodes,
	     rt->topo.node);
	*out = rt;
	return 0;
}

void mlap2p_rt_destroy(struct mlap2p_rt *rt)
{
	if (!rt)
		return;
	rt->ops->fini(rt);
	pthread_mutex_destroy(&rt->lock);
	free(rt);
}

/* ---- process-wide pins ---- */

struct mlap2p_pin {
	struct mlap2p_pin *next;
	void *base;
	size_t size;
	int refs;		/* pins held by other ranks */
	int orphan;		/* the owner released it: unmap at refs 0 */
};

static pthread_mutex_t mlap2p_pins_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mlap2p_pin *mlap2p_pins;	/* protected by mlap2p_pins_lock */

int mlap2p_rt_mapped(void *base, size_t size)
{
	struct mlap2p_pin *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->base = base;
	p->size = size;
	pthread_mutex_lock(&mlap2p_pins_lock);
	p->next = mlap2p_pins;
	mlap2p_pins = p;
	pthread_mutex_unlock(&mlap2p_pins_lock);
	return 0;
}

/* Unlink the entry of @base if nobody pins it; NULL if it stays. */
static struct mlap2p_pin *mlap2p_pin_take(void *base, bool orphan)
{
	struct mlap2p_pin **pp, *p;

	for (pp = &mlap2p_pins; (p = *pp); pp = &p->next) {
		if (p->base != base)
			continue;
		if (orphan)
			p->orphan = 1;
		if (p->refs || !p->orphan)
			return NULL;
		*pp = p->next;
		return p;
	}
	return NULL;
}

void mlap2p_rt_unmap(void *base, size_t size)
{
	struct mlap2p_pin *p, *q;

	pthread_mutex_lock(&mlap2p_pins_lock);
	for (q = mlap2p_pins; q && q->base != base; q = q->next)
		;
	p = q ? mlap2p_pin_take(base, true) : NULL;
	pthread_mutex_unlock(&mlap2p_pins_lock);
	if (!q) {
		/* Never registered (registration failed): just unmap. */
		munmap(base, size);
	} else if (p) {
		munmap(p->base, p->size);
		free(p);
	}
}

int mlap2p_rt_pin(const void *ptr, void **base)
{
	const char *c = ptr;
	struct mlap2p_pin *p;

	pthread_mutex_lock(&mlap2p_pins_lock);
	for (p = mlap2p_pins; p; p = p->next) {
		if (!p->orphan && c >= (char *)p->base &&
		    c < (char *)p->base + p->size) {
			p->refs++;
			*base = p->base;
			break;
		}
	}
	pthread_mutex_unlock(&mlap2p_pins_lock);
	return p ? 0 : -ENOENT;
}

void mlap2p_rt_unpin(void *base)
{
	struct mlap2p_pin *p, *q;

	pthread_mutex_lock(&mlap2p_pins_lock);
	for (q = mlap2p_pins; q && q->base != base; q = q->next)
		;
	if (q && q->refs)
		q->refs--;
	p = q ? mlap2p_pin_take(base, false) : NULL;
	pthread_mutex_unlock(&mlap2p_pins_lock);
	if (p) {
		munmap(p->base, p->size);
		free(p);
	}
}

/* ---- region table ---- */

struct mlap2p_rt_region *mlap2p_rt_find(struct mlap2p_rt *rt, const void *ptr)
{
	struct mlap2p_rt_region *r;
	const char *p = ptr;

	for (r = rt->regions; r; r = r->next)
		if (p >= (char *)r->base && p < (char *)r->base + r->size)
			return r;
	return NULL;
}

struct mlap2p_rt_region *mlap2p_rt_find_id(struct mlap2p_rt *rt, uint64_t id,
					   int owned)
{
	struct mlap2p_rt_region *r;

	for (r = rt->regions; r; r = r->next)
		if (r->regionId == id && r->owned == owned)
			return r;
	return NULL;
}

static void mlap2p_rt_link(struct mlap2p_rt *rt, struct mlap2p_rt_region *r)
{
	r->next = rt->regions;
	rt->regions = r;
}

static void mlap2p_rt_unlink(struct mlap2p_rt *rt, struct mlap2p_rt_region *r)
{
	struct mlap2p_rt_region **pp;

	for (pp = &rt->regions; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			r->next = NULL;
			return;
		}
	}
}

void mlap2p_rt_add(struct mlap2p_rt *rt, struct mlap2p_rt_region *r)
{
	pthread_mutex_lock(&rt->lock);
	mlap2p_rt_link(rt, r);
	pthread_mutex_unlock(&rt->lock);
}

void *mlap2p_rt_get_import(struct mlap2p_rt *rt, uint64_t id)
{
	struct mlap2p_rt_region *r;
	void *base = NULL;

	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find_id(rt, id, 0);
	if (r) {
		r->refs++;
		base = r->base;
	}
	pthread_mutex_unlock(&rt->lock);
	return base;
}

void *mlap2p_rt_add_import(struct mlap2p_rt *rt, struct mlap2p_rt_region *r)
{
	struct mlap2p_rt_region *first;
	void *base = r->base;

	pthread_mutex_lock(&rt->lock);
	first = mlap2p_rt_find_id(rt, r->regionId, 0);
	if (first) {
		first->refs++;
		base = first->base;
	} else {
		mlap2p_rt_link(rt, r);
	}
	pthread_mutex_unlock(&rt->lock);
	return base;
}

int mlap2p_rt_put(struct mlap2p_rt *rt, void *ptr, int owned,
		  mlap2p_rt_region_free_fn *region_free)
{
	struct mlap2p_rt_region *r, *last = NULL;

	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find(rt, ptr);
	if (!r || !r->owned != !owned || r->base != ptr) {
		pthread_mutex_unlock(&rt->lock);
		return -EINVAL;
	}
	/* An owned region's one reference is its allocation. */
	if (owned || !--r->refs) {
		mlap2p_rt_unlink(rt, r);
		last = r;
	}
	pthread_mutex_unlock(&rt->lock);
	if (last)
		region_free(rt, last);
	return 0;
}

void mlap2p_rt_free_all(struct mlap2p_rt *rt,
			mlap2p_rt_region_free_fn *region_free)
{
	struct mlap2p_rt_region *r;

	while ((r = rt->regions)) {
		mlap2p_rt_unlink(rt, r);
		region_free(rt, r);
	}
}

void mlap2p_rt_region_unmap(struct mlap2p_rt_region *r)
{
	if (r->owned)
		mlap2p_rt_unmap(r->base, r->size);
	else
		munmap(r->base, r->size);
}

/* True if [p, p + n) lies inside one region of @rt. */
static bool mlap2p_rt_covers(struct mlap2p_rt *rt, const void *p, size_t n)
{
	struct mlap2p_rt_region *r;
	bool ok;

	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find(rt, p);
	ok = r && n <= r->size - (size_t)((const char *)p - (char *)r->base);
	pthread_mutex_unlock(&rt->lock);
	return ok;
}

/* ---- slots both backends share ---- */

void mlap2p_rt_info_from_topo(struct mlap2p_rt *rt)
{
	rt->info.family = rt->topo.family;
	rt->info.num_devices = rt->topo.num_devices;
	rt->info.cores_per_device = rt->topo.cores_per_device;
	rt->info.lnc = rt->topo.lnc;
	rt->info.pod_type = rt->topo.pod_type;
	rt->info.pod_nodes = rt->topo.pod_nodes;
	rt->info.node = rt->topo.node;
	rt->info.cores_per_node = mlap2p_topo_cores_per_node(&rt->topo);
}

int mlap2p_rt_generic_get_info(struct mlap2p_rt *rt, struct mlap2p_info *info)
{
	*info = rt->info;
	return 0;
}

int mlap2p_rt_generic_device_count(struct mlap2p_rt *rt, int *count)
{
	*count = (int)mlap2p_topo_total_mlas(&rt->topo);
	return 0;
}

int mlap2p_rt_generic_core_device(struct mlap2p_rt *rt, int core, int *device)
{
	__u32 mla;

	if (core < 0 || mlap2p_topo_core_mla(&rt->topo, (__u32)core, &mla))
		return -EINVAL;
	*device = (int)mla;
	return 0;
}

int mlap2p_rt_generic_mem_info(struct mlap2p_rt *rt, int device,
			       size_t *free, size_t *total)
{
	struct mlap2p_dev_info info;
	int ret;

	ret = rt->ops->deviceGetInfo(rt, device, &info);
	if (ret)
		return ret;
	*total = info.capacity;
	*free = info.capacity - info.used;
	return 0;
}

int mlap2p_rt_generic_pointer_attr(struct mlap2p_rt *rt, const void *ptr,
				   struct ncclRtPointerAttributes *attr)
{
	struct mlap2p_rt_region *r;

	pthread_mutex_lock(&rt->lock);
	r = mlap2p_rt_find(rt, ptr);
	if (r) {
		attr->base = r->base;
		attr->size = r->size;
		attr->offset = (size_t)((const char *)ptr - (char *)r->base);
		attr->device = r->device;
		attr->owned = r->owned;
		attr->regionId = r->regionId;
	}
	pthread_mutex_unlock(&rt->lock);
	return r ? 0 : -ENOENT;
}

/* Device work is synchronous here; a full fence publishes it. */
int mlap2p_rt_generic_synchronize(struct mlap2p_rt *rt)
{
	(void)rt;
	mlap2p_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/*
 * Every region is mapped into the process that uses it, so enabling peer
 * access has nothing to map; it still checks that the peer is reachable.
 */
int mlap2p_rt_generic_enable_peer(struct mlap2p_rt *rt, int peerCore,
				  unsigned int flags)
{
	int device, access;
	int ret;

	if (flags)
		return -EINVAL;
	if (rt->device < 0)
		return -ENODEV;
	ret = rt->ops->coreGetDevice(rt, peerCore, &device);
	if (ret)
		return ret;
	ret = rt->ops->deviceCanAccessPeer(rt, &access,
					   (int)(rt->device *
						 (rt->topo.cores_per_device /
						  rt->topo.lnc)),
					   peerCore);
	if (ret)
		return ret;
	return access ? 0 : -EPERM;
}

int mlap2p_rt_generic_disable_peer(struct mlap2p_rt *rt, int peerCore)
{
	int device;

	return rt->ops->coreGetDevice(rt, peerCore, &device);
}

int mlap2p_rt_generic_set_device(struct mlap2p_rt *rt, int device)
{
	if (device < 0 || device >= (int)mlap2p_topo_total_mlas(&rt->topo))
		return -EINVAL;
	pthread_mutex_lock(&rt->lock);
	rt->device = device;
	pthread_mutex_unlock(&rt->lock);
	return 0;
}

int mlap2p_rt_generic_get_device(struct mlap2p_rt *rt, int *device)
{
	pthread_mutex_lock(&rt->lock);
	*device = rt->device;
	pthread_mutex_unlock(&rt->lock);
	return *device < 0 ? -ENODEV : 0;
}

int mlap2p_rt_generic_memset(struct mlap2p_rt *rt, void *ptr, int value,
			     size_t n)
{
	if (!mlap2p_rt_covers(rt, ptr, n))
		return -EFAULT;
	memset(ptr, value, n);
	mlap2p_fence(__ATOMIC_RELEASE);
	return 0;
}

int mlap2p_rt_generic_granularity(struct mlap2p_rt *rt, size_t *granularity)
{
	(void)rt;
	*granularity = CUDA_IPC_MIN;
	return 0;
}

const char *mlap2p_rt_generic_error_string(struct mlap2p_rt *rt, int err)
{
	(void)rt;
	return mlap2p_strerror(err);
}

int mlap2p_rt_generic_memcpy_peer(struct mlap2p_rt *rt, void *dst,
				  int dstDevice, const void *src,
				  int srcDevice, size_t n)
{
	struct ncclRtPointerAttributes a;

	if (mlap2p_rt_generic_pointer_attr(rt, dst, &a) || a.device != dstDevice)
		return -EFAULT;
	if (mlap2p_rt_generic_pointer_attr(rt, src, &a) || a.device != srcDevice)
		return -EFAULT;
	return mlap2p_rt_generic_memcpy(rt, dst, src, n,
					ncclRtMemcpyDeviceToDevice);
}

/*
 * A real copy.  Device-side ends must lie inside one region of this
 * runtime instance: a mirror aimed at the wrong place fails here rather
 * than scribbling on the heap.  The release fence makes the copy visible
 * to whoever then reads the device memory.
 */
int mlap2p_rt_generic_memcpy(struct mlap2p_rt *rt, void *dst, const void *src,
			     size_t n, int kind)
{
	bool dstDev = kind == ncclRtMemcpyHostToDevice ||
		      kind == ncclRtMemcpyDeviceToDevice;
	bool srcDev = kind == ncclRtMemcpyDeviceToHost ||
		      kind == ncclRtMemcpyDeviceToDevice;

	if (kind < ncclRtMemcpyHostToHost || kind > ncclRtMemcpyDefault)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (!dst || !src)
		return -EFAULT;
	if (dstDev && !mlap2p_rt_covers(rt, dst, n))
		return -EFAULT;
	if (srcDev && !mlap2p_rt_covers(rt, src, n))
		return -EFAULT;
	memmove(dst, src, n);
	mlap2p_fence(__ATOMIC_RELEASE);
	return 0;
}

/* ---- the seed's ncclRt* entry points ---- */

static ncclResult_t mlap2p_rt_result(const char *what, int ret)
{
	if (!ret)
		return ncclSuccess;
	mlap2p_errno_stash(ret);
	WARN("%s failed: %s", what, mlap2p_strerror(ret));
	return ret == -EINVAL ? ncclInvalidArgument : ncclUnhandledCudaError;
}

ncclResult_t ncclRtMalloc(struct mlap2p_rt *rt, void **ptr, size_t size)
{
	char what[64];

	snprintf(what, sizeof(what), "ncclRtMalloc(%zu)", size);
	return mlap2p_rt_result(what, rt->ops->malloc(rt, ptr, size));
}

ncclResult_t ncclRtFree(struct mlap2p_rt *rt, void *ptr)
{
	return mlap2p_rt_result("ncclRtFree", rt->ops->free(rt, ptr));
}

ncclResult_t ncclRtMemcpy(struct mlap2p_rt *rt, void *dst, const void *src,
			  size_t n, int kind)
{
	return mlap2p_rt_result("ncclRtMemcpy",
				rt->ops->memcpy(rt, dst, src, n, kind));
}

ncclResult_t ncclRtMemset(struct mlap2p_rt *rt, void *ptr, int value, size_t n)
{
	return mlap2p_rt_result("ncclRtMemset",
				rt->ops->memset(rt, ptr, value, n));
}

ncclResult_t ncclRtIpcGetMemHandle(struct mlap2p_rt *rt,
				   struct ncclRtIpcMemHandle *handle, void *ptr)
{
	return mlap2p_rt_result("ncclRtIpcGetMemHandle",
				rt->ops->ipcGetMemHandle(rt, handle, ptr));
}

ncclResult_t ncclRtIpcOpenMemHandle(struct mlap2p_rt *rt, void **ptr,
				    const struct ncclRtIpcMemHandle *handle,
				    unsigned int flags)
{
	return mlap2p_rt_result("ncclRtIpcOpenMemHandle",
				rt->ops->ipcOpenMemHandle(rt, ptr, handle,
							  flags));
}

ncclResult_t ncclRtIpcCloseMemHandle(struct mlap2p_rt *rt, void *ptr)
{
	return mlap2p_rt_result("ncclRtIpcCloseMemHandle",
				rt->ops->ipcCloseMemHandle(rt, ptr));
}

ncclResult_t ncclRtDeviceCanAccessPeer(struct mlap2p_rt *rt, int *canAccess,
				       int core, int peerCore)
{
	return mlap2p_rt_result("ncclRtDeviceCanAccessPeer",
				rt->ops->deviceCanAccessPeer(rt, canAccess,
							     core, peerCore));
}

ncclResult_t ncclRtDeviceEnablePeerAccess(struct mlap2p_rt *rt, int peerCore,
					  unsigned int flags)
{
	return mlap2p_rt_result("ncclRtDeviceEnablePeerAccess",
				rt->ops->deviceEnablePeerAccess(rt, peerCore,
								flags));
}

ncclResult_t ncclRtSetDevice(struct mlap2p_rt *rt, int device)
{
	return mlap2p_rt_result("ncclRtSetDevice",
				rt->ops->setDevice(rt, device));
}

/*
 * Both backends' malloc hands out pages no process has seen: a new memfd's,
 * or the module's, which it zeroes.  Clearing them again only faulted in
 * every page of every FIFO at connect (half the CPU time of a 64-rank
 * ring connect, bench/boot_scale.c).
 */
ncclResult_t ncclRtCalloc(struct mlap2p_rt *rt, void **ptr, size_t size)
{
	return ncclRtMalloc(rt, ptr, size);
}
