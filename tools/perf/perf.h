/* SPDX-License-Identifier: MIT */
/*
 * tools/perf/perf.h: what mlap2p-perf.c (options, ranks, p2p tests,
 * output) shares with tools/perf/coll.c (the collective tests).  Both
 * build into the one program build/tools/mlap2p-perf (tools/Makefile).
 */
#ifndef MLAP2P_PERF_H
#define MLAP2P_PERF_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

#include <mlap2p/mlap2p.h>

#define MAX_RANKS	64
#define MAX_SIZES	64

enum { TEST_PINGPONG = 1, TEST_SENDRECV = 2, TEST_LATENCY = 4, TEST_COLL = 8 };

/* -t for collectives (o.coll) */
enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER, COLL_BROADCAST,
       COLL_REDUCE, COLL_ALLTOALL, COLL_NUM };

struct opts {
	int tests;
	int coll, dtype, op, root;	/* TEST_COLL: -t, -d, -o, -r */
	int nccl;			/* --nccl: 1 NULL stream, 2 a stream */
	int pair;			/* --pair: mlap2p_* and <nccl.h> bursts */
	int nranks;
	int threads;
	size_t minBytes, maxBytes;
	double factor;
	int proto;
	int registered;
	int check;
	int warmup, iters;
	int ncpus, cpus[MAX_RANKS];
	int ncores, cores[MAX_RANKS];
	int channels;
	const char *json;
	int nnetns, nhosts;		/* emulated hosts (--netns, --hostnames) */
	char *netns[MAX_RANKS], *hosts[MAX_RANKS];
};

/* One result row, written by rank 0. */
struct row {
	int test;
	int proto;
	size_t bytes;
	int iters;
	double usec;		/* per message: one-way (pingpong) or exchange;
				 * a collective: out of place, slowest rank */
	long wrong;
	double baseUsec;	/* latency: the cache-line ping-pong's one-way;
				 * --pair: the mlap2p_* call's time */
	double ratio;		/* latency: median of the bursts' usec / base;
				 * --pair: of the bursts' <nccl.h> / mlap2p_* */
	double lo, hi;		/* --pair: the middle half of those ratios */
	/* TEST_COLL */
	size_t count;		/* the count argument (per rank for AG/RS/A2A) */
	double ipUsec;		/* in place */
	long ipWrong;
};

/* One line of the cache-line ping-pong of -t latency. */
struct pline {
	uint64_t v;
	char pad[120];
} __attribute__((aligned(128)));

/* Shared by every rank: a MAP_SHARED page set before fork. */
struct shared {
	pthread_barrier_t barrier;
	struct mlap2p_unique_id id;
	long wrong[MAX_RANKS];
	double usec[MAX_RANKS];		/* collectives: each rank's own time */
	int failed;
	int nrows;
	struct row rows[2 * MAX_SIZES + 1];
	/* device memory accounting, filled by rank 0 */
	long long devBefore, devAfter;
	int nconns;
	int buffSizes[3];
	int path, read;
	char runtime[16];
	struct pline lat[2];	/* -t latency: rank 0 -> peer, peer -> 0 */
};

extern struct opts o;
extern struct shared *sh;

void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
double now_us(void);
void barrier(void);
size_t next_size(size_t b);
int iters_for(size_t bytes);
void *xbuf(struct mlap2p_comm *comm, size_t bytes);
void xfree(struct mlap2p_comm *comm, void *p);

/* tools/perf/coll.c */
int coll_parse_test(const char *name);		/* COLL_*, or -1 */
int coll_parse_dtype(const char *name);		/* dtype, or -1 */
int coll_parse_op(const char *name);		/* redop, or -1 */
int coll_run(struct mlap2p_comm *comm, int rank);
/* --nccl: the collectives go through <nccl.h> on @ncomm (an ncclComm_t)
 * and, with --nccl=stream, @stream (posted, then synchronized). */
void coll_use_nccl(void *ncomm, void *stream);
void coll_print(void);
void coll_json(FILE *f, const struct row *r, int last);
const char *coll_test_name(int coll);

#endif
