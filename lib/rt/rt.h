/* SPDX-License-Identifier: MIT */
/*
 * lib/rt/rt.h: the runtime layer as the layers above it see it: the seed's
 * ncclRt vtable (slot offsets fixed by the seed), one instance per
 * communicator (struct mlap2p_rt), the process-wide pins, and the seed's
 * ncclRt* entry points (lib/rt/rt.c).  Two backends: kmod (/dev/mlap2p,
 * lib/rt/kmod.c) and host (memfd, lib/rt/host.c).
 */
#ifndef MLAP2P_RT_RT_H
#define MLAP2P_RT_RT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/mlap2p.h>
#include "mlap2p/transport.h"
#include "mlap2p_topo.h"

#define CUDA_IPC_MIN		(2UL << 20)	/* regions round up to this */

/*
 * Devices.  "core" is a global logical core (ncclPeerInfo.cudaDev, what
 * ranks run on and what peer access is asked about); "device" is a global
 * MLA id (what memory lives on).  Both as in <linux/mlap2p.h>.
 */

/* The 64-byte IPC handle; it is p2pConnectInfo.devIpc byte for byte. */
struct ncclRtIpcMemHandle {
	unsigned char reserved[MLAP2P_IPC_HANDLE_SIZE];
};

/* What a pointer into a runtime region is (pointerGetAttributes). */
struct ncclRtPointerAttributes {
	void *base;		/* start of the region's mapping */
	size_t size;		/* mapped bytes */
	size_t offset;		/* ptr - base */
	int device;		/* MLA */
	int owned;		/* 1: allocated here; 0: imported */
	uint64_t regionId;	/* unique per region (global with kmod) */
};

enum ncclRtMemcpyKind {
	ncclRtMemcpyHostToHost = 0,
	ncclRtMemcpyHostToDevice = 1,
	ncclRtMemcpyDeviceToHost = 2,
	ncclRtMemcpyDeviceToDevice = 3,
	ncclRtMemcpyDefault = 4,
};

enum mlap2p_rt_kind {
	MLAP2P_RT_KMOD = 1,
	MLAP2P_RT_HOST = 2,
};

struct mlap2p_rt;

/*
 * The seed's runtime vtable.  Every slot returns 0 or -errno and is safe to
 * call from several threads at once.  The offsets the seed gives are
 * asserted below; the other slots fill the gaps.
 */
struct ncclRt {
	const char *name;						/* 0x00 */
	int (*init)(struct mlap2p_rt *rt);				/* 0x08 */
	void (*fini)(struct mlap2p_rt *rt);				/* 0x10 */
	int (*getInfo)(struct mlap2p_rt *rt, struct mlap2p_info *info);	/* 0x18 */
	int (*getDeviceCount)(struct mlap2p_rt *rt, int *count);	/* 0x20 */
	int (*coreGetDevice)(struct mlap2p_rt *rt, int core, int *device); /* 0x28 */
	int (*deviceGetInfo)(struct mlap2p_rt *rt, int device,
			     struct mlap2p_dev_info *info);		/* 0x30 */
	int (*memGetInfo)(struct mlap2p_rt *rt, int device, size_t *free,
			  size_t *total);				/* 0x38 */
	int (*pointerGetAttributes)(struct mlap2p_rt *rt, const void *ptr,
				    struct ncclRtPointerAttributes *attr); /* 0x40 */
	void *reserved;			/* 0x48: keeps the seed's offsets */
	int (*deviceSynchronize)(struct mlap2p_rt *rt);			/* 0x50 */
	/* Edge class (MLAP2P_EDGE_*) and relay MLA (or -1) between cores. */
	int (*deviceGetP2PAttribute)(struct mlap2p_rt *rt, int *edge,
				     int *intermediate, int core,
				     int peerCore);			/* 0x58 */
	int (*deviceCanAccessPeer)(struct mlap2p_rt *rt, int *canAccess,
				   int core, int peerCore);		/* 0x60 */
	int (*deviceEnablePeerAccess)(struct mlap2p_rt *rt, int peerCore,
				      unsigned int flags);		/* 0x68 */
	int (*deviceDisablePeerAccess)(struct mlap2p_rt *rt, int peerCore); /* 0x70 */
	int (*ipcCloseMemHandle)(struct mlap2p_rt *rt, void *ptr);	/* 0x78 */
	int (*ipcOpenMemHandle)(struct mlap2p_rt *rt, void **ptr,
				const struct ncclRtIpcMemHandle *handle,
				unsigned int flags);			/* 0x80 */
	int (*ipcGetMemHandle)(struct mlap2p_rt *rt,
			       struct ncclRtIpcMemHandle *handle, void *ptr); /* 0x88 */
	int (*setDevice)(struct mlap2p_rt *rt, int device);		/* 0x90 */
	int (*malloc)(struct mlap2p_rt *rt, void **ptr, size_t size);	/* 0x98 */
	int (*free)(struct mlap2p_rt *rt, void *ptr);			/* 0xa0 */
	int (*getDevice)(struct mlap2p_rt *rt, int *device);		/* 0xa8 */
	int (*memset)(struct mlap2p_rt *rt, void *ptr, int value, size_t n); /* 0xb0 */
	int (*memGetAllocationGranularity)(struct mlap2p_rt *rt,
					   size_t *granularity);	/* 0xb8 */
	const char *(*getErrorString)(struct mlap2p_rt *rt, int err);	/* 0xc0 */
	int (*memcpyPeer)(struct mlap2p_rt *rt, void *dst, int dstDevice,
			  const void *src, int srcDevice, size_t n);	/* 0xc8 */
	int (*memcpy)(struct mlap2p_rt *rt, void *dst, const void *src,
		      size_t n, int kind);				/* 0xd0 */
};

_Static_assert(offsetof(struct ncclRt, deviceCanAccessPeer) == 0x60, "rt 0x60");
_Static_assert(offsetof(struct ncclRt, deviceEnablePeerAccess) == 0x68, "rt 0x68");
_Static_assert(offsetof(struct ncclRt, ipcOpenMemHandle) == 0x80, "rt 0x80");
_Static_assert(offsetof(struct ncclRt, ipcGetMemHandle) == 0x88, "rt 0x88");
_Static_assert(offsetof(struct ncclRt, malloc) == 0x98, "rt 0x98");
_Static_assert(offsetof(struct ncclRt, free) == 0xa0, "rt 0xa0");
_Static_assert(offsetof(struct ncclRt, memcpy) == 0xd0, "rt 0xd0");

/* The two backends (constant tables). */
extern const struct ncclRt mlap2p_rt_kmod;
extern const struct ncclRt mlap2p_rt_host;

/* One region known to a runtime instance (owned or imported). */
struct mlap2p_rt_region {
	struct mlap2p_rt_region *next;
	void *base;
	size_t size;
	int device;
	int owned;
	int refs;		/* imports: opens of the same region */
	uint64_t regionId;
	struct ncclRtIpcMemHandle ipc;	/* as exported or as opened */
	int ipcValid;
	int user;		/* from mlap2p_mem_alloc: mlap2p_mem_free may free it */
	/* backend fields */
	uint32_t kHandle;	/* kmod: local handle */
	int fd;			/* host: the memfd (owned regions), else -1 */
	unsigned char secret[16]; /* host: what an importer must present */
};

/*
 * One runtime instance.  @lock protects @regions and @device; backends add
 * their own state behind @priv.
 */
struct mlap2p_rt {
	const struct ncclRt *ops;
	enum mlap2p_rt_kind kind;
	struct mlap2p_info info;	/* family, devices, node, limits */
	struct mlap2p_topo topo;	/* the same, for the shared rules */
	pthread_mutex_t lock;
	int device;			/* current device (MLA) */
	struct mlap2p_rt_region *regions;
	void *priv;
};

/*
 * Create a runtime instance: MLAP2P_RUNTIME=kmod|host forces one, else kmod
 * when /dev/mlap2p exists, else host.  0 or -errno (a WARN says why).
 */
int mlap2p_rt_create(struct mlap2p_rt **rt);
void mlap2p_rt_destroy(struct mlap2p_rt *rt);
const char *mlap2p_rt_kind_name(enum mlap2p_rt_kind kind);

/*
 * Process-wide pins.  A raw pointer handed to another rank of the same
 * process (P2P/direct pointer) must not vanish if its owner frees or
 * aborts first, as NCCL's cuMem path re-maps to take a reference.  The
 * backends register every owned mapping (mlap2p_rt_mapped) and release it
 * with mlap2p_rt_unmap, which defers the munmap while pins remain; the
 * last mlap2p_rt_unpin unmaps.  Pins are per process by nature: they guard
 * one address space, not one communicator.
 */
int mlap2p_rt_mapped(void *base, size_t size);
void mlap2p_rt_unmap(void *base, size_t size);
/* Pin the mapping @ptr lies in; its base is returned for the unpin. */
int mlap2p_rt_pin(const void *ptr, void **base);
void mlap2p_rt_unpin(void *base);

/* Region table lookups; call with rt->lock held (more in lib/rt.h). */
struct mlap2p_rt_region *mlap2p_rt_find(struct mlap2p_rt *rt, const void *ptr);
struct mlap2p_rt_region *mlap2p_rt_find_id(struct mlap2p_rt *rt, uint64_t id,
					   int owned);

/*
 * The seed's ncclRt* entry points: dispatch through rt->ops, WARN and
 * stash the errno on failure.
 */
ncclResult_t ncclRtMalloc(struct mlap2p_rt *rt, void **ptr, size_t size);
ncclResult_t ncclRtFree(struct mlap2p_rt *rt, void *ptr);
ncclResult_t ncclRtMemcpy(struct mlap2p_rt *rt, void *dst, const void *src,
			  size_t n, int kind);
ncclResult_t ncclRtMemset(struct mlap2p_rt *rt, void *ptr, int value, size_t n);
ncclResult_t ncclRtIpcGetMemHandle(struct mlap2p_rt *rt,
				   struct ncclRtIpcMemHandle *handle, void *ptr);
ncclResult_t ncclRtIpcOpenMemHandle(struct mlap2p_rt *rt, void **ptr,
				    const struct ncclRtIpcMemHandle *handle,
				    unsigned int flags);
ncclResult_t ncclRtIpcCloseMemHandle(struct mlap2p_rt *rt, void *ptr);
ncclResult_t ncclRtDeviceCanAccessPeer(struct mlap2p_rt *rt, int *canAccess,
				       int core, int peerCore);
ncclResult_t ncclRtDeviceEnablePeerAccess(struct mlap2p_rt *rt, int peerCore,
					  unsigned int flags);
ncclResult_t ncclRtSetDevice(struct mlap2p_rt *rt, int device);
/* ncclRtMalloc then ncclRtMemset(0) (NCCL's ncclCudaCalloc). */
ncclResult_t ncclRtCalloc(struct mlap2p_rt *rt, void **ptr, size_t size);

#endif /* MLAP2P_RT_RT_H */
