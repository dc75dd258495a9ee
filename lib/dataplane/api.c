// SPDX-License-Identifier: MIT
/*
 * <mlap2p/dataplane.h>'s calls: being inside (abort safety), groups,
 * send/recv and the small-message path, requests, protocol choice.
 */
#include "dataplane/dp.h"

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
int dp_membarrier_ok(void)
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

void dp_out(struct dp *dp)
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
void dp_quiesce(struct dp *dp)
{
	if (!dp->fence)
		return;	/* the busy count was waited for already */
	syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	while (__atomic_load_n(&dp->inside, __ATOMIC_ACQUIRE))
		sched_yield();
}

/* ---- groups (the public calls are lib/coll/api.c's; dataplane.h) ---- */

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

void mlap2p_dp_group_start(void)
{
	group_depth++;
}

int mlap2p_dp_group_leave(void)
{
	if (group_depth <= 0)
		return -EINVAL;
	return --group_depth;
}

/*
 * A group request whose communicator is being aborted: the abort's
 * dp_free() may still complete it (it is queued on a link), so whoever
 * comes last frees it, this waiter or dp_finish().  Call only once the
 * status is no longer needed: @r may be gone on return.
 */
static void dp_abandon(struct mlap2p_request *r)
{
	if (__atomic_exchange_n(&r->done, DP_ABANDONED, __ATOMIC_ACQ_REL))
		free(r);	/* finished already */
}

#define DP_GROUP_FEW	16	/* records a group's end tracks on its stack */

/*
 * Take the records at group_head that share the first one's hold (one
 * communicator, posted one after another), at most @max - *n of them,
 * into reqs[*n...], each entered for the wait (dp_in); the hold is
 * entered once for them all, which keeps the atomics per record to the
 * one of mlap2p_comm_hold().  Once their communicator is aborted (it may
 * be freed already) the records are abandoned instead and their holds
 * put: then -ECANCELED, else 0.
 */
static int dp_group_take(struct mlap2p_request **reqs, int *n, int max)
{
	struct mlap2p_request *r = group_head;
	struct mlap2p_hold *h = r->hold;
	unsigned int dropped = 0;
	int entered = !mlap2p_hold_enter(h), ret = entered ? 0 : -ECANCELED;

	for (; r && r->hold == h && *n < max; r = group_head) {
		group_head = r->groupNext;
		if (!ret)
			ret = dp_in(r->dp);
		if (ret) {
			dp_abandon(r);
			dropped++;
		} else {
			reqs[(*n)++] = r;
		}
	}
	if (entered)
		mlap2p_hold_leave(h);
	mlap2p_hold_put(h, dropped);
	return ret;
}

/*
 * After dp_group_take() and the wait: leave and free reqs[0..n), put
 * their holds (one put per run that shares one), and return @ret, or the
 * first of their statuses if @ret is 0.
 */
static int dp_group_out(struct mlap2p_request **reqs, int n, int ret)
{
	struct mlap2p_hold *h = NULL;
	unsigned int held = 0;
	int i;

	for (i = 0; i < n; i++) {
		struct mlap2p_request *r = reqs[i];

		if (r->hold != h) {
			mlap2p_hold_put(h, held);
			h = r->hold;
			held = 0;
		}
		if (!ret)
			ret = r->status;
		dp_out(r->dp);
		free(r);
		held++;
	}
	mlap2p_hold_put(h, held);
	return ret;
}

/*
 * Everyone is inside a blocking call before the first wait, or their
 * communicator is being aborted: then its requests are the abort's to
 * finish, and whoever is last frees them.  A group of up to DP_GROUP_FEW
 * records allocates nothing here; without the memory to track a larger
 * one, each record is waited for in turn.
 */
int mlap2p_dp_group_wait(int err)
{
	struct mlap2p_request *few[DP_GROUP_FEW], **reqs = few, *r;
	int n = 0, max = DP_GROUP_FEW, ret, st;

	ret = group_err ? group_err : err;
	for (r = group_head; r; r = r->groupNext)
		n++;
	if (n > DP_GROUP_FEW) {
		reqs = calloc(n, sizeof(*reqs));
		max = n;
		if (!reqs) {
			reqs = few;
			max = 1;
		}
	}
	while (group_head) {
		n = 0;
		while (group_head && n < max) {
			st = dp_group_take(reqs, &n, max);
			if (!ret)
				ret = st;
		}
		dp_wait_reqs(reqs, n);
		ret = dp_group_out(reqs, n, ret);
	}
	if (reqs != few)
		free(reqs);
	group_err = 0;
	return ret;
}

/* ---- the API ---- */

int dp_enter(struct mlap2p_comm *api, struct dp **dpp)
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

int mlap2p_dp_nt_min(struct mlap2p_comm *api, uint64_t *bytes)
{
	struct dp *dp;
	int ret = dp_enter(api, &dp);

	if (ret)
		return ret;
	*bytes = dp->ntMin;
	dp_out(dp);
	return 0;
}

/* A connected send link (any will do: buffer sizes are per comm), or
 * NULL. */
static const struct dp_link *dp_any_link(struct dp *dp)
{
	struct dp_link *k = NULL;
	int peer, err;

	for (peer = 0; peer < dp->comm->nRanks && !k; peer++)
		if (peer != dp->comm->rank)
			k = dp_link(dp, peer, 1, &err, 1);
	return k;
}

/* FIFO steps a message of @bytes takes on @k now (more than NCCL_STEPS
 * counts as NCCL_STEPS + 1), 0 if it goes SIMPLE (a SIMPLE send waits
 * for its receive), -errno. */
static int dp_fifo_steps(struct dp *dp, const struct dp_link *k,
			 size_t bytes)
{
	int proto = dp_pick(dp, k, bytes);
	size_t per;

	if (proto < 0 || proto == NCCL_PROTO_SIMPLE)
		return proto < 0 ? proto : 0;
	per = mlap2p_proto_step_bytes(&k->l, proto);
	if (!per)
		return 0;
	return bytes ? (int)mlap2p_min((bytes + per - 1) / per,
				       NCCL_STEPS + 1) : 1;
}

int mlap2p_dp_sends_ahead_end(struct mlap2p_comm *api, size_t first,
			      int max)
{
	const struct dp_link *k;
	struct dp *dp;
	int ret, a, b, steps = 0;

	ret = dp_enter(api, &dp);
	if (ret)
		return ret;
	k = dp_any_link(dp);
	a = k ? dp_fifo_steps(dp, k, first) : -ENOTCONN;
	for (b = 0; a > 0 && b <= max; b++) {
		steps = dp_fifo_steps(dp, k, (size_t)b);
		/* One step to spare: the LL wrap step, which carries
		 * nothing. */
		if (steps <= 0 || a + steps + 1 > NCCL_STEPS)
			break;
	}
	dp_out(dp);
	if (a <= 0)
		return a < 0 ? a : 0;
	return steps < 0 ? steps : b;
}

unsigned int mlap2p_dp_proto_epoch(struct mlap2p_comm *api)
{
	const struct dp *dp = mlap2p_nccl(api)->dp;

	return dp ? __atomic_load_n(&dp->protoEpoch, __ATOMIC_RELAXED) : 0;
}

int mlap2p_dp_syscall_dear(struct mlap2p_comm *api, int *dear)
{
	const struct ncclComm *comm;
	uint32_t ns = 0;
	struct dp *dp;
	int ret = dp_enter(api, &dp), p;

	if (ret)
		return ret;
	comm = dp->comm;
	for (p = 0; p < comm->nRanks; p++)
		if (comm->peerInfo[p].syscallNs > ns)
			ns = comm->peerInfo[p].syscallNs;
	*dear = dp_dear(dp, ns);
	dp_out(dp);
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
	req->group = group_depth > 0;
	ret = dp_post(dp, req, -1, send, buf, NULL, bytes, peer,
		      !group_depth);
	if (group_depth) {
		if (ret) {
			free(req);
			if (!group_err)
				group_err = ret;
		} else {
			req->hold = mlap2p_comm_hold(dp->comm);
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
 * reporting.  Inside a group a send takes it too: it never waits (no
 * credit is a 0), and on an idle link it goes where the group's record
 * would have been queued, first; so an exchange in a group allocates a
 * record for its receive only.  A receive in a group must wait for the
 * group's end (its peer may send after receiving).
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

	if (!api || (group_depth && !send) || (!buf && bytes))
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

/* @how: MLAP2P_POST_SEND, MLAP2P_POST_FIFO, MLAP2P_POST_TEE_NT
 * (dataplane.h). */
static int dp_ipost(struct mlap2p_comm *api, int ch, int how, void *buf,
		    void *tee, size_t bytes, int peer,
		    struct mlap2p_request **reqp)
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
	if (req)
		req->group = 0;
	ret = req ? dp_post(dp, req, ch, how, buf, tee, bytes, peer, 0) :
		    -ENOMEM;
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
	return dp_ipost(comm, -1, 1, (void *)buf, NULL, bytes, peer, req);
}

MLAP2P_EXPORT int mlap2p_irecv(struct mlap2p_comm *comm, void *buf,
			       size_t bytes, int peer,
			       struct mlap2p_request **req)
{
	return dp_ipost(comm, -1, 0, buf, NULL, bytes, peer, req);
}

int mlap2p_ipost_on(struct mlap2p_comm *api, int channel, int how,
		    void *buf, size_t bytes, int peer,
		    struct mlap2p_request **req)
{
	if (channel < 0 || channel >= MAXCHANNELS ||
	    how & ~(MLAP2P_POST_SEND | MLAP2P_POST_FIFO))
		return mlap2p_err(-EINVAL);
	return dp_ipost(api, channel, how, buf, NULL, bytes, peer, req);
}

int mlap2p_isend_tee(struct mlap2p_comm *api, int channel, int how,
		     const void *buf, void *tee, size_t bytes, int peer,
		     struct mlap2p_request **req)
{
	if (channel < 0 || channel >= MAXCHANNELS || (!tee && bytes) ||
	    !(how & MLAP2P_POST_SEND) ||
	    how & ~(MLAP2P_POST_SEND | MLAP2P_POST_FIFO | MLAP2P_POST_TEE_NT))
		return mlap2p_err(-EINVAL);
	return dp_ipost(api, channel, how, (void *)buf, tee, bytes, peer, req);
}

/* A request that a layer above ends itself (poll progresses it). */
struct mlap2p_request *mlap2p_request_ext(struct mlap2p_comm *api,
					  void (*poll)(void *ext), void *ext,
					  int *err)
{
	struct mlap2p_request *req;
	struct dp *dp;

	*err = dp_enter(api, &dp);
	if (*err)
		return NULL;
	req = calloc(1, sizeof(*req));
	if (req) {
		req->dp = dp;
		req->poll = poll;
		req->ext = ext;
	} else {
		*err = -ENOMEM;
	}
	dp_out(dp);
	return req;
}

void mlap2p_request_ext_done(struct mlap2p_request *req, int status)
{
	req->status = status;
	req->poll = NULL;
	req->ext = NULL;
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
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
		if (req->poll)
			req->poll(req->ext);
		if (!req->done && !dp_progress(dp))
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
	struct dp_link *k;
	struct dp *dp;
	int c, i, ret;

	if (proto < MLAP2P_PROTO_AUTO || proto >= NCCL_NUM_PROTOCOLS)
		return mlap2p_err(-EINVAL);
	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	dp->proto = proto;
	__atomic_store_n(&dp->protoEpoch, dp->protoEpoch + 1,
			 __ATOMIC_RELAXED);
	dp_for_each_link(dp, c, i, k)
		dp_small_ranges(dp, k);
	dp_out(dp);
	return 0;
}

MLAP2P_EXPORT int mlap2p_proto_for(struct mlap2p_comm *api, size_t bytes)
{
	const struct dp_link *k;
	struct dp *dp;
	int ret;

	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	k = dp_any_link(dp);
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
