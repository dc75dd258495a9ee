/* SPDX-License-Identifier: MIT */
/*
 * lib/rt.h: what the two runtime backends (rt_kmod.c, rt_host.c) share
 * with lib/rt.c.  Nothing outside the runtime layer includes this.
 */
#ifndef MLAP2P_RT_BACKEND_H
#define MLAP2P_RT_BACKEND_H

#include "log.h"
#include "param.h"
#include "rt/rt.h"
#include "util.h"

/* Slots whose behaviour is the same for both backends (lib/rt.c). */
int mlap2p_rt_generic_get_info(struct mlap2p_rt *rt, struct mlap2p_info *info);
int mlap2p_rt_generic_device_count(struct mlap2p_rt *rt, int *count);
int mlap2p_rt_generic_core_device(struct mlap2p_rt *rt, int core, int *device);
/* From the slot deviceGetInfo. */
int mlap2p_rt_generic_mem_info(struct mlap2p_rt *rt, int device,
			       size_t *free, size_t *total);
int mlap2p_rt_generic_pointer_attr(struct mlap2p_rt *rt, const void *ptr,
				   struct ncclRtPointerAttributes *attr);
int mlap2p_rt_generic_synchronize(struct mlap2p_rt *rt);
int mlap2p_rt_generic_enable_peer(struct mlap2p_rt *rt, int peerCore,
				  unsigned int flags);
int mlap2p_rt_generic_disable_peer(struct mlap2p_rt *rt, int peerCore);
int mlap2p_rt_generic_set_device(struct mlap2p_rt *rt, int device);
int mlap2p_rt_generic_get_device(struct mlap2p_rt *rt, int *device);
int mlap2p_rt_generic_memset(struct mlap2p_rt *rt, void *ptr, int value,
			     size_t n);
int mlap2p_rt_generic_granularity(struct mlap2p_rt *rt, size_t *granularity);
const char *mlap2p_rt_generic_error_string(struct mlap2p_rt *rt, int err);
int mlap2p_rt_generic_memcpy_peer(struct mlap2p_rt *rt, void *dst,
				  int dstDevice, const void *src,
				  int srcDevice, size_t n);
int mlap2p_rt_generic_memcpy(struct mlap2p_rt *rt, void *dst, const void *src,
			     size_t n, int kind);

/*
 * The region table as both backends use it; each takes rt->lock itself.
 *
 * mlap2p_rt_add() links a new region.  mlap2p_rt_get_import() takes one
 * more reference on the import of region @id if this instance has it open
 * already and returns its base, else NULL.  mlap2p_rt_add_import() links
 * @r, an import just mapped, and returns @r->base, unless another thread
 * opened the same region meanwhile: then that import gets the reference,
 * its base is returned, and the caller frees @r (which was not linked).
 *
 * mlap2p_rt_put() drops the reference a free (@owned) or an IPC close
 * (!@owned) holds on the region that starts at @ptr: -EINVAL when there is
 * none, else 0, having unlinked the region and passed it to the backend's
 * @region_free (outside rt->lock) if that was its last reference.
 * mlap2p_rt_free_all() does the same for every region, at fini (no other
 * thread uses @rt any more).
 *
 * mlap2p_rt_region_unmap() unmaps a region the table no longer holds: an
 * owned one through the pins (mlap2p_rt_unmap), an import at once.
 */
typedef void mlap2p_rt_region_free_fn(struct mlap2p_rt *rt,
				      struct mlap2p_rt_region *r);

void mlap2p_rt_add(struct mlap2p_rt *rt, struct mlap2p_rt_region *r);
void *mlap2p_rt_get_import(struct mlap2p_rt *rt, uint64_t id);
void *mlap2p_rt_add_import(struct mlap2p_rt *rt, struct mlap2p_rt_region *r);
int mlap2p_rt_put(struct mlap2p_rt *rt, void *ptr, int owned,
		  mlap2p_rt_region_free_fn *region_free);
void mlap2p_rt_free_all(struct mlap2p_rt *rt,
			mlap2p_rt_region_free_fn *region_free);
void mlap2p_rt_region_unmap(struct mlap2p_rt_region *r);

/* Host-runtime topology from MLAP2P_FAMILY, ... (lib/rt_host.c). */
int mlap2p_rt_host_topo_env(struct mlap2p_topo *topo, uint64_t *capacity);

/* Fill rt->info's topology fields from rt->topo. */
void mlap2p_rt_info_from_topo(struct mlap2p_rt *rt);

#endif /* MLAP2P_RT_BACKEND_H */
