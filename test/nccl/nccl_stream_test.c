// SPDX-License-Identifier: GPL-2.0
/*
 * Host streams under <nccl.h>: an error on a stream reported
 * asynchronously (a peer process that died: ncclRemoteError), in-order
 * execution of several operations on one stream, posting that returns at
 * once, synchronize and query, two streams on one communicator (work runs
 * in posting order on each rank), abort with work queued, and several
 * threads posting on one communicator.
 */
#include <pthread.h>
#include <signal.h>

#include "nccl_ranks.h"

/* A gate a stream item waits at until the test opens it. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;
};

static int gate_wait(void *arg)
{
	struct gate *g = arg;

	pthread_mutex_lock(&g->lock);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	return 0;
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Items that record the order they ran in. */
struct seq {
	int *log;
	int *n;
	int id;
	const int32_t *check;	/* must hold @want when the item runs */
	int32_t want;
};

static int seq_run(void *arg)
{
	struct seq *s = arg;

	if (s->check && *s->check != s->want)
		return -EBADMSG;
	s->log[(*s->n)++] = s->id;
	return 0;
}

static void connect_pair(ncclComm_t *c)
{
	int32_t a = 1, b = 2, ra = 0, rb = 0;

	NCCLCHECK(ncclGroupStart());
	NCCLCHECK(ncclSend(&a, 1, ncclInt32, 1, c[0], NULL));
	NCCLCHECK(ncclRecv(&ra, 1, ncclInt32, 1, c[0], NULL));
	NCCLCHECK(ncclSend(&b, 1, ncclInt32, 0, c[1], NULL));
	NCCLCHECK(ncclRecv(&rb, 1, ncclInt32, 0, c[1], NULL));
	NCCLCHECK(ncclGroupEnd());
	CHECK(ra == 2 && rb == 1);
}

/* Rank 1 of the async-error case: exchange once, then die. */
static int dying_rank(int rank, int nranks, ncclUniqueId id)
{
	ncclComm_t comm;
	int32_t x = 5, y = 0;

	NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));
	NCCLCHECK(ncclGroupStart());
	NCCLCHECK(ncclSend(&x, 1, ncclInt32, 0, comm, NULL));
	NCCLCHECK(ncclRecv(&y, 1, ncclInt32, 0, comm, NULL));
	NCCLCHECK(ncclGroupEnd());
	CHECK(y == 7);
	_exit(0);	/* no destroy: the survivor must notice */
}

static void test_async_error(void)
{
	int fd[2];
	pid_t pid;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t s;
	int32_t x = 7, y = 0;
	ncclResult_t st;
	double t0;

	setenv("MLAP2P_PEER_TIMEOUT", "1s", 1);
	CHECK(pipe(fd) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(fd[1]);
		if (read(fd[0], &id, sizeof(id)) != (ssize_t)sizeof(id))
			_exit(90);
		_exit(dying_rank(1, 2, id));
	}
	close(fd[0]);
	NCCLCHECK(ncclGetUniqueId(&id));
	CHECK(write(fd[1], &id, sizeof(id)) == (ssize_t)sizeof(id));
	close(fd[1]);
	NCCLCHECK(ncclCommInitRank(&comm, 2, id, 0));
	NCCLCHECK(ncclGroupStart());
	NCCLCHECK(ncclSend(&x, 1, ncclInt32, 1, comm, NULL));
	NCCLCHECK(ncclRecv(&y, 1, ncclInt32, 1, comm, NULL));
	NCCLCHECK(ncclGroupEnd());
	CHECK(y == 5);
	CHECK(nt_wait(pid) == 0);

	CHECK(mlap2p_stream_create(&s) == 0);
	t0 = nt_now();
	NCCLCHECK(ncclRecv(&y, 1, ncclInt32, 1, comm, s));	/* posted */
	CHECK(mlap2p_stream_synchronize(s) == -ECONNRESET);
	CHECK(nt_now() - t0 < 10);
	CHECK(mlap2p_stream_synchronize(s) == 0);	/* reported once */
	NCCLCHECK(ncclCommGetAsyncError(comm, &st));
	CHECK(st == ncclRemoteError);
	CHECK(!strncmp(ncclGetLastError(comm), "Connection reset by peer",
		       strlen("Connection reset by peer")));
	/* The communicator is broken: later work fails at once. */
	NCCLEQ(ncclRemoteError, ncclSend(&x, 1, ncclInt32, 1, comm, NULL));
	NCCLCHECK(ncclSend(&x, 1, ncclInt32, 1, comm, s));
	CHECK(mlap2p_stream_synchronize(s) == -ECONNRESET);
	NCCLEQ(ncclRemoteError, ncclCommFinalize(comm));
	NCCLCHECK(ncclCommAbort(comm));
	CHECK(mlap2p_stream_destroy(s) == 0);
	unsetenv("MLAP2P_PEER_TIMEOUT");
}

static void test_order(ncclComm_t *c)
{
	enum { BIG = 1 << 18 };	/* int32s: SIMPLE, more than the FIFO */
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	int32_t *x1 = malloc(BIG * 4), *r1 = malloc(BIG * 4);
	int32_t x2 = 22, r2 = 0;
	int log0[8], n0 = 0, log1[8], n1 = 0, i;
	struct seq a = { log0, &n0, 1, NULL, 0 }, b = { log0, &n0, 2, NULL, 0 };
	struct seq d = { log1, &n1, 3, NULL, 0 }, e = { log1, &n1, 4, &r2, 22 };
	cudaStream_t s0, s1;
	double t0;

	CHECK(x1 && r1);
	for (i = 0; i < BIG; i++) {
		x1[i] = i;
		r1[i] = -1;
	}
	CHECK(mlap2p_stream_create(&s0) == 0);
	CHECK(mlap2p_stream_create(&s1) == 0);
	CHECK(mlap2p_stream_query(s0) == 0);
	/* Rank 0: gate, A, big send, B, small send.  Nothing blocks. */
	t0 = nt_now();
	CHECK(mlap2p_stream_launch(s0, gate_wait, &g) == 0);
	CHECK(mlap2p_stream_launch(s0, seq_run, &a) == 0);
	NCCLCHECK(ncclSend(x1, BIG, ncclInt32, 1, c[0], s0));
	CHECK(mlap2p_stream_launch(s0, seq_run, &b) == 0);
	NCCLCHECK(ncclSend(&x2, 1, ncclInt32, 1, c[0], s0));
	/* Rank 1: both receives, with checks between them. */
	d.check = &r1[BIG - 1];
	d.want = BIG - 1;
	NCCLCHECK(ncclRecv(r1, BIG, ncclInt32, 0, c[1], s1));
	CHECK(mlap2p_stream_launch(s1, seq_run, &d) == 0);
	NCCLCHECK(ncclRecv(&r2, 1, ncclInt32, 0, c[1], s1));
	CHECK(mlap2p_stream_launch(s1, seq_run, &e) == 0);
	CHECK(nt_now() - t0 < 1.0);
	usleep(50 * 1000);
	CHECK(mlap2p_stream_query(s0) == -EBUSY);
	CHECK(mlap2p_stream_query(s1) == -EBUSY);
	CHECK(n0 == 0 && n1 == 0);
	gate_open(&g);
	CHECK(mlap2p_stream_synchronize(s1) == 0);
	CHECK(mlap2p_stream_synchronize(s0) == 0);
	CHECK(mlap2p_stream_query(s0) == 0 && mlap2p_stream_query(s1) == 0);
	CHECK(n0 == 2 && log0[0] == 1 && log0[1] == 2);
	CHECK(n1 == 2 && log1[0] == 3 && log1[1] == 4);
	for (i = 0; i < BIG; i++)
		CHECK(r1[i] == i);
	CHECK(r2 == 22);
	/* A failing item: its error at the next synchronize, once. */
	e.check = &r2;
	e.want = 99;
	CHECK(mlap2p_stream_launch(s1, seq_run, &e) == 0);
	CHECK(mlap2p_stream_synchronize(s1) == -EBADMSG);
	CHECK(mlap2p_stream_query(s1) == 0);
	CHECK(mlap2p_stream_synchronize(NULL) == 0);
	CHECK(mlap2p_stream_destroy(s0) == 0);
	CHECK(mlap2p_stream_destroy(s1) == 0);
	free(x1);
	free(r1);
}

/* Two streams per rank on one communicator, different pairings. */
static void test_two_streams(ncclComm_t *c)
{
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	cudaStream_t a, b, d, e;
	int32_t v[6], r[6];
	int k;

	CHECK(mlap2p_stream_create(&a) == 0 && mlap2p_stream_create(&b) == 0);
	CHECK(mlap2p_stream_create(&d) == 0 && mlap2p_stream_create(&e) == 0);
	for (k = 0; k < 6; k++) {
		v[k] = 100 + k;
		r[k] = -1;
	}
	/* Stream a is held up, so b's later send is ready first: it must
	 * still wait for a's, or the receives would pair wrongly. */
	CHECK(mlap2p_stream_launch(a, gate_wait, &g) == 0);
	for (k = 0; k < 6; k++)
		NCCLCHECK(ncclSend(&v[k], 1, ncclInt32, 1, c[0], k % 2 ? b : a));
	for (k = 0; k < 6; k++)
		NCCLCHECK(ncclRecv(&r[k], 1, ncclInt32, 0, c[1],
				   k % 3 ? d : e));
	usleep(20 * 1000);
	CHECK(mlap2p_stream_query(d) == -EBUSY && mlap2p_stream_query(e) == -EBUSY);
	gate_open(&g);
	CHECK(mlap2p_stream_synchronize(a) == 0 && mlap2p_stream_synchronize(b) == 0);
	CHECK(mlap2p_stream_synchronize(d) == 0 && mlap2p_stream_synchronize(e) == 0);
	for (k = 0; k < 6; k++)
		CHECK(r[k] == 100 + k);
	CHECK(mlap2p_stream_destroy(a) == 0 && mlap2p_stream_destroy(b) == 0);
	CHECK(mlap2p_stream_destroy(d) == 0 && mlap2p_stream_destroy(e) == 0);
}

/* One thread's calls on a shared 1-rank communicator, each checked. */
struct poster {
	ncclComm_t c;
	int id;
	int n;
	int bad;		/* the first failing call, or -1 */
};

static void *poster_run(void *arg)
{
	struct poster *p = arg;
	cudaStream_t s;
	int32_t x[3], r[3];
	int i, k, ok;

	p->bad = -1;
	if (mlap2p_stream_create(&s)) {
		p->bad = 0;
		return NULL;
	}
	for (i = 0; i < p->n && p->bad < 0; i++) {
		for (k = 0; k < 3; k++) {
			x[k] = p->id * 1000000 + i * 3 + k;
			r[k] = -1;
		}
		ok = ncclAllReduce(x, r, 3, ncclInt32, ncclSum, p->c,
				   i % 8 ? NULL : s) == ncclSuccess &&
		     (i % 8 || !mlap2p_stream_synchronize(s));
		for (k = 0; k < 3 && ok; k++)
			ok = r[k] == x[k];
		if (!ok)
			p->bad = i;
	}
	if (mlap2p_stream_destroy(s) && p->bad < 0)
		p->bad = p->n;
	return NULL;
}

static void threads_stuck(int sig)
{
	static const char msg[] =
		"threads: calls not done in 120 s (a ticket lost or taken twice)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/*
 * Several threads on one communicator: each call still takes a ticket of
 * its own, so every call runs, alone and once.  The main thread first
 * (the tickets' bias, lib/nccl/nc.h), then another thread alone (which
 * ends it), then four at once.
 */
static void test_threads(void)
{
	enum { NT = 4 };
	struct poster p[NT + 1];
	pthread_t t[NT];
	ncclComm_t c;
	int i;

	signal(SIGALRM, threads_stuck);
	alarm(120);
	NCCLCHECK(ncclCommInitAll(&c, 1, NULL));
	for (i = 0; i <= NT; i++)
		p[i] = (struct poster){ c, i, i < 2 ? 200 : 2000, -1 };
	poster_run(&p[0]);
	CHECK(p[0].bad == -1);
	CHECK(pthread_create(&t[0], NULL, poster_run, &p[1]) == 0);
	CHECK(pthread_join(t[0], NULL) == 0);
	CHECK(p[1].bad == -1);
	p[0].n = p[1].n = 2000;
	for (i = 0; i < NT; i++)
		CHECK(pthread_create(&t[i], NULL, poster_run, &p[i]) == 0);
	poster_run(&p[NT]);
	for (i = 0; i < NT; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	for (i = 0; i <= NT; i++)
		if (p[i].bad != -1) {
			fprintf(stderr, "thread %d: call %d failed: %s\n", i,
				p[i].bad, ncclGetLastError(c));
			exit(1);
		}
	NCCLCHECK(ncclCommFinalize(c));
	NCCLCHECK(ncclCommDestroy(c));
	alarm(0);
}

static int count_run(void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static void test_abort(void)
{
	ncclComm_t c[2];
	cudaStream_t s;
	int32_t x = 1, y = 0;
	int ran = 0;
	ncclResult_t st;
	double t0;

	NCCLCHECK(ncclCommInitAll(c, 2, NULL));
	connect_pair(c);
	CHECK(mlap2p_stream_create(&s) == 0);
	NCCLCHECK(ncclRecv(&y, 1, ncclInt32, 1, c[0], s));	/* never sent */
	NCCLCHECK(ncclRecv(&y, 1, ncclInt32, 1, c[0], s));
	NCCLCHECK(ncclSend(&x, 1, ncclInt32, 1, c[0], s));
	CHECK(mlap2p_stream_launch(s, count_run, &ran) == 0);
	usleep(100 * 1000);
	CHECK(mlap2p_stream_query(s) == -EBUSY);
	NCCLCHECK(ncclCommGetAsyncError(c[0], &st));
	CHECK(st == ncclSuccess);
	t0 = nt_now();
	NCCLCHECK(ncclCommAbort(c[0]));
	CHECK(nt_now() - t0 < 2.0);
	CHECK(mlap2p_stream_synchronize(s) == -ECANCELED);
	CHECK(ran == 1);	/* not the communicator's: it still runs */
	CHECK(y == 0);
	NCCLCHECK(ncclCommAbort(c[1]));
	CHECK(mlap2p_stream_destroy(s) == 0);
}

int main(void)
{
	ncclComm_t c[2];

	nt_env();
	test_async_error();	/* forks: before this process has threads */
	fprintf(stderr, "async error: ok\n");
	NCCLCHECK(ncclCommInitAll(c, 2, NULL));
	connect_pair(c);
	test_order(c);
	fprintf(stderr, "order: ok\n");
	test_two_streams(c);
	fprintf(stderr, "two streams: ok\n");
	NCCLCHECK(ncclCommDestroy(c[0]));
	NCCLCHECK(ncclCommDestroy(c[1]));
	test_abort();
	fprintf(stderr, "abort: ok\n");
	test_threads();
	fprintf(stderr, "threads: ok\n");
	/* The same with full fences on both sides of each handshake
	 * (lib/nccl/nc.h), as where membarrier(2) is missing. */
	setenv("MLAP2P_MEMBARRIER", "0", 1);
	NCCLCHECK(ncclCommInitAll(c, 2, NULL));
	connect_pair(c);
	test_order(c);
	test_two_streams(c);
	NCCLCHECK(ncclCommDestroy(c[0]));
	NCCLCHECK(ncclCommDestroy(c[1]));
	test_abort();
	test_threads();
	fprintf(stderr, "MLAP2P_MEMBARRIER=0: ok\n");
	printf("nccl_stream_test: ok\n");
	return 0;
}
