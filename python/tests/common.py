# SPDX-License-Identifier: MIT
"""Shared by the mlap2p_torch tests: start N ranks, join them, report.

Each test script runs as ``/usr/bin/python3 tests/X.py --nprocs N [--init
tcp|file|env]``; without torchrun it spawns its ranks itself (spawn start
method, so no rank inherits another's libmlap2p state).  Under torchrun
(RANK/WORLD_SIZE/MASTER_ADDR set) it runs one rank with env://.
"""

import argparse
import datetime
import os
import socket
import sys
import tempfile
import time
import traceback
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mlap2p_torch  # noqa: F401  (registers "mlap2p")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(description, nprocs=2):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--nprocs", type=int, default=nprocs)
    ap.add_argument("--init", choices=["tcp", "file", "env"], default="tcp")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="process group timeout, seconds")
    ap.add_argument("--pin", action="store_true",
                    help="pin rank r to CPU r (mod the CPUs there are)")
    ap.add_argument("--quick", action="store_true")
    return ap.parse_args()


def init(rank, world, args, backend="mlap2p", url=None):
    """init_process_group the way args.init says (url made by run())."""
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.init == "env":
        dist.init_process_group(backend, timeout=timeout)
    else:
        dist.init_process_group(backend, init_method=url, rank=rank,
                                world_size=world, timeout=timeout)


def _entry(rank, fn, world, args, url):
    # torch 1.13 warns that the coalesced and _base calls will go away.
    warnings.filterwarnings("ignore", category=UserWarning,
                            module="torch.distributed")
    torch.set_num_threads(1)
    if args.pin:
        ncpu = os.cpu_count() or 1
        os.sched_setaffinity(0, {rank % ncpu})
    os.environ.setdefault("MLAP2P_CORE", str(rank))
    try:
        init(rank, world, args, url=url)
        fn(rank, world, args)
    except BaseException:
        sys.stderr.write(f"rank {rank}: FAILED\n{traceback.format_exc()}")
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    # Orderly teardown; every rank reaches it.
    dist.destroy_process_group()


def run(fn, args):
    """Run fn(rank, world, args) on every rank; exit 0 only if all pass."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        args.init = "env"
        rank = int(os.environ["RANK"])
        _entry(rank, fn, int(os.environ["WORLD_SIZE"]), args, None)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.init == "file":
            url = "file://" + os.path.join(tmp, "rendezvous")
        else:
            args.init = "tcp"
            url = f"tcp://127.0.0.1:{free_port()}"
        t0 = time.monotonic()
        try:
            mp.start_processes(_entry, args=(fn, args.nprocs, args, url),
                               nprocs=args.nprocs, start_method="spawn")
        except Exception as e:  # a rank failed: its traceback is above
            print(f"not ok - {os.path.basename(sys.argv[0])}: {e}")
            return 1
        print(f"# {os.path.basename(sys.argv[0])}: {args.nprocs} ranks "
              f"({args.init}://) passed in {time.monotonic() - t0:.1f} s")
    return 0


class Checks:
    """Counts checks; rank 0 prints one line per named group."""

    def __init__(self, rank):
        self.rank = rank
        self.n = 0

    def ok(self, cond, what):
        self.n += 1
        if not cond:
            raise AssertionError(f"rank {self.rank}: {what}")

    def equal(self, got, want, what, atol=0.0, rtol=0.0):
        self.n += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            raise AssertionError(f"rank {self.rank}: {what}: got {got.dtype}"
                                 f"{list(got.shape)}, want {want.dtype}"
                                 f"{list(want.shape)}")
        if atol == 0.0 and rtol == 0.0:
            good = torch.equal(got, want)
        else:
            good = torch.allclose(got.double(), want.double(), atol=atol,
                                  rtol=rtol)
        if not good:
            raise AssertionError(f"rank {self.rank}: {what}:\n got  {got}\n"
                                 f" want {want}")

    def say(self, line):
        if self.rank == 0:
            print(f"ok - {line}", flush=True)
