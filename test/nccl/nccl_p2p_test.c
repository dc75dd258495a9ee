// SPDX-License-Identifier: GPL-2.0
/*
 * Grouped ncclSend/ncclRecv and ncclCommSplit through <nccl.h>: a ring
 * exchange across rank processes on a stream and on the NULL stream, at
 * LL, LL128 and SIMPLE sizes, send/recv to self; then split by parity with
 * reversed keys (and one rank opting out with NCCL_SPLIT_NOCOLOR) and the
 * same exchange inside each child, and a split of everyone with
 * splitShare = 1 used in turn with its parent; mlap2p_nccl_ipost (its
 * errors, then receives posted before sends), and its -EINPROGRESS while a
 * non-blocking init waits for a rank that has not joined; then four ranks
 * of one thread from ncclCommInitAll, grouped across communicators.
 */
#include <mlap2p/dataplane.h>
#include <mlap2p/mlap2p.h>
#include <mlap2p/transport.h>

#include <poll.h>

#include "nccl_ranks.h"

/* int32 counts: LL, LL128, SIMPLE in 2 parts (one per P2P channel),
 * the last with parts that end mid-element. */
static const size_t sizes[] = { 2, 2048, 300000, 300001 };

static int32_t val(int from, size_t i, int round)
{
	return (int32_t)(from * 1000003 + (int)i * 7 + round);
}

/* Ring exchange on @comm: send to next, receive from prev, check. */
static void ring(ncclComm_t comm, cudaStream_t s, int round)
{
	int rank, n, next, prev;
	size_t k, i;

	NCCLCHECK(ncclCommUserRank(comm, &rank));
	NCCLCHECK(ncclCommCount(comm, &n));
	next = (rank + 1) % n;
	prev = (rank + n - 1) % n;
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t cnt = sizes[k];
		int32_t *sb = malloc(cnt * 4), *rb = malloc(cnt * 4);
		int32_t *self = malloc(cnt * 4);

		CHECK(sb && rb && self);
		for (i = 0; i < cnt; i++) {
			sb[i] = val(rank, i, round);
			rb[i] = self[i] = -1;
		}
		NCCLCHECK(ncclGroupStart());
		NCCLCHECK(ncclSend(sb, cnt, ncclInt32, next, comm, s));
		NCCLCHECK(ncclRecv(rb, cnt, ncclInt32, prev, comm, s));
		NCCLCHECK(ncclSend(sb, cnt, ncclInt32, rank, comm, s));
		NCCLCHECK(ncclRecv(self, cnt, ncclInt32, rank, comm, s));
		NCCLCHECK(ncclGroupEnd());
		if (s)
			CHECK(mlap2p_stream_synchronize(s) == 0);
		for (i = 0; i < cnt; i++) {
			if (rb[i] != val(prev, i, round) ||
			    self[i] != val(rank, i, round)) {
				fprintf(stderr, "rank %d/%d count %zu [%zu]: %d %d\n",
					rank, n, cnt, i, rb[i], self[i]);
				exit(1);
			}
		}
		free(sb);
		free(rb);
		free(self);
	}
	/* NCCL's 2 P2P channels per peer: the large ones moved on both. */
	for (k = 0; n > 1 && k < 2; k++) {
		struct mlap2p_conn_desc d;

		CHECK(mlap2p_conn_get(mlap2p_nccl_comm(comm), (int)k, next,
				      MLAP2P_DIR_SEND, &d) == 0);
		if (!d.host->conn.step) {
			fprintf(stderr, "rank %d/%d: channel %zu to %d: no step\n",
				rank, n, k, next);
			exit(1);
		}
	}
}

/*
 * mlap2p_nccl_ipost on a new child of @comm: the argument errors, -ENOTCONN
 * before the pair is connected, then a ring exchange with receives posted
 * before sends (in parts over the P2P channels), and posted receives
 * meeting plain ncclSend.
 */
static void ipost(ncclComm_t comm, int rank, int nranks)
{
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	struct mlap2p_request *rq[MLAP2P_NCCL_IPOST_MAX], *sq[MLAP2P_NCCL_IPOST_MAX];
	int32_t one = 0;
	ncclComm_t c;
	size_t k, i;
	int nr, ns;

	NCCLCHECK(ncclCommSplit(comm, 0, rank, &c, NULL));
	CHECK(mlap2p_nccl_ipost(NULL, 1, &one, 1, ncclInt32, next, sq,
				&ns) == -EINVAL && ns == 0);
	CHECK(mlap2p_nccl_ipost(c, 2, &one, 1, ncclInt32, next, sq,
				&ns) == -EINVAL && ns == 0);
	CHECK(strstr(ncclGetLastError(c), "send must be 0 or 1"));
	CHECK(mlap2p_nccl_ipost(c, 1, &one, 1, (ncclDataType_t)99, next, sq,
				&ns) == -EINVAL);
	CHECK(strstr(ncclGetLastError(c), "invalid datatype 99"));
	CHECK(mlap2p_nccl_ipost(c, 1, &one, 1, ncclInt32, rank, sq,
				&ns) == -EINVAL);
	CHECK(strstr(ncclGetLastError(c), "invalid peer"));
	CHECK(mlap2p_nccl_ipost(c, 0, &one, 1, ncclInt32, nranks, sq,
				&ns) == -EINVAL);
	CHECK(mlap2p_nccl_ipost(c, 0, &one, 1, ncclInt32, -1, sq,
				&ns) == -EINVAL);
	CHECK(mlap2p_nccl_ipost(c, 1, NULL, 1, ncclInt32, next, sq,
				&ns) == -EINVAL);
	CHECK(strstr(ncclGetLastError(c), "NULL buffer with count 1"));
	CHECK(mlap2p_nccl_ipost(c, 1, &one, 1, ncclInt32, next, NULL,
				&ns) == -EINVAL);
	CHECK(mlap2p_nccl_ipost(c, 1, &one, 1, ncclInt32, next, sq,
				NULL) == -EINVAL);
	CHECK(mlap2p_nccl_ipost(c, 1, &one, 1, ncclInt32, next, sq,
				&ns) == -ENOTCONN && ns == 0);
	CHECK(strstr(ncclGetLastError(c), "is not connected to rank"));
	/* Argument errors and -ENOTCONN leave the communicator usable. */
	ring(c, NULL, 9);
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t cnt = sizes[k];
		int32_t *sb = malloc(cnt * 4), *rb = malloc(cnt * 4);
		int parts = cnt * 4 >= 512 * 1024 ? 2 : 1;

		CHECK(sb && rb);
		for (i = 0; i < cnt; i++) {
			sb[i] = val(rank, i, 10);
			rb[i] = -1;
		}
		CHECK(mlap2p_nccl_ipost(c, 0, rb, cnt, ncclInt32, prev, rq,
					&nr) == 0);
		CHECK(mlap2p_nccl_ipost(c, 1, sb, cnt, ncclInt32, next, sq,
					&ns) == 0);
		if (nr != parts || ns != parts) {
			fprintf(stderr, "rank %d: count %zu: %d and %d parts, "
				"want %d\n", rank, cnt, nr, ns, parts);
			exit(1);
		}
		CHECK(mlap2p_request_waitall(nr, rq) == 0);
		CHECK(mlap2p_request_waitall(ns, sq) == 0);
		for (i = 0; i < cnt; i++)
			if (rb[i] != val(prev, i, 10)) {
				fprintf(stderr, "rank %d count %zu [%zu]: %d\n",
					rank, cnt, i, rb[i]);
				exit(1);
			}
		/* Small ones (they fit the FIFO): a posted receive meets a
		 * plain ncclSend. */
		if (cnt * 4 < 64 * 1024) {
			for (i = 0; i < cnt; i++)
				rb[i] = -1;
			CHECK(mlap2p_nccl_ipost(c, 0, rb, cnt, ncclInt32, prev,
						rq, &nr) == 0 && nr == 1);
			NCCLCHECK(ncclSend(sb, cnt, ncclInt32, next, c, NULL));
			CHECK(mlap2p_request_waitall(nr, rq) == 0);
			for (i = 0; i < cnt; i++)
				CHECK(rb[i] == val(prev, i, 10));
		}
		free(sb);
		free(rb);
	}
	NCCLCHECK(ncclCommDestroy(c));
}

static int rank_main(int rank, int nranks, ncclUniqueId id)
{
	ncclComm_t comm, sub, none;
	cudaStream_t s;
	int n, r, color;
	ncclResult_t st;

	NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));
	CHECK(mlap2p_stream_create(&s) == 0);
	ring(comm, s, 1);
	ring(comm, NULL, 2);
	/* A collective after send/recv connected the pairs, then both in
	 * one group (collectives of one comm keep their order). */
	{
		int32_t a[5], b[5], c[5], d[5], want = nranks * (nranks - 1) / 2, i;

		for (i = 0; i < 5; i++)
			a[i] = rank;
		NCCLCHECK(ncclAllReduce(a, b, 5, ncclInt32, ncclSum, comm, s));
		NCCLCHECK(ncclGroupStart());
		NCCLCHECK(ncclAllReduce(a, c, 5, ncclInt32, ncclMax, comm, s));
		NCCLCHECK(ncclSend(a, 5, ncclInt32, (rank + 1) % nranks, comm, s));
		NCCLCHECK(ncclRecv(d, 5, ncclInt32, (rank + nranks - 1) % nranks,
				   comm, s));
		NCCLCHECK(ncclGroupEnd());
		CHECK(mlap2p_stream_synchronize(s) == 0);
		for (i = 0; i < 5; i++)
			CHECK(b[i] == want && c[i] == nranks - 1 &&
			      d[i] == (rank + nranks - 1) % nranks);
	}

	/* Split: even and odd ranks, keys reversed; rank 3 opts out. */
	color = rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2;
	NCCLCHECK(ncclCommSplit(comm, color, -rank, &sub, NULL));
	if (rank == 3) {
		CHECK(sub == NULL);
	} else {
		int members = 0, above = 0, i;

		for (i = 0; i < nranks; i++)
			if (i != 3 && i % 2 == rank % 2) {
				members++;
				above += i > rank;
			}
		NCCLCHECK(ncclCommCount(sub, &n));
		NCCLCHECK(ncclCommUserRank(sub, &r));
		CHECK(n == members);
		CHECK(r == above);	/* key -rank: highest rank first */
		ring(sub, s, 3);
		ring(sub, NULL, 4);
		NCCLCHECK(ncclCommGetAsyncError(sub, &st));
		CHECK(st == ncclSuccess);
		NCCLCHECK(ncclCommDestroy(sub));
	}
	/* splitShare = 1 (accepted; the child still has FIFOs of its own):
	 * parent and child used in turn keep their messages apart. */
	{
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
		ncclComm_t all;

		cfg.splitShare = 1;
		NCCLCHECK(ncclCommSplit(comm, 0, rank, &all, &cfg));
		ring(all, NULL, 6);
		ring(comm, NULL, 7);
		ring(all, s, 8);
		NCCLCHECK(ncclCommDestroy(all));
	}
	/* Everyone out: a split where nobody takes part. */
	NCCLCHECK(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &none, NULL));
	CHECK(none == NULL);
	ring(comm, s, 5);
	ipost(comm, rank, nranks);
	NCCLCHECK(ncclCommGetAsyncError(comm, &st));
	CHECK(st == ncclSuccess);
	CHECK(mlap2p_stream_destroy(s) == 0);
	NCCLCHECK(ncclCommDestroy(comm));
	return 0;
}

/* Rank 0 tells rank 1 to join through this pipe, made before the fork. */
static int join_pipe[2];

/*
 * Rank 0's non-blocking init cannot end before rank 1 joins, and rank 1
 * joins only when rank 0 has seen mlap2p_nccl_ipost refuse with
 * -EINPROGRESS; then the init ends and the same call connects.
 */
static int init_main(int rank, int nranks, ncclUniqueId id)
{
	struct mlap2p_request *q[MLAP2P_NCCL_IPOST_MAX];
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	int32_t one = 7, got = 0;
	double t0 = nt_now();
	ncclResult_t st;
	ncclComm_t c;
	int n = -1;
	char b = 1;

	if (rank == 1) {
		struct pollfd pfd = { .fd = join_pipe[0], .events = POLLIN };

		/* The parent holds the pipe open too: if rank 0 fails, this
		 * times out rather than waiting for good. */
		close(join_pipe[1]);
		CHECK(poll(&pfd, 1, 150000) == 1);
		CHECK(read(join_pipe[0], &b, 1) == 1);
		NCCLCHECK(ncclCommInitRank(&c, nranks, id, rank));
		NCCLCHECK(ncclRecv(&got, 1, ncclInt32, 0, c, NULL));
		CHECK(got == 7);
		NCCLCHECK(ncclCommDestroy(c));
		return 0;
	}
	close(join_pipe[0]);
	cfg.blocking = 0;
	NCCLEQ(ncclInProgress, ncclCommInitRankConfig(&c, nranks, id, rank,
						      &cfg));
	CHECK(mlap2p_nccl_ipost(c, 1, &one, 1, ncclInt32, 1, q, &n) ==
	      -EINPROGRESS && n == 0);
	CHECK(strstr(ncclGetLastError(c), "init is still running"));
	CHECK(write(join_pipe[1], &b, 1) == 1);
	close(join_pipe[1]);
	/* Poll gently: under valgrind, which runs one thread at a time, a
	 * tight loop here starved the init's own thread until a 20 s bound
	 * failed.  The init ends by itself, in error at the latest after
	 * MLAP2P_BOOTSTRAP_TIMEOUT (120 s); the bound is beyond that. */
	do {
		const struct timespec ms = { 0, 1000000 };

		NCCLCHECK(ncclCommGetAsyncError(c, &st));
		CHECK(st == ncclInProgress || st == ncclSuccess);
		CHECK(nt_now() - t0 < 150);
		if (st == ncclInProgress)
			nanosleep(&ms, NULL);
	} while (st == ncclInProgress);
	NCCLCHECK(ncclSend(&one, 1, ncclInt32, 1, c, NULL));
	NCCLCHECK(ncclCommDestroy(c));
	return 0;
}

/* Four ranks of this one thread: groups across communicators. */
static void one_thread(void)
{
	enum { N = 4 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	int32_t sb[N][64], rb[N][64];
	int i, j;

	NCCLCHECK(ncclCommInitAll(comms, N, NULL));
	for (i = 0; i < N; i++)
		CHECK(mlap2p_stream_create(&s[i]) == 0);
	for (int pass = 0; pass < 2; pass++) {
		for (i = 0; i < N; i++)
			for (j = 0; j < 64; j++) {
				sb[i][j] = val(i, (size_t)j, pass);
				rb[i][j] = -1;
			}
		NCCLCHECK(ncclGroupStart());
		for (i = 0; i < N; i++) {
			NCCLCHECK(ncclSend(sb[i], 64, ncclInt32, (i + 1) % N,
					   comms[i], pass ? NULL : s[i]));
			NCCLCHECK(ncclRecv(rb[i], 64, ncclInt32, (i + N - 1) % N,
					   comms[i], pass ? NULL : s[i]));
		}
		NCCLCHECK(ncclGroupEnd());
		for (i = 0; i < N && !pass; i++)
			CHECK(mlap2p_stream_synchronize(s[i]) == 0);
		for (i = 0; i < N; i++)
			for (j = 0; j < 64; j++)
				CHECK(rb[i][j] == val((i + N - 1) % N, (size_t)j,
						      pass));
	}
	for (i = 0; i < N; i++) {
		CHECK(mlap2p_stream_destroy(s[i]) == 0);
		NCCLCHECK(ncclCommDestroy(comms[i]));
	}
}

int main(void)
{
	nt_env();
	CHECK(nt_run_ranks(5, rank_main) == 0);
	CHECK(pipe(join_pipe) == 0);
	CHECK(nt_run_ranks(2, init_main) == 0);
	close(join_pipe[0]);
	close(join_pipe[1]);
	one_thread();
	printf("nccl_p2p_test: ok\n");
	return 0;
}
