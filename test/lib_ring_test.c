// SPDX-License-Identifier: GPL-2.0
/*
 * Rings follow the topology (the seed's p2pGetRings' job): every hop
 * takes the nearest edge class available, channels may differ, NCCL_RINGS
 * overrides, and a ring through an unreachable pair ends in the seed's
 * terminal error.  Each connected ring carries a pattern around.
 *
 * trn2: LNC 2, 4 logical cores per MLA, MLAs on a 4x4 torus.  The ring
 * fixture uses node 0 only, the module's default topology: the module when
 * /dev/mlap2p exists (its CAN_ACCESS_PEER and edge answers shape the
 * rings), else the host runtime.  ring_pod needs a second node, which the
 * module's defaults do not have, and stays on the host runtime.  The
 * trn1_*, trn3_* and switch_pod_* tests run the same on the host runtime
 * with those families and on a trn3 switch pod.
 */
#include "helpers.h"
#include "kselftest_harness.h"

static int ring_edge(struct ncclComm *comm, int a, int b)
{
	return comm->topo->edge[a * comm->nRanks + b];
}

/* Histogram of the classes of the hops of @order. */
static void ring_classes(struct ncclComm *comm, const int *order, int *hist)
{
	int i, n = comm->nRanks;

	memset(hist, 0, sizeof(int) * 5);
	for (i = 0; i < n; i++)
		hist[ring_edge(comm, order[i], order[(i + 1) % n])]++;
}

static bool ring_is_perm(const int *order, int n)
{
	char seen[T_MAX_RANKS] = { 0 };
	int i;

	for (i = 0; i < n; i++) {
		if (order[i] < 0 || order[i] >= n || seen[order[i]])
			return false;
		seen[order[i]] = 1;
	}
	return true;
}

struct recv_job {
	struct mlap2p_comm *comm;
	int channel;
	int peer;
	int ret;
};

static void *recv_thread(void *arg)
{
	struct recv_job *j = arg;

	j->ret = t_recv_pattern(j->comm, j->channel, j->peer);
	return NULL;
}

/* Send a pattern to next while receiving one from prev. */
static int ring_pass(struct mlap2p_comm *comm, int channel)
{
	struct recv_job j = { comm, channel, -1, 0 };
	pthread_t t;
	int next, ret;

	if (mlap2p_ring_get(comm, channel, NULL, &j.peer, &next))
		return 90;
	if (j.peer == mlap2p_comm_rank(comm))
		return 0;
	pthread_create(&t, NULL, recv_thread, &j);
	ret = t_send_pattern(comm, channel, next);
	pthread_join(t, NULL);
	return ret ? ret : j.ret;
}

struct ring_arg {
	int nchannels;
	/* checked by rank 0 on channel 0: hops per class */
	int expect[5];
	const int *order;	/* expected order of channel 0, or NULL */
	int connect_ret;
};

static int ring_rank(struct t_rank *r)
{
	struct ring_arg *a = r->arg;
	struct ncclComm *comm;
	int order[T_MAX_RANKS], order1[T_MAX_RANKS], hist[5];
	int c, i, ret;

	if (t_init(r))
		return 1;
	comm = mlap2p_nccl(r->comm);
	/* The module's answers in the VM, not the host runtime's. */
	if (t_check_runtime(r->comm)) {
		ret = 10;
		goto out;
	}
	ret = mlap2p_connect_ring(r->comm, a->nchannels);
	/* A rank whose own hops are fine hears that a peer failed. */
	if (a->connect_ret && ret == -ECONNABORTED &&
	    strstr(mlap2p_last_error(), "failed its side")) {
		ret = 0;
		goto out;
	}
	if (ret != a->connect_ret) {
		snprintf(r->msg, sizeof(r->msg), "connect_ring: %d %s", ret,
			 mlap2p_last_error());
		ret = 2;
		goto out;
	}
	if (ret) {
		ret = strstr(mlap2p_last_error(), "No transport found") ? 0 : 3;
		goto out;
	}
	if (mlap2p_ring_get(r->comm, 0, order, NULL, NULL) ||
	    !ring_is_perm(order, r->nranks)) {
		ret = 4;
		goto out;
	}
	if (r->rank == 0) {
		ring_classes(comm, order, hist);
		for (i = 1; i < 5; i++) {
			if (hist[i] != a->expect[i]) {
				snprintf(r->msg, sizeof(r->msg),
					 "%s hops: %d, expected %d",
					 mlap2p_topo_edge_name((__u32)i),
					 hist[i], a->expect[i]);
				ret = 5;
				goto out;
			}
		}
		if (a->order && memcmp(order, a->order,
				       sizeof(int) * (size_t)r->nranks)) {
			ret = 6;
			goto out;
		}
	}
	/* Without NCCL_RINGS, channel 1 runs channel 0 backwards. */
	if (a->nchannels > 1 && !a->order) {
		if (mlap2p_ring_get(r->comm, 1, order1, NULL, NULL)) {
			ret = 7;
			goto out;
		}
		for (i = 0; i < r->nranks; i++)
			if (order1[i] != order[(r->nranks - i) % r->nranks])
				ret = 8;
		if (ret)
			goto out;
	}
	for (c = 0; c < a->nchannels && !ret; c++)
		ret = ring_pass(r->comm, c);
out:
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 9;
	return ret;
}

FIXTURE(ring) {
	int dummy;
};

FIXTURE_SETUP(ring)
{
	self->dummy = 0;
}

FIXTURE_TEARDOWN(ring)
{
}

/* Cases across two nodes: host runtime, a trn2 pod of two nodes. */
FIXTURE(ring_pod) {
	int dummy;
};

FIXTURE_SETUP(ring_pod)
{
	self->dummy = 0;
	t_host_topology();
}

FIXTURE_TEARDOWN(ring_pod)
{
}

/*
 * 16 ranks, one per MLA of the torus, numbered in a scrambled order so
 * that rank order would cross relays: the search still finds a ring of
 * torus neighbours only.
 */
TEST_F(ring, torus_neighbours_only)
{
	static const int mla[16] = { 0, 5, 10, 15, 3, 6, 9, 12, 1, 14, 7, 8,
				     2, 13, 4, 11 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 16, 0, 0 } };
	struct t_rank ranks[16];
	int cores[16], i, relays = 0;
	__u32 e, mid;
	struct mlap2p_topo t;

	T_NODE_TOPOLOGY();
	mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN2);
	for (i = 0; i < 16; i++) {
		cores[i] = mla[i] * 4;
		mlap2p_topo_mla_edge(&t, (__u32)mla[i], (__u32)mla[(i + 1) % 16],
				     &e, &mid);
		relays += e == MLAP2P_EDGE_RELAY;
	}
	ASSERT_LT(8, relays);	/* rank order alone would relay a lot */
	ASSERT_EQ(0, t_run_threads(16, cores, ring_rank, &a, ranks));
}

/* Four ranks on each of two MLAs, interleaved: LOCAL hops first. */
TEST_F(ring, local_before_d2d)
{
	int cores[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 6, 2, 0, 0 } };
	struct t_rank ranks[8];

	T_NODE_TOPOLOGY();
	ASSERT_EQ(0, t_run_threads(8, cores, ring_rank, &a, ranks));
}

/* MLAs 0, 1, 2: one hop has to relay (0 <-> 2, through rank 1's MLA). */
TEST_F(ring, relay_when_needed)
{
	int cores[3] = { 0, 8, 4 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 2, 1, 0 } };
	struct t_rank ranks[3];

	T_NODE_TOPOLOGY();
	ASSERT_EQ(0, t_run_threads(3, cores, ring_rank, &a, ranks));
}

/* Two nodes of the pod: the pod link is used, not avoided. */
TEST_F(ring_pod, across_the_pod)
{
	int cores[4] = { 0, 64, 4, 68 };
	struct ring_arg a = { .nchannels = 1, .expect = { 0, 0, 2, 0, 2 } };
	struct t_rank ranks[4];

	ASSERT_EQ(0, t_run_threads(4, cores, ring_rank, &a, ranks));
}

TEST_F(ring, nccl_rings_override)
{
	static const int want[4] = { 0, 2, 1, 3 };
	struct ring_arg a = { .nchannels = 3, .order = want,
			      .expect = { 0, 0, 4, 0, 0 } };
	int cores[4] = { 0, 4, 8, 12 };	/* MLAs 0-3: one torus row */
	struct t_rank ranks[4];

	T_NODE_TOPOLOGY();
	/* 0 -> 2 and 1 -> 3 relay; the override is obeyed anyway. */
	a.expect[2] = 2;
	a.expect[3] = 2;
	setenv("NCCL_RINGS", "0 2 1 3|3-1-2-0", 1);
	ASSERT_EQ(0, t_run_threads(4, cores, ring_rank, &a, ranks));
}

/* Ring channel 1 comes from the second NCCL_RINGS ring; 2 wraps to 0. */
static int rings_channels_rank(struct t_rank *r)
{
	static const int ring1[4] = { 3, 1, 2, 0 };
	static const int ring0[4] = { 0, 2, 1, 3 };
	int order[4], ret = 0;

	if (t_init(r))
		return 1;
	if (t_check_runtime(r->comm))
		ret = 6;
	if (!ret && mlap2p_connect_ring(r->comm, 3))
		ret = 2;
	if (!ret && (mlap2p_ring_get(r->comm, 1, order, NULL, NULL) ||
		     memcmp(order, ring1, sizeof(order))))
		ret = 3;
	if (!ret && (mlap2p_ring_get(r->comm, 2, order, NULL, NULL) ||
		     memcmp(order, ring0, sizeof(order))))
		ret = 4;
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 5;
	return ret;
}

TEST_F(ring, nccl_rings_channels)
{
	int cores[4] = { 0, 4, 8, 12 };
	struct t_rank ranks[4];

	T_NODE_TOPOLOGY();
	setenv("NCCL_RINGS", "0 2 1 3|3-1-2-0", 1);
	ASSERT_EQ(0, t_run_threads(4, cores, rings_channels_rank, NULL, ranks));
}

/* Nodes 0 and 1 on different local MLAs: no link, no NET, no ring. */
TEST_F(ring_pod, unreachable_pair)
{
	int cores[2] = { 0, 68 };
	struct ring_arg a = { .nchannels = 1, .connect_ret = -EHOSTUNREACH };
	struct t_rank ranks[2];

	ASSERT_EQ(0, t_run_threads(2, cores, ring_rank, &a, ranks));
}

/* NCCL_P2P_LEVEL=D2D: the relay hop cannot be used at all. */
TEST_F(ring, level_caps_the_ring)
{
	int cores[3] = { 0, 8, 4 };
	struct ring_arg a = { .nchannels = 1, .connect_ret = -EHOSTUNREACH };
	struct t_rank ranks[3];

	T_NODE_TOPOLOGY();
	setenv("NCCL_P2P_LEVEL", "D2D", 1);
	ASSERT_EQ(0, t_run_threads(3, cores, ring_rank, &a, ranks));
}

/* ---- the other families and a switch pod (host runtime) ---- */

static void ring_family(const char *family, const char *pod,
			const char *nodes)
{
	t_host_topology();
	setenv("MLAP2P_FAMILY", family, 1);
	if (pod) {
		setenv("MLAP2P_POD", pod, 1);
		setenv("MLAP2P_POD_NODES", nodes, 1);
	} else {
		unsetenv("MLAP2P_POD");
		unsetenv("MLAP2P_POD_NODES");
	}
}

/* trn1 (LNC 1, cores 2m and 2m + 1 on MLA m): the torus case again. */
TEST(trn1_torus_neighbours_only)
{
	static const int mla[16] = { 0, 5, 10, 15, 3, 6, 9, 12, 1, 14, 7, 8,
				     2, 13, 4, 11 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 16, 0, 0 } };
	struct t_rank ranks[16];
	int cores[16], i;

	ring_family("trn1", NULL, NULL);
	for (i = 0; i < 16; i++)
		cores[i] = mla[i] * 2;
	ASSERT_EQ(0, t_run_threads(16, cores, ring_rank, &a, ranks));
}

TEST(trn1_local_before_d2d)
{
	int cores[4] = { 0, 2, 1, 3 };	/* MLAs 0, 1, 0, 1 */
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 2, 2, 0, 0 } };
	struct t_rank ranks[4];

	ring_family("trn1", NULL, NULL);
	ASSERT_EQ(0, t_run_threads(4, cores, ring_rank, &a, ranks));
}

/*
 * trn3: one rank per MLA of the ring, scrambled; the only ring of D2D
 * hops is the MLA ring itself, and the search finds it.
 */
TEST(trn3_ring_neighbours_only)
{
	static const int mla[16] = { 0, 8, 3, 11, 6, 14, 1, 9, 4, 12, 7, 15,
				     2, 10, 5, 13 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 16, 0, 0 } };
	struct t_rank ranks[16];
	int cores[16], i;

	ring_family("trn3", NULL, NULL);
	for (i = 0; i < 16; i++)
		cores[i] = mla[i] * 4;
	ASSERT_EQ(0, t_run_threads(16, cores, ring_rank, &a, ranks));
}

/* trn3, MLAs 0, 2, 1: 0 <-> 2 relays through rank 2's MLA 1. */
TEST(trn3_relay_when_needed)
{
	int cores[3] = { 0, 8, 4 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 2, 1, 0 } };
	struct t_rank ranks[3];

	ring_family("trn3", NULL, NULL);
	ASSERT_EQ(0, t_run_threads(3, cores, ring_rank, &a, ranks));
}

/*
 * A trn3 switch pod of 3 nodes: MLAs 0, 17 and 34 (different local
 * indices, which a point-to-point pod would not link) are all POD.
 */
TEST(switch_pod_any_mla)
{
	int cores[3] = { 0, 68, 136 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 0, 0, 3 } };
	struct t_rank ranks[3];

	ring_family("trn3", "switch", "3");
	ASSERT_EQ(0, t_run_threads(3, cores, ring_rank, &a, ranks));
}

/* Two MLAs on each of two switch-pod nodes: D2D inside, POD across. */
TEST(switch_pod_d2d_first)
{
	int cores[4] = { 0, 64, 68, 4 };
	struct ring_arg a = { .nchannels = 2, .expect = { 0, 0, 2, 0, 2 } };
	struct t_rank ranks[4];

	ring_family("trn3", "switch", "2");
	ASSERT_EQ(0, t_run_threads(4, cores, ring_rank, &a, ranks));
}

TEST_HARNESS_MAIN
