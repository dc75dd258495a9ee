// SPDX-License-Identifier: MIT
/*
 * tools/perf/coll.c: mlap2p-perf's collective tests, as nccl-tests runs
 * them (-t allreduce|allgather|reducescatter|broadcast|reduce|alltoall,
 * -d TYPE, -o OP, -r ROOT).
 *
 * Sizes (-b, -e) are the size column of nccl-tests: the larger of the
 * send and the receive buffer of one rank.  The count column is the count
 * argument of the call, per rank for all-gather, reduce-scatter and
 * all-to-all (size / (n * type size)), else size / type size.
 *
 *   algbw = S / t, S = count * typesize, times n for all-gather,
 *           reduce-scatter and all-to-all (the total, as nccl-tests)
 *   busbw = algbw * 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
 *           reduce-scatter, all-to-all), 1 (broadcast, reduce)
 *
 * t is the mean time per call over the timed iterations, of the slowest
 * rank (each rank times its own loop).  Each size runs out of place, then
 * in place (NCCL's definitions; all-to-all has none: N/A).  After each
 * timed loop the input is filled afresh and one more call is checked
 * element by element against a reference computed here: #wrong counts the
 * elements that differ, summed over ranks (the root only, for reduce).
 *
 * The input values are those of nccl-tests' verifiable data in spirit:
 * small integers chosen so that every partial result is exactly
 * representable in the type, whatever the order of the operations:
 * |x| <= L/n for sum, min, max and avg (L: the largest integer up to which
 * the type holds every integer: 16 for fp8 e4m3, 8 for e5m2, 256 for
 * bf16, 2048 for fp16, 2^24 for fp32, the type's maximum for integers;
 * unsigned types: 0..L/n), and 1 or 2 for prod (2 only on the first k
 * ranks, 2^k representable).  So the comparison is exact, except for avg
 * on a floating type when n is not a power of two: 1/n is rounded there,
 * and the result may differ from the exact one by (n+1) roundings of the
 * type's epsilon times L/n.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf.h"

#include <mlap2p/coll.h>
#include <nccl/nccl.h>

/* ---- datatypes and reductions (values of NCCL's enums) ---- */

enum { K_INT, K_UINT, K_FLOAT };

struct dtype {
	const char *name, *alias;	/* the library's name, nccl-tests' */
	int id;
	int size;
	int kind;
	int ebits, mbits;		/* K_FLOAT narrower than 32 bits */
	double exact;			/* every integer up to this is exact */
	int prodk;			/* 2^prodk representable */
};

static const struct dtype dtypes[] = {
	{ "int8", "char", 0, 1, K_INT, 0, 0, 127, 6 },
	{ "uint8", NULL, 1, 1, K_UINT, 0, 0, 255, 7 },
	{ "int32", "int", 2, 4, K_INT, 0, 0, 2147483647.0, 30 },
	{ "uint32", NULL, 3, 4, K_UINT, 0, 0, 4294967295.0, 31 },
	{ "int64", NULL, 4, 8, K_INT, 0, 0, 9007199254740992.0, 53 },
	{ "uint64", NULL, 5, 8, K_UINT, 0, 0, 9007199254740992.0, 53 },
	{ "float16", "half", 6, 2, K_FLOAT, 5, 10, 2048, 15 },
	{ "float32", "float", 7, 4, K_FLOAT, 8, 23, 16777216.0, 63 },
	{ "float64", "double", 8, 8, K_FLOAT, 11, 52, 9007199254740992.0, 63 },
	{ "bfloat16", "bf16", 9, 2, K_FLOAT, 8, 7, 256, 63 },
	{ "fp8_e4m3", "f8e4m3", 10, 1, K_FLOAT, 4, 3, 16, 8 },
	{ "fp8_e5m2", "f8e5m2", 11, 1, K_FLOAT, 5, 2, 8, 15 },
};
#define NDTYPES ((int)(sizeof(dtypes) / sizeof(dtypes[0])))

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, NOPS };
static const char *const opNames[NOPS] = { "sum", "prod", "max", "min", "avg" };

static const char *const collNames[COLL_NUM] = {
	"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
	"alltoall",
};

int coll_parse_test(const char *name)
{
	int i;

	for (i = 0; i < COLL_NUM; i++)
		if (!strcmp(name, collNames[i]))
			return i;
	return -1;
}

const char *coll_test_name(int coll)
{
	return coll >= 0 && coll < COLL_NUM ? collNames[coll] : "?";
}

int coll_parse_dtype(const char *name)
{
	int i;

	for (i = 0; i < NDTYPES; i++)
		if (!strcasecmp(name, dtypes[i].name) ||
		    (dtypes[i].alias && !strcasecmp(name, dtypes[i].alias)))
			return dtypes[i].id;
	return -1;
}

int coll_parse_op(const char *name)
{
	int i;

	for (i = 0; i < NOPS; i++)
		if (!strcasecmp(name, opNames[i]))
			return i;
	return -1;
}

static const struct dtype *dt(void)
{
	return &dtypes[o.dtype];
}

static int has_op(int coll)
{
	return coll == COLL_ALLREDUCE || coll == COLL_REDUCESCATTER ||
	       coll == COLL_REDUCE;
}

static int has_root(int coll)
{
	return coll == COLL_BROADCAST || coll == COLL_REDUCE;
}

/* Blocks of count elements in the larger buffer of one rank. */
static int blocks(int coll)
{
	return coll == COLL_ALLGATHER || coll == COLL_REDUCESCATTER ||
	       coll == COLL_ALLTOALL ? o.nranks : 1;
}

static double bus_factor(int coll)
{
	double n = o.nranks;

	switch (coll) {
	case COLL_ALLREDUCE: return 2 * (n - 1) / n;
	case COLL_ALLGATHER:
	case COLL_REDUCESCATTER:
	case COLL_ALLTOALL: return (n - 1) / n;
	default: return 1;
	}
}

/* ---- element encoding: exact for the values used here ---- */

/* A narrow IEEE-style float (fp16, bf16, fp8): v exactly representable. */
static uint32_t mini_encode(double v, int ebits, int mbits)
{
	int bias = (1 << (ebits - 1)) - 1, e;
	uint32_t sign = 0, mant;
	double f;

	if (v < 0) {
		sign = 1u << (ebits + mbits);
		v = -v;
	}
	if (v == 0)
		return sign;
	f = frexp(v, &e);	/* v = f * 2^e, f in [0.5, 1) */
	e -= 1;			/* v = (2f) * 2^e */
	if (e + bias <= 0)	/* subnormal */
		return sign | (uint32_t)ldexp(v, mbits - 1 + bias);
	mant = (uint32_t)ldexp(2 * f - 1, mbits);
	return sign | (uint32_t)(e + bias) << mbits | mant;
}

static double mini_decode(uint32_t b, int ebits, int mbits, int fnuz)
{
	int bias = (1 << (ebits - 1)) - 1;
	uint32_t emax = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
	uint32_t e = (b >> mbits) & emax, m = b & mmask;
	double s = (b >> (ebits + mbits)) & 1 ? -1 : 1;

	if (e == 0)
		return s * ldexp(m, 1 - bias - mbits);
	if (e == emax && (!fnuz || m == mmask))	/* e4m3: only S.1111.111 */
		return m && fnuz ? NAN : m ? NAN : s * INFINITY;
	return s * ldexp(m + (double)(1u << mbits), (int)e - bias - mbits);
}

static void put(void *buf, size_t i, double v)
{
	const struct dtype *t = dt();
	unsigned char *p = (unsigned char *)buf + i * t->size;

	switch (t->id) {
	case 0: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
	case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
	case 2: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
	case 3: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
	case 4: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
	case 5: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
	case 7: { float x = (float)v; memcpy(p, &x, 4); break; }
	case 8: memcpy(p, &v, 8); break;
	case 6: case 9: {
		uint16_t x = (uint16_t)mini_encode(v, t->ebits, t->mbits);

		memcpy(p, &x, 2);
		break;
	}
	default:
		*p = (uint8_t)mini_encode(v, t->ebits, t->mbits);
	}
}

static double get(const void *buf, size_t i)
{
	const struct dtype *t = dt();
	const unsigned char *p = (const unsigned char *)buf + i * t->size;

	switch (t->id) {
	case 0: { int8_t x; memcpy(&x, p, 1); return x; }
	case 1: return *p;
	case 2: { int32_t x; memcpy(&x, p, 4); return x; }
	case 3: { uint32_t x; memcpy(&x, p, 4); return x; }
	case 4: { int64_t x; memcpy(&x, p, 8); return (double)x; }
	case 5: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
	case 7: { float x; memcpy(&x, p, 4); return x; }
	case 8: { double x; memcpy(&x, p, 8); return x; }
	case 6: case 9: {
		uint16_t x;

		memcpy(&x, p, 2);
		return mini_decode(x, t->ebits, t->mbits, 0);
	}
	default:
		return mini_decode(*p, t->ebits, t->mbits, t->id == 10);
	}
}

/* ---- the data: rank r's input element i, and the expected results ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

struct data {
	uint64_t seed;
	double hi;		/* |x| <= hi (sum, max, min, avg) */
	int prodk;		/* prod: ranks below this may give 2 */
	double tol;		/* 0: exact */
};

static double input(const struct data *d, int r, size_t i)
{
	uint64_t h = mix(d->seed ^ ((uint64_t)r << 56) ^ (i * 0x2545f4914f6cdd1dULL));
	uint64_t span;

	if (o.op == OP_PROD && has_op(o.coll))
		return r < d->prodk && (h & 1) ? 2 : 1;
	if (dt()->kind == K_UINT)
		return (double)(h % ((uint64_t)d->hi + 1));
	span = 2 * (uint64_t)d->hi + 1;
	return (double)(int64_t)(h % span) - d->hi;
}

static double reduced(const struct data *d, size_t i)
{
	double acc = input(d, 0, i);
	int r;

	for (r = 1; r < o.nranks; r++) {
		double x = input(d, r, i);

		switch (o.op) {
		case OP_PROD: acc *= x; break;
		case OP_MAX: acc = x > acc ? x : acc; break;
		case OP_MIN: acc = x < acc ? x : acc; break;
		default: acc += x;
		}
	}
	if (o.op == OP_AVG)
		acc = dt()->kind == K_FLOAT ? acc / o.nranks :
		      trunc(acc / o.nranks);
	return acc;
}

static void setup_data(struct data *d, size_t bytes, int variant)
{
	const struct dtype *t = dt();
	int n = o.nranks;

	d->seed = mix(bytes * 4 + (uint64_t)variant);
	d->hi = floor(t->exact / n);
	d->prodk = t->prodk;
	d->tol = 0;
	if (o.op == OP_AVG && t->kind == K_FLOAT && (n & (n - 1)))
		d->tol = (n + 1) * ldexp(d->hi, -t->mbits);
}

static int same(const struct data *d, double got, double want)
{
	return d->tol ? fabs(got - want) <= d->tol : got == want;
}

/* ---- one rank ---- */

struct bufs {
	unsigned char *s, *r;	/* the arguments of the call */
};

/* Where the arguments point, out of place (ip 0) or in place (ip 1). */
static struct bufs args_for(unsigned char *sbuf, unsigned char *rbuf,
			    int rank, size_t count, int ip)
{
	size_t blk = count * dt()->size;
	struct bufs b = { sbuf, rbuf };

	if (!ip)
		return b;
	b.s = rbuf;
	if (o.coll == COLL_ALLGATHER)
		b.s = rbuf + rank * blk;
	else if (o.coll == COLL_REDUCESCATTER)
		b.r = rbuf + rank * blk;
	return b;
}

/* The input of this rank, as it is laid out in b.s. */
static void fill_input(const struct data *d, struct bufs b, int rank,
		       size_t count)
{
	size_t i, n = count * (o.coll == COLL_REDUCESCATTER ||
			       o.coll == COLL_ALLTOALL ? o.nranks : 1);

	for (i = 0; i < n; i++)
		put(b.s, i, input(d, rank, i));
}

static long check_output(const struct data *d, struct bufs b, int rank,
			 size_t count)
{
	long wrong = 0;
	size_t i;
	int j;

	switch (o.coll) {
	case COLL_REDUCE:
		if (rank != o.root)
			return 0;
		/* fall through */
	case COLL_ALLREDUCE:
		for (i = 0; i < count; i++)
			wrong += !same(d, get(b.r, i), reduced(d, i));
		break;
	case COLL_REDUCESCATTER:
		for (i = 0; i < count; i++)
			wrong += !same(d, get(b.r, i),
				       reduced(d, rank * count + i));
		break;
	case COLL_BROADCAST:
		for (i = 0; i < count; i++)
			wrong += get(b.r, i) != input(d, o.root, i);
		break;
	case COLL_ALLGATHER:
		for (j = 0; j < o.nranks; j++)
			for (i = 0; i < count; i++)
				wrong += get(b.r, j * count + i) != input(d, j, i);
		break;
	case COLL_ALLTOALL:
		for (j = 0; j < o.nranks; j++)
			for (i = 0; i < count; i++)
				wrong += get(b.r, j * count + i) !=
					 input(d, j, rank * count + i);
		break;
	}
	return wrong;
}

static ncclComm_t ncclComm;
static cudaStream_t ncclStream;

void coll_use_nccl(void *ncomm, void *stream)
{
	ncclComm = ncomm;
	ncclStream = stream;
}

/* --nccl: the same call through <nccl.h>; a result back to -errno. */
static int call_nccl(struct bufs b, size_t count)
{
	ncclResult_t r;

	switch (o.coll) {
	case COLL_ALLREDUCE:
		r = ncclAllReduce(b.s, b.r, count, o.dtype, o.op, ncclComm,
				  ncclStream);
		break;
	case COLL_ALLGATHER:
		r = ncclAllGather(b.s, b.r, count, o.dtype, ncclComm,
				  ncclStream);
		break;
	case COLL_REDUCESCATTER:
		r = ncclReduceScatter(b.s, b.r, count, o.dtype, o.op, ncclComm,
				      ncclStream);
		break;
	case COLL_BROADCAST:
		r = ncclBroadcast(b.s, b.r, count, o.dtype, o.root, ncclComm,
				  ncclStream);
		break;
	case COLL_REDUCE:
		r = ncclReduce(b.s, b.r, count, o.dtype, o.op, o.root,
			       ncclComm, ncclStream);
		break;
	default:
		r = ncclAlltoAll(b.s, b.r, count, o.dtype, ncclComm,
				 ncclStream);
		break;
	}
	if (r != ncclSuccess) {
		fprintf(stderr, "mlap2p-perf: %s\n", ncclGetLastError(ncclComm));
		return r == ncclInvalidArgument ? -EINVAL : -EIO;
	}
	if (ncclStream)
		return mlap2p_stream_synchronize(ncclStream);
	return 0;
}

static int call_as(struct mlap2p_comm *comm, struct bufs b, size_t count,
		   int nccl)
{
	if (nccl)
		return call_nccl(b, count);
	switch (o.coll) {
	case COLL_ALLREDUCE:
		return mlap2p_all_reduce(comm, b.s, b.r, count, o.dtype, o.op);
	case COLL_ALLGATHER:
		return mlap2p_all_gather(comm, b.s, b.r, count, o.dtype);
	case COLL_REDUCESCATTER:
		return mlap2p_reduce_scatter(comm, b.s, b.r, count, o.dtype,
					     o.op);
	case COLL_BROADCAST:
		return mlap2p_broadcast(comm, b.s, b.r, count, o.dtype, o.root);
	case COLL_REDUCE:
		return mlap2p_reduce(comm, b.s, b.r, count, o.dtype, o.op,
				     o.root);
	default:
		return mlap2p_all_to_all(comm, b.s, b.r, count, o.dtype);
	}
}

static int call(struct mlap2p_comm *comm, struct bufs b, size_t count)
{
	return call_as(comm, b, count, o.nccl);
}

#define CCHECK(what, ret)						\
	do {								\
		if (ret) {						\
			fprintf(stderr, "mlap2p-perf: rank %d: %s %s %zu B: %s (%s)\n", \
				rank, collNames[o.coll], what, bytes,	\
				mlap2p_strerror(ret), mlap2p_last_error()); \
			sh->failed = 1;					\
			return ret;					\
		}							\
	} while (0)

static double slowest(void)
{
	double t = 0;
	int r;

	for (r = 0; r < o.nranks; r++)
		t = sh->usec[r] > t ? sh->usec[r] : t;
	return t;
}

static long total_wrong(void)
{
	long w = 0;
	int r;

	for (r = 0; r < o.nranks; r++)
		w += sh->wrong[r];
	return w;
}

/* Time one variant, then check one call; rank 0 fills *usec, *wrong. */
static int run_variant(struct mlap2p_comm *comm, int rank,
		       unsigned char *sbuf, unsigned char *rbuf, size_t bytes,
		       size_t count, int ip, int iters, double *usec,
		       long *wrong)
{
	struct bufs b = args_for(sbuf, rbuf, rank, count, ip);
	struct data d;
	double t0 = 0;
	int i, ret;

	setup_data(&d, bytes, ip);
	fill_input(&d, b, rank, count);
	barrier();
	for (i = -o.warmup; i < iters; i++) {
		if (i == 0)
			t0 = now_us();
		ret = call(comm, b, count);
		CCHECK(ip ? "in place" : "out of place", ret);
	}
	sh->usec[rank] = iters ? (now_us() - t0) / iters : 0;
	setup_data(&d, bytes, 2 + ip);
	fill_input(&d, b, rank, count);
	barrier();
	ret = call(comm, b, count);
	CCHECK(ip ? "in place, checked" : "out of place, checked", ret);
	sh->wrong[rank] = check_output(&d, b, rank, count);
	barrier();
	if (rank == 0) {
		*usec = slowest();
		*wrong = total_wrong();
	}
	barrier();
	return 0;
}

#define PAIR_BURSTS	31

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * --pair: alternating bursts of @iters calls through mlap2p_* and through
 * <nccl.h> (o.nccl's stream), out of place, in the same processes, so a
 * change of the machine's state between runs moves both alike.  Rank 0's
 * own times (the ranks of a collective move in lockstep): medians, and
 * the median and middle half of the bursts' ratios.
 */
static int run_pair(struct mlap2p_comm *comm, int rank, unsigned char *sbuf,
		    unsigned char *rbuf, size_t bytes, size_t count,
		    int iters, struct row *r)
{
	struct bufs b = args_for(sbuf, rbuf, rank, count, 0);
	double t[2][PAIR_BURSTS], q[PAIR_BURSTS], t0;
	struct data d;
	int k, v, i, ret;

	setup_data(&d, bytes, 0);
	fill_input(&d, b, rank, count);
	for (k = 0; k < PAIR_BURSTS; k++) {
		for (v = 0; v < 2; v++) {
			barrier();
			for (i = 0; i < o.warmup; i++) {
				ret = call_as(comm, b, count, v ? o.nccl : 0);
				CCHECK("warm-up", ret);
			}
			t0 = now_us();
			for (i = 0; i < iters; i++) {
				ret = call_as(comm, b, count, v ? o.nccl : 0);
				CCHECK(v ? "<nccl.h>" : "mlap2p_*", ret);
			}
			t[v][k] = (now_us() - t0) / iters;
		}
		q[k] = t[1][k] / t[0][k];
	}
	barrier();
	if (rank)
		return 0;
	qsort(t[0], PAIR_BURSTS, sizeof(double), cmp_double);
	qsort(t[1], PAIR_BURSTS, sizeof(double), cmp_double);
	qsort(q, PAIR_BURSTS, sizeof(double), cmp_double);
	r->baseUsec = t[0][PAIR_BURSTS / 2];
	r->usec = t[1][PAIR_BURSTS / 2];
	r->ratio = q[PAIR_BURSTS / 2];
	r->lo = q[PAIR_BURSTS / 4];
	r->hi = q[PAIR_BURSTS - 1 - PAIR_BURSTS / 4];
	return 0;
}

int coll_run(struct mlap2p_comm *comm, int rank)
{
	size_t ts = dt()->size, blk = (size_t)blocks(o.coll) * ts, b;
	unsigned char *sbuf, *rbuf;
	int ret = 0;

	sbuf = xbuf(comm, o.maxBytes);
	rbuf = xbuf(comm, o.maxBytes);
	for (b = o.minBytes; b <= o.maxBytes; b = next_size(b)) {
		size_t count = b / blk, bytes = count * blk;
		int iters = iters_for(bytes);
		struct row *r = &sh->rows[sh->nrows];
		double us = 0, ipus = -1;
		long w = 0, ipw = -1;
		struct row pr = { 0 };

		if (o.pair && !o.iters)
			iters = iters / 8 + 1;
		if (o.pair)
			ret = run_pair(comm, rank, sbuf, rbuf, bytes, count,
				       iters, &pr);
		else
			ret = run_variant(comm, rank, sbuf, rbuf, bytes, count,
					  0, iters, &us, &w);
		if (!ret && !o.pair && o.coll != COLL_ALLTOALL)
			ret = run_variant(comm, rank, sbuf, rbuf, bytes, count,
					  1, iters, &ipus, &ipw);
		if (ret)
			break;
		if (rank == 0) {
			memset(r, 0, sizeof(*r));
			r->test = TEST_COLL;
			r->proto = -1;
			r->bytes = bytes;
			r->count = count;
			r->iters = iters;
			r->usec = us;
			r->wrong = w;
			r->ipUsec = ipus;
			r->ipWrong = ipw;
			if (o.pair) {
				r->usec = pr.usec;
				r->baseUsec = pr.baseUsec;
				r->ratio = pr.ratio;
				r->lo = pr.lo;
				r->hi = pr.hi;
			}
			if (sh->nrows < MAX_SIZES)
				sh->nrows++;
		}
		barrier();
		if (b == o.maxBytes)
			break;
	}
	xfree(comm, sbuf);
	xfree(comm, rbuf);
	return ret;
}

/* ---- output ---- */

static double algbw(const struct row *r, double usec)
{
	return usec > 0 ? r->bytes / usec / 1e3 : 0;
}

static const char *op_str(void)
{
	return has_op(o.coll) ? opNames[o.op] : "none";
}

static int root_val(void)
{
	return has_root(o.coll) ? o.root : -1;
}

static void pair_print(void)
{
	int i;

	printf("#\n# %s: %s, %d ranks, out of place; %d alternating bursts per size\n",
	       collNames[o.coll], dt()->name, o.nranks, PAIR_BURSTS);
	printf("# of mlap2p_* and <nccl.h> (%s) calls in the same processes;\n",
	       o.nccl == 2 ? "posted to a stream, then synchronized" :
	       "NULL stream");
	printf("# times: rank 0's medians; ratio: median of the bursts' <nccl.h> / mlap2p_*\n");
	printf("# %10s %12s %7s %10s %10s %8s %17s\n", "size", "count", "iters",
	       "mlap2p", "nccl", "ratio", "middle half");
	printf("# %10s %12s %7s %10s %10s %8s %17s\n", "(B)", "(elements)", "",
	       "(us)", "(us)", "", "");
	for (i = 0; i < sh->nrows; i++) {
		const struct row *r = &sh->rows[i];

		printf("  %10zu %12zu %7d %10.3f %10.3f %8.3f    %6.3f - %6.3f\n",
		       r->bytes, r->count, r->iters, r->baseUsec, r->usec,
		       r->ratio, r->lo, r->hi);
	}
}

void coll_print(void)
{
	double sum = 0;
	int i, nbw = 0;

	if (o.pair) {
		pair_print();
		return;
	}

	printf("#\n# %s: %s, %d ranks; algbw = %s / time, busbw = algbw x %.3f\n",
	       collNames[o.coll], dt()->name, o.nranks,
	       blocks(o.coll) > 1 ? "count x typesize x n" : "count x typesize",
	       bus_factor(o.coll));
	printf("# time: mean per call of the slowest rank; #wrong: elements that differ from the reference\n");
	printf("# %10s %12s %9s %6s %5s %32s %8s %32s\n", "", "", "", "", "",
	       "out-of-place", "", "in-place");
	printf("# %10s %12s %9s %6s %5s %10s %8s %8s %6s %10s %8s %8s %6s\n",
	       "size", "count", "type", "redop", "root", "time", "algbw",
	       "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
	printf("# %10s %12s %9s %6s %5s %10s %8s %8s %6s %10s %8s %8s %6s\n",
	       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
	       "(us)", "(GB/s)", "(GB/s)", "");
	for (i = 0; i < sh->nrows; i++) {
		const struct row *r = &sh->rows[i];
		double a = algbw(r, r->usec), ia = algbw(r, r->ipUsec);

		printf("  %10zu %12zu %9s %6s %5d %10.2f %8.3f %8.3f %6ld",
		       r->bytes, r->count, dt()->name, op_str(), root_val(),
		       r->usec, a, a * bus_factor(o.coll), r->wrong);
		sum += a * bus_factor(o.coll);
		nbw++;
		if (r->ipUsec >= 0) {
			printf(" %10.2f %8.3f %8.3f %6ld\n", r->ipUsec, ia,
			       ia * bus_factor(o.coll), r->ipWrong);
			sum += ia * bus_factor(o.coll);
			nbw++;
		} else {
			printf(" %10s %8s %8s %6s\n", "N/A", "N/A", "N/A", "N/A");
		}
	}
	printf("# Avg bus bandwidth    : %g\n", nbw ? sum / nbw : 0);
}

void coll_json(FILE *f, const struct row *r, int last)
{
	double a = algbw(r, r->usec), f1 = bus_factor(o.coll);
	char ip[160] = "null, \"inplace_algbw_gbps\": null, \"inplace_busbw_gbps\": null, \"inplace_wrong\": null";

	if (r->ipUsec >= 0)
		snprintf(ip, sizeof(ip), "%.4f, \"inplace_algbw_gbps\": %.4f, "
			 "\"inplace_busbw_gbps\": %.4f, \"inplace_wrong\": %ld",
			 r->ipUsec, algbw(r, r->ipUsec),
			 algbw(r, r->ipUsec) * f1, r->ipWrong);
	fprintf(f, "    {\"test\": \"%s\", \"dtype\": \"%s\", \"op\": \"%s\", "
		"\"root\": %d, \"bytes\": %zu, \"count\": %zu, \"iters\": %d, "
		"\"time_us\": %.4f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, "
		"\"wrong\": %ld, \"inplace_time_us\": %s}%s\n",
		collNames[o.coll], dt()->name, op_str(), root_val(), r->bytes,
		r->count, r->iters, r->usec, a, a * f1,
		r->wrong + (r->ipWrong > 0 ? r->ipWrong : 0), ip,
		last ? "" : ",");
}
