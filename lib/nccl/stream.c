// SPDX-License-Identifier: MIT
/*
 * Host streams (<mlap2p/stream.h>).
 *
 * A stream is a FIFO of items and one worker thread.  Whoever holds the
 * stream's executor role (s->running) runs the head item: normally the
 * worker, but mlap2p_stream_synchronize takes the role itself when the
 * worker has not picked the work up yet, so a post followed by a
 * synchronize costs about what the blocking call does.  Items still run one
 * at a time and in order.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mlap2p/stream.h"
#include "nc.h"

#define STREAM_CACHE	8

struct mlap2p_stream {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* the worker waits here */
	pthread_cond_t idle;		/* synchronize waits here */
	struct nc_item *head, *tail;
	int running;			/* the executor role is taken */
	int stop;
	int sleeping;			/* worker waits: 1 a while, 2 for a post */
	int waiters;			/* threads waiting on idle */
	int err;			/* first error since synchronize */
	int busy;			/* items queued or running (written
					 * under lock, read without) */
	int ncache;
	struct nc_one *cache[STREAM_CACHE];	/* done items to reuse */
	pthread_t thread;
};

static int stream_err(int err)
{
	if (err < 0)
		errno = -err;
	return err;
}

/* Called with s->lock held: take the head item and the executor role. */
static struct nc_item *stream_take(struct mlap2p_stream *s)
{
	struct nc_item *it = s->head;

	s->head = it->next;
	if (!s->head)
		s->tail = NULL;
	__atomic_store_n(&s->running, 1, __ATOMIC_RELAXED);
	return it;
}

/* Run @it without the lock, then give the role back (lock held again). */
static void stream_exec(struct mlap2p_stream *s, struct nc_item *it)
{
	int err;

	struct nc_one *one = NULL;

	pthread_mutex_unlock(&s->lock);
	if (it->fn)
		err = it->fn(it->arg);
	else
		err = nc_run_batches(it->b, it->nb, 1);
	if (it->packed) {
		one = (struct nc_one *)it;
		nc_put(one->b.c);
	} else {
		nc_item_free(it);
	}
	pthread_mutex_lock(&s->lock);
	if (one && s->ncache < STREAM_CACHE)
		s->cache[s->ncache++] = one;
	else
		free(one);
	if (err && !s->err)
		s->err = err < 0 ? err : -EIO;
	__atomic_store_n(&s->running, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->busy, __atomic_load_n(&s->busy, __ATOMIC_RELAXED) - 1,
			 __ATOMIC_RELEASE);
	if (s->waiters)
		pthread_cond_broadcast(&s->idle);
	if (s->sleeping && s->stop)
		pthread_cond_signal(&s->work);
}

static int64_t stream_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The worker.  A post and a synchronize right after it should cost what
 * the blocking call does: no wake-up (a futex call, and a context switch
 * on the CPU the caller runs on).  So the worker leaves an item alone for
 * STREAM_GRACE_NS after it first sees it (a synchronize in that time runs
 * it on the caller's thread), and while the stream is busy it does not
 * sleep for good but looks again every tick; a post needs to wake it only
 * after STREAM_IDLE_NS without work.  The tick starts at STREAM_TICK_NS
 * and doubles, up to STREAM_TICK_MAX_NS, each time the worker looks and
 * finds nothing left to it (a caller that synchronizes runs its own work,
 * and a worker waking 10,000 times a second on its CPU slows that work
 * by a fifth); it drops back when the worker runs an item itself.  Work
 * that nobody synchronizes starts within a tick and the grace.
 */
#define STREAM_GRACE_NS		20000
#define STREAM_TICK_NS		100000
#define STREAM_TICK_MAX_NS	2000000
#define STREAM_IDLE_NS		10000000

static void stream_timedwait(struct mlap2p_stream *s, int64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns += ts.tv_nsec;
	ts.tv_sec += ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	s->sleeping = 1;
	pthread_cond_timedwait(&s->work, &s->lock, &ts);
	s->sleeping = 0;
}

static void *stream_main(void *arg)
{
	struct mlap2p_stream *s = arg;
	int64_t active = stream_now_ns(), now, age, tick = STREAM_TICK_NS;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		now = stream_now_ns();
		if (s->head && !s->running) {
			/* The grace runs from when the worker first sees an
			 * item: a post need not read the clock. */
			if (!s->head->seenNs)
				s->head->seenNs = now;
			age = now - s->head->seenNs;
			active = now;
			if (age >= STREAM_GRACE_NS || s->stop) {
				tick = STREAM_TICK_NS;
				stream_exec(s, stream_take(s));
			} else
				stream_timedwait(s, STREAM_GRACE_NS - age);
		} else if (s->stop && !s->head && !s->running) {
			break;
		} else if (s->head || now - active < STREAM_IDLE_NS) {
			stream_timedwait(s, tick);
			if (!s->head && tick < STREAM_TICK_MAX_NS)
				tick *= 2;
		} else {
			s->sleeping = 2;	/* a post must wake us */
			pthread_cond_wait(&s->work, &s->lock);
			s->sleeping = 0;
			active = stream_now_ns();
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

NC_EXPORT int mlap2p_stream_create(struct mlap2p_stream **out)
{
	struct mlap2p_stream *s;
	pthread_condattr_t ca;
	int ret;

	if (!out)
		return stream_err(-EINVAL);
	s = calloc(1, sizeof(*s));
	if (!s)
		return stream_err(-ENOMEM);

	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&s->idle, NULL);
	ret = pthread_create(&s->thread, NULL, stream_main, s);
	if (ret) {
		pthread_cond_destroy(&s->idle);
		pthread_cond_destroy(&s->work);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return stream_err(-ret);
	}
	*out = s;
	return 0;
}

/* Called with s->lock held: queue @it, its batches taking their tickets. */
static void stream_queue(struct mlap2p_stream *s, struct nc_item *it)
{
	int i;

	it->next = NULL;
	it->seenNs = 0;
	/* Tickets in queue order (see nc.h). */
	for (i = 0; i < it->nb; i++)
		it->b[i].ticket = nc_ticket(it->b[i].c);
	if (s->tail)
		s->tail->next = it;
	else
		s->head = it;
	s->tail = it;
	__atomic_store_n(&s->busy, __atomic_load_n(&s->busy, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELEASE);
	if (s->sleeping == 2)
		pthread_cond_signal(&s->work);
}

int nc_stream_post(struct mlap2p_stream *s, struct nc_item *it)
{
	pthread_mutex_lock(&s->lock);
	if (s->stop) {
		pthread_mutex_unlock(&s->lock);
		return -EINVAL;
	}
	stream_queue(s, it);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int nc_stream_post_op(struct mlap2p_stream *s, struct nc_comm *c,
		      const struct nc_op *o)
{
	struct nc_one *p;

	pthread_mutex_lock(&s->lock);
	if (s->stop) {
		pthread_mutex_unlock(&s->lock);
		return -EINVAL;
	}
	p = s->ncache ? s->cache[--s->ncache] : malloc(sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&s->lock);
		return -ENOMEM;
	}
	memset(p, 0, sizeof(*p));
	p->it.packed = 1;
	p->it.b = &p->b;
	p->it.nb = 1;
	p->op = *o;
	p->b.ops = &p->op;
	p->b.nops = 1;
	p->b.c = c;
	nc_get(c);
	stream_queue(s, &p->it);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

NC_EXPORT int mlap2p_stream_launch(struct mlap2p_stream *s,
				   int (*fn)(void *arg), void *arg)
{
	struct nc_item *it;
	int ret;

	if (!fn)
		return stream_err(-EINVAL);
	if (!s)
		return stream_err(fn(arg));
	it = calloc(1, sizeof(*it));
	if (!it)
		return stream_err(-ENOMEM);
	it->fn = fn;
	it->arg = arg;
	ret = nc_stream_post(s, it);
	if (ret)
		free(it);
	return stream_err(ret);
}

NC_EXPORT int mlap2p_stream_synchronize(struct mlap2p_stream *s)
{
	int i, err;

	if (!s)
		return 0;
	/* Briefly let the worker finish before sleeping. */
	for (i = 0; i < 64; i++) {
		if (!__atomic_load_n(&s->busy, __ATOMIC_ACQUIRE))
			break;
		if (!__atomic_load_n(&s->running, __ATOMIC_RELAXED))
			break;
		sched_yield();
	}
	pthread_mutex_lock(&s->lock);
	while (s->head || s->running) {
		if (!s->running) {
			stream_exec(s, stream_take(s));
		} else {
			s->waiters++;
			pthread_cond_wait(&s->idle, &s->lock);
			s->waiters--;
		}
	}
	err = s->err;
	s->err = 0;
	pthread_mutex_unlock(&s->lock);
	return stream_err(err);
}

NC_EXPORT int mlap2p_stream_query(struct mlap2p_stream *s)
{
	int ret;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	ret = s->err ? s->err : (s->head || s->running) ? -EBUSY : 0;
	pthread_mutex_unlock(&s->lock);
	return stream_err(ret);
}

NC_EXPORT int mlap2p_stream_destroy(struct mlap2p_stream *s)
{
	int err;

	if (!s)
		return stream_err(-EINVAL);
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	err = s->err;
	while (s->ncache)
		free(s->cache[--s->ncache]);
	pthread_cond_destroy(&s->idle);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return stream_err(err);
}
