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
#include <stdlib.h>

#include "mlap2p/stream.h"
#include "nc.h"

struct mlap2p_stream {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* the worker waits here */
	pthread_cond_t idle;		/* synchronize waits here */
	struct nc_item *head, *tail;
	int running;			/* the executor role is taken */
	int stop;
	int sleeping;			/* the worker is waiting on work */
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
	if (s->sleeping && (s->head || s->stop))
		pthread_cond_signal(&s->work);
}

static void *stream_main(void *arg)
{
	struct mlap2p_stream *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (s->head && !s->running) {
			stream_exec(s, stream_take(s));
		} else if (s->stop && !s->head && !s->running) {
			break;
		} else {
			s->sleeping = 1;
			pthread_cond_wait(&s->work, &s->lock);
			s->sleeping = 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

NC_EXPORT int mlap2p_stream_create(struct mlap2p_stream **out)
{
	struct mlap2p_stream *s;
	int ret;

	if (!out)
		return stream_err(-EINVAL);
	s = calloc(1, sizeof(*s));
	if (!s)
		return stream_err(-ENOMEM);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
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
	if (s->sleeping)
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
