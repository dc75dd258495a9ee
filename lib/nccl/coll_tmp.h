/* TEMPORARY until branch coll lands <mlap2p/coll.h>: issue 14's API. */
#ifndef MLAP2P_NCCL_COLL_TMP_H
#define MLAP2P_NCCL_COLL_TMP_H
#include <stddef.h>
struct mlap2p_comm;
int mlap2p_all_reduce(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, int dtype, int op);
int mlap2p_broadcast(struct mlap2p_comm *comm, const void *sendbuf,
		     void *recvbuf, size_t count, int dtype, int root);
int mlap2p_reduce(struct mlap2p_comm *comm, const void *sendbuf,
		  void *recvbuf, size_t count, int dtype, int op, int root);
int mlap2p_all_gather(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t sendcount, int dtype);
int mlap2p_reduce_scatter(struct mlap2p_comm *comm, const void *sendbuf,
			  void *recvbuf, size_t recvcount, int dtype, int op);
int mlap2p_all_to_all(struct mlap2p_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, int dtype);
#endif
