/* SPDX-License-Identifier: MIT */
/*
 * lib/dataplane/dataplane.h: what the data plane offers the layers above
 * it (lib/coll/) beyond <mlap2p/dataplane.h>.
 */
#ifndef MLAP2P_LIB_DATAPLANE_H
#define MLAP2P_LIB_DATAPLANE_H

#include <stdint.h>

#include "mlap2p/mlap2p.h"

struct mlap2p_request;

/*
 * The calling thread's group, which the public mlap2p_group_start/end
 * (lib/coll/api.c: the collectives recorded in a group run at its
 * outermost end, before its sends and receives are waited for) keep
 * through these.  Inside a group, mlap2p_send and mlap2p_recv only post.
 */
/* The group depth (0: not in a group). */
int mlap2p_group_depth(void);
void mlap2p_dp_group_start(void);
/* One level less: the depth left, or -EINVAL outside a group. */
int mlap2p_dp_group_leave(void);
/*
 * At the outermost end (mlap2p_dp_group_leave() returned 0): wait for the
 * sends and receives posted in the group and free them.  Returns the first
 * error: a failed post, else @err, else a request's status.
 */
int mlap2p_dp_group_wait(int err);
/* Streaming stores from this many bytes on (MLAP2P_NT_MIN's default):
 * the data plane's copy-out, the direct all-reduce's stores. */
#define MLAP2P_NT_MIN_DEFAULT	(16UL << 20)
/* MLAP2P_NT_MIN as the data plane read it (0: never) into *@bytes.
 * 0 or -errno. */
int mlap2p_dp_nt_min(struct mlap2p_comm *api, uint64_t *bytes);
/*
 * Sending a message of @first bytes and then one of b bytes to a peer,
 * both complete before the peer receives either when neither goes
 * SIMPLE (whose send waits for its receive) and their LL or LL128 steps
 * fit the FIFO's NCCL_STEPS.  The least b in [0, @max] for which they
 * would not, @max + 1 when none, 0 when the first alone would wait;
 * -errno (no link yet).
 */
int mlap2p_dp_sends_ahead_end(struct mlap2p_comm *api, size_t first,
			      int max);
/*
 * A number that changes when mlap2p_proto_for()'s answers may
 * (mlap2p_set_proto()), so that a layer above may keep them under it.
 * Cheap (no enter): for a caller inside the communicator (the
 * collectives, between mlap2p_comm_enter and leave).
 */
unsigned int mlap2p_dp_proto_epoch(struct mlap2p_comm *api);
/* 1 into *@dear when MLAP2P_CMA is auto and a system call costs
 * MLAP2P_CMA_SYSCALL_NS or more on some rank (the dearest of them all, so
 * every rank gets the same answer), else 0.  0 or -errno. */
int mlap2p_dp_syscall_dear(struct mlap2p_comm *api, int *dear);

/*
 * mlap2p_isend (@how has MLAP2P_POST_SEND) or mlap2p_irecv on channel
 * @channel rather than the lowest one: messages on one channel are
 * ordered, those on different channels are not.  -ENOTCONN when that
 * channel does not connect them.  MLAP2P_POST_FIFO: a send that is never
 * published for the receiver to read (sender first, lib/proto/proto.h):
 * the reducing ring collectives' steps, for which the FIFO is faster
 * (docs/collectives.md).
 */
#define MLAP2P_POST_RECV	0
#define MLAP2P_POST_SEND	1
#define MLAP2P_POST_FIFO	2
#define MLAP2P_POST_TEE_NT	4	/* mlap2p_isend_tee only */
int mlap2p_ipost_on(struct mlap2p_comm *api, int channel, int how,
		    void *buf, size_t bytes, int peer,
		    struct mlap2p_request **req);
/*
 * A send on @channel as mlap2p_ipost_on(@how, which has MLAP2P_POST_SEND)
 * that also copies @buf's @bytes to @tee (a broadcast root's output).
 * Through the FIFO each step goes to @tee from where it was just written
 * (one read of the input for both, as NCCL's copySend); sent otherwise,
 * the whole of it as the send starts, while the receiver reads @buf.
 * MLAP2P_POST_TEE_NT in @how: write @tee with streaming stores (a large
 * output the caller will not read soon).  @tee is complete when the
 * request ends successfully.
 */
int mlap2p_isend_tee(struct mlap2p_comm *api, int channel, int how,
		     const void *buf, void *tee, size_t bytes, int peer,
		     struct mlap2p_request **req);
/*
 * A request that a layer above progresses itself: waits and tests on it
 * call poll(ext), which ends it with mlap2p_request_ext_done(req, status).
 */
struct mlap2p_request *mlap2p_request_ext(struct mlap2p_comm *api,
					  void (*poll)(void *ext), void *ext,
					  int *err);
void mlap2p_request_ext_done(struct mlap2p_request *req, int status);

/*
 * Copying straight between this rank and @peer's memory, for a layer
 * above that has traded addresses with it (the direct all-reduce on plain
 * buffers).  mlap2p_peer_cma(): may it be tried?  1 when @peer is a
 * thread of this process (a memcpy) or a process on this host and
 * MLAP2P_CMA is not 0; else 0.  mlap2p_peer_copy(): @bytes between @buf
 * here and @addr in @peer, into the peer (@write) or out of it, by
 * process_vm_writev/readv with the data plane's checks that the pid still
 * names the peer.  0, -EOPNOTSUPP (mlap2p_peer_cma() says no), -ENOTCONN
 * (no connection to it yet), -EPERM (the kernel refuses: Yama's
 * ptrace_scope, a process that is not dumpable), -ECONNRESET (it died),
 * or -errno.
 */
int mlap2p_peer_cma(struct mlap2p_comm *api, int peer);
int mlap2p_peer_copy(struct mlap2p_comm *api, int peer, uint64_t addr,
		     void *buf, size_t bytes, int write);

#endif /* MLAP2P_LIB_DATAPLANE_H */
