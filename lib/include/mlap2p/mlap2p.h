/* SPDX-License-Identifier: MIT */
/*
 * <mlap2p/mlap2p.h>: the libmlap2p communicator API.
 *
 * A communicator joins nranks ranks (threads of one process or separate
 * processes of one host) through a 128-byte unique id, connects them by the
 * seed's P2P transport (direct pointer, IPC or relay), and hands out device
 * memory regions mapped into the process.  <mlap2p/transport.h> has the
 * transport's types.
 *
 * Errors: every int function returns 0 (or a count) on success and -errno on
 * failure, and also sets errno; pointer functions return NULL and set
 * errno.  mlap2p_strerror() gives text for any code, mlap2p_last_error()
 * the calling thread's last detailed message (for example which rank never
 * arrived, or which environment variable was rejected).
 *
 * Environment: NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE (as NCCL);
 * NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_P2P_READ_ENABLE, NCCL_BUFFSIZE,
 * NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_RINGS, NCCL_COMM_ID,
 * NCCL_SOCKET_IFNAME; MLAP2P_RUNTIME, MLAP2P_BOOTSTRAP_TIMEOUT and the host
 * runtime's topology (MLAP2P_FAMILY, ...).  docs/architecture.md lists them.
 */
#ifndef MLAP2P_MLAP2P_H
#define MLAP2P_MLAP2P_H

#include <stddef.h>

#include <mlap2p/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mlap2p_comm;		/* opaque */
struct ncclConnector;		/* <mlap2p/transport.h> */

#define MLAP2P_UNIQUE_ID_BYTES	128

/* Opaque: the root's address and a random magic.  Copy it to every rank. */
struct mlap2p_unique_id {
	char internal[MLAP2P_UNIQUE_ID_BYTES];
};

/* Compile-time version (from Makefile.common) and the library's at run time. */
#define MLAP2P_VERSION_CODE(maj, min, pat) (((maj) << 16) | ((min) << 8) | (pat))
int mlap2p_version(int *major, int *minor, int *patch);
const char *mlap2p_version_string(void);

/*
 * Create a unique id whose root (a detached thread of this process) waits
 * for the ranks; it leaves once they have met or after the bootstrap
 * timeout.  NCCL_COMM_ID=<ip>:<port> fixes the root's address.
 */
int mlap2p_get_unique_id(struct mlap2p_unique_id *id);

/*
 * Join as @rank of @nranks, running on global logical core @core.  Blocks
 * until all ranks have joined or MLAP2P_BOOTSTRAP_TIMEOUT passes (-ETIMEDOUT,
 * the message names the missing rank).
 */
int mlap2p_comm_init_rank(struct mlap2p_comm **comm, int nranks,
			  const struct mlap2p_unique_id *id, int rank,
			  int core);
/* Orderly teardown: closing handshake with every peer, then free. */
int mlap2p_comm_destroy(struct mlap2p_comm *comm);
/* Stop every wait and free without talking to peers. */
int mlap2p_comm_abort(struct mlap2p_comm *comm);
/*
 * Split @comm (collective over all its ranks): ranks passing the same
 * @color form a new communicator, ranked by (@key, rank in @comm); color
 * MLAP2P_SPLIT_NOCOLOR gives *newcomm = NULL.  The child runs on @core, or
 * on the parent's core when @core < 0.  lib/split/comm_split.c.
 */
#define MLAP2P_SPLIT_NOCOLOR	(-1)
int mlap2p_comm_split(struct mlap2p_comm *comm, int color, int key, int core,
		      struct mlap2p_comm **newcomm);
/* 0 and *error = 0 or the first asynchronous -errno of @comm. */
int mlap2p_comm_get_async_error(struct mlap2p_comm *comm, int *error);

int mlap2p_comm_count(const struct mlap2p_comm *comm);	/* nranks */
int mlap2p_comm_rank(const struct mlap2p_comm *comm);
int mlap2p_comm_core(const struct mlap2p_comm *comm);
/* "kmod" or "host": the runtime backend in use. */
const char *mlap2p_comm_runtime(const struct mlap2p_comm *comm);

/*
 * Connect @nchannels channels (0 .. nchannels-1): receive from each of
 * @recv_peers and send to each of @send_peers on every channel.  Collective
 * over the ranks named: each peer must ask for the matching other side.
 */
int mlap2p_connect_peers(struct mlap2p_comm *comm, int nchannels,
			 int nrecv, const int *recv_peers,
			 int nsend, const int *send_peers);
/*
 * Build rings over @nchannels channels following the topology (NCCL_RINGS
 * overrides) and connect every rank to its ring neighbours.  Collective.
 */
int mlap2p_connect_ring(struct mlap2p_comm *comm, int nchannels);
/* The ring of @channel: @order gets nranks ranks; prev/next may be NULL. */
int mlap2p_ring_get(const struct mlap2p_comm *comm, int channel, int *order,
		    int *prev, int *next);

/* How a connection reaches its peer (struct mlap2p_conn_desc.mode). */
#define MLAP2P_PATH_NONE	0
#define MLAP2P_PATH_DIRECT	1	/* P2P/direct pointer */
#define MLAP2P_PATH_IPC		2	/* P2P/IPC */
#define MLAP2P_PATH_INDIRECT	3	/* P2P/indirect, through a relay rank */
#define MLAP2P_PATH_NET		4

#define MLAP2P_DIR_RECV		0
#define MLAP2P_DIR_SEND		1

struct mlap2p_conn_desc {
	int path;			/* MLAP2P_PATH_* */
	int read;			/* SIMPLE in the sender's memory */
	int mem_rank;			/* rank whose memory holds our side */
	int buff_sizes[3];		/* LL, LL128, SIMPLE bytes */
	struct ncclConnector *host;	/* the wired connector */
	struct ncclConnector *dev;	/* its device-visible mirror */
};

/* A connection of @channel to @peer; -ENOTCONN when there is none. */
int mlap2p_conn_get(struct mlap2p_comm *comm, int channel, int peer, int dir,
		    struct mlap2p_conn_desc *desc);

/*
 * Device memory on the rank's own MLA, mapped into the process (zeroed).
 * @size rounds up to pages.  Freed by mlap2p_mem_free or at destroy.
 */
int mlap2p_mem_alloc(struct mlap2p_comm *comm, size_t size, void **ptr);
int mlap2p_mem_free(struct mlap2p_comm *comm, void *ptr);

/* Text for @err (negative or positive errno), library cases included. */
const char *mlap2p_strerror(int err);
/* The calling thread's last error message, or "" if none. */
const char *mlap2p_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MLAP2P_MLAP2P_H */
