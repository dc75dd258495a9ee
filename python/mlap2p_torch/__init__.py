# SPDX-License-Identifier: MIT
"""libmlap2p as a torch.distributed backend.

Importing this package registers the backend "mlap2p"::

    import mlap2p_torch                      # registers "mlap2p"
    dist.init_process_group("mlap2p")        # env:// (torchrun), tcp://, file://
    model = DDP(model)                       # gradients all-reduced on libmlap2p

The unique id of each communicator travels through the c10d store, as
ProcessGroupNCCL's does.  ``dist.new_group`` under an mlap2p world splits
the world's communicator (ncclCommSplit); set MLAP2P_TORCH_SPLIT=0 to give
every group a communicator of its own instead.
"""

import os

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

from . import _C

__all__ = ["ProcessGroupMlap2p", "nccl_version", "BACKEND"]

ProcessGroupMlap2p = _C.ProcessGroupMlap2p
nccl_version = _C.nccl_version
BACKEND = "mlap2p"


def _split_enabled():
    return os.environ.get("MLAP2P_TORCH_SPLIT", "1") != "0"


def _world():
    """The default group when it is an mlap2p one, else None."""
    pg = _c10d.GroupMember.WORLD
    return pg if isinstance(pg, ProcessGroupMlap2p) else None


def _create(opts, pg_options=None):
    """The creator init_process_group and new_group call (extended API)."""
    ranks = list(opts.global_ranks_in_group or [])
    world = _world() if _split_enabled() else None
    if world is not None and ranks:
        # Members of a new group split the world's communicator; key = the
        # rank in the group keeps torch's numbering.
        return ProcessGroupMlap2p.split(world, 0, opts.group_rank,
                                        opts.group_rank, opts.group_size,
                                        opts.timeout)
    return ProcessGroupMlap2p(opts.store, opts.group_rank, opts.group_size,
                              opts.timeout)


def _create_plain(store, rank, size, timeout):
    """The creator for a torch without register_backend's extended API."""
    return ProcessGroupMlap2p(store, rank, size, timeout)


def _wrap_new_group_helper():
    """Ranks outside a new group still take part in the world's split.

    torch 1.13's new_group returns early on ranks outside the group, never
    calling the backend; ncclCommSplit is collective over the parent, so
    those ranks pass NCCL_SPLIT_NOCOLOR here first (what torch 2.x's
    ProcessGroupNCCL does through perform_nocolor_split).
    """
    orig = _c10d._new_process_group_helper
    if getattr(orig, "_mlap2p", False):
        return

    def helper(group_size, group_rank, global_ranks_in_group, backend, store,
               *args, **kwargs):
        world = _world() if _split_enabled() else None
        if (world is not None and global_ranks_in_group
                and str(backend).lower() == BACKEND
                and world.rank() not in global_ranks_in_group):
            world.split_nocolor()
        return orig(group_size, group_rank, global_ranks_in_group, backend,
                    store, *args, **kwargs)

    helper._mlap2p = True
    _c10d._new_process_group_helper = helper


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    try:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)
        _wrap_new_group_helper()
    except TypeError:
        dist.Backend.register_backend(BACKEND, _create_plain)
        os.environ.setdefault("MLAP2P_TORCH_SPLIT", "0")


_register()
