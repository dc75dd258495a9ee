// SPDX-License-Identifier: GPL-2.0
/*
 * The seed's ABI, byte for byte: every offset <mlap2p/transport.h> fixes,
 * checked at compile time (a wrong layout does not build) and again at
 * run time against literal numbers (so the report shows each one); the
 * two-entry transport table with its NULL proxy slots; the runtime
 * vtable's slot offsets and both backends' tables; versions and errors.
 */
#include "helpers.h"
#include "kselftest_harness.h"

#define OFF(type, field)	((long)offsetof(struct type, field))

/* Compile time: the same numbers as the run-time checks below. */
_Static_assert(sizeof(struct ncclTransport) == 120, "ncclTransport");
_Static_assert(sizeof(struct ncclTransportComm) == 48, "ncclTransportComm");
_Static_assert(sizeof(struct ncclConnect) == 128, "ncclConnect");
_Static_assert(sizeof(struct p2pConnectInfo) == 80, "p2pConnectInfo");
_Static_assert(sizeof(struct ncclConnector) == 0x80, "ncclConnector");
_Static_assert(sizeof(struct p2pResources) == 32, "p2pResources");
_Static_assert(offsetof(struct ncclRt, memcpy) == 0xd0, "rt memcpy");
_Static_assert(sizeof(struct ncclRtIpcMemHandle) ==
	       sizeof(((struct p2pConnectInfo *)0)->devIpc), "devIpc");

TEST(transport_layout)
{
	EXPECT_EQ(120, (long)sizeof(struct ncclTransport));
	EXPECT_EQ(0x00, OFF(ncclTransport, name));
	EXPECT_EQ(16, (long)sizeof(((struct ncclTransport *)0)->name));
	EXPECT_EQ(0x10, OFF(ncclTransport, canConnect));
	EXPECT_EQ(0x18, OFF(ncclTransport, send));
	EXPECT_EQ(0x48, OFF(ncclTransport, recv));

	EXPECT_EQ(48, (long)sizeof(struct ncclTransportComm));
	EXPECT_EQ(0x00, OFF(ncclTransportComm, setup));
	EXPECT_EQ(0x08, OFF(ncclTransportComm, connect));
	EXPECT_EQ(0x10, OFF(ncclTransportComm, free));
	EXPECT_EQ(0x18, OFF(ncclTransportComm, proxy));
	EXPECT_EQ(0x20, OFF(ncclTransportComm, allocRequest));
	EXPECT_EQ(0x28, OFF(ncclTransportComm, freeRequest));
}

TEST(connect_blob_layout)
{
	EXPECT_EQ(128, (long)sizeof(struct ncclConnect));
	EXPECT_EQ(80, (long)sizeof(struct p2pConnectInfo));
	EXPECT_EQ(0x00, OFF(p2pConnectInfo, rank));
	EXPECT_EQ(0x04, OFF(p2pConnectInfo, read));
	EXPECT_EQ(0x08, OFF(p2pConnectInfo, directPtr));
	EXPECT_EQ(0x10, OFF(p2pConnectInfo, devIpc));
	EXPECT_EQ(64, (long)sizeof(((struct p2pConnectInfo *)0)->devIpc));
	/* n connections are n << 7 bytes. */
	EXPECT_EQ(5L << 7, 5L * (long)sizeof(struct ncclConnect));
}

TEST(conn_info_layout)
{
	EXPECT_EQ(0x00, OFF(ncclConnInfo, buffs));
	EXPECT_EQ(NCCL_NUM_PROTOCOLS * 8,
		  (long)sizeof(((struct ncclConnInfo *)0)->buffs));
	EXPECT_EQ(0x18, OFF(ncclConnInfo, tail));
	EXPECT_EQ(0x20, OFF(ncclConnInfo, head));
	EXPECT_EQ(0x28, OFF(ncclConnInfo, direct));
	EXPECT_EQ(0x2c, OFF(ncclConnInfo, shared));
	EXPECT_EQ(4, (long)sizeof(((struct ncclConnInfo *)0)->shared));
	EXPECT_EQ(0x30, OFF(ncclConnInfo, ptrExchange));
	EXPECT_EQ(0x38, OFF(ncclConnInfo, sizesFifo));
	EXPECT_EQ(0x40, OFF(ncclConnInfo, ptrsFifo));
	EXPECT_EQ(0x48, OFF(ncclConnInfo, step));
	EXPECT_EQ(0x50, OFF(ncclConnInfo, llLastCleaning));

	EXPECT_EQ(0x80, (long)sizeof(struct ncclConnector));
	EXPECT_EQ(0x00, OFF(ncclConnector, connected));
	EXPECT_EQ(0x20, OFF(ncclConnector, conn));
	/* The device mirror of one peer: send then recv. */
	EXPECT_EQ(0x100, (long)sizeof(struct ncclPeer));
	EXPECT_EQ(0x80, OFF(ncclPeer, recv));
	/* The framework's wrapper keeps the connector first. */
	EXPECT_EQ(0, OFF(mlap2p_conn, c));
}

TEST(fifo_headers)
{
	EXPECT_EQ(0x000, OFF(ncclSendMem, head));
	EXPECT_EQ(0x080, OFF(ncclSendMem, ptrExchange));
	EXPECT_EQ(0x1000, OFF(ncclSendMem, buff));
	EXPECT_EQ(0x000, OFF(ncclRecvMem, tail));
	EXPECT_EQ(0x080, OFF(ncclRecvMem, sizesFifo));
	EXPECT_EQ(NCCL_STEPS * 4,
		  (long)sizeof(((struct ncclRecvMem *)0)->sizesFifo));
	EXPECT_EQ(0x0A0, OFF(ncclRecvMem, ptrsFifo));
	EXPECT_EQ(0x1000, OFF(ncclRecvMem, buff));
	EXPECT_EQ(8, NCCL_STEPS);
	EXPECT_EQ(0, NCCL_PROTO_LL);
	EXPECT_EQ(1, NCCL_PROTO_LL128);
	EXPECT_EQ(2, NCCL_PROTO_SIMPLE);
}

TEST(p2p_resources)
{
	EXPECT_EQ(32, (long)sizeof(struct p2pResources));
	EXPECT_EQ(0x00, OFF(p2pResources, devMem));
	EXPECT_EQ(0x08, OFF(p2pResources, ipcPtr));
	EXPECT_EQ(0x10, OFF(p2pResources, remoteId));
	EXPECT_EQ(0x14, OFF(p2pResources, memRank));
	EXPECT_EQ(0x18, OFF(p2pResources, bootstrap));
}

TEST(transport_table)
{
	int t;

	ASSERT_NE(NULL, ncclTransports[0]);
	ASSERT_NE(NULL, ncclTransports[1]);
	EXPECT_EQ(&p2pTransport, ncclTransports[0]);
	EXPECT_EQ(&netTransport, ncclTransports[1]);
	EXPECT_STREQ("P2P", ncclTransports[0]->name);
	EXPECT_STREQ("NET", ncclTransports[1]->name);
	/* No SHM: the table has exactly two pointer slots. */
	EXPECT_EQ(2 * sizeof(void *), sizeof(ncclTransports));

	for (t = 0; t < 2; t++) {
		struct ncclTransport *tr = ncclTransports[t];

		EXPECT_NE(NULL, tr->canConnect);
		EXPECT_NE(NULL, tr->send.setup);
		EXPECT_NE(NULL, tr->send.connect);
		EXPECT_NE(NULL, tr->send.free);
		EXPECT_NE(NULL, tr->recv.setup);
		EXPECT_NE(NULL, tr->recv.connect);
		EXPECT_NE(NULL, tr->recv.free);
	}
	/* P2P is proxy-free: the last three slots of each side are NULL. */
	EXPECT_EQ(NULL, p2pTransport.send.proxy);
	EXPECT_EQ(NULL, p2pTransport.send.allocRequest);
	EXPECT_EQ(NULL, p2pTransport.send.freeRequest);
	EXPECT_EQ(NULL, p2pTransport.recv.proxy);
	EXPECT_EQ(NULL, p2pTransport.recv.allocRequest);
	EXPECT_EQ(NULL, p2pTransport.recv.freeRequest);
	/* Byte view: the six NULL qwords sit at 0x30..0x40 and 0x60..0x70. */
	{
		const unsigned char *b = (const unsigned char *)&p2pTransport;
		static const int nulls[] = { 0x30, 0x38, 0x40, 0x60, 0x68, 0x70 };
		static const int set[] = { 0x10, 0x18, 0x20, 0x28, 0x48, 0x50, 0x58 };
		void *q;
		size_t i;

		for (i = 0; i < ARRAY_SIZE(nulls); i++) {
			memcpy(&q, b + nulls[i], sizeof(q));
			EXPECT_EQ(NULL, q) TH_LOG("p2pTransport+%#x", nulls[i]);
		}
		for (i = 0; i < ARRAY_SIZE(set); i++) {
			memcpy(&q, b + set[i], sizeof(q));
			EXPECT_NE(NULL, q) TH_LOG("p2pTransport+%#x", set[i]);
		}
	}
}

TEST(runtime_vtable)
{
	const struct ncclRt *tabs[] = { &mlap2p_rt_kmod, &mlap2p_rt_host };
	size_t t, off;

	EXPECT_EQ(0x60, OFF(ncclRt, deviceCanAccessPeer));
	EXPECT_EQ(0x68, OFF(ncclRt, deviceEnablePeerAccess));
	EXPECT_EQ(0x80, OFF(ncclRt, ipcOpenMemHandle));
	EXPECT_EQ(0x88, OFF(ncclRt, ipcGetMemHandle));
	EXPECT_EQ(0x98, OFF(ncclRt, malloc));
	EXPECT_EQ(0xa0, OFF(ncclRt, free));
	EXPECT_EQ(0xd0, OFF(ncclRt, memcpy));
	EXPECT_EQ(0xd8, (long)sizeof(struct ncclRt));
	EXPECT_EQ(64, (long)sizeof(struct ncclRtIpcMemHandle));

	/* Neither backend leaves a slot empty but the reserved one. */
	EXPECT_EQ(0x48, OFF(ncclRt, reserved));
	for (t = 0; t < ARRAY_SIZE(tabs); t++) {
		EXPECT_NE(NULL, tabs[t]->name);
		for (off = 8; off < sizeof(struct ncclRt); off += 8) {
			void *slot;

			memcpy(&slot, (const char *)tabs[t] + off, sizeof(slot));
			if (off == OFF(ncclRt, reserved)) {
				EXPECT_EQ(NULL, slot);
			} else {
				EXPECT_NE(NULL, slot)
					TH_LOG("%s +%#zx", tabs[t]->name, off);
			}
		}
	}
	EXPECT_STREQ("kmod", mlap2p_rt_kmod.name);
	EXPECT_STREQ("host", mlap2p_rt_host.name);
}

TEST(version)
{
	int maj = -1, min = -1, pat = -1;
	char buf[32];

	EXPECT_EQ(MLAP2P_VERSION_CODE(MLAP2P_VERSION_MAJOR,
				      MLAP2P_VERSION_MINOR,
				      MLAP2P_VERSION_PATCH),
		  mlap2p_version(&maj, &min, &pat));
	EXPECT_EQ(MLAP2P_VERSION_MAJOR, maj);
	EXPECT_EQ(MLAP2P_VERSION_MINOR, min);
	EXPECT_EQ(MLAP2P_VERSION_PATCH, pat);
	snprintf(buf, sizeof(buf), "%d.%d.%d", maj, min, pat);
	EXPECT_STREQ(buf, mlap2p_version_string());
	EXPECT_STREQ(MLAP2P_VERSION_STRING, mlap2p_version_string());
}

TEST(errors)
{
	struct mlap2p_comm *comm = NULL;
	struct mlap2p_unique_id id;

	EXPECT_STREQ("Success", mlap2p_strerror(0));
	EXPECT_NE(NULL, strstr(mlap2p_strerror(-ENODEV), "MLAP2P_RUNTIME=host"));
	EXPECT_NE(NULL, strstr(mlap2p_strerror(-EHOSTUNREACH), "No transport"));
	EXPECT_STREQ(mlap2p_strerror(-ENOMEM), mlap2p_strerror(ENOMEM));
	EXPECT_STREQ(strerror(EBADF), mlap2p_strerror(-EBADF));

	/* -errno and errno, together. */
	memset(&id, 0, sizeof(id));
	errno = 0;
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 0, &id, 0, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 2, &id, 2, 0));
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 2, NULL, 0, 0));
	EXPECT_EQ(-EINVAL, mlap2p_get_unique_id(NULL));
	EXPECT_EQ(-EINVAL, mlap2p_comm_destroy(NULL));
	EXPECT_EQ(-EINVAL, mlap2p_comm_count(NULL));
	EXPECT_EQ(NULL, comm);
	/* An id that is not one. */
	setenv("MLAP2P_RUNTIME", "host", 1);
	errno = 0;
	EXPECT_EQ(-EINVAL, mlap2p_comm_init_rank(&comm, 1, &id, 0, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(NULL, strstr(mlap2p_last_error(), "unique id"));
}

TEST(single_rank)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;
	int order[1], prev, next;
	void *p;

	setenv("MLAP2P_RUNTIME", "host", 1);
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, mlap2p_comm_init_rank(&comm, 1, &id, 0, 5))
		TH_LOG("%s", mlap2p_last_error());
	EXPECT_EQ(1, mlap2p_comm_count(comm));
	EXPECT_EQ(0, mlap2p_comm_rank(comm));
	EXPECT_EQ(5, mlap2p_comm_core(comm));
	EXPECT_STREQ("host", mlap2p_comm_runtime(comm));
	EXPECT_EQ(0, mlap2p_connect_ring(comm, 2));
	EXPECT_EQ(0, mlap2p_ring_get(comm, 1, order, &prev, &next));
	EXPECT_EQ(0, order[0]);
	EXPECT_EQ(0, prev);
	EXPECT_EQ(0, next);
	EXPECT_EQ(-ENOTCONN, mlap2p_ring_get(comm, 2, order, &prev, &next));
	EXPECT_EQ(-EINVAL, mlap2p_connect_ring(comm, MAXCHANNELS + 1));

	ASSERT_EQ(0, mlap2p_mem_alloc(comm, 100, &p));
	EXPECT_EQ(-1, t_first_nonzero(p, 4096));
	memset(p, 0x5a, 4096);
	EXPECT_EQ(-EINVAL, mlap2p_mem_free(comm, (char *)p + 8));
	EXPECT_EQ(0, mlap2p_mem_free(comm, p));
	EXPECT_EQ(-EINVAL, mlap2p_mem_free(comm, p));
	EXPECT_EQ(-EINVAL, mlap2p_mem_alloc(comm, 0, &p));
	/* The device mirror region is not the user's to free. */
	EXPECT_EQ(-EINVAL, mlap2p_mem_free(comm, mlap2p_nccl(comm)->devMem ?:
					   (void *)&id));
	EXPECT_EQ(0, mlap2p_comm_destroy(comm));
}

TEST_HARNESS_MAIN
