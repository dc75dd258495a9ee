// SPDX-License-Identifier: MIT
/*
 * lib/dataplane.c: <mlap2p/dataplane.h> on top of the protocol engines.
 *
 * Per communicator (comm->dp, created on first use) there is one link per
 * (peer, direction): the lowest connected channel's connector, its agreed
 * buffer sizes and a FIFO of operations.  Only the operation at the head of
 * a link's queue runs; the others wait their turn, so messages between two
 * ranks stay in order.  Links with queued operations sit on an active list,
 * and every wait is the same loop: one progress pass over the active list;
 * when nothing moved, spin/yield, and now and then check the abort flag and
 * the liveness of the peers being waited on.
 *
 * Blocking calls outside a group use an operation on the stack; groups and
 * isend/irecv allocate a request.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "mlap2p/dataplane.h"
#include "net.h"
#include "proto.h"

/* Defaults; docs/performance.md has the measurements behind them. */
#define DP_LL_MAX		64UL		/* LL up to this many bytes */
#define DP_LL128_MAX		(4UL << 10)	/* then LL128 up to this */
#define DP_CHUNK		(128UL << 10)	/* SIMPLE bytes per step */
#define DP_CMA_MIN		(32UL << 10)	/* cross-memory attach from */
#define DP_NT_MIN		(8UL << 20)	/* streaming copy-out from */
#define DP_CMA_BUCKETS		12		/* 32 KiB .. 64 MiB and up */
#define DP_CMA_PROBES		3		/* messages each way first */
#define DP_CMA_RECHECK		32		/* then the other now and then */
#define DP_SMALL_MAX		MLAP2P_LL128_SMALL	/* dp_small() up to this */
#define DP_PEER_TIMEOUT_MS	5000
#define DP_MAX_COMMS		64		/* for the dump signal */

struct dp;

/*
 * MLAP2P_CMA=auto: how fast messages of one size class moved through the
 * FIFO ([0]) and by cross-memory attach ([1]), as the receiver saw them:
 * from the sender taking the offer to the last byte in.
 */
struct dp_cma_stat {
	uint32_t n[2];			/* messages timed (not the first) */
	uint32_t msgs;			/* chosen since both were known */
	double nsPerByte[2];		/* moving average */
};

struct dp_link {
	struct mlap2p_link l;
	struct dp *dp;
	struct mlap2p_conn *conn;
	struct mlap2p_op *qhead, *qtail;	/* qhead is started */
	struct dp_link *activeNext;
	int active;
	int err;			/* broken: every new op fails so */
	uint64_t ops;			/* completed, for the dump */
	uint64_t direct;		/* of which single copy */
	int cma;			/* may offer plain buffers' addresses */
	int peerChecked;		/* write_peer: 1 pid verified, -1 not */
	int pidfd;			/* the peer's process, or -1 */
	uint64_t cmaNext;		/* where the message's next step goes */
	unsigned int usable;		/* protocols these buffers carry */
	int small;			/* dp_small() fits: 1 LL, 2 LL128 */
	/* dp_small() takes LL messages of [0, llEnd) bytes and LL128 ones of
	 * [ll128Beg, ll128End): dp_small_ranges() from dp_pick(). */
	size_t llEnd, ll128Beg, ll128End;
	struct dp_cma_stat cmaStat[DP_CMA_BUCKETS];
};

struct dp {
	struct ncclComm *comm;
	struct dp_link **links;		/* [2 * peer + send] */
	struct dp_link *active;
	int proto;			/* forced, or MLAP2P_PROTO_AUTO */
	unsigned int protoMask;		/* NCCL_PROTO */
	uint64_t llMax, ll128Max, chunk;
	int noDirect;
	int noCma;
	int cmaAuto;			/* choose per size class by timing */
	uint64_t cmaMin;		/* smaller messages: the FIFO */
	uint64_t ntMin;			/* link->ntMin */
	int noPull;
	long peerTimeoutMs, liveEveryMs;
	int64_t nextLive;
	uint32_t spinTight, spinYield;
	int slot;			/* in dp_registry, or -1 */
	int fence;			/* dp_in() may use plain stores */
	uint32_t inside;		/* calls of the owner thread inside */
	unsigned int pass;		/* progress passes, for waits on many */
};

struct mlap2p_request {
	struct mlap2p_op op;
	struct dp *dp;
	int status;
	int done;
	struct mlap2p_request *groupNext;
};

/* ---- registry for the dump signal ---- */

static struct dp *dp_registry[DP_MAX_COMMS];

static void dp_dump(struct dp *dp, int fd);

static void dp_dump_signal(int sig)
{
	int i, saved = errno;

	(void)sig;
	for (i = 0; i < DP_MAX_COMMS; i++) {
		struct dp *dp = __atomic_load_n(&dp_registry[i], __ATOMIC_ACQUIRE);

		if (dp)
			dp_dump(dp, STDERR_FILENO);
	}
	errno = saved;
}

static void dp_install_dump_signal(void)
{
	static int done;
	struct sigaction old, sa;
	long sig;

	if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
		return;
	if (mlap2p_env_int("MLAP2P_DUMP_SIGNAL", 0, SIGRTMAX, SIGUSR1, &sig) ||
	    !sig)
		return;
	if (sigaction((int)sig, NULL, &old) || old.sa_handler != SIG_DFL)
		return;	/* the application's handler wins */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = dp_dump_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (!sigaction((int)sig, &sa, NULL))
		INFO(NCCL_ENV, "signal %ld dumps the data plane's state", sig);
}

static void dp_register(struct dp *dp)
{
	int i;

	dp->slot = -1;
	for (i = 0; i < DP_MAX_COMMS; i++) {
		struct dp *none = NULL;

		if (__atomic_compare_exchange_n(&dp_registry[i], &none, dp, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			dp->slot = i;
			return;
		}
	}
}

/* ---- being inside (abort safety) ---- */

/*
 * mlap2p_comm_abort() from another thread sets the abort flag, then calls
 * dp_free(), which must not free what a call in progress still touches.
 * The communicator's busy count (mlap2p_comm_enter) does that with two
 * atomic read-modify-writes per call, which is a measurable part of an
 * 8-byte message.  With membarrier(2) the owner thread instead marks itself
 * inside with plain stores and then reads the abort flag; dp_free() runs
 * membarrier() between the flag and its read of dp->inside, so either the
 * call sees the flag or dp_free() sees the call (an asymmetric Dekker).
 * Without membarrier, the busy count.
 */
static int dp_membarrier_ok(void)
{
	static int ok = -1;
	int v = __atomic_load_n(&ok, __ATOMIC_ACQUIRE);

	if (v < 0) {
		v = syscall(__NR_membarrier,
			    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
		__atomic_store_n(&ok, v, __ATOMIC_RELEASE);
	}
	return v;
}

static inline __attribute__((always_inline)) int dp_in(struct dp *dp)
{
	uint32_t n;

	if (!dp->fence)
		return mlap2p_comm_enter(dp->comm);
	n = __atomic_load_n(&dp->inside, __ATOMIC_RELAXED);
	__atomic_store_n(&dp->inside, n + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!mlap2p_comm_aborted(dp->comm))
		return 0;
	__atomic_store_n(&dp->inside, n, __ATOMIC_RELEASE);
	return -ECANCELED;
}

static void dp_out(struct dp *dp)
{
	if (!dp->fence) {
		mlap2p_comm_leave(dp->comm);
		return;
	}
	__atomic_store_n(&dp->inside,
			 __atomic_load_n(&dp->inside, __ATOMIC_RELAXED) - 1,
			 __ATOMIC_RELEASE);
}

/* dp_free() at abort: wait until no call is inside. */
static void dp_quiesce(struct dp *dp)
{
	if (!dp->fence)
		return;	/* the busy count was waited for already */
	syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	while (__atomic_load_n(&dp->inside, __ATOMIC_ACQUIRE))
		sched_yield();
}

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
	ret = mlap2p_env_size("MLAP2P_CMA_MIN", 0, 1ULL << 40, DP_CMA_MIN,
			      &dp->cmaMin);
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

static struct dp *dp_get(struct ncclComm *comm)
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
	dp_register(dp);
	dp_install_dump_signal();
	return dp;
}

/* ---- single copy through the runtime ---- */

static struct dp_cma_stat *dp_cma_stat(struct dp_link *k, size_t bytes)
{
	int b = 0;

	while (b < DP_CMA_BUCKETS - 1 && bytes >= (64UL << 10) << b)
		b++;
	return &k->cmaStat[b];
}

/*
 * MLAP2P_CMA=auto: offer a plain receive buffer by address for a message
 * of @bytes?  Which of the FIFO and cross-memory attach is faster depends
 * on where the two processes run (which caches they share), which a
 * virtual machine does not tell, so each receive link finds out per size
 * class: DP_CMA_PROBES messages each way, alternating, then the faster
 * one, and the other again every DP_CMA_RECHECK messages in case the
 * processes moved.
 */
static int dp_cma_choose(struct dp_link *k, size_t bytes)
{
	struct dp_cma_stat *m = dp_cma_stat(k, bytes);
	int faster;

	if (m->n[0] < DP_CMA_PROBES || m->n[1] < DP_CMA_PROBES)
		return m->n[1] <= m->n[0];
	faster = m->nsPerByte[1] <= m->nsPerByte[0];
	return ++m->msgs % DP_CMA_RECHECK ? faster : !faster;
}

/* The receive @op on @k is done: time it for dp_cma_choose(). */
static void dp_cma_record(struct dp_link *k, const struct mlap2p_op *op)
{
	struct dp_cma_stat *m = dp_cma_stat(k, op->bytes);
	int way = op->offeredAddr ? 1 : 0;
	uint64_t now;
	double v;

	if (op->senderStart <= MLAP2P_XCHG_TIME_ME ||
	    (op->mode != MLAP2P_MODE_FIFO && op->mode != MLAP2P_MODE_WRITE))
		return;	/* not timed, or refused: the slots carried it */
	now = mlap2p_now_ns();
	if (now <= op->senderStart)
		return;
	v = (double)(now - op->senderStart) / (double)op->bytes;
	/* The first of each way pays for cold pages and caches. */
	if (m->n[way]++ == 0)
		return;
	m->nsPerByte[way] = m->n[way] == 2 ? v :
			    0.75 * m->nsPerByte[way] + 0.25 * v;
	if (m->n[way] == DP_CMA_PROBES && m->n[!way] >= DP_CMA_PROBES)
		INFO(NCCL_P2P, "rank %d <- %d: %zu-byte messages: %.2f GB/s through the FIFO, %.2f GB/s by cross-memory attach; %s",
		     k->dp->comm->rank, k->l.peer, op->bytes,
		     1.0 / m->nsPerByte[0], 1.0 / m->nsPerByte[1],
		     m->nsPerByte[1] <= m->nsPerByte[0] ?
		     "cross-memory attach" : "the FIFO");
}

static int dp_describe(void *arg, const void *buf, size_t bytes,
		       struct mlap2p_xchg *x)
{
	struct dp_link *k = arg;
	struct ncclRtIpcMemHandle ipc;
	size_t offset, after;

	_Static_assert(sizeof(ipc) == sizeof(x->ipc), "ipc handle size");
	if (!mlap2p_region_lookup(k->dp->comm, buf, &ipc, &offset, &after) &&
	    after >= bytes) {
		memcpy(x->ipc, &ipc, sizeof(x->ipc));
		x->offset = offset;
		return MLAP2P_DESCRIBE_HANDLE;
	}
	/* Below cmaMin the two copies through the FIFO cost less than the
	 * system call and handshake (docs/performance.md). */
	if (!k->cma || bytes < k->dp->cmaMin)
		return 0;
	if (k->dp->cmaAuto) {
		x->start = MLAP2P_XCHG_TIME_ME;	/* for dp_cma_record() */
		if (!dp_cma_choose(k, bytes))
			return 0;
	}
	x->offset = (uintptr_t)buf;
	return MLAP2P_DESCRIBE_ADDR;
}

/*
 * Cross-memory attach: copy into (@write) or out of the peer's process.
 * Its pid is the one the liveness checks watch; that it still names the
 * peer (and the same pid namespace) is checked once against the start time
 * the peer reported.  The kernel checks ptrace access and answers -EPERM
 * when it is refused.
 */
static int dp_peer_copy(struct dp_link *k, uint64_t addr, void *buf,
			size_t bytes, int write)
{
	const struct ncclPeerInfo *pi = &k->dp->comm->peerInfo[k->l.peer];
	struct iovec local = { .iov_base = buf, .iov_len = bytes };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr,
				.iov_len = bytes };
	ssize_t n;

	if (!k->peerChecked) {
		uint64_t t;

		k->peerChecked = mlap2p_pid_hash(pi->pid) == pi->pidHash &&
				 !mlap2p_proc_start_time(pi->pid, &t) &&
				 t == pi->startTime ? 1 : -1;
		if (k->peerChecked < 0)
			INFO(NCCL_P2P, "rank %d: pid %d is not rank %d as this process sees it; no cross-memory attach",
			     k->dp->comm->rank, pi->pid, k->l.peer);
#ifdef SYS_pidfd_open
		/* Holds on to that very process: it shows when it exits, so
		 * a recycled pid is never written to. */
		if (k->peerChecked > 0)
			k->pidfd = (int)syscall(SYS_pidfd_open, pi->pid, 0);
#endif
	}
	if (k->peerChecked < 0)
		return -EPERM;
	/* Each message's first step: is the peer still that process? */
	if (addr != k->cmaNext && k->pidfd >= 0) {
		struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

		if (poll(&p, 1, 0) > 0)
			goto died;
	}
	k->cmaNext = addr + bytes;
	while (local.iov_len) {
		n = write ? process_vm_writev(pi->pid, &local, 1, &remote, 1, 0) :
			    process_vm_readv(pi->pid, &local, 1, &remote, 1, 0);
		if (n < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			if (err == ESRCH)
				goto died;
			if (err == EPERM || err == ENOSYS)
				INFO(NCCL_P2P, "rank %d: cannot %s rank %d (pid %d): %s; %s",
				     k->dp->comm->rank,
				     write ? "write into" : "read from",
				     k->l.peer, pi->pid, strerror(err),
				     write ? "two copies from now on" :
				     "the sender copies alone");
			return -err;
		}
		if (!n)
			return -EFAULT;
		local.iov_base = (char *)local.iov_base + n;
		local.iov_len -= (size_t)n;
		remote.iov_base = (char *)remote.iov_base + n;
		remote.iov_len -= (size_t)n;
	}
	return 0;
died:	/* as the liveness check says it */
	WARN("rank %d: peer rank %d (pid %d) died; a %s it failed (%zu bytes by cross-memory attach)",
	     k->dp->comm->rank, k->l.peer, pi->pid,
	     write ? "send to" : "receive from", bytes);
	return -ECONNRESET;
}

static int dp_write_peer(void *arg, uint64_t addr, const void *src,
			 size_t bytes)
{
	return dp_peer_copy(arg, addr, (void *)src, bytes, 1);
}

static int dp_read_peer(void *arg, uint64_t addr, void *dst, size_t bytes)
{
	return dp_peer_copy(arg, addr, dst, bytes, 0);
}

/* NET: may the proxy send this buffer in place (a registered region)? */
static int dp_net_reg(void *arg, const void *buf, size_t bytes)
{
	struct dp_link *k = arg;

	return mlap2p_net_reg(&k->conn->c, buf, bytes);
}

static int dp_resolve(void *arg, const struct mlap2p_xchg *x, void **ptr)
{
	struct dp_link *k = arg;
	struct ncclRtIpcMemHandle ipc;
	size_t size;
	void *base;
	int ret;

	memcpy(&ipc, x->ipc, sizeof(ipc));
	ret = mlap2p_import_region(k->dp->comm, &ipc, &base, &size);
	if (ret) {
		WARN("rank %d: cannot map the buffer rank %d offered: %s",
		     k->dp->comm->rank, k->l.peer, strerror(-ret));
		return ret;
	}
	if (x->offset > size || size - x->offset < x->bytes) {
		WARN("rank %d: rank %d offered %llu bytes at %llu of a %zu-byte region",
		     k->dp->comm->rank, k->l.peer,
		     (unsigned long long)x->bytes,
		     (unsigned long long)x->offset, size);
		return -EPROTO;
	}
	*ptr = (char *)base + x->offset;
	return 0;
}

/* ---- protocol choice ---- */

static int dp_pick(struct dp *dp, const struct dp_link *k, size_t bytes)
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
static void dp_small_ranges(struct dp *dp, struct dp_link *k)
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
 * NCCL_STEPS messages), which MLAP2P_CMA=auto would take for the FIFO's
 * speed.  Best effort: older kernels and device mappings say no.
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

/* The link to @peer, built on first use; @quiet: no WARN if unconnected. */
static struct dp_link *dp_link(struct dp *dp, int peer, int send, int *err,
			       int quiet)
{
	struct ncclComm *comm = dp->comm;
	struct dp_link **slot, *k;
	struct mlap2p_conn *conn = NULL;
	int c, p;

	if (peer < 0 || peer >= comm->nRanks) {
		*err = -EINVAL;
		return NULL;
	}
	slot = &dp->links[2 * peer + !!send];
	if (*slot)
		return *slot;
	for (c = 0; c < MAXCHANNELS && !conn; c++) {
		conn = mlap2p_comm_conn(comm, c, peer, send);
		if (conn && !conn->c.connected)
			conn = NULL;
	}
	if (!conn) {
		if (!quiet)
			WARN("rank %d: no connection %s rank %d; connect it first",
			     comm->rank, send ? "to" : "from", peer);
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
	if (comm->peerInfo[peer].pidHash == comm->peerInfo[comm->rank].pidHash &&
	    comm->peerInfo[peer].hostHash == comm->peerInfo[comm->rank].hostHash)
		k->l.flags |= MLAP2P_LINK_SAMEPROC;
	if (dp->noDirect)
		k->l.flags |= MLAP2P_LINK_NODIRECT;
	/* NET: SIMPLE sends from registered regions go from the buffer. */
	if (send && conn->mode == MLAP2P_CONN_NET && !dp->noDirect)
		k->l.flags |= MLAP2P_LINK_NETPTR;
	/* NET: long SIMPLE receives land in the buffer, not the slots. */
	if (!send && conn->mode == MLAP2P_CONN_NET && !dp->noDirect)
		k->l.flags |= MLAP2P_LINK_NETRECV;
	/* A plain buffer can be offered to a peer process on this host. */
	k->cma = !dp->noCma && !send && !conn->read &&
		 (conn->mode == MLAP2P_CONN_DIRECT ||
		  conn->mode == MLAP2P_CONN_IPC) &&
		 comm->peerInfo[peer].hostHash ==
		 comm->peerInfo[comm->rank].hostHash;
	if (dp->noPull)
		k->l.flags |= MLAP2P_LINK_NOPULL;
	k->l.abortFlag = &comm->abortFlag;
	k->l.describe = dp_describe;
	k->l.resolve = dp_resolve;
	k->l.write_peer = dp_write_peer;
	k->l.read_peer = dp_read_peer;
	k->l.reg = dp_net_reg;
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

/* ---- queues ---- */

static const char *dp_what(const struct mlap2p_op *op)
{
	return op->send ? "send to" : "receive from";
}

static void dp_finish(struct mlap2p_op *op, int status)
{
	struct mlap2p_request *req = op->owner;

	req->status = status;
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

/*
 * Start @op, now at the head of @k.  A SIMPLE receive over NET announces
 * its buffer to the proxy, which then receives the steps it has not posted
 * yet straight into it (lib/proto.h, MLAP2P_LINK_NETRECV).
 */
static int dp_start(struct dp_link *k, struct mlap2p_op *op)
{
	int ret = mlap2p_op_start(op);

	if (!ret && !op->send && op->proto == NCCL_PROTO_SIMPLE &&
	    (k->l.flags & MLAP2P_LINK_NETRECV))
		op->landed = mlap2p_net_land(&k->conn->c, op->buf, op->first,
					     op->left, op->perStep, op->bytes);
	return ret;
}

/* @op ends: the NET proxy receives into its buffer no more. */
static void dp_unland(struct dp_link *k, struct mlap2p_op *op, int status)
{
	struct dp *dp = k->dp;
	long tmo = dp->peerTimeoutMs ? dp->peerTimeoutMs : DP_PEER_TIMEOUT_MS;

	if (!op->landed)
		return;
	op->landed = 0;
	if (!mlap2p_net_unland(&k->conn->c, status ? tmo : 0))
		WARN("rank %d: a receive from rank %d into a cancelled buffer of %zu bytes was still pending after %ld ms",
		     dp->comm->rank, k->l.peer, op->bytes, tmo);
}

/* Pop the head of @k with @status and start what follows. */
static void dp_complete(struct dp_link *k, int status)
{
	struct mlap2p_op *op = k->qhead;

	k->qhead = op->next;
	if (!k->qhead)
		k->qtail = NULL;
	k->ops++;
	if (!status && op->proto == NCCL_PROTO_SIMPLE &&
	    op->mode != MLAP2P_MODE_FIFO && op->mode != MLAP2P_MODE_REFUSED)
		k->direct++;
	if (!status && !op->send && op->proto == NCCL_PROTO_SIMPLE &&
	    k->cma && k->dp->cmaAuto && op->bytes >= k->dp->cmaMin)
		dp_cma_record(k, op);
	if (status && !k->err)
		k->err = status;
	dp_unland(k, op, status);
	dp_finish(op, status);
	while (k->qhead) {
		int ret = k->err ? k->err : dp_start(k, k->qhead);

		if (!ret)
			break;
		op = k->qhead;
		k->qhead = op->next;
		if (!k->qhead)
			k->qtail = NULL;
		dp_finish(op, ret);
	}
}

/* Fail everything queued on @k with @err (the link is broken). */
/*
 * A receive that offered its buffer's address to a peer process is about
 * to end unfinished: wait until the sender can write into it no more
 * (mlap2p_simple_revoke), or the sender is gone, or the peer timeout.
 */
static void dp_withdraw(struct dp_link *k)
{
	struct dp *dp = k->dp;
	int64_t deadline;

	if (!k->qhead || mlap2p_simple_revoke(k->qhead))
		return;
	deadline = mlap2p_now_ms() + (dp->peerTimeoutMs ? dp->peerTimeoutMs :
				      DP_PEER_TIMEOUT_MS);
	while (!mlap2p_simple_revoke(k->qhead)) {
		if (mlap2p_peer_alive(dp->comm, k->l.peer))
			return;
		if (mlap2p_now_ms() > deadline) {
			WARN("rank %d: rank %d did not confirm it stopped writing into a cancelled receive of %zu bytes",
			     dp->comm->rank, k->l.peer, k->qhead->bytes);
			return;
		}
		sched_yield();
	}
}

static void dp_fail_link(struct dp_link *k, int err)
{
	k->err = err;
	dp_withdraw(k);
	while (k->qhead)
		dp_complete(k, err);
}

static void dp_activate(struct dp *dp, struct dp_link *k)
{
	if (k->active)
		return;
	k->active = 1;
	k->activeNext = dp->active;
	dp->active = k;
}

/* Progress the head of @k once; 1 if anything moved (or failed). */
static int dp_step(struct dp *dp, struct dp_link *k)
{
	int net = k->conn->mode == MLAP2P_CONN_NET, moved = 0, ret;

	/* NET: move the link's steps here rather than wait for the proxy
	 * thread (lib/net.c); P2P links have no proxy.  A receive takes what
	 * the pass delivers, a send hands the pass what it just wrote. */
	if (net && !k->conn->send && mlap2p_net_progress(&k->conn->c) > 0)
		moved = 1;
	ret = mlap2p_op_progress(k->qhead);
	if (net && k->conn->send && mlap2p_net_progress(&k->conn->c) > 0)
		moved = 1;
	if (ret == MLAP2P_OP_DONE) {
		dp_complete(k, 0);
		return 1;
	}
	if (ret < 0) {
		struct mlap2p_op *op = k->qhead;

		if (ret == -EPROTO)
			WARN("rank %d: %s rank %d: %zu bytes (%s) do not match what the peer posted",
			     dp->comm->rank, dp_what(op), k->l.peer,
			     op->bytes, mlap2p_proto_name(op->proto));
		else if (ret != -ECONNRESET)	/* that one said who */
			WARN("rank %d: %s rank %d failed: %s",
			     dp->comm->rank, dp_what(op), k->l.peer,
			     strerror(-ret));
		mlap2p_comm_set_error(dp->comm, ret);
		dp_fail_link(k, ret);
		return 1;
	}
	return moved || ret == MLAP2P_OP_MOVED;
}

/*
 * Queue @req on its link and start it if the link is idle; @now: also move
 * it at once, so a message that fits (an LL send with credit) completes
 * without entering a wait.
 */
static int dp_post(struct dp *dp, struct mlap2p_request *req, int send,
		   void *buf, size_t bytes, int peer, int now)
{
	struct mlap2p_op *op = &req->op;
	struct dp_link *k;
	int ret = 0, proto;

	req->dp = dp;
	req->status = 0;
	req->done = 0;
	req->groupNext = NULL;
	k = dp_link(dp, peer, send, &ret, 0);
	if (!k)
		return ret;
	if (k->err)
		return k->err;
	proto = dp_pick(dp, k, bytes);
	if (proto < 0) {
		WARN("rank %d: no protocol may carry %zu bytes (NCCL_PROTO, buffer sizes)",
		     dp->comm->rank, bytes);
		return proto;
	}
	op->link = &k->l;
	op->proto = proto;
	op->send = send;
	op->buf = buf;
	op->bytes = bytes;
	op->owner = req;
	op->next = NULL;
	if (k->qtail) {
		k->qtail->next = op;
		k->qtail = op;
		return 0;
	}
	ret = dp_start(k, op);
	if (ret)
		return ret;
	k->qhead = k->qtail = op;
	if (now && dp_step(dp, k) && !k->qhead)
		return 0;	/* done, or failed: req says which */
	dp_activate(dp, k);
	return 0;
}

/* One pass over the active links; 1 if anything moved. */
static int dp_progress(struct dp *dp)
{
	struct dp_link **pk = &dp->active;
	int moved = 0;

	dp->pass++;
	while (*pk) {
		struct dp_link *k = *pk;

		moved |= dp_step(dp, k);
		if (!k->qhead) {
			k->active = 0;
			*pk = k->activeNext;
		} else {
			pk = &k->activeNext;
		}
	}
	return moved;
}

/*
 * The word a lone waiting receive can poll instead of passes of
 * dp_progress() (the latency path): only when its link is the only active
 * one and has no proxy to drive.
 */
static int dp_watch(const struct dp *dp, const struct mlap2p_request *req,
		    struct mlap2p_watch *x)
{
	const struct dp_link *k = dp->active;

	if (!k || k->activeNext || k->qhead != &req->op ||
	    k->conn->mode == MLAP2P_CONN_NET)
		return 0;
	return mlap2p_op_watch(&req->op, x);
}

/*
 * Abort and liveness, when the spinner says it is time.  Fails the ops of
 * the links concerned; returns non-zero if anything failed.
 */
static int dp_check(struct dp *dp)
{
	struct ncclComm *comm = dp->comm;
	struct dp_link *k;
	int64_t now;
	int failed = 0;

	if (mlap2p_comm_aborted(comm)) {
		while ((k = dp->active)) {
			dp->active = k->activeNext;
			k->active = 0;
			dp_fail_link(k, -ECANCELED);
		}
		return 1;
	}
	if (!dp->peerTimeoutMs)
		return 0;
	now = mlap2p_now_ms();
	if (now < dp->nextLive)
		return 0;
	dp->nextLive = now + dp->liveEveryMs;
	for (k = dp->active; k; k = k->activeNext) {
		int peer = k->l.peer, ret, proto;
		const char *what;
		size_t bytes;

		if (!k->qhead)
			continue;
		ret = mlap2p_peer_alive(comm, peer);
		if (!ret)
			continue;
		what = k->qhead->send ? "a send to" : "a receive from";
		bytes = k->qhead->bytes;
		proto = k->qhead->proto;
		mlap2p_comm_set_error(comm, -ECONNRESET);
		dp_fail_link(k, -ECONNRESET);
		/* Anything else queued for that rank fails too. */
		if (dp->links[2 * peer + !k->conn->send])
			dp_fail_link(dp->links[2 * peer + !k->conn->send],
				     -ECONNRESET);
		/* Last, so that it is the error the caller reads, after
		 * what failing the ops had to say (dp_unland). */
		if (ret == -ESRCH)
			WARN("rank %d: peer rank %d (pid %d) died; %s it failed (%zu bytes, %s, channel %d)",
			     comm->rank, peer, comm->peerInfo[peer].pid, what,
			     bytes, mlap2p_proto_name(proto), k->l.channel);
		else	/* NET: the peer may live, but nothing reaches it */
			WARN("rank %d: the network path to peer rank %d failed (%s); %s it failed (%zu bytes, %s, channel %d)",
			     comm->rank, peer, strerror(-ret), what, bytes,
			     mlap2p_proto_name(proto), k->l.channel);
		failed = 1;
	}
	if (failed) {	/* drop emptied links from the active list */
		struct dp_link **pk = &dp->active;

		while ((k = *pk)) {
			if (!k->qhead) {
				k->active = 0;
				*pk = k->activeNext;
			} else {
				pk = &k->activeNext;
			}
		}
	}
	return failed;
}

static int dp_all_done(struct mlap2p_request **reqs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (reqs[i] && !__atomic_load_n(&reqs[i]->done, __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

/*
 * Progress until every request of reqs[0..n) is done.  They may belong to
 * several communicators; each is progressed once per round.
 */
static void dp_wait_reqs(struct mlap2p_request **reqs, int n)
{
	struct mlap2p_spin spin;
	unsigned int round = 0;
	int i;

	if (n == 1 && reqs[0]) {	/* the latency path */
		struct dp *dp = reqs[0]->dp;

		mlap2p_spin_init(&spin, dp->spinTight, dp->spinYield);
		while (!reqs[0]->done) {
			struct mlap2p_watch x;
			int w;

			if (dp_progress(dp)) {
				mlap2p_spin_moved(&spin);
				continue;
			}
			w = dp_watch(dp, reqs[0], &x);
			do {
				if (mlap2p_spin_idle(&spin)) {
					dp_check(dp);
					break;
				}
			} while (w && !mlap2p_watch_ready(&x));
		}
		return;
	}
	mlap2p_spin_init(&spin, MLAP2P_SPIN_TIGHT, MLAP2P_SPIN_YIELD);
	for (i = 0; i < n; i++)
		if (reqs[i] && reqs[i]->dp->spinYield < spin.yield) {
			spin.yield = reqs[i]->dp->spinYield;
			spin.tight = reqs[i]->dp->spinTight;
		}
	while (!dp_all_done(reqs, n)) {
		int moved = 0, check;

		round++;
		for (i = 0; i < n; i++) {
			struct dp *dp = reqs[i] ? reqs[i]->dp : NULL;

			if (!dp || reqs[i]->done || dp->pass == round)
				continue;
			moved |= dp_progress(dp);
			dp->pass = round;
		}
		if (moved) {
			mlap2p_spin_moved(&spin);
			continue;
		}
		check = mlap2p_spin_idle(&spin);
		for (i = 0; check && i < n; i++)
			if (reqs[i] && !reqs[i]->done)
				dp_check(reqs[i]->dp);
	}
}

/* ---- groups ---- */

/*
 * Read on every send and receive, but not initial-exec: one initial-exec
 * variable puts the library's whole TLS block (2 KiB, with the error
 * buffers) in glibc's static TLS surplus, which a process that loaded
 * torch first no longer has, so dlopen() of libmlap2p (a Python
 * extension, a plugin) failed with "cannot allocate memory in static TLS
 * block".
 */
#define MLAP2P_TLS_IE

static __thread int group_depth MLAP2P_TLS_IE;
static __thread struct mlap2p_request *group_head MLAP2P_TLS_IE;
static __thread int group_err MLAP2P_TLS_IE;

int mlap2p_group_depth(void)
{
	return group_depth;
}

MLAP2P_EXPORT int mlap2p_group_start(void)
{
	group_depth++;
	return 0;
}

MLAP2P_EXPORT int mlap2p_group_end(void)
{
	struct mlap2p_request **reqs, *r;
	int n = 0, i, ret, cret;

	if (group_depth <= 0)
		return mlap2p_err(-EINVAL);
	if (--group_depth)
		return 0;
	/* Collectives recorded in the group run now; their progress moves
	 * the group's sends and receives too (lib/coll/). */
	cret = mlap2p_coll_group_end();
	for (r = group_head; r; r = r->groupNext)
		n++;
	reqs = calloc(n ? n : 1, sizeof(*reqs));
	if (!reqs) {
		/* Cannot track them: wait for each in turn. */
		for (r = group_head; r; r = r->groupNext)
			dp_wait_reqs(&r, 1);
	} else {
		for (i = 0, r = group_head; r; r = r->groupNext)
			reqs[i++] = r;
		/* Everyone is inside a blocking call now. */
		for (i = 0; i < n; i++)
			if (dp_in(reqs[i]->dp))
				reqs[i]->dp = NULL;
		for (i = 0; i < n; i++)
			if (!reqs[i]->dp) {
				reqs[i]->status = -ECANCELED;
				reqs[i]->done = 1;
			}
		/* Requests without a dp are done; dp_wait_reqs skips them. */
		dp_wait_reqs(reqs, n);
		for (i = 0; i < n; i++)
			if (reqs[i]->dp)
				dp_out(reqs[i]->dp);
		free(reqs);
	}
	ret = group_err ? group_err : cret;
	while ((r = group_head)) {
		group_head = r->groupNext;
		if (!ret)
			ret = r->status;
		free(r);
	}
	group_err = 0;
	return mlap2p_err(ret);
}

/* ---- the API ---- */

static int dp_enter(struct mlap2p_comm *api, struct dp **dpp)
{
	struct ncclComm *comm;
	struct dp *dp;
	int ret;

	if (!api)
		return -EINVAL;
	comm = mlap2p_nccl(api);
	dp = comm->dp;
	if (!dp) {	/* first use: create it under the busy count */
		ret = mlap2p_comm_enter(comm);
		if (ret)
			return ret;
		dp = dp_get(comm);
		ret = dp ? 0 : -errno;
		mlap2p_comm_leave(comm);
		if (ret)
			return ret;
	}
	ret = dp_in(dp);
	if (ret)
		return ret;
	*dpp = dp;
	return 0;
}

static int dp_blocking(struct mlap2p_comm *api, int send, void *buf,
		       size_t bytes, int peer)
{
	struct mlap2p_request local, *req = &local, *reqs[1];
	struct dp *dp;
	int ret;

	if (!buf && bytes)
		return mlap2p_err(-EINVAL);
	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	if (group_depth) {
		req = malloc(sizeof(*req));
		if (!req) {
			dp_out(dp);
			return mlap2p_err(-ENOMEM);
		}
	}
	ret = dp_post(dp, req, send, buf, bytes, peer, !group_depth);
	if (group_depth) {
		if (ret) {
			free(req);
			if (!group_err)
				group_err = ret;
		} else {
			req->groupNext = group_head;
			group_head = req;
		}
	} else if (!ret) {
		reqs[0] = req;
		dp_wait_reqs(reqs, 1);
		ret = req->status;
	}
	dp_out(dp);
	return mlap2p_err(ret);
}

/*
 * The latency path: a blocking LL or LL128 message of a few lines (at
 * most MLAP2P_LL_SMALL, MLAP2P_LL128_SMALL bytes) on an idle P2P link of
 * a connected peer moves here, without a request, a queue or a pass over
 * the active links.  1 if it did; 0 sends everything else (no credit,
 * a receive not there within the tight spin, any error) to dp_blocking(),
 * which does the same the long way and owns the abort, liveness and error
 * reporting.
 */
static inline __attribute__((always_inline)) int
dp_small(struct mlap2p_comm *api, int send, void *buf,
		    size_t bytes, int peer)
{
	struct ncclComm *comm;
	struct dp_link *k;
	struct dp *dp;
	uint32_t n, polls;
	int done, ll;

	if (!api || group_depth || (!buf && bytes))
		return 0;
	comm = mlap2p_nccl(api);
	dp = comm->dp;
	if (!dp || peer < 0 || peer >= comm->nRanks)
		return 0;
	k = dp->links[2 * peer + send];
	if (!k || k->qhead || k->err)
		return 0;
	ll = bytes < k->llEnd;
	if (!ll && bytes - k->ll128Beg >= k->ll128End - k->ll128Beg)
		return 0;
	if (dp_in(dp))
		return 0;
	if (send) {
		done = ll ? mlap2p_ll_send_small(&k->l, buf, bytes) :
			    mlap2p_ll128_send_small(&k->l, buf, bytes);
	} else {
		/* Tight polls, the abort flag every 256 of them. */
		polls = dp->spinTight < 256 ? dp->spinTight : 256;
		for (n = polls; !(done = ll ?
				  mlap2p_ll_recv_small(&k->l, buf, bytes, polls) :
				  mlap2p_ll128_recv_small(&k->l, buf, bytes,
							  polls)); n += polls)
			if (n >= dp->spinTight || mlap2p_comm_aborted(comm))
				break;
	}
	if (done)
		k->ops++;
	dp_out(dp);
	return done;
}

MLAP2P_EXPORT int mlap2p_send(struct mlap2p_comm *comm, const void *buf,
			      size_t bytes, int peer)
{
	if (dp_small(comm, 1, (void *)buf, bytes, peer))
		return 0;
	return dp_blocking(comm, 1, (void *)buf, bytes, peer);
}

MLAP2P_EXPORT int mlap2p_recv(struct mlap2p_comm *comm, void *buf,
			      size_t bytes, int peer)
{
	if (dp_small(comm, 0, buf, bytes, peer))
		return 0;
	return dp_blocking(comm, 0, buf, bytes, peer);
}

static int dp_ipost(struct mlap2p_comm *api, int send, void *buf,
		    size_t bytes, int peer, struct mlap2p_request **reqp)
{
	struct mlap2p_request *req;
	struct dp *dp;
	int ret;

	if (!reqp || (!buf && bytes))
		return mlap2p_err(-EINVAL);
	*reqp = NULL;
	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	req = malloc(sizeof(*req));
	ret = req ? dp_post(dp, req, send, buf, bytes, peer, 0) : -ENOMEM;
	if (ret)
		free(req);
	else
		*reqp = req;
	dp_out(dp);
	return mlap2p_err(ret);
}

MLAP2P_EXPORT int mlap2p_isend(struct mlap2p_comm *comm, const void *buf,
			       size_t bytes, int peer,
			       struct mlap2p_request **req)
{
	return dp_ipost(comm, 1, (void *)buf, bytes, peer, req);
}

MLAP2P_EXPORT int mlap2p_irecv(struct mlap2p_comm *comm, void *buf,
			       size_t bytes, int peer,
			       struct mlap2p_request **req)
{
	return dp_ipost(comm, 0, buf, bytes, peer, req);
}

static int dp_reap(struct mlap2p_request **reqp)
{
	int ret = (*reqp)->status;

	free(*reqp);
	*reqp = NULL;
	return ret;
}

MLAP2P_EXPORT int mlap2p_request_test(struct mlap2p_request **reqp, int *done)
{
	struct mlap2p_request *req;

	if (!reqp || !*reqp || !done)
		return mlap2p_err(-EINVAL);
	req = *reqp;
	*done = 0;
	if (!req->done) {
		struct dp *dp = req->dp;

		if (dp_in(dp))
			return mlap2p_err(-ECANCELED);
		if (!dp_progress(dp))
			dp_check(dp);
		dp_out(dp);
	}
	if (!req->done)
		return 0;
	*done = 1;
	return mlap2p_err(dp_reap(reqp));
}

MLAP2P_EXPORT int mlap2p_request_waitall(int n, struct mlap2p_request **reqs)
{
	struct dp **entered;
	int i, ret = 0, r;

	if (n < 0 || (n && !reqs))
		return mlap2p_err(-EINVAL);
	entered = calloc(n ? n : 1, sizeof(*entered));
	if (!entered)
		return mlap2p_err(-ENOMEM);
	/* Enter every communicator involved before anything completes. */
	for (i = 0; i < n; i++) {
		if (!reqs[i] || reqs[i]->done)
			continue;
		if (dp_in(reqs[i]->dp)) {
			while (--i >= 0)
				if (entered[i])
					dp_out(entered[i]);
			free(entered);
			return mlap2p_err(-ECANCELED);
		}
		entered[i] = reqs[i]->dp;
	}
	dp_wait_reqs(reqs, n);
	for (i = 0; i < n; i++)
		if (entered[i])
			dp_out(entered[i]);
	free(entered);
	for (i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		r = dp_reap(&reqs[i]);
		if (r && !ret)
			ret = r;
	}
	return mlap2p_err(ret);
}

MLAP2P_EXPORT int mlap2p_request_wait(struct mlap2p_request **req)
{
	if (!req || !*req)
		return mlap2p_err(-EINVAL);
	return mlap2p_request_waitall(1, req);
}

MLAP2P_EXPORT int mlap2p_set_proto(struct mlap2p_comm *api, int proto)
{
	struct dp *dp;
	int i, ret;

	if (proto < MLAP2P_PROTO_AUTO || proto >= NCCL_NUM_PROTOCOLS)
		return mlap2p_err(-EINVAL);
	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	dp->proto = proto;
	for (i = 0; i < 2 * dp->comm->nRanks; i++)
		if (dp->links[i])
			dp_small_ranges(dp, dp->links[i]);
	dp_out(dp);
	return 0;
}

MLAP2P_EXPORT int mlap2p_proto_for(struct mlap2p_comm *api, size_t bytes)
{
	struct dp_link *k = NULL;
	struct dp *dp;
	int ret, peer;

	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	/* Any connected link will do: buffer sizes are per comm. */
	for (peer = 0; peer < dp->comm->nRanks && !k; peer++)
		if (peer != dp->comm->rank)
			k = dp_link(dp, peer, 1, &ret, 1);
	ret = k ? dp_pick(dp, k, bytes) : -ENOTCONN;
	dp_out(dp);
	return ret < 0 ? mlap2p_err(ret) : ret;
}

MLAP2P_EXPORT const char *mlap2p_proto_name(int proto)
{
	switch (proto) {
	case NCCL_PROTO_LL:
		return "LL";
	case NCCL_PROTO_LL128:
		return "LL128";
	case NCCL_PROTO_SIMPLE:
		return "SIMPLE";
	}
	return "?";
}

/* ---- state dump ---- */

/* snprintf-only formatting and one write(2) per line: usable from the
 * dump signal's handler. */
static void dp_dump_link(const struct dp *dp, const struct dp_link *k, int fd)
{
	const struct ncclConnInfo *c = k->l.conn;
	const struct mlap2p_op *op = k->qhead;
	char line[320];
	int n;

	n = snprintf(line, sizeof(line),
		     "mlap2p: rank %d %s %d ch %d %s%s: step %llu head %llu tail %llu ops %llu single-copy %llu",
		     dp->comm->rank, k->conn->send ? "->" : "<-", k->l.peer,
		     k->l.channel, mlap2p_conn_mode_name(k->conn->mode),
		     k->conn->read ? "/read" : "",
		     (unsigned long long)c->step,
		     (unsigned long long)__atomic_load_n(c->head, __ATOMIC_RELAXED),
		     (unsigned long long)__atomic_load_n(c->tail, __ATOMIC_RELAXED),
		     (unsigned long long)k->ops,
		     (unsigned long long)k->direct);
	if (n < 0 || n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	if (op)
		n += snprintf(line + n, sizeof(line) - n,
			      " | busy: %s %zu B at step %llu, %zu B moved",
			      mlap2p_proto_name(op->proto), op->bytes,
			      (unsigned long long)op->step, op->off);
	else
		n += snprintf(line + n, sizeof(line) - n, " | idle");
	if (n >= (int)sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, n) < 0)
		return;
}

static void dp_dump(struct dp *dp, int fd)
{
	int i;

	for (i = 0; i < 2 * dp->comm->nRanks; i++)
		if (dp->links[i])
			dp_dump_link(dp, dp->links[i], fd);
}

MLAP2P_EXPORT int mlap2p_dump_state(struct mlap2p_comm *api, int fd)
{
	struct dp *dp;
	int ret;

	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	/* Make sure every connection appears, used or not. */
	for (ret = 0; ret < 2 * dp->comm->nRanks; ret++) {
		int err;

		if (ret / 2 != dp->comm->rank && !dp->links[ret])
			dp_link(dp, ret / 2, ret % 2, &err, 1);
	}
	dp_dump(dp, fd);
	dp_out(dp);
	return 0;
}

/* ---- teardown ---- */

static void dp_free(struct ncclComm *comm)
{
	struct dp *dp = comm->dp;
	int i;

	if (!dp)
		return;
	if (dp->slot >= 0)
		__atomic_store_n(&dp_registry[dp->slot], NULL, __ATOMIC_RELEASE);
	if (mlap2p_comm_aborted(comm))
		dp_quiesce(dp);
	for (i = 0; i < 2 * comm->nRanks; i++) {
		struct dp_link *k = dp->links[i];

		if (!k)
			continue;
		/* Requests still queued (abort) end as cancelled. */
		dp_withdraw(k);
		while (k->qhead)
			dp_complete(k, -ECANCELED);
		if (k->pidfd >= 0)
			close(k->pidfd);
		free(k);
	}
	free(dp->links);
	free(dp);
	comm->dp = NULL;
	comm->dpFree = NULL;
}
