# SPDX-License-Identifier: MIT
"""DDP communication hooks for the mlap2p backend.

torch 1.13's ``default_hooks.bf16_compress_hook`` does what is wanted on
the CPU, but ``DistributedDataParallel.register_comm_hook`` refuses any
hook *named* ``bf16_compress_hook`` unless torch was built with CUDA 11+
and NCCL 2.10+ (``DistributedDataParallel._check_comm_hook``), whatever
the process group.  mlap2p reduces bfloat16 on the host, so the same
compression is offered here under its own name::

    from mlap2p_torch.hooks import bf16_allreduce_hook
    ddp.register_comm_hook(None, bf16_allreduce_hook)
"""

import torch
import torch.distributed as dist

__all__ = ["bf16_allreduce_hook"]


def bf16_allreduce_hook(process_group: dist.ProcessGroup,
                        bucket: dist.GradBucket
                        ) -> torch.futures.Future[torch.Tensor]:
    """All-reduce the bucket in bfloat16: cast, divide by the group size,
    sum, cast back into the bucket (bf16_compress_hook's arithmetic)."""
    group = process_group if process_group is not None else dist.group.WORLD
    n = group.size()
    compressed = bucket.buffer().to(torch.bfloat16).div_(n)
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(f):
        out = bucket.buffer()
        out.copy_(f.value()[0])
        return out

    return fut.then(decompress)
