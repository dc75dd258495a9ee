/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Rank processes for the <nccl.h> tests: fork the ranks before this
 * process has any thread, then hand each the unique id through a pipe (the
 * MPI_Bcast of NCCL's examples).
 */
#ifndef NCCL_RANKS_H
#define NCCL_RANKS_H

#include "nccl_check.h"

#define NT_MAX_RANKS 8

/* Run @fn(rank, nranks, id) in @n child processes; 0 when all exit 0. */
static inline int nt_run_ranks(int n, int (*fn)(int rank, int nranks,
					      ncclUniqueId id))
{
	int fds[NT_MAX_RANKS][2], r, bad = 0;
	pid_t pids[NT_MAX_RANKS];
	ncclUniqueId id;

	CHECK(n <= NT_MAX_RANKS);
	for (r = 0; r < n; r++) {
		CHECK(pipe(fds[r]) == 0);
		pids[r] = fork();
		CHECK(pids[r] >= 0);
		if (pids[r] == 0) {
			ssize_t got;

			close(fds[r][1]);
			got = read(fds[r][0], &id, sizeof(id));
			if (got != (ssize_t)sizeof(id))
				_exit(90);
			_exit(fn(r, n, id));
		}
		close(fds[r][0]);
	}
	NCCLCHECK(ncclGetUniqueId(&id));
	for (r = 0; r < n; r++) {
		CHECK(write(fds[r][1], &id, sizeof(id)) == (ssize_t)sizeof(id));
		close(fds[r][1]);
	}
	for (r = 0; r < n; r++) {
		int st = nt_wait(pids[r]);

		if (st) {
			fprintf(stderr, "rank %d exited %d\n", r, st);
			bad = 1;
		}
	}
	return bad;
}

#endif
