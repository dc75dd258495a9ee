// SPDX-License-Identifier: MIT
/*
 * mlap2p_comm_split: sub-communicators over the ranks of a communicator.
 *
 * The parent's bootstrap carries the whole exchange: an all-gather of every
 * rank's (color, key), then the new rank 0 of each color (the member with
 * the lowest (key, parent rank)) creates a unique id and sends it to the
 * other members as a tagged bootstrap message.  The child then initialises
 * like any communicator from that id: its own rendezvous, peer info,
 * topology and FIFOs.  Nothing else is shared with the parent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A tag of the non-framework range (below MLAP2P_TAG_CORE). */
#define MLAP2P_TAG_SPLIT	0x2a511000

struct split_entry {
	int color;
	int key;
};


MLAP2P_EXPORT int mlap2p_comm_split(struct mlap2p_comm *api, int color,
				    int key, int core,
				    struct mlap2p_comm **newcomm)
{
	struct mlap2p_unique_id id;
	struct split_entry *all;
	struct ncclComm *comm;
	int *members, n = 0, me = -1, i, j, ret;

	if (!api || !newcomm || color < MLAP2P_SPLIT_NOCOLOR) {
		WARN("mlap2p_comm_split: invalid arguments (color %d)", color);
		return mlap2p_err(-EINVAL);
	}
	*newcomm = NULL;
	comm = mlap2p_nccl(api);
	ret = mlap2p_comm_enter(comm);
	if (ret)
		return mlap2p_err(ret);
	all = calloc((size_t)comm->nRanks, sizeof(*all));
	members = calloc((size_t)comm->nRanks, sizeof(*members));
	if (!all || !members) {
		ret = -ENOMEM;
		goto out;
	}
	all[comm->rank].color = color;
	all[comm->rank].key = key;
	if (bootstrapAllGather(comm->bootstrap, all, sizeof(*all)) !=
	    ncclSuccess) {
		ret = mlap2p_errno_take(ncclSystemError);
		goto out;
	}
	if (color == MLAP2P_SPLIT_NOCOLOR) {
		ret = 0;
		goto out;
	}
	/* Members in (key, parent rank) order: insertion sort, n is small. */
	for (i = 0; i < comm->nRanks; i++) {
		if (all[i].color != color)
			continue;
		for (j = n; j > 0 && (all[members[j - 1]].key > all[i].key);
		     j--)
			members[j] = members[j - 1];
		members[j] = i;
		n++;
	}
	for (i = 0; i < n; i++)
		if (members[i] == comm->rank)
			me = i;
	if (me == 0) {
		ret = mlap2p_get_unique_id(&id);
		for (i = 1; !ret && i < n; i++)
			if (bootstrapSend(comm->bootstrap, members[i],
					  MLAP2P_TAG_SPLIT, &id,
					  sizeof(id)) != ncclSuccess)
				ret = mlap2p_errno_take(ncclSystemError);
	} else if (bootstrapRecv(comm->bootstrap, members[0],
				 MLAP2P_TAG_SPLIT, &id, sizeof(id)) !=
		   ncclSuccess) {
		ret = mlap2p_errno_take(ncclSystemError);
	} else {
		ret = 0;
	}
	if (ret)
		goto out;
	INFO(NCCL_INIT, "comm %p rank %d: split color %d key %d -> rank %d of %d",
	     (void *)api, comm->rank, color, key, me, n);
	ret = mlap2p_comm_init_rank(newcomm, n, &id, me,
				    core < 0 ? comm->cudaDev : core);
out:
	mlap2p_comm_leave(comm);
	free(members);
	free(all);
	return mlap2p_err(ret);
}
