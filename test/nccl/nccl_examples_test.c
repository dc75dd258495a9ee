// SPDX-License-Identifier: GPL-2.0
/*
 * The three examples of NCCL's user guide ("Examples": single process,
 * single thread, multiple devices; one device per process; multiple
 * devices per thread), with host buffers for cudaMalloc, an mlap2p stream
 * for cudaStreamCreate and a pipe for MPI_Bcast; then every other
 * collective, PreMulSum and ncclAvg through <nccl.h>, with exact checks.
 */
#include "nccl_ranks.h"

#define SIZE (256 * 1024)	/* floats per rank */

static void check_sum(const float *buf, size_t n, float want)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (buf[i] != want) {
			fprintf(stderr, "[%zu] = %g, want %g\n", i, buf[i], want);
			exit(1);
		}
}

/* Example 1: one process, one thread, nDev devices. */
static void example1(void)
{
	enum { NDEV = 4 };
	int devs[NDEV] = { 0, 1, 2, 3 }, i;
	ncclComm_t comms[NDEV];
	float *sendbuff[NDEV], *recvbuff[NDEV];
	cudaStream_t s[NDEV];

	for (i = 0; i < NDEV; i++) {
		size_t j;

		sendbuff[i] = malloc(SIZE * sizeof(float));
		recvbuff[i] = calloc(SIZE, sizeof(float));
		CHECK(sendbuff[i] && recvbuff[i]);
		for (j = 0; j < SIZE; j++)
			sendbuff[i][j] = 1.0f;
		CHECK(mlap2p_stream_create(&s[i]) == 0);
	}
	NCCLCHECK(ncclCommInitAll(comms, NDEV, devs));
	NCCLCHECK(ncclGroupStart());
	for (i = 0; i < NDEV; ++i)
		NCCLCHECK(ncclAllReduce((const void *)sendbuff[i],
					(void *)recvbuff[i], SIZE, ncclFloat,
					ncclSum, comms[i], s[i]));
	NCCLCHECK(ncclGroupEnd());
	for (i = 0; i < NDEV; ++i)
		CHECK(mlap2p_stream_synchronize(s[i]) == 0);
	for (i = 0; i < NDEV; ++i) {
		check_sum(recvbuff[i], SIZE, (float)NDEV);
		free(sendbuff[i]);
		free(recvbuff[i]);
		CHECK(mlap2p_stream_destroy(s[i]) == 0);
	}
	for (i = 0; i < NDEV; ++i)
		NCCLCHECK(ncclCommDestroy(comms[i]));
}

/* Every other collective on @comm (rank @r of @n), exact results. */
static void collectives(ncclComm_t comm, int r, int n, cudaStream_t s)
{
	enum { C = 1000 };
	int32_t *a = malloc(C * n * 4), *b = malloc(C * n * 4);
	float f[C], g[C], half = 0.5f;
	ncclRedOp_t pre;
	int i, k;

	CHECK(a && b);
	for (i = 0; i < C; i++)
		a[i] = r * 10 + i;
	/* Broadcast from the last rank, and the legacy in-place ncclBcast. */
	NCCLCHECK(ncclBroadcast(a, b, C, ncclInt32, n - 1, comm, s));
	NCCLCHECK(ncclBcast(a, C, ncclInt32, 0, comm, s));
	CHECK(mlap2p_stream_synchronize(s) == 0);
	for (i = 0; i < C; i++)
		CHECK(b[i] == (n - 1) * 10 + i && a[i] == i);
	/* Reduce (max) to rank 1. */
	for (i = 0; i < C; i++)
		a[i] = (i % n == r) ? 1000 + i : r;
	NCCLCHECK(ncclReduce(a, b, C, ncclInt32, ncclMax, 1 % n, comm, NULL));
	if (r == 1 % n)
		for (i = 0; i < C; i++)
			CHECK(b[i] == 1000 + i);
	/* All-gather, reduce-scatter (sum), all-to-all. */
	for (i = 0; i < C; i++)
		a[i] = r * C + i;
	NCCLCHECK(ncclAllGather(a, b, C, ncclInt32, comm, s));
	CHECK(mlap2p_stream_synchronize(s) == 0);
	for (i = 0; i < C * n; i++)
		CHECK(b[i] == i);
	for (i = 0; i < C * n; i++)
		a[i] = r + i;
	NCCLCHECK(ncclReduceScatter(a, b, C, ncclInt32, ncclSum, comm, s));
	CHECK(mlap2p_stream_synchronize(s) == 0);
	for (i = 0; i < C; i++)
		CHECK(b[i] == n * (r * C + i) + n * (n - 1) / 2);
	for (k = 0; k < n; k++)
		for (i = 0; i < C; i++)
			a[k * C + i] = r * 100000 + k * 1000 + i;
	NCCLCHECK(ncclAlltoAll(a, b, C, ncclInt32, comm, NULL));
	for (k = 0; k < n; k++)
		for (i = 0; i < C; i++)
			CHECK(b[k * C + i] == k * 100000 + r * 1000 + i);
	/* PreMulSum by 0.5 and ncclAvg: exact in binary for these values. */
	for (i = 0; i < C; i++)
		f[i] = (float)(2 * (r + 1) * i);
	NCCLCHECK(ncclRedOpCreatePreMulSum(&pre, &half, ncclFloat,
					   ncclScalarHostImmediate, comm));
	NCCLCHECK(ncclAllReduce(f, g, C, ncclFloat, pre, comm, s));
	CHECK(mlap2p_stream_synchronize(s) == 0);
	NCCLCHECK(ncclRedOpDestroy(pre, comm));
	for (i = 0; i < C; i++)
		CHECK(g[i] == (float)(i * n * (n + 1) / 2));
	for (i = 0; i < C; i++)
		a[i] = (r + 1) * n;
	NCCLCHECK(ncclAllReduce(a, b, C, ncclInt32, ncclAvg, comm, NULL));
	for (i = 0; i < C; i++)
		CHECK(b[i] == (n + 1) * n / 2);
	free(a);
	free(b);
}

/* Example 2: one device per process. */
static int example2(int myRank, int nRanks, ncclUniqueId id)
{
	float *sendbuff = malloc(SIZE * sizeof(float));
	float *recvbuff = calloc(SIZE, sizeof(float));
	ncclComm_t comm;
	cudaStream_t s;
	size_t j;

	CHECK(sendbuff && recvbuff);
	for (j = 0; j < SIZE; j++)
		sendbuff[j] = 1.0f;
	CHECK(mlap2p_stream_create(&s) == 0);
	NCCLCHECK(ncclCommInitRank(&comm, nRanks, id, myRank));
	NCCLCHECK(ncclAllReduce((const void *)sendbuff, (void *)recvbuff,
				SIZE, ncclFloat, ncclSum, comm, s));
	CHECK(mlap2p_stream_synchronize(s) == 0);
	check_sum(recvbuff, SIZE, (float)nRanks);
	collectives(comm, myRank, nRanks, s);
	CHECK(mlap2p_stream_destroy(s) == 0);
	free(sendbuff);
	free(recvbuff);
	NCCLCHECK(ncclCommDestroy(comm));
	return 0;
}

/* Example 3: multiple devices per thread, nDev per process. */
#define NDEV3 2
static int example3(int myRank, int nRanks, ncclUniqueId id)
{
	ncclComm_t comms[NDEV3];
	float *sendbuff[NDEV3], *recvbuff[NDEV3];
	cudaStream_t s[NDEV3];
	int i;

	for (i = 0; i < NDEV3; i++) {
		size_t j;

		sendbuff[i] = malloc(SIZE * sizeof(float));
		recvbuff[i] = calloc(SIZE, sizeof(float));
		CHECK(sendbuff[i] && recvbuff[i]);
		for (j = 0; j < SIZE; j++)
			sendbuff[i][j] = 1.0f;
		CHECK(mlap2p_stream_create(&s[i]) == 0);
	}
	NCCLCHECK(ncclGroupStart());
	for (i = 0; i < NDEV3; i++)
		NCCLCHECK(ncclCommInitRank(comms + i, nRanks * NDEV3, id,
					   myRank * NDEV3 + i));
	NCCLCHECK(ncclGroupEnd());
	NCCLCHECK(ncclGroupStart());
	for (i = 0; i < NDEV3; i++)
		NCCLCHECK(ncclAllReduce((const void *)sendbuff[i],
					(void *)recvbuff[i], SIZE, ncclFloat,
					ncclSum, comms[i], s[i]));
	NCCLCHECK(ncclGroupEnd());
	for (i = 0; i < NDEV3; i++)
		CHECK(mlap2p_stream_synchronize(s[i]) == 0);
	for (i = 0; i < NDEV3; i++) {
		check_sum(recvbuff[i], SIZE, (float)(nRanks * NDEV3));
		free(sendbuff[i]);
		free(recvbuff[i]);
		CHECK(mlap2p_stream_destroy(s[i]) == 0);
	}
	for (i = 0; i < NDEV3; i++)
		NCCLCHECK(ncclCommDestroy(comms[i]));
	return 0;
}

int main(void)
{
	nt_env();
	CHECK(nt_run_ranks(3, example2) == 0);
	fprintf(stderr, "example 2: ok\n");
	CHECK(nt_run_ranks(2, example3) == 0);
	fprintf(stderr, "example 3: ok\n");
	example1();
	printf("nccl_examples_test: ok\n");
	return 0;
}
