/* SPDX-License-Identifier: MIT */
/*
 * <mlap2p/result.h>: NCCL's ncclResult_t, defined once.
 *
 * Both <mlap2p/transport.h> (the seed's transport ABI) and mlap2p's
 * <nccl.h> (lib/include/nccl/nccl.h) include this header, so a program may
 * include both and sees one type.  Values are NCCL 2.18's.  If a real
 * NCCL's nccl.h came first (it defines NCCL_H_ and ncclResult_t with the
 * same values), nothing is defined again.
 */
#ifndef MLAP2P_RESULT_H
#define MLAP2P_RESULT_H

#if !defined(NCCL_H_) || defined(MLAP2P_NCCL_H)
typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;
#endif

#endif /* MLAP2P_RESULT_H */
