// SPDX-License-Identifier: MIT
/*
 * mlap2p-perf: latency and bandwidth of the mlap2p data plane, in the style
 * of nccl-tests.
 *
 *   mlap2p-perf [-t pingpong|sendrecv|all|latency|COLLECTIVE] [-n RANKS]
 *               [--threads] [-d TYPE] [-o OP] [-r ROOT]
 *               [-b MIN] [-e MAX] [-f FACTOR] [-p auto|LL|LL128|SIMPLE]
 *               [-R] [--cpus 0,1] [--cores 0,1] [-c] [-w WARMUP] [-i ITERS]
 *               [--json FILE] [--netns NS0,NS1 [--hostnames H0,H1]]
 *
 * Ranks are processes (default) or threads of one process.  pingpong sends
 * a message from rank 0 to its ring neighbour and back; the figure is the
 * one-way latency, half the round trip.  sendrecv makes every rank send to
 * its ring successor and receive from its predecessor at once (a group);
 * the figure is the time per exchange.  algbw = bytes / time; for both
 * tests busbw = algbw (as nccl-tests' sendrecv).  The collectives
 * (allreduce, allgather, reducescatter, broadcast, reduce, alltoall) are
 * in tools/perf/coll.c, with nccl-tests' columns and bandwidths.
 *
 * Emulated hosts (the NET transport, docs/net.md): --netns puts rank i in
 * network namespace LIST[i % len] (`ip netns` names) and --hostnames gives
 * it a UTS namespace named LIST[i % len], so ranks on different "hosts"
 * connect through NET.  Set NCCL_COMM_ID to an address in rank 0's
 * namespace: rank 0 hosts the bootstrap root there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/mlap2p.h>
#include <mlap2p/dataplane.h>
#include <mlap2p/mlap2p.h>
#include <mlap2p/stream.h>
#include <nccl/nccl.h>

#include "perf/perf.h"

/* -t latency: bursts of each kind, alternating; round trips per burst. */
#define LAT_BURSTS	51
#define LAT_PER_BURST	2000

struct opts o;
struct shared *sh;

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("mlap2p-perf: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

void barrier(void)
{
	pthread_barrier_wait(&sh->barrier);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v < 0)
		die("bad size '%s'", s);
	return (size_t)v;
}

static int parse_list(const char *s, int *out, int max)
{
	int n = 0;

	while (*s && n < max) {
		char *end;

		out[n++] = (int)strtol(s, &end, 10);
		if (end == s || (*end && *end != ','))
			die("bad list '%s'", s);
		s = *end ? end + 1 : end;
	}
	return n;
}

/* "a,b,c" -> strings (the argument is kept and cut in place). */
static int parse_names(char *s, char **out, int max)
{
	int n = 0;
	char *save = NULL, *tok;

	for (tok = strtok_r(s, ",", &save); tok && n < max;
	     tok = strtok_r(NULL, ",", &save))
		out[n++] = tok;
	if (!n)
		die("bad list '%s'", s);
	return n;
}

/* Move this rank process onto its emulated host (--netns, --hostnames). */
static void enter_host(int rank)
{
	if (o.nnetns) {
		const char *ns = o.netns[rank % o.nnetns];
		char path[256];
		int fd;

		snprintf(path, sizeof(path), "/run/netns/%s", ns);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET))
			die("rank %d: cannot enter network namespace %s: %s",
			    rank, ns, strerror(errno));
		close(fd);
	}
	if (o.nhosts) {
		const char *h = o.hosts[rank % o.nhosts];

		if (unshare(CLONE_NEWUTS) || sethostname(h, strlen(h)))
			die("rank %d: cannot become host %s: %s", rank, h,
			    strerror(errno));
	}
}

/* ---- data ---- */

static void fill(unsigned char *buf, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	x ^= x << 13;
	for (; i < n; i++)
		buf[i] = (unsigned char)(x >> ((i & 7) * 8));
}

static long count_wrong(const unsigned char *got, unsigned char *scratch,
			size_t n, uint64_t seed)
{
	long wrong = 0;
	size_t i;

	fill(scratch, n, seed);
	for (i = 0; i < n; i++)
		wrong += got[i] != scratch[i];
	return wrong;
}

static uint64_t seed_of(int from, size_t bytes, int iter)
{
	return ((uint64_t)from << 48) ^ ((uint64_t)bytes << 8) ^ (uint64_t)iter;
}

/* ---- device memory per connection ---- */

/* Bytes held by live regions on every MLA the module knows; -1 without it. */
static long long module_used(void)
{
	struct mlap2p_info info;
	long long used = 0;
	unsigned int d, n;
	int fd = open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -1;
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, MLAP2P_IOC_GET_INFO, &info)) {
		close(fd);
		return -1;
	}
	n = info.num_devices * (info.pod_nodes ? info.pod_nodes : 1);
	for (d = 0; d < n; d++) {
		struct mlap2p_dev_info di;

		memset(&di, 0, sizeof(di));
		di.device = d;
		if (!ioctl(fd, MLAP2P_IOC_DEV_INFO, &di))
			used += (long long)di.used;
	}
	close(fd);
	return used;
}

/* ---- one rank ---- */

struct rank_ctx {
	int rank;
	int ret;
};

size_t next_size(size_t b)
{
	size_t n = (size_t)((double)b * o.factor);

	return n > b ? n : b + 1;
}

int iters_for(size_t bytes)
{
	long it;

	if (o.iters)
		return o.iters;
	/* About 256 MiB per size, at least 20, at most 20000. */
	it = (long)((256UL << 20) / (bytes ? bytes : 1));
	if (it < 20)
		it = 20;
	if (it > 20000)
		it = 20000;
	return (int)it;
}

void *xbuf(struct mlap2p_comm *comm, size_t bytes)
{
	void *p = NULL;

	if (!bytes)
		bytes = 1;
	if (o.registered) {
		if (mlap2p_mem_alloc(comm, bytes, &p))
			die("mlap2p_mem_alloc(%zu): %s", bytes, mlap2p_last_error());
		return p;
	}
	p = aligned_alloc(4096, (bytes + 4095) & ~4095UL);
	if (!p)
		die("out of memory");
	memset(p, 0, bytes);
	return p;
}

void xfree(struct mlap2p_comm *comm, void *p)
{
	if (o.registered)
		mlap2p_mem_free(comm, p);
	else
		free(p);
}

static void record(int test, int proto, size_t bytes, int iters, double usec)
{
	struct row *r = &sh->rows[sh->nrows++];
	long wrong = 0;
	int i;

	for (i = 0; i < o.nranks; i++)
		wrong += sh->wrong[i];
	r->test = test;
	r->proto = proto;
	r->bytes = bytes;
	r->iters = iters;
	r->usec = usec;
	r->wrong = o.check ? wrong : -1;
}

#define CHECK(call)							\
	do {								\
		int ret__ = (call);					\
		if (ret__) {						\
			fprintf(stderr, "mlap2p-perf: rank %d: %s: %s (%s)\n", \
				rank, #call, mlap2p_strerror(ret__),	\
				mlap2p_last_error());			\
			sh->failed = 1;					\
			return ret__;					\
		}							\
	} while (0)

/* One round trip of @b bytes: rank 0 sends first, its peer answers. */
static int round_trip(struct mlap2p_comm *comm, int rank, int peer,
		      unsigned char *sbuf, unsigned char *rbuf, size_t b)
{
	int ret;

	if (rank == 0) {
		ret = mlap2p_send(comm, sbuf, b, peer);
		return ret ? ret : mlap2p_recv(comm, rbuf, b, peer);
	}
	ret = mlap2p_recv(comm, rbuf, b, peer);
	return ret ? ret : mlap2p_send(comm, sbuf, b, peer);
}

static int run_pingpong(struct mlap2p_comm *comm, int rank, int peer0,
			unsigned char *sbuf, unsigned char *rbuf,
			unsigned char *scratch)
{
	size_t b;

	for (b = o.minBytes; b <= o.maxBytes; b = next_size(b)) {
		int iters = iters_for(b), i, proto;
		int active = rank == 0 || rank == peer0;
		int peer = rank == 0 ? peer0 : 0;
		double t0 = 0, t1;

		proto = mlap2p_proto_for(comm, b);
		sh->wrong[rank] = 0;
		barrier();
		if (active && !o.check)
			fill(sbuf, b, seed_of(rank, b, 0));
		for (i = -o.warmup; active && i < iters; i++) {
			if (i == 0)
				t0 = now_us();
			if (o.check)
				fill(sbuf, b, seed_of(rank, b, i + o.warmup));
			CHECK(round_trip(comm, rank, peer, sbuf, rbuf, b));
			if (o.check)
				sh->wrong[rank] += count_wrong(rbuf, scratch, b,
						seed_of(peer, b, i + o.warmup));
		}
		t1 = now_us();
		barrier();
		if (rank == 0)
			record(TEST_PINGPONG, proto, b, iters,
			       (t1 - t0) / iters / 2);
		if (b == o.maxBytes)
			break;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/*
 * The cache-line ping-pong; 0, or -1 if another rank failed meanwhile.
 * It yields after a while (as the library's waits do), so that two ranks
 * sharing one CPU still take turns.
 */
static int line_pingpong(int rank, uint64_t seq)
{
	uint64_t *out = &sh->lat[rank != 0].v, *in = &sh->lat[rank == 0].v;
	unsigned long spins = 0;

	if (rank == 0)
		__atomic_store_n(out, seq, __ATOMIC_RELEASE);
	while (__atomic_load_n(in, __ATOMIC_ACQUIRE) != seq) {
		if (++spins < 4096)
			continue;
		sched_yield();
		if (__atomic_load_n(&sh->failed, __ATOMIC_RELAXED))
			return -1;
	}
	if (rank != 0)
		__atomic_store_n(out, seq, __ATOMIC_RELEASE);
	return 0;
}

/*
 * -t latency: the one-way latency of the smallest size beside a plain
 * cache-line ping-pong (bench/pingpong.c's) between the same two ranks,
 * in alternating bursts, so that both meet the same CPU placement and the
 * same load; the ratio is the median of the bursts' ratios.  On a shared
 * or virtual machine the placement of two vCPUs changes from one run to
 * the next, which makes ratios of separate runs meaningless.
 */
static int run_latency(struct mlap2p_comm *comm, int rank, int peer0,
		       unsigned char *sbuf, unsigned char *rbuf)
{
	double lib[LAT_BURSTS], base[LAT_BURSTS], ratio[LAT_BURSTS];
	int per = o.iters ? o.iters : LAT_PER_BURST;
	int active = rank == 0 || rank == peer0;
	int peer = rank == 0 ? peer0 : 0;
	size_t b = o.minBytes;
	uint64_t seq = 0;
	int k, i;

	sh->wrong[rank] = 0;
	barrier();
	fill(sbuf, b, seed_of(rank, b, 0));
	for (k = -1; active && k < LAT_BURSTS; k++) {	/* -1: warm-up */
		double t0, t1, t2;

		t0 = now_us();
		for (i = 0; i < per; i++)
			CHECK(round_trip(comm, rank, peer, sbuf, rbuf, b));
		t1 = now_us();
		for (i = 0; i < per; i++)
			if (line_pingpong(rank, ++seq))
				return -1;
		t2 = now_us();
		if (k < 0)
			continue;
		lib[k] = (t1 - t0) / per / 2;
		base[k] = (t2 - t1) / per / 2;
		ratio[k] = lib[k] / base[k];
	}
	barrier();
	if (rank == 0) {
		struct row *r = &sh->rows[sh->nrows];

		record(TEST_LATENCY, mlap2p_proto_for(comm, b), b,
		       per * LAT_BURSTS, median(lib, LAT_BURSTS));
		r->baseUsec = median(base, LAT_BURSTS);
		r->ratio = median(ratio, LAT_BURSTS);
	}
	return 0;
}

static int run_sendrecv(struct mlap2p_comm *comm, int rank, int prev,
			int next, unsigned char *sbuf, unsigned char *rbuf,
			unsigned char *scratch)
{
	size_t b;

	for (b = o.minBytes; b <= o.maxBytes; b = next_size(b)) {
		int iters = iters_for(b), i, proto;
		double t0 = 0, t1;

		proto = mlap2p_proto_for(comm, b);
		sh->wrong[rank] = 0;
		if (!o.check)
			fill(sbuf, b, seed_of(rank, b, 0));
		barrier();
		for (i = -o.warmup; i < iters; i++) {
			if (i == 0)
				t0 = now_us();
			if (o.check)
				fill(sbuf, b, seed_of(rank, b, i + o.warmup));
			CHECK(mlap2p_group_start());
			CHECK(mlap2p_send(comm, sbuf, b, next));
			CHECK(mlap2p_recv(comm, rbuf, b, prev));
			CHECK(mlap2p_group_end());
			if (o.check)
				sh->wrong[rank] += count_wrong(rbuf, scratch, b,
						seed_of(prev, b, i + o.warmup));
		}
		t1 = now_us();
		barrier();
		if (rank == 0)
			record(TEST_SENDRECV, proto, b, iters, (t1 - t0) / iters);
		if (b == o.maxBytes)
			break;
	}
	return 0;
}

static int rank_main(int rank)
{
	ncclComm_t ncomm = NULL;
	cudaStream_t nstream = NULL;
	struct mlap2p_comm *comm;
	struct mlap2p_conn_desc desc;
	unsigned char *sbuf, *rbuf, *scratch;
	int prev, next, core, peer0, ret;
	int order[MAX_RANKS];

	enter_host(rank);
	if (o.ncpus) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpus[rank % o.ncpus], &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			fprintf(stderr, "mlap2p-perf: rank %d: cannot pin to cpu %d\n",
				rank, o.cpus[rank % o.ncpus]);
	}
	core = o.ncores ? o.cores[rank % o.ncores] : rank;
	if (o.nccl) {
		/* --nccl: the communicator is an ncclComm_t (same id bytes);
		 * the setup below uses the libmlap2p comm under it. */
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
		ncclUniqueId nid;

		memcpy(&nid, &sh->id, sizeof(nid));
		cfg.mlap2pCore = core;
		if (ncclCommInitRankConfig(&ncomm, o.nranks, nid, rank, &cfg))
			die("rank %d: ncclCommInitRankConfig: %s", rank,
			    ncclGetLastError(NULL));
		comm = mlap2p_nccl_comm(ncomm);
		if (o.nccl == 2 && mlap2p_stream_create(&nstream))
			die("rank %d: mlap2p_stream_create failed", rank);
		coll_use_nccl(ncomm, nstream);
	} else {
		CHECK(mlap2p_comm_init_rank(&comm, o.nranks, &sh->id, rank,
					    core));
	}
	if (rank == 0)
		snprintf(sh->runtime, sizeof(sh->runtime), "%s",
			 mlap2p_comm_runtime(comm));
	barrier();
	if (rank == 0)
		sh->devBefore = module_used();
	barrier();
	CHECK(mlap2p_connect_ring(comm, o.channels));
	CHECK(mlap2p_ring_get(comm, 0, order, &prev, &next));
	/* pingpong: rank 0 and its successor, both ways. */
	peer0 = order[1 % o.nranks];
	if ((o.tests & (TEST_PINGPONG | TEST_LATENCY)) && o.nranks > 2 &&
	    (rank == 0 || rank == peer0)) {
		int other = rank == 0 ? peer0 : 0;

		if (rank == 0)
			CHECK(mlap2p_connect_peers(comm, 1, 1, &other, 0, NULL));
		else
			CHECK(mlap2p_connect_peers(comm, 1, 0, NULL, 1, &other));
	}
	barrier();
	if (rank == 0) {
		int p;

		sh->devAfter = module_used();
		sh->nconns = o.nranks * o.channels +
			     ((o.tests & (TEST_PINGPONG | TEST_LATENCY)) &&
			      o.nranks > 2);
		if (!mlap2p_conn_get(comm, 0, next, MLAP2P_DIR_SEND, &desc)) {
			for (p = 0; p < 3; p++)
				sh->buffSizes[p] = desc.buff_sizes[p];
			sh->path = desc.path;
			sh->read = desc.read;
		}
	}
	if (o.proto != MLAP2P_PROTO_AUTO)
		CHECK(mlap2p_set_proto(comm, o.proto));
	if (o.tests & TEST_COLL) {
		ret = coll_run(comm, rank);
		goto done;
	}
	sbuf = xbuf(comm, o.maxBytes);
	rbuf = xbuf(comm, o.maxBytes);
	scratch = o.check ? malloc(o.maxBytes ? o.maxBytes : 1) : NULL;
	ret = 0;
	if (o.tests & TEST_PINGPONG)
		ret = run_pingpong(comm, rank, peer0, sbuf, rbuf, scratch);
	if (!ret && (o.tests & TEST_SENDRECV))
		ret = run_sendrecv(comm, rank, prev, next, sbuf, rbuf, scratch);
	if (!ret && (o.tests & TEST_LATENCY))
		ret = run_latency(comm, rank, peer0, sbuf, rbuf);
	free(scratch);
	xfree(comm, sbuf);
	xfree(comm, rbuf);
done:
	if (nstream)
		mlap2p_stream_destroy(nstream);
	if (ncomm) {
		if (ret)
			ncclCommAbort(ncomm);
		else if (ncclCommDestroy(ncomm))
			die("rank %d: ncclCommDestroy: %s", rank,
			    ncclGetLastError(NULL));
		return ret;
	}
	if (ret) {
		mlap2p_comm_abort(comm);
		return ret;
	}
	CHECK(mlap2p_comm_destroy(comm));
	return 0;
}

static void *rank_thread(void *arg)
{
	struct rank_ctx *c = arg;

	c->ret = rank_main(c->rank);
	return NULL;
}

/* ---- output ---- */

static const char *test_name(int t)
{
	return t == TEST_PINGPONG ? "pingpong" :
	       t == TEST_LATENCY ? "latency" : "sendrecv";
}

static void print_rows(void)
{
	int i, last = 0;

	if (o.tests & TEST_COLL) {
		coll_print();
		return;
	}

	for (i = 0; i < sh->nrows; i++) {
		const struct row *r = &sh->rows[i];
		double gbps = r->usec > 0 ? r->bytes / r->usec / 1e3 : 0;

		if (r->test == TEST_LATENCY) {
			printf("#\n# latency: one-way, beside a cache-line ping-pong between the same ranks\n"
			       "# (%d alternating bursts of %d round trips each; medians)\n",
			       LAT_BURSTS, r->iters / LAT_BURSTS);
			printf("# %12s %8s %12s %12s %8s\n", "size(B)", "proto",
			       "time(us)", "line(us)", "ratio");
			printf("  %12zu %8s %12.3f %12.3f %8.3f\n", r->bytes,
			       mlap2p_proto_name(r->proto), r->usec,
			       r->baseUsec, r->ratio);
			last = r->test;
			continue;
		}
		if (r->test != last) {
			printf("#\n# %s%s\n", test_name(r->test),
			       r->test == TEST_PINGPONG ? ": one-way latency (half the round trip)" :
			       ": every rank sends to its successor and receives from its predecessor");
			printf("# %12s %8s %7s %12s %12s %12s %8s\n", "size(B)",
			       "proto", "iters", "time(us)", "algbw(GB/s)",
			       "busbw(GB/s)", "#wrong");
			last = r->test;
		}
		char wrong[24] = "N/A";

		if (r->wrong >= 0)
			snprintf(wrong, sizeof(wrong), "%ld", r->wrong);
		printf("  %12zu %8s %7d %12.3f %12.3f %12.3f %8s\n", r->bytes,
		       mlap2p_proto_name(r->proto), r->iters, r->usec, gbps,
		       gbps, wrong);
	}
}

static int write_json(const char *path)
{
	FILE *f = fopen(path, "w");
	int i;

	if (!f)
		return -errno;
	fprintf(f, "{\n  \"ranks\": %d,\n  \"mode\": \"%s\",\n  \"runtime\": \"%s\",\n"
		"  \"registered\": %s,\n  \"checked\": %s,\n  \"buff_sizes\": [%d, %d, %d],\n"
		"  \"dev_mem_per_conn\": %lld,\n  \"results\": [\n",
		o.nranks, o.threads ? "threads" : "processes", sh->runtime,
		o.registered ? "true" : "false",
		o.check || (o.tests & TEST_COLL) ? "true" : "false",
		sh->buffSizes[0],
		sh->buffSizes[1], sh->buffSizes[2],
		sh->devBefore >= 0 && sh->nconns ?
		(sh->devAfter - sh->devBefore) / sh->nconns : -1LL);
	for (i = 0; i < sh->nrows; i++) {
		const struct row *r = &sh->rows[i];
		double gbps = r->usec > 0 ? r->bytes / r->usec / 1e3 : 0;

		char extra[96] = "";

		if (r->test == TEST_COLL) {
			coll_json(f, r, i + 1 == sh->nrows);
			continue;
		}
		if (r->test == TEST_LATENCY)
			snprintf(extra, sizeof(extra),
				 ", \"line_us\": %.4f, \"ratio\": %.4f",
				 r->baseUsec, r->ratio);
		fprintf(f, "    {\"test\": \"%s\", \"proto\": \"%s\", \"bytes\": %zu, "
			"\"lat_us\": %.4f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, "
			"\"wrong\": %ld%s}%s\n", test_name(r->test),
			mlap2p_proto_name(r->proto), r->bytes, r->usec, gbps,
			gbps, r->wrong < 0 ? 0 : r->wrong, extra,
			i + 1 < sh->nrows ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	return fclose(f) ? -errno : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: mlap2p-perf [options]\n"
"  -t, --test T          pingpong, sendrecv, all (the two; default) or\n"
"                        latency: the smallest size's one-way latency beside\n"
"                        a cache-line ping-pong of the same ranks, in\n"
"                        alternating bursts (-i: round trips per burst)\n"
"                        or a collective as nccl-tests: allreduce, allgather,\n"
"                        reducescatter, broadcast, reduce, alltoall (sizes\n"
"                        are totals; always checked once per size)\n"
"  -d, --datatype T      collectives: int8 uint8 int32 uint32 int64 uint64\n"
"                        float16|half float32|float float64|double bfloat16\n"
"                        fp8_e4m3|f8e4m3 fp8_e5m2|f8e5m2 (default float32)\n"
"  -o, --op OP           collectives: sum prod max min avg (default sum)\n"
"  -r, --root R          broadcast and reduce: root rank (default 0)\n"
"  -n, --nranks N        ranks (default 2)\n"
"      --threads         ranks are threads of one process (default processes)\n"
"  -b, --minbytes B      smallest message (default 8; K, M, G suffixes)\n"
"  -e, --maxbytes B      largest message (default 64M)\n"
"  -f, --stepfactor F    size multiplier (default 2)\n"
"  -p, --proto P         auto, LL, LL128 or SIMPLE (default auto: by size)\n"
"  -R, --registered      buffers from mlap2p_mem_alloc (single copy)\n"
"      --cpus LIST       pin rank i to cpu LIST[i %% len]\n"
"      --cores LIST      rank i runs on logical core LIST[i %% len] (default i)\n"
"  -C, --channels N      ring channels to connect (default 1)\n"
"  -c, --check           check every byte (#wrong column)\n"
"  -w, --warmup N        warm-up iterations per size (default 5)\n"
"  -i, --iters N         timed iterations per size (default: ~256 MiB, 20..20000)\n"
"      --json FILE       also write the results as JSON\n"
"      --netns LIST      rank i runs in network namespace LIST[i %% len]\n"
"      --hostnames LIST  ... and in a UTS namespace named LIST[i %% len]\n"
"                        (emulated hosts; set NCCL_COMM_ID in rank 0's)\n"
"      --nccl[=null|stream]  collectives through <nccl.h>: on the NULL\n"
"                        stream, or posted to a stream and synchronized\n"
"                        after each call (what the stream costs)\n"
"      --pair            with --nccl: each size as 31 alternating bursts of\n"
"                        the mlap2p_* call and the <nccl.h> call in the\n"
"                        same processes (-i calls a burst; default an\n"
"                        eighth of the usual), their times and ratio\n"
"  -h, --help\n");
}

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "test", 1, NULL, 't' }, { "nranks", 1, NULL, 'n' },
		{ "threads", 0, NULL, 'T' }, { "minbytes", 1, NULL, 'b' },
		{ "maxbytes", 1, NULL, 'e' }, { "stepfactor", 1, NULL, 'f' },
		{ "proto", 1, NULL, 'p' }, { "registered", 0, NULL, 'R' },
		{ "cpus", 1, NULL, 'P' }, { "cores", 1, NULL, 'K' },
		{ "channels", 1, NULL, 'C' }, { "check", 0, NULL, 'c' },
		{ "warmup", 1, NULL, 'w' }, { "iters", 1, NULL, 'i' },
		{ "json", 1, NULL, 'J' }, { "help", 0, NULL, 'h' },
		{ "netns", 1, NULL, 'N' }, { "hostnames", 1, NULL, 'H' },
		{ "datatype", 1, NULL, 'd' }, { "op", 1, NULL, 'o' },
		{ "root", 1, NULL, 'r' }, { "nccl", 2, NULL, 'X' },
		{ "pair", 0, NULL, 'Q' }, { NULL, 0, NULL, 0 },
	};
	int c;

	o.tests = TEST_PINGPONG | TEST_SENDRECV;
	o.nranks = 2;
	o.minBytes = 8;
	o.maxBytes = 64UL << 20;
	o.factor = 2;
	o.proto = MLAP2P_PROTO_AUTO;
	o.warmup = 5;
	o.channels = 1;
	o.dtype = coll_parse_dtype("float32");
	o.op = coll_parse_op("sum");
	while ((c = getopt_long(argc, argv, "t:n:b:e:f:p:RC:cw:i:d:o:r:h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "pingpong"))
				o.tests = TEST_PINGPONG;
			else if (!strcmp(optarg, "sendrecv"))
				o.tests = TEST_SENDRECV;
			else if (!strcmp(optarg, "latency"))
				o.tests = TEST_LATENCY;
			else if (!strcmp(optarg, "all"))
				o.tests = TEST_PINGPONG | TEST_SENDRECV;
			else if ((o.coll = coll_parse_test(optarg)) >= 0)
				o.tests = TEST_COLL;
			else
				die("unknown test '%s'", optarg);
			break;
		case 'n': o.nranks = atoi(optarg); break;
		case 'T': o.threads = 1; break;
		case 'b': o.minBytes = parse_size(optarg); break;
		case 'e': o.maxBytes = parse_size(optarg); break;
		case 'f': o.factor = atof(optarg); break;
		case 'p':
			if (!strcasecmp(optarg, "auto"))
				o.proto = MLAP2P_PROTO_AUTO;
			else if (!strcasecmp(optarg, "LL"))
				o.proto = MLAP2P_PROTO_LL;
			else if (!strcasecmp(optarg, "LL128"))
				o.proto = MLAP2P_PROTO_LL128;
			else if (!strcasecmp(optarg, "SIMPLE"))
				o.proto = MLAP2P_PROTO_SIMPLE;
			else
				die("unknown protocol '%s'", optarg);
			break;
		case 'R': o.registered = 1; break;
		case 'P': o.ncpus = parse_list(optarg, o.cpus, MAX_RANKS); break;
		case 'K': o.ncores = parse_list(optarg, o.cores, MAX_RANKS); break;
		case 'C': o.channels = atoi(optarg); break;
		case 'c': o.check = 1; break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'i': o.iters = atoi(optarg); break;
		case 'J': o.json = optarg; break;
		case 'N': o.nnetns = parse_names(optarg, o.netns, MAX_RANKS); break;
		case 'H': o.nhosts = parse_names(optarg, o.hosts, MAX_RANKS); break;
		case 'd':
			o.dtype = coll_parse_dtype(optarg);
			if (o.dtype < 0)
				die("unknown datatype '%s'", optarg);
			break;
		case 'o':
			o.op = coll_parse_op(optarg);
			if (o.op < 0)
				die("unknown reduction '%s'", optarg);
			break;
		case 'r': o.root = atoi(optarg); break;
		case 'X':
			if (!optarg || !strcmp(optarg, "null"))
				o.nccl = 1;
			else if (!strcmp(optarg, "stream"))
				o.nccl = 2;
			else
				die("--nccl takes null or stream, not '%s'", optarg);
			break;
		case 'Q': o.pair = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		usage(stderr);
		exit(2);
	}
	if (o.nranks < 2 || o.nranks > MAX_RANKS)
		die("--nranks must be 2..%d", MAX_RANKS);
	if (o.nccl && !(o.tests & TEST_COLL))
		die("--nccl drives the collective tests (-t allreduce ...)");
	if (o.pair && !o.nccl)
		die("--pair compares the two APIs: give --nccl or --nccl=stream");
	if (o.root < 0 || o.root >= o.nranks)
		die("--root must be a rank, 0..%d", o.nranks - 1);
	if (o.threads && (o.nnetns || o.nhosts))
		die("--netns and --hostnames need ranks as processes");
	if (o.minBytes > o.maxBytes || o.factor < 1 || o.channels < 1 ||
	    o.warmup < 0 || o.iters < 0)
		die("bad sizes, factor, channels or iteration counts");
}

int main(int argc, char **argv)
{
	pthread_barrierattr_t ba;
	pid_t pids[MAX_RANKS];
	int r, failed = 0;

	parse(argc, argv);
	if (!getenv("MLAP2P_RUNTIME") && access(MLAP2P_DEVICE_PATH, F_OK))
		setenv("MLAP2P_RUNTIME", "host", 1);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->barrier, &ba, o.nranks);
	if (mlap2p_get_unique_id(&sh->id))
		die("mlap2p_get_unique_id: %s", mlap2p_last_error());

	printf("# mlap2p-perf: %d ranks as %s, %s%s, %s\n", o.nranks,
	       o.threads ? "threads" : "processes",
	       o.proto == MLAP2P_PROTO_AUTO ? "protocol by size" :
	       mlap2p_proto_name(o.proto),
	       o.registered ? ", registered buffers" : "",
	       o.tests & TEST_COLL ? "one checked call per size and variant" :
	       o.check ? "checking every byte" : "no check");
	fflush(stdout);
	if (o.threads) {
		pthread_t t[MAX_RANKS];
		struct rank_ctx ctx[MAX_RANKS];

		for (r = 0; r < o.nranks; r++) {
			ctx[r].rank = r;
			if (pthread_create(&t[r], NULL, rank_thread, &ctx[r]))
				die("pthread_create");
		}
		for (r = 0; r < o.nranks; r++) {
			pthread_join(t[r], NULL);
			failed |= ctx[r].ret != 0;
		}
	} else {
		for (r = 0; r < o.nranks; r++) {
			pids[r] = fork();
			if (pids[r] < 0)
				die("fork: %s", strerror(errno));
			if (!pids[r])
				_exit(rank_main(r) ? 1 : 0);
		}
		for (r = 0; r < o.nranks; r++) {
			int st;

			if (waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) ||
			    WEXITSTATUS(st)) {
				failed = 1;
				/* a rank that died leaves the rest waiting */
				if (!sh->failed)
					fprintf(stderr, "mlap2p-perf: rank %d failed\n", r);
			}
		}
	}
	printf("# runtime %s; connection %s%s; FIFO bytes LL %d, LL128 %d, SIMPLE %d\n",
	       sh->runtime,
	       sh->path == MLAP2P_PATH_DIRECT ? "P2P/direct pointer" :
	       sh->path == MLAP2P_PATH_IPC ? "P2P/IPC" :
	       sh->path == MLAP2P_PATH_INDIRECT ? "P2P/indirect" :
	       sh->path == MLAP2P_PATH_NET ? "NET" : "?",
	       sh->read ? "/read" : "", sh->buffSizes[0], sh->buffSizes[1],
	       sh->buffSizes[2]);
	if (sh->devBefore >= 0 && sh->nconns)
		printf("# device memory: %lld bytes for %d connections, %lld per connection (module counters)\n",
		       sh->devAfter - sh->devBefore, sh->nconns,
		       (sh->devAfter - sh->devBefore) / sh->nconns);
	else
		printf("# device memory: no module; per connection the FIFOs need %d bytes + 2 headers, in 2 MiB units\n",
		       sh->buffSizes[0] + sh->buffSizes[1] + sh->buffSizes[2]);
	print_rows();
	if (o.json) {
		int ret = write_json(o.json);

		if (ret)
			die("%s: %s", o.json, strerror(-ret));
	}
	for (r = 0; r < sh->nrows; r++)
		if (sh->rows[r].wrong > 0 || sh->rows[r].ipWrong > 0)
			failed = 1;
	return failed ? 1 : 0;
}
