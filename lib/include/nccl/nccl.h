/* SPDX-License-Identifier: MIT */
/*
 * <nccl.h> from libmlap2p: NCCL's API on host memory.
 *
 * Installed as $(INCLUDEDIR)/mlap2p/nccl/nccl.h and reached as <nccl.h>
 * through `pkg-config --cflags mlap2p-nccl` (-I.../mlap2p/nccl), so it never
 * shadows a real NCCL.  Link with `pkg-config --libs mlap2p-nccl`.
 *
 * API level: NCCL 2.18.3's types and signatures (NCCL_VERSION_CODE 21803),
 * plus NCCL 2.28's ncclAlltoAll (MLAP2P_NCCL_HAS_ALLTOALL).  Every function
 * also exists as its p-prefixed twin (pncclAllReduce ...): the p names are
 * the real symbols, the plain names weak aliases, as in NCCL, so a profiler
 * can interpose the plain names.
 *
 * Buffers are host memory (any pointer, or regions from mlap2p_mem_alloc).
 * cudaStream_t is an mlap2p host stream (<mlap2p/stream.h>): a call given a
 * stream returns at once and runs on the stream's thread; a call given NULL
 * runs to completion before it returns.  ncclGroupStart/End aggregate as in
 * NCCL: the operations of a group are posted together at the outermost
 * ncclGroupEnd, per stream and per communicator; ncclCommInitRank inside a
 * group joins at ncclGroupEnd (several ranks from one thread).
 *
 * The "device".  ncclCommInitRank takes no core; the rank's global logical
 * core is, first match wins:
 *   1. ncclConfig_t.mlap2pCore (an extension field) when >= 0;
 *   2. MLAP2P_CORE=<n>;
 *   3. NEURON_RT_VISIBLE_CORES (Neuron's "n", "a-b" or "a,b,..."): its
 *      first core;
 *   4. the local rank: LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID
 *      or MPI_LOCALRANKID when set, else the rank.
 * ncclCommInitAll uses devlist[i] (or i).  ncclCommSplit keeps the parent's
 * core unless the config sets one.  ncclCommCuDevice returns it.
 *
 * Results: -EINVAL is ncclInvalidArgument; misuse (EPERM, EBUSY, EALREADY,
 * ENOTCONN, EISCONN, EOPNOTSUPP) ncclInvalidUsage; a dead or disagreeing
 * peer (ECONNRESET, ECONNABORTED, ECONNREFUSED, EPIPE, ESRCH, EPROTO,
 * ETIMEDOUT, EHOSTUNREACH, ENETDOWN, ENETUNREACH) ncclRemoteError;
 * EINPROGRESS ncclInProgress; ENOTRECOVERABLE and EFAULT ncclInternalError;
 * every other errno ncclSystemError.  ncclGetLastError gives the text.
 */
#ifndef NCCL_H_
/* ncclResult_t is shared with <mlap2p/transport.h>. */
#include <mlap2p/result.h>
#define NCCL_H_
#define MLAP2P_NCCL_H 1

#include <stddef.h>
#include <limits.h>

#include <mlap2p/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 18
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? \
	(X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#define MLAP2P_NCCL_HAS_ALLTOALL 1

#define NCCL_COMM_NULL NULL
typedef struct ncclComm *ncclComm_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1

typedef struct ncclConfig_v21700 {
	/* NCCL 2.18's fields; the initializer fills them. */
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char *netName;
	int splitShare;
	/* mlap2p: the rank's global logical core (see above), or undefined */
	int mlap2pCore;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {					\
	sizeof(ncclConfig_t),		/* size */			\
	0xcafebeef,			/* magic */			\
	NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */	\
	NCCL_CONFIG_UNDEF_INT,		/* blocking */			\
	NCCL_CONFIG_UNDEF_INT,		/* cgaClusterSize */		\
	NCCL_CONFIG_UNDEF_INT,		/* minCTAs */			\
	NCCL_CONFIG_UNDEF_INT,		/* maxCTAs */			\
	NCCL_CONFIG_UNDEF_PTR,		/* netName */			\
	NCCL_CONFIG_UNDEF_INT,		/* splitShare */		\
	NCCL_CONFIG_UNDEF_INT		/* mlap2pCore */		\
}

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
	ncclSum = 0,
	ncclProd = 1,
	ncclMax = 2,
	ncclMin = 3,
	ncclAvg = 4,
	ncclNumOps = 5,
	ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
	ncclInt8 = 0, ncclChar = 0,
	ncclUint8 = 1,
	ncclInt32 = 2, ncclInt = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6, ncclHalf = 6,
	ncclFloat32 = 7, ncclFloat = 7,
	ncclFloat64 = 8, ncclDouble = 8,
	ncclBfloat16 = 9,
	ncclNumTypes = 10
} ncclDataType_t;

typedef enum {
	ncclScalarDevice = 0,
	ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* Declares f and its profiling twin pf. */
#define MLAP2P_NCCL_API(ret, f, ...) ret f(__VA_ARGS__); ret p##f(__VA_ARGS__)

MLAP2P_NCCL_API(ncclResult_t, ncclGetVersion, int *version);
MLAP2P_NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *uniqueId);
MLAP2P_NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm,
		int nranks, ncclUniqueId commId, int rank,
		ncclConfig_t *config);
MLAP2P_NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks,
		ncclUniqueId commId, int rank);
MLAP2P_NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comm, int ndev,
		const int *devlist);
MLAP2P_NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
MLAP2P_NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
MLAP2P_NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
MLAP2P_NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color,
		int key, ncclComm_t *newcomm, ncclConfig_t *config);
MLAP2P_NCCL_API(const char *, ncclGetErrorString, ncclResult_t result);
MLAP2P_NCCL_API(const char *, ncclGetLastError, ncclComm_t comm);
MLAP2P_NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm,
		ncclResult_t *asyncError);
MLAP2P_NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm,
		int *count);
MLAP2P_NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm,
		int *device);
MLAP2P_NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm,
		int *rank);
MLAP2P_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op,
		void *scalar, ncclDataType_t datatype,
		ncclScalarResidence_t residence, ncclComm_t comm);
MLAP2P_NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op,
		ncclComm_t comm);
MLAP2P_NCCL_API(ncclResult_t, ncclReduce, const void *sendbuff,
		void *recvbuff, size_t count, ncclDataType_t datatype,
		ncclRedOp_t op, int root, ncclComm_t comm,
		cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count,
		ncclDataType_t datatype, int root, ncclComm_t comm,
		cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff,
		void *recvbuff, size_t count, ncclDataType_t datatype,
		int root, ncclComm_t comm, cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff,
		void *recvbuff, size_t count, ncclDataType_t datatype,
		ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff,
		void *recvbuff, size_t recvcount, ncclDataType_t datatype,
		ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff,
		void *recvbuff, size_t sendcount, ncclDataType_t datatype,
		ncclComm_t comm, cudaStream_t stream);
/* NCCL 2.28: count elements to and from every rank. */
MLAP2P_NCCL_API(ncclResult_t, ncclAlltoAll, const void *sendbuff,
		void *recvbuff, size_t count, ncclDataType_t datatype,
		ncclComm_t comm, cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count,
		ncclDataType_t datatype, int peer, ncclComm_t comm,
		cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count,
		ncclDataType_t datatype, int peer, ncclComm_t comm,
		cudaStream_t stream);
MLAP2P_NCCL_API(ncclResult_t, ncclGroupStart, void);
MLAP2P_NCCL_API(ncclResult_t, ncclGroupEnd, void);

#undef MLAP2P_NCCL_API

/* mlap2p extension: the libmlap2p communicator under @comm (libmlap2p
 * calls on it must not overlap NCCL calls on @comm), or NULL while a
 * non-blocking init is still running. */
struct mlap2p_comm;
struct mlap2p_comm *mlap2p_nccl_comm(ncclComm_t comm);

/*
 * mlap2p extension: ncclSend (@send 1) or ncclRecv (@send 0) of @count
 * elements of @datatype with @peer, posted at once as libmlap2p requests
 * (<mlap2p/dataplane.h>) rather than run to completion: the same
 * channels and parts as ncclSend/ncclRecv, so either meets it on the
 * peer, and messages between two ranks match in the order each posted
 * them.  It takes its turn among @comm's calls as an NCCL call does; the
 * requests then progress in mlap2p_request_test/wait/waitall, which must
 * not overlap other calls on @comm.  Up to MLAP2P_NCCL_IPOST_MAX requests
 * go to @reqs, their number to *@nreqs; the message is done when all
 * are.  0 or -errno, the text in ncclGetLastError(@comm): -EINVAL for a
 * bad argument (send not 0 or 1, datatype, peer out of range or this
 * rank, NULL buffer with a count, NULL @reqs or @nreqs), -ENOTCONN when
 * the pair is not connected yet (a first ncclSend/ncclRecv between them
 * connects it; nothing is posted), -EINPROGRESS during a non-blocking
 * init, or why the communicator failed.  If a later part fails to post,
 * *@nreqs says how many did, and they must still be waited for.
 */
#define MLAP2P_NCCL_IPOST_MAX	32
struct mlap2p_request;
int mlap2p_nccl_ipost(ncclComm_t comm, int send, void *buf, size_t count,
		      ncclDataType_t datatype, int peer,
		      struct mlap2p_request **reqs, int *nreqs);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
