// SPDX-License-Identifier: GPL-2.0
/* The -errno -> ncclResult_t rule documented in <nccl.h>, every entry. */
#include "nccl_check.h"

ncclResult_t mlap2p_nccl_result(int err);	/* lib/nccl/nc.h */

int main(void)
{
	static const struct { int err; ncclResult_t res; } t[] = {
		{ 0, ncclSuccess },
		{ -EINVAL, ncclInvalidArgument },
		{ -EPERM, ncclInvalidUsage },
		{ -EBUSY, ncclInvalidUsage },
		{ -EALREADY, ncclInvalidUsage },
		{ -ENOTCONN, ncclInvalidUsage },
		{ -EISCONN, ncclInvalidUsage },
		{ -EOPNOTSUPP, ncclInvalidUsage },
		{ -ECONNRESET, ncclRemoteError },
		{ -ECONNABORTED, ncclRemoteError },
		{ -ECONNREFUSED, ncclRemoteError },
		{ -EPIPE, ncclRemoteError },
		{ -ESRCH, ncclRemoteError },
		{ -EPROTO, ncclRemoteError },
		{ -ETIMEDOUT, ncclRemoteError },
		{ -EHOSTUNREACH, ncclRemoteError },
		{ -ENETDOWN, ncclRemoteError },
		{ -ENETUNREACH, ncclRemoteError },
		{ -EINPROGRESS, ncclInProgress },
		{ -ENOTRECOVERABLE, ncclInternalError },
		{ -EFAULT, ncclInternalError },
		{ -ENOMEM, ncclSystemError },
		{ -ENODEV, ncclSystemError },
		{ -EIO, ncclSystemError },
		{ -ECANCELED, ncclSystemError },
		{ -EMFILE, ncclSystemError },
		{ -ENOSPC, ncclSystemError },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (mlap2p_nccl_result(t[i].err) != t[i].res) {
			fprintf(stderr, "errno %d -> %d, want %d\n", t[i].err,
				mlap2p_nccl_result(t[i].err), t[i].res);
			return 1;
		}
	}
	printf("nccl_map_test: %zu mappings ok\n", i);
	return 0;
}
