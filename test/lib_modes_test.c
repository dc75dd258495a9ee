// SPDX-License-Identifier: GPL-2.0
/*
 * The three P2P wire modes, each set up for real and proved by moving a
 * known pattern by hand through the wired pointers (t_exchange(), helpers.h):
 *
 *   direct pointer   two ranks as threads of one process
 *   IPC              two ranks in two processes
 *   indirect (relay) two processes whose cores are not neighbours: the
 *                    FIFOs live on the intermediate MLA, allocated by the
 *                    rank that runs there (a thread beside rank 0)
 *
 * Each also runs in read mode (NCCL_P2P_READ_ENABLE=1), and the connectors'
 * device-visible mirrors are compared with the host copies.  The runtime is
 * whatever MLAP2P_RUNTIME picks: the module in the VM, memfd on the host.
 *
 * Cores (trn2, LNC 2, 4 logical cores per MLA): 0 is on MLA 0, 4 on MLA 1
 * (a torus neighbour of 0), 8 on MLA 2 (reached from MLA 0 through MLA 1).
 * The trn1_*, trn3_* and switch_* variants run the same on the host
 * runtime with those families (trn1: cores 0, 2, 4) and on a trn3 switch
 * pod of two nodes, where the direct and IPC pairs are core 0 and node 1's
 * core 68 (a POD edge).
 */
#include "helpers.h"
#include "kselftest_harness.h"

/*
 * The cores of the variant, set by FIXTURE_SETUP (the children inherit
 * them): A on MLA 0, B on MLA 1 (D2D from MLA 0), C on MLA 2 (a relay from
 * MLA 0 through MLA 1), and the pair the direct and IPC tests connect with
 * A (B, or another node's core on a pod).
 */
static int core_a = 0, core_b = 4, core_c = 8, core_pair = 4;

FIXTURE(modes) {
	int dummy;
};

FIXTURE_VARIANT(modes) {
	int read;
	const char *buffsize;	/* NCCL_BUFFSIZE, or the small default */
	/* The host runtime's topology; NULL: the trn2 defaults on the
	 * runtime MLAP2P_RUNTIME picks (the module in the VM). */
	const char *family, *pod;
	int cores[4];		/* A, B, C, pair */
};

FIXTURE_VARIANT_ADD(modes, write) {
	.read = 0,
};

FIXTURE_VARIANT_ADD(modes, read) {
	.read = 1,
};

/* SIMPLE of 3 MiB: the receiver's FIFO rounds up to 4 MiB. */
FIXTURE_VARIANT_ADD(modes, write_3m) {
	.read = 0,
	.buffsize = "3M",
};

/* trn1 (LNC 1): cores 0, 2, 4 on MLAs 0, 1, 2. */
FIXTURE_VARIANT_ADD(modes, trn1_write) {
	.family = "trn1", .cores = { 0, 2, 4, 2 },
};
FIXTURE_VARIANT_ADD(modes, trn1_read) {
	.read = 1, .family = "trn1", .cores = { 0, 2, 4, 2 },
};
/* trn3 (ring): MLA 2 is reached from MLA 0 through MLA 1. */
FIXTURE_VARIANT_ADD(modes, trn3_write) {
	.family = "trn3", .cores = { 0, 4, 8, 4 },
};
FIXTURE_VARIANT_ADD(modes, trn3_read) {
	.read = 1, .family = "trn3", .cores = { 0, 4, 8, 4 },
};
/* A trn3 switch pod of 2 nodes: direct and IPC to node 1's core 68. */
FIXTURE_VARIANT_ADD(modes, switch_write) {
	.family = "trn3", .pod = "switch", .cores = { 0, 4, 8, 68 },
};
FIXTURE_VARIANT_ADD(modes, switch_read) {
	.read = 1, .family = "trn3", .pod = "switch", .cores = { 0, 4, 8, 68 },
};

FIXTURE_SETUP(modes)
{
	self->dummy = 0;
	if (variant->family) {
		setenv("MLAP2P_RUNTIME", "host", 1);
		setenv("MLAP2P_FAMILY", variant->family, 1);
		if (variant->pod) {
			setenv("MLAP2P_POD", variant->pod, 1);
			setenv("MLAP2P_POD_NODES", "2", 1);
		}
		core_a = variant->cores[0];
		core_b = variant->cores[1];
		core_c = variant->cores[2];
		core_pair = variant->cores[3];
	}
	if (!getenv("MLAP2P_RUNTIME") && access(MLAP2P_DEVICE_PATH, F_OK))
		setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "20s", 1);
	t_small_buffers();
	if (variant->buffsize)
		setenv("NCCL_BUFFSIZE", variant->buffsize, 1);
	setenv("NCCL_P2P_READ_ENABLE", variant->read ? "1" : "0", 1);
}

FIXTURE_TEARDOWN(modes)
{
}

/* Connect rank 0 <-> rank 1 on two channels and check the path. */
static int pair_connect(struct mlap2p_comm *comm, int peer, int path,
			int read)
{
	struct mlap2p_conn_desc d;
	int c, dir;

	if (mlap2p_connect_peers(comm, 2, 1, &peer, 1, &peer))
		return 31;
	for (c = 0; c < 2; c++) {
		for (dir = 0; dir < 2; dir++) {
			if (mlap2p_conn_get(comm, c, peer, dir, &d))
				return 32;
			if (d.path != path)
				return 33;
			if (d.read != read)
				return 34;
			if (t_check_mirror(comm, c, peer, dir))
				return 35;
		}
	}
	return 0;
}

/*
 * Our own FIFOs: 2 MiB multiples, on our MLA, as big as the header plus
 * the buffers each side holds (SIMPLE moves to the sender in read mode).
 */
static int fifo_sizes(struct mlap2p_comm *api, int peer, int read)
{
	struct ncclComm *comm = mlap2p_nccl(api);
	struct ncclRtPointerAttributes attr;
	struct mlap2p_conn_desc d;
	int dir;

	for (dir = 0; dir < 2; dir++) {
		struct p2pResources *res;
		size_t need = MEM_ALIGN;
		int p;

		if (mlap2p_conn_get(api, 0, peer, dir, &d))
			return 41;
		res = d.host->transportResources;
		if (!res || res->remoteId != -1 || res->memRank != comm->rank)
			return 42;
		if (comm->rt->ops->pointerGetAttributes(comm->rt, res->devMem,
							&attr) ||
		    attr.base != res->devMem || !attr.owned)
			return 43;
		for (p = 0; p < NCCL_NUM_PROTOCOLS; p++)
			if ((p == NCCL_PROTO_SIMPLE && read) == (dir == MLAP2P_DIR_SEND))
				need += (size_t)d.buff_sizes[p];
		if (attr.size % (2 << 20) || attr.size < need ||
		    attr.size >= need + (2 << 20))
			return 44;
		if (attr.device != comm->mla)
			return 45;
	}
	return 0;
}

static int pair_body(struct mlap2p_comm *comm, int peer, int path, int read)
{
	int ret, c;

	ret = pair_connect(comm, peer, path, read);
	if (!ret && path != MLAP2P_PATH_INDIRECT)
		ret = fifo_sizes(comm, peer, read);
	for (c = 0; c < 2 && !ret; c++)
		ret = t_exchange(comm, c, peer);
	return ret;
}

/* ---- direct pointer: threads ---- */

struct pair_arg {
	int path;
	int read;
};

static int direct_rank(struct t_rank *r)
{
	struct pair_arg *a = r->arg;
	int ret;

	if (t_init(r))
		return 1;
	ret = pair_body(r->comm, 1 - r->rank, a->path, a->read);
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 40;
	return ret;
}

TEST_F(modes, direct_pointer_threads)
{
	struct pair_arg a = { MLAP2P_PATH_DIRECT, variant->read };
	int cores[2] = { core_a, core_pair };
	struct t_rank ranks[2];

	ASSERT_EQ(0, t_run_threads(2, cores, direct_rank, &a, ranks));
}

/* ---- IPC: processes ---- */

static int ipc_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct pair_arg *a = arg;
	struct mlap2p_comm *comm;
	int ret;

	if (mlap2p_comm_init_rank(&comm, 2, id, idx, idx ? core_pair : core_a))
		return kt_child_fail(1, "init: %s", mlap2p_last_error());
	ret = pair_body(comm, 1 - idx, a->path, a->read);
	if (ret)
		ksft_print_msg("rank %d step %d: %s\n", idx, ret,
			       mlap2p_last_error());
	if (mlap2p_comm_destroy(comm) && !ret)
		ret = 40;
	return ret;
}

TEST_F(modes, ipc_processes)
{
	struct pair_arg a = { MLAP2P_PATH_IPC, variant->read };
	struct mlap2p_unique_id id;
	struct t_procs p;

	ASSERT_EQ(0, t_fork(&p, 2, ipc_child, &a));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
}

/* ---- indirect: relay through the rank on MLA 1 ---- */

/* Rank 0 and rank 2 (the intermediate, on core_b) share a process. */
static int relay_rank(struct t_rank *r)
{
	struct pair_arg *a = r->arg;
	struct ncclRtPointerAttributes attr;
	struct mlap2p_conn_desc d;
	struct p2pResources *res;
	struct ncclComm *comm;
	int ret = 0;

	if (t_init(r))
		return 1;
	comm = mlap2p_nccl(r->comm);
	if (r->core != core_b) {
		int peer = r->rank == 0 ? 1 : 0;

		ret = pair_body(r->comm, peer, a->path, a->read);
		if (!ret && mlap2p_conn_get(r->comm, 0, peer, MLAP2P_DIR_SEND,
					    &d))
			ret = 50;
		/* Our FIFO lives with rank 2, on its MLA (1). */
		if (!ret && d.mem_rank != 2)
			ret = 51;
		res = d.host ? d.host->transportResources : NULL;
		if (!ret && (!res || res->remoteId == -1 || res->memRank != 2))
			ret = 52;
		if (!ret && comm->peerInfo[2].pidHash != comm->peerInfo[comm->rank].pidHash &&
		    (comm->rt->ops->pointerGetAttributes(comm->rt, res->devMem,
							  &attr) ||
		     attr.owned || attr.device != 1))
			ret = 53;
	}
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 40;
	return ret;
}

struct relay_arg {
	struct pair_arg pair;
};

static int relay_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct relay_arg *a = arg;
	struct t_rank r[2];
	int i, ret = 0;

	/* Process 0: ranks 0 (core_a) and 2 (core_b); process 1: rank 1. */
	memset(r, 0, sizeof(r));
	for (i = 0; i < (idx == 0 ? 2 : 1); i++) {
		r[i].rank = idx == 0 ? (i ? 2 : 0) : 1;
		r[i].core = idx == 0 ? (i ? core_b : core_a) : core_c;
		r[i].nranks = 3;
		r[i].id = *id;
		r[i].fn = relay_rank;
		r[i].arg = &a->pair;
		pthread_create(&r[i].thread, NULL, t_thread_main, &r[i]);
	}
	for (i = 0; i < (idx == 0 ? 2 : 1); i++) {
		pthread_join(r[i].thread, NULL);
		if (r[i].result && !ret) {
			ksft_print_msg("rank %d step %d: %s\n", r[i].rank,
				       r[i].result, r[i].msg);
			ret = r[i].result;
		}
	}
	return ret;
}

TEST_F(modes, indirect_processes)
{
	struct relay_arg a = { { MLAP2P_PATH_INDIRECT, variant->read } };
	struct mlap2p_unique_id id;
	struct t_procs p;

	ASSERT_EQ(0, t_fork(&p, 2, relay_child, &a));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
}

TEST_F(modes, indirect_threads)
{
	struct pair_arg a = { MLAP2P_PATH_INDIRECT, variant->read };
	int cores[3] = { core_a, core_c, core_b };
	struct t_rank ranks[3];

	ASSERT_EQ(0, t_run_threads(3, cores, relay_rank, &a, ranks));
}

/* ---- NCCL_DEBUG=INFO: one line per connection, NCCL's form ---- */

static int info_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct mlap2p_comm *comm;
	int peer = 1 - idx, ret = 0;

	(void)arg;
	if (mlap2p_comm_init_rank(&comm, 2, id, idx, idx ? core_pair : core_a))
		return 1;
	if (mlap2p_connect_peers(comm, 2, 1, &peer, 1, &peer))
		ret = 2;
	if (mlap2p_comm_destroy(comm) && !ret)
		ret = 3;
	return ret;
}

static int grep_count(const char *path, const char *needle)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

TEST_F(modes, info_lines)
{
	char path[64], needle[128];
	struct mlap2p_unique_id id;
	struct t_procs p;
	int c;

	if (variant->read || variant->buffsize)
		SKIP(return, "one variant is enough");
	snprintf(path, sizeof(path), "/tmp/mlap2p-info-%d.%%p.log", getpid());
	setenv("NCCL_DEBUG", "INFO", 1);
	setenv("NCCL_DEBUG_SUBSYS", "INIT,P2P", 1);
	setenv("NCCL_DEBUG_FILE", path, 1);
	ASSERT_EQ(0, t_fork(&p, 2, info_child, NULL));
	unsetenv("NCCL_DEBUG");
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));

	for (c = 0; c < 2; c++) {
		char file[64];
		int i;

		/* Each process logs its own send connections. */
		for (i = 0; i < 2; i++) {
			snprintf(file, sizeof(file), "/tmp/mlap2p-info-%d.%d.log",
				 getpid(), (int)p.pid[i]);
			snprintf(needle, sizeof(needle),
				 "NCCL INFO Channel %02d : %d[%d] -> %d[%d] via P2P/IPC",
				 c, i, i ? core_pair : core_a, 1 - i,
				 i ? core_a : core_pair);
			EXPECT_EQ(1, grep_count(file, needle))
				TH_LOG("%s: no '%s'", file, needle);
			EXPECT_EQ(2, grep_count(file, "via P2P/"));
		}
	}
	for (c = 0; c < 2; c++) {
		char file[64];

		snprintf(file, sizeof(file), "/tmp/mlap2p-info-%d.%d.log",
			 getpid(), (int)p.pid[c]);
		unlink(file);
	}
}

/*
 * The other two forms, whole lines (the thread's core, NCCL's text, the
 * read suffix, the end of the line), in write and read mode.  Each
 * process logs to its own file (%p); @file, if given, gets this one's.
 */
static void info_start(char *file, size_t n)
{
	char path[64];

	snprintf(path, sizeof(path), "/tmp/mlap2p-info-%d.%%p.log", getpid());
	if (file)
		snprintf(file, n, "/tmp/mlap2p-info-%d.%d.log", getpid(),
			 getpid());
	setenv("NCCL_DEBUG", "INFO", 1);
	setenv("NCCL_DEBUG_SUBSYS", "INIT,P2P", 1);
	setenv("NCCL_DEBUG_FILE", path, 1);
}

/* How often rank @from on @core_from logs its send to @to on @channel. */
static int info_count(const char *file, const char *mode, int channel,
		      int from, int core_from, int to, int core_to, int read)
{
	char needle[192];

	snprintf(needle, sizeof(needle),
		 "[%d] NCCL INFO Channel %02d : %d[%d] -> %d[%d] via %s%s\n",
		 core_from, channel, from, core_from, to, core_to, mode,
		 read ? "/read" : "");
	return grep_count(file, needle);
}

/* Threads of one process: "P2P/direct pointer", one line per channel. */
TEST_F(modes, info_lines_direct)
{
	struct pair_arg a = { MLAP2P_PATH_DIRECT, variant->read };
	int cores[2] = { core_a, core_pair };
	struct t_rank ranks[2];
	char file[64];
	int c, i;

	if (variant->buffsize)
		SKIP(return, "write and read are enough");
	info_start(file, sizeof(file));
	ASSERT_EQ(0, t_run_threads(2, cores, direct_rank, &a, ranks));

	/* Braces: EXPECT_EQ() ... TH_LOG() is two statements. */
	for (c = 0; c < 2; c++) {
		for (i = 0; i < 2; i++) {
			EXPECT_EQ(1, info_count(file, "P2P/direct pointer", c,
						i, cores[i], 1 - i,
						cores[1 - i], variant->read))
				TH_LOG("%s: channel %d, rank %d", file, c, i);
		}
	}
	/* Nothing else: no IPC line, no line from the receive side. */
	EXPECT_EQ(4, grep_count(file, "via P2P/"));
	EXPECT_EQ(0, grep_count(file, "via P2P/IPC"));
	unlink(file);
}

/*
 * The relay: process 0 runs rank 0 (core 0) and rank 2 (core 4, MLA 1),
 * process 1 runs rank 1 (core 8).  Both ends name rank 2 and its core as
 * the intermediate, "P2P/indirect/2[4]"; rank 2 connects nothing.
 */
TEST_F(modes, info_lines_indirect)
{
	struct relay_arg a = { { MLAP2P_PATH_INDIRECT, variant->read } };
	const int from_core[2] = { core_a, core_c };
	struct mlap2p_unique_id id;
	char file[2][64], mode[32];
	struct t_procs p;
	int c, i;

	if (variant->buffsize)
		SKIP(return, "write and read are enough");
	info_start(NULL, 0);
	ASSERT_EQ(0, t_fork(&p, 2, relay_child, &a));
	unsetenv("NCCL_DEBUG");
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));

	for (i = 0; i < 2; i++)
		snprintf(file[i], sizeof(file[i]), "/tmp/mlap2p-info-%d.%d.log",
			 getpid(), (int)p.pid[i]);
	snprintf(mode, sizeof(mode), "P2P/indirect/2[%x]", core_b);
	for (c = 0; c < 2; c++) {
		for (i = 0; i < 2; i++) {
			EXPECT_EQ(1, info_count(file[i], mode, c,
						i, from_core[i], 1 - i,
						from_core[1 - i], variant->read))
				TH_LOG("%s: channel %d, rank %d", file[i], c, i);
		}
	}
	for (i = 0; i < 2; i++) {
		EXPECT_EQ(2, grep_count(file[i], "via P2P/"));
		unlink(file[i]);
	}
}

/*
 * The intermediate's device is printed as the seed prints its busId, %lx:
 * cores 16 (MLA 4) and 24 (MLA 6) relay through MLA 5, where rank 2 runs
 * on core 20, so both lines end "P2P/indirect/2[14]".  Threads of one
 * process (the form does not depend on the mode).
 */
static int hex_rank(struct t_rank *r)
{
	int peer = 1 - r->rank, ret = 0;

	if (t_init(r))
		return 1;
	if (r->rank != 2 &&
	    mlap2p_connect_peers(r->comm, 2, 1, &peer, 1, &peer))
		ret = 2;
	if (mlap2p_comm_destroy(r->comm) && !ret)
		ret = 3;
	return ret;
}

TEST_F(modes, info_lines_indirect_hex)
{
	int cores[3] = { 16, 24, 20 };
	struct t_rank ranks[3];
	char file[64];
	int c, i;

	if (variant->buffsize)
		SKIP(return, "write and read are enough");
	/* With LNC 1, cores 16, 24 and 20 are other MLAs. */
	if (variant->family && !strcmp(variant->family, "trn1"))
		SKIP(return, "trn1 has no relay on these cores");
	info_start(file, sizeof(file));
	ASSERT_EQ(0, t_run_threads(3, cores, hex_rank, NULL, ranks));
	for (c = 0; c < 2; c++) {
		for (i = 0; i < 2; i++) {
			EXPECT_EQ(1, info_count(file, "P2P/indirect/2[14]", c,
						i, cores[i], 1 - i,
						cores[1 - i], variant->read))
				TH_LOG("%s: channel %d, rank %d", file, c, i);
		}
	}
	/* Not the decimal form of the old code. */
	EXPECT_EQ(0, grep_count(file, "P2P/indirect/2[20]"));
	EXPECT_EQ(4, grep_count(file, "via P2P/"));
	unlink(file);
}

TEST_HARNESS_MAIN
