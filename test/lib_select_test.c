// SPDX-License-Identifier: GPL-2.0
/*
 * Transport selection for every edge class, under NCCL_P2P_DISABLE and
 * each NCCL_P2P_LEVEL (by name and by number).
 *
 * Six ranks (threads, a trn2 pod of two nodes) sit so that rank 0 sees
 * every class:
 *
 *   rank  core  MLA  edge from rank 0
 *   1     1     0    LOCAL  (same MLA)
 *   2     4     1    D2D    (torus neighbour)
 *   3     8     2    RELAY  (through MLA 1, where rank 2 runs)
 *   4     64    16   POD    (node 1, same local MLA: a pod link)
 *   5     68    17   NONE   (node 1, another MLA: no link)
 *
 * For each peer rank 0 asks P2P and NET whether they can connect, then
 * really connects: an allowed edge comes up (P2P/direct pointer, or
 * P2P/indirect through rank 2 for the relay) and carries a pattern; any
 * other ends in the seed's terminal error, since NET says no.  Bad values
 * of every variable the library reads are refused with their name.
 *
 * The same runs on trn1 (LNC 1), on trn3 (one node, ring wiring) and on a
 * trn3 switch pod of 3 nodes, where every MLA of another node is POD, and
 * rank 0 also asks the seed's ncclTopoCheckPdsP2p (1 for the switch pod's
 * other nodes) and ncclTopoCheckSameIntraCC (1 for its own node).  The
 * pod_hosts fixture takes two nodes of a pod onto two emulated hosts.
 *
 * Ranks 0-3 live on node 0 of the trn2 defaults, so node_edge_classes
 * runs them on the module when /dev/mlap2p exists (its CAN_ACCESS_PEER
 * decides) and on the host runtime otherwise.  Ranks 4 and 5 need the pod,
 * which the module's defaults do not have: every_edge_class, with all six,
 * stays on the host runtime.
 */
#include "helpers.h"
#include "kselftest_harness.h"

#define NR	6

/*
 * Where the ranks sit, and what rank 0 should learn of each: the edge
 * class, the seed's ncclTopoCheckPdsP2p and ncclTopoCheckSameIntraCC.
 * In every layout rank 3 relays through MLA 1, where rank 2 runs.
 */
struct sel_layout {
	const char *family, *pod, *pod_nodes;	/* MLAP2P_*; pod NULL: none */
	int n;
	int cores[NR];
	int edge[NR];
	int pds[NR];
	int sameCC[NR];
};

/* The trn2 pod of the table above (pod of 2 nodes linked point to point). */
static const struct sel_layout sel_trn2_pod = {
	"trn2", "p2p", "2", 6, { 0, 1, 4, 8, 64, 68 },
	{ MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_D2D,
	  MLAP2P_EDGE_RELAY, MLAP2P_EDGE_POD, MLAP2P_EDGE_NONE },
	{ 0, 0, 0, 0, 0, 0 }, { 1, 1, 1, 1, 0, 0 },
};

/* trn1 (LNC 1, 2 cores per MLA): 0 and 1 on MLA 0, 2 on MLA 1, 4 on MLA 2. */
static const struct sel_layout sel_trn1 = {
	"trn1", NULL, NULL, 4, { 0, 1, 2, 4 },
	{ MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_D2D,
	  MLAP2P_EDGE_RELAY },
	{ 0, 0, 0, 0 }, { 1, 1, 1, 1 },
};

/* trn3, one node: a ring of 16 MLAs; MLA 2 is reached through MLA 1. */
static const struct sel_layout sel_trn3 = {
	"trn3", NULL, NULL, 4, { 0, 1, 4, 8 },
	{ MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_D2D,
	  MLAP2P_EDGE_RELAY },
	{ 0, 0, 0, 0 }, { 1, 1, 1, 1 },
};

/*
 * A trn3 switch pod of 3 nodes: the switch links every MLA of node 0 to
 * every MLA of nodes 1 and 2 (the seed's ncclTopoCheckPdsP2p path).
 */
static const struct sel_layout sel_trn3_switch = {
	"trn3", "switch", "3", 6, { 0, 1, 4, 8, 68, 148 },
	{ MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_D2D,
	  MLAP2P_EDGE_RELAY, MLAP2P_EDGE_POD, MLAP2P_EDGE_POD },
	{ 0, 0, 0, 0, 1, 1 }, { 1, 1, 1, 1, 0, 0 },
};

struct sel_arg {
	const struct sel_layout *l;
	int max;
};

static void sel_env(const struct sel_layout *l)
{
	t_host_topology();
	setenv("MLAP2P_FAMILY", l->family, 1);
	if (l->pod) {
		setenv("MLAP2P_POD", l->pod, 1);
		setenv("MLAP2P_POD_NODES", l->pod_nodes, 1);
	} else {
		unsetenv("MLAP2P_POD");
		unsetenv("MLAP2P_POD_NODES");
	}
}

FIXTURE(select) {
	int dummy;
};

FIXTURE_VARIANT(select) {
	const char *level;	/* NCCL_P2P_LEVEL or NULL */
	const char *disable;	/* NCCL_P2P_DISABLE or NULL */
	int max;		/* highest class P2P may take, 0 = none */
	int alias;		/* another spelling of a class above it */
};

/*
 * MLAP2P_TEST_QUICK (the VM lanes, where this program ran into its 180 s
 * limit): another spelling of a level or disable value runs only
 * every_edge_class, which checks what it parses to; the host lanes run
 * every test of every variant.
 */
#define SKIP_ALIAS_IN_VM()						\
	do {								\
		if (variant->alias && getenv("MLAP2P_TEST_QUICK"))	\
			SKIP(return, "an alias; the host lanes run it");\
	} while (0)

FIXTURE_VARIANT_ADD(select, default_level) { .max = MLAP2P_EDGE_POD };
FIXTURE_VARIANT_ADD(select, disable) { .disable = "1", .max = 0 };
FIXTURE_VARIANT_ADD(select, disable0) { .disable = "0", .max = MLAP2P_EDGE_POD };
FIXTURE_VARIANT_ADD(select, level_local) { .level = "LOCAL", .max = MLAP2P_EDGE_LOCAL };
FIXTURE_VARIANT_ADD(select, level_d2d) { .level = "d2d", .max = MLAP2P_EDGE_D2D };
FIXTURE_VARIANT_ADD(select, level_relay) { .level = "RELAY", .max = MLAP2P_EDGE_RELAY };
FIXTURE_VARIANT_ADD(select, level_pod) { .level = "POD", .max = MLAP2P_EDGE_POD };
/* NCCL's path names, mapped onto the classes (docs/topology.md). */
FIXTURE_VARIANT_ADD(select, level_loc) { .level = "LOC", .max = MLAP2P_EDGE_LOCAL, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_nvl) { .level = "NVL", .max = MLAP2P_EDGE_D2D, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_nvb) { .level = "NVB", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_pix) { .level = "PIX", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_pxb) { .level = "PXB", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_phb) { .level = "PHB", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_sys) { .level = "SYS", .max = MLAP2P_EDGE_POD, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_nvl_lower) { .level = "nvl", .max = MLAP2P_EDGE_D2D, .alias = 1 };
/* NCCL's old numbers: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and above SYS. */
FIXTURE_VARIANT_ADD(select, level_0) { .level = "0", .max = MLAP2P_EDGE_LOCAL, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_1) { .level = "1", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_2) { .level = "2", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_3) { .level = "3", .max = MLAP2P_EDGE_RELAY, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_4) { .level = "4", .max = MLAP2P_EDGE_POD, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_5) { .level = "5", .max = MLAP2P_EDGE_POD, .alias = 1 };
FIXTURE_VARIANT_ADD(select, level_99) { .level = "99", .max = MLAP2P_EDGE_POD, .alias = 1 };
FIXTURE_VARIANT_ADD(select, disable_wins) { .level = "POD", .disable = "1", .max = 0, .alias = 1 };
/* Any non-zero NCCL_P2P_DISABLE disables, as in the seed. */
FIXTURE_VARIANT_ADD(select, disable2) { .disable = "2", .max = 0, .alias = 1 };
FIXTURE_VARIANT_ADD(select, disable_neg) { .disable = "-1", .max = 0, .alias = 1 };
FIXTURE_VARIANT_ADD(select, disable_hex) { .disable = "0x10", .max = 0, .alias = 1 };

FIXTURE_SETUP(select)
{
	self->dummy = 0;
	if (variant->level)
		setenv("NCCL_P2P_LEVEL", variant->level, 1);
	if (variant->disable)
		setenv("NCCL_P2P_DISABLE", variant->disable, 1);
}

FIXTURE_TEARDOWN(select)
{
}

static bool sel_allowed(const struct sel_layout *l, int max, int peer)
{
	return l->edge[peer] != MLAP2P_EDGE_NONE && l->edge[peer] <= max;
}

/* Rank 0 and @peer connect to each other; check how. */
static int sel_pair(struct t_rank *r, int peer, const struct sel_arg *a)
{
	const struct sel_layout *l = a->l;
	char expect[160];
	struct mlap2p_conn_desc d;
	int other = r->rank == 0 ? peer : 0;
	int ret, core0 = r->rank == 0 ? r->core : l->cores[0];
	int corep = r->rank == 0 ? l->cores[peer] : r->core;

	ret = mlap2p_connect_peers(r->comm, 1, 1, &other, 1, &other);
	if (!sel_allowed(l, a->max, peer)) {
		if (ret != -EHOSTUNREACH)
			return 60;
		snprintf(expect, sizeof(expect),
			 "No transport found between devices %d and %d. Possible replica group misconfiguration",
			 r->rank == 0 ? core0 : corep,
			 r->rank == 0 ? corep : core0);
		if (!strstr(mlap2p_last_error(), expect)) {
			snprintf(r->msg, sizeof(r->msg), "want '%s', got '%s'",
				 expect, mlap2p_last_error());
			return 61;
		}
		return 0;
	}
	if (ret)
		return 62;
	if (mlap2p_conn_get(r->comm, 0, other, MLAP2P_DIR_SEND, &d))
		return 63;
	if (d.path != (l->edge[peer] == MLAP2P_EDGE_RELAY ?
		       MLAP2P_PATH_INDIRECT : MLAP2P_PATH_DIRECT))
		return 64;
	if (l->edge[peer] == MLAP2P_EDGE_RELAY && d.mem_rank != 2)
		return 65;
	return t_exchange(r->comm, 0, other);
}

/* What rank 0 learns by asking each transport directly. */
static int sel_ask(struct t_rank *r, const struct sel_arg *a)
{
	const struct sel_layout *l = a->l;
	struct ncclComm *comm = mlap2p_nccl(r->comm);
	int peer, ok, pds, sameCC;

	/* The module's answers in the VM, not the host runtime's. */
	if (t_check_runtime(r->comm)) {
		snprintf(r->msg, sizeof(r->msg), "runtime %s, not %s",
			 mlap2p_rt_kind_name(comm->rt->kind),
			 getenv("MLAP2P_RUNTIME"));
		return 69;
	}
	for (peer = 1; peer < r->nranks; peer++) {
		if (comm->topo->edge[peer] != l->edge[peer])
			return 70;
		if (ncclTopoCheckPdsP2p(comm->topo, &comm->peerInfo[0],
					&comm->peerInfo[peer], &pds) ||
		    pds != l->pds[peer] ||
		    ncclTopoCheckSameIntraCC(comm->topo, &comm->peerInfo[0],
					     &comm->peerInfo[peer], &sameCC) ||
		    sameCC != l->sameCC[peer]) {
			snprintf(r->msg, sizeof(r->msg),
				 "rank %d: pds %d sameCC %d", peer, pds,
				 sameCC);
			return 75;
		}
		if (p2pTransport.canConnect(&ok, comm->topo, NULL,
					    &comm->peerInfo[0],
					    &comm->peerInfo[peer]))
			return 71;
		if (ok != (int)sel_allowed(l, a->max, peer)) {
			snprintf(r->msg, sizeof(r->msg),
				 "P2P to rank %d (%s): %d", peer,
				 mlap2p_topo_edge_name((__u32)l->edge[peer]), ok);
			return 72;
		}
		if (netTransport.canConnect(&ok, comm->topo, NULL,
					    &comm->peerInfo[0],
					    &comm->peerInfo[peer]) || ok)
			return 73;
	}
	/* The relay goes through rank 2, which runs on MLA 1. */
	if (comm->topo->intermediate[3] != 2 || comm->topo->relayMla[3] != 1)
		return 74;
	return 0;
}

static int sel_rank(struct t_rank *r)
{
	const struct sel_arg *a = r->arg;
	int ret = 0, peer;

	if (t_init(r))
		return 1;
	if (r->rank == 0) {
		ret = sel_ask(r, a);
		for (peer = 1; peer < r->nranks && !ret; peer++)
			ret = sel_pair(r, peer, a);
	} else {
		ret = sel_pair(r, r->rank, a);
	}
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 80;
	return ret;
}

static int sel_run(const struct sel_layout *l, int max)
{
	struct sel_arg a = { l, max };
	struct t_rank ranks[NR];

	return t_run_threads(l->n, l->cores, sel_rank, &a, ranks);
}

/* Host runtime: cores 64 and 68 (node 1) exist only with the pod. */
TEST_F(select, every_edge_class)
{
	sel_env(&sel_trn2_pod);
	ASSERT_EQ(0, sel_run(&sel_trn2_pod, variant->max));
}

/* The same on the other families and on a switch pod (host runtime). */
TEST_F(select, trn1)
{
	SKIP_ALIAS_IN_VM();
	sel_env(&sel_trn1);
	ASSERT_EQ(0, sel_run(&sel_trn1, variant->max));
}

TEST_F(select, trn3)
{
	SKIP_ALIAS_IN_VM();
	sel_env(&sel_trn3);
	ASSERT_EQ(0, sel_run(&sel_trn3, variant->max));
}

TEST_F(select, trn3_switch_pod)
{
	SKIP_ALIAS_IN_VM();
	sel_env(&sel_trn3_switch);
	ASSERT_EQ(0, sel_run(&sel_trn3_switch, variant->max));
}

/* LOCAL, D2D and RELAY: the module's answers in the VM. */
TEST_F(select, node_edge_classes)
{
	struct sel_layout l = sel_trn2_pod;

	SKIP_ALIAS_IN_VM();
	T_NODE_TOPOLOGY();
	l.n = 4;
	ASSERT_EQ(0, sel_run(&l, variant->max));
}

/* A relay needs a rank on the intermediate MLA; without one, no P2P. */
static int relay_alone_rank(struct t_rank *r)
{
	int peer = 1 - r->rank, ret;

	if (t_init(r))
		return 1;
	ret = mlap2p_connect_peers(r->comm, 1, 1, &peer, 1, &peer) ==
	      -EHOSTUNREACH ? 0 : 2;
	if (!ret && !strstr(mlap2p_last_error(), "No transport found between devices"))
		ret = 3;
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 4;
	return ret;
}

TEST(relay_without_intermediate_rank)
{
	int cores[2] = { 0, 8 };
	struct t_rank ranks[2];

	T_NODE_TOPOLOGY();
	ASSERT_EQ(0, t_run_threads(2, cores, relay_alone_rank, NULL, ranks));
}

/*
 * ---- NCCL_HOSTID: ranks with different values are on different hosts ----
 *
 * Two processes of this machine.  The host identity (hostHash) is
 * NCCL_HOSTID when it is set and not empty, else the host name and boot
 * id.  Ranks of different identities never take P2P (the pair's edge is
 * NONE, whatever the cores), so with NET disabled connect ends in the
 * seed's terminal error; as different hosts they may even use the same
 * core number.  Equal identities are one host: cores 0 and 4 (D2D) connect
 * by P2P/IPC, and one core twice is refused at init.
 */
FIXTURE(hostid) {
	int dummy;
};

FIXTURE_VARIANT(hostid) {
	const char *id[2];	/* NCCL_HOSTID of rank 0 and 1, NULL = unset */
	int core[2];
	bool same_host;
	int init_ret;		/* of both ranks */
	int connect_ret;	/* of both ranks, after init succeeded */
};

FIXTURE_VARIANT_ADD(hostid, differ) {
	.id = { "hostid-a", "hostid-b" }, .core = { 0, 4 },
	.same_host = false, .connect_ret = -EHOSTUNREACH,
};
FIXTURE_VARIANT_ADD(hostid, one_unset) {
	.id = { "hostid-a", NULL }, .core = { 0, 4 },
	.same_host = false, .connect_ret = -EHOSTUNREACH,
};
FIXTURE_VARIANT_ADD(hostid, differ_same_core) {
	.id = { "hostid-a", "hostid-b" }, .core = { 0, 0 },
	.same_host = false, .connect_ret = -EHOSTUNREACH,
};
FIXTURE_VARIANT_ADD(hostid, equal) {
	.id = { "hostid-a", "hostid-a" }, .core = { 0, 4 },
	.same_host = true,
};
FIXTURE_VARIANT_ADD(hostid, empty_is_unset) {
	.id = { "", NULL }, .core = { 0, 4 },
	.same_host = true,
};
FIXTURE_VARIANT_ADD(hostid, equal_same_core) {
	.id = { "hostid-a", "hostid-a" }, .core = { 0, 0 },
	.same_host = true, .init_ret = -EINVAL,
};

FIXTURE_SETUP(hostid)
{
	self->dummy = 0;
}

FIXTURE_TEARDOWN(hostid)
{
}

/* 0 when the thread's last WARN is exactly @want, else @step. */
static int hostid_warned(int step, const char *want)
{
	if (!strcmp(mlap2p_last_error(), want))
		return 0;
	return kt_child_fail(step, "want '%s', got '%s'", want,
				 mlap2p_last_error());
}

/* After init: what the two identities make of the pair, then connect. */
static int hostid_pair(struct mlap2p_comm *api,
		       const FIXTURE_VARIANT(hostid) *v, int idx)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	struct ncclPeerInfo *me = &comm->peerInfo[idx];
	struct ncclPeerInfo *pi = &comm->peerInfo[1 - idx];
	int peer = 1 - idx, edge, ok, ret;
	struct mlap2p_conn_desc d;
	char expect[160];

	if (t_check_runtime(api))
		return kt_child_fail(10, "runtime %s",
					 mlap2p_rt_kind_name(comm->rt->kind));
	if ((me->hostHash == pi->hostHash) != v->same_host)
		return kt_child_fail(11, "hostHash %016llx vs %016llx",
					 (unsigned long long)me->hostHash,
					 (unsigned long long)pi->hostHash);
	edge = comm->topo->edge[idx * 2 + peer];
	if (edge != (v->same_host ? MLAP2P_EDGE_D2D : MLAP2P_EDGE_NONE))
		return kt_child_fail(12, "edge %d", edge);
	if (p2pTransport.canConnect(&ok, comm->topo, NULL, me, pi) ||
	    ok != v->same_host)
		return kt_child_fail(13, "P2P canConnect %d", ok);

	ret = mlap2p_connect_peers(api, 1, 1, &peer, 1, &peer);
	if (ret != v->connect_ret)
		return kt_child_fail(14, "connect: %d (%s)", ret,
					 mlap2p_last_error());
	if (ret) {
		snprintf(expect, sizeof(expect),
			 "No transport found between devices %d and %d. Possible replica group misconfiguration",
			 v->core[idx], v->core[peer]);
		return hostid_warned(15, expect);
	}
	if (mlap2p_conn_get(api, 0, peer, MLAP2P_DIR_SEND, &d) ||
	    d.path != MLAP2P_PATH_IPC)
		return kt_child_fail(16, "not P2P/IPC");
	return t_exchange(api, 0, peer);
}

static int hostid_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	const FIXTURE_VARIANT(hostid) *v = arg;
	struct mlap2p_comm *comm = NULL;
	char expect[96];
	int ret;

	if (v->id[idx])
		setenv("NCCL_HOSTID", v->id[idx], 1);
	else
		unsetenv("NCCL_HOSTID");
	ret = mlap2p_comm_init_rank(&comm, 2, id, idx, v->core[idx]);
	if (ret != v->init_ret)
		return kt_child_fail(1, "init: %d (%s)", ret,
					 mlap2p_last_error());
	if (ret) {
		snprintf(expect, sizeof(expect),
			 "ranks 0 and 1 both run on core %d of this host",
			 v->core[0]);
		return comm ? 2 : hostid_warned(2, expect);
	}
	ret = hostid_pair(comm, v, idx);
	if (mlap2p_comm_destroy(comm) && !ret)
		ret = 3;
	return ret;
}

TEST_F(hostid, decides_the_host)
{
	struct mlap2p_unique_id id;
	struct t_procs p;

	T_NODE_TOPOLOGY();
	ASSERT_EQ(0, t_fork(&p, 2, hostid_child, (void *)variant));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
}

/*
 * ---- pods across hosts ----
 *
 * Two processes, each its own emulated host (NCCL_HOSTID) when the variant
 * says so, each on its own node of one pod (MLAP2P_NODE).  A pod link
 * across hosts is not P2P's: P2P needs the one address space that only a
 * host has, so ncclTopoCheckP2p refuses the pair before the pod is asked,
 * where the seed asks it, and NET (disabled here, so the seed's terminal
 * error) carries the pair.  ncclTopoCheckPdsP2p still names the switch
 * path; ncclTopoCheckSameIntraCC says the pair is not on one node.  On one
 * host the same two nodes connect by P2P/IPC.
 */
FIXTURE(pod_hosts) {
	int dummy;
};

FIXTURE_VARIANT(pod_hosts) {
	const char *family, *pod;
	int same_host;
	int node[2];
	int core[2];
	int pds;
	int p2p;
};

FIXTURE_VARIANT_ADD(pod_hosts, switch_two_hosts) {
	"trn3", "switch", 0, { 0, 1 }, { 0, 68 }, .pds = 1, .p2p = 0,
};
FIXTURE_VARIANT_ADD(pod_hosts, switch_one_host) {
	"trn3", "switch", 1, { 0, 1 }, { 0, 68 }, .pds = 1, .p2p = 1,
};
FIXTURE_VARIANT_ADD(pod_hosts, p2p_pod_two_hosts) {
	"trn2", "p2p", 0, { 0, 1 }, { 0, 64 }, .pds = 0, .p2p = 0,
};
FIXTURE_VARIANT_ADD(pod_hosts, p2p_pod_one_host) {
	"trn2", "p2p", 1, { 0, 1 }, { 0, 64 }, .pds = 0, .p2p = 1,
};

FIXTURE_SETUP(pod_hosts)
{
	self->dummy = 0;
	t_host_topology();
	setenv("MLAP2P_FAMILY", variant->family, 1);
	setenv("MLAP2P_POD", variant->pod, 1);
	setenv("MLAP2P_POD_NODES", "2", 1);
}

FIXTURE_TEARDOWN(pod_hosts)
{
	unsetenv("MLAP2P_NODE");
	unsetenv("NCCL_HOSTID");
}

static int pod_hosts_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	const FIXTURE_VARIANT(pod_hosts) *v = arg;
	struct mlap2p_comm *api = NULL;
	struct ncclComm *comm;
	struct ncclPeerInfo *me, *pi;
	int peer = 1 - idx, ok, pds, sameCC, ret;
	struct mlap2p_conn_desc d;
	char node[8], host[16];

	snprintf(node, sizeof(node), "%d", v->node[idx]);
	setenv("MLAP2P_NODE", node, 1);
	snprintf(host, sizeof(host), "pod-host-%d", v->same_host ? 0 : idx);
	setenv("NCCL_HOSTID", host, 1);
	if (mlap2p_comm_init_rank(&api, 2, id, idx, v->core[idx]))
		return kt_child_fail(1, "init: %s", mlap2p_last_error());
	comm = mlap2p_nccl(api);
	me = &comm->peerInfo[idx];
	pi = &comm->peerInfo[peer];
	ret = 0;
	if (me->node == pi->node || me->topoHash != pi->topoHash)
		ret = kt_child_fail(2, "nodes %u %u, topology %08x %08x",
				   me->node, pi->node, me->topoHash,
				   pi->topoHash);
	else if (ncclTopoCheckPdsP2p(comm->topo, me, pi, &pds) ||
		 pds != v->pds)
		ret = kt_child_fail(3, "pds %d", pds);
	else if (ncclTopoCheckSameIntraCC(comm->topo, me, pi, &sameCC) ||
		 sameCC)
		ret = kt_child_fail(4, "sameCC %d", sameCC);
	else if (p2pTransport.canConnect(&ok, comm->topo, NULL, me, pi) ||
		 ok != v->p2p)
		ret = kt_child_fail(5, "P2P canConnect %d", ok);
	if (!ret) {
		ret = mlap2p_connect_peers(api, 1, 1, &peer, 1, &peer);
		if (ret != (v->p2p ? 0 : -EHOSTUNREACH))
			ret = kt_child_fail(6, "connect: %d (%s)", ret,
					   mlap2p_last_error());
		else if (!v->p2p)
			ret = strstr(mlap2p_last_error(), "No transport found between devices") ?
			      0 : kt_child_fail(7, "%s", mlap2p_last_error());
		else if (mlap2p_conn_get(api, 0, peer, MLAP2P_DIR_SEND, &d) ||
			 d.path != MLAP2P_PATH_IPC)
			ret = kt_child_fail(8, "not P2P/IPC");
		else
			ret = t_exchange(api, 0, peer);
	}
	if (mlap2p_comm_destroy(api) && !ret)
		ret = 9;
	return ret;
}

TEST_F(pod_hosts, p2p_only_within_a_host)
{
	struct mlap2p_unique_id id;
	struct t_procs p;

	ASSERT_EQ(0, t_fork(&p, 2, pod_hosts_child, (void *)variant));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
}

/* ---- bad values are refused, naming the variable ---- */

FIXTURE(badenv) {
	int dummy;
};

FIXTURE_VARIANT(badenv) {
	const char *name;
	const char *value;
};

FIXTURE_VARIANT_ADD(badenv, p2p_level) { "NCCL_P2P_LEVEL", "NVLINK" };
FIXTURE_VARIANT_ADD(badenv, p2p_level_neg) { "NCCL_P2P_LEVEL", "-1" };
FIXTURE_VARIANT_ADD(badenv, p2p_level_junk) { "NCCL_P2P_LEVEL", "3x" };
FIXTURE_VARIANT_ADD(badenv, p2p_level_none) { "NCCL_P2P_LEVEL", "NONE" };
FIXTURE_VARIANT_ADD(badenv, p2p_disable) { "NCCL_P2P_DISABLE", "yes" };
FIXTURE_VARIANT_ADD(badenv, p2p_disable_junk) { "NCCL_P2P_DISABLE", "1x" };
FIXTURE_VARIANT_ADD(badenv, p2p_read) { "NCCL_P2P_READ_ENABLE", "2" };
FIXTURE_VARIANT_ADD(badenv, buffsize) { "NCCL_BUFFSIZE", "4Q" };
FIXTURE_VARIANT_ADD(badenv, ll_buffsize) { "NCCL_LL_BUFFSIZE", "-1" };
FIXTURE_VARIANT_ADD(badenv, ll128_buffsize) { "NCCL_LL128_BUFFSIZE", "2G" };
FIXTURE_VARIANT_ADD(badenv, debug) { "NCCL_DEBUG", "LOUD" };
FIXTURE_VARIANT_ADD(badenv, debug_subsys) { "NCCL_DEBUG_SUBSYS", "INIT,NOPE" };
FIXTURE_VARIANT_ADD(badenv, runtime) { "MLAP2P_RUNTIME", "gpu" };
FIXTURE_VARIANT_ADD(badenv, timeout) { "MLAP2P_BOOTSTRAP_TIMEOUT", "soon" };
FIXTURE_VARIANT_ADD(badenv, rings) { "NCCL_RINGS", "0 0" };
FIXTURE_VARIANT_ADD(badenv, family) { "MLAP2P_FAMILY", "trn9" };
FIXTURE_VARIANT_ADD(badenv, lnc) { "MLAP2P_LNC", "3" };
FIXTURE_VARIANT_ADD(badenv, pod) { "MLAP2P_POD", "mesh" };
FIXTURE_VARIANT_ADD(badenv, pod_nodes) { "MLAP2P_POD_NODES", "0" };
FIXTURE_VARIANT_ADD(badenv, node) { "MLAP2P_NODE", "7" };
FIXTURE_VARIANT_ADD(badenv, devices) { "MLAP2P_DEVICES", "15" };
FIXTURE_VARIANT_ADD(badenv, ifname) { "NCCL_SOCKET_IFNAME", "=nosuchif0" };

/* Host runtime: only it reads MLAP2P_FAMILY .. MLAP2P_DEVICES. */
FIXTURE_SETUP(badenv)
{
	self->dummy = 0;
	if (strcmp(variant->name, "MLAP2P_RUNTIME"))
		setenv("MLAP2P_RUNTIME", "host", 1);
}

FIXTURE_TEARDOWN(badenv)
{
}

TEST_F(badenv, refused_by_name)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm = NULL;
	int ret;

	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	setenv(variant->name, variant->value, 1);
	ret = mlap2p_comm_init_rank(&comm, 2, &id, 0, 0);
	EXPECT_EQ(-EINVAL, ret);
	EXPECT_EQ(NULL, comm);
	EXPECT_NE(NULL, strstr(mlap2p_last_error(), variant->name))
		TH_LOG("message: %s", mlap2p_last_error());
}

/* The two P2P variables say what they take. */
TEST(p2p_env_messages)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm = NULL;

	setenv("MLAP2P_RUNTIME", "host", 1);
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	setenv("NCCL_P2P_LEVEL", "NVLINK", 1);
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 2, &id, 0, 0));
	EXPECT_STREQ("NCCL_P2P_LEVEL=NVLINK is not valid: expected LOCAL|D2D|RELAY|POD, NCCL's LOC|NVL|NVB|PIX|PXB|PHB|SYS, or NCCL's number 0..5",
		     mlap2p_last_error());
	unsetenv("NCCL_P2P_LEVEL");
	setenv("NCCL_P2P_DISABLE", "yes", 1);
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 2, &id, 0, 0));
	EXPECT_STREQ("NCCL_P2P_DISABLE=yes is not valid: expected an integer (0 keeps P2P, any other value disables it)",
		     mlap2p_last_error());
	EXPECT_EQ(NULL, comm);
}

/* A core beyond the topology is refused too. */
TEST(core_out_of_range)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm = NULL;

	setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_FAMILY", "trn1", 1);	/* 32 cores */
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 1, &id, 0, 32));
	EXPECT_NE(NULL, strstr(mlap2p_last_error(), "core 32"));
}

TEST_HARNESS_MAIN
