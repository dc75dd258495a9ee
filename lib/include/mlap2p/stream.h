/* SPDX-License-Identifier: MIT */
/*
 * <mlap2p/stream.h>: host streams, what cudaStream_t is on the host.
 *
 * A stream is an in-order queue with its own progress thread.  Work posted
 * to it (an NCCL call given the stream, or a host function) returns to the
 * caller at once and runs on that thread, one item after the other, in
 * posting order.  The NULL stream is CUDA's default stream: a call given
 * it runs to completion before it returns.
 *
 * Communicators.  Work on one communicator runs in the order it was
 * posted, whatever the stream: an item waits for the communicator's
 * earlier items on other streams (and NULL-stream calls) to finish first,
 * so only one thread at a time drives a communicator (the data plane's
 * rule) and every rank sees the same order.  Post in the same order on
 * every rank, as NCCL requires.
 *
 * Errors.  An item that fails records its -errno on the stream (returned by
 * the next mlap2p_stream_synchronize, which clears it, and by
 * mlap2p_stream_query) and as the communicator's asynchronous error
 * (ncclCommGetAsyncError); later items of that communicator then fail with
 * the same error without running.  ncclCommAbort ends the running item and
 * fails every queued one (-ECANCELED).
 *
 * All functions return 0 or -errno (errno set too); any thread may call
 * them.
 */
#ifndef MLAP2P_STREAM_H
#define MLAP2P_STREAM_H

#ifdef __cplusplus
extern "C" {
#endif

struct mlap2p_stream;		/* opaque */

/*
 * cudaStream_t for <nccl.h>: an mlap2p stream, unless a CUDA header
 * (driver_types.h) already defined it; then pass mlap2p streams cast to it.
 */
#if !defined(__DRIVER_TYPES_H__) && !defined(MLAP2P_CUDA_STREAM_DEFINED)
#define MLAP2P_CUDA_STREAM_DEFINED 1
typedef struct mlap2p_stream *cudaStream_t;
#endif

/* A new stream and its progress thread. */
int mlap2p_stream_create(struct mlap2p_stream **stream);
/* Wait for the queued work, stop the thread, free (the pending error is
 * returned). */
int mlap2p_stream_destroy(struct mlap2p_stream *stream);
/* Wait until everything posted so far has run; the first error since the
 * last synchronize (then cleared), else 0. */
int mlap2p_stream_synchronize(struct mlap2p_stream *stream);
/* 0: all posted work done; -EBUSY: some still queued or running; else
 * the pending error (not cleared). */
int mlap2p_stream_query(struct mlap2p_stream *stream);
/*
 * Post @fn(@arg) (cudaLaunchHostFunc): it runs on the stream's thread after
 * everything posted before it.  A non-zero return is the item's error.
 */
int mlap2p_stream_launch(struct mlap2p_stream *stream, int (*fn)(void *arg),
			 void *arg);

#ifdef __cplusplus
}
#endif

#endif /* MLAP2P_STREAM_H */
