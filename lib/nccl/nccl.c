// SPDX-License-Identifier: MIT
/*
 * <nccl.h> on libmlap2p: errors, groups (run.c posts and runs, comm.c has
 * the communicators).
 *
 * Every NCCL entry point is defined as its p-prefixed name (pncclX); the
 * plain name is a weak alias of it (NC_ALIAS), as NCCL does for profilers.
 * lib/nccl/nc.h explains the ticket order; lib/nccl/stream.c the streams.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlap2p/dataplane.h"
#include "mlap2p/stream.h"
#include "mlap2p/coll.h"
#include "nc.h"

/* ------------------------------------------------------------------ */
/* Results and error text                                             */
/* ------------------------------------------------------------------ */

static __thread char nc_tls_err[NC_ERR_LEN];
static __thread char nc_tls_copy[NC_ERR_LEN];

ncclResult_t mlap2p_nccl_result(int err)
{
	switch (err) {
	case 0:
		return ncclSuccess;
	case -EINVAL:
		return ncclInvalidArgument;
	case -EPERM:
	case -EBUSY:
	case -EALREADY:
	case -ENOTCONN:
	case -EISCONN:
	case -EOPNOTSUPP:
		return ncclInvalidUsage;
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ECONNREFUSED:
	case -EPIPE:
	case -ESRCH:
	case -EPROTO:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETDOWN:
	case -ENETUNREACH:
		return ncclRemoteError;
	case -EINPROGRESS:
		return ncclInProgress;
	case -ENOTRECOVERABLE:
	case -EFAULT:
		return ncclInternalError;
	default:
		return ncclSystemError;
	}
}

/* Keep @text as this thread's and @c's last error. */
void nc_keep_text(struct nc_comm *c, const char *text)
{
	snprintf(nc_tls_err, sizeof(nc_tls_err), "%s", text);
	if (c) {
		pthread_mutex_lock(&c->elock);
		snprintf(c->lastErr, sizeof(c->lastErr), "%s", text);
		pthread_mutex_unlock(&c->elock);
	}
}

/* An error found here: text, then the ncclResult_t of @err. */
ncclResult_t nc_fail(struct nc_comm *c, int err, const char *fmt, ...)
{
	char buf[NC_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	nc_keep_text(c, buf);
	return mlap2p_nccl_result(err);
}

/* An error from libmlap2p (its text is mlap2p_last_error()). */
ncclResult_t nc_lib_fail(struct nc_comm *c, const char *call, int err)
{
	const char *t = mlap2p_last_error();

	return nc_fail(c, err, "%s: %s%s%s", call, mlap2p_strerror(err),
		       t && *t ? ": " : "", t ? t : "");
}

NC_EXPORT const char *pncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError:
		return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError:
		return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument:
		return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage:
		return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "unknown result code";
	}
}
NC_ALIAS(ncclGetErrorString);

NC_EXPORT const char *pncclGetLastError(ncclComm_t comm)
{
	struct nc_comm *c = nc_of(comm);

	if (!c)
		return nc_tls_err;
	pthread_mutex_lock(&c->elock);
	memcpy(nc_tls_copy, c->lastErr, sizeof(nc_tls_copy));
	pthread_mutex_unlock(&c->elock);
	return nc_tls_copy;
}
NC_ALIAS(ncclGetLastError);

NC_EXPORT ncclResult_t pncclGetVersion(int *version)
{
	if (!version)
		return nc_fail(NULL, -EINVAL, "ncclGetVersion: version is NULL");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
NC_ALIAS(ncclGetVersion);

NC_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
	struct mlap2p_unique_id id;
	int ret;

	_Static_assert(sizeof(id) == sizeof(*uniqueId), "unique id size");
	if (!uniqueId)
		return nc_fail(NULL, -EINVAL, "ncclGetUniqueId: uniqueId is NULL");
	ret = mlap2p_get_unique_id(&id);
	if (ret)
		return nc_lib_fail(NULL, "ncclGetUniqueId", ret);
	memcpy(uniqueId, &id, sizeof(id));
	return ncclSuccess;
}
NC_ALIAS(ncclGetUniqueId);

/* ------------------------------------------------------------------ */
/* Groups (per thread, as NCCL's)                                     */
/* ------------------------------------------------------------------ */

/* The calling thread's group: ncclGroupStart/End and what is posted in it. */
__thread struct nc_group nc_grp;

int nc_grow(void **arr, int *cap, int need, size_t elem)
{
	void *p;
	int ncap;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

static void nc_group_reset(void)
{
	uint64_t tid = nc_grp.tid;	/* the thread's, not the group's */

	free(nc_grp.ops);
	free(nc_grp.inits);
	free(nc_grp.splits);
	memset(&nc_grp, 0, sizeof(nc_grp));
	nc_grp.tid = tid;
}

/* Build the item for stream @s from the group's ops (per comm, in order). */
static struct nc_item *nc_group_item(struct mlap2p_stream *s)
{
	struct nc_item *it = calloc(1, sizeof(*it));
	int i, j, k;

	if (!it)
		return NULL;
	it->b = calloc((size_t)nc_grp.n, sizeof(*it->b));
	if (!it->b) {
		free(it);
		return NULL;
	}
	for (i = 0; i < nc_grp.n; i++) {
		struct nc_gop *g = &nc_grp.ops[i];

		if (g->s != s)
			continue;
		for (j = 0; j < it->nb && it->b[j].c != g->c; j++)
			;
		if (j == it->nb) {
			it->b[j].c = g->c;
			nc_get(g->c);
			it->nb++;
			it->b[j].ops = calloc((size_t)nc_grp.n,
					      sizeof(struct nc_op));
			if (!it->b[j].ops) {
				nc_item_free(it);
				return NULL;
			}
		}
		k = it->b[j].nops++;
		it->b[j].ops[k] = g->op;
	}
	return it;
}

/* ------------------------------------------------------------------ */
/* Group start / end                                                  */
/* ------------------------------------------------------------------ */

NC_EXPORT ncclResult_t pncclGroupStart(void)
{
	nc_grp.depth++;
	return ncclSuccess;
}
NC_ALIAS(ncclGroupStart);

NC_EXPORT ncclResult_t pncclGroupEnd(void)
{
	ncclResult_t res;
	int i, j, err = 0, r;

	if (nc_grp.depth == 0)
		return nc_fail(NULL, -EPERM, "ncclGroupEnd: not in a group call");
	if (--nc_grp.depth)
		return ncclSuccess;
	res = nc_grp.err;
	if (res == ncclSuccess && nc_grp.ninit) {
		err = nc_init_many(nc_grp.inits, nc_grp.ninit);
		if (err)
			res = nc_fail(NULL, err, "ncclGroupEnd: ncclCommInitRank: %s",
				      mlap2p_strerror(err));
	}
	if (res == ncclSuccess && nc_grp.nsplit)
		res = nc_split_many(nc_grp.splits, nc_grp.nsplit);
	for (i = 0; res == ncclSuccess && i < nc_grp.n; i++) {
		struct mlap2p_stream *s = nc_grp.ops[i].s;
		struct nc_item *it;

		for (j = 0; j < i && nc_grp.ops[j].s != s; j++)
			;
		if (j < i)
			continue;	/* stream already posted */
		it = nc_group_item(s);
		if (!it) {
			res = nc_fail(NULL, -ENOMEM, "ncclGroupEnd: out of memory");
			break;
		}
		if (s) {
			r = nc_stream_post(s, it);
			if (r) {
				nc_item_free(it);
				res = nc_fail(NULL, r, "ncclGroupEnd: the stream is being destroyed");
			}
			continue;
		}
		for (j = 0; j < it->nb; j++)
			it->b[j].ticket = nc_ticket(it->b[j].c);
		r = nc_run_batches(it->b, it->nb, 0);
		nc_item_free(it);
		if (r)
			res = mlap2p_nccl_result(r);
	}
	nc_group_reset();
	return res;
}
NC_ALIAS(ncclGroupEnd);
