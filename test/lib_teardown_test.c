// SPDX-License-Identifier: GPL-2.0
/*
 * Teardown returns everything.  After destroy or abort a process holds no
 * more descriptors and no mlap2p memfd mappings than before init; with the
 * module, its live counters (/sys/class/misc/mlap2p) come back to their
 * baseline.  A rank killed at any point leaves no file behind: nothing in
 * /dev/shm, no abstract socket once every process is gone, and the module's
 * counters settle once the survivors have finished.
 */
#include <signal.h>

#include "helpers.h"
#include "kselftest_harness.h"

static bool using_kmod(void)
{
	const char *rt = getenv("MLAP2P_RUNTIME");

	if (rt && !strcmp(rt, "host"))
		return false;
	return !access(MLAP2P_DEVICE_PATH, F_OK);
}

/* Until @ms pass, wait for the descriptor count to fall to @want. */
static int fds_settle(int want, int ms)
{
	int n;

	while ((n = t_fd_count()) > want && ms > 0) {
		usleep(10 * 1000);
		ms -= 10;
	}
	return n;
}

struct td_state {
	bool kmod;
	struct kt_counters base;
};

static void td_setup(struct td_state *st)
{
	if (!getenv("MLAP2P_RUNTIME") && access(MLAP2P_DEVICE_PATH, F_OK))
		setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "20s", 1);
	t_small_buffers();
	st->kmod = using_kmod();
	if (st->kmod && kt_counters_read(&st->base))
		st->kmod = false;
}

/* The module's live counters are back where they were. */
static int td_counters_back(struct td_state *st)
{
	struct kt_counters now;

	if (!st->kmod)
		return 0;
	if (kt_counters_settle(&st->base, &now, 3000))
		return 0;
	kt_counters_log("baseline", &st->base);
	kt_counters_log("now", &now);
	return 1;
}

/* ---- threads: destroy and abort ---- */

struct td_arg {
	int abort;
	int nchannels;
};

static int td_rank(struct t_rank *r)
{
	struct td_arg *a = r->arg;
	int c, ret = 0;
	void *mem;

	if (t_init(r))
		return 1;
	if (mlap2p_connect_ring(r->comm, a->nchannels))
		ret = 2;
	for (c = 0; c < a->nchannels && !ret; c++)
		ret = t_exchange(r->comm, c, 1 - r->rank);
	/* A user region left allocated is freed by teardown too. */
	if (!ret && mlap2p_mem_alloc(r->comm, 3 << 20, &mem))
		ret = 3;
	if (a->abort) {
		if (mlap2p_comm_abort(r->comm) && !ret)
			ret = 4;
	} else if (mlap2p_comm_destroy(r->comm) && !ret) {
		ret = 5;
	}
	return ret;
}

FIXTURE(teardown) {
	struct td_state st;
};

FIXTURE_VARIANT(teardown) {
	int abort;
};

FIXTURE_VARIANT_ADD(teardown, destroy) { .abort = 0 };
FIXTURE_VARIANT_ADD(teardown, abort) { .abort = 1 };

FIXTURE_SETUP(teardown)
{
	td_setup(&self->st);
}

FIXTURE_TEARDOWN(teardown)
{
}

TEST_F(teardown, threads_return_everything)
{
	struct td_arg a = { variant->abort, 4 };
	int cores[2] = { 0, 4 };
	struct t_rank ranks[2];
	int fds0, memfds0, round;

	fds0 = t_fd_count();
	memfds0 = t_memfd_count();
	ASSERT_EQ(0, memfds0);
	/* Twice: nothing accumulates either. */
	for (round = 0; round < 2; round++) {
		ASSERT_EQ(0, t_run_threads(2, cores, td_rank, &a, ranks));
		EXPECT_EQ(fds0, fds_settle(fds0, 2000));
		EXPECT_EQ(0, t_memfd_count());
		EXPECT_EQ(0, td_counters_back(&self->st));
	}
}

/*
 * Rank 0 aborts first; rank 1, a thread of the same process, still reads
 * and writes the pages rank 0 owned (they are pinned, as NCCL's cuMem path
 * takes a reference), and they go away when rank 1 is done.
 */
struct early_abort {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int aborted;
};

static int early_abort_rank(struct t_rank *r)
{
	struct early_abort *e = r->arg;
	struct mlap2p_conn_desc d;
	int peer = 1 - r->rank, ret = 0;

	if (t_init(r))
		return 1;
	if (mlap2p_connect_peers(r->comm, 1, 1, &peer, 1, &peer))
		return 2;
	if (r->rank == 0) {
		mlap2p_comm_abort(r->comm);
		pthread_mutex_lock(&e->lock);
		e->aborted = 1;
		pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	pthread_mutex_lock(&e->lock);
	while (!e->aborted)
		pthread_cond_wait(&e->cond, &e->lock);
	pthread_mutex_unlock(&e->lock);
	/* Our send side writes into rank 0's recvMem; recv reads its sendMem. */
	if (mlap2p_conn_get(r->comm, 0, peer, MLAP2P_DIR_SEND, &d))
		ret = 3;
	if (!ret) {
		kt_fill(d.host->conn.buffs[NCCL_PROTO_SIMPLE], 4096, 5);
		__atomic_store_n(d.host->conn.tail, 7, __ATOMIC_RELEASE);
		if (kt_check(d.host->conn.buffs[NCCL_PROTO_SIMPLE], 4096, 5) >= 0)
			ret = 4;
	}
	if (!ret && mlap2p_conn_get(r->comm, 0, peer, MLAP2P_DIR_RECV, &d))
		ret = 5;
	if (!ret && __atomic_load_n(d.host->conn.head, __ATOMIC_ACQUIRE) != 0)
		ret = 6;
	/* Destroying alone: the handshake with the aborted rank fails. */
	mlap2p_comm_abort(r->comm);
	return ret;
}

TEST_F(teardown, abort_leaves_peer_pages_pinned)
{
	struct early_abort e = {
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
	};
	int cores[2] = { 0, 4 };
	struct t_rank ranks[2];
	int fds0 = t_fd_count();

	if (variant->abort == 0)
		SKIP(return, "one variant is enough");
	ASSERT_EQ(0, t_run_threads(2, cores, early_abort_rank, &e, ranks));
	EXPECT_EQ(fds0, fds_settle(fds0, 2000));
	EXPECT_EQ(0, t_memfd_count());
	EXPECT_EQ(0, td_counters_back(&self->st));
}

/* Processes: each child checks itself; the relay server is in child 0. */
static void *td_init_thread(void *arg)
{
	t_init(arg);
	return NULL;
}

static void *td_end_thread(void *arg)
{
	struct t_rank *r = arg;
	const struct td_arg *a = r->arg;

	r->result = a->abort ? mlap2p_comm_abort(r->comm) :
			       mlap2p_comm_destroy(r->comm);
	return NULL;
}

static int td_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	const struct td_arg *a = arg;
	struct mlap2p_comm *comm;
	int fds0 = t_fd_count(), peer = idx ? 0 : 1, c, ret = 0;
	struct t_rank r[2];
	int i, n;

	if (idx == 1) {
		if (mlap2p_comm_init_rank(&comm, 3, id, 1, 8))
			return kt_child_fail(1, "%s", mlap2p_last_error());
		ret = mlap2p_connect_peers(comm, a->nchannels, 1, &peer, 1,
					   &peer) ? 2 : 0;
		for (c = 0; c < a->nchannels && !ret; c++)
			ret = t_exchange(comm, c, peer);
		if (a->abort)
			mlap2p_comm_abort(comm);
		else if (mlap2p_comm_destroy(comm) && !ret)
			ret = 3;
	} else {
		/* Rank 0 (core 0) and the relay rank 2 (core 4) as threads. */
		memset(r, 0, sizeof(r));
		for (i = 0; i < 2; i++) {
			r[i].rank = i ? 2 : 0;
			r[i].nranks = 3;
			r[i].core = i ? 4 : 0;
			r[i].id = *id;
			r[i].arg = (void *)a;
		}
		pthread_create(&r[1].thread, NULL, td_init_thread, &r[1]);
		t_init(&r[0]);
		pthread_join(r[1].thread, NULL);
		if (!r[0].comm || !r[1].comm)
			return 11;
		ret = mlap2p_connect_peers(r[0].comm, a->nchannels, 1, &peer, 1,
					   &peer) ? 12 : 0;
		for (c = 0; c < a->nchannels && !ret; c++)
			ret = t_exchange(r[0].comm, c, peer);
		for (i = 0; i < 2; i++)
			pthread_create(&r[i].thread, NULL, td_end_thread, &r[i]);
		for (i = 0; i < 2; i++) {
			pthread_join(r[i].thread, NULL);
			if (r[i].result && !ret)
				ret = 13;
		}
	}
	if (ret)
		return kt_child_fail(ret, "%s", mlap2p_last_error());
	n = fds_settle(fds0, 2000);
	if (n != fds0)
		return kt_child_fail(20, "%d descriptors, %d before", n, fds0);
	if (t_memfd_count())
		return kt_child_fail(21, "memfds left");
	return 0;
}

TEST_F(teardown, processes_with_relay_return_everything)
{
	struct td_arg a = { variant->abort, 2 };
	struct mlap2p_unique_id id;
	struct t_procs p;

	ASSERT_EQ(0, t_fork(&p, 2, td_child, &a));
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	ASSERT_EQ(0, t_procs_wait(&p));
	EXPECT_EQ(0, td_counters_back(&self->st));
}

/* ---- a rank killed at any point leaves nothing behind ---- */

static int shm_entries(void)
{
	struct dirent *e;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * The names of the host runtime's abstract sockets this process has bound
 * (its socket inodes matched against /proc/net/unix), one per line.
 */
static void own_host_sockets(char *out, size_t len)
{
	char line[512], path[64], target[64];
	unsigned long inodes[64];
	int ni = 0, i;
	struct dirent *e;
	size_t o = 0;
	FILE *f;
	DIR *d;

	out[0] = '\0';
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d)) && ni < 64) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%.32s", e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (sscanf(target, "socket:[%lu]", &inodes[ni]) == 1)
			ni++;
	}
	if (d)
		closedir(d);
	f = fopen("/proc/net/unix", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *name = strstr(line, "@mlap2p-host/");
		unsigned long inode;

		if (!name || sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &inode) != 1)
			continue;
		for (i = 0; i < ni; i++)
			if (inodes[i] == inode && o + 64 < len)
				o += (size_t)snprintf(out + o, len - o, "%.40s",
						      name);
	}
	if (f)
		fclose(f);
}

/* How many of the lines of @names are still bound. */
static int still_bound(const char *names)
{
	char line[512], want[64];
	const char *p = names;
	int n = 0;
	FILE *f;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);

		snprintf(want, sizeof(want), "%.*s", (int)l, p);
		p += l + (nl ? 1 : 0);
		f = fopen("/proc/net/unix", "re");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, want))
				n++;
		if (f)
			fclose(f);
	}
	return n;
}

struct kill_arg {
	int stage;	/* 0: after init, 1: after connect, 2: mid transfer */
	int pipe[2];	/* both ranks report there, the victim its sockets */
};

struct kill_report {
	int rank;
	char sockets[512];
};

/*
 * Tell the parent this rank reached its stage.  Rank 1 may be killed only
 * once both have: the end of a handshake is not the same instant on both
 * sides (rank 1 can take rank 0's last connect message before rank 0 has
 * its acknowledgement), and a rank killed in between fails its peer.
 */
static int kill_report_stage(struct kill_arg *a, int rank)
{
	struct kill_report rep;

	memset(&rep, 0, sizeof(rep));
	rep.rank = rank;
	if (rank == 1)
		own_host_sockets(rep.sockets, sizeof(rep.sockets));
	return kt_write_full(a->pipe[1], &rep, sizeof(rep));
}

/*
 * Rank 1 (the victim) gets as far as @stage and waits to be killed once
 * rank 0 has reported the same stage; rank 0 waits until rank 1 is gone, checks its own pages still hold what the victim
 * wrote, and destroys: that fails quickly, naming rank 1, and still frees
 * everything.
 */
static int kill_child(int idx, struct mlap2p_unique_id *id, void *arg)
{
	struct kill_arg *a = arg;
	struct mlap2p_conn_desc d;
	struct mlap2p_comm *comm;
	int peer = 1 - idx, ret, k;
	int64_t t0;

	if (mlap2p_comm_init_rank(&comm, 2, id, idx, idx * 4))
		return 1;
	if (a->stage >= 1 && mlap2p_connect_peers(comm, 1, 1, &peer, 1, &peer))
		return 2;
	if (idx == 1) {
		if (a->stage == 2) {
			/* Half a transfer: data and tail, never a head back. */
			if (mlap2p_conn_get(comm, 0, peer, MLAP2P_DIR_SEND, &d))
				return 3;
			kt_fill(d.host->conn.buffs[NCCL_PROTO_SIMPLE], 4096, 77);
			__atomic_store_n(d.host->conn.tail, 1, __ATOMIC_RELEASE);
		}
		kill_report_stage(a, 1);
		for (;;)
			pause();
	}
	if (kill_report_stage(a, 0))
		return 10;
	for (k = 0; k < 1000 && !mlap2p_peer_alive(mlap2p_nccl(comm), 1); k++)
		usleep(10 * 1000);
	if (!mlap2p_peer_alive(mlap2p_nccl(comm), 1))
		return kt_child_fail(4, "rank 1 still looks alive");
	if (a->stage == 2) {
		if (mlap2p_conn_get(comm, 0, peer, MLAP2P_DIR_RECV, &d))
			return 5;
		if (__atomic_load_n(d.host->conn.tail, __ATOMIC_ACQUIRE) != 1 ||
		    kt_check(d.host->conn.buffs[NCCL_PROTO_SIMPLE], 4096,
			    77) >= 0)
			return kt_child_fail(6, "the dead peer's data is gone");
	}
	t0 = mlap2p_now_ms();
	ret = mlap2p_comm_destroy(comm);
	/*
	 * -ESRCH, not -ETIMEDOUT: destroy saw rank 1 was gone rather than
	 * waiting out MLAP2P_BOOTSTRAP_TIMEOUT.  How long it took is only
	 * logged: a loaded machine stretches any bound.
	 */
	if (ret != -ESRCH || !strstr(mlap2p_last_error(), "rank 1"))
		return kt_child_fail(7, "destroy gave %d after %lld ms: %s",
					 ret, (long long)(mlap2p_now_ms() - t0),
					 mlap2p_last_error());
	return t_memfd_count() ? kt_child_fail(9, "memfds left") : 0;
}

FIXTURE(killed) {
	struct td_state st;
};

FIXTURE_VARIANT(killed) {
	int stage;
};

FIXTURE_VARIANT_ADD(killed, after_init) { .stage = 0 };
FIXTURE_VARIANT_ADD(killed, after_connect) { .stage = 1 };
FIXTURE_VARIANT_ADD(killed, mid_exchange) { .stage = 2 };

FIXTURE_SETUP(killed)
{
	td_setup(&self->st);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "5s", 1);
}

FIXTURE_TEARDOWN(killed)
{
}

TEST_F(killed, leaves_nothing_behind)
{
	struct kill_arg a = { .stage = variant->stage };
	struct mlap2p_unique_id id;
	int shm0 = shm_entries(), i;
	struct kill_report rep = { .rank = -1 }, got;
	struct t_procs p;

	ASSERT_EQ(0, pipe(a.pipe));
	ASSERT_EQ(0, t_fork(&p, 2, kill_child, &a));
	close(a.pipe[1]);
	ASSERT_EQ(0, mlap2p_get_unique_id(&id));
	ASSERT_EQ(0, t_procs_start(&p, &id));
	/* Both ranks at the stage, in either order; keep the victim's. */
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, kt_read_full(a.pipe[0], &got, sizeof(got)));
		if (got.rank == 1)
			rep = got;
	}
	ASSERT_EQ(1, rep.rank);
	if (!self->st.kmod && variant->stage)
		EXPECT_NE(0, rep.sockets[0]);	/* it did export over IPC */
	kill(p.pid[1], SIGKILL);
	EXPECT_EQ(0, kt_wait(p.pid[0]));
	EXPECT_EQ(128 + SIGKILL, kt_wait(p.pid[1]));
	EXPECT_EQ(shm0, shm_entries());
	EXPECT_EQ(0, still_bound(rep.sockets)) TH_LOG("%s", rep.sockets);
	EXPECT_EQ(0, td_counters_back(&self->st));
}

TEST_HARNESS_MAIN
