/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the libmlap2p tests (lib_*_test.c).
 *
 *  - lt_run_threads(): run one function per rank in threads of this
 *    process, each with its own communicator, and collect the results.
 *  - lt_fork_ranks(): fork the child processes *before* any thread exists
 *    (the unique id's root is a thread; TSan forbids threads after a
 *    multi-threaded fork), then hand them the id through a pipe.
 *  - lt_move_pattern(): prove a connection by hand: the sender writes a
 *    known pattern into every protocol buffer of its wired ncclConnInfo and
 *    bumps *tail; the receiver waits for tail, checks the bytes, bumps
 *    *head; the sender waits for head.  Plus sizesFifo and ptrExchange.
 *  - lt_fd_count(), lt_memfd_maps(): what a process holds, for teardown.
 *
 * Every helper returns 0 or a small positive step number, so a forked child
 * can exit with it and a thread can hand it back.
 */
#ifndef MLAP2P_LIB_TEST_H
#define MLAP2P_LIB_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>

#include "mlap2p_test.h"
#include "bootstrap.h"
#include "comm.h"
#include "log.h"
#include "rt/rt.h"
#include "topo.h"
#include "transport.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define LT_MAX_RANKS	64
#define LT_WAIT_MS	20000

/* Small FIFOs: every side still rounds up to 2 MiB. */
static inline void lt_small_buffers(void)
{
	setenv("NCCL_LL_BUFFSIZE", "64K", 1);
	setenv("NCCL_LL128_BUFFSIZE", "60K", 1);
	setenv("NCCL_BUFFSIZE", "256K", 1);
}

/* What every P2P selection test sets, whatever the runtime. */
static inline void lt_p2p_only(void)
{
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "20s", 1);
	/* These tests pin P2P and the seed's terminal error; NET, which
	 * would take every pair P2P cannot, has net_test and net_hosts.sh. */
	setenv("MLAP2P_NET_DISABLE", "1", 1);
	lt_small_buffers();
}

/*
 * Host runtime with a trn2 pod of two nodes: every edge class exists.
 * Only for cases that need the pod (POD and NONE edges, cores 64 and up):
 * the module, as the VM lane loads it, has no pod.
 */
static inline void lt_host_topology(void)
{
	setenv("MLAP2P_FAMILY", "trn2", 1);
	setenv("MLAP2P_POD", "p2p", 1);
	setenv("MLAP2P_POD_NODES", "2", 1);
	setenv("MLAP2P_RUNTIME", "host", 1);
	lt_p2p_only();
}

/*
 * Node 0 of the trn2 defaults (16 MLAs on a 4x4 torus, LNC 2: cores 4m to
 * 4m + 3 on MLA m), the module's defaults, with which the VM lane loads
 * it.  With /dev/mlap2p the ranks use the module, so its CAN_ACCESS_PEER
 * and edge answers decide; without it, the host runtime with that family
 * and no pod.  An MLAP2P_RUNTIME already set wins.  NULL, or why the
 * loaded module cannot serve these cases (the caller skips).
 */
static inline const char *lt_node_topology(void)
{
	static const char *const host_vars[] = {
		"MLAP2P_DEVICES", "MLAP2P_CORES_PER_DEVICE", "MLAP2P_LNC",
		"MLAP2P_POD", "MLAP2P_POD_NODES", "MLAP2P_NODE",
	};
	static char why[192];
	struct mlap2p_info info;
	const char *rt;
	size_t i;
	int fd, ret;

	lt_p2p_only();
	setenv("MLAP2P_FAMILY", "trn2", 1);
	for (i = 0; i < ARRAY_SIZE(host_vars); i++)
		unsetenv(host_vars[i]);
	rt = getenv("MLAP2P_RUNTIME");
	if (!rt || !*rt || !strcasecmp(rt, "auto")) {
		rt = access(MLAP2P_DEVICE_PATH, F_OK) ? "host" : "kmod";
		setenv("MLAP2P_RUNTIME", rt, 1);
	}
	if (strcasecmp(rt, "kmod"))
		return NULL;
	/* Let the library say what is wrong with the device itself. */
	fd = mlap2p_dev_open();
	if (fd < 0)
		return NULL;
	ret = mlap2p_get_info(fd, &info);
	close(fd);
	if (ret || (info.family == MLAP2P_FAMILY_TRN2 &&
		    info.num_devices == 16 && info.cores_per_device == 8 &&
		    info.lnc == 2 && info.node == 0))
		return NULL;
	snprintf(why, sizeof(why),
		 "needs the module's default topology (trn2, 16 MLAs, 8 cores, LNC 2, node 0), not %s, %u MLAs, %u cores, LNC %u, node %u",
		 mlap2p_topo_family_name(info.family) ?: "?", info.num_devices,
		 info.cores_per_device, info.lnc, info.node);
	return why;
}

/* The communicator runs on the runtime MLAP2P_RUNTIME names: 0 or 1. */
static inline int lt_check_runtime(struct mlap2p_comm *api)
{
	const char *want = getenv("MLAP2P_RUNTIME");
	const char *kind = mlap2p_rt_kind_name(mlap2p_nccl(api)->rt->kind);

	return want && !strcasecmp(kind, want) ? 0 : 1;
}

#define LT_NODE_TOPOLOGY() do {						\
	const char *why_ = lt_node_topology();				\
									\
	if (why_)							\
		SKIP(return, "%s", why_);				\
} while (0)

/*
 * Test children leave with _exit(), which skips LeakSanitizer's exit-time
 * check: run it by hand where a test's library work is over.  1 = leaks.
 */
static inline int lt_leak_check(void)
{
#ifdef __SANITIZE_ADDRESS__
	return __lsan_do_recoverable_leak_check();
#else
	return 0;
#endif
}

/* ---- ranks as threads ---- */

struct lt_rank;
typedef int (*lt_rank_fn)(struct lt_rank *r);

struct lt_rank {
	int rank;
	int nranks;
	int core;
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;
	lt_rank_fn fn;
	void *arg;		/* shared by all ranks */
	int result;		/* 0 or the failing step */
	char msg[512];		/* mlap2p_last_error() of a failure */
	pthread_t thread;
};

static inline int lt_init(struct lt_rank *r)
{
	int ret = mlap2p_comm_init_rank(&r->comm, r->nranks, &r->id, r->rank,
					r->core);

	if (ret)
		snprintf(r->msg, sizeof(r->msg), "init: %s: %s",
			 mlap2p_strerror(ret), mlap2p_last_error());
	return ret;
}

static inline void *lt_thread_main(void *arg)
{
	struct lt_rank *r = arg;

	r->result = r->fn(r);
	if (r->result && !r->msg[0])
		snprintf(r->msg, sizeof(r->msg), "%s", mlap2p_last_error());
	return NULL;
}

/*
 * Run @fn for ranks 0..nranks-1 on @cores in threads, with one fresh id.
 * Returns 0 when every rank returned 0; else logs and returns the first
 * failing rank's result.
 */
static inline int lt_run_threads(int nranks, const int *cores, lt_rank_fn fn,
				 void *arg, struct lt_rank *ranks)
{
	struct mlap2p_unique_id id;
	int i, ret = 0;

	if (mlap2p_get_unique_id(&id)) {
		ksft_print_msg("get_unique_id: %s\n", mlap2p_last_error());
		return 100;
	}
	for (i = 0; i < nranks; i++) {
		memset(&ranks[i], 0, sizeof(ranks[i]));
		ranks[i].rank = i;
		ranks[i].nranks = nranks;
		ranks[i].core = cores[i];
		ranks[i].id = id;
		ranks[i].fn = fn;
		ranks[i].arg = arg;
		pthread_create(&ranks[i].thread, NULL, lt_thread_main,
			       &ranks[i]);
	}
	for (i = 0; i < nranks; i++) {
		pthread_join(ranks[i].thread, NULL);
		if (ranks[i].result && !ret) {
			ksft_print_msg("rank %d failed at step %d: %s\n", i,
				       ranks[i].result, ranks[i].msg);
			ret = ranks[i].result;
		}
	}
	if (!ret && lt_leak_check())
		ret = 101;
	return ret;
}

/* ---- ranks as processes ---- */

struct lt_procs {
	int n;
	pid_t pid[LT_MAX_RANKS];
	int pipe[LT_MAX_RANKS];	/* write end, to hand out the id */
};

/*
 * Fork @n children; each reads a unique id from its pipe and returns
 * @child(index, &id, arg) as its exit status.  The parent then calls
 * lt_procs_start() with the id and lt_procs_wait().
 */
static inline int lt_fork(struct lt_procs *p, int n,
			  int (*child)(int idx, struct mlap2p_unique_id *id,
				       void *arg),
			  void *arg)
{
	int i;

	p->n = n;
	for (i = 0; i < n; i++) {
		int fds[2];

		if (pipe(fds))
			return -errno;
		/* The child's diagnostics, and nothing of ours twice. */
		fflush(NULL);
		p->pid[i] = fork();
		if (p->pid[i] < 0)
			return -errno;
		if (p->pid[i] == 0) {
			struct mlap2p_unique_id id;
			int k;

			close(fds[1]);
			for (k = 0; k < i; k++)
				close(p->pipe[k]);
			if (mlap2p_read_full(fds[0], &id, sizeof(id)))
				_exit(99);
			close(fds[0]);
			k = child(i, &id, arg);
			if (!k && lt_leak_check())
				k = 102;
			fflush(NULL);
			_exit(k);
		}
		close(fds[0]);
		p->pipe[i] = fds[1];
	}
	return 0;
}

static inline int lt_procs_start(struct lt_procs *p,
				 const struct mlap2p_unique_id *id)
{
	int i, ret = 0;

	for (i = 0; i < p->n; i++) {
		if (mlap2p_write_full(p->pipe[i], id, sizeof(*id)))
			ret = -EPIPE;
		close(p->pipe[i]);
	}
	return ret;
}

/* 0 when every child exited 0; else the first non-zero status. */
static inline int lt_procs_wait(struct lt_procs *p)
{
	int i, st, ret = 0;

	for (i = 0; i < p->n; i++) {
		st = mlap2p_wait(p->pid[i]);
		if (st && !ret) {
			ksft_print_msg("child %d (pid %d) ended with %d\n", i,
				       (int)p->pid[i], st);
			fflush(stdout);	/* a failed ASSERT ends us by _exit() */
			ret = st;
		}
	}
	return ret;
}

/* ---- moving a pattern by hand ---- */

static inline int lt_wait_ge(volatile uint64_t *p, uint64_t v)
{
	int64_t deadline = mlap2p_now_ms() + LT_WAIT_MS;
	unsigned long spins = 0;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < v) {
		if (++spins % 1024 == 0) {
			if (mlap2p_now_ms() > deadline)
				return -ETIMEDOUT;
			sched_yield();
		}
	}
	return 0;
}

static inline uint32_t lt_seed(int proto, int sender, int channel)
{
	return 0x9e3779b9u * (uint32_t)(proto + 1) ^
	       (uint32_t)(sender << 16) ^ (uint32_t)channel;
}

/* Bytes of each protocol buffer the pattern covers (head and tail ends). */
#define LT_PATTERN_BYTES	4096

/*
 * Sender side of one connection: for each protocol with a buffer, write
 * the pattern at the start and the end of buffs[p], record the size in
 * sizesFifo, release tail = k, wait for head = k.  Then accept the
 * receiver's ptrExchange token.  0 or a step number.
 */
static inline int lt_send_pattern(struct mlap2p_comm *comm, int channel,
				  int peer)
{
	struct mlap2p_conn_desc d;
	struct ncclConnInfo *c;
	uint64_t k = 0;
	void *tok;
	int p;

	if (mlap2p_conn_get(comm, channel, peer, MLAP2P_DIR_SEND, &d))
		return 1;
	c = &d.host->conn;
	if (!c->tail || !c->head || !c->ptrExchange || !c->sizesFifo)
		return 2;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		size_t n = (size_t)d.buff_sizes[p];
		uint32_t seed = lt_seed(p, mlap2p_comm_rank(comm), channel);

		if (!n)
			continue;
		if (!c->buffs[p])
			return 3;
		if (n > LT_PATTERN_BYTES)
			n = LT_PATTERN_BYTES;
		mlap2p_fill(c->buffs[p], n, seed);
		mlap2p_fill(c->buffs[p] + d.buff_sizes[p] - n, n, ~seed);
		k++;
		c->sizesFifo[k % NCCL_STEPS] = (int)(n + (size_t)p);
		__atomic_store_n(c->tail, k, __ATOMIC_RELEASE);
		if (lt_wait_ge(c->head, k))
			return 4;
	}
	/* The receiver offers a token through ptrExchange (our sendMem). */
	{
		int64_t deadline = mlap2p_now_ms() + LT_WAIT_MS;

		while (!(tok = __atomic_load_n(c->ptrExchange, __ATOMIC_ACQUIRE))) {
			if (mlap2p_now_ms() > deadline)
				return 5;
			sched_yield();
		}
	}
	if (tok != (void *)(uintptr_t)(0x1000 + channel))
		return 6;
	__atomic_store_n(c->ptrExchange, NULL, __ATOMIC_RELEASE);
	return 0;
}

static inline int lt_recv_pattern(struct mlap2p_comm *comm, int channel,
				  int peer)
{
	struct mlap2p_conn_desc d;
	struct ncclConnInfo *c;
	uint64_t k = 0;
	int p;

	if (mlap2p_conn_get(comm, channel, peer, MLAP2P_DIR_RECV, &d))
		return 11;
	c = &d.host->conn;
	if (!c->tail || !c->head || !c->ptrExchange || !c->sizesFifo)
		return 12;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		size_t n = (size_t)d.buff_sizes[p];
		uint32_t seed = lt_seed(p, peer, channel);

		if (!n)
			continue;
		if (!c->buffs[p])
			return 13;
		if (n > LT_PATTERN_BYTES)
			n = LT_PATTERN_BYTES;
		k++;
		if (lt_wait_ge(c->tail, k))
			return 14;
		if (c->sizesFifo[k % NCCL_STEPS] != (int)(n + (size_t)p))
			return 15;
		if (mlap2p_check(c->buffs[p], n, seed) >= 0)
			return 16;
		if (mlap2p_check(c->buffs[p] + d.buff_sizes[p] - n, n,
				 ~seed) >= 0)
			return 17;
		__atomic_store_n(c->head, k, __ATOMIC_RELEASE);
	}
	__atomic_store_n(c->ptrExchange, (void *)(uintptr_t)(0x1000 + channel),
			 __ATOMIC_RELEASE);
	/* Wait until the sender took it, so teardown finds it consumed. */
	{
		int64_t deadline = mlap2p_now_ms() + LT_WAIT_MS;

		while (__atomic_load_n(c->ptrExchange, __ATOMIC_ACQUIRE)) {
			if (mlap2p_now_ms() > deadline)
				return 18;
			sched_yield();
		}
	}
	return 0;
}

/*
 * Both directions with @peer on @channel: the lower rank sends first.
 * Connections in both directions must exist.
 */
static inline int lt_exchange(struct mlap2p_comm *comm, int channel, int peer)
{
	int ret;

	if (mlap2p_comm_rank(comm) < peer) {
		ret = lt_send_pattern(comm, channel, peer);
		if (!ret)
			ret = lt_recv_pattern(comm, channel, peer);
	} else {
		ret = lt_recv_pattern(comm, channel, peer);
		if (!ret)
			ret = lt_send_pattern(comm, channel, peer);
	}
	return ret;
}

/* The device-visible mirror holds the wired connector (a real copy). */
static inline int lt_check_mirror(struct mlap2p_comm *comm, int channel,
				  int peer, int dir)
{
	struct mlap2p_conn_desc d;

	if (mlap2p_conn_get(comm, channel, peer, dir, &d))
		return 21;
	if (!d.dev || d.dev == d.host)
		return 22;
	if (d.dev->connected != 1)
		return 23;
	if (memcmp(&d.dev->conn, &d.host->conn,
		   offsetof(struct ncclConnInfo, step)))
		return 24;
	return 0;
}

/* ---- what a process holds ---- */

static inline int lt_fd_count(void)
{
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the DIR's own descriptor */
}

/* Mappings and descriptors of mlap2p memfds in this process. */
static inline int lt_memfd_count(void)
{
	char line[512], path[64], target[256];
	struct dirent *e;
	int n = 0;
	FILE *f;
	DIR *d;

	f = fopen("/proc/self/maps", "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "memfd:mlap2p"))
				n++;
		fclose(f);
	}
	d = opendir("/proc/self/fd");
	if (d) {
		while ((e = readdir(d))) {
			ssize_t len;

			snprintf(path, sizeof(path), "/proc/self/fd/%.32s",
				 e->d_name);
			len = readlink(path, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			if (strstr(target, "memfd:mlap2p"))
				n++;
		}
		closedir(d);
	}
	return n;
}

#endif /* MLAP2P_LIB_TEST_H */
