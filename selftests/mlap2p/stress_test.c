// SPDX-License-Identifier: GPL-2.0
/*
 * stress_test: bounded concurrency against one device.
 *
 *  - cycle: STRESS_PROCS processes x STRESS_THREADS threads, each looping
 *    alloc / map / fill / export / publish / import (own file and another
 *    process's region) / check / unmap / close / free.  Threads of a
 *    process share its two files, so per-file tables see contention;
 *    processes exchange handles through a shared board, so imports race
 *    with the owner's free (0 or -ENOENT, never anything else).
 *  - races: one thread frees what another is mapping, exporting and
 *    importing at that moment.
 *
 * Both end with every live counter back at its baseline.  Bounded by an
 * iteration count and a time budget so the whole program stays well under
 * 20 s under TCG; MLAP2P_SLOW=1 (the KASAN/lockdep kernel; also implied
 * by MLAP2P_VM_LANE=debug) runs fewer iterations.
 */
#include "mlap2p_util.h"
#include "kselftest_harness.h"

#include <pthread.h>

#define STRESS_PROCS	4
#define STRESS_THREADS	4
#define STRESS_SLOTS	(STRESS_PROCS * STRESS_THREADS)
#define MAX_ERRORS	8

/* MLAP2P_SLOW=1, or the VM runner's debug lane (MLAP2P_VM_LANE=debug). */
static bool slow_kernel(void)
{
	const char *s = getenv("MLAP2P_SLOW");
	const char *lane = getenv("MLAP2P_VM_LANE");

	if (s && *s)
		return strcmp(s, "0") != 0;
	return lane && !strcmp(lane, "debug");
}

static int iterations(void)
{
	return slow_kernel() ? 20 : 150;
}

/* Seconds each worker may loop before it stops early. */
static double budget(void)
{
	return slow_kernel() ? 5.0 : 6.0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t xorshift(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/*
 * The board: one slot per thread, in memory shared by all processes.  A
 * slot is a seqlock: seq is odd while its owner rewrites it.
 */
struct slot {
	uint32_t seq;
	uint32_t seed;
	uint64_t len;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
};

struct board {
	struct slot slot[STRESS_SLOTS];
	uint32_t errors;
	uint64_t cross_opens;
	uint64_t cross_stale;
};

static void slot_publish(struct slot *s, const __u8 *ipc, uint32_t seed,
			 uint64_t len)
{
	__atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
	memcpy(s->ipc, ipc, sizeof(s->ipc));
	__atomic_store_n(&s->seed, seed, __ATOMIC_RELAXED);
	__atomic_store_n(&s->len, len, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->seq, 1, __ATOMIC_RELEASE);
}

static void slot_clear(struct slot *s)
{
	__atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&s->len, 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->seq, 1, __ATOMIC_RELEASE);
}

/* A consistent copy of a published slot; false if empty or busy. */
static bool slot_read(struct slot *s, __u8 *ipc, uint32_t *seed,
		      uint64_t *len)
{
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	size_t k;

	if (seq & 1)
		return false;
	/* Acquire loads keep the re-read of seq after them (no fences: TSan). */
	for (k = 0; k < MLAP2P_IPC_HANDLE_SIZE; k++)
		ipc[k] = __atomic_load_n(&s->ipc[k], __ATOMIC_ACQUIRE);
	*seed = __atomic_load_n(&s->seed, __ATOMIC_ACQUIRE);
	*len = __atomic_load_n(&s->len, __ATOMIC_ACQUIRE);
	return *len && __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq;
}

struct worker {
	pthread_t tid;
	struct board *board;
	int idx;		/* slot index */
	int fd_own, fd_imp;	/* the process's two files */
	__u32 mla;
	size_t page;
	int iters;
	int done;
};

#define worker_err(w, fmt, ...)						\
	do {								\
		if (__atomic_add_fetch(&(w)->board->errors, 1,		\
				       __ATOMIC_RELAXED) <= MAX_ERRORS)	\
			ksft_print_msg("worker %d: " fmt "\n", (w)->idx,	\
				       ##__VA_ARGS__);			\
	} while (0)

/* Import another process's published region, check its data, let go. */
static void cross_open(struct worker *w, uint32_t *rnd)
{
	int other = (int)(xorshift(rnd) % STRESS_SLOTS);
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	uint64_t len;
	uint32_t seed;
	void *m;
	int ret;

	if (other / STRESS_THREADS == w->idx / STRESS_THREADS)
		return;
	if (!slot_read(&w->board->slot[other], ipc, &seed, &len))
		return;
	ret = kt_import(w->fd_imp, ipc, &o);
	if (ret == -ENOENT) {
		__atomic_add_fetch(&w->board->cross_stale, 1, __ATOMIC_RELAXED);
		return;
	}
	if (ret) {
		worker_err(w, "cross import: %d", ret);
		return;
	}
	__atomic_add_fetch(&w->board->cross_opens, 1, __ATOMIC_RELAXED);
	if (o.size != len) {
		worker_err(w, "cross import size %llu, slot says %llu",
			   (unsigned long long)o.size,
			   (unsigned long long)len);
	}
	m = kt_map(w->fd_imp, o.mmap_cookie, o.size, PROT_READ);
	if (m == MAP_FAILED) {
		worker_err(w, "cross mmap: %s", strerror(errno));
	} else {
		/* The owner fills the region before it publishes. */
		if (kt_check(m, o.size, seed) >= 0)
			worker_err(w, "cross data does not match the slot");
		munmap(m, o.size);
	}
	ret = kt_close_handle(w->fd_imp, o.handle);
	if (ret)
		worker_err(w, "cross close: %d", ret);
}

/* One full cycle on a fresh region; returns false to stop. */
static bool cycle(struct worker *w, uint32_t *rnd, int iter)
{
	size_t len = (1 + xorshift(rnd) % 16) * w->page;
	uint32_t seed = xorshift(rnd);
	__u32 flags = iter % 3 == 0 ? MLAP2P_IPC_F_RDONLY : 0;
	bool free_first = iter % 4 == 1;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info ri;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	char *m, *mi;
	int ret;

	if (iter % 25 == 7)
		len = (2UL << 20) + w->page;	/* across a 2 MiB chunk */
	ret = kt_alloc(w->fd_own, len, w->mla, &a);
	if (ret) {
		worker_err(w, "alloc %zu: %d", len, ret);
		return false;
	}
	m = kt_map(w->fd_own, a.mmap_cookie, len, PROT_READ | PROT_WRITE);
	if (m == MAP_FAILED) {
		worker_err(w, "mmap: %s", strerror(errno));
		kt_free(w->fd_own, a.handle);
		return false;
	}
	if (kt_first_nonzero(m, len) != -1)
		worker_err(w, "new region is not zero");
	kt_fill(m, len, seed);

	ret = kt_export(w->fd_own, a.handle, flags, ipc);
	if (ret)
		worker_err(w, "export: %d", ret);
	else
		slot_publish(&w->board->slot[w->idx], ipc, seed, len);

	/* Our own region through the process's other file. */
	ret = ret ? ret : kt_import(w->fd_imp, ipc, &o);
	if (ret) {
		worker_err(w, "import own: %d", ret);
	} else {
		mi = kt_map(w->fd_imp, o.mmap_cookie, len,
			    flags ? PROT_READ : PROT_READ | PROT_WRITE);
		if (mi == MAP_FAILED) {
			worker_err(w, "mmap import: %s", strerror(errno));
		} else {
			if (kt_check(mi, len, seed) >= 0)
				worker_err(w, "import sees other data");
			munmap(mi, len);
		}
		if (kt_region_info(w->fd_own, a.handle, &ri) ||
		    ri.importers < 1 || ri.size != len)
			worker_err(w, "region info");
		ret = kt_close_handle(w->fd_imp, o.handle);
		if (ret)
			worker_err(w, "close own import: %d", ret);
	}

	cross_open(w, rnd);
	slot_clear(&w->board->slot[w->idx]);

	/* Free before or after the last munmap: both must work. */
	if (free_first) {
		ret = kt_free(w->fd_own, a.handle);
		if (ret)
			worker_err(w, "free (mapped): %d", ret);
		if (kt_check(m, len, seed) >= 0)
			worker_err(w, "data changed after free");
		munmap(m, len);
	} else {
		munmap(m, len);
		ret = kt_free(w->fd_own, a.handle);
		if (ret)
			worker_err(w, "free: %d", ret);
	}
	return true;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint32_t rnd = 0x9e3779b9u * (uint32_t)(w->idx + 1);
	double end = now_s() + budget();
	int i;

	for (i = 0; i < w->iters && now_s() < end; i++) {
		if (!cycle(w, &rnd, i))
			break;
	}
	w->done = i;
	return NULL;
}

/* One process: two files, STRESS_THREADS workers.  Exit 0 if clean. */
static int stress_process(struct board *board, int p, __u32 mla)
{
	struct worker w[STRESS_THREADS];
	int fd_own, fd_imp, t, total = 0;

	fd_own = kt_dev_open();
	fd_imp = kt_dev_open();
	if (fd_own < 0 || fd_imp < 0)
		return 10;
	for (t = 0; t < STRESS_THREADS; t++) {
		w[t] = (struct worker){
			.board = board, .idx = p * STRESS_THREADS + t,
			.fd_own = fd_own, .fd_imp = fd_imp, .mla = mla,
			.page = kt_page_size(), .iters = iterations(),
		};
		if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]))
			return 11;
	}
	for (t = 0; t < STRESS_THREADS; t++) {
		pthread_join(w[t].tid, NULL);
		total += w[t].done;
	}
	ksft_print_msg("process %d: %d cycles\n", p, total);
	close(fd_own);
	close(fd_imp);
	return 0;
}

FIXTURE(stress) {
	int fd;
	struct mlap2p_info info;
	__u32 mla;
	struct kt_counters base;
	__u64 base_used;
};

FIXTURE_SETUP(stress)
{
	struct mlap2p_dev_info d;

	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	self->mla = kt_local_mla(&self->info);
	ASSERT_EQ(0, kt_counters_read(&self->base));
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d));
	self->base_used = d.used;
}

FIXTURE_TEARDOWN(stress)
{
	if (self->fd > 0)
		close(self->fd);
}

static void expect_baseline(struct __test_metadata *_metadata,
			    FIXTURE_DATA(stress) *self)
{
	struct kt_counters now;
	struct mlap2p_dev_info d;

	EXPECT_TRUE(kt_counters_settle(&self->base, &now, 3000)) {
		kt_counters_log("baseline", &self->base);
		kt_counters_log("now", &now);
	}
	EXPECT_EQ(now.allocs - self->base.allocs, now.frees - self->base.frees);
	EXPECT_EQ(now.opens - self->base.opens, now.closes - self->base.closes);
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d));
	EXPECT_EQ(self->base_used, d.used);
}

TEST_F_TIMEOUT(stress, cycle_in_processes_and_threads, 90)
{
	struct board *board;
	pid_t pid[STRESS_PROCS];
	double t0 = now_s();
	int p;

	board = mmap(NULL, sizeof(*board), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, board);
	memset(board, 0, sizeof(*board));

	fflush(stdout);
	fflush(stderr);
	for (p = 0; p < STRESS_PROCS; p++) {
		pid[p] = fork();
		ASSERT_LE(0, pid[p]);
		if (pid[p] == 0) {
			close(self->fd);
			_exit(stress_process(board, p, self->mla));
		}
	}
	for (p = 0; p < STRESS_PROCS; p++) {
		EXPECT_EQ(0, kt_wait(pid[p])) TH_LOG("process %d", p);
	}
	ksft_print_msg("%.1f s, %llu cross-process opens, %llu stale handles\n",
		       now_s() - t0, (unsigned long long)board->cross_opens,
		       (unsigned long long)board->cross_stale);
	EXPECT_EQ(0U, board->errors);
	munmap(board, sizeof(*board));
	expect_baseline(_metadata, self);
}

/*
 * One thread allocates and frees as fast as it can, publishing each
 * handle, cookie and IPC handle; the others map, inspect, export and
 * import whatever is current.  Every call either works or reports that
 * the handle is gone (-ENOENT, or -EINVAL from mmap).
 */
struct race {
	int fd, fd2;
	size_t page;
	__u32 mla;
	int iters;
	int stop;
	uint32_t cur_seq;	/* seqlock over handle/cookie/ipc */
	__u32 handle;
	__u64 cookie;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	uint32_t errors;
	uint64_t map_hits, import_hits;
};

#define race_err(r, fmt, ...)						\
	do {								\
		if (__atomic_add_fetch(&(r)->errors, 1,			\
				       __ATOMIC_RELAXED) <= MAX_ERRORS)	\
			ksft_print_msg(fmt "\n", ##__VA_ARGS__);	\
	} while (0)

static void *race_freer(void *arg)
{
	struct race *r = arg;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	double hold, end = now_s() + budget() / 3;
	size_t k;
	int i, ret;

	for (i = 0; i < r->iters * 20 && now_s() < end; i++) {
		ret = kt_alloc(r->fd, 2 * r->page, r->mla, &a);
		if (ret) {
			race_err(r, "alloc: %d", ret);
			break;
		}
		ret = kt_export(r->fd, a.handle, 0, ipc);
		if (ret)
			race_err(r, "export: %d", ret);
		__atomic_add_fetch(&r->cur_seq, 1, __ATOMIC_ACQ_REL);
		__atomic_store_n(&r->handle, a.handle, __ATOMIC_RELAXED);
		__atomic_store_n(&r->cookie, a.mmap_cookie, __ATOMIC_RELAXED);
		for (k = 0; k < sizeof(ipc); k++)
			__atomic_store_n(&r->ipc[k], ipc[k], __ATOMIC_RELAXED);
		__atomic_add_fetch(&r->cur_seq, 1, __ATOMIC_RELEASE);
		/* Hold it published for a window of varying width. */
		hold = now_s() + (double)(i % 8) * 50e-6;
		while (now_s() < hold)
			;
		ret = kt_free(r->fd, a.handle);
		if (ret)
			race_err(r, "free: %d", ret);
	}
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *race_user(void *arg)
{
	struct race *r = arg;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE], out[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info ri;
	struct mlap2p_ipc_open o;
	uint32_t seq;
	__u32 handle;
	__u64 cookie;
	size_t k;
	void *m;
	int ret;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		seq = __atomic_load_n(&r->cur_seq, __ATOMIC_ACQUIRE);
		if (seq & 1 || !seq)
			continue;
		handle = __atomic_load_n(&r->handle, __ATOMIC_ACQUIRE);
		cookie = __atomic_load_n(&r->cookie, __ATOMIC_ACQUIRE);
		for (k = 0; k < sizeof(ipc); k++)
			ipc[k] = __atomic_load_n(&r->ipc[k], __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->cur_seq, __ATOMIC_RELAXED) != seq)
			continue;

		m = kt_map(r->fd, cookie, 2 * r->page,
			   PROT_READ | PROT_WRITE);
		if (m != MAP_FAILED) {
			if (kt_first_nonzero(m, 2 * r->page) != -1)
				race_err(r, "raced mapping is not zero");
			munmap(m, 2 * r->page);
			__atomic_add_fetch(&r->map_hits, 1, __ATOMIC_RELAXED);
		} else if (errno != EINVAL) {
			race_err(r, "mmap: %s", strerror(errno));
		}
		ret = kt_region_info(r->fd, handle, &ri);
		if (ret && ret != -ENOENT)
			race_err(r, "region info: %d", ret);
		ret = kt_export(r->fd, handle, 0, out);
		if (ret && ret != -ENOENT)
			race_err(r, "export: %d", ret);
		ret = kt_import(r->fd2, ipc, &o);
		if (ret == 0) {
			__atomic_add_fetch(&r->import_hits, 1,
					   __ATOMIC_RELAXED);
			m = kt_map(r->fd2, o.mmap_cookie, o.size,
				   PROT_READ);
			if (m == MAP_FAILED)
				race_err(r, "mmap import: %s", strerror(errno));
			else
				munmap(m, o.size);
			ret = kt_close_handle(r->fd2, o.handle);
			if (ret)
				race_err(r, "close: %d", ret);
		} else if (ret != -ENOENT) {
			race_err(r, "import: %d", ret);
		}
	}
	return NULL;
}

TEST_F_TIMEOUT(stress, free_races_map_export_import, 60)
{
	struct race r = {
		.page = kt_page_size(), .mla = self->mla,
		.iters = iterations(),
	};
	pthread_t freer, users[2];
	int k;

	r.fd = kt_dev_open();
	ASSERT_LE(0, r.fd);
	r.fd2 = kt_dev_open();
	ASSERT_LE(0, r.fd2);
	for (k = 0; k < 2; k++) {
		ASSERT_EQ(0, pthread_create(&users[k], NULL, race_user, &r));
	}
	ASSERT_EQ(0, pthread_create(&freer, NULL, race_freer, &r));
	pthread_join(freer, NULL);
	for (k = 0; k < 2; k++)
		pthread_join(users[k], NULL);
	ksft_print_msg("won the race: %llu mappings, %llu imports\n",
		       (unsigned long long)r.map_hits,
		       (unsigned long long)r.import_hits);
	EXPECT_EQ(0U, r.errors);
	close(r.fd);
	close(r.fd2);
	expect_baseline(_metadata, self);
}

KT_TEST_MAIN
