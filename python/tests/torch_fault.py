#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What goes wrong says so, within the timeout, naming the rank.

  kill      DDP training; the last rank is SIGKILLed at step 20; every other
            rank's next step raises RuntimeError naming that rank, well
            within the group's timeout (libmlap2p sees the dead pid within
            MLAP2P_PEER_TIMEOUT).
  timeout   rank 0 all-reduces, rank 1 never does: work.wait(timeout=1 s)
            raises after about 1 s, naming the operation, and later calls
            fail at once with the same reason.
  mismatch  rank 0 all-reduces 10 floats, rank 1 20: both raise, naming
            the other rank, instead of hanging.
  p2pkill   rank 1 answers rank 0's first irecv, then is SIGKILLed while
            rank 0 waits in its second: that wait raises, naming rank 1,
            well within the timeout.
  p2ptimeout  rank 0 irecvs from rank 1, which never sends (so the pair
            never connects): wait(timeout=1 s) raises after about 1 s, and
            the next isend fails at once with the same reason.

    /usr/bin/python3 python/tests/torch_fault.py [--nprocs 2] [--case kill]
"""

import argparse
import datetime
import multiprocessing
import os
import signal
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import mlap2p_torch  # noqa: F401

TIMEOUT = 30.0  # the group's timeout, seconds


def init(rank, n, port):
    torch.set_num_threads(1)
    os.environ.setdefault("MLAP2P_CORE", str(rank))
    dist.init_process_group("mlap2p", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=TIMEOUT))


def case_kill(rank, n, q):
    victim = n - 1
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(),
                              nn.Linear(256, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    last = time.monotonic()
    for step in range(10000):
        if rank == victim and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            opt.zero_grad()
            model(torch.randn(4, 32)).sum().backward()
            opt.step()
        except RuntimeError as e:
            q.put((rank, "raised", time.monotonic() - last, str(e), step))
            return
        last = time.monotonic()
    q.put((rank, "no error", 0.0, "", step))


def timed_out(rank, q, start, again):
    """Rank 0 waits 1 s on what start() posts, which nobody answers
    (the others idle); then again(), on the aborted group, must fail at
    once."""
    if rank != 0:
        time.sleep(4)
        q.put((rank, "idle", 0.0, "", 0))
        return
    w = start()
    t0 = time.monotonic()
    try:
        w.wait(timeout=datetime.timedelta(seconds=1))
    except RuntimeError as e:
        took = time.monotonic() - t0
        try:
            t1 = time.monotonic()
            again()
            after = "no error"
        except RuntimeError as e2:
            after = f"{time.monotonic() - t1:.3f}s {e2}"
        q.put((rank, "raised", took, str(e) + "\n" + after, 0))
        return
    q.put((rank, "no error", 0.0, "", 0))


def case_timeout(rank, n, q):
    # 1 MiB: above MLAP2P_TORCH_INLINE_BYTES, so the call returns at once
    # and runs on the group's stream.
    timed_out(rank, q,
              lambda: dist.all_reduce(torch.ones(1 << 18), async_op=True),
              lambda: dist.all_reduce(torch.ones(1)))


def case_mismatch(rank, n, q):
    t = torch.ones(10 if rank == 0 else 20)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        q.put((rank, "raised", time.monotonic() - t0, str(e), 0))
        return
    q.put((rank, "no error", 0.0, "", 0))


def case_p2pkill(rank, n, q):
    t = torch.empty(1 << 18)
    if rank == 1:
        dist.send(torch.ones(1 << 18), 0)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    dist.recv(t, 1)
    w = dist.irecv(t, 1)
    t0 = time.monotonic()
    try:
        w.wait()
    except RuntimeError as e:
        q.put((rank, "raised", time.monotonic() - t0, str(e), 0))
        return
    q.put((rank, "no error", 0.0, "", 0))


def case_p2ptimeout(rank, n, q):
    timed_out(rank, q, lambda: dist.irecv(torch.empty(8), 1),
              lambda: dist.isend(torch.ones(8), 1).wait())


CASES = {"kill": case_kill, "timeout": case_timeout,
         "mismatch": case_mismatch, "p2pkill": case_p2pkill,
         "p2ptimeout": case_p2ptimeout}


def entry(case, rank, n, port, q):
    try:
        init(rank, n, port)
        CASES[case](rank, n, q)
    except BaseException:
        q.put((rank, "crashed", 0.0, traceback.format_exc(), 0))
    sys.stdout.flush()
    q.close()
    q.join_thread()  # the result must leave before os._exit
    os._exit(0)  # no teardown handshake with a dead or aborted peer


def run(case, n):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ps = [ctx.Process(target=entry, args=(case, r, n, port, q))
          for r in range(n)]
    for p in ps:
        p.start()
    killed = case in ("kill", "p2pkill")
    want = n - 1 if killed else n
    res = {}
    deadline = time.monotonic() + TIMEOUT + 60
    while len(res) < want and time.monotonic() < deadline:
        try:
            r = q.get(timeout=1)
            res[r[0]] = r
        except Exception:
            pass
    for p in ps:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    bad = []
    for r in range(n):
        if killed and r == n - 1:
            if ps[r].exitcode != -signal.SIGKILL:
                bad.append(f"rank {r} exit {ps[r].exitcode}, not SIGKILL")
            continue
        if case in ("timeout", "p2ptimeout") and r != 0:
            continue
        if r not in res:
            bad.append(f"rank {r}: no result (hung?)")
            continue
        _, what, took, msg, step = res[r]
        print(f"# {case}: rank {r} {what} after {took:.2f} s: "
              f"{msg.strip().splitlines()[0] if msg.strip() else ''}")
        if what != "raised":
            bad.append(f"rank {r}: {what}\n{msg}")
            continue
        if killed:
            if f"rank {n - 1}" not in msg or took > TIMEOUT:
                bad.append(f"rank {r}: took {took:.1f}s or does not name "
                           f"rank {n - 1}: {msg}")
        elif case in ("timeout", "p2ptimeout"):
            first, again = msg.split("\n", 1)
            if not (0.9 <= took <= 5.0) or "did not complete within 1000 ms" \
                    not in first or "did not complete" not in again:
                bad.append(f"rank 0: timeout took {took:.2f}s: {msg}")
            print(f"# timeout: the next call: {again.splitlines()[0]}")
        elif case == "mismatch":
            other = 1 - r
            if f"rank {other}" not in msg or took > TIMEOUT:
                bad.append(f"rank {r}: took {took:.1f}s or does not name "
                           f"rank {other}: {msg}")
    if bad:
        print(f"not ok - fault {case}:\n  " + "\n  ".join(bad))
        return 1
    print(f"ok - fault {case}: {n} ranks")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--case", choices=sorted(CASES), action="append")
    a = ap.parse_args()
    rc = 0
    for c in a.case or sorted(CASES):
        rc |= run(c, 2 if c != "kill" else a.nprocs)
    sys.exit(rc)
