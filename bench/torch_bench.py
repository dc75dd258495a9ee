#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""torch.distributed on mlap2p beside Gloo, 2 processes pinned to CPUs 0, 1.

  1. dist.all_reduce, float32 SUM, 8 B .. 64 MiB: time per call (mean over
     a timed loop after a warm-up; the same loop for both backends, each on
     its own process group of the same two processes).
  2. A DDP training step of a communication-heavy model (an MLP of 4
     1024x1024 layers, 16 MiB of gradients, batch 4): mean step time.

Targets (issue 16): all_reduce >= 10x faster than Gloo at every size; DDP
step <= 0.5x Gloo's.  Prints a table and, with --json FILE, writes it.

    /usr/bin/python3 bench/torch_bench.py [--json out.json] [--quick]
"""

import argparse
import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import mlap2p_torch  # noqa: F401

SIZES = [8 << (3 * i) for i in range(8)] + [64 << 20]  # 8 B .. 16 MiB, 64 MiB


def iters_for(nbytes, quick):
    budget = 2e7 if quick else 1e8  # bytes moved per size and backend
    return int(max(3, min(2000 if not quick else 300, budget // nbytes)))


def time_allreduce(t, group, iters):
    for _ in range(3):
        dist.all_reduce(t, group=group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    dt = time.perf_counter() - t0
    # The slowest rank's mean is the figure.
    x = torch.tensor([dt / iters], dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX, group=group)
    return x.item()


def model():
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(1024, 1024), nn.ReLU()]
    return nn.Sequential(*layers)


def time_ddp(group, steps):
    m = DDP(model(), process_group=group)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    x = torch.randn(4, 1024)

    def step():
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()

    for _ in range(3):
        step()
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    v = torch.tensor([(time.perf_counter() - t0) / steps],
                     dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX, group=group)
    return v.item()


def worker(rank, port, args, out):
    os.sched_setaffinity(0, {rank % (os.cpu_count() or 1)})
    torch.set_num_threads(1)
    os.environ.setdefault("MLAP2P_CORE", str(rank))
    timeout = datetime.timedelta(seconds=300)
    dist.init_process_group("mlap2p", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2, timeout=timeout)
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    world = dist.group.WORLD
    rows = []
    for nbytes in SIZES:
        if args.max_bytes and nbytes > args.max_bytes:
            break
        t = torch.ones(max(1, nbytes // 4))
        it = iters_for(nbytes, args.quick)
        m = time_allreduce(t, world, it)
        g = time_allreduce(t, gloo, max(3, it // 4))
        rows.append({"test": "torch_allreduce", "bytes": nbytes,
                     "mlap2p_us": m * 1e6, "gloo_us": g * 1e6,
                     "speedup": g / m})
        if rank == 0:
            print(f"{nbytes:>10} {m * 1e6:12.1f} {g * 1e6:12.1f} "
                  f"{g / m:8.1f}x", flush=True)
    steps = 10 if args.quick else 30
    dm = time_ddp(world, steps)
    dg = time_ddp(gloo, steps)
    ddp = {"test": "torch_ddp_step", "params": sum(
        p.numel() for p in model().parameters()), "mlap2p_ms": dm * 1e3,
        "gloo_ms": dg * 1e3, "ratio": dm / dg}
    if rank == 0:
        out.put({"allreduce": rows, "ddp": ddp})
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-bytes", type=int, default=0)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    print("# dist.all_reduce float32 SUM, 2 processes on CPUs 0 and 1")
    print(f"{'bytes':>10} {'mlap2p us':>12} {'gloo us':>12} {'speedup':>9}")
    mp.start_processes(worker, args=(port, args, q), nprocs=2,
                       start_method="spawn")
    res = q.get()
    d = res["ddp"]
    print(f"# DDP step, MLP 4x1024x1024 ({d['params']} parameters, batch 4):"
          f" mlap2p {d['mlap2p_ms']:.2f} ms, Gloo {d['gloo_ms']:.2f} ms,"
          f" ratio {d['ratio']:.2f}")
    worst = min(r["speedup"] for r in res["allreduce"])
    ok_ar = worst >= 10.0
    ok_ddp = d["ratio"] <= 0.5
    print(f"# target all_reduce >= 10x Gloo at every size: worst "
          f"{worst:.1f}x: {'met' if ok_ar else 'MISSED'}")
    print(f"# target DDP step <= 0.5x Gloo: {d['ratio']:.2f}x: "
          f"{'met' if ok_ddp else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": res["allreduce"] + [d]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
