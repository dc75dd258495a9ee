/* SPDX-License-Identifier: MIT */
/*
 * lib/internal.h: libmlap2p's private interface, shared by every lib/ source file.
 *
 * Layers, bottom up (docs/architecture.md has the picture):
 *
 *   runtime   struct ncclRt, the seed's ncclRt* vtable (slot offsets fixed
 *             by the seed), with two backends: kmod (/dev/mlap2p) and host
 *             (memfd).  One instance (struct mlap2p_rt) per communicator.
 *   bootstrap TCP rendezvous through the unique id, all-gather of
 *             ncclPeerInfo, tagged point-to-point messages, a barrier and
 *             the remote-allocation service used by relays.
 *   topology  edge classes between ranks (common/mlap2p_topo.c rules,
 *             answered by the runtime), P2P level, rings.
 *   transport ncclTransports[] = { p2pTransport, netTransport },
 *             selectTransport, ncclTransportP2pConnect/Setup, teardown.
 *
 * Conventions.  Functions named after the seed (ncclX, p2pX, bootstrapX)
 * return ncclResult_t and log with WARN/INFO; everything named mlap2p_x
 * returns 0 or -errno.  A -errno that crosses into ncclResult_t code is kept
 * with mlap2p_errno_stash() so the public API can return it unchanged.
 *
 * This header is stable: fields are only ever added.
 */
#ifndef MLAP2P_INTERNAL_H
#define MLAP2P_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/mlap2p.h>
#include "mlap2p/mlap2p.h"
#include "mlap2p/transport.h"
#include "mlap2p_topo.h"

#define MLAP2P_EXPORT		__attribute__((visibility("default")))

#define MAXCHANNELS		32	/* channel masks are uint32_t */
#define CUDA_IPC_MIN		(2UL << 20)	/* P2P FIFOs round up to this */

/* Default FIFO sizes, as NCCL 2.7 (NCCL_LL_BUFFSIZE, ...). */
#define DEFAULT_LL_BUFFSIZE	(8 * 512 * NCCL_STEPS * 16)
#define DEFAULT_LL128_BUFFSIZE	(120 * 640 * NCCL_STEPS * 8)
#define DEFAULT_BUFFSIZE	(4 << 20)

/*
 * A memory fence.  TSan does not model fences (GCC refuses them under
 * -fsanitize=thread), so there it is a compiler barrier only; every
 * cross-thread hand-off in the library is also an atomic store/load pair,
 * which TSan does see.
 */
#ifdef __SANITIZE_THREAD__
#define mlap2p_fence(order)	__asm__ __volatile__("" ::: "memory")
#else
#define mlap2p_fence(order)	__atomic_thread_fence(order)
#endif

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#endif
#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#define ALIGN_UP(x, a)		(((x) + (a) - 1) / (a) * (a))

/* ------------------------------------------------------------------ */
/* Logging (lib/log.c): NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE */
/* ------------------------------------------------------------------ */

enum ncclDebugLogLevel {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
};

/* Subsystems (NCCL_DEBUG_SUBSYS), NCCL's bit values. */
#define NCCL_INIT	0x1
#define NCCL_COLL	0x2
#define NCCL_P2P	0x4
#define NCCL_SHM	0x8
#define NCCL_NET	0x10
#define NCCL_GRAPH	0x20
#define NCCL_TUNING	0x40
#define NCCL_ENV	0x80
#define NCCL_ALLOC	0x100
#define NCCL_CALL	0x200
#define NCCL_PROXY	0x400
#define NCCL_BOOTSTRAP	0x1000
#define NCCL_ALL	(~0UL)

/* True when a message of @level in @subsys would be printed. */
bool mlap2p_log_enabled(int level, unsigned long subsys);
/*
 * Format and print one line ("host:pid:tid [core] NCCL INFO ..."), when
 * enabled.  A WARN is also kept, printed or not, as the calling thread's
 * last error (mlap2p_last_error()).
 */
void mlap2p_log(int level, unsigned long subsys, const char *file, int line,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The core shown in the line prefix, per thread ([core]); -1 hides it. */
void mlap2p_log_set_core(int core);

#define WARN(...) \
	mlap2p_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(flags, ...)						\
	do {								\
		if (mlap2p_log_enabled(NCCL_LOG_INFO, (flags)))		\
			mlap2p_log(NCCL_LOG_INFO, (flags), __FILE__,	\
				   __LINE__, __VA_ARGS__);		\
	} while (0)
#ifdef MLAP2P_ENABLE_TRACE
#define TRACE(flags, ...)						\
	do {								\
		if (mlap2p_log_enabled(NCCL_LOG_TRACE, (flags)))	\
			mlap2p_log(NCCL_LOG_TRACE, (flags), __FILE__,	\
				   __LINE__, __VA_ARGS__);		\
	} while (0)
#else
/* Compiled out, but the arguments are still type-checked and "used". */
#define TRACE(flags, ...)						\
	do {								\
		if (0)							\
			mlap2p_log(NCCL_LOG_TRACE, (flags), __FILE__,	\
				   __LINE__, __VA_ARGS__);		\
	} while (0)
#endif

/*
 * The -errno behind the last failing ncclResult_t of this thread; set where
 * an errno is turned into an ncclResult_t, read (and cleared) by the API.
 */
void mlap2p_errno_stash(int err);
int mlap2p_errno_take(ncclResult_t res);
/* Store @err (< 0) into errno and return it; 0 passes through. */
int mlap2p_err(int err);

/* NCCL's checks: on failure, log the call chain at INFO and return. */
#define NCCLCHECK(call)							\
	do {								\
		ncclResult_t res__ = (call);				\
		if (res__ != ncclSuccess && res__ != ncclInProgress) {	\
			INFO(NCCL_ALL, "%s:%d -> %d", __FILE__,		\
			     __LINE__, res__);				\
			return res__;					\
		}							\
	} while (0)
#define NCCLCHECKGOTO(call, res, label)					\
	do {								\
		(res) = (call);						\
		if ((res) != ncclSuccess && (res) != ncclInProgress) {	\
			INFO(NCCL_ALL, "%s:%d -> %d", __FILE__,		\
			     __LINE__, (res));				\
			goto label;					\
		}							\
	} while (0)

/* ------------------------------------------------------------------ */
/* Environment (lib/param.c)                                          */
/* ------------------------------------------------------------------ */

/*
 * Each reads one variable.  Unset (or empty): *out = @def, 0.  A value that
 * does not parse or is out of range: a WARN naming the variable, -EINVAL.
 * Settings are logged once per process under NCCL_ENV.
 */
int mlap2p_env_int(const char *name, long min, long max, long def, long *out);
/* Byte sizes accept K, M, G suffixes (powers of 1024). */
int mlap2p_env_size(const char *name, uint64_t min, uint64_t max,
		    uint64_t def, uint64_t *out);
/* One of @names (case-insensitive), or its index as a number. */
int mlap2p_env_enum(const char *name, const char *const *names, int nr,
		    int def, int *out);
/* Timeouts in milliseconds: "500ms", "5s", "2" (seconds), "0" = forever. */
int mlap2p_env_timeout(const char *name, long def_ms, long *out_ms);

/* Per communicator snapshot of the environment, taken at init. */
struct mlap2p_params {
	int p2pDisable;			/* NCCL_P2P_DISABLE */
	int p2pLevel;			/* NCCL_P2P_LEVEL, MLAP2P_EDGE_* cap */
	int p2pReadEnable;		/* NCCL_P2P_READ_ENABLE */
	int buffSizes[NCCL_NUM_PROTOCOLS]; /* NCCL_LL/LL128_BUFFSIZE, NCCL_BUFFSIZE */
	long bootstrapTimeoutMs;	/* MLAP2P_BOOTSTRAP_TIMEOUT, 0 = none */
	char *rings;			/* NCCL_RINGS (strdup) or NULL */
};

int mlap2p_params_load(struct mlap2p_params *p);
void mlap2p_params_free(struct mlap2p_params *p);

/* ------------------------------------------------------------------ */
/* Runtime layer (lib/rt.c, rt_kmod.c, rt_host.c)                     */
/* ------------------------------------------------------------------ */

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
	/* Counters of the region @ptr lies in (importers, mappings). */
	int (*regionGetInfo)(struct mlap2p_rt *rt, const void *ptr,
			     struct mlap2p_region_info *info);		/* 0x48 */
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
ncclResult_t ncclRtPointerGetAttributes(struct mlap2p_rt *rt, const void *ptr,
					struct ncclRtPointerAttributes *attr);
/* ncclRtMalloc then ncclRtMemset(0) (NCCL's ncclCudaCalloc). */
ncclResult_t ncclRtCalloc(struct mlap2p_rt *rt, void **ptr, size_t size);

/* ------------------------------------------------------------------ */
/* Bootstrap (lib/bootstrap.c)                                        */
/* ------------------------------------------------------------------ */

struct mlap2p_bootstrap;
struct mlap2p_import;
struct ncclComm;

/*
 * Tags.  Values with MLAP2P_TAG_CORE set belong to the framework; other
 * users (the data plane) use tags below it.  A message matches on
 * (peer, tag); unmatched ones queue until received.
 */
#define MLAP2P_TAG_CORE		0x40000000

/* Fill a unique id: random magic plus the root's listening address. */
int mlap2p_bootstrap_get_unique_id(struct mlap2p_unique_id *id);
/*
 * Join rank @comm->rank of @comm->nRanks: rendezvous through the id's root,
 * all-gather @comm->peerInfo (own entry filled by the caller), start the
 * service.  Errors name the rank that never came.
 */
int mlap2p_bootstrap_init(struct ncclComm *comm,
			  const struct mlap2p_unique_id *id);
void mlap2p_bootstrap_close(struct mlap2p_bootstrap *state);
/* The communicator @state belongs to. */
struct ncclComm *mlap2p_bootstrap_comm(struct mlap2p_bootstrap *state);
/* Wake every wait of @state with -ECANCELED (abort, any thread). */
void mlap2p_bootstrap_abort(struct mlap2p_bootstrap *state);

/* Seed-named helpers; ncclResult_t and WARNs naming the peer. */
ncclResult_t bootstrapSend(struct mlap2p_bootstrap *state, int peer, int tag,
			   const void *data, int size);
ncclResult_t bootstrapRecv(struct mlap2p_bootstrap *state, int peer, int tag,
			   void *data, int size);
ncclResult_t bootstrapBarrier(struct mlap2p_bootstrap *state, int tag);
/*
 * bootstrapRecv for the connect path: also gives up (-ECONNABORTED) as
 * soon as @peer has posted MLAP2P_TAG_FAILED, i.e. failed its own side.
 */
ncclResult_t bootstrapRecvSetup(struct mlap2p_bootstrap *state, int peer,
				int tag, void *data, int size);
/* All-gather @size bytes per rank; rank r's slot at allData + r * size. */
ncclResult_t bootstrapAllGather(struct mlap2p_bootstrap *state, void *allData,
				int size);
/*
 * Ask rank @rank's service to allocate @size bytes on its own device.  It
 * returns an id for bootstrapRemFree, the region's IPC handle and the
 * pointer (valid only inside the server's process).
 */
ncclResult_t bootstrapRemAlloc(size_t size, int rank,
			       struct mlap2p_bootstrap *state, int *id,
			       struct ncclRtIpcMemHandle *ipc, void **ptr);
ncclResult_t bootstrapRemFree(int id, int rank, struct mlap2p_bootstrap *state);

/* ------------------------------------------------------------------ */
/* Communicator                                                       */
/* ------------------------------------------------------------------ */

/* How a connection reaches its FIFO (struct mlap2p_conn.mode). */
enum mlap2p_conn_mode {
	MLAP2P_CONN_NONE = 0,
	MLAP2P_CONN_DIRECT = 1,		/* P2P/direct pointer */
	MLAP2P_CONN_IPC = 2,		/* P2P/IPC */
	MLAP2P_CONN_INDIRECT = 3,	/* P2P/indirect (relay) */
	MLAP2P_CONN_NET = 4,
};

/*
 * A host-side connector with what the data plane needs beside it.  The
 * framework only ever passes &conn->c to transports, so a transport (and
 * the data plane) may recover the wrapper with container_of().
 */
struct mlap2p_conn {
	struct ncclConnector c;		/* must stay first */
	struct ncclConnector *dev;	/* its device-visible mirror */
	int buffSizes[NCCL_NUM_PROTOCOLS]; /* agreed with the peer */
	int send;			/* 1: send side, 0: recv side */
	int peer;			/* the other rank */
	int channel;
	enum mlap2p_conn_mode mode;
	int read;			/* SIMPLE lives in the sender's mem */
	int memRank;			/* rank whose memory holds our mem */
	int peerMemRank;		/* rank whose memory holds the peer's */
	/* Mappings of other ranks of this process we hold (mlap2p_rt_pin). */
	void *pins[2];
};

/* Host-side peers of one channel. */
struct mlap2p_channel_peer {
	struct mlap2p_conn send;
	struct mlap2p_conn recv;
};

/* What a channel looks like in device-visible memory (NCCL 2.7 ncclPeer). */
struct ncclPeer {
	struct ncclConnector send;
	struct ncclConnector recv;
};
_Static_assert(sizeof(struct ncclPeer) == 0x100, "ncclPeer");

struct ncclChannel {
	int id;
	struct mlap2p_channel_peer *peers;	/* nRanks, or NULL if unused */
	struct ncclPeer *devPeers;		/* nRanks, in comm->devMem */
	int ringPrev, ringNext;			/* -1 without a ring */
	int *ringOrder;				/* nRanks ranks, or NULL */
};

/* Rank-pair topology, computed once after the all-gather. */
struct ncclTopoSystem {
	struct ncclComm *comm;
	int nRanks;
	int *edge;		/* [a * nRanks + b]: MLAP2P_EDGE_* */
	int *intermediate;	/* relay rank or -1, same indexing */
	int *relayMla;		/* relay MLA or -1, same indexing */
};

struct ncclComm {
	int nRanks;
	int rank;
	int cudaDev;			/* global logical core */
	int mla;			/* MLA of cudaDev */
	struct ncclPeerInfo *peerInfo;	/* nRanks, all-gathered */

	struct mlap2p_rt *rt;
	struct mlap2p_bootstrap *bootstrap;
	struct ncclTopoSystem *topo;
	struct mlap2p_params params;

	/*
	 * FIFO sizes for the next connections (from the environment).  The
	 * data plane may lower them (e.g. to 0 for a protocol NCCL_PROTO
	 * rules out) before it connects; each connection keeps its own copy.
	 */
	int buffSizes[NCCL_NUM_PROTOCOLS];

	struct ncclChannel channels[MAXCHANNELS];
	int nChannels;			/* highest channel used + 1 */
	uint32_t *connectSend;		/* nRanks channel masks, pending */
	uint32_t *connectRecv;
	void *devMem;			/* region holding every devPeers */

	/*
	 * Non-zero once aborted; read it with __atomic_load_n(ACQUIRE) in
	 * every wait.  asyncError is 0 or the first -errno a background
	 * party (data plane, service) stored with mlap2p_comm_set_error().
	 */
	uint32_t abortFlag;
	int asyncError;

	pthread_mutex_t lock;		/* imports[] */
	struct mlap2p_import *imports;	/* cached peer-region mappings */

	/* Data-plane state, owned by lib/dataplane*.c; dpFree runs first at
	 * destroy and abort (with abortFlag already set on abort). */
	void *dp;
	void (*dpFree)(struct ncclComm *comm);

	/* Threads inside a blocking call (mlap2p_comm_enter); abort waits
	 * for it to drop to 0 before it frees anything. */
	int busy;

	/* Collectives' state, owned by lib/coll/; collFree runs right after
	 * dpFree at destroy and abort. */
	void *coll;
	void (*collFree)(struct ncclComm *comm);
};

/* The public handle wraps the communicator. */
struct mlap2p_comm {
	struct ncclComm nccl;
};

static inline struct ncclComm *mlap2p_nccl(struct mlap2p_comm *comm)
{
	return &comm->nccl;
}

static inline struct mlap2p_comm *mlap2p_api(struct ncclComm *comm)
{
	return container_of(comm, struct mlap2p_comm, nccl);
}

/* Record the first asynchronous error (-errno) of @comm. */
void mlap2p_comm_set_error(struct ncclComm *comm, int err);
static inline bool mlap2p_comm_aborted(const struct ncclComm *comm)
{
	return __atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE) != 0;
}

/*
 * Bracket every blocking public call: enter fails with -ECANCELED once the
 * communicator is aborted; abort (from any thread) sets the flag, then
 * waits until every thread inside has left before freeing.
 */
int mlap2p_comm_enter(struct ncclComm *comm);
void mlap2p_comm_leave(struct ncclComm *comm);

/*
 * Groups and collectives (lib/dataplane.c, lib/coll/): the calling
 * thread's group depth; the outermost mlap2p_group_end() runs the
 * collectives recorded in the group (their first error, or 0).
 */
int mlap2p_group_depth(void);
int mlap2p_coll_group_end(void);

/* The connection of @channel to @peer (send or recv side), or NULL. */
struct mlap2p_conn *mlap2p_comm_conn(struct ncclComm *comm, int channel,
				     int peer, int send);

/*
 * 0 while @rank's process lives (same pid and start time as at init),
 * -ESRCH once it died or its pid was reused, or NET's -errno once the
 * network path to it failed.  Cheap: one /proc read.
 */
int mlap2p_peer_alive(struct ncclComm *comm, int rank);
/* ncclPeerInfo.pidHash of @pid in this process's pid namespace. */
uint64_t mlap2p_pid_hash(pid_t pid);

/*
 * Map a region a peer exported (an IPC handle, e.g. from ptrExchange) into
 * this process.  The first call per region opens it; later calls return
 * the cached mapping.  Everything is unmapped at destroy/abort.  Thread
 * safe.  0 or -errno.
 */
int mlap2p_import_region(struct ncclComm *comm,
			 const struct ncclRtIpcMemHandle *ipc, void **base,
			 size_t *size);
/*
 * The IPC handle and offset of @ptr if it lies in a region of this comm's
 * runtime (mlap2p_mem_alloc, FIFOs); -ENOENT otherwise.
 */
int mlap2p_region_lookup(struct ncclComm *comm, const void *ptr,
			 struct ncclRtIpcMemHandle *ipc, size_t *offset,
			 size_t *bytesAfter);

/* ------------------------------------------------------------------ */
/* Topology and rings (lib/topo.c)                                    */
/* ------------------------------------------------------------------ */

/* Own ncclPeerInfo (rank, core, hashes, pid, start time, node, MLA). */
int mlap2p_fill_peer_info(struct ncclComm *comm, struct ncclPeerInfo *info);
/* After the all-gather: check consistency, compute comm->topo. */
int mlap2p_topo_compute(struct ncclComm *comm);
void mlap2p_topo_free(struct ncclTopoSystem *topo);

/*
 * Whether rank @a reaches @b by P2P, the seed's ncclTopoCheckP2p: edge
 * class within NCCL_P2P_LEVEL, same host, a rank to relay through.
 */
ncclResult_t ncclTopoCheckP2p(struct ncclTopoSystem *topo,
			      struct ncclPeerInfo *a, struct ncclPeerInfo *b,
			      int *p2p, int *read, int *intermediateRank);
/*
 * Rings for @nrings channels: order[r * nRanks + i] is the i-th rank of
 * ring r.  NCCL_RINGS overrides the search.  0 or -errno.
 */
int mlap2p_topo_rings(struct ncclComm *comm, int nrings, int *order);
/* 0 if NCCL_RINGS (@str) is valid for @nranks, else a WARN and -EINVAL. */
int mlap2p_rings_check(const char *str, int nranks);

/* ------------------------------------------------------------------ */
/* Transport framework (lib/transport.c)                              */
/* ------------------------------------------------------------------ */

/* Free every connection's resources (after the closing handshake). */
ncclResult_t mlap2p_transport_free_all(struct ncclComm *comm);
/* Mode name as logged: "P2P/direct pointer", "P2P/IPC", ... */
const char *mlap2p_conn_mode_name(enum mlap2p_conn_mode mode);

/* Tags of the framework's messages. */
#define MLAP2P_TAG_CONNECT	(MLAP2P_TAG_CORE | 0x0000000)	/* + round */
#define MLAP2P_TAG_CONNECTED	(MLAP2P_TAG_CORE | 0x1000000)
#define MLAP2P_TAG_CLOSE	(MLAP2P_TAG_CORE | 0x2000000)
#define MLAP2P_TAG_BARRIER	(MLAP2P_TAG_CORE | 0x3000000)
#define MLAP2P_TAG_ALLGATHER	(MLAP2P_TAG_CORE | 0x4000000)
#define MLAP2P_TAG_RINGS	(MLAP2P_TAG_CORE | 0x5000000)
#define MLAP2P_TAG_FAILED	(MLAP2P_TAG_CORE | 0x6000000)	/* no payload */

/* ------------------------------------------------------------------ */
/* Small helpers (lib/util.c)                                         */
/* ------------------------------------------------------------------ */

uint64_t mlap2p_hash(const void *data, size_t len, uint64_t seed);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t mlap2p_now_ms(void);
/* Start time of @pid in clock ticks since boot (/proc/pid/stat field 22);
 * -ESRCH when it is gone or a zombie. */
int mlap2p_proc_start_time(pid_t pid, uint64_t *ticks);
/* getrandom() that never fails short; 0 or -errno. */
int mlap2p_random(void *buf, size_t len);
/* Constant-time memcmp: 0 when equal. */
int mlap2p_memeq_ct(const void *a, const void *b, size_t len);

#endif /* MLAP2P_INTERNAL_H */
