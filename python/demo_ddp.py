#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make demo's last part: a short DDP training run on 2 processes (CPUs 0
and 1), on mlap2p and then on Gloo, from the same seed: loss and step time.

    LD_LIBRARY_PATH=build/lib PYTHONPATH=build/python/lib \\
        /usr/bin/python3 python/demo_ddp.py [--steps 40]
"""

import argparse
import datetime
import os
import socket
import sys
import time

# This file's folder holds mlap2p_torch's sources, without the built
# extension: take the package from PYTHONPATH (make torch's build, or the
# installed one) instead.
if sys.path and os.path.abspath(sys.path[0] or ".") == \
        os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import mlap2p_torch  # noqa: E402,F401  (registers "mlap2p")


def run(rank, port, steps):
    os.sched_setaffinity(0, {rank % (os.cpu_count() or 1)})
    torch.set_num_threads(1)
    os.environ.setdefault("MLAP2P_CORE", str(rank))
    t = datetime.timedelta(seconds=120)
    dist.init_process_group("mlap2p", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2, timeout=t)
    groups = [("mlap2p", dist.group.WORLD),
              ("gloo", dist.new_group(backend="gloo", timeout=t))]
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(1024, 8, generator=g)
    for name, group in groups:
        torch.manual_seed(0)
        # Many parameters, a small batch: the all-reduce dominates.
        net = nn.Sequential(nn.Linear(1024, 1024), nn.Tanh(),
                            nn.Linear(1024, 1024), nn.Tanh(),
                            nn.Linear(1024, 8))
        model = DDP(net, process_group=group)
        opt = torch.optim.SGD(model.parameters(), lr=0.02)
        data = torch.Generator().manual_seed(10 + rank)
        times = []
        for step in range(1, steps + 1):
            x = torch.randn(4, 1024, generator=data)
            y = torch.tanh(x @ teacher / 32)
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            lv = torch.tensor([loss.item()])
            dist.all_reduce(lv, group=group)
            if rank == 0 and (step % 10 == 0 or step == 1):
                recent = times[-10:]
                print(f"{name:>6} step {step:3d}  loss {lv.item() / 2:.5f}  "
                      f"step time {1e3 * sum(recent) / len(recent):7.2f} ms",
                      flush=True)
        if rank == 0:
            tail = times[5:] or times
            print(f"{name:>6}: mean step time {1e3 * sum(tail) / len(tail):.2f}"
                  f" ms ({sum(p.numel() for p in net.parameters())} "
                  "parameters, batch 4 per rank)\n", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(run, args=(port, a.steps), nprocs=2,
                       start_method="spawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
