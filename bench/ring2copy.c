// SPDX-License-Identifier: MIT
/*
 * bench/ring2copy: the two-copy baseline for bulk transfers between two
 * processes, a plain shared-memory FIFO with no library around it.
 *
 * Two processes (fork), pinned to their own CPUs, exchange a message of
 * SIZE bytes each way at once (-u: one way only, rank 0 to rank 1).  Each
 * direction is a ring of 8 slots of CHUNK bytes in shared memory with a
 * 64-bit head and tail on their own lines: the sender copies a chunk into a
 * free slot and publishes tail (release), the receiver acquires tail,
 * copies the chunk out and publishes head.  Both directions progress in
 * one loop per process, so the exchange cannot deadlock.  This is the
 * structure of any copy-in/copy-out transport (NCCL's SIMPLE through a
 * FIFO, Open MPI's sm without single copy), at its simplest.
 *
 *   ring2copy [-s SIZE] [-k CHUNK] [-i ITERS] [-r REPEATS] [-u|-a] [-n] [-c A,B]
 *
 * -a: a 2-rank ring all-reduce of SIZE bytes of fp32 (sum) through the
 * same FIFOs, as NCCL's SIMPLE protocol runs it without direct pointers:
 * per chunk, send (own input of the peer's half), recvReduceCopySend
 * (peer's part + own input of this half -> output and FIFO) and recv
 * (the peer's result -> output).  Every byte crosses a FIFO with two
 * copies; the figure is SIZE / time (algbw = busbw for 2 ranks): the
 * two-copy ceiling of a 2-rank all-reduce over these FIFOs.
 *
 * Prints each repeat and "ring2copy_gbps <best>" (SIZE / time of the
 * fastest repeat, as mlap2p-perf's sendrecv algbw; best-of-repeats on
 * both sides of every comparison).  -n: every second repeat copies out
 * with streaming stores (lib/proto/copy.c), and "ring2copy_nt_gbps <best>" of
 * those follows: the two kinds side by side in one process lifetime.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"
#include "proto/copy.h"

#define SLOTS 8

struct ring {
	uint64_t head __attribute__((aligned(128)));	/* receiver writes */
	uint64_t tail __attribute__((aligned(128)));	/* sender writes */
	char data[] __attribute__((aligned(4096)));
};

static size_t chunk = 512 << 10;
static int streaming;		/* this repeat copies out around the caches */

/* Per process and direction: where this message stands. */
struct side {
	struct ring *r;
	char *buf;
	size_t size, off;
	uint64_t step;
};

/* Send one chunk if there is room; 1 if something moved. */
static int push(struct side *s)
{
	size_t n;

	if (s->off >= s->size)
		return 0;
	if (__atomic_load_n(&s->r->head, __ATOMIC_ACQUIRE) + SLOTS <= s->step)
		return 0;
	n = s->size - s->off < chunk ? s->size - s->off : chunk;
	memcpy(s->r->data + (s->step % SLOTS) * chunk, s->buf + s->off, n);
	s->off += n;
	__atomic_store_n(&s->r->tail, ++s->step, __ATOMIC_RELEASE);
	return 1;
}

static int pull(struct side *s)
{
	size_t n;

	if (s->off >= s->size)
		return 0;
	if (__atomic_load_n(&s->r->tail, __ATOMIC_ACQUIRE) <= s->step)
		return 0;
	n = s->size - s->off < chunk ? s->size - s->off : chunk;
	if (streaming)
		mlap2p_copy_nt(s->buf + s->off,
			       s->r->data + (s->step % SLOTS) * chunk, n);
	else
		memcpy(s->buf + s->off,
		       s->r->data + (s->step % SLOTS) * chunk, n);
	s->off += n;
	__atomic_store_n(&s->r->head, ++s->step, __ATOMIC_RELEASE);
	return 1;
}

/* One exchange: send sbuf on out, receive into rbuf from in. */
static void exchange(struct side *out, struct side *in)
{
	out->off = 0;
	if (in)
		in->off = 0;
	while (out->off < out->size || (in && in->off < in->size)) {
		push(out);
		if (in)
			pull(in);
	}
}

/*
 * -a: one all-reduce.  The outgoing FIFO carries A0 B0 A1 B1 ..., the
 * incoming one the peer's A'0 B'0 ...: A_c is chunk c of the peer's half
 * of the input, B_c chunk c of this rank's reduced half, A'_c is reduced
 * into B_c (fused: the result goes to the output and into the FIFO), B'_c
 * is copied to the output.
 */
struct ar {
	struct ring *out, *in;
	const float *src;	/* input */
	float *dst;		/* output */
	size_t half;		/* bytes per half (the last may be shorter) */
	size_t size;
	int rank;
	uint64_t ostep, istep;	/* FIFO steps, both monotonic over calls */
};

static size_t ar_len(const struct ar *a, int h, size_t c)
{
	size_t lo = h * a->half + c * chunk;
	size_t hi = h ? a->size : a->half;

	return hi - lo < chunk ? hi - lo : chunk;
}

static void allreduce(struct ar *a)
{
	size_t nch = (a->half + chunk - 1) / chunk, i;
	uint64_t o0 = a->ostep, i0 = a->istep;
	int mine = a->rank, other = !a->rank;

	if (!a->half)
		return;
	while (a->istep - i0 < 2 * nch) {
		uint64_t ok = a->ostep - o0, ik = a->istep - i0;
		int room = __atomic_load_n(&a->out->head, __ATOMIC_ACQUIRE) +
			   SLOTS > a->ostep;
		int avail = __atomic_load_n(&a->in->tail, __ATOMIC_ACQUIRE) >
			    a->istep;

		if (ok < 2 * nch && !(ok & 1) && room) {
			/* A_c: the peer's half of my input */
			size_t c = ok / 2, off = other * a->half + c * chunk;

			memcpy(a->out->data + (a->ostep % SLOTS) * chunk,
			       (const char *)a->src + off, ar_len(a, other, c));
			__atomic_store_n(&a->out->tail, ++a->ostep,
					 __ATOMIC_RELEASE);
		} else if (ok < 2 * nch && (ok & 1) && room && avail &&
			   ik == ok - 1) {
			/* B_c: A'_c + my input -> output and FIFO */
			size_t c = ok / 2, off = mine * a->half + c * chunk;
			size_t n = ar_len(a, mine, c) / sizeof(float);
			const float *x = (const float *)(a->in->data +
					 (a->istep % SLOTS) * chunk);
			const float *y = (const float *)((const char *)a->src + off);
			float *z = (float *)((char *)a->dst + off);
			float *f = (float *)(a->out->data +
				   (a->ostep % SLOTS) * chunk);

			for (i = 0; i < n; i++) {
				float v = x[i] + y[i];

				z[i] = v;
				f[i] = v;
			}
			__atomic_store_n(&a->in->head, ++a->istep,
					 __ATOMIC_RELEASE);
			__atomic_store_n(&a->out->tail, ++a->ostep,
					 __ATOMIC_RELEASE);
		} else if ((ik & 1) && avail) {
			/* B'_c: the peer's result -> output */
			size_t c = ik / 2, off = other * a->half + c * chunk;

			memcpy((char *)a->dst + off,
			       a->in->data + (a->istep % SLOTS) * chunk,
			       ar_len(a, other, c));
			__atomic_store_n(&a->in->head, ++a->istep,
					 __ATOMIC_RELEASE);
		}
	}
}

static void recv_only(struct side *in)
{
	in->off = 0;
	while (in->off < in->size)
		pull(in);
}

int main(int argc, char **argv)
{
	size_t size = 64 << 20;
	long iters = 10, repeats = 5, r, i;
	int uni = 0, alt = 0, ared = 0, cpu0 = 0, cpu1 = 1, c;
	struct ring *ab, *ba;
	size_t ringBytes;
	double res[64], nt[64];
	long nres = 0, nnt = 0;
	pid_t pid;
	int pfd[2], st;

	while ((c = getopt(argc, argv, "s:k:i:r:uanc:h")) != -1) {
		switch (c) {
		case 's': size = pair_parse_size(optarg); break;
		case 'k': chunk = pair_parse_size(optarg); break;
		case 'i': iters = atol(optarg); break;
		case 'r': repeats = atol(optarg); break;
		case 'u': uni = 1; break;
		case 'a': ared = 1; break;
		case 'n': alt = 1; break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &cpu0, &cpu1) != 2)
				return 2;
			break;
		default:
			fprintf(stderr, "usage: ring2copy [-s SIZE] [-k CHUNK] [-i ITERS] [-r REPEATS] [-u|-a] [-n] [-c A,B]\n");
			return 2;
		}
	}
	if (!chunk || repeats < 1 || repeats > 64 || iters < 1 ||
	    (ared && (uni || alt || chunk % sizeof(float))))
		return 2;
	if (ared)	/* whole floats, two halves of whole floats */
		size &= ~(2 * sizeof(float) - 1);
	ringBytes = sizeof(struct ring) + SLOTS * chunk;
	ab = pair_shared(ringBytes);
	ba = pair_shared(ringBytes);
	if (!ab || !ba || pipe(pfd))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	{
		int rank = pid == 0;
		char *sbuf = malloc(size), *rbuf = malloc(size);
		struct side out = { .r = rank ? ba : ab, .buf = sbuf, .size = size };
		struct side in = { .r = rank ? ab : ba, .buf = rbuf, .size = size };
		struct ar a = { .out = out.r, .in = in.r, .src = (float *)sbuf,
				.dst = (float *)rbuf, .half = size / 2,
				.size = size, .rank = rank };
		char tok = 0;

		if (!sbuf || !rbuf)
			return 1;
		memset(sbuf, rank + 1, size);
		memset(rbuf, 0, size);
		if (ared)
			for (i = 0; i < (long)(size / sizeof(float)); i++)
				((float *)sbuf)[i] = rank + 1;	/* sum: 3 */
		pair_pin(rank ? cpu1 : cpu0);
		for (r = 0; r < repeats; r++) {
			double t0 = 0, t;

			streaming = alt && (r & 1);

			/* line up the two processes before each repeat */
			if (rank) {
				if (read(pfd[0], &tok, 1) != 1)
					_exit(1);
			} else if (write(pfd[1], &tok, 1) != 1) {
				return 1;
			}
			for (i = -1; i < iters; i++) {	/* one warm-up */
				if (i == 0)
					t0 = pair_now_s();
				if (ared)
					allreduce(&a);
				else if (uni && rank)
					recv_only(&in);
				else
					exchange(&out, uni ? NULL : &in);
			}
			if (!rank) {
				t = (pair_now_s() - t0) / iters;
				if (streaming)
					nt[nnt++] = t;
				else
					res[nres++] = t;
				printf("# repeat %ld%s: %.1f us per %s of %zu bytes, %.2f GB/s\n",
				       r, streaming ? " (streaming)" : "", t * 1e6,
				       ared ? "all-reduce" : uni ? "message" :
				       "exchange", size,
				       size / t / 1e9);
			}
		}
		if (ared) {
			for (i = 0; i < (long)(size / sizeof(float)); i++)
				if (((float *)rbuf)[i] != 3)
					break;
			if (i < (long)(size / sizeof(float))) {
				fprintf(stderr, "ring2copy: rank %d: element %ld is %g, not 3\n",
					rank, i, ((float *)rbuf)[i]);
				if (rank)
					_exit(1);
				return 1;
			}
			if (rank)
				_exit(0);
		}
		if (rank)
			_exit(memchr(rbuf, 0, size) ? 1 : 0);
		/* (rank 0's rbuf stays zero in one-way mode) */
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "ring2copy: rank 1 failed\n");
		return 1;
	}
	pair_report("ring2copy", size, res, nres, nt, nnt);
	return 0;
}
