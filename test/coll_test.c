// SPDX-License-Identifier: GPL-2.0
/*
 * <mlap2p/coll.h>: every collective x dtype x op x in/out of place on 1, 2,
 * 3, 4 and 8 ranks (threads and processes) with each protocol forced,
 * compared byte for byte with a reference computed in the order the
 * header documents (with the library's own pairwise kernels, which
 * coll_reduce_test checks on their own).  Then the argument checks,
 * mismatched calls, a dead peer, an abort from another thread, groups.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "comm.h"
#include "log.h"
#include "mlap2p/dataplane.h"
#include "coll/coll.h"
#include "coll/reduce.h"
#include "mlap2p/coll.h"

#define MAXR	9
#define GONE	1000
#define KiB	1024UL
#define MiB	(1024UL * 1024UL)

/* ---- ranks ---------------------------------------------------------- */

struct job;
typedef int (*rank_fn)(struct job *j, int rank, struct mlap2p_comm *comm);

struct job {
	int n;
	int threads;
	rank_fn fn;
	const void *arg;
	struct mlap2p_unique_id id;
	int ret[MAXR];
};

static void env_defaults(void)
{
	if (!getenv("MLAP2P_RUNTIME") && access(MLAP2P_DEVICE_PATH, F_OK))
		setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_FAMILY", "trn2", 1);
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "120s", 1);
	setenv("MLAP2P_NET_DISABLE", "1", 1);
	setenv("NCCL_LL_BUFFSIZE", "64K", 1);
	setenv("NCCL_LL128_BUFFSIZE", "60K", 1);
	setenv("NCCL_BUFFSIZE", "256K", 1);
	setenv("MLAP2P_CHUNKSIZE", "16K", 1);
	/* The data plane's MLAP2P_CMA=auto limits for cheap system calls,
	 * whatever this machine's cost (dp_api_test checks the other). */
	setenv("MLAP2P_CMA_SYSCALL_NS", "4294967295", 1);
	/* Small ring chunks: many loops and partial blocks at small counts. */
	setenv("MLAP2P_COLL_CHUNK", "4K", 1);
	unsetenv("MLAP2P_COLL_ONESHOT_MAX");
	/* All-reduces of plain buffers go round the ring, which the matrix
	 * checks; the direct fixture and the solo tests that say so turn
	 * the direct way by address on. */
	setenv("MLAP2P_COLL_CMA_MIN", "0", 1);
	unsetenv("NCCL_ALGO");
	unsetenv("NCCL_PROTO");
	unsetenv("MLAP2P_SPIN");
}

static int rank_run(struct job *j, int rank)
{
	struct mlap2p_comm *comm;
	int ret;

	ret = mlap2p_comm_init_rank(&comm, j->n, &j->id, rank, rank);
	if (ret) {
		fprintf(stderr, "# rank %d: init: %s\n", rank,
			mlap2p_last_error());
		return 10;
	}
	ret = j->fn(j, rank, comm);
	if (ret >= GONE)
		return ret - GONE;
	if (ret) {
		fprintf(stderr, "# rank %d failed (%d): %s\n", rank, ret,
			mlap2p_last_error());
		mlap2p_comm_abort(comm);
		return ret;
	}
	if (mlap2p_comm_destroy(comm)) {
		fprintf(stderr, "# rank %d: destroy: %s\n", rank,
			mlap2p_last_error());
		return 11;
	}
	return 0;
}

struct tctx {
	struct job *j;
	int rank;
};

static void *rank_thread(void *arg)
{
	struct tctx *t = arg;

	t->j->ret[t->rank] = rank_run(t->j, t->rank);
	return NULL;
}

/*
 * Processes: each rank, once its body returned, waits for every other
 * rank's body to return (or its process to die) before it exits, so that
 * a rank which failed early (a mismatch) does not look dead to ranks still
 * finishing the same failed call.  done[i]: the rank says it is done (a
 * byte, or EOF when it died); release[i]: EOF lets it exit.
 */
static int job_run(struct job *j, int timeout_s)
{
	pid_t pid[MAXR];
	int pipes[MAXR][2], done[MAXR][2], release[MAXR][2], i, m, bad = 0;
	char b = 0;

	if (j->threads) {
		pthread_t t[MAXR];
		struct tctx c[MAXR];

		if (mlap2p_get_unique_id(&j->id))
			return -1;
		for (i = 0; i < j->n; i++) {
			c[i].j = j;
			c[i].rank = i;
			pthread_create(&t[i], NULL, rank_thread, &c[i]);
		}
		for (i = 0; i < j->n; i++) {
			pthread_join(t[i], NULL);
			if (j->ret[i])
				fprintf(stderr, "# rank %d: %d\n", i, j->ret[i]);
			bad |= j->ret[i] != 0;
		}
		return bad;
	}
	for (i = 0; i < j->n; i++) {
		if (pipe(pipes[i]) || pipe(done[i]) || pipe(release[i]))
			return -1;
		fflush(NULL);
		pid[i] = fork();
		if (pid[i] < 0)
			return -1;
		if (!pid[i]) {
			int rc;

			/* Only our own ends: another rank's release must see
			 * EOF when the parent closes it. */
			for (m = 0; m < i; m++) {
				close(done[m][0]);
				close(release[m][1]);
			}
			close(pipes[i][1]);
			close(done[i][0]);
			close(release[i][1]);
			alarm(timeout_s);
			if (read(pipes[i][0], &j->id, sizeof(j->id)) !=
			    (ssize_t)sizeof(j->id))
				_exit(98);
			rc = rank_run(j, i);
			fflush(NULL);
			if (write(done[i][1], &b, 1) != 1 ||
			    read(release[i][0], &b, 1) < 0)
				_exit(97);
			_exit(rc);
		}
		close(pipes[i][0]);
		close(done[i][1]);
		close(release[i][0]);
	}
	if (mlap2p_get_unique_id(&j->id))
		return -1;
	for (i = 0; i < j->n; i++) {
		if (write(pipes[i][1], &j->id, sizeof(j->id)) !=
		    (ssize_t)sizeof(j->id))
			bad = 1;
		close(pipes[i][1]);
	}
	/* A byte or EOF from every rank, then let them all go. */
	for (i = 0; i < j->n; i++) {
		while (read(done[i][0], &b, 1) < 0 && errno == EINTR)
			;
		close(done[i][0]);
	}
	for (i = 0; i < j->n; i++)
		close(release[i][1]);
	for (i = 0; i < j->n; i++) {
		int st;

		waitpid(pid[i], &st, 0);
		j->ret[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (j->ret[i]) {
			fprintf(stderr, "# rank %d exited with %d\n", i,
				j->ret[i]);
			bad = 1;
		}
	}
	return bad;
}

/* ---- data and the reference ------------------------------------------ */

enum { C_AR, C_BCAST, C_REDUCE, C_AG, C_RS, C_A2A, C_NUM };
static const char *const cname[] = {
	"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
	"all_to_all",
};

static int t_is_float(int dt)
{
	return dt >= MLAP2P_FLOAT16;
}

/* Rank r's input for collective #k: random bits, floats kept finite. */
static void gen(void *buf, size_t count, int dt, int r, int k)
{
	size_t es = mlap2p_dtype_size(dt), i, b = count * es;
	uint64_t x = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)(k + 1) * 0xbf58476d1ce4e5b9ULL;
	unsigned char *p = buf;

	for (i = 0; i < b; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
	if (!t_is_float(dt))
		return;
	/* Clear the exponent's top bit: no inf or NaN, |x| < 2 or so. */
	for (i = 0; i < count; i++) {
		switch (dt) {
		case MLAP2P_FLOAT16:
		case MLAP2P_BFLOAT16:
			p[i * 2 + 1] &= 0xbf;
			break;
		case MLAP2P_FLOAT32:
			p[i * 4 + 3] &= 0xbf;
			break;
		case MLAP2P_FLOAT64:
			p[i * 8 + 7] &= 0xbf;
			break;
		default:
			p[i] &= 0xbf;
		}
	}
}

#define CHUNK 4096	/* MLAP2P_COLL_CHUNK, env_defaults() */

struct ctx {
	int n, rank, dt, op, root, kind;
	size_t count, es;
	int oneshot;
	int nrings;			/* channels with a ring, at most 4 */
	int rings[4][MAXR];		/* mlap2p_ring_get(comm, k) */
	unsigned char *in[MAXR];	/* every rank's input (regenerated) */
};

/* x[r] for a reduction: the input, premultiplied for a floating AVG. */
static void contribs(struct ctx *c, size_t per)
{
	int r;

	if (c->op != MLAP2P_AVG || !t_is_float(c->dt))
		return;
	for (r = 0; r < c->n; r++)
		mlap2p_premul(c->in[r], c->in[r], per, c->dt, 1.0 / c->n);
}

/* dst = x[ranks[0]] op x[ranks[1]] ... over [off, off + len). */
static void fold(struct ctx *c, unsigned char *dst, const int *ranks,
		 size_t off, size_t len)
{
	int op = c->op == MLAP2P_AVG ? MLAP2P_SUM : c->op, k;

	if (!len)
		return;
	memcpy(dst, c->in[ranks[0]] + off * c->es, len * c->es);
	for (k = 1; k < c->n; k++)
		mlap2p_reduce2(dst, dst, c->in[ranks[k]] + off * c->es, len,
			       c->dt, op);
	if (c->op == MLAP2P_AVG && !t_is_float(c->dt))
		mlap2p_divide(dst, len, c->dt, c->n);
}

/* The ring all-reduce of one lane: [off, off + cnt) over ring @order. */
static void expect_ar(struct ctx *c, unsigned char *want, const int *order,
		      size_t off, size_t cnt, size_t E)
{
	int n = c->n, ranks[MAXR], k, b;

	for (size_t base = 0; base < cnt; base += (size_t)n * E) {
		size_t rem = cnt - base, cs;

		if (rem > (size_t)n * E)
			rem = (size_t)n * E;
		cs = (rem + n - 1) / n;
		if (cs > E)
			cs = E;
		for (b = 0; b < n; b++) {
			size_t lo = (size_t)b * cs, hi = lo + cs;

			if (lo > rem)
				lo = rem;
			if (hi > rem)
				hi = rem;
			for (k = 0; k < n; k++)
				ranks[k] = order[(b + k) % n];
			fold(c, want + (off + base + lo) * c->es, ranks,
			     off + base + lo, hi - lo);
		}
	}
}

/*
 * The lanes of a ring collective, as the header documents them: L =
 * min(rings, bytes / chunk, 4), at least 1; lane k takes elements
 * [count*k/L, count*(k+1)/L) over ring k with chunks of (chunk/L rounded
 * down to 64 bytes).
 */
static int lanes(const struct ctx *c)
{
	size_t l = c->count * c->es / CHUNK;

	if (l > (size_t)c->nrings)
		l = (size_t)c->nrings;
	if (l > 4)
		l = 4;
	return l ? (int)l : 1;
}

static void expect(struct ctx *c, unsigned char *want)
{
	int n = c->n, ranks[MAXR], k, q, L = lanes(c), l;
	size_t es = c->es, cnt = c->count;
	size_t E = ((CHUNK / (size_t)L) & ~(size_t)63) / es;

	if (n == 1) {
		memcpy(want, c->in[0], cnt * es);
		return;
	}
	switch (c->kind) {
	case C_AR:
		contribs(c, cnt);
		if (c->oneshot) {
			for (k = 0; k < n; k++)
				ranks[k] = k;
			fold(c, want, ranks, 0, cnt);
			break;
		}
		for (l = 0; l < L; l++) {
			size_t off = cnt * (size_t)l / (size_t)L;

			expect_ar(c, want, c->rings[l], off,
				  cnt * (size_t)(l + 1) / (size_t)L - off, E);
		}
		break;
	case C_RS:
		contribs(c, cnt * n);
		for (l = 0; l < L; l++) {
			size_t off = cnt * (size_t)l / (size_t)L;
			const int *order = c->rings[l];

			for (q = 0; q < n && order[q] != c->rank; q++)
				;
			for (k = 0; k < n; k++)
				ranks[k] = order[(q + 1 + k) % n];
			fold(c, want + off * es, ranks,
			     (size_t)c->rank * cnt + off,
			     cnt * (size_t)(l + 1) / (size_t)L - off);
		}
		break;
	case C_REDUCE:
		contribs(c, cnt);
		for (l = 0; l < L; l++) {
			size_t off = cnt * (size_t)l / (size_t)L;
			const int *order = c->rings[l];

			for (q = 0; q < n && order[q] != c->root; q++)
				;
			for (k = 0; k < n; k++)
				ranks[k] = order[(q + 1 + k) % n];
			fold(c, want + off * es, ranks, off,
			     cnt * (size_t)(l + 1) / (size_t)L - off);
		}
		break;
	case C_BCAST:
		memcpy(want, c->in[c->root], cnt * es);
		break;
	case C_AG:
		for (k = 0; k < n; k++)
			memcpy(want + (size_t)k * cnt * es, c->in[k], cnt * es);
		break;
	case C_A2A:
		for (k = 0; k < n; k++)
			memcpy(want + (size_t)k * cnt * es,
			       c->in[k] + (size_t)c->rank * cnt * es, cnt * es);
		break;
	}
}

/* In and out bytes, per rank. */
static void sizes(int kind, int n, size_t cb, size_t *ib, size_t *ob)
{
	*ib = *ob = cb;
	if (kind == C_AG)
		*ob = cb * n;
	if (kind == C_RS)
		*ib = cb * n;
	if (kind == C_A2A)
		*ib = *ob = cb * n;
}

static int call(struct mlap2p_comm *comm, int kind, const void *s, void *r,
		size_t count, int dt, int op, int root)
{
	switch (kind) {
	case C_AR:
		return mlap2p_all_reduce(comm, s, r, count, dt, op);
	case C_BCAST:
		return mlap2p_broadcast(comm, s, r, count, dt, root);
	case C_REDUCE:
		return mlap2p_reduce(comm, s, r, count, dt, op, root);
	case C_AG:
		return mlap2p_all_gather(comm, s, r, count, dt);
	case C_RS:
		return mlap2p_reduce_scatter(comm, s, r, count, dt, op);
	default:
		return mlap2p_all_to_all(comm, s, r, count, dt);
	}
}

/* ---- the matrix ------------------------------------------------------ */

/* Steps channel 1's ring has sent to our next on it: a direct
 * all-reduce uses channel 0 only (its header, handles and done words),
 * the ring both.  -1 before the rings are connected. */
static int ch1_steps(struct mlap2p_comm *comm, int rank, uint64_t *steps)
{
	struct mlap2p_conn_desc d;
	int order[MAXR], n = mlap2p_comm_count(comm), q;

	if (n > MAXR || mlap2p_ring_get(comm, 1, order, NULL, NULL))
		return -1;
	for (q = 0; q < n && order[q] != rank; q++)
		;
	if (q == n || mlap2p_conn_get(comm, 1, order[(q + 1) % n],
				      MLAP2P_DIR_SEND, &d))
		return -1;
	*steps = d.host->conn.step;
	return 0;
}

struct matrix {
	int proto;		/* MLAP2P_PROTO_* or AUTO */
	int stride;		/* run every stride-th case */
	int oneshot;		/* -1 auto, 0 ring only, 1 one-shot only */
	int big;		/* counts past several ring loops */
	int net;		/* every ring connection must be NET */
	int reg;		/* buffers from mlap2p_mem_alloc: direct */
};

static size_t pick_count(int which, int n, int dt, int big)
{
	size_t E = CHUNK / mlap2p_dtype_size(dt);

	switch (which) {
	case 0: return 0;
	case 1: return 1;
	case 2: return 7;
	case 3: return 1031;
	default: return big ? 2 * (size_t)n * E + 5 * (size_t)n + 3 : 333;
	}
}

static int matrix_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	const struct matrix *m = j->arg;
	int n = j->n, kind, dt, op, ip, w, k = 0, r, ret;
	/*
	 * MLAP2P_TEST_QUICK (the VM lanes: 8 processes on 2 TCG vCPUs under
	 * KASAN once took the whole 290 s): every third case of the
	 * variant's; the host lanes run them all.
	 */
	int stride = m->stride * (getenv("MLAP2P_TEST_QUICK") ? 3 : 1);
	struct ctx c;
	size_t maxb = (2 * (size_t)n * 512 + 5 * n + 3) * 8 * n + 64;
	unsigned char *sb = NULL, *rb = NULL, *want = malloc(maxb);
	uint64_t s0 = 0, s1;

	memset(&c, 0, sizeof(c));
	for (r = 0; r < n; r++)
		c.in[r] = malloc(maxb);
	if (m->reg) {
		if (mlap2p_mem_alloc(comm, maxb, (void **)&sb) ||
		    mlap2p_mem_alloc(comm, maxb, (void **)&rb))
			return 20;
	} else {
		sb = malloc(maxb);
		rb = malloc(maxb);
	}
	if (!sb || !rb || !want || !c.in[n - 1])
		return 20;
	if (m->proto != MLAP2P_PROTO_AUTO && n > 1 &&
	    (mlap2p_connect_ring(comm, 1) || mlap2p_set_proto(comm, m->proto)))
		return 21;
	for (kind = 0; kind < C_NUM; kind++)
	for (dt = 0; dt < 12; dt++)
	for (op = 0; op < 5; op++)
	for (ip = 0; ip < 2; ip++)
	for (w = 0; w < 5; w++) {
		size_t cb, ib, ob, count;
		int root = (k / 7) % n;
		unsigned char *s, *rcv, *out;

		if ((kind == C_BCAST || kind == C_AG || kind == C_A2A) && op)
			continue;
		if (kind == C_A2A && ip)
			continue;
		if (k++ % stride)
			continue;
		count = pick_count(w, n, dt, m->big);
		c.n = n;
		c.rank = rank;
		c.dt = dt;
		c.op = op;
		c.root = root;
		c.kind = kind;
		c.count = count;
		c.es = mlap2p_dtype_size(dt);
		cb = count * c.es;
		sizes(kind, n, cb, &ib, &ob);
		/* The direct all-reduce reduces in the one-shot's order. */
		c.oneshot = (m->oneshot == 1 && cb <= 4096) ||
			    (m->oneshot < 0 && n == 2 && cb <= 4096) ||
			    m->reg;
		for (r = 0; r < n; r++)
			gen(c.in[r], ib / c.es, dt, r, k);
		memset(rb, 0xa5, ob + 64);
		/* In place: the input sits where the collective wants it. */
		if (ip) {
			s = rb + (kind == C_AG ? (size_t)rank * cb : 0);
			rcv = kind == C_RS ? rb + (size_t)rank * cb : rb;
			memcpy(s, c.in[rank], ib);
			out = rcv;
		} else {
			s = sb;
			rcv = rb;
			memcpy(s, c.in[rank], ib);
			out = rb;
		}
		if (m->reg && ch1_steps(comm, rank, &s0) && k > 1)
			return 26;
		ret = call(comm, kind, s, rcv, count, dt, op, root);
		if (ret) {
			fprintf(stderr, "# rank %d: %s(count %zu, %s, %s, root %d, %s): %s: %s\n",
				rank, cname[kind], count, mlap2p_dtype_name(dt),
				mlap2p_redop_name(op), root,
				ip ? "in place" : "out of place",
				mlap2p_strerror(ret), mlap2p_last_error());
			return 22;
		}
		/* Regions on both ranks: an all-reduce of 8 KiB or more
		 * that went round the ring would have used channel 1. */
		if (m->reg && kind == C_AR && cb >= 8192 &&
		    (ch1_steps(comm, rank, &s1) || s1 != s0)) {
			fprintf(stderr, "# rank %d: all_reduce(count %zu, %s, %s): the ring ran, not the direct algorithm\n",
				rank, count, mlap2p_dtype_name(dt),
				mlap2p_redop_name(op));
			return 26;
		}
		for (c.nrings = 0; n > 1 && c.nrings < 4 &&
		     !mlap2p_ring_get(comm, c.nrings, c.rings[c.nrings], NULL,
				      NULL); c.nrings++)
			;
		if (n > 1 && !c.nrings)
			return 23;
		for (r = 0; m->net && r < c.nrings; r++) {
			struct mlap2p_conn_desc d;
			int q;

			for (q = 0; c.rings[r][q] != rank; q++)
				;
			if (mlap2p_conn_get(comm, r, c.rings[r][(q + 1) % n],
					    MLAP2P_DIR_SEND, &d) ||
			    d.path != MLAP2P_PATH_NET)
				return 25;
		}
		if (kind == C_REDUCE && rank != root)
			continue;
		expect(&c, want);
		if (memcmp(out, want, ob) ||
		    (!ip && kind != C_AG && kind != C_RS &&
		     memcmp(rb + ob, "\xa5\xa5\xa5\xa5", 4))) {
			size_t i;

			for (i = 0; i < ob && out[i] == want[i]; i++)
				;
			fprintf(stderr, "# rank %d: %s(count %zu, %s, %s, root %d, %s, n %d): byte %zu of %zu is %02x, want %02x\n",
				rank, cname[kind], count, mlap2p_dtype_name(dt),
				mlap2p_redop_name(op), root,
				ip ? "in place" : "out of place", n, i, ob,
				i < ob ? out[i] : 0, i < ob ? want[i] : 0);
			return 24;
		}
	}
	for (r = 0; r < n; r++)
		free(c.in[r]);
	if (!m->reg) {
		free(sb);
		free(rb);
	}
	free(want);
	return 0;
}

FIXTURE(matrix) {
	struct job j;
	struct matrix m;
};

FIXTURE_VARIANT(matrix) {
	int n, threads, proto, stride, oneshot, big;
	int net;		/* NCCL_P2P_DISABLE=1: the rings over NET */
	int reg;		/* buffers from mlap2p_mem_alloc */
	const char *algo;
	const char *ntMin;	/* MLAP2P_NT_MIN */
};

#define MV(name, ...) \
	FIXTURE_VARIANT_ADD(matrix, name) { __VA_ARGS__ }

MV(t1, .n = 1, .threads = 1, .proto = -1, .stride = 3, .oneshot = -1);
MV(t2_auto, .n = 2, .threads = 1, .proto = -1, .stride = 1, .oneshot = -1, .big = 1);
MV(t2_ll, .n = 2, .threads = 1, .proto = 0, .stride = 3, .oneshot = -1);
MV(t2_ll128, .n = 2, .threads = 1, .proto = 1, .stride = 3, .oneshot = -1);
MV(t2_simple, .n = 2, .threads = 1, .proto = 2, .stride = 2, .oneshot = -1, .big = 1);
MV(t2_ring, .n = 2, .threads = 1, .proto = -1, .stride = 2, .oneshot = 0, .algo = "Ring");
MV(t3_auto, .n = 3, .threads = 1, .proto = -1, .stride = 1, .oneshot = -1, .big = 1);
MV(t3_simple, .n = 3, .threads = 1, .proto = 2, .stride = 4, .oneshot = -1);
MV(t3_oneshot, .n = 3, .threads = 1, .proto = -1, .stride = 4, .oneshot = 1, .algo = "OneShot");
MV(t4_auto, .n = 4, .threads = 1, .proto = -1, .stride = 2, .oneshot = -1, .big = 1);
MV(t4_ll, .n = 4, .threads = 1, .proto = 0, .stride = 7, .oneshot = -1);
MV(t8_auto, .n = 8, .threads = 1, .proto = -1, .stride = 5, .oneshot = -1, .big = 1);
MV(p2_auto, .n = 2, .threads = 0, .proto = -1, .stride = 2, .oneshot = -1, .big = 1);
MV(p2_simple, .n = 2, .threads = 0, .proto = 2, .stride = 5, .oneshot = -1);
MV(p3_auto, .n = 3, .threads = 0, .proto = -1, .stride = 3, .oneshot = -1, .big = 1);
MV(p4_ll128, .n = 4, .threads = 0, .proto = 1, .stride = 9, .oneshot = -1);
MV(p8_auto, .n = 8, .threads = 0, .proto = -1, .stride = 11, .oneshot = -1, .big = 1);
MV(t3_net, .n = 3, .threads = 1, .proto = -1, .stride = 7, .oneshot = -1, .big = 1, .net = 1);
/* Regions, the ring algorithm asked for: every all-reduce is the direct
 * one (streaming stores from 8 KiB on in some). */
MV(t2_reg, .n = 2, .threads = 1, .proto = -1, .stride = 1, .oneshot = 0, .big = 1, .reg = 1, .algo = "Ring");
MV(p2_reg_nt, .n = 2, .threads = 0, .proto = -1, .stride = 1, .oneshot = 0, .big = 1, .reg = 1, .algo = "Ring", .ntMin = "8K");
MV(t3_reg_nt, .n = 3, .threads = 1, .proto = -1, .stride = 2, .oneshot = 0, .big = 1, .reg = 1, .algo = "Ring", .ntMin = "8K");
MV(p3_reg, .n = 3, .threads = 0, .proto = -1, .stride = 3, .oneshot = 0, .big = 1, .reg = 1, .algo = "Ring");
MV(t4_reg, .n = 4, .threads = 1, .proto = -1, .stride = 3, .oneshot = 0, .big = 1, .reg = 1, .algo = "Ring");
MV(p4_reg_nt, .n = 4, .threads = 0, .proto = -1, .stride = 5, .oneshot = 0, .big = 1, .reg = 1, .algo = "Ring", .ntMin = "8K");
MV(p2_net, .n = 2, .threads = 0, .proto = -1, .stride = 9, .oneshot = 0, .big = 1, .net = 1);

FIXTURE_SETUP(matrix)
{
	env_defaults();
	if (variant->net) {
		setenv("NCCL_P2P_DISABLE", "1", 1);
		unsetenv("MLAP2P_NET_DISABLE");
		if (!t_net_available())
			SKIP(return, "no libfabric provider for NET");
	}
	if (variant->algo)
		setenv("NCCL_ALGO", variant->algo, 1);
	if (variant->ntMin)
		setenv("MLAP2P_NT_MIN", variant->ntMin, 1);
	self->m.reg = variant->reg;
	self->m.proto = variant->proto;
	self->m.stride = variant->stride;
	self->m.oneshot = variant->oneshot;
	self->m.big = variant->big;
	self->m.net = variant->net;
	memset(&self->j, 0, sizeof(self->j));
	self->j.n = variant->n;
	self->j.threads = variant->threads;
	self->j.fn = matrix_body;
	self->j.arg = &self->m;
}

FIXTURE_TEARDOWN(matrix)
{
	unsetenv("NCCL_ALGO");
	unsetenv("MLAP2P_NT_MIN");
	unsetenv("NCCL_P2P_DISABLE");
}

TEST_F_TIMEOUT(matrix, every_case_exact, 300)
{
	if (_metadata->skip)
		return;
	ASSERT_EQ(0, job_run(&self->j, 290));
}

/* ---- 64 MiB, default chunk ------------------------------------------- */

static int big_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	size_t count = 16 * MiB, i;
	float *s = malloc(count * 4), *r = malloc(count * 4);

	(void)j;
	if (!s || !r)
		return 30;
	for (i = 0; i < count; i++)
		s[i] = (float)((i * 7 + (size_t)rank * 3) % 1024);
	if (mlap2p_all_reduce(comm, s, r, count, MLAP2P_FLOAT32, MLAP2P_SUM))
		return 31;
	/* Integers below 2^24: every order gives the same sum. */
	for (i = 0; i < count; i++)
		if (r[i] != (float)((i * 7) % 1024) + (float)((i * 7 + 3) % 1024))
			return 32;
	/* In place, then reduce-scatter and all-gather of the same size. */
	if (mlap2p_all_reduce(comm, s, s, count, MLAP2P_FLOAT32, MLAP2P_SUM) ||
	    memcmp(s, r, count * 4))
		return 33;
	if (mlap2p_all_gather(comm, s + (size_t)rank * count / 2, r,
			      count / 2, MLAP2P_FLOAT32) || memcmp(s, r, count * 4))
		return 34;
	/* Broadcast out of place from rank 1: the root's sends fill its
	 * output too (mlap2p_isend_tee). */
	for (i = 0; i < count; i++)
		s[i] = (float)((i * 5 + (size_t)rank * 11) % 4096);
	memset(r, 0xa5, count * 4);
	if (mlap2p_broadcast(comm, s, r, count, MLAP2P_FLOAT32, 1))
		return 35;
	for (i = 0; i < count; i++)
		if (r[i] != (float)((i * 5 + 11) % 4096))
			return 36;
	free(s);
	free(r);
	return 0;
}

FIXTURE(solo) {
	int unused;
};

FIXTURE_SETUP(solo)
{
	self->unused = 0;
	env_defaults();
}

FIXTURE_TEARDOWN(solo)
{
	unsetenv("MLAP2P_CMA");
	unsetenv("MLAP2P_COLL_CHUNK");
	unsetenv("MLAP2P_PEER_TIMEOUT");
}

TEST_F_TIMEOUT(solo, all_reduce_64MiB_2_processes, 240)
{
	struct job j = { .n = 2, .fn = big_body };

	unsetenv("MLAP2P_COLL_CHUNK");	/* the default, 2 MiB */
	setenv("NCCL_BUFFSIZE", "4M", 1);
	ASSERT_EQ(0, job_run(&j, 230));
}

TEST_F_TIMEOUT(solo, all_reduce_64MiB_2_threads, 240)
{
	struct job j = { .n = 2, .threads = 1, .fn = big_body };

	unsetenv("MLAP2P_COLL_CHUNK");	/* the default, 2 MiB */
	setenv("NCCL_BUFFSIZE", "4M", 1);
	ASSERT_EQ(0, job_run(&j, 230));
}

/* MLAP2P_CMA=1: receivers offer their addresses, and sends write them
 * with process_vm_writev or split the message with the receiver. */
TEST_F_TIMEOUT(solo, all_reduce_64MiB_2_processes_cma, 240)
{
	struct job j = { .n = 2, .fn = big_body };

	unsetenv("MLAP2P_COLL_CHUNK");
	setenv("NCCL_BUFFSIZE", "4M", 1);
	setenv("MLAP2P_CMA", "1", 1);
	ASSERT_EQ(0, job_run(&j, 230));
	unsetenv("MLAP2P_CMA");
}

/* The default way for plain buffers: direct, by address. */
TEST_F_TIMEOUT(solo, all_reduce_64MiB_2_processes_direct_cma, 240)
{
	struct job j = { .n = 2, .fn = big_body };

	unsetenv("MLAP2P_COLL_CHUNK");
	unsetenv("MLAP2P_COLL_CMA_MIN");
	setenv("NCCL_BUFFSIZE", "4M", 1);
	ASSERT_EQ(0, job_run(&j, 230));
}

/*
 * ---- how ring steps go -------------------------------------------------
 *
 * Plain buffers across processes, MLAP2P_CMA=auto, 64 KiB units: the
 * steps of all-gather and broadcast go as plain sends (single copy from
 * MLAP2P_CMA_MIN), those of all-reduce, reduce-scatter and reduce through
 * the FIFO or straight into the receiver's scratch region (send_how in
 * lib/coll/ring.c).  The send links' single-copy counts say which; every
 * result is checked, on 2 and 3 processes.
 */
#define WAY_N	(256 * 1024)	/* floats per rank: 1 MiB */

enum { WAY_AG, WAY_AG_IP, WAY_BC, WAY_BC_IP, WAY_AR, WAY_RS, WAY_RD,
	WAY_CASES };

static int way_call(struct mlap2p_comm *comm, int n, int rank, int w,
		    float *s, float *r)
{
	switch (w) {
	case WAY_AG:
		return mlap2p_all_gather(comm, s, r, WAY_N, MLAP2P_FLOAT32);
	case WAY_AG_IP:
		memcpy(r + (size_t)rank * WAY_N, s, WAY_N * 4);
		return mlap2p_all_gather(comm, r + (size_t)rank * WAY_N, r,
					 WAY_N, MLAP2P_FLOAT32);
	case WAY_BC:
		return mlap2p_broadcast(comm, s, r, WAY_N, MLAP2P_FLOAT32, 1);
	case WAY_BC_IP:
		memcpy(r, s, WAY_N * 4);
		return mlap2p_broadcast(comm, r, r, WAY_N, MLAP2P_FLOAT32, 1);
	case WAY_AR:
		return mlap2p_all_reduce(comm, s, r, WAY_N, MLAP2P_FLOAT32,
					 MLAP2P_SUM);
	case WAY_RS:
		return mlap2p_reduce_scatter(comm, s, r, WAY_N / (size_t)n,
					     MLAP2P_FLOAT32, MLAP2P_SUM);
	default:
		return mlap2p_reduce(comm, s, r, WAY_N, MLAP2P_FLOAT32,
				     MLAP2P_SUM, 0);
	}
}

/* The value rank @q puts at element @i of its input. */
static float way_in(int q, size_t i)
{
	return (float)((i * 13 + (size_t)q * 101) % 2048);
}

/* Element @i of every rank's input, summed (exact: small integers). */
static float way_sum(int n, size_t i)
{
	float v = 0;
	int q;

	for (q = 0; q < n; q++)
		v += way_in(q, i);
	return v;
}

/* 0 when @r holds what case @w leaves in rank @rank's output. */
static int way_check(int n, int rank, int w, const float *r)
{
	size_t i, per = WAY_N / (size_t)n;

	for (i = 0; i < (size_t)n * WAY_N; i++) {
		float want;

		if (w == WAY_AG || w == WAY_AG_IP)
			want = way_in((int)(i / WAY_N), i % WAY_N);
		else if (i >= WAY_N)
			return 0;
		else if (w == WAY_BC || w == WAY_BC_IP)
			want = way_in(1, i);
		else if (w == WAY_RS && i >= per)
			return 0;
		else if (w == WAY_RS)
			want = way_sum(n, i + (size_t)rank * per);
		else if (w == WAY_RD && rank)
			return 0;
		else
			want = way_sum(n, i);
		if (r[i] != want) {
			fprintf(stderr, "# rank %d case %d: [%zu] %g, want %g\n",
				rank, w, i, r[i], want);
			return 1;
		}
	}
	return 0;
}

static int way_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	float *s = malloc(WAY_N * 4), *r = malloc((size_t)j->n * WAY_N * 4);
	unsigned long long ops[2], one[2];
	int w, ret = 0;
	size_t i;

	if (!s || !r)
		return 50;
	for (i = 0; i < WAY_N; i++)
		s[i] = way_in(rank, i);
	for (w = 0; w < WAY_CASES && !ret; w++) {
		memset(r, 0xa5, (size_t)j->n * WAY_N * 4);
		if (t_links_sum(comm, "->", &ops[0], &one[0]) && w)
			ret = 51;
		else if (way_call(comm, j->n, rank, w, s, r))
			ret = 52;
		else if (way_check(j->n, rank, w, r))
			ret = 53;
		else if (t_links_sum(comm, "->", &ops[1], &one[1]))
			ret = 54;
		else if (!w)
			ops[0] = one[0] = 0;	/* no link before the first */
		/*
		 * An all-gather's every unit (64 KiB or less, per lane) goes
		 * single copy: at least one per 64 KiB a rank sends, where
		 * the FIFO would give none.  On 2 ranks the same for the
		 * broadcast's root (rank 1), and none for rank 0, which only
		 * receives.  A reducing ring's steps may go single copy too,
		 * but only into the receiver's scratch region, so they are
		 * not counted on.
		 */
		if (!ret && (w == WAY_AG || w == WAY_AG_IP ||
			     (j->n == 2 && (w == WAY_BC || w == WAY_BC_IP))) &&
		    (w <= WAY_AG_IP || rank == 1 ?
		     one[1] - one[0] < (unsigned long long)(j->n - 1) *
				      (WAY_N * 4 / (64 * KiB)) :
		     one[1] != one[0])) {
			fprintf(stderr, "# rank %d case %d: %llu of %llu sends single copy\n",
				rank, w, one[1] - one[0], ops[1] - ops[0]);
			ret = 55;
		}
	}
	free(s);
	free(r);
	return ret;
}

FIXTURE(way) {
	struct job j;
};

FIXTURE_VARIANT(way) {
	int n;
};

FIXTURE_VARIANT_ADD(way, processes_2) { .n = 2 };
FIXTURE_VARIANT_ADD(way, processes_3) { .n = 3 };

FIXTURE_SETUP(way)
{
	env_defaults();
	setenv("MLAP2P_COLL_CHUNK", "64K", 1);
	setenv("MLAP2P_CMA", "auto", 1);
	memset(&self->j, 0, sizeof(self->j));
	self->j.n = variant->n;
	self->j.fn = way_body;
}

FIXTURE_TEARDOWN(way)
{
	unsetenv("MLAP2P_COLL_CHUNK");
	unsetenv("MLAP2P_CMA");
}

TEST_F_TIMEOUT(way, moving_steps_go_single_copy, 120)
{
	if (!t_cma_between_siblings())
		SKIP(return, "no cross-memory attach between siblings here");
	ASSERT_EQ(0, job_run(&self->j, 110));
}

/* ---- channels: every ring carries data ------------------------------- */

struct chans {
	int want;		/* rings the communicator should have */
};

static int chan_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	const struct chans *w = j->arg;
	static float b[MAXR][1 << 16];
	int order[MAXR], prev, next, ch, n = j->n;
	size_t i;

	for (i = 0; i < 1 << 16; i++)
		b[rank][i] = (float)(i % 1000 + (size_t)rank);
	if (mlap2p_all_reduce(comm, b[rank], b[rank], 1 << 16, MLAP2P_FLOAT32,
			      MLAP2P_SUM))
		return 40;
	for (i = 0; i < 1 << 16; i++)
		if (b[rank][i] != (float)(n * (i % 1000)) + (float)(n * (n - 1) / 2))
			return 41;
	for (ch = 0; ch < w->want; ch++) {
		struct mlap2p_conn_desc s, r;

		if (mlap2p_ring_get(comm, ch, order, &prev, &next) ||
		    mlap2p_conn_get(comm, ch, next, MLAP2P_DIR_SEND, &s) ||
		    mlap2p_conn_get(comm, ch, prev, MLAP2P_DIR_RECV, &r))
			return 42;
		/* 256 KiB in 4 KiB chunks over the lanes: steps on each. */
		if (!s.host->conn.step || !r.host->conn.step) {
			fprintf(stderr, "# rank %d: channel %d: send step %llu, recv step %llu\n",
				rank, ch, (unsigned long long)s.host->conn.step,
				(unsigned long long)r.host->conn.step);
			return 43;
		}
	}
	if (mlap2p_ring_get(comm, w->want, order, &prev, &next) != -ENOTCONN)
		return 44;
	return 0;
}

FIXTURE(chan) {
	struct job j;
	struct chans w;
};

FIXTURE_VARIANT(chan) {
	int n, threads, want;
	const char *min, *max;
};

/* The default: a ring and its reverse (NCCL_MIN/MAX_NCHANNELS). */
FIXTURE_VARIANT_ADD(chan, t3_default) { .n = 3, .threads = 1, .want = 2 };
FIXTURE_VARIANT_ADD(chan, p2_default) { .n = 2, .want = 2 };
FIXTURE_VARIANT_ADD(chan, t4_max1) { .n = 4, .threads = 1, .want = 1, .max = "1" };
FIXTURE_VARIANT_ADD(chan, t3_min4) { .n = 3, .threads = 1, .want = 4, .min = "4" };

FIXTURE_SETUP(chan)
{
	env_defaults();
	if (variant->min)
		setenv("NCCL_MIN_NCHANNELS", variant->min, 1);
	if (variant->max)
		setenv("NCCL_MAX_NCHANNELS", variant->max, 1);
	memset(&self->j, 0, sizeof(self->j));
	self->w.want = variant->want;
	self->j.n = variant->n;
	self->j.threads = variant->threads;
	self->j.fn = chan_body;
	self->j.arg = &self->w;
}

FIXTURE_TEARDOWN(chan)
{
	unsetenv("NCCL_MIN_NCHANNELS");
	unsetenv("NCCL_MAX_NCHANNELS");
}

TEST_F_TIMEOUT(chan, every_ring_carries_data, 60)
{
	ASSERT_EQ(0, job_run(&self->j, 50));
}

/* ---- argument checks ------------------------------------------------- */

static int einval(int ret, const char *field)
{
	if (ret != -EINVAL || errno != EINVAL) {
		fprintf(stderr, "# want -EINVAL for %s, got %d\n", field, ret);
		return 1;
	}
	if (!strstr(mlap2p_last_error(), field)) {
		fprintf(stderr, "# '%s' does not name %s\n", mlap2p_last_error(),
			field);
		return 1;
	}
	return 0;
}

static int args_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	float b[64] = { 0 };
	int bad = 0, n = j->n;

	(void)rank;
	bad |= einval(mlap2p_all_reduce(comm, b, b + 32, 0, 12, 0), "dtype");
	bad |= einval(mlap2p_all_reduce(comm, b, b + 32, 0, -1, 0), "dtype");
	bad |= einval(mlap2p_all_reduce(comm, b, b + 32, 0, MLAP2P_FLOAT32, 5), "op");
	bad |= einval(mlap2p_reduce(comm, b, b + 32, 0, MLAP2P_FLOAT32, -1, 0), "op");
	bad |= einval(mlap2p_reduce_scatter(comm, b, b + 32, 0, MLAP2P_INT8, 7), "op");
	bad |= einval(mlap2p_broadcast(comm, b, b, 0, MLAP2P_FLOAT32, n), "root");
	bad |= einval(mlap2p_broadcast(comm, b, b, 0, MLAP2P_FLOAT32, -1), "root");
	bad |= einval(mlap2p_reduce(comm, b, b, 0, MLAP2P_FLOAT32, 0, n), "root");
	bad |= einval(mlap2p_all_reduce(comm, NULL, b, 4, MLAP2P_FLOAT32, 0), "sendbuf");
	bad |= einval(mlap2p_all_reduce(comm, b, NULL, 4, MLAP2P_FLOAT32, 0), "recvbuf");
	bad |= einval(mlap2p_all_gather(comm, NULL, b, 1, MLAP2P_FLOAT32), "sendbuf");
	bad |= einval(mlap2p_all_to_all(comm, b, NULL, 1, MLAP2P_FLOAT32), "recvbuf");
	bad |= einval(mlap2p_all_reduce(comm, b, b + 1, 4, MLAP2P_FLOAT32, 0), "overlap");
	/* all-gather: in place is sendbuf == recvbuf + rank * count only */
	bad |= einval(mlap2p_all_gather(comm, b + 1, b, 4, MLAP2P_FLOAT32), "overlap");
	bad |= einval(mlap2p_reduce_scatter(comm, b, b + 1, 4, MLAP2P_FLOAT32, 0), "overlap");
	bad |= einval(mlap2p_all_to_all(comm, b, b, 2, MLAP2P_FLOAT32), "overlap");
	bad |= einval(mlap2p_all_reduce(NULL, b, b, 1, MLAP2P_FLOAT32, 0), "comm");
	if (bad)
		return 40;
	/* Nothing moved: a valid call with count 0 and NULL buffers works. */
	if (mlap2p_all_reduce(comm, NULL, NULL, 0, MLAP2P_FLOAT32, MLAP2P_SUM) ||
	    mlap2p_all_gather(comm, NULL, NULL, 0, MLAP2P_INT8) ||
	    mlap2p_reduce_scatter(comm, NULL, NULL, 0, MLAP2P_FLOAT32,
				  MLAP2P_SUM) ||
	    mlap2p_reduce(comm, NULL, NULL, 0, MLAP2P_FLOAT32, MLAP2P_SUM, 0) ||
	    mlap2p_broadcast(comm, NULL, NULL, 0, MLAP2P_FLOAT32, 1))
		return 41;
	/* ... whichever ranks pass buffers: nothing is sent after the header
	 * (the calls below would see a stray message). */
	if (mlap2p_all_gather(comm, rank ? b : NULL, rank ? b : NULL, 0,
			      MLAP2P_FLOAT32) ||
	    mlap2p_broadcast(comm, rank ? NULL : b, rank ? b : NULL, 0,
			     MLAP2P_FLOAT32, 0) ||
	    mlap2p_reduce(comm, rank ? NULL : b, rank ? b : NULL, 0,
			  MLAP2P_FLOAT32, MLAP2P_SUM, 1))
		return 44;
	/* Only the root's sendbuf and recvbuf matter. */
	b[0] = 3.0f;
	if (mlap2p_broadcast(comm, rank ? NULL : b, b + 1, 1, MLAP2P_FLOAT32, 0) ||
	    b[1] != 3.0f)
		return 42;
	if (mlap2p_reduce(comm, b, rank ? NULL : b + 2, 1, MLAP2P_FLOAT32,
			  MLAP2P_SUM, 0) || (!rank && b[2] != 3.0f * n))
		return 43;
	return 0;
}

TEST_F_TIMEOUT(solo, bad_arguments, 60)
{
	struct job j = { .n = 2, .threads = 1, .fn = args_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

/* ---- NCCL_ALGO ------------------------------------------------------- */

struct algo_case {
	const char *env;
	int ret;		/* of the first collective */
	const char *why;	/* in its message */
	int way;		/* index in t_coll_ways(), or -1 */
};

static const struct algo_case algo_cases[] = {
	/* NCCL's names, none of them here: the ring, as the docs say. */
	{ "Tree", 0, NULL, 0 },
	{ "tree,NVLS,CollnetDirect", 0, NULL, 0 },
	{ "Ring", 0, NULL, 0 },
	{ "^oneshot", 0, NULL, 0 },
	{ "^Ring,OneShot", -EINVAL, "leaves no algorithm", -1 },
	{ "Ring,Bogus", -EINVAL, "unknown algorithm 'Bogus'", -1 },
};

/* 100000 floats: above the one-shot, round the ring when it may. */
static int algo_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	const struct algo_case *a = j->arg;
	static float b[MAXR][100000];
	unsigned long long w[T_COLL_WAYS];
	int i, ret;

	for (i = 0; i < 100000; i++)
		b[rank][i] = (float)(rank + 1) * (float)(i & 255);
	ret = mlap2p_all_reduce(comm, b[rank], b[rank], 100000, MLAP2P_FLOAT32,
				MLAP2P_SUM);
	if (ret != a->ret || (a->why && !strstr(mlap2p_last_error(), a->why))) {
		fprintf(stderr, "# NCCL_ALGO=%s: rank %d: want %d, got %d: %s\n",
			a->env, rank, a->ret, ret, mlap2p_last_error());
		return 110;
	}
	if (a->ret)
		return 0;
	for (i = 0; i < 100000; i++)
		if (b[rank][i] != 3.0f * (float)(i & 255))
			return 111;
	if (t_coll_ways(comm, w) || w[a->way] != 1) {
		fprintf(stderr, "# NCCL_ALGO=%s: rank %d: not the way %d\n",
			a->env, rank, a->way);
		return 112;
	}
	return 0;
}

TEST_F_TIMEOUT(solo, nccl_algo_names, 60)
{
	for (size_t i = 0; i < sizeof(algo_cases) / sizeof(algo_cases[0]);
	     i++) {
		struct job j = { .n = 2, .threads = 1, .fn = algo_body,
				 .arg = &algo_cases[i] };

		setenv("NCCL_ALGO", algo_cases[i].env, 1);
		EXPECT_EQ(0, job_run(&j, 20)) TH_LOG("NCCL_ALGO=%s",
						     algo_cases[i].env);
	}
	unsetenv("NCCL_ALGO");
}

/* ---- the fast path after mlap2p_set_proto ---------------------------- */

/*
 * The 2-rank fast path keeps which sizes go LL or LL128 (api.c's
 * fast_end) until mlap2p_set_proto() changes the choice.  Forced to
 * SIMPLE after fast calls, the same calls must take the request path:
 * with the kept answer both ranks would send their header SIMPLE first,
 * each waiting for the other's receive, until the job's timeout.
 */
static int proto_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static const int protos[] = { MLAP2P_PROTO_AUTO, MLAP2P_PROTO_SIMPLE,
				      MLAP2P_PROTO_LL128, MLAP2P_PROTO_AUTO };
	float a[300], b[300];
	int k, i;

	(void)j;
	for (k = 0; k < 4; k++) {
		if (mlap2p_set_proto(comm, protos[k]))
			return 120;
		for (i = 0; i < 300; i++)
			a[i] = (float)(rank * 1000 + i);
		if (mlap2p_all_reduce(comm, a, b, 300, MLAP2P_FLOAT32,
				      MLAP2P_SUM))
			return 121;
		for (i = 0; i < 300; i++)
			if (b[i] != (float)(1000 + 2 * i))
				return 122;
		if (mlap2p_broadcast(comm, a, b, 2, MLAP2P_FLOAT32, 1))
			return 123;
		if (b[0] != 1000.0f || b[1] != 1001.0f)
			return 124;
	}
	return 0;
}

TEST_F_TIMEOUT(solo, fast_path_after_set_proto, 60)
{
	struct job j = { .n = 2, .fn = proto_body };

	ASSERT_EQ(0, job_run(&j, 30));
}

/* ---- the fast path meets the ring -------------------------------------- */

/*
 * A blocking 2-rank call takes the fast path (api.c's fast_small); the
 * same call of the other rank inside a group, or non-blocking, takes the
 * preamble and the ring.  They must meet: each collective, at sizes in
 * the one-shot's header (4 and 16 bytes), past it, at and past FAST_MAX,
 * rank @j->arg's calls grouped (pass 0) then non-blocking (pass 1), the
 * other's blocking (both blocking for -1).  Exact int32 sums.
 */
static int meet_want(int kind, int rank, size_t c, size_t i)
{
	switch (kind) {
	case C_AR:
	case C_REDUCE:
		return 100 + 2 * (int)i;
	case C_BCAST:
		return 100 + (int)i;
	case C_AG:
		return (int)(i / c) * 100 + (int)(i % c);
	default:	/* C_RS */
		return 100 + 2 * (rank * (int)c + (int)i);
	}
}

/* The non-blocking form of call(): int32 sum, root 1. */
static int meet_start(struct mlap2p_comm *comm, int kind, const void *s,
		      void *r, size_t c, struct mlap2p_request **req)
{
	const int t = MLAP2P_INT32, op = MLAP2P_SUM;

	switch (kind) {
	case C_AR:
		return mlap2p_iall_reduce(comm, s, r, c, t, op, req);
	case C_BCAST:
		return mlap2p_ibroadcast(comm, s, r, c, t, 1, req);
	case C_REDUCE:
		return mlap2p_ireduce(comm, s, r, c, t, op, 1, req);
	case C_AG:
		return mlap2p_iall_gather(comm, s, r, c, t, req);
	default:
		return mlap2p_ireduce_scatter(comm, s, r, c, t, op, req);
	}
}

static int meet_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static const size_t counts[] = { 0, 1, 4, 5, 300, 1024, 1100 };
	const int odd = *(const int *)j->arg;
	static int32_t s[2][2200], r[2][2200];
	int kind, k, pass, ret, end;
	size_t i, out;

	for (pass = 0; pass < 2; pass++)
	for (kind = C_AR; kind <= C_RS; kind++)
	for (k = 0; k < 7; k++) {
		size_t c = counts[k];
		struct mlap2p_request *req = NULL;

		for (i = 0; i < 2 * c; i++)
			s[rank][i] = rank * 100 + (int32_t)i;
		memset(r[rank], 0xa5, sizeof(r[rank]));
		if (rank != odd) {
			ret = call(comm, kind, s[rank], r[rank], c,
				   MLAP2P_INT32, MLAP2P_SUM, 1);
		} else if (!pass) {
			ret = mlap2p_group_start();
			if (!ret)
				ret = call(comm, kind, s[rank], r[rank], c,
					   MLAP2P_INT32, MLAP2P_SUM, 1);
			end = mlap2p_group_end();
			ret = ret ? ret : end;
		} else {
			ret = meet_start(comm, kind, s[rank], r[rank], c, &req);
			if (!ret)
				ret = mlap2p_request_wait(&req);
		}
		if (ret) {
			fprintf(stderr, "# rank %d: %s(count %zu), pass %d: %s: %s\n",
				rank, cname[kind], c, pass,
				mlap2p_strerror(ret), mlap2p_last_error());
			return 131;
		}
		if (kind == C_REDUCE && rank != 1)
			continue;
		out = kind == C_AG ? 2 * c : c;
		for (i = 0; i < out; i++)
			if (r[rank][i] != meet_want(kind, rank, c, i)) {
				fprintf(stderr, "# rank %d: %s(count %zu), pass %d: [%zu] = %d, want %d\n",
					rank, cname[kind], c, pass, i,
					r[rank][i], meet_want(kind, rank, c, i));
				return 132;
			}
	}
	return 0;
}

TEST_F_TIMEOUT(solo, fast_path_meets_the_ring, 60)
{
	for (int odd = 0; odd < 2; odd++) {
		struct job j = { .n = 2, .fn = meet_body, .arg = &odd };

		EXPECT_EQ(0, job_run(&j, 25)) TH_LOG("rank %d not blocking",
						     odd);
	}
}

/*
 * Small FIFOs: both ranks of the fast path send their header and data
 * before they receive, so the data must fit the FIFO's steps with the
 * header (api.c's fast_end).  With 4 KiB of LL128 (480 bytes a step) a
 * 4 KiB call would need 1 + 9 of its 8 steps and both ranks would wait
 * in their sends; it must take the request path instead.
 */
TEST_F_TIMEOUT(solo, fast_path_small_fifo, 60)
{
	for (int odd = -1; odd < 1; odd++) {
		struct job j = { .n = 2, .fn = meet_body, .arg = &odd };

		setenv("NCCL_LL_BUFFSIZE", "4K", 1);
		setenv("NCCL_LL128_BUFFSIZE", "4K", 1);
		EXPECT_EQ(0, job_run(&j, 25)) TH_LOG("odd %d", odd);
	}
	setenv("NCCL_LL_BUFFSIZE", "64K", 1);
	setenv("NCCL_LL128_BUFFSIZE", "60K", 1);
}

/* ---- a bad MLAP2P_COLL_CMA_MAX ---------------------------------------- */

/* The first collective fails with -EINVAL, naming the variable. */
static int cma_max_bad_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	float b[8] = { 1 };
	int ret = mlap2p_all_reduce(comm, b, b, 8, MLAP2P_FLOAT32, MLAP2P_SUM);

	if (ret != -EINVAL || errno != EINVAL ||
	    !strstr(mlap2p_last_error(), "MLAP2P_COLL_CMA_MAX")) {
		fprintf(stderr, "# MLAP2P_COLL_CMA_MAX=%s: rank %d: want %d, got %d: %s\n",
			(const char *)j->arg, rank, -EINVAL, ret,
			mlap2p_last_error());
		return 120;
	}
	return 0;
}

TEST_F_TIMEOUT(solo, cma_max_bad, 60)
{
	static const char *const bad[] = { "512Q", "-1", "2048G" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct job j = { .n = 2, .threads = 1, .fn = cma_max_bad_body,
				 .arg = (void *)bad[i] };

		setenv("MLAP2P_COLL_CMA_MAX", bad[i], 1);
		EXPECT_EQ(0, job_run(&j, 20)) TH_LOG("MLAP2P_COLL_CMA_MAX=%s",
						     bad[i]);
	}
	unsetenv("MLAP2P_COLL_CMA_MAX");
}

/* ---- mismatched calls ------------------------------------------------ */

struct mm {
	int odd;		/* the rank that calls something else */
	int how;		/* 0 another collective, 1 another count, 2 dtype,
				 * 3 and 4 another collective, where both
				 * send data right behind their headers */
};

/* How the error message names the call of a rank that is odd or not. */
static const char *const mm_names[5][2] = {
	{ "all_reduce(count 2, float32, sum) #1",
	  "broadcast(count 2, float32, root 0) #1" },
	{ "all_reduce(count 2, float32, sum) #1",
	  "all_reduce(count 1000, float32, sum) #1" },
	{ "all_reduce(count 2, float32, sum) #1",
	  "all_reduce(count 2, int32, sum) #1" },
	{ "broadcast(count 300, float32, root 1) #1",
	  "reduce(count 300, float32, sum, root 1) #1" },
	{ "all_gather(count 300, float32) #1",
	  "reduce_scatter(count 300, float32, sum) #1" },
};

/* The call of the rank that is odd (@odd) or not, in the way @how. */
static int mm_call(struct mlap2p_comm *comm, int how, int odd, float *b,
		   float *r)
{
	switch (how * 2 + odd) {
	case 1:
		return mlap2p_broadcast(comm, b, b, 2, MLAP2P_FLOAT32, 0);
	case 3:
		return mlap2p_all_reduce(comm, b, b, 1000, MLAP2P_FLOAT32,
					 MLAP2P_SUM);
	case 5:
		return mlap2p_all_reduce(comm, b, b, 2, MLAP2P_INT32,
					 MLAP2P_SUM);
	case 6:
		return mlap2p_broadcast(comm, b, r, 300, MLAP2P_FLOAT32, 1);
	case 7:
		return mlap2p_reduce(comm, b, r, 300, MLAP2P_FLOAT32,
				     MLAP2P_SUM, 1);
	case 8:
		return mlap2p_all_gather(comm, b, r, 300, MLAP2P_FLOAT32);
	case 9:
		return mlap2p_reduce_scatter(comm, b, r, 300, MLAP2P_FLOAT32,
					     MLAP2P_SUM);
	default:
		return mlap2p_all_reduce(comm, b, b, 2, MLAP2P_FLOAT32,
					 MLAP2P_SUM);
	}
}

static int mm_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	const struct mm *m = j->arg;
	float b[4096], r[4096];
	const char *mine = mm_names[m->how][rank == m->odd];
	const char *other = mm_names[m->how][rank != m->odd];
	char want[64];
	const char *e;
	int ret;

	memset(b, 0, sizeof(b));
	/* One good call first: sequence numbers agree. */
	if (mlap2p_all_reduce(comm, b, b, 2, MLAP2P_FLOAT32, MLAP2P_SUM))
		return 50;
	ret = mm_call(comm, m->how, rank == m->odd, b, r);
	if (ret != -EPROTO) {
		fprintf(stderr, "# rank %d: want -EPROTO, got %d\n", rank, ret);
		return 51;
	}
	e = mlap2p_last_error();
	snprintf(want, sizeof(want), "rank %d called", m->odd);
	if (!strstr(e, want) || !strstr(e, mine) || !strstr(e, other)) {
		fprintf(stderr, "# rank %d: message: %s\n", rank, e);
		return 52;
	}
	mlap2p_comm_abort(comm);
	return GONE;
}

FIXTURE(mismatch) {
	struct job j;
	struct mm m;
};

FIXTURE_VARIANT(mismatch) {
	int n, threads, odd, how;
};

FIXTURE_VARIANT_ADD(mismatch, t2_kind) { .n = 2, .threads = 1, .odd = 1, .how = 0 };
FIXTURE_VARIANT_ADD(mismatch, t2_count) { .n = 2, .threads = 1, .odd = 0, .how = 1 };
FIXTURE_VARIANT_ADD(mismatch, p2_dtype) { .n = 2, .odd = 1, .how = 2 };
FIXTURE_VARIANT_ADD(mismatch, t3_kind) { .n = 3, .threads = 1, .odd = 1, .how = 0 };
FIXTURE_VARIANT_ADD(mismatch, t4_count) { .n = 4, .threads = 1, .odd = 2, .how = 1 };
FIXTURE_VARIANT_ADD(mismatch, p4_kind) { .n = 4, .odd = 3, .how = 0 };
FIXTURE_VARIANT_ADD(mismatch, t2_fast_roots) { .n = 2, .threads = 1, .odd = 0, .how = 3 };
FIXTURE_VARIANT_ADD(mismatch, p2_fast_kind) { .n = 2, .odd = 1, .how = 4 };

FIXTURE_SETUP(mismatch)
{
	env_defaults();
	memset(&self->j, 0, sizeof(self->j));
	self->m.odd = variant->odd;
	self->m.how = variant->how;
	self->j.n = variant->n;
	self->j.threads = variant->threads;
	self->j.fn = mm_body;
	self->j.arg = &self->m;
}

FIXTURE_TEARDOWN(mismatch)
{
}

TEST_F_TIMEOUT(mismatch, every_rank_fails_naming_both, 60)
{
	ASSERT_EQ(0, job_run(&self->j, 50));
}

/* ---- a dead peer, an abort ------------------------------------------- */

static int dead_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static float b[1 << 16];
	struct timespec t0, t1;
	double s;
	int ret;

	if (mlap2p_all_reduce(comm, b, b, 1 << 16, MLAP2P_FLOAT32, MLAP2P_SUM))
		return 60;
	if (rank == j->n - 1) {
		/* Dies without a word, once the others are past #0 (a death
		 * while they still drain its last messages fails them too). */
		usleep(300 * 1000);
		_exit(0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = mlap2p_all_reduce(comm, b, b, 1 << 16, MLAP2P_FLOAT32, MLAP2P_SUM);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	if (ret != -ECONNRESET) {
		fprintf(stderr, "# rank %d: want -ECONNRESET, got %d: %s\n",
			rank, ret, mlap2p_last_error());
		return 61;
	}
	if (!strstr(mlap2p_last_error(), "rank 3") || s > 10) {
		fprintf(stderr, "# rank %d: after %.1f s: %s\n", rank, s,
			mlap2p_last_error());
		return 62;
	}
	/* job_run() keeps us until the other survivors are done too. */
	mlap2p_comm_abort(comm);
	return GONE;
}

TEST_F_TIMEOUT(solo, dead_peer_fails_every_rank, 60)
{
	struct job j = { .n = 4, .fn = dead_body };

	setenv("MLAP2P_PEER_TIMEOUT", "1s", 1);
	ASSERT_EQ(0, job_run(&j, 50));
}

/* The same where the all-reduce would go direct by address. */
TEST_F_TIMEOUT(solo, dead_peer_fails_every_rank_direct_cma, 60)
{
	struct job j = { .n = 4, .fn = dead_body };

	unsetenv("MLAP2P_COLL_CMA_MIN");
	setenv("MLAP2P_PEER_TIMEOUT", "1s", 1);
	ASSERT_EQ(0, job_run(&j, 50));
}

/* The same with a spin count that is not a multiple of 16: the clock
 * was read only when the idle count was one, so ranks 1 and 2 never
 * looked at rank 3 and waited for their neighbour's exit instead. */
TEST_F_TIMEOUT(solo, dead_peer_fails_every_rank_any_spin, 60)
{
	struct job j = { .n = 4, .fn = dead_body };

	setenv("MLAP2P_SPIN", "100", 1);
	setenv("MLAP2P_PEER_TIMEOUT", "1s", 1);
	ASSERT_EQ(0, job_run(&j, 50));
}

struct aborter {
	struct mlap2p_comm *comm;
};

static void *abort_later(void *arg)
{
	struct aborter *a = arg;
	struct timespec ts = { 0, 300 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	mlap2p_comm_abort(a->comm);
	return NULL;
}

static int abort_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static float b[2][1 << 16];
	struct aborter a = { comm };
	pthread_t t;
	int ret;

	(void)j;
	if (mlap2p_all_reduce(comm, b[rank], b[rank], 1 << 16, MLAP2P_FLOAT32,
			      MLAP2P_SUM))
		return 70;
	pthread_create(&t, NULL, abort_later, &a);
	/* Rank 1 never joins this one: rank 0 waits until the abort. */
	ret = rank ? 0 : mlap2p_all_reduce(comm, b[rank], b[rank], 1 << 16,
					   MLAP2P_FLOAT32, MLAP2P_SUM);
	pthread_join(t, NULL);
	if (ret != (rank ? 0 : -ECANCELED)) {
		fprintf(stderr, "# rank %d: want -ECANCELED, got %d\n", rank, ret);
		return GONE + 71;
	}
	return GONE;
}

TEST_F_TIMEOUT(solo, abort_ends_a_collective, 60)
{
	struct job j = { .n = 2, .threads = 1, .fn = abort_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

/*
 * An abort in the middle of a direct all-reduce by address between
 * threads: rank 0 is aborted during a loop of 16 MiB all-reduces, rank 1
 * 300 ms later.  Once rank 0's call has returned, rank 1 must neither
 * write into its output (checked here: rank 0 fills it with a pattern at
 * once and looks at it after rank 1 is done) nor read its input, which
 * rank 0 frees, or its freed communicator (both under ASan).  It used to
 * go on with its slice, reading and writing rank 0's buffers, and add to
 * the sync word of rank 0's freed communicator.
 */
struct wd {
	struct mlap2p_comm *comm;
	long ms;
};

static void *abort_after(void *arg)
{
	struct wd *w = arg;
	struct timespec ts = { w->ms / 1000, w->ms % 1000 * 1000000 };

	nanosleep(&ts, NULL);
	mlap2p_comm_abort(w->comm);
	return NULL;
}

static int wd_done;

static int withdraw_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	size_t count = 4 << 20, i;
	struct wd w = { comm, rank ? 600 : 300 };
	float *in = calloc(count, sizeof(float));
	float *out = calloc(count, sizeof(float));
	pthread_t t;
	int ret = 0, calls = 0, bad = 0;

	(void)j;
	if (!in || !out)
		return 120;
	/* The clock starts once the first call (connecting) is done. */
	if (mlap2p_all_reduce(comm, in, out, count, MLAP2P_FLOAT32,
			      MLAP2P_SUM))
		return 122;
	pthread_create(&t, NULL, abort_after, &w);
	while (!ret && calls < 100000) {
		ret = mlap2p_all_reduce(comm, in, out, count, MLAP2P_FLOAT32,
					MLAP2P_SUM);
		calls++;
	}
	/* Rank 0's buffers are its caller's again: the input goes back to
	 * the heap (ASan), the output gets a pattern. */
	free(in);
	if (!rank)
		memset(out, 0x5a, count * sizeof(float));
	else
		__atomic_store_n(&wd_done, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	if (!rank) {
		while (!__atomic_load_n(&wd_done, __ATOMIC_ACQUIRE))
			usleep(1000);
		for (i = 0; i < count * sizeof(float); i++)
			bad += ((unsigned char *)out)[i] != 0x5a;
	}
	free(out);
	if (ret != -ECANCELED || bad) {
		fprintf(stderr, "# rank %d: %d more calls, then %d (want -ECANCELED); %d bytes written after the return: %s\n",
			rank, calls, ret, bad, mlap2p_last_error());
		return GONE + 121;
	}
	return GONE;
}

/* Three times: the abort lands at a different point of a call each. */
TEST_F_TIMEOUT(solo, abort_withdraws_direct_cma_buffers, 90)
{
	unsetenv("MLAP2P_COLL_CMA_MIN");
	for (int i = 0; i < 3; i++) {
		struct job j = { .n = 2, .threads = 1, .fn = withdraw_body };

		wd_done = 0;
		ASSERT_EQ(0, job_run(&j, 25));
	}
}

/* ---- direct: buffers from mlap2p_mem_alloc ---------------------------- */

struct dcase {
	int dt, op;
	size_t count;
};

static const struct dcase dcases[] = {
	{ MLAP2P_FLOAT32, MLAP2P_SUM, 100003 },
	{ MLAP2P_FLOAT32, MLAP2P_AVG, 4097 },
	{ MLAP2P_BFLOAT16, MLAP2P_SUM, 30001 },
	{ MLAP2P_FLOAT16, MLAP2P_MAX, 8193 },
	{ MLAP2P_FP8_E4M3, MLAP2P_AVG, 20011 },
	{ MLAP2P_FLOAT64, MLAP2P_MIN, 5003 },
	{ MLAP2P_INT32, MLAP2P_AVG, 7001 },
	{ MLAP2P_INT8, MLAP2P_PROD, 65537 },
	{ MLAP2P_UINT64, MLAP2P_SUM, 1031 },
	/* Several 1 MiB steps, not a whole number of blocks. */
	{ MLAP2P_FLOAT32, MLAP2P_SUM, 1000003 },
};

#define DMAX_BYTES	(1000003 * 4 + 64)

/* The direct way by address (MLAP2P_COLL_CMA_MIN 8K): */
enum { CMA_OFF, CMA_ON, CMA_REFUSED, CMA_ENV0 };

struct dmode {
	int plain;		/* which rank's buffers are malloc'd, -1
				 * none, -2 all */
	int direct;		/* MLAP2P_COLL_DIRECT */
	int cma;		/* CMA_*: off, on, refused by the kernel
				 * (t_refuse_cma), MLAP2P_CMA=0 */
	int threads;
};

/* Which all-reduces go direct: regions everywhere, or (from 8 KiB, the
 * least case) by address, which MLAP2P_CMA=0 leaves to threads. */
static int dmode_direct(const struct dmode *m)
{
	if (!m->direct)
		return 0;
	return m->plain == -1 || m->cma == CMA_ON ||
	       (m->cma == CMA_ENV0 && m->threads);
}

/* Case @k of @d on @n ranks into @c, every rank's input generated; our
 * own copied to @s, and @rb's bytes past the result (all of them, out of
 * place) set to 0xa5. */
static void dcase_setup(struct ctx *c, int n, int rank, int k,
			const struct dcase *d, unsigned char *s,
			unsigned char *rb, int in)
{
	size_t es = mlap2p_dtype_size(d->dt), b = d->count * es;
	int r;

	c->n = n;
	c->rank = rank;
	c->kind = C_AR;
	c->dt = d->dt;
	c->op = d->op;
	c->es = es;
	c->count = d->count;
	for (r = 0; r < n; r++)
		gen(c->in[r], d->count, d->dt, r, k);
	memcpy(s, c->in[rank], b);
	memset(rb + (in ? b : 0), 0xa5, in ? 64 : b + 64);
}

/* Case @d's all-reduce from @s into @rb: 0, or 1 said why. */
static int dcase_call(struct mlap2p_comm *comm, int rank,
		      const struct dcase *d, unsigned char *s,
		      unsigned char *rb)
{
	if (!mlap2p_all_reduce(comm, s, rb, d->count, d->dt, d->op))
		return 0;
	fprintf(stderr, "# rank %d: all_reduce(%zu %s %s): %s\n", rank,
		d->count, mlap2p_dtype_name(d->dt), mlap2p_redop_name(d->op),
		mlap2p_last_error());
	return 1;
}

/* 0 when @rb holds @want's @b bytes and no more; else 1, said where. */
static int dcase_differs(int rank, const struct dcase *d, int in,
			 const unsigned char *rb, const unsigned char *want,
			 size_t b)
{
	size_t i;

	if (!memcmp(rb, want, b) && !memcmp(rb + b, "\xa5\xa5\xa5\xa5", 4))
		return 0;
	for (i = 0; i < b && rb[i] == want[i]; i++)
		;
	fprintf(stderr, "# rank %d: all_reduce(%zu %s %s, %s): byte %zu of %zu is %02x, want %02x\n",
		rank, d->count, mlap2p_dtype_name(d->dt),
		mlap2p_redop_name(d->op), in ? "in place" : "out of place", i,
		b, i < b ? rb[i] : 0, i < b ? want[i] : 0);
	return 1;
}

/* @n ranks' inputs (c->in), our sendbuf and recvbuf, @maxb bytes each,
 * the two from mlap2p_mem_alloc when @reg.  0, or 1 when one failed. */
static int dbufs_get(struct mlap2p_comm *comm, struct ctx *c, int n, int reg,
		     size_t maxb, unsigned char **sb, unsigned char **rb)
{
	int r;

	memset(c, 0, sizeof(*c));
	for (r = 0; r < n; r++)
		if (!(c->in[r] = malloc(maxb)))
			return 1;
	if (reg)
		return mlap2p_mem_alloc(comm, maxb, (void **)sb) ||
		       mlap2p_mem_alloc(comm, maxb, (void **)rb);
	*sb = malloc(maxb);
	*rb = malloc(maxb);
	return !*sb || !*rb;
}

/* What dbufs_get() took (regions go with the communicator). */
static void dbufs_put(struct ctx *c, int n, int reg, unsigned char *sb,
		      unsigned char *rb)
{
	if (!reg) {
		free(sb);
		free(rb);
	}
	for (int r = 0; r < n; r++)
		free(c->in[r]);
}

static int direct_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	const struct dmode *m = j->arg;
	size_t maxb = DMAX_BYTES;
	int n = j->n, reg = m->plain != rank && m->plain != -2;
	int direct = dmode_direct(m);
	int ip, in, k, ret;
	unsigned char *sb, *rb, *want = malloc(maxb);
	struct ctx c;
	uint64_t s0, s1;

	if (m->cma == CMA_REFUSED && t_refuse_cma())
		return 79;
	if (dbufs_get(comm, &c, n, reg, maxb, &sb, &rb) || !want)
		return 81;
	for (k = 0; k < (int)(sizeof(dcases) / sizeof(dcases[0])); k++)
	for (ip = 0; ip < 3; ip++) {
		const struct dcase *d = &dcases[k];
		unsigned char *s;
		size_t es = mlap2p_dtype_size(d->dt), b = d->count * es;

		/* Out of place, in place, and in place on odd ranks only
		 * (outputs stored both ways in one call). */
		in = ip == 2 ? rank & 1 : ip;
		s = in ? rb : sb;
		dcase_setup(&c, n, rank, k, d, s, rb, in);
		c.oneshot = direct;
		if (ch1_steps(comm, rank, &s0) && k + ip)
			return 82;
		if (dcase_call(comm, rank, d, s, rb))
			return 83;
		/* The first call connected the rings. */
		if (ch1_steps(comm, rank, &s1))
			return 84;
		if (!k && !ip)
			s0 = s1;
		/* Direct: x0 op x1 ... op x[n-1] (the one-shot's order);
		 * else the ring's. */
		for (c.nrings = 0; c.nrings < 4 &&
		     !mlap2p_ring_get(comm, c.nrings, c.rings[c.nrings], NULL,
				      NULL); c.nrings++)
			;
		expect(&c, want);
		if (dcase_differs(rank, d, in, rb, want, b))
			return 85;
		/* Direct as dmode_direct() says, else the ring (whose
		 * lanes carry channel 1 from 8 KiB on).  Refused, the first
		 * call tried and went round the ring: every result exact. */
		if ((k || ip) && b >= 8192 && (s1 == s0) != direct) {
			fprintf(stderr, "# rank %d: all_reduce(%zu %s): channel 1 sent %llu steps: the %s ran\n",
				rank, b, mlap2p_dtype_name(d->dt),
				(unsigned long long)(s1 - s0),
				s1 == s0 ? "direct algorithm" : "ring");
			return 86;
		}
	}
	/* A count that differs still fails both ranks, naming them. */
	ret = mlap2p_all_reduce(comm, sb, rb, 5000 + (size_t)rank,
				MLAP2P_FLOAT32, MLAP2P_SUM);
	if (ret != -EPROTO || !strstr(mlap2p_last_error(), "mismatch")) {
		fprintf(stderr, "# rank %d: want -EPROTO, got %d: %s\n", rank,
			ret, mlap2p_last_error());
		return 87;
	}
	dbufs_put(&c, n, reg, sb, rb);
	free(want);
	return 0;
}

FIXTURE(direct) {
	struct job j;
	struct dmode m;
};

FIXTURE_VARIANT(direct) {
	int n, threads, plain, direct, cma;
};

FIXTURE_VARIANT_ADD(direct, processes) { .n = 2, .threads = 0, .plain = -1, .direct = 1 };
FIXTURE_VARIANT_ADD(direct, threads) { .n = 2, .threads = 1, .plain = -1, .direct = 1 };
FIXTURE_VARIANT_ADD(direct, rank0_plain) { .n = 2, .threads = 0, .plain = 0, .direct = 1 };
FIXTURE_VARIANT_ADD(direct, rank1_plain) { .n = 2, .threads = 1, .plain = 1, .direct = 1 };
FIXTURE_VARIANT_ADD(direct, turned_off) { .n = 2, .threads = 0, .plain = -1, .direct = 0 };
FIXTURE_VARIANT_ADD(direct, processes_3) { .n = 3, .threads = 0, .plain = -1, .direct = 1 };
FIXTURE_VARIANT_ADD(direct, threads_4) { .n = 4, .threads = 1, .plain = -1, .direct = 1 };
/* One plain rank anywhere on the ring: every rank runs the ring. */
FIXTURE_VARIANT_ADD(direct, rank1_plain_3) { .n = 3, .threads = 0, .plain = 1, .direct = 1 };
FIXTURE_VARIANT_ADD(direct, rank3_plain_4) { .n = 4, .threads = 1, .plain = 3, .direct = 1 };
/* By address: plain buffers, or some plain and some regions. */
FIXTURE_VARIANT_ADD(direct, cma_processes) { .n = 2, .threads = 0, .plain = -2, .direct = 1, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(direct, cma_threads) { .n = 2, .threads = 1, .plain = -2, .direct = 1, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(direct, cma_processes_3) { .n = 3, .threads = 0, .plain = -2, .direct = 1, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(direct, cma_threads_4) { .n = 4, .threads = 1, .plain = -2, .direct = 1, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(direct, cma_rank1_plain_3) { .n = 3, .threads = 0, .plain = 1, .direct = 1, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(direct, cma_turned_off) { .n = 2, .threads = 0, .plain = -2, .direct = 0, .cma = CMA_ON };
/* The kernel refuses every read: the first call finds out and every call
 * goes round the ring. */
FIXTURE_VARIANT_ADD(direct, cma_refused) { .n = 2, .threads = 0, .plain = -2, .direct = 1, .cma = CMA_REFUSED };
FIXTURE_VARIANT_ADD(direct, cma_refused_3) { .n = 3, .threads = 0, .plain = -2, .direct = 1, .cma = CMA_REFUSED };
/* MLAP2P_CMA=0: processes go round the ring, threads still direct. */
FIXTURE_VARIANT_ADD(direct, cma_env0_processes) { .n = 2, .threads = 0, .plain = -2, .direct = 1, .cma = CMA_ENV0 };
FIXTURE_VARIANT_ADD(direct, cma_env0_threads) { .n = 2, .threads = 1, .plain = -2, .direct = 1, .cma = CMA_ENV0 };

FIXTURE_SETUP(direct)
{
	env_defaults();
	setenv("MLAP2P_COLL_DIRECT", variant->direct ? "1" : "0", 1);
	/* Both store paths: streaming from 64 KiB on. */
	setenv("MLAP2P_NT_MIN", "64K", 1);
	if (variant->cma != CMA_OFF)
		setenv("MLAP2P_COLL_CMA_MIN", "8K", 1);
	/* Direct by address: blocks of 256 KiB (DIRECT_CMA_BLOCK) that do
	 * not divide the slices.  (Ring units that large would leave
	 * channel 1 idle below 600 KiB, and it shows that the ring ran.) */
	if (variant->cma == CMA_ON && variant->direct)
		setenv("MLAP2P_COLL_CHUNK", "300K", 1);
	if (variant->cma == CMA_ENV0)
		setenv("MLAP2P_CMA", "0", 1);
	self->m.plain = variant->plain;
	self->m.direct = variant->direct;
	self->m.cma = variant->cma;
	self->m.threads = variant->threads;
	memset(&self->j, 0, sizeof(self->j));
	self->j.n = variant->n;
	self->j.threads = variant->threads;
	self->j.fn = direct_body;
	self->j.arg = &self->m;
}

FIXTURE_TEARDOWN(direct)
{
	unsetenv("MLAP2P_COLL_DIRECT");
	unsetenv("MLAP2P_NT_MIN");
	unsetenv("MLAP2P_CMA");
}

TEST_F_TIMEOUT(direct, exact_and_taken_when_it_should, 120)
{
	ASSERT_EQ(0, job_run(&self->j, 110));
}

/*
 * ---- the 2-rank one-shot, direct where that is cheaper ----------------
 *
 * Above FAST_MAX (4 KiB) and up to MLAP2P_COLL_ONESHOT_MAX, a 2-rank
 * all-reduce is a one-shot; it goes the direct way instead when every
 * rank offers it: buffers that are regions, ranks that are threads of one
 * process, or plain buffers all-reduced in place (a peer would otherwise
 * read a buffer its owner has just written).  Out of place across
 * processes, or with one rank in place and one not, it stays a one-shot;
 * so does a one-shot NCCL_ALGO forces on 3 ranks.  The collectives' line
 * of mlap2p_dump_state() says which way each call ran.  The first call
 * is a floating AVG: refused (t_refuse_cma), it is the one that tries,
 * finds out and goes back to the one-shot, with its premultiplied input.
 */
enum { OW_IN_PLACE, OW_OUT, OW_MIXED };

struct ow_mode {
	int how;		/* OW_*: all in place, none, rank 0 only */
	int reg;		/* buffers from mlap2p_mem_alloc */
	int cma;		/* CMA_ON, CMA_REFUSED or CMA_ENV0 */
	int threads;
	int dear;		/* system calls dear (MLAP2P_CMA_SYSCALL_NS 0) */
	int setMax;		/* MLAP2P_COLL_CMA_MAX=cmaMax (0: no limit) */
	size_t cmaMax;
};

static const struct dcase ow_cases[] = {
	{ MLAP2P_FLOAT32, MLAP2P_AVG, 4097 },
	{ MLAP2P_FLOAT32, MLAP2P_SUM, 1025 },	/* 4 KiB + 4 */
	{ MLAP2P_BFLOAT16, MLAP2P_SUM, 12289 },
	{ MLAP2P_INT32, MLAP2P_AVG, 7001 },
	{ MLAP2P_FLOAT64, MLAP2P_MAX, 8192 },	/* 64 KiB, the most */
};

/* The way (index in t_coll_ways()) @b bytes take on @n ranks: direct by
 * address from MLAP2P_COLL_CMA_MIN (64 KiB) whatever the buffers, below
 * MLAP2P_COLL_CMA_MAX (set, or 512 KiB for processes where a system call
 * is dear), and then nothing below MLAP2P_COLL_CMA_MIN. */
static int ow_way(const struct ow_mode *m, int n, size_t b)
{
	size_t max = m->setMax ? m->cmaMax :
		     m->dear && !m->threads ? 512 * KiB : 0;

	if (n != 2)
		return 1;
	if (m->reg)
		return 3;
	if (m->cma == CMA_REFUSED || (m->cma == CMA_ENV0 && !m->threads))
		return 1;
	if (max)
		return b >= 64 * KiB && b < max ? 4 : 1;
	return m->threads || m->how == OW_IN_PLACE || b >= 64 * KiB ? 4 : 1;
}

static int ow_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static const char *const names[T_COLL_WAYS] = {
		"ring", "one-shot", "pairs", "direct (regions)",
		"direct by address",
	};
	const struct ow_mode *m = j->arg;
	size_t maxb = 64 * KiB + 64;
	unsigned char *sb, *rb, *want = malloc(maxb), *s;
	unsigned long long w0[T_COLL_WAYS], w1[T_COLL_WAYS];
	int n = j->n, k, in, way, q;
	struct ctx c;

	if (m->cma == CMA_REFUSED && t_refuse_cma())
		return 60;
	if (dbufs_get(comm, &c, n, m->reg, maxb, &sb, &rb) || !want)
		return 61;
	in = m->how == OW_IN_PLACE || (m->how == OW_MIXED && !rank);
	for (k = 0; k < (int)(sizeof(ow_cases) / sizeof(ow_cases[0])); k++) {
		const struct dcase *d = &ow_cases[k];
		size_t b = d->count * mlap2p_dtype_size(d->dt);

		way = ow_way(m, n, b);
		s = in ? rb : sb;
		dcase_setup(&c, n, rank, k, d, s, rb, in);
		c.oneshot = 1;	/* every way reduces x0 op x1 ... */
		if (t_coll_ways(comm, w0)) {
			if (k)
				return 63;
			/* No collective yet, no line. */
			memset(w0, 0, sizeof(w0));
		}
		if (dcase_call(comm, rank, d, s, rb))
			return 65;
		if (t_coll_ways(comm, w1))
			return 63;
		expect(&c, want);
		if (dcase_differs(rank, d, in, rb, want, b))
			return 66;
		for (q = 0; q < T_COLL_WAYS; q++)
			if (w1[q] - w0[q] != (q == way)) {
				fprintf(stderr, "# rank %d: all_reduce(%zu %s %s): %llu more %s, want the %s\n",
					rank, b, mlap2p_dtype_name(d->dt),
					mlap2p_redop_name(d->op),
					w1[q] - w0[q], names[q], names[way]);
				return 67;
			}
	}
	dbufs_put(&c, n, m->reg, sb, rb);
	free(want);
	return 0;
}

FIXTURE(oneshot_way) {
	struct job j;
	struct ow_mode m;
};

FIXTURE_VARIANT(oneshot_way) {
	int n, threads, how, reg, cma, dear, setMax;
	size_t cmaMax;
};

FIXTURE_VARIANT_ADD(oneshot_way, processes_in_place) { .how = OW_IN_PLACE, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, processes_out_of_place) { .how = OW_OUT, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, processes_mixed) { .how = OW_MIXED, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, threads_out_of_place) { .threads = 1, .how = OW_OUT, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, threads_mixed) { .threads = 1, .how = OW_MIXED, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, regions_out_of_place) { .how = OW_OUT, .reg = 1, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, refused_in_place) { .how = OW_IN_PLACE, .cma = CMA_REFUSED };
FIXTURE_VARIANT_ADD(oneshot_way, cma_env0_in_place) { .how = OW_IN_PLACE, .cma = CMA_ENV0 };
FIXTURE_VARIANT_ADD(oneshot_way, cma_env0_threads) { .threads = 1, .how = OW_OUT, .cma = CMA_ENV0 };
/* Dear system calls: processes by address from 64 KiB only (and below
 * 512 KiB); threads, whose way by address makes none, as before. */
FIXTURE_VARIANT_ADD(oneshot_way, dear_in_place) { .how = OW_IN_PLACE, .cma = CMA_ON, .dear = 1 };
FIXTURE_VARIANT_ADD(oneshot_way, dear_mixed) { .how = OW_MIXED, .cma = CMA_ON, .dear = 1 };
FIXTURE_VARIANT_ADD(oneshot_way, dear_threads) { .threads = 1, .how = OW_IN_PLACE, .cma = CMA_ON, .dear = 1 };
/* MLAP2P_COLL_CMA_MAX set: below it only, whatever the cost, threads
 * too; 0 (no limit) where calls are dear is the way of cheap ones. */
FIXTURE_VARIANT_ADD(oneshot_way, cma_max_in_place) { .how = OW_IN_PLACE, .cma = CMA_ON, .setMax = 1, .cmaMax = 64 * KiB };
FIXTURE_VARIANT_ADD(oneshot_way, cma_max_threads) { .threads = 1, .how = OW_OUT, .cma = CMA_ON, .setMax = 1, .cmaMax = 64 * KiB + 1 };
FIXTURE_VARIANT_ADD(oneshot_way, dear_cma_max_0) { .how = OW_IN_PLACE, .cma = CMA_ON, .dear = 1, .setMax = 1 };
/* NCCL_ALGO=OneShot on 3 ranks: the one-shot, as asked. */
FIXTURE_VARIANT_ADD(oneshot_way, forced_3_threads) { .n = 3, .threads = 1, .how = OW_IN_PLACE, .cma = CMA_ON };
FIXTURE_VARIANT_ADD(oneshot_way, forced_3_regions) { .n = 3, .how = OW_OUT, .reg = 1, .cma = CMA_ON };

FIXTURE_SETUP(oneshot_way)
{
	env_defaults();
	/* The defaults: 2 MiB chunks, one-shot to 64 KiB, by address from
	 * 64 KiB (so below it only as above). */
	unsetenv("MLAP2P_COLL_CHUNK");
	unsetenv("MLAP2P_COLL_CMA_MIN");
	if (variant->cma == CMA_ENV0)
		setenv("MLAP2P_CMA", "0", 1);
	if (variant->n)
		setenv("NCCL_ALGO", "OneShot", 1);
	if (variant->dear)
		setenv("MLAP2P_CMA_SYSCALL_NS", "0", 1);
	if (variant->setMax) {
		char v[32];

		snprintf(v, sizeof(v), "%zu", variant->cmaMax);
		setenv("MLAP2P_COLL_CMA_MAX", v, 1);
	}
	self->m.dear = variant->dear;
	self->m.setMax = variant->setMax;
	self->m.cmaMax = variant->cmaMax;
	self->m.how = variant->how;
	self->m.reg = variant->reg;
	self->m.cma = variant->cma;
	self->m.threads = variant->threads;
	memset(&self->j, 0, sizeof(self->j));
	self->j.n = variant->n ? variant->n : 2;
	self->j.threads = variant->threads;
	self->j.fn = ow_body;
	self->j.arg = &self->m;
}

FIXTURE_TEARDOWN(oneshot_way)
{
	unsetenv("MLAP2P_CMA");
	unsetenv("MLAP2P_COLL_CMA_MAX");
	unsetenv("MLAP2P_COLL_CHUNK");
	unsetenv("NCCL_ALGO");
}

TEST_F_TIMEOUT(oneshot_way, exact_and_direct_when_it_should, 60)
{
	ASSERT_EQ(0, job_run(&self->j, 50));
}

/*
 * ---- direct: a forged peer --------------------------------------------
 *
 * Rank 1 takes part in a first, honest direct all-reduce, then plays the
 * second by hand with mlap2p_send/recv: it echoes rank 0's header (which
 * offers), answers rank 0's handles with a forged copy of them, and ends
 * as the case says.  Rank 0 must fail with the exact errno, naming rank 1.
 * A rank 0 that cannot use the handles still trades done words, its own
 * carrying why (EPROTO), and rank 1 checks that word.
 */
enum { F_SIZE, F_OFFSET, F_DONE, F_DIE, F_FAILS };

struct forge {
	int how;
	const char *want;	/* in rank 0's mlap2p_last_error() */
};

static int forge_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	const struct forge *f = j->arg;
	size_t count = 4096, b = count * 4;	/* past the one-shot */
	uint64_t h[HDR_BYTES / 8], w;
	struct ddesc d;
	float *sb, *rb;
	int ret;

	if (mlap2p_mem_alloc(comm, b, (void **)&sb) ||
	    mlap2p_mem_alloc(comm, b, (void **)&rb))
		return 90;
	for (size_t i = 0; i < count; i++)
		sb[i] = (float)(i % 97) + (float)rank;
	if (mlap2p_all_reduce(comm, sb, rb, count, MLAP2P_FLOAT32, MLAP2P_SUM) ||
	    rb[5] != 11.0f)
		return 91;
	if (rank == 0) {
		ret = mlap2p_all_reduce(comm, sb, rb, count, MLAP2P_FLOAT32,
					MLAP2P_SUM);
		if (ret != (f->how == F_DIE ? -ECONNRESET : -EPROTO) ||
		    !strstr(mlap2p_last_error(), f->want)) {
			fprintf(stderr, "# rank 0: want %s with \"%s\", got %s: %s\n",
				f->how == F_DIE ? "-ECONNRESET" : "-EPROTO",
				f->want, mlap2p_strerror(ret),
				mlap2p_last_error());
			return 92;
		}
		mlap2p_comm_abort(comm);
		return GONE;
	}
	if (mlap2p_recv(comm, h, sizeof(h), 0) ||
	    h[2] != (DIRECT_OFFER | DIRECT_MAP) ||
	    mlap2p_send(comm, h, sizeof(h), 0) ||
	    mlap2p_recv(comm, &d, sizeof(d), 0))
		return 93;
	if (f->how == F_SIZE)
		d.bytes -= 4;
	if (f->how == F_OFFSET)
		d.offIn = 1ULL << 40;
	if (mlap2p_send(comm, &d, sizeof(d), 0))
		return 94;
	if (f->how == F_DIE)
		_exit(0);
	/* Rank 0's done word (#1; the errno above bit 32), then ours. */
	if (mlap2p_recv(comm, &w, sizeof(w), 0) ||
	    w != ((f->how == F_SIZE || f->how == F_OFFSET ?
		   (uint64_t)EPROTO << 32 : 0) | 1)) {
		fprintf(stderr, "# rank 1: rank 0's done word is %#llx\n",
			(unsigned long long)w);
		return 95;
	}
	w = f->how == F_DONE ? 6 :
	    f->how == F_FAILS ? (uint64_t)ENOMEM << 32 | 1 : 1;
	if (mlap2p_send(comm, &w, sizeof(w), 0))
		return 96;
	mlap2p_comm_abort(comm);
	return GONE;
}

FIXTURE(forge) {
	struct job j;
	struct forge f;
};

FIXTURE_VARIANT(forge) {
	int threads, how;
	const char *want;
};

FIXTURE_VARIANT_ADD(forge, size) {
	.threads = 1, .how = F_SIZE,
	.want = "rank 0: rank 1 offered 16380 bytes for a 16384-byte all-reduce",
};
FIXTURE_VARIANT_ADD(forge, offset) {
	.threads = 0, .how = F_OFFSET,
	.want = "rank 0: rank 1 offered 16384 bytes at 1099511627776 of a ",
};
FIXTURE_VARIANT_ADD(forge, done_word) {
	.threads = 0, .how = F_DONE,
	.want = "rank 0: rank 1 ended all-reduce #6, this rank #1",
};
FIXTURE_VARIANT_ADD(forge, peer_fails) {
	.threads = 1, .how = F_FAILS,
	.want = "rank 0: rank 1 could not take part in all-reduce #1: Cannot allocate memory",
};
FIXTURE_VARIANT_ADD(forge, peer_dies) {
	.threads = 0, .how = F_DIE,
	.want = "peer rank 1 (pid ",
};

FIXTURE_SETUP(forge)
{
	env_defaults();
	setenv("MLAP2P_PEER_TIMEOUT", "1s", 1);
	self->f.how = variant->how;
	self->f.want = variant->want;
	memset(&self->j, 0, sizeof(self->j));
	self->j.n = 2;
	self->j.threads = variant->threads;
	self->j.fn = forge_body;
	self->j.arg = &self->f;
}

FIXTURE_TEARDOWN(forge)
{
	unsetenv("MLAP2P_PEER_TIMEOUT");
}

TEST_F_TIMEOUT(forge, rank0_fails_naming_rank1, 60)
{
	ASSERT_EQ(0, job_run(&self->j, 50));
}

/* ---- groups ---------------------------------------------------------- */

#define GROUP_BIG	50000	/* elements: past the one-shot */

/* j->arg non-NULL: GROUP_BIG elements per all-reduce, else 5000. */
static int group_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	int peer = !rank, i, ret, count = j->arg ? GROUP_BIG : 5000;
	static int32_t a[2][GROUP_BIG], b[2][GROUP_BIG];
	static int32_t p2p[2][3000], got[2][3000];
	int32_t *x = a[rank], *y = b[rank];

	for (i = 0; i < count; i++) {
		x[i] = i + rank;
		y[i] = 3 * i - rank;
	}
	for (i = 0; i < 3000; i++)
		p2p[rank][i] = i * 11 + rank;
	if (mlap2p_connect_ring(comm, 1))
		return 79;
	/* Rank 0 posts its send before the collectives, rank 1 after them:
	 * the group's send/recv go first on both sides. */
	mlap2p_group_start();
	if (!rank && mlap2p_send(comm, p2p[rank], sizeof(p2p[0]), peer))
		return 80;
	if (mlap2p_all_reduce(comm, x, x, count, MLAP2P_INT32, MLAP2P_SUM) ||
	    mlap2p_all_reduce(comm, y, y, count, MLAP2P_INT32, MLAP2P_MAX))
		return 81;
	if (mlap2p_recv(comm, got[rank], sizeof(got[0]), peer))
		return 82;
	if (rank && mlap2p_send(comm, p2p[rank], sizeof(p2p[0]), peer))
		return 80;
	ret = mlap2p_group_end();
	if (ret) {
		fprintf(stderr, "# group_end: %d %s\n", ret, mlap2p_last_error());
		return 83;
	}
	for (i = 0; i < count; i++)
		if (x[i] != 2 * i + 1 || y[i] != 3 * i)
			return 84;
	for (i = 0; i < 3000; i++)
		if (got[rank][i] != i * 11 + peer)
			return 85;
	return 0;
}

TEST_F_TIMEOUT(solo, group_with_send_recv, 60)
{
	struct job j = { .n = 2, .threads = 1, .fn = group_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

/* All-reduces that go direct by address (the default), between
 * processes: their handles and done words beside the group's messages. */
TEST_F_TIMEOUT(solo, group_with_send_recv_direct_cma, 60)
{
	struct job j = { .n = 2, .fn = group_body, .arg = "big" };

	unsetenv("MLAP2P_COLL_CMA_MIN");
	ASSERT_EQ(0, job_run(&j, 50));
}

/*
 * ---- direct: past DIRECT_CONNECT_MAX ranks -----------------------------
 *
 * On 9 ranks the direct all-reduce does not connect every pair itself:
 * between regions the ring runs (channel 1 moves) until an all-to-all has
 * connected them, and the direct algorithm from then on (it does not).
 */
static int wide_ar(struct mlap2p_comm *comm, int rank, int32_t *sb,
		   int32_t *rb, size_t count, int want_ring)
{
	uint64_t s0, s1;
	size_t i;

	for (i = 0; i < count; i++)
		sb[i] = rank * 1000 + (int32_t)i;
	if (ch1_steps(comm, rank, &s0) ||
	    mlap2p_all_reduce(comm, sb, rb, count, MLAP2P_INT32, MLAP2P_SUM) ||
	    ch1_steps(comm, rank, &s1))
		return 1;
	for (i = 0; i < count; i++)
		if (rb[i] != 36000 + 9 * (int32_t)i) {
			fprintf(stderr, "# rank %d: [%zu] = %d\n", rank, i, rb[i]);
			return 2;
		}
	if ((s1 != s0) != want_ring) {
		fprintf(stderr, "# rank %d: channel 1 sent %llu steps: the %s ran\n",
			rank, (unsigned long long)(s1 - s0),
			s1 == s0 ? "direct algorithm" : "ring");
		return 3;
	}
	return 0;
}

static int wide_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	size_t count = 4096;		/* 16 KiB: past the one-shot */
	int32_t *sb, *rb, x[MAXR], y[MAXR];
	int k, ret;

	if (mlap2p_mem_alloc(comm, count * 4, (void **)&sb) ||
	    mlap2p_mem_alloc(comm, count * 4, (void **)&rb))
		return 100;
	/* The rings, so that channel 1's counter can be read. */
	if (mlap2p_all_reduce(comm, x, y, 1, MLAP2P_INT32, MLAP2P_SUM))
		return 101;
	ret = wide_ar(comm, rank, sb, rb, count, 1);
	if (ret)
		return 110 + ret;
	for (k = 0; k < j->n; k++)
		x[k] = rank * 100 + k;
	if (mlap2p_all_to_all(comm, x, y, 1, MLAP2P_INT32))
		return 102;
	for (k = 0; k < j->n; k++)
		if (y[k] != k * 100 + rank)
			return 103;
	ret = wide_ar(comm, rank, sb, rb, count, 0);
	return ret ? 120 + ret : 0;
}

TEST_F_TIMEOUT(solo, direct_on_9_ranks_once_pairs_are_connected, 120)
{
	struct job j = { .n = 9, .threads = 1, .fn = wide_body };

	ASSERT_EQ(0, job_run(&j, 110));
}

/* ---- non-blocking ---------------------------------------------------- */

static int nb_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static int32_t a[MAXR][70000], b[MAXR][70000], c[MAXR][64];
	static int32_t d[MAXR][3000];
	struct mlap2p_request *r[4] = { NULL, NULL, NULL, NULL };
	int n = j->n, i, done = 0, polls = 0, ret;

	for (i = 0; i < 70000; i++) {
		a[rank][i] = i + rank;
		b[rank][i] = rank * 100000 + i;
	}
	for (i = 0; i < 64; i++)
		c[rank][i] = rank + i;
	for (i = 0; i < 3000; i++)
		d[rank][i] = rank * 7 + i;
	/* Four outstanding, different sizes and kinds; test one, wait all.
	 * With 2 MiB chunks on 2 ranks, the 12 KB one is a one-shot's size:
	 * in place, it goes direct. */
	if (mlap2p_iall_reduce(comm, a[rank], a[rank], 70000, MLAP2P_INT32,
			       MLAP2P_SUM, &r[0]) ||
	    mlap2p_ibroadcast(comm, b[rank], b[rank], 70000, MLAP2P_INT32,
			      n - 1, &r[1]) ||
	    mlap2p_iall_reduce(comm, c[rank], c[rank], 64, MLAP2P_INT32,
			       MLAP2P_MAX, &r[2]) ||
	    mlap2p_iall_reduce(comm, d[rank], d[rank], 3000, MLAP2P_INT32,
			       MLAP2P_SUM, &r[3]))
		return 90;
	while (!done) {
		ret = mlap2p_request_test(&r[0], &done);
		if (ret)
			return 91;
		polls++;
	}
	if (r[0] || mlap2p_request_waitall(4, r) || r[1] || r[2] || r[3])
		return 92;
	for (i = 0; i < 70000; i++)
		if (a[rank][i] != n * i + n * (n - 1) / 2 ||
		    b[rank][i] != (n - 1) * 100000 + i)
			return 93;
	for (i = 0; i < 64; i++)
		if (c[rank][i] != n - 1 + i)
			return 94;
	for (i = 0; i < 3000; i++)
		if (d[rank][i] != 7 * n * (n - 1) / 2 + n * i)
			return 98;
	/* A blocking one after a pending one: the pending one runs first. */
	if (mlap2p_iall_reduce(comm, c[rank], c[rank], 64, MLAP2P_INT32,
			       MLAP2P_SUM, &r[0]) ||
	    mlap2p_all_reduce(comm, a[rank], a[rank], 2, MLAP2P_INT32,
			      MLAP2P_SUM) ||
	    mlap2p_request_wait(&r[0]))
		return 95;
	if (c[rank][0] != n * (n - 1) || a[rank][1] != n * (n + n * (n - 1) / 2))
		return 96;
	/* Not inside a group. */
	mlap2p_group_start();
	ret = mlap2p_iall_reduce(comm, c[rank], c[rank], 1, MLAP2P_INT32,
				 MLAP2P_SUM, &r[0]);
	mlap2p_group_end();
	if (ret != -EINVAL || r[0])
		return 97;
	return 0;
}

/*
 * A non-blocking collective still pending when its communicator is
 * aborted ends cancelled: a wait afterwards returns -ECANCELED and frees
 * the request (it used to stay pending, pointing at the freed data
 * plane).  Rank 1 never joins it.
 */
static int nb_abort_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static int32_t a[MAXR][100000];
	struct mlap2p_request *r[3] = { NULL, NULL, NULL };
	int32_t word;
	int ret;

	(void)j;
	if (mlap2p_all_reduce(comm, a[rank], a[rank], 16, MLAP2P_INT32,
			      MLAP2P_SUM))
		return 100;
	/* And a receive of the data plane's, which never comes either. */
	if (!rank &&
	    (mlap2p_iall_reduce(comm, a[0], a[0], 1000, MLAP2P_INT32,
				MLAP2P_SUM, &r[0]) ||
	     mlap2p_iall_reduce(comm, a[0] + 1000, a[0] + 1000, 99000,
				MLAP2P_INT32, MLAP2P_MAX, &r[1]) ||
	     mlap2p_irecv(comm, &word, sizeof(word), 1, &r[2])))
		return 101;
	mlap2p_comm_abort(comm);
	if (rank)
		return GONE;
	ret = mlap2p_request_wait(&r[0]);
	if (ret != -ECANCELED || r[0]) {
		fprintf(stderr, "# rank 0: want -ECANCELED, got %d\n", ret);
		return GONE + 102;
	}
	ret = mlap2p_request_waitall(3, r);
	if (ret != -ECANCELED || r[1] || r[2]) {
		fprintf(stderr, "# rank 0: waitall: want -ECANCELED, got %d\n",
			ret);
		return GONE + 103;
	}
	return GONE;
}

TEST_F_TIMEOUT(solo, nonblocking_pending_at_abort_threads, 60)
{
	struct job j = { .n = 2, .threads = 1, .fn = nb_abort_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

TEST_F_TIMEOUT(solo, nonblocking_pending_at_abort_processes, 60)
{
	struct job j = { .n = 2, .fn = nb_abort_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

/*
 * Two non-blocking all-reduces on 4 processes whose rank 3 dies: the
 * first fails, leaving its requests to the communicator, and the second
 * has started when the survivors abort.  coll_free() freed the first
 * one's requests, then, ending the second, freed them again with its
 * own (a double free).
 */
static int nb_dead_body(struct job *j, int rank, struct mlap2p_comm *comm)
{
	static float b[3][1 << 16];
	struct mlap2p_request *r[2] = { NULL, NULL };
	int ret;

	if (mlap2p_all_reduce(comm, b[0], b[0], 1 << 16, MLAP2P_FLOAT32,
			      MLAP2P_SUM))
		return 130;
	if (rank == j->n - 1) {
		usleep(300 * 1000);
		_exit(0);
	}
	if (mlap2p_iall_reduce(comm, b[1], b[1], 1 << 16, MLAP2P_FLOAT32,
			       MLAP2P_SUM, &r[0]) ||
	    mlap2p_iall_reduce(comm, b[2], b[2], 1 << 16, MLAP2P_FLOAT32,
			       MLAP2P_MAX, &r[1]))
		return 131;
	ret = mlap2p_request_wait(&r[0]);
	if (ret != -ECONNRESET || !strstr(mlap2p_last_error(), "rank 3")) {
		fprintf(stderr, "# rank %d: want -ECONNRESET naming rank 3, got %d: %s\n",
			rank, ret, mlap2p_last_error());
		return 132;
	}
	mlap2p_comm_abort(comm);
	ret = mlap2p_request_wait(&r[1]);
	if (ret != -ECANCELED && ret != -ECONNRESET) {
		fprintf(stderr, "# rank %d: the second: %d\n", rank, ret);
		return GONE + 133;
	}
	return GONE;
}

TEST_F_TIMEOUT(solo, nonblocking_dead_peer_then_abort, 60)
{
	struct job j = { .n = 4, .fn = nb_dead_body };

	setenv("MLAP2P_PEER_TIMEOUT", "1s", 1);
	ASSERT_EQ(0, job_run(&j, 50));
}

TEST_F_TIMEOUT(solo, nonblocking_threads_3, 60)
{
	struct job j = { .n = 3, .threads = 1, .fn = nb_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

TEST_F_TIMEOUT(solo, nonblocking_processes_2, 60)
{
	struct job j = { .n = 2, .fn = nb_body };

	ASSERT_EQ(0, job_run(&j, 50));
}

/* The 280 KB all-reduce direct by address (the default), progressed a
 * step at a time beside the others; on 2 ranks the 12 KB one too. */
TEST_F_TIMEOUT(solo, nonblocking_threads_3_direct_cma, 60)
{
	struct job j = { .n = 3, .threads = 1, .fn = nb_body };

	unsetenv("MLAP2P_COLL_CMA_MIN");
	unsetenv("MLAP2P_COLL_CHUNK");
	ASSERT_EQ(0, job_run(&j, 50));
}

TEST_F_TIMEOUT(solo, nonblocking_threads_2_direct_cma, 60)
{
	struct job j = { .n = 2, .threads = 1, .fn = nb_body };

	unsetenv("MLAP2P_COLL_CMA_MIN");
	unsetenv("MLAP2P_COLL_CHUNK");
	ASSERT_EQ(0, job_run(&j, 50));
}

TEST_F_TIMEOUT(solo, nonblocking_processes_2_direct_cma, 60)
{
	struct job j = { .n = 2, .fn = nb_body };

	unsetenv("MLAP2P_COLL_CMA_MIN");
	unsetenv("MLAP2P_COLL_CHUNK");
	ASSERT_EQ(0, job_run(&j, 50));
}

TEST_HARNESS_MAIN
