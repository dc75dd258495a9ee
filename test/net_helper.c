// SPDX-License-Identifier: GPL-2.0
/*
 * net_helper: not a test; one rank of a communicator that may span hosts,
 * driven by net_hosts.sh (emulated hosts in network namespaces) and
 * net_test.c (one host, loopback).  Every rank is its own process and
 * meets the others through NCCL_COMM_ID (rank 0 hosts the root).
 *
 *   net_helper ring   --nranks N --rank R --core C [--channels K]
 *                     [--protos LL,LL128,SIMPLE] [--sizes a,b,...] [--iters I]
 *       Connect a ring, print how this rank reaches its neighbours
 *       ("path prev=<r> <P2P/...|NET>" and "path next=..."), then for every
 *       protocol and size exchange a pattern round the ring (send to next,
 *       receive from prev, in one group) and check every byte.
 *   net_helper stream --nranks N --rank R --core C [--bytes B] [--seconds S]
 *       Connect a ring and exchange B-byte messages round it until an error
 *       or S seconds; prints "streaming" once data moves, and on an error
 *       the error and mlap2p_last_error() (which names the peer).
 *   net_helper stall --nranks 2 --rank R --core C [--bytes B]
 *       SIMPLE, rank 0 to rank 1.  Rank 1 posts a 4B-byte receive; rank 0
 *       sends B bytes of it, waits a second (its proxy hands them over),
 *       prints "stopping" and stops itself (SIGSTOP).  Rank 1's receive
 *       fails once rank 0 falls silent; it prints "receive failed", fills
 *       its buffer with 0xa5 and checks 3 s later that nothing wrote into
 *       it: "buffer intact" (exit 0) or "buffer changed" (exit 5).  Rank 0,
 *       continued (SIGCONT, by the test), sends B bytes more, which the
 *       receives rank 1 had posted into its buffer would take.
 *
 *   net_helper coll   --nranks N --rank R --core C [--sizes a,b,...]
 *       Without connecting first (a collective connects what it needs):
 *       every collective, in place and out of place, on int32, float32
 *       and bfloat16 (sum and max for those that reduce; roots 0 and
 *       N-1), for each count in --sizes (elements; default 0, 1, 7,
 *       1031, 300001), checked element by element; then the ring's paths
 *       as "ring" prints them.  Inputs are small integers, so every order
 *       of the reduction gives the same, exact, result.  Prints
 *       "rank R: ok <collective> (<calls> calls)" per collective.
 *
 * Exit: 0 all good, 1 a failure (wrong bytes, setup), 2 usage, 3 (stream)
 * the exchange failed with an error, as net_hosts.sh expects after it cuts
 * the link, 5 (stall) the failed receive's buffer changed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mlap2p/coll.h>
#include <mlap2p/dataplane.h>
#include <mlap2p/mlap2p.h>

/* The data-plane tests' sizes (issue "Data plane"). */
static const size_t default_sizes[] = {
	0, 1, 7, 8, 4095, 4096, 4097, (1 << 20) + 13, 64 << 20,
};

/* coll's counts, in elements: the header's inline data, LL, LL128 and
 * SIMPLE steps over NET, past one ring chunk. */
static const size_t coll_sizes[] = { 0, 1, 7, 1031, 300001 };

struct opts {
	const char *mode;
	int nranks, rank, core, channels, iters, seconds;
	size_t bytes;
	unsigned int protos;		/* bit per MLAP2P_PROTO_* */
	size_t sizes[32];
	int nsizes;
};

static unsigned char pattern(int src, size_t i, size_t n, int it)
{
	return (unsigned char)(src * 131 + i * 7 + n + (size_t)it * 3 + (i >> 9));
}

static void fill(unsigned char *b, int src, size_t n, int it)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = pattern(src, i, n, it);
}

/* First wrong byte, or -1. */
static long check(const unsigned char *b, int src, size_t n, int it)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != pattern(src, i, n, it))
			return (long)i;
	return -1;
}

static const char *path_name(struct mlap2p_comm *comm, int peer, int dir)
{
	struct mlap2p_conn_desc d;

	if (mlap2p_conn_get(comm, 0, peer, dir, &d))
		return "none";
	switch (d.path) {
	case MLAP2P_PATH_DIRECT:
		return "P2P/direct";
	case MLAP2P_PATH_IPC:
		return "P2P/IPC";
	case MLAP2P_PATH_INDIRECT:
		return "P2P/indirect";
	case MLAP2P_PATH_NET:
		return "NET";
	}
	return "?";
}

static int exchange(struct mlap2p_comm *comm, const void *sbuf, void *rbuf,
		    size_t n, int prev, int next)
{
	int ret, r;

	ret = mlap2p_group_start();
	if (ret)
		return ret;
	ret = mlap2p_send(comm, sbuf, n, next);
	r = mlap2p_recv(comm, rbuf, n, prev);
	if (!ret)
		ret = r;
	r = mlap2p_group_end();
	return ret ? ret : r;
}

static int run_ring(struct mlap2p_comm *comm, const struct opts *o, int prev,
		    int next)
{
	size_t max = 0;
	unsigned char *sbuf, *rbuf;
	int p, s, it, ret;

	for (s = 0; s < o->nsizes; s++)
		if (o->sizes[s] > max)
			max = o->sizes[s];
	sbuf = malloc(max ? max : 1);
	rbuf = malloc(max ? max : 1);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "rank %d: out of memory\n", o->rank);
		goto fail;
	}
	for (p = MLAP2P_PROTO_LL; p <= MLAP2P_PROTO_SIMPLE; p++) {
		if (!(o->protos & (1U << p)))
			continue;
		ret = mlap2p_set_proto(comm, p);
		if (ret) {
			fprintf(stderr, "rank %d: set_proto %s: %s\n", o->rank,
				mlap2p_proto_name(p), mlap2p_strerror(ret));
			goto fail;
		}
		for (s = 0; s < o->nsizes; s++) {
			size_t n = o->sizes[s];

			for (it = 0; it < o->iters; it++) {
				long bad;

				fill(sbuf, o->rank, n, it);
				memset(rbuf, 0xa5, n);
				ret = exchange(comm, sbuf, rbuf, n, prev, next);
				if (ret) {
					fprintf(stderr, "rank %d: %s %zu bytes: %s: %s\n",
						o->rank, mlap2p_proto_name(p), n,
						mlap2p_strerror(ret),
						mlap2p_last_error());
					goto fail;
				}
				bad = check(rbuf, prev, n, it);
				if (bad >= 0) {
					fprintf(stderr, "rank %d: %s %zu bytes from rank %d: byte %ld is %#x, expected %#x\n",
						o->rank, mlap2p_proto_name(p), n,
						prev, bad, rbuf[bad],
						pattern(prev, (size_t)bad, n, it));
					goto fail;
				}
			}
			printf("rank %d: ok %s %zu\n", o->rank,
			       mlap2p_proto_name(p), n);
		}
	}
	free(sbuf);
	free(rbuf);
	return 0;
fail:
	free(sbuf);
	free(rbuf);
	return 1;
}

static int run_stream(struct mlap2p_comm *comm, const struct opts *o, int prev,
		      int next)
{
	unsigned char *sbuf = malloc(o->bytes), *rbuf = malloc(o->bytes);
	time_t end = time(NULL) + o->seconds;
	long iters = 0;
	int ret, rc = 1;

	if (!sbuf || !rbuf)
		goto out;
	fill(sbuf, o->rank, o->bytes, 0);
	while (time(NULL) < end) {
		ret = exchange(comm, sbuf, rbuf, o->bytes, prev, next);
		if (ret) {
			printf("rank %d: error after %ld exchanges: %s: %s\n",
			       o->rank, iters, mlap2p_strerror(ret),
			       mlap2p_last_error());
			fflush(stdout);
			rc = 3;
			goto out;
		}
		if (check(rbuf, prev, o->bytes, 0) >= 0) {
			printf("rank %d: wrong bytes from rank %d\n", o->rank,
			       prev);
			goto out;
		}
		if (++iters == 3) {
			printf("rank %d: streaming\n", o->rank);
			fflush(stdout);
		}
	}
	printf("rank %d: no error in %d s (%ld exchanges)\n", o->rank,
	       o->seconds, iters);
out:
	free(sbuf);
	free(rbuf);
	return rc;
}

static int run_stall(struct mlap2p_comm *comm, const struct opts *o, int prev,
		     int next)
{
	const size_t n = 4 * o->bytes;
	unsigned char *buf = calloc(1, n);
	size_t i;
	int ret;

	if (!buf || mlap2p_set_proto(comm, MLAP2P_PROTO_SIMPLE)) {
		free(buf);
		return 1;
	}
	if (o->rank == 0) {
		ret = mlap2p_send(comm, buf, o->bytes, next);
		if (ret) {
			printf("rank 0: first send: %s\n", mlap2p_strerror(ret));
			free(buf);
			return 1;
		}
		sleep(1);
		printf("rank 0: stopping\n");
		fflush(stdout);
		raise(SIGSTOP);
		ret = mlap2p_send(comm, buf, o->bytes, next);
		printf("rank 0: sent again: %s\n", mlap2p_strerror(ret));
		free(buf);
		return 3;	/* the comm failed or will: abort it */
	}
	ret = mlap2p_recv(comm, buf, n, prev);
	memset(buf, 0xa5, n);
	printf("rank 1: receive failed: %s\n", mlap2p_strerror(ret));
	fflush(stdout);
	sleep(3);
	for (i = 0; i < n && buf[i] == 0xa5; i++)
		;
	if (i < n)
		printf("rank 1: buffer changed at byte %zu to %#x\n", i, buf[i]);
	else
		printf("rank 1: buffer intact\n");
	free(buf);
	return i < n ? 5 : ret ? 3 : 1;
}

/* ---- coll ---- */

enum { C_AR, C_BCAST, C_REDUCE, C_AG, C_RS, C_A2A, C_KINDS };

static const char *const coll_names[C_KINDS] = {
	"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
	"all_to_all",
};

/* The types and ops coll runs, by name (public API only here). */
static size_t coll_es(int dt)
{
	return dt == MLAP2P_BFLOAT16 ? 2 : 4;
}

static const char *coll_dt(int dt)
{
	return dt == MLAP2P_INT32 ? "int32" :
	       dt == MLAP2P_FLOAT32 ? "float32" : "bfloat16";
}

/* Element @j of rank @q's input: a small integer, exact in every type. */
static int coll_val(int q, size_t j)
{
	return (int)((q * 7 + j * 3) % 17) - 8;
}

static void coll_put(void *buf, size_t i, int dt, int v)
{
	float f = (float)v;
	uint32_t u;

	switch (dt) {
	case MLAP2P_INT32:
		((int32_t *)buf)[i] = v;
		break;
	case MLAP2P_FLOAT32:
		((float *)buf)[i] = f;
		break;
	default:	/* bfloat16: the top half of the float, exact here */
		memcpy(&u, &f, 4);
		((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
		break;
	}
}

/* What element @i of rank @r's output must be. */
static int coll_want(int kind, int op, int n, int r, int root, size_t c,
		     size_t i)
{
	size_t q = i / (c ? c : 1), k = i % (c ? c : 1);
	int acc = 0, p, v;

	switch (kind) {
	case C_BCAST:
		return coll_val(root, i);
	case C_AG:
		return coll_val((int)q, k);
	case C_A2A:
		return coll_val((int)q, (size_t)r * c + k);
	}
	for (p = 0; p < n; p++) {
		v = coll_val(p, kind == C_RS ? (size_t)r * c + i : i);
		acc = !p ? v : op == MLAP2P_SUM ? acc + v : acc > v ? acc : v;
	}
	return acc;
}

static int coll_call(struct mlap2p_comm *comm, int kind, const void *s,
		     void *r, size_t c, int dt, int op, int root)
{
	switch (kind) {
	case C_AR:
		return mlap2p_all_reduce(comm, s, r, c, dt, op);
	case C_BCAST:
		return mlap2p_broadcast(comm, s, r, c, dt, root);
	case C_REDUCE:
		return mlap2p_reduce(comm, s, r, c, dt, op, root);
	case C_AG:
		return mlap2p_all_gather(comm, s, r, c, dt);
	case C_RS:
		return mlap2p_reduce_scatter(comm, s, r, c, dt, op);
	default:
		return mlap2p_all_to_all(comm, s, r, c, dt);
	}
}

/* One call, checked: 0 or 1 (said why). */
static int coll_one(struct mlap2p_comm *comm, const struct opts *o, int kind,
		    int dt, int op, int root, int ip, size_t c,
		    unsigned char *sb, unsigned char *rb, unsigned char *want)
{
	int n = o->nranks, r = o->rank, ret;
	size_t es = coll_es(dt), in = c, out = c, i, at = 0;
	unsigned char *s = sb, *dst = rb;

	if (kind == C_RS || kind == C_A2A)
		in = c * (size_t)n;
	if (kind == C_AG || kind == C_A2A)
		out = c * (size_t)n;
	memset(rb, 0xa5, out * es + in * es);
	if (ip) {	/* the input where the in-place form wants it */
		s = kind == C_AG ? rb + (size_t)r * c * es : rb;
		if (kind == C_RS)
			dst = rb + (size_t)r * c * es;
	}
	for (i = 0; i < in; i++)
		coll_put(s, i, dt, coll_val(r, i));
	for (i = 0; i < out; i++)
		coll_put(want, i, dt, coll_want(kind, op, n, r, root, c, i));
	ret = coll_call(comm, kind, s, dst, c, dt, op, root);
	if (ret) {
		fprintf(stderr, "rank %d: %s(count %zu, %s, %s, root %d%s): %s: %s\n",
			r, coll_names[kind], c, coll_dt(dt),
			op == MLAP2P_SUM ? "sum" : "max", root, ip ? ", in place" : "",
			mlap2p_strerror(ret), mlap2p_last_error());
		return 1;
	}
	if (kind == C_REDUCE && r != root)
		return 0;
	for (at = 0; at < out * es && dst[at] == want[at]; at++)
		;
	if (at < out * es) {
		fprintf(stderr, "rank %d: %s(count %zu, %s, %s, root %d%s): byte %zu of %zu is %#x, want %#x\n",
			r, coll_names[kind], c, coll_dt(dt),
			op == MLAP2P_SUM ? "sum" : "max", root, ip ? ", in place" : "",
			at, out * es, dst[at], want[at]);
		return 1;
	}
	return 0;
}

static int run_coll(struct mlap2p_comm *comm, const struct opts *o)
{
	static const int dts[] = { MLAP2P_INT32, MLAP2P_FLOAT32,
				   MLAP2P_BFLOAT16 };
	size_t max = 0, bytes;
	unsigned char *sb, *rb, *want;
	int roots[2] = { 0, o->nranks - 1 };
	int kind, d, op, t, ip, k, calls, rc = 1;

	for (k = 0; k < o->nsizes; k++)
		if (o->sizes[k] > max)
			max = o->sizes[k];
	/* Elements of at most 4 bytes; n blocks in, n out. */
	bytes = 4 * max * (size_t)o->nranks + 64;
	sb = malloc(bytes);
	rb = malloc(2 * bytes);
	want = malloc(bytes);
	if (!sb || !rb || !want) {
		fprintf(stderr, "rank %d: out of memory\n", o->rank);
		goto out;
	}
	for (kind = 0; kind < C_KINDS; kind++) {
		int reduces = kind == C_AR || kind == C_REDUCE || kind == C_RS;
		int rooted = kind == C_BCAST || kind == C_REDUCE;

		calls = 0;
		for (d = 0; d < 3; d++)
		for (op = MLAP2P_SUM; op <= MLAP2P_MAX; op += 2)
		for (t = 0; t < (rooted && o->nranks > 1 ? 2 : 1); t++)
		for (ip = 0; ip < 2; ip++)
		for (k = 0; k < o->nsizes; k++) {
			if ((!reduces && op != MLAP2P_SUM) ||
			    (kind == C_A2A && ip))
				continue;
			if (coll_one(comm, o, kind, dts[d], op, roots[t], ip,
				     o->sizes[k], sb, rb, want))
				goto out;
			calls++;
		}
		printf("rank %d: ok %s (%d calls)\n", o->rank,
		       coll_names[kind], calls);
	}
	rc = 0;
out:
	free(sb);
	free(rb);
	free(want);
	return rc;
}

static int parse_list(const char *s, size_t *out, int max)
{
	char *end;
	int n = 0;

	while (*s && n < max) {
		unsigned long long v = strtoull(s, &end, 0);

		if (end == s)
			return -1;
		if (*end == 'K' || *end == 'k')
			v <<= 10, end++;
		else if (*end == 'M' || *end == 'm')
			v <<= 20, end++;
		out[n++] = (size_t)v;
		if (*end == '+') {	/* "1M+13" */
			s = end + 1;
			v = strtoull(s, &end, 0);
			out[n - 1] += (size_t)v;
		}
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

static unsigned int parse_protos(const char *s)
{
	unsigned int m = 0;
	char buf[64], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcasecmp(tok, "LL"))
			m |= 1U << MLAP2P_PROTO_LL;
		else if (!strcasecmp(tok, "LL128"))
			m |= 1U << MLAP2P_PROTO_LL128;
		else if (!strcasecmp(tok, "SIMPLE"))
			m |= 1U << MLAP2P_PROTO_SIMPLE;
		else
			return 0;
	}
	return m;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s ring|stream|stall|coll --nranks N --rank R --core C [--channels K] [--protos LL,LL128,SIMPLE] [--sizes a,b] [--iters I] [--bytes B] [--seconds S]\n",
		argv0);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nranks", 1, NULL, 'n' }, { "rank", 1, NULL, 'r' },
		{ "core", 1, NULL, 'c' }, { "channels", 1, NULL, 'k' },
		{ "protos", 1, NULL, 'p' }, { "sizes", 1, NULL, 's' },
		{ "iters", 1, NULL, 'i' }, { "bytes", 1, NULL, 'b' },
		{ "seconds", 1, NULL, 't' }, { NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.nranks = -1, .rank = -1, .core = -1, .channels = 1,
		.iters = 1, .seconds = 60, .bytes = 1 << 20,
		.protos = 7,
	};
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;
	int c, ret, prev, next, rc;
	char host[64] = "?";

	if (argc < 2)
		return usage(argv[0]);
	o.mode = argv[1];
	if (!strcmp(o.mode, "coll")) {
		memcpy(o.sizes, coll_sizes, sizeof(coll_sizes));
		o.nsizes = sizeof(coll_sizes) / sizeof(coll_sizes[0]);
	} else {
		memcpy(o.sizes, default_sizes, sizeof(default_sizes));
		o.nsizes = sizeof(default_sizes) / sizeof(default_sizes[0]);
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o.nranks = atoi(optarg); break;
		case 'r': o.rank = atoi(optarg); break;
		case 'c': o.core = atoi(optarg); break;
		case 'k': o.channels = atoi(optarg); break;
		case 'i': o.iters = atoi(optarg); break;
		case 't': o.seconds = atoi(optarg); break;
		case 'b': o.bytes = strtoull(optarg, NULL, 0); break;
		case 'p':
			o.protos = parse_protos(optarg);
			if (!o.protos)
				return usage(argv[0]);
			break;
		case 's':
			o.nsizes = parse_list(optarg, o.sizes, 32);
			if (o.nsizes <= 0)
				return usage(argv[0]);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks || o.core < 0 ||
	    (strcmp(o.mode, "ring") && strcmp(o.mode, "stream") &&
	     strcmp(o.mode, "stall") && strcmp(o.mode, "coll")))
		return usage(argv[0]);
	if (!getenv("NCCL_COMM_ID")) {
		fprintf(stderr, "net_helper: set NCCL_COMM_ID=<ip>:<port>\n");
		return 2;
	}
	gethostname(host, sizeof(host));
	setvbuf(stdout, NULL, _IOLBF, 0);

	ret = mlap2p_get_unique_id(&id);
	if (!ret)
		ret = mlap2p_comm_init_rank(&comm, o.nranks, &id, o.rank, o.core);
	if (ret) {
		fprintf(stderr, "rank %d on %s: init: %s: %s\n", o.rank, host,
			mlap2p_strerror(ret), mlap2p_last_error());
		return 1;
	}
	/* coll: the collectives connect what they need themselves. */
	rc = strcmp(o.mode, "coll") ? 0 : run_coll(comm, &o);
	if (rc) {
		mlap2p_comm_abort(comm);
		return rc;
	}
	ret = strcmp(o.mode, "coll") ? mlap2p_connect_ring(comm, o.channels) :
				       0;
	if (!ret)
		ret = mlap2p_ring_get(comm, 0, NULL, &prev, &next);
	if (ret) {
		fprintf(stderr, "rank %d on %s: connect: %s: %s\n", o.rank, host,
			mlap2p_strerror(ret), mlap2p_last_error());
		mlap2p_comm_abort(comm);
		return 1;
	}
	printf("rank %d on %s: path prev=%d %s\n", o.rank, host, prev,
	       path_name(comm, prev, MLAP2P_DIR_RECV));
	printf("rank %d on %s: path next=%d %s\n", o.rank, host, next,
	       path_name(comm, next, MLAP2P_DIR_SEND));

	if (!strcmp(o.mode, "ring"))
		rc = run_ring(comm, &o, prev, next);
	else if (!strcmp(o.mode, "coll"))
		rc = 0;	/* ran above */
	else if (!strcmp(o.mode, "stall"))
		rc = run_stall(comm, &o, prev, next);
	else
		rc = run_stream(comm, &o, prev, next);
	if (rc) {
		mlap2p_comm_abort(comm);
		return rc;
	}
	ret = mlap2p_comm_destroy(comm);
	if (ret) {
		fprintf(stderr, "rank %d: destroy: %s: %s\n", o.rank,
			mlap2p_strerror(ret), mlap2p_last_error());
		return 1;
	}
	printf("rank %d: done\n", o.rank);
	return 0;
}
