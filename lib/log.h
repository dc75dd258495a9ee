/* SPDX-License-Identifier: MIT */
/*
 * lib/log.h: NCCL-style logging (lib/log.c): NCCL_DEBUG, NCCL_DEBUG_SUBSYS,
 * NCCL_DEBUG_FILE; WARN/INFO/TRACE; the errno stash that carries a -errno
 * through seed-named code that returns ncclResult_t; mlap2p_strerror.
 *
 * Conventions.  Functions named after the seed (ncclX, p2pX, bootstrapX)
 * return ncclResult_t and log with WARN/INFO; everything named mlap2p_x
 * returns 0 or -errno.  A -errno that crosses into ncclResult_t code is kept
 * with mlap2p_errno_stash() so the public API can return it unchanged.
 */
#ifndef MLAP2P_LIB_LOG_H
#define MLAP2P_LIB_LOG_H

#include <stdbool.h>

#include "mlap2p/mlap2p.h"
#include "mlap2p/transport.h"

enum ncclDebugLogLevel {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
};

/* Subsystems (NCCL_DEBUG_SUBSYS), NCCL's bit values. */
#define NCCL_INIT	0x1
#define NCCL_COLL	0x2
#define NCCL_P2P	0x4
#define NCCL_SHM	0x8
#define NCCL_NET	0x10
#define NCCL_GRAPH	0x20
#define NCCL_TUNING	0x40
#define NCCL_ENV	0x80
#define NCCL_ALLOC	0x100
#define NCCL_CALL	0x200
#define NCCL_PROXY	0x400
#define NCCL_BOOTSTRAP	0x1000
#define NCCL_ALL	(~0UL)

/* True when a message of @level in @subsys would be printed. */
bool mlap2p_log_enabled(int level, unsigned long subsys);
/*
 * Format and print one line ("host:pid:tid [core] NCCL INFO ..."), when
 * enabled.  A WARN is also kept, printed or not, as the calling thread's
 * last error (mlap2p_last_error()).
 */
void mlap2p_log(int level, unsigned long subsys, const char *file, int line,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The core shown in the line prefix, per thread ([core]); -1 hides it. */
void mlap2p_log_set_core(int core);

#define WARN(...) \
	mlap2p_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(flags, ...)						\
	do {								\
		if (mlap2p_log_enabled(NCCL_LOG_INFO, (flags)))		\
			mlap2p_log(NCCL_LOG_INFO, (flags), __FILE__,	\
				   __LINE__, __VA_ARGS__);		\
	} while (0)
#ifdef MLAP2P_ENABLE_TRACE
#define TRACE(flags, ...)						\
	do {								\
		if (mlap2p_log_enabled(NCCL_LOG_TRACE, (flags)))	\
			mlap2p_log(NCCL_LOG_TRACE, (flags), __FILE__,	\
				   __LINE__, __VA_ARGS__);		\
	} while (0)
#else
/* Compiled out, but the arguments are still type-checked and "used". */
#define TRACE(flags, ...)						\
	do {								\
		if (0)							\
			mlap2p_log(NCCL_LOG_TRACE, (flags), __FILE__,	\
				   __LINE__, __VA_ARGS__);		\
	} while (0)
#endif

/*
 * The -errno behind the last failing ncclResult_t of this thread; set where
 * an errno is turned into an ncclResult_t, read (and cleared) by the API.
 */
void mlap2p_errno_stash(int err);
int mlap2p_errno_take(ncclResult_t res);
/* Store @err (< 0) into errno and return it; 0 passes through. */
int mlap2p_err(int err);

/* NCCL's checks: on failure, log the call chain at INFO and return. */
#define NCCLCHECK(call)							\
	do {								\
		ncclResult_t res__ = (call);				\
		if (res__ != ncclSuccess && res__ != ncclInProgress) {	\
			INFO(NCCL_ALL, "%s:%d -> %d", __FILE__,		\
			     __LINE__, res__);				\
			return res__;					\
		}							\
	} while (0)
#define NCCLCHECKGOTO(call, res, label)					\
	do {								\
		(res) = (call);						\
		if ((res) != ncclSuccess && (res) != ncclInProgress) {	\
			INFO(NCCL_ALL, "%s:%d -> %d", __FILE__,		\
			     __LINE__, (res));				\
			goto label;					\
		}							\
	} while (0)

#endif /* MLAP2P_LIB_LOG_H */
