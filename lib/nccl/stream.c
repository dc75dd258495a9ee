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
#include <time.h>

#include "mlap2p/stream.h"
#include "nc.h"

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
	int busy;			/* atomic: items queued or running */
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

	pthread_mutex_unlock(&s->lock);
	if (it->fn)
		err = it->fn(it->arg);
	else
		err = nc_run_batches(it->b, it->nb, 1);
	nc_item_free(it);
	pthread_mutex_lock(&s->lock);
	if (err && !s->err)
		s->err = err < 0 ? err : -EIO;
	__atomic_store_n(&s->running, 0, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&s->busy, 1, __ATOMIC_RELEASE);
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
 * STREAM_GRACE_NS after its post (a synchronize in that time runs it on
 * the caller's thread), and while the stream is busy it does not sleep
 * for good but looks again every STREAM_TICK_NS; a post needs to wake it
 * only after STREAM_IDLE_NS without work.  Work that nobody synchronizes
 * starts within about STREAM_TICK_NS.
 */
#define STREAM_GRACE_NS	20000
#define STREAM_TICK_NS	100000
#define STREAM_IDLE_NS	10000000

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
	int64_t active = stream_now_ns(), now, age;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		now = stream_now_ns();
		if (s->head && !s->running) {
			age = now - s->head->postedNs;
			active = now;
			if (age >= STREAM_GRACE_NS || s->stop)
				stream_exec(s, stream_take(s));
			else
				stream_timedwait(s, STREAM_GRACE_NS - age);
		} else if (s->stop && !s->head && !s->running) {
			break;
		} else if (s->head || now - active < STREAM_IDLE_NS) {
			stream_timedwait(s, STREAM_TICK_NS);
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

int nc_stream_post(struct mlap2p_stream *s, struct nc_item *it)
{
	int i;

	it->next = NULL;
	it->postedNs = stream_now_ns();
	pthread_mutex_lock(&s->lock);
	if (s->stop) {
		pthread_mutex_unlock(&s->lock);
		return -EINVAL;
	}
	/* Tickets in queue order (see nc.h). */
	for (i = 0; i < it->nb; i++)
		it->b[i].ticket = __atomic_fetch_add(&it->b[i].c->next, 1,
						     __ATOMIC_ACQ_REL);
	if (s->tail)
		s->tail->next = it;
	else
		s->head = it;
	s->tail = it;
	__atomic_add_fetch(&s->busy, 1, __ATOMIC_RELEASE);
	if (s->sleeping == 2)
		pthread_cond_signal(&s->work);
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
	pthread_cond_destroy(&s->idle);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return stream_err(err);
}
