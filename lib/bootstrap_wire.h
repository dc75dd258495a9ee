/* SPDX-License-Identifier: MIT */
/*
 * lib/bootstrap_wire.h: what the bootstrap's two halves share: the unique
 * id, the messages on the wire, and the root that lib/bootstrap_root.c
 * runs (lib/bootstrap.c is the per-communicator half).  Private to them.
 */
#ifndef MLAP2P_BOOTSTRAP_WIRE_H
#define MLAP2P_BOOTSTRAP_WIRE_H

#include <stdint.h>

#include "bootstrap.h"
#include "core.h"
#include "log.h"
#include "param.h"
#include "socket.h"
#include "util.h"

#define BS_ID_TAG		0x44494c4dU	/* "MLID" */
#define BS_ID_F_RANK0_ROOT	0x1		/* NCCL_COMM_ID: rank 0 roots */
#define BS_IO_MS		5000		/* one message's transfer */
#define BS_GRACE_MS		2000		/* root answers before ranks give up */
#define BS_MAX_MSG		(64U << 20)
#define BS_MAX_RANKS		65536

struct bs_id {
	uint32_t tag;
	uint32_t flags;
	uint64_t magic;
	union mlap2p_sockaddr root;
};
_Static_assert(sizeof(struct bs_id) <= MLAP2P_UNIQUE_ID_BYTES, "unique id");

enum bs_type {
	BS_HELLO = 1,
	BS_TABLE,
	BS_ERROR,
	BS_MSG,
	BS_REMALLOC,
	BS_REMFREE,
	BS_REPLY,
};

struct bs_hdr {
	uint64_t magic;
	uint32_t type;
	int32_t rank;		/* sender */
	int32_t tag;		/* message tag; errno in BS_ERROR/BS_REPLY */
	uint32_t size;		/* payload bytes that follow */
};

struct bs_rankinfo {
	union mlap2p_sockaddr addr;	/* the rank's listener */
	uint32_t pad;
	struct ncclPeerInfo peer;
};

struct bs_hello {
	int32_t nranks;
	uint32_t timeoutMs;	/* the rank's bootstrap timeout, 0 = none */
	struct bs_rankinfo info;
};

static inline int64_t bs_deadline(long ms)
{
	return ms > 0 ? mlap2p_now_ms() + ms : -1;
}

/* A header and @size bytes of @data on @fd, before @deadline. */
int mlap2p_bs_send_hdr(int fd, uint64_t magic, int type, int rank, int tag,
		       const void *data, uint32_t size, int64_t deadline);

/*
 * Listen on @addr (its port filled in) and start a detached root thread
 * there: it gathers one BS_HELLO from each rank, then answers each with
 * BS_TABLE, or BS_ERROR naming the ranks that did not arrive, and ends.
 */
int mlap2p_bs_root_start(union mlap2p_sockaddr *addr, uint64_t magic,
			 long timeoutMs);

#endif /* MLAP2P_BOOTSTRAP_WIRE_H */
