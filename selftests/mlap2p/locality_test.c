// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The module's locality answers against the rules of docs/topology.md.
 *
 * Reads the loaded topology with MLAP2P_IOC_GET_INFO, then compares
 * MLAP2P_IOC_CAN_ACCESS_PEER for every core pair with
 * mlap2p_topo_core_edge(), and MLAP2P_IOC_DEV_INFO for every MLA with
 * mlap2p_topo_dev(), both computed here from common/mlap2p_topo.c; plus the
 * -EINVAL cases of both ioctls.  Exits 4 (skip) without /dev/mlap2p.
 *
 * selftests/mlap2p/locality_families.sh reloads the module with every
 * family/LNC/pod combination and runs this each time; it passes what it
 * asked for in MLAP2P_EXPECT_FAMILY, _DEVICES, _CORES_PER_DEVICE, _LNC,
 * _POD, _POD_NODES and _NODE, which the info_matches_expected test checks
 * against GET_INFO (each one optional).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/mlap2p.h>
#include "mlap2p_topo.h"

/* The 6.1 harness and its TEST() wrappers have unused parameters. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"

/*
 * ASSERT_*() expands to two statements (the check, then a for() that logs
 * and bails), so a loop or if around one always takes braces.
 */

FIXTURE(loc) {
	int fd;
	struct mlap2p_info info;
	struct mlap2p_topo t;
	__u32 cores;
	__u32 mlas;
};

FIXTURE_SETUP(loc)
{
	self->fd = open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0)
		SKIP(return, "%s: %s", MLAP2P_DEVICE_PATH, strerror(errno));
	memset(&self->info, 0xff, sizeof(self->info));
	ASSERT_EQ(0, ioctl(self->fd, MLAP2P_IOC_GET_INFO, &self->info));
	self->t.family = self->info.family;
	self->t.num_devices = self->info.num_devices;
	self->t.cores_per_device = self->info.cores_per_device;
	self->t.lnc = self->info.lnc;
	self->t.pod_type = self->info.pod_type;
	self->t.pod_nodes = self->info.pod_nodes;
	self->t.node = self->info.node;
	ASSERT_EQ(0, mlap2p_topo_validate(&self->t))
		TH_LOG("module reports an invalid topology: family=%u devices=%u cores_per_device=%u lnc=%u pod=%u pod_nodes=%u node=%u",
		       self->t.family, self->t.num_devices,
		       self->t.cores_per_device, self->t.lnc,
		       self->t.pod_type, self->t.pod_nodes, self->t.node);
	self->cores = mlap2p_topo_total_cores(&self->t);
	self->mlas = mlap2p_topo_total_mlas(&self->t);
}

FIXTURE_TEARDOWN(loc)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(loc, info_topology)
{
	unsigned int i;

	ASSERT_EQ((__u32)MLAP2P_ABI_MAJOR, self->info.abi_major);
	ASSERT_NE(0ULL, (unsigned long long)(self->info.features &
					     MLAP2P_FEAT_LOCALITY));
	ASSERT_EQ(mlap2p_topo_cores_per_node(&self->t),
		  self->info.cores_per_node);
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0ULL, (unsigned long long)self->info.reserved[i]);
	}
	TH_LOG("family=%s devices=%u cores_per_device=%u lnc=%u pod=%s pod_nodes=%u node=%u: %u cores, %u MLAs",
	       mlap2p_topo_family_name(self->t.family), self->t.num_devices,
	       self->t.cores_per_device, self->t.lnc,
	       mlap2p_topo_pod_name(self->t.pod_type), self->t.pod_nodes,
	       self->t.node, self->cores, self->mlas);
}

/* Compare one GET_INFO field with MLAP2P_EXPECT_<name>, if that is set. */
static void expect_field(struct __test_metadata *_metadata, const char *name,
			 int (*parse)(const char *, __u32 *), __u32 have)
{
	char var[64];
	const char *s;
	__u32 want;

	snprintf(var, sizeof(var), "MLAP2P_EXPECT_%s", name);
	s = getenv(var);
	if (!s)
		return;
	if (parse) {
		ASSERT_EQ(0, parse(s, &want)) TH_LOG("%s=%s", var, s);
	} else {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(s, &end, 0);
		ASSERT_TRUE(*s && !*end && !errno && v <= 0xffffffffUL)
			TH_LOG("%s=%s", var, s);
		want = (__u32)v;
	}
	ASSERT_EQ(want, have) TH_LOG("%s=%s", var, s);
}

TEST_F(loc, info_matches_expected)
{
	expect_field(_metadata, "FAMILY", mlap2p_topo_parse_family,
		     self->info.family);
	expect_field(_metadata, "DEVICES", NULL, self->info.num_devices);
	expect_field(_metadata, "CORES_PER_DEVICE", NULL,
		     self->info.cores_per_device);
	expect_field(_metadata, "LNC", NULL, self->info.lnc);
	expect_field(_metadata, "POD", mlap2p_topo_parse_pod,
		     self->info.pod_type);
	expect_field(_metadata, "POD_NODES", NULL, self->info.pod_nodes);
	expect_field(_metadata, "NODE", NULL, self->info.node);
}

TEST_F(loc, can_access_peer_every_core_pair)
{
	unsigned long seen[MLAP2P_EDGE_POD + 1] = { 0 };
	__u32 a, b;

	for (a = 0; a < self->cores; a++) {
		for (b = 0; b < self->cores; b++) {
			struct mlap2p_peer_query q = {
				.core_a = a,
				.core_b = b,
			};
			__u32 e, m, ma, mb;

			ASSERT_EQ(0, mlap2p_topo_core_edge(&self->t, a, b, &e, &m));
			ASSERT_EQ(0, mlap2p_topo_core_mla(&self->t, a, &ma));
			ASSERT_EQ(0, mlap2p_topo_core_mla(&self->t, b, &mb));
			ASSERT_EQ(0, ioctl(self->fd, MLAP2P_IOC_CAN_ACCESS_PEER, &q))
				TH_LOG("cores %u,%u: %s", a, b, strerror(errno));
			ASSERT_EQ(e, q.edge_class) TH_LOG("cores %u,%u", a, b);
			ASSERT_EQ(m, q.intermediate_mla) TH_LOG("cores %u,%u", a, b);
			ASSERT_EQ(ma, q.mla_a) TH_LOG("cores %u,%u", a, b);
			ASSERT_EQ(mb, q.mla_b) TH_LOG("cores %u,%u", a, b);
			ASSERT_EQ(e != MLAP2P_EDGE_NONE ? 1U : 0U, q.access)
				TH_LOG("cores %u,%u", a, b);
			seen[e]++;
		}
	}
	TH_LOG("%u core pairs: LOCAL %lu D2D %lu RELAY %lu POD %lu NONE %lu",
	       self->cores * self->cores, seen[MLAP2P_EDGE_LOCAL],
	       seen[MLAP2P_EDGE_D2D], seen[MLAP2P_EDGE_RELAY],
	       seen[MLAP2P_EDGE_POD], seen[MLAP2P_EDGE_NONE]);
}

/* Output fields that arrive non-zero are not an error (uapi rules). */
TEST_F(loc, can_access_peer_ignores_output_fields)
{
	struct mlap2p_peer_query q = {
		.core_a = 0,
		.core_b = self->cores - 1,
		.access = 0xffffffffU,
		.edge_class = 0xffffffffU,
		.intermediate_mla = 0x12345678U,
		.mla_a = 0xffffffffU,
		.mla_b = 0xffffffffU,
	};
	__u32 e, m;

	ASSERT_EQ(0, mlap2p_topo_core_edge(&self->t, 0, self->cores - 1, &e, &m));
	ASSERT_EQ(0, ioctl(self->fd, MLAP2P_IOC_CAN_ACCESS_PEER, &q));
	ASSERT_EQ(e, q.edge_class);
	ASSERT_EQ(m, q.intermediate_mla);
	ASSERT_EQ(0U, q.mla_a);
	ASSERT_EQ(self->mlas - 1, q.mla_b);
}

static int peer_query(int fd, __u32 a, __u32 b, __u32 flags, __u64 r0,
		      __u64 r1)
{
	struct mlap2p_peer_query q = {
		.core_a = a,
		.core_b = b,
		.flags = flags,
		.reserved = { r0, r1 },
	};

	if (ioctl(fd, MLAP2P_IOC_CAN_ACCESS_PEER, &q) == 0)
		return 0;
	return -errno;
}

TEST_F(loc, can_access_peer_einval)
{
	const __u32 n = self->cores;
	const __u32 bad[] = { n, n + 1, 0x7fffffffU, 0xffffffffU };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ASSERT_EQ(-EINVAL, peer_query(self->fd, bad[i], 0, 0, 0, 0))
			TH_LOG("core_a %u", bad[i]);
		ASSERT_EQ(-EINVAL, peer_query(self->fd, 0, bad[i], 0, 0, 0))
			TH_LOG("core_b %u", bad[i]);
		ASSERT_EQ(-EINVAL, peer_query(self->fd, bad[i], bad[i], 0, 0, 0));
	}
	ASSERT_EQ(0, peer_query(self->fd, n - 1, n - 1, 0, 0, 0));
	ASSERT_EQ(-EINVAL, peer_query(self->fd, 0, 0, 1, 0, 0));
	ASSERT_EQ(-EINVAL, peer_query(self->fd, 0, 0, 0x80000000U, 0, 0));
	ASSERT_EQ(-EINVAL, peer_query(self->fd, 0, 0, 0, 1, 0));
	ASSERT_EQ(-EINVAL, peer_query(self->fd, 0, 0, 0, 0, 1ULL << 63));
}

TEST_F(loc, dev_info_every_mla)
{
	__u32 mla, k;

	for (mla = 0; mla < self->mlas; mla++) {
		struct mlap2p_dev_info d;
		struct mlap2p_topo_dev want;

		memset(&d, 0, sizeof(d));
		d.device = mla;
		/* Output fields arriving non-zero are fine. */
		d.node = 0xffffffffU;
		d.peer_mla = 0xffffffffU;
		d.num_neighbours = 0xffffffffU;
		d.neighbours[MLAP2P_MAX_NEIGHBOURS - 1] = 0xffffffffU;
		d.capacity = ~0ULL;
		d.used = ~0ULL;
		ASSERT_EQ(0, mlap2p_topo_dev(&self->t, mla, &want));
		ASSERT_EQ(0, ioctl(self->fd, MLAP2P_IOC_DEV_INFO, &d))
			TH_LOG("mla %u: %s", mla, strerror(errno));
		ASSERT_EQ(mla, d.device);
		ASSERT_EQ(want.node, d.node) TH_LOG("mla %u", mla);
		ASSERT_EQ(want.local_index, d.local_index) TH_LOG("mla %u", mla);
		ASSERT_EQ(want.peer_mla, d.peer_mla) TH_LOG("mla %u", mla);
		ASSERT_EQ(want.torus_x, d.torus_x) TH_LOG("mla %u", mla);
		ASSERT_EQ(want.torus_y, d.torus_y) TH_LOG("mla %u", mla);
		ASSERT_EQ(want.num_neighbours, d.num_neighbours)
			TH_LOG("mla %u", mla);
		for (k = 0; k < MLAP2P_MAX_NEIGHBOURS; k++) {
			ASSERT_EQ(want.neighbours[k], d.neighbours[k])
				TH_LOG("mla %u neighbour %u", mla, k);
		}
		ASSERT_EQ(want.first_core, d.first_core) TH_LOG("mla %u", mla);
		ASSERT_EQ(want.num_cores, d.num_cores) TH_LOG("mla %u", mla);
		ASSERT_EQ(self->info.dev_capacity, d.capacity);
		ASSERT_LE(d.used, d.capacity);
	}
}

static int dev_query(int fd, __u32 device, __u32 flags, __u64 r0, __u64 r1)
{
	struct mlap2p_dev_info d = {
		.device = device,
		.flags = flags,
		.reserved = { r0, r1 },
	};

	if (ioctl(fd, MLAP2P_IOC_DEV_INFO, &d) == 0)
		return 0;
	return -errno;
}

TEST_F(loc, dev_info_einval)
{
	const __u32 n = self->mlas;
	const __u32 bad[] = { n, n + 1, 0x7fffffffU, 0xffffffffU };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ASSERT_EQ(-EINVAL, dev_query(self->fd, bad[i], 0, 0, 0))
			TH_LOG("device %u", bad[i]);
	}
	ASSERT_EQ(0, dev_query(self->fd, n - 1, 0, 0, 0));
	ASSERT_EQ(-EINVAL, dev_query(self->fd, 0, 1, 0, 0));
	ASSERT_EQ(-EINVAL, dev_query(self->fd, 0, 0x80000000U, 0, 0));
	ASSERT_EQ(-EINVAL, dev_query(self->fd, 0, 0, 1, 0));
	ASSERT_EQ(-EINVAL, dev_query(self->fd, 0, 0, 0, 1ULL << 63));
}

int main(int argc, char **argv)
{
	int fd = open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		ksft_print_header();
		ksft_exit_skip("%s: %s (module not loaded)\n",
			       MLAP2P_DEVICE_PATH, strerror(errno));
	}
	close(fd);
	return test_harness_run(argc, argv);
}
