#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/gloo_coll.py: torch.distributed's Gloo collectives, the sizes and
columns of bench/mpi_coll.c, so `make bench` can set PyTorch's CPU backend
beside mlap2p in one run.

    /usr/bin/python3 bench/gloo_coll.py [-n 2] [-b 8] [-e 64M] [-f 2]
                                        [--cpus 0,1] [-t TEST] [--port P]

Needs Debian's python3-torch (1.13, Gloo only), run with Debian's
/usr/bin/python3: the python3 first on PATH here may be another one that
does not see it.  Prints "# gloo_coll: skipped, ..." and exits 0 when torch
is missing.  Ranks are processes (this script runs itself once per rank),
rank i pinned to CPU LIST[i % len]; they meet over TCP on 127.0.0.1.

SIZE is the larger buffer of one rank, as in mlap2p-perf and mpi_coll:
all_gather sends SIZE/N elements' bytes, all_to_all_single moves SIZE/N
to every peer.  fp32 sum, root 0, buffers allocated once per size.  torch
1.13's Gloo has no reduce_scatter (nor _reduce_scatter_base): that test
prints a "skipped" line.  Time: mean per call over the timed loop of the
slowest rank.  Lines: "<test> <bytes> <count> <usec>".  Iterations per size:
64 MiB / SIZE, at least 5 and at most 200 (Gloo takes about 0.2 ms for 8 B
here, so the p2p tests' 20000 would take minutes).
"""
import argparse
import os
import subprocess
import sys
import time

TESTS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce",
         "alltoall"]


def size(s):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.lower().rstrip("b")
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def sizes(a):
    b = a.b
    while b <= a.e:
        yield b
        if b == a.e:
            break
        n = int(b * a.f)
        b = n if n > b else b + 1


def iters_for(nbytes):
    return max(5, min(200, (64 << 20) // max(nbytes, 1)))


def rank_main(a):
    import torch
    import torch.distributed as dist

    cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else []
    if cpus:
        os.sched_setaffinity(0, {cpus[a.rank % len(cpus)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port,
                            rank=a.rank, world_size=a.n)
    n = a.n
    if a.rank == 0:
        print("# gloo_coll: torch %s, %d ranks, fp32 sum, root 0, out of place"
              % (torch.__version__, n), flush=True)
    for test in TESTS:
        if a.t and test != a.t:
            continue
        if test == "reducescatter":
            if a.rank == 0:
                print("# gloo_coll: reducescatter skipped: torch %s's Gloo has"
                      " no reduce_scatter" % torch.__version__, flush=True)
            continue
        blocks = n if test in ("allgather", "alltoall") else 1
        for b in sizes(a):
            count = b // 4 // blocks
            nbytes = count * 4 * blocks
            it = iters_for(nbytes)
            if test == "allreduce" or test == "broadcast" or test == "reduce":
                x = torch.ones(count, dtype=torch.float32)

                def op():
                    if test == "allreduce":
                        dist.all_reduce(x)
                    elif test == "broadcast":
                        dist.broadcast(x, 0)
                    else:
                        dist.reduce(x, 0)
            elif test == "allgather":
                x = torch.ones(count, dtype=torch.float32)
                out = [torch.empty(count, dtype=torch.float32)
                       for _ in range(n)]

                def op():
                    dist.all_gather(out, x)
            else:
                x = torch.ones(count * n, dtype=torch.float32)
                out = torch.empty(count * n, dtype=torch.float32)

                def op():
                    dist.all_to_all_single(out, x)
            # Gloo's all_reduce is in place; out of place as NCCL's would
            # add a copy, so this flatters Gloo slightly.
            dist.barrier()
            for _ in range(3):
                op()
            t0 = time.perf_counter()
            for _ in range(it):
                op()
            us = torch.tensor([(time.perf_counter() - t0) / it * 1e6],
                              dtype=torch.float64)
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            if a.rank == 0:
                print("%s %d %d %.4f" % (test, nbytes, count, us.item()),
                      flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=2)
    p.add_argument("-b", type=size, default=8)
    p.add_argument("-e", type=size, default=64 << 20)
    p.add_argument("-f", type=float, default=2)
    p.add_argument("-t", choices=TESTS)
    p.add_argument("--cpus", default="")
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--rank", type=int, default=-1)
    a = p.parse_args()
    if a.rank >= 0:
        rank_main(a)
        return 0
    try:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed without Gloo")
    except ImportError as e:
        print("# gloo_coll: skipped, no torch with Gloo for %s (%s);"
              " make bench-deps installs python3-torch" % (sys.executable, e))
        return 0
    args = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:]
    procs = [subprocess.Popen(args + ["--rank", str(r)]) for r in range(a.n)]
    rc = 0
    for pr in procs:
        rc |= pr.wait()
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
