// SPDX-License-Identifier: GPL-2.0
/*
 * net_none_test: libmlap2p built with NET=none (make check-net-none; never
 * part of the normal list, where NET is libfabric's).  The table still has
 * its NET entry, whose canConnect says no, so two ranks that P2P may not
 * join end in the seed's terminal error, not in a hang or a crash.
 */
#include "helpers.h"
#include "transport/net.h"
#include "kselftest_harness.h"

TEST(net_entry_says_no)
{
	struct ncclPeerInfo a = { .rank = 0 }, b = { .rank = 1 };
	int ret = -1;

	ASSERT_NE(NULL, ncclTransports[1]);
	EXPECT_STREQ("NET", ncclTransports[1]->name);
	EXPECT_EQ(ncclSuccess,
		  ncclTransports[1]->canConnect(&ret, NULL, NULL, &a, &b));
	EXPECT_EQ(0, ret);
	EXPECT_EQ(0, (long)mlap2p_net_provider_hash());
}

static int connect_refused(struct t_rank *r)
{
	int peer = 1 - r->rank, ret;

	if (t_init(r))
		return 1;
	ret = mlap2p_connect_peers(r->comm, 1, 1, &peer, 1, &peer);
	if (ret != -EHOSTUNREACH)
		ret = 2;
	else if (!strstr(mlap2p_last_error(),
			 "No transport found between devices"))
		ret = 3;
	else
		ret = 0;
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 4;
	return ret;
}

TEST(no_p2p_and_no_net_is_the_seeds_error)
{
	static const int cores[2] = { 0, 1 };
	struct t_rank ranks[2];

	setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("NCCL_P2P_DISABLE", "1", 1);
	EXPECT_EQ(0, t_run_threads(2, cores, connect_refused, NULL, ranks));
	unsetenv("NCCL_P2P_DISABLE");
}

TEST_HARNESS_MAIN
