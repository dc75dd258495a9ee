// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Host-only unit tests of the locality rules in common/mlap2p_topo.c: no
 * module, no device, just the pure functions.  Checks
 *
 *  - every family's defaults, and the family table of docs/topology.md;
 *  - validation: every inconsistent field alone gives -EINVAL, and a grid of
 *    about a million field combinations agrees with an independent oracle;
 *  - the worked examples of docs/topology.md, number for number;
 *  - properties over every MLA pair (and every, or a dense sample of, core
 *    pair) of 120+ family/LNC/cores/devices/pod combinations;
 *  - bounds: every function rejects out-of-range ids and NULL pointers and
 *    writes nothing when it fails;
 *  - names and parsing.
 *
 * Build: gcc -std=gnu11 -Wall -Wextra -Werror -I<ksft> -Iuapi -Icommon \
 *        test/topo_test.c common/mlap2p_topo.c -o topo_test
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <stdbool.h>

#include <linux/mlap2p.h>
#include "mlap2p_topo.h"

/* The 6.1 harness and its TEST() wrappers have unused parameters. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"

/*
 * ASSERT_*() expands to two statements (the check, then a for() that logs
 * and bails), so a loop or if around one always takes braces.
 */

/* Typed copies of the constants, so the harness compares like with like. */
static const __u32 E_NONE = MLAP2P_EDGE_NONE;
static const __u32 E_LOCAL = MLAP2P_EDGE_LOCAL;
static const __u32 E_D2D = MLAP2P_EDGE_D2D;
static const __u32 E_RELAY = MLAP2P_EDGE_RELAY;
static const __u32 E_POD = MLAP2P_EDGE_POD;
static const __u32 NO_MLA = MLAP2P_NO_MLA;
static const __u32 POISON = 0xdeadbeefU;

static struct mlap2p_topo mk(__u32 family, __u32 devices, __u32 cores,
			     __u32 lnc, __u32 pod, __u32 pod_nodes, __u32 node)
{
	struct mlap2p_topo t = {
		.family = family, .num_devices = devices,
		.cores_per_device = cores, .lnc = lnc, .pod_type = pod,
		.pod_nodes = pod_nodes, .node = node,
	};
	return t;
}

static const char *cfg_str(const struct mlap2p_topo *t)
{
	static char buf[160];

	snprintf(buf, sizeof(buf),
		 "family=%u devices=%u cores_per_device=%u lnc=%u pod=%u pod_nodes=%u node=%u",
		 t->family, t->num_devices, t->cores_per_device, t->lnc,
		 t->pod_type, t->pod_nodes, t->node);
	return buf;
}

/* ---- An independent oracle, written from docs/topology.md. ---- */

static bool oracle_torus(__u32 family)
{
	return family == MLAP2P_FAMILY_TRN1 || family == MLAP2P_FAMILY_TRN2;
}

static bool oracle_valid(const struct mlap2p_topo *t)
{
	__u32 f = t->family;

	if (f != MLAP2P_FAMILY_TRN1 && f != MLAP2P_FAMILY_TRN2 &&
	    f != MLAP2P_FAMILY_TRN3)
		return false;
	if (t->num_devices < 1 || t->num_devices > 64)
		return false;
	if (oracle_torus(f) && t->num_devices != 16)
		return false;
	if (t->num_devices % 2)		/* every family pairs peer MLAs */
		return false;
	if (t->cores_per_device < 1 || t->cores_per_device > 16)
		return false;
	if (f == MLAP2P_FAMILY_TRN1 ? t->lnc != 1 : (t->lnc != 1 && t->lnc != 2))
		return false;
	if (t->cores_per_device % t->lnc)
		return false;
	switch (t->pod_type) {
	case MLAP2P_POD_NONE:
		if (t->pod_nodes != 1)
			return false;
		break;
	case MLAP2P_POD_P2P:
		if (f != MLAP2P_FAMILY_TRN2)
			return false;
		if (t->pod_nodes < 2 || t->pod_nodes > 64)
			return false;
		break;
	case MLAP2P_POD_SWITCH:
		if (f != MLAP2P_FAMILY_TRN3)
			return false;
		if (t->pod_nodes < 2 || t->pod_nodes > 64)
			return false;
		break;
	default:
		return false;
	}
	return t->node < t->pod_nodes;
}

static __u32 cyc_dist(__u32 a, __u32 b, __u32 n)
{
	__u32 d = a > b ? a - b : b - a;

	return d < n - d ? d : n - d;
}

/* Hop distance between local MLAs a and b inside one node. */
static __u32 oracle_dist(const struct mlap2p_topo *t, __u32 a, __u32 b)
{
	if (oracle_torus(t->family))
		return cyc_dist(a % 4, b % 4, 4) + cyc_dist(a / 4, b / 4, 4);
	return cyc_dist(a, b, t->num_devices);
}

static bool oracle_d2d(const struct mlap2p_topo *t, __u32 a, __u32 b)
{
	if (a == b)
		return false;
	return (a ^ 1) == b || oracle_dist(t, a, b) == 1;
}

static __u32 oracle_edge(const struct mlap2p_topo *t, __u32 a, __u32 b)
{
	__u32 nd = t->num_devices;
	__u32 na = a / nd, nb = b / nd, la = a % nd, lb = b % nd;

	if (a == b)
		return E_LOCAL;
	if (na == nb)
		return oracle_d2d(t, la, lb) ? E_D2D : E_RELAY;
	if (t->pod_type == MLAP2P_POD_SWITCH)
		return E_POD;
	if (t->pod_type == MLAP2P_POD_P2P && la == lb &&
	    cyc_dist(na, nb, t->pod_nodes) == 1)
		return E_POD;
	return E_NONE;
}

/* ---- The list of configurations the property tests walk. ---- */

#define MAX_CFGS 256

static int add_cfg(struct mlap2p_topo *out, int n, struct mlap2p_topo t)
{
	if (n < MAX_CFGS)
		out[n++] = t;
	return n;
}

/* One family/devices/cores/LNC combination: alone and in each pod. */
static int add_pods(struct mlap2p_topo *out, int n, __u32 f, __u32 nd,
		    __u32 cores, __u32 lnc)
{
	static const __u32 p2p_nodes[] = { 2, 3, 4, 5 };
	static const __u32 sw_nodes[] = { 2, 3 };
	unsigned int k;

	n = add_cfg(out, n, mk(f, nd, cores, lnc, MLAP2P_POD_NONE, 1, 0));
	for (k = 0; f == MLAP2P_FAMILY_TRN2 && k < ARRAY_SIZE(p2p_nodes); k++)
		n = add_cfg(out, n, mk(f, nd, cores, lnc, MLAP2P_POD_P2P,
				       p2p_nodes[k], p2p_nodes[k] - 1));
	for (k = 0; f == MLAP2P_FAMILY_TRN3 && k < ARRAY_SIZE(sw_nodes); k++)
		n = add_cfg(out, n, mk(f, nd, cores, lnc, MLAP2P_POD_SWITCH,
				       sw_nodes[k], 1));
	return n;
}

/*
 * Every family, every LNC it allows, cores_per_device of lnc, the family
 * default and 16, trn3 rings of 2, 4, 6, 16 and 64 MLAs, every pod type the
 * family allows with several node counts, and two 64-node pods.
 */
static int build_cfgs(struct mlap2p_topo *out)
{
	static const __u32 ring_devs[] = { 2, 4, 6, 16, 64 };
	int n = 0;
	__u32 f, lnc, ci, di;

	for (f = MLAP2P_FAMILY_TRN1; f <= MLAP2P_FAMILY_TRN3; f++) {
		bool ring = f == MLAP2P_FAMILY_TRN3;

		for (lnc = 1; lnc <= (f == MLAP2P_FAMILY_TRN1 ? 1U : 2U); lnc++) {
			const __u32 cores[] = {
				lnc, f == MLAP2P_FAMILY_TRN1 ? 2 : 8, 16
			};

			for (ci = 0; ci < ARRAY_SIZE(cores); ci++) {
				if (ci && cores[ci] == cores[ci - 1])
					continue;
				for (di = 0; di < (ring ? ARRAY_SIZE(ring_devs) : 1); di++)
					n = add_pods(out, n, f,
						     ring ? ring_devs[di] : 16,
						     cores[ci], lnc);
			}
		}
	}
	/* Large pods: many nodes. */
	n = add_cfg(out, n, mk(MLAP2P_FAMILY_TRN2, 16, 8, 2, MLAP2P_POD_P2P, 64, 63));
	n = add_cfg(out, n, mk(MLAP2P_FAMILY_TRN3, 2, 8, 2, MLAP2P_POD_SWITCH, 64, 0));
	return n;
}

/* ---- Defaults and the family table ---- */

TEST(defaults_validate)
{
	static const struct { __u32 family, devices, cores, lnc; } want[] = {
		{ MLAP2P_FAMILY_TRN1, 16, 2, 1 },
		{ MLAP2P_FAMILY_TRN2, 16, 8, 2 },
		{ MLAP2P_FAMILY_TRN3, 16, 8, 2 },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(want); i++) {
		struct mlap2p_topo t;

		memset(&t, 0xa5, sizeof(t));
		ASSERT_EQ(0, mlap2p_topo_defaults(&t, want[i].family));
		ASSERT_EQ(0, mlap2p_topo_validate(&t));
		ASSERT_EQ(want[i].family, t.family);
		ASSERT_EQ(want[i].devices, t.num_devices);
		ASSERT_EQ(want[i].cores, t.cores_per_device);
		ASSERT_EQ(want[i].lnc, t.lnc);
		ASSERT_EQ((__u32)MLAP2P_POD_NONE, t.pod_type);
		ASSERT_EQ(1U, t.pod_nodes);
		ASSERT_EQ(0U, t.node);
		ASSERT_EQ(want[i].devices * want[i].cores / want[i].lnc,
			  mlap2p_topo_cores_per_node(&t));
		ASSERT_EQ(mlap2p_topo_cores_per_node(&t),
			  mlap2p_topo_total_cores(&t));
		ASSERT_EQ(want[i].devices, mlap2p_topo_total_mlas(&t));
	}
}

TEST(defaults_reject_unknown_family)
{
	static const __u32 bad[] = { 0, 4, 5, 255, 0xffffffffU };
	struct mlap2p_topo t, before;
	unsigned int i;

	memset(&t, 0x5a, sizeof(t));
	before = t;
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ASSERT_EQ(-EINVAL, mlap2p_topo_defaults(&t, bad[i]));
		ASSERT_EQ(0, memcmp(&t, &before, sizeof(t)));
	}
	ASSERT_EQ(-EINVAL, mlap2p_topo_defaults(NULL, MLAP2P_FAMILY_TRN2));
	ASSERT_EQ(-EINVAL, mlap2p_topo_validate(NULL));
}

/* ---- Validation: each rule on its own ---- */

struct bad_case {
	const char *why;
	struct mlap2p_topo t;
};

#define T(f, d, c, l, p, pn, n) { f, d, c, l, p, pn, n }
#define TRN1 MLAP2P_FAMILY_TRN1
#define TRN2 MLAP2P_FAMILY_TRN2
#define TRN3 MLAP2P_FAMILY_TRN3
#define PNONE MLAP2P_POD_NONE
#define PP2P MLAP2P_POD_P2P
#define PSW MLAP2P_POD_SWITCH

static const struct bad_case bad_cases[] = {
	{ "family 0", T(0, 16, 8, 2, PNONE, 1, 0) },
	{ "family 4", T(4, 16, 8, 2, PNONE, 1, 0) },
	{ "family ~0", T(0xffffffffU, 16, 8, 2, PNONE, 1, 0) },
	{ "devices 0 (trn3)", T(TRN3, 0, 8, 2, PNONE, 1, 0) },
	{ "devices 0 (trn2)", T(TRN2, 0, 8, 2, PNONE, 1, 0) },
	{ "devices > MAX", T(TRN3, MLAP2P_TOPO_MAX_DEVICES + 2, 8, 2, PNONE, 1, 0) },
	{ "devices ~0", T(TRN3, 0xffffffffU, 8, 2, PNONE, 1, 0) },
	{ "trn1 torus needs 16", T(TRN1, 8, 2, 1, PNONE, 1, 0) },
	{ "trn1 torus needs 16 (32)", T(TRN1, 32, 2, 1, PNONE, 1, 0) },
	{ "trn2 torus needs 16", T(TRN2, 15, 8, 2, PNONE, 1, 0) },
	{ "trn2 torus needs 16 (17)", T(TRN2, 17, 8, 2, PNONE, 1, 0) },
	{ "trn3 peer pairs need even devices", T(TRN3, 3, 8, 2, PNONE, 1, 0) },
	{ "trn3 one device has no peer", T(TRN3, 1, 8, 2, PNONE, 1, 0) },
	{ "cores 0", T(TRN2, 16, 0, 1, PNONE, 1, 0) },
	{ "cores > MAX", T(TRN2, 16, MLAP2P_TOPO_MAX_CORES_PER_DEV + 2, 2, PNONE, 1, 0) },
	{ "cores not divisible by lnc (trn2)", T(TRN2, 16, 7, 2, PNONE, 1, 0) },
	{ "cores not divisible by lnc (trn3)", T(TRN3, 16, 1, 2, PNONE, 1, 0) },
	{ "lnc 0", T(TRN2, 16, 8, 0, PNONE, 1, 0) },
	{ "lnc 3", T(TRN2, 16, 6, 3, PNONE, 1, 0) },
	{ "lnc 4", T(TRN3, 16, 8, 4, PNONE, 1, 0) },
	{ "lnc 2 not allowed on trn1", T(TRN1, 16, 2, 2, PNONE, 1, 0) },
	{ "pod p2p not allowed on trn1", T(TRN1, 16, 2, 1, PP2P, 2, 0) },
	{ "pod switch not allowed on trn1", T(TRN1, 16, 2, 1, PSW, 2, 0) },
	{ "pod switch not allowed on trn2", T(TRN2, 16, 8, 2, PSW, 2, 0) },
	{ "pod p2p not allowed on trn3", T(TRN3, 16, 8, 2, PP2P, 2, 0) },
	{ "pod type 3", T(TRN2, 16, 8, 2, 3, 2, 0) },
	{ "pod type ~0", T(TRN2, 16, 8, 2, 0xffffffffU, 2, 0) },
	{ "pod_nodes 0 (none)", T(TRN2, 16, 8, 2, PNONE, 0, 0) },
	{ "pod_nodes 0 (p2p)", T(TRN2, 16, 8, 2, PP2P, 0, 0) },
	{ "pod_nodes > MAX", T(TRN2, 16, 8, 2, PP2P, MLAP2P_TOPO_MAX_POD_NODES + 1, 0) },
	{ "pod_nodes ~0", T(TRN3, 16, 8, 2, PSW, 0xffffffffU, 0) },
	{ "pod_nodes 2 without a pod", T(TRN2, 16, 8, 2, PNONE, 2, 0) },
	{ "p2p pod of 1 node", T(TRN2, 16, 8, 2, PP2P, 1, 0) },
	{ "switch pod of 1 node", T(TRN3, 16, 8, 2, PSW, 1, 0) },
	{ "node 1 without a pod", T(TRN2, 16, 8, 2, PNONE, 1, 1) },
	{ "node == pod_nodes", T(TRN2, 16, 8, 2, PP2P, 4, 4) },
	{ "node > pod_nodes", T(TRN3, 16, 8, 2, PSW, 2, 7) },
	{ "node ~0", T(TRN3, 16, 8, 2, PSW, 2, 0xffffffffU) },
};

TEST(invalid_fields_each_rejected)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad_cases); i++) {
		ASSERT_EQ(-EINVAL, mlap2p_topo_validate(&bad_cases[i].t))
			TH_LOG("accepted: %s", bad_cases[i].why);
		ASSERT_FALSE(oracle_valid(&bad_cases[i].t))
			TH_LOG("oracle accepts: %s", bad_cases[i].why);
	}
}

/* An invalid topology makes every function fail and write nothing. */
TEST(invalid_topology_every_function_fails)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad_cases); i++) {
		const struct mlap2p_topo *t = &bad_cases[i].t;
		struct mlap2p_topo_dev dev, dev_before;
		__u32 a = POISON, b = POISON;

		memset(&dev, 0x77, sizeof(dev));
		dev_before = dev;
		ASSERT_EQ(0U, mlap2p_topo_cores_per_node(t));
		ASSERT_EQ(0U, mlap2p_topo_total_cores(t));
		ASSERT_EQ(0U, mlap2p_topo_total_mlas(t));
		ASSERT_EQ(-EINVAL, mlap2p_topo_core_mla(t, 0, &a));
		ASSERT_EQ(-EINVAL, mlap2p_topo_dev(t, 0, &dev));
		ASSERT_EQ(-EINVAL, mlap2p_topo_mla_edge(t, 0, 0, &a, &b));
		ASSERT_EQ(-EINVAL, mlap2p_topo_core_edge(t, 0, 0, &a, &b));
		ASSERT_EQ(POISON, a);
		ASSERT_EQ(POISON, b);
		ASSERT_EQ(0, memcmp(&dev, &dev_before, sizeof(dev)));
	}
	ASSERT_EQ(0U, mlap2p_topo_cores_per_node(NULL));
	ASSERT_EQ(0U, mlap2p_topo_total_cores(NULL));
	ASSERT_EQ(0U, mlap2p_topo_total_mlas(NULL));
}

/* About two million combinations of field values against the oracle. */
TEST(validate_grid_matches_oracle)
{
	static const __u32 fam[] = { 0, 1, 2, 3, 4, 0xffffffffU };
	static const __u32 devs[] = { 0, 1, 2, 3, 4, 6, 8, 15, 16, 17, 32,
				      63, 64, 65, 66, 0xffffffffU };
	static const __u32 cores[] = { 0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 18,
				       0xffffffffU };
	static const __u32 lncs[] = { 0, 1, 2, 3, 4, 0xffffffffU };
	static const __u32 pods[] = { 0, 1, 2, 3, 0xffffffffU };
	static const __u32 pnodes[] = { 0, 1, 2, 3, 4, 63, 64, 65, 0xffffffffU };
	static const __u32 nodes[] = { 0, 1, 2, 3, 63, 64, 0xffffffffU };
	const unsigned long total = ARRAY_SIZE(fam) * ARRAY_SIZE(devs) *
		ARRAY_SIZE(cores) * ARRAY_SIZE(lncs) * ARRAY_SIZE(pods) *
		ARRAY_SIZE(pnodes) * ARRAY_SIZE(nodes);
	unsigned long valid = 0, i;

	/* Walk the product of the value lists, one mixed-radix index. */
	for (i = 0; i < total; i++) {
		unsigned long r = i;
		struct mlap2p_topo t;
		bool ok;

		t.node = nodes[r % ARRAY_SIZE(nodes)];
		r /= ARRAY_SIZE(nodes);
		t.pod_nodes = pnodes[r % ARRAY_SIZE(pnodes)];
		r /= ARRAY_SIZE(pnodes);
		t.pod_type = pods[r % ARRAY_SIZE(pods)];
		r /= ARRAY_SIZE(pods);
		t.lnc = lncs[r % ARRAY_SIZE(lncs)];
		r /= ARRAY_SIZE(lncs);
		t.cores_per_device = cores[r % ARRAY_SIZE(cores)];
		r /= ARRAY_SIZE(cores);
		t.num_devices = devs[r % ARRAY_SIZE(devs)];
		r /= ARRAY_SIZE(devs);
		t.family = fam[r];

		ok = oracle_valid(&t);
		valid += ok;
		ASSERT_EQ(ok ? 0 : -EINVAL, mlap2p_topo_validate(&t))
			TH_LOG("%s", cfg_str(&t));
	}
	TH_LOG("%lu of %lu combinations valid", valid, total);
	ASSERT_GT(valid, 1000UL);
}

/* Every configuration the property tests use is valid. */
TEST(property_configs_valid)
{
	struct mlap2p_topo cfgs[MAX_CFGS];
	int n = build_cfgs(cfgs), i;

	ASSERT_LT(n, MAX_CFGS);
	ASSERT_GT(n, 100);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, mlap2p_topo_validate(&cfgs[i]))
			TH_LOG("%s", cfg_str(&cfgs[i]));
	}
}

/* ---- Worked examples: docs/topology.md, section "Worked examples" ---- */

static void expect_core_edge(struct __test_metadata *_metadata,
			     const struct mlap2p_topo *t, __u32 ca, __u32 cb,
			     __u32 mla_a, __u32 mla_b, __u32 edge, __u32 mid)
{
	__u32 ma = POISON, mb = POISON, e = POISON, m = POISON;

	ASSERT_EQ(0, mlap2p_topo_core_mla(t, ca, &ma));
	ASSERT_EQ(0, mlap2p_topo_core_mla(t, cb, &mb));
	ASSERT_EQ(mla_a, ma) TH_LOG("core %u", ca);
	ASSERT_EQ(mla_b, mb) TH_LOG("core %u", cb);
	ASSERT_EQ(0, mlap2p_topo_core_edge(t, ca, cb, &e, &m));
	ASSERT_EQ(edge, e) TH_LOG("cores %u,%u", ca, cb);
	ASSERT_EQ(mid, m) TH_LOG("cores %u,%u", ca, cb);
	/* And the other way round: same class, same intermediate. */
	ASSERT_EQ(0, mlap2p_topo_core_edge(t, cb, ca, &e, &m));
	ASSERT_EQ(edge, e);
	ASSERT_EQ(mid, m);
}

TEST(example_local)
{
	struct mlap2p_topo t;

	/* trn2 defaults: LNC 2, 4 logical cores per MLA, 64 per node. */
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN2));
	ASSERT_EQ(64U, mlap2p_topo_cores_per_node(&t));
	expect_core_edge(_metadata, &t, 2, 3, 0, 0, E_LOCAL, NO_MLA);
	expect_core_edge(_metadata, &t, 4, 7, 1, 1, E_LOCAL, NO_MLA);
	expect_core_edge(_metadata, &t, 60, 63, 15, 15, E_LOCAL, NO_MLA);
	/* Cores 3 and 4 straddle MLAs 0 and 1. */
	expect_core_edge(_metadata, &t, 3, 4, 0, 1, E_D2D, NO_MLA);

	/* trn2 with LNC 1: 8 logical cores per MLA, cores 0..7 share MLA 0. */
	t.lnc = 1;
	ASSERT_EQ(128U, mlap2p_topo_cores_per_node(&t));
	expect_core_edge(_metadata, &t, 0, 7, 0, 0, E_LOCAL, NO_MLA);
	expect_core_edge(_metadata, &t, 7, 8, 0, 1, E_D2D, NO_MLA);
}

TEST(example_d2d)
{
	struct mlap2p_topo t;

	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN2));
	/* MLA 0 (0,0): peer MLA 1 (also its x+1 neighbour). */
	expect_core_edge(_metadata, &t, 0, 4, 0, 1, E_D2D, NO_MLA);
	/* x wraps: MLA 0 (0,0) and MLA 3 (3,0). */
	expect_core_edge(_metadata, &t, 0, 12, 0, 3, E_D2D, NO_MLA);
	/* y neighbour: MLA 0 and MLA 4 (0,1). */
	expect_core_edge(_metadata, &t, 0, 16, 0, 4, E_D2D, NO_MLA);
	/* y wraps: MLA 0 and MLA 12 (0,3). */
	expect_core_edge(_metadata, &t, 0, 48, 0, 12, E_D2D, NO_MLA);

	/* trn3 defaults: a ring, peers 2k <-> 2k+1; MLA 0 and MLA 15 wrap. */
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN3));
	expect_core_edge(_metadata, &t, 0, 63, 0, 15, E_D2D, NO_MLA);
	expect_core_edge(_metadata, &t, 5, 9, 1, 2, E_D2D, NO_MLA);
}

TEST(example_relay)
{
	struct mlap2p_topo t;

	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN2));
	/* MLA 0 (0,0) -> MLA 5 (1,1): x first, through MLA 1 (1,0). */
	expect_core_edge(_metadata, &t, 0, 20, 0, 5, E_RELAY, 1);
	/* MLA 5 (1,1) and MLA 15 (3,3): route from 5, x 1->3 is a tie, +x. */
	expect_core_edge(_metadata, &t, 63, 20, 15, 5, E_RELAY, 6);
	/* MLA 0 (0,0) and MLA 8 (0,2): same column, y tie, +y: MLA 4. */
	expect_core_edge(_metadata, &t, 0, 32, 0, 8, E_RELAY, 4);

	/* trn1: 2 cores per MLA; core 21 is on MLA 10 (2,2). */
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN1));
	expect_core_edge(_metadata, &t, 0, 21, 0, 10, E_RELAY, 1);

	/* trn3 ring of 16, 4 cores per MLA. */
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN3));
	expect_core_edge(_metadata, &t, 0, 8, 0, 2, E_RELAY, 1);
	expect_core_edge(_metadata, &t, 0, 36, 0, 9, E_RELAY, 15);
	expect_core_edge(_metadata, &t, 0, 32, 0, 8, E_RELAY, 1);
	expect_core_edge(_metadata, &t, 20, 60, 5, 15, E_RELAY, 4);
}

TEST(example_pod_p2p)
{
	/* trn2, LNC 2, P2P pod of 4 nodes on a node ring, this host node 0. */
	struct mlap2p_topo t = mk(TRN2, 16, 8, 2, PP2P, 4, 0);

	ASSERT_EQ(0, mlap2p_topo_validate(&t));
	ASSERT_EQ(256U, mlap2p_topo_total_cores(&t));
	ASSERT_EQ(64U, mlap2p_topo_total_mlas(&t));
	/* Node 0 MLA 5 <-> node 1 MLA 5 (global 21): linked. */
	expect_core_edge(_metadata, &t, 20, 84, 5, 21, E_POD, NO_MLA);
	/* Node 0 <-> node 3: the ring wraps. */
	expect_core_edge(_metadata, &t, 20, 212, 5, 53, E_POD, NO_MLA);
	/* Node 0 <-> node 2: not adjacent. */
	expect_core_edge(_metadata, &t, 20, 148, 5, 37, E_NONE, NO_MLA);
	/* Node 0 MLA 5 <-> node 1 MLA 6: different local index. */
	expect_core_edge(_metadata, &t, 20, 88, 5, 22, E_NONE, NO_MLA);
	/* Inside node 1 the torus rules hold as on node 0. */
	expect_core_edge(_metadata, &t, 64, 84, 16, 21, E_RELAY, 17);
}

TEST(example_pod_switch)
{
	/* trn3, LNC 2, switch pod of 2 nodes: every cross-node pair is POD. */
	struct mlap2p_topo t = mk(TRN3, 16, 8, 2, PSW, 2, 1);

	ASSERT_EQ(0, mlap2p_topo_validate(&t));
	ASSERT_EQ(128U, mlap2p_topo_total_cores(&t));
	expect_core_edge(_metadata, &t, 0, 127, 0, 31, E_POD, NO_MLA);
	expect_core_edge(_metadata, &t, 20, 84, 5, 21, E_POD, NO_MLA);
	expect_core_edge(_metadata, &t, 64, 72, 16, 18, E_RELAY, 17);
}

TEST(example_none)
{
	/* The same P2P pod: node 0 and node 2 are not linked. */
	struct mlap2p_topo t = mk(TRN2, 16, 8, 2, PP2P, 4, 2);

	expect_core_edge(_metadata, &t, 0, 128, 0, 32, E_NONE, NO_MLA);
	/* The P2P pod of 2 nodes links only same-index MLAs. */
	t = mk(TRN2, 16, 8, 2, PP2P, 2, 0);
	expect_core_edge(_metadata, &t, 0, 68, 0, 17, E_NONE, NO_MLA);
	expect_core_edge(_metadata, &t, 0, 64, 0, 16, E_POD, NO_MLA);
}

static void expect_dev(struct __test_metadata *_metadata,
		       const struct mlap2p_topo *t, __u32 mla,
		       __u32 node, __u32 local, __u32 peer, __u32 x, __u32 y,
		       __u32 nn, const __u32 *nbrs, __u32 first, __u32 ncores)
{
	struct mlap2p_topo_dev d;
	__u32 k;

	memset(&d, 0xee, sizeof(d));
	ASSERT_EQ(0, mlap2p_topo_dev(t, mla, &d));
	ASSERT_EQ(node, d.node);
	ASSERT_EQ(local, d.local_index);
	ASSERT_EQ(peer, d.peer_mla);
	ASSERT_EQ(x, d.torus_x);
	ASSERT_EQ(y, d.torus_y);
	ASSERT_EQ(nn, d.num_neighbours);
	for (k = 0; k < MLAP2P_MAX_NEIGHBOURS; k++) {
		ASSERT_EQ(k < nn ? nbrs[k] : 0U, d.neighbours[k]);
	}
	ASSERT_EQ(first, d.first_core);
	ASSERT_EQ(ncores, d.num_cores);
}

TEST(example_dev_info)
{
	static const __u32 trn2_5[] = { 1, 4, 6, 9 };
	static const __u32 trn3_0[] = { 1, 15 };
	static const __u32 p2p_21[] = { 17, 20, 22, 25 };
	static const __u32 trn1_0[] = { 1, 3, 4, 12 };
	static const __u32 ring2_1[] = { 0 };
	struct mlap2p_topo t;

	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN2));
	expect_dev(_metadata, &t, 5, 0, 5, 4, 1, 1, 4, trn2_5, 20, 4);
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN1));
	expect_dev(_metadata, &t, 0, 0, 0, 1, 0, 0, 4, trn1_0, 0, 2);
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, MLAP2P_FAMILY_TRN3));
	expect_dev(_metadata, &t, 0, 0, 0, 1, NO_MLA, NO_MLA, 2, trn3_0, 0, 4);
	t = mk(TRN2, 16, 8, 2, PP2P, 4, 0);
	expect_dev(_metadata, &t, 21, 1, 5, 20, 1, 1, 4, p2p_21, 84, 4);
	/* A trn3 ring of 2: one link, which is also the peer link. */
	t = mk(TRN3, 2, 8, 2, PNONE, 1, 0);
	expect_dev(_metadata, &t, 1, 0, 1, 0, NO_MLA, NO_MLA, 1, ring2_1, 4, 4);
}

/*
 * The port model of nec_get_peer_mla_idx(dev, mla, port): the table of
 * docs/topology.md, "Ports and the peer MLA", for MLA 5 of trn2, MLA 0 of
 * trn1, MLAs 0 and 3 of trn3, and MLA 21 of a trn2 pod (node 1).
 */
TEST(example_ports)
{
	static const struct {
		__u32 family, pod, pod_nodes, mla, ports[4];
	} rows[] = {
		{ TRN2, PNONE, 1, 5, { 6, 4, 9, 1 } },
		{ TRN2, PNONE, 1, 0, { 1, 3, 4, 12 } },
		{ TRN1, PNONE, 1, 15, { 12, 14, 3, 11 } },
		{ TRN3, PNONE, 1, 0, { 1, 15 } },
		{ TRN3, PNONE, 1, 3, { 4, 2 } },
		{ TRN2, PP2P, 4, 21, { 22, 20, 25, 17 } },
	};
	struct mlap2p_topo t;
	__u32 i, p, v;

	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		ASSERT_EQ(0, mlap2p_topo_defaults(&t, rows[i].family));
		t.pod_type = rows[i].pod;
		t.pod_nodes = rows[i].pod_nodes;
		ASSERT_EQ(rows[i].family == TRN3 ? 2U : 4U,
			  mlap2p_topo_num_ports(&t));
		for (p = 0; p < mlap2p_topo_num_ports(&t); p++) {
			v = POISON;
			ASSERT_EQ(0, mlap2p_topo_port_peer(&t, rows[i].mla, p, &v));
			ASSERT_EQ(rows[i].ports[p], v);
		}
		v = POISON;
		ASSERT_EQ(-EINVAL, mlap2p_topo_port_peer(&t, rows[i].mla, p, &v));
		ASSERT_EQ(POISON, v);
	}
	ASSERT_EQ(0, mlap2p_topo_defaults(&t, TRN2));
	v = POISON;
	ASSERT_EQ(-EINVAL, mlap2p_topo_port_peer(&t, 16, 0, &v));
	ASSERT_EQ(-EINVAL, mlap2p_topo_port_peer(&t, 0, 0, NULL));
	ASSERT_EQ(POISON, v);
	t.lnc = 3;
	ASSERT_EQ(0U, mlap2p_topo_num_ports(&t));
	ASSERT_EQ(-EINVAL, mlap2p_topo_port_peer(&t, 0, 0, &v));
}

/* ---- Exhaustive properties over every configuration ---- */

static bool in_list(const __u32 *v, __u32 n, __u32 x)
{
	__u32 i;

	for (i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static void check_devices(struct __test_metadata *_metadata,
			  const struct mlap2p_topo *t)
{
	__u32 nd = t->num_devices, lpm = t->cores_per_device / t->lnc;
	__u32 mlas = mlap2p_topo_total_mlas(t), a, k;

	ASSERT_EQ(t->pod_nodes * nd, mlas);
	ASSERT_EQ(nd * lpm, mlap2p_topo_cores_per_node(t));
	ASSERT_EQ(mlas * lpm, mlap2p_topo_total_cores(t));

	for (a = 0; a < mlas; a++) {
		struct mlap2p_topo_dev d, pd;
		__u32 base = a / nd * nd;

		ASSERT_EQ(0, mlap2p_topo_dev(t, a, &d));
		ASSERT_EQ(a / nd, d.node);
		ASSERT_EQ(a % nd, d.local_index);
		ASSERT_EQ(a * lpm, d.first_core);
		ASSERT_EQ(lpm, d.num_cores);
		/* Peer: the other MLA of the pair, and the relation is mutual. */
		ASSERT_EQ(base + ((a % nd) ^ 1), d.peer_mla);
		ASSERT_EQ(0, mlap2p_topo_dev(t, d.peer_mla, &pd));
		ASSERT_EQ(a, pd.peer_mla);
		/* ... and the MLA on port (local & 1); the neighbours are
		 * exactly the ports' MLAs, and each port is mutual. */
		{
			__u32 p, v, back, q, np = mlap2p_topo_num_ports(t);
			bool found;

			ASSERT_EQ(oracle_torus(t->family) ? 4U : 2U, np);
			ASSERT_EQ(0, mlap2p_topo_port_peer(t, a, (a % nd) & 1, &v));
			ASSERT_EQ(d.peer_mla, v);
			for (p = 0; p < np; p++) {
				ASSERT_EQ(0, mlap2p_topo_port_peer(t, a, p, &v));
				ASSERT_TRUE(in_list(d.neighbours, d.num_neighbours, v));
				found = false;
				for (q = 0; q < np; q++) {
					ASSERT_EQ(0, mlap2p_topo_port_peer(t, v, q, &back));
					found |= back == a;
				}
				ASSERT_TRUE(found);
			}
			for (k = 0; k < d.num_neighbours; k++) {
				found = false;
				for (p = 0; p < np; p++) {
					ASSERT_EQ(0, mlap2p_topo_port_peer(t, a, p, &v));
					found |= v == d.neighbours[k];
				}
				ASSERT_TRUE(found);
			}
		}
		if (oracle_torus(t->family)) {
			ASSERT_EQ((a % nd) % 4, d.torus_x);
			ASSERT_EQ((a % nd) / 4, d.torus_y);
			ASSERT_EQ(4U, d.num_neighbours);
		} else {
			ASSERT_EQ(NO_MLA, d.torus_x);
			ASSERT_EQ(NO_MLA, d.torus_y);
			ASSERT_EQ(nd == 2 ? 1U : 2U, d.num_neighbours);
		}
		ASSERT_LE(d.num_neighbours, (__u32)MLAP2P_MAX_NEIGHBOURS);
		for (k = 0; k < d.num_neighbours; k++) {
			ASSERT_EQ(base, d.neighbours[k] / nd * nd);
			ASSERT_NE(a, d.neighbours[k]);
			if (k) {
				ASSERT_LT(d.neighbours[k - 1], d.neighbours[k]);
			}
		}
		for (; k < MLAP2P_MAX_NEIGHBOURS; k++) {
			ASSERT_EQ(0U, d.neighbours[k]);
		}
	}
}

static void check_mla_pairs(struct __test_metadata *_metadata,
			    const struct mlap2p_topo *t, unsigned long *seen)
{
	__u32 nd = t->num_devices, mlas = mlap2p_topo_total_mlas(t), a, b;

	for (a = 0; a < mlas; a++) {
		struct mlap2p_topo_dev da;
		__u32 n_d2d = 0;

		ASSERT_EQ(0, mlap2p_topo_dev(t, a, &da));
		for (b = 0; b < mlas; b++) {
			__u32 e = POISON, m = POISON, e2 = POISON, m2 = POISON;
			__u32 lo = a < b ? a : b, hi = a < b ? b : a;

			ASSERT_EQ(0, mlap2p_topo_mla_edge(t, a, b, &e, &m));
			ASSERT_EQ(0, mlap2p_topo_mla_edge(t, b, a, &e2, &m2));
			/* Symmetric, intermediate included. */
			ASSERT_EQ(e, e2) TH_LOG("%s mla %u,%u", cfg_str(t), a, b);
			ASSERT_EQ(m, m2) TH_LOG("%s mla %u,%u", cfg_str(t), a, b);
			ASSERT_EQ(oracle_edge(t, a, b), e)
				TH_LOG("%s mla %u,%u", cfg_str(t), a, b);
			seen[e]++;
			/* LOCAL iff same MLA. */
			ASSERT_EQ(a == b, e == E_LOCAL);
			/* The neighbour list is exactly the D2D set. */
			ASSERT_EQ(e == E_D2D,
				  in_list(da.neighbours, da.num_neighbours, b))
				TH_LOG("%s mla %u,%u", cfg_str(t), a, b);
			n_d2d += e == E_D2D;
			/* Only RELAY names an intermediate. */
			ASSERT_EQ(e == E_RELAY, m != NO_MLA);
			/* Cross-node pairs are POD or NONE, same-node never. */
			ASSERT_EQ(a / nd != b / nd, e == E_POD || e == E_NONE);
			if (e == E_RELAY) {
				struct mlap2p_topo_dev dm;
				__u32 llo = lo % nd, lhi = hi % nd, lm = m % nd;
				__u32 me, mm;

				ASSERT_EQ(a / nd, m / nd);	/* same node */
				ASSERT_NE(a, m);
				ASSERT_NE(b, m);
				/* A D2D neighbour of the lower end ... */
				ASSERT_EQ(0, mlap2p_topo_mla_edge(t, lo, m, &me, &mm));
				ASSERT_EQ(E_D2D, me);
				/* ... one hop closer to the higher end ... */
				ASSERT_EQ(oracle_dist(t, llo, lhi) - 1,
					  oracle_dist(t, lm, lhi));
				/* ... a shared neighbour whenever one exists ... */
				ASSERT_EQ(0, mlap2p_topo_dev(t, m, &dm));
				if (oracle_dist(t, llo, lhi) == 2) {
					ASSERT_TRUE(oracle_d2d(t, lm, lhi));
				}
				/* ... and on a torus, x is walked first. */
				if (oracle_torus(t->family) && llo % 4 != lhi % 4) {
					ASSERT_EQ(llo / 4, lm / 4);
				}
			}
		}
		ASSERT_EQ(da.num_neighbours, n_d2d);
	}
}

static void check_core_pairs(struct __test_metadata *_metadata,
			     const struct mlap2p_topo *t)
{
	__u32 cores = mlap2p_topo_total_cores(t);
	__u32 lpm = t->cores_per_device / t->lnc;
	__u32 cpn = mlap2p_topo_cores_per_node(t);
	__u32 step = cores <= 1024 ? 1 : cores / 509 + 1;
	__u32 a, b;

	for (a = 0; a < cores; a++) {
		struct mlap2p_topo_dev d;
		__u32 ma;

		ASSERT_EQ(0, mlap2p_topo_core_mla(t, a, &ma));
		ASSERT_EQ(a / lpm, ma);
		ASSERT_EQ(a / cpn, ma / t->num_devices);	/* same node */
		ASSERT_EQ(0, mlap2p_topo_dev(t, ma, &d));
		ASSERT_LE(d.first_core, a);
		ASSERT_LT(a, d.first_core + d.num_cores);
		/* Every core pair when small, else a dense sample of b. */
		for (b = a % step; b < cores; b += step) {
			__u32 mb, e, m, e2, m2;

			ASSERT_EQ(0, mlap2p_topo_core_mla(t, b, &mb));
			ASSERT_EQ(0, mlap2p_topo_core_edge(t, a, b, &e, &m));
			ASSERT_EQ(0, mlap2p_topo_mla_edge(t, ma, mb, &e2, &m2));
			ASSERT_EQ(e2, e);
			ASSERT_EQ(m2, m);
		}
	}
}

TEST(properties_all_configs)
{
	struct mlap2p_topo cfgs[MAX_CFGS];
	unsigned long seen[MLAP2P_EDGE_POD + 1] = { 0 };
	int n = build_cfgs(cfgs), i;

	for (i = 0; i < n; i++) {
		check_devices(_metadata, &cfgs[i]);
		check_mla_pairs(_metadata, &cfgs[i], seen);
		check_core_pairs(_metadata, &cfgs[i]);
	}
	TH_LOG("%d configs; MLA pairs: LOCAL %lu D2D %lu RELAY %lu POD %lu NONE %lu",
	       n, seen[MLAP2P_EDGE_LOCAL], seen[MLAP2P_EDGE_D2D],
	       seen[MLAP2P_EDGE_RELAY], seen[MLAP2P_EDGE_POD],
	       seen[MLAP2P_EDGE_NONE]);
	/* Every class occurs. */
	for (i = 0; i <= MLAP2P_EDGE_POD; i++) {
		ASSERT_GT(seen[i], 0UL);
	}
}

/* ---- Bounds ---- */

TEST(bounds_every_function)
{
	struct mlap2p_topo cfgs[MAX_CFGS];
	int n = build_cfgs(cfgs), i;

	for (i = 0; i < n; i++) {
		const struct mlap2p_topo *t = &cfgs[i];
		__u32 cores = mlap2p_topo_total_cores(t);
		__u32 mlas = mlap2p_topo_total_mlas(t);
		const __u32 bad_c[] = { cores, cores + 1, 0x7fffffffU, 0xffffffffU };
		const __u32 bad_m[] = { mlas, mlas + 1, 0x7fffffffU, 0xffffffffU };
		struct mlap2p_topo_dev d, before;
		unsigned int k;
		__u32 x = POISON, y = POISON;

		memset(&d, 0x33, sizeof(d));
		before = d;
		for (k = 0; k < 4; k++) {
			ASSERT_EQ(-EINVAL, mlap2p_topo_core_mla(t, bad_c[k], &x));
			ASSERT_EQ(-EINVAL, mlap2p_topo_core_edge(t, bad_c[k], 0, &x, &y));
			ASSERT_EQ(-EINVAL, mlap2p_topo_core_edge(t, 0, bad_c[k], &x, &y));
			ASSERT_EQ(-EINVAL, mlap2p_topo_dev(t, bad_m[k], &d));
			ASSERT_EQ(-EINVAL, mlap2p_topo_mla_edge(t, bad_m[k], 0, &x, &y));
			ASSERT_EQ(-EINVAL, mlap2p_topo_mla_edge(t, 0, bad_m[k], &x, &y));
		}
		ASSERT_EQ(POISON, x);
		ASSERT_EQ(POISON, y);
		ASSERT_EQ(0, memcmp(&d, &before, sizeof(d)));
		/* The last valid ids work. */
		ASSERT_EQ(0, mlap2p_topo_core_mla(t, cores - 1, &x));
		ASSERT_EQ(mlas - 1, x);
		ASSERT_EQ(0, mlap2p_topo_dev(t, mlas - 1, &d));
		/* NULL outputs. */
		ASSERT_EQ(-EINVAL, mlap2p_topo_core_mla(t, 0, NULL));
		ASSERT_EQ(-EINVAL, mlap2p_topo_dev(t, 0, NULL));
		ASSERT_EQ(-EINVAL, mlap2p_topo_mla_edge(t, 0, 0, NULL, &y));
		ASSERT_EQ(-EINVAL, mlap2p_topo_core_edge(t, 0, 0, NULL, &y));
		/* The intermediate is optional. */
		ASSERT_EQ(0, mlap2p_topo_mla_edge(t, 0, 0, &x, NULL));
		ASSERT_EQ(E_LOCAL, x);
		ASSERT_EQ(0, mlap2p_topo_core_edge(t, 0, cores - 1, &x, NULL));
	}
	/* NULL topology. */
	{
		__u32 x = POISON;
		struct mlap2p_topo_dev d;

		ASSERT_EQ(-EINVAL, mlap2p_topo_core_mla(NULL, 0, &x));
		ASSERT_EQ(-EINVAL, mlap2p_topo_dev(NULL, 0, &d));
		ASSERT_EQ(-EINVAL, mlap2p_topo_mla_edge(NULL, 0, 0, &x, &x));
		ASSERT_EQ(-EINVAL, mlap2p_topo_core_edge(NULL, 0, 0, &x, &x));
		ASSERT_EQ(POISON, x);
	}
}

/* ---- Names ---- */

static const char *show(const char *s)
{
	return s ? s : "(null)";
}

TEST(names)
{
	ASSERT_STREQ("trn1", mlap2p_topo_family_name(MLAP2P_FAMILY_TRN1));
	ASSERT_STREQ("trn2", mlap2p_topo_family_name(MLAP2P_FAMILY_TRN2));
	ASSERT_STREQ("trn3", mlap2p_topo_family_name(MLAP2P_FAMILY_TRN3));
	ASSERT_NULL(mlap2p_topo_family_name(0));
	ASSERT_NULL(mlap2p_topo_family_name(4));
	ASSERT_NULL(mlap2p_topo_family_name(0xffffffffU));
	ASSERT_STREQ("none", mlap2p_topo_pod_name(MLAP2P_POD_NONE));
	ASSERT_STREQ("p2p", mlap2p_topo_pod_name(MLAP2P_POD_P2P));
	ASSERT_STREQ("switch", mlap2p_topo_pod_name(MLAP2P_POD_SWITCH));
	ASSERT_NULL(mlap2p_topo_pod_name(3));
	ASSERT_NULL(mlap2p_topo_pod_name(0xffffffffU));
	ASSERT_STREQ("NONE", mlap2p_topo_edge_name(MLAP2P_EDGE_NONE));
	ASSERT_STREQ("LOCAL", mlap2p_topo_edge_name(MLAP2P_EDGE_LOCAL));
	ASSERT_STREQ("D2D", mlap2p_topo_edge_name(MLAP2P_EDGE_D2D));
	ASSERT_STREQ("RELAY", mlap2p_topo_edge_name(MLAP2P_EDGE_RELAY));
	ASSERT_STREQ("POD", mlap2p_topo_edge_name(MLAP2P_EDGE_POD));
	ASSERT_NULL(mlap2p_topo_edge_name(5));
	ASSERT_NULL(mlap2p_topo_edge_name(0xffffffffU));
	/* Nearest first: NCCL_P2P_LEVEL compares these numerically. */
	ASSERT_LT(MLAP2P_EDGE_LOCAL, MLAP2P_EDGE_D2D);
	ASSERT_LT(MLAP2P_EDGE_D2D, MLAP2P_EDGE_RELAY);
	ASSERT_LT(MLAP2P_EDGE_RELAY, MLAP2P_EDGE_POD);
}

TEST(parse_round_trip)
{
	__u32 v, i;

	for (i = 0; i < 64; i++) {
		const char *s = mlap2p_topo_family_name(i);

		if (!s)
			continue;
		v = POISON;
		ASSERT_EQ(0, mlap2p_topo_parse_family(s, &v));
		ASSERT_EQ(i, v);
	}
	for (i = 0; i < 64; i++) {
		const char *s = mlap2p_topo_pod_name(i);

		if (!s)
			continue;
		v = POISON;
		ASSERT_EQ(0, mlap2p_topo_parse_pod(s, &v));
		ASSERT_EQ(i, v);
	}
	for (i = 0; i < 64; i++) {
		const char *s = mlap2p_topo_edge_name(i);

		if (!s)
			continue;
		v = POISON;
		ASSERT_EQ(0, mlap2p_topo_parse_edge(s, &v));
		ASSERT_EQ(i, v);
	}
}

TEST(parse_forms)
{
	static const struct { const char *s; __u32 v; } fam[] = {
		{ "TRN1", 1 }, { "Trn2", 2 }, { "tRn3", 3 }, { "trn2\n", 2 },
		{ "1", 1 }, { "2", 2 }, { "3\n", 3 }, { "03", 3 },
	}, pod[] = {
		{ "NONE", 0 }, { "P2p", 1 }, { "Switch", 2 }, { "switch\n", 2 },
		{ "0", 0 }, { "1", 1 }, { "2", 2 },
	}, edge[] = {
		{ "local", 1 }, { "d2d", 2 }, { "Relay", 3 }, { "pod", 4 },
		{ "none", 0 }, { "POD\n", 4 },
		{ "1", 1 }, { "2", 2 }, { "3", 3 }, { "4", 4 }, { "0", 0 },
	};
	static const char * const bad_fam[] = {
		"", "trn", "trn0", "trn4", "trn22", "trn2 ", " trn2", "trn2\n\n",
		"0", "4", "-1", "1a", "99999999999", "trn\n", "\n",
	};
	static const char * const bad_pod[] = {
		"", "p2", "p2pp", "3", "-0", "switch ", "x", "\n",
	};
	static const char * const bad_edge[] = {
		"", "5", "LOC", "D2", "RELAYS", "4294967296", "+1", "d2d\r\n",
	};
	unsigned int i;
	__u32 v;

	for (i = 0; i < ARRAY_SIZE(fam); i++) {
		v = POISON;
		ASSERT_EQ(0, mlap2p_topo_parse_family(fam[i].s, &v)) TH_LOG("'%s'", fam[i].s);
		ASSERT_EQ(fam[i].v, v);
	}
	for (i = 0; i < ARRAY_SIZE(pod); i++) {
		v = POISON;
		ASSERT_EQ(0, mlap2p_topo_parse_pod(pod[i].s, &v)) TH_LOG("'%s'", pod[i].s);
		ASSERT_EQ(pod[i].v, v);
	}
	for (i = 0; i < ARRAY_SIZE(edge); i++) {
		v = POISON;
		ASSERT_EQ(0, mlap2p_topo_parse_edge(edge[i].s, &v)) TH_LOG("'%s'", edge[i].s);
		ASSERT_EQ(edge[i].v, v);
	}
	v = POISON;
	for (i = 0; i < ARRAY_SIZE(bad_fam); i++) {
		ASSERT_EQ(-EINVAL, mlap2p_topo_parse_family(bad_fam[i], &v))
			TH_LOG("'%s'", show(bad_fam[i]));
	}
	for (i = 0; i < ARRAY_SIZE(bad_pod); i++) {
		ASSERT_EQ(-EINVAL, mlap2p_topo_parse_pod(bad_pod[i], &v))
			TH_LOG("'%s'", show(bad_pod[i]));
	}
	for (i = 0; i < ARRAY_SIZE(bad_edge); i++) {
		ASSERT_EQ(-EINVAL, mlap2p_topo_parse_edge(bad_edge[i], &v))
			TH_LOG("'%s'", show(bad_edge[i]));
	}
	ASSERT_EQ(POISON, v);
	ASSERT_EQ(-EINVAL, mlap2p_topo_parse_family(NULL, &v));
	ASSERT_EQ(-EINVAL, mlap2p_topo_parse_family("trn2", NULL));
	ASSERT_EQ(-EINVAL, mlap2p_topo_parse_pod(NULL, &v));
	ASSERT_EQ(-EINVAL, mlap2p_topo_parse_pod("p2p", NULL));
	ASSERT_EQ(-EINVAL, mlap2p_topo_parse_edge(NULL, &v));
	ASSERT_EQ(-EINVAL, mlap2p_topo_parse_edge("D2D", NULL));
	ASSERT_EQ(POISON, v);
}

TEST_HARNESS_MAIN
