#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Every operation of the mlap2p backend, every dtype, against Gloo where
Gloo has the operation and dtype, and against a reference computed from
every rank's input (each rank can make them all) everywhere.

Inputs are small integers in every dtype, so sums, products, minima and
maxima are exact in any order and results compare exactly; AVG and
PREMUL_SUM use factors 1/2, 1/4 and 1/2, exact as well.

    /usr/bin/python3 python/tests/torch_ops.py --nprocs 2|4 [--init tcp|file|env]
"""

import datetime
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import common  # noqa: E402
import mlap2p_torch  # noqa: E402

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
# What Gloo takes in torch 1.13 (no bf16, no bool).
GLOO_DTYPES = {torch.float32, torch.float64, torch.float16, torch.int8,
               torch.uint8, torch.int32, torch.int64}


def data(dtype, shape, rank, salt):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    lo = 0 if dtype == torch.uint8 else -3
    x = torch.randint(lo, 4, shape, generator=g)
    if dtype in FLOATS:  # keep products exact and away from 0
        x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype)


def reference(op, xs, dtype, n):
    s = torch.stack(xs)
    if dtype == torch.bool:
        if op in (R.SUM, R.MAX, R.BOR):
            return s.any(0)
        return s.all(0)
    # Small integers: exact in float64 and int64 (no overflow at 4 ranks).
    wide = torch.float64 if dtype in FLOATS else torch.int64
    if op == R.SUM:
        return s.to(wide).sum(0).to(dtype)
    if op == R.PRODUCT:
        return s.to(wide).prod(0).to(dtype)
    if op == R.MIN:
        return s.amin(0)
    if op == R.MAX:
        return s.amax(0)
    if op == R.AVG:
        if dtype in FLOATS:
            return (s.double() / n).sum(0).to(dtype)
        return torch.div(s.sum(0, dtype=torch.int64), n,
                         rounding_mode="trunc").to(dtype)
    raise ValueError(op)


def ops_for(dtype):
    if dtype == torch.bool:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR]
    return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG]


def noncontig(x):
    """x as a non-contiguous view (every other column of a wider tensor)."""
    wide = torch.zeros(x.shape[0], 2 * x.shape[1], dtype=x.dtype)
    v = wide[:, ::2]
    v.copy_(x)
    assert not v.is_contiguous()
    return wide, v


def test_allreduce(c, rank, n, gloo):
    for dt in DTYPES:
        for op in ops_for(dt):
            xs = [data(dt, (3, 5), r, 1) for r in range(n)]
            want = reference(op, xs, dt, n)
            t = xs[rank].clone()
            dist.all_reduce(t, op=op)
            c.equal(t, want, f"all_reduce {dt} {op}")
            # Asynchronous, non-contiguous: the view gets the result and
            # the columns between stay 0.
            wide, v = noncontig(xs[rank])
            w = dist.all_reduce(v, op=op, async_op=True)
            w.wait()
            c.ok(w.is_completed(), "work completed")
            c.equal(v, want, f"all_reduce non-contiguous {dt} {op}")
            c.ok(not wide[:, 1::2].bool().any(), "columns beside the view")
            if gloo is not None and dt in GLOO_DTYPES and op in (R.SUM, R.MAX):
                g = xs[rank].clone()
                dist.all_reduce(g, op=op, group=gloo)
                c.equal(t, g, f"all_reduce {dt} {op} vs Gloo")
    # Scalars, empty tensors and a large one (several chunks).
    t = torch.tensor(float(rank + 1))
    dist.all_reduce(t)
    c.equal(t, torch.tensor(float(n * (n + 1) // 2)), "all_reduce 0-d")
    t = torch.empty(0)
    dist.all_reduce(t)
    c.ok(t.numel() == 0, "all_reduce empty")
    big = torch.full((3 << 20,), float(rank + 1))
    dist.all_reduce(big)
    c.equal(big, torch.full((3 << 20,), float(n * (n + 1) // 2)),
            "all_reduce 12 MiB")
    if hasattr(dist, "_make_nccl_premul_sum"):
        for dt in [d for d in DTYPES if d in FLOATS]:
            xs = [data(dt, (7,), r, 2) for r in range(n)]
            t = xs[rank].clone()
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
            want = (torch.stack(xs).double() * 0.5).sum(0).to(dt)
            c.equal(t, want, f"all_reduce PREMUL_SUM(0.5) {dt}")
        c.say("all_reduce: PREMUL_SUM")
    c.say(f"all_reduce: {len(DTYPES)} dtypes x every op, contiguous and not,"
          " vs reference and Gloo")


def test_coalesced(c, rank, n, gloo):
    for dt in [torch.float32, torch.int64, torch.bfloat16]:
        shapes = [(4,), (2, 3), (1,), (5, 1)]
        xs = [[data(dt, s, r, 3 + i) for i, s in enumerate(shapes)]
              for r in range(n)]
        ts = [x.clone() for x in xs[rank]]
        dist.all_reduce_coalesced(ts)
        for i in range(len(shapes)):
            c.equal(ts[i], reference(R.SUM, [xs[r][i] for r in range(n)], dt,
                                     n), f"all_reduce_coalesced {dt} [{i}]")
        if gloo is not None and dt in GLOO_DTYPES:
            gs = [x.clone() for x in xs[rank]]
            dist.all_reduce_coalesced(gs, group=gloo)
            for i in range(len(shapes)):
                c.equal(ts[i], gs[i], f"all_reduce_coalesced {dt} vs Gloo")
        # all_gather_coalesced: out[r][i] = rank r's tensor i
        outs = [[torch.empty(s, dtype=dt) for s in shapes] for _ in range(n)]
        dist.all_gather_coalesced(outs, xs[rank])
        for r in range(n):
            for i in range(len(shapes)):
                c.equal(outs[r][i], xs[r][i], f"all_gather_coalesced {dt}")
        if gloo is not None and dt in GLOO_DTYPES:
            gouts = [[torch.empty(s, dtype=dt) for s in shapes]
                     for _ in range(n)]
            dist.all_gather_coalesced(gouts, xs[rank], group=gloo)
            for r in range(n):
                for i in range(len(shapes)):
                    c.equal(outs[r][i], gouts[r][i],
                            "all_gather_coalesced vs Gloo")
    c.say("all_reduce_coalesced, all_gather_coalesced vs reference and Gloo")


def test_broadcast_reduce(c, rank, n, gloo):
    for dt in DTYPES:
        for root in sorted({0, n - 1}):
            x = data(dt, (6,), rank, 4)
            want = data(dt, (6,), root, 4)
            t = x.clone()
            dist.broadcast(t, src=root)
            c.equal(t, want, f"broadcast {dt} root {root}")
            wide, v = noncontig(x.view(2, 3))
            dist.broadcast(v, src=root)
            c.equal(v.reshape(-1), want, f"broadcast non-contiguous {dt}")
            if gloo is not None and dt in GLOO_DTYPES:
                g = x.clone()
                dist.broadcast(g, src=root, group=gloo)
                c.equal(t, g, f"broadcast {dt} vs Gloo")
            for op in ops_for(dt):
                xs = [data(dt, (5,), r, 5) for r in range(n)]
                t = xs[rank].clone()
                dist.reduce(t, dst=root, op=op)
                if rank == root:
                    c.equal(t, reference(op, xs, dt, n),
                            f"reduce {dt} {op} root {root}")
                else:  # NCCL's contract: a non-root's buffer is only read
                    c.equal(t, xs[rank], f"reduce {dt} non-root unchanged")
                if (gloo is not None and dt in GLOO_DTYPES and op == R.SUM
                        and rank == root):
                    g = xs[rank].clone()
                    dist.reduce(g, dst=root, op=op, group=gloo)
                    c.equal(t, g, f"reduce {dt} vs Gloo")
                elif gloo is not None and dt in GLOO_DTYPES and op == R.SUM:
                    dist.reduce(xs[rank].clone(), dst=root, op=op, group=gloo)
    c.say("broadcast, reduce: every dtype, roots 0 and n-1, vs reference"
          " and Gloo")


def test_gather_scatter(c, rank, n, gloo):
    for dt in DTYPES:
        xs = [data(dt, (2, 3), r, 6) for r in range(n)]
        outs = [torch.empty(2, 3, dtype=dt) for _ in range(n)]
        dist.all_gather(outs, xs[rank])
        for r in range(n):
            c.equal(outs[r], xs[r], f"all_gather {dt} [{r}]")
        # non-contiguous outputs
        views = [noncontig(torch.zeros(2, 3, dtype=dt))[1] for _ in range(n)]
        dist.all_gather(views, xs[rank])
        for r in range(n):
            c.equal(views[r], xs[r], f"all_gather non-contiguous {dt}")
        if gloo is not None and dt in GLOO_DTYPES:
            gouts = [torch.empty(2, 3, dtype=dt) for _ in range(n)]
            dist.all_gather(gouts, xs[rank], group=gloo)
            for r in range(n):
                c.equal(outs[r], gouts[r], f"all_gather {dt} vs Gloo")
        out = torch.empty(n * 2, 3, dtype=dt)
        dist._all_gather_base(out, xs[rank])
        c.equal(out, torch.cat(xs), f"_all_gather_base {dt}")
        # in place: the input is this rank's slice of the output
        out = torch.zeros(n * 2, 3, dtype=dt)
        out[2 * rank:2 * rank + 2].copy_(xs[rank])
        dist._all_gather_base(out, out[2 * rank:2 * rank + 2])
        c.equal(out, torch.cat(xs), f"_all_gather_base in place {dt}")

        ops = [R.SUM, R.MAX] + ([R.AVG] if dt != torch.bool else [])
        for op in ops:
            ins = [[data(dt, (4,), r, 7 + j) for j in range(n)]
                   for r in range(n)]
            out = torch.empty(4, dtype=dt)
            dist.reduce_scatter(out, ins[rank], op=op)
            want = reference(op, [ins[r][rank] for r in range(n)], dt, n)
            c.equal(out, want, f"reduce_scatter {dt} {op}")
            flat = torch.cat(ins[rank])
            out = torch.empty(4, dtype=dt)
            dist._reduce_scatter_base(out, flat, op=op)
            c.equal(out, want, f"_reduce_scatter_base {dt} {op}")
            wide, v = noncontig(torch.zeros(2, 2, dtype=dt))
            dist._reduce_scatter_base(v, flat, op=op)
            c.equal(v.reshape(-1), want,
                    f"_reduce_scatter_base non-contiguous {dt}")
    c.say("all_gather, _all_gather_base (+in place), reduce_scatter,"
          " _reduce_scatter_base: every dtype vs reference and Gloo")


def test_alltoall(c, rank, n, gloo):
    for dt in DTYPES:
        # all_to_all_single, equal splits
        xs = [data(dt, (n * 3, 2), r, 20) for r in range(n)]
        out = torch.empty(n * 3, 2, dtype=dt)
        dist.all_to_all_single(out, xs[rank])
        want = torch.cat([xs[r][3 * rank:3 * rank + 3] for r in range(n)])
        c.equal(out, want, f"all_to_all_single {dt}")
        if gloo is not None and dt in GLOO_DTYPES:
            g = torch.empty(n * 3, 2, dtype=dt)
            dist.all_to_all_single(g, xs[rank], group=gloo)
            c.equal(out, g, f"all_to_all_single {dt} vs Gloo")
        # with split sizes: rank r sends (r + p) % 3 rows to rank p
        send = [[(r + p) % 3 for p in range(n)] for r in range(n)]
        ys = [data(dt, (sum(send[r]), 2), r, 21) for r in range(n)]
        recv = [send[p][rank] for p in range(n)]
        out = torch.empty(sum(recv), 2, dtype=dt)
        dist.all_to_all_single(out, ys[rank], recv, send[rank])
        pieces = []
        for p in range(n):
            off = sum(send[p][:rank])
            pieces.append(ys[p][off:off + send[p][rank]])
        want = torch.cat(pieces)
        c.equal(out, want, f"all_to_all_single splits {dt}")
        if gloo is not None and dt in GLOO_DTYPES:
            g = torch.empty(sum(recv), 2, dtype=dt)
            dist.all_to_all_single(g, ys[rank], recv, send[rank], group=gloo)
            c.equal(out, g, f"all_to_all_single splits {dt} vs Gloo")
        # list all_to_all (Gloo has none): sizes differ per pair
        ins = [data(dt, (rank + p + 1,), 30 + rank, p) for p in range(n)]
        outs = [torch.empty(p + rank + 1, dtype=dt) for p in range(n)]
        dist.all_to_all(outs, ins)
        for p in range(n):
            c.equal(outs[p], data(dt, (p + rank + 1,), 30 + p, rank),
                    f"all_to_all {dt} from {p}")
    c.say("all_to_all_single (equal and split sizes) vs Gloo, all_to_all"
          " vs reference: every dtype")


def test_p2p_barrier(c, rank, n, gloo):
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    for dt in DTYPES:
        x = data(dt, (9,), rank, 40)
        got = torch.empty(9, dtype=dt)
        if rank % 2 == 0:
            dist.send(x, nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(x, nxt)
        c.equal(got, data(dt, (9,), prv, 40), f"send/recv {dt}")
    # isend/irecv with Work objects, large (SIMPLE) messages
    x = torch.arange(1 << 20, dtype=torch.float32) + rank
    got = torch.empty(1 << 20)
    if rank % 2 == 0:
        w1 = dist.isend(x, nxt)
        w1.wait()
        w2 = dist.irecv(got, prv)
        w2.wait()
    else:
        w2 = dist.irecv(got, prv)
        w2.wait()
        w1 = dist.isend(x, nxt)
        w1.wait()
    c.equal(got, torch.arange(1 << 20, dtype=torch.float32) + prv,
            "isend/irecv 4 MiB")
    # Every rank posts its receives before its sends, and waits only at
    # the end: the p2p engine progresses them together (on one stream the
    # first receive held the sends back until the timeout).  Both
    # neighbours, 3 messages each way from 4 B to 4 MiB, one receive into
    # a non-contiguous tensor.
    sizes = (1, 10000, 1 << 20)
    outs = [torch.arange(k, dtype=torch.float32) * (rank + 1) + j
            for j, k in enumerate(sizes)]
    ins_prv = [torch.empty(k) for k in sizes]
    ins_nxt = [torch.empty(k) for k in sizes]
    strided = torch.zeros(2 * sizes[1])
    ins_prv[1] = strided[::2]
    ws = [dist.irecv(t, prv) for t in ins_prv]
    ws += [dist.irecv(t, nxt) for t in ins_nxt]
    ws += [dist.isend(t, nxt) for t in outs]
    ws += [dist.isend(t, prv) for t in outs]
    for w in ws:
        w.wait()
    for j, k in enumerate(sizes):
        c.equal(ins_prv[j], torch.arange(k, dtype=torch.float32) *
                (prv + 1) + j, f"irecv before isend, {k * 4} B from prev")
        c.equal(ins_nxt[j], torch.arange(k, dtype=torch.float32) *
                (nxt + 1) + j, f"irecv before isend, {k * 4} B from next")
    c.equal(strided[1::2], torch.zeros(sizes[1]),
            "irecv into a strided view left the gaps alone")
    # The same exchange, waited for by three threads at once, each from
    # the end of its share: every waiter drives the engine in turn.
    ins_prv = [torch.empty(k) for k in sizes]
    ins_nxt = [torch.empty(k) for k in sizes]
    ws = [dist.irecv(t, prv) for t in ins_prv]
    ws += [dist.irecv(t, nxt) for t in ins_nxt]
    ws += [dist.isend(t, nxt) for t in outs]
    ws += [dist.isend(t, prv) for t in outs]
    errs = []

    def waiter(share):
        try:
            for w in reversed(share):
                w.wait()
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(repr(e))
    th = [threading.Thread(target=waiter, args=(ws[i::3],)) for i in range(3)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    c.ok(not errs, f"threaded waits raised nothing: {errs}")
    c.ok(all(w.is_completed() for w in ws), "threaded waits: all completed")
    for j, k in enumerate(sizes):
        c.equal(ins_prv[j], torch.arange(k, dtype=torch.float32) *
                (prv + 1) + j, f"threaded waits, {k * 4} B from prev")
        c.equal(ins_nxt[j], torch.arange(k, dtype=torch.float32) *
                (nxt + 1) + j, f"threaded waits, {k * 4} B from next")
    # With 4 ranks or more, the first message with the rank opposite is
    # posted while a 4 MiB exchange with the neighbours is in flight: the
    # engine connects the new pair once that has drained.
    if n >= 4:
        far_to, far_from = (rank + 2) % n, (rank - 2) % n
        big = torch.arange(1 << 20, dtype=torch.float32) + rank
        got_big = torch.empty(1 << 20)
        small = torch.tensor([rank * 10.0, 1.0])
        got_small = torch.empty(2)
        ws = [dist.irecv(got_big, prv), dist.isend(big, nxt),
              dist.isend(small, far_to), dist.irecv(got_small, far_from)]
        for w in ws:
            w.wait()
        c.equal(got_big, torch.arange(1 << 20, dtype=torch.float32) + prv,
                "4 MiB in flight while a new pair connects")
        c.equal(got_small, torch.tensor([far_from * 10.0, 1.0]),
                "first message with the rank opposite")
    # A batch on one side meets plain isend/irecv on the other.
    if rank % 2 == 0 or n % 2:
        reqs = dist.batch_isend_irecv(
            [dist.P2POp(dist.irecv, ins_prv[2], prv),
             dist.P2POp(dist.isend, outs[2], nxt)])
    else:
        reqs = [dist.isend(outs[2], nxt), dist.irecv(ins_prv[2], prv)]
    for w in reqs:
        w.wait()
    c.equal(ins_prv[2], torch.arange(sizes[2], dtype=torch.float32) *
            (prv + 1) + 2, "batch_isend_irecv meets isend/irecv")
    # batch_isend_irecv: one group, so every rank may list its send first
    # (each of them used to run alone, and a send of a SIMPLE message
    # waits for its receive: every rank waited in its send until the
    # timeout).  40 KB and 4 MiB, both neighbours, receives in between.
    for count in (10000, 1 << 20):
        ys = [torch.arange(count, dtype=torch.float32) * (rank + 1) + k
              for k in range(2)]
        gots = [torch.empty(count) for _ in range(2)]
        ops = [dist.P2POp(dist.isend, ys[0], nxt),
               dist.P2POp(dist.irecv, gots[0], prv),
               dist.P2POp(dist.isend, ys[1], prv),
               dist.P2POp(dist.irecv, gots[1], nxt)]
        reqs = dist.batch_isend_irecv(ops)
        c.ok(len(reqs) == 4, f"batch_isend_irecv: {len(reqs)} requests")
        for r in reqs:
            r.wait()
        c.equal(gots[0], torch.arange(count, dtype=torch.float32) *
                (prv + 1), f"batch_isend_irecv {count * 4} B from prev")
        c.equal(gots[1], torch.arange(count, dtype=torch.float32) *
                (nxt + 1) + 1, f"batch_isend_irecv {count * 4} B from next")
    # barrier: nobody leaves before the late rank has entered it.  The
    # ranks share one host's clock, so each compares the time it left with
    # the time rank n-1 entered (a start timed on each rank would depend on
    # how far apart the ranks came out of the previous step).
    if rank == n - 1:
        time.sleep(0.3)
    entered = time.time()
    dist.barrier()
    left = time.time()
    late = torch.tensor([entered], dtype=torch.float64)
    dist.broadcast(late, n - 1)
    c.ok(left >= late.item(), "barrier waited for the late rank")
    c.say("send/recv every dtype, isend/irecv (receives posted first too,"
          " waited for by 3 threads), batch_isend_irecv (and beside isend/irecv), barrier")


def test_groups(c, rank, n, gloo):
    # A group of the even ranks, and one of a single rank.
    evens = list(range(0, n, 2))
    ge = dist.new_group(evens)
    g1 = dist.new_group([n - 1])
    if rank in evens:
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=ge)
        c.equal(t, torch.tensor([float(sum(r + 1 for r in evens))]),
                "all_reduce in new_group(evens)")
        c.ok(dist.get_rank(ge) == evens.index(rank), "group rank")
    if rank == n - 1:
        t = torch.tensor([5.0])
        dist.all_reduce(t, group=g1)
        c.equal(t, torch.tensor([5.0]), "all_reduce in a 1-rank group")
    # A reversed group: ranks renumbered.
    rev = list(reversed(range(n)))
    gr = dist.new_group(rev)
    out = [torch.empty(1) for _ in range(n)]
    dist.all_gather(out, torch.tensor([float(rank)]), group=gr)
    c.equal(torch.cat(out), torch.tensor([float(r) for r in range(n)]),
            "all_gather in new_group(all ranks)")
    # The world still works after the splits.
    t = torch.ones(3)
    dist.all_reduce(t)
    c.equal(t, torch.full((3,), float(n)), "world after new_group")
    c.say("new_group: even ranks, one rank, all ranks (split)")


def self_split(rank, n):
    """2n elements, 3 of them to this rank itself, 1 to the next."""
    s = [2] * n
    s[rank], s[(rank + 1) % n] = 3, 1
    return s


def test_errors(c, rank, n, gloo):
    for bad, what in [
        (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int16)),
         "unsupported dtype"),
        (lambda: dist.all_reduce(torch.zeros(2), op=R.BAND), "BAND/BOR"),
        (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int32),
                                 op=R.BXOR), "is not supported"),
        (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.bool),
                                 op=R.AVG), "AVG is not defined on bool"),
        (lambda: dist._all_gather_base(torch.zeros(3), torch.zeros(2)),
         "_allgather_base: output has 3"),
        # Used to fail inside the operation and abort the communicator.
        (lambda: dist.all_to_all_single(*(2 * [torch.zeros(2 * n)])),
         "input and output share storage"),
        (lambda: dist.all_to_all_single(
            torch.zeros(2 * n), torch.zeros(2 * n), self_split(rank, n),
            [2] * n), "sends itself 2 elements but expects 3"),
    ]:
        try:
            bad()
        except RuntimeError as e:
            c.ok(what in str(e), f"error text: want '{what}' in '{e}'")
        else:
            raise AssertionError(f"rank {rank}: no error for {what}")
    # The group still works after argument errors (they never reach it).
    t = torch.ones(1)
    dist.all_reduce(t)
    c.equal(t, torch.full((1,), float(n)), "all_reduce after errors")
    c.say("argument errors raise before any rank communicates")


def main(rank, n, args):
    c = common.Checks(rank)
    pg = dist.group.WORLD
    c.ok(isinstance(pg, mlap2p_torch.ProcessGroupMlap2p), "world is mlap2p")
    c.ok(str(dist.get_backend()).lower() == "mlap2p", f"backend {dist.get_backend()}")
    gloo = dist.new_group(backend="gloo",
                          timeout=datetime.timedelta(seconds=args.timeout))
    for t in [test_allreduce, test_coalesced, test_broadcast_reduce,
              test_gather_scatter, test_alltoall, test_p2p_barrier,
              test_groups, test_errors]:
        t(c, rank, n, gloo)
    dist.barrier()
    if rank == 0:
        print(f"# {c.n} checks on rank 0; {pg.describe()}")


if __name__ == "__main__":
    sys.exit(common.run(main, common.parse(__doc__)))
