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

#include <dirent.h>
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
		return kt_child_fail(1, "init gave %d", ret);
	if (mlap2p_now_ms() - t0 > 4000)
		return kt_child_fail(2, "took %lld ms",
					 (long long)(mlap2p_now_ms() - t0));
	if (!strstr(mlap2p_last_error(), "ranks 1, 2 of 4 did not arrive"))
		return kt_child_fail(3, "message: %s", mlap2p_last_error());
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

/*
 * Rank 0 says 2 ranks, rank 1 says 3.  The first to reach the root fixes
 * nranks; the other is refused (-EINVAL, naming both counts) and the
 * first times out naming who never came.  Rank 1 starts later so that
 * rank 0 usually comes first, but a loaded machine may run them in either
 * order: each child checks the exact outcome of its order and exits
 * NR_FIRST or NR_SECOND, and the parent wants one of each.
 */
#define NR_FIRST	10
#define NR_SECOND	20

static int nranks_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	static const char *const refused[2] = {
		"rank 0 says there are 2 ranks, the first rank to arrive said 3",
		"rank 1 says there are 3 ranks, the first rank to arrive said 2",
	};
	static const char *const missing[2] = {
		"rank 1 of 2 did not arrive",	/* rank 0 came first */
		"ranks 0, 2 of 3 did not arrive",	/* rank 1 did */
	};
	struct mlap2p_comm *comm;
	int ret;

	(void)arg;
	if (idx == 1)
		usleep(200 * 1000);
	ret = mlap2p_comm_init_rank(&comm, idx ? 3 : 2, id, idx, idx * 4);
	if (ret == -EINVAL && strstr(mlap2p_last_error(), refused[idx]))
		return NR_SECOND;
	if (ret == -ETIMEDOUT && strstr(mlap2p_last_error(), missing[idx]))
		return NR_FIRST;
	return kt_child_fail(1, "init gave %d: %s", ret,
				 mlap2p_last_error());
}

TEST(nranks_mismatch)
{
	struct mlap2p_unique_id id;
	struct t_procs p;
	int st0, st1;

	/*
	 * The second rank must reach the root before the first one's
	 * timeout closes it: 1 s was too short for a loaded TCG guest.
	 */
	bs_env("4s");
	ASSERT_EQ(0, t_fork(&p, 2, nranks_child, NULL));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	st0 = kt_wait(p.pid[0]);
	st1 = kt_wait(p.pid[1]);
	EXPECT_EQ(NR_FIRST + NR_SECOND, st0 + st1);
	EXPECT_NE(st0, st1);
}

/* ---- a peer that dies is named within about a second ---- */

static int dead_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct mlap2p_comm *comm;
	int64_t t0;
	int peer = 1 - idx, ret;

	(void)arg;
	if (mlap2p_comm_init_rank(&comm, 2, id, idx, idx * 4))
		return kt_child_fail(1, "init: %s", mlap2p_last_error());
	if (idx == 1)
		_exit(0);	/* dies without a word */
	t0 = mlap2p_now_ms();
	ret = mlap2p_connect_peers(comm, 1, 1, &peer, 1, &peer);
	if (ret != -ESRCH)
		return kt_child_fail(2, "connect gave %d: %s", ret,
					 mlap2p_last_error());
	if (mlap2p_now_ms() - t0 > 5000)
		return kt_child_fail(3, "took %lld ms",
					 (long long)(mlap2p_now_ms() - t0));
	if (!strstr(mlap2p_last_error(), "rank 1"))
		return kt_child_fail(4, "%s", mlap2p_last_error());
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
	st = kt_wait(p.pid[0]);
	EXPECT_EQ(0, st);
	EXPECT_EQ(0, kt_wait(p.pid[1]));
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
		return kt_child_fail(1, "%s", mlap2p_last_error());
	if (mlap2p_comm_init_rank(&comm, 2, &id, idx, idx * 4))
		return kt_child_fail(2, "%s", mlap2p_last_error());
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

/* ---- back-to-back communicators leave no descriptor, no TIME_WAIT ---- */

#define CY_MAX_PORTS	256

struct cycle_arg {
	pthread_mutex_t lock;
	int nports;
	unsigned int ports[CY_MAX_PORTS];	/* our listeners, any cycle */
};

/* Inodes of the sockets this process holds. */
static int own_socket_inodes(unsigned long *inodes, int max)
{
	char path[64], target[64];
	struct dirent *e;
	int n = 0;
	DIR *d = opendir("/proc/self/fd");

	while (d && (e = readdir(d)) && n < max) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%.32s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (sscanf(target, "socket:[%lu]", &inodes[n]) == 1)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/*
 * Walk /proc/net/tcp and tcp6: with @inodes, add the port of each of
 * those sockets in LISTEN (st 0A) to @a; without, count the TIME_WAIT
 * (st 06) sockets with a port of @a at either end.
 */
static int tcp_walk(struct cycle_arg *a, const unsigned long *inodes, int ni)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	unsigned int lport, rport, st, i, k;
	unsigned long inode;
	char line[512];
	int n = 0, f;

	for (f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "re");

		while (fp && fgets(line, sizeof(line), fp)) {
			if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %x %*s %*s %*s %*s %*s %lu",
				   &lport, &rport, &st, &inode) != 4)
				continue;
			if (inodes && st == 0x0a) {
				for (i = 0; i < (unsigned int)ni; i++)
					if (inodes[i] == inode)
						break;
				if (i == (unsigned int)ni)
					continue;
				for (k = 0; k < (unsigned int)a->nports; k++)
					if (a->ports[k] == lport)
						break;
				if (k == (unsigned int)a->nports &&
				    a->nports < CY_MAX_PORTS)
					a->ports[a->nports++] = lport;
			} else if (!inodes && st == 0x06) {
				for (k = 0; k < (unsigned int)a->nports; k++)
					if (a->ports[k] == lport ||
					    a->ports[k] == rport)
						break;
				n += k < (unsigned int)a->nports;
			}
		}
		if (fp)
			fclose(fp);
	}
	return n;
}

static void note_listeners(struct cycle_arg *a)
{
	unsigned long inodes[512];
	int ni = own_socket_inodes(inodes, 512);

	pthread_mutex_lock(&a->lock);
	tcp_walk(a, inodes, ni);
	pthread_mutex_unlock(&a->lock);
}

static int cycle_rank(struct t_rank *r)
{
	struct cycle_arg *a = r->arg;

	if (t_init(r))
		return 1;
	if (mlap2p_connect_ring(r->comm, 2))
		return 2;
	note_listeners(a);	/* every rank's, while all are up */
	if (mlap2p_comm_destroy(r->comm))
		return 3;
	return 0;
}

/*
 * Ranks keep one connection to each peer they talk to and close it with
 * a reset, so communicator after communicator, this process holds no more
 * descriptors than before and no TIME_WAIT socket has one of our
 * listeners (the root's or a rank's) at either end.  One connection per
 * message, as before, left hundreds a cycle and ran out of ports.
 */
TEST(cycles_leave_no_descriptors_or_time_wait)
{
	static struct cycle_arg a = { .lock = PTHREAD_MUTEX_INITIALIZER };
	const int nranks = 8;
	int cores[8] = { 0, 4, 8, 12, 16, 20, 24, 28 };
	struct t_rank ranks[8];
	int fds0, cycle, i;

	bs_env("20s");
	setenv("MLAP2P_NET_DISABLE", "1", 1);
	t_small_buffers();
	fds0 = t_fd_count();
	for (cycle = 0; cycle < 4; cycle++) {
		struct mlap2p_unique_id id;

		ASSERT_EQ(0, mlap2p_get_unique_id(&id));
		note_listeners(&a);	/* the root's */
		for (i = 0; i < nranks; i++) {
			memset(&ranks[i], 0, sizeof(ranks[i]));
			ranks[i].rank = i;
			ranks[i].nranks = nranks;
			ranks[i].core = cores[i];
			ranks[i].id = id;
			ranks[i].fn = cycle_rank;
			ranks[i].arg = &a;
			pthread_create(&ranks[i].thread, NULL, t_thread_main,
				       &ranks[i]);
		}
		for (i = 0; i < nranks; i++) {
			pthread_join(ranks[i].thread, NULL);
			EXPECT_EQ(0, ranks[i].result)
				TH_LOG("cycle %d rank %d: %s", cycle, i,
				       ranks[i].msg);
		}
		/* The root and the ranks' listeners, at least one each. */
		ASSERT_LE(nranks + 1, a.nports);
		EXPECT_EQ(fds0, t_fd_count()) TH_LOG("cycle %d", cycle);
		EXPECT_EQ(0, tcp_walk(&a, NULL, 0)) TH_LOG("cycle %d", cycle);
	}
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
