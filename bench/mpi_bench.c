// SPDX-License-Identifier: MIT
/*
 * bench/mpi_bench: the same two measurements as mlap2p-perf, over MPI, so
 * `make bench` can set Open MPI's shared-memory BTL beside mlap2p in one
 * run.  Built only when mpicc exists (make bench-deps installs it).
 *
 *   mpirun -np 2 mpi_bench [-b MIN] [-e MAX] [-f FACTOR]
 *
 * pingpong: one-way latency, half of an MPI_Send/MPI_Recv round trip.
 * sendrecv: each rank MPI_Sendrecv's to its successor from its
 * predecessor; time per exchange.  Lines: "<test> <bytes> <usec> <GB/s>".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int iters_for(size_t bytes)
{
	long it = (long)((256UL << 20) / (bytes ? bytes : 1));

	return it < 20 ? 20 : it > 20000 ? 20000 : (int)it;
}

int main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64UL << 20, b;
	double factor = 2;
	int rank, n, c, i;
	char *sbuf, *rbuf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	while ((c = getopt(argc, argv, "b:e:f:")) != -1) {
		switch (c) {
		case 'b': minb = strtoull(optarg, NULL, 0); break;
		case 'e': maxb = strtoull(optarg, NULL, 0); break;
		case 'f': factor = atof(optarg); break;
		}
	}
	sbuf = malloc(maxb);
	rbuf = malloc(maxb);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 1, maxb);
	memset(rbuf, 0, maxb);
	for (b = minb; b <= maxb; b = (size_t)(b * factor) > b ? (size_t)(b * factor) : b + 1) {
		int it = iters_for(b), peer = rank ^ 1;
		double t0 = 0;

		MPI_Barrier(MPI_COMM_WORLD);
		for (i = -5; i < it && rank < 2; i++) {
			if (i == 0)
				t0 = MPI_Wtime();
			if (rank == 0) {
				MPI_Send(sbuf, (int)b, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(rbuf, (int)b, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(rbuf, (int)b, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				MPI_Send(sbuf, (int)b, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			}
		}
		if (rank == 0) {
			double us = (MPI_Wtime() - t0) / it / 2 * 1e6;

			printf("pingpong %zu %.4f %.4f\n", b, us, b / us / 1e3);
		}
		if (b == maxb)
			break;
	}
	for (b = minb; b <= maxb; b = (size_t)(b * factor) > b ? (size_t)(b * factor) : b + 1) {
		int it = iters_for(b);
		double t0 = 0;

		MPI_Barrier(MPI_COMM_WORLD);
		for (i = -5; i < it; i++) {
			if (i == 0)
				t0 = MPI_Wtime();
			MPI_Sendrecv(sbuf, (int)b, MPI_BYTE, (rank + 1) % n, 2,
				     rbuf, (int)b, MPI_BYTE, (rank + n - 1) % n, 2,
				     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
		if (rank == 0) {
			double us = (MPI_Wtime() - t0) / it * 1e6;

			printf("sendrecv %zu %.4f %.4f\n", b, us, b / us / 1e3);
		}
		if (b == maxb)
			break;
	}
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
