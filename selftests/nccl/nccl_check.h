/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the <nccl.h> test programs share.  They are written against NCCL's
 * documented API only (plus <mlap2p/stream.h> where a CUDA program would
 * call cudaStreamCreate/cudaStreamSynchronize), are built with
 * `pkg-config --cflags --libs mlap2p-nccl`, and exit 0 (pass), 1 (fail) or
 * 4 (skip), as selftests/mlap2p/run_tests.sh expects.
 */
#ifndef NCCL_CHECK_H
#define NCCL_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#define CHECK(x)							\
	do {								\
		if (!(x)) {						\
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n",	\
				__FILE__, __LINE__, #x);		\
			exit(1);					\
		}							\
	} while (0)

/* Every NCCL call is checked for an exact result. */
#define NCCLEQ(want, call)						\
	do {								\
		ncclResult_t r__ = (call);				\
		if (r__ != (want)) {					\
			fprintf(stderr, "%s:%d: %s = %d (%s), want %d; last error: %s\n", \
				__FILE__, __LINE__, #call, r__,		\
				ncclGetErrorString(r__), (want),	\
				ncclGetLastError(NULL));		\
			exit(1);					\
		}							\
	} while (0)
#define NCCLCHECK(call) NCCLEQ(ncclSuccess, call)

static inline double nt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Small FIFOs and no NET: what the library tests set too. */
static inline void nt_env(void)
{
	setenv("NCCL_LL_BUFFSIZE", "64K", 0);
	setenv("NCCL_LL128_BUFFSIZE", "60K", 0);
	setenv("NCCL_BUFFSIZE", "256K", 0);
	setenv("MLAP2P_NET_DISABLE", "1", 0);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "20s", 0);
	if (!getenv("MLAP2P_RUNTIME") && access("/dev/mlap2p", F_OK))
		setenv("MLAP2P_RUNTIME", "host", 1);
}

/* Wait for a child; 0 when it exited 0. */
static inline int nt_wait(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	fprintf(stderr, "child %d: signal %d\n", (int)pid,
		WIFSIGNALED(st) ? WTERMSIG(st) : -1);
	return 128;
}

#endif
