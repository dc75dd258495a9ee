// SPDX-License-Identifier: GPL-2.0
/*
 * The bootstrap: rendezvous through the unique id between threads and
 * between processes, a fixed NCCL_COMM_ID, tagged messages taken out of
 * order, the all-gather and the barrier; and every way it can fail with
 * a bounded wait and a message that names the rank: a rank that never
 * arrives, two that never arrive, a peer that died, disagreeing nranks,
 * and the kmod runtime forced without the module.
 */
#include "helpers.h"
#include "kselftest_harness.h"

#include <netinet/in.h>
#include <sys/socket.h>

static void bs_env(const char *timeout)
{
	setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", timeout, 1);
}

/* ---- a rank that never arrives ---- */

struct missing_arg {
	const char *expect;	/* in every arrived rank's message */
};

static int missing_rank(struct t_rank *r)
{
	struct missing_arg *a = r->arg;
	int64_t t0 = mlap2p_now_ms();
	int ret;

	ret = mlap2p_comm_init_rank(&r->comm, r->nranks, &r->id, r->rank,
				    r->core);
	if (ret != -ETIMEDOUT) {
		snprintf(r->msg, sizeof(r->msg), "init gave %d", ret);
		return 1;
	}
	/* 1 s timeout: the root answers within it, plus a little slack. */
	if (mlap2p_now_ms() - t0 > 4000)
		return 2;
	if (!strstr(mlap2p_last_error(), a->expect)) {
		snprintf(r->msg, sizeof(r->msg), "message: %s",
			 mlap2p_last_error());
		return 3;
	}
	return 0;
}

TEST(missing_rank_threads)
{
	struct missing_arg a = { "rank 2 of 3 did not arrive within" };
	int cores[2] = { 0, 4 };
	struct t_rank ranks[2];
	struct mlap2p_unique_id id;
	int i;

	bs_env("1s");
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	/* t_run_threads() sets nranks to the thread count: do it by hand. */
	for (i = 0; i < 2; i++) {
		memset(&ranks[i], 0, sizeof(ranks[i]));
		ranks[i].rank = i;
		ranks[i].nranks = 3;
		ranks[i].core = cores[i];
		ranks[i].id = id;
		ranks[i].fn = missing_rank;
		ranks[i].arg = &a;
		pthread_create(&ranks[i].thread, NULL, t_thread_main, &ranks[i]);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(ranks[i].thread, NULL);
		EXPECT_EQ(0, ranks[i].result)
			TH_LOG("rank %d: %s", i, ranks[i].msg);
	}
}

static int missing_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct mlap2p_comm *comm;
	int64_t t0 = mlap2p_now_ms();
	int ret;

	(void)arg;
	/* Ranks 0 and 3 of 4 come; 1 and 2 never do. */
	ret = mlap2p_comm_init_rank(&comm, 4, id, idx ? 3 : 0, idx ? 12 : 0);
	if (ret != -ETIMEDOUT)
		return t_child_fail(1, "init gave %d", ret);
	if (mlap2p_now_ms() - t0 > 4000)
		return t_child_fail(2, "took %lld ms",
					 (long long)(mlap2p_now_ms() - t0));
	if (!strstr(mlap2p_last_error(), "ranks 1, 2 of 4 did not arrive"))
		return t_child_fail(3, "message: %s", mlap2p_last_error());
	return 0;
}

TEST(missing_ranks_processes)
{
	struct mlap2p_unique_id id;
	struct t_procs p;

	bs_env("1s");
	ASSERT_EQ(0, t_fork(&p, 2, missing_child, NULL));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
}

/* ---- disagreeing nranks ---- */

static int nranks_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct mlap2p_comm *comm;
	int ret;

	(void)arg;
	if (idx == 1)
		usleep(200 * 1000);	/* rank 0 (nranks 2) first */
	ret = mlap2p_comm_init_rank(&comm, idx ? 3 : 2, id, idx, idx * 4);
	if (idx == 1) {
		if (ret != -EINVAL)
			return t_child_fail(1, "init gave %d", ret);
		if (!strstr(mlap2p_last_error(), "rank 1 says there are 3 ranks"))
			return t_child_fail(2, "%s", mlap2p_last_error());
		return 0;
	}
	/* Rank 0 waits in vain for a rank 1 of 2 ranks. */
	if (ret != -ETIMEDOUT ||
	    !strstr(mlap2p_last_error(), "rank 1 of 2 did not arrive"))
		return t_child_fail(3, "%d %s", ret, mlap2p_last_error());
	return 0;
}

TEST(nranks_mismatch)
{
	struct mlap2p_unique_id id;
	struct t_procs p;

	/*
	 * Rank 1 must reach the root before rank 0's timeout closes it: 1 s
	 * was too short for a loaded TCG guest (rank 1 got ECONNREFUSED).
	 */
	bs_env("4s");
	ASSERT_EQ(0, t_fork(&p, 2, nranks_child, NULL));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
}

/* ---- a peer that dies is named within about a second ---- */

static int dead_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct mlap2p_comm *comm;
	int64_t t0;
	int peer = 1 - idx, ret;

	(void)arg;
	if (mlap2p_comm_init_rank(&comm, 2, id, idx, idx * 4))
		return t_child_fail(1, "init: %s", mlap2p_last_error());
	if (idx == 1)
		_exit(0);	/* dies without a word */
	t0 = mlap2p_now_ms();
	ret = mlap2p_connect_peers(comm, 1, 1, &peer, 1, &peer);
	if (ret != -ESRCH)
		return t_child_fail(2, "connect gave %d: %s", ret,
					 mlap2p_last_error());
	if (mlap2p_now_ms() - t0 > 5000)
		return t_child_fail(3, "took %lld ms",
					 (long long)(mlap2p_now_ms() - t0));
	if (!strstr(mlap2p_last_error(), "rank 1"))
		return t_child_fail(4, "%s", mlap2p_last_error());
	mlap2p_comm_abort(comm);
	return 0;
}

TEST(dead_peer_is_named)
{
	struct mlap2p_unique_id id;
	struct t_procs p;
	int st;

	bs_env("30s");
	ASSERT_EQ(0, t_fork(&p, 2, dead_child, NULL));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	/* Reap rank 1 only after rank 0 is done: a zombie must count as dead. */
	st = t_wait(p.pid[0]);
	EXPECT_EQ(0, st);
	EXPECT_EQ(0, t_wait(p.pid[1]));
}

/* ---- NCCL_COMM_ID: a fixed root address, no id passed around ---- */

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(s, (struct sockaddr *)&a, &len))
		return -1;
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

static int commid_child(int idx, struct mlap2p_unique_id *unused, void *arg)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;
	int peer = 1 - idx, ret;

	(void)unused;
	(void)arg;
	/* Each process makes its own id from NCCL_COMM_ID. */
	if (mlap2p_get_unique_id(&id))
		return t_child_fail(1, "%s", mlap2p_last_error());
	if (mlap2p_comm_init_rank(&comm, 2, &id, idx, idx * 4))
		return t_child_fail(2, "%s", mlap2p_last_error());
	ret = mlap2p_connect_peers(comm, 1, 1, &peer, 1, &peer);
	if (!ret)
		ret = t_exchange(comm, 0, peer);
	if (mlap2p_comm_destroy(comm) && !ret)
		ret = 3;
	return ret;
}

TEST(nccl_comm_id)
{
	struct mlap2p_unique_id dummy;
	struct t_procs p;
	char env[64];
	int port = free_port();

	ASSERT_LT(0, port);
	bs_env("20s");
	t_small_buffers();
	snprintf(env, sizeof(env), "127.0.0.1:%d", port);
	setenv("NCCL_COMM_ID", env, 1);
	ASSERT_EQ(0, t_fork(&p, 2, commid_child, NULL));
	memset(&dummy, 0, sizeof(dummy));
	ASSERT_EQ(0, t_procs_start(&p, &dummy));
	ASSERT_EQ(0, t_procs_wait(&p));
}

TEST(nccl_comm_id_invalid)
{
	struct mlap2p_unique_id id;

	setenv("NCCL_COMM_ID", "localhost", 1);
	EXPECT_EQ(-EINVAL, mlap2p_get_unique_id(&id));
	EXPECT_NE(NULL, strstr(mlap2p_last_error(), "NCCL_COMM_ID"));
}

/* ---- tagged messages, all-gather, barrier (the internal API) ---- */

static int tags_rank(struct t_rank *r)
{
	struct mlap2p_bootstrap *bs;
	int all[3], v, i, ret = 0;

	if (t_init(r))
		return 1;
	bs = mlap2p_nccl(r->comm)->bootstrap;
	if (r->rank == 0) {
		for (i = 1; i <= 3; i++) {
			v = 100 + i;
			if (bootstrapSend(bs, 1, i, &v, sizeof(v)))
				ret = 2;
		}
	} else if (r->rank == 1) {
		/* Taken in another order than sent. */
		static const int order[3] = { 3, 1, 2 };

		for (i = 0; i < 3 && !ret; i++)
			if (bootstrapRecv(bs, 0, order[i], &v, sizeof(v)) ||
			    v != 100 + order[i])
				ret = 3;
	}
	/* A size mismatch is an error, not a truncation. */
	if (!ret && r->rank == 2) {
		short s = 7;

		if (bootstrapSend(bs, 1, 9, &s, sizeof(s)))
			ret = 4;
	} else if (!ret && r->rank == 1) {
		if (bootstrapRecv(bs, 2, 9, &v, sizeof(v)) == ncclSuccess)
			ret = 5;
		else if (mlap2p_errno_take(ncclSystemError) != -EPROTO)
			ret = 6;
	}
	all[r->rank] = r->rank * 10 + 1;
	if (!ret && bootstrapAllGather(bs, all, sizeof(int)))
		ret = 7;
	for (i = 0; i < 3 && !ret; i++)
		if (all[i] != i * 10 + 1)
			ret = 8;
	if (!ret && bootstrapBarrier(bs, 77))
		ret = 9;
	/* A message to ourselves. */
	if (!ret && (bootstrapSend(bs, r->rank, 5, &r->rank, sizeof(int)) ||
		     bootstrapRecv(bs, r->rank, 5, &v, sizeof(v)) || v != r->rank))
		ret = 10;
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 11;
	return ret;
}

TEST(tagged_messages)
{
	int cores[3] = { 0, 4, 8 };
	struct t_rank ranks[3];

	bs_env("10s");
	ASSERT_EQ(0, t_run_threads(3, cores, tags_rank, NULL, ranks));
}

/* ---- peer info all-gathered ---- */

static int info_rank(struct t_rank *r)
{
	struct ncclComm *comm;
	int i, ret = 0;

	if (t_init(r))
		return 1;
	comm = mlap2p_nccl(r->comm);
	for (i = 0; i < r->nranks && !ret; i++) {
		struct ncclPeerInfo *pi = &comm->peerInfo[i];

		if (pi->rank != i || pi->cudaDev != i * 4 || pi->busId != i * 4 ||
		    (int)pi->mla != i || pi->node != 0 || pi->pid != getpid() ||
		    pi->hostHash != comm->peerInfo[0].hostHash ||
		    pi->pidHash != comm->peerInfo[0].pidHash ||
		    pi->startTime == 0 || pi->rtKind != MLAP2P_RT_HOST)
			ret = 2;
	}
	if (!ret && mlap2p_peer_alive(comm, 1 - r->rank))
		ret = 3;
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 4;
	return ret;
}

TEST(peer_info)
{
	int cores[2] = { 0, 4 };
	struct t_rank ranks[2];

	bs_env("10s");
	ASSERT_EQ(0, t_run_threads(2, cores, info_rank, NULL, ranks));
}

/* ---- forcing the kmod runtime without the module ---- */

TEST(kmod_forced_without_module)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm = NULL;

	if (!access(MLAP2P_DEVICE_PATH, F_OK))
		SKIP(return, "%s exists", MLAP2P_DEVICE_PATH);
	setenv("MLAP2P_RUNTIME", "kmod", 1);
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	EXPECT_EQ(-ENODEV, mlap2p_comm_init_rank(&comm, 1, &id, 0, 0));
	EXPECT_EQ(ENODEV, errno);
	EXPECT_NE(NULL, strstr(mlap2p_last_error(), "modprobe mlap2p"))
		TH_LOG("%s", mlap2p_last_error());
	EXPECT_NE(NULL, strstr(mlap2p_last_error(), "MLAP2P_RUNTIME=host"));
}

TEST_HARNESS_MAIN
