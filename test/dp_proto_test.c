// SPDX-License-Identifier: GPL-2.0
/*
 * dp_proto_test: the protocol engines (lib/proto_*.c) between two threads.
 *
 * No communicator and no module: each test lays out an ncclSendMem and an
 * ncclRecvMem in aligned heap memory, wires a send and a receive
 * ncclConnInfo by hand exactly as the P2P connect path does (write mode, or
 * read mode with the SIMPLE buffer behind ncclSendMem), and moves messages
 * between a sender thread and a receiver thread, checking every byte.
 * Built plain, with ASan and with TSan.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/proto.h"
#include "kselftest_harness.h"

#define KiB	1024UL
#define MiB	(1024UL * 1024UL)

/* ---- a hand-wired connection ------------------------------------------ */

struct wire {
	size_t buffSizes[NCCL_NUM_PROTOCOLS];
	struct ncclSendMem *sendMem;
	struct ncclRecvMem *recvMem;
	struct ncclConnInfo sconn, rconn;
	struct mlap2p_link slink, rlink;
	uint32_t abortFlag;
	int dead;		/* the liveness callback reports a dead peer */
	int writeErr;		/* what wire_write_peer answers */
	int failAt;		/* ... only at this call (1-based); 0: at every */
	int writes;		/* wire_write_peer calls */
	int readErr;		/* what wire_read_peer answers */
	int readFailAt;		/* ... only at this call (1-based); 0: at every */
	int reads;		/* wire_read_peer calls */
	int pulls;		/* ... of them through wire_pull_peer */
	int stills;		/* wire_still_peer calls */
	size_t readMax;		/* the largest of them, bytes */
	struct mlap2p_op *withdraw;	/* revoked within the next read */
	int way;		/* what wire_way answers */
};

/* The receiver offers any buffer by its address (as to another process). */
static int wire_describe_addr(void *arg, const void *buf, size_t bytes,
			      struct mlap2p_xchg *x)
{
	(void)arg;
	(void)bytes;
	x->offset = (uintptr_t)buf;
	return MLAP2P_DESCRIBE_ADDR;
}

/* process_vm_writev() as one process sees it: memcpy, or writeErr. */
static int wire_write_peer(void *arg, uint64_t addr, const void *src,
			   size_t bytes)
{
	struct wire *w = arg;

	int n = __atomic_add_fetch(&w->writes, 1, __ATOMIC_RELAXED);

	if (w->writeErr && (!w->failAt || n == w->failAt))
		return w->writeErr;
	memcpy((void *)(uintptr_t)addr, src, bytes);
	return 0;
}

/* process_vm_readv() as one process sees it: memcpy, or readErr. */
static int wire_read_peer(void *arg, uint64_t addr, void *dst, size_t bytes)
{
	struct wire *w = arg;
	int n = __atomic_add_fetch(&w->reads, 1, __ATOMIC_RELAXED);

	if (w->withdraw) {	/* the sender gives up while it is read */
		mlap2p_simple_revoke(w->withdraw);
		w->withdraw = NULL;
	}
	if (w->readErr && (!w->readFailAt || n == w->readFailAt))
		return w->readErr;
	if (bytes > w->readMax)	/* (threaded tests do not look at it) */
		w->readMax = bytes;
	memcpy(dst, (const void *)(uintptr_t)addr, bytes);
	return 0;
}

/* A sender-first read: counted, then as any read. */
static int wire_pull_peer(void *arg, uint64_t addr, void *dst, size_t bytes)
{
	struct wire *w = arg;

	__atomic_add_fetch(&w->pulls, 1, __ATOMIC_RELAXED);
	return wire_read_peer(arg, addr, dst, bytes);
}

/* Is the sender still the process read from?  As wire_alive says. */
static int wire_still_peer(void *arg)
{
	struct wire *w = arg;

	w->stills++;
	return __atomic_load_n(&w->dead, __ATOMIC_RELAXED) ? -ECONNRESET : 0;
}

/* Offer by address; the sender's writes answer err (0: they work). */
static void wire_addr(struct wire *w, int err)
{
	w->rlink.describe = wire_describe_addr;
	w->slink.describe = wire_describe_addr;	/* unused unless read mode */
	w->slink.write_peer = wire_write_peer;
	w->writeErr = err;
}

static int wire_alive(void *arg)
{
	struct wire *w = arg;

	return __atomic_load_n(&w->dead, __ATOMIC_RELAXED) ? -ECONNRESET : 0;
}

static void *xalloc(size_t size)
{
	void *p = aligned_alloc(MEM_ALIGN, (size + MEM_ALIGN - 1) & ~(MEM_ALIGN - 1UL));

	if (p)
		memset(p, 0, size);
	return p;
}

static int wire_init(struct wire *w, size_t ll, size_t ll128, size_t simple,
		     unsigned int flags, size_t chunk)
{
	size_t recvBytes = MEM_ALIGN + ll + ll128;
	size_t sendBytes = MEM_ALIGN;
	char *simpleBuf;
	int i;

	memset(w, 0, sizeof(*w));
	w->buffSizes[NCCL_PROTO_LL] = ll;
	w->buffSizes[NCCL_PROTO_LL128] = ll128;
	w->buffSizes[NCCL_PROTO_SIMPLE] = simple;
	if (flags & MLAP2P_LINK_READ)
		sendBytes += simple;
	else
		recvBytes += simple;
	w->sendMem = xalloc(sendBytes);
	w->recvMem = xalloc(recvBytes);
	if (!w->sendMem || !w->recvMem)
		return -ENOMEM;
	simpleBuf = (flags & MLAP2P_LINK_READ) ? w->sendMem->buff :
		    w->recvMem->buff + ll + ll128;

	/* Wired as p2pSendConnect and p2pRecvConnect (lib/p2p.c) wire them. */
	for (i = 0; i < 2; i++) {
		struct ncclConnInfo *c = i ? &w->rconn : &w->sconn;
		struct mlap2p_link *l = i ? &w->rlink : &w->slink;

		c->buffs[NCCL_PROTO_LL] = w->recvMem->buff;
		c->buffs[NCCL_PROTO_LL128] = w->recvMem->buff + ll;
		c->buffs[NCCL_PROTO_SIMPLE] = simpleBuf;
		c->tail = &w->recvMem->tail;
		c->head = &w->sendMem->head;
		c->ptrExchange = &w->sendMem->ptrExchange;
		/* leave sizesFifo NULL on the sender: the engine derives it */
		c->sizesFifo = i ? w->recvMem->sizesFifo : NULL;
		memcpy(l->buffSizes, w->buffSizes, sizeof(w->buffSizes));
		l->conn = c;
		l->flags = flags;
		l->chunkSize = chunk;
		l->peer = !i;
		l->abortFlag = &w->abortFlag;
		l->alive = wire_alive;
		l->arg = w;
	}
	return 0;
}

static void wire_fini(struct wire *w)
{
	free(w->sendMem);
	free(w->recvMem);
}

/* Start both counters at step (as if that many messages had gone by). */
static void wire_set_step(struct wire *w, uint64_t step)
{
	w->sconn.step = w->rconn.step = step;
	w->sendMem->head = step;
	w->recvMem->tail = step;
}

/* ---- driving operations ------------------------------------------------ */

/* Progress ops[0..n) together until all are done; 0 or the first -errno. */
static int run_ops(struct mlap2p_op **ops, int n)
{
	struct mlap2p_spin spin;
	int left = n, i, ret;

	mlap2p_spin_init(&spin, MLAP2P_SPIN_TIGHT, 2000);
	for (i = 0; i < n; i++) {
		ret = mlap2p_op_start(ops[i]);
		if (ret)
			return ret;
		ops[i]->owner = NULL;
	}
	while (left) {
		int moved = 0;

		for (i = 0; i < n; i++) {
			if (ops[i]->owner)
				continue;	/* done */
			ret = mlap2p_op_progress(ops[i]);
			if (ret < 0)
				return ret;
			if (ret == MLAP2P_OP_DONE) {
				ops[i]->owner = ops[i];
				left--;
			}
			moved |= ret != MLAP2P_OP_IDLE;
		}
		if (moved) {
			mlap2p_spin_moved(&spin);
		} else if (mlap2p_spin_idle(&spin)) {
			for (i = 0; i < n; i++) {
				ret = mlap2p_link_check(ops[i]->link);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

static int run_one(struct mlap2p_link *link, int proto, int send, void *buf,
		   size_t bytes)
{
	struct mlap2p_op op = {
		.link = link, .proto = proto, .send = send,
		.buf = buf, .bytes = bytes,
	};
	struct mlap2p_op *ops[1] = { &op };

	return run_ops(ops, 1);
}

/* A pattern that catches shifted, repeated and stale bytes. */
static void fill(char *buf, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!(i & 7)) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		buf[i] = (char)(x >> ((i & 7) * 8));
	}
}

static size_t count_wrong(const char *got, size_t n, uint64_t seed)
{
	char *want = malloc(n ? n : 1);
	size_t i, wrong = 0;

	fill(want, n, seed);
	for (i = 0; i < n; i++)
		wrong += got[i] != want[i];
	free(want);
	return wrong;
}

/* A sender thread moving a list of messages. */
struct sender {
	struct mlap2p_link *link;
	int nmsg;
	const int *protos;
	const size_t *sizes;
	uint64_t seed;
	useconds_t delay;	/* before each message larger than 64 bytes */
	int ret;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	size_t max = 1;
	char *buf;
	int m;

	for (m = 0; m < s->nmsg; m++)
		if (s->sizes[m] > max)
			max = s->sizes[m];
	buf = malloc(max);
	if (!buf) {
		s->ret = -ENOMEM;
		return NULL;
	}
	for (m = 0; m < s->nmsg; m++) {
		fill(buf, s->sizes[m], s->seed + m);
		if (s->delay && s->sizes[m] > 64)
			usleep(s->delay);
		s->ret = run_one(s->link, s->protos[m], 1, buf, s->sizes[m]);
		if (s->ret)
			break;
	}
	free(buf);
	return NULL;
}

/*
 * Move nmsg messages; the receiver runs in the calling thread.  Returns the
 * number of wrong bytes, or -errno from either end.
 */
static long transfer(struct wire *w, int nmsg, const int *protos,
		     const size_t *sizes, uint64_t seed, useconds_t delay)
{
	struct sender s = {
		.link = &w->slink, .nmsg = nmsg, .protos = protos,
		.sizes = sizes, .seed = seed, .delay = delay,
	};
	size_t max = 1, wrong = 0;
	pthread_t t;
	char *buf;
	int m, ret = 0;

	for (m = 0; m < nmsg; m++)
		if (sizes[m] > max)
			max = sizes[m];
	buf = malloc(max);
	if (!buf || pthread_create(&t, NULL, sender_main, &s))
		return -ENOMEM;
	for (m = 0; m < nmsg; m++) {
		memset(buf, 0xa5, sizes[m]);
		ret = run_one(&w->rlink, protos[m], 0, buf, sizes[m]);
		if (ret)
			break;
		wrong += count_wrong(buf, sizes[m], seed + m);
	}
	if (ret)	/* let a blocked sender go */
		__atomic_store_n(&w->abortFlag, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	free(buf);
	if (ret)
		return ret;
	if (s.ret)
		return s.ret;
	return (long)wrong;
}

/* ---- byte-exact transfers of every protocol and mode ------------------- */

FIXTURE(wire) {
	struct wire w;
};

FIXTURE_VARIANT(wire) {
	int proto;
	size_t ll, ll128, simple, chunk;
	unsigned int flags;
	int addr;		/* offer by address; 1 writes work, 2 -EPERM */
	size_t nt;		/* ntMin: streaming stores into the receive
				 * buffer from this size */
};

#define NCCL_DEFAULTS .ll = 512 * KiB, .ll128 = 4800 * KiB, .simple = 4 * MiB

FIXTURE_VARIANT_ADD(wire, ll) {
	.proto = NCCL_PROTO_LL, NCCL_DEFAULTS,
};

FIXTURE_VARIANT_ADD(wire, ll_small) {
	.proto = NCCL_PROTO_LL, .ll = 2 * KiB, .ll128 = 8 * KiB, .simple = 8 * KiB,
};

FIXTURE_VARIANT_ADD(wire, ll128) {
	.proto = NCCL_PROTO_LL128, NCCL_DEFAULTS,
};

FIXTURE_VARIANT_ADD(wire, ll128_small) {
	.proto = NCCL_PROTO_LL128, .ll = 2 * KiB, .ll128 = 8 * KiB, .simple = 8 * KiB,
};

FIXTURE_VARIANT_ADD(wire, simple) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS,
};

FIXTURE_VARIANT_ADD(wire, simple_small_chunk) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .chunk = 3000,
};

FIXTURE_VARIANT_ADD(wire, simple_read) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .flags = MLAP2P_LINK_READ,
};

FIXTURE_VARIANT_ADD(wire, simple_direct_write) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .flags = MLAP2P_LINK_SAMEPROC,
};

FIXTURE_VARIANT_ADD(wire, simple_direct_read) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS,
	.flags = MLAP2P_LINK_SAMEPROC | MLAP2P_LINK_READ,
};

FIXTURE_VARIANT_ADD(wire, simple_addr) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .addr = 1,
};

FIXTURE_VARIANT_ADD(wire, simple_addr_refused) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .addr = 2,
};

FIXTURE_VARIANT_ADD(wire, simple_addr_read) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .addr = 1,
	.flags = MLAP2P_LINK_READ,
};

/* Streaming stores for every message, at steps not 16-byte aligned. */
FIXTURE_VARIANT_ADD(wire, simple_nt) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .chunk = 3000, .nt = 1,
};

FIXTURE_VARIANT_ADD(wire, simple_nt_write) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .chunk = 3000, .nt = 1,
	.flags = MLAP2P_LINK_SAMEPROC,
};

FIXTURE_VARIANT_ADD(wire, simple_nt_read) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .chunk = 3000, .nt = 1,
	.flags = MLAP2P_LINK_SAMEPROC | MLAP2P_LINK_READ,
};

/* (the refused split's copy: split_write_refused_front_through_slots) */
FIXTURE_VARIANT_ADD(wire, simple_nt_refused) {
	.proto = NCCL_PROTO_SIMPLE, NCCL_DEFAULTS, .nt = 1, .addr = 2,
};

FIXTURE_SETUP(wire)
{
	ASSERT_EQ(0, wire_init(&self->w, variant->ll, variant->ll128,
			       variant->simple, variant->flags, variant->chunk));
	if (variant->addr)
		wire_addr(&self->w, variant->addr == 2 ? -EPERM : 0);
	self->w.slink.ntMin = self->w.rlink.ntMin = variant->nt;
}

FIXTURE_TEARDOWN(wire)
{
	wire_fini(&self->w);
}

static const size_t exact_sizes[] = {
	0, 1, 7, 8, 4095, 4096, 4097, MiB + 13, 64 * MiB,
};

/*
 * MLAP2P_TEST_QUICK=1 (the TSan lane, where every byte copied is checked
 * and 64 MiB takes minutes) leaves out the last size; the plain and ASan
 * lanes always move it.
 */
TEST_F_TIMEOUT(wire, exact_sizes, 300)
{
	size_t n = sizeof(exact_sizes) / sizeof(exact_sizes[0]) -
		   (getenv("MLAP2P_TEST_QUICK") ? 1 : 0);
	int protos[sizeof(exact_sizes) / sizeof(exact_sizes[0])];
	size_t i;

	for (i = 0; i < n; i++)
		protos[i] = variant->proto;
	/* One message at a time, so a failure names its size. */
	for (i = 0; i < n; i++) {
		long wrong = transfer(&self->w, 1, &protos[i], &exact_sizes[i],
				      i, 0);

		ASSERT_EQ(0, wrong) TH_LOG("size %zu", exact_sizes[i]);
	}
	/* And all of them back to back. */
	ASSERT_EQ(0, transfer(&self->w, n, protos, exact_sizes, 100, 0));
}

/* Many messages the receiver has not asked for yet: credit must hold. */
TEST_F(wire, sender_runs_ahead)
{
	enum { N = 40 };
	int protos[N];
	size_t sizes[N];
	int i;

	for (i = 0; i < N; i++) {
		protos[i] = variant->proto;
		sizes[i] = 1 + i * 37;
	}
	ASSERT_EQ(0, transfer(&self->w, N, protos, sizes, 7, 0));
	EXPECT_EQ((uint64_t)self->w.sconn.step, self->w.rconn.step);
}

/* ---- all three protocols on one connection, random sizes -------------- */

/* For stand-alone tests that need a longer timeout than TEST() gives. */
FIXTURE(solo) {
	int unused;
};

FIXTURE_SETUP(solo)
{
	self->unused = 0;
}

FIXTURE_TEARDOWN(solo)
{
}

TEST_F_TIMEOUT(solo, random_sizes_mixed_protocols, 300)
{
	enum { N = 3000 };
	static const size_t smalls[][3] = {
		{ 512 * KiB, 4800 * KiB, 4 * MiB },	/* NCCL's defaults */
		{ 1 * KiB, 4 * KiB, 16 * KiB },		/* many steps */
	};
	static int protos[N];
	static size_t sizes[N];
	unsigned int seed = 12345;
	int c, i;

	for (c = 0; c < 2; c++) {
		struct wire w;

		ASSERT_EQ(0, wire_init(&w, smalls[c][0], smalls[c][1],
				       smalls[c][2], c ? MLAP2P_LINK_SAMEPROC : 0, 0));
		for (i = 0; i < N; i++) {
			unsigned int r = rand_r(&seed);

			protos[i] = r % 3;
			/* mostly small, some up to 256 KiB */
			sizes[i] = (r >> 4) % ((r & 0x100) ? 256 * KiB : 300);
		}
		ASSERT_EQ(0, transfer(&w, N, protos, sizes, 1000 * c, 0));
		EXPECT_EQ(w.sconn.step, w.rconn.step);
		wire_fini(&w);
	}
}

/* ---- LL across the 32-bit flag wrap ------------------------------------ */

/*
 * Start next to the wrap with every line of every slot poisoned with the
 * flag it will carry right after the wrap plus garbage data: the state an
 * unlucky buffer is in after four billion one-line messages.  Short messages
 * lead up to the wrap, then full-slot messages follow, each sent late on
 * purpose.  Without the cleaning pass (and the zeroing of the flag-0 step's
 * slot) the receiver would take those from the garbage.
 */
TEST_F_TIMEOUT(solo, ll_flag_wrap_cleaning, 120)
{
	enum { N = 48 };
	const uint64_t start = 0x100000000ULL - 24;
	int protos[N];
	size_t sizes[N];
	struct wire w;
	size_t slotLines, l;
	uint64_t s;
	int i;

	ASSERT_EQ(0, wire_init(&w, 4 * KiB, 8 * KiB, 8 * KiB, 0, 0));
	slotLines = w.buffSizes[NCCL_PROTO_LL] / NCCL_STEPS / MLAP2P_LL_LINE;
	for (s = 0x100000000ULL; s < 0x100000000ULL + NCCL_STEPS; s++) {
		uint32_t *line = (uint32_t *)(w.sconn.buffs[NCCL_PROTO_LL] +
				 (s % NCCL_STEPS) * slotLines * MLAP2P_LL_LINE);

		for (l = 0; l < slotLines; l++) {
			line[4 * l + 0] = 0xdeadbeef;
			line[4 * l + 1] = (uint32_t)(s + 1);
			line[4 * l + 2] = 0xdeadbeef;
			line[4 * l + 3] = (uint32_t)(s + 1);
		}
	}
	wire_set_step(&w, start);
	for (i = 0; i < N; i++) {
		protos[i] = NCCL_PROTO_LL;
		sizes[i] = 8;
	}
	for (i = 23; i < 23 + 2 * NCCL_STEPS; i++)	/* from step 2^32 on */
		sizes[i] = slotLines * MLAP2P_LL_PAYLOAD;
	ASSERT_EQ(0, transfer(&w, N, protos, sizes, 77, 10000));
	/* Both ends skipped the step whose flag is 0, and stayed in step. */
	EXPECT_EQ(w.sconn.step, w.rconn.step);
	EXPECT_EQ(start + N + 1, w.sconn.step);
	EXPECT_EQ(0x100000000ULL - 1, w.sconn.llLastCleaning);
	wire_fini(&w);
}

/* ---- a group: both directions of a ring step at once ------------------- */

struct peer {
	struct mlap2p_link *sendLink, *recvLink;
	size_t bytes;
	uint64_t seed;
	size_t wrong;
	int ret;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	char *sbuf = malloc(p->bytes), *rbuf = malloc(p->bytes);
	struct mlap2p_op s = {
		.link = p->sendLink, .proto = NCCL_PROTO_SIMPLE, .send = 1,
		.buf = sbuf, .bytes = p->bytes,
	};
	struct mlap2p_op r = {
		.link = p->recvLink, .proto = NCCL_PROTO_SIMPLE, .send = 0,
		.buf = rbuf, .bytes = p->bytes,
	};
	struct mlap2p_op *ops[2] = { &s, &r };

	fill(sbuf, p->bytes, p->seed);
	p->ret = run_ops(ops, 2);
	if (!p->ret)
		p->wrong = count_wrong(rbuf, p->bytes, p->seed ^ 1);
	free(sbuf);
	free(rbuf);
	return NULL;
}

/*
 * Two threads each send 8 MiB to the other through 64 KiB FIFOs.  Done one
 * after the other this would deadlock (a SIMPLE send waits for its receive);
 * progressed together it must complete.
 */
TEST(group_exchange_bigger_than_fifo)
{
	struct wire ab, ba;
	struct peer a = { .bytes = 8 * MiB, .seed = 2 };
	struct peer b = { .bytes = 8 * MiB, .seed = 3 };
	pthread_t ta, tb;

	ASSERT_EQ(0, wire_init(&ab, 8 * KiB, 16 * KiB, 64 * KiB, 0, 0));
	ASSERT_EQ(0, wire_init(&ba, 8 * KiB, 16 * KiB, 64 * KiB, 0, 0));
	a.sendLink = &ab.slink;
	a.recvLink = &ba.rlink;
	b.sendLink = &ba.slink;
	b.recvLink = &ab.rlink;
	ASSERT_EQ(0, pthread_create(&ta, NULL, peer_main, &a));
	ASSERT_EQ(0, pthread_create(&tb, NULL, peer_main, &b));
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	EXPECT_EQ(0, a.ret);
	EXPECT_EQ(0, b.ret);
	EXPECT_EQ(0, a.wrong);
	EXPECT_EQ(0, b.wrong);
	wire_fini(&ab);
	wire_fini(&ba);
}

/* ---- abort, a dead peer, a size mismatch -------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct later {
	int *flag;
	uint32_t *flag32;
	useconds_t after;
};

static void *set_later(void *arg)
{
	struct later *l = arg;

	usleep(l->after);
	if (l->flag)
		__atomic_store_n(l->flag, 1, __ATOMIC_RELAXED);
	if (l->flag32)
		__atomic_store_n(l->flag32, 1, __ATOMIC_RELAXED);
	return NULL;
}

FIXTURE(lonely) {
	struct wire w;
};

FIXTURE_VARIANT(lonely) {
	int proto;
	int send;
};

FIXTURE_VARIANT_ADD(lonely, ll_recv) { .proto = NCCL_PROTO_LL, .send = 0 };
FIXTURE_VARIANT_ADD(lonely, ll128_recv) { .proto = NCCL_PROTO_LL128, .send = 0 };
FIXTURE_VARIANT_ADD(lonely, simple_recv) { .proto = NCCL_PROTO_SIMPLE, .send = 0 };
FIXTURE_VARIANT_ADD(lonely, simple_send) { .proto = NCCL_PROTO_SIMPLE, .send = 1 };

FIXTURE_SETUP(lonely)
{
	ASSERT_EQ(0, wire_init(&self->w, 8 * KiB, 16 * KiB, 64 * KiB, 0, 0));
}

FIXTURE_TEARDOWN(lonely)
{
	wire_fini(&self->w);
}

/* Nobody on the other end: abort from another thread ends the wait. */
TEST_F(lonely, abort_ends_wait)
{
	struct later l = { .flag32 = &self->w.abortFlag, .after = 50000 };
	char buf[256];
	pthread_t t;
	double t0 = now_s();

	memset(buf, 1, sizeof(buf));
	ASSERT_EQ(0, pthread_create(&t, NULL, set_later, &l));
	EXPECT_EQ(-ECANCELED, run_one(variant->send ? &self->w.slink : &self->w.rlink,
				      variant->proto, variant->send, buf, sizeof(buf)));
	pthread_join(t, NULL);
	EXPECT_LT(now_s() - t0, 2.0);
}

/* The liveness callback's error ends the wait. */
TEST_F(lonely, dead_peer_ends_wait)
{
	struct later l = { .flag = &self->w.dead, .after = 50000 };
	char buf[256];
	pthread_t t;
	double t0 = now_s();

	memset(buf, 1, sizeof(buf));
	ASSERT_EQ(0, pthread_create(&t, NULL, set_later, &l));
	EXPECT_EQ(-ECONNRESET, run_one(variant->send ? &self->w.slink : &self->w.rlink,
				       variant->proto, variant->send, buf, sizeof(buf)));
	pthread_join(t, NULL);
	EXPECT_LT(now_s() - t0, 2.0);
}

/* The two ends disagree on a SIMPLE message's size: an error, not garbage. */
TEST(simple_size_mismatch)
{
	static const int protos[1] = { NCCL_PROTO_SIMPLE };
	static const size_t sizes[1] = { 100000 };
	struct wire w;
	char *buf = malloc(100001);

	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 64 * KiB, 0, 0));
	ASSERT_NE(NULL, buf);
	/* The sender offers 100000; we ask for 100001. */
	{
		struct sender s = {
			.link = &w.slink, .nmsg = 1, .protos = protos,
			.sizes = sizes, .seed = 1,
		};
		struct later l = { .flag32 = &w.abortFlag, .after = 500000 };
		pthread_t t, ta;
		int ret;

		ASSERT_EQ(0, pthread_create(&t, NULL, sender_main, &s));
		ASSERT_EQ(0, pthread_create(&ta, NULL, set_later, &l));
		ret = run_one(&w.rlink, NCCL_PROTO_SIMPLE, 0, buf, 100001);
		pthread_join(t, NULL);
		pthread_join(ta, NULL);
		/* The sender, which accepts the receiver's offer, sees it. */
		EXPECT_EQ(-EPROTO, s.ret);
		EXPECT_EQ(-ECANCELED, ret);
	}
	free(buf);
	wire_fini(&w);
}

/*
 * link->stepMin (the data plane sets it where a system call is dear):
 * with 128 KiB steps and stepMin 32 KiB a message of fewer than 8 steps
 * takes them halved, down to 32 KiB: 0 to 512 KiB - 1 bytes in 32 KiB,
 * 512 KiB to 1 MiB - 1 in 64 KiB, 1 MiB on in 128 KiB; a step that
 * is no power of two halves the same way (100 KiB to 50 KiB, not below
 * stepMin); stepMin 0 never.  Then each size through the FIFO, the two
 * ends progressed by this thread: every byte and the byte after it
 * checked, the step both ends took and their count exact.
 */
TEST(simple_step_halves_below_eight_steps)
{
	static const struct { size_t bytes, step; } cases[] = {
		{ 0, 32 * KiB }, { 1, 32 * KiB }, { 128 * KiB, 32 * KiB },
		{ 256 * KiB + 8, 32 * KiB }, { 512 * KiB - 1, 32 * KiB },
		{ 512 * KiB, 64 * KiB }, { MiB - 1, 64 * KiB },
		{ MiB, 128 * KiB }, { 3 * MiB + 5, 128 * KiB },
	};
	struct mlap2p_link l = { .buffSizes = { 0, 0, 8 * 128 * KiB },
				 .stepMin = 32 * KiB };
	char *src = malloc(3 * MiB + 6), *dst = malloc(3 * MiB + 6);
	struct wire w;
	unsigned int i;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		EXPECT_EQ(cases[i].step, mlap2p_simple_step(&l, cases[i].bytes))
			TH_LOG("%zu bytes", cases[i].bytes);
	l.buffSizes[NCCL_PROTO_SIMPLE] = 8 * 100 * KiB;
	EXPECT_EQ(50 * KiB, mlap2p_simple_step(&l, 100 * KiB));
	l.stepMin = 0;
	EXPECT_EQ(100 * KiB, mlap2p_simple_step(&l, 100 * KiB));

	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 8 * 128 * KiB, 0, 0));
	w.slink.stepMin = w.rlink.stepMin = 32 * KiB;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = cases[i].bytes;
		struct mlap2p_op r = {
			.link = &w.rlink, .proto = NCCL_PROTO_SIMPLE,
			.buf = dst, .bytes = n,
		};
		struct mlap2p_op snd = {
			.link = &w.slink, .proto = NCCL_PROTO_SIMPLE,
			.send = 1, .buf = src, .bytes = n,
		};
		struct mlap2p_op *ops[2] = { &r, &snd };
		uint64_t steps = n ? (n + cases[i].step - 1) / cases[i].step : 1;

		fill(src, n + 1, i + 1);
		memset(dst, 0, n + 1);
		EXPECT_EQ(0, run_ops(ops, 2)) TH_LOG("%zu bytes", n);
		EXPECT_EQ(0, memcmp(src, dst, n)) TH_LOG("%zu bytes", n);
		EXPECT_EQ(0, dst[n]) TH_LOG("%zu bytes", n);
		EXPECT_EQ(cases[i].step, r.perStep) TH_LOG("%zu bytes", n);
		EXPECT_EQ(cases[i].step, snd.perStep) TH_LOG("%zu bytes", n);
		EXPECT_EQ(steps, r.steps) TH_LOG("%zu bytes", n);
		EXPECT_EQ(steps, snd.steps) TH_LOG("%zu bytes", n);
	}
	wire_fini(&w);
	free(src);
	free(dst);
}

/* ---- single copy by address (cross-memory attach) ---------------------- */

/* Move one message with both ends progressed by this thread. */
static int exchange(struct wire *w, char *src, char *dst, size_t bytes)
{
	struct mlap2p_op r = {
		.link = &w->rlink, .proto = NCCL_PROTO_SIMPLE, .send = 0,
		.buf = dst, .bytes = bytes,
	};
	struct mlap2p_op snd = {
		.link = &w->slink, .proto = NCCL_PROTO_SIMPLE, .send = 1,
		.buf = src, .bytes = bytes,
	};
	struct mlap2p_op *ops[2] = { &r, &snd };

	return run_ops(ops, 2);
}

static int all_zero(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Every step is one write into the receiver; the slots are never used. */
TEST(addr_offer_writes_every_step)
{
	const size_t bytes = MiB + 13, chunk = 128 * KiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 4 * MiB, 0, chunk));
	wire_addr(&w, 0);
	fill(src, bytes, 3);
	memset(dst, 0, bytes);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 3));
	EXPECT_EQ((int)((bytes + chunk - 1) / chunk), w.writes);
	EXPECT_TRUE(all_zero(w.sconn.buffs[NCCL_PROTO_SIMPLE], 4 * MiB));
	EXPECT_EQ(0U, w.slink.flags & MLAP2P_LINK_NOREMOTE);
	EXPECT_EQ(w.sconn.step, w.rconn.step);
	EXPECT_EQ((uint64_t)9, w.rconn.step);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * A sender that may not write into the receiver (-EPERM) sends through
 * the slots: it tries once, then refuses every later address offer at once.
 */
TEST(addr_offer_refused_once)
{
	const size_t bytes = MiB + 13;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;
	int m;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 4 * MiB, 0, 0));
	wire_addr(&w, -EPERM);
	for (m = 0; m < 3; m++) {
		fill(src, bytes, 10 + m);
		memset(dst, 0, bytes);
		ASSERT_EQ(0, exchange(&w, src, dst, bytes)) TH_LOG("message %d", m);
		EXPECT_EQ(0, count_wrong(dst, bytes, 10 + m));
		EXPECT_EQ(1, w.writes);
		EXPECT_EQ(MLAP2P_LINK_NOREMOTE,
			  w.slink.flags & MLAP2P_LINK_NOREMOTE);
	}
	/* -ENOSYS (no CONFIG_CROSS_MEMORY_ATTACH) is a refusal too. */
	wire_fini(&w);
	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 4 * MiB, 0, 0));
	wire_addr(&w, -ENOSYS);
	fill(src, 5000, 20);
	ASSERT_EQ(0, exchange(&w, src, dst, 5000));
	EXPECT_EQ(0, count_wrong(dst, 5000, 20));
	EXPECT_EQ(1, w.writes);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * A wire offering by address, a receive of @bytes into @dst that has made
 * its offer, and a send of @src set up but not started.
 */
static int addr_pair(struct wire *w, struct mlap2p_op *r, struct mlap2p_op *snd,
		     char *src, char *dst, size_t bytes, size_t chunk)
{
	int ret = wire_init(w, 8 * KiB, 16 * KiB, 4 * MiB, 0, chunk);

	if (ret)
		return ret;
	wire_addr(w, 0);
	*r = (struct mlap2p_op){ .link = &w->rlink, .proto = NCCL_PROTO_SIMPLE,
				 .buf = dst, .bytes = bytes };
	*snd = (struct mlap2p_op){ .link = &w->slink, .proto = NCCL_PROTO_SIMPLE,
				   .send = 1, .buf = src, .bytes = bytes };
	ret = mlap2p_op_start(r);
	if (!ret && mlap2p_op_progress(r) != MLAP2P_OP_MOVED)
		ret = -EPROTO;	/* the offer was not made */
	return ret;
}

/*
 * A receiver that gives up an address offer nobody took takes it back: the
 * sender never sees it and never writes.
 */
TEST(addr_revoke_before_taken)
{
	const size_t bytes = MiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct mlap2p_op r, snd;
	struct wire w;
	int i;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, addr_pair(&w, &r, &snd, src, dst, bytes, 0));
	ASSERT_EQ(MLAP2P_XCHG_ADDR, w.sendMem->ptrExchange);
	EXPECT_EQ(1, mlap2p_simple_revoke(&r));
	EXPECT_EQ(NULL, w.sendMem->ptrExchange);
	ASSERT_EQ(0, mlap2p_op_start(&snd));
	for (i = 0; i < 100; i++)
		EXPECT_EQ(MLAP2P_OP_IDLE, mlap2p_op_progress(&snd));
	EXPECT_EQ(0, w.writes);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * Taken and being written: the receiver's withdrawal holds until the sender
 * has seen it; the sender fails with -ECANCELED and writes nothing more.
 */
TEST(addr_revoke_mid_message)
{
	const size_t bytes = MiB, chunk = 128 * KiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct mlap2p_op r, snd;
	struct wire w;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, addr_pair(&w, &r, &snd, src, dst, bytes, chunk));
	ASSERT_EQ(0, mlap2p_op_start(&snd));
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));	/* step 0 */
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));	/* step 1 */
	ASSERT_EQ(2, w.writes);
	ASSERT_EQ(MLAP2P_MODE_REMOTE, snd.mode);
	/* 6 more steps have credit, but the receiver withdraws first. */
	EXPECT_EQ(0, mlap2p_simple_revoke(&r));
	EXPECT_EQ(0, mlap2p_simple_revoke(&r));
	EXPECT_EQ(-ECANCELED, mlap2p_op_progress(&snd));
	EXPECT_EQ(2, w.writes);
	EXPECT_EQ(1, mlap2p_simple_revoke(&r));
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * Once every step is written there is nothing to withdraw; the sender,
 * draining (the message was split, though it took both steps itself),
 * learns of the withdrawal and fails.
 */
TEST(addr_revoke_after_last_write)
{
	const size_t bytes = 200 * KiB, chunk = 128 * KiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct mlap2p_op r, snd;
	struct wire w;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, addr_pair(&w, &r, &snd, src, dst, bytes, chunk));
	ASSERT_EQ(0, mlap2p_op_start(&snd));
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));
	EXPECT_EQ(2, w.writes);
	EXPECT_EQ(MLAP2P_OP_IDLE, mlap2p_op_progress(&snd));	/* drains */
	EXPECT_EQ(1, mlap2p_simple_revoke(&r));
	EXPECT_EQ(-ECANCELED, mlap2p_op_progress(&snd));
	EXPECT_EQ(2, w.writes);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * -EFAULT on the first step (a receive buffer the kernel cannot write this
 * way, e.g. another driver's PFN mapping): that message goes through the
 * slots, and the next one tries again.
 */
TEST(addr_fault_first_step_refuses_that_message)
{
	const size_t bytes = 300 * KiB, chunk = 128 * KiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 4 * MiB, 0, chunk));
	wire_addr(&w, -EFAULT);
	w.failAt = 1;
	fill(src, bytes, 5);
	memset(dst, 0, bytes);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 5));
	EXPECT_EQ(1, w.writes);
	EXPECT_EQ(0U, w.slink.flags & MLAP2P_LINK_NOREMOTE);
	/* the next message writes straight in: 3 steps */
	fill(src, bytes, 6);
	memset(dst, 0, bytes);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 6));
	EXPECT_EQ(4, w.writes);
	wire_fini(&w);
	free(src);
	free(dst);
}

/* A failure after the first step is the message's error. */
TEST(addr_write_error_later_fails_send)
{
	const size_t bytes = 300 * KiB, chunk = 128 * KiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct wire w;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 4 * MiB, 0, chunk));
	wire_addr(&w, -EFAULT);
	w.failAt = 2;
	EXPECT_EQ(-EFAULT, exchange(&w, src, dst, bytes));
	EXPECT_EQ(2, w.writes);
	wire_fini(&w);
	ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 4 * MiB, 0, chunk));
	wire_addr(&w, -ENOMEM);
	EXPECT_EQ(-ENOMEM, exchange(&w, src, dst, bytes));
	EXPECT_EQ(1, w.writes);
	EXPECT_EQ(0U, w.slink.flags & MLAP2P_LINK_NOREMOTE);
	wire_fini(&w);
	free(src);
	free(dst);
}

/* ---- the latency path (mlap2p_ll*_send_small / recv_small) ------------- */

static int small_send(int proto, struct mlap2p_link *l, const void *buf,
		      size_t n)
{
	return proto == NCCL_PROTO_LL ? mlap2p_ll_send_small(l, buf, n) :
					mlap2p_ll128_send_small(l, buf, n);
}

static int small_recv(int proto, struct mlap2p_link *l, void *buf, size_t n,
		      uint32_t polls)
{
	return proto == NCCL_PROTO_LL ? mlap2p_ll_recv_small(l, buf, n, polls) :
					mlap2p_ll128_recv_small(l, buf, n, polls);
}

/*
 * For LL and LL128: every size up to the path's limit arrives exact and
 * in order with the op engine's messages on either side; a receive with
 * nothing there consumes nothing; the ninth send without a receive has no
 * credit; LL128 refuses more than MLAP2P_LL128_SMALL bytes.
 */
TEST(small_path_exact_and_in_order)
{
	static const int protos[2] = { NCCL_PROTO_LL, NCCL_PROTO_LL128 };
	static const size_t limits[2] = { MLAP2P_LL_SMALL, MLAP2P_LL128_SMALL };
	char src[MLAP2P_LL128_SMALL + 1], dst[MLAP2P_LL128_SMALL + 1];
	struct wire w;
	int p, i;
	size_t n;

	for (p = 0; p < 2; p++) {
		int proto = protos[p];

		ASSERT_EQ(0, wire_init(&w, 8 * KiB, 16 * KiB, 64 * KiB, 0, 0));
		for (n = 0; n <= limits[p]; n++) {
			fill(src, n, n + 100 * p);
			memset(dst, 0x5a, sizeof(dst));
			EXPECT_EQ(0, small_recv(proto, &w.rlink, dst, n, 3));
			EXPECT_EQ(w.sconn.step, w.rconn.step);
			ASSERT_EQ(1, small_send(proto, &w.slink, src, n));
			ASSERT_EQ(1, small_recv(proto, &w.rlink, dst, n, 3))
				TH_LOG("%s, %zu bytes", p ? "LL128" : "LL", n);
			EXPECT_EQ(0, count_wrong(dst, n, n + 100 * p));
			EXPECT_EQ(0x5a, dst[n]);
			/* the op engine on the same connection, both ways */
			fill(src, 40, n);
			ASSERT_EQ(1, small_send(proto, &w.slink, src, 40));
			ASSERT_EQ(0, run_one(&w.rlink, proto, 0, dst, 40));
			EXPECT_EQ(0, count_wrong(dst, 40, n));
			ASSERT_EQ(0, run_one(&w.slink, proto, 1, src, 40));
			ASSERT_EQ(1, small_recv(proto, &w.rlink, dst, 40, 3));
			EXPECT_EQ(0, count_wrong(dst, 40, n));
		}
		/* NCCL_STEPS sends fill the FIFO; the next one waits */
		for (i = 0; i < NCCL_STEPS; i++)
			ASSERT_EQ(1, small_send(proto, &w.slink, src, 8));
		EXPECT_EQ(0, small_send(proto, &w.slink, src, 8));
		for (i = 0; i < NCCL_STEPS; i++)
			ASSERT_EQ(1, small_recv(proto, &w.rlink, dst, 8, 3));
		EXPECT_EQ(1, small_send(proto, &w.slink, src, 8));
		EXPECT_EQ(1, small_recv(proto, &w.rlink, dst, 8, 3));
		if (proto == NCCL_PROTO_LL128) {
			EXPECT_EQ(1, mlap2p_ll128_send_small(&w.slink, src, 8));
			EXPECT_EQ(0, mlap2p_ll128_recv_small(&w.rlink, dst,
							     MLAP2P_LL128_SMALL + 1,
							     1000));
			EXPECT_EQ(1, small_recv(proto, &w.rlink, dst, 8, 3));
		}
		EXPECT_EQ(w.sconn.step, w.rconn.step);
		wire_fini(&w);
	}
}

/* ---- split: the receiver pulls from the back ---------------------------- */

/* A wire offering by address on which the receiver may also pull. */
static int split_wire(struct wire *w, int readErr, int readFailAt)
{
	int ret = wire_init(w, 8 * KiB, 16 * KiB, 4 * MiB, 0, 128 * KiB);

	if (ret)
		return ret;
	wire_addr(w, 0);
	w->rlink.read_peer = wire_read_peer;
	w->rlink.pull_peer = wire_pull_peer;
	w->readErr = readErr;
	w->readFailAt = readFailAt;
	return 0;
}

/*
 * Each end takes one turn per progress call, the sender one step from the
 * front, the receiver from the back a quarter of those left (one once
 * fewer than 8 are): of 9 steps the sender writes 0-3, the receiver reads
 * 7-8 in one call, then 6, 5 and 4, after one byte to see it may.
 * Nothing goes through the slots.
 */
TEST(split_sender_front_receiver_back)
{
	const size_t bytes = MiB + 13;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;
	int m;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, split_wire(&w, 0, 0));
	for (m = 0; m < 2; m++) {
		fill(src, bytes, 40 + m);
		memset(dst, 0, bytes);
		ASSERT_EQ(0, exchange(&w, src, dst, bytes)) TH_LOG("message %d", m);
		EXPECT_EQ(0, count_wrong(dst, bytes, 40 + m));
		EXPECT_EQ(4 * (m + 1), w.writes);
		EXPECT_EQ(5 * (m + 1), w.reads);	/* 4 calls + the probe */
		EXPECT_EQ(128 * KiB + 13, w.readMax);	/* 7-8 at once */
		EXPECT_EQ((uint64_t)9 * (m + 1), w.rconn.step);
		EXPECT_EQ(w.sconn.step, w.rconn.step);
		EXPECT_EQ((uint64_t)9 * (m + 1), w.recvMem->tail);
		EXPECT_EQ((uint64_t)9 * (m + 1), w.sendMem->head);
	}
	EXPECT_TRUE(all_zero(w.sconn.buffs[NCCL_PROTO_SIMPLE], 4 * MiB));
	/* one step: nothing to split */
	fill(src, 100 * KiB, 42);
	ASSERT_EQ(0, exchange(&w, src, dst, 100 * KiB));
	EXPECT_EQ(0, count_wrong(dst, 100 * KiB, 42));
	EXPECT_EQ(9, w.writes);
	EXPECT_EQ(10, w.reads);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * Both ends in their own threads, messages of 1 byte to 2 MiB: the bytes
 * are exact, every long message is shared between the two (the receiver
 * pulls at least one step of some of them), and the sender refills its
 * buffer for the next message only once the receiver has read it (under
 * TSan, a missing order between the receiver's last read and the
 * sender's drain is a reported race).
 */
TEST_F_TIMEOUT(solo, split_threads_random_sizes, 300)
{
	enum { N = 300 };
	static int protos[N];
	static size_t sizes[N];
	unsigned int seed = 777;
	struct wire w;
	int i;

	ASSERT_EQ(0, split_wire(&w, 0, 0));
	for (i = 0; i < N; i++) {
		unsigned int r = rand_r(&seed);

		protos[i] = NCCL_PROTO_SIMPLE;
		sizes[i] = 1 + (r >> 3) % ((r & 3) ? 2 * MiB : 300 * KiB);
	}
	ASSERT_EQ(0, transfer(&w, N, protos, sizes, 4242, 0));
	EXPECT_EQ(w.sconn.step, w.rconn.step);
	EXPECT_GT(w.writes, N / 2);
	EXPECT_GT(w.reads, N / 2);
	EXPECT_TRUE(all_zero(w.sconn.buffs[NCCL_PROTO_SIMPLE], 4 * MiB));
	wire_fini(&w);
}

/*
 * A receiver the kernel does not let read the sender (-EPERM at the probe)
 * takes no step and never tries again; the sender writes them all.
 */
TEST(split_pull_refused_sender_writes_all)
{
	const size_t bytes = MiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;
	int m;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, split_wire(&w, -EPERM, 0));
	for (m = 0; m < 2; m++) {
		fill(src, bytes, 50 + m);
		memset(dst, 0, bytes);
		ASSERT_EQ(0, exchange(&w, src, dst, bytes)) TH_LOG("message %d", m);
		EXPECT_EQ(0, count_wrong(dst, bytes, 50 + m));
		EXPECT_EQ(8 * (m + 1), w.writes);
		EXPECT_EQ(1, w.reads);
		EXPECT_EQ(MLAP2P_LINK_NOPULL,
			  w.rlink.flags & MLAP2P_LINK_NOPULL);
	}
	wire_fini(&w);
	/* -EFAULT at the probe (a buffer it cannot read): this message only */
	ASSERT_EQ(0, split_wire(&w, -EFAULT, 1));
	fill(src, bytes, 52);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 52));
	EXPECT_EQ(8, w.writes);
	EXPECT_EQ(0U, w.rlink.flags & MLAP2P_LINK_NOPULL);
	fill(src, bytes, 53);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 53));
	EXPECT_EQ(12, w.writes);
	EXPECT_EQ(6, w.reads);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * The sender may not write into the receiver (-EPERM on its first step):
 * its steps go through the slots (sizes ~n), the receiver still pulls the
 * back half, and the bytes arrive exact; copied out plainly, then with
 * streaming stores (ntMin 1).
 */
TEST(split_write_refused_front_through_slots)
{
	const size_t bytes = MiB + 13;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;
	size_t nt;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (nt = 0; nt < 2; nt++) {
		ASSERT_EQ(0, split_wire(&w, 0, 0));
		w.slink.ntMin = w.rlink.ntMin = nt;
		w.writeErr = -EPERM;
		fill(src, bytes, 60);
		memset(dst, 0, bytes);
		ASSERT_EQ(0, exchange(&w, src, dst, bytes));
		EXPECT_EQ(0, count_wrong(dst, bytes, 60));
		EXPECT_EQ(1, w.writes);
		EXPECT_EQ(5, w.reads);
		EXPECT_EQ(MLAP2P_LINK_NOREMOTE,
			  w.slink.flags & MLAP2P_LINK_NOREMOTE);
		EXPECT_FALSE(all_zero(w.sconn.buffs[NCCL_PROTO_SIMPLE],
				      4 * MiB));
		EXPECT_EQ((uint64_t)9, w.rconn.step);
		/* refused from the start: no split, the slots carry it all */
		fill(src, bytes, 61);
		ASSERT_EQ(0, exchange(&w, src, dst, bytes));
		EXPECT_EQ(0, count_wrong(dst, bytes, 61));
		EXPECT_EQ(1, w.writes);
		EXPECT_EQ(5, w.reads);
		EXPECT_EQ((uint64_t)18, w.rconn.step);
		wire_fini(&w);
	}
	free(src);
	free(dst);
}

/* A pull that fails after the probe is the receive's error. */
TEST(split_pull_error_fails_receive)
{
	const size_t bytes = MiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct wire w;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, split_wire(&w, -ECONNRESET, 2));
	EXPECT_EQ(-ECONNRESET, exchange(&w, src, dst, bytes));
	EXPECT_EQ(2, w.reads);
	wire_fini(&w);
	free(src);
	free(dst);
}

/* ---- sender first: the receiver reads the published message ------------ */

/* The sender may publish any buffer (a plain one, across processes). */
static int wire_publish(void *arg, const void *buf, size_t bytes)
{
	(void)arg;
	(void)buf;
	(void)bytes;
	return MLAP2P_SEND_PULL;
}

/*
 * A published message the receiver cannot read (-EFAULT: e.g. a PFN
 * mapping process_vm_readv() refuses) goes through the slots: after the
 * marker and the one failed read, its 8 steps marked ~n, exact.  Only that message: the next one is
 * published again and read in one call, as a whole.  The sender never
 * writes into the receiver.
 */
TEST(sender_first_fault_pushes_that_message_only)
{
	const size_t bytes = MiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	int *sizes;
	struct wire w;
	int i;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, split_wire(&w, -EFAULT, 1));
	w.slink.publish = wire_publish;
	sizes = w.rconn.sizesFifo;
	fill(src, bytes, 70);
	memset(dst, 0, bytes);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 70));
	EXPECT_EQ(1, w.reads);
	EXPECT_EQ(0, w.writes);
	/* (step 8 took the marker's slot) */
	for (i = 1; i <= 8; i++)
		EXPECT_EQ(~(int)(128 * KiB), sizes[i % NCCL_STEPS])
			TH_LOG("step %d", i);
	EXPECT_EQ((uint64_t)9, w.rconn.step);
	EXPECT_EQ((uint64_t)9, w.sconn.step);
	EXPECT_EQ(0U, w.slink.flags & MLAP2P_LINK_NOPUBLISH);

	fill(src, bytes, 71);
	memset(dst, 0, bytes);
	ASSERT_EQ(0, exchange(&w, src, dst, bytes));
	EXPECT_EQ(0, count_wrong(dst, bytes, 71));
	EXPECT_EQ(2, w.reads);
	EXPECT_EQ(bytes, w.readMax);
	EXPECT_EQ(0, w.writes);
	EXPECT_EQ(MLAP2P_SIZE_PULL, sizes[9 % NCCL_STEPS]);
	EXPECT_EQ((uint64_t)10, w.rconn.step);
	EXPECT_EQ((uint64_t)10, w.sconn.step);
	wire_fini(&w);
	free(src);
	free(dst);
}

/* A SIMPLE send of src and its receive into dst over @w, not started. */
static void simple_pair(struct wire *w, struct mlap2p_op *snd,
			struct mlap2p_op *r, char *src, char *dst, size_t bytes)
{
	*snd = (struct mlap2p_op){
		.link = &w->slink, .proto = NCCL_PROTO_SIMPLE,
		.send = 1, .buf = src, .bytes = bytes,
	};
	*r = (struct mlap2p_op){
		.link = &w->rlink, .proto = NCCL_PROTO_SIMPLE,
		.send = 0, .buf = dst, .bytes = bytes,
	};
}

/*
 * A receiver that read a sender-first message and answered completes only
 * once the sender has taken its offer back (how 0) or has withdrawn the
 * message after the read (how 1): until one of them, the pid it read from
 * may have been another process's as far as it knows, since pull_peer
 * checks none.  A sender that stays silent is asked the other way after
 * MLAP2P_PULL_WAITS checks, once: alive, the receive is done (how 2);
 * dead, -ECONNRESET (how 3).  Without still_peer (how 0, 1) it is never
 * asked.  The read is one pull_peer call of the whole message.
 */
TEST(sender_first_receive_ends_at_the_senders_answer)
{
	const size_t bytes = MiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct mlap2p_op r, snd;
	struct wire w;
	int how, n;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (how = 0; how < 4; how++) {
		ASSERT_EQ(0, split_wire(&w, 0, 0));
		w.slink.publish = wire_publish;
		if (how >= 2)
			w.rlink.still_peer = wire_still_peer;
		w.dead = how == 3;
		fill(src, bytes, 60 + how);
		memset(dst, 0, bytes);
		simple_pair(&w, &snd, &r, src, dst, bytes);
		ASSERT_EQ(0, mlap2p_op_start(&snd));	/* published */
		ASSERT_EQ(0, mlap2p_op_start(&r));
		for (n = 0; n < 8 && !w.sendMem->head; n++)
			ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&r));
		ASSERT_EQ((uint64_t)1, w.sendMem->head) TH_LOG("how %d", how);
		EXPECT_EQ(0, count_wrong(dst, bytes, 60 + how));
		EXPECT_EQ(1, w.pulls);
		EXPECT_EQ(1, w.reads);
		EXPECT_EQ(bytes, w.readMax);
		if (how >= 2) {
			/* the answering call was the first check */
			for (n = 2; n < MLAP2P_PULL_WAITS; n++)
				ASSERT_EQ(MLAP2P_OP_IDLE,
					  mlap2p_op_progress(&r))
					TH_LOG("how %d, check %d", how, n);
			EXPECT_EQ(0, w.stills);
			EXPECT_EQ(how == 2 ? MLAP2P_OP_DONE : -ECONNRESET,
				  mlap2p_op_progress(&r));
			EXPECT_EQ(1, w.stills);
			mlap2p_simple_revoke(&snd);
			wire_fini(&w);
			continue;
		}
		for (n = 0; n < 3 * MLAP2P_PULL_WAITS; n++)
			ASSERT_EQ(MLAP2P_OP_IDLE, mlap2p_op_progress(&r))
				TH_LOG("how %d, call %d", how, n);
		if (how == 0) {
			EXPECT_EQ(MLAP2P_OP_DONE, mlap2p_op_progress(&snd));
		} else {
			EXPECT_EQ(1, mlap2p_simple_revoke(&snd));
		}
		EXPECT_EQ(MLAP2P_OP_DONE, mlap2p_op_progress(&r))
			TH_LOG("how %d", how);
		EXPECT_EQ((uint64_t)1, w.rconn.step);
		EXPECT_EQ(0, count_wrong(dst, bytes, 60 + how));
		wire_fini(&w);
	}
	free(src);
	free(dst);
}

static int wire_way(void *arg, const void *buf, size_t bytes)
{
	const struct wire *w = arg;

	(void)buf;
	(void)bytes;
	return w->way;
}

/*
 * The receiver offers its buffer by address; the sender's way decides
 * (MLAP2P_CMA=auto: one way and below MLAP2P_CMA_ONEWAY_MAX, the offer's).
 * MLAP2P_SEND_OFFER: the sender writes steps 0-3, the receiver reads 4-8
 * (as in split_sender_front_receiver_back), nothing through the slots;
 * MLAP2P_SEND_FIFO: refused, all 9 steps through the slots marked ~n,
 * nothing written or read across.  Exact both ways.
 */
TEST(send_way_decides_the_split)
{
	const size_t bytes = MiB + 13;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct wire w;
	int take;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (take = 1; take >= 0; take--) {
		ASSERT_EQ(0, split_wire(&w, 0, 0));
		w.way = take ? MLAP2P_SEND_OFFER : MLAP2P_SEND_FIFO;
		w.slink.publish = wire_way;
		fill(src, bytes, 70 + take);
		memset(dst, 0, bytes);
		ASSERT_EQ(0, exchange(&w, src, dst, bytes)) TH_LOG("take %d", take);
		EXPECT_EQ(0, count_wrong(dst, bytes, 70 + take));
		EXPECT_EQ((uint64_t)9, w.rconn.step);
		if (take) {
			EXPECT_EQ(4, w.writes);
			EXPECT_EQ(5, w.reads);
			EXPECT_TRUE(all_zero(w.sconn.buffs[NCCL_PROTO_SIMPLE],
					     4 * MiB));
		} else {
			EXPECT_EQ(0, w.writes);
			EXPECT_EQ(0, w.reads);
			EXPECT_EQ(~13, w.rconn.sizesFifo[0]);	/* step 8 */
			EXPECT_EQ(~(int)(128 * KiB), w.rconn.sizesFifo[1]);
		}
		wire_fini(&w);
	}
	free(src);
	free(dst);
}

/*
 * A send marked noPublish (the ring collectives' steps, MLAP2P_POST_FIFO)
 * is never sender first, even where the link would publish it, and
 * takes no address the receiver offers: the slots carry it.  One step of
 * 128 KiB: with the mark the slot says ~n (the offer refused, no write,
 * no read), without it the marker.
 */
TEST(no_publish_send_is_never_sender_first)
{
	const size_t bytes = 128 * KiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct mlap2p_op r, snd, *ops[2] = { &r, &snd };
	struct wire w;
	int mark;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (mark = 1; mark >= 0; mark--) {
		ASSERT_EQ(0, split_wire(&w, 0, 0));
		w.slink.publish = wire_publish;
		fill(src, bytes, 90 + mark);
		memset(dst, 0, bytes);
		snd = (struct mlap2p_op){
			.link = &w.slink, .proto = NCCL_PROTO_SIMPLE,
			.send = 1, .noPublish = mark, .buf = src,
			.bytes = bytes,
		};
		r = (struct mlap2p_op){
			.link = &w.rlink, .proto = NCCL_PROTO_SIMPLE,
			.send = 0, .buf = dst, .bytes = bytes,
		};
		ASSERT_EQ(0, run_ops(ops, 2)) TH_LOG("noPublish %d", mark);
		EXPECT_EQ(0, count_wrong(dst, bytes, 90 + mark));
		if (mark) {
			EXPECT_EQ(~(int)bytes, w.rconn.sizesFifo[0]);
			EXPECT_EQ(0, w.writes);
			EXPECT_EQ(0, w.reads);
		} else {
			EXPECT_EQ(MLAP2P_SIZE_PULL, w.rconn.sizesFifo[0]);
			EXPECT_EQ(0, w.writes);
			EXPECT_EQ(1, w.reads);
		}
		wire_fini(&w);
	}
	free(src);
	free(dst);
}

/* Progress a started @op alone: 0 once done, its -errno, or -ETIMEDOUT. */
static int run_one_op(struct mlap2p_op *op)
{
	int i, ret;

	for (i = 0; i < 1000000; i++) {
		ret = mlap2p_op_progress(op);
		if (ret < 0)
			return ret;
		if (ret == MLAP2P_OP_DONE)
			return 0;
	}
	return -ETIMEDOUT;
}

/*
 * A send that gives up its published message (abort, destroy, a dead
 * link) withdraws it at once.  Before the receiver looked, it reads
 * nothing; while it reads (and the read works, or fails as on a freed
 * buffer), it delivers nothing; after it answered "push it", it waits for
 * no step: -ECANCELED each time, never a success or a hang.
 */
TEST(sender_first_withdrawn_fails_receive)
{
	const size_t bytes = MiB;
	char *src = malloc(bytes), *dst = malloc(bytes);
	struct mlap2p_op r, snd;
	struct wire w;
	size_t i;
	int n;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, bytes, 80);
	for (i = 0; i < 4; i++) {
		/*
		 * 0: before the read; 1: during it; 2: during, -EFAULT;
		 * 3: after an -EFAULT read was answered "push it", before
		 * the sender saw the answer.
		 */
		ASSERT_EQ(0, split_wire(&w, i >= 2 ? -EFAULT : 0, 0));
		w.slink.publish = wire_publish;
		simple_pair(&w, &snd, &r, src, dst, bytes);
		ASSERT_EQ(0, mlap2p_op_start(&snd));	/* published */
		ASSERT_EQ((uint64_t)1, w.recvMem->tail);
		if (i == 0) {
			EXPECT_EQ(1, mlap2p_simple_revoke(&snd));
		} else if (i < 3) {
			w.withdraw = &snd;
		}
		ASSERT_EQ(0, mlap2p_op_start(&r));
		if (i == 3) {
			/* the offer, the failed read and the answer */
			for (n = 0; n < 8 && !w.sendMem->head; n++)
				EXPECT_LE(0, mlap2p_op_progress(&r));
			EXPECT_EQ((uint64_t)1, w.sendMem->head);
			EXPECT_EQ(MLAP2P_OP_IDLE, mlap2p_op_progress(&r));
			EXPECT_EQ(1, mlap2p_simple_revoke(&snd));
		}
		EXPECT_EQ(-ECANCELED, run_one_op(&r)) TH_LOG("case %zu", i);
		EXPECT_EQ(i == 0 ? 0 : 1, w.reads) TH_LOG("case %zu", i);
		EXPECT_EQ(NULL, w.withdraw);
		/* no answer; in case 3 the one the sender never read */
		EXPECT_EQ((uint64_t)(i == 3), w.sendMem->head);
		wire_fini(&w);
	}
	free(src);
	free(dst);
}

/*
 * The sender has taken every step the receiver did not and waits for it
 * to finish reading; a receiver that gives up instead releases it (-ECANCELED), and
 * its withdrawal holds at once: nothing more can be written.
 */
TEST(split_drain_ends_on_revoke)
{
	const size_t bytes = MiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct mlap2p_op r, snd;
	struct wire w;
	int i;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, addr_pair(&w, &r, &snd, src, dst, bytes, 128 * KiB));
	w.rlink.read_peer = wire_read_peer;
	ASSERT_EQ(0, mlap2p_op_start(&snd));
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));	/* step 0 */
	EXPECT_EQ(1, snd.split);
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&r));	/* pulls 7 */
	EXPECT_EQ(2, w.reads);
	for (i = 1; i < 7; i++)
		ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));
	EXPECT_EQ(7, w.writes);
	ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));	/* all taken */
	EXPECT_EQ(MLAP2P_OP_IDLE, mlap2p_op_progress(&snd));	/* drains */
	EXPECT_EQ(1, mlap2p_simple_revoke(&r));
	EXPECT_EQ(-ECANCELED, mlap2p_op_progress(&snd));
	EXPECT_EQ(7, w.writes);
	EXPECT_EQ(2, w.reads);
	wire_fini(&w);
	free(src);
	free(dst);
}

/*
 * A sender that gives up a split message (abort, destroy) withdraws it:
 * the receiver fails with -ECANCELED, never delivers what it read or
 * waits for steps that do not come: 0, withdrawn while the receiver
 * reads; 1, before the receiver looked.  And it writes into the
 * receiver no more, so a receiver that gives up too (both aborted)
 * returns at once instead of waiting for an answer: 2.
 */
TEST(split_withdrawn_by_sender_fails_receive)
{
	const size_t bytes = MiB;
	char *src = calloc(1, bytes), *dst = calloc(1, bytes);
	struct mlap2p_op r, snd;
	struct wire w;
	int i;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, addr_pair(&w, &r, &snd, src, dst, bytes,
				       128 * KiB));
		w.rlink.read_peer = wire_read_peer;
		ASSERT_EQ(0, mlap2p_op_start(&snd));
		ASSERT_EQ(MLAP2P_OP_MOVED, mlap2p_op_progress(&snd));
		EXPECT_EQ(1, snd.split);
		if (i == 0) {
			w.withdraw = &snd;
			EXPECT_EQ(-ECANCELED, run_one_op(&r));
			EXPECT_EQ(NULL, w.withdraw);
			EXPECT_LE(1, w.reads);
		} else if (i == 1) {
			EXPECT_EQ(1, mlap2p_simple_revoke(&snd));
			EXPECT_EQ(-ECANCELED, run_one_op(&r));
		} else {
			EXPECT_EQ(1, mlap2p_simple_revoke(&snd));
			EXPECT_EQ(1, mlap2p_simple_revoke(&r));
		}
		EXPECT_EQ(1, w.writes) TH_LOG("case %d", i);
		wire_fini(&w);
	}
	free(src);
	free(dst);
}

/* ---- NET: the proxy sends from the buffer (MLAP2P_LINK_NETPTR) -------- */

/*
 * A fake NET proxy on the send side of a wire: it takes each posted SIMPLE
 * step by tail, "sends" it (copies it into @dst) from ptrsFifo[slot] when
 * set, else from the slot, clears the entry, and only after @delay returns
 * the slot through head, as lib/net.c does once the fabric completes.
 */
struct fake_proxy {
	struct wire *w;
	const char *src;		/* the message being sent */
	char *dst;
	size_t bytes, perStep;
	uint64_t first, steps;		/* the message's steps */
	useconds_t delay;
	int inPlace, fromSlot;		/* steps of each kind */
	int bad;			/* a pointer that is not src + offset */
	uint64_t released;		/* head as the proxy last stored it */
};

static void *fake_proxy_main(void *arg)
{
	struct fake_proxy *f = arg;
	struct wire *w = f->w;
	size_t off = 0;
	uint64_t s;

	for (s = f->first; s < f->first + f->steps; s++) {
		int slot = (int)(s % NCCL_STEPS);
		const char *from;
		void *ptr;
		int n;

		while (__atomic_load_n(&w->recvMem->tail, __ATOMIC_ACQUIRE) <= s)
			if (__atomic_load_n(&w->abortFlag, __ATOMIC_RELAXED))
				return NULL;
		n = w->recvMem->sizesFifo[slot];
		ptr = __atomic_load_n(&w->recvMem->ptrsFifo[slot], __ATOMIC_RELAXED);
		if (n < 0 || off + (size_t)n > f->bytes) {
			f->bad++;
			n = 0;
		}
		if (ptr) {
			f->inPlace++;
			if (ptr != f->src + off)
				f->bad++;
			from = ptr;
		} else {
			f->fromSlot++;
			from = w->sconn.buffs[NCCL_PROTO_SIMPLE] +
			       (size_t)slot * (w->buffSizes[NCCL_PROTO_SIMPLE] /
					       NCCL_STEPS);
		}
		memcpy(f->dst + off, from, (size_t)n);
		off += (size_t)n;
		__atomic_store_n(&w->recvMem->ptrsFifo[slot], NULL,
				 __ATOMIC_RELAXED);
		w->recvMem->sizesFifo[slot] = -1;
		if (f->delay)
			usleep(f->delay);
		__atomic_store_n(&f->released, s + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&w->sendMem->head, s + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

struct net_wire {
	struct wire w;
	int regOk;		/* what reg() answers */
	int regCalls;
};

static int net_reg(void *arg, const void *buf, size_t bytes)
{
	struct net_wire *nw = arg;

	(void)buf;
	(void)bytes;
	nw->regCalls++;
	return nw->regOk;
}

/* The send side of a NET connection: no ptrExchange, ptrsFifo wired. */
static int net_wire_init(struct net_wire *nw, unsigned int flags, size_t chunk)
{
	int ret = wire_init(&nw->w, 8 * KiB, 16 * KiB, 4 * MiB, 0, chunk);

	if (ret)
		return ret;
	nw->w.sconn.ptrExchange = NULL;
	nw->w.sconn.ptrsFifo = nw->w.recvMem->ptrsFifo;
	nw->w.sconn.sizesFifo = nw->w.recvMem->sizesFifo;
	nw->w.slink.flags |= flags;
	nw->w.slink.reg = net_reg;
	nw->w.slink.arg = nw;
	nw->regOk = 1;
	nw->regCalls = 0;
	return 0;
}

/*
 * Send @bytes through the fake proxy; 0 or -errno.  @f says what it saw;
 * the send must not return before the proxy released its last step.
 */
static int net_send(struct net_wire *nw, struct fake_proxy *f, const char *src,
		    char *dst, size_t bytes, useconds_t delay, int *mode)
{
	struct mlap2p_op op = {
		.link = &nw->w.slink, .proto = NCCL_PROTO_SIMPLE, .send = 1,
		.buf = (char *)src, .bytes = bytes,
	};
	struct mlap2p_op *ops[1] = { &op };
	size_t perStep = mlap2p_proto_step_bytes(&nw->w.slink, NCCL_PROTO_SIMPLE);
	pthread_t t;
	int ret;

	memset(f, 0, sizeof(*f));
	f->w = &nw->w;
	f->src = src;
	f->dst = dst;
	f->bytes = bytes;
	f->perStep = perStep;
	f->first = nw->w.sconn.step;
	f->steps = bytes ? (bytes + perStep - 1) / perStep : 1;
	f->delay = delay;
	if (pthread_create(&t, NULL, fake_proxy_main, f))
		return -ENOMEM;
	ret = run_ops(ops, 1);
	/* Returned in place: the proxy must be done with every step already
	 * (a copy through the slots may return as soon as it is posted). */
	if (!ret && op.mode == MLAP2P_MODE_NETPTR &&
	    __atomic_load_n(&f->released, __ATOMIC_RELAXED) !=
		    f->first + f->steps)
		ret = -EBUSY;
	if (ret)
		__atomic_store_n(&nw->w.abortFlag, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	*mode = op.mode;
	return ret;
}

/*
 * Registered buffers: no byte of the slots is written, every step goes by
 * pointer, and each send returns only after the proxy released its last
 * step (the proxy sleeps before each release).  Empty messages and
 * buffers reg() refuses go through the slots.
 */
TEST_F_TIMEOUT(solo, netptr_sends_in_place, 120)
{
	static const size_t sizes[] = { 1, 4097, 128 * KiB, MiB + 13, 5 * MiB + 1 };
	const size_t max = 5 * MiB + 1, chunk = 128 * KiB;
	char *src = malloc(max), *dst = malloc(max);
	struct fake_proxy f;
	struct net_wire nw;
	unsigned int i;
	int mode;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, net_wire_init(&nw, MLAP2P_LINK_NETPTR, chunk));
	wire_set_step(&nw.w, 5);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];

		fill(src, n, 40 + i);
		memset(dst, 0, n);
		ASSERT_EQ(0, net_send(&nw, &f, src, dst, n, i == 3 ? 2000 : 0,
				      &mode)) TH_LOG("%zu bytes", n);
		EXPECT_EQ(MLAP2P_MODE_NETPTR, mode);
		EXPECT_EQ(0, f.bad);
		EXPECT_EQ((int)((n + chunk - 1) / chunk), f.inPlace);
		EXPECT_EQ(0, f.fromSlot);
		EXPECT_EQ(0, count_wrong(dst, n, 40 + i)) TH_LOG("%zu bytes", n);
		/* (that the send returned only once the proxy was done with
		 * the buffer is net_send's released check) */
	}
	EXPECT_TRUE(all_zero(nw.w.sconn.buffs[NCCL_PROTO_SIMPLE], 4 * MiB));
	EXPECT_EQ((int)ARRAY_SIZE(sizes), nw.regCalls);

	/* an empty message still moves one step, through the slot */
	ASSERT_EQ(0, net_send(&nw, &f, src, dst, 0, 0, &mode));
	EXPECT_EQ(MLAP2P_MODE_FIFO, mode);
	EXPECT_EQ(1, f.fromSlot);

	/* refused: the same link copies through the slots, pointers NULL */
	nw.regOk = 0;
	fill(src, MiB + 13, 60);
	ASSERT_EQ(0, net_send(&nw, &f, src, dst, MiB + 13, 0, &mode));
	EXPECT_EQ(MLAP2P_MODE_FIFO, mode);
	EXPECT_EQ(0, f.inPlace);
	EXPECT_EQ(9, f.fromSlot);
	EXPECT_EQ(0, f.bad);
	EXPECT_EQ(0, count_wrong(dst, MiB + 13, 60));
	EXPECT_FALSE(all_zero(nw.w.sconn.buffs[NCCL_PROTO_SIMPLE], 4 * MiB));

	/* and back in place on the next registered one */
	nw.regOk = 1;
	fill(src, 3 * MiB, 61);
	ASSERT_EQ(0, net_send(&nw, &f, src, dst, 3 * MiB, 0, &mode));
	EXPECT_EQ(MLAP2P_MODE_NETPTR, mode);
	EXPECT_EQ(24, f.inPlace);
	EXPECT_EQ(0, f.fromSlot);
	EXPECT_EQ(0, count_wrong(dst, 3 * MiB, 61));
	wire_fini(&nw.w);
	free(src);
	free(dst);
}

/* Without MLAP2P_LINK_NETPTR (P2P links) reg() is never asked. */
TEST(netptr_needs_the_link_flag)
{
	char *src = malloc(MiB), *dst = malloc(MiB);
	struct fake_proxy f;
	struct net_wire nw;
	int mode;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, net_wire_init(&nw, 0, 0));
	fill(src, MiB, 70);
	ASSERT_EQ(0, net_send(&nw, &f, src, dst, MiB, 0, &mode));
	EXPECT_EQ(MLAP2P_MODE_FIFO, mode);
	EXPECT_EQ(0, nw.regCalls);
	EXPECT_EQ(0, f.inPlace);
	EXPECT_EQ(2, f.fromSlot);
	EXPECT_EQ(0, count_wrong(dst, MiB, 70));
	wire_fini(&nw.w);
	free(src);
	free(dst);
}

/* A send in place still fails on abort while the proxy sits on a step. */
TEST(netptr_drain_ends_on_abort)
{
	char *src = calloc(1, MiB);
	struct net_wire nw;
	struct later l = { .after = 300000 };
	pthread_t t;

	ASSERT_NE(NULL, src);
	ASSERT_EQ(0, net_wire_init(&nw, MLAP2P_LINK_NETPTR, 0));
	/* nobody consumes: both steps post (credit), then the drain waits */
	l.flag32 = &nw.w.abortFlag;
	ASSERT_EQ(0, pthread_create(&t, NULL, set_later, &l));
	EXPECT_EQ(-ECANCELED, run_one(&nw.w.slink, NCCL_PROTO_SIMPLE, 1, src, MiB));
	pthread_join(t, NULL);
	EXPECT_EQ((uint64_t)2, nw.w.recvMem->tail);
	EXPECT_EQ((void *)src, nw.w.recvMem->ptrsFifo[0]);
	EXPECT_EQ((void *)(src + 512 * KiB), nw.w.recvMem->ptrsFifo[1]);
	wire_fini(&nw.w);
	free(src);
}

TEST_HARNESS_MAIN
