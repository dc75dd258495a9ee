// SPDX-License-Identifier: GPL-2.0
/*
 * The seed's names libmlap2p exports (ncclTransports, p2pTransport,
 * netTransport, ncclTransportP2pConnect, ncclTransportP2pSetup) are bound
 * inside the library (-Wl,-Bsymbolic): another library that defines the
 * same names cannot take their place.  This program links the shared
 * libmlap2p with an interposer (interpose.c) ahead of it, so a lookup by
 * name finds the interposer's; it checks that it does (the interposer is
 * really in the way), then that two ranks still select P2P, connect and
 * move a message, and that the interposer was never called.  Without
 * local binding the library's connect would call the interposer's
 * ncclTransportP2pSetup and fail, and selectTransport would call a NULL
 * canConnect.
 *
 * Built against $(B)/lib/libmlap2p.so, not the static library, and
 * without the t_* helpers (they use the library's internals).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mlap2p/mlap2p.h>
#include <mlap2p/dataplane.h>
#include <mlap2p/transport.h>

#include "kselftest_harness.h"

extern int interpose_calls;

struct rank {
	int rank;
	struct mlap2p_unique_id *id;
	pthread_t thread;
	int result;
	char msg[256];
};

static void *rank_main(void *arg)
{
	struct rank *r = arg;
	struct mlap2p_comm *comm;
	struct mlap2p_conn_desc d;
	char buf[16] = "";
	int peer = 1 - r->rank;

	if (mlap2p_comm_init_rank(&comm, 2, r->id, r->rank, r->rank * 4)) {
		r->result = 1;
		snprintf(r->msg, sizeof(r->msg), "%s", mlap2p_last_error());
		return NULL;
	}
	if (mlap2p_connect_peers(comm, 1, 1, &peer, 1, &peer))
		r->result = 2;
	else if (mlap2p_conn_get(comm, 0, peer, MLAP2P_DIR_SEND, &d) ||
		 d.path != MLAP2P_PATH_DIRECT)
		r->result = 3;
	else if (r->rank == 0 ? mlap2p_send(comm, "own transports", 15, peer) :
		 mlap2p_recv(comm, buf, 15, peer))
		r->result = 4;
	else if (r->rank == 1 && strcmp(buf, "own transports"))
		r->result = 5;
	if (r->result)
		snprintf(r->msg, sizeof(r->msg), "%s", mlap2p_last_error());
	if (mlap2p_comm_destroy(comm) && !r->result)
		r->result = 6;
	return NULL;
}

TEST(seed_names_bound_locally)
{
	struct ncclTransport *p2p;
	struct mlap2p_unique_id id;
	struct rank r[2];
	Dl_info info;
	void *lib;
	int i;

	setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_NET_DISABLE", "1", 1);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "20s", 1);

	/* A lookup by name finds the interposer's ... */
	EXPECT_STREQ("INTERPOSED", ncclTransports[0]->name);
	EXPECT_STREQ("INTERPOSED", p2pTransport.name);
	/* ... while libmlap2p's own are there, under its handle. */
	ASSERT_NE(0, dladdr((void *)mlap2p_comm_init_rank, &info));
	lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NE(NULL, lib);
	p2p = dlsym(lib, "p2pTransport");
	ASSERT_NE(NULL, p2p);
	EXPECT_NE(&p2pTransport, p2p);
	EXPECT_STREQ("P2P", p2p->name);
	dlclose(lib);

	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	for (i = 0; i < 2; i++) {
		r[i] = (struct rank){ .rank = i, .id = &id };
		ASSERT_EQ(0, pthread_create(&r[i].thread, NULL, rank_main,
					    &r[i]));
	}
	for (i = 0; i < 2; i++) {
		pthread_join(r[i].thread, NULL);
		EXPECT_EQ(0, r[i].result)
			TH_LOG("rank %d: %s", i, r[i].msg);
	}
	EXPECT_EQ(0, interpose_calls);
}

TEST_HARNESS_MAIN
