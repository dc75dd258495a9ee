// SPDX-License-Identifier: MIT
/*
 * The data plane's per-communicator state: parameters, protocol choice
 * by size, building a link on a connection, teardown.
 */
#include "dataplane/dp.h"

/* ---- setup ---- */

static int dp_parse_proto(unsigned int *mask)
{
	static const char *const names[] = { "LL", "LL128", "SIMPLE" };
	const char *env = getenv("NCCL_PROTO");
	char *copy, *tok, *save = NULL;
	unsigned int m = 0;
	int neg = 0, i;

	*mask = 7;
	if (!env || !*env)
		return 0;
	if (*env == '^') {
		neg = 1;
		env++;
	}
	copy = strdup(env);
	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < 3; i++)
			if (!strcasecmp(tok, names[i]))
				break;
		if (i == 3) {
			WARN("NCCL_PROTO: unknown protocol '%s' (LL, LL128, Simple)",
			     tok);
			free(copy);
			return -EINVAL;
		}
		m |= 1U << i;
	}
	free(copy);
	*mask = neg ? 7 & ~m : m;
	if (!*mask) {
		WARN("NCCL_PROTO='%s' leaves no protocol", getenv("NCCL_PROTO"));
		return -EINVAL;
	}
	INFO(NCCL_ENV, "NCCL_PROTO set by environment to %s", getenv("NCCL_PROTO"));
	return 0;
}

static void dp_free(struct ncclComm *comm);

static int dp_params(struct dp *dp)
{
	static const char *const cmaModes[] = { "off", "on", "auto" };
	long v, cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t u;
	int mode, ret;

	ret = dp_parse_proto(&dp->protoMask);
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_LL_MAX", 0, 1UL << 30, DP_LL_MAX,
				      &dp->llMax);
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_LL128_MAX", 0, 1UL << 30,
				      DP_LL128_MAX, &dp->ll128Max);
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_CHUNKSIZE", 4096, 1UL << 30,
				      DP_CHUNK, &dp->chunk);
	if (!ret)
		ret = mlap2p_env_int("MLAP2P_SINGLE_COPY", 0, 1, 1, &v);
	if (ret)
		return ret;
	dp->noDirect = !v;
	ret = mlap2p_env_enum("MLAP2P_CMA", cmaModes, ARRAY_SIZE(cmaModes), 2,
			      &mode);
	if (ret)
		return ret;
	dp->noCma = mode == 0;
	dp->cmaAuto = mode == 2;
	ret = mlap2p_env_size("MLAP2P_CMA_MIN", 0, 1ULL << 40, DP_UNSET,
			      &dp->cmaMin);
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_CMA_MAX", 0, 1ULL << 40,
				      DP_UNSET, &dp->cmaMax);
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_CMA_ONEWAY_MAX", 0, 1ULL << 40,
				      DP_UNSET, &dp->cmaOneWayMax);
	if (!ret)
		ret = mlap2p_env_size("MLAP2P_CMA_SYSCALL_NS", 0, UINT32_MAX,
				      DP_CMA_SYSCALL_NS, &dp->cmaSyscallNs);
	if (ret)
		return ret;
	ret = mlap2p_env_size("MLAP2P_NT_MIN", 0, 1ULL << 40, DP_NT_MIN,
			      &dp->ntMin);
	if (ret)
		return ret;
	ret = mlap2p_env_int("MLAP2P_CMA_PULL", 0, 1, 1, &v);
	if (ret)
		return ret;
	dp->noPull = !v;
	ret = mlap2p_env_timeout("MLAP2P_PEER_TIMEOUT", DP_PEER_TIMEOUT_MS,
				 &dp->peerTimeoutMs);
	if (ret)
		return ret;
	/* Check often enough to notice a death well within the timeout. */
	dp->liveEveryMs = dp->peerTimeoutMs / 10;
	if (dp->liveEveryMs > 250)
		dp->liveEveryMs = 250;
	if (dp->liveEveryMs < 5)
		dp->liveEveryMs = 5;
	/* More ranks than cores: give the CPU away almost at once. */
	u = dp->comm->nRanks > cpus ? 64 : MLAP2P_SPIN_YIELD;
	ret = mlap2p_env_size("MLAP2P_SPIN", 1, 1UL << 30, u, &u);
	if (ret)
		return ret;
	dp->spinYield = (uint32_t)u;
	dp->spinTight = dp->spinYield < MLAP2P_SPIN_TIGHT ? dp->spinYield :
			MLAP2P_SPIN_TIGHT;
	return 0;
}

struct dp *dp_get(struct ncclComm *comm)
{
	struct dp *dp = comm->dp;

	if (dp)
		return dp;
	dp = calloc(1, sizeof(*dp));
	if (!dp)
		return NULL;
	dp->comm = comm;
	dp->proto = MLAP2P_PROTO_AUTO;
	dp->links = calloc(2 * (size_t)comm->nRanks, sizeof(*dp->links));
	if (!dp->links || dp_params(dp)) {
		int err = dp->links ? -EINVAL : -ENOMEM;

		free(dp->links);
		free(dp);
		errno = -err;
		return NULL;
	}
	dp->nextLive = mlap2p_now_ms() + dp->liveEveryMs;
	dp->fence = dp_membarrier_ok() && !getenv("MLAP2P_NO_MEMBARRIER");
	comm->dp = dp;
	comm->dpFree = dp_free;
	dp_dump_init(dp);
	dp_install_dump_signal();
	return dp;
}

/* ---- protocol choice ---- */

int dp_pick(struct dp *dp, const struct dp_link *k, size_t bytes)
{
	unsigned int usable = dp->protoMask & k->usable;

	if (dp->proto != MLAP2P_PROTO_AUTO)
		return usable & (1U << dp->proto) ? dp->proto : -EINVAL;
	if (!usable)
		return -EINVAL;
	if (bytes <= dp->llMax && (usable & 1))
		return NCCL_PROTO_LL;
	if (bytes <= dp->ll128Max && (usable & 2))
		return NCCL_PROTO_LL128;
	if (usable & 4)
		return NCCL_PROTO_SIMPLE;
	return usable & 2 ? NCCL_PROTO_LL128 : NCCL_PROTO_LL;
}

/*
 * The sizes dp_small() takes on @k: those dp_pick() gives LL or LL128
 * that the latency path carries, one interval each (dp_pick() gives LL to
 * a prefix of sizes and LL128 to the interval after it), so that a call
 * compares the size twice instead of picking.  Again after
 * mlap2p_set_proto().
 */
void dp_small_ranges(struct dp *dp, struct dp_link *k)
{
	size_t b, max128 = 0;

	k->llEnd = k->ll128Beg = k->ll128End = 0;
	if (k->small & 2)
		max128 = mlap2p_min(MLAP2P_LL128_SMALL,
				    mlap2p_proto_step_bytes(&k->l,
							    NCCL_PROTO_LL128));
	for (b = 0; b <= DP_SMALL_MAX; b++) {
		int proto = dp_pick(dp, k, b);

		if (proto == NCCL_PROTO_LL && (k->small & 1) &&
		    b <= MLAP2P_LL_SMALL && b == k->llEnd)
			k->llEnd = b + 1;
		if (!(k->small & 2) || proto != NCCL_PROTO_LL128 ||
		    b > max128)
			continue;
		if (!k->ll128End)
			k->ll128Beg = b;
		if (!k->ll128End || b == k->ll128End)
			k->ll128End = b + 1;
	}
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

/*
 * Fault @k's FIFOs in now, in this process's mapping, without touching
 * their contents.  Otherwise each slot's first message pays for its pages
 * (a 32 KiB SIMPLE step took 23 us instead of 3 in this VM for the first
 * NCCL_STEPS messages).  Best effort: older kernels and device mappings say no.
 */
static void dp_prefault(const struct dp_link *k)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;
	int p;

	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		if (!k->l.conn->buffs[p] || !k->l.buffSizes[p])
			continue;
		lo = (uintptr_t)k->l.conn->buffs[p] & ~(pg - 1);
		hi = ((uintptr_t)k->l.conn->buffs[p] + k->l.buffSizes[p] +
		      pg - 1) & ~(pg - 1);
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
	}
}

/* The link of (@peer, @send) on the lowest connected channel, built on
 * first use; @quiet: no WARN if unconnected. */
/*
 * MLAP2P_CMA=auto's limits for @k.  Where a system call is dear (1.3-1.6
 * us for a small process_vm_readv on the AMD PVM guests of issue 19), it
 * and the handshake cost more than the FIFO's second copy below 256 KiB,
 * and one way the FIFO's two pipelined copies beat a single copy at every
 * size; in an exchange from 256 KiB the two cores' single reads win up to
 * 64 MiB, as where it is cheap (docs/performance.md).  The cost is the
 * larger of the two ends' (ncclPeerInfo.syscallNs, measured once at
 * init), so the two ends of a link agree; the environment's limits win
 * over either default.
 */
static void dp_cma_limits(struct dp *dp, struct dp_link *k)
{
	const struct ncclComm *comm = dp->comm;
	uint32_t ns = comm->peerInfo[comm->rank].syscallNs;
	int dear;

	if (comm->peerInfo[k->l.peer].syscallNs > ns)
		ns = comm->peerInfo[k->l.peer].syscallNs;
	dear = k->cma && dp_dear(dp, ns);
	k->cmaMin = dp->cmaMin != DP_UNSET ? dp->cmaMin :
		    dear ? DP_DEAR_CMA_MIN : DP_CMA_MIN;
	k->cmaMax = dp->cmaMax != DP_UNSET ? dp->cmaMax : DP_CMA_MAX;
	k->cmaOneWayMax = dp->cmaOneWayMax != DP_UNSET ? dp->cmaOneWayMax :
			  dear ? DP_DEAR_CMA_ONEWAY_MAX : DP_CMA_ONEWAY_MAX;
	/* The FIFO then carries messages of every size one way: those of a
	 * few steps pipeline better in smaller ones. */
	k->l.stepMin = dear ? DP_DEAR_STEP_MIN : 0;
	if (dear && !dp->dearLogged) {
		dp->dearLogged = 1;
		INFO(NCCL_P2P, "rank %d: a system call costs %u ns (the dearer of this rank and rank %d; MLAP2P_CMA_SYSCALL_NS %llu): cross-memory attach from %llu to %llu bytes in an exchange, below %llu one way",
		     comm->rank, ns, k->l.peer,
		     (unsigned long long)dp->cmaSyscallNs,
		     (unsigned long long)k->cmaMin,
		     (unsigned long long)k->cmaMax,
		     (unsigned long long)k->cmaOneWayMax);
	}
}

struct dp_link *dp_link(struct dp *dp, int peer, int send, int *err,
			int quiet)
{
	struct ncclComm *comm = dp->comm;
	struct mlap2p_conn *conn;
	struct dp_link *k;
	int c;

	if (peer < 0 || peer >= comm->nRanks) {
		*err = -EINVAL;
		return NULL;
	}
	k = dp->links[2 * peer + !!send];
	if (k)
		return k;
	for (c = 0; c < MAXCHANNELS; c++) {
		conn = mlap2p_channel_conn(comm, c, peer, send);
		if (conn && conn->c.connected)
			break;
	}
	if (c == MAXCHANNELS) {
		if (!quiet)
			WARN("rank %d: no connection %s rank %d; connect it first",
			     comm->rank, send ? "to" : "from", peer);
		*err = -ENOTCONN;
		return NULL;
	}
	k = dp_link_on(dp, c, peer, send, err, quiet);
	if (k)
		dp->links[2 * peer + !!send] = k;
	return k;
}

/* The link of (@peer, @send) on channel @ch, built on first use. */
struct dp_link *dp_link_on(struct dp *dp, int ch, int peer, int send,
			   int *err, int quiet)
{
	struct ncclComm *comm = dp->comm;
	struct dp_link **slot, *k;
	struct mlap2p_conn *conn;
	int p;

	if (peer < 0 || peer >= comm->nRanks || ch < 0 || ch >= MAXCHANNELS) {
		*err = -EINVAL;
		return NULL;
	}
	if (!dp->chan[ch]) {
		dp->chan[ch] = calloc(2 * (size_t)comm->nRanks,
				      sizeof(*dp->chan[ch]));
		if (!dp->chan[ch]) {
			*err = -ENOMEM;
			return NULL;
		}
	}
	slot = &dp->chan[ch][2 * peer + !!send];
	if (*slot)
		return *slot;
	conn = mlap2p_channel_conn(comm, ch, peer, send);
	if (conn && !conn->c.connected)
		conn = NULL;
	if (!conn) {
		if (!quiet)
			WARN("rank %d: no connection %s rank %d on channel %d; connect it first",
			     comm->rank, send ? "to" : "from", peer, ch);
		*err = -ENOTCONN;
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		*err = -ENOMEM;
		return NULL;
	}
	k->pidfd = -1;
	k->dp = dp;
	k->conn = conn;
	k->l.conn = &conn->c.conn;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		k->l.buffSizes[p] = (size_t)conn->buffSizes[p];
	k->l.chunkSize = dp->chunk;
	k->l.ntMin = dp->ntMin;
	k->l.peer = peer;
	k->l.channel = conn->channel;
	if (conn->read)
		k->l.flags |= MLAP2P_LINK_READ;
	if (mlap2p_same_process(comm, peer))
		k->l.flags |= MLAP2P_LINK_SAMEPROC;
	if (dp->noDirect)
		k->l.flags |= MLAP2P_LINK_NODIRECT;
	/* NET: SIMPLE sends from registered regions go from the buffer. */
	if (send && conn->mode == MLAP2P_CONN_NET && !dp->noDirect)
		k->l.flags |= MLAP2P_LINK_NETPTR;
	/* NET: long SIMPLE receives land in the buffer, not the slots. */
	if (!send && conn->mode == MLAP2P_CONN_NET && !dp->noDirect)
		k->l.flags |= MLAP2P_LINK_NETRECV;
	/* A plain buffer can be offered (receive) or published (send) to a
	 * peer process on this host. */
	k->cma = !dp->noCma && !conn->read &&
		 (conn->mode == MLAP2P_CONN_DIRECT ||
		  conn->mode == MLAP2P_CONN_IPC) &&
		 comm->peerInfo[peer].hostHash ==
		 comm->peerInfo[comm->rank].hostHash;
	if (dp->noPull)
		k->l.flags |= MLAP2P_LINK_NOPULL;
	dp_cma_limits(dp, k);
	k->l.abortFlag = &comm->abortFlag;
	k->l.describe = dp_describe;
	k->l.resolve = dp_resolve;
	k->l.write_peer = dp_write_peer;
	k->l.read_peer = dp_read_peer;
	k->l.pull_peer = dp_pull_peer;
	k->l.still_peer = dp_still_peer;
	k->l.reg = dp_net_reg;
	k->l.publish = dp_publish;
	k->l.arg = k;
	k->l.head = 0;
	k->l.tail = 0;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
		if (mlap2p_proto_step_bytes(&k->l, p))
			k->usable |= 1U << p;
	/* dp_small(): LL and LL128 (bits 0 and 1) usable, no proxy, buffers
	 * mlap2p_ll_start() and mlap2p_ll128_start() accept. */
	if (conn->mode != MLAP2P_CONN_NET) {
		char *ll = k->l.conn->buffs[NCCL_PROTO_LL];
		char *ll128 = k->l.conn->buffs[NCCL_PROTO_LL128];

		if ((k->usable & dp->protoMask & 1) && ll &&
		    !((uintptr_t)ll & (MLAP2P_LL_LINE - 1)))
			k->small |= 1;
		if ((k->usable & dp->protoMask & 2) && ll128 &&
		    !((uintptr_t)ll128 & 7))
			k->small |= 2;
	}
	dp_small_ranges(dp, k);
	dp_prefault(k);
	*slot = k;
	return k;
}

/* ---- teardown ---- */

static void dp_free(struct ncclComm *comm)
{
	struct dp *dp = comm->dp;
	struct dp_link *k;
	int c, i;

	if (!dp)
		return;
	if (mlap2p_comm_aborted(comm))
		dp_quiesce(dp);
	dp_for_each_link(dp, c, i, k) {
		/* Requests still queued (abort) end as cancelled. */
		dp_withdraw(k);
		while (k->qhead)
			dp_complete(k, -ECANCELED);
		if (k->pidfd >= 0)
			close(k->pidfd);
		free(k);
	}
	for (c = 0; c < MAXCHANNELS; c++)
		free(dp->chan[c]);
	free(dp->links);
	free(dp);
	comm->dp = NULL;
	comm->dpFree = NULL;
}
