// SPDX-License-Identifier: MIT
/*
 * The one piece of the NCCL layer that needs the communicator's insides:
 * stopping every wait of a communicator without freeing it.  ncclCommAbort
 * interrupts the operation a stream thread is running, waits for that
 * thread to leave the communicator, then frees it with mlap2p_comm_abort.
 */
#include "internal.h"
#include "nc.h"

void mlap2p_comm_interrupt(struct mlap2p_comm *api)
{
	struct ncclComm *comm = mlap2p_nccl(api);

	__atomic_store_n(&comm->abortFlag, 1, __ATOMIC_RELEASE);
	mlap2p_bootstrap_abort(comm->bootstrap);
}
