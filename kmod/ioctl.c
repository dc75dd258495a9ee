// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p ioctls: one function per command, each copy in, validate, act,
 * copy out.  Every user-space copy of the module lives in this file and
 * runs with no mlap2p lock held.
 *
 * Results that create a handle or an export are copied out before they
 * are committed, so a bad output pointer (-EFAULT) leaves no handle, no
 * region, no export and no counter behind.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "mlap2p.h"

static_assert(sizeof(struct mlap2p_info) == 104);
static_assert(sizeof(struct mlap2p_dev_info) == 104);
static_assert(sizeof(struct mlap2p_mem_alloc) == 56);
static_assert(sizeof(struct mlap2p_handle_op) == 16);
static_assert(sizeof(struct mlap2p_ipc_get) == 88);
static_assert(sizeof(struct mlap2p_ipc_open) == 120);
static_assert(sizeof(struct mlap2p_peer_query) == 48);
static_assert(sizeof(struct mlap2p_region_info) == 72);
static_assert(sizeof(struct mlap2p_ipc_blob) == MLAP2P_IPC_HANDLE_SIZE);

static bool mlap2p_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

static int mlap2p_ioctl_get_info(void __user *argp)
{
	struct mlap2p_info info = {};
	struct mlap2p_config c;

	mlap2p_config_get(&c);
	info.abi_major = MLAP2P_ABI_MAJOR;
	info.abi_minor = MLAP2P_ABI_MINOR;
	info.features = mlap2p_features();
	info.family = c.topo.family;
	info.num_devices = c.topo.num_devices;
	info.cores_per_device = c.topo.cores_per_device;
	info.lnc = c.topo.lnc;
	info.pod_type = c.topo.pod_type;
	info.pod_nodes = c.topo.pod_nodes;
	info.node = c.topo.node;
	info.cores_per_node = mlap2p_topo_cores_per_node(&c.topo);
	info.dev_capacity = c.dev_capacity;
	info.max_bytes_per_file = mlap2p_limit_bytes();
	info.max_regions_per_file = mlap2p_limit_regions();
	info.topo_generation = c.generation;

	if (copy_to_user(argp, &info, sizeof(info)))
		return -EFAULT;
	return 0;
}

static int mlap2p_ioctl_dev_info(void __user *argp)
{
	struct mlap2p_dev_info arg;
	struct mlap2p_topo_dev dev;
	int ret;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || !mlap2p_zero(arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;

	ret = mlap2p_dev_query(arg.device, &dev, &arg.capacity, &arg.used);
	if (ret)
		return ret;
	arg.node = dev.node;
	arg.local_index = dev.local_index;
	arg.peer_mla = dev.peer_mla;
	arg.torus_x = dev.torus_x;
	arg.torus_y = dev.torus_y;
	arg.num_neighbours = min_t(u32, dev.num_neighbours,
				   MLAP2P_MAX_NEIGHBOURS);
	memset(arg.neighbours, 0, sizeof(arg.neighbours));
	memcpy(arg.neighbours, dev.neighbours,
	       arg.num_neighbours * sizeof(arg.neighbours[0]));
	arg.first_core = dev.first_core;
	arg.num_cores = dev.num_cores;

	if (copy_to_user(argp, &arg, sizeof(arg)))
		return -EFAULT;
	return 0;
}

static int mlap2p_ioctl_mem_alloc(struct mlap2p_file *f, void __user *argp)
{
	struct mlap2p_mem_alloc arg;
	struct mlap2p_handle *h;
	struct mlap2p_region *r;
	struct mlap2p_config c;
	u64 size;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if ((arg.flags & ~MLAP2P_MEM_F_ALL) || arg.pad ||
	    !mlap2p_zero(arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;
	if (!arg.size)
		return -EINVAL;
	/* Bad arguments before limits; creating the region checks again. */
	mlap2p_config_get(&c);
	if (arg.device >= mlap2p_topo_total_mlas(&c.topo))
		return -EINVAL;
	/* No MLA holds more than MLAP2P_CAPACITY_MAX; also bars overflow. */
	if (arg.size > MLAP2P_CAPACITY_MAX)
		return -ENOSPC;
	size = PAGE_ALIGN(arg.size);

	h = mlap2p_handle_reserve(f, size);
	if (IS_ERR(h))
		return PTR_ERR(h);
	r = mlap2p_region_create(arg.device, size, arg.flags);
	if (IS_ERR(r)) {
		mlap2p_handle_cancel(f, h);
		return PTR_ERR(r);
	}
	h->region = r;
	h->owned = true;

	arg.handle = h->id;
	arg.alloc_size = size;
	arg.mmap_cookie = mlap2p_cookie(h->id);
	if (copy_to_user(argp, &arg, sizeof(arg))) {
		mlap2p_handle_cancel(f, h);
		mlap2p_region_put(r);
		return -EFAULT;
	}
	mlap2p_region_publish(r);
	mlap2p_handle_commit(f, h);
	return 0;
}

/* MEM_FREE (@owned) and IPC_CLOSE_HANDLE. */
static int mlap2p_ioctl_handle_op(struct mlap2p_file *f, void __user *argp,
				  bool owned)
{
	struct mlap2p_handle_op arg;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || arg.reserved)
		return -EINVAL;
	return mlap2p_handle_remove(f, arg.handle, owned);
}

static int mlap2p_ioctl_ipc_get(struct mlap2p_file *f, void __user *argp)
{
	struct mlap2p_ipc_blob blob;
	struct mlap2p_ipc_get arg;
	struct mlap2p_region *r;
	struct mlap2p_handle h;
	int ret;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if ((arg.flags & ~MLAP2P_IPC_F_ALL) ||
	    !mlap2p_zero(arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;

	r = mlap2p_handle_get(f, arg.handle, &h);
	if (IS_ERR(r))
		return PTR_ERR(r);
	ret = h.owned ? mlap2p_region_export_begin(r, arg.flags, &blob) :
			-EINVAL;
	if (ret)
		goto out_put;

	/* Copied out before the export takes effect: EFAULT changes nothing. */
	memcpy(arg.ipc, &blob, sizeof(arg.ipc));
	if (copy_to_user(argp, &arg, sizeof(arg))) {
		mlap2p_region_export_abort(r);
		ret = -EFAULT;
		goto out_put;
	}
	ret = mlap2p_region_export_commit(r, arg.flags);
out_put:
	mlap2p_region_put(r);
	return ret;
}

static int mlap2p_ioctl_ipc_open(struct mlap2p_file *f, void __user *argp)
{
	struct mlap2p_ipc_blob blob;
	struct mlap2p_ipc_open arg;
	struct mlap2p_handle *h;
	struct mlap2p_region *r;
	bool rdonly = false;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || !mlap2p_zero(arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;

	h = mlap2p_handle_reserve(f, 0);
	if (IS_ERR(h))
		return PTR_ERR(h);
	memcpy(&blob, arg.ipc, sizeof(blob));
	r = mlap2p_region_open(&blob, &rdonly);
	if (IS_ERR(r)) {
		mlap2p_handle_cancel(f, h);
		return PTR_ERR(r);
	}
	h->region = r;
	h->rdonly = rdonly;

	arg.handle = h->id;
	arg.device = r->device;
	arg.access = rdonly;
	arg.size = r->size;
	arg.mmap_cookie = mlap2p_cookie(h->id);
	arg.region_id = r->id;
	if (copy_to_user(argp, &arg, sizeof(arg))) {
		mlap2p_handle_cancel(f, h);
		mlap2p_region_put(r);
		return -EFAULT;
	}
	mlap2p_region_import(r);
	mlap2p_handle_commit(f, h);
	return 0;
}

static int mlap2p_ioctl_can_access_peer(void __user *argp)
{
	struct mlap2p_peer_query arg;
	struct mlap2p_config c;
	int ret;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || !mlap2p_zero(arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;

	mlap2p_config_get(&c);
	ret = mlap2p_topo_core_mla(&c.topo, arg.core_a, &arg.mla_a);
	if (!ret)
		ret = mlap2p_topo_core_mla(&c.topo, arg.core_b, &arg.mla_b);
	if (!ret)
		ret = mlap2p_topo_core_edge(&c.topo, arg.core_a, arg.core_b,
					    &arg.edge_class,
					    &arg.intermediate_mla);
	if (ret)
		return ret;
	arg.access = arg.edge_class != MLAP2P_EDGE_NONE;

	if (copy_to_user(argp, &arg, sizeof(arg)))
		return -EFAULT;
	return 0;
}

static int mlap2p_ioctl_region_info(struct mlap2p_file *f,
				    void __user *argp)
{
	struct mlap2p_region_info arg;
	struct mlap2p_region_view v;
	struct mlap2p_region *r;
	struct mlap2p_handle h;

	if (copy_from_user(&arg, argp, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || !mlap2p_zero(arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;

	r = mlap2p_handle_get(f, arg.handle, &h);
	if (IS_ERR(r))
		return PTR_ERR(r);
	mlap2p_region_view(r, &v);
	mlap2p_region_put(r);

	arg.kind = h.owned ? MLAP2P_REGION_OWNED : MLAP2P_REGION_IMPORTED;
	arg.device = v.device;
	arg.size = v.size;
	arg.mmap_cookie = mlap2p_cookie(h.id);
	arg.region_id = v.id;
	arg.importers = v.importers;
	arg.mappings = v.mappings;
	arg.access = h.rdonly;
	arg.pad = 0;

	if (copy_to_user(argp, &arg, sizeof(arg)))
		return -EFAULT;
	return 0;
}

long mlap2p_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct mlap2p_file *f = file->private_data;
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case MLAP2P_IOC_GET_INFO:
		return mlap2p_ioctl_get_info(argp);
	case MLAP2P_IOC_DEV_INFO:
		return mlap2p_ioctl_dev_info(argp);
	case MLAP2P_IOC_MEM_ALLOC:
		return mlap2p_ioctl_mem_alloc(f, argp);
	case MLAP2P_IOC_MEM_FREE:
		return mlap2p_ioctl_handle_op(f, argp, true);
	case MLAP2P_IOC_IPC_GET_HANDLE:
		return mlap2p_ioctl_ipc_get(f, argp);
	case MLAP2P_IOC_IPC_OPEN_HANDLE:
		return mlap2p_ioctl_ipc_open(f, argp);
	case MLAP2P_IOC_IPC_CLOSE_HANDLE:
		return mlap2p_ioctl_handle_op(f, argp, false);
	case MLAP2P_IOC_CAN_ACCESS_PEER:
		return mlap2p_ioctl_can_access_peer(argp);
	case MLAP2P_IOC_REGION_INFO:
		return mlap2p_ioctl_region_info(f, argp);
	default:
		return -ENOTTY;
	}
}
