// SPDX-License-Identifier: MIT
/*
 * bench/mpi_coll: MPI's six collectives over the same sizes as
 * mlap2p-perf's collective tests, fp32 sum, so `make bench` can set Open
 * MPI beside mlap2p in one run.  Built only when mpicc exists (make
 * bench-deps installs it).
 *
 *   mpirun -np N mpi_coll [-b MIN] [-e MAX] [-f FACTOR] [-t TEST] [-m]
 *
 * SIZE is nccl-tests' size column, as in mlap2p-perf: the larger buffer of
 * one rank, so all-gather sends SIZE/N, reduce-scatter receives SIZE/N
 * (MPI_Reduce_scatter_block) and all-to-all moves SIZE/N to every peer.
 * Out of place, root 0; every buffer is allocated once, before the loop.
 * The time is the mean per call over the timed loop of the slowest rank
 * (MPI_Reduce, MPI_MAX).  Lines: "<test> <bytes> <count> <usec>".
 *
 * -m raises glibc's mmap and trim thresholds to 1 GiB (mallopt) before
 * MPI_Init: Open MPI's all-reduce allocates a full-size scratch buffer on
 * every call, which above glibc's (adaptive, at most 32 MiB) threshold is
 * an mmap, 8192 page faults and a munmap per call: its 32 MiB cliff
 * (collectives-anchors.md 3.8).  -t runs one test only.
 */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { AR, AG, RS, BC, RD, A2A, NTESTS };
static const char *const names[NTESTS] = {
	"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
	"alltoall",
};

static int iters_for(size_t bytes)
{
	long it = (long)((256UL << 20) / (bytes ? bytes : 1));

	return it < 20 ? 20 : it > 20000 ? 20000 : (int)it;
}

static void one(int t, float *s, float *r, int count)
{
	switch (t) {
	case AR:
		MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case AG:
		MPI_Allgather(s, count, MPI_FLOAT, r, count, MPI_FLOAT,
			      MPI_COMM_WORLD);
		break;
	case RS:
		MPI_Reduce_scatter_block(s, r, count, MPI_FLOAT, MPI_SUM,
					 MPI_COMM_WORLD);
		break;
	case BC:
		MPI_Bcast(s, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	case RD:
		MPI_Reduce(s, r, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
		break;
	default:
		MPI_Alltoall(s, count, MPI_FLOAT, r, count, MPI_FLOAT,
			     MPI_COMM_WORLD);
	}
}

static size_t next(size_t b, double factor)
{
	size_t n = (size_t)(b * factor);

	return n > b ? n : b + 1;
}

int main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64UL << 20, b, i;
	double factor = 2;
	int rank, n, c, t, only = -1, raise = 0;
	float *sbuf, *rbuf;

	/* before MPI_Init: glibc reads nothing from argv, so look now */
	for (c = 1; c < argc; c++)
		if (!strcmp(argv[c], "-m"))
			raise = 1;
	if (raise) {
		mallopt(M_MMAP_THRESHOLD, 1 << 30);
		mallopt(M_TRIM_THRESHOLD, 1 << 30);
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	while ((c = getopt(argc, argv, "b:e:f:t:m")) != -1) {
		switch (c) {
		case 'b': minb = strtoull(optarg, NULL, 0); break;
		case 'e': maxb = strtoull(optarg, NULL, 0); break;
		case 'f': factor = atof(optarg); break;
		case 'm': break;
		case 't':
			for (t = 0; t < NTESTS; t++)
				if (!strcmp(optarg, names[t]))
					only = t;
			if (only < 0)
				MPI_Abort(MPI_COMM_WORLD, 2);
			break;
		}
	}
	sbuf = malloc(maxb);
	rbuf = malloc(maxb);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (i = 0; i < maxb / sizeof(float); i++) {
		sbuf[i] = (float)(i & 255);
		rbuf[i] = 0;
	}
	if (rank == 0)
		printf("# mpi_coll: %d ranks, fp32 sum, root 0, out of place, mmap threshold %s\n",
		       n, raise ? "raised to 1 GiB (mallopt)" : "glibc's default");
	for (t = 0; t < NTESTS; t++) {
		int blocks = t == AG || t == RS || t == A2A ? n : 1;

		if (only >= 0 && t != only)
			continue;
		for (b = minb; b <= maxb; b = next(b, factor)) {
			int count = (int)(b / sizeof(float) / blocks);
			size_t bytes = (size_t)count * sizeof(float) * blocks;
			int it = iters_for(bytes), k;
			double t0 = 0, us, worst;

			MPI_Barrier(MPI_COMM_WORLD);
			for (k = -5; k < it; k++) {
				if (k == 0)
					t0 = MPI_Wtime();
				one(t, sbuf, rbuf, count);
			}
			us = (MPI_Wtime() - t0) / it * 1e6;
			MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0,
				   MPI_COMM_WORLD);
			if (rank == 0)
				printf("%s %zu %d %.4f\n", names[t], bytes,
				       count, worst);
			if (b == maxb)
				break;
		}
	}
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
